/* SPDX-License-Identifier: LGPL-3.0-or-later */
#ifndef NGNFS_FSAL_INTERNAL_H
#define NGNFS_FSAL_INTERNAL_H

/*
 * Types and helpers shared by the files of the NGNFS FSAL.
 *
 * The split is the one ganesha reviewers expect (as in FSAL_MEM and
 * FSAL_CEPH): main.c registers the module and declares the configuration
 * table, export.c holds the export operations, handle.c the namespace and
 * attribute operations, file.c open files and I/O, xattr.c the NFSv4.2
 * extended attributes, fsal_up.c the cache invalidations from libcore,
 * errors.c the errno mapping, and this header the types they share.
 *
 * The FSAL keeps no filesystem state of its own.  An object handle is just
 * libcore's struct ngnfs_handle (inode number plus generation, stable across
 * gateway restarts) and the 16 bytes of its wire form, which are both the
 * NFS file handle and the key MDCACHE indexes its cache with.  Every lookup
 * allocates a fresh ngnfs_fsal_object and MDCACHE deduplicates them by key,
 * as it does for FSAL_CEPH; the FSAL never needs a table of live objects.
 * All filesystem work goes through libcore's native API (libcore/ngnfs.h).
 *
 * Only the object MDCACHE keeps for a key ever sees open files, so the
 * share reservation counters and the global file descriptor live in the
 * object; the per-state descriptors live after the state_t (alloc_state).
 * A "descriptor" here holds no OS resource: it is the open mode ganesha's
 * share machinery needs, plus whether it holds one of libcore's open
 * counts (which keep an unlinked file alive until its last close).
 */

#include "fsal.h"
#include "fsal_api.h"
#include "fsal_types.h"
#include "fsal_convert.h"

#include "ngnfs.h"

/* The module name in EXPORT { FSAL { Name = NGNFS; } }. */
#define NGNFS_FSAL_NAME "NGNFS"

/* The module: ganesha's fsal_module plus our object operations vector. */
struct ngnfs_fsal_module {
	struct fsal_module fsal;
	struct fsal_obj_ops object_ops;
};

extern struct ngnfs_fsal_module ngnfs_fsal_module;

/*
 * The options of one export's FSAL block, filled by ganesha's config
 * parser from ngnfs_fsal_export_config_block (main.c).
 */
struct ngnfs_fsal_export_options {
	/* "host:port,host:port,...", as written in the config */
	char *devices;
	/* a device manifest (one host:port a line); exclusive with devices */
	char *devices_file;
	/* the same, split; filled by the block's commit step */
	char **device_addresses;
	uint16_t device_count;
	/* "stable" or "writeback", as written in the config */
	char *durability_name;
	/* the same as enum ngnfs_durability_mode; filled by the commit step */
	uint32_t durability;
	uint64_t cache_size;
	uint32_t writeback_interval_ms;
	uint32_t reclaim_timeout_ms;
	/* mount with devices other than 0 unreachable (ngnfs_mount_options) */
	bool allow_unreachable_devices;
	/* free the orphans an earlier gateway left, once the grace period is over */
	bool reclaim_orphans;
};

extern struct config_block ngnfs_fsal_export_config_block;
void ngnfs_fsal_export_options_free(struct ngnfs_fsal_export_options *options);
const char *ngnfs_fsal_durability_name(uint32_t durability);

struct ngnfs_fsal_up_queue;
struct ngnfs_fsal_orphans;

/* One export: ganesha's fsal_export plus the mounted filesystem. */
struct ngnfs_fsal_export {
	struct fsal_export export;
	struct ngnfs_fsal_export_options options;
	struct ngnfs_fs *fs;
	struct ngnfs_handle root;
	/* every object of this export carries this fsid (from the fs id) */
	fsal_fsid_t fsid;
	/* invalidations from libcore waiting for the up-call thread */
	struct ngnfs_fsal_up_queue *up_queue;
	/* the start's orphan reclaim (orphans.c); NULL when off or done with */
	struct ngnfs_fsal_orphans *orphans;
	/* tests only: NGNFS_FSAL_TEST_GETATTR_READ_DELAY_MS and _RETURN_ */
	unsigned int test_getattr_read_delay_ms;
	unsigned int test_getattr_return_delay_ms;
};

/*
 * A file descriptor as ganesha's share machinery sees it.  openflags must
 * be first (ganesha casts state + 1 to struct fsal_fd).  counted says this
 * descriptor holds one ngnfs_open() count.
 */
struct ngnfs_fsal_fd {
	fsal_openflags_t openflags;
	bool counted;
};

/* One object: ganesha's fsal_obj_handle plus libcore's handle. */
struct ngnfs_fsal_object {
	struct fsal_obj_handle object;
	struct ngnfs_fsal_export *export;
	struct ngnfs_handle handle;
	/* ngnfs_handle_to_wire(handle): the NFS handle and the cache key */
	uint8_t wire[NGNFS_HANDLE_WIRE_SIZE];
	/* regular files: share reservations and the stateless descriptor,
	 * both protected by object.obj_lock */
	struct fsal_share share;
	struct ngnfs_fsal_fd global_fd;
};

static inline struct ngnfs_fsal_export *ngnfs_fsal_export_of(struct fsal_export *export)
{
	return container_of(export, struct ngnfs_fsal_export, export);
}

static inline struct ngnfs_fsal_object *ngnfs_fsal_object_of(struct fsal_obj_handle *object)
{
	return container_of(object, struct ngnfs_fsal_object, object);
}

/* export.c */
fsal_status_t ngnfs_fsal_create_export(struct fsal_module *module, void *parse_node,
				       struct config_error_type *err_type,
				       const struct fsal_up_vector *up_ops);

/* handle.c */
void ngnfs_fsal_object_ops_init(struct fsal_obj_ops *ops);
void ngnfs_fsal_attr_to_fsal(const struct ngnfs_fsal_export *export, const struct ngnfs_attr *attr,
			     struct fsal_attrlist *attrs);
fsal_status_t ngnfs_fsal_object_out(struct ngnfs_fsal_export *export,
				    const struct ngnfs_handle *handle,
				    const struct ngnfs_attr *attr, uint64_t sequence,
				    struct fsal_obj_handle **object_out,
				    struct fsal_attrlist *attrs_out);
int ngnfs_fsal_getattr_settled(struct ngnfs_fsal_export *export, const struct ngnfs_handle *handle,
			       struct ngnfs_attr *attr);
void ngnfs_fsal_attrs_hand_out(struct ngnfs_fsal_export *export, const struct ngnfs_handle *handle,
			       const struct ngnfs_attr *attr, uint64_t sequence,
			       struct fsal_attrlist *attrs_out);
fsal_status_t ngnfs_fsal_may_change_dir(struct fsal_obj_handle *dir_object,
					const struct ngnfs_handle *victim);
fsal_status_t ngnfs_fsal_setattr_object(struct ngnfs_fsal_object *object,
					struct fsal_attrlist *attrs_set,
					struct ngnfs_attr *attr_out);
fsal_status_t ngnfs_fsal_lookup_path(struct fsal_export *export, const char *path,
				     struct fsal_obj_handle **object_out,
				     struct fsal_attrlist *attrs_out);
fsal_status_t ngnfs_fsal_create_handle(struct fsal_export *export, struct gsh_buffdesc *wire,
				       struct fsal_obj_handle **object_out,
				       struct fsal_attrlist *attrs_out);

/* file.c */
void ngnfs_fsal_file_ops_init(struct fsal_obj_ops *ops);
struct state_t *ngnfs_fsal_alloc_state(struct fsal_export *export, enum state_type state_type,
				       struct state_t *related_state);
void ngnfs_fsal_object_close_all(struct ngnfs_fsal_object *object);

/* xattr.c */
void ngnfs_fsal_xattr_ops_init(struct fsal_obj_ops *ops);

/* fsal_up.c */
int ngnfs_fsal_up_start(struct ngnfs_fsal_export *export);
/* orphans.c: the reclaim after the grace period; stop before the unmount. */
int ngnfs_fsal_orphans_start(struct ngnfs_fsal_export *export);
void ngnfs_fsal_orphans_stop(struct ngnfs_fsal_export *export);
void ngnfs_fsal_up_stop(struct ngnfs_fsal_export *export);
void ngnfs_fsal_up_free(struct ngnfs_fsal_export *export);
void ngnfs_fsal_up_track(struct ngnfs_fsal_export *export, const struct ngnfs_handle *handle);
void ngnfs_fsal_up_untrack(struct ngnfs_fsal_export *export, const struct ngnfs_handle *handle);
/*
 * Reads a revocation overtakes (fsal_up.c): take the sequence before a
 * libcore read whose attributes go to ganesha, and read again while
 * ngnfs_fsal_attr_overtaken says a revocation of the inode came since;
 * bracket every call that hands attributes or entries of an inode to
 * ganesha with ngnfs_fsal_hand_begin (before its read) and _end.
 */
uint64_t ngnfs_fsal_attr_sequence(struct ngnfs_fsal_export *export);
bool ngnfs_fsal_attr_overtaken(struct ngnfs_fsal_export *export, uint64_t ino, uint64_t sequence);
void ngnfs_fsal_hand_begin(struct ngnfs_fsal_export *export, uint64_t ino);
void ngnfs_fsal_hand_end(struct ngnfs_fsal_export *export, uint64_t ino);

/* errors.c: a negative errno from libcore as an FSAL status. */
fsal_errors_t ngnfs_fsal_error(int error);
static inline fsal_status_t ngnfs_fsal_status(int ret)
{
	if (ret >= 0)
		return fsalstat(ERR_FSAL_NO_ERROR, 0);
	return fsalstat(ngnfs_fsal_error(-ret), (unsigned int)-ret);
}

#endif
