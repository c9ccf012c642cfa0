/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The protocol codec: the only code that turns format-msg.h structures
 * into bytes and back (interface in msg.h).
 *
 * Decoding is written for hostile input.  Every fixed structure is copied
 * out of the frame with memcpy, so a frame at any address is fine and no
 * field is ever read through a misaligned pointer; every count is bounded
 * by its protocol maximum before any arithmetic, so the expected payload
 * length (computed in 64 bits) cannot overflow; the payload must be
 * exactly that long, so trailing garbage is as wrong as truncation.
 * Enumerated fields, flags, reserved fields and padding are checked too:
 * a field the decoder lets through is a field the receiver may trust, and
 * reserved bits that must be zero are what lets a later protocol version
 * give them a meaning.  Each rejection comes with a static string naming
 * the message type and the field, for the ERROR reply and the log.
 *
 * Encoding appends to a growable buffer.  An allocation failure or a
 * frame larger than NGNFS_MSG_MAX_PAYLOAD sets a sticky error that
 * ngnfs_msg_finish() returns, so encoders need not check every put; the
 * typed encoders refuse arguments a decoder would reject (-EINVAL) before
 * writing anything, so a peer never receives a frame we could have known
 * it would refuse.
 *
 * crc32c: ngnfs_crc32c(seed, ...) is the standard CRC-32C (Castagnoli,
 * reflected, initial value and final xor 0xffffffff; check value of
 * "123456789" is 0xe3069283) continued from seed, with seed 0 starting a
 * new checksum, as zlib's crc32() does for CRC-32.  ISA-L's crc32_iscsi()
 * applies neither the initial inversion nor the final xor, so we invert
 * around it; that way a continued checksum over two pieces equals the
 * checksum of the whole, and the values match every other CRC-32C
 * implementation (Linux, RocksDB, Python's crc32c) for debugging.
 *
 * XXX:
 *  - Flags and reserved fields are strict: a newer peer that sets a new
 *    flag must bump the protocol version.
 *  - Semantic checks (fs id, grants, set state, duplicate blocks) are the
 *    receiver's, not the codec's.
 */

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include <isa-l.h>

#include "msg.h"

/* The wire structures have the same size on every compiler. */
_Static_assert(sizeof(struct ngnfs_msg_header) == 32, "header is 32 bytes");
_Static_assert(sizeof(struct ngnfs_msg_hello) == 32, "hello");
_Static_assert(sizeof(struct ngnfs_msg_hello_reply) == 40, "hello_reply");
_Static_assert(sizeof(struct ngnfs_msg_format) == 24, "format");
_Static_assert(sizeof(struct ngnfs_msg_get) == 8, "get");
_Static_assert(sizeof(struct ngnfs_msg_get_entry) == 24, "get_entry");
_Static_assert(sizeof(struct ngnfs_msg_grant) == 24, "grant");
_Static_assert(sizeof(struct ngnfs_msg_revoke) == 16, "revoke");
_Static_assert(sizeof(struct ngnfs_msg_release) == 8, "release");
_Static_assert(sizeof(struct ngnfs_msg_release_entry) == 16, "release_entry");
_Static_assert(sizeof(struct ngnfs_msg_write) == 32, "write");
_Static_assert(sizeof(struct ngnfs_msg_write_block) == 16, "write_block");
_Static_assert(sizeof(struct ngnfs_msg_write_reply) == 16, "write_reply");
_Static_assert(sizeof(struct ngnfs_msg_version_entry) == 16, "version_entry");
_Static_assert(sizeof(struct ngnfs_msg_commit) == 8, "commit");
_Static_assert(sizeof(struct ngnfs_msg_resolve) == 16, "resolve");
_Static_assert(sizeof(struct ngnfs_msg_resolve_reply) == 16, "resolve_reply");
_Static_assert(sizeof(struct ngnfs_msg_alloc) == 8, "alloc");
_Static_assert(sizeof(struct ngnfs_msg_alloc_reply) == 8, "alloc_reply");
_Static_assert(sizeof(struct ngnfs_msg_cmpxchg) == 16, "cmpxchg");
_Static_assert(sizeof(struct ngnfs_msg_cmpxchg_reply) == 16, "cmpxchg_reply");
_Static_assert(sizeof(struct ngnfs_msg_read_incoherent) == 8, "read_incoherent");
_Static_assert(sizeof(struct ngnfs_msg_incoherent_block) == 24, "incoherent_block");
_Static_assert(sizeof(struct ngnfs_msg_statfs_reply) == 56, "statfs_reply");
_Static_assert(sizeof(struct ngnfs_msg_error) == 8, "error");
/* every array element keeps the next one 8-byte aligned within the payload */
_Static_assert(NGNFS_WRITE_BLOCK_STRIDE % 8 == 0, "write block stride");
_Static_assert(NGNFS_INCOHERENT_BLOCK_STRIDE % 8 == 0, "incoherent block stride");
/* the largest WRITE fits the payload bound */
_Static_assert(sizeof(struct ngnfs_msg_write) + NGNFS_MSG_MAX_PARTICIPANTS * 2 +
		       (uint64_t)NGNFS_MSG_MAX_BLOCKS * NGNFS_WRITE_BLOCK_STRIDE +
		       NGNFS_MSG_MAX_BLOCKS * 8 <=
		   NGNFS_MSG_MAX_PAYLOAD,
	       "largest WRITE fits");
_Static_assert(sizeof(struct ngnfs_msg_read_incoherent) +
		       (uint64_t)NGNFS_MSG_MAX_BLOCKS * NGNFS_INCOHERENT_BLOCK_STRIDE <=
		   NGNFS_MSG_MAX_PAYLOAD,
	       "largest READ_INCOHERENT_REPLY fits");

/* A reply status is zero or a negative errno. */
#define NGNFS_MAX_ERRNO 4095

#define HELLO_KNOWN_FLAGS	(NGNFS_HELLO_FORMAT | NGNFS_HELLO_RECLAIM | NGNFS_HELLO_PEER)
#define HELLO_REPLY_KNOWN_FLAGS NGNFS_HELLO_REPLY_FORMATTED
#define GRANT_KNOWN_FLAGS	NGNFS_GRANT_DATA
#define WRITE_KNOWN_FLAGS	NGNFS_WRITE_RELEASE

uint32_t ngnfs_crc32c(uint32_t seed, const void *bytes, size_t length)
{
	const unsigned char *next = bytes;
	uint32_t crc = ~seed;

	/* crc32_iscsi takes an int length */
	while (length > 0) {
		int piece = length > (size_t)INT_MAX ? INT_MAX : (int)length;

		crc = crc32_iscsi((unsigned char *)next, piece, crc);
		next += piece;
		length -= (size_t)piece;
	}
	return ~crc;
}

/* ---- buffers -------------------------------------------------------- */

void ngnfs_buffer_init(struct ngnfs_buffer *buffer)
{
	memset(buffer, 0, sizeof(*buffer));
}

void ngnfs_buffer_free(struct ngnfs_buffer *buffer)
{
	free(buffer->data);
	memset(buffer, 0, sizeof(*buffer));
}

void ngnfs_buffer_reset(struct ngnfs_buffer *buffer)
{
	buffer->length = 0;
	buffer->frame_start = 0;
	buffer->error = 0;
}

static void set_error(struct ngnfs_buffer *buffer, int error)
{
	if (!buffer->error)
		buffer->error = error;
}

/* Room for length more bytes, or a sticky error. */
static bool reserve(struct ngnfs_buffer *buffer, size_t length)
{
	size_t needed;
	size_t capacity;
	uint8_t *data;

	if (buffer->error)
		return false;
	if (length > SIZE_MAX - buffer->length) {
		set_error(buffer, -ENOMEM);
		return false;
	}
	needed = buffer->length + length;
	if (needed <= buffer->capacity)
		return true;
	capacity = buffer->capacity ? buffer->capacity : 4096;
	while (capacity < needed) {
		if (capacity > SIZE_MAX / 2) {
			capacity = needed;
			break;
		}
		capacity *= 2;
	}
	data = realloc(buffer->data, capacity);
	if (!data) {
		set_error(buffer, -ENOMEM);
		return false;
	}
	buffer->data = data;
	buffer->capacity = capacity;
	return true;
}

/* The frame being built may not outgrow the protocol's payload bound. */
static bool frame_has_room(struct ngnfs_buffer *buffer, size_t length)
{
	size_t payload = buffer->length - buffer->frame_start - NGNFS_MSG_HEADER_SIZE;

	if (buffer->error)
		return false;
	if (length > NGNFS_MSG_MAX_PAYLOAD || payload + length > NGNFS_MSG_MAX_PAYLOAD) {
		set_error(buffer, -EMSGSIZE);
		return false;
	}
	return true;
}

void ngnfs_msg_begin(struct ngnfs_buffer *buffer, enum ngnfs_msg_type type, uint64_t request_id,
		     int status)
{
	struct ngnfs_msg_header header = {
		.magic = htole32(NGNFS_MSG_MAGIC),
		.version = htole16(NGNFS_PROTOCOL_VERSION),
		.type = htole16((uint16_t)type),
		.request_id = htole64(request_id),
		.status = htole32((uint32_t)status),
	};

	if (!reserve(buffer, sizeof(header)))
		return;
	buffer->frame_start = buffer->length;
	memcpy(buffer->data + buffer->length, &header, sizeof(header));
	buffer->length += sizeof(header);
}

void ngnfs_msg_put(struct ngnfs_buffer *buffer, const void *bytes, size_t length)
{
	if (!frame_has_room(buffer, length) || !reserve(buffer, length))
		return;
	if (length)
		memcpy(buffer->data + buffer->length, bytes, length);
	buffer->length += length;
}

void ngnfs_msg_put_zeros(struct ngnfs_buffer *buffer, size_t length)
{
	if (!frame_has_room(buffer, length) || !reserve(buffer, length))
		return;
	memset(buffer->data + buffer->length, 0, length);
	buffer->length += length;
}

/*
 * On failure the unfinished frame is cut off again, so the buffer never
 * holds a frame without its length and crc; earlier frames stay intact
 * (the error stays sticky until ngnfs_buffer_reset()).
 */
int ngnfs_msg_finish(struct ngnfs_buffer *buffer)
{
	struct ngnfs_msg_header header;
	uint8_t *frame;
	size_t payload;
	uint32_t crc;

	if (!buffer->error && buffer->length < buffer->frame_start + NGNFS_MSG_HEADER_SIZE)
		set_error(buffer, -EINVAL); /* finish without begin */
	if (buffer->error) {
		if (buffer->frame_start <= buffer->length)
			buffer->length = buffer->frame_start;
		return buffer->error;
	}
	frame = buffer->data + buffer->frame_start;
	payload = buffer->length - buffer->frame_start - NGNFS_MSG_HEADER_SIZE;
	memcpy(&header, frame, sizeof(header));
	header.payload_length = htole32((uint32_t)payload);
	header.crc = 0;
	crc = ngnfs_crc32c(0, &header, sizeof(header));
	crc = ngnfs_crc32c(crc, frame + sizeof(header), payload);
	header.crc = htole32(crc);
	memcpy(frame, &header, sizeof(header));
	buffer->frame_start = buffer->length;
	return 0;
}

/* ---- names ---------------------------------------------------------- */

static const char *const type_names[NGNFS_MSG_TYPE_COUNT] = {
	[NGNFS_MSG_HELLO] = "HELLO",
	[NGNFS_MSG_HELLO_REPLY] = "HELLO_REPLY",
	[NGNFS_MSG_FORMAT] = "FORMAT",
	[NGNFS_MSG_FORMAT_REPLY] = "FORMAT_REPLY",
	[NGNFS_MSG_GET] = "GET",
	[NGNFS_MSG_GRANT] = "GRANT",
	[NGNFS_MSG_REVOKE] = "REVOKE",
	[NGNFS_MSG_RELEASE] = "RELEASE",
	[NGNFS_MSG_RELEASE_REPLY] = "RELEASE_REPLY",
	[NGNFS_MSG_WRITE] = "WRITE",
	[NGNFS_MSG_WRITE_REPLY] = "WRITE_REPLY",
	[NGNFS_MSG_COMMIT] = "COMMIT",
	[NGNFS_MSG_COMMIT_REPLY] = "COMMIT_REPLY",
	[NGNFS_MSG_RESOLVE] = "RESOLVE",
	[NGNFS_MSG_RESOLVE_REPLY] = "RESOLVE_REPLY",
	[NGNFS_MSG_ALLOC] = "ALLOC",
	[NGNFS_MSG_ALLOC_REPLY] = "ALLOC_REPLY",
	[NGNFS_MSG_CMPXCHG] = "CMPXCHG",
	[NGNFS_MSG_CMPXCHG_REPLY] = "CMPXCHG_REPLY",
	[NGNFS_MSG_READ_INCOHERENT] = "READ_INCOHERENT",
	[NGNFS_MSG_READ_INCOHERENT_REPLY] = "READ_INCOHERENT_REPLY",
	[NGNFS_MSG_STATFS] = "STATFS",
	[NGNFS_MSG_STATFS_REPLY] = "STATFS_REPLY",
	[NGNFS_MSG_ERROR] = "ERROR",
};

const char *ngnfs_msg_type_name(unsigned int type)
{
	if (type < NGNFS_MSG_TYPE_COUNT && type_names[type])
		return type_names[type];
	return "unknown";
}

const char *ngnfs_access_name(unsigned int access)
{
	switch (access) {
	case NGNFS_ACCESS_NONE:
		return "none";
	case NGNFS_ACCESS_READ:
		return "read";
	case NGNFS_ACCESS_WRITE:
		return "write";
	default:
		return "unknown";
	}
}

/* ---- decoding ------------------------------------------------------- */

int ngnfs_msg_check_header(const void *header_bytes, size_t *frame_length, const char **why)
{
	struct ngnfs_msg_header header;
	uint32_t payload;

	memcpy(&header, header_bytes, sizeof(header));
	if (le32toh(header.magic) != NGNFS_MSG_MAGIC) {
		*why = "bad magic: not an ngnfs protocol frame";
		return -EBADMSG;
	}
	if (le16toh(header.version) != NGNFS_PROTOCOL_VERSION) {
		*why = "unsupported protocol version";
		return -EPROTONOSUPPORT;
	}
	payload = le32toh(header.payload_length);
	if (payload > NGNFS_MSG_MAX_PAYLOAD) {
		*why = "payload length exceeds the protocol maximum";
		return -EBADMSG;
	}
	*frame_length = NGNFS_MSG_HEADER_SIZE + payload;
	return 0;
}

static bool is_request(unsigned int type)
{
	switch (type) {
	case NGNFS_MSG_HELLO:
	case NGNFS_MSG_FORMAT:
	case NGNFS_MSG_GET:
	case NGNFS_MSG_RELEASE:
	case NGNFS_MSG_WRITE:
	case NGNFS_MSG_COMMIT:
	case NGNFS_MSG_RESOLVE:
	case NGNFS_MSG_ALLOC:
	case NGNFS_MSG_CMPXCHG:
	case NGNFS_MSG_READ_INCOHERENT:
	case NGNFS_MSG_STATFS:
	case NGNFS_MSG_REVOKE: /* unsolicited: no status either */
		return true;
	default:
		return false;
	}
}

static bool status_is_valid(int status)
{
	return status <= 0 && status >= -NGNFS_MAX_ERRNO;
}

static bool all_zero(const void *bytes, size_t length)
{
	const uint8_t *byte = bytes;

	for (size_t i = 0; i < length; i++) {
		if (byte[i])
			return false;
	}
	return true;
}

static bool access_is_valid(uint8_t access)
{
	return access == NGNFS_ACCESS_NONE || access == NGNFS_ACCESS_READ ||
	       access == NGNFS_ACCESS_WRITE;
}

static bool access_is_wanted(uint8_t access)
{
	return access == NGNFS_ACCESS_READ || access == NGNFS_ACCESS_WRITE;
}

static bool access_is_kept(uint8_t access)
{
	return access == NGNFS_ACCESS_NONE || access == NGNFS_ACCESS_READ;
}

/*
 * Decoding state: the payload and its length; every reader below has
 * already been told by check_length() that the bytes exist.
 */
struct payload {
	const uint8_t *bytes;
	size_t length;
};

#define REJECT(error, text)                                                                        \
	do {                                                                                       \
		*why = (text);                                                                     \
		return (error);                                                                    \
	} while (0)

/* The payload must be exactly `expected` bytes (computed in 64 bits from bounded counts). */
static int check_length(const struct payload *payload, uint64_t expected, const char *too_short,
			const char *too_long, const char **why)
{
	if (payload->length < expected)
		REJECT(-EBADMSG, too_short);
	if (payload->length > expected)
		REJECT(-EBADMSG, too_long);
	return 0;
}

/* The fixed part at the start of the payload, before anything is known of the rest. */
static int fixed_part(const struct payload *payload, void *fixed, size_t size,
		      const char *too_short, const char **why)
{
	if (payload->length < size)
		REJECT(-EBADMSG, too_short);
	memcpy(fixed, payload->bytes, size);
	return 0;
}

static int decode_hello(const struct payload *payload, struct ngnfs_msg *msg, const char **why)
{
	struct ngnfs_msg_hello hello;
	int ret;

	ret = check_length(payload, sizeof(hello), "HELLO payload truncated",
			   "HELLO payload too long", why);
	if (ret)
		return ret;
	memcpy(&hello, payload->bytes, sizeof(hello));
	if (hello.reserved)
		REJECT(-EPROTO, "HELLO reserved field not zero");
	if (le32toh(hello.flags) & ~HELLO_KNOWN_FLAGS)
		REJECT(-EPROTO, "HELLO has unknown flags");
	memcpy(msg->hello.fs_id, hello.fs_id, NGNFS_FS_ID_SIZE);
	msg->hello.client_id = le64toh(hello.client_id);
	msg->hello.flags = le32toh(hello.flags);
	msg->hello.protocol_version = le16toh(hello.protocol_version);
	return 0;
}

static int decode_hello_reply(const struct payload *payload, struct ngnfs_msg *msg,
			      const char **why)
{
	struct ngnfs_msg_hello_reply reply;
	int ret;

	ret = check_length(payload, sizeof(reply), "HELLO_REPLY payload truncated",
			   "HELLO_REPLY payload too long", why);
	if (ret)
		return ret;
	memcpy(&reply, payload->bytes, sizeof(reply));
	if (le32toh(reply.flags) & ~HELLO_REPLY_KNOWN_FLAGS)
		REJECT(-EPROTO, "HELLO_REPLY has unknown flags");
	memcpy(msg->hello_reply.fs_id, reply.fs_id, NGNFS_FS_ID_SIZE);
	msg->hello_reply.server_instance = le64toh(reply.server_instance);
	msg->hello_reply.flags = le32toh(reply.flags);
	msg->hello_reply.grace_ms = le32toh(reply.grace_ms);
	msg->hello_reply.device_index = le16toh(reply.device_index);
	msg->hello_reply.protocol_version = le16toh(reply.protocol_version);
	msg->hello_reply.device_count = le32toh(reply.device_count);
	return 0;
}

static bool device_identity_is_valid(uint32_t device_count, uint32_t device_index)
{
	return device_count >= 1 && device_count <= NGNFS_MAX_DEVICES &&
	       device_index < device_count;
}

static int decode_format(const struct payload *payload, struct ngnfs_msg *msg, const char **why)
{
	struct ngnfs_msg_format format;
	int ret;

	ret = check_length(payload, sizeof(format), "FORMAT payload truncated",
			   "FORMAT payload too long", why);
	if (ret)
		return ret;
	memcpy(&format, payload->bytes, sizeof(format));
	if (format.reserved)
		REJECT(-EPROTO, "FORMAT reserved field not zero");
	if (!device_identity_is_valid(le32toh(format.device_count), le16toh(format.device_index)))
		REJECT(-EPROTO, "FORMAT device index not below a device count of 1 to 65536");
	memcpy(msg->format.fs_id, format.fs_id, NGNFS_FS_ID_SIZE);
	msg->format.device_count = le32toh(format.device_count);
	msg->format.device_index = le16toh(format.device_index);
	return 0;
}

static int decode_get(const struct payload *payload, struct ngnfs_msg *msg, const char **why)
{
	struct ngnfs_msg_get get;
	uint32_t count;
	int ret;

	ret = fixed_part(payload, &get, sizeof(get), "GET payload truncated", why);
	if (ret)
		return ret;
	count = le32toh(get.count);
	if (get.reserved)
		REJECT(-EPROTO, "GET reserved field not zero");
	if (count == 0)
		REJECT(-EPROTO, "GET asks for no blocks");
	if (count > NGNFS_MSG_MAX_BLOCKS)
		REJECT(-EPROTO, "GET block count exceeds the protocol maximum");
	ret = check_length(payload,
			   sizeof(get) + (uint64_t)count * sizeof(struct ngnfs_msg_get_entry),
			   "GET payload shorter than its block count",
			   "GET payload longer than its block count", why);
	if (ret)
		return ret;
	for (uint32_t i = 0; i < count; i++) {
		struct ngnfs_msg_get_entry entry;

		memcpy(&entry, payload->bytes + sizeof(get) + i * sizeof(entry), sizeof(entry));
		if (!access_is_wanted(entry.access))
			REJECT(-EPROTO, "GET entry access is not read or write");
		if (!all_zero(entry.reserved, sizeof(entry.reserved)))
			REJECT(-EPROTO, "GET entry reserved bytes not zero");
	}
	msg->get.count = count;
	msg->get.entries = (const struct ngnfs_msg_get_entry *)(payload->bytes + sizeof(get));
	return 0;
}

static int decode_grant(const struct payload *payload, struct ngnfs_msg *msg, const char **why)
{
	struct ngnfs_msg_grant grant;
	bool with_data;
	int ret;

	ret = fixed_part(payload, &grant, sizeof(grant), "GRANT payload truncated", why);
	if (ret)
		return ret;
	if (grant.flags & ~GRANT_KNOWN_FLAGS)
		REJECT(-EPROTO, "GRANT has unknown flags");
	if (!access_is_valid(grant.access))
		REJECT(-EPROTO, "GRANT access is not none, read or write");
	if (msg->status == 0 && grant.access == NGNFS_ACCESS_NONE)
		REJECT(-EPROTO, "successful GRANT grants no access");
	if (!all_zero(grant.reserved, sizeof(grant.reserved)))
		REJECT(-EPROTO, "GRANT reserved bytes not zero");
	with_data = grant.flags & NGNFS_GRANT_DATA;
	ret = check_length(payload, sizeof(grant) + (with_data ? NGNFS_BLOCK_SIZE : 0),
			   with_data ? "GRANT with data shorter than a block"
				     : "GRANT payload truncated",
			   with_data ? "GRANT with data longer than a block"
				     : "GRANT without the data flag carries data",
			   why);
	if (ret)
		return ret;
	msg->grant.blkno = le64toh(grant.blkno);
	msg->grant.version = le64toh(grant.version);
	msg->grant.access = grant.access;
	msg->grant.flags = grant.flags;
	msg->grant.data = with_data ? payload->bytes + sizeof(grant) : NULL;
	return 0;
}

static int decode_revoke(const struct payload *payload, struct ngnfs_msg *msg, const char **why)
{
	struct ngnfs_msg_revoke revoke;
	int ret;

	ret = check_length(payload, sizeof(revoke), "REVOKE payload truncated",
			   "REVOKE payload too long", why);
	if (ret)
		return ret;
	memcpy(&revoke, payload->bytes, sizeof(revoke));
	if (msg->request_id != 0)
		REJECT(-EPROTO, "REVOKE carries a request id");
	if (!access_is_kept(revoke.access))
		REJECT(-EPROTO, "REVOKE access is not none or read");
	if (!all_zero(revoke.reserved, sizeof(revoke.reserved)))
		REJECT(-EPROTO, "REVOKE reserved bytes not zero");
	msg->revoke.blkno = le64toh(revoke.blkno);
	msg->revoke.access = revoke.access;
	return 0;
}

static int decode_release(const struct payload *payload, struct ngnfs_msg *msg, const char **why)
{
	struct ngnfs_msg_release release;
	uint32_t count;
	int ret;

	ret = fixed_part(payload, &release, sizeof(release), "RELEASE payload truncated", why);
	if (ret)
		return ret;
	count = le32toh(release.count);
	if (release.reserved)
		REJECT(-EPROTO, "RELEASE reserved field not zero");
	if (count == 0)
		REJECT(-EPROTO, "RELEASE releases no blocks");
	if (count > NGNFS_MSG_MAX_BLOCKS)
		REJECT(-EPROTO, "RELEASE block count exceeds the protocol maximum");
	ret = check_length(
	    payload, sizeof(release) + (uint64_t)count * sizeof(struct ngnfs_msg_release_entry),
	    "RELEASE payload shorter than its block count",
	    "RELEASE payload longer than its block count", why);
	if (ret)
		return ret;
	for (uint32_t i = 0; i < count; i++) {
		struct ngnfs_msg_release_entry entry;

		memcpy(&entry, payload->bytes + sizeof(release) + i * sizeof(entry), sizeof(entry));
		if (!access_is_kept(entry.access))
			REJECT(-EPROTO, "RELEASE entry access is not none or read");
		if (!all_zero(entry.reserved, sizeof(entry.reserved)))
			REJECT(-EPROTO, "RELEASE entry reserved bytes not zero");
	}
	msg->release.count = count;
	msg->release.entries =
	    (const struct ngnfs_msg_release_entry *)(payload->bytes + sizeof(release));
	return 0;
}

static size_t participants_size(uint32_t participant_count)
{
	return ((size_t)participant_count * sizeof(__le16) + 7) & ~(size_t)7;
}

static int decode_write(const struct payload *payload, struct ngnfs_msg *msg, const char **why)
{
	struct ngnfs_msg_write write;
	uint32_t block_count;
	uint32_t free_count;
	uint16_t participant_count;
	uint16_t frame_index;
	uint16_t frame_count;
	uint32_t flags;
	size_t padded;
	uint64_t expected;
	int ret;

	ret = fixed_part(payload, &write, sizeof(write), "WRITE payload truncated", why);
	if (ret)
		return ret;
	block_count = le32toh(write.block_count);
	free_count = le32toh(write.free_count);
	participant_count = le16toh(write.participant_count);
	flags = le32toh(write.flags);
	frame_index = le16toh(write.frame_index);
	frame_count = le16toh(write.frame_count);
	if (write.phase != NGNFS_WRITE_SINGLE && write.phase != NGNFS_WRITE_STAGE)
		REJECT(-EPROTO, "WRITE phase is not single or stage");
	if (frame_count == 0 || frame_count > NGNFS_WRITE_MAX_FRAMES)
		REJECT(-EPROTO, "WRITE frame count is not 1 to the protocol maximum");
	if (frame_index >= frame_count)
		REJECT(-EPROTO, "WRITE frame index is not below its frame count");
	if (write.phase == NGNFS_WRITE_STAGE && frame_count != 1)
		REJECT(-EPROTO, "WRITE stage in more than one frame");
	if (write.reserved)
		REJECT(-EPROTO, "WRITE reserved bytes not zero");
	if (flags & ~WRITE_KNOWN_FLAGS)
		REJECT(-EPROTO, "WRITE has unknown flags");
	if (!access_is_kept(write.release_access))
		REJECT(-EPROTO, "WRITE release access is not none or read");
	if (!(flags & NGNFS_WRITE_RELEASE) && write.release_access != NGNFS_ACCESS_NONE)
		REJECT(-EPROTO, "WRITE release access set without the release flag");
	if (participant_count > NGNFS_MSG_MAX_PARTICIPANTS)
		REJECT(-EPROTO, "WRITE participant count exceeds the protocol maximum");
	if (write.phase == NGNFS_WRITE_STAGE && participant_count == 0)
		REJECT(-EPROTO, "WRITE stage without participants");
	if (block_count > NGNFS_MSG_MAX_BLOCKS)
		REJECT(-EPROTO, "WRITE block count exceeds the protocol maximum");
	if (free_count > NGNFS_MSG_MAX_BLOCKS)
		REJECT(-EPROTO, "WRITE free count exceeds the protocol maximum");
	padded = participants_size(participant_count);
	expected = sizeof(write) + padded + (uint64_t)block_count * NGNFS_WRITE_BLOCK_STRIDE +
		   (uint64_t)free_count * sizeof(__le64);
	ret = check_length(payload, expected, "WRITE payload shorter than its counts",
			   "WRITE payload longer than its counts", why);
	if (ret)
		return ret;
	if (!all_zero(payload->bytes + sizeof(write) + participant_count * sizeof(__le16),
		      padded - participant_count * sizeof(__le16)))
		REJECT(-EPROTO, "WRITE participant padding not zero");

	msg->write.set_id = le64toh(write.set_id);
	msg->write.phase = write.phase;
	msg->write.release_access = write.release_access;
	msg->write.flags = flags;
	msg->write.frame_index = frame_index;
	msg->write.frame_count = frame_count;
	msg->write.participant_count = participant_count;
	msg->write.participants = (const __le16 *)(payload->bytes + sizeof(write));
	msg->write.block_count = block_count;
	msg->write.blocks = payload->bytes + sizeof(write) + padded;
	msg->write.free_count = free_count;
	msg->write.frees = (const __le64 *)(payload->bytes + sizeof(write) + padded +
					    (size_t)block_count * NGNFS_WRITE_BLOCK_STRIDE);
	return 0;
}

/* WRITE_REPLY, COMMIT_REPLY (struct ngnfs_msg_write_reply) and ALLOC_REPLY. */
static int decode_versions(const struct payload *payload, struct ngnfs_msg *msg, const char **why)
{
	size_t fixed_size;
	uint64_t set_id = 0;
	uint32_t session_epoch = 0;
	uint32_t count;
	uint32_t reserved;
	int ret;

	if (msg->type == NGNFS_MSG_ALLOC_REPLY) {
		struct ngnfs_msg_alloc_reply reply;

		ret = fixed_part(payload, &reply, sizeof(reply), "ALLOC_REPLY payload truncated",
				 why);
		if (ret)
			return ret;
		fixed_size = sizeof(reply);
		count = le32toh(reply.count);
		session_epoch = le32toh(reply.session_epoch);
		reserved = 0;
		if (count && !session_epoch)
			REJECT(-EPROTO, "ALLOC_REPLY reserves blocks without a session epoch");
	} else {
		struct ngnfs_msg_write_reply reply;

		ret = fixed_part(payload, &reply, sizeof(reply),
				 msg->type == NGNFS_MSG_WRITE_REPLY
				     ? "WRITE_REPLY payload truncated"
				     : "COMMIT_REPLY payload truncated",
				 why);
		if (ret)
			return ret;
		fixed_size = sizeof(reply);
		set_id = le64toh(reply.set_id);
		count = le32toh(reply.count);
		reserved = reply.reserved;
	}
	if (reserved)
		REJECT(-EPROTO, "version reply reserved field not zero");
	if (count > NGNFS_MSG_MAX_BLOCKS)
		REJECT(-EPROTO, "version reply count exceeds the protocol maximum");
	ret = check_length(
	    payload, fixed_size + (uint64_t)count * sizeof(struct ngnfs_msg_version_entry),
	    "version reply shorter than its count", "version reply longer than its count", why);
	if (ret)
		return ret;
	msg->versions.set_id = set_id;
	msg->versions.session_epoch = session_epoch;
	msg->versions.count = count;
	msg->versions.entries =
	    (const struct ngnfs_msg_version_entry *)(payload->bytes + fixed_size);
	return 0;
}

static int decode_commit(const struct payload *payload, struct ngnfs_msg *msg, const char **why)
{
	struct ngnfs_msg_commit commit;
	int ret;

	ret = check_length(payload, sizeof(commit), "COMMIT payload truncated",
			   "COMMIT payload too long", why);
	if (ret)
		return ret;
	memcpy(&commit, payload->bytes, sizeof(commit));
	msg->commit.set_id = le64toh(commit.set_id);
	return 0;
}

/* RESOLVE and RESOLVE_REPLY share a layout. */
static int decode_resolve(const struct payload *payload, struct ngnfs_msg *msg, const char **why)
{
	struct ngnfs_msg_resolve resolve;
	int ret;

	_Static_assert(sizeof(struct ngnfs_msg_resolve) == sizeof(struct ngnfs_msg_resolve_reply),
		       "RESOLVE and RESOLVE_REPLY share a layout");
	ret = check_length(payload, sizeof(resolve), "RESOLVE payload truncated",
			   "RESOLVE payload too long", why);
	if (ret)
		return ret;
	memcpy(&resolve, payload->bytes, sizeof(resolve));
	if (resolve.outcome != NGNFS_SET_UNKNOWN && resolve.outcome != NGNFS_SET_COMMITTED &&
	    resolve.outcome != NGNFS_SET_ABORTED)
		REJECT(-EPROTO, "RESOLVE outcome is not unknown, committed or aborted");
	if (!all_zero(resolve.reserved, sizeof(resolve.reserved)))
		REJECT(-EPROTO, "RESOLVE reserved bytes not zero");
	msg->resolve.set_id = le64toh(resolve.set_id);
	msg->resolve.outcome = resolve.outcome;
	return 0;
}

static int decode_alloc(const struct payload *payload, struct ngnfs_msg *msg, const char **why)
{
	struct ngnfs_msg_alloc alloc;
	uint32_t count;
	int ret;

	ret = check_length(payload, sizeof(alloc), "ALLOC payload truncated",
			   "ALLOC payload too long", why);
	if (ret)
		return ret;
	memcpy(&alloc, payload->bytes, sizeof(alloc));
	count = le32toh(alloc.count);
	if (alloc.reserved)
		REJECT(-EPROTO, "ALLOC reserved field not zero");
	if (count == 0)
		REJECT(-EPROTO, "ALLOC asks for no blocks");
	if (count > NGNFS_MSG_MAX_BLOCKS)
		REJECT(-EPROTO, "ALLOC count exceeds the protocol maximum");
	msg->alloc.count = count;
	return 0;
}

static int decode_cmpxchg(const struct payload *payload, struct ngnfs_msg *msg, const char **why)
{
	struct ngnfs_msg_cmpxchg cmpxchg;
	int ret;

	ret = check_length(payload, sizeof(cmpxchg) + NGNFS_BLOCK_SIZE,
			   "CMPXCHG payload shorter than a block", "CMPXCHG payload too long", why);
	if (ret)
		return ret;
	memcpy(&cmpxchg, payload->bytes, sizeof(cmpxchg));
	msg->cmpxchg.blkno = le64toh(cmpxchg.blkno);
	msg->cmpxchg.expected_version = le64toh(cmpxchg.expected_version);
	msg->cmpxchg.data = payload->bytes + sizeof(cmpxchg);
	return 0;
}

static int decode_cmpxchg_reply(const struct payload *payload, struct ngnfs_msg *msg,
				const char **why)
{
	struct ngnfs_msg_cmpxchg_reply reply;
	int ret;

	ret = check_length(payload, sizeof(reply), "CMPXCHG_REPLY payload truncated",
			   "CMPXCHG_REPLY payload too long", why);
	if (ret)
		return ret;
	memcpy(&reply, payload->bytes, sizeof(reply));
	msg->cmpxchg_reply.blkno = le64toh(reply.blkno);
	msg->cmpxchg_reply.version = le64toh(reply.version);
	return 0;
}

static int decode_read_incoherent(const struct payload *payload, struct ngnfs_msg *msg,
				  const char **why)
{
	struct ngnfs_msg_read_incoherent read;
	bool reply = msg->type == NGNFS_MSG_READ_INCOHERENT_REPLY;
	uint32_t count;
	int ret;

	ret = fixed_part(payload, &read, sizeof(read), "READ_INCOHERENT payload truncated", why);
	if (ret)
		return ret;
	count = le32toh(read.count);
	if (read.reserved)
		REJECT(-EPROTO, "READ_INCOHERENT reserved field not zero");
	if (!reply && count == 0)
		REJECT(-EPROTO, "READ_INCOHERENT asks for no blocks");
	if (count > NGNFS_MSG_MAX_BLOCKS)
		REJECT(-EPROTO, "READ_INCOHERENT count exceeds the protocol maximum");
	if (!reply) {
		ret = check_length(payload, sizeof(read) + (uint64_t)count * sizeof(__le64),
				   "READ_INCOHERENT payload shorter than its count",
				   "READ_INCOHERENT payload longer than its count", why);
		if (ret)
			return ret;
		msg->read_incoherent.count = count;
		msg->read_incoherent.blknos = (const __le64 *)(payload->bytes + sizeof(read));
		return 0;
	}
	ret = check_length(payload, sizeof(read) + (uint64_t)count * NGNFS_INCOHERENT_BLOCK_STRIDE,
			   "READ_INCOHERENT_REPLY payload shorter than its count",
			   "READ_INCOHERENT_REPLY payload longer than its count", why);
	if (ret)
		return ret;
	for (uint32_t i = 0; i < count; i++) {
		struct ngnfs_msg_incoherent_block block;

		memcpy(&block, payload->bytes + sizeof(read) + i * NGNFS_INCOHERENT_BLOCK_STRIDE,
		       sizeof(block));
		if (!status_is_valid((int)(int32_t)le32toh(block.status)))
			REJECT(
			    -EPROTO,
			    "READ_INCOHERENT_REPLY block status is not zero or a negative errno");
		if (block.reserved)
			REJECT(-EPROTO, "READ_INCOHERENT_REPLY block reserved field not zero");
	}
	msg->read_incoherent_reply.count = count;
	msg->read_incoherent_reply.blocks = payload->bytes + sizeof(read);
	return 0;
}

static int decode_statfs_reply(const struct payload *payload, struct ngnfs_msg *msg,
			       const char **why)
{
	struct ngnfs_msg_statfs_reply reply;
	int ret;

	ret = check_length(payload, sizeof(reply), "STATFS_REPLY payload truncated",
			   "STATFS_REPLY payload too long", why);
	if (ret)
		return ret;
	memcpy(&reply, payload->bytes, sizeof(reply));
	msg->statfs_reply.total_blocks = le64toh(reply.total_blocks);
	msg->statfs_reply.free_blocks = le64toh(reply.free_blocks);
	msg->statfs_reply.reserved_blocks = le64toh(reply.reserved_blocks);
	msg->statfs_reply.staged_sets = le64toh(reply.staged_sets);
	msg->statfs_reply.client_sessions = le64toh(reply.client_sessions);
	msg->statfs_reply.group_commits = le64toh(reply.group_commits);
	msg->statfs_reply.commit_requests = le64toh(reply.commit_requests);
	return 0;
}

static int decode_error(const struct payload *payload, struct ngnfs_msg *msg, const char **why)
{
	struct ngnfs_msg_error error;
	uint16_t text_length;
	int ret;

	ret = fixed_part(payload, &error, sizeof(error), "ERROR payload truncated", why);
	if (ret)
		return ret;
	text_length = le16toh(error.text_length);
	if (!all_zero(error.reserved, sizeof(error.reserved)))
		REJECT(-EPROTO, "ERROR reserved field not zero");
	if (text_length > NGNFS_MSG_MAX_TEXT)
		REJECT(-EPROTO, "ERROR text longer than the protocol maximum");
	ret = check_length(payload, sizeof(error) + (uint64_t)text_length,
			   "ERROR payload shorter than its text length",
			   "ERROR payload longer than its text length", why);
	if (ret)
		return ret;
	if (memchr(payload->bytes + sizeof(error), '\0', text_length))
		REJECT(-EPROTO, "ERROR text contains a NUL byte");
	if (msg->status == 0)
		REJECT(-EPROTO, "ERROR without an error status");
	msg->error.text_length = text_length;
	msg->error.text = (const char *)(payload->bytes + sizeof(error));
	return 0;
}

static int decode_empty(const struct payload *payload, const char **why)
{
	return check_length(payload, 0, "", "header-only message carries a payload", why);
}

int ngnfs_msg_decode(const void *frame, size_t frame_length, struct ngnfs_msg *msg,
		     const char **why)
{
	struct ngnfs_msg_header header;
	struct payload payload;
	size_t expected_length;
	unsigned int type;
	uint32_t crc;
	int status;
	int ret;

	memset(msg, 0, sizeof(*msg));
	if (frame_length < NGNFS_MSG_HEADER_SIZE)
		REJECT(-EBADMSG, "frame shorter than a header");
	ret = ngnfs_msg_check_header(frame, &expected_length, why);
	if (ret)
		return ret;
	if (frame_length < expected_length)
		REJECT(-EBADMSG, "frame shorter than its header's payload length");
	if (frame_length > expected_length)
		REJECT(-EBADMSG, "frame longer than its header's payload length");

	memcpy(&header, frame, sizeof(header));
	payload.bytes = (const uint8_t *)frame + NGNFS_MSG_HEADER_SIZE;
	payload.length = frame_length - NGNFS_MSG_HEADER_SIZE;
	crc = le32toh(header.crc);
	header.crc = 0;
	if (ngnfs_crc32c(ngnfs_crc32c(0, &header, sizeof(header)), payload.bytes, payload.length) !=
	    crc)
		REJECT(-EBADMSG, "crc mismatch: frame corrupted");

	type = le16toh(header.type);
	if (type == 0 || type >= NGNFS_MSG_TYPE_COUNT)
		REJECT(-EPROTO, "unknown message type");
	if (header.reserved)
		REJECT(-EPROTO, "header reserved field not zero");
	status = (int)(int32_t)le32toh(header.status);
	if (is_request(type) && status != 0)
		REJECT(-EPROTO, "request carries a status");
	if (!status_is_valid(status))
		REJECT(-EPROTO, "reply status is not zero or a negative errno");
	msg->type = (enum ngnfs_msg_type)type;
	msg->request_id = le64toh(header.request_id);
	msg->status = status;

	switch (type) {
	case NGNFS_MSG_HELLO:
		ret = decode_hello(&payload, msg, why);
		break;
	case NGNFS_MSG_HELLO_REPLY:
		ret = decode_hello_reply(&payload, msg, why);
		break;
	case NGNFS_MSG_FORMAT:
		ret = decode_format(&payload, msg, why);
		break;
	case NGNFS_MSG_FORMAT_REPLY:
	case NGNFS_MSG_RELEASE_REPLY:
	case NGNFS_MSG_STATFS:
		ret = decode_empty(&payload, why);
		break;
	case NGNFS_MSG_GET:
		ret = decode_get(&payload, msg, why);
		break;
	case NGNFS_MSG_GRANT:
		ret = decode_grant(&payload, msg, why);
		break;
	case NGNFS_MSG_REVOKE:
		ret = decode_revoke(&payload, msg, why);
		break;
	case NGNFS_MSG_RELEASE:
		ret = decode_release(&payload, msg, why);
		break;
	case NGNFS_MSG_WRITE:
		ret = decode_write(&payload, msg, why);
		break;
	case NGNFS_MSG_WRITE_REPLY:
	case NGNFS_MSG_COMMIT_REPLY:
	case NGNFS_MSG_ALLOC_REPLY:
		ret = decode_versions(&payload, msg, why);
		break;
	case NGNFS_MSG_COMMIT:
		ret = decode_commit(&payload, msg, why);
		break;
	case NGNFS_MSG_RESOLVE:
	case NGNFS_MSG_RESOLVE_REPLY:
		ret = decode_resolve(&payload, msg, why);
		break;
	case NGNFS_MSG_ALLOC:
		ret = decode_alloc(&payload, msg, why);
		break;
	case NGNFS_MSG_CMPXCHG:
		ret = decode_cmpxchg(&payload, msg, why);
		break;
	case NGNFS_MSG_CMPXCHG_REPLY:
		ret = decode_cmpxchg_reply(&payload, msg, why);
		break;
	case NGNFS_MSG_READ_INCOHERENT:
	case NGNFS_MSG_READ_INCOHERENT_REPLY:
		ret = decode_read_incoherent(&payload, msg, why);
		break;
	case NGNFS_MSG_STATFS_REPLY:
		ret = decode_statfs_reply(&payload, msg, why);
		break;
	case NGNFS_MSG_ERROR:
		ret = decode_error(&payload, msg, why);
		break;
	default:
		REJECT(-EPROTO, "unknown message type");
	}
	if (ret) {
		/* the caller gets either a whole message or none */
		memset(msg, 0, sizeof(*msg));
		return ret;
	}
	return 0;
}

const uint8_t *ngnfs_msg_write_block(const struct ngnfs_msg *msg, uint32_t i, uint64_t *blkno,
				     uint64_t *base_version)
{
	const uint8_t *entry = msg->write.blocks + (size_t)i * NGNFS_WRITE_BLOCK_STRIDE;
	struct ngnfs_msg_write_block block;

	memcpy(&block, entry, sizeof(block));
	*blkno = le64toh(block.blkno);
	*base_version = le64toh(block.base_version);
	return entry + sizeof(block);
}

const uint8_t *ngnfs_msg_incoherent_block(const struct ngnfs_msg *msg, uint32_t i, uint64_t *blkno,
					  uint64_t *version, int *status)
{
	const uint8_t *entry =
	    msg->read_incoherent_reply.blocks + (size_t)i * NGNFS_INCOHERENT_BLOCK_STRIDE;
	struct ngnfs_msg_incoherent_block block;

	memcpy(&block, entry, sizeof(block));
	*blkno = le64toh(block.blkno);
	*version = le64toh(block.version);
	*status = (int)(int32_t)le32toh(block.status);
	return entry + sizeof(block);
}

/* ---- typed encoders ------------------------------------------------- */

static int finish_or_fail(struct ngnfs_buffer *buffer)
{
	return ngnfs_msg_finish(buffer);
}

int ngnfs_encode_hello(struct ngnfs_buffer *buffer, uint64_t request_id,
		       const uint8_t fs_id[NGNFS_FS_ID_SIZE], uint64_t client_id, uint32_t flags)
{
	struct ngnfs_msg_hello hello = {
		.client_id = htole64(client_id),
		.flags = htole32(flags),
		.protocol_version = htole16(NGNFS_PROTOCOL_VERSION),
	};

	if (flags & ~HELLO_KNOWN_FLAGS)
		return -EINVAL;
	if (fs_id)
		memcpy(hello.fs_id, fs_id, NGNFS_FS_ID_SIZE);
	ngnfs_msg_begin(buffer, NGNFS_MSG_HELLO, request_id, 0);
	ngnfs_msg_put(buffer, &hello, sizeof(hello));
	return finish_or_fail(buffer);
}

int ngnfs_encode_hello_reply(struct ngnfs_buffer *buffer, uint64_t request_id, int status,
			     const uint8_t fs_id[NGNFS_FS_ID_SIZE], uint64_t server_instance,
			     uint32_t flags, uint32_t grace_ms, uint16_t device_index,
			     uint32_t device_count)
{
	struct ngnfs_msg_hello_reply reply = {
		.server_instance = htole64(server_instance),
		.flags = htole32(flags),
		.grace_ms = htole32(grace_ms),
		.device_index = htole16(device_index),
		.protocol_version = htole16(NGNFS_PROTOCOL_VERSION),
		.device_count = htole32(device_count),
	};

	if (!status_is_valid(status) || (flags & ~HELLO_REPLY_KNOWN_FLAGS))
		return -EINVAL;
	if (fs_id)
		memcpy(reply.fs_id, fs_id, NGNFS_FS_ID_SIZE);
	ngnfs_msg_begin(buffer, NGNFS_MSG_HELLO_REPLY, request_id, status);
	ngnfs_msg_put(buffer, &reply, sizeof(reply));
	return finish_or_fail(buffer);
}

int ngnfs_encode_format(struct ngnfs_buffer *buffer, uint64_t request_id,
			const uint8_t fs_id[NGNFS_FS_ID_SIZE], uint16_t device_index,
			uint32_t device_count)
{
	struct ngnfs_msg_format format = {
		.device_count = htole32(device_count),
		.device_index = htole16(device_index),
	};

	if (!fs_id || !device_identity_is_valid(device_count, device_index))
		return -EINVAL;
	memcpy(format.fs_id, fs_id, NGNFS_FS_ID_SIZE);
	ngnfs_msg_begin(buffer, NGNFS_MSG_FORMAT, request_id, 0);
	ngnfs_msg_put(buffer, &format, sizeof(format));
	return finish_or_fail(buffer);
}

int ngnfs_encode_status_reply(struct ngnfs_buffer *buffer, enum ngnfs_msg_type type,
			      uint64_t request_id, int status)
{
	if ((type != NGNFS_MSG_FORMAT_REPLY && type != NGNFS_MSG_RELEASE_REPLY) ||
	    !status_is_valid(status))
		return -EINVAL;
	ngnfs_msg_begin(buffer, type, request_id, status);
	return finish_or_fail(buffer);
}

int ngnfs_encode_get(struct ngnfs_buffer *buffer, uint64_t request_id,
		     const struct ngnfs_block_request *blocks, uint32_t count)
{
	struct ngnfs_msg_get get = { .count = htole32(count) };

	if (count == 0 || count > NGNFS_MSG_MAX_BLOCKS || !blocks)
		return -EINVAL;
	for (uint32_t i = 0; i < count; i++) {
		if (!access_is_wanted(blocks[i].access))
			return -EINVAL;
	}
	ngnfs_msg_begin(buffer, NGNFS_MSG_GET, request_id, 0);
	ngnfs_msg_put(buffer, &get, sizeof(get));
	for (uint32_t i = 0; i < count; i++) {
		struct ngnfs_msg_get_entry entry = {
			.blkno = htole64(blocks[i].blkno),
			.cached_version = htole64(blocks[i].version),
			.access = blocks[i].access,
		};

		ngnfs_msg_put(buffer, &entry, sizeof(entry));
	}
	return finish_or_fail(buffer);
}

int ngnfs_encode_grant(struct ngnfs_buffer *buffer, uint64_t request_id, int status, uint64_t blkno,
		       uint64_t version, uint8_t access, const uint8_t *data)
{
	struct ngnfs_msg_grant grant = {
		.blkno = htole64(blkno),
		.version = htole64(version),
		.access = access,
		.flags = data ? NGNFS_GRANT_DATA : 0,
	};

	if (!status_is_valid(status) || !access_is_valid(access) ||
	    (status == 0 && access == NGNFS_ACCESS_NONE))
		return -EINVAL;
	ngnfs_msg_begin(buffer, NGNFS_MSG_GRANT, request_id, status);
	ngnfs_msg_put(buffer, &grant, sizeof(grant));
	if (data)
		ngnfs_msg_put(buffer, data, NGNFS_BLOCK_SIZE);
	return finish_or_fail(buffer);
}

int ngnfs_encode_revoke(struct ngnfs_buffer *buffer, uint64_t blkno, uint8_t access)
{
	struct ngnfs_msg_revoke revoke = {
		.blkno = htole64(blkno),
		.access = access,
	};

	if (!access_is_kept(access))
		return -EINVAL;
	ngnfs_msg_begin(buffer, NGNFS_MSG_REVOKE, 0, 0);
	ngnfs_msg_put(buffer, &revoke, sizeof(revoke));
	return finish_or_fail(buffer);
}

int ngnfs_encode_release(struct ngnfs_buffer *buffer, uint64_t request_id,
			 const struct ngnfs_block_request *blocks, uint32_t count)
{
	struct ngnfs_msg_release release = { .count = htole32(count) };

	if (count == 0 || count > NGNFS_MSG_MAX_BLOCKS || !blocks)
		return -EINVAL;
	for (uint32_t i = 0; i < count; i++) {
		if (!access_is_kept(blocks[i].access))
			return -EINVAL;
	}
	ngnfs_msg_begin(buffer, NGNFS_MSG_RELEASE, request_id, 0);
	ngnfs_msg_put(buffer, &release, sizeof(release));
	for (uint32_t i = 0; i < count; i++) {
		struct ngnfs_msg_release_entry entry = {
			.blkno = htole64(blocks[i].blkno),
			.access = blocks[i].access,
		};

		ngnfs_msg_put(buffer, &entry, sizeof(entry));
	}
	return finish_or_fail(buffer);
}

int ngnfs_encode_write_frame(struct ngnfs_buffer *buffer, uint64_t request_id, uint64_t set_id,
			     uint8_t phase, uint32_t flags, uint8_t release_access,
			     const uint16_t *participants, uint16_t participant_count,
			     const struct ngnfs_block_request *blocks, uint32_t block_count,
			     const uint64_t *frees, uint32_t free_count, uint16_t frame_index,
			     uint16_t frame_count)
{
	struct ngnfs_msg_write write = {
		.set_id = htole64(set_id),
		.block_count = htole32(block_count),
		.free_count = htole32(free_count),
		.participant_count = htole16(participant_count),
		.phase = phase,
		.release_access = release_access,
		.flags = htole32(flags),
		.frame_index = htole16(frame_index),
		.frame_count = htole16(frame_count),
	};
	size_t padded = participants_size(participant_count);

	if (frame_count == 0 || frame_count > NGNFS_WRITE_MAX_FRAMES ||
	    frame_index >= frame_count || (phase == NGNFS_WRITE_STAGE && frame_count != 1))
		return -EINVAL;
	if ((phase != NGNFS_WRITE_SINGLE && phase != NGNFS_WRITE_STAGE) ||
	    (flags & ~WRITE_KNOWN_FLAGS) || !access_is_kept(release_access) ||
	    (!(flags & NGNFS_WRITE_RELEASE) && release_access != NGNFS_ACCESS_NONE) ||
	    participant_count > NGNFS_MSG_MAX_PARTICIPANTS ||
	    (phase == NGNFS_WRITE_STAGE && participant_count == 0) ||
	    (participant_count && !participants) || block_count > NGNFS_MSG_MAX_BLOCKS ||
	    (block_count && !blocks) || free_count > NGNFS_MSG_MAX_BLOCKS || (free_count && !frees))
		return -EINVAL;
	for (uint32_t i = 0; i < block_count; i++) {
		if (!blocks[i].data)
			return -EINVAL;
	}

	ngnfs_msg_begin(buffer, NGNFS_MSG_WRITE, request_id, 0);
	ngnfs_msg_put(buffer, &write, sizeof(write));
	for (uint16_t i = 0; i < participant_count; i++) {
		__le16 device = htole16(participants[i]);

		ngnfs_msg_put(buffer, &device, sizeof(device));
	}
	ngnfs_msg_put_zeros(buffer, padded - participant_count * sizeof(__le16));
	for (uint32_t i = 0; i < block_count; i++) {
		struct ngnfs_msg_write_block block = {
			.blkno = htole64(blocks[i].blkno),
			.base_version = htole64(blocks[i].version),
		};

		ngnfs_msg_put(buffer, &block, sizeof(block));
		ngnfs_msg_put(buffer, blocks[i].data, NGNFS_BLOCK_SIZE);
	}
	for (uint32_t i = 0; i < free_count; i++) {
		__le64 blkno = htole64(frees[i]);

		ngnfs_msg_put(buffer, &blkno, sizeof(blkno));
	}
	return finish_or_fail(buffer);
}

static int encode_versions(struct ngnfs_buffer *buffer, enum ngnfs_msg_type type,
			   uint64_t request_id, int status, uint64_t set_id, uint32_t session_epoch,
			   const uint64_t *blknos, const uint64_t *versions, uint32_t count)
{
	if (!status_is_valid(status) || count > NGNFS_MSG_MAX_BLOCKS ||
	    (count && (!blknos || !versions)))
		return -EINVAL;
	ngnfs_msg_begin(buffer, type, request_id, status);
	if (type == NGNFS_MSG_ALLOC_REPLY) {
		struct ngnfs_msg_alloc_reply reply = {
			.count = htole32(count),
			.session_epoch = htole32(session_epoch),
		};

		ngnfs_msg_put(buffer, &reply, sizeof(reply));
	} else {
		struct ngnfs_msg_write_reply reply = {
			.set_id = htole64(set_id),
			.count = htole32(count),
		};

		ngnfs_msg_put(buffer, &reply, sizeof(reply));
	}
	for (uint32_t i = 0; i < count; i++) {
		struct ngnfs_msg_version_entry entry = {
			.blkno = htole64(blknos[i]),
			.version = htole64(versions[i]),
		};

		ngnfs_msg_put(buffer, &entry, sizeof(entry));
	}
	return finish_or_fail(buffer);
}

int ngnfs_encode_versions_reply(struct ngnfs_buffer *buffer, enum ngnfs_msg_type type,
				uint64_t request_id, int status, uint64_t set_id,
				const uint64_t *blknos, const uint64_t *versions, uint32_t count)
{
	if (type != NGNFS_MSG_WRITE_REPLY && type != NGNFS_MSG_COMMIT_REPLY)
		return -EINVAL;
	return encode_versions(buffer, type, request_id, status, set_id, 0, blknos, versions,
			       count);
}

int ngnfs_encode_alloc_reply(struct ngnfs_buffer *buffer, uint64_t request_id, int status,
			     uint32_t session_epoch, const uint64_t *blknos,
			     const uint64_t *versions, uint32_t count)
{
	if (count && !session_epoch)
		return -EINVAL;
	return encode_versions(buffer, NGNFS_MSG_ALLOC_REPLY, request_id, status, 0, session_epoch,
			       blknos, versions, count);
}

int ngnfs_encode_commit(struct ngnfs_buffer *buffer, uint64_t request_id, uint64_t set_id)
{
	struct ngnfs_msg_commit commit = { .set_id = htole64(set_id) };

	ngnfs_msg_begin(buffer, NGNFS_MSG_COMMIT, request_id, 0);
	ngnfs_msg_put(buffer, &commit, sizeof(commit));
	return finish_or_fail(buffer);
}

int ngnfs_encode_resolve(struct ngnfs_buffer *buffer, enum ngnfs_msg_type type, uint64_t request_id,
			 int status, uint64_t set_id, uint8_t outcome)
{
	struct ngnfs_msg_resolve resolve = {
		.set_id = htole64(set_id),
		.outcome = outcome,
	};

	if ((type != NGNFS_MSG_RESOLVE && type != NGNFS_MSG_RESOLVE_REPLY) ||
	    !status_is_valid(status) || (type == NGNFS_MSG_RESOLVE && status != 0) ||
	    outcome > NGNFS_SET_ABORTED)
		return -EINVAL;
	ngnfs_msg_begin(buffer, type, request_id, status);
	ngnfs_msg_put(buffer, &resolve, sizeof(resolve));
	return finish_or_fail(buffer);
}

int ngnfs_encode_alloc(struct ngnfs_buffer *buffer, uint64_t request_id, uint32_t count)
{
	struct ngnfs_msg_alloc alloc = { .count = htole32(count) };

	if (count == 0 || count > NGNFS_MSG_MAX_BLOCKS)
		return -EINVAL;
	ngnfs_msg_begin(buffer, NGNFS_MSG_ALLOC, request_id, 0);
	ngnfs_msg_put(buffer, &alloc, sizeof(alloc));
	return finish_or_fail(buffer);
}

int ngnfs_encode_cmpxchg(struct ngnfs_buffer *buffer, uint64_t request_id, uint64_t blkno,
			 uint64_t expected_version, const uint8_t *data)
{
	struct ngnfs_msg_cmpxchg cmpxchg = {
		.blkno = htole64(blkno),
		.expected_version = htole64(expected_version),
	};

	if (!data)
		return -EINVAL;
	ngnfs_msg_begin(buffer, NGNFS_MSG_CMPXCHG, request_id, 0);
	ngnfs_msg_put(buffer, &cmpxchg, sizeof(cmpxchg));
	ngnfs_msg_put(buffer, data, NGNFS_BLOCK_SIZE);
	return finish_or_fail(buffer);
}

int ngnfs_encode_cmpxchg_reply(struct ngnfs_buffer *buffer, uint64_t request_id, int status,
			       uint64_t blkno, uint64_t version)
{
	struct ngnfs_msg_cmpxchg_reply reply = {
		.blkno = htole64(blkno),
		.version = htole64(version),
	};

	if (!status_is_valid(status))
		return -EINVAL;
	ngnfs_msg_begin(buffer, NGNFS_MSG_CMPXCHG_REPLY, request_id, status);
	ngnfs_msg_put(buffer, &reply, sizeof(reply));
	return finish_or_fail(buffer);
}

int ngnfs_encode_read_incoherent(struct ngnfs_buffer *buffer, uint64_t request_id,
				 const uint64_t *blknos, uint32_t count)
{
	struct ngnfs_msg_read_incoherent read = { .count = htole32(count) };

	if (count == 0 || count > NGNFS_MSG_MAX_BLOCKS || !blknos)
		return -EINVAL;
	ngnfs_msg_begin(buffer, NGNFS_MSG_READ_INCOHERENT, request_id, 0);
	ngnfs_msg_put(buffer, &read, sizeof(read));
	for (uint32_t i = 0; i < count; i++) {
		__le64 blkno = htole64(blknos[i]);

		ngnfs_msg_put(buffer, &blkno, sizeof(blkno));
	}
	return finish_or_fail(buffer);
}

int ngnfs_encode_read_incoherent_reply(struct ngnfs_buffer *buffer, uint64_t request_id, int status,
				       const uint64_t *blknos, const uint64_t *versions,
				       const int *statuses, const uint8_t *const *datas,
				       uint32_t count)
{
	struct ngnfs_msg_read_incoherent read = { .count = htole32(count) };

	if (!status_is_valid(status) || count > NGNFS_MSG_MAX_BLOCKS ||
	    (count && (!blknos || !versions || !statuses || !datas)))
		return -EINVAL;
	for (uint32_t i = 0; i < count; i++) {
		if (!status_is_valid(statuses[i]) || (statuses[i] == 0 && !datas[i]))
			return -EINVAL;
	}
	ngnfs_msg_begin(buffer, NGNFS_MSG_READ_INCOHERENT_REPLY, request_id, status);
	ngnfs_msg_put(buffer, &read, sizeof(read));
	for (uint32_t i = 0; i < count; i++) {
		struct ngnfs_msg_incoherent_block block = {
			.blkno = htole64(blknos[i]),
			.version = htole64(versions[i]),
			.status = htole32((uint32_t)statuses[i]),
		};

		ngnfs_msg_put(buffer, &block, sizeof(block));
		if (datas[i])
			ngnfs_msg_put(buffer, datas[i], NGNFS_BLOCK_SIZE);
		else
			ngnfs_msg_put_zeros(buffer, NGNFS_BLOCK_SIZE);
	}
	return finish_or_fail(buffer);
}

int ngnfs_encode_statfs(struct ngnfs_buffer *buffer, uint64_t request_id)
{
	ngnfs_msg_begin(buffer, NGNFS_MSG_STATFS, request_id, 0);
	return finish_or_fail(buffer);
}

int ngnfs_encode_statfs_reply(struct ngnfs_buffer *buffer, uint64_t request_id, int status,
			      const struct ngnfs_statfs_figures *figures)
{
	struct ngnfs_msg_statfs_reply reply = {
		.total_blocks = htole64(figures->total_blocks),
		.free_blocks = htole64(figures->free_blocks),
		.reserved_blocks = htole64(figures->reserved_blocks),
		.staged_sets = htole64(figures->staged_sets),
		.client_sessions = htole64(figures->client_sessions),
		.group_commits = htole64(figures->group_commits),
		.commit_requests = htole64(figures->commit_requests),
	};

	if (!status_is_valid(status))
		return -EINVAL;
	ngnfs_msg_begin(buffer, NGNFS_MSG_STATFS_REPLY, request_id, status);
	ngnfs_msg_put(buffer, &reply, sizeof(reply));
	return finish_or_fail(buffer);
}

/*
 * The text is cut at NGNFS_MSG_MAX_TEXT rather than refused: an error
 * reply must always be sendable, and the first 512 bytes say enough.
 */
int ngnfs_encode_error(struct ngnfs_buffer *buffer, uint64_t request_id, int status,
		       const char *text)
{
	size_t length = text ? strnlen(text, NGNFS_MSG_MAX_TEXT) : 0;
	struct ngnfs_msg_error error = { .text_length = htole16((uint16_t)length) };

	if (status >= 0 || !status_is_valid(status))
		return -EINVAL;
	ngnfs_msg_begin(buffer, NGNFS_MSG_ERROR, request_id, status);
	ngnfs_msg_put(buffer, &error, sizeof(error));
	ngnfs_msg_put(buffer, text, length);
	return finish_or_fail(buffer);
}
