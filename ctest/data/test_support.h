/* SPDX-License-Identifier: GPL-2.0-or-later */
#ifndef NGNFS_TEST_DATA_SUPPORT_H
#define NGNFS_TEST_DATA_SUPPORT_H

/* The last error message recorded by ngnfs_fail/ngnfs_fail_quiet (test_support.c). */
const char *ngnfs_test_last_error(void);

#endif
