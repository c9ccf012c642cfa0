/* SPDX-License-Identifier: GPL-2.0-or-later */
#ifndef NGNFS_TRANSPORT_H
#define NGNFS_TRANSPORT_H

/*
 * One framed TCP connection of the network client: the socket, the
 * queue of encoded frames waiting to be sent, and the receive buffer that
 * cuts the byte stream into frames.  Internal to libcore (client.c is
 * the only user); see transport.c for why it is built this way.
 *
 * Locking: the transport has no lock of its own.  Frames are queued by
 * any thread under the owner's per-connection lock (ngnfs_transport_queue),
 * and the I/O thread takes the whole queue under the same lock
 * (ngnfs_transport_take) and sends it without the lock.  Everything else
 * runs on the I/O thread only.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "msg.h"

/* One or more encoded frames, sent in one piece. */
struct ngnfs_out_chunk {
	struct ngnfs_out_chunk *next;
	size_t offset; /* bytes already sent */
	struct ngnfs_buffer buffer;
};

struct ngnfs_transport {
	int fd; /* -1 when closed */
	/* queued by submitters, guarded by the owner's lock */
	struct ngnfs_out_chunk *queue_head;
	struct ngnfs_out_chunk **queue_tail;
	/* being sent, I/O thread only */
	struct ngnfs_out_chunk *send_head;
	struct ngnfs_out_chunk **send_tail;
	uint8_t *input;
	size_t input_length;
	size_t input_capacity;
	uint64_t bytes_sent;
	uint64_t bytes_received;
	uint64_t sends; /* writev calls: bytes_sent / sends says how well frames batch */
};

struct ngnfs_out_chunk *ngnfs_out_chunk_alloc(void);
void ngnfs_out_chunk_free(struct ngnfs_out_chunk *chunk);

void ngnfs_transport_init(struct ngnfs_transport *transport);
/* Closes the socket and drops everything queued or half received. */
void ngnfs_transport_close(struct ngnfs_transport *transport);

/*
 * Start a non-blocking connect with TCP_NODELAY.  Returns 0 when already
 * connected, -EINPROGRESS when the caller must wait for the socket to
 * become writable and then call ngnfs_transport_connect_result(), or a
 * negative errno.
 */
int ngnfs_transport_connect(struct ngnfs_transport *transport, const struct sockaddr *address,
			    socklen_t address_length);
int ngnfs_transport_connect_result(struct ngnfs_transport *transport);

/* Under the owner's lock.  Returns true if the queue was empty. */
bool ngnfs_transport_queue(struct ngnfs_transport *transport, struct ngnfs_out_chunk *chunk);
/* Under the owner's lock: moves the submitted queue behind what is being sent. */
void ngnfs_transport_take(struct ngnfs_transport *transport);
bool ngnfs_transport_queue_empty(const struct ngnfs_transport *transport);

/*
 * Send what has been taken, many chunks per writev.  Returns 0 when
 * everything went, -EAGAIN when the socket is full (wait for EPOLLOUT),
 * or a negative errno for a broken connection.
 */
int ngnfs_transport_flush(struct ngnfs_transport *transport);
bool ngnfs_transport_sending(const struct ngnfs_transport *transport);

/*
 * Read what the socket has and hand every complete frame (header
 * checked, not yet decoded) to frame_fn.  The frame is valid only during
 * the call.  Returns 0 when the socket is drained, -ECONNRESET when the
 * peer closed, the header check's error (with *why set) for a frame that
 * cannot be trusted, or the first negative return of frame_fn.
 */
typedef int (*ngnfs_frame_fn)(void *arg, const uint8_t *frame, size_t length);
int ngnfs_transport_receive(struct ngnfs_transport *transport, ngnfs_frame_fn frame_fn, void *arg,
			    const char **why);

#endif
