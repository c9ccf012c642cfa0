/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * A test double of txn.h (and the few cache.h and client.h calls the
 * filesystem makes) over an in-memory map of blocks, so that the POSIX
 * layer can be tested fast, deterministically and without servers.
 *
 * One process-wide store stands for the devices: blocks with versions
 * (bumped on every committed write, kept across free and reuse like
 * blockd), per-device allocation from a counter plus a free list, the
 * FORMAT identity of the devices.  Transactions are serialised by one
 * mutex held for the whole run of the function, which is what a single
 * client without contention looks like.
 *
 * To prove that operation code is re-runnable, the fake fails a small
 * random fraction of block calls with -EAGAIN (the retry flag set, the
 * run's private copies thrown away, the function run again).  Only the
 * first runs of a ngnfs_txn_run() get injected failures, so every
 * transaction finishes however many blocks it touches.  The rate and the
 * seed come from fake_txn_configure() (tests take the seed from
 * NGNFS_TEST_SEED).
 *
 * XXX:
 *  - No second client: revocations and invalidations never happen here;
 *    those paths are tested against real blockd processes.
 */

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache.h"
#include "client.h"
#include "fake_txn.h"
#include "txn.h"

#define HASH_BUCKETS	   (1U << 20)
#define FAKE_DEVICE_MAX	   64
#define FAKE_DEVICE_BLOCKS (1ULL << 32)
#define INJECTED_RUNS	   2

struct fake_block {
	uint64_t blkno;
	uint64_t version;
	bool allocated;
	uint8_t *data; /* NULL: never written (reads as zeros) */
	struct fake_block *next;
};

struct fake_device {
	uint64_t next_index;
	uint64_t *free_list; /* a FIFO: free_list[free_head..free_count) */
	size_t free_head;
	size_t free_count;
	size_t free_capacity;
	uint64_t allocated;
	bool formatted;
};

static struct {
	pthread_mutex_t lock;
	struct fake_block **buckets;
	struct fake_device devices[FAKE_DEVICE_MAX];
	uint16_t device_count;
	uint8_t fs_id[NGNFS_FS_ID_SIZE];
	unsigned int eagain_per_million;
	uint64_t random_state;
	struct fake_txn_stats stats;
} store = { .lock = PTHREAD_MUTEX_INITIALIZER,
	    .eagain_per_million = 20000,
	    .random_state = 0x9e3779b97f4a7c15ULL };

static const uint8_t zero_block[NGNFS_BLOCK_SIZE];

struct ngnfs_cache {
	ngnfs_cache_lost_fn lost;
	void *lost_arg;
};

struct ngnfs_client {
	uint16_t device_count;
	uint32_t hello_flags;
};

static struct ngnfs_cache the_cache;
static struct ngnfs_client the_client;

static uint64_t next_random(void)
{
	uint64_t x = store.random_state;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	store.random_state = x;
	return x;
}

void fake_txn_configure(uint64_t seed, unsigned int eagain_per_million)
{
	pthread_mutex_lock(&store.lock);
	store.random_state = seed ? seed : 0x9e3779b97f4a7c15ULL;
	store.eagain_per_million = eagain_per_million;
	pthread_mutex_unlock(&store.lock);
}

void fake_txn_reset(void)
{
	unsigned int i;

	pthread_mutex_lock(&store.lock);
	if (store.buckets) {
		for (i = 0; i < HASH_BUCKETS; i++) {
			struct fake_block *block, *next;

			for (block = store.buckets[i]; block; block = next) {
				next = block->next;
				free(block->data);
				free(block);
			}
		}
		free(store.buckets);
		store.buckets = NULL;
	}
	for (i = 0; i < FAKE_DEVICE_MAX; i++)
		free(store.devices[i].free_list);
	memset(store.devices, 0, sizeof(store.devices));
	store.device_count = 0;
	memset(store.fs_id, 0, sizeof(store.fs_id));
	memset(&store.stats, 0, sizeof(store.stats));
	pthread_mutex_unlock(&store.lock);
}

void fake_txn_stats(struct fake_txn_stats *stats)
{
	uint16_t i;

	pthread_mutex_lock(&store.lock);
	*stats = store.stats;
	stats->allocated_blocks = 0;
	for (i = 0; i < store.device_count; i++)
		stats->allocated_blocks += store.devices[i].allocated;
	pthread_mutex_unlock(&store.lock);
}

static struct fake_block *find_block(uint64_t blkno, bool create)
{
	unsigned int bucket = (unsigned int)((blkno * 0x9e3779b97f4a7c15ULL) >> 44);
	struct fake_block *block;

	if (!store.buckets) {
		store.buckets = calloc(HASH_BUCKETS, sizeof(*store.buckets));
		if (!store.buckets)
			abort();
	}
	for (block = store.buckets[bucket]; block; block = block->next)
		if (block->blkno == blkno)
			return block;
	if (!create)
		return NULL;
	block = calloc(1, sizeof(*block));
	if (!block)
		abort();
	block->blkno = blkno;
	block->next = store.buckets[bucket];
	store.buckets[bucket] = block;
	return block;
}

/* ---- transactions ---- */

struct txn_entry {
	uint64_t blkno;
	uint64_t version;
	uint8_t *copy; /* write access: private copy */
	bool allocated_here;
	bool freed;
};

struct ngnfs_txn {
	struct txn_entry *entries;
	size_t count;
	size_t capacity;
	bool inject;
	bool retry;
};

static int maybe_inject(struct ngnfs_txn *txn)
{
	if (!txn->inject || store.eagain_per_million == 0)
		return 0;
	if (next_random() % 1000000 >= store.eagain_per_million)
		return 0;
	txn->retry = true;
	store.stats.injected_eagain++;
	return -EAGAIN;
}

static struct txn_entry *txn_find(struct ngnfs_txn *txn, uint64_t blkno)
{
	size_t i;

	for (i = 0; i < txn->count; i++)
		if (txn->entries[i].blkno == blkno)
			return &txn->entries[i];
	return NULL;
}

static struct txn_entry *txn_add(struct ngnfs_txn *txn, uint64_t blkno)
{
	struct fake_block *block = find_block(blkno, false);
	struct txn_entry *entry;

	if (txn->count == txn->capacity) {
		txn->capacity = txn->capacity ? txn->capacity * 2 : 16;
		txn->entries = realloc(txn->entries, txn->capacity * sizeof(*txn->entries));
		if (!txn->entries)
			abort();
	}
	entry = &txn->entries[txn->count++];
	memset(entry, 0, sizeof(*entry));
	entry->blkno = blkno;
	entry->version = block ? block->version : 0;
	return entry;
}

static int check_blkno(uint64_t blkno)
{
	/* block 0 is "no block" to the filesystem, but mkfs writes it like blockd accepts */
	if (ngnfs_blkno_device(blkno) >= store.device_count)
		return -EINVAL;
	return 0;
}

int ngnfs_txn_read(struct ngnfs_txn *txn, uint64_t blkno, const void **data)
{
	struct txn_entry *entry;
	struct fake_block *block;
	int ret;

	store.stats.reads++;
	ret = check_blkno(blkno);
	if (ret < 0)
		return ret;
	entry = txn_find(txn, blkno);
	if (!entry) {
		ret = maybe_inject(txn);
		if (ret < 0)
			return ret;
		entry = txn_add(txn, blkno);
	}
	if (entry->copy) {
		*data = entry->copy;
		return 0;
	}
	block = find_block(blkno, false);
	*data = block && block->data ? block->data : zero_block;
	return 0;
}

int ngnfs_txn_write(struct ngnfs_txn *txn, uint64_t blkno, void **data)
{
	struct txn_entry *entry;
	struct fake_block *block;
	int ret;

	store.stats.writes++;
	ret = check_blkno(blkno);
	if (ret < 0)
		return ret;
	entry = txn_find(txn, blkno);
	if (!entry || !entry->copy) {
		ret = maybe_inject(txn);
		if (ret < 0)
			return ret;
	}
	if (!entry)
		entry = txn_add(txn, blkno);
	if (entry->freed)
		return -EINVAL;
	if (!entry->copy) {
		entry->copy = malloc(NGNFS_BLOCK_SIZE);
		if (!entry->copy)
			return -ENOMEM;
		block = find_block(blkno, false);
		memcpy(entry->copy, block && block->data ? block->data : zero_block,
		       NGNFS_BLOCK_SIZE);
	}
	*data = entry->copy;
	return 0;
}

int ngnfs_txn_alloc(struct ngnfs_txn *txn, uint16_t device, uint64_t *blkno, uint64_t *version,
		    void **data)
{
	struct fake_device *dev;
	struct txn_entry *entry;
	uint64_t index;
	int ret;

	store.stats.allocs++;
	if (device >= store.device_count)
		return -EINVAL;
	ret = maybe_inject(txn);
	if (ret < 0)
		return ret;
	dev = &store.devices[device];
	if (dev->free_head < dev->free_count) {
		/* oldest free first, so that a freed block is not reused at once */
		index = dev->free_list[dev->free_head++];
	} else {
		if (dev->next_index >= FAKE_DEVICE_BLOCKS)
			return -ENOSPC;
		index = dev->next_index++;
	}
	dev->allocated++;
	entry = txn_add(txn, ngnfs_blkno_make(device, index));
	entry->allocated_here = true;
	entry->copy = calloc(1, NGNFS_BLOCK_SIZE);
	if (!entry->copy)
		return -ENOMEM;
	*blkno = entry->blkno;
	if (version)
		*version = entry->version;
	*data = entry->copy;
	return 0;
}

static void free_index(uint64_t blkno)
{
	struct fake_device *dev = &store.devices[ngnfs_blkno_device(blkno)];

	if (dev->free_head > 0 && dev->free_head == dev->free_count) {
		dev->free_head = 0;
		dev->free_count = 0;
	}
	if (dev->free_count == dev->free_capacity) {
		if (dev->free_head > dev->free_capacity / 2) {
			memmove(dev->free_list, dev->free_list + dev->free_head,
				(dev->free_count - dev->free_head) * sizeof(uint64_t));
			dev->free_count -= dev->free_head;
			dev->free_head = 0;
		} else {
			dev->free_capacity = dev->free_capacity ? dev->free_capacity * 2 : 64;
			dev->free_list =
			    realloc(dev->free_list, dev->free_capacity * sizeof(uint64_t));
			if (!dev->free_list)
				abort();
		}
	}
	dev->free_list[dev->free_count++] = ngnfs_blkno_index(blkno);
	dev->allocated--;
}

int ngnfs_txn_free(struct ngnfs_txn *txn, uint64_t blkno)
{
	struct txn_entry *entry = txn_find(txn, blkno);

	if (!entry || !entry->copy || entry->freed) {
		fprintf(stderr, "fake txn: free of block %llu not held for write\n",
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

/* The fake store is one session that never ends: epoch 1. */
uint32_t ngnfs_txn_session_epoch(struct ngnfs_txn *txn, uint64_t blkno)
{
	struct txn_entry *entry = txn_find(txn, blkno);

	return entry && entry->allocated_here ? 1 : 0;
}

void ngnfs_txn_set_stable(struct ngnfs_txn *txn)
{
	(void)txn;
}

void ngnfs_txn_set_unstable(struct ngnfs_txn *txn)
{
	(void)txn;
}

struct ngnfs_cache *ngnfs_txn_cache(struct ngnfs_txn *txn)
{
	(void)txn;
	return &the_cache;
}

uint16_t ngnfs_txn_device_count(struct ngnfs_txn *txn)
{
	(void)txn;
	return store.device_count;
}

static void txn_end(struct ngnfs_txn *txn, bool commit)
{
	size_t i;

	for (i = 0; i < txn->count; i++) {
		struct txn_entry *entry = &txn->entries[i];
		struct fake_block *block;

		if (commit && entry->copy) {
			block = find_block(entry->blkno, true);
			if (!block->data) {
				block->data = entry->copy;
				entry->copy = NULL;
			} else {
				memcpy(block->data, entry->copy, NGNFS_BLOCK_SIZE);
			}
			block->version++;
			store.stats.blocks_written++;
			if (entry->allocated_here)
				block->allocated = true;
			if (entry->freed) {
				if (!entry->allocated_here && !block->allocated)
					fprintf(stderr, "fake txn: block %llu freed twice\n",
						(unsigned long long)entry->blkno);
				block->allocated = false;
				free_index(entry->blkno);
			}
		} else if (!commit && entry->allocated_here) {
			free_index(entry->blkno);
		}
		free(entry->copy);
	}
	txn->count = 0;
}

int ngnfs_txn_run(struct ngnfs_cache *cache, ngnfs_txn_fn fn, void *arg)
{
	struct ngnfs_txn txn = { 0 };
	unsigned int runs = 0;
	int ret;

	(void)cache;
	pthread_mutex_lock(&store.lock);
	store.stats.transactions++;
	for (;;) {
		txn.inject = runs < INJECTED_RUNS;
		txn.retry = false;
		ret = fn(&txn, arg);
		if (ret == 0) {
			txn_end(&txn, true);
			break;
		}
		txn_end(&txn, false);
		if (ret != -EAGAIN || !txn.retry)
			break;
		store.stats.retries++;
		runs++;
	}
	pthread_mutex_unlock(&store.lock);
	free(txn.entries);
	return ret;
}

/* ---- the cache and client calls the filesystem makes ---- */

int ngnfs_cache_create(struct ngnfs_client *client, const struct ngnfs_cache_config *config,
		       struct ngnfs_cache **cache_out)
{
	(void)client;
	(void)config;
	*cache_out = &the_cache;
	return 0;
}

int ngnfs_cache_create_with_client(const struct ngnfs_client_config *client_config,
				   const struct ngnfs_cache_config *config,
				   struct ngnfs_cache **cache_out)
{
	static const uint8_t zero_id[NGNFS_FS_ID_SIZE];
	uint16_t i;

	(void)config;
	pthread_mutex_lock(&store.lock);
	if (client_config->device_count != store.device_count) {
		pthread_mutex_unlock(&store.lock);
		return -EINVAL;
	}
	for (i = 0; i < store.device_count; i++) {
		if (!store.devices[i].formatted) {
			pthread_mutex_unlock(&store.lock);
			return -ENODEV;
		}
	}
	if (memcmp(client_config->fs_id, zero_id, sizeof(zero_id)) != 0 &&
	    memcmp(client_config->fs_id, store.fs_id, sizeof(store.fs_id)) != 0) {
		pthread_mutex_unlock(&store.lock);
		return -ESTALE;
	}
	pthread_mutex_unlock(&store.lock);
	the_client.device_count = client_config->device_count;
	*cache_out = &the_cache;
	return 0;
}

void ngnfs_cache_destroy(struct ngnfs_cache *cache)
{
	cache->lost = NULL;
	cache->lost_arg = NULL;
}

void ngnfs_cache_set_invalidate(struct ngnfs_cache *cache, ngnfs_cache_invalidate_fn fn, void *arg)
{
	(void)cache;
	(void)fn;
	(void)arg;
}

void ngnfs_cache_invalidations_delivered(struct ngnfs_cache *cache, uint64_t ticket)
{
	(void)cache;
	(void)ticket;
}

void ngnfs_cache_set_lost(struct ngnfs_cache *cache, ngnfs_cache_lost_fn fn, void *arg)
{
	cache->lost = fn;
	cache->lost_arg = arg;
}

int ngnfs_cache_sync(struct ngnfs_cache *cache)
{
	(void)cache;
	pthread_mutex_lock(&store.lock);
	store.stats.whole_syncs++;
	pthread_mutex_unlock(&store.lock);
	return 0;
}

/* Every commit of the double is durable at once: only count and remember. */
int ngnfs_cache_sync_block(struct ngnfs_cache *cache, uint64_t blkno)
{
	(void)cache;
	pthread_mutex_lock(&store.lock);
	store.stats.block_syncs++;
	store.stats.last_synced_blkno = blkno;
	pthread_mutex_unlock(&store.lock);
	return 0;
}

void fake_txn_lose_block(uint64_t blkno, int error)
{
	uint8_t data[NGNFS_BLOCK_SIZE];
	struct fake_block *block;

	pthread_mutex_lock(&store.lock);
	block = find_block(blkno, false);
	if (block && block->data)
		memcpy(data, block->data, sizeof(data));
	else
		block = NULL;
	pthread_mutex_unlock(&store.lock);
	if (block && the_cache.lost)
		the_cache.lost(the_cache.lost_arg, blkno, data, error);
}

int ngnfs_cache_take_error(struct ngnfs_cache *cache)
{
	(void)cache;
	return 0;
}

void ngnfs_cache_counters(struct ngnfs_cache *cache, struct ngnfs_cache_counters *counters)
{
	(void)cache;
	memset(counters, 0, sizeof(*counters));
	pthread_mutex_lock(&store.lock);
	counters->retries = store.stats.retries;
	counters->blocks_written = store.stats.blocks_written;
	pthread_mutex_unlock(&store.lock);
}

struct ngnfs_client *ngnfs_cache_client(struct ngnfs_cache *cache)
{
	(void)cache;
	return &the_client;
}

enum ngnfs_durability ngnfs_cache_durability(const struct ngnfs_cache *cache)
{
	(void)cache;
	return NGNFS_DURABILITY_STABLE;
}

int ngnfs_client_create(const struct ngnfs_client_config *config,
			const struct ngnfs_client_ops *ops, void *owner,
			struct ngnfs_client **client_out)
{
	(void)ops;
	(void)owner;
	if (config->device_count == 0 || config->device_count > FAKE_DEVICE_MAX)
		return -EINVAL;
	pthread_mutex_lock(&store.lock);
	if (store.device_count == 0)
		store.device_count = config->device_count;
	pthread_mutex_unlock(&store.lock);
	if (config->device_count != store.device_count)
		return -EINVAL;
	the_client.device_count = config->device_count;
	the_client.hello_flags = config->hello_flags;
	*client_out = &the_client;
	return 0;
}

void ngnfs_client_destroy(struct ngnfs_client *client)
{
	(void)client;
}

uint16_t ngnfs_client_device_count(const struct ngnfs_client *client)
{
	return client->device_count;
}

int ngnfs_client_device_info(struct ngnfs_client *client, uint16_t device,
			     struct ngnfs_msg *hello_reply)
{
	(void)client;
	memset(hello_reply, 0, sizeof(*hello_reply));
	hello_reply->type = NGNFS_MSG_HELLO_REPLY;
	pthread_mutex_lock(&store.lock);
	if (device >= store.device_count) {
		pthread_mutex_unlock(&store.lock);
		return -ENOTCONN;
	}
	if (store.devices[device].formatted) {
		hello_reply->hello_reply.flags = NGNFS_HELLO_REPLY_FORMATTED;
		memcpy(hello_reply->hello_reply.fs_id, store.fs_id, NGNFS_FS_ID_SIZE);
		hello_reply->hello_reply.device_index = device;
		hello_reply->hello_reply.device_count = store.device_count;
	}
	pthread_mutex_unlock(&store.lock);
	return 0;
}

int ngnfs_client_format_sync(struct ngnfs_client *client, uint16_t device,
			     const uint8_t fs_id[NGNFS_FS_ID_SIZE], uint32_t device_count)
{
	(void)client;
	pthread_mutex_lock(&store.lock);
	if (device >= store.device_count || device_count != store.device_count ||
	    store.devices[device].formatted) {
		pthread_mutex_unlock(&store.lock);
		return -EINVAL;
	}
	store.devices[device].formatted = true;
	store.devices[device].next_index = NGNFS_FIRST_ALLOC_INDEX;
	memcpy(store.fs_id, fs_id, NGNFS_FS_ID_SIZE);
	pthread_mutex_unlock(&store.lock);
	return 0;
}

/* The fake store has no sessions: no device is ever away. */
uint64_t ngnfs_client_unreachable_ms(struct ngnfs_client *client, uint16_t device)
{
	(void)client;
	(void)device;
	return 0;
}

/* Committed contents as the store has them (add-devices reads the superblock so). */
int ngnfs_client_read_incoherent_sync(struct ngnfs_client *client, uint64_t blkno,
				      uint64_t *version, uint8_t *data)
{
	struct fake_block *block;

	(void)client;
	pthread_mutex_lock(&store.lock);
	if (ngnfs_blkno_device(blkno) >= store.device_count) {
		pthread_mutex_unlock(&store.lock);
		return -EINVAL;
	}
	block = find_block(blkno, false);
	*version = block ? block->version : 0;
	if (block && block->data)
		memcpy(data, block->data, NGNFS_BLOCK_SIZE);
	else
		memset(data, 0, NGNFS_BLOCK_SIZE);
	pthread_mutex_unlock(&store.lock);
	return 0;
}

int ngnfs_client_statfs_sync(struct ngnfs_client *client, uint16_t device,
			     struct ngnfs_statfs_figures *statfs)
{
	(void)client;
	pthread_mutex_lock(&store.lock);
	if (device >= store.device_count) {
		pthread_mutex_unlock(&store.lock);
		return -EINVAL;
	}
	memset(statfs, 0, sizeof(*statfs));
	statfs->total_blocks = FAKE_DEVICE_BLOCKS;
	statfs->free_blocks =
	    FAKE_DEVICE_BLOCKS - NGNFS_FIRST_ALLOC_INDEX - store.devices[device].allocated;
	pthread_mutex_unlock(&store.lock);
	return 0;
}
