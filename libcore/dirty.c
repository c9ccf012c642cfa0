// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Dirty sets: which cached blocks must reach the servers together.
 *
 * A transaction that modifies blocks of several sets (a rename touching
 * two directories that were dirtied separately) makes them one set,
 * because its changes are only consistent if they land together.  Merging
 * is always safe (a bigger atomic write is still atomic), so the flusher
 * also merges unrelated sets to send one write where it would have sent
 * many: that is what makes group commit cheap.  Sets are therefore never
 * split, only merged and written.
 *
 * A set being written is frozen: nothing is added to it and the bytes
 * handed to the network client stay as they are until the completion.  A
 * set can only be frozen when no block of it is write-locked (a
 * transaction's private copy would be installed into it later); a write
 * that finds a locked block marks the set flush_wanted and the
 * transaction's unlock starts it.
 *
 * Copy on write: a transaction may still modify a block of a set being
 * written (txn.c).  The block leaves the frozen set's list for the
 * transaction's (idle) set, the frozen write keeps the bytes it sends
 * (block->wb_data; the private copy becomes block->data) and
 * block->wb_set names the write.  A set holding a block some write still
 * carries is not written until that write completes (after_write), so the
 * newer set is based on the version the frozen write produced, and a
 * block is in at most one idle set.  If the frozen write fails, every set
 * holding newer changes of its blocks is dropped with it (they were made
 * on top of it); on -EBUSY nothing was applied and the frozen set is
 * merged into those sets and written again with them (cache.c).  Not
 * copied, the writer waits as before: blocks of a write that releases the
 * grant (a revocation's: the newer change would have no grant to be
 * written under) and, while the cache is full, blocks not yet copied.
 *
 * Every function here runs with cache->lock held.
 *
 * XXX:
 *  - Merging moves the smaller set's blocks one by one; fine for sets of
 *    hundreds of blocks, a union-find would do for millions.
 *  - A set larger than one WRITE frame is left to the network client to
 *    split into several STAGE frames.
 */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cache-internal.h"

struct dirty_set *dirty_set_create(struct ngnfs_cache *cache)
{
	struct dirty_set *set = calloc(1, sizeof(*set));

	if (!set)
		return NULL;
	cache_list_init(&set->blocks);
	set->cache = cache;
	set->birth_seq = ++cache->commit_seq;
	set->first_dirty_ms = cache_now_ms();
	cache_list_add_tail(&set->entry, &cache->dirty_sets);
	return set;
}

void dirty_set_add_block(struct ngnfs_cache *cache, struct dirty_set *set,
			 struct cache_block *block)
{
	if (block->set == set)
		return;
	if (block->set)
		dirty_set_remove_block(cache, block);
	block->set = set;
	block->dirty = true;
	cache_list_add_tail(&block->set_entry, &set->blocks);
	set->block_count++;
	cache->counters.dirty_blocks++;
}

void dirty_set_remove_block(struct ngnfs_cache *cache, struct cache_block *block)
{
	struct dirty_set *set = block->set;

	if (!set)
		return;
	cache_list_del_init(&block->set_entry);
	set->block_count--;
	block->set = NULL;
	block->dirty = false;
	cache->counters.dirty_blocks--;
}

int dirty_set_add_free(struct dirty_set *set, uint64_t blkno)
{
	if (set->free_count == set->free_capacity) {
		uint32_t capacity = set->free_capacity ? set->free_capacity * 2 : 8;
		uint64_t *frees = realloc(set->frees, capacity * sizeof(*frees));

		if (!frees)
			return -ENOMEM;
		set->frees = frees;
		set->free_capacity = capacity;
	}
	set->frees[set->free_count++] = blkno;
	return 0;
}

/* The free is done already (a write in doubt that was applied, cache.c). */
void dirty_set_remove_free(struct dirty_set *set, uint64_t blkno)
{
	uint32_t i;

	for (i = 0; i < set->free_count; i++) {
		if (set->frees[i] == blkno) {
			set->frees[i] = set->frees[--set->free_count];
			return;
		}
	}
}

struct dirty_set *dirty_set_merge(struct ngnfs_cache *cache, struct dirty_set *into,
				  struct dirty_set *from)
{
	struct stable_waiter **tail;
	uint32_t i;

	if (into == from)
		return into;
	if (from->block_count > into->block_count) {
		struct dirty_set *swap = into;

		into = from;
		from = swap;
	}
	while (!cache_list_empty(&from->blocks)) {
		struct cache_block *block =
		    cache_list_entry(from->blocks.next, struct cache_block, set_entry);

		dirty_set_remove_block(cache, block);
		dirty_set_add_block(cache, into, block);
	}
	for (i = 0; i < from->free_count; i++) {
		/*
		 * Out of memory here would lose a free (a leaked block, not a
		 * corruption); the set keeps the free in from's array instead.
		 */
		if (dirty_set_add_free(into, from->frees[i]) < 0) {
			ngnfs_cache_log("merging dirty sets: no memory to carry the free of block "
					"%llu, it will leak\n",
					(unsigned long long)from->frees[i]);
			cache_record_error(cache, -ENOMEM);
		}
	}
	for (tail = &into->waiters; *tail; tail = &(*tail)->next)
		;
	*tail = from->waiters;
	from->waiters = NULL;
	if (from->birth_seq < into->birth_seq)
		into->birth_seq = from->birth_seq;
	if (from->first_dirty_ms < into->first_dirty_ms)
		into->first_dirty_ms = from->first_dirty_ms;
	into->flush_wanted |= from->flush_wanted;
	into->flush_release |= from->flush_release;
	dirty_set_free(cache, from);
	return into;
}

bool dirty_set_write_locked(const struct dirty_set *set)
{
	const struct cache_list *node;

	for (node = set->blocks.next; node != &set->blocks; node = node->next) {
		const struct cache_block *block =
		    cache_list_entry(node, struct cache_block, set_entry);

		if (block->writer)
			return true;
	}
	return false;
}

bool dirty_set_after_write(const struct dirty_set *set)
{
	const struct cache_list *node;

	for (node = set->blocks.next; node != &set->blocks; node = node->next) {
		const struct cache_block *block =
		    cache_list_entry(node, struct cache_block, set_entry);

		if (block->wb_set)
			return true;
	}
	return false;
}

bool dirty_set_regranting(const struct dirty_set *set)
{
	const struct cache_list *node;

	for (node = set->blocks.next; node != &set->blocks; node = node->next) {
		const struct cache_block *block =
		    cache_list_entry(node, struct cache_block, set_entry);

		if (block->regrant)
			return true;
	}
	return false;
}

void dirty_set_add_waiter(struct dirty_set *set, struct stable_waiter *waiter)
{
	waiter->next = set->waiters;
	set->waiters = waiter;
}

void dirty_set_finish_waiters(struct dirty_set *set, int status)
{
	struct stable_waiter *waiter = set->waiters;

	set->waiters = NULL;
	while (waiter) {
		struct stable_waiter *next = waiter->next;

		waiter->status = status;
		waiter->done = true;
		pthread_cond_signal(&waiter->cond);
		waiter = next;
	}
}

void dirty_set_free(struct ngnfs_cache *cache, struct dirty_set *set)
{
	(void)cache;
	cache_list_del_init(&set->entry);
	free(set->frees);
	free(set->requests);
	free(set->written);
	free(set->written_frees);
	free(set);
}

bool dirty_set_try_write(struct ngnfs_cache *cache, struct dirty_set *set, bool release,
			 uint8_t release_access, bool flusher_write, struct cache_action **actions)
{
	struct cache_list *node;
	uint32_t i = 0;

	if (set->writing)
		return false;
	if (dirty_set_write_locked(set) || dirty_set_regranting(set)) {
		set->flush_wanted = true;
		set->flush_release |= release;
		return false;
	}
	if (dirty_set_after_write(set)) {
		/* That write's completion unlocks its blocks (cache.c) and starts this one. */
		set->flush_wanted = true;
		set->flush_release |= release;
		return false;
	}
	release |= set->flush_release;
	set->requests = calloc(set->block_count ? set->block_count : 1, sizeof(*set->requests));
	set->written = calloc(set->block_count ? set->block_count : 1, sizeof(*set->written));
	set->written_frees = NULL;
	if (set->free_count) {
		set->written_frees = malloc(set->free_count * sizeof(*set->written_frees));
		if (set->written_frees)
			memcpy(set->written_frees, set->frees,
			       set->free_count * sizeof(*set->written_frees));
	}
	if (!set->requests || !set->written || (set->free_count && !set->written_frees)) {
		free(set->requests);
		free(set->written);
		free(set->written_frees);
		set->requests = NULL;
		set->written = NULL;
		set->written_frees = NULL;
		/* The flusher tries again on its next pass. */
		set->flush_wanted = true;
		return false;
	}
	for (node = set->blocks.next; node != &set->blocks; node = node->next) {
		struct cache_block *block = cache_list_entry(node, struct cache_block, set_entry);

		block->writeback = true;
		block->wb_set = set;
		/* Whether a write in doubt carried the free is this write's business now. */
		block->doubt_free = false;
		if (block->freed)
			continue;
		set->requests[i].blkno = block->blkno;
		set->requests[i].version = block->version;
		set->requests[i].access = NGNFS_ACCESS_WRITE;
		set->requests[i].data = block->data;
		set->written[i] = block;
		i++;
	}
	set->written_count = i;
	set->written_free_count = set->free_count;
	set->writing = true;
	set->flush_wanted = false;
	set->flush_release = false;
	set->release = release;
	set->release_access = release_access;
	set->flusher_write = flusher_write;
	cache->writes_inflight++;
	cache->counters.writes_sent++;
	cache_add_write_action(actions, set);
	return true;
}
