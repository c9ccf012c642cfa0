/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Command line and config file parsing (see config.h).
 *
 * Every setting is one row of a table: its name in the file (the flag is
 * the same with '-' for '_'), its parser and its bounds.  The command line
 * is scanned twice: first only for --config, so that the file is applied
 * before the flags that override it.
 *
 * XXX:
 *  - The file has no sections: keys may appear at top level or under any
 *    [section]; a sample lives in conf/blockd.conf.
 */

#include <errno.h>
#include <getopt.h>
#include <ini.h>
#include <inttypes.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "format-store.h"
#include "log.h"

enum setting_kind { SETTING_STRING, SETTING_U32, SETTING_U64, SETTING_BOOL, SETTING_LEVEL };

struct setting {
	const char *name;
	enum setting_kind kind;
	size_t offset;
	uint64_t min;
	uint64_t max;
	const char *help;
};

#define FIELD(name) offsetof(struct blockd_config, name)

static const struct setting settings[] = {
	{ "db", SETTING_STRING, FIELD(db), 0, 0, "RocksDB folder of this device (required)" },
	{ "listen", SETTING_STRING, FIELD(listen), 0, 0,
	  "HOST:PORT to accept sessions on (required; port 0 picks one)" },
	{ "port_file", SETTING_STRING, FIELD(port_file), 0, 0,
	  "write the bound port here once accepting" },
	{ "peers", SETTING_STRING, FIELD(peers), 0, 0,
	  "device manifest (host:port per line by device index)" },
	{ "config", SETTING_STRING, 0, 0, 0, "INI file with these same settings" },
	{ "grace_ms", SETTING_U32, FIELD(grace_ms), 0, 3600000,
	  "reclaim grace after a restart, ms (default 5000)" },
	{ "log_level", SETTING_LEVEL, FIELD(log_level), 0, 0,
	  "error, warn, info (default) or debug" },
	{ "sync", SETTING_BOOL, FIELD(sync), 0, 0,
	  "true (default): sync the WAL per batch; false is UNSAFE, benchmarks only" },
	{ "cache_mb", SETTING_U32, FIELD(cache_mb), 1, 1048576,
	  "RocksDB block cache size, MiB (default 64)" },
	{ "commit_max_batch", SETTING_U32, FIELD(commit_max_batch), 1, 1000000,
	  "most requests gathered in one group commit (default 1024)" },
	{ "commit_delay_ms", SETTING_U32, FIELD(commit_delay_ms), 0, 10000,
	  "tests only: wait this long before each group commit (default 0)" },
	{ "fail_commit_at", SETTING_U32, FIELD(fail_commit_at), 0, 1000000000,
	  "tests only: group commit N (1 = the first) fails as a disk error would "
	  "(default 0: never)" },
	{ "commit_log", SETTING_BOOL, FIELD(commit_log), 0, 0,
	  "true (default): group commits are made durable by the commit log; false: by a "
	  "synced RocksDB write (slower)" },
	{ "commit_log_mb", SETTING_U32, FIELD(commit_log_mb), NGNFS_COMMIT_LOG_MIN_MB, 65536,
	  "size of the commit log, MiB; an existing log of another size is replaced at start "
	  "(default 64)" },
	{ "commit_log_accept_damage", SETTING_BOOL, FIELD(commit_log_accept_damage), 0, 0,
	  "true starts on a commit log damaged in the middle, without the damaged record and "
	  "those after it (acknowledged writes are lost; default false: refuse to start)" },
	{ "commit_log_only_after", SETTING_U32, FIELD(commit_log_only_after), 0, 1000000000,
	  "tests only: after N logged group commits, write only the commit log, as if RocksDB "
	  "had lost them (default 0: never)" },
	{ "rocksdb_wal", SETTING_BOOL, FIELD(rocksdb_wal), 0, 0,
	  "true also writes logged group commits to RocksDB's own WAL (unsynced; slower); "
	  "false (default): the commit log is their only log" },
	{ "total_blocks", SETTING_U64, FIELD(total_blocks), 1, 1ULL << 48,
	  "device capacity in blocks, fixed when the store is created (default 2^32)" },
	{ "resolve_timeout_ms", SETTING_U32, FIELD(resolve_timeout_ms), 100, 86400000,
	  "age after which a staged set is resolved or aborted, ms (default 10000)" },
	{ "max_sessions", SETTING_U32, FIELD(max_sessions), 1, 1000000,
	  "most connections open at once; more are closed at accept (default 512)" },
	{ "hello_timeout_ms", SETTING_U32, FIELD(hello_timeout_ms), 100, 3600000,
	  "a connection silent this long before its HELLO is closed, ms (default 10000)" },
	{ "revoke_timeout_ms", SETTING_U32, FIELD(revoke_timeout_ms), 1000, 86400000,
	  "a session that leaves a REVOKE unanswered this long is closed, ms (default 60000)" },
};

#define SETTING_COUNT (sizeof(settings) / sizeof(settings[0]))

static void usage(FILE *out)
{
	fprintf(out, "usage: blockd --db DIR --listen HOST:PORT [options]\n\n"
		     "Serves one ngnfs device's blocks from a RocksDB database.\n\noptions:\n");
	for (size_t i = 0; i < SETTING_COUNT; i++) {
		char flag[64];

		snprintf(flag, sizeof(flag), "--%s", settings[i].name);
		for (char *c = flag + 2; *c; c++) {
			if (*c == '_')
				*c = '-';
		}
		fprintf(out, "  %-22s %s\n", flag, settings[i].help);
	}
	fprintf(out, "  %-22s %s\n", "--help", "print this and exit");
}

static const struct setting *find_setting(const char *name)
{
	for (size_t i = 0; i < SETTING_COUNT; i++) {
		if (strcmp(settings[i].name, name) == 0)
			return &settings[i];
	}
	return NULL;
}

static int parse_number(const char *text, uint64_t *value)
{
	char *end;

	if (!*text || *text == '-')
		return -EINVAL;
	errno = 0;
	*value = strtoull(text, &end, 0);
	if (errno || *end)
		return -EINVAL;
	return 0;
}

/* where says "--flag" or "config file FILE" for the error message. */
static int apply_setting(struct blockd_config *config, const struct setting *setting,
			 const char *value, const char *where)
{
	void *field = (char *)config + setting->offset;
	uint64_t number;
	int level;

	switch (setting->kind) {
	case SETTING_STRING:
		if (!*value) {
			fprintf(stderr, "blockd: %s: setting %s must not be empty\n", where,
				setting->name);
			return -EINVAL;
		}
		free(*(char **)field);
		*(char **)field = strdup(value);
		return *(char **)field ? 0 : -ENOMEM;
	case SETTING_U32:
	case SETTING_U64:
		if (parse_number(value, &number) || number < setting->min ||
		    number > setting->max) {
			fprintf(
			    stderr,
			    "blockd: %s: setting %s has invalid value '%s' (expected an integer "
			    "from %" PRIu64 " to %" PRIu64 ")\n",
			    where, setting->name, value, setting->min, setting->max);
			return -EINVAL;
		}
		if (setting->kind == SETTING_U32)
			*(uint32_t *)field = (uint32_t)number;
		else
			*(uint64_t *)field = number;
		return 0;
	case SETTING_BOOL:
		if (strcmp(value, "true") == 0 || strcmp(value, "yes") == 0 ||
		    strcmp(value, "1") == 0) {
			*(bool *)field = true;
		} else if (strcmp(value, "false") == 0 || strcmp(value, "no") == 0 ||
			   strcmp(value, "0") == 0) {
			*(bool *)field = false;
		} else {
			fprintf(stderr,
				"blockd: %s: setting %s has invalid value '%s' (expected true or "
				"false)\n",
				where, setting->name, value);
			return -EINVAL;
		}
		return 0;
	case SETTING_LEVEL:
		level = blockd_log_parse_level(value);
		if (level < 0) {
			fprintf(
			    stderr,
			    "blockd: %s: setting %s has invalid value '%s' (expected error, warn, "
			    "info or debug)\n",
			    where, setting->name, value);
			return -EINVAL;
		}
		*(int *)field = level;
		return 0;
	}
	return -EINVAL;
}

struct file_state {
	struct blockd_config *config;
	const char *path;
	int error;
};

static int file_handler(void *user, const char *section, const char *name, const char *value)
{
	struct file_state *state = user;
	const struct setting *setting = find_setting(name);
	char where[PATH_MAX + 32];

	(void)section;
	snprintf(where, sizeof(where), "config file %s", state->path);
	if (!setting || strcmp(name, "config") == 0) {
		fprintf(stderr, "blockd: %s: unknown setting '%s'\n", where, name);
		state->error = -EINVAL;
		return 0;
	}
	if (!state->error)
		state->error = apply_setting(state->config, setting, value, where);
	return state->error ? 0 : 1;
}

static int load_file(struct blockd_config *config, const char *path)
{
	struct file_state state = { .config = config, .path = path, .error = 0 };
	int ret = ini_parse(path, file_handler, &state);

	if (ret == -1) {
		fprintf(stderr, "blockd: cannot read config file %s: %s\n", path, strerror(errno));
		return -ENOENT;
	}
	if (state.error)
		return state.error;
	if (ret != 0) {
		fprintf(stderr, "blockd: %s:%d: malformed line in config file\n", path, ret);
		return -EINVAL;
	}
	return 0;
}

void blockd_config_free(struct blockd_config *config)
{
	free(config->db);
	free(config->listen);
	free(config->peers);
	free(config->port_file);
	config->db = config->listen = config->peers = config->port_file = NULL;
}

int blockd_config_parse(struct blockd_config *config, int argc, char **argv)
{
	struct option options[SETTING_COUNT + 2];
	char names[SETTING_COUNT][64];
	const char *config_path = NULL;
	int ret;

	memset(config, 0, sizeof(*config));
	config->grace_ms = 5000;
	config->log_level = BLOCKD_LOG_INFO;
	config->sync = true;
	config->cache_mb = 64;
	config->commit_max_batch = 1024;
	config->commit_log = true;
	config->commit_log_mb = NGNFS_COMMIT_LOG_DEFAULT_MB;
	config->total_blocks = 1ULL << 32;
	config->resolve_timeout_ms = 10000;
	config->max_sessions = 512;
	config->hello_timeout_ms = 10000;
	config->revoke_timeout_ms = 60000;

	for (size_t i = 0; i < SETTING_COUNT; i++) {
		snprintf(names[i], sizeof(names[i]), "%s", settings[i].name);
		for (char *c = names[i]; *c; c++) {
			if (*c == '_')
				*c = '-';
		}
		options[i] = (struct option){ names[i], required_argument, NULL, (int)i + 1 };
	}
	options[SETTING_COUNT] = (struct option){ "help", no_argument, NULL, 'h' };
	options[SETTING_COUNT + 1] = (struct option){ NULL, 0, NULL, 0 };

	/* First pass: --help, --config and flag syntax only. */
	opterr = 0;
	optind = 1;
	for (;;) {
		int opt = getopt_long(argc, argv, "h", options, NULL);

		if (opt == -1)
			break;
		if (opt == 'h') {
			usage(stdout);
			return 1;
		}
		if (opt == '?' || opt == ':') {
			fprintf(stderr, "blockd: invalid option '%s' (see blockd --help)\n",
				argv[optind - 1]);
			return -EINVAL;
		}
		if (strcmp(settings[opt - 1].name, "config") == 0)
			config_path = optarg;
	}
	if (optind < argc) {
		fprintf(stderr, "blockd: unexpected argument '%s' (see blockd --help)\n",
			argv[optind]);
		return -EINVAL;
	}

	if (config_path) {
		ret = load_file(config, config_path);
		if (ret)
			return ret;
	}

	optind = 1;
	for (;;) {
		int opt = getopt_long(argc, argv, "h", options, NULL);
		char where[80];

		if (opt == -1)
			break;
		if (strcmp(settings[opt - 1].name, "config") == 0)
			continue;
		snprintf(where, sizeof(where), "--%s", names[opt - 1]);
		ret = apply_setting(config, &settings[opt - 1], optarg, where);
		if (ret)
			return ret;
	}

	if (!config->db) {
		fprintf(stderr, "blockd: no database folder given (--db DIR or db = in the "
				"config file)\n");
		return -EINVAL;
	}
	if (!config->listen) {
		fprintf(stderr, "blockd: no listen address given (--listen HOST:PORT or listen "
				"= in the config file)\n");
		return -EINVAL;
	}
	return 0;
}
