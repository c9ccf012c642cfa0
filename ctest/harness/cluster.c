/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Throwaway blockd clusters for tests (see cluster.h for the interface).
 *
 * Processes are started with fork/exec and no shell, so that the PID the
 * harness holds is blockd's own and a kill by PID reaches exactly the
 * server under test: nothing is ever killed by name.  Every child is
 * recorded in a fixed table that the signal handlers can walk without
 * allocating or locking, and gets PR_SET_PDEATHSIG so that even a
 * SIGKILLed test (ctest timeout) leaves no blockd behind.
 *
 * Waiting is polling (waitpid WNOHANG, stat of the port file, 5 ms steps)
 * rather than SIGCHLD or pidfds: it keeps the harness free of signal
 * handlers the test might also want, and the latency is irrelevant next
 * to blockd's own start-up.
 *
 * XXX:
 *  - The child table holds NGNFS_TEST_MAX_CHILDREN live children; more
 *    spawns fail with -EAGAIN.
 *  - A test that calls waitpid(-1) itself would steal our children.
 */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cluster.h"

#define NGNFS_TEST_MAX_CHILDREN	   256
#define NGNFS_TEST_START_MS	   10000
#define NGNFS_TEST_STOP_MS	   10000
#define NGNFS_TEST_RESTART_PORT_MS 5000
#define NGNFS_TEST_POLL_NS	   (5 * 1000 * 1000)

struct ngnfs_test_device {
	pid_t pid;
	uint16_t port;
	bool killed_by_test; /* its exit status is the test's business */
	char *db_path;
	char *port_path;
	char *log_path;
};

struct ngnfs_test_cluster {
	unsigned int device_count;
	char *dir;
	char *manifest_path;
	char *blockd_path;
	char **extra_args;
	char **addresses; /* device_count + 1, NULL-terminated */
	struct ngnfs_test_device *devices;
	struct ngnfs_test_cluster *next_live;
};

/*
 * Children the signal handlers must kill.  Written only by the driving
 * thread; read by handlers, so plain stores of pid_t are all they see.
 */
static volatile pid_t live_children[NGNFS_TEST_MAX_CHILDREN];
static struct ngnfs_test_cluster *live_clusters;
static bool cleanup_installed;

static void kill_live_children(void)
{
	for (size_t i = 0; i < NGNFS_TEST_MAX_CHILDREN; i++) {
		pid_t pid = live_children[i];

		if (pid > 0)
			kill(pid, SIGKILL);
	}
}

static void fatal_signal_handler(int sig)
{
	kill_live_children();
	signal(sig, SIG_DFL);
	raise(sig);
}

static bool keep_dirs(void)
{
	const char *keep = getenv("NGNFS_KEEP_TEST_DIRS");

	return keep && *keep && strcmp(keep, "0") != 0;
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	if (remove(path) < 0)
		fprintf(stderr, "harness: removing %s: %s\n", path, strerror(errno));
	return 0;
}

static void remove_dir(const char *dir)
{
	if (keep_dirs()) {
		fprintf(stderr, "harness: keeping %s (NGNFS_KEEP_TEST_DIRS)\n", dir);
		return;
	}
	nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static void reap_quietly(pid_t pid)
{
	int status;

	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
}

/* atexit: whatever the test forgot (or could not reach after a failed assert). */
static void cleanup_at_exit(void)
{
	kill_live_children();
	for (size_t i = 0; i < NGNFS_TEST_MAX_CHILDREN; i++) {
		if (live_children[i] > 0) {
			reap_quietly(live_children[i]);
			live_children[i] = 0;
		}
	}
	for (struct ngnfs_test_cluster *cluster = live_clusters; cluster;
	     cluster = cluster->next_live)
		remove_dir(cluster->dir);
}

static void install_cleanup(void)
{
	static const int signals[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT };

	if (cleanup_installed)
		return;
	cleanup_installed = true;
	atexit(cleanup_at_exit);
	for (size_t i = 0; i < sizeof(signals) / sizeof(signals[0]); i++) {
		struct sigaction old;

		/* never take a signal away from a test that handles it itself */
		if (sigaction(signals[i], NULL, &old) == 0 && old.sa_handler == SIG_DFL)
			signal(signals[i], fatal_signal_handler);
	}
}

static int remember_child(pid_t pid)
{
	for (size_t i = 0; i < NGNFS_TEST_MAX_CHILDREN; i++) {
		if (live_children[i] == 0) {
			live_children[i] = pid;
			return 0;
		}
	}
	return -EAGAIN;
}

static void forget_child(pid_t pid)
{
	for (size_t i = 0; i < NGNFS_TEST_MAX_CHILDREN; i++) {
		if (live_children[i] == pid)
			live_children[i] = 0;
	}
}

static void sleep_poll(void)
{
	struct timespec step = { 0, NGNFS_TEST_POLL_NS };

	nanosleep(&step, NULL);
}

static uint64_t now_ms(void)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (uint64_t)now.tv_sec * 1000 + (uint64_t)now.tv_nsec / 1000000;
}

const char *ngnfs_test_describe_status(int wait_status, char *text, size_t size)
{
	if (WIFEXITED(wait_status))
		snprintf(text, size, "exit status %d", WEXITSTATUS(wait_status));
	else if (WIFSIGNALED(wait_status))
		snprintf(text, size, "killed by signal %d (%s)", WTERMSIG(wait_status),
			 strsignal(WTERMSIG(wait_status)));
	else
		snprintf(text, size, "wait status 0x%x", wait_status);
	return text;
}

/*
 * Between fork and exec only async-signal-safe calls: the test process
 * may have threads (libevent, ASan) holding locks we must not touch.
 */
static void exec_child(const char *const *argv, int output_fd, pid_t parent)
{
	sigset_t none;
	int null_fd;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(127); /* the parent died before prctl took effect */
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	signal(SIGINT, SIG_DFL);
	signal(SIGTERM, SIG_DFL);
	signal(SIGHUP, SIG_DFL);
	signal(SIGQUIT, SIG_DFL);
	signal(SIGPIPE, SIG_DFL);

	null_fd = open("/dev/null", O_RDONLY);
	if (null_fd >= 0) {
		dup2(null_fd, STDIN_FILENO);
		close(null_fd);
	}
	if (output_fd >= 0) {
		dup2(output_fd, STDOUT_FILENO);
		dup2(output_fd, STDERR_FILENO);
		close(output_fd);
	}
	if (strchr(argv[0], '/'))
		execv(argv[0], (char *const *)argv);
	else
		execvp(argv[0], (char *const *)argv);
	{
		static const char message[] = "harness: exec failed\n";
		ssize_t ignored = write(STDERR_FILENO, message, sizeof(message) - 1);

		(void)ignored;
	}
	_exit(127);
}

static int spawn(const char *const *argv, const char *output_path, bool append, pid_t *pid_out)
{
	int output_fd = -1;
	pid_t parent = getpid();
	pid_t pid;
	int ret;

	install_cleanup();
	if (output_path) {
		output_fd =
		    open(output_path,
			 O_WRONLY | O_CREAT | O_CLOEXEC | (append ? O_APPEND : O_TRUNC), 0644);
		if (output_fd < 0) {
			ret = -errno;
			fprintf(stderr, "harness: opening output %s for %s: %s\n", output_path,
				argv[0], strerror(errno));
			return ret;
		}
	}
	fflush(NULL); /* do not let the child flush our buffered output twice */
	pid = fork();
	if (pid < 0) {
		ret = -errno;
		fprintf(stderr, "harness: fork for %s: %s\n", argv[0], strerror(errno));
		if (output_fd >= 0)
			close(output_fd);
		return ret;
	}
	if (pid == 0) {
		if (output_fd >= 0) {
			/* O_CLOEXEC must not close it across exec: move it off the flag */
			int fd = dup(output_fd);

			output_fd = fd;
		}
		exec_child(argv, output_fd, parent);
	}
	if (output_fd >= 0)
		close(output_fd);
	ret = remember_child(pid);
	if (ret < 0) {
		fprintf(stderr, "harness: more than %d children, killing %s (pid %d)\n",
			NGNFS_TEST_MAX_CHILDREN, argv[0], (int)pid);
		kill(pid, SIGKILL);
		reap_quietly(pid);
		return ret;
	}
	*pid_out = pid;
	return 0;
}

int ngnfs_test_spawn(const char *const *argv, const char *output_path, pid_t *pid)
{
	return spawn(argv, output_path, false, pid);
}

/* 0 and the status once reaped, -ETIMEDOUT while it runs, -ECHILD if it is not ours. */
static int wait_child(pid_t pid, unsigned int timeout_ms, int *wait_status)
{
	uint64_t deadline = now_ms() + timeout_ms;

	for (;;) {
		pid_t got = waitpid(pid, wait_status, WNOHANG);

		if (got == pid) {
			forget_child(pid);
			return 0;
		}
		if (got < 0 && errno != EINTR) {
			int ret = -errno;

			forget_child(pid);
			return ret;
		}
		if (now_ms() >= deadline)
			return -ETIMEDOUT;
		sleep_poll();
	}
}

int ngnfs_test_wait(pid_t pid, unsigned int timeout_ms, int *wait_status)
{
	return wait_child(pid, timeout_ms, wait_status);
}

int ngnfs_test_run(const char *const *argv, const char *output_path, unsigned int timeout_ms,
		   int *wait_status)
{
	pid_t pid;
	int ret;

	ret = spawn(argv, output_path, false, &pid);
	if (ret < 0)
		return ret;
	ret = wait_child(pid, timeout_ms, wait_status);
	if (ret == -ETIMEDOUT) {
		fprintf(stderr, "harness: %s (pid %d) still running after %u ms, killing it\n",
			argv[0], (int)pid, timeout_ms);
		kill(pid, SIGKILL);
		reap_quietly(pid);
		forget_child(pid);
	}
	return ret;
}

char *ngnfs_test_read_file(const char *path, size_t *length)
{
	FILE *file = fopen(path, "rb");
	char *text = NULL;
	size_t used = 0;
	size_t capacity = 0;

	if (!file)
		return NULL;
	for (;;) {
		if (capacity - used < 4096) {
			/* doubling: a 64 MiB commit log is read in a few copies, not a thousand */
			size_t grown = capacity ? capacity * 2 : 65536;
			char *bigger = realloc(text, grown);

			if (!bigger) {
				free(text);
				fclose(file);
				return NULL;
			}
			text = bigger;
			capacity = grown;
		}
		size_t got = fread(text + used, 1, capacity - used - 1, file);

		used += got;
		if (got == 0)
			break;
	}
	fclose(file);
	text[used] = '\0';
	if (length)
		*length = used;
	return text;
}

static int captured_stderr = -1;
static char capture_path[64];

int ngnfs_test_capture_stderr_begin(void)
{
	int fd;

	snprintf(capture_path, sizeof(capture_path), "/tmp/ngnfs-test-stderr-XXXXXX");
	fd = mkstemp(capture_path);
	if (fd < 0)
		return -errno;
	fflush(stderr);
	captured_stderr = dup(2);
	if (captured_stderr < 0 || dup2(fd, 2) != 2) {
		int ret = -errno;

		if (captured_stderr >= 0)
			close(captured_stderr);
		captured_stderr = -1;
		close(fd);
		unlink(capture_path);
		return ret;
	}
	close(fd);
	return 0;
}

char *ngnfs_test_capture_stderr_end(void)
{
	char *text;

	if (captured_stderr < 0)
		return NULL;
	fflush(stderr);
	dup2(captured_stderr, 2);
	close(captured_stderr);
	captured_stderr = -1;
	text = ngnfs_test_read_file(capture_path, NULL);
	unlink(capture_path);
	if (text)
		fputs(text, stderr);
	return text;
}

static char *format_string(const char *format, ...) __attribute__((format(printf, 1, 2)));

static char *format_string(const char *format, ...)
{
	va_list args;
	char *text;
	int ret;

	va_start(args, format);
	ret = vasprintf(&text, format, args);
	va_end(args);
	return ret < 0 ? NULL : text;
}

static void dump_log(const struct ngnfs_test_cluster *cluster, unsigned int device,
		     size_t max_bytes)
{
	const char *path = cluster->devices[device].log_path;
	size_t length;
	char *text = ngnfs_test_read_file(path, &length);

	if (!text) {
		fprintf(stderr, "harness: no log %s: %s\n", path, strerror(errno));
		return;
	}
	const char *start = length > max_bytes ? text + length - max_bytes : text;

	fprintf(stderr, "---- %s (last %zu bytes) ----\n%s%s---- end of %s ----\n", path,
		(size_t)(text + length - start), start,
		length && text[length - 1] != '\n' ? "\n" : "", path);
	free(text);
}

void ngnfs_test_cluster_dump_logs(const struct ngnfs_test_cluster *cluster, size_t max_bytes)
{
	for (unsigned int i = 0; i < cluster->device_count; i++)
		dump_log(cluster, i, max_bytes);
}

/* The port file is written by rename, so once it exists it is complete. */
static int read_port_file(const char *path, uint16_t *port)
{
	char text[32];
	char *end;
	unsigned long value;
	ssize_t got;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	got = read(fd, text, sizeof(text) - 1);
	close(fd);
	if (got <= 0)
		return -EAGAIN;
	text[got] = '\0';
	errno = 0;
	value = strtoul(text, &end, 10);
	if (errno || end == text || *end != '\n' || value == 0 || value > 65535)
		return -EINVAL;
	*port = (uint16_t)value;
	return 0;
}

static int start_device(struct ngnfs_test_cluster *cluster, unsigned int device, uint16_t port,
			const char *const *more_args)
{
	struct ngnfs_test_device *dev = &cluster->devices[device];
	const char *argv[32 + 1];
	char listen[32];
	size_t argc = 0;
	int ret;

	snprintf(listen, sizeof(listen), "127.0.0.1:%u", port);
	unlink(dev->port_path);
	argv[argc++] = cluster->blockd_path;
	argv[argc++] = "--db";
	argv[argc++] = dev->db_path;
	argv[argc++] = "--listen";
	argv[argc++] = listen;
	argv[argc++] = "--port-file";
	argv[argc++] = dev->port_path;
	argv[argc++] = "--peers";
	argv[argc++] = cluster->manifest_path;
	for (size_t i = 0; cluster->extra_args && cluster->extra_args[i]; i++) {
		if (argc == 32)
			return -E2BIG;
		argv[argc++] = cluster->extra_args[i];
	}
	for (size_t i = 0; more_args && more_args[i]; i++) {
		if (argc == 32)
			return -E2BIG;
		argv[argc++] = more_args[i];
	}
	argv[argc] = NULL;

	ret = spawn(argv, dev->log_path, true, &dev->pid);
	if (ret < 0)
		dev->pid = 0;
	dev->killed_by_test = false;
	return ret;
}

/*
 * Wait for the port file.  -ECHILD (with *wait_status) if blockd exited
 * first, so the caller can decide whether that was a busy port.
 */
static int wait_for_port(struct ngnfs_test_cluster *cluster, unsigned int device,
			 unsigned int timeout_ms, int *wait_status)
{
	struct ngnfs_test_device *dev = &cluster->devices[device];
	uint64_t deadline = now_ms() + timeout_ms;
	uint16_t port = 0;
	int ret;

	for (;;) {
		ret = read_port_file(dev->port_path, &port);
		if (ret == 0) {
			dev->port = port;
			return 0;
		}
		if (ret == -EINVAL) {
			fprintf(stderr, "harness: device %u (pid %d): port file %s is malformed\n",
				device, (int)dev->pid, dev->port_path);
			return ret;
		}
		if (wait_child(dev->pid, 0, wait_status) == 0) {
			dev->pid = 0;
			return -ECHILD;
		}
		if (now_ms() >= deadline) {
			fprintf(stderr,
				"harness: device %u (pid %d): no port file %s after %u ms\n",
				device, (int)dev->pid, dev->port_path, timeout_ms);
			return -ETIMEDOUT;
		}
		sleep_poll();
	}
}

static int write_manifest(struct ngnfs_test_cluster *cluster)
{
	char *temp = format_string("%s.tmp", cluster->manifest_path);
	FILE *file;
	int ret = 0;

	if (!temp)
		return -ENOMEM;
	file = fopen(temp, "w");
	if (!file) {
		ret = -errno;
		goto out;
	}
	fprintf(file, "# ngnfs test cluster: one blockd address per device index\n");
	for (unsigned int i = 0; i < cluster->device_count; i++)
		fprintf(file, "%s\n", cluster->addresses[i]);
	if (fclose(file) != 0)
		ret = -errno;
	else if (rename(temp, cluster->manifest_path) < 0)
		ret = -errno;
out:
	if (ret < 0)
		fprintf(stderr, "harness: writing manifest %s: %s\n", cluster->manifest_path,
			strerror(-ret));
	free(temp);
	return ret;
}

static void free_cluster(struct ngnfs_test_cluster *cluster)
{
	struct ngnfs_test_cluster **link;

	for (link = &live_clusters; *link; link = &(*link)->next_live) {
		if (*link == cluster) {
			*link = cluster->next_live;
			break;
		}
	}
	for (unsigned int i = 0; cluster->devices && i < cluster->device_count; i++) {
		free(cluster->devices[i].db_path);
		free(cluster->devices[i].port_path);
		free(cluster->devices[i].log_path);
		free(cluster->addresses ? cluster->addresses[i] : NULL);
	}
	for (size_t i = 0; cluster->extra_args && cluster->extra_args[i]; i++)
		free(cluster->extra_args[i]);
	free(cluster->extra_args);
	free(cluster->addresses);
	free(cluster->devices);
	free(cluster->manifest_path);
	free(cluster->blockd_path);
	free(cluster->dir);
	free(cluster);
}

#define OWNER_FILE "harness-owner"

/*
 * A test that dies without running atexit (SIGSEGV outside cmocka's
 * reach, ctest's timeout SIGKILL) leaves its folder, RocksDB files and
 * all.  Each folder records the PID of the test that made it; a folder
 * whose test is gone is removed by the next cluster start.  Folders kept
 * on purpose (NGNFS_KEEP_TEST_DIRS) have no owner file and are never
 * swept; a live or reused PID only means a folder stays a little longer.
 */
static void sweep_stale_dirs(const char *tmp)
{
	DIR *parent = opendir(tmp);
	struct dirent *entry;

	if (!parent)
		return;
	while ((entry = readdir(parent))) {
		char *dir;
		char *owner_path;
		char *owner;
		long pid;

		if (strncmp(entry->d_name, "ngnfs-", 6) != 0)
			continue;
		dir = format_string("%s/%s", tmp, entry->d_name);
		owner_path = format_string("%s/%s/" OWNER_FILE, tmp, entry->d_name);
		owner = owner_path ? ngnfs_test_read_file(owner_path, NULL) : NULL;
		pid = owner ? strtol(owner, NULL, 10) : 0;
		if (dir && pid > 0 && (pid_t)pid != getpid() && kill((pid_t)pid, 0) < 0 &&
		    errno == ESRCH) {
			fprintf(stderr, "harness: removing %s left by test pid %ld that is gone\n",
				dir, pid);
			nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
		}
		free(owner);
		free(owner_path);
		free(dir);
	}
	closedir(parent);
}

static void write_owner(const char *dir)
{
	char *path;
	FILE *file;

	if (keep_dirs())
		return;
	path = format_string("%s/" OWNER_FILE, dir);
	file = path ? fopen(path, "w") : NULL;
	if (file) {
		fprintf(file, "%ld\n", (long)getpid());
		fclose(file);
	}
	free(path);
}

static int make_dir(const char *name, char **dir_out)
{
	const char *tmp = getenv("TMPDIR");
	char clean[64];
	size_t i;

	if (!tmp || !*tmp)
		tmp = "/tmp";
	if (!keep_dirs())
		sweep_stale_dirs(tmp);
	for (i = 0; name && name[i] && i < sizeof(clean) - 1; i++)
		clean[i] = (name[i] == '/' || name[i] == ' ') ? '_' : name[i];
	clean[i] = '\0';
	*dir_out = format_string("%s/ngnfs-%s-XXXXXX", tmp, i ? clean : "test");
	if (!*dir_out)
		return -ENOMEM;
	if (!mkdtemp(*dir_out)) {
		int ret = -errno;

		fprintf(stderr, "harness: mkdtemp %s: %s\n", *dir_out, strerror(errno));
		return ret;
	}
	write_owner(*dir_out);
	return 0;
}

struct ngnfs_test_cluster *ngnfs_test_cluster_start_args(unsigned int device_count,
							 const char *name,
							 const char *const *extra_args)
{
	struct ngnfs_test_cluster *cluster;
	const char *blockd = getenv("NGNFS_BLOCKD");
	size_t extra_count = 0;
	unsigned int i;
	int ret;

	if (!blockd || !*blockd) {
		fprintf(stderr, "harness: NGNFS_BLOCKD is not set: register the test with "
				"ngnfs_add_cluster_test() or export the path of blockd\n");
		return NULL;
	}
	if (access(blockd, X_OK) < 0) {
		fprintf(stderr, "harness: blockd %s (NGNFS_BLOCKD) is not executable: %s\n", blockd,
			strerror(errno));
		return NULL;
	}
	if (device_count == 0 || device_count > NGNFS_TEST_MAX_CHILDREN / 2) {
		fprintf(stderr, "harness: cannot start a cluster of %u devices\n", device_count);
		return NULL;
	}
	install_cleanup();

	cluster = calloc(1, sizeof(*cluster));
	if (!cluster)
		return NULL;
	cluster->device_count = device_count;
	cluster->devices = calloc(device_count, sizeof(*cluster->devices));
	cluster->addresses = calloc(device_count + 1, sizeof(*cluster->addresses));
	cluster->blockd_path = strdup(blockd);
	while (extra_args && extra_args[extra_count])
		extra_count++;
	cluster->extra_args = calloc(extra_count + 1, sizeof(*cluster->extra_args));
	if (!cluster->devices || !cluster->addresses || !cluster->blockd_path ||
	    !cluster->extra_args) {
		free_cluster(cluster);
		return NULL;
	}
	for (size_t arg = 0; arg < extra_count; arg++) {
		cluster->extra_args[arg] = strdup(extra_args[arg]);
		if (!cluster->extra_args[arg]) {
			free_cluster(cluster);
			return NULL;
		}
	}
	if (make_dir(name, &cluster->dir) < 0) {
		free_cluster(cluster);
		return NULL;
	}
	/* on the live list from here on, so an early exit still removes the folder */
	cluster->next_live = live_clusters;
	live_clusters = cluster;

	cluster->manifest_path = format_string("%s/peers", cluster->dir);
	if (!cluster->manifest_path)
		goto fail;
	for (i = 0; i < device_count; i++) {
		struct ngnfs_test_device *dev = &cluster->devices[i];

		dev->db_path = format_string("%s/dev%u", cluster->dir, i);
		dev->port_path = format_string("%s/dev%u.port", cluster->dir, i);
		dev->log_path = format_string("%s/dev%u.log", cluster->dir, i);
		if (!dev->db_path || !dev->port_path || !dev->log_path)
			goto fail;
	}

	/* start them all, then wait: blockd start-up (RocksDB open) overlaps */
	for (i = 0; i < device_count; i++) {
		ret = start_device(cluster, i, 0, NULL);
		if (ret < 0) {
			fprintf(stderr, "harness: starting device %u (%s): %s\n", i, blockd,
				strerror(-ret));
			goto fail;
		}
	}
	for (i = 0; i < device_count; i++) {
		int wait_status = 0;
		char text[64];

		ret = wait_for_port(cluster, i, NGNFS_TEST_START_MS, &wait_status);
		if (ret == -ECHILD)
			fprintf(stderr, "harness: device %u (%s --db %s) exited at start: %s\n", i,
				blockd, cluster->devices[i].db_path,
				ngnfs_test_describe_status(wait_status, text, sizeof(text)));
		if (ret < 0) {
			dump_log(cluster, i, 4096);
			goto fail;
		}
		cluster->addresses[i] = format_string("127.0.0.1:%u", cluster->devices[i].port);
		if (!cluster->addresses[i])
			goto fail;
	}
	if (write_manifest(cluster) < 0)
		goto fail;
	return cluster;

fail:
	ngnfs_test_cluster_stop(cluster);
	return NULL;
}

struct ngnfs_test_cluster *ngnfs_test_cluster_start(unsigned int device_count, const char *name)
{
	return ngnfs_test_cluster_start_args(device_count, name, NULL);
}

unsigned int ngnfs_test_cluster_device_count(const struct ngnfs_test_cluster *cluster)
{
	return cluster->device_count;
}

const char *const *ngnfs_test_cluster_addresses(const struct ngnfs_test_cluster *cluster)
{
	return (const char *const *)cluster->addresses;
}

const char *ngnfs_test_cluster_address(const struct ngnfs_test_cluster *cluster,
				       unsigned int device)
{
	return device < cluster->device_count ? cluster->addresses[device] : NULL;
}

uint16_t ngnfs_test_cluster_port(const struct ngnfs_test_cluster *cluster, unsigned int device)
{
	return device < cluster->device_count ? cluster->devices[device].port : 0;
}

pid_t ngnfs_test_cluster_pid(const struct ngnfs_test_cluster *cluster, unsigned int device)
{
	return device < cluster->device_count ? cluster->devices[device].pid : 0;
}

const char *ngnfs_test_cluster_manifest(const struct ngnfs_test_cluster *cluster)
{
	return cluster->manifest_path;
}

const char *ngnfs_test_cluster_dir(const struct ngnfs_test_cluster *cluster)
{
	return cluster->dir;
}

const char *ngnfs_test_cluster_db_path(const struct ngnfs_test_cluster *cluster,
				       unsigned int device)
{
	return device < cluster->device_count ? cluster->devices[device].db_path : NULL;
}

const char *ngnfs_test_cluster_log_path(const struct ngnfs_test_cluster *cluster,
					unsigned int device)
{
	return device < cluster->device_count ? cluster->devices[device].log_path : NULL;
}

static bool signal_ends_process(int sig)
{
	return sig == SIGKILL || sig == SIGTERM || sig == SIGINT || sig == SIGQUIT ||
	       sig == SIGABRT;
}

int ngnfs_test_cluster_kill(struct ngnfs_test_cluster *cluster, unsigned int device, int sig)
{
	struct ngnfs_test_device *dev;
	int wait_status;
	int ret;

	if (device >= cluster->device_count)
		return -EINVAL;
	dev = &cluster->devices[device];
	if (dev->pid <= 0)
		return -ESRCH;
	if (kill(dev->pid, sig) < 0) {
		ret = -errno;
		fprintf(stderr, "harness: kill(device %u, pid %d, %s): %s\n", device, (int)dev->pid,
			strsignal(sig), strerror(errno));
		return ret;
	}
	if (!signal_ends_process(sig))
		return 0;
	ret = wait_child(dev->pid, NGNFS_TEST_STOP_MS, &wait_status);
	if (ret == -ETIMEDOUT) {
		fprintf(stderr, "harness: device %u (pid %d) still running %d ms after %s\n",
			device, (int)dev->pid, NGNFS_TEST_STOP_MS, strsignal(sig));
		return ret;
	}
	dev->pid = 0;
	dev->killed_by_test = true;
	unlink(dev->port_path);
	return 0;
}

int ngnfs_test_cluster_wait_exit(struct ngnfs_test_cluster *cluster, unsigned int device,
				 unsigned int timeout_ms, int *wait_status)
{
	struct ngnfs_test_device *dev;
	int ret;

	if (device >= cluster->device_count)
		return -EINVAL;
	dev = &cluster->devices[device];
	if (dev->pid <= 0)
		return -ESRCH;
	ret = wait_child(dev->pid, timeout_ms, wait_status);
	if (ret == 0) {
		dev->pid = 0;
		dev->killed_by_test = true;
		unlink(dev->port_path);
	}
	return ret;
}

int ngnfs_test_cluster_restart(struct ngnfs_test_cluster *cluster, unsigned int device)
{
	return ngnfs_test_cluster_restart_args(cluster, device, NULL);
}

int ngnfs_test_cluster_restart_args(struct ngnfs_test_cluster *cluster, unsigned int device,
				    const char *const *more_args)
{
	struct ngnfs_test_device *dev;
	uint64_t deadline = now_ms() + NGNFS_TEST_RESTART_PORT_MS;
	int wait_status = 0;
	char text[64];
	int ret;

	if (device >= cluster->device_count)
		return -EINVAL;
	dev = &cluster->devices[device];
	if (dev->pid > 0)
		return -EBUSY;
	for (;;) {
		ret = start_device(cluster, device, dev->port, more_args);
		if (ret < 0) {
			fprintf(stderr, "harness: restarting device %u: %s\n", device,
				strerror(-ret));
			return ret;
		}
		ret = wait_for_port(cluster, device, NGNFS_TEST_START_MS, &wait_status);
		if (ret != -ECHILD)
			break;
		/* most likely the old port is not free yet: try again for a while */
		if (now_ms() >= deadline)
			break;
		usleep(50 * 1000);
	}
	if (ret == -ECHILD)
		fprintf(stderr, "harness: device %u (%s --listen %s) exited at restart: %s\n",
			device, cluster->blockd_path, cluster->addresses[device],
			ngnfs_test_describe_status(wait_status, text, sizeof(text)));
	if (ret < 0) {
		dump_log(cluster, device, 4096);
		return ret;
	}
	if (dev->port != (uint16_t)strtoul(strchr(cluster->addresses[device], ':') + 1, NULL, 10)) {
		fprintf(stderr, "harness: device %u restarted on port %u instead of %s\n", device,
			dev->port, cluster->addresses[device]);
		return -EADDRINUSE;
	}
	return 0;
}

int ngnfs_test_cluster_stop(struct ngnfs_test_cluster *cluster)
{
	uint64_t deadline = now_ms() + NGNFS_TEST_STOP_MS;
	bool unclean = false;
	unsigned int i;

	if (!cluster)
		return 0;
	for (i = 0; i < cluster->device_count; i++) {
		if (cluster->devices[i].pid > 0) {
			kill(cluster->devices[i].pid, SIGTERM);
			/* a device the test SIGSTOPped would otherwise sit out the timeout */
			kill(cluster->devices[i].pid, SIGCONT);
		}
	}
	for (i = 0; i < cluster->device_count; i++) {
		struct ngnfs_test_device *dev = &cluster->devices[i];
		uint64_t now = now_ms();
		int wait_status = 0;
		char text[64];
		int ret;

		if (dev->pid <= 0)
			continue;
		ret = wait_child(dev->pid, deadline > now ? (unsigned int)(deadline - now) : 0,
				 &wait_status);
		if (ret == -ETIMEDOUT) {
			fprintf(
			    stderr,
			    "harness: device %u (pid %d) ignored SIGTERM for %d ms, killing it\n",
			    i, (int)dev->pid, NGNFS_TEST_STOP_MS);
			kill(dev->pid, SIGKILL);
			reap_quietly(dev->pid);
			forget_child(dev->pid);
			unclean = true;
			dump_log(cluster, i, 4096);
		} else if (ret == 0 && !(WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 0)) {
			fprintf(stderr, "harness: device %u (pid %d) did not stop cleanly: %s\n", i,
				(int)dev->pid,
				ngnfs_test_describe_status(wait_status, text, sizeof(text)));
			unclean = true;
			dump_log(cluster, i, 8192);
		}
		dev->pid = 0;
	}
	remove_dir(cluster->dir);
	free_cluster(cluster);
	return unclean ? -ECHILD : 0;
}
