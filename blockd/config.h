/* SPDX-License-Identifier: GPL-2.0-or-later */
#ifndef NGNFS_BLOCKD_CONFIG_H
#define NGNFS_BLOCKD_CONFIG_H

/*
 * blockd's settings, from the command line and an optional INI file
 * (--config, parsed with libinih).  Both feed the same table of settings
 * with the same parsers and range checks, so a bad value gets the same
 * message naming the setting whichever way it came; the command line wins
 * over the file.
 *
 * XXX:
 *  - Config file errors name the file and the setting, not the line
 *    (Debian's libinih is built without line numbers for handlers).
 */

#include <stdbool.h>
#include <stdint.h>

struct blockd_config {
	char *db;
	char *listen;
	char *peers;
	char *port_file;
	uint32_t grace_ms;
	int log_level;
	bool sync;
	uint32_t cache_mb;
	uint32_t commit_max_batch;
	uint32_t commit_delay_ms; /* tests only */
	uint32_t fail_commit_at;  /* tests only */
	bool commit_log;
	uint32_t commit_log_mb;
	bool commit_log_accept_damage;
	uint32_t commit_log_only_after; /* tests only */
	bool rocksdb_wal;		/* logged group commits also in RocksDB's WAL */
	uint64_t total_blocks;
	uint32_t resolve_timeout_ms;
	uint32_t max_sessions;
	uint32_t hello_timeout_ms;
	uint32_t revoke_timeout_ms;
};

/*
 * Fill config from argv (and the --config file it names).  Returns 0, 1
 * when --help was printed (exit 0), or a negative errno after printing
 * what was wrong on stderr.
 */
int blockd_config_parse(struct blockd_config *config, int argc, char **argv);
void blockd_config_free(struct blockd_config *config);

#endif
