/* SPDX-License-Identifier: GPL-2.0 */
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
 * generation is the inode block's version when the inode was created;
 * blockd keeps counting versions across free and reuse, so (ino,
 * generation) never names two different files.
 *
 * For directories data_root is the root of the directory's name-hash
 * btree and parent_ino is "..": rename's subtree check walks it.  For
 * regular files data_root is the root of the data map and data_height
 * its height.  xattr_root is the first block of xattrs that did not fit
 * in the inline area.
 */
#define NGNFS_INODE_ORPHAN (1U << 0) /* nlink reached 0 while open */

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

#endif
