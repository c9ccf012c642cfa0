/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The client's side of the protocol, against scripted fake servers.
 *
 * Three fake devices (threads speaking the real codec on loopback
 * sockets) record every message they receive, with a global order, and
 * answer as the script says.  That lets the test check what a real
 * blockd cannot show: the order of the multi-device commit (every STAGE
 * acknowledged before the COMMIT to the primary, RESOLVE(COMMITTED) to
 * the others only after the commit reply, nothing but RESOLVE(ABORTED)
 * after a failed STAGE), GRANTs answered out of order, a REVOKE reaching
 * ops->revoke, a COMMIT retried after the primary's connection broke
 * (idempotent) and, never answered, given up after commit_retry_ms with
 * -EIO, the session_reset calls for a lost session and for a
 * restarted server, and a HELLO whose fs id disagrees with the other
 * devices refused with a message naming the device.  It also checks that
 * each session's socket has keepalive and a user timeout.
 */

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "client_test.h"
#include "msg.h"

#define DEVICES	   3
#define MAX_EVENTS 4096

/* Block indexes that make a fake device misbehave. */
#define INDEX_REVOKE	  666 /* GET: send a REVOKE after the GRANT */
#define INDEX_STAGE_FAILS 777 /* STAGE: reply -EIO */
#define INDEX_DISCONNECT  888 /* GET: close the connection instead of answering */

struct event {
	uint64_t order;
	uint16_t device;
	uint8_t type;
	uint8_t phase;	 /* WRITE */
	uint8_t outcome; /* RESOLVE */
	uint64_t set_id;
	uint16_t first_participant;
	uint16_t participant_count;
};

struct fake_device {
	uint16_t device;
	uint8_t fs_id[NGNFS_FS_ID_SIZE];
	uint16_t device_index;
	atomic_uint_fast64_t instance;
	int listen_fd;
	char address[64];
	pthread_t thread;
	atomic_uint drop_commits; /* this many COMMITs are "lost" (connection closed) */
};

static struct fake_device devices[DEVICES];
/* Longer than the client's request timeout (2000 ms) on purpose. */
#define FLOW_COMMIT_RETRY_MS 3500
static pthread_mutex_t events_lock = PTHREAD_MUTEX_INITIALIZER;
static struct event events[MAX_EVENTS];
static uint32_t event_count;
static uint64_t staged[DEVICES][8]; /* blknos staged per device, for COMMIT_REPLY */
static uint32_t staged_count[DEVICES];

static void record(const struct event *event)
{
	pthread_mutex_lock(&events_lock);
	if (event_count < MAX_EVENTS) {
		events[event_count] = *event;
		events[event_count].order = event_count;
		event_count++;
	}
	pthread_mutex_unlock(&events_lock);
}

static int send_buffer(int fd, struct ngnfs_buffer *buffer)
{
	size_t sent = 0;

	while (sent < buffer->length) {
		ssize_t n = send(fd, buffer->data + sent, buffer->length - sent, MSG_NOSIGNAL);

		if (n <= 0)
			return -1;
		sent += (size_t)n;
	}
	ngnfs_buffer_reset(buffer);
	return 0;
}

static int read_exact(int fd, uint8_t *bytes, size_t length)
{
	size_t got = 0;

	while (got < length) {
		ssize_t n = recv(fd, bytes + got, length - got, 0);

		if (n <= 0)
			return -1;
		got += (size_t)n;
	}
	return 0;
}

/* One session; returns when the client or the script closes it. */
static void serve(struct fake_device *fake, int fd)
{
	static _Thread_local uint8_t frame[NGNFS_MSG_MAX_PAYLOAD + 64];
	struct ngnfs_buffer out;

	ngnfs_buffer_init(&out);
	for (;;) {
		struct event event = { .device = fake->device };
		struct ngnfs_msg msg;
		const char *why;
		size_t length;

		if (read_exact(fd, frame, NGNFS_MSG_HEADER_SIZE))
			break;
		CHECK(ngnfs_msg_check_header(frame, &length, &why) == 0,
		      "fake device %u: client sent a bad header: %s", fake->device, why);
		if (read_exact(fd, frame + NGNFS_MSG_HEADER_SIZE, length - NGNFS_MSG_HEADER_SIZE))
			break;
		CHECK(ngnfs_msg_decode(frame, length, &msg, &why) == 0,
		      "fake device %u: client sent an undecodable %s: %s", fake->device,
		      ngnfs_msg_type_name(msg.type), why);
		event.type = (uint8_t)msg.type;

		switch (msg.type) {
		case NGNFS_MSG_HELLO:
			ngnfs_encode_hello_reply(
			    &out, msg.request_id, 0, fake->fs_id, atomic_load(&fake->instance),
			    NGNFS_HELLO_REPLY_FORMATTED, 0, fake->device_index, DEVICES);
			break;
		case NGNFS_MSG_GET: {
			bool revoke = false;

			/* Answer in reverse order: grants need not follow the request. */
			for (uint32_t i = msg.get.count; i-- > 0;) {
				uint64_t blkno, cached;
				uint8_t access;
				static const uint8_t data[NGNFS_BLOCK_SIZE] = { 0x5a };

				ngnfs_msg_get_entry(&msg, i, &blkno, &cached, &access);
				if (ngnfs_blkno_index(blkno) == INDEX_DISCONNECT) {
					record(&event);
					goto out;
				}
				revoke |= ngnfs_blkno_index(blkno) == INDEX_REVOKE;
				ngnfs_encode_grant(&out, msg.request_id, 0, blkno, 5, access,
						   cached == 5 ? NULL : data);
				if (revoke && ngnfs_blkno_index(blkno) == INDEX_REVOKE)
					ngnfs_encode_revoke(&out, blkno, NGNFS_ACCESS_READ);
			}
			break;
		}
		case NGNFS_MSG_RELEASE:
			ngnfs_encode_status_reply(&out, NGNFS_MSG_RELEASE_REPLY, msg.request_id, 0);
			break;
		case NGNFS_MSG_WRITE: {
			uint64_t blknos[8], versions[8];
			int status = 0;

			event.phase = msg.write.phase;
			event.set_id = msg.write.set_id;
			event.participant_count = msg.write.participant_count;
			if (msg.write.participant_count)
				event.first_participant = ngnfs_msg_write_participant(&msg, 0);
			for (uint32_t i = 0; i < msg.write.block_count && i < 8; i++) {
				uint64_t base;

				ngnfs_msg_write_block(&msg, i, &blknos[i], &base);
				versions[i] = base + 1;
				if (ngnfs_blkno_index(blknos[i]) == INDEX_STAGE_FAILS)
					status = -EIO;
				if (msg.write.phase == NGNFS_WRITE_STAGE &&
				    staged_count[fake->device] < 8)
					staged[fake->device][staged_count[fake->device]++] =
					    blknos[i];
			}
			ngnfs_encode_versions_reply(
			    &out, NGNFS_MSG_WRITE_REPLY, msg.request_id, status, msg.write.set_id,
			    blknos, versions,
			    status ? 0 : (msg.write.block_count < 8 ? msg.write.block_count : 8));
			break;
		}
		case NGNFS_MSG_COMMIT: {
			uint64_t versions[8];

			event.set_id = msg.commit.set_id;
			record(&event);
			if (atomic_load(&fake->drop_commits)) {
				atomic_fetch_sub(&fake->drop_commits, 1);
				goto out; /* "primary died after the commit, before replying" */
			}
			for (uint32_t i = 0; i < staged_count[fake->device]; i++)
				versions[i] = 100;
			ngnfs_encode_versions_reply(&out, NGNFS_MSG_COMMIT_REPLY, msg.request_id, 0,
						    msg.commit.set_id, staged[fake->device],
						    versions, staged_count[fake->device]);
			staged_count[fake->device] = 0;
			send_buffer(fd, &out);
			continue;
		}
		case NGNFS_MSG_RESOLVE:
			event.set_id = msg.resolve.set_id;
			event.outcome = msg.resolve.outcome;
			staged_count[fake->device] = 0;
			ngnfs_encode_resolve(&out, NGNFS_MSG_RESOLVE_REPLY, msg.request_id, 0,
					     msg.resolve.set_id, msg.resolve.outcome);
			break;
		case NGNFS_MSG_STATFS:
			break; /* never answered: the client's timeout must fire */
		default:
			ngnfs_encode_error(&out, msg.request_id, -EPROTO, "not scripted");
			break;
		}
		record(&event);
		if (out.length && send_buffer(fd, &out))
			break;
	}
out:
	ngnfs_buffer_free(&out);
	close(fd);
}

static void *fake_main(void *arg)
{
	struct fake_device *fake = arg;

	for (;;) {
		int fd = accept(fake->listen_fd, NULL, NULL);

		if (fd < 0)
			return NULL;
		serve(fake, fd);
	}
}

static void fake_start(struct fake_device *fake, uint16_t device)
{
	struct sockaddr_in address = { .sin_family = AF_INET,
				       .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t length = sizeof(address);

	fake->device = device;
	fake->device_index = device;
	atomic_store(&fake->instance, 1000 + device);
	memset(fake->fs_id, 0x42, sizeof(fake->fs_id));
	fake->listen_fd = socket(AF_INET, SOCK_STREAM, 0);
	CHECK(fake->listen_fd >= 0, "socket");
	CHECK(bind(fake->listen_fd, (struct sockaddr *)&address, sizeof(address)) == 0, "bind");
	CHECK(listen(fake->listen_fd, 8) == 0, "listen");
	CHECK(getsockname(fake->listen_fd, (struct sockaddr *)&address, &length) == 0,
	      "getsockname");
	snprintf(fake->address, sizeof(fake->address), "127.0.0.1:%u", ntohs(address.sin_port));
	CHECK(pthread_create(&fake->thread, NULL, fake_main, fake) == 0, "pthread_create");
}

/* ---- client side ---- */

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static uint64_t revoked_blkno;
static uint8_t revoked_access = 0xff;
static unsigned int resets_lost[DEVICES], resets_restarted[DEVICES], resets_back[DEVICES];
static uint32_t grants_done;
static uint64_t granted[16];
static int grant_errors;

static void on_revoke(void *owner, uint64_t blkno, uint8_t access)
{
	(void)owner;
	pthread_mutex_lock(&lock);
	revoked_blkno = blkno;
	revoked_access = access;
	pthread_cond_broadcast(&cond);
	pthread_mutex_unlock(&lock);
}

static void on_session_reset(void *owner, uint16_t device, bool restarted)
{
	(void)owner;
	pthread_mutex_lock(&lock);
	if (resets_lost[device] == resets_back[device]) {
		resets_lost[device]++;
	} else {
		resets_back[device]++;
		resets_restarted[device] += restarted;
	}
	pthread_cond_broadcast(&cond);
	pthread_mutex_unlock(&lock);
}

static void on_grant(void *arg, int status, uint64_t blkno, uint64_t version, uint8_t access,
		     const uint8_t *data)
{
	(void)arg;
	(void)version;
	(void)access;
	(void)data;
	pthread_mutex_lock(&lock);
	if (status)
		grant_errors++;
	if (grants_done < 16)
		granted[grants_done] = blkno;
	grants_done++;
	pthread_cond_broadcast(&cond);
	pthread_mutex_unlock(&lock);
}

static bool wait_for(bool (*condition)(void), unsigned int timeout_ms)
{
	uint64_t deadline = client_test_now_ms() + timeout_ms;
	bool ok;

	pthread_mutex_lock(&lock);
	while (!(ok = condition()) && client_test_now_ms() < deadline) {
		pthread_mutex_unlock(&lock);
		usleep(2000);
		pthread_mutex_lock(&lock);
	}
	pthread_mutex_unlock(&lock);
	return ok;
}

static bool six_grants(void)
{
	return grants_done >= 6;
}

static bool revoke_seen(void)
{
	return revoked_access != 0xff;
}

static bool device2_back(void)
{
	return resets_back[2] >= 1;
}

static bool one_grant(void)
{
	return grants_done >= 1;
}

/* Events of a type (and device, -1 any) since mark; returns the count, first order in *first. */
static uint32_t count_events(uint32_t mark, int device, uint8_t type, uint64_t set_id,
			     uint64_t *first, uint64_t *last)
{
	uint32_t count = 0;

	pthread_mutex_lock(&events_lock);
	for (uint32_t i = mark; i < event_count; i++) {
		if (events[i].type != type || (device >= 0 && events[i].device != device) ||
		    (set_id && events[i].set_id != set_id))
			continue;
		if (!count && first)
			*first = events[i].order;
		if (last)
			*last = events[i].order;
		count++;
	}
	pthread_mutex_unlock(&events_lock);
	return count;
}

static uint32_t event_mark(void)
{
	uint32_t mark;

	pthread_mutex_lock(&events_lock);
	mark = event_count;
	pthread_mutex_unlock(&events_lock);
	return mark;
}

static uint64_t last_stage_set(uint32_t mark)
{
	uint64_t set_id = 0;

	pthread_mutex_lock(&events_lock);
	for (uint32_t i = mark; i < event_count; i++) {
		if (events[i].type == NGNFS_MSG_WRITE && events[i].phase == NGNFS_WRITE_STAGE)
			set_id = events[i].set_id;
	}
	pthread_mutex_unlock(&events_lock);
	return set_id;
}

/*
 * The client's socket to a fake device: in this process, connected to
 * the device's listening port (the fake's accepted sockets have it as
 * their own port, not their peer's).
 */
static int client_socket_to(const struct fake_device *fake)
{
	struct sockaddr_in listening, peer;
	socklen_t length = sizeof(listening);
	int found = -1;

	CHECK(getsockname(fake->listen_fd, (struct sockaddr *)&listening, &length) == 0,
	      "getsockname");
	for (int fd = 0; fd < 4096; fd++) {
		length = sizeof(peer);
		if (fd == fake->listen_fd ||
		    getpeername(fd, (struct sockaddr *)&peer, &length) < 0 ||
		    peer.sin_family != AF_INET || peer.sin_port != listening.sin_port)
			continue;
		CHECK(found < 0, "device %u: two client sockets (%d and %d)", fake->device, found,
		      fd);
		found = fd;
	}
	CHECK(found >= 0, "device %u: no client socket to port %u", fake->device,
	      ntohs(listening.sin_port));
	return found;
}

static void check_socket_option(int fd, int level, int name, int expected, const char *what)
{
	int value = -1;
	socklen_t length = sizeof(value);

	CHECK(getsockopt(fd, level, name, &value, &length) == 0, "getsockopt %s: %s", what,
	      strerror(errno));
	CHECK(value == expected, "client socket: %s is %d, expected %d", what, value, expected);
}

static struct ngnfs_client *open_fake_client(uint32_t request_timeout_ms, uint32_t commit_retry_ms,
					     int *error)
{
	const char *addresses[DEVICES];
	struct ngnfs_client_ops ops = { .revoke = on_revoke, .session_reset = on_session_reset };
	struct ngnfs_client_config config = { .device_addresses = addresses,
					      .device_count = DEVICES,
					      .connect_timeout_ms = 2000,
					      .request_timeout_ms = request_timeout_ms,
					      .commit_retry_ms = commit_retry_ms };
	struct ngnfs_client *client = NULL;

	for (int d = 0; d < DEVICES; d++)
		addresses[d] = devices[d].address;
	*error = ngnfs_client_create(&config, &ops, NULL, &client);
	return client;
}

static void three_device_set(struct ngnfs_client *client, uint64_t index, int expected,
			     bool release, const char *what)
{
	static uint8_t data[NGNFS_BLOCK_SIZE];
	struct ngnfs_block_request blocks[3];
	struct ngnfs_write_set set = { .blocks = blocks,
				       .block_count = 3,
				       .release = release,
				       .release_access = NGNFS_ACCESS_NONE };
	uint64_t versions[3] = { 0 };
	int ret;

	/* caller order: device 2, 0, 1; the primary is device 0 */
	for (int i = 0; i < 3; i++)
		blocks[i] = (struct ngnfs_block_request){
			.blkno = ngnfs_blkno_make((uint16_t)((i + 2) % 3),
						  i == 0 ? index : 10 + (uint64_t)i),
			.version = 40 + (uint64_t)i,
			.access = NGNFS_ACCESS_WRITE,
			.data = data,
		};
	ret = ngnfs_client_write_set_sync(client, &set, versions);
	CHECK(ret == expected, "%s: expected %d, got %d (%s)", what, expected, ret, strerror(-ret));
	if (!expected) {
		/* participants report base + 1 at STAGE, the primary 100 at COMMIT */
		CHECK(versions[0] == 41 && versions[1] == 100 && versions[2] == 43,
		      "%s: expected versions 41 100 43 in the caller's order, got %llu %llu %llu",
		      what, (unsigned long long)versions[0], (unsigned long long)versions[1],
		      (unsigned long long)versions[2]);
	}
}

int main(void)
{
	struct ngnfs_client *client;
	uint32_t mark;
	uint64_t set_id, first, last, commit_order;
	int error;

	for (int d = 0; d < DEVICES; d++)
		fake_start(&devices[d], (uint16_t)d);

	client = open_fake_client(2000, FLOW_COMMIT_RETRY_MS, &error);
	CHECK(client, "create against fake devices: expected success, got %d", error);

	/* Every session notices a vanished server host by itself (msg.h). */
	for (int d = 0; d < DEVICES; d++) {
		int fd = client_socket_to(&devices[d]);

		check_socket_option(fd, IPPROTO_TCP, TCP_NODELAY, 1, "TCP_NODELAY");
		check_socket_option(fd, SOL_SOCKET, SO_KEEPALIVE, 1, "SO_KEEPALIVE");
		check_socket_option(fd, IPPROTO_TCP, TCP_KEEPIDLE, NGNFS_SESSION_KEEPALIVE_IDLE_S,
				    "TCP_KEEPIDLE");
		check_socket_option(fd, IPPROTO_TCP, TCP_KEEPINTVL,
				    NGNFS_SESSION_KEEPALIVE_INTERVAL_S, "TCP_KEEPINTVL");
		check_socket_option(fd, IPPROTO_TCP, TCP_KEEPCNT, NGNFS_SESSION_KEEPALIVE_PROBES,
				    "TCP_KEEPCNT");
		check_socket_option(fd, IPPROTO_TCP, TCP_USER_TIMEOUT,
				    NGNFS_SESSION_USER_TIMEOUT_MS, "TCP_USER_TIMEOUT");
	}

	/* GRANTs in reverse order, over two devices, each block once. */
	{
		struct ngnfs_block_request blocks[6];

		for (int i = 0; i < 6; i++)
			blocks[i] = (struct ngnfs_block_request){
				.blkno = ngnfs_blkno_make((uint16_t)(i % 2), 20 + (uint64_t)i),
				.access = NGNFS_ACCESS_READ
			};
		CHECK_OK(ngnfs_client_get(client, blocks, 6, on_grant, NULL), "GET of 6 blocks");
		CHECK(wait_for(six_grants, 3000), "GET of 6 blocks: expected 6 completions, got %u",
		      grants_done);
		CHECK(grants_done == 6 && grant_errors == 0,
		      "GET: expected exactly 6 successful completions, got %u (%d errors)",
		      grants_done, grant_errors);
		for (int i = 0; i < 6; i++) {
			int seen = 0;

			for (int j = 0; j < 6; j++)
				seen += granted[j] == blocks[i].blkno;
			CHECK(seen == 1, "GET: block %#llx completed %d times, expected once",
			      (unsigned long long)blocks[i].blkno, seen);
		}
	}

	/* REVOKE reaches ops->revoke. */
	{
		uint64_t version;

		CHECK_OK(ngnfs_client_get_sync(client, ngnfs_blkno_make(1, INDEX_REVOKE),
					       NGNFS_ACCESS_WRITE, 0, &version, NULL, NULL),
			 "GET before a REVOKE");
		CHECK(wait_for(revoke_seen, 3000) &&
			  revoked_blkno == ngnfs_blkno_make(1, INDEX_REVOKE) &&
			  revoked_access == NGNFS_ACCESS_READ,
		      "REVOKE: expected ops->revoke(block %#llx, READ), got block %#llx access %u",
		      (unsigned long long)ngnfs_blkno_make(1, INDEX_REVOKE),
		      (unsigned long long)revoked_blkno, revoked_access);
	}

	/* A single-device set is one WRITE SINGLE. */
	{
		static uint8_t data[NGNFS_BLOCK_SIZE];
		struct ngnfs_block_request blocks[2] = {
			{ .blkno = ngnfs_blkno_make(2, 1), .version = 7, .data = data },
			{ .blkno = ngnfs_blkno_make(2, 2), .version = 9, .data = data },
		};
		struct ngnfs_write_set set = { .blocks = blocks, .block_count = 2 };
		uint64_t versions[2];

		mark = event_mark();
		CHECK_OK(ngnfs_client_write_set_sync(client, &set, versions), "single-device set");
		CHECK(versions[0] == 8 && versions[1] == 10,
		      "single-device set: expected versions 8 10, got %llu %llu",
		      (unsigned long long)versions[0], (unsigned long long)versions[1]);
		CHECK(count_events(mark, 2, NGNFS_MSG_WRITE, 0, NULL, NULL) == 1 &&
			  count_events(mark, -1, NGNFS_MSG_COMMIT, 0, NULL, NULL) == 0,
		      "single-device set: expected one WRITE and no COMMIT");
	}

	/* Three devices: STAGE x3, then COMMIT at the primary, then RESOLVE to the others. */
	mark = event_mark();
	three_device_set(client, 30, 0, true, "3-device set with release");
	set_id = last_stage_set(mark);
	CHECK(set_id != 0, "3-device set: expected STAGE messages");
	CHECK(count_events(mark, -1, NGNFS_MSG_WRITE, set_id, NULL, &last) == 3,
	      "3-device set: expected 3 STAGEs, got %u",
	      count_events(mark, -1, NGNFS_MSG_WRITE, set_id, NULL, NULL));
	CHECK(count_events(mark, 0, NGNFS_MSG_COMMIT, set_id, &commit_order, NULL) == 1 &&
		  commit_order > last,
	      "3-device set: expected one COMMIT at device 0 after every STAGE");
	CHECK(count_events(mark, 0, NGNFS_MSG_RESOLVE, set_id, NULL, NULL) == 0,
	      "3-device set: the primary must not get a RESOLVE");
	/* RESOLVEs are fire-and-forget: give them a moment. */
	for (int i = 0;
	     i < 100 && count_events(mark, -1, NGNFS_MSG_RESOLVE, set_id, NULL, NULL) < 2; i++)
		usleep(10000);
	CHECK(count_events(mark, -1, NGNFS_MSG_RESOLVE, set_id, &first, NULL) == 2 &&
		  first > commit_order,
	      "3-device set: expected RESOLVE to devices 1 and 2 after the COMMIT");
	/* Release-after-write: a RELEASE to every device, after the commit. */
	for (int d = 0; d < DEVICES; d++) {
		for (int i = 0;
		     i < 100 && count_events(mark, d, NGNFS_MSG_RELEASE, 0, NULL, NULL) < 1; i++)
			usleep(10000);
		CHECK(
		    count_events(mark, d, NGNFS_MSG_RELEASE, 0, &first, NULL) == 1 &&
			first > commit_order,
		    "3-device set with release: expected one RELEASE at device %d after the COMMIT",
		    d);
	}
	pthread_mutex_lock(&events_lock);
	for (uint32_t i = mark; i < event_count; i++) {
		if (events[i].type == NGNFS_MSG_WRITE)
			CHECK(events[i].participant_count == 3 && events[i].first_participant == 0,
			      "STAGE: expected 3 participants with the primary (device 0) first, "
			      "got %u starting with %u",
			      events[i].participant_count, events[i].first_participant);
		if (events[i].type == NGNFS_MSG_RESOLVE)
			CHECK(events[i].outcome == NGNFS_SET_COMMITTED,
			      "RESOLVE after commit: expected COMMITTED, got %u",
			      events[i].outcome);
	}
	pthread_mutex_unlock(&events_lock);

	/* A STAGE that fails: no COMMIT, RESOLVE(ABORTED) to every participant. */
	mark = event_mark();
	three_device_set(client, INDEX_STAGE_FAILS, -EIO, false,
			 "3-device set with a failing STAGE");
	set_id = last_stage_set(mark);
	for (int i = 0;
	     i < 100 && count_events(mark, -1, NGNFS_MSG_RESOLVE, set_id, NULL, NULL) < 3; i++)
		usleep(10000);
	CHECK(count_events(mark, -1, NGNFS_MSG_COMMIT, 0, NULL, NULL) == 0,
	      "failed STAGE: expected no COMMIT");
	CHECK(count_events(mark, -1, NGNFS_MSG_RESOLVE, set_id, NULL, NULL) == 3,
	      "failed STAGE: expected RESOLVE(ABORTED) to the 3 participants, got %u",
	      count_events(mark, -1, NGNFS_MSG_RESOLVE, set_id, NULL, NULL));
	pthread_mutex_lock(&events_lock);
	for (uint32_t i = mark; i < event_count; i++) {
		if (events[i].type == NGNFS_MSG_RESOLVE)
			CHECK(events[i].outcome == NGNFS_SET_ABORTED,
			      "RESOLVE after a failed STAGE: expected ABORTED, got %u",
			      events[i].outcome);
	}
	pthread_mutex_unlock(&events_lock);

	/* COMMIT whose connection breaks: retried after reconnect, same set id. */
	mark = event_mark();
	atomic_store(&devices[0].drop_commits, 1);
	three_device_set(client, 31, 0, false, "3-device set whose first COMMIT is lost");
	set_id = last_stage_set(mark);
	CHECK(count_events(mark, 0, NGNFS_MSG_COMMIT, set_id, NULL, NULL) == 2,
	      "lost COMMIT: expected the COMMIT twice at the primary (retry after reconnect), got "
	      "%u",
	      count_events(mark, 0, NGNFS_MSG_COMMIT, set_id, NULL, NULL));
	pthread_mutex_lock(&lock);
	CHECK(resets_lost[0] == 1 && resets_back[0] == 1 && resets_restarted[0] == 0,
	      "device 0 connection loss: expected session_reset lost once, back once without "
	      "restart; got lost %u back %u restarted %u",
	      resets_lost[0], resets_back[0], resets_restarted[0]);
	pthread_mutex_unlock(&lock);

	/*
	 * COMMIT never answered: sent again for commit_retry_ms (longer than
	 * the 2 s request timeout, which must not cut it short), then the
	 * write fails with its outcome unknown (-EIO).
	 */
	{
		uint64_t start = client_test_now_ms(), elapsed;

		mark = event_mark();
		atomic_store(&devices[0].drop_commits, 1000);
		three_device_set(client, 32, -EIO, false,
				 "3-device set whose COMMITs are all lost");
		elapsed = client_test_now_ms() - start;
		atomic_store(&devices[0].drop_commits, 0);
		set_id = last_stage_set(mark);
		CHECK(elapsed >= FLOW_COMMIT_RETRY_MS - 100 &&
			  elapsed < FLOW_COMMIT_RETRY_MS + 6000,
		      "COMMITs all lost with commit_retry_ms %u: expected -EIO after about that, "
		      "got it after %llu ms",
		      FLOW_COMMIT_RETRY_MS, (unsigned long long)elapsed);
		CHECK(count_events(mark, 0, NGNFS_MSG_COMMIT, set_id, NULL, NULL) >= 2,
		      "COMMITs all lost: expected the COMMIT sent again, got it %u times",
		      count_events(mark, 0, NGNFS_MSG_COMMIT, set_id, NULL, NULL));
		CHECK_OK(client_test_wait_session(client, 0, 5000), "reconnect to device 0");
	}

	/* Request timeout. */
	{
		struct ngnfs_statfs_figures statfs;
		uint64_t start = client_test_now_ms();
		int ret = ngnfs_client_statfs_sync(client, 1, &statfs);
		uint64_t elapsed = client_test_now_ms() - start;

		CHECK(ret == -ETIMEDOUT && elapsed >= 1800 && elapsed < 4000,
		      "unanswered STATFS with a 2000 ms timeout: expected -ETIMEDOUT after 2 s, "
		      "got %d after %llu ms",
		      ret, (unsigned long long)elapsed);
	}

	/* A server "restart": new instance, connection dropped mid-GET. */
	{
		struct ngnfs_block_request block = { .blkno = ngnfs_blkno_make(2, INDEX_DISCONNECT),
						     .access = NGNFS_ACCESS_READ };

		atomic_store(&devices[2].instance, 5000);
		grants_done = 0;
		grant_errors = 0;
		CHECK_OK(ngnfs_client_get(client, &block, 1, on_grant, NULL), "GET");
		CHECK(wait_for(one_grant, 3000) && grant_errors == 1,
		      "GET on a connection the server closed: expected one failed completion, got "
		      "%u completions, %d errors",
		      grants_done, grant_errors);
		CHECK_OK(client_test_wait_session(client, 2, 5000), "reconnect to device 2");
		/* session_reset runs on the I/O thread just after the session is usable. */
		wait_for(device2_back, 2000);
		pthread_mutex_lock(&lock);
		CHECK(resets_lost[2] == 1 && resets_back[2] == 1 && resets_restarted[2] == 1,
		      "device 2 restart: expected session_reset lost once and back once saying "
		      "restarted; got lost %u back %u restarted %u",
		      resets_lost[2], resets_back[2], resets_restarted[2]);
		pthread_mutex_unlock(&lock);
	}
	ngnfs_client_destroy(client);

	/* Devices that disagree about the filesystem. */
	{
		char *log;

		devices[1].fs_id[3] ^= 1;
		client_test_capture_stderr_begin();
		client = open_fake_client(2000, 0, &error);
		log = client_test_capture_stderr_end();
		CHECK(!client && error == -ESTALE,
		      "devices of two filesystems: expected -ESTALE, got %d", error);
		CHECK(strstr(log, devices[1].address) && strstr(log, "belongs to filesystem"),
		      "devices of two filesystems: expected a message naming %s, got:\n%s",
		      devices[1].address, log);
		free(log);
		devices[1].fs_id[3] ^= 1;
	}
	printf("protocol flow against fake servers: ok\n");
	return 0;
}
