// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * File data over the txn.h test double: what a file reads back is what
 * was written, byte for byte, at any offset up to past 1 TiB; holes read
 * as zeros and allocate nothing; truncate frees what is past the end and
 * zeroes the tail; data_blocks counts exactly what is allocated; data
 * spreads over the devices; a large write never builds a dirty set above
 * the bound; and all of it holds while the double keeps refusing blocks
 * with -EAGAIN (each operation re-run from the start).
 *
 * The double counts committed allocations and frees and the blocks alive
 * on each device, so the tests check the effect on storage, not only what
 * the functions return.
 */

#include <errno.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h> /* S_IF*; sys/stat.h clashes with format-msg.h over __le64 */
#include <cmocka.h>

#include "data.h"
#include "fake_txn.h"
#include "fs-internal.h"
#include "test_util.h"

#define BLOCK	  NGNFS_BLOCK_SIZE
#define RETRY_PCT 5
#define TIB	  (1ULL << 40)

struct fixture {
	struct ngnfs_cache *cache;
	struct ngnfs_handle file;
	uint64_t random;
};

static int setup_devices(void **state, uint16_t devices)
{
	struct fixture *fx = calloc(1, sizeof(*fx));

	if (!fx)
		return -1;
	fx->random = ngnfs_test_seed("data");
	fx->cache = ngnfs_fake_cache_create(devices, RETRY_PCT, fx->random);
	if (!fx->cache || ngnfs_test_make_inode(fx->cache, 0, S_IFREG | 0644, &fx->file) != 0) {
		ngnfs_fake_cache_destroy(fx->cache);
		free(fx);
		return -1;
	}
	*state = fx;
	return 0;
}

static int setup(void **state)
{
	return setup_devices(state, 3);
}

static int setup_four(void **state)
{
	return setup_devices(state, 4);
}

static int teardown(void **state)
{
	struct fixture *fx = *state;

	ngnfs_fake_cache_destroy(fx->cache);
	free(fx);
	return 0;
}

static void fill_random(struct fixture *fx, uint8_t *buffer, size_t length)
{
	for (size_t i = 0; i < length; i++)
		buffer[i] = (uint8_t)(ngnfs_test_random(&fx->random) >> 56);
}

static uint8_t *must_alloc(size_t length)
{
	uint8_t *p = calloc(1, length ? length : 1);

	if (!p)
		fail_msg("out of memory allocating %zu bytes", length);
	return p;
}

static void write_all(struct fixture *fx, uint64_t offset, const void *buffer, size_t length)
{
	ssize_t ret =
	    ngnfs_data_write(fx->cache, &fx->file, offset, buffer, length, NGNFS_WRITE_MOUNT);

	if (ret != (ssize_t)length)
		fail_msg("write of %zu bytes at %" PRIu64 ": expected %zu, got %zd", length, offset,
			 length, ret);
}

/* Read [offset, offset+length) and compare with expected, naming the first differing byte. */
static void expect_contents(struct fixture *fx, uint64_t offset, const uint8_t *expected,
			    size_t length)
{
	uint8_t *got = must_alloc(length);
	bool eof = false;
	ssize_t ret = ngnfs_data_read(fx->cache, &fx->file, offset, got, length, &eof);

	if (ret != (ssize_t)length) {
		free(got);
		fail_msg("read of %zu bytes at %" PRIu64 ": expected %zu, got %zd", length, offset,
			 length, ret);
	}
	for (size_t i = 0; i < length; i++) {
		if (got[i] != expected[i]) {
			uint8_t g = got[i], e = expected[i];

			free(got);
			fail_msg("byte at offset %" PRIu64 ": expected 0x%02x, got 0x%02x",
				 offset + i, e, g);
		}
	}
	free(got);
}

static void expect_zeros(struct fixture *fx, uint64_t offset, size_t length)
{
	uint8_t *zeros = must_alloc(length);

	expect_contents(fx, offset, zeros, length);
	free(zeros);
}

static struct ngnfs_attr attr_of(struct fixture *fx)
{
	struct ngnfs_attr attr;
	int ret = ngnfs_test_getattr(fx->cache, &fx->file, &attr);

	if (ret != 0)
		fail_msg("getattr: expected 0, got %d", ret);
	return attr;
}

/* Every block alive besides the inode belongs to the file: data_blocks must count them all. */
static void expect_accounting(struct fixture *fx)
{
	struct ngnfs_fake_counters counters;
	struct ngnfs_attr attr = attr_of(fx);

	ngnfs_fake_counters(fx->cache, &counters);
	if (attr.blocks != (counters.live_blocks - 1) * (BLOCK / 512))
		fail_msg("st_blocks: expected %" PRIu64 " (live blocks %" PRIu64
			 " minus the inode), got %" PRIu64,
			 (counters.live_blocks - 1) * (BLOCK / 512), counters.live_blocks,
			 attr.blocks);
}

static void test_small_write_reads_back(void **state)
{
	struct fixture *fx = *state;
	char buffer[16] = { 0 };
	bool eof = false;
	ssize_t ret;

	write_all(fx, 0, "hello", 5);
	ret = ngnfs_data_read(fx->cache, &fx->file, 0, buffer, sizeof(buffer), &eof);
	assert_int_equal(ret, 5);
	assert_memory_equal(buffer, "hello", 5);
	assert_true(eof);
	assert_int_equal(attr_of(fx).size, 5);
	/* height 0: one data block, no map */
	assert_int_equal(attr_of(fx).blocks, BLOCK / 512);
	ret = ngnfs_data_read(fx->cache, &fx->file, 5, buffer, sizeof(buffer), &eof);
	assert_int_equal(ret, 0);
	assert_true(eof);
	ret = ngnfs_data_read(fx->cache, &fx->file, 1000, buffer, sizeof(buffer), &eof);
	assert_int_equal(ret, 0);
	expect_accounting(fx);
}

static void test_unaligned_large_write(void **state)
{
	struct fixture *fx = *state;
	size_t length = 3 * 1024 * 1024 + 777; /* crosses several transactions */
	uint64_t offset = 12345;
	uint8_t *data = must_alloc(length);
	uint8_t *got = must_alloc(length + 100);
	bool eof = false;
	ssize_t ret;

	fill_random(fx, data, length);
	write_all(fx, offset, data, length);
	assert_int_equal(attr_of(fx).size, offset + length);
	expect_contents(fx, offset, data, length);
	expect_zeros(fx, 0, offset);
	/* reading past the end is short, with end of file */
	ret = ngnfs_data_read(fx->cache, &fx->file, offset + length - 50, got, 150, &eof);
	assert_int_equal(ret, 50);
	assert_true(eof);
	assert_memory_equal(got, data + length - 50, 50);
	/* unaligned reads of odd lengths in the middle */
	for (int i = 0; i < 50; i++) {
		uint64_t at = ngnfs_test_random(&fx->random) % length;
		size_t len = ngnfs_test_random(&fx->random) % 20000;

		if (len > length - at)
			len = length - at;
		expect_contents(fx, offset + at, data + at, len);
	}
	expect_accounting(fx);
	free(data);
	free(got);
}

static void test_appends_and_overwrites(void **state)
{
	struct fixture *fx = *state;
	size_t capacity = 600 * 1024;
	uint8_t *reference = must_alloc(capacity);
	size_t size = 0;

	while (size < capacity - 10000) {
		size_t len = 1 + ngnfs_test_random(&fx->random) % 9999;

		fill_random(fx, reference + size, len);
		write_all(fx, size, reference + size, len);
		size += len;
	}
	assert_int_equal(attr_of(fx).size, size);
	expect_contents(fx, 0, reference, size);
	for (int i = 0; i < 100; i++) {
		uint64_t at = ngnfs_test_random(&fx->random) % size;
		size_t len = 1 + ngnfs_test_random(&fx->random) % 9000;

		if (len > size - at)
			len = size - at;
		fill_random(fx, reference + at, len);
		write_all(fx, at, reference + at, len);
	}
	assert_int_equal(attr_of(fx).size, size);
	expect_contents(fx, 0, reference, size);
	expect_accounting(fx);
	free(reference);
}

static void test_overwrite_allocates_nothing(void **state)
{
	struct fixture *fx = *state;
	uint8_t data[3 * BLOCK];
	struct ngnfs_fake_counters before, after;

	fill_random(fx, data, sizeof(data));
	write_all(fx, 0, data, sizeof(data));
	ngnfs_fake_counters(fx->cache, &before);
	fill_random(fx, data, sizeof(data));
	write_all(fx, 100, data, sizeof(data) - 200);
	ngnfs_fake_counters(fx->cache, &after);
	assert_int_equal(after.allocs, before.allocs);
	assert_int_equal(after.frees, before.frees);
	expect_contents(fx, 100, data, sizeof(data) - 200);
}

static void test_sparse_holes_read_zeros(void **state)
{
	struct fixture *fx = *state;
	uint64_t far = 10 * 1024 * 1024 + 100;
	uint8_t data[5000];
	struct ngnfs_fake_counters counters;

	fill_random(fx, data, sizeof(data));
	write_all(fx, far, data, sizeof(data));
	expect_zeros(fx, 0, (size_t)far);
	expect_contents(fx, far, data, sizeof(data));
	/* two data blocks plus one leaf map and the root: nothing for the hole */
	ngnfs_fake_counters(fx->cache, &counters);
	assert_int_equal(counters.live_blocks, 1 + 2 + 2);
	expect_accounting(fx);
	/* writing into the hole fills exactly the blocks written */
	write_all(fx, 3 * BLOCK, data, BLOCK);
	expect_contents(fx, 3 * BLOCK, data, BLOCK);
	expect_zeros(fx, 0, 3 * BLOCK);
	expect_zeros(fx, 4 * BLOCK, (size_t)(far - 4 * BLOCK));
	expect_accounting(fx);
}

static void test_one_tib_offset(void **state)
{
	struct fixture *fx = *state;
	uint64_t offset = TIB - BLOCK;
	uint8_t data[BLOCK];
	struct ngnfs_fake_counters counters;
	struct ngnfs_attr attr;

	fill_random(fx, data, sizeof(data));
	write_all(fx, 0, "start", 5);
	write_all(fx, offset, data, sizeof(data));
	attr = attr_of(fx);
	assert_int_equal(attr.size, TIB);
	expect_contents(fx, offset, data, sizeof(data));
	expect_contents(fx, 0, (const uint8_t *)"start", 5);
	/* holes before it, far from both ends */
	expect_zeros(fx, TIB / 2 + 12345, 3 * BLOCK);
	expect_zeros(fx, offset - 2 * BLOCK, 2 * BLOCK);
	/* 2^28 blocks need height 4: two data blocks, one root, two paths of three maps */
	ngnfs_fake_counters(fx->cache, &counters);
	assert_int_equal(counters.live_blocks, 1 + 2 + 1 + 3 + 3);
	expect_accounting(fx);
	/* cutting it back frees the far blocks without walking the hole */
	assert_int_equal(ngnfs_data_set_size(fx->cache, &fx->file, 5), 0);
	ngnfs_fake_counters(fx->cache, &counters);
	assert_int_equal(counters.live_blocks, 1 + 1);
	assert_int_equal(attr_of(fx).size, 5);
	expect_contents(fx, 0, (const uint8_t *)"start", 5);
	expect_accounting(fx);
}

static void test_write_past_largest_file(void **state)
{
	struct fixture *fx = *state;
	ssize_t ret;

	ret = ngnfs_data_write(fx->cache, &fx->file, NGNFS_DATA_MAX_FILE_SIZE - 10, "0123456789x",
			       11, NGNFS_WRITE_MOUNT);
	assert_int_equal(ret, -EFBIG);
	ret = ngnfs_data_write(fx->cache, &fx->file, NGNFS_DATA_MAX_FILE_SIZE - 10, "0123456789",
			       10, NGNFS_WRITE_MOUNT);
	assert_int_equal(ret, 10);
	expect_contents(fx, NGNFS_DATA_MAX_FILE_SIZE - 10, (const uint8_t *)"0123456789", 10);
	assert_int_equal(ngnfs_data_set_size(fx->cache, &fx->file, NGNFS_DATA_MAX_FILE_SIZE + 1),
			 -EFBIG);
	assert_int_equal(ngnfs_data_set_size(fx->cache, &fx->file, 0), 0);
	expect_accounting(fx);
	assert_int_equal(attr_of(fx).blocks, 0);
}

static void test_truncate_down_and_up(void **state)
{
	struct fixture *fx = *state;
	size_t length = 50 * 1024 + 33;
	uint8_t *data = must_alloc(length);
	struct ngnfs_fake_counters before, after;
	uint64_t cut = 10001;

	fill_random(fx, data, length);
	write_all(fx, 0, data, length);
	ngnfs_fake_counters(fx->cache, &before);
	assert_int_equal(ngnfs_data_set_size(fx->cache, &fx->file, cut), 0);
	ngnfs_fake_counters(fx->cache, &after);
	assert_int_equal(attr_of(fx).size, cut);
	/* 13 data blocks + root map became 3 data blocks, no map (height 1 -> still 1) */
	assert_int_equal(after.frees - before.frees, 13 - 3);
	expect_contents(fx, 0, data, cut);
	expect_accounting(fx);

	/* up: no allocation, and the old tail of the partial block reads as zeros */
	ngnfs_fake_counters(fx->cache, &before);
	assert_int_equal(ngnfs_data_set_size(fx->cache, &fx->file, 40000), 0);
	ngnfs_fake_counters(fx->cache, &after);
	assert_int_equal(after.allocs, before.allocs);
	assert_int_equal(attr_of(fx).size, 40000);
	expect_contents(fx, 0, data, cut);
	expect_zeros(fx, cut, 40000 - cut);

	/* down to one block collapses the map: height 0, one block */
	assert_int_equal(ngnfs_data_set_size(fx->cache, &fx->file, 100), 0);
	assert_int_equal(attr_of(fx).blocks, BLOCK / 512);
	expect_contents(fx, 0, data, 100);
	/* and to 0 frees everything */
	assert_int_equal(ngnfs_data_set_size(fx->cache, &fx->file, 0), 0);
	ngnfs_fake_counters(fx->cache, &after);
	assert_int_equal(after.live_blocks, 1);
	assert_int_equal(attr_of(fx).blocks, 0);
	/* the file grows again from nothing */
	write_all(fx, 7, data, 10);
	expect_zeros(fx, 0, 7);
	expect_contents(fx, 7, data, 10);
	expect_accounting(fx);
	free(data);
}

static void test_truncate_inside_transaction_frees(void **state)
{
	struct fixture *fx = *state;
	uint8_t data[BLOCK * 5];
	struct ngnfs_fake_counters counters;

	fill_random(fx, data, sizeof(data));
	write_all(fx, 0, data, sizeof(data));
	/* the inode free path: every block goes with the inode */
	assert_int_equal(ngnfs_test_free_inode(fx->cache, &fx->file), 0);
	ngnfs_fake_counters(fx->cache, &counters);
	assert_int_equal(counters.live_blocks, 0);
	/* a fresh inode for teardown's sake */
	assert_int_equal(ngnfs_test_make_inode(fx->cache, 0, S_IFREG | 0644, &fx->file), 0);
}

static void test_large_write_bounded_transactions(void **state)
{
	struct fixture *fx = *state;
	size_t length = 8 * 1024 * 1024;
	uint8_t *data = must_alloc(length);
	struct ngnfs_fake_counters counters;

	fill_random(fx, data, length);
	ngnfs_fake_reset_max_dirty(fx->cache);
	write_all(fx, 0, data, length);
	ngnfs_fake_counters(fx->cache, &counters);
	/* 128 data blocks, the maps on their path (at most 3 at height 2) and the inode */
	if (counters.max_dirty > NGNFS_DATA_TXN_BLOCKS + 4)
		fail_msg("largest dirty set: expected at most %u blocks, got %" PRIu64,
			 NGNFS_DATA_TXN_BLOCKS + 4, counters.max_dirty);
	expect_contents(fx, 0, data, length);
	/* truncating it to zero is bounded too */
	ngnfs_fake_reset_max_dirty(fx->cache);
	assert_int_equal(ngnfs_data_set_size(fx->cache, &fx->file, 0), 0);
	ngnfs_fake_counters(fx->cache, &counters);
	if (counters.max_dirty > NGNFS_DATA_TXN_BLOCKS + 4)
		fail_msg("largest truncate dirty set: expected at most %u blocks, got %" PRIu64,
			 NGNFS_DATA_TXN_BLOCKS + 4, counters.max_dirty);
	assert_int_equal(counters.live_blocks, 1);
	free(data);
}

static void test_spread_over_devices(void **state)
{
	struct fixture *fx = *state;
	size_t blocks = 1024;
	uint8_t *data = must_alloc(blocks * BLOCK);
	uint64_t per_device[4];

	fill_random(fx, data, blocks * BLOCK);
	write_all(fx, 0, data, blocks * BLOCK);
	for (uint16_t d = 0; d < 4; d++)
		per_device[d] = ngnfs_fake_live_on_device(fx->cache, d);
	/* device 0 also holds the inode and the 4 map blocks (root + 3 leaves) */
	assert_int_equal(per_device[0], blocks / 4 + 1 + 4);
	for (uint16_t d = 1; d < 4; d++)
		if (per_device[d] != blocks / 4)
			fail_msg("device %u: expected %zu data blocks, got %" PRIu64, d, blocks / 4,
				 per_device[d]);
	/* the placement function itself */
	assert_int_equal(ngnfs_data_device_for(fx->file.ino, 5, 4),
			 (ngnfs_blkno_device(fx->file.ino) + 5) % 4);
	assert_int_equal(ngnfs_data_device_for(fx->file.ino, 0, 4),
			 ngnfs_blkno_device(fx->file.ino));
	expect_contents(fx, 0, data, blocks * BLOCK);
	free(data);
}

static void test_times_and_change(void **state)
{
	struct fixture *fx = *state;
	struct ngnfs_attr before = attr_of(fx), after;

	write_all(fx, 0, "abc", 3);
	after = attr_of(fx);
	assert_true(after.change > before.change);
	assert_true(after.mtime.tv_sec > before.mtime.tv_sec ||
		    (after.mtime.tv_sec == before.mtime.tv_sec &&
		     after.mtime.tv_nsec >= before.mtime.tv_nsec));
	assert_true(after.ctime.tv_sec == after.mtime.tv_sec &&
		    after.ctime.tv_nsec == after.mtime.tv_nsec);
	before = after;
	assert_int_equal(ngnfs_data_set_size(fx->cache, &fx->file, 1), 0);
	after = attr_of(fx);
	assert_true(after.change > before.change);
	/* reads change nothing */
	before = after;
	{
		char c;
		bool eof;

		assert_int_equal(ngnfs_data_read(fx->cache, &fx->file, 0, &c, 1, &eof), 1);
	}
	after = attr_of(fx);
	assert_int_equal(after.change, before.change);
}

static void test_not_a_regular_file(void **state)
{
	struct fixture *fx = *state;
	struct ngnfs_handle dir, fifo;
	char buffer[4];
	bool eof;

	assert_int_equal(ngnfs_test_make_inode(fx->cache, 1, S_IFDIR | 0755, &dir), 0);
	assert_int_equal(ngnfs_test_make_inode(fx->cache, 1, S_IFIFO | 0644, &fifo), 0);
	assert_int_equal(ngnfs_data_read(fx->cache, &dir, 0, buffer, 4, &eof), -EISDIR);
	assert_int_equal(ngnfs_data_write(fx->cache, &dir, 0, buffer, 4, NGNFS_WRITE_MOUNT),
			 -EISDIR);
	assert_int_equal(ngnfs_data_write(fx->cache, &fifo, 0, buffer, 4, NGNFS_WRITE_MOUNT),
			 -EINVAL);
	assert_int_equal(ngnfs_data_set_size(fx->cache, &fifo, 10), -EINVAL);
}

static void test_stale_handle(void **state)
{
	struct fixture *fx = *state;
	struct ngnfs_handle stale = fx->file;
	char buffer[4];
	bool eof;

	stale.generation++;
	assert_int_equal(ngnfs_data_read(fx->cache, &stale, 0, buffer, 4, &eof), -ESTALE);
	assert_int_equal(ngnfs_data_write(fx->cache, &stale, 0, buffer, 4, NGNFS_WRITE_MOUNT),
			 -ESTALE);
}

/* A map block that is not what its pointer promised is -EIO, never data. */
static void test_corrupt_map_block(void **state)
{
	struct fixture *fx = *state;
	uint8_t data[BLOCK * 2];
	uint8_t *inode_block, *map;
	uint64_t root;
	char buffer[16];
	bool eof;

	fill_random(fx, data, sizeof(data));
	write_all(fx, 0, data, sizeof(data));
	inode_block = ngnfs_fake_block(fx->cache, fx->file.ino);
	assert_non_null(inode_block);
	root = le64toh(((struct ngnfs_inode *)inode_block)->data_root);
	map = ngnfs_fake_block(fx->cache, root);
	assert_non_null(map);
	/* a level field that lies */
	((struct ngnfs_data_map *)map)->level = htole32(2);
	assert_int_equal(ngnfs_data_read(fx->cache, &fx->file, 0, buffer, sizeof(buffer), &eof),
			 -EIO);
	assert_int_equal(ngnfs_data_write(fx->cache, &fx->file, BLOCK, "x", 1, NGNFS_WRITE_MOUNT),
			 -EIO);
	((struct ngnfs_data_map *)map)->level = htole32(1);
	/* a foreign owner */
	((struct ngnfs_data_map *)map)->header.owner_ino = htole64(fx->file.ino + 1);
	assert_int_equal(ngnfs_data_read(fx->cache, &fx->file, 0, buffer, sizeof(buffer), &eof),
			 -EIO);
	((struct ngnfs_data_map *)map)->header.owner_ino = htole64(fx->file.ino);
	/* a pointer count that disagrees with the pointers (truncate would trust it) */
	((struct ngnfs_data_map *)map)->pointer_count = htole32(1);
	assert_int_equal(ngnfs_data_set_size(fx->cache, &fx->file, 0), -EIO);
	((struct ngnfs_data_map *)map)->pointer_count = htole32(2);
	/* a pointer to a reserved block */
	{
		__le64 saved = ((struct ngnfs_data_map *)map)->pointers[1];

		((struct ngnfs_data_map *)map)->pointers[1] = htole64(3);
		assert_int_equal(
		    ngnfs_data_read(fx->cache, &fx->file, BLOCK, buffer, sizeof(buffer), &eof),
		    -EIO);
		((struct ngnfs_data_map *)map)->pointers[1] = saved;
	}
	expect_contents(fx, 0, data, sizeof(data));
}

/* Random writes and size changes against a reference copy of the file. */
static void test_random_against_reference(void **state)
{
	struct fixture *fx = *state;
	size_t capacity = 4 * 1024 * 1024;
	uint8_t *reference = must_alloc(capacity);
	uint8_t *chunk = must_alloc(capacity);
	uint64_t size = 0;

	for (int step = 0; step < 300; step++) {
		unsigned int what = ngnfs_test_random(&fx->random) % 10;

		if (what < 7) {
			uint64_t at = ngnfs_test_random(&fx->random) % (capacity - 1);
			size_t len =
			    1 + ngnfs_test_random(&fx->random) % (what == 0 ? 600000 : 9000);

			if (len > capacity - at)
				len = capacity - at;
			fill_random(fx, chunk, len);
			write_all(fx, at, chunk, len);
			memcpy(reference + at, chunk, len);
			if (at + len > size)
				size = at + len;
		} else {
			uint64_t new_size = ngnfs_test_random(&fx->random) % capacity;
			int ret = ngnfs_data_set_size(fx->cache, &fx->file, new_size);

			if (ret != 0)
				fail_msg("step %d: set size %" PRIu64 ": expected 0, got %d", step,
					 new_size, ret);
			if (new_size < size)
				memset(reference + new_size, 0, size - new_size);
			size = new_size;
		}
		if (attr_of(fx).size != size)
			fail_msg("step %d: size expected %" PRIu64 ", got %" PRIu64, step, size,
				 attr_of(fx).size);
		if (step % 25 == 0) {
			expect_contents(fx, 0, reference, size);
			expect_accounting(fx);
		}
	}
	expect_contents(fx, 0, reference, size);
	expect_accounting(fx);
	assert_int_equal(ngnfs_data_set_size(fx->cache, &fx->file, 0), 0);
	expect_accounting(fx);
	free(reference);
	free(chunk);
}

/* A server handing out a reserved block (0 is "hole") is refused, and nothing is written. */
static void test_reserved_allocation_refused(void **state)
{
	struct fixture *fx = *state;
	uint16_t device = ngnfs_data_device_for(fx->file.ino, 0, 3);
	struct ngnfs_fake_counters before, after;

	ngnfs_fake_set_retry_percent(fx->cache, 0);
	ngnfs_fake_counters(fx->cache, &before);
	ngnfs_fake_set_next_index(fx->cache, device, 0);
	assert_int_equal(ngnfs_data_write(fx->cache, &fx->file, 0, "x", 1, NGNFS_WRITE_MOUNT),
			 -EIO);
	ngnfs_fake_counters(fx->cache, &after);
	assert_int_equal(after.allocs, before.allocs);
	assert_int_equal(attr_of(fx).size, 0);
	ngnfs_fake_set_next_index(fx->cache, device, 1000);
	write_all(fx, 0, "x", 1);
	expect_contents(fx, 0, (const uint8_t *)"x", 1);
}

/*
 * STABLE: every transaction of the write asks for durability; UNSTABLE:
 * every one asks not to wait; MOUNT: neither (the mount decides).
 */
static void test_stable_write(void **state)
{
	struct fixture *fx = *state;
	size_t length = 3 * NGNFS_DATA_TXN_BLOCKS * BLOCK;
	uint8_t *data = must_alloc(length);
	struct ngnfs_fake_counters before, after;

	fill_random(fx, data, length);
	ngnfs_fake_counters(fx->cache, &before);
	write_all(fx, 0, data, length);
	ngnfs_fake_counters(fx->cache, &after);
	assert_int_equal(after.stable_commits, before.stable_commits);
	assert_int_equal(after.unstable_commits, before.unstable_commits);
	assert_int_equal(
	    ngnfs_data_write(fx->cache, &fx->file, 0, data, length, NGNFS_WRITE_STABLE),
	    (ssize_t)length);
	before = after;
	ngnfs_fake_counters(fx->cache, &after);
	assert_int_equal(after.commits - before.commits, 3);
	assert_int_equal(after.stable_commits - before.stable_commits, 3);
	assert_int_equal(after.unstable_commits, before.unstable_commits);
	fill_random(fx, data, length);
	assert_int_equal(
	    ngnfs_data_write(fx->cache, &fx->file, 0, data, length, NGNFS_WRITE_UNSTABLE),
	    (ssize_t)length);
	before = after;
	ngnfs_fake_counters(fx->cache, &after);
	assert_int_equal(after.commits - before.commits, 3);
	assert_int_equal(after.stable_commits, before.stable_commits);
	assert_int_equal(after.unstable_commits - before.unstable_commits, 3);
	expect_contents(fx, 0, data, length);
	free(data);
}

static void test_retries_happened(void **state)
{
	struct fixture *fx = *state;
	struct ngnfs_fake_counters counters;
	uint8_t data[BLOCK * 20];

	fill_random(fx, data, sizeof(data));
	for (int i = 0; i < 20; i++)
		write_all(fx, (uint64_t)i * 7919, data, sizeof(data) - (size_t)i * 100);
	ngnfs_fake_counters(fx->cache, &counters);
	/* the point of the double: operations were really re-run */
	if (counters.retries == 0)
		fail_msg("expected injected retries at %u%%, got none in %" PRIu64 " runs",
			 RETRY_PCT, counters.runs);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_small_write_reads_back, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unaligned_large_write, setup, teardown),
		cmocka_unit_test_setup_teardown(test_appends_and_overwrites, setup, teardown),
		cmocka_unit_test_setup_teardown(test_overwrite_allocates_nothing, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sparse_holes_read_zeros, setup, teardown),
		cmocka_unit_test_setup_teardown(test_one_tib_offset, setup, teardown),
		cmocka_unit_test_setup_teardown(test_write_past_largest_file, setup, teardown),
		cmocka_unit_test_setup_teardown(test_truncate_down_and_up, setup, teardown),
		cmocka_unit_test_setup_teardown(test_truncate_inside_transaction_frees, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_large_write_bounded_transactions, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_spread_over_devices, setup_four, teardown),
		cmocka_unit_test_setup_teardown(test_times_and_change, setup, teardown),
		cmocka_unit_test_setup_teardown(test_not_a_regular_file, setup, teardown),
		cmocka_unit_test_setup_teardown(test_stale_handle, setup, teardown),
		cmocka_unit_test_setup_teardown(test_corrupt_map_block, setup, teardown),
		cmocka_unit_test_setup_teardown(test_random_against_reference, setup, teardown),
		cmocka_unit_test_setup_teardown(test_reserved_allocation_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_stable_write, setup, teardown),
		cmocka_unit_test_setup_teardown(test_retries_happened, setup, teardown),
	};

	return cmocka_run_group_tests_name("data", tests, NULL, NULL);
}
