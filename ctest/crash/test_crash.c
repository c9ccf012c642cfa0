// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Crash tests: kill -9 a client or a blockd in the middle of a metadata
 * workload, then check from another mount that nothing acknowledged as
 * durable is lost and nothing half-applied is visible.
 *
 * The workload is a deterministic sequence of operations computed from a
 * seed (so the killed client and the checker agree on it without sharing
 * memory): mkdir, create, write 1-4 KiB of data derived from the file's
 * number, set a 100-byte user.archive.location xattr and replace it with
 * newer versions.  Each operation touches one object, and each needs its
 * blocks to agree: a create writes a directory entry and an inode (on
 * another device most of the time: three devices, inodes placed by name
 * hash), a write the inode's size and a data block.
 *
 * The workload runs in a child process (this program, "child" mode).
 * After every operation the API acknowledged it appends the operation's
 * index to a log file and fdatasyncs it; in writeback mode it also calls
 * ngnfs_sync every SYNC_EVERY operations and logs "S <index>" when the
 * sync returned.  The parent kills the child with SIGKILL once the log
 * holds a random number of operations, so the kill falls anywhere in the
 * operation code, the flusher or a write in flight.
 *
 * The check mounts again (the parent process) and replays the sequence in
 * a model.  "Durable" is every logged operation in stable mode, and every
 * operation up to the last logged sync in writeback mode.  Each object
 * (directory or file) must be in one of the states its own history passes
 * through between "all durable operations applied" and "every operation
 * the child may have started applied" (acknowledged ones plus the one in
 * flight): a stable-mode acknowledged create whose name is missing, data
 * that is not the file's, a size without its data, an xattr value of no
 * version all fail.  Then ngnfs_fsck must find no problem: an entry
 * without its inode, an inode whose link count does not match its
 * entries, a block reached twice, are half-applied sets.
 *
 * Cases (the seed is printed; NGNFS_TEST_SEED=N repeats a run):
 *   client_kill_stable      kill the client, stable mount, 3 iterations
 *   client_kill_writeback   the same in writeback mode
 *   blockd_kill_stable      kill -9 one blockd while a stable client
 *                           runs, restart it; the client must finish
 *                           every operation, and all of them must be there
 *   blockd_power_cut_stable the same with blockd writing RocksDB without
 *                           its WAL, so that the kill loses what a power
 *                           cut would and only the commit log restores it
 *   client_kill_unstable_writes
 *                           a stable mount (60 s writeback interval) writes
 *                           files with each ngnfs_write durability, then
 *                           does metadata operations, and is killed: an
 *                           UNSTABLE write that nothing synced is missing
 *                           (proof that it did not wait), one followed by
 *                           ngnfs_sync_inode or by a stable operation on
 *                           the same file (merged sets) is there, STABLE
 *                           and MOUNT writes are there, and so are the
 *                           metadata operations made after the lost write
 *
 * Every iteration works in its own top directory of one filesystem, and
 * the checks of earlier iterations are repeated after later crashes, so
 * recovery from one crash must not damage what an earlier one left.
 *
 * XXX:
 *  - No unlink/rename in the workload: their sets (two directories, an
 *    orphan entry) deserve their own crash cases.
 *  - A kill of the primary participant between STAGE and COMMIT is only
 *    hit by chance; a blockd fault-injection switch would make it exact.
 *  - Writeback ordering across syncs is not asserted: only that every
 *    object is in a state of its own history.
 */

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "cluster.h"
#include "fsck.h"
#include "ngnfs.h"

#define DEVICE_COUNT	 3
#define FILES_PER_DIR	 40
#define MAX_OPS		 900
#define MAX_FILES	 MAX_OPS
#define MAX_DIRS	 (MAX_FILES / FILES_PER_DIR + 2)
#define SYNC_EVERY	 50
#define XATTR_NAME	 "user.archive.location"
#define XATTR_VALUE_SIZE 100
#define ITERATIONS	 3
#define CHILD_WAIT_MS	 60000
#define TARGET_WAIT_MS	 60000
#define DIR_TOP		 (-1)
#define RETRY_ATTEMPTS	 100
#define RETRY_SLEEP_MS	 100

enum op_type { OP_MKDIR, OP_CREATE, OP_WRITE, OP_XATTR };

struct op {
	enum op_type type;
	int target;	  /* dir index (OP_MKDIR, DIR_TOP for the top dir) or file index */
	uint32_t version; /* OP_XATTR: the value's version */
};

struct workload {
	uint64_t seed;
	unsigned int iteration;
	unsigned int op_count;
	struct op ops[MAX_OPS];
};

/* What one object looks like after a prefix of the workload. */
struct file_state {
	bool exists;
	bool written;
	int xattr_version; /* -1: none */
};

struct model {
	bool top_exists;
	bool dir_exists[MAX_DIRS];
	struct file_state files[MAX_FILES];
};

static uint64_t base_seed;
static const char *program_path;

static void failf(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

static void failf(const char *fmt, ...)
{
	va_list args;

	fprintf(stderr, "FAILED (NGNFS_TEST_SEED=%" PRIu64 "): ", base_seed);
	va_start(args, fmt);
	vfprintf(stderr, fmt, args);
	va_end(args);
	fprintf(stderr, "\n");
	exit(1);
}

static uint64_t mix(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* ---- the workload, the same in the child and the checker ---- */

static void workload_build(struct workload *work, uint64_t seed, unsigned int iteration)
{
	static bool written[MAX_FILES];
	static int versions[MAX_FILES];
	uint64_t state = seed * 1000003 + iteration;
	unsigned int created = 0, i;

	memset(work, 0, sizeof(*work));
	memset(written, 0, sizeof(written));
	for (i = 0; i < MAX_FILES; i++)
		versions[i] = -1;
	work->seed = seed;
	work->iteration = iteration;
	work->ops[work->op_count++] = (struct op){ OP_MKDIR, DIR_TOP, 0 };
	while (work->op_count < MAX_OPS) {
		unsigned int choice = (unsigned int)(mix(&state) % 10);
		struct op *op = &work->ops[work->op_count];

		if (choice >= 4 && created > 0 && choice < 7) {
			unsigned int start = (unsigned int)(mix(&state) % created), n;

			for (n = 0; n < created; n++) {
				unsigned int file = (start + n) % created;

				if (!written[file]) {
					*op = (struct op){ OP_WRITE, (int)file, 0 };
					written[file] = true;
					break;
				}
			}
			if (n < created) {
				work->op_count++;
				continue;
			}
		} else if (choice >= 7 && created > 0) {
			unsigned int file = (unsigned int)(mix(&state) % created);

			versions[file]++;
			*op = (struct op){ OP_XATTR, (int)file, (uint32_t)versions[file] };
			work->op_count++;
			continue;
		}
		if (created >= MAX_FILES)
			break;
		if (created % FILES_PER_DIR == 0) {
			*op = (struct op){ OP_MKDIR, (int)(created / FILES_PER_DIR), 0 };
			work->op_count++;
			if (work->op_count >= MAX_OPS)
				break;
			op = &work->ops[work->op_count];
		}
		*op = (struct op){ OP_CREATE, (int)created, 0 };
		created++;
		work->op_count++;
	}
}

static void top_name(const struct workload *work, char *name, size_t size)
{
	snprintf(name, size, "iter%u", work->iteration);
}

static void dir_name(int dir, char *name, size_t size)
{
	snprintf(name, size, "d%02d", dir);
}

static void file_name(int file, char *name, size_t size)
{
	snprintf(name, size, "f%05d", file);
}

static size_t file_length(const struct workload *work, int file)
{
	uint64_t state = work->seed ^ ((uint64_t)file << 20) ^ work->iteration;

	return 1024 + (size_t)(mix(&state) % 3073);
}

static void file_data(const struct workload *work, int file, uint8_t *data, size_t length)
{
	uint64_t state = work->seed + (uint64_t)file * 7919 + work->iteration;
	size_t i;

	for (i = 0; i < length; i++)
		data[i] = (uint8_t)(mix(&state) >> 56);
}

static void xattr_value(const struct workload *work, int file, uint32_t version, char *value)
{
	int length = snprintf(value, XATTR_VALUE_SIZE, "tier=tape;media=L%05d;iter=%u;v=%u;", file,
			      work->iteration, version);

	memset(value + length, 'a' + (int)(version % 26), XATTR_VALUE_SIZE - (size_t)length);
}

static void model_apply(struct model *model, const struct op *op)
{
	switch (op->type) {
	case OP_MKDIR:
		if (op->target == DIR_TOP)
			model->top_exists = true;
		else
			model->dir_exists[op->target] = true;
		break;
	case OP_CREATE:
		model->files[op->target].exists = true;
		model->files[op->target].xattr_version = -1;
		break;
	case OP_WRITE:
		model->files[op->target].written = true;
		break;
	case OP_XATTR:
		model->files[op->target].xattr_version = (int)op->version;
		break;
	}
}

/* ---- the child: run the workload, log every acknowledged operation ---- */

static int read_manifest(const char *path, char addresses[][64], const char **pointers)
{
	char *text = ngnfs_test_read_file(path, NULL), *line, *save = NULL;
	int count = 0;

	if (!text)
		return -errno;
	for (line = strtok_r(text, "\n", &save); line && count < 16;
	     line = strtok_r(NULL, "\n", &save)) {
		if (!line[0] || line[0] == '#')
			continue;
		snprintf(addresses[count], 64, "%s", line);
		pointers[count] = addresses[count];
		count++;
	}
	pointers[count] = NULL;
	free(text);
	return count;
}

static struct ngnfs_fs *mount_manifest_interval(const char *manifest,
						enum ngnfs_durability_mode mode,
						uint32_t writeback_interval_ms)
{
	static char addresses[16][64];
	static const char *pointers[17];
	struct ngnfs_mount_options options = { 0 };
	struct ngnfs_fs *fs = NULL;
	int count, ret;

	count = read_manifest(manifest, addresses, pointers);
	if (count <= 0)
		failf("reading the device manifest %s: %d", manifest, count);
	options.device_addresses = pointers;
	options.device_count = (uint16_t)count;
	options.durability = mode;
	options.writeback_interval_ms = writeback_interval_ms;
	ret = ngnfs_mount(&options, &fs);
	if (ret < 0)
		failf("mount (%s) of the devices in %s: %s (%s)",
		      mode == NGNFS_MOUNT_STABLE ? "stable" : "writeback", manifest, strerror(-ret),
		      ngnfs_last_error());
	return fs;
}

static struct ngnfs_fs *mount_manifest(const char *manifest, enum ngnfs_durability_mode mode)
{
	return mount_manifest_interval(manifest, mode, 0);
}

static void log_line(int fd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void log_line(int fd, const char *fmt, ...)
{
	char line[64];
	va_list args;
	int length;

	va_start(args, fmt);
	length = vsnprintf(line, sizeof(line), fmt, args);
	va_end(args);
	if (write(fd, line, (size_t)length) != length || fdatasync(fd) < 0) {
		fprintf(stderr, "crash child: writing the acknowledgement log: %s\n",
			strerror(errno));
		_exit(4);
	}
}

static int run_op(struct ngnfs_fs *fs, const struct workload *work, const struct op *op,
		  const struct ngnfs_handle *top, struct ngnfs_handle *dirs,
		  struct ngnfs_handle *files)
{
	uint8_t data[4096];
	char name[64], value[XATTR_VALUE_SIZE];
	size_t length;
	ssize_t written;

	switch (op->type) {
	case OP_MKDIR:
		dir_name(op->target, name, sizeof(name));
		return ngnfs_create(fs, top, name, S_IFDIR | 0755, 0, 0, 0, &dirs[op->target],
				    NULL);
	case OP_CREATE:
		file_name(op->target, name, sizeof(name));
		return ngnfs_create(fs, &dirs[op->target / FILES_PER_DIR], name, S_IFREG | 0644, 0,
				    0, 0, &files[op->target], NULL);
	case OP_WRITE:
		length = file_length(work, op->target);
		file_data(work, op->target, data, length);
		written = ngnfs_write(fs, &files[op->target], 0, data, length, NGNFS_WRITE_MOUNT);
		if (written < 0)
			return (int)written;
		return written == (ssize_t)length ? 0 : -EIO;
	case OP_XATTR:
		xattr_value(work, op->target, op->version, value);
		return ngnfs_setxattr(fs, &files[op->target], XATTR_NAME, value, sizeof(value),
				      op->version ? XATTR_REPLACE : XATTR_CREATE);
	}
	return -EINVAL;
}

static void sleep_ms(unsigned int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/*
 * A failed operation is in doubt: it may have been applied.  Retried, a
 * create that was applied says -EEXIST; then the handle is looked up
 * and the operation counts as done (the checker verifies the object).
 */
static int resolve_exists(struct ngnfs_fs *fs, const struct workload *work, const struct op *op,
			  const struct ngnfs_handle *root, const struct ngnfs_handle *top,
			  struct ngnfs_handle *dirs, struct ngnfs_handle *files)
{
	char name[64];

	switch (op->type) {
	case OP_MKDIR:
		if (op->target == DIR_TOP) {
			top_name(work, name, sizeof(name));
			return ngnfs_lookup(fs, root, name, (struct ngnfs_handle *)top, NULL);
		}
		dir_name(op->target, name, sizeof(name));
		return ngnfs_lookup(fs, top, name, &dirs[op->target], NULL);
	case OP_CREATE:
		file_name(op->target, name, sizeof(name));
		return ngnfs_lookup(fs, &dirs[op->target / FILES_PER_DIR], name, &files[op->target],
				    NULL);
	case OP_XATTR:
		return op->version == 0 ? 0 : -EEXIST;
	case OP_WRITE:
		break;
	}
	return -EEXIST;
}

static int child_main(int argc, char **argv)
{
	static struct workload work;
	static struct ngnfs_handle dirs[MAX_DIRS], files[MAX_FILES];
	enum ngnfs_durability_mode mode;
	struct ngnfs_handle root, top;
	struct ngnfs_fs *fs;
	char name[64];
	unsigned int i, attempts;
	bool retry;
	int fd, ret;

	if (argc != 8) {
		fprintf(stderr, "usage: test_crash child MANIFEST stable|writeback LOG SEED ITER "
				"retry|noretry\n");
		return 2;
	}
	retry = strcmp(argv[7], "retry") == 0;
	mode = strcmp(argv[3], "stable") == 0 ? NGNFS_MOUNT_STABLE : NGNFS_MOUNT_WRITEBACK;
	workload_build(&work, strtoull(argv[5], NULL, 0), (unsigned int)strtoul(argv[6], NULL, 0));
	fd = open(argv[4], O_WRONLY | O_CREAT | O_APPEND | O_TRUNC, 0644);
	if (fd < 0) {
		fprintf(stderr, "crash child: open %s: %s\n", argv[4], strerror(errno));
		return 4;
	}
	fs = mount_manifest(argv[2], mode);
	ret = ngnfs_root(fs, &root);
	if (ret < 0)
		failf("root: %s", strerror(-ret));
	for (i = 0; i < work.op_count; i++) {
		const struct op *op = &work.ops[i];

		for (attempts = 0;; attempts++) {
			if (op->type == OP_MKDIR && op->target == DIR_TOP) {
				top_name(&work, name, sizeof(name));
				ret = ngnfs_create(fs, &root, name, S_IFDIR | 0755, 0, 0, 0, &top,
						   NULL);
			} else {
				ret = run_op(fs, &work, op, &top, dirs, files);
			}
			/* a retried create (or first xattr) that finds its work done */
			if (ret == -EEXIST && attempts > 0)
				ret = resolve_exists(fs, &work, op, &root, &top, dirs, files);
			if (ret == 0 || !retry || attempts >= RETRY_ATTEMPTS)
				break;
			log_line(fd, "R %u %d\n", i, ret);
			fprintf(stderr, "crash child: operation %u failed (%s: %s), retrying\n", i,
				strerror(-ret), ngnfs_last_error());
			sleep_ms(RETRY_SLEEP_MS);
		}
		if (ret < 0) {
			log_line(fd, "E %u %d\n", i, ret);
			fprintf(stderr,
				"crash child: operation %u (type %d, object %d) failed: %s (%s)\n",
				i, op->type, op->target, strerror(-ret), ngnfs_last_error());
			_exit(3);
		}
		log_line(fd, "%u\n", i);
		if (mode == NGNFS_MOUNT_WRITEBACK && (i + 1) % SYNC_EVERY == 0) {
			ret = ngnfs_sync(fs);
			if (ret < 0) {
				log_line(fd, "E %u %d\n", i, ret);
				fprintf(stderr, "crash child: sync after operation %u: %s (%s)\n",
					i, strerror(-ret), ngnfs_last_error());
				_exit(3);
			}
			log_line(fd, "S %u\n", i);
		}
	}
	ngnfs_unmount(fs);
	close(fd);
	return 0;
}

/* ---- the parent: what the log says ---- */

struct ack_log {
	unsigned int acked;  /* operations 0..acked-1 were acknowledged */
	unsigned int synced; /* operations 0..synced-1 were made durable by a sync */
	bool op_failed;
	unsigned int retries; /* failed attempts that were retried (blockd outage) */
	unsigned int failed_op;
	int failed_error;
};

static void read_ack_log(const char *path, struct ack_log *log)
{
	char *text = ngnfs_test_read_file(path, NULL), *line, *save = NULL;

	memset(log, 0, sizeof(*log));
	if (!text)
		return;
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		unsigned int index;
		int error;

		if (sscanf(line, "S %u", &index) == 1)
			log->synced = index + 1;
		else if (sscanf(line, "R %u %d", &index, &error) == 2)
			log->retries++;
		else if (sscanf(line, "E %u %d", &index, &error) == 2) {
			log->op_failed = true;
			log->failed_op = index;
			log->failed_error = error;
		} else if (sscanf(line, "%u", &index) == 1)
			log->acked = index + 1;
	}
	free(text);
}

/* ---- the checker ---- */

struct observed {
	bool top_exists;
	bool dir_exists[MAX_DIRS];
	struct file_state files[MAX_FILES];
	bool file_bad[MAX_FILES];
	char why[MAX_FILES][96];
};

/* Look at one file: what state it is in, or why it is in none. */
static void observe_file(struct ngnfs_fs *fs, const struct workload *work,
			 const struct ngnfs_handle *dir, int file, struct observed *seen)
{
	struct file_state *state = &seen->files[file];
	uint8_t expected[4096], data[4096 + 1];
	char name[64], value[XATTR_VALUE_SIZE + 1], want[XATTR_VALUE_SIZE];
	struct ngnfs_handle handle;
	struct ngnfs_attr attr;
	unsigned int version;
	bool end = false;
	ssize_t length;
	int ret;

	file_name(file, name, sizeof(name));
	state->xattr_version = -1;
	ret = ngnfs_lookup(fs, dir, name, &handle, &attr);
	if (ret == -ENOENT)
		return;
	if (ret < 0)
		failf("lookup of %s/%s in iteration %u: %s (%s)", "dir", name, work->iteration,
		      strerror(-ret), ngnfs_last_error());
	state->exists = true;
	if ((attr.mode & S_IFMT) != S_IFREG || attr.nlink != 1) {
		seen->file_bad[file] = true;
		snprintf(seen->why[file], sizeof(seen->why[file]),
			 "mode %o nlink %u, expected a regular file with 1 link", attr.mode,
			 attr.nlink);
		return;
	}
	if (attr.size) {
		size_t want_length = file_length(work, file);

		length = ngnfs_read(fs, &handle, 0, data, sizeof(data), &end);
		file_data(work, file, expected, want_length);
		if (attr.size != want_length || length != (ssize_t)want_length ||
		    memcmp(data, expected, want_length)) {
			seen->file_bad[file] = true;
			snprintf(seen->why[file], sizeof(seen->why[file]),
				 "size %llu, read %zd bytes, expected %zu bytes of its pattern",
				 (unsigned long long)attr.size, length, want_length);
			return;
		}
		state->written = true;
	}
	length = ngnfs_getxattr(fs, &handle, XATTR_NAME, value, sizeof(value) - 1);
	if (length == -ENODATA)
		return;
	if (length < 0)
		failf("getxattr %s of %s in iteration %u: %s (%s)", XATTR_NAME, name,
		      work->iteration, strerror((int)-length), ngnfs_last_error());
	value[length] = '\0';
	{
		const char *at = strstr(value, ";v=");

		if (length != XATTR_VALUE_SIZE || !at || sscanf(at, ";v=%u;", &version) != 1) {
			seen->file_bad[file] = true;
			snprintf(seen->why[file], sizeof(seen->why[file]),
				 "xattr value of %zd bytes is no version of ours", length);
			return;
		}
	}
	xattr_value(work, file, version, want);
	if (memcmp(value, want, sizeof(want))) {
		seen->file_bad[file] = true;
		snprintf(seen->why[file], sizeof(seen->why[file]),
			 "xattr value says version %u but its bytes differ", version);
		return;
	}
	state->xattr_version = (int)version;
}

struct name_check {
	const struct workload *work;
	unsigned int limit; /* objects referenced by operations before this */
	int dir;	    /* DIR_TOP or a dir index */
	unsigned int entries;
	char unexpected[128];
};

static bool referenced(const struct workload *work, unsigned int limit, enum op_type type,
		       int target)
{
	unsigned int i;

	for (i = 0; i < limit && i < work->op_count; i++)
		if (work->ops[i].type == type && work->ops[i].target == target)
			return true;
	return false;
}

static int check_entry(void *arg, const char *name, size_t name_length,
		       const struct ngnfs_handle *handle, uint32_t type_mode, uint64_t cookie)
{
	struct name_check *check = arg;
	int index;
	char tail;

	(void)handle;
	(void)type_mode;
	(void)cookie;
	check->entries++;
	if (check->unexpected[0])
		return 0;
	if (check->dir == DIR_TOP && sscanf(name, "d%d%c", &index, &tail) == 1 &&
	    referenced(check->work, check->limit, OP_MKDIR, index))
		return 0;
	if (check->dir != DIR_TOP && sscanf(name, "f%d%c", &index, &tail) == 1 &&
	    index / FILES_PER_DIR == check->dir &&
	    referenced(check->work, check->limit, OP_CREATE, index))
		return 0;
	snprintf(check->unexpected, sizeof(check->unexpected), "%.*s", (int)name_length, name);
	return 0;
}

static void check_names(struct ngnfs_fs *fs, const struct workload *work, unsigned int limit,
			const struct ngnfs_handle *dir, int dir_index)
{
	struct name_check check = { .work = work, .limit = limit, .dir = dir_index };
	uint64_t cookie = 0;
	bool end = false;
	int ret;

	while (!end) {
		ret = ngnfs_readdir(fs, dir, cookie, check_entry, &check, &end);
		if (ret < 0)
			failf("readdir of directory %d of iteration %u: %s (%s)", dir_index,
			      work->iteration, strerror(-ret), ngnfs_last_error());
		if (!end)
			failf("readdir of directory %d stopped before its end", dir_index);
	}
	if (check.unexpected[0])
		failf("iteration %u: directory %d holds \"%s\", which no started operation made",
		      work->iteration, dir_index, check.unexpected);
}

static bool file_matches(const struct file_state *a, const struct file_state *b)
{
	if (a->exists != b->exists)
		return false;
	if (!a->exists)
		return true;
	return a->written == b->written && a->xattr_version == b->xattr_version;
}

static void describe(const struct file_state *state, char *text, size_t size)
{
	if (!state->exists)
		snprintf(text, size, "absent");
	else
		snprintf(text, size, "present, %s, xattr %d", state->written ? "data" : "empty",
			 state->xattr_version);
}

/*
 * Check one iteration's objects: each must be in a state of its history
 * between prefix durable and prefix started (started = acknowledged + the
 * one that may have been in flight).
 */
static void check_iteration(struct ngnfs_fs *fs, const struct workload *work, unsigned int durable,
			    unsigned int started)
{
	static struct observed seen;
	static struct model model;
	static bool matched[MAX_FILES], dir_matched[MAX_DIRS];
	struct ngnfs_handle root, top, dirs[MAX_DIRS];
	bool top_matched, dir_ok[MAX_DIRS];
	char name[64], want[64], got[128];
	unsigned int i;
	int d, f, ret;

	if (started > work->op_count)
		started = work->op_count;
	memset(&seen, 0, sizeof(seen));
	memset(&model, 0, sizeof(model));
	memset(matched, 0, sizeof(matched));
	memset(dir_matched, 0, sizeof(dir_matched));
	memset(dir_ok, 0, sizeof(dir_ok));

	/* observe */
	ret = ngnfs_root(fs, &root);
	if (ret < 0)
		failf("root: %s", strerror(-ret));
	top_name(work, name, sizeof(name));
	ret = ngnfs_lookup(fs, &root, name, &top, NULL);
	if (ret < 0 && ret != -ENOENT)
		failf("lookup %s: %s (%s)", name, strerror(-ret), ngnfs_last_error());
	seen.top_exists = ret == 0;
	if (seen.top_exists) {
		check_names(fs, work, started, &top, DIR_TOP);
		for (d = 0; d < MAX_DIRS; d++) {
			dir_name(d, name, sizeof(name));
			ret = ngnfs_lookup(fs, &top, name, &dirs[d], NULL);
			if (ret < 0 && ret != -ENOENT)
				failf("lookup %s/%s: %s (%s)", "top", name, strerror(-ret),
				      ngnfs_last_error());
			seen.dir_exists[d] = ret == 0;
			if (!seen.dir_exists[d])
				continue;
			check_names(fs, work, started, &dirs[d], d);
			for (f = d * FILES_PER_DIR; f < (d + 1) * FILES_PER_DIR && f < MAX_FILES;
			     f++)
				observe_file(fs, work, &dirs[d], f, &seen);
		}
	}

	/* compare with every state between durable and started */
	for (i = 0; i < durable; i++)
		model_apply(&model, &work->ops[i]);
	top_matched = model.top_exists == seen.top_exists;
	for (d = 0; d < MAX_DIRS; d++)
		dir_matched[d] = model.dir_exists[d] == seen.dir_exists[d];
	for (f = 0; f < MAX_FILES; f++)
		matched[f] = !seen.file_bad[f] && file_matches(&model.files[f], &seen.files[f]);
	for (i = durable; i < started; i++) {
		const struct op *op = &work->ops[i];

		model_apply(&model, op);
		if (op->type == OP_MKDIR && op->target == DIR_TOP)
			top_matched |= model.top_exists == seen.top_exists;
		else if (op->type == OP_MKDIR)
			dir_matched[op->target] |=
			    model.dir_exists[op->target] == seen.dir_exists[op->target];
		else
			matched[op->target] |=
			    !seen.file_bad[op->target] &&
			    file_matches(&model.files[op->target], &seen.files[op->target]);
	}
	if (!top_matched)
		failf("iteration %u: top directory %s, expected %s (durable ops %u, started %u)",
		      work->iteration, seen.top_exists ? "present" : "absent",
		      seen.top_exists ? "absent" : "present", durable, started);
	for (d = 0; d < MAX_DIRS; d++)
		if (!dir_matched[d])
			failf("iteration %u: directory d%02d is %s, which no state between "
			      "operation %u (durable) and %u (started) has",
			      work->iteration, d, seen.dir_exists[d] ? "present" : "absent",
			      durable, started);
	for (f = 0; f < MAX_FILES; f++) {
		if (matched[f])
			continue;
		/* name the state the durable prefix requires, to say what was lost */
		memset(&model, 0, sizeof(model));
		for (i = 0; i < durable; i++)
			model_apply(&model, &work->ops[i]);
		describe(&model.files[f], want, sizeof(want));
		if (seen.file_bad[f])
			snprintf(got, sizeof(got), "half-applied: %.50s", seen.why[f]);
		else
			describe(&seen.files[f], got, sizeof(got));
		failf("iteration %u: file f%05d is %s; after the %u durable operations it must "
		      "be %s (or a later state up to operation %u)",
		      work->iteration, f, got, durable, want, started);
	}
}

static void fsck_line(void *arg, bool problem, const char *line)
{
	(void)arg;
	if (problem)
		fprintf(stderr, "fsck problem: %s\n", line);
}

static void check_fsck(struct ngnfs_fs *fs, const char *when)
{
	struct ngnfs_fsck_report report;
	int ret;

	memset(&report, 0, sizeof(report));
	ret = ngnfs_fsck(fs, fsck_line, NULL, &report);
	if (ret < 0)
		failf("fsck %s: the walk failed: %s (%s)", when, strerror(-ret),
		      ngnfs_last_error());
	if (report.problems)
		failf("fsck %s: %llu problems (lines above), expected none", when,
		      (unsigned long long)report.problems);
	printf("  fsck %s: clean (%llu inodes, %llu entries, %llu blocks, %llu orphans)\n", when,
	       (unsigned long long)report.inodes, (unsigned long long)report.entries,
	       (unsigned long long)report.blocks, (unsigned long long)report.orphans);
	ngnfs_fsck_report_free(&report);
}

/* ---- the cases ---- */

struct crash_run {
	struct ngnfs_test_cluster *cluster;
	enum ngnfs_durability_mode mode;
	struct workload work[ITERATIONS];
	unsigned int durable[ITERATIONS];
	unsigned int started[ITERATIONS];
	unsigned int iterations;
};

static struct crash_run run;

static void start_cluster_args(const char *name, const char *const *blockd_args)
{
	struct ngnfs_mkfs_options mkfs = { 0 };
	uint8_t fs_id[16];
	int ret;

	run.cluster = ngnfs_test_cluster_start_args(DEVICE_COUNT, name, blockd_args);
	if (!run.cluster)
		failf("could not start %u blockd processes", DEVICE_COUNT);
	mkfs.device_addresses = ngnfs_test_cluster_addresses(run.cluster);
	mkfs.device_count = DEVICE_COUNT;
	ret = ngnfs_mkfs(&mkfs, fs_id);
	if (ret < 0)
		failf("mkfs on %u devices: %s (%s)", DEVICE_COUNT, strerror(-ret),
		      ngnfs_last_error());
}

static void start_cluster(const char *name)
{
	start_cluster_args(name, NULL);
}

static pid_t spawn_child(unsigned int iteration, const char *log_path, uint64_t seed, bool retry)
{
	char seed_text[32], iteration_text[16], output[PATH_MAX];
	const char *argv[9];
	pid_t pid;
	int ret;

	snprintf(seed_text, sizeof(seed_text), "%" PRIu64, seed);
	snprintf(iteration_text, sizeof(iteration_text), "%u", iteration);
	snprintf(output, sizeof(output), "%s/client-%u.out", ngnfs_test_cluster_dir(run.cluster),
		 iteration);
	argv[0] = program_path;
	argv[1] = "child";
	argv[2] = ngnfs_test_cluster_manifest(run.cluster);
	argv[3] = run.mode == NGNFS_MOUNT_STABLE ? "stable" : "writeback";
	argv[4] = log_path;
	argv[5] = seed_text;
	argv[6] = iteration_text;
	argv[7] = retry ? "retry" : "noretry";
	argv[8] = NULL;
	ret = ngnfs_test_spawn(argv, output, &pid);
	if (ret < 0)
		failf("spawning the client process %s: %s", program_path, strerror(-ret));
	return pid;
}

static void dump_child_output(unsigned int iteration)
{
	char path[PATH_MAX];
	char *text;

	snprintf(path, sizeof(path), "%s/client-%u.out", ngnfs_test_cluster_dir(run.cluster),
		 iteration);
	text = ngnfs_test_read_file(path, NULL);
	if (text && text[0])
		fprintf(stderr, "--- client %u output ---\n%s--- end ---\n", iteration, text);
	free(text);
}

/* Wait until the child acknowledged target operations (or ended). */
static bool wait_for_acks(const char *log_path, pid_t pid, unsigned int target)
{
	struct ack_log log;
	unsigned int waited;
	int status;

	for (waited = 0; waited < TARGET_WAIT_MS; waited++) {
		read_ack_log(log_path, &log);
		if (log.acked >= target || log.op_failed)
			return true;
		if (ngnfs_test_wait(pid, 0, &status) == 0) {
			char text[64];

			ngnfs_test_describe_status(status, text, sizeof(text));
			failf("the client ended (%s) after %u operations, before it was killed",
			      text, log.acked);
		}
		sleep_ms(1);
	}
	return false;
}

static void verify_all(const char *when)
{
	struct ngnfs_fs *fs =
	    mount_manifest(ngnfs_test_cluster_manifest(run.cluster), NGNFS_MOUNT_STABLE);
	unsigned int i;

	for (i = 0; i < run.iterations; i++)
		check_iteration(fs, &run.work[i], run.durable[i], run.started[i]);
	check_fsck(fs, when);
	ngnfs_unmount(fs);
}

static void client_kill(enum ngnfs_durability_mode mode)
{
	const char *mode_name = mode == NGNFS_MOUNT_STABLE ? "stable" : "writeback";
	uint64_t random_state = base_seed;
	unsigned int iteration;

	run.mode = mode;
	start_cluster(mode == NGNFS_MOUNT_STABLE ? "crash-client-stable" : "crash-client-wb");
	for (iteration = 0; iteration < ITERATIONS; iteration++) {
		uint64_t seed = base_seed + iteration;
		unsigned int target = 10 + (unsigned int)(mix(&random_state) % 500);
		char log_path[PATH_MAX], text[64], when[96];
		struct ack_log log;
		int status, ret;
		pid_t pid;

		workload_build(&run.work[iteration], seed, iteration);
		snprintf(log_path, sizeof(log_path), "%s/acked-%u.log",
			 ngnfs_test_cluster_dir(run.cluster), iteration);
		pid = spawn_child(iteration, log_path, seed, false);
		if (!wait_for_acks(log_path, pid, target)) {
			dump_child_output(iteration);
			ngnfs_test_cluster_dump_logs(run.cluster, 2000);
			failf("%s client made fewer than %u operations in %u ms", mode_name, target,
			      TARGET_WAIT_MS);
		}
		kill(pid, SIGKILL);
		ret = ngnfs_test_wait(pid, 10000, &status);
		if (ret < 0)
			failf("the killed client %d did not go away: %s", (int)pid, strerror(-ret));
		read_ack_log(log_path, &log);
		if (log.op_failed) {
			dump_child_output(iteration);
			failf("%s client: operation %u failed with %d before the kill", mode_name,
			      log.failed_op, log.failed_error);
		}
		run.started[iteration] = log.acked + 1;
		run.durable[iteration] = mode == NGNFS_MOUNT_STABLE ? log.acked : log.synced;
		run.iterations = iteration + 1;
		printf("%s iteration %u: seed %" PRIu64 ", killed (%s) after %u acknowledged "
		       "operations (%u durable)\n",
		       mode_name, iteration, seed,
		       ngnfs_test_describe_status(status, text, sizeof(text)), log.acked,
		       run.durable[iteration]);
		fflush(stdout);
		snprintf(when, sizeof(when), "after %s client kill %u", mode_name, iteration);
		verify_all(when);
	}
	if (ngnfs_test_cluster_stop(run.cluster) < 0)
		failf("a blockd did not shut down cleanly (see its log above)");
}

/*
 * power_cut: every blockd writes RocksDB without its WAL (the default,
 * --rocksdb-wal false), so the kill -9 also loses what RocksDB had not
 * flushed, as a power cut loses the page cache; the commit log alone
 * brings the acknowledged operations back.  Otherwise RocksDB's WAL is
 * written too (--rocksdb-wal true), the other way blockd can run.
 */
static void blockd_kill_stable(bool power_cut)
{
	static const char *const no_wal[] = { "--rocksdb-wal", "false", NULL };
	static const char *const with_wal[] = { "--rocksdb-wal", "true", NULL };
	uint64_t random_state = base_seed ^ 0xb10cdULL;
	unsigned int iteration;

	run.mode = NGNFS_MOUNT_STABLE;
	if (power_cut)
		start_cluster_args("crash-power-cut", no_wal);
	else
		start_cluster_args("crash-blockd", with_wal);
	for (iteration = 0; iteration < 2; iteration++) {
		uint64_t seed = base_seed + 100 + iteration;
		unsigned int target = 10 + (unsigned int)(mix(&random_state) % 400);
		unsigned int device = (unsigned int)(mix(&random_state) % DEVICE_COUNT);
		char log_path[PATH_MAX], text[64], when[96];
		struct ack_log log;
		int status, ret;
		pid_t pid;

		workload_build(&run.work[iteration], seed, iteration);
		snprintf(log_path, sizeof(log_path), "%s/acked-%u.log",
			 ngnfs_test_cluster_dir(run.cluster), iteration);
		pid = spawn_child(iteration, log_path, seed, true);
		if (!wait_for_acks(log_path, pid, target))
			failf("stable client made fewer than %u operations in %u ms", target,
			      TARGET_WAIT_MS);
		ret = ngnfs_test_cluster_kill(run.cluster, device, SIGKILL);
		if (ret < 0)
			failf("kill -9 of blockd device %u: %s", device, strerror(-ret));
		read_ack_log(log_path, &log);
		printf("blockd iteration %u: seed %" PRIu64 ", device %u killed after %u "
		       "acknowledged operations\n",
		       iteration, seed, device, log.acked);
		fflush(stdout);
		sleep_ms(50 + (unsigned int)(mix(&random_state) % 200));
		ret = ngnfs_test_cluster_restart(run.cluster, device);
		if (ret < 0)
			failf("restart of blockd device %u: %s", device, strerror(-ret));
		ret = ngnfs_test_wait(pid, CHILD_WAIT_MS, &status);
		if (ret < 0) {
			dump_child_output(iteration);
			ngnfs_test_cluster_dump_logs(run.cluster, 3000);
			failf("the client did not finish its %u operations within %u ms of the "
			      "restart of device %u",
			      run.work[iteration].op_count, CHILD_WAIT_MS, device);
		}
		read_ack_log(log_path, &log);
		/*
		 * Check durability and atomicity first, also when the client
		 * failed: a failed operation is in doubt (it may or may not
		 * have been applied), every acknowledged one must be there.
		 */
		run.started[iteration] = log.acked + (log.op_failed ? 1 : 0);
		run.durable[iteration] = log.acked;
		run.iterations = iteration + 1;
		printf("blockd iteration %u: the client finished %u operations; %u attempts failed "
		       "during the outage and were retried\n",
		       iteration, log.acked, log.retries);
		snprintf(when, sizeof(when), "after blockd %u kill %u", device, iteration);
		verify_all(when);
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
			dump_child_output(iteration);
			failf(
			    "the client ended with %s after %u operations (operation %u failed "
			    "with %d, retried for %u s); expected all %u to succeed across the "
			    "restart of device %u (acknowledged operations were all found intact)",
			    ngnfs_test_describe_status(status, text, sizeof(text)), log.acked,
			    log.failed_op, log.failed_error, RETRY_ATTEMPTS * RETRY_SLEEP_MS / 1000,
			    run.work[iteration].op_count, device);
		}
	}
	if (ngnfs_test_cluster_stop(run.cluster) < 0)
		failf("a blockd did not shut down cleanly (see its log above)");
}

/* ---- UNSTABLE writes in a stable mount ---- */

/* Longer than one write transaction (NGNFS_DATA_TXN_BLOCKS blocks), not block-aligned. */
#define UNSTABLE_LENGTH	     (600 * 1024 + 777)
#define UNSTABLE_INTERVAL_MS 60000
#define UNSTABLE_DIR	     "unstable"

enum unstable_file {
	UF_SYNCED, /* UNSTABLE, then ngnfs_sync_inode */
	UF_STABLE, /* NGNFS_WRITE_STABLE */
	UF_MOUNT,  /* NGNFS_WRITE_MOUNT in a stable mount */
	UF_MERGED, /* UNSTABLE, then a (stable) setxattr of the same file */
	UF_LOST,   /* UNSTABLE, nothing after it on this file */
	UF_AFTER,  /* created after the lost write, with an xattr */
	UF_COUNT,
};

static const char *const unstable_names[UF_COUNT] = { "synced", "stable", "mount",
						      "merged", "lost",	  "after" };

static void unstable_data(int file, uint8_t *data, size_t length)
{
	uint64_t state = 0x5eed0000ULL + (uint64_t)file;
	size_t i;

	for (i = 0; i < length; i++)
		data[i] = (uint8_t)(mix(&state) >> 24);
}

static void unstable_write(struct ngnfs_fs *fs, const struct ngnfs_handle *file, int index,
			   enum ngnfs_write_durability durability, uint8_t *data)
{
	size_t done = 0;

	unstable_data(index, data, UNSTABLE_LENGTH);
	while (done < UNSTABLE_LENGTH) {
		/* NFS-sized pieces, as the gateway writes them */
		size_t piece = UNSTABLE_LENGTH - done < 65536 ? UNSTABLE_LENGTH - done : 65536;
		ssize_t ret = ngnfs_write(fs, file, done, data + done, piece, durability);

		if (ret <= 0)
			failf("unstable child: write of %s at %zu: %zd (%s)", unstable_names[index],
			      done, ret, ngnfs_last_error());
		done += (size_t)ret;
	}
}

static int unstable_child_main(int argc, char **argv)
{
	struct ngnfs_handle root, dir, files[UF_COUNT], after_dir;
	uint8_t *data = malloc(UNSTABLE_LENGTH);
	struct ngnfs_fs *fs;
	int fd, i, ret;

	if (argc != 4 || !data) {
		fprintf(stderr, "usage: test_crash unstable-child MANIFEST LOG\n");
		return 2;
	}
	fd = open(argv[3], O_WRONLY | O_CREAT | O_APPEND | O_TRUNC, 0644);
	if (fd < 0) {
		fprintf(stderr, "unstable child: open %s: %s\n", argv[3], strerror(errno));
		return 4;
	}
	fs = mount_manifest_interval(argv[2], NGNFS_MOUNT_STABLE, UNSTABLE_INTERVAL_MS);
	ret = ngnfs_root(fs, &root);
	if (ret == 0)
		ret = ngnfs_create(fs, &root, UNSTABLE_DIR, S_IFDIR | 0755, 0, 0, 0, &dir, NULL);
	for (i = 0; ret == 0 && i < UF_COUNT; i++)
		ret = ngnfs_create(fs, &dir, unstable_names[i], S_IFREG | 0644, 0, 0, 0, &files[i],
				   NULL);
	if (ret < 0)
		failf("unstable child: creating the files: %s (%s)", strerror(-ret),
		      ngnfs_last_error());

	unstable_write(fs, &files[UF_SYNCED], UF_SYNCED, NGNFS_WRITE_UNSTABLE, data);
	ret = ngnfs_sync_inode(fs, &files[UF_SYNCED]);
	if (ret < 0)
		failf("unstable child: sync_inode: %s (%s)", strerror(-ret), ngnfs_last_error());
	unstable_write(fs, &files[UF_STABLE], UF_STABLE, NGNFS_WRITE_STABLE, data);
	unstable_write(fs, &files[UF_MOUNT], UF_MOUNT, NGNFS_WRITE_MOUNT, data);
	unstable_write(fs, &files[UF_MERGED], UF_MERGED, NGNFS_WRITE_UNSTABLE, data);
	ret = ngnfs_setxattr(fs, &files[UF_MERGED], XATTR_NAME, "merged", 6, 0);
	if (ret < 0)
		failf("unstable child: setxattr: %s (%s)", strerror(-ret), ngnfs_last_error());
	unstable_write(fs, &files[UF_LOST], UF_LOST, NGNFS_WRITE_UNSTABLE, data);

	/* metadata after the unsynced write: each must be durable on return */
	ret = ngnfs_create(fs, &dir, "after-dir", S_IFDIR | 0700, 0, 0, 0, &after_dir, NULL);
	if (ret == 0)
		ret = ngnfs_setxattr(fs, &files[UF_AFTER], XATTR_NAME, "after", 5, 0);
	if (ret < 0)
		failf("unstable child: metadata after the writes: %s (%s)", strerror(-ret),
		      ngnfs_last_error());
	log_line(fd, "ready\n");
	/* the parent kills us now: nothing else syncs */
	for (;;)
		pause();
}

static void expect_unstable_file(struct ngnfs_fs *fs, const struct ngnfs_handle *dir, int index,
				 bool with_data, const char *xattr, uint8_t *want, uint8_t *got)
{
	struct ngnfs_handle file;
	struct ngnfs_attr attr;
	char value[32];
	ssize_t length;
	size_t done = 0;
	int ret;

	ret = ngnfs_lookup(fs, dir, unstable_names[index], &file, &attr);
	if (ret < 0)
		failf("%s: its (stable) create is gone after the kill: %s", unstable_names[index],
		      strerror(-ret));
	if (!with_data) {
		if (attr.size != 0)
			failf("%s: an UNSTABLE write nothing synced is there after the kill (size "
			      "%" PRIu64 "): the stable mount did not defer it",
			      unstable_names[index], attr.size);
	} else {
		if (attr.size != UNSTABLE_LENGTH)
			failf("%s: size %" PRIu64 " after the kill, expected %d",
			      unstable_names[index], attr.size, UNSTABLE_LENGTH);
		unstable_data(index, want, UNSTABLE_LENGTH);
		while (done < UNSTABLE_LENGTH) {
			ssize_t ret_read =
			    ngnfs_read(fs, &file, done, got + done, UNSTABLE_LENGTH - done, NULL);

			if (ret_read <= 0)
				failf("%s: read at %zu: %zd (%s)", unstable_names[index], done,
				      ret_read, ngnfs_last_error());
			done += (size_t)ret_read;
		}
		if (memcmp(want, got, UNSTABLE_LENGTH) != 0)
			failf("%s: the data read back after the kill is not what was written",
			      unstable_names[index]);
	}
	if (xattr) {
		length = ngnfs_getxattr(fs, &file, XATTR_NAME, value, sizeof(value));
		if (length != (ssize_t)strlen(xattr) || memcmp(value, xattr, (size_t)length) != 0)
			failf("%s: xattr %s lost after the kill (%zd)", unstable_names[index],
			      XATTR_NAME, length);
	}
	printf("  %s: %s\n", unstable_names[index],
	       with_data	  ? "all data there"
	       : index == UF_LOST ? "its unsynced data is gone, as expected"
				  : "there, with its xattr");
}

static void client_kill_unstable_writes(void)
{
	uint8_t *want = malloc(UNSTABLE_LENGTH), *got = malloc(UNSTABLE_LENGTH);
	char log_path[PATH_MAX], output[PATH_MAX], *text = NULL;
	struct ngnfs_handle root, dir, after_dir;
	const char *argv[5];
	struct ngnfs_fs *fs;
	unsigned int waited;
	int status, ret;
	pid_t pid;

	if (!want || !got)
		failf("out of memory");
	start_cluster("crash-unstable");
	snprintf(log_path, sizeof(log_path), "%s/unstable.log",
		 ngnfs_test_cluster_dir(run.cluster));
	snprintf(output, sizeof(output), "%s/client-0.out", ngnfs_test_cluster_dir(run.cluster));
	argv[0] = program_path;
	argv[1] = "unstable-child";
	argv[2] = ngnfs_test_cluster_manifest(run.cluster);
	argv[3] = log_path;
	argv[4] = NULL;
	ret = ngnfs_test_spawn(argv, output, &pid);
	if (ret < 0)
		failf("spawning the client process: %s", strerror(-ret));
	for (waited = 0; waited < TARGET_WAIT_MS; waited += 10) {
		free(text);
		text = ngnfs_test_read_file(log_path, NULL);
		if (text && strstr(text, "ready"))
			break;
		if (ngnfs_test_wait(pid, 0, &status) == 0) {
			dump_child_output(0);
			failf("the client ended before it was killed");
		}
		sleep_ms(10);
	}
	free(text);
	if (waited >= TARGET_WAIT_MS) {
		dump_child_output(0);
		failf("the client did not get ready in %u ms", TARGET_WAIT_MS);
	}
	kill(pid, SIGKILL);
	ret = ngnfs_test_wait(pid, 10000, &status);
	if (ret < 0)
		failf("the killed client %d did not go away: %s", (int)pid, strerror(-ret));

	fs = mount_manifest(ngnfs_test_cluster_manifest(run.cluster), NGNFS_MOUNT_STABLE);
	ret = ngnfs_root(fs, &root);
	if (ret == 0)
		ret = ngnfs_lookup(fs, &root, UNSTABLE_DIR, &dir, NULL);
	if (ret < 0)
		failf("the directory %s is gone after the kill: %s", UNSTABLE_DIR, strerror(-ret));
	printf("after the kill of the stable client:\n");
	expect_unstable_file(fs, &dir, UF_SYNCED, true, NULL, want, got);
	expect_unstable_file(fs, &dir, UF_STABLE, true, NULL, want, got);
	expect_unstable_file(fs, &dir, UF_MOUNT, true, NULL, want, got);
	expect_unstable_file(fs, &dir, UF_MERGED, true, "merged", want, got);
	expect_unstable_file(fs, &dir, UF_LOST, false, NULL, want, got);
	expect_unstable_file(fs, &dir, UF_AFTER, false, "after", want, got);
	ret = ngnfs_lookup(fs, &dir, "after-dir", &after_dir, NULL);
	if (ret < 0)
		failf("after-dir, made after the unsynced write, is gone: %s", strerror(-ret));
	check_fsck(fs, "after the unstable client kill");
	ngnfs_unmount(fs);
	free(want);
	free(got);
	if (ngnfs_test_cluster_stop(run.cluster) < 0)
		failf("a blockd did not shut down cleanly (see its log above)");
}

int main(int argc, char **argv)
{
	static char self[PATH_MAX];
	const char *seed_text = getenv("NGNFS_TEST_SEED");
	ssize_t length;

	if (argc >= 2 && strcmp(argv[1], "child") == 0)
		return child_main(argc, argv);
	if (argc >= 2 && strcmp(argv[1], "unstable-child") == 0)
		return unstable_child_main(argc, argv);
	if (argc != 2) {
		fprintf(stderr,
			"usage: test_crash client_kill_stable|client_kill_writeback|"
			"blockd_kill_stable|blockd_power_cut_stable|client_kill_unstable_writes\n");
		return 2;
	}
	length = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (length <= 0)
		failf("readlink /proc/self/exe: %s", strerror(errno));
	self[length] = '\0';
	program_path = self;
	if (seed_text)
		base_seed = strtoull(seed_text, NULL, 0);
	else
		base_seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 16);
	printf("%s: NGNFS_TEST_SEED=%" PRIu64 "\n", argv[1], base_seed);
	fflush(stdout);
	if (strcmp(argv[1], "client_kill_stable") == 0)
		client_kill(NGNFS_MOUNT_STABLE);
	else if (strcmp(argv[1], "client_kill_writeback") == 0)
		client_kill(NGNFS_MOUNT_WRITEBACK);
	else if (strcmp(argv[1], "blockd_kill_stable") == 0)
		blockd_kill_stable(false);
	else if (strcmp(argv[1], "blockd_power_cut_stable") == 0)
		blockd_kill_stable(true);
	else if (strcmp(argv[1], "client_kill_unstable_writes") == 0)
		client_kill_unstable_writes();
	else
		failf("unknown case %s", argv[1]);
	printf("%s: passed\n", argv[1]);
	return 0;
}
