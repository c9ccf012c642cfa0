/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Writes the fuzzer's seed corpus: one valid frame of every message type
 * (and a few variants: error statuses, empty arrays, odd participant
 * counts), one file each, into the folder given.
 *
 * Generated at test time rather than committed so that the seeds follow
 * the wire format whenever format-msg.h changes; libFuzzer then starts
 * from frames that already pass the crc and length checks.
 *
 * XXX:
 *  - Seeds are small; the largest-WRITE case is left to the unit tests.
 */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "msg.h"

static int written;

static void save(const char *dir, const char *name, struct ngnfs_buffer *buffer, int ret)
{
	char path[4096];
	FILE *file;

	if (ret) {
		fprintf(stderr, "gen_corpus: encoding %s: %s\n", name, strerror(-ret));
		exit(1);
	}
	snprintf(path, sizeof(path), "%s/seed-%s", dir, name);
	file = fopen(path, "wb");
	if (!file || fwrite(buffer->data, 1, buffer->length, file) != buffer->length ||
	    fclose(file) != 0) {
		fprintf(stderr, "gen_corpus: writing %s: %s\n", path, strerror(errno));
		exit(1);
	}
	ngnfs_buffer_reset(buffer);
	written++;
}

int main(int argc, char **argv)
{
	static uint8_t block[NGNFS_BLOCK_SIZE];
	const uint8_t fs_id[NGNFS_FS_ID_SIZE] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14 };
	const uint16_t participants[3] = { 0, 1, 2 };
	const uint64_t blknos[3] = { 1, ngnfs_blkno_make(1, 2), ngnfs_blkno_make(2, 3) };
	const uint64_t versions[3] = { 4, 5, 6 };
	const int statuses[3] = { 0, -EIO, 0 };
	const uint8_t *const datas[3] = { block, NULL, block };
	struct ngnfs_block_request get[3] = {
		{ .blkno = 1, .version = 0, .access = NGNFS_ACCESS_READ },
		{ .blkno = 2, .version = 7, .access = NGNFS_ACCESS_WRITE },
		{ .blkno = 3, .version = 8, .access = NGNFS_ACCESS_READ },
	};
	struct ngnfs_block_request release[2] = {
		{ .blkno = 1, .access = NGNFS_ACCESS_NONE },
		{ .blkno = 2, .access = NGNFS_ACCESS_READ },
	};
	struct ngnfs_block_request write[2] = {
		{ .blkno = 1, .version = 3, .data = block },
		{ .blkno = 2, .version = 4, .data = block },
	};
	struct ngnfs_buffer b;
	const char *dir;

	if (argc != 2 || strcmp(argv[1], "--help") == 0) {
		fprintf(stderr, "usage: gen_corpus DIR\n"
				"writes one valid protocol frame per file into DIR\n");
		return argc == 2 ? 0 : 2;
	}
	dir = argv[1];
	for (size_t i = 0; i < sizeof(block); i++)
		block[i] = (uint8_t)(i * 31);
	ngnfs_buffer_init(&b);

	save(dir, "hello", &b, ngnfs_encode_hello(&b, 1, fs_id, 99, NGNFS_HELLO_RECLAIM));
	save(dir, "hello-reply", &b,
	     ngnfs_encode_hello_reply(&b, 1, 0, fs_id, 5, NGNFS_HELLO_REPLY_FORMATTED, 100, 1, 3));
	save(dir, "format", &b, ngnfs_encode_format(&b, 2, fs_id, 1, 3));
	save(dir, "format-reply", &b,
	     ngnfs_encode_status_reply(&b, NGNFS_MSG_FORMAT_REPLY, 2, -EEXIST));
	save(dir, "get", &b, ngnfs_encode_get(&b, 3, get, 3));
	save(dir, "grant-data", &b, ngnfs_encode_grant(&b, 3, 0, 2, 7, NGNFS_ACCESS_WRITE, block));
	save(dir, "grant-nodata", &b, ngnfs_encode_grant(&b, 3, 0, 3, 8, NGNFS_ACCESS_READ, NULL));
	save(dir, "revoke", &b, ngnfs_encode_revoke(&b, 2, NGNFS_ACCESS_READ));
	save(dir, "release", &b, ngnfs_encode_release(&b, 4, release, 2));
	save(dir, "release-reply", &b,
	     ngnfs_encode_status_reply(&b, NGNFS_MSG_RELEASE_REPLY, 4, 0));
	save(dir, "write-single", &b,
	     ngnfs_encode_write(&b, 5, 0, NGNFS_WRITE_SINGLE, NGNFS_WRITE_RELEASE,
				NGNFS_ACCESS_READ, NULL, 0, write, 1, blknos, 1));
	save(dir, "write-held-frame", &b,
	     ngnfs_encode_write_frame(&b, 5, 78, NGNFS_WRITE_SINGLE, 0, NGNFS_ACCESS_NONE, NULL, 0,
				      write, 1, blknos, 1, 1, 3));
	save(dir, "write-stage", &b,
	     ngnfs_encode_write(&b, 6, 77, NGNFS_WRITE_STAGE, 0, NGNFS_ACCESS_NONE, participants, 3,
				write, 2, blknos, 3));
	save(dir, "write-reply", &b,
	     ngnfs_encode_versions_reply(&b, NGNFS_MSG_WRITE_REPLY, 6, 0, 77, blknos, versions, 3));
	save(dir, "commit", &b, ngnfs_encode_commit(&b, 7, 77));
	save(
	    dir, "commit-reply", &b,
	    ngnfs_encode_versions_reply(&b, NGNFS_MSG_COMMIT_REPLY, 7, -ESTALE, 77, NULL, NULL, 0));
	save(dir, "resolve", &b,
	     ngnfs_encode_resolve(&b, NGNFS_MSG_RESOLVE, 8, 0, 77, NGNFS_SET_UNKNOWN));
	save(dir, "resolve-reply", &b,
	     ngnfs_encode_resolve(&b, NGNFS_MSG_RESOLVE_REPLY, 8, 0, 77, NGNFS_SET_ABORTED));
	save(dir, "alloc", &b, ngnfs_encode_alloc(&b, 9, 16));
	save(dir, "alloc-reply", &b, ngnfs_encode_alloc_reply(&b, 9, 0, 12, blknos, versions, 2));
	save(dir, "cmpxchg", &b, ngnfs_encode_cmpxchg(&b, 10, 1, 4, block));
	save(dir, "cmpxchg-reply", &b, ngnfs_encode_cmpxchg_reply(&b, 10, -EBUSY, 1, 5));
	save(dir, "read-incoherent", &b, ngnfs_encode_read_incoherent(&b, 11, blknos, 3));
	save(dir, "read-incoherent-reply", &b,
	     ngnfs_encode_read_incoherent_reply(&b, 11, 0, blknos, versions, statuses, datas, 3));
	save(dir, "statfs", &b, ngnfs_encode_statfs(&b, 12));
	save(dir, "statfs-reply", &b,
	     ngnfs_encode_statfs_reply(
		 &b, 12, 0, &(struct ngnfs_statfs_figures){ 1000, 900, 10, 2, 1, 40, 90 }));
	save(dir, "error", &b, ngnfs_encode_error(&b, 13, -EPROTO, "unknown message type"));

	ngnfs_buffer_free(&b);
	printf("gen_corpus: wrote %d seed frames to %s\n", written, dir);
	return 0;
}
