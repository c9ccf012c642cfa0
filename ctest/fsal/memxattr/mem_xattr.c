/* SPDX-License-Identifier: LGPL-3.0-or-later */
/*
 * Test-only: NFSv4.2 xattrs for ganesha's FSAL_MEM, so the xattr tests
 * have a reference server to run against before FSAL_NGNFS implements
 * them.
 *
 * Why this exists: in ganesha 4.3 only FSAL_CEPH implements the RFC 8276
 * operations; VFS and MEM answer NFS4ERR_NOTSUPP, so our own NFSv4.2
 * client (ctest/fsal/nfs42_xattr.c) could not be checked against a real
 * server's *successful* replies.  This file is linked with ganesha's own,
 * unmodified FSAL_MEM sources (from the source package the FSAL build
 * fetches) into a test copy of libfsalmem.so; the linker option
 * --wrap=mem_handle_ops_init lets it add the four xattr operations to
 * MEM's handle ops and set xattr_support / ATTR4_XATTR in MEM's fs_info
 * without patching ganesha's files.  The daemon loads it through
 * NFS_CORE_PARAM { Plugins_Dir = <its folder>; } as FSAL "MEM".
 *
 * Semantics follow what ganesha's core expects from an FSAL (the CEPH
 * implementation): names arrive without the "user." prefix; GETXATTR with
 * a zero-length buffer asks for the size; a value that does not fit is
 * ERR_FSAL_XATTR2BIG (the core retries with a bigger buffer); listing
 * goes through the core's fsal_listxattr_helper(), which owns cookies and
 * the byte limit; limits are Linux's (255-byte names, 64 KiB values).
 *
 * XXX:
 *  - One global list under one mutex, keyed by handle address; entries
 *    of a freed handle are never dropped, so a recycled address could
 *    inherit them.  Fine for a short test, never for real use.
 *  - No permission checks.
 */

#include "config.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "fsal.h"
#include "fsal_convert.h"
#include "FSAL/fsal_commonlib.h"
#include "mem_int.h"

#define MEM_XATTR_NAME_MAX  255
#define MEM_XATTR_VALUE_MAX (64 * 1024)
#define USER_PREFIX	    "user."

struct mem_xattr {
	struct fsal_obj_handle *handle;
	char *name;
	uint32_t name_length;
	char *value;
	uint32_t value_length;
};

static pthread_mutex_t xattr_lock = PTHREAD_MUTEX_INITIALIZER;
static struct mem_xattr *xattrs;
static size_t xattr_count;
static size_t xattr_capacity;

void __real_mem_handle_ops_init(struct fsal_obj_ops *ops);
void __wrap_mem_handle_ops_init(struct fsal_obj_ops *ops);

static long find_xattr(struct fsal_obj_handle *handle, const xattrkey4 *name)
{
	size_t i;

	for (i = 0; i < xattr_count; i++)
		if (xattrs[i].handle == handle && xattrs[i].name_length == name->utf8string_len &&
		    memcmp(xattrs[i].name, name->utf8string_val, name->utf8string_len) == 0)
			return (long)i;
	return -1;
}

static fsal_status_t mem_getxattrs(struct fsal_obj_handle *handle, xattrkey4 *name,
				   xattrvalue4 *value)
{
	fsal_status_t status = fsalstat(ERR_FSAL_NO_ERROR, 0);
	long index;

	if (name->utf8string_len == 0 || name->utf8string_len > MEM_XATTR_NAME_MAX)
		return fsalstat(ERR_FSAL_NAMETOOLONG, 0);
	pthread_mutex_lock(&xattr_lock);
	index = find_xattr(handle, name);
	if (index < 0) {
		status = fsalstat(ERR_FSAL_NOXATTR, 0);
	} else if (value->utf8string_len == 0) {
		/* The core asks for the size before retrying. */
		value->utf8string_len = xattrs[index].value_length;
	} else if (xattrs[index].value_length > value->utf8string_len) {
		status = fsalstat(ERR_FSAL_XATTR2BIG, 0);
	} else {
		memcpy(value->utf8string_val, xattrs[index].value, xattrs[index].value_length);
		value->utf8string_len = xattrs[index].value_length;
	}
	pthread_mutex_unlock(&xattr_lock);
	return status;
}

static fsal_status_t mem_setxattrs(struct fsal_obj_handle *handle, setxattr_option4 option,
				   xattrkey4 *name, xattrvalue4 *value)
{
	fsal_status_t status = fsalstat(ERR_FSAL_NO_ERROR, 0);
	struct mem_xattr *entry;
	char *copy;
	long index;

	if (name->utf8string_len == 0 || name->utf8string_len > MEM_XATTR_NAME_MAX)
		return fsalstat(ERR_FSAL_NAMETOOLONG, 0);
	if (value->utf8string_len > MEM_XATTR_VALUE_MAX)
		return fsalstat(ERR_FSAL_XATTR2BIG, 0);
	if (option != SETXATTR4_EITHER && option != SETXATTR4_CREATE && option != SETXATTR4_REPLACE)
		return fsalstat(ERR_FSAL_INVAL, 0);
	copy = malloc(value->utf8string_len ? value->utf8string_len : 1);
	if (!copy)
		return fsalstat(ERR_FSAL_NOMEM, ENOMEM);
	memcpy(copy, value->utf8string_val, value->utf8string_len);

	pthread_mutex_lock(&xattr_lock);
	index = find_xattr(handle, name);
	if (index >= 0 && option == SETXATTR4_CREATE) {
		status = fsalstat(ERR_FSAL_EXIST, 0);
	} else if (index < 0 && option == SETXATTR4_REPLACE) {
		status = fsalstat(ERR_FSAL_NOXATTR, 0);
	} else if (index >= 0) {
		free(xattrs[index].value);
		xattrs[index].value = copy;
		xattrs[index].value_length = value->utf8string_len;
		copy = NULL;
	} else {
		if (xattr_count == xattr_capacity) {
			size_t capacity = xattr_capacity ? xattr_capacity * 2 : 64;
			struct mem_xattr *grown = realloc(xattrs, capacity * sizeof(*grown));

			if (!grown) {
				status = fsalstat(ERR_FSAL_NOMEM, ENOMEM);
				goto out;
			}
			xattrs = grown;
			xattr_capacity = capacity;
		}
		entry = &xattrs[xattr_count];
		entry->name = malloc(name->utf8string_len);
		if (!entry->name) {
			status = fsalstat(ERR_FSAL_NOMEM, ENOMEM);
			goto out;
		}
		memcpy(entry->name, name->utf8string_val, name->utf8string_len);
		entry->name_length = name->utf8string_len;
		entry->handle = handle;
		entry->value = copy;
		entry->value_length = value->utf8string_len;
		copy = NULL;
		xattr_count++;
	}
out:
	pthread_mutex_unlock(&xattr_lock);
	free(copy);
	return status;
}

static fsal_status_t mem_removexattrs(struct fsal_obj_handle *handle, xattrkey4 *name)
{
	long index;

	if (name->utf8string_len == 0 || name->utf8string_len > MEM_XATTR_NAME_MAX)
		return fsalstat(ERR_FSAL_NAMETOOLONG, 0);
	pthread_mutex_lock(&xattr_lock);
	index = find_xattr(handle, name);
	if (index < 0) {
		pthread_mutex_unlock(&xattr_lock);
		return fsalstat(ERR_FSAL_NOXATTR, 0);
	}
	free(xattrs[index].name);
	free(xattrs[index].value);
	/* Keep the order: listing cookies count positions. */
	memmove(&xattrs[index], &xattrs[index + 1],
		(xattr_count - (size_t)index - 1) * sizeof(*xattrs));
	xattr_count--;
	pthread_mutex_unlock(&xattr_lock);
	return fsalstat(ERR_FSAL_NO_ERROR, 0);
}

static fsal_status_t mem_listxattrs(struct fsal_obj_handle *handle, count4 max_count,
				    nfs_cookie4 *cookie, bool_t *eof, xattrlist4 *names)
{
	fsal_status_t status;
	size_t length = 0;
	size_t i;
	char *list;
	char *end;

	/* The Linux listxattr(2) format the core's helper parses. */
	pthread_mutex_lock(&xattr_lock);
	for (i = 0; i < xattr_count; i++)
		if (xattrs[i].handle == handle)
			length += sizeof(USER_PREFIX) + xattrs[i].name_length;
	list = malloc(length ? length : 1);
	if (!list) {
		pthread_mutex_unlock(&xattr_lock);
		return fsalstat(ERR_FSAL_NOMEM, ENOMEM);
	}
	end = list;
	for (i = 0; i < xattr_count; i++) {
		if (xattrs[i].handle != handle)
			continue;
		memcpy(end, USER_PREFIX, sizeof(USER_PREFIX) - 1);
		end += sizeof(USER_PREFIX) - 1;
		memcpy(end, xattrs[i].name, xattrs[i].name_length);
		end += xattrs[i].name_length;
		*end++ = '\0';
	}
	pthread_mutex_unlock(&xattr_lock);
	status = fsal_listxattr_helper(list, length, max_count, cookie, eof, names);
	free(list);
	return status;
}

void __wrap_mem_handle_ops_init(struct fsal_obj_ops *ops)
{
	__real_mem_handle_ops_init(ops);
	ops->getxattrs = mem_getxattrs;
	ops->setxattrs = mem_setxattrs;
	ops->removexattrs = mem_removexattrs;
	ops->listxattrs = mem_listxattrs;
	/* Called from MEM's init() right after register_fsal(). */
	MEM.fsal.fs_info.xattr_support = true;
	MEM.fsal.fs_info.supported_attrs |= ATTR4_XATTR;
}
