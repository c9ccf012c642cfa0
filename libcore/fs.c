/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The glue of the native API: error messages, handles on the wire, the
 * open-file table, sync (of everything, or of one inode), and
 * invalidation up-calls.
 *
 * ngnfs_sync_inode (fsync, NFS COMMIT) writes only the dirty set that
 * holds the inode's block.  That is enough because every change to an
 * object writes its inode block, so all of the object's changes since
 * its last write-back are in that one set (a change made while the set is
 * being written goes to a newer set, written only after it, and lost with
 * it if that write fails: cache.c, dirty.c); and because a transaction
 * merges the sets of everything it wrote or read, the set also holds what
 * the changes depend on (the create's directory entry, the directory's
 * own creation) unless that is already durable.  A failed write is
 * reported to the next sync of each inode that was in the lost set.
 *
 * Errors are negative errnos; the words that say which object and which
 * operation failed go into a thread-local buffer (ngnfs_last_error), so a
 * caller on any thread can log them without the API growing an error
 * argument everywhere.  Unexpected failures (corruption, network) are also
 * logged to stderr at once, because a gateway may not ask.
 *
 * Invalidation: the cache tells us which block another client changed;
 * every block header names its owning inode, so the up-call can name the
 * object without any map from blocks to inodes.  The generation is only
 * known when the block is the inode itself; otherwise the handle carries
 * generation 0, meaning "whatever generation you have".
 *
 * XXX:
 *  - The open-file table is per client (see fs-internal.h).
 */

#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fs-internal.h"

static __thread char last_error[512];

static void set_error(bool log, const char *fmt, va_list args)
{
	vsnprintf(last_error, sizeof(last_error), fmt, args);
	if (log)
		fprintf(stderr, "ngnfs: %s\n", last_error);
}

int ngnfs_fail(int err, const char *fmt, ...)
{
	va_list args;

	if (err == -EAGAIN)
		return err;
	va_start(args, fmt);
	set_error(true, fmt, args);
	va_end(args);
	return err;
}

int ngnfs_fail_quiet(int err, const char *fmt, ...)
{
	va_list args;

	if (err == -EAGAIN)
		return err;
	va_start(args, fmt);
	set_error(false, fmt, args);
	va_end(args);
	return err;
}

void ngnfs_clear_error(void)
{
	last_error[0] = '\0';
}

const char *ngnfs_last_error(void)
{
	return last_error[0] ? last_error : "no error recorded";
}

void ngnfs_handle_to_wire(const struct ngnfs_handle *handle, uint8_t wire[NGNFS_HANDLE_WIRE_SIZE])
{
	uint64_t ino = htole64(handle->ino);
	uint64_t generation = htole64(handle->generation);

	memcpy(wire, &ino, sizeof(ino));
	memcpy(wire + 8, &generation, sizeof(generation));
}

void ngnfs_handle_from_wire(const uint8_t wire[NGNFS_HANDLE_WIRE_SIZE], struct ngnfs_handle *handle)
{
	uint64_t ino, generation;

	memcpy(&ino, wire, sizeof(ino));
	memcpy(&generation, wire + 8, sizeof(generation));
	handle->ino = le64toh(ino);
	handle->generation = le64toh(generation);
}

/* ---- invalidation ---- */

/*
 * An unguarded block (evicted, or its session lost) matters only if it is
 * an inode: every change to an object writes its inode block, so while we
 * hold that grant, we hear of every change; a directory leaf or data block
 * leaving the cache changes nothing for the gateway.  Passing those on
 * would empty MDCACHE's listing of a large directory whenever one of its
 * leaves is evicted.
 */
static uint64_t cache_invalidated(void *arg, uint64_t blkno, const void *data,
				  enum ngnfs_cache_invalidation why)
{
	struct ngnfs_fs *fs = arg;
	const struct ngnfs_block_header *header = data;
	struct ngnfs_handle handle = { 0, 0 };
	ngnfs_invalidate_fn fn = __atomic_load_n(&fs->invalidate, __ATOMIC_ACQUIRE);
	uint32_t magic;

	if (!fn || !data)
		return 0;
	magic = le32toh(header->magic);
	handle.ino = le64toh(header->owner_ino);
	if (handle.ino == 0)
		return 0;
	if (why == NGNFS_CACHE_UNGUARDED && (magic != NGNFS_MAGIC_INODE || handle.ino != blkno))
		return 0;
	if (magic == NGNFS_MAGIC_INODE && handle.ino == blkno)
		handle.generation = le64toh(((const struct ngnfs_inode *)data)->generation);
	return fn(fs->invalidate_arg, &handle,
		  magic == NGNFS_MAGIC_BTREE || magic == NGNFS_MAGIC_INODE);
}

/*
 * A set that failed to write: remember the inodes among its blocks.  Every
 * change to an object writes its inode block (times, change attribute),
 * so the inode is in every set that held the object's changes; data
 * blocks carry no header and are recognised by nothing here.
 */
static void cache_lost(void *arg, uint64_t blkno, const void *data, int error)
{
	struct ngnfs_fs *fs = arg;
	const struct ngnfs_block_header *header = data;
	uint32_t i;

	/* first, so that a verifier read after the loss is already another one */
	__atomic_add_fetch(&fs->write_losses, 1, __ATOMIC_SEQ_CST);
	if (le32toh(header->magic) != NGNFS_MAGIC_INODE || le64toh(header->blkno) != blkno)
		return;
	pthread_mutex_lock(&fs->open_lock);
	for (i = 0; i < fs->lost_count; i++)
		if (fs->lost_inos[i] == blkno)
			break;
	if (i < fs->lost_count) {
		/* already recorded, keep the first error */
	} else if (fs->lost_count < NGNFS_LOST_INODES) {
		fs->lost_inos[fs->lost_count] = blkno;
		fs->lost_errors[fs->lost_count] = error;
		fs->lost_count++;
	} else if (!fs->lost_overflow) {
		fs->lost_overflow = error;
	}
	pthread_mutex_unlock(&fs->open_lock);
}

/* Remove ino's record and return its error, or 0; under open_lock. */
static int remove_lost(struct ngnfs_fs *fs, uint64_t ino)
{
	int error;
	uint32_t i;

	for (i = 0; i < fs->lost_count; i++) {
		if (fs->lost_inos[i] != ino)
			continue;
		error = fs->lost_errors[i];
		fs->lost_count--;
		fs->lost_inos[i] = fs->lost_inos[fs->lost_count];
		fs->lost_errors[i] = fs->lost_errors[fs->lost_count];
		return error;
	}
	return 0;
}

/* The write-back failure of ino's changes not yet reported, or 0; clears it. */
static int take_lost(struct ngnfs_fs *fs, uint64_t ino)
{
	int error;

	pthread_mutex_lock(&fs->open_lock);
	error = remove_lost(fs, ino);
	if (!error && fs->lost_overflow) {
		/*
		 * Losses went unrecorded: this inode may be one of them.  Told
		 * once, as ngnfs_sync tells a loss once.
		 */
		error = fs->lost_overflow;
		fs->lost_overflow = 0;
	}
	pthread_mutex_unlock(&fs->open_lock);
	return error;
}

/*
 * The allocator handed ino out for a new inode, so the file it named
 * before is gone (unlinked, or its create was lost with its session and
 * the reservation went back to the device): its unreported loss must not
 * fail the new file's first sync.  Records are by block number: the new
 * file's generation differs from the lost one's (another session's
 * epoch, format-block.h), so a record kept by generation would never be
 * found again, and nothing would forget it.
 */
void ngnfs_fs_forget_lost(struct ngnfs_fs *fs, uint64_t ino)
{
	pthread_mutex_lock(&fs->open_lock);
	remove_lost(fs, ino);
	pthread_mutex_unlock(&fs->open_lock);
}

uint64_t ngnfs_write_losses(struct ngnfs_fs *fs)
{
	return __atomic_load_n(&fs->write_losses, __ATOMIC_SEQ_CST);
}

void ngnfs_fs_install_invalidate(struct ngnfs_fs *fs)
{
	ngnfs_cache_set_invalidate(fs->cache, cache_invalidated, fs);
	ngnfs_cache_set_lost(fs->cache, cache_lost, fs);
}

void ngnfs_set_invalidate(struct ngnfs_fs *fs, ngnfs_invalidate_fn fn, void *arg)
{
	fs->invalidate_arg = arg;
	__atomic_store_n(&fs->invalidate, fn, __ATOMIC_RELEASE);
}

void ngnfs_invalidations_delivered(struct ngnfs_fs *fs, uint64_t ticket)
{
	ngnfs_cache_invalidations_delivered(fs->cache, ticket);
}

/* ---- open files ---- */

static unsigned int open_bucket(uint64_t ino)
{
	return (unsigned int)((ino * 0x9e3779b97f4a7c15ULL) >> 56) % NGNFS_OPEN_BUCKETS;
}

bool ngnfs_fs_is_open(struct ngnfs_fs *fs, uint64_t ino)
{
	struct ngnfs_open_file *open;
	bool found = false;

	pthread_mutex_lock(&fs->open_lock);
	for (open = fs->open_files[open_bucket(ino)]; open; open = open->next) {
		if (open->ino == ino && open->open_count > 0) {
			found = true;
			break;
		}
	}
	pthread_mutex_unlock(&fs->open_lock);
	return found;
}

/* Returns the open count after the change; -ENOENT closing what is not open. */
static int open_count_add(struct ngnfs_fs *fs, const struct ngnfs_handle *handle, int delta)
{
	struct ngnfs_open_file **link, *open;
	unsigned int bucket = open_bucket(handle->ino);
	int count = -ENOENT;

	pthread_mutex_lock(&fs->open_lock);
	for (link = &fs->open_files[bucket]; (open = *link); link = &open->next)
		if (open->ino == handle->ino && open->generation == handle->generation)
			break;
	if (!open && delta > 0) {
		open = calloc(1, sizeof(*open));
		if (!open) {
			pthread_mutex_unlock(&fs->open_lock);
			return -ENOMEM;
		}
		open->ino = handle->ino;
		open->generation = handle->generation;
		open->next = fs->open_files[bucket];
		fs->open_files[bucket] = open;
		link = &fs->open_files[bucket];
	}
	if (open) {
		open->open_count += delta;
		count = (int)open->open_count;
		if (open->open_count == 0) {
			for (link = &fs->open_files[bucket]; *link != open; link = &(*link)->next)
				;
			*link = open->next;
			free(open);
		}
	}
	pthread_mutex_unlock(&fs->open_lock);
	return count;
}

int ngnfs_open(struct ngnfs_fs *fs, const struct ngnfs_handle *handle)
{
	struct ngnfs_attr attr;
	int ret;

	ngnfs_clear_error();
	/* count first, so that an unlink committing after our check sees us */
	ret = open_count_add(fs, handle, 1);
	if (ret < 0)
		return ret;
	ret = ngnfs_getattr(fs, handle, &attr);
	if (ret < 0) {
		open_count_add(fs, handle, -1);
		return ret;
	}
	return 0;
}

int ngnfs_open_created(struct ngnfs_fs *fs, const struct ngnfs_handle *handle)
{
	int ret;

	ngnfs_clear_error();
	ret = open_count_add(fs, handle, 1);
	return ret < 0 ? ret : 0;
}

int ngnfs_close(struct ngnfs_fs *fs, const struct ngnfs_handle *handle)
{
	int count;

	ngnfs_clear_error();
	count = open_count_add(fs, handle, -1);
	if (count < 0)
		return ngnfs_fail_quiet(-EBADF, "close: inode %llu is not open",
					(unsigned long long)handle->ino);
	if (count > 0)
		return 0;
	return ngnfs_namei_reclaim_orphan(fs, handle);
}

int ngnfs_sync(struct ngnfs_fs *fs)
{
	int ret, lost;

	ngnfs_clear_error();
	ret = ngnfs_cache_sync(fs->cache);
	lost = ngnfs_cache_take_error(fs->cache);
	if (ret == 0 && lost < 0)
		ret = lost;
	if (ret < 0)
		return ngnfs_fail(ret, "sync: write-back failed: %s", strerror(-ret));
	return 0;
}

int ngnfs_sync_inode(struct ngnfs_fs *fs, const struct ngnfs_handle *handle)
{
	int ret, lost;

	ngnfs_clear_error();
	ret = ngnfs_cache_sync_block(fs->cache, handle->ino);
	lost = take_lost(fs, handle->ino);
	if (ret == 0 && lost < 0)
		ret = lost;
	if (ret < 0)
		return ngnfs_fail(ret, "sync of inode %llu: write-back failed: %s",
				  (unsigned long long)handle->ino, strerror(-ret));
	return 0;
}
