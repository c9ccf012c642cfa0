// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The block cache: cached blocks, their grants, the answers to the
 * server's revocations, the flusher and memory bounds.
 *
 * The cache is driven from three sides, and is built so that none of
 * them ever waits for another while holding anything:
 *
 *  - operation threads, through transactions (txn.c), which try-lock
 *    blocks and otherwise wait here with nothing locked;
 *  - the network client's I/O thread, which delivers grants, write
 *    completions, revocations and session resets.  It must never wait
 *    for an operation thread, so a revocation of a block a transaction
 *    has locked is only marked (revoke_pending) and finished by the
 *    transaction's unlock, which comes soon because transactions hold
 *    locks only while their function runs on the CPU;
 *  - the flusher thread, which writes dirty sets: at once when a
 *    transaction waits for them (every one in stable mode but unstable
 *    writes; one write for every set committed meanwhile: group commit),
 *    within writeback_interval_ms otherwise, on sync, and when memory is
 *    short.  The flusher writes in rounds: everything eligible is merged
 *    into one set per device (single-device sets stay single-device
 *    WRITEs; merging across devices would buy a two-phase commit) plus
 *    one for the sets that already span devices, and a device's next
 *    write only starts when its last one completed; that is what gathers
 *    concurrent commits into few writes, while devices (and the
 *    multi-device group) do not wait for each other's round trips.  It
 *    also re-asks for the grants of dirty blocks after a session reset,
 *    until the session is back.
 *
 * A revoked dirty block writes back its whole dirty set with the release
 * folded into the write (down to READ, so the set's other blocks keep a
 * readable copy and readers may go on during the write); a revocation to
 * NONE then releases the revoked block alone once nobody reads it.  The
 * invalidate callback hears of it first; when the gateway delivers that
 * to its own caches later it returns a ticket, and the RELEASE is held
 * back (cache->deferred) until ngnfs_cache_invalidations_delivered()
 * reports the ticket, for NGNFS_CACHE_INVALIDATION_WAIT_MS at most: the
 * other client's change must not return before this gateway stopped
 * trusting its copy.  A held-back RELEASE goes before any GET of its
 * block and before a GRANT of it is looked at, so the ordering below
 * holds.
 *
 * After a release to NONE the copy is kept, unguarded and unreadable by
 * transactions, with its version: the next GET sends that version and
 * the server answers "unchanged" without data if nobody wrote the block
 * meanwhile.  Such copies are clean and unlocked, so the LRU reclaims them
 * like any other.
 *
 * Memory: the data of cached blocks is bounded by cache_bytes.  Clean,
 * unlocked blocks are reclaimed oldest first (and released to NONE, the
 * invalidate callback first: nobody would revoke them from us any more);
 * when only dirty or locked blocks remain, the flusher is asked to write
 * dirty sets so that they become reclaimable, and a transaction about to
 * fetch a block waits (bounded) for that before it adds to the cache.
 *
 * Ordering with the server: a RELEASE is queued with the client while the
 * cache lock is held, so it always leaves before any later GET of the
 * same block; and a REVOKE for a block this cache already brought down is
 * not answered again (our RELEASE crossed it), because a second RELEASE
 * could arrive after a newer GET and take back what it was granted.  The
 * one RELEASE that must leave while a GET is in flight (a READ grant
 * revoked to NONE during its upgrade to WRITE) may reach the server after
 * it granted the upgrade and strip it; the grant that answers such a GET
 * is given up again at once (release_crossed), never written under.
 *
 * Failures: a write refused with -EBUSY (a block still pinned to our
 * previous multi-device set while its participants apply it) is sent
 * again shortly, merged with the newer sets that changed its blocks
 * meanwhile (copy on write, dirty.c); any other failure drops the whole
 * set and those newer sets (their blocks are refetched; a block a
 * transaction has locked keeps its buffer until the unlock and the
 * transaction runs again) and records the error for
 * ngnfs_cache_take_error, and stable-mode waiters of all of them get it.
 * The exception is a write that failed because a session broke
 * (-ENOTCONN): a single-device WRITE may not have been applied, and a
 * multi-device set whose STAGE failed was never committed, so either is
 * handled like the idle dirty sets of that reset (regrant_in_doubt).
 * After a session reset, dirty blocks are re-granted at their base
 * version for up to reclaim_timeout_ms (30 s unless configured); a moved
 * version means someone else wrote the block and the set is dropped,
 * unless the server's bytes are those of our own single-device write that
 * was in flight (kept in doubt_data): blockd applied it before the
 * session broke (in_doubt_answer).
 * A block whose session broke while a write carried it (grant_lost) has
 * no grant afterwards, whatever became of the write.
 * Reservations belong to a session: the pool is emptied when a device's
 * session resets, and a refill whose ALLOC spanned a reset is dropped.
 * A device whose blockd answers ALLOC with ENOSPC is passed over for
 * CACHE_FULL_RECHECK_MS: new blocks meant for it come from the next device
 * with room (cache_alloc_device).  So is, for CACHE_GRACE_RECHECK_MS at a
 * time, one that answers EAGAIN, and for CACHE_AWAY_RECHECK_MS one that
 * cannot be reached (no session: a new directory that hashes there goes
 * elsewhere instead of waiting for it).  In its reclaim grace period after a
 * restart blockd reserves nothing, because a block some client reserved
 * before the restart and still has to write (a create in flight) looks
 * free until that client's regrant GET takes it again.  Placement is only
 * a preference (a block number names its device, readers follow
 * pointers), so a full device costs its directories cross-device sets,
 * not ENOSPC while other devices have room.
 * An operation that needs a device without a session fails with -EAGAIN
 * (try again: NFS4ERR_DELAY, which clients retry by themselves) while the
 * session has been lost for less than reclaim_timeout_ms, the time dirty
 * blocks wait for the device too, and with -ENOTCONN after that
 * (cache_unreachable_error): a device restart is then a pause for
 * applications, and a device that stays away is an error, not a hang.
 *
 * XXX:
 *  - A multi-device set whose COMMIT stays unanswered (client.c retries
 *    it for reclaim_timeout_ms) is dropped, although it may have been
 *    committed.
 *  - A revocation of a block that sits unused in the allocation pool
 *    (reserved, no cache entry) is answered with a RELEASE, which loses
 *    the reservation's grant; only a client GETting blocks it was never
 *    told about can cause that.
 *  - Private copies of transactions are not counted against cache_bytes.
 *  - The hash table has a fixed size chosen from cache_bytes.
 *  - The free list of cached blocks keeps their peak number until the
 *    cache goes (one 4 KiB slab per few dozen blocks).
 *  - Writers of a block whose set is being written do not wait (copy on
 *    write, dirty.c), except when that write releases the grant or the
 *    cache is full; the newer set still leaves only after that write, so
 *    a block written over and over commits once per write round trip.
 */

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "blockbuf.h"
#include "cache-internal.h"

#define CACHE_DEFAULT_BYTES	  (256UL << 20)
#define CACHE_DEFAULT_INTERVAL_MS 1000
#define CACHE_DEFAULT_ALLOC_BATCH 64
#define CACHE_MIN_BLOCKS	  16
/* Unrelated sets merged by the flusher stay within one WRITE frame. */
#define CACHE_GROUP_MAX_BLOCKS NGNFS_MSG_MAX_BLOCKS
#define CACHE_FLUSHER_IDLE_MS  1000
/* Flusher writes in flight per device (flusher_gather). */
#define CACHE_DEVICE_SLOT_WRITES 2
/* How long a dirty block may wait for its grant after a session reset. */
#define CACHE_DEFAULT_RECLAIM_TIMEOUT_MS 30000
/* How long a device that answered ALLOC with ENOSPC is passed over. */
#define CACHE_FULL_RECHECK_MS 2000
/* ... and one in its reclaim grace period (EAGAIN), which ends within seconds. */
#define CACHE_GRACE_RECHECK_MS 250
/* ... and one without a session (ENOTCONN), tried again as the client reconnects. */
#define CACHE_AWAY_RECHECK_MS  1000
#define CACHE_REGRANT_RETRY_MS 100
/* A set refused with -EBUSY (pinned by our previous set) is sent again after this. */
#define CACHE_BUSY_RETRY_MS 5

static void cache_get_done(void *arg, int status, uint64_t blkno, uint64_t version, uint8_t access,
			   const uint8_t *data);
static void revoke_progress(struct ngnfs_cache *cache, struct cache_block *block,
			    struct cache_action **actions);
static uint16_t set_device(const struct ngnfs_cache *cache, const struct dirty_set *set);

uint64_t cache_now_ms(void)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (uint64_t)now.tv_sec * 1000 + (uint64_t)now.tv_nsec / 1000000;
}

static void deadline_in_ms(struct timespec *deadline, uint64_t ms)
{
	clock_gettime(CLOCK_MONOTONIC, deadline);
	deadline->tv_sec += ms / 1000;
	deadline->tv_nsec += (long)(ms % 1000) * 1000000;
	if (deadline->tv_nsec >= 1000000000) {
		deadline->tv_sec++;
		deadline->tv_nsec -= 1000000000;
	}
}

const char *cache_access_name(uint8_t access)
{
	switch (access) {
	case NGNFS_ACCESS_NONE:
		return "none";
	case NGNFS_ACCESS_READ:
		return "read";
	case NGNFS_ACCESS_WRITE:
		return "write";
	}
	return "unknown";
}

static size_t bucket_of(const struct ngnfs_cache *cache, uint64_t blkno)
{
	return (size_t)((blkno * 0x9e3779b97f4a7c15ULL) >> 24) & cache->bucket_mask;
}

struct cache_block *cache_lookup(struct ngnfs_cache *cache, uint64_t blkno)
{
	struct cache_block *block = cache->buckets[bucket_of(cache, blkno)];

	while (block && block->blkno != blkno)
		block = block->hash_next;
	return block;
}

/*
 * Cached blocks are carved from block buffers and kept on a free list: a
 * calloc per new block was 4-5% of a writeback create (the malloc arena of
 * an operation thread grows by what is asked for, see blockbuf.c).  The
 * slabs go with the cache; under ASan every block is calloc'ed instead.
 */
struct block_slab {
	struct block_slab *next;
	struct cache_block blocks[];
};

#define CACHE_SLAB_BLOCKS                                                                          \
	((NGNFS_BLOCK_SIZE - sizeof(struct block_slab)) / sizeof(struct cache_block))

static struct cache_block *cache_block_alloc(struct ngnfs_cache *cache)
{
#ifdef NGNFS_POOL_USE_MALLOC
	(void)cache;
	return calloc(1, sizeof(struct cache_block));
#else
	struct cache_block *block = cache->free_blocks;

	if (!block) {
		struct block_slab *slab = ngnfs_block_buf_alloc();
		size_t i;

		if (!slab)
			return NULL;
		slab->next = cache->block_slabs;
		cache->block_slabs = slab;
		for (i = 1; i < CACHE_SLAB_BLOCKS; i++) {
			slab->blocks[i].hash_next = cache->free_blocks;
			cache->free_blocks = &slab->blocks[i];
		}
		block = &slab->blocks[0];
	} else {
		cache->free_blocks = block->hash_next;
	}
	memset(block, 0, sizeof(*block));
	return block;
#endif
}

static void cache_block_free(struct ngnfs_cache *cache, struct cache_block *block)
{
#ifdef NGNFS_POOL_USE_MALLOC
	(void)cache;
	free(block);
#else
	block->hash_next = cache->free_blocks;
	cache->free_blocks = block;
#endif
}

static void cache_free_slabs(struct ngnfs_cache *cache)
{
	while (cache->block_slabs) {
		struct block_slab *slab = cache->block_slabs;

		cache->block_slabs = slab->next;
		ngnfs_block_buf_free(slab);
	}
	cache->free_blocks = NULL;
}

struct cache_block *cache_lookup_create(struct ngnfs_cache *cache, uint64_t blkno)
{
	struct cache_block *block = cache_lookup(cache, blkno);
	size_t bucket;

	if (block)
		return block;
	block = cache_block_alloc(cache);
	if (!block)
		return NULL;
	block->blkno = blkno;
	cache_list_init(&block->lru);
	cache_list_init(&block->set_entry);
	bucket = bucket_of(cache, blkno);
	block->hash_next = cache->buckets[bucket];
	cache->buckets[bucket] = block;
	return block;
}

/* What a write in doubt sent is no longer needed: its outcome is known or moot. */
static void forget_doubt(struct ngnfs_cache *cache, struct cache_block *block)
{
	if (!block->doubt_data)
		return;
	ngnfs_block_buf_free(block->doubt_data);
	block->doubt_data = NULL;
	cache->data_blocks--;
}

void cache_remove_block(struct ngnfs_cache *cache, struct cache_block *block)
{
	struct cache_block **link = &cache->buckets[bucket_of(cache, block->blkno)];

	while (*link && *link != block)
		link = &(*link)->hash_next;
	if (*link)
		*link = block->hash_next;
	dirty_set_remove_block(cache, block);
	forget_doubt(cache, block);
	cache_block_drop_data(cache, block);
	cache_block_free(cache, block);
}

int cache_block_set_data(struct ngnfs_cache *cache, struct cache_block *block, const void *data)
{
	if (!block->data) {
		block->data = ngnfs_block_buf_alloc();
		if (!block->data)
			return -ENOMEM;
		cache->data_blocks++;
		cache_list_add_tail(&block->lru, &cache->lru);
	}
	if (data)
		memcpy(block->data, data, NGNFS_BLOCK_SIZE);
	else
		memset(block->data, 0, NGNFS_BLOCK_SIZE);
	return 0;
}

void cache_block_drop_data(struct ngnfs_cache *cache, struct cache_block *block)
{
	if (!block->data)
		return;
	ngnfs_block_buf_free(block->data);
	block->data = NULL;
	cache->data_blocks--;
	cache_list_del_init(&block->lru);
}

void cache_touch(struct ngnfs_cache *cache, struct cache_block *block)
{
	if (!block->data)
		return;
	cache_list_del_init(&block->lru);
	cache_list_add_tail(&block->lru, &cache->lru);
}

pthread_cond_t *cache_waitq(struct ngnfs_cache *cache, uint64_t blkno)
{
	return &cache->waitqs[(blkno * 0x9e3779b97f4a7c15ULL) >> 58];
}

void cache_wake_block(struct ngnfs_cache *cache, uint64_t blkno)
{
	pthread_cond_broadcast(cache_waitq(cache, blkno));
}

void cache_kick_flusher(struct ngnfs_cache *cache)
{
	pthread_cond_signal(&cache->flusher_cond);
}

/* Flusher writes a slot may have in flight (flusher_gather says why). */
static uint32_t slot_depth(const struct ngnfs_cache *cache, uint16_t slot)
{
	return slot == cache->device_count ? 1 : CACHE_DEVICE_SLOT_WRITES;
}

static bool every_slot_busy(const struct ngnfs_cache *cache)
{
	return cache->flusher_inflight >=
	       (uint32_t)cache->device_count * CACHE_DEVICE_SLOT_WRITES + 1;
}

/*
 * Signalling on every commit cost a futex wake and a flusher pass
 * contending for the lock per create (docs/performance.md).  The flusher
 * need not be woken while it runs (it gathers before it sleeps), while
 * every slot has a round in flight (their completions wake it), or when
 * its timer ends before the set is due; a set with a stable waiter, a
 * sync, a wanted flush or memory pressure is due now.  Which slot the
 * set would take is not worked out here (that walks the set): a kick
 * while only other slots are busy costs one pass of the flusher.
 */
void cache_kick_flusher_for(struct ngnfs_cache *cache, const struct dirty_set *set)
{
	uint64_t due = 0;

	if (!cache->flusher_wake_ms || every_slot_busy(cache))
		return;
	if (!(set->waiters || set->flush_wanted || set->birth_seq <= cache->sync_seq ||
	      cache->pressure))
		due = set->first_dirty_ms + cache->writeback_interval_ms;
	if (set->not_before_ms > due)
		due = set->not_before_ms;
	if (due < cache->flusher_wake_ms)
		cache_kick_flusher(cache);
}

void cache_record_error(struct ngnfs_cache *cache, int error)
{
	if (!cache->first_error)
		cache->first_error = error;
}

/*
 * RELEASE goes out at once, under the cache lock, so that it leaves before
 * any GET this client sends for the block afterwards: a GET overtaking
 * the RELEASE would be granted on the old grant and then lose it to the
 * late RELEASE.  The client only queues the frame; nothing here waits.
 */
void cache_send_release(struct ngnfs_cache *cache, uint64_t blkno, uint8_t access)
{
	int ret = ngnfs_client_release(cache->client, blkno, access);

	if (ret < 0)
		ngnfs_cache_log("RELEASE of block %llu (device %u) down to %s failed: %s (%d)\n",
				(unsigned long long)blkno, ngnfs_blkno_device(blkno),
				cache_access_name(access), strerror(-ret), ret);
}

/* The held-back RELEASE at index i leaves the list (order does not matter). */
static void drop_deferred_release(struct ngnfs_cache *cache, uint32_t i)
{
	cache->deferred[i] = cache->deferred[cache->deferred_count - 1];
	__atomic_store_n(&cache->deferred_count, cache->deferred_count - 1, __ATOMIC_RELAXED);
}

/*
 * Send the held-back RELEASEs that may go now: every one (all), the one of
 * *blkno (a GET or GRANT of it comes next, and a RELEASE must not cross
 * it), and those whose invalidation was delivered or whose deadline
 * passed.  Returns the earliest deadline still waiting, 0 if none.
 */
static uint64_t send_deferred_releases(struct ngnfs_cache *cache, const uint64_t *blkno, bool all)
{
	uint64_t now = cache_now_ms(), earliest = 0;
	uint32_t i = 0;

	while (i < cache->deferred_count) {
		struct deferred_release *release = &cache->deferred[i];
		bool delivered = release->ticket <= cache->delivered_ticket;
		bool mine = blkno && release->blkno == *blkno;

		if (!all && !mine && !delivered && now < release->deadline_ms) {
			if (!earliest || release->deadline_ms < earliest)
				earliest = release->deadline_ms;
			i++;
			continue;
		}
		if (!all && !mine && !delivered) {
			cache->counters.deferred_release_timeouts++;
			ngnfs_cache_log(
			    "the invalidation for block %llu on device %u was not delivered "
			    "within %u ms: releasing it all the same (another client "
			    "waits for it)\n",
			    (unsigned long long)release->blkno, ngnfs_blkno_device(release->blkno),
			    NGNFS_CACHE_INVALIDATION_WAIT_MS);
		}
		cache_send_release(cache, release->blkno, release->access);
		drop_deferred_release(cache, i);
	}
	return earliest;
}

/*
 * Hold the RELEASE of blkno back until the invalidation with ticket is
 * delivered.  False: send it now (delivered already, or no memory).
 */
static bool defer_release(struct ngnfs_cache *cache, uint64_t blkno, uint8_t access,
			  uint64_t ticket)
{
	if (ticket <= cache->delivered_ticket)
		return false;
	if (cache->deferred_count == cache->deferred_capacity) {
		uint32_t capacity = cache->deferred_capacity ? cache->deferred_capacity * 2 : 16;
		struct deferred_release *deferred =
		    realloc(cache->deferred, capacity * sizeof(*deferred));

		if (!deferred)
			return false;
		cache->deferred = deferred;
		cache->deferred_capacity = capacity;
	}
	cache->deferred[cache->deferred_count] = (struct deferred_release){
		.blkno = blkno,
		.ticket = ticket,
		.deadline_ms = cache_now_ms() + NGNFS_CACHE_INVALIDATION_WAIT_MS,
		.access = access,
	};
	__atomic_store_n(&cache->deferred_count, cache->deferred_count + 1, __ATOMIC_RELAXED);
	cache->counters.releases_deferred++;
	/* Its timed wait must end by the deadline. */
	cache_kick_flusher(cache);
	return true;
}

void ngnfs_cache_invalidations_delivered(struct ngnfs_cache *cache, uint64_t ticket)
{
	pthread_mutex_lock(&cache->lock);
	if (ticket > cache->delivered_ticket)
		cache->delivered_ticket = ticket;
	if (cache->deferred_count)
		send_deferred_releases(cache, NULL, false);
	pthread_mutex_unlock(&cache->lock);
}

bool cache_add_action(struct cache_action **actions, enum cache_action_type type, uint64_t blkno,
		      uint8_t access, uint64_t version)
{
	struct cache_action *action = calloc(1, sizeof(*action));

	if (!action) {
		/* The caller tries again on its next pass. */
		ngnfs_cache_log("no memory to queue GET of block %llu (access %s)\n",
				(unsigned long long)blkno, cache_access_name(access));
		return false;
	}
	action->type = type;
	action->blkno = blkno;
	action->access = access;
	action->version = version;
	action->next = *actions;
	*actions = action;
	return true;
}

void cache_add_write_action(struct cache_action **actions, struct dirty_set *set)
{
	struct cache_action *action = &set->write_action;

	memset(action, 0, sizeof(*action));
	action->type = CACHE_ACTION_WRITE;
	action->set = set;
	action->next = *actions;
	*actions = action;
}

static void cache_write_done(void *arg, int status, const uint64_t *versions);

static void send_write(struct ngnfs_cache *cache, struct dirty_set *set)
{
	struct ngnfs_write_set write = {
		.set_id = 0,
		.blocks = set->requests,
		.block_count = set->written_count,
		.frees = set->written_frees,
		.free_count = set->written_free_count,
		.release = set->release,
		.release_access = set->release_access,
	};
	int ret;

	ret = ngnfs_client_write_set(cache->client, &write, cache_write_done, set);
	if (ret < 0)
		cache_write_done(set, ret, NULL);
}

void cache_run_actions(struct ngnfs_cache *cache, struct cache_action *actions)
{
	while (actions) {
		struct cache_action *next = actions->next;
		struct ngnfs_block_request request;
		int ret;

		switch (actions->type) {
		case CACHE_ACTION_GET:
			if (__atomic_load_n(&cache->deferred_count, __ATOMIC_RELAXED)) {
				pthread_mutex_lock(&cache->lock);
				send_deferred_releases(cache, &actions->blkno, false);
				pthread_mutex_unlock(&cache->lock);
			}
			request.blkno = actions->blkno;
			request.version = actions->version;
			request.access = actions->access;
			request.data = NULL;
			ret = ngnfs_client_get(cache->client, &request, 1, cache_get_done, cache);
			if (ret < 0)
				cache_get_done(cache, ret, actions->blkno, 0, NGNFS_ACCESS_NONE,
					       NULL);
			free(actions);
			break;
		case CACHE_ACTION_WRITE:
			/* Embedded in the set, which the completion may free. */
			send_write(cache, actions->set);
			break;
		}
		actions = next;
	}
}

void cache_start_get(struct ngnfs_cache *cache, struct cache_block *block, uint8_t access)
{
	struct ngnfs_block_request request = {
		.blkno = block->blkno,
		.version = block->data ? block->version : 0,
		.access = access,
	};
	int ret;

	block->get_access = access;
	block->get_error = 0;
	cache->counters.misses++;
	if (cache->deferred_count)
		send_deferred_releases(cache, &block->blkno, false);
	pthread_mutex_unlock(&cache->lock);
	ret = ngnfs_client_get(cache->client, &request, 1, cache_get_done, cache);
	if (ret < 0)
		cache_get_done(cache, ret, request.blkno, 0, NGNFS_ACCESS_NONE, NULL);
	pthread_mutex_lock(&cache->lock);
}

static bool block_evictable(const struct cache_block *block)
{
	return block->data && !block->dirty && !block->readers && !block->writer &&
	       !block->drop_pending && block->get_access == NGNFS_ACCESS_NONE &&
	       !block->revoke_pending && !block->writeback && !block->regrant && !block->freed;
}

void cache_make_room(struct ngnfs_cache *cache, size_t extra, struct cache_action **actions)
{
	struct cache_list *node = cache->lru.next;

	(void)actions; /* evictions only RELEASE, which goes out at once */
	while (cache->data_blocks + extra > cache->max_data_blocks && node != &cache->lru) {
		struct cache_block *block = cache_list_entry(node, struct cache_block, lru);

		node = node->next;
		if (!block_evictable(block))
			continue;
		if (block->access != NGNFS_ACCESS_NONE) {
			/*
			 * Released, the block is nobody's to revoke from us: the
			 * gateway must stop trusting what it built from it (its
			 * MDCACHE may well outlive our copy), or another
			 * client's change of it would never reach it.
			 */
			if (cache->invalidate)
				cache->invalidate(cache->invalidate_arg, block->blkno, block->data,
						  NGNFS_CACHE_UNGUARDED);
			cache_send_release(cache, block->blkno, NGNFS_ACCESS_NONE);
		}
		cache->counters.evictions++;
		cache_remove_block(cache, block);
	}
	if (cache->data_blocks + extra > cache->max_data_blocks &&
	    !cache_list_empty(&cache->dirty_sets)) {
		cache->pressure = true;
		cache_kick_flusher(cache);
	}
}

/* The write carrying the block is over; its frozen copy, if any, goes. */
static void end_writeback(struct ngnfs_cache *cache, struct cache_block *block)
{
	block->writeback = false;
	block->wb_set = NULL;
	if (block->wb_data) {
		ngnfs_block_buf_free(block->wb_data);
		block->wb_data = NULL;
		cache->data_blocks--;
	}
}

static void lose_set(struct ngnfs_cache *cache, struct dirty_set *set, int error,
		     struct cache_action **actions);

/*
 * A lost change's data goes, but not under a transaction's lock: readers
 * use the buffer, and a writer's copy derives from it (txn.c reruns a
 * transaction that holds a block with drop_pending).
 */
static void lose_data(struct ngnfs_cache *cache, struct cache_block *block)
{
	if (block->readers || block->writer)
		block->drop_pending = true;
	else
		cache_block_drop_data(cache, block);
}

/*
 * A block whose change was lost: its buffer goes (the refetch is at
 * version 0), a pending revocation moves on, and waiters look again.
 */
static void forget_lost_block(struct ngnfs_cache *cache, struct cache_block *block,
			      struct cache_action **actions)
{
	if (block->data) {
		if (cache->invalidate)
			cache->invalidate(cache->invalidate_arg, block->blkno, block->data,
					  NGNFS_CACHE_CHANGED);
		lose_data(cache, block);
	}
	block->version = 0;
	if (block->revoke_pending)
		revoke_progress(cache, block, actions);
	cache_wake_block(cache, block->blkno);
}

/*
 * The failed write of set carried blocks that newer sets changed since
 * (copy on write).  Those changes were made on top of the failed ones, so
 * they are dropped too; the blocks stay marked as in flight meanwhile, so
 * that losing the newer sets neither frees nor releases them under us.
 */
static void lose_newer_sets(struct ngnfs_cache *cache, struct dirty_set *set, int error,
			    struct cache_action **actions)
{
	uint32_t i;

	for (i = 0; i < set->written_count; i++) {
		struct cache_block *block = set->written[i];

		if (block->set != set && block->set) {
			ngnfs_cache_log("a newer dirty set of %u blocks (block %llu changed during "
					"the failed write) is lost with it\n",
					block->set->block_count, (unsigned long long)block->blkno);
			lose_set(cache, block->set, error, actions);
		}
	}
	for (i = 0; i < set->written_count; i++) {
		struct cache_block *block = set->written[i];

		if (block->set == set)
			continue;
		end_writeback(cache, block);
		/* A free moved to a lost set: data is what failed to be written. */
		forget_lost_block(cache, block, actions);
	}
}

/* Drop every dirty change of the set: its write failed or its base is gone. */
static void lose_set(struct ngnfs_cache *cache, struct dirty_set *set, int error,
		     struct cache_action **actions)
{
	if (set->writing)
		lose_newer_sets(cache, set, error, actions);
	while (!cache_list_empty(&set->blocks)) {
		struct cache_block *block =
		    cache_list_entry(set->blocks.next, struct cache_block, set_entry);

		dirty_set_remove_block(cache, block);
		if (block->wb_set == set)
			end_writeback(cache, block);
		if (block->regrant)
			cache->regrants--;
		block->regrant = false;
		if (block->grant_lost && !block->writeback) {
			block->grant_lost = false;
			block->access = NGNFS_ACCESS_NONE;
		}
		forget_doubt(cache, block);
		block->doubt_free = false;
		if (block->freed && block->writeback) {
			/*
			 * Freed on top of another set's write in flight, which
			 * still sends block->data: the block stays, clean, with
			 * what that write sends.
			 */
			block->freed = false;
			cache_wake_block(cache, block->blkno);
			continue;
		}
		if (block->freed) {
			if (block->revoke_pending)
				cache_send_release(cache, block->blkno, block->revoke_access);
			cache_wake_block(cache, block->blkno);
			cache_remove_block(cache, block);
			continue;
		}
		if (cache->lost && block->data)
			cache->lost(cache->lost_arg, block->blkno, block->data, error);
		forget_lost_block(cache, block, actions);
	}
	cache->write_failures++;
	cache->last_write_error = error;
	cache_record_error(cache, error);
	dirty_set_finish_waiters(set, error);
	dirty_set_free(cache, set);
	pthread_cond_broadcast(&cache->idle_cond);
}

/*
 * Move a pending revocation forward as far as the block's state allows;
 * whatever still stands in the way (a transaction's lock, a write in
 * flight) calls this again when it goes.
 */
static void revoke_progress(struct ngnfs_cache *cache, struct cache_block *block,
			    struct cache_action **actions)
{
	uint8_t target = block->revoke_access;
	uint64_t ticket = 0;

	if (!block->revoke_pending)
		return;
	if (block->access <= target) {
		block->revoke_pending = false;
		cache_wake_block(cache, block->blkno);
		return;
	}
	if (block->dirty) {
		/* A newer set waits for the write in flight, whose completion comes back here. */
		if (!block->set->writing)
			dirty_set_try_write(cache, block->set, true, NGNFS_ACCESS_READ, false,
					    actions);
		return;
	}
	/* Its newer change was lost, but the write in flight still needs the grant. */
	if (block->writeback)
		return;
	if (block->writer || (target == NGNFS_ACCESS_NONE && block->readers))
		return;
	block->access = target;
	block->revoke_pending = false;
	if (target == NGNFS_ACCESS_NONE && cache->invalidate && block->data)
		ticket = cache->invalidate(cache->invalidate_arg, block->blkno, block->data,
					   NGNFS_CACHE_CHANGED);
	if (block->get_access > target) {
		/*
		 * Our upgrade GET is still queued at the server.  This
		 * RELEASE must go now (the waiter ahead of our GET may be
		 * waiting for exactly this grant), but the server can grant
		 * the GET before it reads the RELEASE, which then strips
		 * the new grant: remember, and settle it at the GRANT.
		 */
		if (!block->release_crossed || target < block->crossed_access)
			block->crossed_access = target;
		block->release_crossed = true;
	}
	if (!ticket || !defer_release(cache, block->blkno, target, ticket))
		cache_send_release(cache, block->blkno, target);
	cache_wake_block(cache, block->blkno);
}

void cache_block_unlocked(struct ngnfs_cache *cache, struct cache_block *block,
			  struct cache_action **actions)
{
	cache_wake_block(cache, block->blkno);
	if (block->drop_pending && !block->readers && !block->writer) {
		block->drop_pending = false;
		cache_block_drop_data(cache, block);
	}
	if (block->revoke_pending)
		revoke_progress(cache, block, actions);
	if (block->set && block->set->flush_wanted && !block->set->writing &&
	    !dirty_set_write_locked(block->set)) {
		if (block->set->flush_release)
			dirty_set_try_write(cache, block->set, true, NGNFS_ACCESS_READ, false,
					    actions);
		else
			cache_kick_flusher(cache);
	}
}

/*
 * The set's blocks whose session broke under the write (grant_lost; for a
 * single-device set in doubt, every block of its device) ask for their
 * write grants again at their base versions (flusher_regrant).
 */
static unsigned int regrant_after_write(struct ngnfs_cache *cache, struct dirty_set *set,
					uint16_t device)
{
	struct cache_list *node;
	unsigned int count = 0;

	for (node = set->blocks.next; node != &set->blocks; node = node->next) {
		struct cache_block *block = cache_list_entry(node, struct cache_block, set_entry);
		bool lost = block->grant_lost || ngnfs_blkno_device(block->blkno) == device;

		block->grant_lost = false;
		if (!lost || block->regrant)
			continue;
		block->access = NGNFS_ACCESS_NONE;
		block->revoke_pending = false;
		block->regrant = true;
		block->regrant_deadline_ms = cache_now_ms() + cache->reclaim_timeout_ms;
		cache->regrants++;
		count++;
	}
	return count;
}

/*
 * A single-device write failed with -ENOTCONN: blockd may have applied it
 * before the session broke.  Keep the bytes it sent (end_writeback would
 * free a frozen copy, and a later change may replace block->data) and
 * which frees it carried, so that the regrant can tell (in_doubt_answer).
 * Without memory for a copy the block is asked about as before, by its
 * version alone.
 */
static void remember_in_doubt(struct ngnfs_cache *cache, struct dirty_set *set)
{
	uint32_t i;

	for (i = 0; i < set->written_count; i++) {
		struct cache_block *block = set->written[i];

		forget_doubt(cache, block);
		if (block->wb_data) {
			block->doubt_data = block->wb_data;
			block->wb_data = NULL;
			continue;
		}
		if (!block->data)
			continue;
		block->doubt_data = ngnfs_block_buf_alloc();
		if (!block->doubt_data)
			continue;
		memcpy(block->doubt_data, block->data, NGNFS_BLOCK_SIZE);
		cache->data_blocks++;
	}
	for (i = 0; i < set->written_free_count; i++) {
		struct cache_block *block = cache_lookup(cache, set->written_frees[i]);

		if (block && block->freed && block->set == set)
			block->doubt_free = true;
	}
}

/*
 * The regrant of a block a write in doubt carried found its version moved
 * (data: the server's bytes).  The same bytes as the write sent mean that
 * blockd applied that write before the session broke; the block is based
 * on the new version from now on and the set (with any newer changes
 * merged into it) is written again on top of it.  (Were they somebody
 * else's identical bytes, writing them again would still be right.)
 * Different bytes: somebody else wrote the block, and the set is lost as
 * for any idle dirty set (cache_get_done).
 */
static bool in_doubt_answer(struct ngnfs_cache *cache, struct cache_block *block, uint64_t version,
			    const uint8_t *data)
{
	struct dirty_set *set = block->set;

	if (!block->doubt_data || !set || memcmp(block->doubt_data, data, NGNFS_BLOCK_SIZE))
		return false;
	if (!set->found_applied) {
		set->found_applied = true;
		ngnfs_cache_log(
		    "block %llu on device %u holds at version %llu the bytes of our write "
		    "that was in flight when the session broke: blockd applied it, so "
		    "its set is written again on top of it\n",
		    (unsigned long long)block->blkno, ngnfs_blkno_device(block->blkno),
		    (unsigned long long)version);
	}
	cache->counters.in_doubt_applied++;
	return true;
}

/*
 * A block whose free a write in doubt carried is answered with data at
 * its unchanged version: blockd sends data at the cached version only for
 * a free block (its zeros, protocol.md), so the write was applied and
 * freed it.  Sending the free again would be refused ("not allocated")
 * and lose the set: it leaves the set's frees, and the block goes once
 * the set is written, as a freed block does.
 */
static void in_doubt_free_done(struct ngnfs_cache *cache, struct cache_block *block)
{
	block->doubt_free = false;
	if (!block->set)
		return;
	dirty_set_remove_free(block->set, block->blkno);
	cache->counters.in_doubt_applied++;
}

static void regrant_in_doubt(struct ngnfs_cache *cache, struct dirty_set *set, uint16_t device)
{
	unsigned int count = regrant_after_write(cache, set, device);

	if (device != cache->device_count)
		ngnfs_cache_log("a write of %u blocks to device %u was in flight when its session "
				"broke: asking for %u grants again at their base versions to learn "
				"whether it was applied\n",
				set->block_count, device, count);
	else
		ngnfs_cache_log("a multi-device set of %u blocks was being staged when a session "
				"broke, so it was never committed: asking for %u grants again at "
				"their base versions to write it again\n",
				set->block_count, count);
}

/*
 * A multi-device set committed although the session of one of its
 * participants broke after that device staged it: the device applies it
 * when it resolves the set, but the grant is gone.  The copy stays for
 * revalidation; a newer change of the block asks for the grant again.
 */
static void grant_lost_under_write(struct ngnfs_cache *cache, struct cache_block *block,
				   const struct dirty_set *written)
{
	block->grant_lost = false;
	block->access = NGNFS_ACCESS_NONE;
	block->revoke_pending = false;
	if (block->set && block->set != written && !block->regrant) {
		block->regrant = true;
		block->regrant_deadline_ms = cache_now_ms() + cache->reclaim_timeout_ms;
		cache->regrants++;
	}
}

static void cache_write_done(void *arg, int status, const uint64_t *versions)
{
	struct dirty_set *set = arg;
	struct ngnfs_cache *cache = set->cache;
	struct cache_action *actions = NULL;
	bool newer = false;
	bool in_doubt;
	uint16_t device;
	uint32_t i;

	pthread_mutex_lock(&cache->lock);
	cache->writes_inflight--;
	if (set->flusher_write) {
		cache->flusher_slot_busy[set->flusher_slot]--;
		cache->flusher_inflight--;
		cache_kick_flusher(cache);
	}
	/* set_device walks the set: only for the failure that needs it */
	in_doubt = status == -ENOTCONN;
	device = in_doubt ? set_device(cache, set) : cache->device_count;
	if (status == -EBUSY || in_doubt) {
		/*
		 * -EBUSY: a block is still pinned to our previous multi-device
		 * set, whose participants apply it after the commit point:
		 * nothing was written, so write the set again shortly.
		 *
		 * -ENOTCONN of a single-device WRITE: the session broke with
		 * the write in flight, which blockd may or may not have
		 * applied.  The set stays dirty and its blocks ask for their
		 * grants again at their base versions, like the dirty blocks
		 * the session reset found idle: an unchanged version means the
		 * write never happened and the set is written again; a moved
		 * one with the bytes the write sent (remember_in_doubt) means
		 * it was applied, and the set is written again on top of it;
		 * other bytes drop the set as for any block changed underneath
		 * (cache_get_done), with the error reported.
		 *
		 * -ENOTCONN of a multi-device set: a STAGE failed, so the
		 * client never sent the COMMIT and aborted the stages (a COMMIT
		 * in doubt completes with -EIO instead, client.c): the set was
		 * not applied anywhere and never will be.  Its blocks on the
		 * broken sessions ask for their grants again (a participant's
		 * stage keeps them pinned until it is resolved as aborted),
		 * and the set is written again under a new set id.
		 */
		struct cache_block **written = set->written;
		uint32_t count = set->written_count;
		struct cache_list *node;
		bool release = set->release;

		if (in_doubt && device != cache->device_count)
			remember_in_doubt(cache, set);
		for (i = 0; i < count; i++)
			end_writeback(cache, written[i]);
		for (node = set->blocks.next; node != &set->blocks; node = node->next) {
			struct cache_block *block =
			    cache_list_entry(node, struct cache_block, set_entry);

			end_writeback(cache, block);
			cache_wake_block(cache, block->blkno);
		}
		free(set->requests);
		free(set->written_frees);
		set->requests = NULL;
		set->written = NULL;
		set->written_frees = NULL;
		set->writing = false;
		/*
		 * Changes committed since (copy on write) went to newer sets
		 * and include this set's bytes of their blocks, at the same
		 * base versions: the sets now leave together, as one.
		 */
		for (i = 0; i < count; i++) {
			struct cache_block *block = written[i];

			if (block->set && block->set != set)
				set = dirty_set_merge(cache, set, block->set);
			cache_wake_block(cache, block->blkno);
		}
		free(written);
		if (in_doubt)
			regrant_in_doubt(cache, set, device);
		else
			regrant_after_write(cache, set, cache->device_count);
		set->flush_wanted = true;
		set->flush_release |= release;
		set->not_before_ms = in_doubt ? 0 : cache_now_ms() + CACHE_BUSY_RETRY_MS;
		pthread_cond_broadcast(&cache->idle_cond);
		cache_kick_flusher(cache);
		pthread_mutex_unlock(&cache->lock);
		return;
	}
	if (status < 0 || (!versions && set->written_count)) {
		uint64_t first = set->written_count ? set->written[0]->blkno : 0;

		if (!status)
			status = -EIO;
		ngnfs_cache_log("writing a dirty set of %u blocks and %u frees (first block %llu "
				"on device %u) failed: %s (%d); the set's changes are lost\n",
				set->written_count, set->written_free_count,
				(unsigned long long)first, ngnfs_blkno_device(first),
				strerror(-status), status);
		lose_set(cache, set, status, &actions);
		pthread_mutex_unlock(&cache->lock);
		cache_run_actions(cache, actions);
		return;
	}
	for (i = 0; i < set->written_count; i++) {
		struct cache_block *block = set->written[i];

		block->version = versions[i];
		block->reserved = false;
		end_writeback(cache, block);
		if (block->grant_lost)
			grant_lost_under_write(cache, block, set);
		if (block->set != set) {
			/*
			 * Changed since (copy on write; never with a release):
			 * the newer set is based on this version and may go now.
			 */
			cache_block_unlocked(cache, block, &actions);
			newer = true;
			continue;
		}
		dirty_set_remove_block(cache, block);
		if (set->release && block->access > set->release_access)
			block->access = set->release_access;
		if (block->revoke_pending)
			revoke_progress(cache, block, &actions);
		cache_wake_block(cache, block->blkno);
	}
	/*
	 * What is left are the freed blocks: they are gone now, and so is our
	 * grant on them (released explicitly, so that no server keeps a holder
	 * for a block this client no longer knows).
	 */
	while (!cache_list_empty(&set->blocks)) {
		struct cache_block *block =
		    cache_list_entry(set->blocks.next, struct cache_block, set_entry);

		end_writeback(cache, block);
		cache_send_release(cache, block->blkno, NGNFS_ACCESS_NONE);
		cache_wake_block(cache, block->blkno);
		cache_remove_block(cache, block);
	}
	if (newer)
		cache_kick_flusher(cache);
	cache->counters.sets_written++;
	cache->counters.blocks_written += set->written_count;
	dirty_set_finish_waiters(set, 0);
	dirty_set_free(cache, set);
	pthread_cond_broadcast(&cache->idle_cond);
	cache_make_room(cache, 0, &actions);
	pthread_mutex_unlock(&cache->lock);
	cache_run_actions(cache, actions);
}

static void cache_get_done(void *arg, int status, uint64_t blkno, uint64_t version, uint8_t access,
			   const uint8_t *data)
{
	struct ngnfs_cache *cache = arg;
	struct cache_action *actions = NULL;
	struct cache_block *block;
	bool lost = false;

	pthread_mutex_lock(&cache->lock);
	/* A GET that crossed our held-back RELEASE: the RELEASE goes first. */
	if (cache->deferred_count)
		send_deferred_releases(cache, &blkno, false);
	block = cache_lookup(cache, blkno);
	if (!block) {
		if (status == 0)
			cache_send_release(cache, blkno, NGNFS_ACCESS_NONE);
		goto out;
	}
	block->get_access = NGNFS_ACCESS_NONE;
	if (block->release_crossed) {
		block->release_crossed = false;
		if (status == 0 && access > block->crossed_access) {
			/*
			 * We cannot tell whether our RELEASE reached the server
			 * before or after this grant, so whether we hold it: make
			 * it certain by releasing again (ordered before any later
			 * GET).  The copy stays; the next GET revalidates it.
			 * Writing under a grant the server took back would be
			 * refused and lose the dirty set.
			 */
			cache_send_release(cache, blkno, block->crossed_access);
			access = block->crossed_access;
			cache->counters.crossed_grants++;
		}
	}
	if (status < 0) {
		if (block->regrant) {
			/* The session may not be back yet: the flusher asks again. */
			if (cache_now_ms() < block->regrant_deadline_ms)
				goto wake;
			ngnfs_cache_log("reclaiming write access to dirty block %llu on device %u "
					"failed: %s (%d); its dirty set is lost\n",
					(unsigned long long)blkno, ngnfs_blkno_device(blkno),
					strerror(-status), status);
			lose_set(cache, block->set, status, &actions);
		}
		block->get_error = status;
		goto wake;
	}
	if (data) {
		/* The bytes of our own write in doubt: no other gateway's change for MDCACHE. */
		bool applied = block->regrant && version != block->version &&
			       in_doubt_answer(cache, block, version, data);

		if (block->regrant && block->doubt_free && version == block->version)
			in_doubt_free_done(cache, block);
		if (block->regrant && version != block->version && !applied) {
			ngnfs_cache_log(
			    "dirty block %llu on device %u was based on version %llu "
			    "but the server has %llu after the session reset: the dirty set "
			    "is lost\n",
			    (unsigned long long)blkno, ngnfs_blkno_device(blkno),
			    (unsigned long long)block->version, (unsigned long long)version);
			lost = true;
		}
		if (block->data && block->version != version && cache->invalidate && !applied)
			cache->invalidate(cache->invalidate_arg, blkno, block->data,
					  NGNFS_CACHE_CHANGED);
		if (lost)
			lose_set(cache, block->set, -ESTALE, &actions);
		if (block->dirty) {
			/* Re-granted at its base version: the dirty copy is the newer one. */
		} else if (cache_block_set_data(cache, block, data) < 0) {
			block->get_error = -ENOMEM;
			block->version = 0;
			cache_send_release(cache, blkno, NGNFS_ACCESS_NONE);
			block->access = NGNFS_ACCESS_NONE;
			goto wake;
		}
	} else if (!block->data && version == 0) {
		/* We asked with version 0: a block never written, all zeros. */
		if (cache_block_set_data(cache, block, NULL) < 0) {
			block->get_error = -ENOMEM;
			block->access = access;
			goto wake;
		}
	} else if (!block->data) {
		/*
		 * "Unchanged" for a copy we no longer have (dropped while the
		 * GET was in flight): forget the version so the next GET
		 * fetches the data.
		 */
		block->version = 0;
		block->access = access;
		goto wake;
	} else {
		cache->counters.revalidated++;
	}
	if (block->regrant) {
		block->regrant = false;
		cache->regrants--;
	}
	forget_doubt(cache, block);
	block->version = version;
	block->access = access;
	cache_touch(cache, block);
	if (block->set && block->set->flush_wanted)
		cache_kick_flusher(cache);
	if (block->revoke_pending)
		revoke_progress(cache, block, &actions);
	cache_make_room(cache, 0, &actions);
wake:
	cache_wake_block(cache, blkno);
out:
	pthread_mutex_unlock(&cache->lock);
	cache_run_actions(cache, actions);
}

static void cache_revoke(void *owner, uint64_t blkno, uint8_t access)
{
	struct ngnfs_cache *cache = owner;
	struct cache_action *actions = NULL;
	struct cache_block *block;

	pthread_mutex_lock(&cache->lock);
	cache->counters.revokes++;
	block = cache_lookup(cache, blkno);
	if (!block) {
		/*
		 * Not cached (every removal released it already, so this is
		 * stale or a freed block): answering costs nothing and cannot
		 * overtake a GET, because a block with a GET in flight is cached.
		 */
		cache_send_release(cache, blkno, access);
	} else if (block->access <= access) {
		/*
		 * Already down there: our RELEASE crossed this REVOKE.  Answering
		 * again would be wrong: it could reach the server after a GET we
		 * sent since and take back what that GET was granted.
		 */
	} else {
		if (!block->revoke_pending || access < block->revoke_access)
			block->revoke_access = access;
		block->revoke_pending = true;
		revoke_progress(cache, block, &actions);
	}
	pthread_mutex_unlock(&cache->lock);
	cache_run_actions(cache, actions);
}

static void cache_session_reset(void *owner, uint16_t device, bool server_restarted)
{
	struct ngnfs_cache *cache = owner;
	struct cache_action *actions = NULL;
	unsigned int reclaim = 0;
	size_t bucket;

	pthread_mutex_lock(&cache->lock);
	if (device < cache->device_count) {
		cache->pools[device].count = 0;
		cache->pools[device].resets++; /* a refill in flight is of the old session */
	}
	/* The session's grants are gone: so is what held-back RELEASEs would give up. */
	for (uint32_t i = 0; i < cache->deferred_count;) {
		if (ngnfs_blkno_device(cache->deferred[i].blkno) == device)
			drop_deferred_release(cache, i);
		else
			i++;
	}
	for (bucket = 0; bucket <= cache->bucket_mask; bucket++) {
		struct cache_block *block;

		for (block = cache->buckets[bucket]; block; block = block->hash_next) {
			if (ngnfs_blkno_device(block->blkno) != device)
				continue;
			if (block->writeback) {
				/* The write's completion decides (cache_write_done). */
				block->grant_lost = true;
				continue;
			}
			block->revoke_pending = false;
			if (block->dirty) {
				/* Freed ones too: the free needs the write grant. */
				block->access = NGNFS_ACCESS_NONE;
				reclaim++;
				if (!block->regrant)
					cache->regrants++;
				block->regrant = true;
				block->regrant_deadline_ms =
				    cache_now_ms() + cache->reclaim_timeout_ms;
			} else {
				/*
				 * Clean copies stay for revalidation.  Nobody will
				 * revoke them now, so the gateway must stop trusting
				 * what it built from them: once the server lets
				 * another client have the block (after its grace
				 * period, or at once when it closed this session),
				 * that client's change would otherwise never reach
				 * this gateway's caches.  No RELEASE waits for the
				 * delivery: the grant is already gone.
				 */
				if (block->access != NGNFS_ACCESS_NONE && block->data &&
				    cache->invalidate)
					cache->invalidate(cache->invalidate_arg, block->blkno,
							  block->data, NGNFS_CACHE_UNGUARDED);
				block->access = NGNFS_ACCESS_NONE;
			}
			cache_wake_block(cache, block->blkno);
		}
	}
	if (reclaim)
		ngnfs_cache_log("session with device %u reset (%s): reclaiming write access "
				"to %u dirty blocks at their base versions\n",
				device, server_restarted ? "server restarted" : "session lost",
				reclaim);
	/* The flusher sends the GETs, again and again until the session is back. */
	cache_kick_flusher(cache);
	pthread_mutex_unlock(&cache->lock);
	cache_run_actions(cache, actions);
}

static const struct ngnfs_client_ops cache_client_ops = {
	.revoke = cache_revoke,
	.session_reset = cache_session_reset,
};

void cache_pool_push(struct ngnfs_cache *cache, uint16_t device, const struct pool_block *block)
{
	struct alloc_pool *pool = &cache->pools[device];

	if (pool->count == pool->capacity) {
		uint32_t capacity = pool->capacity ? pool->capacity * 2 : 64;
		struct pool_block *blocks = realloc(pool->blocks, capacity * sizeof(*blocks));

		if (!blocks)
			return; /* the reservation is unused until the session ends */
		pool->blocks = blocks;
		pool->capacity = capacity;
	}
	pool->blocks[pool->count++] = *block;
}

int cache_unreachable_error(struct ngnfs_cache *cache, uint16_t device, int error)
{
	/* 0 also when the session is back already: trying again will do. */
	if (error == -ENOTCONN &&
	    ngnfs_client_unreachable_ms(cache->client, device) < cache->reclaim_timeout_ms)
		return -EAGAIN;
	return error;
}

uint16_t cache_alloc_device(struct ngnfs_cache *cache, uint16_t device)
{
	uint64_t now = 0;
	uint16_t i;

	for (i = 0; i < cache->device_count; i++) {
		uint16_t candidate = (uint16_t)((device + i) % cache->device_count);
		struct alloc_pool *pool = &cache->pools[candidate];

		/* The common case, on every allocation: no clock read. */
		if (pool->count || !pool->full_until_ms)
			return candidate;
		if (!now)
			now = cache_now_ms();
		if (pool->full_until_ms <= now) {
			/* Time to ask again: frees may have made room, the grace may be over. */
			pool->full_until_ms = 0;
			if (pool->error == -ENOSPC || pool->error == -EAGAIN ||
			    pool->error == -ENOTCONN)
				pool->error = 0;
			return candidate;
		}
	}
	return device; /* every device is full: its ENOSPC is the answer */
}

void cache_refill_pool(struct ngnfs_cache *cache, uint16_t device)
{
	struct alloc_pool *pool = &cache->pools[device];
	uint32_t batch = cache->alloc_batch;
	uint64_t *blknos = calloc(batch, sizeof(*blknos));
	uint64_t *versions = calloc(batch, sizeof(*versions));
	uint32_t allocated = 0, session_epoch = 0;
	uint64_t resets;
	uint32_t i;
	int ret;

	if (!blknos || !versions) {
		free(blknos);
		free(versions);
		pool->error = -ENOMEM;
		return;
	}
	pool->refilling = true;
	resets = pool->resets;
	pthread_mutex_unlock(&cache->lock);
	ret = ngnfs_client_alloc_sync(cache->client, device, batch, blknos, versions,
				      &session_epoch, &allocated);
	pthread_mutex_lock(&cache->lock);
	pool->refilling = false;
	if (pool->resets != resets) {
		/*
		 * The session that reserved these ended meanwhile, and its
		 * reservations with it: another client may get them now.
		 */
		ngnfs_cache_log("ALLOC on device %u was answered by a session that has ended "
				"since: its %u blocks are not used\n",
				device, allocated);
		allocated = 0;
		ret = 0;
		goto out;
	}
	if (ret == 0 && allocated == 0)
		ret = -ENOSPC;
	if (ret == -ENOSPC) {
		if (!pool->full_until_ms)
			ngnfs_cache_log("device %u is full: new blocks come from the other devices "
					"while it is\n",
					device);
		pool->full_until_ms = cache_now_ms() + CACHE_FULL_RECHECK_MS;
		pool->error = ret;
	} else if (ret == -EAGAIN || ret == -ENOTCONN) {
		if (pool->passed_over_for != ret)
			ngnfs_cache_log("device %u %s: new blocks come from the other devices "
					"until %s\n",
					device,
					ret == -EAGAIN
					    ? "is in its reclaim grace period after a restart"
					    : "cannot be reached",
					ret == -EAGAIN ? "it ends" : "it answers");
		pool->passed_over_for = ret;
		pool->full_until_ms = cache_now_ms() + (ret == -EAGAIN ? CACHE_GRACE_RECHECK_MS
								       : CACHE_AWAY_RECHECK_MS);
		pool->error = ret;
	} else if (ret < 0) {
		ngnfs_cache_log("ALLOC of %u blocks on device %u failed: %s (%d)\n", batch, device,
				strerror(-ret), ret);
		pool->error = ret;
	} else {
		pool->full_until_ms = 0;
		pool->passed_over_for = 0;
	}
	for (i = 0; i < allocated; i++) {
		/* A device hands out its own blocks; anything else is not trusted. */
		if (ngnfs_blkno_device(blknos[i]) != device) {
			ngnfs_cache_log("ALLOC on device %u gave block %llu of device %u: "
					"ignored\n",
					device, (unsigned long long)blknos[i],
					ngnfs_blkno_device(blknos[i]));
			continue;
		}
		cache_pool_push(cache, device,
				&(struct pool_block){ .blkno = blknos[i],
						      .version = versions[i],
						      .session_epoch = session_epoch });
	}
out:
	cache_wake_block(cache, device);
	free(blknos);
	free(versions);
}

/* The one device all of a set's blocks and frees live on, or device_count if several. */
static uint16_t set_device(const struct ngnfs_cache *cache, const struct dirty_set *set)
{
	const struct cache_list *node;
	int device = -1;
	uint32_t i;

	for (node = set->blocks.next; node != &set->blocks; node = node->next) {
		const struct cache_block *block =
		    cache_list_entry(node, struct cache_block, set_entry);
		int this_device = ngnfs_blkno_device(block->blkno);

		if (device >= 0 && device != this_device)
			return cache->device_count;
		device = this_device;
	}
	for (i = 0; i < set->free_count; i++) {
		int this_device = ngnfs_blkno_device(set->frees[i]);

		if (device >= 0 && device != this_device)
			return cache->device_count;
		device = this_device;
	}
	return device < 0 || device >= cache->device_count ? cache->device_count : (uint16_t)device;
}

/*
 * Sets the flusher may write now, merged into groups: one per device for
 * sets that live on a single device (one WRITE each, no two-phase
 * commit), and one for the sets that span devices (they pay for the
 * two-phase commit anyway).  Merging single-device sets of different
 * devices would turn cheap WRITEs into a multi-device commit.  A slot
 * whose writes in flight are as many as its depth gets no group: its
 * sets wait for a completion and share the next write.  A device slot
 * has depth 2: blockd takes a session's one-frame WRITE of other blocks
 * while the one before is still in its commit queue (docs/protocol.md,
 * Sessions), so the second joins blockd's next group commit instead of
 * waiting here for the first reply and the hand-offs behind it (8-21%
 * more concurrent stable creates, docs/performance.md, run 22).  Deeper
 * would only split what the client merges.  The multi-device slot has
 * depth 1, since blockd takes STAGE and COMMIT in order anyway.
 * Fills groups[0..device_count] and returns how many are non-empty.
 */
static size_t flusher_gather(struct ngnfs_cache *cache, uint64_t now, uint64_t *next_deadline,
			     struct dirty_set **groups)
{
	struct dirty_set **eligible;
	struct cache_list *node;
	size_t count = 0;
	size_t total = 0;
	size_t found = 0;
	size_t i;

	for (i = 0; i <= cache->device_count; i++)
		groups[i] = NULL;
	for (node = cache->dirty_sets.next; node != &cache->dirty_sets; node = node->next)
		total++;
	if (!total)
		return 0;
	eligible = calloc(total, sizeof(*eligible));
	if (!eligible)
		return 0;
	for (node = cache->dirty_sets.next; node != &cache->dirty_sets; node = node->next) {
		struct dirty_set *set = cache_list_entry(node, struct dirty_set, entry);
		uint64_t due = set->first_dirty_ms + cache->writeback_interval_ms;

		if (set->writing)
			continue;
		if (set->not_before_ms > now) {
			if (set->not_before_ms < *next_deadline)
				*next_deadline = set->not_before_ms;
			continue;
		}
		/*
		 * In stable mode every transaction waits on its set (txn.c
		 * adds the waiter under the lock that installs the set), so
		 * waiters is what "at once" means; a set without them holds
		 * only unstable writes and waits for its interval.
		 */
		if (!(set->waiters || set->birth_seq <= cache->sync_seq || cache->pressure ||
		      set->flush_wanted || due <= now)) {
			if (due < *next_deadline)
				*next_deadline = due;
			continue;
		}
		if (dirty_set_write_locked(set) || dirty_set_regranting(set)) {
			/* The unlock (or the grant) kicks the flusher again. */
			set->flush_wanted = true;
			continue;
		}
		/*
		 * Newer than a write in flight: its completion kicks the
		 * flusher.  Not flush_wanted, which would hold writers back.
		 */
		if (dirty_set_after_write(set))
			continue;
		eligible[count++] = set;
	}
	for (i = 0; i < count; i++) {
		uint16_t device = set_device(cache, eligible[i]);
		struct dirty_set *group = groups[device];

		if (cache->flusher_slot_busy[device] >= slot_depth(cache, device))
			continue;
		if (!group) {
			groups[device] = eligible[i];
			found++;
			continue;
		}
		if (group->block_count + eligible[i]->block_count > CACHE_GROUP_MAX_BLOCKS)
			continue;
		groups[device] = dirty_set_merge(cache, group, eligible[i]);
	}
	free(eligible);
	return found;
}

/* Ask again for the write grants of dirty blocks a session reset took away. */
static void flusher_regrant(struct ngnfs_cache *cache, struct cache_action **actions)
{
	struct cache_list *node;

	for (node = cache->dirty_sets.next; node != &cache->dirty_sets; node = node->next) {
		struct dirty_set *set = cache_list_entry(node, struct dirty_set, entry);
		struct cache_list *entry;

		for (entry = set->blocks.next; entry != &set->blocks; entry = entry->next) {
			struct cache_block *block =
			    cache_list_entry(entry, struct cache_block, set_entry);

			if (!block->regrant || block->get_access != NGNFS_ACCESS_NONE)
				continue;
			if (cache_add_action(actions, CACHE_ACTION_GET, block->blkno,
					     NGNFS_ACCESS_WRITE, block->version))
				block->get_access = NGNFS_ACCESS_WRITE;
		}
	}
}

static void *flusher_main(void *arg)
{
	struct ngnfs_cache *cache = arg;

	pthread_mutex_lock(&cache->lock);
	while (!cache->stopping) {
		uint64_t now = cache_now_ms();
		uint64_t next_deadline = now + CACHE_FLUSHER_IDLE_MS;
		struct timespec deadline;

		if (cache->deferred_count) {
			uint64_t first = send_deferred_releases(cache, NULL, false);

			if (first && first < next_deadline)
				next_deadline = first;
		}
		if (cache->regrants) {
			struct cache_action *actions = NULL;

			flusher_regrant(cache, &actions);
			next_deadline = now + CACHE_REGRANT_RETRY_MS;
			if (actions) {
				pthread_mutex_unlock(&cache->lock);
				cache_run_actions(cache, actions);
				pthread_mutex_lock(&cache->lock);
			}
		}

		/*
		 * Writes in flight per slot (a device, or the multi-device
		 * group) up to its depth (flusher_gather): what commits
		 * while they are in flight waits for the next one and shares
		 * its write, while a commit on another device need not wait
		 * for this device's round trip and sync (docs/performance.md,
		 * run 11).
		 */
		if (!every_slot_busy(cache)) {
			struct cache_action *actions = NULL;
			size_t i;

			if (cache_list_empty(&cache->dirty_sets))
				cache->pressure = false;
			if (flusher_gather(cache, now, &next_deadline, cache->flusher_groups)) {
				for (i = 0; i <= cache->device_count; i++) {
					struct dirty_set *set = cache->flusher_groups[i];

					if (set && dirty_set_try_write(cache, set, false,
								       NGNFS_ACCESS_NONE, true,
								       &actions)) {
						set->flusher_slot = (uint16_t)i;
						cache->flusher_slot_busy[i]++;
						cache->flusher_inflight++;
					}
				}
			}
			if (actions) {
				/* Whoever still needs room asks again. */
				cache->pressure = false;
				pthread_mutex_unlock(&cache->lock);
				cache_run_actions(cache, actions);
				pthread_mutex_lock(&cache->lock);
				continue;
			}
		}
		cache->flusher_wake_ms = next_deadline > now ? next_deadline : now + 1;
		deadline_in_ms(&deadline, next_deadline > now ? next_deadline - now : 1);
		pthread_cond_timedwait(&cache->flusher_cond, &cache->lock, &deadline);
		cache->flusher_wake_ms = 0;
	}
	pthread_mutex_unlock(&cache->lock);
	return NULL;
}

static int cache_init(struct ngnfs_cache **cache_out, const struct ngnfs_cache_config *config)
{
	struct ngnfs_cache *cache = calloc(1, sizeof(*cache));
	pthread_condattr_t attr;
	size_t buckets = 1024;
	int i;

	if (!cache)
		return -ENOMEM;
	cache->cache_bytes =
	    config && config->cache_bytes ? config->cache_bytes : CACHE_DEFAULT_BYTES;
	cache->durability = config ? config->durability : NGNFS_DURABILITY_STABLE;
	cache->writeback_interval_ms = config && config->writeback_interval_ms
					   ? config->writeback_interval_ms
					   : CACHE_DEFAULT_INTERVAL_MS;
	cache->reclaim_timeout_ms = config && config->reclaim_timeout_ms
					? config->reclaim_timeout_ms
					: CACHE_DEFAULT_RECLAIM_TIMEOUT_MS;
	cache->alloc_batch =
	    config && config->alloc_batch ? config->alloc_batch : CACHE_DEFAULT_ALLOC_BATCH;
	if (cache->durability != NGNFS_DURABILITY_STABLE &&
	    cache->durability != NGNFS_DURABILITY_WRITEBACK) {
		ngnfs_cache_log("creating the cache: unknown durability mode %d\n",
				(int)cache->durability);
		free(cache);
		return -EINVAL;
	}
	cache->max_data_blocks = cache->cache_bytes / NGNFS_BLOCK_SIZE;
	if (cache->max_data_blocks < CACHE_MIN_BLOCKS)
		cache->max_data_blocks = CACHE_MIN_BLOCKS;
	while (buckets < cache->max_data_blocks && buckets < (1UL << 22))
		buckets <<= 1;
	cache->buckets = calloc(buckets, sizeof(*cache->buckets));
	if (!cache->buckets) {
		free(cache);
		return -ENOMEM;
	}
	cache->bucket_mask = buckets - 1;
	cache_list_init(&cache->lru);
	cache_list_init(&cache->dirty_sets);
	pthread_mutex_init(&cache->lock, NULL);
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	for (i = 0; i < NGNFS_CACHE_WAITQS; i++)
		pthread_cond_init(&cache->waitqs[i], &attr);
	pthread_cond_init(&cache->flusher_cond, &attr);
	pthread_cond_init(&cache->idle_cond, &attr);
	pthread_condattr_destroy(&attr);
	*cache_out = cache;
	return 0;
}

static int cache_start(struct ngnfs_cache *cache)
{
	int ret;

	cache->device_count = ngnfs_client_device_count(cache->client);
	cache->pools = calloc(cache->device_count ? cache->device_count : 1, sizeof(*cache->pools));
	cache->flusher_groups =
	    calloc((size_t)cache->device_count + 1, sizeof(*cache->flusher_groups));
	cache->flusher_slot_busy =
	    calloc((size_t)cache->device_count + 1, sizeof(*cache->flusher_slot_busy));
	if (!cache->pools || !cache->flusher_groups || !cache->flusher_slot_busy)
		return -ENOMEM;
	ret = pthread_create(&cache->flusher, NULL, flusher_main, cache);
	if (ret)
		return -ret;
	cache->flusher_started = true;
	return 0;
}

static void cache_free(struct ngnfs_cache *cache)
{
	size_t bucket;
	int i;

	for (bucket = 0; bucket <= cache->bucket_mask; bucket++) {
		while (cache->buckets[bucket])
			cache_remove_block(cache, cache->buckets[bucket]);
	}
	while (!cache_list_empty(&cache->dirty_sets))
		dirty_set_free(cache,
			       cache_list_entry(cache->dirty_sets.next, struct dirty_set, entry));
	for (i = 0; cache->pools && i < cache->device_count; i++) {
		free(cache->pools[i].blocks);
	}
	cache_free_slabs(cache);
	free(cache->deferred);
	free(cache->pools);
	free(cache->flusher_groups);
	free(cache->flusher_slot_busy);
	for (i = 0; i < NGNFS_CACHE_WAITQS; i++)
		pthread_cond_destroy(&cache->waitqs[i]);
	pthread_cond_destroy(&cache->flusher_cond);
	pthread_cond_destroy(&cache->idle_cond);
	pthread_mutex_destroy(&cache->lock);
	free(cache->buckets);
	free(cache);
}

int ngnfs_cache_create(struct ngnfs_client *client, const struct ngnfs_cache_config *config,
		       struct ngnfs_cache **cache_out)
{
	struct ngnfs_cache *cache;
	int ret;

	ret = cache_init(&cache, config);
	if (ret < 0)
		return ret;
	cache->client = client;
	ret = cache_start(cache);
	if (ret < 0) {
		cache_free(cache);
		return ret;
	}
	*cache_out = cache;
	return 0;
}

int ngnfs_cache_create_with_client(const struct ngnfs_client_config *client_config,
				   const struct ngnfs_cache_config *config,
				   struct ngnfs_cache **cache_out)
{
	struct ngnfs_client_config with_retry = *client_config;
	struct ngnfs_cache *cache;
	int ret;

	ret = cache_init(&cache, config);
	if (ret < 0)
		return ret;
	/*
	 * A COMMIT in doubt is retried for as long as dirty blocks wait for
	 * a device that went away: both are "how long a device may be gone".
	 */
	if (!with_retry.commit_retry_ms)
		with_retry.commit_retry_ms = cache->reclaim_timeout_ms;
	ret = ngnfs_client_create(&with_retry, &cache_client_ops, cache, &cache->client);
	if (ret < 0) {
		cache_free(cache);
		return ret;
	}
	cache->owns_client = true;
	ret = cache_start(cache);
	if (ret < 0) {
		ngnfs_client_destroy(cache->client);
		cache_free(cache);
		return ret;
	}
	*cache_out = cache;
	return 0;
}

void ngnfs_cache_destroy(struct ngnfs_cache *cache)
{
	int ret;

	if (!cache)
		return;
	ret = ngnfs_cache_sync(cache);
	if (ret < 0)
		ngnfs_cache_log("destroying the cache: writing back dirty sets failed: %s (%d)\n",
				strerror(-ret), ret);
	pthread_mutex_lock(&cache->lock);
	cache->stopping = true;
	cache_kick_flusher(cache);
	pthread_mutex_unlock(&cache->lock);
	if (cache->flusher_started)
		pthread_join(cache->flusher, NULL);
	/* Revocation writes may still be in flight; their completions use the cache. */
	pthread_mutex_lock(&cache->lock);
	while (cache->writes_inflight)
		pthread_cond_wait(&cache->idle_cond, &cache->lock);
	send_deferred_releases(cache, NULL, true);
	pthread_mutex_unlock(&cache->lock);
	if (cache->owns_client)
		ngnfs_client_destroy(cache->client);
	cache_free(cache);
}

void ngnfs_cache_set_invalidate(struct ngnfs_cache *cache, ngnfs_cache_invalidate_fn fn, void *arg)
{
	pthread_mutex_lock(&cache->lock);
	cache->invalidate = fn;
	cache->invalidate_arg = arg;
	pthread_mutex_unlock(&cache->lock);
}

void ngnfs_cache_set_lost(struct ngnfs_cache *cache, ngnfs_cache_lost_fn fn, void *arg)
{
	pthread_mutex_lock(&cache->lock);
	cache->lost = fn;
	cache->lost_arg = arg;
	pthread_mutex_unlock(&cache->lock);
}

int ngnfs_cache_sync_block(struct ngnfs_cache *cache, uint64_t blkno)
{
	struct stable_waiter waiter;
	struct cache_block *block;

	pthread_mutex_lock(&cache->lock);
	block = cache_lookup(cache, blkno);
	if (!block || !block->set) {
		pthread_mutex_unlock(&cache->lock);
		return 0;
	}
	/*
	 * A waiter makes an idle set eligible for the flusher's next round
	 * (and travels with the set through merges); a set being written
	 * already holds every change made before this call, and its
	 * completion (or a retry after -EBUSY) finishes the waiter.
	 */
	memset(&waiter, 0, sizeof(waiter));
	pthread_cond_init(&waiter.cond, NULL);
	dirty_set_add_waiter(block->set, &waiter);
	cache->counters.block_syncs++;
	cache_kick_flusher(cache);
	while (!waiter.done)
		pthread_cond_wait(&waiter.cond, &cache->lock);
	pthread_mutex_unlock(&cache->lock);
	pthread_cond_destroy(&waiter.cond);
	return waiter.status;
}

static bool dirty_before(struct ngnfs_cache *cache, uint64_t seq)
{
	struct cache_list *node;

	for (node = cache->dirty_sets.next; node != &cache->dirty_sets; node = node->next) {
		if (cache_list_entry(node, struct dirty_set, entry)->birth_seq <= seq)
			return true;
	}
	return false;
}

int ngnfs_cache_sync(struct ngnfs_cache *cache)
{
	uint64_t failures;
	uint64_t seq;
	int ret = 0;

	pthread_mutex_lock(&cache->lock);
	seq = cache->commit_seq;
	failures = cache->write_failures;
	if (seq > cache->sync_seq)
		cache->sync_seq = seq;
	cache_kick_flusher(cache);
	while (dirty_before(cache, seq)) {
		struct timespec deadline;

		deadline_in_ms(&deadline, 100);
		pthread_cond_timedwait(&cache->idle_cond, &cache->lock, &deadline);
		cache_kick_flusher(cache);
	}
	if (cache->write_failures != failures)
		ret = cache->last_write_error;
	pthread_mutex_unlock(&cache->lock);
	return ret;
}

int ngnfs_cache_take_error(struct ngnfs_cache *cache)
{
	int error;

	pthread_mutex_lock(&cache->lock);
	error = cache->first_error;
	cache->first_error = 0;
	pthread_mutex_unlock(&cache->lock);
	return error;
}

void ngnfs_cache_counters(struct ngnfs_cache *cache, struct ngnfs_cache_counters *counters)
{
	pthread_mutex_lock(&cache->lock);
	cache->counters.cached_blocks = cache->data_blocks;
	*counters = cache->counters;
	pthread_mutex_unlock(&cache->lock);
}

struct ngnfs_client *ngnfs_cache_client(struct ngnfs_cache *cache)
{
	return cache->client;
}

enum ngnfs_durability ngnfs_cache_durability(const struct ngnfs_cache *cache)
{
	return cache->durability;
}
