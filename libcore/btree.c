/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The block btree behind directories: u64 keys, variable-length values.
 *
 * Nodes are checked in full (header, counts, value bounds, key order,
 * level) before anything of them is used, because a directory block comes
 * from the network and may be corrupt; a bad node is one log line and
 * -EIO.  They are then read in place: the check copies nothing out.
 *
 * An insert that fits puts its value into the free space between the item
 * array and the values and moves only the items after it, which is what a
 * create does almost always.  Everything else (replace, delete, a split)
 * collects the items into an array, changes it and encodes the node again
 * from scratch.  Both keep the values packed at the end of the block
 * (encoding compacts, an in-place insert takes the space right below
 * them), so a node never fragments and its only free space is that gap.
 *
 * ngnfs_btree_insert_range serves directory creates: it shows the caller
 * the items of a key range and inserts under the key the caller picks, in
 * the leaf it already holds, so that the name check, the choice of the
 * collision index and the insert are one descent and one check per node.
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

/* An item being laid out (re-encoding, splitting). */
struct item {
	uint64_t key;
	const uint8_t *value;
	uint32_t length;
};

/* A checked node, read in place: nothing is copied out of the block. */
struct node {
	const struct ngnfs_btree_node *disk;
	unsigned int level;
	unsigned int count;
};

static int node_corrupt(const struct ngnfs_btree *tree, uint64_t blkno, const char *why)
{
	return ngnfs_fail(-EIO,
			  "%s: directory btree block %llu (device %u) of inode %llu is corrupt: %s",
			  tree->op, (unsigned long long)blkno, ngnfs_blkno_device(blkno),
			  (unsigned long long)tree->owner_ino, why);
}

static uint64_t node_key(const struct node *node, unsigned int i)
{
	return le64toh(node->disk->items[i].key);
}

static const uint8_t *node_value(const struct node *node, unsigned int i)
{
	return (const uint8_t *)node->disk + le16toh(node->disk->items[i].value_offset);
}

static uint32_t node_value_length(const struct node *node, unsigned int i)
{
	return le16toh(node->disk->items[i].value_length);
}

/* Check every field a reader relies on before anything of the block is used. */
static int node_check(const struct ngnfs_btree *tree, uint64_t blkno, const uint8_t *block,
		      int expected_level, struct node *node)
{
	const struct ngnfs_btree_node *disk = (const void *)block;
	uint32_t values_start;
	uint64_t previous = 0;
	unsigned int i;
	int ret;

	ret = ngnfs_block_check(block, NGNFS_MAGIC_BTREE, blkno, tree->owner_ino, tree->op);
	if (ret < 0)
		return ret;
	node->disk = disk;
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
		uint64_t key = le64toh(disk->items[i].key);

		if (offset < values_start || (offset & 7) || offset + length > NGNFS_BLOCK_SIZE ||
		    length > NGNFS_BTREE_VALUE_MAX)
			return node_corrupt(tree, blkno, "value out of bounds");
		if (node->level > 0 && length != sizeof(__le64))
			return node_corrupt(tree, blkno, "internal item is not a block number");
		if (i > 0 && key <= previous)
			return node_corrupt(tree, blkno, "keys out of order");
		previous = key;
	}
	if (node->count == 0 && node->level > 0)
		return node_corrupt(tree, blkno, "internal node without children");
	return 0;
}

/* The items of a checked node, to change and encode again; they point into its block. */
static void node_items(const struct node *node, struct item *items)
{
	unsigned int i;

	for (i = 0; i < node->count; i++) {
		items[i].key = node_key(node, i);
		items[i].value = node_value(node, i);
		items[i].length = node_value_length(node, i);
	}
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

/* Lay out items into a block (the caller checked that they fit; none may point into it). */
static void node_encode(uint8_t *out, const struct ngnfs_btree *tree, uint64_t blkno,
			unsigned int level, const struct item *items, unsigned int count)
{
	struct ngnfs_btree_node *disk = (void *)out;
	uint32_t end = NGNFS_BLOCK_SIZE;
	unsigned int i;

	memset(out, 0, NGNFS_BLOCK_SIZE);
	ngnfs_block_header_init(out, NGNFS_MAGIC_BTREE, blkno, tree->owner_ino);
	disk->level = (uint8_t)level;
	disk->item_count = htole16((uint16_t)count);
	for (i = 0; i < count; i++) {
		end -= value_space(items[i].length);
		if (items[i].length)
			memcpy(out + end, items[i].value, items[i].length);
		disk->items[i].key = htole64(items[i].key);
		disk->items[i].value_offset = htole16((uint16_t)end);
		disk->items[i].value_length = htole16((uint16_t)items[i].length);
	}
	disk->values_start = htole16((uint16_t)end);
}

static uint64_t child_blkno(const struct node *node, unsigned int i)
{
	__le64 raw;

	memcpy(&raw, node_value(node, i), sizeof(raw));
	return le64toh(raw);
}

/* Index of the child of an internal node that covers key. */
static unsigned int child_index(const struct node *node, uint64_t key)
{
	unsigned int low = 1, high = node->count;

	/* largest i with key(i) <= key, item 0 covering everything below */
	while (low < high) {
		unsigned int mid = low + (high - low) / 2;

		if (node_key(node, mid) <= key)
			low = mid + 1;
		else
			high = mid;
	}
	return low - 1;
}

/* First index with key(i) >= key. */
static unsigned int leaf_position(const struct node *node, uint64_t key)
{
	unsigned int low = 0, high = node->count;

	while (low < high) {
		unsigned int mid = low + (high - low) / 2;

		if (node_key(node, mid) < key)
			low = mid + 1;
		else
			high = mid;
	}
	return low;
}

static int read_node(struct ngnfs_txn *txn, const struct ngnfs_btree *tree, uint64_t blkno,
		     int level, struct node *node)
{
	const void *data;
	int ret;

	ret = ngnfs_txn_read(txn, blkno, &data);
	if (ret < 0)
		return ret;
	return node_check(tree, blkno, data, level, node);
}

int ngnfs_btree_lookup(struct ngnfs_txn *txn, struct ngnfs_btree *tree, uint64_t key, void *value,
		       size_t *value_length)
{
	struct node node;
	uint64_t blkno = tree->root;
	int level = -1;
	unsigned int i;
	uint32_t length;
	int ret;

	while (blkno != 0) {
		ret = read_node(txn, tree, blkno, level, &node);
		if (ret < 0)
			return ret;
		if (node.level == 0) {
			i = leaf_position(&node, key);
			if (i >= node.count || node_key(&node, i) != key)
				return -ENOENT;
			length = node_value_length(&node, i);
			if (length > *value_length) {
				*value_length = length;
				return -EOVERFLOW;
			}
			memcpy(value, node_value(&node, i), length);
			*value_length = length;
			return 0;
		}
		i = child_index(&node, key);
		level = (int)node.level - 1;
		blkno = child_blkno(&node, i);
	}
	return -ENOENT;
}

static int iterate_node(struct ngnfs_txn *txn, struct ngnfs_btree *tree, uint64_t blkno, int level,
			uint64_t from, ngnfs_btree_iterate_fn fn, void *arg)
{
	struct node node;
	unsigned int i;
	int ret;

	ret = read_node(txn, tree, blkno, level, &node);
	if (ret < 0)
		return ret;
	if (node.level == 0) {
		for (i = leaf_position(&node, from); i < node.count; i++) {
			ret = fn(arg, node_key(&node, i), node_value(&node, i),
				 node_value_length(&node, i));
			if (ret != 0)
				return ret;
		}
		return 0;
	}
	for (i = child_index(&node, from); i < node.count; i++) {
		ret = iterate_node(txn, tree, child_blkno(&node, i), (int)node.level - 1, from, fn,
				   arg);
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
 * not fit.  The items may point into source, blkno's contents as this
 * transaction read them: when the writable copy is that same buffer (the
 * block was already held for write), the left half is laid out in a
 * scratch block first.
 */
static int store_items(struct ngnfs_txn *txn, struct ngnfs_btree *tree, uint64_t blkno,
		       const void *source, unsigned int level, const struct item *items,
		       unsigned int count, struct split *split)
{
	uint8_t scratch[NGNFS_BLOCK_SIZE];
	uint64_t right_blkno, version;
	uint32_t total, bytes;
	unsigned int at;
	void *data;
	void *right_data;
	int ret;

	split->happened = false;
	if (items_fit(items, count)) {
		ret = ngnfs_txn_write(txn, blkno, &data);
		if (ret < 0)
			return ret;
		if (data != source) {
			node_encode(data, tree, blkno, level, items, count);
			return 0;
		}
		node_encode(scratch, tree, blkno, level, items, count);
		memcpy(data, scratch, NGNFS_BLOCK_SIZE);
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
	/* the right half first: its items may point into the left's buffer */
	node_encode(right_data, tree, right_blkno, level, items + at, count - at);
	if (data != source) {
		node_encode(data, tree, blkno, level, items, at);
	} else {
		node_encode(scratch, tree, blkno, level, items, at);
		memcpy(data, scratch, NGNFS_BLOCK_SIZE);
	}
	split->happened = true;
	split->key = items[at].key;
	split->blkno = right_blkno;
	return 0;
}

enum insert_mode { INSERT_NEW, INSERT_REPLACE, INSERT_RANGE };

/* What an insert puts where. */
struct insert {
	enum insert_mode mode;
	uint64_t key;  /* INSERT_RANGE: the first key of the range; then the key chosen */
	uint64_t last; /* INSERT_RANGE: the range's last key */
	const void *value;
	uint32_t length;
	ngnfs_btree_iterate_fn scan; /* INSERT_RANGE */
	ngnfs_btree_pick_fn pick;
	void *arg;
};

/* Returned by insert_node when an INSERT_RANGE range goes on past its leaf: nothing changed. */
#define RANGE_SPANS_LEAVES 1

/* Let the caller see the items already in the range and choose the key (INSERT_RANGE). */
static int pick_in_leaf(const struct node *node, struct insert *ins)
{
	unsigned int i;
	uint64_t key;
	int ret;

	for (i = leaf_position(node, ins->key); i < node->count; i++) {
		key = node_key(node, i);
		if (key > ins->last)
			break;
		ret = ins->scan(ins->arg, key, node_value(node, i), node_value_length(node, i));
		if (ret < 0)
			return ret;
		if (ret > 0)
			break;
	}
	ret = ins->pick(ins->arg, &key);
	if (ret < 0)
		return ret;
	if (key < ins->key || key > ins->last)
		return -EINVAL;
	ins->key = key;
	ins->mode = INSERT_NEW;
	return 0;
}

/*
 * A new item into the free space between the item array and the values
 * (an encoded node keeps its values packed at the end, so that space is
 * all it has free).  *done is false when it does not fit there.  Only
 * the item array past i moves; nothing else of the block is copied.
 */
static int insert_in_place(struct ngnfs_txn *txn, uint64_t blkno, const struct node *node,
			   unsigned int i, const struct insert *ins, bool *done)
{
	uint32_t values_start = le16toh(node->disk->values_start);
	uint32_t space = value_space(ins->length);
	struct ngnfs_btree_node *disk;
	uint32_t offset;
	void *data;
	int ret;

	*done = false;
	if (NODE_HEADER_BYTES + (node->count + 1) * ITEM_BYTES + space > values_start ||
	    (values_start & 7))
		return 0;
	/* the copy holds the bytes node_check looked at: this transaction has held the block since
	 */
	ret = ngnfs_txn_write(txn, blkno, &data);
	if (ret < 0)
		return ret;
	disk = data;
	offset = values_start - space;
	if (ins->length)
		memcpy((uint8_t *)data + offset, ins->value, ins->length);
	memset((uint8_t *)data + offset + ins->length, 0, space - ins->length);
	memmove(&disk->items[i + 1], &disk->items[i], (node->count - i) * ITEM_BYTES);
	disk->items[i].key = htole64(ins->key);
	disk->items[i].value_offset = htole16((uint16_t)offset);
	disk->items[i].value_length = htole16((uint16_t)ins->length);
	disk->items[i].reserved = 0;
	disk->item_count = htole16((uint16_t)(node->count + 1));
	disk->values_start = htole16((uint16_t)offset);
	*done = true;
	return 0;
}

/* Insert or replace at leaf position i by laying the whole node out again (splitting if need be).
 */
static int leaf_store(struct ngnfs_txn *txn, struct ngnfs_btree *tree, uint64_t blkno,
		      const struct node *node, unsigned int i, bool replace,
		      const struct insert *ins, struct split *split)
{
	struct item items[MAX_ITEMS + 1];
	unsigned int count = node->count;

	node_items(node, items);
	if (!replace) {
		memmove(&items[i + 1], &items[i], (count - i) * sizeof(items[0]));
		items[i].key = ins->key;
		count++;
	}
	items[i].value = ins->value;
	items[i].length = ins->length;
	return store_items(txn, tree, blkno, node->disk, 0, items, count, split);
}

/* A child split: its new right node goes into the parent after child i. */
static int add_child(struct ngnfs_txn *txn, struct ngnfs_btree *tree, uint64_t blkno,
		     const struct node *node, unsigned int i, const struct split *child_split,
		     struct split *split)
{
	struct item items[MAX_ITEMS + 1];
	__le64 child_raw = htole64(child_split->blkno);

	if (node->count >= MAX_ITEMS)
		return node_corrupt(tree, blkno, "too many children");
	node_items(node, items);
	memmove(&items[i + 2], &items[i + 1], (node->count - i - 1) * sizeof(items[0]));
	items[i + 1].key = child_split->key;
	items[i + 1].value = (const uint8_t *)&child_raw;
	items[i + 1].length = sizeof(child_raw);
	return store_items(txn, tree, blkno, node->disk, node->level, items, node->count + 1,
			   split);
}

/*
 * bounded/upper: the keys under blkno are below upper (the next key in
 * the parent), unless blkno is the last node of its level.
 */
static int insert_node(struct ngnfs_txn *txn, struct ngnfs_btree *tree, uint64_t blkno, int level,
		       bool bounded, uint64_t upper, struct insert *ins, struct split *split)
{
	struct split child_split;
	struct node node;
	unsigned int i;
	bool done;
	int ret;

	ret = read_node(txn, tree, blkno, level, &node);
	if (ret < 0)
		return ret;

	if (node.level == 0) {
		split->happened = false;
		if (ins->mode == INSERT_RANGE) {
			if (bounded && ins->last >= upper)
				return RANGE_SPANS_LEAVES;
			ret = pick_in_leaf(&node, ins);
			if (ret < 0)
				return ret;
		}
		i = leaf_position(&node, ins->key);
		if (i < node.count && node_key(&node, i) == ins->key) {
			if (ins->mode == INSERT_NEW)
				return -EEXIST;
			return leaf_store(txn, tree, blkno, &node, i, true, ins, split);
		}
		if (ins->mode == INSERT_REPLACE)
			return -ENOENT;
		ret = insert_in_place(txn, blkno, &node, i, ins, &done);
		if (ret < 0 || done)
			return ret;
		return leaf_store(txn, tree, blkno, &node, i, false, ins, split);
	}

	i = child_index(&node, ins->key);
	if (i + 1 < node.count) {
		bounded = true;
		upper = node_key(&node, i + 1);
	}
	ret = insert_node(txn, tree, child_blkno(&node, i), (int)node.level - 1, bounded, upper,
			  ins, &child_split);
	if (ret != 0)
		return ret;
	split->happened = false;
	if (!child_split.happened)
		return 0;
	/* read access again: the node is the same, this transaction holds it */
	ret = read_node(txn, tree, blkno, (int)node.level, &node);
	if (ret < 0)
		return ret;
	return add_child(txn, tree, blkno, &node, i, &child_split, split);
}

static int insert_common(struct ngnfs_txn *txn, struct ngnfs_btree *tree, struct insert *ins)
{
	struct item items[2];
	struct split split;
	__le64 children[2];
	uint64_t blkno, version;
	struct node node;
	void *data;
	int ret;

	if (ins->length > NGNFS_BTREE_VALUE_MAX)
		return -EINVAL;

	if (tree->root == 0) {
		if (ins->mode == INSERT_REPLACE)
			return -ENOENT;
		if (ins->mode == INSERT_RANGE) {
			ret = ins->pick(ins->arg, &ins->key);
			if (ret < 0)
				return ret;
		}
		ret = ngnfs_alloc_block(txn, tree->device, tree->op, &blkno, &version, &data);
		if (ret < 0)
			return ret;
		items[0].key = ins->key;
		items[0].value = ins->value;
		items[0].length = ins->length;
		node_encode(data, tree, blkno, 0, items, 1);
		tree->root = blkno;
		return 0;
	}

	ret = insert_node(txn, tree, tree->root, -1, false, 0, ins, &split);
	if (ret < 0 || ret == RANGE_SPANS_LEAVES || !split.happened)
		return ret;

	/* the root split: a new root above both halves */
	ret = read_node(txn, tree, tree->root, -1, &node);
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
	struct insert ins = {
		.mode = INSERT_NEW, .key = key, .value = value, .length = (uint32_t)value_length
	};

	if (value_length > NGNFS_BTREE_VALUE_MAX)
		return -EINVAL;
	return insert_common(txn, tree, &ins);
}

int ngnfs_btree_update(struct ngnfs_txn *txn, struct ngnfs_btree *tree, uint64_t key,
		       const void *value, size_t value_length)
{
	struct insert ins = {
		.mode = INSERT_REPLACE, .key = key, .value = value, .length = (uint32_t)value_length
	};

	if (value_length > NGNFS_BTREE_VALUE_MAX)
		return -EINVAL;
	return insert_common(txn, tree, &ins);
}

/* The range straddles leaves (fallback of ngnfs_btree_insert_range): scan up to its end. */
static int scan_to_last(void *arg, uint64_t key, const void *value, size_t length)
{
	struct insert *ins = arg;

	if (key > ins->last)
		return 1;
	return ins->scan(ins->arg, key, value, length);
}

int ngnfs_btree_insert_range(struct ngnfs_txn *txn, struct ngnfs_btree *tree, uint64_t first,
			     uint64_t last, ngnfs_btree_iterate_fn scan, ngnfs_btree_pick_fn pick,
			     void *arg, const void *value, size_t value_length, uint64_t *key)
{
	struct insert ins = {
		.mode = INSERT_RANGE,
		.key = first,
		.last = last,
		.value = value,
		.length = (uint32_t)value_length,
		.scan = scan,
		.pick = pick,
		.arg = arg,
	};
	int ret;

	if (value_length > NGNFS_BTREE_VALUE_MAX || first > last)
		return -EINVAL;
	ret = insert_common(txn, tree, &ins);
	if (ret == RANGE_SPANS_LEAVES) {
		/* two descents: see the whole range, then insert where the key lands */
		ret = ngnfs_btree_iterate(txn, tree, first, scan_to_last, &ins);
		if (ret < 0)
			return ret;
		ret = pick(arg, &ins.key);
		if (ret < 0)
			return ret;
		if (ins.key < first || ins.key > last)
			return -EINVAL;
		ins.mode = INSERT_NEW;
		ret = insert_common(txn, tree, &ins);
	}
	if (ret < 0)
		return ret;
	*key = ins.key;
	return 0;
}

/* Remove key below blkno; *emptied says blkno has no items left (caller frees it). */
static int delete_node(struct ngnfs_txn *txn, struct ngnfs_btree *tree, uint64_t blkno, int level,
		       uint64_t key, bool *emptied)
{
	struct item items[MAX_ITEMS];
	struct node node;
	struct split split;
	uint64_t child, removed_key;
	bool child_emptied;
	unsigned int i, count;
	int ret;

	*emptied = false;
	ret = read_node(txn, tree, blkno, level, &node);
	if (ret < 0)
		return ret;

	if (node.level == 0) {
		i = leaf_position(&node, key);
		if (i >= node.count || node_key(&node, i) != key)
			return -ENOENT;
	} else {
		i = child_index(&node, key);
		child = child_blkno(&node, i);
		ret = delete_node(txn, tree, child, (int)node.level - 1, key, &child_emptied);
		if (ret < 0 || !child_emptied)
			return ret;
		ret = ngnfs_txn_free(txn, child);
		if (ret < 0)
			return ret;
		ret = read_node(txn, tree, blkno, (int)node.level, &node);
		if (ret < 0)
			return ret;
	}

	node_items(&node, items);
	count = node.count;
	removed_key = node_key(&node, i);
	memmove(&items[i], &items[i + 1], (count - i - 1) * sizeof(items[0]));
	count--;
	/*
	 * An internal node's first key is the lower bound of its range: when
	 * the first child goes, the next one inherits the bound, or a later
	 * split below it could pass up a key lower than this one.
	 */
	if (node.level > 0 && i == 0 && count > 0)
		items[0].key = removed_key;
	if (count == 0) {
		void *data;

		/* the caller frees it; it must be held for write for that */
		*emptied = true;
		return ngnfs_txn_write(txn, blkno, &data);
	}
	return store_items(txn, tree, blkno, node.disk, node.level, items, count, &split);
}

int ngnfs_btree_delete(struct ngnfs_txn *txn, struct ngnfs_btree *tree, uint64_t key)
{
	struct node node;
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
		ret = read_node(txn, tree, tree->root, -1, &node);
		if (ret < 0)
			return ret;
		if (node.level == 0 || node.count != 1)
			return 0;
		child = child_blkno(&node, 0);
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
	uint64_t children[MAX_ITEMS];
	unsigned int i, count;
	int ret;

	ret = read_node(txn, tree, blkno, level, &node);
	if (ret < 0)
		return ret;
	count = node.level > 0 ? node.count : 0;
	for (i = 0; i < count; i++)
		children[i] = child_blkno(&node, i);
	level = (int)node.level;
	/* fn may free blkno: nothing of its block is used after this */
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
