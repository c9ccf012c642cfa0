/* SPDX-License-Identifier: GPL-2.0-or-later */
#ifndef NGNFS_MSG_H
#define NGNFS_MSG_H

/*
 * The protocol codec, shared by blockd and libcore.
 *
 * Encoding appends to a growable buffer: begin a frame, put the fixed
 * structures and arrays of format-msg.h in order, finish (which fills in
 * the payload length and the crc).  The typed encoders below do this for
 * each message so that callers never lay out bytes by hand.
 *
 * Decoding is two steps because frames arrive on a stream: first the
 * 32-byte header alone (magic, version, length bound), so the receiver
 * knows how much to read and can refuse an oversized frame before
 * allocating it; then the whole frame, which checks the crc and every
 * count and length of the payload and fills a struct ngnfs_msg whose
 * arrays point into the frame (no copies; the frame must outlive it).
 * Decoders return a negative errno and a static string saying what was
 * wrong, for the error reply and the log line.
 */

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include <string.h>
#include <endian.h>

#include "format-msg.h"

#define NGNFS_MSG_HEADER_SIZE ((size_t)sizeof(struct ngnfs_msg_header))

/*
 * Both ends of a session (blockd's session.c, the client's transport.c)
 * set these on its socket.  After HELLO neither has an idle timeout, so a
 * peer host that vanished without closing (power loss, a cut link) is
 * noticed by TCP keepalive while the connection is idle, and by
 * TCP_USER_TIMEOUT while data to it stays unacknowledged.
 */
#define NGNFS_SESSION_KEEPALIVE_IDLE_S	   30
#define NGNFS_SESSION_KEEPALIVE_INTERVAL_S 10
#define NGNFS_SESSION_KEEPALIVE_PROBES	   3
#define NGNFS_SESSION_USER_TIMEOUT_MS	   60000

struct ngnfs_buffer {
	uint8_t *data;
	size_t length;
	size_t capacity;
	size_t frame_start; /* offset of the frame being built */
	int error;	    /* first allocation failure, sticky */
};

void ngnfs_buffer_init(struct ngnfs_buffer *buffer);
void ngnfs_buffer_free(struct ngnfs_buffer *buffer);
void ngnfs_buffer_reset(struct ngnfs_buffer *buffer);

/* Generic frame building; several frames may be built back to back. */
void ngnfs_msg_begin(struct ngnfs_buffer *buffer, enum ngnfs_msg_type type, uint64_t request_id,
		     int status);
void ngnfs_msg_put(struct ngnfs_buffer *buffer, const void *bytes, size_t length);
void ngnfs_msg_put_zeros(struct ngnfs_buffer *buffer, size_t length);
/* Returns 0 or the buffer's sticky error (-ENOMEM, -EMSGSIZE). */
int ngnfs_msg_finish(struct ngnfs_buffer *buffer);

/*
 * Header check: magic, protocol version, payload length bound.  On
 * success *frame_length is the size of the whole frame to read.
 */
int ngnfs_msg_check_header(const void *header, size_t *frame_length, const char **why);

/* What STATFS_REPLY carries (format-msg.h). */
struct ngnfs_statfs_figures {
	uint64_t total_blocks;
	uint64_t free_blocks;
	uint64_t reserved_blocks;
	uint64_t staged_sets;
	uint64_t client_sessions;
	uint64_t group_commits;
	uint64_t commit_requests;
};

/* A decoded message.  Integers are in host order; arrays point into the frame. */
struct ngnfs_msg {
	enum ngnfs_msg_type type;
	uint64_t request_id;
	int status;
	union {
		struct {
			uint8_t fs_id[NGNFS_FS_ID_SIZE];
			uint64_t client_id;
			uint32_t flags;
			uint16_t protocol_version;
		} hello;
		struct {
			uint8_t fs_id[NGNFS_FS_ID_SIZE];
			uint64_t server_instance;
			uint32_t flags;
			uint32_t grace_ms;
			uint16_t device_index;
			uint16_t protocol_version;
			uint32_t device_count;
		} hello_reply;
		struct {
			uint8_t fs_id[NGNFS_FS_ID_SIZE];
			uint32_t device_count;
			uint16_t device_index;
		} format;
		struct {
			uint32_t count;
			const struct ngnfs_msg_get_entry *entries;
		} get;
		struct {
			uint64_t blkno;
			uint64_t version;
			uint8_t access;
			uint8_t flags;
			const uint8_t *data; /* NULL unless NGNFS_GRANT_DATA */
		} grant;
		struct {
			uint64_t blkno;
			uint8_t access;
		} revoke;
		struct {
			uint32_t count;
			const struct ngnfs_msg_release_entry *entries;
		} release;
		struct {
			uint64_t set_id;
			uint8_t phase;
			uint8_t release_access;
			uint32_t flags;
			uint16_t frame_index; /* SINGLE: this frame of frame_count */
			uint16_t frame_count;
			uint16_t participant_count;
			const __le16 *participants;
			uint32_t block_count;
			const uint8_t *blocks; /* block_count * NGNFS_WRITE_BLOCK_STRIDE bytes */
			uint32_t free_count;
			const __le64 *frees;
		} write;
		/* WRITE_REPLY, COMMIT_REPLY and ALLOC_REPLY */
		struct {
			uint64_t set_id;	/* zero for ALLOC_REPLY */
			uint32_t session_epoch; /* ALLOC_REPLY only; never zero with blocks */
			uint32_t count;
			const struct ngnfs_msg_version_entry *entries;
		} versions;
		struct {
			uint64_t set_id;
		} commit;
		/* RESOLVE and RESOLVE_REPLY */
		struct {
			uint64_t set_id;
			uint8_t outcome;
		} resolve;
		struct {
			uint32_t count;
		} alloc;
		struct {
			uint64_t blkno;
			uint64_t expected_version;
			const uint8_t *data;
		} cmpxchg;
		struct {
			uint64_t blkno;
			uint64_t version;
		} cmpxchg_reply;
		struct {
			uint32_t count;
			const __le64 *blknos;
		} read_incoherent;
		struct {
			uint32_t count;
			const uint8_t *blocks; /* count * NGNFS_INCOHERENT_BLOCK_STRIDE bytes */
		} read_incoherent_reply;
		struct ngnfs_statfs_figures statfs_reply;
		struct {
			uint16_t text_length;
			const char *text; /* not NUL terminated */
		} error;
	};
};

#define NGNFS_WRITE_BLOCK_STRIDE      (sizeof(struct ngnfs_msg_write_block) + NGNFS_BLOCK_SIZE)
#define NGNFS_INCOHERENT_BLOCK_STRIDE (sizeof(struct ngnfs_msg_incoherent_block) + NGNFS_BLOCK_SIZE)

/*
 * Decode a whole frame (header included).  Checks the crc, the type, and
 * that the payload is exactly as long as its counts say.  Returns 0,
 * -EBADMSG (framing, crc, lengths), -EPROTO (unknown type, bad field
 * value) or -EPROTONOSUPPORT (version).
 */
int ngnfs_msg_decode(const void *frame, size_t frame_length, struct ngnfs_msg *msg,
		     const char **why);

/*
 * Array accessors for decoded messages, in host order.  They copy with
 * memcpy, so they are correct for a frame at any address: frames that
 * follow an ERROR frame (whose text has any length) in a stream buffer are
 * not 8-byte aligned, and reading through the struct pointers directly
 * would then be a misaligned access (undefined behaviour, reported by
 * UBSan).  Use the accessors, not the pointers.
 */
static inline void ngnfs_msg_get_entry(const struct ngnfs_msg *msg, uint32_t i, uint64_t *blkno,
				       uint64_t *cached_version, uint8_t *access)
{
	struct ngnfs_msg_get_entry entry;

	memcpy(&entry, (const uint8_t *)msg->get.entries + (size_t)i * sizeof(entry),
	       sizeof(entry));
	*blkno = le64toh(entry.blkno);
	*cached_version = le64toh(entry.cached_version);
	*access = entry.access;
}

static inline void ngnfs_msg_release_entry(const struct ngnfs_msg *msg, uint32_t i, uint64_t *blkno,
					   uint8_t *access)
{
	struct ngnfs_msg_release_entry entry;

	memcpy(&entry, (const uint8_t *)msg->release.entries + (size_t)i * sizeof(entry),
	       sizeof(entry));
	*blkno = le64toh(entry.blkno);
	*access = entry.access;
}

static inline uint16_t ngnfs_msg_write_participant(const struct ngnfs_msg *msg, uint32_t i)
{
	__le16 device;

	memcpy(&device, (const uint8_t *)msg->write.participants + (size_t)i * sizeof(device),
	       sizeof(device));
	return le16toh(device);
}

/* Returns the block's data; blkno and base_version in host order. */
const uint8_t *ngnfs_msg_write_block(const struct ngnfs_msg *msg, uint32_t i, uint64_t *blkno,
				     uint64_t *base_version);

static inline uint64_t ngnfs_msg_write_free(const struct ngnfs_msg *msg, uint32_t i)
{
	__le64 blkno;

	memcpy(&blkno, (const uint8_t *)msg->write.frees + (size_t)i * sizeof(blkno),
	       sizeof(blkno));
	return le64toh(blkno);
}

static inline void ngnfs_msg_version_entry(const struct ngnfs_msg *msg, uint32_t i, uint64_t *blkno,
					   uint64_t *version)
{
	struct ngnfs_msg_version_entry entry;

	memcpy(&entry, (const uint8_t *)msg->versions.entries + (size_t)i * sizeof(entry),
	       sizeof(entry));
	*blkno = le64toh(entry.blkno);
	*version = le64toh(entry.version);
}

static inline uint64_t ngnfs_msg_read_incoherent_blkno(const struct ngnfs_msg *msg, uint32_t i)
{
	__le64 blkno;

	memcpy(&blkno, (const uint8_t *)msg->read_incoherent.blknos + (size_t)i * sizeof(blkno),
	       sizeof(blkno));
	return le64toh(blkno);
}

const uint8_t *ngnfs_msg_incoherent_block(const struct ngnfs_msg *msg, uint32_t i, uint64_t *blkno,
					  uint64_t *version, int *status);

/*
 * Typed encoders.  Each appends one complete frame to the buffer and
 * returns 0 or a negative errno.  Array arguments are in host order.
 */
struct ngnfs_block_request {
	uint64_t blkno;
	uint64_t version; /* cached version (GET), base version (WRITE) */
	uint8_t access;
	const uint8_t *data; /* WRITE: NGNFS_BLOCK_SIZE bytes */
};

int ngnfs_encode_hello(struct ngnfs_buffer *buffer, uint64_t request_id,
		       const uint8_t fs_id[NGNFS_FS_ID_SIZE], uint64_t client_id, uint32_t flags);
int ngnfs_encode_hello_reply(struct ngnfs_buffer *buffer, uint64_t request_id, int status,
			     const uint8_t fs_id[NGNFS_FS_ID_SIZE], uint64_t server_instance,
			     uint32_t flags, uint32_t grace_ms, uint16_t device_index,
			     uint32_t device_count);
int ngnfs_encode_format(struct ngnfs_buffer *buffer, uint64_t request_id,
			const uint8_t fs_id[NGNFS_FS_ID_SIZE], uint16_t device_index,
			uint32_t device_count);
/* Replies that carry only a status: FORMAT_REPLY, RELEASE_REPLY. */
int ngnfs_encode_status_reply(struct ngnfs_buffer *buffer, enum ngnfs_msg_type type,
			      uint64_t request_id, int status);
int ngnfs_encode_get(struct ngnfs_buffer *buffer, uint64_t request_id,
		     const struct ngnfs_block_request *blocks, uint32_t count);
/* data may be NULL: the client's cached copy is current. */
int ngnfs_encode_grant(struct ngnfs_buffer *buffer, uint64_t request_id, int status, uint64_t blkno,
		       uint64_t version, uint8_t access, const uint8_t *data);
int ngnfs_encode_revoke(struct ngnfs_buffer *buffer, uint64_t blkno, uint8_t access);
int ngnfs_encode_release(struct ngnfs_buffer *buffer, uint64_t request_id,
			 const struct ngnfs_block_request *blocks, uint32_t count);
/*
 * One frame of a WRITE: frame_index of frame_count (1 .. NGNFS_WRITE_MAX_FRAMES,
 * more than one only for phase SINGLE).
 */
int ngnfs_encode_write_frame(struct ngnfs_buffer *buffer, uint64_t request_id, uint64_t set_id,
			     uint8_t phase, uint32_t flags, uint8_t release_access,
			     const uint16_t *participants, uint16_t participant_count,
			     const struct ngnfs_block_request *blocks, uint32_t block_count,
			     const uint64_t *frees, uint32_t free_count, uint16_t frame_index,
			     uint16_t frame_count);

/* A WRITE that is the whole of its set's frames on this device. */
static inline int ngnfs_encode_write(struct ngnfs_buffer *buffer, uint64_t request_id,
				     uint64_t set_id, uint8_t phase, uint32_t flags,
				     uint8_t release_access, const uint16_t *participants,
				     uint16_t participant_count,
				     const struct ngnfs_block_request *blocks, uint32_t block_count,
				     const uint64_t *frees, uint32_t free_count)
{
	return ngnfs_encode_write_frame(buffer, request_id, set_id, phase, flags, release_access,
					participants, participant_count, blocks, block_count, frees,
					free_count, 0, 1);
}
/* type is WRITE_REPLY or COMMIT_REPLY. */
int ngnfs_encode_versions_reply(struct ngnfs_buffer *buffer, enum ngnfs_msg_type type,
				uint64_t request_id, int status, uint64_t set_id,
				const uint64_t *blknos, const uint64_t *versions, uint32_t count);
/* session_epoch must be non-zero when count is (format-msg.h). */
int ngnfs_encode_alloc_reply(struct ngnfs_buffer *buffer, uint64_t request_id, int status,
			     uint32_t session_epoch, const uint64_t *blknos,
			     const uint64_t *versions, uint32_t count);
int ngnfs_encode_commit(struct ngnfs_buffer *buffer, uint64_t request_id, uint64_t set_id);
/* type is RESOLVE or RESOLVE_REPLY. */
int ngnfs_encode_resolve(struct ngnfs_buffer *buffer, enum ngnfs_msg_type type, uint64_t request_id,
			 int status, uint64_t set_id, uint8_t outcome);
int ngnfs_encode_alloc(struct ngnfs_buffer *buffer, uint64_t request_id, uint32_t count);
int ngnfs_encode_cmpxchg(struct ngnfs_buffer *buffer, uint64_t request_id, uint64_t blkno,
			 uint64_t expected_version, const uint8_t *data);
int ngnfs_encode_cmpxchg_reply(struct ngnfs_buffer *buffer, uint64_t request_id, int status,
			       uint64_t blkno, uint64_t version);
int ngnfs_encode_read_incoherent(struct ngnfs_buffer *buffer, uint64_t request_id,
				 const uint64_t *blknos, uint32_t count);
/* Per block: data may be NULL when status is non-zero (zeros are sent). */
int ngnfs_encode_read_incoherent_reply(struct ngnfs_buffer *buffer, uint64_t request_id, int status,
				       const uint64_t *blknos, const uint64_t *versions,
				       const int *statuses, const uint8_t *const *datas,
				       uint32_t count);
int ngnfs_encode_statfs(struct ngnfs_buffer *buffer, uint64_t request_id);
int ngnfs_encode_statfs_reply(struct ngnfs_buffer *buffer, uint64_t request_id, int status,
			      const struct ngnfs_statfs_figures *figures);
int ngnfs_encode_error(struct ngnfs_buffer *buffer, uint64_t request_id, int status,
		       const char *text);

/* Names for logs: "GET", "WRITE", ...; "unknown" for anything else. */
const char *ngnfs_msg_type_name(unsigned int type);
const char *ngnfs_access_name(unsigned int access);

/*
 * crc32c as the protocol and the block store use it (ISA-L): the standard
 * CRC-32C (check value of "123456789" is 0xe3069283) continued from seed,
 * seed 0 starting a new checksum, like zlib's crc32():
 * ngnfs_crc32c(ngnfs_crc32c(0, a, n), b, m) is the checksum of a then b.
 * (Raw crc32_iscsi(buf, len, 0) is a different, non-standard value.)
 */
uint32_t ngnfs_crc32c(uint32_t seed, const void *bytes, size_t length);

#endif
