/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The resolver thread: asks a set's primary what became of it.
 *
 * A participant with an in-doubt stage connects to the primary named by
 * the --peers manifest, opens a peer session (HELLO with
 * NGNFS_HELLO_PEER and this device's fs id) and sends RESOLVE(UNKNOWN).
 * This is plain blocking socket code with timeouts on its own thread,
 * so that a slow or dead primary never stalls the event loop; answers go
 * back to the loop through an event, and sets.c decides what to do with
 * them.  Failures are retried by the loop's periodic tick.
 *
 * The manifest is read at every question, because it may be written
 * after blockd started (the test harness does exactly that) and an
 * operator may move a device.
 *
 * Shutdown must not wait out the timeouts of a question to a primary
 * that is itself stopping or hung (several seconds per call, longer than
 * a supervisor waits): the socket in use is registered under the lock,
 * and resolver_stop() shuts it down, which wakes a blocked connect, send
 * or recv at once.  Closing happens under the same lock, so the stop
 * never touches a descriptor number that was already reused.
 *
 * XXX:
 *  - One connection per question; a burst of in-doubt sets after a
 *    restart connects once per set.
 *  - IPv4 and host names resolved with getaddrinfo, no IPv6 brackets.
 */

#include <endian.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "blockd.h"
#include "log.h"
#include "manifest.h"

#define RESOLVER_TIMEOUT_MS 3000

struct resolver_job {
	struct resolver_job *next;
	uint64_t set_id;
	uint16_t primary;
	int status;
	uint8_t outcome;
	uint8_t fs_id[NGNFS_FS_ID_SIZE]; /* copied by resolver_ask(), see there */
};

struct resolver {
	struct blockd *server;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t wake;
	struct resolver_job *todo;
	struct resolver_job *done;
	struct event *done_event;
	bool stopping;
	bool running;
	int question_fd; /* socket of the question being asked, -1 between questions */
	char *peers;
	uint64_t client_id;
};

static int write_all(int fd, const uint8_t *bytes, size_t length)
{
	while (length) {
		ssize_t done = send(fd, bytes, length, MSG_NOSIGNAL);

		if (done < 0) {
			if (errno == EINTR)
				continue;
			return errno == EAGAIN ? -ETIMEDOUT : -errno;
		}
		bytes += done;
		length -= (size_t)done;
	}
	return 0;
}

static int read_all(int fd, uint8_t *bytes, size_t length)
{
	while (length) {
		ssize_t done = recv(fd, bytes, length, 0);

		if (done == 0)
			return -ECONNRESET;
		if (done < 0) {
			if (errno == EINTR)
				continue;
			return errno == EAGAIN ? -ETIMEDOUT : -errno;
		}
		bytes += done;
		length -= (size_t)done;
	}
	return 0;
}

/* Read one frame into *frame (malloc()ed) and decode it. */
static int read_frame(int fd, uint8_t **frame, struct ngnfs_msg *msg)
{
	uint8_t header[NGNFS_MSG_HEADER_SIZE];
	const char *why;
	size_t length;
	int ret;

	*frame = NULL;
	ret = read_all(fd, header, sizeof(header));
	if (ret)
		return ret;
	ret = ngnfs_msg_check_header(header, &length, &why);
	if (ret)
		return ret;
	*frame = malloc(length);
	if (!*frame)
		return -ENOMEM;
	memcpy(*frame, header, sizeof(header));
	ret = read_all(fd, *frame + sizeof(header), length - sizeof(header));
	if (!ret)
		ret = ngnfs_msg_decode(*frame, length, msg, &why);
	return ret;
}

/* Close the question's socket (see the file comment for the lock). */
static void close_question(struct resolver *resolver, int fd)
{
	pthread_mutex_lock(&resolver->lock);
	resolver->question_fd = -1;
	close(fd);
	pthread_mutex_unlock(&resolver->lock);
}

static int connect_to(struct resolver *resolver, const char *address)
{
	char host[256];
	const char *colon = strrchr(address, ':');
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM };
	struct addrinfo *result;
	struct timeval timeout = { .tv_sec = RESOLVER_TIMEOUT_MS / 1000,
				   .tv_usec = (RESOLVER_TIMEOUT_MS % 1000) * 1000 };
	int fd, ret, one = 1;

	if (!colon || (size_t)(colon - address) >= sizeof(host))
		return -EINVAL;
	memcpy(host, address, (size_t)(colon - address));
	host[colon - address] = '\0';
	ret = getaddrinfo(host, colon + 1, &hints, &result);
	if (ret)
		return -EHOSTUNREACH;
	fd = socket(result->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		ret = -errno;
		freeaddrinfo(result);
		return ret;
	}
	pthread_mutex_lock(&resolver->lock);
	if (resolver->stopping) {
		pthread_mutex_unlock(&resolver->lock);
		close(fd);
		freeaddrinfo(result);
		return -ECANCELED;
	}
	resolver->question_fd = fd;
	pthread_mutex_unlock(&resolver->lock);
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	ret = connect(fd, result->ai_addr, result->ai_addrlen);
	freeaddrinfo(result);
	if (ret < 0) {
		ret = errno == EINPROGRESS ? -ETIMEDOUT : -errno;
		close_question(resolver, fd);
		return ret;
	}
	return fd;
}

static int ask(struct resolver *resolver, struct resolver_job *job)
{
	struct ngnfs_manifest manifest = { 0 };
	struct ngnfs_buffer buffer;
	struct ngnfs_msg msg;
	uint8_t *frame = NULL;
	int fd = -1, ret;

	if (!resolver->peers) {
		log_warn("set %016llx: no --peers manifest to find primary device %u",
			 (unsigned long long)job->set_id, job->primary);
		return -ENOENT;
	}
	ret = ngnfs_manifest_load(resolver->peers, &manifest);
	if (ret)
		return ret;
	if (job->primary >= manifest.device_count) {
		log_warn("set %016llx: peers manifest %s has no device %u",
			 (unsigned long long)job->set_id, resolver->peers, job->primary);
		ngnfs_manifest_free(&manifest);
		return -ENOENT;
	}
	fd = connect_to(resolver, manifest.addresses[job->primary]);
	if (fd < 0) {
		log_warn("set %016llx: cannot connect to primary device %u at %s: %s",
			 (unsigned long long)job->set_id, job->primary,
			 manifest.addresses[job->primary], strerror(-fd));
		ngnfs_manifest_free(&manifest);
		return fd;
	}
	ngnfs_manifest_free(&manifest);

	ngnfs_buffer_init(&buffer);
	ret = ngnfs_encode_hello(&buffer, 1, job->fs_id, resolver->client_id, NGNFS_HELLO_PEER);
	if (!ret)
		ret = ngnfs_encode_resolve(&buffer, NGNFS_MSG_RESOLVE, 2, 0, job->set_id,
					   NGNFS_SET_UNKNOWN);
	if (!ret)
		ret = write_all(fd, buffer.data, buffer.length);
	ngnfs_buffer_free(&buffer);
	if (!ret)
		ret = read_frame(fd, &frame, &msg);
	if (!ret && (msg.type != NGNFS_MSG_HELLO_REPLY || msg.status))
		ret = msg.status ? msg.status : -EPROTO;
	free(frame);
	frame = NULL;
	if (!ret)
		ret = read_frame(fd, &frame, &msg);
	if (!ret && msg.type != NGNFS_MSG_RESOLVE_REPLY)
		ret = -EPROTO;
	if (!ret && msg.status)
		ret = msg.status;
	if (!ret)
		job->outcome = msg.resolve.outcome;
	free(frame);
	close_question(resolver, fd);
	return ret;
}

static void *resolver_thread(void *arg)
{
	struct resolver *resolver = arg;

	pthread_mutex_lock(&resolver->lock);
	while (!resolver->stopping) {
		struct resolver_job *job = resolver->todo;

		if (!job) {
			pthread_cond_wait(&resolver->wake, &resolver->lock);
			continue;
		}
		resolver->todo = job->next;
		pthread_mutex_unlock(&resolver->lock);

		job->status = ask(resolver, job);

		pthread_mutex_lock(&resolver->lock);
		job->next = resolver->done;
		resolver->done = job;
		event_active(resolver->done_event, EV_READ, 0);
	}
	pthread_mutex_unlock(&resolver->lock);
	return NULL;
}

static void resolver_done(evutil_socket_t fd, short what, void *arg)
{
	struct resolver *resolver = arg;
	struct resolver_job *job;

	(void)fd;
	(void)what;
	pthread_mutex_lock(&resolver->lock);
	job = resolver->done;
	resolver->done = NULL;
	pthread_mutex_unlock(&resolver->lock);
	while (job) {
		struct resolver_job *next = job->next;

		sets_resolved(resolver->server, job->set_id, job->status, job->outcome);
		free(job);
		job = next;
	}
}

int resolver_start(struct blockd *server)
{
	struct resolver *resolver = calloc(1, sizeof(*resolver));
	int ret;

	if (!resolver)
		return -ENOMEM;
	resolver->server = server;
	resolver->peers = server->config.peers;
	resolver->client_id = server->server_instance;
	resolver->question_fd = -1;
	pthread_mutex_init(&resolver->lock, NULL);
	pthread_cond_init(&resolver->wake, NULL);
	resolver->done_event = event_new(server->base, -1, 0, resolver_done, resolver);
	if (!resolver->done_event) {
		free(resolver);
		return -ENOMEM;
	}
	ret = -pthread_create(&resolver->thread, NULL, resolver_thread, resolver);
	if (ret) {
		event_free(resolver->done_event);
		free(resolver);
		return ret;
	}
	resolver->running = true;
	server->resolver = resolver;
	return 0;
}

void resolver_stop(struct blockd *server)
{
	struct resolver *resolver = server->resolver;
	struct resolver_job *job;

	if (!resolver)
		return;
	pthread_mutex_lock(&resolver->lock);
	resolver->stopping = true;
	/* Wake a question blocked on a primary that is stopping or hung. */
	if (resolver->question_fd >= 0)
		shutdown(resolver->question_fd, SHUT_RDWR);
	pthread_cond_signal(&resolver->wake);
	pthread_mutex_unlock(&resolver->lock);
	pthread_join(resolver->thread, NULL);
	for (int list = 0; list < 2; list++) {
		job = list ? resolver->done : resolver->todo;
		while (job) {
			struct resolver_job *next = job->next;

			free(job);
			job = next;
		}
	}
	event_free(resolver->done_event);
	pthread_mutex_destroy(&resolver->lock);
	pthread_cond_destroy(&resolver->wake);
	free(resolver);
	server->resolver = NULL;
}

void resolver_ask(struct blockd *server, uint64_t set_id, uint16_t primary)
{
	struct resolver *resolver = server->resolver;
	struct resolver_job *job = calloc(1, sizeof(*job));
	struct resolver_job **tail;

	if (!job) {
		sets_resolved(server, set_id, -ENOMEM, NGNFS_SET_UNKNOWN);
		return;
	}
	job->set_id = set_id;
	job->primary = primary;
	/*
	 * The fs id is known only after FORMAT.  The job carries its own
	 * copy because the thread asks without the lock: a field shared with
	 * the loop would be rewritten here while a question in flight reads
	 * it (a data race TSan reported).
	 */
	memcpy(job->fs_id, server->store.fs_id, NGNFS_FS_ID_SIZE);
	pthread_mutex_lock(&resolver->lock);
	for (tail = &resolver->todo; *tail; tail = &(*tail)->next)
		;
	*tail = job;
	pthread_cond_signal(&resolver->wake);
	pthread_mutex_unlock(&resolver->lock);
}
