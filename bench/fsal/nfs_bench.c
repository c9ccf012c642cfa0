/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * nfs_bench: the NFS gateway workloads, run the same way against several
 * ganesha.nfsd instances in one run so their figures can be compared.
 *
 * Targets: FSAL_VFS (a local temporary folder: the "what a plain local
 * filesystem behind ganesha costs" baseline), FSAL_MEM (ganesha's own
 * in-memory FSAL: the upper bound of the ganesha core + MDCACHE), and
 * FSAL_NGNFS when a plugin folder and FSAL block (with its blockd
 * devices) are given.  Each target gets its own daemon from
 * ctest/fsal/ganesha_harness.c, so they all see identical core settings.
 * --ngnfs-durability stable,writeback runs FSAL_NGNFS twice, once per
 * Durability mode (targets NGNFS and NGNFS-wb), each on a cluster of its
 * own, so both modes are compared with the same VFS and MEM figures.
 *
 * Workloads (each with 1 and 4 concurrent connections; every connection is
 * a thread with its own libnfs context and its own NFSv4 client name and
 * verifier, so connections never share a client id):
 *   create   empty files (nfs_open2 O_CREAT|O_WRONLY + close; nfs_creat
 *            opens read-only in libnfs 4.0, so a WRITE gets OPENMODE)
 *   untar    a tree of directories of small files (mkdir, create, write
 *            1-4 KiB, close), like unpacking an archive
 *   stat     nfs_stat64 of every file of that tree
 *   readdir  every directory of the tree, entries per second
 *   rename   every file to a new name in its directory
 *   unlink   every file, then the directories
 *   seqwrite one file per connection, writes of 3584 bytes (libnfs 4.0
 *            cannot encode a larger NFSv4 WRITE)
 *   seqread  the same files back with 1 MiB reads
 * The total amount of work is the same for 1 and 4 connections (it is
 * split between them), so the figures compare directly.
 *
 * --rss N instead samples the daemon's VmRSS (/proc/PID/status) every
 * 20 ms while one connection creates and stats N files, and prints the
 * peak: what metadata caching costs the gateway per file.  A line after
 * every tenth of the creates (and one after the stats) shows whether the
 * resident size has reached a plateau.
 *
 * This is a benchmark, not a test: it is built but never registered
 * with ctest; it prints figures and exits non-zero only when a target
 * could not be run.
 *
 * XXX:
 *  - libnfs 4.0 speaks NFSv4.0 only, so this measures v4.0 (no sessions,
 *    no compound batching beyond what libnfs does); its exclusive create
 *    sends no mode.
 *  - The NGNFS target either runs on a cluster the caller gives in the
 *    FSAL block, or (--ngnfs-devices N) on blockd devices started with
 *    the shared test harness (ctest/harness/cluster.h) and formatted with
 *    `ngnfs mkfs`; the devices then share this machine's two cores with
 *    the gateway and the clients.
 *  - Figures on a 2-core VM are noisy; run several times before trusting
 *    a ratio.
 */

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <nfsc/libnfs.h>

#include "cluster.h"
#include "ganesha_harness.h"
#include "ngnfs_backend.h"
#include "libnfs_client_id.h"

#define MAX_THREADS 16
#define MAX_TARGETS 4 /* VFS, MEM, NGNFS stable, NGNFS writeback */
#define WRITE_CHUNK 3584
#define READ_CHUNK  (1024 * 1024)

enum workload {
	WORKLOAD_CREATE,
	WORKLOAD_UNTAR,
	WORKLOAD_STAT,
	WORKLOAD_READDIR,
	WORKLOAD_RENAME,
	WORKLOAD_UNLINK,
	WORKLOAD_SEQWRITE,
	WORKLOAD_SEQREAD,
	WORKLOAD_COUNT,
};

static const char *const workload_names[WORKLOAD_COUNT] = {
	"create", "untar", "stat", "readdir", "rename", "unlink", "seqwrite", "seqread",
};
static const char *const workload_units[WORKLOAD_COUNT] = {
	"files/s", "files/s", "stats/s", "entries/s", "renames/s", "unlinks/s", "MiB/s", "MiB/s",
};

static struct {
	unsigned int dirs;
	unsigned int files_per_dir;
	unsigned int create_files;
	unsigned int min_file_size;
	unsigned int max_file_size;
	unsigned int sequential_mib;
	unsigned int readdir_rounds;
	unsigned int thread_counts[4];
	unsigned int thread_count_count;
	unsigned long rss_files;
	const char *ngnfs_plugins_dir;
	const char *ngnfs_fsal_block;
	unsigned int ngnfs_devices;
	bool ngnfs_stable, ngnfs_writeback; /* which Durability modes to run */
	bool want_vfs, want_mem, want_ngnfs;
} settings = {
	.dirs = 20,
	.files_per_dir = 100,
	.create_files = 2000,
	.min_file_size = 1024,
	.max_file_size = 4096,
	.sequential_mib = 64,
	.readdir_rounds = 50,
	.thread_counts = { 1, 4 },
	.thread_count_count = 2,
	.want_vfs = true,
	.want_mem = true,
	.want_ngnfs = true,
	.ngnfs_stable = true,
};

struct target {
	const char *name;
	const char *fsal_block;
	char *owned_fsal_block; /* fsal_block when this program built it */
	const char *plugins_dir;
	bool skipped;
	char skip_reason[256];
	double results[4][WORKLOAD_COUNT]; /* [connections index][workload]; 0 = not run */
};

/* ---- one run of one phase ---------------------------------------------- */

struct run {
	struct ganesha_instance *gateway;
	char base[256]; /* folder of this run inside the export, "/run-4" */
	unsigned int thread_count;
	pthread_barrier_t start_barrier;
	pthread_barrier_t end_barrier;
	pthread_mutex_t error_lock;
	char error[512];
	bool failed;
	enum workload workload;
	uint64_t items[MAX_THREADS];
};

struct worker {
	struct run *run;
	unsigned int index;
	struct nfs_context *nfs;
	pthread_t thread;
};

static double now_seconds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void run_fail(struct run *run, struct nfs_context *nfs, const char *operation,
		     const char *path)
{
	pthread_mutex_lock(&run->error_lock);
	if (!run->failed) {
		snprintf(run->error, sizeof(run->error), "%s %.300s: %.150s", operation, path,
			 nfs ? nfs_get_error(nfs) : "failed");
		run->failed = true;
	}
	pthread_mutex_unlock(&run->error_lock);
}

/* Every connection its own NFSv4 client name and verifier. */
static struct nfs_context *open_connection(struct ganesha_instance *gateway, unsigned int index,
					   char *error, size_t error_size)
{
	struct nfs_context *nfs = nfs_init_context();
	struct nfs_url *url;
	char url_text[1024];
	char role[32];

	if (!nfs) {
		snprintf(error, error_size, "nfs_init_context failed");
		return NULL;
	}
	snprintf(role, sizeof(role), "bench-%u", index);
	ngnfs_libnfs_set_unique_client_id(nfs, role);
	nfs_set_dircache(nfs, 0); /* readdir must reach the server */
	nfs_set_timeout(nfs, 30000);
	ganesha_instance_url(gateway, NULL, NULL, url_text, sizeof(url_text));
	url = nfs_parse_url_dir(nfs, url_text);
	if (!url) {
		snprintf(error, error_size, "parse %.300s: %.150s", url_text, nfs_get_error(nfs));
		nfs_destroy_context(nfs);
		return NULL;
	}
	if (nfs_mount(nfs, url->server, url->path) < 0) {
		snprintf(error, error_size, "mount %.300s: %.150s", url_text, nfs_get_error(nfs));
		nfs_destroy_url(url);
		nfs_destroy_context(nfs);
		return NULL;
	}
	nfs_destroy_url(url);
	return nfs;
}

static unsigned int file_size_for(unsigned int dir, unsigned int file)
{
	unsigned int span = settings.max_file_size - settings.min_file_size + 1;

	return settings.min_file_size + (dir * 7919u + file * 104729u) % span;
}

static bool write_all(struct worker *worker, struct nfsfh *file, const char *path,
		      const uint8_t *buffer, uint64_t length)
{
	while (length > 0) {
		uint64_t chunk = length < WRITE_CHUNK ? length : WRITE_CHUNK;
		int written = nfs_write(worker->nfs, file, chunk, buffer);

		if (written <= 0) {
			run_fail(worker->run, worker->nfs, "write", path);
			return false;
		}
		length -= (uint64_t)written;
		buffer += written;
	}
	return true;
}

/* The directories of the tree this worker owns: index, index + T, ... */
#define for_each_own_dir(worker, dir)                                                              \
	for ((dir) = (worker)->index; (dir) < settings.dirs; (dir) += (worker)->run->thread_count)

static void do_create(struct worker *worker)
{
	struct run *run = worker->run;
	unsigned int count = settings.create_files / run->thread_count;
	struct nfsfh *file;
	char path[512];
	unsigned int i;

	for (i = 0; i < count && !run->failed; i++) {
		snprintf(path, sizeof(path), "%s/create-%u/f%u", run->base, worker->index, i);
		if (nfs_open2(worker->nfs, path, O_CREAT | O_WRONLY, 0644, &file) < 0) {
			run_fail(run, worker->nfs, "create", path);
			return;
		}
		nfs_close(worker->nfs, file);
		run->items[worker->index]++;
	}
}

static void do_untar(struct worker *worker)
{
	static uint8_t content[64 * 1024];
	struct run *run = worker->run;
	struct nfsfh *file;
	char path[512];
	unsigned int dir, i;

	memset(content, 'u',
	       sizeof(content) < settings.max_file_size ? sizeof(content) : settings.max_file_size);
	for_each_own_dir(worker, dir)
	{
		snprintf(path, sizeof(path), "%s/tree/d%u", run->base, dir);
		if (nfs_mkdir(worker->nfs, path) < 0) {
			run_fail(run, worker->nfs, "mkdir", path);
			return;
		}
		for (i = 0; i < settings.files_per_dir && !run->failed; i++) {
			snprintf(path, sizeof(path), "%s/tree/d%u/file%u", run->base, dir, i);
			if (nfs_open2(worker->nfs, path, O_CREAT | O_WRONLY, 0644, &file) < 0) {
				run_fail(run, worker->nfs, "create", path);
				return;
			}
			if (!write_all(worker, file, path, content, file_size_for(dir, i))) {
				nfs_close(worker->nfs, file);
				return;
			}
			if (nfs_close(worker->nfs, file) < 0) {
				run_fail(run, worker->nfs, "close", path);
				return;
			}
			run->items[worker->index]++;
		}
	}
}

static void do_stat(struct worker *worker)
{
	struct run *run = worker->run;
	struct nfs_stat_64 st;
	char path[512];
	unsigned int dir, i;

	for_each_own_dir(worker, dir)
	{
		for (i = 0; i < settings.files_per_dir && !run->failed; i++) {
			snprintf(path, sizeof(path), "%s/tree/d%u/file%u", run->base, dir, i);
			if (nfs_stat64(worker->nfs, path, &st) < 0) {
				run_fail(run, worker->nfs, "stat", path);
				return;
			}
			if (st.nfs_size != file_size_for(dir, i)) {
				pthread_mutex_lock(&run->error_lock);
				snprintf(run->error, sizeof(run->error),
					 "stat %.300s: size %" PRIu64 ", expected %u", path,
					 (uint64_t)st.nfs_size, file_size_for(dir, i));
				run->failed = true;
				pthread_mutex_unlock(&run->error_lock);
				return;
			}
			run->items[worker->index]++;
		}
	}
}

static void do_readdir(struct worker *worker)
{
	struct run *run = worker->run;
	struct nfsdir *directory;
	struct nfsdirent *entry;
	char path[512];
	unsigned int dir, round, entries;

	for (round = 0; round < settings.readdir_rounds; round++) {
		for_each_own_dir(worker, dir)
		{
			snprintf(path, sizeof(path), "%s/tree/d%u", run->base, dir);
			if (nfs_opendir(worker->nfs, path, &directory) < 0) {
				run_fail(run, worker->nfs, "opendir", path);
				return;
			}
			entries = 0;
			while ((entry = nfs_readdir(worker->nfs, directory)) != NULL)
				if (strcmp(entry->name, ".") != 0 && strcmp(entry->name, "..") != 0)
					entries++;
			nfs_closedir(worker->nfs, directory);
			if (entries != settings.files_per_dir) {
				pthread_mutex_lock(&run->error_lock);
				snprintf(run->error, sizeof(run->error),
					 "readdir %.300s: %u entries, expected %u", path, entries,
					 settings.files_per_dir);
				run->failed = true;
				pthread_mutex_unlock(&run->error_lock);
				return;
			}
			run->items[worker->index] += entries;
		}
	}
}

static void do_rename(struct worker *worker)
{
	struct run *run = worker->run;
	char from[512], to[512];
	unsigned int dir, i;

	for_each_own_dir(worker, dir)
	{
		for (i = 0; i < settings.files_per_dir && !run->failed; i++) {
			snprintf(from, sizeof(from), "%s/tree/d%u/file%u", run->base, dir, i);
			snprintf(to, sizeof(to), "%s/tree/d%u/renamed%u", run->base, dir, i);
			if (nfs_rename(worker->nfs, from, to) < 0) {
				run_fail(run, worker->nfs, "rename", from);
				return;
			}
			run->items[worker->index]++;
		}
	}
}

static void do_unlink(struct worker *worker)
{
	struct run *run = worker->run;
	char path[512];
	unsigned int dir, i;

	for_each_own_dir(worker, dir)
	{
		for (i = 0; i < settings.files_per_dir && !run->failed; i++) {
			snprintf(path, sizeof(path), "%s/tree/d%u/renamed%u", run->base, dir, i);
			if (nfs_unlink(worker->nfs, path) < 0) {
				run_fail(run, worker->nfs, "unlink", path);
				return;
			}
			run->items[worker->index]++;
		}
		snprintf(path, sizeof(path), "%s/tree/d%u", run->base, dir);
		if (nfs_rmdir(worker->nfs, path) < 0) {
			run_fail(run, worker->nfs, "rmdir", path);
			return;
		}
	}
}

static void do_sequential(struct worker *worker, bool writing)
{
	static uint8_t write_buffer[WRITE_CHUNK];
	struct run *run = worker->run;
	uint64_t length = (uint64_t)settings.sequential_mib * 1024 * 1024 / run->thread_count;
	uint64_t done = 0;
	struct nfsfh *file;
	uint8_t *buffer;
	char path[512];
	int got;

	snprintf(path, sizeof(path), "%s/seq-%u", run->base, worker->index);
	if (writing) {
		memset(write_buffer, 's', sizeof(write_buffer));
		if (nfs_open2(worker->nfs, path, O_CREAT | O_WRONLY, 0644, &file) < 0) {
			run_fail(run, worker->nfs, "create", path);
			return;
		}
		while (done < length && !run->failed) {
			uint64_t chunk = length - done < WRITE_CHUNK ? length - done : WRITE_CHUNK;

			if (!write_all(worker, file, path, write_buffer, chunk))
				break;
			done += chunk;
		}
		if (nfs_close(worker->nfs, file) < 0)
			run_fail(run, worker->nfs, "close", path);
		run->items[worker->index] = done;
		return;
	}
	buffer = malloc(READ_CHUNK);
	if (!buffer || nfs_open(worker->nfs, path, O_RDONLY, &file) < 0) {
		run_fail(run, worker->nfs, "open", path);
		free(buffer);
		return;
	}
	while (done < length && !run->failed) {
		got = nfs_read(worker->nfs, file, READ_CHUNK, buffer);
		if (got <= 0) {
			run_fail(run, worker->nfs, got == 0 ? "read (early end of file)" : "read",
				 path);
			break;
		}
		done += (uint64_t)got;
	}
	nfs_close(worker->nfs, file);
	free(buffer);
	run->items[worker->index] = done;
}

static void *worker_main(void *argument)
{
	struct worker *worker = argument;
	struct run *run = worker->run;

	for (;;) {
		pthread_barrier_wait(&run->start_barrier);
		switch (run->workload) {
		case WORKLOAD_CREATE:
			do_create(worker);
			break;
		case WORKLOAD_UNTAR:
			do_untar(worker);
			break;
		case WORKLOAD_STAT:
			do_stat(worker);
			break;
		case WORKLOAD_READDIR:
			do_readdir(worker);
			break;
		case WORKLOAD_RENAME:
			do_rename(worker);
			break;
		case WORKLOAD_UNLINK:
			do_unlink(worker);
			break;
		case WORKLOAD_SEQWRITE:
			do_sequential(worker, true);
			break;
		case WORKLOAD_SEQREAD:
			do_sequential(worker, false);
			break;
		case WORKLOAD_COUNT:
			pthread_barrier_wait(&run->end_barrier);
			return NULL;
		}
		pthread_barrier_wait(&run->end_barrier);
	}
}

/* All workloads with thread_count connections; rates into results. */
static int run_workloads(struct ganesha_instance *gateway, unsigned int thread_count,
			 double results[WORKLOAD_COUNT])
{
	struct worker workers[MAX_THREADS] = { 0 };
	struct run run = { .gateway = gateway, .thread_count = thread_count };
	struct nfs_context *setup;
	char error[512] = "";
	char path[512];
	unsigned int i, started = 0;
	int workload;
	int ret = 0;

	snprintf(run.base, sizeof(run.base), "/run-%u", thread_count);
	setup = open_connection(gateway, 99, error, sizeof(error));
	if (!setup) {
		fprintf(stderr, "nfs_bench: %s\n", error);
		return -EIO;
	}
	snprintf(path, sizeof(path), "%s", run.base);
	if (nfs_mkdir(setup, path) < 0)
		ret = -EIO;
	snprintf(path, sizeof(path), "%s/tree", run.base);
	if (ret == 0 && nfs_mkdir(setup, path) < 0)
		ret = -EIO;
	for (i = 0; ret == 0 && i < thread_count; i++) {
		snprintf(path, sizeof(path), "%s/create-%u", run.base, i);
		if (nfs_mkdir(setup, path) < 0)
			ret = -EIO;
	}
	if (ret < 0) {
		fprintf(stderr, "nfs_bench: mkdir %s: %s\n", path, nfs_get_error(setup));
		nfs_destroy_context(setup);
		return ret;
	}
	nfs_destroy_context(setup);

	pthread_mutex_init(&run.error_lock, NULL);
	pthread_barrier_init(&run.start_barrier, NULL, thread_count + 1);
	pthread_barrier_init(&run.end_barrier, NULL, thread_count + 1);
	for (i = 0; i < thread_count; i++) {
		workers[i].run = &run;
		workers[i].index = i;
		workers[i].nfs = open_connection(gateway, i, error, sizeof(error));
		if (!workers[i].nfs) {
			fprintf(stderr, "nfs_bench: connection %u: %s\n", i, error);
			ret = -EIO;
			break;
		}
	}
	for (i = 0; ret == 0 && i < thread_count; i++) {
		if (pthread_create(&workers[i].thread, NULL, worker_main, &workers[i]) != 0) {
			ret = -EAGAIN;
			break;
		}
		started++;
	}
	if (ret < 0 && started > 0) {
		/* Not reached in practice; the barriers need every thread. */
		fprintf(stderr, "nfs_bench: could not start all threads\n");
		abort();
	}
	for (workload = 0; ret == 0 && workload < WORKLOAD_COUNT; workload++) {
		double start, elapsed;
		uint64_t total = 0;

		/*
		 * Fresh connections for every phase (outside the timing):
		 * libnfs 4.0 never sends RENEW, and REMOVE, RENAME, LOOKUP
		 * or GETATTR do not renew an NFSv4.0 lease, so after a phase
		 * longer than the lease (60 s on a slow gateway) the next
		 * OPEN would fail with NFS4ERR_EXPIRED.
		 */
		for (i = 0; workload > 0 && i < thread_count; i++) {
			nfs_destroy_context(workers[i].nfs);
			workers[i].nfs = open_connection(gateway, i, error, sizeof(error));
			if (!workers[i].nfs) {
				fprintf(stderr, "nfs_bench: connection %u before %s: %s\n", i,
					workload_names[workload], error);
				ret = -EIO;
			}
		}
		if (ret < 0)
			break; /* the workers are stopped below */
		run.workload = (enum workload)workload;
		memset(run.items, 0, sizeof(run.items));
		start = now_seconds();
		pthread_barrier_wait(&run.start_barrier);
		pthread_barrier_wait(&run.end_barrier);
		elapsed = now_seconds() - start;
		if (run.failed) {
			fprintf(stderr, "nfs_bench: %s with %u connection(s): %s\n",
				workload_names[workload], thread_count, run.error);
			ret = -EIO;
			break;
		}
		for (i = 0; i < thread_count; i++)
			total += run.items[i];
		if (workload == WORKLOAD_SEQWRITE || workload == WORKLOAD_SEQREAD)
			results[workload] = (double)total / (1024.0 * 1024.0) / elapsed;
		else
			results[workload] = (double)total / elapsed;
		fprintf(stderr, "  %-8s %u conn: %10.1f %s (%.2f s)\n", workload_names[workload],
			thread_count, results[workload], workload_units[workload], elapsed);
	}
	if (started == thread_count) {
		run.workload = WORKLOAD_COUNT;
		pthread_barrier_wait(&run.start_barrier);
		pthread_barrier_wait(&run.end_barrier);
		for (i = 0; i < thread_count; i++)
			pthread_join(workers[i].thread, NULL);
	}
	for (i = 0; i < thread_count; i++)
		if (workers[i].nfs)
			nfs_destroy_context(workers[i].nfs);
	pthread_barrier_destroy(&run.start_barrier);
	pthread_barrier_destroy(&run.end_barrier);
	pthread_mutex_destroy(&run.error_lock);
	return ret;
}

/* ---- resident memory mode --------------------------------------------- */

struct rss_sampler {
	pid_t pid;
	volatile bool stop;
	long peak_kib;
	long last_kib;
	pthread_t thread;
};

static long read_rss_kib(pid_t pid)
{
	char path[64], line[256];
	long kib = -1;
	FILE *file;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	file = fopen(path, "r");
	if (!file)
		return -1;
	while (fgets(line, sizeof(line), file))
		if (sscanf(line, "VmRSS: %ld kB", &kib) == 1)
			break;
	fclose(file);
	return kib;
}

static void *sampler_main(void *argument)
{
	struct rss_sampler *sampler = argument;
	struct timespec pause = { .tv_nsec = 20 * 1000000 };

	while (!sampler->stop) {
		long kib = read_rss_kib(sampler->pid);

		if (kib > sampler->peak_kib)
			sampler->peak_kib = kib;
		sampler->last_kib = kib;
		nanosleep(&pause, NULL);
	}
	return NULL;
}

/* A plateau is only visible along the way: the peak alone cannot show it. */
static void rss_progress(const struct rss_sampler *sampler, const char *phase, unsigned long files,
			 double start)
{
	printf("  %-7s %8lu files  VmRSS %8ld KiB  peak so far %8ld KiB  (%.1f s)\n", phase, files,
	       read_rss_kib(sampler->pid), sampler->peak_kib, now_seconds() - start);
	fflush(stdout);
}

static int run_rss(struct target *target, struct ganesha_instance *gateway)
{
	struct rss_sampler sampler = { .pid = ganesha_instance_pid(gateway) };
	unsigned long progress_every = settings.rss_files >= 10 ? settings.rss_files / 10 : 1;
	struct nfs_context *nfs;
	struct nfs_stat_64 st;
	struct nfsfh *file;
	char error[512];
	char path[256];
	long baseline;
	unsigned long i;
	double start;
	int ret = 0;

	nfs = open_connection(gateway, 0, error, sizeof(error));
	if (!nfs) {
		fprintf(stderr, "nfs_bench: %s\n", error);
		return -EIO;
	}
	baseline = read_rss_kib(sampler.pid);
	sampler.peak_kib = baseline;
	pthread_create(&sampler.thread, NULL, sampler_main, &sampler);
	start = now_seconds();
	for (i = 0; i < settings.rss_files && ret == 0; i++) {
		if (i % 1000 == 0) {
			snprintf(path, sizeof(path), "/rss-%lu", i / 1000);
			if (nfs_mkdir(nfs, path) < 0)
				ret = -EIO;
		}
		snprintf(path, sizeof(path), "/rss-%lu/f%lu", i / 1000, i % 1000);
		if (ret == 0 && nfs_open2(nfs, path, O_CREAT | O_WRONLY, 0644, &file) < 0)
			ret = -EIO;
		if (ret == 0)
			nfs_close(nfs, file);
		if (ret == 0 && (i + 1) % progress_every == 0)
			rss_progress(&sampler, "created", i + 1, start);
	}
	for (i = 0; i < settings.rss_files && ret == 0; i++) {
		snprintf(path, sizeof(path), "/rss-%lu/f%lu", i / 1000, i % 1000);
		if (nfs_stat64(nfs, path, &st) < 0)
			ret = -EIO;
	}
	if (ret == 0)
		rss_progress(&sampler, "stat", settings.rss_files, start);
	sampler.stop = true;
	pthread_join(sampler.thread, NULL);
	if (ret < 0) {
		fprintf(stderr, "nfs_bench: %s on %s: %s\n", path, target->name,
			nfs_get_error(nfs));
	} else {
		printf("%-6s files %8lu  VmRSS before %8ld KiB  peak %8ld KiB  end %8ld KiB  "
		       "peak-before per file %6.0f bytes  (%.1f s)\n",
		       target->name, settings.rss_files, baseline, sampler.peak_kib,
		       sampler.last_kib,
		       settings.rss_files ? (double)(sampler.peak_kib - baseline) * 1024.0 /
						(double)settings.rss_files
					  : 0.0,
		       now_seconds() - start);
	}
	nfs_destroy_context(nfs);
	return ret;
}

/* ---- main -------------------------------------------------------------- */

static void print_table(struct target *targets, unsigned int target_count)
{
	struct target *vfs = NULL, *mem = NULL, *ngnfs[MAX_TARGETS];
	unsigned int t, w, c, n, ngnfs_count = 0;
	char header[32];

	for (t = 0; t < target_count; t++) {
		if (strcmp(targets[t].name, "VFS") == 0)
			vfs = &targets[t];
		else if (strcmp(targets[t].name, "MEM") == 0)
			mem = &targets[t];
		else
			ngnfs[ngnfs_count++] = &targets[t];
	}
	printf("\n%-9s %-5s %-10s", "workload", "conns", "unit");
	for (t = 0; t < target_count; t++)
		printf(" %12s", targets[t].name);
	for (n = 0; n < ngnfs_count; n++) {
		snprintf(header, sizeof(header), "%s/MEM", ngnfs[n]->name);
		printf(" %12s", header);
		snprintf(header, sizeof(header), "%s/VFS", ngnfs[n]->name);
		printf(" %12s", header);
	}
	printf("\n");
	for (w = 0; w < WORKLOAD_COUNT; w++) {
		for (c = 0; c < settings.thread_count_count; c++) {
			printf("%-9s %-5u %-10s", workload_names[w], settings.thread_counts[c],
			       workload_units[w]);
			for (t = 0; t < target_count; t++) {
				if (targets[t].results[c][w] > 0)
					printf(" %12.1f", targets[t].results[c][w]);
				else
					printf(" %12s", "-");
			}
			for (n = 0; n < ngnfs_count; n++) {
				double rate = ngnfs[n]->results[c][w];

				if (rate > 0 && mem && mem->results[c][w] > 0)
					printf(" %12.2f", rate / mem->results[c][w]);
				else
					printf(" %12s", "-");
				if (rate > 0 && vfs && vfs->results[c][w] > 0)
					printf(" %12.2f", rate / vfs->results[c][w]);
				else
					printf(" %12s", "-");
			}
			printf("\n");
		}
	}
	for (t = 0; t < target_count; t++)
		if (targets[t].skipped)
			printf("%s: skipped: %s\n", targets[t].name, targets[t].skip_reason);
}

static void usage(FILE *stream)
{
	fprintf(
	    stream,
	    "usage: nfs_bench [options]\n"
	    "  --targets LIST          vfs,mem,ngnfs (default all; ngnfs needs the two below)\n"
	    "  --ngnfs-plugins-dir DIR folder with libfsalngnfs.so  (or $NGNFS_BENCH_PLUGINS_DIR)\n"
	    "  --ngnfs-fsal-block TEXT 'FSAL { Name = NGNFS; ... }' (or $NGNFS_BENCH_FSAL_BLOCK)\n"
	    "  --ngnfs-devices N       start and mkfs N blockd for @DEVICES@ (or "
	    "$NGNFS_BENCH_DEVICES)\n"
	    "  --ngnfs-durability LIST stable, writeback or stable,writeback (default stable):\n"
	    "                          one NGNFS target per mode (NGNFS, NGNFS-wb), each with\n"
	    "                          Durability = MODE in its FSAL block and its own cluster\n"
	    "  --connections LIST      e.g. 1,4 (default; at most %d each)\n"
	    "  --dirs N --files-per-dir N   the untar tree (default 20 x 100)\n"
	    "  --create-files N        files of the create workload (default 2000)\n"
	    "  --sequential-mib N      bytes of seqwrite/seqread (default 64)\n"
	    "  --rss N                 instead: peak VmRSS of the daemon while creating\n"
	    "                          and stat-ing N files (one connection)\n"
	    "ganesha.nfsd is $NGNFS_GANESHA or /usr/bin/ganesha.nfsd; $NGNFS_BENCH_EXTRA_CONFIG\n"
	    "is added to every daemon's config (LOG { } blocks for profiling).\n",
	    MAX_THREADS);
}

static int parse_durability(const char *text)
{
	char *copy = strdup(text), *item, *save = NULL;
	int ret = 0;

	settings.ngnfs_stable = false;
	settings.ngnfs_writeback = false;
	for (item = strtok_r(copy, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
		if (strcmp(item, "stable") == 0)
			settings.ngnfs_stable = true;
		else if (strcmp(item, "writeback") == 0)
			settings.ngnfs_writeback = true;
		else
			ret = -EINVAL;
	}
	free(copy);
	if (!settings.ngnfs_stable && !settings.ngnfs_writeback)
		ret = -EINVAL;
	return ret;
}

/*
 * The caller's FSAL block with "Durability = MODE;" added before its last
 * brace.  A block that sets Durability itself is refused: the column
 * would then not say what ran.
 */
static char *fsal_block_with_durability(const char *block, const char *mode)
{
	const char *brace = strrchr(block, '}');
	size_t head;
	char *text;

	if (!brace || strcasestr(block, "Durability"))
		return NULL;
	head = (size_t)(brace - block);
	if (asprintf(&text, "%.*s Durability = %s; %s", (int)head, block, mode, brace) < 0)
		return NULL;
	return text;
}

static int parse_connections(const char *text)
{
	char *copy = strdup(text), *item, *save = NULL;

	settings.thread_count_count = 0;
	for (item = strtok_r(copy, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
		unsigned long count = strtoul(item, NULL, 10);

		if (count == 0 || count > MAX_THREADS || settings.thread_count_count >= 4) {
			free(copy);
			return -EINVAL;
		}
		settings.thread_counts[settings.thread_count_count++] = (unsigned int)count;
	}
	free(copy);
	return settings.thread_count_count ? 0 : -EINVAL;
}

int main(int argc, char **argv)
{
	static const struct option long_options[] = {
		{ "targets", required_argument, NULL, 't' },
		{ "ngnfs-plugins-dir", required_argument, NULL, 'P' },
		{ "ngnfs-fsal-block", required_argument, NULL, 'B' },
		{ "ngnfs-devices", required_argument, NULL, 'D' },
		{ "ngnfs-durability", required_argument, NULL, 'W' },
		{ "connections", required_argument, NULL, 'c' },
		{ "dirs", required_argument, NULL, 'd' },
		{ "files-per-dir", required_argument, NULL, 'f' },
		{ "create-files", required_argument, NULL, 'n' },
		{ "sequential-mib", required_argument, NULL, 's' },
		{ "rss", required_argument, NULL, 'r' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct target targets[MAX_TARGETS];
	unsigned int target_count = 0, t, c;
	int failures = 0;
	int option;

	settings.ngnfs_plugins_dir = getenv("NGNFS_BENCH_PLUGINS_DIR");
	settings.ngnfs_fsal_block = getenv("NGNFS_BENCH_FSAL_BLOCK");
	if (getenv("NGNFS_BENCH_DEVICES"))
		settings.ngnfs_devices =
		    (unsigned int)strtoul(getenv("NGNFS_BENCH_DEVICES"), NULL, 10);
#ifdef NGNFS_BENCH_BLOCKD
	setenv("NGNFS_BLOCKD", NGNFS_BENCH_BLOCKD, 0);
#endif
#ifdef NGNFS_BENCH_TOOL
	setenv("NGNFS_TOOL", NGNFS_BENCH_TOOL, 0);
#endif
	while ((option = getopt_long(argc, argv, "h", long_options, NULL)) != -1) {
		switch (option) {
		case 't':
			settings.want_vfs = strstr(optarg, "vfs") != NULL;
			settings.want_mem = strstr(optarg, "mem") != NULL;
			settings.want_ngnfs = strstr(optarg, "ngnfs") != NULL;
			break;
		case 'P':
			settings.ngnfs_plugins_dir = optarg;
			break;
		case 'B':
			settings.ngnfs_fsal_block = optarg;
			break;
		case 'D':
			settings.ngnfs_devices = (unsigned int)strtoul(optarg, NULL, 10);
			break;
		case 'W':
			if (parse_durability(optarg) < 0) {
				fprintf(stderr, "nfs_bench: bad --ngnfs-durability %s\n", optarg);
				return 2;
			}
			break;
		case 'c':
			if (parse_connections(optarg) < 0) {
				fprintf(stderr, "nfs_bench: bad --connections %s\n", optarg);
				return 2;
			}
			break;
		case 'd':
			settings.dirs = (unsigned int)strtoul(optarg, NULL, 10);
			break;
		case 'f':
			settings.files_per_dir = (unsigned int)strtoul(optarg, NULL, 10);
			break;
		case 'n':
			settings.create_files = (unsigned int)strtoul(optarg, NULL, 10);
			break;
		case 's':
			settings.sequential_mib = (unsigned int)strtoul(optarg, NULL, 10);
			break;
		case 'r':
			settings.rss_files = strtoul(optarg, NULL, 10);
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (settings.dirs == 0 || settings.files_per_dir == 0 || settings.sequential_mib == 0) {
		fprintf(stderr, "nfs_bench: sizes must be positive\n");
		return 2;
	}

	memset(targets, 0, sizeof(targets));
	if (settings.want_vfs)
		targets[target_count++] =
		    (struct target){ .name = "VFS", .fsal_block = "FSAL { Name = VFS; }" };
	if (settings.want_mem)
		targets[target_count++] =
		    (struct target){ .name = "MEM", .fsal_block = "FSAL { Name = MEM; }" };
	if (settings.want_ngnfs) {
		static const struct {
			const char *name, *mode;
		} modes[] = { { "NGNFS", "stable" }, { "NGNFS-wb", "writeback" } };
		unsigned int m;

		if (!settings.ngnfs_fsal_block && settings.ngnfs_devices)
			settings.ngnfs_fsal_block = NGNFS_BACKEND_DEFAULT_FSAL_BLOCK;
		for (m = 0; m < 2; m++) {
			struct target *ngnfs;

			if (m == 0 ? !settings.ngnfs_stable : !settings.ngnfs_writeback)
				continue;
			ngnfs = &targets[target_count++];
			*ngnfs = (struct target){ .name = modes[m].name,
						  .plugins_dir = settings.ngnfs_plugins_dir };
			if (!settings.ngnfs_plugins_dir || !settings.ngnfs_fsal_block) {
				ngnfs->skipped = true;
				snprintf(ngnfs->skip_reason, sizeof(ngnfs->skip_reason),
					 "give --ngnfs-plugins-dir and --ngnfs-devices N (or "
					 "--ngnfs-fsal-block for a cluster of your own) to run it");
				continue;
			}
			ngnfs->owned_fsal_block =
			    fsal_block_with_durability(settings.ngnfs_fsal_block, modes[m].mode);
			ngnfs->fsal_block = ngnfs->owned_fsal_block;
			if (!ngnfs->fsal_block) {
				fprintf(stderr,
					"nfs_bench: the NGNFS FSAL block must end in '}' and not "
					"set Durability (use --ngnfs-durability): %s\n",
					settings.ngnfs_fsal_block);
				return 2;
			}
		}
	}

	for (t = 0; t < target_count; t++) {
		struct target *target = &targets[t];
		struct ganesha_options options = {
			.fsal_block = target->fsal_block,
			.plugins_dir = target->plugins_dir,
			.name = "bench",
			/* e.g. LOG { COMPONENTS { NFS_V4 = FULL_DEBUG; } } to see the ops */
			.extra_config = getenv("NGNFS_BENCH_EXTRA_CONFIG"),
		};
		struct ngnfs_test_cluster *cluster = NULL;
		struct ganesha_instance *gateway;
		char *block = NULL;
		int ret = 0;

		if (target->skipped) {
			fprintf(stderr, "nfs_bench: %s skipped: %s\n", target->name,
				target->skip_reason);
			continue;
		}
		if (strstr(target->fsal_block, "@DEVICES@")) {
			ret = settings.ngnfs_devices
				  ? ngnfs_backend_start(settings.ngnfs_devices, "nfs-bench",
							target->fsal_block, &cluster, &block)
				  : -EINVAL;
			if (ret < 0) {
				target->skipped = true;
				snprintf(
				    target->skip_reason, sizeof(target->skip_reason),
				    "no formatted blockd cluster for @DEVICES@ (%s; see above)",
				    settings.ngnfs_devices ? strerror(-ret)
							   : "give --ngnfs-devices N");
				failures++;
				continue;
			}
			options.fsal_block = block;
		}
		/* FSAL_NGNFS exports a path inside ngnfs, not a local folder. */
		if (strncmp(target->name, "NGNFS", 5) == 0)
			options.export_path = "/";
		fprintf(stderr, "nfs_bench: %s (%s)\n", target->name, options.fsal_block);
		gateway = ganesha_instance_start_with(&options);
		if (!gateway) {
			ngnfs_test_cluster_stop(cluster);
			free(block);
			target->skipped = true;
			snprintf(target->skip_reason, sizeof(target->skip_reason),
				 "ganesha.nfsd did not start (see above)");
			failures++;
			continue;
		}
		if (settings.rss_files) {
			ret = run_rss(target, gateway);
		} else {
			for (c = 0; c < settings.thread_count_count && ret == 0; c++)
				ret = run_workloads(gateway, settings.thread_counts[c],
						    target->results[c]);
		}
		if (ret < 0)
			failures++;
		if (ganesha_instance_stop(gateway) < 0)
			failures++;
		if (cluster && ngnfs_test_cluster_stop(cluster) < 0)
			failures++;
		free(block);
	}
	if (!settings.rss_files)
		print_table(targets, target_count);
	for (t = 0; t < target_count; t++)
		free(targets[t].owned_fsal_block);
	return failures ? 1 : 0;
}
