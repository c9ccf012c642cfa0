/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The device manifest parser: what it accepts (comments, blank lines,
 * trailing comments, IPv6 in brackets, device order kept) and what it
 * refuses with the line named (a missing port, a port out of range, two
 * words, an empty manifest, a missing file).
 */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "manifest.h"

static int failures;

#define EXPECT(condition, ...)                                                                     \
	do {                                                                                       \
		if (!(condition)) {                                                                \
			fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                       \
			fprintf(stderr, __VA_ARGS__);                                              \
			fprintf(stderr, "\n");                                                     \
			failures++;                                                                \
		}                                                                                  \
	} while (0)

static void expect_refused(const char *text, int expected, const char *what)
{
	struct ngnfs_manifest manifest;
	int ret = ngnfs_manifest_parse(text, what, &manifest);

	EXPECT(ret == expected, "%s: expected %d, got %d", what, expected, ret);
	EXPECT(manifest.addresses == NULL && manifest.device_count == 0,
	       "%s: a refused manifest must come back empty", what);
}

int main(void)
{
	struct ngnfs_manifest manifest;
	char path[] = "/tmp/ngnfs-manifest-XXXXXX";
	const char *text = "# devices of the test filesystem\n"
			   "\n"
			   "127.0.0.1:4000\n"
			   "   host-b.example:4001   # the second device\n"
			   "\t[::1]:4002\n"
			   "# end\n"
			   "10.0.0.4:65535";
	int fd, ret;

	ret = ngnfs_manifest_parse(text, "inline", &manifest);
	EXPECT(ret == 0, "good manifest: expected 0, got %d", ret);
	EXPECT(manifest.device_count == 4, "good manifest: expected 4 devices, got %u",
	       manifest.device_count);
	if (ret == 0 && manifest.device_count == 4) {
		const char *expected[] = { "127.0.0.1:4000", "host-b.example:4001", "[::1]:4002",
					   "10.0.0.4:65535" };

		for (int i = 0; i < 4; i++)
			EXPECT(!strcmp(manifest.addresses[i], expected[i]),
			       "device %d: expected '%s', got '%s'", i, expected[i],
			       manifest.addresses[i]);
	}
	ngnfs_manifest_free(&manifest);

	expect_refused("127.0.0.1\n", -EINVAL, "missing port");
	expect_refused("127.0.0.1:0\n", -EINVAL, "port 0");
	expect_refused("127.0.0.1:70000\n", -EINVAL, "port above 65535");
	expect_refused("127.0.0.1:12x\n", -EINVAL, "port not a number");
	expect_refused("127.0.0.1:1 127.0.0.1:2\n", -EINVAL, "two addresses on one line");
	expect_refused("::1:4000\n", -EINVAL, "IPv6 without brackets");
	expect_refused("# only comments\n\n", -EINVAL, "empty manifest");
	expect_refused(":4000\n", -EINVAL, "missing host");

	/* From a file, and a missing file. */
	fd = mkstemp(path);
	EXPECT(fd >= 0, "mkstemp");
	if (fd >= 0) {
		const char *file_text = "127.0.0.1:1\n127.0.0.1:2\n";

		EXPECT(write(fd, file_text, strlen(file_text)) == (ssize_t)strlen(file_text),
		       "write");
		close(fd);
		ret = ngnfs_manifest_load(path, &manifest);
		EXPECT(ret == 0 && manifest.device_count == 2,
		       "manifest file: expected 2 devices, got %d / %u", ret,
		       manifest.device_count);
		ngnfs_manifest_free(&manifest);
		unlink(path);
	}
	ret = ngnfs_manifest_load("/nonexistent/ngnfs-manifest", &manifest);
	EXPECT(ret == -ENOENT, "missing manifest file: expected -ENOENT, got %d", ret);

	if (failures)
		fprintf(stderr, "%d failures\n", failures);
	else
		printf("manifest: ok\n");
	return failures ? 1 : 0;
}
