/* SPDX-License-Identifier: GPL-2.0-or-later */
#ifndef NGNFS_BLOCKD_LOG_H
#define NGNFS_BLOCKD_LOG_H

/*
 * blockd's log: one line per event on stderr, prefixed
 * "blockd[<device index>]: " or "blockd[unformatted]: " so that the lines
 * of several blockd processes sharing a journal or a test log can be told
 * apart.  Lines are written with one write() so that threads never
 * interleave within a line.
 *
 * XXX:
 *  - Lines longer than 1 KiB are cut.
 */

#include <stdarg.h>

enum blockd_log_level {
	BLOCKD_LOG_ERROR = 0,
	BLOCKD_LOG_WARN = 1,
	BLOCKD_LOG_INFO = 2,
	BLOCKD_LOG_DEBUG = 3,
};

/* Returns the level or -EINVAL for a name that is not one. */
int blockd_log_parse_level(const char *name);
void blockd_log_set_level(int level);
/* device < 0 means unformatted. */
void blockd_log_set_device(int device);
void blockd_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_error(...) blockd_log(BLOCKD_LOG_ERROR, __VA_ARGS__)
#define log_warn(...)  blockd_log(BLOCKD_LOG_WARN, __VA_ARGS__)
#define log_info(...)  blockd_log(BLOCKD_LOG_INFO, __VA_ARGS__)
#define log_debug(...) blockd_log(BLOCKD_LOG_DEBUG, __VA_ARGS__)

#endif
