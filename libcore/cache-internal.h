/* SPDX-License-Identifier: GPL-2.0-or-later */
#ifndef NGNFS_CACHE_INTERNAL_H
#define NGNFS_CACHE_INTERNAL_H

/*
 * What the block cache (cache.c), the dirty sets (dirty.c) and the
 * transactions (txn.c) share, and nobody else sees.
 *
 * One mutex (cache->lock) protects everything here: the hash table, the
 * LRU, every block's state, the dirty sets and the allocation pools.  It
 * is never held across a network call or a transaction function, only
 * while state is looked at or changed, so a single lock is cheap and
 * makes the revoke/unlock/write-completion races easy to reason about.
 * Work that needs the network (GET, WRITE) is decided under the lock and
 * recorded as a struct cache_action; the actions are sent after the lock
 * is dropped (cache_run_actions).  RELEASE is the exception: it is queued
 * with the client under the lock, because it must leave before any later
 * GET of the same block (the client's submit only queues a frame and
 * never calls back into the cache, so this cannot deadlock).
 *
 * Waiting is per block: a transaction that must wait for a block sleeps
 * on one of NGNFS_CACHE_WAITQS condition variables chosen by the block
 * number, and everything that changes a block's state wakes only that
 * queue, so a wakeup reaches the few threads that care (plus those that
 * collide in the hash), not every waiting thread.
 *
 * XXX:
 *  - A single lock will become the bottleneck beyond a few dozen cores;
 *    the state is already per block, so it can be split by hash later.
 */

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "cache.h"
#include "txn.h"

#define NGNFS_CACHE_WAITQS 64

/* A minimal intrusive doubly linked list. */
struct cache_list {
	struct cache_list *prev;
	struct cache_list *next;
};

static inline void cache_list_init(struct cache_list *head)
{
	head->prev = head;
	head->next = head;
}

static inline bool cache_list_empty(const struct cache_list *head)
{
	return head->next == head;
}

static inline void cache_list_add_tail(struct cache_list *node, struct cache_list *head)
{
	node->prev = head->prev;
	node->next = head;
	head->prev->next = node;
	head->prev = node;
}

static inline void cache_list_del_init(struct cache_list *node)
{
	node->prev->next = node->next;
	node->next->prev = node->prev;
	cache_list_init(node);
}

#define cache_list_entry(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))

#define ngnfs_cache_log(...) fprintf(stderr, "ngnfs cache: " __VA_ARGS__)

struct dirty_set;

struct deferred_release {
	uint64_t blkno;
	uint64_t ticket;
	uint64_t deadline_ms;
	uint8_t access;
};

struct cache_block {
	uint64_t blkno;
	struct cache_block *hash_next;
	struct cache_list lru;	     /* cache->lru while data is held; most recent last */
	struct cache_list set_entry; /* set->blocks while dirty */
	struct dirty_set *set;	     /* the dirty set, NULL when clean */
	uint8_t *data;		     /* NULL when no copy is held */
	uint64_t version;	     /* of data; also kept after the data went */
	uint8_t access;		     /* what the server granted */
	uint8_t get_access;	     /* a GET for this access is in flight (NONE: none) */
	uint8_t revoke_access;	     /* target of a pending revocation */
	bool revoke_pending;
	bool dirty;
	bool writeback; /* a write in flight carries it (wb_set) */
	bool regrant;	/* session reset: dirty copy waits for its grant again */
	/*
	 * Its session broke while a write carried it (writeback): whatever
	 * that write's outcome, the server no longer counts this cache as
	 * the block's holder.
	 */
	bool grant_lost;
	/*
	 * A single-device write carrying this block was in flight when its
	 * session broke: doubt_data holds the bytes it sent (counted in
	 * data_blocks) until the regrant's answer tells whether blockd
	 * applied it (cache.c, in_doubt_answer).  doubt_free: that write
	 * carried this block's free (until the set is written again).
	 */
	uint8_t *doubt_data;
	bool doubt_free;
	bool freed;    /* freed by a committed transaction, leaves with its set */
	bool reserved; /* from ALLOC and never written: a free just returns it */
	/*
	 * Its dirty change was lost while a transaction had it locked: the
	 * data goes at the last unlock, and nobody may take it meanwhile.
	 */
	bool drop_pending;
	/*
	 * A RELEASE down to crossed_access left while a GET was in flight:
	 * the server may grant that GET before it sees the RELEASE, which
	 * then takes the new grant back (see cache_get_done).
	 */
	bool release_crossed;
	uint8_t crossed_access;
	uint32_t readers;
	bool writer;
	int get_error;		      /* why the last GET failed, for the waiter */
	uint64_t regrant_deadline_ms; /* give the dirty copy up after this */
	/*
	 * The set whose write in flight carries the block.  Usually set too;
	 * a change committed during the write moves the block to a newer set
	 * (copy on write, see dirty.c) and, unless it was a free, leaves the
	 * bytes being sent in wb_data (counted in data_blocks).
	 */
	struct dirty_set *wb_set;
	uint8_t *wb_data;
};

enum cache_action_type {
	CACHE_ACTION_WRITE,
	CACHE_ACTION_GET,
};

/* Network work decided under the lock, sent after it is dropped. */
struct cache_action {
	struct cache_action *next;
	enum cache_action_type type;
	uint64_t blkno;
	uint64_t version;
	uint8_t access;
	struct dirty_set *set;
};

/* A transaction waiting for its set to be durable (stable mode). */
struct stable_waiter {
	struct stable_waiter *next;
	pthread_cond_t cond;
	bool done;
	int status;
};

/*
 * Blocks modified together, written together.  A set is idle while
 * transactions add to it and being written (writing) from the moment its
 * write request is built until the completion.  A change committed to a
 * block of a set being written goes to a newer, idle set instead (copy on
 * write, dirty.c), which is not written before that completion.
 */
struct dirty_set {
	struct ngnfs_cache *cache;
	struct cache_list entry;  /* cache->dirty_sets */
	struct cache_list blocks; /* struct cache_block.set_entry */
	uint32_t block_count;
	uint64_t *frees;
	uint32_t free_count;
	uint32_t free_capacity;
	struct stable_waiter *waiters;
	uint64_t birth_seq;	 /* smallest commit sequence merged into it */
	uint64_t first_dirty_ms; /* oldest modification, for the writeback interval */
	bool writing;
	bool flush_wanted; /* write as soon as no block of it is write-locked */
	bool flush_release;
	bool flusher_write;	/* counts against its slot's write in flight */
	uint16_t flusher_slot;	/* which: a device, or device_count for multi-device */
	bool found_applied;	/* a write in doubt turned out applied (logged once) */
	uint64_t not_before_ms; /* refused as busy: try again after this */
	/* while writing */
	struct ngnfs_block_request *requests;
	struct cache_block **written;
	uint32_t written_count;
	uint64_t *written_frees;
	uint32_t written_free_count;
	bool release;
	uint8_t release_access;
	struct cache_action write_action; /* queued without allocating */
};

/* A reserved block: its version, and the epoch of the session that reserved it. */
struct pool_block {
	uint64_t blkno;
	uint64_t version;
	uint32_t session_epoch;
};

struct alloc_pool {
	struct pool_block *blocks;
	uint32_t count;
	uint32_t capacity;
	bool refilling;
	uint64_t resets; /* session resets of the device: a refill spanning one is void */
	int error;
	/*
	 * The device answered ENOSPC, or EAGAIN (its reclaim grace period
	 * after a restart), or cannot be reached (ENOTCONN): other devices
	 * give blocks until then.
	 */
	uint64_t full_until_ms;
	/* EAGAIN (grace) or ENOTCONN (away): the reason last logged, once per episode */
	int passed_over_for;
};

struct ngnfs_cache {
	struct ngnfs_client *client;
	bool owns_client;
	size_t cache_bytes;
	enum ngnfs_durability durability;
	uint32_t writeback_interval_ms;
	uint32_t reclaim_timeout_ms;
	uint32_t alloc_batch;
	uint16_t device_count;

	pthread_mutex_t lock;
	struct cache_block **buckets;
	size_t bucket_mask;
	struct cache_list lru;
	struct cache_list dirty_sets;
	struct cache_block *free_blocks; /* linked by hash_next, see cache_block_alloc */
	struct block_slab *block_slabs;
	size_t data_blocks;
	size_t max_data_blocks;
	pthread_cond_t waitqs[NGNFS_CACHE_WAITQS];

	pthread_t flusher;
	bool flusher_started;
	pthread_cond_t flusher_cond;
	bool stopping;
	uint32_t flusher_inflight;	   /* flusher writes in flight, all slots */
	uint32_t *flusher_slot_busy;	   /* device_count + 1: in flight per slot */
	struct dirty_set **flusher_groups; /* device_count + 1, see flusher_gather */
	bool pressure;
	/*
	 * When the flusher's timed wait ends; 0 while it runs (it looks at
	 * every set before it sleeps again).  A commit only wakes it for a
	 * set due before then (cache_kick_flusher_for).
	 */
	uint64_t flusher_wake_ms;
	uint32_t writes_inflight; /* every set write; destroy waits for them */
	pthread_cond_t idle_cond; /* writes_inflight dropped, sync progress */

	uint32_t regrants; /* dirty blocks waiting to be re-granted */

	uint64_t commit_seq;
	uint64_t sync_seq; /* sets born at or before this must be written now */

	struct alloc_pool *pools;

	int first_error; /* for ngnfs_cache_take_error */
	uint64_t write_failures;
	int last_write_error;

	struct ngnfs_cache_counters counters;
	ngnfs_cache_invalidate_fn invalidate;
	void *invalidate_arg;
	/*
	 * RELEASEs held back until the invalidation a revocation caused has
	 * been delivered by the gateway (ngnfs_cache_invalidations_delivered):
	 * the other client's change can only happen after our RELEASE, and
	 * by then nothing stale may be served from the gateway's own caches.
	 * Each goes at its deadline at the latest, before any GET of its
	 * block, and before a GRANT of it is looked at.
	 */
	struct deferred_release *deferred;
	uint32_t deferred_count; /* read without the lock as a hint */
	uint32_t deferred_capacity;
	uint64_t delivered_ticket;
	ngnfs_cache_lost_fn lost;
	void *lost_arg;
};

/* cache.c, all with cache->lock held unless said otherwise */
uint64_t cache_now_ms(void);
struct cache_block *cache_lookup(struct ngnfs_cache *cache, uint64_t blkno);
struct cache_block *cache_lookup_create(struct ngnfs_cache *cache, uint64_t blkno);
void cache_remove_block(struct ngnfs_cache *cache, struct cache_block *block);
int cache_block_set_data(struct ngnfs_cache *cache, struct cache_block *block, const void *data);
void cache_block_drop_data(struct ngnfs_cache *cache, struct cache_block *block);
void cache_touch(struct ngnfs_cache *cache, struct cache_block *block);
pthread_cond_t *cache_waitq(struct ngnfs_cache *cache, uint64_t blkno);
void cache_wake_block(struct ngnfs_cache *cache, uint64_t blkno);
void cache_block_unlocked(struct ngnfs_cache *cache, struct cache_block *block,
			  struct cache_action **actions);
void cache_kick_flusher(struct ngnfs_cache *cache);
/* After a commit into set: wake the flusher only if its timer would be late for it. */
void cache_kick_flusher_for(struct ngnfs_cache *cache, const struct dirty_set *set);
/* Reclaim clean blocks until extra more fit; ask the flusher if that is not enough. */
void cache_make_room(struct ngnfs_cache *cache, size_t extra, struct cache_action **actions);
/* Lock held: sends RELEASE now (see cache.c for why not later). */
void cache_send_release(struct ngnfs_cache *cache, uint64_t blkno, uint8_t access);
bool cache_add_action(struct cache_action **actions, enum cache_action_type type, uint64_t blkno,
		      uint8_t access, uint64_t version);
void cache_add_write_action(struct cache_action **actions, struct dirty_set *set);
/* Without the lock: sends the actions and frees them. */
void cache_run_actions(struct ngnfs_cache *cache, struct cache_action *actions);
/* Send a GET (lock held on entry and exit, dropped around the call). */
void cache_start_get(struct ngnfs_cache *cache, struct cache_block *block, uint8_t access);
void cache_record_error(struct ngnfs_cache *cache, int error);
/* Lock held; dropped around ALLOC.  Fills the device's reservation pool. */
void cache_refill_pool(struct ngnfs_cache *cache, uint16_t device);
/*
 * The device a new block for device comes from: device itself, or when
 * its blockd said it is full, the next one that is not (see cache.c).
 * Lock held.
 */
uint16_t cache_alloc_device(struct ngnfs_cache *cache, uint16_t device);
/*
 * What an operation hears when it needs device and got error: -EAGAIN for
 * -ENOTCONN while the device's session has been lost for less than the
 * reclaim timeout (see cache.c), error otherwise.
 */
int cache_unreachable_error(struct ngnfs_cache *cache, uint16_t device, int error);
void cache_pool_push(struct ngnfs_cache *cache, uint16_t device, const struct pool_block *block);
const char *cache_access_name(uint8_t access);

/* dirty.c */
struct dirty_set *dirty_set_create(struct ngnfs_cache *cache);
void dirty_set_add_block(struct ngnfs_cache *cache, struct dirty_set *set,
			 struct cache_block *block);
void dirty_set_remove_block(struct ngnfs_cache *cache, struct cache_block *block);
int dirty_set_add_free(struct dirty_set *set, uint64_t blkno);
void dirty_set_remove_free(struct dirty_set *set, uint64_t blkno);
/* Moves everything of from into into and frees from; returns into. */
struct dirty_set *dirty_set_merge(struct ngnfs_cache *cache, struct dirty_set *into,
				  struct dirty_set *from);
bool dirty_set_write_locked(const struct dirty_set *set);
/* A block of the set is still carried by an earlier set's write in flight. */
bool dirty_set_after_write(const struct dirty_set *set);
/* A block of the set waits for its grant after a session reset. */
bool dirty_set_regranting(const struct dirty_set *set);
void dirty_set_add_waiter(struct dirty_set *set, struct stable_waiter *waiter);
void dirty_set_finish_waiters(struct dirty_set *set, int status);
void dirty_set_free(struct ngnfs_cache *cache, struct dirty_set *set);
/*
 * Start writing the set if no block is write-locked (else mark it
 * flush_wanted: the unlock starts it).  Returns true if a write action
 * was queued.
 */
bool dirty_set_try_write(struct ngnfs_cache *cache, struct dirty_set *set, bool release,
			 uint8_t release_access, bool flusher_write, struct cache_action **actions);

#endif
