// SPDX-License-Identifier: GPL-2.0
/*
 * XXX: temporary stand-in for libcore, to be deleted when the FSAL links
 * ngnfs_core (cmake -DNGNFS_FSAL_LIBCORE=ON).
 *
 * It implements, with the exact signatures of libcore/ngnfs.h, only the
 * ngnfs_* calls the FSAL makes today, over a filesystem that holds nothing
 * but an empty root directory in memory.  It exists so that the build and
 * load path of the plugin (config.h, linking, registration, export
 * creation, NFSv4 mount of the export root) can be built and guarded
 * before libcore is ready, without any FSAL code that will be thrown away:
 * export.c and handle.c already call libcore's API.  Devices are accepted
 * but never contacted, nothing is stored, and nothing here is durable.
 */

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ngnfs.h"

/* XXX: libcore decides the real root inode (the number of its block). */
#define SCAFFOLD_ROOT_INO	 1
#define SCAFFOLD_ROOT_GENERATION 1

struct ngnfs_fs {
	struct timespec created;
};

static __thread const char *scaffold_last_error = "no error";

static const uint8_t scaffold_fs_id[16] = "ngnfs scaffold!";

void ngnfs_handle_to_wire(const struct ngnfs_handle *handle, uint8_t wire[NGNFS_HANDLE_WIRE_SIZE])
{
	int i;

	for (i = 0; i < 8; i++) {
		wire[i] = (uint8_t)(handle->ino >> (8 * i));
		wire[8 + i] = (uint8_t)(handle->generation >> (8 * i));
	}
}

void ngnfs_handle_from_wire(const uint8_t wire[NGNFS_HANDLE_WIRE_SIZE], struct ngnfs_handle *handle)
{
	int i;

	handle->ino = 0;
	handle->generation = 0;
	for (i = 7; i >= 0; i--) {
		handle->ino = (handle->ino << 8) | wire[i];
		handle->generation = (handle->generation << 8) | wire[8 + i];
	}
}

const char *ngnfs_last_error(void)
{
	return scaffold_last_error;
}

int ngnfs_mount(const struct ngnfs_mount_options *options, struct ngnfs_fs **fs_out)
{
	struct ngnfs_fs *fs;

	*fs_out = NULL;
	if (options->device_count == 0) {
		scaffold_last_error = "no devices given";
		return -EINVAL;
	}
	fs = calloc(1, sizeof(*fs));
	if (fs == NULL) {
		scaffold_last_error = "out of memory";
		return -ENOMEM;
	}
	clock_gettime(CLOCK_REALTIME, &fs->created);
	*fs_out = fs;
	return 0;
}

void ngnfs_unmount(struct ngnfs_fs *fs)
{
	free(fs);
}

int ngnfs_root(struct ngnfs_fs *fs, struct ngnfs_handle *root)
{
	(void)fs;
	root->ino = SCAFFOLD_ROOT_INO;
	root->generation = SCAFFOLD_ROOT_GENERATION;
	return 0;
}

void ngnfs_fs_id(struct ngnfs_fs *fs, uint8_t fs_id[16])
{
	(void)fs;
	memcpy(fs_id, scaffold_fs_id, 16);
}

static bool is_root(const struct ngnfs_handle *handle)
{
	return handle->ino == SCAFFOLD_ROOT_INO && handle->generation == SCAFFOLD_ROOT_GENERATION;
}

int ngnfs_getattr(struct ngnfs_fs *fs, const struct ngnfs_handle *handle, struct ngnfs_attr *attr)
{
	if (!is_root(handle)) {
		scaffold_last_error = "the scaffold has no such inode";
		return -ESTALE;
	}
	memset(attr, 0, sizeof(*attr));
	attr->ino = handle->ino;
	attr->generation = handle->generation;
	attr->mode = S_IFDIR | 0755;
	attr->nlink = 2;
	attr->size = 4096;
	attr->blocks = 8;
	attr->change = 1;
	attr->atime = fs->created;
	attr->mtime = fs->created;
	attr->ctime = fs->created;
	attr->crtime = fs->created;
	return 0;
}

int ngnfs_lookup(struct ngnfs_fs *fs, const struct ngnfs_handle *dir, const char *name,
		 struct ngnfs_handle *handle_out, struct ngnfs_attr *attr_out)
{
	(void)fs;
	(void)name;
	(void)handle_out;
	(void)attr_out;
	if (!is_root(dir)) {
		scaffold_last_error = "the scaffold has no such inode";
		return -ESTALE;
	}
	scaffold_last_error = "the scaffold root is empty";
	return -ENOENT;
}

int ngnfs_readdir(struct ngnfs_fs *fs, const struct ngnfs_handle *dir, uint64_t cookie,
		  ngnfs_readdir_fn fn, void *arg, bool *end_of_directory)
{
	(void)fs;
	(void)cookie;
	(void)fn;
	(void)arg;
	if (!is_root(dir)) {
		scaffold_last_error = "the scaffold has no such inode";
		return -ESTALE;
	}
	*end_of_directory = true;
	return 0;
}

int ngnfs_statfs(struct ngnfs_fs *fs, struct ngnfs_statfs *statfs)
{
	(void)fs;
	memset(statfs, 0, sizeof(*statfs));
	statfs->block_size = 4096;
	statfs->total_blocks = 1;
	statfs->total_inodes = 1;
	statfs->device_count = 1;
	statfs->name_max = NGNFS_NAME_MAX;
	return 0;
}
