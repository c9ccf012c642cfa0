/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Benchmark of the network client against real blockd processes on
 * loopback: GET round trips (cached-version hits that carry no data and
 * full 4 KiB transfers) with 1 and several requests outstanding, and
 * write sets per second (one block on one device, and one block on each
 * of three devices, which is STAGE x3 + COMMIT + RESOLVE x2).
 *
 * It starts its own formatted 3-device cluster through the test harness
 * (blockd from --blockd or NGNFS_BLOCKD), or uses running servers given
 * with --manifest (already formatted; the fs id is learned).  Figures go
 * to stdout, one line each; docs/performance.md says what they were.
 *
 * XXX:
 *  - Loopback only measures the client and server CPU paths, not a
 *    network.
 */

#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "client.h"
#include "cluster.h"
#include "manifest.h"

#define MAX_WINDOW 256

static double seconds = 2.0;

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void die(const char *what, int ret)
{
	fprintf(stderr, "client_bench: %s: %s\n", what, strerror(-ret));
	exit(1);
}

/* ---- GET ---- */

struct get_bench {
	struct ngnfs_client *client;
	bool full; /* cached version 0: data every time */
	double end;
	atomic_uint_fast64_t done;
	atomic_int outstanding;
	atomic_int error;
	uint64_t versions[MAX_WINDOW];
	pthread_mutex_t lock;
	pthread_cond_t cond;
};

static void get_submit(struct get_bench *bench, uint32_t slot);

static void get_done(void *arg, int status, uint64_t blkno, uint64_t version, uint8_t access,
		     const uint8_t *data)
{
	struct get_bench *bench = arg;
	uint32_t slot = (uint32_t)ngnfs_blkno_index(blkno) - 1000;

	(void)access;
	(void)data;
	if (status)
		atomic_store(&bench->error, status);
	bench->versions[slot] = version;
	atomic_fetch_add(&bench->done, 1);
	if (!status && now_s() < bench->end) {
		get_submit(bench, slot);
		return;
	}
	if (atomic_fetch_sub(&bench->outstanding, 1) == 1) {
		pthread_mutex_lock(&bench->lock);
		pthread_cond_broadcast(&bench->cond);
		pthread_mutex_unlock(&bench->lock);
	}
}

static void get_submit(struct get_bench *bench, uint32_t slot)
{
	struct ngnfs_block_request request = {
		.blkno = ngnfs_blkno_make(
		    (uint16_t)(slot % ngnfs_client_device_count(bench->client)), 1000 + slot),
		.version = bench->full ? 0 : bench->versions[slot],
		.access = NGNFS_ACCESS_READ,
	};
	int ret = ngnfs_client_get(bench->client, &request, 1, get_done, bench);

	if (ret)
		die("GET", ret);
}

static void bench_get(struct ngnfs_client *client, bool full, uint32_t window)
{
	struct get_bench bench = { .client = client, .full = full };
	double start;

	pthread_mutex_init(&bench.lock, NULL);
	pthread_cond_init(&bench.cond, NULL);
	/* Learn current versions first so that hits are hits. */
	for (uint32_t slot = 0; slot < window; slot++) {
		uint64_t blkno = ngnfs_blkno_make(
		    (uint16_t)(slot % ngnfs_client_device_count(client)), 1000 + slot);
		int ret = ngnfs_client_get_sync(client, blkno, NGNFS_ACCESS_READ, 0,
						&bench.versions[slot], NULL, NULL);

		if (ret)
			die("GET warm-up", ret);
	}
	start = now_s();
	bench.end = start + seconds;
	atomic_store(&bench.outstanding, (int)window);
	for (uint32_t slot = 0; slot < window; slot++)
		get_submit(&bench, slot);
	pthread_mutex_lock(&bench.lock);
	while (atomic_load(&bench.outstanding) > 0)
		pthread_cond_wait(&bench.cond, &bench.lock);
	pthread_mutex_unlock(&bench.lock);
	if (atomic_load(&bench.error))
		die("GET", atomic_load(&bench.error));
	printf("GET %-18s %3u outstanding: %9.0f round trips/s (%.1f us average latency)\n",
	       full ? "full 4 KiB" : "cached hit", window,
	       (double)atomic_load(&bench.done) / (now_s() - start),
	       1e6 * (now_s() - start) / (double)atomic_load(&bench.done) * window);
}

/* ---- write sets ---- */

struct write_slot {
	struct write_bench *bench;
	uint32_t block_count;
	struct ngnfs_block_request blocks[3];
	uint8_t data[3][NGNFS_BLOCK_SIZE];
};

struct write_bench {
	struct ngnfs_client *client;
	double end;
	atomic_uint_fast64_t done;
	atomic_int outstanding;
	atomic_int error;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct write_slot slots[MAX_WINDOW];
};

static void write_submit(struct write_slot *slot);

static void write_done(void *arg, int status, const uint64_t *versions)
{
	struct write_slot *slot = arg;
	struct write_bench *bench = slot->bench;

	if (status) {
		atomic_store(&bench->error, status);
	} else {
		for (uint32_t i = 0; i < slot->block_count; i++)
			slot->blocks[i].version = versions[i];
		atomic_fetch_add(&bench->done, 1);
		if (now_s() < bench->end) {
			write_submit(slot);
			return;
		}
	}
	if (atomic_fetch_sub(&bench->outstanding, 1) == 1) {
		pthread_mutex_lock(&bench->lock);
		pthread_cond_broadcast(&bench->cond);
		pthread_mutex_unlock(&bench->lock);
	}
}

static void write_submit(struct write_slot *slot)
{
	struct ngnfs_write_set set = { .blocks = slot->blocks, .block_count = slot->block_count };
	int ret;

	slot->data[0][0]++;
	ret = ngnfs_client_write_set(slot->bench->client, &set, write_done, slot);
	if (ret)
		die("WRITE", ret);
}

static void bench_write(struct ngnfs_client *client, uint32_t devices, uint32_t window)
{
	struct write_bench *bench = calloc(1, sizeof(*bench));
	double start;

	bench->client = client;
	pthread_mutex_init(&bench->lock, NULL);
	pthread_cond_init(&bench->cond, NULL);
	for (uint32_t s = 0; s < window; s++) {
		struct write_slot *slot = &bench->slots[s];

		slot->bench = bench;
		slot->block_count = devices;
		for (uint32_t i = 0; i < devices; i++) {
			uint16_t device =
			    (uint16_t)(devices == 1 ? s % ngnfs_client_device_count(client) : i);
			uint64_t blkno = ngnfs_blkno_make(device, 5000 + s + devices * 1000);
			int ret;

			ret = ngnfs_client_get_sync(client, blkno, NGNFS_ACCESS_WRITE, 0,
						    &slot->blocks[i].version, NULL, NULL);
			if (ret)
				die("GET(write) warm-up", ret);
			slot->blocks[i].blkno = blkno;
			slot->blocks[i].access = NGNFS_ACCESS_WRITE;
			slot->blocks[i].data = slot->data[i];
		}
	}
	start = now_s();
	bench->end = start + seconds;
	atomic_store(&bench->outstanding, (int)window);
	for (uint32_t s = 0; s < window; s++)
		write_submit(&bench->slots[s]);
	pthread_mutex_lock(&bench->lock);
	while (atomic_load(&bench->outstanding) > 0)
		pthread_cond_wait(&bench->cond, &bench->lock);
	pthread_mutex_unlock(&bench->lock);
	if (atomic_load(&bench->error))
		die("WRITE", atomic_load(&bench->error));
	printf("WRITE %u-device sets %3u outstanding: %9.0f sets/s\n", devices, window,
	       (double)atomic_load(&bench->done) / (now_s() - start));
	for (uint32_t s = 0; s < window; s++) {
		for (uint32_t i = 0; i < devices; i++)
			ngnfs_client_release(client, bench->slots[s].blocks[i].blkno,
					     NGNFS_ACCESS_NONE);
	}
	free(bench);
}

static void usage(FILE *out)
{
	fprintf(out, "usage: client_bench [--blockd PATH] [--manifest FILE] [--seconds S]\n"
		     "  Measures GET round trips and write sets per second on loopback.\n"
		     "  Without --manifest it starts and formats 3 blockd processes.\n");
}

int main(int argc, char **argv)
{
	static const struct option options[] = { { "blockd", required_argument, NULL, 'b' },
						 { "manifest", required_argument, NULL, 'm' },
						 { "seconds", required_argument, NULL, 's' },
						 { "help", no_argument, NULL, 'h' },
						 { NULL, 0, NULL, 0 } };
	struct ngnfs_test_cluster *cluster = NULL;
	struct ngnfs_manifest manifest = { 0 };
	struct ngnfs_client_config config = { .connect_timeout_ms = 3000,
					      .request_timeout_ms = 30000 };
	struct ngnfs_client *client;
	const char *manifest_path = NULL;
	int option, ret;

	while ((option = getopt_long(argc, argv, "b:m:s:h", options, NULL)) != -1) {
		switch (option) {
		case 'b':
			setenv("NGNFS_BLOCKD", optarg, 1);
			break;
		case 'm':
			manifest_path = optarg;
			break;
		case 's':
			seconds = atof(optarg);
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
#ifdef NGNFS_BENCH_BLOCKD
	setenv("NGNFS_BLOCKD", NGNFS_BENCH_BLOCKD, 0);
#endif
	if (manifest_path) {
		ret = ngnfs_manifest_load(manifest_path, &manifest);
		if (ret)
			die("loading the manifest", ret);
		config.device_addresses = (const char *const *)manifest.addresses;
		config.device_count = manifest.device_count;
	} else {
		uint8_t fs_id[NGNFS_FS_ID_SIZE];

		cluster = ngnfs_test_cluster_start(3, "client-bench");
		if (!cluster)
			die("starting blockd", -EIO);
		config.device_addresses = ngnfs_test_cluster_addresses(cluster);
		config.device_count = 3;
		config.hello_flags = NGNFS_HELLO_FORMAT;
		if (getrandom(fs_id, sizeof(fs_id), 0) != sizeof(fs_id))
			die("getrandom", -EIO);
		ret = ngnfs_client_create(&config, NULL, NULL, &client);
		if (ret)
			die("FORMAT session", ret);
		for (uint16_t d = 0; d < 3; d++) {
			ret = ngnfs_client_format_sync(client, d, fs_id, 3);
			if (ret)
				die("FORMAT", ret);
		}
		ngnfs_client_destroy(client);
		config.hello_flags = 0;
	}
	ret = ngnfs_client_create(&config, NULL, NULL, &client);
	if (ret)
		die("opening the client", ret);

	printf("client_bench: %u devices, %.1f s per figure\n", config.device_count, seconds);
	bench_get(client, false, 1);
	bench_get(client, true, 1);
	bench_get(client, false, 16);
	bench_get(client, true, 16);
	bench_get(client, false, 128);
	bench_write(client, 1, 1);
	bench_write(client, 1, 16);
	if (config.device_count >= 3) {
		bench_write(client, 3, 1);
		bench_write(client, 3, 16);
	}
	ngnfs_client_destroy(client);
	ngnfs_manifest_free(&manifest);
	if (cluster)
		ngnfs_test_cluster_stop(cluster);
	return 0;
}
