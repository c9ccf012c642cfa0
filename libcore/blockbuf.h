/* SPDX-License-Identifier: GPL-2.0-or-later */
#ifndef NGNFS_BLOCKBUF_H
#define NGNFS_BLOCKBUF_H

/*
 * 4 KiB block buffers for the cache and for transactions' private copies
 * (blockbuf.c says why they do not come from malloc).  Thread-safe.
 */

/*
 * Under AddressSanitizer buffers come from malloc, and so do other pooled
 * objects (cache.c's blocks), so that use after free stays visible to it.
 */
#if defined(__SANITIZE_ADDRESS__)
#define NGNFS_POOL_USE_MALLOC 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define NGNFS_POOL_USE_MALLOC 1
#endif
#endif

/* A buffer of NGNFS_BLOCK_SIZE bytes, uninitialised, or NULL. */
void *ngnfs_block_buf_alloc(void);
/* The same, zeroed. */
void *ngnfs_block_buf_zalloc(void);
/* Give a buffer back (NULL is ignored). */
void ngnfs_block_buf_free(void *buffer);

#endif
