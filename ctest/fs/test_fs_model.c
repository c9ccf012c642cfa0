// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The model-based test: one seeded random sequence of POSIX operations
 * (create, mkdir, unlink, rmdir, rename, link, symlink, small writes,
 * truncate, setxattr) runs against ngnfs and against a temporary directory
 * through real syscalls, which is the oracle.  Every operation's result
 * (0 or the errno) must be the same on both sides; at the end both trees
 * are walked and compared: names, types, link counts, sizes, contents,
 * symlink targets, xattrs, and which names are hard links of one file.
 * Then fsck must find nothing wrong.
 *
 * Paths are short (components from a four-name alphabet, up to three
 * deep) so that operations often collide: renames over existing names,
 * into subtrees, onto files, links to existing names.  Symlink targets
 * dangle ("/nonexistent-ngnfs-model/..."), so that resolving through a
 * symlink is ENOENT on both sides without ngnfs implementing path walks.
 *
 * ngnfs_unlink removes directories too (it is unlink and rmdir of the
 * NFS REMOVE operation), so the oracle's "remove" is unlink() falling
 * back to rmdir() on EISDIR; rmdir is tested separately with the type
 * check a caller of the native API does.
 */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "fs_test_util.h"

#define MODEL_OPS	3000
#define MODEL_DANGLING	"/nonexistent-ngnfs-model/"
#define MODEL_MAX_DEPTH 3
#define MODEL_FILE_MAX	20000

static const char *const components[] = { "a", "b", "c", "d" };

struct model {
	struct ngnfs_fs *fs;
	struct ngnfs_handle root;
	char oracle[PATH_MAX];
};

static void random_path(char *path, size_t size)
{
	unsigned int depth = 1 + (unsigned int)(test_random() % MODEL_MAX_DEPTH);
	size_t length = 0;
	unsigned int i;

	path[0] = '\0';
	for (i = 0; i < depth; i++)
		length += (size_t)snprintf(path + length, size - length, "%s%s", i ? "/" : "",
					   components[test_random() % 4]);
}

static void oracle_path(const struct model *model, const char *path, char *out, size_t size)
{
	snprintf(out, size, "%s/%s", model->oracle, path);
}

static int syscall_result(int ret)
{
	return ret < 0 ? -errno : 0;
}

/*
 * Resolve every component but the last: the directory that holds the
 * last one, and the last name itself.
 */
static int resolve_parent(struct model *model, const char *path, struct ngnfs_handle *dir,
			  const char **last)
{
	char component[NGNFS_NAME_MAX + 1];
	struct ngnfs_handle at = model->root, next;
	struct ngnfs_attr attr;
	const char *slash;
	int ret;

	for (;;) {
		slash = strchr(path, '/');
		if (!slash)
			break;
		snprintf(component, sizeof(component), "%.*s", (int)(slash - path), path);
		ret = ngnfs_lookup(model->fs, &at, component, &next, &attr);
		if (ret < 0)
			return ret;
		if ((attr.mode & S_IFMT) == S_IFLNK)
			return -ENOENT; /* every symlink dangles */
		if ((attr.mode & S_IFMT) != S_IFDIR)
			return -ENOTDIR;
		at = next;
		path = slash + 1;
	}
	*dir = at;
	*last = path;
	return 0;
}

static int resolve(struct model *model, const char *path, struct ngnfs_handle *handle,
		   struct ngnfs_attr *attr)
{
	struct ngnfs_handle dir;
	const char *last;
	int ret;

	ret = resolve_parent(model, path, &dir, &last);
	if (ret < 0)
		return ret;
	return ngnfs_lookup(model->fs, &dir, last, handle, attr);
}

static unsigned int results_ok, results_failed;

static void compare(unsigned int step, const char *what, int oracle, int ngnfs)
{
	if (oracle < 0)
		results_failed++;
	else
		results_ok++;
	CHECK(oracle == ngnfs, "step %u: %s: the oracle returned %d (%s), ngnfs %d (%s; %s)", step,
	      what, oracle, oracle ? strerror(-oracle) : "ok", ngnfs,
	      ngnfs ? strerror(-ngnfs) : "ok", ngnfs_last_error());
}

static void model_step(struct model *model, unsigned int step)
{
	char path[64], path2[64], real[PATH_MAX], real2[PATH_MAX], what[200];
	struct ngnfs_handle dir, dir2, handle;
	struct ngnfs_attr attr;
	const char *last, *last2;
	unsigned int op = (unsigned int)(test_random() % 100);
	int oracle, ngnfs, fd;
	struct stat st;

	random_path(path, sizeof(path));
	random_path(path2, sizeof(path2));
	oracle_path(model, path, real, sizeof(real));
	oracle_path(model, path2, real2, sizeof(real2));

	if (op < 18) {
		snprintf(what, sizeof(what), "create %s", path);
		fd = open(real, O_CREAT | O_EXCL | O_WRONLY, 0644);
		oracle = fd < 0 ? -errno : 0;
		if (fd >= 0)
			close(fd);
		ngnfs = resolve_parent(model, path, &dir, &last);
		if (ngnfs == 0)
			ngnfs = ngnfs_create(model->fs, &dir, last, S_IFREG | 0644, 0, 0, 0, NULL,
					     NULL);
	} else if (op < 34) {
		snprintf(what, sizeof(what), "mkdir %s", path);
		oracle = syscall_result(mkdir(real, 0755));
		ngnfs = resolve_parent(model, path, &dir, &last);
		if (ngnfs == 0)
			ngnfs = ngnfs_create(model->fs, &dir, last, S_IFDIR | 0755, 0, 0, 0, NULL,
					     NULL);
	} else if (op < 44) {
		snprintf(what, sizeof(what), "remove %s", path);
		oracle = syscall_result(unlink(real));
		if (oracle == -EISDIR)
			oracle = syscall_result(rmdir(real));
		ngnfs = resolve_parent(model, path, &dir, &last);
		if (ngnfs == 0)
			ngnfs = ngnfs_unlink(model->fs, &dir, last);
	} else if (op < 50) {
		snprintf(what, sizeof(what), "rmdir %s", path);
		oracle = syscall_result(rmdir(real));
		ngnfs = resolve_parent(model, path, &dir, &last);
		if (ngnfs == 0)
			ngnfs = ngnfs_lookup(model->fs, &dir, last, &handle, &attr);
		if (ngnfs == 0 && (attr.mode & S_IFMT) != S_IFDIR)
			ngnfs = -ENOTDIR;
		if (ngnfs == 0)
			ngnfs = ngnfs_unlink(model->fs, &dir, last);
	} else if (op < 68) {
		snprintf(what, sizeof(what), "rename %s %s", path, path2);
		oracle = syscall_result(rename(real, real2));
		ngnfs = resolve_parent(model, path, &dir, &last);
		if (ngnfs == 0)
			ngnfs = resolve_parent(model, path2, &dir2, &last2);
		if (ngnfs == 0)
			ngnfs = ngnfs_rename(model->fs, &dir, last, &dir2, last2);
	} else if (op < 76) {
		snprintf(what, sizeof(what), "link %s %s", path, path2);
		oracle = syscall_result(link(real, real2));
		ngnfs = resolve(model, path, &handle, &attr);
		if (ngnfs == 0)
			ngnfs = resolve_parent(model, path2, &dir2, &last2);
		if (ngnfs == 0)
			ngnfs = ngnfs_link(model->fs, &handle, &dir2, last2);
	} else if (op < 82) {
		char target[128];

		snprintf(target, sizeof(target), MODEL_DANGLING "%u", step);
		snprintf(what, sizeof(what), "symlink %s -> %s", path, target);
		oracle = syscall_result(symlink(target, real));
		ngnfs = resolve_parent(model, path, &dir, &last);
		if (ngnfs == 0)
			ngnfs = ngnfs_symlink(model->fs, &dir, last, target, 0, 0, NULL, NULL);
	} else {
		/* data and attributes of whatever is there: regular files and directories */
		char buffer[512];
		uint64_t offset = test_random() % MODEL_FILE_MAX;
		size_t length = 1 + test_random() % sizeof(buffer);
		size_t i;

		for (i = 0; i < length; i++)
			buffer[i] = (char)('A' + (step + i) % 26);
		oracle = syscall_result(lstat(real, &st));
		ngnfs = resolve(model, path, &handle, &attr);
		snprintf(what, sizeof(what), "lstat %s", path);
		compare(step, what, oracle, ngnfs);
		if (oracle < 0)
			return;
		CHECK((st.st_mode & S_IFMT) == (attr.mode & S_IFMT),
		      "step %u: %s is type %o in the oracle, %o in ngnfs", step, path,
		      st.st_mode & S_IFMT, attr.mode & S_IFMT);
		if (op < 92 && S_ISREG(st.st_mode)) {
			snprintf(what, sizeof(what), "write %s at %llu, %zu bytes", path,
				 (unsigned long long)offset, length);
			fd = open(real, O_WRONLY);
			CHECK(fd >= 0, "oracle open %s: %s", real, strerror(errno));
			CHECK(pwrite(fd, buffer, length, (off_t)offset) == (ssize_t)length,
			      "oracle pwrite");
			close(fd);
			oracle = (int)length;
			ngnfs = (int)ngnfs_write(model->fs, &handle, offset, buffer, length,
						 NGNFS_WRITE_MOUNT);
		} else if (op < 95 && S_ISREG(st.st_mode)) {
			struct ngnfs_setattr set = { .mask = NGNFS_SET_SIZE };

			set.size = offset / 2;
			snprintf(what, sizeof(what), "truncate %s to %llu", path,
				 (unsigned long long)set.size);
			oracle = syscall_result(truncate(real, (off_t)set.size));
			ngnfs = ngnfs_setattr(model->fs, &handle, &set, NULL);
		} else if (S_ISREG(st.st_mode) || S_ISDIR(st.st_mode)) {
			char name[32];

			snprintf(name, sizeof(name), "user.k%u", (unsigned int)(test_random() % 3));
			length = test_random() % 100;
			snprintf(what, sizeof(what), "setxattr %s %s (%zu bytes)", path, name,
				 length);
			oracle = syscall_result(lsetxattr(real, name, buffer, length, 0));
			ngnfs = ngnfs_setxattr(model->fs, &handle, name, buffer, length, 0);
		} else {
			return;
		}
	}
	compare(step, what, oracle, ngnfs);
}

/* ---- final comparison ---- */

struct ino_pair {
	uint64_t oracle;
	uint64_t ngnfs;
};

struct compare_state {
	struct ino_pair *pairs;
	size_t count, capacity;
	uint64_t entries;
};

static void check_same_file(struct compare_state *state, const char *path, uint64_t oracle_ino,
			    uint64_t ngnfs_ino)
{
	size_t i;

	for (i = 0; i < state->count; i++) {
		if (state->pairs[i].oracle == oracle_ino || state->pairs[i].ngnfs == ngnfs_ino) {
			CHECK(state->pairs[i].oracle == oracle_ino &&
				  state->pairs[i].ngnfs == ngnfs_ino,
			      "%s: hard links differ between the oracle and ngnfs", path);
			return;
		}
	}
	if (state->count == state->capacity) {
		state->capacity = state->capacity ? state->capacity * 2 : 64;
		state->pairs = realloc(state->pairs, state->capacity * sizeof(*state->pairs));
		CHECK(state->pairs, "out of memory");
	}
	state->pairs[state->count].oracle = oracle_ino;
	state->pairs[state->count].ngnfs = ngnfs_ino;
	state->count++;
}

static void compare_xattrs(struct model *model, const char *real, const char *path,
			   const struct ngnfs_handle *handle)
{
	char oracle_list[1024], ngnfs_list[1024], oracle_value[256], ngnfs_value[256];
	ssize_t oracle_length, ngnfs_length, a, b;
	const char *name;

	oracle_length = llistxattr(real, oracle_list, sizeof(oracle_list));
	CHECK(oracle_length >= 0, "oracle listxattr %s: %s", real, strerror(errno));
	ngnfs_length = ngnfs_listxattr(model->fs, handle, ngnfs_list, sizeof(ngnfs_list));
	CHECK(ngnfs_length >= 0, "ngnfs listxattr %s: %zd", path, ngnfs_length);
	for (name = oracle_list; name < oracle_list + oracle_length; name += strlen(name) + 1) {
		if (strncmp(name, "user.", 5) != 0)
			continue;
		a = lgetxattr(real, name, oracle_value, sizeof(oracle_value));
		b = ngnfs_getxattr(model->fs, handle, name, ngnfs_value, sizeof(ngnfs_value));
		CHECK(a == b && (a < 0 || memcmp(oracle_value, ngnfs_value, (size_t)a) == 0),
		      "%s: xattr %s: oracle %zd bytes, ngnfs %zd", path, name, a, b);
	}
	for (name = ngnfs_list; name < ngnfs_list + ngnfs_length; name += strlen(name) + 1) {
		a = lgetxattr(real, name, oracle_value, sizeof(oracle_value));
		CHECK(a >= 0, "%s: ngnfs has xattr %s, the oracle does not", path, name);
	}
}

static void compare_trees(struct model *model, struct compare_state *state, const char *path,
			  const struct ngnfs_handle *dir)
{
	char real[PATH_MAX], child[PATH_MAX], child_real[PATH_MAX];
	struct ngnfs_handle handle;
	struct ngnfs_attr attr;
	struct listing listing;
	struct dirent *entry;
	struct stat st;
	size_t oracle_count = 0, i;
	DIR *handle_dir;
	bool found;

	oracle_path(model, path, real, sizeof(real));
	list_all(model->fs, dir, &listing);
	handle_dir = opendir(real);
	CHECK(handle_dir, "opendir %s: %s", real, strerror(errno));
	while ((entry = readdir(handle_dir))) {
		if (strcmp(entry->d_name, ".") == 0 || strcmp(entry->d_name, "..") == 0)
			continue;
		oracle_count++;
		found = false;
		for (i = 0; i < listing.count; i++)
			if (strcmp(listing.names[i], entry->d_name) == 0)
				found = true;
		CHECK(found, "%s/%s exists in the oracle but is not listed by ngnfs", path,
		      entry->d_name);
		snprintf(child, sizeof(child), "%s%s%s", path, *path ? "/" : "", entry->d_name);
		oracle_path(model, child, child_real, sizeof(child_real));
		CHECK(lstat(child_real, &st) == 0, "lstat %s", child_real);
		EXPECT_RET(ngnfs_lookup(model->fs, dir, entry->d_name, &handle, &attr), 0);
		state->entries++;
		CHECK((st.st_mode & S_IFMT) == (attr.mode & S_IFMT), "%s: type %o vs %o", child,
		      st.st_mode & S_IFMT, attr.mode & S_IFMT);
		CHECK((st.st_mode & 07777) == (attr.mode & 07777) || S_ISLNK(st.st_mode),
		      "%s: mode %o vs %o", child, st.st_mode & 07777, attr.mode & 07777);
		CHECK(st.st_nlink == attr.nlink, "%s: nlink %lu in the oracle, %u in ngnfs", child,
		      (unsigned long)st.st_nlink, attr.nlink);
		check_same_file(state, child, st.st_ino, handle.ino);
		if (S_ISREG(st.st_mode)) {
			static char a[MODEL_FILE_MAX * 2], b[MODEL_FILE_MAX * 2];
			ssize_t got;
			bool eof;
			int fd;

			CHECK((uint64_t)st.st_size == attr.size, "%s: size %lld vs %llu", child,
			      (long long)st.st_size, (unsigned long long)attr.size);
			fd = open(child_real, O_RDONLY);
			CHECK(fd >= 0 && read(fd, a, sizeof(a)) == st.st_size, "oracle read %s",
			      child_real);
			close(fd);
			got = ngnfs_read(model->fs, &handle, 0, b, sizeof(b), &eof);
			CHECK(got == st.st_size && memcmp(a, b, (size_t)got) == 0,
			      "%s: contents differ (ngnfs read %zd bytes of %lld)", child, got,
			      (long long)st.st_size);
		} else if (S_ISLNK(st.st_mode)) {
			char a[256], b[256];
			ssize_t la = readlink(child_real, a, sizeof(a) - 1);
			ssize_t lb = ngnfs_readlink(model->fs, &handle, b, sizeof(b));

			CHECK(la == lb && la > 0 && memcmp(a, b, (size_t)la) == 0,
			      "%s: symlink targets differ", child);
		}
		if (S_ISREG(st.st_mode) || S_ISDIR(st.st_mode))
			compare_xattrs(model, child_real, child, &handle);
		if (S_ISDIR(st.st_mode))
			compare_trees(model, state, child, &handle);
	}
	closedir(handle_dir);
	CHECK(oracle_count == listing.count, "%s: the oracle has %zu entries, ngnfs lists %zu",
	      *path ? path : "/", oracle_count, listing.count);
	listing_free(&listing);
}

static void remove_tree(const char *path)
{
	struct dirent *entry;
	char child[PATH_MAX];
	struct stat st;
	DIR *dir;

	dir = opendir(path);
	if (!dir)
		return;
	while ((entry = readdir(dir))) {
		if (strcmp(entry->d_name, ".") == 0 || strcmp(entry->d_name, "..") == 0)
			continue;
		snprintf(child, sizeof(child), "%s/%s", path, entry->d_name);
		if (lstat(child, &st) == 0 && S_ISDIR(st.st_mode))
			remove_tree(child);
		else
			unlink(child);
	}
	closedir(dir);
	rmdir(path);
}

static char model_oracle_dir[PATH_MAX];

static void remove_oracle_at_exit(void)
{
	if (model_oracle_dir[0] && !getenv("NGNFS_KEEP_TEST_DIRS"))
		remove_tree(model_oracle_dir);
}

void test_model_random(void)
{
	struct compare_state state = { 0 };
	struct model model;
	const char *tmp = getenv("TMPDIR");
	unsigned int step;

	memset(&model, 0, sizeof(model));
	snprintf(model.oracle, sizeof(model.oracle), "%s/ngnfs-model-XXXXXX", tmp ? tmp : "/tmp");
	CHECK(mkdtemp(model.oracle), "mkdtemp %s: %s", model.oracle, strerror(errno));
	snprintf(model_oracle_dir, sizeof(model_oracle_dir), "%s", model.oracle);
	atexit(remove_oracle_at_exit);
	umask(022);

	model.fs = start_fs(3, "model", NGNFS_MOUNT_STABLE);
	model.root = root_of(model.fs);
	for (step = 0; step < MODEL_OPS; step++)
		model_step(&model, step);
	compare_trees(&model, &state, "", &model.root);
	TEST_LOG("model: %u operations (%u succeeded, %u failed alike on both sides), final "
		 "trees agree (%llu entries)",
		 MODEL_OPS, results_ok, results_failed, (unsigned long long)state.entries);
	check_fsck_clean(model.fs);
	free(state.pairs);
	stop_fs(model.fs);
}
