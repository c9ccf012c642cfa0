// SPDX-License-Identifier: LGPL-3.0-or-later
/*
 * Cache invalidation up-calls: what another gateway changed must drop out
 * of this gateway's MDCACHE.
 *
 * libcore tells us (ngnfs_set_invalidate) when a block we had cached is
 * revoked because another client is about to change it.  It calls us on
 * its network I/O thread, which must never wait for an operation thread,
 * with its cache lock held, while MDCACHE's up-call may drop the last
 * reference of an entry and so call back into this FSAL and libcore.  So
 * the callback only records the inode in a table under a mutex that
 * nobody holds for longer than a table insert or swap, and signals; our
 * own thread swaps the table out and delivers up_ops->invalidate for each
 * inode, outside any lock of ours.
 *
 * The callback returns a ticket, the number the table will have when our
 * thread takes it, and the thread reports each table delivered
 * (ngnfs_invalidations_delivered): libcore holds the RELEASE of the
 * revoked block back until then, so the other client's change, and its
 * reply, come only after MDCACHE stopped trusting what it had cached.
 * libcore waits half a second at most (a thread stuck in MDCACHE costs
 * the other client that delay, not a deadlock).  Before MDCACHE accepts
 * up-calls (up_ready_wait) and for an inode we never handed out there is
 * nothing to wait for: the ticket is 0.
 *
 * The table coalesces: an inode revoked many times before the thread runs
 * is delivered once (a directory receiving a burst of creates from
 * another gateway costs one invalidation per burst, not per entry).  It
 * grows as it fills, so a burst is never cut short: a session reset
 * invalidates every inode the gateway held on that device at once, tens of
 * thousands when MDCACHE is large.  Its size needs no bound of its own,
 * since it holds only inodes we handed to ganesha (tracked, below), and
 * MDCACHE bounds those; a delivered table that grew goes back to its first
 * size.  Only when memory runs out is an invalidation counted and dropped,
 * and the drop is logged with the count: MDCACHE's attribute expiry is then
 * the only bound on staleness for that inode.
 *
 * MDCACHE keys objects by our 16-byte handle (inode number plus
 * generation), but for blocks other than the inode itself (directory
 * btree blocks, file data) libcore only knows the owning inode's number.
 * So we track the generation of every inode we have handed to ganesha, by
 * reference count (objects are allocated per lookup and released by
 * MDCACHE), in a chained hash that doubles as it fills, since MDCACHE may
 * hold millions; an invalidation for an inode we never handed out is
 * dropped without calling MDCACHE, since it cannot be cached.
 *
 * Every delivered invalidation logs a DEBUG line of component FSAL_UP
 * ("NGNFS up: invalidated inode ..."), which the coherence test counts.
 *
 * Reads a revocation overtakes.  MDCACHE stores what our calls return
 * after they return, and its up-call clears trust bits without taking the
 * entry's locks: attributes read from libcore before another client's
 * revocation, but stored by MDCACHE after the invalidation was delivered,
 * would stay trusted until Attr_Expiration_Time.  Two guards: the first
 * closes the window while libcore reads, the second bounds the one after
 * our return:
 *
 *  - every callback bumps a revocation sequence and stamps the inode's
 *    slot with it (before anything else, tracked or not).  A call that
 *    hands attributes to ganesha takes the sequence before its libcore
 *    read and, if the inode's slot was stamped since, reads again
 *    (ngnfs_fsal_attr_overtaken): a revocation that lands while libcore is
 *    reading, the window that lasts a round trip, is never stored stale.
 *  - a call marks the inodes it hands out (attributes, or a directory's
 *    entries) as in hand from before its read until it returns
 *    (ngnfs_fsal_hand_begin / _end).  A delivery that finds an inode in
 *    hand, or handed out less than NGNFS_UP_REDO_WINDOW_MS ago, delivers
 *    it again once the calls are done and the window has passed: what
 *    MDCACHE stored between our return and its update, the window of a
 *    few instructions unless the thread is preempted, is cleared at most
 *    that long after the call returned.  A slot that stays in hand (a
 *    directory looked up without pause) is delivered again after
 *    NGNFS_UP_REDO_LIMIT_MS anyway.  Slots are shared by hash: a collision
 *    costs a re-read or a second invalidation, never a missed one.
 *
 * NGNFS_FSAL_TEST_UP_DELAY_MS (environment, tests only) makes the thread
 * wait that long before delivering each table, so a test can show that
 * the other gateway's change waits for the delivery.
 * NGNFS_FSAL_TEST_GETATTR_READ_DELAY_MS and _RETURN_DELAY_MS (read here,
 * applied in handle.c) stretch the two windows above inside getattrs.
 *
 * XXX:
 *  - an invalidation dropped for want of memory is not made up for by
 *    flushing MDCACHE (ganesha 4.3 gives an FSAL no call to do that).
 *  - the second guard bounds, it does not close, the window after our
 *    return: a client of this gateway may be answered from attributes or
 *    entries stored in that window until the second delivery, up to
 *    NGNFS_UP_REDO_WINDOW_MS after our call returned.  Closing it needs
 *    ganesha to take the entry's attr_lock in its invalidate up-call.
 */

#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fsal.h"
#include "fsal_up.h"
#include "FSAL/fsal_commonlib.h"

#include "internal.h"

/* pending inodes: a table's first size (power of two); it doubles at 3/4 */
#define NGNFS_UP_TABLE_FIRST_SLOTS 1024
/* 2^27 slots of 32 bytes: more inodes than any MDCACHE holds */
#define NGNFS_UP_TABLE_MAX_SLOTS (1U << 27)
/*
 * generation tracking: buckets of a chained hash (a power of two), doubled
 * when it holds more inodes than buckets, so that chains stay short
 * however large a site makes MDCACHE
 */
#define NGNFS_UP_TRACK_FIRST_BUCKETS 4096
#define NGNFS_UP_TRACK_MAX_BUCKETS   (1U << 26)
/* reads a revocation overtakes: slots shared by hash (power of two) */
#define NGNFS_UP_HAND_SLOTS 4096
/* how long after a call returned MDCACHE may still be storing its result */
#define NGNFS_UP_REDO_WINDOW_MS 50
/* a slot in hand that long is delivered again anyway */
#define NGNFS_UP_REDO_LIMIT_MS 5000

struct ngnfs_fsal_up_pending {
	uint64_t ino; /* 0: empty slot */
	uint64_t generation;
	bool dir_changed;
	uint64_t redo_since_ns; /* redo table: when the first delivery was */
};

/* One slot of the reads in hand; every field is accessed atomically. */
struct ngnfs_fsal_up_hand {
	uint64_t revoked_sequence; /* the sequence when a revocation last hit */
	uint64_t in_hand;	   /* calls between their read and their return */
	uint64_t returned_ns;	   /* CLOCK_MONOTONIC of the last such return */
};

/* Open addressing by inode number, linear probing; never holds ino 0. */
struct ngnfs_fsal_up_table {
	unsigned int count;
	unsigned int capacity; /* a power of two */
	struct ngnfs_fsal_up_pending *slots;
};

struct ngnfs_fsal_up_tracked {
	struct ngnfs_fsal_up_tracked *next;
	uint64_t ino;
	uint64_t generation;
	uint64_t references;
};

struct ngnfs_fsal_up_queue {
	struct ngnfs_fsal_export *export;
	pthread_t thread;
	bool thread_started;

	/* protects pending, stopping, dropped; held only for short work */
	pthread_mutex_t mutex;
	pthread_cond_t wake;
	struct ngnfs_fsal_up_table *pending;
	struct ngnfs_fsal_up_table *spare;
	struct ngnfs_fsal_up_table tables[2]; /* what pending and spare point to */
	bool stopping;
	bool ready;	/* MDCACHE takes up-calls: tickets are worth waiting for */
	uint64_t taken; /* tables our thread has taken: the last ticket it holds */
	uint64_t dropped;

	/* protects tracked, track_buckets, track_count */
	pthread_mutex_t track_mutex;
	struct ngnfs_fsal_up_tracked **tracked;
	unsigned int track_buckets;
	uint64_t track_count;

	/* reads a revocation overtakes (atomics, no lock) */
	uint64_t revocation_sequence;
	struct ngnfs_fsal_up_hand hands[NGNFS_UP_HAND_SLOTS];

	/* only the thread touches these */
	uint64_t received;
	uint64_t delivered;
	uint64_t dropped_logged;
	/* delivered while a call had them in hand: to deliver again */
	struct ngnfs_fsal_up_table redo;
	struct ngnfs_fsal_up_table redo_kept; /* scratch of ngnfs_fsal_up_redo */
	uint64_t redo_due_ns;
	uint64_t redelivered;
	uint64_t redo_dropped;
	unsigned int largest_table; /* the most inodes delivered in one go */
	unsigned int test_delay_ms;
};

static unsigned int ngnfs_fsal_up_hash(uint64_t ino)
{
	return (unsigned int)((ino * 0x9e3779b97f4a7c15ULL) >> 32);
}

static uint64_t ngnfs_fsal_up_now_ns(void)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (uint64_t)now.tv_sec * 1000000000ULL + (uint64_t)now.tv_nsec;
}

/*
 * Tables allocate with calloc, not gsh_calloc, which aborts the daemon: a
 * table that cannot grow costs one invalidation, counted and logged.
 */
static int ngnfs_fsal_up_table_init(struct ngnfs_fsal_up_table *table, unsigned int capacity)
{
	table->slots = calloc(capacity, sizeof(*table->slots));
	if (table->slots == NULL)
		return -ENOMEM;
	table->capacity = capacity;
	table->count = 0;
	return 0;
}

static void ngnfs_fsal_up_table_destroy(struct ngnfs_fsal_up_table *table)
{
	free(table->slots);
	table->slots = NULL;
	table->capacity = 0;
	table->count = 0;
}

/* The slot of ino, or the empty slot where it would go. */
static struct ngnfs_fsal_up_pending *ngnfs_fsal_up_table_probe(struct ngnfs_fsal_up_table *table,
							       uint64_t ino)
{
	unsigned int i = ngnfs_fsal_up_hash(ino) & (table->capacity - 1);

	while (table->slots[i].ino != ino && table->slots[i].ino != 0)
		i = (i + 1) & (table->capacity - 1);
	return &table->slots[i];
}

static int ngnfs_fsal_up_table_grow(struct ngnfs_fsal_up_table *table)
{
	struct ngnfs_fsal_up_table bigger;
	unsigned int i;

	if (table->capacity >= NGNFS_UP_TABLE_MAX_SLOTS)
		return -ENOSPC;
	if (ngnfs_fsal_up_table_init(&bigger, table->capacity * 2) < 0)
		return -ENOMEM;
	for (i = 0; i < table->capacity; i++)
		if (table->slots[i].ino != 0)
			*ngnfs_fsal_up_table_probe(&bigger, table->slots[i].ino) = table->slots[i];
	bigger.count = table->count;
	free(table->slots);
	*table = bigger;
	return 0;
}

/*
 * The slot of ino, added (zeroed but for ino, *added set) if it was not
 * there; NULL when the table is at three quarters and cannot grow.
 */
static struct ngnfs_fsal_up_pending *ngnfs_fsal_up_table_slot(struct ngnfs_fsal_up_table *table,
							      uint64_t ino, bool *added)
{
	struct ngnfs_fsal_up_pending *slot = ngnfs_fsal_up_table_probe(table, ino);

	*added = false;
	if (slot->ino == ino)
		return slot;
	if (table->count + 1 > table->capacity / 4 * 3) {
		if (ngnfs_fsal_up_table_grow(table) < 0)
			return NULL;
		slot = ngnfs_fsal_up_table_probe(table, ino);
	}
	memset(slot, 0, sizeof(*slot));
	slot->ino = ino;
	table->count++;
	*added = true;
	return slot;
}

/* Empties a table; one that grew goes back to its first size. */
static void ngnfs_fsal_up_table_clear(struct ngnfs_fsal_up_table *table)
{
	struct ngnfs_fsal_up_table first;

	if (table->capacity > NGNFS_UP_TABLE_FIRST_SLOTS &&
	    ngnfs_fsal_up_table_init(&first, NGNFS_UP_TABLE_FIRST_SLOTS) == 0) {
		free(table->slots);
		*table = first;
		return;
	}
	memset(table->slots, 0, (size_t)table->capacity * sizeof(*table->slots));
	table->count = 0;
}

static struct ngnfs_fsal_up_hand *ngnfs_fsal_up_hand_of(struct ngnfs_fsal_up_queue *queue,
							uint64_t ino)
{
	return &queue->hands[ngnfs_fsal_up_hash(ino) & (NGNFS_UP_HAND_SLOTS - 1)];
}

uint64_t ngnfs_fsal_attr_sequence(struct ngnfs_fsal_export *export)
{
	struct ngnfs_fsal_up_queue *queue = export->up_queue;

	if (queue == NULL)
		return 0;
	return __atomic_load_n(&queue->revocation_sequence, __ATOMIC_SEQ_CST);
}

bool ngnfs_fsal_attr_overtaken(struct ngnfs_fsal_export *export, uint64_t ino, uint64_t sequence)
{
	struct ngnfs_fsal_up_queue *queue = export->up_queue;

	if (queue == NULL)
		return false;
	return __atomic_load_n(&ngnfs_fsal_up_hand_of(queue, ino)->revoked_sequence,
			       __ATOMIC_SEQ_CST) > sequence;
}

void ngnfs_fsal_hand_begin(struct ngnfs_fsal_export *export, uint64_t ino)
{
	struct ngnfs_fsal_up_queue *queue = export->up_queue;

	if (queue != NULL)
		__atomic_add_fetch(&ngnfs_fsal_up_hand_of(queue, ino)->in_hand, 1,
				   __ATOMIC_SEQ_CST);
}

void ngnfs_fsal_hand_end(struct ngnfs_fsal_export *export, uint64_t ino)
{
	struct ngnfs_fsal_up_queue *queue = export->up_queue;
	struct ngnfs_fsal_up_hand *hand;

	if (queue == NULL)
		return;
	hand = ngnfs_fsal_up_hand_of(queue, ino);
	/* stamped before the count drops: the thread sees one or the other */
	__atomic_store_n(&hand->returned_ns, ngnfs_fsal_up_now_ns(), __ATOMIC_SEQ_CST);
	__atomic_sub_fetch(&hand->in_hand, 1, __ATOMIC_SEQ_CST);
}

/* Whether MDCACHE may store what a call read of ino after a delivery now. */
static bool ngnfs_fsal_up_in_hand(struct ngnfs_fsal_up_queue *queue, uint64_t ino, uint64_t now_ns)
{
	struct ngnfs_fsal_up_hand *hand = ngnfs_fsal_up_hand_of(queue, ino);
	uint64_t returned_ns;

	if (__atomic_load_n(&hand->in_hand, __ATOMIC_SEQ_CST) != 0)
		return true;
	returned_ns = __atomic_load_n(&hand->returned_ns, __ATOMIC_SEQ_CST);
	return returned_ns != 0 && now_ns < returned_ns + NGNFS_UP_REDO_WINDOW_MS * 1000000ULL;
}

static bool ngnfs_fsal_up_is_tracked(struct ngnfs_fsal_up_queue *queue, uint64_t ino);

/*
 * libcore's callback; runs on its I/O thread (an operation thread for an
 * eviction) with its cache lock held: never waits.  Returns the ticket.
 */
static uint64_t ngnfs_fsal_up_invalidated(void *arg, const struct ngnfs_handle *handle,
					  bool dir_changed)
{
	struct ngnfs_fsal_up_queue *queue = arg;
	struct ngnfs_fsal_up_pending *slot;
	uint64_t ticket, sequence;
	bool added;

	/* Before the tracked check: a lookup may be reading it right now. */
	if (handle->ino != 0) {
		sequence = __atomic_add_fetch(&queue->revocation_sequence, 1, __ATOMIC_SEQ_CST);
		__atomic_store_n(&ngnfs_fsal_up_hand_of(queue, handle->ino)->revoked_sequence,
				 sequence, __ATOMIC_SEQ_CST);
	}
	/* Never handed to ganesha: MDCACHE cannot have it. */
	if (handle->ino == 0 || !ngnfs_fsal_up_is_tracked(queue, handle->ino))
		return 0;
	pthread_mutex_lock(&queue->mutex);
	slot = ngnfs_fsal_up_table_slot(queue->pending, handle->ino, &added);
	if (slot == NULL) {
		queue->dropped++;
		pthread_mutex_unlock(&queue->mutex);
		return 0;
	}
	if (handle->generation != 0)
		slot->generation = handle->generation;
	slot->dir_changed |= dir_changed;
	ticket = queue->ready ? queue->taken + 1 : 0;
	pthread_cond_signal(&queue->wake);
	pthread_mutex_unlock(&queue->mutex);
	return ticket;
}

/* The chain ino hashes to; track_mutex held. */
static struct ngnfs_fsal_up_tracked **ngnfs_fsal_up_track_bucket(struct ngnfs_fsal_up_queue *queue,
								 uint64_t ino)
{
	return &queue->tracked[ngnfs_fsal_up_hash(ino) & (queue->track_buckets - 1)];
}

/*
 * Twice the buckets, every inode rehashed: amortised over the inodes that
 * filled the table, and under track_mutex for a few milliseconds at most
 * (the I/O thread's callback waits that long once per doubling).  Without
 * memory the chains just grow longer: slower, still correct.
 */
static void ngnfs_fsal_up_track_grow(struct ngnfs_fsal_up_queue *queue)
{
	unsigned int buckets = queue->track_buckets * 2;
	struct ngnfs_fsal_up_tracked **table;

	if (buckets > NGNFS_UP_TRACK_MAX_BUCKETS)
		return;
	table = calloc(buckets, sizeof(*table));
	if (table == NULL)
		return;
	for (unsigned int i = 0; i < queue->track_buckets; i++) {
		struct ngnfs_fsal_up_tracked *tracked;

		while ((tracked = queue->tracked[i]) != NULL) {
			unsigned int bucket = ngnfs_fsal_up_hash(tracked->ino) & (buckets - 1);

			queue->tracked[i] = tracked->next;
			tracked->next = table[bucket];
			table[bucket] = tracked;
		}
	}
	free(queue->tracked);
	queue->tracked = table;
	queue->track_buckets = buckets;
	LogDebug(COMPONENT_FSAL_UP, "NGNFS up: %" PRIu64 " inodes tracked: %u buckets now",
		 queue->track_count, buckets);
}

void ngnfs_fsal_up_track(struct ngnfs_fsal_export *export, const struct ngnfs_handle *handle)
{
	struct ngnfs_fsal_up_queue *queue = export->up_queue;
	struct ngnfs_fsal_up_tracked **bucket;
	struct ngnfs_fsal_up_tracked *tracked;

	if (queue == NULL)
		return;
	pthread_mutex_lock(&queue->track_mutex);
	bucket = ngnfs_fsal_up_track_bucket(queue, handle->ino);
	for (tracked = *bucket; tracked != NULL; tracked = tracked->next)
		if (tracked->ino == handle->ino && tracked->generation == handle->generation)
			break;
	if (tracked == NULL) {
		tracked = gsh_calloc(1, sizeof(*tracked));
		tracked->ino = handle->ino;
		tracked->generation = handle->generation;
		tracked->next = *bucket;
		*bucket = tracked;
		if (++queue->track_count > queue->track_buckets)
			ngnfs_fsal_up_track_grow(queue);
	}
	tracked->references++;
	pthread_mutex_unlock(&queue->track_mutex);
}

void ngnfs_fsal_up_untrack(struct ngnfs_fsal_export *export, const struct ngnfs_handle *handle)
{
	struct ngnfs_fsal_up_queue *queue = export->up_queue;
	struct ngnfs_fsal_up_tracked **link;
	struct ngnfs_fsal_up_tracked *tracked;

	if (queue == NULL)
		return;
	pthread_mutex_lock(&queue->track_mutex);
	for (link = ngnfs_fsal_up_track_bucket(queue, handle->ino); (tracked = *link) != NULL;
	     link = &tracked->next) {
		if (tracked->ino == handle->ino && tracked->generation == handle->generation) {
			if (--tracked->references == 0) {
				*link = tracked->next;
				gsh_free(tracked);
				queue->track_count--;
			}
			break;
		}
	}
	pthread_mutex_unlock(&queue->track_mutex);
}

static bool ngnfs_fsal_up_is_tracked(struct ngnfs_fsal_up_queue *queue, uint64_t ino)
{
	struct ngnfs_fsal_up_tracked *tracked;

	pthread_mutex_lock(&queue->track_mutex);
	for (tracked = *ngnfs_fsal_up_track_bucket(queue, ino); tracked != NULL;
	     tracked = tracked->next)
		if (tracked->ino == ino)
			break;
	pthread_mutex_unlock(&queue->track_mutex);
	return tracked != NULL;
}

/*
 * The generations of ino that ganesha may have cached, into generations
 * (at most max); a pending entry with a known generation needs no lookup.
 */
static unsigned int ngnfs_fsal_up_generations(struct ngnfs_fsal_up_queue *queue, uint64_t ino,
					      uint64_t *generations, unsigned int max)
{
	struct ngnfs_fsal_up_tracked *tracked;
	unsigned int count = 0;

	pthread_mutex_lock(&queue->track_mutex);
	for (tracked = *ngnfs_fsal_up_track_bucket(queue, ino); tracked != NULL && count < max;
	     tracked = tracked->next)
		if (tracked->ino == ino)
			generations[count++] = tracked->generation;
	pthread_mutex_unlock(&queue->track_mutex);
	return count;
}

static void ngnfs_fsal_up_deliver(struct ngnfs_fsal_up_queue *queue,
				  const struct ngnfs_fsal_up_pending *pending)
{
	const struct fsal_up_vector *up_ops = queue->export->export.up_ops;
	struct ngnfs_handle handle;
	uint8_t wire[NGNFS_HANDLE_WIRE_SIZE];
	struct gsh_buffdesc key;
	uint64_t generations[4];
	unsigned int count;
	unsigned int i;
	fsal_status_t status;

	count = ngnfs_fsal_up_generations(queue, pending->ino, generations, 4);
	for (i = 0; i < count; i++) {
		if (pending->generation != 0 && generations[i] != pending->generation)
			continue;
		handle.ino = pending->ino;
		handle.generation = generations[i];
		ngnfs_handle_to_wire(&handle, wire);
		key.addr = wire;
		key.len = sizeof(wire);
		status = up_ops->invalidate(up_ops, &key, FSAL_UP_INVALIDATE_CACHE);
		if (FSAL_IS_ERROR(status) && status.major != ERR_FSAL_NOENT) {
			LogMajor(COMPONENT_FSAL_UP,
				 "NGNFS up: invalidating inode %" PRIu64 ".%" PRIu64 " failed: %s",
				 handle.ino, handle.generation, msg_fsal_err(status.major));
			continue;
		}
		queue->delivered++;
		LogDebug(COMPONENT_FSAL_UP,
			 "NGNFS up: invalidated inode %" PRIu64 ".%" PRIu64 "%s (export %u)",
			 handle.ino, handle.generation, pending->dir_changed ? " (entries)" : "",
			 queue->export->export.export_id);
	}
}

/*
 * Remembers a delivered inode that a call still had in hand (into table:
 * the redo table, or the kept entries of a redo pass).
 */
static void ngnfs_fsal_up_redo_add(struct ngnfs_fsal_up_queue *queue,
				   struct ngnfs_fsal_up_table *table,
				   const struct ngnfs_fsal_up_pending *pending, uint64_t since_ns)
{
	struct ngnfs_fsal_up_pending *slot;
	bool added;

	slot = ngnfs_fsal_up_table_slot(table, pending->ino, &added);
	if (slot == NULL) {
		queue->redo_dropped++;
		return;
	}
	if (added) {
		*slot = *pending;
		slot->redo_since_ns = since_ns;
		return;
	}
	if (slot->generation != pending->generation)
		slot->generation = 0; /* every generation we track */
	slot->dir_changed |= pending->dir_changed;
}

/*
 * Delivers again what no call has in hand any more (or has had in hand
 * for NGNFS_UP_REDO_LIMIT_MS); what is still in hand waits for the next
 * round.  Runs on the thread without the queue's mutex.
 */
static void ngnfs_fsal_up_redo(struct ngnfs_fsal_up_queue *queue)
{
	struct ngnfs_fsal_up_table swap;
	struct ngnfs_fsal_up_pending *slot;
	uint64_t now_ns = ngnfs_fsal_up_now_ns();
	unsigned int i;

	for (i = 0; i < queue->redo.capacity; i++) {
		slot = &queue->redo.slots[i];
		if (slot->ino == 0)
			continue;
		if (ngnfs_fsal_up_in_hand(queue, slot->ino, now_ns) &&
		    now_ns < slot->redo_since_ns + NGNFS_UP_REDO_LIMIT_MS * 1000000ULL) {
			ngnfs_fsal_up_redo_add(queue, &queue->redo_kept, slot, slot->redo_since_ns);
			continue;
		}
		queue->redelivered++;
		LogDebug(COMPONENT_FSAL_UP,
			 "NGNFS up: delivering inode %" PRIu64
			 " again (a call had it in hand at the first delivery)",
			 slot->ino);
		ngnfs_fsal_up_deliver(queue, slot);
	}
	/* what stays in hand is the redo table now; the old one is scratch */
	ngnfs_fsal_up_table_clear(&queue->redo);
	swap = queue->redo;
	queue->redo = queue->redo_kept;
	queue->redo_kept = swap;
	queue->redo_due_ns = now_ns + NGNFS_UP_REDO_WINDOW_MS * 1000000ULL;
}

static void *ngnfs_fsal_up_thread(void *arg)
{
	struct ngnfs_fsal_up_queue *queue = arg;
	struct ngnfs_fsal_up_table *table;
	struct timespec deadline;
	uint64_t dropped, ticket, now_ns;
	unsigned int i;

	/* MDCACHE takes up-calls only once the export is fully set up */
	up_ready_wait((struct fsal_up_vector *)queue->export->export.up_ops);

	pthread_mutex_lock(&queue->mutex);
	queue->ready = true;
	for (;;) {
		while (!queue->stopping && queue->pending->count == 0 &&
		       queue->dropped == queue->dropped_logged) {
			if (queue->redo.count == 0) {
				pthread_cond_wait(&queue->wake, &queue->mutex);
				continue;
			}
			if (ngnfs_fsal_up_now_ns() >= queue->redo_due_ns)
				break;
			deadline.tv_sec = (time_t)(queue->redo_due_ns / 1000000000ULL);
			deadline.tv_nsec = (long)(queue->redo_due_ns % 1000000000ULL);
			pthread_cond_timedwait(&queue->wake, &queue->mutex, &deadline);
		}
		if (queue->stopping)
			break;
		if (queue->pending->count == 0 && queue->dropped == queue->dropped_logged) {
			/* only a redo is due */
			pthread_mutex_unlock(&queue->mutex);
			ngnfs_fsal_up_redo(queue);
			pthread_mutex_lock(&queue->mutex);
			continue;
		}
		table = queue->pending;
		queue->pending = queue->spare;
		queue->spare = NULL;
		dropped = queue->dropped;
		ticket = ++queue->taken;
		pthread_mutex_unlock(&queue->mutex);

		if (queue->test_delay_ms)
			usleep(queue->test_delay_ms * 1000);

		if (dropped != queue->dropped_logged) {
			LogWarn(COMPONENT_FSAL_UP,
				"NGNFS up: export %u dropped %" PRIu64
				" invalidations (out of memory for the table); those objects "
				"stay cached until their attributes expire",
				queue->export->export.export_id, dropped - queue->dropped_logged);
			queue->dropped_logged = dropped;
		}
		for (i = 0; i < table->capacity; i++) {
			if (table->slots[i].ino == 0)
				continue;
			queue->received++;
			ngnfs_fsal_up_deliver(queue, &table->slots[i]);
			/* after the delivery: a call that took its hand before it is seen */
			now_ns = ngnfs_fsal_up_now_ns();
			if (ngnfs_fsal_up_in_hand(queue, table->slots[i].ino, now_ns)) {
				if (queue->redo.count == 0)
					queue->redo_due_ns =
					    now_ns + NGNFS_UP_REDO_WINDOW_MS * 1000000ULL;
				ngnfs_fsal_up_redo_add(queue, &queue->redo, &table->slots[i],
						       now_ns);
			}
		}
		if (table->count > queue->largest_table)
			queue->largest_table = table->count;
		if (table->capacity > NGNFS_UP_TABLE_FIRST_SLOTS)
			LogDebug(COMPONENT_FSAL_UP,
				 "NGNFS up: delivered %u revoked inodes in one go (the table grew "
				 "to %u slots)",
				 table->count, table->capacity);
		ngnfs_fsal_up_table_clear(table);
		/* MDCACHE no longer trusts these: the other client may go on. */
		ngnfs_invalidations_delivered(queue->export->fs, ticket);
		if (queue->redo.count > 0 && ngnfs_fsal_up_now_ns() >= queue->redo_due_ns)
			ngnfs_fsal_up_redo(queue);

		pthread_mutex_lock(&queue->mutex);
		queue->spare = table;
	}
	pthread_mutex_unlock(&queue->mutex);
	return NULL;
}

/* A getattrs delay from the environment (tests only), at most 10 s. */
static unsigned int ngnfs_fsal_up_test_delay(struct ngnfs_fsal_export *export, const char *variable,
					     const char *where)
{
	const char *text = getenv(variable);
	unsigned long delay_ms;

	if (text == NULL)
		return 0;
	delay_ms = strtoul(text, NULL, 10);
	if (delay_ms > 10000)
		delay_ms = 10000;
	LogWarn(COMPONENT_FSAL,
		"NGNFS: export %u delays every getattrs by %lu ms %s (%s, for tests)",
		export->export.export_id, delay_ms, where, variable);
	return (unsigned int)delay_ms;
}

static void ngnfs_fsal_up_free_tables(struct ngnfs_fsal_up_queue *queue)
{
	ngnfs_fsal_up_table_destroy(&queue->tables[0]);
	ngnfs_fsal_up_table_destroy(&queue->tables[1]);
	ngnfs_fsal_up_table_destroy(&queue->redo);
	ngnfs_fsal_up_table_destroy(&queue->redo_kept);
	free(queue->tracked);
	queue->tracked = NULL;
	queue->track_buckets = 0;
}

int ngnfs_fsal_up_start(struct ngnfs_fsal_export *export)
{
	struct ngnfs_fsal_up_queue *queue;
	pthread_condattr_t condattr;
	const char *test_delay;
	int ret;

	queue = gsh_calloc(1, sizeof(*queue));
	queue->export = export;
	test_delay = getenv("NGNFS_FSAL_TEST_UP_DELAY_MS");
	if (test_delay != NULL) {
		queue->test_delay_ms = (unsigned int)strtoul(test_delay, NULL, 10);
		if (queue->test_delay_ms > 10000)
			queue->test_delay_ms = 10000;
		LogWarn(COMPONENT_FSAL_UP,
			"NGNFS up: export %u delays each invalidation delivery by %u ms "
			"(NGNFS_FSAL_TEST_UP_DELAY_MS, for tests)",
			export->export.export_id, queue->test_delay_ms);
	}
	export->test_getattr_read_delay_ms =
	    ngnfs_fsal_up_test_delay(export, "NGNFS_FSAL_TEST_GETATTR_READ_DELAY_MS",
				     "between its libcore read and the overtaken check");
	export->test_getattr_return_delay_ms =
	    ngnfs_fsal_up_test_delay(export, "NGNFS_FSAL_TEST_GETATTR_RETURN_DELAY_MS",
				     "between the overtaken check and its return");
	if (ngnfs_fsal_up_table_init(&queue->tables[0], NGNFS_UP_TABLE_FIRST_SLOTS) < 0 ||
	    ngnfs_fsal_up_table_init(&queue->tables[1], NGNFS_UP_TABLE_FIRST_SLOTS) < 0 ||
	    ngnfs_fsal_up_table_init(&queue->redo, NGNFS_UP_TABLE_FIRST_SLOTS) < 0 ||
	    ngnfs_fsal_up_table_init(&queue->redo_kept, NGNFS_UP_TABLE_FIRST_SLOTS) < 0 ||
	    (queue->tracked = calloc(NGNFS_UP_TRACK_FIRST_BUCKETS, sizeof(*queue->tracked))) ==
		NULL) {
		LogCrit(COMPONENT_FSAL_UP, "NGNFS up: export %u: no memory for its tables",
			export->export.export_id);
		ngnfs_fsal_up_free_tables(queue);
		gsh_free(queue);
		return -ENOMEM;
	}
	queue->track_buckets = NGNFS_UP_TRACK_FIRST_BUCKETS;
	queue->pending = &queue->tables[0];
	queue->spare = &queue->tables[1];
	pthread_mutex_init(&queue->mutex, NULL);
	pthread_mutex_init(&queue->track_mutex, NULL);
	/* the redo deadline is CLOCK_MONOTONIC, like the stamps of the hands */
	pthread_condattr_init(&condattr);
	pthread_condattr_setclock(&condattr, CLOCK_MONOTONIC);
	pthread_cond_init(&queue->wake, &condattr);
	pthread_condattr_destroy(&condattr);
	export->up_queue = queue;

	ret = pthread_create(&queue->thread, NULL, ngnfs_fsal_up_thread, queue);
	if (ret != 0) {
		LogCrit(COMPONENT_FSAL_UP, "NGNFS up: export %u: cannot start the thread: %s",
			export->export.export_id, strerror(ret));
		export->up_queue = NULL;
		ngnfs_fsal_up_free_tables(queue);
		gsh_free(queue);
		return -ret;
	}
	queue->thread_started = true;
	ngnfs_set_invalidate(export->fs, ngnfs_fsal_up_invalidated, queue);
	return 0;
}

/*
 * Stops delivering.  Call before ngnfs_unmount; the queue itself stays
 * until ngnfs_fsal_up_free (after the unmount), because a libcore I/O
 * thread may still be inside the callback until then.
 */
void ngnfs_fsal_up_stop(struct ngnfs_fsal_export *export)
{
	struct ngnfs_fsal_up_queue *queue = export->up_queue;

	if (queue == NULL || !queue->thread_started)
		return;
	ngnfs_set_invalidate(export->fs, NULL, NULL);
	pthread_mutex_lock(&queue->mutex);
	queue->stopping = true;
	pthread_cond_signal(&queue->wake);
	pthread_mutex_unlock(&queue->mutex);
	up_ready_cancel((struct fsal_up_vector *)export->export.up_ops);
	pthread_join(queue->thread, NULL);
	queue->thread_started = false;
	/* Nothing more is delivered: no RELEASE waits for us any longer. */
	ngnfs_invalidations_delivered(export->fs, UINT64_MAX);
	LogEvent(COMPONENT_FSAL_UP,
		 "NGNFS up: export %u delivered %" PRIu64 " invalidations for %" PRIu64
		 " revoked inodes (at most %u in one go) and %" PRIu64 " second deliveries (a "
		 "call had the inode in hand), dropped %" PRIu64 " (and %" PRIu64
		 " second deliveries)",
		 export->export.export_id, queue->delivered, queue->received, queue->largest_table,
		 queue->redelivered, queue->dropped, queue->redo_dropped);
}

void ngnfs_fsal_up_free(struct ngnfs_fsal_export *export)
{
	struct ngnfs_fsal_up_queue *queue = export->up_queue;
	struct ngnfs_fsal_up_tracked *tracked;
	unsigned int i;

	if (queue == NULL)
		return;
	export->up_queue = NULL;
	for (i = 0; i < queue->track_buckets; i++) {
		while ((tracked = queue->tracked[i]) != NULL) {
			queue->tracked[i] = tracked->next;
			gsh_free(tracked);
		}
	}
	pthread_mutex_destroy(&queue->mutex);
	pthread_mutex_destroy(&queue->track_mutex);
	pthread_cond_destroy(&queue->wake);
	ngnfs_fsal_up_free_tables(queue);
	gsh_free(queue);
}
