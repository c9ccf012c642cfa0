/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * End-to-end tests of NFSv4.2 extended attributes (RFC 8276) through a
 * real ganesha.nfsd, with our own wire client (nfs42_xattr.c).
 *
 * The test is parametric in the gateway: --fsal-block gives the FSAL { }
 * text (default FSAL_VFS on a folder the harness makes), --plugins-dir
 * where ganesha finds the FSAL, --expect whether the export must claim
 * xattr support.  The same binary therefore runs
 *   - now, against stock FSAL_VFS / FSAL_MEM, which in ganesha 4.3 do NOT
 *     implement xattrs (only FSAL_CEPH sets xattr_support): --expect
 *     unsupported checks the session machinery, that the server decodes
 *     every xattr request we encode (it answers NFS4ERR_NOTSUPP, not
 *     NFS4ERR_BADXDR / GARBAGE_ARGS), the error paths, and concurrent
 *     clients with their own owners;
 *   - later, against FSAL_NGNFS: --expect supported runs set / get /
 *     CREATE / REPLACE / list with cookie paging / remove / 64 KiB value /
 *     long name / missing-name errors; with --local-xattrs (an FSAL that
 *     stores xattrs of a local folder as user.* xattrs) it also checks
 *     that what NFS sets is what getxattr(2) sees and the other way round.
 *
 * For FSAL_NGNFS, --ngnfs-devices N starts and formats the blockd cluster
 * behind the gateway (ngnfs_backend.c) and fills in @DEVICES@.
 *
 * The files the tests use are created through libnfs (NFSv4.0) so the
 * test needs no local access to the exported filesystem.
 *
 * Reference servers for --expect supported exist in the FSAL build:
 * ganesha's own FSAL_MEM plus ctest/fsal/memxattr/mem_xattr.c, and the
 * stock FSAL_VFS with ctest/fsal/vfsxattr/vfs_xattr.c storing user.*
 * xattrs on the exported files (for --local-xattrs); see
 * ctest/fsal-tools.cmake.
 *
 * Ganesha 4.3 decodes an xattr value as a utf8string of at most
 * XDR_STRING_MAXLEN - 1 = 8191 bytes, whatever the FSAL: a larger SETXATTR
 * is GARBAGE_ARGS before the FSAL sees it.  So tests through ganesha 4.3
 * run with --max-value-size 8191; 64 KiB is the default for a gateway
 * without that limit.
 *
 * XXX:
 *  - No test of a non-root credential against xattr permissions yet.
 *  - The reference servers are test shims over ganesha's FSALs: they prove
 *    the client and the tests, not any production FSAL.
 */

#include <errno.h>
#include <getopt.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <fcntl.h>

#include <cmocka.h>
#include <nfsc/libnfs.h>

#include "ganesha_harness.h"
#include "libnfs_client_id.h"
#include "nfs42_xattr.h"
#include "ngnfs_backend.h"
#include "cluster.h"

#define TARGET_FILE    "xattr-target"
#define LIST_NAMES_MAX 1000

static struct {
	const char *fsal_block;
	const char *export_path;
	const char *plugins_dir;
	unsigned int ngnfs_devices;
	const char *tool; /* nfs_xattr_tool, for the CLI test */
	bool fsal_block_given;
	bool expect_supported;
	bool local_xattrs;
	unsigned int max_name_length;
	unsigned int max_value_size;
	bool value_limit_enforced; /* max_value_size + 1 must be refused */
	unsigned int list_names;
} config = {
	.value_limit_enforced = true,
	.list_names = 200,
	.fsal_block = "FSAL { Name = VFS; }",
	.max_name_length = 255,
	.max_value_size = 64 * 1024,
};

static struct ganesha_instance *gateway;
static struct ngnfs_test_cluster *backend; /* --ngnfs-devices */
static char *backend_fsal_block;
static char target_path[512]; /* from the pseudo root */

/* ---- helpers ---------------------------------------------------------- */

#define check(condition, ...)                                                                      \
	do {                                                                                       \
		if (!(condition)) {                                                                \
			print_message("CHECK FAILED %s:%d: %s\n  ", __FILE__, __LINE__,            \
				      #condition);                                                 \
			print_message(__VA_ARGS__);                                                \
			print_message("\n");                                                       \
			fail();                                                                    \
		}                                                                                  \
	} while (0)

/* A call that must succeed; says what the server answered otherwise. */
#define check_ok(client, call)                                                                     \
	do {                                                                                       \
		int check_ok_ret = (call);                                                         \
		check(check_ok_ret == 0, "expected success, got %d (%s): %s", check_ok_ret,        \
		      strerror(-check_ok_ret), nfs42_last_error(client));                          \
	} while (0)

/* A call that must fail with exactly this nfsstat4. */
#define check_status(client, call, expected)                                                       \
	do {                                                                                       \
		int check_status_ret = (call);                                                     \
		uint32_t check_status_got = nfs42_last_status(client);                             \
		check(check_status_ret == nfs42_status_to_errno(expected) &&                       \
			  check_status_got == (uint32_t)(expected),                                \
		      "expected %s, got return %d status %s: %s", nfs42_status_name(expected),     \
		      check_status_ret, nfs42_status_name(check_status_got),                       \
		      check_status_ret ? nfs42_last_error(client) : "(success)");                  \
	} while (0)

static struct nfs42_client *connect_client(void)
{
	struct nfs42_connect_options options = { .port = ganesha_instance_port(gateway) };
	struct nfs42_client *client = NULL;
	int ret = nfs42_connect(&options, &client);

	check(ret == 0, "expected an NFSv4.2 session with 127.0.0.1:%u, got %d (%s)", options.port,
	      ret, strerror(-ret));
	return client;
}

static void disconnect_client(struct nfs42_client *client)
{
	int ret = nfs42_disconnect(client);

	check(ret == 0, "expected DESTROY_SESSION/DESTROY_CLIENTID to succeed, got %d (%s)", ret,
	      strerror(-ret));
}

/* Create (or truncate) a file in the export through libnfs. */
static int create_file_over_nfs(const char *relative_path)
{
	struct nfs_context *nfs = nfs_init_context();
	struct nfs_url *url = NULL;
	struct nfsfh *file = NULL;
	char url_text[1024];
	char path[600];
	int ret;

	if (!nfs)
		return -ENOMEM;
	ngnfs_libnfs_set_unique_client_id(nfs, "xattr-test");
	ret = ganesha_instance_url(gateway, NULL, NULL, url_text, sizeof(url_text));
	if (ret == 0) {
		url = nfs_parse_url_dir(nfs, url_text);
		ret = url ? 0 : -EINVAL;
	}
	if (ret == 0)
		ret = nfs_mount(nfs, url->server, url->path);
	if (ret == 0) {
		snprintf(path, sizeof(path), "/%s", relative_path);
		ret = nfs_open2(nfs, path, O_CREAT | O_WRONLY, 0644, &file);
	}
	if (ret == 0)
		ret = nfs_close(nfs, file);
	if (ret < 0)
		fprintf(stderr, "create %s over NFS (%s): %s\n", relative_path, url_text,
			nfs_get_error(nfs));
	if (url)
		nfs_destroy_url(url);
	nfs_destroy_context(nfs);
	return ret;
}

static void fill_pattern(uint8_t *buffer, size_t length, unsigned int seed)
{
	size_t i;

	for (i = 0; i < length; i++)
		buffer[i] = (uint8_t)(i * 131 + seed * 7 + (i >> 8));
}

static void check_value(struct nfs42_client *client, const struct nfs42_fh *fh, const char *name,
			const void *expected, size_t expected_length)
{
	static uint8_t buffer[128 * 1024];
	size_t length = 0;

	check_ok(client, nfs42_getxattr(client, fh, name, buffer, sizeof(buffer), &length));
	check(length == expected_length, "GETXATTR \"%.40s\" on %s: expected %zu bytes, got %zu",
	      name, fh->path, expected_length, length);
	check(memcmp(buffer, expected, length) == 0,
	      "GETXATTR \"%.40s\" on %s: value differs from what was set", name, fh->path);
}

static int group_teardown(void **state)
{
	int ret;

	(void)state;
	ret = ganesha_instance_stop(gateway);
	gateway = NULL;
	if (ret < 0)
		fprintf(stderr, "ganesha.nfsd did not stop cleanly: %s\n", strerror(-ret));
	if (backend && ngnfs_test_cluster_stop(backend) < 0) {
		fprintf(stderr, "the blockd devices behind the gateway did not stop cleanly\n");
		ret = -ECHILD;
	}
	backend = NULL;
	free(backend_fsal_block);
	backend_fsal_block = NULL;
	return ret < 0 ? -1 : 0;
}

static int group_setup(void **state)
{
	struct ganesha_options options = {
		.fsal_block = config.fsal_block,
		.export_path = config.export_path,
		.plugins_dir = config.plugins_dir,
		.name = "nfs42-xattr",
	};

	if (config.ngnfs_devices) {
		const char *template =
		    config.fsal_block_given ? config.fsal_block : NGNFS_BACKEND_DEFAULT_FSAL_BLOCK;

		if (ngnfs_backend_start(config.ngnfs_devices, "nfs42-xattr", template, &backend,
					&backend_fsal_block) < 0)
			return -1;
		options.fsal_block = backend_fsal_block;
		/* FSAL_NGNFS exports a path inside ngnfs, not a local folder. */
		if (!options.export_path)
			options.export_path = "/";
	}
	gateway = ganesha_instance_start_with(&options);
	if (!gateway) {
		group_teardown(state);
		return -1;
	}
	snprintf(target_path, sizeof(target_path), "%s/%s", ganesha_instance_pseudo_path(gateway),
		 TARGET_FILE);
	if (create_file_over_nfs(TARGET_FILE) < 0) {
		group_teardown(state);
		return -1;
	}
	return 0;
}

/* ---- tests for every gateway ------------------------------------------ */

/* The session works and the export's xattr_support is what we expect. */
static void test_session_reports_xattr_support(void **state)
{
	struct nfs42_client *client = connect_client();
	struct nfs42_fh fh;
	bool supported = !config.expect_supported;

	(void)state;
	check_ok(client, nfs42_lookup(client, target_path, &fh));
	check(fh.length > 0, "expected a file handle for %s, got an empty one", target_path);
	check_ok(client, nfs42_xattr_supported(client, &fh, &supported));
	check(supported == config.expect_supported,
	      "expected xattr_support %s for %s (FSAL block %s), server says %s",
	      config.expect_supported ? "true" : "false", target_path, config.fsal_block,
	      supported ? "true" : "false");
	disconnect_client(client);
}

/* Errors are the server's exact status, and do not break the session. */
static void test_lookup_missing_is_noent(void **state)
{
	struct nfs42_client *client = connect_client();
	struct nfs42_fh fh;
	char missing[600];
	int i;

	(void)state;
	snprintf(missing, sizeof(missing), "%s/no-such-file",
		 ganesha_instance_pseudo_path(gateway));
	/* Several in a row: a failed op must not desynchronise the slot. */
	for (i = 0; i < 3; i++)
		check_status(client, nfs42_lookup(client, missing, &fh), NFS42_ERR_NOENT);
	check(strstr(nfs42_last_error(client), "no-such-file") != NULL,
	      "expected the error message to name the path, got \"%s\"", nfs42_last_error(client));
	check_ok(client, nfs42_lookup(client, target_path, &fh));
	disconnect_client(client);
}

/*
 * Four sessions at once, used in turn: each needs its own client owner,
 * or the server would take the second EXCHANGE_ID as a reboot of the
 * first client and kill its session (NFS4ERR_BADSESSION).
 */
static void test_concurrent_clients_keep_their_sessions(void **state)
{
	struct nfs42_client *clients[4];
	struct nfs42_fh fh;
	bool supported;
	int round, i;

	(void)state;
	for (i = 0; i < 4; i++)
		clients[i] = connect_client();
	for (round = 0; round < 3; round++) {
		for (i = 0; i < 4; i++) {
			check_ok(clients[i], nfs42_lookup(clients[i], target_path, &fh));
			check_ok(clients[i], nfs42_xattr_supported(clients[i], &fh, &supported));
		}
	}
	for (i = 0; i < 4; i++)
		disconnect_client(clients[i]);
}

/* ---- the gateway must refuse xattrs cleanly ---------------------------- */

/*
 * Every xattr op answers NFS4ERR_NOTSUPP: the server decoded the whole
 * COMPOUND (a wrongly encoded argument would give NFS4ERR_BADXDR or an
 * RPC GARBAGE_ARGS) and reached the op.
 */
static void test_unsupported_ops_answer_notsupp(void **state)
{
	struct nfs42_client *client = connect_client();
	struct nfs42_xattr_names names;
	struct nfs42_fh fh;
	uint8_t value[4096];
	size_t length;

	(void)state;
	fill_pattern(value, sizeof(value), 1);
	check_ok(client, nfs42_lookup(client, target_path, &fh));
	check_status(client, nfs42_getxattr(client, &fh, "comment", value, sizeof(value), &length),
		     NFS42_ERR_NOTSUPP);
	check_status(
	    client,
	    nfs42_setxattr(client, &fh, "comment", value, sizeof(value), NFS42_SETXATTR_EITHER),
	    NFS42_ERR_NOTSUPP);
	check_status(client,
		     nfs42_setxattr(client, &fh, "comment", value, 3, NFS42_SETXATTR_CREATE),
		     NFS42_ERR_NOTSUPP);
	check_status(client,
		     nfs42_setxattr(client, &fh, "comment", value, 3, NFS42_SETXATTR_REPLACE),
		     NFS42_ERR_NOTSUPP);
	check_status(client, nfs42_listxattrs(client, &fh, 0, 4096, &names), NFS42_ERR_NOTSUPP);
	check_status(client, nfs42_removexattr(client, &fh, "comment"), NFS42_ERR_NOTSUPP);
	check(strstr(nfs42_last_error(client), "REMOVEXATTR") &&
		  strstr(nfs42_last_error(client), "comment"),
	      "expected the error to name the op and the xattr, got \"%s\"",
	      nfs42_last_error(client));
	/* The session is still good after six failed ops. */
	check_ok(client, nfs42_lookup(client, target_path, &fh));
	disconnect_client(client);
}

/* ---- functional tests (the gateway supports xattrs) -------------------- */

static void test_set_then_get(void **state)
{
	struct nfs42_client *client = connect_client();
	struct nfs42_fh fh;

	(void)state;
	check_ok(client, nfs42_lookup(client, target_path, &fh));
	check_ok(client, nfs42_setxattr(client, &fh, "alpha", "one", 3, NFS42_SETXATTR_EITHER));
	check_value(client, &fh, "alpha", "one", 3);
	/* EITHER overwrites too. */
	check_ok(client, nfs42_setxattr(client, &fh, "alpha", "uno", 3, NFS42_SETXATTR_EITHER));
	check_value(client, &fh, "alpha", "uno", 3);
	disconnect_client(client);
}

static void test_create_and_replace_semantics(void **state)
{
	struct nfs42_client *client = connect_client();
	struct nfs42_fh fh;

	(void)state;
	check_ok(client, nfs42_lookup(client, target_path, &fh));
	check_ok(client, nfs42_setxattr(client, &fh, "beta", "first", 5, NFS42_SETXATTR_CREATE));
	check_status(client, nfs42_setxattr(client, &fh, "beta", "again", 5, NFS42_SETXATTR_CREATE),
		     NFS42_ERR_EXIST);
	check_value(client, &fh, "beta", "first", 5);
	check_ok(client, nfs42_setxattr(client, &fh, "beta", "second!", 7, NFS42_SETXATTR_REPLACE));
	check_value(client, &fh, "beta", "second!", 7);
	check_status(client,
		     nfs42_setxattr(client, &fh, "never-set", "x", 1, NFS42_SETXATTR_REPLACE),
		     NFS42_ERR_NOXATTR);
	check_status(client, nfs42_getxattr(client, &fh, "never-set", NULL, 0, &(size_t){ 0 }),
		     NFS42_ERR_NOXATTR);
	disconnect_client(client);
}

static void test_missing_names(void **state)
{
	struct nfs42_client *client = connect_client();
	struct nfs42_fh fh;
	size_t length;
	char buffer[16];

	(void)state;
	check_ok(client, nfs42_lookup(client, target_path, &fh));
	check_status(client,
		     nfs42_getxattr(client, &fh, "missing", buffer, sizeof(buffer), &length),
		     NFS42_ERR_NOXATTR);
	check_status(client, nfs42_removexattr(client, &fh, "missing"), NFS42_ERR_NOXATTR);
	disconnect_client(client);
}

static void test_remove(void **state)
{
	struct nfs42_client *client = connect_client();
	struct nfs42_xattr_names names;
	struct nfs42_fh fh;
	size_t length;
	char buffer[16];
	uint32_t i;

	(void)state;
	check_ok(client, nfs42_lookup(client, target_path, &fh));
	check_ok(client, nfs42_setxattr(client, &fh, "doomed", "x", 1, NFS42_SETXATTR_EITHER));
	check_ok(client, nfs42_removexattr(client, &fh, "doomed"));
	check_status(client, nfs42_getxattr(client, &fh, "doomed", buffer, sizeof(buffer), &length),
		     NFS42_ERR_NOXATTR);
	check_status(client, nfs42_removexattr(client, &fh, "doomed"), NFS42_ERR_NOXATTR);
	check_ok(client, nfs42_listxattrs(client, &fh, 0, 65536, &names));
	for (i = 0; i < names.count; i++)
		check(strcmp(names.names[i], "doomed") != 0,
		      "expected \"doomed\" gone from LISTXATTRS of %s after REMOVEXATTR", fh.path);
	nfs42_xattr_names_free(&names);
	disconnect_client(client);
}

/*
 * The largest value the gateway takes (--max-value-size, default 64 KiB).
 * Also covers ganesha's retry when a value exceeds its first 1 KiB buffer.
 */
static void test_large_value(void **state)
{
	struct nfs42_client *client = connect_client();
	static uint8_t value[64 * 1024];
	size_t size = config.max_value_size;
	struct nfs42_fh fh;
	uint8_t small[100];
	size_t length = 0;

	(void)state;
	fill_pattern(value, size, 2);
	check_ok(client, nfs42_lookup(client, target_path, &fh));
	check_ok(client, nfs42_setxattr(client, &fh, "big", value, size, NFS42_SETXATTR_EITHER));
	check_value(client, &fh, "big", value, size);
	/* Our client reports the size when the caller's buffer is short. */
	check(nfs42_getxattr(client, &fh, "big", small, sizeof(small), &length) == -ERANGE &&
		  length == size,
	      "expected -ERANGE and length %zu for a 100-byte buffer, got length %zu", size,
	      length);
	check_ok(client, nfs42_removexattr(client, &fh, "big"));
	disconnect_client(client);
}

/*
 * One byte over --max-value-size must be refused (by the FSAL or, for
 * ganesha 4.3, by its XDR decoder: GARBAGE_ARGS), nothing stored, and the
 * session must still work afterwards.
 */
static void test_value_over_limit_refused(void **state)
{
	if (!config.value_limit_enforced) {
		print_message("(--no-value-limit: the gateway's value limit is not known)\n");
		skip();
	}
	struct nfs42_client *client;
	static uint8_t value[64 * 1024 + 1];
	size_t size = config.max_value_size + 1;
	struct nfs42_fh fh;
	size_t length;
	int ret;

	(void)state;
	client = connect_client();
	fill_pattern(value, size, 3);
	check_ok(client, nfs42_lookup(client, target_path, &fh));
	ret = nfs42_setxattr(client, &fh, "too-big", value, size, NFS42_SETXATTR_EITHER);
	check(ret < 0, "expected SETXATTR of %zu bytes (limit %u) to fail, it succeeded", size,
	      config.max_value_size);
	check_status(client, nfs42_getxattr(client, &fh, "too-big", value, sizeof(value), &length),
		     NFS42_ERR_NOXATTR);
	disconnect_client(client);
}

/*
 * A name of --max-name-length bytes (default 255) round-trips; one byte
 * more is NFS4ERR_NAMETOOLONG and nothing is stored.
 */
static void test_long_name(void **state)
{
	struct nfs42_client *client = connect_client();
	char name[NFS42_XATTR_NAME_MAX + 2];
	struct nfs42_fh fh;
	size_t length;

	(void)state;
	memset(name, 'n', config.max_name_length);
	name[config.max_name_length] = '\0';
	check_ok(client, nfs42_lookup(client, target_path, &fh));
	check_ok(client, nfs42_setxattr(client, &fh, name, "long", 4, NFS42_SETXATTR_CREATE));
	check_value(client, &fh, name, "long", 4);
	check_ok(client, nfs42_removexattr(client, &fh, name));

	name[config.max_name_length] = 'n';
	name[config.max_name_length + 1] = '\0';
	check_status(client, nfs42_setxattr(client, &fh, name, "long", 4, NFS42_SETXATTR_EITHER),
		     NFS42_ERR_NAMETOOLONG);
	check_status(client, nfs42_getxattr(client, &fh, name, NULL, 0, &length),
		     NFS42_ERR_NAMETOOLONG);
	disconnect_client(client);
}

/* Many names, read back in pages of at most max_count bytes. */
static void test_list_pages_with_cookies(void **state)
{
	struct nfs42_client *client = connect_client();
	const uint32_t max_count = 512;
	bool seen[LIST_NAMES_MAX] = { false };
	struct nfs42_xattr_names names;
	struct nfs42_fh fh;
	uint64_t cookie = 0;
	unsigned int pages = 0, found = 0, index;
	char name[64];
	uint32_t i, page_bytes;

	(void)state;
	check_ok(client, nfs42_lookup(client, target_path, &fh));
	for (i = 0; i < config.list_names; i++) {
		snprintf(name, sizeof(name), "list-entry-%03u-padding-to-make-it-longer", i);
		check_ok(client,
			 nfs42_setxattr(client, &fh, name, &i, sizeof(i), NFS42_SETXATTR_EITHER));
	}
	/* ganesha checks lxa_maxcount before the FSAL: too small for one name. */
	check_status(client, nfs42_listxattrs(client, &fh, 0, 8, &names), NFS42_ERR_TOOSMALL);
	for (;;) {
		check(pages < 1000,
		      "expected LISTXATTRS of %s to reach eof, still going after %u pages", fh.path,
		      pages);
		check_ok(client, nfs42_listxattrs(client, &fh, cookie, max_count, &names));
		pages++;
		page_bytes = 8 + 4 + 4; /* cookie, count, eof */
		for (i = 0; i < names.count; i++) {
			page_bytes += 4 + ((strlen(names.names[i]) + 3) & ~3u);
			if (sscanf(names.names[i], "list-entry-%03u-", &index) != 1 ||
			    index >= config.list_names)
				continue; /* alpha, beta... from other tests */
			check(!seen[index],
			      "expected \"%s\" once in the listing of %s, got it twice",
			      names.names[i], fh.path);
			seen[index] = true;
			found++;
		}
		check(page_bytes <= max_count + 4,
		      "expected a LISTXATTRS page of at most %u bytes, got %u", max_count,
		      page_bytes);
		check(names.eof || names.count > 0,
		      "expected names or eof from LISTXATTRS at cookie %llu, got neither",
		      (unsigned long long)cookie);
		cookie = names.next_cookie;
		i = names.eof;
		nfs42_xattr_names_free(&names);
		if (i)
			break;
	}
	check(found == config.list_names, "expected all %u names listed, got %u in %u pages",
	      config.list_names, found, pages);
	check(pages > 1, "expected %u names not to fit one %u-byte page, got %u page(s)",
	      config.list_names, max_count, pages);
	for (i = 0; i < config.list_names; i++) {
		snprintf(name, sizeof(name), "list-entry-%03u-padding-to-make-it-longer", i);
		check_ok(client, nfs42_removexattr(client, &fh, name));
	}
	disconnect_client(client);
}

/* What NFS sets, the local filesystem shows as user.*, and back. */
static void test_local_and_nfs_agree(void **state)
{
	struct nfs42_client *client = connect_client();
	char local_path[4200];
	char buffer[64];
	struct nfs42_fh fh;
	ssize_t length;

	(void)state;
	snprintf(local_path, sizeof(local_path), "%s/%s", ganesha_instance_export_path(gateway),
		 TARGET_FILE);
	check_ok(client, nfs42_lookup(client, target_path, &fh));
	check_ok(client, nfs42_setxattr(client, &fh, "from-nfs", "wire", 4, NFS42_SETXATTR_EITHER));
	length = getxattr(local_path, "user.from-nfs", buffer, sizeof(buffer));
	check(length == 4 && memcmp(buffer, "wire", 4) == 0,
	      "expected getxattr(%s, user.from-nfs) = \"wire\", got %zd (%s)", local_path, length,
	      length < 0 ? strerror(errno) : "other bytes");
	check(setxattr(local_path, "user.from-local", "disk", 4, 0) == 0,
	      "setxattr(%s, user.from-local): %s", local_path, strerror(errno));
	check_value(client, &fh, "from-local", "disk", 4);
	disconnect_client(client);
}

/* ---- the CLI over the client ------------------------------------------- */

/*
 * Run nfs_xattr_tool against the gateway: returns its exit status and
 * what it printed (stdout and stderr together, malloc()ed).
 */
static int run_tool(const char *const *command, char **output)
{
	char port[16], output_path[4200];
	const char *argv[16];
	int wait_status = 0;
	int argc = 0;
	int ret;

	snprintf(port, sizeof(port), "%u", ganesha_instance_port(gateway));
	snprintf(output_path, sizeof(output_path), "%s/tool.out", ganesha_instance_dir(gateway));
	argv[argc++] = config.tool;
	argv[argc++] = "--port";
	argv[argc++] = port;
	argv[argc++] = target_path;
	while (*command && argc < 15)
		argv[argc++] = *command++;
	argv[argc] = NULL;
	ret = ngnfs_test_run(argv, output_path, 20000, &wait_status);
	check(ret == 0, "expected to run %s, got %s", config.tool, strerror(-ret));
	*output = ngnfs_test_read_file(output_path, NULL);
	check(*output != NULL, "expected the tool's output in %s", output_path);
	check(WIFEXITED(wait_status), "expected %s to exit, wait status %#x", config.tool,
	      wait_status);
	return WEXITSTATUS(wait_status);
}

/* Exit 0 with output, 1 naming the NFS status, per the tool's contract. */
static void test_cli_tool(void **state)
{
	const char *set[] = { "set", "cli-name", "cli-value", "create", NULL };
	const char *get[] = { "get", "cli-name", NULL };
	const char *get_missing[] = { "get", "cli-missing", NULL };
	const char *list[] = { "list", "64", NULL };
	const char *remove[] = { "remove", "cli-name", NULL };
	const char *supported[] = { "supported", NULL };
	char *output;
	int status;

	(void)state;
	status = run_tool(supported, &output);
	check(status == 0 && strcmp(output, config.expect_supported ? "true\n" : "false\n") == 0,
	      "expected 'supported' to print %s, got exit %d output \"%s\"",
	      config.expect_supported ? "true" : "false", status, output);
	free(output);
	if (!config.expect_supported) {
		status = run_tool(get, &output);
		check(status == 1 && strstr(output, "NFS4ERR_NOTSUPP"),
		      "expected exit 1 naming NFS4ERR_NOTSUPP, got exit %d output \"%s\"", status,
		      output);
		free(output);
		return;
	}
	status = run_tool(set, &output);
	check(status == 0, "expected set to succeed, got exit %d output \"%s\"", status, output);
	free(output);
	status = run_tool(get, &output);
	check(status == 0 && strcmp(output, "cli-value") == 0,
	      "expected get to print cli-value, got exit %d output \"%s\"", status, output);
	free(output);
	status = run_tool(set, &output);
	check(status == 1 && strstr(output, "NFS4ERR_EXIST"),
	      "expected a second create to exit 1 naming NFS4ERR_EXIST, got exit %d output \"%s\"",
	      status, output);
	free(output);
	status = run_tool(list, &output);
	check(status == 0 && strstr(output, "cli-name\n"),
	      "expected list (64-byte pages) to print cli-name, got exit %d output \"%s\"", status,
	      output);
	free(output);
	status = run_tool(remove, &output);
	check(status == 0, "expected remove to succeed, got exit %d output \"%s\"", status, output);
	free(output);
	status = run_tool(get_missing, &output);
	check(status == 1 && strstr(output, "NFS4ERR_NOXATTR") && strstr(output, "cli-missing"),
	      "expected exit 1 naming NFS4ERR_NOXATTR and the name, got exit %d output \"%s\"",
	      status, output);
	free(output);
}

/* ---- main --------------------------------------------------------------- */

static void usage(FILE *stream)
{
	fprintf(stream,
		"usage: test_nfs42_xattr [--fsal-block TEXT] [--export-path PATH]\n"
		"                        [--plugins-dir DIR] [--ngnfs-devices N]\n"
		"                        --expect supported|unsupported\n"
		"                        [--local-xattrs] [--max-name-length N]\n"
		"                        [--max-value-size N (default 65536)]\n"
		"                        [--tool PATH (also test nfs_xattr_tool)]\n"
		"                        [--no-value-limit] [--list-names N (default 200)]\n"
		"--no-value-limit: do not expect --max-value-size + 1 to be refused (an\n"
		"FSAL over a local filesystem has that filesystem's limits instead).\n"
		"\n"
		"Starts ganesha.nfsd ($NGNFS_GANESHA or /usr/bin/ganesha.nfsd) with the\n"
		"FSAL block (default \"FSAL { Name = VFS; }\") exporting PATH (default a\n"
		"fresh folder) and runs the NFSv4.2 xattr tests against it.\n"
		"--ngnfs-devices N starts N blockd ($NGNFS_BLOCKD), formats them\n"
		"($NGNFS_TOOL mkfs) and puts their addresses where the FSAL block\n"
		"says @DEVICES@ (default block: " NGNFS_BACKEND_DEFAULT_FSAL_BLOCK ").\n");
}

int main(int argc, char **argv)
{
	static const struct option long_options[] = {
		{ "fsal-block", required_argument, NULL, 'f' },
		{ "export-path", required_argument, NULL, 'e' },
		{ "plugins-dir", required_argument, NULL, 'p' },
		{ "ngnfs-devices", required_argument, NULL, 'D' },
		{ "tool", required_argument, NULL, 't' },
		{ "expect", required_argument, NULL, 'x' },
		{ "local-xattrs", no_argument, NULL, 'l' },
		{ "max-name-length", required_argument, NULL, 'n' },
		{ "max-value-size", required_argument, NULL, 'v' },
		{ "no-value-limit", no_argument, NULL, 'V' },
		{ "list-names", required_argument, NULL, 'L' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const struct CMUnitTest unsupported_tests[] = {
		cmocka_unit_test(test_session_reports_xattr_support),
		cmocka_unit_test(test_lookup_missing_is_noent),
		cmocka_unit_test(test_concurrent_clients_keep_their_sessions),
		cmocka_unit_test(test_unsupported_ops_answer_notsupp),
	};
	const struct CMUnitTest supported_tests[] = {
		cmocka_unit_test(test_session_reports_xattr_support),
		cmocka_unit_test(test_lookup_missing_is_noent),
		cmocka_unit_test(test_concurrent_clients_keep_their_sessions),
		cmocka_unit_test(test_set_then_get),
		cmocka_unit_test(test_create_and_replace_semantics),
		cmocka_unit_test(test_missing_names),
		cmocka_unit_test(test_remove),
		cmocka_unit_test(test_large_value),
		cmocka_unit_test(test_value_over_limit_refused),
		cmocka_unit_test(test_long_name),
		cmocka_unit_test(test_list_pages_with_cookies),
	};
	const struct CMUnitTest local_tests[] = {
		cmocka_unit_test(test_local_and_nfs_agree),
	};
	const struct CMUnitTest tool_tests[] = {
		cmocka_unit_test(test_cli_tool),
	};
	const char *expect = NULL;
	int failures;
	int c;

	while ((c = getopt_long(argc, argv, "f:e:p:D:t:x:ln:v:VL:h", long_options, NULL)) != -1) {
		switch (c) {
		case 'f':
			config.fsal_block = optarg;
			config.fsal_block_given = true;
			break;
		case 'D':
			config.ngnfs_devices = (unsigned int)strtoul(optarg, NULL, 10);
			break;
		case 't':
			config.tool = optarg;
			break;
		case 'e':
			config.export_path = optarg;
			break;
		case 'p':
			config.plugins_dir = optarg;
			break;
		case 'x':
			expect = optarg;
			break;
		case 'l':
			config.local_xattrs = true;
			break;
		case 'n':
			config.max_name_length = (unsigned int)strtoul(optarg, NULL, 10);
			if (config.max_name_length == 0 ||
			    config.max_name_length > NFS42_XATTR_NAME_MAX) {
				fprintf(stderr, "--max-name-length must be 1..%d\n",
					NFS42_XATTR_NAME_MAX);
				return 2;
			}
			break;
		case 'v':
			config.max_value_size = (unsigned int)strtoul(optarg, NULL, 10);
			if (config.max_value_size == 0 || config.max_value_size > 64 * 1024) {
				fprintf(stderr, "--max-value-size must be 1..65536\n");
				return 2;
			}
			break;
		case 'V':
			config.value_limit_enforced = false;
			break;
		case 'L':
			config.list_names = (unsigned int)strtoul(optarg, NULL, 10);
			if (config.list_names < 2 || config.list_names > LIST_NAMES_MAX) {
				fprintf(stderr, "--list-names must be 2..%d\n", LIST_NAMES_MAX);
				return 2;
			}
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (!expect || (strcmp(expect, "supported") != 0 && strcmp(expect, "unsupported") != 0)) {
		usage(stderr);
		return 2;
	}
	config.expect_supported = strcmp(expect, "supported") == 0;
	if (config.local_xattrs && !config.expect_supported) {
		fprintf(stderr, "--local-xattrs needs --expect supported\n");
		return 2;
	}
	if (config.expect_supported)
		failures = cmocka_run_group_tests_name("nfs42_xattr", supported_tests, group_setup,
						       group_teardown);
	else
		failures = cmocka_run_group_tests_name("nfs42_xattr_unsupported", unsupported_tests,
						       group_setup, group_teardown);
	if (config.tool)
		failures += cmocka_run_group_tests_name("nfs_xattr_tool", tool_tests, group_setup,
							group_teardown);
	if (config.local_xattrs)
		failures += cmocka_run_group_tests_name("nfs42_xattr_local", local_tests,
							group_setup, group_teardown);
	return failures;
}
