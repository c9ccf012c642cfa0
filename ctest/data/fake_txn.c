// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * An in-memory implementation of txn.h for the file data and xattr tests
 * (see fake_txn.h for what it checks and counts).
 *
 * It keeps the real contract's shape: reads see committed contents or the
 * transaction's own private copy, writes and allocations go to private
 * copies that are installed only when the function returns 0, frees take
 * effect at commit.  An injected -EAGAIN marks the transaction for retry;
 * a function that then returns anything but -EAGAIN swallowed an error,
 * and the double aborts the test with a message saying so.  That is the
 * property every operation must have and this file exists to prove.
 *
 * XXX:
 *  - Freed block numbers are never reused (blockd reuses them).
 */

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake_txn.h"
#include "format-msg.h"

#define FAKE_HASH_BUCKETS 4096
#define FAKE_MAX_INJECTED 8 /* injected retries per ngnfs_txn_run, so it always ends */

struct fake_block {
	struct fake_block *next;
	uint64_t blkno;
	uint64_t version;
	bool live;
	_Alignas(16) uint8_t data[NGNFS_BLOCK_SIZE]; /* blocks are read as structures */
};

struct ngnfs_cache {
	pthread_mutex_t mutex;
	uint16_t device_count;
	unsigned int retry_percent;
	uint64_t random_state;
	uint64_t next_index[NGNFS_MAX_DEVICES > 256 ? 256 : NGNFS_MAX_DEVICES];
	struct fake_block *buckets[FAKE_HASH_BUCKETS];
	struct ngnfs_fake_counters counters;
};

enum held_mode { HELD_READ, HELD_WRITE };

struct held_block {
	struct held_block *next;
	uint64_t blkno;
	enum held_mode mode;
	bool allocated;
	bool freed;
	uint64_t version;
	uint8_t *copy; /* private copy for HELD_WRITE */
};

struct ngnfs_txn {
	struct ngnfs_cache *cache;
	struct held_block *buckets[256];
	bool retry;
	bool stable;
	bool unstable;
	unsigned int injected;
};

static uint64_t fake_random(struct ngnfs_cache *cache)
{
	/* xorshift64*: reproducible from the seed the test prints */
	uint64_t x = cache->random_state;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	cache->random_state = x;
	return x * 2685821657736338717ULL;
}

static unsigned int hash_blkno(uint64_t blkno, unsigned int buckets)
{
	return (unsigned int)((blkno * 0x9e3779b97f4a7c15ULL) >> 40) % buckets;
}

static struct fake_block *find_block(struct ngnfs_cache *cache, uint64_t blkno)
{
	struct fake_block *block = cache->buckets[hash_blkno(blkno, FAKE_HASH_BUCKETS)];

	while (block && block->blkno != blkno)
		block = block->next;
	return block;
}

struct ngnfs_cache *ngnfs_fake_cache_create(uint16_t device_count, unsigned int retry_percent,
					    uint64_t seed)
{
	struct ngnfs_cache *cache = calloc(1, sizeof(*cache));

	if (!cache || device_count == 0 || device_count > 256) {
		free(cache);
		return NULL;
	}
	pthread_mutex_init(&cache->mutex, NULL);
	cache->device_count = device_count;
	cache->retry_percent = retry_percent;
	cache->random_state = seed ? seed : 1;
	for (unsigned int i = 0; i < device_count; i++)
		cache->next_index[i] = NGNFS_FIRST_ALLOC_INDEX;
	return cache;
}

void ngnfs_fake_cache_destroy(struct ngnfs_cache *cache)
{
	if (!cache)
		return;
	for (unsigned int i = 0; i < FAKE_HASH_BUCKETS; i++) {
		struct fake_block *block = cache->buckets[i];

		while (block) {
			struct fake_block *next = block->next;

			free(block);
			block = next;
		}
	}
	pthread_mutex_destroy(&cache->mutex);
	free(cache);
}

void ngnfs_fake_counters(struct ngnfs_cache *cache, struct ngnfs_fake_counters *counters)
{
	*counters = cache->counters;
}

uint64_t ngnfs_fake_live_on_device(struct ngnfs_cache *cache, uint16_t device)
{
	uint64_t count = 0;

	for (unsigned int i = 0; i < FAKE_HASH_BUCKETS; i++)
		for (struct fake_block *block = cache->buckets[i]; block; block = block->next)
			if (block->live && ngnfs_blkno_device(block->blkno) == device)
				count++;
	return count;
}

uint8_t *ngnfs_fake_block(struct ngnfs_cache *cache, uint64_t blkno)
{
	struct fake_block *block = find_block(cache, blkno);

	return block && block->live ? block->data : NULL;
}

int ngnfs_fake_is_live(struct ngnfs_cache *cache, uint64_t blkno)
{
	struct fake_block *block = find_block(cache, blkno);

	return block && block->live;
}

void ngnfs_fake_set_retry_percent(struct ngnfs_cache *cache, unsigned int retry_percent)
{
	cache->retry_percent = retry_percent;
}

void ngnfs_fake_set_next_index(struct ngnfs_cache *cache, uint16_t device, uint64_t index)
{
	cache->next_index[device] = index;
}

void ngnfs_fake_reset_max_dirty(struct ngnfs_cache *cache)
{
	cache->counters.max_dirty = 0;
}

static struct held_block *find_held(struct ngnfs_txn *txn, uint64_t blkno)
{
	struct held_block *held = txn->buckets[hash_blkno(blkno, 256)];

	while (held && held->blkno != blkno)
		held = held->next;
	return held;
}

static struct held_block *add_held(struct ngnfs_txn *txn, uint64_t blkno)
{
	struct held_block *held = calloc(1, sizeof(*held));
	unsigned int bucket = hash_blkno(blkno, 256);

	if (!held)
		return NULL;
	held->blkno = blkno;
	held->next = txn->buckets[bucket];
	txn->buckets[bucket] = held;
	return held;
}

static void drop_held(struct ngnfs_txn *txn)
{
	for (unsigned int i = 0; i < 256; i++) {
		struct held_block *held = txn->buckets[i];

		while (held) {
			struct held_block *next = held->next;

			free(held->copy);
			free(held);
			held = next;
		}
		txn->buckets[i] = NULL;
	}
}

/* The first access of a block in a run may be refused, as a busy block would be. */
static int maybe_inject(struct ngnfs_txn *txn)
{
	struct ngnfs_cache *cache = txn->cache;

	if (cache->retry_percent == 0 || txn->injected >= FAKE_MAX_INJECTED)
		return 0;
	if (fake_random(cache) % 100 >= cache->retry_percent)
		return 0;
	txn->injected++;
	txn->retry = true;
	return -EAGAIN;
}

static int get_held(struct ngnfs_txn *txn, uint64_t blkno, bool write, struct held_block **out)
{
	struct held_block *held = find_held(txn, blkno);
	struct fake_block *block;
	int ret;

	if (held) {
		if (held->freed) {
			fprintf(stderr, "fake txn: access to block 0x%llx after freeing it\n",
				(unsigned long long)blkno);
			return -EIO;
		}
		if (write && held->mode == HELD_READ) {
			block = find_block(txn->cache, blkno);
			held->copy = malloc(NGNFS_BLOCK_SIZE);
			if (!held->copy)
				return -ENOMEM;
			memcpy(held->copy, block->data, NGNFS_BLOCK_SIZE);
			held->mode = HELD_WRITE;
		}
		*out = held;
		return 0;
	}
	block = find_block(txn->cache, blkno);
	if (!block || !block->live) {
		fprintf(stderr, "fake txn: access to block 0x%llx that is not allocated\n",
			(unsigned long long)blkno);
		return -EIO;
	}
	ret = maybe_inject(txn);
	if (ret < 0)
		return ret;
	held = add_held(txn, blkno);
	if (!held)
		return -ENOMEM;
	held->version = block->version;
	held->mode = write ? HELD_WRITE : HELD_READ;
	if (write) {
		held->copy = malloc(NGNFS_BLOCK_SIZE);
		if (!held->copy)
			return -ENOMEM;
		memcpy(held->copy, block->data, NGNFS_BLOCK_SIZE);
	}
	*out = held;
	return 0;
}

int ngnfs_txn_read(struct ngnfs_txn *txn, uint64_t blkno, const void **data)
{
	struct held_block *held;
	int ret = get_held(txn, blkno, false, &held);

	if (ret < 0)
		return ret;
	*data = held->mode == HELD_WRITE ? held->copy : find_block(txn->cache, blkno)->data;
	return 0;
}

int ngnfs_txn_write(struct ngnfs_txn *txn, uint64_t blkno, void **data)
{
	struct held_block *held;
	int ret = get_held(txn, blkno, true, &held);

	if (ret < 0)
		return ret;
	*data = held->copy;
	return 0;
}

int ngnfs_txn_alloc(struct ngnfs_txn *txn, uint16_t device, uint64_t *blkno, uint64_t *version,
		    void **data)
{
	struct ngnfs_cache *cache = txn->cache;
	struct held_block *held;
	int ret;

	if (device >= cache->device_count) {
		fprintf(stderr, "fake txn: allocation on device %u of %u\n", device,
			cache->device_count);
		return -EINVAL;
	}
	ret = maybe_inject(txn);
	if (ret < 0)
		return ret;
	held = add_held(txn, ngnfs_blkno_make(device, cache->next_index[device]++));
	if (!held)
		return -ENOMEM;
	held->copy = calloc(1, NGNFS_BLOCK_SIZE);
	if (!held->copy)
		return -ENOMEM;
	held->mode = HELD_WRITE;
	held->allocated = true;
	held->version = 1;
	*blkno = held->blkno;
	*version = held->version; /* txn.h gives no NULL option: crash here as txn.c would */
	*data = held->copy;
	return 0;
}

int ngnfs_txn_free(struct ngnfs_txn *txn, uint64_t blkno)
{
	struct held_block *held = find_held(txn, blkno);

	if (!held || held->mode != HELD_WRITE || held->freed) {
		fprintf(stderr, "fake txn: free of block 0x%llx not held for write\n",
			(unsigned long long)blkno);
		return -EINVAL;
	}
	held->freed = true;
	return 0;
}

uint64_t ngnfs_txn_version(struct ngnfs_txn *txn, uint64_t blkno)
{
	struct held_block *held = find_held(txn, blkno);

	return held ? held->version : 0;
}

/* The fake store is one session that never ends: epoch 1. */
uint32_t ngnfs_txn_session_epoch(struct ngnfs_txn *txn, uint64_t blkno)
{
	struct held_block *held = find_held(txn, blkno);

	return held && held->allocated ? 1 : 0;
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

static int commit(struct ngnfs_txn *txn)
{
	struct ngnfs_cache *cache = txn->cache;
	uint64_t dirty = 0;

	for (unsigned int i = 0; i < 256; i++) {
		for (struct held_block *held = txn->buckets[i]; held; held = held->next) {
			struct fake_block *block;

			if (held->mode != HELD_WRITE)
				continue;
			if (held->allocated && held->freed)
				continue;
			block = find_block(cache, held->blkno);
			if (!block) {
				unsigned int bucket = hash_blkno(held->blkno, FAKE_HASH_BUCKETS);

				block = calloc(1, sizeof(*block));
				if (!block)
					return -ENOMEM;
				block->blkno = held->blkno;
				block->next = cache->buckets[bucket];
				cache->buckets[bucket] = block;
			}
			dirty++;
			block->version++;
			if (held->freed) {
				block->live = false;
				cache->counters.frees++;
				cache->counters.live_blocks--;
				continue;
			}
			if (held->allocated) {
				block->live = true;
				cache->counters.allocs++;
				cache->counters.live_blocks++;
			}
			memcpy(block->data, held->copy, NGNFS_BLOCK_SIZE);
		}
	}
	cache->counters.last_dirty = dirty;
	if (dirty > cache->counters.max_dirty)
		cache->counters.max_dirty = dirty;
	cache->counters.commits++;
	if (txn->stable)
		cache->counters.stable_commits++;
	if (txn->unstable)
		cache->counters.unstable_commits++;
	return 0;
}

int ngnfs_txn_run(struct ngnfs_cache *cache, ngnfs_txn_fn fn, void *arg)
{
	struct ngnfs_txn txn;
	int ret;

	memset(&txn, 0, sizeof(txn));
	txn.cache = cache;
	pthread_mutex_lock(&cache->mutex);
	for (;;) {
		txn.retry = false;
		cache->counters.runs++;
		ret = fn(&txn, arg);
		if (txn.retry && ret != -EAGAIN) {
			fprintf(stderr,
				"fake txn: operation returned %d after a block access asked for a "
				"retry (-EAGAIN swallowed)\n",
				ret);
			abort();
		}
		if (ret == -EAGAIN && txn.retry) {
			cache->counters.retries++;
			drop_held(&txn);
			continue;
		}
		break;
	}
	if (ret == 0)
		ret = commit(&txn);
	drop_held(&txn);
	pthread_mutex_unlock(&cache->mutex);
	return ret;
}
