/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Handlers for the requests that touch one device: HELLO, FORMAT, GET,
 * RELEASE, WRITE (phase SINGLE), ALLOC, CMPXCHG, READ_INCOHERENT and
 * STATFS.  Staged sets (STAGE, COMMIT, RESOLVE) live in sets.c.
 *
 * Every handler checks everything it can on the event loop first, so a
 * refused request changes nothing and says why in one log line naming
 * the block and the session; what passes becomes a write batch for the
 * commit thread, and the reply and the in-memory effects (releases,
 * identity) wait for that batch to be durable.
 *
 * XXX:
 *  - CMPXCHG does not wait for readers: it revokes them after the write,
 *    so a reader may briefly hold a copy older than the repaired block.
 */

#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "blockd.h"
#include "log.h"

static const uint8_t zero_fs_id[NGNFS_FS_ID_SIZE];

const char *session_name(struct session *session)
{
	return session ? session->name : "blockd itself";
}

void pending_start(struct pending *pending, struct session *session, uint64_t request_id,
		   enum ngnfs_msg_type request_type, void (*done)(struct commit_op *))
{
	pending->op.done = done;
	pending->session = session;
	pending->request_id = request_id;
	pending->request_type = request_type;
	if (session) {
		session_ref(session);
		session->inflight++;
	}
}

void pending_finish(struct pending *pending)
{
	struct session *session = pending->session;

	if (!session)
		return;
	session->inflight--;
	/* with requests still in flight, a WRITE may still be taken (session.c) */
	if (!session->gone)
		session_resume(session);
	session_put(session);
}

void reply_refused(struct session *session, enum ngnfs_msg_type request_type, uint64_t request_id,
		   int status)
{
	struct ngnfs_buffer buffer;
	const uint8_t *no_data = NULL;

	if (!session || session->gone)
		return;
	ngnfs_buffer_init(&buffer);
	switch (request_type) {
	case NGNFS_MSG_HELLO:
		ngnfs_encode_hello_reply(&buffer, request_id, status, zero_fs_id,
					 session->server->server_instance, 0, 0, 0, 0);
		break;
	case NGNFS_MSG_FORMAT:
		ngnfs_encode_status_reply(&buffer, NGNFS_MSG_FORMAT_REPLY, request_id, status);
		break;
	case NGNFS_MSG_RELEASE:
		ngnfs_encode_status_reply(&buffer, NGNFS_MSG_RELEASE_REPLY, request_id, status);
		break;
	case NGNFS_MSG_WRITE:
		ngnfs_encode_versions_reply(&buffer, NGNFS_MSG_WRITE_REPLY, request_id, status, 0,
					    NULL, NULL, 0);
		break;
	case NGNFS_MSG_COMMIT:
		ngnfs_encode_versions_reply(&buffer, NGNFS_MSG_COMMIT_REPLY, request_id, status, 0,
					    NULL, NULL, 0);
		break;
	case NGNFS_MSG_ALLOC:
		ngnfs_encode_alloc_reply(&buffer, request_id, status, 0, NULL, NULL, 0);
		break;
	case NGNFS_MSG_RESOLVE:
		ngnfs_encode_resolve(&buffer, NGNFS_MSG_RESOLVE_REPLY, request_id, status, 0,
				     NGNFS_SET_UNKNOWN);
		break;
	case NGNFS_MSG_CMPXCHG:
		ngnfs_encode_cmpxchg_reply(&buffer, request_id, status, 0, 0);
		break;
	case NGNFS_MSG_READ_INCOHERENT:
		ngnfs_encode_read_incoherent_reply(&buffer, request_id, status, NULL, NULL, NULL,
						   &no_data, 0);
		break;
	case NGNFS_MSG_STATFS:
		ngnfs_encode_statfs_reply(&buffer, request_id, status,
					  &(struct ngnfs_statfs_figures){ 0 });
		break;
	default:
		ngnfs_encode_error(&buffer, request_id, status, "request refused");
		break;
	}
	session_send(session, &buffer);
	ngnfs_buffer_free(&buffer);
}

int blockd_check_blkno(struct blockd *server, uint64_t blkno)
{
	if (ngnfs_blkno_device(blkno) != server->store.device_index)
		return -EXDEV;
	if (ngnfs_blkno_index(blkno) >= server->store.total_blocks)
		return -ERANGE;
	return 0;
}

static const char *blkno_why(int ret)
{
	return ret == -EXDEV ? "block number names another device"
			     : "block number beyond the device's capacity";
}

int request_check_write(struct blockd *server, struct session *session, uint64_t blkno,
			uint64_t base_version, const char **why)
{
	struct block_state *block;
	uint64_t version;
	int ret = blockd_check_blkno(server, blkno);

	if (ret) {
		*why = blkno_why(ret);
		return ret;
	}
	if (!grant_holds_write(server, session, blkno)) {
		*why = "session does not hold write access";
		return -EPERM;
	}
	block = block_state_get(server, blkno, false);
	if (block && block->pin) {
		*why = "block belongs to a staged set that is not resolved";
		return -EBUSY;
	}
	ret = alloc_check_write(server, ngnfs_blkno_index(blkno));
	if (ret) {
		*why = "block lies too far above the high-water mark";
		return ret;
	}
	ret = store_read_block(&server->store, ngnfs_blkno_index(blkno), &version, NULL);
	if (ret) {
		*why = "stored block fails its checksum";
		return ret;
	}
	if (version != base_version) {
		*why = "base version is not the current version";
		return -ESTALE;
	}
	return 0;
}

int request_check_free(struct blockd *server, struct session *session, uint64_t blkno,
		       const char **why)
{
	struct block_state *block;
	int ret = blockd_check_blkno(server, blkno);

	if (ret) {
		*why = blkno_why(ret);
		return ret;
	}
	if (!grant_holds_write(server, session, blkno)) {
		*why = "session does not hold write access to the block it frees";
		return -EPERM;
	}
	block = block_state_get(server, blkno, false);
	if (block && block->pin) {
		*why = "block belongs to a staged set that is not resolved";
		return -EBUSY;
	}
	if (alloc_check_free(server, ngnfs_blkno_index(blkno))) {
		*why = "block to free is not allocated";
		return -EINVAL;
	}
	return 0;
}

/* ---- HELLO and FORMAT ---------------------------------------------------- */

static void handle_hello(struct session *session, const struct ngnfs_msg *msg)
{
	struct blockd *server = session->server;
	struct blockd_store *store = &server->store;
	struct ngnfs_buffer buffer;
	uint32_t grace_left = 0;
	int status = 0;
	const char *why = NULL;

	if (msg->hello.protocol_version != NGNFS_PROTOCOL_VERSION) {
		status = -EPROTONOSUPPORT;
		why = "protocol version not supported";
	} else if (store->formatted && memcmp(msg->hello.fs_id, zero_fs_id, NGNFS_FS_ID_SIZE) &&
		   memcmp(msg->hello.fs_id, store->fs_id, NGNFS_FS_ID_SIZE)) {
		status = -ESTALE;
		why = "fs id is not this device's filesystem";
	} else if (!store->formatted && !(msg->hello.flags & NGNFS_HELLO_FORMAT)) {
		status = -ENODEV;
		why = "device is not formatted and the session did not ask to format it";
	}
	if (status) {
		log_warn("HELLO refused for %s (client %016llx): %s (%s)", session->name,
			 (unsigned long long)msg->hello.client_id, why, strerror(-status));
		reply_refused(session, NGNFS_MSG_HELLO, msg->request_id, status);
		session->closing = true;
		return;
	}
	session->client_id = msg->hello.client_id;
	session->flags = msg->hello.flags;
	if (!session->hello_done) {
		log_info("%s started (client %016llx%s%s%s)", session->name,
			 (unsigned long long)session->client_id,
			 session->flags & NGNFS_HELLO_FORMAT ? ", format" : "",
			 session->flags & NGNFS_HELLO_RECLAIM ? ", reclaim" : "",
			 session->flags & NGNFS_HELLO_PEER ? ", peer" : "");
		session_hello_received(session);
	}
	session->hello_done = true;
	if (server->in_grace) {
		uint64_t elapsed = blockd_now_ms() - server->start_ms;

		grace_left = elapsed < server->config.grace_ms
				 ? (uint32_t)(server->config.grace_ms - elapsed)
				 : 0;
	}
	ngnfs_buffer_init(&buffer);
	ngnfs_encode_hello_reply(
	    &buffer, msg->request_id, 0, store->formatted ? store->fs_id : zero_fs_id,
	    server->server_instance, store->formatted ? NGNFS_HELLO_REPLY_FORMATTED : 0, grace_left,
	    store->formatted ? store->device_index : 0, store->formatted ? store->device_count : 0);
	session_send(session, &buffer);
	ngnfs_buffer_free(&buffer);
}

struct format_pending {
	struct pending pending;
	uint8_t fs_id[NGNFS_FS_ID_SIZE];
	uint16_t device_index;
	uint32_t device_count;
};

static void format_done(struct commit_op *op)
{
	struct format_pending *format = (struct format_pending *)op;
	struct blockd *server = format->pending.session->server;
	struct blockd_store *store = &server->store;

	server->formatting = false;
	memcpy(store->fs_id, format->fs_id, NGNFS_FS_ID_SIZE);
	store->device_index = format->device_index;
	store->device_count = format->device_count;
	store->formatted = true;
	blockd_log_set_device(store->device_index);
	log_info("formatted as device %u of %u by %s", store->device_index, store->device_count,
		 format->pending.session->name);
	reply_refused(format->pending.session, NGNFS_MSG_FORMAT, format->pending.request_id, 0);
	pending_finish(&format->pending);
	free(format);
}

static void handle_format(struct session *session, const struct ngnfs_msg *msg)
{
	struct blockd *server = session->server;
	struct blockd_store *store = &server->store;
	struct blockd_store identity;
	struct format_pending *format;
	rocksdb_writebatch_t *batch;
	const char *why = NULL;
	int status = 0;

	if (store->formatted || server->formatting) {
		status = -EEXIST;
		why = "device is already formatted";
	} else if (!(session->flags & NGNFS_HELLO_FORMAT)) {
		status = -EPERM;
		why = "session did not say NGNFS_HELLO_FORMAT";
	} else if (msg->format.device_count == 0 ||
		   msg->format.device_index >= msg->format.device_count ||
		   msg->format.device_count > NGNFS_MAX_DEVICES) {
		status = -EINVAL;
		why = "device index must be below a device count of 1 to 65536";
	} else if (!memcmp(msg->format.fs_id, zero_fs_id, NGNFS_FS_ID_SIZE)) {
		status = -EINVAL;
		why = "fs id is all zero";
	}
	if (status) {
		log_warn("FORMAT as device %u of %u refused for %s: %s", msg->format.device_index,
			 msg->format.device_count, session->name, why);
		reply_refused(session, NGNFS_MSG_FORMAT, msg->request_id, status);
		return;
	}
	format = calloc(1, sizeof(*format));
	if (!format) {
		reply_refused(session, NGNFS_MSG_FORMAT, msg->request_id, -ENOMEM);
		return;
	}
	memcpy(format->fs_id, msg->format.fs_id, NGNFS_FS_ID_SIZE);
	format->device_index = msg->format.device_index;
	format->device_count = msg->format.device_count;
	identity = *store;
	memcpy(identity.fs_id, format->fs_id, NGNFS_FS_ID_SIZE);
	identity.device_index = format->device_index;
	identity.device_count = format->device_count;
	identity.formatted = true;
	server->formatting = true;
	pending_start(&format->pending, session, msg->request_id, NGNFS_MSG_FORMAT, format_done);
	batch = commit_begin(&server->committer);
	store_put_identity(batch, &identity);
	commit_end(&server->committer, &format->pending.op);
}

/* ---- GET and RELEASE ----------------------------------------------------- */

static void handle_get(struct session *session, const struct ngnfs_msg *msg)
{
	struct blockd *server = session->server;

	for (uint32_t i = 0; i < msg->get.count; i++) {
		uint64_t blkno, cached_version;
		uint8_t access;
		int status = 0;
		const char *why = NULL;

		ngnfs_msg_get_entry(msg, i, &blkno, &cached_version, &access);
		if (!server->store.formatted) {
			status = -ENODEV;
			why = "device is not formatted";
		} else if (access != NGNFS_ACCESS_READ && access != NGNFS_ACCESS_WRITE) {
			status = -EINVAL;
			why = "access must be read or write";
		} else {
			status = blockd_check_blkno(server, blkno);
			if (status)
				why = blkno_why(status);
		}
		if (!status)
			status = grant_queue_get(server, session, msg->request_id, blkno,
						 cached_version, access);
		if (status) {
			struct ngnfs_buffer buffer;

			log_warn("GET of block %llu refused for %s: %s (%s)",
				 (unsigned long long)blkno, session->name,
				 why ? why : "out of memory", strerror(-status));
			ngnfs_buffer_init(&buffer);
			ngnfs_encode_grant(&buffer, msg->request_id, status, blkno, 0,
					   NGNFS_ACCESS_NONE, NULL);
			session_send(session, &buffer);
			ngnfs_buffer_free(&buffer);
		}
	}
}

static void handle_release(struct session *session, const struct ngnfs_msg *msg)
{
	for (uint32_t i = 0; i < msg->release.count; i++) {
		uint64_t blkno;
		uint8_t keep;

		ngnfs_msg_release_entry(msg, i, &blkno, &keep);
		grant_release(session->server, session, blkno,
			      keep == NGNFS_ACCESS_READ ? NGNFS_ACCESS_READ : NGNFS_ACCESS_NONE);
	}
	reply_refused(session, NGNFS_MSG_RELEASE, msg->request_id, 0);
}

/* ---- WRITE (single device) ----------------------------------------------- */

/*
 * A set on this device too large for one frame arrives as up to
 * NGNFS_WRITE_MAX_FRAMES frames back to back on one session.  The frames
 * before the last are copied into the session and not answered, and
 * nothing of them is checked yet: a check now could be overtaken by
 * another session's write before the batch exists.  The last frame checks
 * all of them as one write and puts them in one batch, so a held write is
 * applied whole or not at all, like a one-frame WRITE, and a session that
 * ends before its last frame leaves nothing behind (request_session_gone).
 */
struct held_frame {
	struct ngnfs_msg msg; /* write.blocks and write.frees point into bytes */
	uint8_t *bytes;
};

struct held_write {
	uint64_t set_id;
	uint16_t frame_count;
	uint16_t held_count;
	uint32_t flags;
	uint8_t release_access;
	struct held_frame frames[NGNFS_WRITE_MAX_FRAMES - 1];
};

/* Each frame of a write is answered with the versions of its own blocks. */
struct write_frame_reply {
	uint64_t request_id;
	uint32_t first;
	uint32_t count;
};

struct write_pending {
	struct pending pending;
	uint8_t release;
	uint8_t release_access;
	uint32_t count;
	uint64_t *blknos;
	uint64_t *versions;
	uint32_t frame_count;
	struct write_frame_reply frames[NGNFS_WRITE_MAX_FRAMES];
};

static void write_done(struct commit_op *op)
{
	struct write_pending *write = (struct write_pending *)op;
	struct session *session = write->pending.session;
	struct blockd *server = session->server;
	struct ngnfs_buffer buffer;

	for (uint32_t i = 0; i < write->count; i++) {
		struct block_state *block = block_state_get(server, write->blknos[i], false);

		if (block) {
			block->pending_writes--;
			/* grants waiting for it (grant.c); frees the state when unused */
			grant_examine(server, block);
		}
	}
	if (!session->gone) {
		ngnfs_buffer_init(&buffer);
		for (uint32_t f = 0; f < write->frame_count; f++) {
			const struct write_frame_reply *frame = &write->frames[f];

			ngnfs_buffer_reset(&buffer);
			ngnfs_encode_versions_reply(&buffer, NGNFS_MSG_WRITE_REPLY,
						    frame->request_id, 0, 0,
						    write->blknos + frame->first,
						    write->versions + frame->first, frame->count);
			session_send(session, &buffer);
		}
		ngnfs_buffer_free(&buffer);
		if (write->release) {
			for (uint32_t i = 0; i < write->count; i++)
				grant_release(server, session, write->blknos[i],
					      write->release_access);
		}
	}
	session->inflight_writes--;
	pending_finish(&write->pending);
	free(write->blknos);
	free(write);
}

static int check_duplicates(const uint64_t *blknos, uint32_t count, uint64_t *duplicate)
{
	struct u64map seen;
	int ret = 0;

	u64map_init(&seen);
	for (uint32_t i = 0; i < count && !ret; i++) {
		if (u64map_get(&seen, blknos[i])) {
			*duplicate = blknos[i];
			ret = -EINVAL;
		} else if (u64map_put(&seen, blknos[i], (void *)1)) {
			ret = -ENOMEM;
		}
	}
	u64map_free(&seen);
	return ret;
}

static void refuse_frames(struct session *session, const struct ngnfs_msg *const *frames,
			  uint32_t frame_count, int status)
{
	for (uint32_t f = 0; f < frame_count; f++)
		reply_refused(session, NGNFS_MSG_WRITE, frames[f]->request_id, status);
}

/* Check the frames of one set as one write and queue its batch. */
static void write_apply(struct session *session, const struct ngnfs_msg *const *frames,
			uint32_t frame_count)
{
	struct blockd *server = session->server;
	const struct ngnfs_msg *last = frames[frame_count - 1];
	uint32_t count = 0, total = 0, position = 0;
	struct write_pending *write;
	rocksdb_writebatch_t *batch;
	uint64_t *all;
	uint64_t bad = 0;
	const char *why = NULL;
	int status = 0;

	for (uint32_t f = 0; f < frame_count; f++) {
		count += frames[f]->write.block_count;
		total += frames[f]->write.block_count + frames[f]->write.free_count;
	}
	write = calloc(1, sizeof(*write));
	all = calloc(total ? total : 1, sizeof(uint64_t) * 2);
	if (!write || !all) {
		free(write);
		free(all);
		refuse_frames(session, frames, frame_count, -ENOMEM);
		return;
	}
	write->blknos = all;
	write->versions = all + total;
	write->frame_count = frame_count;
	for (uint32_t f = 0; f < frame_count; f++) {
		write->frames[f] =
		    (struct write_frame_reply){ .request_id = frames[f]->request_id,
						.first = position,
						.count = frames[f]->write.block_count };
		for (uint32_t i = 0; i < frames[f]->write.block_count; i++, position++)
			ngnfs_msg_write_block(frames[f], i, &all[position],
					      &write->versions[position]);
	}
	for (uint32_t f = 0; f < frame_count; f++) {
		for (uint32_t i = 0; i < frames[f]->write.free_count; i++, position++)
			all[position] = ngnfs_msg_write_free(frames[f], i);
	}

	if (!server->store.formatted) {
		status = -ENODEV;
		why = "device is not formatted";
	} else if (check_duplicates(all, total, &bad)) {
		status = -EINVAL;
		why = "block appears twice in one write";
	}
	for (uint32_t i = 0; i < count && !status; i++) {
		bad = all[i];
		status = request_check_write(server, session, all[i], write->versions[i], &why);
	}
	for (uint32_t i = count; i < total && !status; i++) {
		bad = all[i];
		status = request_check_free(server, session, all[i], &why);
	}
	if (status) {
		if (frame_count > 1)
			log_warn("WRITE of block %llu refused for %s: %s (%s); refusing all %u "
				 "frames of set %016llx",
				 (unsigned long long)bad, session->name, why, strerror(-status),
				 frame_count, (unsigned long long)last->write.set_id);
		else
			log_warn("WRITE of block %llu refused for %s: %s (%s)",
				 (unsigned long long)bad, session->name, why, strerror(-status));
		refuse_frames(session, frames, frame_count, status);
		free(all);
		free(write);
		return;
	}

	write->count = count;
	write->release = !!(last->write.flags & NGNFS_WRITE_RELEASE);
	write->release_access =
	    last->write.release_access == NGNFS_ACCESS_READ ? NGNFS_ACCESS_READ : NGNFS_ACCESS_NONE;
	pending_start(&write->pending, session, last->request_id, NGNFS_MSG_WRITE, write_done);
	session->inflight_writes++;
	batch = commit_begin(&server->committer);
	position = 0;
	for (uint32_t f = 0; f < frame_count; f++) {
		for (uint32_t i = 0; i < frames[f]->write.block_count; i++, position++) {
			uint64_t blkno, base_version;
			const uint8_t *data =
			    ngnfs_msg_write_block(frames[f], i, &blkno, &base_version);
			struct block_state *block = block_state_get(server, blkno, false);

			write->versions[position] = base_version + 1;
			store_put_block(batch, ngnfs_blkno_index(blkno), write->versions[position],
					data);
			/*
			 * Only now, with the batch: a high-water mark noted when
			 * an early frame arrived could be overtaken by another
			 * session's commit.
			 */
			alloc_note_write(server, batch, ngnfs_blkno_index(blkno));
			block->pending_writes++;
		}
	}
	for (uint32_t i = count; i < total; i++)
		alloc_note_free(server, batch, ngnfs_blkno_index(all[i]));
	commit_end(&server->committer, &write->pending.op);
}

static void held_write_free(struct session *session)
{
	struct held_write *held = session->held_write;

	if (!held)
		return;
	for (uint16_t f = 0; f < held->held_count; f++)
		free(held->frames[f].bytes);
	free(held);
	session->held_write = NULL;
}

void request_session_gone(struct session *session)
{
	if (session->held_write)
		log_warn("%s ended with %u of %u frames of set %016llx held: the set is not "
			 "written",
			 session->name, session->held_write->held_count,
			 session->held_write->frame_count,
			 (unsigned long long)session->held_write->set_id);
	held_write_free(session);
}

/*
 * Take msg into the session's held write: 1 when it is held (not the last
 * frame), 0 when it is the last frame of the held write, or a negative
 * errno when it does not continue the held write (or there is none and it
 * is not a frame 0).
 */
static int hold_frame(struct session *session, const struct ngnfs_msg *msg, const char **why)
{
	struct held_write *held = session->held_write;
	struct held_frame *frame;
	size_t block_bytes = (size_t)msg->write.block_count * NGNFS_WRITE_BLOCK_STRIDE;
	size_t free_bytes = (size_t)msg->write.free_count * sizeof(uint64_t);

	if (!held) {
		if (msg->write.frame_index != 0) {
			*why = "frame is not frame 0 and no write of several frames is held";
			return -EINVAL;
		}
		held = calloc(1, sizeof(*held));
		if (!held) {
			*why = "out of memory";
			return -ENOMEM;
		}
		held->set_id = msg->write.set_id;
		held->frame_count = msg->write.frame_count;
		held->flags = msg->write.flags;
		held->release_access = msg->write.release_access;
		session->held_write = held;
	} else if (msg->write.set_id != held->set_id ||
		   msg->write.frame_count != held->frame_count ||
		   msg->write.frame_index != held->held_count || msg->write.flags != held->flags ||
		   msg->write.release_access != held->release_access) {
		*why = "frame is not the next frame of the held write";
		return -EINVAL;
	}
	if (msg->write.frame_index + 1 == msg->write.frame_count)
		return 0;

	frame = &held->frames[held->held_count];
	frame->bytes = malloc(block_bytes + free_bytes + 1);
	if (!frame->bytes) {
		*why = "out of memory";
		return -ENOMEM;
	}
	memcpy(frame->bytes, msg->write.blocks, block_bytes);
	memcpy(frame->bytes + block_bytes, msg->write.frees, free_bytes);
	frame->msg = *msg;
	frame->msg.write.participants = NULL;
	frame->msg.write.blocks = frame->bytes;
	frame->msg.write.frees = (const __le64 *)(frame->bytes + block_bytes);
	held->held_count++;
	return 1;
}

static void handle_write_single(struct session *session, const struct ngnfs_msg *msg)
{
	const struct ngnfs_msg *frames[NGNFS_WRITE_MAX_FRAMES];
	struct held_write *held;
	uint32_t frame_count = 0;
	const char *why = NULL;
	int ret = 0;

	if (session->held_write || msg->write.frame_count > 1) {
		ret = hold_frame(session, msg, &why);
		if (ret == 1)
			return;
	}
	held = session->held_write;
	for (uint16_t f = 0; held && f < held->held_count; f++)
		frames[frame_count++] = &held->frames[f].msg;
	frames[frame_count++] = msg;
	if (ret < 0) {
		log_warn("WRITE frame %u of %u of set %016llx refused for %s: %s (%s); held "
			 "frames refused with it: %u",
			 msg->write.frame_index, msg->write.frame_count,
			 (unsigned long long)msg->write.set_id, session->name, why, strerror(-ret),
			 frame_count - 1);
		refuse_frames(session, frames, frame_count, ret);
	} else {
		write_apply(session, frames, frame_count);
	}
	held_write_free(session);
}

/* ---- ALLOC, CMPXCHG, READ_INCOHERENT, STATFS ----------------------------- */

static void handle_alloc(struct session *session, const struct ngnfs_msg *msg)
{
	struct blockd *server = session->server;
	uint64_t indexes[NGNFS_MSG_MAX_BLOCKS];
	uint64_t blknos[NGNFS_MSG_MAX_BLOCKS];
	uint64_t versions[NGNFS_MSG_MAX_BLOCKS];
	uint32_t want = msg->alloc.count;
	uint32_t got, used = 0;
	struct ngnfs_buffer buffer;
	int ret;

	if (!server->store.formatted) {
		log_warn("ALLOC of %u blocks refused for %s: device is not formatted", want,
			 session->name);
		reply_refused(session, NGNFS_MSG_ALLOC, msg->request_id, -ENODEV);
		return;
	}
	if (server->in_grace) {
		/*
		 * A block a client reserved before the restart and has not
		 * written yet is free here again, but that client still holds
		 * a change to it (a create) and is about to reclaim it: handing
		 * it to anyone, the reclaimer included, would give one block
		 * two owners.  Try again after the grace period.
		 */
		log_debug("ALLOC of %u blocks refused for %s: reclaim grace period", want,
			  session->name);
		reply_refused(session, NGNFS_MSG_ALLOC, msg->request_id, -EAGAIN);
		return;
	}
	ret = alloc_session_epoch(server, session);
	if (ret) {
		reply_refused(session, NGNFS_MSG_ALLOC, msg->request_id, ret);
		return;
	}
	if (want > NGNFS_MSG_MAX_BLOCKS)
		want = NGNFS_MSG_MAX_BLOCKS;
	got = alloc_reserve(server, session, want, indexes);
	for (uint32_t i = 0; i < got; i++) {
		uint64_t blkno = ngnfs_blkno_make(server->store.device_index, indexes[i]);
		struct block_state *block;
		uint64_t version;

		if (store_read_block(&server->store, indexes[i], &version, NULL)) {
			log_error("ALLOC skips block %llu: stored block fails its checksum",
				  (unsigned long long)blkno);
			continue;
		}
		block = block_state_get(server, blkno, true);
		if (!block || grant_add_holder(block, session, NGNFS_ACCESS_WRITE))
			continue;
		blknos[used] = blkno;
		versions[used] = version;
		used++;
	}
	if (used == 0 && want > 0)
		log_warn("ALLOC of %u blocks refused for %s: no free space", want, session->name);
	ngnfs_buffer_init(&buffer);
	ngnfs_encode_alloc_reply(&buffer, msg->request_id, used == 0 && want > 0 ? -ENOSPC : 0,
				 session->session_epoch, blknos, versions, used);
	session_send(session, &buffer);
	ngnfs_buffer_free(&buffer);
}

struct cmpxchg_pending {
	struct pending pending;
	uint64_t blkno;
	uint64_t version;
};

static void cmpxchg_done(struct commit_op *op)
{
	struct cmpxchg_pending *cmpxchg = (struct cmpxchg_pending *)op;
	struct session *session = cmpxchg->pending.session;
	struct blockd *server = session->server;
	struct block_state *block = block_state_get(server, cmpxchg->blkno, false);
	struct ngnfs_buffer buffer;

	if (block) {
		block->pending_writes--;
		grant_revoke_readers(server, block, session);
		grant_examine(server, block); /* also frees the state when unused */
	}
	ngnfs_buffer_init(&buffer);
	ngnfs_encode_cmpxchg_reply(&buffer, cmpxchg->pending.request_id, 0, cmpxchg->blkno,
				   cmpxchg->version);
	if (!session->gone)
		session_send(session, &buffer);
	ngnfs_buffer_free(&buffer);
	pending_finish(&cmpxchg->pending);
	free(cmpxchg);
}

static void handle_cmpxchg(struct session *session, const struct ngnfs_msg *msg)
{
	struct blockd *server = session->server;
	uint64_t blkno = msg->cmpxchg.blkno;
	struct cmpxchg_pending *cmpxchg;
	struct block_state *block;
	rocksdb_writebatch_t *batch;
	struct ngnfs_buffer buffer;
	uint64_t version = 0;
	const char *why = NULL;
	int status;

	status = server->store.formatted ? blockd_check_blkno(server, blkno) : -ENODEV;
	if (status)
		why = status == -ENODEV ? "device is not formatted" : blkno_why(status);
	block = block_state_get(server, blkno, false);
	if (!status && block) {
		for (unsigned int i = 0; i < block->holder_count; i++) {
			if (block->holders[i].session != session &&
			    block->holders[i].access == NGNFS_ACCESS_WRITE) {
				status = -EBUSY;
				why = "another session holds write access";
			}
		}
		if (block->pin || block->pending_writes) {
			status = -EBUSY;
			why = "a write of the block is in progress";
		}
	}
	if (!status) {
		status = alloc_check_write(server, ngnfs_blkno_index(blkno));
		if (status)
			why = "block lies too far above the high-water mark";
	}
	if (!status) {
		status = store_read_block(&server->store, ngnfs_blkno_index(blkno), &version, NULL);
		if (status)
			why = "stored block fails its checksum";
	}
	if (!status && version != msg->cmpxchg.expected_version) {
		status = -ESTALE;
		why = "version is not the expected version";
	}
	if (status) {
		log_warn("CMPXCHG of block %llu refused for %s: %s (%s; expected version %llu, "
			 "current %llu)",
			 (unsigned long long)blkno, session->name, why, strerror(-status),
			 (unsigned long long)msg->cmpxchg.expected_version,
			 (unsigned long long)version);
		ngnfs_buffer_init(&buffer);
		ngnfs_encode_cmpxchg_reply(&buffer, msg->request_id, status, blkno, version);
		session_send(session, &buffer);
		ngnfs_buffer_free(&buffer);
		return;
	}
	cmpxchg = calloc(1, sizeof(*cmpxchg));
	block = block_state_get(server, blkno, true);
	if (!cmpxchg || !block) {
		free(cmpxchg);
		reply_refused(session, NGNFS_MSG_CMPXCHG, msg->request_id, -ENOMEM);
		return;
	}
	cmpxchg->blkno = blkno;
	cmpxchg->version = version + 1;
	block->pending_writes++;
	pending_start(&cmpxchg->pending, session, msg->request_id, NGNFS_MSG_CMPXCHG, cmpxchg_done);
	batch = commit_begin(&server->committer);
	store_put_block(batch, ngnfs_blkno_index(blkno), cmpxchg->version, msg->cmpxchg.data);
	alloc_note_write(server, batch, ngnfs_blkno_index(blkno));
	commit_end(&server->committer, &cmpxchg->pending.op);
}

static void handle_read_incoherent(struct session *session, const struct ngnfs_msg *msg)
{
	struct blockd *server = session->server;
	uint32_t count = msg->read_incoherent.count;
	uint64_t *blknos = calloc(count ? count : 1, 2 * sizeof(uint64_t));
	int *statuses = calloc(count ? count : 1, sizeof(int));
	const uint8_t **datas = calloc(count ? count : 1, sizeof(*datas));
	uint8_t *data = malloc((size_t)(count ? count : 1) * NGNFS_BLOCK_SIZE);
	struct ngnfs_buffer buffer;

	if (!blknos || !statuses || !datas || !data) {
		reply_refused(session, NGNFS_MSG_READ_INCOHERENT, msg->request_id, -ENOMEM);
		goto out;
	}
	if (!server->store.formatted) {
		log_warn("READ_INCOHERENT refused for %s: device is not formatted", session->name);
		reply_refused(session, NGNFS_MSG_READ_INCOHERENT, msg->request_id, -ENODEV);
		goto out;
	}
	for (uint32_t i = 0; i < count; i++) {
		uint64_t blkno = ngnfs_msg_read_incoherent_blkno(msg, i);
		uint64_t *version = &blknos[count + i];
		uint8_t *block_data = data + (size_t)i * NGNFS_BLOCK_SIZE;

		blknos[i] = blkno;
		*version = 0;
		statuses[i] = blockd_check_blkno(server, blkno);
		if (!statuses[i])
			statuses[i] = store_read_block(&server->store, ngnfs_blkno_index(blkno),
						       version, block_data);
		if (statuses[i] == -EIO)
			log_error("READ_INCOHERENT of block %llu for %s: stored block fails its "
				  "checksum",
				  (unsigned long long)blkno, session->name);
		else if (statuses[i])
			log_warn("READ_INCOHERENT of block %llu refused for %s: %s",
				 (unsigned long long)blkno, session->name, blkno_why(statuses[i]));
		datas[i] = statuses[i] ? NULL : block_data;
	}
	ngnfs_buffer_init(&buffer);
	ngnfs_encode_read_incoherent_reply(&buffer, msg->request_id, 0, blknos, blknos + count,
					   statuses, datas, count);
	session_send(session, &buffer);
	ngnfs_buffer_free(&buffer);
out:
	free(blknos);
	free(statuses);
	free(datas);
	free(data);
}

/*
 * client_sessions counts the clients connected now (peers resolving a
 * staged set are blockd servers, not clients): the admin tool's orphan
 * reclaim refuses to run while any client but itself is connected.
 */
static uint64_t client_session_count(const struct blockd *server)
{
	const struct session *other;
	uint64_t count = 0;

	for (other = server->sessions.next; other != &server->sessions; other = other->next) {
		if (other->hello_done && !other->gone && !other->closing &&
		    !(other->flags & NGNFS_HELLO_PEER))
			count++;
	}
	return count;
}

static void handle_statfs(struct session *session, const struct ngnfs_msg *msg)
{
	struct blockd *server = session->server;
	struct ngnfs_statfs_figures figures = {
		.total_blocks = server->store.total_blocks,
		.free_blocks = alloc_free_blocks(server),
		.reserved_blocks = server->alloc.reserved.count,
		.staged_sets = server->sets.count,
		.client_sessions = client_session_count(server),
	};
	struct ngnfs_buffer buffer;

	/* the commit thread counts them under its lock */
	pthread_mutex_lock(&server->committer.lock);
	figures.group_commits = server->committer.batches;
	figures.commit_requests = server->committer.ops;
	pthread_mutex_unlock(&server->committer.lock);
	ngnfs_buffer_init(&buffer);
	ngnfs_encode_statfs_reply(&buffer, msg->request_id, 0, &figures);
	session_send(session, &buffer);
	ngnfs_buffer_free(&buffer);
}

void request_dispatch(struct session *session, const struct ngnfs_msg *msg)
{
	struct blockd *server = session->server;

	if (msg->type == NGNFS_MSG_HELLO) {
		handle_hello(session, msg);
		return;
	}
	if (!session->hello_done) {
		log_warn("%s refused for %s: no HELLO yet", ngnfs_msg_type_name(msg->type),
			 session->name);
		reply_refused(session, (enum ngnfs_msg_type)0, msg->request_id, -EPROTO);
		session->closing = true;
		return;
	}
	if (!server->store.formatted && msg->type != NGNFS_MSG_FORMAT &&
	    msg->type != NGNFS_MSG_STATFS && msg->type != NGNFS_MSG_GET) {
		log_warn("%s refused for %s: device is not formatted",
			 ngnfs_msg_type_name(msg->type), session->name);
		reply_refused(session, msg->type, msg->request_id, -ENODEV);
		return;
	}
	switch (msg->type) {
	case NGNFS_MSG_FORMAT:
		handle_format(session, msg);
		break;
	case NGNFS_MSG_GET:
		handle_get(session, msg);
		break;
	case NGNFS_MSG_RELEASE:
		handle_release(session, msg);
		break;
	case NGNFS_MSG_WRITE:
		if (msg->write.phase == NGNFS_WRITE_STAGE)
			sets_handle_stage(session, msg);
		else
			handle_write_single(session, msg);
		break;
	case NGNFS_MSG_COMMIT:
		sets_handle_commit(session, msg);
		break;
	case NGNFS_MSG_RESOLVE:
		sets_handle_resolve(session, msg);
		break;
	case NGNFS_MSG_ALLOC:
		handle_alloc(session, msg);
		break;
	case NGNFS_MSG_CMPXCHG:
		handle_cmpxchg(session, msg);
		break;
	case NGNFS_MSG_READ_INCOHERENT:
		handle_read_incoherent(session, msg);
		break;
	case NGNFS_MSG_STATFS:
		handle_statfs(session, msg);
		break;
	default:
		log_warn("%s refused for %s: not a request a server answers",
			 ngnfs_msg_type_name(msg->type), session->name);
		reply_refused(session, (enum ngnfs_msg_type)0, msg->request_id, -EPROTO);
		session->closing = true;
		break;
	}
}
