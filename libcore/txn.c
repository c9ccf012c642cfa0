// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Transactions: try-lock the blocks an operation needs, retry from the
 * start when one is not available, install private copies on success.
 *
 * A transaction never waits while it holds a block: every acquisition is
 * a try-lock on the cached block under the cache lock, and anything that
 * would need waiting (another transaction's lock, a missing or too weak
 * grant, a revocation, a write in progress that the change cannot be
 * copied past (see dirty.c), an empty allocation pool)
 * makes the call return -EAGAIN after recording what the transaction was
 * stopped by.  ngnfs_txn_run() then unlocks everything, discards the
 * private copies, sends the GET (or ALLOC) that is missing if nobody has
 * yet, sleeps on that block's wait queue until the block can be taken,
 * and runs the function again.  That is why two transactions taking the
 * same blocks in opposite orders cannot deadlock, within one client or
 * across clients, without any lock order: nobody sleeps holding anything.
 *
 * Writes go to a private copy of the block (read-your-writes inside the
 * transaction).  On success the copies are installed (each becomes the
 * block's buffer, the old buffer is given back), the blocks join
 * one dirty set (merging every set the transaction wrote or read) and the
 * locks drop; in stable mode the run then waits, holding nothing, for the
 * flusher's write of that set.
 *
 * Blocks from ngnfs_txn_alloc() come from a per-device pool of blocks the
 * server reserved for this client; a retry or a failure puts them back,
 * so a retried allocation leaves no trace either.
 *
 * A function that returns -EAGAIN itself (without a blocked acquisition
 * marking the transaction for retry) gets -EAGAIN back from
 * ngnfs_txn_run(): only the cache decides when rerunning can succeed.
 *
 * The ALLOC that refills an empty pool is sent by the waiting transaction
 * itself (ngnfs_client_alloc_sync, with nothing locked; client.h has no
 * asynchronous ALLOC); other transactions waiting for the same device
 * sleep on its wait queue meanwhile.
 *
 * A run first makes sure the network I/O thread has run lately
 * (txn_catch_up_after_stall): after this process was stopped or starved,
 * the revocations and session closes that came meanwhile are applied
 * before the function looks at a cached block.
 *
 * XXX:
 *  - A transaction that needs more blocks than the cache can hold may
 *    keep evicting its own blocks; the cache must be sized well above
 *    the largest transaction.
 *  - Local readers are not held back for a waiting local writer, so a
 *    steady stream of readers of one block can starve a writer in the
 *    same client (the server's queue is fair between clients).
 *  - A GET that keeps failing is retried a few times, then the error is
 *    returned to the operation (naming the block); a device away for less
 *    than the reclaim timeout turns it into -EAGAIN
 *    (cache_unreachable_error).  A block its device does not have
 *    (beyond its capacity) is -ENXIO at once.
 */

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "blockbuf.h"
#include "cache-internal.h"

#define TXN_GET_ATTEMPTS  4
#define TXN_WAIT_SLICE_MS 200
#define TXN_ROOM_WAIT_MS  1000

enum txn_retry {
	TXN_RETRY_NONE,
	TXN_RETRY_BLOCK,
	TXN_RETRY_ALLOC,
	TXN_RETRY_WRITEBACK, /* a block it only read is in a write still in flight */
};

struct txn_entry {
	struct cache_block *block;
	uint64_t blkno;
	uint64_t version;
	uint32_t session_epoch; /* of the reservation, when allocated */
	uint8_t mode;		/* READ or WRITE, as locked */
	uint8_t *copy;		/* private copy while held for write */
	bool allocated;		/* came from the reservation pool in this run */
	bool freed;
};

struct ngnfs_txn {
	struct ngnfs_cache *cache;
	struct txn_entry *entries;
	uint32_t count;
	uint32_t capacity;
	enum txn_retry retry;
	uint64_t retry_blkno;
	uint8_t retry_access;
	uint16_t retry_device;
	bool stable;
	bool unstable;
};

static struct txn_entry *txn_find(struct ngnfs_txn *txn, uint64_t blkno)
{
	uint32_t i;

	for (i = 0; i < txn->count; i++) {
		if (txn->entries[i].blkno == blkno)
			return &txn->entries[i];
	}
	return NULL;
}

static struct txn_entry *txn_new_entry(struct ngnfs_txn *txn)
{
	if (txn->count == txn->capacity) {
		uint32_t capacity = txn->capacity ? txn->capacity * 2 : 8;
		struct txn_entry *entries = realloc(txn->entries, capacity * sizeof(*entries));

		if (!entries)
			return NULL;
		txn->entries = entries;
		txn->capacity = capacity;
	}
	memset(&txn->entries[txn->count], 0, sizeof(txn->entries[0]));
	return &txn->entries[txn->count++];
}

static int txn_retry_block(struct ngnfs_txn *txn, uint64_t blkno, uint8_t access)
{
	txn->retry = TXN_RETRY_BLOCK;
	txn->retry_blkno = blkno;
	txn->retry_access = access;
	return -EAGAIN;
}

/*
 * A block a write in flight carries can be changed into a newer set
 * (copy on write, dirty.c) unless that write releases the grant the newer
 * change would be written under, or the cache is full and the block has
 * no frozen copy yet (the change would make one).
 */
static bool block_copy_on_write(const struct cache_block *block)
{
	const struct dirty_set *writing = block->wb_set;

	if (!writing || writing->release)
		return false;
	return block->wb_data || writing->cache->data_blocks < writing->cache->max_data_blocks;
}

/* Granted well enough and not held back by a revocation, a write or a regrant. */
static bool block_available(const struct cache_block *block, uint8_t access)
{
	if (!block->data || block->access < access || block->regrant || block->freed ||
	    block->drop_pending)
		return false;
	if (block->revoke_pending &&
	    (block->revoke_access == NGNFS_ACCESS_NONE || access == NGNFS_ACCESS_WRITE))
		return false;
	if (access == NGNFS_ACCESS_WRITE && ((block->writeback && !block_copy_on_write(block)) ||
					     (block->set && block->set->flush_wanted)))
		return false;
	return true;
}

static bool block_lockable(const struct cache_block *block, uint8_t access)
{
	if (access == NGNFS_ACCESS_WRITE)
		return !block->writer && !block->readers;
	return !block->writer;
}

static int txn_lock(struct ngnfs_txn *txn, uint64_t blkno, uint8_t access,
		    struct txn_entry **entry_out)
{
	struct ngnfs_cache *cache = txn->cache;
	struct cache_block *block;
	struct txn_entry *entry;
	uint8_t *copy = NULL;

	block = cache_lookup_create(cache, blkno);
	if (!block)
		return -ENOMEM;
	if (block->freed) {
		ngnfs_cache_log("transaction on block %llu: the block was freed\n",
				(unsigned long long)blkno);
		return -ESTALE;
	}
	if (!block->data && block->get_error == -ENXIO) {
		block->get_error = 0; /* once: the next transaction asks again */
		return -ENXIO;
	}
	if (!block_available(block, access) || !block_lockable(block, access))
		return txn_retry_block(txn, blkno, access);
	if (access == NGNFS_ACCESS_WRITE) {
		copy = ngnfs_block_buf_alloc();
		if (!copy)
			return -ENOMEM;
		memcpy(copy, block->data, NGNFS_BLOCK_SIZE);
	}
	entry = txn_new_entry(txn);
	if (!entry) {
		ngnfs_block_buf_free(copy);
		return -ENOMEM;
	}
	entry->block = block;
	entry->blkno = blkno;
	entry->version = block->version;
	entry->mode = access;
	entry->copy = copy;
	if (access == NGNFS_ACCESS_WRITE)
		block->writer = true;
	else
		block->readers++;
	cache->counters.hits++;
	cache_touch(cache, block);
	*entry_out = entry;
	return 0;
}

int ngnfs_txn_read(struct ngnfs_txn *txn, uint64_t blkno, const void **data)
{
	struct txn_entry *entry = txn_find(txn, blkno);
	int ret = 0;

	if (!entry) {
		pthread_mutex_lock(&txn->cache->lock);
		ret = txn_lock(txn, blkno, NGNFS_ACCESS_READ, &entry);
		pthread_mutex_unlock(&txn->cache->lock);
	}
	if (ret == 0)
		*data = entry->copy ? entry->copy : entry->block->data;
	return ret;
}

int ngnfs_txn_write(struct ngnfs_txn *txn, uint64_t blkno, void **data)
{
	struct ngnfs_cache *cache = txn->cache;
	struct txn_entry *entry = txn_find(txn, blkno);
	struct cache_block *block;
	int ret = 0;

	if (entry && entry->mode == NGNFS_ACCESS_WRITE) {
		*data = entry->copy;
		return 0;
	}
	pthread_mutex_lock(&cache->lock);
	if (!entry) {
		ret = txn_lock(txn, blkno, NGNFS_ACCESS_WRITE, &entry);
		goto out;
	}
	/* Upgrade our read lock: only if we are its only reader. */
	block = entry->block;
	if (!block_available(block, NGNFS_ACCESS_WRITE) || block->writer || block->readers != 1) {
		ret = txn_retry_block(txn, blkno, NGNFS_ACCESS_WRITE);
		goto out;
	}
	entry->copy = ngnfs_block_buf_alloc();
	if (!entry->copy) {
		ret = -ENOMEM;
		goto out;
	}
	memcpy(entry->copy, block->data, NGNFS_BLOCK_SIZE);
	block->readers--;
	block->writer = true;
	entry->mode = NGNFS_ACCESS_WRITE;
out:
	pthread_mutex_unlock(&cache->lock);
	if (ret == 0)
		*data = entry->copy;
	return ret;
}

int ngnfs_txn_alloc(struct ngnfs_txn *txn, uint16_t device, uint64_t *blkno, uint64_t *version,
		    void **data)
{
	struct ngnfs_cache *cache = txn->cache;
	struct alloc_pool *pool;
	struct cache_block *block;
	struct txn_entry *entry;
	struct pool_block reserved;
	int ret;

	if (device >= cache->device_count) {
		ngnfs_cache_log("allocating a block on device %u: the filesystem has %u devices\n",
				device, cache->device_count);
		return -EINVAL;
	}
	pthread_mutex_lock(&cache->lock);
	device = cache_alloc_device(cache, device);
	pool = &cache->pools[device];
	if (pool->error && !pool->count) {
		ret = pool->error;
		pool->error = 0;
		/* EAGAIN: every device is in its grace period (logged by the refill) */
		if (ret != -EAGAIN)
			ngnfs_cache_log("allocating a block on device %u failed: %s (%d)\n", device,
					strerror(-ret), ret);
		ret = cache_unreachable_error(cache, device, ret);
		goto out;
	}
	if (!pool->count) {
		txn->retry = TXN_RETRY_ALLOC;
		txn->retry_device = device;
		ret = -EAGAIN;
		goto out;
	}
	reserved = pool->blocks[--pool->count];
	block = cache_lookup_create(cache, reserved.blkno);
	entry = block ? txn_new_entry(txn) : NULL;
	if (!entry) {
		cache_pool_push(cache, device, &reserved);
		ret = -ENOMEM;
		goto out;
	}
	if (block->readers || block->writer || block->dirty || block->get_access) {
		txn->count--;
		ngnfs_cache_log("allocating block %llu on device %u: the server reserved a block "
				"this client still uses\n",
				(unsigned long long)reserved.blkno, device);
		ret = -EIO;
		goto out;
	}
	entry->copy = ngnfs_block_buf_zalloc();
	if (!entry->copy || cache_block_set_data(cache, block, NULL) < 0) {
		ngnfs_block_buf_free(entry->copy);
		txn->count--;
		cache_pool_push(cache, device, &reserved);
		ret = -ENOMEM;
		goto out;
	}
	block->version = reserved.version;
	block->access = NGNFS_ACCESS_WRITE;
	block->reserved = true;
	block->writer = true;
	block->revoke_pending = false;
	entry->block = block;
	entry->blkno = reserved.blkno;
	entry->version = reserved.version;
	entry->session_epoch = reserved.session_epoch;
	entry->mode = NGNFS_ACCESS_WRITE;
	entry->allocated = true;
	*blkno = reserved.blkno;
	*version = reserved.version;
	*data = entry->copy;
	ret = 0;
out:
	pthread_mutex_unlock(&cache->lock);
	return ret;
}

int ngnfs_txn_free(struct ngnfs_txn *txn, uint64_t blkno)
{
	struct txn_entry *entry = txn_find(txn, blkno);

	if (!entry || entry->mode != NGNFS_ACCESS_WRITE) {
		ngnfs_cache_log("freeing block %llu: the transaction does not hold it for write\n",
				(unsigned long long)blkno);
		return -EINVAL;
	}
	entry->freed = true;
	return 0;
}

uint64_t ngnfs_txn_version(struct ngnfs_txn *txn, uint64_t blkno)
{
	struct txn_entry *entry = txn_find(txn, blkno);

	return entry ? entry->version : 0;
}

uint32_t ngnfs_txn_session_epoch(struct ngnfs_txn *txn, uint64_t blkno)
{
	struct txn_entry *entry = txn_find(txn, blkno);

	return entry && entry->allocated ? entry->session_epoch : 0;
}

void ngnfs_txn_set_stable(struct ngnfs_txn *txn)
{
	txn->stable = true;
}

void ngnfs_txn_set_unstable(struct ngnfs_txn *txn)
{
	txn->unstable = true;
}

struct ngnfs_cache *ngnfs_txn_cache(struct ngnfs_txn *txn)
{
	return txn->cache;
}

uint16_t ngnfs_txn_device_count(struct ngnfs_txn *txn)
{
	return txn->cache->device_count;
}

/* Unlock an entry's block; allocations go back to the pool.  Lock held. */
static void txn_release_entry(struct ngnfs_txn *txn, struct txn_entry *entry, bool to_pool,
			      struct cache_action **actions)
{
	struct ngnfs_cache *cache = txn->cache;
	struct cache_block *block = entry->block;

	ngnfs_block_buf_free(entry->copy);
	entry->copy = NULL;
	if (entry->mode == NGNFS_ACCESS_WRITE)
		block->writer = false;
	else
		block->readers--;
	if (entry->allocated && to_pool) {
		/* A reservation whose grant a session reset took is worth nothing. */
		if (block->access == NGNFS_ACCESS_WRITE)
			cache_pool_push(
			    cache, ngnfs_blkno_device(entry->blkno),
			    &(struct pool_block){ .blkno = entry->blkno,
						  .version = entry->version,
						  .session_epoch = entry->session_epoch });
		cache_wake_block(cache, entry->blkno);
		if (!block->revoke_pending && !block->dirty &&
		    block->get_access == NGNFS_ACCESS_NONE)
			cache_remove_block(cache, block);
		return;
	}
	cache_block_unlocked(cache, block, actions);
}

static void txn_abort(struct ngnfs_txn *txn)
{
	struct ngnfs_cache *cache = txn->cache;
	struct cache_action *actions = NULL;
	uint32_t i;

	pthread_mutex_lock(&cache->lock);
	for (i = 0; i < txn->count; i++)
		txn_release_entry(txn, &txn->entries[i], true, &actions);
	txn->count = 0;
	pthread_mutex_unlock(&cache->lock);
	cache_run_actions(cache, actions);
}

/*
 * Every block about to be installed must still be granted for write.  A
 * transaction holds its blocks only locally: a session reset (or any
 * other loss of the grant) while the function ran would otherwise let it
 * commit into a block whose write-back the server refuses, losing the
 * whole set.  Such a transaction is retried instead, as if the block had
 * been busy when it was taken.  Lock held.
 */
static bool txn_grants_held(struct ngnfs_txn *txn)
{
	uint32_t i;

	for (i = 0; i < txn->count; i++) {
		struct txn_entry *entry = &txn->entries[i];
		struct cache_block *block = entry->block;

		if (block->drop_pending) {
			/* Its data was a dirty change that is lost (cache.c, lose_set). */
			txn_retry_block(txn, entry->blkno, entry->mode);
			return false;
		}
		if (entry->mode != NGNFS_ACCESS_WRITE || (entry->allocated && entry->freed))
			continue;
		if (block->access == NGNFS_ACCESS_WRITE && !block->regrant)
			continue;
		ngnfs_cache_log("transaction on block %llu (device %u): the write grant went away "
				"while the transaction ran; running it again\n",
				(unsigned long long)entry->blkno, ngnfs_blkno_device(entry->blkno));
		txn_retry_block(txn, entry->blkno, NGNFS_ACCESS_WRITE);
		return false;
	}
	return true;
}

/* Whether the transaction changes a block that the write in flight writing carries. */
static bool txn_writes_into(struct ngnfs_txn *txn, const struct dirty_set *writing)
{
	uint32_t i;

	for (i = 0; i < txn->count; i++) {
		if (txn->entries[i].mode == NGNFS_ACCESS_WRITE &&
		    txn->entries[i].block->wb_set == writing)
			return true;
	}
	return false;
}

/*
 * A transaction that changes something and only read a block whose write
 * is still in flight must not commit before that write is known: if it
 * failed, the block is refetched and what the transaction derived from it
 * may be wrong, and its own set could be durable first (the set of a
 * block it wrote is ordered after such a write by copy on write, dirty.c;
 * a block it only read is in none of its sets).  It runs again once the
 * write completed, unless it also changes a block of that same write:
 * its set then follows the write and is lost with it anyway.  Pure
 * readers (lookups, getattr) install nothing and never wait here.
 *
 * XXX: a block that other transactions keep writing back to back can hold
 * such a transaction back for several writes; a dependency of its set on
 * the write (rather than a wait) would avoid that.
 */
static bool txn_reads_in_flight(struct ngnfs_txn *txn)
{
	bool changes = false;
	uint32_t i;

	for (i = 0; i < txn->count; i++) {
		if (txn->entries[i].mode == NGNFS_ACCESS_WRITE) {
			changes = true;
			break;
		}
	}
	if (!changes)
		return false;
	for (i = 0; i < txn->count; i++) {
		struct txn_entry *entry = &txn->entries[i];

		if (entry->mode == NGNFS_ACCESS_READ && entry->block->wb_set &&
		    !txn_writes_into(txn, entry->block->wb_set)) {
			txn->retry = TXN_RETRY_WRITEBACK;
			txn->retry_blkno = entry->blkno;
			txn->retry_access = NGNFS_ACCESS_READ;
			return true;
		}
	}
	return false;
}

/* Install the private copies as one dirty set; returns the set or NULL (lock held). */
static int txn_install(struct ngnfs_txn *txn, struct dirty_set **set_out)
{
	struct ngnfs_cache *cache = txn->cache;
	struct dirty_set *set = NULL;
	bool writes = false;
	uint32_t i;

	for (i = 0; i < txn->count; i++) {
		struct txn_entry *entry = &txn->entries[i];

		if (entry->mode != NGNFS_ACCESS_WRITE || (entry->allocated && entry->freed))
			continue;
		writes = true;
		/* A set being written takes nothing more: the change goes to a newer set. */
		if (entry->block->set && !entry->block->set->writing)
			set = set ? dirty_set_merge(cache, set, entry->block->set)
				  : entry->block->set;
	}
	if (!writes) {
		*set_out = NULL;
		return 0;
	}
	/*
	 * What the transaction read is part of what it wrote: a rename that
	 * checked an ancestor chain still dirty in another set is only valid
	 * if that set lands too, so read blocks' idle sets join ours (a set
	 * being written is already on its way).  A sync of any block of the
	 * merged set then also makes durable what it was derived from.
	 */
	for (i = 0; i < txn->count; i++) {
		struct txn_entry *entry = &txn->entries[i];
		struct dirty_set *read_set = entry->block->set;

		if (entry->mode != NGNFS_ACCESS_READ || !read_set || read_set->writing)
			continue;
		set = set ? dirty_set_merge(cache, set, read_set) : read_set;
	}
	if (!set) {
		set = dirty_set_create(cache);
		if (!set)
			return -ENOMEM;
	}
	for (i = 0; i < txn->count; i++) {
		struct txn_entry *entry = &txn->entries[i];
		struct cache_block *block = entry->block;

		if (entry->mode != NGNFS_ACCESS_WRITE || (entry->allocated && entry->freed))
			continue;
		if (entry->freed && block->reserved && !block->writeback) {
			/*
			 * Allocated by an earlier transaction whose set is not
			 * written yet: the server only reserved it, so there is
			 * nothing to free.  It leaves the set, and the release
			 * below returns the reservation to the pool.
			 */
			dirty_set_remove_block(cache, block);
			entry->allocated = true;
			continue;
		}
		if (entry->freed) {
			if (dirty_set_add_free(set, entry->blkno) < 0) {
				ngnfs_cache_log("committing the free of block %llu: no memory, "
						"the block leaks\n",
						(unsigned long long)entry->blkno);
				cache_record_error(cache, -ENOMEM);
			}
			block->freed = true;
		} else if (block->writeback && !block->wb_data) {
			/*
			 * Copy on write: the write in flight keeps the bytes it
			 * sends, the private copy becomes the block's data.
			 */
			block->wb_data = block->data;
			block->data = entry->copy;
			entry->copy = NULL;
			cache->data_blocks++;
		} else if (block->readers) {
			memcpy(block->data, entry->copy, NGNFS_BLOCK_SIZE);
		} else {
			/*
			 * Nobody else uses block->data: our write lock keeps
			 * readers out and a write in flight sends wb_data.  The
			 * buffers trade places instead of 4 KiB being copied
			 * back; the old one goes with the entry.
			 */
			uint8_t *old = block->data;

			block->data = entry->copy;
			entry->copy = old;
		}
		dirty_set_add_block(cache, set, block);
		/* An allocation now belongs to the set, not to the pool. */
		entry->allocated = false;
	}
	if (!set->block_count && !set->free_count) {
		/* Only returned reservations: nothing to write, nothing to wait for. */
		dirty_set_finish_waiters(set, 0);
		dirty_set_free(cache, set);
		set = NULL;
	}
	*set_out = set;
	return 0;
}

static int txn_commit(struct ngnfs_txn *txn)
{
	struct ngnfs_cache *cache = txn->cache;
	struct cache_action *actions = NULL;
	struct stable_waiter waiter;
	struct dirty_set *set;
	bool wait = false;
	uint32_t i;
	int ret;

	pthread_mutex_lock(&cache->lock);
	if (!txn_grants_held(txn) || txn_reads_in_flight(txn)) {
		pthread_mutex_unlock(&cache->lock);
		txn_abort(txn);
		return -EAGAIN;
	}
	ret = txn_install(txn, &set);
	if (ret < 0) {
		pthread_mutex_unlock(&cache->lock);
		txn_abort(txn);
		return ret;
	}
	/*
	 * The waiter is what makes a stable-mode set leave at once (flusher);
	 * an unstable transaction's set waits for its interval unless a
	 * waiting one merges with it.
	 */
	if (set &&
	    (txn->stable || (cache->durability == NGNFS_DURABILITY_STABLE && !txn->unstable))) {
		memset(&waiter, 0, sizeof(waiter));
		pthread_cond_init(&waiter.cond, NULL);
		dirty_set_add_waiter(set, &waiter);
		wait = true;
	}
	if (set)
		cache_kick_flusher_for(cache, set);
	for (i = 0; i < txn->count; i++)
		txn_release_entry(txn, &txn->entries[i], true, &actions);
	txn->count = 0;
	cache_make_room(cache, 0, &actions);
	pthread_mutex_unlock(&cache->lock);
	cache_run_actions(cache, actions);
	if (!wait)
		return 0;
	pthread_mutex_lock(&cache->lock);
	while (!waiter.done)
		pthread_cond_wait(&waiter.cond, &cache->lock);
	pthread_mutex_unlock(&cache->lock);
	pthread_cond_destroy(&waiter.cond);
	return waiter.status;
}

static void wait_slice(struct ngnfs_cache *cache, pthread_cond_t *cond, uint64_t ms)
{
	struct timespec deadline;

	clock_gettime(CLOCK_MONOTONIC, &deadline);
	deadline.tv_sec += ms / 1000;
	deadline.tv_nsec += (long)(ms % 1000) * 1000000;
	if (deadline.tv_nsec >= 1000000000) {
		deadline.tv_sec++;
		deadline.tv_nsec -= 1000000000;
	}
	pthread_cond_timedwait(cond, &cache->lock, &deadline);
}

/*
 * Before a GET adds a block: reclaim clean blocks, and if only dirty or
 * locked ones are left, give the flusher (bounded) time to write some.
 */
static void txn_wait_for_room(struct ngnfs_cache *cache)
{
	uint64_t give_up = cache_now_ms() + TXN_ROOM_WAIT_MS;

	for (;;) {
		struct cache_action *actions = NULL;

		cache_make_room(cache, 1, &actions);
		if (actions) {
			pthread_mutex_unlock(&cache->lock);
			cache_run_actions(cache, actions);
			pthread_mutex_lock(&cache->lock);
		}
		if (cache->data_blocks < cache->max_data_blocks ||
		    cache_list_empty(&cache->dirty_sets) || cache_now_ms() >= give_up)
			return;
		wait_slice(cache, &cache->idle_cond, 50);
	}
}

/* With nothing held: wait until what stopped the transaction is available. */
static int txn_wait(struct ngnfs_txn *txn)
{
	struct ngnfs_cache *cache = txn->cache;
	unsigned int attempts = 0;
	int ret = 0;

	pthread_mutex_lock(&cache->lock);
	if (txn->retry == TXN_RETRY_ALLOC) {
		struct alloc_pool *pool = &cache->pools[txn->retry_device];

		/*
		 * The run that stopped put its allocations back, so the pool
		 * may not be empty and still hold fewer blocks than the
		 * transaction needs: refill once whatever the count says.
		 */
		if (!pool->refilling && !pool->error)
			cache_refill_pool(cache, txn->retry_device);
		while (!pool->count && !pool->error) {
			if (!pool->refilling)
				cache_refill_pool(cache, txn->retry_device);
			else
				wait_slice(cache, cache_waitq(cache, txn->retry_device),
					   TXN_WAIT_SLICE_MS);
		}
		goto out;
	}
	if (txn->retry == TXN_RETRY_WRITEBACK) {
		struct cache_block *block;

		/* bounded slices: the completion wakes the block's queue */
		while ((block = cache_lookup(cache, txn->retry_blkno)) && block->wb_set)
			wait_slice(cache, cache_waitq(cache, block->blkno), TXN_WAIT_SLICE_MS);
		goto out;
	}
	for (;;) {
		struct cache_block *block = cache_lookup_create(cache, txn->retry_blkno);

		if (!block) {
			ret = -ENOMEM;
			break;
		}
		if (block->freed)
			break; /* the rerun reports it */
		if (block->get_error && block->get_access == NGNFS_ACCESS_NONE) {
			ret = block->get_error;
			block->get_error = 0;
			if (ret == -ERANGE || ret == -EXDEV) {
				/*
				 * The device says it has no such block: asking
				 * again cannot help.  The rerun hears it as
				 * -ENXIO from txn_lock, inside the operation,
				 * which knows what the block number came from
				 * (a handle: stale; a pointer: corruption);
				 * ERANGE would read as "buffer too small".
				 */
				block->get_error = -ENXIO;
				ret = 0;
				break;
			}
			if (++attempts >= TXN_GET_ATTEMPTS) {
				ngnfs_cache_log("GET of block %llu on device %u for %s failed: %s "
						"(%d)\n",
						(unsigned long long)block->blkno,
						ngnfs_blkno_device(block->blkno),
						cache_access_name(txn->retry_access),
						strerror(-ret), ret);
				ret = cache_unreachable_error(
				    cache, ngnfs_blkno_device(block->blkno), ret);
				break;
			}
			ret = 0;
			wait_slice(cache, cache_waitq(cache, block->blkno), 20 * attempts);
			continue;
		}
		if (block_available(block, txn->retry_access) &&
		    block_lockable(block, txn->retry_access))
			break;
		if ((!block->data || block->access < txn->retry_access) &&
		    block->get_access == NGNFS_ACCESS_NONE && !block->revoke_pending &&
		    !block->writeback && !block->regrant && !block->dirty) {
			if (!block->data)
				txn_wait_for_room(cache);
			block = cache_lookup_create(cache, txn->retry_blkno);
			if (!block) {
				ret = -ENOMEM;
				break;
			}
			if (block->get_access == NGNFS_ACCESS_NONE &&
			    (!block->data || block->access < txn->retry_access))
				cache_start_get(cache, block, txn->retry_access);
			continue;
		}
		wait_slice(cache, cache_waitq(cache, block->blkno), TXN_WAIT_SLICE_MS);
	}
out:
	pthread_mutex_unlock(&cache->lock);
	return ret;
}

/* A run that must start again: counted (the benchmarks' retries/k), then waited for. */
static int txn_count_retry_and_wait(struct ngnfs_txn *txn)
{
	struct ngnfs_cache *cache = txn->cache;

	pthread_mutex_lock(&cache->lock);
	cache->counters.retries++;
	pthread_mutex_unlock(&cache->lock);
	return txn_wait(txn);
}

/*
 * After a stall of this process, first read what the servers sent meanwhile
 * (client.c): a grant they gave away must not serve this transaction.
 */
static void txn_catch_up_after_stall(struct ngnfs_cache *cache)
{
	if (ngnfs_client_io_current(cache->client))
		return;
	pthread_mutex_lock(&cache->lock);
	cache->counters.stall_catch_ups++;
	pthread_mutex_unlock(&cache->lock);
	if (ngnfs_client_wait_io_pass(cache->client))
		ngnfs_cache_log("the network I/O thread did not run for 5 s; going on with what "
				"the cache has\n");
}

int ngnfs_txn_run(struct ngnfs_cache *cache, ngnfs_txn_fn fn, void *arg)
{
	struct ngnfs_txn txn = { .cache = cache };
	int ret;

	txn_catch_up_after_stall(cache);
	for (;;) {
		txn.count = 0;
		txn.retry = TXN_RETRY_NONE;
		ret = fn(&txn, arg);
		if (ret == -EAGAIN && txn.retry != TXN_RETRY_NONE) {
			txn_abort(&txn);
			ret = txn_count_retry_and_wait(&txn);
			if (ret < 0)
				break;
			continue;
		}
		if (ret != 0) {
			txn_abort(&txn);
			break;
		}
		txn.retry = TXN_RETRY_NONE;
		ret = txn_commit(&txn);
		if (ret == -EAGAIN && txn.retry != TXN_RETRY_NONE) {
			/* A grant went away under the run: nothing was installed. */
			ret = txn_count_retry_and_wait(&txn);
			if (ret < 0)
				break;
			continue;
		}
		break;
	}
	free(txn.entries);
	return ret;
}
