/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Atomic sets across devices: STAGE, COMMIT, RESOLVE and the recovery of
 * in-doubt sets, exactly as docs/protocol.md describes them.
 *
 * A staged set is durable (header and staged blocks in the store) but
 * invisible: its blocks are pinned, so no grant is given to anyone until
 * the set is resolved, whoever held them before.  Pins are set when the
 * STAGE is queued (being stricter early is harmless) and lifted only
 * once the apply or drop batch is durable, so that no reader ever sees
 * one device's new half next to another's old half.
 *
 * Outcomes are decided on the event loop when the batch that records
 * them is queued, and every answer that depends on an outcome is itself
 * queued behind that batch, so nobody is ever told "committed" before
 * the commit point is on disk.
 *
 * Resolutions are built into a scratch batch and copied into the shared
 * commit batch with rocksdb_writebatch_iterate(), which carries only
 * puts and deletes: a drop therefore deletes staged keys one by one (a
 * range delete was silently lost, and dropped sets came back at every
 * restart), and the copy checks that it carried every change.
 *
 * At run time a block is pinned by at most one set (a STAGE of a pinned
 * block is refused, and set_pin() refuses too).  A store written by a
 * blockd with that bug can hold stale stages of dropped sets on a block of a
 * live in-doubt set; such a block stays pinned until all of its sets
 * are resolved (block_state.pin_shared), whatever order they resolve in.
 *
 * XXX:
 *  - An idempotent COMMIT of a set already committed answers with no
 *    versions (the outcome record does not keep them).
 *  - Staged block keys without a set header (none are written, but a
 *    damaged store could hold them) are ignored, never deleted.
 *  - Outcome records are kept forever (docs/protocol.md).
 */

#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "blockd.h"
#include "log.h"

static const char *outcome_name(uint8_t outcome)
{
	switch (outcome) {
	case NGNFS_SET_COMMITTED:
		return "COMMITTED";
	case NGNFS_SET_ABORTED:
		return "ABORTED";
	default:
		return "UNKNOWN";
	}
}

static uint8_t known_outcome(struct blockd *server, uint64_t set_id)
{
	return (uint8_t)(uintptr_t)u64map_get(&server->outcomes, set_id);
}

static bool is_primary(struct blockd *server, const struct staged_set *set)
{
	return set->participants[0] == server->store.device_index;
}

static struct staged_set *set_create(struct blockd *server, uint64_t set_id,
				     const uint16_t *participants, uint16_t participant_count)
{
	struct staged_set *set = calloc(1, sizeof(*set));

	if (!set)
		return NULL;
	set->set_id = set_id;
	set->participant_count = participant_count;
	memcpy(set->participants, participants, participant_count * sizeof(uint16_t));
	set->created_ms = blockd_now_ms();
	set->state = SET_STAGED;
	if (u64map_put(&server->sets, set_id, set)) {
		free(set);
		return NULL;
	}
	return set;
}

/*
 * Pin blkno to set.  A block pinned by another unresolved set is refused
 * (STAGE checks for that first, so it means a bug) except when loading
 * the store: a store written before drops were persisted can hold stale
 * stages of dropped sets next to the live one, and then the block must
 * stay pinned until every one of them is resolved (pin_shared), never be
 * taken over by whichever set the walk met last.
 */
static int set_pin(struct blockd *server, struct staged_set *set, uint64_t blkno, bool loading)
{
	struct block_state *block = block_state_get(server, blkno, true);

	if (!block)
		return -ENOMEM;
	if (block->pin && block->pin != set && !loading) {
		log_error("set %016llx: block %llu is already pinned by unresolved set %016llx; "
			  "refusing to pin it again",
			  (unsigned long long)set->set_id, (unsigned long long)blkno,
			  (unsigned long long)block->pin->set_id);
		return -EBUSY;
	}
	if (set->block_count == set->block_capacity) {
		uint32_t capacity = set->block_capacity ? set->block_capacity * 2 : 8;
		uint64_t *blknos = realloc(set->blknos, capacity * sizeof(*blknos));

		if (!blknos) {
			block_state_maybe_free(server, block);
			return -ENOMEM;
		}
		set->blknos = blknos;
		set->block_capacity = capacity;
	}
	set->blknos[set->block_count++] = blkno;
	if (block->pin && block->pin != set) {
		log_warn(
		    "set %016llx: block %llu is also staged by unresolved set %016llx; it stays "
		    "pinned until both are resolved",
		    (unsigned long long)set->set_id, (unsigned long long)blkno,
		    (unsigned long long)block->pin->set_id);
		block->pin_shared = true;
	} else {
		block->pin = set;
	}
	return 0;
}

/* Another set in server->sets than except that stages blkno, or NULL; *more if several. */
static struct staged_set *other_pinner(struct blockd *server, const struct staged_set *except,
				       uint64_t blkno, bool *more)
{
	struct staged_set *found = NULL;
	size_t count;
	uint64_t *keys = u64map_keys(&server->sets, &count);

	*more = false;
	for (size_t i = 0; i < count && !*more; i++) {
		struct staged_set *other = u64map_get(&server->sets, keys[i]);

		if (!other || other == except)
			continue;
		for (uint32_t j = 0; j < other->block_count; j++) {
			if (other->blknos[j] != blkno)
				continue;
			if (found)
				*more = true;
			else
				found = other;
			break;
		}
	}
	free(keys);
	return found;
}

/*
 * set no longer pins blkno.  Only the pin's owner lifts it: a set that
 * shares the pin (see set_pin) leaves it to the owner, and an owner
 * whose block is shared hands the pin on to the next unresolved set, so
 * the block is granted only once none of them is left.
 */
static void set_unpin_block(struct blockd *server, struct staged_set *set, uint64_t blkno)
{
	struct block_state *block = block_state_get(server, blkno, false);
	bool more = false;

	if (!block || block->pin != set)
		return;
	block->pin = NULL;
	if (block->pin_shared)
		block->pin = other_pinner(server, set, blkno, &more);
	block->pin_shared = more;
	if (block->pin) {
		log_info("block %llu stays pinned by unresolved set %016llx after set %016llx",
			 (unsigned long long)blkno, (unsigned long long)block->pin->set_id,
			 (unsigned long long)set->set_id);
		return;
	}
	grant_examine(server, block);
}

/* The set is resolved (or was never durable): unpin its blocks and forget it. */
static void set_forget(struct blockd *server, struct staged_set *set)
{
	u64map_remove(&server->sets, set->set_id);
	for (uint32_t i = 0; i < set->block_count; i++)
		set_unpin_block(server, set, set->blknos[i]);
	free(set->blknos);
	free(set);
}

static void set_header_key(uint8_t key[NGNFS_STORE_SET_KEY_SIZE], uint64_t set_id)
{
	store_index_key(key, NGNFS_STORE_KEY_STAGE, set_id);
}

/* ---- apply and drop batches ---------------------------------------------- */

struct apply_state {
	struct blockd *server;
	rocksdb_writebatch_t *batch;
	uint64_t set_id;
	uint64_t *blknos;
	uint64_t *versions;
	uint32_t count;
	uint32_t capacity;
	int error;
};

static int apply_one(const uint8_t *key, size_t key_length, const uint8_t *value,
		     size_t value_length, void *arg)
{
	struct apply_state *state = arg;
	struct blockd *server = state->server;
	struct ngnfs_store_staged_block header_copy;
	const struct ngnfs_store_staged_block *staged = &header_copy;
	const uint8_t *staged_data = value + NGNFS_STORE_STAGED_FREE_SIZE;
	uint64_t index, base_version, current = 0, blkno;

	if (key_length != NGNFS_STORE_STAGED_KEY_SIZE ||
	    value_length < NGNFS_STORE_STAGED_FREE_SIZE)
		return 0;
	/* RocksDB values have no alignment: copy the fixed part out. */
	memcpy(&header_copy, value, NGNFS_STORE_STAGED_FREE_SIZE);
	index = store_be64(key + 9);
	blkno = ngnfs_blkno_make(server->store.device_index, index);
	base_version = le64toh(staged->base_version);
	if (staged->kind == NGNFS_STORE_STAGED_FREE) {
		if (alloc_check_free(server, index) == 0)
			alloc_note_free(server, state->batch, index);
		rocksdb_writebatch_delete(state->batch, (const char *)key, key_length);
		return 0;
	}
	if (value_length != sizeof(struct ngnfs_store_staged_block) ||
	    store_block_crc(base_version, staged_data) != le32toh(staged->crc)) {
		log_error("set %016llx: staged copy of block %llu fails its checksum; not applying "
			  "the set",
			  (unsigned long long)state->set_id, (unsigned long long)blkno);
		state->error = -EIO;
		return -EIO;
	}
	if (store_read_block(&server->store, index, &current, NULL) || current < base_version)
		current = base_version;
	if (state->count == state->capacity) {
		uint32_t capacity = state->capacity ? state->capacity * 2 : 16;
		uint64_t *blknos = realloc(state->blknos, capacity * 2 * sizeof(uint64_t));

		if (!blknos)
			return -ENOMEM;
		state->blknos = blknos;
		state->capacity = capacity;
	}
	state->blknos[state->count * 2] = blkno;
	state->blknos[state->count * 2 + 1] = current + 1;
	state->count++;
	store_put_block(state->batch, index, current + 1, staged_data);
	alloc_note_write(server, state->batch, index);
	rocksdb_writebatch_delete(state->batch, (const char *)key, key_length);
	return 0;
}

/*
 * Add the apply of set's staged blocks to batch.  On success the applied
 * block numbers and versions are in *entries as (blkno, version) pairs.
 * The walk runs before batch is touched for anything else, and a failure
 * leaves batch with partial puts: callers build into a scratch batch.
 */
static int build_apply(struct blockd *server, struct staged_set *set, rocksdb_writebatch_t *batch,
		       uint64_t **entries, uint32_t *count)
{
	struct apply_state state = { .server = server, .batch = batch, .set_id = set->set_id };
	uint8_t prefix[NGNFS_STORE_SET_KEY_SIZE];
	uint8_t header[NGNFS_STORE_SET_KEY_SIZE];
	int ret;

	store_index_key(prefix, NGNFS_STORE_KEY_STAGED, set->set_id);
	ret = store_walk(&server->store, prefix, sizeof(prefix), apply_one, &state);
	if (!ret)
		ret = state.error;
	if (ret) {
		free(state.blknos);
		return ret;
	}
	set_header_key(header, set->set_id);
	rocksdb_writebatch_delete(batch, (const char *)header, sizeof(header));
	*entries = state.blknos;
	*count = state.count;
	return 0;
}

static int drop_one(const uint8_t *key, size_t key_length, const uint8_t *value,
		    size_t value_length, void *arg)
{
	(void)value;
	(void)value_length;
	rocksdb_writebatch_delete(arg, (const char *)key, key_length);
	return 0;
}

/*
 * One point delete per staged key, not a delete_range: the batch is
 * copied into the shared one with rocksdb_writebatch_iterate(), whose C
 * handler knows only puts and deletes and silently stops at a range
 * delete, which lost every drop (the set came back at each restart).
 * The walk sees every staged key because no STAGE of the set is in
 * flight (callers check pending_stages).
 */
static int build_drop(struct blockd *server, rocksdb_writebatch_t *batch, uint64_t set_id)
{
	uint8_t prefix[NGNFS_STORE_SET_KEY_SIZE];
	uint8_t header[NGNFS_STORE_SET_KEY_SIZE];
	int ret;

	store_index_key(prefix, NGNFS_STORE_KEY_STAGED, set_id);
	ret = store_walk(&server->store, prefix, sizeof(prefix), drop_one, batch);
	if (ret)
		return ret;
	set_header_key(header, set_id);
	rocksdb_writebatch_delete(batch, (const char *)header, sizeof(header));
	return 0;
}

/*
 * The commit thread's batch is shared, so the apply is first built into a
 * scratch batch (the walk may fail halfway) and then copied in.  The
 * copy counts what it carried: anything but puts and deletes would be
 * dropped by the iteration without a word, so a count that differs from
 * the scratch batch's refuses the resolution instead of losing half of it.
 */
struct copy_state {
	rocksdb_writebatch_t *batch; /* NULL: only count */
	int copied;
};

static void copy_put(void *arg, const char *key, size_t key_length, const char *value,
		     size_t value_length)
{
	struct copy_state *copy = arg;

	if (copy->batch)
		rocksdb_writebatch_put(copy->batch, key, key_length, value, value_length);
	copy->copied++;
}

static void copy_delete(void *arg, const char *key, size_t key_length)
{
	struct copy_state *copy = arg;

	if (copy->batch)
		rocksdb_writebatch_delete(copy->batch, key, key_length);
	copy->copied++;
}

/* ---- resolution of a set (apply or drop), with or without a reply ------- */

struct resolve_pending {
	struct pending pending;
	struct blockd *server;
	struct staged_set *set; /* NULL when nothing was staged here */
	uint64_t set_id;
	uint8_t outcome;   /* reported in the reply */
	uint8_t applying;  /* apply (else drop) */
	uint8_t record;	   /* outcome recorded in this batch */
	uint64_t *entries; /* applied (blkno, version) pairs */
	uint32_t count;
};

static void reply_set(struct resolve_pending *resolve, int status)
{
	struct session *session = resolve->pending.session;
	struct ngnfs_buffer buffer;
	uint64_t blknos[NGNFS_MSG_MAX_BLOCKS];
	uint64_t versions[NGNFS_MSG_MAX_BLOCKS];
	uint32_t count = 0;

	if (!session || session->gone)
		return;
	ngnfs_buffer_init(&buffer);
	if (resolve->pending.request_type == NGNFS_MSG_COMMIT) {
		for (uint32_t i = 0; i < resolve->count && count < NGNFS_MSG_MAX_BLOCKS; i++) {
			blknos[count] = resolve->entries[i * 2];
			versions[count++] = resolve->entries[i * 2 + 1];
		}
		ngnfs_encode_versions_reply(&buffer, NGNFS_MSG_COMMIT_REPLY,
					    resolve->pending.request_id, status, resolve->set_id,
					    blknos, versions, status ? 0 : count);
	} else {
		ngnfs_encode_resolve(&buffer, NGNFS_MSG_RESOLVE_REPLY, resolve->pending.request_id,
				     status, resolve->set_id,
				     status ? NGNFS_SET_UNKNOWN : resolve->outcome);
	}
	session_send(session, &buffer);
	ngnfs_buffer_free(&buffer);
}

static void resolve_done(struct commit_op *op)
{
	struct resolve_pending *resolve = (struct resolve_pending *)op;
	struct blockd *server = resolve->server;
	struct staged_set *set = resolve->set;

	if (set) {
		log_info("set %016llx %s on this device (%u blocks)",
			 (unsigned long long)resolve->set_id,
			 resolve->applying ? "applied" : "dropped", set->block_count);
		set_forget(server, set);
	}
	reply_set(resolve, 0);
	pending_finish(&resolve->pending);
	free(resolve->entries);
	free(resolve);
}

/*
 * Queue the resolution of set_id: apply or drop the stage (set may be
 * NULL: nothing staged here), record outcome when record is set, and
 * answer session's request once durable.
 */
static int queue_resolve(struct blockd *server, struct session *session,
			 const struct ngnfs_msg *msg, struct staged_set *set, uint64_t set_id,
			 bool applying, uint8_t record, uint8_t outcome)
{
	struct resolve_pending *resolve = calloc(1, sizeof(*resolve));
	rocksdb_writebatch_t *scratch = rocksdb_writebatch_create();
	struct copy_state copy;
	rocksdb_writebatch_t *batch;
	int ret = 0;

	if (!resolve) {
		rocksdb_writebatch_destroy(scratch);
		return -ENOMEM;
	}
	resolve->server = server;
	resolve->set = set;
	resolve->set_id = set_id;
	resolve->outcome = outcome;
	resolve->applying = applying;
	resolve->record = record != NGNFS_SET_UNKNOWN;
	if (set && applying)
		ret = build_apply(server, set, scratch, &resolve->entries, &resolve->count);
	else if (set)
		ret = build_drop(server, scratch, set_id);
	if (resolve->record && !ret)
		store_put_outcome(scratch, set_id, record);
	if (!ret) {
		copy = (struct copy_state){ .batch = NULL };
		rocksdb_writebatch_iterate(scratch, &copy, copy_put, copy_delete);
		if (copy.copied != rocksdb_writebatch_count(scratch)) {
			log_error("set %016llx: %s batch holds %d changes but only %d can be "
				  "copied; not resolving it",
				  (unsigned long long)set_id, applying ? "apply" : "drop",
				  rocksdb_writebatch_count(scratch), copy.copied);
			ret = -EIO;
		}
	}
	if (ret) {
		rocksdb_writebatch_destroy(scratch);
		free(resolve->entries);
		free(resolve);
		return ret;
	}
	if (resolve->record)
		u64map_put(&server->outcomes, set_id, (void *)(uintptr_t)record);
	if (set)
		set->state = SET_APPLYING;
	pending_start(&resolve->pending, session, msg ? msg->request_id : 0,
		      msg ? msg->type : NGNFS_MSG_RESOLVE, resolve_done);
	batch = commit_begin(&server->committer);
	copy = (struct copy_state){ .batch = batch };
	rocksdb_writebatch_iterate(scratch, &copy, copy_put, copy_delete);
	commit_end(&server->committer, &resolve->pending.op);
	rocksdb_writebatch_destroy(scratch);
	return 0;
}

static void ask_primary(struct blockd *server, struct staged_set *set);

/* ---- STAGE ---------------------------------------------------------------- */

struct stage_pending {
	struct pending pending;
	struct staged_set *set;
	uint32_t count;
	uint64_t *blknos;   /* written blocks then freed ones */
	uint64_t *versions; /* written blocks' future versions */
	uint32_t pinned;    /* how many of blknos this stage pinned */
	bool release;	    /* NGNFS_WRITE_RELEASE: release the grants once staged */
	uint8_t release_access;
};

static void stage_done(struct commit_op *op)
{
	struct stage_pending *stage = (struct stage_pending *)op;
	struct session *session = stage->pending.session;
	struct blockd *server = session->server;
	struct staged_set *set = stage->set;
	struct ngnfs_buffer buffer;

	set->pending_stages--;
	set->durable = true;
	if (!session->gone) {
		ngnfs_buffer_init(&buffer);
		ngnfs_encode_versions_reply(&buffer, NGNFS_MSG_WRITE_REPLY,
					    stage->pending.request_id, 0, set->set_id,
					    stage->blknos, stage->versions, stage->count);
		session_send(session, &buffer);
		ngnfs_buffer_free(&buffer);
		/* The blocks stay pinned to the set; only the session's grants go. */
		if (stage->release) {
			for (uint32_t i = 0; i < stage->count; i++)
				grant_release(server, session, stage->blknos[i],
					      stage->release_access);
		}
	}
	if (set->session == NULL && set->pending_stages == 0 && !is_primary(server, set))
		ask_primary(server, set);
	pending_finish(&stage->pending);
	free(stage->blknos);
	free(stage);
}

void sets_handle_stage(struct session *session, const struct ngnfs_msg *msg)
{
	struct blockd *server = session->server;
	uint64_t set_id = msg->write.set_id;
	uint32_t count = msg->write.block_count;
	uint32_t total = count + msg->write.free_count;
	uint16_t participants[NGNFS_MSG_MAX_PARTICIPANTS];
	uint16_t participant_count = msg->write.participant_count;
	struct stage_pending *stage = NULL;
	struct staged_set *set;
	rocksdb_writebatch_t *batch;
	bool in_list = false;
	uint64_t bad = 0;
	const char *why = NULL;
	int status = 0;

	for (uint16_t i = 0; i < participant_count && i < NGNFS_MSG_MAX_PARTICIPANTS; i++) {
		participants[i] = ngnfs_msg_write_participant(msg, i);
		if (participants[i] == server->store.device_index)
			in_list = true;
	}
	set = u64map_get(&server->sets, set_id);
	if (set_id == 0) {
		status = -EINVAL;
		why = "set id 0 is not a set";
	} else if (participant_count == 0 || participant_count > NGNFS_MSG_MAX_PARTICIPANTS ||
		   !in_list) {
		status = -EINVAL;
		why = "participant list does not name this device";
	} else if (known_outcome(server, set_id)) {
		status = -ESTALE;
		why = known_outcome(server, set_id) == NGNFS_SET_ABORTED
			  ? "set was already aborted"
			  : "set was already committed";
	} else if (set && set->state != SET_STAGED) {
		status = -EBUSY;
		why = "set is being resolved";
	} else if (set && (set->participant_count != participant_count ||
			   memcmp(set->participants, participants,
				  participant_count * sizeof(uint16_t)))) {
		status = -EINVAL;
		why = "participant list differs from the set's earlier STAGE";
	}

	if (!status) {
		stage = calloc(1, sizeof(*stage));
		if (stage)
			stage->blknos = calloc(total ? total : 1, 2 * sizeof(uint64_t));
		if (!stage || !stage->blknos) {
			status = -ENOMEM;
			why = "out of memory";
		}
	}
	if (!status) {
		stage->versions = stage->blknos + total;
		for (uint32_t i = 0; i < count; i++)
			ngnfs_msg_write_block(msg, i, &stage->blknos[i], &stage->versions[i]);
		for (uint32_t i = 0; i < msg->write.free_count; i++)
			stage->blknos[count + i] = ngnfs_msg_write_free(msg, i);
		{
			struct u64map seen;

			u64map_init(&seen);
			for (uint32_t i = 0; i < total && !status; i++) {
				if (u64map_get(&seen, stage->blknos[i])) {
					status = -EINVAL;
					bad = stage->blknos[i];
					why = "block appears twice in one STAGE";
				}
				u64map_put(&seen, stage->blknos[i], (void *)1);
			}
			u64map_free(&seen);
		}
	}
	for (uint32_t i = 0; i < count && !status; i++) {
		struct block_state *block = block_state_get(server, stage->blknos[i], false);

		bad = stage->blknos[i];
		if (set && block && block->pin == set) {
			status = -EINVAL;
			why = "block was already staged in this set";
		} else {
			status = request_check_write(server, session, stage->blknos[i],
						     stage->versions[i], &why);
		}
	}
	for (uint32_t i = count; i < total && !status; i++) {
		bad = stage->blknos[i];
		status = request_check_free(server, session, stage->blknos[i], &why);
	}
	if (status) {
		log_warn("STAGE of set %016llx refused for %s: block %llu: %s (%s)",
			 (unsigned long long)set_id, session->name, (unsigned long long)bad, why,
			 strerror(-status));
		reply_refused(session, NGNFS_MSG_WRITE, msg->request_id, status);
		if (stage)
			free(stage->blknos);
		free(stage);
		return;
	}

	if (!set) {
		set = set_create(server, set_id, participants, participant_count);
		if (!set) {
			reply_refused(session, NGNFS_MSG_WRITE, msg->request_id, -ENOMEM);
			free(stage->blknos);
			free(stage);
			return;
		}
		log_info("set %016llx staged by %s (primary device %u, %u participants)",
			 (unsigned long long)set_id, session->name, participants[0],
			 participant_count);
	}
	stage->set = set;
	stage->count = count;
	stage->release = !!(msg->write.flags & NGNFS_WRITE_RELEASE);
	stage->release_access =
	    msg->write.release_access == NGNFS_ACCESS_READ ? NGNFS_ACCESS_READ : NGNFS_ACCESS_NONE;
	for (uint32_t i = 0; i < total && !status; i++) {
		status = set_pin(server, set, stage->blknos[i], false);
		if (!status)
			stage->pinned++;
	}
	if (status) {
		/* Never stage a block the set does not pin: a reader could see half the set. */
		log_error("STAGE of set %016llx refused for %s: block %llu cannot be pinned (%s)",
			  (unsigned long long)set_id, session->name,
			  (unsigned long long)stage->blknos[stage->pinned], strerror(-status));
		for (uint32_t i = 0; i < stage->pinned; i++)
			set_unpin_block(server, set, stage->blknos[i]);
		set->block_count -= stage->pinned;
		if (!set->durable && set->pending_stages == 0)
			set_forget(server, set);
		reply_refused(session, NGNFS_MSG_WRITE, msg->request_id, status);
		free(stage->blknos);
		free(stage);
		return;
	}
	set->session = session;
	set->pending_stages++;

	pending_start(&stage->pending, session, msg->request_id, NGNFS_MSG_WRITE, stage_done);
	batch = commit_begin(&server->committer);
	{
		struct ngnfs_store_stage header;
		uint8_t key[NGNFS_STORE_SET_KEY_SIZE];
		struct timespec now;

		memset(&header, 0, sizeof(header));
		clock_gettime(CLOCK_REALTIME, &now);
		header.created_ns =
		    htole64((uint64_t)now.tv_sec * 1000000000ULL + (uint64_t)now.tv_nsec);
		header.participant_count = htole16(participant_count);
		for (uint16_t i = 0; i < participant_count; i++)
			header.participants[i] = htole16(participants[i]);
		set_header_key(key, set_id);
		rocksdb_writebatch_put(batch, (const char *)key, sizeof(key), (const char *)&header,
				       sizeof(header));
	}
	for (uint32_t i = 0; i < total; i++) {
		struct ngnfs_store_staged_block staged;
		uint8_t key[NGNFS_STORE_STAGED_KEY_SIZE];
		size_t length = sizeof(staged);

		memset(&staged, 0, NGNFS_STORE_STAGED_FREE_SIZE);
		store_staged_key(key, set_id, ngnfs_blkno_index(stage->blknos[i]));
		if (i < count) {
			uint64_t blkno, base_version;
			const uint8_t *data = ngnfs_msg_write_block(msg, i, &blkno, &base_version);

			staged.kind = NGNFS_STORE_STAGED_WRITE;
			staged.base_version = htole64(base_version);
			staged.crc = htole32(store_block_crc(base_version, data));
			memcpy(staged.data, data, NGNFS_BLOCK_SIZE);
			stage->versions[i] = base_version + 1;
		} else {
			staged.kind = NGNFS_STORE_STAGED_FREE;
			length = NGNFS_STORE_STAGED_FREE_SIZE;
		}
		rocksdb_writebatch_put(batch, (const char *)key, sizeof(key), (const char *)&staged,
				       length);
	}
	commit_end(&server->committer, &stage->pending.op);
}

/* ---- COMMIT --------------------------------------------------------------- */

static void refuse_set(struct session *session, const struct ngnfs_msg *msg, uint64_t set_id,
		       int status, const char *why)
{
	log_warn("%s of set %016llx refused for %s: %s (%s)", ngnfs_msg_type_name(msg->type),
		 (unsigned long long)set_id, session->name, why, strerror(-status));
	reply_refused(session, msg->type, msg->request_id, status);
}

void sets_handle_commit(struct session *session, const struct ngnfs_msg *msg)
{
	struct blockd *server = session->server;
	uint64_t set_id = msg->commit.set_id;
	uint8_t outcome = known_outcome(server, set_id);
	struct staged_set *set = u64map_get(&server->sets, set_id);
	int ret;

	if (outcome == NGNFS_SET_COMMITTED) {
		/* Idempotent: answer behind whatever recorded it. */
		ret = queue_resolve(server, session, msg, NULL, set_id, false, NGNFS_SET_UNKNOWN,
				    NGNFS_SET_COMMITTED);
		if (ret)
			refuse_set(session, msg, set_id, ret, "out of memory");
		return;
	}
	if (outcome == NGNFS_SET_ABORTED) {
		refuse_set(session, msg, set_id, -ESTALE, "set was aborted");
		return;
	}
	if (!set) {
		refuse_set(session, msg, set_id, -ENOENT, "no such set staged here");
		return;
	}
	if (!is_primary(server, set)) {
		refuse_set(session, msg, set_id, -EINVAL, "this device is not the set's primary");
		return;
	}
	if (set->state != SET_STAGED || set->pending_stages) {
		refuse_set(session, msg, set_id, -EBUSY, "set is being staged or resolved");
		return;
	}
	ret = queue_resolve(server, session, msg, set, set_id, true, NGNFS_SET_COMMITTED,
			    NGNFS_SET_COMMITTED);
	if (ret)
		refuse_set(session, msg, set_id, ret, "cannot build the commit batch");
}

/* ---- RESOLVE -------------------------------------------------------------- */

void sets_handle_resolve(struct session *session, const struct ngnfs_msg *msg)
{
	struct blockd *server = session->server;
	uint64_t set_id = msg->resolve.set_id;
	uint8_t outcome = known_outcome(server, set_id);
	struct staged_set *set = u64map_get(&server->sets, set_id);
	int ret;

	if (set && (set->state != SET_STAGED || set->pending_stages)) {
		refuse_set(session, msg, set_id, -EBUSY, "set is being staged or resolved");
		return;
	}
	switch (msg->resolve.outcome) {
	case NGNFS_SET_COMMITTED:
		if (!set) {
			refuse_set(session, msg, set_id, -ENOENT, "no such set staged here");
			return;
		}
		if (is_primary(server, set) && outcome != NGNFS_SET_COMMITTED) {
			refuse_set(session, msg, set_id, -EINVAL,
				   "the primary commits with COMMIT, not RESOLVE");
			return;
		}
		ret = queue_resolve(server, session, msg, set, set_id, true, NGNFS_SET_UNKNOWN,
				    NGNFS_SET_COMMITTED);
		break;
	case NGNFS_SET_ABORTED:
		if (outcome == NGNFS_SET_COMMITTED) {
			refuse_set(session, msg, set_id, -ESTALE, "set was committed");
			return;
		}
		if (!set) {
			refuse_set(session, msg, set_id, -ENOENT, "no such set staged here");
			return;
		}
		ret = queue_resolve(server, session, msg, set, set_id, false,
				    is_primary(server, set) ? NGNFS_SET_ABORTED : NGNFS_SET_UNKNOWN,
				    NGNFS_SET_ABORTED);
		break;
	default:
		/* A participant asks the primary: answer what was recorded, else abort. */
		if (outcome) {
			ret = queue_resolve(server, session, msg, NULL, set_id, false,
					    NGNFS_SET_UNKNOWN, outcome);
			break;
		}
		if (set && !is_primary(server, set)) {
			refuse_set(session, msg, set_id, -EINVAL,
				   "this device is a participant of the set, not its primary");
			return;
		}
		log_info("set %016llx: nothing recorded, recording ABORTED for %s",
			 (unsigned long long)set_id, session->name);
		ret = queue_resolve(server, session, msg, set, set_id, false, NGNFS_SET_ABORTED,
				    NGNFS_SET_ABORTED);
		break;
	}
	if (ret)
		refuse_set(session, msg, set_id, ret, "cannot build the resolve batch");
}

/* ---- recovery of in-doubt sets -------------------------------------------- */

static void ask_primary(struct blockd *server, struct staged_set *set)
{
	/* At shutdown the stage stays in the store; the next start asks. */
	if (server->shutting_down || !server->resolver)
		return;
	set->asking = true;
	set->last_ask_ms = blockd_now_ms();
	log_info("set %016llx in doubt: asking primary device %u", (unsigned long long)set->set_id,
		 set->participants[0]);
	resolver_ask(server, set->set_id, set->participants[0]);
}

void sets_session_gone(struct blockd *server, struct session *session)
{
	size_t count;
	uint64_t *keys = u64map_keys(&server->sets, &count);

	for (size_t i = 0; i < count; i++) {
		struct staged_set *set = u64map_get(&server->sets, keys[i]);

		if (!set)
			continue;
		if (session && set->session == session)
			set->session = NULL;
		if (set->session || set->state != SET_STAGED || set->pending_stages ||
		    set->asking || !set->durable || is_primary(server, set))
			continue;
		ask_primary(server, set);
	}
	free(keys);
}

void sets_tick(struct blockd *server)
{
	uint64_t now = blockd_now_ms();
	size_t count;
	uint64_t *keys = u64map_keys(&server->sets, &count);

	for (size_t i = 0; i < count; i++) {
		struct staged_set *set = u64map_get(&server->sets, keys[i]);
		bool old;

		if (!set || set->state != SET_STAGED || set->pending_stages || set->asking ||
		    !set->durable)
			continue;
		old = now - set->created_ms >= server->config.resolve_timeout_ms;
		if (is_primary(server, set) && known_outcome(server, set->set_id)) {
			/*
			 * The outcome is on disk but the stage is still there: a
			 * resolution whose batch failed, or a store written
			 * before drops were persisted.  Finish it now rather
			 * than keep its blocks pinned until the timeout.
			 */
			uint8_t outcome = known_outcome(server, set->set_id);

			log_warn("set %016llx: own stage still present with %s recorded; "
				 "finishing its resolution",
				 (unsigned long long)set->set_id, outcome_name(outcome));
			if (queue_resolve(server, NULL, NULL, set, set->set_id,
					  outcome == NGNFS_SET_COMMITTED, NGNFS_SET_UNKNOWN,
					  outcome))
				log_error("set %016llx: cannot build the resolve batch",
					  (unsigned long long)set->set_id);
			continue;
		}
		if (is_primary(server, set)) {
			if (!old)
				continue;
			log_warn("set %016llx: own stage unresolved after %llu ms, aborting it",
				 (unsigned long long)set->set_id,
				 (unsigned long long)(now - set->created_ms));
			if (queue_resolve(server, NULL, NULL, set, set->set_id, false,
					  NGNFS_SET_ABORTED, NGNFS_SET_ABORTED))
				log_error("set %016llx: cannot build the abort batch",
					  (unsigned long long)set->set_id);
			continue;
		}
		if ((set->session == NULL || old) && now - set->last_ask_ms >= 1000)
			ask_primary(server, set);
	}
	free(keys);
}

void sets_resolved(struct blockd *server, uint64_t set_id, int status, uint8_t outcome)
{
	struct staged_set *set = u64map_get(&server->sets, set_id);

	if (!set)
		return; /* resolved by the client meanwhile */
	set->asking = false;
	if (status) {
		log_warn("set %016llx: cannot learn its outcome from primary device %u: %s; will "
			 "ask again",
			 (unsigned long long)set_id, set->participants[0], strerror(-status));
		return;
	}
	if (set->state != SET_STAGED || set->pending_stages)
		return;
	if (outcome != NGNFS_SET_COMMITTED && outcome != NGNFS_SET_ABORTED) {
		log_warn("set %016llx: primary device %u answered %s; will ask again",
			 (unsigned long long)set_id, set->participants[0], outcome_name(outcome));
		return;
	}
	log_info("set %016llx: primary device %u says %s", (unsigned long long)set_id,
		 set->participants[0], outcome_name(outcome));
	if (queue_resolve(server, NULL, NULL, set, set_id, outcome == NGNFS_SET_COMMITTED,
			  NGNFS_SET_UNKNOWN, outcome))
		log_error("set %016llx: cannot build the %s batch", (unsigned long long)set_id,
			  outcome == NGNFS_SET_COMMITTED ? "apply" : "drop");
}

/* ---- loading at start ----------------------------------------------------- */

static int load_outcome(const uint8_t *key, size_t key_length, const uint8_t *value,
			size_t value_length, void *arg)
{
	struct blockd *server = arg;
	struct ngnfs_store_outcome record;

	if (key_length != NGNFS_STORE_SET_KEY_SIZE || value_length != sizeof(record))
		return 0;
	memcpy(&record, value, sizeof(record));
	return u64map_put(&server->outcomes, store_be64(key + 1),
			  (void *)(uintptr_t)record.outcome);
}

static int load_stage(const uint8_t *key, size_t key_length, const uint8_t *value,
		      size_t value_length, void *arg)
{
	struct blockd *server = arg;
	struct ngnfs_store_stage header_copy;
	const struct ngnfs_store_stage *header = &header_copy;
	uint16_t participants[NGNFS_MSG_MAX_PARTICIPANTS];
	uint16_t participant_count;
	struct staged_set *set;

	if (key_length != NGNFS_STORE_SET_KEY_SIZE || value_length != sizeof(header_copy))
		return 0;
	memcpy(&header_copy, value, sizeof(header_copy));
	participant_count = le16toh(header->participant_count);
	if (participant_count == 0 || participant_count > NGNFS_MSG_MAX_PARTICIPANTS)
		return 0;
	for (uint16_t i = 0; i < participant_count; i++)
		participants[i] = le16toh(header->participants[i]);
	set = set_create(server, store_be64(key + 1), participants, participant_count);
	if (!set)
		return -ENOMEM;
	set->durable = true;
	return 0;
}

static int load_staged_block(const uint8_t *key, size_t key_length, const uint8_t *value,
			     size_t value_length, void *arg)
{
	struct blockd *server = arg;
	struct staged_set *set;

	(void)value;
	(void)value_length;
	if (key_length != NGNFS_STORE_STAGED_KEY_SIZE)
		return 0;
	set = u64map_get(&server->sets, store_be64(key + 1));
	if (!set)
		return 0;
	return set_pin(server, set,
		       ngnfs_blkno_make(server->store.device_index, store_be64(key + 9)), true);
}

int sets_load(struct blockd *server)
{
	uint8_t prefix;
	int ret;

	prefix = NGNFS_STORE_KEY_OUTCOME;
	ret = store_walk(&server->store, &prefix, 1, load_outcome, server);
	if (!ret) {
		prefix = NGNFS_STORE_KEY_STAGE;
		ret = store_walk(&server->store, &prefix, 1, load_stage, server);
	}
	if (!ret) {
		prefix = NGNFS_STORE_KEY_STAGED;
		ret = store_walk(&server->store, &prefix, 1, load_staged_block, server);
	}
	if (!ret && server->sets.count)
		log_info("%zu staged sets found in the store; resolving them", server->sets.count);
	return ret;
}

void sets_free(struct blockd *server)
{
	size_t count;
	uint64_t *keys = u64map_keys(&server->sets, &count);

	for (size_t i = 0; i < count; i++) {
		struct staged_set *set = u64map_remove(&server->sets, keys[i]);

		free(set->blknos);
		free(set);
	}
	free(keys);
	u64map_free(&server->sets);
	u64map_free(&server->outcomes);
}
