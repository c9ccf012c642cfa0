/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Coherency between client processes, end to end through blockd.
 *
 * PROCESSES client processes (fork, one client each) increment COUNTERS
 * counters that live in blocks spread over 3 blockd servers, ROUNDS
 * times each.  An increment needs the block's write grant; the servers
 * bounce that grant between the processes with REVOKE.  Each increment
 * ends one of three ways, in rotation, so that every path a cache takes
 * is exercised:
 *
 *  - write and release: WRITE with NGNFS_WRITE_RELEASE, grant gone;
 *  - write and keep: WRITE, the grant stays until someone revokes it;
 *  - keep dirty: nothing is sent; the revoke callback (on the I/O thread)
 *    must write the dirty copy back and only then release.
 *
 * This is a miniature block cache written on top of the client API,
 * with the rule the real cache follows: a grant is installed by the
 * GET's completion on the I/O thread, so a REVOKE that follows the GRANT
 * on the wire always finds it; a revoke that arrives while the operation
 * thread is using the block is answered when the operation is done.
 *
 * The final counts must be exactly PROCESSES x ROUNDS: a lost update
 * (two writers at once, a write-back missed on revoke, a stale cached
 * copy used) makes a count low; a torn or misdirected write makes the
 * check words disagree.
 */

#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "client_test.h"

#define PROCESSES 4
#define COUNTERS  6
#define ROUNDS	  300

struct counter_block {
	uint64_t blkno;
	uint8_t access;
	uint64_t version;
	bool have_copy;
	bool dirty;
	bool busy;	  /* the operation thread is using it */
	bool writing;	  /* a write-back is in flight */
	bool get_pending; /* a GET is in flight */
	bool revoke_pending;
	uint8_t revoke_access;
	int error;
	uint8_t data[NGNFS_BLOCK_SIZE];
};

struct counter_client {
	struct ngnfs_client *client;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct counter_block blocks[COUNTERS];
	uint64_t revokes;
	uint64_t writebacks;
};

static struct counter_client state = { .lock = PTHREAD_MUTEX_INITIALIZER,
				       .cond = PTHREAD_COND_INITIALIZER };

static uint64_t counter_blkno(int c)
{
	return ngnfs_blkno_make((uint16_t)(c % 3), 100 + (uint64_t)c);
}

/* Counter value, and two copies that must agree with it. */
static uint64_t block_count(const uint8_t *data, uint64_t blkno)
{
	uint64_t count, check1, check2;

	memcpy(&count, data, 8);
	memcpy(&check1, data + 8, 8);
	memcpy(&check2, data + NGNFS_BLOCK_SIZE - 8, 8);
	if (!count && !check1 && !check2)
		return 0; /* never written: zeros at version 0 */
	CHECK(check1 == (count ^ blkno) && check2 == count,
	      "block %#llx: count %llu with check words %llx %llu: expected %llx %llu",
	      (unsigned long long)blkno, (unsigned long long)count, (unsigned long long)check1,
	      (unsigned long long)check2, (unsigned long long)(count ^ blkno),
	      (unsigned long long)count);
	return count;
}

static void block_set_count(uint8_t *data, uint64_t blkno, uint64_t count)
{
	uint64_t check = count ^ blkno;

	memcpy(data, &count, 8);
	memcpy(data + 8, &check, 8);
	memcpy(data + NGNFS_BLOCK_SIZE - 8, &count, 8);
}

static struct counter_block *find_block(uint64_t blkno)
{
	for (int c = 0; c < COUNTERS; c++) {
		if (state.blocks[c].blkno == blkno)
			return &state.blocks[c];
	}
	return NULL;
}

static void answer_revoke_locked(struct counter_block *block);

static void writeback_done(void *arg, int status, const uint64_t *versions)
{
	struct counter_block *block = arg;

	pthread_mutex_lock(&state.lock);
	block->writing = false;
	if (status) {
		block->error = status;
	} else {
		block->version = versions[0];
		block->dirty = false;
		block->access = block->revoke_access;
		state.writebacks++;
	}
	if (block->revoke_pending)
		answer_revoke_locked(block);
	pthread_cond_broadcast(&state.cond);
	pthread_mutex_unlock(&state.lock);
}

/* The block is idle: bring it down to what the server asked for. */
static void answer_revoke_locked(struct counter_block *block)
{
	int ret;

	if (block->busy || block->writing || block->get_pending)
		return; /* answered when that finishes */
	block->revoke_pending = false;
	if (block->dirty && block->access == NGNFS_ACCESS_WRITE) {
		struct ngnfs_block_request request = { .blkno = block->blkno,
						       .version = block->version,
						       .access = NGNFS_ACCESS_WRITE,
						       .data = block->data };
		struct ngnfs_write_set set = { .blocks = &request,
					       .block_count = 1,
					       .release = true,
					       .release_access = block->revoke_access };

		block->writing = true;
		ret = ngnfs_client_write_set(state.client, &set, writeback_done, block);
		if (ret) {
			block->writing = false;
			block->error = ret;
		}
		return;
	}
	if (block->access > block->revoke_access)
		block->access = block->revoke_access;
	ret = ngnfs_client_release(state.client, block->blkno, block->revoke_access);
	if (ret)
		block->error = ret;
}

static void on_revoke(void *owner, uint64_t blkno, uint8_t access)
{
	struct counter_block *block;

	(void)owner;
	pthread_mutex_lock(&state.lock);
	state.revokes++;
	block = find_block(blkno);
	if (!block) {
		pthread_mutex_unlock(&state.lock);
		ngnfs_client_release(state.client, blkno, access);
		return;
	}
	if (!block->revoke_pending || access < block->revoke_access)
		block->revoke_access = access;
	block->revoke_pending = true;
	answer_revoke_locked(block);
	pthread_mutex_unlock(&state.lock);
}

static void grant_done(void *arg, int status, uint64_t blkno, uint64_t version, uint8_t access,
		       const uint8_t *data)
{
	struct counter_block *block = arg;

	(void)blkno;
	pthread_mutex_lock(&state.lock);
	block->get_pending = false;
	if (status) {
		block->error = status;
	} else {
		/* Installed here, on the I/O thread, before any later REVOKE is seen. */
		block->access = access;
		if (data) {
			memcpy(block->data, data, NGNFS_BLOCK_SIZE);
		} else if (!block->have_copy) {
			CHECK(version == 0,
			      "GRANT of block %#llx without data although we cached nothing: "
			      "expected version 0 (zeros), got %llu",
			      (unsigned long long)blkno, (unsigned long long)version);
			memset(block->data, 0, NGNFS_BLOCK_SIZE);
		} else {
			CHECK(block->have_copy && block->version == version,
			      "GRANT of block %#llx without data: expected our cached version "
			      "%llu to be current, the grant says %llu",
			      (unsigned long long)blkno, (unsigned long long)block->version,
			      (unsigned long long)version);
		}
		block->version = version;
		block->have_copy = true;
		block->busy = true;
	}
	pthread_cond_broadcast(&state.cond);
	pthread_mutex_unlock(&state.lock);
}

/* Returns with the block busy and held for write. */
static void acquire_write(struct counter_block *block)
{
	pthread_mutex_lock(&state.lock);
	for (;;) {
		while (block->writing || block->get_pending)
			pthread_cond_wait(&state.cond, &state.lock);
		CHECK(!block->error, "block %#llx: a request failed: %d (%s)",
		      (unsigned long long)block->blkno, block->error, strerror(-block->error));
		if (block->busy)
			break; /* the grant arrived and is ours */
		if (block->access == NGNFS_ACCESS_WRITE && !block->revoke_pending) {
			block->busy = true;
			break;
		}
		if (block->revoke_pending) {
			/* Let the other process have it first. */
			answer_revoke_locked(block);
			continue;
		}
		{
			struct ngnfs_block_request request = {
				.blkno = block->blkno,
				.version = block->have_copy ? block->version : 0,
				.access = NGNFS_ACCESS_WRITE,
			};
			int ret;

			block->get_pending = true;
			pthread_mutex_unlock(&state.lock);
			ret = ngnfs_client_get(state.client, &request, 1, grant_done, block);
			pthread_mutex_lock(&state.lock);
			if (ret) {
				block->get_pending = false;
				block->error = ret;
			}
		}
	}
	pthread_mutex_unlock(&state.lock);
}

static void finish_use(struct counter_block *block)
{
	pthread_mutex_lock(&state.lock);
	block->busy = false;
	if (block->revoke_pending)
		answer_revoke_locked(block);
	pthread_mutex_unlock(&state.lock);
}

static void write_block(struct counter_block *block, bool release)
{
	struct ngnfs_block_request request = { .blkno = block->blkno,
					       .version = block->version,
					       .access = NGNFS_ACCESS_WRITE,
					       .data = block->data };
	struct ngnfs_write_set set = { .blocks = &request,
				       .block_count = 1,
				       .release = release,
				       .release_access = NGNFS_ACCESS_NONE };
	uint64_t version;
	int ret;

	/* busy: the I/O thread leaves block->data alone meanwhile */
	ret = ngnfs_client_write_set_sync(state.client, &set, &version);
	CHECK(ret == 0, "WRITE of counter block %#llx at version %llu: expected 0, got %d (%s)",
	      (unsigned long long)block->blkno, (unsigned long long)block->version, ret,
	      strerror(-ret));
	pthread_mutex_lock(&state.lock);
	block->version = version;
	block->dirty = false;
	if (release) {
		block->access = NGNFS_ACCESS_NONE;
		block->revoke_pending = false; /* released already */
	}
	pthread_mutex_unlock(&state.lock);
}

static int incrementer(void *arg)
{
	struct client_test_fs *fs = arg;
	struct ngnfs_client_ops ops = { .revoke = on_revoke };
	unsigned int pid = (unsigned int)getpid();
	uint64_t revokes, writebacks;

	for (int c = 0; c < COUNTERS; c++)
		state.blocks[c].blkno = counter_blkno(c);
	state.client = client_test_open(fs, &ops, &state, 20000);

	for (int round = 0; round < ROUNDS; round++) {
		for (int c = 0; c < COUNTERS; c++) {
			struct counter_block *block = &state.blocks[c];
			int mode = (int)((pid + (unsigned int)round + (unsigned int)c) % 3);

			acquire_write(block);
			block_set_count(block->data, block->blkno,
					block_count(block->data, block->blkno) + 1);
			if (mode == 0) {
				write_block(block, true);
			} else if (mode == 1) {
				write_block(block, false);
			} else {
				pthread_mutex_lock(&state.lock);
				block->dirty = true;
				pthread_mutex_unlock(&state.lock);
			}
			finish_use(block);
		}
	}
	/* Write back what is still dirty, then leave. */
	for (int c = 0; c < COUNTERS; c++) {
		struct counter_block *block = &state.blocks[c];

		pthread_mutex_lock(&state.lock);
		while (block->writing || block->get_pending)
			pthread_cond_wait(&state.cond, &state.lock);
		CHECK(!block->error, "block %#llx: a request failed: %d (%s)",
		      (unsigned long long)block->blkno, block->error, strerror(-block->error));
		if (block->dirty && block->access == NGNFS_ACCESS_WRITE) {
			block->busy = true;
			pthread_mutex_unlock(&state.lock);
			write_block(block, true);
			finish_use(block);
		} else {
			pthread_mutex_unlock(&state.lock);
		}
	}
	/* Other processes still revoke: the I/O thread counts under the lock. */
	pthread_mutex_lock(&state.lock);
	revokes = state.revokes;
	writebacks = state.writebacks;
	pthread_mutex_unlock(&state.lock);
	printf("process %u: %d increments, %llu revokes, %llu write-backs on revoke\n", pid,
	       ROUNDS * COUNTERS, (unsigned long long)revokes, (unsigned long long)writebacks);
	fflush(stdout);
	ngnfs_client_destroy(state.client);
	return 0;
}

int main(void)
{
	struct client_test_fs fs;
	struct ngnfs_client *client;
	pid_t pids[PROCESSES];
	uint64_t start = client_test_now_ms();

	client_test_fs_start(&fs, 3, "client-coherency", NULL);
	for (int p = 0; p < PROCESSES; p++)
		pids[p] = client_test_fork(incrementer, &fs);
	for (int p = 0; p < PROCESSES; p++) {
		int status = client_test_wait_child(pids[p], 150000, "incrementing process");

		CHECK(status == 0, "incrementing process %d: expected exit 0, got %d", (int)pids[p],
		      status);
	}

	client = client_test_open(&fs, NULL, NULL, 10000);
	for (int c = 0; c < COUNTERS; c++) {
		static uint8_t data[NGNFS_BLOCK_SIZE];
		uint64_t version, count;
		int ret;

		ret = ngnfs_client_get_sync(client, counter_blkno(c), NGNFS_ACCESS_READ, 0,
					    &version, data, NULL);
		CHECK_OK(ret, "GET(read) of a counter block");
		count = block_count(data, counter_blkno(c));
		CHECK(count == (uint64_t)PROCESSES * ROUNDS,
		      "counter %d (block %#llx on device %d): expected %d increments, found %llu",
		      c, (unsigned long long)counter_blkno(c), c % 3, PROCESSES * ROUNDS,
		      (unsigned long long)count);
	}
	ngnfs_client_destroy(client);
	printf("coherency: %d processes x %d rounds x %d counters exact in %llu ms\n", PROCESSES,
	       ROUNDS, COUNTERS, (unsigned long long)(client_test_now_ms() - start));
	client_test_fs_stop(&fs);
	return 0;
}
