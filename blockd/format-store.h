/* SPDX-License-Identifier: GPL-2.0-or-later */
#ifndef NGNFS_FORMAT_STORE_H
#define NGNFS_FORMAT_STORE_H

/*
 * The layout of a device's RocksDB database: everything blockd persists.
 *
 * Keys start with a one-byte kind and continue with big-endian numbers,
 * so that RocksDB's bytewise order is numeric order: iterating a prefix
 * (all free blocks, all stages of a set) visits them in block order, and
 * one seek finds the first key of a kind.  Values are little-endian and
 * fixed width like every other ngnfs format, and versioned through the
 * identity record: a store whose format version blockd does not know is
 * refused at start, never guessed at.
 *
 * Block values carry their own crc32c (over the little-endian version
 * and the 4096 data bytes) so that a bit flipped under RocksDB is
 * reported as an error naming the block instead of being served; the
 * version lives next to the data in the same value so that one get gives
 * both and no write can update one without the other.
 *
 * Version history:
 *  1: initial layout.
 *  2: the commit log (a file next to the database, below) and its META
 *     record; a version 1 store is upgraded when a blockd that knows
 *     version 2 opens it (it has nothing to replay), and an older blockd
 *     refuses a version 2 store instead of ignoring records only its
 *     commit log holds.
 *
 * XXX:
 *  - Outcome records are never garbage collected (see docs/protocol.md).
 *  - The free list is one key per free block; extents would be smaller.
 */

#include <stddef.h>
#include <stdint.h>

#include "format-msg.h"

#define NGNFS_STORE_MAGIC	   0x4e475344U /* reads "DSGN" byte by byte on disk */
#define NGNFS_STORE_FORMAT_VERSION 2

/* Key kinds: the first byte of every key. */
enum ngnfs_store_key_kind {
	NGNFS_STORE_KEY_META = 0x01,	/* + u8 meta id */
	NGNFS_STORE_KEY_BLOCK = 0x02,	/* + be64 block index: struct ngnfs_store_block */
	NGNFS_STORE_KEY_FREE = 0x03,	/* + be64 block index: empty value */
	NGNFS_STORE_KEY_STAGE = 0x04,	/* + be64 set id: struct ngnfs_store_stage */
	NGNFS_STORE_KEY_STAGED = 0x05,	/* + be64 set id + be64 block index: staged_block */
	NGNFS_STORE_KEY_OUTCOME = 0x06, /* + be64 set id: struct ngnfs_store_outcome */
};

enum ngnfs_store_meta_id {
	NGNFS_STORE_META_IDENTITY = 1,	     /* struct ngnfs_store_identity */
	NGNFS_STORE_META_HWM = 2,	     /* struct ngnfs_store_hwm */
	NGNFS_STORE_META_SESSION_EPOCHS = 3, /* struct ngnfs_store_session_epochs */
	NGNFS_STORE_META_COMMIT_LOG = 4,     /* struct ngnfs_store_commit_log */
};

#define NGNFS_STORE_META_KEY_SIZE   2
#define NGNFS_STORE_BLOCK_KEY_SIZE  9
#define NGNFS_STORE_SET_KEY_SIZE    9
#define NGNFS_STORE_STAGED_KEY_SIZE 17

/*
 * Written when blockd creates the database (formatted = 0) and rewritten
 * by FORMAT.  Its presence with the right magic is what tells an ngnfs
 * device store from any other RocksDB.  total_blocks is fixed at
 * creation: the device's capacity in blocks.
 */
#define NGNFS_STORE_IDENTITY_FORMATTED (1U << 0)

struct ngnfs_store_identity {
	__le32 magic;
	__le32 format_version;
	uint8_t fs_id[NGNFS_FS_ID_SIZE];
	__le64 total_blocks;
	__le32 flags;
	__le32 device_count;
	__le16 device_index;
	__le16 reserved[3];
};

/*
 * The high-water mark: every block index at or above it has never been
 * allocated.  Below it a block is allocated unless it has a FREE key.
 */
struct ngnfs_store_hwm {
	__le64 next_index;
};

/*
 * Session epochs (ALLOC_REPLY, format-msg.h) below limit may have been
 * handed out: a blockd that starts hands out from limit on, and records a
 * higher limit (synced) before it hands out the epoch at the old one, so
 * that no epoch is handed out twice whatever the crashes, at the cost of
 * one sync per NGNFS_STORE_SESSION_EPOCH_BATCH sessions.  Absent (a store
 * written before protocol version 4) reads as 0.
 */
#define NGNFS_STORE_SESSION_EPOCH_BATCH 1024

struct ngnfs_store_session_epochs {
	__le64 limit;
};

/*
 * Written with every batch that went through the commit log
 * (blockd/commit_log.h): seq is that batch's log record (0 before any),
 * next_offset where the record after it starts.  Absent: nothing logged.
 */
struct ngnfs_store_commit_log {
	__le64 seq;
	__le64 next_offset;
};

/*
 * The commit log file, NGNFS_COMMIT_LOG_FILE in the database folder: a
 * fixed-size ring of records at NGNFS_COMMIT_LOG_ALIGN-aligned offsets,
 * each this header, payload_length bytes and zeros to the alignment.
 * The payload of a BATCH record is a RocksDB write batch in RocksDB's own
 * serialisation (rocksdb_writebatch_data), applied again as it is; a WRAP
 * record (no payload) says the record with its seq is at offset 0.  crc
 * is crc32c (seed 0) over the header with crc zero, then the payload;
 * seq rises by one per BATCH record.
 */
#define NGNFS_COMMIT_LOG_FILE	    "ngnfs-commit-log"
#define NGNFS_COMMIT_LOG_MAGIC	    0x4c43474eU /* reads "NGCL" byte by byte on disk */
#define NGNFS_COMMIT_LOG_ALIGN	    4096
#define NGNFS_COMMIT_LOG_MIN_MB	    1
#define NGNFS_COMMIT_LOG_DEFAULT_MB 64

enum ngnfs_commit_log_kind {
	NGNFS_COMMIT_LOG_BATCH = 1,
	NGNFS_COMMIT_LOG_WRAP = 2,
};

struct ngnfs_commit_log_record {
	__le32 magic;
	__le32 crc;
	__le64 seq;
	__le32 payload_length;
	__le16 kind;
	__le16 reserved16;
	uint8_t reserved[40];
};

/* crc is crc32c (seed 0) over the little-endian version then the data. */
struct ngnfs_store_block {
	__le64 version;
	__le32 crc;
	__le32 reserved;
	uint8_t data[NGNFS_BLOCK_SIZE];
};

/*
 * A staged set's header: written by the first STAGE of the set, so that
 * a restart finds every in-doubt set and knows whom to ask.
 * created_ns is CLOCK_REALTIME, for the log and the resolve timeout.
 */
struct ngnfs_store_stage {
	__le64 created_ns;
	__le16 participant_count;
	__le16 reserved[3];
	__le16 participants[NGNFS_MSG_MAX_PARTICIPANTS]; /* device indexes, primary first */
};

/*
 * One block of a staged set: either a write (the data to apply, and the
 * version it was based on) or a free carried by the set.
 */
enum ngnfs_store_staged_kind {
	NGNFS_STORE_STAGED_WRITE = 1,
	NGNFS_STORE_STAGED_FREE = 2,
};

struct ngnfs_store_staged_block {
	__le64 base_version;
	__le32 crc; /* over base_version and data, as for blocks */
	uint8_t kind;
	uint8_t reserved[3];
	uint8_t data[NGNFS_BLOCK_SIZE]; /* only for WRITE; a FREE value stops before it */
};

#define NGNFS_STORE_STAGED_FREE_SIZE ((size_t)offsetof(struct ngnfs_store_staged_block, data))

/* What the primary recorded for a set (enum ngnfs_set_outcome). */
struct ngnfs_store_outcome {
	uint8_t outcome;
	uint8_t reserved[7];
	__le64 recorded_ns;
};

#endif
