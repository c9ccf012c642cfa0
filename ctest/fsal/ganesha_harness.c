/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Throwaway ganesha.nfsd instances: config generation, start, readiness,
 * stop by PID.  See ganesha_harness.h for the contract.
 *
 * Readiness needs two signals because neither is enough alone: the log
 * line "NFS SERVER INITIALIZED" is written after the exports are set up,
 * but the listener may not be accepting yet when the line lands, and a
 * port that accepts may belong to a daemon whose exports failed (ganesha
 * keeps running with "No export entries found").  So the harness also
 * rejects a start whose log reports that no export could be created:
 * a test must not run against a daemon that serves an empty pseudo root.
 *
 * XXX:
 *  - The "export failed" detection matches ganesha 4.3's log wording
 *    ("No export entries found", "Could not create export"); another
 *    version may word it differently.
 *  - Errors from fork/exec in the child go to <folder>/stdout only.
 */

#include "ganesha_harness.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define GANESHA_DEFAULT_BINARY		 "/usr/bin/ganesha.nfsd"
#define GANESHA_DEFAULT_START_TIMEOUT_MS 20000
#define GANESHA_STOP_TIMEOUT_MS		 10000
#define GANESHA_START_ATTEMPTS		 3
#define GANESHA_PATH_MAX		 4096

struct ganesha_instance {
	struct ganesha_instance *next; /* every running instance, for atexit */
	pid_t pid;
	uint16_t port;
	bool exited; /* reaped; status valid */
	int wait_status;
	char dir[GANESHA_PATH_MAX];
	char config_path[GANESHA_PATH_MAX];
	char log_path[GANESHA_PATH_MAX];
	char pid_path[GANESHA_PATH_MAX];
	char export_path[GANESHA_PATH_MAX];
	char pseudo_path[GANESHA_PATH_MAX];
	char url_base[GANESHA_PATH_MAX + 32];
};

static struct ganesha_instance *running_instances;
static bool atexit_registered;

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void sleep_ms(unsigned int ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000 };

	nanosleep(&ts, NULL);
}

static bool keep_dirs_requested(void)
{
	const char *keep = getenv("NGNFS_KEEP_TEST_DIRS");

	return keep && *keep && strcmp(keep, "0") != 0;
}

static void unlink_instance(struct ganesha_instance *instance)
{
	struct ganesha_instance **link;

	for (link = &running_instances; *link; link = &(*link)->next) {
		if (*link == instance) {
			*link = instance->next;
			return;
		}
	}
}

/* A test that exits without stopping its instances must not leak daemons. */
static void kill_running_instances(void)
{
	struct ganesha_instance *instance;

	for (instance = running_instances; instance; instance = instance->next) {
		if (!instance->exited && instance->pid > 0) {
			kill(instance->pid, SIGKILL);
			waitpid(instance->pid, NULL, 0);
			instance->exited = true;
		}
	}
}

static int remove_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	(void)st;
	(void)type;
	(void)ftw;
	if (remove(path) < 0 && errno != ENOENT)
		fprintf(stderr, "ganesha harness: remove %s: %s\n", path, strerror(errno));
	return 0;
}

static void remove_tree(const char *dir)
{
	nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static int pick_free_port(uint16_t *port)
{
	struct sockaddr_in address = { .sin_family = AF_INET };
	socklen_t length = sizeof(address);
	int fd;
	int ret = 0;

	address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (bind(fd, (struct sockaddr *)&address, sizeof(address)) < 0 ||
	    getsockname(fd, (struct sockaddr *)&address, &length) < 0)
		ret = -errno;
	else
		*port = ntohs(address.sin_port);
	close(fd);
	return ret;
}

static bool port_accepts(uint16_t port)
{
	struct sockaddr_in address = { .sin_family = AF_INET, .sin_port = htons(port) };
	int fd;
	bool accepted;

	address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return false;
	accepted = connect(fd, (struct sockaddr *)&address, sizeof(address)) == 0;
	close(fd);
	return accepted;
}

/* Whether the log contains needle; the log is small (tens of KiB). */
static bool log_contains(const char *log_path, const char *needle)
{
	char line[4096];
	bool found = false;
	FILE *file = fopen(log_path, "r");

	if (!file)
		return false;
	while (!found && fgets(line, sizeof(line), file))
		found = strstr(line, needle) != NULL;
	fclose(file);
	return found;
}

static void print_file_tail(const char *path, unsigned int line_count)
{
	char *buffer = NULL;
	size_t size = 0;
	size_t start;
	unsigned int lines = 0;
	FILE *file = fopen(path, "r");
	int c;

	if (!file) {
		fprintf(stderr, "ganesha harness: (no log at %s: %s)\n", path, strerror(errno));
		return;
	}
	{
		FILE *memory = open_memstream(&buffer, &size);

		if (!memory) {
			fclose(file);
			return;
		}
		while ((c = fgetc(file)) != EOF)
			fputc(c, memory);
		fclose(memory);
	}
	fclose(file);
	start = size;
	while (start > 0) {
		if (buffer[start - 1] == '\n' && start != size && ++lines >= line_count)
			break;
		start--;
	}
	fprintf(stderr, "ganesha harness: ---- last %u lines of %s ----\n", line_count, path);
	fwrite(buffer + start, 1, size - start, stderr);
	fprintf(stderr, "ganesha harness: ---- end of %s ----\n", path);
	free(buffer);
}

void ganesha_instance_print_log_tail(const struct ganesha_instance *instance,
				     unsigned int line_count)
{
	char stdout_path[GANESHA_PATH_MAX + 16];

	print_file_tail(instance->log_path, line_count);
	/* libcore's own messages (ngnfs cache: ...) go to the daemon's stderr */
	snprintf(stdout_path, sizeof(stdout_path), "%s/stdout", instance->dir);
	print_file_tail(stdout_path, line_count);
}

/* options->config_template, with @NFS_PORT@ and @RECOVERY@ filled in. */
static int write_config_template(struct ganesha_instance *instance, FILE *file,
				 const char *template, const char *recovery_dir)
{
	const char *at = template;

	while (*at) {
		if (strncmp(at, "@NFS_PORT@", 10) == 0) {
			fprintf(file, "%u", instance->port);
			at += 10;
		} else if (strncmp(at, "@RECOVERY@", 10) == 0) {
			fputs(recovery_dir, file);
			at += 10;
		} else {
			fputc(*at++, file);
		}
	}
	return 0;
}

static int write_config(struct ganesha_instance *instance, const struct ganesha_options *options)
{
	char recovery_dir[GANESHA_PATH_MAX + 16];
	FILE *file;

	snprintf(recovery_dir, sizeof(recovery_dir), "%s/recovery", instance->dir);
	if (mkdir(recovery_dir, 0700) < 0 && errno != EEXIST) {
		fprintf(stderr, "ganesha harness: mkdir %s: %s\n", recovery_dir, strerror(errno));
		return -errno;
	}
	file = fopen(instance->config_path, "w");
	if (!file) {
		fprintf(stderr, "ganesha harness: create config %s: %s\n", instance->config_path,
			strerror(errno));
		return -errno;
	}
	if (options->config_template) {
		write_config_template(instance, file, options->config_template, recovery_dir);
		goto close;
	}
	fprintf(file,
		"# Generated by ctest/fsal/ganesha_harness.c for one test instance.\n"
		"NFS_CORE_PARAM {\n"
		"\tProtocols = %s;\n"
		"\tNFS_Port = %u;\n"
		"\tBind_Addr = 127.0.0.1;\n"
		"\tEnable_NLM = false;\n"
		"\tEnable_RQUOTA = false;\n"
		"\tEnable_UDP = false;\n",
		options->protocols ? options->protocols : "4", instance->port);
	if (options->plugins_dir)
		fprintf(file, "\tPlugins_Dir = \"%s\";\n", options->plugins_dir);
	if (options->core_extra)
		fprintf(file, "%s\n", options->core_extra);
	fprintf(file,
		"}\n"
		"NFSV4 {\n"
		"\tGraceless = true;\n"
		"\tRecoveryBackend = fs;\n"
		"\tRecoveryRoot = \"%s\";\n"
		"\tOnly_Numeric_Owners = true;\n"
		"}\n"
		"NFS_KRB5 { Active_krb5 = false; }\n",
		recovery_dir);
	if (options->extra_config)
		fprintf(file, "%s\n", options->extra_config);
	fprintf(file,
		"EXPORT {\n"
		"\tExport_Id = 1;\n"
		"\tPath = \"%s\";\n"
		"\tPseudo = \"%s\";\n"
		"\tAccess_Type = RW;\n"
		"\tSquash = %s;\n"
		"\tSecType = sys;\n"
		"\tProtocols = %s;\n",
		instance->export_path, instance->pseudo_path,
		options->squash ? options->squash : "No_Root_Squash",
		options->protocols ? options->protocols : "4");
	if (options->export_extra)
		fprintf(file, "%s\n", options->export_extra);
	fprintf(file, "\t%s\n}\n", options->fsal_block);
close:
	if (fclose(file) != 0) {
		fprintf(stderr, "ganesha harness: write config %s: %s\n", instance->config_path,
			strerror(errno));
		return -EIO;
	}
	return 0;
}

static int spawn_daemon(struct ganesha_instance *instance)
{
	const char *binary = getenv("NGNFS_GANESHA");
	char stdout_path[GANESHA_PATH_MAX + 16];
	pid_t parent = getpid();
	pid_t pid;

	if (!binary || !*binary)
		binary = GANESHA_DEFAULT_BINARY;
	snprintf(stdout_path, sizeof(stdout_path), "%s/stdout", instance->dir);
	pid = fork();
	if (pid < 0) {
		fprintf(stderr, "ganesha harness: fork for %s: %s\n", binary, strerror(errno));
		return -errno;
	}
	if (pid == 0) {
		int fd = open(stdout_path, O_WRONLY | O_CREAT | O_APPEND, 0644);

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(127);
		if (fd >= 0) {
			dup2(fd, STDOUT_FILENO);
			dup2(fd, STDERR_FILENO);
			close(fd);
		}
		execl(binary, binary, "-F", "-L", instance->log_path, "-f", instance->config_path,
		      "-p", instance->pid_path, (char *)NULL);
		fprintf(stderr, "exec %s: %s\n", binary, strerror(errno));
		_exit(127);
	}
	instance->pid = pid;
	instance->exited = false;
	return 0;
}

static bool reap(struct ganesha_instance *instance)
{
	if (instance->exited)
		return true;
	if (waitpid(instance->pid, &instance->wait_status, WNOHANG) == instance->pid)
		instance->exited = true;
	return instance->exited;
}

static void describe_exit(const struct ganesha_instance *instance, char *buffer, size_t size)
{
	if (WIFEXITED(instance->wait_status))
		snprintf(buffer, size, "exited with status %d", WEXITSTATUS(instance->wait_status));
	else if (WIFSIGNALED(instance->wait_status))
		snprintf(buffer, size, "was killed by signal %d", WTERMSIG(instance->wait_status));
	else
		snprintf(buffer, size, "ended with wait status %#x", instance->wait_status);
}

/* 0 once serving, -EAGAIN when the daemon died (retry), other -errno. */
static int wait_until_serving(struct ganesha_instance *instance, unsigned int timeout_ms)
{
	uint64_t deadline = now_ms() + timeout_ms;
	bool initialized = false;
	char how[64];

	for (;;) {
		if (reap(instance)) {
			describe_exit(instance, how, sizeof(how));
			fprintf(stderr,
				"ganesha harness: ganesha.nfsd (pid %d, port %u, config %s) %s "
				"during start\n",
				(int)instance->pid, instance->port, instance->config_path, how);
			print_file_tail(instance->log_path, 30);
			return -EAGAIN;
		}
		if (!initialized)
			initialized = log_contains(instance->log_path, "NFS SERVER INITIALIZED");
		if (initialized && port_accepts(instance->port))
			break;
		if (now_ms() > deadline) {
			fprintf(stderr,
				"ganesha harness: ganesha.nfsd (pid %d, config %s) not serving on "
				"127.0.0.1:%u after %u ms (log %s initialized)\n",
				(int)instance->pid, instance->config_path, instance->port,
				timeout_ms, initialized ? "says" : "never said");
			print_file_tail(instance->log_path, 30);
			return -ETIMEDOUT;
		}
		sleep_ms(20);
	}
	if (log_contains(instance->log_path, "No export entries found") ||
	    log_contains(instance->log_path, "Could not create export")) {
		fprintf(stderr,
			"ganesha harness: ganesha.nfsd (pid %d, config %s) serves but could not "
			"create export %s (Path %s)\n",
			(int)instance->pid, instance->config_path, instance->pseudo_path,
			instance->export_path);
		print_file_tail(instance->log_path, 30);
		return -EINVAL;
	}
	return 0;
}

static int kill_and_reap(struct ganesha_instance *instance, unsigned int timeout_ms)
{
	uint64_t deadline;

	if (reap(instance))
		return -ECHILD;
	kill(instance->pid, SIGTERM);
	deadline = now_ms() + timeout_ms;
	while (!reap(instance)) {
		if (now_ms() > deadline) {
			fprintf(stderr,
				"ganesha harness: ganesha.nfsd (pid %d, port %u) still running %u "
				"ms after SIGTERM; sending SIGKILL\n",
				(int)instance->pid, instance->port, timeout_ms);
			kill(instance->pid, SIGKILL);
			waitpid(instance->pid, &instance->wait_status, 0);
			instance->exited = true;
			return -ETIMEDOUT;
		}
		sleep_ms(10);
	}
	return 0;
}

struct ganesha_instance *ganesha_instance_start_with(const struct ganesha_options *options)
{
	struct ganesha_instance *instance;
	const char *tmp = getenv("TMPDIR");
	unsigned int timeout_ms;
	int attempt;
	int ret = -EINVAL;

	if (!options || (!options->fsal_block && !options->config_template)) {
		fprintf(stderr, "ganesha harness: start needs an FSAL block\n");
		return NULL;
	}
	instance = calloc(1, sizeof(*instance));
	if (!instance)
		return NULL;
	if (!tmp || !*tmp)
		tmp = "/tmp";
	snprintf(instance->dir, sizeof(instance->dir), "%s/ngnfs-ganesha-%s-XXXXXX", tmp,
		 options->name ? options->name : "test");
	if (!mkdtemp(instance->dir)) {
		fprintf(stderr, "ganesha harness: mkdtemp %s: %s\n", instance->dir,
			strerror(errno));
		free(instance);
		return NULL;
	}
	snprintf(instance->config_path, sizeof(instance->config_path), "%.4000s/ganesha.conf",
		 instance->dir);
	snprintf(instance->log_path, sizeof(instance->log_path), "%.4000s/ganesha.log",
		 instance->dir);
	snprintf(instance->pid_path, sizeof(instance->pid_path), "%.4000s/ganesha.pid",
		 instance->dir);
	if (options->export_path) {
		snprintf(instance->export_path, sizeof(instance->export_path), "%s",
			 options->export_path);
	} else {
		snprintf(instance->export_path, sizeof(instance->export_path), "%.4000s/export",
			 instance->dir);
		if (mkdir(instance->export_path, 0777) < 0) {
			fprintf(stderr, "ganesha harness: mkdir %s: %s\n", instance->export_path,
				strerror(errno));
			goto fail;
		}
		/* A non-root credential test must be able to create files. */
		chmod(instance->export_path, 0777);
	}
	snprintf(instance->pseudo_path, sizeof(instance->pseudo_path), "%s",
		 options->pseudo_path ? options->pseudo_path : "/export");
	snprintf(instance->url_base, sizeof(instance->url_base), "nfs://127.0.0.1%s",
		 instance->pseudo_path);
	timeout_ms = options->start_timeout_ms ? options->start_timeout_ms
					       : GANESHA_DEFAULT_START_TIMEOUT_MS;

	for (attempt = 0; attempt < GANESHA_START_ATTEMPTS; attempt++) {
		ret = pick_free_port(&instance->port);
		if (ret < 0) {
			fprintf(stderr, "ganesha harness: no free loopback port: %s\n",
				strerror(-ret));
			goto fail;
		}
		ret = write_config(instance, options);
		if (ret < 0)
			goto fail;
		unlink(instance->log_path);
		ret = spawn_daemon(instance);
		if (ret < 0)
			goto fail;
		if (!atexit_registered) {
			atexit(kill_running_instances);
			atexit_registered = true;
		}
		instance->next = running_instances;
		running_instances = instance;
		ret = wait_until_serving(instance, timeout_ms);
		if (ret == 0)
			return instance;
		kill_and_reap(instance, 2000);
		unlink_instance(instance);
		if (ret != -EAGAIN)
			break;
		/* A daemon that dies at once may have lost the port race. */
	}
fail : {
	bool remove = options->remove_dir_on_failure && !keep_dirs_requested();

	fprintf(stderr,
		"ganesha harness: could not start ganesha.nfsd for export %s (%s); folder %s %s\n",
		instance->export_path,
		options->fsal_block ? options->fsal_block : "config from a template", instance->dir,
		remove ? "removed" : "kept");
	if (remove)
		remove_tree(instance->dir);
}
	free(instance);
	return NULL;
}

struct ganesha_instance *ganesha_instance_start(const char *fsal_block, const char *export_path,
						const char *plugins_dir)
{
	struct ganesha_options options = {
		.fsal_block = fsal_block,
		.export_path = export_path,
		.plugins_dir = plugins_dir,
	};

	return ganesha_instance_start_with(&options);
}

int ganesha_instance_stop(struct ganesha_instance *instance)
{
	char how[64];
	int ret;

	if (!instance)
		return 0;
	ret = kill_and_reap(instance, GANESHA_STOP_TIMEOUT_MS);
	unlink_instance(instance);
	if (ret == -ECHILD) {
		describe_exit(instance, how, sizeof(how));
		fprintf(
		    stderr,
		    "ganesha harness: ganesha.nfsd (pid %d, port %u) had already %s before stop\n",
		    (int)instance->pid, instance->port, how);
	} else if (ret == 0 &&
		   !(WIFEXITED(instance->wait_status) && WEXITSTATUS(instance->wait_status) == 0) &&
		   !(WIFSIGNALED(instance->wait_status) &&
		     WTERMSIG(instance->wait_status) == SIGTERM)) {
		describe_exit(instance, how, sizeof(how));
		fprintf(stderr, "ganesha harness: ganesha.nfsd (pid %d, port %u) %s on SIGTERM\n",
			(int)instance->pid, instance->port, how);
		ret = -EIO;
	}
	if (ret < 0) {
		print_file_tail(instance->log_path, 30);
		fprintf(stderr, "ganesha harness: folder %s kept\n", instance->dir);
	} else if (!keep_dirs_requested()) {
		remove_tree(instance->dir);
	}
	free(instance);
	return ret;
}

bool ganesha_instance_alive(struct ganesha_instance *instance)
{
	return !reap(instance);
}

uint16_t ganesha_instance_port(const struct ganesha_instance *instance)
{
	return instance->port;
}

pid_t ganesha_instance_pid(const struct ganesha_instance *instance)
{
	return instance->pid;
}

const char *ganesha_instance_dir(const struct ganesha_instance *instance)
{
	return instance->dir;
}

const char *ganesha_instance_log_path(const struct ganesha_instance *instance)
{
	return instance->log_path;
}

const char *ganesha_instance_pseudo_path(const struct ganesha_instance *instance)
{
	return instance->pseudo_path;
}

const char *ganesha_instance_export_path(const struct ganesha_instance *instance)
{
	return instance->export_path;
}

const char *ganesha_instance_url_base(const struct ganesha_instance *instance)
{
	return instance->url_base;
}

int ganesha_instance_url(const struct ganesha_instance *instance, const char *relative_path,
			 const char *extra_query, char *buffer, size_t buffer_size)
{
	int length;

	if (!relative_path)
		relative_path = "";
	while (*relative_path == '/')
		relative_path++;
	length = snprintf(buffer, buffer_size, "%s%s%s?version=4&nfsport=%u%s", instance->url_base,
			  *relative_path ? "/" : "", relative_path, instance->port,
			  extra_query ? extra_query : "");
	if (length < 0 || (size_t)length >= buffer_size)
		return -ENAMETOOLONG;
	return 0;
}

/* ---- a private rpcbind for NFSv3 ---------------------------------------- */

#define RPCBIND_DEFAULT_BINARY	 "/usr/sbin/rpcbind"
#define RPCBIND_SOCKET		 "/run/rpcbind.sock"
#define RPCBIND_PORT		 111
#define RPCBIND_START_TIMEOUT_MS 10000
#define RPCBIND_STOP_TIMEOUT_MS	 5000
/* TEST-NET-1 (RFC 5737): never routed, and only ever on our own lo */
#define RPCBIND_EXTRA_ADDRESS "192.0.2.1"

/*
 * rpcbind drops root for _rpc after binding, and a credential change
 * clears PR_SET_PDEATHSIG: rpcbind itself would outlive a test killed by
 * ctest's timeout.  So it runs under a supervisor, a fork of the test that
 * stays root and keeps the death signal: SIGTERM (from the parent's death
 * or from ganesha_private_rpcbind_stop) makes it stop rpcbind by PID and
 * exit with 0 when rpcbind exited cleanly.
 */
struct ganesha_rpcbind {
	pid_t supervisor;
	pid_t pid; /* rpcbind itself */
	char output_path[64];
};

static struct ganesha_rpcbind *running_rpcbind;
static bool rpcbind_atexit_registered;

static int set_interface(int fd, const char *name, const char *address)
{
	struct ifreq request;
	struct sockaddr_in *in = (struct sockaddr_in *)&request.ifr_addr;

	memset(&request, 0, sizeof(request));
	snprintf(request.ifr_name, sizeof(request.ifr_name), "%s", name);
	if (address) {
		in->sin_family = AF_INET;
		inet_pton(AF_INET, address, &in->sin_addr);
		if (ioctl(fd, SIOCSIFADDR, &request) < 0)
			return -errno;
		inet_pton(AF_INET, "255.255.255.255", &in->sin_addr);
		if (ioctl(fd, SIOCSIFNETMASK, &request) < 0)
			return -errno;
	}
	if (ioctl(fd, SIOCGIFFLAGS, &request) < 0)
		return -errno;
	request.ifr_flags |= IFF_UP;
	if (ioctl(fd, SIOCSIFFLAGS, &request) < 0)
		return -errno;
	return 0;
}

static int bring_up_loopback(void)
{
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	int ret;

	if (fd < 0)
		return -errno;
	ret = set_interface(fd, "lo", NULL);
	if (ret < 0) {
		fprintf(stderr, "ganesha harness: bring up lo in the new namespace: %s\n",
			strerror(-ret));
	} else {
		ret = set_interface(fd, "lo:ngnfs", RPCBIND_EXTRA_ADDRESS);
		if (ret < 0)
			fprintf(stderr, "ganesha harness: add %s to lo in the new namespace: %s\n",
				RPCBIND_EXTRA_ADDRESS, strerror(-ret));
	}
	close(fd);
	return ret;
}

static int enter_private_namespace(void)
{
	int ret;

	if (unshare(CLONE_NEWNET | CLONE_NEWNS) < 0) {
		ret = -errno;
		fprintf(stderr,
			"ganesha harness: cannot make a private network and mount namespace "
			"(unshare(CLONE_NEWNET | CLONE_NEWNS): %s); it needs root "
			"(CAP_SYS_ADMIN) and namespace support\n",
			strerror(-ret));
		return ret == -EPERM || ret == -EINVAL || ret == -ENOSYS ? ret : -EPERM;
	}
	/* as unshare(1): our /run must not propagate to the machine's */
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) {
		ret = -errno;
		fprintf(stderr, "ganesha harness: make mounts private in the new namespace: %s\n",
			strerror(-ret));
		return ret == -EPERM || ret == -EACCES ? -EPERM : ret;
	}
	if (mount("tmpfs", "/run", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755") < 0) {
		ret = -errno;
		fprintf(stderr, "ganesha harness: mount a tmpfs on /run in the new namespace: %s\n",
			strerror(-ret));
		return ret == -EPERM || ret == -EACCES ? -EPERM : ret;
	}
	return bring_up_loopback();
}

static void stop_child(pid_t pid, int *wait_status)
{
	uint64_t deadline = now_ms() + RPCBIND_STOP_TIMEOUT_MS;

	kill(pid, SIGTERM);
	while (waitpid(pid, wait_status, WNOHANG) != pid) {
		if (now_ms() > deadline) {
			kill(pid, SIGKILL);
			waitpid(pid, wait_status, 0);
			*wait_status = -1;
			return;
		}
		sleep_ms(10);
	}
}

static void run_supervisor(pid_t parent, const char *binary, const char *output_path, int report_fd)
{
	sigset_t signals;
	pid_t pid;
	int status = 0;
	int sig;

	sigemptyset(&signals);
	sigaddset(&signals, SIGTERM);
	sigaddset(&signals, SIGCHLD);
	sigprocmask(SIG_BLOCK, &signals, NULL);
	prctl(PR_SET_PDEATHSIG, SIGTERM);
	if (getppid() != parent)
		_exit(1);
	pid = fork();
	if (pid < 0)
		_exit(127);
	if (pid == 0) {
		int fd = open(output_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);

		sigprocmask(SIG_UNBLOCK, &signals, NULL);
		if (fd >= 0) {
			dup2(fd, STDOUT_FILENO);
			dup2(fd, STDERR_FILENO);
		}
		execl(binary, binary, "-f", "-w", (char *)NULL);
		fprintf(stderr, "exec %s: %s\n", binary, strerror(errno));
		_exit(127);
	}
	if (write(report_fd, &pid, sizeof(pid)) != sizeof(pid))
		_exit(1);
	close(report_fd);
	for (;;) {
		if (sigwait(&signals, &sig) != 0)
			continue;
		if (sig == SIGTERM) {
			stop_child(pid, &status);
			break;
		}
		if (waitpid(pid, &status, WNOHANG) == pid) {
			/* died on its own: the caller sees it as a failure */
			_exit(2);
		}
	}
	_exit(status >= 0 && ((WIFEXITED(status) && WEXITSTATUS(status) == 0) ||
			      (WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM))
		  ? 0
		  : 1);
}

static void kill_running_rpcbind(void)
{
	int status;

	if (running_rpcbind) {
		stop_child(running_rpcbind->supervisor, &status);
		running_rpcbind = NULL;
	}
}

static bool rpcbind_listening(void)
{
	struct stat st;

	return stat(RPCBIND_SOCKET, &st) == 0 && S_ISSOCK(st.st_mode) && port_accepts(RPCBIND_PORT);
}

int ganesha_private_rpcbind_start(struct ganesha_rpcbind **rpcbind_out)
{
	const char *binary = getenv("NGNFS_RPCBIND");
	struct ganesha_rpcbind *rpcbind;
	pid_t parent = getpid();
	uint64_t deadline;
	int report[2];
	int status;
	ssize_t got;
	int ret;

	*rpcbind_out = NULL;
	if (!binary || !*binary)
		binary = RPCBIND_DEFAULT_BINARY;
	if (access(binary, X_OK) < 0) {
		ret = -errno;
		fprintf(stderr, "ganesha harness: no rpcbind at %s (%s): install rpcbind\n", binary,
			strerror(-ret));
		return ret == -ENOENT ? -ENOENT : ret;
	}
	if (running_rpcbind) {
		fprintf(stderr, "ganesha harness: a private rpcbind is already running\n");
		return -EBUSY;
	}
	ret = enter_private_namespace();
	if (ret < 0)
		return ret;
	rpcbind = calloc(1, sizeof(*rpcbind));
	if (!rpcbind)
		return -ENOMEM;
	/* /run is our fresh tmpfs: nobody else writes here */
	snprintf(rpcbind->output_path, sizeof(rpcbind->output_path), "/run/ngnfs-rpcbind.out");
	if (pipe2(report, O_CLOEXEC) < 0) {
		ret = -errno;
		free(rpcbind);
		return ret;
	}
	rpcbind->supervisor = fork();
	if (rpcbind->supervisor < 0) {
		ret = -errno;
		close(report[0]);
		close(report[1]);
		free(rpcbind);
		return ret;
	}
	if (rpcbind->supervisor == 0) {
		close(report[0]);
		run_supervisor(parent, binary, rpcbind->output_path, report[1]);
	}
	close(report[1]);
	got = read(report[0], &rpcbind->pid, sizeof(rpcbind->pid));
	close(report[0]);
	if (!rpcbind_atexit_registered) {
		atexit(kill_running_rpcbind);
		rpcbind_atexit_registered = true;
	}
	running_rpcbind = rpcbind;
	if (got != sizeof(rpcbind->pid)) {
		fprintf(stderr,
			"ganesha harness: the rpcbind supervisor (pid %d) failed to start "
			"%s\n",
			(int)rpcbind->supervisor, binary);
		ret = -ECHILD;
		goto fail;
	}
	deadline = now_ms() + RPCBIND_START_TIMEOUT_MS;
	while (!rpcbind_listening()) {
		if (waitpid(rpcbind->supervisor, &status, WNOHANG) == rpcbind->supervisor) {
			fprintf(stderr, "ganesha harness: %s -f -w (pid %d) exited at start\n",
				binary, (int)rpcbind->pid);
			print_file_tail(rpcbind->output_path, 20);
			running_rpcbind = NULL;
			free(rpcbind);
			return -ECHILD;
		}
		if (now_ms() > deadline) {
			fprintf(stderr,
				"ganesha harness: %s -f -w (pid %d) not listening on %s and "
				"127.0.0.1:%d after %d ms\n",
				binary, (int)rpcbind->pid, RPCBIND_SOCKET, RPCBIND_PORT,
				RPCBIND_START_TIMEOUT_MS);
			print_file_tail(rpcbind->output_path, 20);
			ret = -ETIMEDOUT;
			goto fail;
		}
		sleep_ms(20);
	}
	*rpcbind_out = rpcbind;
	return 0;
fail:
	kill_running_rpcbind();
	free(rpcbind);
	return ret;
}

pid_t ganesha_rpcbind_pid(const struct ganesha_rpcbind *rpcbind)
{
	return rpcbind->pid;
}

int ganesha_private_rpcbind_stop(struct ganesha_rpcbind *rpcbind)
{
	int status = 0;
	int ret = 0;

	if (!rpcbind)
		return 0;
	if (running_rpcbind == rpcbind)
		running_rpcbind = NULL;
	stop_child(rpcbind->supervisor, &status);
	if (status < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		fprintf(stderr,
			"ganesha harness: rpcbind (pid %d) did not exit cleanly on SIGTERM "
			"(supervisor wait status %#x)\n",
			(int)rpcbind->pid, status);
		print_file_tail(rpcbind->output_path, 20);
		ret = -EIO;
	}
	free(rpcbind);
	return ret;
}
