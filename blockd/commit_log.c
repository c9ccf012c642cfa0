/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The commit log (see commit_log.h for why it exists and how a crash is
 * recovered).
 *
 * Only the commit thread writes the log, one record at a time, so there
 * is no locking here.  Records are built in one aligned buffer and
 * written with a single pwrite, so that with O_DIRECT | O_DSYNC a record
 * is one device write that is durable when the call returns; the space a
 * record may take is bounded by half the log so that a lap always holds
 * at least two of them.
 */

#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "commit_log.h"
#include "format-store.h"
#include "log.h"
#include "msg.h"
#include "store.h"

#define HEADER_SIZE sizeof(struct ngnfs_commit_log_record)

_Static_assert(sizeof(struct ngnfs_commit_log_record) == 64, "commit log record header");
_Static_assert(sizeof(struct ngnfs_store_commit_log) == 16, "commit log META record");

static uint64_t align_up(uint64_t length)
{
	return (length + NGNFS_COMMIT_LOG_ALIGN - 1) & ~(uint64_t)(NGNFS_COMMIT_LOG_ALIGN - 1);
}

/* An error message the way RocksDB gives them: allocated, for the caller to report. */
static void set_error(char **error, const char *what, int err)
{
	if (asprintf(error, "commit log: %s: %s", what, strerror(err)) < 0)
		*error = NULL;
	if (!*error)
		*error = strdup("commit log: out of memory");
}

static int ensure_buffer(struct commit_log *log, size_t size)
{
	void *buffer;

	if (log->buffer_size >= size)
		return 0;
	if (posix_memalign(&buffer, NGNFS_COMMIT_LOG_ALIGN, size))
		return -ENOMEM;
	free(log->buffer);
	log->buffer = buffer;
	log->buffer_size = size;
	return 0;
}

static void put_meta(rocksdb_writebatch_t *batch, uint64_t seq, uint64_t next_offset)
{
	struct ngnfs_store_commit_log value = {
		.seq = htole64(seq),
		.next_offset = htole64(next_offset),
	};
	uint8_t key[NGNFS_STORE_META_KEY_SIZE];

	store_meta_key(key, NGNFS_STORE_META_COMMIT_LOG);
	rocksdb_writebatch_put(batch, (const char *)key, sizeof(key), (const char *)&value,
			       sizeof(value));
}

static uint32_t record_crc(const struct ngnfs_commit_log_record *header, const uint8_t *payload,
			   uint32_t payload_length)
{
	struct ngnfs_commit_log_record copy = *header;

	copy.crc = 0;
	return ngnfs_crc32c(ngnfs_crc32c(0, &copy, sizeof(copy)), payload, payload_length);
}

/* Builds a record in the buffer (large enough already); returns its length. */
static size_t build_record(struct commit_log *log, uint16_t kind, uint64_t seq, const void *payload,
			   uint32_t payload_length)
{
	struct ngnfs_commit_log_record header;
	size_t length = align_up(HEADER_SIZE + payload_length);

	memset(&header, 0, sizeof(header));
	header.magic = htole32(NGNFS_COMMIT_LOG_MAGIC);
	header.seq = htole64(seq);
	header.payload_length = htole32(payload_length);
	header.kind = htole16(kind);
	if (payload_length)
		memcpy(log->buffer + HEADER_SIZE, payload, payload_length);
	memset(log->buffer + HEADER_SIZE + payload_length, 0,
	       length - HEADER_SIZE - payload_length);
	header.crc = htole32(record_crc(&header, log->buffer + HEADER_SIZE, payload_length));
	memcpy(log->buffer, &header, sizeof(header));
	return length;
}

static int write_buffer(struct commit_log *log, uint64_t offset, size_t length)
{
	ssize_t done = pwrite(log->fd, log->buffer, length, (off_t)offset);

	if (done != (ssize_t)length)
		return done < 0 ? -errno : -EIO;
	if (!log->direct && fdatasync(log->fd) < 0)
		return -errno;
	return 0;
}

/*
 * What RocksDB holds made durable: its WAL synced, or, for writes made
 * without a WAL (the default, rocksdb_wal=false), its memtables flushed.
 */
static void rocksdb_durable(rocksdb_t *db, bool no_wal, char **error)
{
	rocksdb_flushoptions_t *flush_options;

	if (!no_wal) {
		rocksdb_flush_wal(db, 1, error);
		return;
	}
	flush_options = rocksdb_flushoptions_create();
	rocksdb_flushoptions_set_wait(flush_options, 1);
	rocksdb_flush(db, flush_options, error);
	rocksdb_flushoptions_destroy(flush_options);
}

/*
 * Without a WAL, flushing the memtables where the log is about to be
 * reused would stall the commit thread for the whole flush.  So once half
 * a log was written since RocksDB was last durable, a flush is started
 * in the background; all it covers is on disk once RocksDB has no
 * immutable memtable left, which by the reuse point, another half a log
 * later, it normally has not for long.
 */
static void start_background_flush(struct commit_log *log, rocksdb_t *db)
{
	rocksdb_flushoptions_t *flush_options = rocksdb_flushoptions_create();
	char *error = NULL;

	rocksdb_flushoptions_set_wait(flush_options, 0);
	rocksdb_flush(db, flush_options, &error);
	rocksdb_flushoptions_destroy(flush_options);
	if (error) {
		/* the reuse point then flushes in the foreground */
		log_warn("commit log: background RocksDB flush not started: %s", error);
		rocksdb_free(error);
		return;
	}
	log->flush_started = true;
	log->flush_covers = log->used;
}

/* Waits (bounded) for the background flush; false: it did not finish. */
static bool background_flush_done(rocksdb_t *db)
{
	for (unsigned int waited_ms = 0; waited_ms < 10000; waited_ms++) {
		uint64_t immutable = 1;

		if (rocksdb_property_int(db, "rocksdb.num-immutable-mem-table", &immutable) != 0)
			return false;
		if (immutable == 0)
			return true;
		usleep(1000);
	}
	return false;
}

void commit_log_write(struct commit_log *log, rocksdb_t *db, rocksdb_writebatch_t *batch,
		      char **error)
{
	uint64_t seq = log->last_seq + 1;
	uint64_t offset = log->write_offset;
	size_t batch_size, payload_length, length, needed;
	const char *payload;
	bool wrap;
	int ret;

	rocksdb_writebatch_data(batch, &batch_size);
	payload_length = batch_size + log->meta_put_size;
	length = align_up(HEADER_SIZE + payload_length);
	if (length > log->size / 2) {
		/* A synced write makes everything before it durable as well. */
		put_meta(batch, log->last_seq, log->write_offset);
		rocksdb_write(db, log->synced, batch, error);
		if (!*error && log->no_wal)
			rocksdb_durable(db, true, error);
		if (!*error) {
			log->used = 0;
			log->flush_started = false;
			log->direct_batches++;
		}
		return;
	}
	wrap = offset + length > log->size;
	needed = length + (wrap ? log->size - offset : 0);
	if (log->used + needed > log->size && log->flush_started) {
		log->flush_started = false;
		if (background_flush_done(db)) {
			log->used -= log->flush_covers;
			log->flushes++;
		}
	}
	if (log->used + needed > log->size) {
		/* The record would overwrite ones RocksDB may only have in memory. */
		rocksdb_durable(db, log->no_wal, error);
		if (*error)
			return;
		log->used = 0;
		log->flush_started = false;
		log->flushes++;
	}
	if (log->no_wal && !log->flush_started && log->used + needed > log->size / 2)
		start_background_flush(log, db);
	ret = ensure_buffer(log, length);
	if (ret) {
		set_error(error, "record buffer", -ret);
		return;
	}
	if (wrap) {
		build_record(log, NGNFS_COMMIT_LOG_WRAP, seq, NULL, 0);
		ret = write_buffer(log, offset, NGNFS_COMMIT_LOG_ALIGN);
		if (ret) {
			set_error(error, "write of a wrap record", -ret);
			return;
		}
		offset = 0;
	}
	put_meta(batch, seq, (offset + length) % log->size);
	payload = rocksdb_writebatch_data(batch, &batch_size);
	if (batch_size != payload_length) {
		set_error(error, "the batch's size is not what its META record should add", EPROTO);
		return;
	}
	build_record(log, NGNFS_COMMIT_LOG_BATCH, seq, payload, (uint32_t)payload_length);
	ret = write_buffer(log, offset, length);
	if (ret) {
		set_error(error, "write of a record", -ret);
		return;
	}
	log->write_offset = (offset + length) % log->size;
	log->used += needed;
	log->last_seq = seq;
	if (log->only_after && seq > log->only_after)
		return; /* tests only: RocksDB "lost" it; the replay must bring it back */
	rocksdb_write(db, log->unsynced, batch, error);
}

/*
 * A new log: zeros written to the end and synced, so that records
 * overwrite in place; renamed into place and the folder synced, so that
 * the file a record was made durable in is still there after a power cut.
 */
static int create_log(const char *db_path, const char *path, uint64_t size)
{
	char temporary[4096 + 8];
	size_t chunk = 1 << 20;
	char *zeros = calloc(1, chunk);
	int fd, ret = 0;

	snprintf(temporary, sizeof(temporary), "%s.new", path);
	fd = open(temporary, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0 || !zeros) {
		ret = fd < 0 ? -errno : -ENOMEM;
		goto out;
	}
	for (uint64_t written = 0; written < size && !ret; written += chunk) {
		if (write(fd, zeros, chunk) != (ssize_t)chunk)
			ret = -EIO;
	}
	if (!ret && fsync(fd) < 0)
		ret = -errno;
	if (!ret && rename(temporary, path) < 0)
		ret = -errno;
	if (!ret) {
		int dir = open(db_path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

		if (dir < 0 || fsync(dir) < 0)
			ret = -errno;
		if (dir >= 0)
			close(dir);
	}
out:
	if (fd >= 0)
		close(fd);
	if (ret)
		unlink(temporary);
	free(zeros);
	return ret;
}

static int read_meta(rocksdb_t *db, rocksdb_readoptions_t *read_options, uint64_t *seq,
		     uint64_t *next_offset)
{
	struct ngnfs_store_commit_log record;
	uint8_t key[NGNFS_STORE_META_KEY_SIZE];
	char *error = NULL;
	size_t length;
	char *value;

	*seq = 0;
	*next_offset = 0;
	store_meta_key(key, NGNFS_STORE_META_COMMIT_LOG);
	value = rocksdb_get(db, read_options, (const char *)key, sizeof(key), &length, &error);
	if (error) {
		fprintf(stderr, "blockd: cannot read the commit log position: %s\n", error);
		rocksdb_free(error);
		return -EIO;
	}
	if (!value)
		return 0;
	if (length != sizeof(record)) {
		fprintf(stderr,
			"blockd: the commit log position record is %zu bytes, expected %zu\n",
			length, sizeof(record));
		rocksdb_free(value);
		return -EINVAL;
	}
	memcpy(&record, value, sizeof(record));
	rocksdb_free(value);
	*seq = le64toh(record.seq);
	*next_offset = le64toh(record.next_offset);
	return 0;
}

/*
 * Where the replay stopped.  A log ends cleanly at zeros (never written)
 * or at a record of an older lap (a lower sequence number).  Anything
 * else is either where a power cut cut the last record short (never
 * acknowledged) or damage to a record that was, and scan_log() tells
 * which: a header of the next number or a later one that is not whole
 * (TORN), or bytes that are no header (UNKNOWN: also what the tail of an
 * older lap's record looks like once the records before it were
 * overwritten, which is how most logs that went round end).
 */
enum replay_end {
	REPLAY_END_CLEAN,
	REPLAY_END_TORN,
	REPLAY_END_UNKNOWN,
};

static bool all_zero(const uint8_t *bytes, size_t length)
{
	for (size_t i = 0; i < length; i++)
		if (bytes[i])
			return false;
	return true;
}

/*
 * Applies the records that follow seq at offset, for as long as each is
 * whole and the next in sequence; leaves the writer after the last one
 * and says in *end what was found where it stopped.
 */
static int replay(struct commit_log *log, rocksdb_t *db, uint64_t seq, uint64_t offset,
		  uint64_t *applied, enum replay_end *end)
{
	*applied = 0;
	for (;;) {
		struct ngnfs_commit_log_record header;
		rocksdb_writebatch_t *batch;
		uint32_t payload_length;
		char *error = NULL;
		uint64_t length;
		uint16_t kind;

		if (ensure_buffer(log, NGNFS_COMMIT_LOG_ALIGN))
			return -ENOMEM;
		if (pread(log->fd, log->buffer, NGNFS_COMMIT_LOG_ALIGN, (off_t)offset) !=
		    NGNFS_COMMIT_LOG_ALIGN) {
			fprintf(stderr, "blockd: cannot read the commit log at %llu: %s\n",
				(unsigned long long)offset, strerror(errno));
			return -EIO;
		}
		memcpy(&header, log->buffer, sizeof(header));
		if (le32toh(header.magic) != NGNFS_COMMIT_LOG_MAGIC) {
			*end = all_zero(log->buffer, sizeof(header)) ? REPLAY_END_CLEAN
								     : REPLAY_END_UNKNOWN;
			break;
		}
		*end = le64toh(header.seq) <= seq ? REPLAY_END_CLEAN : REPLAY_END_TORN;
		if (le64toh(header.seq) != seq + 1)
			break;
		kind = le16toh(header.kind);
		payload_length = le32toh(header.payload_length);
		length = align_up(HEADER_SIZE + (uint64_t)payload_length);
		if (kind == NGNFS_COMMIT_LOG_WRAP) {
			if (offset == 0 || payload_length ||
			    record_crc(&header, log->buffer + HEADER_SIZE, 0) !=
				le32toh(header.crc))
				break;
			offset = 0;
			continue;
		}
		if (kind != NGNFS_COMMIT_LOG_BATCH || length > log->size / 2 ||
		    length > log->size - offset)
			break;
		if (ensure_buffer(log, length))
			return -ENOMEM;
		if (length > NGNFS_COMMIT_LOG_ALIGN &&
		    pread(log->fd, log->buffer, length, (off_t)offset) != (ssize_t)length) {
			fprintf(stderr, "blockd: cannot read the commit log at %llu: %s\n",
				(unsigned long long)offset, strerror(errno));
			return -EIO;
		}
		if (record_crc(&header, log->buffer + HEADER_SIZE, payload_length) !=
		    le32toh(header.crc))
			break;
		batch = rocksdb_writebatch_create_from((const char *)log->buffer + HEADER_SIZE,
						       payload_length);
		rocksdb_write(db, log->unsynced, batch, &error);
		rocksdb_writebatch_destroy(batch);
		if (error) {
			fprintf(stderr, "blockd: applying commit log record %llu failed: %s\n",
				(unsigned long long)(seq + 1), error);
			rocksdb_free(error);
			return -EIO;
		}
		(*applied)++;
		seq++;
		offset = (offset + length) % log->size;
	}
	log->last_seq = seq;
	log->write_offset = offset;
	return 0;
}

/* What scan_log() found. */
struct log_scan {
	uint64_t highest;     /* highest sequence number in any record header */
	uint64_t later;	      /* whole batch records numbered after the one asked about */
	uint64_t first_later; /* the lowest and highest of those */
	uint64_t last_later;
};

/*
 * Reads the whole log.  A batch record is written only once the one
 * before it is on disk, so a whole record numbered after the last one the
 * replay could apply means that one was whole once and is damaged now:
 * acknowledged group commits that the replay would silently drop.
 */
static int scan_log(struct commit_log *log, uint64_t after, struct log_scan *scan)
{
	const size_t chunk = 1 << 20;
	uint8_t *buffer;
	int ret = 0;

	memset(scan, 0, sizeof(*scan));
	if (posix_memalign((void **)&buffer, NGNFS_COMMIT_LOG_ALIGN, chunk))
		return -ENOMEM;
	for (uint64_t base = 0; base < log->size && !ret; base += chunk) {
		size_t want = (size_t)(log->size - base < chunk ? log->size - base : chunk);

		if (pread(log->fd, buffer, want, (off_t)base) != (ssize_t)want) {
			fprintf(stderr, "blockd: cannot read the commit log at %llu: %s\n",
				(unsigned long long)base, strerror(errno));
			ret = -EIO;
			break;
		}
		for (size_t slot = 0; slot < want; slot += NGNFS_COMMIT_LOG_ALIGN) {
			struct ngnfs_commit_log_record header;
			uint64_t offset = base + slot, seq, length;
			uint32_t payload_length;

			memcpy(&header, buffer + slot, sizeof(header));
			if (le32toh(header.magic) != NGNFS_COMMIT_LOG_MAGIC)
				continue;
			seq = le64toh(header.seq);
			if (seq > scan->highest)
				scan->highest = seq;
			payload_length = le32toh(header.payload_length);
			length = align_up(HEADER_SIZE + (uint64_t)payload_length);
			if (seq <= after || le16toh(header.kind) != NGNFS_COMMIT_LOG_BATCH ||
			    length > log->size / 2 || length > log->size - offset)
				continue;
			if (ensure_buffer(log, length)) {
				ret = -ENOMEM;
				break;
			}
			if (pread(log->fd, log->buffer, length, (off_t)offset) != (ssize_t)length) {
				fprintf(stderr, "blockd: cannot read the commit log at %llu: %s\n",
					(unsigned long long)offset, strerror(errno));
				ret = -EIO;
				break;
			}
			if (record_crc(&header, log->buffer + HEADER_SIZE, payload_length) !=
			    le32toh(header.crc))
				continue;
			if (!scan->later || seq < scan->first_later)
				scan->first_later = seq;
			if (seq > scan->last_later)
				scan->last_later = seq;
			scan->later++;
		}
	}
	free(buffer);
	return ret;
}

/*
 * Starts the writer over at the beginning of the log, numbering after
 * every record the log holds, so that none of them can ever be taken for
 * a new one; the META record says so durably before anything is written.
 */
static int restart_numbering(struct commit_log *log, rocksdb_t *db, uint64_t highest)
{
	rocksdb_writebatch_t *batch = rocksdb_writebatch_create();
	char *error = NULL;

	if (highest < log->last_seq)
		highest = log->last_seq;
	put_meta(batch, highest, 0);
	rocksdb_write(db, log->synced, batch, &error);
	rocksdb_writebatch_destroy(batch);
	if (error) {
		fprintf(stderr, "blockd: cannot write the commit log position: %s\n", error);
		rocksdb_free(error);
		return -EIO;
	}
	log->last_seq = highest;
	log->write_offset = 0;
	log->used = 0;
	return 0;
}

static int open_log_file(struct commit_log *log, const char *path)
{
	log->fd = open(path, O_RDWR | O_DIRECT | O_DSYNC | O_CLOEXEC);
	log->direct = log->fd >= 0;
	if (log->fd < 0 && errno == EINVAL)
		log->fd = open(path, O_RDWR | O_CLOEXEC); /* no O_DIRECT here (tmpfs) */
	if (log->fd < 0) {
		fprintf(stderr, "blockd: cannot open commit log %s: %s\n", path, strerror(errno));
		return -EIO;
	}
	return 0;
}

/*
 * After the replay: a suspect end is the torn last record of a power cut
 * (a warning) unless whole records follow it, which is damage: blockd
 * refuses to start, because starting would lose acknowledged writes,
 * unless the operator accepted the loss (the log is then numbered past
 * the damage, so the next start does not refuse again).
 */
static int check_log_end(struct commit_log *log, rocksdb_t *db, const char *path,
			 enum replay_end end, bool accept_damage)
{
	uint64_t stopped_at = log->write_offset;
	struct log_scan scan;
	int ret;

	if (end == REPLAY_END_CLEAN)
		return 0;
	ret = scan_log(log, log->last_seq, &scan);
	if (ret)
		return ret;
	if (!scan.later && end == REPLAY_END_UNKNOWN)
		return 0;
	if (!scan.later) {
		log_warn("commit log %s: the record at %llu after record %llu is not whole: the "
			 "end of the log, cut short by a power cut or crash before it was "
			 "acknowledged",
			 path, (unsigned long long)stopped_at, (unsigned long long)log->last_seq);
		return 0;
	}
	if (!accept_damage) {
		fprintf(
		    stderr,
		    "blockd: commit log %s is damaged: the record after %llu (at offset %llu) "
		    "is not whole, but %llu whole records from %llu to %llu follow it, so group "
		    "commits that were acknowledged as durable would be lost.  Refusing to "
		    "start; keep the folder as it is.  To start with the writes up to record "
		    "%llu only, start once with --commit-log-accept-damage true "
		    "(docs/operations.md)\n",
		    path, (unsigned long long)log->last_seq, (unsigned long long)stopped_at,
		    (unsigned long long)scan.later, (unsigned long long)scan.first_later,
		    (unsigned long long)scan.last_later, (unsigned long long)log->last_seq);
		return -EUCLEAN;
	}
	log_error("commit log %s: damaged after record %llu (offset %llu); started without "
		  "records %llu to %llu as --commit-log-accept-damage allows: the group commits "
		  "they held are lost",
		  path, (unsigned long long)log->last_seq, (unsigned long long)stopped_at,
		  (unsigned long long)log->last_seq + 1, (unsigned long long)scan.last_later);
	return restart_numbering(log, db, scan.highest);
}

/*
 * A log of another size than configured is replaced once the replay has
 * made RocksDB durable, when none of it is needed any more: numbering
 * first (a crash before the new file is in place leaves the old one, none
 * of whose records can then be taken for new ones), then the new file.
 */
static int resize_log(struct commit_log *log, rocksdb_t *db, const char *db_path, const char *path,
		      uint64_t size)
{
	uint64_t old_size = log->size;
	struct log_scan scan;
	int ret;

	ret = scan_log(log, UINT64_MAX, &scan);
	if (!ret)
		ret = restart_numbering(log, db, scan.highest);
	if (ret)
		return ret;
	close(log->fd);
	log->fd = -1;
	ret = create_log(db_path, path, size);
	if (ret) {
		fprintf(stderr, "blockd: cannot make a new commit log %s (%llu MiB): %s\n", path,
			(unsigned long long)(size >> 20), strerror(-ret));
		return -EIO;
	}
	ret = open_log_file(log, path);
	if (ret)
		return ret;
	log->size = size;
	log_info("commit log %s: resized from %llu to %llu MiB", path,
		 (unsigned long long)(old_size >> 20), (unsigned long long)(size >> 20));
	return 0;
}

int commit_log_open(struct commit_log *log, rocksdb_t *db, rocksdb_readoptions_t *read_options,
		    const char *db_path, const struct commit_log_options *options)
{
	uint64_t configured_size = (uint64_t)options->size_mb << 20;
	enum replay_end end;
	rocksdb_writebatch_t *probe = rocksdb_writebatch_create();
	uint64_t seq, next_offset, applied;
	size_t before, after;
	char *error = NULL;
	char path[4096];
	struct stat st;
	int ret;

	memset(log, 0, sizeof(*log));
	log->fd = -1;
	log->unsynced = rocksdb_writeoptions_create();
	log->synced = rocksdb_writeoptions_create();
	rocksdb_writeoptions_set_sync(log->synced, 1);
	rocksdb_writebatch_data(probe, &before);
	put_meta(probe, 0, 0);
	rocksdb_writebatch_data(probe, &after);
	rocksdb_writebatch_destroy(probe);
	log->meta_put_size = after - before;

	snprintf(path, sizeof(path), "%s/%s", db_path, NGNFS_COMMIT_LOG_FILE);
	if (stat(path, &st) < 0) {
		if (errno != ENOENT) {
			fprintf(stderr, "blockd: cannot look at commit log %s: %s\n", path,
				strerror(errno));
			return -EIO;
		}
		ret = create_log(db_path, path, configured_size);
		if (ret) {
			fprintf(stderr, "blockd: cannot create commit log %s (%u MiB): %s\n", path,
				options->size_mb, strerror(-ret));
			return -EIO;
		}
		if (stat(path, &st) < 0)
			return -EIO;
	}
	log->size = (uint64_t)st.st_size;
	if (log->size % NGNFS_COMMIT_LOG_ALIGN ||
	    log->size < ((uint64_t)NGNFS_COMMIT_LOG_MIN_MB << 20)) {
		fprintf(stderr,
			"blockd: commit log %s is %llu bytes, not a whole number of %u-byte "
			"records of at least %u MiB: not a log this blockd wrote\n",
			path, (unsigned long long)log->size, NGNFS_COMMIT_LOG_ALIGN,
			NGNFS_COMMIT_LOG_MIN_MB);
		return -EINVAL;
	}
	ret = open_log_file(log, path);
	if (ret)
		return ret;
	if (!log->direct)
		log_warn("commit log %s: O_DIRECT refused, records are fdatasync'd instead", path);

	ret = read_meta(db, read_options, &seq, &next_offset);
	if (ret)
		return ret;
	if (next_offset % NGNFS_COMMIT_LOG_ALIGN || next_offset >= log->size) {
		fprintf(stderr,
			"blockd: the database says the commit log continues at %llu, outside the "
			"%llu-byte log %s\n",
			(unsigned long long)next_offset, (unsigned long long)log->size, path);
		return -EINVAL;
	}
	ret = replay(log, db, seq, next_offset, &applied, &end);
	if (ret)
		return ret;
	/*
	 * What RocksDB recovered or was just given is durable before any of
	 * the log is overwritten: from here on the whole log is free.
	 */
	rocksdb_durable(db, true, &error);
	if (error) {
		fprintf(stderr, "blockd: cannot flush the database after the commit log: %s\n",
			error);
		rocksdb_free(error);
		return -EIO;
	}
	if (applied)
		log_info("commit log: applied %llu group commits RocksDB had not kept (records "
			 "%llu to %llu)",
			 (unsigned long long)applied,
			 (unsigned long long)(log->last_seq - applied + 1),
			 (unsigned long long)log->last_seq);
	ret = check_log_end(log, db, path, end, options->accept_damage);
	if (!ret && log->size != configured_size)
		ret = resize_log(log, db, db_path, path, configured_size);
	return ret;
}

void commit_log_without_wal(struct commit_log *log)
{
	log->no_wal = true;
	rocksdb_writeoptions_disable_WAL(log->unsynced, 1);
}

void commit_log_close(struct commit_log *log)
{
	if (log->fd >= 0)
		close(log->fd);
	if (log->unsynced)
		rocksdb_writeoptions_destroy(log->unsynced);
	if (log->synced)
		rocksdb_writeoptions_destroy(log->synced);
	free(log->buffer);
	memset(log, 0, sizeof(*log));
	log->fd = -1;
}
