/* SPDX-License-Identifier: GPL-2.0-or-later */
#ifndef NGNFS_TEST_DATA_FAKE_TXN_H
#define NGNFS_TEST_DATA_FAKE_TXN_H

/*
 * A test double of txn.h for the file data and xattr tests: blocks live
 * in memory, allocation counts up per device, and the double injects
 * -EAGAIN (with the transaction flagged for retry) at random block
 * accesses so that every operation is proven to be re-runnable.  It
 * checks what the real cache would make fatal (access to a block that was
 * never allocated or was freed, freeing a block not held for write) and
 * counts what the tests assert on (allocations, frees, live blocks per
 * device, the largest dirty set of one transaction).
 *
 * XXX:
 *  - One transaction at a time (a global mutex serialises them): it
 *    proves re-runnability, not concurrency.
 */

#include <stdint.h>

#include "txn.h"

struct ngnfs_fake_counters {
	uint64_t allocs;  /* committed allocations */
	uint64_t frees;	  /* committed frees */
	uint64_t runs;	  /* transaction function runs, retries included */
	uint64_t retries; /* injected -EAGAIN re-runs */
	uint64_t commits;
	uint64_t max_dirty;	   /* largest number of blocks one commit wrote */
	uint64_t last_dirty;	   /* blocks the last commit wrote */
	uint64_t stable_commits;   /* commits that asked for durability (ngnfs_txn_set_stable) */
	uint64_t unstable_commits; /* commits that asked not to wait (ngnfs_txn_set_unstable) */
	uint64_t live_blocks;	   /* allocated and not freed */
};

/* retry_percent: chance of -EAGAIN at each first access of a block in a run. */
struct ngnfs_cache *ngnfs_fake_cache_create(uint16_t device_count, unsigned int retry_percent,
					    uint64_t seed);
void ngnfs_fake_cache_destroy(struct ngnfs_cache *cache);
void ngnfs_fake_counters(struct ngnfs_cache *cache, struct ngnfs_fake_counters *counters);
/* Live blocks on one device. */
uint64_t ngnfs_fake_live_on_device(struct ngnfs_cache *cache, uint16_t device);
/* Committed contents of a live block (NULL if not live); for corruption tests. */
uint8_t *ngnfs_fake_block(struct ngnfs_cache *cache, uint64_t blkno);
int ngnfs_fake_is_live(struct ngnfs_cache *cache, uint64_t blkno);
void ngnfs_fake_set_retry_percent(struct ngnfs_cache *cache, unsigned int retry_percent);
void ngnfs_fake_reset_max_dirty(struct ngnfs_cache *cache);
/* The index the next allocation on device hands out (to play a server with a bad free map). */
void ngnfs_fake_set_next_index(struct ngnfs_cache *cache, uint16_t device, uint64_t index);

#endif
