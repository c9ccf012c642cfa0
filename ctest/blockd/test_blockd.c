/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * blockd's behaviour tests: real blockd processes (started by the shared
 * harness, ctest/harness/cluster.h) driven over raw sockets with the
 * codec, one case per ctest test so that a failure names the behaviour.
 *
 * Each case asserts what a client can observe (replies, statuses,
 * versions, data, REVOKEs, the log) and fails with a line saying what
 * was expected and what came instead; a failing case exits non-zero and
 * the harness's exit handler kills and removes what it started.
 *
 * XXX:
 *  - Timing-based waits (grace period, recovery) poll with bounds of a
 *    few seconds; a very slow machine could exceed them.
 */

#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <rocksdb/c.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cluster.h"
#include "format-store.h"
#include "tclient.h"

static const char *current_case = "?";
static struct ngnfs_test_cluster *current_cluster;

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

static void fail(const char *fmt, ...)
{
	va_list args;

	fprintf(stderr, "FAIL %s: ", current_case);
	va_start(args, fmt);
	vfprintf(stderr, fmt, args);
	va_end(args);
	fprintf(stderr, "\n");
	if (current_cluster)
		ngnfs_test_cluster_dump_logs(current_cluster, 4000);
	exit(1);
}

#define EXPECT_STATUS(expr, expected)                                                              \
	do {                                                                                       \
		int got_ = (expr);                                                                 \
		if (got_ != (expected))                                                            \
			fail("line %d: %s: expected status %d (%s), got %d (%s)", __LINE__, #expr, \
			     (expected), strerror(-(expected)), got_, strerror(-got_));            \
	} while (0)

#define EXPECT_U64(what, got, expected)                                                            \
	do {                                                                                       \
		unsigned long long g_ = (got), e_ = (expected);                                    \
		if (g_ != e_)                                                                      \
			fail("line %d: %s: expected %llu, got %llu", __LINE__, what, e_, g_);      \
	} while (0)

static uint64_t now_ms(void)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (uint64_t)now.tv_sec * 1000 + (uint64_t)now.tv_nsec / 1000000;
}

static const uint8_t fs_id[NGNFS_FS_ID_SIZE] = { 0xf5, 1, 2,  3,  4,  5,  6,  7,
						 8,    9, 10, 11, 12, 13, 14, 15 };
static const uint8_t other_fs_id[NGNFS_FS_ID_SIZE] = { 0xee, 0xee };

static struct ngnfs_test_cluster *start(unsigned int devices, const char *const *extra)
{
	struct ngnfs_test_cluster *cluster =
	    ngnfs_test_cluster_start_args(devices, current_case, extra);

	if (!cluster)
		fail("cannot start %u blockd processes", devices);
	current_cluster = cluster;
	return cluster;
}

static void stop(struct ngnfs_test_cluster *cluster)
{
	int ret = ngnfs_test_cluster_stop(cluster);

	current_cluster = NULL;
	if (ret)
		fail("blockd did not shut down cleanly on SIGTERM (%d)", ret);
}

static void open_session(struct tc *tc, struct ngnfs_test_cluster *cluster, unsigned int device,
			 uint32_t flags)
{
	int ret = tc_connect(tc, ngnfs_test_cluster_address(cluster, device));

	if (ret)
		fail("cannot connect to device %u at %s: %s", device,
		     ngnfs_test_cluster_address(cluster, device), strerror(-ret));
	ret = tc_hello(tc, fs_id, flags, NULL);
	if (ret)
		fail("HELLO to device %u: expected status 0, got %d (%s)", device, ret,
		     strerror(-ret));
}

/* Format every device of the cluster with fs_id. */
static void format_all(struct ngnfs_test_cluster *cluster)
{
	unsigned int count = ngnfs_test_cluster_device_count(cluster);

	for (unsigned int device = 0; device < count; device++) {
		struct tc tc;

		if (tc_connect(&tc, ngnfs_test_cluster_address(cluster, device)))
			fail("cannot connect to device %u", device);
		EXPECT_STATUS(tc_hello(&tc, NULL, NGNFS_HELLO_FORMAT, NULL), 0);
		EXPECT_STATUS(tc_format(&tc, fs_id, (uint16_t)device, count), 0);
		tc_close(&tc);
	}
}

static void fill(uint8_t *data, uint8_t seed)
{
	for (unsigned int i = 0; i < NGNFS_BLOCK_SIZE; i++)
		data[i] = (uint8_t)(seed + i * 7);
}

static bool log_contains(struct ngnfs_test_cluster *cluster, unsigned int device, const char *text)
{
	char *log = ngnfs_test_read_file(ngnfs_test_cluster_log_path(cluster, device), NULL);
	bool found = log && strstr(log, text);

	free(log);
	return found;
}

/* ---- command line, config file, folder checks ---------------------------- */

static char *temporary_dir(void)
{
	char template[] = "/tmp/ngnfs-blockd-test-XXXXXX";
	char *dir = mkdtemp(template);

	if (!dir)
		fail("mkdtemp: %s", strerror(errno));
	return strdup(dir);
}

static void remove_dir(const char *dir)
{
	const char *argv[] = { "rm", "-rf", dir, NULL };
	int status;

	ngnfs_test_run(argv, NULL, 10000, &status);
}

/* Run blockd with argv (NULL-terminated, without argv[0]); expect failure and text. */
static void expect_refusal(const char *dir, const char *const *args, const char *expected)
{
	const char *argv[32];
	char output[4200];
	char describe[64];
	char *text;
	int status, argc = 0;

	argv[argc++] = getenv("NGNFS_BLOCKD");
	for (; *args && argc < 30; args++)
		argv[argc++] = *args;
	argv[argc] = NULL;
	snprintf(output, sizeof(output), "%s/output", dir);
	if (ngnfs_test_run(argv, output, 10000, &status))
		fail("cannot run blockd");
	text = ngnfs_test_read_file(output, NULL);
	if (!WIFEXITED(status) || WEXITSTATUS(status) == 0)
		fail("blockd %s %s: expected a non-zero exit, got %s; output: %s", argv[1],
		     argv[2] ? argv[2] : "",
		     ngnfs_test_describe_status(status, describe, sizeof(describe)),
		     text ? text : "");
	if (!text || !strstr(text, expected))
		fail("blockd %s ...: expected output containing \"%s\", got: %s", argv[1], expected,
		     text ? text : "(none)");
	free(text);
}

static void write_text(const char *path, const char *text)
{
	FILE *file = fopen(path, "w");

	if (!file || fputs(text, file) < 0 || fclose(file))
		fail("cannot write %s", path);
}

static void case_bad_flags(void)
{
	char *dir = temporary_dir();
	char db[4200];
	char output[4200];
	const char *help[] = { getenv("NGNFS_BLOCKD"), "--help", NULL };
	char *text;
	int status;

	snprintf(db, sizeof(db), "%s/db", dir);
	expect_refusal(dir, (const char *[]){ "--bogus", NULL }, "invalid option '--bogus'");
	expect_refusal(dir, (const char *[]){ "--listen", "127.0.0.1:0", NULL },
		       "no database folder");
	expect_refusal(dir, (const char *[]){ "--db", db, NULL }, "no listen address");
	expect_refusal(
	    dir,
	    (const char *[]){ "--db", db, "--listen", "127.0.0.1:0", "--grace-ms", "soon", NULL },
	    "setting grace_ms has invalid value 'soon'");
	expect_refusal(
	    dir,
	    (const char *[]){ "--db", db, "--listen", "127.0.0.1:0", "--log-level", "loud", NULL },
	    "setting log_level has invalid value 'loud'");
	expect_refusal(dir, (const char *[]){ "--db", db, "--listen", "127.0.0.1", NULL },
		       "listen address '127.0.0.1' is not HOST:PORT");
	expect_refusal(dir, (const char *[]){ "--db", db, "--listen", "127.0.0.1:99999", NULL },
		       "invalid port");

	snprintf(output, sizeof(output), "%s/help", dir);
	if (ngnfs_test_run(help, output, 10000, &status) || !WIFEXITED(status) ||
	    WEXITSTATUS(status) != 0)
		fail("blockd --help: expected exit status 0");
	text = ngnfs_test_read_file(output, NULL);
	if (!text || !strstr(text, "usage: blockd --db DIR --listen HOST:PORT") ||
	    !strstr(text, "--grace-ms"))
		fail("blockd --help: expected usage naming the flags, got: %s", text ? text : "");
	free(text);
	remove_dir(dir);
	free(dir);
}

static void case_bad_config(void)
{
	char *dir = temporary_dir();
	char path[4200], db[4200], text[9000];

	snprintf(path, sizeof(path), "%s/blockd.conf", dir);
	snprintf(db, sizeof(db), "%s/db", dir);

	snprintf(text, sizeof(text), "db = %s\nlisten = 127.0.0.1:0\nsync = maybe\n", db);
	write_text(path, text);
	expect_refusal(dir, (const char *[]){ "--config", path, NULL },
		       "setting sync has invalid value 'maybe' (expected true or false)");

	snprintf(text, sizeof(text), "db = %s\nlisten = 127.0.0.1:0\ncache_mb = 0\n", db);
	write_text(path, text);
	expect_refusal(dir, (const char *[]){ "--config", path, NULL },
		       "setting cache_mb has invalid value '0'");

	snprintf(text, sizeof(text), "db = %s\nlisten = 127.0.0.1:0\nrevoke_timeout_ms = 10\n", db);
	write_text(path, text);
	expect_refusal(dir, (const char *[]){ "--config", path, NULL },
		       "setting revoke_timeout_ms has invalid value '10'");

	snprintf(text, sizeof(text), "[blockd]\ndb = %s\ncolour = blue\n", db);
	write_text(path, text);
	expect_refusal(dir, (const char *[]){ "--config", path, NULL }, "unknown setting 'colour'");

	write_text(path, "this line is not a setting\n");
	expect_refusal(dir, (const char *[]){ "--config", path, NULL }, "malformed line");

	snprintf(path, sizeof(path), "%s/missing.conf", dir);
	expect_refusal(dir, (const char *[]){ "--config", path, NULL }, "cannot read config file");
	remove_dir(dir);
	free(dir);
}

static void case_config_file_serves(void)
{
	char *dir = temporary_dir();
	char path[4200], db[4200], port_file[4200], text[13000];
	const char *argv[] = { getenv("NGNFS_BLOCKD"), "--config", path, NULL };
	char address[64];
	char *port;
	pid_t pid;
	struct tc tc;
	int status;

	snprintf(path, sizeof(path), "%s/blockd.conf", dir);
	snprintf(db, sizeof(db), "%s/db", dir);
	snprintf(port_file, sizeof(port_file), "%s/port", dir);
	snprintf(text, sizeof(text),
		 "# sample\n[blockd]\ndb = %s\nlisten = 127.0.0.1:0\nport_file = %s\n"
		 "grace_ms = 100\nlog_level = debug\nsync = true\ncache_mb = 8\n"
		 "commit_max_batch = 16\ntotal_blocks = 1000\nresolve_timeout_ms = 5000\n",
		 db, port_file);
	write_text(path, text);
	snprintf(text, sizeof(text), "%s/log", dir);
	if (ngnfs_test_spawn(argv, text, &pid))
		fail("cannot spawn blockd");
	for (int i = 0; i < 200; i++) {
		if (access(port_file, F_OK) == 0)
			break;
		usleep(25000);
	}
	port = ngnfs_test_read_file(port_file, NULL);
	if (!port)
		fail("blockd --config: no port file %s after 5 s", port_file);
	snprintf(address, sizeof(address), "127.0.0.1:%d", atoi(port));
	free(port);
	if (tc_connect(&tc, address))
		fail("cannot connect to %s", address);
	EXPECT_STATUS(tc_hello(&tc, NULL, NGNFS_HELLO_FORMAT, NULL), 0);
	{
		struct ngnfs_statfs_figures figures;
		struct tc second;

		EXPECT_STATUS(tc_statfs_figures(&tc, &figures), 0);
		EXPECT_U64("total blocks from total_blocks = 1000", figures.total_blocks, 1000);
		EXPECT_U64("client sessions with one client", figures.client_sessions, 1);
		/* STATFS counts the clients connected (the admin tool's orphan reclaim) */
		if (tc_connect(&second, address))
			fail("cannot connect a second session to %s", address);
		EXPECT_STATUS(tc_statfs_figures(&tc, &figures), 0);
		EXPECT_U64("client sessions with a second connected before its HELLO",
			   figures.client_sessions, 1);
		EXPECT_STATUS(tc_hello(&second, NULL, NGNFS_HELLO_FORMAT, NULL), 0);
		EXPECT_STATUS(tc_statfs_figures(&tc, &figures), 0);
		EXPECT_U64("client sessions with two clients", figures.client_sessions, 2);
		tc_close(&second);
		for (int i = 0; i < 200 && figures.client_sessions != 1; i++) {
			usleep(10000);
			EXPECT_STATUS(tc_statfs_figures(&tc, &figures), 0);
		}
		EXPECT_U64("client sessions after the second closed", figures.client_sessions, 1);
	}
	tc_close(&tc);
	kill(pid, SIGTERM);
	if (ngnfs_test_wait(pid, 10000, &status) || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
		fail("blockd --config did not exit 0 on SIGTERM");

	/* the shipped sample parses, with flags overriding its paths */
	{
		const char *sample_argv[] = { getenv("NGNFS_BLOCKD"),
					      "--config",
					      NGNFS_SAMPLE_CONF,
					      "--db",
					      db,
					      "--listen",
					      "127.0.0.1:0",
					      "--port-file",
					      port_file,
					      NULL };

		unlink(port_file);
		snprintf(text, sizeof(text), "%s/sample.log", dir);
		if (ngnfs_test_spawn(sample_argv, text, &pid))
			fail("cannot spawn blockd");
		for (int i = 0; i < 200 && access(port_file, F_OK); i++)
			usleep(25000);
		if (access(port_file, F_OK))
			fail("blockd --config %s: not serving after 5 s", NGNFS_SAMPLE_CONF);
		kill(pid, SIGTERM);
		if (ngnfs_test_wait(pid, 10000, &status) || !WIFEXITED(status) ||
		    WEXITSTATUS(status) != 0)
			fail("blockd with the sample config did not exit 0 on SIGTERM");
	}
	remove_dir(dir);
	free(dir);
}

static void case_foreign_folder(void)
{
	char *dir = temporary_dir();
	char db[4200], path[4300];

	snprintf(db, sizeof(db), "%s/db", dir);
	{
		const char *argv[] = { "mkdir", db, NULL };
		int status;

		if (ngnfs_test_run(argv, NULL, 10000, &status) || status != 0)
			fail("cannot create %s", db);
	}
	snprintf(path, sizeof(path), "%s/notes.txt", db);
	write_text(path, "some random file\n");
	expect_refusal(dir, (const char *[]){ "--db", db, "--listen", "127.0.0.1:0", NULL },
		       "is not an ngnfs device store: it holds 'notes.txt'");
	if (access(path, F_OK))
		fail("blockd touched the foreign folder: %s is gone", path);
	snprintf(path, sizeof(path), "%s/CURRENT", db);
	if (access(path, F_OK) == 0)
		fail("blockd created a RocksDB in the foreign folder %s", db);
	remove_dir(dir);
	free(dir);
}

static void case_foreign_rocksdb(void)
{
	char *dir = temporary_dir();
	char db[4200];
	rocksdb_options_t *options = rocksdb_options_create();
	rocksdb_writeoptions_t *write_options = rocksdb_writeoptions_create();
	char *error = NULL;
	rocksdb_t *rocks;

	snprintf(db, sizeof(db), "%s/db", dir);
	rocksdb_options_set_create_if_missing(options, 1);
	rocks = rocksdb_open(options, db, &error);
	if (error)
		fail("cannot create a RocksDB at %s: %s", db, error);
	rocksdb_put(rocks, write_options, "user:1", 6, "alice", 5, &error);
	rocksdb_close(rocks);
	rocksdb_writeoptions_destroy(write_options);
	rocksdb_options_destroy(options);
	expect_refusal(dir, (const char *[]){ "--db", db, "--listen", "127.0.0.1:0", NULL },
		       "holds a RocksDB database that is not an ngnfs device store");
	remove_dir(dir);
	free(dir);
}

static void case_busy_port(void)
{
	char *dir = temporary_dir();
	char db[4200], listen_address[64], expected[128];
	struct sockaddr_in address = { .sin_family = AF_INET,
				       .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t length = sizeof(address);
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	if (fd < 0 || bind(fd, (struct sockaddr *)&address, sizeof(address)) || listen(fd, 1) ||
	    getsockname(fd, (struct sockaddr *)&address, &length))
		fail("cannot occupy a port: %s", strerror(errno));
	snprintf(db, sizeof(db), "%s/db", dir);
	snprintf(listen_address, sizeof(listen_address), "127.0.0.1:%u", ntohs(address.sin_port));
	snprintf(expected, sizeof(expected), "cannot listen on %s: Address already in use",
		 listen_address);
	expect_refusal(dir, (const char *[]){ "--db", db, "--listen", listen_address, NULL },
		       expected);
	if (access(db, F_OK) == 0)
		fail("blockd left a database at %s although it could not listen", db);
	close(fd);
	remove_dir(dir);
	free(dir);
}

/* ---- sessions and formatting --------------------------------------------- */

static void case_hello_wrong_fs_id(void)
{
	struct ngnfs_test_cluster *cluster = start(1, NULL);
	struct tc tc;

	format_all(cluster);
	if (tc_connect(&tc, ngnfs_test_cluster_address(cluster, 0)))
		fail("connect");
	EXPECT_STATUS(tc_hello(&tc, other_fs_id, 0, NULL), -ESTALE);
	EXPECT_STATUS(tc_wait_closed(&tc, 3000), 0);
	tc_close(&tc);
	if (!log_contains(cluster, 0, "fs id is not this device's filesystem"))
		fail("expected a log line naming the wrong fs id");
	/* the right fs id and the all-zero one are accepted */
	open_session(&tc, cluster, 0, 0);
	tc_close(&tc);
	if (tc_connect(&tc, ngnfs_test_cluster_address(cluster, 0)))
		fail("connect");
	EXPECT_STATUS(tc_hello(&tc, NULL, 0, NULL), 0);
	tc_close(&tc);
	stop(cluster);
}

static void case_unformatted(void)
{
	struct ngnfs_test_cluster *cluster = start(1, NULL);
	uint8_t data[NGNFS_BLOCK_SIZE];
	uint8_t zeros[NGNFS_BLOCK_SIZE] = { 0 };
	uint64_t version = 99;
	uint16_t device_index = 99;
	bool has_data = false;
	struct tc tc;

	if (tc_connect(&tc, ngnfs_test_cluster_address(cluster, 0)))
		fail("connect");
	EXPECT_STATUS(tc_hello(&tc, NULL, 0, NULL), -ENODEV);
	tc_close(&tc);

	if (tc_connect(&tc, ngnfs_test_cluster_address(cluster, 0)))
		fail("connect");
	EXPECT_STATUS(tc_hello(&tc, NULL, NGNFS_HELLO_FORMAT, NULL), 0);
	EXPECT_STATUS(tc_get(&tc, 5, NGNFS_ACCESS_READ, 0, &version, &has_data, data), -ENODEV);
	EXPECT_STATUS(tc_write(&tc, 5, 0, zeros, NULL), -ENODEV);
	EXPECT_STATUS(tc_format(&tc, fs_id, 0, 1), 0);
	EXPECT_STATUS(tc_format(&tc, fs_id, 0, 1), -EEXIST);
	EXPECT_STATUS(tc_get(&tc, 5, NGNFS_ACCESS_READ, 0, &version, &has_data, data), 0);
	EXPECT_U64("version of a never-written block", version, 0);
	if (has_data)
		fail("cached_version 0 of a never-written block (version 0) should need no data");
	/* a client whose cache says otherwise gets the zeros */
	EXPECT_STATUS(tc_release(&tc, 5, NGNFS_ACCESS_NONE), 0);
	memset(data, 0xaa, sizeof(data));
	EXPECT_STATUS(tc_get(&tc, 5, NGNFS_ACCESS_READ, 3, &version, &has_data, data), 0);
	EXPECT_U64("version of a never-written block", version, 0);
	if (!has_data || memcmp(data, zeros, sizeof(data)))
		fail("a never-written block should read as zeros");
	tc_close(&tc);

	/* the identity is persistent and reported */
	EXPECT_STATUS(ngnfs_test_cluster_kill(cluster, 0, SIGTERM), 0);
	EXPECT_STATUS(ngnfs_test_cluster_restart(cluster, 0), 0);
	if (tc_connect(&tc, ngnfs_test_cluster_address(cluster, 0)))
		fail("connect");
	EXPECT_STATUS(tc_hello(&tc, fs_id, NGNFS_HELLO_RECLAIM, &device_index), 0);
	EXPECT_U64("device index after restart", device_index, 0);
	tc_close(&tc);
	stop(cluster);
}

/* ---- blocks ---------------------------------------------------------------- */

static void case_write_read(void)
{
	struct ngnfs_test_cluster *cluster = start(1, NULL);
	uint8_t data[NGNFS_BLOCK_SIZE], back[NGNFS_BLOCK_SIZE];
	uint64_t version = 0, new_version = 0;
	bool has_data;
	struct tc writer, reader;

	format_all(cluster);
	open_session(&writer, cluster, 0, 0);
	open_session(&reader, cluster, 0, 0);
	fill(data, 1);
	EXPECT_STATUS(tc_get(&writer, 7, NGNFS_ACCESS_WRITE, 0, &version, &has_data, NULL), 0);
	EXPECT_STATUS(tc_write(&writer, 7, 0, data, &new_version), 0);
	EXPECT_U64("version after first write", new_version, 1);
	fill(data, 2);
	EXPECT_STATUS(tc_write(&writer, 7, 1, data, &new_version), 0);
	EXPECT_U64("version after second write", new_version, 2);

	/* the reader's GET revokes the writer down to READ */
	EXPECT_STATUS(tc_get_send(&reader, 7, NGNFS_ACCESS_READ, 0, NULL), 0);
	{
		int access = tc_wait_revoke(&writer, 7, 3000);

		EXPECT_U64("REVOKE access for a reader against a writer", access,
			   NGNFS_ACCESS_READ);
	}
	EXPECT_STATUS(tc_release(&writer, 7, NGNFS_ACCESS_READ), 0);
	EXPECT_STATUS(tc_grant_wait(&reader, 3000, NULL, &version, NULL, &has_data, back), 0);
	EXPECT_U64("version read back", version, 2);
	if (!has_data || memcmp(back, data, sizeof(data)))
		fail("read back data differs from what was written");

	/* a cached current copy gets no data */
	EXPECT_STATUS(tc_release(&reader, 7, NGNFS_ACCESS_NONE), 0);
	EXPECT_STATUS(tc_get(&reader, 7, NGNFS_ACCESS_READ, 2, &version, &has_data, NULL), 0);
	if (has_data)
		fail("GET with cached_version equal to the current version carried data");
	EXPECT_STATUS(tc_release(&reader, 7, NGNFS_ACCESS_NONE), 0);
	EXPECT_STATUS(tc_get(&reader, 7, NGNFS_ACCESS_READ, 1, &version, &has_data, back), 0);
	if (!has_data)
		fail("GET with an old cached_version carried no data");
	tc_close(&reader);
	tc_close(&writer);
	stop(cluster);
}

/*
 * A frame that arrives in pieces is applied once it is whole (the session
 * reads the rest of a frame itself once its header is in, session.c), and
 * a connection that ends in the middle of a frame applies nothing of it.
 */
static void case_frame_in_pieces(void)
{
	struct ngnfs_test_cluster *cluster = start(1, NULL);
	const size_t cuts[] = { NGNFS_MSG_HEADER_SIZE / 2, NGNFS_MSG_HEADER_SIZE + 100, 5000,
				9000 };
	static uint8_t data[3][NGNFS_BLOCK_SIZE], back[NGNFS_BLOCK_SIZE];
	struct ngnfs_block_request blocks[3];
	struct ngnfs_buffer buffer;
	struct tc_frame reply;
	struct tc writer, reader;
	uint64_t version = 0;
	bool has_data = false;
	size_t sent = 0;

	format_all(cluster);
	open_session(&writer, cluster, 0, 0);
	for (unsigned int i = 0; i < 3; i++) {
		fill(data[i], (uint8_t)(10 + i));
		EXPECT_STATUS(
		    tc_get(&writer, 20 + i, NGNFS_ACCESS_WRITE, 0, &version, &has_data, NULL), 0);
		blocks[i] = (struct ngnfs_block_request){ .blkno = 20 + i,
							  .version = version,
							  .data = data[i] };
	}
	ngnfs_buffer_init(&buffer);
	EXPECT_STATUS(ngnfs_encode_write(&buffer, 900, 0, NGNFS_WRITE_SINGLE, 0, 0, NULL, 0, blocks,
					 3, NULL, 0),
		      0);
	for (size_t i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++) {
		EXPECT_STATUS(tc_send_raw(&writer, buffer.data + sent, cuts[i] - sent), 0);
		sent = cuts[i];
		usleep(50 * 1000);
	}
	EXPECT_STATUS(tc_send_raw(&writer, buffer.data + sent, buffer.length - sent), 0);
	ngnfs_buffer_free(&buffer);
	if (tc_recv(&writer, &reply, 3000))
		fail("expected a reply to the WRITE sent in pieces, got nothing");
	if (reply.msg.type != NGNFS_MSG_WRITE_REPLY || reply.msg.status != 0)
		fail("expected WRITE_REPLY with status 0 for the frame sent in pieces, got %s "
		     "status %d",
		     ngnfs_msg_type_name(reply.msg.type), reply.msg.status);
	tc_frame_free(&reply);

	/* Half of a second write of block 20, then the connection ends. */
	fill(data[0], 99);
	blocks[0].version = 1;
	ngnfs_buffer_init(&buffer);
	EXPECT_STATUS(ngnfs_encode_write(&buffer, 901, 0, NGNFS_WRITE_SINGLE, 0, 0, NULL, 0, blocks,
					 1, NULL, 0),
		      0);
	EXPECT_STATUS(tc_send_raw(&writer, buffer.data, buffer.length / 2), 0);
	ngnfs_buffer_free(&buffer);
	usleep(100 * 1000);
	tc_close(&writer);

	open_session(&reader, cluster, 0, 0);
	for (unsigned int i = 0; i < 3; i++) {
		fill(data[i], (uint8_t)(10 + i));
		EXPECT_STATUS(
		    tc_get(&reader, 20 + i, NGNFS_ACCESS_READ, 0, &version, &has_data, back), 0);
		EXPECT_U64("version of a block written by the frame sent in pieces", version, 1);
		if (!has_data || memcmp(back, data[i], sizeof(back)))
			fail("block %u: read back data differs from the frame sent in pieces",
			     20 + i);
	}
	tc_close(&reader);
	if (!log_contains(cluster, 0, "connection closed by peer in the middle of a frame"))
		fail("expected the session cut off mid-frame to end with a log line saying so");
	stop(cluster);
}

/*
 * A write waiting for the commit thread when its client closes the
 * connection: nobody gets the block until that write is durable, so the
 * next writer sees its version and contents, and versions stay unique.
 * --commit-delay-ms holds every group commit back long enough to close the
 * writer's connection in the middle.  What keeps this true is that
 * grants wait for pending writes (grant.c, can_grant): a session behind
 * nothing but WRITEs in flight is still read (session.c), so it sees its
 * EOF and loses its grants while the write is in the commit thread.
 */
static void case_grant_waits_for_pending_write(void)
{
	const char *extra[] = { "--commit-delay-ms", "500", NULL };
	struct ngnfs_test_cluster *cluster = start(1, extra);
	uint8_t data[NGNFS_BLOCK_SIZE], back[NGNFS_BLOCK_SIZE];
	uint64_t version = 0, new_version = 0;
	bool has_data;
	struct tc writer, next;

	format_all(cluster);
	open_session(&writer, cluster, 0, 0);
	open_session(&next, cluster, 0, 0);
	fill(data, 3);
	EXPECT_STATUS(tc_get(&writer, 7, NGNFS_ACCESS_WRITE, 0, &version, &has_data, NULL), 0);
	EXPECT_STATUS(tc_write_send(&writer, 7, version, data), 0);
	usleep(100 * 1000); /* the WRITE is in the commit thread's delay */
	tc_close(&writer);
	EXPECT_STATUS(tc_get(&next, 7, NGNFS_ACCESS_WRITE, 0, &version, &has_data, back), 0);
	EXPECT_U64("version seen after the dead session's write", version, 1);
	if (!has_data || memcmp(back, data, sizeof(data)))
		fail("the next writer got the contents from before the pending write");
	fill(data, 4);
	EXPECT_STATUS(tc_write(&next, 7, version, data, &new_version), 0);
	EXPECT_U64("version of the next write", new_version, 2);
	tc_close(&next);
	stop(cluster);
}

/*
 * Stop device 0 with SIGTERM and read its stop line's counts: group
 * commits, requests, and WRITEs taken before the replies before them.
 */
static void stop_counts(struct ngnfs_test_cluster *cluster, unsigned long long *batches,
			unsigned long long *requests, unsigned long long *early)
{
	char *log, *line;

	EXPECT_STATUS(ngnfs_test_cluster_kill(cluster, 0, SIGTERM), 0);
	log = ngnfs_test_read_file(ngnfs_test_cluster_log_path(cluster, 0), NULL);
	line = log ? strstr(log, "stopped after ") : NULL;
	if (!line || sscanf(line, "stopped after %llu group commits of %llu requests, %llu of them",
			    batches, requests, early) != 3)
		fail("expected the group commit totals in the log at shutdown");
	free(log);
}

/* The next frame on tc, which must be the reply of type to request_id with status. */
static struct tc_frame expect_reply(struct tc *tc, enum ngnfs_msg_type type, uint64_t request_id,
				    int status, const char *what)
{
	struct tc_frame frame;
	int ret = tc_recv(tc, &frame, TC_TIMEOUT_MS);

	if (ret)
		fail("%s: no reply (%d)", what, ret);
	if (frame.msg.type != type || frame.msg.request_id != request_id ||
	    frame.msg.status != status)
		fail("%s: expected reply type %d to request %llu with status %d, got type %d to "
		     "request %llu with status %d",
		     what, type, (unsigned long long)request_id, status, frame.msg.type,
		     (unsigned long long)frame.msg.request_id, frame.msg.status);
	return frame;
}

/*
 * A session's WRITEs behind its WRITEs in the commit queue (session.c,
 * write_may_overtake_reply), with every group commit held back 300 ms:
 * a WRITE of another block is taken at once; a WRITE of a block still in
 * flight (based on the version that write makes) waits for it and is then
 * accepted, where checking it early against the stored version would have
 * refused it -ESTALE; a STATFS behind a WRITE is answered after it; and
 * replies come in request order.  The stop line counts the two WRITEs
 * taken early, which an in-order blockd would count as 0.
 */
static void case_write_behind_write(void)
{
	const char *extra[] = { "--commit-delay-ms", "300", NULL };
	struct ngnfs_test_cluster *cluster = start(1, extra);
	uint8_t data[NGNFS_BLOCK_SIZE], back[NGNFS_BLOCK_SIZE];
	unsigned long long batches, requests, early;
	uint64_t version, first_id;
	struct ngnfs_buffer buffer;
	struct tc_frame frame;
	bool has_data;
	struct tc tc;
	int i;

	format_all(cluster);
	open_session(&tc, cluster, 0, 0);
	EXPECT_STATUS(tc_get(&tc, 7, NGNFS_ACCESS_WRITE, 0, &version, &has_data, NULL), 0);
	EXPECT_STATUS(tc_get(&tc, 8, NGNFS_ACCESS_WRITE, 0, &version, &has_data, NULL), 0);
	first_id = tc.next_request_id;
	fill(data, 1);
	EXPECT_STATUS(tc_write_send(&tc, 7, 0, data), 0);
	fill(data, 2);
	EXPECT_STATUS(tc_write_send(&tc, 8, 0, data), 0);
	fill(data, 3);
	EXPECT_STATUS(tc_write_send(&tc, 7, 1, data), 0); /* on top of the first */
	ngnfs_buffer_init(&buffer);
	ngnfs_encode_statfs(&buffer, tc.next_request_id++);
	EXPECT_STATUS(tc_send(&tc, &buffer), 0);
	for (i = 0; i < 3; i++) {
		static const char *const what[] = { "the first WRITE of block 7",
						    "the WRITE of block 8 behind it",
						    "the second WRITE of block 7" };
		static const uint64_t versions[] = { 1, 1, 2 };

		uint64_t blkno = 0, new_version = 0;

		frame = expect_reply(&tc, NGNFS_MSG_WRITE_REPLY, first_id + i, 0, what[i]);
		if (frame.msg.versions.count == 1)
			ngnfs_msg_version_entry(&frame.msg, 0, &blkno, &new_version);
		tc_frame_free(&frame);
		if (new_version != versions[i])
			fail("%s: expected version %llu, got %llu", what[i],
			     (unsigned long long)versions[i], (unsigned long long)new_version);
	}
	frame = expect_reply(&tc, NGNFS_MSG_STATFS_REPLY, first_id + 3, 0,
			     "the STATFS behind the WRITEs");
	tc_frame_free(&frame);
	EXPECT_STATUS(tc_release(&tc, 7, NGNFS_ACCESS_NONE), 0);
	EXPECT_STATUS(tc_get(&tc, 7, NGNFS_ACCESS_READ, 0, &version, &has_data, back), 0);
	EXPECT_U64("version of block 7", version, 2);
	if (!has_data || memcmp(back, data, sizeof(data)))
		fail("block 7 does not read back as its second WRITE");
	tc_close(&tc);
	stop_counts(cluster, &batches, &requests, &early);
	EXPECT_U64("WRITEs taken before the replies of the ones before them", early, 2);
	EXPECT_STATUS(ngnfs_test_cluster_restart(cluster, 0), 0);
	stop(cluster);
}

static void case_write_refused(void)
{
	struct ngnfs_test_cluster *cluster = start(1, NULL);
	uint8_t data[NGNFS_BLOCK_SIZE];
	uint64_t version;
	bool has_data;
	struct tc tc;

	format_all(cluster);
	open_session(&tc, cluster, 0, 0);
	fill(data, 3);
	EXPECT_STATUS(tc_write(&tc, 9, 0, data, NULL), -EPERM);
	EXPECT_STATUS(tc_get(&tc, 9, NGNFS_ACCESS_READ, 0, &version, &has_data, NULL), 0);
	EXPECT_STATUS(tc_write(&tc, 9, 0, data, NULL), -EPERM);
	EXPECT_STATUS(tc_get(&tc, 9, NGNFS_ACCESS_WRITE, 0, &version, &has_data, NULL), 0);
	EXPECT_STATUS(tc_write(&tc, 9, 5, data, NULL), -ESTALE);
	EXPECT_STATUS(tc_write(&tc, 9, 0, data, NULL), 0);
	EXPECT_STATUS(tc_write(&tc, 9, 0, data, NULL), -ESTALE);
	EXPECT_STATUS(tc_write(&tc, ngnfs_blkno_make(3, 9), 0, data, NULL), -EXDEV);
	if (!log_contains(cluster, 0, "WRITE of block 9 refused for session") ||
	    !log_contains(cluster, 0, "session does not hold write access"))
		fail("expected log lines naming the refused block and the reason");
	tc_close(&tc);
	stop(cluster);
}

static void case_corrupt_block(void)
{
	struct ngnfs_test_cluster *cluster = start(1, NULL);
	uint8_t data[NGNFS_BLOCK_SIZE];
	uint8_t key[NGNFS_STORE_BLOCK_KEY_SIZE] = { NGNFS_STORE_KEY_BLOCK };
	rocksdb_options_t *options;
	rocksdb_readoptions_t *read_options;
	rocksdb_writeoptions_t *write_options;
	char *error = NULL, *value;
	size_t length;
	uint64_t version;
	int block_status = 0;
	bool has_data;
	rocksdb_t *rocks;
	struct tc tc;

	format_all(cluster);
	open_session(&tc, cluster, 0, 0);
	fill(data, 4);
	EXPECT_STATUS(tc_get(&tc, 42, NGNFS_ACCESS_WRITE, 0, &version, &has_data, NULL), 0);
	EXPECT_STATUS(tc_write(&tc, 42, 0, data, NULL), 0);
	tc_close(&tc);
	EXPECT_STATUS(ngnfs_test_cluster_kill(cluster, 0, SIGTERM), 0);

	/* flip one data byte of block 42 behind blockd's back */
	key[8] = 42;
	options = rocksdb_options_create();
	read_options = rocksdb_readoptions_create();
	write_options = rocksdb_writeoptions_create();
	rocks = rocksdb_open(options, ngnfs_test_cluster_db_path(cluster, 0), &error);
	if (error)
		fail("cannot open the device's RocksDB: %s", error);
	value = rocksdb_get(rocks, read_options, (char *)key, sizeof(key), &length, &error);
	if (!value || length != sizeof(struct ngnfs_store_block))
		fail("block 42 not found in the store under its documented key");
	value[100] ^= 0x40;
	rocksdb_put(rocks, write_options, (char *)key, sizeof(key), value, length, &error);
	if (error)
		fail("cannot write the corrupt block: %s", error);
	rocksdb_free(value);
	rocksdb_close(rocks);
	rocksdb_options_destroy(options);
	rocksdb_readoptions_destroy(read_options);
	rocksdb_writeoptions_destroy(write_options);

	EXPECT_STATUS(ngnfs_test_cluster_restart(cluster, 0), 0);
	open_session(&tc, cluster, 0, NGNFS_HELLO_RECLAIM);
	EXPECT_STATUS(tc_get(&tc, 42, NGNFS_ACCESS_READ, 0, &version, &has_data, data), -EIO);
	if (!log_contains(cluster, 0, "GET of block 42 refused") ||
	    !log_contains(cluster, 0, "fails its checksum"))
		fail("expected a log line naming block 42 and its checksum");
	EXPECT_STATUS(tc_read_incoherent(&tc, 42, &version, &block_status, data), 0);
	EXPECT_U64("READ_INCOHERENT status of the corrupt block (as u64)", (uint64_t)block_status,
		   (uint64_t)-EIO);
	/* other blocks are still served */
	EXPECT_STATUS(tc_get(&tc, 43, NGNFS_ACCESS_READ, 0, &version, &has_data, NULL), 0);
	tc_close(&tc);
	stop(cluster);
}

/* Raw frames the codec refuses, each on its own connection. */
static void case_malformed_frames(void)
{
	struct ngnfs_test_cluster *cluster = start(1, NULL);
	struct {
		const char *name;
		int expected;
		void (*mangle)(uint8_t *frame, size_t *length);
	} cases[4];
	struct ngnfs_buffer buffer;
	uint8_t frame[256];
	size_t length;

	format_all(cluster);
	(void)cases;
	for (int which = 0; which < 5; which++) {
		struct tc tc;
		struct tc_frame reply;
		uint32_t value;
		int expected = -EBADMSG;

		ngnfs_buffer_init(&buffer);
		ngnfs_encode_hello(&buffer, 77, fs_id, 1, 0);
		length = buffer.length;
		memcpy(frame, buffer.data, length);
		ngnfs_buffer_free(&buffer);
		switch (which) {
		case 0: /* bad magic */
			frame[0] ^= 0xff;
			break;
		case 1: /* crc mismatch: flip a payload byte */
			frame[NGNFS_MSG_HEADER_SIZE + 20] ^= 1;
			break;
		case 2: /* payload length beyond the maximum */
			value = htole32(NGNFS_MSG_MAX_PAYLOAD + 1);
			memcpy(frame + 8, &value, 4);
			break;
		case 3: /* protocol version 99 */
			frame[12] = 99;
			frame[13] = 0;
			expected = -EPROTONOSUPPORT;
			break;
		case 4: /* truncated payload announced as shorter: crc/length mismatch */
			value = htole32(8);
			memcpy(frame + 8, &value, 4);
			length = NGNFS_MSG_HEADER_SIZE + 8;
			break;
		}
		if (tc_connect(&tc, ngnfs_test_cluster_address(cluster, 0)))
			fail("connect");
		EXPECT_STATUS(tc_send_raw(&tc, frame, length), 0);
		if (tc_recv(&tc, &reply, 3000))
			fail("malformed frame %d: expected an ERROR reply, got nothing", which);
		if (reply.msg.type != NGNFS_MSG_ERROR)
			fail("malformed frame %d: expected ERROR, got %s", which,
			     ngnfs_msg_type_name(reply.msg.type));
		if (which != 3 && which != 0 && reply.msg.status != expected)
			fail("malformed frame %d: expected status %d, got %d", which, expected,
			     reply.msg.status);
		if (which == 3 && reply.msg.status != -EPROTONOSUPPORT &&
		    reply.msg.status != -EBADMSG)
			fail("bad version: expected -EPROTONOSUPPORT, got %d", reply.msg.status);
		if (reply.msg.error.text_length == 0)
			fail("malformed frame %d: ERROR carries no reason", which);
		tc_frame_free(&reply);
		EXPECT_STATUS(tc_wait_closed(&tc, 3000), 0);
		tc_close(&tc);
	}
	if (!log_contains(cluster, 0, "malformed frame from session") ||
	    !log_contains(cluster, 0, "127.0.0.1:"))
		fail("expected log lines naming the peer of each malformed frame");
	{
		/* a request before HELLO is refused and closes too */
		struct tc tc;
		uint64_t total, free_blocks, reserved, staged;

		if (tc_connect(&tc, ngnfs_test_cluster_address(cluster, 0)))
			fail("connect");
		EXPECT_STATUS(tc_statfs(&tc, &total, &free_blocks, &reserved, &staged), -EPROTO);
		EXPECT_STATUS(tc_wait_closed(&tc, 3000), 0);
		tc_close(&tc);
		/* and the server is still up */
		open_session(&tc, cluster, 0, 0);
		EXPECT_STATUS(tc_statfs(&tc, &total, &free_blocks, &reserved, &staged), 0);
		tc_close(&tc);
	}
	stop(cluster);
}

/* ---- grants ----------------------------------------------------------------- */

static void expect_no_grant(struct tc *tc, const char *who)
{
	uint64_t version;
	int ret = tc_grant_wait(tc, 300, NULL, &version, NULL, NULL, NULL);

	if (ret != -ETIMEDOUT)
		fail("%s: expected no GRANT yet (queued), got status %d", who, ret);
}

static void case_grant_fifo(void)
{
	struct ngnfs_test_cluster *cluster = start(1, NULL);
	struct tc a, b, c;
	uint64_t version;
	uint8_t access;
	int revoke;

	format_all(cluster);
	open_session(&a, cluster, 0, 0);
	open_session(&b, cluster, 0, 0);
	open_session(&c, cluster, 0, 0);

	/* A reads; B wants write (queued, A revoked to NONE); C wants read: waits behind B */
	EXPECT_STATUS(tc_get(&a, 11, NGNFS_ACCESS_READ, 0, &version, NULL, NULL), 0);
	EXPECT_STATUS(tc_get_send(&b, 11, NGNFS_ACCESS_WRITE, 0, NULL), 0);
	revoke = tc_wait_revoke(&a, 11, 3000);
	EXPECT_U64("REVOKE to the reader for a writer", revoke, NGNFS_ACCESS_NONE);
	EXPECT_STATUS(tc_get_send(&c, 11, NGNFS_ACCESS_READ, 0, NULL), 0);
	expect_no_grant(&c, "compatible reader behind a queued writer");
	expect_no_grant(&b, "writer while a reader holds");

	EXPECT_STATUS(tc_release(&a, 11, NGNFS_ACCESS_NONE), 0);
	EXPECT_STATUS(tc_grant_wait(&b, 3000, NULL, &version, &access, NULL, NULL), 0);
	EXPECT_U64("access granted to B", access, NGNFS_ACCESS_WRITE);
	revoke = tc_wait_revoke(&b, 11, 3000);
	EXPECT_U64("REVOKE to the writer for a reader", revoke, NGNFS_ACCESS_READ);
	expect_no_grant(&c, "reader while the writer holds");
	EXPECT_STATUS(tc_release(&b, 11, NGNFS_ACCESS_READ), 0);
	EXPECT_STATUS(tc_grant_wait(&c, 3000, NULL, &version, &access, NULL, NULL), 0);
	EXPECT_U64("access granted to C", access, NGNFS_ACCESS_READ);

	/* disconnect drops grants: A wants write against readers B and C */
	EXPECT_STATUS(tc_get_send(&a, 11, NGNFS_ACCESS_WRITE, 0, NULL), 0);
	expect_no_grant(&a, "writer while two readers hold");
	tc_close(&b);
	expect_no_grant(&a, "writer while one reader holds");
	tc_close(&c);
	EXPECT_STATUS(tc_grant_wait(&a, 3000, NULL, &version, &access, NULL, NULL), 0);
	EXPECT_U64("access granted to A after the readers disconnected", access,
		   NGNFS_ACCESS_WRITE);
	tc_close(&a);
	stop(cluster);
}

/* ---- allocation ------------------------------------------------------------- */

static void statfs(struct tc *tc, uint64_t *free_blocks, uint64_t *reserved)
{
	uint64_t total, staged;

	EXPECT_STATUS(tc_statfs(tc, &total, free_blocks, reserved, &staged), 0);
}

static void case_alloc(void)
{
	const char *extra[] = { "--total-blocks", "1000", "--grace-ms", "0", NULL };
	struct ngnfs_test_cluster *cluster = start(1, extra);
	uint64_t blknos[4], versions[4], new_version, free0, free1, reserved;
	uint8_t data[NGNFS_BLOCK_SIZE];
	uint32_t got;
	const uint64_t usable = 1000 - NGNFS_FIRST_ALLOC_INDEX;
	struct tc a, b;

	format_all(cluster);
	open_session(&a, cluster, 0, 0);
	open_session(&b, cluster, 0, 0);
	fill(data, 5);
	statfs(&a, &free0, &reserved);
	/* the first indexes hold fixed metadata (the superblock) and are never allocated */
	EXPECT_U64("free blocks of a new 1000-block device", free0, usable);
	EXPECT_STATUS(tc_alloc(&a, 3, blknos, versions, &got), 0);
	EXPECT_U64("blocks reserved", got, 3);
	statfs(&a, &free1, &reserved);
	EXPECT_U64("free blocks after reserving 3", free1, usable - 3);
	EXPECT_U64("reserved blocks", reserved, 3);
	/* reserved blocks are granted for write: write one; another session cannot */
	EXPECT_STATUS(tc_write(&b, blknos[1], versions[1], data, NULL), -EPERM);
	EXPECT_STATUS(tc_write(&a, blknos[0], versions[0], data, &new_version), 0);
	EXPECT_U64("version of the first write of a reserved block", new_version, 1);
	tc_close(&a);
	/* the two unused reservations return */
	usleep(200000);
	statfs(&b, &free1, &reserved);
	EXPECT_U64("free blocks after the session ended", free1, usable - 1);
	EXPECT_U64("reserved after the session ended", reserved, 0);

	/* free the written block through WRITE's free list; its version survives */
	{
		uint64_t version;
		bool has_data;
		uint64_t frees[1] = { blknos[0] };
		uint8_t got_data[NGNFS_BLOCK_SIZE];

		EXPECT_STATUS(
		    tc_get(&b, blknos[0], NGNFS_ACCESS_WRITE, 0, &version, &has_data, NULL), 0);
		EXPECT_STATUS(tc_write_full(&b, NGNFS_WRITE_SINGLE, 0, NULL, 0, NULL, 0, frees, 1,
					    NGNFS_WRITE_RELEASE, NGNFS_ACCESS_NONE, NULL),
			      0);
		statfs(&b, &free1, &reserved);
		EXPECT_U64("free blocks after FREE", free1, usable);
		/*
		 * the freed block reads as zeros, sent although the cached
		 * version is still the stored one (a stale copy elsewhere
		 * must not be answered "unchanged")
		 */
		memset(got_data, 0xa5, sizeof(got_data));
		EXPECT_STATUS(
		    tc_get(&b, blknos[0], NGNFS_ACCESS_READ, 1, &version, &has_data, got_data), 0);
		EXPECT_U64("version of the freed block", version, 1);
		if (!has_data)
			fail("GET of a freed block at its cached version answered unchanged");
		for (size_t i = 0; i < sizeof(got_data); i++) {
			if (got_data[i] != 0)
				fail("a freed block reads nonzero at byte %zu", i);
		}
		EXPECT_STATUS(tc_release(&b, blknos[0], NGNFS_ACCESS_NONE), 0);
		/* freeing again is refused: it is not allocated */
		EXPECT_STATUS(
		    tc_get(&b, blknos[0], NGNFS_ACCESS_WRITE, 0, &version, &has_data, NULL), 0);
		EXPECT_STATUS(tc_write_full(&b, NGNFS_WRITE_SINGLE, 0, NULL, 0, NULL, 0, frees, 1,
					    0, 0, NULL),
			      -EINVAL);
		EXPECT_STATUS(tc_release(&b, blknos[0], NGNFS_ACCESS_NONE), 0);
	}
	/* accounting survives a restart */
	EXPECT_STATUS(ngnfs_test_cluster_kill(cluster, 0, SIGTERM), 0);
	EXPECT_STATUS(ngnfs_test_cluster_restart(cluster, 0), 0);
	tc_close(&b);
	open_session(&b, cluster, 0, 0);
	statfs(&b, &free1, &reserved);
	EXPECT_U64("free blocks after restart", free1, usable);
	/* a reused block keeps counting versions up */
	{
		bool found = false;

		EXPECT_STATUS(tc_alloc(&b, 4, blknos, versions, &got), 0);
		for (uint32_t i = 0; i < got; i++) {
			if (versions[i] == 1)
				found = true;
		}
		if (!found)
			fail("expected the freed block among 4 reserved blocks with version 1");
	}
	tc_close(&b);
	stop(cluster);
}

/*
 * Every session that allocates gets its own epoch (inode generations
 * include it): the same for each ALLOC of one session, another for every
 * other session, and after a kill -9 and restart one above every epoch
 * handed out before, because the limit is recorded before an epoch below
 * it is handed out.
 */
static void case_session_epochs(void)
{
	const char *extra[] = { "--grace-ms", "0", NULL };
	struct ngnfs_test_cluster *cluster = start(1, extra);
	uint64_t blknos[2], versions[2];
	uint32_t got, first_a, epochs[3];
	struct tc a, b, c;

	format_all(cluster);
	open_session(&a, cluster, 0, 0);
	open_session(&b, cluster, 0, 0);
	EXPECT_STATUS(tc_alloc(&a, 1, blknos, versions, &got), 0);
	first_a = a.session_epoch;
	EXPECT_STATUS(tc_alloc(&b, 1, blknos, versions, &got), 0);
	EXPECT_STATUS(tc_alloc(&a, 2, blknos, versions, &got), 0);
	if (first_a == 0 || a.session_epoch != first_a)
		fail("one session's ALLOC replies carry epochs %u and %u, expected one non-zero "
		     "epoch",
		     first_a, a.session_epoch);
	if (b.session_epoch == 0 || b.session_epoch == a.session_epoch)
		fail("two sessions got epochs %u and %u, expected two distinct non-zero ones",
		     a.session_epoch, b.session_epoch);
	epochs[0] = a.session_epoch;
	epochs[1] = b.session_epoch;
	tc_close(&a);
	tc_close(&b);
	open_session(&c, cluster, 0, 0);
	EXPECT_STATUS(tc_alloc(&c, 1, blknos, versions, &got), 0);
	epochs[2] = c.session_epoch;
	if (epochs[2] == epochs[0] || epochs[2] == epochs[1] || epochs[2] == 0)
		fail("a later session got epoch %u, one of the earlier sessions' %u and %u",
		     epochs[2], epochs[0], epochs[1]);
	tc_close(&c);
	EXPECT_STATUS(ngnfs_test_cluster_kill(cluster, 0, SIGKILL), 0);
	EXPECT_STATUS(ngnfs_test_cluster_restart(cluster, 0), 0);
	open_session(&a, cluster, 0, 0);
	EXPECT_STATUS(tc_alloc(&a, 1, blknos, versions, &got), 0);
	for (unsigned int i = 0; i < 3; i++) {
		if (a.session_epoch <= epochs[i])
			fail("after kill -9 and restart a session got epoch %u, not above the "
			     "epoch %u handed out before",
			     a.session_epoch, epochs[i]);
	}
	tc_close(&a);
	stop(cluster);
}

/* ---- repair commands -------------------------------------------------------- */

static void case_cmpxchg_incoherent(void)
{
	struct ngnfs_test_cluster *cluster = start(1, NULL);
	uint8_t data[NGNFS_BLOCK_SIZE], back[NGNFS_BLOCK_SIZE];
	uint64_t version = 0;
	int block_status = 1;
	bool has_data;
	struct tc a, b;

	format_all(cluster);
	open_session(&a, cluster, 0, 0);
	open_session(&b, cluster, 0, 0);
	fill(data, 6);
	EXPECT_STATUS(tc_cmpxchg(&a, 20, 0, data, &version), 0);
	EXPECT_U64("version after CMPXCHG", version, 1);
	EXPECT_STATUS(tc_cmpxchg(&a, 20, 0, data, &version), -ESTALE);
	EXPECT_U64("current version reported with -ESTALE", version, 1);
	EXPECT_STATUS(tc_get(&b, 20, NGNFS_ACCESS_WRITE, 0, &version, &has_data, NULL), 0);
	EXPECT_STATUS(tc_cmpxchg(&a, 20, 1, data, &version), -EBUSY);

	/* READ_INCOHERENT ignores B's write grant and sees the committed contents */
	EXPECT_STATUS(tc_read_incoherent(&a, 20, &version, &block_status, back), 0);
	EXPECT_U64("READ_INCOHERENT block status", (uint64_t)block_status, 0);
	EXPECT_U64("READ_INCOHERENT version", version, 1);
	if (memcmp(back, data, sizeof(data)))
		fail("READ_INCOHERENT data differs from the CMPXCHG'd contents");
	EXPECT_STATUS(tc_release(&b, 20, NGNFS_ACCESS_NONE), 0);
	fill(data, 7);
	EXPECT_STATUS(tc_cmpxchg(&a, 20, 1, data, &version), 0);
	EXPECT_U64("version after the second CMPXCHG", version, 2);
	EXPECT_STATUS(tc_read_incoherent(&a, 30, &version, &block_status, back), 0);
	EXPECT_U64("READ_INCOHERENT version of an unwritten block", version, 0);
	tc_close(&a);
	tc_close(&b);
	stop(cluster);
}

/* ---- atomic sets across two devices ------------------------------------------ */

static const uint16_t both[2] = { 0, 1 };

/* Grant write on device-local index 1 of each device to tc[device], then stage. */
static void stage_on(struct tc *tc, unsigned int device, uint64_t set_id, uint8_t seed)
{
	uint8_t data[NGNFS_BLOCK_SIZE];
	uint64_t blkno = ngnfs_blkno_make((uint16_t)device, 1), version, new_version;
	struct ngnfs_block_request block;
	bool has_data;

	fill(data, seed);
	EXPECT_STATUS(tc_get(tc, blkno, NGNFS_ACCESS_WRITE, 0, &version, &has_data, NULL), 0);
	block = (struct ngnfs_block_request){ .blkno = blkno, .version = version, .data = data };
	EXPECT_STATUS(tc_write_full(tc, NGNFS_WRITE_STAGE, set_id, both, 2, &block, 1, NULL, 0, 0,
				    0, &new_version),
		      0);
	EXPECT_U64("version a staged block will have", new_version, version + 1);
}

static uint64_t incoherent_version(struct tc *tc, uint64_t blkno, uint8_t *data)
{
	uint64_t version = 0;
	int block_status = 0;

	EXPECT_STATUS(tc_read_incoherent(tc, blkno, &version, &block_status, data), 0);
	return version;
}

static void case_set_commit(void)
{
	struct ngnfs_test_cluster *cluster = start(2, NULL);
	struct tc client[2], reader;
	uint8_t data[NGNFS_BLOCK_SIZE], expected[NGNFS_BLOCK_SIZE];
	uint64_t blkno1 = ngnfs_blkno_make(1, 1), version;
	uint8_t answer = 0;
	bool has_data;

	format_all(cluster);
	open_session(&client[0], cluster, 0, 0);
	open_session(&client[1], cluster, 1, 0);
	open_session(&reader, cluster, 1, 0);
	stage_on(&client[1], 1, 0x5e7001, 0x21);
	stage_on(&client[0], 0, 0x5e7001, 0x20);

	/* staged blocks are invisible and pinned */
	EXPECT_U64("participant's version before commit", incoherent_version(&reader, blkno1, NULL),
		   0);
	EXPECT_STATUS(tc_get_send(&reader, blkno1, NGNFS_ACCESS_READ, 0, NULL), 0);
	EXPECT_STATUS(tc_release(&client[1], blkno1, NGNFS_ACCESS_NONE), 0);
	expect_no_grant(&reader, "reader of a staged block");
	/* COMMIT only at the primary */
	EXPECT_STATUS(tc_commit(&client[1], 0x5e7001), -EINVAL);
	EXPECT_STATUS(tc_commit(&client[0], 0x5e7001), 0);
	EXPECT_STATUS(tc_commit(&client[0], 0x5e7001), 0); /* idempotent */
	EXPECT_U64("primary's version after commit",
		   incoherent_version(&client[0], ngnfs_blkno_make(0, 1), NULL), 1);
	expect_no_grant(&reader, "reader of a staged block before RESOLVE");
	EXPECT_STATUS(tc_resolve(&client[1], 0x5e7001, NGNFS_SET_COMMITTED, &answer), 0);
	EXPECT_U64("RESOLVE answer", answer, NGNFS_SET_COMMITTED);
	EXPECT_STATUS(tc_grant_wait(&reader, 3000, NULL, &version, NULL, &has_data, data), 0);
	EXPECT_U64("participant's version after RESOLVE", version, 1);
	fill(expected, 0x21);
	if (!has_data || memcmp(data, expected, sizeof(data)))
		fail("participant's block does not hold the committed data");
	EXPECT_STATUS(tc_resolve(&client[1], 0x5e7001, NGNFS_SET_COMMITTED, &answer), -ENOENT);

	/* a set aborted by its client leaves the old contents */
	stage_on(&client[0], 0, 0x5e7002, 0x30);
	EXPECT_STATUS(tc_resolve(&client[0], 0x5e7002, NGNFS_SET_ABORTED, &answer), 0);
	EXPECT_STATUS(tc_commit(&client[0], 0x5e7002), -ESTALE);
	EXPECT_U64("primary's version after an aborted set",
		   incoherent_version(&client[0], ngnfs_blkno_make(0, 1), NULL), 1);
	tc_close(&client[0]);
	tc_close(&client[1]);
	tc_close(&reader);
	stop(cluster);
}

static void wait_staged_sets(struct tc *tc, uint64_t expected, const char *what)
{
	uint64_t total, free_blocks, reserved, staged = ~0ULL;
	uint64_t deadline = now_ms() + 8000;

	while (now_ms() < deadline) {
		EXPECT_STATUS(tc_statfs(tc, &total, &free_blocks, &reserved, &staged), 0);
		if (staged == expected)
			return;
		usleep(50000);
	}
	fail("%s: expected %llu staged sets within 8 s, still %llu", what,
	     (unsigned long long)expected, (unsigned long long)staged);
}

static void case_indoubt_abort(void)
{
	struct ngnfs_test_cluster *cluster = start(2, NULL);
	struct tc client[2], observer;
	uint64_t blkno1 = ngnfs_blkno_make(1, 1), version;
	bool has_data;

	format_all(cluster);
	open_session(&client[0], cluster, 0, 0);
	open_session(&client[1], cluster, 1, 0);
	open_session(&observer, cluster, 1, 0);
	stage_on(&client[1], 1, 0xab01, 0x40);
	wait_staged_sets(&observer, 1, "participant after STAGE");
	/* the client vanishes before staging at the primary and before COMMIT */
	tc_close(&client[1]);
	wait_staged_sets(&observer, 0, "participant after its staging session closed");
	if (!log_contains(cluster, 0, "recording ABORTED"))
		fail("expected the primary to log that it recorded ABORTED");
	EXPECT_U64("participant's version after abort", incoherent_version(&observer, blkno1, NULL),
		   0);
	/* the block is free for others again */
	EXPECT_STATUS(tc_get(&observer, blkno1, NGNFS_ACCESS_WRITE, 0, &version, &has_data, NULL),
		      0);
	/* a late stage and commit at the primary fail */
	{
		uint8_t data[NGNFS_BLOCK_SIZE];
		struct ngnfs_block_request block = { .blkno = ngnfs_blkno_make(0, 1),
						     .data = data };

		fill(data, 1);
		EXPECT_STATUS(tc_get(&client[0], block.blkno, NGNFS_ACCESS_WRITE, 0, &version,
				     &has_data, NULL),
			      0);
		EXPECT_STATUS(tc_write_full(&client[0], NGNFS_WRITE_STAGE, 0xab01, both, 2, &block,
					    1, NULL, 0, 0, 0, NULL),
			      -ESTALE);
		EXPECT_STATUS(tc_commit(&client[0], 0xab01), -ESTALE);
	}
	tc_close(&client[0]);
	tc_close(&observer);
	stop(cluster);
}

static void case_indoubt_commit(void)
{
	struct ngnfs_test_cluster *cluster = start(2, NULL);
	struct tc client[2], observer;
	uint8_t data[NGNFS_BLOCK_SIZE], expected[NGNFS_BLOCK_SIZE];
	uint64_t blkno1 = ngnfs_blkno_make(1, 1);

	format_all(cluster);
	open_session(&client[0], cluster, 0, 0);
	open_session(&client[1], cluster, 1, 0);
	open_session(&observer, cluster, 1, 0);
	stage_on(&client[1], 1, 0xcd01, 0x50);
	stage_on(&client[0], 0, 0xcd01, 0x51);
	EXPECT_STATUS(tc_commit(&client[0], 0xcd01), 0);
	/* the client dies before RESOLVE: the participant must learn COMMITTED */
	tc_close(&client[1]);
	tc_close(&client[0]);
	wait_staged_sets(&observer, 0, "participant after the client vanished post-COMMIT");
	EXPECT_U64("participant's version after recovery",
		   incoherent_version(&observer, blkno1, data), 1);
	fill(expected, 0x50);
	if (memcmp(data, expected, sizeof(data)))
		fail("participant applied different data than it staged");
	tc_close(&observer);
	stop(cluster);
}

static void case_indoubt_restart(void)
{
	struct ngnfs_test_cluster *cluster =
	    start(2, (const char *[]){ "--grace-ms", "200", NULL });
	struct tc client[2], observer;
	uint64_t blkno1 = ngnfs_blkno_make(1, 1);

	format_all(cluster);
	open_session(&client[0], cluster, 0, 0);
	open_session(&client[1], cluster, 1, 0);
	stage_on(&client[1], 1, 0xef01, 0x60);
	stage_on(&client[0], 0, 0xef01, 0x61);
	/* the participant dies after acknowledging the STAGE */
	EXPECT_STATUS(ngnfs_test_cluster_kill(cluster, 1, SIGKILL), 0);
	EXPECT_STATUS(tc_commit(&client[0], 0xef01), 0);
	tc_close(&client[0]);
	tc_close(&client[1]);
	EXPECT_STATUS(ngnfs_test_cluster_restart(cluster, 1), 0);
	open_session(&observer, cluster, 1, 0);
	wait_staged_sets(&observer, 0, "participant restarted with a stage in its store");
	EXPECT_U64("participant's version after restart recovery",
		   incoherent_version(&observer, blkno1, NULL), 1);
	tc_close(&observer);
	stop(cluster);
}

static void case_primary_timeout(void)
{
	struct ngnfs_test_cluster *cluster =
	    start(2, (const char *[]){ "--resolve-timeout-ms", "500", NULL });
	struct tc client;

	format_all(cluster);
	open_session(&client, cluster, 0, 0);
	stage_on(&client, 0, 0x7100, 0x70);
	wait_staged_sets(&client, 1, "primary after its own STAGE");
	/* the client stays connected but never commits: the primary aborts by itself */
	wait_staged_sets(&client, 0, "primary after the resolve timeout");
	EXPECT_STATUS(tc_commit(&client, 0x7100), -ESTALE);
	if (!log_contains(cluster, 0, "own stage unresolved after"))
		fail("expected the primary to log that it aborted its own old stage");
	tc_close(&client);
	stop(cluster);
}

/* ---- resolved sets stay resolved across restarts ------------------------------- */

/* Grant write on device-local index of device to tc, then stage it in set_id. */
static void stage_index(struct tc *tc, unsigned int device, uint64_t index, uint64_t set_id,
			uint8_t seed)
{
	uint8_t data[NGNFS_BLOCK_SIZE];
	uint64_t blkno = ngnfs_blkno_make((uint16_t)device, index), version;
	struct ngnfs_block_request block;
	bool has_data;

	fill(data, seed);
	EXPECT_STATUS(tc_get(tc, blkno, NGNFS_ACCESS_WRITE, 0, &version, &has_data, NULL), 0);
	block = (struct ngnfs_block_request){ .blkno = blkno, .version = version, .data = data };
	EXPECT_STATUS(
	    tc_write_full(tc, NGNFS_WRITE_STAGE, set_id, both, 2, &block, 1, NULL, 0, 0, 0, NULL),
	    0);
}

/* How many keys of one kind a stopped device's store holds. */
static unsigned int store_key_count(struct ngnfs_test_cluster *cluster, unsigned int device,
				    uint8_t kind)
{
	rocksdb_options_t *options = rocksdb_options_create();
	rocksdb_readoptions_t *read_options = rocksdb_readoptions_create();
	rocksdb_iterator_t *iterator;
	unsigned int count = 0;
	char *error = NULL;
	rocksdb_t *rocks;

	rocks = rocksdb_open_for_read_only(options, ngnfs_test_cluster_db_path(cluster, device), 0,
					   &error);
	if (error)
		fail("cannot open device %u's RocksDB %s: %s", device,
		     ngnfs_test_cluster_db_path(cluster, device), error);
	iterator = rocksdb_create_iterator(rocks, read_options);
	for (rocksdb_iter_seek(iterator, (const char *)&kind, 1); rocksdb_iter_valid(iterator);
	     rocksdb_iter_next(iterator)) {
		size_t length;
		const char *key = rocksdb_iter_key(iterator, &length);

		if (length < 1 || (uint8_t)key[0] != kind)
			break;
		count++;
	}
	rocksdb_iter_destroy(iterator);
	rocksdb_close(rocks);
	rocksdb_readoptions_destroy(read_options);
	rocksdb_options_destroy(options);
	return count;
}

/* Write a stage of set_id (primary device 0, participants 0 and 1) of index into a stopped store.
 */
static void plant_stage(struct ngnfs_test_cluster *cluster, unsigned int device, uint64_t set_id,
			uint64_t index, uint8_t seed)
{
	rocksdb_options_t *options = rocksdb_options_create();
	rocksdb_writeoptions_t *write_options = rocksdb_writeoptions_create();
	struct ngnfs_store_staged_block staged;
	struct ngnfs_store_stage header;
	uint8_t header_key[NGNFS_STORE_SET_KEY_SIZE] = { NGNFS_STORE_KEY_STAGE };
	uint8_t staged_key[NGNFS_STORE_STAGED_KEY_SIZE] = { NGNFS_STORE_KEY_STAGED };
	uint64_t be_set_id = htobe64(set_id), be_index = htobe64(index), le_zero = 0;
	char *error = NULL;
	rocksdb_t *rocks;

	memcpy(header_key + 1, &be_set_id, 8);
	memcpy(staged_key + 1, &be_set_id, 8);
	memcpy(staged_key + 9, &be_index, 8);
	memset(&header, 0, sizeof(header));
	header.created_ns = htole64((uint64_t)time(NULL) * 1000000000ULL);
	header.participant_count = htole16(2);
	header.participants[0] = htole16(0);
	header.participants[1] = htole16(1);
	memset(&staged, 0, sizeof(staged));
	staged.kind = NGNFS_STORE_STAGED_WRITE;
	fill(staged.data, seed);
	staged.crc = htole32(ngnfs_crc32c(ngnfs_crc32c(0, &le_zero, sizeof(le_zero)), staged.data,
					  NGNFS_BLOCK_SIZE));
	rocks = rocksdb_open(options, ngnfs_test_cluster_db_path(cluster, device), &error);
	if (error)
		fail("cannot open device %u's RocksDB: %s", device, error);
	rocksdb_put(rocks, write_options, (const char *)header_key, sizeof(header_key),
		    (const char *)&header, sizeof(header), &error);
	if (!error)
		rocksdb_put(rocks, write_options, (const char *)staged_key, sizeof(staged_key),
			    (const char *)&staged, sizeof(staged), &error);
	if (error)
		fail("cannot plant the stage of set %016llx: %s", (unsigned long long)set_id,
		     error);
	rocksdb_close(rocks);
	rocksdb_writeoptions_destroy(write_options);
	rocksdb_options_destroy(options);
}

static unsigned int log_count(struct ngnfs_test_cluster *cluster, unsigned int device,
			      const char *text)
{
	char *log = ngnfs_test_read_file(ngnfs_test_cluster_log_path(cluster, device), NULL);
	unsigned int count = 0;

	for (const char *at = log; at && (at = strstr(at, text)); at += strlen(text))
		count++;
	free(log);
	return count;
}

/*
 * Every way a set ends (on the participant: dropped by the client's
 * RESOLVE(ABORTED), applied by RESOLVE(COMMITTED), dropped by the resolver
 * after the primary recorded ABORTED; on the primary: applied by COMMIT,
 * dropped by RESOLVE(ABORTED)) removes its stage from the store: a
 * restart with the primary down, so that nothing could be resolved again,
 * finds no stage and leaves the block unpinned.
 */
static void case_resolved_sets_stay_resolved(void)
{
	struct ngnfs_test_cluster *cluster =
	    start(2, (const char *[]){ "--grace-ms", "200", NULL });
	struct tc client[2], observer;
	uint64_t blkno1 = ngnfs_blkno_make(1, 1), version, staged = ~0ULL, total, free_blocks,
		 reserved;
	uint8_t answer = 0, data[NGNFS_BLOCK_SIZE], expected[NGNFS_BLOCK_SIZE];
	bool has_data;

	format_all(cluster);
	open_session(&client[0], cluster, 0, 0);
	open_session(&client[1], cluster, 1, 0);
	open_session(&observer, cluster, 1, 0);
	stage_index(&client[1], 1, 1, 0xd001, 0x11);
	EXPECT_STATUS(tc_resolve(&client[1], 0xd001, NGNFS_SET_ABORTED, &answer), 0);
	stage_index(&client[1], 1, 1, 0xd002, 0x12);
	stage_index(&client[0], 0, 1, 0xd002, 0x13);
	EXPECT_STATUS(tc_commit(&client[0], 0xd002), 0);
	EXPECT_STATUS(tc_resolve(&client[1], 0xd002, NGNFS_SET_COMMITTED, &answer), 0);
	stage_index(&client[0], 0, 2, 0xd004, 0x15); /* the primary's own stage, aborted */
	EXPECT_STATUS(tc_resolve(&client[0], 0xd004, NGNFS_SET_ABORTED, &answer), 0);
	stage_index(&client[1], 1, 1, 0xd003, 0x14);
	tc_close(&client[1]); /* the resolver asks the primary, which records ABORTED */
	wait_staged_sets(&observer, 0, "participant after its staging session closed");
	if (!log_contains(cluster, 0, "recording ABORTED"))
		fail("expected the primary to record ABORTED for set d003");
	tc_close(&observer);
	tc_close(&client[0]);
	EXPECT_STATUS(ngnfs_test_cluster_kill(cluster, 0, SIGTERM), 0);
	EXPECT_STATUS(ngnfs_test_cluster_kill(cluster, 1, SIGTERM), 0);

	for (unsigned int device = 0; device < 2; device++) {
		EXPECT_U64("stage header keys left in the store",
			   store_key_count(cluster, device, NGNFS_STORE_KEY_STAGE), 0);
		EXPECT_U64("staged block keys left in the store",
			   store_key_count(cluster, device, NGNFS_STORE_KEY_STAGED), 0);
	}

	EXPECT_STATUS(ngnfs_test_cluster_restart(cluster, 1), 0);
	open_session(&observer, cluster, 1, NGNFS_HELLO_RECLAIM);
	EXPECT_STATUS(tc_statfs(&observer, &total, &free_blocks, &reserved, &staged), 0);
	EXPECT_U64("staged sets after a restart", staged, 0);
	if (log_count(cluster, 1, "staged sets found") != 0)
		fail("the restarted participant found resolved sets in its store again");
	EXPECT_STATUS(tc_get(&observer, blkno1, NGNFS_ACCESS_WRITE, 0, &version, &has_data, data),
		      0);
	EXPECT_U64("version of the block after one applied set", version, 1);
	fill(expected, 0x12);
	if (!has_data || memcmp(data, expected, sizeof(data)))
		fail("block %llu does not hold the applied set's data", (unsigned long long)blkno1);
	tc_close(&observer);
	EXPECT_STATUS(ngnfs_test_cluster_restart(cluster, 0), 0);
	open_session(&observer, cluster, 0, NGNFS_HELLO_RECLAIM);
	EXPECT_STATUS(tc_statfs(&observer, &total, &free_blocks, &reserved, &staged), 0);
	EXPECT_U64("staged sets on the restarted primary", staged, 0);
	if (log_count(cluster, 0, "staged sets found") != 0)
		fail("the restarted primary found resolved sets in its store again");
	tc_close(&observer);
	stop(cluster);
}

/*
 * A store written before drops were persisted holds stale stages of
 * dropped sets on the same block as a live in-doubt one.  With the
 * primary down the live set's pin must hold, and dropping the stale sets
 * (one sorting before the live set, one after) must not lift it; once
 * the primary is back the reader sees the whole committed set.
 */
static void case_stale_stage_keeps_pin(void)
{
	struct ngnfs_test_cluster *cluster =
	    start(2, (const char *[]){ "--grace-ms", "200", NULL });
	struct tc client[2], observer, reader;
	uint64_t blkno1 = ngnfs_blkno_make(1, 1), version;
	uint8_t answer = 0, data[NGNFS_BLOCK_SIZE], expected[NGNFS_BLOCK_SIZE];
	bool has_data = false;

	format_all(cluster);
	open_session(&client[0], cluster, 0, 0);
	open_session(&client[1], cluster, 1, 0);
	stage_index(&client[1], 1, 1, 0xe010, 0x31);
	stage_index(&client[0], 0, 1, 0xe010, 0x32);
	EXPECT_STATUS(ngnfs_test_cluster_kill(cluster, 1, SIGKILL), 0);
	EXPECT_STATUS(tc_commit(&client[0], 0xe010), 0);
	tc_close(&client[0]);
	tc_close(&client[1]);
	EXPECT_STATUS(ngnfs_test_cluster_kill(cluster, 0, SIGTERM), 0);
	plant_stage(cluster, 1, 0xe001, 1, 0x41);
	plant_stage(cluster, 1, 0xe020, 1, 0x42);

	EXPECT_STATUS(ngnfs_test_cluster_restart(cluster, 1), 0);
	open_session(&observer, cluster, 1, NGNFS_HELLO_RECLAIM);
	open_session(&reader, cluster, 1, NGNFS_HELLO_RECLAIM);
	wait_staged_sets(&observer, 3, "participant restarted with three stages of one block");
	EXPECT_STATUS(tc_get_send(&reader, blkno1, NGNFS_ACCESS_READ, 0, NULL), 0);
	usleep(1200000); /* the resolver has tried the unreachable primary */
	if (!log_contains(cluster, 1, "cannot learn its outcome from primary device 0"))
		fail("expected the participant to fail asking the stopped primary");
	expect_no_grant(&reader, "reader of a block of an in-doubt set whose primary is down");
	EXPECT_STATUS(tc_resolve(&observer, 0xe001, NGNFS_SET_ABORTED, &answer), 0);
	EXPECT_STATUS(tc_resolve(&observer, 0xe020, NGNFS_SET_ABORTED, &answer), 0);
	wait_staged_sets(&observer, 1, "participant after dropping the two stale sets");
	expect_no_grant(&reader, "reader of a block whose stale sets were dropped while the live "
				 "set is unresolved");

	EXPECT_STATUS(ngnfs_test_cluster_restart(cluster, 0), 0);
	EXPECT_STATUS(tc_grant_wait(&reader, 8000, NULL, &version, NULL, &has_data, data), 0);
	EXPECT_U64("version the reader sees once the set is resolved", version, 1);
	fill(expected, 0x31);
	if (!has_data || memcmp(data, expected, sizeof(data)))
		fail("block %llu does not hold the committed set's data",
		     (unsigned long long)blkno1);
	tc_close(&reader);
	tc_close(&observer);
	stop(cluster);
}

/*
 * SIGTERM while a restarted participant resolves many in-doubt sets:
 * blockd exits cleanly every time (sanitizers included), and what it had
 * not resolved is resolved by the next start.
 */
static void case_indoubt_sigterm(void)
{
	enum { SET_COUNT = 40, ROUNDS = 6 };
	struct ngnfs_test_cluster *cluster =
	    start(2, (const char *[]){ "--grace-ms", "200", NULL });
	struct tc client[2], observer;
	uint64_t version;

	format_all(cluster);
	open_session(&client[0], cluster, 0, 0);
	open_session(&client[1], cluster, 1, 0);
	for (uint64_t i = 0; i < SET_COUNT; i++) {
		stage_index(&client[1], 1, 10 + i, 0xf000 + i, (uint8_t)i);
		stage_index(&client[0], 0, 10 + i, 0xf000 + i, (uint8_t)(i + 100));
	}
	EXPECT_STATUS(ngnfs_test_cluster_kill(cluster, 1, SIGKILL), 0);
	for (uint64_t i = 0; i < SET_COUNT; i++)
		EXPECT_STATUS(tc_commit(&client[0], 0xf000 + i), 0);
	tc_close(&client[0]);
	tc_close(&client[1]);
	/* Odd rounds stop the primary at the same time, in the middle of its answers. */
	for (unsigned int round = 0; round < ROUNDS; round++) {
		unsigned int devices = round % 2 ? 2 : 1;

		EXPECT_STATUS(ngnfs_test_cluster_restart(cluster, 1), 0);
		usleep(round * 3000);
		for (unsigned int device = 2 - devices; device < 2; device++) {
			if (kill(ngnfs_test_cluster_pid(cluster, device), SIGTERM))
				fail("cannot SIGTERM device %u: %s", device, strerror(errno));
		}
		for (unsigned int device = 2 - devices; device < 2; device++) {
			int wait_status = 0;
			char text[64];

			EXPECT_STATUS(
			    ngnfs_test_cluster_wait_exit(cluster, device, 15000, &wait_status), 0);
			if (!WIFEXITED(wait_status) || WEXITSTATUS(wait_status) != 0)
				fail("round %u: device %u on SIGTERM while in-doubt sets are "
				     "resolved: expected exit status 0, got %s",
				     round, device,
				     ngnfs_test_describe_status(wait_status, text, sizeof(text)));
		}
		if (devices == 2)
			EXPECT_STATUS(ngnfs_test_cluster_restart(cluster, 0), 0);
	}
	EXPECT_STATUS(ngnfs_test_cluster_restart(cluster, 1), 0);
	open_session(&observer, cluster, 1, 0);
	wait_staged_sets(&observer, 0, "participant after the SIGTERM rounds");
	for (uint64_t i = 0; i < SET_COUNT; i++) {
		version = incoherent_version(&observer, ngnfs_blkno_make(1, 10 + i), NULL);
		EXPECT_U64("version of a committed in-doubt block", version, 1);
	}
	tc_close(&observer);
	stop(cluster);
}

/* ---- group commit -------------------------------------------------------------- */

struct group_writer {
	pthread_t thread;
	const char *address;
	uint64_t blkno;
	int error;
};

static void *group_writer_thread(void *arg)
{
	struct group_writer *writer = arg;
	uint8_t data[NGNFS_BLOCK_SIZE];
	uint64_t version = 0;
	bool has_data;
	struct tc tc;

	fill(data, (uint8_t)writer->blkno);
	writer->error = tc_connect(&tc, writer->address);
	if (!writer->error)
		writer->error = tc_hello(&tc, fs_id, 0, NULL);
	if (!writer->error)
		writer->error =
		    tc_get(&tc, writer->blkno, NGNFS_ACCESS_WRITE, 0, &version, &has_data, NULL);
	for (int i = 0; i < 25 && !writer->error; i++)
		writer->error = tc_write(&tc, writer->blkno, version, data, &version);
	tc_close(&tc);
	return NULL;
}

static void case_group_commit(void)
{
	struct ngnfs_test_cluster *cluster = start(1, NULL);
	struct group_writer writers[16];
	unsigned long long batches = 0, requests = 0, early = 0;

	format_all(cluster);
	for (int i = 0; i < 16; i++) {
		writers[i] =
		    (struct group_writer){ .address = ngnfs_test_cluster_address(cluster, 0),
					   .blkno = 500 + (uint64_t)i };
		pthread_create(&writers[i].thread, NULL, group_writer_thread, &writers[i]);
	}
	for (int i = 0; i < 16; i++) {
		pthread_join(writers[i].thread, NULL);
		if (writers[i].error)
			fail("writer %d: expected its 25 writes to succeed, got %d (%s)", i,
			     writers[i].error, strerror(-writers[i].error));
	}
	stop_counts(cluster, &batches, &requests, &early);
	/* 400 writes + FORMAT, from 16 concurrent sessions, synced: they must share batches */
	EXPECT_U64("requests committed", requests, 401);
	if (batches >= requests)
		fail("expected concurrent writes to share group commits, got %llu batches for %llu "
		     "requests",
		     batches, requests);
	EXPECT_STATUS(ngnfs_test_cluster_restart(cluster, 0), 0);
	stop(cluster);
}

/* ---- kills while writes are in flight -------------------------------------------- */

struct load_writer {
	pthread_t thread;
	const char *address;
	uint64_t blkno;
	uint64_t acknowledged; /* highest version whose WRITE_REPLY arrived */
	atomic_bool stop;      /* set by the main thread, polled by the writer */
};

static void *load_writer_thread(void *arg)
{
	struct load_writer *writer = arg;
	uint8_t data[NGNFS_BLOCK_SIZE];
	uint64_t version = 0, next;
	bool has_data;
	struct tc tc;

	if (tc_connect(&tc, writer->address) || tc_hello(&tc, fs_id, 0, NULL) ||
	    tc_get(&tc, writer->blkno, NGNFS_ACCESS_WRITE, 0, &version, &has_data, NULL))
		return NULL;
	while (!atomic_load(&writer->stop)) {
		/* the data names the version it becomes, so version and data can be checked */
		next = version + 1;
		memset(data, (int)writer->blkno, sizeof(data));
		memcpy(data, &next, sizeof(next));
		if (tc_write(&tc, writer->blkno, version, data, &version))
			break;
		writer->acknowledged = version;
	}
	tc_close(&tc);
	return NULL;
}

static void kill_under_load(int sig)
{
	struct ngnfs_test_cluster *cluster = start(1, (const char *[]){ "--grace-ms", "0", NULL });
	struct load_writer writers[8];
	uint8_t data[NGNFS_BLOCK_SIZE];
	struct tc tc;

	format_all(cluster);
	for (int i = 0; i < 8; i++) {
		writers[i] =
		    (struct load_writer){ .address = ngnfs_test_cluster_address(cluster, 0),
					  .blkno = 700 + (uint64_t)i };
		pthread_create(&writers[i].thread, NULL, load_writer_thread, &writers[i]);
	}
	usleep(400000);
	EXPECT_STATUS(ngnfs_test_cluster_kill(cluster, 0, sig), 0);
	for (int i = 0; i < 8; i++) {
		atomic_store(&writers[i].stop, true);
		pthread_join(writers[i].thread, NULL);
	}
	EXPECT_STATUS(ngnfs_test_cluster_restart(cluster, 0), 0);
	open_session(&tc, cluster, 0, NGNFS_HELLO_RECLAIM);
	for (int i = 0; i < 8; i++) {
		uint64_t version = 0, embedded = 0;
		int block_status = 0;

		if (writers[i].acknowledged == 0)
			fail("writer %d got no write acknowledged in 400 ms", i);
		EXPECT_STATUS(
		    tc_read_incoherent(&tc, writers[i].blkno, &version, &block_status, data), 0);
		EXPECT_U64("block status after restart", (uint64_t)block_status, 0);
		memcpy(&embedded, data, sizeof(embedded));
		if (version < writers[i].acknowledged)
			fail("block %llu: version %llu after restart, but version %llu was "
			     "acknowledged before signal %d",
			     (unsigned long long)writers[i].blkno, (unsigned long long)version,
			     (unsigned long long)writers[i].acknowledged, sig);
		if (embedded != version)
			fail("block %llu: version %llu holds the data of version %llu",
			     (unsigned long long)writers[i].blkno, (unsigned long long)version,
			     (unsigned long long)embedded);
	}
	tc_close(&tc);
	stop(cluster);
}

static void case_sigterm_under_load(void)
{
	kill_under_load(SIGTERM);
}

static void case_sigkill_under_load(void)
{
	kill_under_load(SIGKILL);
}

/* ---- restarts --------------------------------------------------------------- */

static void restart_keeps_writes(int sig)
{
	struct ngnfs_test_cluster *cluster =
	    start(1, (const char *[]){ "--grace-ms", "300", NULL });
	uint8_t data[NGNFS_BLOCK_SIZE], back[NGNFS_BLOCK_SIZE];
	uint64_t version, new_version;
	bool has_data;
	struct tc tc;

	format_all(cluster);
	open_session(&tc, cluster, 0, 0);
	for (uint64_t blkno = 100; blkno < 150; blkno++) {
		fill(data, (uint8_t)blkno);
		EXPECT_STATUS(tc_get(&tc, blkno, NGNFS_ACCESS_WRITE, 0, &version, &has_data, NULL),
			      0);
		EXPECT_STATUS(tc_write(&tc, blkno, 0, data, &new_version), 0);
		EXPECT_STATUS(tc_write(&tc, blkno, 1, data, &new_version), 0);
	}
	EXPECT_STATUS(ngnfs_test_cluster_kill(cluster, 0, sig), 0);
	tc_close(&tc);
	EXPECT_STATUS(ngnfs_test_cluster_restart(cluster, 0), 0);
	open_session(&tc, cluster, 0, NGNFS_HELLO_RECLAIM);
	for (uint64_t blkno = 100; blkno < 150; blkno++) {
		fill(data, (uint8_t)blkno);
		EXPECT_STATUS(tc_get(&tc, blkno, NGNFS_ACCESS_READ, 0, &version, &has_data, back),
			      0);
		EXPECT_U64("version of an acknowledged write after restart", version, 2);
		if (!has_data || memcmp(back, data, sizeof(data)))
			fail("block %llu lost its acknowledged contents across the restart",
			     (unsigned long long)blkno);
	}
	tc_close(&tc);
	stop(cluster);
}

/* Writes every block of [first, first + count) once more: version round, contents seeded by it. */
static void write_round(struct tc *tc, uint64_t first, unsigned int count, uint64_t round)
{
	uint8_t data[NGNFS_BLOCK_SIZE];
	uint64_t version, new_version;
	bool has_data;

	for (uint64_t blkno = first; blkno < first + count; blkno++) {
		fill(data, (uint8_t)(blkno * 16 + round));
		EXPECT_STATUS(tc_get(tc, blkno, NGNFS_ACCESS_WRITE, 0, &version, &has_data, NULL),
			      0);
		EXPECT_STATUS(tc_write(tc, blkno, round - 1, data, &new_version), 0);
		EXPECT_U64("version of a write", new_version, round);
	}
}

/* Every block of the range has the version and contents of write_round(round). */
static void expect_round(struct tc *tc, uint64_t first, unsigned int count, uint64_t round,
			 const char *what)
{
	uint8_t data[NGNFS_BLOCK_SIZE], back[NGNFS_BLOCK_SIZE];
	uint64_t version;
	bool has_data;

	for (uint64_t blkno = first; blkno < first + count; blkno++) {
		fill(data, (uint8_t)(blkno * 16 + round));
		EXPECT_STATUS(tc_get(tc, blkno, NGNFS_ACCESS_READ, 0, &version, &has_data, back),
			      0);
		if (version != round || !has_data || memcmp(back, data, sizeof(data)))
			fail("%s: block %llu is at version %llu%s, expected the acknowledged write "
			     "%llu",
			     what, (unsigned long long)blkno, (unsigned long long)version,
			     has_data && memcmp(back, data, sizeof(data)) ? " with other contents"
									  : "",
			     (unsigned long long)round);
		EXPECT_STATUS(tc_release(tc, blkno, NGNFS_ACCESS_NONE), 0);
	}
}

/*
 * The commit log brings back what RocksDB lost.  --commit-log-only-after 1
 * leaves every group commit after the first (FORMAT) in the commit log
 * alone, as a power cut would leave RocksDB without its unsynced tail:
 * after a kill -9 and restart every acknowledged write is there, applied
 * from the log, and so after a second round and a clean stop, which finds
 * the writer where the replay left it.
 */
static void case_commit_log_replay(void)
{
	enum { FIRST = 100, COUNT = 30 };
	struct ngnfs_test_cluster *cluster =
	    start(1, (const char *[]){ "--grace-ms", "0", "--commit-log-only-after", "1", NULL });
	struct tc tc;

	format_all(cluster);
	open_session(&tc, cluster, 0, 0);
	write_round(&tc, FIRST, COUNT, 1);
	EXPECT_STATUS(ngnfs_test_cluster_kill(cluster, 0, SIGKILL), 0);
	tc_close(&tc);
	EXPECT_STATUS(ngnfs_test_cluster_restart(cluster, 0), 0);
	/* 31: the FORMAT too, which RocksDB had only in memory (no WAL) */
	if (!log_contains(cluster, 0, "commit log: applied 31 group commits"))
		fail("blockd did not say it applied the FORMAT and the 30 writes from the commit "
		     "log");
	open_session(&tc, cluster, 0, 0);
	expect_round(&tc, FIRST, COUNT, 1, "after kill -9, RocksDB without them");
	write_round(&tc, FIRST, COUNT, 2);
	EXPECT_STATUS(ngnfs_test_cluster_kill(cluster, 0, SIGTERM), 0);
	tc_close(&tc);
	EXPECT_STATUS(ngnfs_test_cluster_restart(cluster, 0), 0);
	open_session(&tc, cluster, 0, 0);
	expect_round(&tc, FIRST, COUNT, 2, "after a second round and SIGTERM");
	tc_close(&tc);
	stop(cluster);
}

/*
 * A 1 MiB commit log (one block's write is an 8 KiB record) goes round
 * several times under 40 blocks written 12 times: it syncs RocksDB's WAL
 * before reusing space, and after kill -9 the replay starts where the
 * database says and takes no record of an older lap for a new one (each
 * would put an older version back).
 */
static void case_commit_log_wraps(void)
{
	enum { FIRST = 200, COUNT = 40, ROUNDS = 12 };
	struct ngnfs_test_cluster *cluster =
	    start(1, (const char *[]){ "--grace-ms", "0", "--commit-log-mb", "1", NULL });
	unsigned long long flushes = 0;
	char *log, *line;
	struct tc tc;

	format_all(cluster);
	open_session(&tc, cluster, 0, 0);
	for (uint64_t round = 1; round <= ROUNDS / 2; round++)
		write_round(&tc, FIRST, COUNT, round);
	EXPECT_STATUS(ngnfs_test_cluster_kill(cluster, 0, SIGTERM), 0);
	tc_close(&tc);
	log = ngnfs_test_read_file(ngnfs_test_cluster_log_path(cluster, 0), NULL);
	line = log ? strstr(log, "(commit log: ") : NULL;
	if (!line || sscanf(line, "(commit log: %llu RocksDB flushes", &flushes) != 1 ||
	    flushes < 1)
		fail("expected the stop line to count RocksDB flushes that let the log go round, "
		     "got %s",
		     line ? line : "no line");
	free(log);
	EXPECT_STATUS(ngnfs_test_cluster_restart(cluster, 0), 0);
	open_session(&tc, cluster, 0, 0);
	expect_round(&tc, FIRST, COUNT, ROUNDS / 2, "after SIGTERM");
	for (uint64_t round = ROUNDS / 2 + 1; round <= ROUNDS; round++)
		write_round(&tc, FIRST, COUNT, round);
	EXPECT_STATUS(ngnfs_test_cluster_kill(cluster, 0, SIGKILL), 0);
	tc_close(&tc);
	EXPECT_STATUS(ngnfs_test_cluster_restart(cluster, 0), 0);
	open_session(&tc, cluster, 0, 0);
	expect_round(&tc, FIRST, COUNT, ROUNDS, "after kill -9");
	tc_close(&tc);
	stop(cluster);
}

/* Device 0's commit log file. */
static void commit_log_path(struct ngnfs_test_cluster *cluster, char *path, size_t size)
{
	snprintf(path, size, "%s/%s", ngnfs_test_cluster_db_path(cluster, 0),
		 NGNFS_COMMIT_LOG_FILE);
}

/* A batch record of a stopped device's commit log, as the tests find them. */
struct log_record {
	uint64_t seq;
	uint64_t offset;
};

/*
 * The batch records of the commit log (whole or not), in sequence order,
 * and the file's contents, for a test to damage.
 */
static uint8_t *read_log_records(struct ngnfs_test_cluster *cluster, size_t *size,
				 struct log_record *records, unsigned int max, unsigned int *count)
{
	char path[4200];
	uint8_t *log;

	commit_log_path(cluster, path, sizeof(path));
	log = (uint8_t *)ngnfs_test_read_file(path, size);
	if (!log)
		fail("cannot read the commit log %s", path);
	*count = 0;
	for (size_t offset = 0; offset + NGNFS_COMMIT_LOG_ALIGN <= *size;
	     offset += NGNFS_COMMIT_LOG_ALIGN) {
		struct ngnfs_commit_log_record header;
		unsigned int at;

		memcpy(&header, log + offset, sizeof(header));
		if (le32toh(header.magic) != NGNFS_COMMIT_LOG_MAGIC ||
		    le16toh(header.kind) != NGNFS_COMMIT_LOG_BATCH || *count == max)
			continue;
		for (at = *count; at > 0 && records[at - 1].seq > le64toh(header.seq); at--)
			records[at] = records[at - 1];
		records[at].seq = le64toh(header.seq);
		records[at].offset = offset;
		(*count)++;
	}
	return log;
}

/* Flips one byte of a record's payload in the stopped device's log, as a media error would. */
static void damage_log_record(struct ngnfs_test_cluster *cluster, const struct log_record *record)
{
	char path[4200];
	uint8_t byte;
	int fd;

	commit_log_path(cluster, path, sizeof(path));
	fd = open(path, O_RDWR);
	if (fd < 0 ||
	    pread(fd, &byte, 1,
		  (off_t)(record->offset + sizeof(struct ngnfs_commit_log_record) + 100)) != 1)
		fail("cannot read record %llu of %s", (unsigned long long)record->seq, path);
	byte ^= 0x40;
	if (pwrite(fd, &byte, 1,
		   (off_t)(record->offset + sizeof(struct ngnfs_commit_log_record) + 100)) != 1 ||
	    fsync(fd) < 0 || close(fd) < 0)
		fail("cannot damage record %llu of %s", (unsigned long long)record->seq, path);
}

/* Blocks [first, first + count) are at `version` (0: never written). */
static void expect_version(struct tc *tc, uint64_t first, unsigned int count, uint64_t expected,
			   const char *what)
{
	uint64_t version;
	bool has_data;

	for (uint64_t blkno = first; blkno < first + count; blkno++) {
		EXPECT_STATUS(tc_get(tc, blkno, NGNFS_ACCESS_READ, 0, &version, &has_data, NULL),
			      0);
		if (version != expected || has_data != (expected != 0))
			fail("%s: block %llu is at version %llu%s, expected %llu", what,
			     (unsigned long long)blkno, (unsigned long long)version,
			     has_data ? "" : " without data", (unsigned long long)expected);
		EXPECT_STATUS(tc_release(tc, blkno, NGNFS_ACCESS_NONE), 0);
	}
}

/*
 * Leaves COUNT acknowledged one-block group commits in a 2 MiB commit log
 * alone (RocksDB "lost" them, --commit-log-only-after 1) and the device
 * killed: the records, one per block in block order, in `records`.
 */
static struct ngnfs_test_cluster *log_only_writes(uint64_t first, unsigned int count,
						  struct log_record *records)
{
	struct ngnfs_test_cluster *cluster =
	    start(1, (const char *[]){ "--grace-ms", "0", "--commit-log-only-after", "1",
				       "--commit-log-mb", "2", NULL });
	unsigned int found, written = 0;
	struct tc tc;
	uint8_t *log;
	size_t size;

	format_all(cluster);
	open_session(&tc, cluster, 0, 0);
	write_round(&tc, first, count, 1);
	EXPECT_STATUS(ngnfs_test_cluster_kill(cluster, 0, SIGKILL), 0);
	tc_close(&tc);
	log = read_log_records(cluster, &size, records, count + 8, &found);
	free(log);
	/* the FORMAT (seq 1, in RocksDB too) and then one record per write */
	for (unsigned int i = 0; i < found; i++)
		if (records[i].seq > 1)
			records[written++] = records[i];
	EXPECT_U64("records of the writes in the commit log", written, count);
	return cluster;
}

/*
 * A record damaged in the middle of the log, with whole records after it,
 * was acknowledged: blockd refuses to start rather than lose the writes
 * after it, and leaves the log as it was.  Started once with
 * --commit-log-accept-damage true it keeps what came before the damage,
 * and numbers its records past the damaged ones, so that the next start
 * neither refuses again nor applies any of them.
 */
static void case_commit_log_damage(void)
{
	enum { FIRST = 100, COUNT = 30, DAMAGED = 12 };
	struct log_record records[COUNT + 8];
	struct ngnfs_test_cluster *cluster = log_only_writes(FIRST, COUNT, records);
	unsigned int found;
	uint8_t *before, *after;
	size_t size_before, size_after;
	struct tc tc;

	damage_log_record(cluster, &records[DAMAGED]);
	before = read_log_records(cluster, &size_before, records, COUNT + 8, &found);
	if (ngnfs_test_cluster_restart(cluster, 0) == 0)
		fail("blockd started on a commit log damaged before 17 acknowledged records");
	if (!log_contains(cluster, 0, "is damaged") ||
	    !log_contains(cluster, 0, "whole records from") ||
	    !log_contains(cluster, 0, "Refusing to start") ||
	    !log_contains(cluster, 0, "--commit-log-accept-damage true"))
		fail("blockd's refusal did not explain the damage and the way out");
	after = read_log_records(cluster, &size_after, records, COUNT + 8, &found);
	if (size_after != size_before || memcmp(before, after, size_before))
		fail("blockd changed the damaged commit log while refusing it");
	free(before);
	free(after);

	EXPECT_STATUS(
	    ngnfs_test_cluster_restart_args(
		cluster, 0, (const char *[]){ "--commit-log-accept-damage", "true", NULL }),
	    0);
	if (!log_contains(cluster, 0, "started without records"))
		fail("blockd did not log which records it started without");
	open_session(&tc, cluster, 0, 0);
	expect_round(&tc, FIRST, DAMAGED, 1, "before the damaged record");
	expect_version(&tc, FIRST + DAMAGED, COUNT - DAMAGED, 0,
		       "the damaged record and those after it");
	write_round(&tc, FIRST, DAMAGED, 2);
	EXPECT_STATUS(ngnfs_test_cluster_kill(cluster, 0, SIGKILL), 0);
	tc_close(&tc);

	EXPECT_STATUS(ngnfs_test_cluster_restart(cluster, 0), 0);
	open_session(&tc, cluster, 0, 0);
	expect_round(&tc, FIRST, DAMAGED, 2, "written after the accepted damage, after kill -9");
	expect_version(&tc, FIRST + DAMAGED, COUNT - DAMAGED, 0,
		       "records numbered before the accepted damage, after kill -9");
	tc_close(&tc);
	stop(cluster);
}

/*
 * The last record torn, as a power cut during its write would leave it
 * (never acknowledged then): the end of the log, a warning, no refusal.
 */
static void case_commit_log_torn_end(void)
{
	enum { FIRST = 100, COUNT = 10 };
	struct log_record records[COUNT + 8];
	struct ngnfs_test_cluster *cluster = log_only_writes(FIRST, COUNT, records);
	struct tc tc;

	damage_log_record(cluster, &records[COUNT - 1]);
	EXPECT_STATUS(ngnfs_test_cluster_restart(cluster, 0), 0);
	if (!log_contains(cluster, 0, "is not whole: the end of the log"))
		fail("blockd did not warn about the torn last record");
	if (!log_contains(cluster, 0, "commit log: applied 10 group commits"))
		fail("blockd did not apply the FORMAT and the 9 whole records before the torn one");
	open_session(&tc, cluster, 0, 0);
	expect_round(&tc, FIRST, COUNT - 1, 1, "before the torn record");
	expect_version(&tc, FIRST + COUNT - 1, 1, 0, "the torn record");
	tc_close(&tc);
	stop(cluster);
}

/*
 * --commit-log-mb changes the size of an existing log at the next start,
 * after its records are applied: up from 2 MiB to 4 and back down to 2,
 * each time with writes only the old log held.
 */
static void case_commit_log_resize(void)
{
	enum { FIRST = 100, COUNT = 30 };
	struct log_record records[COUNT + 8];
	struct ngnfs_test_cluster *cluster = log_only_writes(FIRST, COUNT, records);
	char path[4200];
	struct stat st;
	struct tc tc;

	commit_log_path(cluster, path, sizeof(path));
	EXPECT_STATUS(ngnfs_test_cluster_restart_args(
			  cluster, 0, (const char *[]){ "--commit-log-mb", "4", NULL }),
		      0);
	if (!log_contains(cluster, 0, "resized from 2 to 4 MiB"))
		fail("blockd did not say it resized the commit log to 4 MiB");
	if (stat(path, &st) < 0 || st.st_size != 4 << 20)
		fail("the commit log is %lld bytes after resizing to 4 MiB", (long long)st.st_size);
	open_session(&tc, cluster, 0, 0);
	expect_round(&tc, FIRST, COUNT, 1, "replayed from the 2 MiB log before the resize");
	write_round(&tc, FIRST, COUNT, 2);
	EXPECT_STATUS(ngnfs_test_cluster_kill(cluster, 0, SIGKILL), 0);
	tc_close(&tc);

	EXPECT_STATUS(ngnfs_test_cluster_restart(cluster, 0), 0);
	if (!log_contains(cluster, 0, "resized from 4 to 2 MiB"))
		fail("blockd did not say it resized the commit log back to 2 MiB");
	if (stat(path, &st) < 0 || st.st_size != 2 << 20)
		fail("the commit log is %lld bytes after resizing to 2 MiB", (long long)st.st_size);
	open_session(&tc, cluster, 0, 0);
	expect_round(&tc, FIRST, COUNT, 2, "replayed from the 4 MiB log before the resize");
	tc_close(&tc);
	stop(cluster);
}

/*
 * Rewrites a stopped device's store as store format version `version`;
 * for version 1 also as a blockd before the commit log left it: no log
 * file, no commit log record.
 */
static void set_store_version(struct ngnfs_test_cluster *cluster, uint32_t version)
{
	const uint8_t identity_key[NGNFS_STORE_META_KEY_SIZE] = { NGNFS_STORE_KEY_META,
								  NGNFS_STORE_META_IDENTITY };
	const uint8_t log_key[NGNFS_STORE_META_KEY_SIZE] = { NGNFS_STORE_KEY_META,
							     NGNFS_STORE_META_COMMIT_LOG };
	rocksdb_options_t *options = rocksdb_options_create();
	rocksdb_readoptions_t *read_options = rocksdb_readoptions_create();
	rocksdb_writeoptions_t *write_options = rocksdb_writeoptions_create();
	struct ngnfs_store_identity identity;
	char *error = NULL, *value, path[4200];
	rocksdb_t *rocks;
	size_t length;

	rocks = rocksdb_open(options, ngnfs_test_cluster_db_path(cluster, 0), &error);
	if (error)
		fail("cannot open the device's RocksDB: %s", error);
	value = rocksdb_get(rocks, read_options, (const char *)identity_key, sizeof(identity_key),
			    &length, &error);
	if (!value || length != sizeof(identity))
		fail("no identity record under its documented key");
	memcpy(&identity, value, sizeof(identity));
	rocksdb_free(value);
	identity.format_version = htole32(version);
	rocksdb_put(rocks, write_options, (const char *)identity_key, sizeof(identity_key),
		    (const char *)&identity, sizeof(identity), &error);
	if (!error && version == 1)
		rocksdb_delete(rocks, write_options, (const char *)log_key, sizeof(log_key),
			       &error);
	if (error)
		fail("cannot rewrite the identity: %s", error);
	rocksdb_close(rocks);
	rocksdb_options_destroy(options);
	rocksdb_readoptions_destroy(read_options);
	rocksdb_writeoptions_destroy(write_options);
	commit_log_path(cluster, path, sizeof(path));
	if (version == 1 && unlink(path) < 0)
		fail("cannot remove the commit log %s: %s", path, strerror(errno));
}

/*
 * A store of format version 1 (before the commit log) is upgraded when
 * blockd opens it, its blocks intact and a new commit log made; a store of
 * a version this blockd does not know is refused, naming the versions it
 * knows.
 */
static void case_store_upgrade(void)
{
	struct ngnfs_test_cluster *cluster = start(1, (const char *[]){ "--grace-ms", "0", NULL });
	char path[4200];
	struct tc tc;

	format_all(cluster);
	open_session(&tc, cluster, 0, 0);
	write_round(&tc, 42, 3, 1);
	tc_close(&tc);
	EXPECT_STATUS(ngnfs_test_cluster_kill(cluster, 0, SIGTERM), 0);
	set_store_version(cluster, 1);
	EXPECT_STATUS(ngnfs_test_cluster_restart(cluster, 0), 0);
	if (!log_contains(cluster, 0, "store format version 1 upgraded to 2"))
		fail("blockd did not say it upgraded the version 1 store");
	commit_log_path(cluster, path, sizeof(path));
	if (access(path, F_OK) != 0)
		fail("no commit log %s after the upgrade", path);
	open_session(&tc, cluster, 0, 0);
	expect_round(&tc, 42, 3, 1, "after the upgrade");
	write_round(&tc, 42, 3, 2);
	tc_close(&tc);
	EXPECT_STATUS(ngnfs_test_cluster_kill(cluster, 0, SIGKILL), 0);
	EXPECT_STATUS(ngnfs_test_cluster_restart(cluster, 0), 0);
	open_session(&tc, cluster, 0, 0);
	expect_round(&tc, 42, 3, 2, "written after the upgrade, after kill -9");
	tc_close(&tc);
	EXPECT_STATUS(ngnfs_test_cluster_kill(cluster, 0, SIGTERM), 0);
	set_store_version(cluster, NGNFS_STORE_FORMAT_VERSION + 1);
	if (ngnfs_test_cluster_restart(cluster, 0) == 0)
		fail("blockd started on a store of format version %u",
		     NGNFS_STORE_FORMAT_VERSION + 1);
	if (!log_contains(cluster, 0, "knows versions 1 to 2"))
		fail("blockd's refusal of an unknown store version did not name the ones it knows");
	stop(cluster);
}

static void case_restart_sigterm(void)
{
	restart_keeps_writes(SIGTERM);
}

static void case_restart_sigkill(void)
{
	restart_keeps_writes(SIGKILL);
}

/*
 * A group commit RocksDB refuses (here injected: --fail-commit-at, the
 * same path as a disk error) stops blockd with exit status 3 and a log
 * line saying so, without answering the failed write: nothing is
 * answered from a state the disk does not have.  After a restart every
 * acknowledged write is there, and the failed one is not (its block is
 * still at version 0 and can be written again).
 */
static void case_store_failure_stops(void)
{
	enum { FAIL_AT = 6, TRIES = 20 };
	char fail_at[16];
	struct ngnfs_test_cluster *cluster;
	uint8_t data[NGNFS_BLOCK_SIZE], back[NGNFS_BLOCK_SIZE];
	uint64_t version, new_version;
	unsigned int acknowledged = 0;
	bool has_data;
	int status, ret;
	struct tc tc;

	snprintf(fail_at, sizeof(fail_at), "%d", FAIL_AT);
	cluster =
	    start(1, (const char *[]){ "--grace-ms", "300", "--fail-commit-at", fail_at, NULL });
	format_all(cluster);
	open_session(&tc, cluster, 0, 0);
	for (uint64_t blkno = 200; blkno < 200 + TRIES; blkno++) {
		fill(data, (uint8_t)blkno);
		EXPECT_STATUS(tc_get(&tc, blkno, NGNFS_ACCESS_WRITE, 0, &version, &has_data, NULL),
			      0);
		ret = tc_write(&tc, blkno, 0, data, &new_version);
		if (ret)
			break;
		acknowledged++;
	}
	if (acknowledged == 0 || acknowledged >= FAIL_AT)
		fail("expected the writes to stop at group commit %u (after the format), %u were "
		     "acknowledged",
		     FAIL_AT, acknowledged);
	EXPECT_STATUS(ngnfs_test_cluster_wait_exit(cluster, 0, 10000, &status), 0);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 3)
		fail("expected blockd to exit with status 3 after the failed commit, wait status "
		     "%#x",
		     status);
	if (!log_contains(cluster, 0, "group commit of 1 requests failed: injected") ||
	    !log_contains(cluster, 0, "stopping (exit status 3)"))
		fail("expected the log to say which commit failed and that blockd stops");
	tc_close(&tc);

	EXPECT_STATUS(ngnfs_test_cluster_restart(cluster, 0), 0);
	open_session(&tc, cluster, 0, NGNFS_HELLO_RECLAIM);
	for (uint64_t blkno = 200; blkno <= 200 + acknowledged; blkno++) {
		bool was_acknowledged = blkno < 200 + acknowledged;

		fill(data, (uint8_t)blkno);
		EXPECT_STATUS(tc_get(&tc, blkno, NGNFS_ACCESS_WRITE, was_acknowledged ? 0 : 1,
				     &version, &has_data, back),
			      0);
		if (was_acknowledged) {
			EXPECT_U64("version of an acknowledged write", version, 1);
			if (!has_data || memcmp(back, data, sizeof(data)))
				fail("block %llu lost its acknowledged contents",
				     (unsigned long long)blkno);
		} else {
			EXPECT_U64("version of the block whose commit failed", version, 0);
			EXPECT_STATUS(tc_write(&tc, blkno, 0, data, &new_version), 0);
			EXPECT_U64("version once written again", new_version, 1);
		}
	}
	tc_close(&tc);
	stop(cluster);
}

/*
 * max_sessions: with 2 sessions open, a third connection is closed at once
 * (its HELLO gets no answer) and logged; once one of the two ends, a new
 * connection is served again.
 */
static void case_max_sessions(void)
{
	struct ngnfs_test_cluster *cluster =
	    start(1, (const char *[]){ "--max-sessions", "2", NULL });
	struct tc first, second, third;
	uint64_t deadline;
	int ret;

	format_all(cluster);
	open_session(&first, cluster, 0, 0);
	open_session(&second, cluster, 0, 0);
	ret = tc_connect(&third, ngnfs_test_cluster_address(cluster, 0));
	if (ret == 0) {
		ret = tc_hello(&third, fs_id, 0, NULL);
		tc_close(&third);
	}
	if (ret == 0)
		fail("a third session was served with --max-sessions 2");
	if (!log_contains(cluster, 0, "refusing the connection from") ||
	    !log_contains(cluster, 0, "2 sessions are open (max_sessions)"))
		fail("expected the log to say why the third connection was closed");
	tc_close(&first);
	/* blockd sees the close when it reads it: retry briefly */
	deadline = now_ms() + 5000;
	do {
		ret = tc_connect(&third, ngnfs_test_cluster_address(cluster, 0));
		if (ret == 0) {
			ret = tc_hello(&third, fs_id, 0, NULL);
			if (ret)
				tc_close(&third);
		}
	} while (ret && now_ms() < deadline);
	EXPECT_STATUS(ret, 0);
	tc_close(&third);
	tc_close(&second);
	stop(cluster);
}

/*
 * unread_replies: a session that sends READ_INCOHERENT requests of 256
 * blocks (a 1 MiB reply for 2 KiB asked) and reads nothing is no longer
 * read once 8 MiB of its replies wait, with a log line, while another
 * session is served; when it reads, every reply arrives, in order and
 * whole, and blockd reads its requests again.
 */
enum { UNREAD_REQUESTS = 96 };

static void send_some(struct tc *tc, const uint8_t *bytes, size_t length, size_t *sent)
{
	while (*sent < length) {
		ssize_t done = send(tc->fd, bytes + *sent, length - *sent, MSG_NOSIGNAL);

		if (done < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (done < 0 && errno == EINTR)
			continue;
		if (done < 0)
			fail("sending the unread requests: %s", strerror(errno));
		*sent += (size_t)done;
	}
}

/*
 * READ_INCOHERENT requests of 256 copies of blkno into buffer, sent on
 * greedy as far as the sockets take them (never blocking) until blockd
 * logs that it stopped reading the session.
 */
static void flood_unread(struct ngnfs_test_cluster *cluster, struct tc *greedy, uint64_t blkno,
			 struct ngnfs_buffer *buffer, size_t *sent)
{
	uint64_t blknos[NGNFS_MSG_MAX_BLOCKS];
	uint64_t deadline;

	for (unsigned int i = 0; i < NGNFS_MSG_MAX_BLOCKS; i++)
		blknos[i] = blkno;
	ngnfs_buffer_init(buffer);
	for (unsigned int i = 0; i < UNREAD_REQUESTS; i++)
		ngnfs_encode_read_incoherent(buffer, 5000 + i, blknos, NGNFS_MSG_MAX_BLOCKS);
	if (buffer->error)
		fail("encoding the unread requests: %s", strerror(-buffer->error));
	if (fcntl(greedy->fd, F_SETFL, fcntl(greedy->fd, F_GETFL) | O_NONBLOCK) < 0)
		fail("fcntl O_NONBLOCK: %s", strerror(errno));
	*sent = 0;
	deadline = now_ms() + 5000;
	while (!log_contains(cluster, 0, "bytes of replies unread: not reading its requests")) {
		if (now_ms() > deadline)
			fail("expected blockd to stop reading a session with %u MiB of replies "
			     "unread, with a log line",
			     UNREAD_REQUESTS);
		send_some(greedy, buffer->data, buffer->length, sent);
		usleep(20 * 1000);
	}
}

static void case_unread_replies(void)
{
	struct ngnfs_test_cluster *cluster = start(1, NULL);
	uint8_t data[NGNFS_BLOCK_SIZE], back[NGNFS_BLOCK_SIZE];
	struct ngnfs_buffer buffer;
	uint64_t version = 0;
	int block_status = 1;
	struct tc other, greedy;
	size_t sent = 0;

	format_all(cluster);
	open_session(&other, cluster, 0, 0);
	open_session(&greedy, cluster, 0, 0);
	fill(data, 41);
	EXPECT_STATUS(tc_cmpxchg(&other, 20, 0, data, &version), 0);
	flood_unread(cluster, &greedy, 20, &buffer, &sent);
	if (sent == buffer.length)
		printf("all %u requests were sent before blockd stopped reading\n",
		       UNREAD_REQUESTS);

	/* Meanwhile the other session is served. */
	EXPECT_STATUS(tc_read_incoherent(&other, 20, &version, &block_status, back), 0);
	if (block_status != 0 || version != 1 || memcmp(back, data, sizeof(data)))
		fail("the other session's READ_INCOHERENT was not answered with the block");

	/* Reading the replies: all of them, in order, each with every block. */
	for (unsigned int i = 0; i < UNREAD_REQUESTS; i++) {
		struct tc_frame frame;
		int ret;

		send_some(&greedy, buffer.data, buffer.length, &sent);
		ret = tc_recv(&greedy, &frame, 10000);
		if (ret)
			fail("reply %u of %u to the unread requests: %s", i + 1, UNREAD_REQUESTS,
			     strerror(-ret));
		if (frame.msg.type != NGNFS_MSG_READ_INCOHERENT_REPLY ||
		    frame.msg.request_id != 5000 + i || frame.msg.status != 0 ||
		    frame.msg.read_incoherent_reply.count != NGNFS_MSG_MAX_BLOCKS)
			fail("reply %u: expected READ_INCOHERENT_REPLY %u with %u blocks, got %s "
			     "%llu status %d",
			     i + 1, 5000 + i, NGNFS_MSG_MAX_BLOCKS,
			     ngnfs_msg_type_name(frame.msg.type),
			     (unsigned long long)frame.msg.request_id, frame.msg.status);
		for (unsigned int b = 0; b < NGNFS_MSG_MAX_BLOCKS; b += 51) {
			uint64_t blkno;
			const uint8_t *bytes = ngnfs_msg_incoherent_block(&frame.msg, b, &blkno,
									  &version, &block_status);

			if (blkno != 20 || block_status != 0 || !bytes ||
			    memcmp(bytes, data, sizeof(data)))
				fail("reply %u, block %u: not the block written", i + 1, b);
		}
		tc_frame_free(&frame);
	}
	if (sent != buffer.length)
		fail("only %zu of %zu bytes of requests could be sent", sent, buffer.length);
	ngnfs_buffer_free(&buffer);
	if (!log_contains(cluster, 0, "read its replies: reading its requests again"))
		fail("expected a log line when blockd reads the session again");
	tc_close(&greedy);
	tc_close(&other);
	stop(cluster);
}

/*
 * unread_replies_revoked: a session blockd stopped reading because it
 * leaves its replies unread cannot keep a grant somebody needs.  Its
 * unread input might hold the RELEASE, but blockd is not reading it, so
 * the revoke timeout closes the session and the waiter is granted.
 */
static void case_unread_replies_revoked(void)
{
	struct ngnfs_test_cluster *cluster =
	    start(1, (const char *[]){ "--revoke-timeout-ms", "1000", NULL });
	struct ngnfs_buffer buffer;
	struct tc greedy, waiter;
	uint64_t version, asked;
	bool has_data;
	size_t sent;

	format_all(cluster);
	open_session(&greedy, cluster, 0, 0);
	open_session(&waiter, cluster, 0, 0);
	EXPECT_STATUS(tc_get(&greedy, 30, NGNFS_ACCESS_WRITE, 0, &version, &has_data, NULL), 0);
	flood_unread(cluster, &greedy, 30, &buffer, &sent);
	asked = now_ms();
	EXPECT_STATUS(tc_get_send(&waiter, 30, NGNFS_ACCESS_READ, 0, NULL), 0);
	EXPECT_STATUS(tc_grant_wait(&waiter, 10000, NULL, &version, NULL, &has_data, NULL), 0);
	if (now_ms() - asked < 900)
		fail("the waiter was granted %llu ms after asking, before the 1000 ms revoke "
		     "timeout",
		     (unsigned long long)(now_ms() - asked));
	if (!log_contains(cluster, 0, "left the REVOKE of block 30 unanswered") ||
	    !log_contains(cluster, 0, "ended: REVOKE of block 30 unanswered (revoke_timeout_ms)"))
		fail("expected the log to say that the session not reading its replies was "
		     "closed, and why");
	ngnfs_buffer_free(&buffer);
	tc_close(&greedy);
	tc_close(&waiter);
	stop(cluster);
}

/*
 * hello_timeout: a connection that says nothing is closed after
 * --hello-timeout-ms, with a log line; a session that said HELLO may be
 * idle for longer and is still served.
 */
static void case_hello_timeout(void)
{
	struct ngnfs_test_cluster *cluster =
	    start(1, (const char *[]){ "--hello-timeout-ms", "300", NULL });
	uint64_t version, started;
	struct tc silent, talker;
	bool has_data;
	char byte;
	ssize_t got;

	format_all(cluster);
	open_session(&talker, cluster, 0, 0);
	EXPECT_STATUS(tc_connect(&silent, ngnfs_test_cluster_address(cluster, 0)), 0);
	{
		struct timeval bound = { .tv_sec =
					     5 }; /* a blockd that never closes: fail, not hang */

		setsockopt(silent.fd, SOL_SOCKET, SO_RCVTIMEO, &bound, sizeof(bound));
	}
	started = now_ms();
	got = recv(silent.fd, &byte, 1, 0); /* until blockd closes it */
	if (got != 0)
		fail("expected blockd to close a silent connection, recv returned %zd", got);
	if (now_ms() - started < 250 || now_ms() - started > 5000)
		fail("expected the silent connection closed after about 300 ms, it took %llu ms",
		     (unsigned long long)(now_ms() - started));
	tc_close(&silent);
	if (!log_contains(cluster, 0, "ended: no HELLO within hello_timeout_ms"))
		fail("expected the log to say why the silent connection was closed");
	usleep(600 * 1000); /* idle past the timeout after HELLO */
	EXPECT_STATUS(tc_get(&talker, 9, NGNFS_ACCESS_READ, 0, &version, &has_data, NULL), 0);
	tc_close(&talker);
	stop(cluster);
}

/*
 * revoke_timeout: a holder that leaves a REVOKE unanswered loses its
 * session after --revoke-timeout-ms, and the waiter gets the block with
 * what the holder had committed; a holder that answered its REVOKE, and
 * one never revoked, keep their sessions past the timeout.
 */
static void case_revoke_timeout(void)
{
	struct ngnfs_test_cluster *cluster =
	    start(1, (const char *[]){ "--revoke-timeout-ms", "1000", NULL });
	struct tc silent, answering, untouched, waiter;
	uint8_t data[NGNFS_BLOCK_SIZE], back[NGNFS_BLOCK_SIZE];
	uint64_t version, new_version, asked;
	bool has_data;
	int ret;

	format_all(cluster);
	open_session(&silent, cluster, 0, 0);
	open_session(&answering, cluster, 0, 0);
	open_session(&untouched, cluster, 0, 0);
	open_session(&waiter, cluster, 0, 0);
	fill(data, 20);
	EXPECT_STATUS(tc_get(&silent, 20, NGNFS_ACCESS_WRITE, 0, &version, &has_data, NULL), 0);
	EXPECT_STATUS(tc_write(&silent, 20, 0, data, &new_version), 0);
	EXPECT_STATUS(tc_get(&answering, 21, NGNFS_ACCESS_WRITE, 0, &version, &has_data, NULL), 0);
	EXPECT_STATUS(tc_get(&untouched, 22, NGNFS_ACCESS_WRITE, 0, &version, &has_data, NULL), 0);

	/* the answering holder's REVOKE is answered at once */
	EXPECT_STATUS(tc_get_send(&waiter, 21, NGNFS_ACCESS_READ, 0, NULL), 0);
	EXPECT_U64("REVOKE access of block 21", tc_wait_revoke(&answering, 21, 3000),
		   NGNFS_ACCESS_READ);
	EXPECT_STATUS(tc_release(&answering, 21, NGNFS_ACCESS_READ), 0);
	EXPECT_STATUS(tc_grant_wait(&waiter, 3000, NULL, &version, NULL, NULL, NULL), 0);

	/* the silent holder's is not */
	asked = now_ms();
	EXPECT_STATUS(tc_get_send(&waiter, 20, NGNFS_ACCESS_READ, 0, NULL), 0);
	EXPECT_U64("REVOKE access of block 20", tc_wait_revoke(&silent, 20, 3000),
		   NGNFS_ACCESS_READ);
	ret = tc_grant_wait(&waiter, 500, NULL, &version, NULL, &has_data, back);
	if (ret != -ETIMEDOUT)
		fail("expected the waiter to wait while the holder may still answer, got %d", ret);
	EXPECT_STATUS(tc_grant_wait(&waiter, 5000, NULL, &version, NULL, &has_data, back), 0);
	if (now_ms() - asked < 900)
		fail("the waiter was granted %llu ms after asking, before the 1000 ms revoke "
		     "timeout",
		     (unsigned long long)(now_ms() - asked));
	EXPECT_U64("version the waiter got", version, 1);
	if (!has_data || memcmp(back, data, sizeof(data)))
		fail("the waiter did not get what the closed session had committed");
	EXPECT_STATUS(tc_wait_closed(&silent, 3000), 0);
	if (!log_contains(cluster, 0, "left the REVOKE of block 20 unanswered") ||
	    !log_contains(cluster, 0, "ended: REVOKE of block 20 unanswered (revoke_timeout_ms)"))
		fail("expected the log to say which session was closed and why");

	/* past the timeout since their grants: both other holders are still served */
	EXPECT_STATUS(tc_get(&answering, 23, NGNFS_ACCESS_READ, 0, &version, &has_data, NULL), 0);
	EXPECT_STATUS(tc_write(&untouched, 22, 0, data, &new_version), 0);
	EXPECT_U64("version written by the holder that was never revoked", new_version, 1);
	if (log_contains(cluster, 0, "left the REVOKE of block 21") ||
	    log_contains(cluster, 0, "left the REVOKE of block 22"))
		fail("a session that answered its REVOKE, or had none, was closed");
	tc_close(&silent);
	tc_close(&answering);
	tc_close(&untouched);
	tc_close(&waiter);
	stop(cluster);
}

static void case_grace(void)
{
	struct ngnfs_test_cluster *cluster =
	    start(1, (const char *[]){ "--grace-ms", "1500", NULL });
	struct tc reclaimer, newcomer;
	uint64_t version, started, blknos[2], versions[2];
	uint32_t got;
	bool has_data;

	format_all(cluster);
	EXPECT_STATUS(ngnfs_test_cluster_kill(cluster, 0, SIGTERM), 0);
	EXPECT_STATUS(ngnfs_test_cluster_restart(cluster, 0), 0);
	started = now_ms();
	open_session(&newcomer, cluster, 0, 0);
	open_session(&reclaimer, cluster, 0, NGNFS_HELLO_RECLAIM);
	EXPECT_STATUS(tc_get_send(&newcomer, 3, NGNFS_ACCESS_READ, 0, NULL), 0);
	EXPECT_STATUS(tc_get(&reclaimer, 4, NGNFS_ACCESS_WRITE, 0, &version, &has_data, NULL), 0);
	if (now_ms() - started > 1000)
		fail("a reclaiming session waited for its grant during the grace period");
	/*
	 * nothing is reserved during the grace, not even for a reclaimer: a
	 * block reserved before the restart and not yet written looks free
	 * until its client's regrant GET takes it
	 */
	EXPECT_STATUS(tc_alloc(&reclaimer, 2, blknos, versions, &got), -EAGAIN);
	EXPECT_STATUS(tc_alloc(&newcomer, 2, blknos, versions, &got), -EAGAIN);
	if (now_ms() - started > 1000)
		fail("the ALLOCs were answered %llu ms after restart, too late to tell the grace "
		     "period's answer",
		     (unsigned long long)(now_ms() - started));
	EXPECT_STATUS(tc_grant_wait(&newcomer, 5000, NULL, &version, NULL, NULL, NULL), 0);
	if (now_ms() - started < 1000)
		fail("a non-reclaiming session was granted %llu ms after restart, inside the "
		     "1500 ms grace period",
		     (unsigned long long)(now_ms() - started));
	EXPECT_STATUS(tc_alloc(&newcomer, 2, blknos, versions, &got), 0);
	EXPECT_U64("blocks reserved once the grace period is over", got, 2);
	tc_close(&reclaimer);
	tc_close(&newcomer);
	stop(cluster);
}

/* ---- writes of several frames ------------------------------------------------ */

/* The next reply must be a WRITE_REPLY to request_id with status. */
static void expect_write_reply(struct tc *tc, uint64_t request_id, int status, const char *what)
{
	struct tc_frame reply;

	if (tc_recv(tc, &reply, 3000))
		fail("%s: expected a WRITE_REPLY to request %llu, got nothing", what,
		     (unsigned long long)request_id);
	if (reply.msg.type != NGNFS_MSG_WRITE_REPLY || reply.msg.request_id != request_id ||
	    reply.msg.status != status)
		fail("%s: expected WRITE_REPLY to request %llu with status %d, got %s to %llu "
		     "with status %d",
		     what, (unsigned long long)request_id, status,
		     ngnfs_msg_type_name(reply.msg.type), (unsigned long long)reply.msg.request_id,
		     reply.msg.status);
	if (status == 0 && reply.msg.versions.count != 1)
		fail("%s: the reply lists %u blocks, not the one of its own frame", what,
		     reply.msg.versions.count);
	tc_frame_free(&reply);
}

static void expect_no_reply(struct tc *tc, const char *what)
{
	struct tc_frame reply;

	if (tc_recv(tc, &reply, 300) == 0)
		fail("%s: expected no reply yet, got %s to request %llu", what,
		     ngnfs_msg_type_name(reply.msg.type), (unsigned long long)reply.msg.request_id);
}

/*
 * A WRITE SINGLE of several frames (format-msg.h): the frames before the
 * last are held without a reply and change nothing; the last applies all
 * of them in one batch and every frame is answered, in order.  A session
 * that ends before the last frame writes nothing, and a frame out of
 * sequence, a block twice across frames, or one block without a grant
 * refuses every frame held.
 */
static void case_held_write(void)
{
	struct ngnfs_test_cluster *cluster = start(1, NULL);
	static uint8_t data[4][NGNFS_BLOCK_SIZE], back[NGNFS_BLOCK_SIZE];
	struct ngnfs_block_request blocks[4];
	uint64_t ids[3], version, new_version;
	bool has_data;
	struct tc writer, other;

	format_all(cluster);
	open_session(&writer, cluster, 0, 0);
	open_session(&other, cluster, 0, 0);
	for (unsigned int i = 0; i < 4; i++) {
		fill(data[i], (uint8_t)(40 + i));
		EXPECT_STATUS(
		    tc_get(&writer, 30 + i, NGNFS_ACCESS_WRITE, 0, &version, &has_data, NULL), 0);
		blocks[i] =
		    (struct ngnfs_block_request){ .blkno = 30 + i, .version = 0, .data = data[i] };
	}
	/* block 33 is written now and freed by the held write's last frame */
	EXPECT_STATUS(tc_write(&writer, 33, 0, data[3], &new_version), 0);
	{
		const uint64_t free_33 = 33;

		EXPECT_STATUS(
		    tc_write_frame_send(&writer, 77, &blocks[0], 1, NULL, 0, 0, 3, &ids[0]), 0);
		EXPECT_STATUS(
		    tc_write_frame_send(&writer, 77, &blocks[1], 1, NULL, 0, 1, 3, &ids[1]), 0);
		expect_no_reply(&writer, "two of three frames sent");
		EXPECT_U64("version of a block in a held frame, before the last frame",
			   incoherent_version(&other, 30, NULL), 0);
		EXPECT_STATUS(
		    tc_write_frame_send(&writer, 77, &blocks[2], 1, &free_33, 1, 2, 3, &ids[2]), 0);
	}
	for (unsigned int i = 0; i < 3; i++)
		expect_write_reply(&writer, ids[i], 0, "frame of a held write");
	for (unsigned int i = 0; i < 3; i++) {
		EXPECT_U64("version after the held write", incoherent_version(&other, 30 + i, back),
			   1);
		if (memcmp(back, data[i], sizeof(back)))
			fail("block %u: data differs from the held write's frame %u", 30 + i, i);
	}
	{
		const uint64_t free_33 = 33;

		/* freeing it again is refused: the held write's last frame freed it */
		EXPECT_STATUS(tc_get(&writer, 33, NGNFS_ACCESS_WRITE, 0, &version, &has_data, NULL),
			      0);
		EXPECT_STATUS(tc_write_full(&writer, NGNFS_WRITE_SINGLE, 0, NULL, 0, NULL, 0,
					    &free_33, 1, 0, 0, NULL),
			      -EINVAL);
		if (!log_contains(cluster, 0, "block to free is not allocated"))
			fail("expected block 33 to be free after the held write freed it");
	}

	/* the session ends after two of three frames: nothing is written */
	for (unsigned int i = 0; i < 3; i++)
		blocks[i].version = 1;
	EXPECT_STATUS(tc_write_frame_send(&writer, 78, &blocks[0], 1, NULL, 0, 0, 3, NULL), 0);
	EXPECT_STATUS(tc_write_frame_send(&writer, 78, &blocks[1], 1, NULL, 0, 1, 3, NULL), 0);
	expect_no_reply(&writer, "two of three frames sent before the close");
	tc_close(&writer);
	for (int tries = 0; tries < 100 && !log_contains(cluster, 0, "ended with 2 of 3 frames");
	     tries++)
		usleep(20 * 1000);
	if (!log_contains(cluster, 0, "ended with 2 of 3 frames of set 000000000000004e held"))
		fail("expected a log line for the session that ended holding 2 of 3 frames");
	for (unsigned int i = 0; i < 2; i++)
		EXPECT_U64("version of a block of a held write whose session ended",
			   incoherent_version(&other, 30 + i, NULL), 1);

	open_session(&writer, cluster, 0, 0);
	for (unsigned int i = 0; i < 3; i++)
		EXPECT_STATUS(
		    tc_get(&writer, 30 + i, NGNFS_ACCESS_WRITE, 1, &version, &has_data, NULL), 0);

	/* frame 2 after frame 0: both refused */
	EXPECT_STATUS(tc_write_frame_send(&writer, 79, &blocks[0], 1, NULL, 0, 0, 3, &ids[0]), 0);
	EXPECT_STATUS(tc_write_frame_send(&writer, 79, &blocks[2], 1, NULL, 0, 2, 3, &ids[2]), 0);
	expect_write_reply(&writer, ids[0], -EINVAL, "frame 0 before a frame out of sequence");
	expect_write_reply(&writer, ids[2], -EINVAL, "frame 2 after frame 0");
	if (!log_contains(cluster, 0, "frame is not the next frame of the held write"))
		fail("expected a log line for the frame out of sequence");

	/* a later frame with no frame 0 held */
	EXPECT_STATUS(tc_write_frame_send(&writer, 80, &blocks[1], 1, NULL, 0, 1, 2, &ids[1]), 0);
	expect_write_reply(&writer, ids[1], -EINVAL, "frame 1 with no frame 0 held");

	/* one block in two frames */
	EXPECT_STATUS(tc_write_frame_send(&writer, 81, &blocks[0], 1, NULL, 0, 0, 2, &ids[0]), 0);
	EXPECT_STATUS(tc_write_frame_send(&writer, 81, &blocks[0], 1, NULL, 0, 1, 2, &ids[1]), 0);
	expect_write_reply(&writer, ids[0], -EINVAL, "frame 0 of a block written twice");
	expect_write_reply(&writer, ids[1], -EINVAL, "frame 1 of a block written twice");
	if (!log_contains(
		cluster, 0,
		"block appears twice in one write (Invalid argument); refusing all 2 frames"))
		fail("expected a log line for a block in two frames");

	/* the last frame's block has no grant: the first frame is refused too */
	EXPECT_STATUS(tc_release(&writer, 32, NGNFS_ACCESS_NONE), 0);
	EXPECT_STATUS(tc_write_frame_send(&writer, 82, &blocks[0], 1, NULL, 0, 0, 2, &ids[0]), 0);
	EXPECT_STATUS(tc_write_frame_send(&writer, 82, &blocks[2], 1, NULL, 0, 1, 2, &ids[1]), 0);
	expect_write_reply(&writer, ids[0], -EPERM, "frame 0 of a write refused at its last frame");
	expect_write_reply(&writer, ids[1], -EPERM, "frame 1 without a grant");
	for (unsigned int i = 0; i < 3; i++)
		EXPECT_U64("version after the refused held writes",
			   incoherent_version(&other, 30 + i, NULL), 1);

	/* the session still works: a two-frame write of blocks 30 and 31 */
	fill(data[0], 50);
	fill(data[1], 51);
	EXPECT_STATUS(tc_write_frame_send(&writer, 83, &blocks[0], 1, NULL, 0, 0, 2, &ids[0]), 0);
	EXPECT_STATUS(tc_write_frame_send(&writer, 83, &blocks[1], 1, NULL, 0, 1, 2, &ids[1]), 0);
	expect_write_reply(&writer, ids[0], 0, "frame 0 after the refusals");
	expect_write_reply(&writer, ids[1], 0, "frame 1 after the refusals");
	for (unsigned int i = 0; i < 2; i++) {
		EXPECT_U64("version after the two-frame write",
			   incoherent_version(&other, 30 + i, back), 2);
		if (memcmp(back, data[i], sizeof(back)))
			fail("block %u: data differs from the two-frame write", 30 + i);
	}
	tc_close(&writer);
	tc_close(&other);
	stop(cluster);
}

static const struct {
	const char *name;
	void (*run)(void);
} cases[] = {
	{ "bad_flags", case_bad_flags },
	{ "store_failure_stops", case_store_failure_stops },
	{ "max_sessions", case_max_sessions },
	{ "unread_replies", case_unread_replies },
	{ "unread_replies_revoked", case_unread_replies_revoked },
	{ "hello_timeout", case_hello_timeout },
	{ "revoke_timeout", case_revoke_timeout },
	{ "bad_config", case_bad_config },
	{ "config_file_serves", case_config_file_serves },
	{ "foreign_folder", case_foreign_folder },
	{ "foreign_rocksdb", case_foreign_rocksdb },
	{ "busy_port", case_busy_port },
	{ "hello_wrong_fs_id", case_hello_wrong_fs_id },
	{ "unformatted", case_unformatted },
	{ "write_read", case_write_read },
	{ "frame_in_pieces", case_frame_in_pieces },
	{ "grant_waits_for_pending_write", case_grant_waits_for_pending_write },
	{ "write_behind_write", case_write_behind_write },
	{ "write_refused", case_write_refused },
	{ "corrupt_block", case_corrupt_block },
	{ "malformed_frames", case_malformed_frames },
	{ "held_write", case_held_write },
	{ "grant_fifo", case_grant_fifo },
	{ "alloc", case_alloc },
	{ "session_epochs", case_session_epochs },
	{ "cmpxchg_incoherent", case_cmpxchg_incoherent },
	{ "set_commit", case_set_commit },
	{ "indoubt_abort", case_indoubt_abort },
	{ "indoubt_commit", case_indoubt_commit },
	{ "indoubt_restart", case_indoubt_restart },
	{ "restart_sigterm", case_restart_sigterm },
	{ "restart_sigkill", case_restart_sigkill },
	{ "commit_log_replay", case_commit_log_replay },
	{ "commit_log_wraps", case_commit_log_wraps },
	{ "commit_log_damage", case_commit_log_damage },
	{ "commit_log_torn_end", case_commit_log_torn_end },
	{ "commit_log_resize", case_commit_log_resize },
	{ "store_upgrade", case_store_upgrade },
	{ "grace", case_grace },
	{ "primary_timeout", case_primary_timeout },
	{ "resolved_sets_stay_resolved", case_resolved_sets_stay_resolved },
	{ "stale_stage_keeps_pin", case_stale_stage_keeps_pin },
	{ "indoubt_sigterm", case_indoubt_sigterm },
	{ "group_commit", case_group_commit },
	{ "sigterm_under_load", case_sigterm_under_load },
	{ "sigkill_under_load", case_sigkill_under_load },
};

int main(int argc, char **argv)
{
	if (argc != 2 || !getenv("NGNFS_BLOCKD")) {
		fprintf(stderr, "usage: NGNFS_BLOCKD=path test_blockd CASE\n");
		return 2;
	}
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		if (strcmp(cases[i].name, argv[1]) == 0) {
			current_case = cases[i].name;
			cases[i].run();
			printf("PASS %s\n", current_case);
			return 0;
		}
	}
	fprintf(stderr, "test_blockd: no case named %s\n", argv[1]);
	return 2;
}
