/* SPDX-License-Identifier: GPL-2.0-or-later */
#ifndef NGNFS_BLOCKBUF_H
#define NGNFS_BLOCKBUF_H

/*
 * 4 KiB block buffers for the cache and for transactions' private copies
 * (blockbuf.c says why they do not come from malloc).  Thread-safe.
 */

/* A buffer of NGNFS_BLOCK_SIZE bytes, uninitialised, or NULL. */
void *ngnfs_block_buf_alloc(void);
/* The same, zeroed. */
void *ngnfs_block_buf_zalloc(void);
/* Give a buffer back (NULL is ignored). */
void ngnfs_block_buf_free(void *buffer);

#endif
