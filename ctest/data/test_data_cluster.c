// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * File data and xattrs through the native API against real blockd
 * processes (three devices started by ctest/harness/cluster.h): what the
 * fake-backed tests prove about layout, checked here end to end through
 * the real cache, transactions, network client and servers, and across an
 * unmount and mount (everything written is read back from the servers).
 *
 * Covered: large unaligned writes split over transactions, a write at
 * 1 TiB - 4096 with the hole before it reading zeros, truncate down and
 * up through ngnfs_setattr, small inline and 64 KiB xattrs with the
 * setxattr(2) errors, deletion freeing the file's blocks (statfs), four
 * threads writing one file at once (real try-lock retries on the shared
 * inode and map blocks), and a second client seeing the first's data and
 * xattrs and the first seeing the second's changes (revocation).
 */

#include <errno.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>
#include <sys/xattr.h>
#include <cmocka.h>

#include "cluster.h"
#include "ngnfs.h"

#define DEVICES 3
#define TIB	(1ULL << 40)

/*
 * Each test must finish within this; a hang (a transaction that never
 * gets its blocks) then fails with the step it hung in instead of waiting
 * for ctest's timeout.  The harness kills the blockd processes at exit.
 */
#define TEST_SECONDS 60

static const char *volatile current_step = "setup";

static void watchdog(int sig)
{
	char line[256];
	int length =
	    snprintf(line, sizeof(line), "test_data_cluster: no progress for %d s, hung in: %s\n",
		     TEST_SECONDS, current_step);

	(void)sig;
	if (write(STDERR_FILENO, line, (size_t)length) < 0)
		_exit(2);
	exit(1); /* atexit: the harness stops the servers */
}

static void step(const char *what)
{
	current_step = what;
	alarm(TEST_SECONDS);
}

struct fixture {
	struct ngnfs_test_cluster *cluster;
	struct ngnfs_fs *fs;
	struct ngnfs_handle root;
	uint64_t random;
};

static uint64_t next_random(uint64_t *state)
{
	uint64_t x = *state;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*state = x;
	return x * 2685821657736338717ULL;
}

static void fill_random(struct fixture *fx, uint8_t *buffer, size_t length)
{
	for (size_t i = 0; i < length; i++)
		buffer[i] = (uint8_t)(next_random(&fx->random) >> 56);
}

static int mount_fs(struct fixture *fx)
{
	struct ngnfs_mount_options options = {
		.device_addresses = ngnfs_test_cluster_addresses(fx->cluster),
		.device_count = DEVICES,
		.durability = NGNFS_MOUNT_STABLE,
	};
	int ret = ngnfs_mount(&options, &fx->fs);

	if (ret != 0) {
		fprintf(stderr, "mount: %d (%s)\n", ret, ngnfs_last_error());
		return ret;
	}
	return ngnfs_root(fx->fs, &fx->root);
}

static int setup(void **state)
{
	struct fixture *fx = calloc(1, sizeof(*fx));
	struct ngnfs_mkfs_options mkfs = { .device_count = DEVICES };
	uint8_t fs_id[16];
	int ret;

	if (!fx)
		return -1;
	signal(SIGALRM, watchdog);
	step("starting blockd, mkfs and mount");
	fx->random = 0x9e3779b97f4a7c15ULL;
	fx->cluster = ngnfs_test_cluster_start(DEVICES, "data");
	if (!fx->cluster)
		goto fail;
	mkfs.device_addresses = ngnfs_test_cluster_addresses(fx->cluster);
	ret = ngnfs_mkfs(&mkfs, fs_id);
	if (ret != 0) {
		fprintf(stderr, "mkfs: %d (%s)\n", ret, ngnfs_last_error());
		goto fail;
	}
	if (mount_fs(fx) != 0)
		goto fail;
	*state = fx;
	return 0;
fail:
	ngnfs_test_cluster_dump_logs(fx->cluster, 4096);
	ngnfs_test_cluster_stop(fx->cluster);
	free(fx);
	return -1;
}

static int teardown(void **state)
{
	struct fixture *fx = *state;
	int ret;

	step("unmount and stopping blockd");
	if (fx->fs)
		ngnfs_unmount(fx->fs);
	ret = ngnfs_test_cluster_stop(fx->cluster);
	free(fx);
	return ret == 0 ? 0 : -1;
}

static void create_file(struct fixture *fx, const char *name, struct ngnfs_handle *file)
{
	int ret;

	step("create");
	ret = ngnfs_create(fx->fs, &fx->root, name, 0100644, 0, 0, 0, file, NULL);

	if (ret != 0)
		fail_msg("create \"%s\": expected 0, got %d (%s)", name, ret, ngnfs_last_error());
}

static void expect_contents(struct fixture *fx, const struct ngnfs_handle *file, uint64_t offset,
			    const uint8_t *expected, size_t length)
{
	uint8_t *got = malloc(length ? length : 1);
	bool eof = false;
	size_t done = 0;

	assert_non_null(got);
	step("read");
	while (done < length) {
		ssize_t ret =
		    ngnfs_read(fx->fs, file, offset + done, got + done, length - done, &eof);

		if (ret <= 0) {
			free(got);
			fail_msg("read at %" PRIu64 ": expected %zu more bytes, got %zd (%s)",
				 offset + done, length - done, ret, ngnfs_last_error());
		}
		done += (size_t)ret;
	}
	for (size_t i = 0; i < length; i++) {
		if (got[i] != (expected ? expected[i] : 0)) {
			uint8_t g = got[i];

			free(got);
			fail_msg("byte at offset %" PRIu64 ": expected 0x%02x, got 0x%02x",
				 offset + i, expected ? expected[i] : 0, g);
		}
	}
	free(got);
}

static void write_all(struct fixture *fx, const struct ngnfs_handle *file, uint64_t offset,
		      const void *buffer, size_t length)
{
	ssize_t ret;

	step("write");
	ret = ngnfs_write(fx->fs, file, offset, buffer, length, NGNFS_WRITE_MOUNT);
	if (ret != (ssize_t)length)
		fail_msg("write of %zu at %" PRIu64 ": expected %zu, got %zd (%s)", length, offset,
			 length, ret, ngnfs_last_error());
}

static void test_data_end_to_end(void **state)
{
	struct fixture *fx = *state;
	size_t length = 3 * 1024 * 1024 + 333;
	uint8_t *data = malloc(length);
	uint8_t far[4096];
	struct ngnfs_handle file;
	struct ngnfs_attr attr;
	struct ngnfs_setattr set = { .mask = NGNFS_SET_SIZE };

	assert_non_null(data);
	fill_random(fx, data, length);
	fill_random(fx, far, sizeof(far));
	create_file(fx, "bulk", &file);
	write_all(fx, &file, 1000, data, length);
	expect_contents(fx, &file, 1000, data, length);
	expect_contents(fx, &file, 0, NULL, 1000);

	write_all(fx, &file, TIB - sizeof(far), far, sizeof(far));
	assert_int_equal(ngnfs_getattr(fx->fs, &file, &attr), 0);
	assert_int_equal(attr.size, TIB);
	expect_contents(fx, &file, TIB - sizeof(far), far, sizeof(far));
	expect_contents(fx, &file, TIB / 2, NULL, 8192);
	expect_contents(fx, &file, TIB - 3 * sizeof(far), NULL, 2 * sizeof(far));

	/* everything again from the servers after a remount */
	ngnfs_unmount(fx->fs);
	fx->fs = NULL;
	assert_int_equal(mount_fs(fx), 0);
	expect_contents(fx, &file, 1000, data, length);
	expect_contents(fx, &file, TIB - sizeof(far), far, sizeof(far));

	/* truncate down into the middle of a block, then up: the tail reads zeros */
	step("truncate");
	set.size = 5000;
	assert_int_equal(ngnfs_setattr(fx->fs, &file, &set, &attr), 0);
	assert_int_equal(attr.size, 5000);
	set.size = 20000;
	assert_int_equal(ngnfs_setattr(fx->fs, &file, &set, &attr), 0);
	expect_contents(fx, &file, 1000, data, 4000);
	expect_contents(fx, &file, 5000, NULL, 15000);
	assert_int_equal(ngnfs_getattr(fx->fs, &file, &attr), 0);
	/* two data blocks and one map block: 24 sectors */
	assert_int_equal(attr.blocks, 3 * 8);
	free(data);
}

static void test_xattr_end_to_end(void **state)
{
	struct fixture *fx = *state;
	static uint8_t big[NGNFS_XATTR_VALUE_MAX];
	static uint8_t got[NGNFS_XATTR_VALUE_MAX + 1];
	struct ngnfs_handle file;
	char list[256];

	fill_random(fx, big, sizeof(big));
	create_file(fx, "tagged", &file);
	step("xattrs");
	assert_int_equal(ngnfs_setxattr(fx->fs, &file, "user.tier", "tape", 4, XATTR_CREATE), 0);
	assert_int_equal(ngnfs_setxattr(fx->fs, &file, "user.tier", "disk", 4, XATTR_CREATE),
			 -EEXIST);
	assert_int_equal(ngnfs_setxattr(fx->fs, &file, "user.none", "x", 1, XATTR_REPLACE),
			 -ENODATA);
	assert_int_equal(ngnfs_setxattr(fx->fs, &file, "bogus.x", "x", 1, 0), -EOPNOTSUPP);
	assert_int_equal(ngnfs_setxattr(fx->fs, &file, "trusted.map", big, sizeof(big), 0), 0);

	ngnfs_unmount(fx->fs);
	fx->fs = NULL;
	assert_int_equal(mount_fs(fx), 0);
	assert_int_equal(ngnfs_getxattr(fx->fs, &file, "user.tier", got, sizeof(got)), 4);
	assert_memory_equal(got, "tape", 4);
	assert_int_equal(ngnfs_getxattr(fx->fs, &file, "trusted.map", NULL, 0), sizeof(big));
	assert_int_equal(ngnfs_getxattr(fx->fs, &file, "trusted.map", got, 10), -ERANGE);
	assert_int_equal(ngnfs_getxattr(fx->fs, &file, "trusted.map", got, sizeof(got)),
			 sizeof(big));
	assert_memory_equal(got, big, sizeof(big));
	assert_int_equal(ngnfs_listxattr(fx->fs, &file, list, sizeof(list)),
			 sizeof("user.tier") + sizeof("trusted.map"));
	assert_memory_equal(list, "user.tier\0trusted.map\0", sizeof("user.tier\0trusted.map"));
	assert_int_equal(ngnfs_removexattr(fx->fs, &file, "trusted.map"), 0);
	assert_int_equal(ngnfs_removexattr(fx->fs, &file, "trusted.map"), -ENODATA);
	assert_int_equal(ngnfs_getxattr(fx->fs, &file, "trusted.map", NULL, 0), -ENODATA);
}

static void test_unlink_frees_blocks(void **state)
{
	struct fixture *fx = *state;
	size_t length = 2 * 1024 * 1024;
	uint8_t *data = calloc(1, length);
	struct ngnfs_statfs before, during, after;
	struct ngnfs_handle file;

	assert_non_null(data);
	step("statfs before");
	assert_int_equal(ngnfs_sync(fx->fs), 0);
	assert_int_equal(ngnfs_statfs(fx->fs, &before), 0);
	create_file(fx, "doomed", &file);
	write_all(fx, &file, 0, data, length);
	assert_int_equal(ngnfs_setxattr(fx->fs, &file, "user.v", data, 60000, 0), 0);
	assert_int_equal(ngnfs_sync(fx->fs), 0);
	assert_int_equal(ngnfs_statfs(fx->fs, &during), 0);
	/* 512 data blocks, a map, 15 xattr value blocks and an index block at least */
	if (before.free_blocks - during.free_blocks < 512 + 1 + 15 + 1)
		fail_msg("free blocks: expected at least %d fewer after writing, got %" PRIu64
			 " -> %" PRIu64,
			 512 + 1 + 15 + 1, before.free_blocks, during.free_blocks);
	step("unlink");
	assert_int_equal(ngnfs_unlink(fx->fs, &fx->root, "doomed"), 0);
	assert_int_equal(ngnfs_sync(fx->fs), 0);
	assert_int_equal(ngnfs_statfs(fx->fs, &after), 0);
	/* everything but what allocation pools hold back came back */
	if (during.free_blocks + 512 + 1 + 15 + 1 > after.free_blocks)
		fail_msg("free blocks after unlink: expected at least %" PRIu64 ", got %" PRIu64,
			 during.free_blocks + 512 + 1 + 15 + 1, after.free_blocks);
	free(data);
}

struct writer {
	struct fixture *fx;
	struct ngnfs_handle file;
	uint64_t offset;
	const uint8_t *data;
	size_t length;
	ssize_t result;
};

static void *writer_thread(void *arg)
{
	struct writer *writer = arg;
	size_t done = 0;

	/* in odd-sized pieces so that the writers' transactions interleave */
	while (done < writer->length) {
		size_t piece = writer->length - done < 70001 ? writer->length - done : 70001;
		ssize_t ret = ngnfs_write(writer->fx->fs, &writer->file, writer->offset + done,
					  writer->data + done, piece, NGNFS_WRITE_MOUNT);

		if (ret <= 0) {
			writer->result = ret;
			return NULL;
		}
		done += (size_t)ret;
	}
	writer->result = (ssize_t)done;
	return NULL;
}

/* Writers to one file from several threads: the inode and maps are shared, each range is not. */
static void test_concurrent_writers(void **state)
{
	struct fixture *fx = *state;
	enum { WRITERS = 4 };
	size_t length = 1024 * 1024 + 123;
	uint8_t *data = malloc(length * WRITERS);
	struct writer writers[WRITERS];
	pthread_t threads[WRITERS];
	struct ngnfs_handle file;
	struct ngnfs_attr attr;

	assert_non_null(data);
	fill_random(fx, data, length * WRITERS);
	create_file(fx, "shared", &file);
	step("concurrent writers");
	for (int i = 0; i < WRITERS; i++) {
		writers[i] = (struct writer){ .fx = fx,
					      .file = file,
					      .offset = (uint64_t)i * length,
					      .data = data + (size_t)i * length,
					      .length = length };
		assert_int_equal(pthread_create(&threads[i], NULL, writer_thread, &writers[i]), 0);
	}
	for (int i = 0; i < WRITERS; i++) {
		pthread_join(threads[i], NULL);
		if (writers[i].result != (ssize_t)length)
			fail_msg("writer %d: expected %zu bytes written, got %zd (%s)", i, length,
				 writers[i].result, ngnfs_last_error());
	}
	assert_int_equal(ngnfs_getattr(fx->fs, &file, &attr), 0);
	assert_int_equal(attr.size, length * WRITERS);
	expect_contents(fx, &file, 0, data, length * WRITERS);
	free(data);
}

/* A second client (another mount) sees what the first wrote, and the first sees its change. */
static void test_two_clients(void **state)
{
	struct fixture *fx = *state;
	struct ngnfs_mount_options options = {
		.device_addresses = ngnfs_test_cluster_addresses(fx->cluster),
		.device_count = DEVICES,
		.durability = NGNFS_MOUNT_STABLE,
	};
	struct ngnfs_fs *first = fx->fs, *second = NULL;
	struct ngnfs_handle file;
	uint8_t data[10000], got[10000];
	bool eof;

	fill_random(fx, data, sizeof(data));
	create_file(fx, "both", &file);
	write_all(fx, &file, 0, data, sizeof(data));
	step("second client");
	assert_int_equal(ngnfs_setxattr(first, &file, "user.s", "one", 3, 0), 0);
	assert_int_equal(ngnfs_mount(&options, &second), 0);
	assert_int_equal(ngnfs_read(second, &file, 0, got, sizeof(got), &eof), sizeof(got));
	assert_memory_equal(got, data, sizeof(data));
	assert_int_equal(ngnfs_getxattr(second, &file, "user.s", got, sizeof(got)), 3);
	assert_memory_equal(got, "one", 3);
	/* the second overwrites the middle; the first's cached copy must be revoked */
	memset(data + 3000, 0x5a, 2000);
	assert_int_equal(ngnfs_write(second, &file, 3000, data + 3000, 2000, NGNFS_WRITE_MOUNT),
			 2000);
	assert_int_equal(ngnfs_setxattr(second, &file, "user.s", "two", 3, XATTR_REPLACE), 0);
	assert_int_equal(ngnfs_read(first, &file, 0, got, sizeof(got), &eof), sizeof(got));
	assert_memory_equal(got, data, sizeof(data));
	assert_int_equal(ngnfs_getxattr(first, &file, "user.s", got, sizeof(got)), 3);
	assert_memory_equal(got, "two", 3);
	ngnfs_unmount(second);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_data_end_to_end, setup, teardown),
		cmocka_unit_test_setup_teardown(test_xattr_end_to_end, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unlink_frees_blocks, setup, teardown),
		cmocka_unit_test_setup_teardown(test_concurrent_writers, setup, teardown),
		cmocka_unit_test_setup_teardown(test_two_clients, setup, teardown),
	};

	return cmocka_run_group_tests_name("data_cluster", tests, NULL, NULL);
}
