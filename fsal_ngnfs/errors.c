// SPDX-License-Identifier: LGPL-3.0-or-later
/*
 * libcore's negative errno values as FSAL errors.
 *
 * ganesha has its own mapping (posix2fsal_error), but it is written for
 * local filesystems: it maps ENODATA to ERR_FSAL_NO_DATA and ERANGE to
 * ERR_FSAL_BAD_RANGE, which NFSv4.2 xattr replies cannot use, knows
 * nothing of a network below the filesystem, and sends everything it does
 * not know to SERVERFAULT with a LogCrit.  So every errno libcore returns
 * is listed here, with the NFS meaning chosen on purpose:
 *
 *  - a blockd that cannot be reached (refused, reset, timed out, session
 *    shut down) is ERR_FSAL_IO: the operation failed and changed nothing,
 *    and NFS4ERR_IO reaches the application instead of making a client
 *    retry forever.  libcore answers EAGAIN instead while the device has
 *    been away for less than Reclaim_Timeout_Ms (cache.c), so that a
 *    device restart is a pause for applications, not an error;
 *  - a busy block or a device away for a short while (EAGAIN, EBUSY,
 *    EINPROGRESS) is ERR_FSAL_DELAY: NFS4ERR_DELAY (v3 NFS3ERR_JUKEBOX),
 *    which clients retry by themselves;
 *  - corrupt or malformed blocks and protocol errors (EBADMSG, EPROTO,
 *    EUCLEAN) are ERR_FSAL_IO: never a crash, never silent;
 *  - xattrs: ENODATA is NOXATTR, ERANGE (buffer too small) and E2BIG
 *    (value too big) are XATTR2BIG, EOPNOTSUPP is NOTSUPP.
 *
 * Anything else is SERVERFAULT and logged once per call with its name.
 */

#include "config.h"

#include <errno.h>
#include <string.h>

#include "fsal.h"

#include "internal.h"

fsal_errors_t ngnfs_fsal_error(int error)
{
	switch (error) {
	case 0:
		return ERR_FSAL_NO_ERROR;
	case EPERM:
		return ERR_FSAL_PERM;
	case ENOENT:
		return ERR_FSAL_NOENT;
	case EIO:
	case EBADMSG:
	case EPROTO:
	case EPROTONOSUPPORT:
	case EUCLEAN:
	case EMSGSIZE:
	case ENOTRECOVERABLE:
	case ENOTCONN:
	case ECONNREFUSED:
	case ECONNRESET:
	case ECONNABORTED:
	case ESHUTDOWN:
	case ETIMEDOUT:
	case EHOSTUNREACH:
	case ENETUNREACH:
	case ENETDOWN:
	case EHOSTDOWN:
	case EPIPE:
		return ERR_FSAL_IO;
	case ENXIO:
	case ENODEV:
		return ERR_FSAL_NXIO;
	case EBADF:
		return ERR_FSAL_NOT_OPENED;
	case ENOMEM:
		return ERR_FSAL_NOMEM;
	case EACCES:
		return ERR_FSAL_ACCESS;
	case EFAULT:
		return ERR_FSAL_FAULT;
	case EEXIST:
		return ERR_FSAL_EXIST;
	case EXDEV:
		return ERR_FSAL_XDEV;
	case ENOTDIR:
		return ERR_FSAL_NOTDIR;
	case EISDIR:
		return ERR_FSAL_ISDIR;
	case EINVAL:
		return ERR_FSAL_INVAL;
	case EFBIG:
		return ERR_FSAL_FBIG;
	case ENOSPC:
		return ERR_FSAL_NOSPC;
	case EROFS:
		return ERR_FSAL_ROFS;
	case EMLINK:
		return ERR_FSAL_MLINK;
	case EDQUOT:
		return ERR_FSAL_DQUOT;
	case ENAMETOOLONG:
		return ERR_FSAL_NAMETOOLONG;
	case ENOTEMPTY:
		return ERR_FSAL_NOTEMPTY;
	case ESTALE:
		return ERR_FSAL_STALE;
	case EAGAIN:
	case EBUSY:
	case EINPROGRESS:
		return ERR_FSAL_DELAY;
	case EOPNOTSUPP:
	case ENOSYS:
		return ERR_FSAL_NOTSUPP;
	case EOVERFLOW:
		return ERR_FSAL_OVERFLOW;
	case EDEADLK:
		return ERR_FSAL_DEADLOCK;
	case EINTR:
		return ERR_FSAL_INTERRUPT;
	case ELOOP:
		return ERR_FSAL_SYMLINK;
	case ETXTBSY:
		return ERR_FSAL_SHARE_DENIED;
	case ENODATA:
		return ERR_FSAL_NOXATTR;
	case ERANGE:
	case E2BIG:
		return ERR_FSAL_XATTR2BIG;
	case EILSEQ:
		return ERR_FSAL_BADNAME;
	default:
		LogCrit(COMPONENT_FSAL, "NGNFS: libcore returned unexpected error %d (%s): %s",
			error, strerror(error), ngnfs_last_error());
		return ERR_FSAL_SERVERFAULT;
	}
}
