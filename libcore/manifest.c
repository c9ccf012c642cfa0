/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Parsing the device manifest (format described in manifest.h).
 *
 * The parser is strict about what it accepts on an address line (one
 * host and a decimal port between 1 and 65535, an IPv6 host in brackets)
 * because a typo in a manifest otherwise shows up much later as a
 * connection to the wrong place, and silently shifting every following
 * device index by one would be worse: an address line is never skipped.
 *
 * XXX:
 *  - No include or per-device options; one address per device.
 */

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format-msg.h"
#include "manifest.h"

void ngnfs_manifest_free(struct ngnfs_manifest *manifest)
{
	if (!manifest || !manifest->addresses)
		return;
	for (uint32_t i = 0; i < manifest->device_count; i++)
		free(manifest->addresses[i]);
	free(manifest->addresses);
	manifest->addresses = NULL;
	manifest->device_count = 0;
}

/* Checks "host:port"; returns a reason or NULL. */
static const char *check_address(const char *address)
{
	const char *colon;
	const char *port;
	char *end;
	long number;

	if (address[0] == '[') {
		const char *close = strchr(address, ']');

		if (!close || close == address + 1)
			return "IPv6 host must be written [address]:port";
		if (close[1] != ':')
			return "missing ':port' after the IPv6 host";
		colon = close + 1;
	} else {
		colon = strrchr(address, ':');
		if (!colon)
			return "missing ':port'";
		if (colon == address)
			return "missing host before ':port'";
		if (memchr(address, ':', (size_t)(colon - address)))
			return "more than one ':' (write IPv6 hosts in brackets)";
	}
	port = colon + 1;
	if (!isdigit((unsigned char)port[0]))
		return "port is not a decimal number";
	errno = 0;
	number = strtol(port, &end, 10);
	if (errno || *end != '\0')
		return "port is not a decimal number";
	if (number < 1 || number > 65535)
		return "port is not between 1 and 65535";
	return NULL;
}

int ngnfs_manifest_parse(const char *text, const char *name, struct ngnfs_manifest *manifest)
{
	const char *line = text;
	uint32_t line_number = 0;
	uint32_t capacity = 0;
	int ret = 0;

	manifest->addresses = NULL;
	manifest->device_count = 0;

	while (*line) {
		const char *line_end = strchrnul(line, '\n');
		const char *start = line;
		const char *end = line_end;
		const char *hash;
		const char *why;
		char *address;

		line_number++;
		hash = memchr(start, '#', (size_t)(end - start));
		if (hash)
			end = hash;
		while (start < end && isspace((unsigned char)*start))
			start++;
		while (end > start && isspace((unsigned char)end[-1]))
			end--;
		line = *line_end ? line_end + 1 : line_end;
		if (start == end)
			continue;

		if (memchr(start, ' ', (size_t)(end - start)) ||
		    memchr(start, '\t', (size_t)(end - start))) {
			fprintf(stderr, "ngnfs manifest %s line %u: more than one word: '%.*s'\n",
				name, line_number, (int)(end - start), start);
			ret = -EINVAL;
			goto out;
		}
		address = strndup(start, (size_t)(end - start));
		if (!address) {
			ret = -ENOMEM;
			goto out;
		}
		why = check_address(address);
		if (why) {
			fprintf(stderr, "ngnfs manifest %s line %u: bad address '%s': %s\n", name,
				line_number, address, why);
			free(address);
			ret = -EINVAL;
			goto out;
		}
		if (manifest->device_count == NGNFS_MAX_DEVICES - 1) {
			fprintf(stderr, "ngnfs manifest %s line %u: more than %u devices\n", name,
				line_number, NGNFS_MAX_DEVICES - 1);
			free(address);
			ret = -E2BIG;
			goto out;
		}
		if (manifest->device_count == capacity) {
			uint32_t new_capacity = capacity ? capacity * 2 : 8;
			char **grown = realloc(manifest->addresses,
					       new_capacity * sizeof(*manifest->addresses));

			if (!grown) {
				free(address);
				ret = -ENOMEM;
				goto out;
			}
			manifest->addresses = grown;
			capacity = new_capacity;
		}
		manifest->addresses[manifest->device_count++] = address;
	}

	if (manifest->device_count == 0) {
		fprintf(stderr, "ngnfs manifest %s: no device addresses\n", name);
		ret = -EINVAL;
	}
out:
	if (ret)
		ngnfs_manifest_free(manifest);
	return ret;
}

int ngnfs_manifest_load(const char *path, struct ngnfs_manifest *manifest)
{
	FILE *file;
	char *text = NULL;
	size_t length = 0;
	size_t capacity = 0;
	int ret;

	manifest->addresses = NULL;
	manifest->device_count = 0;

	file = fopen(path, "r");
	if (!file) {
		ret = -errno;
		fprintf(stderr, "ngnfs manifest %s: cannot open: %s\n", path, strerror(-ret));
		return ret;
	}
	for (;;) {
		size_t got;

		if (length + 4096 + 1 > capacity) {
			size_t new_capacity = capacity ? capacity * 2 : 8192;
			char *grown = realloc(text, new_capacity);

			if (!grown) {
				ret = -ENOMEM;
				goto out;
			}
			text = grown;
			capacity = new_capacity;
		}
		got = fread(text + length, 1, 4096, file);
		length += got;
		if (got < 4096) {
			if (ferror(file)) {
				ret = -EIO;
				fprintf(stderr, "ngnfs manifest %s: read error\n", path);
				goto out;
			}
			break;
		}
	}
	text[length] = '\0';
	if (strlen(text) != length) {
		fprintf(stderr, "ngnfs manifest %s: contains a NUL byte\n", path);
		ret = -EINVAL;
		goto out;
	}
	ret = ngnfs_manifest_parse(text, path, manifest);
out:
	free(text);
	fclose(file);
	return ret;
}
