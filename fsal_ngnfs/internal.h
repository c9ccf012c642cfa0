/* SPDX-License-Identifier: GPL-2.0 */
#ifndef NGNFS_FSAL_INTERNAL_H
#define NGNFS_FSAL_INTERNAL_H

/*
 * Types and helpers shared by the files of the NGNFS FSAL.
 *
 * The split is the one ganesha reviewers expect (as in FSAL_MEM and
 * FSAL_CEPH): main.c registers the module and declares the configuration
 * table, export.c holds the export operations, handle.c the object
 * operations, and this header the types they share.
 *
 * The FSAL keeps no filesystem state of its own.  An object handle is just
 * libcore's struct ngnfs_handle (inode number plus generation, stable across
 * gateway restarts) and the 16 bytes of its wire form, which are both the
 * NFS file handle and the key MDCACHE indexes its cache with.  Every lookup
 * allocates a fresh ngnfs_fsal_object and MDCACHE deduplicates them by key,
 * as it does for FSAL_CEPH; the FSAL never needs a table of live objects.
 * All filesystem work goes through libcore's native API (libcore/ngnfs.h).
 *
 * XXX: until libcore links, scaffold.c stands in for the ngnfs_* calls the
 * FSAL makes (an empty root directory); see fsal_ngnfs/CMakeLists.txt.
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
	/* the same, split; filled by the block's commit step */
	char **device_addresses;
	uint16_t device_count;
	/* "stable" or "writeback", as written in the config */
	char *durability_name;
	/* the same as enum ngnfs_durability_mode; filled by the commit step */
	uint32_t durability;
	uint64_t cache_size;
	uint32_t writeback_interval_ms;
};

extern struct config_block ngnfs_fsal_export_config_block;
void ngnfs_fsal_export_options_free(struct ngnfs_fsal_export_options *options);
const char *ngnfs_fsal_durability_name(uint32_t durability);

/* One export: ganesha's fsal_export plus the mounted filesystem. */
struct ngnfs_fsal_export {
	struct fsal_export export;
	struct ngnfs_fsal_export_options options;
	struct ngnfs_fs *fs;
	struct ngnfs_handle root;
	/* every object of this export carries this fsid (from the fs id) */
	fsal_fsid_t fsid;
};

/* One object: ganesha's fsal_obj_handle plus libcore's handle. */
struct ngnfs_fsal_object {
	struct fsal_obj_handle object;
	struct ngnfs_fsal_export *export;
	struct ngnfs_handle handle;
	/* ngnfs_handle_to_wire(handle): the NFS handle and the cache key */
	uint8_t wire[NGNFS_HANDLE_WIRE_SIZE];
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
fsal_status_t ngnfs_fsal_lookup_path(struct fsal_export *export, const char *path,
				     struct fsal_obj_handle **object_out,
				     struct fsal_attrlist *attrs_out);
fsal_status_t ngnfs_fsal_create_handle(struct fsal_export *export, struct gsh_buffdesc *wire,
				       struct fsal_obj_handle **object_out,
				       struct fsal_attrlist *attrs_out);

/* A negative errno from libcore as an FSAL status. */
static inline fsal_status_t ngnfs_fsal_status(int ret)
{
	if (ret >= 0)
		return fsalstat(ERR_FSAL_NO_ERROR, 0);
	return posix2fsal_status(-ret);
}

#endif
