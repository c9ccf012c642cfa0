// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The FSAL guard: runs the stock ganesha.nfsd with our plugin and checks
 * that the plugin and the daemon agree on the layout of ganesha's
 * structures, that the export really serves NFSv4, and that bad export
 * options are refused.
 *
 * Why: fsal_ngnfs is compiled against a config.h we generate ourselves, not
 * the one Debian's daemon was built with.  A wrong switch in it is silent:
 * the plugin loads and reads every shared structure at the wrong offsets.
 * So this program writes a config with unusual values (Lease_Lifetime = 37,
 * Max_Client_Ids = 31337, ...) spread over ganesha's nfs_param, and the
 * plugin logs what it reads back at export creation ("NGNFS guard:" line,
 * fsal_ngnfs/export.c); every value must come back exactly.
 *
 * Modes:
 *   guard     the guard proper: values match, a real NFSv4 client (libnfs)
 *             mounts the export, stats and lists its root, looks up a
 *             missing name, and the daemon exits cleanly on SIGTERM.
 *   mismatch  run against a plugin built with a deliberately wrong config.h
 *             (fsalngnfs_guard_mismatch): passes only if the plugin loaded
 *             and the guard saw values differ, proving the guard can fail.
 *   options   exports with bad FSAL options (unknown Durability, Cache_Size
 *             out of range, malformed or missing Devices, both or neither
 *             of Devices and Devices_File, a missing or malformed manifest)
 *             and exports whose devices cannot serve (nothing listening
 *             at the address, a blockd that was never formatted) must be
 *             refused with messages that name the problem, while a good
 *             export in the same config (given by Devices_File) is still
 *             created, and so is one whose device 1 is an address nothing
 *             listens at, with Allow_Unreachable_Devices = true (a value
 *             that is not a boolean is refused).
 *
 * The exports mount a real filesystem: main() starts a two-device blockd
 * cluster (ctest/harness/cluster.h) and formats it with ngnfs_mkfs()
 * before anything else, and a one-device cluster that stays unformatted
 * for the options mode.
 *
 * Every daemon gets its own temporary folder (config, log, pid file,
 * recovery folder) and its own loopback port (bound to port 0 first, so the
 * kernel picks a free one; retried if the daemon still loses the race).
 * The daemon is stopped by its PID only, waited for, and killed if it does
 * not exit.  The checks run in a child process watched by the parent, which
 * bounds the whole run: past the time limit it kills the child, the daemon
 * dies with it (PR_SET_PDEATHSIG, and the parent also kills it by the PID in
 * its pid file), and the parent still removes the temporary folder.  So no
 * run leaves a daemon or a folder behind, whatever hangs.
 */

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>

#include <nfsc/libnfs.h>

#include "cluster.h"
#include "ngnfs.h"

#define EXPORT_ID	 77
#define EXPORT_PSEUDO	 "/ngnfs"
#define START_ATTEMPTS	 3
#define STOP_TIMEOUT_MS	 10000
#define READY_TIMEOUT_MS 20000
#define LOG_TAIL_LINES	 40

/* The unusual values we write and expect the plugin to read back. */
#define LEASE_LIFETIME	       37
#define GRACE_PERIOD	       43
#define MAX_CLIENT_IDS	       31337
#define MANAGE_GIDS_EXPIRATION 1777
#define MAX_UID_TO_GROUP_REQS  4242
#define CACHE_SIZE	       67108864
#define WRITEBACK_INTERVAL_MS  250

enum mode {
	MODE_GUARD,
	MODE_MISMATCH,
	MODE_OPTIONS,
};

struct daemon {
	/* short enough that every path below fits */
	char dir[PATH_MAX / 2];
	char config_path[PATH_MAX];
	char log_path[PATH_MAX];
	char pid_path[PATH_MAX];
	char output_path[PATH_MAX];
	uint16_t port;
	pid_t pid;
	int exit_status;
	bool exited;
};

static const char *ganesha_path = "/usr/bin/ganesha.nfsd";
static const char *plugin_dir;

static void say(const char *format, ...)
{
	va_list args;

	va_start(args, format);
	fputs("fsal_guard: ", stdout);
	vprintf(format, args);
	fputc('\n', stdout);
	va_end(args);
	fflush(stdout);
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(unsigned int ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/* A free loopback TCP port: bind port 0 and read back what the kernel chose. */
static int pick_port(uint16_t *port)
{
	struct sockaddr_in address = { .sin_family = AF_INET };
	socklen_t length = sizeof(address);
	int fd;

	address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0)
		return -errno;
	if (bind(fd, (struct sockaddr *)&address, sizeof(address)) < 0 ||
	    getsockname(fd, (struct sockaddr *)&address, &length) < 0) {
		int ret = -errno;

		close(fd);
		return ret;
	}
	*port = ntohs(address.sin_port);
	close(fd);
	return 0;
}

/* True once 127.0.0.1:port accepts a TCP connection. */
static bool port_accepts(uint16_t port)
{
	struct sockaddr_in address = { .sin_family = AF_INET };
	bool accepted;
	int fd;

	address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	address.sin_port = htons(port);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0)
		return false;
	accepted = connect(fd, (struct sockaddr *)&address, sizeof(address)) == 0;
	close(fd);
	return accepted;
}

/* Reads a whole file into a NUL-terminated buffer; NULL if absent. */
static char *read_file(const char *path)
{
	FILE *file = fopen(path, "r");
	char *buffer = NULL;
	size_t size = 0;
	size_t used = 0;
	size_t got;

	if (file == NULL)
		return NULL;
	do {
		if (size - used < 4096) {
			size = size ? size * 2 : 65536;
			buffer = realloc(buffer, size + 1);
			if (buffer == NULL) {
				fclose(file);
				return NULL;
			}
		}
		got = fread(buffer + used, 1, size - used, file);
		used += got;
	} while (got > 0);
	fclose(file);
	buffer[used] = '\0';
	return buffer;
}

static bool log_contains(const struct daemon *daemon, const char *needle)
{
	char *log = read_file(daemon->log_path);
	bool found = log != NULL && strstr(log, needle) != NULL;

	free(log);
	return found;
}

/* Copies the text after needle, to the end of its line, into value. */
static bool log_line_after(const struct daemon *daemon, const char *needle, char *value,
			   size_t size)
{
	char *log = read_file(daemon->log_path);
	char *start;
	size_t length;

	if (log == NULL)
		return false;
	start = strstr(log, needle);
	if (start == NULL) {
		free(log);
		return false;
	}
	start += strlen(needle);
	length = strcspn(start, "\n");
	if (length >= size)
		length = size - 1;
	memcpy(value, start, length);
	value[length] = '\0';
	free(log);
	return true;
}

static void print_log_tail(const struct daemon *daemon)
{
	char *log = read_file(daemon->log_path);
	char *start;
	int lines = 0;

	if (log == NULL) {
		say("no daemon log at %s", daemon->log_path);
	} else {
		start = log + strlen(log);
		while (start > log && lines <= LOG_TAIL_LINES)
			if (*--start == '\n')
				lines++;
		say("last lines of the daemon log %s:", daemon->log_path);
		fputs(start, stdout);
		free(log);
	}
	log = read_file(daemon->output_path);
	if (log != NULL && log[0] != '\0') {
		say("daemon stdout/stderr:");
		fputs(log, stdout);
	}
	free(log);
	fflush(stdout);
}

/* The FSAL block of one export; fsal_options is inserted verbatim. */
static void write_export(FILE *file, unsigned int export_id, const char *pseudo,
			 const char *fsal_options)
{
	fprintf(file,
		"EXPORT {\n"
		"\tExport_Id = %u;\n"
		"\tPath = /;\n"
		"\tPseudo = %s;\n"
		"\tAccess_Type = RW;\n"
		"\tSquash = No_Root_Squash;\n"
		"\tProtocols = 4;\n"
		"\tTransports = TCP;\n"
		"\tFSAL {\n"
		"\t\tName = NGNFS;\n"
		"%s"
		"\t}\n"
		"}\n",
		export_id, pseudo, fsal_options);
}

static struct ngnfs_test_cluster *cluster;
static struct ngnfs_test_cluster *unformatted_cluster;

/* The good export's options, filled by main() with the cluster's devices. */
static char good_fsal_options[4096];
static char unreachable_options[256];
static char unformatted_options[256];
static char unformatted_message[512];
static char missing_file_options[PATH_MAX];
static char missing_file_message[PATH_MAX + 64];
static char bad_file_options[PATH_MAX];
static char bad_file_message[PATH_MAX + 64];
static char manifest_path[PATH_MAX];

/* The bad exports of the options mode, and what the log must then say. */
struct bad_export {
	unsigned int export_id;
	const char *fsal_options;
	const char *expected_message;
	/*
	 * For ganesha's own range errors, which give the file and line but
	 * not the option: the option's text, whose line the message must name.
	 */
	const char *option_line;
};

static struct bad_export bad_exports[] = {
	{ 101,
	  "\t\tDevices = \"127.0.0.1:7001\";\n"
	  "\t\tDurability = sometimes;\n",
	  "NGNFS: Durability = \"sometimes\" is neither stable nor writeback", NULL },
	{ 102, "\t\tDevices = \"127.0.0.1:7001,nocolon\";\n",
	  "NGNFS: Devices entry: \"nocolon\" is not host:port", NULL },
	{ 103, "\t\tDevices = \"127.0.0.1:0\";\n",
	  "NGNFS: Devices entry: \"127.0.0.1:0\" is not host:port", NULL },
	{ 104, "\t\tDurability = stable;\n",
	  "NGNFS: the FSAL block needs exactly one of Devices and Devices_File (neither is set)",
	  NULL },
	{ 105,
	  "\t\tDevices = \"127.0.0.1:7001\";\n"
	  "\t\tCache_Size = 5;\n",
	  "(5) is out of range", "Cache_Size = 5;" },
	{ 106,
	  "\t\tDevices = \"127.0.0.1:7001\";\n"
	  "\t\tWriteback_Interval_Ms = 0;\n",
	  "(0) is out of range", "Writeback_Interval_Ms = 0;" },
	{ 107,
	  "\t\tDevices = \"127.0.0.1:7001\";\n"
	  "\t\tDevices_File = \"/etc/hostname\";\n",
	  "NGNFS: the FSAL block needs exactly one of Devices and Devices_File (both are set)",
	  NULL },
	/* filled by main(): they name the cluster's addresses and files */
	{ 108, missing_file_options, missing_file_message, NULL },
	{ 109, bad_file_options, bad_file_message, NULL },
	{ 110, unreachable_options, "NGNFS: export 110 could not mount Devices = \"127.0.0.1:1\"",
	  NULL },
	{ 111, unformatted_options, unformatted_message, NULL },
	{ 112,
	  "\t\tDevices = \"127.0.0.1:7001\";\n"
	  "\t\tReclaim_Timeout_Ms = 999;\n",
	  "(999) is out of range", "Reclaim_Timeout_Ms = 999;" },
	{ 113,
	  "\t\tDevices = \"127.0.0.1:7001\";\n"
	  "\t\tAllow_Unreachable_Devices = maybe;\n",
	  "Expected boolean (true/false) got (maybe)", "Allow_Unreachable_Devices = maybe;" },
};

/*
 * The options mode's degraded export: the cluster's device 0 and, as its
 * device 1, an address nothing listens at, with Allow_Unreachable_Devices.
 */
#define DEGRADED_EXPORT_ID 120
static char degraded_options[256];

static int write_config(struct daemon *daemon, enum mode mode)
{
	FILE *file = fopen(daemon->config_path, "w");
	char pseudo[32];
	size_t i;

	if (file == NULL)
		return -errno;
	fprintf(file,
		"# Written by ctest/fsal/fsal_guard.c; unusual values on purpose.\n"
		"NFS_CORE_PARAM {\n"
		"\tPlugins_Dir = \"%s\";\n"
		"\tNFS_Port = %u;\n"
		"\tBind_Addr = 127.0.0.1;\n"
		"\tProtocols = 4;\n"
		"\tEnable_NLM = false;\n"
		"\tEnable_RQUOTA = false;\n"
		"\tEnable_UDP = false;\n"
		"\tManage_Gids_Expiration = %d;\n"
		"\tMax_Uid_To_Group_Reqs = %d;\n"
		"}\n"
		"NFSV4 {\n"
		"\tGraceless = true;\n"
		"\tRecoveryBackend = fs;\n"
		"\tRecoveryRoot = \"%s/recovery\";\n"
		"\tLease_Lifetime = %d;\n"
		"\tGrace_Period = %d;\n"
		"\tOnly_Numeric_Owners = true;\n"
		"\tMax_Client_Ids = %d;\n"
		"}\n"
		"NFS_KRB5 {\n"
		"\tActive_krb5 = false;\n"
		"}\n",
		plugin_dir, daemon->port, MANAGE_GIDS_EXPIRATION, MAX_UID_TO_GROUP_REQS,
		daemon->dir, LEASE_LIFETIME, GRACE_PERIOD, MAX_CLIENT_IDS);
	if (mode == MODE_OPTIONS) {
		for (i = 0; i < sizeof(bad_exports) / sizeof(bad_exports[0]); i++) {
			snprintf(pseudo, sizeof(pseudo), "/bad%u", bad_exports[i].export_id);
			write_export(file, bad_exports[i].export_id, pseudo,
				     bad_exports[i].fsal_options);
		}
	}
	if (mode == MODE_OPTIONS) {
		char options[PATH_MAX + 64];

		write_export(file, DEGRADED_EXPORT_ID, "/degraded", degraded_options);
		snprintf(options, sizeof(options), "\t\tDevices_File = \"%s\";\n", manifest_path);
		write_export(file, EXPORT_ID, EXPORT_PSEUDO, options);
	} else {
		write_export(file, EXPORT_ID, EXPORT_PSEUDO, good_fsal_options);
	}
	if (fclose(file) != 0)
		return -errno;
	return 0;
}

static int make_daemon_dir(struct daemon *daemon)
{
	const char *tmp = getenv("TMPDIR");
	char recovery[PATH_MAX + 16];

	snprintf(daemon->dir, sizeof(daemon->dir), "%s/ngnfs-fsal-guard-XXXXXX",
		 tmp != NULL && tmp[0] != '\0' ? tmp : "/tmp");
	if (mkdtemp(daemon->dir) == NULL)
		return -errno;
	snprintf(daemon->config_path, sizeof(daemon->config_path), "%s/ganesha.conf", daemon->dir);
	snprintf(daemon->log_path, sizeof(daemon->log_path), "%s/ganesha.log", daemon->dir);
	snprintf(daemon->pid_path, sizeof(daemon->pid_path), "%s/ganesha.pid", daemon->dir);
	snprintf(daemon->output_path, sizeof(daemon->output_path), "%s/ganesha.out", daemon->dir);
	snprintf(recovery, sizeof(recovery), "%s/recovery", daemon->dir);
	if (mkdir(recovery, 0700) < 0)
		return -errno;
	return 0;
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static void remove_daemon_dir(struct daemon *daemon)
{
	if (daemon->dir[0] != '\0')
		nftw(daemon->dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static int spawn_daemon(struct daemon *daemon)
{
	pid_t parent = getpid();
	pid_t pid;
	int fd;

	unlink(daemon->log_path);
	unlink(daemon->pid_path);
	daemon->exited = false;
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		/* The daemon must not outlive the test, whatever kills us. */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(127);
		fd = open(daemon->output_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		if (fd >= 0) {
			dup2(fd, STDOUT_FILENO);
			dup2(fd, STDERR_FILENO);
			close(fd);
		}
		fd = open("/dev/null", O_RDONLY);
		if (fd >= 0) {
			dup2(fd, STDIN_FILENO);
			close(fd);
		}
		execl(ganesha_path, ganesha_path, "-F", "-L", daemon->log_path, "-f",
		      daemon->config_path, "-p", daemon->pid_path, (char *)NULL);
		fprintf(stderr, "exec %s: %s\n", ganesha_path, strerror(errno));
		_exit(127);
	}
	daemon->pid = pid;
	return 0;
}

/* True once the daemon has exited (and reaps it). */
static bool daemon_exited(struct daemon *daemon)
{
	int status;

	if (daemon->exited)
		return true;
	if (waitpid(daemon->pid, &status, WNOHANG) == daemon->pid) {
		daemon->exited = true;
		daemon->exit_status = status;
	}
	return daemon->exited;
}

static void describe_exit(const struct daemon *daemon, char *text, size_t size)
{
	if (WIFEXITED(daemon->exit_status))
		snprintf(text, size, "exit status %d", WEXITSTATUS(daemon->exit_status));
	else if (WIFSIGNALED(daemon->exit_status))
		snprintf(text, size, "killed by signal %d (%s)", WTERMSIG(daemon->exit_status),
			 strsignal(WTERMSIG(daemon->exit_status)));
	else
		snprintf(text, size, "wait status 0x%x", daemon->exit_status);
}

/*
 * Stops the daemon by its PID: SIGTERM, wait, SIGKILL if it lingers.
 * Returns true if it exited by itself with status 0.
 */
static bool stop_daemon(struct daemon *daemon)
{
	uint64_t deadline = now_ms() + STOP_TIMEOUT_MS;
	char text[128];
	int status;

	if (daemon->pid <= 0)
		return false;
	if (!daemon_exited(daemon)) {
		kill(daemon->pid, SIGTERM);
		while (!daemon_exited(daemon) && now_ms() < deadline)
			sleep_ms(20);
	}
	if (!daemon_exited(daemon)) {
		say("daemon %d did not exit %d ms after SIGTERM; sending SIGKILL", daemon->pid,
		    STOP_TIMEOUT_MS);
		kill(daemon->pid, SIGKILL);
		if (waitpid(daemon->pid, &status, 0) == daemon->pid) {
			daemon->exited = true;
			daemon->exit_status = status;
		}
		daemon->pid = 0;
		return false;
	}
	describe_exit(daemon, text, sizeof(text));
	say("daemon %d stopped: %s", daemon->pid, text);
	daemon->pid = 0;
	return WIFEXITED(daemon->exit_status) && WEXITSTATUS(daemon->exit_status) == 0;
}

/*
 * Starts the daemon and waits until it has initialised (or exited).
 * Retries with a new port if it lost the race for the one we picked.
 * Returns 0 once "NFS SERVER INITIALIZED" is logged and the port accepts.
 */
static int start_daemon(struct daemon *daemon, enum mode mode)
{
	char text[128];
	uint64_t deadline;
	int attempt;
	int ret;

	for (attempt = 1; attempt <= START_ATTEMPTS; attempt++) {
		ret = pick_port(&daemon->port);
		if (ret < 0) {
			say("FAIL: cannot find a free loopback port: %s", strerror(-ret));
			return ret;
		}
		ret = write_config(daemon, mode);
		if (ret < 0) {
			say("FAIL: cannot write %s: %s", daemon->config_path, strerror(-ret));
			return ret;
		}
		ret = spawn_daemon(daemon);
		if (ret < 0) {
			say("FAIL: cannot start %s: %s", ganesha_path, strerror(-ret));
			return ret;
		}
		say("started %s (pid %d) on 127.0.0.1:%u in %s, plugins from %s", ganesha_path,
		    daemon->pid, daemon->port, daemon->dir, plugin_dir);

		deadline = now_ms() + READY_TIMEOUT_MS;
		while (now_ms() < deadline) {
			if (log_contains(daemon, "NFS SERVER INITIALIZED") &&
			    port_accepts(daemon->port))
				return 0;
			if (daemon_exited(daemon))
				break;
			sleep_ms(20);
		}
		if (!daemon_exited(daemon)) {
			say("FAIL: daemon %d not initialised after %d ms", daemon->pid,
			    READY_TIMEOUT_MS);
			return -ETIMEDOUT;
		}
		describe_exit(daemon, text, sizeof(text));
		daemon->pid = 0;
		if (log_contains(daemon, "Address already in use") ||
		    log_contains(daemon, "Cannot bind")) {
			say("daemon lost port %u to someone else (%s); retrying", daemon->port,
			    text);
			continue;
		}
		say("FAIL: daemon exited during start: %s", text);
		return -ECHILD;
	}
	say("FAIL: daemon could not bind a port in %d attempts", START_ATTEMPTS);
	return -EADDRINUSE;
}

struct expected_value {
	const char *key;
	char value[32];
};

/*
 * Compares the "NGNFS guard:" line with what we wrote.  Returns the number
 * of values that differ (each printed), or -1 if there is no guard line.
 */
static int check_guard_line(const struct daemon *daemon)
{
	struct expected_value expected[] = {
		{ "fsal_api", "11.0" },
		{ "export_id", "" },
		{ "fsal_export_id", "" },
		{ "nfs_port", "" },
		/* Protocols = 4 is CORE_OPTION_NFSV4 alone */
		{ "core_options", "0x2" },
		{ "manage_gids_expiration", "" },
		{ "max_uid_to_group_reqs", "" },
		{ "lease_lifetime", "" },
		{ "grace_period", "" },
		{ "graceless", "1" },
		{ "only_numeric_owners", "1" },
		{ "max_client_ids", "" },
	};
	char line[1024];
	char key[64];
	char found[64];
	const char *field;
	size_t count = sizeof(expected) / sizeof(expected[0]);
	size_t i;
	int mismatches = 0;

	snprintf(expected[1].value, sizeof(expected[1].value), "%d", EXPORT_ID);
	snprintf(expected[2].value, sizeof(expected[2].value), "%d", EXPORT_ID);
	snprintf(expected[3].value, sizeof(expected[3].value), "%u", daemon->port);
	snprintf(expected[5].value, sizeof(expected[5].value), "%d", MANAGE_GIDS_EXPIRATION);
	snprintf(expected[6].value, sizeof(expected[6].value), "%d", MAX_UID_TO_GROUP_REQS);
	snprintf(expected[7].value, sizeof(expected[7].value), "%d", LEASE_LIFETIME);
	snprintf(expected[8].value, sizeof(expected[8].value), "%d", GRACE_PERIOD);
	snprintf(expected[11].value, sizeof(expected[11].value), "%d", MAX_CLIENT_IDS);

	if (!log_line_after(daemon, "NGNFS guard: ", line, sizeof(line)))
		return -1;
	say("guard line: %s", line);
	for (i = 0; i < count; i++) {
		snprintf(key, sizeof(key), " %s=", expected[i].key);
		/* the first field has no leading space */
		if (strncmp(line, key + 1, strlen(key + 1)) == 0)
			field = line + strlen(key + 1);
		else if ((field = strstr(line, key)) != NULL)
			field += strlen(key);
		if (field == NULL) {
			say("  %-24s expected %s, missing from the guard line", expected[i].key,
			    expected[i].value);
			mismatches++;
			continue;
		}
		snprintf(found, sizeof(found), "%.*s", (int)strcspn(field, " "), field);
		if (strcmp(found, expected[i].value) != 0) {
			say("  %-24s expected %s, plugin read %s", expected[i].key,
			    expected[i].value, found);
			mismatches++;
		}
	}
	return mismatches;
}

/* Our own FSAL block must have been parsed as written. */
static bool check_export_line(const struct daemon *daemon)
{
	char needle[64];
	char line[1024];
	char expected[512];
	const char *const *addresses = ngnfs_test_cluster_addresses(cluster);

	snprintf(expected, sizeof(expected),
		 "mounted 2 device(s) Devices \"%s,%s\" durability=writeback "
		 "cache_size=67108864 writeback_interval_ms=250 reclaim_timeout_ms=4321",
		 addresses[0], addresses[1]);

	snprintf(needle, sizeof(needle), "NGNFS: export %d ", EXPORT_ID);
	if (!log_line_after(daemon, needle, line, sizeof(line))) {
		say("FAIL: no \"%s\" line in the daemon log", needle);
		return false;
	}
	if (strncmp(line, expected, strlen(expected)) != 0) {
		say("FAIL: FSAL block parsed wrongly:\n  expected %s\n  logged   %s", expected,
		    line);
		return false;
	}
	say("FSAL block parsed as written: %s", line);
	return true;
}

/* A real NFSv4 client against the export: mount, getattr, readdir, lookup. */
static bool check_nfs_client(const struct daemon *daemon)
{
	struct nfs_context *nfs;
	struct nfs_url *url = NULL;
	struct nfs_stat_64 st;
	struct nfsdir *dir = NULL;
	struct nfsdirent *entry;
	char address[256];
	int entries = 0;
	int others = 0;
	bool ok = false;
	int ret;

	snprintf(address, sizeof(address), "nfs://127.0.0.1%s?version=4&nfsport=%u", EXPORT_PSEUDO,
		 daemon->port);
	nfs = nfs_init_context();
	if (nfs == NULL) {
		say("FAIL: nfs_init_context failed");
		return false;
	}
	nfs_set_timeout(nfs, 5000);
	url = nfs_parse_url_dir(nfs, address);
	if (url == NULL) {
		say("FAIL: libnfs cannot parse %s: %s", address, nfs_get_error(nfs));
		goto out;
	}
	ret = nfs_mount(nfs, url->server, url->path);
	if (ret != 0) {
		say("FAIL: NFSv4 mount of %s: %s (%d)", address, nfs_get_error(nfs), ret);
		goto out;
	}
	say("mounted %s", address);

	ret = nfs_stat64(nfs, "/", &st);
	if (ret != 0) {
		say("FAIL: getattr of the export root: %s (%d)", nfs_get_error(nfs), ret);
		goto out;
	}
	say("root: ino %" PRIu64 " mode 0%" PRIo64 " nlink %" PRIu64 " uid %" PRIu64
	    " gid %" PRIu64,
	    st.nfs_ino, st.nfs_mode, st.nfs_nlink, st.nfs_uid, st.nfs_gid);
	if (!S_ISDIR(st.nfs_mode) || st.nfs_nlink < 2) {
		say("FAIL: export root: expected a directory with nlink >= 2, got mode 0%" PRIo64
		    " nlink %" PRIu64,
		    st.nfs_mode, st.nfs_nlink);
		goto out;
	}

	ret = nfs_opendir(nfs, "/", &dir);
	if (ret != 0) {
		say("FAIL: readdir of the export root: %s (%d)", nfs_get_error(nfs), ret);
		goto out;
	}
	while ((entry = nfs_readdir(nfs, dir)) != NULL) {
		entries++;
		if (strcmp(entry->name, ".") != 0 && strcmp(entry->name, "..") != 0) {
			say("  unexpected entry \"%s\" (ino %" PRIu64 ")", entry->name,
			    entry->inode);
			others++;
		}
	}
	nfs_closedir(nfs, dir);
	if (others != 0) {
		say("FAIL: a new export root must be empty, found %d entries", others);
		goto out;
	}
	say("readdir of the root: %d entries, none but . and ..", entries);

	ret = nfs_stat64(nfs, "/no-such-name", &st);
	if (ret != -ENOENT) {
		say("FAIL: getattr of a missing name: expected %d (ENOENT), got %d (%s)", -ENOENT,
		    ret, ret ? nfs_get_error(nfs) : "success");
		goto out;
	}
	say("lookup of a missing name: ENOENT as expected");
	ok = true;
out:
	if (url != NULL)
		nfs_destroy_url(url);
	nfs_destroy_context(nfs);
	return ok;
}

static bool check_pid_file(const struct daemon *daemon)
{
	char *text = read_file(daemon->pid_path);
	long pid = text != NULL ? strtol(text, NULL, 10) : -1;

	free(text);
	if (pid != daemon->pid) {
		say("FAIL: pid file %s holds %ld, the daemon is %d", daemon->pid_path, pid,
		    daemon->pid);
		return false;
	}
	return true;
}

static bool run_guard(struct daemon *daemon)
{
	int mismatches = check_guard_line(daemon);
	bool ok = true;

	if (mismatches < 0) {
		say("FAIL: the plugin logged no \"NGNFS guard:\" line (did it load?)");
		return false;
	}
	if (mismatches > 0) {
		say("FAIL: %d value(s) the plugin read from ganesha differ from the config: "
		    "config.h does not match the daemon (see docs/fsal.md)",
		    mismatches);
		return false;
	}
	say("all values the plugin read from ganesha match the config");
	ok &= check_pid_file(daemon);
	ok &= check_export_line(daemon);
	ok &= check_nfs_client(daemon);
	return ok;
}

static bool run_mismatch(struct daemon *daemon)
{
	int mismatches = check_guard_line(daemon);

	if (mismatches < 0) {
		say("FAIL: the mismatched plugin logged no \"NGNFS guard:\" line, so this run "
		    "proves nothing about the guard");
		return false;
	}
	if (mismatches == 0) {
		say("FAIL: the plugin was built with a wrong config.h, yet every value matched: "
		    "the guard cannot detect this mismatch");
		return false;
	}
	say("guard detected the wrong config.h: %d value(s) differ, as they must", mismatches);
	return true;
}

/* The number of the config line holding text, or 0. */
static int config_line_of(const struct daemon *daemon, const char *text)
{
	char *config = read_file(daemon->config_path);
	char *found = config != NULL ? strstr(config, text) : NULL;
	int line = 0;
	char *c;

	if (found != NULL) {
		line = 1;
		for (c = config; c < found; c++)
			line += *c == '\n';
	}
	free(config);
	return line;
}

static bool run_options(struct daemon *daemon)
{
	char message[PATH_MAX + 128];
	char needle[64];
	size_t i;
	bool ok = true;

	for (i = 0; i < sizeof(bad_exports) / sizeof(bad_exports[0]); i++) {
		const struct bad_export *bad = &bad_exports[i];

		if (bad->option_line != NULL)
			snprintf(message, sizeof(message), "(%s:%d): %s", daemon->config_path,
				 config_line_of(daemon, bad->option_line), bad->expected_message);
		else
			snprintf(message, sizeof(message), "%s", bad->expected_message);
		if (!log_contains(daemon, message)) {
			say("FAIL: export %u: expected the log to say \"%s\"", bad->export_id,
			    message);
			ok = false;
			continue;
		}
		snprintf(needle, sizeof(needle), "Could not create export for (/bad%u)",
			 bad->export_id);
		if (!log_contains(daemon, needle)) {
			say("FAIL: export %u has bad options but was not refused", bad->export_id);
			ok = false;
			continue;
		}
		say("export %u refused: %s", bad->export_id, message);
	}
	snprintf(needle, sizeof(needle), "NGNFS: export %d mounted", DEGRADED_EXPORT_ID);
	if (!log_contains(daemon, needle) ||
	    !log_contains(daemon, "allow_unreachable_devices=true")) {
		say("FAIL: export %d (device 1 unreachable, Allow_Unreachable_Devices = true) was "
		    "not created",
		    DEGRADED_EXPORT_ID);
		ok = false;
	} else {
		say("export %d created with its device 1 unreachable", DEGRADED_EXPORT_ID);
	}
	snprintf(needle, sizeof(needle), "NGNFS: export %d mounted", EXPORT_ID);
	if (!log_contains(daemon, needle)) {
		say("FAIL: the good export %d next to the bad ones was not created", EXPORT_ID);
		ok = false;
	} else {
		say("good export %d created next to the refused ones", EXPORT_ID);
	}
	return ok;
}

/* Runs in the checker process: start the daemon, check, stop it. */
static bool run_checks(struct daemon *daemon, enum mode mode)
{
	bool clean_exit;
	bool ok = false;
	int ret;

	ret = start_daemon(daemon, mode);
	if (ret == 0) {
		switch (mode) {
		case MODE_GUARD:
			ok = run_guard(daemon);
			break;
		case MODE_MISMATCH:
			ok = run_mismatch(daemon);
			break;
		case MODE_OPTIONS:
			ok = run_options(daemon);
			break;
		}
	}
	clean_exit = stop_daemon(daemon);
	if (mode == MODE_GUARD && ret == 0 && !clean_exit) {
		say("FAIL: the daemon did not exit cleanly on SIGTERM (export release path)");
		ok = false;
	}
	if (!ok)
		print_log_tail(daemon);
	return ok;
}

/*
 * Runs in the parent: waits for the checker at most time_limit seconds.
 * Past that, kills it and the daemon (by the PID in the daemon's pid file;
 * it also dies of PR_SET_PDEATHSIG when its parent, the checker, dies) and
 * waits until the daemon is gone, so the folder can be removed.
 */
static bool watch_checker(pid_t checker, struct daemon *daemon, unsigned int time_limit)
{
	uint64_t deadline = now_ms() + (uint64_t)time_limit * 1000;
	char *text;
	long daemon_pid;
	int status;

	while (now_ms() < deadline) {
		if (waitpid(checker, &status, WNOHANG) == checker)
			return WIFEXITED(status) && WEXITSTATUS(status) == 0;
		sleep_ms(20);
	}
	say("FAIL: time limit of %u s reached; killing the checker %d and the daemon", time_limit,
	    checker);
	kill(checker, SIGKILL);
	waitpid(checker, &status, 0);
	text = read_file(daemon->pid_path);
	daemon_pid = text != NULL ? strtol(text, NULL, 10) : 0;
	free(text);
	if (daemon_pid > 1) {
		kill((pid_t)daemon_pid, SIGKILL);
		deadline = now_ms() + STOP_TIMEOUT_MS;
		while (kill((pid_t)daemon_pid, 0) == 0 && now_ms() < deadline)
			sleep_ms(20);
	}
	print_log_tail(daemon);
	return false;
}

/*
 * Starts the formatted cluster the good export mounts and, for the options
 * mode, an unformatted one; fills the option texts that name them.
 */
static bool start_clusters(const struct daemon *daemon)
{
	struct ngnfs_mkfs_options mkfs = { .device_addresses = NULL };
	const char *const *addresses;
	uint8_t fs_id[16];
	FILE *file;
	int ret;

	cluster = ngnfs_test_cluster_start(2, "fsal-guard");
	if (cluster == NULL) {
		say("FAIL: could not start a blockd cluster");
		return false;
	}
	addresses = ngnfs_test_cluster_addresses(cluster);
	mkfs.device_addresses = addresses;
	mkfs.device_count = 2;
	ret = ngnfs_mkfs(&mkfs, fs_id);
	if (ret < 0) {
		say("FAIL: mkfs of %s,%s: %s", addresses[0], addresses[1], ngnfs_last_error());
		return false;
	}
	snprintf(good_fsal_options, sizeof(good_fsal_options),
		 "\t\tDevices = \"%s,%s\";\n"
		 "\t\tDurability = writeback;\n"
		 "\t\tCache_Size = 67108864;\n"
		 "\t\tWriteback_Interval_Ms = 250;\n"
		 "\t\tReclaim_Timeout_Ms = 4321;\n",
		 addresses[0], addresses[1]);
	snprintf(unreachable_options, sizeof(unreachable_options),
		 "\t\tDevices = \"127.0.0.1:1\";\n");
	snprintf(degraded_options, sizeof(degraded_options),
		 "\t\tDevices = \"%s,127.0.0.1:1\";\n"
		 "\t\tAllow_Unreachable_Devices = true;\n",
		 addresses[0]);

	unformatted_cluster = ngnfs_test_cluster_start(1, "fsal-guard-unformatted");
	if (unformatted_cluster == NULL) {
		say("FAIL: could not start the unformatted blockd");
		return false;
	}
	snprintf(unformatted_options, sizeof(unformatted_options), "\t\tDevices = \"%s\";\n",
		 ngnfs_test_cluster_address(unformatted_cluster, 0));
	/* libcore's reason must reach ganesha's log, not only stderr */
	snprintf(unformatted_message, sizeof(unformatted_message),
		 "NGNFS: export 111 could not mount Devices = \"%s\": mount: cannot connect",
		 ngnfs_test_cluster_address(unformatted_cluster, 0));

	/* the options mode's good export reads the cluster's own manifest */
	snprintf(manifest_path, sizeof(manifest_path), "%s", ngnfs_test_cluster_manifest(cluster));
	snprintf(missing_file_options, sizeof(missing_file_options),
		 "\t\tDevices_File = \"%s/no-such-manifest\";\n", daemon->dir);
	snprintf(missing_file_message, sizeof(missing_file_message),
		 "NGNFS: Devices_File \"%s/no-such-manifest\" cannot be opened", daemon->dir);
	snprintf(bad_file_options, sizeof(bad_file_options),
		 "\t\tDevices_File = \"%s/bad-manifest\";\n", daemon->dir);
	snprintf(bad_file_message, sizeof(bad_file_message),
		 "NGNFS: Devices_File %s/bad-manifest line 3: \"bogus\" is not host:port",
		 daemon->dir);
	{
		char path[PATH_MAX];

		snprintf(path, sizeof(path), "%s/bad-manifest", daemon->dir);
		file = fopen(path, "w");
		if (file == NULL) {
			say("FAIL: cannot write %s: %s", path, strerror(errno));
			return false;
		}
		fprintf(file, "# device 0\n127.0.0.1:7001 # annotated\nbogus\n");
		fclose(file);
	}
	return true;
}

static void usage(FILE *file)
{
	fprintf(file, "usage: fsal_guard --plugin-dir DIR [--mode guard|mismatch|options]\n"
		      "                  [--ganesha PATH] [--time-limit SECONDS] [--keep]\n"
		      "Runs ganesha.nfsd with the NGNFS FSAL from DIR and checks it (see the\n"
		      "comment at the top of ctest/fsal/fsal_guard.c).\n");
}

int main(int argc, char **argv)
{
	static const struct option options[] = {
		{ "plugin-dir", required_argument, NULL, 'd' },
		{ "mode", required_argument, NULL, 'm' },
		{ "ganesha", required_argument, NULL, 'g' },
		{ "time-limit", required_argument, NULL, 't' },
		{ "keep", no_argument, NULL, 'k' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct daemon daemon = { .pid = 0 };
	enum mode mode = MODE_GUARD;
	unsigned int time_limit = 60;
	bool keep = false;
	bool ok;
	pid_t checker;
	uint64_t started = now_ms();
	char plugin_path[PATH_MAX + 32];
	int option;
	int ret;

	while ((option = getopt_long(argc, argv, "d:m:g:t:kh", options, NULL)) != -1) {
		switch (option) {
		case 'd':
			plugin_dir = optarg;
			break;
		case 'm':
			if (strcmp(optarg, "guard") == 0)
				mode = MODE_GUARD;
			else if (strcmp(optarg, "mismatch") == 0)
				mode = MODE_MISMATCH;
			else if (strcmp(optarg, "options") == 0)
				mode = MODE_OPTIONS;
			else {
				usage(stderr);
				return 2;
			}
			break;
		case 'g':
			ganesha_path = optarg;
			break;
		case 't':
			time_limit = (unsigned int)strtoul(optarg, NULL, 10);
			break;
		case 'k':
			keep = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (plugin_dir == NULL || optind != argc) {
		usage(stderr);
		return 2;
	}
	snprintf(plugin_path, sizeof(plugin_path), "%s/libfsalngnfs.so", plugin_dir);
	if (access(plugin_path, R_OK) != 0) {
		say("FAIL: no plugin at %s: %s", plugin_path, strerror(errno));
		return 1;
	}
	if (access(ganesha_path, X_OK) != 0) {
		say("FAIL: cannot run %s: %s", ganesha_path, strerror(errno));
		return 1;
	}

	ret = make_daemon_dir(&daemon);
	if (ret < 0) {
		say("FAIL: cannot make a temporary folder: %s", strerror(-ret));
		return 1;
	}
	if (!start_clusters(&daemon)) {
		remove_daemon_dir(&daemon);
		return 1;
	}
	fflush(stdout);
	checker = fork();
	if (checker < 0) {
		say("FAIL: fork: %s", strerror(errno));
		remove_daemon_dir(&daemon);
		return 1;
	}
	if (checker == 0)
		_exit(run_checks(&daemon, mode) ? 0 : 1);

	ok = watch_checker(checker, &daemon, time_limit);
	if (ngnfs_test_cluster_stop(cluster) != 0) {
		say("FAIL: the blockd cluster did not shut down cleanly");
		ok = false;
	}
	ngnfs_test_cluster_stop(unformatted_cluster);
	if (keep)
		say("kept %s", daemon.dir);
	else
		remove_daemon_dir(&daemon);
	say("%s in %" PRIu64 " ms", ok ? "PASS" : "FAIL", now_ms() - started);
	return ok ? 0 : 1;
}
