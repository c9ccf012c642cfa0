/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Helpers for the network client tests; see client_test.h.
 *
 * Formatting goes through the client itself (HELLO with
 * NGNFS_HELLO_FORMAT, then FORMAT per device), which is also the first
 * thing the tests check: a cluster that cannot be formatted fails here
 * with the device named.
 */

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <string.h>
#include <sys/random.h>
#include <sys/wait.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include "client_test.h"

/*
 * <sys/prctl.h> pulls in <linux/types.h>, whose __le64 conflicts with
 * format-msg.h's typedef; declare the one call we need instead.
 */
extern int prctl(int option, ...);
#ifndef PR_SET_PDEATHSIG
#define PR_SET_PDEATHSIG 1
#endif

static pid_t test_pid;

void client_test_fail(const char *file, int line, const char *format, ...)
{
	va_list args;

	fprintf(stderr, "FAIL %s:%d (pid %d): ", file, line, (int)getpid());
	va_start(args, format);
	vfprintf(stderr, format, args);
	va_end(args);
	fprintf(stderr, "\n");
	fflush(stderr);
	if (test_pid && getpid() != test_pid)
		_exit(1);
	exit(1);
}

uint64_t client_test_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

int client_test_try_open(struct client_test_fs *fs, const char *const *addresses,
			 const uint8_t *fs_id, const struct ngnfs_client_ops *ops, void *owner,
			 uint32_t request_timeout_ms, struct ngnfs_client **client)
{
	struct ngnfs_client_config config = {
		.device_addresses =
		    addresses ? addresses : ngnfs_test_cluster_addresses(fs->cluster),
		.device_count = (uint16_t)fs->device_count,
		.connect_timeout_ms = 3000,
		.request_timeout_ms = request_timeout_ms,
	};

	if (fs_id)
		memcpy(config.fs_id, fs_id, NGNFS_FS_ID_SIZE);
	return ngnfs_client_create(&config, ops, owner, client);
}

struct ngnfs_client *client_test_open(struct client_test_fs *fs, const struct ngnfs_client_ops *ops,
				      void *owner, uint32_t request_timeout_ms)
{
	struct ngnfs_client *client = NULL;
	int ret;

	ret = client_test_try_open(fs, NULL, NULL, ops, owner, request_timeout_ms, &client);
	CHECK_OK(ret, "opening a client on the formatted cluster");
	return client;
}

void client_test_fs_start(struct client_test_fs *fs, unsigned int device_count, const char *name,
			  const char *const *extra_args)
{
	struct ngnfs_client_config config = { 0 };
	struct ngnfs_client *client = NULL;
	int ret;

	if (!test_pid)
		test_pid = getpid();
	memset(fs, 0, sizeof(*fs));
	fs->device_count = device_count;
	fs->cluster = ngnfs_test_cluster_start_args(device_count, name, extra_args);
	CHECK(fs->cluster, "starting %u blockd processes: expected a cluster, got none",
	      device_count);
	CHECK(getrandom(fs->fs_id, sizeof(fs->fs_id), 0) == sizeof(fs->fs_id), "getrandom");

	config.device_addresses = ngnfs_test_cluster_addresses(fs->cluster);
	config.device_count = (uint16_t)device_count;
	config.hello_flags = NGNFS_HELLO_FORMAT;
	config.connect_timeout_ms = 3000;
	config.request_timeout_ms = 10000;
	ret = ngnfs_client_create(&config, NULL, NULL, &client);
	CHECK_OK(ret, "opening a FORMAT session with every device");
	for (unsigned int d = 0; d < device_count; d++) {
		ret = ngnfs_client_format_sync(client, (uint16_t)d, fs->fs_id, device_count);
		CHECK(ret == 0, "FORMAT of device %u at %s: expected 0, got %d (%s)", d,
		      ngnfs_test_cluster_address(fs->cluster, d), ret, strerror(-ret));
	}
	ngnfs_client_destroy(client);
}

void client_test_fs_stop(struct client_test_fs *fs)
{
	int ret = ngnfs_test_cluster_stop(fs->cluster);

	fs->cluster = NULL;
	CHECK(ret == 0, "stopping the cluster: expected every blockd to exit cleanly, got %d", ret);
}

pid_t client_test_fork(int (*fn)(void *arg), void *arg)
{
	pid_t parent = getpid();
	pid_t pid;

	if (!test_pid)
		test_pid = parent;
	fflush(stdout);
	fflush(stderr);
	pid = fork();
	CHECK(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(1);
		_exit(fn(arg));
	}
	return pid;
}

int client_test_wait_child(pid_t pid, unsigned int timeout_ms, const char *what)
{
	uint64_t deadline = client_test_now_ms() + timeout_ms;
	int status;

	for (;;) {
		pid_t got = waitpid(pid, &status, WNOHANG);

		CHECK(got >= 0, "waiting for %s (pid %d): %s", what, (int)pid, strerror(errno));
		if (got == pid)
			break;
		if (client_test_now_ms() > deadline) {
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			CHECK(false, "%s (pid %d): expected it to finish within %u ms, it did not",
			      what, (int)pid, timeout_ms);
		}
		usleep(10000);
	}
	CHECK(WIFEXITED(status), "%s (pid %d): expected an exit, got signal %d", what, (int)pid,
	      WIFSIGNALED(status) ? WTERMSIG(status) : -1);
	return WEXITSTATUS(status);
}

int client_test_wait_session(struct ngnfs_client *client, uint16_t device, unsigned int timeout_ms)
{
	uint64_t deadline = client_test_now_ms() + timeout_ms;
	struct ngnfs_msg hello;

	while (ngnfs_client_device_info(client, device, &hello) != 0) {
		if (client_test_now_ms() > deadline)
			return -ETIMEDOUT;
		usleep(10000);
	}
	return 0;
}

void client_test_capture_stderr_begin(void)
{
	int ret = ngnfs_test_capture_stderr_begin();

	CHECK(ret == 0, "capturing stderr: %s", strerror(-ret));
}

char *client_test_capture_stderr_end(void)
{
	char *text = ngnfs_test_capture_stderr_end();

	CHECK(text, "reading captured stderr");
	return text;
}

unsigned int client_test_seed(const char *test)
{
	const char *env = getenv("NGNFS_TEST_SEED");
	unsigned int seed;

	if (env)
		seed = (unsigned int)strtoul(env, NULL, 0);
	else
		seed = (unsigned int)time(NULL) ^ (unsigned int)getpid();
	printf("%s: seed %u (replay with NGNFS_TEST_SEED=%u)\n", test, seed, seed);
	fflush(stdout);
	return seed;
}
