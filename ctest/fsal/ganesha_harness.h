/* SPDX-License-Identifier: GPL-2.0-or-later */
#ifndef NGNFS_TEST_GANESHA_HARNESS_H
#define NGNFS_TEST_GANESHA_HARNESS_H

/*
 * Throwaway ganesha.nfsd instances for end-to-end NFS tests and benchmarks.
 *
 * A test names the FSAL it wants (the text of an FSAL { } block) and the
 * export path; the harness makes a fresh temporary folder, writes a
 * ganesha config there (NFSv4 only on a free loopback port, no NLM,
 * RQUOTA, UDP or Kerberos, no grace period, its own recovery folder,
 * numeric owners), runs `ganesha.nfsd -F -L LOG -f CONF -p PIDFILE`, and
 * waits (bounded) until the log says "NFS SERVER INITIALIZED" *and* the
 * port accepts TCP.  Everything the daemon writes stays in that folder,
 * so instances can run side by side (ctest -j) and never touch the
 * machine's own ganesha setup.  The settings are the ones
 * verified on Debian's ganesha 4.3 (docs/fsal.md).
 *
 * The daemon is stopped by PID: SIGTERM, then SIGKILL if it has not exited
 * within a bound.  Children get PR_SET_PDEATHSIG SIGKILL and an atexit
 * handler kills every instance still running, so a crashed or timed-out
 * test leaves no daemon behind.  When the daemon fails to start, or
 * exits other than by our SIGTERM, the folder (with the log) is kept and
 * the log's tail printed; NGNFS_KEEP_TEST_DIRS=1 keeps every folder.
 *
 * The binary is $NGNFS_GANESHA if set, else /usr/bin/ganesha.nfsd.
 *
 * XXX:
 *  - The port is found by binding port 0 and closing the socket before
 *    ganesha binds it: another process can take it in between.  Start
 *    retries with a new port when the daemon dies early, which covers
 *    that race in practice.
 *  - Loopback IPv4 only.  NFSv3 ("3, 4") needs rpcbind: ganesha 4.3 exits
 *    at start when it cannot register.  ganesha_private_rpcbind_start()
 *    below gives the calling process a network and mount namespace of its
 *    own with its own rpcbind, so a v3 instance never touches the
 *    machine's rpcbind.
 *  - Not thread safe: start and stop instances from one thread (the one
 *    that outlives them, for PR_SET_PDEATHSIG).
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct ganesha_instance;

struct ganesha_options {
	/* The whole FSAL block, e.g. "FSAL { Name = VFS; }".  Required. */
	const char *fsal_block;
	/*
	 * Path = of the export.  NULL: the harness makes "<folder>/export"
	 * (a local folder for FSAL_VFS) and uses that.
	 */
	const char *export_path;
	/* Pseudo = of the export; NULL means "/export". */
	const char *pseudo_path;
	/* NFS_CORE_PARAM { Plugins_Dir }; NULL leaves ganesha's default. */
	const char *plugins_dir;
	/* NFS_CORE_PARAM { Protocols }; NULL means "4". */
	const char *protocols;
	/* EXPORT { Squash }; NULL means "No_Root_Squash" (root stays root). */
	const char *squash;
	/* Extra lines inside EXPORT { } (Anonymous_Uid = ..., ...). */
	const char *export_extra;
	/* Extra lines inside NFS_CORE_PARAM { }. */
	const char *core_extra;
	/* Extra top-level blocks (EXPORT_DEFAULTS { }, LOG { }, ...). */
	const char *extra_config;
	/*
	 * A whole config file instead of the generated one (the sample a
	 * site copies, say), written with @NFS_PORT@ replaced by the port the
	 * harness chose and @RECOVERY@ by a recovery folder of the instance;
	 * fsal_block, protocols, squash and the *_extra fields are then
	 * unused.  The caller makes it serve on 127.0.0.1 and pseudo_path.
	 */
	const char *config_template;
	/* Goes into the folder name so a kept folder says who made it. */
	const char *name;
	/* Bound on the wait for the daemon to serve; 0 means 20 s. */
	unsigned int start_timeout_ms;
	/*
	 * Remove the folder even when the start fails (after printing the
	 * log's tail): for tests that expect the start to fail.
	 */
	bool remove_dir_on_failure;
};

/*
 * Start one instance and wait until it serves.  Returns NULL after
 * explaining on stderr (with the log's tail) on any failure.
 */
struct ganesha_instance *ganesha_instance_start_with(const struct ganesha_options *options);

/* The common case: NFSv4, pseudo path "/export", no_root_squash. */
struct ganesha_instance *ganesha_instance_start(const char *fsal_block, const char *export_path,
						const char *plugins_dir);

/*
 * Stop by PID (SIGTERM, then SIGKILL after 10 s) and free the instance.
 * Returns 0 when the daemon exited by itself after SIGTERM, -ETIMEDOUT
 * when it had to be killed, -ECHILD when it had already died; the folder
 * is removed only when the return is 0 (and NGNFS_KEEP_TEST_DIRS unset).
 */
int ganesha_instance_stop(struct ganesha_instance *instance);

/* Whether the daemon is still running (reaps it if it has exited). */
bool ganesha_instance_alive(struct ganesha_instance *instance);

uint16_t ganesha_instance_port(const struct ganesha_instance *instance);
pid_t ganesha_instance_pid(const struct ganesha_instance *instance);
const char *ganesha_instance_dir(const struct ganesha_instance *instance);
const char *ganesha_instance_log_path(const struct ganesha_instance *instance);
const char *ganesha_instance_pseudo_path(const struct ganesha_instance *instance);
/* The export's Path = (the one given, or the folder the harness made). */
const char *ganesha_instance_export_path(const struct ganesha_instance *instance);

/*
 * "nfs://127.0.0.1<pseudo>" - the libnfs URL of the export root without
 * the query string; ganesha_instance_url() builds a full one.
 */
const char *ganesha_instance_url_base(const struct ganesha_instance *instance);

/*
 * Write the libnfs URL of relative_path (NULL or "" = the export root)
 * inside the export into buffer:
 *   nfs://127.0.0.1<pseudo>/<relative_path>?version=4&nfsport=<port><extra_query>
 * extra_query is appended verbatim (e.g. "&uid=1000&gid=1000") or NULL.
 * Returns 0 or -ENAMETOOLONG.
 */
int ganesha_instance_url(const struct ganesha_instance *instance, const char *relative_path,
			 const char *extra_query, char *buffer, size_t buffer_size);

/*
 * Print the last line_count lines of the instance's log, and of its
 * stdout and stderr (where libcore writes), to stderr.
 */
void ganesha_instance_print_log_tail(const struct ganesha_instance *instance,
				     unsigned int line_count);

/*
 * A private rpcbind for NFSv3 instances.
 *
 * ganesha registers its programs (NFS, MOUNT) with the rpcbind behind
 * /run/rpcbind.sock and 127.0.0.1:111, and first unregisters whatever is
 * registered under those program numbers: on the machine's own rpcbind
 * that would clobber the kernel nfsd's entries, and two tests would clobber
 * each other's.  So this moves the *calling process* into a new network
 * and mount namespace (unshare(CLONE_NEWNET | CLONE_NEWNS), the same as
 * `unshare --net --mount`), makes every mount private so nothing
 * propagates back, brings up lo, adds a second address to it (192.0.2.1,
 * a documentation address: without an address besides 127.0.0.1 ganesha's
 * getaddrinfo(AI_ADDRCONFIG) cannot resolve Bind_Addr = 127.0.0.1), mounts
 * a tmpfs on /run and runs `rpcbind -f -w` there, waiting (bounded) for
 * /run/rpcbind.sock.  Every process started afterwards (blockd, ganesha,
 * clients) lives in that namespace and sees only loopback.
 *
 * Call it before starting any thread (unshare(CLONE_NEWNS) needs an
 * unshared fs context) and before any other service.  Returns 0, or:
 *   -EPERM / -EINVAL / -ENOSYS  the namespace cannot be made here (not
 *       root, no namespace support, a container forbidding it)
 *   -ENOENT   no rpcbind binary (NGNFS_RPCBIND, else /usr/sbin/rpcbind)
 *   other -errno   rpcbind or the setup failed
 * explaining on stderr in each case.  The first three mean "this machine
 * cannot run the test" (a skip); the rest are failures.
 */
struct ganesha_rpcbind;

int ganesha_private_rpcbind_start(struct ganesha_rpcbind **rpcbind);

/* rpcbind's PID in the namespace. */
pid_t ganesha_rpcbind_pid(const struct ganesha_rpcbind *rpcbind);

/*
 * Stop rpcbind by PID (SIGTERM, then SIGKILL after 5 s) and free it.
 * Returns 0 when it exited by itself on SIGTERM, else a negative errno.
 * The process stays in its namespace (there is no way back).  NULL is
 * accepted.
 */
int ganesha_private_rpcbind_stop(struct ganesha_rpcbind *rpcbind);

#endif
