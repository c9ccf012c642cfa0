// SPDX-License-Identifier: LGPL-3.0-or-later
/*
 * Export operations of the NGNFS FSAL: creating an export (parsing its
 * FSAL block and mounting the filesystem through libcore), releasing it,
 * turning wire handles back into objects, and filesystem statistics.
 *
 * create_export also logs the "NGNFS guard:" line: values the plugin reads
 * from ganesha's own structures (nfs_param, the export being created).  The
 * plugin's config.h is generated outside ganesha's build and must match
 * the daemon's; if it does not, the plugin still loads but reads every
 * shared structure at the wrong offsets.  The guard test (ctest/fsal.cmake)
 * writes unusual values into the daemon's config and checks this line
 * reports exactly those, which no mismatched layout does by accident.  The
 * values are spread over the whole of nfs_param (first field, middle, last
 * field of each block) so that a shift anywhere shows.  Only integers are
 * read: dereferencing a pointer read at a wrong offset could crash the
 * daemon instead of producing a readable mismatch.
 *
 * Each export starts its invalidation thread (fsal_up.c) once mounted and
 * stops it before unmounting.
 *
 * get_write_verifier gives the NFSv4 WRITE and COMMIT verifier: 8 random
 * bytes drawn once per gateway process.  ganesha's default is its start
 * time in seconds, which a gateway killed and restarted within the same
 * second would repeat; a client would then take its COMMIT as covering
 * UNSTABLE writes the dead gateway never wrote back.  The export's count
 * of write-back losses (ngnfs_write_losses) is mixed in, so the verifier
 * also changes when libcore drops dirty blocks whose write failed: a
 * client then resends everything it wrote UNSTABLE and has not seen
 * committed, as it would after a restart (knfsd does the same on a
 * write-back error).  A loss landing between a WRITE's caching and its
 * reply gives that reply the new verifier already; the file's COMMIT
 * then reports the loss as NFS4ERR_IO (ngnfs_sync_inode), so the data is
 * never taken as committed.
 */

#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "fsal.h"
#include "fsal_convert.h"
#include "FSAL/fsal_commonlib.h"
#include "FSAL/fsal_config.h"
#include "config_parsing.h"
#include "export_mgr.h"
#include "nfs_core.h"

#include "internal.h"

static void ngnfs_fsal_release_export(struct fsal_export *fsal_export)
{
	struct ngnfs_fsal_export *export = ngnfs_fsal_export_of(fsal_export);

	LogDebug(COMPONENT_FSAL, "NGNFS: releasing export %u", fsal_export->export_id);
	ngnfs_fsal_orphans_stop(export);
	ngnfs_fsal_up_stop(export);
	if (export->fs != NULL)
		ngnfs_unmount(export->fs);
	ngnfs_fsal_up_free(export);
	fsal_detach_export(fsal_export->fsal, &fsal_export->exports);
	free_export_ops(fsal_export);
	ngnfs_fsal_export_options_free(&export->options);
	gsh_free(export);
}

static fsal_status_t ngnfs_fsal_get_fs_dynamic_info(struct fsal_export *fsal_export,
						    struct fsal_obj_handle *object,
						    fsal_dynamicfsinfo_t *info)
{
	struct ngnfs_fsal_export *export = ngnfs_fsal_export_of(fsal_export);
	struct ngnfs_statfs statfs;
	int ret;

	(void)object;

	ret = ngnfs_statfs(export->fs, &statfs);
	if (ret < 0) {
		LogWarn(COMPONENT_FSAL, "NGNFS: statfs of export %u failed: %s",
			fsal_export->export_id, ngnfs_last_error());
		return ngnfs_fsal_status(ret);
	}

	memset(info, 0, sizeof(*info));
	info->total_bytes = statfs.total_blocks * statfs.block_size;
	info->free_bytes = statfs.free_blocks * statfs.block_size;
	info->avail_bytes = info->free_bytes;
	info->total_files = statfs.total_inodes;
	info->free_files = statfs.free_inodes;
	info->avail_files = statfs.free_inodes;
	/* timestamps are kept with nanoseconds */
	info->time_delta.tv_sec = 0;
	info->time_delta.tv_nsec = 1;
	return fsalstat(ERR_FSAL_NO_ERROR, 0);
}

/*
 * Checks a handle that came off the wire.  Our handles are libcore's 16-byte
 * little-endian wire form whatever the host, so nothing is byte-swapped
 * (FH_FSAL_BIG_ENDIAN does not concern us); only the length can be wrong.
 */
static fsal_status_t ngnfs_fsal_wire_to_host(struct fsal_export *fsal_export,
					     fsal_digesttype_t in_type, struct gsh_buffdesc *wire,
					     int flags)
{
	(void)in_type;
	(void)flags;

	if (wire->len != NGNFS_HANDLE_WIRE_SIZE) {
		LogInfo(COMPONENT_FSAL, "NGNFS: export %u got a %zu-byte handle, expected %d",
			fsal_export->export_id, wire->len, NGNFS_HANDLE_WIRE_SIZE);
		return fsalstat(ERR_FSAL_BADHANDLE, 0);
	}
	return fsalstat(ERR_FSAL_NO_ERROR, 0);
}

static pthread_once_t write_verifier_once = PTHREAD_ONCE_INIT;
static uint64_t write_verifier;

static void make_write_verifier(void)
{
	struct timespec now;
	uint64_t random_bits = 0;

	/* the clock and pid as well, in case getrandom is short */
	if (getrandom(&random_bits, sizeof(random_bits), 0) != sizeof(random_bits))
		LogWarn(COMPONENT_FSAL,
			"NGNFS: getrandom failed (%s), write verifier from the clock",
			strerror(errno));
	clock_gettime(CLOCK_REALTIME, &now);
	write_verifier = random_bits ^ ((uint64_t)now.tv_sec * 1000000000 + (uint64_t)now.tv_nsec) ^
			 ((uint64_t)getpid() << 40);
}

static uint64_t ngnfs_fsal_write_verifier(void)
{
	pthread_once(&write_verifier_once, make_write_verifier);
	return write_verifier;
}

static void ngnfs_fsal_get_write_verifier(struct fsal_export *fsal_export,
					  struct gsh_buffdesc *verf_desc)
{
	struct ngnfs_fsal_export *export = ngnfs_fsal_export_of(fsal_export);
	/* odd, so that every loss count gives another verifier */
	uint64_t verifier =
	    ngnfs_fsal_write_verifier() + ngnfs_write_losses(export->fs) * 0x9e3779b97f4a7c15ULL;

	memset(verf_desc->addr, 0, verf_desc->len);
	memcpy(verf_desc->addr, &verifier,
	       verf_desc->len < sizeof(verifier) ? verf_desc->len : sizeof(verifier));
}

static void ngnfs_fsal_export_ops_init(struct export_ops *ops)
{
	ops->release = ngnfs_fsal_release_export;
	ops->lookup_path = ngnfs_fsal_lookup_path;
	ops->wire_to_host = ngnfs_fsal_wire_to_host;
	ops->create_handle = ngnfs_fsal_create_handle;
	ops->get_fs_dynamic_info = ngnfs_fsal_get_fs_dynamic_info;
	ops->alloc_state = ngnfs_fsal_alloc_state;
	ops->get_write_verifier = ngnfs_fsal_get_write_verifier;
}

/* The guard line; see the comment at the top of this file. */
static void ngnfs_fsal_log_guard(const struct ngnfs_fsal_export *export)
{
	const nfs_core_parameter_t *core = &nfs_param.core_param;
	const nfs_version4_parameter_t *v4 = &nfs_param.nfsv4_param;

	LogEvent(COMPONENT_FSAL,
		 "NGNFS guard: fsal_api=%d.%d export_id=%u fsal_export_id=%u nfs_port=%u "
		 "core_options=0x%x manage_gids_expiration=%lld max_uid_to_group_reqs=%u "
		 "lease_lifetime=%u grace_period=%u graceless=%d only_numeric_owners=%d "
		 "max_client_ids=%u",
		 FSAL_MAJOR_VERSION, FSAL_MINOR_VERSION, op_ctx->ctx_export->export_id,
		 export->export.export_id, core->port[P_NFS], core->core_options,
		 (long long)core->manage_gids_expiration, core->max_uid_to_grp_reqs,
		 v4->lease_lifetime, v4->grace_period, v4->graceless, v4->only_numeric_owners,
		 v4->max_client_ids);
}

/*
 * Creates an export: parses the FSAL block, mounts the filesystem named by
 * Devices, and hands the export to ganesha (op_ctx->fsal_export).  On
 * failure nothing is left attached and the daemon drops only this export.
 */
fsal_status_t ngnfs_fsal_create_export(struct fsal_module *module, void *parse_node,
				       struct config_error_type *err_type,
				       const struct fsal_up_vector *up_ops)
{
	struct ngnfs_fsal_export *export;
	struct ngnfs_mount_options mount_options;
	uint8_t fs_id[16];
	uint64_t major = 0;
	uint64_t minor = 0;
	fsal_status_t status;
	int ret;
	int i;

	export = gsh_calloc(1, sizeof(*export));
	fsal_export_init(&export->export);
	ngnfs_fsal_export_ops_init(&export->export.exp_ops);

	ret = load_config_from_node(parse_node, &ngnfs_fsal_export_config_block, &export->options,
				    true, err_type);
	if (ret != 0) {
		LogCrit(COMPONENT_FSAL, "NGNFS: export %u has an invalid FSAL block",
			op_ctx->ctx_export->export_id);
		status = fsalstat(ERR_FSAL_INVAL, EINVAL);
		goto out_free;
	}

	ret = fsal_attach_export(module, &export->export.exports);
	if (ret != 0) {
		LogCrit(COMPONENT_FSAL, "NGNFS: could not attach export %u: %s",
			op_ctx->ctx_export->export_id, strerror(ret));
		status = posix2fsal_status(ret);
		goto out_free;
	}
	export->export.fsal = module;
	export->export.up_ops = up_ops;

	memset(&mount_options, 0, sizeof(mount_options));
	mount_options.device_addresses = (const char *const *)export->options.device_addresses;
	mount_options.device_count = export->options.device_count;
	mount_options.durability = export->options.durability;
	mount_options.cache_bytes = export->options.cache_size;
	mount_options.writeback_interval_ms = export->options.writeback_interval_ms;
	mount_options.reclaim_timeout_ms = export->options.reclaim_timeout_ms;
	mount_options.allow_unreachable_devices = export->options.allow_unreachable_devices;

	ret = ngnfs_mount(&mount_options, &export->fs);
	if (ret < 0) {
		LogCrit(COMPONENT_FSAL, "NGNFS: export %u could not mount %s = \"%s\": %s",
			op_ctx->ctx_export->export_id,
			export->options.devices ? "Devices" : "Devices_File",
			export->options.devices ? export->options.devices
						: export->options.devices_file,
			ngnfs_last_error());
		export->fs = NULL;
		status = ngnfs_fsal_status(ret);
		goto out_detach;
	}

	ret = ngnfs_root(export->fs, &export->root);
	if (ret < 0) {
		LogCrit(COMPONENT_FSAL, "NGNFS: export %u could not find the root directory: %s",
			op_ctx->ctx_export->export_id, ngnfs_last_error());
		status = ngnfs_fsal_status(ret);
		goto out_unmount;
	}

	/* The NFS fsid of every object is the filesystem's id. */
	ngnfs_fs_id(export->fs, fs_id);
	for (i = 7; i >= 0; i--) {
		major = (major << 8) | fs_id[i];
		minor = (minor << 8) | fs_id[8 + i];
	}
	export->fsid.major = major;
	export->fsid.minor = minor;

	ret = ngnfs_fsal_up_start(export);
	if (ret < 0) {
		status = ngnfs_fsal_status(ret);
		goto out_unmount;
	}

	op_ctx->fsal_export = &export->export;
	/* not fatal: the orphans then wait for `ngnfs reclaim-orphans` */
	(void)ngnfs_fsal_orphans_start(export);

	LogEvent(COMPONENT_FSAL,
		 "NGNFS: export %u mounted %u device(s) %s \"%s\" durability=%s cache_size=%" PRIu64
		 " writeback_interval_ms=%u reclaim_timeout_ms=%u allow_unreachable_devices=%s"
		 " reclaim_orphans=%s"
		 " root=%" PRIu64 ".%" PRIu64 " write_verifier=%016" PRIx64,
		 op_ctx->ctx_export->export_id, export->options.device_count,
		 export->options.devices ? "Devices" : "Devices_File",
		 export->options.devices ? export->options.devices : export->options.devices_file,
		 ngnfs_fsal_durability_name(export->options.durability), export->options.cache_size,
		 export->options.writeback_interval_ms, export->options.reclaim_timeout_ms,
		 export->options.allow_unreachable_devices ? "true" : "false",
		 export->options.reclaim_orphans ? "true" : "false", export->root.ino,
		 export->root.generation, ngnfs_fsal_write_verifier());
	ngnfs_fsal_log_guard(export);
	return fsalstat(ERR_FSAL_NO_ERROR, 0);

out_unmount:
	ngnfs_unmount(export->fs);
out_detach:
	fsal_detach_export(module, &export->export.exports);
out_free:
	free_export_ops(&export->export);
	ngnfs_fsal_export_options_free(&export->options);
	gsh_free(export);
	return status;
}
