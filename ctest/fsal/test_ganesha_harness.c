/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Tests of the ganesha harness itself (ganesha_harness.c) against the
 * stock daemon with FSAL_VFS: every NFS test trusts that "started" means
 * serving the export, that a broken export is a failed start rather than
 * a daemon serving an empty pseudo root, that instances run side by side,
 * that the Squash setting and libnfs uid/gid credentials do what
 * permission tests need, and that stop leaves neither a process nor a
 * folder behind.
 *
 * XXX:
 *  - The PR_SET_PDEATHSIG / atexit cleanup paths are not tested (they
 *    need a second process level).
 */

#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <cmocka.h>
#include <fcntl.h>
#include <nfsc/libnfs.h>

#include "ganesha_harness.h"
#include "libnfs_client_id.h"
#include "nfs42_xattr.h"

#define check(condition, ...)                                                                      \
	do {                                                                                       \
		if (!(condition)) {                                                                \
			print_message("CHECK FAILED %s:%d: %s\n  ", __FILE__, __LINE__,            \
				      #condition);                                                 \
			print_message(__VA_ARGS__);                                                \
			print_message("\n");                                                       \
			fail();                                                                    \
		}                                                                                  \
	} while (0)

static bool process_exists(pid_t pid)
{
	return kill(pid, 0) == 0 || errno != ESRCH;
}

static bool path_exists(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0;
}

/* The export is really served: an NFSv4.2 session can look it up. */
static void check_serves(struct ganesha_instance *instance)
{
	struct nfs42_connect_options options = { .port = ganesha_instance_port(instance) };
	struct nfs42_client *client;
	struct nfs42_fh fh;
	int ret;

	ret = nfs42_connect(&options, &client);
	check(ret == 0, "expected a session with the instance on port %u, got %s", options.port,
	      strerror(-ret));
	ret = nfs42_lookup(client, ganesha_instance_pseudo_path(instance), &fh);
	check(ret == 0, "expected %s to be exported, got: %s",
	      ganesha_instance_pseudo_path(instance), nfs42_last_error(client));
	nfs42_disconnect(client);
}

static void test_start_serve_stop(void **state)
{
	struct ganesha_instance *instance;
	char url[512], expected[512], dir[4096];
	pid_t pid;
	int ret;

	(void)state;
	instance = ganesha_instance_start("FSAL { Name = VFS; }", NULL, NULL);
	check(instance != NULL, "expected ganesha.nfsd with FSAL_VFS to start (see stderr)");
	pid = ganesha_instance_pid(instance);
	snprintf(dir, sizeof(dir), "%s", ganesha_instance_dir(instance));
	check(ganesha_instance_alive(instance), "expected pid %d alive after start", (int)pid);
	check(path_exists(ganesha_instance_export_path(instance)),
	      "expected the harness to make the export folder %s",
	      ganesha_instance_export_path(instance));
	check_serves(instance);

	ret = ganesha_instance_url(instance, "/dir/file", "&uid=1000", url, sizeof(url));
	snprintf(expected, sizeof(expected),
		 "nfs://127.0.0.1/export/dir/file?version=4&nfsport=%u&uid=1000",
		 ganesha_instance_port(instance));
	check(ret == 0 && strcmp(url, expected) == 0, "expected URL %s, got %s", expected, url);

	ret = ganesha_instance_stop(instance);
	check(ret == 0, "expected a clean stop on SIGTERM, got %s", strerror(-ret));
	check(!process_exists(pid), "expected pid %d gone after stop", (int)pid);
	check(!path_exists(dir), "expected folder %s removed after a clean stop", dir);
}

/* An export the daemon cannot create is a failed start, bounded in time. */
static void test_bad_fsal_fails_start(void **state)
{
	struct ganesha_options options = {
		.fsal_block = "FSAL { Name = NO_SUCH_FSAL; }",
		.name = "bad-fsal",
		.start_timeout_ms = 10000,
		.remove_dir_on_failure = true,
	};
	struct ganesha_instance *instance;
	struct timespec start, end;
	double seconds;

	(void)state;
	clock_gettime(CLOCK_MONOTONIC, &start);
	instance = ganesha_instance_start_with(&options);
	clock_gettime(CLOCK_MONOTONIC, &end);
	seconds = (double)(end.tv_sec - start.tv_sec) + (double)(end.tv_nsec - start.tv_nsec) / 1e9;
	if (instance)
		ganesha_instance_stop(instance);
	check(instance == NULL, "expected start with an unknown FSAL to fail, it succeeded");
	check(seconds < 35.0, "expected the failed start to be bounded, took %.1f s", seconds);
}

/* Two instances at once: own ports, own folders, both serve. */
static void test_instances_side_by_side(void **state)
{
	struct ganesha_instance *first, *second;

	(void)state;
	first = ganesha_instance_start("FSAL { Name = VFS; }", NULL, NULL);
	check(first != NULL, "expected the first instance to start");
	second = ganesha_instance_start("FSAL { Name = MEM; }", NULL, NULL);
	if (!second)
		ganesha_instance_stop(first);
	check(second != NULL, "expected the second instance to start");
	check(ganesha_instance_port(first) != ganesha_instance_port(second) &&
		  strcmp(ganesha_instance_dir(first), ganesha_instance_dir(second)) != 0,
	      "expected distinct ports and folders, got %u %s and %u %s",
	      ganesha_instance_port(first), ganesha_instance_dir(first),
	      ganesha_instance_port(second), ganesha_instance_dir(second));
	check_serves(first);
	check_serves(second);
	check(ganesha_instance_stop(second) == 0, "expected the second instance to stop cleanly");
	check_serves(first);
	check(ganesha_instance_stop(first) == 0, "expected the first instance to stop cleanly");
}

/* A libnfs context mounted on the instance's export with extra_query. */
static struct nfs_context *mount_export(struct ganesha_instance *instance, const char *extra_query)
{
	struct nfs_context *nfs = nfs_init_context();
	struct nfs_url *url;
	char text[512];

	check(nfs != NULL, "nfs_init_context failed");
	ngnfs_libnfs_set_unique_client_id(nfs, "harness-test");
	check(ganesha_instance_url(instance, NULL, extra_query, text, sizeof(text)) == 0,
	      "URL too long");
	url = nfs_parse_url_dir(nfs, text);
	check(url != NULL, "expected libnfs to parse %s: %s", text, nfs_get_error(nfs));
	check(nfs_mount(nfs, url->server, url->path) == 0, "expected to mount %s: %s", text,
	      nfs_get_error(nfs));
	nfs_destroy_url(url);
	return nfs;
}

static void create_file(struct nfs_context *nfs, const char *path, int mode)
{
	struct nfsfh *file;

	check(nfs_open2(nfs, path, O_CREAT | O_WRONLY, mode, &file) == 0,
	      "expected to create %s: %s", path, nfs_get_error(nfs));
	nfs_close(nfs, file);
	/* libnfs 4.0 creates exclusively without a mode: set it. */
	check(nfs_chmod(nfs, path, mode) == 0, "expected chmod %o %s: %s", mode, path,
	      nfs_get_error(nfs));
}

/*
 * Squash = No_Root_Squash (the default) lets root be root; a uid 1000
 * credential (libnfs ?uid=1000&gid=1000) is that user: it cannot write a
 * root file of mode 0644, can read it, and owns what it creates - checked
 * on the exported folder itself.  Root_Squash maps root to the anonymous
 * uid.
 */
static void test_squash_and_credentials(void **state)
{
	struct ganesha_options squashed_options = {
		.fsal_block = "FSAL { Name = VFS; }",
		.squash = "Root_Squash",
		.name = "root-squash",
	};
	struct ganesha_instance *instance, *squashed;
	struct nfs_context *root, *user;
	struct nfs_stat_64 st;
	struct nfsfh *file;
	char local[4200];
	struct stat local_st;

	(void)state;
	instance = ganesha_instance_start("FSAL { Name = VFS; }", NULL, NULL);
	check(instance != NULL, "expected ganesha.nfsd with FSAL_VFS to start");
	root = mount_export(instance, "&uid=0&gid=0");
	user = mount_export(instance, "&uid=1000&gid=1000");
	create_file(root, "/root-file", 0644);
	check(nfs_stat64(root, "/root-file", &st) == 0 && st.nfs_uid == 0,
	      "expected /root-file owned by uid 0 (no root squash), got uid %llu",
	      (unsigned long long)st.nfs_uid);
	check(nfs_open(user, "/root-file", O_WRONLY, &file) < 0,
	      "expected uid 1000 to be refused write access to a root 0644 file");
	check(nfs_open(user, "/root-file", O_RDONLY, &file) == 0,
	      "expected uid 1000 to read a root 0644 file: %s", nfs_get_error(user));
	nfs_close(user, file);
	create_file(user, "/user-file", 0600);
	snprintf(local, sizeof(local), "%s/user-file", ganesha_instance_export_path(instance));
	check(stat(local, &local_st) == 0 && local_st.st_uid == 1000 && local_st.st_gid == 1000,
	      "expected %s owned by 1000:1000 on disk, got %u:%u", local,
	      (unsigned int)local_st.st_uid, (unsigned int)local_st.st_gid);
	nfs_destroy_context(user);
	nfs_destroy_context(root);
	check(ganesha_instance_stop(instance) == 0, "expected a clean stop");

	squashed = ganesha_instance_start_with(&squashed_options);
	check(squashed != NULL, "expected ganesha.nfsd with Root_Squash to start");
	root = mount_export(squashed, "&uid=0&gid=0");
	create_file(root, "/squashed-file", 0644);
	snprintf(local, sizeof(local), "%s/squashed-file", ganesha_instance_export_path(squashed));
	check(stat(local, &local_st) == 0 && local_st.st_uid != 0,
	      "expected root squashed to the anonymous uid for %s, got uid %u", local,
	      (unsigned int)local_st.st_uid);
	nfs_destroy_context(root);
	check(ganesha_instance_stop(squashed) == 0, "expected a clean stop");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_start_serve_stop),
		cmocka_unit_test(test_bad_fsal_fails_start),
		cmocka_unit_test(test_instances_side_by_side),
		cmocka_unit_test(test_squash_and_credentials),
	};

	return cmocka_run_group_tests_name("ganesha_harness", tests, NULL, NULL);
}
