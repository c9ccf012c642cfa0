/* SPDX-License-Identifier: GPL-2.0-or-later */
#ifndef NGNFS_CLIENT_H
#define NGNFS_CLIENT_H

/*
 * The network client: sessions with every blockd of a filesystem.
 *
 * One client owns one connection per device and one I/O thread that does
 * all the socket work for all of them.  Requests are asynchronous: the
 * caller passes a completion function, which runs on the I/O thread when
 * the reply arrives.  Completions and the revoke callback must therefore
 * never block on an operation thread; that is what lets the block cache
 * answer a revocation (write back, then release) while every ganesha
 * worker thread is blocked in an operation.
 *
 * Multi-device atomic writes are driven here (ngnfs_client_write_set): the
 * caller hands over one dirty set and gets one completion, whatever it
 * took (a single WRITE, or STAGE to every participant, COMMIT at the
 * primary, RESOLVE to the others; see docs/protocol.md).
 *
 * The _sync wrappers wait for the completion on the calling thread: for
 * mkfs, repair, tests, and operation threads that hold nothing.  They
 * must never be called from a completion or a callback (they refuse with
 * -EDEADLK on the I/O thread).
 *
 * Every asynchronous call either returns 0 and later calls its completion
 * (once per block for GET, once for a write set), always on the I/O
 * thread, or returns a negative errno and never calls it.  Requests to a
 * device without a session fail at once with -ENOTCONN (the client
 * reconnects in the background; ngnfs_client_device_info() says when it
 * is back), requests outstanding when a session breaks complete with
 * -ENOTCONN, and requests unanswered after request_timeout_ms with
 * -ETIMEDOUT.  A multi-device set whose COMMIT could not be confirmed
 * within the request timeout completes with -EIO: its outcome is then
 * decided by the devices (docs/protocol.md), not known to the caller.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "msg.h"

struct ngnfs_client;

struct ngnfs_client_ops {
	/*
	 * The server wants blkno brought down to access (NONE or READ).
	 * Runs on the I/O thread.  The owner writes back what it must and
	 * then calls ngnfs_client_release() (now or later, from any thread).
	 */
	void (*revoke)(void *owner, uint64_t blkno, uint8_t access);
	/*
	 * The session with a device was lost (server_restarted false; all
	 * its grants are gone) or re-established (server_restarted true when
	 * the server's instance changed).  When
	 * server_restarted is true the server's grant table is gone: every
	 * grant on that device must be reclaimed with a GET that carries the
	 * cached version.  Runs on the I/O thread.
	 */
	void (*session_reset)(void *owner, uint16_t device, bool server_restarted);
};

struct ngnfs_client_config {
	const char *const *device_addresses; /* "host:port", indexed by device */
	uint16_t device_count;
	uint8_t fs_id[NGNFS_FS_ID_SIZE];
	uint32_t hello_flags;	     /* NGNFS_HELLO_FORMAT for mkfs */
	uint32_t connect_timeout_ms; /* default 5000 */
	uint32_t request_timeout_ms; /* default 30000; 0 means wait forever */
	/*
	 * How long a COMMIT whose reply was lost is sent again before the
	 * write fails with its outcome unknown; 0: request_timeout_ms (or
	 * 30000 when that is 0).  The cache sets its reclaim timeout.
	 */
	uint32_t commit_retry_ms;
	uint64_t client_id; /* 0: pick one at random */
	/*
	 * Create the client even if devices other than device 0 cannot be
	 * reached now (refused, timed out, unreachable; not a device that
	 * answers and refuses the session): they are tried again as after a
	 * lost session, and their requests fail with -ENOTCONN meanwhile.
	 */
	bool allow_unreachable;
};

int ngnfs_client_create(const struct ngnfs_client_config *config,
			const struct ngnfs_client_ops *ops, void *owner,
			struct ngnfs_client **client_out);
/* Closes every session (servers drop this client's grants). */
void ngnfs_client_destroy(struct ngnfs_client *client);

uint16_t ngnfs_client_device_count(const struct ngnfs_client *client);
uint64_t ngnfs_client_id(const struct ngnfs_client *client);
/* What the device said in its HELLO_REPLY; -ENOTCONN if no session. */
int ngnfs_client_device_info(struct ngnfs_client *client, uint16_t device,
			     struct ngnfs_msg *hello_reply);
/*
 * How long ago the device's session was lost, in milliseconds (at least
 * 1), while it has none (a device never reached: since its first attempt
 * failed); 0 while it has one, and before the first attempt ends.
 */
uint64_t ngnfs_client_unreachable_ms(struct ngnfs_client *client, uint16_t device);
/*
 * Has the I/O thread finished a pass lately (or is this the I/O thread)?
 * If not, this process was stalled and may hold grants a server has since
 * given away: ngnfs_client_wait_io_pass() waits (5 s at most, then
 * -ETIMEDOUT) for a pass that began after the call, which reads what the
 * servers sent meanwhile.
 */
bool ngnfs_client_io_current(struct ngnfs_client *client);
int ngnfs_client_wait_io_pass(struct ngnfs_client *client);
/* How long an unanswered multi-device COMMIT is sent again (the config's, or its default). */
uint32_t ngnfs_client_commit_retry_ms(const struct ngnfs_client *client);

/*
 * GET: one completion per block, in any order.  data is NULL when the
 * caller's cached version was current, else NGNFS_BLOCK_SIZE bytes valid
 * only during the call.
 */
typedef void (*ngnfs_grant_done_fn)(void *arg, int status, uint64_t blkno, uint64_t version,
				    uint8_t access, const uint8_t *data);
int ngnfs_client_get(struct ngnfs_client *client, const struct ngnfs_block_request *blocks,
		     uint32_t count, ngnfs_grant_done_fn done, void *arg);

/* Give up access (fire and forget; the server replies, errors are logged). */
int ngnfs_client_release(struct ngnfs_client *client, uint64_t blkno, uint8_t access);

/*
 * One dirty set, written atomically.  blocks[i].version is the base
 * version.  On success versions[i] is each block's new version.  With
 * release set, blocks are brought down to release_access afterwards.
 */
struct ngnfs_write_set {
	uint64_t set_id; /* 0: the client picks a unique one */
	const struct ngnfs_block_request *blocks;
	uint32_t block_count;
	const uint64_t *frees;
	uint32_t free_count;
	bool release;
	uint8_t release_access;
};

typedef void (*ngnfs_write_done_fn)(void *arg, int status, const uint64_t *versions);
int ngnfs_client_write_set(struct ngnfs_client *client, const struct ngnfs_write_set *set,
			   ngnfs_write_done_fn done, void *arg);

/* Synchronous wrappers. */
int ngnfs_client_get_sync(struct ngnfs_client *client, uint64_t blkno, uint8_t access,
			  uint64_t cached_version, uint64_t *version, uint8_t *data,
			  bool *data_changed);
int ngnfs_client_write_set_sync(struct ngnfs_client *client, const struct ngnfs_write_set *set,
				uint64_t *versions);
/*
 * Reserve count free blocks on device, granted for write; session_epoch
 * (may be NULL) is the epoch of the session they were reserved in.
 */
int ngnfs_client_alloc_sync(struct ngnfs_client *client, uint16_t device, uint32_t count,
			    uint64_t *blknos, uint64_t *versions, uint32_t *session_epoch,
			    uint32_t *allocated);
int ngnfs_client_cmpxchg_sync(struct ngnfs_client *client, uint64_t blkno,
			      uint64_t expected_version, const uint8_t *data, uint64_t *version);
int ngnfs_client_read_incoherent_sync(struct ngnfs_client *client, uint64_t blkno,
				      uint64_t *version, uint8_t *data);
/* What the device's STATFS_REPLY says (msg.h; client_sessions counts this client too). */
int ngnfs_client_statfs_sync(struct ngnfs_client *client, uint16_t device,
			     struct ngnfs_statfs_figures *statfs);
/* mkfs: give an unformatted device its identity. */
int ngnfs_client_format_sync(struct ngnfs_client *client, uint16_t device,
			     const uint8_t fs_id[NGNFS_FS_ID_SIZE], uint32_t device_count);

#endif
