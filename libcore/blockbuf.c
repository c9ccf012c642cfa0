// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Block buffers: every cached block and every private copy a transaction
 * makes is one 4 KiB buffer, taken here from chunks of 512 mapped (and
 * populated) at once, and kept on a free list when given back.
 *
 * Why not malloc: operations run on threads other than main (ganesha's
 * workers, the benchmark's), whose malloc arena grows its heap by exactly
 * the bytes asked for.  Caching one new inode block per create then cost
 * an mprotect() call and a page fault per create, 45% of a writeback
 * create's time (docs/performance.md, "libcore native API").  A chunk is
 * one mmap(MAP_POPULATE) for 2 MiB instead.
 *
 * Chunks are never unmapped: the free list keeps the peak number of
 * buffers for reuse, and the peak is bounded by what the caches hold
 * (cache_bytes) plus the copies of the transactions running.  Under
 * AddressSanitizer buffers come from malloc, so that use after free and
 * overflows of a block stay visible to it.
 *
 * XXX:
 *  - One free list and mutex for the process; per-thread lists would
 *    avoid the lock if it ever shows in a profile.
 *  - Populating a chunk is ~20% of a writeback create.  2 MiB-aligned
 *    chunks with MADV_HUGEPAGE were tried and not kept: faster creates,
 *    much slower untar (docs/performance.md, "libcore native API").
 */

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "blockbuf.h"
#include "format-msg.h"

#ifdef NGNFS_POOL_USE_MALLOC
#define BUFFER_USE_MALLOC 1
#endif

#define BUFFER_CHUNK_BUFFERS 512

struct free_buffer {
	struct free_buffer *next;
};

#ifndef BUFFER_USE_MALLOC
static pthread_mutex_t buffer_lock = PTHREAD_MUTEX_INITIALIZER;
static struct free_buffer *free_list;

/* Map a chunk and put all but one of its buffers on the free list (lock held). */
static void *buffer_refill(void)
{
	uint8_t *chunk =
	    mmap(NULL, (size_t)BUFFER_CHUNK_BUFFERS * NGNFS_BLOCK_SIZE, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	unsigned int i;

	if (chunk == MAP_FAILED)
		return NULL;
	for (i = 1; i < BUFFER_CHUNK_BUFFERS; i++) {
		struct free_buffer *buffer =
		    (struct free_buffer *)(chunk + (size_t)i * NGNFS_BLOCK_SIZE);

		buffer->next = free_list;
		free_list = buffer;
	}
	return chunk;
}
#endif

void *ngnfs_block_buf_alloc(void)
{
#ifdef BUFFER_USE_MALLOC
	return malloc(NGNFS_BLOCK_SIZE);
#else
	struct free_buffer *buffer;

	pthread_mutex_lock(&buffer_lock);
	buffer = free_list;
	if (buffer)
		free_list = buffer->next;
	else
		buffer = buffer_refill();
	pthread_mutex_unlock(&buffer_lock);
	return buffer;
#endif
}

void *ngnfs_block_buf_zalloc(void)
{
	void *buffer = ngnfs_block_buf_alloc();

	if (buffer)
		memset(buffer, 0, NGNFS_BLOCK_SIZE);
	return buffer;
}

void ngnfs_block_buf_free(void *buffer)
{
#ifdef BUFFER_USE_MALLOC
	free(buffer);
#else
	struct free_buffer *entry = buffer;

	if (!entry)
		return;
	pthread_mutex_lock(&buffer_lock);
	entry->next = free_list;
	free_list = entry;
	pthread_mutex_unlock(&buffer_lock);
#endif
}
