/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The block btree behind directories: u64 keys, variable-length values.
 *
 * Every operation decodes the nodes it touches into a small array of
 * (key, value pointer) items, changes the array and encodes it again into
 * a scratch block, which it copies into the transaction's writable copy
 * only once the result is known to fit.  Encoding from scratch compacts
 * the value area every time, so a node never fragments and the code has
 * one layout routine instead of an allocator for the value area.  Nodes
 * are decoded with full checks (header, counts, value bounds, key order,
 * level) because a directory block comes from the network and may be
 * corrupt; a bad node is one log line and -EIO.
 *
 * Insertion descends with read access and asks for write access only on
 * the nodes it changes (the leaf, and parents only when a child split),
 * so that creates in one directory conflict on the leaf they land in and
 * not on the root.  A node that overflows splits in two by bytes; a root
 * split adds a level.
 *
 * Deletion removes the item and frees a node that became empty, removing
 * it from its parent (recursively); a root left with a single child is
 * replaced by that child.  Underfull nodes are not merged with their
 * siblings: a directory that shrank keeps some half-empty leaves until
 * their last entry goes.  That keeps deletion to the blocks on one path,
 * and directories in an archive mostly grow.
 *
 * XXX:
 *  - No merging or rebalancing of underfull nodes (see above).
 *  - Iteration re-descends from the root per call; readdir pages are one
 *    call each, so that is one descent per page.
 */

#include <endian.h>
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "btree.h"
#include "format-block.h"
#include "fs-internal.h"

#define NODE_HEADER_BYTES ((uint32_t)sizeof(struct ngnfs_btree_node))
#define ITEM_BYTES	  ((uint32_t)sizeof(struct ngnfs_btree_item))
#define MAX_ITEMS	  ((NGNFS_BLOCK_SIZE - NODE_HEADER_BYTES) / ITEM_BYTES)

_Static_assert(sizeof(struct ngnfs_btree_node) == 48, "btree node header is 48 bytes");
_Static_assert(sizeof(struct ngnfs_btree_item) == 16, "btree item is 16 bytes");
_Static_assert(sizeof(struct ngnfs_dirent) == 24, "dirent header is 24 bytes");

struct item {
	uint64_t key;
	const uint8_t *value;
	uint32_t length;
};

struct node {
	unsigned int level;
	unsigned int count;
	struct item items[MAX_ITEMS + 1];
};

static int node_corrupt(const struct ngnfs_btree *tree, uint64_t blkno, const char *why)
{
	return ngnfs_fail(-EIO,
			  "%s: directory btree block %llu (device %u) of inode %llu is corrupt: %s",
			  tree->op, (unsigned long long)blkno, ngnfs_blkno_device(blkno),
			  (unsigned long long)tree->owner_ino, why);
}

/* Decode and check; items point into block. */
static int node_decode(const struct ngnfs_btree *tree, uint64_t blkno, const uint8_t *block,
		       int expected_level, struct node *node)
{
	const struct ngnfs_btree_node *disk = (const void *)block;
	uint32_t values_start;
	unsigned int i;
	int ret;

	ret = ngnfs_block_check(block, NGNFS_MAGIC_BTREE, blkno, tree->owner_ino, tree->op);
	if (ret < 0)
		return ret;
	node->level = disk->level;
	node->count = le16toh(disk->item_count);
	values_start = le16toh(disk->values_start);
	if (node->level >= NGNFS_BTREE_MAX_LEVEL)
		return node_corrupt(tree, blkno, "level out of range");
	if (expected_level >= 0 && node->level != (unsigned int)expected_level)
		return node_corrupt(tree, blkno, "level does not match its parent's");
	if (node->count > MAX_ITEMS)
		return node_corrupt(tree, blkno, "item count out of range");
	if (values_start > NGNFS_BLOCK_SIZE ||
	    values_start < NODE_HEADER_BYTES + node->count * ITEM_BYTES)
		return node_corrupt(tree, blkno, "value area overlaps the items");
	for (i = 0; i < node->count; i++) {
		uint32_t offset = le16toh(disk->items[i].value_offset);
		uint32_t length = le16toh(disk->items[i].value_length);

		node->items[i].key = le64toh(disk->items[i].key);
		if (offset < values_start || (offset & 7) || offset + length > NGNFS_BLOCK_SIZE ||
		    length > NGNFS_BTREE_VALUE_MAX)
			return node_corrupt(tree, blkno, "value out of bounds");
		if (node->level > 0 && length != sizeof(__le64))
			return node_corrupt(tree, blkno, "internal item is not a block number");
		if (i > 0 && node->items[i].key <= node->items[i - 1].key)
			return node_corrupt(tree, blkno, "keys out of order");
		node->items[i].value = block + offset;
		node->items[i].length = length;
	}
	if (node->count == 0 && node->level > 0)
		return node_corrupt(tree, blkno, "internal node without children");
	return 0;
}

/* Values start 8-byte aligned so that callers can read their fields in place. */
static uint32_t value_space(uint32_t length)
{
	return (length + 7) & ~7U;
}

static uint32_t items_bytes(const struct item *items, unsigned int count)
{
	uint32_t bytes = 0;
	unsigned int i;

	for (i = 0; i < count; i++)
		bytes += ITEM_BYTES + value_space(items[i].length);
	return bytes;
}

static bool items_fit(const struct item *items, unsigned int count)
{
	return NODE_HEADER_BYTES + items_bytes(items, count) <= NGNFS_BLOCK_SIZE;
}

/* Lay out items into a scratch block (the caller checked that they fit). */
static void node_encode(uint8_t *scratch, const struct ngnfs_btree *tree, uint64_t blkno,
			unsigned int level, const struct item *items, unsigned int count)
{
	struct ngnfs_btree_node *disk = (void *)scratch;
	uint32_t end = NGNFS_BLOCK_SIZE;
	unsigned int i;

	memset(scratch, 0, NGNFS_BLOCK_SIZE);
	ngnfs_block_header_init(scratch, NGNFS_MAGIC_BTREE, blkno, tree->owner_ino);
	disk->level = (uint8_t)level;
	disk->item_count = htole16((uint16_t)count);
	for (i = 0; i < count; i++) {
		end -= value_space(items[i].length);
		if (items[i].length)
			memcpy(scratch + end, items[i].value, items[i].length);
		disk->items[i].key = htole64(items[i].key);
		disk->items[i].value_offset = htole16((uint16_t)end);
		disk->items[i].value_length = htole16((uint16_t)items[i].length);
	}
	disk->values_start = htole16((uint16_t)end);
}

static uint64_t child_blkno(const struct item *item)
{
	__le64 raw;

	memcpy(&raw, item->value, sizeof(raw));
	return le64toh(raw);
}

/* Index of the child of an internal node that covers key. */
static unsigned int child_index(const struct node *node, uint64_t key)
{
	unsigned int low = 1, high = node->count;

	/* largest i with items[i].key <= key, item 0 covering everything below */
	while (low < high) {
		unsigned int mid = low + (high - low) / 2;

		if (node->items[mid].key <= key)
			low = mid + 1;
		else
			high = mid;
	}
	return low - 1;
}

/* First index with items[i].key >= key. */
static unsigned int leaf_position(const struct node *node, uint64_t key)
{
	unsigned int low = 0, high = node->count;

	while (low < high) {
		unsigned int mid = low + (high - low) / 2;

		if (node->items[mid].key < key)
			low = mid + 1;
		else
			high = mid;
	}
	return low;
}

static int read_node(struct ngnfs_txn *txn, const struct ngnfs_btree *tree, uint64_t blkno,
		     int level, struct node *node, const uint8_t **block)
{
	const void *data;
	int ret;

	ret = ngnfs_txn_read(txn, blkno, &data);
	if (ret < 0)
		return ret;
	*block = data;
	return node_decode(tree, blkno, data, level, node);
}

int ngnfs_btree_lookup(struct ngnfs_txn *txn, struct ngnfs_btree *tree, uint64_t key, void *value,
		       size_t *value_length)
{
	struct node node;
	const uint8_t *block;
	uint64_t blkno = tree->root;
	int level = -1;
	unsigned int i;
	int ret;

	while (blkno != 0) {
		ret = read_node(txn, tree, blkno, level, &node, &block);
		if (ret < 0)
			return ret;
		if (node.level == 0) {
			i = leaf_position(&node, key);
			if (i >= node.count || node.items[i].key != key)
				return -ENOENT;
			if (node.items[i].length > *value_length) {
				*value_length = node.items[i].length;
				return -EOVERFLOW;
			}
			memcpy(value, node.items[i].value, node.items[i].length);
			*value_length = node.items[i].length;
			return 0;
		}
		i = child_index(&node, key);
		level = (int)node.level - 1;
		blkno = child_blkno(&node.items[i]);
	}
	return -ENOENT;
}

static int iterate_node(struct ngnfs_txn *txn, struct ngnfs_btree *tree, uint64_t blkno, int level,
			uint64_t from, ngnfs_btree_iterate_fn fn, void *arg)
{
	/* nodes are large: one per level on the heap-free path would be too much stack */
	struct node node;
	const uint8_t *block;
	unsigned int i;
	int ret;

	ret = read_node(txn, tree, blkno, level, &node, &block);
	if (ret < 0)
		return ret;
	if (node.level == 0) {
		for (i = leaf_position(&node, from); i < node.count; i++) {
			ret = fn(arg, node.items[i].key, node.items[i].value, node.items[i].length);
			if (ret != 0)
				return ret;
		}
		return 0;
	}
	for (i = child_index(&node, from); i < node.count; i++) {
		ret = iterate_node(txn, tree, child_blkno(&node.items[i]), (int)node.level - 1,
				   from, fn, arg);
		if (ret != 0)
			return ret;
	}
	return 0;
}

int ngnfs_btree_iterate(struct ngnfs_txn *txn, struct ngnfs_btree *tree, uint64_t from,
			ngnfs_btree_iterate_fn fn, void *arg)
{
	if (tree->root == 0)
		return 0;
	return iterate_node(txn, tree, tree->root, -1, from, fn, arg);
}

struct split {
	bool happened;
	uint64_t key;	/* lowest key of the new right node */
	uint64_t blkno; /* the new right node */
};

/*
 * Write items into blkno, splitting into a new right node when they do
 * not fit.  The items may point into blkno's current contents: everything
 * is laid out in scratch blocks before the writable copy is touched.
 */
static int store_items(struct ngnfs_txn *txn, struct ngnfs_btree *tree, uint64_t blkno,
		       unsigned int level, const struct item *items, unsigned int count,
		       struct split *split)
{
	uint8_t left[NGNFS_BLOCK_SIZE];
	uint8_t right[NGNFS_BLOCK_SIZE];
	uint64_t right_blkno, version;
	uint32_t total, bytes;
	unsigned int at;
	void *data;
	void *right_data;
	int ret;

	split->happened = false;
	if (items_fit(items, count)) {
		node_encode(left, tree, blkno, level, items, count);
		ret = ngnfs_txn_write(txn, blkno, &data);
		if (ret < 0)
			return ret;
		memcpy(data, left, NGNFS_BLOCK_SIZE);
		return 0;
	}

	/* split by bytes: the left half takes items until it holds half */
	total = items_bytes(items, count);
	bytes = 0;
	for (at = 0; at < count - 1; at++) {
		bytes += ITEM_BYTES + value_space(items[at].length);
		if (bytes >= total / 2)
			break;
	}
	at++;
	if (!items_fit(items, at) || !items_fit(items + at, count - at))
		return ngnfs_fail(-EIO, "%s: btree split of block %llu of inode %llu does not fit",
				  tree->op, (unsigned long long)blkno,
				  (unsigned long long)tree->owner_ino);

	ret = ngnfs_txn_write(txn, blkno, &data);
	if (ret < 0)
		return ret;
	ret = ngnfs_alloc_block(txn, tree->device, tree->op, &right_blkno, &version, &right_data);
	if (ret < 0)
		return ret;
	node_encode(left, tree, blkno, level, items, at);
	node_encode(right, tree, right_blkno, level, items + at, count - at);
	memcpy(data, left, NGNFS_BLOCK_SIZE);
	memcpy(right_data, right, NGNFS_BLOCK_SIZE);
	split->happened = true;
	split->key = items[at].key;
	split->blkno = right_blkno;
	return 0;
}

enum insert_mode { INSERT_NEW, INSERT_REPLACE };

static int insert_node(struct ngnfs_txn *txn, struct ngnfs_btree *tree, uint64_t blkno, int level,
		       uint64_t key, const void *value, size_t length, enum insert_mode mode,
		       struct split *split)
{
	struct node node;
	const uint8_t *block;
	struct split child_split;
	__le64 child_raw;
	unsigned int i;
	int ret;

	ret = read_node(txn, tree, blkno, level, &node, &block);
	if (ret < 0)
		return ret;

	if (node.level == 0) {
		i = leaf_position(&node, key);
		if (i < node.count && node.items[i].key == key) {
			if (mode == INSERT_NEW)
				return -EEXIST;
			node.items[i].value = value;
			node.items[i].length = (uint32_t)length;
		} else {
			if (mode == INSERT_REPLACE)
				return -ENOENT;
			memmove(&node.items[i + 1], &node.items[i],
				(node.count - i) * sizeof(node.items[0]));
			node.items[i].key = key;
			node.items[i].value = value;
			node.items[i].length = (uint32_t)length;
			node.count++;
		}
		return store_items(txn, tree, blkno, 0, node.items, node.count, split);
	}

	i = child_index(&node, key);
	ret = insert_node(txn, tree, child_blkno(&node.items[i]), (int)node.level - 1, key, value,
			  length, mode, &child_split);
	if (ret < 0)
		return ret;
	split->happened = false;
	if (!child_split.happened)
		return 0;

	/* block may have moved if the txn made a copy: decode again */
	ret = read_node(txn, tree, blkno, (int)node.level, &node, &block);
	if (ret < 0)
		return ret;
	child_raw = htole64(child_split.blkno);
	memmove(&node.items[i + 2], &node.items[i + 1],
		(node.count - i - 1) * sizeof(node.items[0]));
	node.items[i + 1].key = child_split.key;
	node.items[i + 1].value = (const uint8_t *)&child_raw;
	node.items[i + 1].length = sizeof(child_raw);
	node.count++;
	if (node.count > MAX_ITEMS)
		return node_corrupt(tree, blkno, "too many children");
	return store_items(txn, tree, blkno, node.level, node.items, node.count, split);
}

static int insert_common(struct ngnfs_txn *txn, struct ngnfs_btree *tree, uint64_t key,
			 const void *value, size_t length, enum insert_mode mode)
{
	struct item items[2];
	struct split split;
	__le64 children[2];
	uint64_t blkno, version;
	const uint8_t *block;
	struct node node;
	void *data;
	int ret;

	if (length > NGNFS_BTREE_VALUE_MAX)
		return -EINVAL;

	if (tree->root == 0) {
		if (mode == INSERT_REPLACE)
			return -ENOENT;
		ret = ngnfs_alloc_block(txn, tree->device, tree->op, &blkno, &version, &data);
		if (ret < 0)
			return ret;
		items[0].key = key;
		items[0].value = value;
		items[0].length = (uint32_t)length;
		node_encode(data, tree, blkno, 0, items, 1);
		tree->root = blkno;
		return 0;
	}

	ret = insert_node(txn, tree, tree->root, -1, key, value, length, mode, &split);
	if (ret < 0 || !split.happened)
		return ret;

	/* the root split: a new root above both halves */
	ret = read_node(txn, tree, tree->root, -1, &node, &block);
	if (ret < 0)
		return ret;
	if (node.level + 1 >= NGNFS_BTREE_MAX_LEVEL)
		return ngnfs_fail(-ENOSPC, "%s: btree of inode %llu is too deep", tree->op,
				  (unsigned long long)tree->owner_ino);
	ret = ngnfs_alloc_block(txn, tree->device, tree->op, &blkno, &version, &data);
	if (ret < 0)
		return ret;
	children[0] = htole64(tree->root);
	children[1] = htole64(split.blkno);
	/* the old root is the leftmost node of its level: its range starts at 0 */
	items[0].key = 0;
	items[0].value = (const uint8_t *)&children[0];
	items[0].length = sizeof(children[0]);
	items[1].key = split.key;
	items[1].value = (const uint8_t *)&children[1];
	items[1].length = sizeof(children[1]);
	node_encode(data, tree, blkno, node.level + 1, items, 2);
	tree->root = blkno;
	return 0;
}

int ngnfs_btree_insert(struct ngnfs_txn *txn, struct ngnfs_btree *tree, uint64_t key,
		       const void *value, size_t value_length)
{
	return insert_common(txn, tree, key, value, value_length, INSERT_NEW);
}

int ngnfs_btree_update(struct ngnfs_txn *txn, struct ngnfs_btree *tree, uint64_t key,
		       const void *value, size_t value_length)
{
	return insert_common(txn, tree, key, value, value_length, INSERT_REPLACE);
}

/* Remove key below blkno; *emptied says blkno has no items left (caller frees it). */
static int delete_node(struct ngnfs_txn *txn, struct ngnfs_btree *tree, uint64_t blkno, int level,
		       uint64_t key, bool *emptied)
{
	struct node node;
	const uint8_t *block;
	struct split split;
	uint64_t child, removed_key;
	bool child_emptied;
	unsigned int i;
	int ret;

	*emptied = false;
	ret = read_node(txn, tree, blkno, level, &node, &block);
	if (ret < 0)
		return ret;

	if (node.level == 0) {
		i = leaf_position(&node, key);
		if (i >= node.count || node.items[i].key != key)
			return -ENOENT;
	} else {
		i = child_index(&node, key);
		child = child_blkno(&node.items[i]);
		ret = delete_node(txn, tree, child, (int)node.level - 1, key, &child_emptied);
		if (ret < 0 || !child_emptied)
			return ret;
		ret = ngnfs_txn_free(txn, child);
		if (ret < 0)
			return ret;
		ret = read_node(txn, tree, blkno, (int)node.level, &node, &block);
		if (ret < 0)
			return ret;
	}

	removed_key = node.items[i].key;
	memmove(&node.items[i], &node.items[i + 1], (node.count - i - 1) * sizeof(node.items[0]));
	node.count--;
	/*
	 * An internal node's first key is the lower bound of its range: when
	 * the first child goes, the next one inherits the bound, or a later
	 * split below it could pass up a key lower than this one.
	 */
	if (node.level > 0 && i == 0 && node.count > 0)
		node.items[0].key = removed_key;
	if (node.count == 0) {
		void *data;

		/* the caller frees it; it must be held for write for that */
		*emptied = true;
		return ngnfs_txn_write(txn, blkno, &data);
	}
	return store_items(txn, tree, blkno, node.level, node.items, node.count, &split);
}

int ngnfs_btree_delete(struct ngnfs_txn *txn, struct ngnfs_btree *tree, uint64_t key)
{
	struct node node;
	const uint8_t *block;
	bool emptied;
	uint64_t child;
	void *data;
	int ret;

	if (tree->root == 0)
		return -ENOENT;
	ret = delete_node(txn, tree, tree->root, -1, key, &emptied);
	if (ret < 0)
		return ret;
	if (emptied) {
		ret = ngnfs_txn_free(txn, tree->root);
		if (ret < 0)
			return ret;
		tree->root = 0;
		return 0;
	}

	/* a root with one child is replaced by that child */
	for (;;) {
		ret = read_node(txn, tree, tree->root, -1, &node, &block);
		if (ret < 0)
			return ret;
		if (node.level == 0 || node.count != 1)
			return 0;
		child = child_blkno(&node.items[0]);
		ret = ngnfs_txn_write(txn, tree->root, &data);
		if (ret < 0)
			return ret;
		ret = ngnfs_txn_free(txn, tree->root);
		if (ret < 0)
			return ret;
		tree->root = child;
	}
}

static int walk_node(struct ngnfs_txn *txn, struct ngnfs_btree *tree, uint64_t blkno, int level,
		     ngnfs_btree_block_fn fn, void *arg)
{
	struct node node;
	const uint8_t *block;
	uint64_t children[MAX_ITEMS];
	unsigned int i, count;
	int ret;

	ret = read_node(txn, tree, blkno, level, &node, &block);
	if (ret < 0)
		return ret;
	count = node.level > 0 ? node.count : 0;
	for (i = 0; i < count; i++)
		children[i] = child_blkno(&node.items[i]);
	level = (int)node.level;
	/* fn may free blkno: nothing of block is used after this */
	ret = fn(arg, blkno, (unsigned int)level);
	if (ret < 0)
		return ret;
	for (i = 0; i < count; i++) {
		ret = walk_node(txn, tree, children[i], level - 1, fn, arg);
		if (ret < 0)
			return ret;
	}
	return 0;
}

int ngnfs_btree_walk_blocks(struct ngnfs_txn *txn, struct ngnfs_btree *tree,
			    ngnfs_btree_block_fn fn, void *arg)
{
	if (tree->root == 0)
		return 0;
	return walk_node(txn, tree, tree->root, -1, fn, arg);
}

static int free_block(void *arg, uint64_t blkno, unsigned int level)
{
	struct ngnfs_txn *txn = arg;
	void *data;
	int ret;

	(void)level;
	ret = ngnfs_txn_write(txn, blkno, &data);
	if (ret < 0)
		return ret;
	return ngnfs_txn_free(txn, blkno);
}

int ngnfs_btree_free_all(struct ngnfs_txn *txn, struct ngnfs_btree *tree)
{
	int ret;

	ret = ngnfs_btree_walk_blocks(txn, tree, free_block, txn);
	if (ret < 0)
		return ret;
	tree->root = 0;
	return 0;
}
