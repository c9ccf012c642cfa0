/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The u64 hash map (see map.h).
 *
 * Keys are mixed with a 64-bit finalizer before bucketing because block
 * numbers and set ids are sequential and would otherwise fill buckets in
 * runs.
 *
 * XXX:
 *  - Never shrinks.
 */

#include <errno.h>
#include <stdlib.h>

#include "map.h"

static size_t bucket_of(const struct u64map *map, uint64_t key)
{
	key ^= key >> 33;
	key *= 0xff51afd7ed558ccdULL;
	key ^= key >> 33;
	return (size_t)(key & (map->bucket_count - 1));
}

void u64map_init(struct u64map *map)
{
	map->buckets = NULL;
	map->bucket_count = 0;
	map->count = 0;
}

void u64map_free(struct u64map *map)
{
	for (size_t i = 0; i < map->bucket_count; i++) {
		struct u64map_entry *entry = map->buckets[i];

		while (entry) {
			struct u64map_entry *next = entry->next;

			free(entry);
			entry = next;
		}
	}
	free(map->buckets);
	u64map_init(map);
}

struct u64map_entry *u64map_find(const struct u64map *map, uint64_t key)
{
	if (map->bucket_count == 0)
		return NULL;
	for (struct u64map_entry *entry = map->buckets[bucket_of(map, key)]; entry;
	     entry = entry->next) {
		if (entry->key == key)
			return entry;
	}
	return NULL;
}

void *u64map_get(const struct u64map *map, uint64_t key)
{
	struct u64map_entry *entry = u64map_find(map, key);

	return entry ? entry->value : NULL;
}

static int grow(struct u64map *map)
{
	size_t new_count = map->bucket_count ? map->bucket_count * 2 : 64;
	struct u64map_entry **buckets = calloc(new_count, sizeof(*buckets));
	struct u64map old = *map;

	if (!buckets)
		return -ENOMEM;
	map->buckets = buckets;
	map->bucket_count = new_count;
	for (size_t i = 0; i < old.bucket_count; i++) {
		struct u64map_entry *entry = old.buckets[i];

		while (entry) {
			struct u64map_entry *next = entry->next;
			size_t bucket = bucket_of(map, entry->key);

			entry->next = map->buckets[bucket];
			map->buckets[bucket] = entry;
			entry = next;
		}
	}
	free(old.buckets);
	return 0;
}

int u64map_put(struct u64map *map, uint64_t key, void *value)
{
	struct u64map_entry *entry = u64map_find(map, key);
	size_t bucket;

	if (entry) {
		entry->value = value;
		return 0;
	}
	if (map->count >= map->bucket_count) {
		int ret = grow(map);

		if (ret)
			return ret;
	}
	entry = malloc(sizeof(*entry));
	if (!entry)
		return -ENOMEM;
	bucket = bucket_of(map, key);
	entry->key = key;
	entry->value = value;
	entry->next = map->buckets[bucket];
	map->buckets[bucket] = entry;
	map->count++;
	return 0;
}

void *u64map_remove(struct u64map *map, uint64_t key)
{
	struct u64map_entry **link;

	if (map->bucket_count == 0)
		return NULL;
	for (link = &map->buckets[bucket_of(map, key)]; *link; link = &(*link)->next) {
		struct u64map_entry *entry = *link;

		if (entry->key == key) {
			void *value = entry->value;

			*link = entry->next;
			free(entry);
			map->count--;
			return value;
		}
	}
	return NULL;
}

uint64_t *u64map_keys(const struct u64map *map, size_t *count)
{
	uint64_t *keys;
	size_t used = 0;

	*count = 0;
	if (map->count == 0)
		return NULL;
	keys = malloc(map->count * sizeof(*keys));
	if (!keys)
		return NULL;
	for (size_t i = 0; i < map->bucket_count; i++) {
		for (struct u64map_entry *entry = map->buckets[i]; entry; entry = entry->next)
			keys[used++] = entry->key;
	}
	*count = used;
	return keys;
}
