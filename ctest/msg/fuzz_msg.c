/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * libFuzzer target for the protocol codec.
 *
 * Feeds arbitrary bytes to the receive path exactly as blockd and the
 * client use it (ngnfs_msg_check_header() on the first 32 bytes, then
 * ngnfs_msg_decode() on the frame the header announces) and also to
 * ngnfs_msg_decode() with the raw input length, which exercises the
 * length-mismatch paths.  Built with ASan and UBSan, so any over-read,
 * overflow or misaligned access is a crash.
 *
 * When a frame decodes, it is re-encoded with the typed encoder from the
 * decoded fields and must come out byte for byte identical: the decoder is
 * strict (reserved fields, padding and flags must be zero or known), so
 * every accepted frame has exactly one encoding, and a difference means
 * the decoder dropped or misread a field, or the encoder and decoder
 * disagree about the layout.  Every array element is read through the
 * public accessors on the way, so they are fuzzed too.
 *
 * XXX:
 *  - HELLO and HELLO_REPLY carry a protocol_version field that the
 *    encoders always set to NGNFS_PROTOCOL_VERSION; frames with another
 *    value are compared field by field only.
 */

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "msg.h"

static void mismatch(const char *what, const struct ngnfs_msg *msg)
{
	fprintf(stderr, "fuzz_msg: %s for a decoded %s frame\n", what,
		ngnfs_msg_type_name(msg->type));
	abort();
}

/* Re-encode a decoded message; returns the typed encoder's result. */
static int reencode(struct ngnfs_buffer *out, const struct ngnfs_msg *msg)
{
	static struct ngnfs_block_request blocks[NGNFS_MSG_MAX_BLOCKS];
	static uint64_t blknos[NGNFS_MSG_MAX_BLOCKS];
	static uint64_t versions[NGNFS_MSG_MAX_BLOCKS];
	static int statuses[NGNFS_MSG_MAX_BLOCKS];
	static const uint8_t *datas[NGNFS_MSG_MAX_BLOCKS];
	static uint16_t participants[NGNFS_MSG_MAX_PARTICIPANTS];
	static char text[NGNFS_MSG_MAX_TEXT + 1];

	switch (msg->type) {
	case NGNFS_MSG_HELLO:
		return ngnfs_encode_hello(out, msg->request_id, msg->hello.fs_id,
					  msg->hello.client_id, msg->hello.flags);
	case NGNFS_MSG_HELLO_REPLY:
		return ngnfs_encode_hello_reply(
		    out, msg->request_id, msg->status, msg->hello_reply.fs_id,
		    msg->hello_reply.server_instance, msg->hello_reply.flags,
		    msg->hello_reply.grace_ms, msg->hello_reply.device_index,
		    msg->hello_reply.device_count);
	case NGNFS_MSG_FORMAT:
		return ngnfs_encode_format(out, msg->request_id, msg->format.fs_id,
					   msg->format.device_index, msg->format.device_count);
	case NGNFS_MSG_FORMAT_REPLY:
	case NGNFS_MSG_RELEASE_REPLY:
		return ngnfs_encode_status_reply(out, msg->type, msg->request_id, msg->status);
	case NGNFS_MSG_GET:
		for (uint32_t i = 0; i < msg->get.count; i++) {
			ngnfs_msg_get_entry(msg, i, &blocks[i].blkno, &blocks[i].version,
					    &blocks[i].access);
			blocks[i].data = NULL;
		}
		return ngnfs_encode_get(out, msg->request_id, blocks, msg->get.count);
	case NGNFS_MSG_GRANT:
		if (!!msg->grant.data != !!(msg->grant.flags & NGNFS_GRANT_DATA))
			mismatch("grant data pointer disagrees with its flag", msg);
		return ngnfs_encode_grant(out, msg->request_id, msg->status, msg->grant.blkno,
					  msg->grant.version, msg->grant.access, msg->grant.data);
	case NGNFS_MSG_REVOKE:
		return ngnfs_encode_revoke(out, msg->revoke.blkno, msg->revoke.access);
	case NGNFS_MSG_RELEASE:
		for (uint32_t i = 0; i < msg->release.count; i++) {
			ngnfs_msg_release_entry(msg, i, &blocks[i].blkno, &blocks[i].access);
			blocks[i].version = 0;
			blocks[i].data = NULL;
		}
		return ngnfs_encode_release(out, msg->request_id, blocks, msg->release.count);
	case NGNFS_MSG_WRITE:
		for (uint32_t i = 0; i < msg->write.participant_count; i++)
			participants[i] = ngnfs_msg_write_participant(msg, i);
		for (uint32_t i = 0; i < msg->write.block_count; i++) {
			blocks[i].data =
			    ngnfs_msg_write_block(msg, i, &blocks[i].blkno, &blocks[i].version);
			blocks[i].access = 0;
		}
		for (uint32_t i = 0; i < msg->write.free_count; i++)
			blknos[i] = ngnfs_msg_write_free(msg, i);
		return ngnfs_encode_write_frame(
		    out, msg->request_id, msg->write.set_id, msg->write.phase, msg->write.flags,
		    msg->write.release_access, participants, msg->write.participant_count, blocks,
		    msg->write.block_count, blknos, msg->write.free_count, msg->write.frame_index,
		    msg->write.frame_count);
	case NGNFS_MSG_WRITE_REPLY:
	case NGNFS_MSG_COMMIT_REPLY:
	case NGNFS_MSG_ALLOC_REPLY:
		for (uint32_t i = 0; i < msg->versions.count; i++)
			ngnfs_msg_version_entry(msg, i, &blknos[i], &versions[i]);
		if (msg->type == NGNFS_MSG_ALLOC_REPLY)
			return ngnfs_encode_alloc_reply(out, msg->request_id, msg->status,
							msg->versions.session_epoch, blknos,
							versions, msg->versions.count);
		return ngnfs_encode_versions_reply(out, msg->type, msg->request_id, msg->status,
						   msg->versions.set_id, blknos, versions,
						   msg->versions.count);
	case NGNFS_MSG_COMMIT:
		return ngnfs_encode_commit(out, msg->request_id, msg->commit.set_id);
	case NGNFS_MSG_RESOLVE:
	case NGNFS_MSG_RESOLVE_REPLY:
		return ngnfs_encode_resolve(out, msg->type, msg->request_id, msg->status,
					    msg->resolve.set_id, msg->resolve.outcome);
	case NGNFS_MSG_ALLOC:
		return ngnfs_encode_alloc(out, msg->request_id, msg->alloc.count);
	case NGNFS_MSG_CMPXCHG:
		return ngnfs_encode_cmpxchg(out, msg->request_id, msg->cmpxchg.blkno,
					    msg->cmpxchg.expected_version, msg->cmpxchg.data);
	case NGNFS_MSG_CMPXCHG_REPLY:
		return ngnfs_encode_cmpxchg_reply(out, msg->request_id, msg->status,
						  msg->cmpxchg_reply.blkno,
						  msg->cmpxchg_reply.version);
	case NGNFS_MSG_READ_INCOHERENT:
		for (uint32_t i = 0; i < msg->read_incoherent.count; i++)
			blknos[i] = ngnfs_msg_read_incoherent_blkno(msg, i);
		return ngnfs_encode_read_incoherent(out, msg->request_id, blknos,
						    msg->read_incoherent.count);
	case NGNFS_MSG_READ_INCOHERENT_REPLY:
		for (uint32_t i = 0; i < msg->read_incoherent_reply.count; i++)
			datas[i] = ngnfs_msg_incoherent_block(msg, i, &blknos[i], &versions[i],
							      &statuses[i]);
		return ngnfs_encode_read_incoherent_reply(out, msg->request_id, msg->status, blknos,
							  versions, statuses, datas,
							  msg->read_incoherent_reply.count);
	case NGNFS_MSG_STATFS:
		return ngnfs_encode_statfs(out, msg->request_id);
	case NGNFS_MSG_STATFS_REPLY:
		return ngnfs_encode_statfs_reply(out, msg->request_id, msg->status,
						 &msg->statfs_reply);
	case NGNFS_MSG_ERROR:
		if (msg->error.text_length > NGNFS_MSG_MAX_TEXT)
			mismatch("error text over the maximum", msg);
		memcpy(text, msg->error.text, msg->error.text_length);
		text[msg->error.text_length] = '\0';
		return ngnfs_encode_error(out, msg->request_id, msg->status, text);
	default:
		mismatch("decoder accepted an unknown type", msg);
	}
	return -EINVAL;
}

static void check_frame(const uint8_t *frame, size_t length)
{
	static struct ngnfs_buffer out;
	struct ngnfs_msg msg;
	const char *why = NULL;
	int ret;

	ret = ngnfs_msg_decode(frame, length, &msg, &why);
	if (ret) {
		if (ret != -EBADMSG && ret != -EPROTO && ret != -EPROTONOSUPPORT)
			abort(); /* the contract names exactly these */
		if (!why || !*why)
			abort();
		return;
	}
	ngnfs_buffer_reset(&out);
	ret = reencode(&out, &msg);
	if (ret) {
		fprintf(stderr, "fuzz_msg: re-encoding failed: %d\n", ret);
		mismatch("the encoder refused what the decoder accepted", &msg);
	}
	if ((msg.type == NGNFS_MSG_HELLO && msg.hello.protocol_version != NGNFS_PROTOCOL_VERSION) ||
	    (msg.type == NGNFS_MSG_HELLO_REPLY &&
	     msg.hello_reply.protocol_version != NGNFS_PROTOCOL_VERSION))
		return;
	if (out.length != length || memcmp(out.data, frame, length) != 0)
		mismatch("re-encoding differs from the frame", &msg);
}

/*
 * A random mutation almost never keeps the crc right, so without help the
 * fuzzer would only ever test the crc check.  The copy with its crc
 * recomputed reaches the type-specific checks; the exact-size heap copy
 * also makes any over-read an ASan report.
 */
static void check_with_fixed_crc(const uint8_t *data, size_t size)
{
	struct ngnfs_msg_header header;
	uint8_t *copy;
	uint32_t crc;

	if (size < NGNFS_MSG_HEADER_SIZE)
		return;
	copy = malloc(size);
	if (!copy)
		abort();
	memcpy(copy, data, size);
	memcpy(&header, copy, sizeof(header));
	header.crc = 0;
	crc = ngnfs_crc32c(ngnfs_crc32c(0, &header, sizeof(header)), copy + sizeof(header),
			   size - sizeof(header));
	header.crc = htole32(crc);
	memcpy(copy, &header, sizeof(header));
	check_frame(copy, size);
	free(copy);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t frame_length = 0;
	const char *why;

	/* as a stream receiver: header first, then the frame it announces */
	if (size >= NGNFS_MSG_HEADER_SIZE &&
	    ngnfs_msg_check_header(data, &frame_length, &why) == 0 && frame_length <= size)
		check_frame(data, frame_length);
	/* and with whatever length arrived */
	if (size != frame_length)
		check_frame(data, size);
	check_with_fixed_crc(data, size);
	return 0;
}
