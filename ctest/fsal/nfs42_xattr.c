/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The NFSv4.2 xattr client: hand-written XDR over ONC RPC on TCP.
 * See nfs42_xattr.h for what it speaks and why it exists.
 *
 * Every call is one synchronous COMPOUND on the single session slot, so
 * the slot's sequence id is simply "last acknowledged + 1" and advances
 * only when the server accepted the SEQUENCE op (RFC 8881 2.10.6.1: a
 * SEQUENCE that fails does not consume the sequence id).
 *
 * Decoding never trusts a length from the wire: each read is checked
 * against what is left of the reply, opaque lengths against the limit the
 * protocol gives them, array counts against what the remaining bytes can
 * hold, so a truncated or hostile reply is -EBADMSG with a message saying
 * which operation's reply was bad.
 *
 * XXX:
 *  - Replies to ops we did not send (a server bug) are reported, not
 *    skipped: the decoder only knows the results of the ops it sends.
 *  - The AUTH_SYS stamp and machine name are fixed; nothing here is
 *    meant for long-lived use.
 */

#include "nfs42_xattr.h"

#include <inttypes.h>
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define RPC_CALL	    0
#define RPC_REPLY	    1
#define RPC_VERSION	    2
#define RPC_MSG_ACCEPTED    0
#define RPC_MSG_DENIED	    1
#define RPC_AUTH_NONE	    0
#define RPC_AUTH_SYS	    1
#define RPC_LAST_FRAGMENT   0x80000000u
#define NFS_PROGRAM	    100003
#define NFS_V4		    4
#define NFS_PROC_COMPOUND   1
#define NFS_MINOR_VERSION   2
#define NFS4_SESSIONID_SIZE 16
#define NFS4_VERIFIER_SIZE  8
#define NFS4_OPAQUE_LIMIT   1024

enum nfs4_opcode {
	OP_COMMIT = 5,
	OP_GETATTR = 9,
	OP_GETFH = 10,
	OP_LOOKUP = 15,
	OP_PUTFH = 22,
	OP_PUTROOTFH = 24,
	OP_EXCHANGE_ID = 42,
	OP_CREATE_SESSION = 43,
	OP_DESTROY_SESSION = 44,
	OP_WRITE = 38,
	OP_SEQUENCE = 53,
	OP_DESTROY_CLIENTID = 57,
	OP_RECLAIM_COMPLETE = 58,
	OP_GETXATTR = 72,
	OP_SETXATTR = 73,
	OP_LISTXATTRS = 74,
	OP_REMOVEXATTR = 75,
};

#define EXCHGID4_FLAG_USE_NON_PNFS 0x00010000u
#define SP4_NONE		   0
#define FATTR4_XATTR_SUPPORT	   82
#define FATTR4_MAXFILESIZE	   27
#define FATTR4_MAXLINK		   28
#define FATTR4_MAXNAME		   29
#define NFS4ERR_COMPLETE_ALREADY   10054
#define NFS42_DEFAULT_TIMEOUT_MS   10000
#define NFS42_DEFAULT_MAX_MESSAGE  (1024 * 1024)

struct nfs42_client {
	int fd;
	uint32_t next_xid;
	uint32_t uid;
	uint32_t gid;
	uint64_t clientid;
	bool have_clientid;
	uint8_t sessionid[NFS4_SESSIONID_SIZE];
	bool have_session;
	uint32_t slot_sequence; /* last sequence id the server accepted */
	uint32_t max_request;
	uint32_t max_response;
	char endpoint[64];
	uint8_t *reply;
	size_t reply_capacity;
	uint32_t last_status;
	char context[400]; /* "GETXATTR \"name\" on /path" */
	char error[1024];
};

/* ---- XDR encoding ------------------------------------------------------ */

struct xdr_out {
	uint8_t *data;
	size_t length;
	size_t capacity;
	bool failed;
};

static void put_bytes(struct xdr_out *out, const void *bytes, size_t length)
{
	if (out->failed)
		return;
	if (out->length + length > out->capacity) {
		size_t capacity = out->capacity ? out->capacity : 1024;
		uint8_t *data;

		while (capacity < out->length + length)
			capacity *= 2;
		data = realloc(out->data, capacity);
		if (!data) {
			out->failed = true;
			return;
		}
		out->data = data;
		out->capacity = capacity;
	}
	memcpy(out->data + out->length, bytes, length);
	out->length += length;
}

static void put_u32(struct xdr_out *out, uint32_t value)
{
	uint32_t wire = htonl(value);

	put_bytes(out, &wire, 4);
}

static void put_u64(struct xdr_out *out, uint64_t value)
{
	put_u32(out, (uint32_t)(value >> 32));
	put_u32(out, (uint32_t)value);
}

static void put_padding(struct xdr_out *out, size_t length)
{
	static const uint8_t zeros[4];

	if (length % 4)
		put_bytes(out, zeros, 4 - length % 4);
}

static void put_fixed_opaque(struct xdr_out *out, const void *bytes, size_t length)
{
	put_bytes(out, bytes, length);
	put_padding(out, length);
}

static void put_opaque(struct xdr_out *out, const void *bytes, size_t length)
{
	put_u32(out, (uint32_t)length);
	put_fixed_opaque(out, bytes, length);
}

static void put_string(struct xdr_out *out, const char *string)
{
	put_opaque(out, string, strlen(string));
}

/* ---- XDR decoding ------------------------------------------------------ */

struct xdr_in {
	const uint8_t *data;
	size_t length;
	size_t position;
};

static size_t padded(size_t length)
{
	return (length + 3) & ~(size_t)3;
}

static int get_u32(struct xdr_in *in, uint32_t *value)
{
	uint32_t wire;

	if (in->length - in->position < 4)
		return -EBADMSG;
	memcpy(&wire, in->data + in->position, 4);
	in->position += 4;
	*value = ntohl(wire);
	return 0;
}

static int get_u64(struct xdr_in *in, uint64_t *value)
{
	uint32_t high;
	uint32_t low;

	if (get_u32(in, &high) < 0 || get_u32(in, &low) < 0)
		return -EBADMSG;
	*value = (uint64_t)high << 32 | low;
	return 0;
}

static int get_fixed_opaque(struct xdr_in *in, void *bytes, size_t length)
{
	if (in->length - in->position < padded(length))
		return -EBADMSG;
	memcpy(bytes, in->data + in->position, length);
	in->position += padded(length);
	return 0;
}

/* A variable-length opaque, referenced in place; max is the XDR bound. */
static int get_opaque_ref(struct xdr_in *in, uint32_t max, const uint8_t **bytes, uint32_t *length)
{
	uint32_t wire_length;

	if (get_u32(in, &wire_length) < 0 || wire_length > max ||
	    in->length - in->position < padded(wire_length))
		return -EBADMSG;
	*bytes = in->data + in->position;
	*length = wire_length;
	in->position += padded(wire_length);
	return 0;
}

static int skip_opaque(struct xdr_in *in, uint32_t max)
{
	const uint8_t *bytes;
	uint32_t length;

	return get_opaque_ref(in, max, &bytes, &length);
}

/* ---- errors ------------------------------------------------------------ */

static const struct {
	uint32_t status;
	const char *name;
	int error;
} status_table[] = {
	{ NFS42_OK, "NFS4_OK", 0 },
	{ NFS42_ERR_PERM, "NFS4ERR_PERM", -EPERM },
	{ NFS42_ERR_NOENT, "NFS4ERR_NOENT", -ENOENT },
	{ NFS42_ERR_IO, "NFS4ERR_IO", -EIO },
	{ NFS42_ERR_ACCESS, "NFS4ERR_ACCESS", -EACCES },
	{ NFS42_ERR_EXIST, "NFS4ERR_EXIST", -EEXIST },
	{ NFS42_ERR_NOTDIR, "NFS4ERR_NOTDIR", -ENOTDIR },
	{ NFS42_ERR_INVAL, "NFS4ERR_INVAL", -EINVAL },
	{ NFS42_ERR_FBIG, "NFS4ERR_FBIG", -EFBIG },
	{ NFS42_ERR_NOSPC, "NFS4ERR_NOSPC", -ENOSPC },
	{ NFS42_ERR_ROFS, "NFS4ERR_ROFS", -EROFS },
	{ NFS42_ERR_NAMETOOLONG, "NFS4ERR_NAMETOOLONG", -ENAMETOOLONG },
	{ NFS42_ERR_STALE, "NFS4ERR_STALE", -ESTALE },
	{ NFS42_ERR_BADHANDLE, "NFS4ERR_BADHANDLE", -EBADF },
	{ NFS42_ERR_BAD_COOKIE, "NFS4ERR_BAD_COOKIE", -EINVAL },
	{ NFS42_ERR_NOTSUPP, "NFS4ERR_NOTSUPP", -EOPNOTSUPP },
	{ NFS42_ERR_TOOSMALL, "NFS4ERR_TOOSMALL", -EMSGSIZE },
	{ NFS42_ERR_SERVERFAULT, "NFS4ERR_SERVERFAULT", -EREMOTEIO },
	{ NFS42_ERR_MINOR_VERS_MISMATCH, "NFS4ERR_MINOR_VERS_MISMATCH", -EPROTONOSUPPORT },
	{ NFS42_ERR_BADXDR, "NFS4ERR_BADXDR", -EPROTO },
	{ NFS42_ERR_OP_ILLEGAL, "NFS4ERR_OP_ILLEGAL", -EOPNOTSUPP },
	{ NFS42_ERR_BADSESSION, "NFS4ERR_BADSESSION", -ENOTCONN },
	{ NFS4ERR_COMPLETE_ALREADY, "NFS4ERR_COMPLETE_ALREADY", -EALREADY },
	{ NFS42_ERR_NOXATTR, "NFS4ERR_NOXATTR", -ENODATA },
	{ NFS42_ERR_XATTR2BIG, "NFS4ERR_XATTR2BIG", -E2BIG },
};

const char *nfs42_status_name(uint32_t status)
{
	static __thread char unknown[32];
	size_t i;

	for (i = 0; i < sizeof(status_table) / sizeof(status_table[0]); i++)
		if (status_table[i].status == status)
			return status_table[i].name;
	snprintf(unknown, sizeof(unknown), "NFS4ERR_%u", status);
	return unknown;
}

int nfs42_status_to_errno(uint32_t status)
{
	size_t i;

	for (i = 0; i < sizeof(status_table) / sizeof(status_table[0]); i++)
		if (status_table[i].status == status)
			return status_table[i].error;
	return -EREMOTEIO;
}

uint32_t nfs42_last_status(const struct nfs42_client *client)
{
	return client->last_status;
}

const char *nfs42_last_error(const struct nfs42_client *client)
{
	return client->error;
}

static void set_context(struct nfs42_client *client, const char *format, ...)
    __attribute__((format(printf, 2, 3)));
static void set_context(struct nfs42_client *client, const char *format, ...)
{
	va_list args;

	va_start(args, format);
	vsnprintf(client->context, sizeof(client->context), format, args);
	va_end(args);
	client->last_status = 0;
	client->error[0] = '\0';
}

/* Record a local failure (transport, decoding) and return error. */
static int fail_local(struct nfs42_client *client, int error, const char *format, ...)
    __attribute__((format(printf, 3, 4)));
static int fail_local(struct nfs42_client *client, int error, const char *format, ...)
{
	char detail[300];
	va_list args;

	va_start(args, format);
	vsnprintf(detail, sizeof(detail), format, args);
	va_end(args);
	client->last_status = 0;
	snprintf(client->error, sizeof(client->error), "%.400s (server %.64s): %.300s: %s",
		 client->context, client->endpoint, detail, strerror(-error));
	return error;
}

static int fail_status(struct nfs42_client *client, const char *op_name, uint32_t status)
{
	client->last_status = status;
	snprintf(client->error, sizeof(client->error), "%.400s (server %.64s): %s answered %s (%u)",
		 client->context, client->endpoint, op_name, nfs42_status_name(status), status);
	return nfs42_status_to_errno(status);
}

/* ---- RPC transport ----------------------------------------------------- */

static int write_all(int fd, const uint8_t *data, size_t length)
{
	while (length > 0) {
		ssize_t written = send(fd, data, length, MSG_NOSIGNAL);

		if (written < 0) {
			if (errno == EINTR)
				continue;
			return errno == EAGAIN ? -ETIMEDOUT : -errno;
		}
		data += written;
		length -= (size_t)written;
	}
	return 0;
}

static int read_all(int fd, uint8_t *data, size_t length)
{
	while (length > 0) {
		ssize_t got = recv(fd, data, length, 0);

		if (got < 0) {
			if (errno == EINTR)
				continue;
			return errno == EAGAIN ? -ETIMEDOUT : -errno;
		}
		if (got == 0)
			return -ECONNRESET;
		data += got;
		length -= (size_t)got;
	}
	return 0;
}

/*
 * Start a call: a record mark placeholder, the RPC header with AUTH_SYS,
 * then the COMPOUND header for op_count operations.
 */
static void begin_compound(struct nfs42_client *client, struct xdr_out *out, uint32_t op_count)
{
	struct xdr_out credential = { 0 };

	put_u32(out, 0); /* record mark, filled in by rpc_call() */
	put_u32(out, client->next_xid);
	put_u32(out, RPC_CALL);
	put_u32(out, RPC_VERSION);
	put_u32(out, NFS_PROGRAM);
	put_u32(out, NFS_V4);
	put_u32(out, NFS_PROC_COMPOUND);

	put_u32(&credential, 0); /* stamp */
	put_string(&credential, "ngnfs-test");
	put_u32(&credential, client->uid);
	put_u32(&credential, client->gid);
	put_u32(&credential, 1);
	put_u32(&credential, client->gid);
	if (credential.failed)
		out->failed = true;
	put_u32(out, RPC_AUTH_SYS);
	put_opaque(out, credential.data, credential.length);
	free(credential.data);
	put_u32(out, RPC_AUTH_NONE); /* verifier */
	put_u32(out, 0);

	put_u32(out, 0); /* tag */
	put_u32(out, NFS_MINOR_VERSION);
	put_u32(out, op_count);
}

static void put_sequence(struct nfs42_client *client, struct xdr_out *out)
{
	put_u32(out, OP_SEQUENCE);
	put_fixed_opaque(out, client->sessionid, NFS4_SESSIONID_SIZE);
	put_u32(out, client->slot_sequence + 1);
	put_u32(out, 0); /* slot */
	put_u32(out, 0); /* highest slot */
	put_u32(out, 0); /* cachethis */
}

static int decode_rpc_reply(struct nfs42_client *client, struct xdr_in *in, uint32_t xid)
{
	uint32_t reply_xid, message_type, reply_status, accept_status, low, high, flavor;

	if (get_u32(in, &reply_xid) < 0 || get_u32(in, &message_type) < 0 ||
	    get_u32(in, &reply_status) < 0)
		return fail_local(client, -EBADMSG, "RPC reply shorter than its header");
	if (reply_xid != xid || message_type != RPC_REPLY)
		return fail_local(client, -EPROTO,
				  "RPC reply has xid %#x type %u, expected xid %#x type %u",
				  reply_xid, message_type, xid, RPC_REPLY);
	if (reply_status == RPC_MSG_DENIED) {
		uint32_t reject_status, detail = 0;

		if (get_u32(in, &reject_status) < 0 || get_u32(in, &detail) < 0)
			return fail_local(client, -EBADMSG, "short RPC rejection");
		return fail_local(
		    client, reject_status == 1 ? -EACCES : -EPROTO, "RPC call denied (%s %u)",
		    reject_status == 1 ? "auth error" : "RPC version mismatch", detail);
	}
	if (reply_status != RPC_MSG_ACCEPTED)
		return fail_local(client, -EPROTO, "RPC reply status %u", reply_status);
	if (get_u32(in, &flavor) < 0 || skip_opaque(in, 400) < 0 || get_u32(in, &accept_status) < 0)
		return fail_local(client, -EBADMSG, "short RPC accepted reply");
	if (accept_status == 2) {
		if (get_u32(in, &low) < 0 || get_u32(in, &high) < 0)
			return fail_local(client, -EBADMSG, "short PROG_MISMATCH reply");
		return fail_local(client, -EPROTONOSUPPORT,
				  "server speaks NFS versions %u to %u, not 4", low, high);
	}
	if (accept_status != 0)
		return fail_local(
		    client, -EPROTO, "RPC call not executed (accept status %u%s)", accept_status,
		    accept_status == 4 ? ", GARBAGE_ARGS: the server could not decode the call"
				       : "");
	return 0;
}

/*
 * Send the call in out, receive the whole reply record into the client's
 * buffer and check the RPC header.  *in is left at the COMPOUND result.
 */
static int rpc_call(struct nfs42_client *client, struct xdr_out *out, struct xdr_in *in)
{
	size_t max_reply = (size_t)client->max_response + 64 * 1024;
	uint32_t xid = client->next_xid++;
	uint32_t mark;
	size_t received = 0;
	bool last = false;
	int ret;

	if (out->failed)
		return fail_local(client, -ENOMEM, "encoding the call");
	if (client->fd < 0)
		return fail_local(client, -ENOTCONN, "connection already lost");
	mark = htonl(RPC_LAST_FRAGMENT | (uint32_t)(out->length - 4));
	memcpy(out->data, &mark, 4);
	ret = write_all(client->fd, out->data, out->length);
	if (ret < 0)
		goto lost;
	while (!last) {
		uint32_t fragment_length;

		ret = read_all(client->fd, (uint8_t *)&mark, 4);
		if (ret < 0)
			goto lost;
		mark = ntohl(mark);
		last = mark & RPC_LAST_FRAGMENT;
		fragment_length = mark & ~RPC_LAST_FRAGMENT;
		if (received + fragment_length > max_reply) {
			ret = -EMSGSIZE;
			goto lost;
		}
		if (received + fragment_length > client->reply_capacity) {
			uint8_t *reply = realloc(client->reply, received + fragment_length);

			if (!reply)
				return fail_local(client, -ENOMEM, "reply buffer");
			client->reply = reply;
			client->reply_capacity = received + fragment_length;
		}
		ret = read_all(client->fd, client->reply + received, fragment_length);
		if (ret < 0)
			goto lost;
		received += fragment_length;
	}
	in->data = client->reply;
	in->length = received;
	in->position = 0;
	return decode_rpc_reply(client, in, xid);
lost:
	/* The stream is out of step now; no later call can use it. */
	close(client->fd);
	client->fd = -1;
	return fail_local(client, ret, "RPC exchange failed, connection closed");
}

/* ---- COMPOUND results -------------------------------------------------- */

static int decode_compound_header(struct nfs42_client *client, struct xdr_in *in,
				  uint32_t *result_count)
{
	uint32_t status;

	if (get_u32(in, &status) < 0 || skip_opaque(in, NFS4_OPAQUE_LIMIT) < 0 ||
	    get_u32(in, result_count) < 0)
		return fail_local(client, -EBADMSG, "COMPOUND reply shorter than its header");
	if (*result_count == 0) {
		/* e.g. NFS4ERR_MINOR_VERS_MISMATCH: no op was looked at. */
		return fail_status(client, "COMPOUND", status);
	}
	return 0;
}

/* The next op's result header; 0 only when it is op and NFS4_OK. */
static int next_result(struct nfs42_client *client, struct xdr_in *in, uint32_t *results_left,
		       uint32_t op, const char *op_name)
{
	uint32_t result_op, status;

	if (*results_left == 0)
		return fail_local(client, -EBADMSG, "reply has no result for %s", op_name);
	(*results_left)--;
	if (get_u32(in, &result_op) < 0 || get_u32(in, &status) < 0)
		return fail_local(client, -EBADMSG, "%s result truncated", op_name);
	if (result_op != op) {
		if (status != NFS42_OK)
			return fail_status(client, op_name, status);
		return fail_local(client, -EPROTO, "result for op %u where %s (%u) was expected",
				  result_op, op_name, op);
	}
	if (status != NFS42_OK)
		return fail_status(client, op_name, status);
	return 0;
}

static int decode_sequence(struct nfs42_client *client, struct xdr_in *in, uint32_t *results_left)
{
	uint8_t sessionid[NFS4_SESSIONID_SIZE];
	uint32_t sequence, slot, highest, target, flags;
	int ret = next_result(client, in, results_left, OP_SEQUENCE, "SEQUENCE");

	if (ret < 0)
		return ret;
	if (get_fixed_opaque(in, sessionid, sizeof(sessionid)) < 0 || get_u32(in, &sequence) < 0 ||
	    get_u32(in, &slot) < 0 || get_u32(in, &highest) < 0 || get_u32(in, &target) < 0 ||
	    get_u32(in, &flags) < 0)
		return fail_local(client, -EBADMSG, "SEQUENCE result truncated");
	if (memcmp(sessionid, client->sessionid, sizeof(sessionid)) != 0 || slot != 0 ||
	    sequence != client->slot_sequence + 1)
		return fail_local(client, -EPROTO,
				  "SEQUENCE result (slot %u, sequence %u) does not match our "
				  "session, slot 0 and sequence %u",
				  slot, sequence, client->slot_sequence + 1);
	client->slot_sequence = sequence;
	return 0;
}

/*
 * Send out and decode up to and including the ops common to every
 * sequenced call: SEQUENCE and, when fh is given, PUTFH.
 */
static int call_sequenced(struct nfs42_client *client, struct xdr_out *out,
			  const struct nfs42_fh *fh, struct xdr_in *in, uint32_t *results_left)
{
	int ret = rpc_call(client, out, in);

	if (ret < 0)
		return ret;
	ret = decode_compound_header(client, in, results_left);
	if (ret < 0)
		return ret;
	ret = decode_sequence(client, in, results_left);
	if (ret < 0)
		return ret;
	if (fh)
		ret = next_result(client, in, results_left, OP_PUTFH, "PUTFH");
	return ret;
}

static void begin_sequenced(struct nfs42_client *client, struct xdr_out *out, uint32_t op_count,
			    const struct nfs42_fh *fh)
{
	begin_compound(client, out, op_count + 1 + (fh ? 1 : 0));
	put_sequence(client, out);
	if (fh) {
		put_u32(out, OP_PUTFH);
		put_opaque(out, fh->data, fh->length);
	}
}

/* ---- session setup ----------------------------------------------------- */

static int exchange_id(struct nfs42_client *client)
{
	static unsigned int connection_counter;
	struct xdr_out out = { 0 };
	struct xdr_in in;
	struct timespec now;
	char owner[256];
	char host[64] = "unknown";
	uint8_t verifier[NFS4_VERIFIER_SIZE];
	uint64_t stamp, minor_id;
	uint32_t results, sequence, flags, how, impl_count;
	unsigned int counter = __atomic_add_fetch(&connection_counter, 1, __ATOMIC_RELAXED);
	int ret;

	/*
	 * Host, PID, counter and nanosecond time: unique per connection even
	 * for many clients opened in one process in the same second.
	 */
	clock_gettime(CLOCK_REALTIME, &now);
	gethostname(host, sizeof(host) - 1);
	snprintf(owner, sizeof(owner), "ngnfs-nfs42-test/%s/%d/%u/%lld.%09ld", host, (int)getpid(),
		 counter, (long long)now.tv_sec, now.tv_nsec);
	stamp = (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec + counter;
	memcpy(verifier, &stamp, sizeof(verifier));

	set_context(client, "EXCHANGE_ID as %s", owner);
	begin_compound(client, &out, 1);
	put_u32(&out, OP_EXCHANGE_ID);
	put_fixed_opaque(&out, verifier, sizeof(verifier));
	put_string(&out, owner);
	put_u32(&out, EXCHGID4_FLAG_USE_NON_PNFS);
	put_u32(&out, SP4_NONE);
	put_u32(&out, 0); /* no client implementation id */
	ret = rpc_call(client, &out, &in);
	free(out.data);
	if (ret < 0)
		return ret;
	ret = decode_compound_header(client, &in, &results);
	if (ret == 0)
		ret = next_result(client, &in, &results, OP_EXCHANGE_ID, "EXCHANGE_ID");
	if (ret < 0)
		return ret;
	if (get_u64(&in, &client->clientid) < 0 || get_u32(&in, &sequence) < 0 ||
	    get_u32(&in, &flags) < 0 || get_u32(&in, &how) < 0)
		return fail_local(client, -EBADMSG, "EXCHANGE_ID result truncated");
	if (how != SP4_NONE)
		return fail_local(client, -EPROTO, "server insists on state protection %u", how);
	if (get_u64(&in, &minor_id) < 0 || skip_opaque(&in, NFS4_OPAQUE_LIMIT) < 0 ||
	    skip_opaque(&in, NFS4_OPAQUE_LIMIT) < 0 || get_u32(&in, &impl_count) < 0 ||
	    impl_count > 1)
		return fail_local(client, -EBADMSG, "EXCHANGE_ID server owner truncated");
	if (impl_count == 1) {
		uint64_t seconds;
		uint32_t nanoseconds;

		if (skip_opaque(&in, NFS4_OPAQUE_LIMIT) < 0 ||
		    skip_opaque(&in, NFS4_OPAQUE_LIMIT) < 0 || get_u64(&in, &seconds) < 0 ||
		    get_u32(&in, &nanoseconds) < 0)
			return fail_local(client, -EBADMSG,
					  "EXCHANGE_ID implementation id truncated");
	}
	client->have_clientid = true;
	client->slot_sequence = sequence; /* reused below as csa_sequence */
	return 0;
}

static void put_channel_attributes(struct xdr_out *out, uint32_t max_message, uint32_t max_ops)
{
	put_u32(out, 0);	   /* header pad */
	put_u32(out, max_message); /* max request */
	put_u32(out, max_message); /* max response */
	put_u32(out, 4096);	   /* max cached response (we never ask to cache) */
	put_u32(out, max_ops);
	put_u32(out, 1); /* one slot */
	put_u32(out, 0); /* no RDMA */
}

static int get_channel_attributes(struct xdr_in *in, uint32_t *max_request, uint32_t *max_response)
{
	uint32_t pad, cached, ops, requests, rdma_count, rdma;

	if (get_u32(in, &pad) < 0 || get_u32(in, max_request) < 0 ||
	    get_u32(in, max_response) < 0 || get_u32(in, &cached) < 0 || get_u32(in, &ops) < 0 ||
	    get_u32(in, &requests) < 0 || get_u32(in, &rdma_count) < 0 || rdma_count > 1)
		return -EBADMSG;
	if (rdma_count == 1 && get_u32(in, &rdma) < 0)
		return -EBADMSG;
	return 0;
}

static int create_session(struct nfs42_client *client, uint32_t max_message)
{
	struct xdr_out out = { 0 };
	struct xdr_in in;
	uint32_t results, sequence, flags, back_request, back_response;
	int ret;

	set_context(client, "CREATE_SESSION for client id %#llx",
		    (unsigned long long)client->clientid);
	begin_compound(client, &out, 1);
	put_u32(&out, OP_CREATE_SESSION);
	put_u64(&out, client->clientid);
	put_u32(&out, client->slot_sequence);
	put_u32(&out, 0); /* no persistence, no back channel on this connection */
	put_channel_attributes(&out, max_message, 16);
	put_channel_attributes(&out, 4096, 2);
	put_u32(&out, 0x40000000); /* callback program (unused) */
	put_u32(&out, 1);
	put_u32(&out, RPC_AUTH_NONE);
	ret = rpc_call(client, &out, &in);
	free(out.data);
	if (ret < 0)
		return ret;
	ret = decode_compound_header(client, &in, &results);
	if (ret == 0)
		ret = next_result(client, &in, &results, OP_CREATE_SESSION, "CREATE_SESSION");
	if (ret < 0)
		return ret;
	if (get_fixed_opaque(&in, client->sessionid, NFS4_SESSIONID_SIZE) < 0 ||
	    get_u32(&in, &sequence) < 0 || get_u32(&in, &flags) < 0 ||
	    get_channel_attributes(&in, &client->max_request, &client->max_response) < 0 ||
	    get_channel_attributes(&in, &back_request, &back_response) < 0)
		return fail_local(client, -EBADMSG, "CREATE_SESSION result truncated");
	if (client->max_response > max_message)
		client->max_response = max_message;
	client->have_session = true;
	client->slot_sequence = 0; /* a new slot's first SEQUENCE uses 1 */
	return 0;
}

static int reclaim_complete(struct nfs42_client *client)
{
	struct xdr_out out = { 0 };
	struct xdr_in in;
	uint32_t results;
	int ret;

	set_context(client, "RECLAIM_COMPLETE");
	begin_sequenced(client, &out, 1, NULL);
	put_u32(&out, OP_RECLAIM_COMPLETE);
	put_u32(&out, 0); /* for every file system */
	ret = call_sequenced(client, &out, NULL, &in, &results);
	free(out.data);
	if (ret < 0)
		return ret;
	ret = next_result(client, &in, &results, OP_RECLAIM_COMPLETE, "RECLAIM_COMPLETE");
	/* A graceless server may have nothing to reclaim: that is fine. */
	if (ret < 0 && client->last_status == NFS4ERR_COMPLETE_ALREADY) {
		client->last_status = 0;
		client->error[0] = '\0';
		ret = 0;
	}
	return ret;
}

int nfs42_connect(const struct nfs42_connect_options *options, struct nfs42_client **result)
{
	struct nfs42_client *client;
	struct sockaddr_in address = { .sin_family = AF_INET };
	const char *host = options->host ? options->host : "127.0.0.1";
	unsigned int timeout_ms =
	    options->timeout_ms ? options->timeout_ms : NFS42_DEFAULT_TIMEOUT_MS;
	uint32_t max_message =
	    options->max_message_size ? options->max_message_size : NFS42_DEFAULT_MAX_MESSAGE;
	struct timeval timeout = { .tv_sec = timeout_ms / 1000,
				   .tv_usec = (suseconds_t)(timeout_ms % 1000) * 1000 };
	struct timespec now;
	int one = 1;
	int ret;

	*result = NULL;
	client = calloc(1, sizeof(*client));
	if (!client)
		return -ENOMEM;
	snprintf(client->endpoint, sizeof(client->endpoint), "%s:%u", host, options->port);
	client->uid = options->uid;
	client->gid = options->gid;
	client->max_response = max_message;
	client->max_request = max_message;
	clock_gettime(CLOCK_REALTIME, &now);
	client->next_xid = (uint32_t)(now.tv_nsec ^ getpid());
	set_context(client, "connect");
	if (inet_pton(AF_INET, host, &address.sin_addr) != 1) {
		ret = fail_local(client, -EINVAL, "%s is not an IPv4 address", host);
		goto fail;
	}
	address.sin_port = htons(options->port);
	client->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (client->fd < 0) {
		ret = fail_local(client, -errno, "socket");
		goto fail;
	}
	setsockopt(client->fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
	setsockopt(client->fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
	setsockopt(client->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (connect(client->fd, (struct sockaddr *)&address, sizeof(address)) < 0) {
		ret = fail_local(client, -errno, "TCP connect");
		goto fail;
	}
	ret = exchange_id(client);
	if (ret == 0)
		ret = create_session(client, max_message);
	if (ret == 0)
		ret = reclaim_complete(client);
	if (ret < 0)
		goto fail;
	*result = client;
	return 0;
fail:
	/* Keep the message: the caller has no client to ask. */
	fprintf(stderr, "nfs42: %s\n", client->error);
	nfs42_disconnect(client);
	return ret;
}

static int destroy_session(struct nfs42_client *client)
{
	struct xdr_out out = { 0 };
	struct xdr_in in;
	uint32_t results;
	int ret;

	set_context(client, "DESTROY_SESSION");
	/* Alone in its COMPOUND: RFC 8881 18.37.3 */
	begin_compound(client, &out, 1);
	put_u32(&out, OP_DESTROY_SESSION);
	put_fixed_opaque(&out, client->sessionid, NFS4_SESSIONID_SIZE);
	ret = rpc_call(client, &out, &in);
	free(out.data);
	if (ret == 0)
		ret = decode_compound_header(client, &in, &results);
	if (ret == 0)
		ret = next_result(client, &in, &results, OP_DESTROY_SESSION, "DESTROY_SESSION");
	return ret;
}

static int destroy_clientid(struct nfs42_client *client)
{
	struct xdr_out out = { 0 };
	struct xdr_in in;
	uint32_t results;
	int ret;

	set_context(client, "DESTROY_CLIENTID %#llx", (unsigned long long)client->clientid);
	begin_compound(client, &out, 1);
	put_u32(&out, OP_DESTROY_CLIENTID);
	put_u64(&out, client->clientid);
	ret = rpc_call(client, &out, &in);
	free(out.data);
	if (ret == 0)
		ret = decode_compound_header(client, &in, &results);
	if (ret == 0)
		ret = next_result(client, &in, &results, OP_DESTROY_CLIENTID, "DESTROY_CLIENTID");
	return ret;
}

int nfs42_disconnect(struct nfs42_client *client)
{
	int ret = 0;
	int other;

	if (!client)
		return 0;
	if (client->fd >= 0 && client->have_session)
		ret = destroy_session(client);
	if (client->fd >= 0 && client->have_clientid) {
		other = destroy_clientid(client);
		if (ret == 0)
			ret = other;
	}
	if (client->fd >= 0)
		close(client->fd);
	free(client->reply);
	free(client);
	return ret;
}

/* ---- file handles and attributes -------------------------------------- */

int nfs42_lookup(struct nfs42_client *client, const char *path, struct nfs42_fh *fh)
{
	struct xdr_out out = { 0 };
	struct xdr_in in;
	char *copy = strdup(path);
	char *component;
	char *save = NULL;
	const uint8_t *bytes;
	uint32_t length, results, components = 0;
	int ret;

	set_context(client, "LOOKUP %s", path);
	if (!copy)
		return fail_local(client, -ENOMEM, "path copy");
	for (component = strtok_r(copy, "/", &save); component;
	     component = strtok_r(NULL, "/", &save))
		components++;
	free(copy);
	begin_sequenced(client, &out, 2 + components, NULL);
	put_u32(&out, OP_PUTROOTFH);
	copy = strdup(path);
	if (!copy) {
		free(out.data);
		return fail_local(client, -ENOMEM, "path copy");
	}
	for (component = strtok_r(copy, "/", &save); component;
	     component = strtok_r(NULL, "/", &save)) {
		put_u32(&out, OP_LOOKUP);
		put_string(&out, component);
	}
	free(copy);
	put_u32(&out, OP_GETFH);
	ret = call_sequenced(client, &out, NULL, &in, &results);
	free(out.data);
	if (ret < 0)
		return ret;
	ret = next_result(client, &in, &results, OP_PUTROOTFH, "PUTROOTFH");
	while (ret == 0 && components-- > 0)
		ret = next_result(client, &in, &results, OP_LOOKUP, "LOOKUP");
	if (ret == 0)
		ret = next_result(client, &in, &results, OP_GETFH, "GETFH");
	if (ret < 0)
		return ret;
	if (get_opaque_ref(&in, NFS42_FH_MAX, &bytes, &length) < 0)
		return fail_local(client, -EBADMSG, "GETFH result truncated or over %d bytes",
				  NFS42_FH_MAX);
	fh->length = length;
	memcpy(fh->data, bytes, length);
	snprintf(fh->path, sizeof(fh->path), "%s", path);
	return 0;
}

/*
 * GETATTR of the attributes in bitmap[0..count): the bitmap the server
 * answered (words, zero past what it sent) and its values, in attribute
 * order, in *values (pointing into the reply).
 */
static int getattr_call(struct nfs42_client *client, const struct nfs42_fh *fh,
			const uint32_t *bitmap, uint32_t count, uint32_t words[8],
			struct xdr_in *values)
{
	struct xdr_out out = { 0 };
	struct xdr_in in;
	uint32_t results, word_count, i;
	const uint8_t *bytes;
	uint32_t length;
	int ret;

	begin_sequenced(client, &out, 1, fh);
	put_u32(&out, OP_GETATTR);
	put_u32(&out, count);
	for (i = 0; i < count; i++)
		put_u32(&out, bitmap[i]);
	ret = call_sequenced(client, &out, fh, &in, &results);
	free(out.data);
	if (ret == 0)
		ret = next_result(client, &in, &results, OP_GETATTR, "GETATTR");
	if (ret < 0)
		return ret;
	if (get_u32(&in, &word_count) < 0 || word_count > 8)
		return fail_local(client, -EBADMSG, "GETATTR bitmap truncated or too long");
	memset(words, 0, 8 * sizeof(words[0]));
	for (i = 0; i < word_count; i++)
		if (get_u32(&in, &words[i]) < 0)
			return fail_local(client, -EBADMSG, "GETATTR bitmap truncated");
	if (get_opaque_ref(&in, client->max_response, &bytes, &length) < 0)
		return fail_local(client, -EBADMSG, "GETATTR values truncated");
	*values = (struct xdr_in){ .data = bytes, .length = length };
	return 0;
}

int nfs42_xattr_supported(struct nfs42_client *client, const struct nfs42_fh *fh, bool *supported)
{
	const uint32_t bitmap[3] = { 0, 0, 1u << (FATTR4_XATTR_SUPPORT - 64) };
	struct xdr_in values;
	uint32_t words[8], value;
	int ret;

	set_context(client, "GETATTR xattr_support of %s", fh->path);
	ret = getattr_call(client, fh, bitmap, 3, words, &values);
	if (ret < 0)
		return ret;
	*supported = false;
	/* We asked for one attribute only, so it is the only value present. */
	if (words[2] & bitmap[2]) {
		if (get_u32(&values, &value) < 0)
			return fail_local(client, -EBADMSG, "xattr_support value truncated");
		*supported = value != 0;
	}
	return 0;
}

int nfs42_get_limits(struct nfs42_client *client, const struct nfs42_fh *fh,
		     struct nfs42_limits *limits)
{
	const uint32_t wanted =
	    (1u << FATTR4_MAXFILESIZE) | (1u << FATTR4_MAXLINK) | (1u << FATTR4_MAXNAME);
	struct xdr_in values;
	uint32_t words[8];
	int ret;

	set_context(client, "GETATTR maxfilesize, maxlink, maxname of %s", fh->path);
	ret = getattr_call(client, fh, &wanted, 1, words, &values);
	if (ret < 0)
		return ret;
	if ((words[0] & wanted) != wanted)
		return fail_local(client, -EBADMSG, "GETATTR answered bitmap %#x, asked for %#x",
				  words[0], wanted);
	/* Values come in attribute order: 27 (uint64), 28, 29 (uint32). */
	if (get_u64(&values, &limits->max_file_size) < 0 ||
	    get_u32(&values, &limits->max_link) < 0 || get_u32(&values, &limits->max_name) < 0)
		return fail_local(client, -EBADMSG, "GETATTR limit values truncated");
	return 0;
}

/* ---- xattr operations -------------------------------------------------- */

int nfs42_getxattr(struct nfs42_client *client, const struct nfs42_fh *fh, const char *name,
		   void *buffer, size_t buffer_size, size_t *value_length)
{
	struct xdr_out out = { 0 };
	struct xdr_in in;
	const uint8_t *bytes;
	uint32_t length, results;
	int ret;

	set_context(client, "GETXATTR \"%.256s\" on %s", name, fh->path);
	begin_sequenced(client, &out, 1, fh);
	put_u32(&out, OP_GETXATTR);
	put_string(&out, name);
	ret = call_sequenced(client, &out, fh, &in, &results);
	free(out.data);
	if (ret == 0)
		ret = next_result(client, &in, &results, OP_GETXATTR, "GETXATTR");
	if (ret < 0)
		return ret;
	if (get_opaque_ref(&in, client->max_response, &bytes, &length) < 0)
		return fail_local(client, -EBADMSG, "GETXATTR value truncated");
	*value_length = length;
	if (length > buffer_size)
		return fail_local(client, -ERANGE, "value of %u bytes, buffer of %zu", length,
				  buffer_size);
	memcpy(buffer, bytes, length);
	return 0;
}

static int decode_change_info(struct nfs42_client *client, struct xdr_in *in, const char *op_name)
{
	uint32_t atomic;
	uint64_t before, after;

	if (get_u32(in, &atomic) < 0 || get_u64(in, &before) < 0 || get_u64(in, &after) < 0)
		return fail_local(client, -EBADMSG, "%s change info truncated", op_name);
	return 0;
}

int nfs42_setxattr(struct nfs42_client *client, const struct nfs42_fh *fh, const char *name,
		   const void *value, size_t value_length, enum nfs42_setxattr_option option)
{
	static const char *const option_names[] = { "EITHER", "CREATE", "REPLACE" };
	struct xdr_out out = { 0 };
	struct xdr_in in;
	uint32_t results;
	int ret;

	set_context(client, "SETXATTR4_%s \"%.256s\" (%zu bytes) on %s",
		    (unsigned int)option < 3 ? option_names[option] : "?", name, value_length,
		    fh->path);
	begin_sequenced(client, &out, 1, fh);
	put_u32(&out, OP_SETXATTR);
	put_u32(&out, (uint32_t)option);
	put_string(&out, name);
	put_opaque(&out, value, value_length);
	ret = call_sequenced(client, &out, fh, &in, &results);
	free(out.data);
	if (ret == 0)
		ret = next_result(client, &in, &results, OP_SETXATTR, "SETXATTR");
	if (ret == 0)
		ret = decode_change_info(client, &in, "SETXATTR");
	return ret;
}

int nfs42_removexattr(struct nfs42_client *client, const struct nfs42_fh *fh, const char *name)
{
	struct xdr_out out = { 0 };
	struct xdr_in in;
	uint32_t results;
	int ret;

	set_context(client, "REMOVEXATTR \"%.256s\" on %s", name, fh->path);
	begin_sequenced(client, &out, 1, fh);
	put_u32(&out, OP_REMOVEXATTR);
	put_string(&out, name);
	ret = call_sequenced(client, &out, fh, &in, &results);
	free(out.data);
	if (ret == 0)
		ret = next_result(client, &in, &results, OP_REMOVEXATTR, "REMOVEXATTR");
	if (ret == 0)
		ret = decode_change_info(client, &in, "REMOVEXATTR");
	return ret;
}

void nfs42_xattr_names_free(struct nfs42_xattr_names *names)
{
	uint32_t i;

	for (i = 0; i < names->count; i++)
		free(names->names[i]);
	free(names->names);
	memset(names, 0, sizeof(*names));
}

int nfs42_listxattrs(struct nfs42_client *client, const struct nfs42_fh *fh, uint64_t cookie,
		     uint32_t max_count, struct nfs42_xattr_names *names)
{
	struct xdr_out out = { 0 };
	struct xdr_in in;
	const uint8_t *bytes;
	uint32_t length, results, count, eof, i;
	int ret;

	memset(names, 0, sizeof(*names));
	set_context(client, "LISTXATTRS cookie %llu max %u on %s", (unsigned long long)cookie,
		    max_count, fh->path);
	begin_sequenced(client, &out, 1, fh);
	put_u32(&out, OP_LISTXATTRS);
	put_u64(&out, cookie);
	put_u32(&out, max_count);
	ret = call_sequenced(client, &out, fh, &in, &results);
	free(out.data);
	if (ret == 0)
		ret = next_result(client, &in, &results, OP_LISTXATTRS, "LISTXATTRS");
	if (ret < 0)
		return ret;
	if (get_u64(&in, &names->next_cookie) < 0 || get_u32(&in, &count) < 0 ||
	    count > (in.length - in.position) / 4)
		return fail_local(client, -EBADMSG, "LISTXATTRS name list truncated");
	names->names = calloc(count ? count : 1, sizeof(char *));
	if (!names->names)
		return fail_local(client, -ENOMEM, "%u names", count);
	for (i = 0; i < count; i++) {
		if (get_opaque_ref(&in, NFS4_OPAQUE_LIMIT, &bytes, &length) < 0) {
			ret = fail_local(client, -EBADMSG, "LISTXATTRS name %u truncated", i);
			goto fail;
		}
		names->names[i] = strndup((const char *)bytes, length);
		if (!names->names[i]) {
			ret = fail_local(client, -ENOMEM, "name %u", i);
			goto fail;
		}
		names->count = i + 1;
	}
	if (get_u32(&in, &eof) < 0) {
		ret = fail_local(client, -EBADMSG, "LISTXATTRS eof truncated");
		goto fail;
	}
	names->eof = eof != 0;
	return 0;
fail:
	nfs42_xattr_names_free(names);
	return ret;
}

/* ---- WRITE and COMMIT, for the durability tests ---- */

int nfs42_write(struct nfs42_client *client, const struct nfs42_fh *fh, uint64_t offset,
		const void *data, size_t length, enum nfs42_stable_how stable,
		struct nfs42_write_result *result)
{
	static const uint8_t anonymous_stateid[16];
	struct xdr_out out = { 0 };
	struct xdr_in in;
	uint32_t results;
	int ret;

	set_context(client, "WRITE (stable_how %d) of %zu bytes at %" PRIu64 " on %s", (int)stable,
		    length, offset, fh->path);
	begin_sequenced(client, &out, 1, fh);
	put_u32(&out, OP_WRITE);
	put_fixed_opaque(&out, anonymous_stateid, sizeof(anonymous_stateid));
	put_u64(&out, offset);
	put_u32(&out, (uint32_t)stable);
	put_opaque(&out, data, length);
	ret = call_sequenced(client, &out, fh, &in, &results);
	free(out.data);
	if (ret == 0)
		ret = next_result(client, &in, &results, OP_WRITE, "WRITE");
	if (ret < 0)
		return ret;
	if (get_u32(&in, &result->count) < 0 || get_u32(&in, &result->committed) < 0 ||
	    get_fixed_opaque(&in, result->verifier, NFS4_VERIFIER_SIZE) < 0)
		return fail_local(client, -EBADMSG, "WRITE result truncated");
	return 0;
}

int nfs42_commit(struct nfs42_client *client, const struct nfs42_fh *fh,
		 uint8_t verifier[NFS42_VERIFIER_SIZE])
{
	struct xdr_out out = { 0 };
	struct xdr_in in;
	uint32_t results;
	int ret;

	set_context(client, "COMMIT of %s", fh->path);
	begin_sequenced(client, &out, 1, fh);
	put_u32(&out, OP_COMMIT);
	put_u64(&out, 0);
	put_u32(&out, 0);
	ret = call_sequenced(client, &out, fh, &in, &results);
	free(out.data);
	if (ret == 0)
		ret = next_result(client, &in, &results, OP_COMMIT, "COMMIT");
	if (ret < 0)
		return ret;
	if (get_fixed_opaque(&in, verifier, NFS4_VERIFIER_SIZE) < 0)
		return fail_local(client, -EBADMSG, "COMMIT verifier truncated");
	return 0;
}
