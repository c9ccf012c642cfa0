/* SPDX-License-Identifier: GPL-2.0-or-later */
#ifndef NGNFS_FORMAT_MSG_H
#define NGNFS_FORMAT_MSG_H

/*
 * The block protocol on the wire.
 *
 * Everything a client and a blockd server say to each other is defined
 * here and nowhere else, so that the codec (msg.c) is the only code that
 * turns bytes into structures.  Every field is little-endian and fixed
 * width, every structure has explicit padding so that its size is the
 * same on every compiler, and every message is framed by a header that
 * carries the protocol version, the payload length and a crc32c over the
 * header and the payload.  A decoder checks the frame before it looks at
 * any payload and checks every count against the payload length before it
 * reads an array, so a malformed message is an error reply, never an
 * over-read.
 *
 * The protocol is a handful of requests, each answered by exactly one
 * reply carrying the same request id, with two exceptions: a GET is
 * answered by one GRANT per block it asked for (grants can arrive at
 * different times, because the server queues requests that conflict with
 * other clients' access), and the server sends REVOKE on its own when
 * another client needs a block this client holds.
 *
 * Version history:
 *  1: initial protocol.
 *  2: WRITE SINGLE carries frame_index and frame_count (a one-device set
 *     of up to 16 frames is one held write).
 *  3: STATFS_REPLY says how many client sessions the server has (so that
 *     an admin tool can tell whether any other client is connected) and
 *     how many group commits it made since it started.
 *  4: ALLOC_REPLY carries the session's epoch, which new inode
 *     generations include (a create lost with its session must not leave
 *     its generation to the next file in the same block).
 */

#include <stdint.h>
/*
 * The kernel's __le16/__le32/__le64 (sparse-checkable little-endian
 * types), so these headers can be included next to any other that uses
 * them instead of clashing with private typedefs.
 */
#include <linux/types.h>

#define NGNFS_MSG_MAGIC	       0x4e474d31U /* "NGM1" read as a little-endian u32 */
#define NGNFS_PROTOCOL_VERSION 4
#define NGNFS_BLOCK_SHIFT      12
#define NGNFS_BLOCK_SIZE       (1U << NGNFS_BLOCK_SHIFT)
#define NGNFS_FS_ID_SIZE       16

/*
 * Payloads are bounded so that a receiver can refuse a frame from its
 * header alone, before allocating anything.  The bound leaves room for a
 * WRITE of NGNFS_MSG_MAX_BLOCKS full blocks plus their descriptors.
 */
#define NGNFS_MSG_MAX_BLOCKS	   256
#define NGNFS_MSG_MAX_PAYLOAD	   (NGNFS_MSG_MAX_BLOCKS * (NGNFS_BLOCK_SIZE + 64) + 4096)
#define NGNFS_MSG_MAX_PARTICIPANTS 64
#define NGNFS_MSG_MAX_TEXT	   512

/*
 * A block number names its device: the top 16 bits are the device index
 * recorded in the superblock's device table, the low 48 bits the block's
 * index within that device.  Adding a device adds a device index; no
 * existing block number changes.
 */
#define NGNFS_BLKNO_DEVICE_SHIFT 48
#define NGNFS_BLKNO_INDEX_MASK	 ((1ULL << NGNFS_BLKNO_DEVICE_SHIFT) - 1)
#define NGNFS_MAX_DEVICES	 (1U << 16)

/*
 * ALLOC never hands out a block index below this on any device: those are
 * fixed-location metadata that mkfs writes directly (index 0 is the null
 * block number, the superblock is device 0's index 1).  A WRITE to a block
 * the session holds write access to is accepted whether or not the block
 * is allocated; allocation is the server's free-space accounting.
 */
#define NGNFS_FIRST_ALLOC_INDEX 16

static inline uint16_t ngnfs_blkno_device(uint64_t blkno)
{
	return (uint16_t)(blkno >> NGNFS_BLKNO_DEVICE_SHIFT);
}

static inline uint64_t ngnfs_blkno_index(uint64_t blkno)
{
	return blkno & NGNFS_BLKNO_INDEX_MASK;
}

static inline uint64_t ngnfs_blkno_make(uint16_t device, uint64_t index)
{
	return ((uint64_t)device << NGNFS_BLKNO_DEVICE_SHIFT) | (index & NGNFS_BLKNO_INDEX_MASK);
}

/*
 * Every frame starts with this header.  crc is the standard crc32c
 * (ngnfs_crc32c(0, ...) in msg.h, computed with ISA-L's crc32_iscsi, see
 * there for the seed convention) over the 32 header bytes with crc set to
 * zero, continued over the payload.  status is zero in requests and a negative
 * errno (as a two's complement s32) in replies.
 */
struct ngnfs_msg_header {
	__le32 magic;
	__le32 crc;
	__le32 payload_length;
	__le16 version;
	__le16 type;
	__le64 request_id;
	__le32 status;
	__le32 reserved; /* zero */
};

enum ngnfs_msg_type {
	NGNFS_MSG_HELLO = 1,		/* c->s: session setup */
	NGNFS_MSG_HELLO_REPLY = 2,	/* s->c */
	NGNFS_MSG_FORMAT = 3,		/* c->s: mkfs gives an empty device its identity */
	NGNFS_MSG_FORMAT_REPLY = 4,	/* s->c: header status only */
	NGNFS_MSG_GET = 5,		/* c->s: want access to blocks */
	NGNFS_MSG_GRANT = 6,		/* s->c: one per block of a GET */
	NGNFS_MSG_REVOKE = 7,		/* s->c: unsolicited, request_id 0 */
	NGNFS_MSG_RELEASE = 8,		/* c->s: give up (some) access */
	NGNFS_MSG_RELEASE_REPLY = 9,	/* s->c: header status only */
	NGNFS_MSG_WRITE = 10,		/* c->s: write or stage a set's blocks on this device */
	NGNFS_MSG_WRITE_REPLY = 11,	/* s->c: new versions */
	NGNFS_MSG_COMMIT = 12,		/* c->s: primary: apply staged set, record commit */
	NGNFS_MSG_COMMIT_REPLY = 13,	/* s->c: new versions */
	NGNFS_MSG_RESOLVE = 14,		/* c->s or s->s: apply or abort a staged set */
	NGNFS_MSG_RESOLVE_REPLY = 15,	/* s->c: outcome */
	NGNFS_MSG_ALLOC = 16,		/* c->s: reserve free blocks, granted for write */
	NGNFS_MSG_ALLOC_REPLY = 17,	/* s->c */
	NGNFS_MSG_CMPXCHG = 18,		/* c->s: write one block if its version matches */
	NGNFS_MSG_CMPXCHG_REPLY = 19,	/* s->c */
	NGNFS_MSG_READ_INCOHERENT = 20, /* c->s: committed contents, no grant */
	NGNFS_MSG_READ_INCOHERENT_REPLY = 21,
	NGNFS_MSG_STATFS = 22, /* c->s: header only */
	NGNFS_MSG_STATFS_REPLY = 23,
	NGNFS_MSG_ERROR = 24, /* s->c: a request could not be decoded */
	NGNFS_MSG_TYPE_COUNT
};

/* Access a client holds or wants on a block. */
enum ngnfs_access {
	NGNFS_ACCESS_NONE = 0,
	NGNFS_ACCESS_READ = 1,
	NGNFS_ACCESS_WRITE = 2,
};

/*
 * HELLO opens a session.  A non-zero fs_id must be the device's (else
 * -ESTALE with an ERROR-style reason in the log); all zero asks the server
 * to say which filesystem it belongs to, and the client then checks that
 * every device agrees and sits at the index it was configured at.  An
 * unformatted device accepts a session only with NGNFS_HELLO_FORMAT (mkfs)
 * and refuses every block request until FORMAT.  client_id
 * is chosen at random by the client and stays the same across reconnects,
 * so that after a server restart the client can reclaim its grants during
 * the grace period (NGNFS_HELLO_RECLAIM).
 */
#define NGNFS_HELLO_FORMAT  (1U << 0)
#define NGNFS_HELLO_RECLAIM (1U << 1)
#define NGNFS_HELLO_PEER    (1U << 2) /* another blockd resolving a staged set */

struct ngnfs_msg_hello {
	uint8_t fs_id[NGNFS_FS_ID_SIZE];
	__le64 client_id;
	__le32 flags;
	__le16 protocol_version;
	__le16 reserved;
};

/*
 * The server's answer.  device_index and device_count are what FORMAT
 * recorded (both zero on an unformatted device).  server_instance changes
 * on every blockd start, so a client that reconnects knows whether the
 * grant table it had is gone.  grace_ms is how much of the reclaim grace
 * period is left.
 */
#define NGNFS_HELLO_REPLY_FORMATTED (1U << 0)

struct ngnfs_msg_hello_reply {
	uint8_t fs_id[NGNFS_FS_ID_SIZE];
	__le64 server_instance;
	__le32 flags;
	__le32 grace_ms;
	__le16 device_index;
	__le16 protocol_version;
	__le32 device_count;
};

/* FORMAT: an unformatted device takes this identity; refused otherwise. */
struct ngnfs_msg_format {
	uint8_t fs_id[NGNFS_FS_ID_SIZE];
	__le32 device_count;
	__le16 device_index;
	__le16 reserved;
};

/*
 * GET: payload is a struct ngnfs_msg_get followed by count entries.
 * cached_version is the version of the copy the client already has (0 for
 * none); when it equals the current version the grant carries no data.
 */
struct ngnfs_msg_get {
	__le32 count;
	__le32 reserved;
};

struct ngnfs_msg_get_entry {
	__le64 blkno;
	__le64 cached_version;
	uint8_t access; /* enum ngnfs_access, READ or WRITE */
	uint8_t reserved[7];
};

/*
 * GRANT: the answer for one block of a GET (same request id).  The header
 * status is the status of this block.  With NGNFS_GRANT_DATA a full block
 * of data follows; without it the client's cached copy is current.
 */
#define NGNFS_GRANT_DATA (1U << 0)

struct ngnfs_msg_grant {
	__le64 blkno;
	__le64 version;
	uint8_t access;
	uint8_t flags;
	uint8_t reserved[6];
};

/* REVOKE: the holder must come down to `access` (NONE or READ). */
struct ngnfs_msg_revoke {
	__le64 blkno;
	uint8_t access;
	uint8_t reserved[7];
};

/* RELEASE: payload is a struct ngnfs_msg_release and count entries. */
struct ngnfs_msg_release {
	__le32 count;
	__le32 reserved;
};

struct ngnfs_msg_release_entry {
	__le64 blkno;
	uint8_t access; /* what the client keeps: NONE or READ */
	uint8_t reserved[7];
};

/*
 * WRITE: blocks of one dirty set that live on this device.
 *
 * With phase NGNFS_WRITE_SINGLE the set lives entirely on this device and
 * is applied in one RocksDB write batch: that is the common case.  With
 * NGNFS_WRITE_STAGE the blocks are made durable but invisible under
 * set_id; a set can be staged in several WRITE messages.  The participants
 * array (device indexes, primary first) is carried by every STAGE so that
 * a participant can find the primary if the client disappears.
 *
 * Payload layout: struct ngnfs_msg_write, participant_count __le16 device
 * indexes padded to a multiple of 8 bytes, block_count struct
 * ngnfs_msg_write_block each followed by its 4096 data bytes, then
 * free_count __le64 block numbers to free with the set.
 *
 * base_version is the version the client's modification started from; the
 * server refuses the write (-ESTALE) if it is not current, and refuses
 * blocks the client does not hold write access to (-EPERM).  Reserved
 * blocks from ALLOC become allocated by the write that first uses them.
 *
 * A SINGLE set too large for one frame travels as frame_count frames
 * (at most NGNFS_WRITE_MAX_FRAMES) with frame_index 0 .. frame_count - 1,
 * back to back on one session.  blockd holds frames before the last one
 * without answering them; the last frame checks and applies all of them
 * in one write batch, and every frame is then answered with the versions
 * of its own blocks.  A STAGE is always frame 0 of 1: a staged set may
 * take several STAGE messages, each staged on its own.
 */
enum ngnfs_write_phase {
	NGNFS_WRITE_SINGLE = 1,
	NGNFS_WRITE_STAGE = 2,
};

/* After the write, release the written blocks down to release_access. */
#define NGNFS_WRITE_RELEASE (1U << 0)

#define NGNFS_WRITE_MAX_FRAMES 16

struct ngnfs_msg_write {
	__le64 set_id;
	__le32 block_count;
	__le32 free_count;
	__le16 participant_count;
	uint8_t phase;
	uint8_t release_access;
	__le32 flags;
	__le16 frame_index;
	__le16 frame_count;
	__le32 reserved;
};

struct ngnfs_msg_write_block {
	__le64 blkno;
	__le64 base_version;
};

/*
 * WRITE_REPLY and COMMIT_REPLY: the version each written block now has
 * (staged blocks report the version they will have once applied).
 */
struct ngnfs_msg_write_reply {
	__le64 set_id;
	__le32 count;
	__le32 reserved;
};

struct ngnfs_msg_version_entry {
	__le64 blkno;
	__le64 version;
};

/*
 * COMMIT, to the primary (the device of the lowest block number of the
 * set): in one write batch apply the blocks staged under set_id and record
 * the set as committed.  That batch is the set's commit point.
 */
struct ngnfs_msg_commit {
	__le64 set_id;
};

/*
 * RESOLVE: from the client after the primary committed (outcome
 * COMMITTED: apply your staged blocks), from the client giving up
 * (ABORTED: drop them), or from a participant asking the primary about an
 * in-doubt set (outcome UNKNOWN: the primary answers with what it
 * recorded, recording ABORTED first if it knows nothing, so that a late
 * COMMIT fails).
 */
enum ngnfs_set_outcome {
	NGNFS_SET_UNKNOWN = 0,
	NGNFS_SET_COMMITTED = 1,
	NGNFS_SET_ABORTED = 2,
};

struct ngnfs_msg_resolve {
	__le64 set_id;
	uint8_t outcome;
	uint8_t reserved[7];
};

struct ngnfs_msg_resolve_reply {
	__le64 set_id;
	uint8_t outcome;
	uint8_t reserved[7];
};

/*
 * ALLOC: reserve up to count free blocks.  The reply lists them with
 * their current versions; the client holds write access to each.  A
 * reservation is volatile: it becomes an allocation when a WRITE of the
 * block commits, and returns to the free space if the session ends first.
 *
 * session_epoch names the session among every session that device ever
 * had: blockd hands each session that allocates a new one, counting on
 * across restarts, and it is never zero in a reply that reserves blocks.
 * A block whose reservation went back with its session (a client gone
 * with a create still in memory) keeps its version, so the version alone
 * cannot tell the lost file from the next one in that block; with the
 * epoch of the session that created it, it can (format-block.h,
 * generation).
 */
struct ngnfs_msg_alloc {
	__le32 count;
	__le32 reserved;
};

struct ngnfs_msg_alloc_reply {
	__le32 count;
	__le32 session_epoch;
	/* count struct ngnfs_msg_version_entry follow */
};

/*
 * CMPXCHG: write one block (4096 data bytes follow) if its committed
 * version is expected_version, without holding a grant: the repair path.
 * Refused with -EBUSY while another client holds write access and with
 * -ESTALE (reply carries the current version) when the version differs.
 */
struct ngnfs_msg_cmpxchg {
	__le64 blkno;
	__le64 expected_version;
};

struct ngnfs_msg_cmpxchg_reply {
	__le64 blkno;
	__le64 version;
};

/*
 * READ_INCOHERENT: the committed contents of count blocks, whatever
 * anyone holds; payload is struct ngnfs_msg_read_incoherent and count
 * __le64 block numbers.  The reply is struct ngnfs_msg_read_incoherent
 * then per block a struct ngnfs_msg_incoherent_block and 4096 data bytes.
 */
struct ngnfs_msg_read_incoherent {
	__le32 count;
	__le32 reserved;
};

struct ngnfs_msg_incoherent_block {
	__le64 blkno;
	__le64 version;
	__le32 status; /* s32: 0, or -EIO for a block that fails its checksum */
	__le32 reserved;
};

/*
 * STATFS_REPLY: counts in blocks of this device; client_sessions, the
 * sessions past HELLO that are clients (not NGNFS_HELLO_PEER), the asking
 * one included; and since this server process started, group_commits
 * (synced RocksDB write batches) and the commit_requests they carried.
 */
struct ngnfs_msg_statfs_reply {
	__le64 total_blocks;
	__le64 free_blocks;
	__le64 reserved_blocks;
	__le64 staged_sets;
	__le64 client_sessions;
	__le64 group_commits;
	__le64 commit_requests;
};

/* ERROR: header status says why; text is a NUL-free human explanation. */
struct ngnfs_msg_error {
	__le16 text_length;
	__le16 reserved[3];
	/* text_length bytes follow */
};

#endif
