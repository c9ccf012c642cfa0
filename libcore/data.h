/* SPDX-License-Identifier: GPL-2.0-or-later */
#ifndef NGNFS_DATA_H
#define NGNFS_DATA_H

/*
 * File data: the data map of a regular file (format-block.h, "File
 * data") and the operations on it.
 *
 * The functions taking a cache run their own transactions and split
 * large requests into transactions of at most NGNFS_DATA_TXN_BLOCKS file
 * blocks, so that one request never builds an unbounded dirty set; the
 * native API calls (ngnfs_read, ngnfs_write) are thin wrappers over them.
 * They take the cache rather than the filesystem so that the tests can run
 * them over a test double of txn.h.  The functions taking a transaction
 * are for other operations' transaction functions (setattr, inode free)
 * and follow the rules of txn.h.
 */

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "cache.h"
#include "format-block.h"
#include "ngnfs.h"
#include "txn.h"

/* Most file blocks one write (or trim) transaction touches. */
#define NGNFS_DATA_TXN_BLOCKS 128
/* Most file blocks one read transaction copies (a 1 MiB NFS READ is one). */
#define NGNFS_DATA_READ_TXN_BLOCKS 256

/* Returns the bytes read (0 at or past the end); *end_of_file if it reached the end. */
ssize_t ngnfs_data_read(struct ngnfs_cache *cache, const struct ngnfs_handle *handle,
			uint64_t offset, void *buffer, size_t length, bool *end_of_file);
/*
 * Returns the bytes written: all of them, or fewer if a later transaction
 * of a large write failed (the error is then returned by the next call);
 * a negative errno if nothing was written.  durability: when every
 * transaction is durable (ngnfs.h, enum ngnfs_write_durability).
 */
ssize_t ngnfs_data_write(struct ngnfs_cache *cache, const struct ngnfs_handle *handle,
			 uint64_t offset, const void *buffer, size_t length,
			 enum ngnfs_write_durability durability);
/*
 * Free the data blocks past new_size in transactions of bounded size,
 * from the end of the file down, lowering the size with each (every
 * intermediate state is the file cut at a block boundary).  Does nothing
 * if the file is not larger.  setattr calls this before its own
 * transaction so that ngnfs_data_truncate() there has little left to free.
 */
int ngnfs_data_shrink(struct ngnfs_cache *cache, const struct ngnfs_handle *handle,
		      uint64_t new_size);
/* ngnfs_data_shrink, then set the size in one transaction touching mtime and ctime. */
int ngnfs_data_set_size(struct ngnfs_cache *cache, const struct ngnfs_handle *handle,
			uint64_t new_size);

/*
 * Inside a transaction (inode is the transaction's writable copy):
 * ngnfs_data_truncate (declared in fs-internal.h) sets a regular file's
 * size; ngnfs_data_free_all frees every data and map block whatever the
 * size (inode deletion) and leaves size untouched.
 */
int ngnfs_data_truncate(struct ngnfs_txn *txn, struct ngnfs_inode *inode, uint64_t new_size);
int ngnfs_data_free_all(struct ngnfs_txn *txn, struct ngnfs_inode *inode);

/* The device the data block of file_block is allocated on (exposed for tests). */
uint16_t ngnfs_data_device_for(uint64_t ino, uint64_t file_block, uint16_t device_count);

#endif
