/* SPDX-License-Identifier: GPL-2.0-or-later */
#ifndef NGNFS_CLIENT_TEST_H
#define NGNFS_CLIENT_TEST_H

/*
 * Helpers shared by the network client tests (ctest/client/): a formatted
 * cluster of real blockd processes, clients on it, forked client
 * processes, and assertions that say what was expected and what came.
 *
 * Tests fork client processes because the behaviour under test is
 * between independent sessions (coherency between clients, a client
 * killed with SIGKILL).  Children exit with _exit() so that the harness's
 * atexit cleanup, which stops the blockd processes, runs only in the
 * test's own process.
 */

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/types.h>

#include "client.h"
#include "cluster.h"

/* Fail the current process with a message: in a child, _exit(1). */
void client_test_fail(const char *file, int line, const char *format, ...)
    __attribute__((format(printf, 3, 4), noreturn));

#define CHECK(condition, ...)                                                                      \
	do {                                                                                       \
		if (!(condition))                                                                  \
			client_test_fail(__FILE__, __LINE__, __VA_ARGS__);                         \
	} while (0)

/* An errno-style result: expected 0, got ret. */
#define CHECK_OK(ret, what)                                                                        \
	do {                                                                                       \
		int check_ok_ret = (ret);                                                          \
		CHECK(check_ok_ret == 0, "%s: expected success, got %d (%s)", (what),              \
		      check_ok_ret, strerror(-check_ok_ret));                                      \
	} while (0)

struct client_test_fs {
	struct ngnfs_test_cluster *cluster;
	uint8_t fs_id[NGNFS_FS_ID_SIZE];
	unsigned int device_count;
};

/* Start device_count blockd processes and format them as one filesystem. */
void client_test_fs_start(struct client_test_fs *fs, unsigned int device_count, const char *name,
			  const char *const *extra_args);
void client_test_fs_stop(struct client_test_fs *fs);

/* A client on fs (fs id learned), asserting success. */
struct ngnfs_client *client_test_open(struct client_test_fs *fs, const struct ngnfs_client_ops *ops,
				      void *owner, uint32_t request_timeout_ms);
/* The same returning the error; addresses NULL means the cluster's. */
int client_test_try_open(struct client_test_fs *fs, const char *const *addresses,
			 const uint8_t *fs_id, const struct ngnfs_client_ops *ops, void *owner,
			 uint32_t request_timeout_ms, struct ngnfs_client **client);

/* Fork a child running fn(arg); it exits with fn's return value. */
pid_t client_test_fork(int (*fn)(void *arg), void *arg);
/* Wait (bounded) for a child and return its exit status, failing the test on a signal. */
int client_test_wait_child(pid_t pid, unsigned int timeout_ms, const char *what);

uint64_t client_test_now_ms(void);
/* Wait until the device has a session again (bounded). */
int client_test_wait_session(struct ngnfs_client *client, uint16_t device, unsigned int timeout_ms);

/* Capture stderr (fd 2) into a temporary file and give it back as a string. */
void client_test_capture_stderr_begin(void);
char *client_test_capture_stderr_end(void);

/* A seed from NGNFS_TEST_SEED or the clock, printed so that a failure can be replayed. */
unsigned int client_test_seed(const char *test);

#endif
