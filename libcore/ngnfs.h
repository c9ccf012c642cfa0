/* SPDX-License-Identifier: GPL-2.0-or-later */
#ifndef NGNFS_H
#define NGNFS_H

/*
 * The native ngnfs API: POSIX objects addressed by handle.
 *
 * This is what the NFS-Ganesha FSAL, the admin tool and a later SMB front
 * end use; none of them sees blocks.  Every call is one transaction (or a
 * short sequence of them) and returns 0 or a negative errno; a call that
 * fails changed nothing.  Objects are named by struct ngnfs_handle, the
 * inode number (which is the number of the inode's block) and its
 * generation: a handle stays valid across gateway restarts and is refused
 * with -ESTALE once the inode is gone or its block was reused.  A call
 * that must ask a device whose session is lost for a block fails with
 * -EAGAIN (try again) for the mount's reclaim timeout after the loss, and
 * with -ENOTCONN after that; one whose changed blocks wait to be
 * reclaimed from that device waits for them instead.
 *
 * Calls may block (network, durability waits) and may be made from many
 * threads at once; they never hold blocks while they wait.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#define NGNFS_NAME_MAX	       255
#define NGNFS_SYMLINK_MAX      4095
#define NGNFS_XATTR_NAME_MAX   255
#define NGNFS_XATTR_VALUE_MAX  65536
#define NGNFS_HANDLE_WIRE_SIZE 16
/* Hard links of one inode (subdirectories of a directory count as links). */
#define NGNFS_LINK_MAX 65000
/* The largest file size, 1 EiB (format-block.h, NGNFS_DATA_MAX_FILE_SIZE). */
#define NGNFS_FILE_SIZE_MAX (1ULL << 60)

struct ngnfs_fs;

struct ngnfs_handle {
	uint64_t ino;
	uint64_t generation;
};

/* Handles on the wire (NFS file handles): 16 bytes, little-endian. */
void ngnfs_handle_to_wire(const struct ngnfs_handle *handle, uint8_t wire[NGNFS_HANDLE_WIRE_SIZE]);
void ngnfs_handle_from_wire(const uint8_t wire[NGNFS_HANDLE_WIRE_SIZE],
			    struct ngnfs_handle *handle);

struct ngnfs_attr {
	uint64_t ino;
	uint64_t generation;
	uint32_t mode; /* type and permission bits, as st_mode */
	uint32_t nlink;
	uint32_t uid;
	uint32_t gid;
	uint64_t size;
	uint64_t blocks; /* 512-byte units allocated, as st_blocks */
	uint64_t rdev;
	uint64_t change; /* bumped on every change: NFSv4 change attribute */
	struct timespec atime;
	struct timespec mtime;
	struct timespec ctime;
	struct timespec crtime;
};

/* Which fields ngnfs_setattr changes. */
#define NGNFS_SET_MODE	    (1U << 0)
#define NGNFS_SET_UID	    (1U << 1)
#define NGNFS_SET_GID	    (1U << 2)
#define NGNFS_SET_SIZE	    (1U << 3)
#define NGNFS_SET_ATIME	    (1U << 4)
#define NGNFS_SET_MTIME	    (1U << 5)
#define NGNFS_SET_ATIME_NOW (1U << 6)
#define NGNFS_SET_MTIME_NOW (1U << 7)
#define NGNFS_SET_CTIME	    (1U << 8)

struct ngnfs_setattr {
	uint32_t mask;
	uint32_t mode;
	uint32_t uid;
	uint32_t gid;
	uint64_t size;
	struct timespec atime;
	struct timespec mtime;
	struct timespec ctime;
};

enum ngnfs_durability_mode {
	NGNFS_MOUNT_STABLE = 0,
	NGNFS_MOUNT_WRITEBACK = 1,
};

struct ngnfs_mount_options {
	const char *const *device_addresses; /* "host:port", device index order */
	uint16_t device_count;
	enum ngnfs_durability_mode durability;
	size_t cache_bytes;		/* 0: default */
	uint32_t writeback_interval_ms; /* 0: default */
	uint32_t reclaim_timeout_ms;	/* 0: default (30 s), see cache.h */
	/*
	 * Mount even if devices other than device 0 (and the root
	 * directory's) cannot be reached now.  Operations on their blocks
	 * answer -EAGAIN, then -ENOTCONN after reclaim_timeout_ms (as for a
	 * device lost while mounted), until the device answers.  A device
	 * that answers but refuses (another filesystem, unformatted) still
	 * fails the mount.  Off by default, so that a wrong address is a
	 * mount error rather than a missing device.
	 */
	bool allow_unreachable_devices;
};

struct ngnfs_mkfs_options {
	const char *const *device_addresses;
	uint16_t device_count;
	/* progress lines ("formatting device 2 of 3") go here when set */
	void (*progress)(void *arg, const char *line);
	void *progress_arg;
};

/*
 * mkfs: every device must be unformatted (-EEXIST names the first that is
 * not).  Writes each device's identity, the superblock and the root
 * directory.
 */
int ngnfs_mkfs(const struct ngnfs_mkfs_options *options, uint8_t fs_id_out[16]);

/*
 * Grows a filesystem: options lists its devices followed by new,
 * unformatted ones.  Formats the new ones, writes their fixed blocks and
 * raises the superblock's device count, which every gateway then needs
 * in its device list (mount refuses the old list).  Refused with -EBUSY
 * while another client is connected, unless force (a gateway running on
 * the old list cannot follow pointers to the new devices: restart it).
 * Running it again after it completed, or after it stopped half way, is
 * safe: *added says how many devices this run added (0: none to add).
 */
int ngnfs_add_devices(const struct ngnfs_mkfs_options *options, bool force, uint16_t *added);

/* Checks the superblock, fs id and format version of every device. */
int ngnfs_mount(const struct ngnfs_mount_options *options, struct ngnfs_fs **fs_out);
/* Writes back everything dirty, then closes every session. */
void ngnfs_unmount(struct ngnfs_fs *fs);

/* What was wrong, in words, after a failed mount or operation (thread-local). */
const char *ngnfs_last_error(void);

/*
 * Cache invalidation for a gateway layer: called (from libcore's I/O
 * thread, or an operation thread when the block cache evicts an inode;
 * must not block) when another client is about to change an
 * object this client had cached, or may change it without this client
 * hearing of it (its session with the object's device was lost: blockd
 * restarted, or closed a session that left a revocation unanswered; or
 * the block cache evicted its inode).
 * dir_changed says the change may be in its entries.  Returning a ticket
 * (not 0) says the invalidation is delivered later, by another thread:
 * the other client's change then waits until
 * ngnfs_invalidations_delivered() reports that ticket (or a later one),
 * for half a second at most, so that no request answered from the
 * gateway's own cache after that change returned is stale.
 */
typedef uint64_t (*ngnfs_invalidate_fn)(void *arg, const struct ngnfs_handle *handle,
					bool dir_changed);
void ngnfs_set_invalidate(struct ngnfs_fs *fs, ngnfs_invalidate_fn fn, void *arg);
void ngnfs_invalidations_delivered(struct ngnfs_fs *fs, uint64_t ticket);

int ngnfs_root(struct ngnfs_fs *fs, struct ngnfs_handle *root);
void ngnfs_fs_id(struct ngnfs_fs *fs, uint8_t fs_id[16]);

int ngnfs_getattr(struct ngnfs_fs *fs, const struct ngnfs_handle *handle, struct ngnfs_attr *attr);
int ngnfs_setattr(struct ngnfs_fs *fs, const struct ngnfs_handle *handle,
		  const struct ngnfs_setattr *set, struct ngnfs_attr *attr_out);

int ngnfs_lookup(struct ngnfs_fs *fs, const struct ngnfs_handle *dir, const char *name,
		 struct ngnfs_handle *handle_out, struct ngnfs_attr *attr_out);

/*
 * Creates a regular file, directory, device, fifo or socket according to
 * the type bits of mode.  -EEXIST if the name exists.
 */
int ngnfs_create(struct ngnfs_fs *fs, const struct ngnfs_handle *dir, const char *name,
		 uint32_t mode, uint32_t uid, uint32_t gid, uint64_t rdev,
		 struct ngnfs_handle *handle_out, struct ngnfs_attr *attr_out);
/*
 * ngnfs_create with initial atime and mtime (NULL: now) set in the same
 * transaction: an NFSv4 exclusive create keeps its verifier there, and a
 * crash must not leave the file without it.
 */
int ngnfs_create_with_times(struct ngnfs_fs *fs, const struct ngnfs_handle *dir, const char *name,
			    uint32_t mode, uint32_t uid, uint32_t gid, uint64_t rdev,
			    const struct timespec *atime, const struct timespec *mtime,
			    struct ngnfs_handle *handle_out, struct ngnfs_attr *attr_out);
int ngnfs_symlink(struct ngnfs_fs *fs, const struct ngnfs_handle *dir, const char *name,
		  const char *target, uint32_t uid, uint32_t gid, struct ngnfs_handle *handle_out,
		  struct ngnfs_attr *attr_out);
/* Returns the target length; the target is NUL terminated if it fits. */
ssize_t ngnfs_readlink(struct ngnfs_fs *fs, const struct ngnfs_handle *handle, char *buffer,
		       size_t size);
int ngnfs_link(struct ngnfs_fs *fs, const struct ngnfs_handle *handle,
	       const struct ngnfs_handle *dir, const char *name);
/* Removes a name (rmdir when it names an empty directory; -ENOTEMPTY otherwise). */
int ngnfs_unlink(struct ngnfs_fs *fs, const struct ngnfs_handle *dir, const char *name);
/*
 * POSIX rename: replaces an existing target of a compatible type,
 * refuses to move a directory into its own subtree (-EINVAL).
 */
int ngnfs_rename(struct ngnfs_fs *fs, const struct ngnfs_handle *old_dir, const char *old_name,
		 const struct ngnfs_handle *new_dir, const char *new_name);

/*
 * readdir: entries after cookie (0 starts at the beginning) in cookie
 * order.  Cookies are stable while other entries come and go.  The
 * callback returns 0 to go on, or 1 to stop (the entry it was given is
 * not consumed); "." and ".." are not returned.
 */
typedef int (*ngnfs_readdir_fn)(void *arg, const char *name, size_t name_length,
				const struct ngnfs_handle *handle, uint32_t type_mode,
				uint64_t cookie);
int ngnfs_readdir(struct ngnfs_fs *fs, const struct ngnfs_handle *dir, uint64_t cookie,
		  ngnfs_readdir_fn fn, void *arg, bool *end_of_directory);

/*
 * Open files: an unlinked file whose last name is gone survives until the
 * last close on this client (orphan), then its blocks are freed.
 */
int ngnfs_open(struct ngnfs_fs *fs, const struct ngnfs_handle *handle);
/*
 * ngnfs_open of a file this client has just created, whose attributes
 * came back from the create: the open is counted without reading the
 * inode again.  That read needs the device, and a device lost between a
 * committed create and its open would otherwise fail an open whose file
 * exists (an NFS client told NFS4ERR_DELAY then finds it there: EXIST).
 * An unlink that commits between the two saw no open and freed the file;
 * the handle then answers -ESTALE, as for a file unlinked just before.
 */
int ngnfs_open_created(struct ngnfs_fs *fs, const struct ngnfs_handle *handle);
int ngnfs_close(struct ngnfs_fs *fs, const struct ngnfs_handle *handle);

ssize_t ngnfs_read(struct ngnfs_fs *fs, const struct ngnfs_handle *handle, uint64_t offset,
		   void *buffer, size_t length, bool *end_of_file);
/* When an ngnfs_write is durable. */
enum ngnfs_write_durability {
	/* as the mount says: before return if stable, within the interval if writeback */
	NGNFS_WRITE_MOUNT = 0,
	/* before return, whatever the mount's mode (NFS FILE_SYNC, DATA_SYNC) */
	NGNFS_WRITE_STABLE,
	/*
	 * Not yet, even in a stable mount (NFS UNSTABLE): the data waits in
	 * the cache and is written within Writeback_Interval_Ms, on
	 * revocation, under memory pressure, or by ngnfs_sync_inode, which is
	 * what makes it durable for the caller.  An operation that touches
	 * the same blocks in a stable mount makes it durable with its own.
	 */
	NGNFS_WRITE_UNSTABLE,
};
ssize_t ngnfs_write(struct ngnfs_fs *fs, const struct ngnfs_handle *handle, uint64_t offset,
		    const void *buffer, size_t length, enum ngnfs_write_durability durability);
/* Sync everything; also reports write-back failures since the last sync. */
int ngnfs_sync(struct ngnfs_fs *fs);
/*
 * fsync / NFS COMMIT of one object: on 0 every change made to it before
 * the call is durable (its data, attributes, xattrs, and the directory
 * entry and anything else those changes depended on), without waiting
 * for other objects' dirty data.  Returns a write-back failure of the
 * object's changes since its last ngnfs_sync_inode.
 */
int ngnfs_sync_inode(struct ngnfs_fs *fs, const struct ngnfs_handle *handle);
/*
 * How many dirty blocks this mount has dropped because their write-back
 * failed, since it was mounted.  It only grows, and it has grown before
 * any sync reports the failure: an NFS gateway mixes it into its write
 * verifier, so that a client whose UNSTABLE writes were lost sees another
 * verifier at its COMMIT and sends them again (as knfsd does).
 */
uint64_t ngnfs_write_losses(struct ngnfs_fs *fs);

/* XATTR_CREATE / XATTR_REPLACE from <sys/xattr.h> as in setxattr(2). */
int ngnfs_setxattr(struct ngnfs_fs *fs, const struct ngnfs_handle *handle, const char *name,
		   const void *value, size_t size, int flags);
/* Returns the value size; -ERANGE if size is too small (0 asks for the size). */
ssize_t ngnfs_getxattr(struct ngnfs_fs *fs, const struct ngnfs_handle *handle, const char *name,
		       void *value, size_t size);
/* NUL-separated names, as listxattr(2). */
ssize_t ngnfs_listxattr(struct ngnfs_fs *fs, const struct ngnfs_handle *handle, char *list,
			size_t size);
int ngnfs_removexattr(struct ngnfs_fs *fs, const struct ngnfs_handle *handle, const char *name);

struct ngnfs_statfs {
	uint64_t block_size;
	uint64_t total_blocks;
	uint64_t free_blocks;
	uint64_t total_inodes;
	uint64_t free_inodes;
	uint32_t device_count;
	uint32_t name_max;
	/*
	 * Devices that could not be reached: counted with the capacity they
	 * last reported (none if they never answered) and no free space.
	 */
	uint32_t unreachable_devices;
};
int ngnfs_statfs(struct ngnfs_fs *fs, struct ngnfs_statfs *statfs);

/*
 * One device's figures, as its blockd counts them.  Files live on their
 * directory's device, so devices fill unevenly (a full one has its new
 * blocks taken from the others, at the price of cross-device sets): this
 * is where an operator sees it.
 */
struct ngnfs_statfs_device {
	uint64_t total_blocks;
	uint64_t free_blocks;	  /* never allocated or freed, reserved ones excluded */
	uint64_t reserved_blocks; /* handed to clients by ALLOC, not yet written */
	uint64_t staged_sets;	  /* multi-device sets staged here and not yet resolved */
	uint64_t client_sessions; /* clients connected to the device, this mount included */
	/* since the device's blockd started: synced write batches, and the requests in them */
	uint64_t group_commits;
	uint64_t commit_requests;
};
/* -EINVAL for a device the filesystem does not have. */
int ngnfs_statfs_device(struct ngnfs_fs *fs, uint16_t device, struct ngnfs_statfs_device *statfs);

#endif
