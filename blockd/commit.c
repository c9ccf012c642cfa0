/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The group commit thread (see commit.h).
 *
 * Batches form a queue: the tail gathers new requests until it holds
 * max_batch of them, then a new tail starts, so that one enormous burst
 * still reaches the disk in bounded writes.  The thread always takes the
 * head; while it syncs, the tail keeps gathering, which is what makes
 * the batches large under load without any timer.
 *
 * A failed write stops the process (commit.h says why): the one exit is
 * store_failed(), so that no path answers from a state the disk lacks.
 */

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "commit.h"
#include "commit_log.h"
#include "log.h"

struct commit_batch {
	struct commit_batch *next;
	rocksdb_writebatch_t *batch;
	struct commit_op *ops_head;
	struct commit_op *ops_tail;
	uint32_t op_count;
};

static struct commit_batch *batch_create(void)
{
	struct commit_batch *batch = calloc(1, sizeof(*batch));

	if (!batch)
		abort(); /* a lost write is worse than a crash the supervisor restarts */
	batch->batch = rocksdb_writebatch_create();
	return batch;
}

static void store_failed(const struct commit_batch *batch, const char *error)
{
	log_error("group commit of %u requests failed: %s; stopping (exit status %d) with "
		  "none of them answered: the next start recovers what is durable, and "
		  "clients resend what they have not seen committed",
		  batch->op_count, error, BLOCKD_EXIT_STORE_FAILED);
	_exit(BLOCKD_EXIT_STORE_FAILED);
}

static void *commit_thread(void *arg)
{
	struct committer *committer = arg;

	pthread_mutex_lock(&committer->lock);
	for (;;) {
		struct commit_batch *batch = committer->queue_head;
		char *error = NULL;

		if (!batch || batch->op_count == 0) {
			if (committer->stopping)
				break;
			pthread_cond_wait(&committer->wake, &committer->lock);
			continue;
		}
		committer->queue_head = batch->next;
		if (!committer->queue_head)
			committer->queue_tail = NULL;
		batch->next = NULL;
		pthread_mutex_unlock(&committer->lock);

		if (committer->delay_ms)
			usleep(committer->delay_ms * 1000U);
		if (committer->fail_at && committer->batches + 1 == committer->fail_at)
			store_failed(batch, "injected by --fail-commit-at (tests only)");
		/* an empty batch only waits for what was queued before it (commit.h) */
		if (rocksdb_writebatch_count(batch->batch) > 0) {
			if (committer->log)
				commit_log_write(committer->log, committer->db, batch->batch,
						 &error);
			else
				rocksdb_write(committer->db, committer->write_options, batch->batch,
					      &error);
		}
		if (error)
			store_failed(batch, error);

		pthread_mutex_lock(&committer->lock);
		committer->batches++;
		committer->ops += batch->op_count;
		if (committer->done_tail)
			committer->done_tail->next = batch;
		else
			committer->done_head = batch;
		committer->done_tail = batch;
		if (committer->done_event)
			event_active(committer->done_event, EV_READ, 0);
	}
	pthread_mutex_unlock(&committer->lock);
	return NULL;
}

static void complete_done(struct committer *committer)
{
	struct commit_batch *batch;

	pthread_mutex_lock(&committer->lock);
	batch = committer->done_head;
	committer->done_head = committer->done_tail = NULL;
	pthread_mutex_unlock(&committer->lock);

	while (batch) {
		struct commit_batch *next = batch->next;
		struct commit_op *op = batch->ops_head;

		while (op) {
			struct commit_op *next_op = op->next;

			committer->pending--;
			op->done(op);
			op = next_op;
		}
		rocksdb_writebatch_destroy(batch->batch);
		free(batch);
		batch = next;
	}
}

static void done_callback(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	complete_done(arg);
}

int commit_start(struct committer *committer, rocksdb_t *db, struct commit_log *log, bool sync,
		 uint32_t max_batch, uint32_t delay_ms, uint32_t fail_at, struct event_base *base)
{
	int ret;

	memset(committer, 0, sizeof(*committer));
	committer->db = db;
	committer->log = sync ? log : NULL;
	committer->max_batch = max_batch;
	committer->delay_ms = delay_ms;
	committer->fail_at = fail_at;
	committer->write_options = rocksdb_writeoptions_create();
	rocksdb_writeoptions_set_sync(committer->write_options, sync);
	pthread_mutex_init(&committer->lock, NULL);
	pthread_cond_init(&committer->wake, NULL);
	committer->done_event = event_new(base, -1, 0, done_callback, committer);
	if (!committer->done_event)
		return -ENOMEM;
	ret = -pthread_create(&committer->thread, NULL, commit_thread, committer);
	if (ret) {
		log_error("cannot start the commit thread: %s", strerror(-ret));
		return ret;
	}
	committer->running = true;
	return 0;
}

void commit_stop(struct committer *committer)
{
	if (committer->running) {
		pthread_mutex_lock(&committer->lock);
		committer->stopping = true;
		pthread_cond_signal(&committer->wake);
		pthread_mutex_unlock(&committer->lock);
		pthread_join(committer->thread, NULL);
		committer->running = false;
	}
	complete_done(committer);
	/* Nothing can still be queued: the thread drains before it exits. */
	while (committer->queue_head) {
		struct commit_batch *batch = committer->queue_head;

		committer->queue_head = batch->next;
		rocksdb_writebatch_destroy(batch->batch);
		free(batch);
	}
	if (committer->done_event)
		event_free(committer->done_event);
	committer->done_event = NULL;
	if (committer->write_options)
		rocksdb_writeoptions_destroy(committer->write_options);
	committer->write_options = NULL;
	pthread_mutex_destroy(&committer->lock);
	pthread_cond_destroy(&committer->wake);
}

rocksdb_writebatch_t *commit_begin(struct committer *committer)
{
	struct commit_batch *tail;

	pthread_mutex_lock(&committer->lock);
	tail = committer->queue_tail;
	if (!tail || tail->op_count >= committer->max_batch) {
		struct commit_batch *batch = batch_create();

		if (tail)
			tail->next = batch;
		else
			committer->queue_head = batch;
		committer->queue_tail = batch;
		tail = batch;
	}
	return tail->batch;
}

void commit_end(struct committer *committer, struct commit_op *op)
{
	struct commit_batch *tail = committer->queue_tail;

	op->next = NULL;
	if (tail->ops_tail)
		tail->ops_tail->next = op;
	else
		tail->ops_head = op;
	tail->ops_tail = op;
	tail->op_count++;
	committer->pending++;
	pthread_cond_signal(&committer->wake);
	pthread_mutex_unlock(&committer->lock);
}
