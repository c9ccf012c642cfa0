/* SPDX-License-Identifier: GPL-2.0-or-later */
#ifndef NGNFS_MANIFEST_H
#define NGNFS_MANIFEST_H

/*
 * The device manifest: which address serves which device.
 *
 * A manifest is a text file with one "host:port" per line in device
 * index order (the first address line is device 0).  Blank lines and
 * lines whose first non-blank character is '#' are ignored, and so is
 * anything after a '#' on an address line, so that an operator can
 * annotate devices.  Clients and blockd (--peers) read the same format,
 * which is why the parser lives in libcore and not in either user.
 *
 * Parse errors name the file and the line, because the manifest is
 * written by hand.
 *
 * XXX:
 *  - Hosts are not resolved here; a name that does not resolve is only
 *    noticed when someone connects to it.
 */

#include <stdint.h>

struct ngnfs_manifest {
	char **addresses; /* "host:port", NUL-terminated strings, by device index */
	uint16_t device_count;
};

/*
 * Read path.  Returns 0, -ENOENT and friends from opening the file,
 * -EINVAL for a malformed line or an empty manifest (explained on stderr
 * with the path and line number), -E2BIG for more than NGNFS_MAX_DEVICES
 * addresses, -ENOMEM.
 */
int ngnfs_manifest_load(const char *path, struct ngnfs_manifest *manifest);
/* The same from text in memory; name is used in error messages. */
int ngnfs_manifest_parse(const char *text, const char *name, struct ngnfs_manifest *manifest);
void ngnfs_manifest_free(struct ngnfs_manifest *manifest);

#endif
