// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Tests of the filesystem's internals that the native API does not
 * show: the btree (called directly inside transactions) and directory
 * hash collisions (forced through the hash test hook).  Kept apart from
 * test_fs.c because fs-internal.h and <sys/stat.h> cannot be included
 * together (both define __le64).
 */

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "btree.h"
#include "fs-internal.h"
#include "fs_test_util.h"

/* ---- btree tests (inside transactions) ---- */

#define BTREE_MAX_KEYS 6000
/* the real stack pays a network round trip per step: fewer steps there */
#ifdef NGNFS_FS_TEST_REAL
#define BTREE_STEPS	      6000
#define BTREE_SEQUENTIAL_KEYS 4000
#else
#define BTREE_STEPS	      30000
#define BTREE_SEQUENTIAL_KEYS 20000
#endif

struct btree_ref {
	uint64_t keys[BTREE_MAX_KEYS];
	uint16_t lengths[BTREE_MAX_KEYS];
	bool present[BTREE_MAX_KEYS];
};

struct btree_op {
	struct ngnfs_btree tree;
	struct ngnfs_btree saved;
	int kind; /* 0 insert, 1 delete, 2 lookup, 3 update */
	uint64_t key;
	uint8_t value[NGNFS_BTREE_VALUE_MAX];
	size_t length;
	uint8_t found[NGNFS_BTREE_VALUE_MAX];
	size_t found_length;
};

static void fill_value(uint8_t *value, size_t length, uint64_t key)
{
	size_t i;

	for (i = 0; i < length; i++)
		value[i] = (uint8_t)(key * 31 + i);
}

static int btree_op_txn(struct ngnfs_txn *txn, void *arg)
{
	struct btree_op *op = arg;

	op->tree = op->saved; /* reset: this run may be a retry */
	switch (op->kind) {
	case 0:
		return ngnfs_btree_insert(txn, &op->tree, op->key, op->value, op->length);
	case 1:
		return ngnfs_btree_delete(txn, &op->tree, op->key);
	case 3:
		return ngnfs_btree_update(txn, &op->tree, op->key, op->value, op->length);
	default:
		op->found_length = sizeof(op->found);
		return ngnfs_btree_lookup(txn, &op->tree, op->key, op->found, &op->found_length);
	}
}

struct iterate_check {
	uint64_t last;
	size_t count;
	const struct btree_ref *ref;
	bool error;
};

static int btree_iterate_item(void *arg, uint64_t key, const void *value, size_t length)
{
	struct iterate_check *check = arg;

	(void)value;
	(void)length;
	if (check->count > 0 && key <= check->last)
		check->error = true;
	check->last = key;
	check->count++;
	return 0;
}

struct iterate_args {
	struct ngnfs_btree tree;
	struct iterate_check check;
	uint64_t blocks;
};

static int count_block(void *arg, uint64_t blkno, unsigned int level)
{
	struct iterate_args *args = arg;

	(void)blkno;
	(void)level;
	args->blocks++;
	return 0;
}

static int btree_iterate_txn(struct ngnfs_txn *txn, void *arg)
{
	struct iterate_args *args = arg;
	int ret;

	memset(&args->check, 0, sizeof(args->check));
	args->blocks = 0;
	ret = ngnfs_btree_iterate(txn, &args->tree, 0, btree_iterate_item, &args->check);
	if (ret < 0)
		return ret;
	return ngnfs_btree_walk_blocks(txn, &args->tree, count_block, args);
}

/*
 * btree_random_vs_reference: thousands of inserts, updates, deletes and
 * lookups of random keys with random value sizes (so nodes split at
 * different points), checked after every step against a reference array,
 * then a full ordered iteration; deleting every key frees every block.
 */
void test_btree_random_vs_reference(void)
{
	struct ngnfs_fs *fs = start_fs(2, "btree", NGNFS_MOUNT_STABLE);
	struct ngnfs_cache *cache = ngnfs_test_fs_cache(fs);
	static struct btree_ref ref;
	static struct btree_op op;
	struct iterate_args iterate;
	uint64_t before_blocks, after_blocks;
	size_t present = 0, i;
	unsigned int step;
	int ret;

	memset(&ref, 0, sizeof(ref));
	memset(&op, 0, sizeof(op));
	op.saved.owner_ino = 12345;
	op.saved.device = 1;
	op.saved.op = "btree test";
	before_blocks = test_allocated_blocks(fs);
	for (i = 0; i < BTREE_MAX_KEYS; i++)
		ref.keys[i] = test_random() | 1;

	for (step = 0; step < BTREE_STEPS; step++) {
		i = test_random() % BTREE_MAX_KEYS;
		op.key = ref.keys[i];
		op.kind = (int)(test_random() % 4);
		op.length = test_random() % 4 == 0 ? test_random() % NGNFS_BTREE_VALUE_MAX
						   : test_random() % 64;
		fill_value(op.value, op.length, op.key + step);
		ret = ngnfs_txn_run(cache, btree_op_txn, &op);
		switch (op.kind) {
		case 0:
			EXPECT_RET(ret, ref.present[i] ? -EEXIST : 0);
			if (!ref.present[i]) {
				ref.present[i] = true;
				ref.lengths[i] = (uint16_t)op.length;
				present++;
			}
			break;
		case 1:
			EXPECT_RET(ret, ref.present[i] ? 0 : -ENOENT);
			if (ref.present[i]) {
				ref.present[i] = false;
				present--;
			}
			break;
		case 3:
			EXPECT_RET(ret, ref.present[i] ? 0 : -ENOENT);
			if (ref.present[i])
				ref.lengths[i] = (uint16_t)op.length;
			break;
		default:
			EXPECT_RET(ret, ref.present[i] ? 0 : -ENOENT);
			if (ref.present[i])
				CHECK(op.found_length == ref.lengths[i],
				      "key %llx: expected value length %u, got %zu",
				      (unsigned long long)op.key, ref.lengths[i], op.found_length);
			break;
		}
		if (ret == 0)
			op.saved = op.tree;
		if (step % 10000 == 9999)
			TEST_LOG("btree step %u: %zu keys present", step, present);
	}

	iterate.tree = op.saved;
	ret = ngnfs_txn_run(cache, btree_iterate_txn, &iterate);
	EXPECT_RET(ret, 0);
	CHECK(!iterate.check.error, "iteration returned keys out of order");
	CHECK(iterate.check.count == present, "iteration: expected %zu keys, got %zu", present,
	      iterate.check.count);
	TEST_LOG("btree with %zu keys uses %llu blocks", present,
		 (unsigned long long)iterate.blocks);

	for (i = 0; i < BTREE_MAX_KEYS; i++) {
		if (!ref.present[i])
			continue;
		op.kind = 1;
		op.key = ref.keys[i];
		ret = ngnfs_txn_run(cache, btree_op_txn, &op);
		EXPECT_RET(ret, 0);
		op.saved = op.tree;
	}
	CHECK(op.saved.root == 0, "empty tree still has root %llu",
	      (unsigned long long)op.saved.root);
	after_blocks = test_allocated_blocks(fs);
	CHECK(after_blocks == before_blocks,
	      "after deleting every key expected %llu allocated blocks, got %llu",
	      (unsigned long long)before_blocks, (unsigned long long)after_blocks);
	stop_fs(fs);
}

/* btree_sequential_splits: ascending and descending inserts, many levels. */
void test_btree_sequential_splits(void)
{
	struct ngnfs_fs *fs = start_fs(1, "btree-seq", NGNFS_MOUNT_STABLE);
	struct ngnfs_cache *cache = ngnfs_test_fs_cache(fs);
	static struct btree_op op;
	struct iterate_args iterate;
	unsigned int i;
	int ret;

	memset(&op, 0, sizeof(op));
	op.saved.owner_ino = 777;
	op.saved.op = "btree test";
	for (i = 0; i < BTREE_SEQUENTIAL_KEYS; i++) {
		op.kind = 0;
		op.key = i % 2 ? 1000000 + i : 1000000 - i;
		op.length = 200;
		fill_value(op.value, op.length, op.key);
		ret = ngnfs_txn_run(cache, btree_op_txn, &op);
		EXPECT_RET(ret, 0);
		op.saved = op.tree;
	}
	iterate.tree = op.saved;
	EXPECT_RET(ngnfs_txn_run(cache, btree_iterate_txn, &iterate), 0);
	CHECK(!iterate.check.error, "keys out of order");
	CHECK(iterate.check.count == BTREE_SEQUENTIAL_KEYS, "expected %d keys, got %zu",
	      BTREE_SEQUENTIAL_KEYS, iterate.check.count);
	for (i = 0; i < BTREE_SEQUENTIAL_KEYS; i += 7) {
		op.kind = 2;
		op.key = i % 2 ? 1000000 + i : 1000000 - i;
		EXPECT_RET(ngnfs_txn_run(cache, btree_op_txn, &op), 0);
		fill_value(op.value, 200, op.key);
		CHECK(op.found_length == 200 && memcmp(op.found, op.value, 200) == 0,
		      "key %llu: value differs", (unsigned long long)op.key);
	}
	stop_fs(fs);
}

static uint64_t collide_all(const char *name, size_t length)
{
	(void)name;
	(void)length;
	return 0x123456789abcde00ULL;
}

/* dirent_collisions: 256 names with one hash all work; the 257th is refused */
void test_dirent_collisions(void)
{
	struct ngnfs_fs *fs = start_fs(2, "collide", NGNFS_MOUNT_STABLE);
	struct ngnfs_handle root = root_of(fs), handles[256], found;
	struct listing listing;
	unsigned int i;
	char name[32];

	ngnfs_dir_hash_hook = collide_all;
	for (i = 0; i < 256; i++) {
		snprintf(name, sizeof(name), "same-hash-%u", i);
		handles[i] = make(fs, &root, name, S_IFREG | 0644);
	}
	EXPECT_RET(ngnfs_create(fs, &root, "one-too-many", S_IFREG | 0644, 0, 0, 0, NULL, NULL),
		   -ENOSPC);
	for (i = 0; i < 256; i++) {
		snprintf(name, sizeof(name), "same-hash-%u", i);
		EXPECT_RET(lookup(fs, &root, name, &found), 0);
		CHECK(found.ino == handles[i].ino, "lookup of %s found inode %llu, expected %llu",
		      name, (unsigned long long)found.ino, (unsigned long long)handles[i].ino);
	}
	/* holes in the collision range are reused and lookups still work past them */
	for (i = 0; i < 256; i += 3) {
		snprintf(name, sizeof(name), "same-hash-%u", i);
		EXPECT_RET(ngnfs_unlink(fs, &root, name), 0);
	}
	for (i = 0; i < 256; i++) {
		snprintf(name, sizeof(name), "same-hash-%u", i);
		EXPECT_RET(lookup(fs, &root, name, NULL), i % 3 == 0 ? -ENOENT : 0);
	}
	make(fs, &root, "refill", S_IFREG | 0644);
	EXPECT_RET(lookup(fs, &root, "refill", NULL), 0);
	list_all(fs, &root, &listing);
	CHECK(listing.count == 256 - 86 + 1, "readdir of colliding names: expected %u, got %zu",
	      256 - 86 + 1, listing.count);
	listing_free(&listing);
	ngnfs_dir_hash_hook = NULL;
	stop_fs(fs);
}

struct ngnfs_cache *ngnfs_test_fs_cache(struct ngnfs_fs *fs)
{
	return fs->cache;
}

/* ---- corruption: checks on every block read, and fsck reports ---- */

struct corrupt_args {
	uint64_t ino;
	int what; /* 0: nlink +3, 1: wreck the directory's btree root magic */
};

static int corrupt_txn(struct ngnfs_txn *txn, void *arg)
{
	struct corrupt_args *args = arg;
	struct ngnfs_inode *inode;
	void *data;
	int ret;

	ret = ngnfs_inode_write(txn, args->ino, "test corrupt", &inode);
	if (ret < 0)
		return ret;
	if (args->what == 0) {
		inode->nlink = htole32(le32toh(inode->nlink) + 3);
		return 0;
	}
	ret = ngnfs_txn_write(txn, le64toh(inode->data_root), &data);
	if (ret < 0)
		return ret;
	((struct ngnfs_block_header *)data)->magic = htole32(0xdeadbeef);
	return 0;
}

struct count_corruption {
	uint64_t ino;
	enum ngnfs_fsck_field field;
	int delta;
};

static int corrupt_count_txn(struct ngnfs_txn *txn, void *arg)
{
	struct count_corruption *args = arg;
	struct ngnfs_inode *inode;
	int ret;

	ret = ngnfs_inode_write(txn, args->ino, "test corrupt", &inode);
	if (ret < 0)
		return ret;
	if (args->field == NGNFS_FSCK_ENTRY_COUNT)
		inode->entry_count = htole64(le64toh(inode->entry_count) + (uint64_t)args->delta);
	else if (args->field == NGNFS_FSCK_PARENT)
		inode->parent_ino = htole64(le64toh(inode->parent_ino) + (uint64_t)args->delta);
	else
		inode->nlink = htole32(le32toh(inode->nlink) + (uint32_t)args->delta);
	return 0;
}

void corrupt_inode_field(struct ngnfs_fs *fs, uint64_t ino, enum ngnfs_fsck_field field, int delta)
{
	struct count_corruption args = { .ino = ino, .field = field, .delta = delta };

	EXPECT_RET(ngnfs_txn_run(ngnfs_test_fs_cache(fs), corrupt_count_txn, &args), 0);
}

struct problem_lines {
	unsigned int problems;
	bool saw_link_count;
	bool saw_corrupt;
};

static void record_line(void *arg, bool problem, const char *line)
{
	struct problem_lines *lines = arg;

	if (!problem)
		return;
	lines->problems++;
	if (strstr(line, "link count"))
		lines->saw_link_count = true;
	if (strstr(line, "wrong magic"))
		lines->saw_corrupt = true;
	TEST_LOG("fsck reported: %s", line);
}

/*
 * fsck_finds_problems: a wrong link count and a corrupt directory block
 * are both reported by fsck (and counted), and reading the corrupt
 * directory fails with -EIO instead of crashing.
 */
void test_fsck_finds_problems(void)
{
	struct ngnfs_fs *fs = start_fs(2, "fsck-bad", NGNFS_MOUNT_STABLE);
	struct ngnfs_handle root = root_of(fs), file, dir;
	struct ngnfs_fsck_report report;
	struct problem_lines lines = { 0 };
	struct corrupt_args args;
	struct listing listing;
	bool end;

	file = make(fs, &root, "file", S_IFREG | 0644);
	dir = make(fs, &root, "dir", S_IFDIR | 0755);
	make(fs, &dir, "inside", S_IFREG | 0644);
	check_fsck_clean(fs);

	args.ino = file.ino;
	args.what = 0;
	EXPECT_RET(ngnfs_txn_run(ngnfs_test_fs_cache(fs), corrupt_txn, &args), 0);
	args.ino = dir.ino;
	args.what = 1;
	EXPECT_RET(ngnfs_txn_run(ngnfs_test_fs_cache(fs), corrupt_txn, &args), 0);

	EXPECT_RET(lookup(fs, &dir, "inside", NULL), -EIO);
	memset(&listing, 0, sizeof(listing));
	EXPECT_RET(ngnfs_readdir(fs, &dir, 0, collect_entry, &listing, &end), -EIO);
	listing_free(&listing);
	EXPECT_RET(ngnfs_fsck(fs, record_line, &lines, &report), 0);
	CHECK(report.problems >= 2 && lines.problems == report.problems,
	      "fsck: expected at least 2 problems reported, got %llu (%u lines)",
	      (unsigned long long)report.problems, lines.problems);
	CHECK(lines.saw_link_count, "fsck did not report the wrong link count");
	CHECK(lines.saw_corrupt, "fsck did not report the corrupt directory block");
	/* the wrong link count is a fix for ngnfs_fsck_repair; the corrupt block is not */
	CHECK(report.fix_count == 1 && report.fixes[0].ino == file.ino &&
		  report.fixes[0].field == NGNFS_FSCK_NLINK && report.fixes[0].expected == 1,
	      "fsck: expected one fix, the file's link count to 1, got %zu", report.fix_count);
	ngnfs_fsck_report_free(&report);
	stop_fs(fs);
}

/* ---- a corrupt directory leaf is caught by the create that would change it ---- */

struct corrupt_leaf_args {
	uint64_t ino;
	int what; /* 0: keys out of order, 1: value past the block, 2: count over the values */
	uint64_t leaf;
};

static int corrupt_leaf_txn(struct ngnfs_txn *txn, void *arg)
{
	struct corrupt_leaf_args *args = arg;
	struct ngnfs_btree_node *node;
	struct ngnfs_inode *inode;
	__le64 key;
	void *data;
	int ret;

	ret = ngnfs_inode_write(txn, args->ino, "test corrupt", &inode);
	if (ret < 0)
		return ret;
	args->leaf = le64toh(inode->data_root);
	ret = ngnfs_txn_write(txn, args->leaf, &data);
	if (ret < 0)
		return ret;
	node = data;
	if (node->level != 0 || le16toh(node->item_count) < 2)
		return -EINVAL;
	if (args->what == 0) {
		key = node->items[0].key;
		node->items[0].key = node->items[1].key;
		node->items[1].key = key;
	} else if (args->what == 1) {
		node->items[1].value_offset = htole16(NGNFS_BLOCK_SIZE - 8);
		node->items[1].value_length = htole16(64);
	} else {
		node->item_count = htole16((uint16_t)(le16toh(node->values_start) / 16));
	}
	return 0;
}

/*
 * dir_corrupt_leaf_create: a create into a directory whose leaf is
 * corrupt (keys out of order, a value past the block, an item count that
 * runs into the values) fails with -EIO and a message naming the block,
 * and changes nothing: the corruption is still there for the next reader.
 */
void test_dir_corrupt_leaf_create(void)
{
	static const char *const why[] = { "keys out of order", "value out of bounds",
					   "value area overlaps the items" };
	struct ngnfs_fs *fs = start_fs(1, "corrupt-leaf", NGNFS_MOUNT_STABLE);
	struct ngnfs_handle root = root_of(fs), dir;
	struct corrupt_leaf_args args;
	char name[32], block[32];
	int what;

	for (what = 0; what < 3; what++) {
		snprintf(name, sizeof(name), "dir%d", what);
		dir = make(fs, &root, name, S_IFDIR | 0755);
		make(fs, &dir, "a", S_IFREG | 0644);
		make(fs, &dir, "b", S_IFREG | 0644);
		make(fs, &dir, "c", S_IFREG | 0644);
		args.ino = dir.ino;
		args.what = what;
		EXPECT_RET(ngnfs_txn_run(ngnfs_test_fs_cache(fs), corrupt_leaf_txn, &args), 0);
		snprintf(block, sizeof(block), "block %llu ", (unsigned long long)args.leaf);
		EXPECT_RET(ngnfs_create(fs, &dir, "new", S_IFREG | 0644, 0, 0, 0, NULL, NULL),
			   -EIO);
		CHECK(strstr(ngnfs_last_error(), block) && strstr(ngnfs_last_error(), why[what]),
		      "create in a corrupt leaf (%s): error \"%s\" does not name %s", why[what],
		      ngnfs_last_error(), block);
		/* nothing was inserted: the leaf is as corrupt as before */
		EXPECT_RET(ngnfs_create(fs, &dir, "new", S_IFREG | 0644, 0, 0, 0, NULL, NULL),
			   -EIO);
		EXPECT_RET(lookup(fs, &dir, "a", NULL), -EIO);
	}
	stop_fs(fs);
}
