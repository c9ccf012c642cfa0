// SPDX-License-Identifier: LGPL-3.0-or-later
/*
 * Registration of the NGNFS FSAL with ganesha and the table of options of
 * its FSAL block.
 *
 * ganesha dlopen()s Plugins_Dir/libfsalngnfs.so when an EXPORT names
 * FSAL { Name = NGNFS; }; the constructor below registers the module under
 * that name with the FSAL API version of the headers we were built with
 * (register_fsal() refuses a different major or a newer minor).
 *
 * The options of an export's FSAL block are declared once, in
 * ngnfs_fsal_export_options_items, with their types, ranges and defaults, so that
 * ganesha's own config parser rejects a bad value and names the option.
 * Only what the table cannot say (exactly one of Devices and Devices_File,
 * the syntax of each device address, the manifest file's lines) is checked
 * in the block's commit step, which also names the option and the line.
 *
 * XXX: there is no module-wide (top-level NGNFS { }) block yet; every
 * setting is per export because each export mounts its own filesystem.
 */

#include "config.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "fsal.h"
#include "FSAL/fsal_init.h"
#include "FSAL/fsal_commonlib.h"
#include "config_parsing.h"

#include "internal.h"

#define NGNFS_CACHE_SIZE_MIN		 (4ULL << 20)
#define NGNFS_CACHE_SIZE_MAX		 (1ULL << 40)
#define NGNFS_CACHE_SIZE_DEFAULT	 (256ULL << 20)
#define NGNFS_WRITEBACK_INTERVAL_MIN	 10
#define NGNFS_WRITEBACK_INTERVAL_MAX	 60000
#define NGNFS_WRITEBACK_INTERVAL_DEFAULT 1000
#define NGNFS_RECLAIM_TIMEOUT_MIN	 1000
#define NGNFS_RECLAIM_TIMEOUT_MAX	 86400000
#define NGNFS_RECLAIM_TIMEOUT_DEFAULT	 30000
/* "host:port" of at most 255 + 1 + 5 characters, 1024 devices */
#define NGNFS_DEVICES_MAX_LENGTH (1024 * 262)

struct ngnfs_fsal_module ngnfs_fsal_module = {
	.fsal = {
		.fs_info = {
			/* what libcore enforces, so clients see the limits (pathconf) */
			.maxfilesize = NGNFS_FILE_SIZE_MAX,
			.maxlink = NGNFS_LINK_MAX,
			.maxnamelen = NGNFS_NAME_MAX,
			.maxpathlen = MAXPATHLEN,
			.no_trunc = true,
			.chown_restricted = true,
			.case_insensitive = false,
			.case_preserving = true,
			.link_support = true,
			.symlink_support = true,
			/* XXX: locks come with the lock phase */
			.lock_support = false,
			.lock_support_async_block = false,
			.named_attr = false,
			/* inode number plus generation never names another object */
			.unique_handles = true,
			.acl_support = 0,
			.cansettime = true,
			.homogenous = true,
			/* ATTR4_XATTR: ganesha lets NFSv4.2 xattr operations
			 * through only when the export claims it */
			.supported_attrs = ATTRS_POSIX | ATTR_CREATION | ATTR4_XATTR,
			.maxread = FSAL_MAXIOSIZE,
			.maxwrite = FSAL_MAXIOSIZE,
			.umask = 0,
			.auth_exportpath_xdev = false,
			.link_supports_permission_checks = false,
			.rename_changes_key = false,
			.readdir_plus = true,
			.xattr_support = true,
			/* parents stay cached until an up-call invalidates them
			 * (fsal_up.c) */
			.expire_time_parent = -1,
		},
	},
};

const char *ngnfs_fsal_durability_name(uint32_t durability)
{
	switch (durability) {
	case NGNFS_MOUNT_STABLE:
		return "stable";
	case NGNFS_MOUNT_WRITEBACK:
		return "writeback";
	}
	return "unknown";
}

void ngnfs_fsal_export_options_free(struct ngnfs_fsal_export_options *options)
{
	uint16_t i;

	for (i = 0; i < options->device_count; i++)
		gsh_free(options->device_addresses[i]);
	gsh_free(options->device_addresses);
	gsh_free(options->devices);
	gsh_free(options->devices_file);
	gsh_free(options->durability_name);
	options->devices_file = NULL;
	options->durability_name = NULL;
	options->device_addresses = NULL;
	options->device_count = 0;
	options->devices = NULL;
}

/*
 * Checks one "host:port" entry of Devices; host is a name or an IPv4
 * address, or an IPv6 address in brackets.  Returns 0 or -EINVAL.
 */
static int check_device_address(const char *address)
{
	const char *colon = strrchr(address, ':');
	char *end;
	unsigned long port;

	if (colon == NULL || colon == address || colon[1] == '\0')
		return -EINVAL;
	if (address[0] == '[' && colon[-1] != ']')
		return -EINVAL;
	errno = 0;
	port = strtoul(colon + 1, &end, 10);
	if (errno != 0 || *end != '\0' || port == 0 || port > 65535)
		return -EINVAL;
	return 0;
}

/* Adds one checked "host:port" to device_addresses; returns 0 or -EINVAL. */
static int add_device_address(struct ngnfs_fsal_export_options *options, size_t *capacity,
			      const char *address, const char *where)
{
	if (check_device_address(address) != 0) {
		LogCrit(COMPONENT_CONFIG, "NGNFS: %s: \"%s\" is not host:port (port 1-65535)",
			where, address);
		return -EINVAL;
	}
	if (options->device_count == UINT16_MAX) {
		LogCrit(COMPONENT_CONFIG, "NGNFS: %s: more than %u devices", where, UINT16_MAX);
		return -EINVAL;
	}
	if (options->device_count == *capacity) {
		*capacity = *capacity ? *capacity * 2 : 8;
		options->device_addresses =
		    gsh_realloc(options->device_addresses, *capacity * sizeof(char *));
	}
	options->device_addresses[options->device_count++] = gsh_strdup(address);
	return 0;
}

/* Devices = "host:port,host:port": returns the number of bad entries. */
static int parse_devices(struct ngnfs_fsal_export_options *options, size_t *capacity)
{
	char *copy = gsh_strdup(options->devices);
	char *save = NULL;
	char *entry;
	int errors = 0;

	for (entry = strtok_r(copy, ", \t", &save); entry != NULL;
	     entry = strtok_r(NULL, ", \t", &save))
		errors += add_device_address(options, capacity, entry, "Devices entry") != 0;
	gsh_free(copy);
	return errors;
}

/*
 * Devices_File: the device manifest blockd and the admin tool read too
 * (libcore/manifest.h): one host:port a line in device-index order, blank
 * lines and '#' comments ignored.  Returns the number of errors.
 */
static int parse_devices_file(struct ngnfs_fsal_export_options *options, size_t *capacity)
{
	char where[PATH_MAX + 64];
	char line[1024];
	unsigned int line_number = 0;
	int errors = 0;
	FILE *file;

	file = fopen(options->devices_file, "r");
	if (file == NULL) {
		LogCrit(COMPONENT_CONFIG, "NGNFS: Devices_File \"%s\" cannot be opened: %s",
			options->devices_file, strerror(errno));
		return 1;
	}
	while (fgets(line, sizeof(line), file) != NULL) {
		char *start = line;
		char *end;

		line_number++;
		if (strchr(line, '\n') == NULL && !feof(file)) {
			LogCrit(COMPONENT_CONFIG, "NGNFS: Devices_File %s line %u is too long",
				options->devices_file, line_number);
			errors++;
			break;
		}
		end = strchr(start, '#');
		if (end != NULL)
			*end = '\0';
		while (*start == ' ' || *start == '\t')
			start++;
		end = start + strlen(start);
		while (end > start &&
		       (end[-1] == '\n' || end[-1] == '\r' || end[-1] == ' ' || end[-1] == '\t'))
			*--end = '\0';
		if (*start == '\0')
			continue;
		snprintf(where, sizeof(where), "Devices_File %s line %u", options->devices_file,
			 line_number);
		errors += add_device_address(options, capacity, start, where) != 0;
	}
	if (ferror(file)) {
		LogCrit(COMPONENT_CONFIG, "NGNFS: Devices_File \"%s\" could not be read: %s",
			options->devices_file, strerror(errno));
		errors++;
	}
	fclose(file);
	return errors;
}

/*
 * Commit step of the FSAL block: checks Durability and turns Devices or
 * Devices_File (exactly one is required) into device_addresses.  Returns
 * the number of errors, as ganesha's config parser expects; each is logged
 * with the option's name.
 */
static int ngnfs_fsal_export_options_commit(void *node, void *link_mem, void *self_struct,
					    struct config_error_type *err_type)
{
	struct ngnfs_fsal_export_options *options = self_struct;
	size_t capacity = 0;
	int errors = 0;

	(void)node;
	(void)link_mem;

	if (options->durability_name == NULL ||
	    strcasecmp(options->durability_name, "stable") == 0) {
		options->durability = NGNFS_MOUNT_STABLE;
	} else if (strcasecmp(options->durability_name, "writeback") == 0) {
		options->durability = NGNFS_MOUNT_WRITEBACK;
	} else {
		LogCrit(COMPONENT_CONFIG,
			"NGNFS: Durability = \"%s\" is neither stable nor writeback",
			options->durability_name);
		errors++;
	}

	if ((options->devices == NULL) == (options->devices_file == NULL)) {
		LogCrit(COMPONENT_CONFIG,
			"NGNFS: the FSAL block needs exactly one of Devices and Devices_File (%s)",
			options->devices == NULL ? "neither is set" : "both are set");
		errors++;
		goto out;
	}

	options->device_count = 0;
	if (options->devices != NULL)
		errors += parse_devices(options, &capacity);
	else
		errors += parse_devices_file(options, &capacity);

	if (options->device_count == 0 && errors == 0) {
		if (options->devices != NULL)
			LogCrit(COMPONENT_CONFIG, "NGNFS: Devices = \"%s\" names no device",
				options->devices);
		else
			LogCrit(COMPONENT_CONFIG, "NGNFS: Devices_File \"%s\" names no device",
				options->devices_file);
		errors++;
	}
out:
	if (errors > 0)
		err_type->invalid = true;
	return errors;
}

static struct config_item ngnfs_fsal_export_options_items[] = {
	CONF_ITEM_NOOP("name"),
	/*
	 * Exactly one of Devices and Devices_File is required; the commit
	 * step checks that, so neither is CONFIG_MANDATORY.
	 */
	CONF_ITEM_STR("Devices", 1, NGNFS_DEVICES_MAX_LENGTH, NULL, ngnfs_fsal_export_options,
		      devices),
	CONF_ITEM_PATH("Devices_File", 1, PATH_MAX, NULL, ngnfs_fsal_export_options, devices_file),
	/*
	 * A string checked by the commit step rather than CONF_ITEM_TOKEN:
	 * ganesha 4.3 only warns about an unknown token and keeps the default,
	 * and a typo in Durability must fail the export, not change its
	 * durability silently.
	 */
	CONF_ITEM_STR("Durability", 1, 16, "stable", ngnfs_fsal_export_options, durability_name),
	CONF_ITEM_UI64("Cache_Size", NGNFS_CACHE_SIZE_MIN, NGNFS_CACHE_SIZE_MAX,
		       NGNFS_CACHE_SIZE_DEFAULT, ngnfs_fsal_export_options, cache_size),
	CONF_ITEM_UI32("Writeback_Interval_Ms", NGNFS_WRITEBACK_INTERVAL_MIN,
		       NGNFS_WRITEBACK_INTERVAL_MAX, NGNFS_WRITEBACK_INTERVAL_DEFAULT,
		       ngnfs_fsal_export_options, writeback_interval_ms),
	CONF_ITEM_UI32("Reclaim_Timeout_Ms", NGNFS_RECLAIM_TIMEOUT_MIN, NGNFS_RECLAIM_TIMEOUT_MAX,
		       NGNFS_RECLAIM_TIMEOUT_DEFAULT, ngnfs_fsal_export_options,
		       reclaim_timeout_ms),
	/* off: a wrong address must fail the export, not look like a device down */
	CONF_ITEM_BOOL("Allow_Unreachable_Devices", false, ngnfs_fsal_export_options,
		       allow_unreachable_devices),
	/* on: a dead gateway's open unlinked files are freed after the grace period */
	CONF_ITEM_BOOL("Reclaim_Orphans", true, ngnfs_fsal_export_options, reclaim_orphans),
	CONFIG_EOL,
};

struct config_block ngnfs_fsal_export_config_block = {
	.dbus_interface_name = "org.ganesha.nfsd.config.fsal.ngnfs-export%d",
	.blk_desc.name = "FSAL",
	.blk_desc.type = CONFIG_BLOCK,
	.blk_desc.u.blk.init = noop_conf_init,
	.blk_desc.u.blk.params = ngnfs_fsal_export_options_items,
	.blk_desc.u.blk.commit = ngnfs_fsal_export_options_commit,
};

static fsal_status_t ngnfs_fsal_init_config(struct fsal_module *module, config_file_t config,
					    struct config_error_type *err_type)
{
	(void)config;
	(void)err_type;

	display_fsinfo(module);
	LogDebug(COMPONENT_FSAL, "NGNFS: module ready, supported attributes 0x%" PRIx64,
		 module->fs_info.supported_attrs);
	return fsalstat(ERR_FSAL_NO_ERROR, 0);
}

MODULE_INIT void ngnfs_fsal_init(void)
{
	struct fsal_module *module = &ngnfs_fsal_module.fsal;

	if (register_fsal(module, NGNFS_FSAL_NAME, FSAL_MAJOR_VERSION, FSAL_MINOR_VERSION,
			  FSAL_ID_NO_PNFS) != 0) {
		LogCrit(COMPONENT_FSAL, "NGNFS: register_fsal failed (built for FSAL API %d.%d)",
			FSAL_MAJOR_VERSION, FSAL_MINOR_VERSION);
		return;
	}
	module->m_ops.init_config = ngnfs_fsal_init_config;
	module->m_ops.create_export = ngnfs_fsal_create_export;
	ngnfs_fsal_object_ops_init(&ngnfs_fsal_module.object_ops);
}

MODULE_FINI void ngnfs_fsal_fini(void)
{
	if (unregister_fsal(&ngnfs_fsal_module.fsal) != 0)
		LogCrit(COMPONENT_FSAL, "NGNFS: unregister_fsal failed; exports still refer to it");
}
