/* SPDX-License-Identifier: GPL-2.0-or-later */
#ifndef NGNFS_BLOCKD_COMMIT_LOG_H
#define NGNFS_BLOCKD_COMMIT_LOG_H

/*
 * The commit log: what makes a group commit durable, in place of a
 * synced RocksDB write.
 *
 * A synced RocksDB write appends to its WAL and syncs it, and because the
 * append changes the file's size the sync is an ext4 journal commit as
 * well, 350-380 us here (docs/performance.md, wal_sync_bench).  The
 * commit log is a file of fixed size, written once with zeros when it is
 * created, and overwritten in place with O_DIRECT | O_DSYNC: a record is
 * one write that needs no metadata, 120-150 us.  The batch is then
 * written to RocksDB without a sync and without RocksDB's own WAL (see
 * commit_log_without_wal); readers see it only after both, as before.
 * RocksDB's memtable flushes make the batches durable in the background;
 * before the log would overwrite a record that RocksDB may not have on
 * disk yet, the writer waits for a flush started half a log earlier (or
 * flushes, or with rocksdb_wal=true syncs RocksDB's WAL), once per lap.
 *
 * Every logged batch also writes the META commit-log record
 * (format-store.h): the sequence number of its log record and where the
 * next record starts.  Since that record is in the same RocksDB batch,
 * whatever prefix of batches RocksDB recovers after a crash, it says
 * which log record comes next, and commit_log_open() applies the records
 * from there as long as each is whole (crc32c) and has the next sequence
 * number; the first that is not is where the log ends.  A record of an
 * older lap has an older sequence number and is never taken for a new
 * one.
 *
 * A batch too large for half the log is written to RocksDB with a sync
 * instead, which makes everything before it durable too.
 *
 * Where the replay stops at something other than zeros or an older
 * record, the whole log is read: whole records numbered after the stop
 * mean a record that was acknowledged is damaged, and blockd refuses to
 * start (commit_log_options.accept_damage starts it with what comes
 * before the damage); none mean the torn end of a power cut.
 *
 * A log of another size than configured is replaced by one of that size
 * at open, once the replay has made it unnecessary.
 *
 * XXX:
 *  - Where O_DIRECT is refused (tmpfs) the log is written through the
 *    page cache and fdatasync'd, which is slower than a synced RocksDB
 *    write.
 */

#include <rocksdb/c.h>
#include <stdbool.h>
#include <stdint.h>

struct commit_log {
	int fd;
	bool direct;	       /* O_DIRECT | O_DSYNC; else fdatasync per record */
	uint64_t size;	       /* bytes, a multiple of NGNFS_COMMIT_LOG_ALIGN */
	uint64_t write_offset; /* where the next record goes */
	uint64_t used;	       /* logged since RocksDB was last known durable */
	uint64_t last_seq;     /* of the last record written or replayed */
	uint8_t *buffer;       /* aligned for O_DIRECT */
	size_t buffer_size;
	size_t meta_put_size; /* what the META put adds to a batch's bytes */
	rocksdb_writeoptions_t *unsynced;
	rocksdb_writeoptions_t *synced;
	/* counters, commit thread only */
	uint64_t flushes;	 /* times RocksDB was made durable to reuse log space */
	uint64_t direct_batches; /* batches too large for the log, synced in RocksDB */
	uint64_t only_after;	 /* tests only: after this many records, RocksDB is skipped */
	bool no_wal;		 /* see commit_log_without_wal() */
	bool flush_started;	 /* a background memtable flush covers flush_covers bytes */
	uint64_t flush_covers;
};

struct commit_log_options {
	uint32_t size_mb;   /* of a new log; an existing one is resized to it */
	bool accept_damage; /* start past a damaged record, losing it and what follows */
};

/*
 * Opens (creating it if missing) the log of the store at db_path and
 * applies to db every record RocksDB does not have yet.  -EIO and a line
 * on stderr if the file cannot be made or read, -EUCLEAN if it is damaged
 * (and options->accept_damage is false).
 */
int commit_log_open(struct commit_log *log, rocksdb_t *db, rocksdb_readoptions_t *read_options,
		    const char *db_path, const struct commit_log_options *options);
void commit_log_close(struct commit_log *log);
/*
 * Logged batches go to RocksDB without its WAL (rocksdb_wal=false, the
 * default): the commit log is their only log, so a kill -9 loses what
 * RocksDB had not flushed and the replay brings it back, and before log
 * space is reused RocksDB's memtables are flushed (in the background,
 * half a log ahead) instead of its WAL synced.  Writing the WAL as well
 * cost a buffered append per group commit: 13-28% of one session's
 * WRITEs per second, 48% of sixteen's (docs/performance.md, run 20).
 * Called after commit_log_open.
 */
void commit_log_without_wal(struct commit_log *log);

/*
 * Makes batch durable through the log and writes it to RocksDB; on
 * failure *error is an allocated message (the caller stops the process).
 */
void commit_log_write(struct commit_log *log, rocksdb_t *db, rocksdb_writebatch_t *batch,
		      char **error);

#endif
