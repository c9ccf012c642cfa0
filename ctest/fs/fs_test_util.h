/* SPDX-License-Identifier: GPL-2.0-or-later */
#ifndef NGNFS_TEST_FS_UTIL_H
#define NGNFS_TEST_FS_UTIL_H

/*
 * What the filesystem tests share: the backend (the txn test double or
 * real blockd processes, chosen at build time by NGNFS_FS_TEST_REAL),
 * mkfs+mount in one call, checks that exit with a message, the seeded
 * random source and small wrappers over the native API.
 */

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsck.h"
#include "ngnfs.h"

void test_failed(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4), noreturn));

#define FAIL(...) test_failed(__FILE__, __LINE__, __VA_ARGS__)
#define CHECK(cond, ...)                                                                           \
	do {                                                                                       \
		if (!(cond))                                                                       \
			FAIL(__VA_ARGS__);                                                         \
	} while (0)
#define TEST_LOG(...)                                                                              \
	do {                                                                                       \
		fprintf(stderr, "test: " __VA_ARGS__);                                             \
		fprintf(stderr, "\n");                                                             \
	} while (0)

#define EXPECT_RET(expr, expected)                                                                 \
	do {                                                                                       \
		long _got = (long)(expr);                                                          \
		long _want = (long)(expected);                                                     \
		CHECK(_got == _want, "%s: expected %ld (%s), got %ld (%s; %s)", #expr, _want,      \
		      _want < 0 ? strerror((int)-_want) : "ok", _got,                              \
		      _got < 0 ? strerror((int)-_got) : "ok", ngnfs_last_error());                 \
	} while (0)

#ifdef NGNFS_FS_TEST_REAL
#define BACKEND_NAME "real blockd"
#else
#define BACKEND_NAME "fake txn"
#endif

/* NGNFS_TEST_SEED or a fresh one; printed at start and on failure. */
uint64_t test_seed(void);
uint64_t test_random(void);
/* In a forked client process: failures _exit() instead of exit(). */
void test_mark_child(void);

/* Start the backend with devices devices, mkfs, mount. */
struct ngnfs_fs *start_fs(unsigned int devices, const char *name, enum ngnfs_durability_mode mode);
/* Start the backend and mkfs without mounting (multi-process tests fork first). */
void start_backend_mkfs(unsigned int devices, const char *name);
void stop_backend(void);
/* Start the backend without mkfs (real backend: for the admin tool's test). */
void start_backend_unformatted(unsigned int devices, const char *name);
/* Real backend: extra blockd arguments for the next start (NULL-terminated; kept, not copied). */
void set_blockd_args(const char *const *args);
/* The device manifest file of the real backend. */
const char *test_manifest_path(void);
/* Real backend: the log file of one blockd (NULL with the double). */
const char *test_blockd_log_path(unsigned int device);
/* Real backend: SIGKILL one blockd and start it again on its port (0 or -errno). */
int test_blockd_kill_restart(unsigned int device);
/* Real backend: stop one blockd (SIGTERM, waited for), and start it again later. */
int test_blockd_stop(unsigned int device);
int test_blockd_start(unsigned int device);
/* Another mount of the same filesystem (unmount with ngnfs_unmount). */
struct ngnfs_fs *mount_fs(enum ngnfs_durability_mode mode);
void stop_fs(struct ngnfs_fs *fs);
/* The backend's device addresses and count (after start_fs). */
const char *const *test_addresses(void);
unsigned int test_device_count(void);
/* Blocks allocated over all devices; UINT64_MAX when the backend cannot say exactly. */
uint64_t test_allocated_blocks(struct ngnfs_fs *fs);

/* Adds delta to an inode's field (as fsck names them), for fsck tests. */
void corrupt_inode_field(struct ngnfs_fs *fs, uint64_t ino, enum ngnfs_fsck_field field, int delta);

/* Tests that run transactions of their own (btree tests). */
struct ngnfs_cache;
struct ngnfs_cache *ngnfs_test_fs_cache(struct ngnfs_fs *fs);

struct ngnfs_handle root_of(struct ngnfs_fs *fs);
struct ngnfs_handle make(struct ngnfs_fs *fs, const struct ngnfs_handle *dir, const char *name,
			 uint32_t mode);
struct ngnfs_attr attr_of(struct ngnfs_fs *fs, const struct ngnfs_handle *handle);
int lookup(struct ngnfs_fs *fs, const struct ngnfs_handle *dir, const char *name,
	   struct ngnfs_handle *out);

struct listing {
	size_t count;
	size_t capacity;
	char **names;
	uint64_t *cookies;
	size_t stop_after; /* 0: no limit */
	size_t seen_this_call;
};
int collect_entry(void *arg, const char *name, size_t name_length,
		  const struct ngnfs_handle *handle, uint32_t type_mode, uint64_t cookie);
void listing_free(struct listing *listing);
void list_all(struct ngnfs_fs *fs, const struct ngnfs_handle *dir, struct listing *listing);

/* Fail unless fsck finds no problem. */
void check_fsck_clean(struct ngnfs_fs *fs);

struct test_case {
	const char *name;
	void (*fn)(void);
};
int run_tests(const struct test_case *tests, int argc, char **argv);

void test_model_random(void);
void test_btree_random_vs_reference(void);
void test_btree_sequential_splits(void);
void test_dirent_collisions(void);
void test_fsck_finds_problems(void);
void test_fsck_repairs_online(void);
void test_dir_corrupt_leaf_create(void);
void test_two_clients_see_each_other(void);
void test_concurrent_renames_two_clients(void);
void test_rename_subtree_race(void);
void test_tool_commands(void);
void test_tool_xattr(void);
void test_orphans_reclaimed_after_crash(void);
void test_lost_create_handle_stale(void);
void test_add_devices(void);
void test_mount_with_device_down(void);
void test_full_device_overflows(void);
void test_stopped_client_loses_grants(void);
void test_evicted_inode_is_invalidated(void);
void test_restart_grace_places_elsewhere(void);
void test_open_created_without_device(void);
void test_held_write_across_restart(void);

#endif
