// SPDX-License-Identifier: LGPL-3.0-or-later
/*
 * Namespace and attribute operations of the NGNFS FSAL, and the export
 * operations that produce objects (lookup_path, create_handle).
 *
 * Each operation is one call into libcore's native API (libcore/ngnfs.h);
 * libcore's errors are negative errno and become FSAL statuses through
 * ngnfs_fsal_status() (errors.c).  MDCACHE sits above us and caches
 * objects and attributes, so an object here is only a handle: allocated
 * per lookup, freed by release, deduplicated by MDCACHE through
 * handle_to_key.  New objects belong to the caller's uid and gid
 * (op_ctx->creds).
 *
 * Permissions: ganesha 4.3 checks lookup, readdir, link, setattr and
 * opens of existing files itself, but leaves the directory checks of
 * create, mkdir, mknod, symlink, unlink and rename to the FSAL (FSAL_VFS
 * gets them from the kernel by switching credentials).  libcore knows no
 * credentials, so ngnfs_fsal_may_change_dir() does what Linux's
 * may_create/may_delete do: write and search permission on the directory
 * (test_access on our attributes), the sticky bit, and write permission on
 * a directory that moves to another parent (its ".." changes).
 *
 * Creates that carry more attributes than the mode and explicit times
 * (NFSv4 OPEN/CREATE with owner or size) are a create followed by a
 * setattr: two transactions.  A gateway crash between them leaves an object
 * with the caller's owner, never a half-made one; the client retries the
 * create and gets EXIST.  An open2 create passes explicit times, and so
 * the exclusive-create verifier kept in atime/mtime, into the create's own
 * transaction (ngnfs_create_with_times), so a retransmitted exclusive
 * create always finds its verifier.
 *
 * readdir gathers a batch of entries from ngnfs_readdir first and only then
 * fetches attributes and hands entries to ganesha: libcore's callback must
 * not call back into libcore (getattr) or into MDCACHE (which takes its own
 * locks) while libcore is in the middle of a directory walk.
 *
 * XXX:
 *  - no setgid-directory group inheritance (libcore has no rule for it);
 *  - ATTR_CREATION cannot be set (ignored, as on Linux);
 *  - readdir does one getattr per entry for its attributes; libcore's
 *    readdir could return them with the entry.
 */

#include "config.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "fsal.h"
#include "fsal_convert.h"
#include "FSAL/fsal_commonlib.h"

#include "internal.h"

/* Entries gathered from libcore per round of readdir. */
#define NGNFS_READDIR_BATCH 64

/* What we fill in every attribute list. */
#define NGNFS_ATTRS (ATTRS_POSIX | ATTR_CREATION)

void ngnfs_fsal_attr_to_fsal(const struct ngnfs_fsal_export *export, const struct ngnfs_attr *attr,
			     struct fsal_attrlist *attrs)
{
	attrs->valid_mask = NGNFS_ATTRS;
	attrs->supported = export->export.fsal->fs_info.supported_attrs;
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
	object->global_fd.openflags = FSAL_O_CLOSED;
	object->object.obj_ops = &ngnfs_fsal_module.object_ops;
	object->object.fsid = export->fsid;
	object->object.fileid = attr->ino;
	ngnfs_fsal_up_track(export, handle);
	return object;
}

/* How often a read overtaken by revocations is tried before we give up. */
#define NGNFS_ATTR_READS_MAX 8

/*
 * ngnfs_getattr for attributes that go to ganesha: reads again while a
 * revocation of the inode overtook the read (fsal_up.c), so MDCACHE does
 * not store what another client changed meanwhile.  The caller has the
 * inode in hand (ngnfs_fsal_hand_begin): if revocations keep overtaking
 * us, the last read goes out and the second delivery clears it.
 */
int ngnfs_fsal_getattr_settled(struct ngnfs_fsal_export *export, const struct ngnfs_handle *handle,
			       struct ngnfs_attr *attr)
{
	unsigned int reads;
	uint64_t sequence;
	int ret;

	for (reads = 1;; reads++) {
		sequence = ngnfs_fsal_attr_sequence(export);
		ret = ngnfs_getattr(export->fs, handle, attr);
		if (ret < 0)
			return ret;
		if (export->test_getattr_read_delay_ms)
			usleep(export->test_getattr_read_delay_ms * 1000);
		if (!ngnfs_fsal_attr_overtaken(export, handle->ino, sequence))
			return 0;
		if (reads == NGNFS_ATTR_READS_MAX) {
			LogInfo(
			    COMPONENT_FSAL,
			    "NGNFS: attributes of inode %" PRIu64
			    " were overtaken by revocations %u times; handing out the last read",
			    handle->ino, reads);
			return 0;
		}
		LogDebug(COMPONENT_FSAL,
			 "NGNFS: attributes of inode %" PRIu64
			 " were overtaken by a revocation; reading them again",
			 handle->ino);
	}
}

/*
 * Fills attrs_out from attr, which a libcore call read after taking
 * sequence (ngnfs_fsal_attr_sequence); reads again if a revocation of the
 * inode overtook that call.  If that read fails (the inode went away, its
 * device is away) the call's own attributes go out: the call succeeded,
 * and with the inode in hand during the delivery, the second delivery
 * clears them from MDCACHE.
 */
void ngnfs_fsal_attrs_hand_out(struct ngnfs_fsal_export *export, const struct ngnfs_handle *handle,
			       const struct ngnfs_attr *attr, uint64_t sequence,
			       struct fsal_attrlist *attrs_out)
{
	struct ngnfs_attr again;
	int ret;

	ngnfs_fsal_hand_begin(export, handle->ino);
	if (ngnfs_fsal_attr_overtaken(export, handle->ino, sequence)) {
		ret = ngnfs_fsal_getattr_settled(export, handle, &again);
		if (ret == 0)
			attr = &again;
		else
			LogDebug(COMPONENT_FSAL,
				 "NGNFS: reading the overtaken attributes of inode %" PRIu64
				 " again failed: %s; handing out the first read",
				 handle->ino, ngnfs_last_error());
	}
	ngnfs_fsal_attr_to_fsal(export, attr, attrs_out);
	ngnfs_fsal_hand_end(export, handle->ino);
}

/*
 * Hands a new object and, if asked for, its attributes to the caller;
 * attr was read after taking sequence.
 */
fsal_status_t ngnfs_fsal_object_out(struct ngnfs_fsal_export *export,
				    const struct ngnfs_handle *handle,
				    const struct ngnfs_attr *attr, uint64_t sequence,
				    struct fsal_obj_handle **object_out,
				    struct fsal_attrlist *attrs_out)
{
	struct ngnfs_fsal_object *object = ngnfs_fsal_object_alloc(export, handle, attr);

	if (attrs_out != NULL)
		ngnfs_fsal_attrs_hand_out(export, handle, attr, sequence, attrs_out);
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
	fsal_status_t status;
	uint64_t sequence;
	int ret;

	/* MDCACHE adds the name to the directory's entries after we return */
	ngnfs_fsal_hand_begin(dir->export, dir->handle.ino);
	sequence = ngnfs_fsal_attr_sequence(dir->export);
	ret = ngnfs_lookup(dir->export->fs, &dir->handle, name, &handle, &attr);
	if (ret < 0) {
		if (ret != -ENOENT)
			LogDebug(COMPONENT_FSAL,
				 "NGNFS: lookup of \"%s\" in inode %" PRIu64 " failed: %s", name,
				 dir->handle.ino, ngnfs_last_error());
		status = ngnfs_fsal_status(ret);
	} else {
		status = ngnfs_fsal_object_out(dir->export, &handle, &attr, sequence, object_out,
					       attrs_out);
	}
	ngnfs_fsal_hand_end(dir->export, dir->handle.ino);
	return status;
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

	/* MDCACHE stores the attributes inside the callback */
	ngnfs_fsal_hand_begin(export, entry->handle.ino);
	ret = ngnfs_fsal_getattr_settled(export, &entry->handle, &attr);
	if (ret < 0) {
		ngnfs_fsal_hand_end(export, entry->handle.ino);
		if (ret == -ESTALE || ret == -ENOENT)
			return 0;
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
	ngnfs_fsal_hand_end(export, entry->handle.ino);
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
	/* MDCACHE fills and then trusts the directory's entries */
	ngnfs_fsal_hand_begin(dir->export, dir->handle.ino);
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
	ngnfs_fsal_hand_end(dir->export, dir->handle.ino);

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
	struct ngnfs_fsal_export *export = object->export;
	struct ngnfs_attr attr;
	int ret;

	ngnfs_fsal_hand_begin(export, object->handle.ino);
	ret = ngnfs_fsal_getattr_settled(export, &object->handle, &attr);
	if (ret < 0) {
		ngnfs_fsal_hand_end(export, object->handle.ino);
		LogDebug(COMPONENT_FSAL, "NGNFS: getattr of inode %" PRIu64 " failed: %s",
			 object->handle.ino, ngnfs_last_error());
		if (attrs->request_mask & ATTR_RDATTR_ERR)
			attrs->valid_mask = ATTR_RDATTR_ERR;
		return ngnfs_fsal_status(ret);
	}
	/* a thread preempted between our return and MDCACHE's update */
	if (export->test_getattr_return_delay_ms)
		usleep(export->test_getattr_return_delay_ms * 1000);
	ngnfs_fsal_attr_to_fsal(export, &attr, attrs);
	ngnfs_fsal_hand_end(export, object->handle.ino);
	return fsalstat(ERR_FSAL_NO_ERROR, 0);
}

/*
 * Applies attrs_set (ganesha's setattr mask) to an object in one libcore
 * setattr.  Returns the new attributes in attr_out when that is not NULL.
 */
fsal_status_t ngnfs_fsal_setattr_object(struct ngnfs_fsal_object *object,
					struct fsal_attrlist *attrs_set,
					struct ngnfs_attr *attr_out)
{
	struct ngnfs_fsal_export *export = object->export;
	attrmask_t mask = attrs_set->valid_mask;
	struct ngnfs_setattr set;
	struct ngnfs_attr attr;
	int ret;

	memset(&set, 0, sizeof(set));
	if (FSAL_TEST_MASK(mask, ATTR_MODE)) {
		set.mask |= NGNFS_SET_MODE;
		set.mode = fsal2unix_mode(attrs_set->mode) &
			   ~export->export.exp_ops.fs_umask(&export->export);
	}
	if (FSAL_TEST_MASK(mask, ATTR_OWNER)) {
		set.mask |= NGNFS_SET_UID;
		set.uid = (uint32_t)attrs_set->owner;
	}
	if (FSAL_TEST_MASK(mask, ATTR_GROUP)) {
		set.mask |= NGNFS_SET_GID;
		set.gid = (uint32_t)attrs_set->group;
	}
	if (FSAL_TEST_MASK(mask, ATTR_SIZE)) {
		if (object->object.type != REGULAR_FILE) {
			LogDebug(COMPONENT_FSAL,
				 "NGNFS: setattr of inode %" PRIu64 ": size of a non-regular file",
				 object->handle.ino);
			return fsalstat(ERR_FSAL_INVAL, EINVAL);
		}
		set.mask |= NGNFS_SET_SIZE;
		set.size = attrs_set->filesize;
	}
	if (FSAL_TEST_MASK(mask, ATTR_ATIME_SERVER)) {
		set.mask |= NGNFS_SET_ATIME_NOW;
	} else if (FSAL_TEST_MASK(mask, ATTR_ATIME)) {
		set.mask |= NGNFS_SET_ATIME;
		set.atime = attrs_set->atime;
	}
	if (FSAL_TEST_MASK(mask, ATTR_MTIME_SERVER)) {
		set.mask |= NGNFS_SET_MTIME_NOW;
	} else if (FSAL_TEST_MASK(mask, ATTR_MTIME)) {
		set.mask |= NGNFS_SET_MTIME;
		set.mtime = attrs_set->mtime;
	}
	if (FSAL_TEST_MASK(mask, ATTR_CTIME)) {
		set.mask |= NGNFS_SET_CTIME;
		set.ctime = attrs_set->ctime;
	}
	if (FSAL_TEST_MASK(mask, ATTR_ACL)) {
		LogDebug(COMPONENT_FSAL, "NGNFS: setattr of inode %" PRIu64 ": no ACL support",
			 object->handle.ino);
		return fsalstat(ERR_FSAL_ATTRNOTSUPP, 0);
	}
	if (set.mask == 0)
		return fsalstat(ERR_FSAL_NO_ERROR, 0);

	ret = ngnfs_setattr(export->fs, &object->handle, &set, &attr);
	if (ret < 0) {
		LogDebug(COMPONENT_FSAL, "NGNFS: setattr 0x%x of inode %" PRIu64 " failed: %s",
			 set.mask, object->handle.ino, ngnfs_last_error());
		return ngnfs_fsal_status(ret);
	}
	if (attr_out != NULL)
		*attr_out = attr;
	return fsalstat(ERR_FSAL_NO_ERROR, 0);
}

static fsal_status_t ngnfs_fsal_setattr2(struct fsal_obj_handle *fsal_object, bool bypass,
					 struct state_t *state, struct fsal_attrlist *attrs_set)
{
	struct ngnfs_fsal_object *object = ngnfs_fsal_object_of(fsal_object);
	fsal_status_t status;

	/*
	 * A size change needs the file open for writing by this state, or no
	 * conflicting share (NFSv4 SETATTR with a stateid; ganesha already
	 * checked the caller may write).
	 */
	if (FSAL_TEST_MASK(attrs_set->valid_mask, ATTR_SIZE) && fsal_object->type == REGULAR_FILE) {
		bool has_lock = false;
		bool closefd = false;
		bool reusing_open_state_fd = false;

		status = fsal_find_fd(NULL, fsal_object, (struct fsal_fd *)&object->global_fd,
				      &object->share, bypass, state, FSAL_O_WRITE, NULL, NULL,
				      &has_lock, &closefd, false, &reusing_open_state_fd);
		if (FSAL_IS_ERROR(status)) {
			LogDebug(COMPONENT_FSAL,
				 "NGNFS: truncate of inode %" PRIu64 " refused by share: %s",
				 object->handle.ino, msg_fsal_err(status.major));
			return status;
		}
		if (has_lock)
			PTHREAD_RWLOCK_unlock(&fsal_object->obj_lock);
	}
	return ngnfs_fsal_setattr_object(object, attrs_set, NULL);
}

/*
 * Linux's may_create / may_delete for the caller: write and search on dir;
 * with victim (the entry to be removed or replaced) also the sticky bit:
 * in a sticky directory only root and the owners of the directory or of
 * the entry may remove it.
 */
fsal_status_t ngnfs_fsal_may_change_dir(struct fsal_obj_handle *dir_object,
					const struct ngnfs_handle *victim)
{
	struct ngnfs_fsal_object *dir = ngnfs_fsal_object_of(dir_object);
	const struct user_cred *creds = &op_ctx->creds;
	struct ngnfs_attr dir_attr;
	struct ngnfs_attr victim_attr;
	fsal_status_t status;
	int ret;

	status = dir_object->obj_ops->test_access(dir_object,
						  FSAL_MODE_MASK_SET(FSAL_W_OK) |
						      FSAL_MODE_MASK_SET(FSAL_X_OK) |
						      FSAL_ACE4_MASK_SET(FSAL_ACE_PERM_EXECUTE) |
						      FSAL_ACE4_MASK_SET(FSAL_ACE_PERM_ADD_FILE),
						  NULL, NULL, false);
	if (FSAL_IS_ERROR(status))
		return status;
	if (victim == NULL || creds->caller_uid == 0)
		return status;

	ret = ngnfs_getattr(dir->export->fs, &dir->handle, &dir_attr);
	if (ret < 0)
		return ngnfs_fsal_status(ret);
	if (!(dir_attr.mode & S_ISVTX) || dir_attr.uid == creds->caller_uid)
		return status;
	ret = ngnfs_getattr(dir->export->fs, victim, &victim_attr);
	if (ret < 0)
		return ngnfs_fsal_status(ret);
	if (victim_attr.uid == creds->caller_uid)
		return status;
	return fsalstat(ERR_FSAL_PERM, EPERM);
}

/*
 * Creates name in dir with the type and permission bits of mode, owned by
 * the caller, then applies whatever else attrs_in asks for.
 */
static fsal_status_t
ngnfs_fsal_create_in_hand(struct ngnfs_fsal_object *dir, const char *name, uint32_t mode,
			  uint64_t rdev, const char *symlink_target, struct fsal_attrlist *attrs_in,
			  struct fsal_obj_handle **object_out, struct fsal_attrlist *attrs_out)
{
	struct ngnfs_fsal_export *export = dir->export;
	struct ngnfs_fsal_object *object;
	struct fsal_attrlist rest;
	struct ngnfs_handle handle;
	struct ngnfs_attr attr;
	uint32_t uid = (uint32_t)op_ctx->creds.caller_uid;
	uint32_t gid = (uint32_t)op_ctx->creds.caller_gid;
	fsal_status_t status;
	uint64_t sequence;
	int ret;

	*object_out = NULL;
	status = ngnfs_fsal_may_change_dir(&dir->object, NULL);
	if (FSAL_IS_ERROR(status))
		return status;
	sequence = ngnfs_fsal_attr_sequence(export);
	if (symlink_target != NULL)
		ret = ngnfs_symlink(export->fs, &dir->handle, name, symlink_target, uid, gid,
				    &handle, &attr);
	else
		ret = ngnfs_create(export->fs, &dir->handle, name, mode, uid, gid, rdev, &handle,
				   &attr);
	if (ret < 0) {
		if (ret != -EEXIST)
			LogDebug(COMPONENT_FSAL,
				 "NGNFS: create of \"%s\" (mode 0%o) in inode %" PRIu64
				 " failed: %s",
				 name, mode, dir->handle.ino, ngnfs_last_error());
		return ngnfs_fsal_status(ret);
	}

	status = ngnfs_fsal_object_out(export, &handle, &attr, sequence, object_out, NULL);
	object = ngnfs_fsal_object_of(*object_out);

	/* The mode went with the create; the rest is a setattr. */
	if (attrs_in != NULL) {
		rest = *attrs_in;
		rest.valid_mask &= ~(ATTR_MODE | ATTR_RAWDEV | ATTR_TYPE);
		if (FSAL_TEST_MASK(rest.valid_mask, ATTR_OWNER) && rest.owner == uid)
			rest.valid_mask &= ~ATTR_OWNER;
		if (FSAL_TEST_MASK(rest.valid_mask, ATTR_GROUP) && rest.group == gid)
			rest.valid_mask &= ~ATTR_GROUP;
		if (rest.valid_mask != 0) {
			sequence = ngnfs_fsal_attr_sequence(export);
			status = ngnfs_fsal_setattr_object(object, &rest, &attr);
			if (FSAL_IS_ERROR(status)) {
				LogDebug(COMPONENT_FSAL,
					 "NGNFS: attributes of new \"%s\" in inode %" PRIu64
					 " could not be set; removing it",
					 name, dir->handle.ino);
				(void)ngnfs_unlink(export->fs, &dir->handle, name);
				(*object_out)->obj_ops->release(*object_out);
				*object_out = NULL;
				return status;
			}
		}
	}
	if (attrs_out != NULL)
		ngnfs_fsal_attrs_hand_out(export, &handle, &attr, sequence, attrs_out);
	return status;
}

/* MDCACHE adds the new name to the directory's entries after we return. */
static fsal_status_t
ngnfs_fsal_create_object(struct ngnfs_fsal_object *dir, const char *name, uint32_t mode,
			 uint64_t rdev, const char *symlink_target, struct fsal_attrlist *attrs_in,
			 struct fsal_obj_handle **object_out, struct fsal_attrlist *attrs_out)
{
	fsal_status_t status;

	ngnfs_fsal_hand_begin(dir->export, dir->handle.ino);
	status = ngnfs_fsal_create_in_hand(dir, name, mode, rdev, symlink_target, attrs_in,
					   object_out, attrs_out);
	ngnfs_fsal_hand_end(dir->export, dir->handle.ino);
	return status;
}

static uint32_t ngnfs_fsal_create_mode(struct ngnfs_fsal_object *dir,
				       const struct fsal_attrlist *attrs_in, uint32_t default_mode)
{
	uint32_t mode = default_mode;

	if (attrs_in != NULL && FSAL_TEST_MASK(attrs_in->valid_mask, ATTR_MODE))
		mode = fsal2unix_mode(attrs_in->mode);
	return mode & ~dir->export->export.exp_ops.fs_umask(&dir->export->export) & 07777;
}

static fsal_status_t ngnfs_fsal_mkdir(struct fsal_obj_handle *dir_object, const char *name,
				      struct fsal_attrlist *attrs_in,
				      struct fsal_obj_handle **object_out,
				      struct fsal_attrlist *attrs_out)
{
	struct ngnfs_fsal_object *dir = ngnfs_fsal_object_of(dir_object);

	return ngnfs_fsal_create_object(dir, name,
					S_IFDIR | ngnfs_fsal_create_mode(dir, attrs_in, 0755), 0,
					NULL, attrs_in, object_out, attrs_out);
}

static fsal_status_t ngnfs_fsal_mknode(struct fsal_obj_handle *dir_object, const char *name,
				       object_file_type_t nodetype, struct fsal_attrlist *attrs_in,
				       struct fsal_obj_handle **object_out,
				       struct fsal_attrlist *attrs_out)
{
	struct ngnfs_fsal_object *dir = ngnfs_fsal_object_of(dir_object);
	uint32_t type;
	uint64_t rdev = 0;

	switch (nodetype) {
	case CHARACTER_FILE:
		type = S_IFCHR;
		break;
	case BLOCK_FILE:
		type = S_IFBLK;
		break;
	case SOCKET_FILE:
		type = S_IFSOCK;
		break;
	case FIFO_FILE:
		type = S_IFIFO;
		break;
	default:
		LogDebug(COMPONENT_FSAL, "NGNFS: mknode of \"%s\": type %d is not a node", name,
			 nodetype);
		return fsalstat(ERR_FSAL_BADTYPE, 0);
	}
	if ((type == S_IFCHR || type == S_IFBLK) && attrs_in != NULL &&
	    FSAL_TEST_MASK(attrs_in->valid_mask, ATTR_RAWDEV))
		rdev = makedev(attrs_in->rawdev.major, attrs_in->rawdev.minor);
	return ngnfs_fsal_create_object(dir, name,
					type | ngnfs_fsal_create_mode(dir, attrs_in, 0644), rdev,
					NULL, attrs_in, object_out, attrs_out);
}

static fsal_status_t ngnfs_fsal_symlink(struct fsal_obj_handle *dir_object, const char *name,
					const char *target, struct fsal_attrlist *attrs_in,
					struct fsal_obj_handle **object_out,
					struct fsal_attrlist *attrs_out)
{
	struct ngnfs_fsal_object *dir = ngnfs_fsal_object_of(dir_object);

	if (strlen(target) > NGNFS_SYMLINK_MAX)
		return fsalstat(ERR_FSAL_NAMETOOLONG, ENAMETOOLONG);
	return ngnfs_fsal_create_object(dir, name, S_IFLNK | 0777, 0, target, attrs_in, object_out,
					attrs_out);
}

static fsal_status_t ngnfs_fsal_readlink(struct fsal_obj_handle *fsal_object,
					 struct gsh_buffdesc *link_content, bool refresh)
{
	struct ngnfs_fsal_object *object = ngnfs_fsal_object_of(fsal_object);
	char *buffer;
	ssize_t length;

	(void)refresh;

	if (fsal_object->type != SYMBOLIC_LINK)
		return fsalstat(ERR_FSAL_INVAL, EINVAL);
	buffer = gsh_malloc(NGNFS_SYMLINK_MAX + 1);
	length = ngnfs_readlink(object->export->fs, &object->handle, buffer, NGNFS_SYMLINK_MAX + 1);
	if (length < 0) {
		LogDebug(COMPONENT_FSAL, "NGNFS: readlink of inode %" PRIu64 " failed: %s",
			 object->handle.ino, ngnfs_last_error());
		gsh_free(buffer);
		return ngnfs_fsal_status((int)length);
	}
	if (length > NGNFS_SYMLINK_MAX) {
		LogCrit(COMPONENT_FSAL, "NGNFS: symlink inode %" PRIu64 " has a %zd-byte target",
			object->handle.ino, length);
		gsh_free(buffer);
		return fsalstat(ERR_FSAL_IO, EIO);
	}
	buffer[length] = '\0';
	/* ganesha's convention: the length counts the terminating NUL */
	link_content->addr = buffer;
	link_content->len = (size_t)length + 1;
	return fsalstat(ERR_FSAL_NO_ERROR, 0);
}

static fsal_status_t ngnfs_fsal_link(struct fsal_obj_handle *fsal_object,
				     struct fsal_obj_handle *dir_object, const char *name)
{
	struct ngnfs_fsal_object *object = ngnfs_fsal_object_of(fsal_object);
	struct ngnfs_fsal_object *dir = ngnfs_fsal_object_of(dir_object);
	int ret;

	/* MDCACHE adds the name to the directory's entries after we return */
	ngnfs_fsal_hand_begin(dir->export, dir->handle.ino);
	ret = ngnfs_link(object->export->fs, &object->handle, &dir->handle, name);
	ngnfs_fsal_hand_end(dir->export, dir->handle.ino);
	if (ret < 0 && ret != -EEXIST)
		LogDebug(COMPONENT_FSAL,
			 "NGNFS: link of inode %" PRIu64 " as \"%s\" in inode %" PRIu64
			 " failed: %s",
			 object->handle.ino, name, dir->handle.ino, ngnfs_last_error());
	return ngnfs_fsal_status(ret);
}

static fsal_status_t ngnfs_fsal_rename(struct fsal_obj_handle *fsal_object,
				       struct fsal_obj_handle *old_dir_object, const char *old_name,
				       struct fsal_obj_handle *new_dir_object, const char *new_name)
{
	struct ngnfs_fsal_object *old_dir = ngnfs_fsal_object_of(old_dir_object);
	struct ngnfs_fsal_object *new_dir = ngnfs_fsal_object_of(new_dir_object);
	struct ngnfs_fsal_object *object = ngnfs_fsal_object_of(fsal_object);
	struct ngnfs_handle target;
	struct ngnfs_attr attr;
	fsal_status_t status;
	int ret;

	status = ngnfs_fsal_may_change_dir(old_dir_object, &object->handle);
	if (FSAL_IS_ERROR(status))
		return status;
	ret = ngnfs_lookup(new_dir->export->fs, &new_dir->handle, new_name, &target, &attr);
	if (ret < 0 && ret != -ENOENT)
		return ngnfs_fsal_status(ret);
	/*
	 * Within one directory its write and search permission was checked
	 * above; only a replaced entry still needs the sticky-bit check.
	 */
	if (new_dir_object != old_dir_object || ret == 0)
		status = ngnfs_fsal_may_change_dir(new_dir_object, ret == 0 ? &target : NULL);
	if (FSAL_IS_ERROR(status))
		return status;
	/* a directory moving to another parent gets a new "..": write on it */
	if (fsal_object->type == DIRECTORY &&
	    memcmp(old_dir->wire, new_dir->wire, NGNFS_HANDLE_WIRE_SIZE) != 0) {
		status = fsal_object->obj_ops->test_access(
		    fsal_object, FSAL_MODE_MASK_SET(FSAL_W_OK), NULL, NULL, false);
		if (FSAL_IS_ERROR(status))
			return status;
	}

	/* MDCACHE moves the name between the directories' entries after we return */
	ngnfs_fsal_hand_begin(old_dir->export, old_dir->handle.ino);
	ngnfs_fsal_hand_begin(new_dir->export, new_dir->handle.ino);
	ret = ngnfs_rename(old_dir->export->fs, &old_dir->handle, old_name, &new_dir->handle,
			   new_name);
	ngnfs_fsal_hand_end(new_dir->export, new_dir->handle.ino);
	ngnfs_fsal_hand_end(old_dir->export, old_dir->handle.ino);
	if (ret < 0)
		LogDebug(COMPONENT_FSAL,
			 "NGNFS: rename of \"%s\" in inode %" PRIu64 " to \"%s\" in inode %" PRIu64
			 " failed: %s",
			 old_name, old_dir->handle.ino, new_name, new_dir->handle.ino,
			 ngnfs_last_error());
	/*
	 * RFC 7530 16.26 and 5661 18.26: a target of the other type, or a
	 * non-empty directory, is NFS4ERR_EXIST (POSIX says EISDIR, ENOTDIR,
	 * ENOTEMPTY).
	 */
	if (ret == -ENOTEMPTY || ret == -EISDIR || ret == -ENOTDIR)
		return fsalstat(ERR_FSAL_EXIST, (unsigned int)-ret);
	return ngnfs_fsal_status(ret);
}

static fsal_status_t ngnfs_fsal_unlink(struct fsal_obj_handle *dir_object,
				       struct fsal_obj_handle *fsal_object, const char *name)
{
	struct ngnfs_fsal_object *dir = ngnfs_fsal_object_of(dir_object);
	fsal_status_t status;
	int ret;

	status = ngnfs_fsal_may_change_dir(dir_object, &ngnfs_fsal_object_of(fsal_object)->handle);
	if (FSAL_IS_ERROR(status))
		return status;
	ret = ngnfs_unlink(dir->export->fs, &dir->handle, name);
	if (ret < 0)
		LogDebug(COMPONENT_FSAL, "NGNFS: unlink of \"%s\" in inode %" PRIu64 " failed: %s",
			 name, dir->handle.ino, ngnfs_last_error());
	return ngnfs_fsal_status(ret);
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

	if (fsal_object->type == REGULAR_FILE)
		ngnfs_fsal_object_close_all(object);
	ngnfs_fsal_up_untrack(object->export, &object->handle);
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
	ops->setattr2 = ngnfs_fsal_setattr2;
	ops->mkdir = ngnfs_fsal_mkdir;
	ops->mknode = ngnfs_fsal_mknode;
	ops->symlink = ngnfs_fsal_symlink;
	ops->readlink = ngnfs_fsal_readlink;
	ops->link = ngnfs_fsal_link;
	ops->rename = ngnfs_fsal_rename;
	ops->unlink = ngnfs_fsal_unlink;
	ops->handle_to_wire = ngnfs_fsal_handle_to_wire;
	ops->handle_to_key = ngnfs_fsal_handle_to_key;
	ngnfs_fsal_file_ops_init(ops);
	ngnfs_fsal_xattr_ops_init(ops);
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
	uint64_t sequence;
	size_t length;
	int ret;

	*object_out = NULL;
	sequence = ngnfs_fsal_attr_sequence(export);
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
	return ngnfs_fsal_object_out(export, &handle, &attr, sequence, object_out, attrs_out);
}

/* Turns a wire handle (checked by wire_to_host) back into an object. */
fsal_status_t ngnfs_fsal_create_handle(struct fsal_export *fsal_export, struct gsh_buffdesc *wire,
				       struct fsal_obj_handle **object_out,
				       struct fsal_attrlist *attrs_out)
{
	struct ngnfs_fsal_export *export = ngnfs_fsal_export_of(fsal_export);
	struct ngnfs_handle handle;
	struct ngnfs_attr attr;
	uint64_t sequence;
	int ret;

	*object_out = NULL;
	if (wire->len != NGNFS_HANDLE_WIRE_SIZE) {
		LogInfo(COMPONENT_FSAL, "NGNFS: export %u: %zu-byte handle, expected %d",
			fsal_export->export_id, wire->len, NGNFS_HANDLE_WIRE_SIZE);
		return fsalstat(ERR_FSAL_BADHANDLE, 0);
	}
	ngnfs_handle_from_wire(wire->addr, &handle);
	sequence = ngnfs_fsal_attr_sequence(export);
	ret = ngnfs_getattr(export->fs, &handle, &attr);
	if (ret < 0) {
		LogDebug(COMPONENT_FSAL,
			 "NGNFS: handle of inode %" PRIu64 " generation %" PRIu64 ": %s",
			 handle.ino, handle.generation, ngnfs_last_error());
		return ngnfs_fsal_status(ret);
	}
	return ngnfs_fsal_object_out(export, &handle, &attr, sequence, object_out, attrs_out);
}
