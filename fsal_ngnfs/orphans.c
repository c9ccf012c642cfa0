// SPDX-License-Identifier: LGPL-3.0-or-later
/*
 * Freeing, once a gateway has started, the orphans an earlier one left.
 *
 * A file unlinked while open stays allocated until its last close (an
 * entry in the orphan directory, libcore/namei.c).  A gateway that dies
 * with such files open never closes them, and until now only an operator
 * running `ngnfs reclaim-orphans` got their blocks back.  So each export
 * runs the same reclaim (ngnfs_fsck_reclaim_orphans) on a thread of its
 * own, once, at start, with the same rule: only while no other client is
 * connected to any device, because an orphan does not say who had it
 * open and another gateway may still serve it.  With another gateway up
 * it logs why it did nothing and how to finish the job.
 *
 * It waits for the NFSv4 grace period first (ganesha started it before
 * it created the exports; Graceless: no wait).  During grace the clients
 * of the gateway that died reclaim their opens by handle, and an orphan a
 * client reclaimed is open here again, which the reclaim leaves alone
 * (it checks this mount's open files inside the transaction that would
 * free the inode).  After grace nobody can reopen one without a name.
 *
 * An export stopped while the reclaim runs waits only for the orphan in
 * progress (one transaction): the reclaim reads the stop flag before each.
 *
 * XXX:
 *  - Two exports of one filesystem in one gateway are two mounts, so each
 *    sees the other as another client and neither reclaims.
 */

#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "fsal.h"
#include "FSAL/fsal_commonlib.h"
#include "nfs_core.h"

#include "fsck.h"
#include "internal.h"

struct ngnfs_fsal_orphans {
	struct ngnfs_fsal_export *export;
	pthread_t thread;
	pthread_mutex_t mutex;
	pthread_cond_t wake;  /* CLOCK_MONOTONIC */
	atomic_bool stopping; /* set under mutex for the wait, read bare by the reclaim */
	uint32_t delay_seconds;
};

/*
 * Every line at INFO: the ones libcore marks as problems are the other
 * clients it counted (normal beside another gateway) and entries that are
 * not unlinked inodes, which the summary counts as left and fsck explains.
 */
static void say_orphan(void *arg, bool problem, const char *line)
{
	struct ngnfs_fsal_export *export = arg;

	(void)problem;
	LogInfo(COMPONENT_FSAL, "NGNFS: export %u orphan reclaim: %s", export->export.export_id,
		line);
}

static void *orphans_thread(void *arg)
{
	struct ngnfs_fsal_orphans *orphans = arg;
	struct ngnfs_fsal_export *export = orphans->export;
	uint64_t reclaimed = 0, left = 0;
	struct timespec deadline;
	bool stopping;
	int ret;

	clock_gettime(CLOCK_MONOTONIC, &deadline);
	deadline.tv_sec += orphans->delay_seconds;
	pthread_mutex_lock(&orphans->mutex);
	while (!atomic_load(&orphans->stopping) &&
	       pthread_cond_timedwait(&orphans->wake, &orphans->mutex, &deadline) != ETIMEDOUT)
		;
	stopping = atomic_load(&orphans->stopping);
	pthread_mutex_unlock(&orphans->mutex);
	if (stopping)
		return NULL;

	ret = ngnfs_fsck_reclaim_orphans(export->fs, false, &orphans->stopping, say_orphan, export,
					 &reclaimed, &left);
	if (ret == -ECANCELED)
		LogEvent(COMPONENT_FSAL,
			 "NGNFS: export %u stopped its orphan reclaim: %s; the next start goes on",
			 export->export.export_id, ngnfs_last_error());
	else if (ret == -EBUSY)
		LogEvent(COMPONENT_FSAL,
			 "NGNFS: export %u did not reclaim orphans: %s, then run `ngnfs "
			 "reclaim-orphans`",
			 export->export.export_id, ngnfs_last_error());
	else if (ret < 0)
		LogWarn(COMPONENT_FSAL, "NGNFS: export %u orphan reclaim failed: %s",
			export->export.export_id, ngnfs_last_error());
	else
		LogEvent(COMPONENT_FSAL,
			 "NGNFS: export %u reclaimed %" PRIu64
			 " orphans an earlier gateway left, %" PRIu64 " left",
			 export->export.export_id, reclaimed, left);
	return NULL;
}

int ngnfs_fsal_orphans_start(struct ngnfs_fsal_export *export)
{
	const nfs_version4_parameter_t *v4 = &nfs_param.nfsv4_param;
	struct ngnfs_fsal_orphans *orphans;
	pthread_condattr_t condattr;
	int ret;

	if (!export->options.reclaim_orphans)
		return 0;
	orphans = gsh_calloc(1, sizeof(*orphans));
	orphans->export = export;
	orphans->delay_seconds = v4->graceless ? 0 : v4->grace_period;
	pthread_mutex_init(&orphans->mutex, NULL);
	pthread_condattr_init(&condattr);
	pthread_condattr_setclock(&condattr, CLOCK_MONOTONIC);
	pthread_cond_init(&orphans->wake, &condattr);
	pthread_condattr_destroy(&condattr);
	ret = pthread_create(&orphans->thread, NULL, orphans_thread, orphans);
	if (ret != 0) {
		LogCrit(COMPONENT_FSAL, "NGNFS: export %u: cannot start the orphan reclaim: %s",
			export->export.export_id, strerror(ret));
		pthread_cond_destroy(&orphans->wake);
		pthread_mutex_destroy(&orphans->mutex);
		gsh_free(orphans);
		return -ret;
	}
	LogInfo(COMPONENT_FSAL, "NGNFS: export %u reclaims orphans in %" PRIu32 " s (grace period)",
		export->export.export_id, orphans->delay_seconds);
	export->orphans = orphans;
	return 0;
}

void ngnfs_fsal_orphans_stop(struct ngnfs_fsal_export *export)
{
	struct ngnfs_fsal_orphans *orphans = export->orphans;

	if (orphans == NULL)
		return;
	pthread_mutex_lock(&orphans->mutex);
	atomic_store(&orphans->stopping, true);
	pthread_cond_signal(&orphans->wake);
	pthread_mutex_unlock(&orphans->mutex);
	pthread_join(orphans->thread, NULL);
	pthread_cond_destroy(&orphans->wake);
	pthread_mutex_destroy(&orphans->mutex);
	gsh_free(orphans);
	export->orphans = NULL;
}
