// SPDX-License-Identifier: GPL-2.0
/*
 * Object operations of the NGNFS FSAL, and the export operations that
 * produce objects (lookup_path, create_handle).
 *
 * Each operation is one call into libcore's native API (libcore/ngnfs.h);
 * libcore's errors are negative errno and become FSAL statuses through
 * ngnfs_fsal_status().  MDCACHE sits above us and caches objects and attributes,
 * so an object here is only a handle: allocated per lookup, freed by
 * release, deduplicated by MDCACHE through handle_to_key.
 *
 * readdir gathers a batch of entries from ngnfs_readdir first and only then
 * fetches attributes and hands entries to ganesha: libcore runs the readdir
 * callback inside its transaction, and calling back into libcore (getattr)
 * or into MDCACHE (which takes its own locks) from there would hold blocks
 * while waiting.
 *
 * XXX: only what an export root needs so far (lookup, readdir, getattrs,
 * handles).  Create, remove, rename, links, symlinks, setattr, open, read,
 * write, commit and xattrs come in the next phase; ganesha's defaults
 * answer NOTSUPP for them meanwhile.
 */

#include "config.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "fsal.h"
#include "fsal_convert.h"
#include "FSAL/fsal_commonlib.h"

#include "internal.h"

/* Entries gathered from libcore per round of readdir. */
#define NGNFS_READDIR_BATCH 64

/* What we fill in every attribute list. */
#define NGNFS_ATTRS (ATTRS_POSIX | ATTR_CREATION)

static void ngnfs_fsal_attr_to_fsal(const struct ngnfs_fsal_export *export,
				    const struct ngnfs_attr *attr, struct fsal_attrlist *attrs)
{
	attrs->valid_mask = NGNFS_ATTRS;
	attrs->supported = NGNFS_ATTRS;
	attrs->type = posix2fsal_type(attr->mode);
	attrs->filesize = attr->size;
	attrs->fsid = export->fsid;
	attrs->fileid = attr->ino;
	attrs->mode = attr->mode & 07777;
	attrs->numlinks = attr->nlink;
	attrs->owner = attr->uid;
	attrs->group = attr->gid;
	attrs->rawdev = posix2fsal_devt(attr->rdev);
	attrs->atime = attr->atime;
	attrs->mtime = attr->mtime;
	attrs->ctime = attr->ctime;
	attrs->creation = attr->crtime;
	attrs->change = attr->change;
	attrs->spaceused = attr->blocks * 512;
}

static struct ngnfs_fsal_object *ngnfs_fsal_object_alloc(struct ngnfs_fsal_export *export,
							 const struct ngnfs_handle *handle,
							 const struct ngnfs_attr *attr)
{
	struct ngnfs_fsal_object *object;

	object = gsh_calloc(1, sizeof(*object));
	object->export = export;
	object->handle = *handle;
	ngnfs_handle_to_wire(handle, object->wire);

	fsal_obj_handle_init(&object->object, &export->export, posix2fsal_type(attr->mode));
	object->object.obj_ops = &ngnfs_fsal_module.object_ops;
	object->object.fsid = export->fsid;
	object->object.fileid = attr->ino;
	return object;
}

/* Hands a new object and, if asked for, its attributes to the caller. */
static fsal_status_t ngnfs_fsal_object_out(struct ngnfs_fsal_export *export,
					   const struct ngnfs_handle *handle,
					   const struct ngnfs_attr *attr,
					   struct fsal_obj_handle **object_out,
					   struct fsal_attrlist *attrs_out)
{
	struct ngnfs_fsal_object *object = ngnfs_fsal_object_alloc(export, handle, attr);

	if (attrs_out != NULL)
		ngnfs_fsal_attr_to_fsal(export, attr, attrs_out);
	*object_out = &object->object;
	return fsalstat(ERR_FSAL_NO_ERROR, 0);
}

static fsal_status_t ngnfs_fsal_lookup(struct fsal_obj_handle *dir_object, const char *name,
				       struct fsal_obj_handle **object_out,
				       struct fsal_attrlist *attrs_out)
{
	struct ngnfs_fsal_object *dir = ngnfs_fsal_object_of(dir_object);
	struct ngnfs_handle handle;
	struct ngnfs_attr attr;
	int ret;

	ret = ngnfs_lookup(dir->export->fs, &dir->handle, name, &handle, &attr);
	if (ret < 0) {
		if (ret != -ENOENT)
			LogDebug(COMPONENT_FSAL,
				 "NGNFS: lookup of \"%s\" in inode %" PRIu64 " failed: %s", name,
				 dir->handle.ino, ngnfs_last_error());
		return ngnfs_fsal_status(ret);
	}
	return ngnfs_fsal_object_out(dir->export, &handle, &attr, object_out, attrs_out);
}

struct ngnfs_fsal_readdir_entry {
	struct ngnfs_handle handle;
	uint64_t cookie;
	char name[NGNFS_NAME_MAX + 1];
};

struct ngnfs_fsal_readdir_batch {
	unsigned int count;
	struct ngnfs_fsal_readdir_entry entries[NGNFS_READDIR_BATCH];
};

/* libcore's readdir callback: only copies, never calls anything. */
static int ngnfs_fsal_readdir_gather(void *arg, const char *name, size_t name_length,
				     const struct ngnfs_handle *handle, uint32_t type_mode,
				     uint64_t cookie)
{
	struct ngnfs_fsal_readdir_batch *batch = arg;
	struct ngnfs_fsal_readdir_entry *entry;

	(void)type_mode;

	if (batch->count == NGNFS_READDIR_BATCH)
		return 1;
	if (name_length > NGNFS_NAME_MAX)
		name_length = NGNFS_NAME_MAX;
	entry = &batch->entries[batch->count++];
	entry->handle = *handle;
	entry->cookie = cookie;
	memcpy(entry->name, name, name_length);
	entry->name[name_length] = '\0';
	return 0;
}

/*
 * Gives ganesha one entry.  Returns 1 when ganesha wants no more, 0 to go
 * on (also when the entry vanished since readdir saw it), or a negative
 * errno.
 */
static int ngnfs_fsal_readdir_deliver(struct ngnfs_fsal_object *dir,
				      const struct ngnfs_fsal_readdir_entry *entry, void *dir_state,
				      fsal_readdir_cb cb, attrmask_t attrmask)
{
	struct ngnfs_fsal_export *export = dir->export;
	struct ngnfs_fsal_object *object;
	struct fsal_attrlist attrs;
	struct ngnfs_attr attr;
	enum fsal_dir_result result;
	int ret;

	/* NFS reserves cookies 0, 1 and 2; libcore's start at FIRST_COOKIE. */
	if (entry->cookie < FIRST_COOKIE) {
		LogCrit(COMPONENT_FSAL,
			"NGNFS: readdir of inode %" PRIu64
			" gave \"%s\" the reserved cookie %" PRIu64,
			dir->handle.ino, entry->name, entry->cookie);
		return -EIO;
	}

	ret = ngnfs_getattr(export->fs, &entry->handle, &attr);
	if (ret == -ESTALE || ret == -ENOENT)
		return 0;
	if (ret < 0) {
		LogDebug(COMPONENT_FSAL, "NGNFS: getattr of \"%s\" (inode %" PRIu64 ") failed: %s",
			 entry->name, entry->handle.ino, ngnfs_last_error());
		return ret;
	}

	object = ngnfs_fsal_object_alloc(export, &entry->handle, &attr);
	fsal_prepare_attrs(&attrs, attrmask);
	ngnfs_fsal_attr_to_fsal(export, &attr, &attrs);
	/* The callback owns the object from here on. */
	result = cb(entry->name, &object->object, &attrs, dir_state, entry->cookie);
	fsal_release_attrs(&attrs);
	return result >= DIR_TERMINATE ? 1 : 0;
}

static fsal_status_t ngnfs_fsal_readdir(struct fsal_obj_handle *dir_object, fsal_cookie_t *whence,
					void *dir_state, fsal_readdir_cb cb, attrmask_t attrmask,
					bool *eof)
{
	struct ngnfs_fsal_object *dir = ngnfs_fsal_object_of(dir_object);
	struct ngnfs_fsal_readdir_batch *batch;
	uint64_t cookie = whence != NULL ? *whence : 0;
	bool end_of_directory = false;
	unsigned int i;
	int ret = 0;

	*eof = false;
	batch = gsh_malloc(sizeof(*batch));
	while (!end_of_directory) {
		batch->count = 0;
		ret = ngnfs_readdir(dir->export->fs, &dir->handle, cookie,
				    ngnfs_fsal_readdir_gather, batch, &end_of_directory);
		if (ret < 0) {
			LogDebug(COMPONENT_FSAL, "NGNFS: readdir of inode %" PRIu64 " failed: %s",
				 dir->handle.ino, ngnfs_last_error());
			break;
		}
		for (i = 0; i < batch->count; i++) {
			ret = ngnfs_fsal_readdir_deliver(dir, &batch->entries[i], dir_state, cb,
							 attrmask);
			cookie = batch->entries[i].cookie;
			if (ret != 0)
				break;
		}
		if (ret != 0)
			break;
		if (batch->count == 0 && !end_of_directory) {
			/* libcore promised more but gave nothing: do not spin */
			LogCrit(COMPONENT_FSAL,
				"NGNFS: readdir of inode %" PRIu64
				" returned no entry after cookie %" PRIu64
				" but no end of directory",
				dir->handle.ino, cookie);
			ret = -EIO;
			break;
		}
	}
	gsh_free(batch);

	if (ret < 0)
		return ngnfs_fsal_status(ret);
	/* ret == 1: ganesha stopped us before the end */
	*eof = ret == 0 && end_of_directory;
	return fsalstat(ERR_FSAL_NO_ERROR, 0);
}

static fsal_status_t ngnfs_fsal_getattrs(struct fsal_obj_handle *fsal_object,
					 struct fsal_attrlist *attrs)
{
	struct ngnfs_fsal_object *object = ngnfs_fsal_object_of(fsal_object);
	struct ngnfs_attr attr;
	int ret;

	ret = ngnfs_getattr(object->export->fs, &object->handle, &attr);
	if (ret < 0) {
		LogDebug(COMPONENT_FSAL, "NGNFS: getattr of inode %" PRIu64 " failed: %s",
			 object->handle.ino, ngnfs_last_error());
		if (attrs->request_mask & ATTR_RDATTR_ERR)
			attrs->valid_mask = ATTR_RDATTR_ERR;
		return ngnfs_fsal_status(ret);
	}
	ngnfs_fsal_attr_to_fsal(object->export, &attr, attrs);
	return fsalstat(ERR_FSAL_NO_ERROR, 0);
}

static fsal_status_t ngnfs_fsal_handle_to_wire(const struct fsal_obj_handle *fsal_object,
					       fsal_digesttype_t output_type,
					       struct gsh_buffdesc *wire)
{
	const struct ngnfs_fsal_object *object =
	    container_of(fsal_object, const struct ngnfs_fsal_object, object);

	switch (output_type) {
	case FSAL_DIGEST_NFSV3:
	case FSAL_DIGEST_NFSV4:
		if (wire->len < NGNFS_HANDLE_WIRE_SIZE) {
			LogMajor(COMPONENT_FSAL,
				 "NGNFS: no room for the handle of inode %" PRIu64
				 ": %zu bytes, need %d",
				 object->handle.ino, wire->len, NGNFS_HANDLE_WIRE_SIZE);
			return fsalstat(ERR_FSAL_TOOSMALL, 0);
		}
		memcpy(wire->addr, object->wire, NGNFS_HANDLE_WIRE_SIZE);
		wire->len = NGNFS_HANDLE_WIRE_SIZE;
		return fsalstat(ERR_FSAL_NO_ERROR, 0);
	default:
		return fsalstat(ERR_FSAL_SERVERFAULT, 0);
	}
}

/* The cache key is the wire handle: inode number plus generation. */
static void ngnfs_fsal_handle_to_key(struct fsal_obj_handle *fsal_object, struct gsh_buffdesc *key)
{
	struct ngnfs_fsal_object *object = ngnfs_fsal_object_of(fsal_object);

	key->addr = object->wire;
	key->len = NGNFS_HANDLE_WIRE_SIZE;
}

static void ngnfs_fsal_release(struct fsal_obj_handle *fsal_object)
{
	struct ngnfs_fsal_object *object = ngnfs_fsal_object_of(fsal_object);

	fsal_obj_handle_fini(fsal_object);
	gsh_free(object);
}

void ngnfs_fsal_object_ops_init(struct fsal_obj_ops *ops)
{
	fsal_default_obj_ops_init(ops);
	ops->release = ngnfs_fsal_release;
	ops->lookup = ngnfs_fsal_lookup;
	ops->readdir = ngnfs_fsal_readdir;
	ops->getattrs = ngnfs_fsal_getattrs;
	ops->handle_to_wire = ngnfs_fsal_handle_to_wire;
	ops->handle_to_key = ngnfs_fsal_handle_to_key;
}

/*
 * The export's Path is a path inside the ngnfs filesystem ("/" for its
 * root); walk it from the root one name at a time.
 */
fsal_status_t ngnfs_fsal_lookup_path(struct fsal_export *fsal_export, const char *path,
				     struct fsal_obj_handle **object_out,
				     struct fsal_attrlist *attrs_out)
{
	struct ngnfs_fsal_export *export = ngnfs_fsal_export_of(fsal_export);
	struct ngnfs_handle handle = export->root;
	struct ngnfs_handle child;
	struct ngnfs_attr attr;
	char name[NGNFS_NAME_MAX + 1];
	const char *start = path;
	size_t length;
	int ret;

	*object_out = NULL;
	ret = ngnfs_getattr(export->fs, &handle, &attr);
	while (ret == 0) {
		while (*start == '/')
			start++;
		if (*start == '\0')
			break;
		length = strcspn(start, "/");
		if (length > NGNFS_NAME_MAX) {
			ret = -ENAMETOOLONG;
			break;
		}
		memcpy(name, start, length);
		name[length] = '\0';
		start += length;
		ret = ngnfs_lookup(export->fs, &handle, name, &child, &attr);
		handle = child;
	}
	if (ret < 0) {
		LogCrit(COMPONENT_FSAL, "NGNFS: export %u: cannot find path \"%s\": %s",
			fsal_export->export_id, path, ngnfs_last_error());
		return ngnfs_fsal_status(ret);
	}
	return ngnfs_fsal_object_out(export, &handle, &attr, object_out, attrs_out);
}

/* Turns a wire handle (checked by wire_to_host) back into an object. */
fsal_status_t ngnfs_fsal_create_handle(struct fsal_export *fsal_export, struct gsh_buffdesc *wire,
				       struct fsal_obj_handle **object_out,
				       struct fsal_attrlist *attrs_out)
{
	struct ngnfs_fsal_export *export = ngnfs_fsal_export_of(fsal_export);
	struct ngnfs_handle handle;
	struct ngnfs_attr attr;
	int ret;

	*object_out = NULL;
	if (wire->len != NGNFS_HANDLE_WIRE_SIZE) {
		LogInfo(COMPONENT_FSAL, "NGNFS: export %u: %zu-byte handle, expected %d",
			fsal_export->export_id, wire->len, NGNFS_HANDLE_WIRE_SIZE);
		return fsalstat(ERR_FSAL_BADHANDLE, 0);
	}
	ngnfs_handle_from_wire(wire->addr, &handle);
	ret = ngnfs_getattr(export->fs, &handle, &attr);
	if (ret < 0) {
		LogDebug(COMPONENT_FSAL,
			 "NGNFS: handle of inode %" PRIu64 " generation %" PRIu64 ": %s",
			 handle.ino, handle.generation, ngnfs_last_error());
		return ngnfs_fsal_status(ret);
	}
	return ngnfs_fsal_object_out(export, &handle, &attr, object_out, attrs_out);
}
