/* SPDX-License-Identifier: GPL-2.0-or-later */
#ifndef NGNFS_TEST_BLOCKD_TCLIENT_H
#define NGNFS_TEST_BLOCKD_TCLIENT_H

/*
 * A small synchronous block protocol client for blockd's tests (and its
 * benchmark): one blocking socket, frames built and checked with the
 * codec, every wait bounded.  REVOKEs that arrive while waiting for a
 * reply are kept in order so that tests can assert on them.  It is
 * deliberately not libcore's client: the tests must be able to send
 * requests a well-behaved client never would.
 *
 * XXX:
 *  - IPv4 only; at most TC_MAX_REVOKES REVOKEs are remembered.
 */

#include <stdbool.h>
#include <stdint.h>

#include "msg.h"

#define TC_TIMEOUT_MS  5000
#define TC_MAX_REVOKES 64

struct tc_frame {
	uint8_t *bytes;
	struct ngnfs_msg msg;
};

struct tc {
	int fd;
	uint64_t next_request_id;
	struct ngnfs_msg_revoke revokes[TC_MAX_REVOKES]; /* host order */
	unsigned int revoke_count;
	uint32_t session_epoch; /* of the last ALLOC_REPLY that reserved blocks */
};

int tc_connect(struct tc *tc, const char *address);
void tc_close(struct tc *tc);
int tc_send(struct tc *tc, struct ngnfs_buffer *buffer);
int tc_send_raw(struct tc *tc, const void *bytes, size_t length);
/* Next frame other than REVOKE; -ETIMEDOUT, -ECONNRESET on EOF. */
int tc_recv(struct tc *tc, struct tc_frame *frame, int timeout_ms);
void tc_frame_free(struct tc_frame *frame);
/* Wait for the connection to be closed by the server; 0 when it was. */
int tc_wait_closed(struct tc *tc, int timeout_ms);
/* Wait for a REVOKE of blkno; returns its access or a negative errno. */
int tc_wait_revoke(struct tc *tc, uint64_t blkno, int timeout_ms);

/* Requests: each returns the reply's status, or a negative transport error. */
int tc_hello(struct tc *tc, const uint8_t *fs_id, uint32_t flags, uint16_t *device_index);
int tc_format(struct tc *tc, const uint8_t *fs_id, uint16_t device_index, uint32_t count);
int tc_get_send(struct tc *tc, uint64_t blkno, uint8_t access, uint64_t cached_version,
		uint64_t *request_id);
/* Wait for the GRANT; data (may be NULL) receives the block when sent. */
int tc_grant_wait(struct tc *tc, int timeout_ms, uint64_t *blkno, uint64_t *version,
		  uint8_t *access, bool *has_data, uint8_t *data);
int tc_get(struct tc *tc, uint64_t blkno, uint8_t access, uint64_t cached_version,
	   uint64_t *version, bool *has_data, uint8_t *data);
int tc_release(struct tc *tc, uint64_t blkno, uint8_t keep);
int tc_write(struct tc *tc, uint64_t blkno, uint64_t base_version, const uint8_t *data,
	     uint64_t *new_version);
/* Send a one-block WRITE SINGLE and return without waiting for its reply. */
int tc_write_send(struct tc *tc, uint64_t blkno, uint64_t base_version, const uint8_t *data);
/* General WRITE: blocks[] with version = base version; frees optional. */
int tc_write_full(struct tc *tc, uint8_t phase, uint64_t set_id, const uint16_t *participants,
		  uint16_t participant_count, const struct ngnfs_block_request *blocks,
		  uint32_t block_count, const uint64_t *frees, uint32_t free_count, uint32_t flags,
		  uint8_t release_access, uint64_t *new_versions);
/* Send frame frame_index of frame_count of a WRITE SINGLE; no reply is awaited. */
int tc_write_frame_send(struct tc *tc, uint64_t set_id, const struct ngnfs_block_request *blocks,
			uint32_t block_count, const uint64_t *frees, uint32_t free_count,
			uint16_t frame_index, uint16_t frame_count, uint64_t *request_id);
int tc_commit(struct tc *tc, uint64_t set_id);
int tc_resolve(struct tc *tc, uint64_t set_id, uint8_t outcome, uint8_t *answer);
int tc_alloc(struct tc *tc, uint32_t count, uint64_t *blknos, uint64_t *versions, uint32_t *got);
int tc_cmpxchg(struct tc *tc, uint64_t blkno, uint64_t expected, const uint8_t *data,
	       uint64_t *version);
int tc_read_incoherent(struct tc *tc, uint64_t blkno, uint64_t *version, int *block_status,
		       uint8_t *data);
int tc_statfs(struct tc *tc, uint64_t *total, uint64_t *free_blocks, uint64_t *reserved,
	      uint64_t *staged_sets);
/* Everything STATFS_REPLY says, the client session count included. */
int tc_statfs_figures(struct tc *tc, struct ngnfs_statfs_figures *figures);

#endif
