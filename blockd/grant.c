/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The grant table: per block, the holders (many readers or one writer)
 * and a FIFO queue of GET entries waiting for access.
 *
 * A waiter is granted only when it is compatible with every holder, the
 * block is not pinned to a staged set, and nobody not yet granted is
 * ahead of it: the walk over the queue stops at the first waiter that
 * must wait, so a stream of readers cannot starve a writer queued
 * between them.  During the reclaim grace period, waiters of sessions
 * that did not say NGNFS_HELLO_RECLAIM are passed over (they neither get
 * grants nor hold up reclaiming sessions behind them) and are examined
 * again when the grace period ends.
 *
 * Every waiter that must wait makes the server REVOKE the holders that
 * conflict with it, once per holder and level (revoked_to), so repeated
 * examinations do not flood a client with REVOKEs.
 *
 * A holder that leaves a REVOKE unanswered for revoke_timeout_ms loses
 * its session, and with it every grant, so that one stopped, hung or
 * vanished gateway (a host that died without closing its connections:
 * blockd's REVOKE then sits unacknowledged for TCP's ~15 minutes of
 * retransmissions) cannot stall every other gateway on the blocks it
 * held, the root directory first.  The client's session-reset path
 * (docs/design.md) takes over: it asks for its grants again, and a dirty
 * set whose blocks somebody else wrote meanwhile is dropped with an
 * error.  The default (60 s) is well above the longest a healthy client
 * takes to answer: writing a dirty set back, which waits at most its
 * reclaim timeout (30 s) for a device that is away.  A session with a
 * request in the commit thread, or with input not yet read, is not
 * closed: its answer may be there.  The REVOKEs that start a clock go on
 * a queue in the order sent, so the tick looks only at the oldest ones
 * instead of walking every block.
 *
 * XXX:
 *  - A session that goes away is removed by walking every block with
 *    state, O(blocks with state); a per-session index would be faster
 *    for servers with huge grant tables.
 */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "blockd.h"
#include "log.h"

struct block_state *block_state_get(struct blockd *server, uint64_t blkno, bool create)
{
	struct block_state *block = u64map_get(&server->blocks, blkno);

	if (block || !create)
		return block;
	block = calloc(1, sizeof(*block));
	if (!block)
		return NULL;
	block->blkno = blkno;
	if (u64map_put(&server->blocks, blkno, block)) {
		free(block);
		return NULL;
	}
	return block;
}

void block_state_maybe_free(struct blockd *server, struct block_state *block)
{
	if (block->holder_count || block->queue_head || block->pin || block->pending_writes)
		return;
	u64map_remove(&server->blocks, block->blkno);
	free(block->holders);
	free(block);
}

struct grant_holder *grant_find_holder(struct block_state *block, struct session *session)
{
	for (unsigned int i = 0; i < block->holder_count; i++) {
		if (block->holders[i].session == session)
			return &block->holders[i];
	}
	return NULL;
}

bool grant_holds_write(struct blockd *server, struct session *session, uint64_t blkno)
{
	struct block_state *block = block_state_get(server, blkno, false);
	struct grant_holder *holder = block ? grant_find_holder(block, session) : NULL;

	return holder && holder->access == NGNFS_ACCESS_WRITE;
}

int grant_add_holder(struct block_state *block, struct session *session, uint8_t access)
{
	struct grant_holder *holder = grant_find_holder(block, session);

	if (holder) {
		if (access > holder->access)
			holder->access = access;
		holder->revoked_to = 0xff;
		return 0;
	}
	if (block->holder_count == block->holder_capacity) {
		unsigned int capacity = block->holder_capacity ? block->holder_capacity * 2 : 2;
		struct grant_holder *holders = realloc(block->holders, capacity * sizeof(*holders));

		if (!holders)
			return -ENOMEM;
		block->holders = holders;
		block->holder_capacity = capacity;
	}
	block->holders[block->holder_count++] =
	    (struct grant_holder){ .session = session, .access = access, .revoked_to = 0xff };
	return 0;
}

static void remove_holder(struct block_state *block, struct grant_holder *holder)
{
	unsigned int i = (unsigned int)(holder - block->holders);

	block->holders[i] = block->holders[--block->holder_count];
}

static bool conflicts(const struct grant_holder *holder, const struct grant_waiter *waiter)
{
	return holder->session != waiter->session &&
	       (waiter->access == NGNFS_ACCESS_WRITE || holder->access == NGNFS_ACCESS_WRITE);
}

static bool can_grant(struct block_state *block, const struct grant_waiter *waiter)
{
	/*
	 * Not while a write of the block waits for the commit thread: if its
	 * writer's session ended meanwhile (dropping its grant), a grant now
	 * would hand out the contents and version from before that write, a
	 * write based on them would pass the base-version check (made against
	 * the store), and two different blocks would get the same version.  A
	 * session does not read while it has a request in the commit thread,
	 * so it rarely sees its end then (an error on sending can); this keeps
	 * the rule without relying on that.  write_done examines the queue
	 * again.
	 */
	if (block->pin || block->pending_writes)
		return false;
	for (unsigned int i = 0; i < block->holder_count; i++) {
		if (conflicts(&block->holders[i], waiter))
			return false;
	}
	return true;
}

static int revoke_queue_push(struct revoke_queue *queue, struct revoke_record record)
{
	if (queue->count == queue->capacity) {
		size_t capacity = queue->capacity ? queue->capacity * 2 : 64;
		struct revoke_record *records = malloc(capacity * sizeof(*records));

		if (!records)
			return -ENOMEM;
		for (size_t i = 0; i < queue->count; i++)
			records[i] = queue->records[(queue->head + i) % queue->capacity];
		free(queue->records);
		queue->records = records;
		queue->capacity = capacity;
		queue->head = 0;
	}
	queue->records[(queue->head + queue->count) % queue->capacity] = record;
	queue->count++;
	return 0;
}

static struct revoke_record revoke_queue_pop(struct revoke_queue *queue)
{
	struct revoke_record record = queue->records[queue->head];

	queue->head = (queue->head + 1) % queue->capacity;
	queue->count--;
	return record;
}

/* Start the revoke clock of a holder that had no REVOKE outstanding. */
static void start_revoke_clock(struct blockd *server, struct block_state *block,
			       struct grant_holder *holder)
{
	struct revoke_record record = {
		.session = holder->session,
		.blkno = block->blkno,
		.sent_ms = blockd_now_ms(),
	};

	holder->revoked_ms = record.sent_ms;
	if (revoke_queue_push(&server->revokes, record)) {
		log_warn("out of memory for the revoke timeout of block %llu held by %s",
			 (unsigned long long)block->blkno, session_name(holder->session));
		return;
	}
	session_ref(holder->session);
}

static void send_revokes(struct blockd *server, struct block_state *block,
			 const struct grant_waiter *waiter)
{
	for (unsigned int i = 0; i < block->holder_count; i++) {
		struct grant_holder *holder = &block->holders[i];
		uint8_t level;
		struct ngnfs_buffer buffer;

		if (!conflicts(holder, waiter))
			continue;
		level =
		    (waiter->access == NGNFS_ACCESS_READ && holder->access == NGNFS_ACCESS_WRITE)
			? NGNFS_ACCESS_READ
			: NGNFS_ACCESS_NONE;
		if (holder->revoked_to != 0xff && holder->revoked_to <= level)
			continue;
		if (holder->revoked_to == 0xff)
			start_revoke_clock(server, block, holder);
		holder->revoked_to = level;
		log_debug("REVOKE block %llu to %s from session %llu (%s)",
			  (unsigned long long)block->blkno, ngnfs_access_name(level),
			  (unsigned long long)holder->session->id, holder->session->peer);
		ngnfs_buffer_init(&buffer);
		if (ngnfs_encode_revoke(&buffer, block->blkno, level) == 0)
			session_send(holder->session, &buffer);
		ngnfs_buffer_free(&buffer);
	}
}

static void send_grant(struct blockd *server, struct block_state *block,
		       struct grant_waiter *waiter)
{
	static uint8_t data[NGNFS_BLOCK_SIZE];
	struct ngnfs_buffer buffer;
	uint64_t version = 0;
	struct grant_holder *holder;
	bool free_block = false;
	int ret;

	ret = store_read_block(&server->store, ngnfs_blkno_index(block->blkno), &version, data);
	/*
	 * A free block (freed, or reserved and not yet written) reads as
	 * zeros, with its data always sent: a WRITE that frees a block does
	 * not rewrite it, so its stored contents and version are still the
	 * last ones written, and a client's kept copy of them must not be
	 * answered "unchanged".  This is what lets a deleted inode be freed
	 * in the deleting transaction: a stale handle then finds zeros.  A
	 * never-written block (version 0) has no old copy anywhere and
	 * stays as it was: zeros, "unchanged" for cached version 0.
	 */
	if (ret == 0 && version != 0 && alloc_is_free(server, ngnfs_blkno_index(block->blkno))) {
		memset(data, 0, sizeof(data));
		free_block = true;
	}
	ngnfs_buffer_init(&buffer);
	if (ret == 0)
		ret = grant_add_holder(block, waiter->session, waiter->access);
	if (ret) {
		if (ret == -EIO)
			log_error("GET of block %llu refused for session %llu (%s): stored block "
				  "fails its checksum",
				  (unsigned long long)block->blkno,
				  (unsigned long long)waiter->session->id, waiter->session->peer);
		else
			log_error("GET of block %llu failed for session %llu (%s): %s",
				  (unsigned long long)block->blkno,
				  (unsigned long long)waiter->session->id, waiter->session->peer,
				  strerror(-ret));
		ngnfs_encode_grant(&buffer, waiter->request_id, ret, block->blkno, 0,
				   NGNFS_ACCESS_NONE, NULL);
	} else {
		holder = grant_find_holder(block, waiter->session);
		ngnfs_encode_grant(&buffer, waiter->request_id, 0, block->blkno, version,
				   holder->access,
				   waiter->cached_version == version && !free_block ? NULL : data);
	}
	session_send(waiter->session, &buffer);
	ngnfs_buffer_free(&buffer);
}

void grant_examine(struct blockd *server, struct block_state *block)
{
	struct grant_waiter **link = &block->queue_head;
	struct grant_waiter *last = NULL;

	while (*link) {
		struct grant_waiter *waiter = *link;

		if (server->in_grace && !(waiter->session->flags & NGNFS_HELLO_RECLAIM)) {
			last = waiter;
			link = &waiter->next;
			continue;
		}
		if (!can_grant(block, waiter))
			break;
		*link = waiter->next;
		if (block->queue_tail == waiter)
			block->queue_tail = last;
		send_grant(server, block, waiter);
		free(waiter);
	}
	for (struct grant_waiter *waiter = block->queue_head; waiter; waiter = waiter->next) {
		if (server->in_grace && !(waiter->session->flags & NGNFS_HELLO_RECLAIM))
			continue;
		send_revokes(server, block, waiter);
	}
	block_state_maybe_free(server, block);
}

void grant_examine_all(struct blockd *server)
{
	size_t count;
	uint64_t *keys = u64map_keys(&server->blocks, &count);

	for (size_t i = 0; i < count; i++) {
		struct block_state *block = block_state_get(server, keys[i], false);

		if (block)
			grant_examine(server, block);
	}
	free(keys);
}

int grant_queue_get(struct blockd *server, struct session *session, uint64_t request_id,
		    uint64_t blkno, uint64_t cached_version, uint8_t access)
{
	struct block_state *block = block_state_get(server, blkno, true);
	struct grant_waiter *waiter;

	if (!block)
		return -ENOMEM;
	waiter = calloc(1, sizeof(*waiter));
	if (!waiter) {
		block_state_maybe_free(server, block);
		return -ENOMEM;
	}
	waiter->session = session;
	waiter->request_id = request_id;
	waiter->cached_version = cached_version;
	waiter->access = access;
	if (block->queue_tail)
		block->queue_tail->next = waiter;
	else
		block->queue_head = waiter;
	block->queue_tail = waiter;
	grant_examine(server, block);
	return 0;
}

void grant_release(struct blockd *server, struct session *session, uint64_t blkno, uint8_t keep)
{
	struct block_state *block = block_state_get(server, blkno, false);
	struct grant_holder *holder;

	if (!block)
		return;
	holder = grant_find_holder(block, session);
	if (!holder)
		return;
	if (keep == NGNFS_ACCESS_NONE) {
		remove_holder(block, holder);
	} else if (keep < holder->access) {
		holder->access = keep;
		holder->revoked_to = 0xff;
	}
	grant_examine(server, block);
}

void grant_session_gone(struct blockd *server, struct session *session)
{
	size_t count;
	uint64_t *keys = u64map_keys(&server->blocks, &count);

	for (size_t i = 0; i < count; i++) {
		struct block_state *block = block_state_get(server, keys[i], false);
		struct grant_holder *holder;
		struct grant_waiter **link;
		struct grant_waiter *last = NULL;
		bool changed = false;

		if (!block)
			continue;
		holder = grant_find_holder(block, session);
		if (holder) {
			remove_holder(block, holder);
			changed = true;
		}
		link = &block->queue_head;
		while (*link) {
			struct grant_waiter *waiter = *link;

			if (waiter->session == session) {
				*link = waiter->next;
				free(waiter);
				changed = true;
				continue;
			}
			last = waiter;
			link = &waiter->next;
		}
		block->queue_tail = last;
		if (changed)
			grant_examine(server, block);
	}
	free(keys);
}

void grant_revoke_readers(struct blockd *server, struct block_state *block, struct session *session)
{
	struct grant_waiter writer = { .session = session, .access = NGNFS_ACCESS_WRITE };

	send_revokes(server, block, &writer);
}

/* Is this record's REVOKE still the holder's oldest unanswered one? */
static bool revoke_unanswered(struct blockd *server, const struct revoke_record *record)
{
	struct block_state *block = block_state_get(server, record->blkno, false);
	struct grant_holder *holder = block ? grant_find_holder(block, record->session) : NULL;

	return !record->session->gone && holder && holder->revoked_to != 0xff &&
	       holder->revoked_ms == record->sent_ms;
}

void grant_tick(struct blockd *server)
{
	struct revoke_queue *queue = &server->revokes;
	uint64_t timeout_ms = server->config.revoke_timeout_ms;
	uint64_t now = blockd_now_ms();
	/* records put back (their session may be answering) wait for the next tick */
	size_t examine = queue->count;

	while (examine-- > 0 && queue->count > 0 &&
	       now - queue->records[queue->head].sent_ms >= timeout_ms) {
		struct revoke_record record = revoke_queue_pop(queue);
		struct session *session = record.session;
		char reason[160];

		if (revoke_unanswered(server, &record)) {
			/*
			 * Unread input may hold the RELEASE, unless blockd stopped
			 * reading because the session does not read its replies.
			 */
			if (session->inflight ||
			    (session_has_unread_input(session) && !session->output_full)) {
				if (revoke_queue_push(queue, record) == 0)
					continue;
			} else {
				log_warn("%s left the REVOKE of block %llu unanswered for %llu ms "
					 "(revoke_timeout_ms %llu): closing it, so that its grants "
					 "go to the sessions waiting for them",
					 session->name, (unsigned long long)record.blkno,
					 (unsigned long long)(now - record.sent_ms),
					 (unsigned long long)timeout_ms);
				snprintf(reason, sizeof(reason),
					 "REVOKE of block %llu unanswered (revoke_timeout_ms)",
					 (unsigned long long)record.blkno);
				session_close(session, reason);
			}
		}
		session_put(session);
	}
}

void grant_free_revokes(struct blockd *server)
{
	struct revoke_queue *queue = &server->revokes;

	while (queue->count > 0)
		session_put(revoke_queue_pop(queue).session);
	free(queue->records);
	*queue = (struct revoke_queue){ 0 };
}
