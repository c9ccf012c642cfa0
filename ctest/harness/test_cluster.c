/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Tests of the shared harness itself, against the real blockd: every other
 * area's cluster tests trust that "killed" means the process is gone, that
 * "restarted" means the same database is served on the same address, and
 * that stop leaves neither processes nor folders behind.  Reachability is
 * checked with a plain TCP connect so this test does not depend on the
 * protocol being implemented.
 *
 * XXX:
 *  - Does not test the signal-handler cleanup path (would need a second
 *    process level); PR_SET_PDEATHSIG is exercised only indirectly.
 */

#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "cluster.h"

/* 0 if something accepts TCP connections on the loopback port, else -errno. */
static int try_connect(uint16_t port)
{
	struct sockaddr_in address = { .sin_family = AF_INET, .sin_port = htons(port) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int ret = 0;

	if (fd < 0)
		return -errno;
	address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (connect(fd, (struct sockaddr *)&address, sizeof(address)) < 0)
		ret = -errno;
	close(fd);
	return ret;
}

static bool process_exists(pid_t pid)
{
	return kill(pid, 0) == 0 || errno != ESRCH;
}

static void test_start_kill_restart_stop(void **state)
{
	struct ngnfs_test_cluster *cluster;
	const char *const *addresses;
	char *manifest;
	char *dir;
	char expected[64];
	pid_t old_pid;
	pid_t pids[2];
	uint16_t port;
	struct stat st;
	struct timespec before;
	struct timespec after;

	(void)state;
	cluster = ngnfs_test_cluster_start(2, "harness");
	assert_non_null(cluster);
	assert_int_equal(ngnfs_test_cluster_device_count(cluster), 2);

	addresses = ngnfs_test_cluster_addresses(cluster);
	assert_non_null(addresses[0]);
	assert_non_null(addresses[1]);
	assert_null(addresses[2]);
	assert_string_not_equal(addresses[0], addresses[1]);

	/* the manifest lists the devices in index order, comments allowed */
	manifest = ngnfs_test_read_file(ngnfs_test_cluster_manifest(cluster), NULL);
	assert_non_null(manifest);
	for (unsigned int i = 0; i < 2; i++) {
		snprintf(expected, sizeof(expected), "\n%s\n", addresses[i]);
		if (!strstr(manifest, expected))
			fail_msg("manifest %s lacks device %u's line \"%s\":\n%s",
				 ngnfs_test_cluster_manifest(cluster), i, addresses[i], manifest);
	}
	assert_true(strstr(manifest, addresses[0]) < strstr(manifest, addresses[1]));
	free(manifest);

	for (unsigned int i = 0; i < 2; i++) {
		port = ngnfs_test_cluster_port(cluster, i);
		pids[i] = ngnfs_test_cluster_pid(cluster, i);
		assert_true(pids[i] > 0);
		snprintf(expected, sizeof(expected), "127.0.0.1:%u", port);
		assert_string_equal(addresses[i], expected);
		assert_int_equal(try_connect(port), 0);
	}

	/* SIGKILL: the process is reaped and nothing listens any more */
	port = ngnfs_test_cluster_port(cluster, 1);
	old_pid = pids[1];
	assert_int_equal(ngnfs_test_cluster_kill(cluster, 1, SIGKILL), 0);
	assert_int_equal(ngnfs_test_cluster_pid(cluster, 1), 0);
	assert_false(process_exists(old_pid));
	assert_int_equal(try_connect(port), -ECONNREFUSED);
	assert_int_equal(ngnfs_test_cluster_kill(cluster, 1, SIGKILL), -ESRCH);
	/* device 0 is untouched */
	assert_int_equal(try_connect(ngnfs_test_cluster_port(cluster, 0)), 0);

	/* restart: a new process on the same port and the same database */
	assert_int_equal(ngnfs_test_cluster_restart(cluster, 1), 0);
	assert_int_equal(ngnfs_test_cluster_restart(cluster, 1), -EBUSY);
	assert_true(ngnfs_test_cluster_pid(cluster, 1) > 0);
	assert_int_not_equal(ngnfs_test_cluster_pid(cluster, 1), old_pid);
	assert_int_equal(ngnfs_test_cluster_port(cluster, 1), port);
	assert_string_equal(ngnfs_test_cluster_address(cluster, 1), addresses[1]);
	assert_int_equal(try_connect(port), 0);
	assert_int_equal(stat(ngnfs_test_cluster_db_path(cluster, 1), &st), 0);

	/* a restart straight after SIGTERM as well (socket maybe in TIME_WAIT) */
	assert_int_equal(ngnfs_test_cluster_kill(cluster, 1, SIGTERM), 0);
	assert_int_equal(ngnfs_test_cluster_restart(cluster, 1), 0);
	assert_int_equal(try_connect(port), 0);

	/* a stopped device does not hold up stop (it gets SIGCONT after SIGTERM) */
	assert_int_equal(ngnfs_test_cluster_kill(cluster, 0, SIGSTOP), 0);
	assert_int_equal(ngnfs_test_cluster_pid(cluster, 0), pids[0]);

	/* stop: every blockd exits cleanly on SIGTERM and the folder goes away */
	pids[1] = ngnfs_test_cluster_pid(cluster, 1);
	clock_gettime(CLOCK_MONOTONIC, &before);
	dir = strdup(ngnfs_test_cluster_dir(cluster));
	assert_non_null(dir);
	assert_int_equal(ngnfs_test_cluster_stop(cluster), 0);
	clock_gettime(CLOCK_MONOTONIC, &after);
	if (after.tv_sec - before.tv_sec > 5)
		fail_msg("stop took %ld s, expected well under the 10 s SIGKILL timeout",
			 (long)(after.tv_sec - before.tv_sec));
	assert_false(process_exists(pids[0]));
	assert_false(process_exists(pids[1]));
	if (!getenv("NGNFS_KEEP_TEST_DIRS") && stat(dir, &st) == 0)
		fail_msg("cluster folder %s still exists after stop", dir);
	free(dir);
}

static void test_run_reports_status_and_timeout(void **state)
{
	const char *const true_argv[] = { "true", NULL };
	const char *const false_argv[] = { "false", NULL };
	const char *const sleep_argv[] = { "sleep", "30", NULL };
	const char *const missing_argv[] = { "/nonexistent/ngnfs-no-such-program", NULL };
	char output_path[] = "/tmp/ngnfs-harness-run-XXXXXX";
	const char *const echo_argv[] = { "echo", "hello from child", NULL };
	int wait_status = -1;
	char *output;
	int fd;

	(void)state;
	assert_int_equal(ngnfs_test_run(true_argv, NULL, 5000, &wait_status), 0);
	assert_true(WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 0);
	assert_int_equal(ngnfs_test_run(false_argv, NULL, 5000, &wait_status), 0);
	assert_true(WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 1);
	assert_int_equal(ngnfs_test_run(missing_argv, "/dev/null", 5000, &wait_status), 0);
	assert_true(WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 127);
	assert_int_equal(ngnfs_test_run(sleep_argv, NULL, 200, &wait_status), -ETIMEDOUT);

	fd = mkstemp(output_path);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(ngnfs_test_run(echo_argv, output_path, 5000, &wait_status), 0);
	output = ngnfs_test_read_file(output_path, NULL);
	unlink(output_path);
	assert_non_null(output);
	assert_string_equal(output, "hello from child\n");
	free(output);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_run_reports_status_and_timeout),
		cmocka_unit_test(test_start_kill_restart_stop),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
