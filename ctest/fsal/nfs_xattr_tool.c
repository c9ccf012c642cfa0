/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * nfs_xattr_tool: NFSv4.2 extended attributes from the command line.
 *
 * A thin CLI over nfs42_xattr.c, so that a person debugging a gateway can
 * poke at xattrs over the wire (and see the exact NFS status) without a
 * kernel mount, and so shell-level checks can use the same client as the
 * tests.  One command per run; each run is one session.
 *
 * Exit status: 0 on success, 1 when the server answered with an NFS error
 * (its name is printed), 2 on usage or transport errors.
 *
 * XXX:
 *  - Values are taken and printed as raw bytes; no hex or base64 mode.
 */

#include "nfs42_xattr.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *stream)
{
	fprintf(stream,
		"usage: nfs_xattr_tool --port PORT [--host ADDR] [--uid N] [--gid N]\n"
		"                      PATH COMMAND [ARGS]\n"
		"\n"
		"PATH is from the server's pseudo root, e.g. /export/dir/file.\n"
		"Names are RFC 8276 names (no \"user.\" prefix).\n"
		"\n"
		"commands:\n"
		"  supported                 print the export's xattr_support attribute\n"
		"  get NAME                  print the value (raw bytes) to stdout\n"
		"  set NAME VALUE [either|create|replace]\n"
		"  list [MAXCOUNT]           print every name, one per line (pages with cookies)\n"
		"  remove NAME\n");
}

static int report(struct nfs42_client *client, int ret)
{
	if (ret == 0)
		return 0;
	fprintf(stderr, "nfs_xattr_tool: %s\n", nfs42_last_error(client));
	return nfs42_last_status(client) ? 1 : 2;
}

static int run_command(struct nfs42_client *client, const struct nfs42_fh *fh, int argc,
		       char **argv)
{
	const char *command = argv[0];
	int ret;

	if (strcmp(command, "supported") == 0 && argc == 1) {
		bool supported;

		ret = nfs42_xattr_supported(client, fh, &supported);
		if (ret == 0)
			printf("%s\n", supported ? "true" : "false");
		return report(client, ret);
	}
	if (strcmp(command, "get") == 0 && argc == 2) {
		static char value[1024 * 1024];
		size_t length;

		ret = nfs42_getxattr(client, fh, argv[1], value, sizeof(value), &length);
		if (ret == 0)
			fwrite(value, 1, length, stdout);
		return report(client, ret);
	}
	if (strcmp(command, "set") == 0 && (argc == 3 || argc == 4)) {
		enum nfs42_setxattr_option option = NFS42_SETXATTR_EITHER;

		if (argc == 4 && strcmp(argv[3], "create") == 0)
			option = NFS42_SETXATTR_CREATE;
		else if (argc == 4 && strcmp(argv[3], "replace") == 0)
			option = NFS42_SETXATTR_REPLACE;
		else if (argc == 4 && strcmp(argv[3], "either") != 0) {
			fprintf(stderr, "nfs_xattr_tool: unknown set option \"%s\"\n", argv[3]);
			return 2;
		}
		ret = nfs42_setxattr(client, fh, argv[1], argv[2], strlen(argv[2]), option);
		return report(client, ret);
	}
	if (strcmp(command, "list") == 0 && argc <= 2) {
		uint32_t max_count = argc == 2 ? (uint32_t)strtoul(argv[1], NULL, 0) : 65536;
		struct nfs42_xattr_names names;
		uint64_t cookie = 0;
		uint32_t i;

		do {
			ret = nfs42_listxattrs(client, fh, cookie, max_count, &names);
			if (ret < 0)
				return report(client, ret);
			for (i = 0; i < names.count; i++)
				printf("%s\n", names.names[i]);
			cookie = names.next_cookie;
			if (!names.eof && names.count == 0) {
				nfs42_xattr_names_free(&names);
				fprintf(stderr,
					"nfs_xattr_tool: LISTXATTRS returned no names and no eof "
					"at cookie %llu\n",
					(unsigned long long)cookie);
				return 2;
			}
			i = names.eof;
			nfs42_xattr_names_free(&names);
		} while (!i);
		return 0;
	}
	if (strcmp(command, "remove") == 0 && argc == 2)
		return report(client, nfs42_removexattr(client, fh, argv[1]));
	usage(stderr);
	return 2;
}

int main(int argc, char **argv)
{
	static const struct option long_options[] = {
		{ "host", required_argument, NULL, 'H' }, { "port", required_argument, NULL, 'p' },
		{ "uid", required_argument, NULL, 'u' },  { "gid", required_argument, NULL, 'g' },
		{ "help", no_argument, NULL, 'h' },	  { NULL, 0, NULL, 0 },
	};
	struct nfs42_connect_options options = { .host = "127.0.0.1" };
	struct nfs42_client *client;
	struct nfs42_fh fh;
	int status;
	int ret;
	int c;

	while ((c = getopt_long(argc, argv, "H:p:u:g:h", long_options, NULL)) != -1) {
		switch (c) {
		case 'H':
			options.host = optarg;
			break;
		case 'p':
			options.port = (uint16_t)strtoul(optarg, NULL, 10);
			break;
		case 'u':
			options.uid = (uint32_t)strtoul(optarg, NULL, 10);
			break;
		case 'g':
			options.gid = (uint32_t)strtoul(optarg, NULL, 10);
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (options.port == 0 || argc - optind < 2) {
		usage(stderr);
		return 2;
	}
	ret = nfs42_connect(&options, &client);
	if (ret < 0)
		return 2; /* nfs42_connect explained */
	ret = nfs42_lookup(client, argv[optind], &fh);
	if (ret < 0)
		status = report(client, ret);
	else
		status = run_command(client, &fh, argc - optind - 1, argv + optind + 1);
	ret = nfs42_disconnect(client);
	if (ret < 0 && status == 0) {
		fprintf(stderr, "nfs_xattr_tool: closing the session: %s\n", strerror(-ret));
		status = 2;
	}
	return status;
}
