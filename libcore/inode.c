/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Inodes: one block each, the inode number being the block number.
 *
 * Finding an inode is therefore one block request, and the device an
 * inode lives on is in its number.  A new directory goes on a device
 * chosen by a hash of (parent, name), so that a tree spreads its metadata
 * traffic over every blockd and the choice needs no shared counter (two
 * gateways creating in the same directory agree on nothing and still
 * spread).  A directory's btree blocks go on the directory inode's device,
 * and every other new inode (file, symlink, special) on its parent
 * directory's device: a create then modifies blocks of one device only,
 * which blockd commits in one synced batch, where an inode on another
 * device would make every create a two-phase commit (STAGE, COMMIT,
 * RESOLVE: two or three syncs on the critical path of a stable create).
 * A file keeps its device when renamed or linked elsewhere.
 *
 * The generation of an inode is the epoch of the device session that
 * reserved its block and the version the block will have after the
 * creating write (the allocation's version plus one), format-block.h:
 * blockd keeps counting versions across free and reuse and never hands
 * out an epoch twice, so (ino, generation) names one file forever, also
 * when a create in memory was lost with its session, and a handle to a
 * deleted or lost file is refused with -ESTALE even when its block now
 * holds another inode.
 *
 * Every inode read is checked (header, inode number); a block named by a
 * client's handle that is no longer that inode is -ESTALE, a block named
 * by a directory entry or a pointer that is not the inode it should be is
 * corruption: -EIO with a log line.
 *
 * XXX:
 *  - atime is only changed by setattr (the filesystem behaves noatime).
 *  - Deleting a huge file frees all its blocks in one transaction.
 */

#include <endian.h>
#include <errno.h>
#include <string.h>
#include <fcntl.h> /* S_IF*; sys/stat.h clashes with format-msg.h over __le64 */
#include <xxhash.h>

#include "btree.h"
#include "data.h"
#include "fs-internal.h"

void ngnfs_block_header_init(void *block, uint32_t magic, uint64_t blkno, uint64_t owner_ino)
{
	struct ngnfs_block_header *header = block;

	header->magic = htole32(magic);
	header->format_version = htole32(NGNFS_FORMAT_VERSION);
	header->blkno = htole64(blkno);
	header->owner_ino = htole64(owner_ino);
	header->reserved = 0;
}

static const char *magic_name(uint32_t magic)
{
	switch (magic) {
	case NGNFS_MAGIC_SUPER:
		return "superblock";
	case NGNFS_MAGIC_INODE:
		return "inode";
	case NGNFS_MAGIC_BTREE:
		return "directory btree";
	case NGNFS_MAGIC_DATA_MAP:
		return "data map";
	case NGNFS_MAGIC_XATTR:
		return "xattr";
	case NGNFS_MAGIC_SYMLINK:
		return "symlink";
	default:
		return "unknown";
	}
}

int ngnfs_block_check(const void *block, uint32_t magic, uint64_t blkno, uint64_t owner_ino,
		      const char *op)
{
	const struct ngnfs_block_header *header = block;
	const char *why = NULL;

	if (le32toh(header->magic) != magic)
		why = "wrong magic";
	else if (le64toh(header->blkno) != blkno)
		why = "block number in the header differs";
	else if (owner_ino != 0 && le64toh(header->owner_ino) != owner_ino)
		why = "owner inode in the header differs";
	else if (le32toh(header->format_version) != NGNFS_FORMAT_VERSION)
		why = "unknown format version";
	if (!why)
		return 0;
	return ngnfs_fail(
	    -EIO,
	    "%s: %s block %llu (device %u, index %llu) of inode %llu: %s (magic %08x, "
	    "blkno %llu, owner %llu, format version %u)",
	    op, magic_name(magic), (unsigned long long)blkno, ngnfs_blkno_device(blkno),
	    (unsigned long long)ngnfs_blkno_index(blkno), (unsigned long long)owner_ino, why,
	    le32toh(header->magic), (unsigned long long)le64toh(header->blkno),
	    (unsigned long long)le64toh(header->owner_ino), le32toh(header->format_version));
}

static int inode_check(const struct ngnfs_inode *inode, uint64_t ino, const char *op)
{
	int ret;

	ret = ngnfs_block_check(inode, NGNFS_MAGIC_INODE, ino, ino, op);
	if (ret < 0)
		return ret;
	if (le64toh(inode->ino) != ino ||
	    le16toh(inode->inline_xattr_bytes) > NGNFS_INODE_INLINE_BYTES ||
	    le16toh(inode->symlink_length) > NGNFS_SYMLINK_INLINE_MAX)
		return ngnfs_fail(-EIO, "%s: inode block %llu (device %u) has inconsistent fields",
				  op, (unsigned long long)ino, ngnfs_blkno_device(ino));
	return 0;
}

static int ino_in_range(struct ngnfs_txn *txn, uint64_t ino)
{
	return ino != 0 && ngnfs_blkno_device(ino) < ngnfs_txn_device_count(txn) &&
	       ngnfs_blkno_index(ino) >= NGNFS_FIRST_ALLOC_INDEX;
}

int ngnfs_inode_read(struct ngnfs_txn *txn, uint64_t ino, const char *op,
		     const struct ngnfs_inode **inode)
{
	const void *data;
	int ret;

	if (!ino_in_range(txn, ino))
		return ngnfs_fail(-EIO, "%s: inode number %llu is out of range", op,
				  (unsigned long long)ino);
	ret = ngnfs_txn_read(txn, ino, &data);
	if (ret == -ENXIO)
		return ngnfs_fail(-EIO, "%s: inode number %llu lies beyond its device's capacity",
				  op, (unsigned long long)ino);
	if (ret < 0)
		return ret;
	ret = inode_check(data, ino, op);
	if (ret < 0)
		return ret;
	*inode = data;
	return 0;
}

int ngnfs_inode_write(struct ngnfs_txn *txn, uint64_t ino, const char *op,
		      struct ngnfs_inode **inode)
{
	void *data;
	int ret;

	if (!ino_in_range(txn, ino))
		return ngnfs_fail(-EIO, "%s: inode number %llu is out of range", op,
				  (unsigned long long)ino);
	ret = ngnfs_txn_write(txn, ino, &data);
	if (ret == -ENXIO)
		return ngnfs_fail(-EIO, "%s: inode number %llu lies beyond its device's capacity",
				  op, (unsigned long long)ino);
	if (ret < 0)
		return ret;
	ret = inode_check(data, ino, op);
	if (ret < 0)
		return ret;
	*inode = data;
	return 0;
}

/* Is this block still the inode the handle names? */
static int handle_check(const struct ngnfs_inode *inode, const struct ngnfs_handle *handle,
			const char *op)
{
	if (le32toh(inode->header.magic) != NGNFS_MAGIC_INODE ||
	    le64toh(inode->header.blkno) != handle->ino ||
	    le64toh(inode->header.owner_ino) != handle->ino ||
	    le64toh(inode->generation) != handle->generation ||
	    (le32toh(inode->nlink) == 0 && !(le32toh(inode->flags) & NGNFS_INODE_ORPHAN)))
		return ngnfs_fail_quiet(-ESTALE, "%s: inode %llu generation %llu no longer exists",
					op, (unsigned long long)handle->ino,
					(unsigned long long)handle->generation);
	return inode_check(inode, handle->ino, op);
}

/* A handle's block its device does not have (-ENXIO) names no inode: stale. */
static int handle_read_error(int ret, const struct ngnfs_handle *handle, const char *op)
{
	if (ret == -ENXIO)
		return ngnfs_fail_quiet(-ESTALE,
					"%s: handle names inode %llu, beyond its device's capacity",
					op, (unsigned long long)handle->ino);
	return ret;
}

int ngnfs_inode_read_handle(struct ngnfs_txn *txn, const struct ngnfs_handle *handle,
			    const char *op, const struct ngnfs_inode **inode)
{
	const void *data;
	int ret;

	if (!ino_in_range(txn, handle->ino))
		return ngnfs_fail_quiet(-ESTALE, "%s: handle names inode %llu, out of range", op,
					(unsigned long long)handle->ino);
	ret = ngnfs_txn_read(txn, handle->ino, &data);
	if (ret < 0)
		return handle_read_error(ret, handle, op);
	ret = handle_check(data, handle, op);
	if (ret < 0)
		return ret;
	*inode = data;
	return 0;
}

int ngnfs_inode_write_handle(struct ngnfs_txn *txn, const struct ngnfs_handle *handle,
			     const char *op, struct ngnfs_inode **inode)
{
	void *data;
	int ret;

	if (!ino_in_range(txn, handle->ino))
		return ngnfs_fail_quiet(-ESTALE, "%s: handle names inode %llu, out of range", op,
					(unsigned long long)handle->ino);
	ret = ngnfs_txn_write(txn, handle->ino, &data);
	if (ret < 0)
		return handle_read_error(ret, handle, op);
	ret = handle_check(data, handle, op);
	if (ret < 0)
		return ret;
	*inode = data;
	return 0;
}

void ngnfs_now(struct timespec *now)
{
	clock_gettime(CLOCK_REALTIME, now);
}

void ngnfs_inode_touch(struct ngnfs_inode *inode, unsigned int what)
{
	struct timespec now;

	ngnfs_now(&now);
	if (what & NGNFS_TOUCH_ATIME)
		ngnfs_timespec_to_le(&now, &inode->atime_sec, &inode->atime_nsec);
	if (what & NGNFS_TOUCH_MTIME)
		ngnfs_timespec_to_le(&now, &inode->mtime_sec, &inode->mtime_nsec);
	if (what & NGNFS_TOUCH_CTIME)
		ngnfs_timespec_to_le(&now, &inode->ctime_sec, &inode->ctime_nsec);
	inode->change = htole64(le64toh(inode->change) + 1);
}

uint16_t ngnfs_inode_device_for(struct ngnfs_txn *txn, uint64_t parent_ino, uint32_t type,
				const char *name, size_t name_length)
{
	uint16_t count = ngnfs_txn_device_count(txn);

	if (count <= 1)
		return 0;
	if (type != S_IFDIR)
		return ngnfs_blkno_device(parent_ino);
	return (uint16_t)(XXH3_64bits_withSeed(name, name_length, parent_ino) % count);
}

int ngnfs_alloc_block(struct ngnfs_txn *txn, uint16_t device, const char *op, uint64_t *blkno,
		      uint64_t *version, void **data)
{
	uint64_t ignored;
	int ret;

	ret = ngnfs_txn_alloc(txn, device, blkno, version ? version : &ignored, data);
	if (ret < 0)
		return ret;
	/* another device when this one is full (cache.c): any of the filesystem's */
	if (ngnfs_blkno_index(*blkno) < NGNFS_FIRST_ALLOC_INDEX ||
	    ngnfs_blkno_device(*blkno) >= ngnfs_txn_device_count(txn))
		return ngnfs_fail(-EIO,
				  "%s: allocating on device %u gave block %llu (device %u, index "
				  "%llu), which is not an allocatable block",
				  op, device, (unsigned long long)*blkno,
				  ngnfs_blkno_device(*blkno),
				  (unsigned long long)ngnfs_blkno_index(*blkno));
	return 0;
}

int ngnfs_inode_alloc(struct ngnfs_txn *txn, uint16_t device, uint32_t mode, uint32_t uid,
		      uint32_t gid, uint64_t rdev, uint64_t parent_ino,
		      struct ngnfs_inode **inode_out)
{
	struct ngnfs_inode *inode;
	struct timespec now;
	uint64_t blkno, version;
	void *data;
	int ret;

	ret = ngnfs_alloc_block(txn, device, "allocate inode", &blkno, &version, &data);
	if (ret < 0)
		return ret;
	/* ngnfs_txn_alloc zeroed it */
	inode = data;
	ngnfs_block_header_init(inode, NGNFS_MAGIC_INODE, blkno, blkno);
	inode->ino = htole64(blkno);
	inode->generation =
	    htole64(ngnfs_inode_generation(ngnfs_txn_session_epoch(txn, blkno), version + 1));
	inode->mode = htole32(mode);
	inode->uid = htole32(uid);
	inode->gid = htole32(gid);
	inode->rdev = htole64(rdev);
	inode->parent_ino = htole64(parent_ino);
	inode->change = htole64(1);
	ngnfs_now(&now);
	ngnfs_timespec_to_le(&now, &inode->atime_sec, &inode->atime_nsec);
	ngnfs_timespec_to_le(&now, &inode->mtime_sec, &inode->mtime_nsec);
	ngnfs_timespec_to_le(&now, &inode->ctime_sec, &inode->ctime_nsec);
	ngnfs_timespec_to_le(&now, &inode->crtime_sec, &inode->crtime_nsec);
	*inode_out = inode;
	return 0;
}

int ngnfs_inode_free(struct ngnfs_txn *txn, struct ngnfs_inode *inode)
{
	uint32_t type = ngnfs_mode_type(le32toh(inode->mode));
	uint64_t ino = le64toh(inode->ino);
	void *data;
	int ret;

	if (type == S_IFREG &&
	    (inode->size != 0 || inode->data_root != 0 || inode->data_blocks != 0)) {
		ret = ngnfs_data_free_all(txn, inode);
		if (ret < 0)
			return ret;
	} else if (type == S_IFDIR && inode->data_root != 0) {
		ret = ngnfs_dir_free_blocks(txn, inode);
		if (ret < 0)
			return ret;
	} else if (type == S_IFLNK && inode->data_root != 0) {
		uint64_t target = le64toh(inode->data_root);

		ret = ngnfs_txn_write(txn, target, &data);
		if (ret < 0)
			return ret;
		ret = ngnfs_block_check(data, NGNFS_MAGIC_SYMLINK, target, ino, "free symlink");
		if (ret < 0)
			return ret;
		memset(data, 0, NGNFS_BLOCK_SIZE);
		ret = ngnfs_txn_free(txn, target);
		if (ret < 0)
			return ret;
	}
	if (inode->xattr_root != 0) {
		ret = ngnfs_xattr_free_all(txn, inode);
		if (ret < 0)
			return ret;
	}
	/*
	 * Zeroed and freed in this transaction.  blockd does not store the
	 * zeros (a WRITE that frees a block does not rewrite it), but it
	 * answers every GET of a free block with zeros, never "unchanged"
	 * (docs/protocol.md, "Allocation"), so a stale handle, here or on
	 * another client holding the old copy, finds no inode there.
	 */
	memset(inode, 0, NGNFS_BLOCK_SIZE);
	return ngnfs_txn_free(txn, ino);
}

void ngnfs_inode_to_attr(const struct ngnfs_inode *inode, struct ngnfs_attr *attr)
{
	memset(attr, 0, sizeof(*attr));
	attr->ino = le64toh(inode->ino);
	attr->generation = le64toh(inode->generation);
	attr->mode = le32toh(inode->mode);
	attr->nlink = le32toh(inode->nlink);
	attr->uid = le32toh(inode->uid);
	attr->gid = le32toh(inode->gid);
	attr->size = le64toh(inode->size);
	attr->blocks = le64toh(inode->data_blocks) * (NGNFS_BLOCK_SIZE / 512);
	attr->rdev = le64toh(inode->rdev);
	attr->change = le64toh(inode->change);
	attr->atime.tv_sec = (time_t)le64toh(inode->atime_sec);
	attr->atime.tv_nsec = le32toh(inode->atime_nsec);
	attr->mtime.tv_sec = (time_t)le64toh(inode->mtime_sec);
	attr->mtime.tv_nsec = le32toh(inode->mtime_nsec);
	attr->ctime.tv_sec = (time_t)le64toh(inode->ctime_sec);
	attr->ctime.tv_nsec = le32toh(inode->ctime_nsec);
	attr->crtime.tv_sec = (time_t)le64toh(inode->crtime_sec);
	attr->crtime.tv_nsec = le32toh(inode->crtime_nsec);
}

struct getattr_args {
	const struct ngnfs_handle *handle;
	struct ngnfs_attr *attr;
};

static int getattr_txn(struct ngnfs_txn *txn, void *arg)
{
	struct getattr_args *args = arg;
	const struct ngnfs_inode *inode;
	int ret;

	ret = ngnfs_inode_read_handle(txn, args->handle, "getattr", &inode);
	if (ret < 0)
		return ret;
	ngnfs_inode_to_attr(inode, args->attr);
	return 0;
}

int ngnfs_getattr(struct ngnfs_fs *fs, const struct ngnfs_handle *handle, struct ngnfs_attr *attr)
{
	struct getattr_args args = { handle, attr };

	ngnfs_clear_error();
	return ngnfs_txn_run(fs->cache, getattr_txn, &args);
}

struct setattr_args {
	const struct ngnfs_handle *handle;
	const struct ngnfs_setattr *set;
	struct ngnfs_attr attr;
};

static int setattr_txn(struct ngnfs_txn *txn, void *arg)
{
	struct setattr_args *args = arg;
	const struct ngnfs_setattr *set = args->set;
	struct ngnfs_inode *inode;
	struct timespec now;
	uint32_t type;
	int ret;

	ret = ngnfs_inode_write_handle(txn, args->handle, "setattr", &inode);
	if (ret < 0)
		return ret;
	type = ngnfs_mode_type(le32toh(inode->mode));
	ngnfs_now(&now);

	if (set->mask & NGNFS_SET_SIZE) {
		if (type == S_IFDIR)
			return -EISDIR;
		if (type != S_IFREG)
			return -EINVAL;
		if (set->size != le64toh(inode->size)) {
			ret = ngnfs_data_truncate(txn, inode, set->size);
			if (ret < 0)
				return ret;
		}
		/* like open(O_TRUNC) and ftruncate: mtime and ctime change */
		ngnfs_timespec_to_le(&now, &inode->mtime_sec, &inode->mtime_nsec);
	}
	if (set->mask & NGNFS_SET_MODE)
		inode->mode = htole32(type | (set->mode & 07777));
	if (set->mask & NGNFS_SET_UID)
		inode->uid = htole32(set->uid);
	if (set->mask & NGNFS_SET_GID)
		inode->gid = htole32(set->gid);
	if (set->mask & NGNFS_SET_ATIME_NOW)
		ngnfs_timespec_to_le(&now, &inode->atime_sec, &inode->atime_nsec);
	else if (set->mask & NGNFS_SET_ATIME)
		ngnfs_timespec_to_le(&set->atime, &inode->atime_sec, &inode->atime_nsec);
	if (set->mask & NGNFS_SET_MTIME_NOW)
		ngnfs_timespec_to_le(&now, &inode->mtime_sec, &inode->mtime_nsec);
	else if (set->mask & NGNFS_SET_MTIME)
		ngnfs_timespec_to_le(&set->mtime, &inode->mtime_sec, &inode->mtime_nsec);
	/* every attribute change changes ctime, unless the caller sets it */
	if (set->mask & NGNFS_SET_CTIME)
		ngnfs_timespec_to_le(&set->ctime, &inode->ctime_sec, &inode->ctime_nsec);
	else
		ngnfs_timespec_to_le(&now, &inode->ctime_sec, &inode->ctime_nsec);
	inode->change = htole64(le64toh(inode->change) + 1);
	ngnfs_inode_to_attr(inode, &args->attr);
	return 0;
}

int ngnfs_setattr(struct ngnfs_fs *fs, const struct ngnfs_handle *handle,
		  const struct ngnfs_setattr *set, struct ngnfs_attr *attr_out)
{
	struct setattr_args args = { .handle = handle, .set = set };
	int ret;

	ngnfs_clear_error();
	if (set->mask & NGNFS_SET_SIZE) {
		/* free most blocks in bounded transactions first: ours then frees little */
		ret = ngnfs_data_shrink(fs->cache, handle, set->size);
		if (ret < 0 && ret != -EISDIR && ret != -EINVAL)
			return ret;
	}
	if ((set->mask & NGNFS_SET_ATIME && !(set->mask & NGNFS_SET_ATIME_NOW) &&
	     (set->atime.tv_nsec < 0 || set->atime.tv_nsec >= 1000000000)) ||
	    (set->mask & NGNFS_SET_MTIME && !(set->mask & NGNFS_SET_MTIME_NOW) &&
	     (set->mtime.tv_nsec < 0 || set->mtime.tv_nsec >= 1000000000)))
		return -EINVAL;
	ret = ngnfs_txn_run(fs->cache, setattr_txn, &args);
	if (ret == 0 && attr_out)
		*attr_out = args.attr;
	return ret;
}
