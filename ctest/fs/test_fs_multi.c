// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Several clients on one filesystem (real blockd only): each client is a
 * forked process with its own mount, so the clients share nothing but
 * the servers, as two gateways would.
 *
 *  - two_clients_see_each_other: in lock step over pipes, each client
 *    finds what the other created, renamed and removed in the step before.
 *  - concurrent_renames_two_clients: threads in two clients rename files
 *    and directories back and forth between the same two directories in
 *    opposite orders while others create and unlink; every operation must
 *    succeed, and at the end every entry is in exactly one place, is the
 *    inode it was, has the right link count, each directory lists exactly
 *    the expected names once and fsck is clean.
 *  - stopped_client_loses_grants: a client stopped (SIGSTOP) while it holds
 *    grants loses its sessions to blockd's revoke timeout; the other
 *    client's operation then goes through, and the stopped one, continued,
 *    tells its gateway layer to drop what it cached and sees the change.
 *  - evicted_inode_is_invalidated: an inode the block cache evicts is passed
 *    to the gateway's invalidate callback (nobody would revoke it any more).
 *  - restart_grace_places_elsewhere: creates go on while a restarted
 *    device is in its reclaim grace period (which reserves nothing),
 *    their inodes on the other device, and on their own device again
 *    once it is over.
 *  - rename_subtree_race: two clients at once try to move P under Q and Q
 *    under P; at most one may succeed, and the tree must stay a tree.
 *  - lost_create_handle_stale: a writeback client killed with a create in
 *    memory; the lost file's handle must not name the next file in its
 *    block.
 *
 * Children report failure by exit status; the parent then checks the
 * final state itself and runs fsck.
 */

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "cache.h"
#include "cluster.h"
#include "fs_test_util.h"
#include "fsck.h"

#define CHILD_TIMEOUT_S 120

struct channel {
	int to_child[2];
	int to_parent[2];
};

static void channel_open(struct channel *channel)
{
	CHECK(pipe(channel->to_child) == 0 && pipe(channel->to_parent) == 0, "pipe: %s",
	      strerror(errno));
}

static void send_byte(int fd, char byte)
{
	CHECK(write(fd, &byte, 1) == 1, "pipe write: %s", strerror(errno));
}

static char receive_byte(int fd)
{
	char byte = 0;

	CHECK(read(fd, &byte, 1) == 1, "pipe read: the other side went away");
	return byte;
}

typedef void (*client_fn)(struct ngnfs_fs *fs, int index, int in, int out);

static pid_t spawn_client(client_fn fn, int index, int in, int out)
{
	pid_t pid = fork();

	CHECK(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0) {
		struct ngnfs_fs *fs;

		test_mark_child();
		alarm(CHILD_TIMEOUT_S);
		fs = mount_fs(NGNFS_MOUNT_STABLE);
		fn(fs, index, in, out);
		ngnfs_unmount(fs);
		_exit(0);
	}
	return pid;
}

static void wait_client(pid_t pid, const char *what)
{
	int status;

	CHECK(waitpid(pid, &status, 0) == pid, "waitpid: %s", strerror(errno));
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	      "client %s: expected exit status 0, got %s %d", what,
	      WIFEXITED(status) ? "exit status" : "signal",
	      WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
}

static struct ngnfs_handle dir_named(struct ngnfs_fs *fs, const char *name)
{
	struct ngnfs_handle root = root_of(fs), dir;

	EXPECT_RET(lookup(fs, &root, name, &dir), 0);
	return dir;
}

/* ---- two_clients_see_each_other ---- */

#define LOCKSTEP_ROUNDS 20

static void lockstep_client(struct ngnfs_fs *fs, int index, int in, int out)
{
	struct ngnfs_handle shared = dir_named(fs, "shared"), found;
	struct ngnfs_attr attr;
	char name[64], other[64];
	int round;

	for (round = 0; round < LOCKSTEP_ROUNDS; round++) {
		if (index == 1 || round > 0)
			receive_byte(in);
		/* the other client's work of the previous step must be visible */
		if (index == 1 || round > 0) {
			int other_round = index == 1 ? round : round - 1;

			snprintf(other, sizeof(other), "c%d-r%d", 1 - index, other_round);
			EXPECT_RET(lookup(fs, &shared, other, &found), 0);
			attr = attr_of(fs, &found);
			CHECK(attr.size == 0 && (attr.mode & S_IFMT) == S_IFREG,
			      "client %d: %s has unexpected attributes", index, other);
			snprintf(other, sizeof(other), "c%d-gone%d", 1 - index, other_round);
			EXPECT_RET(lookup(fs, &shared, other, NULL), -ENOENT);
			snprintf(other, sizeof(other), "c%d-renamed%d", 1 - index, other_round);
			EXPECT_RET(lookup(fs, &shared, other, NULL), 0);
		}
		snprintf(name, sizeof(name), "c%d-r%d", index, round);
		make(fs, &shared, name, S_IFREG | 0644);
		snprintf(name, sizeof(name), "c%d-gone%d", index, round);
		make(fs, &shared, name, S_IFREG | 0644);
		EXPECT_RET(ngnfs_unlink(fs, &shared, name), 0);
		snprintf(name, sizeof(name), "c%d-tmp%d", index, round);
		make(fs, &shared, name, S_IFREG | 0644);
		snprintf(other, sizeof(other), "c%d-renamed%d", index, round);
		EXPECT_RET(ngnfs_rename(fs, &shared, name, &shared, other), 0);
		send_byte(out, 'x');
	}
	if (index == 0)
		receive_byte(in);
}

void test_two_clients_see_each_other(void)
{
	struct ngnfs_fs *fs;
	struct ngnfs_handle root, shared;
	struct listing listing;
	int a_to_b[2], b_to_a[2];
	pid_t a, b;

	start_backend_mkfs(2, "two-clients");
	fs = mount_fs(NGNFS_MOUNT_STABLE);
	root = root_of(fs);
	shared = make(fs, &root, "shared", S_IFDIR | 0755);
	ngnfs_unmount(fs);

	CHECK(pipe(a_to_b) == 0 && pipe(b_to_a) == 0, "pipe");
	a = spawn_client(lockstep_client, 0, b_to_a[0], a_to_b[1]);
	b = spawn_client(lockstep_client, 1, a_to_b[0], b_to_a[1]);
	wait_client(a, "A");
	wait_client(b, "B");

	fs = mount_fs(NGNFS_MOUNT_STABLE);
	list_all(fs, &shared, &listing);
	CHECK(listing.count == 2 * 2 * LOCKSTEP_ROUNDS,
	      "shared directory: expected %d entries, got %zu", 4 * LOCKSTEP_ROUNDS, listing.count);
	listing_free(&listing);
	check_fsck_clean(fs);
	ngnfs_unmount(fs);
	stop_backend();
}

/* ---- concurrent_renames_two_clients ---- */

/*
 * Per client: RENAME_THREADS threads move their own entries between x and
 * y, CHURN_THREADS threads create and unlink in both.  Neighbouring threads
 * and the two clients start in opposite directions, so at any moment some
 * rename locks x then y while another (here or in the other process) locks
 * y then x: if an operation held a block while waiting for another one,
 * this deadlocks (the children's alarm() fails the test).  The last entry
 * of each rename thread is a directory, so every rename of it also moves a
 * ".." and changes both parents' link counts.
 */
#define RENAME_THREADS 6
#define CHURN_THREADS  2
#define RENAME_FILES   4  /* the last one is a directory */
#define RENAME_ROUNDS  5  /* odd: every entry ends on the other side */
#define CHURN_FILES    30 /* every third one survives */

struct rename_thread {
	struct ngnfs_fs *fs;
	int client;
	int thread;
	int failures;
	char message[256];
};

/* Which directory an entry of this thread starts in: 0 is x, 1 is y. */
static int rename_start_side(int client, int thread)
{
	return (client + thread) % 2;
}

static bool rename_is_dir(int file)
{
	return file == RENAME_FILES - 1;
}

static void rename_name(char *name, size_t size, int client, int thread, int file)
{
	snprintf(name, size, "%c%d-%d-%d", rename_is_dir(file) ? 'd' : 'm', client, thread, file);
}

static void churn_name(char *name, size_t size, int client, int thread, int file)
{
	snprintf(name, size, "churn%d-%d-%d", client, thread, file);
}

static void *rename_worker(void *arg)
{
	struct rename_thread *worker = arg;
	struct ngnfs_handle dirs[2] = { dir_named(worker->fs, "x"), dir_named(worker->fs, "y") };
	int side = rename_start_side(worker->client, worker->thread);
	char name[64];
	int round, file, ret;

	for (round = 0; round < RENAME_ROUNDS; round++) {
		for (file = 0; file < RENAME_FILES; file++) {
			rename_name(name, sizeof(name), worker->client, worker->thread, file);
			ret = ngnfs_rename(worker->fs, &dirs[side], name, &dirs[1 - side], name);
			if (ret < 0 && !worker->failures++)
				snprintf(worker->message, sizeof(worker->message),
					 "rename %s round %d: %d (%s)", name, round, ret,
					 ngnfs_last_error());
		}
		side = 1 - side;
	}
	return NULL;
}

static void *churn_worker(void *arg)
{
	struct rename_thread *worker = arg;
	struct ngnfs_handle dirs[2] = { dir_named(worker->fs, "x"), dir_named(worker->fs, "y") };
	char name[64];
	int file, ret;

	for (file = 0; file < CHURN_FILES; file++) {
		struct ngnfs_handle *dir = &dirs[(file + worker->client) % 2];

		churn_name(name, sizeof(name), worker->client, worker->thread, file);
		ret = ngnfs_create(worker->fs, dir, name, S_IFREG | 0644, 0, 0, 0, NULL, NULL);
		if (ret == 0 && file % 3 != 0)
			ret = ngnfs_unlink(worker->fs, dir, name);
		if (ret < 0 && !worker->failures++)
			snprintf(worker->message, sizeof(worker->message), "churn %s: %d (%s)",
				 name, ret, ngnfs_last_error());
	}
	return NULL;
}

static void rename_client(struct ngnfs_fs *fs, int index, int in, int out)
{
	struct rename_thread workers[RENAME_THREADS + CHURN_THREADS];
	pthread_t threads[RENAME_THREADS + CHURN_THREADS];
	int i;

	(void)out;
	receive_byte(in); /* start together */
	for (i = 0; i < RENAME_THREADS + CHURN_THREADS; i++) {
		memset(&workers[i], 0, sizeof(workers[i]));
		workers[i].fs = fs;
		workers[i].client = index;
		workers[i].thread = i < RENAME_THREADS ? i : i - RENAME_THREADS;
		CHECK(pthread_create(&threads[i], NULL,
				     i < RENAME_THREADS ? rename_worker : churn_worker,
				     &workers[i]) == 0,
		      "pthread_create");
	}
	for (i = 0; i < RENAME_THREADS + CHURN_THREADS; i++) {
		pthread_join(threads[i], NULL);
		CHECK(workers[i].failures == 0, "client %d thread %d: %d failures, first: %s",
		      index, i, workers[i].failures, workers[i].message);
	}
}

static int compare_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/*
 * The listing of dir holds exactly the expected names, once each, and its
 * link count is 2 plus its subdirectories.
 */
static void check_rename_dir(struct ngnfs_fs *fs, const struct ngnfs_handle *dir, const char *what,
			     char **expected, size_t expected_count, unsigned int subdirs)
{
	struct listing listing;
	struct ngnfs_attr attr = attr_of(fs, dir);
	size_t i;

	list_all(fs, dir, &listing);
	qsort(listing.names, listing.count, sizeof(listing.names[0]), compare_names);
	qsort(expected, expected_count, sizeof(expected[0]), compare_names);
	for (i = 1; i < listing.count; i++)
		CHECK(strcmp(listing.names[i - 1], listing.names[i]) != 0, "%s lists \"%s\" twice",
		      what, listing.names[i]);
	CHECK(listing.count == expected_count, "%s: expected %zu entries, got %zu", what,
	      expected_count, listing.count);
	for (i = 0; i < expected_count; i++)
		CHECK(strcmp(listing.names[i], expected[i]) == 0,
		      "%s: expected entry \"%s\", listed \"%s\"", what, expected[i],
		      listing.names[i]);
	CHECK(attr.nlink == 2 + subdirs, "%s: expected %u links (2 + %u subdirectories), got %u",
	      what, 2 + subdirs, subdirs, attr.nlink);
	listing_free(&listing);
}

void test_concurrent_renames_two_clients(void)
{
	enum { ENTRIES = 2 * RENAME_THREADS * RENAME_FILES + 2 * CHURN_THREADS * CHURN_FILES };
	static uint64_t inos[2][RENAME_THREADS][RENAME_FILES];
	char *expected[2][ENTRIES];
	size_t expected_count[2] = { 0, 0 };
	unsigned int subdirs[2] = { 0, 0 };
	struct ngnfs_handle root, dirs[2], found, parent;
	struct ngnfs_attr attr;
	struct ngnfs_fs *fs;
	struct timespec start, end;
	int go[2], client, thread, file, side, found_in;
	char name[64];
	pid_t pids[2];

	start_backend_mkfs(3, "renames");
	fs = mount_fs(NGNFS_MOUNT_STABLE);
	root = root_of(fs);
	dirs[0] = make(fs, &root, "x", S_IFDIR | 0755);
	dirs[1] = make(fs, &root, "y", S_IFDIR | 0755);
	for (client = 0; client < 2; client++)
		for (thread = 0; thread < RENAME_THREADS; thread++)
			for (file = 0; file < RENAME_FILES; file++) {
				rename_name(name, sizeof(name), client, thread, file);
				inos[client][thread][file] =
				    make(fs, &dirs[rename_start_side(client, thread)], name,
					 rename_is_dir(file) ? S_IFDIR | 0755 : S_IFREG | 0644)
					.ino;
			}
	ngnfs_unmount(fs);

	CHECK(pipe(go) == 0, "pipe");
	for (client = 0; client < 2; client++)
		pids[client] = spawn_client(rename_client, client, go[0], -1);
	clock_gettime(CLOCK_MONOTONIC, &start);
	send_byte(go[1], 'g');
	send_byte(go[1], 'g');
	wait_client(pids[0], "0");
	wait_client(pids[1], "1");
	clock_gettime(CLOCK_MONOTONIC, &end);
	TEST_LOG("%d renames, %d creates and %d unlinks in two clients of %d threads took %.2f s",
		 2 * RENAME_THREADS * RENAME_FILES * RENAME_ROUNDS, 2 * CHURN_THREADS * CHURN_FILES,
		 2 * CHURN_THREADS * (CHURN_FILES - (CHURN_FILES + 2) / 3),
		 RENAME_THREADS + CHURN_THREADS,
		 (double)(end.tv_sec - start.tv_sec) + (end.tv_nsec - start.tv_nsec) / 1e9);

	fs = mount_fs(NGNFS_MOUNT_STABLE);
	/* every renamed entry is in exactly one place, the other side, and is
	 * the inode it was: nothing lost, duplicated or replaced */
	for (client = 0; client < 2; client++)
		for (thread = 0; thread < RENAME_THREADS; thread++)
			for (file = 0; file < RENAME_FILES; file++) {
				side = 1 - rename_start_side(client, thread);
				rename_name(name, sizeof(name), client, thread, file);
				found_in = 0;
				if (lookup(fs, &dirs[1 - side], name, NULL) == 0)
					found_in++;
				EXPECT_RET(lookup(fs, &dirs[side], name, &found), 0);
				CHECK(found_in == 0, "%s is in both directories", name);
				CHECK(found.ino == inos[client][thread][file],
				      "%s: expected inode %llu, found %llu", name,
				      (unsigned long long)inos[client][thread][file],
				      (unsigned long long)found.ino);
				attr = attr_of(fs, &found);
				if (rename_is_dir(file)) {
					CHECK((attr.mode & S_IFMT) == S_IFDIR && attr.nlink == 2,
					      "%s: expected an empty directory with 2 links, got "
					      "mode %o nlink %u",
					      name, attr.mode, attr.nlink);
					EXPECT_RET(lookup(fs, &found, "..", &parent), 0);
					CHECK(parent.ino == dirs[side].ino,
					      "%s: \"..\" is inode %llu, not its directory", name,
					      (unsigned long long)parent.ino);
					subdirs[side]++;
				} else {
					CHECK(
					    (attr.mode & S_IFMT) == S_IFREG && attr.nlink == 1,
					    "%s: expected a file with 1 link, got mode %o nlink %u",
					    name, attr.mode, attr.nlink);
				}
				expected[side][expected_count[side]++] = strdup(name);
			}
	for (client = 0; client < 2; client++)
		for (thread = 0; thread < CHURN_THREADS; thread++)
			for (file = 0; file < CHURN_FILES; file++) {
				side = (file + client) % 2;
				churn_name(name, sizeof(name), client, thread, file);
				if (file % 3 != 0) {
					EXPECT_RET(lookup(fs, &dirs[side], name, NULL), -ENOENT);
					continue;
				}
				EXPECT_RET(lookup(fs, &dirs[side], name, &found), 0);
				attr = attr_of(fs, &found);
				CHECK((attr.mode & S_IFMT) == S_IFREG && attr.nlink == 1,
				      "%s: expected a file with 1 link, got mode %o nlink %u", name,
				      attr.mode, attr.nlink);
				expected[side][expected_count[side]++] = strdup(name);
			}
	check_rename_dir(fs, &dirs[0], "x", expected[0], expected_count[0], subdirs[0]);
	check_rename_dir(fs, &dirs[1], "y", expected[1], expected_count[1], subdirs[1]);
	for (side = 0; side < 2; side++)
		while (expected_count[side])
			free(expected[side][--expected_count[side]]);
	check_fsck_clean(fs);
	ngnfs_unmount(fs);
	stop_backend();
}

/* ---- rename_subtree_race ---- */

#define SUBTREE_RACES 10

static void subtree_client(struct ngnfs_fs *fs, int index, int in, int out)
{
	struct ngnfs_handle root = root_of(fs), p, q;
	char pname[32], qname[32];
	int race, ret;

	for (race = 0; race < SUBTREE_RACES; race++) {
		snprintf(pname, sizeof(pname), "p%d", race);
		snprintf(qname, sizeof(qname), "q%d", race);
		EXPECT_RET(lookup(fs, &root, pname, &p), 0);
		EXPECT_RET(lookup(fs, &root, qname, &q), 0);
		send_byte(out, 'r');
		receive_byte(in);
		/* client 0: p into q; client 1: q into p */
		if (index == 0)
			ret = ngnfs_rename(fs, &root, pname, &q, pname);
		else
			ret = ngnfs_rename(fs, &root, qname, &p, qname);
		send_byte(out, ret == 0 ? 'y' : ret == -EINVAL || ret == -ENOENT ? 'n' : 'e');
	}
}

void test_rename_subtree_race(void)
{
	struct ngnfs_handle root, p, q, found;
	struct ngnfs_fs *fs;
	struct channel channels[2];
	char pname[32], qname[32], answers[2];
	int race, client, successes = 0;
	pid_t pids[2];

	start_backend_mkfs(2, "subtree-race");
	fs = mount_fs(NGNFS_MOUNT_STABLE);
	root = root_of(fs);
	for (race = 0; race < SUBTREE_RACES; race++) {
		snprintf(pname, sizeof(pname), "p%d", race);
		snprintf(qname, sizeof(qname), "q%d", race);
		make(fs, &root, pname, S_IFDIR | 0755);
		make(fs, &root, qname, S_IFDIR | 0755);
	}
	ngnfs_unmount(fs);

	for (client = 0; client < 2; client++) {
		channel_open(&channels[client]);
		pids[client] = spawn_client(subtree_client, client, channels[client].to_child[0],
					    channels[client].to_parent[1]);
	}
	for (race = 0; race < SUBTREE_RACES; race++) {
		CHECK(receive_byte(channels[0].to_parent[0]) == 'r', "client 0 not ready");
		CHECK(receive_byte(channels[1].to_parent[0]) == 'r', "client 1 not ready");
		send_byte(channels[0].to_child[1], 'g');
		send_byte(channels[1].to_child[1], 'g');
		answers[0] = receive_byte(channels[0].to_parent[0]);
		answers[1] = receive_byte(channels[1].to_parent[0]);
		CHECK(answers[0] != 'e' && answers[1] != 'e',
		      "race %d: a rename failed with an unexpected error", race);
		CHECK(!(answers[0] == 'y' && answers[1] == 'y'),
		      "race %d: both renames succeeded: p and q are now inside each other", race);
		successes += (answers[0] == 'y') + (answers[1] == 'y');
	}
	wait_client(pids[0], "0");
	wait_client(pids[1], "1");
	TEST_LOG("%d races: %d renames won, %d refused", SUBTREE_RACES, successes,
		 2 * SUBTREE_RACES - successes);
	CHECK(successes == SUBTREE_RACES, "expected exactly one winner per race, got %d in %d",
	      successes, SUBTREE_RACES);

	fs = mount_fs(NGNFS_MOUNT_STABLE);
	for (race = 0; race < SUBTREE_RACES; race++) {
		snprintf(pname, sizeof(pname), "p%d", race);
		snprintf(qname, sizeof(qname), "q%d", race);
		/* exactly one of them is still at the root, holding the other */
		if (lookup(fs, &root, pname, &p) == 0) {
			EXPECT_RET(lookup(fs, &p, qname, &found), 0);
			EXPECT_RET(lookup(fs, &root, qname, NULL), -ENOENT);
		} else {
			EXPECT_RET(lookup(fs, &root, qname, &q), 0);
			EXPECT_RET(lookup(fs, &q, pname, &found), 0);
		}
	}
	check_fsck_clean(fs);
	ngnfs_unmount(fs);
	stop_backend();
}

/* ---- the admin tool against real blockd ---- */

static void run_tool(const char *const *argv, int expected_status, const char *output, char **text)
{
	int status;

	CHECK(ngnfs_test_run(argv, output, 60000, &status) == 0, "running %s %s failed", argv[0],
	      argv[1]);
	*text = ngnfs_test_read_file(output, NULL);
	CHECK(*text, "no output from ngnfs %s", argv[1]);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == expected_status,
	      "ngnfs %s: expected exit status %d, got %d; output:\n%s", argv[1], expected_status,
	      WIFEXITED(status) ? WEXITSTATUS(status) : -1, *text);
}

/* run_tool, then check that the output holds both needles (the second may be NULL). */
static void run_tool_expect(const char *const *argv, int expected_status, const char *output,
			    const char *needle, const char *also, const char *what)
{
	char *text;

	run_tool(argv, expected_status, output, &text);
	CHECK(strstr(text, needle) && (!also || strstr(text, also)),
	      "%s: expected \"%s\"%s%s%s, got:\n%s", what, needle, also ? " and \"" : "",
	      also ? also : "", also ? "\"" : "", text);
	free(text);
}

/*
 * tool_commands: ngnfs mkfs formats the devices (and refuses to format
 * them again), ngnfs ls lists what a client created, ngnfs stat shows a
 * line per device with what ngnfs_statfs_device says of it, and a path,
 * ngnfs fsck passes on it, and every command has --help.
 */
void test_tool_commands(void)
{
	const char *tool = getenv("NGNFS_TOOL");
	char output[4096], *text;
	struct ngnfs_statfs_device device_statfs[2], missing_device;
	struct ngnfs_handle root, dir;
	struct ngnfs_fs *fs;
	const char *manifest;
	uint16_t device;

	CHECK(tool, "NGNFS_TOOL is not set (the ngnfs tool is not built)");
	{
		const char *argv[] = { tool, "fsck", "--help", NULL };

		snprintf(output, sizeof(output), "/tmp/ngnfs-tool-%d.out", (int)getpid());
		run_tool(argv, 0, output, &text);
		CHECK(strstr(text, "usage: ngnfs fsck"), "fsck --help: no usage text:\n%s", text);
		free(text);
	}
	start_backend_unformatted(2, "tool");
	manifest = test_manifest_path();
	{
		const char *argv[] = { tool, "mkfs", "--devices", manifest, NULL };

		run_tool(argv, 0, output, &text);
		CHECK(strstr(text, "formatting device 2 of 2") && strstr(text, "fs id "),
		      "mkfs: expected progress and the fs id, got:\n%s", text);
		free(text);
		run_tool(argv, 1, output, &text);
		CHECK(strstr(text, "already formatted"),
		      "second mkfs: expected a refusal, got:\n%s", text);
		free(text);
	}
	fs = mount_fs(NGNFS_MOUNT_STABLE);
	root = root_of(fs);
	dir = make(fs, &root, "projects", S_IFDIR | 0755);
	make(fs, &dir, "tape-0001.dat", S_IFREG | 0644);
	for (device = 0; device < 2; device++) {
		EXPECT_RET(ngnfs_statfs_device(fs, device, &device_statfs[device]), 0);
		CHECK(device_statfs[device].total_blocks > 0 &&
			  device_statfs[device].free_blocks < device_statfs[device].total_blocks &&
			  device_statfs[device].staged_sets == 0,
		      "device %u: expected some blocks in use and no staged sets, got %llu total, "
		      "%llu free, %llu staged",
		      device, (unsigned long long)device_statfs[device].total_blocks,
		      (unsigned long long)device_statfs[device].free_blocks,
		      (unsigned long long)device_statfs[device].staged_sets);
	}
	EXPECT_RET(ngnfs_statfs_device(fs, 2, &missing_device), -EINVAL);
	{
		/* a stable create is durable when it returns: some device synced for it */
		uint64_t commits_before = 0, commits_after = 0, requests_after = 0;
		struct ngnfs_statfs_device now;

		for (device = 0; device < 2; device++)
			commits_before += device_statfs[device].group_commits;
		make(fs, &dir, "tape-0002.dat", S_IFREG | 0644);
		for (device = 0; device < 2; device++) {
			EXPECT_RET(ngnfs_statfs_device(fs, device, &now), 0);
			commits_after += now.group_commits;
			requests_after += now.commit_requests;
		}
		CHECK(commits_after > commits_before && requests_after >= commits_after,
		      "a stable create: expected more group commits than %llu and at least as "
		      "many requests, got %llu commits of %llu requests",
		      (unsigned long long)commits_before, (unsigned long long)commits_after,
		      (unsigned long long)requests_after);
	}
	ngnfs_unmount(fs);
	{
		const char *argv[] = { tool, "stat", "--devices", manifest, NULL };
		char line[256];

		run_tool(argv, 0, output, &text);
		for (device = 0; device < 2; device++) {
			snprintf(line, sizeof(line), "device %-5u %s: %llu blocks, ", device,
				 test_addresses()[device],
				 (unsigned long long)device_statfs[device].total_blocks);
			CHECK(strstr(text, line), "stat: expected a line starting \"%s\", got:\n%s",
			      line, text);
		}
		CHECK(strstr(text, "0 sets staged, 1 clients"),
		      "stat: expected staged sets and the tool as the one client, got:\n%s", text);
		free(text);
	}
	{
		const char *argv[] = { tool, "ls", "--devices", manifest, "/projects", NULL };

		run_tool(argv, 0, output, &text);
		CHECK(strstr(text, "tape-0001.dat"), "ls: expected the file, got:\n%s", text);
		free(text);
	}
	{
		const char *argv[] = { tool, "stat", "--devices", manifest, "/projects", NULL };

		run_tool(argv, 0, output, &text);
		CHECK(strstr(text, "type         dir") && strstr(text, "links        2"),
		      "stat: expected a directory with 2 links, got:\n%s", text);
		free(text);
	}
	{
		const char *argv[] = { tool, "fsck", "--devices", manifest, NULL };

		run_tool(argv, 0, output, &text);
		CHECK(strstr(text, ": 0 problems"), "fsck: expected 0 problems, got:\n%s", text);
		free(text);
	}
	unlink(output);
	stop_backend();
}

/* run_tool, then check that the output is value (size bytes) and nothing else. */
static void run_tool_value(const char *const *argv, const char *output, const void *value,
			   size_t size)
{
	size_t length;
	char *text;

	run_tool(argv, 0, output, &text);
	free(text);
	text = ngnfs_test_read_file(output, &length);
	CHECK(text && length == size && memcmp(text, value, size) == 0,
	      "ngnfs xattr %s %s: expected the %zu bytes of the value and nothing else, got %zu "
	      "bytes",
	      argv[4], argv[5], size, length);
	free(text);
}

/*
 * tool_xattr: ngnfs xattr reads what the archive agent recorded without a
 * gateway: the names and sizes of a file's xattrs, and each value byte for
 * byte (text, binary with NULs, and a 64 KiB one kept in value blocks),
 * while the client that set them stays mounted; a value that client then
 * changes reads back changed.  A missing name or path is exit 1 naming
 * it, a missing PATH or an extra argument exit 2, and a file without
 * xattrs lists nothing.
 */
void test_tool_xattr(void)
{
	static const char location[] = "tape=A00042 file=17 block=90210";
	static const char moved[] = "tape=B00007 file=3 block=12";
	static const uint8_t checksum[20] = { 0x00, 0xff, 0x10, 0x00, 0x7f, 0x80, 0x0a,
					      0x09, 0x00, 0x00, 0x01, 0x02, 0x03, 0xfe,
					      0xfd, 0x00, 0x41, 0x42, 0x43, 0x00 };
	const char *tool = getenv("NGNFS_TOOL");
	const char *path = "/archive/tape-0001.dat";
	struct ngnfs_handle root, dir, file;
	char output[256], *bulk;
	const char *manifest;
	struct ngnfs_fs *fs;
	size_t i;

	CHECK(tool, "NGNFS_TOOL is not set (the ngnfs tool is not built)");
	snprintf(output, sizeof(output), "/tmp/ngnfs-tool-xattr-%d.out", (int)getpid());
	start_backend_mkfs(2, "tool-xattr");
	manifest = test_manifest_path();
	bulk = malloc(NGNFS_XATTR_VALUE_MAX);
	CHECK(bulk, "out of memory");
	for (i = 0; i < NGNFS_XATTR_VALUE_MAX; i++)
		bulk[i] = (char)(i * 7 + i / 4096);
	fs = mount_fs(NGNFS_MOUNT_STABLE);
	root = root_of(fs);
	dir = make(fs, &root, "archive", S_IFDIR | 0755);
	file = make(fs, &dir, "tape-0001.dat", S_IFREG | 0644);
	make(fs, &dir, "plain.dat", S_IFREG | 0644);
	EXPECT_RET(
	    ngnfs_setxattr(fs, &file, "user.archive.location", location, sizeof(location) - 1, 0),
	    0);
	EXPECT_RET(
	    ngnfs_setxattr(fs, &file, "user.archive.checksum", checksum, sizeof(checksum), 0), 0);
	EXPECT_RET(ngnfs_setxattr(fs, &file, "user.archive.bulk", bulk, NGNFS_XATTR_VALUE_MAX, 0),
		   0);
	{
		const char *argv[] = { tool, "xattr", "--devices", manifest, path, NULL };

		run_tool_expect(argv, 0, output, "31\tuser.archive.location\n",
				"20\tuser.archive.checksum\n", "xattr listing");
		run_tool_expect(argv, 0, output, "65536\tuser.archive.bulk\n", NULL,
				"xattr listing of a value in value blocks");
	}
	{
		const char *argv[] = { tool,	 "xattr", "--devices",
				       manifest, path,	  "user.archive.location",
				       NULL };

		run_tool_value(argv, output, location, sizeof(location) - 1);
		/* the mounted client changes it: the tool's next read sees the change */
		EXPECT_RET(ngnfs_setxattr(fs, &file, "user.archive.location", moved,
					  sizeof(moved) - 1, XATTR_REPLACE),
			   0);
		run_tool_value(argv, output, moved, sizeof(moved) - 1);
	}
	{
		const char *argv[] = { tool,	 "xattr", "--devices",
				       manifest, path,	  "user.archive.checksum",
				       NULL };

		run_tool_value(argv, output, checksum, sizeof(checksum));
	}
	{
		const char *argv[] = { tool,	 "xattr", "--devices",
				       manifest, path,	  "user.archive.bulk",
				       NULL };

		run_tool_value(argv, output, bulk, NGNFS_XATTR_VALUE_MAX);
	}
	{
		const char *argv[] = { tool,	 "xattr", "--devices",
				       manifest, path,	  "user.archive.none",
				       NULL };

		run_tool_expect(argv, 1, output, "user.archive.none", "No data available",
				"a missing xattr");
	}
	{
		const char *argv[] = { tool, "xattr", "--devices", manifest, "/archive/gone.dat",
				       NULL };

		run_tool_expect(argv, 1, output, "/archive/gone.dat", "No such file or directory",
				"a missing path");
	}
	{
		const char *argv[] = { tool, "xattr", "--devices", manifest, "/archive/plain.dat",
				       NULL };
		size_t length;
		char *text;

		run_tool(argv, 0, output, &text);
		free(text);
		text = ngnfs_test_read_file(output, &length);
		CHECK(text && length == 0,
		      "a file without xattrs: expected no output, got %zu bytes", length);
		free(text);
	}
	{
		const char *no_path[] = { tool, "xattr", "--devices", manifest, NULL };
		const char *extra[] = { tool,	  "xattr", "--devices",
					manifest, path,	   "user.archive.location",
					"more",	  NULL };

		run_tool_expect(no_path, 2, output, "PATH is required", "usage: ngnfs xattr",
				"xattr without PATH");
		run_tool_expect(extra, 2, output, "unexpected argument \"more\"", NULL,
				"xattr with an extra argument");
	}
	free(bulk);
	ngnfs_unmount(fs);
	unlink(output);
	stop_backend();
}

/* Blocks in use over all devices: neither free nor reserved by a client. */
static uint64_t used_blocks(struct ngnfs_fs *fs)
{
	struct ngnfs_statfs_device statfs;
	uint64_t used = 0;
	uint16_t device;

	for (device = 0; device < test_device_count(); device++) {
		EXPECT_RET(ngnfs_statfs_device(fs, device, &statfs), 0);
		used += statfs.total_blocks - statfs.free_blocks - statfs.reserved_blocks;
	}
	return used;
}

/*
 * add_devices: a filesystem made on two of three blockd grows to three
 * with `ngnfs add-devices`.  Refused while a client is connected; then
 * the third device is formatted, a mount with the old list is refused
 * naming the count, a mount with the new one finds the old files and
 * puts new directories on the new device, which reads back after a
 * remount; statfs counts it, fsck is clean, and a second run adds nothing.
 */
void test_add_devices(void)
{
	const char *tool = getenv("NGNFS_TOOL");
	struct ngnfs_mkfs_options mkfs = { 0 };
	struct ngnfs_mount_options old_list = { .durability = NGNFS_MOUNT_STABLE };
	struct ngnfs_handle root, file, dir;
	struct ngnfs_statfs whole;
	struct ngnfs_statfs_device device_statfs;
	char output[256], name[32], buffer[16];
	uint64_t three_devices = 0;
	struct ngnfs_fs *fs, *old;
	bool eof;
	int i;

	CHECK(tool, "NGNFS_TOOL is not set (the ngnfs tool is not built)");
	snprintf(output, sizeof(output), "/tmp/ngnfs-add-devices-%d.out", (int)getpid());
	start_backend_unformatted(3, "add-devices");
	mkfs.device_addresses = test_addresses();
	mkfs.device_count = 2;
	EXPECT_RET(ngnfs_mkfs(&mkfs, NULL), 0);
	old_list.device_addresses = test_addresses();
	old_list.device_count = 2;
	EXPECT_RET(ngnfs_mount(&old_list, &old), 0);
	root = root_of(old);
	file = make(old, &root, "tape-index", S_IFREG | 0644);
	EXPECT_RET(ngnfs_write(old, &file, 0, "vol 12", 6, NGNFS_WRITE_MOUNT), 6);
	{
		const char *argv[] = { tool, "add-devices", "--devices", test_manifest_path(),
				       NULL };

		run_tool_expect(argv, 1, output, "other client sessions are connected",
				"stop every gateway first", "add-devices beside a mounted client");
		ngnfs_unmount(old);
		run_tool_expect(argv, 0, output, "formatting device 2", "1 devices added, 3 in",
				"add-devices");
		run_tool_expect(argv, 0, output, "nothing to add", "0 devices added, 3 in",
				"add-devices again");
	}
	EXPECT_RET(ngnfs_mount(&old_list, &old), -EINVAL);
	CHECK(strstr(ngnfs_last_error(), "filesystem has 3 devices but 2 addresses"),
	      "mount with the old device list: expected the count named, got \"%s\"",
	      ngnfs_last_error());

	fs = mount_fs(NGNFS_MOUNT_STABLE);
	root = root_of(fs);
	EXPECT_RET(ngnfs_read(fs, &file, 0, buffer, sizeof(buffer), &eof), 6);
	CHECK(memcmp(buffer, "vol 12", 6) == 0, "the file from before reads back otherwise");
	for (i = 0; i < 200; i++) {
		snprintf(name, sizeof(name), "dir-%d", i);
		dir = make(fs, &root, name, S_IFDIR | 0755);
		if (ngnfs_blkno_device(dir.ino) == 2)
			break;
	}
	CHECK(i < 200, "none of 200 new directories went to the new device 2");
	file = make(fs, &dir, "on-the-new-device", S_IFREG | 0644);
	EXPECT_RET(ngnfs_write(fs, &file, 0, "vol 13", 6, NGNFS_WRITE_MOUNT), 6);
	ngnfs_unmount(fs);
	fs = mount_fs(NGNFS_MOUNT_STABLE);
	EXPECT_RET(lookup(fs, &dir, "on-the-new-device", &file), 0);
	EXPECT_RET(ngnfs_read(fs, &file, 0, buffer, sizeof(buffer), &eof), 6);
	CHECK(memcmp(buffer, "vol 13", 6) == 0 && ngnfs_blkno_device(file.ino) == 2,
	      "the file on the new device reads back otherwise");
	for (unsigned int device = 0; device < 3; device++) {
		EXPECT_RET(ngnfs_statfs_device(fs, (uint16_t)device, &device_statfs), 0);
		three_devices += device_statfs.total_blocks;
	}
	EXPECT_RET(ngnfs_statfs(fs, &whole), 0);
	CHECK(whole.device_count == 3 && whole.total_blocks == three_devices,
	      "statfs: expected 3 devices of %llu blocks, got %u of %llu",
	      (unsigned long long)three_devices, whole.device_count,
	      (unsigned long long)whole.total_blocks);
	check_fsck_clean(fs);
	ngnfs_unmount(fs);
	unlink(output);
	stop_backend();
}

/* Asks the reclaim to stop once it has freed one orphan (an export being stopped). */
static void stop_after_first_free(void *arg, bool problem, const char *line)
{
	atomic_bool *stop = arg;

	(void)problem;
	if (strstr(line, " freed"))
		atomic_store(stop, true);
}

/* A client that connects as soon as the first orphan is freed (a gateway starting meanwhile). */
struct late_client {
	struct ngnfs_fs *fs;
	unsigned int freed_lines;
	bool refusal_named;
};

static void connect_after_first_free(void *arg, bool problem, const char *line)
{
	struct late_client *late = arg;

	if (strstr(line, " freed"))
		late->freed_lines++;
	if (problem && strstr(line, "other client connected"))
		late->refusal_named = true;
	if (late->freed_lines == 1 && !late->fs)
		late->fs = mount_fs(NGNFS_MOUNT_STABLE);
}

/*
 * Runs `ngnfs reclaim-orphans` with its output into a pipe of one page
 * that is not read until the tool has written some: the tool then blocks
 * on its output after a few hundred orphans, so the SIGINT surely comes
 * in the middle of the run.  Returns the whole output; *status is the
 * tool's wait status.
 */
static char *reclaim_interrupted(const char *tool, const char *manifest, int *status)
{
	const char *argv[] = { tool, "reclaim-orphans", "--devices", manifest, NULL };
	struct pollfd readable;
	size_t length = 0, size = 1 << 16;
	char *text = malloc(size);
	int fds[2];
	ssize_t got;
	pid_t pid;

	CHECK(text, "out of memory");
	CHECK(pipe(fds) == 0, "pipe: %s", strerror(errno));
	CHECK(fcntl(fds[1], F_SETPIPE_SZ, 4096) >= 0, "F_SETPIPE_SZ: %s", strerror(errno));
	pid = fork();
	CHECK(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0) {
		dup2(fds[1], STDOUT_FILENO);
		dup2(fds[1], STDERR_FILENO);
		close(fds[0]);
		close(fds[1]);
		execv(tool, (char *const *)argv);
		_exit(127);
	}
	close(fds[1]);
	readable = (struct pollfd){ .fd = fds[0], .events = POLLIN };
	CHECK(poll(&readable, 1, 60000) == 1, "reclaim-orphans wrote nothing in 60 s");
	CHECK(kill(pid, SIGINT) == 0, "SIGINT to reclaim-orphans: %s", strerror(errno));
	while ((got = read(fds[0], text + length, size - 1 - length)) > 0) {
		length += (size_t)got;
		if (length == size - 1) {
			size *= 2;
			text = realloc(text, size);
			CHECK(text, "out of memory");
		}
	}
	close(fds[0]);
	text[length] = '\0';
	CHECK(waitpid(pid, status, 0) == pid, "waitpid: %s", strerror(errno));
	return text;
}

/* Leaves count unlinked files open, crashes (no closes) and mounts again. */
static struct ngnfs_fs *crash_with_orphans(struct ngnfs_fs *fs, const struct ngnfs_handle *root,
					   const char *prefix, int count)
{
	char name[64];

	for (int i = 0; i < count; i++) {
		struct ngnfs_handle file;

		snprintf(name, sizeof(name), "%s-%d", prefix, i);
		file = make(fs, root, name, S_IFREG | 0644);
		EXPECT_RET(ngnfs_open(fs, &file), 0);
		EXPECT_RET(ngnfs_unlink(fs, root, name), 0);
	}
	ngnfs_unmount(fs);
	return mount_fs(NGNFS_MOUNT_STABLE);
}

/*
 * orphans_reclaimed_after_crash: a gateway that stops with a file still
 * open after its last name went (an unmount without the close is what a
 * crash leaves behind) leaves an orphan that nothing frees.  `ngnfs
 * reclaim-orphans` refuses while any other client is connected (that
 * client may still have the file open), frees the orphan once none is,
 * giving its blocks back, and a second run finds nothing; fsck counts the
 * orphan before and none after.  --force frees an orphan a connected
 * client still has open, whose handle then answers -ESTALE.  A client
 * that connects while orphans are being freed stops the run before the
 * next one, and so does a stop asked for by the caller (an export being
 * stopped), the rest left for the next run; for the admin command that
 * stop is SIGINT (or SIGTERM): it prints the counts, says to run it
 * again and exits 128 + the signal.
 */
void test_orphans_reclaimed_after_crash(void)
{
	const char *tool = getenv("NGNFS_TOOL");
	const char *manifest;
	char output[256], expected[128], *data;
	uint64_t used_before, used_orphaned, used_after;
	struct ngnfs_handle root, file;
	struct ngnfs_fs *fs;

	CHECK(tool, "NGNFS_TOOL is not set (the ngnfs tool is not built)");
	snprintf(output, sizeof(output), "/tmp/ngnfs-orphans-%d.out", (int)getpid());
	start_backend_mkfs(2, "orphans");
	manifest = test_manifest_path();
	fs = mount_fs(NGNFS_MOUNT_STABLE);
	root = root_of(fs);
	used_before = used_blocks(fs);
	data = malloc(4 * 4096);
	CHECK(data, "out of memory");
	memset(data, 0x5a, 4 * 4096);
	file = make(fs, &root, "tape-index.db", S_IFREG | 0644);
	EXPECT_RET(ngnfs_write(fs, &file, 0, data, 4 * 4096, NGNFS_WRITE_MOUNT), 4 * 4096);
	free(data);
	EXPECT_RET(ngnfs_open(fs, &file), 0);
	EXPECT_RET(ngnfs_unlink(fs, &root, "tape-index.db"), 0);
	used_orphaned = used_blocks(fs);
	CHECK(used_orphaned >= used_before + 5,
	      "an open unlinked file of 4 blocks: expected at least %llu blocks in use, got %llu",
	      (unsigned long long)(used_before + 5), (unsigned long long)used_orphaned);
	{
		const char *argv[] = { tool, "reclaim-orphans", "--devices", manifest, NULL };

		/* the client that has the file open is connected: refused */
		run_tool_expect(argv, 1, output, "device 0 has 1 other client connected",
				"stop every gateway first", "reclaim-orphans beside a client");
	}
	EXPECT_RET(ngnfs_getattr(fs, &file, &(struct ngnfs_attr){ 0 }), 0);
	ngnfs_unmount(fs); /* the crash: the file is never closed */
	{
		const char *fsck[] = { tool, "fsck", "--devices", manifest, NULL };
		const char *reclaim[] = { tool, "reclaim-orphans", "--devices", manifest, NULL };

		run_tool_expect(fsck, 0, output, "1 orphans: 0 problems",
				"run ngnfs reclaim-orphans", "fsck after the crash");
		snprintf(expected, sizeof(expected), "orphan inode %llu freed",
			 (unsigned long long)file.ino);
		run_tool_expect(reclaim, 0, output, expected, "1 orphans freed, 0 left",
				"reclaim-orphans");
		run_tool_expect(reclaim, 0, output, "0 orphans freed, 0 left", NULL,
				"second reclaim-orphans");
		run_tool_expect(fsck, 0, output, " 0 orphans: 0 problems", NULL,
				"fsck after the reclaim");
	}
	fs = mount_fs(NGNFS_MOUNT_STABLE);
	used_after = used_blocks(fs);
	TEST_LOG("blocks in use: %llu before the file, %llu with the orphan, %llu after the "
		 "reclaim",
		 (unsigned long long)used_before, (unsigned long long)used_orphaned,
		 (unsigned long long)used_after);
	CHECK(used_after == used_before,
	      "after the reclaim expected the %llu blocks in use before the file, got %llu",
	      (unsigned long long)used_before, (unsigned long long)used_after);
	EXPECT_RET(ngnfs_getattr(fs, &file, &(struct ngnfs_attr){ 0 }), -ESTALE);
	check_fsck_clean(fs);
	/* --force frees an orphan this mount still has open: its handle goes stale */
	file = make(fs, &root, "still-open", S_IFREG | 0644);
	EXPECT_RET(ngnfs_open(fs, &file), 0);
	EXPECT_RET(ngnfs_unlink(fs, &root, "still-open"), 0);
	{
		const char *argv[] = {
			tool, "reclaim-orphans", "--force", "--devices", manifest, NULL,
		};

		snprintf(expected, sizeof(expected), "orphan inode %llu freed",
			 (unsigned long long)file.ino);
		run_tool_expect(argv, 0, output, expected, "device 0 has 1 other client connected",
				"reclaim-orphans --force beside the client");
	}
	EXPECT_RET(ngnfs_getattr(fs, &file, &(struct ngnfs_attr){ 0 }), -ESTALE);
	EXPECT_RET(ngnfs_close(fs, &file), 0);
	check_fsck_clean(fs);
	{
		uint64_t reclaimed, left;

		/* the mount's own reclaim (a gateway's at start) leaves what it has open */
		file = make(fs, &root, "open-here", S_IFREG | 0644);
		EXPECT_RET(ngnfs_open(fs, &file), 0);
		EXPECT_RET(ngnfs_unlink(fs, &root, "open-here"), 0);
		EXPECT_RET(
		    ngnfs_fsck_reclaim_orphans(fs, false, NULL, NULL, NULL, &reclaimed, &left), 0);
		CHECK(reclaimed == 0 && left == 1,
		      "an orphan open on the reclaiming mount: expected 0 freed, 1 left, got %llu, "
		      "%llu",
		      (unsigned long long)reclaimed, (unsigned long long)left);
		EXPECT_RET(ngnfs_getattr(fs, &file, &(struct ngnfs_attr){ 0 }), 0);
		EXPECT_RET(ngnfs_close(fs, &file), 0);
		EXPECT_RET(ngnfs_getattr(fs, &file, &(struct ngnfs_attr){ 0 }), -ESTALE);
		check_fsck_clean(fs);
	}
	{
		struct late_client late = { 0 };
		uint64_t reclaimed, left;

		fs = crash_with_orphans(fs, &root, "open-at-crash", 2);
		EXPECT_RET(ngnfs_fsck_reclaim_orphans(fs, false, NULL, connect_after_first_free,
						      &late, &reclaimed, &left),
			   -EBUSY);
		CHECK(late.fs && reclaimed == 1 && left == 1 && late.refusal_named &&
			  strstr(ngnfs_last_error(), "1 freed, 1 not"),
		      "a client connected after the first of two orphans: expected 1 freed, 1 "
		      "left and the refusal, got %llu, %llu (\"%s\")",
		      (unsigned long long)reclaimed, (unsigned long long)left, ngnfs_last_error());
		ngnfs_unmount(late.fs);
		EXPECT_RET(
		    ngnfs_fsck_reclaim_orphans(fs, false, NULL, NULL, NULL, &reclaimed, &left), 0);
		CHECK(reclaimed == 1 && left == 0,
		      "the second run: expected the other orphan freed, got %llu freed, %llu left",
		      (unsigned long long)reclaimed, (unsigned long long)left);
	}
	{
		atomic_bool stop = false;
		uint64_t reclaimed, left;

		/* a stop asked for during the run ends it before the next orphan */
		fs = crash_with_orphans(fs, &root, "open-at-stop", 3);
		EXPECT_RET(ngnfs_fsck_reclaim_orphans(fs, false, &stop, stop_after_first_free,
						      &stop, &reclaimed, &left),
			   -ECANCELED);
		CHECK(reclaimed == 1 && left == 2 && strstr(ngnfs_last_error(), "2 not reached"),
		      "a stop after the first of three orphans: expected 1 freed, 2 left, got "
		      "%llu, %llu (\"%s\")",
		      (unsigned long long)reclaimed, (unsigned long long)left, ngnfs_last_error());
		atomic_store(&stop, false);
		EXPECT_RET(
		    ngnfs_fsck_reclaim_orphans(fs, false, &stop, NULL, NULL, &reclaimed, &left), 0);
		CHECK(
		    reclaimed == 2 && left == 0,
		    "after the stop: expected the other 2 orphans freed, got %llu freed, %llu left",
		    (unsigned long long)reclaimed, (unsigned long long)left);
	}
	{
		enum { ORPHANS = 1000 };
		const char *reclaim[] = { tool, "reclaim-orphans", "--devices", manifest, NULL };
		unsigned long long freed = 0, left = 0, freed_lines = 0;
		const char *at, *counts = NULL;
		char *text;
		int status;

		/* the admin command stopped by SIGINT: between two orphans, the rest kept */
		fs = crash_with_orphans(fs, &root, "open-at-interrupt", ORPHANS);
		ngnfs_unmount(fs);
		text = reclaim_interrupted(tool, manifest, &status);
		for (at = text; (at = strstr(at, " freed\n")); at++)
			freed_lines++;
		for (at = text; (at = strstr(at, " orphans freed, ")); at++)
			counts = at;
		while (counts && counts > text && counts[-1] != '\n')
			counts--;
		CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 128 + SIGINT && counts &&
			  sscanf(counts, "%llu orphans freed, %llu left", &freed, &left) == 2 &&
			  strstr(text, "stopped by signal 2: run it again to free the"),
		      "reclaim-orphans interrupted: expected exit status %d, the counts and the "
		      "advice, got status %d and:\n%s",
		      128 + SIGINT, WIFEXITED(status) ? WEXITSTATUS(status) : -1, text);
		TEST_LOG("reclaim-orphans interrupted after %llu of %d orphans", freed, ORPHANS);
		CHECK(freed > 0 && left > 0 && freed + left == ORPHANS && freed_lines == freed,
		      "reclaim-orphans interrupted: expected some of the %d orphans freed and the "
		      "rest left, one line each, got %llu freed (%llu lines), %llu left",
		      ORPHANS, freed, freed_lines, left);
		free(text);
		snprintf(expected, sizeof(expected), "%llu orphans freed, 0 left", left);
		run_tool_expect(reclaim, 0, output, expected, NULL,
				"reclaim-orphans after the interrupted one");
		fs = mount_fs(NGNFS_MOUNT_STABLE);
	}
	check_fsck_clean(fs);
	ngnfs_unmount(fs);
	unlink(output);
	stop_backend();
}

/*
 * lost_create_handle_stale: a writeback gateway killed with a create only
 * in memory loses that create, and its block's reservation goes back to
 * the device with the block's version unchanged, so the next file in the
 * block has the same version.  The handle the lost create answered with
 * (an NFS client may still hold it) must answer -ESTALE, not name the new
 * file: the two generations differ by their sessions' epochs.
 */
void test_lost_create_handle_stale(void)
{
	enum { MAX_CREATES = 512 };
	struct ngnfs_handle root, dir, lost, created;
	int to_parent[2], status;
	unsigned int creates;
	struct ngnfs_fs *fs;
	bool reused = false;
	char name[32];
	pid_t child;

	start_backend_mkfs(1, "lost-create");
	fs = mount_fs(NGNFS_MOUNT_STABLE);
	root = root_of(fs);
	dir = make(fs, &root, "d", S_IFDIR | 0755);
	ngnfs_unmount(fs);

	CHECK(pipe(to_parent) == 0, "pipe: %s", strerror(errno));
	child = fork();
	CHECK(child >= 0, "fork: %s", strerror(errno));
	if (child == 0) {
		struct ngnfs_mount_options options = { .durability = NGNFS_MOUNT_WRITEBACK,
						       .writeback_interval_ms = 600000 };
		struct ngnfs_handle handle;

		test_mark_child();
		alarm(CHILD_TIMEOUT_S);
		options.device_addresses = test_addresses();
		options.device_count = (uint16_t)test_device_count();
		EXPECT_RET(ngnfs_mount(&options, &fs), 0);
		EXPECT_RET(ngnfs_create(fs, &dir, "lost", S_IFREG | 0644, 0, 0, 0, &handle, NULL),
			   0);
		CHECK(write(to_parent[1], &handle, sizeof(handle)) == (ssize_t)sizeof(handle),
		      "pipe write: %s", strerror(errno));
		pause(); /* killed here, the create still in memory */
		_exit(1);
	}
	close(to_parent[1]);
	CHECK(read(to_parent[0], &lost, sizeof(lost)) == (ssize_t)sizeof(lost),
	      "the writeback client died before its create");
	close(to_parent[0]);
	CHECK(kill(child, SIGKILL) == 0, "SIGKILL: %s", strerror(errno));
	CHECK(waitpid(child, &status, 0) == child && WIFSIGNALED(status),
	      "the writeback client did not die of its SIGKILL");

	fs = mount_fs(NGNFS_MOUNT_STABLE);
	EXPECT_RET(lookup(fs, &dir, "lost", &created), -ENOENT);
	for (creates = 0; creates < MAX_CREATES && !reused; creates++) {
		snprintf(name, sizeof(name), "after-%u", creates);
		created = make(fs, &dir, name, S_IFREG | 0644);
		reused = created.ino == lost.ino;
	}
	TEST_LOG("the lost create had inode %llu generation %#llx; %s after %u creates%s",
		 (unsigned long long)lost.ino, (unsigned long long)lost.generation,
		 reused ? "reused" : "not reused", creates,
		 reused ? "" : " (the test proves nothing)");
	CHECK(reused, "none of %u creates got the lost create's block %llu back", creates,
	      (unsigned long long)lost.ino);
	CHECK(created.generation != lost.generation,
	      "the new file in block %llu has the lost create's generation %#llx: the lost "
	      "file's handle names it",
	      (unsigned long long)lost.ino, (unsigned long long)lost.generation);
	EXPECT_RET(ngnfs_getattr(fs, &lost, &(struct ngnfs_attr){ 0 }), -ESTALE);
	EXPECT_RET(ngnfs_getattr(fs, &created, &(struct ngnfs_attr){ 0 }), 0);
	check_fsck_clean(fs);
	stop_fs(fs);
}

/*
 * ngnfs_statfs with the devices but skip down: every other device's
 * capacity must be counted, skip's as expected_down_total, and skip's free
 * space not at all.
 */
static void check_statfs_without(struct ngnfs_fs *fs, unsigned int skip,
				 uint64_t expected_down_total, const char *what)
{
	struct ngnfs_statfs_device device_statfs;
	struct ngnfs_statfs whole;
	uint64_t others_total = 0;

	EXPECT_RET(ngnfs_statfs(fs, &whole), 0);
	for (unsigned int device = 0; device < test_device_count(); device++) {
		if (device == skip)
			continue;
		EXPECT_RET(ngnfs_statfs_device(fs, (uint16_t)device, &device_statfs), 0);
		others_total += device_statfs.total_blocks;
	}
	CHECK(whole.unreachable_devices == 1 &&
		  whole.total_blocks == others_total + expected_down_total &&
		  whole.free_blocks < others_total,
	      "statfs %s: expected 1 unreachable device and %llu blocks, got %u and %llu "
	      "(%llu free)",
	      what, (unsigned long long)(others_total + expected_down_total),
	      whole.unreachable_devices, (unsigned long long)whole.total_blocks,
	      (unsigned long long)whole.free_blocks);
}

/*
 * mount_with_device_down: with one device's blockd stopped a mount fails
 * naming the device, unless allow_unreachable_devices is set.  Then what
 * lives on the other devices works, an operation on the missing device's
 * directory answers -EAGAIN at once, and -ENOTCONN (NFS: DELAY, then IO)
 * once the device has been away for longer than the reclaim timeout, as
 * for a device lost while mounted; when the device is back its files read
 * back and the filesystem checks clean.  statfs meanwhile counts the
 * devices it can reach (and a device lost while mounted with the capacity
 * it last reported, no free space) instead of failing.
 */
void test_mount_with_device_down(void)
{
	struct ngnfs_mount_options options = { .durability = NGNFS_MOUNT_STABLE,
					       .reclaim_timeout_ms = 2000 };
	struct ngnfs_handle root, dir, file;
	unsigned int down = 0, device;
	struct ngnfs_attr attr;
	char name[32], buffer[16];
	struct ngnfs_fs *fs;
	uint64_t started;
	int ret = 0, i;
	bool eof;

	start_backend_mkfs(3, "device-down");
	options.device_addresses = test_addresses();
	options.device_count = 3;
	fs = mount_fs(NGNFS_MOUNT_STABLE);
	root = root_of(fs);
	/* a device that holds neither the superblock (0) nor the root */
	for (device = 1; device < 3; device++)
		if (device != (unsigned int)(root.ino >> 48))
			down = device;
	/* directories are placed by a hash of their name: one on that device */
	for (i = 0; i < 200; i++) {
		snprintf(name, sizeof(name), "dir-%d", i);
		dir = make(fs, &root, name, S_IFDIR | 0755);
		if ((unsigned int)(dir.ino >> 48) == down)
			break;
	}
	CHECK(i < 200, "no directory of 200 landed on device %u", down);
	file = make(fs, &dir, "catalog", S_IFREG | 0644);
	EXPECT_RET(ngnfs_write(fs, &file, 0, "tape 7", 6, NGNFS_WRITE_MOUNT), 6);
	ngnfs_unmount(fs);
	EXPECT_RET(test_blockd_stop(down), 0);

	fs = NULL;
	EXPECT_RET(ngnfs_mount(&options, &fs), -ECONNREFUSED);
	CHECK(strstr(ngnfs_last_error(), "cannot connect"),
	      "mount with device %u down: expected a connection error, got \"%s\"", down,
	      ngnfs_last_error());

	options.allow_unreachable_devices = true;
	started = (uint64_t)time(NULL);
	EXPECT_RET(ngnfs_mount(&options, &fs), 0);
	check_statfs_without(fs, down, 0, "with a device never reached");
	make(fs, &root, "on-the-root-device", S_IFREG | 0644);
	/* new directories whose names hash to the missing device go elsewhere */
	for (i = 0; i < 30; i++) {
		struct ngnfs_handle placed;

		snprintf(name, sizeof(name), "while-away-%d", i);
		ret = ngnfs_create(fs, &root, name, S_IFDIR | 0755, 0, 0, 0, &placed, NULL);
		CHECK(ret == 0 && (unsigned int)(placed.ino >> 48) != down,
		      "mkdir %s with device %u away: expected it on another device, got %d (%s), "
		      "device %u",
		      name, down, ret, ngnfs_last_error(), (unsigned int)(placed.ino >> 48));
	}
	EXPECT_RET(ngnfs_getattr(fs, &dir, &attr), -EAGAIN);
	EXPECT_RET(ngnfs_create(fs, &dir, "new", S_IFREG | 0644, 0, 0, 0, NULL, NULL), -EAGAIN);
	/* away longer than the reclaim timeout: an error, not "try again" forever */
	while ((uint64_t)time(NULL) < started + 4) /* > 2 s whatever the second ticks */
		usleep(100000);
	EXPECT_RET(ngnfs_getattr(fs, &dir, &attr), -ENOTCONN);

	EXPECT_RET(test_blockd_start(down), 0);
	for (i = 0; i < 100; i++) {
		ret = ngnfs_read(fs, &file, 0, buffer, sizeof(buffer), &eof);
		if (ret >= 0)
			break;
		usleep(100000);
	}
	CHECK(ret == 6 && memcmp(buffer, "tape 7", 6) == 0,
	      "the file on device %u once it is back: expected its 6 bytes, got %d (%s)", down, ret,
	      ngnfs_last_error());
	make(fs, &dir, "new", S_IFREG | 0644);
	check_fsck_clean(fs);
	{
		struct ngnfs_statfs_device down_statfs;
		struct ngnfs_statfs whole;

		EXPECT_RET(ngnfs_statfs(fs, &whole), 0);
		EXPECT_RET(ngnfs_statfs_device(fs, (uint16_t)down, &down_statfs), 0);
		CHECK(whole.unreachable_devices == 0,
		      "statfs with every device back: %u unreachable", whole.unreachable_devices);
		EXPECT_RET(test_blockd_stop(down), 0);
		check_statfs_without(fs, down, down_statfs.total_blocks, "with a device lost");
		EXPECT_RET(test_blockd_start(down), 0);
	}
	ngnfs_unmount(fs);
	stop_backend();
}

struct repair_lines {
	bool held;	 /* a CMPXCHG refused because a client held write access */
	bool left_alone; /* a fix whose inode changed since the check */
	unsigned int repaired;
};

static void record_repair_line(void *arg, bool problem, const char *line)
{
	struct repair_lines *lines = arg;

	if (strstr(line, "held for writing by another client"))
		lines->held = true;
	if (problem && strstr(line, "not repaired: its link count is now 5, the check saw 4"))
		lines->left_alone = true;
	if (!problem && strstr(line, "repaired to"))
		lines->repaired++;
	printf("# repair: %s%s\n", problem ? "problem: " : "", line);
}

/*
 * fsck_repairs_online: wrong link counts, a wrong entry count and a
 * directory's wrong "..", found by fsck, are written right with incoherent reads and CMPXCHG while
 * this mount keeps using the filesystem.  A file this mount changed after the check (so it holds
 * the inode's write access) is repaired without losing that change; a file linked again after the
 * check is left alone and reported, and the next check and repair fix it.  This mount's cached
 * copies are revoked by the fixes.  Then `ngnfs fsck --repair` does the
 * same from the command line and checks again.
 */
void test_fsck_repairs_online(void)
{
	const char *tool = getenv("NGNFS_TOOL");
	struct ngnfs_fs *fs = start_fs(2, "fsck-repair", NGNFS_MOUNT_STABLE);
	struct ngnfs_mount_options mount = { .device_addresses = test_addresses(),
					     .device_count = (uint16_t)test_device_count() };
	struct ngnfs_handle root = root_of(fs), a, b, dir, sub;
	struct ngnfs_setattr set = { .mask = NGNFS_SET_MODE, .mode = 0600 };
	struct ngnfs_fsck_report report;
	struct repair_lines lines = { 0 };
	struct ngnfs_attr attr;
	struct ngnfs_fs *other;
	char output[256], *text;
	size_t repaired;
	int waited_ms;

	CHECK(tool, "NGNFS_TOOL is not set (the ngnfs tool is not built)");
	a = make(fs, &root, "a", S_IFREG | 0644);
	b = make(fs, &root, "b", S_IFREG | 0644);
	dir = make(fs, &root, "d", S_IFDIR | 0755);
	make(fs, &dir, "inside", S_IFREG | 0644);
	sub = make(fs, &root, "sub", S_IFDIR | 0755);
	check_fsck_clean(fs);
	corrupt_inode_field(fs, a.ino, NGNFS_FSCK_NLINK, 3);
	corrupt_inode_field(fs, b.ino, NGNFS_FSCK_NLINK, 3);
	corrupt_inode_field(fs, dir.ino, NGNFS_FSCK_ENTRY_COUNT, 5);
	corrupt_inode_field(fs, sub.ino, NGNFS_FSCK_PARENT, 1000);

	EXPECT_RET(ngnfs_fsck(fs, NULL, NULL, &report), 0);
	CHECK(report.problems == 4 && report.fix_count == 4,
	      "fsck: expected 4 problems, all fixable, got %llu problems and %zu fixes",
	      (unsigned long long)report.problems, report.fix_count);
	/* after the check: a changed here (this mount keeps its write access), b linked */
	EXPECT_RET(ngnfs_setattr(fs, &a, &set, &attr), 0);
	EXPECT_RET(ngnfs_link(fs, &b, &root, "b2"), 0);

	EXPECT_RET(ngnfs_fsck_repair(&mount, &report, record_repair_line, &lines, &repaired), 0);
	ngnfs_fsck_report_free(&report);
	CHECK(repaired == 3 && lines.repaired == 3,
	      "repair: expected a, d and sub repaired, got %zu (%u lines)", repaired,
	      lines.repaired);
	CHECK(lines.held, "repair: expected a's CMPXCHG refused while this mount held it");
	CHECK(lines.left_alone, "repair: expected b left alone (linked since the check)");

	/* this mount's copies were revoked: it sees the fixes, and a keeps its new mode */
	for (waited_ms = 0;; waited_ms += 10) {
		attr = attr_of(fs, &a);
		if (attr.nlink == 1 || waited_ms >= 2000)
			break;
		usleep(10000);
	}
	CHECK(attr.nlink == 1 && (attr.mode & 07777) == 0600,
	      "a after the repair: expected 1 link and mode 0600, got %u and 0%o", attr.nlink,
	      attr.mode & 07777);
	attr = attr_of(fs, &b);
	CHECK(attr.nlink == 5, "b: expected its 5 links left alone, got %u", attr.nlink);

	/* the next check finds b only (5 links, 2 names); its repair fixes it */
	other = mount_fs(NGNFS_MOUNT_STABLE);
	EXPECT_RET(ngnfs_fsck(other, NULL, NULL, &report), 0);
	CHECK(report.problems == 1 && report.fix_count == 1 && report.fixes[0].ino == b.ino &&
		  report.fixes[0].found == 5 && report.fixes[0].expected == 2,
	      "second fsck: expected b's link count 5 -> 2 alone, got %llu problems, %zu fixes",
	      (unsigned long long)report.problems, report.fix_count);
	EXPECT_RET(ngnfs_fsck_repair(&mount, &report, NULL, NULL, &repaired), 0);
	ngnfs_fsck_report_free(&report);
	CHECK(repaired == 1, "second repair: expected b repaired, got %zu", repaired);
	ngnfs_unmount(other);
	other = mount_fs(NGNFS_MOUNT_STABLE);
	check_fsck_clean(other);
	ngnfs_unmount(other);

	/* the command line: a problem is exit 1; --repair fixes it and checks again */
	corrupt_inode_field(fs, dir.ino, NGNFS_FSCK_ENTRY_COUNT, 2);
	snprintf(output, sizeof(output), "/tmp/ngnfs-fsck-repair-%d.out", (int)getpid());
	{
		const char *argv[] = { tool, "fsck", "--devices", test_manifest_path(), NULL };

		run_tool(argv, 1, output, &text);
		CHECK(strstr(text, "entry count says 3, found 1 entries"),
		      "fsck: expected the entry count reported, got:\n%s", text);
		free(text);
	}
	{
		const char *argv[] = { tool,	   "fsck", "--devices", test_manifest_path(),
				       "--repair", NULL };

		run_tool(argv, 0, output, &text);
		CHECK(strstr(text, "entry count 3 repaired to 1") &&
			  strstr(text, "1 of 1 fixable problems repaired") &&
			  strstr(text, ": 0 problems"),
		      "fsck --repair: expected the repair and a clean second check, got:\n%s",
		      text);
		free(text);
	}
	unlink(output);
	stop_fs(fs);
}

/*
 * full_device_overflows: two devices of DEVICE_BLOCKS blocks each, files
 * created in the root directory (device 0) until ENOSPC.  When device 0
 * is full, new inodes come from device 1 instead of failing: ENOSPC only
 * once both are full, every file made is listed and the namespace checks
 * clean; an unlink makes room again.
 */
void test_full_device_overflows(void)
{
	enum { DEVICE_BLOCKS = 800, MOST = 4 * DEVICE_BLOCKS };
	static const char *const args[] = { "--total-blocks", "800", NULL };
	struct ngnfs_handle root, handle;
	struct ngnfs_attr attr;
	struct listing listing;
	unsigned int created = 0, on_device_1 = 0, listed;
	struct ngnfs_fs *fs;
	char name[32];
	int ret = 0;

	set_blockd_args(args);
	fs = start_fs(2, "full-device", NGNFS_MOUNT_STABLE);
	set_blockd_args(NULL);
	root = root_of(fs);
	CHECK(root.ino >> 48 == 0, "expected the root directory on device 0"); /* format-msg.h */
	while (created < MOST) {
		snprintf(name, sizeof(name), "f%05u", created);
		ret = ngnfs_create(fs, &root, name, S_IFREG | 0644, 0, 0, 0, &handle, &attr);
		if (ret < 0)
			break;
		on_device_1 += handle.ino >> 48 == 1;
		created++;
	}
	printf("full_device_overflows: %u files, %u of them on device 1, then %d (%s)\n", created,
	       on_device_1, ret, strerror(-ret));
	CHECK(ret == -ENOSPC, "expected ENOSPC once both devices are full, got %d (%s) after %u",
	      ret, strerror(-ret), created);
	CHECK(on_device_1 > DEVICE_BLOCKS / 2,
	      "expected device 1 to take the files once device 0 was full, it has %u of %u",
	      on_device_1, created);
	CHECK(created > DEVICE_BLOCKS, "expected more files (%u) than one device has blocks (%u)",
	      created, DEVICE_BLOCKS);
	memset(&listing, 0, sizeof(listing));
	list_all(fs, &root, &listing);
	listed = (unsigned int)listing.count;
	listing_free(&listing);
	CHECK(listed == created, "expected %u entries in the root, listed %u", created, listed);
	check_fsck_clean(fs);

	EXPECT_RET(ngnfs_unlink(fs, &root, "f00007"), 0);
	EXPECT_RET(ngnfs_unlink(fs, &root, "f00008"), 0);
	EXPECT_RET(ngnfs_create(fs, &root, "after-unlink", S_IFREG | 0644, 0, 0, 0, NULL, NULL), 0);
	stop_fs(fs);
}

/* ---- stopped_client_loses_grants ---- */

#define STOPPED_REVOKE_TIMEOUT_MS 1500

static uint64_t clock_ms(void)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (uint64_t)now.tv_sec * 1000 + (uint64_t)now.tv_nsec / 1000000;
}

/* In the stopped client: the inode numbers its gateway layer was told to drop. */
static uint64_t invalidated[256];
static unsigned int invalidated_count;

static uint64_t note_invalidation(void *arg, const struct ngnfs_handle *handle, bool dir_changed)
{
	unsigned int slot = __atomic_fetch_add(&invalidated_count, 1, __ATOMIC_RELAXED);

	(void)arg;
	(void)dir_changed;
	if (slot < sizeof(invalidated) / sizeof(invalidated[0]))
		__atomic_store_n(&invalidated[slot], handle->ino, __ATOMIC_RELEASE);
	return 0;
}

static bool was_invalidated(uint64_t ino)
{
	unsigned int count = __atomic_load_n(&invalidated_count, __ATOMIC_ACQUIRE);

	for (unsigned int i = 0; i < count && i < sizeof(invalidated) / sizeof(invalidated[0]);
	     i++) {
		if (__atomic_load_n(&invalidated[i], __ATOMIC_ACQUIRE) == ino)
			return true;
	}
	return false;
}

static void stopped_client(struct ngnfs_fs *fs, int index, int in, int out)
{
	struct ngnfs_handle root = root_of(fs), quiet, found;
	struct ngnfs_cache_counters counters;
	uint64_t deadline;

	(void)index;
	make(fs, &root, "from-child", S_IFREG | 0644);
	quiet = make(fs, &root, "quiet", S_IFREG | 0644);
	(void)attr_of(fs, &quiet); /* holds the inode's block: nobody will revoke it */
	ngnfs_set_invalidate(fs, note_invalidation, NULL);
	send_byte(out, 'r');
	receive_byte(in); /* stopped, then continued, meanwhile */
	/*
	 * The session close alone must reach the gateway layer, for the inode
	 * nobody revoked too: after it, another client may change that inode
	 * without anybody telling this one.  No operation runs before it.
	 */
	deadline = clock_ms() + 5000;
	while (!was_invalidated(quiet.ino) && clock_ms() < deadline)
		usleep(10 * 1000);
	CHECK(was_invalidated(quiet.ino),
	      "the stopped client lost its sessions, but its gateway layer was not told to drop "
	      "inode %llu (%u invalidations)",
	      (unsigned long long)quiet.ino, __atomic_load_n(&invalidated_count, __ATOMIC_RELAXED));
	EXPECT_RET(lookup(fs, &root, "from-parent", &found), 0);
	EXPECT_RET(lookup(fs, &root, "from-child", &found), 0);
	make(fs, &root, "after-resume", S_IFREG | 0644);
	ngnfs_cache_counters(ngnfs_test_fs_cache(fs), &counters);
	TEST_LOG("stopped client: %u invalidations after it was continued, %llu transactions "
		 "waited for the I/O thread first",
		 __atomic_load_n(&invalidated_count, __ATOMIC_RELAXED),
		 (unsigned long long)counters.stall_catch_ups);
	send_byte(out, 'd');
}

/*
 * A stopped client (SIGSTOP: a hung or frozen gateway) holds write grants
 * on the root directory.  blockd closes its sessions after its REVOKE was
 * unanswered for --revoke-timeout-ms, so the other client's create goes
 * through after that time instead of hanging; the stopped client, once
 * continued, drops what it cached, sees the other's entry and works on.
 */
void test_stopped_client_loses_grants(void)
{
	/* STOPPED_REVOKE_TIMEOUT_MS */
	static const char *const args[] = { "--revoke-timeout-ms", "1500", NULL };
	struct ngnfs_handle root;
	struct listing listing;
	int to_child[2], to_parent[2], status;
	struct ngnfs_fs *fs;
	uint64_t started, took;
	char *log;
	pid_t child;

	set_blockd_args(args);
	start_backend_mkfs(1, "stopped-client");
	set_blockd_args(NULL);
	CHECK(pipe(to_child) == 0 && pipe(to_parent) == 0, "pipe: %s", strerror(errno));
	child = spawn_client(stopped_client, 0, to_child[0], to_parent[1]);
	receive_byte(to_parent[0]);
	CHECK(kill(child, SIGSTOP) == 0, "SIGSTOP: %s", strerror(errno));
	CHECK(waitpid(child, &status, WUNTRACED) == child && WIFSTOPPED(status),
	      "the client did not stop");

	/* the mount already reads the root inode the stopped client holds for write */
	started = clock_ms();
	fs = mount_fs(NGNFS_MOUNT_STABLE);
	root = root_of(fs);
	make(fs, &root, "from-parent", S_IFREG | 0644);
	took = clock_ms() - started;
	/* continued before any check, so that a failure does not leave it stopped */
	CHECK(kill(child, SIGCONT) == 0, "SIGCONT: %s", strerror(errno));
	TEST_LOG("mount and create past the stopped client took %llu ms", (unsigned long long)took);
	CHECK(took >= STOPPED_REVOKE_TIMEOUT_MS - 200,
	      "the mount and create took %llu ms: they did not wait for the stopped client's "
	      "grants",
	      (unsigned long long)took);
	send_byte(to_child[1], 'g');
	CHECK(receive_byte(to_parent[0]) == 'd', "the continued client did not finish");
	wait_client(child, "stopped");

	memset(&listing, 0, sizeof(listing));
	list_all(fs, &root, &listing);
	CHECK(listing.count == 4, "expected 4 entries in the root, listed %zu", listing.count);
	listing_free(&listing);
	check_fsck_clean(fs);
	log = ngnfs_test_read_file(test_blockd_log_path(0), NULL);
	CHECK(log && strstr(log, "unanswered (revoke_timeout_ms)"),
	      "expected blockd's log to say it closed the stopped client's session");
	free(log);
	stop_fs(fs);
}

/* ---- evicted_inode_is_invalidated ---- */

/*
 * With a 1 MiB block cache (256 blocks), creating 2000 files evicts the
 * first ones' inode blocks; the invalidate callback must have heard of
 * the first file, which nobody else touched.
 */
void test_evicted_inode_is_invalidated(void)
{
	struct ngnfs_mount_options options = {
		.device_addresses = NULL,
		.durability = NGNFS_MOUNT_STABLE,
		.cache_bytes = 1 << 20,
	};
	struct ngnfs_cache_counters counters;
	struct ngnfs_handle root, first;
	struct ngnfs_fs *fs = NULL;
	char name[32];

	start_backend_mkfs(1, "evicted-inode");
	options.device_addresses = test_addresses();
	options.device_count = (uint16_t)test_device_count();
	EXPECT_RET(ngnfs_mount(&options, &fs), 0);
	root = root_of(fs);
	first = make(fs, &root, "first", S_IFREG | 0644);
	__atomic_store_n(&invalidated_count, 0, __ATOMIC_RELAXED);
	ngnfs_set_invalidate(fs, note_invalidation, NULL);
	CHECK(!was_invalidated(first.ino), "the first file was invalidated before any eviction");
	for (unsigned int i = 0; i < 2000; i++) {
		snprintf(name, sizeof(name), "f%04u", i);
		make(fs, &root, name, S_IFREG | 0644);
	}
	ngnfs_cache_counters(ngnfs_test_fs_cache(fs), &counters);
	CHECK(counters.evictions > 0, "expected evictions from a 256-block cache");
	CHECK(was_invalidated(first.ino),
	      "the first file's inode was evicted (%llu evictions) but never invalidated",
	      (unsigned long long)counters.evictions);
	ngnfs_set_invalidate(fs, NULL, NULL);
	stop_fs(fs);
}

/* ---- restart_grace_places_elsewhere ---- */

#define GRACE_TEST_MS	    4000
#define GRACE_TEST_TEXT(ms) #ms
#define GRACE_TEST_ARG(ms)  GRACE_TEST_TEXT(ms)

/*
 * open_created_without_device: a file whose create committed, and then
 * its device went away.  ngnfs_open reads the inode again and must be
 * answered try-again while the device is away; ngnfs_open_created, for
 * the file this client has just created (a gateway's OPEN that created
 * it), counts the open without the device, so an NFS client is not told
 * NFS4ERR_DELAY for a file that exists.  Once the device is back the
 * file is there and the open closes.
 */
void test_open_created_without_device(void)
{
	struct ngnfs_handle root, file;
	struct ngnfs_attr attr;
	struct ngnfs_fs *fs;
	unsigned int tries = 0;
	int ret;

	fs = start_fs(1, "open-created", NGNFS_MOUNT_STABLE);
	root = root_of(fs);
	file = make(fs, &root, "created", S_IFREG | 0644);
	CHECK(test_blockd_stop(0) == 0, "could not stop device 0");
	ret = ngnfs_open(fs, &file);
	CHECK(ret == -EAGAIN,
	      "ngnfs_open with the inode's device away: expected -EAGAIN (it reads the inode), "
	      "got %d (%s)",
	      ret, ngnfs_last_error());
	EXPECT_RET(ngnfs_open_created(fs, &file), 0);
	CHECK(test_blockd_start(0) == 0, "could not start device 0 again");
	do {
		ret = ngnfs_getattr(fs, &file, &attr);
		if (ret == -EAGAIN)
			usleep(50 * 1000);
	} while (ret == -EAGAIN && ++tries < 400);
	EXPECT_RET(ret, 0);
	CHECK(S_ISREG(attr.mode) && attr.nlink == 1,
	      "the created file after the restart: expected a regular file with one link, got "
	      "mode %o, %u links",
	      attr.mode, (unsigned int)attr.nlink);
	EXPECT_RET(ngnfs_close(fs, &file), 0);
	EXPECT_RET(ngnfs_close(fs, &file), -EBADF);
	check_fsck_clean(fs);
	stop_fs(fs);
}

/*
 * Files are created in the root, which lives on device 0, so their inodes
 * go there too.  Device 0 is killed and started again with a grace period
 * of GRACE_TEST_MS: a create inside it must succeed (the client retries
 * -EAGAIN while its session comes back) with its inode on device 1, since
 * device 0 reserves nothing then; after the grace, on device 0 again.
 */
void test_restart_grace_places_elsewhere(void)
{
	static const char *const args[] = { "--grace-ms", GRACE_TEST_ARG(GRACE_TEST_MS), NULL };
	struct ngnfs_handle root, handle;
	uint64_t restarted, took;
	struct ngnfs_fs *fs;
	unsigned int tries = 0;
	int ret;

	set_blockd_args(args);
	fs = start_fs(2, "restart-grace", NGNFS_MOUNT_STABLE);
	set_blockd_args(NULL);
	root = root_of(fs);
	EXPECT_RET(ngnfs_create(fs, &root, "before", S_IFREG | 0644, 0, 0, 0, &handle, NULL), 0);
	CHECK(handle.ino >> 48 == 0, "expected a file in the root on device 0, got inode %llx",
	      (unsigned long long)handle.ino);

	CHECK(test_blockd_kill_restart(0) == 0, "could not kill and restart device 0");
	restarted = clock_ms();
	do {
		ret = ngnfs_create(fs, &root, "in-grace", S_IFREG | 0644, 0, 0, 0, &handle, NULL);
		if (ret == -EAGAIN)
			usleep(50 * 1000);
	} while (ret == -EAGAIN && ++tries < 200);
	took = clock_ms() - restarted;
	EXPECT_RET(ret, 0);
	CHECK(took < GRACE_TEST_MS - 1000,
	      "the create took %llu ms after the restart, too close to the %u ms grace period "
	      "to tell where it went",
	      (unsigned long long)took, GRACE_TEST_MS);
	CHECK(handle.ino >> 48 == 1,
	      "a create %llu ms into device 0's grace period got inode %llx: expected it on "
	      "device 1, since device 0 must reserve nothing then",
	      (unsigned long long)took, (unsigned long long)handle.ino);

	while (clock_ms() - restarted < GRACE_TEST_MS + 500)
		usleep(100 * 1000);
	tries = 0;
	do {
		ret =
		    ngnfs_create(fs, &root, "after-grace", S_IFREG | 0644, 0, 0, 0, &handle, NULL);
		if (ret == -EAGAIN)
			usleep(50 * 1000);
	} while (ret == -EAGAIN && ++tries < 100);
	EXPECT_RET(ret, 0);
	CHECK(handle.ino >> 48 == 0,
	      "a create after the grace period got inode %llx, expected device 0 again",
	      (unsigned long long)handle.ino);
	check_fsck_clean(fs);
	stop_fs(fs);
}

struct sync_thread {
	struct ngnfs_fs *fs;
	int ret;
};

static void *sync_thread_main(void *arg)
{
	struct sync_thread *sync = arg;

	sync->ret = ngnfs_sync(sync->fs);
	return NULL;
}

/*
 * A directory's creates in writeback mode, flushed as one set on one
 * device larger than one frame: one WRITE of several frames, held by
 * blockd until the last.  blockd is killed while that write waits for its
 * commit (--commit-delay-ms), so none of it was applied; after the restart
 * the cache asks for the set's grants again at their base versions, finds
 * them unchanged and writes the set again.  The sync that was waiting
 * succeeds, another mount lists every file, and fsck is clean.
 */
void test_held_write_across_restart(void)
{
	static const char *const args[] = { "--commit-delay-ms", "1500", NULL };
	enum { FILES = 400 };
	struct ngnfs_mount_options options = { .durability = NGNFS_MOUNT_WRITEBACK,
					       .writeback_interval_ms = 600000 };
	struct sync_thread sync = { 0 };
	struct ngnfs_handle root, handle;
	struct listing listing = { 0 };
	unsigned int in_flight = 0;
	struct ngnfs_fs *fs, *other;
	pthread_t thread;
	char name[32];
	char *log, *line;

	set_blockd_args(args);
	start_backend_mkfs(1, "held-write-restart");
	set_blockd_args(NULL);
	options.device_addresses = test_addresses();
	options.device_count = (uint16_t)test_device_count();
	EXPECT_RET(ngnfs_mount(&options, &fs), 0);
	root = root_of(fs);
	for (unsigned int i = 0; i < FILES; i++) {
		snprintf(name, sizeof(name), "file-%u", i);
		EXPECT_RET(ngnfs_create(fs, &root, name, S_IFREG | 0644, 0, 0, 0, &handle, NULL),
			   0);
	}

	/* the cache says on stderr what was in flight when the session broke */
	CHECK(ngnfs_test_capture_stderr_begin() == 0, "cannot capture stderr");
	sync.fs = fs;
	CHECK(pthread_create(&thread, NULL, sync_thread_main, &sync) == 0, "pthread_create");
	usleep(500 * 1000); /* the frames are at blockd, the last one's commit delayed */
	CHECK(test_blockd_kill_restart(0) == 0, "could not kill and restart device 0");
	pthread_join(thread, NULL);
	log = ngnfs_test_capture_stderr_end();
	CHECK(log, "cannot read the captured stderr");
	line = strstr(log, "ngnfs cache: a write of ");
	CHECK(line &&
		  sscanf(line, "ngnfs cache: a write of %u blocks to device 0", &in_flight) == 1,
	      "expected the cache to log the write in flight when device 0 was killed");
	CHECK(in_flight > NGNFS_MSG_MAX_BLOCKS,
	      "the write in flight had %u blocks, not more than one frame (%u)", in_flight,
	      NGNFS_MSG_MAX_BLOCKS);
	free(log);
	EXPECT_RET(sync.ret, 0);
	EXPECT_RET(ngnfs_write_losses(fs), 0);

	other = mount_fs(NGNFS_MOUNT_STABLE);
	root = root_of(other);
	list_all(other, &root, &listing);
	CHECK(listing.count == FILES, "another mount lists %zu files, expected %u", listing.count,
	      FILES);
	listing_free(&listing);
	check_fsck_clean(other);
	ngnfs_unmount(other);
	stop_fs(fs);
}
