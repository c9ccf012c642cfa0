/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Benchmark of the native API (libcore/ngnfs.h) on real blockd processes:
 * what an archive ingest costs a gateway before NFS is in the way.
 *
 * For each device count (1 and 3 by default) it starts a fresh cluster
 * with the shared test harness, runs mkfs, and for each durability mode
 * (writeback, stable) mounts and runs, each in its own top directory:
 *
 *   create        N empty files in one directory, one thread
 *   create-1t     N/2 files, one thread, its own directory
 *   create-2t     N/2 files per thread, two threads, each its own directory
 *                 (aggregate rate; about 2x create-1t means no global lock,
 *                 on a machine with a core per thread and blockd idle)
 *   untar         D dirs x F files, each created and given 1-4 KiB of data
 *   stat          getattr of every untar file
 *   readdir       every entry of the create directory (count checked)
 *   xattr-set     a 100-byte user.archive.location on every untar file
 *   xattr-replace the same name replaced by a new 100-byte value
 *   rename        every untar file to a new name in its own directory
 *   unlink        every renamed untar file
 *
 * Writeback rates are printed twice: as acknowledged (from memory), and
 * "to durable", i.e. including the ngnfs_sync that makes the phase durable.
 * Stable mode runs a smaller N by default (--stable-files): every create
 * waits for a RocksDB sync there.
 *
 * The cost columns are per 1000 operations (cpu-us: per operation):
 *   writes   libcore's WRITE/COMMIT round trips (cache counter writes_sent)
 *   cpu-us   CPU microseconds per operation of the threads that run the
 *            operations (CLOCK_THREAD_CPUTIME_ID; not libcore's I/O and
 *            flusher threads, not blockd): what the machine's load
 *            disturbs least
 *   retries  transaction re-runs (cache counter retries): a block busy,
 *            not cached, frozen in a write in flight, or an empty
 *            allocation pool; each is a wait
 *   syncs    RocksDB synced write batches, i.e. blockd group commits,
 *            summed over the devices: the difference of the counters
 *            STATFS reports (ngnfs_statfs_device) before and after the
 *            phase (the "stable group commit" table).
 *
 * The "stable group commit" table then runs stable creates with 1, 4 and
 * 16 threads (all in one directory, and each thread in its own) and
 * prints creates/s and syncs per 1000 creates: below 1000 means several
 * operations shared one RocksDB sync.
 *
 * Run: <build>/bench/native_bench [--files N] [--stable-files N]
 *      [--devices 1,3] [--modes writeback,stable] [--no-commit-table]
 * (blockd from --blockd or NGNFS_BLOCKD, else the build's own).
 *
 * XXX:
 *  - Loopback, one 2-core VM: client, blockd and RocksDB share the CPUs,
 *    so thread scaling is bounded by the machine, not only by libcore.
 */

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "cluster.h"
#include "fs-internal.h"
#include "ngnfs.h"

#define XATTR_NAME	 "user.archive.location"
#define XATTR_VALUE_SIZE 100
#define MAX_THREADS	 16

static unsigned int file_count = 20000;
static unsigned int stable_file_count = 2000;
static unsigned int untar_dirs = 50;
static unsigned int untar_files = 200;
static unsigned int stable_untar_dirs = 10;
static unsigned int stable_untar_files = 50;
static bool commit_table = true;
static unsigned int device_counts[4] = { 1, 3 };
static unsigned int device_count_count = 2;
static bool run_writeback = true, run_stable = true;

/*
 * A phase that stops making progress (a livelocked transaction, a lost
 * grant) is reported by name instead of hanging the benchmark.
 */
#define STALL_SECONDS 30
static unsigned long long progress;
static const char *current_phase = "start";

static void made_progress(void)
{
	__atomic_add_fetch(&progress, 1, __ATOMIC_RELAXED);
}

/* The mounted filesystem of the table phases, for the retries column. */
static struct ngnfs_fs *table_fs;
static uint64_t phase_retries;

static uint64_t txn_retries(void)
{
	struct ngnfs_cache_counters counters;

	if (!table_fs)
		return 0;
	ngnfs_cache_counters(table_fs->cache, &counters);
	return counters.retries;
}

/*
 * CPU time of the threads running the operations (not libcore's I/O and
 * flusher threads, not blockd): less sensitive than the rates to other
 * processes on the machine.  Workers add theirs; the main thread's own is
 * measured from set_phase.
 */
static uint64_t worker_cpu_ns;
static uint64_t phase_main_cpu_ns;

static uint64_t thread_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static uint64_t phase_cpu_ns(void)
{
	return thread_cpu_ns() - phase_main_cpu_ns +
	       __atomic_load_n(&worker_cpu_ns, __ATOMIC_RELAXED);
}

static void set_phase(const char *phase)
{
	__atomic_store_n(&current_phase, phase, __ATOMIC_RELEASE);
	phase_retries = txn_retries();
	__atomic_store_n(&worker_cpu_ns, 0, __ATOMIC_RELAXED);
	phase_main_cpu_ns = thread_cpu_ns();
	made_progress();
}

static void *watchdog(void *arg)
{
	unsigned long long last = ~0ULL, now;
	unsigned int still = 0;

	(void)arg;
	for (;;) {
		sleep(1);
		now = __atomic_load_n(&progress, __ATOMIC_RELAXED);
		still = now == last ? still + 1 : 0;
		last = now;
		if (still >= STALL_SECONDS) {
			fprintf(stderr,
				"native_bench: phase %s made no progress for %u s (after %llu "
				"operations in all): stalled, giving up\n",
				__atomic_load_n(&current_phase, __ATOMIC_ACQUIRE), STALL_SECONDS,
				now);
			_exit(3);
		}
	}
	return NULL;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void die(const char *what, int ret)
{
	fprintf(stderr, "native_bench: %s: %s (%s)\n", what, strerror(ret < 0 ? -ret : ret),
		ngnfs_last_error());
	exit(1);
}

static uint64_t writes_sent(struct ngnfs_fs *fs)
{
	struct ngnfs_cache_counters counters;

	ngnfs_cache_counters(fs->cache, &counters);
	return counters.writes_sent;
}

/* ---- one line of the table ---- */

static void print_header(void)
{
	printf("%-4s %-9s %-14s %7s %8s %10s %12s %8s %9s %7s\n", "devs", "mode", "workload", "ops",
	       "seconds", "ops/s", "durable/s", "writes/k", "retries/k", "cpu-us");
}

static void print_row(unsigned int devices, const char *mode, const char *workload, uint64_t ops,
		      double seconds, double durable_seconds, uint64_t writes)
{
	char durable[32] = "-";

	if (durable_seconds > 0)
		snprintf(durable, sizeof(durable), "%.0f", (double)ops / durable_seconds);
	printf("%-4u %-9s %-14s %7llu %8.3f %10.0f %12s %8.1f %9.1f %7.2f\n", devices, mode,
	       workload, (unsigned long long)ops, seconds, (double)ops / seconds, durable,
	       ops ? (double)writes * 1000.0 / (double)ops : 0.0,
	       ops ? (double)(txn_retries() - phase_retries) * 1000.0 / (double)ops : 0.0,
	       ops ? (double)phase_cpu_ns() / 1000.0 / (double)ops : 0.0);
	fflush(stdout);
}

/* ---- workers ---- */

struct create_work {
	struct ngnfs_fs *fs;
	struct ngnfs_handle dir;
	const char *prefix;
	unsigned int count;
	int error;
};

static void *create_worker(void *arg)
{
	struct create_work *work = arg;
	uint64_t cpu = thread_cpu_ns();
	char name[64];
	unsigned int i;
	int ret;

	for (i = 0; i < work->count; i++) {
		snprintf(name, sizeof(name), "%s%07u", work->prefix, i);
		ret = ngnfs_create(work->fs, &work->dir, name, S_IFREG | 0644, 1000, 1000, 0, NULL,
				   NULL);
		if (ret < 0) {
			fprintf(stderr, "native_bench: create %s: %s (%s)\n", name, strerror(-ret),
				ngnfs_last_error());
			work->error = ret;
			break;
		}
		made_progress();
	}
	__atomic_add_fetch(&worker_cpu_ns, thread_cpu_ns() - cpu, __ATOMIC_RELAXED);
	return NULL;
}

static struct ngnfs_handle make_dir(struct ngnfs_fs *fs, const struct ngnfs_handle *parent,
				    const char *name)
{
	struct ngnfs_handle handle;
	int ret;

	ret = ngnfs_create(fs, parent, name, S_IFDIR | 0755, 1000, 1000, 0, &handle, NULL);
	if (ret < 0)
		die(name, ret);
	return handle;
}

/*
 * Threads each creating count files, in their own directories (own_dirs)
 * or all in one.  Returns the elapsed time; the writes counter delta in
 * *writes.
 */
static double run_creates(struct ngnfs_fs *fs, const struct ngnfs_handle *parent, const char *tag,
			  unsigned int threads, unsigned int count, bool own_dirs, uint64_t *writes)
{
	struct create_work work[MAX_THREADS];
	pthread_t thread[MAX_THREADS];
	char prefix[MAX_THREADS][16];
	struct ngnfs_handle shared;
	uint64_t writes_before;
	char name[64];
	unsigned int i;
	double start;

	if (!own_dirs) {
		snprintf(name, sizeof(name), "%s-shared", tag);
		shared = make_dir(fs, parent, name);
	}
	for (i = 0; i < threads; i++) {
		work[i].fs = fs;
		if (own_dirs) {
			snprintf(name, sizeof(name), "%s-t%u", tag, i);
			work[i].dir = make_dir(fs, parent, name);
		} else {
			work[i].dir = shared;
		}
		snprintf(prefix[i], sizeof(prefix[i]), "t%u-", i);
		work[i].prefix = prefix[i];
		work[i].count = count;
		work[i].error = 0;
	}
	writes_before = writes_sent(fs);
	start = now_s();
	for (i = 0; i < threads; i++)
		if (pthread_create(&thread[i], NULL, create_worker, &work[i]))
			die("pthread_create", -EAGAIN);
	for (i = 0; i < threads; i++)
		pthread_join(thread[i], NULL);
	start = now_s() - start;
	*writes = writes_sent(fs) - writes_before;
	for (i = 0; i < threads; i++)
		if (work[i].error)
			die("create phase", work[i].error);
	return start;
}

/* Time for ngnfs_sync (writeback: what "to durable" adds). */
static double sync_time(struct ngnfs_fs *fs)
{
	double start = now_s();
	int ret = ngnfs_sync(fs);

	if (ret < 0)
		die("sync", ret);
	return now_s() - start;
}

struct readdir_count {
	uint64_t entries;
};

static int count_entry(void *arg, const char *name, size_t name_length,
		       const struct ngnfs_handle *handle, uint32_t type_mode, uint64_t cookie)
{
	struct readdir_count *count = arg;

	(void)name;
	(void)name_length;
	(void)handle;
	(void)type_mode;
	(void)cookie;
	count->entries++;
	made_progress();
	return 0;
}

static uint64_t readdir_all(struct ngnfs_fs *fs, const struct ngnfs_handle *dir)
{
	struct readdir_count count = { 0 };
	uint64_t cookie = 0;
	bool end = false;
	int ret;

	/* the callback never stops, so one call lists everything */
	while (!end) {
		ret = ngnfs_readdir(fs, dir, cookie, count_entry, &count, &end);
		if (ret < 0)
			die("readdir", ret);
		if (!end)
			die("readdir returned without reaching the end", -EIO);
	}
	return count.entries;
}

static void fill_value(char *value, unsigned int file, unsigned int version)
{
	int length = snprintf(value, XATTR_VALUE_SIZE, "tier=tape;media=LTO%05u;offset=%u;v=%u;",
			      file % 100000, file * 4096, version);

	memset(value + length, 'x', XATTR_VALUE_SIZE - (size_t)length);
}

/* ---- one mount: every workload ---- */

static void run_mount(unsigned int devices, const char *const *addresses,
		      enum ngnfs_durability_mode mode)
{
	bool writeback = mode == NGNFS_MOUNT_WRITEBACK;
	const char *mode_name = writeback ? "writeback" : "stable";
	unsigned int files = writeback ? file_count : stable_file_count;
	unsigned int dirs = writeback ? untar_dirs : stable_untar_dirs;
	unsigned int per_dir = writeback ? untar_files : stable_untar_files;
	struct ngnfs_mount_options options = {
		.device_addresses = addresses,
		.device_count = (uint16_t)devices,
		.durability = mode,
	};
	struct ngnfs_handle root, top, big, *tree, *tree_dirs;
	char name[64], data[4096], value[XATTR_VALUE_SIZE];
	struct ngnfs_attr attr;
	struct ngnfs_fs *fs;
	double seconds, synced;
	uint64_t writes, before, entries;
	unsigned int d, f, i, tree_count = dirs * per_dir;
	int ret;

	ret = ngnfs_mount(&options, &fs);
	if (ret < 0)
		die("mount", ret);
	table_fs = fs;
	ret = ngnfs_root(fs, &root);
	if (ret < 0)
		die("root", ret);
	top = make_dir(fs, &root, mode_name);

	/* create: one thread, one directory */
	set_phase("create");
	before = writes_sent(fs);
	seconds = run_creates(fs, &top, "create", 1, files, false, &writes);
	synced = writeback ? seconds + sync_time(fs) : 0;
	writes = writes_sent(fs) - before;
	print_row(devices, mode_name, "create", files, seconds, synced, writes);
	big = top; /* the shared dir is "create-shared" under top */
	ret = ngnfs_lookup(fs, &top, "create-shared", &big, NULL);
	if (ret < 0)
		die("lookup create-shared", ret);

	/* 1 vs 2 threads, each in its own directory */
	set_phase("create-1t");
	before = writes_sent(fs);
	seconds = run_creates(fs, &top, "one", 1, files / 2, true, &writes);
	synced = writeback ? seconds + sync_time(fs) : 0;
	writes = writes_sent(fs) - before;
	print_row(devices, mode_name, "create-1t", files / 2, seconds, synced, writes);
	set_phase("create-2t");
	before = writes_sent(fs);
	seconds = run_creates(fs, &top, "two", 2, files / 2, true, &writes);
	synced = writeback ? seconds + sync_time(fs) : 0;
	writes = writes_sent(fs) - before;
	print_row(devices, mode_name, "create-2t", files, seconds, synced, writes);

	/* untar: directories of small files with data */
	tree = calloc(tree_count, sizeof(*tree));
	tree_dirs = calloc(dirs, sizeof(*tree_dirs));
	if (!tree || !tree_dirs)
		die("calloc", -ENOMEM);
	for (i = 0; i < sizeof(data); i++)
		data[i] = (char)('a' + i % 26);
	set_phase("untar");
	before = writes_sent(fs);
	seconds = now_s();
	for (d = 0; d < dirs; d++) {
		struct ngnfs_handle dir;

		snprintf(name, sizeof(name), "untar-%03u", d);
		dir = make_dir(fs, &top, name);
		tree_dirs[d] = dir;
		for (f = 0; f < per_dir; f++) {
			struct ngnfs_handle *file = &tree[d * per_dir + f];
			size_t length = 1024 + ((d * 7919 + f * 104729) % 3073);
			ssize_t written;

			snprintf(name, sizeof(name), "file-%04u", f);
			ret =
			    ngnfs_create(fs, &dir, name, S_IFREG | 0644, 1000, 1000, 0, file, NULL);
			if (ret < 0)
				die("untar create", ret);
			written = ngnfs_write(fs, file, 0, data, length, NGNFS_WRITE_MOUNT);
			if (written != (ssize_t)length)
				die("untar write", written < 0 ? (int)written : -EIO);
			made_progress();
		}
	}
	seconds = now_s() - seconds;
	synced = writeback ? seconds + sync_time(fs) : 0;
	print_row(devices, mode_name, "untar", tree_count, seconds, synced,
		  writes_sent(fs) - before);

	/* stat */
	set_phase("stat");
	before = writes_sent(fs);
	seconds = now_s();
	for (i = 0; i < tree_count; i++) {
		ret = ngnfs_getattr(fs, &tree[i], &attr);
		if (ret < 0)
			die("getattr", ret);
		if (attr.size < 1024 || attr.size > 4096)
			die("getattr: size of an untar file is not 1-4 KiB", -EIO);
		made_progress();
	}
	seconds = now_s() - seconds;
	print_row(devices, mode_name, "stat", tree_count, seconds, 0, writes_sent(fs) - before);

	/* readdir of the big directory */
	set_phase("readdir");
	before = writes_sent(fs);
	seconds = now_s();
	entries = readdir_all(fs, &big);
	seconds = now_s() - seconds;
	if (entries != files) {
		fprintf(stderr,
			"native_bench: readdir of create-shared: expected %u entries, got %llu\n",
			files, (unsigned long long)entries);
		exit(1);
	}
	print_row(devices, mode_name, "readdir", entries, seconds, 0, writes_sent(fs) - before);

	/* xattrs: set, then replace on every file */
	for (int pass = 0; pass < 2; pass++) {
		set_phase(pass ? "xattr-replace" : "xattr-set");
		before = writes_sent(fs);
		seconds = now_s();
		for (i = 0; i < tree_count; i++) {
			fill_value(value, i, (unsigned int)pass);
			ret = ngnfs_setxattr(fs, &tree[i], XATTR_NAME, value, sizeof(value),
					     pass ? XATTR_REPLACE : XATTR_CREATE);
			if (ret < 0)
				die(pass ? "setxattr replace" : "setxattr create", ret);
			made_progress();
		}
		seconds = now_s() - seconds;
		synced = writeback ? seconds + sync_time(fs) : 0;
		print_row(devices, mode_name, pass ? "xattr-replace" : "xattr-set", tree_count,
			  seconds, synced, writes_sent(fs) - before);
	}
	/* spot check: the replaced value is what getxattr returns */
	{
		char got[XATTR_VALUE_SIZE];
		ssize_t length =
		    ngnfs_getxattr(fs, &tree[tree_count - 1], XATTR_NAME, got, sizeof(got));

		fill_value(value, tree_count - 1, 1);
		if (length != XATTR_VALUE_SIZE || memcmp(got, value, sizeof(value)))
			die("getxattr after replace: value differs", -EIO);
	}

	/* rename within each directory, then unlink the new names */
	for (int pass = 0; pass < 2; pass++) {
		set_phase(pass ? "unlink" : "rename");
		before = writes_sent(fs);
		seconds = now_s();
		for (d = 0; d < dirs; d++) {
			for (f = 0; f < per_dir; f++) {
				char new_name[64];

				snprintf(name, sizeof(name), "file-%04u", f);
				snprintf(new_name, sizeof(new_name), "renamed-%04u", f);
				if (pass)
					ret = ngnfs_unlink(fs, &tree_dirs[d], new_name);
				else
					ret = ngnfs_rename(fs, &tree_dirs[d], name, &tree_dirs[d],
							   new_name);
				if (ret < 0)
					die(pass ? "unlink" : "rename", ret);
				made_progress();
			}
		}
		seconds = now_s() - seconds;
		synced = writeback ? seconds + sync_time(fs) : 0;
		print_row(devices, mode_name, pass ? "unlink" : "rename", tree_count, seconds,
			  synced, writes_sent(fs) - before);
	}
	if (readdir_all(fs, &tree_dirs[0]) != 0)
		die("readdir after unlink: the directory is not empty", -EIO);
	free(tree_dirs);
	free(tree);
	table_fs = NULL;
	ngnfs_unmount(fs);
}

/* ---- blockd group commits, from STATFS ---- */

/* Group commits (synced RocksDB batches) of every device since it started. */
static uint64_t commits_now(struct ngnfs_fs *fs, unsigned int devices)
{
	struct ngnfs_statfs_device statfs;
	uint64_t total = 0;
	unsigned int device;
	int ret;

	for (device = 0; device < devices; device++) {
		ret = ngnfs_statfs_device(fs, (uint16_t)device, &statfs);
		if (ret < 0)
			die("statfs", ret);
		total += statfs.group_commits;
	}
	return total;
}

/*
 * Mount stable, run threads x count creates, unmount; returns the group
 * commits the creates made (blockd's counters before and after them), the
 * rate in *rate and the WRITE round trips in *writes.
 */
static uint64_t counted_cycle(struct ngnfs_test_cluster *cluster, unsigned int threads,
			      unsigned int count, bool own_dirs, const char *tag, double *rate,
			      uint64_t *writes)
{
	unsigned int devices = ngnfs_test_cluster_device_count(cluster);
	struct ngnfs_mount_options options = {
		.device_addresses = ngnfs_test_cluster_addresses(cluster),
		.device_count = (uint16_t)devices,
		.durability = NGNFS_MOUNT_STABLE,
	};
	struct ngnfs_handle root, top;
	uint64_t before, after;
	struct ngnfs_fs *fs;
	double seconds;
	int ret;

	set_phase(tag);
	ret = ngnfs_mount(&options, &fs);
	if (ret < 0)
		die("mount", ret);
	ret = ngnfs_root(fs, &root);
	if (ret < 0)
		die("root", ret);
	top = make_dir(fs, &root, tag);
	before = commits_now(fs, devices);
	seconds = run_creates(fs, &top, tag, threads, count, own_dirs, writes);
	after = commits_now(fs, devices);
	*rate = (double)(threads * count) / seconds;
	ngnfs_unmount(fs);
	return after - before;
}

static void run_commit_table(struct ngnfs_test_cluster *cluster, unsigned int devices)
{
	static const unsigned int thread_counts[] = { 1, 4, 16 };
	uint64_t commits, writes;
	unsigned int t, creates;
	char tag[32];
	double rate;

	printf("\nstable group commit, %u device(s)\n", devices);
	printf("%-4s %-8s %-9s %8s %10s %12s %12s\n", "devs", "threads", "dirs", "creates",
	       "creates/s", "syncs/k", "writes/k");
	for (t = 0; t < sizeof(thread_counts) / sizeof(thread_counts[0]); t++) {
		for (int own = 0; own < 2; own++) {
			unsigned int threads = thread_counts[t];
			unsigned int per_thread = stable_file_count / threads;

			if (threads == 1 && own)
				continue;
			snprintf(tag, sizeof(tag), "gc%u%s", threads, own ? "own" : "one");
			commits =
			    counted_cycle(cluster, threads, per_thread, own, tag, &rate, &writes);
			creates = threads * per_thread;
			printf("%-4u %-8u %-9s %8u %10.0f %12.1f %12.1f\n", devices, threads,
			       own ? "own" : "one", creates, rate,
			       (double)commits * 1000.0 / creates,
			       (double)writes * 1000.0 / creates);
			fflush(stdout);
		}
	}
}

static void usage(void)
{
	printf("usage: native_bench [--files N] [--stable-files N] [--devices 1,3]\n"
	       "                    [--modes writeback,stable] [--no-commit-table]\n"
	       "                    [--blockd PATH]\n"
	       "  --files N          creates in the big directory, writeback (default 20000)\n"
	       "  --stable-files N   the same in stable mode (default 2000)\n"
	       "  --devices LIST     device counts to run, comma separated (default 1,3)\n"
	       "  --modes LIST       writeback,stable (default both; e.g. one for perf record)\n"
	       "  --no-commit-table  skip the stable group-commit table (blockd restarts)\n"
	       "  --blockd PATH      blockd binary (default NGNFS_BLOCKD or the build's)\n");
}

int main(int argc, char **argv)
{
	static const struct option long_options[] = {
		{ "files", required_argument, NULL, 'f' },
		{ "stable-files", required_argument, NULL, 's' },
		{ "devices", required_argument, NULL, 'd' },
		{ "no-commit-table", no_argument, NULL, 'n' },
		{ "modes", required_argument, NULL, 'm' },
		{ "blockd", required_argument, NULL, 'b' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	unsigned int i;
	int option;

	while ((option = getopt_long(argc, argv, "h", long_options, NULL)) != -1) {
		switch (option) {
		case 'f':
			file_count = (unsigned int)strtoul(optarg, NULL, 0);
			break;
		case 's':
			stable_file_count = (unsigned int)strtoul(optarg, NULL, 0);
			break;
		case 'd': {
			char *list = optarg, *token, *save = NULL;

			device_count_count = 0;
			while ((token = strtok_r(list, ",", &save)) && device_count_count < 4) {
				device_counts[device_count_count++] =
				    (unsigned int)strtoul(token, NULL, 0);
				list = NULL;
			}
			break;
		}
		case 'n':
			commit_table = false;
			break;
		case 'm':
			run_writeback = strstr(optarg, "writeback") != NULL;
			run_stable = strstr(optarg, "stable") != NULL;
			break;
		case 'b':
			setenv("NGNFS_BLOCKD", optarg, 1);
			break;
		case 'h':
			usage();
			return 0;
		default:
			usage();
			return 2;
		}
	}
	if (file_count < 2 || stable_file_count < 16) {
		fprintf(stderr, "native_bench: --files must be >= 2, --stable-files >= 16\n");
		return 2;
	}
#ifdef NGNFS_BENCH_BLOCKD
	setenv("NGNFS_BLOCKD", NGNFS_BENCH_BLOCKD, 0);
#endif
	{
		pthread_t thread;

		if (pthread_create(&thread, NULL, watchdog, NULL))
			die("pthread_create", -EAGAIN);
		pthread_detach(thread);
	}
	print_header();
	for (i = 0; i < device_count_count; i++) {
		unsigned int devices = device_counts[i];
		struct ngnfs_mkfs_options mkfs = { 0 };
		struct ngnfs_test_cluster *cluster;
		uint8_t fs_id[16];
		int ret;

		cluster = ngnfs_test_cluster_start(devices, "native-bench");
		if (!cluster)
			die("start blockd cluster", -EIO);
		mkfs.device_addresses = ngnfs_test_cluster_addresses(cluster);
		mkfs.device_count = (uint16_t)devices;
		ret = ngnfs_mkfs(&mkfs, fs_id);
		if (ret < 0)
			die("mkfs", ret);
		if (run_writeback)
			run_mount(devices, ngnfs_test_cluster_addresses(cluster),
				  NGNFS_MOUNT_WRITEBACK);
		if (run_stable)
			run_mount(devices, ngnfs_test_cluster_addresses(cluster),
				  NGNFS_MOUNT_STABLE);
		if (commit_table && run_stable) {
			run_commit_table(cluster, devices);
			if (i + 1 < device_count_count)
				print_header();
		}
		if (ngnfs_test_cluster_stop(cluster) < 0)
			fprintf(stderr, "native_bench: a blockd did not stop cleanly\n");
	}
	return 0;
}
