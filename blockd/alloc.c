/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Free space of the device: a durable free list (one FREE key per free
 * block) plus a durable high-water mark, and volatile reservations; and
 * the session epochs that ALLOC hands out with them.
 *
 * ALLOC only reserves, in memory: the reservation becomes an allocation
 * in the write batch of the first WRITE of the block, and goes back to
 * the available set when the session ends, so a client that dies after
 * ALLOC leaks nothing.  Any write of a block makes it allocated, also
 * without ALLOC (mkfs writes fixed blocks): a write above the durable
 * high-water mark raises it and records every block it skips over as
 * free in the same batch, so the durable state after a restart is
 * always "below the mark and not FREE means allocated".
 *
 * The tables here describe the store as it will be once every queued
 * batch is durable; they are changed when a batch is built, not when it
 * completes, so that two batches in flight never hand out the same
 * block.
 *
 * A session's first ALLOC gives it an epoch, unique among all the
 * sessions the device ever had (a durable limit, format-store.h): a client
 * that goes away with a create only in memory leaves the block's version
 * where it was, and the epoch is what tells the next file in that block
 * from the lost one (inode generations, format-block.h).
 *
 * XXX:
 *  - A write may skip at most ALLOC_MAX_GAP never-used blocks, to bound
 *    the batch; a block far above the mark is refused (-ERANGE).
 *  - The whole free list is held in memory.
 *  - Recording a new session epoch limit (once per
 *    NGNFS_STORE_SESSION_EPOCH_BATCH allocating sessions, and at the first
 *    ALLOC after a start) is a synced write on the event loop.
 */

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "blockd.h"
#include "log.h"

#define ALLOC_MAX_GAP 65536
#define PRESENT	      ((void *)1)

static int avail_push(struct allocator *alloc, uint64_t index)
{
	if (u64map_get(&alloc->avail, index))
		return 0;
	if (alloc->avail_stack_count == alloc->avail_stack_capacity) {
		size_t capacity =
		    alloc->avail_stack_capacity ? alloc->avail_stack_capacity * 2 : 64;
		uint64_t *stack = realloc(alloc->avail_stack, capacity * sizeof(*stack));

		if (!stack)
			return -ENOMEM;
		alloc->avail_stack = stack;
		alloc->avail_stack_capacity = capacity;
	}
	alloc->avail_stack[alloc->avail_stack_count++] = index;
	return u64map_put(&alloc->avail, index, PRESENT);
}

static int load_free(const uint8_t *key, size_t key_length, const uint8_t *value,
		     size_t value_length, void *arg)
{
	struct blockd *server = arg;
	uint64_t index;
	int ret;

	(void)value;
	(void)value_length;
	if (key_length != NGNFS_STORE_BLOCK_KEY_SIZE)
		return 0;
	index = store_be64(key + 1);
	if (index < NGNFS_FIRST_ALLOC_INDEX)
		return 0; /* recorded by an older blockd; fixed metadata is never free */
	ret = u64map_put(&server->alloc.store_free, index, PRESENT);
	if (!ret)
		ret = avail_push(&server->alloc, index);
	return ret;
}

int alloc_init(struct blockd *server)
{
	struct allocator *alloc = &server->alloc;
	uint8_t prefix = NGNFS_STORE_KEY_FREE;

	u64map_init(&alloc->store_free);
	u64map_init(&alloc->avail);
	u64map_init(&alloc->reserved);
	alloc->store_hwm = server->store.hwm;
	alloc->alloc_hwm = server->store.hwm;
	/* indexes below NGNFS_FIRST_ALLOC_INDEX are fixed metadata, never handed out */
	if (alloc->alloc_hwm < NGNFS_FIRST_ALLOC_INDEX)
		alloc->alloc_hwm = NGNFS_FIRST_ALLOC_INDEX;
	/* the last run may have handed out anything below the recorded limit; 0 is none */
	alloc->next_session_epoch = server->store.session_epoch_limit;
	if (!alloc->next_session_epoch)
		alloc->next_session_epoch = 1;
	return store_walk(&server->store, &prefix, 1, load_free, server);
}

void alloc_free(struct allocator *alloc)
{
	u64map_free(&alloc->store_free);
	u64map_free(&alloc->avail);
	u64map_free(&alloc->reserved);
	free(alloc->avail_stack);
	alloc->avail_stack = NULL;
}

static bool reservable(struct blockd *server, uint64_t index)
{
	uint64_t blkno = ngnfs_blkno_make(server->store.device_index, index);

	if (index < NGNFS_FIRST_ALLOC_INDEX)
		return false;
	return !block_state_get(server, blkno, false) &&
	       !u64map_get(&server->alloc.reserved, index);
}

uint32_t alloc_reserve(struct blockd *server, struct session *session, uint32_t count,
		       uint64_t *out)
{
	struct allocator *alloc = &server->alloc;
	size_t skipped_count = 0;
	uint64_t skipped[NGNFS_MSG_MAX_BLOCKS];
	uint32_t got = 0;

	while (got < count && alloc->avail_stack_count > 0) {
		uint64_t index = alloc->avail_stack[--alloc->avail_stack_count];

		if (!u64map_get(&alloc->avail, index))
			continue; /* allocated by a write since it was pushed */
		if (!reservable(server, index)) {
			if (skipped_count < NGNFS_MSG_MAX_BLOCKS)
				skipped[skipped_count++] = index;
			u64map_remove(&alloc->avail, index);
			continue;
		}
		u64map_remove(&alloc->avail, index);
		out[got++] = index;
	}
	while (got < count && alloc->alloc_hwm < server->store.total_blocks) {
		uint64_t index = alloc->alloc_hwm++;

		if (!reservable(server, index)) {
			if (skipped_count < NGNFS_MSG_MAX_BLOCKS)
				skipped[skipped_count++] = index;
			continue;
		}
		out[got++] = index;
	}
	for (size_t i = 0; i < skipped_count; i++)
		avail_push(alloc, skipped[i]);
	for (uint32_t i = 0; i < got; i++) {
		u64map_put(&alloc->reserved, out[i], session);
		session->reserved_count++;
	}
	return got;
}

void alloc_session_gone(struct blockd *server, struct session *session)
{
	struct allocator *alloc = &server->alloc;
	size_t count;
	uint64_t *keys;

	if (!session->reserved_count)
		return;
	keys = u64map_keys(&alloc->reserved, &count);
	for (size_t i = 0; i < count; i++) {
		if (u64map_get(&alloc->reserved, keys[i]) != session)
			continue;
		u64map_remove(&alloc->reserved, keys[i]);
		avail_push(alloc, keys[i]);
	}
	session->reserved_count = 0;
	free(keys);
}

int alloc_check_write(struct blockd *server, uint64_t index)
{
	struct allocator *alloc = &server->alloc;

	if (index >= alloc->store_hwm && index - alloc->store_hwm > ALLOC_MAX_GAP &&
	    index >= alloc->alloc_hwm)
		return -ERANGE;
	return 0;
}

int alloc_note_write(struct blockd *server, rocksdb_writebatch_t *batch, uint64_t index)
{
	struct allocator *alloc = &server->alloc;
	struct session *holder = u64map_remove(&alloc->reserved, index);

	if (holder && holder->reserved_count)
		holder->reserved_count--;
	if (u64map_remove(&alloc->store_free, index)) {
		store_delete_free(batch, index);
		u64map_remove(&alloc->avail, index);
		return 0;
	}
	if (index < alloc->store_hwm)
		return 0; /* already allocated: an overwrite */

	/* Everything skipped over stays free, durably. */
	for (uint64_t skipped = alloc->store_hwm; skipped < index; skipped++) {
		if (skipped < NGNFS_FIRST_ALLOC_INDEX)
			continue; /* fixed metadata: never free space */
		store_put_free(batch, skipped);
		u64map_put(&alloc->store_free, skipped, PRESENT);
		if (skipped >= alloc->alloc_hwm)
			avail_push(alloc, skipped);
	}
	u64map_remove(&alloc->avail, index);
	alloc->store_hwm = index + 1;
	if (alloc->alloc_hwm < alloc->store_hwm)
		alloc->alloc_hwm = alloc->store_hwm;
	store_put_hwm(batch, alloc->store_hwm);
	return 0;
}

int alloc_check_free(struct blockd *server, uint64_t index)
{
	struct allocator *alloc = &server->alloc;

	if (index < NGNFS_FIRST_ALLOC_INDEX || index >= alloc->store_hwm ||
	    u64map_get(&alloc->store_free, index))
		return -EINVAL;
	return 0;
}

bool alloc_is_free(struct blockd *server, uint64_t index)
{
	struct allocator *alloc = &server->alloc;

	return index >= alloc->store_hwm || u64map_get(&alloc->store_free, index) != NULL;
}

void alloc_note_free(struct blockd *server, rocksdb_writebatch_t *batch, uint64_t index)
{
	struct allocator *alloc = &server->alloc;

	store_put_free(batch, index);
	u64map_put(&alloc->store_free, index, PRESENT);
	avail_push(alloc, index);
}

int alloc_session_epoch(struct blockd *server, struct session *session)
{
	struct allocator *alloc = &server->alloc;
	int ret;

	if (session->session_epoch)
		return 0;
	if (alloc->next_session_epoch > UINT32_MAX) {
		log_error("ALLOC refused for %s: every session epoch this device can hand out "
			  "(2^32 - 1) is used",
			  session->name);
		return -ENOSPC;
	}
	if (alloc->next_session_epoch >= server->store.session_epoch_limit) {
		ret = store_write_session_epoch_limit(
		    &server->store, alloc->next_session_epoch + NGNFS_STORE_SESSION_EPOCH_BATCH);
		if (ret) {
			log_error("ALLOC refused for %s: cannot record session epochs: %s",
				  session->name, strerror(-ret));
			return ret;
		}
	}
	session->session_epoch = (uint32_t)alloc->next_session_epoch++;
	log_debug("%s has session epoch %u", session->name, session->session_epoch);
	return 0;
}

uint64_t alloc_free_blocks(struct blockd *server)
{
	struct allocator *alloc = &server->alloc;
	uint64_t never_used = server->store.total_blocks > alloc->alloc_hwm
				  ? server->store.total_blocks - alloc->alloc_hwm
				  : 0;

	return never_used + alloc->avail.count;
}
