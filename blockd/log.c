/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * blockd's log lines (see log.h).
 *
 * The device index is kept in an atomic so that the commit and resolver
 * threads can log while FORMAT changes it on the event loop.
 *
 * XXX:
 *  - No syslog or journal integration beyond stderr (systemd captures it).
 */

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "log.h"

static atomic_int log_level = BLOCKD_LOG_INFO;
static atomic_int log_device = -1;

static const char *const level_names[] = { "error", "warn", "info", "debug" };

int blockd_log_parse_level(const char *name)
{
	for (unsigned int i = 0; i < sizeof(level_names) / sizeof(level_names[0]); i++) {
		if (strcmp(name, level_names[i]) == 0)
			return (int)i;
	}
	return -EINVAL;
}

void blockd_log_set_level(int level)
{
	atomic_store(&log_level, level);
}

void blockd_log_set_device(int device)
{
	atomic_store(&log_device, device);
}

void blockd_log(int level, const char *fmt, ...)
{
	char line[1024];
	int device = atomic_load(&log_device);
	int used;
	va_list args;

	if (level > atomic_load(&log_level))
		return;

	if (device < 0)
		used = snprintf(line, sizeof(line), "blockd[unformatted]: ");
	else
		used = snprintf(line, sizeof(line), "blockd[%d]: ", device);

	va_start(args, fmt);
	used += vsnprintf(line + used, sizeof(line) - (size_t)used - 1, fmt, args);
	va_end(args);
	if (used > (int)sizeof(line) - 2)
		used = (int)sizeof(line) - 2;
	line[used++] = '\n';

	/* A short write to stderr has nowhere better to be reported. */
	if (write(STDERR_FILENO, line, (size_t)used) < 0)
		return;
}
