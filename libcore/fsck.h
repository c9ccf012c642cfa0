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
 * Wrong link and entry counts and a directory's wrong ".." are also
 * listed as fixes, which ngnfs_fsck_repair (fsck_repair.c) writes.
 */

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "ngnfs.h"

/*
 * A problem fsck can put right by itself: one inode field that disagrees
 * with what the walk counted (found is what the inode said).
 */
enum ngnfs_fsck_field {
	NGNFS_FSCK_NLINK,	/* a link count, where the walk found the inode named */
	NGNFS_FSCK_ENTRY_COUNT, /* a directory's count of its names */
	NGNFS_FSCK_PARENT,	/* a directory's "..", where the walk found its one name */
};

struct ngnfs_fsck_fix {
	uint64_t ino;
	uint64_t generation;
	enum ngnfs_fsck_field field;
	uint64_t found;
	uint64_t expected;
};

struct ngnfs_fsck_report {
	uint64_t inodes;
	uint64_t directories;
	uint64_t entries;
	uint64_t blocks;
	uint64_t orphans;
	uint64_t problems;
	/* the problems among those that ngnfs_fsck_repair can fix */
	struct ngnfs_fsck_fix *fixes;
	size_t fix_count;
	uint8_t fs_id[16]; /* the checked filesystem's, which the repair insists on */
};

/*
 * problem false: progress or a note.  A walk says how far it got every
 * NGNFS_FSCK_PROGRESS_INODES inodes ("checked N inodes so far ..."): on
 * an archive of millions of files it runs for a long time.
 */
typedef void (*ngnfs_fsck_line_fn)(void *arg, bool problem, const char *line);

#define NGNFS_FSCK_PROGRESS_INODES 100000

/*
 * Returns 0 when the walk completed (problems are in the report), else a
 * negative errno.  Either way the report is the caller's to free.
 */
int ngnfs_fsck(struct ngnfs_fs *fs, ngnfs_fsck_line_fn fn, void *arg,
	       struct ngnfs_fsck_report *report);
void ngnfs_fsck_report_free(struct ngnfs_fsck_report *report);

/*
 * Frees the orphans a client left when it stopped without closing them
 * (a crash, a kill -9): inodes whose last name went while they were open,
 * listed in the orphan directory.  The client's last close would have
 * freed them; nothing else does, because another client may still have
 * such a file open and an orphan records no owner.  So this runs only
 * when no other client is connected to any device (STATFS counts them,
 * this mount's own sessions excluded), else it returns -EBUSY naming the
 * count; force skips that check (a gateway whose NFS clients still read an
 * unlinked open file then gets -ESTALE for it).  An orphan this mount
 * has open is left for its last close (a gateway runs this at start, see
 * fsal_ngnfs/orphans.c).  One line per orphan through fn (problem true: an
 * entry that is not an unlinked inode, left alone); both kinds left are
 * counted in *left.  stop (may be NULL) is read before each orphan: once
 * it is true the run ends there with -ECANCELED, the orphans not reached
 * counted in *left (a gateway's export being stopped must not wait for
 * thousands of transactions).  Returns 0 or a negative errno.
 */
int ngnfs_fsck_reclaim_orphans(struct ngnfs_fs *fs, bool force, const atomic_bool *stop,
			       ngnfs_fsck_line_fn fn, void *arg, uint64_t *reclaimed,
			       uint64_t *left);

/*
 * Online repair of the report's fixes, as the design brief asks: through
 * a client of its own (sessions of its own, so the servers revoke every
 * other holder's copy of a fixed block, this process's mount included),
 * each inode block is read incoherently, checked to still say what the
 * walk saw, corrected, and written back with CMPXCHG at the version it
 * was read at.  A block that changed underneath (CMPXCHG refused) is read
 * and checked again, NGNFS_FSCK_REPAIR_TRIES times at most; one that no
 * longer says what the walk saw is left alone and reported, since the
 * walk's count may be out of date too (check again).  One line per fix
 * through fn (problem true: not repaired).  Returns 0 with *repaired set,
 * or a negative errno when the devices cannot be reached.
 */
#define NGNFS_FSCK_REPAIR_TRIES 5
int ngnfs_fsck_repair(const struct ngnfs_mount_options *mount,
		      const struct ngnfs_fsck_report *report, ngnfs_fsck_line_fn fn, void *arg,
		      size_t *repaired);

#endif
