// SPDX-License-Identifier: LGPL-3.0-or-later
/*
 * Open files and file I/O of the NGNFS FSAL: open2, reopen2, status2,
 * read2, write2, commit2, close2, close, merge, and alloc_state.
 *
 * ganesha 4.3 leaves file descriptors to the FSAL but does share
 * reservations (NFSv4 OPEN deny modes) with helpers over a struct
 * fsal_share and descriptors that start with their open mode.  We follow
 * FSAL_MEM and FSAL_VFS: every NFSv4 open state carries a descriptor
 * (allocated after the state_t by alloc_state), stateless I/O (NFSv3,
 * anonymous stateids) uses the object's global descriptor under obj_lock,
 * and fsal_find_fd() picks the right one or opens a temporary one.
 *
 * Our descriptors hold no OS resource.  What they hold is one of libcore's
 * open counts (ngnfs_open / ngnfs_close): libcore keeps a file whose last
 * name was removed alive until its last close on this gateway, which is
 * what lets an NFS client keep reading and writing a file it has open
 * after someone unlinks it.  A state's descriptor takes its count at open
 * and drops it at close2; the global descriptor takes it when first opened
 * and keeps it until close() or release, because fsal_reopen_obj()
 * "closes" it only to reopen it with more access, and dropping the count
 * in between would free an unlinked file under its opener.
 *
 * Durability (docs/fsal.md): a FILE_SYNC or DATA_SYNC write is durable
 * before it is answered FILE_SYNC (NGNFS_WRITE_STABLE), whatever the
 * export's mode.  An NFSv4 UNSTABLE write is answered UNSTABLE from
 * libcore's cache in both modes (in a stable export with
 * NGNFS_WRITE_UNSTABLE, which holds it back from the stable mount's
 * immediate write-back): the client keeps the data until a COMMIT
 * (ngnfs_sync_inode) made it durable, and resends it if the verifier of
 * the COMMIT is not the one its WRITEs got (export.c: a new one per
 * gateway process, changed again by every write-back loss).  So an
 * UNSTABLE reply acknowledges nothing as stable,
 * and a stable export still loses nothing it acknowledged as stable.
 * COMMIT writes back the dirty set holding the file's changes (and what
 * they depend on), not other files' data.  An NFSv3 UNSTABLE write in a
 * stable export stays durable before its reply: ganesha 4.3 answers v3
 * with its own verifier, the daemon's start time in seconds, which a
 * restart within the same second would repeat.
 *
 * XXX:
 *  - commit2 syncs the whole file, not only the range asked for;
 *  - no READ_PLUS (read_arg->info): ganesha answers NOTSUPP;
 *  - no byte-range locks (lock_op2): fs_info says lock_support = false.
 */

#include "config.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "fsal.h"
#include "fsal_convert.h"
#include "FSAL/fsal_commonlib.h"

#include "internal.h"

/* What an open holds, for fsal_fd's open_func. */
static fsal_status_t ngnfs_fsal_open_fd(struct fsal_obj_handle *fsal_object,
					fsal_openflags_t openflags, struct fsal_fd *fsal_fd)
{
	struct ngnfs_fsal_object *object = ngnfs_fsal_object_of(fsal_object);
	struct ngnfs_fsal_fd *fd = (struct ngnfs_fsal_fd *)fsal_fd;
	int ret;

	if (!fd->counted) {
		ret = ngnfs_open(object->export->fs, &object->handle);
		if (ret < 0) {
			LogDebug(COMPONENT_FSAL, "NGNFS: open of inode %" PRIu64 " failed: %s",
				 object->handle.ino, ngnfs_last_error());
			return ngnfs_fsal_status(ret);
		}
		fd->counted = true;
	}
	fd->openflags = FSAL_O_NFS_FLAGS(openflags);
	return fsalstat(ERR_FSAL_NO_ERROR, 0);
}

/* Drops a descriptor's libcore open count, if it holds one. */
static fsal_status_t ngnfs_fsal_uncount_fd(struct ngnfs_fsal_object *object,
					   struct ngnfs_fsal_fd *fd)
{
	int ret;

	if (!fd->counted)
		return fsalstat(ERR_FSAL_NO_ERROR, 0);
	fd->counted = false;
	ret = ngnfs_close(object->export->fs, &object->handle);
	if (ret < 0) {
		LogWarn(COMPONENT_FSAL, "NGNFS: close of inode %" PRIu64 " failed: %s",
			object->handle.ino, ngnfs_last_error());
		return ngnfs_fsal_status(ret);
	}
	return fsalstat(ERR_FSAL_NO_ERROR, 0);
}

/*
 * fsal_fd's close_func.  The global descriptor keeps its count (see the
 * top of this file); state and temporary descriptors give theirs back.
 */
static fsal_status_t ngnfs_fsal_close_fd(struct fsal_obj_handle *fsal_object,
					 struct fsal_fd *fsal_fd)
{
	struct ngnfs_fsal_object *object = ngnfs_fsal_object_of(fsal_object);
	struct ngnfs_fsal_fd *fd = (struct ngnfs_fsal_fd *)fsal_fd;

	if (fd->openflags == FSAL_O_CLOSED && !fd->counted)
		return fsalstat(ERR_FSAL_NOT_OPENED, 0);
	fd->openflags = FSAL_O_CLOSED;
	if (fd == &object->global_fd)
		return fsalstat(ERR_FSAL_NO_ERROR, 0);
	return ngnfs_fsal_uncount_fd(object, fd);
}

struct state_t *ngnfs_fsal_alloc_state(struct fsal_export *export, enum state_type state_type,
				       struct state_t *related_state)
{
	struct state_t *state;
	struct ngnfs_fsal_fd *fd;

	state = gsh_calloc(1, sizeof(struct state_t) + sizeof(struct ngnfs_fsal_fd));
	fd = (struct ngnfs_fsal_fd *)(state + 1);
	fd->openflags = FSAL_O_CLOSED;
	return init_state(state, export, state_type, related_state);
}

/* At release: the object goes away, and with it the global descriptor. */
void ngnfs_fsal_object_close_all(struct ngnfs_fsal_object *object)
{
	object->global_fd.openflags = FSAL_O_CLOSED;
	(void)ngnfs_fsal_uncount_fd(object, &object->global_fd);
}

static fsal_status_t ngnfs_fsal_truncate(struct ngnfs_fsal_object *object)
{
	struct fsal_attrlist zero;

	memset(&zero, 0, sizeof(zero));
	zero.valid_mask = ATTR_SIZE;
	zero.filesize = 0;
	return ngnfs_fsal_setattr_object(object, &zero, NULL);
}

/* Whether an existing file carries the exclusive create's verifier. */
static fsal_status_t ngnfs_fsal_check_verifier(struct ngnfs_fsal_object *object,
					       fsal_verifier_t verifier)
{
	struct fsal_attrlist attrs;
	struct ngnfs_attr attr;
	int ret;

	ret = ngnfs_getattr(object->export->fs, &object->handle, &attr);
	if (ret < 0)
		return ngnfs_fsal_status(ret);
	memset(&attrs, 0, sizeof(attrs));
	ngnfs_fsal_attr_to_fsal(object->export, &attr, &attrs);
	if (!check_verifier_attrlist(&attrs, verifier, false))
		return fsalstat(ERR_FSAL_EXIST, EEXIST);
	return fsalstat(ERR_FSAL_NO_ERROR, 0);
}

static fsal_status_t ngnfs_fsal_attrs_out(struct ngnfs_fsal_object *object,
					  struct fsal_attrlist *attrs_out)
{
	struct ngnfs_attr attr;
	int ret;

	if (attrs_out == NULL)
		return fsalstat(ERR_FSAL_NO_ERROR, 0);
	ngnfs_fsal_hand_begin(object->export, object->handle.ino);
	ret = ngnfs_fsal_getattr_settled(object->export, &object->handle, &attr);
	if (ret == 0)
		ngnfs_fsal_attr_to_fsal(object->export, &attr, attrs_out);
	ngnfs_fsal_hand_end(object->export, object->handle.ino);
	if (ret < 0) {
		if (attrs_out->request_mask & ATTR_RDATTR_ERR) {
			attrs_out->valid_mask = ATTR_RDATTR_ERR;
			return fsalstat(ERR_FSAL_NO_ERROR, 0);
		}
		return ngnfs_fsal_status(ret);
	}
	return fsalstat(ERR_FSAL_NO_ERROR, 0);
}

/*
 * Opens an object we have: the state's descriptor (taking its share
 * reservation) or, without a state, the global one.  Truncates for
 * FSAL_O_TRUNC.  On failure nothing is left open or reserved.  created:
 * the file is the one open2 has just created, and its open is counted
 * without reading the inode again (ngnfs_open_created), so that a device
 * lost after the create committed cannot fail the OPEN.
 */
static fsal_status_t ngnfs_fsal_open_object(struct ngnfs_fsal_object *object, struct state_t *state,
					    fsal_openflags_t openflags, bool truncate, bool created)
{
	struct fsal_obj_handle *fsal_object = &object->object;
	struct ngnfs_fsal_fd *fd;
	fsal_status_t status;

	if (openflags & FSAL_O_WRITE)
		openflags |= FSAL_O_READ;

	PTHREAD_RWLOCK_wrlock(&fsal_object->obj_lock);
	if (state != NULL) {
		fd = (struct ngnfs_fsal_fd *)(state + 1);
		status = check_share_conflict(&object->share, openflags, false);
		if (FSAL_IS_ERROR(status)) {
			PTHREAD_RWLOCK_unlock(&fsal_object->obj_lock);
			return status;
		}
		update_share_counters(&object->share, FSAL_O_CLOSED, openflags);
	} else {
		fd = &object->global_fd;
	}

	status = fsalstat(ERR_FSAL_NO_ERROR, 0);
	if (created && !fd->counted) {
		int ret = ngnfs_open_created(object->export->fs, &object->handle);

		if (ret < 0)
			status = ngnfs_fsal_status(ret);
		else
			fd->counted = true;
	}
	if (!FSAL_IS_ERROR(status))
		status = ngnfs_fsal_open_fd(fsal_object, openflags, (struct fsal_fd *)fd);
	if (!FSAL_IS_ERROR(status) && truncate)
		status = ngnfs_fsal_truncate(object);
	if (FSAL_IS_ERROR(status)) {
		if (state != NULL) {
			update_share_counters(&object->share, openflags, FSAL_O_CLOSED);
			(void)ngnfs_fsal_close_fd(fsal_object, (struct fsal_fd *)fd);
		}
	}
	PTHREAD_RWLOCK_unlock(&fsal_object->obj_lock);
	return status;
}

static fsal_status_t
ngnfs_fsal_open2_in_hand(struct fsal_obj_handle *fsal_object, struct state_t *state,
			 fsal_openflags_t openflags, enum fsal_create_mode createmode,
			 const char *name, struct fsal_attrlist *attrs_set,
			 fsal_verifier_t verifier, struct fsal_obj_handle **new_object,
			 struct fsal_attrlist *attrs_out, bool *caller_perm_check)
{
	struct ngnfs_fsal_object *object = ngnfs_fsal_object_of(fsal_object);
	struct ngnfs_fsal_export *export = object->export;
	struct ngnfs_fsal_object *file;
	struct fsal_attrlist verifier_attrs;
	struct fsal_attrlist create_attrs;
	struct ngnfs_handle handle;
	struct ngnfs_attr attr;
	bool truncate = (openflags & FSAL_O_TRUNC) != 0;
	bool exclusive = createmode >= FSAL_EXCLUSIVE && createmode != FSAL_EXCLUSIVE_9P;
	const struct timespec *create_atime = NULL;
	const struct timespec *create_mtime = NULL;
	bool created = false;
	uint64_t sequence = 0;
	uint32_t mode;
	fsal_status_t status;
	int ret;
	int tries;

	if (createmode >= FSAL_EXCLUSIVE) {
		/* the verifier is kept in atime and mtime, as every FSAL does */
		if (attrs_set == NULL) {
			memset(&verifier_attrs, 0, sizeof(verifier_attrs));
			attrs_set = &verifier_attrs;
		}
		set_common_verifier(attrs_set, verifier, false);
	}
	if (attrs_set != NULL &&
	    (attrs_set->valid_mask & (ATTR_ATIME | ATTR_ATIME_SERVER)) == ATTR_ATIME)
		create_atime = &attrs_set->atime;
	if (attrs_set != NULL &&
	    (attrs_set->valid_mask & (ATTR_MTIME | ATTR_MTIME_SERVER)) == ATTR_MTIME)
		create_mtime = &attrs_set->mtime;

	if (name == NULL) {
		/* Open by handle: the object exists. */
		if (fsal_object->type != REGULAR_FILE)
			return fsalstat(
			    fsal_object->type == DIRECTORY ? ERR_FSAL_ISDIR : ERR_FSAL_BADTYPE, 0);
		if (exclusive) {
			status = ngnfs_fsal_check_verifier(object, verifier);
			if (FSAL_IS_ERROR(status))
				return status;
		}
		status = ngnfs_fsal_open_object(object, state, openflags, truncate, false);
		if (FSAL_IS_ERROR(status))
			return status;
		return ngnfs_fsal_attrs_out(object, attrs_out);
	}

	/*
	 * Open by name, maybe creating.  A create racing another gateway's
	 * (EEXIST) is looked up again, once.
	 */
	*new_object = NULL;
	for (tries = 0; tries < 2; tries++) {
		sequence = ngnfs_fsal_attr_sequence(export);
		ret = ngnfs_lookup(export->fs, &object->handle, name, &handle, &attr);
		if (ret == 0)
			break;
		if (ret != -ENOENT) {
			LogDebug(COMPONENT_FSAL,
				 "NGNFS: open of \"%s\" in inode %" PRIu64 ": lookup failed: %s",
				 name, object->handle.ino, ngnfs_last_error());
			return ngnfs_fsal_status(ret);
		}
		if (createmode == FSAL_NO_CREATE)
			return fsalstat(ERR_FSAL_NOENT, ENOENT);
		/* ganesha checked only search permission on the directory */
		status = ngnfs_fsal_may_change_dir(fsal_object, NULL);
		if (FSAL_IS_ERROR(status))
			return status;

		mode = 0600;
		if (attrs_set != NULL && FSAL_TEST_MASK(attrs_set->valid_mask, ATTR_MODE))
			mode = fsal2unix_mode(attrs_set->mode);
		mode &= ~export->export.exp_ops.fs_umask(&export->export) & 07777;
		/*
		 * Explicit times (an exclusive create's verifier) go with the
		 * create: one transaction, and no crash window in which the
		 * file exists without its verifier.
		 */
		ret = ngnfs_create_with_times(export->fs, &object->handle, name, S_IFREG | mode,
					      (uint32_t)op_ctx->creds.caller_uid,
					      (uint32_t)op_ctx->creds.caller_gid, 0, create_atime,
					      create_mtime, &handle, &attr);
		if (ret == 0) {
			created = true;
			break;
		}
		if (ret != -EEXIST || createmode == FSAL_GUARDED) {
			LogDebug(COMPONENT_FSAL,
				 "NGNFS: create of \"%s\" in inode %" PRIu64 " failed: %s", name,
				 object->handle.ino, ngnfs_last_error());
			return ngnfs_fsal_status(ret);
		}
	}
	if (ret < 0)
		return ngnfs_fsal_status(ret);

	if (!S_ISREG(attr.mode))
		return fsalstat(S_ISDIR(attr.mode) ? ERR_FSAL_ISDIR : ERR_FSAL_BADTYPE, 0);
	if (!created && createmode == FSAL_GUARDED)
		return fsalstat(ERR_FSAL_EXIST, EEXIST);

	status = ngnfs_fsal_object_out(export, &handle, &attr, sequence, new_object, NULL);
	file = ngnfs_fsal_object_of(*new_object);

	if (!created && exclusive) {
		/* a retransmitted exclusive create carries the same verifier */
		status = ngnfs_fsal_check_verifier(file, verifier);
	} else if (created && attrs_set != NULL) {
		/*
		 * The mode and explicit times (the verifier) went with the
		 * create; owner, size and server times follow.  An existing
		 * file gets no attributes here: ganesha has not checked the
		 * caller's permissions on it yet.
		 */
		create_attrs = *attrs_set;
		create_attrs.valid_mask &= ~ATTR_MODE;
		if (create_atime != NULL)
			create_attrs.valid_mask &= ~ATTR_ATIME;
		if (create_mtime != NULL)
			create_attrs.valid_mask &= ~ATTR_MTIME;
		create_attrs.valid_mask &= ATTRS_POSIX | ATTR_ATIME_SERVER | ATTR_MTIME_SERVER;
		create_attrs.valid_mask &= ~(ATTR_TYPE | ATTR_FSID | ATTR_FILEID | ATTR_NUMLINKS |
					     ATTR_RAWDEV | ATTR_SPACEUSED | ATTR_CHANGE);
		if (create_attrs.valid_mask != 0) {
			sequence = ngnfs_fsal_attr_sequence(export);
			status = ngnfs_fsal_setattr_object(file, &create_attrs, &attr);
		}
	}
	if (!FSAL_IS_ERROR(status))
		status =
		    ngnfs_fsal_open_object(file, state, openflags, truncate && !created, created);
	/*
	 * A new file's attributes came back from the create (and setattr),
	 * and opening it changed none: no second getattr.  An existing file
	 * may have been truncated or checked against a verifier.
	 */
	if (!FSAL_IS_ERROR(status) && created && attrs_out != NULL)
		ngnfs_fsal_attrs_hand_out(export, &handle, &attr, sequence, attrs_out);
	else if (!FSAL_IS_ERROR(status))
		status = ngnfs_fsal_attrs_out(file, attrs_out);
	if (FSAL_IS_ERROR(status)) {
		/* The client is told the OPEN failed: the file must not stay. */
		if (created && (ret = ngnfs_unlink(export->fs, &object->handle, name)) < 0)
			LogWarn(COMPONENT_FSAL,
				"NGNFS: \"%s\" in inode %" PRIu64 " was created but its open "
				"failed (%s), and removing it failed too: %s",
				name, object->handle.ino, msg_fsal_err(status.major),
				ngnfs_last_error());
		(*new_object)->obj_ops->release(*new_object);
		*new_object = NULL;
		return status;
	}
	/* ganesha checks permissions on an existing file; a new one is ours */
	*caller_perm_check = !created;
	return status;
}

static fsal_openflags_t ngnfs_fsal_status2(struct fsal_obj_handle *fsal_object,
					   struct state_t *state)
{
	struct ngnfs_fsal_fd *fd = (struct ngnfs_fsal_fd *)(state + 1);

	(void)fsal_object;
	return fd->openflags;
}

/*
 * An open by name may add the name to the directory's entries, which
 * MDCACHE does after we return: the directory is in hand (fsal_up.c).
 */
static fsal_status_t ngnfs_fsal_open2(struct fsal_obj_handle *fsal_object, struct state_t *state,
				      fsal_openflags_t openflags, enum fsal_create_mode createmode,
				      const char *name, struct fsal_attrlist *attrs_set,
				      fsal_verifier_t verifier, struct fsal_obj_handle **new_object,
				      struct fsal_attrlist *attrs_out, bool *caller_perm_check)
{
	struct ngnfs_fsal_object *object = ngnfs_fsal_object_of(fsal_object);
	fsal_status_t status;

	if (name != NULL)
		ngnfs_fsal_hand_begin(object->export, object->handle.ino);
	status =
	    ngnfs_fsal_open2_in_hand(fsal_object, state, openflags, createmode, name, attrs_set,
				     verifier, new_object, attrs_out, caller_perm_check);
	if (name != NULL)
		ngnfs_fsal_hand_end(object->export, object->handle.ino);
	return status;
}

static fsal_status_t ngnfs_fsal_reopen2(struct fsal_obj_handle *fsal_object, struct state_t *state,
					fsal_openflags_t openflags)
{
	struct ngnfs_fsal_object *object = ngnfs_fsal_object_of(fsal_object);
	struct ngnfs_fsal_fd *fd = (struct ngnfs_fsal_fd *)(state + 1);
	fsal_openflags_t old_openflags;
	fsal_status_t status;

	if (openflags & FSAL_O_WRITE)
		openflags |= FSAL_O_READ;

	PTHREAD_RWLOCK_wrlock(&fsal_object->obj_lock);
	old_openflags = fd->openflags;
	/* Our own share is replaced; check against everybody else's. */
	update_share_counters(&object->share, old_openflags, FSAL_O_CLOSED);
	status = check_share_conflict(&object->share, openflags, false);
	if (FSAL_IS_ERROR(status)) {
		update_share_counters(&object->share, FSAL_O_CLOSED, old_openflags);
		PTHREAD_RWLOCK_unlock(&fsal_object->obj_lock);
		return status;
	}
	update_share_counters(&object->share, FSAL_O_CLOSED, openflags);
	status = ngnfs_fsal_open_fd(fsal_object, openflags, (struct fsal_fd *)fd);
	if (!FSAL_IS_ERROR(status) && (openflags & FSAL_O_TRUNC))
		status = ngnfs_fsal_truncate(object);
	if (FSAL_IS_ERROR(status)) {
		update_share_counters(&object->share, openflags, old_openflags);
		fd->openflags = FSAL_O_NFS_FLAGS(old_openflags);
	}
	PTHREAD_RWLOCK_unlock(&fsal_object->obj_lock);
	return status;
}

/*
 * Finds the descriptor for an I/O (the state's, the global one, or a
 * temporary one in *temporary).  The caller undoes what *has_lock and
 * *closefd say.
 */
static fsal_status_t ngnfs_fsal_io_fd(struct ngnfs_fsal_object *object, bool bypass,
				      struct state_t *state, fsal_openflags_t openflags,
				      struct ngnfs_fsal_fd *temporary, bool *has_lock,
				      bool *closefd)
{
	struct fsal_fd *out_fd = (struct fsal_fd *)temporary;
	bool reusing_open_state_fd = false;

	*has_lock = false;
	*closefd = false;
	temporary->openflags = FSAL_O_CLOSED;
	temporary->counted = false;
	return fsal_find_fd(&out_fd, &object->object, (struct fsal_fd *)&object->global_fd,
			    &object->share, bypass, state, openflags, ngnfs_fsal_open_fd,
			    ngnfs_fsal_close_fd, has_lock, closefd, false, &reusing_open_state_fd);
}

static void ngnfs_fsal_io_done(struct ngnfs_fsal_object *object, struct ngnfs_fsal_fd *temporary,
			       bool has_lock, bool closefd)
{
	if (closefd)
		(void)ngnfs_fsal_close_fd(&object->object, (struct fsal_fd *)temporary);
	if (has_lock)
		PTHREAD_RWLOCK_unlock(&object->object.obj_lock);
}

static void ngnfs_fsal_read2(struct fsal_obj_handle *fsal_object, bool bypass,
			     fsal_async_cb done_cb, struct fsal_io_arg *read_arg, void *caller_arg)
{
	struct ngnfs_fsal_object *object = ngnfs_fsal_object_of(fsal_object);
	struct ngnfs_fsal_fd temporary;
	uint64_t offset = read_arg->offset;
	bool end_of_file = false;
	bool has_lock;
	bool closefd;
	fsal_status_t status;
	ssize_t ret = 0;
	int i;

	read_arg->io_amount = 0;
	if (read_arg->info != NULL) {
		done_cb(fsal_object, fsalstat(ERR_FSAL_NOTSUPP, 0), read_arg, caller_arg);
		return;
	}
	if (fsal_object->type != REGULAR_FILE) {
		done_cb(fsal_object, fsalstat(ERR_FSAL_INVAL, EINVAL), read_arg, caller_arg);
		return;
	}

	status = ngnfs_fsal_io_fd(object, bypass, read_arg->state, FSAL_O_READ, &temporary,
				  &has_lock, &closefd);
	if (FSAL_IS_ERROR(status)) {
		done_cb(fsal_object, status, read_arg, caller_arg);
		return;
	}

	for (i = 0; i < read_arg->iov_count && !end_of_file; i++) {
		ret = ngnfs_read(object->export->fs, &object->handle, offset,
				 read_arg->iov[i].iov_base, read_arg->iov[i].iov_len, &end_of_file);
		if (ret < 0) {
			LogDebug(COMPONENT_FSAL,
				 "NGNFS: read of %zu bytes at %" PRIu64 " of inode %" PRIu64
				 " failed: %s",
				 read_arg->iov[i].iov_len, offset, object->handle.ino,
				 ngnfs_last_error());
			break;
		}
		LogFullDebug(
		    COMPONENT_FSAL,
		    "NGNFS: read inode %" PRIu64 " at %" PRIu64 ": %zd of %zu bytes, eof %d",
		    object->handle.ino, offset, ret, read_arg->iov[i].iov_len, end_of_file);
		read_arg->io_amount += (size_t)ret;
		offset += (uint64_t)ret;
		if ((size_t)ret < read_arg->iov[i].iov_len)
			end_of_file = true;
	}
	ngnfs_fsal_io_done(object, &temporary, has_lock, closefd);

	if (ret < 0) {
		done_cb(fsal_object, ngnfs_fsal_status((int)ret), read_arg, caller_arg);
		return;
	}
	read_arg->end_of_file = end_of_file;
	done_cb(fsal_object, fsalstat(ERR_FSAL_NO_ERROR, 0), read_arg, caller_arg);
}

static void ngnfs_fsal_write2(struct fsal_obj_handle *fsal_object, bool bypass,
			      fsal_async_cb done_cb, struct fsal_io_arg *write_arg,
			      void *caller_arg)
{
	struct ngnfs_fsal_object *object = ngnfs_fsal_object_of(fsal_object);
	struct ngnfs_fsal_export *export = object->export;
	struct ngnfs_fsal_fd temporary;
	uint64_t offset = write_arg->offset;
	enum ngnfs_write_durability durability;
	bool stable;
	bool has_lock;
	bool closefd;
	fsal_status_t status;
	ssize_t ret = 0;
	int i;

	write_arg->io_amount = 0;
	if (fsal_object->type != REGULAR_FILE) {
		done_cb(fsal_object, fsalstat(ERR_FSAL_INVAL, EINVAL), write_arg, caller_arg);
		return;
	}

	status = ngnfs_fsal_io_fd(object, bypass, write_arg->state, FSAL_O_WRITE, &temporary,
				  &has_lock, &closefd);
	if (FSAL_IS_ERROR(status)) {
		done_cb(fsal_object, status, write_arg, caller_arg);
		return;
	}

	if (write_arg->fsal_stable) {
		durability = NGNFS_WRITE_STABLE;
		stable = true;
	} else if (export->options.durability != NGNFS_MOUNT_STABLE) {
		durability = NGNFS_WRITE_MOUNT;
		stable = false;
	} else if (op_ctx->nfs_vers == NFS_V4) {
		/* answered UNSTABLE: durable at COMMIT, or resent after a restart */
		durability = NGNFS_WRITE_UNSTABLE;
		stable = false;
	} else {
		/* NFSv3: ganesha's v3 verifier may survive a quick restart */
		durability = NGNFS_WRITE_MOUNT;
		stable = true;
	}

	for (i = 0; i < write_arg->iov_count; i++) {
		ret = ngnfs_write(export->fs, &object->handle, offset, write_arg->iov[i].iov_base,
				  write_arg->iov[i].iov_len, durability);
		if (ret < 0) {
			LogDebug(COMPONENT_FSAL,
				 "NGNFS: %s write of %zu bytes at %" PRIu64 " of inode %" PRIu64
				 " failed: %s",
				 stable ? "stable" : "unstable", write_arg->iov[i].iov_len, offset,
				 object->handle.ino, ngnfs_last_error());
			break;
		}
		LogFullDebug(COMPONENT_FSAL,
			     "NGNFS: wrote inode %" PRIu64 " at %" PRIu64 ": %zd of %zu bytes%s",
			     object->handle.ino, offset, ret, write_arg->iov[i].iov_len,
			     stable ? " stable" : "");
		write_arg->io_amount += (size_t)ret;
		offset += (uint64_t)ret;
		if ((size_t)ret < write_arg->iov[i].iov_len)
			break;
	}
	ngnfs_fsal_io_done(object, &temporary, has_lock, closefd);

	if (ret < 0 && write_arg->io_amount == 0) {
		done_cb(fsal_object, ngnfs_fsal_status((int)ret), write_arg, caller_arg);
		return;
	}
	write_arg->fsal_stable = stable;
	done_cb(fsal_object, fsalstat(ERR_FSAL_NO_ERROR, 0), write_arg, caller_arg);
}

static fsal_status_t ngnfs_fsal_commit2(struct fsal_obj_handle *fsal_object, off_t offset,
					size_t length)
{
	struct ngnfs_fsal_object *object = ngnfs_fsal_object_of(fsal_object);
	int ret;

	/* the whole file, whatever the range: its changes share one dirty set */
	ret = ngnfs_sync_inode(object->export->fs, &object->handle);
	if (ret < 0) {
		LogWarn(COMPONENT_FSAL,
			"NGNFS: commit of %zu bytes at %lld of inode %" PRIu64 " failed: %s",
			length, (long long)offset, object->handle.ino, ngnfs_last_error());
		return ngnfs_fsal_status(ret);
	}
	return fsalstat(ERR_FSAL_NO_ERROR, 0);
}

static fsal_status_t ngnfs_fsal_close2(struct fsal_obj_handle *fsal_object, struct state_t *state)
{
	struct ngnfs_fsal_object *object = ngnfs_fsal_object_of(fsal_object);
	struct ngnfs_fsal_fd *fd = (struct ngnfs_fsal_fd *)(state + 1);
	fsal_status_t status;

	PTHREAD_RWLOCK_wrlock(&fsal_object->obj_lock);
	if (state->state_type == STATE_TYPE_SHARE || state->state_type == STATE_TYPE_NLM_SHARE ||
	    state->state_type == STATE_TYPE_9P_FID)
		update_share_counters(&object->share, fd->openflags, FSAL_O_CLOSED);
	status = ngnfs_fsal_close_fd(fsal_object, (struct fsal_fd *)fd);
	PTHREAD_RWLOCK_unlock(&fsal_object->obj_lock);
	if (status.major == ERR_FSAL_NOT_OPENED)
		return fsalstat(ERR_FSAL_NO_ERROR, 0);
	return status;
}

/* Closes the global descriptor (NFSv3 and stateless I/O), count and all. */
static fsal_status_t ngnfs_fsal_close(struct fsal_obj_handle *fsal_object)
{
	struct ngnfs_fsal_object *object = ngnfs_fsal_object_of(fsal_object);
	fsal_status_t status;

	PTHREAD_RWLOCK_wrlock(&fsal_object->obj_lock);
	if (object->global_fd.openflags == FSAL_O_CLOSED && !object->global_fd.counted) {
		status = fsalstat(ERR_FSAL_NOT_OPENED, 0);
	} else {
		object->global_fd.openflags = FSAL_O_CLOSED;
		status = ngnfs_fsal_uncount_fd(object, &object->global_fd);
	}
	PTHREAD_RWLOCK_unlock(&fsal_object->obj_lock);
	return status;
}

/* Two objects for one key after racing creates: keep the shares together. */
static fsal_status_t ngnfs_fsal_merge(struct fsal_obj_handle *original,
				      struct fsal_obj_handle *duplicate)
{
	if (original == duplicate || original->type != REGULAR_FILE ||
	    duplicate->type != REGULAR_FILE)
		return fsalstat(ERR_FSAL_NO_ERROR, 0);
	return merge_share(original, &ngnfs_fsal_object_of(original)->share,
			   &ngnfs_fsal_object_of(duplicate)->share);
}

void ngnfs_fsal_file_ops_init(struct fsal_obj_ops *ops)
{
	ops->open2 = ngnfs_fsal_open2;
	ops->status2 = ngnfs_fsal_status2;
	ops->reopen2 = ngnfs_fsal_reopen2;
	ops->read2 = ngnfs_fsal_read2;
	ops->write2 = ngnfs_fsal_write2;
	ops->commit2 = ngnfs_fsal_commit2;
	ops->close2 = ngnfs_fsal_close2;
	ops->close = ngnfs_fsal_close;
	ops->merge = ngnfs_fsal_merge;
}
