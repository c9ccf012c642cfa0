/* SPDX-License-Identifier: GPL-2.0-or-later */
#ifndef NGNFS_TEST_NGNFS_BACKEND_H
#define NGNFS_TEST_NGNFS_BACKEND_H

/*
 * The filesystem behind an FSAL_NGNFS gateway in tests and benchmarks:
 * a blockd cluster started with the shared harness (ctest/harness/
 * cluster.h), formatted with `ngnfs mkfs --devices <manifest>`, and an
 * FSAL block with its device list filled in.
 *
 * Callers write their FSAL block with the marker @DEVICES@ where the
 * comma-separated "host:port" list belongs, e.g.
 *   FSAL { Name = NGNFS; Devices = "@DEVICES@"; }
 * so the same text works for any cluster size.
 *
 * The blockd binary and the admin tool come from $NGNFS_BLOCKD and
 * $NGNFS_TOOL (ngnfs_add_cluster_test() sets both for ctest).
 *
 * XXX:
 *  - Only the first @DEVICES@ is replaced.
 */

struct ngnfs_test_cluster;

/* The default block for FSAL_NGNFS: one export on the whole cluster. */
#define NGNFS_BACKEND_DEFAULT_FSAL_BLOCK "FSAL { Name = NGNFS; Devices = \"@DEVICES@\"; }"

/*
 * Start device_count devices, mkfs them (bounded, 120 s), and return in
 * *fsal_block (malloc()ed) the template with @DEVICES@ replaced.  On
 * failure explains on stderr, stops what it started and returns -errno.
 */
int ngnfs_backend_start(unsigned int device_count, const char *name, const char *fsal_template,
			struct ngnfs_test_cluster **cluster, char **fsal_block);

#endif
