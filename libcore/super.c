/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * mkfs, mount, unmount and statfs: the superblock and the devices.
 *
 * mkfs first gives every device its identity (FORMAT: fs id, index,
 * count) over a session opened for formatting, and refuses to touch
 * anything if one device is already formatted, so that a typo in a device
 * list cannot destroy another filesystem.  Only then does it open a normal
 * cache on the new filesystem and write the superblock, the root directory
 * and the orphan directory in one transaction: either the filesystem is
 * complete or mount refuses it (no superblock).
 *
 * mount lets the network client learn the fs id (every device must agree
 * and sit at the index it is listed at), then checks the superblock
 * against it: fs id, format version, block size and device count.
 *
 * add-devices grows the device count: block numbers carry their device
 * index, so nothing on the old devices is rewritten; the new devices get
 * their identity and fixed blocks, and the superblock its new count, the
 * one change mount checks.
 *
 * XXX:
 *  - Orphans left by a crashed client are not reclaimed at mount (another
 *    client may still have them open); fsck reports them.
 */

#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <sys/random.h>
#include <fcntl.h> /* S_IF*; sys/stat.h clashes with format-msg.h over __le64 */

#include "fs-internal.h"

/* Blocks reserved per ALLOC by a mount: the most one ALLOC may ask for. */
#define NGNFS_MOUNT_ALLOC_BATCH NGNFS_MSG_MAX_BLOCKS

static void mkfs_progress(const struct ngnfs_mkfs_options *options, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void mkfs_progress(const struct ngnfs_mkfs_options *options, const char *fmt, ...)
{
	char line[256];
	va_list args;

	if (!options->progress)
		return;
	va_start(args, fmt);
	vsnprintf(line, sizeof(line), fmt, args);
	va_end(args);
	options->progress(options->progress_arg, line);
}

static void mkfs_revoke(void *owner, uint64_t blkno, uint8_t access)
{
	(void)owner;
	(void)blkno;
	(void)access;
}

static void mkfs_session_reset(void *owner, uint16_t device, bool server_restarted)
{
	(void)owner;
	(void)device;
	(void)server_restarted;
}

static const struct ngnfs_client_ops mkfs_client_ops = {
	.revoke = mkfs_revoke,
	.session_reset = mkfs_session_reset,
};

struct mkfs_args {
	const uint8_t *fs_id;
	uint16_t device_count;
	uint64_t root_ino;
};

static int init_dir_inode(struct ngnfs_txn *txn, uint64_t parent_self, uint32_t mode, uint64_t *ino)
{
	struct ngnfs_inode *inode;
	int ret;

	ret = ngnfs_inode_alloc(txn, 0, S_IFDIR | mode, 0, 0, 0, parent_self, &inode);
	if (ret < 0)
		return ret;
	inode->nlink = htole32(2);
	*ino = le64toh(inode->ino);
	if (parent_self == 0)
		inode->parent_ino = inode->ino; /* the root is its own ".." */
	return 0;
}

/*
 * The fixed-location blocks (indexes below NGNFS_FIRST_ALLOC_INDEX) of
 * devices [first, end), zeroed: the servers then count them as in use
 * from the start, and none of them can ever be handed out by ALLOC.  The
 * superblock is one of device 0's; the caller fills it in afterwards.
 */
static int write_fixed_blocks(struct ngnfs_txn *txn, uint16_t first, uint16_t end)
{
	void *data;
	int ret;

	for (uint16_t device = first; device < end; device++) {
		for (uint64_t index = 0; index < NGNFS_FIRST_ALLOC_INDEX; index++) {
			ret = ngnfs_txn_write(txn, ngnfs_blkno_make(device, index), &data);
			if (ret < 0)
				return ret;
			memset(data, 0, NGNFS_BLOCK_SIZE);
		}
	}
	return 0;
}

static int mkfs_txn(struct ngnfs_txn *txn, void *arg)
{
	struct mkfs_args *args = arg;
	uint64_t super_blkno = ngnfs_blkno_make(0, NGNFS_SUPER_INDEX);
	struct ngnfs_super *super;
	struct timespec now;
	uint64_t root, orphans;
	void *data;
	int ret;

	ret = write_fixed_blocks(txn, 0, args->device_count);
	if (ret < 0)
		return ret;
	ret = ngnfs_txn_write(txn, super_blkno, &data);
	if (ret < 0)
		return ret;
	ret = init_dir_inode(txn, 0, 0755, &root);
	if (ret < 0)
		return ret;
	ret = init_dir_inode(txn, root, 0700, &orphans);
	if (ret < 0)
		return ret;
	ngnfs_now(&now);
	super = data;
	memset(super, 0, NGNFS_BLOCK_SIZE);
	ngnfs_block_header_init(super, NGNFS_MAGIC_SUPER, super_blkno, 0);
	memcpy(super->fs_id, args->fs_id, NGNFS_FS_ID_SIZE);
	super->root_ino = htole64(root);
	super->orphan_dir_ino = htole64(orphans);
	super->created_sec = htole64((uint64_t)now.tv_sec);
	super->device_count = htole32(args->device_count);
	super->block_size = htole32(NGNFS_BLOCK_SIZE);
	args->root_ino = root;
	return 0;
}

static void client_config_init(struct ngnfs_client_config *config, const char *const *addresses,
			       uint16_t count)
{
	memset(config, 0, sizeof(*config));
	config->device_addresses = addresses;
	config->device_count = count;
}

/*
 * fn in one stable transaction on a cache of its own over the formatted
 * devices, synced before it returns: how mkfs and add-devices write the
 * superblock.  Failures are reported as "op: ..." with what was written.
 */
static int write_on_devices(const char *const *addresses, uint16_t count, const uint8_t *fs_id,
			    ngnfs_txn_fn fn, void *arg, const char *op, const char *what)
{
	struct ngnfs_client_config client_config;
	struct ngnfs_cache_config cache_config = { .durability = NGNFS_DURABILITY_STABLE };
	struct ngnfs_cache *cache;
	int ret;

	client_config_init(&client_config, addresses, count);
	memcpy(client_config.fs_id, fs_id, NGNFS_FS_ID_SIZE);
	ret = ngnfs_cache_create_with_client(&client_config, &cache_config, &cache);
	if (ret < 0)
		return ngnfs_fail(ret, "%s: cannot open the filesystem on %u devices (%s)", op,
				  count, strerror(-ret));
	ret = ngnfs_txn_run(cache, fn, arg);
	if (ret == 0)
		ret = ngnfs_cache_sync(cache);
	ngnfs_cache_destroy(cache);
	if (ret < 0)
		return ngnfs_fail(ret, "%s: writing %s failed: %s", op, what, strerror(-ret));
	return 0;
}

int ngnfs_mkfs(const struct ngnfs_mkfs_options *options, uint8_t fs_id_out[16])
{
	struct ngnfs_client_config client_config;
	struct ngnfs_client *client;
	struct mkfs_args args;
	uint8_t fs_id[NGNFS_FS_ID_SIZE];
	struct ngnfs_msg info;
	uint16_t device;
	int ret;

	ngnfs_clear_error();
	if (options->device_count == 0 || !options->device_addresses)
		return ngnfs_fail(-EINVAL, "mkfs: no devices given");
	if (getrandom(fs_id, sizeof(fs_id), 0) != sizeof(fs_id))
		return ngnfs_fail(-errno, "mkfs: getrandom for the fs id failed");

	client_config_init(&client_config, options->device_addresses, options->device_count);
	client_config.hello_flags = NGNFS_HELLO_FORMAT;
	mkfs_progress(options, "connecting to %u devices", options->device_count);
	ret = ngnfs_client_create(&client_config, &mkfs_client_ops, NULL, &client);
	if (ret < 0)
		return ngnfs_fail(ret, "mkfs: cannot connect to the devices (%s)", strerror(-ret));
	for (device = 0; device < options->device_count; device++) {
		ret = ngnfs_client_device_info(client, device, &info);
		if (ret < 0) {
			ngnfs_fail(ret, "mkfs: device %u (%s): no session (%s)", device,
				   options->device_addresses[device], strerror(-ret));
			goto out_client;
		}
		if (info.hello_reply.flags & NGNFS_HELLO_REPLY_FORMATTED) {
			ret = ngnfs_fail(-EEXIST, "mkfs: device %u (%s) is already formatted",
					 device, options->device_addresses[device]);
			goto out_client;
		}
	}
	for (device = 0; device < options->device_count; device++) {
		mkfs_progress(options, "formatting device %u of %u (%s)", device + 1,
			      options->device_count, options->device_addresses[device]);
		ret = ngnfs_client_format_sync(client, device, fs_id, options->device_count);
		if (ret < 0) {
			ngnfs_fail(ret, "mkfs: FORMAT of device %u (%s) failed: %s", device,
				   options->device_addresses[device], strerror(-ret));
			goto out_client;
		}
	}
	ngnfs_client_destroy(client);

	mkfs_progress(options, "writing the superblock and the root directory");
	args.fs_id = fs_id;
	args.device_count = options->device_count;
	ret = write_on_devices(options->device_addresses, options->device_count, fs_id, mkfs_txn,
			       &args, "mkfs", "the superblock and root");
	if (ret < 0)
		return ret;
	if (fs_id_out)
		memcpy(fs_id_out, fs_id, sizeof(fs_id));
	mkfs_progress(options, "done: root directory is inode %llu",
		      (unsigned long long)args.root_ino);
	return 0;

out_client:
	ngnfs_client_destroy(client);
	return ret;
}

struct grow_args {
	uint16_t old_count;
	uint16_t new_count;
};

/* The new devices' fixed blocks and the superblock's count, in one set. */
static int grow_txn(struct ngnfs_txn *txn, void *arg)
{
	struct grow_args *args = arg;
	uint64_t super_blkno = ngnfs_blkno_make(0, NGNFS_SUPER_INDEX);
	struct ngnfs_super *super;
	void *data;
	int ret;

	ret = ngnfs_txn_write(txn, super_blkno, &data);
	if (ret < 0)
		return ret;
	super = data;
	if (le32toh(super->device_count) != args->old_count)
		return ngnfs_fail(-ESTALE,
				  "add-devices: the superblock's device count changed meanwhile");
	ret = write_fixed_blocks(txn, args->old_count, args->new_count);
	if (ret < 0)
		return ret;
	super->device_count = htole32(args->new_count);
	return 0;
}

int ngnfs_count_other_clients(struct ngnfs_client *client, uint16_t device_count,
			      ngnfs_other_clients_fn fn, void *arg, uint64_t *others)
{
	struct ngnfs_statfs_figures figures;
	int ret;

	*others = 0;
	for (uint16_t device = 0; device < device_count; device++) {
		ret = ngnfs_client_statfs_sync(client, device, &figures);
		if (ret < 0)
			return ngnfs_fail(ret, "STATFS of device %u: %s", device, strerror(-ret));
		if (figures.client_sessions <= 1)
			continue;
		*others += figures.client_sessions - 1;
		if (fn)
			fn(arg, device, figures.client_sessions - 1);
	}
	return 0;
}

int ngnfs_add_devices(const struct ngnfs_mkfs_options *options, bool force, uint16_t *added)
{
	uint64_t super_blkno = ngnfs_blkno_make(0, NGNFS_SUPER_INDEX);
	struct ngnfs_client_config client_config;
	uint8_t fs_id[NGNFS_FS_ID_SIZE];
	struct ngnfs_super super;
	struct ngnfs_client *client;
	struct grow_args args;
	struct ngnfs_msg info;
	uint8_t *block = NULL;
	uint64_t version, others;
	uint16_t count = options->device_count, device;
	int ret;

	ngnfs_clear_error();
	*added = 0;
	if (count == 0 || !options->device_addresses)
		return ngnfs_fail(-EINVAL, "add-devices: no devices given");
	client_config_init(&client_config, options->device_addresses, count);
	client_config.hello_flags = NGNFS_HELLO_FORMAT; /* the new ones are not formatted yet */
	mkfs_progress(options, "connecting to %u devices", count);
	ret = ngnfs_client_create(&client_config, &mkfs_client_ops, NULL, &client);
	if (ret < 0)
		return ngnfs_fail(ret, "add-devices: cannot connect to the devices (%s)",
				  strerror(-ret));
	ret = ngnfs_client_device_info(client, 0, &info);
	if (ret == 0 && !(info.hello_reply.flags & NGNFS_HELLO_REPLY_FORMATTED))
		ret = ngnfs_fail(-ENODEV,
				 "add-devices: device 0 (%s) is not formatted: it holds "
				 "the filesystem's superblock, so it comes first",
				 options->device_addresses[0]);
	if (ret < 0)
		goto out_client;
	memcpy(fs_id, info.hello_reply.fs_id, sizeof(fs_id));
	block = malloc(NGNFS_BLOCK_SIZE);
	if (!block) {
		ret = -ENOMEM;
		goto out_client;
	}
	ret = ngnfs_client_read_incoherent_sync(client, super_blkno, &version, block);
	if (ret < 0) {
		ngnfs_fail(ret, "add-devices: cannot read the superblock: %s", strerror(-ret));
		goto out_client;
	}
	memcpy(&super, block, sizeof(super));
	if (le32toh(super.header.magic) != NGNFS_MAGIC_SUPER ||
	    memcmp(super.fs_id, fs_id, sizeof(fs_id))) {
		ret =
		    ngnfs_fail(-EIO, "add-devices: device 0 holds no superblock of its filesystem");
		goto out_client;
	}
	args.old_count = (uint16_t)le32toh(super.device_count);
	args.new_count = count;
	if (args.old_count > count) {
		ret =
		    ngnfs_fail(-EINVAL,
			       "add-devices: the filesystem has %u devices; list all of them, then "
			       "the new ones (%u given)",
			       args.old_count, count);
		goto out_client;
	}
	if (args.old_count == count) {
		mkfs_progress(options, "the filesystem has %u devices already: nothing to add",
			      count);
		ret = 0;
		goto out_client;
	}
	for (device = 0; device < count; device++) {
		ret = ngnfs_client_device_info(client, device, &info);
		if (ret < 0) {
			ngnfs_fail(ret, "add-devices: device %u (%s): no session (%s)", device,
				   options->device_addresses[device], strerror(-ret));
			goto out_client;
		}
		if (device < args.old_count &&
		    !(info.hello_reply.flags & NGNFS_HELLO_REPLY_FORMATTED)) {
			ret =
			    ngnfs_fail(-ENODEV,
				       "add-devices: device %u (%s) is one of the filesystem's %u "
				       "but is not formatted: check the device list's order",
				       device, options->device_addresses[device], args.old_count);
			goto out_client;
		}
	}
	ret = ngnfs_count_other_clients(client, args.old_count, NULL, NULL, &others);
	if (ret < 0)
		goto out_client;
	if (others && !force) {
		ret = ngnfs_fail_quiet(-EBUSY,
				       "add-devices: %llu other client sessions are connected; a "
				       "gateway running on the old device list cannot use the new "
				       "devices: stop every gateway first",
				       (unsigned long long)others);
		goto out_client;
	}
	for (device = args.old_count; device < count; device++) {
		ret = ngnfs_client_device_info(client, device, &info);
		if (ret == 0 && (info.hello_reply.flags & NGNFS_HELLO_REPLY_FORMATTED))
			continue; /* formatted by an earlier run that stopped half way */
		mkfs_progress(options, "formatting device %u (%s) as device %u of %u", device,
			      options->device_addresses[device], device, count);
		ret = ngnfs_client_format_sync(client, device, fs_id, count);
		if (ret < 0) {
			ngnfs_fail(ret, "add-devices: FORMAT of device %u (%s) failed: %s", device,
				   options->device_addresses[device], strerror(-ret));
			goto out_client;
		}
	}
	ngnfs_client_destroy(client);
	free(block);

	mkfs_progress(options, "raising the superblock's device count from %u to %u",
		      args.old_count, count);
	ret = write_on_devices(options->device_addresses, count, fs_id, grow_txn, &args,
			       "add-devices", "the superblock");
	if (ret < 0)
		return ret;
	*added = (uint16_t)(count - args.old_count);
	mkfs_progress(options,
		      "done: the filesystem has %u devices; give every gateway and "
		      "every blockd's peers file the new device list",
		      count);
	return 0;

out_client:
	ngnfs_client_destroy(client);
	free(block);
	return ret;
}

struct mount_args {
	struct ngnfs_fs *fs;
	const uint8_t *fs_id;
	uint16_t device_count;
};

static int mount_txn(struct ngnfs_txn *txn, void *arg)
{
	struct mount_args *args = arg;
	struct ngnfs_fs *fs = args->fs;
	uint64_t super_blkno = ngnfs_blkno_make(0, NGNFS_SUPER_INDEX);
	const struct ngnfs_super *super;
	const struct ngnfs_inode *root;
	const void *data;
	int ret;

	ret = ngnfs_txn_read(txn, super_blkno, &data);
	if (ret < 0)
		return ret;
	super = data;
	if (le32toh(super->header.magic) != NGNFS_MAGIC_SUPER)
		return ngnfs_fail(-EINVAL,
				  "mount: device 0 has no superblock (block %llu): not an "
				  "ngnfs filesystem or mkfs did not finish",
				  (unsigned long long)super_blkno);
	ret = ngnfs_block_check(super, NGNFS_MAGIC_SUPER, super_blkno, 0, "mount");
	if (ret < 0)
		return ret;
	if (memcmp(super->fs_id, args->fs_id, NGNFS_FS_ID_SIZE) != 0)
		return ngnfs_fail(-ESTALE, "mount: superblock fs id differs from the devices'");
	if (le32toh(super->block_size) != NGNFS_BLOCK_SIZE)
		return ngnfs_fail(-EINVAL, "mount: superblock block size %u, expected %u",
				  le32toh(super->block_size), NGNFS_BLOCK_SIZE);
	if (le32toh(super->device_count) != args->device_count)
		return ngnfs_fail(-EINVAL,
				  "mount: filesystem has %u devices but %u addresses were given",
				  le32toh(super->device_count), args->device_count);
	fs->root_ino = le64toh(super->root_ino);
	fs->orphan_dir_ino = le64toh(super->orphan_dir_ino);
	ret = ngnfs_inode_read(txn, fs->root_ino, "mount: root", &root);
	if (ret < 0)
		return ret;
	if (ngnfs_mode_type(le32toh(root->mode)) != S_IFDIR)
		return ngnfs_fail(-EIO, "mount: root inode %llu is not a directory",
				  (unsigned long long)fs->root_ino);
	fs->root_generation = le64toh(root->generation);
	return 0;
}

static void fs_free(struct ngnfs_fs *fs)
{
	struct ngnfs_open_file *open, *next;
	unsigned int i;

	for (i = 0; i < NGNFS_OPEN_BUCKETS; i++) {
		for (open = fs->open_files[i]; open; open = next) {
			next = open->next;
			free(open);
		}
	}
	pthread_mutex_destroy(&fs->open_lock);
	free(fs->device_total_blocks);
	free(fs);
}

int ngnfs_mount(const struct ngnfs_mount_options *options, struct ngnfs_fs **fs_out)
{
	struct ngnfs_client_config client_config;
	struct ngnfs_cache_config cache_config = { 0 };
	struct mount_args args;
	struct ngnfs_msg info;
	struct ngnfs_fs *fs;
	int ret;

	ngnfs_clear_error();
	if (options->device_count == 0 || !options->device_addresses)
		return ngnfs_fail(-EINVAL, "mount: no devices given");
	fs = calloc(1, sizeof(*fs));
	if (!fs)
		return -ENOMEM;
	pthread_mutex_init(&fs->open_lock, NULL);
	fs->device_count = options->device_count;
	fs->device_total_blocks = calloc(fs->device_count, sizeof(*fs->device_total_blocks));
	if (!fs->device_total_blocks) {
		fs_free(fs);
		return -ENOMEM;
	}

	client_config_init(&client_config, options->device_addresses, options->device_count);
	client_config.allow_unreachable = options->allow_unreachable_devices;
	cache_config.durability = options->durability == NGNFS_MOUNT_WRITEBACK
				      ? NGNFS_DURABILITY_WRITEBACK
				      : NGNFS_DURABILITY_STABLE;
	cache_config.cache_bytes = options->cache_bytes;
	cache_config.writeback_interval_ms = options->writeback_interval_ms;
	cache_config.reclaim_timeout_ms = options->reclaim_timeout_ms;
	/*
	 * A filesystem allocates a block per create (the inode), and an
	 * empty pool costs the creating thread an ALLOC round trip: the
	 * protocol's largest ALLOC makes that one create in 256, not in 64.
	 */
	cache_config.alloc_batch = NGNFS_MOUNT_ALLOC_BATCH;
	ret = ngnfs_cache_create_with_client(&client_config, &cache_config, &fs->cache);
	if (ret < 0) {
		ngnfs_fail(ret, "mount: cannot connect to the %u devices (first %s): %s",
			   options->device_count, options->device_addresses[0], strerror(-ret));
		fs_free(fs);
		return ret;
	}
	fs->client = ngnfs_cache_client(fs->cache);
	ret = ngnfs_client_device_info(fs->client, 0, &info);
	if (ret < 0) {
		ngnfs_fail(ret, "mount: device 0 (%s): no session: %s",
			   options->device_addresses[0], strerror(-ret));
		goto fail;
	}
	if (!(info.hello_reply.flags & NGNFS_HELLO_REPLY_FORMATTED)) {
		ret = ngnfs_fail(-EINVAL, "mount: device 0 (%s) is not formatted",
				 options->device_addresses[0]);
		goto fail;
	}
	memcpy(fs->fs_id, info.hello_reply.fs_id, NGNFS_FS_ID_SIZE);
	args.fs = fs;
	args.fs_id = fs->fs_id;
	args.device_count = options->device_count;
	ret = ngnfs_txn_run(fs->cache, mount_txn, &args);
	if (ret < 0)
		goto fail;
	ngnfs_fs_install_invalidate(fs);
	*fs_out = fs;
	return 0;

fail:
	ngnfs_cache_destroy(fs->cache);
	fs_free(fs);
	return ret;
}

void ngnfs_unmount(struct ngnfs_fs *fs)
{
	if (!fs)
		return;
	ngnfs_cache_destroy(fs->cache);
	fs_free(fs);
}

int ngnfs_root(struct ngnfs_fs *fs, struct ngnfs_handle *root)
{
	root->ino = fs->root_ino;
	root->generation = fs->root_generation;
	return 0;
}

void ngnfs_fs_id(struct ngnfs_fs *fs, uint8_t fs_id[16])
{
	memcpy(fs_id, fs->fs_id, NGNFS_FS_ID_SIZE);
}

int ngnfs_statfs_device(struct ngnfs_fs *fs, uint16_t device, struct ngnfs_statfs_device *statfs)
{
	struct ngnfs_statfs_figures device_statfs;
	int ret;

	ngnfs_clear_error();
	memset(statfs, 0, sizeof(*statfs));
	if (device >= fs->device_count)
		return ngnfs_fail_quiet(-EINVAL, "statfs: the filesystem has %u devices, not %u",
					fs->device_count, device + 1);
	ret = ngnfs_client_statfs_sync(fs->client, device, &device_statfs);
	if (ret < 0)
		return ngnfs_fail(ret, "statfs: device %u: %s", device, strerror(-ret));
	statfs->total_blocks = device_statfs.total_blocks;
	statfs->free_blocks = device_statfs.free_blocks;
	statfs->reserved_blocks = device_statfs.reserved_blocks;
	statfs->staged_sets = device_statfs.staged_sets;
	statfs->client_sessions = device_statfs.client_sessions;
	statfs->group_commits = device_statfs.group_commits;
	statfs->commit_requests = device_statfs.commit_requests;
	return 0;
}

/*
 * A device the client has no session with (its answer is -ENOTCONN, also
 * for a request the breaking session failed) or knows to be away: away,
 * not broken.
 */
static bool device_away(struct ngnfs_fs *fs, uint16_t device, int error)
{
	return error == -ENOTCONN || ngnfs_client_unreachable_ms(fs->client, device) > 0;
}

/*
 * A device that cannot be reached counts with the capacity it last
 * reported and no free space (nothing new can go there now), or not at
 * all if it never answered: df on a gateway with a device down shows
 * less room instead of failing, which is what an operator watching the
 * archive fill wants.  Only when no device answers is it an error.
 */
int ngnfs_statfs(struct ngnfs_fs *fs, struct ngnfs_statfs *statfs)
{
	struct ngnfs_statfs_figures device_statfs;
	uint16_t device;
	int ret, away_error = 0;

	ngnfs_clear_error();
	memset(statfs, 0, sizeof(*statfs));
	statfs->block_size = NGNFS_BLOCK_SIZE;
	statfs->device_count = fs->device_count;
	statfs->name_max = NGNFS_NAME_MAX;
	for (device = 0; device < fs->device_count; device++) {
		ret = ngnfs_client_statfs_sync(fs->client, device, &device_statfs);
		if (ret < 0 && device_away(fs, device, ret)) {
			statfs->unreachable_devices++;
			statfs->total_blocks +=
			    __atomic_load_n(&fs->device_total_blocks[device], __ATOMIC_RELAXED);
			away_error = ret;
			continue;
		}
		if (ret < 0)
			return ngnfs_fail(ret, "statfs: device %u: %s", device, strerror(-ret));
		__atomic_store_n(&fs->device_total_blocks[device], device_statfs.total_blocks,
				 __ATOMIC_RELAXED);
		statfs->total_blocks += device_statfs.total_blocks;
		statfs->free_blocks += device_statfs.free_blocks;
	}
	if (statfs->unreachable_devices == fs->device_count)
		return ngnfs_fail(away_error, "statfs: no device can be reached: %s",
				  strerror(-away_error));
	/* every inode is a block: any free block can become an inode */
	statfs->total_inodes = statfs->total_blocks;
	statfs->free_inodes = statfs->free_blocks;
	return 0;
}
