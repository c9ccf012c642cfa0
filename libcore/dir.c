/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Directory entries: a btree per directory keyed by name hash.
 *
 * The key of an entry is XXH3_64bits(name) with the low
 * NGNFS_DIRENT_COLLISION_BITS bits replaced by a collision index: names
 * whose hashes agree in the other bits get the lowest index not already
 * taken in that range.  A lookup therefore reads one btree path and scans
 * at most the entries of one 256-key range (almost always one entry).  The
 * key is also the readdir cookie: it is fixed for the life of the entry,
 * so a reader paging through a directory with cookies sees every entry
 * that existed for the whole listing exactly once, whatever is added or
 * removed between pages (entries added behind the cookie are not seen,
 * which POSIX allows).
 *
 * Directory btree blocks are allocated on the directory inode's device so
 * that a directory's blocks travel together.
 *
 * XXX:
 *  - More than 256 names with the same 56 hash bits in one directory get
 *    -ENOSPC (never seen outside the forced-collision test).
 *  - readdir does not update atime.
 */

#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h> /* S_IF*; sys/stat.h clashes with format-msg.h over __le64 */
#include <xxhash.h>

#include "btree.h"
#include "fs-internal.h"

uint64_t (*ngnfs_dir_hash_hook)(const char *name, size_t name_length);

#define DIRENT_MAX_BYTES (sizeof(struct ngnfs_dirent) + NGNFS_NAME_MAX)

static uint64_t name_base_key(const char *name, size_t name_length)
{
	uint64_t hash;

	if (ngnfs_dir_hash_hook)
		hash = ngnfs_dir_hash_hook(name, name_length);
	else
		hash = XXH3_64bits(name, name_length);
	hash &= ~NGNFS_DIRENT_COLLISION_MASK;
	if (hash < NGNFS_DIRENT_MIN_KEY)
		hash = NGNFS_DIRENT_MIN_KEY;
	return hash;
}

static void dir_tree(const struct ngnfs_inode *dir, const char *op, struct ngnfs_btree *tree)
{
	tree->root = le64toh(dir->data_root);
	tree->owner_ino = le64toh(dir->ino);
	tree->device = ngnfs_blkno_device(tree->owner_ino);
	tree->op = op;
}

static int dirent_decode(const struct ngnfs_inode *dir, uint64_t key, const void *value,
			 size_t length, const struct ngnfs_dirent **dirent)
{
	const struct ngnfs_dirent *d = value;

	if (length < sizeof(*d) || length != sizeof(*d) + le16toh(d->name_length) ||
	    le16toh(d->name_length) == 0 || le16toh(d->name_length) > NGNFS_NAME_MAX)
		return ngnfs_fail(
		    -EIO, "directory inode %llu: entry with key %llu is malformed (length %zu)",
		    (unsigned long long)le64toh(dir->ino), (unsigned long long)key, length);
	*dirent = d;
	return 0;
}

struct range_scan {
	const struct ngnfs_inode *dir;
	const char *name;
	size_t name_length;
	uint64_t last_key;
	bool found;
	struct ngnfs_dirent_info info;
	uint64_t used[(NGNFS_DIRENT_COLLISION_MASK + 1) / 64];
};

static int range_scan_item(void *arg, uint64_t key, const void *value, size_t length)
{
	struct range_scan *scan = arg;
	const struct ngnfs_dirent *dirent = NULL;
	unsigned int index;
	int ret;

	if (key > scan->last_key)
		return 1;
	ret = dirent_decode(scan->dir, key, value, length, &dirent);
	if (ret < 0)
		return ret;
	index = key & NGNFS_DIRENT_COLLISION_MASK;
	scan->used[index / 64] |= 1ULL << (index % 64);
	if (le16toh(dirent->name_length) == scan->name_length &&
	    memcmp(dirent + 1, scan->name, scan->name_length) == 0) {
		scan->found = true;
		scan->info.key = key;
		scan->info.ino = le64toh(dirent->ino);
		scan->info.generation = le64toh(dirent->generation);
		scan->info.mode = le32toh(dirent->mode);
		return 1;
	}
	return 0;
}

static int scan_name(struct ngnfs_txn *txn, const struct ngnfs_inode *dir, const char *op,
		     const char *name, size_t name_length, struct range_scan *scan)
{
	struct ngnfs_btree tree;
	uint64_t base = name_base_key(name, name_length);
	int ret;

	memset(scan, 0, sizeof(*scan));
	scan->dir = dir;
	scan->name = name;
	scan->name_length = name_length;
	scan->last_key = base | NGNFS_DIRENT_COLLISION_MASK;
	dir_tree(dir, op, &tree);
	ret = ngnfs_btree_iterate(txn, &tree, base, range_scan_item, scan);
	return ret < 0 ? ret : 0;
}

int ngnfs_dir_lookup(struct ngnfs_txn *txn, const struct ngnfs_inode *dir, const char *name,
		     size_t name_length, struct ngnfs_dirent_info *info)
{
	struct range_scan scan;
	int ret;

	ret = scan_name(txn, dir, "lookup", name, name_length, &scan);
	if (ret < 0)
		return ret;
	if (!scan.found)
		return -ENOENT;
	*info = scan.info;
	return 0;
}

static size_t dirent_encode(uint8_t *buffer, const char *name, size_t name_length, uint64_t ino,
			    uint64_t generation, uint32_t mode)
{
	struct ngnfs_dirent *dirent = (void *)buffer;

	memset(dirent, 0, sizeof(*dirent));
	dirent->ino = htole64(ino);
	dirent->generation = htole64(generation);
	dirent->mode = htole32(ngnfs_mode_type(mode));
	dirent->name_length = htole16((uint16_t)name_length);
	memcpy(dirent + 1, name, name_length);
	return sizeof(*dirent) + name_length;
}

/* Scan of the name's collision range during an add: the name must not be there. */
static int add_scan_item(void *arg, uint64_t key, const void *value, size_t length)
{
	struct range_scan *scan = arg;
	int ret;

	ret = range_scan_item(scan, key, value, length);
	if (ret < 0 || !scan->found)
		return ret;
	return -EEXIST;
}

/* The lowest collision index no other name of the range uses. */
static int add_pick_key(void *arg, uint64_t *key)
{
	struct range_scan *scan = arg;
	uint64_t base = scan->last_key & ~NGNFS_DIRENT_COLLISION_MASK;
	unsigned int index;

	for (index = 0; index <= NGNFS_DIRENT_COLLISION_MASK; index++)
		if (!(scan->used[index / 64] & (1ULL << (index % 64))))
			break;
	if (index > NGNFS_DIRENT_COLLISION_MASK)
		return ngnfs_fail(-ENOSPC,
				  "add entry: directory inode %llu has no free collision slot for "
				  "hash %llx",
				  (unsigned long long)le64toh(scan->dir->ino),
				  (unsigned long long)base);
	*key = base | index;
	return 0;
}

int ngnfs_dir_add(struct ngnfs_txn *txn, struct ngnfs_inode *dir, const char *name,
		  size_t name_length, uint64_t ino, uint64_t generation, uint32_t mode)
{
	uint8_t value[DIRENT_MAX_BYTES];
	struct range_scan scan;
	struct ngnfs_btree tree;
	uint64_t base = name_base_key(name, name_length);
	uint64_t key;
	size_t length;
	int ret;

	scan.dir = dir;
	scan.name = name;
	scan.name_length = name_length;
	scan.last_key = base | NGNFS_DIRENT_COLLISION_MASK;
	scan.found = false;
	memset(scan.used, 0, sizeof(scan.used));
	length = dirent_encode(value, name, name_length, ino, generation, mode);
	dir_tree(dir, "add entry", &tree);
	ret = ngnfs_btree_insert_range(txn, &tree, base, scan.last_key, add_scan_item, add_pick_key,
				       &scan, value, length, &key);
	if (ret < 0)
		return ret;
	dir->data_root = htole64(tree.root);
	dir->entry_count = htole64(le64toh(dir->entry_count) + 1);
	return 0;
}

int ngnfs_dir_remove(struct ngnfs_txn *txn, struct ngnfs_inode *dir, uint64_t key)
{
	struct ngnfs_btree tree;
	int ret;

	dir_tree(dir, "remove entry", &tree);
	ret = ngnfs_btree_delete(txn, &tree, key);
	if (ret == -ENOENT)
		return ngnfs_fail(-EIO, "remove entry: directory inode %llu lost key %llu",
				  (unsigned long long)le64toh(dir->ino), (unsigned long long)key);
	if (ret < 0)
		return ret;
	dir->data_root = htole64(tree.root);
	dir->entry_count = htole64(le64toh(dir->entry_count) - 1);
	return 0;
}

int ngnfs_dir_replace(struct ngnfs_txn *txn, struct ngnfs_inode *dir, uint64_t key, uint64_t ino,
		      uint64_t generation, uint32_t mode)
{
	uint8_t value[DIRENT_MAX_BYTES];
	const struct ngnfs_dirent *dirent = NULL;
	struct ngnfs_dirent *updated;
	struct ngnfs_btree tree;
	size_t length = sizeof(value);
	int ret;

	dir_tree(dir, "replace entry", &tree);
	ret = ngnfs_btree_lookup(txn, &tree, key, value, &length);
	if (ret < 0)
		return ret == -ENOENT || ret == -EOVERFLOW ? -EIO : ret;
	ret = dirent_decode(dir, key, value, length, &dirent);
	if (ret < 0)
		return ret;
	updated = (void *)value;
	updated->ino = htole64(ino);
	updated->generation = htole64(generation);
	updated->mode = htole32(ngnfs_mode_type(mode));
	ret = ngnfs_btree_update(txn, &tree, key, value, length);
	if (ret < 0)
		return ret;
	dir->data_root = htole64(tree.root);
	return 0;
}

int ngnfs_dir_free_blocks(struct ngnfs_txn *txn, struct ngnfs_inode *dir)
{
	struct ngnfs_btree tree;
	int ret;

	dir_tree(dir, "free directory", &tree);
	ret = ngnfs_btree_free_all(txn, &tree);
	if (ret < 0)
		return ret;
	dir->data_root = 0;
	return 0;
}

/*
 * readdir: each page is one transaction that copies entries out; the
 * caller's callback runs after the transaction, never inside it (it could
 * otherwise see entries of a run that is retried).
 */
#define READDIR_PAGE_ENTRIES 256

struct readdir_entry {
	uint64_t cookie;
	struct ngnfs_handle handle;
	uint32_t mode;
	uint16_t name_length;
	char name[NGNFS_NAME_MAX + 1];
};

struct readdir_page {
	const struct ngnfs_handle *dir;
	uint64_t from;
	unsigned int count;
	bool end;
	const struct ngnfs_inode *dir_inode;
	struct readdir_entry *entries;
};

static int readdir_item(void *arg, uint64_t key, const void *value, size_t length)
{
	struct readdir_page *page = arg;
	const struct ngnfs_dirent *dirent = NULL;
	struct readdir_entry *entry;
	int ret;

	if (page->count == READDIR_PAGE_ENTRIES)
		return 1;
	ret = dirent_decode(page->dir_inode, key, value, length, &dirent);
	if (ret < 0)
		return ret;
	entry = &page->entries[page->count++];
	entry->cookie = key;
	entry->handle.ino = le64toh(dirent->ino);
	entry->handle.generation = le64toh(dirent->generation);
	entry->mode = le32toh(dirent->mode);
	entry->name_length = le16toh(dirent->name_length);
	memcpy(entry->name, dirent + 1, entry->name_length);
	entry->name[entry->name_length] = '\0';
	return 0;
}

static int readdir_txn(struct ngnfs_txn *txn, void *arg)
{
	struct readdir_page *page = arg;
	struct ngnfs_btree tree;
	int ret;

	page->count = 0;
	page->end = false;
	ret = ngnfs_inode_read_handle(txn, page->dir, "readdir", &page->dir_inode);
	if (ret < 0)
		return ret;
	if (ngnfs_mode_type(le32toh(page->dir_inode->mode)) != S_IFDIR)
		return -ENOTDIR;
	dir_tree(page->dir_inode, "readdir", &tree);
	ret = ngnfs_btree_iterate(txn, &tree, page->from, readdir_item, page);
	if (ret < 0)
		return ret;
	page->end = ret == 0;
	return 0;
}

int ngnfs_readdir(struct ngnfs_fs *fs, const struct ngnfs_handle *dir, uint64_t cookie,
		  ngnfs_readdir_fn fn, void *arg, bool *end_of_directory)
{
	struct readdir_page page;
	unsigned int i;
	int ret = 0;

	ngnfs_clear_error();
	*end_of_directory = false;
	if (cookie == UINT64_MAX) {
		*end_of_directory = true;
		return 0;
	}
	memset(&page, 0, sizeof(page));
	page.dir = dir;
	page.from = cookie + 1;
	page.entries = malloc(sizeof(*page.entries) * READDIR_PAGE_ENTRIES);
	if (!page.entries)
		return -ENOMEM;
	for (;;) {
		ret = ngnfs_txn_run(fs->cache, readdir_txn, &page);
		if (ret < 0)
			break;
		for (i = 0; i < page.count; i++) {
			struct readdir_entry *entry = &page.entries[i];

			ret = fn(arg, entry->name, entry->name_length, &entry->handle, entry->mode,
				 entry->cookie);
			if (ret != 0)
				break;
		}
		if (ret != 0) {
			ret = ret > 0 ? 0 : ret;
			break;
		}
		if (page.end) {
			*end_of_directory = true;
			break;
		}
		if (page.count == 0 || page.entries[page.count - 1].cookie == UINT64_MAX) {
			*end_of_directory = true;
			break;
		}
		page.from = page.entries[page.count - 1].cookie + 1;
	}
	free(page.entries);
	return ret;
}
