/* SPDX-License-Identifier: GPL-2.0-or-later */
#ifndef NGNFS_FORMAT_BLOCK_H
#define NGNFS_FORMAT_BLOCK_H

/*
 * The filesystem's persistent format: the contents of the 4 KiB blocks
 * that libcore stores on blockd servers.
 *
 * Every block starts with struct ngnfs_block_header: a magic number per
 * block type, the block's own number (a block found at the wrong place is
 * corrupt, whatever its checksum said on the way), the inode it belongs to
 * (so a revocation can tell the gateway which object to invalidate, and
 * fsck which object to blame) and the format version.  blockd checksums
 * what it stores and the wire checksums what travels, so blocks carry no
 * checksum of their own; the header checks catch the rest (misdirected
 * writes, stale pointers, foreign data) and every reader checks them
 * before trusting a field.
 *
 * All fields are little-endian and fixed width; every structure is padded
 * explicitly and its size asserted where it is used.
 *
 * Format version history:
 *  1: initial format.
 */

#include <stdint.h>

#include "format-msg.h"

#define NGNFS_FORMAT_VERSION 1

/* Block type magics ("NG" + type letters, as little-endian u32). */
#define NGNFS_MAGIC_SUPER    0x5355474eU /* "NGSU" */
#define NGNFS_MAGIC_INODE    0x4e49474eU /* "NGIN" */
#define NGNFS_MAGIC_BTREE    0x5442474eU /* "NGBT" */
#define NGNFS_MAGIC_DATA_MAP 0x4d44474eU /* "NGDM" */
#define NGNFS_MAGIC_XATTR    0x4158474eU /* "NGXA" */
#define NGNFS_MAGIC_SYMLINK  0x4c53474eU /* "NGSL" */

struct ngnfs_block_header {
	__le32 magic;
	__le32 format_version;
	__le64 blkno;
	__le64 owner_ino; /* 0 for the superblock */
	__le64 reserved;
};

/*
 * The superblock lives at device 0, index 1 (see NGNFS_FIRST_ALLOC_INDEX).
 * The device table fixes which device index is which; block numbers carry
 * the device index, so adding a device appends to the table and rewrites
 * nothing.  Each device also knows its own index and the fs id from
 * FORMAT, so a mount that lists devices in the wrong order is refused.
 */
#define NGNFS_SUPER_INDEX 1

struct ngnfs_super {
	struct ngnfs_block_header header;
	uint8_t fs_id[NGNFS_FS_ID_SIZE];
	__le64 root_ino;
	__le64 orphan_dir_ino; /* unlinked-but-open inodes, reclaimed later */
	__le64 created_sec;
	__le32 device_count;
	__le32 block_size;
	__le64 flags;
	uint8_t reserved[64];
};

/*
 * An inode is a whole block: its inode number is its block number, so
 * finding an inode is one GET, and the rest of the block holds what an
 * archive agent touches with it (small extended attributes, a short
 * symlink target) so that an xattr update dirties one block.
 *
 * generation is the epoch of the device session that allocated the
 * inode block (ALLOC_REPLY, format-msg.h) in the high 32 bits and, in
 * the low 32, the low 32 bits of the block's version once the create is
 * written.  blockd keeps counting versions across free and reuse, so two
 * files of one session never share a generation; a create that was lost
 * with its session (its reservation went back, the block's version did
 * not move) shares the next file's version but not its epoch, so (ino,
 * generation) never names two different files and a handle of the lost
 * file answers ESTALE.  Generations written before protocol version 4
 * have epoch 0, which no session has.
 *
 * For directories data_root is the root of the directory's name-hash
 * btree and parent_ino is "..": rename's subtree check walks it.  For
 * regular files data_root is the root of the data map and data_height
 * its height.  xattr_root is the first block of xattrs that did not fit
 * in the inline area.
 */
#define NGNFS_INODE_ORPHAN (1U << 0) /* nlink reached 0 while open */

static inline uint64_t ngnfs_inode_generation(uint32_t session_epoch, uint64_t version)
{
	return ((uint64_t)session_epoch << 32) | (uint32_t)version;
}

struct ngnfs_inode {
	struct ngnfs_block_header header;
	__le64 ino;
	__le64 generation;
	__le32 mode;
	__le32 nlink;
	__le32 uid;
	__le32 gid;
	__le64 size;
	__le64 data_blocks; /* data and map blocks allocated */
	__le64 rdev;
	__le64 change;
	__le64 atime_sec;
	__le64 mtime_sec;
	__le64 ctime_sec;
	__le64 crtime_sec;
	__le32 atime_nsec;
	__le32 mtime_nsec;
	__le32 ctime_nsec;
	__le32 crtime_nsec;
	__le64 parent_ino;
	__le64 data_root;
	__le64 xattr_root;
	__le64 entry_count; /* directories: names in it */
	__le32 data_height;
	__le32 flags;
	__le16 inline_xattr_bytes; /* used bytes of the inline area */
	__le16 inline_xattr_count;
	__le16 symlink_length; /* inline target length (targets that fit) */
	__le16 reserved16;
	uint8_t reserved[48];
	/* the rest of the block: inline xattrs, then an inline symlink target */
};

#define NGNFS_INODE_INLINE_OFFSET 256
#define NGNFS_INODE_INLINE_BYTES  (NGNFS_BLOCK_SIZE - NGNFS_INODE_INLINE_OFFSET)

/*
 * The structures of the directory btree, the data map and xattr blocks
 * are defined below by the code that owns them (btree.c, data.c,
 * xattr.c); each section says why it is laid out that way.
 */

/*
 * ==== File data (owned by data.c) ====
 *
 * A regular file's data is a radix tree ("data map") rooted at
 * inode->data_root with inode->data_height map levels.  Height 0 means
 * data_root names the data block of file block 0 directly (a file of up
 * to 4 KiB costs one block, not two); height h >= 1 means data_root is a
 * level-h map block, whose pointers name level h-1 maps, down to level 1
 * whose pointers name data blocks.  A pointer of 0 is a hole: it reads as
 * zeros and costs nothing, so sparse files of any logical size are cheap.
 * Growing the tree puts the old root in slot 0 of a new root, and
 * shrinking (truncate) takes slot 0 back out, so the same rule covers
 * height 0 and every height above it.  An empty file may have any height
 * with data_root 0.
 *
 * A radix tree rather than extents because file data here is written in
 * bulk by staging agents at arbitrary offsets (restores of partial
 * files), every lookup is a fixed number of block reads, and updating one
 * pointer never moves others, so concurrent writers to different parts of
 * a file conflict only on the map blocks they share.
 *
 * Each map block records the level and the first file block it covers:
 * with the block header's blkno and owner that lets a reader reject a map
 * block found at the wrong place in the tree, not only in the wrong file.
 * pointer_count (non-zero pointers) lets truncate free a map block that
 * it emptied without scanning it again.
 *
 * Data blocks are raw 4 KiB of file contents with NO block header: file
 * data must be stored exactly as written (a header would make every
 * 4 KiB-aligned write straddle two blocks), and its integrity is already
 * covered by the map pointer that names it (checked map blocks, owner and
 * position) and by blockd's checksum of what it stores and the wire
 * checksum of what travels.
 *
 * Map blocks are placed on the inode's device (a small file's metadata
 * stays on one server); data block N of inode ino is placed on device
 * (index(ino) + N) % device_count so that bulk transfers use every
 * device.  The placement is only a choice at allocation time: readers
 * follow block numbers, so adding a device changes nothing written.
 */
#define NGNFS_DATA_MAP_HEADER_BYTES 48
#define NGNFS_DATA_MAP_POINTERS	    ((NGNFS_BLOCK_SIZE - NGNFS_DATA_MAP_HEADER_BYTES) / 8)
/* 506^6 file blocks exceed 2^48, the largest file block index allowed. */
#define NGNFS_DATA_MAX_HEIGHT 6
/* Largest logical file size: 2^60 bytes (1 EiB), file blocks below 2^48. */
#define NGNFS_DATA_MAX_FILE_SIZE (1ULL << 60)

struct ngnfs_data_map {
	struct ngnfs_block_header header; /* magic NGNFS_MAGIC_DATA_MAP */
	__le64 first_block;		  /* file block index of this map's first pointer's range */
	__le32 level;			  /* 1: pointers name data blocks; n: level n-1 maps */
	__le32 pointer_count;		  /* non-zero pointers */
	__le64 pointers[NGNFS_DATA_MAP_POINTERS];
};

/*
 * ==== Extended attributes (owned by xattr.c) ====
 *
 * Small xattrs live in the inode block's inline area (from
 * NGNFS_INODE_INLINE_OFFSET), so an archive agent recording where a
 * file's data went dirties exactly one block.  Inline entries are packed
 * one after the other, each a struct ngnfs_xattr_inline_entry, the full
 * name (with its "user." etc. prefix, no NUL) and the value, padded to 4
 * bytes; inode->inline_xattr_bytes is the bytes used and
 * inode->inline_xattr_count the entries.  A symlink's inline target sits
 * at the very end of the block (symlink_length bytes), so xattrs grow up
 * towards it and the two share the area without a fixed split.
 *
 * Xattrs that do not fit inline (an encoded inline entry above
 * NGNFS_XATTR_INLINE_ENTRY_MAX bytes, or no room left) go to xattr index
 * blocks, a chain from inode->xattr_root through each block's next
 * pointer.  An index block holds items (struct ngnfs_xattr_item, 8-byte
 * aligned): name hash, value length, the name, and then either the value
 * itself (values up to NGNFS_XATTR_ITEM_VALUE_MAX bytes) or the numbers of
 * the value blocks holding it (NGNFS_XATTR_ITEM_VALUE_BLOCKS set).  The
 * name hash (XXH64 of the full name, seed 0, fixed by this format) lets a
 * lookup skip items without comparing names.  New index blocks are added
 * at the head of the chain so that adding one dirties only the new block
 * and the inode.
 *
 * Value blocks carry a header (owner, blkno) plus the item's name hash
 * and their position in the value, so a value block found under the
 * wrong item or at the wrong position is caught.
 */
#define NGNFS_MAGIC_XATTR_VALUE 0x5658474eU /* "NGXV" */

#define NGNFS_XATTR_INLINE_ENTRY_MAX  1024 /* larger entries go to index blocks */
#define NGNFS_XATTR_ITEM_VALUE_MAX    1024 /* larger values go to value blocks */
#define NGNFS_XATTR_ITEM_VALUE_BLOCKS (1U << 0)

struct ngnfs_xattr_inline_entry {
	uint8_t name_length;
	uint8_t reserved;
	__le16 value_length;
	/* name_length name bytes, value_length value bytes, pad to 4 */
};

#define NGNFS_XATTR_INDEX_HEADER_BYTES 48
#define NGNFS_XATTR_INDEX_ITEM_BYTES   (NGNFS_BLOCK_SIZE - NGNFS_XATTR_INDEX_HEADER_BYTES)

struct ngnfs_xattr_index {
	struct ngnfs_block_header header; /* magic NGNFS_MAGIC_XATTR */
	__le64 next;			  /* next index block of the chain, 0 ends it */
	__le16 item_count;
	__le16 used_bytes; /* bytes of items[] in use, items packed from the start */
	__le32 reserved;
	uint8_t items[NGNFS_XATTR_INDEX_ITEM_BYTES];
};

struct ngnfs_xattr_item {
	__le64 name_hash;
	__le32 value_length;
	uint8_t name_length;
	uint8_t flags; /* NGNFS_XATTR_ITEM_VALUE_BLOCKS */
	__le16 reserved;
	/* name bytes, then the value or __le64 value block numbers (8-aligned), pad to 8 */
};

#define NGNFS_XATTR_VALUE_HEADER_BYTES 48
#define NGNFS_XATTR_VALUE_BYTES	       (NGNFS_BLOCK_SIZE - NGNFS_XATTR_VALUE_HEADER_BYTES)

struct ngnfs_xattr_value {
	struct ngnfs_block_header header; /* magic NGNFS_MAGIC_XATTR_VALUE */
	__le64 name_hash;		  /* of the item that owns it */
	__le32 position;		  /* index of this block within the value */
	__le32 reserved;
	uint8_t bytes[NGNFS_XATTR_VALUE_BYTES];
};

/* ==== end of the file data and extended attribute sections ==== */

/*
 * ==== Directory btree, entries and symlink blocks (btree.c, dir.c, namei.c) ====
 *
 * A btree node is one block: items sorted by key grow from the front, their
 * values are packed from the end of the block down (each starting at a
 * multiple of 8 bytes, so that a value's fields can be read in place), so a node holds many
 * small values or a few large ones without a fixed slot size.  Leaves
 * (level 0) hold the values; internal nodes hold one item per child whose
 * value is the child's __le64 block number and whose key is the lowest key
 * that may be found under it; item 0's key is the lower bound of the whole
 * node's range (0 along the leftmost path), and searching treats it as
 * covering everything below item 1.  Every node of one tree carries the owning
 * inode in its header, so a revoked or corrupt node names its directory.
 * Values are at most NGNFS_BTREE_VALUE_MAX bytes so that a full node plus
 * one item always splits into two nodes that fit.
 */
#define NGNFS_BTREE_VALUE_MAX 1024
#define NGNFS_BTREE_MAX_LEVEL 16

struct ngnfs_btree_item {
	__le64 key;
	__le16 value_offset; /* from the start of the block */
	__le16 value_length;
	__le32 reserved;
};

struct ngnfs_btree_node {
	struct ngnfs_block_header header;
	__le16 item_count;
	__le16 values_start; /* lowest byte used by values; NGNFS_BLOCK_SIZE when none */
	uint8_t level;	     /* 0: leaf */
	uint8_t reserved[11];
	struct ngnfs_btree_item items[];
};

/*
 * A directory entry is the value of a directory btree item.  The key is
 * the name's XXH3_64bits hash with its low NGNFS_DIRENT_COLLISION_BITS
 * replaced by a collision index (the lowest index not used by another name
 * with the same hash bits), so that names whose hashes collide still get
 * distinct keys.  The key is also the readdir cookie: it never changes
 * while the entry exists, whatever else is added or removed.  Keys below
 * NGNFS_DIRENT_MIN_KEY are never used (0 is "start of directory"; NFS
 * reserves 1 and 2 for "." and "..").  The target's generation and type
 * are stored so that readdir can return handles without reading inodes.
 */
#define NGNFS_DIRENT_COLLISION_BITS 8
#define NGNFS_DIRENT_COLLISION_MASK ((1ULL << NGNFS_DIRENT_COLLISION_BITS) - 1)
#define NGNFS_DIRENT_MIN_KEY	    (1ULL << NGNFS_DIRENT_COLLISION_BITS)

struct ngnfs_dirent {
	__le64 ino;
	__le64 generation;
	__le32 mode; /* type bits of the target (S_IFMT part of st_mode) */
	__le16 name_length;
	__le16 reserved;
	/* name_length bytes of name follow, no NUL */
};

/*
 * The orphan directory (super.orphan_dir_ino) is a btree keyed by inode
 * number with empty values: inodes whose last name went away while they
 * were open, freed at last close (or by fsck after a crash).
 */

/*
 * A symlink target that does not fit inline (longer than
 * NGNFS_SYMLINK_INLINE_MAX) lives in one symlink block named by the
 * inode's data_root; inode.size is its length.  The block holds
 * NGNFS_SYMLINK_BLOCK_MAX bytes; the rest of a longer target (up to 31
 * bytes, for the 4095 that POSIX allows) is inline at the end of the
 * inode block, symlink_length bytes, as a short target would be.
 */
#define NGNFS_SYMLINK_INLINE_MAX 1024

struct ngnfs_symlink_block {
	struct ngnfs_block_header header;
	uint8_t target[NGNFS_BLOCK_SIZE - sizeof(struct ngnfs_block_header)];
};

#define NGNFS_SYMLINK_BLOCK_MAX (NGNFS_BLOCK_SIZE - sizeof(struct ngnfs_block_header))

/* ==== end of the directory btree section ==== */

#endif
