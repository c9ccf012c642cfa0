/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The namespace operations: lookup, create (files, directories, devices,
 * fifos, sockets), symlink, readlink, link, unlink/rmdir and rename.
 *
 * Each is one transaction function over the blocks it needs: the
 * directories, the inodes named, and for rename of a directory into
 * another directory every ancestor of the destination.  That walk up
 * parent_ino is the "not into its own subtree" check and it runs inside
 * the transaction, so the transaction holds read access to every ancestor
 * it looked at: a concurrent rename that moves one of them needs write
 * access to it and cannot commit in between, so two racing renames
 * cannot both succeed in making a loop, and no rename lock is needed.
 *
 * A name whose last link goes while the file is open on this client is
 * kept as an orphan (flag in the inode, entry in the orphan directory)
 * and freed at last close.
 *
 * XXX:
 *  - Permission checks are the caller's (the FSAL checks access from the
 *    attributes it gets).
 */

#include <endian.h>
#include <errno.h>
#include <string.h>
#include <fcntl.h> /* S_IF*; sys/stat.h clashes with format-msg.h over __le64 */

#include "btree.h"
#include "fs-internal.h"

#define ANCESTOR_WALK_LIMIT 4096

int ngnfs_check_name(const char *name, size_t *name_length, const char *op)
{
	size_t length;

	if (!name)
		return -EINVAL;
	length = strnlen(name, NGNFS_NAME_MAX + 1);
	if (length == 0)
		return ngnfs_fail_quiet(-ENOENT, "%s: empty name", op);
	if (length > NGNFS_NAME_MAX)
		return ngnfs_fail_quiet(-ENAMETOOLONG, "%s: name longer than %d bytes", op,
					NGNFS_NAME_MAX);
	if (memchr(name, '/', length))
		return ngnfs_fail_quiet(-EINVAL, "%s: name \"%s\" contains '/'", op, name);
	*name_length = length;
	return 0;
}

static bool is_dot(const char *name)
{
	return strcmp(name, ".") == 0;
}

static bool is_dotdot(const char *name)
{
	return strcmp(name, "..") == 0;
}

static bool is_dir(const struct ngnfs_inode *inode)
{
	return ngnfs_mode_type(le32toh(inode->mode)) == S_IFDIR;
}

static void add_nlink(struct ngnfs_inode *inode, int delta)
{
	inode->nlink = htole32((uint32_t)((int64_t)le32toh(inode->nlink) + delta));
}

/* A directory that is being or has been removed takes no new entries. */
static int writable_dir(struct ngnfs_txn *txn, const struct ngnfs_handle *handle, const char *op,
			struct ngnfs_inode **dir)
{
	int ret;

	ret = ngnfs_inode_write_handle(txn, handle, op, dir);
	if (ret < 0)
		return ret;
	if (!is_dir(*dir))
		return -ENOTDIR;
	if (le32toh((*dir)->nlink) == 0)
		return -ENOENT;
	return 0;
}

/* ---- lookup ---- */

struct lookup_args {
	const struct ngnfs_handle *dir;
	const char *name;
	size_t name_length;
	struct ngnfs_handle handle;
	struct ngnfs_attr attr;
};

static int lookup_txn(struct ngnfs_txn *txn, void *arg)
{
	struct lookup_args *args = arg;
	const struct ngnfs_inode *dir, *inode;
	struct ngnfs_dirent_info info;
	uint64_t ino;
	int ret;

	ret = ngnfs_inode_read_handle(txn, args->dir, "lookup", &dir);
	if (ret < 0)
		return ret;
	if (!is_dir(dir))
		return -ENOTDIR;
	if (is_dot(args->name)) {
		ino = args->dir->ino;
	} else if (is_dotdot(args->name)) {
		ino = le64toh(dir->parent_ino);
	} else {
		ret = ngnfs_dir_lookup(txn, dir, args->name, args->name_length, &info);
		if (ret < 0)
			return ret;
		ino = info.ino;
	}
	ret = ngnfs_inode_read(txn, ino, "lookup", &inode);
	if (ret < 0)
		return ret;
	args->handle.ino = ino;
	args->handle.generation = le64toh(inode->generation);
	ngnfs_inode_to_attr(inode, &args->attr);
	return 0;
}

int ngnfs_lookup(struct ngnfs_fs *fs, const struct ngnfs_handle *dir, const char *name,
		 struct ngnfs_handle *handle_out, struct ngnfs_attr *attr_out)
{
	struct lookup_args args = { .dir = dir, .name = name };
	int ret;

	ngnfs_clear_error();
	ret = ngnfs_check_name(name, &args.name_length, "lookup");
	if (ret < 0)
		return ret;
	ret = ngnfs_txn_run(fs->cache, lookup_txn, &args);
	if (ret < 0)
		return ret;
	if (handle_out)
		*handle_out = args.handle;
	if (attr_out)
		*attr_out = args.attr;
	return 0;
}

/* ---- create, mkdir, mknod, symlink ---- */

struct create_args {
	struct ngnfs_fs *fs;
	const struct ngnfs_handle *dir;
	const char *name;
	size_t name_length;
	uint32_t mode;
	uint32_t uid;
	uint32_t gid;
	uint64_t rdev;
	const char *target; /* symlink */
	size_t target_length;
	const struct timespec *atime; /* NULL: now */
	const struct timespec *mtime;
	struct ngnfs_handle handle;
	struct ngnfs_attr attr;
};

static int store_symlink(struct ngnfs_txn *txn, struct ngnfs_inode *inode, const char *target,
			 size_t length)
{
	struct ngnfs_symlink_block *block;
	uint64_t blkno, version;
	size_t head;
	void *data;
	int ret;

	inode->size = htole64(length);
	if (length <= NGNFS_SYMLINK_INLINE_MAX) {
		memcpy((uint8_t *)inode + NGNFS_BLOCK_SIZE - length, target, length);
		inode->symlink_length = htole16((uint16_t)length);
		return 0;
	}
	ret = ngnfs_alloc_block(txn, ngnfs_blkno_device(le64toh(inode->ino)), "symlink", &blkno,
				&version, &data);
	if (ret < 0)
		return ret;
	block = data;
	memset(block, 0, NGNFS_BLOCK_SIZE);
	ngnfs_block_header_init(block, NGNFS_MAGIC_SYMLINK, blkno, le64toh(inode->ino));
	head = length < NGNFS_SYMLINK_BLOCK_MAX ? length : NGNFS_SYMLINK_BLOCK_MAX;
	memcpy(block->target, target, head);
	/* the last bytes of a target longer than the block, inline like a short one */
	memcpy((uint8_t *)inode + NGNFS_BLOCK_SIZE - (length - head), target + head, length - head);
	inode->symlink_length = htole16((uint16_t)(length - head));
	inode->data_root = htole64(blkno);
	inode->data_blocks = htole64(1);
	return 0;
}

/* Is the name in dir?  0: no; -EEXIST: yes; else the lookup's error. */
static int name_exists(struct ngnfs_txn *txn, const struct ngnfs_inode *dir,
		       const struct create_args *args)
{
	struct ngnfs_dirent_info info;
	int ret;

	ret = ngnfs_dir_lookup(txn, dir, args->name, args->name_length, &info);
	if (ret == 0)
		return -EEXIST;
	return ret == -ENOENT ? 0 : ret;
}

/*
 * The name is checked by ngnfs_dir_add, in the descent that inserts it
 * (a separate lookup first decoded the same nodes once more per create).
 * So the inode is allocated before we know that the name is free; on
 * -EEXIST the transaction fails and the allocation goes back to the pool.
 * Errors that must not hide an existing name (EMLINK, an allocation
 * failure) look the name up first.
 */
static int create_txn(struct ngnfs_txn *txn, void *arg)
{
	struct create_args *args = arg;
	struct ngnfs_inode *dir, *inode;
	uint32_t type = ngnfs_mode_type(args->mode);
	uint16_t device;
	int ret;

	ret = writable_dir(txn, args->dir, "create", &dir);
	if (ret < 0)
		return ret;
	if (type == S_IFDIR && le32toh(dir->nlink) >= NGNFS_LINK_MAX) {
		ret = name_exists(txn, dir, args);
		return ret < 0 ? ret : -EMLINK;
	}

	device = ngnfs_inode_device_for(txn, args->dir->ino, type, args->name, args->name_length);
	ret = ngnfs_inode_alloc(txn, device, args->mode, args->uid, args->gid, args->rdev,
				type == S_IFDIR ? args->dir->ino : 0, &inode);
	if (ret < 0)
		goto failed;
	/* before the create can commit, and so before any loss of its own */
	ngnfs_fs_forget_lost(args->fs, le64toh(inode->ino));
	if (args->atime)
		ngnfs_timespec_to_le(args->atime, &inode->atime_sec, &inode->atime_nsec);
	if (args->mtime)
		ngnfs_timespec_to_le(args->mtime, &inode->mtime_sec, &inode->mtime_nsec);
	if (type == S_IFDIR) {
		inode->nlink = htole32(2);
		add_nlink(dir, 1);
	} else {
		inode->nlink = htole32(1);
	}
	if (type == S_IFLNK) {
		ret = store_symlink(txn, inode, args->target, args->target_length);
		if (ret < 0)
			goto failed;
	}
	ret = ngnfs_dir_add(txn, dir, args->name, args->name_length, le64toh(inode->ino),
			    le64toh(inode->generation), args->mode);
	if (ret < 0)
		return ret;
	ngnfs_inode_touch(dir, NGNFS_TOUCH_MTIME | NGNFS_TOUCH_CTIME);
	args->handle.ino = le64toh(inode->ino);
	args->handle.generation = le64toh(inode->generation);
	ngnfs_inode_to_attr(inode, &args->attr);
	return 0;

failed:
	/* an existing name is what the caller hears about, not an allocation failure */
	if (ret != -EAGAIN) {
		int exists = name_exists(txn, dir, args);

		if (exists < 0)
			return exists;
	}
	return ret;
}

static int run_create(struct ngnfs_fs *fs, struct create_args *args,
		      struct ngnfs_handle *handle_out, struct ngnfs_attr *attr_out)
{
	int ret;

	ret = ngnfs_check_name(args->name, &args->name_length, "create");
	if (ret < 0)
		return ret;
	if (is_dot(args->name) || is_dotdot(args->name))
		return -EEXIST;
	ret = ngnfs_txn_run(fs->cache, create_txn, args);
	if (ret < 0)
		return ret;
	if (handle_out)
		*handle_out = args->handle;
	if (attr_out)
		*attr_out = args->attr;
	return 0;
}

int ngnfs_create(struct ngnfs_fs *fs, const struct ngnfs_handle *dir, const char *name,
		 uint32_t mode, uint32_t uid, uint32_t gid, uint64_t rdev,
		 struct ngnfs_handle *handle_out, struct ngnfs_attr *attr_out)
{
	return ngnfs_create_with_times(fs, dir, name, mode, uid, gid, rdev, NULL, NULL, handle_out,
				       attr_out);
}

static bool bad_time(const struct timespec *time)
{
	/* as setattr: seconds before 1970 are allowed */
	return time && (time->tv_nsec < 0 || time->tv_nsec >= 1000000000);
}

int ngnfs_create_with_times(struct ngnfs_fs *fs, const struct ngnfs_handle *dir, const char *name,
			    uint32_t mode, uint32_t uid, uint32_t gid, uint64_t rdev,
			    const struct timespec *atime, const struct timespec *mtime,
			    struct ngnfs_handle *handle_out, struct ngnfs_attr *attr_out)
{
	struct create_args args = {
		.fs = fs,
		.dir = dir,
		.name = name,
		.mode = mode,
		.uid = uid,
		.gid = gid,
		.atime = atime,
		.mtime = mtime,
	};

	ngnfs_clear_error();
	if (bad_time(atime) || bad_time(mtime))
		return ngnfs_fail_quiet(-EINVAL, "create \"%s\": time out of range", name);
	switch (ngnfs_mode_type(mode)) {
	case S_IFCHR:
	case S_IFBLK:
		args.rdev = rdev;
		break;
	case S_IFREG:
	case S_IFDIR:
	case S_IFIFO:
	case S_IFSOCK:
		break;
	default:
		return ngnfs_fail_quiet(-EINVAL, "create \"%s\": file type %o not supported", name,
					ngnfs_mode_type(mode));
	}
	args.mode = ngnfs_mode_type(mode) | (mode & 07777);
	return run_create(fs, &args, handle_out, attr_out);
}

int ngnfs_symlink(struct ngnfs_fs *fs, const struct ngnfs_handle *dir, const char *name,
		  const char *target, uint32_t uid, uint32_t gid, struct ngnfs_handle *handle_out,
		  struct ngnfs_attr *attr_out)
{
	struct create_args args = {
		.fs = fs,
		.dir = dir,
		.name = name,
		.mode = S_IFLNK | 0777,
		.uid = uid,
		.gid = gid,
		.target = target,
	};

	ngnfs_clear_error();
	if (!target)
		return -EINVAL;
	args.target_length = strnlen(target, NGNFS_SYMLINK_MAX + 1);
	if (args.target_length == 0)
		return -ENOENT;
	if (args.target_length > NGNFS_SYMLINK_MAX)
		return ngnfs_fail_quiet(-ENAMETOOLONG,
					"symlink \"%s\": target of %zu bytes is too long", name,
					args.target_length);
	return run_create(fs, &args, handle_out, attr_out);
}

struct readlink_args {
	const struct ngnfs_handle *handle;
	char *buffer;
	size_t size;
	size_t length;
};

static int readlink_txn(struct ngnfs_txn *txn, void *arg)
{
	struct readlink_args *args = arg;
	const struct ngnfs_inode *inode;
	const uint8_t *target, *tail = NULL;
	size_t head, tail_length = 0;
	const void *data;
	uint64_t blkno;
	size_t copy;
	int ret;

	ret = ngnfs_inode_read_handle(txn, args->handle, "readlink", &inode);
	if (ret < 0)
		return ret;
	if (ngnfs_mode_type(le32toh(inode->mode)) != S_IFLNK)
		return -EINVAL;
	args->length = le64toh(inode->size);
	if (inode->data_root == 0) {
		if (args->length != le16toh(inode->symlink_length))
			return ngnfs_fail(-EIO,
					  "readlink: symlink inode %llu has length %zu but "
					  "inline target %u",
					  (unsigned long long)args->handle->ino, args->length,
					  le16toh(inode->symlink_length));
		target = (const uint8_t *)inode + NGNFS_BLOCK_SIZE - args->length;
		head = args->length;
	} else {
		blkno = le64toh(inode->data_root);
		head =
		    args->length < NGNFS_SYMLINK_BLOCK_MAX ? args->length : NGNFS_SYMLINK_BLOCK_MAX;
		tail_length = args->length - head;
		if (args->length > NGNFS_SYMLINK_MAX ||
		    tail_length != le16toh(inode->symlink_length))
			return ngnfs_fail(
			    -EIO,
			    "readlink: symlink inode %llu has length %zu and %u bytes "
			    "inline beside its block",
			    (unsigned long long)args->handle->ino, args->length,
			    le16toh(inode->symlink_length));
		tail = (const uint8_t *)inode + NGNFS_BLOCK_SIZE - tail_length;
		ret = ngnfs_txn_read(txn, blkno, &data);
		if (ret < 0)
			return ret;
		ret = ngnfs_block_check(data, NGNFS_MAGIC_SYMLINK, blkno, args->handle->ino,
					"readlink");
		if (ret < 0)
			return ret;
		target = ((const struct ngnfs_symlink_block *)data)->target;
	}
	copy = head < args->size ? head : args->size;
	memcpy(args->buffer, target, copy);
	if (tail_length && args->size > head) {
		copy = tail_length < args->size - head ? tail_length : args->size - head;
		memcpy(args->buffer + head, tail, copy);
	}
	if (args->length < args->size)
		args->buffer[args->length] = '\0';
	return 0;
}

ssize_t ngnfs_readlink(struct ngnfs_fs *fs, const struct ngnfs_handle *handle, char *buffer,
		       size_t size)
{
	struct readlink_args args = { .handle = handle, .buffer = buffer, .size = size };
	int ret;

	ngnfs_clear_error();
	ret = ngnfs_txn_run(fs->cache, readlink_txn, &args);
	if (ret < 0)
		return ret;
	return (ssize_t)args.length;
}

/* ---- link ---- */

struct link_args {
	const struct ngnfs_handle *handle;
	const struct ngnfs_handle *dir;
	const char *name;
	size_t name_length;
};

static int link_txn(struct ngnfs_txn *txn, void *arg)
{
	struct link_args *args = arg;
	struct ngnfs_inode *dir, *inode;
	struct ngnfs_dirent_info info;
	int ret;

	ret = ngnfs_inode_write_handle(txn, args->handle, "link", &inode);
	if (ret < 0)
		return ret;
	ret = writable_dir(txn, args->dir, "link", &dir);
	if (ret < 0)
		return ret;
	/* in the order Linux checks: an existing name first */
	ret = ngnfs_dir_lookup(txn, dir, args->name, args->name_length, &info);
	if (ret == 0)
		return -EEXIST;
	if (ret != -ENOENT)
		return ret;
	if (is_dir(inode))
		return -EPERM;
	if (le32toh(inode->nlink) == 0)
		return -ENOENT;
	if (le32toh(inode->nlink) >= NGNFS_LINK_MAX)
		return -EMLINK;
	ret = ngnfs_dir_add(txn, dir, args->name, args->name_length, args->handle->ino,
			    args->handle->generation, le32toh(inode->mode));
	if (ret < 0)
		return ret;
	add_nlink(inode, 1);
	ngnfs_inode_touch(inode, NGNFS_TOUCH_CTIME);
	ngnfs_inode_touch(dir, NGNFS_TOUCH_MTIME | NGNFS_TOUCH_CTIME);
	return 0;
}

int ngnfs_link(struct ngnfs_fs *fs, const struct ngnfs_handle *handle,
	       const struct ngnfs_handle *dir, const char *name)
{
	struct link_args args = { .handle = handle, .dir = dir, .name = name };
	int ret;

	ngnfs_clear_error();
	ret = ngnfs_check_name(name, &args.name_length, "link");
	if (ret < 0)
		return ret;
	if (is_dot(name) || is_dotdot(name))
		return -EEXIST;
	return ngnfs_txn_run(fs->cache, link_txn, &args);
}

/* ---- dropping a link: free now, or keep as an orphan while open ---- */

static int orphan_tree(struct ngnfs_txn *txn, struct ngnfs_fs *fs, struct ngnfs_inode **orphans,
		       struct ngnfs_btree *tree)
{
	int ret;

	ret = ngnfs_inode_write(txn, fs->orphan_dir_ino, "orphan directory", orphans);
	if (ret < 0)
		return ret;
	tree->root = le64toh((*orphans)->data_root);
	tree->owner_ino = fs->orphan_dir_ino;
	tree->device = ngnfs_blkno_device(fs->orphan_dir_ino);
	tree->op = "orphan directory";
	return 0;
}

/*
 * inode lost its last name (nlink already 0, or a directory being
 * removed).
 */
static int drop_inode(struct ngnfs_txn *txn, struct ngnfs_fs *fs, struct ngnfs_inode *inode)
{
	struct ngnfs_inode *orphans;
	struct ngnfs_btree tree;
	uint64_t ino = le64toh(inode->ino);
	int ret;

	if (!is_dir(inode) && ngnfs_fs_is_open(fs, ino)) {
		ret = orphan_tree(txn, fs, &orphans, &tree);
		if (ret < 0)
			return ret;
		ret = ngnfs_btree_insert(txn, &tree, ino, NULL, 0);
		if (ret < 0 && ret != -EEXIST)
			return ret;
		orphans->data_root = htole64(tree.root);
		inode->flags = htole32(le32toh(inode->flags) | NGNFS_INODE_ORPHAN);
		return 0;
	}
	return ngnfs_inode_free(txn, inode);
}

/*
 * Called at last close: free the inode if it is an orphan.  The admin
 * tool's reclaim (fsck.c) knows only the inode number from the orphan
 * directory, so it takes any generation.  Either way an inode this mount
 * has open is left alone: checked after the inode is write-locked, as
 * drop_inode does, and ngnfs_open() counts before it reads the inode, so
 * an open that races the reclaim either is seen here or finds the inode
 * freed.
 */
struct reclaim_args {
	struct ngnfs_fs *fs;
	struct ngnfs_handle handle;
	bool any_generation;
	bool freed;
	bool open_here;
};

static int reclaim_txn(struct ngnfs_txn *txn, void *arg)
{
	struct reclaim_args *args = arg;
	struct ngnfs_inode *inode, *orphans;
	struct ngnfs_btree tree;
	const void *data;
	int ret;

	args->freed = false;
	args->open_here = false;
	ret = ngnfs_txn_read(txn, args->handle.ino, &data);
	if (ret < 0)
		return ret;
	inode = (struct ngnfs_inode *)data;
	if (le32toh(inode->header.magic) != NGNFS_MAGIC_INODE ||
	    (!args->any_generation && le64toh(inode->generation) != args->handle.generation) ||
	    le32toh(inode->nlink) != 0 || !(le32toh(inode->flags) & NGNFS_INODE_ORPHAN))
		return 0;
	ret = ngnfs_inode_write(txn, args->handle.ino, "reclaim orphan", &inode);
	if (ret < 0)
		return ret;
	if (ngnfs_fs_is_open(args->fs, args->handle.ino)) {
		args->open_here = true;
		return 0;
	}
	ret = orphan_tree(txn, args->fs, &orphans, &tree);
	if (ret < 0)
		return ret;
	ret = ngnfs_btree_delete(txn, &tree, args->handle.ino);
	if (ret < 0 && ret != -ENOENT)
		return ret;
	orphans->data_root = htole64(tree.root);
	args->freed = true;
	return ngnfs_inode_free(txn, inode);
}

int ngnfs_namei_reclaim_orphan(struct ngnfs_fs *fs, const struct ngnfs_handle *handle)
{
	struct reclaim_args args = { .fs = fs, .handle = *handle };

	return ngnfs_txn_run(fs->cache, reclaim_txn, &args);
}

int ngnfs_namei_reclaim_orphan_ino(struct ngnfs_fs *fs, uint64_t ino, bool *freed, bool *open_here)
{
	struct reclaim_args args = { .fs = fs, .handle.ino = ino, .any_generation = true };
	int ret = ngnfs_txn_run(fs->cache, reclaim_txn, &args);

	*freed = ret == 0 && args.freed;
	*open_here = ret == 0 && args.open_here;
	return ret;
}

/* ---- unlink and rmdir ---- */

struct unlink_args {
	struct ngnfs_fs *fs;
	const struct ngnfs_handle *dir;
	const char *name;
	size_t name_length;
};

static int unlink_txn(struct ngnfs_txn *txn, void *arg)
{
	struct unlink_args *args = arg;
	struct ngnfs_inode *dir, *inode;
	struct ngnfs_dirent_info info;
	int ret;

	ret = ngnfs_inode_write_handle(txn, args->dir, "unlink", &dir);
	if (ret < 0)
		return ret;
	if (!is_dir(dir))
		return -ENOTDIR;
	ret = ngnfs_dir_lookup(txn, dir, args->name, args->name_length, &info);
	if (ret < 0)
		return ret;
	ret = ngnfs_inode_write(txn, info.ino, "unlink", &inode);
	if (ret < 0)
		return ret;
	if (is_dir(inode)) {
		if (inode->entry_count != 0)
			return -ENOTEMPTY;
		ret = ngnfs_dir_remove(txn, dir, info.key);
		if (ret < 0)
			return ret;
		add_nlink(dir, -1);
		ngnfs_inode_touch(dir, NGNFS_TOUCH_MTIME | NGNFS_TOUCH_CTIME);
		inode->nlink = 0;
		return drop_inode(txn, args->fs, inode);
	}
	ret = ngnfs_dir_remove(txn, dir, info.key);
	if (ret < 0)
		return ret;
	ngnfs_inode_touch(dir, NGNFS_TOUCH_MTIME | NGNFS_TOUCH_CTIME);
	add_nlink(inode, -1);
	ngnfs_inode_touch(inode, NGNFS_TOUCH_CTIME);
	if (le32toh(inode->nlink) == 0)
		return drop_inode(txn, args->fs, inode);
	return 0;
}

int ngnfs_unlink(struct ngnfs_fs *fs, const struct ngnfs_handle *dir, const char *name)
{
	struct unlink_args args = { .fs = fs, .dir = dir, .name = name };
	int ret;

	ngnfs_clear_error();
	ret = ngnfs_check_name(name, &args.name_length, "unlink");
	if (ret < 0)
		return ret;
	if (is_dot(name))
		return -EINVAL;
	if (is_dotdot(name))
		return -ENOTEMPTY;
	ret = ngnfs_txn_run(fs->cache, unlink_txn, &args);
	return ret;
}

/* ---- rename ---- */

struct rename_args {
	struct ngnfs_fs *fs;
	const struct ngnfs_handle *old_dir;
	const char *old_name;
	size_t old_length;
	const struct ngnfs_handle *new_dir;
	const char *new_name;
	size_t new_length;
};

/*
 * -EINVAL if moving ino under new_dir would put it inside itself.  Every
 * ancestor is read through the transaction (see the file comment).
 */
static int check_not_ancestor(struct ngnfs_txn *txn, struct ngnfs_fs *fs, uint64_t ino,
			      uint64_t new_dir)
{
	const struct ngnfs_inode *inode;
	uint64_t at = new_dir;
	unsigned int depth;
	int ret;

	for (depth = 0; depth < ANCESTOR_WALK_LIMIT; depth++) {
		if (at == ino)
			return -EINVAL;
		if (at == fs->root_ino)
			return 0;
		ret = ngnfs_inode_read(txn, at, "rename ancestor walk", &inode);
		if (ret < 0)
			return ret;
		if (!is_dir(inode))
			return ngnfs_fail(-EIO, "rename: ancestor inode %llu is not a directory",
					  (unsigned long long)at);
		at = le64toh(inode->parent_ino);
	}
	return ngnfs_fail(-ELOOP, "rename: more than %d ancestors above directory inode %llu",
			  ANCESTOR_WALK_LIMIT, (unsigned long long)new_dir);
}

static int rename_txn(struct ngnfs_txn *txn, void *arg)
{
	struct rename_args *args = arg;
	struct ngnfs_inode *old_dir, *new_dir, *source, *target = NULL;
	struct ngnfs_dirent_info old_info, new_info;
	bool same_dir = args->old_dir->ino == args->new_dir->ino;
	bool source_is_dir, target_exists;
	int ret;

	ret = ngnfs_inode_write_handle(txn, args->old_dir, "rename", &old_dir);
	if (ret < 0)
		return ret;
	if (!is_dir(old_dir))
		return -ENOTDIR;
	if (same_dir) {
		if (args->old_dir->generation != args->new_dir->generation)
			return -ESTALE;
		new_dir = old_dir;
	} else {
		ret = writable_dir(txn, args->new_dir, "rename", &new_dir);
		if (ret < 0)
			return ret;
	}

	ret = ngnfs_dir_lookup(txn, old_dir, args->old_name, args->old_length, &old_info);
	if (ret < 0)
		return ret;
	ret = ngnfs_dir_lookup(txn, new_dir, args->new_name, args->new_length, &new_info);
	if (ret < 0 && ret != -ENOENT)
		return ret;
	target_exists = ret == 0;
	/* the same file under both names (or the same name): nothing to do */
	if (target_exists && new_info.ino == old_info.ino)
		return 0;

	ret = ngnfs_inode_write(txn, old_info.ino, "rename", &source);
	if (ret < 0)
		return ret;
	source_is_dir = is_dir(source);
	if (source_is_dir && !same_dir) {
		ret = check_not_ancestor(txn, args->fs, old_info.ino, args->new_dir->ino);
		if (ret < 0)
			return ret;
	}

	if (target_exists) {
		ret = ngnfs_inode_write(txn, new_info.ino, "rename", &target);
		if (ret < 0)
			return ret;
		/* a target that contains the source cannot be empty (Linux checks it first) */
		if (is_dir(target)) {
			ret = check_not_ancestor(txn, args->fs, new_info.ino, args->old_dir->ino);
			if (ret == -EINVAL)
				return -ENOTEMPTY;
			if (ret < 0)
				return ret;
		}
		if (source_is_dir && !is_dir(target))
			return -ENOTDIR;
		if (!source_is_dir && is_dir(target))
			return -EISDIR;
		if (is_dir(target) && target->entry_count != 0)
			return -ENOTEMPTY;
	}

	ret = ngnfs_dir_remove(txn, old_dir, old_info.key);
	if (ret < 0)
		return ret;
	if (target) {
		ret = ngnfs_dir_replace(txn, new_dir, new_info.key, old_info.ino,
					le64toh(source->generation), le32toh(source->mode));
		if (ret < 0)
			return ret;
		if (is_dir(target)) {
			target->nlink = 0;
			add_nlink(new_dir, -1); /* the target's ".." */
		} else {
			add_nlink(target, -1);
		}
		ngnfs_inode_touch(target, NGNFS_TOUCH_CTIME);
		if (le32toh(target->nlink) == 0) {
			ret = drop_inode(txn, args->fs, target);
			if (ret < 0)
				return ret;
		}
	} else {
		ret = ngnfs_dir_add(txn, new_dir, args->new_name, args->new_length, old_info.ino,
				    le64toh(source->generation), le32toh(source->mode));
		if (ret < 0)
			return ret;
	}
	if (source_is_dir && !same_dir) {
		add_nlink(old_dir, -1);
		add_nlink(new_dir, 1);
		source->parent_ino = htole64(args->new_dir->ino);
	}
	ngnfs_inode_touch(source, NGNFS_TOUCH_CTIME);
	ngnfs_inode_touch(old_dir, NGNFS_TOUCH_MTIME | NGNFS_TOUCH_CTIME);
	if (!same_dir)
		ngnfs_inode_touch(new_dir, NGNFS_TOUCH_MTIME | NGNFS_TOUCH_CTIME);
	return 0;
}

int ngnfs_rename(struct ngnfs_fs *fs, const struct ngnfs_handle *old_dir, const char *old_name,
		 const struct ngnfs_handle *new_dir, const char *new_name)
{
	struct rename_args args = {
		.fs = fs,
		.old_dir = old_dir,
		.old_name = old_name,
		.new_dir = new_dir,
		.new_name = new_name,
	};
	int ret;

	ngnfs_clear_error();
	ret = ngnfs_check_name(old_name, &args.old_length, "rename");
	if (ret < 0)
		return ret;
	ret = ngnfs_check_name(new_name, &args.new_length, "rename");
	if (ret < 0)
		return ret;
	if (is_dot(old_name) || is_dotdot(old_name) || is_dot(new_name) || is_dotdot(new_name))
		return -EINVAL;
	ret = ngnfs_txn_run(fs->cache, rename_txn, &args);
	return ret;
}
