/* SPDX-License-Identifier: GPL-2.0-or-later */
#ifndef NGNFS_TEST_DATA_UTIL_H
#define NGNFS_TEST_DATA_UTIL_H

/*
 * Helpers shared by the file data and xattr tests over the txn.h test
 * double: making a file inode, reading its attributes, and the seed that
 * every randomized test prints so that a failure can be replayed
 * (NGNFS_TEST_SEED=<n> in the environment).
 */

#include <stdint.h>

#include "cache.h"
#include "ngnfs.h"

/* A linked regular file (or directory when dir) on device. */
int ngnfs_test_make_inode(struct ngnfs_cache *cache, uint16_t device, uint32_t mode,
			  struct ngnfs_handle *handle);
int ngnfs_test_getattr(struct ngnfs_cache *cache, const struct ngnfs_handle *handle,
		       struct ngnfs_attr *attr);
/* Frees the inode and everything it owns, as unlink does (free, then release). */
int ngnfs_test_free_inode(struct ngnfs_cache *cache, const struct ngnfs_handle *handle);
/* The seed from NGNFS_TEST_SEED or the clock; printed with what as the test's name. */
uint64_t ngnfs_test_seed(const char *what);
/* A reproducible pseudo-random number stream. */
uint64_t ngnfs_test_random(uint64_t *state);

#endif
