/* SPDX-License-Identifier: GPL-2.0-or-later */
#ifndef NGNFS_CACHE_H
#define NGNFS_CACHE_H

/*
 * The block cache: every block this client has, with the access the
 * server granted it, its version, its data, and whether it is dirty and in
 * which dirty set.
 *
 * The cache is the only user of the network client's block requests.  It
 * answers revocations on the client's I/O thread (write back the whole
 * dirty set of the revoked block, then release), flushes dirty sets within
 * a bounded time in writeback mode and at once in stable mode, and keeps
 * its memory under the configured size by dropping clean blocks in LRU
 * order and writing back dirty ones first.  Transactions (txn.h) are the
 * only way operation code touches cached blocks.
 */

#include <stddef.h>
#include <stdint.h>

#include "client.h"

enum ngnfs_durability {
	NGNFS_DURABILITY_STABLE = 0,	/* an operation returns once its set is durable */
	NGNFS_DURABILITY_WRITEBACK = 1, /* returns from memory, flushed within the interval */
};

struct ngnfs_cache_config {
	size_t cache_bytes; /* default 256 MiB */
	enum ngnfs_durability durability;
	uint32_t writeback_interval_ms; /* default 1000 */
	/*
	 * How long a dirty block waits for its grant after a session reset
	 * (a device restarting) before its set's changes are given up;
	 * default 30000.
	 */
	uint32_t reclaim_timeout_ms;
	uint32_t alloc_batch; /* blocks reserved per ALLOC; default 64 */
};

struct ngnfs_cache;

/*
 * Why the invalidate callback is called:
 *  - CHANGED: another client's access made this client drop or refresh its
 *    copy of a block (a revocation, a refetch that found it moved, a lost
 *    write);
 *  - UNGUARDED: this client gave up its grant on the block without being
 *    asked (eviction) or lost it (session reset), so nobody will tell it of
 *    the next change.  Every change to an object writes its inode block, so
 *    the filesystem layer need only act on inode blocks here.
 */
enum ngnfs_cache_invalidation {
	NGNFS_CACHE_CHANGED,
	NGNFS_CACHE_UNGUARDED,
};

/*
 * Called (on the I/O thread, or on an operation thread for an eviction)
 * when a copy of a block stops being kept coherent (see above); the
 * filesystem layer turns that into attribute and directory cache
 * invalidations.  data is the copy being dropped (NULL if none); it is
 * only valid during the call.
 * It runs with the cache's lock held: it must not call into the cache or
 * start transactions, only note what to invalidate.
 *
 * It returns 0, or a ticket when it queued an invalidation that is
 * delivered later: the RELEASE that lets the other client go on is then
 * held back until ngnfs_cache_invalidations_delivered() is called with
 * that ticket or a later one (tickets only grow), or for
 * NGNFS_CACHE_INVALIDATION_WAIT_MS at most.
 */
typedef uint64_t (*ngnfs_cache_invalidate_fn)(void *arg, uint64_t blkno, const void *data,
					      enum ngnfs_cache_invalidation why);
#define NGNFS_CACHE_INVALIDATION_WAIT_MS 500

/*
 * Called (cache lock held, any thread, must not block or call the cache)
 * for every block of a dirty set whose write failed, with the dirty copy
 * being dropped and the error: the filesystem layer remembers which
 * objects lost changes so that their next per-object sync reports it.
 */
typedef void (*ngnfs_cache_lost_fn)(void *arg, uint64_t blkno, const void *data, int error);

struct ngnfs_cache_counters {
	uint64_t hits;
	uint64_t misses;
	uint64_t revalidated; /* GETs answered "unchanged" */
	uint64_t revokes;
	uint64_t crossed_grants; /* grants given up again: our RELEASE crossed them */
	uint64_t retries;	 /* transaction re-runs */
	uint64_t sets_written;
	uint64_t blocks_written;
	uint64_t writes_sent; /* WRITE/COMMIT round trips */
	uint64_t block_syncs; /* ngnfs_cache_sync_block calls that found a dirty set */
	/* blocks of writes in flight at a session break found applied by blockd */
	uint64_t in_doubt_applied;
	uint64_t releases_deferred;	    /* held back for an invalidation's delivery */
	uint64_t deferred_release_timeouts; /* sent at the deadline, undelivered */
	uint64_t evictions;
	/* transactions that first waited for the I/O thread after a stall */
	uint64_t stall_catch_ups;
	uint64_t dirty_blocks;	/* now */
	uint64_t cached_blocks; /* now */
};

/*
 * The cache must answer the client's revocations and session resets, so
 * the usual way to start is ngnfs_cache_create_with_client(), which
 * creates the network client with the cache's ops and owns it (destroyed
 * with the cache).  ngnfs_cache_create() on a client made elsewhere works
 * only where no other client shares the blocks (tools on an idle
 * filesystem): revocations never reach that cache.
 */
int ngnfs_cache_create(struct ngnfs_client *client, const struct ngnfs_cache_config *config,
		       struct ngnfs_cache **cache_out);
int ngnfs_cache_create_with_client(const struct ngnfs_client_config *client_config,
				   const struct ngnfs_cache_config *config,
				   struct ngnfs_cache **cache_out);
/* Writes back everything dirty, then frees the cache. */
void ngnfs_cache_destroy(struct ngnfs_cache *cache);
void ngnfs_cache_set_invalidate(struct ngnfs_cache *cache, ngnfs_cache_invalidate_fn fn, void *arg);
/* Every invalidation up to ticket is delivered: the RELEASEs waiting for them go (any thread). */
void ngnfs_cache_invalidations_delivered(struct ngnfs_cache *cache, uint64_t ticket);

void ngnfs_cache_set_lost(struct ngnfs_cache *cache, ngnfs_cache_lost_fn fn, void *arg);

/* Write back every dirty set and wait until they are durable. */
int ngnfs_cache_sync(struct ngnfs_cache *cache);
/*
 * Write back the dirty set blkno belongs to, if any (being written or
 * not), and wait until it is durable; other sets are left alone unless
 * the flusher merges due ones into the same write.  Returns the write's
 * error.  Because a transaction merges every set whose blocks it writes
 * or reads (txn.c), that set holds everything its contents depend on
 * that is not durable yet.
 */
int ngnfs_cache_sync_block(struct ngnfs_cache *cache, uint64_t blkno);
/*
 * Returns the first write-back failure since the last call (then
 * cleared): writeback-mode operations that were acknowledged from memory
 * learn of a lost write here, and fsync reports it.
 */
int ngnfs_cache_take_error(struct ngnfs_cache *cache);
void ngnfs_cache_counters(struct ngnfs_cache *cache, struct ngnfs_cache_counters *counters);
struct ngnfs_client *ngnfs_cache_client(struct ngnfs_cache *cache);
enum ngnfs_durability ngnfs_cache_durability(const struct ngnfs_cache *cache);

#endif
