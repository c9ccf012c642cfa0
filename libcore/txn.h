/* SPDX-License-Identifier: GPL-2.0-or-later */
#ifndef NGNFS_TXN_H
#define NGNFS_TXN_H

/*
 * Transactions: how operation code reads and modifies blocks.
 *
 * An operation is a function that can be run again from the start.  It
 * asks the transaction for each block it needs with the access it needs;
 * the transaction try-locks the cached block locally.  When a block is
 * locked by another transaction, not cached, or not granted in the mode
 * needed, the call returns -EAGAIN and marks the transaction for retry;
 * the operation function simply returns the error.  ngnfs_txn_run() then
 * drops every lock the transaction held, waits for what stopped it (the
 * other transaction's unlock, the grant arriving), and runs the function
 * again.  Nothing waits while holding a block, so two transactions that
 * take the same blocks in opposite orders cannot deadlock.
 *
 * Writes go to private copies; only when the function returns 0 are the
 * copies installed in the cache, the blocks marked dirty and their dirty
 * sets merged into one.  A retry or an error therefore leaves no trace.
 * In stable mode ngnfs_txn_run() returns after the set is durable (it
 * waits after releasing its locks, sharing the write with every other
 * transaction that committed meanwhile).
 *
 * The function must not keep results across runs except through its
 * argument, which it must reset at its start.
 */

#include <stdint.h>

#include "cache.h"

struct ngnfs_txn;

typedef int (*ngnfs_txn_fn)(struct ngnfs_txn *txn, void *arg);

/* Runs fn until it completes; returns fn's result (or a write failure in stable mode). */
int ngnfs_txn_run(struct ngnfs_cache *cache, ngnfs_txn_fn fn, void *arg);

/* Read access; *data stays valid until the transaction ends. */
int ngnfs_txn_read(struct ngnfs_txn *txn, uint64_t blkno, const void **data);
/* Write access to a private copy, initialised from the current contents. */
int ngnfs_txn_write(struct ngnfs_txn *txn, uint64_t blkno, void **data);
/*
 * A newly allocated block on device (zeroed, write access).  version is
 * the block's version as the server had it (a freed-and-reused block keeps
 * counting, which inode generations rely on).
 */
int ngnfs_txn_alloc(struct ngnfs_txn *txn, uint16_t device, uint64_t *blkno, uint64_t *version,
		    void **data);
/* Free blkno when the transaction commits (it must be held for write). */
int ngnfs_txn_free(struct ngnfs_txn *txn, uint64_t blkno);
/* The version the block had when this transaction first got it. */
uint64_t ngnfs_txn_version(struct ngnfs_txn *txn, uint64_t blkno);
/*
 * The epoch of the device session that reserved blkno, which this
 * transaction allocated (0 otherwise): with the version it makes a new
 * inode's generation (format-block.h).
 */
uint32_t ngnfs_txn_session_epoch(struct ngnfs_txn *txn, uint64_t blkno);
/* Make this transaction durable before ngnfs_txn_run returns, even in writeback mode. */
void ngnfs_txn_set_stable(struct ngnfs_txn *txn);
/*
 * Return without waiting for durability even in stable mode (an NFS
 * UNSTABLE write): the set is written within the writeback interval, on
 * revocation, pressure or sync, or at once if a waiting transaction's set
 * merges with it.  ngnfs_txn_set_stable wins over it.
 */
void ngnfs_txn_set_unstable(struct ngnfs_txn *txn);
struct ngnfs_cache *ngnfs_txn_cache(struct ngnfs_txn *txn);
uint16_t ngnfs_txn_device_count(struct ngnfs_txn *txn);

#endif
