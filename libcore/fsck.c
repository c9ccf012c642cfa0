/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * fsck of the namespace: a breadth-first walk from the root.
 *
 * Directories are listed with ngnfs_readdir (pages of one transaction
 * each, so a directory of millions of entries never becomes one huge
 * transaction); each inode is read once in its own transaction when the
 * first entry that names it is found, and its facts (type, nlink, parent,
 * entry count) are kept in a table keyed by inode number.  References
 * are counted as the walk goes and compared with the link counts at the
 * end, when every entry has been seen.  A second table maps every block
 * the walk reached to the inode that reached it, which is how a block
 * used twice is found.  Everything found is reported and counted; the
 * walk goes on after a problem so that one run shows all of them.
 *
 * The orphan reclaim lives here too because it reads the orphan
 * directory the same way; it frees through the same transaction as a
 * last close (namei.c), so a reclaim and a close racing for one orphan
 * free it once.
 *
 * XXX:
 *  - Data blocks and xattr blocks are not enumerated (their owners'
 *    code has no block walk yet), so a data block shared with metadata
 *    is not found; blocks allocated but unreachable (leaks) need the
 *    servers' allocation maps and are not found either.
 *  - Only wrong link and entry counts and a directory's wrong ".." (when
 *    the walk found the directory's name) are listed as fixes (for
 *    fsck_repair.c); entries naming the wrong inode, blocks used twice and
 *    corrupt blocks are reported and left to a person.
 *  - An inode that nothing names and that is not an orphan (its count
 *    should be 0) is reported, not fixed: dropping it to 0 without the
 *    orphan directory would leak it rather than free it.
 */

#include <endian.h>
#include <errno.h>
#include <fcntl.h> /* S_IF*; sys/stat.h clashes with format-msg.h over __le64 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "btree.h"
#include "fs-internal.h"
#include "fsck.h"

struct record {
	uint64_t key;
	uint64_t value; /* inodes: generation; blocks: owner */
	uint64_t parent;
	uint64_t entry_count;
	uint32_t refs;
	uint32_t nlink;
	uint32_t subdirs;
	uint32_t mode;
	bool loaded;
};

struct table {
	struct record *slots;
	size_t capacity; /* power of two */
	size_t used;
};

static size_t slot_of(uint64_t key, size_t capacity)
{
	return (size_t)((key * 0x9e3779b97f4a7c15ULL) >> 17) & (capacity - 1);
}

static int table_grow(struct table *table)
{
	size_t capacity = table->capacity ? table->capacity * 2 : 4096;
	struct record *slots = calloc(capacity, sizeof(*slots));
	size_t i, at;

	if (!slots)
		return -ENOMEM;
	for (i = 0; i < table->capacity; i++) {
		if (table->slots[i].key == 0)
			continue;
		for (at = slot_of(table->slots[i].key, capacity); slots[at].key;
		     at = (at + 1) & (capacity - 1))
			;
		slots[at] = table->slots[i];
	}
	free(table->slots);
	table->slots = slots;
	table->capacity = capacity;
	return 0;
}

/* Find or insert key (never 0); *created says it was new. */
static struct record *table_get(struct table *table, uint64_t key, bool *created)
{
	size_t at;

	if ((table->used + 1) * 2 > table->capacity && table_grow(table) < 0)
		return NULL;
	for (at = slot_of(key, table->capacity); table->slots[at].key;
	     at = (at + 1) & (table->capacity - 1)) {
		if (table->slots[at].key == key) {
			*created = false;
			return &table->slots[at];
		}
	}
	table->slots[at].key = key;
	table->used++;
	*created = true;
	return &table->slots[at];
}

struct fsck {
	struct ngnfs_fs *fs;
	ngnfs_fsck_line_fn fn;
	void *arg;
	struct ngnfs_fsck_report *report;
	struct table inodes;
	struct table blocks;
	uint64_t *queue;
	size_t queue_head, queue_count, queue_capacity;
	size_t fix_capacity; /* of report->fixes */
};

static void note(struct fsck *fsck, bool problem, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void note(struct fsck *fsck, bool problem, const char *fmt, ...)
{
	char line[512];
	va_list args;

	va_start(args, fmt);
	vsnprintf(line, sizeof(line), fmt, args);
	va_end(args);
	if (problem)
		fsck->report->problems++;
	if (fsck->fn)
		fsck->fn(fsck->arg, problem, line);
}

/* Lists a problem ngnfs_fsck_repair can fix. */
static int add_fix(struct fsck *fsck, const struct record *record, enum ngnfs_fsck_field field,
		   uint64_t found, uint64_t expected)
{
	struct ngnfs_fsck_report *report = fsck->report;
	struct ngnfs_fsck_fix *fixes = report->fixes;

	if (fsck->fix_capacity == report->fix_count) {
		size_t capacity = fsck->fix_capacity ? fsck->fix_capacity * 2 : 64;

		fixes = realloc(report->fixes, capacity * sizeof(*fixes));
		if (!fixes)
			return -ENOMEM;
		report->fixes = fixes;
		fsck->fix_capacity = capacity;
	}
	fixes[report->fix_count++] = (struct ngnfs_fsck_fix){ .ino = record->key,
							      .generation = record->value,
							      .field = field,
							      .found = found,
							      .expected = expected };
	return 0;
}

static int claim_block(struct fsck *fsck, uint64_t blkno, uint64_t owner, const char *what)
{
	struct record *record;
	bool created;

	record = table_get(&fsck->blocks, blkno, &created);
	if (!record)
		return -ENOMEM;
	fsck->report->blocks++;
	if (!created) {
		note(fsck, true,
		     "block %llu (device %u) used twice: as %s of inode %llu and by inode %llu",
		     (unsigned long long)blkno, ngnfs_blkno_device(blkno), what,
		     (unsigned long long)owner, (unsigned long long)record->value);
		return 0;
	}
	record->value = owner;
	return 0;
}

/* ---- one inode ---- */

struct inode_args {
	uint64_t ino;
	struct ngnfs_inode copy;
	uint64_t *btree_blocks;
	size_t btree_count, btree_capacity;
	int btree_error;
};

static int collect_btree_block(void *arg, uint64_t blkno, unsigned int level)
{
	struct inode_args *args = arg;

	(void)level;
	if (args->btree_count == args->btree_capacity) {
		size_t capacity = args->btree_capacity ? args->btree_capacity * 2 : 64;
		uint64_t *blocks = realloc(args->btree_blocks, capacity * sizeof(uint64_t));

		if (!blocks)
			return -ENOMEM;
		args->btree_blocks = blocks;
		args->btree_capacity = capacity;
	}
	args->btree_blocks[args->btree_count++] = blkno;
	return 0;
}

static int inode_txn(struct ngnfs_txn *txn, void *arg)
{
	struct inode_args *args = arg;
	const struct ngnfs_inode *inode;
	struct ngnfs_btree tree;
	const void *data;
	int ret;

	args->btree_count = 0;
	args->btree_error = 0;
	ret = ngnfs_inode_read(txn, args->ino, "fsck", &inode);
	if (ret < 0)
		return ret;
	memcpy(&args->copy, inode, sizeof(args->copy));
	if (ngnfs_mode_type(le32toh(inode->mode)) == S_IFDIR) {
		tree.root = le64toh(inode->data_root);
		tree.owner_ino = args->ino;
		tree.device = ngnfs_blkno_device(args->ino);
		tree.op = "fsck";
		ret = ngnfs_btree_walk_blocks(txn, &tree, collect_btree_block, args);
		if (ret == -EIO) {
			/* a bad node: report it, keep checking the rest */
			args->btree_error = ret;
			return 0;
		}
		return ret;
	}
	if (ngnfs_mode_type(le32toh(inode->mode)) == S_IFLNK && inode->data_root != 0) {
		uint64_t blkno = le64toh(inode->data_root);

		ret = ngnfs_txn_read(txn, blkno, &data);
		if (ret < 0)
			return ret;
		ret = ngnfs_block_check(data, NGNFS_MAGIC_SYMLINK, blkno, args->ino, "fsck");
		if (ret == -EIO) {
			args->btree_error = ret;
			return 0;
		}
		return ret;
	}
	return 0;
}

/* Load an inode the first time something names it. */
static int load_inode(struct fsck *fsck, uint64_t ino, struct record *record)
{
	struct inode_args args = { .ino = ino };
	size_t i;
	int ret;

	ret = ngnfs_txn_run(fsck->fs->cache, inode_txn, &args);
	if (ret == -EIO) {
		note(fsck, true, "inode %llu (device %u): %s", (unsigned long long)ino,
		     ngnfs_blkno_device(ino), ngnfs_last_error());
		free(args.btree_blocks);
		return 0;
	}
	if (ret < 0) {
		free(args.btree_blocks);
		return ret;
	}
	record->loaded = true;
	record->value = le64toh(args.copy.generation);
	record->mode = le32toh(args.copy.mode);
	record->nlink = le32toh(args.copy.nlink);
	record->parent = le64toh(args.copy.parent_ino);
	record->entry_count = le64toh(args.copy.entry_count);
	fsck->report->inodes++;
	if (fsck->report->inodes % NGNFS_FSCK_PROGRESS_INODES == 0)
		note(fsck, false, "checked %llu inodes so far (%llu directories, %llu entries)",
		     (unsigned long long)fsck->report->inodes,
		     (unsigned long long)fsck->report->directories,
		     (unsigned long long)fsck->report->entries);
	if (args.btree_error)
		note(fsck, true, "inode %llu: %s", (unsigned long long)ino, ngnfs_last_error());
	ret = claim_block(fsck, ino, ino, "inode");
	for (i = 0; ret == 0 && i < args.btree_count; i++)
		ret = claim_block(fsck, args.btree_blocks[i], ino, "directory block");
	if (ret == 0 && ngnfs_mode_type(record->mode) == S_IFLNK && args.copy.data_root != 0)
		ret = claim_block(fsck, le64toh(args.copy.data_root), ino, "symlink block");
	free(args.btree_blocks);
	if (ret == 0 && fsck->report->inodes % 10000 == 0)
		note(fsck, false, "checked %llu inodes in %llu directories",
		     (unsigned long long)fsck->report->inodes,
		     (unsigned long long)fsck->report->directories);
	return ret;
}

static int enqueue(struct fsck *fsck, uint64_t ino)
{
	if (fsck->queue_count == fsck->queue_capacity) {
		size_t capacity = fsck->queue_capacity ? fsck->queue_capacity * 2 : 256;
		uint64_t *queue = realloc(fsck->queue, capacity * sizeof(uint64_t));

		if (!queue)
			return -ENOMEM;
		fsck->queue = queue;
		fsck->queue_capacity = capacity;
	}
	fsck->queue[fsck->queue_count++] = ino;
	return 0;
}

/* ---- one directory ---- */

struct dir_walk {
	struct fsck *fsck;
	uint64_t dir;
	uint64_t entries;
	int error;
};

static int check_entry(void *arg, const char *name, size_t name_length,
		       const struct ngnfs_handle *handle, uint32_t type_mode, uint64_t cookie)
{
	struct dir_walk *walk = arg;
	struct fsck *fsck = walk->fsck;
	struct record *record, *parent;
	bool created;
	int ret;

	(void)cookie;
	walk->entries++;
	fsck->report->entries++;
	record = table_get(&fsck->inodes, handle->ino, &created);
	if (!record) {
		walk->error = -ENOMEM;
		return 1;
	}
	if (created) {
		ret = load_inode(fsck, handle->ino, record);
		if (ret < 0) {
			walk->error = ret;
			return 1;
		}
		if (record->loaded && ngnfs_mode_type(record->mode) == S_IFDIR) {
			ret = enqueue(fsck, handle->ino);
			if (ret < 0) {
				walk->error = ret;
				return 1;
			}
		}
	}
	record->refs++;
	if (!record->loaded)
		return 0;
	if (record->value != handle->generation)
		note(fsck, true,
		     "directory %llu entry \"%.*s\": names inode %llu generation %llu, inode has "
		     "generation %llu",
		     (unsigned long long)walk->dir, (int)name_length, name,
		     (unsigned long long)handle->ino, (unsigned long long)handle->generation,
		     (unsigned long long)record->value);
	if (ngnfs_mode_type(record->mode) != ngnfs_mode_type(type_mode))
		note(fsck, true,
		     "directory %llu entry \"%.*s\": type %o but inode %llu has type %o",
		     (unsigned long long)walk->dir, (int)name_length, name,
		     ngnfs_mode_type(type_mode), (unsigned long long)handle->ino,
		     ngnfs_mode_type(record->mode));
	if (ngnfs_mode_type(record->mode) == S_IFDIR) {
		if (record->refs > 1)
			note(fsck, true,
			     "directory inode %llu has more than one name (again in %llu)",
			     (unsigned long long)handle->ino, (unsigned long long)walk->dir);
		if (record->parent != walk->dir) {
			note(fsck, true, "directory inode %llu: \"..\" is %llu but it is in %llu",
			     (unsigned long long)handle->ino, (unsigned long long)record->parent,
			     (unsigned long long)walk->dir);
			/* its first name: a second one is a problem of its own */
			if (record->refs == 1) {
				ret = add_fix(fsck, record, NGNFS_FSCK_PARENT, record->parent,
					      walk->dir);
				if (ret < 0) {
					walk->error = ret;
					return 1;
				}
			}
		}
		parent = table_get(&fsck->inodes, walk->dir, &created);
		if (parent)
			parent->subdirs++;
	}
	return 0;
}

static int walk_dir(struct fsck *fsck, uint64_t ino)
{
	struct dir_walk walk = { .fsck = fsck, .dir = ino };
	struct ngnfs_handle handle;
	struct record *record;
	bool created, end = false;
	int ret;

	record = table_get(&fsck->inodes, ino, &created);
	if (!record)
		return -ENOMEM;
	handle.ino = ino;
	handle.generation = record->value;
	fsck->report->directories++;
	ret = ngnfs_readdir(fsck->fs, &handle, 0, check_entry, &walk, &end);
	if (walk.error < 0)
		return walk.error;
	if (ret == -EIO) {
		note(fsck, true, "directory %llu: %s", (unsigned long long)ino, ngnfs_last_error());
		return 0;
	}
	if (ret < 0)
		return ret;
	record = table_get(&fsck->inodes, ino, &created);
	if (record && walk.entries != record->entry_count) {
		note(fsck, true, "directory %llu: entry count says %llu, found %llu entries",
		     (unsigned long long)ino, (unsigned long long)record->entry_count,
		     (unsigned long long)walk.entries);
		return add_fix(fsck, record, NGNFS_FSCK_ENTRY_COUNT, record->entry_count,
			       walk.entries);
	}
	return 0;
}

/* ---- the orphan directory: keys are inode numbers ---- */

struct orphan_args {
	uint64_t orphan_dir;
	uint64_t *inos;
	size_t count, capacity;
};

static int collect_orphan(void *arg, uint64_t key, const void *value, size_t length)
{
	struct orphan_args *args = arg;

	(void)value;
	(void)length;
	if (args->count == args->capacity) {
		size_t capacity = args->capacity ? args->capacity * 2 : 64;
		uint64_t *inos = realloc(args->inos, capacity * sizeof(uint64_t));

		if (!inos)
			return -ENOMEM;
		args->inos = inos;
		args->capacity = capacity;
	}
	args->inos[args->count++] = key;
	return 0;
}

static int orphans_txn(struct ngnfs_txn *txn, void *arg)
{
	struct orphan_args *args = arg;
	const struct ngnfs_inode *dir;
	struct ngnfs_btree tree;
	int ret;

	args->count = 0;
	ret = ngnfs_inode_read(txn, args->orphan_dir, "fsck orphans", &dir);
	if (ret < 0)
		return ret;
	tree.root = le64toh(dir->data_root);
	tree.owner_ino = args->orphan_dir;
	tree.device = ngnfs_blkno_device(args->orphan_dir);
	tree.op = "fsck orphans";
	ret = ngnfs_btree_iterate(txn, &tree, 0, collect_orphan, args);
	return ret < 0 ? ret : 0;
}

static int check_orphans(struct fsck *fsck)
{
	struct orphan_args args = { .orphan_dir = fsck->fs->orphan_dir_ino };
	struct record *record;
	bool created;
	size_t i;
	int ret;

	record = table_get(&fsck->inodes, args.orphan_dir, &created);
	if (!record)
		return -ENOMEM;
	ret = load_inode(fsck, args.orphan_dir, record);
	if (ret < 0)
		return ret;
	record->refs = 1; /* named by the superblock */
	ret = ngnfs_txn_run(fsck->fs->cache, orphans_txn, &args);
	if (ret == -EIO) {
		note(fsck, true, "orphan directory %llu: %s", (unsigned long long)args.orphan_dir,
		     ngnfs_last_error());
		ret = 0;
	}
	for (i = 0; ret == 0 && i < args.count; i++) {
		record = table_get(&fsck->inodes, args.inos[i], &created);
		if (!record) {
			ret = -ENOMEM;
			break;
		}
		if (!created) {
			note(fsck, true, "orphan inode %llu is still named in a directory",
			     (unsigned long long)args.inos[i]);
			continue;
		}
		ret = load_inode(fsck, args.inos[i], record);
		if (ret < 0)
			break;
		fsck->report->orphans++;
		if (record->loaded && record->nlink != 0)
			note(fsck, true, "orphan inode %llu has nlink %u",
			     (unsigned long long)args.inos[i], record->nlink);
		else
			note(fsck, false,
			     "orphan inode %llu (unlinked while open) awaits its last close; "
			     "if the gateway that had it open is gone, run ngnfs "
			     "reclaim-orphans with every gateway stopped",
			     (unsigned long long)args.inos[i]);
	}
	free(args.inos);
	return ret;
}

/* ---- reclaiming the orphans a crashed client left ---- */

static void reclaim_line(ngnfs_fsck_line_fn fn, void *arg, bool problem, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void reclaim_line(ngnfs_fsck_line_fn fn, void *arg, bool problem, const char *fmt, ...)
{
	char line[512];
	va_list args;

	if (!fn)
		return;
	va_start(args, fmt);
	vsnprintf(line, sizeof(line), fmt, args);
	va_end(args);
	fn(arg, problem, line);
}

struct line_target {
	ngnfs_fsck_line_fn fn;
	void *arg;
};

static void say_other_clients(void *arg, uint16_t device, uint64_t sessions)
{
	struct line_target *target = arg;

	reclaim_line(target->fn, target->arg, true, "device %u has %llu other client%s connected",
		     device, (unsigned long long)sessions, sessions == 1 ? "" : "s");
}

/* How many clients other than this mount the devices have, each device's said as a line. */
static int other_clients(struct ngnfs_fs *fs, ngnfs_fsck_line_fn fn, void *arg, uint64_t *others)
{
	struct line_target target = { .fn = fn, .arg = arg };

	return ngnfs_count_other_clients(fs->client, fs->device_count, say_other_clients, &target,
					 others);
}

int ngnfs_fsck_reclaim_orphans(struct ngnfs_fs *fs, bool force, const atomic_bool *stop,
			       ngnfs_fsck_line_fn fn, void *arg, uint64_t *reclaimed,
			       uint64_t *left)
{
	struct orphan_args args = { .orphan_dir = fs->orphan_dir_ino };
	uint64_t others;
	size_t i;
	int ret;

	ngnfs_clear_error();
	*reclaimed = 0;
	*left = 0;
	ret = other_clients(fs, fn, arg, &others);
	if (ret < 0)
		return ret;
	if (others && !force)
		return ngnfs_fail_quiet(-EBUSY,
					"other clients are connected (%llu sessions), and an "
					"orphan may be a file one of them still has open: stop "
					"every gateway first",
					(unsigned long long)others);
	ret = ngnfs_txn_run(fs->cache, orphans_txn, &args);
	if (ret < 0) {
		free(args.inos);
		return ngnfs_fail(ret, "reading the orphan directory %llu: %s",
				  (unsigned long long)args.orphan_dir, strerror(-ret));
	}
	for (i = 0; i < args.count; i++) {
		bool freed, open_here;

		if (stop && atomic_load(stop)) {
			ret = ngnfs_fail_quiet(-ECANCELED, "%llu orphans freed, %zu not reached",
					       (unsigned long long)*reclaimed, args.count - i);
			*left += args.count - i;
			break;
		}
		/*
		 * A gateway that started since may be serving an NFS client
		 * that reclaims its open of this very file: checked again
		 * before each one, the window is one orphan long.
		 */
		if (!force && i > 0) {
			ret = other_clients(fs, fn, arg, &others);
			if (ret < 0)
				break;
			if (others) {
				ret = ngnfs_fail_quiet(
				    -EBUSY,
				    "another client connected while orphans were being freed (%llu "
				    "sessions): %llu freed, %zu not; stop every gateway and run "
				    "again",
				    (unsigned long long)others, (unsigned long long)*reclaimed,
				    args.count - i);
				*left += args.count - i;
				break;
			}
		}
		ret = ngnfs_namei_reclaim_orphan_ino(fs, args.inos[i], &freed, &open_here);
		if (ret < 0) {
			ret = ngnfs_fail(ret, "reclaiming orphan inode %llu: %s",
					 (unsigned long long)args.inos[i], strerror(-ret));
			break;
		}
		if (freed) {
			(*reclaimed)++;
			reclaim_line(fn, arg, false, "orphan inode %llu freed",
				     (unsigned long long)args.inos[i]);
		} else if (open_here) {
			(*left)++;
			reclaim_line(fn, arg, false,
				     "orphan inode %llu is open on this mount: left for its last "
				     "close to free",
				     (unsigned long long)args.inos[i]);
		} else {
			/* named again, or not an unlinked inode: fsck says which */
			(*left)++;
			reclaim_line(fn, arg, true,
				     "orphan directory entry %llu is not an unlinked inode: left "
				     "alone (see fsck)",
				     (unsigned long long)args.inos[i]);
		}
	}
	free(args.inos);
	return ret < 0 ? ret : 0;
}

int ngnfs_fsck(struct ngnfs_fs *fs, ngnfs_fsck_line_fn fn, void *arg,
	       struct ngnfs_fsck_report *report)
{
	struct fsck fsck = { .fs = fs, .fn = fn, .arg = arg, .report = report };
	struct record *record;
	bool created;
	size_t i;
	int ret;

	ngnfs_clear_error();
	memset(report, 0, sizeof(*report));
	memcpy(report->fs_id, fs->fs_id, sizeof(report->fs_id));
	ret = claim_block(&fsck, ngnfs_blkno_make(0, NGNFS_SUPER_INDEX), 0, "superblock");
	if (ret < 0)
		goto out;
	record = table_get(&fsck.inodes, fs->root_ino, &created);
	if (!record) {
		ret = -ENOMEM;
		goto out;
	}
	ret = load_inode(&fsck, fs->root_ino, record);
	if (ret < 0)
		goto out;
	if (!record->loaded) {
		note(&fsck, true, "root inode %llu cannot be read",
		     (unsigned long long)fs->root_ino);
		goto out;
	}
	record->refs = 1;
	ret = enqueue(&fsck, fs->root_ino);
	while (ret == 0 && fsck.queue_head < fsck.queue_count)
		ret = walk_dir(&fsck, fsck.queue[fsck.queue_head++]);
	if (ret == 0)
		ret = check_orphans(&fsck);
	if (ret < 0)
		goto out;

	for (i = 0; i < fsck.inodes.capacity; i++) {
		struct record *r = &fsck.inodes.slots[i];
		uint32_t expected;

		if (r->key == 0 || !r->loaded)
			continue;
		if (ngnfs_mode_type(r->mode) == S_IFDIR)
			expected = 2 + r->subdirs;
		else if (r->refs == 0 || r->nlink == 0)
			expected = 0; /* orphan */
		else
			expected = r->refs;
		if (ngnfs_mode_type(r->mode) != S_IFDIR && r->key != fs->orphan_dir_ino &&
		    r->refs == 0 && r->nlink != 0)
			expected = 0;
		if (r->nlink == expected)
			continue;
		note(&fsck, true, "inode %llu: link count %u, expected %u",
		     (unsigned long long)r->key, r->nlink, expected);
		if (expected > 0 && r->key != fs->orphan_dir_ino) {
			ret = add_fix(&fsck, r, NGNFS_FSCK_NLINK, r->nlink, expected);
			if (ret < 0)
				goto out;
		}
	}
	note(&fsck, false,
	     "checked %llu inodes, %llu directories, %llu entries, %llu blocks: %llu problems",
	     (unsigned long long)report->inodes, (unsigned long long)report->directories,
	     (unsigned long long)report->entries, (unsigned long long)report->blocks,
	     (unsigned long long)report->problems);
out:
	free(fsck.inodes.slots);
	free(fsck.blocks.slots);
	free(fsck.queue);
	return ret;
}

void ngnfs_fsck_report_free(struct ngnfs_fsck_report *report)
{
	free(report->fixes);
	report->fixes = NULL;
	report->fix_count = 0;
}
