/* SPDX-License-Identifier: GPL-2.0-or-later */
#ifndef NGNFS_TEST_FAKE_CLIENT_H
#define NGNFS_TEST_FAKE_CLIENT_H

/*
 * Test control of the in-process client double (fake_client.c): one fake
 * "server" shared by every fake client of the process, with a block
 * store, a real grant table (FIFO queue per block, revocations sent to
 * the conflicting holders) and an allocator, so two caches in one process
 * revoke each other as two gateways would.
 */

#include <stdint.h>

#include "client.h"

/* Forget every block, grant and counter; completions arrive write_latency_us late. */
void fake_server_reset(unsigned int write_latency_us);
/* WRITE round trips the server applied (one per write_set). */
uint64_t fake_server_writes(void);
/*
 * The session of client with device is lost: grants there are gone.
 * Returns once the owner's session_reset callback has run.
 */
void fake_client_reset_session(struct ngnfs_client *client, uint16_t device);
/*
 * The next ALLOC on device returns its blocks after the session ended
 * under it (fake_client_reset_session), as a reply read just before the
 * connection broke: the blocks are no longer the client's.
 */
void fake_client_reset_during_next_alloc(struct ngnfs_client *client, uint16_t device);
/* Overwrite a block on the server (as another client's committed write would). */
void fake_server_poke(uint64_t blkno, const uint8_t *data);
/*
 * While held, a write_set is queued, not applied: its block data is read
 * only when fake_server_release_writes() applies the queued writes in
 * order (or fails them all with fail_status, nothing applied).  So a test
 * sees which bytes a write in flight carries at its end.
 */
void fake_server_hold_writes(bool hold);
unsigned int fake_server_held_writes(void);
void fake_server_release_writes(int fail_status);
/*
 * Apply the queued writes successfully without checking the writers'
 * grants: a multi-device set every device had staged before a session
 * reset took a grant, which the primary then committed.
 */
void fake_server_release_writes_staged(void);
/*
 * Apply the queued writes (grants unchecked, as for the staged ones: the
 * session broke after blockd had received them) but lose their replies:
 * they complete with reply_status (-ENOTCONN), as a write blockd applied
 * just before its session broke does.
 */
void fake_server_release_writes_reply_lost(int reply_status);
/* How often blkno is on the server's free list (0 while allocated). */
unsigned int fake_server_free_count_of(uint64_t blkno);

#endif
