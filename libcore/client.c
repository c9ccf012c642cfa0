/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The network client: one session per blockd, one I/O thread per client.
 *
 * The I/O thread is a plain epoll loop rather than libevent: it watches
 * one socket per device, an eventfd that submitters poke, and computes
 * its own timeouts from three sorted sources (the oldest outstanding
 * request of each connection, connect deadlines, deferred work).  That is
 * all the event machinery a client needs, and owning it keeps the
 * locking rules visible here: libevent's bufferevents would add a lock
 * per buffer and callbacks we do not control on the path every request
 * takes.  Framing and sockets are in transport.c.
 *
 * Submitting from any thread: the submitter encodes its frame into a
 * private chunk (no lock held), then under the connection's lock inserts
 * the request in the connection's table and links the chunk to the output
 * queue, and pokes the eventfd only when the queue was empty.  That lock
 * is per device and held for a few pointer updates, never across I/O, so
 * an operation thread never waits for the network while holding it; the
 * I/O thread takes the whole queue and sends it with one writev, which is
 * how concurrent requests batch.
 *
 * Completions, GRANTs and REVOKEs run on the I/O thread.  Requests are
 * removed from the tables only by the I/O thread, so a request it found
 * stays valid while its completion runs without a lock.  Every completion
 * that starts on another thread (a write set whose last step was a
 * submission failure) is deferred to the I/O thread, so callers can rely
 * on "completions run on the I/O thread".
 *
 * Failure policy:
 *  - A request is failed with -ETIMEDOUT after request_timeout_ms.  All
 *    requests share that timeout, so a connection's outstanding list in
 *    submission order is also in deadline order and only its head is
 *    looked at.
 *  - When a connection breaks, all its outstanding requests fail with
 *    -ENOTCONN, ops->session_reset(device, false) says so, and the I/O
 *    thread reconnects in the background with exponential backoff (50 ms
 *    to 2 s).  A reconnect says NGNFS_HELLO_RECLAIM; when the server's
 *    instance changed, session_reset(device, true) follows the new HELLO.
 *  - While a device has no session, requests to it fail at once with
 *    -ENOTCONN instead of waiting: the caller (the cache, a transaction)
 *    knows better whether to wait and for how long, and nothing hangs.
 *  - The only request the client retries by itself is a multi-device
 *    set's COMMIT (idempotent at the primary), for up to commit_retry_ms
 *    (the cache passes its reclaim timeout; else the request timeout, or
 *    30 s when that is 0), because giving up there leaves the set's
 *    outcome unknown to the caller.
 *
 * A set on one device is one WRITE SINGLE of up to NGNFS_WRITE_MAX_FRAMES
 * frames, queued as one group under the connection's lock (submit_group)
 * so that they reach blockd back to back on one session: blockd holds all
 * but the last and applies them in one batch, so a broken session leaves
 * the same doubt as for one frame.  A larger one is staged like a set of
 * one participant.
 *
 * Multi-device sets follow docs/protocol.md: STAGE to every participant
 * (primary first in the participant list, frames of at most
 * NGNFS_MSG_MAX_BLOCKS blocks), COMMIT to the primary once every STAGE is
 * acknowledged, then RESOLVE(COMMITTED) to the others (replies only
 * logged).  After a failed STAGE the client sends RESOLVE(ABORTED) to
 * every participant; after a COMMIT was sent it never aborts (only
 * -ESTALE from the primary, which means "recorded ABORTED", lets it tell
 * the others).  Versions come from the STAGE replies (the versions the
 * blocks will have) and from the COMMIT reply for the primary.
 * Release-after-write of a multi-device set is an explicit RELEASE per
 * device after the commit, because staged blocks stay pinned to the set.
 *
 * When the fs id is learned (configured all zero), create compares every
 * device with the first formatted one, so the message names the odd
 * device whatever order the HELLO replies came in; later HELLOs carry the
 * learned id and the server refuses a device of another filesystem.
 *
 * A stalled process (stopped, swapped out, starved) must not trust its
 * grants when it runs again before it has read what the servers sent
 * meanwhile: a server closes the session of a holder that leaves a REVOKE
 * unanswered for its revoke timeout (a minute by default) and gives the
 * block to somebody else, and the REVOKE and the close then sit unread in
 * our socket.  So the I/O thread wakes at least every
 * CLIENT_IO_IDLE_WAKE_MS and stamps each finished pass
 * (io_pass_ns); a transaction that finds the last pass older than
 * CLIENT_IO_CURRENT_MS first waits for a pass that began after it
 * (ngnfs_client_wait_io_pass).  That pass reads what arrived during the
 * stall, so the session reset or revocation is applied before the
 * transaction looks at a cached block.
 *
 * XXX:
 *  - Addresses are resolved once, at create (getaddrinfo, blocking).
 *  - A GRANT that arrives after its GET timed out is only logged; the
 *    server still counts the grant until its next REVOKE is answered.
 *  - No counters exported yet besides the transport's byte counts.
 *  - Output queues are unbounded (see transport.c).
 *  - RELEASEs are not coalesced into one frame per device; they do share
 *    writev calls with everything else queued.
 *  - create fails if any device cannot be reached at once; a client that
 *    should start with a device down would need a flag for that.
 */

#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "client.h"
#include "transport.h"

#define REQUEST_BUCKETS		   1024
#define BACKOFF_MIN_MS		   50
#define BACKOFF_MAX_MS		   2000
#define COMMIT_RETRY_INTERVAL_MS   100
#define COMMIT_RETRY_DEFAULT_MS	   30000
#define DEFAULT_CONNECT_TIMEOUT_MS 5000
#define DEFAULT_REQUEST_TIMEOUT_MS 30000
#define EPOLL_EVENTS		   64
#define CLIENT_IO_IDLE_WAKE_MS	   200
#define CLIENT_IO_CURRENT_MS	   500 /* well below blockd's least revoke timeout, 1 s */
#define CLIENT_IO_PASS_WAIT_MS	   5000

struct ngnfs_client;
struct request;

/*
 * Called on the I/O thread for every reply to the request (msg set,
 * status is msg->status) or once when it fails without a reply (msg NULL).
 */
typedef void (*request_fn)(struct ngnfs_client *client, struct request *request, int status,
			   const struct ngnfs_msg *msg);

struct request {
	struct request *hash_next;
	struct request *prev;
	struct request *next;
	uint64_t id;
	uint64_t deadline_ns; /* 0: none */
	uint16_t device;
	uint8_t reply_type;
	uint32_t replies_left; /* GET: one GRANT per block */
	request_fn fn;
	void *arg;
};

enum connection_state {
	CONNECTION_DOWN,
	CONNECTION_CONNECTING,
	CONNECTION_HELLO,
	CONNECTION_UP,
};

struct connection {
	struct ngnfs_client *client;
	uint16_t device;
	char *address;
	struct sockaddr_storage sockaddr;
	socklen_t sockaddr_length;

	/* guards state, the request table and the transport's queue */
	pthread_mutex_t lock;
	enum connection_state state;
	struct ngnfs_transport transport;
	struct request *buckets[REQUEST_BUCKETS];
	struct request list; /* sentinel; outstanding in submission order */
	uint32_t timed_requests;
	struct ngnfs_msg hello_reply;
	bool hello_valid;
	uint64_t lost_at_ns; /* when the last session was lost; 0 while up */

	/* I/O thread only */
	uint32_t epoll_events;
	uint64_t connect_deadline_ns;
	uint64_t retry_at_ns;
	uint32_t backoff_ms;
	bool had_session;
	uint64_t server_instance;
	int close_error; /* set while dispatching: close once it returns */
	char close_reason[256];
	int last_logged_error;
	bool first_attempt_done; /* with first_error: written under client->start_lock */
	int first_error;
};

struct deferred {
	struct deferred *next;
	uint64_t run_at_ns;
	void (*fn)(struct ngnfs_client *client, void *arg);
	void *arg;
};

struct ngnfs_client {
	uint16_t device_count;
	uint64_t client_id;
	uint32_t hello_flags;
	uint32_t connect_timeout_ms;
	uint32_t request_timeout_ms;
	uint32_t commit_retry_ms;
	struct ngnfs_client_ops ops;
	void *owner;

	pthread_mutex_t fs_id_lock;
	uint8_t fs_id[NGNFS_FS_ID_SIZE]; /* configured or learned; zero: not yet known */

	struct connection *connections;
	atomic_uint_fast64_t next_request_id;
	atomic_uint_fast64_t next_set_counter;
	uint64_t set_id_base;

	int epoll_fd;
	int wake_fd;
	pthread_t io_thread;
	bool io_thread_started;
	bool io_flush_needed; /* I/O thread only: something was queued from a callback */
	atomic_bool stopping;
	/* when the epoll_wait of the I/O thread's last finished pass returned */
	atomic_uint_fast64_t io_pass_ns;

	pthread_mutex_t deferred_lock;
	struct deferred *deferred;

	/* create waits here for every device's first connection attempt */
	pthread_mutex_t start_lock;
	pthread_cond_t start_cond;
	uint32_t first_attempts_done;
};

static _Thread_local struct ngnfs_client *io_thread_client;

static bool on_io_thread(struct ngnfs_client *client)
{
	return io_thread_client == client;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static void client_log(const char *format, ...) __attribute__((format(printf, 1, 2)));
static void client_log(const char *format, ...)
{
	char line[1024];
	va_list args;

	va_start(args, format);
	vsnprintf(line, sizeof(line), format, args);
	va_end(args);
	fprintf(stderr, "ngnfs client: %s\n", line);
}

static bool fs_id_is_zero(const uint8_t *fs_id)
{
	for (int i = 0; i < NGNFS_FS_ID_SIZE; i++) {
		if (fs_id[i])
			return false;
	}
	return true;
}

static void format_fs_id(const uint8_t *fs_id, char *text)
{
	for (int i = 0; i < NGNFS_FS_ID_SIZE; i++)
		sprintf(text + 2 * i, "%02x", fs_id[i]);
}

static void wake(struct ngnfs_client *client)
{
	uint64_t one = 1;

	if (on_io_thread(client))
		return; /* the loop flushes and runs deferred work before it sleeps */
	if (write(client->wake_fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		client_log("cannot wake the I/O thread: %s", strerror(errno));
}

/* Run fn(arg) on the I/O thread, at or after run_at_ns (0: as soon as possible). */
static int defer(struct ngnfs_client *client, uint64_t run_at_ns,
		 void (*fn)(struct ngnfs_client *client, void *arg), void *arg)
{
	struct deferred *item = malloc(sizeof(*item));

	if (!item)
		return -ENOMEM;
	item->run_at_ns = run_at_ns;
	item->fn = fn;
	item->arg = arg;
	pthread_mutex_lock(&client->deferred_lock);
	item->next = client->deferred;
	client->deferred = item;
	pthread_mutex_unlock(&client->deferred_lock);
	wake(client);
	return 0;
}

/* ---- request table (caller holds connection->lock) ---- */

static void table_insert(struct connection *connection, struct request *request)
{
	struct request **bucket = &connection->buckets[request->id % REQUEST_BUCKETS];

	request->hash_next = *bucket;
	*bucket = request;
	request->prev = connection->list.prev;
	request->next = &connection->list;
	connection->list.prev->next = request;
	connection->list.prev = request;
	if (request->deadline_ns)
		connection->timed_requests++;
}

static void table_remove(struct connection *connection, struct request *request)
{
	struct request **link = &connection->buckets[request->id % REQUEST_BUCKETS];

	while (*link && *link != request)
		link = &(*link)->hash_next;
	if (*link)
		*link = request->hash_next;
	request->prev->next = request->next;
	request->next->prev = request->prev;
	request->prev = request->next = NULL;
	if (request->deadline_ns)
		connection->timed_requests--;
}

static struct request *table_find(struct connection *connection, uint64_t id)
{
	struct request *request = connection->buckets[id % REQUEST_BUCKETS];

	while (request && request->id != id)
		request = request->hash_next;
	return request;
}

/* ---- submission ---- */

static uint64_t next_request_id(struct ngnfs_client *client)
{
	return atomic_fetch_add(&client->next_request_id, 1);
}

static struct request *request_alloc(struct ngnfs_client *client, uint16_t device,
				     uint8_t reply_type, request_fn fn, void *arg)
{
	struct request *request = calloc(1, sizeof(*request));

	if (!request)
		return NULL;
	request->id = next_request_id(client);
	request->device = device;
	request->reply_type = reply_type;
	request->replies_left = 1;
	request->fn = fn;
	request->arg = arg;
	return request;
}

/*
 * Queue encoded frames and track their requests, all under one hold of
 * the connection's lock: they leave back to back on one session, or none
 * is queued.  Takes ownership of all of them (frees them on failure).
 * Only the I/O thread may submit on a connection that is not up yet (the
 * HELLO).
 */
static int submit_group(struct ngnfs_client *client, struct request **requests,
			struct ngnfs_out_chunk **chunks, uint32_t count, bool before_session)
{
	struct connection *connection = &client->connections[requests[0]->device];
	uint32_t timeout_ms = client->request_timeout_ms;
	bool was_empty = false;

	if (!before_session && timeout_ms) {
		uint64_t deadline_ns = now_ns() + (uint64_t)timeout_ms * 1000000ULL;

		for (uint32_t i = 0; i < count; i++)
			requests[i]->deadline_ns = deadline_ns;
	}

	pthread_mutex_lock(&connection->lock);
	if (connection->state != CONNECTION_UP && !before_session) {
		pthread_mutex_unlock(&connection->lock);
		for (uint32_t i = 0; i < count; i++) {
			ngnfs_out_chunk_free(chunks[i]);
			free(requests[i]);
		}
		return -ENOTCONN;
	}
	for (uint32_t i = 0; i < count; i++) {
		table_insert(connection, requests[i]);
		if (ngnfs_transport_queue(&connection->transport, chunks[i]))
			was_empty = true;
	}
	pthread_mutex_unlock(&connection->lock);
	if (on_io_thread(client))
		client->io_flush_needed = true;
	else if (was_empty)
		wake(client);
	return 0;
}

static int submit(struct ngnfs_client *client, struct request *request,
		  struct ngnfs_out_chunk *chunk, bool before_session)
{
	return submit_group(client, &request, &chunk, 1, before_session);
}

static int check_device(struct ngnfs_client *client, uint16_t device, const char *operation)
{
	if (device >= client->device_count) {
		client_log("%s: device %u does not exist (the client has %u devices)", operation,
			   device, client->device_count);
		return -ENODEV;
	}
	return 0;
}

/* ---- connections (I/O thread) ---- */

static void set_epoll_events(struct connection *connection, uint32_t events)
{
	struct ngnfs_client *client = connection->client;
	struct epoll_event event = { .events = events, .data.ptr = connection };
	int op;

	if (events == connection->epoll_events)
		return;
	if (!events)
		op = EPOLL_CTL_DEL;
	else if (!connection->epoll_events)
		op = EPOLL_CTL_ADD;
	else
		op = EPOLL_CTL_MOD;
	if (epoll_ctl(client->epoll_fd, op, connection->transport.fd, &event) < 0)
		client_log("device %u at %s: epoll_ctl: %s", connection->device,
			   connection->address, strerror(errno));
	connection->epoll_events = events;
}

static void first_attempt_finished(struct connection *connection, int error)
{
	struct ngnfs_client *client = connection->client;

	pthread_mutex_lock(&client->start_lock);
	if (connection->first_attempt_done) {
		pthread_mutex_unlock(&client->start_lock);
		return;
	}
	connection->first_attempt_done = true;
	connection->first_error = error;
	client->first_attempts_done++;
	pthread_cond_broadcast(&client->start_cond);
	pthread_mutex_unlock(&client->start_lock);
}

/*
 * Close the connection, fail everything outstanding on it and schedule
 * the next attempt.  reason says what went wrong, for the log.
 */
static void connection_close(struct connection *connection, int error, const char *reason)
{
	struct ngnfs_client *client = connection->client;
	struct request failed = { 0 };
	enum connection_state old_state;
	uint32_t count = 0;

	set_epoll_events(connection, 0);
	pthread_mutex_lock(&connection->lock);
	old_state = connection->state;
	connection->state = CONNECTION_DOWN;
	connection->hello_valid = false;
	/*
	 * A device never reached counts as lost since its first attempt, so
	 * that its requests turn from "try again" into errors after the
	 * cache's reclaim timeout as for a lost session.
	 */
	if (old_state == CONNECTION_UP || !connection->lost_at_ns)
		connection->lost_at_ns = now_ns();
	/* Steal the whole list; the buckets are cleared with it. */
	if (connection->list.next != &connection->list) {
		failed.next = connection->list.next;
		failed.prev = connection->list.prev;
		failed.next->prev = &failed;
		failed.prev->next = &failed;
	} else {
		failed.next = failed.prev = &failed;
	}
	connection->list.next = connection->list.prev = &connection->list;
	memset(connection->buckets, 0, sizeof(connection->buckets));
	connection->timed_requests = 0;
	ngnfs_transport_close(&connection->transport);
	pthread_mutex_unlock(&connection->lock);

	for (struct request *request = failed.next; request != &failed; count++)
		request = request->next;

	if (atomic_load(&client->stopping)) {
		/* Shutting down on purpose: nothing to report. */
	} else if (old_state == CONNECTION_UP) {
		client_log(
		    "device %u at %s: session lost: %s (%s); failing %u outstanding requests",
		    connection->device, connection->address, reason, strerror(-error), count);
		connection->last_logged_error = 0;
	} else if (error != connection->last_logged_error || !connection->first_attempt_done) {
		client_log("device %u at %s: cannot open a session: %s (%s)", connection->device,
			   connection->address, reason, strerror(-error));
		connection->last_logged_error = error;
	}

	/* The owner hears that its grants are gone before the failures arrive. */
	if (old_state == CONNECTION_UP && client->ops.session_reset &&
	    !atomic_load(&client->stopping))
		client->ops.session_reset(client->owner, connection->device, false);

	while (failed.next != &failed) {
		struct request *request = failed.next;

		failed.next = request->next;
		request->fn(client, request,
			    atomic_load(&client->stopping) ? -ESHUTDOWN : -ENOTCONN, NULL);
		free(request);
	}

	first_attempt_finished(connection, error);

	if (!connection->backoff_ms)
		connection->backoff_ms = BACKOFF_MIN_MS;
	connection->retry_at_ns = now_ns() + (uint64_t)connection->backoff_ms * 1000000ULL;
	connection->backoff_ms *= 2;
	if (connection->backoff_ms > BACKOFF_MAX_MS)
		connection->backoff_ms = BACKOFF_MAX_MS;
}

/* Ask for the connection to be closed after the current dispatch. */
static void connection_fail_later(struct connection *connection, int error, const char *format, ...)
    __attribute__((format(printf, 3, 4)));
static void connection_fail_later(struct connection *connection, int error, const char *format, ...)
{
	va_list args;

	if (connection->close_error)
		return;
	connection->close_error = error;
	va_start(args, format);
	vsnprintf(connection->close_reason, sizeof(connection->close_reason), format, args);
	va_end(args);
}

static void hello_done(struct ngnfs_client *client, struct request *request, int status,
		       const struct ngnfs_msg *msg)
{
	struct connection *connection = &client->connections[request->device];
	char expected_text[2 * NGNFS_FS_ID_SIZE + 1];
	char got_text[2 * NGNFS_FS_ID_SIZE + 1];
	bool restarted;

	if (!msg && (status == -ENOTCONN || status == -ESHUTDOWN))
		return; /* the connection is closing already */
	if (status == -ETIMEDOUT) {
		connection_fail_later(connection, status, "no HELLO reply within %u ms",
				      client->connect_timeout_ms);
		return;
	}
	if (status == -ESTALE) {
		connection_fail_later(connection, status,
				      "HELLO refused: the device belongs to another filesystem "
				      "than the one configured");
		return;
	}
	if (status == -ENODEV) {
		connection_fail_later(connection, status,
				      "HELLO refused: the device is not formatted (run mkfs)");
		return;
	}
	if (status) {
		connection_fail_later(connection, status, "HELLO refused");
		return;
	}
	if (!(msg->hello_reply.flags & NGNFS_HELLO_REPLY_FORMATTED)) {
		if (!(client->hello_flags & NGNFS_HELLO_FORMAT)) {
			connection_fail_later(connection, -ENODEV,
					      "device is not formatted (run mkfs)");
			return;
		}
	} else {
		if (msg->hello_reply.device_index != connection->device) {
			connection_fail_later(connection, -EINVAL,
					      "device reports device index %u but is configured as "
					      "device %u (check the device manifest order)",
					      msg->hello_reply.device_index, connection->device);
			return;
		}
		/*
		 * While create is still learning the fs id (all zero) the
		 * devices are compared there, against device 0, so that the
		 * odd one out is named whatever order the replies came in.
		 */
		pthread_mutex_lock(&client->fs_id_lock);
		if (!fs_id_is_zero(client->fs_id) &&
		    memcmp(client->fs_id, msg->hello_reply.fs_id, NGNFS_FS_ID_SIZE)) {
			format_fs_id(client->fs_id, expected_text);
			format_fs_id(msg->hello_reply.fs_id, got_text);
			pthread_mutex_unlock(&client->fs_id_lock);
			connection_fail_later(connection, -ESTALE,
					      "device belongs to filesystem %s, not %s like the "
					      "other devices",
					      got_text, expected_text);
			return;
		}
		pthread_mutex_unlock(&client->fs_id_lock);
	}

	restarted = connection->had_session &&
		    connection->server_instance != msg->hello_reply.server_instance;
	pthread_mutex_lock(&connection->lock);
	connection->state = CONNECTION_UP;
	connection->hello_reply = *msg;
	connection->hello_valid = true;
	connection->lost_at_ns = 0;
	pthread_mutex_unlock(&connection->lock);
	connection->backoff_ms = 0;
	connection->last_logged_error = 0;
	if (connection->had_session)
		client_log("device %u at %s: session re-established%s", connection->device,
			   connection->address,
			   restarted ? " (server restarted: grants must be reclaimed)" : "");
	connection->server_instance = msg->hello_reply.server_instance;
	first_attempt_finished(connection, 0);
	if (connection->had_session && client->ops.session_reset)
		client->ops.session_reset(client->owner, connection->device, restarted);
	connection->had_session = true;
}

static void send_hello(struct connection *connection)
{
	struct ngnfs_client *client = connection->client;
	uint8_t fs_id[NGNFS_FS_ID_SIZE];
	struct ngnfs_out_chunk *chunk;
	struct request *request;
	uint32_t flags = client->hello_flags;
	int ret;

	if (connection->had_session)
		flags |= NGNFS_HELLO_RECLAIM;
	pthread_mutex_lock(&client->fs_id_lock);
	memcpy(fs_id, client->fs_id, NGNFS_FS_ID_SIZE);
	pthread_mutex_unlock(&client->fs_id_lock);

	request =
	    request_alloc(client, connection->device, NGNFS_MSG_HELLO_REPLY, hello_done, NULL);
	chunk = ngnfs_out_chunk_alloc();
	if (!request || !chunk) {
		free(request);
		ngnfs_out_chunk_free(chunk);
		connection_close(connection, -ENOMEM, "HELLO");
		return;
	}
	ret = ngnfs_encode_hello(&chunk->buffer, request->id, fs_id, client->client_id, flags);
	if (ret) {
		free(request);
		ngnfs_out_chunk_free(chunk);
		connection_close(connection, ret, "encoding HELLO");
		return;
	}
	request->deadline_ns = connection->connect_deadline_ns;
	pthread_mutex_lock(&connection->lock);
	connection->state = CONNECTION_HELLO;
	pthread_mutex_unlock(&connection->lock);
	submit(client, request, chunk, true);
	set_epoll_events(connection, EPOLLIN);
}

static void connection_start(struct connection *connection)
{
	int ret;

	connection->close_error = 0;
	connection->connect_deadline_ns =
	    now_ns() + (uint64_t)connection->client->connect_timeout_ms * 1000000ULL;
	ret = ngnfs_transport_connect(&connection->transport,
				      (const struct sockaddr *)&connection->sockaddr,
				      connection->sockaddr_length);
	pthread_mutex_lock(&connection->lock);
	connection->state = CONNECTION_CONNECTING;
	pthread_mutex_unlock(&connection->lock);
	if (ret == 0) {
		send_hello(connection);
	} else if (ret == -EINPROGRESS) {
		set_epoll_events(connection, EPOLLOUT);
	} else {
		connection_close(connection, ret, "connect");
	}
}

/* ---- dispatch of received frames (I/O thread) ---- */

static void handle_revoke(struct ngnfs_client *client, const struct ngnfs_msg *msg)
{
	if (client->ops.revoke) {
		client->ops.revoke(client->owner, msg->revoke.blkno, msg->revoke.access);
		return;
	}
	/* Nobody caches anything: give the block up at once. */
	ngnfs_client_release(client, msg->revoke.blkno, msg->revoke.access);
}

static int handle_frame(void *arg, const uint8_t *frame, size_t length)
{
	struct connection *connection = arg;
	struct ngnfs_client *client = connection->client;
	struct request *request;
	struct ngnfs_msg msg;
	const char *why = NULL;
	bool finished = false;
	int ret;

	ret = ngnfs_msg_decode(frame, length, &msg, &why);
	if (ret) {
		connection_fail_later(connection, ret, "undecodable frame from the server: %s",
				      why ? why : "?");
		return ret;
	}

	if (msg.type == NGNFS_MSG_REVOKE) {
		handle_revoke(client, &msg);
		return connection->close_error;
	}

	pthread_mutex_lock(&connection->lock);
	request = table_find(connection, msg.request_id);
	if (request && (msg.type == request->reply_type || msg.type == NGNFS_MSG_ERROR)) {
		if (msg.type == NGNFS_MSG_ERROR || --request->replies_left == 0) {
			table_remove(connection, request);
			finished = true;
		}
	}
	pthread_mutex_unlock(&connection->lock);

	if (!request) {
		client_log("device %u at %s: %s for unknown request %" PRIu64
			   " (it timed out or failed before)",
			   connection->device, connection->address, ngnfs_msg_type_name(msg.type),
			   msg.request_id);
		return connection->close_error;
	}
	if (msg.type != request->reply_type && msg.type != NGNFS_MSG_ERROR) {
		connection_fail_later(connection, -EPROTO,
				      "server answered request %" PRIu64 " with %s, expected %s",
				      msg.request_id, ngnfs_msg_type_name(msg.type),
				      ngnfs_msg_type_name(request->reply_type));
		return -EPROTO;
	}
	if (msg.type == NGNFS_MSG_ERROR) {
		int status = msg.status ? msg.status : -EPROTO;

		client_log("device %u at %s: server refused request %" PRIu64 " (%s): %.*s",
			   connection->device, connection->address, msg.request_id,
			   strerror(-status), (int)msg.error.text_length, msg.error.text);
		request->fn(client, request, status, NULL);
	} else {
		request->fn(client, request, msg.status, &msg);
	}
	if (finished)
		free(request);
	return connection->close_error;
}

static void connection_flush(struct connection *connection)
{
	int ret;

	if (connection->transport.fd < 0 || connection->close_error)
		return;
	pthread_mutex_lock(&connection->lock);
	ngnfs_transport_take(&connection->transport);
	pthread_mutex_unlock(&connection->lock);
	if (!ngnfs_transport_sending(&connection->transport))
		return;
	ret = ngnfs_transport_flush(&connection->transport);
	if (ret == -EAGAIN) {
		set_epoll_events(connection, EPOLLIN | EPOLLOUT);
	} else if (ret) {
		connection_fail_later(connection, ret, "send");
	} else if (connection->epoll_events & EPOLLOUT) {
		set_epoll_events(connection, EPOLLIN);
	}
}

static void connection_event(struct connection *connection, uint32_t events)
{
	const char *why = NULL;
	int ret;

	if (connection->state == CONNECTION_DOWN)
		return;
	if (connection->state == CONNECTION_CONNECTING) {
		ret = ngnfs_transport_connect_result(&connection->transport);
		if (ret)
			connection_close(connection, ret, "connect");
		else
			send_hello(connection);
		return;
	}
	if (events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
		ret =
		    ngnfs_transport_receive(&connection->transport, handle_frame, connection, &why);
		if (ret && !connection->close_error) {
			if (ret == -ECONNRESET)
				connection_fail_later(connection, ret,
						      "server closed the connection");
			else if (why)
				connection_fail_later(connection, ret,
						      "bad frame from the server: %s", why);
			else
				connection_fail_later(connection, ret, "receive");
		}
	}
	if (events & EPOLLOUT)
		connection_flush(connection);
}

/* ---- I/O thread main loop ---- */

static void check_timeouts(struct ngnfs_client *client, uint64_t now)
{
	for (uint32_t d = 0; d < client->device_count; d++) {
		struct connection *connection = &client->connections[d];
		struct request expired = { 0 };

		expired.next = expired.prev = &expired;
		if (connection->state == CONNECTION_CONNECTING &&
		    now >= connection->connect_deadline_ns) {
			connection_fail_later(connection, -ETIMEDOUT,
					      "connect timed out after %u ms",
					      client->connect_timeout_ms);
			continue;
		}
		pthread_mutex_lock(&connection->lock);
		if (connection->timed_requests) {
			struct request *request = connection->list.next;

			while (request != &connection->list) {
				struct request *next = request->next;

				if (request->deadline_ns && request->deadline_ns <= now) {
					table_remove(connection, request);
					request->next = &expired;
					request->prev = expired.prev;
					expired.prev->next = request;
					expired.prev = request;
				} else if (request->deadline_ns) {
					break; /* deadlines rise along the list */
				}
				request = next;
			}
		}
		pthread_mutex_unlock(&connection->lock);
		while (expired.next != &expired) {
			struct request *request = expired.next;

			expired.next = request->next;
			if (request->reply_type != NGNFS_MSG_HELLO_REPLY)
				client_log("device %u at %s: request %" PRIu64
					   " (reply %s) timed out after %u ms",
					   d, connection->address, request->id,
					   ngnfs_msg_type_name(request->reply_type),
					   client->request_timeout_ms);
			request->fn(client, request, -ETIMEDOUT, NULL);
			free(request);
		}
	}
}

static int next_timeout_ms(struct ngnfs_client *client, uint64_t now)
{
	uint64_t next = now + CLIENT_IO_IDLE_WAKE_MS * 1000000ULL;

	for (uint32_t d = 0; d < client->device_count; d++) {
		struct connection *connection = &client->connections[d];

		if (connection->state == CONNECTION_DOWN && connection->retry_at_ns < next)
			next = connection->retry_at_ns;
		if (connection->state == CONNECTION_CONNECTING &&
		    connection->connect_deadline_ns < next)
			next = connection->connect_deadline_ns;
		pthread_mutex_lock(&connection->lock);
		if (connection->timed_requests) {
			for (struct request *request = connection->list.next;
			     request != &connection->list; request = request->next) {
				if (request->deadline_ns) {
					if (request->deadline_ns < next)
						next = request->deadline_ns;
					break;
				}
			}
		}
		pthread_mutex_unlock(&connection->lock);
	}
	pthread_mutex_lock(&client->deferred_lock);
	for (struct deferred *item = client->deferred; item; item = item->next) {
		if (item->run_at_ns < next)
			next = item->run_at_ns;
	}
	pthread_mutex_unlock(&client->deferred_lock);
	if (next <= now)
		return 0;
	return (int)((next - now + 999999) / 1000000);
}

/* Run deferred work that is due (all of it when everything is stopping). */
static void run_deferred(struct ngnfs_client *client, bool all)
{
	uint64_t now = now_ns();
	struct deferred *due = NULL;
	struct deferred **due_tail = &due;

	pthread_mutex_lock(&client->deferred_lock);
	for (struct deferred **link = &client->deferred; *link;) {
		struct deferred *item = *link;

		if (all || item->run_at_ns <= now) {
			*link = item->next;
			item->next = NULL;
			*due_tail = item;
			due_tail = &item->next;
		} else {
			link = &item->next;
		}
	}
	pthread_mutex_unlock(&client->deferred_lock);
	/* The list is pushed at the head: run the oldest first. */
	{
		struct deferred *reversed = NULL;

		while (due) {
			struct deferred *next = due->next;

			due->next = reversed;
			reversed = due;
			due = next;
		}
		due = reversed;
	}
	while (due) {
		struct deferred *next = due->next;

		due->fn(client, due->arg);
		free(due);
		due = next;
	}
}

static void close_failed_connections(struct ngnfs_client *client)
{
	for (uint32_t d = 0; d < client->device_count; d++) {
		struct connection *connection = &client->connections[d];

		if (connection->close_error && connection->state != CONNECTION_DOWN)
			connection_close(connection, connection->close_error,
					 connection->close_reason);
		connection->close_error = 0;
	}
}

static void *io_thread_main(void *arg)
{
	struct ngnfs_client *client = arg;
	struct epoll_event events[EPOLL_EVENTS];

	io_thread_client = client;
	while (!atomic_load(&client->stopping)) {
		uint64_t now = now_ns(), woke_ns;
		int timeout_ms;
		int count;

		for (uint32_t d = 0; d < client->device_count; d++) {
			struct connection *connection = &client->connections[d];

			if (connection->state == CONNECTION_DOWN && connection->retry_at_ns <= now)
				connection_start(connection);
		}
		run_deferred(client, false);
		check_timeouts(client, now_ns());
		close_failed_connections(client);
		client->io_flush_needed = false;
		for (uint32_t d = 0; d < client->device_count; d++)
			connection_flush(&client->connections[d]);
		close_failed_connections(client);

		/* Work that callbacks above submitted or deferred is due now. */
		timeout_ms = client->io_flush_needed ? 0 : next_timeout_ms(client, now_ns());
		count = epoll_wait(client->epoll_fd, events, EPOLL_EVENTS, timeout_ms);
		woke_ns = now_ns();
		if (count < 0 && errno != EINTR) {
			client_log("epoll_wait: %s", strerror(errno));
			count = 0;
		}
		for (int i = 0; i < count; i++) {
			if (!events[i].data.ptr) {
				uint64_t value;

				if (read(client->wake_fd, &value, sizeof(value)) < 0 &&
				    errno != EAGAIN)
					client_log("eventfd read: %s", strerror(errno));
				continue;
			}
			connection_event(events[i].data.ptr, events[i].events);
		}
		close_failed_connections(client);
		atomic_store(&client->io_pass_ns, woke_ns);
	}

	/* Shutting down: fail what is outstanding, run what was deferred. */
	for (uint32_t d = 0; d < client->device_count; d++) {
		struct connection *connection = &client->connections[d];

		if (connection->state != CONNECTION_DOWN) {
			connection_flush(connection); /* RELEASEs queued just before */
			connection_close(connection, -ESHUTDOWN, "client shutting down");
		}
	}
	for (int round = 0; round < 100; round++) {
		bool empty;

		run_deferred(client, true);
		pthread_mutex_lock(&client->deferred_lock);
		empty = client->deferred == NULL;
		pthread_mutex_unlock(&client->deferred_lock);
		if (empty)
			break;
	}
	return NULL;
}

/* ---- create / destroy ---- */

static int resolve_address(struct connection *connection)
{
	char host[256];
	const char *address = connection->address;
	const char *colon;
	const char *port;
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM };
	struct addrinfo *result = NULL;
	size_t host_length;
	int ret;

	if (address[0] == '[') {
		const char *close = strchr(address, ']');

		if (!close || close[1] != ':')
			goto bad;
		host_length = (size_t)(close - address - 1);
		memcpy(host, address + 1, host_length < sizeof(host) ? host_length : 0);
		colon = close + 1;
		address++;
	} else {
		colon = strrchr(address, ':');
		if (!colon)
			goto bad;
		host_length = (size_t)(colon - address);
	}
	if (host_length == 0 || host_length >= sizeof(host))
		goto bad;
	memcpy(host, address, host_length);
	host[host_length] = '\0';
	port = colon + 1;
	if (!*port)
		goto bad;

	ret = getaddrinfo(host, port, &hints, &result);
	if (ret) {
		client_log("device %u at %s: cannot resolve: %s", connection->device,
			   connection->address, gai_strerror(ret));
		return -EHOSTUNREACH;
	}
	memcpy(&connection->sockaddr, result->ai_addr, result->ai_addrlen);
	connection->sockaddr_length = result->ai_addrlen;
	freeaddrinfo(result);
	return 0;
bad:
	client_log("device %u: bad address '%s' (expected host:port)", connection->device,
		   connection->address);
	return -EINVAL;
}

static void free_client(struct ngnfs_client *client)
{
	if (client->connections) {
		for (uint32_t d = 0; d < client->device_count; d++) {
			struct connection *connection = &client->connections[d];

			ngnfs_transport_close(&connection->transport);
			pthread_mutex_destroy(&connection->lock);
			free(connection->address);
		}
		free(client->connections);
	}
	while (client->deferred) {
		struct deferred *next = client->deferred->next;

		free(client->deferred);
		client->deferred = next;
	}
	if (client->epoll_fd >= 0)
		close(client->epoll_fd);
	if (client->wake_fd >= 0)
		close(client->wake_fd);
	pthread_mutex_destroy(&client->fs_id_lock);
	pthread_mutex_destroy(&client->deferred_lock);
	pthread_mutex_destroy(&client->start_lock);
	pthread_cond_destroy(&client->start_cond);
	free(client);
}

/* The errors of a device that is not there, as opposed to one that refused us. */
static bool unreachable_error(int error)
{
	switch (error) {
	case -ECONNREFUSED:
	case -ETIMEDOUT:
	case -EHOSTUNREACH:
	case -ENETUNREACH:
	case -ECONNRESET:
	case -ECONNABORTED:
	case -EPIPE:
		return true;
	default:
		return false;
	}
}

/*
 * Learning the fs id (configured all zero): every formatted device must
 * report the one the first formatted device (in index order) reports.
 */
static int check_learned_fs_id(struct ngnfs_client *client)
{
	char expected_text[2 * NGNFS_FS_ID_SIZE + 1];
	char got_text[2 * NGNFS_FS_ID_SIZE + 1];
	struct connection *reference = NULL;
	int ret = 0;

	pthread_mutex_lock(&client->fs_id_lock);
	if (!fs_id_is_zero(client->fs_id)) {
		pthread_mutex_unlock(&client->fs_id_lock);
		return 0;
	}
	for (uint32_t d = 0; d < client->device_count; d++) {
		struct connection *connection = &client->connections[d];
		struct ngnfs_msg hello;
		bool valid;

		pthread_mutex_lock(&connection->lock);
		valid = connection->hello_valid;
		hello = connection->hello_reply;
		pthread_mutex_unlock(&connection->lock);
		if (!valid || !(hello.hello_reply.flags & NGNFS_HELLO_REPLY_FORMATTED))
			continue;
		if (!reference) {
			reference = connection;
			memcpy(client->fs_id, hello.hello_reply.fs_id, NGNFS_FS_ID_SIZE);
			continue;
		}
		if (memcmp(client->fs_id, hello.hello_reply.fs_id, NGNFS_FS_ID_SIZE)) {
			format_fs_id(client->fs_id, expected_text);
			format_fs_id(hello.hello_reply.fs_id, got_text);
			client_log("device %u at %s: device belongs to filesystem %s, not %s like "
				   "device %u at %s",
				   connection->device, connection->address, got_text, expected_text,
				   reference->device, reference->address);
			ret = -ESTALE;
		}
	}
	if (ret)
		memset(client->fs_id, 0, NGNFS_FS_ID_SIZE);
	pthread_mutex_unlock(&client->fs_id_lock);
	return ret;
}

int ngnfs_client_create(const struct ngnfs_client_config *config,
			const struct ngnfs_client_ops *ops, void *owner,
			struct ngnfs_client **client_out)
{
	struct epoll_event wake_event = { .events = EPOLLIN, .data.ptr = NULL };
	struct ngnfs_client *client;
	struct timespec deadline;
	uint64_t random_bits[2];
	int ret = 0;

	*client_out = NULL;
	if (!config || !config->device_addresses || config->device_count == 0) {
		client_log("create: no device addresses configured");
		return -EINVAL;
	}
	client = calloc(1, sizeof(*client));
	if (!client)
		return -ENOMEM;
	client->epoll_fd = -1;
	client->wake_fd = -1;
	pthread_mutex_init(&client->fs_id_lock, NULL);
	pthread_mutex_init(&client->deferred_lock, NULL);
	pthread_mutex_init(&client->start_lock, NULL);
	pthread_cond_init(&client->start_cond, NULL);
	client->device_count = config->device_count;
	client->hello_flags = config->hello_flags;
	client->connect_timeout_ms =
	    config->connect_timeout_ms ? config->connect_timeout_ms : DEFAULT_CONNECT_TIMEOUT_MS;
	client->request_timeout_ms = config->request_timeout_ms;
	client->commit_retry_ms = config->commit_retry_ms;
	if (!client->commit_retry_ms)
		client->commit_retry_ms = config->request_timeout_ms ? config->request_timeout_ms
								     : COMMIT_RETRY_DEFAULT_MS;
	if (ops)
		client->ops = *ops;
	client->owner = owner;
	memcpy(client->fs_id, config->fs_id, NGNFS_FS_ID_SIZE);

	if (getrandom(random_bits, sizeof(random_bits), 0) != sizeof(random_bits)) {
		random_bits[0] = (uint64_t)now_ns() ^ ((uint64_t)getpid() << 32);
		random_bits[1] = (uint64_t)time(NULL);
	}
	client->client_id = config->client_id ? config->client_id : (random_bits[0] | 1);
	/*
	 * Set ids: 24 bits of the client id, then a 40-bit counter that starts
	 * at a random point, so that a client restarted with a fixed client_id
	 * does not reuse the set ids whose outcomes the primaries remember.
	 */
	client->set_id_base = (client->client_id & 0xffffffULL) << 40;
	atomic_store(&client->next_set_counter, random_bits[1] & ((1ULL << 40) - 1));
	atomic_store(&client->next_request_id, 1);

	client->connections = calloc(client->device_count, sizeof(*client->connections));
	if (!client->connections) {
		ret = -ENOMEM;
		goto fail;
	}
	for (uint32_t d = 0; d < client->device_count; d++) {
		struct connection *connection = &client->connections[d];

		connection->client = client;
		connection->device = (uint16_t)d;
		pthread_mutex_init(&connection->lock, NULL);
		ngnfs_transport_init(&connection->transport);
		connection->list.next = connection->list.prev = &connection->list;
		if (!config->device_addresses[d]) {
			client_log("create: device %u has no address", d);
			ret = -EINVAL;
			goto fail;
		}
		connection->address = strdup(config->device_addresses[d]);
		if (!connection->address) {
			ret = -ENOMEM;
			goto fail;
		}
		ret = resolve_address(connection);
		if (ret)
			goto fail;
	}

	client->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
	atomic_store(&client->io_pass_ns, now_ns());
	client->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (client->epoll_fd < 0 || client->wake_fd < 0 ||
	    epoll_ctl(client->epoll_fd, EPOLL_CTL_ADD, client->wake_fd, &wake_event) < 0) {
		ret = -errno;
		goto fail;
	}
	ret = -pthread_create(&client->io_thread, NULL, io_thread_main, client);
	if (ret)
		goto fail;
	client->io_thread_started = true;

	/* Wait for every device's first attempt (each bounded by the connect timeout). */
	clock_gettime(CLOCK_REALTIME, &deadline);
	deadline.tv_sec += client->connect_timeout_ms / 1000 + 2;
	pthread_mutex_lock(&client->start_lock);
	while (client->first_attempts_done < client->device_count) {
		if (pthread_cond_timedwait(&client->start_cond, &client->start_lock, &deadline) ==
		    ETIMEDOUT)
			break;
	}
	pthread_mutex_unlock(&client->start_lock);
	for (uint32_t d = 0; d < client->device_count; d++) {
		struct connection *connection = &client->connections[d];
		int error;

		pthread_mutex_lock(&client->start_lock);
		error = connection->first_attempt_done ? connection->first_error : -ETIMEDOUT;
		pthread_mutex_unlock(&client->start_lock);
		if (error && config->allow_unreachable && d != 0 && unreachable_error(error)) {
			client_log("device %u at %s cannot be reached (%s): going on without it; "
				   "its blocks fail until it answers",
				   d, connection->address, strerror(-error));
			continue;
		}
		if (error && !ret)
			ret = error;
	}
	if (!ret)
		ret = check_learned_fs_id(client);
	if (ret) {
		client_log("create: could not open a session with every device (%s)",
			   strerror(-ret));
		ngnfs_client_destroy(client);
		return ret;
	}
	*client_out = client;
	return 0;
fail:
	if (ret)
		client_log("create: %s", strerror(-ret));
	free_client(client);
	return ret;
}

void ngnfs_client_destroy(struct ngnfs_client *client)
{
	if (!client)
		return;
	if (client->io_thread_started) {
		uint64_t one = 1;

		atomic_store(&client->stopping, true);
		if (write(client->wake_fd, &one, sizeof(one)) < 0)
			client_log("destroy: cannot wake the I/O thread: %s", strerror(errno));
		pthread_join(client->io_thread, NULL);
	}
	free_client(client);
}

uint16_t ngnfs_client_device_count(const struct ngnfs_client *client)
{
	return client->device_count;
}

uint64_t ngnfs_client_id(const struct ngnfs_client *client)
{
	return client->client_id;
}

int ngnfs_client_device_info(struct ngnfs_client *client, uint16_t device,
			     struct ngnfs_msg *hello_reply)
{
	struct connection *connection;
	int ret = -ENOTCONN;

	if (device >= client->device_count)
		return -ENODEV;
	connection = &client->connections[device];
	pthread_mutex_lock(&connection->lock);
	if (connection->state == CONNECTION_UP && connection->hello_valid) {
		*hello_reply = connection->hello_reply;
		ret = 0;
	}
	pthread_mutex_unlock(&connection->lock);
	return ret;
}

uint32_t ngnfs_client_commit_retry_ms(const struct ngnfs_client *client)
{
	return client->commit_retry_ms;
}

bool ngnfs_client_io_current(struct ngnfs_client *client)
{
	return on_io_thread(client) ||
	       now_ns() - atomic_load(&client->io_pass_ns) < CLIENT_IO_CURRENT_MS * 1000000ULL;
}

int ngnfs_client_wait_io_pass(struct ngnfs_client *client)
{
	uint64_t since = now_ns();

	if (on_io_thread(client))
		return 0;
	wake(client);
	while (atomic_load(&client->io_pass_ns) < since) {
		struct timespec pause = { 0, 1000000 };

		if (now_ns() - since > CLIENT_IO_PASS_WAIT_MS * 1000000ULL)
			return -ETIMEDOUT;
		nanosleep(&pause, NULL);
	}
	return 0;
}

uint64_t ngnfs_client_unreachable_ms(struct ngnfs_client *client, uint16_t device)
{
	struct connection *connection;
	uint64_t lost_at_ns;
	uint64_t now;

	if (device >= client->device_count)
		return 0;
	connection = &client->connections[device];
	pthread_mutex_lock(&connection->lock);
	lost_at_ns = connection->state == CONNECTION_UP ? 0 : connection->lost_at_ns;
	pthread_mutex_unlock(&connection->lock);
	if (!lost_at_ns)
		return 0;
	now = now_ns();
	return now > lost_at_ns ? (now - lost_at_ns) / 1000000ULL + 1 : 1;
}

/* ---- GET ---- */

struct get_request {
	ngnfs_grant_done_fn done;
	void *arg;
	uint32_t count;
	uint32_t granted_count;
	struct {
		uint64_t blkno;
		bool granted;
	} blocks[];
};

static void get_reply(struct ngnfs_client *client, struct request *request, int status,
		      const struct ngnfs_msg *msg)
{
	struct get_request *get = request->arg;

	(void)client;
	if (msg) {
		uint32_t i;

		for (i = 0; i < get->count; i++) {
			if (!get->blocks[i].granted && get->blocks[i].blkno == msg->grant.blkno)
				break;
		}
		if (i == get->count) {
			client_log("device %u: GRANT for block %" PRIu64 " which request %" PRIu64
				   " did not ask for",
				   request->device, msg->grant.blkno, request->id);
		} else {
			get->blocks[i].granted = true;
			get->granted_count++;
			get->done(get->arg, status, msg->grant.blkno, msg->grant.version,
				  msg->grant.access, status ? NULL : msg->grant.data);
		}
		if (request->replies_left == 0) {
			/* Blocks the server never named (a bad server) fail now. */
			for (i = 0; i < get->count; i++) {
				if (!get->blocks[i].granted)
					get->done(get->arg, -EPROTO, get->blocks[i].blkno, 0,
						  NGNFS_ACCESS_NONE, NULL);
			}
			free(get);
		}
		return;
	}
	for (uint32_t i = 0; i < get->count; i++) {
		if (!get->blocks[i].granted)
			get->done(get->arg, status, get->blocks[i].blkno, 0, NGNFS_ACCESS_NONE,
				  NULL);
	}
	free(get);
}

struct get_failure {
	struct get_request *get;
	int status;
};

static void get_fail_deferred(struct ngnfs_client *client, void *arg)
{
	struct get_failure *failure = arg;
	struct request request = { .arg = failure->get };

	get_reply(client, &request, failure->status, NULL);
	free(failure);
}

/*
 * Send the GET for the blocks of one device.  On failure *get_out, when
 * set, is the request state whose blocks the caller must still fail.
 */
static int get_submit_device(struct ngnfs_client *client, uint16_t device,
			     const struct ngnfs_block_request *blocks, uint32_t count,
			     ngnfs_grant_done_fn done, void *arg, struct get_request **get_out)
{
	struct ngnfs_block_request *subset;
	struct ngnfs_out_chunk *chunk;
	struct request *request;
	struct get_request *get;
	uint32_t n = 0;
	int ret;

	*get_out = NULL;
	for (uint32_t i = 0; i < count; i++) {
		if (ngnfs_blkno_device(blocks[i].blkno) == device)
			n++;
	}
	get = calloc(1, sizeof(*get) + n * sizeof(get->blocks[0]));
	if (!get)
		return -ENOMEM;
	get->done = done;
	get->arg = arg;
	get->count = n;
	n = 0;
	for (uint32_t i = 0; i < count; i++) {
		if (ngnfs_blkno_device(blocks[i].blkno) == device)
			get->blocks[n++].blkno = blocks[i].blkno;
	}
	*get_out = get;

	subset = malloc(n * sizeof(*subset));
	request = request_alloc(client, device, NGNFS_MSG_GRANT, get_reply, get);
	chunk = ngnfs_out_chunk_alloc();
	if (!subset || !request || !chunk) {
		ret = -ENOMEM;
		goto fail;
	}
	n = 0;
	for (uint32_t i = 0; i < count; i++) {
		if (ngnfs_blkno_device(blocks[i].blkno) == device)
			subset[n++] = blocks[i];
	}
	ret = ngnfs_encode_get(&chunk->buffer, request->id, subset, n);
	if (ret)
		goto fail;
	free(subset);
	request->replies_left = n;
	return submit(client, request, chunk, false);
fail:
	free(subset);
	free(request);
	ngnfs_out_chunk_free(chunk);
	return ret;
}

int ngnfs_client_get(struct ngnfs_client *client, const struct ngnfs_block_request *blocks,
		     uint32_t count, ngnfs_grant_done_fn done, void *arg)
{
	struct get_failure failures[NGNFS_MSG_MAX_BLOCKS];
	uint32_t failure_count = 0;
	bool submitted_any = false;
	int first_error = 0;

	if (count == 0)
		return 0;
	if (count > NGNFS_MSG_MAX_BLOCKS) {
		client_log("GET of %u blocks (first %" PRIu64 "): more than %u in one request",
			   count, blocks[0].blkno, NGNFS_MSG_MAX_BLOCKS);
		return -E2BIG;
	}
	for (uint32_t i = 0; i < count; i++) {
		uint16_t device = ngnfs_blkno_device(blocks[i].blkno);
		int ret;

		ret = check_device(client, device, "GET");
		if (ret)
			return ret;
		if (blocks[i].access != NGNFS_ACCESS_READ &&
		    blocks[i].access != NGNFS_ACCESS_WRITE) {
			client_log("GET block %" PRIu64 ": access %u is neither read nor write",
				   blocks[i].blkno, blocks[i].access);
			return -EINVAL;
		}
	}
	/* One GET per device, in the order devices first appear. */
	for (uint32_t i = 0; i < count; i++) {
		uint16_t device = ngnfs_blkno_device(blocks[i].blkno);
		struct get_request *get;
		bool seen = false;
		int ret;

		for (uint32_t j = 0; j < i; j++) {
			if (ngnfs_blkno_device(blocks[j].blkno) == device) {
				seen = true;
				break;
			}
		}
		if (seen)
			continue;
		ret = get_submit_device(client, device, blocks, count, done, arg, &get);
		if (!ret) {
			submitted_any = true;
			continue;
		}
		if (!first_error)
			first_error = ret;
		if (get) {
			failures[failure_count].get = get;
			failures[failure_count].status = ret;
			failure_count++;
		}
	}
	if (!submitted_any) {
		/* Nothing left the client: the caller gets the error, done is not called. */
		for (uint32_t i = 0; i < failure_count; i++)
			free(failures[i].get);
		return first_error;
	}
	/* Part of the GET is on its way: fail the rest on the I/O thread. */
	for (uint32_t i = 0; i < failure_count; i++) {
		struct get_failure *failure = malloc(sizeof(*failure));

		if (failure) {
			*failure = failures[i];
			if (!defer(client, 0, get_fail_deferred, failure))
				continue;
			free(failure);
		}
		/* No memory to defer: fail it here rather than lose it. */
		struct request request = { .arg = failures[i].get };

		get_reply(client, &request, failures[i].status, NULL);
	}
	return 0;
}

/* ---- RELEASE ---- */

static void release_reply(struct ngnfs_client *client, struct request *request, int status,
			  const struct ngnfs_msg *msg)
{
	uint64_t blkno = (uint64_t)(uintptr_t)request->arg;

	(void)msg;
	if (status && status != -ESHUTDOWN && status != -ENOTCONN)
		client_log("device %u at %s: RELEASE of block %" PRIu64 " failed: %s",
			   request->device, client->connections[request->device].address, blkno,
			   strerror(-status));
}

int ngnfs_client_release(struct ngnfs_client *client, uint64_t blkno, uint8_t access)
{
	uint16_t device = ngnfs_blkno_device(blkno);
	struct ngnfs_block_request block = { .blkno = blkno, .access = access };
	struct ngnfs_out_chunk *chunk;
	struct request *request;
	int ret;

	ret = check_device(client, device, "RELEASE");
	if (ret)
		return ret;
	request = request_alloc(client, device, NGNFS_MSG_RELEASE_REPLY, release_reply,
				(void *)(uintptr_t)blkno);
	chunk = ngnfs_out_chunk_alloc();
	if (!request || !chunk) {
		free(request);
		ngnfs_out_chunk_free(chunk);
		return -ENOMEM;
	}
	ret = ngnfs_encode_release(&chunk->buffer, request->id, &block, 1);
	if (ret) {
		free(request);
		ngnfs_out_chunk_free(chunk);
		return ret;
	}
	return submit(client, request, chunk, false);
}

/* ---- write sets ---- */

struct write_op {
	struct ngnfs_client *client;
	ngnfs_write_done_fn done;
	void *arg;
	uint64_t set_id;
	uint32_t block_count;
	uint64_t *versions;		    /* caller's order */
	struct ngnfs_block_request *sorted; /* by blkno */
	uint32_t *sorted_index;		    /* sorted[i] is the caller's block sorted_index[i] */
	uint16_t participants[NGNFS_MSG_MAX_PARTICIPANTS]; /* primary first */
	uint16_t participant_count;
	bool single;
	bool release;
	uint8_t release_access;
	uint64_t commit_deadline_ns;
	uint32_t commit_attempts;

	pthread_mutex_t lock;
	uint32_t pending; /* frames in flight + the submitter's reference */
	int error;
};

static void write_op_free(struct write_op *op)
{
	pthread_mutex_destroy(&op->lock);
	free(op->versions);
	free(op->sorted);
	free(op->sorted_index);
	free(op);
}

static void write_op_complete(struct write_op *op, int status)
{
	op->done(op->arg, status, status ? NULL : op->versions);
	write_op_free(op);
}

/* Records the set's first error; true when this is it. */
static bool write_op_error(struct write_op *op, int error)
{
	bool first;

	pthread_mutex_lock(&op->lock);
	first = !op->error;
	if (first)
		op->error = error;
	pthread_mutex_unlock(&op->lock);
	return first;
}

static void record_versions(struct write_op *op, const struct ngnfs_msg *msg)
{
	for (uint32_t i = 0; i < msg->versions.count; i++) {
		uint64_t blkno, version;
		uint32_t low = 0, high = op->block_count;

		ngnfs_msg_version_entry(msg, i, &blkno, &version);
		while (low < high) {
			uint32_t middle = low + (high - low) / 2;

			if (op->sorted[middle].blkno < blkno)
				low = middle + 1;
			else
				high = middle;
		}
		if (low < op->block_count && op->sorted[low].blkno == blkno)
			op->versions[op->sorted_index[low]] = version;
	}
}

static const char *device_address(struct ngnfs_client *client, uint16_t device)
{
	return client->connections[device].address;
}

/* Fire-and-forget RESOLVE; the reply is only logged. */
static void resolve_reply(struct ngnfs_client *client, struct request *request, int status,
			  const struct ngnfs_msg *msg)
{
	uint64_t set_id = (uint64_t)(uintptr_t)request->arg;

	(void)msg;
	if (status && status != -ENOENT && status != -ESHUTDOWN)
		client_log("device %u at %s: RESOLVE of set %016" PRIx64
			   " failed: %s (the device resolves it with the primary)",
			   request->device, device_address(client, request->device), set_id,
			   strerror(-status));
}

static void send_resolve(struct write_op *op, uint8_t outcome, bool skip_primary)
{
	struct ngnfs_client *client = op->client;

	for (uint32_t p = skip_primary ? 1 : 0; p < op->participant_count; p++) {
		struct ngnfs_out_chunk *chunk = ngnfs_out_chunk_alloc();
		struct request *request =
		    request_alloc(client, op->participants[p], NGNFS_MSG_RESOLVE_REPLY,
				  resolve_reply, (void *)(uintptr_t)op->set_id);
		int ret;

		if (!chunk || !request) {
			free(request);
			ngnfs_out_chunk_free(chunk);
			continue;
		}
		ret = ngnfs_encode_resolve(&chunk->buffer, NGNFS_MSG_RESOLVE, request->id, 0,
					   op->set_id, outcome);
		if (ret) {
			free(request);
			ngnfs_out_chunk_free(chunk);
			continue;
		}
		submit(client, request, chunk, false);
	}
}

/*
 * Release-after-write for a multi-device set: STAGE cannot carry it (the
 * blocks stay pinned to the set until it is resolved), so once the set
 * is committed every participant gets a RELEASE of its blocks, queued
 * behind the RESOLVE on the same connection.
 */
static void send_releases(struct write_op *op)
{
	struct ngnfs_client *client = op->client;

	for (uint32_t p = 0; p < op->participant_count; p++) {
		uint16_t device = op->participants[p];
		uint32_t b = 0;

		while (b < op->block_count && ngnfs_blkno_device(op->sorted[b].blkno) != device)
			b++;
		while (b < op->block_count && ngnfs_blkno_device(op->sorted[b].blkno) == device) {
			struct ngnfs_block_request entries[NGNFS_MSG_MAX_BLOCKS];
			struct ngnfs_out_chunk *chunk;
			struct request *request;
			uint32_t n = 0;

			while (n < NGNFS_MSG_MAX_BLOCKS && b < op->block_count &&
			       ngnfs_blkno_device(op->sorted[b].blkno) == device) {
				entries[n] =
				    (struct ngnfs_block_request){ .blkno = op->sorted[b].blkno,
								  .access = op->release_access };
				n++;
				b++;
			}
			chunk = ngnfs_out_chunk_alloc();
			request = request_alloc(client, device, NGNFS_MSG_RELEASE_REPLY,
						release_reply, (void *)(uintptr_t)entries[0].blkno);
			if (!chunk || !request ||
			    ngnfs_encode_release(&chunk->buffer, request->id, entries, n)) {
				free(request);
				ngnfs_out_chunk_free(chunk);
				continue;
			}
			submit(client, request, chunk, false);
		}
	}
}

static void send_commit(struct ngnfs_client *client, void *arg);

static bool commit_retryable(int status)
{
	return status == -ENOTCONN || status == -ETIMEDOUT || status == -ECONNRESET ||
	       status == -EAGAIN;
}

static void commit_failed(struct write_op *op, int status)
{
	struct ngnfs_client *client = op->client;

	if (commit_retryable(status) && !atomic_load(&client->stopping) &&
	    now_ns() < op->commit_deadline_ns) {
		if (!defer(client, now_ns() + COMMIT_RETRY_INTERVAL_MS * 1000000ULL, send_commit,
			   op))
			return;
	}
	if (commit_retryable(status)) {
		client_log("set %016" PRIx64 ": COMMIT to primary device %u at %s not acknowledged "
			   "after %u attempts (%s): outcome unknown until the device answers",
			   op->set_id, op->participants[0],
			   device_address(client, op->participants[0]), op->commit_attempts,
			   strerror(-status));
		write_op_complete(op, -EIO);
		return;
	}
	client_log("set %016" PRIx64 ": COMMIT refused by primary device %u at %s: %s", op->set_id,
		   op->participants[0], device_address(client, op->participants[0]),
		   strerror(-status));
	/* -ESTALE: the primary recorded ABORTED, so the others may drop their stages now. */
	if (status == -ESTALE)
		send_resolve(op, NGNFS_SET_ABORTED, true);
	write_op_complete(op, status);
}

static void commit_reply(struct ngnfs_client *client, struct request *request, int status,
			 const struct ngnfs_msg *msg)
{
	struct write_op *op = request->arg;

	(void)client;
	if (!msg || status) {
		commit_failed(op, status);
		return;
	}
	record_versions(op, msg);
	send_resolve(op, NGNFS_SET_COMMITTED, true);
	if (op->release)
		send_releases(op);
	write_op_complete(op, 0);
}

static void send_commit(struct ngnfs_client *client, void *arg)
{
	struct write_op *op = arg;
	struct ngnfs_out_chunk *chunk = ngnfs_out_chunk_alloc();
	struct request *request =
	    request_alloc(client, op->participants[0], NGNFS_MSG_COMMIT_REPLY, commit_reply, op);
	int ret;

	op->commit_attempts++;
	if (!chunk || !request) {
		free(request);
		ngnfs_out_chunk_free(chunk);
		commit_failed(op, -EAGAIN);
		return;
	}
	ret = ngnfs_encode_commit(&chunk->buffer, request->id, op->set_id);
	if (ret) {
		free(request);
		ngnfs_out_chunk_free(chunk);
		commit_failed(op, ret);
		return;
	}
	ret = submit(client, request, chunk, false);
	if (ret)
		commit_failed(op, ret);
}

/* Every STAGE (or the SINGLE write) has been answered.  I/O thread. */
static void writes_finished(struct ngnfs_client *client, void *arg)
{
	struct write_op *op = arg;

	if (op->single || op->error) {
		if (!op->single)
			send_resolve(op, NGNFS_SET_ABORTED, false);
		write_op_complete(op, op->error);
		return;
	}
	op->commit_deadline_ns = now_ns() + (uint64_t)client->commit_retry_ms * 1000000ULL;
	send_commit(client, op);
}

static void write_op_put(struct write_op *op)
{
	bool last;

	pthread_mutex_lock(&op->lock);
	last = --op->pending == 0;
	pthread_mutex_unlock(&op->lock);
	if (!last)
		return;
	if (on_io_thread(op->client) || defer(op->client, 0, writes_finished, op) != 0)
		writes_finished(op->client, op);
}

static void write_reply(struct ngnfs_client *client, struct request *request, int status,
			const struct ngnfs_msg *msg)
{
	struct write_op *op = request->arg;

	if (msg && !status)
		record_versions(op, msg);
	/* every frame of a refused WRITE gets the refusal: one line says it */
	if (status && write_op_error(op, status) && status != -ESHUTDOWN)
		client_log("set %016" PRIx64 ": %s to device %u at %s failed: %s", op->set_id,
			   op->single ? "WRITE" : "STAGE", request->device,
			   device_address(client, request->device), strerror(-status));
	write_op_put(op);
}

static int compare_sorted(const void *a, const void *b, void *arg)
{
	const struct ngnfs_block_request *blocks = arg;
	uint64_t x = blocks[*(const uint32_t *)a].blkno;
	uint64_t y = blocks[*(const uint32_t *)b].blkno;

	return x < y ? -1 : x > y;
}

static int compare_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a;
	uint64_t y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static size_t write_payload_size(uint16_t participant_count, uint32_t blocks, uint32_t frees)
{
	size_t participants = ((size_t)participant_count * 2 + 7) & ~(size_t)7;

	return sizeof(struct ngnfs_msg_write) + participants + blocks * NGNFS_WRITE_BLOCK_STRIDE +
	       (size_t)frees * sizeof(uint64_t);
}

/*
 * How many of a device's remaining blocks and frees the next WRITE frame
 * carries: the protocol caps both counts per frame (msg.c refuses more
 * than NGNFS_MSG_MAX_BLOCKS of either), and the payload its bytes.
 */
static void next_frame(uint16_t participant_count, uint32_t blocks_left, uint32_t frees_left,
		       uint32_t *blocks, uint32_t *frees)
{
	size_t room;

	*blocks = blocks_left < NGNFS_MSG_MAX_BLOCKS ? blocks_left : NGNFS_MSG_MAX_BLOCKS;
	room = (NGNFS_MSG_MAX_PAYLOAD - write_payload_size(participant_count, *blocks, 0)) /
	       sizeof(uint64_t);
	if (room > NGNFS_MSG_MAX_BLOCKS)
		room = NGNFS_MSG_MAX_BLOCKS;
	*frees = frees_left < room ? frees_left : (uint32_t)room;
}

static uint32_t count_frames(uint16_t participant_count, uint32_t block_count, uint32_t free_count)
{
	uint32_t frames = 0;

	do {
		uint32_t blocks, frees;

		next_frame(participant_count, block_count, free_count, &blocks, &frees);
		block_count -= blocks;
		free_count -= frees;
		frames++;
	} while (block_count || free_count);
	return frames;
}

/*
 * Encode a device's blocks and frees of the set as WRITE frames and queue
 * them as one group (submit_group), counted in op->pending first.  A
 * SINGLE write's frames are numbered 0 .. n-1 of n, so blockd holds all
 * but the last and applies them together; each STAGE frame stands alone.
 * On an error nothing was queued.
 */
static int send_device_frames(struct write_op *op, uint16_t device, uint8_t phase, uint32_t flags,
			      uint8_t release_access, const struct ngnfs_block_request *blocks,
			      uint32_t block_count, const uint64_t *frees, uint32_t free_count)
{
	struct ngnfs_client *client = op->client;
	uint16_t participant_count = phase == NGNFS_WRITE_STAGE ? op->participant_count : 0;
	uint32_t frame_count = count_frames(participant_count, block_count, free_count);
	struct request **requests = calloc(frame_count, sizeof(*requests));
	struct ngnfs_out_chunk **chunks = calloc(frame_count, sizeof(*chunks));
	uint32_t b = 0, f = 0, built = 0;
	int ret = requests && chunks ? 0 : -ENOMEM;

	for (; built < frame_count && !ret; built++) {
		bool single = phase == NGNFS_WRITE_SINGLE;
		uint32_t nb, nf;

		next_frame(participant_count, block_count - b, free_count - f, &nb, &nf);
		chunks[built] = ngnfs_out_chunk_alloc();
		requests[built] =
		    request_alloc(client, device, NGNFS_MSG_WRITE_REPLY, write_reply, op);
		if (!chunks[built] || !requests[built]) {
			ret = -ENOMEM;
		} else {
			ret = ngnfs_encode_write_frame(
			    &chunks[built]->buffer, requests[built]->id, op->set_id, phase, flags,
			    release_access, op->participants, participant_count, blocks + b, nb,
			    frees + f, nf, single ? (uint16_t)built : 0,
			    single ? (uint16_t)frame_count : 1);
		}
		b += nb;
		f += nf;
	}
	if (ret) {
		for (uint32_t i = 0; requests && chunks && i < built; i++) {
			free(requests[i]);
			ngnfs_out_chunk_free(chunks[i]);
		}
		free(requests);
		free(chunks);
		return ret;
	}
	pthread_mutex_lock(&op->lock);
	op->pending += frame_count;
	pthread_mutex_unlock(&op->lock);
	ret = submit_group(client, requests, chunks, frame_count, false);
	if (ret) {
		pthread_mutex_lock(&op->lock);
		op->pending -= frame_count;
		pthread_mutex_unlock(&op->lock);
	}
	free(requests);
	free(chunks);
	return ret;
}

int ngnfs_client_write_set(struct ngnfs_client *client, const struct ngnfs_write_set *set,
			   ngnfs_write_done_fn done, void *arg)
{
	uint32_t flags = set->release ? NGNFS_WRITE_RELEASE : 0;
	uint64_t *frees = NULL;
	uint64_t lowest = UINT64_MAX;
	struct write_op *op;
	bool sent_any = false;
	int ret = 0;

	if (set->block_count == 0 && set->free_count == 0)
		return -EINVAL;
	op = calloc(1, sizeof(*op));
	if (!op)
		return -ENOMEM;
	pthread_mutex_init(&op->lock, NULL);
	op->client = client;
	op->done = done;
	op->arg = arg;
	op->block_count = set->block_count;
	op->release = set->release;
	op->release_access = set->release_access;
	op->pending = 1;
	op->versions = calloc(set->block_count + 1, sizeof(*op->versions));
	op->sorted = malloc((set->block_count + 1) * sizeof(*op->sorted));
	op->sorted_index = malloc((set->block_count + 1) * sizeof(*op->sorted_index));
	frees = malloc((set->free_count + 1) * sizeof(*frees));
	if (!op->versions || !op->sorted || !op->sorted_index || !frees) {
		ret = -ENOMEM;
		goto fail;
	}

	for (uint32_t i = 0; i < set->block_count; i++) {
		ret = check_device(client, ngnfs_blkno_device(set->blocks[i].blkno), "WRITE");
		if (ret)
			goto fail;
		op->sorted_index[i] = i;
	}
	for (uint32_t i = 0; i < set->free_count; i++) {
		ret = check_device(client, ngnfs_blkno_device(set->frees[i]), "WRITE (free)");
		if (ret)
			goto fail;
		frees[i] = set->frees[i];
	}
	qsort_r(op->sorted_index, set->block_count, sizeof(uint32_t), compare_sorted,
		(void *)set->blocks);
	qsort(frees, set->free_count, sizeof(*frees), compare_u64);
	for (uint32_t i = 0; i < set->block_count; i++) {
		op->sorted[i] = set->blocks[op->sorted_index[i]];
		if (i && op->sorted[i].blkno == op->sorted[i - 1].blkno) {
			client_log("WRITE: block %" PRIu64 " appears twice in one set",
				   op->sorted[i].blkno);
			ret = -EINVAL;
			goto fail;
		}
	}
	if (set->block_count)
		lowest = op->sorted[0].blkno;
	if (set->free_count && frees[0] < lowest)
		lowest = frees[0];

	/* Participants: the primary (lowest block number) first, then by device. */
	op->participants[op->participant_count++] = ngnfs_blkno_device(lowest);
	for (uint32_t i = 0, j = 0; i < set->block_count || j < set->free_count;) {
		uint64_t blkno;
		uint16_t device;
		bool known = false;

		if (j >= set->free_count ||
		    (i < set->block_count && op->sorted[i].blkno < frees[j]))
			blkno = op->sorted[i++].blkno;
		else
			blkno = frees[j++];
		device = ngnfs_blkno_device(blkno);
		for (uint32_t p = 0; p < op->participant_count; p++) {
			if (op->participants[p] == device) {
				known = true;
				break;
			}
		}
		if (known)
			continue;
		if (op->participant_count == NGNFS_MSG_MAX_PARTICIPANTS) {
			client_log("WRITE: set spans more than %u devices",
				   NGNFS_MSG_MAX_PARTICIPANTS);
			ret = -E2BIG;
			goto fail;
		}
		op->participants[op->participant_count++] = device;
	}

	op->set_id = set->set_id;
	while (!op->set_id)
		op->set_id = client->set_id_base |
			     (atomic_fetch_add(&client->next_set_counter, 1) & ((1ULL << 40) - 1));

	/*
	 * A set on one device is one WRITE of up to NGNFS_WRITE_MAX_FRAMES
	 * frames, applied in one batch; a larger one, or a set on several
	 * devices, is staged.
	 */
	op->single = op->participant_count == 1 &&
		     count_frames(0, set->block_count, set->free_count) <= NGNFS_WRITE_MAX_FRAMES;
	if (op->single) {
		ret = send_device_frames(op, op->participants[0], NGNFS_WRITE_SINGLE, flags,
					 set->release_access, op->sorted, set->block_count, frees,
					 set->free_count);
		if (ret)
			goto fail;
		free(frees);
		write_op_put(op);
		return 0;
	}

	/* STAGE to every participant, primary included, in frames that fit. */
	for (uint32_t p = 0; p < op->participant_count && !ret; p++) {
		uint16_t device = op->participants[p];
		uint32_t b = 0, f = 0, b_end, f_end;

		while (b < set->block_count && ngnfs_blkno_device(op->sorted[b].blkno) != device)
			b++;
		b_end = b;
		while (b_end < set->block_count &&
		       ngnfs_blkno_device(op->sorted[b_end].blkno) == device)
			b_end++;
		while (f < set->free_count && ngnfs_blkno_device(frees[f]) != device)
			f++;
		f_end = f;
		while (f_end < set->free_count && ngnfs_blkno_device(frees[f_end]) == device)
			f_end++;
		ret = send_device_frames(op, device, NGNFS_WRITE_STAGE, 0, 0, op->sorted + b,
					 b_end - b, frees + f, f_end - f);
		if (ret) {
			write_op_error(op, ret);
			break;
		}
		sent_any = true;
	}
	free(frees);
	if (!sent_any) {
		/* Nothing left the client: no stage to abort, the caller sees the error. */
		write_op_free(op);
		return ret;
	}
	write_op_put(op);
	return 0;
fail:
	free(frees);
	write_op_free(op);
	return ret;
}

/* ---- synchronous wrappers ---- */

struct sync_wait {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	uint32_t outstanding;
	int status;
};

static void sync_init(struct sync_wait *wait, uint32_t outstanding)
{
	pthread_mutex_init(&wait->lock, NULL);
	pthread_cond_init(&wait->cond, NULL);
	wait->outstanding = outstanding;
	wait->status = 0;
}

static void sync_signal(struct sync_wait *wait, int status)
{
	pthread_mutex_lock(&wait->lock);
	if (status && !wait->status)
		wait->status = status;
	if (--wait->outstanding == 0)
		pthread_cond_broadcast(&wait->cond);
	pthread_mutex_unlock(&wait->lock);
}

static int sync_wait_for(struct sync_wait *wait)
{
	int status;

	pthread_mutex_lock(&wait->lock);
	while (wait->outstanding)
		pthread_cond_wait(&wait->cond, &wait->lock);
	status = wait->status;
	pthread_mutex_unlock(&wait->lock);
	pthread_mutex_destroy(&wait->lock);
	pthread_cond_destroy(&wait->cond);
	return status;
}

static int refuse_on_io_thread(struct ngnfs_client *client, const char *operation)
{
	if (!on_io_thread(client))
		return 0;
	client_log("%s: synchronous call from the I/O thread (a completion or callback) "
		   "would deadlock",
		   operation);
	return -EDEADLK;
}

struct get_sync {
	struct sync_wait wait;
	uint64_t cached_version;
	uint64_t *version;
	uint8_t *data;
	bool *data_changed;
};

static void get_sync_done(void *arg, int status, uint64_t blkno, uint64_t version, uint8_t access,
			  const uint8_t *data)
{
	struct get_sync *get = arg;

	(void)blkno;
	(void)access;
	if (!status) {
		if (get->version)
			*get->version = version;
		if (data && get->data)
			memcpy(get->data, data, NGNFS_BLOCK_SIZE);
		if (get->data_changed)
			*get->data_changed = data != NULL;
	}
	sync_signal(&get->wait, status);
}

int ngnfs_client_get_sync(struct ngnfs_client *client, uint64_t blkno, uint8_t access,
			  uint64_t cached_version, uint64_t *version, uint8_t *data,
			  bool *data_changed)
{
	struct ngnfs_block_request block = { .blkno = blkno,
					     .version = cached_version,
					     .access = access };
	struct get_sync get = {
		.cached_version = cached_version,
		.version = version,
		.data = data,
		.data_changed = data_changed,
	};
	int ret;

	ret = refuse_on_io_thread(client, "GET");
	if (ret)
		return ret;
	sync_init(&get.wait, 1);
	ret = ngnfs_client_get(client, &block, 1, get_sync_done, &get);
	if (ret) {
		sync_signal(&get.wait, ret);
		sync_wait_for(&get.wait);
		return ret;
	}
	return sync_wait_for(&get.wait);
}

struct write_sync {
	struct sync_wait wait;
	uint64_t *versions;
	uint32_t count;
};

static void write_sync_done(void *arg, int status, const uint64_t *versions)
{
	struct write_sync *write = arg;

	if (!status && write->versions)
		memcpy(write->versions, versions, write->count * sizeof(*versions));
	sync_signal(&write->wait, status);
}

int ngnfs_client_write_set_sync(struct ngnfs_client *client, const struct ngnfs_write_set *set,
				uint64_t *versions)
{
	struct write_sync write = { .versions = versions, .count = set->block_count };
	int ret;

	ret = refuse_on_io_thread(client, "WRITE");
	if (ret)
		return ret;
	sync_init(&write.wait, 1);
	ret = ngnfs_client_write_set(client, set, write_sync_done, &write);
	if (ret) {
		sync_signal(&write.wait, ret);
		sync_wait_for(&write.wait);
		return ret;
	}
	return sync_wait_for(&write.wait);
}

/*
 * The remaining requests have one reply each; a simple_call carries the
 * caller's output pointers and a reply handler copies from the message.
 */
struct simple_call {
	struct sync_wait wait;
	void (*copy)(struct simple_call *call, const struct ngnfs_msg *msg);
	void *out[4];
	uint32_t limit;
	int status;
};

static void simple_reply(struct ngnfs_client *client, struct request *request, int status,
			 const struct ngnfs_msg *msg)
{
	struct simple_call *call = request->arg;

	(void)client;
	if (msg && call->copy)
		call->copy(call, msg);
	sync_signal(&call->wait, status);
}

static int simple_call_run(struct ngnfs_client *client, uint16_t device, uint8_t reply_type,
			   struct simple_call *call, struct ngnfs_out_chunk *chunk,
			   struct request *request)
{
	int ret;

	sync_init(&call->wait, 1);
	(void)device;
	(void)reply_type;
	ret = submit(client, request, chunk, false);
	if (ret) {
		sync_signal(&call->wait, ret);
		sync_wait_for(&call->wait);
		return ret;
	}
	return sync_wait_for(&call->wait);
}

/* Allocate the request and chunk of a simple call. */
static int simple_call_prepare(struct ngnfs_client *client, uint16_t device, uint8_t reply_type,
			       struct simple_call *call, struct request **request,
			       struct ngnfs_out_chunk **chunk, const char *operation)
{
	int ret;

	ret = refuse_on_io_thread(client, operation);
	if (ret)
		return ret;
	ret = check_device(client, device, operation);
	if (ret)
		return ret;
	*request = request_alloc(client, device, reply_type, simple_reply, call);
	*chunk = ngnfs_out_chunk_alloc();
	if (!*request || !*chunk) {
		free(*request);
		ngnfs_out_chunk_free(*chunk);
		return -ENOMEM;
	}
	return 0;
}

static void simple_call_abandon(struct request *request, struct ngnfs_out_chunk *chunk)
{
	free(request);
	ngnfs_out_chunk_free(chunk);
}

static void alloc_copy(struct simple_call *call, const struct ngnfs_msg *msg)
{
	uint64_t *blknos = call->out[0];
	uint64_t *versions = call->out[1];
	uint32_t *allocated = call->out[2];
	uint32_t *session_epoch = call->out[3];
	uint32_t count = msg->versions.count < call->limit ? msg->versions.count : call->limit;

	if (msg->status)
		return;
	if (session_epoch)
		*session_epoch = msg->versions.session_epoch;
	for (uint32_t i = 0; i < count; i++) {
		uint64_t blkno, version;

		ngnfs_msg_version_entry(msg, i, &blkno, &version);
		if (blknos)
			blknos[i] = blkno;
		if (versions)
			versions[i] = version;
	}
	*allocated = count;
}

int ngnfs_client_alloc_sync(struct ngnfs_client *client, uint16_t device, uint32_t count,
			    uint64_t *blknos, uint64_t *versions, uint32_t *session_epoch,
			    uint32_t *allocated)
{
	struct simple_call call = {
		.copy = alloc_copy,
		.out = { blknos, versions, allocated, session_epoch },
		.limit = count,
	};
	struct ngnfs_out_chunk *chunk;
	struct request *request;
	int ret;

	*allocated = 0;
	ret = simple_call_prepare(client, device, NGNFS_MSG_ALLOC_REPLY, &call, &request, &chunk,
				  "ALLOC");
	if (ret)
		return ret;
	ret = ngnfs_encode_alloc(&chunk->buffer, request->id, count);
	if (ret) {
		simple_call_abandon(request, chunk);
		return ret;
	}
	ret = simple_call_run(client, device, NGNFS_MSG_ALLOC_REPLY, &call, chunk, request);
	if (ret)
		client_log("device %u at %s: ALLOC of %u blocks failed: %s", device,
			   device_address(client, device), count, strerror(-ret));
	return ret;
}

static void cmpxchg_copy(struct simple_call *call, const struct ngnfs_msg *msg)
{
	uint64_t *version = call->out[0];

	/* -ESTALE carries the current version too. */
	if (version)
		*version = msg->cmpxchg_reply.version;
}

int ngnfs_client_cmpxchg_sync(struct ngnfs_client *client, uint64_t blkno,
			      uint64_t expected_version, const uint8_t *data, uint64_t *version)
{
	uint16_t device = ngnfs_blkno_device(blkno);
	struct simple_call call = { .copy = cmpxchg_copy, .out = { version } };
	struct ngnfs_out_chunk *chunk;
	struct request *request;
	int ret;

	ret = simple_call_prepare(client, device, NGNFS_MSG_CMPXCHG_REPLY, &call, &request, &chunk,
				  "CMPXCHG");
	if (ret)
		return ret;
	ret = ngnfs_encode_cmpxchg(&chunk->buffer, request->id, blkno, expected_version, data);
	if (ret) {
		simple_call_abandon(request, chunk);
		return ret;
	}
	return simple_call_run(client, device, NGNFS_MSG_CMPXCHG_REPLY, &call, chunk, request);
}

static void read_incoherent_copy(struct simple_call *call, const struct ngnfs_msg *msg)
{
	uint64_t *version = call->out[0];
	uint8_t *data = call->out[1];
	int *block_status = call->out[2];
	const uint8_t *bytes;
	uint64_t blkno;
	int status;

	if (msg->status || msg->read_incoherent_reply.count != 1) {
		*block_status = msg->status ? msg->status : -EPROTO;
		return;
	}
	bytes = ngnfs_msg_incoherent_block(msg, 0, &blkno, version, &status);
	*block_status = status;
	if (!status && data)
		memcpy(data, bytes, NGNFS_BLOCK_SIZE);
}

int ngnfs_client_read_incoherent_sync(struct ngnfs_client *client, uint64_t blkno,
				      uint64_t *version, uint8_t *data)
{
	uint16_t device = ngnfs_blkno_device(blkno);
	uint64_t ignored_version = 0;
	int block_status = 0;
	struct simple_call call = {
		.copy = read_incoherent_copy,
		.out = { version ? version : &ignored_version, data, &block_status },
	};
	struct ngnfs_out_chunk *chunk;
	struct request *request;
	int ret;

	ret = simple_call_prepare(client, device, NGNFS_MSG_READ_INCOHERENT_REPLY, &call, &request,
				  &chunk, "READ_INCOHERENT");
	if (ret)
		return ret;
	ret = ngnfs_encode_read_incoherent(&chunk->buffer, request->id, &blkno, 1);
	if (ret) {
		simple_call_abandon(request, chunk);
		return ret;
	}
	ret =
	    simple_call_run(client, device, NGNFS_MSG_READ_INCOHERENT_REPLY, &call, chunk, request);
	if (!ret && block_status) {
		client_log("device %u at %s: READ_INCOHERENT of block %" PRIu64 ": %s", device,
			   device_address(client, device), blkno, strerror(-block_status));
		ret = block_status;
	}
	return ret;
}

static void statfs_copy(struct simple_call *call, const struct ngnfs_msg *msg)
{
	struct ngnfs_statfs_figures *statfs = call->out[0];

	if (msg->status)
		return;
	*statfs = msg->statfs_reply;
}

int ngnfs_client_statfs_sync(struct ngnfs_client *client, uint16_t device,
			     struct ngnfs_statfs_figures *statfs)
{
	struct simple_call call = { .copy = statfs_copy, .out = { statfs } };
	struct ngnfs_out_chunk *chunk;
	struct request *request;
	int ret;

	ret = simple_call_prepare(client, device, NGNFS_MSG_STATFS_REPLY, &call, &request, &chunk,
				  "STATFS");
	if (ret)
		return ret;
	ret = ngnfs_encode_statfs(&chunk->buffer, request->id);
	if (ret) {
		simple_call_abandon(request, chunk);
		return ret;
	}
	return simple_call_run(client, device, NGNFS_MSG_STATFS_REPLY, &call, chunk, request);
}

int ngnfs_client_format_sync(struct ngnfs_client *client, uint16_t device,
			     const uint8_t fs_id[NGNFS_FS_ID_SIZE], uint32_t device_count)
{
	struct simple_call call = { 0 };
	struct connection *connection;
	struct ngnfs_out_chunk *chunk;
	struct request *request;
	int ret;

	ret = simple_call_prepare(client, device, NGNFS_MSG_FORMAT_REPLY, &call, &request, &chunk,
				  "FORMAT");
	if (ret)
		return ret;
	ret = ngnfs_encode_format(&chunk->buffer, request->id, fs_id, device, device_count);
	if (ret) {
		simple_call_abandon(request, chunk);
		return ret;
	}
	ret = simple_call_run(client, device, NGNFS_MSG_FORMAT_REPLY, &call, chunk, request);
	if (ret) {
		client_log("device %u at %s: FORMAT failed: %s", device,
			   device_address(client, device), strerror(-ret));
		return ret;
	}
	/* The session now belongs to that filesystem; later HELLOs say so. */
	connection = &client->connections[device];
	pthread_mutex_lock(&client->fs_id_lock);
	if (fs_id_is_zero(client->fs_id))
		memcpy(client->fs_id, fs_id, NGNFS_FS_ID_SIZE);
	pthread_mutex_unlock(&client->fs_id_lock);
	pthread_mutex_lock(&connection->lock);
	if (connection->hello_valid) {
		memcpy(connection->hello_reply.hello_reply.fs_id, fs_id, NGNFS_FS_ID_SIZE);
		connection->hello_reply.hello_reply.device_index = device;
		connection->hello_reply.hello_reply.device_count = device_count;
		connection->hello_reply.hello_reply.flags |= NGNFS_HELLO_REPLY_FORMATTED;
	}
	pthread_mutex_unlock(&connection->lock);
	return 0;
}
