/* SPDX-License-Identifier: GPL-2.0-or-later */
#ifndef NGNFS_TEST_NFS42_XATTR_H
#define NGNFS_TEST_NFS42_XATTR_H

/*
 * A minimal NFSv4.2 client for the RFC 8276 extended attribute operations.
 *
 * It exists because the only NFS client library on the machine (Debian's
 * libnfs 4.0) speaks NFSv4.0, which has no sessions and no xattr
 * operations, and the kernel client cannot be used by unprivileged,
 * bounded tests.  So this speaks just enough of the protocol itself:
 * ONC RPC over one TCP connection (record marking, AUTH_SYS), an NFSv4.1
 * session (EXCHANGE_ID, CREATE_SESSION, RECLAIM_COMPLETE, one slot,
 * SEQUENCE first in every COMPOUND), PUTROOTFH + LOOKUP to find a file,
 * GETATTR for the xattr_support attribute, then GETXATTR, SETXATTR,
 * LISTXATTRS and REMOVEXATTR (and WRITE and COMMIT, to see the stable_how
 * and write verifier a server answers), and DESTROY_SESSION +
 * DESTROY_CLIENTID at the end.  XDR is encoded by hand; every reply is decoded with bounds
 * checks, so a short or malformed reply is an error, never a read past
 * the buffer.
 *
 * Opcodes follow RFC 8276 and ganesha's nfsv41.h: GETXATTR 72,
 * SETXATTR 73, LISTXATTRS 74, REMOVEXATTR 75.
 *
 * Names are passed as the protocol carries them: RFC 8276 xattrs live in
 * the "user" namespace implicitly, so a client sends "comment" where
 * Linux's getxattr(2) says "user.comment" (the Linux kernel client strips
 * the prefix; servers add it back when they store the xattr in a local
 * filesystem).
 *
 * Errors: every call returns 0 or a negative errno.  When the server
 * answered with an NFS error, the errno is the closest match
 * (NFS4ERR_NOXATTR -> -ENODATA, NFS4ERR_EXIST -> -EEXIST, ...) and
 * nfs42_last_status() gives the exact nfsstat4; transport and decoding
 * failures leave it at 0.  nfs42_last_error() always describes the last
 * failure with the operation, the path and the xattr name.
 *
 * Each client makes its own NFSv4 client owner (host, PID, a counter and
 * the time), so concurrent clients in one process never share state.
 *
 * XXX:
 *  - One slot, one outstanding request: a client is not thread safe (use
 *    one per thread).
 *  - No back channel, no state protection, no retransmission, no
 *    reconnection: a lost connection fails every later call.
 *  - AUTH_SYS only, with a single group.
 *  - Lease renewal happens only through the SEQUENCE of each call; an
 *    idle client expires after the server's lease time.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NFS42_FH_MAX	     128
#define NFS42_XATTR_NAME_MAX 255

/* The nfsstat4 values the tests look for (RFC 7530, 5661, 8276). */
enum {
	NFS42_OK = 0,
	NFS42_ERR_PERM = 1,
	NFS42_ERR_NOENT = 2,
	NFS42_ERR_IO = 5,
	NFS42_ERR_ACCESS = 13,
	NFS42_ERR_EXIST = 17,
	NFS42_ERR_NOTDIR = 20,
	NFS42_ERR_INVAL = 22,
	NFS42_ERR_FBIG = 27,
	NFS42_ERR_NOSPC = 28,
	NFS42_ERR_ROFS = 30,
	NFS42_ERR_NAMETOOLONG = 63,
	NFS42_ERR_STALE = 70,
	NFS42_ERR_BADHANDLE = 10001,
	NFS42_ERR_BAD_COOKIE = 10003,
	NFS42_ERR_NOTSUPP = 10004,
	NFS42_ERR_TOOSMALL = 10005,
	NFS42_ERR_SERVERFAULT = 10006,
	NFS42_ERR_BADXDR = 10036,
	NFS42_ERR_MINOR_VERS_MISMATCH = 10021,
	NFS42_ERR_OP_ILLEGAL = 10044,
	NFS42_ERR_BADSESSION = 10052,
	NFS42_ERR_NOXATTR = 10095,
	NFS42_ERR_XATTR2BIG = 10096,
};

enum nfs42_setxattr_option {
	NFS42_SETXATTR_EITHER = 0,
	NFS42_SETXATTR_CREATE = 1,  /* NFS4ERR_EXIST if the name exists */
	NFS42_SETXATTR_REPLACE = 2, /* NFS4ERR_NOXATTR if it does not */
};

struct nfs42_connect_options {
	const char *host; /* IPv4 address; NULL means 127.0.0.1 */
	uint16_t port;	  /* required */
	uint32_t uid;	  /* AUTH_SYS credential */
	uint32_t gid;
	unsigned int timeout_ms; /* per request; 0 means 10 s */
	/*
	 * Maximum request/response size asked for in CREATE_SESSION;
	 * 0 means 1 MiB, enough for 64 KiB values and long name lists.
	 */
	uint32_t max_message_size;
};

/* A file handle, with the path it came from for error messages. */
struct nfs42_fh {
	uint32_t length;
	uint8_t data[NFS42_FH_MAX];
	char path[256];
};

struct nfs42_client;

/* Connect and set up a session.  *client is NULL on failure. */
int nfs42_connect(const struct nfs42_connect_options *options, struct nfs42_client **client);

/*
 * DESTROY_SESSION, DESTROY_CLIENTID, close, free.  Returns the first error
 * (the client is freed either way).
 */
int nfs42_disconnect(struct nfs42_client *client);

/* The nfsstat4 of the last failed call (0 if it failed locally). */
uint32_t nfs42_last_status(const struct nfs42_client *client);
/* A message describing the last failure ("" if none yet). */
const char *nfs42_last_error(const struct nfs42_client *client);

/* "NFS4ERR_NOXATTR" etc., or "NFS4ERR_<number>" for unknown values. */
const char *nfs42_status_name(uint32_t status);
/* The negative errno that nfs42_* calls return for an nfsstat4. */
int nfs42_status_to_errno(uint32_t status);

/*
 * Resolve path ("/export/dir/file", from the pseudo root, "/" for the
 * root itself) with PUTROOTFH, one LOOKUP per component and GETFH.
 */
int nfs42_lookup(struct nfs42_client *client, const char *path, struct nfs42_fh *fh);

/* GETATTR xattr_support (attribute 82): does the export claim xattrs? */
int nfs42_xattr_supported(struct nfs42_client *client, const struct nfs42_fh *fh, bool *supported);

/* What a server says of its filesystem's limits (RFC 7530 attributes 27-29). */
struct nfs42_limits {
	uint64_t max_file_size;
	uint32_t max_link;
	uint32_t max_name;
};
/* GETATTR maxfilesize, maxlink and maxname; -EBADMSG if one is missing. */
int nfs42_get_limits(struct nfs42_client *client, const struct nfs42_fh *fh,
		     struct nfs42_limits *limits);

/*
 * GETXATTR.  The value is copied into buffer (up to buffer_size bytes) and
 * its full length stored in *value_length; if it does not fit the call
 * returns -ERANGE with *value_length set to the length needed.
 */
int nfs42_getxattr(struct nfs42_client *client, const struct nfs42_fh *fh, const char *name,
		   void *buffer, size_t buffer_size, size_t *value_length);

int nfs42_setxattr(struct nfs42_client *client, const struct nfs42_fh *fh, const char *name,
		   const void *value, size_t value_length, enum nfs42_setxattr_option option);

int nfs42_removexattr(struct nfs42_client *client, const struct nfs42_fh *fh, const char *name);

/* One LISTXATTRS reply: names (NUL-terminated), the cookie for the next. */
struct nfs42_xattr_names {
	uint32_t count;
	char **names;
	uint64_t next_cookie;
	bool eof;
};

/*
 * One LISTXATTRS call starting at cookie (0 for the first) with the
 * reply's name list limited to max_count bytes (RFC 8276 lxa_maxcount).
 * Free the result with nfs42_xattr_names_free().
 */
int nfs42_listxattrs(struct nfs42_client *client, const struct nfs42_fh *fh, uint64_t cookie,
		     uint32_t max_count, struct nfs42_xattr_names *names);
void nfs42_xattr_names_free(struct nfs42_xattr_names *names);

/*
 * WRITE (with the anonymous stateid) and COMMIT of the whole file, for
 * the durability tests: what the server answered, and its write verifier.
 */
#define NFS42_VERIFIER_SIZE 8

enum nfs42_stable_how {
	NFS42_UNSTABLE = 0,
	NFS42_DATA_SYNC = 1,
	NFS42_FILE_SYNC = 2,
};

struct nfs42_write_result {
	uint32_t count;
	uint32_t committed; /* enum nfs42_stable_how */
	uint8_t verifier[NFS42_VERIFIER_SIZE];
};

int nfs42_write(struct nfs42_client *client, const struct nfs42_fh *fh, uint64_t offset,
		const void *data, size_t length, enum nfs42_stable_how stable,
		struct nfs42_write_result *result);
int nfs42_commit(struct nfs42_client *client, const struct nfs42_fh *fh,
		 uint8_t verifier[NFS42_VERIFIER_SIZE]);

#endif
