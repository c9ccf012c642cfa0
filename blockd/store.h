/* SPDX-License-Identifier: GPL-2.0-or-later */
#ifndef NGNFS_BLOCKD_STORE_H
#define NGNFS_BLOCKD_STORE_H

/*
 * The device's RocksDB database (layout in format-store.h).
 *
 * Opening decides what the folder is: missing or empty becomes a new,
 * unformatted store; a RocksDB with a valid identity record is opened;
 * anything else (other files, another program's RocksDB, a store of a
 * format version this blockd does not know) is refused with a message
 * naming the folder and what was found, because serving blocks out of a
 * database blockd did not create would corrupt it.
 *
 * Reads go straight to RocksDB from the event loop; writes are only ever
 * added to a write batch handed to the commit thread (commit.h).
 *
 * XXX:
 *  - No column families: metadata, blocks and stages share one keyspace,
 *    told apart by the kind byte.
 */

#include <rocksdb/c.h>
#include <stdbool.h>
#include <stdint.h>

#include "commit_log.h"
#include "config.h"
#include "format-store.h"

struct blockd_store {
	rocksdb_t *db;
	rocksdb_options_t *options;
	rocksdb_readoptions_t *read_options;
	rocksdb_block_based_table_options_t *table_options;
	rocksdb_cache_t *cache;
	char *path;
	bool created; /* the folder was empty: no grace period is needed */
	/* the identity record, host order */
	bool formatted;
	uint8_t fs_id[NGNFS_FS_ID_SIZE];
	uint64_t total_blocks;
	uint16_t device_index;
	uint32_t device_count;
	uint64_t hwm;		      /* durable high-water mark at open */
	uint64_t session_epoch_limit; /* durable: epochs below it may be in use */
	uint32_t format_version;      /* as found; upgraded to the current one at open */
	struct commit_log commit_log; /* replayed at open; written by the commit thread */
};

int store_open(struct blockd_store *store, const struct blockd_config *config);
void store_close(struct blockd_store *store);

void store_meta_key(uint8_t key[NGNFS_STORE_META_KEY_SIZE], uint8_t id);
void store_index_key(uint8_t key[NGNFS_STORE_BLOCK_KEY_SIZE], uint8_t kind, uint64_t index);
void store_staged_key(uint8_t key[NGNFS_STORE_STAGED_KEY_SIZE], uint64_t set_id, uint64_t index);
uint64_t store_be64(const uint8_t *bytes);

uint32_t store_block_crc(uint64_t version, const uint8_t *data);

/*
 * Read a block by device-local index.  A block never written reads as
 * zeros at version 0.  Returns 0, -EIO (checksum or size mismatch, logged
 * with the block number by the caller) or another negative errno.  data
 * may be NULL when only the version is wanted.
 */
int store_read_block(struct blockd_store *store, uint64_t index, uint64_t *version, uint8_t *data);

/* Batch helpers: each adds one put or delete to batch. */
void store_put_block(rocksdb_writebatch_t *batch, uint64_t index, uint64_t version,
		     const uint8_t *data);
void store_put_identity(rocksdb_writebatch_t *batch, const struct blockd_store *identity);
void store_put_hwm(rocksdb_writebatch_t *batch, uint64_t hwm);
/* Records limit (synced, on the caller's thread) as session_epoch_limit. */
int store_write_session_epoch_limit(struct blockd_store *store, uint64_t limit);
void store_put_free(rocksdb_writebatch_t *batch, uint64_t index);
void store_delete_free(rocksdb_writebatch_t *batch, uint64_t index);
void store_put_outcome(rocksdb_writebatch_t *batch, uint64_t set_id, uint8_t outcome);

/*
 * Walk every key of one kind in order, calling visit(key, key_length,
 * value, value_length, arg); a non-zero return stops the walk and is
 * returned.  prefix is the kind byte optionally followed by more bytes.
 */
typedef int (*store_visit_fn)(const uint8_t *key, size_t key_length, const uint8_t *value,
			      size_t value_length, void *arg);
int store_walk(struct blockd_store *store, const uint8_t *prefix, size_t prefix_length,
	       store_visit_fn visit, void *arg);

#endif
