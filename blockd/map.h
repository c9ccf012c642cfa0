/* SPDX-License-Identifier: GPL-2.0-or-later */
#ifndef NGNFS_BLOCKD_MAP_H
#define NGNFS_BLOCKD_MAP_H

/*
 * A hash map from u64 (block numbers, set ids) to pointers, used for
 * every in-memory table of blockd: grant state per block, staged sets,
 * set outcomes, free blocks, reservations.  Chained buckets that double
 * when full: simple, and lookups stay O(1) for the table sizes one
 * device sees.  Only the event loop thread touches these tables, so
 * there is no locking.
 *
 * XXX:
 *  - One malloc per entry; a flat open-addressing table would be leaner.
 */

#include <stddef.h>
#include <stdint.h>

struct u64map_entry {
	struct u64map_entry *next;
	uint64_t key;
	void *value;
};

struct u64map {
	struct u64map_entry **buckets;
	size_t bucket_count;
	size_t count;
};

void u64map_init(struct u64map *map);
void u64map_free(struct u64map *map);
/* Returns the entry or NULL. */
struct u64map_entry *u64map_find(const struct u64map *map, uint64_t key);
void *u64map_get(const struct u64map *map, uint64_t key);
/* Inserts or replaces; returns 0 or -ENOMEM. */
int u64map_put(struct u64map *map, uint64_t key, void *value);
/* Returns the removed value, NULL if absent. */
void *u64map_remove(struct u64map *map, uint64_t key);
/*
 * A malloc()ed array of every key (the caller frees it), so that callers
 * can walk a table while changing it.  *count is set; NULL when empty.
 */
uint64_t *u64map_keys(const struct u64map *map, size_t *count);

#endif
