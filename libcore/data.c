// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * File data: reading, writing and truncating regular files through their
 * data map (the radix tree of format-block.h, "File data").
 *
 * Every request is cut into transactions of at most NGNFS_DATA_TXN_BLOCKS
 * file blocks (reads NGNFS_DATA_READ_TXN_BLOCKS), each a re-runnable
 * function over its argument: a large write or truncate never builds an
 * unbounded dirty set, and a 1 GiB write leaves as many bounded atomic
 * sets.  A write transaction updates size, mtime, ctime, change and
 * data_blocks with the blocks it wrote, so each intermediate state is a
 * file that had the first part of the write applied, like a short write.
 *
 * Map blocks are read first and taken for write only when a pointer in
 * them changes: an overwrite of existing data dirties the data blocks and
 * the inode, not the map, so writers to different parts of one file meet
 * only on the inode.
 *
 * Truncating down frees from the end of the file towards the new size and
 * can stop after a budget of freed blocks: everything at and past the
 * point it reached is gone, so the size can be lowered to that point and
 * the next transaction goes on from there.  Walking skips holes by their
 * zero pointers, so cutting a sparse 1 TiB file costs what it allocated,
 * not its logical size.  The invariant the rest relies on: no block is
 * allocated past the block holding the last byte, and the bytes past the
 * size in that block are zero, so extending a file (write past the end,
 * truncate up) never has to clear anything.
 *
 * XXX:
 *  - Reads do not update atime (as a noatime mount).
 *  - Freeing a data block takes it for write, which the cache may fetch
 *    from the server only to drop it; overwriting a whole block fetches
 *    its old contents likewise.  A "write without data" access in txn.h
 *    would avoid both.
 *  - Every block of a request walks the map from the root (the walk is a
 *    few cached look-ups per block); a cursor over the last leaf would
 *    save them.
 *  - A stable write of many transactions waits for each in turn.
 *  - A read of n uncached blocks re-runs its transaction n times, one GET
 *    round trip each (the runs only look blocks up; the copying waits
 *    until all are held): txn.h has no way to ask for several blocks at
 *    once.  A prefetch call there would make a cold 1 MiB read one round
 *    trip per device.
 */

#include <errno.h>
#include <limits.h>
#include <string.h>

#include "data.h"
#include "fs-internal.h"

_Static_assert(sizeof(struct ngnfs_data_map) == NGNFS_BLOCK_SIZE, "data map is one block");
_Static_assert(NGNFS_DATA_MAX_FILE_SIZE == NGNFS_FILE_SIZE_MAX,
	       "the API states the format's limit");

/* File blocks covered by one pointer of a map at level (level >= 1). */
static uint64_t span_of_level(uint32_t level)
{
	uint64_t span = 1;

	for (uint32_t i = 1; i < level; i++)
		span *= NGNFS_DATA_MAP_POINTERS;
	return span;
}

/* File blocks a tree of height can address (height 0: the root is block 0). */
static uint64_t capacity_of_height(uint32_t height)
{
	return span_of_level(height + 1);
}

/*
 * Block 0 on the inode's device, then round robin: a small file's write
 * (inode + block 0) is a one-device set, a large file still spreads over
 * every device.  Files start where their directory is (inode.c).
 */
uint16_t ngnfs_data_device_for(uint64_t ino, uint64_t file_block, uint16_t device_count)
{
	if (device_count == 0)
		return 0;
	return (uint16_t)((ngnfs_blkno_device(ino) + file_block % device_count) % device_count);
}

static uint64_t inode_ino(const struct ngnfs_inode *inode)
{
	return le64toh(inode->ino);
}

static void add_data_blocks(struct ngnfs_inode *inode, int64_t delta)
{
	inode->data_blocks = htole64(le64toh(inode->data_blocks) + (uint64_t)delta);
}

/* Type check every data operation makes: directories are -EISDIR, others -EINVAL. */
static int check_regular(const struct ngnfs_inode *inode, const char *op)
{
	uint32_t type = ngnfs_mode_type(le32toh(inode->mode));

	if (type == 0100000)
		return 0;
	if (type == 0040000)
		return ngnfs_fail_quiet(-EISDIR, "%s: inode %llu is a directory", op,
					(unsigned long long)inode_ino(inode));
	return ngnfs_fail_quiet(-EINVAL, "%s: inode %llu is not a regular file", op,
				(unsigned long long)inode_ino(inode));
}

static int check_height(const struct ngnfs_inode *inode, const char *op)
{
	uint32_t height = le32toh(inode->data_height);

	if (height > NGNFS_DATA_MAX_HEIGHT)
		return ngnfs_fail(
		    -EIO, "%s: inode %llu (device %u) has data map height %u, most is %u", op,
		    (unsigned long long)inode_ino(inode), ngnfs_blkno_device(inode_ino(inode)),
		    height, NGNFS_DATA_MAX_HEIGHT);
	return 0;
}

/* Read a map block and check that it is the level/first_block map of this inode. */
static int map_read(struct ngnfs_txn *txn, const struct ngnfs_inode *inode, uint64_t blkno,
		    uint32_t level, uint64_t first_block, const char *op,
		    const struct ngnfs_data_map **map_out)
{
	const void *data;
	const struct ngnfs_data_map *map;
	int ret;

	ret = ngnfs_txn_read(txn, blkno, &data);
	if (ret < 0)
		return ret;
	ret = ngnfs_block_check(data, NGNFS_MAGIC_DATA_MAP, blkno, inode_ino(inode), op);
	if (ret < 0)
		return ret;
	map = data;
	if (le32toh(map->level) != level || le64toh(map->first_block) != first_block ||
	    le32toh(map->pointer_count) > NGNFS_DATA_MAP_POINTERS)
		return ngnfs_fail(
		    -EIO,
		    "%s: data map block %llu (device %u) of inode %llu says level %u "
		    "first block %llu pointers %u, expected level %u first block %llu",
		    op, (unsigned long long)blkno, ngnfs_blkno_device(blkno),
		    (unsigned long long)inode_ino(inode), le32toh(map->level),
		    (unsigned long long)le64toh(map->first_block), le32toh(map->pointer_count),
		    level, (unsigned long long)first_block);
	*map_out = map;
	return 0;
}

/* A pointer about to be followed must name a block that can have been allocated. */
static int check_pointer(struct ngnfs_txn *txn, const struct ngnfs_inode *inode, uint64_t blkno,
			 uint32_t slot, uint64_t pointer, const char *op)
{
	if (pointer && (ngnfs_blkno_index(pointer) < NGNFS_FIRST_ALLOC_INDEX ||
			ngnfs_blkno_device(pointer) >= ngnfs_txn_device_count(txn)))
		return ngnfs_fail(-EIO,
				  "%s: data map block %llu (device %u) of inode %llu: pointer %u "
				  "names block %llu (device %u), which cannot be allocated",
				  op, (unsigned long long)blkno, ngnfs_blkno_device(blkno),
				  (unsigned long long)inode_ino(inode), slot,
				  (unsigned long long)pointer, ngnfs_blkno_device(pointer));
	return 0;
}

/*
 * Truncate and free trust pointer_count (a map whose count reaches 0 is
 * freed) and free whatever the pointers name, so they check every pointer
 * first; lookups check only the pointer they follow.
 */
static int map_check_pointers(struct ngnfs_txn *txn, const struct ngnfs_inode *inode,
			      uint64_t blkno, const struct ngnfs_data_map *map, const char *op)
{
	uint32_t nonzero = 0;
	int ret;

	for (uint32_t i = 0; i < NGNFS_DATA_MAP_POINTERS; i++) {
		uint64_t pointer = le64toh(map->pointers[i]);

		if (!pointer)
			continue;
		nonzero++;
		ret = check_pointer(txn, inode, blkno, i, pointer, op);
		if (ret < 0)
			return ret;
	}
	if (nonzero != le32toh(map->pointer_count))
		return ngnfs_fail(-EIO,
				  "%s: data map block %llu (device %u) of inode %llu counts %u "
				  "pointers but holds %u",
				  op, (unsigned long long)blkno, ngnfs_blkno_device(blkno),
				  (unsigned long long)inode_ino(inode), le32toh(map->pointer_count),
				  nonzero);
	return 0;
}

static int map_write(struct ngnfs_txn *txn, uint64_t blkno, struct ngnfs_data_map **map_out)
{
	void *data;
	int ret = ngnfs_txn_write(txn, blkno, &data);

	if (ret < 0)
		return ret;
	*map_out = data;
	return 0;
}

/*
 * A new block on device for inode.  Block 0 means "hole" in the map and
 * indexes below NGNFS_FIRST_ALLOC_INDEX are fixed blocks (superblock),
 * so a server that hands one out is refused rather than trusted.
 */
static int alloc_block(struct ngnfs_txn *txn, const struct ngnfs_inode *inode, uint16_t device,
		       const char *what, uint64_t *blkno, void **data)
{
	uint64_t version; /* unused: only inodes need their block's version */
	int ret = ngnfs_txn_alloc(txn, device, blkno, &version, data);

	if (ret < 0)
		return ret;
	/* another device when this one is full (cache.c): any of the filesystem's */
	if (ngnfs_blkno_index(*blkno) < NGNFS_FIRST_ALLOC_INDEX ||
	    ngnfs_blkno_device(*blkno) >= ngnfs_txn_device_count(txn))
		return ngnfs_fail(-EIO,
				  "allocating a %s block for inode %llu on device %u: the server "
				  "gave block %llu (device %u, index %llu), which is reserved or "
				  "elsewhere",
				  what, (unsigned long long)inode_ino(inode), device,
				  (unsigned long long)*blkno, ngnfs_blkno_device(*blkno),
				  (unsigned long long)ngnfs_blkno_index(*blkno));
	memset(*data, 0, NGNFS_BLOCK_SIZE);
	return 0;
}

static int map_alloc(struct ngnfs_txn *txn, struct ngnfs_inode *inode, uint32_t level,
		     uint64_t first_block, uint64_t *blkno, struct ngnfs_data_map **map_out)
{
	struct ngnfs_data_map *map;
	void *data;
	int ret;

	ret =
	    alloc_block(txn, inode, ngnfs_blkno_device(inode_ino(inode)), "data map", blkno, &data);
	if (ret < 0)
		return ret;
	ngnfs_block_header_init(data, NGNFS_MAGIC_DATA_MAP, *blkno, inode_ino(inode));
	map = data;
	map->level = htole32(level);
	map->first_block = htole64(first_block);
	add_data_blocks(inode, 1);
	if (map_out)
		*map_out = map;
	return 0;
}

static int data_alloc(struct ngnfs_txn *txn, struct ngnfs_inode *inode, uint64_t file_block,
		      uint64_t *blkno, void **data)
{
	uint16_t device =
	    ngnfs_data_device_for(inode_ino(inode), file_block, ngnfs_txn_device_count(txn));
	int ret = alloc_block(txn, inode, device, "data", blkno, data);

	if (ret < 0)
		return ret;
	add_data_blocks(inode, 1);
	return 0;
}

/* The data block of file_block, or 0 for a hole. */
static int map_lookup(struct ngnfs_txn *txn, const struct ngnfs_inode *inode, uint64_t file_block,
		      const char *op, uint64_t *blkno_out)
{
	uint32_t height = le32toh(inode->data_height);
	uint64_t blkno = le64toh(inode->data_root);
	uint64_t first = 0;
	int ret;

	*blkno_out = 0;
	ret = check_height(inode, op);
	if (ret < 0)
		return ret;
	if (file_block >= capacity_of_height(height))
		return 0;
	for (uint32_t level = height; level > 0 && blkno; level--) {
		const struct ngnfs_data_map *map;
		uint64_t span = span_of_level(level);
		uint64_t slot = (file_block - first) / span;

		ret = map_read(txn, inode, blkno, level, first, op, &map);
		if (ret < 0)
			return ret;
		ret = check_pointer(txn, inode, blkno, (uint32_t)slot, le64toh(map->pointers[slot]),
				    op);
		if (ret < 0)
			return ret;
		blkno = le64toh(map->pointers[slot]);
		first += slot * span;
	}
	*blkno_out = blkno;
	return 0;
}

/* Add levels until the tree addresses file_block; an empty tree just changes height. */
static int map_grow(struct ngnfs_txn *txn, struct ngnfs_inode *inode, uint64_t file_block)
{
	uint32_t height = le32toh(inode->data_height);
	int ret;

	while (capacity_of_height(height) <= file_block) {
		uint64_t old_root = le64toh(inode->data_root);

		if (height >= NGNFS_DATA_MAX_HEIGHT)
			return -EFBIG;
		if (old_root) {
			struct ngnfs_data_map *root;
			uint64_t blkno;

			ret = map_alloc(txn, inode, height + 1, 0, &blkno, &root);
			if (ret < 0)
				return ret;
			root->pointers[0] = htole64(old_root);
			root->pointer_count = htole32(1);
			inode->data_root = htole64(blkno);
		}
		height++;
		inode->data_height = htole32(height);
	}
	return 0;
}

/*
 * The data block of file_block for writing, allocating it and the maps
 * above it as needed; *fresh says it was allocated (and so is zeroed).
 */
static int data_block_for_write(struct ngnfs_txn *txn, struct ngnfs_inode *inode,
				uint64_t file_block, const char *op, void **data, bool *fresh)
{
	uint64_t blkno;
	uint64_t first = 0;
	uint32_t height;
	int ret;

	*fresh = false;
	ret = check_height(inode, op);
	if (ret < 0)
		return ret;
	ret = map_grow(txn, inode, file_block);
	if (ret < 0)
		return ret;
	height = le32toh(inode->data_height);
	blkno = le64toh(inode->data_root);
	if (!blkno) {
		if (height == 0) {
			ret = data_alloc(txn, inode, file_block, &blkno, data);
			if (ret < 0)
				return ret;
			inode->data_root = htole64(blkno);
			*fresh = true;
			return 0;
		}
		ret = map_alloc(txn, inode, height, 0, &blkno, NULL);
		if (ret < 0)
			return ret;
		inode->data_root = htole64(blkno);
	}
	for (uint32_t level = height; level > 0; level--) {
		const struct ngnfs_data_map *map;
		struct ngnfs_data_map *map_writable;
		uint64_t span = span_of_level(level);
		uint64_t slot = (file_block - first) / span;
		uint64_t child;

		ret = map_read(txn, inode, blkno, level, first, op, &map);
		if (ret < 0)
			return ret;
		child = le64toh(map->pointers[slot]);
		ret = check_pointer(txn, inode, blkno, (uint32_t)slot, child, op);
		if (ret < 0)
			return ret;
		if (!child) {
			ret = map_write(txn, blkno, &map_writable);
			if (ret < 0)
				return ret;
			if (level == 1)
				ret = data_alloc(txn, inode, file_block, &child, data);
			else
				ret = map_alloc(txn, inode, level - 1, first + slot * span, &child,
						NULL);
			if (ret < 0)
				return ret;
			map_writable->pointers[slot] = htole64(child);
			map_writable->pointer_count =
			    htole32(le32toh(map_writable->pointer_count) + 1);
			if (level == 1) {
				*fresh = true;
				return 0;
			}
		}
		blkno = child;
		first += slot * span;
	}
	return ngnfs_txn_write(txn, blkno, data);
}

/* What a trim walk carries: how much it may still free and how far down it got. */
struct trim_state {
	const char *op;
	uint64_t budget;       /* blocks (data and emptied maps) it may still free */
	bool stopped;	       /* ran out of budget */
	uint64_t done_down_to; /* every block at and past this file block is freed */
};

static int free_block(struct ngnfs_txn *txn, struct ngnfs_inode *inode, uint64_t blkno)
{
	void *data;
	int ret = ngnfs_txn_write(txn, blkno, &data);

	if (ret < 0)
		return ret;
	ret = ngnfs_txn_free(txn, blkno);
	if (ret < 0)
		return ret;
	add_data_blocks(inode, -1);
	return 0;
}

/*
 * Free the blocks at and past file block keep in the subtree at blkno
 * (a data block when level is 0), highest first; *emptied says the whole
 * subtree went and the parent must clear its pointer.
 */
static int trim(struct ngnfs_txn *txn, struct ngnfs_inode *inode, uint64_t blkno, uint32_t level,
		uint64_t first, uint64_t keep, struct trim_state *state, bool *emptied)
{
	const struct ngnfs_data_map *map;
	struct ngnfs_data_map *map_writable = NULL;
	uint64_t span = span_of_level(level);
	uint64_t start_slot;
	uint32_t pointer_count;
	int ret;

	*emptied = false;
	if (level == 0) {
		if (first < keep)
			return 0;
		if (state->budget == 0) {
			state->stopped = true;
			return 0;
		}
		ret = free_block(txn, inode, blkno);
		if (ret < 0)
			return ret;
		state->budget--;
		*emptied = true;
		return 0;
	}

	ret = map_read(txn, inode, blkno, level, first, state->op, &map);
	if (ret < 0)
		return ret;
	ret = map_check_pointers(txn, inode, blkno, map, state->op);
	if (ret < 0)
		return ret;
	start_slot = keep > first ? (keep - first) / span : 0;
	pointer_count = le32toh(map->pointer_count);
	for (uint64_t slot = NGNFS_DATA_MAP_POINTERS; slot-- > start_slot;) {
		const struct ngnfs_data_map *current = map_writable ? map_writable : map;
		uint64_t child = le64toh(current->pointers[slot]);
		uint64_t child_first = first + slot * span;
		bool child_emptied;

		if (child) {
			ret = trim(txn, inode, child, level - 1, child_first, keep, state,
				   &child_emptied);
			if (ret < 0)
				return ret;
			if (child_emptied) {
				if (!map_writable) {
					ret = map_write(txn, blkno, &map_writable);
					if (ret < 0)
						return ret;
				}
				map_writable->pointers[slot] = 0;
				pointer_count--;
				map_writable->pointer_count = htole32(pointer_count);
			}
			if (state->stopped)
				return 0;
		}
		state->done_down_to = child_first > keep ? child_first : keep;
	}
	if (pointer_count == 0) {
		ret = free_block(txn, inode, blkno);
		if (ret < 0)
			return ret;
		*emptied = true;
	}
	return 0;
}

/* Take root levels away while the kept blocks fit under slot 0. */
static int map_shrink_height(struct ngnfs_txn *txn, struct ngnfs_inode *inode, uint64_t keep_blocks,
			     const char *op)
{
	uint32_t height = le32toh(inode->data_height);
	int ret;

	while (height > 0 && keep_blocks <= capacity_of_height(height - 1)) {
		uint64_t root = le64toh(inode->data_root);

		if (root) {
			const struct ngnfs_data_map *map;
			uint64_t child;

			ret = map_read(txn, inode, root, height, 0, op, &map);
			if (ret < 0)
				return ret;
			ret = map_check_pointers(txn, inode, root, map, op);
			if (ret < 0)
				return ret;
			child = le64toh(map->pointers[0]);
			if (le32toh(map->pointer_count) != (child ? 1U : 0U))
				return ngnfs_fail(
				    -EIO,
				    "%s: data map root %llu (device %u) of inode %llu "
				    "has %u pointers past the file's end",
				    op, (unsigned long long)root, ngnfs_blkno_device(root),
				    (unsigned long long)inode_ino(inode),
				    le32toh(map->pointer_count));
			ret = free_block(txn, inode, root);
			if (ret < 0)
				return ret;
			inode->data_root = htole64(child);
		}
		height--;
		inode->data_height = htole32(height);
	}
	/* an empty tree may have any height; 0 is the one a fresh file has */
	if (!inode->data_root)
		inode->data_height = 0;
	return 0;
}

/*
 * Free blocks at and past keep_blocks, at most budget of them; returns in
 * *reached the file block down to which everything is freed (keep_blocks
 * when the budget sufficed).
 */
static int trim_tree(struct ngnfs_txn *txn, struct ngnfs_inode *inode, uint64_t keep_blocks,
		     uint64_t budget, const char *op, uint64_t *reached)
{
	uint32_t height = le32toh(inode->data_height);
	uint64_t root = le64toh(inode->data_root);
	struct trim_state state = {
		.op = op,
		.budget = budget,
		.done_down_to = capacity_of_height(height),
	};
	bool emptied = false;
	int ret;

	ret = check_height(inode, op);
	if (ret < 0)
		return ret;
	*reached = keep_blocks;
	if (root && keep_blocks < capacity_of_height(height)) {
		ret = trim(txn, inode, root, height, 0, keep_blocks, &state, &emptied);
		if (ret < 0)
			return ret;
		if (emptied)
			inode->data_root = 0;
		if (state.stopped)
			*reached =
			    state.done_down_to > keep_blocks ? state.done_down_to : keep_blocks;
	}
	return map_shrink_height(txn, inode, *reached, op);
}

static uint64_t blocks_for_size(uint64_t size)
{
	return (size + NGNFS_BLOCK_SIZE - 1) >> NGNFS_BLOCK_SHIFT;
}

/* Zero the bytes past size in the block holding the last byte. */
static int zero_tail(struct ngnfs_txn *txn, struct ngnfs_inode *inode, uint64_t size,
		     const char *op)
{
	uint32_t in_block = size & (NGNFS_BLOCK_SIZE - 1);
	uint64_t blkno;
	void *data;
	int ret;

	if (in_block == 0)
		return 0;
	ret = map_lookup(txn, inode, size >> NGNFS_BLOCK_SHIFT, op, &blkno);
	if (ret < 0 || blkno == 0)
		return ret;
	ret = ngnfs_txn_write(txn, blkno, &data);
	if (ret < 0)
		return ret;
	memset((uint8_t *)data + in_block, 0, NGNFS_BLOCK_SIZE - in_block);
	return 0;
}

int ngnfs_data_truncate(struct ngnfs_txn *txn, struct ngnfs_inode *inode, uint64_t new_size)
{
	const char *op = "truncate";
	uint64_t reached;
	int ret;

	ret = check_regular(inode, op);
	if (ret < 0)
		return ret;
	if (new_size > NGNFS_DATA_MAX_FILE_SIZE)
		return ngnfs_fail_quiet(
		    -EFBIG, "%s: size %llu of inode %llu is past the largest file", op,
		    (unsigned long long)new_size, (unsigned long long)inode_ino(inode));
	/* size 0 frees whatever the map holds, so inode deletion relies on nothing else */
	if (new_size < le64toh(inode->size) || new_size == 0) {
		ret = trim_tree(txn, inode, blocks_for_size(new_size), UINT64_MAX, op, &reached);
		if (ret < 0)
			return ret;
		ret = zero_tail(txn, inode, new_size, op);
		if (ret < 0)
			return ret;
	}
	inode->size = htole64(new_size);
	return 0;
}

int ngnfs_data_free_all(struct ngnfs_txn *txn, struct ngnfs_inode *inode)
{
	uint64_t reached;

	if (ngnfs_mode_type(le32toh(inode->mode)) != 0100000)
		return 0;
	return trim_tree(txn, inode, 0, UINT64_MAX, "free data", &reached);
}

/* ---- read ---- */

struct read_args {
	const struct ngnfs_handle *handle;
	uint64_t offset;
	uint8_t *buffer;
	size_t length;
	/* results, reset by every run */
	size_t done;
	bool end_of_file;
};

static int read_fn(struct ngnfs_txn *txn, void *arg)
{
	struct read_args *args = arg;
	const void *blocks[NGNFS_DATA_READ_TXN_BLOCKS];
	const struct ngnfs_inode *inode;
	uint64_t first_block, block_count;
	uint64_t size;
	size_t length;
	int ret;

	args->done = 0;
	args->end_of_file = false;
	ret = ngnfs_inode_read_handle(txn, args->handle, "read", &inode);
	if (ret < 0)
		return ret;
	ret = check_regular(inode, "read");
	if (ret < 0)
		return ret;
	size = le64toh(inode->size);
	if (args->offset >= size) {
		args->end_of_file = true;
		return 0;
	}
	length = args->length;
	if (length > size - args->offset)
		length = (size_t)(size - args->offset);
	if (length == 0)
		return 0;

	/*
	 * Take every block first and copy only once all are held: a block not
	 * yet cached makes the run start over, and copying before that would
	 * copy the chunk's first blocks again on every re-run.
	 */
	first_block = args->offset >> NGNFS_BLOCK_SHIFT;
	block_count = ((args->offset + length - 1) >> NGNFS_BLOCK_SHIFT) - first_block + 1;
	for (uint64_t i = 0; i < block_count; i++) {
		uint64_t blkno;

		blocks[i] = NULL;
		ret = map_lookup(txn, inode, first_block + i, "read", &blkno);
		if (ret < 0)
			return ret;
		if (blkno) {
			ret = ngnfs_txn_read(txn, blkno, &blocks[i]);
			if (ret < 0)
				return ret;
		}
	}
	for (size_t done = 0; done < length;) {
		uint64_t position = args->offset + done;
		uint32_t in_block = position & (NGNFS_BLOCK_SIZE - 1);
		size_t part = NGNFS_BLOCK_SIZE - in_block;
		const void *data = blocks[(position >> NGNFS_BLOCK_SHIFT) - first_block];

		if (part > length - done)
			part = length - done;
		if (data)
			memcpy(args->buffer + done, (const uint8_t *)data + in_block, part);
		else
			memset(args->buffer + done, 0, part);
		done += part;
	}
	args->done = length;
	args->end_of_file = args->offset + length >= size;
	return 0;
}

/* Bytes from offset up to the end of the chunk of blocks_per_txn blocks it starts in. */
static size_t chunk_length(uint64_t offset, size_t remaining, uint64_t blocks_per_txn)
{
	uint64_t chunk_bytes = blocks_per_txn << NGNFS_BLOCK_SHIFT;
	uint64_t room = chunk_bytes - (offset % chunk_bytes);

	return remaining < room ? remaining : (size_t)room;
}

ssize_t ngnfs_data_read(struct ngnfs_cache *cache, const struct ngnfs_handle *handle,
			uint64_t offset, void *buffer, size_t length, bool *end_of_file)
{
	size_t total = 0;
	bool eof = false;

	if (length > SSIZE_MAX)
		length = SSIZE_MAX;
	while (total < length && !eof) {
		struct read_args args = {
			.handle = handle,
			.offset = offset + total,
			.buffer = (uint8_t *)buffer + total,
			.length = chunk_length(offset + total, length - total,
					       NGNFS_DATA_READ_TXN_BLOCKS),
		};
		int ret = ngnfs_txn_run(cache, read_fn, &args);

		if (ret < 0) {
			if (total > 0)
				break;
			return ret;
		}
		total += args.done;
		eof = args.end_of_file;
		if (args.done < args.length)
			break;
	}
	if (length == 0) {
		struct read_args args = { .handle = handle, .offset = offset };
		int ret = ngnfs_txn_run(cache, read_fn, &args);

		if (ret < 0)
			return ret;
		eof = args.end_of_file;
	}
	if (end_of_file)
		*end_of_file = eof;
	return (ssize_t)total;
}

/* ---- write ---- */

struct write_args {
	const struct ngnfs_handle *handle;
	uint64_t offset;
	const uint8_t *buffer;
	size_t length;
	enum ngnfs_write_durability durability;
};

static int write_fn(struct ngnfs_txn *txn, void *arg)
{
	struct write_args *args = arg;
	void *blocks[NGNFS_DATA_TXN_BLOCKS];
	struct ngnfs_inode *inode;
	uint64_t end = args->offset + args->length;
	uint64_t first_block, block_count;
	int ret;

	ret = ngnfs_inode_write_handle(txn, args->handle, "write", &inode);
	if (ret < 0)
		return ret;
	ret = check_regular(inode, "write");
	if (ret < 0)
		return ret;
	if (end > NGNFS_DATA_MAX_FILE_SIZE || end < args->offset)
		return ngnfs_fail_quiet(-EFBIG,
					"write: offset %llu length %zu of inode %llu is past the "
					"largest file",
					(unsigned long long)args->offset, args->length,
					(unsigned long long)args->handle->ino);

	/* all blocks first, then the copies: see read_fn */
	first_block = args->offset >> NGNFS_BLOCK_SHIFT;
	block_count = ((end - 1) >> NGNFS_BLOCK_SHIFT) - first_block + 1;
	for (uint64_t i = 0; i < block_count; i++) {
		bool fresh;

		ret =
		    data_block_for_write(txn, inode, first_block + i, "write", &blocks[i], &fresh);
		if (ret < 0)
			return ret;
	}
	for (size_t done = 0; done < args->length;) {
		uint64_t position = args->offset + done;
		uint32_t in_block = position & (NGNFS_BLOCK_SIZE - 1);
		size_t part = NGNFS_BLOCK_SIZE - in_block;

		if (part > args->length - done)
			part = args->length - done;
		memcpy((uint8_t *)blocks[(position >> NGNFS_BLOCK_SHIFT) - first_block] + in_block,
		       args->buffer + done, part);
		done += part;
	}
	if (end > le64toh(inode->size))
		inode->size = htole64(end);
	ngnfs_inode_touch(inode, NGNFS_TOUCH_MTIME | NGNFS_TOUCH_CTIME);
	if (args->durability == NGNFS_WRITE_STABLE)
		ngnfs_txn_set_stable(txn);
	else if (args->durability == NGNFS_WRITE_UNSTABLE)
		ngnfs_txn_set_unstable(txn);
	return 0;
}

ssize_t ngnfs_data_write(struct ngnfs_cache *cache, const struct ngnfs_handle *handle,
			 uint64_t offset, const void *buffer, size_t length,
			 enum ngnfs_write_durability durability)
{
	size_t total = 0;

	if (length > SSIZE_MAX)
		length = SSIZE_MAX;
	if (offset > NGNFS_DATA_MAX_FILE_SIZE || length > NGNFS_DATA_MAX_FILE_SIZE - offset)
		return ngnfs_fail_quiet(-EFBIG,
					"write: offset %llu length %zu of inode %llu is past the "
					"largest file",
					(unsigned long long)offset, length,
					(unsigned long long)handle->ino);
	if (length == 0)
		return 0;
	do {
		struct write_args args = {
			.handle = handle,
			.offset = offset + total,
			.buffer = (const uint8_t *)buffer + total,
			.length =
			    chunk_length(offset + total, length - total, NGNFS_DATA_TXN_BLOCKS),
			.durability = durability,
		};
		int ret = ngnfs_txn_run(cache, write_fn, &args);

		if (ret < 0) {
			if (total > 0)
				break;
			return ret;
		}
		total += args.length;
	} while (total < length);
	return (ssize_t)total;
}

/* ---- size changes ---- */

struct shrink_args {
	const struct ngnfs_handle *handle;
	uint64_t new_size;
	/* result, reset by every run */
	bool done;
};

static int shrink_fn(struct ngnfs_txn *txn, void *arg)
{
	struct shrink_args *args = arg;
	struct ngnfs_inode *inode;
	uint64_t keep_blocks = blocks_for_size(args->new_size);
	uint64_t reached;
	int ret;

	args->done = false;
	ret = ngnfs_inode_write_handle(txn, args->handle, "truncate", &inode);
	if (ret < 0)
		return ret;
	ret = check_regular(inode, "truncate");
	if (ret < 0)
		return ret;
	if (le64toh(inode->size) <= args->new_size ||
	    blocks_for_size(le64toh(inode->size)) <= keep_blocks) {
		args->done = true;
		return 0;
	}
	ret = trim_tree(txn, inode, keep_blocks, NGNFS_DATA_TXN_BLOCKS, "truncate", &reached);
	if (ret < 0)
		return ret;
	if (reached <= keep_blocks) {
		/* the rest (zeroing the tail, the final size) is the caller's transaction */
		args->done = true;
		reached = keep_blocks;
	}
	/* reached >= keep_blocks, so the size stays at or above new_size */
	if ((reached << NGNFS_BLOCK_SHIFT) < le64toh(inode->size)) {
		inode->size = htole64(reached << NGNFS_BLOCK_SHIFT);
		ngnfs_inode_touch(inode, NGNFS_TOUCH_MTIME | NGNFS_TOUCH_CTIME);
	}
	return 0;
}

int ngnfs_data_shrink(struct ngnfs_cache *cache, const struct ngnfs_handle *handle,
		      uint64_t new_size)
{
	struct shrink_args args = { .handle = handle, .new_size = new_size };

	do {
		int ret = ngnfs_txn_run(cache, shrink_fn, &args);

		if (ret < 0)
			return ret;
	} while (!args.done);
	return 0;
}

struct set_size_args {
	const struct ngnfs_handle *handle;
	uint64_t new_size;
};

static int set_size_fn(struct ngnfs_txn *txn, void *arg)
{
	struct set_size_args *args = arg;
	struct ngnfs_inode *inode;
	int ret;

	ret = ngnfs_inode_write_handle(txn, args->handle, "truncate", &inode);
	if (ret < 0)
		return ret;
	ret = ngnfs_data_truncate(txn, inode, args->new_size);
	if (ret < 0)
		return ret;
	ngnfs_inode_touch(inode, NGNFS_TOUCH_MTIME | NGNFS_TOUCH_CTIME);
	return 0;
}

int ngnfs_data_set_size(struct ngnfs_cache *cache, const struct ngnfs_handle *handle,
			uint64_t new_size)
{
	struct set_size_args args = { .handle = handle, .new_size = new_size };
	int ret;

	if (new_size > NGNFS_DATA_MAX_FILE_SIZE)
		return ngnfs_fail_quiet(-EFBIG,
					"truncate: size %llu of inode %llu is past the "
					"largest file",
					(unsigned long long)new_size,
					(unsigned long long)handle->ino);
	ret = ngnfs_data_shrink(cache, handle, new_size);
	if (ret < 0)
		return ret;
	return ngnfs_txn_run(cache, set_size_fn, &args);
}

/* ---- native API ---- */

ssize_t ngnfs_read(struct ngnfs_fs *fs, const struct ngnfs_handle *handle, uint64_t offset,
		   void *buffer, size_t length, bool *end_of_file)
{
	ngnfs_clear_error();
	return ngnfs_data_read(fs->cache, handle, offset, buffer, length, end_of_file);
}

ssize_t ngnfs_write(struct ngnfs_fs *fs, const struct ngnfs_handle *handle, uint64_t offset,
		    const void *buffer, size_t length, enum ngnfs_write_durability durability)
{
	ngnfs_clear_error();
	if (durability != NGNFS_WRITE_MOUNT && durability != NGNFS_WRITE_STABLE &&
	    durability != NGNFS_WRITE_UNSTABLE)
		return ngnfs_fail(-EINVAL, "write: unknown durability %d", (int)durability);
	return ngnfs_data_write(fs->cache, handle, offset, buffer, length, durability);
}
