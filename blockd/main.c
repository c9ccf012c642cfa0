/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * blockd: serves one ngnfs device's blocks out of a RocksDB database.
 *
 * main() checks everything a user can get wrong (flags, config file,
 * the database folder, the listen address) before it accepts a single
 * connection, and says which of them was wrong and why; then it runs the
 * event loop until SIGTERM or SIGINT.  Shutdown stops accepting and
 * reading, lets every request already queued for the commit thread
 * become durable and be answered, and closes RocksDB cleanly, so a
 * restart finds every acknowledged write (a SIGKILL loses nothing
 * acknowledged either: replies are only sent once the batch is durable,
 * in the commit log or RocksDB's WAL).
 *
 * The port file is written (via rename, so readers never see half a
 * number) only once the listener accepts, which is what the test harness
 * and the systemd unit's users wait for.
 *
 * XXX:
 *  - No sd_notify readiness; the unit is Type=simple.
 */

#include <arpa/inet.h>
#include <errno.h>
#include <event2/thread.h>
#include <netdb.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "blockd.h"
#include "log.h"

uint64_t blockd_now_ms(void)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (uint64_t)now.tv_sec * 1000 + (uint64_t)now.tv_nsec / 1000000;
}

static void format_address(const struct sockaddr *address, char *text, size_t size)
{
	char host[INET6_ADDRSTRLEN] = "?";
	unsigned int port = 0;

	if (address->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)address;

		inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
		port = ntohs(in->sin_port);
	} else if (address->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)address;

		inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
		port = ntohs(in6->sin6_port);
	}
	snprintf(text, size, "%s:%u", host, port);
}

static void accept_callback(struct evconnlistener *listener, evutil_socket_t fd,
			    struct sockaddr *address, int length, void *arg)
{
	char peer[64];

	(void)listener;
	(void)length;
	format_address(address, peer, sizeof(peer));
	session_accept(arg, fd, peer);
}

/* Bind and listen; returns the socket or -errno after naming the address. */
static int open_listener(const char *listen_address, uint16_t *port)
{
	char host[256];
	const char *colon = strrchr(listen_address, ':');
	struct addrinfo hints = { .ai_family = AF_UNSPEC,
				  .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_PASSIVE | AI_NUMERICSERV };
	struct sockaddr_storage bound;
	socklen_t bound_length = sizeof(bound);
	struct addrinfo *result;
	char *end;
	int fd, ret, one = 1;
	unsigned long number;

	if (!colon || colon == listen_address || (size_t)(colon - listen_address) >= sizeof(host)) {
		fprintf(stderr, "blockd: listen address '%s' is not HOST:PORT\n", listen_address);
		return -EINVAL;
	}
	memcpy(host, listen_address, (size_t)(colon - listen_address));
	host[colon - listen_address] = '\0';
	if (host[0] == '[' && host[strlen(host) - 1] == ']') {
		memmove(host, host + 1, strlen(host));
		host[strlen(host) - 1] = '\0';
	}
	errno = 0;
	number = strtoul(colon + 1, &end, 10);
	if (!colon[1] || *end || errno || number > 65535) {
		fprintf(stderr, "blockd: listen address '%s' has an invalid port\n",
			listen_address);
		return -EINVAL;
	}
	ret = getaddrinfo(host, colon + 1, &hints, &result);
	if (ret) {
		fprintf(stderr, "blockd: cannot resolve listen address '%s': %s\n", listen_address,
			gai_strerror(ret));
		return -EINVAL;
	}
	fd = socket(result->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0) {
		ret = -errno;
		freeaddrinfo(result);
		return ret;
	}
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, result->ai_addr, result->ai_addrlen) < 0 || listen(fd, 128) < 0) {
		ret = -errno;
		fprintf(stderr, "blockd: cannot listen on %s: %s\n", listen_address,
			strerror(errno));
		freeaddrinfo(result);
		close(fd);
		return ret;
	}
	freeaddrinfo(result);
	getsockname(fd, (struct sockaddr *)&bound, &bound_length);
	*port = ntohs(bound.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&bound)->sin6_port
						  : ((struct sockaddr_in *)&bound)->sin_port);
	return fd;
}

static int write_port_file(const char *path, uint16_t port)
{
	char temporary[4096];
	FILE *file;

	snprintf(temporary, sizeof(temporary), "%s.tmp.%d", path, (int)getpid());
	file = fopen(temporary, "w");
	if (!file || fprintf(file, "%u\n", port) < 0 || fclose(file) != 0) {
		fprintf(stderr, "blockd: cannot write port file %s: %s\n", temporary,
			strerror(errno));
		return -errno;
	}
	if (rename(temporary, path) < 0) {
		fprintf(stderr, "blockd: cannot rename %s to port file %s: %s\n", temporary, path,
			strerror(errno));
		unlink(temporary);
		return -errno;
	}
	return 0;
}

static void shutdown_check(evutil_socket_t fd, short what, void *arg)
{
	struct blockd *server = arg;
	struct timeval flush = { 0, 50000 };

	(void)fd;
	(void)what;
	if (server->committer.pending == 0) {
		event_base_loopexit(server->base, &flush);
		return;
	}
	{
		struct timeval again = { 0, 10000 };

		event_base_once(server->base, -1, EV_TIMEOUT, shutdown_check, server, &again);
	}
}

static void signal_callback(evutil_socket_t signal_number, short what, void *arg)
{
	struct blockd *server = arg;

	(void)what;
	if (server->shutting_down)
		return;
	log_info("%s received: stopping (%llu requests still to commit)",
		 strsignal((int)signal_number), (unsigned long long)server->committer.pending);
	server->shutting_down = true;
	if (server->listener) {
		evconnlistener_free(server->listener);
		server->listener = NULL;
	}
	for (struct session *session = server->sessions.next; session != &server->sessions;
	     session = session->next)
		bufferevent_disable(session->bev, EV_READ);
	shutdown_check(-1, 0, server);
}

static void tick_callback(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	sets_tick(arg);
	grant_tick(arg);
}

static void grace_callback(evutil_socket_t fd, short what, void *arg)
{
	struct blockd *server = arg;

	(void)fd;
	(void)what;
	server->in_grace = false;
	log_info("reclaim grace period over: granting to every session");
	grant_examine_all(server);
}

static int run(struct blockd *server)
{
	struct timeval tick = { 0, 250000 };
	uint16_t port = 0;
	int fd, ret;

	/* The address first: a busy port must not leave a new database behind. */
	fd = open_listener(server->config.listen, &port);
	if (fd < 0)
		return fd;
	ret = store_open(&server->store, &server->config);
	if (ret) {
		close(fd);
		return ret;
	}
	if (server->store.formatted)
		blockd_log_set_device(server->store.device_index);

	server->base = event_base_new();
	if (!server->base)
		return -ENOMEM;
	server->store.commit_log.only_after = server->config.commit_log_only_after;
	if (!server->config.rocksdb_wal)
		commit_log_without_wal(&server->store.commit_log);
	ret = commit_start(&server->committer, server->store.db,
			   server->config.commit_log ? &server->store.commit_log : NULL,
			   server->config.sync, server->config.commit_max_batch,
			   server->config.commit_delay_ms, server->config.fail_commit_at,
			   server->base);
	if (ret)
		return ret;
	ret = alloc_init(server);
	if (!ret)
		ret = sets_load(server);
	if (ret) {
		fprintf(stderr, "blockd: cannot load database %s: %s\n", server->config.db,
			strerror(-ret));
		return ret;
	}

	server->listener =
	    evconnlistener_new(server->base, accept_callback, server,
			       LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, -1, fd);
	if (!server->listener) {
		close(fd);
		return -ENOMEM;
	}
	ret = resolver_start(server);
	if (ret)
		return ret;

	server->signal_term = evsignal_new(server->base, SIGTERM, signal_callback, server);
	server->signal_int = evsignal_new(server->base, SIGINT, signal_callback, server);
	server->tick = event_new(server->base, -1, EV_PERSIST, tick_callback, server);
	if (!server->signal_term || !server->signal_int || !server->tick)
		return -ENOMEM;
	evsignal_add(server->signal_term, NULL);
	evsignal_add(server->signal_int, NULL);
	event_add(server->tick, &tick);

	server->start_ms = blockd_now_ms();
	/*
	 * An unformatted store has no grants or reservations to reclaim, and
	 * a grace period would only make mkfs's first ALLOC wait.
	 */
	if (!server->store.created && server->store.formatted && server->config.grace_ms > 0) {
		struct timeval grace = { server->config.grace_ms / 1000,
					 (server->config.grace_ms % 1000) * 1000 };

		server->in_grace = true;
		server->grace_end = evtimer_new(server->base, grace_callback, server);
		if (!server->grace_end)
			return -ENOMEM;
		evtimer_add(server->grace_end, &grace);
	}
	sets_tick(server);
	sets_session_gone(server, NULL); /* ask about every stage found in the store */

	if (server->config.port_file) {
		ret = write_port_file(server->config.port_file, port);
		if (ret)
			return ret;
	}
	log_info("serving %s on %s (port %u, %s, %llu blocks%s%s%s)", server->config.db,
		 server->config.listen, port, server->store.formatted ? "formatted" : "unformatted",
		 (unsigned long long)server->store.total_blocks,
		 server->config.sync ? "" : ", sync=false: UNSAFE",
		 server->config.sync && !server->config.commit_log ? ", no commit log" : "",
		 server->in_grace ? ", reclaim grace" : "");
	if (server->config.commit_log_only_after)
		log_warn("tests only: after %u logged group commits only the commit log is "
			 "written (--commit-log-only-after)",
			 server->config.commit_log_only_after);

	if (server->config.fail_commit_at)
		log_warn("tests only: group commit %u will fail as a disk error would "
			 "(--fail-commit-at)",
			 server->config.fail_commit_at);
	event_base_dispatch(server->base);
	log_info("stopped after %llu group commits of %llu requests, %llu of them WRITEs taken "
		 "before their session's earlier ones were answered (commit log: %llu RocksDB "
		 "flushes to reuse it, %llu batches too large for it)",
		 (unsigned long long)server->committer.batches,
		 (unsigned long long)server->committer.ops,
		 (unsigned long long)server->overtaking_writes,
		 (unsigned long long)server->store.commit_log.flushes,
		 (unsigned long long)server->store.commit_log.direct_batches);
	return 0;
}

static void teardown(struct blockd *server)
{
	if (server->listener)
		evconnlistener_free(server->listener);
	server->listener = NULL;
	if (server->base)
		commit_stop(&server->committer);
	resolver_stop(server);
	grant_free_revokes(server);
	session_close_all(server);
	if (server->signal_term)
		event_free(server->signal_term);
	if (server->signal_int)
		event_free(server->signal_int);
	if (server->tick)
		event_free(server->tick);
	if (server->grace_end)
		event_free(server->grace_end);
	{
		size_t count;
		uint64_t *keys = u64map_keys(&server->blocks, &count);

		for (size_t i = 0; i < count; i++) {
			struct block_state *block = u64map_remove(&server->blocks, keys[i]);

			while (block->queue_head) {
				struct grant_waiter *waiter = block->queue_head;

				block->queue_head = waiter->next;
				free(waiter);
			}
			free(block->holders);
			free(block);
		}
		free(keys);
		u64map_free(&server->blocks);
	}
	sets_free(server);
	alloc_free(&server->alloc);
	if (server->base)
		event_base_free(server->base);
	store_close(&server->store);
	blockd_config_free(&server->config);
}

int main(int argc, char **argv)
{
	struct blockd server;
	int ret;

	memset(&server, 0, sizeof(server));
	server.sessions.next = server.sessions.prev = &server.sessions;
	u64map_init(&server.blocks);
	u64map_init(&server.sets);
	u64map_init(&server.outcomes);
	ret = blockd_config_parse(&server.config, argc, argv);
	if (ret) {
		blockd_config_free(&server.config);
		return ret > 0 ? 0 : 2;
	}
	blockd_log_set_level(server.config.log_level);
	signal(SIGPIPE, SIG_IGN);
	if (evthread_use_pthreads() < 0) {
		fprintf(stderr, "blockd: libevent has no pthreads support\n");
		return 1;
	}
	if (getrandom(&server.server_instance, sizeof(server.server_instance), 0) !=
	    sizeof(server.server_instance))
		server.server_instance = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);

	ret = run(&server);
	teardown(&server);
	return ret ? 1 : 0;
}
