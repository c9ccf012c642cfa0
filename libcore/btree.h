/* SPDX-License-Identifier: GPL-2.0-or-later */
#ifndef NGNFS_BTREE_H
#define NGNFS_BTREE_H

/*
 * A btree of blocks keyed by u64 with variable-length values (at most
 * NGNFS_BTREE_VALUE_MAX bytes), used for directories and the orphan
 * directory.  The node format is in format-block.h.
 *
 * All functions run inside a transaction and get every node through it,
 * so they are re-runnable.  The caller owns the root pointer: a function
 * that changes tree->root (first insert, root split, root collapse, last
 * delete) leaves the new value in tree->root and the caller stores it in
 * its inode (which it must hold for write).
 */

#include <stddef.h>
#include <stdint.h>

#include "txn.h"

struct ngnfs_btree {
	uint64_t root;	    /* 0: empty tree */
	uint64_t owner_ino; /* written into and checked in every node header */
	uint16_t device;    /* where new nodes are allocated */
	const char *op;	    /* for error messages */
};

/*
 * Iteration callback: return 0 to go on, > 0 to stop (returned by
 * ngnfs_btree_iterate), < 0 to fail.
 */
typedef int (*ngnfs_btree_iterate_fn)(void *arg, uint64_t key, const void *value,
				      size_t value_length);

/* *value_length is in: buffer size, out: value length (-EOVERFLOW if it does not fit). */
int ngnfs_btree_lookup(struct ngnfs_txn *txn, struct ngnfs_btree *tree, uint64_t key, void *value,
		       size_t *value_length);
/* Items with key >= from in key order; returns 0 at the end or fn's positive stop value. */
int ngnfs_btree_iterate(struct ngnfs_txn *txn, struct ngnfs_btree *tree, uint64_t from,
			ngnfs_btree_iterate_fn fn, void *arg);
/* -EEXIST if the key is present. */
int ngnfs_btree_insert(struct ngnfs_txn *txn, struct ngnfs_btree *tree, uint64_t key,
		       const void *value, size_t value_length);
/*
 * Insert under a key of [first, last] that pick chooses (into *key) after
 * scan has seen, in key order, every item already in that range; a
 * negative return of either fails the insert (scan: -EEXIST for a name
 * that is there), a positive one from scan ends the scan.  The leaf that
 * covers the range is searched and changed in one descent; a range that
 * straddles two leaves costs a second one.  The key chosen is in *key.
 */
typedef int (*ngnfs_btree_pick_fn)(void *arg, uint64_t *key);
int ngnfs_btree_insert_range(struct ngnfs_txn *txn, struct ngnfs_btree *tree, uint64_t first,
			     uint64_t last, ngnfs_btree_iterate_fn scan, ngnfs_btree_pick_fn pick,
			     void *arg, const void *value, size_t value_length, uint64_t *key);
/* Replace the value of an existing key; -ENOENT if absent. */
int ngnfs_btree_update(struct ngnfs_txn *txn, struct ngnfs_btree *tree, uint64_t key,
		       const void *value, size_t value_length);
/* -ENOENT if absent.  Frees empty nodes; tree->root becomes 0 when the tree empties. */
int ngnfs_btree_delete(struct ngnfs_txn *txn, struct ngnfs_btree *tree, uint64_t key);
/* Every block of the tree, parents before children (fsck, freeing). */
typedef int (*ngnfs_btree_block_fn)(void *arg, uint64_t blkno, unsigned int level);
int ngnfs_btree_walk_blocks(struct ngnfs_txn *txn, struct ngnfs_btree *tree,
			    ngnfs_btree_block_fn fn, void *arg);
/* Free every node; tree->root becomes 0. */
int ngnfs_btree_free_all(struct ngnfs_txn *txn, struct ngnfs_btree *tree);

#endif
