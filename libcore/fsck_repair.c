/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Online repair of what fsck found: incoherent reads and compare-and-
 * exchange, as the design brief's "online repair" asks.
 *
 * A repair must not need the filesystem quiet, and must never overwrite
 * a change it did not see.  So it holds no grant: it reads the block
 * incoherently (whatever is committed, with its version), checks that the
 * block still says what the walk saw, corrects that one field, and writes
 * the block with CMPXCHG at the version it read.  blockd refuses the write
 * when the version moved or somebody holds write access, and the repair
 * reads and checks again.  A field that no longer says what the walk saw
 * is left alone: the walk's own count may be out of date as well.
 *
 * It runs on a client of its own rather than the checking mount's:
 * blockd's CMPXCHG revokes the readers of the block other than the
 * writing session, so with sessions of its own every cached copy,
 * gateways' and the checking mount's alike, is revoked after the fix,
 * and no cache goes on trusting the old block.
 *
 * blockd also refuses CMPXCHG (-EBUSY) while any other client holds write
 * access, and a gateway keeps the write access of an inode it changed
 * until somebody asks for it.  So on -EBUSY the repair asks for read
 * access, which makes the server bring the writer down to read (writing
 * back what it had dirty), gives it up at once, and reads again.  It
 * gives up any access a server revokes from it in between.
 *
 * A fixed inode's change attribute is bumped too, so NFS clients that
 * cached its attributes notice.
 *
 * XXX:
 *  - Only the fields fsck lists as fixes (link and entry counts, a
 *    directory's "..").
 */

#include <endian.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "client.h"
#include "fs-internal.h"
#include "fsck.h"

#define REPAIR_RETRY_DELAY_MS 20

_Static_assert(sizeof(((struct ngnfs_fsck_report *)0)->fs_id) == NGNFS_FS_ID_SIZE,
	       "the report's fs id is a filesystem id");

/* The repair's client, for its revoke callback (set once it exists). */
struct repair {
	struct ngnfs_client *_Atomic client;
};

static void repair_revoke(void *owner, uint64_t blkno, uint8_t access)
{
	struct repair *repair = owner;
	struct ngnfs_client *client = atomic_load(&repair->client);

	/* only the read access taken to push a writer out; never kept */
	(void)access;
	if (client)
		ngnfs_client_release(client, blkno, NGNFS_ACCESS_NONE);
}

static void repair_session_reset(void *owner, uint16_t device, bool server_restarted)
{
	(void)owner;
	(void)device;
	(void)server_restarted;
}

static const struct ngnfs_client_ops repair_client_ops = {
	.revoke = repair_revoke,
	.session_reset = repair_session_reset,
};

static void say(ngnfs_fsck_line_fn fn, void *arg, bool problem, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void say(ngnfs_fsck_line_fn fn, void *arg, bool problem, const char *fmt, ...)
{
	char line[512];
	va_list args;

	va_start(args, fmt);
	vsnprintf(line, sizeof(line), fmt, args);
	va_end(args);
	if (fn)
		fn(arg, problem, line);
}

static const char *field_name(enum ngnfs_fsck_field field)
{
	switch (field) {
	case NGNFS_FSCK_NLINK:
		return "link count";
	case NGNFS_FSCK_ENTRY_COUNT:
		return "entry count";
	case NGNFS_FSCK_PARENT:
		return "parent";
	}
	return "field";
}

static uint64_t field_get(const struct ngnfs_inode *inode, enum ngnfs_fsck_field field)
{
	switch (field) {
	case NGNFS_FSCK_NLINK:
		return le32toh(inode->nlink);
	case NGNFS_FSCK_ENTRY_COUNT:
		return le64toh(inode->entry_count);
	case NGNFS_FSCK_PARENT:
		return le64toh(inode->parent_ino);
	}
	return 0;
}

static void field_set(struct ngnfs_inode *inode, enum ngnfs_fsck_field field, uint64_t value)
{
	switch (field) {
	case NGNFS_FSCK_NLINK:
		inode->nlink = htole32((uint32_t)value);
		break;
	case NGNFS_FSCK_ENTRY_COUNT:
		inode->entry_count = htole64(value);
		break;
	case NGNFS_FSCK_PARENT:
		inode->parent_ino = htole64(value);
		break;
	}
}

/*
 * One fix: 1 when written, 0 when left alone (reported), or a negative
 * errno for a failure to talk to the device.
 */
static int repair_one(struct ngnfs_client *client, const struct ngnfs_fsck_fix *fix,
		      ngnfs_fsck_line_fn fn, void *arg)
{
	static _Thread_local uint8_t block[NGNFS_BLOCK_SIZE];
	struct ngnfs_inode *inode = (struct ngnfs_inode *)block;
	const char *name = field_name(fix->field);
	uint64_t version, written;
	unsigned int try;
	int ret;

	for (try = 1; try <= NGNFS_FSCK_REPAIR_TRIES; try++) {
		ret = ngnfs_client_read_incoherent_sync(client, fix->ino, &version, block);
		if (ret < 0) {
			say(fn, arg, true, "inode %llu: reading it for the repair failed: %s",
			    (unsigned long long)fix->ino, strerror(-ret));
			return ret;
		}
		if (ngnfs_block_check(block, NGNFS_MAGIC_INODE, fix->ino, fix->ino, "fsck repair") <
			0 ||
		    le64toh(inode->generation) != fix->generation) {
			say(fn, arg, true,
			    "inode %llu: not repaired: it is no longer the inode the check saw "
			    "(generation %llu); check again",
			    (unsigned long long)fix->ino, (unsigned long long)fix->generation);
			return 0;
		}
		if (field_get(inode, fix->field) != fix->found) {
			say(fn, arg, true,
			    "inode %llu: not repaired: its %s is now %llu, the check saw %llu; "
			    "check again",
			    (unsigned long long)fix->ino, name,
			    (unsigned long long)field_get(inode, fix->field),
			    (unsigned long long)fix->found);
			return 0;
		}
		field_set(inode, fix->field, fix->expected);
		inode->change = htole64(le64toh(inode->change) + 1);
		ret = ngnfs_client_cmpxchg_sync(client, fix->ino, version, block, &written);
		if (ret == 0) {
			say(fn, arg, false, "inode %llu: %s %llu repaired to %llu (version %llu)",
			    (unsigned long long)fix->ino, name, (unsigned long long)fix->found,
			    (unsigned long long)fix->expected, (unsigned long long)written);
			return 1;
		}
		if (ret != -ESTALE && ret != -EBUSY) {
			say(fn, arg, true, "inode %llu: writing the repair failed: %s",
			    (unsigned long long)fix->ino, strerror(-ret));
			return ret;
		}
		/* changed or held underneath: read it again */
		say(fn, arg, false,
		    "inode %llu: %s while repairing (try %u of %u); reading it again",
		    (unsigned long long)fix->ino,
		    ret == -ESTALE ? "changed" : "held for writing by another client", try,
		    NGNFS_FSCK_REPAIR_TRIES);
		if (ret == -EBUSY) {
			/* the writer is brought down to read before we are granted */
			ret = ngnfs_client_get_sync(client, fix->ino, NGNFS_ACCESS_READ, 0,
						    &version, NULL, NULL);
			if (ret == 0)
				ngnfs_client_release(client, fix->ino, NGNFS_ACCESS_NONE);
		}
		nanosleep(&(struct timespec){ .tv_nsec = REPAIR_RETRY_DELAY_MS * 1000000L }, NULL);
	}
	say(fn, arg, true, "inode %llu: not repaired: it kept changing underneath; check again",
	    (unsigned long long)fix->ino);
	return 0;
}

int ngnfs_fsck_repair(const struct ngnfs_mount_options *mount,
		      const struct ngnfs_fsck_report *report, ngnfs_fsck_line_fn fn, void *arg,
		      size_t *repaired)
{
	struct ngnfs_client_config config = {
		.device_addresses = mount->device_addresses,
		.device_count = mount->device_count,
	};
	struct repair repair = { .client = NULL };
	struct ngnfs_client *client;
	size_t i;
	int ret = 0;

	ngnfs_clear_error();
	*repaired = 0;
	if (report->fix_count == 0)
		return 0;
	memcpy(config.fs_id, report->fs_id, sizeof(config.fs_id));
	ret = ngnfs_client_create(&config, &repair_client_ops, &repair, &client);
	if (ret < 0)
		return ngnfs_fail(ret, "fsck repair: cannot connect to the devices (%s)",
				  strerror(-ret));
	atomic_store(&repair.client, client);
	for (i = 0; i < report->fix_count; i++) {
		ret = repair_one(client, &report->fixes[i], fn, arg);
		if (ret < 0)
			break;
		*repaired += (size_t)ret;
		ret = 0;
	}
	ngnfs_client_destroy(client);
	return ret;
}
