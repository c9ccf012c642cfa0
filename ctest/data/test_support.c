// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * What the data and xattr test library needs from libcore/fs.c without
 * the rest of fs.c (which pulls in the cache, the client and the
 * namespace): the error reporting of fs-internal.h, with the same
 * behaviour (log line on stderr for ngnfs_fail, the thread's last error
 * for both, -EAGAIN never reported).  Tests can also read the last error
 * to check that a failure names its object.
 */

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>

#include "fs-internal.h"
#include "test_support.h"

static __thread char last_error[512];

static void set_error(bool log, const char *fmt, va_list args)
{
	vsnprintf(last_error, sizeof(last_error), fmt, args);
	if (log)
		fprintf(stderr, "ngnfs: %s\n", last_error);
}

int ngnfs_fail(int err, const char *fmt, ...)
{
	va_list args;

	if (err == -EAGAIN)
		return err;
	va_start(args, fmt);
	set_error(true, fmt, args);
	va_end(args);
	return err;
}

int ngnfs_fail_quiet(int err, const char *fmt, ...)
{
	va_list args;

	if (err == -EAGAIN)
		return err;
	va_start(args, fmt);
	set_error(false, fmt, args);
	va_end(args);
	return err;
}

void ngnfs_clear_error(void)
{
	last_error[0] = '\0';
}

const char *ngnfs_test_last_error(void)
{
	return last_error;
}
