// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Helpers shared by the filesystem tests (see fs_test_util.h): the two
 * backends, seeded randomness, failure reporting and API wrappers.
 */

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <time.h>
#include <unistd.h>

#include "fs_test_util.h"

#ifdef NGNFS_FS_TEST_REAL
#include "cluster.h"
#else
#include "fake_txn.h"
#endif

static uint64_t seed;
static uint64_t random_state;
static const char *current_test = "?";
static bool in_child;

void test_mark_child(void)
{
	in_child = true;
}

void test_failed(const char *file, int line, const char *fmt, ...)
{
	va_list args;

	fprintf(stderr, "%s:%d: FAILED (test %s, backend %s, NGNFS_TEST_SEED=%llu): ", file, line,
		current_test, BACKEND_NAME, (unsigned long long)seed);
	va_start(args, fmt);
	vfprintf(stderr, fmt, args);
	va_end(args);
	fprintf(stderr, "\n");
	/* a forked client must not run the harness's atexit cleanup (it stops the cluster) */
	if (in_child)
		_exit(1);
	exit(1);
}

uint64_t test_seed(void)
{
	return seed;
}

uint64_t test_random(void)
{
	uint64_t x = random_state;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	random_state = x;
	return x * 0x2545f4914f6cdd1dULL;
}

/* ---- backends ---- */

#ifdef NGNFS_FS_TEST_REAL
static struct ngnfs_test_cluster *cluster;

static const char *const *blockd_args;

void set_blockd_args(const char *const *args)
{
	blockd_args = args;
}

static const char *const *backend_start(unsigned int devices, const char *name)
{
	cluster = blockd_args ? ngnfs_test_cluster_start_args(devices, name, blockd_args)
			      : ngnfs_test_cluster_start(devices, name);
	CHECK(cluster, "could not start %u blockd processes", devices);
	return ngnfs_test_cluster_addresses(cluster);
}

static void backend_stop(void)
{
	CHECK(ngnfs_test_cluster_stop(cluster) == 0, "blockd did not shut down cleanly");
	cluster = NULL;
}
#else
static const char *fake_addresses[] = { "fake:0", "fake:1", "fake:2", "fake:3", NULL };

static const char *const *backend_start(unsigned int devices, const char *name)
{
	(void)name;
	CHECK(devices <= 4, "fake backend has at most 4 devices");
	fake_txn_reset();
	fake_txn_configure(test_seed(), 20000);
	return fake_addresses;
}

static void backend_stop(void)
{
	fake_txn_reset();
}
#endif

static const char *const *addresses;
static unsigned int device_count;

struct ngnfs_fs *mount_fs(enum ngnfs_durability_mode mode)
{
	struct ngnfs_mount_options options = {
		.device_addresses = addresses,
		.device_count = (uint16_t)device_count,
		.durability = mode,
	};
	struct ngnfs_fs *fs = NULL;
	int ret;

	ret = ngnfs_mount(&options, &fs);
	CHECK(ret == 0, "mount failed: %d (%s)", ret, ngnfs_last_error());
	return fs;
}

void start_backend_mkfs(unsigned int devices, const char *name)
{
	struct ngnfs_mkfs_options mkfs = { 0 };
	uint8_t fs_id[16];
	int ret;

	device_count = devices;
	addresses = backend_start(devices, name);
	mkfs.device_addresses = addresses;
	mkfs.device_count = (uint16_t)devices;
	ret = ngnfs_mkfs(&mkfs, fs_id);
	CHECK(ret == 0, "mkfs failed: %d (%s)", ret, ngnfs_last_error());
}

struct ngnfs_fs *start_fs(unsigned int devices, const char *name, enum ngnfs_durability_mode mode)
{
	start_backend_mkfs(devices, name);
	return mount_fs(mode);
}

void start_backend_unformatted(unsigned int devices, const char *name)
{
	device_count = devices;
	addresses = backend_start(devices, name);
}

const char *test_blockd_log_path(unsigned int device)
{
#ifdef NGNFS_FS_TEST_REAL
	return ngnfs_test_cluster_log_path(cluster, device);
#else
	(void)device;
	return NULL;
#endif
}

static int blockd_signal(unsigned int device, int sig)
{
#ifdef NGNFS_FS_TEST_REAL
	return ngnfs_test_cluster_kill(cluster, device, sig);
#else
	(void)device;
	(void)sig;
	return -ENOSYS;
#endif
}

int test_blockd_stop(unsigned int device)
{
	return blockd_signal(device, SIGTERM);
}

int test_blockd_start(unsigned int device)
{
#ifdef NGNFS_FS_TEST_REAL
	return ngnfs_test_cluster_restart(cluster, device);
#else
	(void)device;
	return -ENOSYS;
#endif
}

int test_blockd_kill_restart(unsigned int device)
{
	int ret = blockd_signal(device, SIGKILL);

	return ret < 0 ? ret : test_blockd_start(device);
}

const char *test_manifest_path(void)
{
#ifdef NGNFS_FS_TEST_REAL
	return ngnfs_test_cluster_manifest(cluster);
#else
	return NULL;
#endif
}

void stop_backend(void)
{
	backend_stop();
}

void stop_fs(struct ngnfs_fs *fs)
{
	ngnfs_unmount(fs);
	backend_stop();
}

/* ---- helpers over the native API ---- */

struct ngnfs_handle root_of(struct ngnfs_fs *fs)
{
	struct ngnfs_handle root;

	CHECK(ngnfs_root(fs, &root) == 0, "root");
	return root;
}

struct ngnfs_handle make(struct ngnfs_fs *fs, const struct ngnfs_handle *dir, const char *name,
			 uint32_t mode)
{
	struct ngnfs_handle handle;
	int ret;

	ret = ngnfs_create(fs, dir, name, mode, 0, 0, 0, &handle, NULL);
	CHECK(ret == 0, "create \"%s\" mode %o: expected 0, got %d (%s)", name, mode, ret,
	      ngnfs_last_error());
	return handle;
}

struct ngnfs_attr attr_of(struct ngnfs_fs *fs, const struct ngnfs_handle *handle)
{
	struct ngnfs_attr attr;
	int ret;

	ret = ngnfs_getattr(fs, handle, &attr);
	CHECK(ret == 0, "getattr of inode %llu: %d (%s)", (unsigned long long)handle->ino, ret,
	      ngnfs_last_error());
	return attr;
}

int lookup(struct ngnfs_fs *fs, const struct ngnfs_handle *dir, const char *name,
	   struct ngnfs_handle *out)
{
	struct ngnfs_handle ignored;

	return ngnfs_lookup(fs, dir, name, out ? out : &ignored, NULL);
}

int collect_entry(void *arg, const char *name, size_t name_length,
		  const struct ngnfs_handle *handle, uint32_t type_mode, uint64_t cookie)
{
	struct listing *listing = arg;

	(void)handle;
	(void)type_mode;
	if (listing->stop_after && listing->seen_this_call == listing->stop_after)
		return 1;
	if (listing->count == listing->capacity) {
		listing->capacity = listing->capacity ? listing->capacity * 2 : 64;
		listing->names = realloc(listing->names, listing->capacity * sizeof(char *));
		listing->cookies = realloc(listing->cookies, listing->capacity * sizeof(uint64_t));
		CHECK(listing->names && listing->cookies, "out of memory");
	}
	listing->names[listing->count] = strndup(name, name_length);
	listing->cookies[listing->count] = cookie;
	listing->count++;
	listing->seen_this_call++;
	return 0;
}

void listing_free(struct listing *listing)
{
	size_t i;

	for (i = 0; i < listing->count; i++)
		free(listing->names[i]);
	free(listing->names);
	free(listing->cookies);
	memset(listing, 0, sizeof(*listing));
}

void list_all(struct ngnfs_fs *fs, const struct ngnfs_handle *dir, struct listing *listing)
{
	bool end = false;
	uint64_t cookie = 0;
	int ret;

	memset(listing, 0, sizeof(*listing));
	while (!end) {
		listing->seen_this_call = 0;
		ret = ngnfs_readdir(fs, dir, cookie, collect_entry, listing, &end);
		CHECK(ret == 0, "readdir: %d (%s)", ret, ngnfs_last_error());
		if (listing->count)
			cookie = listing->cookies[listing->count - 1];
	}
}

const char *const *test_addresses(void)
{
	return addresses;
}

unsigned int test_device_count(void)
{
	return device_count;
}

uint64_t test_allocated_blocks(struct ngnfs_fs *fs)
{
#ifdef NGNFS_FS_TEST_REAL
	(void)fs;
	return UINT64_MAX; /* the servers' counts include client reservations */
#else
	struct fake_txn_stats stats;

	(void)fs;
	fake_txn_stats(&stats);
	return stats.allocated_blocks;
#endif
}

void check_fsck_clean(struct ngnfs_fs *fs)
{
	struct ngnfs_fsck_report report;
	int ret;

	ret = ngnfs_fsck(fs, NULL, NULL, &report);
	CHECK(ret == 0 && report.problems == 0,
	      "fsck: expected a clean filesystem, got %d with %llu problems (%s)", ret,
	      (unsigned long long)report.problems, ngnfs_last_error());
	ngnfs_fsck_report_free(&report);
}

int run_tests(const struct test_case *tests, int argc, char **argv)
{
	const struct test_case *test;
	const char *env = getenv("NGNFS_TEST_SEED");
	int i;

	if (argc < 2 || strcmp(argv[1], "--help") == 0) {
		printf("usage: %s TEST...\ntests (backend %s):\n", argv[0], BACKEND_NAME);
		for (test = tests; test->name; test++)
			printf("  %s\n", test->name);
		return argc < 2 ? 2 : 0;
	}
	seed = env && *env ? strtoull(env, NULL, 0)
			   : (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
	if (seed == 0)
		seed = 1;
	random_state = seed;
	fprintf(stderr, "test: backend %s, NGNFS_TEST_SEED=%llu\n", BACKEND_NAME,
		(unsigned long long)seed);
	for (i = 1; i < argc; i++) {
		for (test = tests; test->name; test++)
			if (strcmp(test->name, argv[i]) == 0)
				break;
		if (!test->name) {
			fprintf(stderr, "unknown test %s (--help lists them)\n", argv[i]);
			return 2;
		}
		current_test = test->name;
		test->fn();
		fprintf(stderr, "test: %s passed\n", test->name);
	}
	return 0;
}
