// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Tests of the block cache and transactions (libcore/cache.c, txn.c,
 * dirty.c), one behaviour per test, selected by name on the command line
 * (test_cache --help lists them).
 *
 * The same source is built twice: against the in-process client double
 * (ctest/cache/fake_client.c: one fake server with a real grant table, so
 * two caches in one process revoke each other) and, with
 * NGNFS_CACHE_TEST_REAL, against the real network client and blockd
 * processes started by ctest/harness/cluster.h.  The tests only use the
 * public API (txn.h, cache.h, client.h) and check what reached the
 * servers with ngnfs_client_read_incoherent_sync(), so both builds run
 * the same assertions.
 *
 * Each test fails with a message saying what was expected and what came
 * instead, and is bounded in time (every wait has a deadline; ctest adds
 * its own timeout).
 *
 * XXX:
 *  - session_reset_regrants_dirty needs the double (it makes the fake
 *    server forget one client's grants and moves a version underneath);
 *    with real blockd, restart_reclaims_dirty covers the unchanged case.
 */

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cache.h"
#include "txn.h"

#ifdef NGNFS_CACHE_TEST_REAL
#include "cluster.h"
#else
#include "fake_client.h"
#endif

#define FAIL(...)                                                                                  \
	do {                                                                                       \
		fprintf(stderr, "%s:%d: FAILED: ", __FILE__, __LINE__);                            \
		fprintf(stderr, __VA_ARGS__);                                                      \
		fprintf(stderr, "\n");                                                             \
		exit(1);                                                                           \
	} while (0)

#define CHECK(cond, ...)                                                                           \
	do {                                                                                       \
		if (!(cond))                                                                       \
			FAIL(__VA_ARGS__);                                                         \
	} while (0)

/*
 * Fixed test blocks.  blockd lets a write raise its high-water mark by at
 * most 65536 blocks and hands out the blocks skipped below it (free list
 * first), so fixed blocks sit just under that gap, above anything ALLOC
 * hands out while these tests run.
 */
#define TEST_BLOCK(device, n) ngnfs_blkno_make((device), 60000 + (n))

static uint64_t now_ms(void)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (uint64_t)now.tv_sec * 1000 + (uint64_t)now.tv_nsec / 1000000;
}

/* ---- the environment: fake server or real blockd ---- */

struct env {
	uint16_t devices;
	uint8_t fs_id[NGNFS_FS_ID_SIZE];
	const char *const *addresses;
#ifdef NGNFS_CACHE_TEST_REAL
	struct ngnfs_test_cluster *cluster;
#endif
	struct ngnfs_client *probe; /* reads what reached the servers */
	struct ngnfs_cache *probe_cache;
};

static struct env env;

static void client_config(struct ngnfs_client_config *config)
{
	memset(config, 0, sizeof(*config));
	config->device_addresses = env.addresses;
	config->device_count = env.devices;
	memcpy(config->fs_id, env.fs_id, sizeof(env.fs_id));
	config->request_timeout_ms = 20000;
}

static void env_start(const char *name, uint16_t devices)
{
	struct ngnfs_cache_config cache_config = { .cache_bytes = 1 << 20 };
	struct ngnfs_client_config config;
	int ret;

	env.devices = devices;
	memcpy(env.fs_id, "cache-test-fsid!", NGNFS_FS_ID_SIZE);
#ifdef NGNFS_CACHE_TEST_REAL
	{
		struct ngnfs_client *formatter;
		uint16_t device;

		/* A short reclaim grace period keeps the restart test quick. */
		static const char *const args[] = { "--grace-ms", "1500", NULL };
		static const char *const debug_args[] = { "--grace-ms", "1500", "--log-level",
							  "debug", NULL };

		/* NGNFS_TEST_DEBUG=1: blockd logs every revocation it sends. */
		env.cluster = ngnfs_test_cluster_start_args(
		    devices, name, getenv("NGNFS_TEST_DEBUG") ? debug_args : args);
		CHECK(env.cluster, "expected %u blockd processes to start for %s", devices, name);
		env.addresses = ngnfs_test_cluster_addresses(env.cluster);
		client_config(&config);
		memset(config.fs_id, 0, sizeof(config.fs_id));
		config.hello_flags = NGNFS_HELLO_FORMAT;
		ret = ngnfs_client_create(&config, NULL, NULL, &formatter);
		CHECK(ret == 0, "expected a formatting client, got %d", ret);
		for (device = 0; device < devices; device++) {
			ret = ngnfs_client_format_sync(formatter, device, env.fs_id, devices);
			CHECK(ret == 0, "expected FORMAT of device %u to succeed, got %d", device,
			      ret);
		}
		ngnfs_client_destroy(formatter);
	}
#else
	(void)name;
	fake_server_reset(2000);
#endif
	client_config(&config);
	ret = ngnfs_cache_create_with_client(&config, &cache_config, &env.probe_cache);
	CHECK(ret == 0, "expected the probe client to start, got %d", ret);
	env.probe = ngnfs_cache_client(env.probe_cache);
}

static void env_stop(void)
{
	ngnfs_cache_destroy(env.probe_cache);
#ifdef NGNFS_CACHE_TEST_REAL
	{
		int ret = ngnfs_test_cluster_stop(env.cluster);

		CHECK(ret == 0, "expected every blockd to exit cleanly, got %d", ret);
	}
#endif
}

static struct ngnfs_cache *new_cache(enum ngnfs_durability durability, uint32_t interval_ms,
				     size_t cache_bytes)
{
	struct ngnfs_cache_config cache_config = {
		.cache_bytes = cache_bytes,
		.durability = durability,
		.writeback_interval_ms = interval_ms,
		.alloc_batch = 16,
	};
	struct ngnfs_client_config config;
	struct ngnfs_cache *cache;
	int ret;

	client_config(&config);
	ret = ngnfs_cache_create_with_client(&config, &cache_config, &cache);
	CHECK(ret == 0, "expected a cache to start, got %d", ret);
	return cache;
}

/* What the servers have committed for blkno. */
static uint64_t server_read(uint64_t blkno, uint8_t *data)
{
	uint64_t version = 0;
	int ret;

	ret = ngnfs_client_read_incoherent_sync(env.probe, blkno, &version, data);
	CHECK(ret == 0, "expected READ_INCOHERENT of block %llu to succeed, got %d",
	      (unsigned long long)blkno, ret);
	return version;
}

static uint64_t server_value(uint64_t blkno)
{
	uint8_t data[NGNFS_BLOCK_SIZE];
	uint64_t value;

	server_read(blkno, data);
	memcpy(&value, data, sizeof(value));
	return value;
}

/* ---- transaction functions used by several tests ---- */

struct put_arg {
	uint64_t blknos[4];
	uint64_t values[4];
	int count;
	int runs;
};

/* Write values[i] into the first 8 bytes of blknos[i], in the order given. */
static int put_fn(struct ngnfs_txn *txn, void *arg)
{
	struct put_arg *put = arg;
	int i;

	put->runs++;
	for (i = 0; i < put->count; i++) {
		void *data;
		int ret = ngnfs_txn_write(txn, put->blknos[i], &data);

		if (ret)
			return ret;
		memcpy(data, &put->values[i], sizeof(uint64_t));
	}
	return 0;
}

static void put(struct ngnfs_cache *cache, uint64_t blkno, uint64_t value)
{
	struct put_arg arg = { .blknos = { blkno }, .values = { value }, .count = 1 };
	int ret = ngnfs_txn_run(cache, put_fn, &arg);

	CHECK(ret == 0, "expected writing block %llu to succeed, got %d", (unsigned long long)blkno,
	      ret);
}

static void put2(struct ngnfs_cache *cache, uint64_t a, uint64_t va, uint64_t b, uint64_t vb)
{
	struct put_arg arg = { .blknos = { a, b }, .values = { va, vb }, .count = 2 };
	int ret = ngnfs_txn_run(cache, put_fn, &arg);

	CHECK(ret == 0, "expected writing blocks %llu and %llu to succeed, got %d",
	      (unsigned long long)a, (unsigned long long)b, ret);
}

struct get_arg {
	uint64_t blkno;
	uint64_t value;
};

static int get_fn(struct ngnfs_txn *txn, void *arg)
{
	struct get_arg *get = arg;
	const void *data;
	int ret = ngnfs_txn_read(txn, get->blkno, &data);

	if (ret)
		return ret;
	memcpy(&get->value, data, sizeof(uint64_t));
	return 0;
}

static uint64_t get(struct ngnfs_cache *cache, uint64_t blkno)
{
	struct get_arg arg = { .blkno = blkno };
	int ret = ngnfs_txn_run(cache, get_fn, &arg);

	CHECK(ret == 0, "expected reading block %llu to succeed, got %d", (unsigned long long)blkno,
	      ret);
	return arg.value;
}

static struct ngnfs_cache_counters counters_of(struct ngnfs_cache *cache)
{
	struct ngnfs_cache_counters counters;

	ngnfs_cache_counters(cache, &counters);
	return counters;
}

/* A transaction that holds a block locked until told to let go. */
struct holder {
	struct ngnfs_cache *cache;
	uint64_t blkno;
	bool write;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool holding;
	bool release;
	uint64_t seen_value;
	uint64_t value_after_wait;
	pthread_t thread;
};

static int holder_fn(struct ngnfs_txn *txn, void *arg)
{
	struct holder *holder = arg;
	const void *rdata = NULL;
	void *wdata = NULL;
	int ret;

	if (holder->write)
		ret = ngnfs_txn_write(txn, holder->blkno, &wdata);
	else
		ret = ngnfs_txn_read(txn, holder->blkno, &rdata);
	if (ret)
		return ret;
	if (wdata)
		rdata = wdata;
	memcpy(&holder->seen_value, rdata, sizeof(uint64_t));
	pthread_mutex_lock(&holder->lock);
	holder->holding = true;
	pthread_cond_broadcast(&holder->cond);
	while (!holder->release)
		pthread_cond_wait(&holder->cond, &holder->lock);
	pthread_mutex_unlock(&holder->lock);
	/* The block must still be there and unchanged under our lock. */
	memcpy(&holder->value_after_wait, rdata, sizeof(uint64_t));
	return 0;
}

static void *holder_main(void *arg)
{
	struct holder *holder = arg;
	int ret = ngnfs_txn_run(holder->cache, holder_fn, holder);

	CHECK(ret == 0, "expected the holding transaction on block %llu to succeed, got %d",
	      (unsigned long long)holder->blkno, ret);
	return NULL;
}

static void holder_start(struct holder *holder, struct ngnfs_cache *cache, uint64_t blkno,
			 bool write)
{
	memset(holder, 0, sizeof(*holder));
	holder->cache = cache;
	holder->blkno = blkno;
	holder->write = write;
	pthread_mutex_init(&holder->lock, NULL);
	pthread_cond_init(&holder->cond, NULL);
	pthread_create(&holder->thread, NULL, holder_main, holder);
	pthread_mutex_lock(&holder->lock);
	while (!holder->holding)
		pthread_cond_wait(&holder->cond, &holder->lock);
	pthread_mutex_unlock(&holder->lock);
}

static void holder_stop(struct holder *holder)
{
	pthread_mutex_lock(&holder->lock);
	holder->release = true;
	pthread_cond_broadcast(&holder->cond);
	pthread_mutex_unlock(&holder->lock);
	pthread_join(holder->thread, NULL);
	pthread_mutex_destroy(&holder->lock);
	pthread_cond_destroy(&holder->cond);
}

/* ---- eviction ---- */

static int test_eviction_bounds_memory(void)
{
	const size_t limit = 32;
	struct ngnfs_cache *cache =
	    new_cache(NGNFS_DURABILITY_WRITEBACK, 60000, limit * NGNFS_BLOCK_SIZE);
	struct ngnfs_cache_counters counters;
	struct holder holder;
	uint64_t i;

	/* Eight dirty blocks that must survive, one block locked by a reader. */
	for (i = 0; i < 8; i++)
		put(cache, TEST_BLOCK(0, i), 1000 + i);
	put(cache, TEST_BLOCK(0, 100), 4242);
	holder_start(&holder, cache, TEST_BLOCK(0, 100), false);
	for (i = 0; i < 200; i++) {
		get(cache, TEST_BLOCK(0, 1000 + i));
		counters = counters_of(cache);
		CHECK(counters.cached_blocks <= limit,
		      "expected at most %zu cached blocks after reading %llu blocks, got %llu",
		      limit, (unsigned long long)i + 1, (unsigned long long)counters.cached_blocks);
	}
	counters = counters_of(cache);
	CHECK(counters.evictions >= 200 - limit,
	      "expected at least %zu evictions after reading 200 blocks into %zu, got %llu",
	      200 - limit, limit, (unsigned long long)counters.evictions);
	CHECK(counters.dirty_blocks == 9,
	      "expected the 9 dirty blocks to stay dirty (none evicted), got %llu",
	      (unsigned long long)counters.dirty_blocks);
	holder_stop(&holder);
	CHECK(holder.value_after_wait == 4242,
	      "expected the read-locked block to keep its contents 4242, got %llu",
	      (unsigned long long)holder.value_after_wait);
	for (i = 0; i < 8; i++) {
		CHECK(server_value(TEST_BLOCK(0, i)) == 0,
		      "expected dirty block %llu not yet written in writeback mode",
		      (unsigned long long)i);
	}
	CHECK(ngnfs_cache_sync(cache) == 0, "expected sync to succeed");
	for (i = 0; i < 8; i++) {
		uint64_t value = server_value(TEST_BLOCK(0, i));

		CHECK(value == 1000 + i, "expected block %llu to hold %llu after sync, got %llu",
		      (unsigned long long)i, (unsigned long long)(1000 + i),
		      (unsigned long long)value);
	}
	ngnfs_cache_destroy(cache);
	return 0;
}

/* Dirty blocks alone beyond the limit: pressure writes them back so clean ones can go. */
static int test_pressure_writes_back_dirty(void)
{
	const size_t limit = 16;
	struct ngnfs_cache *cache =
	    new_cache(NGNFS_DURABILITY_WRITEBACK, 60000, limit * NGNFS_BLOCK_SIZE);
	struct ngnfs_cache_counters counters;
	uint64_t i;

	for (i = 0; i < 64; i++)
		put(cache, TEST_BLOCK(0, 2000 + i), 7000 + i);
	counters = counters_of(cache);
	CHECK(counters.sets_written > 0,
	      "expected memory pressure to write dirty sets in writeback mode, got none");
	CHECK(counters.cached_blocks <= limit + 1,
	      "expected at most %zu cached blocks after 64 writes, got %llu", limit + 1,
	      (unsigned long long)counters.cached_blocks);
	CHECK(ngnfs_cache_sync(cache) == 0, "expected sync to succeed");
	for (i = 0; i < 64; i++) {
		uint64_t value = server_value(TEST_BLOCK(0, 2000 + i));

		CHECK(value == 7000 + i, "expected block %llu to hold %llu, got %llu",
		      (unsigned long long)(2000 + i), (unsigned long long)(7000 + i),
		      (unsigned long long)value);
	}
	ngnfs_cache_destroy(cache);
	return 0;
}

/* ---- dirty set merging ---- */

static int test_dirty_set_merging(void)
{
	struct ngnfs_cache *writer = new_cache(NGNFS_DURABILITY_WRITEBACK, 60000, 0);
	struct ngnfs_cache *reader = new_cache(NGNFS_DURABILITY_WRITEBACK, 60000, 0);
	uint64_t a = TEST_BLOCK(0, 1), b = TEST_BLOCK(0, 2);
	uint64_t c = TEST_BLOCK(0, 3), d = TEST_BLOCK(0, 4);
	struct ngnfs_cache_counters before, after;
	uint64_t value;

	/* Control: separate sets; revoking a writes a's set only. */
	put(writer, a, 11);
	put(writer, b, 12);
	value = get(reader, a);
	CHECK(value == 11, "expected the other client to read 11 from block a, got %llu",
	      (unsigned long long)value);
	CHECK(server_value(b) == 0,
	      "expected block b (its own dirty set) to stay unwritten when a is revoked, "
	      "server has %llu",
	      (unsigned long long)server_value(b));

	CHECK(ngnfs_cache_sync(writer) == 0, "expected the writer's sync to succeed");

	/* Two sets, then one transaction touching both merges them. */
	put(writer, c, 21);
	put(writer, d, 22);
	put2(writer, c, 31, d, 32);
	before = counters_of(writer);
	value = get(reader, c);
	/* The reader has its grant once the write released; wait for the completion too. */
	CHECK(ngnfs_cache_sync(writer) == 0, "expected the writer's sync to succeed");
	after = counters_of(writer);
	CHECK(value == 31, "expected the other client to read 31 from block c, got %llu",
	      (unsigned long long)value);
	CHECK(server_value(d) == 32,
	      "expected block d to leave with c's merged set on c's revocation, server has "
	      "%llu",
	      (unsigned long long)server_value(d));
	CHECK(after.writes_sent - before.writes_sent == 1,
	      "expected the merged set to leave in one write, got %llu writes",
	      (unsigned long long)(after.writes_sent - before.writes_sent));
	CHECK(after.blocks_written - before.blocks_written == 2,
	      "expected that write to carry both blocks c and d, got %llu blocks",
	      (unsigned long long)(after.blocks_written - before.blocks_written));
	ngnfs_cache_destroy(reader);
	ngnfs_cache_destroy(writer);
	return 0;
}

/* ---- retries ---- */

struct trace_arg {
	uint64_t a;
	uint64_t b;
	int runs;
	bool fail_first;
	uint64_t allocated[16];
	int allocs;
};

/* Increment a, then (first run) fail artificially, or touch b which may be locked. */
static int trace_fn(struct ngnfs_txn *txn, void *arg)
{
	struct trace_arg *trace = arg;
	uint64_t value;
	void *data;
	int ret;

	trace->runs++;
	ret = ngnfs_txn_write(txn, trace->a, &data);
	if (ret)
		return ret;
	memcpy(&value, data, sizeof(value));
	value++;
	memcpy(data, &value, sizeof(value));
	if (trace->fail_first && trace->runs == 1)
		return -EAGAIN;
	if (trace->allocs < 16) {
		uint64_t blkno, version;

		ret = ngnfs_txn_alloc(txn, 0, &blkno, &version, &data);
		if (ret)
			return ret;
		trace->allocated[trace->allocs++] = blkno;
		memset(data, 0x5a, NGNFS_BLOCK_SIZE);
	}
	ret = ngnfs_txn_write(txn, trace->b, &data);
	if (ret)
		return ret;
	memcpy(data, &value, sizeof(value));
	return 0;
}

static void *release_later(void *arg)
{
	usleep(100 * 1000);
	holder_stop(arg);
	return NULL;
}

static int test_retry_leaves_no_trace(void)
{
	struct ngnfs_cache *cache = new_cache(NGNFS_DURABILITY_STABLE, 0, 0);
	uint64_t a = TEST_BLOCK(0, 1), b = TEST_BLOCK(0, 2);
	struct trace_arg trace = { .a = a, .b = b, .fail_first = true, .allocs = 16 };
	struct ngnfs_cache_counters counters;
	uint8_t data[NGNFS_BLOCK_SIZE];
	struct holder holder;
	pthread_t releaser;
	uint64_t value;
	int ret, i;

	put(cache, a, 100);
	/* fn modifies a, then returns -EAGAIN on its own: the error comes back, a is unchanged. */
	ret = ngnfs_txn_run(cache, trace_fn, &trace);
	CHECK(ret == -EAGAIN, "expected the function's own -EAGAIN back, got %d", ret);
	value = get(cache, a);
	CHECK(value == 100, "expected block a to keep 100 after a failed run, got %llu",
	      (unsigned long long)value);
	value = server_value(a);
	CHECK(value == 100, "expected the server to keep 100 in block a, got %llu",
	      (unsigned long long)value);
	counters = counters_of(cache);
	CHECK(counters.dirty_blocks == 0, "expected no dirty block after a failed run, got %llu",
	      (unsigned long long)counters.dirty_blocks);

	/*
	 * Conflict: b is write-locked by another transaction for 100 ms.  The
	 * first run increments a and allocates a block before it is stopped
	 * at b; the rerun must start from a's committed value and get the
	 * same block back from the pool.
	 */
	memset(&trace, 0, sizeof(trace));
	trace.a = a;
	trace.b = b;
	holder_start(&holder, cache, b, true);
	pthread_create(&releaser, NULL, release_later, &holder);
	ret = ngnfs_txn_run(cache, trace_fn, &trace);
	pthread_join(releaser, NULL);
	CHECK(ret == 0, "expected the conflicting transaction to succeed after retrying, got %d",
	      ret);
	CHECK(trace.runs >= 2, "expected the transaction to run again after the conflict, ran %d",
	      trace.runs);
	counters = counters_of(cache);
	CHECK(counters.retries >= 1, "expected the retry counter to count it, got %llu",
	      (unsigned long long)counters.retries);
	value = server_value(a);
	CHECK(value == 101,
	      "expected block a to be incremented once (101) whatever the runs (%d), "
	      "got %llu",
	      trace.runs, (unsigned long long)value);
	value = server_value(b);
	CHECK(value == 101, "expected block b to hold 101, got %llu", (unsigned long long)value);
	for (i = 1; i < trace.allocs; i++)
		CHECK(trace.allocated[i] == trace.allocated[0],
		      "expected every run to get the same block back from the pool (%llu), run %d "
		      "got %llu",
		      (unsigned long long)trace.allocated[0], i + 1,
		      (unsigned long long)trace.allocated[i]);
	server_read(trace.allocated[0], data);
	CHECK(data[0] == 0x5a && data[NGNFS_BLOCK_SIZE - 1] == 0x5a,
	      "expected the allocated block %llu to hold the committed 0x5a bytes, got 0x%02x",
	      (unsigned long long)trace.allocated[0], data[0]);
	ngnfs_cache_destroy(cache);
	return 0;
}

/* ---- stable mode group commit ---- */

#define GROUP_THREADS 64

struct group_arg {
	struct ngnfs_cache *cache;
	pthread_barrier_t *barrier;
	uint64_t blkno;
	int ret;
	uint64_t durable_value;
};

static void *group_main(void *arg)
{
	struct group_arg *group = arg;
	struct put_arg put_arg = { .blknos = { group->blkno },
				   .values = { group->blkno },
				   .count = 1 };

	pthread_barrier_wait(group->barrier);
	group->ret = ngnfs_txn_run(group->cache, put_fn, &put_arg);
	/* Stable: once run returns, the servers have it. */
	group->durable_value = server_value(group->blkno);
	return NULL;
}

static int test_stable_group_commit(void)
{
	struct ngnfs_cache *cache = new_cache(NGNFS_DURABILITY_STABLE, 0, 0);
	struct group_arg groups[GROUP_THREADS];
	pthread_t threads[GROUP_THREADS];
	struct ngnfs_cache_counters before, after;
	pthread_barrier_t barrier;
	int i;

	/* Get every block granted first so that the commits, not the GETs, race. */
	for (i = 0; i < GROUP_THREADS; i++)
		put(cache, TEST_BLOCK(i % 2, 3000 + i), 1);
	before = counters_of(cache);
	pthread_barrier_init(&barrier, NULL, GROUP_THREADS);
	for (i = 0; i < GROUP_THREADS; i++) {
		groups[i].cache = cache;
		groups[i].barrier = &barrier;
		groups[i].blkno = TEST_BLOCK(i % 2, 3000 + i);
		pthread_create(&threads[i], NULL, group_main, &groups[i]);
	}
	for (i = 0; i < GROUP_THREADS; i++)
		pthread_join(threads[i], NULL);
	pthread_barrier_destroy(&barrier);
	after = counters_of(cache);
	for (i = 0; i < GROUP_THREADS; i++) {
		CHECK(groups[i].ret == 0, "expected committer %d to succeed, got %d", i,
		      groups[i].ret);
		CHECK(groups[i].durable_value == groups[i].blkno,
		      "expected committer %d's block to be durable when run returned, server has "
		      "%llu",
		      i, (unsigned long long)groups[i].durable_value);
	}
	printf("group commit: %d concurrent committers, %llu writes\n", GROUP_THREADS,
	       (unsigned long long)(after.writes_sent - before.writes_sent));
	CHECK(after.writes_sent - before.writes_sent < GROUP_THREADS / 2,
	      "expected %d concurrent stable commits to share writes (fewer than %d), got %llu",
	      GROUP_THREADS, GROUP_THREADS / 2,
	      (unsigned long long)(after.writes_sent - before.writes_sent));
	ngnfs_cache_destroy(cache);
	return 0;
}

/* ---- writeback mode ---- */

static int test_writeback_flush_within_interval(void)
{
	const uint32_t interval = 300;
	/* Scheduling slack on a loaded 2-core machine; the write's own time is not counted. */
	const uint64_t slack = 300;
	struct ngnfs_cache *cache = new_cache(NGNFS_DURABILITY_WRITEBACK, interval, 0);
	struct ngnfs_cache *slow = new_cache(NGNFS_DURABILITY_WRITEBACK, 60000, 0);
	uint64_t a = TEST_BLOCK(0, 1), b = TEST_BLOCK(1, 2);
	uint64_t start, sent, elapsed, value, writes;
	int ret;

	writes = counters_of(cache).writes_sent;
	put(cache, a, 77);
	start = now_ms();
	CHECK(counters_of(cache).writes_sent == writes,
	      "expected a writeback-mode write to return before its write is even sent, %llu "
	      "writes were sent",
	      (unsigned long long)(counters_of(cache).writes_sent - writes));
	/*
	 * When the flusher sent the write (writes_sent counts at sending);
	 * asking the server meanwhile would add its latency to the figure.
	 */
	while (counters_of(cache).writes_sent == writes && now_ms() - start < 5000)
		usleep(2 * 1000);
	sent = now_ms() - start;
	while (server_value(a) != 77 && now_ms() - start < 10000)
		usleep(10 * 1000);
	elapsed = now_ms() - start;
	value = server_value(a);
	printf("writeback: write sent after %llu ms, on the server after %llu ms (interval %u "
	       "ms)\n",
	       (unsigned long long)sent, (unsigned long long)elapsed, interval);
	CHECK(value == 77, "expected the flusher to write block a within 10 s, server has %llu",
	      (unsigned long long)value);
	CHECK(sent <= interval + slack,
	      "expected the write of block a sent within the %u ms interval (+%llu ms), it was "
	      "sent after %llu ms",
	      interval, (unsigned long long)slack, (unsigned long long)sent);
	CHECK(sent + 50 >= interval,
	      "expected the write to wait for the interval (%u ms), it was sent after %llu ms",
	      interval, (unsigned long long)sent);
	ret = ngnfs_cache_take_error(cache);
	CHECK(ret == 0, "expected no recorded write error, got %d", ret);

	/* sync writes at once, long before a 60 s interval. */
	put(slow, b, 88);
	start = now_ms();
	ret = ngnfs_cache_sync(slow);
	elapsed = now_ms() - start;
	CHECK(ret == 0, "expected sync to succeed, got %d", ret);
	value = server_value(b);
	CHECK(value == 88, "expected block b on the server after sync, got %llu",
	      (unsigned long long)value);
	CHECK(elapsed < 10000, "expected sync not to wait for the 60 s interval, took %llu ms",
	      (unsigned long long)elapsed);
	ngnfs_cache_destroy(slow);
	ngnfs_cache_destroy(cache);
	return 0;
}

/* ---- revocation between two clients ---- */

struct invalidations {
	pthread_mutex_t lock;
	uint64_t blknos[64];
	int count;
	uint64_t ticket; /* returned: 0, or "delivered later" */
};

static uint64_t record_invalidate(void *arg, uint64_t blkno, const void *data,
				  enum ngnfs_cache_invalidation why)
{
	struct invalidations *inv = arg;
	uint64_t ticket;

	(void)data;
	(void)why;
	pthread_mutex_lock(&inv->lock);
	if (inv->count < 64)
		inv->blknos[inv->count++] = blkno;
	ticket = inv->ticket;
	pthread_mutex_unlock(&inv->lock);
	return ticket;
}

static bool invalidated(struct invalidations *inv, uint64_t blkno);

/*
 * eviction_invalidates: a block evicted (released) is not ours to be
 * revoked any more, so the gateway is told to drop what it built from it;
 * blocks still cached are not.
 */
static int test_eviction_invalidates(void)
{
	const size_t limit = 8;
	struct ngnfs_cache *cache =
	    new_cache(NGNFS_DURABILITY_WRITEBACK, 60000, limit * NGNFS_BLOCK_SIZE);
	struct invalidations inv = { .lock = PTHREAD_MUTEX_INITIALIZER };
	struct ngnfs_cache_counters counters;
	uint64_t i;

	ngnfs_cache_set_invalidate(cache, record_invalidate, &inv);
	for (i = 0; i < 4 * limit; i++)
		get(cache, TEST_BLOCK(0, 500 + i));
	counters = counters_of(cache);
	CHECK(counters.evictions >= limit, "expected evictions, got %llu",
	      (unsigned long long)counters.evictions);
	CHECK(invalidated(&inv, TEST_BLOCK(0, 500)),
	      "expected the first block read, evicted since, to be invalidated");
	CHECK(inv.count == (int)counters.evictions,
	      "expected one invalidation per eviction, got %d for %llu", inv.count,
	      (unsigned long long)counters.evictions);
	CHECK(!invalidated(&inv, TEST_BLOCK(0, 500 + 4 * limit - 1)),
	      "the block read last, still cached, was invalidated");
	ngnfs_cache_destroy(cache);
	return 0;
}

static bool invalidated(struct invalidations *inv, uint64_t blkno)
{
	bool found = false;
	int i;

	pthread_mutex_lock(&inv->lock);
	for (i = 0; i < inv->count; i++)
		found |= inv->blknos[i] == blkno;
	pthread_mutex_unlock(&inv->lock);
	return found;
}

static int test_revocation_writes_back_before_release(void)
{
	struct ngnfs_cache *one = new_cache(NGNFS_DURABILITY_WRITEBACK, 60000, 0);
	struct ngnfs_cache *two = new_cache(NGNFS_DURABILITY_WRITEBACK, 60000, 0);
	struct invalidations inv = { .lock = PTHREAD_MUTEX_INITIALIZER };
	uint64_t a = TEST_BLOCK(0, 1), b = TEST_BLOCK(1, 1);
	struct ngnfs_cache_counters before, after;
	uint64_t value;

	ngnfs_cache_set_invalidate(one, record_invalidate, &inv);
	/* One transaction dirties a (device 0) and b (device 1): one set. */
	put2(one, a, 501, b, 502);
	value = server_value(a);
	CHECK(value == 0, "expected the dirty set to stay in memory (writeback), server has %llu",
	      (unsigned long long)value);
	before = counters_of(one);
	value = get(two, a);
	CHECK(value == 501, "expected the second client to read 501 written by the first, got %llu",
	      (unsigned long long)value);
	/*
	 * Wait for the first client's write to complete, then count: one
	 * write carrying both blocks means b left with a, before the release
	 * (had b stayed behind, this sync would have sent a second write).
	 */
	CHECK(ngnfs_cache_sync(one) == 0, "expected the first client's sync to succeed");
	after = counters_of(one);
	CHECK(after.writes_sent - before.writes_sent == 1 &&
		  after.blocks_written - before.blocks_written == 2,
	      "expected the revocation of a to write its whole set (a and b) in one write, got "
	      "%llu writes of %llu blocks",
	      (unsigned long long)(after.writes_sent - before.writes_sent),
	      (unsigned long long)(after.blocks_written - before.blocks_written));
	CHECK(after.revokes >= 1, "expected the first client to count a revocation, got %llu",
	      (unsigned long long)after.revokes);
	value = get(two, b);
	CHECK(value == 502, "expected the second client to read b = 502, got %llu",
	      (unsigned long long)value);

	/* The second client writes a: the first loses its copy and sees the new data. */
	put(two, a, 601);
	CHECK(invalidated(&inv, a),
	      "expected the first client's invalidate callback for block a when the second "
	      "took write access");
	value = get(one, a);
	CHECK(value == 601, "expected the first client to read 601 back, got %llu",
	      (unsigned long long)value);
	value = get(one, b);
	CHECK(value == 502, "expected the first client to still read 502 from b, got %llu",
	      (unsigned long long)value);
	ngnfs_cache_destroy(two);
	ngnfs_cache_destroy(one);
	return 0;
}

/* A revocation of a block a transaction holds waits for its unlock, without blocking I/O. */
static int test_revocation_waits_for_local_lock(void)
{
	struct ngnfs_cache *one = new_cache(NGNFS_DURABILITY_WRITEBACK, 60000, 0);
	struct ngnfs_cache *two = new_cache(NGNFS_DURABILITY_WRITEBACK, 60000, 0);
	uint64_t a = TEST_BLOCK(0, 9), c = TEST_BLOCK(0, 10);
	struct holder holder;
	pthread_t releaser;
	uint64_t start, value;

	put(one, a, 900);
	put(one, c, 901);
	holder_start(&holder, one, a, true);
	pthread_create(&releaser, NULL, release_later, &holder);
	start = now_ms();
	/* While a is locked the first client's I/O thread must keep serving c. */
	value = get(two, c);
	CHECK(value == 901,
	      "expected the second client to read c = 901 while a is locked, got %llu",
	      (unsigned long long)value);
	value = get(two, a);
	CHECK(now_ms() - start >= 90,
	      "expected the read of a to wait for the first client's lock (100 ms), took %llu ms",
	      (unsigned long long)(now_ms() - start));
	pthread_join(releaser, NULL);
	CHECK(value == 900, "expected the second client to read 900 from a, got %llu",
	      (unsigned long long)value);
	ngnfs_cache_destroy(two);
	ngnfs_cache_destroy(one);
	return 0;
}

/* ---- the deadlock test: ABBA transfers and alloc/free in two clients ---- */

#define ABBA_ACCOUNTS	8
#define ABBA_THREADS	4 /* per client */
#define ABBA_ITERATIONS 150
#define ABBA_INITIAL	1000
#define ABBA_DIR_SLOTS	(NGNFS_BLOCK_SIZE / 8)
#define ABBA_MARKER	0xf11e0000cafeULL

struct abba_thread {
	struct ngnfs_cache *cache;
	int client;
	int index;
	unsigned int seed;
	int ret;
	uint64_t transfers;
	uint64_t creates;
	uint64_t unlinks;
};

struct transfer_arg {
	uint64_t from;
	uint64_t to;
	uint64_t amount;
};

/* Take from then to, in that order: threads pick both orders. */
static int transfer_fn(struct ngnfs_txn *txn, void *arg)
{
	struct transfer_arg *transfer = arg;
	uint64_t from_value, to_value;
	void *from, *to;
	int ret;

	ret = ngnfs_txn_write(txn, transfer->from, &from);
	if (ret)
		return ret;
	ret = ngnfs_txn_write(txn, transfer->to, &to);
	if (ret)
		return ret;
	memcpy(&from_value, from, sizeof(from_value));
	memcpy(&to_value, to, sizeof(to_value));
	if (from_value < transfer->amount)
		return 0;
	from_value -= transfer->amount;
	to_value += transfer->amount;
	memcpy(from, &from_value, sizeof(from_value));
	memcpy(to, &to_value, sizeof(to_value));
	return 0;
}

struct create_arg {
	uint64_t dir;
	uint16_t device;
	bool unlink;
	uint64_t chosen;
	bool done;
};

/* create: a new block named in a free slot of dir; unlink: free a named block. */
static int create_fn(struct ngnfs_txn *txn, void *arg)
{
	struct create_arg *create = arg;
	uint64_t *slots;
	void *dir;
	int ret, i;

	create->done = false;
	ret = ngnfs_txn_write(txn, create->dir, &dir);
	if (ret)
		return ret;
	slots = dir;
	for (i = 0; i < (int)ABBA_DIR_SLOTS; i++) {
		uint64_t blkno, version;
		void *data;

		if (!create->unlink && slots[i] == 0) {
			uint64_t marker = ABBA_MARKER;

			ret = ngnfs_txn_alloc(txn, create->device, &blkno, &version, &data);
			if (ret)
				return ret;
			memcpy(data, &marker, sizeof(marker));
			memcpy((uint8_t *)data + 8, &create->dir, sizeof(create->dir));
			slots[i] = blkno;
			create->chosen = blkno;
			create->done = true;
			return 0;
		}
		if (create->unlink && slots[i] != 0) {
			const void *victim;
			uint64_t marker;

			ret = ngnfs_txn_read(txn, slots[i], &victim);
			if (ret)
				return ret;
			memcpy(&marker, victim, sizeof(marker));
			if (marker != ABBA_MARKER)
				return -EUCLEAN;
			ret = ngnfs_txn_write(txn, slots[i], &data);
			if (ret)
				return ret;
			ret = ngnfs_txn_free(txn, slots[i]);
			if (ret)
				return ret;
			create->chosen = slots[i];
			slots[i] = 0;
			create->done = true;
			return 0;
		}
	}
	return 0;
}

static void *abba_main(void *arg)
{
	struct abba_thread *thread = arg;
	int i;

	for (i = 0; i < ABBA_ITERATIONS; i++) {
		unsigned int r = rand_r(&thread->seed);

		if (r % 8 == 0) {
			struct create_arg create = {
				.dir = TEST_BLOCK(0, 500 + (r / 8) % 2),
				.device = (uint16_t)((r / 16) % 2),
				.unlink = (r / 32) % 2,
			};

			thread->ret = ngnfs_txn_run(thread->cache, create_fn, &create);
			if (thread->ret) {
				fprintf(stderr, "client %d thread %d: %s failed: %d\n",
					thread->client, thread->index,
					create.unlink ? "unlink" : "create", thread->ret);
				return NULL;
			}
			if (create.done && create.unlink)
				thread->unlinks++;
			else if (create.done)
				thread->creates++;
		} else {
			/* A then B or B then A: both orders, on purpose. */
			uint64_t x = (r >> 4) % ABBA_ACCOUNTS;
			uint64_t y = (x + 1 + (r >> 8) % (ABBA_ACCOUNTS - 1)) % ABBA_ACCOUNTS;
			struct transfer_arg transfer = {
				.from = TEST_BLOCK(x % 2, 400 + x),
				.to = TEST_BLOCK(y % 2, 400 + y),
				.amount = 1 + (r >> 12) % 50,
			};

			thread->ret = ngnfs_txn_run(thread->cache, transfer_fn, &transfer);
			if (thread->ret) {
				fprintf(stderr, "client %d thread %d: transfer failed: %d\n",
					thread->client, thread->index, thread->ret);
				return NULL;
			}
			thread->transfers++;
		}
	}
	return NULL;
}

struct abba_client {
	struct abba_thread threads[ABBA_THREADS];
	pthread_t ids[ABBA_THREADS];
	uint64_t creates;
	uint64_t unlinks;
};

static void abba_start(struct abba_client *run, struct ngnfs_cache *cache, int client)
{
	int i;

	for (i = 0; i < ABBA_THREADS; i++) {
		run->threads[i] =
		    (struct abba_thread){ .cache = cache,
					  .client = client,
					  .index = i,
					  .seed = 12345u + 100u * (unsigned int)client +
						  (unsigned int)i };
		pthread_create(&run->ids[i], NULL, abba_main, &run->threads[i]);
	}
}

static void abba_join(struct abba_client *run)
{
	int i;

	run->creates = 0;
	run->unlinks = 0;
	for (i = 0; i < ABBA_THREADS; i++)
		pthread_join(run->ids[i], NULL);
	for (i = 0; i < ABBA_THREADS; i++) {
		CHECK(run->threads[i].ret == 0,
		      "expected client %d thread %d's transactions to succeed, got %d",
		      run->threads[i].client, i, run->threads[i].ret);
		run->creates += run->threads[i].creates;
		run->unlinks += run->threads[i].unlinks;
	}
}

static void abba_init(struct ngnfs_cache *cache)
{
	int i;

	for (i = 0; i < ABBA_ACCOUNTS; i++)
		put(cache, TEST_BLOCK(i % 2, 400 + i), ABBA_INITIAL);
}

struct copy_arg {
	uint64_t blkno;
	uint8_t *data;
};

static int copy_fn(struct ngnfs_txn *txn, void *arg)
{
	struct copy_arg *copy = arg;
	const void *data;
	int ret = ngnfs_txn_read(txn, copy->blkno, &data);

	if (ret)
		return ret;
	memcpy(copy->data, data, NGNFS_BLOCK_SIZE);
	return 0;
}

/*
 * A coherent read through the probe's cache: it waits for a multi-device
 * set's participants to apply (READ_INCOHERENT would show a participant's
 * old half until then, which is what incoherent means).
 */
static void coherent_read(uint64_t blkno, uint8_t *data)
{
	struct copy_arg arg = { .blkno = blkno, .data = data };
	int ret = ngnfs_txn_run(env.probe_cache, copy_fn, &arg);

	CHECK(ret == 0, "expected a coherent read of block %llu to succeed, got %d",
	      (unsigned long long)blkno, ret);
}

/* What the servers hold: the total is conserved, every named block is intact. */
static void abba_verify(uint64_t creates, uint64_t unlinks)
{
	uint8_t data[NGNFS_BLOCK_SIZE];
	uint64_t total = 0, named = 0;
	int i, d;

	for (i = 0; i < ABBA_ACCOUNTS; i++) {
		uint64_t value;

		coherent_read(TEST_BLOCK(i % 2, 400 + i), data);
		memcpy(&value, data, sizeof(value));
		total += value;
	}
	CHECK(total == ABBA_ACCOUNTS * ABBA_INITIAL,
	      "expected the transfers to conserve the total %d, the servers hold %llu",
	      ABBA_ACCOUNTS * ABBA_INITIAL, (unsigned long long)total);
	for (d = 0; d < 2; d++) {
		uint64_t slots[ABBA_DIR_SLOTS];

		coherent_read(TEST_BLOCK(0, 500 + d), data);
		memcpy(slots, data, sizeof(slots));
		for (i = 0; i < (int)ABBA_DIR_SLOTS; i++) {
			uint64_t marker, parent;

			if (!slots[i])
				continue;
			named++;
			coherent_read(slots[i], data);
			memcpy(&marker, data, sizeof(marker));
			memcpy(&parent, data + 8, sizeof(parent));
			CHECK(marker == ABBA_MARKER && parent == TEST_BLOCK(0, 500 + d),
			      "expected created block %llu named in dir %d to hold its marker and "
			      "parent, got 0x%llx / %llu",
			      (unsigned long long)slots[i], d, (unsigned long long)marker,
			      (unsigned long long)parent);
		}
	}
	CHECK(named == creates - unlinks,
	      "expected %llu named blocks (%llu creates - %llu unlinks), the directories name "
	      "%llu",
	      (unsigned long long)(creates - unlinks), (unsigned long long)creates,
	      (unsigned long long)unlinks, (unsigned long long)named);
}

static void abba_report(const char *what, struct ngnfs_cache *cache, uint64_t start)
{
	struct ngnfs_cache_counters counters = counters_of(cache);

	printf("abba %s: %d threads x %d operations in %llu ms; retries %llu, revokes %llu, "
	       "writes %llu\n",
	       what, ABBA_THREADS, ABBA_ITERATIONS, (unsigned long long)(now_ms() - start),
	       (unsigned long long)counters.retries, (unsigned long long)counters.revokes,
	       (unsigned long long)counters.writes_sent);
}

/*
 * upgrade_contention_keeps_dirty_sets: two clients contend for the same
 * two blocks (one per device), every update reading them first (a READ
 * grant, as a getattr before a write) and then taking them for write (an
 * upgrade GET while the READ grant is still held).  The other client's
 * requests revoke that READ grant while the upgrade is queued, and the
 * answering RELEASE can reach the server after the upgrade was granted.
 * Stable mode (every set written at once, revocations meet it in flight)
 * and writeback mode with a long interval (a set leaves only on a
 * revocation, while its blocks are dirty).  Not one update may be lost:
 * every write-back must succeed (no set "lost" to a refused write) and
 * the servers end with exactly the number of increments made.
 */
#define UPGRADE_CLIENTS 2
#define UPGRADE_THREADS 2
#define UPGRADE_ROUNDS	300

struct upgrade_worker {
	struct ngnfs_cache *cache;
	uint64_t a, b;
	uint64_t done;
	int error;
	pthread_t thread;
};

struct upgrade_arg {
	uint64_t a, b;
};

/* Read both blocks, then take both for write and add one to each. */
static int upgrade_add_fn(struct ngnfs_txn *txn, void *arg)
{
	struct upgrade_arg *upgrade = arg;
	const void *ra, *rb;
	void *wa, *wb;
	uint64_t va, vb;
	int ret;

	ret = ngnfs_txn_read(txn, upgrade->a, &ra);
	if (ret)
		return ret;
	ret = ngnfs_txn_read(txn, upgrade->b, &rb);
	if (ret)
		return ret;
	memcpy(&va, ra, sizeof(va));
	memcpy(&vb, rb, sizeof(vb));
	ret = ngnfs_txn_write(txn, upgrade->a, &wa);
	if (ret)
		return ret;
	ret = ngnfs_txn_write(txn, upgrade->b, &wb);
	if (ret)
		return ret;
	va++;
	vb++;
	memcpy(wa, &va, sizeof(va));
	memcpy(wb, &vb, sizeof(vb));
	return 0;
}

static void *upgrade_main(void *arg)
{
	struct upgrade_worker *worker = arg;
	struct upgrade_arg upgrade = { .a = worker->a, .b = worker->b };
	struct get_arg read_a = { .blkno = worker->a };
	int i;

	for (i = 0; i < UPGRADE_ROUNDS && !worker->error; i++) {
		/* A read on its own first leaves a READ grant for the update to upgrade. */
		worker->error = ngnfs_txn_run(worker->cache, get_fn, &read_a);
		if (!worker->error)
			worker->error = ngnfs_txn_run(worker->cache, upgrade_add_fn, &upgrade);
		if (!worker->error)
			worker->done++;
	}
	return NULL;
}

static void upgrade_contention(enum ngnfs_durability durability, uint64_t a, uint64_t b)
{
	const char *mode = durability == NGNFS_DURABILITY_STABLE ? "stable" : "writeback";
	struct ngnfs_cache *caches[UPGRADE_CLIENTS];
	struct upgrade_worker workers[UPGRADE_CLIENTS * UPGRADE_THREADS];
	uint64_t total = 0, crossed = 0, revokes = 0, value;
	int c, w, ret;

	for (c = 0; c < UPGRADE_CLIENTS; c++)
		caches[c] = new_cache(durability, 60000, 0);
	for (w = 0; w < UPGRADE_CLIENTS * UPGRADE_THREADS; w++) {
		workers[w] =
		    (struct upgrade_worker){ .cache = caches[w % UPGRADE_CLIENTS], .a = a, .b = b };
		pthread_create(&workers[w].thread, NULL, upgrade_main, &workers[w]);
	}
	for (w = 0; w < UPGRADE_CLIENTS * UPGRADE_THREADS; w++) {
		pthread_join(workers[w].thread, NULL);
		CHECK(workers[w].error == 0,
		      "%s: expected every update of worker %d to succeed, round %llu failed with "
		      "%d",
		      mode, w, (unsigned long long)workers[w].done, workers[w].error);
		total += workers[w].done;
	}
	for (c = 0; c < UPGRADE_CLIENTS; c++) {
		struct ngnfs_cache_counters counters = counters_of(caches[c]);

		ret = ngnfs_cache_sync(caches[c]);
		CHECK(ret == 0, "%s: expected client %d's final sync to succeed, got %d", mode, c,
		      ret);
		ret = ngnfs_cache_take_error(caches[c]);
		CHECK(ret == 0,
		      "%s: expected no write-back of client %d to have failed (a lost dirty set), "
		      "got %d",
		      mode, c, ret);
		crossed += counters.crossed_grants;
		revokes += counters.revokes;
	}
	/* Coherent reads: the participant applies a committed set after the primary. */
	value = get(env.probe_cache, a);
	CHECK(value == total, "%s: expected block a to hold %llu increments, the server has %llu",
	      mode, (unsigned long long)total, (unsigned long long)value);
	value = get(env.probe_cache, b);
	CHECK(value == total, "%s: expected block b to hold %llu increments, the server has %llu",
	      mode, (unsigned long long)total, (unsigned long long)value);
	CHECK(revokes > 0, "%s: expected the clients to revoke each other, counted none", mode);
	printf("upgrade contention, %s: %llu updates, %llu revocations, %llu crossed grants "
	       "given up again\n",
	       mode, (unsigned long long)total, (unsigned long long)revokes,
	       (unsigned long long)crossed);
	for (c = 0; c < UPGRADE_CLIENTS; c++)
		ngnfs_cache_destroy(caches[c]);
}

static int test_upgrade_contention_keeps_dirty_sets(void)
{
	upgrade_contention(NGNFS_DURABILITY_STABLE, TEST_BLOCK(0, 40), TEST_BLOCK(1, 40));
	upgrade_contention(NGNFS_DURABILITY_WRITEBACK, TEST_BLOCK(0, 41), TEST_BLOCK(1, 41));
	return 0;
}

static int test_abba_transfers_conserve_total(void)
{
	struct ngnfs_cache *caches[2];
	struct abba_client runs[2];
	uint64_t start;

	/* One client stable, one writeback: both paths meet on the same blocks. */
	caches[0] = new_cache(NGNFS_DURABILITY_STABLE, 0, 0);
	caches[1] = new_cache(NGNFS_DURABILITY_WRITEBACK, 50, 0);
	abba_init(caches[0]);
	start = now_ms();
	abba_start(&runs[0], caches[0], 0);
	abba_start(&runs[1], caches[1], 1);
	abba_join(&runs[0]);
	abba_join(&runs[1]);
	CHECK(ngnfs_cache_sync(caches[1]) == 0, "expected the writeback client's sync to succeed");
	abba_report("stable client", caches[0], start);
	abba_report("writeback client", caches[1], start);
	ngnfs_cache_destroy(caches[0]);
	ngnfs_cache_destroy(caches[1]);
	abba_verify(runs[0].creates + runs[1].creates, runs[0].unlinks + runs[1].unlinks);
	return 0;
}

/* The second client of the two-process test: test_cache --abba-worker ADDRESS... */
static int abba_worker(void)
{
	struct ngnfs_cache *cache = new_cache(NGNFS_DURABILITY_WRITEBACK, 50, 0);
	struct abba_client run;
	uint64_t start = now_ms();

	abba_start(&run, cache, 1);
	abba_join(&run);
	CHECK(ngnfs_cache_sync(cache) == 0, "expected the worker's sync to succeed");
	abba_report("worker process", cache, start);
	ngnfs_cache_destroy(cache);
	printf("abba-worker: creates %llu unlinks %llu\n", (unsigned long long)run.creates,
	       (unsigned long long)run.unlinks);
	return 0;
}

/*
 * The cache's reclaim timeout is also how long its client sends an
 * unanswered multi-device COMMIT again: giving that up earlier would drop
 * a set whose devices may still be restarting.
 */
static int test_reclaim_timeout_sets_commit_retry(void)
{
	struct ngnfs_cache_config cache_config = { .reclaim_timeout_ms = 4321 };
	struct ngnfs_client_config config;
	struct ngnfs_cache *cache;
	uint32_t retry_ms;
	int ret;

	client_config(&config);
	ret = ngnfs_cache_create_with_client(&config, &cache_config, &cache);
	CHECK(ret == 0, "expected a cache to start, got %d", ret);
	retry_ms = ngnfs_client_commit_retry_ms(ngnfs_cache_client(cache));
	CHECK(retry_ms == 4321,
	      "expected the client to retry a COMMIT for the 4321 ms reclaim timeout, it says %u",
	      retry_ms);
	ngnfs_cache_destroy(cache);

	cache = new_cache(NGNFS_DURABILITY_STABLE, 0, 0);
	retry_ms = ngnfs_client_commit_retry_ms(ngnfs_cache_client(cache));
	CHECK(retry_ms == 30000,
	      "expected the default reclaim timeout (30000 ms) as the COMMIT retry, not the "
	      "20000 ms request timeout; the client says %u",
	      retry_ms);
	ngnfs_cache_destroy(cache);
	return 0;
}

struct alloc_arg {
	uint16_t device;
	uint64_t blkno;
};

static int alloc_fn(struct ngnfs_txn *txn, void *arg)
{
	struct alloc_arg *alloc = arg;
	uint64_t version;
	void *data;
	int ret = ngnfs_txn_alloc(txn, alloc->device, &alloc->blkno, &version, &data);

	if (ret)
		return ret;
	memset(data, 0, NGNFS_BLOCK_SIZE);
	return 0;
}

#ifdef NGNFS_CACHE_TEST_REAL
/*
 * A blockd restart empties its grant table: the dirty block is re-granted
 * at its base version during the grace period and then written.
 */
static int test_restart_reclaims_dirty(void)
{
	struct ngnfs_cache *cache = new_cache(NGNFS_DURABILITY_WRITEBACK, 60000, 0);
	uint64_t a = TEST_BLOCK(0, 7);
	uint8_t data[NGNFS_BLOCK_SIZE];
	uint64_t value = 0, version = 0, deadline;
	int ret;

	put(cache, a, 4321);
	CHECK(counters_of(cache).writes_sent == 0,
	      "expected block a to stay dirty in memory before the restart");
	ret = ngnfs_test_cluster_kill(env.cluster, 0, SIGKILL);
	CHECK(ret == 0, "expected blockd of device 0 to die, got %d", ret);
	ret = ngnfs_test_cluster_restart(env.cluster, 0);
	CHECK(ret == 0, "expected blockd of device 0 to restart, got %d", ret);
	ret = ngnfs_cache_sync(cache);
	CHECK(ret == 0,
	      "expected the dirty block to be reclaimed and written after the restart, "
	      "sync said %d",
	      ret);
	CHECK(ngnfs_cache_take_error(cache) == 0, "expected no recorded write error");
	/* The probe's own session comes back in its own time. */
	deadline = now_ms() + 10000;
	do {
		ret = ngnfs_client_read_incoherent_sync(env.probe, a, &version, data);
		if (ret)
			usleep(50 * 1000);
	} while (ret && now_ms() < deadline);
	CHECK(ret == 0, "expected READ_INCOHERENT of block a after the restart, got %d", ret);
	memcpy(&value, data, sizeof(value));
	CHECK(value == 4321, "expected block a = 4321 on the restarted server, got %llu",
	      (unsigned long long)value);
	ngnfs_cache_destroy(cache);
	return 0;
}

/*
 * A device whose blockd went away: an operation that needs it hears
 * -EAGAIN (try again: the gateway's NFS4ERR_DELAY) while the session has
 * been lost for less than the reclaim timeout, and -ENOTCONN after that,
 * in bounded time; once the device is back the same read succeeds.  An
 * allocation meant for it needs no particular device (placement is a
 * preference) and gets a block of the other device at once, before and
 * after the timeout.
 */
static int test_device_away_is_try_again(void)
{
	enum { RECLAIM_MS = 1500 };
	struct ngnfs_cache_config cache_config = {
		.durability = NGNFS_DURABILITY_WRITEBACK,
		.writeback_interval_ms = 60000,
		.reclaim_timeout_ms = RECLAIM_MS,
		.alloc_batch = 16,
	};
	struct ngnfs_client_config config;
	struct ngnfs_cache *cache;
	struct ngnfs_client *client;
	uint64_t b = TEST_BLOCK(1, 3);
	struct get_arg read_b = { .blkno = b };
	struct alloc_arg alloc = { .device = 1 };
	uint64_t lost_at, started, deadline;
	int ret;

	client_config(&config);
	ret = ngnfs_cache_create_with_client(&config, &cache_config, &cache);
	CHECK(ret == 0, "expected a cache to start, got %d", ret);
	client = ngnfs_cache_client(cache);
	put(cache, b, 77);
	CHECK(ngnfs_cache_sync(cache) == 0, "expected block b to be written");
	CHECK(ngnfs_client_unreachable_ms(client, 1) == 0,
	      "expected device 1 reachable before the kill, client says away for %llu ms",
	      (unsigned long long)ngnfs_client_unreachable_ms(client, 1));

	ret = ngnfs_test_cluster_kill(env.cluster, 1, SIGKILL);
	CHECK(ret == 0, "expected blockd of device 1 to die, got %d", ret);
	deadline = now_ms() + 5000;
	while (!ngnfs_client_unreachable_ms(client, 1) && now_ms() < deadline)
		usleep(5000);
	CHECK(ngnfs_client_unreachable_ms(client, 1) > 0,
	      "expected the client to see device 1 away within 5 s of the kill");
	lost_at = now_ms() - ngnfs_client_unreachable_ms(client, 1);

	/*
	 * The client marks the device away before the cache hears of the
	 * reset; until then the cached grant still serves the read.
	 */
	started = now_ms();
	do
		ret = ngnfs_txn_run(cache, get_fn, &read_b);
	while (ret == 0 && now_ms() - started < 1000);
	CHECK(ret == -EAGAIN, "expected -EAGAIN reading block b just after the kill, got %d", ret);
	ret = ngnfs_txn_run(cache, alloc_fn, &alloc);
	CHECK(ret == 0 && ngnfs_blkno_device(alloc.blkno) == 0,
	      "expected a block of device 0 allocating for device 1 just after the kill, got %d "
	      "and block %#llx",
	      ret, (unsigned long long)alloc.blkno);
	CHECK(now_ms() - started < RECLAIM_MS, "expected both answers at once, they took %llu ms",
	      (unsigned long long)(now_ms() - started));

	while (now_ms() < lost_at + RECLAIM_MS + 100)
		usleep(10000);
	ret = ngnfs_txn_run(cache, get_fn, &read_b);
	CHECK(ret == -ENOTCONN,
	      "expected -ENOTCONN reading block b once device 1 was away for %u ms, got %d",
	      RECLAIM_MS, ret);
	alloc.blkno = 0;
	ret = ngnfs_txn_run(cache, alloc_fn, &alloc);
	CHECK(ret == 0 && ngnfs_blkno_device(alloc.blkno) == 0,
	      "expected a block of device 0 allocating for device 1 once it was away for %u ms, "
	      "got %d and block %#llx",
	      RECLAIM_MS, ret, (unsigned long long)alloc.blkno);

	ret = ngnfs_test_cluster_restart(env.cluster, 1);
	CHECK(ret == 0, "expected blockd of device 1 to restart, got %d", ret);
	deadline = now_ms() + 15000;
	do {
		ret = ngnfs_txn_run(cache, get_fn, &read_b);
		if (ret)
			usleep(50 * 1000);
	} while (ret && now_ms() < deadline);
	CHECK(ret == 0 && read_b.value == 77,
	      "expected block b to read 77 once device 1 is back, got %d and %llu", ret,
	      (unsigned long long)read_b.value);
	CHECK(ngnfs_client_unreachable_ms(client, 1) == 0,
	      "expected device 1 reachable again, client says away for %llu ms",
	      (unsigned long long)ngnfs_client_unreachable_ms(client, 1));
	ngnfs_cache_destroy(cache);
	return 0;
}

/* The same with the second client in its own process, as two gateways would be. */
static int test_abba_two_processes(void)
{
	const char *const *addresses = ngnfs_test_cluster_addresses(env.cluster);
	struct ngnfs_cache *cache = new_cache(NGNFS_DURABILITY_STABLE, 0, 0);
	unsigned long long creates = 0, unlinks = 0;
	char self[4096], output[4096], status_text[128];
	const char *argv[8];
	struct abba_client run;
	int wait_status, ret;
	ssize_t length;
	uint64_t start;
	char *text, *line;
	pid_t pid;

	length = readlink("/proc/self/exe", self, sizeof(self) - 1);
	CHECK(length > 0, "expected to find this program's path, got %zd", length);
	self[length] = '\0';
	snprintf(output, sizeof(output), "%s/abba-worker.out", ngnfs_test_cluster_dir(env.cluster));
	argv[0] = self;
	argv[1] = "--abba-worker";
	argv[2] = addresses[0];
	argv[3] = addresses[1];
	argv[4] = NULL;
	abba_init(cache);
	start = now_ms();
	ret = ngnfs_test_spawn(argv, output, &pid);
	CHECK(ret == 0, "expected the worker process to start, got %d", ret);
	abba_start(&run, cache, 0);
	abba_join(&run);
	ret = ngnfs_test_wait(pid, 100000, &wait_status);
	CHECK(ret == 0, "expected the worker process to finish within 100 s, got %d", ret);
	text = ngnfs_test_read_file(output, NULL);
	CHECK(WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 0,
	      "expected the worker process to succeed, it ended with %s; its output:\n%s",
	      ngnfs_test_describe_status(wait_status, status_text, sizeof(status_text)),
	      text ? text : "(none)");
	line = text ? strstr(text, "abba-worker: ") : NULL;
	CHECK(line &&
		  sscanf(line, "abba-worker: creates %llu unlinks %llu", &creates, &unlinks) == 2,
	      "expected the worker's counts in its output, got:\n%s", text ? text : "(none)");
	fputs(text, stdout);
	free(text);
	abba_report("stable client", cache, start);
	ngnfs_cache_destroy(cache);
	abba_verify(run.creates + creates, run.unlinks + unlinks);
	return 0;
}
#endif

#ifndef NGNFS_CACHE_TEST_REAL
/* ---- session reset (fake server only) ---- */

/*
 * An ALLOC answered by a session that ended while the reply was handled
 * reserved nothing any more: the cache must not hand out its blocks (a
 * stable create in one of them would be refused by the server and lost).
 * The allocation goes to an ALLOC on the new session and its write
 * commits.
 */
static int test_refill_across_reset_is_void(void)
{
	struct ngnfs_cache *cache = new_cache(NGNFS_DURABILITY_STABLE, 0, 0);
	struct alloc_arg alloc = { .device = 0 };
	int ret;

	fake_client_reset_during_next_alloc(ngnfs_cache_client(cache), 0);
	ret = ngnfs_txn_run(cache, alloc_fn, &alloc);
	CHECK(ret == 0 && alloc.blkno != 0,
	      "expected a stable allocation to commit after a session reset during its ALLOC, "
	      "got %d",
	      ret);
	ngnfs_cache_destroy(cache);
	return 0;
}

static int test_session_reset_regrants_dirty(void)
{
	struct ngnfs_cache *cache = new_cache(NGNFS_DURABILITY_WRITEBACK, 60000, 0);
	uint64_t a = TEST_BLOCK(0, 1), b = TEST_BLOCK(0, 2);
	uint8_t other[NGNFS_BLOCK_SIZE] = { 0 };
	uint64_t value, deadline;
	int ret;

	/* Unchanged on the server: the dirty copy is re-granted and written. */
	put(cache, a, 1234);
	fake_client_reset_session(ngnfs_cache_client(cache), 0);
	ret = ngnfs_cache_sync(cache);
	CHECK(ret == 0, "expected the re-granted dirty block to be written, sync said %d", ret);
	value = server_value(a);
	CHECK(value == 1234, "expected block a = 1234 after the reset and sync, server has %llu",
	      (unsigned long long)value);
	CHECK(ngnfs_cache_take_error(cache) == 0, "expected no recorded error after the reset");

	/* A clean copy is kept across the reset and revalidated without data. */
	{
		struct ngnfs_cache_counters before, after;

		value = get(cache, a);
		before = counters_of(cache);
		fake_client_reset_session(ngnfs_cache_client(cache), 0);
		value = get(cache, a);
		after = counters_of(cache);
		CHECK(value == 1234, "expected block a to still read 1234, got %llu",
		      (unsigned long long)value);
		CHECK(after.revalidated == before.revalidated + 1 &&
			  after.misses == before.misses + 1,
		      "expected one GET answered 'unchanged' for the kept clean copy, got %llu "
		      "GETs and %llu revalidations",
		      (unsigned long long)(after.misses - before.misses),
		      (unsigned long long)(after.revalidated - before.revalidated));
	}

	/* Changed underneath: the dirty copy is lost and the error recorded. */
	put(cache, b, 5678);
	value = 999;
	memcpy(other, &value, sizeof(value));
	fake_server_poke(b, other);
	fake_client_reset_session(ngnfs_cache_client(cache), 0);
	deadline = now_ms() + 5000;
	while ((ret = ngnfs_cache_take_error(cache)) == 0 && now_ms() < deadline)
		usleep(5000);
	CHECK(ret == -ESTALE, "expected -ESTALE recorded for the lost dirty block b, got %d", ret);
	value = get(cache, b);
	CHECK(value == 999, "expected the cache to read the server's 999 from b, got %llu",
	      (unsigned long long)value);
	ngnfs_cache_destroy(cache);
	return 0;
}

/* A write the server refuses: writeback records it, stable returns it. */
static int test_write_failure_reported(void)
{
	struct ngnfs_cache *writeback = new_cache(NGNFS_DURABILITY_WRITEBACK, 60000, 0);
	struct ngnfs_cache *stable = new_cache(NGNFS_DURABILITY_STABLE, 0, 0);
	uint64_t a = TEST_BLOCK(0, 1), b = TEST_BLOCK(1, 1);
	uint8_t other[NGNFS_BLOCK_SIZE] = { 0 };
	struct put_arg arg = { .blknos = { b }, .values = { 2 }, .count = 1 };
	uint64_t value;
	int ret;

	put(writeback, a, 1);
	CHECK(ngnfs_cache_sync(writeback) == 0, "expected the first sync to succeed");
	put(writeback, a, 2);
	/* Someone else's write moves the version under the dirty copy. */
	fake_server_poke(a, other);
	ret = ngnfs_cache_sync(writeback);
	CHECK(ret == -ESTALE, "expected sync to report the refused write (-ESTALE), got %d", ret);
	ret = ngnfs_cache_take_error(writeback);
	CHECK(ret == -ESTALE, "expected take_error to report -ESTALE once, got %d", ret);
	ret = ngnfs_cache_take_error(writeback);
	CHECK(ret == 0, "expected take_error to be cleared after reporting, got %d", ret);
	value = get(writeback, a);
	CHECK(value == 0,
	      "expected the cache to drop the refused data and read the server's 0, "
	      "got %llu",
	      (unsigned long long)value);

	put(stable, b, 1);
	fake_server_poke(b, other);
	ret = ngnfs_txn_run(stable, put_fn, &arg);
	CHECK(ret == -ESTALE, "expected the stable transaction to return the refused write, got %d",
	      ret);
	ngnfs_cache_destroy(stable);
	ngnfs_cache_destroy(writeback);
	return 0;
}
#endif

#ifndef NGNFS_CACHE_TEST_REAL
/* ---- copy on write of blocks whose set is being written (fake server only) ---- */

/* Read from, write what it holds into to: a change derived from a block only read. */
struct derive_arg {
	uint64_t from;
	uint64_t to;
	uint64_t copied;
};

static int derive_fn(struct ngnfs_txn *txn, void *arg)
{
	struct derive_arg *copy = arg;
	const void *from;
	void *to;
	int ret = ngnfs_txn_read(txn, copy->from, &from);

	if (ret)
		return ret;
	memcpy(&copy->copied, from, sizeof(uint64_t));
	ret = ngnfs_txn_write(txn, copy->to, &to);
	if (ret)
		return ret;
	memcpy(to, &copy->copied, sizeof(uint64_t));
	return 0;
}

/* A background call: sync, a put, a get or a copy (BG_COPY: value is the target), with its result.
 */
struct bg_call {
	struct ngnfs_cache *cache;
	uint64_t blkno;
	uint64_t value;
	enum { BG_SYNC, BG_PUT, BG_GET, BG_COPY } what;
	pthread_t thread;
	pthread_mutex_t lock;
	bool done;
	int ret;
};

static void *bg_main(void *arg)
{
	struct bg_call *call = arg;
	int ret;

	if (call->what == BG_SYNC) {
		ret = ngnfs_cache_sync(call->cache);
	} else if (call->what == BG_COPY) {
		struct derive_arg copy = { .from = call->blkno, .to = call->value };

		ret = ngnfs_txn_run(call->cache, derive_fn, &copy);
		call->value = copy.copied;
	} else if (call->what == BG_GET) {
		struct get_arg get = { .blkno = call->blkno };

		ret = ngnfs_txn_run(call->cache, get_fn, &get);
		call->value = get.value;
	} else {
		struct put_arg put = { .blknos = { call->blkno },
				       .values = { call->value },
				       .count = 1 };

		ret = ngnfs_txn_run(call->cache, put_fn, &put);
	}
	pthread_mutex_lock(&call->lock);
	call->ret = ret;
	call->done = true;
	pthread_mutex_unlock(&call->lock);
	return NULL;
}

static void bg_start(struct bg_call *call, struct ngnfs_cache *cache, int what, uint64_t blkno,
		     uint64_t value)
{
	memset(call, 0, sizeof(*call));
	call->cache = cache;
	call->what = what;
	call->blkno = blkno;
	call->value = value;
	pthread_mutex_init(&call->lock, NULL);
	CHECK(pthread_create(&call->thread, NULL, bg_main, call) == 0,
	      "expected a background thread to start");
}

static bool bg_done(struct bg_call *call)
{
	bool done;

	pthread_mutex_lock(&call->lock);
	done = call->done;
	pthread_mutex_unlock(&call->lock);
	return done;
}

static int bg_join(struct bg_call *call)
{
	pthread_join(call->thread, NULL);
	pthread_mutex_destroy(&call->lock);
	return call->ret;
}

/* Wait (bounded) until the fake server holds this many writes. */
static void wait_held(unsigned int count, const char *what)
{
	uint64_t deadline = now_ms() + 5000;

	while (fake_server_held_writes() != count && now_ms() < deadline)
		usleep(1000);
	CHECK(fake_server_held_writes() == count,
	      "expected %u held write(s) %s, the server holds %u", count, what,
	      fake_server_held_writes());
}

/* Hold the server's writes, start a background call and wait until its write is held. */
static void start_held(struct bg_call *call, struct ngnfs_cache *cache, int what, uint64_t blkno,
		       uint64_t value, const char *held_what)
{
	fake_server_hold_writes(true);
	bg_start(call, cache, what, blkno, value);
	wait_held(1, held_what);
}

/* The cache's session breaks with its write held, which then fails unapplied. */
static void reset_under_held_write(struct ngnfs_cache *cache)
{
	fake_client_reset_session(ngnfs_cache_client(cache), 0);
	fake_server_hold_writes(false);
	fake_server_release_writes(-ENOTCONN);
}

/*
 * Each device has its own writes in flight: a stable commit on device 1 is
 * sent while device 0's write is still in flight (a slow disk behind one
 * device holds back only that device); a second commit on device 0 is
 * sent beside its first (blockd takes it into its next group commit,
 * docs/blockd.md), while commits beyond two wait for one of them to
 * complete and then share one write (group commit in the client).
 */
static int test_devices_write_independently(void)
{
	struct ngnfs_cache *stable = new_cache(NGNFS_DURABILITY_STABLE, 0, 0);
	uint64_t a = TEST_BLOCK(0, 11), b = TEST_BLOCK(1, 12);
	uint64_t c = TEST_BLOCK(0, 13), d = TEST_BLOCK(0, 14), e = TEST_BLOCK(0, 15);
	struct bg_call first, other, second, third, fourth;
	uint64_t writes;
	int ret;

	put(stable, a, 1);
	put(stable, b, 1);
	put(stable, c, 1);
	put(stable, d, 1);
	put(stable, e, 1);
	start_held(&first, stable, BG_PUT, a, 2, "for the stable write of a on device 0");
	bg_start(&other, stable, BG_PUT, b, 2);
	wait_held(2, "for the write of b on device 1 while device 0's write is in flight");
	bg_start(&second, stable, BG_PUT, c, 2);
	wait_held(3, "for the write of c beside device 0's first write in flight");
	bg_start(&third, stable, BG_PUT, d, 2);
	bg_start(&fourth, stable, BG_PUT, e, 2);
	usleep(200 * 1000);
	CHECK(fake_server_held_writes() == 3 && !bg_done(&third) && !bg_done(&fourth),
	      "expected d and e (device 0) to wait for device 0's two writes in flight, the "
	      "server holds %u writes",
	      fake_server_held_writes());
	writes = fake_server_writes();
	fake_server_release_writes(0);
	ret = bg_join(&first);
	CHECK(ret == 0, "expected the stable write of a to succeed, got %d", ret);
	ret = bg_join(&other);
	CHECK(ret == 0, "expected the stable write of b to succeed, got %d", ret);
	ret = bg_join(&second);
	CHECK(ret == 0, "expected the stable write of c to succeed, got %d", ret);
	wait_held(1, "for one write carrying both d and e");
	CHECK(!bg_done(&third) && !bg_done(&fourth),
	      "expected the writers of d and e to wait for their write");
	fake_server_release_writes(0);
	ret = bg_join(&third);
	CHECK(ret == 0, "expected the stable write of d to succeed, got %d", ret);
	ret = bg_join(&fourth);
	CHECK(ret == 0, "expected the stable write of e to succeed, got %d", ret);
	CHECK(server_value(a) == 2 && server_value(b) == 2 && server_value(c) == 2 &&
		  server_value(d) == 2 && server_value(e) == 2,
	      "expected a, b, c, d and e = 2 on the servers, got %llu, %llu, %llu, %llu, %llu",
	      (unsigned long long)server_value(a), (unsigned long long)server_value(b),
	      (unsigned long long)server_value(c), (unsigned long long)server_value(d),
	      (unsigned long long)server_value(e));
	CHECK(fake_server_writes() - writes == 4,
	      "expected four writes (a, b, c, then d with e), the server applied %llu",
	      (unsigned long long)(fake_server_writes() - writes));
	fake_server_hold_writes(false);
	ngnfs_cache_destroy(stable);
	return 0;
}

/*
 * A change to a block whose set is being written does not wait for the
 * write; the write in flight carries the old bytes, the newer set the new
 * ones, and the newer set is only sent once the first completed (based on
 * the version it produced: the fake server refuses a stale base).
 */
static int test_cow_write_during_writeback(void)
{
	struct ngnfs_cache *cache = new_cache(NGNFS_DURABILITY_WRITEBACK, 60000, 0);
	struct ngnfs_cache *stable = new_cache(NGNFS_DURABILITY_STABLE, 0, 0);
	uint64_t a = TEST_BLOCK(0, 1), b = TEST_BLOCK(0, 2), c = TEST_BLOCK(0, 3);
	struct ngnfs_cache_counters before, after;
	uint8_t data[NGNFS_BLOCK_SIZE];
	struct bg_call sync, first, second;
	uint64_t version, start;
	int ret;

	put2(cache, a, 1, b, 1);
	start_held(&sync, cache, BG_SYNC, 0, 0, "for the sync of {a=1, b=1}");

	before = counters_of(cache);
	start = now_ms();
	put(cache, a, 2);
	after = counters_of(cache);
	CHECK(after.retries == before.retries,
	      "expected writing a during its write-back not to wait, it was retried %llu times",
	      (unsigned long long)(after.retries - before.retries));
	CHECK(now_ms() - start < 1000,
	      "expected writing a during its write-back to return at once");
	CHECK(get(cache, a) == 2, "expected the cache to read the newest a = 2");
	usleep(200 * 1000);
	CHECK(fake_server_held_writes() == 1 && !bg_done(&sync),
	      "expected the newer set to wait for the write in flight (held %u, sync done %d)",
	      fake_server_held_writes(), bg_done(&sync));

	/* The held write reads its block data only now: the frozen bytes. */
	fake_server_release_writes(0);
	ret = bg_join(&sync);
	CHECK(ret == 0, "expected the sync of the first set to succeed, got %d", ret);
	CHECK(server_value(a) == 1 && server_value(b) == 1,
	      "expected the first write to carry a = 1, b = 1, the server has a = %llu, b = %llu",
	      (unsigned long long)server_value(a), (unsigned long long)server_value(b));
	version = server_read(a, data);

	bg_start(&sync, cache, BG_SYNC, 0, 0);
	wait_held(1, "for the sync of the newer set {a=2}");
	CHECK(server_value(a) == 1,
	      "expected a = 1 on the server until the newer write is applied");
	fake_server_release_writes(0);
	ret = bg_join(&sync);
	CHECK(ret == 0, "expected the newer set's write (based on version %llu) to succeed, got %d",
	      (unsigned long long)version, ret);
	CHECK(server_value(a) == 2 && server_read(a, data) == version + 1,
	      "expected a = 2 at version %llu after the newer write, the server has %llu at %llu",
	      (unsigned long long)(version + 1), (unsigned long long)server_value(a),
	      (unsigned long long)server_read(a, data));
	CHECK(ngnfs_cache_take_error(cache) == 0, "expected no write error recorded");

	/* Stable: the second writer waits for its own (newer) set, not the first. */
	fake_server_hold_writes(false);
	put(stable, c, 1);
	start_held(&first, stable, BG_PUT, c, 2, "for the stable write of c = 2");
	before = counters_of(stable);
	bg_start(&second, stable, BG_PUT, c, 3);
	usleep(200 * 1000);
	after = counters_of(stable);
	CHECK(!bg_done(&first) && !bg_done(&second) && after.retries == before.retries,
	      "expected both stable writers waiting for durability, the second without a retry");
	fake_server_release_writes(0);
	ret = bg_join(&first);
	CHECK(ret == 0, "expected the first stable write to succeed, got %d", ret);
	CHECK(server_value(c) == 2, "expected the first stable write to carry c = 2, got %llu",
	      (unsigned long long)server_value(c));
	wait_held(1, "for the second stable write");
	CHECK(!bg_done(&second), "expected the second stable writer to wait for its own set");
	fake_server_release_writes(0);
	ret = bg_join(&second);
	CHECK(ret == 0 && server_value(c) == 3,
	      "expected the second stable write to return 0 with c = 3, got %d and %llu", ret,
	      (unsigned long long)server_value(c));
	fake_server_hold_writes(false);
	ngnfs_cache_destroy(stable);
	ngnfs_cache_destroy(cache);
	return 0;
}

/*
 * A revocation while a block's frozen write is in flight and a newer
 * change waits: both are written, in order, and only then is the grant
 * given up.
 */
static int test_cow_revoke_writes_both_in_order(void)
{
	struct ngnfs_cache *cache = new_cache(NGNFS_DURABILITY_WRITEBACK, 60000, 0);
	struct ngnfs_cache *other = new_cache(NGNFS_DURABILITY_WRITEBACK, 60000, 0);
	uint64_t a = TEST_BLOCK(0, 1);
	struct bg_call sync, read;
	int ret;

	put(cache, a, 1);
	start_held(&sync, cache, BG_SYNC, 0, 0, "for the sync of a = 1");
	put(cache, a, 2);

	/* The other client's read revokes our write grant on a. */
	bg_start(&read, other, BG_GET, a, 0);
	usleep(200 * 1000);
	CHECK(!bg_done(&read) && fake_server_held_writes() == 1,
	      "expected the other client's read to wait while the first write is held");
	fake_server_release_writes(0);
	ret = bg_join(&sync);
	CHECK(ret == 0, "expected the first write to succeed, got %d", ret);
	wait_held(1, "for the newer set, written because of the revocation");
	CHECK(server_value(a) == 1,
	      "expected the first write's a = 1 before the newer one, got %llu",
	      (unsigned long long)server_value(a));
	usleep(100 * 1000);
	CHECK(!bg_done(&read), "expected the grant to be kept until the newer set is written");
	fake_server_release_writes(0);
	ret = bg_join(&read);
	CHECK(ret == 0 && read.value == 2,
	      "expected the other client to read a = 2 after both writes, got %d and %llu", ret,
	      (unsigned long long)read.value);
	CHECK(server_value(a) == 2, "expected a = 2 on the server, got %llu",
	      (unsigned long long)server_value(a));
	fake_server_hold_writes(false);
	CHECK(ngnfs_cache_take_error(cache) == 0, "expected no write error recorded");
	CHECK(get(cache, a) == 2, "expected the first client to still read a = 2");
	ngnfs_cache_destroy(other);
	ngnfs_cache_destroy(cache);
	return 0;
}

/*
 * The frozen write fails: the newer set was made on top of it and is
 * dropped with it (never written), its stable waiter gets the error, and
 * the cache reads the server's contents again.
 */
static int test_cow_first_write_fails(void)
{
	struct ngnfs_cache *cache = new_cache(NGNFS_DURABILITY_WRITEBACK, 60000, 0);
	struct ngnfs_cache *stable = new_cache(NGNFS_DURABILITY_STABLE, 0, 0);
	uint64_t a = TEST_BLOCK(0, 1), b = TEST_BLOCK(0, 2), c = TEST_BLOCK(0, 3);
	struct bg_call sync, first, second;
	int ret;

	put2(cache, a, 1, b, 1);
	CHECK(ngnfs_cache_sync(cache) == 0, "expected the first sync to succeed");
	put2(cache, a, 2, b, 2);
	start_held(&sync, cache, BG_SYNC, 0, 0, "for the sync of {a=2, b=2}");
	put(cache, a, 3);
	fake_server_release_writes(-EIO);
	ret = bg_join(&sync);
	CHECK(ret == -EIO, "expected sync to report the failed write (-EIO), got %d", ret);
	usleep(100 * 1000);
	CHECK(fake_server_held_writes() == 0, "expected the newer set never to be written");
	ret = ngnfs_cache_sync(cache);
	CHECK(ret == 0, "expected nothing left to write, sync said %d", ret);
	CHECK(ngnfs_cache_take_error(cache) == -EIO, "expected -EIO recorded for take_error");
	CHECK(server_value(a) == 1 && server_value(b) == 1,
	      "expected the server to keep a = 1, b = 1, got %llu, %llu",
	      (unsigned long long)server_value(a), (unsigned long long)server_value(b));
	CHECK(get(cache, a) == 1 && get(cache, b) == 1,
	      "expected the cache to drop both sets and read the server's a = 1, b = 1");

	fake_server_hold_writes(false);
	put(stable, c, 1);
	start_held(&first, stable, BG_PUT, c, 2, "for the stable write of c = 2");
	bg_start(&second, stable, BG_PUT, c, 3);
	usleep(200 * 1000);
	CHECK(!bg_done(&second), "expected the second stable writer to wait for durability");
	fake_server_release_writes(-EIO);
	ret = bg_join(&first);
	CHECK(ret == -EIO, "expected the first stable writer to get -EIO, got %d", ret);
	ret = bg_join(&second);
	CHECK(ret == -EIO, "expected the writer of the dropped newer set to get -EIO, got %d", ret);
	CHECK(fake_server_held_writes() == 0 && server_value(c) == 1,
	      "expected nothing more written and c = 1 on the server, got %llu",
	      (unsigned long long)server_value(c));
	fake_server_hold_writes(false);
	CHECK(get(stable, c) == 1, "expected the stable cache to read c = 1 again");
	ngnfs_cache_destroy(stable);
	ngnfs_cache_destroy(cache);
	return 0;
}

/*
 * A transaction that only reads a block whose write is in flight, and
 * changes another, commits only once that write is known: when the write
 * fails, it runs again on the refetched block, so no set derived from the
 * lost contents reaches the server (here: b must never be 2 while a falls
 * back to 1).
 */
static int test_read_of_block_in_flight_waits(void)
{
	struct ngnfs_cache *cache = new_cache(NGNFS_DURABILITY_WRITEBACK, 60000, 0);
	uint64_t a = TEST_BLOCK(0, 1), b = TEST_BLOCK(0, 2);
	struct bg_call sync, copy;
	int ret;

	put2(cache, a, 1, b, 0);
	CHECK(ngnfs_cache_sync(cache) == 0, "expected the first sync to succeed");
	put(cache, a, 2);
	start_held(&sync, cache, BG_SYNC, 0, 0, "for the sync of a = 2");
	bg_start(&copy, cache, BG_COPY, a, b);
	usleep(200 * 1000);
	CHECK(!bg_done(&copy),
	      "expected the copy of a (being written) into b to wait for that write");
	fake_server_release_writes(-EIO);
	CHECK(bg_join(&sync) == -EIO, "expected the sync to report the failed write");
	ret = bg_join(&copy);
	CHECK(ret == 0 && copy.value == 1,
	      "expected the copy to run again on the refetched a = 1, got %d and a = %llu", ret,
	      (unsigned long long)copy.value);
	fake_server_hold_writes(false);
	CHECK(ngnfs_cache_sync(cache) == 0, "expected the copy's set to be written");
	CHECK(server_value(a) == 1 && server_value(b) == 1,
	      "expected a = 1, b = 1 on the server, got %llu, %llu",
	      (unsigned long long)server_value(a), (unsigned long long)server_value(b));
	ngnfs_cache_take_error(cache);
	ngnfs_cache_destroy(cache);
	return 0;
}

/*
 * {a, b} = 1 written, then {a, b} = 2 with its write held while device 0's
 * session breaks and the write fails unapplied (-ENOTCONN): the set must
 * be written again, its sync succeed and nothing be reported lost.
 */
static void check_resent_after_reset(struct ngnfs_cache *cache, uint64_t a, uint64_t b)
{
	struct bg_call sync;
	int ret;

	put2(cache, a, 1, b, 1);
	CHECK(ngnfs_cache_sync(cache) == 0, "expected the first sync to succeed");
	put2(cache, a, 2, b, 2);
	start_held(&sync, cache, BG_SYNC, 0, 0, "for the sync of {a=2, b=2}");
	reset_under_held_write(cache);
	ret = bg_join(&sync);
	CHECK(ret == 0, "expected the sync to succeed once the set was written again, got %d", ret);
	CHECK(server_value(a) == 2 && server_value(b) == 2,
	      "expected a = 2, b = 2 on the server, got %llu, %llu",
	      (unsigned long long)server_value(a), (unsigned long long)server_value(b));
	CHECK(ngnfs_cache_take_error(cache) == 0, "expected no write-back failure recorded");
}

/*
 * A single-device write in flight when its session breaks (-ENOTCONN,
 * never applied by the server) is not lost: its blocks are granted again
 * at their base versions and the set is written again, so the sync waiting
 * for it succeeds and the server gets the data; a stable writer waiting on
 * such a set gets success too.
 */
static int test_write_in_flight_at_reset_is_resent(void)
{
	struct ngnfs_cache *cache = new_cache(NGNFS_DURABILITY_WRITEBACK, 60000, 0);
	struct ngnfs_cache *stable = new_cache(NGNFS_DURABILITY_STABLE, 0, 0);
	uint64_t a = TEST_BLOCK(0, 1), b = TEST_BLOCK(0, 2), c = TEST_BLOCK(0, 3);
	struct bg_call writer;
	int ret;

	check_resent_after_reset(cache, a, b);

	put(stable, c, 1);
	start_held(&writer, stable, BG_PUT, c, 2, "for the stable write of c = 2");
	reset_under_held_write(stable);
	ret = bg_join(&writer);
	CHECK(ret == 0, "expected the stable writer to succeed after the resend, got %d", ret);
	CHECK(server_value(c) == 2, "expected c = 2 on the server, got %llu",
	      (unsigned long long)server_value(c));
	ngnfs_cache_destroy(stable);
	ngnfs_cache_destroy(cache);
	return 0;
}

/*
 * A multi-device set whose write fails with -ENOTCONN was never committed
 * (a STAGE failed as a session broke, so the client sent no COMMIT): it
 * is written again once the blocks of the broken session are granted
 * again, with nothing reported lost.
 */
static int test_multi_device_write_at_reset_is_resent(void)
{
	struct ngnfs_cache *cache = new_cache(NGNFS_DURABILITY_WRITEBACK, 60000, 0);
	uint64_t a = TEST_BLOCK(0, 1), b = TEST_BLOCK(1, 1);

	check_resent_after_reset(cache, a, b);
	ngnfs_cache_destroy(cache);
	return 0;
}

/*
 * A session reset while a multi-device set is in flight takes the grant
 * of a block that set carries, and the set still commits (every device
 * had staged it).  The cache must not go on as the block's writer: the
 * next change asks for the grant again instead of writing under one the
 * server no longer has (which it refuses, losing the change).
 */
static int test_grant_lost_under_committed_write(void)
{
	struct ngnfs_cache *cache = new_cache(NGNFS_DURABILITY_WRITEBACK, 60000, 0);
	uint64_t a = TEST_BLOCK(0, 1), b = TEST_BLOCK(1, 1);
	struct bg_call sync;
	int ret;

	put2(cache, a, 1, b, 1);
	start_held(&sync, cache, BG_SYNC, 0, 0, "for the sync of {a=1 on 0, b=1 on 1}");
	fake_client_reset_session(ngnfs_cache_client(cache), 1);
	fake_server_hold_writes(false);
	fake_server_release_writes_staged();
	ret = bg_join(&sync);
	CHECK(ret == 0, "expected the committed set's sync to succeed, got %d", ret);
	CHECK(server_value(a) == 1 && server_value(b) == 1,
	      "expected a = 1, b = 1 on the server, got %llu, %llu",
	      (unsigned long long)server_value(a), (unsigned long long)server_value(b));

	put(cache, b, 2);
	ret = ngnfs_cache_sync(cache);
	CHECK(ret == 0, "expected the next change of b to be written, got %d", ret);
	CHECK(server_value(b) == 2, "expected b = 2 on the server, got %llu",
	      (unsigned long long)server_value(b));
	CHECK(ngnfs_cache_take_error(cache) == 0, "expected no write-back failure recorded");
	ngnfs_cache_destroy(cache);
	return 0;
}

/*
 * A revocation whose invalidation the gateway delivers later (the
 * callback returned a ticket): the RELEASE, and so the other client's
 * write, waits until the gateway says the ticket is delivered; a ticket
 * never delivered holds it for NGNFS_CACHE_INVALIDATION_WAIT_MS only.
 */
static int test_release_waits_for_invalidation(void)
{
	struct ngnfs_cache *one = new_cache(NGNFS_DURABILITY_WRITEBACK, 60000, 0);
	struct ngnfs_cache *two = new_cache(NGNFS_DURABILITY_WRITEBACK, 60000, 0);
	struct invalidations inv = { .lock = PTHREAD_MUTEX_INITIALIZER, .ticket = 1 };
	uint64_t a = TEST_BLOCK(0, 7), start, elapsed;
	struct ngnfs_cache_counters counters;
	struct bg_call writer;
	int ret;

	ngnfs_cache_set_invalidate(one, record_invalidate, &inv);
	put(two, a, 1);
	CHECK(get(one, a) == 1, "expected the first client to read a = 1");
	bg_start(&writer, two, BG_PUT, a, 2);
	usleep(200 * 1000);
	CHECK(invalidated(&inv, a), "expected the revocation of a to invalidate it");
	CHECK(!bg_done(&writer),
	      "expected the second client's write to wait for the invalidation's delivery");
	start = now_ms();
	ngnfs_cache_invalidations_delivered(one, 1);
	ret = bg_join(&writer);
	elapsed = now_ms() - start;
	CHECK(ret == 0 && elapsed < 2000,
	      "expected the write to go on once the invalidation was delivered, got %d after "
	      "%llu ms",
	      ret, (unsigned long long)elapsed);
	counters = counters_of(one);
	CHECK(counters.releases_deferred == 1 && counters.deferred_release_timeouts == 0,
	      "expected one RELEASE held back and none timed out, got %llu and %llu",
	      (unsigned long long)counters.releases_deferred,
	      (unsigned long long)counters.deferred_release_timeouts);

	pthread_mutex_lock(&inv.lock);
	inv.ticket = 2;
	pthread_mutex_unlock(&inv.lock);
	CHECK(get(one, a) == 2, "expected the first client to read a = 2");
	start = now_ms();
	bg_start(&writer, two, BG_PUT, a, 3);
	ret = bg_join(&writer);
	elapsed = now_ms() - start;
	CHECK(ret == 0 && elapsed + 50 >= NGNFS_CACHE_INVALIDATION_WAIT_MS &&
		  elapsed < NGNFS_CACHE_INVALIDATION_WAIT_MS + 3000,
	      "expected an undelivered invalidation to hold the write for about %u ms, got %d "
	      "after %llu ms",
	      NGNFS_CACHE_INVALIDATION_WAIT_MS, ret, (unsigned long long)elapsed);
	counters = counters_of(one);
	CHECK(counters.deferred_release_timeouts == 1,
	      "expected the held-back RELEASE counted as timed out, got %llu",
	      (unsigned long long)counters.deferred_release_timeouts);
	CHECK(get(one, a) == 3, "expected the first client to read a = 3");
	ngnfs_cache_destroy(two);
	ngnfs_cache_destroy(one);
	return 0;
}

struct alloc_free_arg {
	uint64_t dir;
	uint64_t value;
	uint64_t victim; /* 0: allocate one (set here), else free it */
};

/* dir = value, and a block allocated on device 0 or victim freed. */
static int alloc_free_fn(struct ngnfs_txn *txn, void *arg)
{
	struct alloc_free_arg *change = arg;
	uint64_t blkno, version;
	void *data;
	int ret;

	ret = ngnfs_txn_write(txn, change->dir, &data);
	if (ret)
		return ret;
	memcpy(data, &change->value, sizeof(change->value));
	if (!change->victim) {
		ret = ngnfs_txn_alloc(txn, 0, &blkno, &version, &data);
		if (ret)
			return ret;
		memset(data, 0x5a, NGNFS_BLOCK_SIZE);
		change->victim = blkno;
		return 0;
	}
	ret = ngnfs_txn_write(txn, change->victim, &data);
	if (ret)
		return ret;
	return ngnfs_txn_free(txn, change->victim);
}

/*
 * A single-device write that blockd applied just before its session broke
 * (the reply lost: -ENOTCONN).  The regrant finds the versions moved but
 * the server holding the bytes the write sent, so the write counts as
 * applied: nothing is reported lost, and the set is written again on top
 * of it, with a newer change made while the write was in flight (copy on
 * write).  A free such a write carried is not sent again (the server
 * refuses to free a free block, which would lose the set).
 */
static int test_applied_write_at_reset_is_kept(void)
{
	struct ngnfs_cache *cache = new_cache(NGNFS_DURABILITY_WRITEBACK, 60000, 0);
	uint64_t a = TEST_BLOCK(0, 1), b = TEST_BLOCK(0, 2);
	struct alloc_free_arg change = { .dir = a, .value = 4 };
	struct ngnfs_cache_counters before, after;
	struct bg_call sync;
	int ret;

	put2(cache, a, 1, b, 1);
	CHECK(ngnfs_cache_sync(cache) == 0, "expected the first sync to succeed");
	before = counters_of(cache);
	put2(cache, a, 2, b, 2);
	start_held(&sync, cache, BG_SYNC, 0, 0, "for the sync of {a=2, b=2}");
	put(cache, a, 3);
	fake_client_reset_session(ngnfs_cache_client(cache), 0);
	fake_server_hold_writes(false);
	fake_server_release_writes_reply_lost(-ENOTCONN);
	ret = bg_join(&sync);
	CHECK(ret == 0, "expected the sync of the applied set to succeed, got %d", ret);
	CHECK(ngnfs_cache_sync(cache) == 0, "expected the newer change a = 3 to be written");
	CHECK(server_value(a) == 3 && server_value(b) == 2,
	      "expected a = 3, b = 2 on the server, got %llu, %llu",
	      (unsigned long long)server_value(a), (unsigned long long)server_value(b));
	after = counters_of(cache);
	CHECK(after.in_doubt_applied > before.in_doubt_applied,
	      "expected the cache to count the write in doubt as applied");
	CHECK(ngnfs_cache_take_error(cache) == 0, "expected no write-back failure recorded");

	ret = ngnfs_txn_run(cache, alloc_free_fn, &change);
	CHECK(ret == 0 && change.victim, "expected a = 4 and an allocation, got %d", ret);
	CHECK(ngnfs_cache_sync(cache) == 0, "expected the allocation to be written");
	CHECK(fake_server_free_count_of(change.victim) == 0, "expected block %llu allocated",
	      (unsigned long long)change.victim);
	change.value = 5;
	fake_server_hold_writes(true);
	ret = ngnfs_txn_run(cache, alloc_free_fn, &change);
	CHECK(ret == 0, "expected a = 5 and the free to commit, got %d", ret);
	bg_start(&sync, cache, BG_SYNC, 0, 0);
	wait_held(1, "for the sync of {a=5, free}");
	fake_client_reset_session(ngnfs_cache_client(cache), 0);
	fake_server_hold_writes(false);
	fake_server_release_writes_reply_lost(-ENOTCONN);
	ret = bg_join(&sync);
	CHECK(ret == 0, "expected the sync of the applied free to succeed, got %d", ret);
	CHECK(server_value(a) == 5, "expected a = 5 on the server, got %llu",
	      (unsigned long long)server_value(a));
	CHECK(fake_server_free_count_of(change.victim) == 1,
	      "expected block %llu freed exactly once, it is on the free list %u times",
	      (unsigned long long)change.victim, fake_server_free_count_of(change.victim));
	CHECK(ngnfs_cache_take_error(cache) == 0, "expected no write-back failure recorded");
	ngnfs_cache_destroy(cache);
	return 0;
}
#endif

struct test {
	const char *name;
	int (*fn)(void);
	bool fake_only;
};

static const struct test tests[] = {
	{ "eviction_bounds_memory", test_eviction_bounds_memory, false },
	{ "eviction_invalidates", test_eviction_invalidates, false },
	{ "pressure_writes_back_dirty", test_pressure_writes_back_dirty, false },
	{ "dirty_set_merging", test_dirty_set_merging, false },
	{ "retry_leaves_no_trace", test_retry_leaves_no_trace, false },
	{ "stable_group_commit", test_stable_group_commit, false },
	{ "writeback_flush_within_interval", test_writeback_flush_within_interval, false },
	{ "revocation_writes_back_before_release", test_revocation_writes_back_before_release,
	  false },
	{ "revocation_waits_for_local_lock", test_revocation_waits_for_local_lock, false },
	{ "abba_transfers_conserve_total", test_abba_transfers_conserve_total, false },
	{ "upgrade_contention_keeps_dirty_sets", test_upgrade_contention_keeps_dirty_sets, false },
	{ "reclaim_timeout_sets_commit_retry", test_reclaim_timeout_sets_commit_retry, false },
#ifdef NGNFS_CACHE_TEST_REAL
	{ "abba_two_processes", test_abba_two_processes, false },
	{ "restart_reclaims_dirty", test_restart_reclaims_dirty, false },
	{ "device_away_is_try_again", test_device_away_is_try_again, false },
#endif
#ifndef NGNFS_CACHE_TEST_REAL
	{ "session_reset_regrants_dirty", test_session_reset_regrants_dirty, true },
	{ "refill_across_reset_is_void", test_refill_across_reset_is_void, true },
	{ "write_failure_reported", test_write_failure_reported, true },
	{ "cow_write_during_writeback", test_cow_write_during_writeback, true },
	{ "devices_write_independently", test_devices_write_independently, true },
	{ "cow_revoke_writes_both_in_order", test_cow_revoke_writes_both_in_order, true },
	{ "cow_first_write_fails", test_cow_first_write_fails, true },
	{ "read_of_block_in_flight_waits", test_read_of_block_in_flight_waits, true },
	{ "write_in_flight_at_reset_is_resent", test_write_in_flight_at_reset_is_resent, true },
	{ "multi_device_write_at_reset_is_resent", test_multi_device_write_at_reset_is_resent,
	  true },
	{ "grant_lost_under_committed_write", test_grant_lost_under_committed_write, true },
	{ "applied_write_at_reset_is_kept", test_applied_write_at_reset_is_kept, true },
	{ "release_waits_for_invalidation", test_release_waits_for_invalidation, true },
#endif
};

int main(int argc, char **argv)
{
	size_t i;

	if (argc < 2 || (argc != 2 && strcmp(argv[1], "--abba-worker")) ||
	    !strcmp(argv[1], "--help")) {
		printf("usage: %s TEST\ntests:\n", argv[0]);
		for (i = 0; i < sizeof(tests) / sizeof(tests[0]); i++)
			printf("  %s\n", tests[i].name);
		return argc == 2 ? 0 : 2;
	}
	if (argc >= 3 && !strcmp(argv[1], "--abba-worker")) {
		memcpy(env.fs_id, "cache-test-fsid!", NGNFS_FS_ID_SIZE);
		env.addresses = (const char *const *)&argv[2];
		env.devices = (uint16_t)(argc - 2);
		return abba_worker();
	}
	for (i = 0; i < sizeof(tests) / sizeof(tests[0]); i++) {
		if (strcmp(argv[1], tests[i].name))
			continue;
		env_start(tests[i].name, 2);
		tests[i].fn();
		env_stop();
		printf("%s: passed\n", tests[i].name);
		return 0;
	}
	fprintf(stderr, "unknown test %s (see --help)\n", argv[1]);
	return 2;
}
