// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Extended attributes over the txn.h test double: setxattr(2) semantics
 * (flags, namespaces, limits, the size-0 and too-small conventions of get
 * and list), values up to 64 KiB and names of 255 bytes, thousands of
 * xattrs on one inode, moves between the inline area and index blocks in
 * both directions with every block freed again, the archive agent's
 * update dirtying one block, corruption caught as -EIO, and a randomized
 * run against a reference map (seed printed).  The double injects
 * -EAGAIN throughout, so every operation is also proven re-runnable.
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
#include <sys/xattr.h>
#include <cmocka.h>

#include "fake_txn.h"
#include "fs-internal.h"
#include "test_util.h"
#include "xattr.h"

#define RETRY_PCT 5

struct fixture {
	struct ngnfs_cache *cache;
	struct ngnfs_handle file;
	uint64_t random;
};

static int setup(void **state)
{
	struct fixture *fx = calloc(1, sizeof(*fx));

	if (!fx)
		return -1;
	fx->random = ngnfs_test_seed("xattr");
	fx->cache = ngnfs_fake_cache_create(2, RETRY_PCT, fx->random);
	if (!fx->cache || ngnfs_test_make_inode(fx->cache, 1, S_IFREG | 0644, &fx->file) != 0) {
		ngnfs_fake_cache_destroy(fx->cache);
		free(fx);
		return -1;
	}
	*state = fx;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *fx = *state;

	ngnfs_fake_cache_destroy(fx->cache);
	free(fx);
	return 0;
}

static uint64_t live_blocks(struct fixture *fx)
{
	struct ngnfs_fake_counters counters;

	ngnfs_fake_counters(fx->cache, &counters);
	return counters.live_blocks;
}

static uint64_t index_blocks(struct fixture *fx)
{
	uint64_t count = 0;
	int ret = ngnfs_xattr_index_blocks(fx->cache, &fx->file, &count);

	if (ret != 0)
		fail_msg("counting index blocks: expected 0, got %d", ret);
	return count;
}

static void set_ok(struct fixture *fx, const char *name, const void *value, size_t size, int flags)
{
	int ret = ngnfs_xattr_set(fx->cache, &fx->file, name, value, size, flags);

	if (ret != 0)
		fail_msg("setxattr \"%.40s\" (%zu bytes, flags %d): expected 0, got %d", name, size,
			 flags, ret);
}

static void expect_xattr(struct fixture *fx, const char *name, const void *value, size_t size)
{
	uint8_t *got = malloc(size + 1);
	ssize_t ret;

	assert_non_null(got);
	ret = ngnfs_xattr_get(fx->cache, &fx->file, name, NULL, 0);
	if (ret != (ssize_t)size) {
		free(got);
		fail_msg("getxattr \"%.40s\" size query: expected %zu, got %zd", name, size, ret);
	}
	ret = ngnfs_xattr_get(fx->cache, &fx->file, name, got, size + 1);
	if (ret != (ssize_t)size || memcmp(got, value, size) != 0) {
		free(got);
		fail_msg("getxattr \"%.40s\": expected %zu bytes matching, got %zd%s", name, size,
			 ret, ret == (ssize_t)size ? " that differ" : "");
	}
	free(got);
}

static void test_set_get_list_remove(void **state)
{
	struct fixture *fx = *state;
	char list[256];
	ssize_t ret;

	set_ok(fx, "user.tier", "tape", 4, 0);
	set_ok(fx, "trusted.media", "VOL0042", 7, 0);
	set_ok(fx, "security.label", "", 0, 0);
	expect_xattr(fx, "user.tier", "tape", 4);
	expect_xattr(fx, "trusted.media", "VOL0042", 7);
	expect_xattr(fx, "security.label", "", 0);

	ret = ngnfs_xattr_list(fx->cache, &fx->file, NULL, 0);
	assert_int_equal(ret,
			 sizeof("user.tier") + sizeof("trusted.media") + sizeof("security.label"));
	ret = ngnfs_xattr_list(fx->cache, &fx->file, list, sizeof(list));
	assert_int_equal(ret,
			 sizeof("user.tier") + sizeof("trusted.media") + sizeof("security.label"));
	assert_memory_equal(list, "user.tier\0trusted.media\0security.label\0", (size_t)ret);
	assert_int_equal(ngnfs_xattr_list(fx->cache, &fx->file, list, (size_t)ret - 1), -ERANGE);

	assert_int_equal(ngnfs_xattr_remove(fx->cache, &fx->file, "trusted.media"), 0);
	assert_int_equal(ngnfs_xattr_get(fx->cache, &fx->file, "trusted.media", NULL, 0), -ENODATA);
	assert_int_equal(ngnfs_xattr_remove(fx->cache, &fx->file, "trusted.media"), -ENODATA);
	ret = ngnfs_xattr_list(fx->cache, &fx->file, list, sizeof(list));
	assert_int_equal(ret, sizeof("user.tier") + sizeof("security.label"));
	assert_memory_equal(list, "user.tier\0security.label\0", (size_t)ret);
	/* small ones are inline: nothing but the inode */
	assert_int_equal(live_blocks(fx), 1);
	assert_int_equal(index_blocks(fx), 0);
}

static void test_flags(void **state)
{
	struct fixture *fx = *state;

	assert_int_equal(ngnfs_xattr_set(fx->cache, &fx->file, "user.a", "1", 1, XATTR_REPLACE),
			 -ENODATA);
	set_ok(fx, "user.a", "1", 1, XATTR_CREATE);
	assert_int_equal(ngnfs_xattr_set(fx->cache, &fx->file, "user.a", "2", 1, XATTR_CREATE),
			 -EEXIST);
	expect_xattr(fx, "user.a", "1", 1);
	set_ok(fx, "user.a", "22", 2, XATTR_REPLACE);
	expect_xattr(fx, "user.a", "22", 2);
	set_ok(fx, "user.a", "333", 3, 0);
	expect_xattr(fx, "user.a", "333", 3);
	assert_int_equal(ngnfs_xattr_set(fx->cache, &fx->file, "user.a", "4", 1, 0x100), -EINVAL);
}

static void test_errors(void **state)
{
	struct fixture *fx = *state;
	char name[300];
	char small[2];
	static uint8_t big[NGNFS_XATTR_VALUE_MAX + 1];

	assert_int_equal(ngnfs_xattr_set(fx->cache, &fx->file, "os2.x", "v", 1, 0), -EOPNOTSUPP);
	assert_int_equal(
	    ngnfs_xattr_set(fx->cache, &fx->file, "system.posix_acl_access", "v", 1, 0),
	    -EOPNOTSUPP);
	assert_int_equal(ngnfs_xattr_get(fx->cache, &fx->file, "nonamespace", NULL, 0),
			 -EOPNOTSUPP);
	assert_int_equal(ngnfs_xattr_set(fx->cache, &fx->file, "", "v", 1, 0), -ERANGE);
	assert_int_equal(ngnfs_xattr_set(fx->cache, &fx->file, "user.", "v", 1, 0), -EINVAL);
	memset(name, 'n', sizeof(name));
	memcpy(name, "user.", 5);
	name[256] = '\0';
	assert_int_equal(ngnfs_xattr_set(fx->cache, &fx->file, name, "v", 1, 0), -ERANGE);
	assert_int_equal(ngnfs_xattr_get(fx->cache, &fx->file, name, NULL, 0), -ERANGE);
	assert_int_equal(ngnfs_xattr_remove(fx->cache, &fx->file, name), -ERANGE);
	assert_int_equal(ngnfs_xattr_set(fx->cache, &fx->file, "user.big", big, sizeof(big), 0),
			 -E2BIG);
	assert_int_equal(ngnfs_xattr_get(fx->cache, &fx->file, "user.missing", NULL, 0), -ENODATA);
	set_ok(fx, "user.three", "abc", 3, 0);
	assert_int_equal(ngnfs_xattr_get(fx->cache, &fx->file, "user.three", small, sizeof(small)),
			 -ERANGE);
	/* nothing failed changed anything */
	assert_int_equal(ngnfs_xattr_list(fx->cache, &fx->file, NULL, 0), sizeof("user.three"));
	assert_int_equal(live_blocks(fx), 1);
}

static void test_longest_name_and_largest_value(void **state)
{
	struct fixture *fx = *state;
	char name[NGNFS_XATTR_NAME_MAX + 1];
	uint8_t *value = malloc(NGNFS_XATTR_VALUE_MAX);
	uint8_t *other = malloc(NGNFS_XATTR_VALUE_MAX);
	char *list = malloc(1024);

	assert_non_null(value);
	assert_non_null(other);
	assert_non_null(list);
	memset(name, 'x', NGNFS_XATTR_NAME_MAX);
	memcpy(name, "trusted.", 8);
	name[NGNFS_XATTR_NAME_MAX] = '\0';
	for (size_t i = 0; i < NGNFS_XATTR_VALUE_MAX; i++) {
		value[i] = (uint8_t)(ngnfs_test_random(&fx->random) >> 56);
		other[i] = (uint8_t)~value[i];
	}
	set_ok(fx, name, value, NGNFS_XATTR_VALUE_MAX, 0);
	expect_xattr(fx, name, value, NGNFS_XATTR_VALUE_MAX);
	/* inode + one index block + 17 value blocks of 4048 bytes */
	assert_int_equal(live_blocks(fx), 1 + 1 + 17);
	set_ok(fx, name, other, NGNFS_XATTR_VALUE_MAX, XATTR_REPLACE);
	expect_xattr(fx, name, other, NGNFS_XATTR_VALUE_MAX);
	assert_int_equal(live_blocks(fx), 1 + 1 + 17);
	assert_int_equal(ngnfs_xattr_list(fx->cache, &fx->file, list, 1024),
			 NGNFS_XATTR_NAME_MAX + 1);
	assert_memory_equal(list, name, NGNFS_XATTR_NAME_MAX + 1);
	assert_int_equal(ngnfs_xattr_remove(fx->cache, &fx->file, name), 0);
	assert_int_equal(live_blocks(fx), 1);
	free(value);
	free(other);
	free(list);
}

static void test_inline_overflow_transitions(void **state)
{
	struct fixture *fx = *state;
	uint8_t value[3000];
	char name[32];
	int inline_count;

	memset(value, 'v', sizeof(value));
	set_ok(fx, "user.state", "online", 6, 0);
	assert_int_equal(index_blocks(fx), 0);
	/* grows past the inline limit: to an index block, the value in a value block */
	set_ok(fx, "user.state", value, 1000 + 100, 0);
	assert_int_equal(index_blocks(fx), 1);
	assert_int_equal(live_blocks(fx), 1 + 1 + 1); /* 1100 > 1024: one value block */
	expect_xattr(fx, "user.state", value, 1100);
	/* 1020 bytes: too big an inline entry, small enough to sit in the index item */
	set_ok(fx, "user.state", value, 1020, 0);
	assert_int_equal(live_blocks(fx), 1 + 1);
	expect_xattr(fx, "user.state", value, 1020);
	/* shrinks back: inline again, the index block freed */
	set_ok(fx, "user.state", "offline", 7, 0);
	assert_int_equal(index_blocks(fx), 0);
	assert_int_equal(live_blocks(fx), 1);
	expect_xattr(fx, "user.state", "offline", 7);

	/* filling the inline area overflows the next ones into an index block */
	for (inline_count = 0; index_blocks(fx) == 0; inline_count++) {
		snprintf(name, sizeof(name), "user.fill%03d", inline_count);
		set_ok(fx, name, value, 200, 0);
	}
	assert_true(inline_count > 10);
	/* removing an inline one makes room: the next small set stays inline */
	assert_int_equal(ngnfs_xattr_remove(fx->cache, &fx->file, "user.fill000"), 0);
	set_ok(fx, "user.small", "s", 1, 0);
	assert_int_equal(index_blocks(fx), 1);
	/* the overflowed one removed: its block goes */
	snprintf(name, sizeof(name), "user.fill%03d", inline_count - 1);
	expect_xattr(fx, name, value, 200);
	assert_int_equal(ngnfs_xattr_remove(fx->cache, &fx->file, name), 0);
	assert_int_equal(index_blocks(fx), 0);
	assert_int_equal(live_blocks(fx), 1);
}

/* The archive agent's case: a small update dirties only the inode, even with overflow. */
static void test_small_update_dirties_one_block(void **state)
{
	struct fixture *fx = *state;
	struct ngnfs_fake_counters counters;
	uint8_t value[2000];
	char name[32];

	memset(value, 'b', sizeof(value));
	for (int i = 0; i < 5; i++) {
		snprintf(name, sizeof(name), "user.big%d", i);
		set_ok(fx, name, value, sizeof(value), 0);
	}
	set_ok(fx, "user.tier", "disk", 4, 0);
	assert_true(index_blocks(fx) >= 1);
	for (int i = 0; i < 10; i++) {
		char tier[16];

		snprintf(tier, sizeof(tier), "tape%d", i);
		set_ok(fx, "user.tier", tier, strlen(tier), XATTR_REPLACE);
		ngnfs_fake_counters(fx->cache, &counters);
		assert_int_equal(counters.last_dirty, 1);
	}
	expect_xattr(fx, "user.tier", "tape9", 5);
}

static void test_ctime_and_change(void **state)
{
	struct fixture *fx = *state;
	struct ngnfs_attr before, after;

	assert_int_equal(ngnfs_test_getattr(fx->cache, &fx->file, &before), 0);
	set_ok(fx, "user.x", "1", 1, 0);
	assert_int_equal(ngnfs_test_getattr(fx->cache, &fx->file, &after), 0);
	assert_true(after.change > before.change);
	assert_true(after.ctime.tv_sec > before.ctime.tv_sec ||
		    (after.ctime.tv_sec == before.ctime.tv_sec &&
		     after.ctime.tv_nsec >= before.ctime.tv_nsec));
	before = after;
	assert_int_equal(ngnfs_xattr_remove(fx->cache, &fx->file, "user.x"), 0);
	assert_int_equal(ngnfs_test_getattr(fx->cache, &fx->file, &after), 0);
	assert_true(after.change > before.change);
	before = after;
	assert_int_equal(ngnfs_xattr_get(fx->cache, &fx->file, "user.x", NULL, 0), -ENODATA);
	assert_int_equal(ngnfs_test_getattr(fx->cache, &fx->file, &after), 0);
	assert_int_equal(after.change, before.change);
}

static void test_many_xattrs(void **state)
{
	struct fixture *fx = *state;
	enum { COUNT = 2000 };
	char name[64], value[64];
	size_t list_size = 0;
	char *list;
	ssize_t ret;

	ngnfs_fake_set_retry_percent(fx->cache, 1); /* each set reads the chain: keep it quick */
	for (int i = 0; i < COUNT; i++) {
		snprintf(name, sizeof(name), "user.archive.copy%05d", i);
		snprintf(value, sizeof(value), "tier=%d media=VOL%06d offset=%d", i % 3, i, i * 7);
		set_ok(fx, name, value, strlen(value), XATTR_CREATE);
		list_size += strlen(name) + 1;
	}
	assert_true(index_blocks(fx) > 10);
	for (int i = 0; i < COUNT; i += 7) {
		snprintf(name, sizeof(name), "user.archive.copy%05d", i);
		snprintf(value, sizeof(value), "tier=%d media=VOL%06d offset=%d", i % 3, i, i * 7);
		expect_xattr(fx, name, value, strlen(value));
	}
	ret = ngnfs_xattr_list(fx->cache, &fx->file, NULL, 0);
	assert_int_equal(ret, list_size);
	list = malloc(list_size);
	assert_non_null(list);
	assert_int_equal(ngnfs_xattr_list(fx->cache, &fx->file, list, list_size), list_size);
	/* every name exactly once */
	{
		static bool seen[COUNT];
		size_t names = 0;

		memset(seen, 0, sizeof(seen));
		for (char *p = list; p < list + list_size; p += strlen(p) + 1) {
			int i = atoi(p + strlen("user.archive.copy"));

			assert_true(i >= 0 && i < COUNT);
			assert_false(seen[i]);
			seen[i] = true;
			names++;
		}
		assert_int_equal(names, COUNT);
	}
	free(list);
	for (int i = 0; i < COUNT; i++) {
		snprintf(name, sizeof(name), "user.archive.copy%05d", i);
		assert_int_equal(ngnfs_xattr_remove(fx->cache, &fx->file, name), 0);
	}
	assert_int_equal(ngnfs_xattr_list(fx->cache, &fx->file, NULL, 0), 0);
	assert_int_equal(index_blocks(fx), 0);
	assert_int_equal(live_blocks(fx), 1);
}

static void test_free_all_with_inode(void **state)
{
	struct fixture *fx = *state;
	uint8_t value[20000];
	char name[32];

	memset(value, 'z', sizeof(value));
	for (int i = 0; i < 40; i++) {
		snprintf(name, sizeof(name), "user.f%d", i);
		set_ok(fx, name, value, (size_t)(i % 4 == 0 ? 20000 : 100 + i * 10), 0);
	}
	assert_true(live_blocks(fx) > 20);
	assert_int_equal(ngnfs_test_free_inode(fx->cache, &fx->file), 0);
	assert_int_equal(live_blocks(fx), 0);
	assert_int_equal(ngnfs_test_make_inode(fx->cache, 1, S_IFREG | 0644, &fx->file), 0);
}

static void test_corrupt_index_block(void **state)
{
	struct fixture *fx = *state;
	uint8_t value[1500], *block;
	struct ngnfs_inode *inode;
	struct ngnfs_xattr_index *index;
	uint64_t root;

	memset(value, 'c', sizeof(value));
	set_ok(fx, "user.c", value, sizeof(value), 0);
	inode = (struct ngnfs_inode *)ngnfs_fake_block(fx->cache, fx->file.ino);
	root = le64toh(inode->xattr_root);
	block = ngnfs_fake_block(fx->cache, root);
	assert_non_null(block);
	index = (struct ngnfs_xattr_index *)block;
	index->used_bytes = htole16(le16toh(index->used_bytes) + 8);
	assert_int_equal(ngnfs_xattr_get(fx->cache, &fx->file, "user.c", NULL, 0), -EIO);
	assert_int_equal(ngnfs_xattr_list(fx->cache, &fx->file, NULL, 0), -EIO);
	assert_int_equal(ngnfs_xattr_set(fx->cache, &fx->file, "user.d", "1", 1, 0), -EIO);
	index->used_bytes = htole16(le16toh(index->used_bytes) - 8);
	/* a value block that belongs to another item */
	{
		struct ngnfs_xattr_item *item = (struct ngnfs_xattr_item *)index->items;
		__le64 first;
		struct ngnfs_xattr_value *value_block;

		memcpy(&first, index->items + ((sizeof(*item) + item->name_length + 7) & ~7UL),
		       sizeof(first));
		value_block =
		    (struct ngnfs_xattr_value *)ngnfs_fake_block(fx->cache, le64toh(first));
		assert_non_null(value_block);
		value_block->name_hash ^= htole64(1);
		assert_int_equal(
		    ngnfs_xattr_get(fx->cache, &fx->file, "user.c", value, sizeof(value)), -EIO);
		value_block->name_hash ^= htole64(1);
	}
	expect_xattr(fx, "user.c", value, sizeof(value));
	/* the inline area's count disagreeing with its entries */
	set_ok(fx, "user.i", "1", 1, 0);
	inode->inline_xattr_count = htole16(le16toh(inode->inline_xattr_count) + 1);
	assert_int_equal(ngnfs_xattr_get(fx->cache, &fx->file, "user.i", NULL, 0), -EIO);
	inode->inline_xattr_count = htole16(le16toh(inode->inline_xattr_count) - 1);
	expect_xattr(fx, "user.i", "1", 1);
}

/* Random operations against a reference map. */
#define REF_NAMES 120

struct reference {
	bool present[REF_NAMES];
	size_t size[REF_NAMES];
	uint8_t *value[REF_NAMES];
};

static void ref_name(char *name, size_t size, int i)
{
	/* a spread of name lengths, some near the maximum */
	int length = 1 + (i * 37) % 240;

	snprintf(name, size, "%s%d.",
		 i % 3 == 0   ? "user."
		 : i % 3 == 1 ? "trusted."
			      : "security.",
		 i);
	for (size_t at = strlen(name); at < (size_t)length + 12 && at < size - 1; at++)
		name[at] = (char)('a' + (at * 7 + (size_t)i) % 26);
	name[(size_t)length + 12 < size - 1 ? (size_t)length + 12 : size - 1] = '\0';
}

static void test_random_against_reference(void **state)
{
	struct fixture *fx = *state;
	struct reference *ref = calloc(1, sizeof(*ref));
	char name[256];
	uint8_t *buffer = malloc(NGNFS_XATTR_VALUE_MAX);

	assert_non_null(ref);
	assert_non_null(buffer);
	for (int step = 0; step < 1500; step++) {
		int i = (int)(ngnfs_test_random(&fx->random) % REF_NAMES);
		unsigned int what = ngnfs_test_random(&fx->random) % 10;
		int ret;

		ref_name(name, sizeof(name), i);
		if (what < 6) {
			unsigned int kind = ngnfs_test_random(&fx->random) % 10;
			size_t size = kind < 6	 ? ngnfs_test_random(&fx->random) % 64
				      : kind < 9 ? ngnfs_test_random(&fx->random) % 3000
						 : ngnfs_test_random(&fx->random) %
						       (NGNFS_XATTR_VALUE_MAX + 1);
			int flags = what == 0 ? XATTR_CREATE : what == 1 ? XATTR_REPLACE : 0;
			int expected = (flags == XATTR_CREATE && ref->present[i])     ? -EEXIST
				       : (flags == XATTR_REPLACE && !ref->present[i]) ? -ENODATA
										      : 0;

			for (size_t b = 0; b < size; b++)
				buffer[b] = (uint8_t)(ngnfs_test_random(&fx->random) >> 56);
			ret = ngnfs_xattr_set(fx->cache, &fx->file, name, buffer, size, flags);
			if (ret != expected)
				fail_msg(
				    "step %d: set \"%.30s\" size %zu flags %d: expected %d, got %d",
				    step, name, size, flags, expected, ret);
			if (ret == 0) {
				free(ref->value[i]);
				ref->value[i] = malloc(size ? size : 1);
				assert_non_null(ref->value[i]);
				memcpy(ref->value[i], buffer, size);
				ref->size[i] = size;
				ref->present[i] = true;
			}
		} else if (what < 8) {
			ret = ngnfs_xattr_remove(fx->cache, &fx->file, name);
			if (ret != (ref->present[i] ? 0 : -ENODATA))
				fail_msg("step %d: remove \"%.30s\": expected %d, got %d", step,
					 name, ref->present[i] ? 0 : -ENODATA, ret);
			ref->present[i] = false;
		} else if (ref->present[i]) {
			expect_xattr(fx, name, ref->value[i], ref->size[i]);
		} else {
			ret = (int)ngnfs_xattr_get(fx->cache, &fx->file, name, buffer,
						   NGNFS_XATTR_VALUE_MAX);
			if (ret != -ENODATA)
				fail_msg("step %d: get of removed \"%.30s\": expected %d, got %d",
					 step, name, -ENODATA, ret);
		}
	}
	/* final state: every present one reads back, the list is exactly the present ones */
	{
		size_t expected_list = 0;

		for (int i = 0; i < REF_NAMES; i++) {
			if (!ref->present[i])
				continue;
			ref_name(name, sizeof(name), i);
			expect_xattr(fx, name, ref->value[i], ref->size[i]);
			expected_list += strlen(name) + 1;
		}
		assert_int_equal(ngnfs_xattr_list(fx->cache, &fx->file, NULL, 0), expected_list);
	}
	for (int i = 0; i < REF_NAMES; i++) {
		if (ref->present[i]) {
			ref_name(name, sizeof(name), i);
			assert_int_equal(ngnfs_xattr_remove(fx->cache, &fx->file, name), 0);
		}
		free(ref->value[i]);
	}
	assert_int_equal(live_blocks(fx), 1);
	free(ref);
	free(buffer);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_set_get_list_remove, setup, teardown),
		cmocka_unit_test_setup_teardown(test_flags, setup, teardown),
		cmocka_unit_test_setup_teardown(test_errors, setup, teardown),
		cmocka_unit_test_setup_teardown(test_longest_name_and_largest_value, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_inline_overflow_transitions, setup, teardown),
		cmocka_unit_test_setup_teardown(test_small_update_dirties_one_block, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_ctime_and_change, setup, teardown),
		cmocka_unit_test_setup_teardown(test_many_xattrs, setup, teardown),
		cmocka_unit_test_setup_teardown(test_free_all_with_inode, setup, teardown),
		cmocka_unit_test_setup_teardown(test_corrupt_index_block, setup, teardown),
		cmocka_unit_test_setup_teardown(test_random_against_reference, setup, teardown),
	};

	return cmocka_run_group_tests_name("xattr", tests, NULL, NULL);
}
