/* SPDX-License-Identifier: GPL-2.0-or-later */
#ifndef NGNFS_XATTR_H
#define NGNFS_XATTR_H

/*
 * Extended attributes: small ones inline in the inode block, the rest in
 * a chain of index blocks (format-block.h, "Extended attributes").
 *
 * Semantics are those of setxattr(2) and friends on Linux: names carry
 * their namespace ("user.", "trusted.", "security."; any other is
 * -EOPNOTSUPP), a name longer than 255 bytes (or empty) is -ERANGE, a
 * value longer than 64 KiB -E2BIG, XATTR_CREATE on an existing name
 * -EEXIST, XATTR_REPLACE or remove of a missing one -ENODATA, a get or
 * list into a buffer that is too small -ERANGE and size 0 asks for the
 * size.  Permission checks (trusted.* needs CAP_SYS_ADMIN, user.* only on
 * regular files and directories) are the front end's: it knows the
 * caller's credentials.
 *
 * Each call is one transaction (a 64 KiB value is at most 19 blocks:
 * inode, index block, 17 value blocks).  They take the cache rather than
 * the filesystem so that tests can run them over a test double of txn.h;
 * the native API functions of ngnfs.h are wrappers over them.
 */

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "cache.h"
#include "format-block.h"
#include "ngnfs.h"
#include "txn.h"

int ngnfs_xattr_set(struct ngnfs_cache *cache, const struct ngnfs_handle *handle, const char *name,
		    const void *value, size_t size, int flags);
ssize_t ngnfs_xattr_get(struct ngnfs_cache *cache, const struct ngnfs_handle *handle,
			const char *name, void *value, size_t size);
ssize_t ngnfs_xattr_list(struct ngnfs_cache *cache, const struct ngnfs_handle *handle, char *list,
			 size_t size);
int ngnfs_xattr_remove(struct ngnfs_cache *cache, const struct ngnfs_handle *handle,
		       const char *name);

/*
 * Inside a transaction, for inode deletion (inode writable): frees every
 * index and value block and empties the inline area.
 */
int ngnfs_xattr_free_all(struct ngnfs_txn *txn, struct ngnfs_inode *inode);

/* Number of index blocks in the chain (tests use it to see where xattrs went). */
int ngnfs_xattr_index_blocks(struct ngnfs_cache *cache, const struct ngnfs_handle *handle,
			     uint64_t *count);

#endif
