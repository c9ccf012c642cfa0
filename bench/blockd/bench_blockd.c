/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * blockd's benchmark: group-committed write throughput next to RocksDB's
 * own db_bench doing the same synced, batched writes, and GET round
 * trips on loopback (cached-version hits and full 4 KiB transfers).
 *
 * The write figure is many concurrent sessions, each sending WRITE
 * SINGLE of one 4096-byte block and waiting for the reply (sync=true:
 * every reply follows a durable write, a commit log record unless blockd
 * runs with --commit-log=false).  STATFS before and after the writes
 * says how many group commits they took; the average batch is then
 * handed to db_bench as
 * --batch_size with --sync=1 and a 4112-byte value (a stored block: 16
 * bytes of version and crc plus the data), so the ratio printed compares
 * blockd with the best RocksDB can do with batches of the same size on
 * this disk.  It is not a test: it prints figures and never fails on
 * them (docs/performance.md records what it printed).
 *
 * Usage: bench_blockd [--sessions N] [--writes N] [--gets N] [--db-bench PATH]
 *
 * XXX:
 *  - blockd and the client threads share the machine's cores.
 */

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cluster.h"
#include "tclient.h"

static const uint8_t fs_id[NGNFS_FS_ID_SIZE] = { 0xbe, 0x4c, 1, 2,  3,	4,  5,	6,
						 7,    8,    9, 10, 11, 12, 13, 14 };

static double now_seconds(void)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (double)now.tv_sec + (double)now.tv_nsec / 1e9;
}

struct writer {
	pthread_t thread;
	const char *address;
	uint64_t blkno;
	unsigned int writes;
	int error;
};

static void *writer_thread(void *arg)
{
	struct writer *writer = arg;
	uint8_t data[NGNFS_BLOCK_SIZE];
	uint64_t version = 0;
	bool has_data;
	struct tc tc;

	memset(data, (int)writer->blkno, sizeof(data));
	writer->error = tc_connect(&tc, writer->address);
	if (!writer->error)
		writer->error = tc_hello(&tc, fs_id, 0, NULL);
	if (!writer->error)
		writer->error =
		    tc_get(&tc, writer->blkno, NGNFS_ACCESS_WRITE, 0, &version, &has_data, NULL);
	for (unsigned int i = 0; i < writer->writes && !writer->error; i++) {
		data[0] = (uint8_t)i;
		writer->error = tc_write(&tc, writer->blkno, version, data, &version);
	}
	tc_close(&tc);
	return NULL;
}

static double run_writes(const char *address, unsigned int sessions, unsigned int writes)
{
	struct writer *writers = calloc(sessions, sizeof(*writers));
	double start, elapsed;

	start = now_seconds();
	for (unsigned int i = 0; i < sessions; i++) {
		writers[i] =
		    (struct writer){ .address = address, .blkno = 1000 + i, .writes = writes };
		pthread_create(&writers[i].thread, NULL, writer_thread, &writers[i]);
	}
	for (unsigned int i = 0; i < sessions; i++) {
		pthread_join(writers[i].thread, NULL);
		if (writers[i].error) {
			fprintf(stderr, "bench_blockd: writer %u failed: %s\n", i,
				strerror(-writers[i].error));
			exit(1);
		}
	}
	elapsed = now_seconds() - start;
	free(writers);
	return (double)sessions * writes / elapsed;
}

static double run_gets(const char *address, unsigned int count, bool hits)
{
	uint64_t base = hits ? 100000 : 200000;
	uint8_t data[NGNFS_BLOCK_SIZE];
	double start;
	struct tc tc;

	if (tc_connect(&tc, address) || tc_hello(&tc, fs_id, 0, NULL)) {
		fprintf(stderr, "bench_blockd: cannot open a GET session\n");
		exit(1);
	}
	start = now_seconds();
	for (unsigned int i = 0; i < count; i++) {
		uint64_t version;
		bool has_data;
		/* never-written blocks are at version 0: cached 0 is a hit, 1 a miss */
		int ret = tc_get(&tc, base + i, NGNFS_ACCESS_READ, hits ? 0 : 1, &version,
				 &has_data, data);

		if (ret || has_data == hits) {
			fprintf(stderr, "bench_blockd: GET %u: status %d, data %d\n", i, ret,
				has_data);
			exit(1);
		}
	}
	tc_close(&tc);
	return count / (now_seconds() - start);
}

/* The device's group commits and the requests in them since it started (STATFS). */
static void commit_counters(const char *address, struct ngnfs_statfs_figures *figures)
{
	struct tc tc;

	if (tc_connect(&tc, address) || tc_hello(&tc, fs_id, 0, NULL) ||
	    tc_statfs_figures(&tc, figures)) {
		fprintf(stderr, "bench_blockd: cannot ask the device for its commit counters\n");
		exit(1);
	}
	tc_close(&tc);
}

static double run_db_bench(const char *db_bench, const char *dir, unsigned int threads,
			   unsigned long long batch, unsigned long long num, char *command,
			   size_t command_size)
{
	char output_path[4200], db[4200], batch_arg[64], num_arg[64], db_arg[4300];
	char threads_arg[64];
	const char *argv[16];
	double ops = 0;
	char *output, *line;
	int status, argc = 0;

	snprintf(db, sizeof(db), "%s/db_bench", dir);
	snprintf(output_path, sizeof(output_path), "%s/db_bench.out", dir);
	snprintf(batch_arg, sizeof(batch_arg), "--batch_size=%llu", batch);
	snprintf(num_arg, sizeof(num_arg), "--num=%llu", num);
	snprintf(db_arg, sizeof(db_arg), "--db=%s", db);
	snprintf(threads_arg, sizeof(threads_arg), "--threads=%u", threads);
	argv[argc++] = db_bench;
	argv[argc++] = "--benchmarks=fillrandom";
	argv[argc++] = "--sync=1";
	argv[argc++] = "--value_size=4112";
	argv[argc++] = "--key_size=9";
	argv[argc++] = "--compression_type=none";
	argv[argc++] = threads_arg;
	argv[argc++] = batch_arg;
	argv[argc++] = num_arg;
	argv[argc++] = db_arg;
	argv[argc] = NULL;
	snprintf(command, command_size,
		 "%s --benchmarks=fillrandom --sync=1 --value_size=4112 "
		 "--key_size=9 --compression_type=none %s %s %s",
		 db_bench, threads_arg, batch_arg, num_arg);
	if (ngnfs_test_run(argv, output_path, 300000, &status) || !WIFEXITED(status) ||
	    WEXITSTATUS(status) != 0) {
		fprintf(stderr, "bench_blockd: db_bench failed; see %s\n", output_path);
		return 0;
	}
	output = ngnfs_test_read_file(output_path, NULL);
	line = output ? strstr(output, "fillrandom   :") : NULL;
	if (line) {
		double micros;

		sscanf(line, "fillrandom   : %lf micros/op %lf ops/sec", &micros, &ops);
	}
	free(output);
	return ops;
}

int main(int argc, char **argv)
{
	unsigned int sessions = 32, writes = 300, gets = 20000;
	const char *db_bench = "/usr/bin/db_bench";
	const char *extra[] = { "--grace-ms", "0", NULL };
	unsigned long long batches = 0, requests = 0;
	struct ngnfs_statfs_figures before, after;
	struct ngnfs_test_cluster *cluster;
	char command[1024];
	const char *address;
	double write_rate, db_bench_rate, hit_rate, miss_rate;
	struct tc tc;

	for (int i = 1; i + 1 < argc; i += 2) {
		if (strcmp(argv[i], "--sessions") == 0)
			sessions = (unsigned int)atoi(argv[i + 1]);
		else if (strcmp(argv[i], "--writes") == 0)
			writes = (unsigned int)atoi(argv[i + 1]);
		else if (strcmp(argv[i], "--gets") == 0)
			gets = (unsigned int)atoi(argv[i + 1]);
		else if (strcmp(argv[i], "--db-bench") == 0)
			db_bench = argv[i + 1];
	}
	if (!getenv("NGNFS_BLOCKD"))
		setenv("NGNFS_BLOCKD", NGNFS_BLOCKD_PATH, 0);

	cluster = ngnfs_test_cluster_start_args(1, "bench-blockd", extra);
	if (!cluster)
		return 1;
	address = ngnfs_test_cluster_address(cluster, 0);
	if (tc_connect(&tc, address) || tc_hello(&tc, NULL, NGNFS_HELLO_FORMAT, NULL) ||
	    tc_format(&tc, fs_id, 0, 1)) {
		fprintf(stderr, "bench_blockd: cannot format the device\n");
		return 1;
	}
	tc_close(&tc);

	printf("blockd write: %u sessions x %u WRITE SINGLE of 1 block (4096 bytes), sync\n",
	       sessions, writes);
	commit_counters(address, &before);
	write_rate = run_writes(address, sessions, writes);
	commit_counters(address, &after);
	batches = after.group_commits - before.group_commits;
	requests = after.commit_requests - before.commit_requests;
	hit_rate = run_gets(address, gets, true);
	miss_rate = run_gets(address, gets, false);
	ngnfs_test_cluster_kill(cluster, 0, SIGTERM); /* the disk to db_bench alone */
	if (batches == 0) {
		fprintf(stderr, "bench_blockd: the device counted no group commits\n");
		return 1;
	}
	{
		/* the write phase alone: its sessions' GETs for write access commit nothing */
		unsigned long long batch = (requests + batches / 2) / batches;

		if (batch < 1)
			batch = 1;
		double concurrent_rate;
		char concurrent_command[1024];

		db_bench_rate =
		    run_db_bench(db_bench, ngnfs_test_cluster_dir(cluster), 1, batch,
				 (unsigned long long)sessions * writes, command, sizeof(command));
		/* RocksDB's own group commit of concurrent synced writers, for reference */
		concurrent_rate =
		    run_db_bench(db_bench, ngnfs_test_cluster_dir(cluster), sessions, 1, writes,
				 concurrent_command, sizeof(concurrent_command));
		printf("blockd:   %.0f blocks/s (%llu group commits of %llu requests, %.1f per "
		       "batch)\n",
		       write_rate, batches, requests, (double)requests / (double)batches);
		printf("db_bench: %.0f blocks/s (%s)\n", db_bench_rate, command);
		if (db_bench_rate > 0)
			printf("ratio blockd / db_bench: %.2f (target >= 0.70)\n",
			       write_rate / db_bench_rate);
		printf("db_bench, %u concurrent synced writers: %.0f blocks/s (%s)\n", sessions,
		       concurrent_rate, concurrent_command);
		if (concurrent_rate > 0)
			printf("ratio blockd / concurrent db_bench: %.2f\n",
			       write_rate / concurrent_rate);
	}
	printf("GET round trips, one session, loopback: %.0f/s cached-version hits (no data), "
	       "%.0f/s full 4 KiB transfers (%u each)\n",
	       hit_rate, miss_rate, gets);
	ngnfs_test_cluster_stop(cluster);
	return 0;
}
