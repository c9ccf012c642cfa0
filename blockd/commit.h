/* SPDX-License-Identifier: GPL-2.0-or-later */
#ifndef NGNFS_BLOCKD_COMMIT_H
#define NGNFS_BLOCKD_COMMIT_H

/*
 * Group commit: every change blockd makes to its store goes through one
 * commit thread, which writes everything queued since its last write as
 * ONE RocksDB write batch made durable by one write (a commit log record,
 * commit_log.h, or a synced RocksDB write without it), then hands the
 * requests back to the event loop, which replies and changes in-memory
 * state (grants, versions) only then.
 *
 * The event loop adds its puts directly to the batch being gathered
 * (commit_begin() returns it under the queue lock, commit_end() queues
 * the request that owns them), so nothing is copied twice.  Requests
 * complete in the order they were queued; a request that writes nothing
 * but is queued anyway completes only after everything queued before it
 * is durable, which is how replies that depend on earlier writes (an
 * outcome someone else just recorded) are ordered.
 *
 * A batch RocksDB refuses to write (a disk error, a full disk) ends the
 * process at once with BLOCKD_EXIT_STORE_FAILED, nothing of the batch
 * answered: the event loop has already changed its view (allocation,
 * pending writes) as if the batch would succeed, and a RocksDB whose WAL
 * write failed is in an error state itself, so carrying on would answer
 * from a state the disk does not have.  The next start recovers from what
 * is durable, exactly as after a kill -9, and clients treat the lost
 * answers as writes in doubt (they ask for their grants again and look at
 * the versions).  The supervisor restarts blockd (Restart=on-failure).
 *
 * XXX:
 *  - No time bound on gathering: under light load every request is its
 *    own batch (and its own sync), which is the lowest latency anyway.
 */

#include <event2/event.h>
#include <pthread.h>
#include <rocksdb/c.h>
#include <stdbool.h>
#include <stdint.h>

struct commit_op {
	struct commit_op *next;
	/*
	 * Called on the event loop once the batch is durable (a batch that
	 * fails ends the process instead, see above).
	 */
	void (*done)(struct commit_op *op);
};

struct commit_batch;

/* blockd's exit status after a group commit failed (see above). */
#define BLOCKD_EXIT_STORE_FAILED 3

struct commit_log;

struct committer {
	rocksdb_t *db;
	struct commit_log *log; /* NULL: synced RocksDB writes */
	rocksdb_writeoptions_t *write_options;
	uint32_t max_batch;
	uint32_t delay_ms; /* tests only: widens the window of a write in flight */
	uint32_t fail_at;  /* tests only: this group commit (1 = the first) fails */
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t wake;
	struct commit_batch *queue_head; /* oldest first; the tail is being gathered */
	struct commit_batch *queue_tail;
	struct commit_batch *done_head;
	struct commit_batch *done_tail;
	struct event *done_event;
	bool stopping;
	bool running;
	uint64_t pending; /* queued but not yet completed; event loop only */
	/* counters for the log and STATFS (under lock: the thread adds to them) */
	uint64_t batches;
	uint64_t ops;
};

/* log (NULL for none) makes batches durable when sync is set. */
int commit_start(struct committer *committer, rocksdb_t *db, struct commit_log *log, bool sync,
		 uint32_t max_batch, uint32_t delay_ms, uint32_t fail_at, struct event_base *base);
/* Writes everything still queued, completes it, and joins the thread. */
void commit_stop(struct committer *committer);

/* Event loop only: the batch to add this request's writes to (queue lock held). */
rocksdb_writebatch_t *commit_begin(struct committer *committer);
/* Queue op with the writes added since commit_begin(); drops the lock. */
void commit_end(struct committer *committer, struct commit_op *op);

#endif
