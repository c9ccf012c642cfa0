/* SPDX-License-Identifier: GPL-2.0-or-later */
#ifndef NGNFS_TEST_CLUSTER_H
#define NGNFS_TEST_CLUSTER_H

/*
 * The shared test harness: a throwaway cluster of blockd processes.
 *
 * Every test that needs servers starts its own, on loopback ports chosen
 * by the kernel (blockd --listen 127.0.0.1:0 --port-file F), in a fresh
 * temporary folder, and stops them by PID.  Nothing is shared between
 * tests, so tests can run in parallel (ctest -j) and a failed test cannot
 * poison the next one.
 *
 * Folder layout (under $TMPDIR or /tmp, ngnfs-<name>-XXXXXX):
 *   dev<N>/       device N's RocksDB (--db)
 *   dev<N>.port   the port blockd bound (written by blockd)
 *   dev<N>.log    blockd's stderr, appended across restarts
 *   peers         the device manifest: "127.0.0.1:<port>" per line,
 *                 device index order (--peers, and for clients)
 *
 * The blockd binary is found through the environment variable
 * NGNFS_BLOCKD, which the cmake function ngnfs_add_cluster_test() sets
 * (ctest/msg.cmake); the ngnfs admin tool, when built, through NGNFS_TOOL.
 *
 * Cleanup without help from the test: children get PR_SET_PDEATHSIG
 * SIGKILL, so they die with the test process however it ends (crash,
 * ctest timeout, SIGKILL); an atexit handler and SIGINT/SIGTERM/SIGHUP
 * handlers kill every child still running by PID and the atexit handler
 * also removes the folders.  A folder left by a test that died without
 * atexit (SIGKILL by ctest's timeout, a crash) records its owner's PID in
 * harness-owner and is removed by the next cluster start once that PID is
 * gone.  Set NGNFS_KEEP_TEST_DIRS=1 to keep the folders (and the blockd
 * logs) for a post-mortem; kept folders are never swept.
 *
 * Errors are reported on stderr with the device, PID and path concerned,
 * so a test only has to assert on the return value.
 *
 * XXX:
 *  - Loopback IPv4 only.
 *  - PR_SET_PDEATHSIG fires when the *thread* that forked exits: start
 *    and restart clusters from a thread that outlives them (the main
 *    thread in cmocka tests).
 *  - Not thread safe: one thread drives a given cluster.
 */

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct ngnfs_test_cluster;

/*
 * Start device_count blockd processes and wait (bounded, 10 s each) until
 * every one has written its port file, then write the peers manifest.
 * name goes into the folder name so that a kept folder says which test
 * made it.  Returns NULL (after explaining on stderr) on any failure,
 * with everything it started stopped again.
 */
struct ngnfs_test_cluster *ngnfs_test_cluster_start(unsigned int device_count, const char *name);

/*
 * The same with extra blockd arguments (NULL-terminated, e.g.
 * { "--grace-ms", "200", NULL }) given to every device at every start
 * and restart.  The array is copied.
 */
struct ngnfs_test_cluster *ngnfs_test_cluster_start_args(unsigned int device_count,
							 const char *name,
							 const char *const *extra_args);

unsigned int ngnfs_test_cluster_device_count(const struct ngnfs_test_cluster *cluster);
/* "127.0.0.1:<port>" by device index, NULL-terminated; stable across restarts. */
const char *const *ngnfs_test_cluster_addresses(const struct ngnfs_test_cluster *cluster);
const char *ngnfs_test_cluster_address(const struct ngnfs_test_cluster *cluster,
				       unsigned int device);
uint16_t ngnfs_test_cluster_port(const struct ngnfs_test_cluster *cluster, unsigned int device);
/* 0 while the device is not running. */
pid_t ngnfs_test_cluster_pid(const struct ngnfs_test_cluster *cluster, unsigned int device);
const char *ngnfs_test_cluster_manifest(const struct ngnfs_test_cluster *cluster);
const char *ngnfs_test_cluster_dir(const struct ngnfs_test_cluster *cluster);
const char *ngnfs_test_cluster_db_path(const struct ngnfs_test_cluster *cluster,
				       unsigned int device);
const char *ngnfs_test_cluster_log_path(const struct ngnfs_test_cluster *cluster,
					unsigned int device);

/*
 * Send sig to the device's blockd.  For signals that end a process
 * (SIGKILL, SIGTERM, SIGINT, SIGQUIT, SIGABRT) also wait (10 s) until it
 * has exited and reap it; other signals (SIGSTOP, SIGCONT) are just sent.
 * Returns 0, -ESRCH if the device is not running, -ETIMEDOUT.
 */
int ngnfs_test_cluster_kill(struct ngnfs_test_cluster *cluster, unsigned int device, int sig);

/*
 * Start the device's blockd again on the same database and the same port
 * and wait for its port file.  While the old port is still unavailable
 * (blockd exits because bind failed) it retries for up to 5 s.  Returns 0,
 * -EBUSY if the device is still running, or a negative errno.
 */
int ngnfs_test_cluster_restart(struct ngnfs_test_cluster *cluster, unsigned int device);
/* The same with more blockd arguments (NULL-terminated) for this start only. */
int ngnfs_test_cluster_restart_args(struct ngnfs_test_cluster *cluster, unsigned int device,
				    const char *const *more_args);

/*
 * Wait until the device's blockd exits on its own (timeout_ms), reap it and
 * return its wait status in *wait_status.  Returns 0, -ESRCH, -ETIMEDOUT.
 */
int ngnfs_test_cluster_wait_exit(struct ngnfs_test_cluster *cluster, unsigned int device,
				 unsigned int timeout_ms, int *wait_status);

/* Copy the tail (up to max_bytes) of every device's log to stderr. */
void ngnfs_test_cluster_dump_logs(const struct ngnfs_test_cluster *cluster, size_t max_bytes);

/*
 * SIGTERM every running device, wait (10 s) for all of them, SIGKILL any
 * that remain, remove the folder (unless NGNFS_KEEP_TEST_DIRS is set) and
 * free the cluster.  Returns 0 if every device that was running exited
 * with status 0 on SIGTERM, else -ECHILD after naming on stderr each
 * device that did not (crash on shutdown, sanitizer report, hang), so
 * that a test can assert a clean shutdown.  NULL is accepted.
 */
int ngnfs_test_cluster_stop(struct ngnfs_test_cluster *cluster);

/*
 * Run a program without a shell: argv[0] is the path (searched in PATH if
 * it has no '/'), stdout and stderr go to output_path (truncated) or are
 * inherited when it is NULL.  Waits up to timeout_ms, then SIGKILLs it.
 * Returns 0 with the wait status in *wait_status, -ETIMEDOUT, or the
 * negative errno of fork/exec (exec failure is exit status 127).
 */
int ngnfs_test_run(const char *const *argv, const char *output_path, unsigned int timeout_ms,
		   int *wait_status);

/*
 * Spawn a program as above without waiting; the child is killed by the
 * harness's cleanup like a blockd.  ngnfs_test_wait() reaps it.
 */
int ngnfs_test_spawn(const char *const *argv, const char *output_path, pid_t *pid);
/* Returns 0 with *wait_status, or -ETIMEDOUT (the child is left running). */
int ngnfs_test_wait(pid_t pid, unsigned int timeout_ms, int *wait_status);

/* Describe a wait status: "exit status 3", "killed by signal 9 (Killed)". */
const char *ngnfs_test_describe_status(int wait_status, char *text, size_t size);

/* Whole file into a malloc()ed NUL-terminated string, NULL on error. */
char *ngnfs_test_read_file(const char *path, size_t *length);

/*
 * Send this process's stderr (fd 2) to a temporary file until
 * ngnfs_test_capture_stderr_end(), which restores it, copies what was
 * captured to it (a reader of the test's output wants the log too) and
 * returns it as a malloc()ed string.  0 / NULL on success / error.
 */
int ngnfs_test_capture_stderr_begin(void);
char *ngnfs_test_capture_stderr_end(void);

#endif
