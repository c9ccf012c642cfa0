/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * nfs_op_latency: where one NFS client's time goes, operation by
 * operation, on a gateway that is already running (tools/ngnfs-local run,
 * or any NFSv4 server).  nfs_bench gives rates per workload; this splits
 * one connection's untar-like loop into its OPEN, WRITE and CLOSE (libnfs
 * sends COMMIT with the CLOSE of a written file), then times RENAME and
 * REMOVE of the same files, and prints the mean latency of each.
 *
 * Run it under `perf stat -e syscalls:sys_enter_fdatasync -p <blockd
 * pids>` to count the WAL syncs the operations cost: that is how
 * docs/performance.md (run 17) shows one sync per stable rename and one
 * per writeback COMMIT.
 *
 *     nfs_op_latency 'nfs://127.0.0.1/ngnfs?version=4&nfsport=20490' [files]
 *
 * It works in a new directory named after its pid under the export root,
 * and removes the files and the directory again.  A benchmark, not a test:
 * never registered with ctest.
 */

#include <sys/time.h>

#include <fcntl.h>
#include <nfsc/libnfs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define FILE_BYTES 2048

static double now_seconds(void)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (double)now.tv_sec + (double)now.tv_nsec / 1e9;
}

/* Says what failed, then gives the libnfs context (and the URL) back. */
static int fail(struct nfs_context *nfs, struct nfs_url *url, const char *what, const char *path)
{
	fprintf(stderr, "nfs_op_latency: %s %s: %s\n", what, path, nfs_get_error(nfs));
	if (url)
		nfs_destroy_url(url);
	nfs_destroy_context(nfs);
	return 1;
}

static void print_mean(const char *operation, double seconds, unsigned int count)
{
	printf("  %-22s %8.0f us\n", operation, seconds / count * 1e6);
}

int main(int argc, char **argv)
{
	static char content[FILE_BYTES];
	double open_seconds = 0, write_seconds = 0, close_seconds = 0, start, seconds;
	char dir[64], path[128], new_path[128];
	struct nfs_context *nfs;
	struct nfs_url *url;
	unsigned int count = 1000, i;

	if (argc < 2 || argc > 3 || (argc == 3 && (count = (unsigned int)atoi(argv[2])) == 0)) {
		fprintf(stderr, "usage: nfs_op_latency NFS_URL [files (default 1000)]\n");
		return 2;
	}
	memset(content, 'u', sizeof(content));
	nfs = nfs_init_context();
	if (!nfs) {
		fprintf(stderr, "nfs_op_latency: cannot make a libnfs context\n");
		return 1;
	}
	url = nfs_parse_url_dir(nfs, argv[1]);
	if (!url)
		return fail(nfs, url, "parse", argv[1]);
	if (nfs_mount(nfs, url->server, url->path) < 0)
		return fail(nfs, url, "mount", argv[1]);
	snprintf(dir, sizeof(dir), "/nfs-op-latency-%d", (int)getpid());
	if (nfs_mkdir(nfs, dir) < 0)
		return fail(nfs, url, "mkdir", dir);

	start = now_seconds();
	for (i = 0; i < count; i++) {
		struct nfsfh *file;
		double before;

		snprintf(path, sizeof(path), "%s/file%u", dir, i);
		before = now_seconds();
		if (nfs_open2(nfs, path, O_CREAT | O_WRONLY, 0644, &file) < 0)
			return fail(nfs, url, "create", path);
		open_seconds += now_seconds() - before;
		before = now_seconds();
		if (nfs_write(nfs, file, sizeof(content), content) != (int)sizeof(content))
			return fail(nfs, url, "write", path);
		write_seconds += now_seconds() - before;
		before = now_seconds();
		if (nfs_close(nfs, file) < 0)
			return fail(nfs, url, "close", path);
		close_seconds += now_seconds() - before;
	}
	seconds = now_seconds() - start;
	printf("%u files of %d bytes: %.0f files/s\n", count, FILE_BYTES, count / seconds);
	print_mean("open (create)", open_seconds, count);
	print_mean("write", write_seconds, count);
	print_mean("close (commit)", close_seconds, count);

	start = now_seconds();
	for (i = 0; i < count; i++) {
		snprintf(path, sizeof(path), "%s/file%u", dir, i);
		snprintf(new_path, sizeof(new_path), "%s/renamed%u", dir, i);
		if (nfs_rename(nfs, path, new_path) < 0)
			return fail(nfs, url, "rename", path);
	}
	seconds = now_seconds() - start;
	print_mean("rename", seconds, count);

	start = now_seconds();
	for (i = 0; i < count; i++) {
		snprintf(new_path, sizeof(new_path), "%s/renamed%u", dir, i);
		if (nfs_unlink(nfs, new_path) < 0)
			return fail(nfs, url, "unlink", new_path);
	}
	seconds = now_seconds() - start;
	print_mean("unlink", seconds, count);

	if (nfs_rmdir(nfs, dir) < 0)
		return fail(nfs, url, "rmdir", dir);
	nfs_destroy_url(url);
	nfs_destroy_context(nfs);
	return 0;
}
