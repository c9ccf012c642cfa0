// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Tests of the POSIX filesystem on blocks (libcore/btree.c, dir.c,
 * inode.c, namei.c, super.c, fs.c, fsck.c), one behaviour per test,
 * selected by name on the command line (test_fs --help lists them).
 *
 * The same source is built twice: against the in-memory test double of
 * txn.h (ctest/fs/fake_txn.c, which also injects -EAGAIN retries to prove
 * that every operation is re-runnable) and, with NGNFS_FS_TEST_REAL,
 * against the real cache, network client and blockd processes started by
 * ctest/harness/cluster.h.  Tests use the native API (ngnfs.h) except the
 * btree tests, which call btree.h inside transactions.
 *
 * The model test runs one seeded random sequence of POSIX operations both
 * against ngnfs and against a temporary directory with real syscalls (the
 * oracle), compares every result and then the whole trees.  The seed is
 * printed and can be given with NGNFS_TEST_SEED.
 *
 * Every check fails with what was expected and what came instead.
 */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "ngnfs.h"

#include "fs_test_util.h"
#ifdef NGNFS_FS_TEST_REAL
#include <signal.h>
#include <sys/wait.h>

#include "cache.h"
#else
#include "fake_txn.h"
#endif

/* ---- namespace basics ---- */

/* names: length limits, '/', ".", "..", ENOTDIR */
static void test_names(void)
{
	struct ngnfs_fs *fs = start_fs(2, "names", NGNFS_MOUNT_STABLE);
	struct ngnfs_handle root = root_of(fs), file, dir, found;
	char name[300];

	memset(name, 'n', 255);
	name[255] = '\0';
	file = make(fs, &root, name, S_IFREG | 0644);
	EXPECT_RET(lookup(fs, &root, name, &found), 0);
	CHECK(found.ino == file.ino, "lookup of 255-byte name found another inode");
	name[255] = 'n';
	name[256] = '\0';
	EXPECT_RET(ngnfs_create(fs, &root, name, S_IFREG | 0644, 0, 0, 0, NULL, NULL),
		   -ENAMETOOLONG);
	EXPECT_RET(lookup(fs, &root, name, NULL), -ENAMETOOLONG);
	EXPECT_RET(ngnfs_create(fs, &root, "a/b", S_IFREG | 0644, 0, 0, 0, NULL, NULL), -EINVAL);
	EXPECT_RET(ngnfs_create(fs, &root, ".", S_IFDIR | 0755, 0, 0, 0, NULL, NULL), -EEXIST);
	EXPECT_RET(ngnfs_create(fs, &root, "..", S_IFDIR | 0755, 0, 0, 0, NULL, NULL), -EEXIST);
	EXPECT_RET(ngnfs_create(fs, &root, "", S_IFREG | 0644, 0, 0, 0, NULL, NULL), -ENOENT);
	EXPECT_RET(ngnfs_unlink(fs, &root, "."), -EINVAL);
	EXPECT_RET(ngnfs_unlink(fs, &root, "nothing"), -ENOENT);
	EXPECT_RET(ngnfs_create(fs, &file, "x", S_IFREG | 0644, 0, 0, 0, NULL, NULL), -ENOTDIR);
	EXPECT_RET(lookup(fs, &file, "x", NULL), -ENOTDIR);
	dir = make(fs, &root, "d", S_IFDIR | 0755);
	EXPECT_RET(lookup(fs, &dir, ".", &found), 0);
	CHECK(found.ino == dir.ino, "\".\" is not the directory itself");
	EXPECT_RET(lookup(fs, &dir, "..", &found), 0);
	CHECK(found.ino == root.ino, "\"..\" of d is not the root");
	EXPECT_RET(lookup(fs, &root, "..", &found), 0);
	CHECK(found.ino == root.ino, "\"..\" of the root is not the root");
	EXPECT_RET(ngnfs_create(fs, &root, "d", S_IFREG | 0644, 0, 0, 0, NULL, NULL), -EEXIST);
	stop_fs(fs);
}

/* link_counts: files and directories, hard links, rmdir, times */
static void test_link_counts(void)
{
	struct ngnfs_fs *fs = start_fs(3, "links", NGNFS_MOUNT_STABLE);
	struct ngnfs_handle root = root_of(fs), a, b, file, dir;
	struct ngnfs_attr attr, before;

	before = attr_of(fs, &root);
	CHECK(before.nlink == 2, "new root: expected nlink 2, got %u", before.nlink);
	a = make(fs, &root, "a", S_IFDIR | 0755);
	b = make(fs, &root, "b", S_IFDIR | 0755);
	attr = attr_of(fs, &root);
	CHECK(attr.nlink == 4, "root with 2 subdirs: expected nlink 4, got %u", attr.nlink);
	CHECK(attr.change > before.change, "root change attribute did not grow");
	CHECK(attr.mtime.tv_sec > before.mtime.tv_sec ||
		  (attr.mtime.tv_sec == before.mtime.tv_sec &&
		   attr.mtime.tv_nsec >= before.mtime.tv_nsec),
	      "root mtime went backwards");
	file = make(fs, &a, "f", S_IFREG | 0644);
	EXPECT_RET(ngnfs_link(fs, &file, &b, "g"), 0);
	EXPECT_RET(ngnfs_link(fs, &file, &b, "g"), -EEXIST);
	EXPECT_RET(ngnfs_link(fs, &a, &b, "dirlink"), -EPERM);
	attr = attr_of(fs, &file);
	CHECK(attr.nlink == 2, "file with 2 names: expected nlink 2, got %u", attr.nlink);
	EXPECT_RET(ngnfs_unlink(fs, &a, "f"), 0);
	attr = attr_of(fs, &file);
	CHECK(attr.nlink == 1, "after one unlink: expected nlink 1, got %u", attr.nlink);
	EXPECT_RET(ngnfs_unlink(fs, &b, "g"), 0);
	EXPECT_RET(ngnfs_getattr(fs, &file, &attr), -ESTALE);
	dir = make(fs, &a, "sub", S_IFDIR | 0755);
	attr = attr_of(fs, &a);
	CHECK(attr.nlink == 3, "a with one subdir: expected nlink 3, got %u", attr.nlink);
	EXPECT_RET(ngnfs_unlink(fs, &root, "a"), -ENOTEMPTY);
	EXPECT_RET(ngnfs_unlink(fs, &a, "sub"), 0);
	EXPECT_RET(ngnfs_getattr(fs, &dir, &attr), -ESTALE);
	attr = attr_of(fs, &a);
	CHECK(attr.nlink == 2, "a after rmdir: expected nlink 2, got %u", attr.nlink);
	EXPECT_RET(ngnfs_unlink(fs, &root, "a"), 0);
	EXPECT_RET(ngnfs_unlink(fs, &root, "b"), 0);
	attr = attr_of(fs, &root);
	CHECK(attr.nlink == 2, "root after removing both: expected nlink 2, got %u", attr.nlink);
	EXPECT_RET(ngnfs_create(fs, &a, "late", S_IFREG | 0644, 0, 0, 0, NULL, NULL), -ESTALE);
	stop_fs(fs);
}

/* rename_cases: every POSIX case of rename */
static void test_rename_cases(void)
{
	struct ngnfs_fs *fs = start_fs(2, "rename", NGNFS_MOUNT_STABLE);
	struct ngnfs_handle root = root_of(fs), a, b, sub, deep, f1, f2, empty, full, found;
	struct ngnfs_attr attr;

	a = make(fs, &root, "a", S_IFDIR | 0755);
	b = make(fs, &root, "b", S_IFDIR | 0755);
	sub = make(fs, &a, "sub", S_IFDIR | 0755);
	deep = make(fs, &sub, "deep", S_IFDIR | 0755);
	f1 = make(fs, &a, "f1", S_IFREG | 0644);
	f2 = make(fs, &b, "f2", S_IFREG | 0644);
	empty = make(fs, &b, "empty", S_IFDIR | 0755);
	full = make(fs, &b, "full", S_IFDIR | 0755);
	make(fs, &full, "x", S_IFREG | 0644);

	/* missing source, bad names */
	EXPECT_RET(ngnfs_rename(fs, &a, "nope", &b, "x"), -ENOENT);
	EXPECT_RET(ngnfs_rename(fs, &a, ".", &b, "x"), -EINVAL);
	EXPECT_RET(ngnfs_rename(fs, &a, "f1", &b, ".."), -EINVAL);
	/* onto itself, and onto another name of the same inode: no-ops */
	EXPECT_RET(ngnfs_rename(fs, &a, "f1", &a, "f1"), 0);
	EXPECT_RET(ngnfs_link(fs, &f1, &a, "f1-link"), 0);
	EXPECT_RET(ngnfs_rename(fs, &a, "f1", &a, "f1-link"), 0);
	EXPECT_RET(lookup(fs, &a, "f1", NULL), 0);
	EXPECT_RET(lookup(fs, &a, "f1-link", NULL), 0);
	CHECK(attr_of(fs, &f1).nlink == 2, "no-op rename changed nlink");
	EXPECT_RET(ngnfs_unlink(fs, &a, "f1-link"), 0);
	/* a directory into its own subtree */
	EXPECT_RET(ngnfs_rename(fs, &root, "a", &sub, "a"), -EINVAL);
	EXPECT_RET(ngnfs_rename(fs, &root, "a", &deep, "a"), -EINVAL);
	EXPECT_RET(ngnfs_rename(fs, &root, "a", &a, "a"), -EINVAL);
	/* type mismatches and non-empty targets */
	EXPECT_RET(ngnfs_rename(fs, &a, "f1", &b, "empty"), -EISDIR);
	EXPECT_RET(ngnfs_rename(fs, &a, "sub", &b, "f2"), -ENOTDIR);
	EXPECT_RET(ngnfs_rename(fs, &a, "sub", &b, "full"), -ENOTEMPTY);
	/* a file onto the directory that contains it (Linux says ENOTEMPTY) */
	EXPECT_RET(ngnfs_rename(fs, &a, "f1", &root, "a"), -ENOTEMPTY);
	/* replace a file: the old target goes away */
	EXPECT_RET(ngnfs_rename(fs, &a, "f1", &b, "f2"), 0);
	EXPECT_RET(lookup(fs, &a, "f1", NULL), -ENOENT);
	EXPECT_RET(lookup(fs, &b, "f2", &found), 0);
	CHECK(found.ino == f1.ino, "b/f2 should now be the old a/f1");
	EXPECT_RET(ngnfs_getattr(fs, &f2, &attr), -ESTALE);
	/* replace an empty directory, moving across directories */
	EXPECT_RET(ngnfs_rename(fs, &a, "sub", &b, "empty"), 0);
	EXPECT_RET(ngnfs_getattr(fs, &empty, &attr), -ESTALE);
	EXPECT_RET(lookup(fs, &b, "empty", &found), 0);
	CHECK(found.ino == sub.ino, "b/empty should now be the old a/sub");
	EXPECT_RET(lookup(fs, &sub, "..", &found), 0);
	CHECK(found.ino == b.ino, "\"..\" of the moved directory is not b");
	attr = attr_of(fs, &a);
	CHECK(attr.nlink == 2, "a after its subdir moved away: expected nlink 2, got %u",
	      attr.nlink);
	attr = attr_of(fs, &b);
	CHECK(attr.nlink == 4, "b with full and the moved dir: expected nlink 4, got %u",
	      attr.nlink);
	/* plain rename within a directory keeps the inode */
	EXPECT_RET(ngnfs_rename(fs, &b, "f2", &b, "renamed"), 0);
	EXPECT_RET(lookup(fs, &b, "renamed", &found), 0);
	CHECK(found.ino == f1.ino, "renamed file has another inode");
	/* a directory up into an ancestor */
	EXPECT_RET(ngnfs_rename(fs, &sub, "deep", &root, "deep"), 0);
	EXPECT_RET(lookup(fs, &deep, "..", &found), 0);
	CHECK(found.ino == root.ino, "deep's \"..\" is not the root after moving up");
	attr = attr_of(fs, &root);
	CHECK(attr.nlink == 5, "root with a, b, deep: expected nlink 5, got %u", attr.nlink);
	stop_fs(fs);
}

/* orphan_unlink_open: an open file survives its last unlink until close */
static void test_orphan_unlink_open(void)
{
	struct ngnfs_fs *fs = start_fs(2, "orphan", NGNFS_MOUNT_STABLE);
	struct ngnfs_handle root = root_of(fs), file;
	struct ngnfs_attr attr;
	uint64_t before, during;
	char buffer[16];
	bool eof;

	before = test_allocated_blocks(fs);
	file = make(fs, &root, "open-file", S_IFREG | 0644);
	EXPECT_RET(ngnfs_write(fs, &file, 0, "hello", 5, NGNFS_WRITE_MOUNT), 5);
	EXPECT_RET(ngnfs_open(fs, &file), 0);
	EXPECT_RET(ngnfs_unlink(fs, &root, "open-file"), 0);
	EXPECT_RET(lookup(fs, &root, "open-file", NULL), -ENOENT);
	attr = attr_of(fs, &file);
	CHECK(attr.nlink == 0, "orphan: expected nlink 0, got %u", attr.nlink);
	EXPECT_RET(ngnfs_read(fs, &file, 0, buffer, sizeof(buffer), &eof), 5);
	CHECK(memcmp(buffer, "hello", 5) == 0, "orphan data changed");
	during = test_allocated_blocks(fs);
	EXPECT_RET(ngnfs_close(fs, &file), 0);
	EXPECT_RET(ngnfs_getattr(fs, &file, &attr), -ESTALE);
	if (before != UINT64_MAX)
		CHECK(test_allocated_blocks(fs) < during, "close of the orphan freed nothing");
	if (before != UINT64_MAX)
		CHECK(test_allocated_blocks(fs) == before,
		      "after close expected %llu allocated blocks, got %llu",
		      (unsigned long long)before, (unsigned long long)test_allocated_blocks(fs));
	EXPECT_RET(ngnfs_close(fs, &file), -EBADF);
	stop_fs(fs);
}

/*
 * special_files: character and block devices keep their device number
 * (as given, major and minor), FIFOs and sockets have none; an unknown
 * file type is -EINVAL and creates nothing; all are listed with their type.
 */
static void test_special_files(void)
{
	static const struct {
		const char *name;
		uint32_t type;
		uint64_t rdev;
	} files[] = {
		{ "null", S_IFCHR, (1ULL << 8) | 3 }, /* Linux's old encoding of (1, 3) */
		{ "big-numbers", S_IFCHR, 0x00000fff000fffffULL },
		{ "disk", S_IFBLK, (8ULL << 8) | 16 },
		{ "fifo", S_IFIFO, 0 },
		{ "socket", S_IFSOCK, 0 },
	};
	struct ngnfs_fs *fs = start_fs(1, "special", NGNFS_MOUNT_STABLE);
	struct ngnfs_handle root = root_of(fs), dir, handle;
	struct ngnfs_attr attr;
	size_t i;

	dir = make(fs, &root, "dev", S_IFDIR | 0755);
	for (i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		EXPECT_RET(ngnfs_create(fs, &dir, files[i].name, files[i].type | 0640, 0, 0,
					files[i].rdev ? files[i].rdev : 0x1234, &handle, NULL),
			   0);
		attr = attr_of(fs, &handle);
		CHECK((attr.mode & S_IFMT) == files[i].type && (attr.mode & 07777) == 0640,
		      "%s: expected mode %o, got %o", files[i].name, files[i].type | 0640,
		      attr.mode);
		CHECK(attr.rdev == files[i].rdev, "%s: expected rdev %#llx, got %#llx",
		      files[i].name, (unsigned long long)files[i].rdev,
		      (unsigned long long)attr.rdev);
		CHECK(attr.size == 0 && attr.nlink == 1, "%s: expected size 0 and nlink 1",
		      files[i].name);
	}
	EXPECT_RET(ngnfs_create(fs, &dir, "weird", 0170000 | 0644, 0, 0, 0, NULL, NULL), -EINVAL);
	EXPECT_RET(ngnfs_lookup(fs, &dir, "weird", NULL, NULL), -ENOENT);
	CHECK(attr_of(fs, &dir).nlink == 2, "expected the directory's nlink to stay 2");
	stop_fs(fs);
}

/* The target of symlink i: bytes that differ along it, so a split out of order shows. */
static void symlink_target(char *target, size_t length, unsigned int i)
{
	for (size_t j = 0; j < length; j++)
		target[j] = (char)('a' + (j * 7 + i) % 26);
	target[length] = '\0';
}

/*
 * symlinks: inline and block targets, and the ones longer than a block
 * (their last bytes inline), up to POSIX's 4095; readlink whole and into
 * a short buffer, beside inline xattrs; one byte more is too long.
 */
static void test_symlinks(void)
{
	struct ngnfs_fs *fs = start_fs(2, "symlink", NGNFS_MOUNT_STABLE);
	struct ngnfs_handle root = root_of(fs), link;
	static char target[5000], buffer[5000], value[3000], back[3000];
	struct ngnfs_attr attr;
	size_t lengths[] = { 1, 100, 1024, 1025, 4000, 4064, 4065, 4080, 4095 };
	unsigned int i;
	char name[32];
	int ret;

	for (i = 0; i < sizeof(lengths) / sizeof(lengths[0]); i++) {
		symlink_target(target, lengths[i], i);
		snprintf(name, sizeof(name), "link%u", i);
		ret = ngnfs_symlink(fs, &root, name, target, 1, 2, &link, &attr);
		EXPECT_RET(ret, 0);
		CHECK(attr.size == lengths[i] && (attr.mode & S_IFMT) == S_IFLNK,
		      "symlink attr: size %llu mode %o", (unsigned long long)attr.size, attr.mode);
		EXPECT_RET(ngnfs_readlink(fs, &link, buffer, sizeof(buffer)), (long)lengths[i]);
		CHECK(strcmp(buffer, target) == 0, "readlink of %zu bytes returned another target",
		      lengths[i]);
	}
	/* the longest: a short buffer gets the start, xattrs share the inode with its tail */
	symlink_target(target, 4095, 8);
	memset(buffer, 0, sizeof(buffer));
	EXPECT_RET(ngnfs_readlink(fs, &link, buffer, 4070), 4095);
	CHECK(memcmp(buffer, target, 4070) == 0 && buffer[4070] == '\0',
	      "readlink of 4095 bytes into 4070 did not return its first 4070 bytes alone");
	memset(value, 'v', sizeof(value));
	EXPECT_RET(ngnfs_setxattr(fs, &link, "user.where", value, sizeof(value), 0), 0);
	EXPECT_RET(ngnfs_readlink(fs, &link, buffer, sizeof(buffer)), 4095);
	CHECK(strcmp(buffer, target) == 0, "readlink of 4095 bytes after an xattr differs");
	EXPECT_RET(ngnfs_getxattr(fs, &link, "user.where", back, sizeof(back)),
		   (long)sizeof(value));
	CHECK(memcmp(back, value, sizeof(value)) == 0, "xattr beside a 4095-byte symlink differs");
	memset(target, 'z', 4096);
	target[4096] = '\0';
	EXPECT_RET(ngnfs_symlink(fs, &root, "toolong", target, 0, 0, NULL, NULL), -ENAMETOOLONG);
	EXPECT_RET(ngnfs_readlink(fs, &root, buffer, sizeof(buffer)), -EINVAL);
	for (i = 0; i < sizeof(lengths) / sizeof(lengths[0]); i++) {
		snprintf(name, sizeof(name), "link%u", i);
		EXPECT_RET(ngnfs_unlink(fs, &root, name), 0);
	}
	stop_fs(fs);
}

/* setattr: mode bits keep the type, uid/gid, explicit and "now" times, ctime */
static void test_setattr(void)
{
	struct ngnfs_fs *fs = start_fs(1, "setattr", NGNFS_MOUNT_STABLE);
	struct ngnfs_handle root = root_of(fs), file, dir;
	struct ngnfs_setattr set = { 0 };
	struct ngnfs_attr attr, before;

	file = make(fs, &root, "f", S_IFREG | 0644);
	dir = make(fs, &root, "d", S_IFDIR | 0755);
	before = attr_of(fs, &file);
	set.mask =
	    NGNFS_SET_MODE | NGNFS_SET_UID | NGNFS_SET_GID | NGNFS_SET_MTIME | NGNFS_SET_ATIME;
	set.mode = S_IFDIR | 04711; /* the type bits must be ignored */
	set.uid = 1001;
	set.gid = 1002;
	set.mtime.tv_sec = 1000000000;
	set.mtime.tv_nsec = 123456789;
	set.atime.tv_sec = 999;
	set.atime.tv_nsec = 1;
	EXPECT_RET(ngnfs_setattr(fs, &file, &set, &attr), 0);
	CHECK(attr.mode == (S_IFREG | 04711), "mode: expected %o, got %o", S_IFREG | 04711,
	      attr.mode);
	CHECK(attr.uid == 1001 && attr.gid == 1002, "uid/gid: got %u/%u", attr.uid, attr.gid);
	CHECK(attr.mtime.tv_sec == 1000000000 && attr.mtime.tv_nsec == 123456789,
	      "mtime: got %lld.%09ld", (long long)attr.mtime.tv_sec, attr.mtime.tv_nsec);
	CHECK(attr.atime.tv_sec == 999 && attr.atime.tv_nsec == 1, "atime: got %lld.%09ld",
	      (long long)attr.atime.tv_sec, attr.atime.tv_nsec);
	CHECK(attr.change > before.change, "change did not grow");
	CHECK(attr.ctime.tv_sec >= before.ctime.tv_sec, "ctime went backwards");
	set.mask = NGNFS_SET_SIZE;
	set.size = 10000;
	EXPECT_RET(ngnfs_setattr(fs, &file, &set, &attr), 0);
	CHECK(attr.size == 10000, "size: expected 10000, got %llu", (unsigned long long)attr.size);
	EXPECT_RET(ngnfs_setattr(fs, &dir, &set, &attr), -EISDIR);
	set.mask = NGNFS_SET_MTIME;
	set.mtime.tv_nsec = 1000000000;
	EXPECT_RET(ngnfs_setattr(fs, &file, &set, &attr), -EINVAL);
	stop_fs(fs);
}

/*
 * write_after_getattr_reads_back: the data of a write is read back, also
 * when the inode was only read (getattr) just before the write, in both
 * durability modes and over one and several devices.
 */
static void write_after_getattr_once(unsigned int devices, enum ngnfs_durability_mode mode)
{
	struct ngnfs_fs *fs = start_fs(devices, "getattr-write", mode);
	struct ngnfs_handle root = root_of(fs), file;
	struct ngnfs_attr attr;
	unsigned char data[100], back[200];
	bool eof = false;
	unsigned int i;

	for (i = 0; i < sizeof(data); i++)
		data[i] = (unsigned char)(i * 7 + 1);
	EXPECT_RET(ngnfs_create(fs, &root, "f", S_IFREG | 0644, 0, 0, 0, &file, NULL), 0);
	EXPECT_RET(ngnfs_getattr(fs, &file, &attr), 0);
	CHECK(attr.size == 0, "new file: expected size 0, got %llu", (unsigned long long)attr.size);
	EXPECT_RET(ngnfs_write(fs, &file, 0, data, sizeof(data), NGNFS_WRITE_MOUNT),
		   (long)sizeof(data));
	memset(back, 0xee, sizeof(back));
	EXPECT_RET(ngnfs_read(fs, &file, 0, back, sizeof(back), &eof), (long)sizeof(data));
	for (i = 0; i < sizeof(data); i++)
		CHECK(back[i] == data[i],
		      "%u devices, %s: byte %u read back as 0x%02x, written 0x%02x", devices,
		      mode == NGNFS_MOUNT_STABLE ? "stable" : "writeback", i, back[i], data[i]);
	CHECK(eof, "read to the end of a 100-byte file did not say end of file");
	EXPECT_RET(ngnfs_getattr(fs, &file, &attr), 0);
	CHECK(attr.size == sizeof(data), "after the write: expected size %zu, got %llu",
	      sizeof(data), (unsigned long long)attr.size);
	/* And once more after the inode's attributes were read between two writes. */
	EXPECT_RET(ngnfs_write(fs, &file, 50, data, sizeof(data), NGNFS_WRITE_MOUNT),
		   (long)sizeof(data));
	EXPECT_RET(ngnfs_getattr(fs, &file, &attr), 0);
	CHECK(attr.size == 150, "after the second write: expected size 150, got %llu",
	      (unsigned long long)attr.size);
	EXPECT_RET(ngnfs_read(fs, &file, 0, back, sizeof(back), &eof), 150);
	for (i = 0; i < 150; i++) {
		unsigned char want = i < 50 ? data[i] : data[i - 50];

		CHECK(back[i] == want,
		      "%u devices, %s: after the second write byte %u read back as 0x%02x, "
		      "expected 0x%02x",
		      devices, mode == NGNFS_MOUNT_STABLE ? "stable" : "writeback", i, back[i],
		      want);
	}
	stop_fs(fs);
}

static void test_write_after_getattr_reads_back(void)
{
	write_after_getattr_once(1, NGNFS_MOUNT_STABLE);
	write_after_getattr_once(3, NGNFS_MOUNT_STABLE);
	write_after_getattr_once(3, NGNFS_MOUNT_WRITEBACK);
}

/*
 * link_max: a file takes NGNFS_LINK_MAX names (the maxlink the gateway
 * advertises) and the next link is -EMLINK, which changes nothing; once a
 * name goes, a link works again.
 */
static void test_link_max(void)
{
	struct ngnfs_fs *fs = start_fs(1, "link-max", NGNFS_MOUNT_WRITEBACK);
	struct ngnfs_handle root = root_of(fs), names, file;
	struct ngnfs_attr attr;
	unsigned int i;
	char name[32];

	names = make(fs, &root, "names", S_IFDIR | 0755);
	file = make(fs, &names, "l0", S_IFREG | 0644);
	for (i = 1; i < NGNFS_LINK_MAX; i++) {
		snprintf(name, sizeof(name), "l%u", i);
		EXPECT_RET(ngnfs_link(fs, &file, &names, name), 0);
	}
	attr = attr_of(fs, &file);
	CHECK(attr.nlink == NGNFS_LINK_MAX, "expected nlink %u, got %u", NGNFS_LINK_MAX,
	      attr.nlink);
	EXPECT_RET(ngnfs_link(fs, &file, &root, "one-too-many"), -EMLINK);
	EXPECT_RET(ngnfs_lookup(fs, &root, "one-too-many", NULL, NULL), -ENOENT);
	attr = attr_of(fs, &file);
	CHECK(attr.nlink == NGNFS_LINK_MAX, "after EMLINK: expected nlink %u, got %u",
	      NGNFS_LINK_MAX, attr.nlink);
	EXPECT_RET(ngnfs_unlink(fs, &names, "l7"), 0);
	EXPECT_RET(ngnfs_link(fs, &file, &root, "one-too-many"), 0);
	CHECK(attr_of(fs, &file).nlink == NGNFS_LINK_MAX, "expected nlink %u again",
	      NGNFS_LINK_MAX);
	stop_fs(fs);
}

/* stale_handles: a reused inode block has another generation */
static void test_stale_handles(void)
{
	struct ngnfs_fs *fs = start_fs(1, "stale", NGNFS_MOUNT_STABLE);
	struct ngnfs_handle root = root_of(fs), old, h, bogus;
	struct ngnfs_attr attr;
	uint8_t wire[NGNFS_HANDLE_WIRE_SIZE];
	unsigned int i;
	char name[32];

	old = make(fs, &root, "victim", S_IFREG | 0644);
	EXPECT_RET(ngnfs_unlink(fs, &root, "victim"), 0);
	for (i = 0; i < 300; i++) {
		snprintf(name, sizeof(name), "n%u", i);
		h = make(fs, &root, name, S_IFREG | 0644);
		if (h.ino == old.ino)
			CHECK(h.generation != old.generation,
			      "reused inode block %llu kept generation %llu",
			      (unsigned long long)h.ino, (unsigned long long)h.generation);
	}
	EXPECT_RET(ngnfs_getattr(fs, &old, &attr), -ESTALE);
	ngnfs_handle_to_wire(&h, wire);
	ngnfs_handle_from_wire(wire, &bogus);
	CHECK(bogus.ino == h.ino && bogus.generation == h.generation, "wire round trip");
	bogus.generation++;
	EXPECT_RET(ngnfs_getattr(fs, &bogus, &attr), -ESTALE);
	bogus.ino = 0;
	EXPECT_RET(ngnfs_getattr(fs, &bogus, &attr), -ESTALE);
	bogus.ino = (1ULL << 48) * 9 + 100; /* device 9 does not exist */
	EXPECT_RET(ngnfs_getattr(fs, &bogus, &attr), -ESTALE);
	bogus.ino = 1ULL << 46; /* device 0, far beyond its capacity: blockd says ERANGE */
	EXPECT_RET(ngnfs_getattr(fs, &bogus, &attr), -ESTALE);
	EXPECT_RET(ngnfs_setattr(fs, &bogus,
				 &(struct ngnfs_setattr){ .mask = NGNFS_SET_MODE, .mode = 0600 },
				 NULL),
		   -ESTALE);
	stop_fs(fs);
}

/* ---- directories ---- */

static int compare_strings(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

struct fsck_progress {
	unsigned int lines;
	bool saw_first;
};

static void count_fsck_progress(void *arg, bool problem, const char *line)
{
	struct fsck_progress *progress = arg;
	char first[64];

	snprintf(first, sizeof(first), "checked %u inodes so far", NGNFS_FSCK_PROGRESS_INODES);
	if (!problem && strstr(line, " inodes so far ("))
		progress->lines++;
	if (!problem && strncmp(line, first, strlen(first)) == 0)
		progress->saw_first = true;
}

/*
 * Big directory listed in pages while entries are added and removed
 * between pages: every entry that existed for the whole listing is
 * returned exactly once, nothing removed before being reached is returned.
 */
static void big_directory(unsigned int count, enum ngnfs_durability_mode mode)
{
	struct ngnfs_fs *fs = start_fs(2, "bigdir", mode);
	struct ngnfs_handle root = root_of(fs), dir;
	struct listing listing;
	struct timespec start, end;
	unsigned int i, page = 0, returned_stable = 0;
	uint64_t cookie = 0;
	bool eod = false;
	char name[64];
	char *seen;
	int ret;

	dir = make(fs, &root, "big", S_IFDIR | 0755);
	clock_gettime(CLOCK_MONOTONIC, &start);
	for (i = 0; i < count; i++) {
		snprintf(name, sizeof(name), "stable-%08u", i);
		ret = ngnfs_create(fs, &dir, name, S_IFREG | 0644, 0, 0, 0, NULL, NULL);
		CHECK(ret == 0, "create %s: %d (%s)", name, ret, ngnfs_last_error());
		if (i && i % 100000 == 0)
			TEST_LOG("created %u entries", i);
	}
	clock_gettime(CLOCK_MONOTONIC, &end);
	TEST_LOG("%u creates in %.2f s (%s)", count,
		 (double)(end.tv_sec - start.tv_sec) + (end.tv_nsec - start.tv_nsec) / 1e9,
		 BACKEND_NAME);
	CHECK(attr_of(fs, &dir).nlink == 2, "directory of files: nlink 2");
	/* some entries that will be removed during the listing */
	for (i = 0; i < 1000; i++) {
		snprintf(name, sizeof(name), "doomed-%u", i);
		make(fs, &dir, name, S_IFREG | 0644);
	}

	seen = calloc(count, 1);
	memset(&listing, 0, sizeof(listing));
	while (!eod) {
		size_t first = listing.count;

		listing.seen_this_call = 0;
		listing.stop_after = 500;
		ret = ngnfs_readdir(fs, &dir, cookie, collect_entry, &listing, &eod);
		CHECK(ret == 0, "readdir page %u: %d (%s)", page, ret, ngnfs_last_error());
		for (i = (unsigned int)first; i < listing.count; i++) {
			unsigned int n;

			if (sscanf(listing.names[i], "stable-%08u", &n) == 1) {
				CHECK(n < count && !seen[n], "entry %s returned twice",
				      listing.names[i]);
				seen[n] = 1;
				returned_stable++;
			} else if (strncmp(listing.names[i], "doomed-", 7) == 0) {
				CHECK(atoi(listing.names[i] + 7) >= (int)page * 20,
				      "removed entry %s returned after its removal",
				      listing.names[i]);
			}
			free(listing.names[i]);
		}
		listing.count = 0;
		if (listing.seen_this_call)
			cookie = listing.cookies[listing.seen_this_call - 1];
		/* churn between pages: add new names, remove doomed ones */
		for (i = 0; i < 20; i++) {
			snprintf(name, sizeof(name), "new-%u-%u", page, i);
			make(fs, &dir, name, S_IFREG | 0644);
			snprintf(name, sizeof(name), "doomed-%u", page * 20 + i);
			if (page * 20 + i < 1000)
				EXPECT_RET(ngnfs_unlink(fs, &dir, name), 0);
		}
		page++;
	}
	CHECK(returned_stable == count,
	      "listing in %u pages returned %u of the %u entries that stayed", page,
	      returned_stable, count);
	TEST_LOG("listed %u entries in %u pages with churn", count, page);
	if (count >= NGNFS_FSCK_PROGRESS_INODES) {
		/* a walk this long says how far it got */
		struct fsck_progress progress = { 0 };
		struct ngnfs_fsck_report report;

		EXPECT_RET(ngnfs_fsck(fs, count_fsck_progress, &progress, &report), 0);
		CHECK(report.problems == 0 && progress.saw_first &&
			  progress.lines == report.inodes / NGNFS_FSCK_PROGRESS_INODES,
		      "fsck of %llu inodes: expected a clean walk and %llu progress lines, the "
		      "first at %u inodes, got %llu problems and %u lines",
		      (unsigned long long)report.inodes,
		      (unsigned long long)(report.inodes / NGNFS_FSCK_PROGRESS_INODES),
		      NGNFS_FSCK_PROGRESS_INODES, (unsigned long long)report.problems,
		      progress.lines);
		ngnfs_fsck_report_free(&report);
	}
	free(seen);
	free(listing.names);
	free(listing.cookies);
	stop_fs(fs);
}

static void test_readdir_cookies_100k(void)
{
	const char *count = getenv("NGNFS_FS_BIGDIR_COUNT"); /* for measuring by hand */

	if (count) {
		big_directory((unsigned int)atoi(count), NGNFS_MOUNT_WRITEBACK);
		return;
	}
#ifdef NGNFS_FS_TEST_REAL
	/* 8000 on blockd, for time; NGNFS_FS_BIGDIR_COUNT runs any size by hand */
	big_directory(8000, NGNFS_MOUNT_WRITEBACK);
#else
	big_directory(100000, NGNFS_MOUNT_STABLE);
#endif
}

static void test_directory_1m(void)
{
	big_directory(1000000, NGNFS_MOUNT_WRITEBACK);
}

/* readdir_sorted_names: a listing returns exactly the names created */
static void test_readdir_exact(void)
{
	/* writeback: this is about listing, not durability, and it is faster on blockd */
	struct ngnfs_fs *fs = start_fs(2, "readdir", NGNFS_MOUNT_WRITEBACK);
	struct ngnfs_handle root = root_of(fs);
	struct listing listing;
	char name[32], expected[32];
	unsigned int i;

	for (i = 0; i < 2000; i++) {
		snprintf(name, sizeof(name), "e%04u", i);
		make(fs, &root, name, i % 10 ? S_IFREG | 0644 : S_IFDIR | 0755);
	}
	list_all(fs, &root, &listing);
	CHECK(listing.count == 2000, "expected 2000 entries, got %zu", listing.count);
	for (i = 1; i < listing.count; i++)
		CHECK(listing.cookies[i] > listing.cookies[i - 1], "cookies not increasing");
	qsort(listing.names, listing.count, sizeof(char *), compare_strings);
	for (i = 0; i < 2000; i++) {
		snprintf(expected, sizeof(expected), "e%04u", i);
		CHECK(strcmp(listing.names[i], expected) == 0, "entry %u: expected %s, got %s", i,
		      expected, listing.names[i]);
	}
	listing_free(&listing);
	stop_fs(fs);
}

/* fsck_clean_and_counts: fsck on a populated filesystem finds no problem */
static void test_fsck_clean(void)
{
	struct ngnfs_fs *fs = start_fs(3, "fsck", NGNFS_MOUNT_STABLE);
	struct ngnfs_handle root = root_of(fs), d, f;
	struct ngnfs_fsck_report report;
	unsigned int i;
	char name[32];

	for (i = 0; i < 50; i++) {
		snprintf(name, sizeof(name), "d%u", i);
		d = make(fs, &root, name, S_IFDIR | 0755);
		f = make(fs, &d, "file", S_IFREG | 0644);
		snprintf(name, sizeof(name), "l%u", i);
		EXPECT_RET(ngnfs_link(fs, &f, &root, name), 0);
	}
	EXPECT_RET(ngnfs_fsck(fs, NULL, NULL, &report), 0);
	CHECK(report.problems == 0, "fsck found %llu problems on a clean filesystem",
	      (unsigned long long)report.problems);
	CHECK(report.inodes == 1 + 50 + 50 + 1, "fsck counted %llu inodes, expected %u",
	      (unsigned long long)report.inodes, 1 + 50 + 50 + 1);
	ngnfs_fsck_report_free(&report);
	stop_fs(fs);
}

/*
 * sync_inode_one_file: ngnfs_sync_inode makes one file's changes durable
 * without writing another file's.  Fake store: the sync asks the cache for
 * the inode's block only (no whole sync), and a lost write-back of the
 * inode is reported once, to that inode's sync.  Real blockd: a writeback
 * client (60 s interval, so nothing leaves on its own) writes two files in
 * two directories, syncs one: exactly one set is written and the other
 * file's blocks stay dirty; then the client is killed with SIGKILL, and a
 * new mount finds the synced file with its data and the other not at all.
 */
#define SYNC_FILE_BYTES 10000

static void sync_file_data(uint8_t *data, unsigned int salt)
{
	for (unsigned int i = 0; i < SYNC_FILE_BYTES; i++)
		data[i] = (uint8_t)(i * 13 + salt);
}

#ifdef NGNFS_FS_TEST_REAL
static void sync_inode_child(int out)
{
	struct ngnfs_mount_options options = {
		.device_addresses = test_addresses(),
		.device_count = (uint16_t)test_device_count(),
		.durability = NGNFS_MOUNT_WRITEBACK,
		.writeback_interval_ms = 60000,
	};
	struct ngnfs_cache_counters before, after;
	struct ngnfs_handle root, d1, d2, a, b;
	static uint8_t data[SYNC_FILE_BYTES];
	struct ngnfs_fs *fs = NULL;
	char report[128];

	test_mark_child();
	EXPECT_RET(ngnfs_mount(&options, &fs), 0);
	root = root_of(fs);
	d1 = make(fs, &root, "d1", S_IFDIR | 0755);
	d2 = make(fs, &root, "d2", S_IFDIR | 0755);
	/* both mkdirs wrote the root: one set; make the directories durable first */
	EXPECT_RET(ngnfs_sync(fs), 0);
	a = make(fs, &d1, "a", S_IFREG | 0644);
	b = make(fs, &d2, "b", S_IFREG | 0644);
	sync_file_data(data, 1);
	EXPECT_RET(ngnfs_write(fs, &a, 0, data, sizeof(data), NGNFS_WRITE_MOUNT),
		   (long)sizeof(data));
	sync_file_data(data, 2);
	EXPECT_RET(ngnfs_write(fs, &b, 0, data, sizeof(data), NGNFS_WRITE_MOUNT),
		   (long)sizeof(data));
	ngnfs_cache_counters(ngnfs_test_fs_cache(fs), &before);
	EXPECT_RET(ngnfs_sync_inode(fs, &a), 0);
	ngnfs_cache_counters(ngnfs_test_fs_cache(fs), &after);
	CHECK(after.sets_written == before.sets_written + 1,
	      "syncing one file wrote %llu sets, expected exactly 1 (its own)",
	      (unsigned long long)(after.sets_written - before.sets_written));
	/* a's inode, its 3 data blocks, d1's inode and entry block at least */
	CHECK(after.blocks_written - before.blocks_written >= 5,
	      "syncing one file wrote %llu blocks, expected at least 5",
	      (unsigned long long)(after.blocks_written - before.blocks_written));
	CHECK(after.dirty_blocks >= 5,
	      "the other file's blocks should still be dirty, %llu dirty blocks left",
	      (unsigned long long)after.dirty_blocks);
	snprintf(report, sizeof(report), "synced %llu blocks, %llu still dirty\n",
		 (unsigned long long)(after.blocks_written - before.blocks_written),
		 (unsigned long long)after.dirty_blocks);
	CHECK(write(out, report, strlen(report)) == (ssize_t)strlen(report), "report");
	/* wait to be killed: nothing else may reach the servers */
	for (;;)
		pause();
}
#endif

static void test_sync_inode_one_file(void)
{
	static uint8_t want[SYNC_FILE_BYTES], got[SYNC_FILE_BYTES + 1];
	struct ngnfs_handle root, d1, a;
	struct ngnfs_fs *fs;
	bool eof = false;

#ifdef NGNFS_FS_TEST_REAL
	struct ngnfs_handle d2, b;
	char report[128];
	int status, fds[2];
	ssize_t length;
	pid_t pid;

	fs = start_fs(3, "sync-inode", NGNFS_MOUNT_STABLE);
	ngnfs_unmount(fs);
	CHECK(pipe(fds) == 0, "pipe: %s", strerror(errno));
	pid = fork();
	CHECK(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0) {
		close(fds[0]);
		sync_inode_child(fds[1]);
	}
	close(fds[1]);
	length = read(fds[0], report, sizeof(report) - 1);
	close(fds[0]);
	if (length <= 0) {
		waitpid(pid, &status, 0);
		FAIL("the writeback client failed before its sync_inode returned (status 0x%x)",
		     status);
	}
	report[length] = '\0';
	TEST_LOG("writeback client: %s", report);
	CHECK(kill(pid, SIGKILL) == 0, "kill: %s", strerror(errno));
	CHECK(waitpid(pid, &status, 0) == pid && WIFSIGNALED(status),
	      "the client did not die of SIGKILL (status 0x%x)", status);

	fs = mount_fs(NGNFS_MOUNT_STABLE);
	root = root_of(fs);
	EXPECT_RET(ngnfs_lookup(fs, &root, "d1", &d1, NULL), 0);
	EXPECT_RET(ngnfs_lookup(fs, &d1, "a", &a, NULL), 0);
	EXPECT_RET(ngnfs_lookup(fs, &root, "d2", &d2, NULL), 0);
	/* b was never synced and its client died: its create is gone, not half there */
	EXPECT_RET(ngnfs_lookup(fs, &d2, "b", &b, NULL), -ENOENT);
#else
	struct fake_txn_stats before, after;
	struct ngnfs_handle b;
	uint64_t losses;

	fs = start_fs(1, "sync-inode", NGNFS_MOUNT_WRITEBACK);
	root = root_of(fs);
	d1 = make(fs, &root, "d1", S_IFDIR | 0755);
	a = make(fs, &d1, "a", S_IFREG | 0644);
	b = make(fs, &d1, "b", S_IFREG | 0644);
	sync_file_data(want, 1);
	EXPECT_RET(ngnfs_write(fs, &a, 0, want, sizeof(want), NGNFS_WRITE_MOUNT),
		   (long)sizeof(want));
	fake_txn_stats(&before);
	EXPECT_RET(ngnfs_sync_inode(fs, &a), 0);
	fake_txn_stats(&after);
	CHECK(after.block_syncs == before.block_syncs + 1 && after.last_synced_blkno == a.ino,
	      "sync_inode of inode %llu: expected one sync of block %llu, got %llu syncs (last "
	      "of block %llu)",
	      (unsigned long long)a.ino, (unsigned long long)a.ino,
	      (unsigned long long)(after.block_syncs - before.block_syncs),
	      (unsigned long long)after.last_synced_blkno);
	CHECK(after.whole_syncs == before.whole_syncs,
	      "sync_inode fell back to a whole-filesystem sync");
	/*
	 * a lost write-back of a's set is a's sync's error, once, and not
	 * b's; the loss count (the gateway's write verifier) moves with the
	 * loss itself, not with the syncs that report it
	 */
	losses = ngnfs_write_losses(fs);
	fake_txn_lose_block(a.ino, -EIO);
	CHECK(ngnfs_write_losses(fs) == losses + 1,
	      "a lost block: expected the loss count to go from %llu to %llu, got %llu",
	      (unsigned long long)losses, (unsigned long long)losses + 1,
	      (unsigned long long)ngnfs_write_losses(fs));
	EXPECT_RET(ngnfs_sync_inode(fs, &b), 0);
	EXPECT_RET(ngnfs_sync_inode(fs, &a), -EIO);
	EXPECT_RET(ngnfs_sync_inode(fs, &a), 0);
	CHECK(ngnfs_write_losses(fs) == losses + 1,
	      "syncs changed the loss count: %llu, expected %llu",
	      (unsigned long long)ngnfs_write_losses(fs), (unsigned long long)losses + 1);
#endif
	sync_file_data(want, 1);
	EXPECT_RET(ngnfs_read(fs, &a, 0, got, sizeof(got), &eof), (long)sizeof(want));
	CHECK(memcmp(got, want, sizeof(want)) == 0, "the synced file's data differs");
	stop_fs(fs);
}

#ifndef NGNFS_FS_TEST_REAL
/*
 * loss_not_inherited: a loss is reported to the next sync of the file that
 * lost changes, never to a later file that gets the same inode block.  A
 * create lost with its device's session also gives its reservation back
 * to the device (volatile, protocol.md), which hands the block out again;
 * the fake store reuses the block of an unlinked file.  The new file's
 * first COMMIT must not fail with the old file's error.
 */
static void test_loss_not_inherited(void)
{
	struct ngnfs_fs *fs = start_fs(1, "loss-reuse", NGNFS_MOUNT_WRITEBACK);
	struct ngnfs_handle root = root_of(fs), d, old, reused, other;

	d = make(fs, &root, "d", S_IFDIR | 0755);
	old = make(fs, &d, "old", S_IFREG | 0644);
	other = make(fs, &d, "other", S_IFREG | 0644);
	EXPECT_RET(ngnfs_sync(fs), 0);
	fake_txn_lose_block(old.ino, -ENOTCONN);
	fake_txn_lose_block(other.ino, -ENOTCONN);
	EXPECT_RET(ngnfs_unlink(fs, &d, "old"), 0);
	EXPECT_RET(ngnfs_sync(fs), 0);
	reused = make(fs, &d, "reused", S_IFREG | 0644);
	CHECK(reused.ino == old.ino,
	      "expected the new file to get the unlinked file's block %llu, got %llu",
	      (unsigned long long)old.ino, (unsigned long long)reused.ino);
	EXPECT_RET(ngnfs_sync_inode(fs, &reused), 0);
	/* the other file's loss still reaches its own sync, once */
	EXPECT_RET(ngnfs_sync_inode(fs, &other), -ENOTCONN);
	EXPECT_RET(ngnfs_sync_inode(fs, &other), 0);
	stop_fs(fs);
}
#endif

/*
 * create_with_times: the times given to the create are the new file's
 * (one transaction: the NFSv4 exclusive-create verifier), NULL means now,
 * and a bad time is refused without creating anything.
 */
static void test_create_with_times(void)
{
	struct ngnfs_fs *fs = start_fs(1, "create-times", NGNFS_MOUNT_STABLE);
	struct ngnfs_handle root = root_of(fs), file;
	struct timespec atime = { 0x12345678, 0 }, mtime = { 0x1abcdef0, 999999999 };
	struct timespec bad = { 1, 1000000000 };
	struct ngnfs_attr attr;

	EXPECT_RET(ngnfs_create_with_times(fs, &root, "v", S_IFREG | 0600, 0, 0, 0, &atime, &mtime,
					   &file, &attr),
		   0);
	CHECK(attr.atime.tv_sec == atime.tv_sec && attr.atime.tv_nsec == atime.tv_nsec &&
		  attr.mtime.tv_sec == mtime.tv_sec && attr.mtime.tv_nsec == mtime.tv_nsec,
	      "create returned atime %lld.%09ld mtime %lld.%09ld", (long long)attr.atime.tv_sec,
	      attr.atime.tv_nsec, (long long)attr.mtime.tv_sec, attr.mtime.tv_nsec);
	EXPECT_RET(ngnfs_getattr(fs, &file, &attr), 0);
	CHECK(attr.atime.tv_sec == atime.tv_sec && attr.mtime.tv_sec == mtime.tv_sec &&
		  attr.mtime.tv_nsec == mtime.tv_nsec,
	      "getattr after create: atime %lld mtime %lld.%09ld", (long long)attr.atime.tv_sec,
	      (long long)attr.mtime.tv_sec, attr.mtime.tv_nsec);
	CHECK(attr.ctime.tv_sec > mtime.tv_sec, "ctime is the create's time, not the given one");
	EXPECT_RET(ngnfs_create_with_times(fs, &root, "w", S_IFREG | 0600, 0, 0, 0, NULL, &mtime,
					   &file, &attr),
		   0);
	CHECK(attr.atime.tv_sec == attr.ctime.tv_sec && attr.mtime.tv_sec == mtime.tv_sec,
	      "atime NULL must be the create time (atime %lld ctime %lld)",
	      (long long)attr.atime.tv_sec, (long long)attr.ctime.tv_sec);
	EXPECT_RET(ngnfs_create_with_times(fs, &root, "x", S_IFREG | 0600, 0, 0, 0, &bad, NULL,
					   &file, &attr),
		   -EINVAL);
	EXPECT_RET(ngnfs_lookup(fs, &root, "x", &file, NULL), -ENOENT);
	stop_fs(fs);
}

static const struct test_case tests[] = {
	{ "btree_random_vs_reference", test_btree_random_vs_reference },
	{ "btree_sequential_splits", test_btree_sequential_splits },
	{ "names", test_names },
	{ "link_counts", test_link_counts },
	{ "rename_cases", test_rename_cases },
	{ "orphan_unlink_open", test_orphan_unlink_open },
	{ "symlinks", test_symlinks },
	{ "special_files", test_special_files },
	{ "setattr", test_setattr },
	{ "stale_handles", test_stale_handles },
	{ "link_max", test_link_max },
	{ "write_after_getattr_reads_back", test_write_after_getattr_reads_back },
	{ "dirent_collisions", test_dirent_collisions },
	{ "readdir_exact", test_readdir_exact },
	{ "readdir_cookies_100k", test_readdir_cookies_100k },
	{ "directory_1m", test_directory_1m },
	{ "fsck_clean", test_fsck_clean },
	{ "fsck_finds_problems", test_fsck_finds_problems },
	{ "dir_corrupt_leaf_create", test_dir_corrupt_leaf_create },
	{ "model_random", test_model_random },
	{ "sync_inode_one_file", test_sync_inode_one_file },
	{ "create_with_times", test_create_with_times },
#ifndef NGNFS_FS_TEST_REAL
	{ "loss_not_inherited", test_loss_not_inherited },
#endif
#ifdef NGNFS_FS_TEST_REAL
	{ "two_clients_see_each_other", test_two_clients_see_each_other },
	{ "concurrent_renames_two_clients", test_concurrent_renames_two_clients },
	{ "rename_subtree_race", test_rename_subtree_race },
	{ "tool_commands", test_tool_commands },
	{ "tool_xattr", test_tool_xattr },
	{ "orphans_reclaimed_after_crash", test_orphans_reclaimed_after_crash },
	{ "lost_create_handle_stale", test_lost_create_handle_stale },
	{ "add_devices", test_add_devices },
	{ "mount_with_device_down", test_mount_with_device_down },
	{ "fsck_repairs_online", test_fsck_repairs_online },
	{ "full_device_overflows", test_full_device_overflows },
	{ "stopped_client_loses_grants", test_stopped_client_loses_grants },
	{ "evicted_inode_is_invalidated", test_evicted_inode_is_invalidated },
	{ "restart_grace_places_elsewhere", test_restart_grace_places_elsewhere },
	{ "open_created_without_device", test_open_created_without_device },
	{ "held_write_across_restart", test_held_write_across_restart },
#endif
	{ NULL, NULL },
};

int main(int argc, char **argv)
{
	return run_tests(tests, argc, argv);
}
