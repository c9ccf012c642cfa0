/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Opening, checking and reading the device's RocksDB store (see store.h).
 *
 * The folder check happens before RocksDB is asked to create anything,
 * so that pointing --db at the wrong folder (a home directory, another
 * device's parent) leaves it untouched: only a missing or empty folder
 * is ever created into.
 *
 * XXX:
 *  - No compaction or RocksDB tuning beyond the block cache.
 */

#include <dirent.h>
#include <endian.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"
#include "msg.h"
#include "store.h"

void store_meta_key(uint8_t key[NGNFS_STORE_META_KEY_SIZE], uint8_t id)
{
	key[0] = NGNFS_STORE_KEY_META;
	key[1] = id;
}

static void put_be64(uint8_t *bytes, uint64_t value)
{
	for (int i = 7; i >= 0; i--) {
		bytes[i] = (uint8_t)value;
		value >>= 8;
	}
}

uint64_t store_be64(const uint8_t *bytes)
{
	uint64_t value = 0;

	for (int i = 0; i < 8; i++)
		value = (value << 8) | bytes[i];
	return value;
}

void store_index_key(uint8_t key[NGNFS_STORE_BLOCK_KEY_SIZE], uint8_t kind, uint64_t index)
{
	key[0] = kind;
	put_be64(key + 1, index);
}

void store_staged_key(uint8_t key[NGNFS_STORE_STAGED_KEY_SIZE], uint64_t set_id, uint64_t index)
{
	key[0] = NGNFS_STORE_KEY_STAGED;
	put_be64(key + 1, set_id);
	put_be64(key + 9, index);
}

uint32_t store_block_crc(uint64_t version, const uint8_t *data)
{
	uint64_t le_version = htole64(version);
	uint32_t crc = ngnfs_crc32c(0, &le_version, sizeof(le_version));

	return ngnfs_crc32c(crc, data, NGNFS_BLOCK_SIZE);
}

/* 0: empty or missing, 1: holds a RocksDB (CURRENT), -errno after logging. */
static int inspect_folder(const char *path)
{
	struct dirent *entry;
	bool has_current = false;
	char foreign[256] = "";
	DIR *dir = opendir(path);

	if (!dir) {
		if (errno == ENOENT)
			return 0;
		fprintf(stderr, "blockd: cannot open database folder %s: %s\n", path,
			strerror(errno));
		return -errno;
	}
	while ((entry = readdir(dir))) {
		if (strcmp(entry->d_name, ".") == 0 || strcmp(entry->d_name, "..") == 0)
			continue;
		if (strcmp(entry->d_name, "CURRENT") == 0)
			has_current = true;
		else if (!foreign[0])
			snprintf(foreign, sizeof(foreign), "%s", entry->d_name);
	}
	closedir(dir);
	if (has_current)
		return 1;
	if (foreign[0]) {
		fprintf(stderr,
			"blockd: database folder %s is not an ngnfs device store: it holds '%s' "
			"and no RocksDB database; give an empty or missing folder to create a "
			"new device\n",
			path, foreign);
		return -ENOTEMPTY;
	}
	return 0;
}

/* A meta record that is one __le64 (hwm, session epoch limit); absent reads as 0. */
static int read_meta_le64(struct blockd_store *store, uint8_t id, const char *what, uint64_t *out)
{
	uint8_t key[NGNFS_STORE_META_KEY_SIZE];
	char *error = NULL;
	size_t length;
	__le64 record;
	char *value;

	store_meta_key(key, id);
	value = rocksdb_get(store->db, store->read_options, (const char *)key, sizeof(key), &length,
			    &error);
	if (error) {
		fprintf(stderr, "blockd: cannot read %s of database %s: %s\n", what, store->path,
			error);
		rocksdb_free(error);
		return -EIO;
	}
	*out = 0;
	if (!value)
		return 0;
	if (length != sizeof(record)) {
		fprintf(stderr, "blockd: database %s: %s record is %zu bytes, expected %zu\n",
			store->path, what, length, sizeof(record));
		rocksdb_free(value);
		return -EINVAL;
	}
	memcpy(&record, value, sizeof(record));
	*out = le64toh(record);
	rocksdb_free(value);
	return 0;
}

static int read_identity(struct blockd_store *store)
{
	struct ngnfs_store_identity identity;
	uint8_t key[NGNFS_STORE_META_KEY_SIZE];
	char *error = NULL;
	size_t length;
	char *value;
	int ret;

	store_meta_key(key, NGNFS_STORE_META_IDENTITY);
	value = rocksdb_get(store->db, store->read_options, (const char *)key, sizeof(key), &length,
			    &error);
	if (error) {
		fprintf(stderr, "blockd: cannot read identity of database %s: %s\n", store->path,
			error);
		rocksdb_free(error);
		return -EIO;
	}
	if (!value) {
		fprintf(stderr,
			"blockd: database folder %s holds a RocksDB database that is not an ngnfs "
			"device store (no identity record)\n",
			store->path);
		return -EINVAL;
	}
	if (length != sizeof(identity)) {
		fprintf(stderr,
			"blockd: database %s: identity record is %zu bytes, expected %zu: not an "
			"ngnfs device store of a known format\n",
			store->path, length, sizeof(identity));
		rocksdb_free(value);
		return -EINVAL;
	}
	memcpy(&identity, value, sizeof(identity));
	rocksdb_free(value);
	if (le32toh(identity.magic) != NGNFS_STORE_MAGIC) {
		fprintf(stderr,
			"blockd: database %s: identity record has magic 0x%08x, expected 0x%08x: "
			"not an ngnfs device store\n",
			store->path, le32toh(identity.magic), NGNFS_STORE_MAGIC);
		return -EINVAL;
	}
	store->format_version = le32toh(identity.format_version);
	if (store->format_version < 1 || store->format_version > NGNFS_STORE_FORMAT_VERSION) {
		fprintf(stderr,
			"blockd: database %s has store format version %u; this blockd knows "
			"versions 1 to %u\n",
			store->path, store->format_version, NGNFS_STORE_FORMAT_VERSION);
		return -EPROTONOSUPPORT;
	}
	store->formatted = le32toh(identity.flags) & NGNFS_STORE_IDENTITY_FORMATTED;
	memcpy(store->fs_id, identity.fs_id, NGNFS_FS_ID_SIZE);
	store->total_blocks = le64toh(identity.total_blocks);
	store->device_index = le16toh(identity.device_index);
	store->device_count = le32toh(identity.device_count);

	ret = read_meta_le64(store, NGNFS_STORE_META_HWM, "high-water mark", &store->hwm);
	if (!ret)
		ret = read_meta_le64(store, NGNFS_STORE_META_SESSION_EPOCHS, "session epoch limit",
				     &store->session_epoch_limit);
	return ret;
}

void store_put_identity(rocksdb_writebatch_t *batch, const struct blockd_store *store)
{
	struct ngnfs_store_identity identity;
	uint8_t key[NGNFS_STORE_META_KEY_SIZE];

	memset(&identity, 0, sizeof(identity));
	identity.magic = htole32(NGNFS_STORE_MAGIC);
	identity.format_version = htole32(NGNFS_STORE_FORMAT_VERSION);
	memcpy(identity.fs_id, store->fs_id, NGNFS_FS_ID_SIZE);
	identity.total_blocks = htole64(store->total_blocks);
	identity.flags = htole32(store->formatted ? NGNFS_STORE_IDENTITY_FORMATTED : 0);
	identity.device_count = htole32(store->device_count);
	identity.device_index = htole16(store->device_index);
	store_meta_key(key, NGNFS_STORE_META_IDENTITY);
	rocksdb_writebatch_put(batch, (const char *)key, sizeof(key), (const char *)&identity,
			       sizeof(identity));
}

/* The identity record, at the current format version, synced. */
static int write_identity(struct blockd_store *store, const char *what)
{
	rocksdb_writeoptions_t *write_options = rocksdb_writeoptions_create();
	rocksdb_writebatch_t *batch = rocksdb_writebatch_create();
	char *error = NULL;

	store_put_identity(batch, store);
	rocksdb_writeoptions_set_sync(write_options, 1);
	rocksdb_write(store->db, write_options, batch, &error);
	rocksdb_writebatch_destroy(batch);
	rocksdb_writeoptions_destroy(write_options);
	if (error) {
		fprintf(stderr, "blockd: cannot %s database %s: %s\n", what, store->path, error);
		rocksdb_free(error);
		return -EIO;
	}
	store->format_version = NGNFS_STORE_FORMAT_VERSION;
	return 0;
}

int store_open(struct blockd_store *store, const struct blockd_config *config)
{
	const struct commit_log_options log_options = {
		.size_mb = config->commit_log_mb,
		.accept_damage = config->commit_log_accept_damage,
	};
	char *error = NULL;
	int state;
	int ret;

	memset(store, 0, sizeof(*store));
	store->commit_log.fd = -1;
	store->path = strdup(config->db);
	if (!store->path)
		return -ENOMEM;
	state = inspect_folder(config->db);
	if (state < 0)
		return state;
	store->created = state == 0;

	store->options = rocksdb_options_create();
	store->table_options = rocksdb_block_based_options_create();
	store->cache = rocksdb_cache_create_lru((size_t)config->cache_mb << 20);
	rocksdb_block_based_options_set_block_cache(store->table_options, store->cache);
	rocksdb_options_set_block_based_table_factory(store->options, store->table_options);
	rocksdb_options_set_create_if_missing(store->options, store->created);
	rocksdb_options_set_error_if_exists(store->options, store->created);
	store->read_options = rocksdb_readoptions_create();

	store->db = rocksdb_open(store->options, config->db, &error);
	if (error) {
		fprintf(stderr, "blockd: cannot open database %s: %s\n", config->db, error);
		rocksdb_free(error);
		store->db = NULL;
		return -EIO;
	}

	if (store->created) {
		store->total_blocks = config->total_blocks;
		ret = write_identity(store, "initialize new");
	} else {
		/* before the identity: a FORMAT may be among the records to replay */
		ret = commit_log_open(&store->commit_log, store->db, store->read_options,
				      config->db, &log_options);
		if (!ret)
			ret = read_identity(store);
		if (!ret && store->format_version < NGNFS_STORE_FORMAT_VERSION) {
			uint32_t old_version = store->format_version;

			ret = write_identity(store, "upgrade");
			if (!ret)
				log_info("database %s: store format version %u upgraded to %u",
					 config->db, old_version, NGNFS_STORE_FORMAT_VERSION);
		}
		return ret;
	}
	if (!ret)
		ret = commit_log_open(&store->commit_log, store->db, store->read_options,
				      config->db, &log_options);
	return ret;
}

void store_close(struct blockd_store *store)
{
	if (store->db && store->commit_log.fd >= 0) {
		char *error = NULL;

		/* RocksDB durable at a clean stop, as it was before the commit log */
		rocksdb_flush_wal(store->db, 1, &error);
		if (error) {
			log_error("RocksDB WAL sync at stop failed: %s", error);
			rocksdb_free(error);
		}
	}
	commit_log_close(&store->commit_log);
	if (store->db)
		rocksdb_close(store->db);
	if (store->read_options)
		rocksdb_readoptions_destroy(store->read_options);
	if (store->options)
		rocksdb_options_destroy(store->options);
	if (store->table_options)
		rocksdb_block_based_options_destroy(store->table_options);
	if (store->cache)
		rocksdb_cache_destroy(store->cache);
	free(store->path);
	memset(store, 0, sizeof(*store));
	store->commit_log.fd = -1;
}

int store_read_block(struct blockd_store *store, uint64_t index, uint64_t *version, uint8_t *data)
{
	uint8_t key[NGNFS_STORE_BLOCK_KEY_SIZE];
	char *error = NULL;
	rocksdb_pinnableslice_t *slice;
	const char *value;
	size_t length;
	int ret = 0;

	store_index_key(key, NGNFS_STORE_KEY_BLOCK, index);
	slice = rocksdb_get_pinned(store->db, store->read_options, (const char *)key, sizeof(key),
				   &error);
	if (error) {
		log_error("RocksDB read of block index %llu failed: %s", (unsigned long long)index,
			  error);
		rocksdb_free(error);
		return -EIO;
	}
	if (!slice) {
		*version = 0;
		if (data)
			memset(data, 0, NGNFS_BLOCK_SIZE);
		return 0;
	}
	/* RocksDB values have no alignment: copy the header out, never cast. */
	value = rocksdb_pinnableslice_value(slice, &length);
	if (length == sizeof(struct ngnfs_store_block)) {
		const uint8_t *block_data =
		    (const uint8_t *)value + offsetof(struct ngnfs_store_block, data);
		uint64_t stored_version;
		uint32_t stored_crc;

		memcpy(&stored_version, value + offsetof(struct ngnfs_store_block, version),
		       sizeof(stored_version));
		memcpy(&stored_crc, value + offsetof(struct ngnfs_store_block, crc),
		       sizeof(stored_crc));
		if (store_block_crc(le64toh(stored_version), block_data) != le32toh(stored_crc)) {
			ret = -EIO;
		} else {
			*version = le64toh(stored_version);
			if (data)
				memcpy(data, block_data, NGNFS_BLOCK_SIZE);
		}
	} else {
		ret = -EIO;
	}
	rocksdb_pinnableslice_destroy(slice);
	return ret;
}

void store_put_block(rocksdb_writebatch_t *batch, uint64_t index, uint64_t version,
		     const uint8_t *data)
{
	uint8_t key[NGNFS_STORE_BLOCK_KEY_SIZE];
	struct ngnfs_store_block block;

	store_index_key(key, NGNFS_STORE_KEY_BLOCK, index);
	block.version = htole64(version);
	block.crc = htole32(store_block_crc(version, data));
	block.reserved = 0;
	memcpy(block.data, data, NGNFS_BLOCK_SIZE);
	rocksdb_writebatch_put(batch, (const char *)key, sizeof(key), (const char *)&block,
			       sizeof(block));
}

void store_put_hwm(rocksdb_writebatch_t *batch, uint64_t hwm)
{
	uint8_t key[NGNFS_STORE_META_KEY_SIZE];
	struct ngnfs_store_hwm value = { .next_index = htole64(hwm) };

	store_meta_key(key, NGNFS_STORE_META_HWM);
	rocksdb_writebatch_put(batch, (const char *)key, sizeof(key), (const char *)&value,
			       sizeof(value));
}

int store_write_session_epoch_limit(struct blockd_store *store, uint64_t limit)
{
	struct ngnfs_store_session_epochs value = { .limit = htole64(limit) };
	rocksdb_writeoptions_t *write_options = rocksdb_writeoptions_create();
	uint8_t key[NGNFS_STORE_META_KEY_SIZE];
	char *error = NULL;

	store_meta_key(key, NGNFS_STORE_META_SESSION_EPOCHS);
	rocksdb_writeoptions_set_sync(write_options, 1);
	rocksdb_put(store->db, write_options, (const char *)key, sizeof(key), (const char *)&value,
		    sizeof(value), &error);
	rocksdb_writeoptions_destroy(write_options);
	if (error) {
		log_error("RocksDB write of the session epoch limit failed: %s", error);
		rocksdb_free(error);
		return -EIO;
	}
	store->session_epoch_limit = limit;
	return 0;
}

void store_put_free(rocksdb_writebatch_t *batch, uint64_t index)
{
	uint8_t key[NGNFS_STORE_BLOCK_KEY_SIZE];

	store_index_key(key, NGNFS_STORE_KEY_FREE, index);
	rocksdb_writebatch_put(batch, (const char *)key, sizeof(key), "", 0);
}

void store_delete_free(rocksdb_writebatch_t *batch, uint64_t index)
{
	uint8_t key[NGNFS_STORE_BLOCK_KEY_SIZE];

	store_index_key(key, NGNFS_STORE_KEY_FREE, index);
	rocksdb_writebatch_delete(batch, (const char *)key, sizeof(key));
}

void store_put_outcome(rocksdb_writebatch_t *batch, uint64_t set_id, uint8_t outcome)
{
	uint8_t key[NGNFS_STORE_SET_KEY_SIZE];
	struct ngnfs_store_outcome value;
	struct timespec now;

	clock_gettime(CLOCK_REALTIME, &now);
	memset(&value, 0, sizeof(value));
	value.outcome = outcome;
	value.recorded_ns = htole64((uint64_t)now.tv_sec * 1000000000ULL + (uint64_t)now.tv_nsec);
	store_index_key(key, NGNFS_STORE_KEY_OUTCOME, set_id);
	rocksdb_writebatch_put(batch, (const char *)key, sizeof(key), (const char *)&value,
			       sizeof(value));
}

int store_walk(struct blockd_store *store, const uint8_t *prefix, size_t prefix_length,
	       store_visit_fn visit, void *arg)
{
	rocksdb_iterator_t *iterator = rocksdb_create_iterator(store->db, store->read_options);
	char *error = NULL;
	int ret = 0;

	for (rocksdb_iter_seek(iterator, (const char *)prefix, prefix_length);
	     rocksdb_iter_valid(iterator); rocksdb_iter_next(iterator)) {
		size_t key_length, value_length;
		const char *key = rocksdb_iter_key(iterator, &key_length);
		const char *value = rocksdb_iter_value(iterator, &value_length);

		if (key_length < prefix_length || memcmp(key, prefix, prefix_length) != 0)
			break;
		ret = visit((const uint8_t *)key, key_length, (const uint8_t *)value, value_length,
			    arg);
		if (ret)
			break;
	}
	rocksdb_iter_get_error(iterator, &error);
	if (error) {
		log_error("RocksDB iteration of database %s failed: %s", store->path, error);
		rocksdb_free(error);
		ret = -EIO;
	}
	rocksdb_iter_destroy(iterator);
	return ret;
}
