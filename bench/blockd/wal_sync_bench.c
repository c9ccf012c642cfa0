// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * wal_sync_bench: what one durable write costs on this machine's disk,
 * below blockd.  A stable NGNFS operation waits for one RocksDB synced
 * write; this measures that write alone (and plain fdatasync), so the
 * figures in docs/performance.md ("Where a stable operation's time goes")
 * can be reproduced and compared with blockd's own:
 *
 *   fdatasync-append     write 200 bytes at the end of a file, fdatasync
 *   fdatasync-overwrite  the same into a file already written that far
 *                        (no size change: no inode update to sync)
 *   rocksdb              rocksdb_write(sync) of a batch of 3 blocks of
 *                        4112 bytes (a stable create's WAL record), with
 *                        default options
 *   rocksdb-recycle      the same with recycle_log_file_num = 4 and a
 *                        4 MiB memtable, so that log files are reused
 *   overwrite-16k        16 KiB (one create's commit log record) written
 *                        over a file already written that far: pwrite +
 *                        fdatasync, then with O_DIRECT | O_DSYNC (what the
 *                        commit log uses)
 *   rocksdb-commit-log   what blockd's commit log does (commit_log.c):
 *                        the batch's bytes written into a preallocated
 *                        file at a rising 4 KiB-aligned offset and
 *                        fdatasync'd, then the batch written to RocksDB
 *                        without a sync
 *
 * Each line is the mean over --count operations.  A benchmark, not a
 * test: never run by ctest; it writes into a temporary folder under
 * --dir (default /tmp) and removes it.
 */

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <rocksdb/c.h>

#define VALUE_SIZE 4112
#define BATCH_KEYS 3

static double now_seconds(void)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (double)now.tv_sec + (double)now.tv_nsec / 1e9;
}

static int fdatasync_loop(const char *dir, int count, int overwrite, double *mean_us)
{
	char path[4096];
	char buffer[4096];
	double start;
	int fd;

	snprintf(path, sizeof(path), "%s/file", dir);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	if (fd < 0)
		return -errno;
	memset(buffer, 'x', sizeof(buffer));
	if (overwrite) {
		for (int i = 0; i < count; i++)
			if (write(fd, buffer, sizeof(buffer)) != (ssize_t)sizeof(buffer))
				goto fail;
		if (fsync(fd) < 0 || lseek(fd, 0, SEEK_SET) < 0)
			goto fail;
	}
	start = now_seconds();
	for (int i = 0; i < count; i++)
		if (write(fd, buffer, 200) != 200 || fdatasync(fd) < 0)
			goto fail;
	*mean_us = (now_seconds() - start) / count * 1e6;
	close(fd);
	unlink(path);
	return 0;
fail:
	close(fd);
	unlink(path);
	return -EIO;
}

#define RECORD_BYTES (16 << 10)

/* Overwrites of RECORD_BYTES in place; direct: O_DIRECT | O_DSYNC, else pwrite + fdatasync. */
static int overwrite_loop(const char *dir, int count, bool direct, double *mean_us)
{
	char path[4096];
	void *buffer;
	double start;
	int fd, ret = 0;

	snprintf(path, sizeof(path), "%s/records", dir);
	if (posix_memalign(&buffer, 4096, RECORD_BYTES))
		return -ENOMEM;
	memset(buffer, 'r', RECORD_BYTES);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	for (int i = 0; fd >= 0 && i < count && !ret; i++)
		if (write(fd, buffer, RECORD_BYTES) != RECORD_BYTES)
			ret = -EIO;
	if (fd < 0 || ret || fsync(fd) < 0) {
		ret = -EIO;
		goto out;
	}
	close(fd);
	fd = open(path, O_RDWR | (direct ? O_DIRECT | O_DSYNC : 0));
	if (fd < 0) {
		ret = -errno;
		goto out;
	}
	start = now_seconds();
	for (int i = 0; i < count && !ret; i++) {
		if (pwrite(fd, buffer, RECORD_BYTES, (off_t)i * RECORD_BYTES) != RECORD_BYTES ||
		    (!direct && fdatasync(fd) < 0))
			ret = -EIO;
	}
	*mean_us = (now_seconds() - start) / count * 1e6;
out:
	if (fd >= 0)
		close(fd);
	unlink(path);
	free(buffer);
	return ret;
}

enum rocksdb_mode { ROCKSDB_SYNC, ROCKSDB_RECYCLE, ROCKSDB_COMMIT_LOG };

#define LOG_BYTES (64 << 20)

static int rocksdb_loop(const char *dir, int count, enum rocksdb_mode mode, double *mean_us)
{
	int recycle = mode == ROCKSDB_RECYCLE;
	off_t log_offset = 0;
	int log_fd = -1;
	char path[4096];
	char key[32];
	char *value = malloc(VALUE_SIZE);
	char *error = NULL;
	rocksdb_options_t *options = rocksdb_options_create();
	rocksdb_writeoptions_t *write_options = rocksdb_writeoptions_create();
	rocksdb_t *db;
	double start;
	int ret = 0;

	if (!value)
		return -ENOMEM;
	memset(value, 'v', VALUE_SIZE);
	if (mode == ROCKSDB_COMMIT_LOG) {
		char *zeros = calloc(1, 1 << 20);

		snprintf(path, sizeof(path), "%s/commit.log", dir);
		log_fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
		for (int i = 0; log_fd >= 0 && zeros && i < LOG_BYTES >> 20; i++)
			if (write(log_fd, zeros, 1 << 20) != 1 << 20)
				ret = -EIO;
		free(zeros);
		if (log_fd < 0 || ret || fsync(log_fd) < 0) {
			ret = -EIO;
			goto out;
		}
	}
	snprintf(path, sizeof(path), "%s/%s", dir, recycle ? "db-recycle" : "db");
	rocksdb_options_set_create_if_missing(options, 1);
	if (recycle) {
		rocksdb_options_set_recycle_log_file_num(options, 4);
		rocksdb_options_set_write_buffer_size(options, 4 << 20);
	}
	rocksdb_writeoptions_set_sync(write_options, mode != ROCKSDB_COMMIT_LOG);
	db = rocksdb_open(options, path, &error);
	if (error) {
		fprintf(stderr, "wal_sync_bench: open %s: %s\n", path, error);
		rocksdb_free(error);
		ret = -EIO;
		goto out;
	}
	start = now_seconds();
	for (int i = 0; i < count && !ret; i++) {
		rocksdb_writebatch_t *batch = rocksdb_writebatch_create();

		for (int k = 0; k < BATCH_KEYS; k++) {
			snprintf(key, sizeof(key), "block-%d", (i * BATCH_KEYS + k) % 5000);
			rocksdb_writebatch_put(batch, key, strlen(key), value, VALUE_SIZE);
		}
		if (mode == ROCKSDB_COMMIT_LOG) {
			size_t size;
			const char *bytes = rocksdb_writebatch_data(batch, &size);
			size_t length = (size + 64 + 4095) & ~(size_t)4095;

			if (log_offset + (off_t)length > LOG_BYTES)
				log_offset = 0;
			if (pwrite(log_fd, bytes, size, log_offset + 64) != (ssize_t)size ||
			    fdatasync(log_fd) < 0)
				ret = -EIO;
			log_offset += (off_t)length;
		}
		rocksdb_write(db, write_options, batch, &error);
		rocksdb_writebatch_destroy(batch);
		if (error) {
			fprintf(stderr, "wal_sync_bench: write: %s\n", error);
			rocksdb_free(error);
			ret = -EIO;
		}
	}
	*mean_us = (now_seconds() - start) / count * 1e6;
	rocksdb_close(db);
	rocksdb_destroy_db(options, path, &error);
	if (error)
		rocksdb_free(error);
out:
	rocksdb_writeoptions_destroy(write_options);
	rocksdb_options_destroy(options);
	if (log_fd >= 0) {
		close(log_fd);
		snprintf(path, sizeof(path), "%s/commit.log", dir);
		unlink(path);
	}
	free(value);
	return ret;
}

int main(int argc, char **argv)
{
	static const struct option long_options[] = {
		{ "count", required_argument, NULL, 'c' },
		{ "dir", required_argument, NULL, 'd' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *base = "/tmp";
	char dir[4096];
	int count = 1000;
	double mean_us;
	int option;
	int ret;

	while ((option = getopt_long(argc, argv, "", long_options, NULL)) != -1) {
		switch (option) {
		case 'c':
			count = atoi(optarg);
			break;
		case 'd':
			base = optarg;
			break;
		default:
			fprintf(option == 'h' ? stdout : stderr,
				"usage: wal_sync_bench [--count N] [--dir DIR]\n");
			return option == 'h' ? 0 : 2;
		}
	}
	if (count <= 0) {
		fprintf(stderr, "wal_sync_bench: --count must be positive\n");
		return 2;
	}
	snprintf(dir, sizeof(dir), "%s/ngnfs-wal-sync-XXXXXX", base);
	if (!mkdtemp(dir)) {
		fprintf(stderr, "wal_sync_bench: mkdtemp in %s: %s\n", base, strerror(errno));
		return 1;
	}
	printf("wal_sync_bench: %d operations each, in %s\n", count, dir);
	ret = fdatasync_loop(dir, count, 0, &mean_us);
	if (!ret)
		printf("  fdatasync-append     %8.1f us\n", mean_us);
	if (!ret && !(ret = fdatasync_loop(dir, count, 1, &mean_us)))
		printf("  fdatasync-overwrite  %8.1f us\n", mean_us);
	if (!ret && !(ret = overwrite_loop(dir, count, false, &mean_us)))
		printf("  overwrite-16k        %8.1f us (pwrite + fdatasync)\n", mean_us);
	if (!ret && !(ret = overwrite_loop(dir, count, true, &mean_us)))
		printf("  overwrite-16k-direct %8.1f us (O_DIRECT | O_DSYNC)\n", mean_us);
	if (!ret && !(ret = rocksdb_loop(dir, count, ROCKSDB_SYNC, &mean_us)))
		printf("  rocksdb              %8.1f us per synced batch\n", mean_us);
	if (!ret && !(ret = rocksdb_loop(dir, count, ROCKSDB_RECYCLE, &mean_us)))
		printf("  rocksdb-recycle      %8.1f us per synced batch\n", mean_us);
	if (!ret && !(ret = rocksdb_loop(dir, count, ROCKSDB_COMMIT_LOG, &mean_us)))
		printf("  rocksdb-commit-log   %8.1f us per batch (log synced)\n", mean_us);
	rmdir(dir);
	if (ret)
		fprintf(stderr, "wal_sync_bench: failed: %s\n", strerror(-ret));
	return ret ? 1 : 0;
}
