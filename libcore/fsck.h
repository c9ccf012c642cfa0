/* SPDX-License-Identifier: GPL-2.0-or-later */
#ifndef NGNFS_FSCK_H
#define NGNFS_FSCK_H

/*
 * The namespace checker: walks the filesystem from the root and checks
 * that every entry points to a live inode of the type and generation the
 * entry says, that link counts and entry counts are right, that every
 * directory's ".." is its parent, and that no block is reached twice
 * (inode, directory btree and symlink blocks).  Problems are reported one
 * line each through fn and counted; the walk goes on after a problem.
 * Reads go through transactions, so the check is coherent per object;
 * run it on a quiet filesystem to compare link counts across objects.
 */

#include <stdbool.h>
#include <stdint.h>

#include "ngnfs.h"

struct ngnfs_fsck_report {
	uint64_t inodes;
	uint64_t directories;
	uint64_t entries;
	uint64_t blocks;
	uint64_t orphans;
	uint64_t problems;
};

/* problem false: progress or a note. */
typedef void (*ngnfs_fsck_line_fn)(void *arg, bool problem, const char *line);

/* Returns 0 when the walk completed (problems are in the report), else a negative errno. */
int ngnfs_fsck(struct ngnfs_fs *fs, ngnfs_fsck_line_fn fn, void *arg,
	       struct ngnfs_fsck_report *report);

#endif
