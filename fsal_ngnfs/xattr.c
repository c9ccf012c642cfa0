// SPDX-License-Identifier: LGPL-3.0-or-later
/*
 * NFSv4.2 extended attributes (RFC 8276) of the NGNFS FSAL: getxattrs,
 * setxattrs, listxattrs, removexattrs.
 *
 * RFC 8276 xattrs are the user namespace only and travel without the
 * "user." prefix, so we add it on the way in and ganesha's
 * fsal_listxattr_helper() strips it (and skips trusted.* and security.*
 * names, which NFS must not show) on the way out; that helper also does
 * LISTXATTRS cookies, which are positions in libcore's name list.  libcore
 * limits the whole name to NGNFS_XATTR_NAME_MAX bytes, so a name on the
 * wire can have at most that minus the five of "user.".
 *
 * ganesha's core does no permission check for these operations (it leaves
 * that to the FSAL, as libcephfs does for FSAL_CEPH), so we do Linux's for
 * user.* xattrs: reading needs read permission on the object, changing
 * needs write permission; root passes.
 *
 * XXX:
 *  - values over 8 KiB (ganesha 4.3's XDR limit, see below) cannot cross
 *    NFS although libcore stores up to 64 KiB;
 *  - listxattrs reads the whole name list for every page (libcore has no
 *    cursor); a file with thousands of xattrs makes paging quadratic.
 */

#include "config.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>

#include "fsal.h"
#include "FSAL/fsal_commonlib.h"

#include "internal.h"

#define NGNFS_XATTR_PREFIX	  "user."
#define NGNFS_XATTR_PREFIX_LENGTH 5
#define NGNFS_XATTR_WIRE_NAME_MAX (NGNFS_XATTR_NAME_MAX - NGNFS_XATTR_PREFIX_LENGTH)
/*
 * ganesha 4.3 decodes and encodes xattr values as XDR strings of at most
 * XDR_STRING_MAXLEN (8 KiB, gsh_rpc.h), exclusive: 8191 bytes; a longer SETXATTR is GARBAGE_ARGS
 * before it reaches us, and a longer GETXATTR reply would fail to encode.
 * So a value longer than that is XATTR2BIG on the wire, although libcore
 * keeps values up to NGNFS_XATTR_VALUE_MAX.
 */
#define NGNFS_XATTR_WIRE_VALUE_MAX (8 * 1024 - 1)

/* "user." + the name off the wire, NUL terminated, or a status. */
static fsal_status_t ngnfs_fsal_xattr_name(const xattrkey4 *key,
					   char name[NGNFS_XATTR_NAME_MAX + 1])
{
	if (key->utf8string_len == 0)
		return fsalstat(ERR_FSAL_INVAL, EINVAL);
	if (key->utf8string_len > NGNFS_XATTR_WIRE_NAME_MAX)
		return fsalstat(ERR_FSAL_NAMETOOLONG, ENAMETOOLONG);
	if (memchr(key->utf8string_val, '\0', key->utf8string_len) != NULL)
		return fsalstat(ERR_FSAL_BADNAME, EINVAL);
	memcpy(name, NGNFS_XATTR_PREFIX, NGNFS_XATTR_PREFIX_LENGTH);
	memcpy(name + NGNFS_XATTR_PREFIX_LENGTH, key->utf8string_val, key->utf8string_len);
	name[NGNFS_XATTR_PREFIX_LENGTH + key->utf8string_len] = '\0';
	return fsalstat(ERR_FSAL_NO_ERROR, 0);
}

/* Linux's rule for user.* xattrs: the object's read or write permission. */
static fsal_status_t ngnfs_fsal_xattr_access(struct ngnfs_fsal_object *object, bool write)
{
	const struct user_cred *creds = &op_ctx->creds;
	struct ngnfs_attr attr;
	uint32_t bits;
	unsigned int i;
	int ret;

	if (creds->caller_uid == 0)
		return fsalstat(ERR_FSAL_NO_ERROR, 0);
	ret = ngnfs_getattr(object->export->fs, &object->handle, &attr);
	if (ret < 0)
		return ngnfs_fsal_status(ret);
	/* Linux allows user.* only on regular files and directories */
	if (!S_ISREG(attr.mode) && !S_ISDIR(attr.mode))
		return fsalstat(ERR_FSAL_PERM, EPERM);

	if (attr.uid == creds->caller_uid) {
		bits = (attr.mode >> 6) & 7;
	} else {
		bool member = attr.gid == creds->caller_gid;

		for (i = 0; !member && i < creds->caller_glen; i++)
			member = attr.gid == creds->caller_garray[i];
		bits = member ? (attr.mode >> 3) & 7 : attr.mode & 7;
	}
	if (bits & (write ? 2 : 4))
		return fsalstat(ERR_FSAL_NO_ERROR, 0);
	return fsalstat(ERR_FSAL_ACCESS, EACCES);
}

static fsal_status_t ngnfs_fsal_getxattrs(struct fsal_obj_handle *fsal_object, xattrkey4 *key,
					  xattrvalue4 *value)
{
	struct ngnfs_fsal_object *object = ngnfs_fsal_object_of(fsal_object);
	char name[NGNFS_XATTR_NAME_MAX + 1];
	fsal_status_t status;
	ssize_t ret;

	status = ngnfs_fsal_xattr_name(key, name);
	if (FSAL_IS_ERROR(status))
		return status;
	status = ngnfs_fsal_xattr_access(object, false);
	if (FSAL_IS_ERROR(status))
		return status;

	/* a zero length asks for the size (ganesha's retry after XATTR2BIG) */
	ret = ngnfs_getxattr(object->export->fs, &object->handle, name,
			     value->utf8string_len ? value->utf8string_val : NULL,
			     value->utf8string_len);
	if (ret < 0) {
		if (ret != -ENODATA && ret != -ERANGE)
			LogDebug(COMPONENT_FSAL,
				 "NGNFS: getxattr \"%s\" of inode %" PRIu64 " failed: %s", name,
				 object->handle.ino, ngnfs_last_error());
		return ngnfs_fsal_status((int)ret);
	}
	if (ret > NGNFS_XATTR_WIRE_VALUE_MAX) {
		LogInfo(COMPONENT_FSAL,
			"NGNFS: xattr \"%s\" of inode %" PRIu64
			" has %zd bytes, more than NFS can carry (%d)",
			name, object->handle.ino, ret, NGNFS_XATTR_WIRE_VALUE_MAX);
		return fsalstat(ERR_FSAL_XATTR2BIG, E2BIG);
	}
	value->utf8string_len = (u_int)ret;
	return fsalstat(ERR_FSAL_NO_ERROR, 0);
}

static fsal_status_t ngnfs_fsal_setxattrs(struct fsal_obj_handle *fsal_object,
					  setxattr_option4 option, xattrkey4 *key,
					  xattrvalue4 *value)
{
	struct ngnfs_fsal_object *object = ngnfs_fsal_object_of(fsal_object);
	char name[NGNFS_XATTR_NAME_MAX + 1];
	fsal_status_t status;
	int flags;
	int ret;

	switch (option) {
	case SETXATTR4_EITHER:
		flags = 0;
		break;
	case SETXATTR4_CREATE:
		flags = XATTR_CREATE;
		break;
	case SETXATTR4_REPLACE:
		flags = XATTR_REPLACE;
		break;
	default:
		return fsalstat(ERR_FSAL_INVAL, EINVAL);
	}
	status = ngnfs_fsal_xattr_name(key, name);
	if (FSAL_IS_ERROR(status))
		return status;
	if (value->utf8string_len > NGNFS_XATTR_VALUE_MAX)
		return fsalstat(ERR_FSAL_XATTR2BIG, E2BIG);
	status = ngnfs_fsal_xattr_access(object, true);
	if (FSAL_IS_ERROR(status))
		return status;

	ret = ngnfs_setxattr(object->export->fs, &object->handle, name, value->utf8string_val,
			     value->utf8string_len, flags);
	if (ret < 0) {
		if (ret != -ENODATA && ret != -EEXIST)
			LogDebug(
			    COMPONENT_FSAL,
			    "NGNFS: setxattr \"%s\" (%u bytes) of inode %" PRIu64 " failed: %s",
			    name, value->utf8string_len, object->handle.ino, ngnfs_last_error());
		return ngnfs_fsal_status(ret);
	}
	return fsalstat(ERR_FSAL_NO_ERROR, 0);
}

static fsal_status_t ngnfs_fsal_removexattrs(struct fsal_obj_handle *fsal_object, xattrkey4 *key)
{
	struct ngnfs_fsal_object *object = ngnfs_fsal_object_of(fsal_object);
	char name[NGNFS_XATTR_NAME_MAX + 1];
	fsal_status_t status;
	int ret;

	status = ngnfs_fsal_xattr_name(key, name);
	if (FSAL_IS_ERROR(status))
		return status;
	status = ngnfs_fsal_xattr_access(object, true);
	if (FSAL_IS_ERROR(status))
		return status;

	ret = ngnfs_removexattr(object->export->fs, &object->handle, name);
	if (ret < 0 && ret != -ENODATA)
		LogDebug(COMPONENT_FSAL,
			 "NGNFS: removexattr \"%s\" of inode %" PRIu64 " failed: %s", name,
			 object->handle.ino, ngnfs_last_error());
	return ngnfs_fsal_status(ret);
}

static fsal_status_t ngnfs_fsal_listxattrs(struct fsal_obj_handle *fsal_object, count4 max_bytes,
					   nfs_cookie4 *cookie, bool_t *end_of_list,
					   xattrlist4 *names)
{
	struct ngnfs_fsal_object *object = ngnfs_fsal_object_of(fsal_object);
	fsal_status_t status;
	char *list = NULL;
	ssize_t size;
	ssize_t ret;
	int tries;

	status = ngnfs_fsal_xattr_access(object, false);
	if (FSAL_IS_ERROR(status))
		return status;

	/* the list may grow between asking its size and reading it */
	for (tries = 0; tries < 5; tries++) {
		size = ngnfs_listxattr(object->export->fs, &object->handle, NULL, 0);
		if (size < 0) {
			ret = size;
			break;
		}
		gsh_free(list);
		list = gsh_malloc((size_t)size + 1);
		ret = ngnfs_listxattr(object->export->fs, &object->handle, list, (size_t)size);
		if (ret != -ERANGE)
			break;
	}
	if (ret < 0) {
		LogDebug(COMPONENT_FSAL, "NGNFS: listxattr of inode %" PRIu64 " failed: %s",
			 object->handle.ino, ngnfs_last_error());
		gsh_free(list);
		/* ERANGE five times: the list keeps changing under us */
		return ret == -ERANGE ? fsalstat(ERR_FSAL_DELAY, 0) : ngnfs_fsal_status((int)ret);
	}
	status = fsal_listxattr_helper(list, (size_t)ret, max_bytes, cookie, end_of_list, names);
	gsh_free(list);
	return status;
}

void ngnfs_fsal_xattr_ops_init(struct fsal_obj_ops *ops)
{
	ops->getxattrs = ngnfs_fsal_getxattrs;
	ops->setxattrs = ngnfs_fsal_setxattrs;
	ops->listxattrs = ngnfs_fsal_listxattrs;
	ops->removexattrs = ngnfs_fsal_removexattrs;
}
