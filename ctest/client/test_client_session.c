/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The network client against real blockd processes: every request type
 * end to end, and the session behaviour a caller relies on.
 *
 *  - requests: GET (zeros at version 0, a cached copy revalidated without
 *    data, data when the cached version is old), WRITE SINGLE, a 3-device
 *    set, a set larger than one frame (STAGE in several frames), ALLOC,
 *    CMPXCHG (success and -ESTALE with the current version),
 *    READ_INCOHERENT, STATFS;
 *  - refusals with a clear message: a filesystem id that is not the
 *    devices', a manifest in the wrong order (device index), devices of
 *    two filesystems mixed, an unformatted device;
 *  - a stopped blockd makes a request fail with -ETIMEDOUT after the
 *    request timeout, not hang;
 *  - a blockd killed while a request is outstanding fails it with
 *    -ENOTCONN at once, later requests fail fast, and the client
 *    reconnects by itself when blockd returns (session_reset says the
 *    server restarted), after which requests work and the data is there;
 *  - a 3-device write with one device down fails instead of hanging.
 */

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "client_test.h"

struct reset_log {
	pthread_mutex_t lock;
	unsigned int lost[8];
	unsigned int restarted[8];
	unsigned int reestablished[8];
};

static void on_session_reset(void *owner, uint16_t device, bool server_restarted)
{
	struct reset_log *log = owner;

	pthread_mutex_lock(&log->lock);
	if (device < 8) {
		/* The first call after a loss is the loss itself. */
		if (log->lost[device] == log->reestablished[device])
			log->lost[device]++;
		else {
			log->reestablished[device]++;
			if (server_restarted)
				log->restarted[device]++;
		}
	}
	pthread_mutex_unlock(&log->lock);
}

static void fill(uint8_t *data, uint64_t blkno, uint64_t tag)
{
	for (size_t i = 0; i < NGNFS_BLOCK_SIZE / 8; i++) {
		uint64_t word = blkno * 1000003ULL + tag * 7919ULL + i;

		memcpy(data + i * 8, &word, 8);
	}
}

static void get_write(struct ngnfs_client *client, uint64_t blkno, uint64_t *version)
{
	static uint8_t data[NGNFS_BLOCK_SIZE];
	bool changed;
	int ret;

	ret = ngnfs_client_get_sync(client, blkno, NGNFS_ACCESS_WRITE, 0, version, data, &changed);
	CHECK(ret == 0, "GET(write) of block %#llx: expected 0, got %d (%s)",
	      (unsigned long long)blkno, ret, strerror(-ret));
}

static void test_requests(struct client_test_fs *fs, struct ngnfs_client *client)
{
	static uint8_t data[NGNFS_BLOCK_SIZE], expected[NGNFS_BLOCK_SIZE];
	uint64_t blkno = ngnfs_blkno_make(0, 5);
	struct ngnfs_block_request block = { .blkno = blkno };
	struct ngnfs_write_set set = { .blocks = &block, .block_count = 1 };
	struct ngnfs_msg hello;
	uint64_t version, written, again;
	bool changed = true;
	int ret;

	for (unsigned int d = 0; d < fs->device_count; d++) {
		CHECK_OK(ngnfs_client_device_info(client, (uint16_t)d, &hello), "device_info");
		CHECK(hello.hello_reply.device_index == d,
		      "device %u: HELLO_REPLY device index expected %u, got %u", d, d,
		      hello.hello_reply.device_index);
		CHECK(!memcmp(hello.hello_reply.fs_id, fs->fs_id, NGNFS_FS_ID_SIZE),
		      "device %u: HELLO_REPLY fs id is not the one FORMAT gave", d);
	}

	/* A block never written: zeros at version 0, no data for cached version 0. */
	ret = ngnfs_client_get_sync(client, blkno, NGNFS_ACCESS_WRITE, 0, &version, data, &changed);
	CHECK_OK(ret, "GET(write) of a fresh block");
	CHECK(version == 0, "fresh block %#llx: expected version 0, got %llu",
	      (unsigned long long)blkno, (unsigned long long)version);

	fill(expected, blkno, 1);
	block.version = version;
	block.data = expected;
	ret = ngnfs_client_write_set_sync(client, &set, &written);
	CHECK_OK(ret, "WRITE SINGLE of one block");
	CHECK(written > version, "WRITE: expected a version above %llu, got %llu",
	      (unsigned long long)version, (unsigned long long)written);
	CHECK_OK(ngnfs_client_release(client, blkno, NGNFS_ACCESS_NONE), "RELEASE");

	/* Cached copy current: no data travels. */
	memset(data, 0xee, sizeof(data));
	ret = ngnfs_client_get_sync(client, blkno, NGNFS_ACCESS_READ, written, &again, data,
				    &changed);
	CHECK_OK(ret, "GET(read) with the current cached version");
	CHECK(again == written && !changed,
	      "GET with cached version %llu: expected version %llu without data, got %llu %s",
	      (unsigned long long)written, (unsigned long long)written, (unsigned long long)again,
	      changed ? "with data" : "without data");
	/* Cached copy old: data travels and is what was written. */
	ret = ngnfs_client_get_sync(client, blkno, NGNFS_ACCESS_READ, 0, &again, data, &changed);
	CHECK_OK(ret, "GET(read) with no cached copy");
	CHECK(again == written && changed && !memcmp(data, expected, sizeof(data)),
	      "GET(read) with cached version 0: expected version %llu with the written data, "
	      "got version %llu, %s, data %s",
	      (unsigned long long)written, (unsigned long long)again,
	      changed ? "data sent" : "no data",
	      memcmp(data, expected, sizeof(data)) ? "differs" : "equal");
	CHECK_OK(ngnfs_client_release(client, blkno, NGNFS_ACCESS_NONE), "RELEASE");

	/* One set over three devices, versions in the caller's order. */
	{
		static uint8_t datas[3][NGNFS_BLOCK_SIZE];
		struct ngnfs_block_request blocks[3];
		uint64_t versions[3] = { 0 };
		/* deliberately not sorted: the primary is device 0's block */
		uint64_t blknos[3] = { ngnfs_blkno_make(2, 7), ngnfs_blkno_make(0, 7),
				       ngnfs_blkno_make(1, 7) };

		for (int i = 0; i < 3; i++) {
			get_write(client, blknos[i], &version);
			fill(datas[i], blknos[i], 2);
			blocks[i] = (struct ngnfs_block_request){ .blkno = blknos[i],
								  .version = version,
								  .access = NGNFS_ACCESS_WRITE,
								  .data = datas[i] };
		}
		set = (struct ngnfs_write_set){ .blocks = blocks,
						.block_count = 3,
						.release = true,
						.release_access = NGNFS_ACCESS_NONE };
		ret = ngnfs_client_write_set_sync(client, &set, versions);
		CHECK_OK(ret, "WRITE of a 3-device set (STAGE, COMMIT, RESOLVE)");
		for (int i = 0; i < 3; i++) {
			uint64_t read_version = 0;

			CHECK(versions[i] > blocks[i].version,
			      "3-device set block %#llx: expected a version above %llu, got %llu",
			      (unsigned long long)blknos[i], (unsigned long long)blocks[i].version,
			      (unsigned long long)versions[i]);
			/* The participants apply on RESOLVE, shortly after the commit. */
			for (int tries = 0; tries < 200; tries++) {
				ret = ngnfs_client_read_incoherent_sync(client, blknos[i],
									&read_version, data);
				CHECK_OK(ret, "READ_INCOHERENT");
				if (read_version == versions[i])
					break;
				usleep(10000);
			}
			CHECK(read_version == versions[i] && !memcmp(data, datas[i], sizeof(data)),
			      "READ_INCOHERENT of block %#llx after the set: expected version %llu "
			      "and the set's data, got version %llu, data %s",
			      (unsigned long long)blknos[i], (unsigned long long)versions[i],
			      (unsigned long long)read_version,
			      memcmp(data, datas[i], sizeof(data)) ? "differs" : "equal");
		}
	}

	/* A set larger than one frame on one device, plus one block elsewhere. */
	{
		enum { BIG = NGNFS_MSG_MAX_BLOCKS + 44 };
		static struct ngnfs_block_request blocks[BIG + 1];
		static uint64_t versions[BIG + 1];
		static uint8_t big_data[NGNFS_BLOCK_SIZE];
		uint64_t read_version;

		fill(big_data, 99, 3);
		for (uint32_t i = 0; i <= BIG; i++) {
			uint64_t b =
			    i < BIG ? ngnfs_blkno_make(1, 1000 + i) : ngnfs_blkno_make(2, 1000);

			get_write(client, b, &version);
			blocks[i] = (struct ngnfs_block_request){ .blkno = b,
								  .version = version,
								  .access = NGNFS_ACCESS_WRITE,
								  .data = big_data };
		}
		set = (struct ngnfs_write_set){ .blocks = blocks,
						.block_count = BIG + 1,
						.release = true,
						.release_access = NGNFS_ACCESS_NONE };
		ret = ngnfs_client_write_set_sync(client, &set, versions);
		CHECK_OK(ret, "WRITE of a set of more than NGNFS_MSG_MAX_BLOCKS blocks");
		for (uint32_t i = 0; i <= BIG; i += 50) {
			for (int tries = 0; tries < 200; tries++) {
				CHECK_OK(ngnfs_client_read_incoherent_sync(client, blocks[i].blkno,
									   &read_version, data),
					 "READ_INCOHERENT");
				if (read_version == versions[i])
					break;
				usleep(10000);
			}
			CHECK(read_version == versions[i] && versions[i] > blocks[i].version,
			      "big set block %#llx: expected version %llu (above %llu), read %llu",
			      (unsigned long long)blocks[i].blkno, (unsigned long long)versions[i],
			      (unsigned long long)blocks[i].version,
			      (unsigned long long)read_version);
		}
	}

	/*
	 * A set freeing more blocks than one frame may carry (the protocol
	 * caps frees at NGNFS_MSG_MAX_BLOCKS like blocks): what a directory
	 * of unlinked files flushes as one set.  The client must split it.
	 */
	{
		enum { MANY = NGNFS_MSG_MAX_BLOCKS + 60 };
		static uint64_t freed[MANY], alloc_versions[MANY];
		static struct ngnfs_block_request written[MANY];
		static uint8_t keep_data[NGNFS_BLOCK_SIZE];
		struct ngnfs_statfs_figures before, after;
		struct ngnfs_block_request keep;
		uint64_t keep_version;
		uint32_t have = 0, got;

		while (have < MANY) {
			got = 0;
			uint32_t want =
			    MANY - have < NGNFS_MSG_MAX_BLOCKS ? MANY - have : NGNFS_MSG_MAX_BLOCKS;

			ret = ngnfs_client_alloc_sync(client, 1, want, freed + have,
						      alloc_versions + have, NULL, &got);
			CHECK(ret == 0 && got > 0, "ALLOC for the frees: %d (%s), %u blocks", ret,
			      strerror(-ret), got);
			have += got;
		}
		/* only written blocks count as allocated and may be freed */
		for (uint32_t i = 0; i < MANY; i++)
			written[i] = (struct ngnfs_block_request){ .blkno = freed[i],
								   .version = alloc_versions[i],
								   .access = NGNFS_ACCESS_WRITE,
								   .data = keep_data };
		set = (struct ngnfs_write_set){ .blocks = written, .block_count = MANY };
		CHECK_OK(ngnfs_client_write_set_sync(client, &set, alloc_versions),
			 "WRITE of the blocks to free");
		/* written by the test above, so writing it changes no free count */
		blkno = ngnfs_blkno_make(1, 1000);
		get_write(client, blkno, &version);
		fill(keep_data, blkno, 5);
		keep = (struct ngnfs_block_request){ .blkno = blkno,
						     .version = version,
						     .access = NGNFS_ACCESS_WRITE,
						     .data = keep_data };
		CHECK_OK(ngnfs_client_statfs_sync(client, 1, &before), "STATFS before the frees");
		set = (struct ngnfs_write_set){
			.blocks = &keep, .block_count = 1, .frees = freed, .free_count = MANY
		};
		ret = ngnfs_client_write_set_sync(client, &set, &keep_version);
		CHECK_OK(ret, "WRITE of a set with more than NGNFS_MSG_MAX_BLOCKS frees");
		/* a staged set is applied after its commit point: wait for it */
		for (int tries = 0; tries < 200; tries++) {
			CHECK_OK(ngnfs_client_statfs_sync(client, 1, &after),
				 "STATFS after the frees");
			if (after.free_blocks >= before.free_blocks + MANY)
				break;
			usleep(10000);
		}
		CHECK(after.free_blocks >= before.free_blocks + MANY,
		      "after freeing %u blocks device 1 has %llu free blocks, before %llu", MANY,
		      (unsigned long long)after.free_blocks,
		      (unsigned long long)before.free_blocks);
	}

	/*
	 * One device, more blocks than one frame carries: one WRITE of three
	 * frames (blockd holds the first two and applies all three in one
	 * batch), not a staged set; one block more than NGNFS_WRITE_MAX_FRAMES
	 * frames carry is staged.  Each is read back as soon as it returns.
	 */
	{
		enum {
			HELD = 2 * NGNFS_MSG_MAX_BLOCKS + 88,
			STAGED = NGNFS_WRITE_MAX_FRAMES * NGNFS_MSG_MAX_BLOCKS + 1
		};
		static struct ngnfs_block_request blocks[STAGED];
		static uint64_t versions[STAGED];
		static uint8_t held_data[NGNFS_BLOCK_SIZE];
		const uint64_t held_set = 0x4e0000000001ULL, staged_set = 0x4e0000000002ULL;
		const uint32_t counts[2] = { HELD, STAGED };
		const uint64_t set_ids[2] = { held_set, staged_set };
		char staged_line[64];
		char *log;

		for (unsigned int round = 0; round < 2; round++) {
			uint64_t read_version;

			fill(held_data, 77, (uint8_t)(6 + round));
			for (uint32_t i = 0; i < counts[round]; i++) {
				uint64_t b = ngnfs_blkno_make(1, 2000 + i);

				get_write(client, b, &version);
				blocks[i] =
				    (struct ngnfs_block_request){ .blkno = b,
								  .version = version,
								  .access = NGNFS_ACCESS_WRITE,
								  .data = held_data };
			}
			set = (struct ngnfs_write_set){ .blocks = blocks,
							.block_count = counts[round],
							.set_id = set_ids[round],
							.release = true,
							.release_access = NGNFS_ACCESS_NONE };
			ret = ngnfs_client_write_set_sync(client, &set, versions);
			CHECK(ret == 0, "WRITE of a %u-block set on one device: %d (%s)",
			      counts[round], ret, strerror(-ret));
			for (uint32_t i = 0; i < counts[round]; i += 97) {
				CHECK_OK(ngnfs_client_read_incoherent_sync(client, blocks[i].blkno,
									   &read_version, data),
					 "READ_INCOHERENT");
				CHECK(
				    read_version == versions[i] &&
					versions[i] == blocks[i].version + 1 &&
					!memcmp(data, held_data, sizeof(data)),
				    "%u-block set block %#llx: expected version %llu and its data "
				    "on return, read %llu, data %s",
				    counts[round], (unsigned long long)blocks[i].blkno,
				    (unsigned long long)blocks[i].version + 1,
				    (unsigned long long)read_version,
				    memcmp(data, held_data, sizeof(data)) ? "differs" : "equal");
			}
		}
		log = ngnfs_test_read_file(ngnfs_test_cluster_log_path(fs->cluster, 1), NULL);
		CHECK(log, "cannot read device 1's log");
		snprintf(staged_line, sizeof(staged_line), "set %016llx staged by",
			 (unsigned long long)held_set);
		CHECK(!strstr(log, staged_line),
		      "the %u-block set on one device was staged, not written as one WRITE", HELD);
		snprintf(staged_line, sizeof(staged_line), "set %016llx staged by",
			 (unsigned long long)staged_set);
		CHECK(strstr(log, staged_line),
		      "the %u-block set on one device, more than %u frames, was not staged", STAGED,
		      NGNFS_WRITE_MAX_FRAMES);
		free(log);
	}

	/* STATFS, ALLOC, CMPXCHG */
	{
		struct ngnfs_statfs_figures statfs;
		uint64_t blknos[4], versions[4], current, cmp_version = 0;
		uint32_t allocated = 0, epoch = 0, epoch_again = 0;

		for (unsigned int d = 0; d < fs->device_count; d++) {
			ret = ngnfs_client_statfs_sync(client, (uint16_t)d, &statfs);
			CHECK(ret == 0, "STATFS of device %u: expected 0, got %d (%s)", d, ret,
			      strerror(-ret));
		}
		ret = ngnfs_client_alloc_sync(client, 1, 4, blknos, versions, &epoch, &allocated);
		CHECK_OK(ret, "ALLOC of 4 blocks on device 1");
		CHECK(allocated >= 1 && allocated <= 4, "ALLOC: expected 1..4 blocks, got %u",
		      allocated);
		ret = ngnfs_client_alloc_sync(client, 1, 1, blknos + 3, versions + 3, &epoch_again,
					      &(uint32_t){ 0 });
		CHECK_OK(ret, "a second ALLOC on device 1");
		CHECK(epoch != 0 && epoch_again == epoch,
		      "ALLOC: expected one non-zero session epoch for both replies of the session, "
		      "got %u and %u",
		      epoch, epoch_again);
		for (uint32_t i = 0; i < allocated; i++)
			CHECK(ngnfs_blkno_device(blknos[i]) == 1,
			      "ALLOC on device 1 returned block %#llx of device %u",
			      (unsigned long long)blknos[i], ngnfs_blkno_device(blknos[i]));

		blkno = ngnfs_blkno_make(2, 55);
		CHECK_OK(ngnfs_client_read_incoherent_sync(client, blkno, &current, data),
			 "READ_INCOHERENT before CMPXCHG");
		fill(expected, blkno, 4);
		ret = ngnfs_client_cmpxchg_sync(client, blkno, current, expected, &cmp_version);
		CHECK_OK(ret, "CMPXCHG with the current version");
		CHECK(cmp_version > current, "CMPXCHG: expected a version above %llu, got %llu",
		      (unsigned long long)current, (unsigned long long)cmp_version);
		ret = ngnfs_client_cmpxchg_sync(client, blkno, current, expected, &again);
		CHECK(ret == -ESTALE && again == cmp_version,
		      "CMPXCHG with an old version: expected -ESTALE and current version %llu, "
		      "got %d and %llu",
		      (unsigned long long)cmp_version, ret, (unsigned long long)again);
	}
}

static void expect_refused(struct client_test_fs *fs, const char *const *addresses,
			   const uint8_t *fs_id, int expected_error, const char *expected_text,
			   const char *expected_address, const char *what)
{
	struct ngnfs_client *client = NULL;
	char *log;
	int ret;

	client_test_capture_stderr_begin();
	ret = client_test_try_open(fs, addresses, fs_id, NULL, NULL, 2000, &client);
	log = client_test_capture_stderr_end();
	if (client)
		ngnfs_client_destroy(client);
	CHECK(ret != 0, "%s: expected the client to be refused, it was created", what);
	CHECK(!expected_error || ret == expected_error, "%s: expected error %d (%s), got %d (%s)",
	      what, expected_error, strerror(-expected_error), ret, strerror(-ret));
	CHECK(strstr(log, expected_text), "%s: expected the log to say '%s', it said:\n%s", what,
	      expected_text, log);
	CHECK(!expected_address || strstr(log, expected_address),
	      "%s: expected the log to name %s, it said:\n%s", what, expected_address, log);
	free(log);
}

static void test_refusals(struct client_test_fs *fs)
{
	const char *const *addresses = ngnfs_test_cluster_addresses(fs->cluster);
	const char *swapped[3] = { addresses[1], addresses[0], addresses[2] };
	struct client_test_fs other;
	const char *mixed[3];
	uint8_t wrong_fs_id[NGNFS_FS_ID_SIZE];
	struct ngnfs_test_cluster *raw;
	char text[128];

	memcpy(wrong_fs_id, fs->fs_id, sizeof(wrong_fs_id));
	wrong_fs_id[0] ^= 0xff;
	expect_refused(fs, NULL, wrong_fs_id, -ESTALE, "another filesystem", addresses[0],
		       "HELLO with a filesystem id that is not the devices'");

	snprintf(text, sizeof(text), "reports device index 1 but is configured as device 0");
	expect_refused(fs, swapped, NULL, -EINVAL, text, addresses[1],
		       "manifest with devices 0 and 1 swapped");

	/* Devices of two filesystems, each at its right index. */
	client_test_fs_start(&other, 2, "client-session-other", NULL);
	mixed[0] = addresses[0];
	mixed[1] = ngnfs_test_cluster_address(other.cluster, 1);
	mixed[2] = addresses[2];
	expect_refused(fs, mixed, NULL, -ESTALE, "belongs to filesystem", mixed[1],
		       "devices of two filesystems in one manifest");
	client_test_fs_stop(&other);

	/* An unformatted device without NGNFS_HELLO_FORMAT. */
	raw = ngnfs_test_cluster_start(1, "client-session-raw");
	CHECK(raw, "starting an unformatted blockd");
	{
		struct client_test_fs raw_fs = { .cluster = raw, .device_count = 1 };

		expect_refused(&raw_fs, NULL, NULL, 0, "not formatted",
			       ngnfs_test_cluster_address(raw, 0), "an unformatted device");
	}
	CHECK(ngnfs_test_cluster_stop(raw) == 0, "stopping the unformatted blockd");
}

static void test_timeout(struct client_test_fs *fs)
{
	struct ngnfs_client *client = client_test_open(fs, NULL, NULL, 500);
	uint64_t version, start, elapsed;
	int ret;

	CHECK_OK(ngnfs_test_cluster_kill(fs->cluster, 1, SIGSTOP), "SIGSTOP device 1");
	start = client_test_now_ms();
	ret = ngnfs_client_get_sync(client, ngnfs_blkno_make(1, 77), NGNFS_ACCESS_READ, 0, &version,
				    NULL, NULL);
	elapsed = client_test_now_ms() - start;
	CHECK_OK(ngnfs_test_cluster_kill(fs->cluster, 1, SIGCONT), "SIGCONT device 1");
	CHECK(ret == -ETIMEDOUT && elapsed >= 400 && elapsed < 3000,
	      "GET to a stopped blockd with a 500 ms request timeout: expected -ETIMEDOUT after "
	      "about 500 ms, got %d (%s) after %llu ms",
	      ret, strerror(-ret), (unsigned long long)elapsed);
	/* The session survived: the next request works. */
	ret = ngnfs_client_get_sync(client, ngnfs_blkno_make(1, 78), NGNFS_ACCESS_READ, 0, &version,
				    NULL, NULL);
	CHECK_OK(ret, "GET after the blockd was continued");
	ngnfs_client_destroy(client);
}

struct async_get {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool done;
	int status;
};

static void async_get_done(void *arg, int status, uint64_t blkno, uint64_t version, uint8_t access,
			   const uint8_t *data)
{
	struct async_get *get = arg;

	(void)blkno;
	(void)version;
	(void)access;
	(void)data;
	pthread_mutex_lock(&get->lock);
	get->done = true;
	get->status = status;
	pthread_cond_broadcast(&get->cond);
	pthread_mutex_unlock(&get->lock);
}

static void test_server_killed(struct client_test_fs *fs)
{
	struct reset_log log = { .lock = PTHREAD_MUTEX_INITIALIZER };
	struct ngnfs_client_ops ops = { .session_reset = on_session_reset };
	struct ngnfs_client *client = client_test_open(fs, &ops, &log, 10000);
	struct async_get get = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, 0 };
	struct ngnfs_block_request block = { .blkno = ngnfs_blkno_make(2, 7),
					     .access = NGNFS_ACCESS_READ };
	static uint8_t data[NGNFS_BLOCK_SIZE];
	uint64_t version_before, version, start, elapsed;
	int ret;

	CHECK_OK(ngnfs_client_read_incoherent_sync(client, block.blkno, &version_before, data),
		 "READ_INCOHERENT before the kill");

	/* A request the server will never answer: it is stopped, then killed. */
	CHECK_OK(ngnfs_test_cluster_kill(fs->cluster, 2, SIGSTOP), "SIGSTOP device 2");
	CHECK_OK(ngnfs_client_get(client, &block, 1, async_get_done, &get), "GET submit");
	usleep(100000);
	start = client_test_now_ms();
	CHECK_OK(ngnfs_test_cluster_kill(fs->cluster, 2, SIGKILL), "SIGKILL device 2");
	pthread_mutex_lock(&get.lock);
	while (!get.done && client_test_now_ms() - start < 5000) {
		pthread_mutex_unlock(&get.lock);
		usleep(5000);
		pthread_mutex_lock(&get.lock);
	}
	pthread_mutex_unlock(&get.lock);
	elapsed = client_test_now_ms() - start;
	CHECK(get.done && (get.status == -ENOTCONN || get.status == -EIO),
	      "GET outstanding when blockd was killed: expected -ENOTCONN at once, got %s %d "
	      "after %llu ms",
	      get.done ? "status" : "no completion", get.status, (unsigned long long)elapsed);
	CHECK(elapsed < 2000, "GET failure took %llu ms after the kill, expected well under 2 s",
	      (unsigned long long)elapsed);
	pthread_mutex_lock(&log.lock);
	CHECK(log.lost[2] == 1, "session_reset for the lost session: expected 1 call, got %u",
	      log.lost[2]);
	pthread_mutex_unlock(&log.lock);

	/* While it is down, requests fail fast. */
	start = client_test_now_ms();
	ret =
	    ngnfs_client_get_sync(client, block.blkno, NGNFS_ACCESS_READ, 0, &version, NULL, NULL);
	elapsed = client_test_now_ms() - start;
	CHECK(ret == -ENOTCONN && elapsed < 500,
	      "GET while the device is down: expected -ENOTCONN at once, got %d (%s) after %llu ms",
	      ret, strerror(-ret), (unsigned long long)elapsed);

	/* A 3-device write with one device down fails, it does not hang. */
	{
		static uint8_t datas[3][NGNFS_BLOCK_SIZE];
		struct ngnfs_block_request blocks[3];
		struct ngnfs_write_set set = { .blocks = blocks, .block_count = 3 };
		uint64_t versions[3];

		for (int i = 0; i < 3; i++)
			blocks[i] = (struct ngnfs_block_request){ .blkno = ngnfs_blkno_make(
								      (uint16_t)i, 300),
								  .version = 0,
								  .data = datas[i] };
		start = client_test_now_ms();
		ret = ngnfs_client_write_set_sync(client, &set, versions);
		elapsed = client_test_now_ms() - start;
		CHECK(ret != 0 && elapsed < 3000,
		      "3-device WRITE with device 2 down: expected an error quickly, got %d after "
		      "%llu ms",
		      ret, (unsigned long long)elapsed);
	}

	CHECK_OK(ngnfs_test_cluster_restart(fs->cluster, 2), "restarting device 2");
	ret = client_test_wait_session(client, 2, 10000);
	CHECK(ret == 0, "after blockd came back: expected the client to reconnect within 10 s");
	/* session_reset runs on the I/O thread just after the session is usable. */
	for (int tries = 0; tries < 200; tries++) {
		bool called;

		pthread_mutex_lock(&log.lock);
		called = log.reestablished[2] > 0;
		pthread_mutex_unlock(&log.lock);
		if (called)
			break;
		usleep(10000);
	}
	pthread_mutex_lock(&log.lock);
	CHECK(log.reestablished[2] == 1 && log.restarted[2] == 1,
	      "session_reset after reconnect: expected one call saying the server restarted, got "
	      "%u calls, %u saying restarted",
	      log.reestablished[2], log.restarted[2]);
	pthread_mutex_unlock(&log.lock);

	/* Grants work again (during the grace period too: the client reclaims). */
	for (int tries = 0;; tries++) {
		ret = ngnfs_client_get_sync(client, block.blkno, NGNFS_ACCESS_READ, 0, &version,
					    data, NULL);
		if (ret == 0 || tries > 100)
			break;
		usleep(50000);
	}
	CHECK(ret == 0 && version == version_before,
	      "GET after the restart: expected version %llu (persisted), got %d, version %llu",
	      (unsigned long long)version_before, ret, (unsigned long long)version);
	ngnfs_client_destroy(client);
}

int main(void)
{
	const char *extra[] = { "--grace-ms", "300", NULL };
	struct client_test_fs fs;
	struct ngnfs_client *client;

	client_test_fs_start(&fs, 3, "client-session", extra);
	client = client_test_open(&fs, NULL, NULL, 10000);
	test_requests(&fs, client);
	ngnfs_client_destroy(client);
	printf("requests: ok\n");
	test_refusals(&fs);
	printf("refusals: ok\n");
	test_timeout(&fs);
	printf("request timeout: ok\n");
	test_server_killed(&fs);
	printf("server killed and restarted: ok\n");
	client_test_fs_stop(&fs);
	return 0;
}
