/* SPDX-License-Identifier: LGPL-3.0-or-later */
/*
 * Test-only: NFSv4.2 xattrs for the stock FSAL_VFS, stored as the exported
 * file's own user.* xattrs, so the tests can check end to end that what
 * NFS sets is what getxattr(2) sees on the exported folder and the other
 * way round (test_nfs42_xattr --local-xattrs).
 *
 * Why it is built this way: this is a shim named libfsalvfs.so in its own
 * folder (NFS_CORE_PARAM { Plugins_Dir }), linked against Debian's
 * /usr/lib/x86_64-linux-gnu/ganesha/libfsalvfs.so, so nothing of
 * ganesha's VFS is rebuilt.  When ganesha dlopen()s the shim, the stock
 * library is loaded as its dependency and registers FSAL "VFS"; its call
 * to the exported vfs_handle_ops_init() resolves to the definition here
 * first (the dlopen()ed object precedes its dependencies in the lookup
 * scope), which calls the real one (dlsym RTLD_NEXT) and then adds the
 * four xattr operations and sets xattr_support / ATTR4_XATTR in the
 * module's fs_info.  Each operation opens the object by handle with the
 * stock vfs_fsal_open() and uses f*xattr(2) with the "user." prefix that
 * RFC 8276 leaves implicit (as FSAL_CEPH does).
 *
 * XXX:
 *  - Runs the syscalls with the daemon's credentials (root), not the
 *    caller's: no permission test can use it.
 *  - Regular files and directories only (symlinks cannot be opened).
 *  - Relies on vfs_handle_ops_init() and vfs_fsal_open() staying exported
 *    from Debian's build and on struct vfs_fsal_module's layout in the
 *    4.3 headers.
 */

#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "fsal.h"
#include "fsal_convert.h"
#include "FSAL/fsal_commonlib.h"
#include "vfs_methods.h"

#define USER_PREFIX "user."

void vfs_handle_ops_init(struct fsal_obj_ops *ops);

static fsal_status_t errno_status(int error)
{
	if (error == ENODATA)
		return fsalstat(ERR_FSAL_NOXATTR, error);
	if (error == ERANGE || error == E2BIG)
		return fsalstat(ERR_FSAL_XATTR2BIG, error);
	return fsalstat(posix2fsal_error(error), error);
}

/* Open the object; *fd or an FSAL status. */
static fsal_status_t open_object(struct fsal_obj_handle *handle, int *fd)
{
	struct vfs_fsal_obj_handle *vfs_handle =
	    container_of(handle, struct vfs_fsal_obj_handle, obj_handle);
	fsal_errors_t error = ERR_FSAL_NO_ERROR;
	int flags = handle->type == DIRECTORY ? O_RDONLY | O_DIRECTORY : O_RDONLY;

	if (handle->type != REGULAR_FILE && handle->type != DIRECTORY)
		return fsalstat(ERR_FSAL_NOTSUPP, 0);
	*fd = vfs_fsal_open(vfs_handle, flags, &error);
	if (*fd < 0)
		return fsalstat(error != ERR_FSAL_NO_ERROR ? error : posix2fsal_error(-*fd), -*fd);
	return fsalstat(ERR_FSAL_NO_ERROR, 0);
}

/* "user." + name, within Linux's XATTR_NAME_MAX for the whole name. */
static bool full_name(const xattrkey4 *name, char *buffer, size_t size)
{
	if (name->utf8string_len == 0 ||
	    name->utf8string_len > XATTR_NAME_MAX - (sizeof(USER_PREFIX) - 1))
		return false;
	int length = snprintf(buffer, size, USER_PREFIX "%.*s", (int)name->utf8string_len,
			      name->utf8string_val);

	return length > 0 && (size_t)length < size;
}

static fsal_status_t vfs_getxattrs(struct fsal_obj_handle *handle, xattrkey4 *name,
				   xattrvalue4 *value)
{
	char attribute[XATTR_NAME_MAX + 2];
	fsal_status_t status;
	ssize_t length;
	int fd;

	if (!full_name(name, attribute, sizeof(attribute)))
		return fsalstat(ERR_FSAL_NAMETOOLONG, 0);
	status = open_object(handle, &fd);
	if (FSAL_IS_ERROR(status))
		return status;
	/* A zero-length buffer asks for the size, like getxattr(2). */
	length = fgetxattr(fd, attribute, value->utf8string_len ? value->utf8string_val : NULL,
			   value->utf8string_len);
	status = length < 0 ? errno_status(errno) : fsalstat(ERR_FSAL_NO_ERROR, 0);
	if (length >= 0)
		value->utf8string_len = (u_int)length;
	close(fd);
	return status;
}

static fsal_status_t vfs_setxattrs(struct fsal_obj_handle *handle, setxattr_option4 option,
				   xattrkey4 *name, xattrvalue4 *value)
{
	char attribute[XATTR_NAME_MAX + 2];
	fsal_status_t status;
	int flags;
	int fd;

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
		return fsalstat(ERR_FSAL_INVAL, 0);
	}
	if (!full_name(name, attribute, sizeof(attribute)))
		return fsalstat(ERR_FSAL_NAMETOOLONG, 0);
	status = open_object(handle, &fd);
	if (FSAL_IS_ERROR(status))
		return status;
	if (fsetxattr(fd, attribute, value->utf8string_val, value->utf8string_len, flags) < 0)
		status = errno_status(errno);
	close(fd);
	return status;
}

static fsal_status_t vfs_removexattrs(struct fsal_obj_handle *handle, xattrkey4 *name)
{
	char attribute[XATTR_NAME_MAX + 2];
	fsal_status_t status;
	int fd;

	if (!full_name(name, attribute, sizeof(attribute)))
		return fsalstat(ERR_FSAL_NAMETOOLONG, 0);
	status = open_object(handle, &fd);
	if (FSAL_IS_ERROR(status))
		return status;
	if (fremovexattr(fd, attribute) < 0)
		status = errno_status(errno);
	close(fd);
	return status;
}

static fsal_status_t vfs_listxattrs(struct fsal_obj_handle *handle, count4 max_count,
				    nfs_cookie4 *cookie, bool_t *eof, xattrlist4 *names)
{
	fsal_status_t status;
	ssize_t length;
	char *list = NULL;
	int attempt;
	int fd;

	status = open_object(handle, &fd);
	if (FSAL_IS_ERROR(status))
		return status;
	/* The list can grow between the size query and the read: retry. */
	for (attempt = 0; attempt < 5; attempt++) {
		length = flistxattr(fd, NULL, 0);
		if (length < 0)
			break;
		free(list);
		list = malloc(length ? (size_t)length : 1);
		if (!list) {
			close(fd);
			return fsalstat(ERR_FSAL_NOMEM, ENOMEM);
		}
		length = flistxattr(fd, list, (size_t)length);
		if (length >= 0 || errno != ERANGE)
			break;
	}
	if (length < 0)
		status = errno_status(errno);
	else
		status = fsal_listxattr_helper(list, (size_t)length, max_count, cookie, eof, names);
	free(list);
	close(fd);
	return status;
}

void vfs_handle_ops_init(struct fsal_obj_ops *ops)
{
	void (*real_init)(struct fsal_obj_ops * ops) =
	    (void (*)(struct fsal_obj_ops *))dlsym(RTLD_NEXT, "vfs_handle_ops_init");
	struct vfs_fsal_module *module = container_of(ops, struct vfs_fsal_module, handle_ops);

	if (!real_init) {
		fprintf(stderr, "vfs_xattr shim: the stock vfs_handle_ops_init is missing: %s\n",
			dlerror());
		abort();
	}
	real_init(ops);
	ops->getxattrs = vfs_getxattrs;
	ops->setxattrs = vfs_setxattrs;
	ops->removexattrs = vfs_removexattrs;
	ops->listxattrs = vfs_listxattrs;
	module->module.fs_info.xattr_support = true;
	module->module.fs_info.supported_attrs |= ATTR4_XATTR;
}
