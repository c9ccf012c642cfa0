/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Tests of the protocol codec (libcore/msg.c).
 *
 * Two halves.  Round trips: every message type is encoded with distinct,
 * non-trivial values (so a swapped or truncated field shows), checked with
 * ngnfs_msg_check_header() as a receiver would, decoded, and every field
 * and array element compared.  Rejections: a table of malformed frames,
 * each built with the generic frame API (so its crc is right and only the
 * intended defect is present) or patched after finishing (crc recomputed
 * unless the crc is the defect), and each must be refused with the errno
 * the protocol promises.  Every decode of a malformed frame reads from a
 * heap copy of exactly the bytes given, so under ASan an over-read is a
 * crash, not a silent pass.  On top of that, every prefix of every valid
 * frame must be refused, and every single-bit flip of small frames too.
 *
 * A wrong filesystem id is not a codec error (the codec does not know the
 * device's id); blockd refuses it in the session (-ESTALE), tested there.
 *
 * XXX:
 *  - Encoder argument checks are sampled, not exhaustive.
 */

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "msg.h"

static uint8_t block_a[NGNFS_BLOCK_SIZE];
static uint8_t block_b[NGNFS_BLOCK_SIZE];
static uint8_t block_c[NGNFS_BLOCK_SIZE];
static const uint8_t fs_id[NGNFS_FS_ID_SIZE] = { 0xf0, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07,
						 0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0xff };

static void fill_blocks(void)
{
	for (size_t i = 0; i < NGNFS_BLOCK_SIZE; i++) {
		block_a[i] = (uint8_t)(i * 7 + 1);
		block_b[i] = (uint8_t)(i * 13 + 5);
		block_c[i] = (uint8_t)(255 - i);
	}
}

/* Decode from a heap copy of exactly length bytes so that ASan sees any over-read. */
static int decode_copy(const uint8_t *bytes, size_t length, struct ngnfs_msg *msg, const char **why,
		       uint8_t **copy_out)
{
	uint8_t *copy = malloc(length ? length : 1);
	int ret;

	assert_non_null(copy);
	if (length)
		memcpy(copy, bytes, length);
	*why = NULL;
	ret = ngnfs_msg_decode(copy, length, msg, why);
	if (copy_out)
		*copy_out = copy; /* decoded arrays point into it */
	else
		free(copy);
	return ret;
}

/*
 * The buffer holds exactly one frame: check its header as a stream reader
 * would, decode it, and return the decoded message (arrays point into
 * *frame, which the caller frees).
 */
static void receive_one(const struct ngnfs_buffer *buffer, enum ngnfs_msg_type type,
			struct ngnfs_msg *msg, uint8_t **frame)
{
	size_t frame_length = 0;
	const char *why = NULL;
	int ret;

	assert_true(buffer->length >= NGNFS_MSG_HEADER_SIZE);
	ret = ngnfs_msg_check_header(buffer->data, &frame_length, &why);
	if (ret)
		fail_msg("check_header of a %s frame: expected 0, got %d (%s)",
			 ngnfs_msg_type_name(type), ret, why);
	if (frame_length != buffer->length)
		fail_msg("%s: header says frame of %zu bytes, encoder wrote %zu",
			 ngnfs_msg_type_name(type), frame_length, buffer->length);
	ret = decode_copy(buffer->data, buffer->length, msg, &why, frame);
	if (ret)
		fail_msg("decode of a valid %s frame: expected 0, got %d (%s)",
			 ngnfs_msg_type_name(type), ret, why);
	if (msg->type != type)
		fail_msg("decoded type %s, expected %s", ngnfs_msg_type_name(msg->type),
			 ngnfs_msg_type_name(type));
}

static void test_crc32c_is_standard_and_continues(void **state)
{
	const char *check = "123456789";
	uint32_t whole;
	uint32_t first;

	(void)state;
	/* the published CRC-32C check value */
	assert_int_equal(ngnfs_crc32c(0, check, 9), 0xe3069283U);
	assert_int_equal(ngnfs_crc32c(0, NULL, 0), 0);
	whole = ngnfs_crc32c(0, block_a, sizeof(block_a));
	first = ngnfs_crc32c(0, block_a, 1000);
	assert_int_equal(ngnfs_crc32c(first, block_a + 1000, sizeof(block_a) - 1000), whole);
}

static void test_hello_round_trip(void **state)
{
	struct ngnfs_buffer buffer;
	struct ngnfs_msg msg;
	uint8_t *frame;

	(void)state;
	ngnfs_buffer_init(&buffer);
	assert_int_equal(ngnfs_encode_hello(&buffer, 0x1122334455667788ULL, fs_id,
					    0xdeadbeefcafef00dULL,
					    NGNFS_HELLO_RECLAIM | NGNFS_HELLO_PEER),
			 0);
	receive_one(&buffer, NGNFS_MSG_HELLO, &msg, &frame);
	assert_int_equal(msg.request_id, 0x1122334455667788ULL);
	assert_int_equal(msg.status, 0);
	assert_memory_equal(msg.hello.fs_id, fs_id, NGNFS_FS_ID_SIZE);
	assert_int_equal(msg.hello.client_id, 0xdeadbeefcafef00dULL);
	assert_int_equal(msg.hello.flags, NGNFS_HELLO_RECLAIM | NGNFS_HELLO_PEER);
	assert_int_equal(msg.hello.protocol_version, NGNFS_PROTOCOL_VERSION);
	free(frame);
	ngnfs_buffer_free(&buffer);
}

static void test_hello_reply_round_trip(void **state)
{
	struct ngnfs_buffer buffer;
	struct ngnfs_msg msg;
	uint8_t *frame;

	(void)state;
	ngnfs_buffer_init(&buffer);
	assert_int_equal(ngnfs_encode_hello_reply(&buffer, 77, -ESTALE, fs_id,
						  0x0102030405060708ULL,
						  NGNFS_HELLO_REPLY_FORMATTED, 4321, 513, 1025),
			 0);
	receive_one(&buffer, NGNFS_MSG_HELLO_REPLY, &msg, &frame);
	assert_int_equal(msg.request_id, 77);
	assert_int_equal(msg.status, -ESTALE);
	assert_memory_equal(msg.hello_reply.fs_id, fs_id, NGNFS_FS_ID_SIZE);
	assert_int_equal(msg.hello_reply.server_instance, 0x0102030405060708ULL);
	assert_int_equal(msg.hello_reply.flags, NGNFS_HELLO_REPLY_FORMATTED);
	assert_int_equal(msg.hello_reply.grace_ms, 4321);
	assert_int_equal(msg.hello_reply.device_index, 513);
	assert_int_equal(msg.hello_reply.protocol_version, NGNFS_PROTOCOL_VERSION);
	assert_int_equal(msg.hello_reply.device_count, 1025);
	free(frame);
	ngnfs_buffer_free(&buffer);
}

static void test_format_and_status_replies_round_trip(void **state)
{
	static const enum ngnfs_msg_type status_types[] = { NGNFS_MSG_FORMAT_REPLY,
							    NGNFS_MSG_RELEASE_REPLY };
	struct ngnfs_buffer buffer;
	struct ngnfs_msg msg;
	uint8_t *frame;

	(void)state;
	ngnfs_buffer_init(&buffer);
	assert_int_equal(ngnfs_encode_format(&buffer, 9, fs_id, 65535, 65536), 0);
	receive_one(&buffer, NGNFS_MSG_FORMAT, &msg, &frame);
	assert_int_equal(msg.request_id, 9);
	assert_memory_equal(msg.format.fs_id, fs_id, NGNFS_FS_ID_SIZE);
	assert_int_equal(msg.format.device_index, 65535);
	assert_int_equal(msg.format.device_count, 65536);
	free(frame);

	for (size_t i = 0; i < 2; i++) {
		ngnfs_buffer_reset(&buffer);
		assert_int_equal(
		    ngnfs_encode_status_reply(&buffer, status_types[i], 1000 + i, -EEXIST), 0);
		assert_int_equal(buffer.length, NGNFS_MSG_HEADER_SIZE);
		receive_one(&buffer, status_types[i], &msg, &frame);
		assert_int_equal(msg.request_id, 1000 + i);
		assert_int_equal(msg.status, -EEXIST);
		free(frame);
	}

	ngnfs_buffer_reset(&buffer);
	assert_int_equal(ngnfs_encode_statfs(&buffer, 31337), 0);
	receive_one(&buffer, NGNFS_MSG_STATFS, &msg, &frame);
	assert_int_equal(msg.request_id, 31337);
	free(frame);
	ngnfs_buffer_free(&buffer);
}

static void test_get_round_trip(void **state)
{
	struct ngnfs_block_request blocks[NGNFS_MSG_MAX_BLOCKS];
	struct ngnfs_buffer buffer;
	struct ngnfs_msg msg;
	uint8_t *frame;

	(void)state;
	for (uint32_t i = 0; i < NGNFS_MSG_MAX_BLOCKS; i++) {
		blocks[i].blkno = ngnfs_blkno_make((uint16_t)(i % 5), 0x100000000ULL + i);
		blocks[i].version = 0x8000000000000000ULL + i * 3;
		blocks[i].access = (i % 3) ? NGNFS_ACCESS_READ : NGNFS_ACCESS_WRITE;
		blocks[i].data = NULL;
	}
	ngnfs_buffer_init(&buffer);
	assert_int_equal(ngnfs_encode_get(&buffer, 42, blocks, NGNFS_MSG_MAX_BLOCKS), 0);
	receive_one(&buffer, NGNFS_MSG_GET, &msg, &frame);
	assert_int_equal(msg.request_id, 42);
	assert_int_equal(msg.get.count, NGNFS_MSG_MAX_BLOCKS);
	for (uint32_t i = 0; i < NGNFS_MSG_MAX_BLOCKS; i++) {
		uint64_t blkno;
		uint64_t version;
		uint8_t access;

		ngnfs_msg_get_entry(&msg, i, &blkno, &version, &access);
		assert_int_equal(blkno, blocks[i].blkno);
		assert_int_equal(version, blocks[i].version);
		assert_int_equal(access, blocks[i].access);
	}
	free(frame);
	ngnfs_buffer_free(&buffer);
}

static void test_grant_round_trip(void **state)
{
	struct ngnfs_buffer buffer;
	struct ngnfs_msg msg;
	uint8_t *frame;

	(void)state;
	ngnfs_buffer_init(&buffer);
	assert_int_equal(ngnfs_encode_grant(&buffer, 5, 0, ngnfs_blkno_make(2, 99), 1234567,
					    NGNFS_ACCESS_WRITE, block_b),
			 0);
	receive_one(&buffer, NGNFS_MSG_GRANT, &msg, &frame);
	assert_int_equal(msg.request_id, 5);
	assert_int_equal(msg.grant.blkno, ngnfs_blkno_make(2, 99));
	assert_int_equal(msg.grant.version, 1234567);
	assert_int_equal(msg.grant.access, NGNFS_ACCESS_WRITE);
	assert_int_equal(msg.grant.flags, NGNFS_GRANT_DATA);
	assert_non_null(msg.grant.data);
	assert_memory_equal(msg.grant.data, block_b, NGNFS_BLOCK_SIZE);
	free(frame);

	/* unchanged: no data travels */
	ngnfs_buffer_reset(&buffer);
	assert_int_equal(ngnfs_encode_grant(&buffer, 6, 0, 17, 3, NGNFS_ACCESS_READ, NULL), 0);
	receive_one(&buffer, NGNFS_MSG_GRANT, &msg, &frame);
	assert_int_equal(msg.grant.flags, 0);
	assert_null(msg.grant.data);
	assert_int_equal(msg.grant.access, NGNFS_ACCESS_READ);
	free(frame);

	/* a refused block: status, no access */
	ngnfs_buffer_reset(&buffer);
	assert_int_equal(ngnfs_encode_grant(&buffer, 7, -EIO, 18, 0, NGNFS_ACCESS_NONE, NULL), 0);
	receive_one(&buffer, NGNFS_MSG_GRANT, &msg, &frame);
	assert_int_equal(msg.status, -EIO);
	assert_int_equal(msg.grant.blkno, 18);
	assert_int_equal(msg.grant.access, NGNFS_ACCESS_NONE);
	free(frame);
	ngnfs_buffer_free(&buffer);
}

static void test_revoke_and_release_round_trip(void **state)
{
	struct ngnfs_block_request blocks[3] = {
		{ .blkno = 11, .access = NGNFS_ACCESS_NONE },
		{ .blkno = ngnfs_blkno_make(65535, NGNFS_BLKNO_INDEX_MASK),
		  .access = NGNFS_ACCESS_READ },
		{ .blkno = 13, .access = NGNFS_ACCESS_NONE },
	};
	struct ngnfs_buffer buffer;
	struct ngnfs_msg msg;
	uint8_t *frame;

	(void)state;
	ngnfs_buffer_init(&buffer);
	assert_int_equal(ngnfs_encode_revoke(&buffer, ngnfs_blkno_make(7, 8), NGNFS_ACCESS_READ),
			 0);
	receive_one(&buffer, NGNFS_MSG_REVOKE, &msg, &frame);
	assert_int_equal(msg.request_id, 0);
	assert_int_equal(msg.revoke.blkno, ngnfs_blkno_make(7, 8));
	assert_int_equal(msg.revoke.access, NGNFS_ACCESS_READ);
	free(frame);

	ngnfs_buffer_reset(&buffer);
	assert_int_equal(ngnfs_encode_release(&buffer, 88, blocks, 3), 0);
	receive_one(&buffer, NGNFS_MSG_RELEASE, &msg, &frame);
	assert_int_equal(msg.request_id, 88);
	assert_int_equal(msg.release.count, 3);
	for (uint32_t i = 0; i < 3; i++) {
		uint64_t blkno;
		uint8_t access;

		ngnfs_msg_release_entry(&msg, i, &blkno, &access);
		assert_int_equal(blkno, blocks[i].blkno);
		assert_int_equal(access, blocks[i].access);
	}
	free(frame);
	ngnfs_buffer_free(&buffer);
}

/* A STAGE with an odd participant count (padding) and frees, and a bare SINGLE. */
static void test_write_round_trip(void **state)
{
	const uint16_t participants[3] = { 4, 0, 65535 };
	const uint64_t frees[2] = { ngnfs_blkno_make(4, 1000), ngnfs_blkno_make(4, 1001) };
	struct ngnfs_block_request blocks[3] = {
		{ .blkno = ngnfs_blkno_make(4, 1), .version = 10, .data = block_a },
		{ .blkno = ngnfs_blkno_make(4, 2), .version = 0, .data = block_b },
		{ .blkno = ngnfs_blkno_make(4, 3), .version = UINT64_MAX, .data = block_c },
	};
	struct ngnfs_buffer buffer;
	struct ngnfs_msg msg;
	uint8_t *frame;

	(void)state;
	ngnfs_buffer_init(&buffer);
	assert_int_equal(ngnfs_encode_write(&buffer, 1001, 0xabcdef0123456789ULL, NGNFS_WRITE_STAGE,
					    NGNFS_WRITE_RELEASE, NGNFS_ACCESS_READ, participants, 3,
					    blocks, 3, frees, 2),
			 0);
	receive_one(&buffer, NGNFS_MSG_WRITE, &msg, &frame);
	assert_int_equal(msg.request_id, 1001);
	assert_int_equal(msg.write.set_id, 0xabcdef0123456789ULL);
	assert_int_equal(msg.write.phase, NGNFS_WRITE_STAGE);
	assert_int_equal(msg.write.flags, NGNFS_WRITE_RELEASE);
	assert_int_equal(msg.write.release_access, NGNFS_ACCESS_READ);
	assert_int_equal(msg.write.participant_count, 3);
	for (uint32_t i = 0; i < 3; i++)
		assert_int_equal(ngnfs_msg_write_participant(&msg, i), participants[i]);
	assert_int_equal(msg.write.block_count, 3);
	for (uint32_t i = 0; i < 3; i++) {
		uint64_t blkno;
		uint64_t base_version;
		const uint8_t *data = ngnfs_msg_write_block(&msg, i, &blkno, &base_version);

		assert_int_equal(blkno, blocks[i].blkno);
		assert_int_equal(base_version, blocks[i].version);
		assert_memory_equal(data, blocks[i].data, NGNFS_BLOCK_SIZE);
	}
	assert_int_equal(msg.write.free_count, 2);
	for (uint32_t i = 0; i < 2; i++)
		assert_int_equal(ngnfs_msg_write_free(&msg, i), frees[i]);
	free(frame);

	ngnfs_buffer_reset(&buffer);
	assert_int_equal(ngnfs_encode_write(&buffer, 1002, 0, NGNFS_WRITE_SINGLE, 0,
					    NGNFS_ACCESS_NONE, NULL, 0, blocks, 1, NULL, 0),
			 0);
	receive_one(&buffer, NGNFS_MSG_WRITE, &msg, &frame);
	assert_int_equal(msg.write.phase, NGNFS_WRITE_SINGLE);
	assert_int_equal(msg.write.frame_index, 0);
	assert_int_equal(msg.write.frame_count, 1);
	assert_int_equal(msg.write.participant_count, 0);
	assert_int_equal(msg.write.block_count, 1);
	assert_int_equal(msg.write.free_count, 0);
	free(frame);

	/* frame 15 of 16 of a held SINGLE write */
	ngnfs_buffer_reset(&buffer);
	assert_int_equal(ngnfs_encode_write_frame(&buffer, 1003, 42, NGNFS_WRITE_SINGLE, 0,
						  NGNFS_ACCESS_NONE, NULL, 0, blocks + 1, 2, frees,
						  1, NGNFS_WRITE_MAX_FRAMES - 1,
						  NGNFS_WRITE_MAX_FRAMES),
			 0);
	receive_one(&buffer, NGNFS_MSG_WRITE, &msg, &frame);
	assert_int_equal(msg.write.set_id, 42);
	assert_int_equal(msg.write.frame_index, NGNFS_WRITE_MAX_FRAMES - 1);
	assert_int_equal(msg.write.frame_count, NGNFS_WRITE_MAX_FRAMES);
	assert_int_equal(msg.write.block_count, 2);
	assert_int_equal(msg.write.free_count, 1);
	free(frame);
	ngnfs_buffer_free(&buffer);
}

/* The largest WRITE the protocol allows still fits the payload bound. */
static void test_largest_write_fits(void **state)
{
	static struct ngnfs_block_request blocks[NGNFS_MSG_MAX_BLOCKS];
	static uint64_t frees[NGNFS_MSG_MAX_BLOCKS];
	uint16_t participants[NGNFS_MSG_MAX_PARTICIPANTS];
	struct ngnfs_buffer buffer;
	struct ngnfs_msg msg;
	uint8_t *frame;

	(void)state;
	for (uint32_t i = 0; i < NGNFS_MSG_MAX_BLOCKS; i++) {
		blocks[i] =
		    (struct ngnfs_block_request){ .blkno = i, .version = i, .data = block_c };
		frees[i] = 1000000 + i;
	}
	for (uint16_t i = 0; i < NGNFS_MSG_MAX_PARTICIPANTS; i++)
		participants[i] = i;
	ngnfs_buffer_init(&buffer);
	assert_int_equal(ngnfs_encode_write(&buffer, 1, 2, NGNFS_WRITE_STAGE, 0, NGNFS_ACCESS_NONE,
					    participants, NGNFS_MSG_MAX_PARTICIPANTS, blocks,
					    NGNFS_MSG_MAX_BLOCKS, frees, NGNFS_MSG_MAX_BLOCKS),
			 0);
	receive_one(&buffer, NGNFS_MSG_WRITE, &msg, &frame);
	assert_int_equal(msg.write.block_count, NGNFS_MSG_MAX_BLOCKS);
	assert_int_equal(ngnfs_msg_write_free(&msg, NGNFS_MSG_MAX_BLOCKS - 1),
			 1000000 + NGNFS_MSG_MAX_BLOCKS - 1);
	assert_int_equal(ngnfs_msg_write_participant(&msg, NGNFS_MSG_MAX_PARTICIPANTS - 1),
			 NGNFS_MSG_MAX_PARTICIPANTS - 1);
	free(frame);
	ngnfs_buffer_free(&buffer);
}

static void test_versions_replies_round_trip(void **state)
{
	static const enum ngnfs_msg_type types[] = { NGNFS_MSG_WRITE_REPLY, NGNFS_MSG_COMMIT_REPLY,
						     NGNFS_MSG_ALLOC_REPLY };
	const uint64_t blknos[4] = { 1, ngnfs_blkno_make(9, 2), 3, UINT64_MAX };
	const uint64_t versions[4] = { 100, 0, UINT64_MAX, 7 };
	struct ngnfs_buffer buffer;
	struct ngnfs_msg msg;
	uint8_t *frame;

	(void)state;
	ngnfs_buffer_init(&buffer);
	for (size_t t = 0; t < 3; t++) {
		ngnfs_buffer_reset(&buffer);
		if (types[t] == NGNFS_MSG_ALLOC_REPLY)
			assert_int_equal(ngnfs_encode_alloc_reply(&buffer, 50 + t, 0, 0xe90c4u,
								  blknos, versions, 4),
					 0);
		else
			assert_int_equal(ngnfs_encode_versions_reply(&buffer, types[t], 50 + t, 0,
								     0x5e7000000000001ULL, blknos,
								     versions, 4),
					 0);
		receive_one(&buffer, types[t], &msg, &frame);
		assert_int_equal(msg.request_id, 50 + t);
		assert_int_equal(msg.versions.set_id,
				 types[t] == NGNFS_MSG_ALLOC_REPLY ? 0 : 0x5e7000000000001ULL);
		assert_int_equal(msg.versions.session_epoch,
				 types[t] == NGNFS_MSG_ALLOC_REPLY ? 0xe90c4u : 0);
		assert_int_equal(msg.versions.count, 4);
		for (uint32_t i = 0; i < 4; i++) {
			uint64_t blkno;
			uint64_t version;

			ngnfs_msg_version_entry(&msg, i, &blkno, &version);
			assert_int_equal(blkno, blknos[i]);
			assert_int_equal(version, versions[i]);
		}
		free(frame);
	}
	/* an error reply with no entries */
	ngnfs_buffer_reset(&buffer);
	assert_int_equal(ngnfs_encode_versions_reply(&buffer, NGNFS_MSG_WRITE_REPLY, 60, -ESTALE, 8,
						     NULL, NULL, 0),
			 0);
	receive_one(&buffer, NGNFS_MSG_WRITE_REPLY, &msg, &frame);
	assert_int_equal(msg.status, -ESTALE);
	assert_int_equal(msg.versions.count, 0);
	free(frame);
	ngnfs_buffer_free(&buffer);
}

static void test_commit_resolve_alloc_round_trip(void **state)
{
	static const uint8_t outcomes[] = { NGNFS_SET_UNKNOWN, NGNFS_SET_COMMITTED,
					    NGNFS_SET_ABORTED };
	struct ngnfs_buffer buffer;
	struct ngnfs_msg msg;
	uint8_t *frame;

	(void)state;
	ngnfs_buffer_init(&buffer);
	assert_int_equal(ngnfs_encode_commit(&buffer, 3, 0x7777666655554444ULL), 0);
	receive_one(&buffer, NGNFS_MSG_COMMIT, &msg, &frame);
	assert_int_equal(msg.request_id, 3);
	assert_int_equal(msg.commit.set_id, 0x7777666655554444ULL);
	free(frame);

	for (size_t i = 0; i < 3; i++) {
		ngnfs_buffer_reset(&buffer);
		assert_int_equal(ngnfs_encode_resolve(&buffer, NGNFS_MSG_RESOLVE, 20 + i, 0,
						      0x1000 + i, outcomes[i]),
				 0);
		receive_one(&buffer, NGNFS_MSG_RESOLVE, &msg, &frame);
		assert_int_equal(msg.request_id, 20 + i);
		assert_int_equal(msg.resolve.set_id, 0x1000 + i);
		assert_int_equal(msg.resolve.outcome, outcomes[i]);
		free(frame);

		ngnfs_buffer_reset(&buffer);
		assert_int_equal(ngnfs_encode_resolve(&buffer, NGNFS_MSG_RESOLVE_REPLY, 30 + i,
						      i == 0 ? -ENOENT : 0, 0x2000 + i,
						      outcomes[i]),
				 0);
		receive_one(&buffer, NGNFS_MSG_RESOLVE_REPLY, &msg, &frame);
		assert_int_equal(msg.request_id, 30 + i);
		assert_int_equal(msg.status, i == 0 ? -ENOENT : 0);
		assert_int_equal(msg.resolve.set_id, 0x2000 + i);
		assert_int_equal(msg.resolve.outcome, outcomes[i]);
		free(frame);
	}

	ngnfs_buffer_reset(&buffer);
	assert_int_equal(ngnfs_encode_alloc(&buffer, 4, NGNFS_MSG_MAX_BLOCKS), 0);
	receive_one(&buffer, NGNFS_MSG_ALLOC, &msg, &frame);
	assert_int_equal(msg.request_id, 4);
	assert_int_equal(msg.alloc.count, NGNFS_MSG_MAX_BLOCKS);
	free(frame);
	ngnfs_buffer_free(&buffer);
}

static void test_repair_messages_round_trip(void **state)
{
	const uint64_t blknos[3] = { ngnfs_blkno_make(1, 5), 6, ngnfs_blkno_make(3, 7) };
	const uint64_t versions[3] = { 9, 0, 11 };
	const int statuses[3] = { 0, -EIO, 0 };
	const uint8_t *const datas[3] = { block_a, NULL, block_c };
	struct ngnfs_buffer buffer;
	struct ngnfs_msg msg;
	uint8_t zeros[NGNFS_BLOCK_SIZE] = { 0 };
	uint8_t *frame;

	(void)state;
	ngnfs_buffer_init(&buffer);
	assert_int_equal(ngnfs_encode_cmpxchg(&buffer, 12, ngnfs_blkno_make(6, 6), 66, block_b), 0);
	receive_one(&buffer, NGNFS_MSG_CMPXCHG, &msg, &frame);
	assert_int_equal(msg.request_id, 12);
	assert_int_equal(msg.cmpxchg.blkno, ngnfs_blkno_make(6, 6));
	assert_int_equal(msg.cmpxchg.expected_version, 66);
	assert_memory_equal(msg.cmpxchg.data, block_b, NGNFS_BLOCK_SIZE);
	free(frame);

	ngnfs_buffer_reset(&buffer);
	assert_int_equal(
	    ngnfs_encode_cmpxchg_reply(&buffer, 12, -ESTALE, ngnfs_blkno_make(6, 6), 67), 0);
	receive_one(&buffer, NGNFS_MSG_CMPXCHG_REPLY, &msg, &frame);
	assert_int_equal(msg.status, -ESTALE);
	assert_int_equal(msg.cmpxchg_reply.blkno, ngnfs_blkno_make(6, 6));
	assert_int_equal(msg.cmpxchg_reply.version, 67);
	free(frame);

	ngnfs_buffer_reset(&buffer);
	assert_int_equal(ngnfs_encode_read_incoherent(&buffer, 13, blknos, 3), 0);
	receive_one(&buffer, NGNFS_MSG_READ_INCOHERENT, &msg, &frame);
	assert_int_equal(msg.read_incoherent.count, 3);
	for (uint32_t i = 0; i < 3; i++)
		assert_int_equal(ngnfs_msg_read_incoherent_blkno(&msg, i), blknos[i]);
	free(frame);

	ngnfs_buffer_reset(&buffer);
	assert_int_equal(ngnfs_encode_read_incoherent_reply(&buffer, 13, 0, blknos, versions,
							    statuses, datas, 3),
			 0);
	receive_one(&buffer, NGNFS_MSG_READ_INCOHERENT_REPLY, &msg, &frame);
	assert_int_equal(msg.request_id, 13);
	assert_int_equal(msg.read_incoherent_reply.count, 3);
	for (uint32_t i = 0; i < 3; i++) {
		uint64_t blkno;
		uint64_t version;
		int status;
		const uint8_t *data =
		    ngnfs_msg_incoherent_block(&msg, i, &blkno, &version, &status);

		assert_int_equal(blkno, blknos[i]);
		assert_int_equal(version, versions[i]);
		assert_int_equal(status, statuses[i]);
		assert_memory_equal(data, datas[i] ? datas[i] : zeros, NGNFS_BLOCK_SIZE);
	}
	free(frame);
	ngnfs_buffer_free(&buffer);
}

static void test_statfs_and_error_round_trip(void **state)
{
	char long_text[NGNFS_MSG_MAX_TEXT + 100];
	struct ngnfs_buffer buffer;
	struct ngnfs_msg msg;
	uint8_t *frame;

	(void)state;
	ngnfs_buffer_init(&buffer);
	assert_int_equal(ngnfs_encode_statfs_reply(&buffer, 14, 0,
						   &(struct ngnfs_statfs_figures){
						       .total_blocks = 1ULL << 40,
						       .free_blocks = 12345,
						       .reserved_blocks = 678,
						       .staged_sets = UINT64_MAX,
						       .client_sessions = 3,
						       .group_commits = 1ULL << 33,
						       .commit_requests = (1ULL << 33) + 7,
						   }),
			 0);
	receive_one(&buffer, NGNFS_MSG_STATFS_REPLY, &msg, &frame);
	assert_int_equal(msg.request_id, 14);
	assert_int_equal(msg.statfs_reply.total_blocks, 1ULL << 40);
	assert_int_equal(msg.statfs_reply.free_blocks, 12345);
	assert_int_equal(msg.statfs_reply.reserved_blocks, 678);
	assert_int_equal(msg.statfs_reply.staged_sets, UINT64_MAX);
	assert_int_equal(msg.statfs_reply.client_sessions, 3);
	assert_int_equal(msg.statfs_reply.group_commits, 1ULL << 33);
	assert_int_equal(msg.statfs_reply.commit_requests, (1ULL << 33) + 7);
	free(frame);

	ngnfs_buffer_reset(&buffer);
	assert_int_equal(ngnfs_encode_error(&buffer, 15, -EBADMSG, "crc mismatch: frame corrupted"),
			 0);
	receive_one(&buffer, NGNFS_MSG_ERROR, &msg, &frame);
	assert_int_equal(msg.request_id, 15);
	assert_int_equal(msg.status, -EBADMSG);
	assert_int_equal(msg.error.text_length, strlen("crc mismatch: frame corrupted"));
	assert_memory_equal(msg.error.text, "crc mismatch: frame corrupted", msg.error.text_length);
	free(frame);

	/* longer text is cut at the protocol maximum, not refused */
	memset(long_text, 'x', sizeof(long_text) - 1);
	long_text[sizeof(long_text) - 1] = '\0';
	ngnfs_buffer_reset(&buffer);
	assert_int_equal(ngnfs_encode_error(&buffer, 16, -EPROTO, long_text), 0);
	receive_one(&buffer, NGNFS_MSG_ERROR, &msg, &frame);
	assert_int_equal(msg.error.text_length, NGNFS_MSG_MAX_TEXT);
	free(frame);
	ngnfs_buffer_free(&buffer);
}

/* Frames back to back in one buffer, and a frame at an odd address. */
static void test_frames_back_to_back_and_unaligned(void **state)
{
	const uint64_t blknos[2] = { 21, 22 };
	struct ngnfs_buffer buffer;
	struct ngnfs_msg msg;
	size_t offset = 0;
	size_t frame_length;
	const char *why;
	uint8_t *odd;
	int frames = 0;

	(void)state;
	ngnfs_buffer_init(&buffer);
	assert_int_equal(ngnfs_encode_error(&buffer, 1, -EPROTO, "odd"), 0); /* 43 bytes */
	assert_int_equal(ngnfs_encode_read_incoherent(&buffer, 2, blknos, 2), 0);
	assert_int_equal(ngnfs_encode_statfs(&buffer, 3), 0);
	while (offset < buffer.length) {
		assert_int_equal(ngnfs_msg_check_header(buffer.data + offset, &frame_length, &why),
				 0);
		assert_int_equal(ngnfs_msg_decode(buffer.data + offset, frame_length, &msg, &why),
				 0);
		assert_int_equal(msg.request_id, frames + 1);
		if (msg.type == NGNFS_MSG_READ_INCOHERENT) {
			/* this frame sits at offset 43: the accessors must not care */
			assert_int_equal(offset % 8, 3);
			assert_int_equal(ngnfs_msg_read_incoherent_blkno(&msg, 1), 22);
		}
		offset += frame_length;
		frames++;
	}
	assert_int_equal(frames, 3);

	/* a WRITE decoded from an odd address */
	ngnfs_buffer_reset(&buffer);
	{
		const uint16_t participants[1] = { 3 };
		const uint64_t frees[1] = { 99 };
		struct ngnfs_block_request block = { .blkno = 5, .version = 6, .data = block_a };
		uint64_t blkno;
		uint64_t base_version;

		assert_int_equal(ngnfs_encode_write(&buffer, 1, 2, NGNFS_WRITE_STAGE, 0,
						    NGNFS_ACCESS_NONE, participants, 1, &block, 1,
						    frees, 1),
				 0);
		odd = malloc(buffer.length + 1);
		assert_non_null(odd);
		memcpy(odd + 1, buffer.data, buffer.length);
		assert_int_equal(ngnfs_msg_decode(odd + 1, buffer.length, &msg, &why), 0);
		assert_int_equal(ngnfs_msg_write_participant(&msg, 0), 3);
		assert_int_equal(ngnfs_msg_write_free(&msg, 0), 99);
		assert_memory_equal(ngnfs_msg_write_block(&msg, 0, &blkno, &base_version), block_a,
				    NGNFS_BLOCK_SIZE);
		assert_int_equal(blkno, 5);
		assert_int_equal(base_version, 6);
		free(odd);
	}
	ngnfs_buffer_free(&buffer);
}

/* ---- buffer behaviour ------------------------------------------------- */

static void test_oversized_frame_is_sticky_emsgsize(void **state)
{
	struct ngnfs_buffer buffer;
	size_t first_length;

	(void)state;
	ngnfs_buffer_init(&buffer);
	assert_int_equal(ngnfs_encode_statfs(&buffer, 1), 0);
	first_length = buffer.length;

	ngnfs_msg_begin(&buffer, NGNFS_MSG_ERROR, 2, -EIO);
	for (size_t put = 0; put <= NGNFS_MSG_MAX_PAYLOAD; put += NGNFS_BLOCK_SIZE)
		ngnfs_msg_put(&buffer, block_a, NGNFS_BLOCK_SIZE);
	assert_int_equal(ngnfs_msg_finish(&buffer), -EMSGSIZE);
	/* the unfinished frame is gone, the finished one before it intact */
	assert_int_equal(buffer.length, first_length);
	/* sticky: nothing more is accepted until reset */
	assert_int_equal(ngnfs_encode_statfs(&buffer, 3), -EMSGSIZE);
	assert_int_equal(buffer.length, first_length);
	ngnfs_buffer_reset(&buffer);
	assert_int_equal(buffer.length, 0);
	assert_int_equal(ngnfs_encode_statfs(&buffer, 4), 0);

	/* exactly the maximum payload is allowed */
	ngnfs_buffer_reset(&buffer);
	ngnfs_msg_begin(&buffer, NGNFS_MSG_STATFS_REPLY, 5, 0);
	ngnfs_msg_put_zeros(&buffer, NGNFS_MSG_MAX_PAYLOAD);
	assert_int_equal(ngnfs_msg_finish(&buffer), 0);
	assert_int_equal(buffer.length, NGNFS_MSG_HEADER_SIZE + NGNFS_MSG_MAX_PAYLOAD);
	ngnfs_buffer_free(&buffer);
}

static void test_encoders_refuse_what_decoders_reject(void **state)
{
	struct ngnfs_block_request bad_get = { .blkno = 1, .access = NGNFS_ACCESS_NONE };
	struct ngnfs_block_request bad_release = { .blkno = 1, .access = NGNFS_ACCESS_WRITE };
	struct ngnfs_block_request no_data = { .blkno = 1, .data = NULL };
	const uint64_t blkno = 1;
	struct ngnfs_buffer buffer;

	(void)state;
	ngnfs_buffer_init(&buffer);
	assert_int_equal(ngnfs_encode_get(&buffer, 1, &bad_get, 1), -EINVAL);
	assert_int_equal(ngnfs_encode_get(&buffer, 1, &bad_get, 0), -EINVAL);
	assert_int_equal(ngnfs_encode_release(&buffer, 1, &bad_release, 1), -EINVAL);
	assert_int_equal(ngnfs_encode_revoke(&buffer, 1, NGNFS_ACCESS_WRITE), -EINVAL);
	assert_int_equal(ngnfs_encode_grant(&buffer, 1, 0, 1, 1, 3, NULL), -EINVAL);
	assert_int_equal(ngnfs_encode_write(&buffer, 1, 1, 3, 0, 0, NULL, 0, NULL, 0, NULL, 0),
			 -EINVAL);
	assert_int_equal(
	    ngnfs_encode_write(&buffer, 1, 1, NGNFS_WRITE_STAGE, 0, 0, NULL, 0, NULL, 0, NULL, 0),
	    -EINVAL);
	assert_int_equal(ngnfs_encode_write(&buffer, 1, 1, NGNFS_WRITE_SINGLE, 0, 0, NULL, 0,
					    &no_data, 1, NULL, 0),
			 -EINVAL);
	assert_int_equal(ngnfs_encode_write_frame(&buffer, 1, 1, NGNFS_WRITE_SINGLE, 0, 0, NULL, 0,
						  NULL, 0, &blkno, 1, 0, 0),
			 -EINVAL);
	assert_int_equal(ngnfs_encode_write_frame(&buffer, 1, 1, NGNFS_WRITE_SINGLE, 0, 0, NULL, 0,
						  NULL, 0, &blkno, 1, 2, 2),
			 -EINVAL);
	assert_int_equal(ngnfs_encode_write_frame(&buffer, 1, 1, NGNFS_WRITE_SINGLE, 0, 0, NULL, 0,
						  NULL, 0, &blkno, 1, 0,
						  NGNFS_WRITE_MAX_FRAMES + 1),
			 -EINVAL);
	assert_int_equal(ngnfs_encode_resolve(&buffer, NGNFS_MSG_RESOLVE, 1, 0, 1, 3), -EINVAL);
	assert_int_equal(ngnfs_encode_alloc(&buffer, 1, NGNFS_MSG_MAX_BLOCKS + 1), -EINVAL);
	/* ALLOC_REPLY has its own encoder, and blocks need a session epoch */
	assert_int_equal(
	    ngnfs_encode_versions_reply(&buffer, NGNFS_MSG_ALLOC_REPLY, 1, 0, 0, NULL, NULL, 0),
	    -EINVAL);
	assert_int_equal(ngnfs_encode_alloc_reply(&buffer, 1, 0, 0, &blkno, &blkno, 1), -EINVAL);
	assert_int_equal(ngnfs_encode_read_incoherent(&buffer, 1, &blkno, 0), -EINVAL);
	assert_int_equal(ngnfs_encode_format(&buffer, 1, fs_id, 2, 2), -EINVAL);
	assert_int_equal(ngnfs_encode_status_reply(&buffer, NGNFS_MSG_GET, 1, 0), -EINVAL);
	assert_int_equal(ngnfs_encode_error(&buffer, 1, 0, "no error"), -EINVAL);
	assert_int_equal(ngnfs_encode_hello_reply(&buffer, 1, 5, fs_id, 1, 0, 0, 0, 0), -EINVAL);
	/* refusals write nothing and leave no error behind */
	assert_int_equal(buffer.length, 0);
	assert_int_equal(buffer.error, 0);
	ngnfs_buffer_free(&buffer);
}

/* ---- malformed frames --------------------------------------------------- */

/* Recompute the crc of a finished frame after patching it. */
static void refresh_crc(uint8_t *frame, size_t length)
{
	struct ngnfs_msg_header header;
	uint32_t crc;

	memcpy(&header, frame, sizeof(header));
	header.crc = 0;
	crc = ngnfs_crc32c(ngnfs_crc32c(0, &header, sizeof(header)), frame + NGNFS_MSG_HEADER_SIZE,
			   length - NGNFS_MSG_HEADER_SIZE);
	header.crc = htole32(crc);
	memcpy(frame, &header, sizeof(header));
}

static void put_le16(uint8_t *at, uint16_t value)
{
	__le16 le = htole16(value);

	memcpy(at, &le, sizeof(le));
}

static void put_le32(uint8_t *at, uint32_t value)
{
	__le32 le = htole32(value);

	memcpy(at, &le, sizeof(le));
}

#define HEADER_FIELD(field)	     offsetof(struct ngnfs_msg_header, field)
#define PAYLOAD(field_struct, field) (NGNFS_MSG_HEADER_SIZE + offsetof(field_struct, field))

static void valid_get(struct ngnfs_buffer *b, uint32_t count)
{
	struct ngnfs_block_request blocks[4];

	for (uint32_t i = 0; i < 4; i++)
		blocks[i] =
		    (struct ngnfs_block_request){ .blkno = i + 1, .access = NGNFS_ACCESS_READ };
	assert_int_equal(ngnfs_encode_get(b, 1, blocks, count), 0);
}

/* Each builder leaves a frame in b and may shorten what is handed to the decoder. */
static void bad_short_header(struct ngnfs_buffer *b, size_t *length)
{
	assert_int_equal(ngnfs_encode_statfs(b, 1), 0);
	*length = NGNFS_MSG_HEADER_SIZE - 1;
}

static void bad_empty(struct ngnfs_buffer *b, size_t *length)
{
	assert_int_equal(ngnfs_encode_statfs(b, 1), 0);
	*length = 0;
}

static void bad_short_payload(struct ngnfs_buffer *b, size_t *length)
{
	valid_get(b, 2);
	*length = b->length - 1;
}

static void bad_trailing_byte(struct ngnfs_buffer *b, size_t *length)
{
	valid_get(b, 2);
	b->data[b->length] = 0; /* capacity is at least 4096 */
	*length = b->length + 1;
}

static void bad_oversized_length(struct ngnfs_buffer *b, size_t *length)
{
	assert_int_equal(ngnfs_encode_statfs(b, 1), 0);
	put_le32(b->data + HEADER_FIELD(payload_length), NGNFS_MSG_MAX_PAYLOAD + 1);
	refresh_crc(b->data, b->length);
	*length = b->length;
}

static void bad_huge_length(struct ngnfs_buffer *b, size_t *length)
{
	assert_int_equal(ngnfs_encode_statfs(b, 1), 0);
	put_le32(b->data + HEADER_FIELD(payload_length), UINT32_MAX);
	*length = b->length;
}

static void bad_magic(struct ngnfs_buffer *b, size_t *length)
{
	assert_int_equal(ngnfs_encode_statfs(b, 1), 0);
	put_le32(b->data + HEADER_FIELD(magic), 0x4e474d32U);
	refresh_crc(b->data, b->length);
	*length = b->length;
}

static void bad_version(struct ngnfs_buffer *b, size_t *length)
{
	assert_int_equal(ngnfs_encode_statfs(b, 1), 0);
	put_le16(b->data + HEADER_FIELD(version), NGNFS_PROTOCOL_VERSION + 1);
	refresh_crc(b->data, b->length);
	*length = b->length;
}

static void bad_version_zero(struct ngnfs_buffer *b, size_t *length)
{
	bad_version(b, length);
	put_le16(b->data + HEADER_FIELD(version), 0);
	refresh_crc(b->data, b->length);
}

static void bad_crc_payload(struct ngnfs_buffer *b, size_t *length)
{
	valid_get(b, 1);
	b->data[b->length - 1] ^= 0x01;
	*length = b->length;
}

static void bad_crc_field(struct ngnfs_buffer *b, size_t *length)
{
	assert_int_equal(ngnfs_encode_statfs(b, 1), 0);
	b->data[HEADER_FIELD(crc)] ^= 0x80;
	*length = b->length;
}

static void bad_request_id_corrupted(struct ngnfs_buffer *b, size_t *length)
{
	assert_int_equal(ngnfs_encode_statfs(b, 1), 0);
	b->data[HEADER_FIELD(request_id)] ^= 0x02;
	*length = b->length;
}

static void bad_type_zero(struct ngnfs_buffer *b, size_t *length)
{
	ngnfs_msg_begin(b, (enum ngnfs_msg_type)0, 1, 0);
	assert_int_equal(ngnfs_msg_finish(b), 0);
	*length = b->length;
}

static void bad_type_unknown(struct ngnfs_buffer *b, size_t *length)
{
	ngnfs_msg_begin(b, NGNFS_MSG_TYPE_COUNT, 1, 0);
	assert_int_equal(ngnfs_msg_finish(b), 0);
	*length = b->length;
}

static void bad_type_huge(struct ngnfs_buffer *b, size_t *length)
{
	ngnfs_msg_begin(b, (enum ngnfs_msg_type)0xffff, 1, 0);
	assert_int_equal(ngnfs_msg_finish(b), 0);
	*length = b->length;
}

static void bad_header_reserved(struct ngnfs_buffer *b, size_t *length)
{
	assert_int_equal(ngnfs_encode_statfs(b, 1), 0);
	put_le32(b->data + HEADER_FIELD(reserved), 1);
	refresh_crc(b->data, b->length);
	*length = b->length;
}

static void bad_request_with_status(struct ngnfs_buffer *b, size_t *length)
{
	ngnfs_msg_begin(b, NGNFS_MSG_STATFS, 1, -EIO);
	assert_int_equal(ngnfs_msg_finish(b), 0);
	*length = b->length;
}

static void bad_positive_status(struct ngnfs_buffer *b, size_t *length)
{
	ngnfs_msg_begin(b, NGNFS_MSG_FORMAT_REPLY, 1, 5);
	assert_int_equal(ngnfs_msg_finish(b), 0);
	*length = b->length;
}

static void bad_status_not_errno(struct ngnfs_buffer *b, size_t *length)
{
	ngnfs_msg_begin(b, NGNFS_MSG_FORMAT_REPLY, 1, -100000);
	assert_int_equal(ngnfs_msg_finish(b), 0);
	*length = b->length;
}

static void bad_header_only_with_payload(struct ngnfs_buffer *b, size_t *length)
{
	ngnfs_msg_begin(b, NGNFS_MSG_STATFS, 1, 0);
	ngnfs_msg_put_zeros(b, 8);
	assert_int_equal(ngnfs_msg_finish(b), 0);
	*length = b->length;
}

static void bad_hello_truncated(struct ngnfs_buffer *b, size_t *length)
{
	ngnfs_msg_begin(b, NGNFS_MSG_HELLO, 1, 0);
	ngnfs_msg_put_zeros(b, sizeof(struct ngnfs_msg_hello) - 1);
	assert_int_equal(ngnfs_msg_finish(b), 0);
	*length = b->length;
}

static void bad_hello_too_long(struct ngnfs_buffer *b, size_t *length)
{
	ngnfs_msg_begin(b, NGNFS_MSG_HELLO, 1, 0);
	ngnfs_msg_put_zeros(b, sizeof(struct ngnfs_msg_hello) + 8);
	assert_int_equal(ngnfs_msg_finish(b), 0);
	*length = b->length;
}

static void bad_hello_flags(struct ngnfs_buffer *b, size_t *length)
{
	assert_int_equal(ngnfs_encode_hello(b, 1, fs_id, 2, 0), 0);
	put_le32(b->data + PAYLOAD(struct ngnfs_msg_hello, flags), 1U << 31);
	refresh_crc(b->data, b->length);
	*length = b->length;
}

static void bad_hello_reserved(struct ngnfs_buffer *b, size_t *length)
{
	assert_int_equal(ngnfs_encode_hello(b, 1, fs_id, 2, 0), 0);
	put_le16(b->data + PAYLOAD(struct ngnfs_msg_hello, reserved), 1);
	refresh_crc(b->data, b->length);
	*length = b->length;
}

static void bad_format_index(struct ngnfs_buffer *b, size_t *length)
{
	assert_int_equal(ngnfs_encode_format(b, 1, fs_id, 1, 2), 0);
	put_le16(b->data + PAYLOAD(struct ngnfs_msg_format, device_index), 2);
	refresh_crc(b->data, b->length);
	*length = b->length;
}

static void bad_format_count_zero(struct ngnfs_buffer *b, size_t *length)
{
	assert_int_equal(ngnfs_encode_format(b, 1, fs_id, 0, 1), 0);
	put_le32(b->data + PAYLOAD(struct ngnfs_msg_format, device_count), 0);
	refresh_crc(b->data, b->length);
	*length = b->length;
}

static void set_get_count(struct ngnfs_buffer *b, uint32_t count)
{
	put_le32(b->data + PAYLOAD(struct ngnfs_msg_get, count), count);
	refresh_crc(b->data, b->length);
}

static void bad_get_count_too_big_for_payload(struct ngnfs_buffer *b, size_t *length)
{
	valid_get(b, 2);
	set_get_count(b, 3);
	*length = b->length;
}

static void bad_get_count_too_small_for_payload(struct ngnfs_buffer *b, size_t *length)
{
	valid_get(b, 2);
	set_get_count(b, 1);
	*length = b->length;
}

static void bad_get_count_over_max(struct ngnfs_buffer *b, size_t *length)
{
	valid_get(b, 2);
	set_get_count(b, NGNFS_MSG_MAX_BLOCKS + 1);
	*length = b->length;
}

static void bad_get_count_overflow(struct ngnfs_buffer *b, size_t *length)
{
	valid_get(b, 2);
	/* 0x0aaaaaab * 24 wraps to 8 in 32 bits: must not look like a fit */
	set_get_count(b, 0x0aaaaaabU);
	*length = b->length;
}

static void bad_get_count_zero(struct ngnfs_buffer *b, size_t *length)
{
	ngnfs_msg_begin(b, NGNFS_MSG_GET, 1, 0);
	ngnfs_msg_put_zeros(b, sizeof(struct ngnfs_msg_get));
	assert_int_equal(ngnfs_msg_finish(b), 0);
	*length = b->length;
}

static void bad_get_access(struct ngnfs_buffer *b, size_t *length)
{
	valid_get(b, 2);
	b->data[NGNFS_MSG_HEADER_SIZE + sizeof(struct ngnfs_msg_get) +
		sizeof(struct ngnfs_msg_get_entry) + offsetof(struct ngnfs_msg_get_entry, access)] =
	    7;
	refresh_crc(b->data, b->length);
	*length = b->length;
}

static void bad_get_access_none(struct ngnfs_buffer *b, size_t *length)
{
	valid_get(b, 1);
	b->data[NGNFS_MSG_HEADER_SIZE + sizeof(struct ngnfs_msg_get) +
		offsetof(struct ngnfs_msg_get_entry, access)] = NGNFS_ACCESS_NONE;
	refresh_crc(b->data, b->length);
	*length = b->length;
}

static void bad_get_entry_reserved(struct ngnfs_buffer *b, size_t *length)
{
	valid_get(b, 1);
	b->data[NGNFS_MSG_HEADER_SIZE + sizeof(struct ngnfs_msg_get) +
		offsetof(struct ngnfs_msg_get_entry, reserved) + 6] = 1;
	refresh_crc(b->data, b->length);
	*length = b->length;
}

static void bad_grant_access(struct ngnfs_buffer *b, size_t *length)
{
	assert_int_equal(ngnfs_encode_grant(b, 1, 0, 1, 1, NGNFS_ACCESS_READ, NULL), 0);
	b->data[PAYLOAD(struct ngnfs_msg_grant, access)] = 3;
	refresh_crc(b->data, b->length);
	*length = b->length;
}

static void bad_grant_data_missing(struct ngnfs_buffer *b, size_t *length)
{
	assert_int_equal(ngnfs_encode_grant(b, 1, 0, 1, 1, NGNFS_ACCESS_READ, NULL), 0);
	b->data[PAYLOAD(struct ngnfs_msg_grant, flags)] = NGNFS_GRANT_DATA;
	refresh_crc(b->data, b->length);
	*length = b->length;
}

static void bad_grant_data_unflagged(struct ngnfs_buffer *b, size_t *length)
{
	assert_int_equal(ngnfs_encode_grant(b, 1, 0, 1, 1, NGNFS_ACCESS_READ, block_a), 0);
	b->data[PAYLOAD(struct ngnfs_msg_grant, flags)] = 0;
	refresh_crc(b->data, b->length);
	*length = b->length;
}

static void bad_grant_flags(struct ngnfs_buffer *b, size_t *length)
{
	assert_int_equal(ngnfs_encode_grant(b, 1, 0, 1, 1, NGNFS_ACCESS_READ, NULL), 0);
	b->data[PAYLOAD(struct ngnfs_msg_grant, flags)] = 0x80;
	refresh_crc(b->data, b->length);
	*length = b->length;
}

static void bad_revoke_access(struct ngnfs_buffer *b, size_t *length)
{
	assert_int_equal(ngnfs_encode_revoke(b, 1, NGNFS_ACCESS_NONE), 0);
	b->data[PAYLOAD(struct ngnfs_msg_revoke, access)] = NGNFS_ACCESS_WRITE;
	refresh_crc(b->data, b->length);
	*length = b->length;
}

static void bad_revoke_request_id(struct ngnfs_buffer *b, size_t *length)
{
	assert_int_equal(ngnfs_encode_revoke(b, 1, NGNFS_ACCESS_NONE), 0);
	b->data[HEADER_FIELD(request_id)] = 1;
	refresh_crc(b->data, b->length);
	*length = b->length;
}

static void bad_release_access(struct ngnfs_buffer *b, size_t *length)
{
	struct ngnfs_block_request block = { .blkno = 1, .access = NGNFS_ACCESS_NONE };

	assert_int_equal(ngnfs_encode_release(b, 1, &block, 1), 0);
	b->data[NGNFS_MSG_HEADER_SIZE + sizeof(struct ngnfs_msg_release) +
		offsetof(struct ngnfs_msg_release_entry, access)] = NGNFS_ACCESS_WRITE;
	refresh_crc(b->data, b->length);
	*length = b->length;
}

static void bad_release_count_short(struct ngnfs_buffer *b, size_t *length)
{
	struct ngnfs_block_request block = { .blkno = 1, .access = NGNFS_ACCESS_NONE };

	assert_int_equal(ngnfs_encode_release(b, 1, &block, 1), 0);
	put_le32(b->data + PAYLOAD(struct ngnfs_msg_release, count), 2);
	refresh_crc(b->data, b->length);
	*length = b->length;
}

static void valid_stage(struct ngnfs_buffer *b)
{
	const uint16_t participants[3] = { 1, 2, 3 };
	const uint64_t frees[1] = { 9 };
	struct ngnfs_block_request block = { .blkno = 5, .version = 1, .data = block_a };

	assert_int_equal(ngnfs_encode_write(b, 1, 7, NGNFS_WRITE_STAGE, 0, NGNFS_ACCESS_NONE,
					    participants, 3, &block, 1, frees, 1),
			 0);
}

static void bad_write_phase(struct ngnfs_buffer *b, size_t *length)
{
	valid_stage(b);
	b->data[PAYLOAD(struct ngnfs_msg_write, phase)] = 0;
	refresh_crc(b->data, b->length);
	*length = b->length;
}

static void bad_write_phase_high(struct ngnfs_buffer *b, size_t *length)
{
	valid_stage(b);
	b->data[PAYLOAD(struct ngnfs_msg_write, phase)] = 3;
	refresh_crc(b->data, b->length);
	*length = b->length;
}

static void bad_write_release_access(struct ngnfs_buffer *b, size_t *length)
{
	valid_stage(b);
	put_le32(b->data + PAYLOAD(struct ngnfs_msg_write, flags), NGNFS_WRITE_RELEASE);
	b->data[PAYLOAD(struct ngnfs_msg_write, release_access)] = NGNFS_ACCESS_WRITE;
	refresh_crc(b->data, b->length);
	*length = b->length;
}

static void bad_write_flags(struct ngnfs_buffer *b, size_t *length)
{
	valid_stage(b);
	put_le32(b->data + PAYLOAD(struct ngnfs_msg_write, flags), 0x100);
	refresh_crc(b->data, b->length);
	*length = b->length;
}

static void bad_write_block_count_long(struct ngnfs_buffer *b, size_t *length)
{
	valid_stage(b);
	put_le32(b->data + PAYLOAD(struct ngnfs_msg_write, block_count), 2);
	refresh_crc(b->data, b->length);
	*length = b->length;
}

static void bad_write_block_count_short(struct ngnfs_buffer *b, size_t *length)
{
	valid_stage(b);
	put_le32(b->data + PAYLOAD(struct ngnfs_msg_write, block_count), 0);
	refresh_crc(b->data, b->length);
	*length = b->length;
}

static void bad_write_block_count_over_max(struct ngnfs_buffer *b, size_t *length)
{
	valid_stage(b);
	put_le32(b->data + PAYLOAD(struct ngnfs_msg_write, block_count), UINT32_MAX);
	refresh_crc(b->data, b->length);
	*length = b->length;
}

static void bad_write_free_count_over_max(struct ngnfs_buffer *b, size_t *length)
{
	valid_stage(b);
	put_le32(b->data + PAYLOAD(struct ngnfs_msg_write, free_count), NGNFS_MSG_MAX_BLOCKS + 1);
	refresh_crc(b->data, b->length);
	*length = b->length;
}

static void bad_write_participants_over_max(struct ngnfs_buffer *b, size_t *length)
{
	valid_stage(b);
	put_le16(b->data + PAYLOAD(struct ngnfs_msg_write, participant_count),
		 NGNFS_MSG_MAX_PARTICIPANTS + 1);
	refresh_crc(b->data, b->length);
	*length = b->length;
}

static void bad_write_participants_mismatch(struct ngnfs_buffer *b, size_t *length)
{
	valid_stage(b);
	/* 3 -> 5 participants: padded size grows from 8 to 16 bytes */
	put_le16(b->data + PAYLOAD(struct ngnfs_msg_write, participant_count), 5);
	refresh_crc(b->data, b->length);
	*length = b->length;
}

static void bad_write_padding(struct ngnfs_buffer *b, size_t *length)
{
	valid_stage(b);
	b->data[NGNFS_MSG_HEADER_SIZE + sizeof(struct ngnfs_msg_write) + 7] = 1;
	refresh_crc(b->data, b->length);
	*length = b->length;
}

static void bad_write_stage_no_participants(struct ngnfs_buffer *b, size_t *length)
{
	struct ngnfs_block_request block = { .blkno = 5, .version = 1, .data = block_a };

	assert_int_equal(ngnfs_encode_write(b, 1, 7, NGNFS_WRITE_SINGLE, 0, NGNFS_ACCESS_NONE, NULL,
					    0, &block, 1, NULL, 0),
			 0);
	b->data[PAYLOAD(struct ngnfs_msg_write, phase)] = NGNFS_WRITE_STAGE;
	refresh_crc(b->data, b->length);
	*length = b->length;
}

static void valid_single(struct ngnfs_buffer *b)
{
	struct ngnfs_block_request block = { .blkno = 5, .version = 1, .data = block_a };

	assert_int_equal(ngnfs_encode_write_frame(b, 1, 7, NGNFS_WRITE_SINGLE, 0, NGNFS_ACCESS_NONE,
						  NULL, 0, &block, 1, NULL, 0, 1, 3),
			 0);
}

static void bad_write_frame_count_zero(struct ngnfs_buffer *b, size_t *length)
{
	valid_single(b);
	put_le16(b->data + PAYLOAD(struct ngnfs_msg_write, frame_index), 0);
	put_le16(b->data + PAYLOAD(struct ngnfs_msg_write, frame_count), 0);
	refresh_crc(b->data, b->length);
	*length = b->length;
}

static void bad_write_frame_count_high(struct ngnfs_buffer *b, size_t *length)
{
	valid_single(b);
	put_le16(b->data + PAYLOAD(struct ngnfs_msg_write, frame_count),
		 NGNFS_WRITE_MAX_FRAMES + 1);
	refresh_crc(b->data, b->length);
	*length = b->length;
}

static void bad_write_frame_index(struct ngnfs_buffer *b, size_t *length)
{
	valid_single(b);
	put_le16(b->data + PAYLOAD(struct ngnfs_msg_write, frame_index), 3);
	refresh_crc(b->data, b->length);
	*length = b->length;
}

static void bad_write_stage_frames(struct ngnfs_buffer *b, size_t *length)
{
	valid_stage(b);
	put_le16(b->data + PAYLOAD(struct ngnfs_msg_write, frame_count), 2);
	refresh_crc(b->data, b->length);
	*length = b->length;
}

static void bad_write_reserved(struct ngnfs_buffer *b, size_t *length)
{
	valid_single(b);
	put_le32(b->data + PAYLOAD(struct ngnfs_msg_write, reserved), 1);
	refresh_crc(b->data, b->length);
	*length = b->length;
}

static void bad_versions_count_long(struct ngnfs_buffer *b, size_t *length)
{
	const uint64_t blknos[1] = { 1 };
	const uint64_t versions[1] = { 2 };

	assert_int_equal(
	    ngnfs_encode_versions_reply(b, NGNFS_MSG_COMMIT_REPLY, 1, 0, 3, blknos, versions, 1),
	    0);
	put_le32(b->data + PAYLOAD(struct ngnfs_msg_write_reply, count), 2);
	refresh_crc(b->data, b->length);
	*length = b->length;
}

static void bad_alloc_reply_count_over_max(struct ngnfs_buffer *b, size_t *length)
{
	assert_int_equal(ngnfs_encode_alloc_reply(b, 1, 0, 0, NULL, NULL, 0), 0);
	put_le32(b->data + PAYLOAD(struct ngnfs_msg_alloc_reply, count), 1U << 28);
	refresh_crc(b->data, b->length);
	*length = b->length;
}

/* Blocks handed out with no session epoch: their inodes' generations would not be unique. */
static void bad_alloc_reply_without_epoch(struct ngnfs_buffer *b, size_t *length)
{
	const uint64_t blkno = ngnfs_blkno_make(1, 40), version = 3;

	assert_int_equal(ngnfs_encode_alloc_reply(b, 1, 0, 7, &blkno, &version, 1), 0);
	put_le32(b->data + PAYLOAD(struct ngnfs_msg_alloc_reply, session_epoch), 0);
	refresh_crc(b->data, b->length);
	*length = b->length;
}

static void bad_resolve_outcome(struct ngnfs_buffer *b, size_t *length)
{
	assert_int_equal(ngnfs_encode_resolve(b, NGNFS_MSG_RESOLVE, 1, 0, 2, NGNFS_SET_COMMITTED),
			 0);
	b->data[PAYLOAD(struct ngnfs_msg_resolve, outcome)] = 3;
	refresh_crc(b->data, b->length);
	*length = b->length;
}

static void bad_resolve_reply_outcome(struct ngnfs_buffer *b, size_t *length)
{
	assert_int_equal(
	    ngnfs_encode_resolve(b, NGNFS_MSG_RESOLVE_REPLY, 1, 0, 2, NGNFS_SET_ABORTED), 0);
	b->data[PAYLOAD(struct ngnfs_msg_resolve_reply, outcome)] = 0xff;
	refresh_crc(b->data, b->length);
	*length = b->length;
}

static void bad_alloc_count_zero(struct ngnfs_buffer *b, size_t *length)
{
	assert_int_equal(ngnfs_encode_alloc(b, 1, 1), 0);
	put_le32(b->data + PAYLOAD(struct ngnfs_msg_alloc, count), 0);
	refresh_crc(b->data, b->length);
	*length = b->length;
}

static void bad_alloc_count_over_max(struct ngnfs_buffer *b, size_t *length)
{
	assert_int_equal(ngnfs_encode_alloc(b, 1, 1), 0);
	put_le32(b->data + PAYLOAD(struct ngnfs_msg_alloc, count), NGNFS_MSG_MAX_BLOCKS + 1);
	refresh_crc(b->data, b->length);
	*length = b->length;
}

static void bad_cmpxchg_short_block(struct ngnfs_buffer *b, size_t *length)
{
	ngnfs_msg_begin(b, NGNFS_MSG_CMPXCHG, 1, 0);
	ngnfs_msg_put_zeros(b, sizeof(struct ngnfs_msg_cmpxchg) + NGNFS_BLOCK_SIZE - 8);
	assert_int_equal(ngnfs_msg_finish(b), 0);
	*length = b->length;
}

static void bad_read_incoherent_count_long(struct ngnfs_buffer *b, size_t *length)
{
	const uint64_t blknos[2] = { 1, 2 };

	assert_int_equal(ngnfs_encode_read_incoherent(b, 1, blknos, 2), 0);
	put_le32(b->data + PAYLOAD(struct ngnfs_msg_read_incoherent, count), 3);
	refresh_crc(b->data, b->length);
	*length = b->length;
}

static void bad_incoherent_reply_status(struct ngnfs_buffer *b, size_t *length)
{
	const uint64_t blknos[1] = { 1 };
	const uint64_t versions[1] = { 1 };
	const int statuses[1] = { 0 };
	const uint8_t *const datas[1] = { block_a };

	assert_int_equal(
	    ngnfs_encode_read_incoherent_reply(b, 1, 0, blknos, versions, statuses, datas, 1), 0);
	put_le32(b->data + NGNFS_MSG_HEADER_SIZE + sizeof(struct ngnfs_msg_read_incoherent) +
		     offsetof(struct ngnfs_msg_incoherent_block, status),
		 12345);
	refresh_crc(b->data, b->length);
	*length = b->length;
}

static void bad_incoherent_reply_count_short(struct ngnfs_buffer *b, size_t *length)
{
	const uint64_t blknos[2] = { 1, 2 };
	const uint64_t versions[2] = { 1, 2 };
	const int statuses[2] = { 0, -EIO };
	const uint8_t *const datas[2] = { block_a, NULL };

	assert_int_equal(
	    ngnfs_encode_read_incoherent_reply(b, 1, 0, blknos, versions, statuses, datas, 2), 0);
	put_le32(b->data + PAYLOAD(struct ngnfs_msg_read_incoherent, count), 1);
	refresh_crc(b->data, b->length);
	*length = b->length;
}

static void bad_statfs_reply_short(struct ngnfs_buffer *b, size_t *length)
{
	assert_int_equal(ngnfs_encode_statfs_reply(
			     b, 1, 0, &(struct ngnfs_statfs_figures){ 1, 2, 3, 4, 5, 6, 7 }),
			 0);
	put_le32(b->data + HEADER_FIELD(payload_length), sizeof(struct ngnfs_msg_statfs_reply) - 8);
	b->length -= 8;
	refresh_crc(b->data, b->length);
	*length = b->length;
}

static void bad_error_text_long(struct ngnfs_buffer *b, size_t *length)
{
	assert_int_equal(ngnfs_encode_error(b, 1, -EIO, "abc"), 0);
	put_le16(b->data + PAYLOAD(struct ngnfs_msg_error, text_length), 4);
	refresh_crc(b->data, b->length);
	*length = b->length;
}

static void bad_error_text_over_max(struct ngnfs_buffer *b, size_t *length)
{
	ngnfs_msg_begin(b, NGNFS_MSG_ERROR, 1, -EIO);
	{
		struct ngnfs_msg_error error = { .text_length = htole16(NGNFS_MSG_MAX_TEXT + 1) };

		ngnfs_msg_put(b, &error, sizeof(error));
	}
	for (int i = 0; i < NGNFS_MSG_MAX_TEXT + 1; i++)
		ngnfs_msg_put(b, "x", 1);
	assert_int_equal(ngnfs_msg_finish(b), 0);
	*length = b->length;
}

static void bad_error_text_nul(struct ngnfs_buffer *b, size_t *length)
{
	assert_int_equal(ngnfs_encode_error(b, 1, -EIO, "abc"), 0);
	b->data[b->length - 2] = '\0';
	refresh_crc(b->data, b->length);
	*length = b->length;
}

static void bad_error_without_status(struct ngnfs_buffer *b, size_t *length)
{
	assert_int_equal(ngnfs_encode_error(b, 1, -EIO, "abc"), 0);
	put_le32(b->data + HEADER_FIELD(status), 0);
	refresh_crc(b->data, b->length);
	*length = b->length;
}

struct malformed_case {
	const char *name;
	void (*build)(struct ngnfs_buffer *buffer, size_t *length);
	int expected;
};

#define CASE(builder, errno_value)                                                                 \
	{                                                                                          \
#builder, builder, errno_value                                                     \
	}

static const struct malformed_case malformed_cases[] = {
	CASE(bad_empty, -EBADMSG),
	CASE(bad_short_header, -EBADMSG),
	CASE(bad_short_payload, -EBADMSG),
	CASE(bad_trailing_byte, -EBADMSG),
	CASE(bad_oversized_length, -EBADMSG),
	CASE(bad_huge_length, -EBADMSG),
	CASE(bad_magic, -EBADMSG),
	CASE(bad_version, -EPROTONOSUPPORT),
	CASE(bad_version_zero, -EPROTONOSUPPORT),
	CASE(bad_crc_payload, -EBADMSG),
	CASE(bad_crc_field, -EBADMSG),
	CASE(bad_request_id_corrupted, -EBADMSG),
	CASE(bad_type_zero, -EPROTO),
	CASE(bad_type_unknown, -EPROTO),
	CASE(bad_type_huge, -EPROTO),
	CASE(bad_header_reserved, -EPROTO),
	CASE(bad_request_with_status, -EPROTO),
	CASE(bad_positive_status, -EPROTO),
	CASE(bad_status_not_errno, -EPROTO),
	CASE(bad_header_only_with_payload, -EBADMSG),
	CASE(bad_hello_truncated, -EBADMSG),
	CASE(bad_hello_too_long, -EBADMSG),
	CASE(bad_hello_flags, -EPROTO),
	CASE(bad_hello_reserved, -EPROTO),
	CASE(bad_format_index, -EPROTO),
	CASE(bad_format_count_zero, -EPROTO),
	CASE(bad_get_count_too_big_for_payload, -EBADMSG),
	CASE(bad_get_count_too_small_for_payload, -EBADMSG),
	CASE(bad_get_count_over_max, -EPROTO),
	CASE(bad_get_count_overflow, -EPROTO),
	CASE(bad_get_count_zero, -EPROTO),
	CASE(bad_get_access, -EPROTO),
	CASE(bad_get_access_none, -EPROTO),
	CASE(bad_get_entry_reserved, -EPROTO),
	CASE(bad_grant_access, -EPROTO),
	CASE(bad_grant_data_missing, -EBADMSG),
	CASE(bad_grant_data_unflagged, -EBADMSG),
	CASE(bad_grant_flags, -EPROTO),
	CASE(bad_revoke_access, -EPROTO),
	CASE(bad_revoke_request_id, -EPROTO),
	CASE(bad_release_access, -EPROTO),
	CASE(bad_release_count_short, -EBADMSG),
	CASE(bad_write_phase, -EPROTO),
	CASE(bad_write_phase_high, -EPROTO),
	CASE(bad_write_release_access, -EPROTO),
	CASE(bad_write_flags, -EPROTO),
	CASE(bad_write_block_count_long, -EBADMSG),
	CASE(bad_write_block_count_short, -EBADMSG),
	CASE(bad_write_block_count_over_max, -EPROTO),
	CASE(bad_write_free_count_over_max, -EPROTO),
	CASE(bad_write_participants_over_max, -EPROTO),
	CASE(bad_write_participants_mismatch, -EBADMSG),
	CASE(bad_write_padding, -EPROTO),
	CASE(bad_write_stage_no_participants, -EPROTO),
	CASE(bad_write_frame_count_zero, -EPROTO),
	CASE(bad_write_frame_count_high, -EPROTO),
	CASE(bad_write_frame_index, -EPROTO),
	CASE(bad_write_stage_frames, -EPROTO),
	CASE(bad_write_reserved, -EPROTO),
	CASE(bad_versions_count_long, -EBADMSG),
	CASE(bad_alloc_reply_count_over_max, -EPROTO),
	CASE(bad_alloc_reply_without_epoch, -EPROTO),
	CASE(bad_resolve_outcome, -EPROTO),
	CASE(bad_resolve_reply_outcome, -EPROTO),
	CASE(bad_alloc_count_zero, -EPROTO),
	CASE(bad_alloc_count_over_max, -EPROTO),
	CASE(bad_cmpxchg_short_block, -EBADMSG),
	CASE(bad_read_incoherent_count_long, -EBADMSG),
	CASE(bad_incoherent_reply_status, -EPROTO),
	CASE(bad_incoherent_reply_count_short, -EBADMSG),
	CASE(bad_statfs_reply_short, -EBADMSG),
	CASE(bad_error_text_long, -EBADMSG),
	CASE(bad_error_text_over_max, -EPROTO),
	CASE(bad_error_text_nul, -EPROTO),
	CASE(bad_error_without_status, -EPROTO),
};

static void test_malformed_frames_are_rejected(void **state)
{
	struct ngnfs_buffer buffer;
	int failures = 0;

	(void)state;
	ngnfs_buffer_init(&buffer);
	for (size_t i = 0; i < sizeof(malformed_cases) / sizeof(malformed_cases[0]); i++) {
		const struct malformed_case *c = &malformed_cases[i];
		struct ngnfs_msg msg;
		size_t length = 0;
		const char *why;
		int ret;

		ngnfs_buffer_reset(&buffer);
		c->build(&buffer, &length);
		ret = decode_copy(buffer.data, length, &msg, &why, NULL);
		if (ret != c->expected) {
			print_error("%s: expected %d (%s), got %d (%s)\n", c->name, c->expected,
				    strerror(-c->expected), ret, why ? why : "no reason");
			failures++;
		} else if (!why || !*why) {
			print_error("%s: rejected with %d but no reason\n", c->name, ret);
			failures++;
		} else if (msg.type != 0) {
			print_error("%s: rejected but left a decoded type behind\n", c->name);
			failures++;
		}
		/* a header the stream reader accepts must agree with decode's verdict on length */
		if (length >= NGNFS_MSG_HEADER_SIZE) {
			size_t frame_length;
			int header_ret = ngnfs_msg_check_header(buffer.data, &frame_length, &why);

			if (header_ret && header_ret != ret) {
				print_error("%s: check_header says %d, decode %d\n", c->name,
					    header_ret, ret);
				failures++;
			}
		}
	}
	ngnfs_buffer_free(&buffer);
	if (failures)
		fail_msg("%d malformed frame(s) not rejected as expected", failures);
}

/* Build one valid frame of every type into buffer (one frame per call). */
static void encode_example(struct ngnfs_buffer *b, unsigned int type)
{
	const uint16_t participants[3] = { 1, 2, 3 };
	const uint64_t blknos[2] = { 1, 2 };
	const uint64_t versions[2] = { 3, 4 };
	const int statuses[2] = { 0, -EIO };
	const uint8_t *const datas[2] = { block_a, NULL };
	struct ngnfs_block_request blocks[2] = {
		{ .blkno = 1, .version = 2, .access = NGNFS_ACCESS_READ, .data = block_a },
		{ .blkno = 3, .version = 4, .access = NGNFS_ACCESS_WRITE, .data = block_b },
	};
	struct ngnfs_block_request releases[2] = {
		{ .blkno = 1, .access = NGNFS_ACCESS_NONE },
		{ .blkno = 3, .access = NGNFS_ACCESS_READ },
	};
	int ret = -EINVAL;

	switch (type) {
	case NGNFS_MSG_HELLO:
		ret = ngnfs_encode_hello(b, 1, fs_id, 2, NGNFS_HELLO_FORMAT);
		break;
	case NGNFS_MSG_HELLO_REPLY:
		ret = ngnfs_encode_hello_reply(b, 1, 0, fs_id, 2, 1, 3, 0, 4);
		break;
	case NGNFS_MSG_FORMAT:
		ret = ngnfs_encode_format(b, 1, fs_id, 0, 1);
		break;
	case NGNFS_MSG_FORMAT_REPLY:
	case NGNFS_MSG_RELEASE_REPLY:
		ret = ngnfs_encode_status_reply(b, type, 1, 0);
		break;
	case NGNFS_MSG_GET:
		ret = ngnfs_encode_get(b, 1, blocks, 2);
		break;
	case NGNFS_MSG_GRANT:
		ret = ngnfs_encode_grant(b, 1, 0, 1, 2, NGNFS_ACCESS_READ, block_a);
		break;
	case NGNFS_MSG_REVOKE:
		ret = ngnfs_encode_revoke(b, 1, NGNFS_ACCESS_NONE);
		break;
	case NGNFS_MSG_RELEASE:
		ret = ngnfs_encode_release(b, 1, releases, 2);
		break;
	case NGNFS_MSG_WRITE:
		ret = ngnfs_encode_write(b, 1, 2, NGNFS_WRITE_STAGE, 0, 0, participants, 3, blocks,
					 2, blknos, 2);
		break;
	case NGNFS_MSG_WRITE_REPLY:
	case NGNFS_MSG_COMMIT_REPLY:
		ret = ngnfs_encode_versions_reply(b, type, 1, 0, 2, blknos, versions, 2);
		break;
	case NGNFS_MSG_ALLOC_REPLY:
		ret = ngnfs_encode_alloc_reply(b, 1, 0, 2, blknos, versions, 2);
		break;
	case NGNFS_MSG_COMMIT:
		ret = ngnfs_encode_commit(b, 1, 2);
		break;
	case NGNFS_MSG_RESOLVE:
	case NGNFS_MSG_RESOLVE_REPLY:
		ret = ngnfs_encode_resolve(b, type, 1, 0, 2, NGNFS_SET_COMMITTED);
		break;
	case NGNFS_MSG_ALLOC:
		ret = ngnfs_encode_alloc(b, 1, 2);
		break;
	case NGNFS_MSG_CMPXCHG:
		ret = ngnfs_encode_cmpxchg(b, 1, 2, 3, block_a);
		break;
	case NGNFS_MSG_CMPXCHG_REPLY:
		ret = ngnfs_encode_cmpxchg_reply(b, 1, 0, 2, 3);
		break;
	case NGNFS_MSG_READ_INCOHERENT:
		ret = ngnfs_encode_read_incoherent(b, 1, blknos, 2);
		break;
	case NGNFS_MSG_READ_INCOHERENT_REPLY:
		ret = ngnfs_encode_read_incoherent_reply(b, 1, 0, blknos, versions, statuses, datas,
							 2);
		break;
	case NGNFS_MSG_STATFS:
		ret = ngnfs_encode_statfs(b, 1);
		break;
	case NGNFS_MSG_STATFS_REPLY:
		ret = ngnfs_encode_statfs_reply(
		    b, 1, 0, &(struct ngnfs_statfs_figures){ 1, 2, 3, 4, 5, 6, 7 });
		break;
	case NGNFS_MSG_ERROR:
		ret = ngnfs_encode_error(b, 1, -EIO, "example");
		break;
	}
	if (ret)
		fail_msg("encoding an example %s: %d", ngnfs_msg_type_name(type), ret);
}

/* Every proper prefix of every valid frame is refused; no prefix is read past. */
static void test_every_truncation_is_rejected(void **state)
{
	struct ngnfs_buffer buffer;

	(void)state;
	ngnfs_buffer_init(&buffer);
	for (unsigned int type = 1; type < NGNFS_MSG_TYPE_COUNT; type++) {
		ngnfs_buffer_reset(&buffer);
		encode_example(&buffer, type);
		for (size_t length = 0; length < buffer.length; length++) {
			struct ngnfs_msg msg;
			const char *why;
			int ret = decode_copy(buffer.data, length, &msg, &why, NULL);

			if (ret != -EBADMSG)
				fail_msg("%s truncated to %zu of %zu bytes: expected %d, got %d",
					 ngnfs_msg_type_name(type), length, buffer.length, -EBADMSG,
					 ret);
		}
	}
	ngnfs_buffer_free(&buffer);
}

/* crc32c detects every single-bit error: flip each bit of the small frames. */
static void test_every_bit_flip_is_rejected(void **state)
{
	struct ngnfs_buffer buffer;

	(void)state;
	ngnfs_buffer_init(&buffer);
	for (unsigned int type = 1; type < NGNFS_MSG_TYPE_COUNT; type++) {
		ngnfs_buffer_reset(&buffer);
		encode_example(&buffer, type);
		if (buffer.length > 256)
			continue; /* frames with blocks: the header and counts are covered above */
		for (size_t bit = 0; bit < buffer.length * 8; bit++) {
			struct ngnfs_msg msg;
			const char *why;
			int ret;

			buffer.data[bit / 8] ^= (uint8_t)(1U << (bit % 8));
			ret = decode_copy(buffer.data, buffer.length, &msg, &why, NULL);
			buffer.data[bit / 8] ^= (uint8_t)(1U << (bit % 8));
			if (ret == 0)
				fail_msg("%s with bit %zu flipped was accepted",
					 ngnfs_msg_type_name(type), bit);
		}
	}
	ngnfs_buffer_free(&buffer);
}

static void test_names(void **state)
{
	(void)state;
	assert_string_equal(ngnfs_msg_type_name(NGNFS_MSG_GET), "GET");
	assert_string_equal(ngnfs_msg_type_name(NGNFS_MSG_READ_INCOHERENT_REPLY),
			    "READ_INCOHERENT_REPLY");
	assert_string_equal(ngnfs_msg_type_name(0), "unknown");
	assert_string_equal(ngnfs_msg_type_name(NGNFS_MSG_TYPE_COUNT), "unknown");
	assert_string_equal(ngnfs_msg_type_name(0xffffffffU), "unknown");
	for (unsigned int type = 1; type < NGNFS_MSG_TYPE_COUNT; type++)
		assert_string_not_equal(ngnfs_msg_type_name(type), "unknown");
	assert_string_equal(ngnfs_access_name(NGNFS_ACCESS_WRITE), "write");
	assert_string_equal(ngnfs_access_name(9), "unknown");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_crc32c_is_standard_and_continues),
		cmocka_unit_test(test_hello_round_trip),
		cmocka_unit_test(test_hello_reply_round_trip),
		cmocka_unit_test(test_format_and_status_replies_round_trip),
		cmocka_unit_test(test_get_round_trip),
		cmocka_unit_test(test_grant_round_trip),
		cmocka_unit_test(test_revoke_and_release_round_trip),
		cmocka_unit_test(test_write_round_trip),
		cmocka_unit_test(test_largest_write_fits),
		cmocka_unit_test(test_versions_replies_round_trip),
		cmocka_unit_test(test_commit_resolve_alloc_round_trip),
		cmocka_unit_test(test_repair_messages_round_trip),
		cmocka_unit_test(test_statfs_and_error_round_trip),
		cmocka_unit_test(test_frames_back_to_back_and_unaligned),
		cmocka_unit_test(test_oversized_frame_is_sticky_emsgsize),
		cmocka_unit_test(test_encoders_refuse_what_decoders_reject),
		cmocka_unit_test(test_malformed_frames_are_rejected),
		cmocka_unit_test(test_every_truncation_is_rejected),
		cmocka_unit_test(test_every_bit_flip_is_rejected),
		cmocka_unit_test(test_names),
	};

	fill_blocks();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
