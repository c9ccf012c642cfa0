/* SPDX-License-Identifier: GPL-2.0-or-later */
#ifndef NGNFS_TEST_LIBNFS_CLIENT_ID_H
#define NGNFS_TEST_LIBNFS_CLIENT_ID_H

/*
 * A unique NFSv4 client identity for a libnfs context.
 *
 * libnfs 4.0 names every context "Libnfs pid:<pid> <time in seconds>", so
 * two contexts a process opens in the same second are one NFSv4 client to
 * the server: the second SETCLIENTID replaces the first, whose next call
 * fails with NFS4ERR_EXPIRED.  Tests and benchmarks that open several
 * contexts therefore give each its own name and verifier (PID, a
 * per-process counter and the nanosecond time) before nfs_mount().
 *
 * XXX:
 *  - nfs4_set_client_name() in libnfs 4.0 leaks the default name it
 *    replaces (a few bytes per context).
 */

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <nfsc/libnfs.h>

static inline void ngnfs_libnfs_set_unique_client_id(struct nfs_context *nfs, const char *role)
{
	static unsigned int counter;
	unsigned int number = __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED);
	struct timespec now;
	char name[128];
	char verifier[8];
	uint64_t stamp;

	clock_gettime(CLOCK_REALTIME, &now);
	snprintf(name, sizeof(name), "ngnfs-%s/%d/%u/%lld.%09ld", role, (int)getpid(), number,
		 (long long)now.tv_sec, now.tv_nsec);
	stamp = (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec + number;
	memcpy(verifier, &stamp, sizeof(verifier));
	nfs4_set_client_name(nfs, name);
	nfs4_set_verifier(nfs, verifier);
}

#endif
