/* SPDX-License-Identifier: GPL-2.0-or-later */
#ifndef NGNFS_TEST_FAKE_TXN_H
#define NGNFS_TEST_FAKE_TXN_H

/*
 * Controls of the in-memory test double of txn.h (fake_txn.c): one store
 * per process, reset between tests, with an injected -EAGAIN rate that
 * proves operations are re-runnable.
 */

#include <stdint.h>

struct fake_txn_stats {
	uint64_t transactions;
	uint64_t retries;
	uint64_t injected_eagain;
	uint64_t reads;
	uint64_t writes;
	uint64_t allocs;
	uint64_t blocks_written;
	uint64_t allocated_blocks; /* now, over every device */
	uint64_t whole_syncs;	   /* ngnfs_cache_sync calls */
	uint64_t block_syncs;	   /* ngnfs_cache_sync_block calls */
	uint64_t last_synced_blkno;
};

/* seed 0 picks a fixed one; eagain_per_million 0 disables injection. */
void fake_txn_configure(uint64_t seed, unsigned int eagain_per_million);
/* Forget every block and the devices' identity (a new, unformatted store). */
void fake_txn_reset(void);
void fake_txn_stats(struct fake_txn_stats *stats);
/*
 * Pretend the write-back of a dirty set holding blkno failed with error:
 * the cache's lost callback sees the block's current contents.
 */
void fake_txn_lose_block(uint64_t blkno, int error);

#endif
