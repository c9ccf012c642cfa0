/* SPDX-License-Identifier: GPL-2.0-or-later */
#ifndef NGNFS_FS_INTERNAL_H
#define NGNFS_FS_INTERNAL_H

/*
 * Declarations shared by the files that build the POSIX filesystem on
 * blocks: super.c (mkfs, mount, statfs), inode.c (inode blocks), btree.c,
 * dir.c, namei.c, fs.c (the native API glue), data.c (file data,
 * truncate) and xattr.c (extended attributes).
 *
 * Every helper here is meant to be called from inside a transaction
 * function (see txn.h): helpers get blocks only through ngnfs_txn_*, return
 * every negative errno they get (-EAGAIN is how a transaction is re-run)
 * and keep no state of their own.  Block checks live here so that every
 * file checks blocks the same way: magic, block number, owner inode and
 * format version, and a mismatch is one log line naming the block, its
 * device, the inode and the operation, then -EIO.
 *
 * Which file implements which part of ngnfs.h (so that nobody defines a
 * function twice):
 *  - super.c: ngnfs_mkfs, ngnfs_mount, ngnfs_unmount, ngnfs_statfs,
 *    ngnfs_root, ngnfs_fs_id
 *  - fs.c: ngnfs_last_error, ngnfs_set_invalidate, handle wire helpers,
 *    ngnfs_open, ngnfs_close, ngnfs_sync
 *  - inode.c: ngnfs_getattr, ngnfs_setattr
 *  - namei.c: ngnfs_lookup, ngnfs_create, ngnfs_symlink, ngnfs_readlink,
 *    ngnfs_link, ngnfs_unlink, ngnfs_rename;  dir.c: ngnfs_readdir
 *  - data.c: ngnfs_read, ngnfs_write, ngnfs_data_truncate
 *  - xattr.c: ngnfs_setxattr, ngnfs_getxattr, ngnfs_listxattr,
 *    ngnfs_removexattr, ngnfs_xattr_free_all
 *
 * XXX:
 *  - The open-file table (orphans) is per client: a file open on one
 *    gateway and unlinked through another is freed at once.
 */

#include <endian.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "cache.h"
#include "client.h"
#include "format-block.h"
#include "ngnfs.h"
#include "txn.h"

/* Open files on this client: ino -> open count (orphan handling). */
struct ngnfs_open_file {
	uint64_t ino;
	uint64_t generation;
	uint32_t open_count;
	struct ngnfs_open_file *next;
};

#define NGNFS_OPEN_BUCKETS 256

#define NGNFS_LOST_INODES 256

struct ngnfs_fs {
	struct ngnfs_client *client;
	struct ngnfs_cache *cache;
	uint8_t fs_id[NGNFS_FS_ID_SIZE];
	uint64_t root_ino;
	uint64_t root_generation;
	uint64_t orphan_dir_ino;
	uint16_t device_count;
	/* per device, the capacity its last STATFS gave (atomic; 0: never answered) */
	uint64_t *device_total_blocks;

	/*
	 * Protects open_files and the lost-inode record; never held while
	 * calling the cache (the cache's lost callback takes it under the
	 * cache lock), so a txn may take it briefly (ngnfs_fs_forget_lost).
	 */
	pthread_mutex_t open_lock;
	struct ngnfs_open_file *open_files[NGNFS_OPEN_BUCKETS];
	/*
	 * Inodes whose dirty set failed to write back since their last
	 * ngnfs_sync_inode, with the error; lost_overflow holds an error
	 * when more were lost than fit (the next inode sync reports it).
	 */
	uint64_t lost_inos[NGNFS_LOST_INODES];
	int lost_errors[NGNFS_LOST_INODES];
	uint32_t lost_count;
	int lost_overflow;
	/* blocks whose changes failed to write back, ever (atomic; ngnfs_write_losses) */
	uint64_t write_losses;

	ngnfs_invalidate_fn invalidate;
	void *invalidate_arg;
};

/* A new inode got block ino: drop the loss record of the file it held before. */
void ngnfs_fs_forget_lost(struct ngnfs_fs *fs, uint64_t ino);

/* On-disk fields are little-endian: every access goes through le*toh/htole*. */

/*
 * Errors: log one line to stderr ("ngnfs: ...") and remember it as the
 * thread's ngnfs_last_error().  Both return err so that callers can write
 * `return ngnfs_fail(-EIO, "...")`.  -EAGAIN is never reported.
 */
int ngnfs_fail(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Remember the message without logging it (expected errors: ENOENT, EEXIST...). */
int ngnfs_fail_quiet(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void ngnfs_clear_error(void);

/* Header of a block we are about to write as a block of this type. */
void ngnfs_block_header_init(void *block, uint32_t magic, uint64_t blkno, uint64_t owner_ino);
/*
 * Check a block read from the cache: magic, blkno, owner (owner_ino 0
 * accepts any owner) and format version.  -EIO after a log line naming
 * blkno, device, owner and op.
 */
int ngnfs_block_check(const void *block, uint32_t magic, uint64_t blkno, uint64_t owner_ino,
		      const char *op);

/*
 * Inodes.  ngnfs_inode_read/_write check the block as an inode of that
 * number (else -EIO: a directory entry or a pointer led to something that
 * is not that inode).  The _handle variants are for objects named by a
 * client's handle: a block that is no longer that inode (freed, reused,
 * other generation) is -ESTALE, not corruption.
 */
int ngnfs_inode_read(struct ngnfs_txn *txn, uint64_t ino, const char *op,
		     const struct ngnfs_inode **inode);
int ngnfs_inode_write(struct ngnfs_txn *txn, uint64_t ino, const char *op,
		      struct ngnfs_inode **inode);
int ngnfs_inode_read_handle(struct ngnfs_txn *txn, const struct ngnfs_handle *handle,
			    const char *op, const struct ngnfs_inode **inode);
int ngnfs_inode_write_handle(struct ngnfs_txn *txn, const struct ngnfs_handle *handle,
			     const char *op, struct ngnfs_inode **inode);

/*
 * ngnfs_txn_alloc, refusing block numbers it must never hand out (index
 * below NGNFS_FIRST_ALLOC_INDEX, another device) with -EIO and a log
 * line, so that a server bug cannot make an inode overwrite fixed metadata.
 */
int ngnfs_alloc_block(struct ngnfs_txn *txn, uint16_t device, const char *op, uint64_t *blkno,
		      uint64_t *version, void **data);

/*
 * Allocate and initialise an inode on device (nlink 0: the caller links
 * it), times now, generation from the block version.
 */
int ngnfs_inode_alloc(struct ngnfs_txn *txn, uint16_t device, uint32_t mode, uint32_t uid,
		      uint32_t gid, uint64_t rdev, uint64_t parent_ino, struct ngnfs_inode **inode);
/*
 * Device for a new inode of type (S_IF*) named name in parent: a directory
 * goes on a device chosen by hash (the namespace spreads), anything else
 * on its parent's device (its create is a one-device write).
 */
uint16_t ngnfs_inode_device_for(struct ngnfs_txn *txn, uint64_t parent_ino, uint32_t type,
				const char *name, size_t name_length);
/*
 * Free everything an inode owns (data, xattrs, symlink block, dir btree)
 * and the inode block itself, in the caller's transaction; the inode is
 * zeroed in memory, and blockd answers GETs of free blocks with zeros.
 */
int ngnfs_inode_free(struct ngnfs_txn *txn, struct ngnfs_inode *inode);

void ngnfs_inode_to_attr(const struct ngnfs_inode *inode, struct ngnfs_attr *attr);

/* Time: CLOCK_REALTIME with nanoseconds. */
void ngnfs_now(struct timespec *now);
#define NGNFS_TOUCH_ATIME (1U << 0)
#define NGNFS_TOUCH_MTIME (1U << 1)
#define NGNFS_TOUCH_CTIME (1U << 2)
/* Set the named times to now and bump the change attribute. */
void ngnfs_inode_touch(struct ngnfs_inode *inode, unsigned int what);
static inline void ngnfs_timespec_to_le(const struct timespec *ts, __le64 *sec, __le32 *nsec)
{
	*sec = htole64((uint64_t)ts->tv_sec);
	*nsec = htole32((uint32_t)ts->tv_nsec);
}

/*
 * The inline area of an inode block is shared: extended attributes grow
 * up from NGNFS_INODE_INLINE_OFFSET, an inline symlink target sits at the
 * very end of the block (symlink_length bytes).  xattr code may use only
 * ngnfs_inode_inline_capacity() bytes.
 */
static inline uint32_t ngnfs_inode_inline_capacity(const struct ngnfs_inode *inode)
{
	return NGNFS_INODE_INLINE_BYTES - le16toh(inode->symlink_length);
}

static inline uint32_t ngnfs_mode_type(uint32_t mode)
{
	return mode & 0170000;
}

/*
 * Implemented by data.c: set a regular file's size (inode must be the
 * transaction's writable copy), freeing data and map blocks past it and
 * updating size, data_blocks and data_root/data_height; times and change
 * are the caller's (setattr touches mtime/ctime).  new_size 0 frees every
 * data block: inode deletion calls it so.
 */
int ngnfs_data_truncate(struct ngnfs_txn *txn, struct ngnfs_inode *inode, uint64_t new_size);
/* Implemented by xattr.c: free every xattr block of an inode being deleted. */
int ngnfs_xattr_free_all(struct ngnfs_txn *txn, struct ngnfs_inode *inode);

/*
 * Sessions of clients other than this one on devices [0, device_count)
 * (this client is one session on each), summed in *others; fn (may be
 * NULL) hears each device that has any.  Used before work that is only
 * safe with no other client connected (super.c).
 */
typedef void (*ngnfs_other_clients_fn)(void *arg, uint16_t device, uint64_t sessions);
int ngnfs_count_other_clients(struct ngnfs_client *client, uint16_t device_count,
			      ngnfs_other_clients_fn fn, void *arg, uint64_t *others);

/* Open-file table (fs.c). */
bool ngnfs_fs_is_open(struct ngnfs_fs *fs, uint64_t ino);
/* mount: route the cache's invalidations to ngnfs_set_invalidate's callback (fs.c). */
void ngnfs_fs_install_invalidate(struct ngnfs_fs *fs);
/* Last close: free the inode if it is an orphan (namei.c, own transaction). */
int ngnfs_namei_reclaim_orphan(struct ngnfs_fs *fs, const struct ngnfs_handle *handle);
/*
 * The same for an orphan directory entry of any generation (the admin
 * tool's reclaim); *freed says whether ino was an orphan and is now free,
 * *open_here that it is one this mount has open (left alone).
 */
int ngnfs_namei_reclaim_orphan_ino(struct ngnfs_fs *fs, uint64_t ino, bool *freed, bool *open_here);

/* Directory operations inside transactions (dir.c). */
struct ngnfs_dirent_info {
	uint64_t key; /* the entry's btree key and readdir cookie */
	uint64_t ino;
	uint64_t generation;
	uint32_t mode; /* type bits of the target */
};
int ngnfs_dir_lookup(struct ngnfs_txn *txn, const struct ngnfs_inode *dir, const char *name,
		     size_t name_length, struct ngnfs_dirent_info *info);
/*
 * dir must be writable; updates entry_count and the btree root in it.
 * -EEXIST if the name is there (checked in the same descent as the insert).
 */
int ngnfs_dir_add(struct ngnfs_txn *txn, struct ngnfs_inode *dir, const char *name,
		  size_t name_length, uint64_t ino, uint64_t generation, uint32_t mode);
int ngnfs_dir_remove(struct ngnfs_txn *txn, struct ngnfs_inode *dir, uint64_t key);
/* Point an existing entry at another inode (rename over an existing name). */
int ngnfs_dir_replace(struct ngnfs_txn *txn, struct ngnfs_inode *dir, uint64_t key, uint64_t ino,
		      uint64_t generation, uint32_t mode);
/* Free every btree block of an (empty or orphaned) directory. */
int ngnfs_dir_free_blocks(struct ngnfs_txn *txn, struct ngnfs_inode *dir);

/* Test hook: when set, replaces XXH3_64bits for directory name hashes. */
extern uint64_t (*ngnfs_dir_hash_hook)(const char *name, size_t name_length);

/* Name checks shared by every namespace operation: -ENAMETOOLONG, -EINVAL. */
int ngnfs_check_name(const char *name, size_t *name_length, const char *op);

#endif
