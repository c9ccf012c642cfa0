// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * ngnfs: the admin command.
 *
 *   ngnfs mkfs --devices DEVICES        format unformatted devices
 *   ngnfs stat --devices DEVICES [PATH] filesystem and per-device figures, or a path's
 *                                       attributes
 *   ngnfs ls   --devices DEVICES [PATH] list a directory
 *   ngnfs xattr --devices DEVICES PATH [NAME]
 *                                       list a path's extended attributes
 *                                       with their sizes, or write one's
 *                                       value to stdout
 *   ngnfs fsck --devices DEVICES [--repair]
 *                                       check the namespace from the root; with
 *                                       --repair, fix wrong link and entry counts
 *                                       and "..", online (by CMPXCHG), and check
 *                                       again
 *   ngnfs reclaim-orphans --devices DEVICES [--force]
 *                                       free the open-unlinked files a crashed
 *                                       gateway left, once no other client is
 *                                       connected
 *   ngnfs add-devices --devices DEVICES [--force]
 *                                       grow the filesystem by the unformatted
 *                                       devices listed after its own
 *
 * DEVICES is a manifest file (one host:port per line, device index order,
 * as blockd --peers) or a comma-separated list of host:port.  Each
 * subcommand is a small function over the native API (ngnfs.h) so that
 * the tool shows nothing the API cannot do; errors name the path or
 * device and come with ngnfs_last_error()'s words.  Long work (mkfs over
 * many devices, fsck) prints progress on stderr; results go to stdout.
 *
 * xattr is there for the archive agent's records: where a file's data
 * went on tape is in its xattrs, and a site must be able to read them
 * when no gateway runs (recovery, audits).  It only reads, and as any
 * client it reads under a read grant, so it is safe beside running
 * gateways; changing xattrs stays with NFS, where the agent's own
 * protocol is.
 *
 * Exit status: 0 success, 1 failure (fsck: problems found), 2 usage,
 * 128 + the signal when SIGINT or SIGTERM stopped reclaim-orphans.
 *
 * XXX:
 *  - fsck --repair fixes link and entry counts and ".." only; the rest it
 *    reports.
 *  - Paths are resolved without following symlinks.
 */

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fsck.h"
#include "manifest.h"
#include "ngnfs.h"

struct options {
	const char *devices;
	const char *path;
	const char *name; /* xattr */
	bool long_listing;
	bool repair;
	bool force;
};

static void usage_main(FILE *out)
{
	fprintf(out, "usage: ngnfs COMMAND --devices DEVICES [ARGS]\n"
		     "\n"
		     "commands:\n"
		     "  mkfs   format unformatted devices as a new filesystem\n"
		     "  stat   show filesystem figures, or the attributes of PATH\n"
		     "  ls     list the directory PATH (default /)\n"
		     "  xattr  list the extended attributes of PATH, or print one's value\n"
		     "  fsck   check the namespace; non-zero exit if problems are found\n"
		     "  reclaim-orphans\n"
		     "         free the unlinked-while-open files a crashed gateway left\n"
		     "  add-devices\n"
		     "         grow the filesystem by new devices listed after its own\n"
		     "\n"
		     "DEVICES: a manifest file (one host:port per line, device 0 first) or\n"
		     "host:port,host:port,... in device index order.\n"
		     "'ngnfs COMMAND --help' describes each command.\n");
}

static const char *const command_help[][2] = {
	{ "mkfs", "usage: ngnfs mkfs --devices DEVICES\n"
		  "Gives every device its identity (fs id, index, count) and writes the\n"
		  "superblock and root directory.  Refuses (exit 1) if any device is\n"
		  "already formatted.  Prints the new fs id.\n" },
	{ "stat", "usage: ngnfs stat --devices DEVICES [PATH]\n"
		  "Without PATH: block size, total and free blocks and inodes, devices,\n"
		  "then one line per device: address, blocks, free, reserved by clients,\n"
		  "multi-device sets staged and not yet resolved, clients connected\n"
		  "(this command's own included), and the group commits (durable write\n"
		  "batches) the device's blockd made since it started, with the requests\n"
		  "they carried.\n"
		  "With PATH: inode number, generation, type, mode, links, size, times.\n" },
	{ "ls", "usage: ngnfs ls --devices DEVICES [-l] [PATH]\n"
		"Lists the entries of directory PATH (default /) in cookie order:\n"
		"type, inode number and name; -l adds mode, links and size.\n" },
	{ "xattr", "usage: ngnfs xattr --devices DEVICES PATH [NAME]\n"
		   "Without NAME: one line per extended attribute of PATH, its value's\n"
		   "size in bytes, a tab, and its name, in the order they are stored.\n"
		   "With NAME: that attribute's value, byte for byte, on stdout and\n"
		   "nothing else (exit 1 if PATH has no such attribute).  Reads only;\n"
		   "safe while gateways serve the filesystem.\n" },
	{ "fsck", "usage: ngnfs fsck --devices DEVICES [--repair]\n"
		  "Walks the namespace from the root: every entry names a live inode of\n"
		  "its type and generation, link and entry counts are right, \"..\" is the\n"
		  "parent, no block is reached twice.  Problems are printed one per line\n"
		  "on stdout; exit status 1 if there are any.  Run it on a quiet\n"
		  "filesystem.\n"
		  "--repair: then write wrong link and entry counts and \"..\" right,\n"
		  "online (each inode is read as committed and written back by\n"
		  "compare-and-exchange, so a change made meanwhile is never\n"
		  "overwritten: such an inode is left alone and reported), and check\n"
		  "again; the exit status is that of the second check.\n" },
	{ "reclaim-orphans",
	  "usage: ngnfs reclaim-orphans --devices DEVICES [--force]\n"
	  "Frees the orphans (files unlinked while open) that a gateway left when\n"
	  "it stopped without closing them, e.g. after a crash; fsck counts them.\n"
	  "Refuses (exit 1) while any other client is connected to any device,\n"
	  "because one of them may still have such a file open: stop every\n"
	  "gateway first.  --force skips that check; an NFS client still reading\n"
	  "an unlinked open file then gets a stale handle.  SIGINT or SIGTERM\n"
	  "stops the run after the orphan in hand (exit 128 + the signal); run it\n"
	  "again to free the rest.\n" },
	{ "add-devices", "usage: ngnfs add-devices --devices DEVICES [--force]\n"
			 "DEVICES lists the filesystem's devices in their order, then the new,\n"
			 "unformatted ones.  Formats the new devices and raises the filesystem's\n"
			 "device count; nothing on the old devices moves.  Afterwards every\n"
			 "gateway must be given the new list (a mount with the old one is\n"
			 "refused), and so must every blockd's peers file.  Refuses (exit 1)\n"
			 "while any other client is connected: stop every gateway first.\n"
			 "--force skips that check; a gateway still running on the old list\n"
			 "answers I/O errors for whatever is placed on the new devices until it\n"
			 "is restarted with the new one.  Safe to run again.\n" },
};

static int command_usage(const char *command, FILE *out)
{
	size_t i;

	for (i = 0; i < sizeof(command_help) / sizeof(command_help[0]); i++) {
		if (strcmp(command_help[i][0], command) == 0) {
			fputs(command_help[i][1], out);
			return 0;
		}
	}
	usage_main(out);
	return -1;
}

/* DEVICES: a manifest file, or a comma-separated list. */
static int load_devices(const char *devices, struct ngnfs_manifest *manifest)
{
	char *text, *at;
	int ret;

	if (access(devices, F_OK) == 0)
		return ngnfs_manifest_load(devices, manifest);
	text = strdup(devices);
	if (!text)
		return -ENOMEM;
	for (at = text; *at; at++)
		if (*at == ',')
			*at = '\n';
	ret = ngnfs_manifest_parse(text, "--devices", manifest);
	free(text);
	return ret;
}

static void print_progress(void *arg, const char *line)
{
	(void)arg;
	fprintf(stderr, "ngnfs: %s\n", line);
}

static int do_mkfs(const struct ngnfs_manifest *manifest, const struct options *options)
{
	struct ngnfs_mkfs_options mkfs = {
		.device_addresses = (const char *const *)manifest->addresses,
		.device_count = manifest->device_count,
		.progress = print_progress,
	};
	uint8_t fs_id[16];
	int ret, i;

	(void)options;
	ret = ngnfs_mkfs(&mkfs, fs_id);
	if (ret < 0) {
		fprintf(stderr, "ngnfs mkfs: %s\n", ngnfs_last_error());
		return 1;
	}
	printf("fs id ");
	for (i = 0; i < 16; i++)
		printf("%02x", fs_id[i]);
	printf("\n%u devices formatted\n", manifest->device_count);
	return 0;
}

static int do_add_devices(const struct ngnfs_manifest *manifest, const struct options *options)
{
	struct ngnfs_mkfs_options grow = {
		.device_addresses = (const char *const *)manifest->addresses,
		.device_count = manifest->device_count,
		.progress = print_progress,
	};
	uint16_t added;
	int ret;

	ret = ngnfs_add_devices(&grow, options->force, &added);
	if (ret < 0) {
		fprintf(stderr, "ngnfs add-devices: %s (%s)\n", ngnfs_last_error(), strerror(-ret));
		return 1;
	}
	printf("%u devices added, %u in the filesystem\n", added, manifest->device_count);
	return 0;
}

static int mount_manifest(const struct ngnfs_manifest *manifest, struct ngnfs_fs **fs)
{
	struct ngnfs_mount_options mount = {
		.device_addresses = (const char *const *)manifest->addresses,
		.device_count = manifest->device_count,
	};
	int ret;

	ret = ngnfs_mount(&mount, fs);
	if (ret < 0)
		fprintf(stderr, "ngnfs: mount of %s (%u devices) failed: %s\n",
			manifest->addresses[0], manifest->device_count, ngnfs_last_error());
	return ret;
}

/* Walk PATH from the root, one lookup per component (symlinks not followed). */
static int resolve(struct ngnfs_fs *fs, const char *path, struct ngnfs_handle *handle,
		   struct ngnfs_attr *attr)
{
	char component[NGNFS_NAME_MAX + 1];
	struct ngnfs_handle at;
	size_t length;
	int ret;

	ngnfs_root(fs, &at);
	ret = ngnfs_getattr(fs, &at, attr);
	while (ret == 0 && *path) {
		while (*path == '/')
			path++;
		if (!*path)
			break;
		length = strcspn(path, "/");
		if (length > NGNFS_NAME_MAX)
			return -ENAMETOOLONG;
		memcpy(component, path, length);
		component[length] = '\0';
		ret = ngnfs_lookup(fs, &at, component, &at, attr);
		path += length;
	}
	if (ret == 0)
		*handle = at;
	return ret;
}

static const char *type_name(uint32_t mode)
{
	switch (mode & S_IFMT) {
	case S_IFREG:
		return "file";
	case S_IFDIR:
		return "dir";
	case S_IFLNK:
		return "symlink";
	case S_IFCHR:
		return "chardev";
	case S_IFBLK:
		return "blockdev";
	case S_IFIFO:
		return "fifo";
	case S_IFSOCK:
		return "socket";
	default:
		return "unknown";
	}
}

static void print_time(const char *label, const struct timespec *ts)
{
	char text[64];
	struct tm tm;
	time_t sec = ts->tv_sec;

	gmtime_r(&sec, &tm);
	strftime(text, sizeof(text), "%Y-%m-%d %H:%M:%S", &tm);
	printf("%-12s %s.%09ld UTC\n", label, text, ts->tv_nsec);
}

/* One line per device: files stay on their directory's device, so devices fill unevenly. */
static int print_devices(struct ngnfs_fs *fs, const struct ngnfs_manifest *manifest)
{
	struct ngnfs_statfs_device device_statfs;
	uint16_t device;
	int ret;

	for (device = 0; device < manifest->device_count; device++) {
		ret = ngnfs_statfs_device(fs, device, &device_statfs);
		if (ret < 0) {
			fprintf(stderr, "ngnfs stat: %s\n", ngnfs_last_error());
			return 1;
		}
		printf("device %-5u %s: %llu blocks, %llu free (%.1f%%), %llu reserved, "
		       "%llu sets staged, %llu clients; %llu group commits of %llu requests "
		       "since start\n",
		       device, manifest->addresses[device],
		       (unsigned long long)device_statfs.total_blocks,
		       (unsigned long long)device_statfs.free_blocks,
		       device_statfs.total_blocks ? 100.0 * (double)device_statfs.free_blocks /
							(double)device_statfs.total_blocks
						  : 0.0,
		       (unsigned long long)device_statfs.reserved_blocks,
		       (unsigned long long)device_statfs.staged_sets,
		       (unsigned long long)device_statfs.client_sessions,
		       (unsigned long long)device_statfs.group_commits,
		       (unsigned long long)device_statfs.commit_requests);
	}
	return 0;
}

static int do_stat(struct ngnfs_fs *fs, const struct ngnfs_manifest *manifest,
		   const struct options *options)
{
	struct ngnfs_handle handle;
	struct ngnfs_statfs statfs;
	struct ngnfs_attr attr;
	int ret;

	if (!options->path) {
		ret = ngnfs_statfs(fs, &statfs);
		if (ret < 0) {
			fprintf(stderr, "ngnfs stat: %s\n", ngnfs_last_error());
			return 1;
		}
		printf("block size   %llu\n", (unsigned long long)statfs.block_size);
		printf("devices      %u\n", statfs.device_count);
		printf("blocks       %llu total, %llu free\n",
		       (unsigned long long)statfs.total_blocks,
		       (unsigned long long)statfs.free_blocks);
		printf("inodes       %llu total, %llu free\n",
		       (unsigned long long)statfs.total_inodes,
		       (unsigned long long)statfs.free_inodes);
		printf("name max     %u\n", statfs.name_max);
		return print_devices(fs, manifest);
	}
	ret = resolve(fs, options->path, &handle, &attr);
	if (ret < 0) {
		fprintf(stderr, "ngnfs stat %s: %s\n", options->path, strerror(-ret));
		return 1;
	}
	printf("path         %s\n", options->path);
	printf("inode        %llu (device %llu)\n", (unsigned long long)attr.ino,
	       (unsigned long long)(attr.ino >> 48));
	printf("generation   %llu\n", (unsigned long long)attr.generation);
	printf("type         %s\n", type_name(attr.mode));
	printf("mode         %04o\n", attr.mode & 07777);
	printf("links        %u\n", attr.nlink);
	printf("uid gid      %u %u\n", attr.uid, attr.gid);
	printf("size         %llu\n", (unsigned long long)attr.size);
	printf("blocks       %llu (512-byte)\n", (unsigned long long)attr.blocks);
	printf("change       %llu\n", (unsigned long long)attr.change);
	print_time("atime", &attr.atime);
	print_time("mtime", &attr.mtime);
	print_time("ctime", &attr.ctime);
	print_time("crtime", &attr.crtime);
	return 0;
}

struct ls_state {
	struct ngnfs_fs *fs;
	bool long_listing;
	uint64_t count;
};

static int print_entry(void *arg, const char *name, size_t name_length,
		       const struct ngnfs_handle *handle, uint32_t type_mode, uint64_t cookie)
{
	struct ls_state *state = arg;
	struct ngnfs_attr attr;

	(void)cookie;
	state->count++;
	if (state->long_listing && ngnfs_getattr(state->fs, handle, &attr) == 0)
		printf("%-8s %04o %3u %12llu %20llu %.*s\n", type_name(type_mode),
		       attr.mode & 07777, attr.nlink, (unsigned long long)attr.size,
		       (unsigned long long)handle->ino, (int)name_length, name);
	else
		printf("%-8s %20llu %.*s\n", type_name(type_mode), (unsigned long long)handle->ino,
		       (int)name_length, name);
	return 0;
}

static int do_ls(struct ngnfs_fs *fs, const struct options *options)
{
	struct ls_state state = { .fs = fs, .long_listing = options->long_listing };
	const char *path = options->path ? options->path : "/";
	struct ngnfs_handle handle;
	struct ngnfs_attr attr;
	bool end = false;
	int ret;

	ret = resolve(fs, path, &handle, &attr);
	if (ret == 0 && (attr.mode & S_IFMT) != S_IFDIR)
		ret = -ENOTDIR;
	if (ret == 0)
		ret = ngnfs_readdir(fs, &handle, 0, print_entry, &state, &end);
	if (ret < 0) {
		fprintf(stderr, "ngnfs ls %s: %s (%s)\n", path, strerror(-ret), ngnfs_last_error());
		return 1;
	}
	return 0;
}

/* The NUL-separated names of handle's xattrs in *list (the caller frees it). */
static ssize_t read_xattr_names(struct ngnfs_fs *fs, const struct ngnfs_handle *handle, char **list)
{
	ssize_t length;
	int attempt;

	/* a name added between the sizing and the listing makes it -ERANGE: size again */
	for (attempt = 0; attempt < 5; attempt++) {
		length = ngnfs_listxattr(fs, handle, NULL, 0);
		if (length < 0)
			return length;
		*list = malloc(length + 1);
		if (!*list)
			return -ENOMEM;
		length = ngnfs_listxattr(fs, handle, *list, length + 1);
		if (length != -ERANGE)
			break;
		free(*list);
		*list = NULL;
	}
	if (length < 0) {
		free(*list);
		*list = NULL;
	}
	return length;
}

static int list_xattrs(struct ngnfs_fs *fs, const struct ngnfs_handle *handle)
{
	ssize_t length, size;
	char *list = NULL;
	const char *name;

	length = read_xattr_names(fs, handle, &list);
	if (length < 0)
		return (int)length;
	for (name = list; name < list + length; name += strlen(name) + 1) {
		size = ngnfs_getxattr(fs, handle, name, NULL, 0);
		if (size == -ENODATA)
			continue; /* removed since the listing */
		if (size < 0) {
			free(list);
			return (int)size;
		}
		printf("%zd\t%s\n", size, name);
	}
	free(list);
	return 0;
}

static int print_xattr_value(struct ngnfs_fs *fs, const struct ngnfs_handle *handle,
			     const char *name)
{
	/* no value is larger, so one read can never be -ERANGE */
	char *value = malloc(NGNFS_XATTR_VALUE_MAX);
	ssize_t size;

	if (!value)
		return -ENOMEM;
	size = ngnfs_getxattr(fs, handle, name, value, NGNFS_XATTR_VALUE_MAX);
	if (size >= 0 && (fwrite(value, 1, (size_t)size, stdout) != (size_t)size || fflush(stdout)))
		size = -EIO;
	free(value);
	return size < 0 ? (int)size : 0;
}

static int do_xattr(struct ngnfs_fs *fs, const struct options *options)
{
	struct ngnfs_handle handle;
	struct ngnfs_attr attr;
	int ret;

	ret = resolve(fs, options->path, &handle, &attr);
	if (ret == 0)
		ret = options->name ? print_xattr_value(fs, &handle, options->name)
				    : list_xattrs(fs, &handle);
	if (ret == -EIO && ferror(stdout)) {
		fprintf(stderr, "ngnfs xattr %s: writing to stdout failed\n", options->path);
		return 1;
	}
	if (ret < 0) {
		fprintf(stderr, "ngnfs xattr %s%s%s: %s (%s)\n", options->path,
			options->name ? " " : "", options->name ? options->name : "",
			strerror(-ret), ngnfs_last_error());
		return 1;
	}
	return 0;
}

static void fsck_line(void *arg, bool problem, const char *line)
{
	(void)arg;
	if (problem)
		printf("problem: %s\n", line);
	else
		fprintf(stderr, "ngnfs fsck: %s\n", line);
}

static void repair_line(void *arg, bool problem, const char *line)
{
	(void)arg;
	if (problem)
		printf("not repaired: %s\n", line);
	else
		printf("repair: %s\n", line);
}

/* One check; *report is the caller's to free.  -1 when the walk failed. */
static int check_once(struct ngnfs_fs *fs, struct ngnfs_fsck_report *report)
{
	int ret = ngnfs_fsck(fs, fsck_line, NULL, report);

	if (ret < 0) {
		fprintf(stderr, "ngnfs fsck: walk failed: %s (%s)\n", strerror(-ret),
			ngnfs_last_error());
		return -1;
	}
	printf("%llu inodes, %llu directories, %llu entries, %llu blocks, %llu orphans: %llu "
	       "problems\n",
	       (unsigned long long)report->inodes, (unsigned long long)report->directories,
	       (unsigned long long)report->entries, (unsigned long long)report->blocks,
	       (unsigned long long)report->orphans, (unsigned long long)report->problems);
	return 0;
}

/*
 * The repair runs on a client of its own (fsck_repair.c), and the second
 * check on a mount of its own: the servers revoke the first mount's
 * copies of the fixed inodes after each fix, but a revocation may still
 * be on its way when the second check starts.
 */
static void reclaim_output(void *arg, bool problem, const char *line)
{
	(void)arg;
	printf("%s%s\n", problem ? "problem: " : "", line);
}

/*
 * SIGINT or SIGTERM stops a long reclaim between two orphans rather than
 * in the middle of one: the run reports what it freed and what is left,
 * and the next run goes on from there (each orphan is freed by one
 * transaction, so none is half freed either way).
 */
static atomic_bool reclaim_stop;
static volatile sig_atomic_t reclaim_stop_signal;

static void reclaim_stop_handler(int signal_number)
{
	reclaim_stop_signal = signal_number;
	atomic_store(&reclaim_stop, true);
}

static int do_reclaim_orphans(struct ngnfs_fs *fs, const struct options *options)
{
	struct sigaction stop = { .sa_handler = reclaim_stop_handler, .sa_flags = SA_RESTART };
	struct sigaction old_interrupt, old_terminate;
	uint64_t reclaimed, left;
	int ret;

	sigemptyset(&stop.sa_mask);
	sigaction(SIGINT, &stop, &old_interrupt);
	sigaction(SIGTERM, &stop, &old_terminate);
	ret = ngnfs_fsck_reclaim_orphans(fs, options->force, &reclaim_stop, reclaim_output, NULL,
					 &reclaimed, &left);
	sigaction(SIGINT, &old_interrupt, NULL);
	sigaction(SIGTERM, &old_terminate, NULL);
	if (ret < 0 && ret != -ECANCELED) {
		fprintf(stderr, "ngnfs reclaim-orphans: %s (%s)\n", ngnfs_last_error(),
			strerror(-ret));
		return 1;
	}
	printf("%llu orphans freed, %llu left\n", (unsigned long long)reclaimed,
	       (unsigned long long)left);
	if (ret == -ECANCELED) {
		fprintf(stderr,
			"ngnfs reclaim-orphans: stopped by signal %d: run it again to free the "
			"%llu left\n",
			(int)reclaim_stop_signal, (unsigned long long)left);
		return 128 + reclaim_stop_signal;
	}
	return left ? 1 : 0;
}

static int do_fsck(struct ngnfs_fs *fs, const struct ngnfs_manifest *manifest,
		   const struct options *options)
{
	struct ngnfs_mount_options mount = {
		.device_addresses = (const char *const *)manifest->addresses,
		.device_count = manifest->device_count,
	};
	struct ngnfs_fsck_report report;
	size_t repaired;
	int ret;

	ret = check_once(fs, &report);
	if (ret < 0 || !options->repair || report.problems == 0) {
		ret = ret < 0 || report.problems ? 1 : 0;
		ngnfs_fsck_report_free(&report);
		return ret;
	}
	ret = ngnfs_fsck_repair(&mount, &report, repair_line, NULL, &repaired);
	printf("%zu of %zu fixable problems repaired (%llu problems found)\n", repaired,
	       report.fix_count, (unsigned long long)report.problems);
	ngnfs_fsck_report_free(&report);
	if (ret < 0) {
		fprintf(stderr, "ngnfs fsck: repair failed: %s (%s)\n", strerror(-ret),
			ngnfs_last_error());
		return 1;
	}
	fprintf(stderr, "ngnfs fsck: checking again\n");
	if (mount_manifest(manifest, &fs) < 0)
		return 1;
	ret = check_once(fs, &report);
	ret = ret < 0 || report.problems ? 1 : 0;
	ngnfs_fsck_report_free(&report);
	ngnfs_unmount(fs);
	return ret;
}

int main(int argc, char **argv)
{
	static const struct option long_options[] = {
		{ "devices", required_argument, NULL, 'd' },
		{ "force", no_argument, NULL, 'f' }, /* reclaim-orphans, add-devices */
		{ "help", no_argument, NULL, 'h' },
		{ "long", no_argument, NULL, 'l' },
		{ "repair", no_argument, NULL, 'r' }, /* fsck */
		{ NULL, 0, NULL, 0 },
	};
	struct options options = { 0 };
	struct ngnfs_manifest manifest = { 0 };
	struct ngnfs_fs *fs;
	const char *command;
	int opt, status;

	if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
		usage_main(argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	command = argv[1];
	optind = 2;
	while ((opt = getopt_long(argc, argv, "d:hl", long_options, NULL)) != -1) {
		switch (opt) {
		case 'd':
			options.devices = optarg;
			break;
		case 'h':
			return command_usage(command, stdout) < 0 ? 2 : 0;
		case 'l':
			options.long_listing = true;
			break;
		case 'r':
			options.repair = true;
			break;
		case 'f':
			options.force = true;
			break;
		default:
			command_usage(command, stderr);
			return 2;
		}
	}
	if (strcmp(command, "mkfs") && strcmp(command, "stat") && strcmp(command, "ls") &&
	    strcmp(command, "xattr") && strcmp(command, "fsck") &&
	    strcmp(command, "reclaim-orphans") && strcmp(command, "add-devices")) {
		fprintf(stderr, "ngnfs: unknown command \"%s\"\n", command);
		usage_main(stderr);
		return 2;
	}
	if (optind < argc)
		options.path = argv[optind++];
	if (optind < argc && strcmp(command, "xattr") == 0)
		options.name = argv[optind++];
	if (optind < argc || (options.path && strcmp(command, "stat") && strcmp(command, "ls") &&
			      strcmp(command, "xattr"))) {
		fprintf(stderr, "ngnfs %s: unexpected argument \"%s\"\n", command,
			optind < argc ? argv[optind] : options.path);
		command_usage(command, stderr);
		return 2;
	}
	if (!options.path && strcmp(command, "xattr") == 0) {
		fprintf(stderr, "ngnfs xattr: PATH is required\n");
		command_usage(command, stderr);
		return 2;
	}
	if (options.repair && strcmp(command, "fsck")) {
		fprintf(stderr, "ngnfs %s: --repair is an fsck option\n", command);
		command_usage(command, stderr);
		return 2;
	}
	if (options.force && strcmp(command, "reclaim-orphans") && strcmp(command, "add-devices")) {
		fprintf(stderr, "ngnfs %s: --force is a reclaim-orphans and add-devices option\n",
			command);
		command_usage(command, stderr);
		return 2;
	}
	if (!options.devices) {
		fprintf(stderr, "ngnfs %s: --devices is required\n", command);
		command_usage(command, stderr);
		return 2;
	}
	if (load_devices(options.devices, &manifest) < 0) {
		fprintf(stderr, "ngnfs %s: cannot read the devices from \"%s\"\n", command,
			options.devices);
		return 2;
	}

	if (strcmp(command, "mkfs") == 0) {
		status = do_mkfs(&manifest, &options);
	} else if (strcmp(command, "add-devices") == 0) {
		status = do_add_devices(&manifest, &options);
	} else if (mount_manifest(&manifest, &fs) < 0) {
		status = 1;
	} else {
		if (strcmp(command, "stat") == 0)
			status = do_stat(fs, &manifest, &options);
		else if (strcmp(command, "ls") == 0)
			status = do_ls(fs, &options);
		else if (strcmp(command, "xattr") == 0)
			status = do_xattr(fs, &options);
		else if (strcmp(command, "reclaim-orphans") == 0)
			status = do_reclaim_orphans(fs, &options);
		else
			status = do_fsck(fs, &manifest, &options);
		ngnfs_unmount(fs);
	}
	ngnfs_manifest_free(&manifest);
	return status;
}
