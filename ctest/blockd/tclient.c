/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The synchronous test client (see tclient.h).
 *
 * XXX:
 *  - One request in flight at a time except for GET, whose GRANT the
 *    caller may wait for later (tc_get_send / tc_grant_wait).
 */

#include <endian.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tclient.h"

int tc_connect(struct tc *tc, const char *address)
{
	char host[256];
	const char *colon = strrchr(address, ':');
	struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_STREAM };
	struct addrinfo *result;
	int one = 1, ret;

	memset(tc, 0, sizeof(*tc));
	tc->fd = -1;
	tc->next_request_id = 1;
	if (!colon || (size_t)(colon - address) >= sizeof(host))
		return -EINVAL;
	memcpy(host, address, (size_t)(colon - address));
	host[colon - address] = '\0';
	if (getaddrinfo(host, colon + 1, &hints, &result))
		return -EHOSTUNREACH;
	tc->fd = socket(result->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (tc->fd < 0) {
		freeaddrinfo(result);
		return -errno;
	}
	setsockopt(tc->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	ret = connect(tc->fd, result->ai_addr, result->ai_addrlen);
	freeaddrinfo(result);
	if (ret < 0) {
		ret = -errno;
		close(tc->fd);
		tc->fd = -1;
		return ret;
	}
	return 0;
}

void tc_close(struct tc *tc)
{
	if (tc->fd >= 0)
		close(tc->fd);
	tc->fd = -1;
}

int tc_send_raw(struct tc *tc, const void *bytes, size_t length)
{
	const uint8_t *at = bytes;

	while (length) {
		ssize_t done = send(tc->fd, at, length, MSG_NOSIGNAL);

		if (done < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		at += done;
		length -= (size_t)done;
	}
	return 0;
}

int tc_send(struct tc *tc, struct ngnfs_buffer *buffer)
{
	int ret = buffer->error ? buffer->error : tc_send_raw(tc, buffer->data, buffer->length);

	ngnfs_buffer_free(buffer);
	return ret;
}

static int read_exact(struct tc *tc, uint8_t *bytes, size_t length, int timeout_ms)
{
	while (length) {
		struct pollfd pollfd = { .fd = tc->fd, .events = POLLIN };
		ssize_t done;
		int ret = poll(&pollfd, 1, timeout_ms);

		if (ret == 0)
			return -ETIMEDOUT;
		if (ret < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		done = recv(tc->fd, bytes, length, 0);
		if (done == 0)
			return -ECONNRESET;
		if (done < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		bytes += done;
		length -= (size_t)done;
	}
	return 0;
}

static int recv_any(struct tc *tc, struct tc_frame *frame, int timeout_ms)
{
	uint8_t header[NGNFS_MSG_HEADER_SIZE];
	const char *why = NULL;
	size_t length;
	int ret;

	frame->bytes = NULL;
	ret = read_exact(tc, header, sizeof(header), timeout_ms);
	if (ret)
		return ret;
	ret = ngnfs_msg_check_header(header, &length, &why);
	if (ret)
		return ret;
	frame->bytes = malloc(length);
	if (!frame->bytes)
		return -ENOMEM;
	memcpy(frame->bytes, header, sizeof(header));
	ret = read_exact(tc, frame->bytes + sizeof(header), length - sizeof(header), timeout_ms);
	if (!ret)
		ret = ngnfs_msg_decode(frame->bytes, length, &frame->msg, &why);
	if (ret) {
		free(frame->bytes);
		frame->bytes = NULL;
	}
	return ret;
}

void tc_frame_free(struct tc_frame *frame)
{
	free(frame->bytes);
	frame->bytes = NULL;
}

int tc_recv(struct tc *tc, struct tc_frame *frame, int timeout_ms)
{
	for (;;) {
		int ret = recv_any(tc, frame, timeout_ms);

		if (ret)
			return ret;
		if (frame->msg.type != NGNFS_MSG_REVOKE)
			return 0;
		if (tc->revoke_count < TC_MAX_REVOKES) {
			tc->revokes[tc->revoke_count].blkno = frame->msg.revoke.blkno;
			tc->revokes[tc->revoke_count].access = frame->msg.revoke.access;
			tc->revoke_count++;
		}
		tc_frame_free(frame);
	}
}

int tc_wait_closed(struct tc *tc, int timeout_ms)
{
	struct tc_frame frame;

	for (;;) {
		int ret = recv_any(tc, &frame, timeout_ms);

		if (ret == -ECONNRESET)
			return 0;
		if (ret)
			return ret;
		tc_frame_free(&frame);
	}
}

int tc_wait_revoke(struct tc *tc, uint64_t blkno, int timeout_ms)
{
	struct tc_frame frame;

	for (;;) {
		for (unsigned int i = 0; i < tc->revoke_count; i++) {
			if (tc->revokes[i].blkno == blkno) {
				int access = tc->revokes[i].access;

				memmove(&tc->revokes[i], &tc->revokes[i + 1],
					(tc->revoke_count - i - 1) * sizeof(tc->revokes[0]));
				tc->revoke_count--;
				return access;
			}
		}
		int ret = recv_any(tc, &frame, timeout_ms);

		if (ret)
			return ret;
		if (frame.msg.type != NGNFS_MSG_REVOKE) {
			tc_frame_free(&frame);
			return -EPROTO; /* unexpected reply while waiting for a REVOKE */
		}
		if (tc->revoke_count < TC_MAX_REVOKES) {
			tc->revokes[tc->revoke_count].blkno = frame.msg.revoke.blkno;
			tc->revokes[tc->revoke_count].access = frame.msg.revoke.access;
			tc->revoke_count++;
		}
		tc_frame_free(&frame);
	}
}

/* Wait for the reply of the given type; returns its status. */
static int reply(struct tc *tc, enum ngnfs_msg_type type, struct tc_frame *frame)
{
	int ret = tc_recv(tc, frame, TC_TIMEOUT_MS);

	if (ret)
		return ret;
	if (frame->msg.type != type) {
		ret = frame->msg.type == NGNFS_MSG_ERROR ? frame->msg.status : -EPROTO;
		tc_frame_free(frame);
		return ret ? ret : -EPROTO;
	}
	return frame->msg.status;
}

int tc_hello(struct tc *tc, const uint8_t *fs_id, uint32_t flags, uint16_t *device_index)
{
	struct ngnfs_buffer buffer;
	struct tc_frame frame;
	int ret;

	ngnfs_buffer_init(&buffer);
	ngnfs_encode_hello(&buffer, tc->next_request_id++, fs_id, 0x7e57c11e47ULL, flags);
	ret = tc_send(tc, &buffer);
	if (ret)
		return ret;
	ret = reply(tc, NGNFS_MSG_HELLO_REPLY, &frame);
	if (frame.bytes && device_index)
		*device_index = frame.msg.hello_reply.device_index;
	tc_frame_free(&frame);
	return ret;
}

int tc_format(struct tc *tc, const uint8_t *fs_id, uint16_t device_index, uint32_t count)
{
	struct ngnfs_buffer buffer;
	struct tc_frame frame;
	int ret;

	ngnfs_buffer_init(&buffer);
	ngnfs_encode_format(&buffer, tc->next_request_id++, fs_id, device_index, count);
	ret = tc_send(tc, &buffer);
	if (ret)
		return ret;
	ret = reply(tc, NGNFS_MSG_FORMAT_REPLY, &frame);
	tc_frame_free(&frame);
	return ret;
}

int tc_get_send(struct tc *tc, uint64_t blkno, uint8_t access, uint64_t cached_version,
		uint64_t *request_id)
{
	struct ngnfs_block_request request = { .blkno = blkno,
					       .version = cached_version,
					       .access = access };
	struct ngnfs_buffer buffer;

	ngnfs_buffer_init(&buffer);
	if (request_id)
		*request_id = tc->next_request_id;
	ngnfs_encode_get(&buffer, tc->next_request_id++, &request, 1);
	return tc_send(tc, &buffer);
}

int tc_grant_wait(struct tc *tc, int timeout_ms, uint64_t *blkno, uint64_t *version,
		  uint8_t *access, bool *has_data, uint8_t *data)
{
	struct tc_frame frame;
	int ret = tc_recv(tc, &frame, timeout_ms);

	if (ret)
		return ret;
	if (frame.msg.type != NGNFS_MSG_GRANT) {
		tc_frame_free(&frame);
		return -EPROTO;
	}
	if (blkno)
		*blkno = frame.msg.grant.blkno;
	if (version)
		*version = frame.msg.grant.version;
	if (access)
		*access = frame.msg.grant.access;
	if (has_data)
		*has_data = frame.msg.grant.data != NULL;
	if (data && frame.msg.grant.data)
		memcpy(data, frame.msg.grant.data, NGNFS_BLOCK_SIZE);
	ret = frame.msg.status;
	tc_frame_free(&frame);
	return ret;
}

int tc_get(struct tc *tc, uint64_t blkno, uint8_t access, uint64_t cached_version,
	   uint64_t *version, bool *has_data, uint8_t *data)
{
	int ret = tc_get_send(tc, blkno, access, cached_version, NULL);

	if (ret)
		return ret;
	return tc_grant_wait(tc, TC_TIMEOUT_MS, NULL, version, NULL, has_data, data);
}

int tc_release(struct tc *tc, uint64_t blkno, uint8_t keep)
{
	struct ngnfs_block_request request = { .blkno = blkno, .access = keep };
	struct ngnfs_buffer buffer;
	struct tc_frame frame;
	int ret;

	ngnfs_buffer_init(&buffer);
	ngnfs_encode_release(&buffer, tc->next_request_id++, &request, 1);
	ret = tc_send(tc, &buffer);
	if (ret)
		return ret;
	ret = reply(tc, NGNFS_MSG_RELEASE_REPLY, &frame);
	tc_frame_free(&frame);
	return ret;
}

int tc_write_full(struct tc *tc, uint8_t phase, uint64_t set_id, const uint16_t *participants,
		  uint16_t participant_count, const struct ngnfs_block_request *blocks,
		  uint32_t block_count, const uint64_t *frees, uint32_t free_count, uint32_t flags,
		  uint8_t release_access, uint64_t *new_versions)
{
	struct ngnfs_buffer buffer;
	struct tc_frame frame;
	int ret;

	ngnfs_buffer_init(&buffer);
	ret = ngnfs_encode_write(&buffer, tc->next_request_id++, set_id, phase, flags,
				 release_access, participants, participant_count, blocks,
				 block_count, frees, free_count);
	if (ret) {
		ngnfs_buffer_free(&buffer);
		return ret;
	}
	ret = tc_send(tc, &buffer);
	if (ret)
		return ret;
	ret = reply(tc, NGNFS_MSG_WRITE_REPLY, &frame);
	if (ret == 0 && new_versions) {
		for (uint32_t i = 0; i < frame.msg.versions.count && i < block_count; i++) {
			uint64_t blkno;

			ngnfs_msg_version_entry(&frame.msg, i, &blkno, &new_versions[i]);
		}
	}
	tc_frame_free(&frame);
	return ret;
}

int tc_write_send(struct tc *tc, uint64_t blkno, uint64_t base_version, const uint8_t *data)
{
	struct ngnfs_block_request block = { .blkno = blkno,
					     .version = base_version,
					     .data = data };
	struct ngnfs_buffer buffer;
	int ret;

	ngnfs_buffer_init(&buffer);
	ret = ngnfs_encode_write(&buffer, tc->next_request_id++, 0, NGNFS_WRITE_SINGLE, 0, 0, NULL,
				 0, &block, 1, NULL, 0);
	if (ret) {
		ngnfs_buffer_free(&buffer);
		return ret;
	}
	return tc_send(tc, &buffer);
}

int tc_write_frame_send(struct tc *tc, uint64_t set_id, const struct ngnfs_block_request *blocks,
			uint32_t block_count, const uint64_t *frees, uint32_t free_count,
			uint16_t frame_index, uint16_t frame_count, uint64_t *request_id)
{
	struct ngnfs_buffer buffer;
	int ret;

	if (request_id)
		*request_id = tc->next_request_id;
	ngnfs_buffer_init(&buffer);
	ret = ngnfs_encode_write_frame(&buffer, tc->next_request_id++, set_id, NGNFS_WRITE_SINGLE,
				       0, 0, NULL, 0, blocks, block_count, frees, free_count,
				       frame_index, frame_count);
	if (ret) {
		ngnfs_buffer_free(&buffer);
		return ret;
	}
	return tc_send(tc, &buffer);
}

int tc_write(struct tc *tc, uint64_t blkno, uint64_t base_version, const uint8_t *data,
	     uint64_t *new_version)
{
	struct ngnfs_block_request block = { .blkno = blkno,
					     .version = base_version,
					     .data = data };

	return tc_write_full(tc, NGNFS_WRITE_SINGLE, 0, NULL, 0, &block, 1, NULL, 0, 0, 0,
			     new_version);
}

int tc_commit(struct tc *tc, uint64_t set_id)
{
	struct ngnfs_buffer buffer;
	struct tc_frame frame;
	int ret;

	ngnfs_buffer_init(&buffer);
	ngnfs_encode_commit(&buffer, tc->next_request_id++, set_id);
	ret = tc_send(tc, &buffer);
	if (ret)
		return ret;
	ret = reply(tc, NGNFS_MSG_COMMIT_REPLY, &frame);
	tc_frame_free(&frame);
	return ret;
}

int tc_resolve(struct tc *tc, uint64_t set_id, uint8_t outcome, uint8_t *answer)
{
	struct ngnfs_buffer buffer;
	struct tc_frame frame;
	int ret;

	ngnfs_buffer_init(&buffer);
	ngnfs_encode_resolve(&buffer, NGNFS_MSG_RESOLVE, tc->next_request_id++, 0, set_id, outcome);
	ret = tc_send(tc, &buffer);
	if (ret)
		return ret;
	ret = reply(tc, NGNFS_MSG_RESOLVE_REPLY, &frame);
	if (frame.bytes && answer)
		*answer = frame.msg.resolve.outcome;
	tc_frame_free(&frame);
	return ret;
}

int tc_alloc(struct tc *tc, uint32_t count, uint64_t *blknos, uint64_t *versions, uint32_t *got)
{
	struct ngnfs_buffer buffer;
	struct tc_frame frame;
	int ret;

	*got = 0;
	ngnfs_buffer_init(&buffer);
	ngnfs_encode_alloc(&buffer, tc->next_request_id++, count);
	ret = tc_send(tc, &buffer);
	if (ret)
		return ret;
	ret = reply(tc, NGNFS_MSG_ALLOC_REPLY, &frame);
	if (ret == 0) {
		for (uint32_t i = 0; i < frame.msg.versions.count && i < count; i++)
			ngnfs_msg_version_entry(&frame.msg, i, &blknos[i], &versions[i]);
		*got = frame.msg.versions.count;
		if (*got)
			tc->session_epoch = frame.msg.versions.session_epoch;
	}
	tc_frame_free(&frame);
	return ret;
}

int tc_cmpxchg(struct tc *tc, uint64_t blkno, uint64_t expected, const uint8_t *data,
	       uint64_t *version)
{
	struct ngnfs_buffer buffer;
	struct tc_frame frame;
	int ret;

	ngnfs_buffer_init(&buffer);
	ngnfs_encode_cmpxchg(&buffer, tc->next_request_id++, blkno, expected, data);
	ret = tc_send(tc, &buffer);
	if (ret)
		return ret;
	ret = reply(tc, NGNFS_MSG_CMPXCHG_REPLY, &frame);
	if (frame.bytes && version)
		*version = frame.msg.cmpxchg_reply.version;
	tc_frame_free(&frame);
	return ret;
}

int tc_read_incoherent(struct tc *tc, uint64_t blkno, uint64_t *version, int *block_status,
		       uint8_t *data)
{
	struct ngnfs_buffer buffer;
	struct tc_frame frame;
	int ret;

	ngnfs_buffer_init(&buffer);
	ngnfs_encode_read_incoherent(&buffer, tc->next_request_id++, &blkno, 1);
	ret = tc_send(tc, &buffer);
	if (ret)
		return ret;
	ret = reply(tc, NGNFS_MSG_READ_INCOHERENT_REPLY, &frame);
	if (ret == 0 && frame.msg.read_incoherent_reply.count == 1) {
		uint64_t got_blkno;
		const uint8_t *bytes =
		    ngnfs_msg_incoherent_block(&frame.msg, 0, &got_blkno, version, block_status);

		if (data)
			memcpy(data, bytes, NGNFS_BLOCK_SIZE);
	} else if (ret == 0) {
		ret = -EPROTO;
	}
	tc_frame_free(&frame);
	return ret;
}

int tc_statfs_figures(struct tc *tc, struct ngnfs_statfs_figures *figures)
{
	struct ngnfs_buffer buffer;
	struct tc_frame frame;
	int ret;

	ngnfs_buffer_init(&buffer);
	ngnfs_encode_statfs(&buffer, tc->next_request_id++);
	ret = tc_send(tc, &buffer);
	if (ret)
		return ret;
	ret = reply(tc, NGNFS_MSG_STATFS_REPLY, &frame);
	if (ret == 0)
		*figures = frame.msg.statfs_reply;
	tc_frame_free(&frame);
	return ret;
}

int tc_statfs(struct tc *tc, uint64_t *total, uint64_t *free_blocks, uint64_t *reserved,
	      uint64_t *staged_sets)
{
	struct ngnfs_statfs_figures figures;
	int ret = tc_statfs_figures(tc, &figures);

	if (ret == 0) {
		*total = figures.total_blocks;
		*free_blocks = figures.free_blocks;
		*reserved = figures.reserved_blocks;
		*staged_sets = figures.staged_sets;
	}
	return ret;
}
