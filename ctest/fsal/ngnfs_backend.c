/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * A formatted blockd cluster for an FSAL_NGNFS gateway; see ngnfs_backend.h.
 *
 * Kept apart from ganesha_harness.c so the ganesha harness stays usable
 * (and tested) without blockd: only tests and benchmarks that run
 * FSAL_NGNFS link this, with the shared cluster harness.
 *
 * XXX:
 *  - mkfs output goes to our stderr, not to a file.
 */

#include "ngnfs_backend.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "cluster.h"

#define DEVICES_MARKER	"@DEVICES@"
#define MKFS_TIMEOUT_MS 120000

int ngnfs_backend_start(unsigned int device_count, const char *name, const char *fsal_template,
			struct ngnfs_test_cluster **cluster, char **fsal_block)
{
	const char *tool = getenv("NGNFS_TOOL");
	const char *marker = strstr(fsal_template, DEVICES_MARKER);
	const char *const *addresses;
	char status_text[64];
	char *devices = NULL;
	size_t devices_size = 0;
	int wait_status = 0;
	unsigned int i;
	FILE *list;
	int ret;

	*cluster = NULL;
	*fsal_block = NULL;
	if (!marker) {
		fprintf(stderr, "ngnfs backend: FSAL block %s has no %s marker\n", fsal_template,
			DEVICES_MARKER);
		return -EINVAL;
	}
	if (!tool || !*tool) {
		fprintf(stderr,
			"ngnfs backend: NGNFS_TOOL (the ngnfs admin tool, for mkfs) is not set\n");
		return -ENOENT;
	}
	*cluster = ngnfs_test_cluster_start(device_count, name);
	if (!*cluster) {
		fprintf(stderr, "ngnfs backend: could not start %u blockd devices\n", device_count);
		return -EIO;
	}
	{
		const char *argv[] = { tool, "mkfs", "--devices",
				       ngnfs_test_cluster_manifest(*cluster), NULL };

		ret = ngnfs_test_run(argv, NULL, MKFS_TIMEOUT_MS, &wait_status);
	}
	if (ret < 0 || !WIFEXITED(wait_status) || WEXITSTATUS(wait_status) != 0) {
		fprintf(stderr, "ngnfs backend: %s mkfs --devices %s: %s\n", tool,
			ngnfs_test_cluster_manifest(*cluster),
			ret < 0 ? strerror(-ret)
				: ngnfs_test_describe_status(wait_status, status_text,
							     sizeof(status_text)));
		ngnfs_test_cluster_dump_logs(*cluster, 4096);
		ret = ret < 0 ? ret : -EIO;
		goto fail;
	}
	list = open_memstream(&devices, &devices_size);
	if (!list) {
		ret = -ENOMEM;
		goto fail;
	}
	addresses = ngnfs_test_cluster_addresses(*cluster);
	for (i = 0; addresses[i]; i++)
		fprintf(list, "%s%s", i ? "," : "", addresses[i]);
	fclose(list);
	if (asprintf(fsal_block, "%.*s%s%s", (int)(marker - fsal_template), fsal_template, devices,
		     marker + strlen(DEVICES_MARKER)) < 0) {
		*fsal_block = NULL;
		ret = -ENOMEM;
		goto fail;
	}
	free(devices);
	return 0;
fail:
	free(devices);
	ngnfs_test_cluster_stop(*cluster);
	*cluster = NULL;
	return ret;
}
