/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Framed TCP connections for the network client.
 *
 * The output side is a queue of encoded frames rather than one stream
 * buffer: a submitting thread encodes its request into a chunk of its own
 * without holding any lock (encoding a WRITE copies and checksums up to a
 * megabyte), then links the chunk to the queue in O(1) under the
 * connection's lock.  The I/O thread takes the whole queue at once and
 * sends up to NGNFS_TRANSPORT_IOVECS chunks per writev, so requests that
 * queue up together while the previous send was in flight leave in one
 * system call and, with TCP_NODELAY, in as few segments as their size
 * allows.  That batching is what makes many concurrent small requests
 * (GETs, RELEASEs) cheap.
 *
 * The input side reads as much as the socket has into one buffer and cuts
 * frames out of it; a frame's header is checked (magic, version, length
 * bound) before the buffer grows to hold it, so a peer cannot make us
 * allocate more than NGNFS_MSG_MAX_PAYLOAD.
 *
 * Keepalive and TCP_USER_TIMEOUT (msg.h) turn a server host that
 * vanished into a broken connection, which the client handles as any other
 * (session reset, reconnect), within about a minute.
 *
 * XXX:
 *  - No bound on queued output: a server that stops reading lets the
 *    queue grow until requests time out.
 *  - Small frames each take a malloc()ed chunk; a per-connection free
 *    list would save the allocations.
 */

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "transport.h"

#define NGNFS_TRANSPORT_IOVECS	  64
#define NGNFS_TRANSPORT_INPUT_MIN (256 * 1024)
#define NGNFS_TRANSPORT_READS	  16

struct ngnfs_out_chunk *ngnfs_out_chunk_alloc(void)
{
	struct ngnfs_out_chunk *chunk = calloc(1, sizeof(*chunk));

	if (chunk)
		ngnfs_buffer_init(&chunk->buffer);
	return chunk;
}

void ngnfs_out_chunk_free(struct ngnfs_out_chunk *chunk)
{
	if (!chunk)
		return;
	ngnfs_buffer_free(&chunk->buffer);
	free(chunk);
}

static void free_chunks(struct ngnfs_out_chunk *chunk)
{
	while (chunk) {
		struct ngnfs_out_chunk *next = chunk->next;

		ngnfs_out_chunk_free(chunk);
		chunk = next;
	}
}

void ngnfs_transport_init(struct ngnfs_transport *transport)
{
	memset(transport, 0, sizeof(*transport));
	transport->fd = -1;
	transport->queue_tail = &transport->queue_head;
	transport->send_tail = &transport->send_head;
}

void ngnfs_transport_close(struct ngnfs_transport *transport)
{
	if (transport->fd >= 0)
		close(transport->fd);
	transport->fd = -1;
	free_chunks(transport->queue_head);
	free_chunks(transport->send_head);
	transport->queue_head = NULL;
	transport->queue_tail = &transport->queue_head;
	transport->send_head = NULL;
	transport->send_tail = &transport->send_head;
	free(transport->input);
	transport->input = NULL;
	transport->input_length = 0;
	transport->input_capacity = 0;
}

int ngnfs_transport_connect(struct ngnfs_transport *transport, const struct sockaddr *address,
			    socklen_t address_length)
{
	/* TCP_NODELAY: requests are small and latency bound; writev batches. */
	static const struct {
		int level, name, value;
	} options[] = {
		{ IPPROTO_TCP, TCP_NODELAY, 1 },
		{ SOL_SOCKET, SO_KEEPALIVE, 1 },
		{ IPPROTO_TCP, TCP_KEEPIDLE, NGNFS_SESSION_KEEPALIVE_IDLE_S },
		{ IPPROTO_TCP, TCP_KEEPINTVL, NGNFS_SESSION_KEEPALIVE_INTERVAL_S },
		{ IPPROTO_TCP, TCP_KEEPCNT, NGNFS_SESSION_KEEPALIVE_PROBES },
		{ IPPROTO_TCP, TCP_USER_TIMEOUT, NGNFS_SESSION_USER_TIMEOUT_MS },
	};
	size_t i;
	int fd;

	fd = socket(address->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	for (i = 0; i < sizeof(options) / sizeof(options[0]); i++) {
		if (setsockopt(fd, options[i].level, options[i].name, &options[i].value,
			       sizeof(options[i].value)) < 0) {
			int ret = -errno;

			close(fd);
			return ret;
		}
	}
	transport->fd = fd;
	if (connect(fd, address, address_length) == 0)
		return 0;
	if (errno == EINPROGRESS)
		return -EINPROGRESS;
	return -errno;
}

int ngnfs_transport_connect_result(struct ngnfs_transport *transport)
{
	int error = 0;
	socklen_t length = sizeof(error);

	if (getsockopt(transport->fd, SOL_SOCKET, SO_ERROR, &error, &length) < 0)
		return -errno;
	return -error;
}

bool ngnfs_transport_queue(struct ngnfs_transport *transport, struct ngnfs_out_chunk *chunk)
{
	bool was_empty = transport->queue_head == NULL;

	chunk->next = NULL;
	*transport->queue_tail = chunk;
	transport->queue_tail = &chunk->next;
	return was_empty;
}

void ngnfs_transport_take(struct ngnfs_transport *transport)
{
	if (!transport->queue_head)
		return;
	*transport->send_tail = transport->queue_head;
	transport->send_tail = transport->queue_tail;
	transport->queue_head = NULL;
	transport->queue_tail = &transport->queue_head;
}

bool ngnfs_transport_queue_empty(const struct ngnfs_transport *transport)
{
	return transport->queue_head == NULL;
}

bool ngnfs_transport_sending(const struct ngnfs_transport *transport)
{
	return transport->send_head != NULL;
}

int ngnfs_transport_flush(struct ngnfs_transport *transport)
{
	while (transport->send_head) {
		struct iovec iov[NGNFS_TRANSPORT_IOVECS];
		struct ngnfs_out_chunk *chunk = transport->send_head;
		struct msghdr message = { .msg_iov = iov };
		int count = 0;
		ssize_t sent;

		for (; chunk && count < NGNFS_TRANSPORT_IOVECS; chunk = chunk->next) {
			iov[count].iov_base = chunk->buffer.data + chunk->offset;
			iov[count].iov_len = chunk->buffer.length - chunk->offset;
			count++;
		}
		message.msg_iovlen = (size_t)count;
		sent = sendmsg(transport->fd, &message, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (sent < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return -EAGAIN;
			return -errno;
		}
		transport->bytes_sent += (uint64_t)sent;
		transport->sends++;
		while (sent > 0) {
			chunk = transport->send_head;
			size_t left = chunk->buffer.length - chunk->offset;

			if ((size_t)sent < left) {
				chunk->offset += (size_t)sent;
				break;
			}
			sent -= (ssize_t)left;
			transport->send_head = chunk->next;
			ngnfs_out_chunk_free(chunk);
		}
		if (!transport->send_head)
			transport->send_tail = &transport->send_head;
	}
	return 0;
}

/* Grow the input buffer so that it can hold at least need bytes. */
static int reserve_input(struct ngnfs_transport *transport, size_t need)
{
	size_t capacity = transport->input_capacity;
	uint8_t *grown;

	if (need <= capacity)
		return 0;
	if (capacity < NGNFS_TRANSPORT_INPUT_MIN)
		capacity = NGNFS_TRANSPORT_INPUT_MIN;
	while (capacity < need)
		capacity *= 2;
	grown = realloc(transport->input, capacity);
	if (!grown)
		return -ENOMEM;
	transport->input = grown;
	transport->input_capacity = capacity;
	return 0;
}

int ngnfs_transport_receive(struct ngnfs_transport *transport, ngnfs_frame_fn frame_fn, void *arg,
			    const char **why)
{
	size_t want = NGNFS_MSG_HEADER_SIZE;
	int ret;

	*why = NULL;
	/* Bounded so that one busy connection cannot starve the others. */
	for (int reads = 0; reads < NGNFS_TRANSPORT_READS; reads++) {
		size_t offset = 0;
		ssize_t got;

		ret = reserve_input(transport, transport->input_length + want);
		if (ret)
			return ret;
		got = recv(transport->fd, transport->input + transport->input_length,
			   transport->input_capacity - transport->input_length, MSG_DONTWAIT);
		if (got < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return 0;
			return -errno;
		}
		if (got == 0)
			return -ECONNRESET;
		transport->bytes_received += (uint64_t)got;
		transport->input_length += (size_t)got;

		/* Cut out every complete frame. */
		want = NGNFS_MSG_HEADER_SIZE;
		while (transport->input_length - offset >= NGNFS_MSG_HEADER_SIZE) {
			size_t frame_length;

			ret = ngnfs_msg_check_header(transport->input + offset, &frame_length, why);
			if (ret)
				return ret;
			if (transport->input_length - offset < frame_length) {
				want = frame_length - (transport->input_length - offset);
				break;
			}
			ret = frame_fn(arg, transport->input + offset, frame_length);
			if (ret < 0)
				return ret;
			offset += frame_length;
		}
		if (offset) {
			memmove(transport->input, transport->input + offset,
				transport->input_length - offset);
			transport->input_length -= offset;
		}
	}
	return 0;
}
