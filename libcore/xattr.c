// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Extended attributes: where they live (inline in the inode block or in
 * the chain of index blocks from xattr_root, see format-block.h) and the
 * setxattr(2) family on top.
 *
 * The archive agent's common case decides the layout: it sets a handful
 * of small attributes per file, over and over, and each update should
 * dirty one block.  So an xattr goes inline whenever its entry fits, and
 * a set is "remove the old one, insert the new one" within one
 * transaction: a value that grows past the inline limit moves to an index
 * block and one that shrinks comes back inline, without a separate
 * migration step.  Looking for a name always reads the whole chain (it
 * must know that the name is nowhere else) but only takes for write the
 * blocks that change.
 *
 * Every block read is checked (header, then every item's lengths against
 * the block's used bytes, value blocks against their item's name hash and
 * position) before any field is trusted; a bad block is -EIO with a log
 * line naming it, its device, the inode and the operation.
 *
 * XXX:
 *  - The chain is searched linearly: thousands of large xattrs on one
 *    inode cost a read of every index block per call.  A name-hash
 *    btree would make it logarithmic.
 *  - Index blocks that become sparse are not merged; a block is freed
 *    only when its last item goes.
 *  - Removing an inline xattr does not pull an overflowed one back in.
 */

#include <errno.h>
#include <string.h>
#include <sys/xattr.h>
#include <xxhash.h>

#include "fs-internal.h"
#include "xattr.h"

_Static_assert(sizeof(struct ngnfs_xattr_index) == NGNFS_BLOCK_SIZE, "xattr index is one block");
_Static_assert(sizeof(struct ngnfs_xattr_value) == NGNFS_BLOCK_SIZE, "xattr value is one block");
_Static_assert(sizeof(struct ngnfs_xattr_item) == 16, "xattr item header");
_Static_assert(sizeof(struct ngnfs_xattr_inline_entry) == 4, "inline xattr entry header");

#define VALUE_BLOCKS_MAX                                                                           \
	((NGNFS_XATTR_VALUE_MAX + NGNFS_XATTR_VALUE_BYTES - 1) / NGNFS_XATTR_VALUE_BYTES)
/* A chain longer than this is a loop, not a lot of xattrs. */
#define CHAIN_BLOCKS_MAX 65536

static uint32_t align4(uint32_t n)
{
	return (n + 3) & ~3U;
}

static uint32_t align8(uint32_t n)
{
	return (n + 7) & ~7U;
}

static uint64_t name_hash(const char *name, size_t length)
{
	return XXH64(name, length, 0);
}

static uint32_t value_block_count(uint32_t value_length)
{
	return (value_length + NGNFS_XATTR_VALUE_BYTES - 1) / NGNFS_XATTR_VALUE_BYTES;
}

static uint32_t inline_entry_size(uint32_t name_length, uint32_t value_length)
{
	return align4(sizeof(struct ngnfs_xattr_inline_entry) + name_length + value_length);
}

static bool item_has_value_blocks(uint32_t value_length)
{
	return value_length > NGNFS_XATTR_ITEM_VALUE_MAX;
}

static uint32_t item_value_offset(uint32_t name_length)
{
	return align8(sizeof(struct ngnfs_xattr_item) + name_length);
}

static uint32_t item_size(uint32_t name_length, uint32_t value_length)
{
	uint32_t payload = item_has_value_blocks(value_length)
			       ? value_block_count(value_length) * (uint32_t)sizeof(__le64)
			       : value_length;

	return align8(item_value_offset(name_length) + payload);
}

static uint64_t inode_ino(const struct ngnfs_inode *inode)
{
	return le64toh(inode->ino);
}

static uint8_t *inline_area(const struct ngnfs_inode *inode)
{
	return (uint8_t *)inode + NGNFS_INODE_INLINE_OFFSET;
}

/* Linux's checks, in Linux's order: name length, then namespace, then value size. */
static int check_name(const char *name, size_t *length_out, const char *op)
{
	static const char *const prefixes[] = { "user.", "trusted.", "security." };
	size_t length;

	if (!name)
		return ngnfs_fail_quiet(-EINVAL, "%s: no xattr name", op);
	length = strnlen(name, NGNFS_XATTR_NAME_MAX + 1);
	if (length == 0)
		return ngnfs_fail_quiet(-ERANGE, "%s: empty xattr name", op);
	if (length > NGNFS_XATTR_NAME_MAX)
		return ngnfs_fail_quiet(-ERANGE,
					"%s: xattr name \"%.32s...\" is longer than %u bytes", op,
					name, NGNFS_XATTR_NAME_MAX);
	for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++) {
		size_t prefix_length = strlen(prefixes[i]);

		if (length >= prefix_length && memcmp(name, prefixes[i], prefix_length) == 0) {
			if (length == prefix_length)
				return ngnfs_fail_quiet(-EINVAL, "%s: xattr name \"%s\" is empty",
							op, name);
			*length_out = length;
			return 0;
		}
	}
	return ngnfs_fail_quiet(-EOPNOTSUPP,
				"%s: xattr name \"%s\" is not in the user, trusted or security "
				"namespace",
				op, name);
}

/* ---- checked parsing ---- */

static int corrupt_inline(const struct ngnfs_inode *inode, const char *op, const char *why)
{
	return ngnfs_fail(-EIO, "%s: inline xattrs of inode %llu (device %u): %s", op,
			  (unsigned long long)inode_ino(inode),
			  ngnfs_blkno_device(inode_ino(inode)), why);
}

/* Walks the inline entries; fn returns 1 to stop (with *found_offset set), <0 to fail. */
struct inline_entry_view {
	uint32_t offset; /* in the inline area */
	uint32_t size;
	uint32_t name_length;
	uint32_t value_length;
	const char *name;
	const uint8_t *value;
};

static int inline_check(const struct ngnfs_inode *inode, const char *op)
{
	uint32_t used = le16toh(inode->inline_xattr_bytes);
	uint32_t count = le16toh(inode->inline_xattr_count);
	const uint8_t *area = inline_area(inode);
	uint32_t offset = 0;
	uint32_t seen = 0;

	if (used > ngnfs_inode_inline_capacity(inode))
		return corrupt_inline(inode, op, "used bytes exceed the inline area");
	while (offset < used) {
		const struct ngnfs_xattr_inline_entry *entry = (const void *)(area + offset);
		uint32_t size;

		if (used - offset < sizeof(*entry))
			return corrupt_inline(inode, op, "entry header cut off");
		size = inline_entry_size(entry->name_length, le16toh(entry->value_length));
		if (entry->name_length == 0 || size > used - offset)
			return corrupt_inline(inode, op, "entry length past the used bytes");
		offset += size;
		seen++;
	}
	if (seen != count)
		return corrupt_inline(inode, op, "entry count does not match the entries");
	return 0;
}

/* Entry at offset; inline_check() must have passed. */
static void inline_view(const struct ngnfs_inode *inode, uint32_t offset,
			struct inline_entry_view *view)
{
	const uint8_t *area = inline_area(inode);
	const struct ngnfs_xattr_inline_entry *entry = (const void *)(area + offset);

	view->offset = offset;
	view->name_length = entry->name_length;
	view->value_length = le16toh(entry->value_length);
	view->size = inline_entry_size(view->name_length, view->value_length);
	view->name = (const char *)(entry + 1);
	view->value = (const uint8_t *)view->name + view->name_length;
}

struct item_view {
	uint32_t offset; /* in items[] */
	uint32_t size;
	uint64_t hash;
	uint32_t name_length;
	uint32_t value_length;
	bool value_blocks;
	const char *name;
	const uint8_t *value; /* inline value, or __le64 value block numbers */
};

static int corrupt_index(const struct ngnfs_inode *inode, uint64_t blkno, const char *op,
			 const char *why)
{
	return ngnfs_fail(-EIO, "%s: xattr index block %llu (device %u) of inode %llu: %s", op,
			  (unsigned long long)blkno, ngnfs_blkno_device(blkno),
			  (unsigned long long)inode_ino(inode), why);
}

static int index_read(struct ngnfs_txn *txn, const struct ngnfs_inode *inode, uint64_t blkno,
		      const char *op, const struct ngnfs_xattr_index **index_out)
{
	const struct ngnfs_xattr_index *index;
	const void *data;
	uint32_t used;
	uint32_t count;
	uint32_t offset = 0;
	uint32_t seen = 0;
	int ret;

	ret = ngnfs_txn_read(txn, blkno, &data);
	if (ret < 0)
		return ret;
	ret = ngnfs_block_check(data, NGNFS_MAGIC_XATTR, blkno, inode_ino(inode), op);
	if (ret < 0)
		return ret;
	index = data;
	used = le16toh(index->used_bytes);
	count = le16toh(index->item_count);
	if (used > NGNFS_XATTR_INDEX_ITEM_BYTES || (used & 7))
		return corrupt_index(inode, blkno, op, "used bytes out of range");
	while (offset < used) {
		const struct ngnfs_xattr_item *item = (const void *)(index->items + offset);
		uint32_t value_length;

		if (used - offset < sizeof(*item))
			return corrupt_index(inode, blkno, op, "item header cut off");
		value_length = le32toh(item->value_length);
		if (item->name_length == 0 || value_length > NGNFS_XATTR_VALUE_MAX ||
		    !!(item->flags & NGNFS_XATTR_ITEM_VALUE_BLOCKS) !=
			item_has_value_blocks(value_length) ||
		    item_size(item->name_length, value_length) > used - offset)
			return corrupt_index(inode, blkno, op, "item lengths out of range");
		offset += item_size(item->name_length, value_length);
		seen++;
	}
	if (seen != count)
		return corrupt_index(inode, blkno, op, "item count does not match the items");
	*index_out = index;
	return 0;
}

static void item_view(const struct ngnfs_xattr_index *index, uint32_t offset,
		      struct item_view *view)
{
	const struct ngnfs_xattr_item *item = (const void *)(index->items + offset);

	view->offset = offset;
	view->hash = le64toh(item->name_hash);
	view->name_length = item->name_length;
	view->value_length = le32toh(item->value_length);
	view->value_blocks = item->flags & NGNFS_XATTR_ITEM_VALUE_BLOCKS;
	view->size = item_size(view->name_length, view->value_length);
	view->name = (const char *)(item + 1);
	view->value = index->items + offset + item_value_offset(view->name_length);
}

static uint64_t item_value_block(const struct item_view *view, uint32_t i)
{
	__le64 blkno;

	memcpy(&blkno, view->value + i * sizeof(blkno), sizeof(blkno));
	return le64toh(blkno);
}

static int value_block_read(struct ngnfs_txn *txn, const struct ngnfs_inode *inode,
			    const struct item_view *view, uint32_t position, const char *op,
			    const struct ngnfs_xattr_value **value_out)
{
	uint64_t blkno = item_value_block(view, position);
	const struct ngnfs_xattr_value *value;
	const void *data;
	int ret;

	ret = ngnfs_txn_read(txn, blkno, &data);
	if (ret < 0)
		return ret;
	ret = ngnfs_block_check(data, NGNFS_MAGIC_XATTR_VALUE, blkno, inode_ino(inode), op);
	if (ret < 0)
		return ret;
	value = data;
	if (le64toh(value->name_hash) != view->hash || le32toh(value->position) != position)
		return ngnfs_fail(-EIO,
				  "%s: xattr value block %llu (device %u) of inode %llu belongs to "
				  "hash 0x%llx position %u, expected hash 0x%llx position %u",
				  op, (unsigned long long)blkno, ngnfs_blkno_device(blkno),
				  (unsigned long long)inode_ino(inode),
				  (unsigned long long)le64toh(value->name_hash),
				  le32toh(value->position), (unsigned long long)view->hash,
				  position);
	*value_out = value;
	return 0;
}

/* ---- finding ---- */

enum xattr_place { XATTR_NOWHERE, XATTR_INLINE, XATTR_INDEX };

struct xattr_found {
	enum xattr_place place;
	uint32_t offset; /* inline area or items[] offset */
	uint32_t size;	 /* entry or item size */
	uint32_t value_length;
	uint64_t index_blkno;
	uint64_t prev_blkno; /* chain predecessor of index_blkno, 0 for the inode */
	struct inline_entry_view inline_entry;
	struct item_view item;
};

static int find_xattr(struct ngnfs_txn *txn, const struct ngnfs_inode *inode, const char *name,
		      size_t name_length, const char *op, struct xattr_found *found)
{
	uint32_t used = le16toh(inode->inline_xattr_bytes);
	uint64_t hash = name_hash(name, name_length);
	uint64_t blkno = le64toh(inode->xattr_root);
	uint64_t prev = 0;
	uint32_t blocks = 0;
	int ret;

	memset(found, 0, sizeof(*found));
	ret = inline_check(inode, op);
	if (ret < 0)
		return ret;
	for (uint32_t offset = 0; offset < used;) {
		struct inline_entry_view view;

		inline_view(inode, offset, &view);
		if (view.name_length == name_length && memcmp(view.name, name, name_length) == 0) {
			found->place = XATTR_INLINE;
			found->offset = offset;
			found->size = view.size;
			found->value_length = view.value_length;
			found->inline_entry = view;
			return 0;
		}
		offset += view.size;
	}
	while (blkno) {
		const struct ngnfs_xattr_index *index;

		if (++blocks > CHAIN_BLOCKS_MAX)
			return corrupt_index(inode, blkno, op, "xattr chain loops");
		ret = index_read(txn, inode, blkno, op, &index);
		if (ret < 0)
			return ret;
		for (uint32_t offset = 0; offset < le16toh(index->used_bytes);) {
			struct item_view view;

			item_view(index, offset, &view);
			if (view.hash == hash && view.name_length == name_length &&
			    memcmp(view.name, name, name_length) == 0) {
				found->place = XATTR_INDEX;
				found->offset = offset;
				found->size = view.size;
				found->value_length = view.value_length;
				found->index_blkno = blkno;
				found->prev_blkno = prev;
				found->item = view;
				return 0;
			}
			offset += view.size;
		}
		prev = blkno;
		blkno = le64toh(index->next);
	}
	return 0;
}

/* Copy the value of a found xattr into buffer (value_length bytes). */
static int read_value(struct ngnfs_txn *txn, const struct ngnfs_inode *inode,
		      const struct xattr_found *found, const char *op, uint8_t *buffer)
{
	const struct item_view *view = &found->item;
	uint32_t blocks;

	if (found->place == XATTR_INLINE) {
		memcpy(buffer, found->inline_entry.value, found->value_length);
		return 0;
	}
	if (!view->value_blocks) {
		memcpy(buffer, view->value, view->value_length);
		return 0;
	}
	blocks = value_block_count(view->value_length);
	for (uint32_t i = 0; i < blocks; i++) {
		const struct ngnfs_xattr_value *value;
		uint32_t part = view->value_length - i * NGNFS_XATTR_VALUE_BYTES;
		int ret;

		if (part > NGNFS_XATTR_VALUE_BYTES)
			part = NGNFS_XATTR_VALUE_BYTES;
		ret = value_block_read(txn, inode, view, i, op, &value);
		if (ret < 0)
			return ret;
		memcpy(buffer + i * NGNFS_XATTR_VALUE_BYTES, value->bytes, part);
	}
	return 0;
}

/* ---- changing ---- */

static int free_block(struct ngnfs_txn *txn, uint64_t blkno)
{
	void *data;
	int ret = ngnfs_txn_write(txn, blkno, &data);

	if (ret < 0)
		return ret;
	return ngnfs_txn_free(txn, blkno);
}

static void inline_remove(struct ngnfs_inode *inode, uint32_t offset, uint32_t size)
{
	uint8_t *area = inline_area(inode);
	uint32_t used = le16toh(inode->inline_xattr_bytes);

	memmove(area + offset, area + offset + size, used - offset - size);
	memset(area + used - size, 0, size);
	inode->inline_xattr_bytes = htole16((uint16_t)(used - size));
	inode->inline_xattr_count = htole16(le16toh(inode->inline_xattr_count) - 1);
}

static int remove_found(struct ngnfs_txn *txn, struct ngnfs_inode *inode,
			const struct xattr_found *found, const char *op)
{
	struct ngnfs_xattr_index *index;
	uint32_t used;
	uint64_t next;
	void *data;
	int ret;

	if (found->place == XATTR_INLINE) {
		inline_remove(inode, found->offset, found->size);
		return 0;
	}
	/* value blocks first: found->item points into the block we are about to change */
	if (found->item.value_blocks) {
		for (uint32_t i = 0; i < value_block_count(found->value_length); i++) {
			const struct ngnfs_xattr_value *value;

			ret = value_block_read(txn, inode, &found->item, i, op, &value);
			if (ret < 0)
				return ret;
			ret = free_block(txn, item_value_block(&found->item, i));
			if (ret < 0)
				return ret;
		}
	}
	ret = ngnfs_txn_write(txn, found->index_blkno, &data);
	if (ret < 0)
		return ret;
	index = data;
	used = le16toh(index->used_bytes);
	memmove(index->items + found->offset, index->items + found->offset + found->size,
		used - found->offset - found->size);
	memset(index->items + used - found->size, 0, found->size);
	index->used_bytes = htole16((uint16_t)(used - found->size));
	index->item_count = htole16(le16toh(index->item_count) - 1);
	if (index->item_count)
		return 0;

	/* the block's last item went: take the block out of the chain */
	next = le64toh(index->next);
	if (found->prev_blkno == 0) {
		inode->xattr_root = htole64(next);
	} else {
		struct ngnfs_xattr_index *prev;

		ret = ngnfs_txn_write(txn, found->prev_blkno, &data);
		if (ret < 0)
			return ret;
		prev = data;
		prev->next = htole64(next);
	}
	return ngnfs_txn_free(txn, found->index_blkno);
}

static bool insert_inline(struct ngnfs_inode *inode, const char *name, size_t name_length,
			  const void *value, size_t size)
{
	uint32_t entry_size = inline_entry_size((uint32_t)name_length, (uint32_t)size);
	uint32_t used = le16toh(inode->inline_xattr_bytes);
	struct ngnfs_xattr_inline_entry *entry;

	if (entry_size > NGNFS_XATTR_INLINE_ENTRY_MAX ||
	    entry_size > ngnfs_inode_inline_capacity(inode) - used)
		return false;
	entry = (void *)(inline_area(inode) + used);
	memset(entry, 0, entry_size);
	entry->name_length = (uint8_t)name_length;
	entry->value_length = htole16((uint16_t)size);
	memcpy(entry + 1, name, name_length);
	if (size)
		memcpy((uint8_t *)(entry + 1) + name_length, value, size);
	inode->inline_xattr_bytes = htole16((uint16_t)(used + entry_size));
	inode->inline_xattr_count = htole16(le16toh(inode->inline_xattr_count) + 1);
	return true;
}

/*
 * A new block on the inode's device.  A block number of 0 ends the chain
 * and indexes below NGNFS_FIRST_ALLOC_INDEX are fixed blocks, so a server
 * that hands one out is refused rather than trusted.
 */
static int alloc_block(struct ngnfs_txn *txn, const struct ngnfs_inode *inode, const char *what,
		       uint64_t *blkno, void **data)
{
	uint16_t device = ngnfs_blkno_device(inode_ino(inode));
	uint64_t version; /* unused: only inodes need their block's version */
	int ret = ngnfs_txn_alloc(txn, device, blkno, &version, data);

	if (ret < 0)
		return ret;
	/* another device when this one is full (cache.c): any of the filesystem's */
	if (ngnfs_blkno_index(*blkno) < NGNFS_FIRST_ALLOC_INDEX ||
	    ngnfs_blkno_device(*blkno) >= ngnfs_txn_device_count(txn))
		return ngnfs_fail(
		    -EIO,
		    "allocating an xattr %s block for inode %llu on device %u: the "
		    "server gave block %llu (device %u, index %llu), which is reserved "
		    "or elsewhere",
		    what, (unsigned long long)inode_ino(inode), device, (unsigned long long)*blkno,
		    ngnfs_blkno_device(*blkno), (unsigned long long)ngnfs_blkno_index(*blkno));
	memset(*data, 0, NGNFS_BLOCK_SIZE);
	return 0;
}

/* An index block with room for needed bytes: the first in the chain, or a new head. */
static int index_with_room(struct ngnfs_txn *txn, struct ngnfs_inode *inode, uint32_t needed,
			   const char *op, struct ngnfs_xattr_index **index_out)
{
	uint64_t blkno = le64toh(inode->xattr_root);
	struct ngnfs_xattr_index *index;
	uint32_t blocks = 0;
	void *data;
	int ret;

	while (blkno) {
		const struct ngnfs_xattr_index *candidate;

		if (++blocks > CHAIN_BLOCKS_MAX)
			return corrupt_index(inode, blkno, op, "xattr chain loops");
		ret = index_read(txn, inode, blkno, op, &candidate);
		if (ret < 0)
			return ret;
		if (NGNFS_XATTR_INDEX_ITEM_BYTES - le16toh(candidate->used_bytes) >= needed) {
			ret = ngnfs_txn_write(txn, blkno, &data);
			if (ret < 0)
				return ret;
			*index_out = data;
			return 0;
		}
		blkno = le64toh(candidate->next);
	}
	ret = alloc_block(txn, inode, "index", &blkno, &data);
	if (ret < 0)
		return ret;
	ngnfs_block_header_init(data, NGNFS_MAGIC_XATTR, blkno, inode_ino(inode));
	index = data;
	index->next = inode->xattr_root;
	inode->xattr_root = htole64(blkno);
	*index_out = index;
	return 0;
}

static int insert_index(struct ngnfs_txn *txn, struct ngnfs_inode *inode, const char *name,
			size_t name_length, const void *value, size_t size, const char *op)
{
	uint32_t needed = item_size((uint32_t)name_length, (uint32_t)size);
	uint64_t hash = name_hash(name, name_length);
	struct ngnfs_xattr_index *index = NULL;
	struct ngnfs_xattr_item *item;
	uint8_t *payload;
	uint32_t used;
	int ret;

	ret = index_with_room(txn, inode, needed, op, &index);
	if (ret < 0)
		return ret;
	used = le16toh(index->used_bytes);
	item = (void *)(index->items + used);
	memset(item, 0, needed);
	item->name_hash = htole64(hash);
	item->value_length = htole32((uint32_t)size);
	item->name_length = (uint8_t)name_length;
	memcpy(item + 1, name, name_length);
	payload = index->items + used + item_value_offset((uint32_t)name_length);
	if (!item_has_value_blocks((uint32_t)size)) {
		if (size)
			memcpy(payload, value, size);
	} else {
		item->flags = NGNFS_XATTR_ITEM_VALUE_BLOCKS;
		for (uint32_t i = 0; i < value_block_count((uint32_t)size); i++) {
			struct ngnfs_xattr_value *block;
			uint32_t part = (uint32_t)size - i * NGNFS_XATTR_VALUE_BYTES;
			uint64_t blkno;
			__le64 pointer;
			void *data;

			if (part > NGNFS_XATTR_VALUE_BYTES)
				part = NGNFS_XATTR_VALUE_BYTES;
			ret = alloc_block(txn, inode, "value", &blkno, &data);
			if (ret < 0)
				return ret;
			ngnfs_block_header_init(data, NGNFS_MAGIC_XATTR_VALUE, blkno,
						inode_ino(inode));
			block = data;
			block->name_hash = htole64(hash);
			block->position = htole32(i);
			memcpy(block->bytes, (const uint8_t *)value + i * NGNFS_XATTR_VALUE_BYTES,
			       part);
			pointer = htole64(blkno);
			memcpy(payload + i * sizeof(pointer), &pointer, sizeof(pointer));
		}
	}
	index->used_bytes = htole16((uint16_t)(used + needed));
	index->item_count = htole16(le16toh(index->item_count) + 1);
	return 0;
}

/* ---- operations ---- */

struct set_args {
	const struct ngnfs_handle *handle;
	const char *name;
	size_t name_length;
	const void *value;
	size_t size;
	int flags;
};

static int set_fn(struct ngnfs_txn *txn, void *arg)
{
	const char *op = "setxattr";
	struct set_args *args = arg;
	struct ngnfs_inode *inode;
	struct xattr_found found;
	int ret;

	ret = ngnfs_inode_write_handle(txn, args->handle, op, &inode);
	if (ret < 0)
		return ret;
	ret = find_xattr(txn, inode, args->name, args->name_length, op, &found);
	if (ret < 0)
		return ret;
	if ((args->flags & XATTR_CREATE) && found.place != XATTR_NOWHERE)
		return ngnfs_fail_quiet(-EEXIST, "%s: xattr \"%s\" of inode %llu exists", op,
					args->name, (unsigned long long)args->handle->ino);
	if ((args->flags & XATTR_REPLACE) && found.place == XATTR_NOWHERE)
		return ngnfs_fail_quiet(-ENODATA, "%s: inode %llu has no xattr \"%s\"", op,
					(unsigned long long)args->handle->ino, args->name);
	if (found.place != XATTR_NOWHERE) {
		ret = remove_found(txn, inode, &found, op);
		if (ret < 0)
			return ret;
	}
	if (!insert_inline(inode, args->name, args->name_length, args->value, args->size)) {
		ret = insert_index(txn, inode, args->name, args->name_length, args->value,
				   args->size, op);
		if (ret < 0)
			return ret;
	}
	ngnfs_inode_touch(inode, NGNFS_TOUCH_CTIME);
	return 0;
}

int ngnfs_xattr_set(struct ngnfs_cache *cache, const struct ngnfs_handle *handle, const char *name,
		    const void *value, size_t size, int flags)
{
	struct set_args args = {
		.handle = handle, .name = name, .value = value, .size = size, .flags = flags
	};
	int ret;

	ret = check_name(name, &args.name_length, "setxattr");
	if (ret < 0)
		return ret;
	if (size > NGNFS_XATTR_VALUE_MAX)
		return ngnfs_fail_quiet(-E2BIG, "setxattr: value of %zu bytes for \"%s\" (most %u)",
					size, name, NGNFS_XATTR_VALUE_MAX);
	if (size && !value)
		return ngnfs_fail_quiet(-EINVAL, "setxattr: no value for \"%s\"", name);
	if (flags & ~(XATTR_CREATE | XATTR_REPLACE))
		return ngnfs_fail_quiet(-EINVAL, "setxattr: unknown flags 0x%x", flags);
	return ngnfs_txn_run(cache, set_fn, &args);
}

struct get_args {
	const struct ngnfs_handle *handle;
	const char *name;
	size_t name_length;
	void *value;
	size_t size;
	/* result, reset by every run */
	size_t value_length;
};

static int get_fn(struct ngnfs_txn *txn, void *arg)
{
	const char *op = "getxattr";
	struct get_args *args = arg;
	const struct ngnfs_inode *inode;
	struct xattr_found found;
	int ret;

	args->value_length = 0;
	ret = ngnfs_inode_read_handle(txn, args->handle, op, &inode);
	if (ret < 0)
		return ret;
	ret = find_xattr(txn, inode, args->name, args->name_length, op, &found);
	if (ret < 0)
		return ret;
	if (found.place == XATTR_NOWHERE)
		return ngnfs_fail_quiet(-ENODATA, "%s: inode %llu has no xattr \"%s\"", op,
					(unsigned long long)args->handle->ino, args->name);
	args->value_length = found.value_length;
	if (args->size == 0)
		return 0;
	if (args->size < found.value_length)
		return ngnfs_fail_quiet(-ERANGE,
					"%s: xattr \"%s\" of inode %llu has %u bytes, buffer %zu",
					op, args->name, (unsigned long long)args->handle->ino,
					found.value_length, args->size);
	return read_value(txn, inode, &found, op, args->value);
}

ssize_t ngnfs_xattr_get(struct ngnfs_cache *cache, const struct ngnfs_handle *handle,
			const char *name, void *value, size_t size)
{
	struct get_args args = { .handle = handle, .name = name, .value = value, .size = size };
	int ret;

	ret = check_name(name, &args.name_length, "getxattr");
	if (ret < 0)
		return ret;
	if (size && !value)
		return ngnfs_fail_quiet(-EINVAL, "getxattr: no buffer for \"%s\"", name);
	ret = ngnfs_txn_run(cache, get_fn, &args);
	if (ret < 0)
		return ret;
	return (ssize_t)args.value_length;
}

struct list_args {
	const struct ngnfs_handle *handle;
	char *list;
	size_t size;
	/* result, reset by every run */
	size_t length;
};

static int list_add(struct list_args *args, const char *name, uint32_t name_length)
{
	if (args->size) {
		if (args->length + name_length + 1 > args->size)
			return ngnfs_fail_quiet(-ERANGE,
						"listxattr: names of inode %llu need more than %zu "
						"bytes",
						(unsigned long long)args->handle->ino, args->size);
		memcpy(args->list + args->length, name, name_length);
		args->list[args->length + name_length] = '\0';
	}
	args->length += name_length + 1;
	return 0;
}

static int list_fn(struct ngnfs_txn *txn, void *arg)
{
	const char *op = "listxattr";
	struct list_args *args = arg;
	const struct ngnfs_inode *inode;
	uint64_t blkno;
	uint32_t blocks = 0;
	uint32_t used;
	int ret;

	args->length = 0;
	ret = ngnfs_inode_read_handle(txn, args->handle, op, &inode);
	if (ret < 0)
		return ret;
	ret = inline_check(inode, op);
	if (ret < 0)
		return ret;
	used = le16toh(inode->inline_xattr_bytes);
	for (uint32_t offset = 0; offset < used;) {
		struct inline_entry_view view;

		inline_view(inode, offset, &view);
		ret = list_add(args, view.name, view.name_length);
		if (ret < 0)
			return ret;
		offset += view.size;
	}
	for (blkno = le64toh(inode->xattr_root); blkno;) {
		const struct ngnfs_xattr_index *index;

		if (++blocks > CHAIN_BLOCKS_MAX)
			return corrupt_index(inode, blkno, op, "xattr chain loops");
		ret = index_read(txn, inode, blkno, op, &index);
		if (ret < 0)
			return ret;
		for (uint32_t offset = 0; offset < le16toh(index->used_bytes);) {
			struct item_view view;

			item_view(index, offset, &view);
			ret = list_add(args, view.name, view.name_length);
			if (ret < 0)
				return ret;
			offset += view.size;
		}
		blkno = le64toh(index->next);
	}
	return 0;
}

ssize_t ngnfs_xattr_list(struct ngnfs_cache *cache, const struct ngnfs_handle *handle, char *list,
			 size_t size)
{
	struct list_args args = { .handle = handle, .list = list, .size = size };
	int ret;

	if (size && !list)
		return ngnfs_fail_quiet(-EINVAL, "listxattr: no buffer");
	ret = ngnfs_txn_run(cache, list_fn, &args);
	if (ret < 0)
		return ret;
	return (ssize_t)args.length;
}

struct remove_args {
	const struct ngnfs_handle *handle;
	const char *name;
	size_t name_length;
};

static int remove_fn(struct ngnfs_txn *txn, void *arg)
{
	const char *op = "removexattr";
	struct remove_args *args = arg;
	struct ngnfs_inode *inode;
	struct xattr_found found;
	int ret;

	ret = ngnfs_inode_write_handle(txn, args->handle, op, &inode);
	if (ret < 0)
		return ret;
	ret = find_xattr(txn, inode, args->name, args->name_length, op, &found);
	if (ret < 0)
		return ret;
	if (found.place == XATTR_NOWHERE)
		return ngnfs_fail_quiet(-ENODATA, "%s: inode %llu has no xattr \"%s\"", op,
					(unsigned long long)args->handle->ino, args->name);
	ret = remove_found(txn, inode, &found, op);
	if (ret < 0)
		return ret;
	ngnfs_inode_touch(inode, NGNFS_TOUCH_CTIME);
	return 0;
}

int ngnfs_xattr_remove(struct ngnfs_cache *cache, const struct ngnfs_handle *handle,
		       const char *name)
{
	struct remove_args args = { .handle = handle, .name = name };
	int ret;

	ret = check_name(name, &args.name_length, "removexattr");
	if (ret < 0)
		return ret;
	return ngnfs_txn_run(cache, remove_fn, &args);
}

int ngnfs_xattr_free_all(struct ngnfs_txn *txn, struct ngnfs_inode *inode)
{
	const char *op = "free xattrs";
	uint64_t blkno = le64toh(inode->xattr_root);
	uint32_t blocks = 0;
	int ret;

	while (blkno) {
		const struct ngnfs_xattr_index *index;
		uint64_t next;

		if (++blocks > CHAIN_BLOCKS_MAX)
			return corrupt_index(inode, blkno, op, "xattr chain loops");
		ret = index_read(txn, inode, blkno, op, &index);
		if (ret < 0)
			return ret;
		for (uint32_t offset = 0; offset < le16toh(index->used_bytes);) {
			struct item_view view;

			item_view(index, offset, &view);
			for (uint32_t i = 0;
			     view.value_blocks && i < value_block_count(view.value_length); i++) {
				ret = free_block(txn, item_value_block(&view, i));
				if (ret < 0)
					return ret;
			}
			offset += view.size;
		}
		next = le64toh(index->next);
		ret = free_block(txn, blkno);
		if (ret < 0)
			return ret;
		blkno = next;
	}
	inode->xattr_root = 0;
	memset(inline_area(inode), 0, le16toh(inode->inline_xattr_bytes));
	inode->inline_xattr_bytes = 0;
	inode->inline_xattr_count = 0;
	return 0;
}

struct count_args {
	const struct ngnfs_handle *handle;
	uint64_t count;
};

static int count_fn(struct ngnfs_txn *txn, void *arg)
{
	struct count_args *args = arg;
	const struct ngnfs_inode *inode;
	uint64_t blkno;
	int ret;

	args->count = 0;
	ret = ngnfs_inode_read_handle(txn, args->handle, "count xattr blocks", &inode);
	if (ret < 0)
		return ret;
	for (blkno = le64toh(inode->xattr_root); blkno;) {
		const struct ngnfs_xattr_index *index;

		if (args->count >= CHAIN_BLOCKS_MAX)
			return corrupt_index(inode, blkno, "count xattr blocks",
					     "xattr chain loops");
		ret = index_read(txn, inode, blkno, "count xattr blocks", &index);
		if (ret < 0)
			return ret;
		args->count++;
		blkno = le64toh(index->next);
	}
	return 0;
}

int ngnfs_xattr_index_blocks(struct ngnfs_cache *cache, const struct ngnfs_handle *handle,
			     uint64_t *count)
{
	struct count_args args = { .handle = handle };
	int ret = ngnfs_txn_run(cache, count_fn, &args);

	*count = args.count;
	return ret;
}

/* ---- native API ---- */

int ngnfs_setxattr(struct ngnfs_fs *fs, const struct ngnfs_handle *handle, const char *name,
		   const void *value, size_t size, int flags)
{
	ngnfs_clear_error();
	return ngnfs_xattr_set(fs->cache, handle, name, value, size, flags);
}

ssize_t ngnfs_getxattr(struct ngnfs_fs *fs, const struct ngnfs_handle *handle, const char *name,
		       void *value, size_t size)
{
	ngnfs_clear_error();
	return ngnfs_xattr_get(fs->cache, handle, name, value, size);
}

ssize_t ngnfs_listxattr(struct ngnfs_fs *fs, const struct ngnfs_handle *handle, char *list,
			size_t size)
{
	ngnfs_clear_error();
	return ngnfs_xattr_list(fs->cache, handle, list, size);
}

int ngnfs_removexattr(struct ngnfs_fs *fs, const struct ngnfs_handle *handle, const char *name)
{
	ngnfs_clear_error();
	return ngnfs_xattr_remove(fs->cache, handle, name);
}
