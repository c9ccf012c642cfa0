// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Helpers shared by the file data and xattr tests (see test_util.h).
 * They go through the same inode helpers as the filesystem (inode.c) so
 * that the inodes the tests make are the ones the filesystem makes.
 */

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <fcntl.h> /* S_IF*; sys/stat.h clashes with format-msg.h over __le64 */
#include <time.h>

#include "fs-internal.h"
#include "test_util.h"

struct make_args {
	uint16_t device;
	uint32_t mode;
	struct ngnfs_handle handle;
};

static int make_fn(struct ngnfs_txn *txn, void *arg)
{
	struct make_args *args = arg;
	struct ngnfs_inode *inode;
	int ret;

	ret = ngnfs_inode_alloc(txn, args->device, args->mode, 0, 0, 0, 0, &inode);
	if (ret < 0)
		return ret;
	inode->nlink = htole32(1);
	args->handle.ino = le64toh(inode->ino);
	args->handle.generation = le64toh(inode->generation);
	return 0;
}

int ngnfs_test_make_inode(struct ngnfs_cache *cache, uint16_t device, uint32_t mode,
			  struct ngnfs_handle *handle)
{
	struct make_args args = { .device = device, .mode = mode };
	int ret = ngnfs_txn_run(cache, make_fn, &args);

	if (ret == 0)
		*handle = args.handle;
	return ret;
}

struct getattr_args {
	const struct ngnfs_handle *handle;
	struct ngnfs_attr *attr;
};

static int getattr_fn(struct ngnfs_txn *txn, void *arg)
{
	struct getattr_args *args = arg;
	const struct ngnfs_inode *inode;
	int ret;

	ret = ngnfs_inode_read_handle(txn, args->handle, "test getattr", &inode);
	if (ret < 0)
		return ret;
	ngnfs_inode_to_attr(inode, args->attr);
	return 0;
}

int ngnfs_test_getattr(struct ngnfs_cache *cache, const struct ngnfs_handle *handle,
		       struct ngnfs_attr *attr)
{
	struct getattr_args args = { handle, attr };

	return ngnfs_txn_run(cache, getattr_fn, &args);
}

static int free_fn(struct ngnfs_txn *txn, void *arg)
{
	struct ngnfs_inode *inode;
	int ret;

	ret = ngnfs_inode_write_handle(txn, arg, "test free", &inode);
	if (ret < 0)
		return ret;
	return ngnfs_inode_free(txn, inode);
}

int ngnfs_test_free_inode(struct ngnfs_cache *cache, const struct ngnfs_handle *handle)
{
	return ngnfs_txn_run(cache, free_fn, (void *)handle);
}

uint64_t ngnfs_test_seed(const char *what)
{
	const char *env = getenv("NGNFS_TEST_SEED");
	uint64_t seed;

	if (env && *env) {
		seed = strtoull(env, NULL, 0);
	} else {
		struct timespec now;

		clock_gettime(CLOCK_REALTIME, &now);
		seed = (uint64_t)now.tv_sec * 1000000007ULL + (uint64_t)now.tv_nsec;
	}
	if (seed == 0)
		seed = 1;
	printf("%s: seed %" PRIu64 " (replay with NGNFS_TEST_SEED=%" PRIu64 ")\n", what, seed,
	       seed);
	fflush(stdout);
	return seed;
}

uint64_t ngnfs_test_random(uint64_t *state)
{
	uint64_t x = *state;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*state = x;
	return x * 2685821657736338717ULL;
}
