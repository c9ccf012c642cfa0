/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The NFSv4.2 client (nfs42_xattr.c) against a scripted fake server that
 * sends malformed and hostile replies: every one must be an error return
 * (-EBADMSG, -EPROTO, -EMSGSIZE, -ECONNRESET), never a crash or a read
 * past the reply (run under ASan to see the latter).  Ganesha only ever
 * sends well-formed replies, so the end-to-end tests cannot show that the
 * bounds checks exist; this does.
 *
 * The fake server answers the session set-up correctly (EXCHANGE_ID,
 * CREATE_SESSION, SEQUENCE echoing the slot's sequence id,
 * RECLAIM_COMPLETE, PUTROOTFH/LOOKUP/GETFH, PUTFH) and breaks exactly the
 * reply the scenario names.
 *
 * XXX:
 *  - Scenarios cover one malformation each; no fuzzing of the decoder.
 */

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "nfs42_xattr.h"

#define check(condition, ...)                                                                      \
	do {                                                                                       \
		if (!(condition)) {                                                                \
			print_message("CHECK FAILED %s:%d: %s\n  ", __FILE__, __LINE__,            \
				      #condition);                                                 \
			print_message(__VA_ARGS__);                                                \
			print_message("\n");                                                       \
			fail();                                                                    \
		}                                                                                  \
	} while (0)

enum scenario {
	TRUNCATED_EXCHANGE_ID,
	HOSTILE_OWNER_LENGTH,
	WRONG_XID,
	OVERSIZED_RECORD,
	CLOSED_MID_REPLY,
	OVERSIZED_FILE_HANDLE,
	HOSTILE_NAME_COUNT,
	HOSTILE_VALUE_LENGTH,
	WRONG_SEQUENCE_ID,
};

struct fake_server {
	enum scenario scenario;
	int listen_fd;
	uint16_t port;
	pthread_t thread;
};

struct buffer {
	uint8_t data[4096];
	size_t length;
};

static void put32(struct buffer *b, uint32_t value)
{
	value = htonl(value);
	memcpy(b->data + b->length, &value, 4);
	b->length += 4;
}

static void put64(struct buffer *b, uint64_t value)
{
	put32(b, (uint32_t)(value >> 32));
	put32(b, (uint32_t)value);
}

static void put_bytes(struct buffer *b, const void *bytes, size_t length)
{
	memcpy(b->data + b->length, bytes, length);
	b->length += length;
	while (b->length % 4)
		b->data[b->length++] = 0;
}

static uint32_t get32(const uint8_t *data, size_t offset)
{
	uint32_t value;

	memcpy(&value, data + offset, 4);
	return ntohl(value);
}

static bool read_exact(int fd, void *data, size_t length)
{
	uint8_t *bytes = data;

	while (length) {
		ssize_t got = read(fd, bytes, length);

		if (got <= 0)
			return false;
		bytes += got;
		length -= (size_t)got;
	}
	return true;
}

static void send_record(int fd, const struct buffer *reply, uint32_t mark_override)
{
	uint32_t mark =
	    htonl(mark_override ? mark_override : (0x80000000u | (uint32_t)reply->length));

	if (write(fd, &mark, 4) != 4 || write(fd, reply->data, reply->length) < 0)
		return;
}

static const uint8_t session_id[16] = "fake-session-id";

static void put_channel(struct buffer *b)
{
	put32(b, 0);
	put32(b, 1 << 20);
	put32(b, 1 << 20);
	put32(b, 4096);
	put32(b, 16);
	put32(b, 1);
	put32(b, 0);
}

/*
 * One request in, one reply out.  Returns false to end the connection.
 * The request layout is our client's: RPC header, AUTH_SYS credential,
 * empty verifier, COMPOUND header, ops.
 */
static bool serve_one(struct fake_server *server, int fd)
{
	uint8_t request[65536];
	struct buffer reply = { .length = 0 };
	uint32_t mark, length, xid, offset, op_count, sequence = 0, i;
	uint32_t ops[32];

	if (!read_exact(fd, &mark, 4))
		return false;
	length = ntohl(mark) & 0x7fffffff;
	if (length > sizeof(request) || !read_exact(fd, request, length))
		return false;
	xid = get32(request, 0);
	offset = 24; /* xid, type, rpc version, program, version, procedure */
	offset += 4;
	offset += 4 + ((get32(request, offset) + 3) & ~3u); /* credential */
	offset += 8;					    /* empty verifier */
	offset += 4 + ((get32(request, offset) + 3) & ~3u); /* tag */
	offset += 4;					    /* minor version */
	op_count = get32(request, offset);
	offset += 4;
	ops[0] = get32(request, offset);
	if (ops[0] == 53) /* SEQUENCE: sessionid, then its sequence id */
		sequence = get32(request, offset + 4 + 16);

	put32(&reply, server->scenario == WRONG_XID ? xid + 1 : xid);
	put32(&reply, 1); /* REPLY */
	put32(&reply, 0); /* MSG_ACCEPTED */
	put32(&reply, 0); /* verifier */
	put32(&reply, 0);
	put32(&reply, 0); /* SUCCESS */
	put32(&reply, 0); /* COMPOUND status */
	put32(&reply, 0); /* tag */

	if (ops[0] == 42) { /* EXCHANGE_ID */
		put32(&reply, 1);
		put32(&reply, 42);
		put32(&reply, 0);
		put64(&reply, 0x1234);
		if (server->scenario == TRUNCATED_EXCHANGE_ID) {
			send_record(fd, &reply, 0);
			return false;
		}
		put32(&reply, 1);	   /* sequence id */
		put32(&reply, 0x00010000); /* flags */
		put32(&reply, 0);	   /* SP4_NONE */
		put64(&reply, 1);	   /* server minor id */
		if (server->scenario == HOSTILE_OWNER_LENGTH) {
			put32(&reply, 0x7fffffff); /* major id "length" */
			send_record(fd, &reply, 0);
			return false;
		}
		put_bytes(&reply, "\0\0\0\4fake", 8);
		put32(&reply, 0); /* scope */
		put32(&reply, 0); /* no implementation id */
		if (server->scenario == OVERSIZED_RECORD) {
			send_record(fd, &reply, 0xffffffffu);
			return false;
		}
		if (server->scenario == CLOSED_MID_REPLY) {
			send_record(fd, &reply, 0x80000000u | (uint32_t)(reply.length + 100));
			return false;
		}
		send_record(fd, &reply, 0);
		return true;
	}
	if (ops[0] == 43) { /* CREATE_SESSION */
		put32(&reply, 1);
		put32(&reply, 43);
		put32(&reply, 0);
		put_bytes(&reply, session_id, 16);
		put32(&reply, 1);
		put32(&reply, 0);
		put_channel(&reply);
		put_channel(&reply);
		send_record(fd, &reply, 0);
		return true;
	}
	if (ops[0] == 44 || ops[0] == 57) { /* DESTROY_SESSION, DESTROY_CLIENTID */
		put32(&reply, 1);
		put32(&reply, ops[0]);
		put32(&reply, 0);
		send_record(fd, &reply, 0);
		return true;
	}
	if (ops[0] != 53)
		return false;

	/*
	 * A sequenced call.  The client sends SEQUENCE then one of:
	 * RECLAIM_COMPLETE (2 ops), PUTROOTFH LOOKUP.. GETFH (lookup),
	 * PUTFH + xattr op (3 ops).  Tell them apart by the op count and the
	 * opcode after SEQUENCE's 32 bytes of arguments.
	 */
	ops[1] = get32(request, offset + 4 + 16 + 16);
	put32(&reply, op_count);
	put32(&reply, 53);
	put32(&reply, 0);
	put_bytes(&reply, session_id, 16);
	put32(&reply, server->scenario == WRONG_SEQUENCE_ID ? sequence + 5 : sequence);
	put32(&reply, 0);
	put32(&reply, 0);
	put32(&reply, 0);
	put32(&reply, 0);
	if (ops[1] == 58) { /* RECLAIM_COMPLETE */
		put32(&reply, 58);
		put32(&reply, 0);
	} else if (ops[1] == 24) { /* PUTROOTFH, LOOKUPs, GETFH */
		put32(&reply, 24);
		put32(&reply, 0);
		for (i = 2; i + 1 < op_count; i++) {
			put32(&reply, 15);
			put32(&reply, 0);
		}
		put32(&reply, 10);
		put32(&reply, 0);
		if (server->scenario == OVERSIZED_FILE_HANDLE) {
			put32(&reply, 129);
			memset(reply.data + reply.length, 'h', 132);
			reply.length += 132;
		} else {
			put_bytes(&reply, "\0\0\0\10handle!!", 12);
		}
	} else if (ops[1] == 22) { /* PUTFH + an xattr op */
		uint32_t fh_length = get32(request, offset + 4 + 16 + 16 + 4);
		uint32_t xattr_op =
		    get32(request, offset + 4 + 16 + 16 + 8 + ((fh_length + 3) & ~3u));

		put32(&reply, 22);
		put32(&reply, 0);
		put32(&reply, xattr_op);
		put32(&reply, 0);
		if (xattr_op == 74) { /* LISTXATTRS */
			put64(&reply, 0);
			put32(&reply, server->scenario == HOSTILE_NAME_COUNT ? 0x40000000 : 0);
			put32(&reply, 1);
		} else if (xattr_op == 72) { /* GETXATTR */
			put32(&reply, server->scenario == HOSTILE_VALUE_LENGTH ? 100000 : 0);
		} else {
			put32(&reply, 0); /* change_info4 */
			put64(&reply, 1);
			put64(&reply, 2);
		}
	} else {
		return false;
	}
	send_record(fd, &reply, 0);
	return true;
}

static void *server_main(void *argument)
{
	struct fake_server *server = argument;
	int fd = accept(server->listen_fd, NULL, NULL);

	if (fd >= 0) {
		while (serve_one(server, fd))
			;
		close(fd);
	}
	return NULL;
}

static void start_server(struct fake_server *server, enum scenario scenario)
{
	struct sockaddr_in address = { .sin_family = AF_INET };
	socklen_t length = sizeof(address);

	address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	server->scenario = scenario;
	server->listen_fd = socket(AF_INET, SOCK_STREAM, 0);
	check(server->listen_fd >= 0 &&
		  bind(server->listen_fd, (struct sockaddr *)&address, sizeof(address)) == 0 &&
		  listen(server->listen_fd, 1) == 0 &&
		  getsockname(server->listen_fd, (struct sockaddr *)&address, &length) == 0,
	      "fake server socket: %s", strerror(errno));
	server->port = ntohs(address.sin_port);
	check(pthread_create(&server->thread, NULL, server_main, server) == 0,
	      "fake server thread");
}

static void stop_server(struct fake_server *server)
{
	shutdown(server->listen_fd, SHUT_RDWR);
	pthread_join(server->thread, NULL);
	close(server->listen_fd);
}

static struct nfs42_client *connect_to(struct fake_server *server, int *ret)
{
	struct nfs42_connect_options options = { .port = server->port, .timeout_ms = 5000 };
	struct nfs42_client *client = NULL;

	*ret = nfs42_connect(&options, &client);
	return client;
}

/* Scenarios that break the session set-up: connect must fail cleanly. */
static void expect_connect_error(enum scenario scenario, int expected, const char *what)
{
	struct fake_server server;
	struct nfs42_client *client;
	int ret;

	start_server(&server, scenario);
	client = connect_to(&server, &ret);
	stop_server(&server);
	check(ret == expected && client == NULL, "%s: expected %d (%s), got %d (%s)", what,
	      expected, strerror(-expected), ret, strerror(-ret));
}

static void test_truncated_exchange_id(void **state)
{
	(void)state;
	expect_connect_error(TRUNCATED_EXCHANGE_ID, -EBADMSG, "EXCHANGE_ID result cut short");
}

static void test_hostile_opaque_length(void **state)
{
	(void)state;
	expect_connect_error(HOSTILE_OWNER_LENGTH, -EBADMSG,
			     "server owner length 0x7fffffff beyond the reply");
}

static void test_wrong_xid(void **state)
{
	(void)state;
	expect_connect_error(WRONG_XID, -EPROTO, "reply to another call");
}

static void test_oversized_record(void **state)
{
	(void)state;
	expect_connect_error(OVERSIZED_RECORD, -EMSGSIZE, "2 GiB record mark");
}

static void test_closed_mid_reply(void **state)
{
	(void)state;
	expect_connect_error(CLOSED_MID_REPLY, -ECONNRESET,
			     "record 100 bytes longer than what arrives");
}

static void test_wrong_sequence_id(void **state)
{
	(void)state;
	expect_connect_error(WRONG_SEQUENCE_ID, -EPROTO, "SEQUENCE echoes another slot sequence");
}

static void test_oversized_file_handle(void **state)
{
	struct fake_server server;
	struct nfs42_client *client;
	struct nfs42_fh fh;
	int ret;

	(void)state;
	start_server(&server, OVERSIZED_FILE_HANDLE);
	client = connect_to(&server, &ret);
	check(ret == 0, "expected the session set-up to succeed, got %d", ret);
	ret = nfs42_lookup(client, "/export/file", &fh);
	check(ret == -EBADMSG, "129-byte file handle: expected -EBADMSG, got %d (%s)", ret,
	      nfs42_last_error(client));
	nfs42_disconnect(client);
	stop_server(&server);
}

static void test_hostile_counts_in_xattr_replies(void **state)
{
	struct nfs42_xattr_names names;
	struct fake_server server;
	struct nfs42_client *client;
	struct nfs42_fh fh;
	char value[16];
	size_t length;
	int ret;

	(void)state;
	start_server(&server, HOSTILE_NAME_COUNT);
	client = connect_to(&server, &ret);
	check(ret == 0, "expected the session set-up to succeed, got %d", ret);
	check(nfs42_lookup(client, "/export/file", &fh) == 0, "lookup: %s",
	      nfs42_last_error(client));
	ret = nfs42_listxattrs(client, &fh, 0, 4096, &names);
	check(ret == -EBADMSG && names.count == 0 && names.names == NULL,
	      "2^30 names in a short reply: expected -EBADMSG and nothing allocated, got %d", ret);
	nfs42_disconnect(client);
	stop_server(&server);

	start_server(&server, HOSTILE_VALUE_LENGTH);
	client = connect_to(&server, &ret);
	check(ret == 0, "expected the session set-up to succeed, got %d", ret);
	check(nfs42_lookup(client, "/export/file", &fh) == 0, "lookup: %s",
	      nfs42_last_error(client));
	ret = nfs42_getxattr(client, &fh, "name", value, sizeof(value), &length);
	check(ret == -EBADMSG, "value of 100000 bytes in a short reply: expected -EBADMSG, got %d",
	      ret);
	/* The well-formed path on the same fake works: the checks are not too strict. */
	ret = nfs42_setxattr(client, &fh, "name", "v", 1, NFS42_SETXATTR_EITHER);
	check(ret == 0, "well-formed SETXATTR reply: expected 0, got %d (%s)", ret,
	      nfs42_last_error(client));
	nfs42_disconnect(client);
	stop_server(&server);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_truncated_exchange_id),
		cmocka_unit_test(test_hostile_opaque_length),
		cmocka_unit_test(test_wrong_xid),
		cmocka_unit_test(test_oversized_record),
		cmocka_unit_test(test_closed_mid_reply),
		cmocka_unit_test(test_wrong_sequence_id),
		cmocka_unit_test(test_oversized_file_handle),
		cmocka_unit_test(test_hostile_counts_in_xattr_replies),
	};

	return cmocka_run_group_tests_name("nfs42_decode", tests, NULL, NULL);
}
