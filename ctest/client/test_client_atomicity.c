/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Atomic multi-device sets survive killed clients and killed servers.
 *
 * A writer process writes sets of three blocks, one on each of three
 * blockd servers, all carrying the same sequence number; it appends the
 * number to an "attempts" file before each set and to an "acks" file after
 * the set is acknowledged.  A reader process takes read grants on all
 * three blocks at once, again and again, and fails if it ever sees a
 * mixed set.  The test kills the writer with SIGKILL at a random point of
 * every iteration, and on every other iteration also kills a random
 * blockd (primary or participant) while the writer is running, then
 * restarts it.  After each iteration, once in-doubt sets are resolved
 * (the read grants wait for that, bounded), the three blocks must agree,
 * and their sequence number must be at least the last acknowledged one
 * (nothing acknowledged is lost) and at most the last attempted one.
 *
 * ITERATIONS iterations; the seed is printed and NGNFS_TEST_SEED replays
 * it.
 */

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "client_test.h"

#define ITERATIONS 15
#define SET_BLOCKS 3

static struct client_test_fs fs;
static char attempts_path[512];
static char acks_path[512];
static volatile sig_atomic_t reader_stop;

static uint64_t set_blkno(int i)
{
	return ngnfs_blkno_make((uint16_t)i, 10);
}

/*
 * Holding all three blocks at once (see grab_all).  While "locked" a
 * REVOKE waits until the holder is done (grab_finish).
 */
struct grab {
	struct ngnfs_client *client;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool granted[SET_BLOCKS];
	bool waiting[SET_BLOCKS];
	int status[SET_BLOCKS];
	uint64_t version[SET_BLOCKS];
	uint8_t data[SET_BLOCKS][NGNFS_BLOCK_SIZE];
	bool locked;
	bool revoke_pending[SET_BLOCKS];
	uint8_t revoke_access[SET_BLOCKS];
};

static struct grab grab = { .lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER };

static int block_index(uint64_t blkno)
{
	for (int i = 0; i < SET_BLOCKS; i++) {
		if (set_blkno(i) == blkno)
			return i;
	}
	return -1;
}

static void grab_revoke(void *owner, uint64_t blkno, uint8_t access)
{
	int i = block_index(blkno);

	(void)owner;
	pthread_mutex_lock(&grab.lock);
	if (i >= 0 && grab.locked && grab.granted[i]) {
		grab.revoke_pending[i] = true;
		grab.revoke_access[i] = access;
	} else if (i >= 0 && grab.granted[i]) {
		grab.granted[i] = false;
		ngnfs_client_release(grab.client, blkno, access);
		pthread_cond_broadcast(&grab.cond);
	}
	/* Not held: our earlier RELEASE answers it already. */
	pthread_mutex_unlock(&grab.lock);
}

static void grab_session_reset(void *owner, uint16_t device, bool restarted)
{
	(void)owner;
	(void)restarted;
	pthread_mutex_lock(&grab.lock);
	for (int i = 0; i < SET_BLOCKS; i++) {
		if (ngnfs_blkno_device(set_blkno(i)) == device)
			grab.granted[i] = false;
	}
	pthread_cond_broadcast(&grab.cond);
	pthread_mutex_unlock(&grab.lock);
}

static void grab_done(void *arg, int status, uint64_t blkno, uint64_t version, uint8_t access,
		      const uint8_t *data)
{
	int i = (int)(intptr_t)arg;

	(void)blkno;
	(void)access;
	pthread_mutex_lock(&grab.lock);
	grab.waiting[i] = false;
	grab.status[i] = status;
	if (!status) {
		grab.granted[i] = true;
		if (data)
			memcpy(grab.data[i], data, NGNFS_BLOCK_SIZE);
		else if (version == 0)
			memset(grab.data[i], 0, NGNFS_BLOCK_SIZE); /* never written: zeros */
		grab.version[i] = version;
	}
	pthread_cond_broadcast(&grab.cond);
	pthread_mutex_unlock(&grab.lock);
}

/*
 * Returns 0 with all three held, or the first error (then nothing is
 * held).  The blocks are taken one by one in block number order and a
 * REVOKE waits until grab_finish(): with one order for every process,
 * whoever holds a later block already holds the earlier ones, so nobody
 * can wait for someone who waits for them, and nobody gives up what it
 * has (which would let a writer and a reader steal blocks from each
 * other forever).
 */
static int grab_all(uint8_t access)
{
	int error = 0;

	pthread_mutex_lock(&grab.lock);
	grab.locked = true;
	for (int i = 0; i < SET_BLOCKS && !error; i++) {
		struct ngnfs_block_request request = { .blkno = set_blkno(i),
						       .version = grab.version[i],
						       .access = access };
		int ret;

		if (grab.granted[i])
			continue;
		grab.waiting[i] = true;
		grab.status[i] = 0;
		pthread_mutex_unlock(&grab.lock);
		ret = ngnfs_client_get(grab.client, &request, 1, grab_done, (void *)(intptr_t)i);
		pthread_mutex_lock(&grab.lock);
		if (ret) {
			grab.waiting[i] = false;
			error = ret;
			break;
		}
		while (grab.waiting[i])
			pthread_cond_wait(&grab.cond, &grab.lock);
		error = grab.status[i];
	}
	pthread_mutex_unlock(&grab.lock);
	return error;
}

/* Done with the three: answer revokes that waited, drop what release says. */
static void grab_finish(bool released_by_write, bool release_now)
{
	pthread_mutex_lock(&grab.lock);
	grab.locked = false;
	for (int i = 0; i < SET_BLOCKS; i++) {
		if (released_by_write) {
			grab.granted[i] = false;
		} else if (grab.granted[i] && (release_now || grab.revoke_pending[i])) {
			grab.granted[i] = false;
			ngnfs_client_release(grab.client, set_blkno(i),
					     release_now ? NGNFS_ACCESS_NONE
							 : grab.revoke_access[i]);
		}
		grab.revoke_pending[i] = false;
	}
	pthread_mutex_unlock(&grab.lock);
}

static uint64_t read_seq(const uint8_t *data, int i, const char *who)
{
	uint64_t seq, blkno, tail;

	memcpy(&seq, data, 8);
	memcpy(&blkno, data + 8, 8);
	memcpy(&tail, data + NGNFS_BLOCK_SIZE - 8, 8);
	if (seq == 0 && blkno == 0 && tail == 0)
		return 0;
	CHECK(blkno == set_blkno(i) && tail == seq,
	      "%s: block %#llx is torn: sequence %llu, block number %#llx, tail %llu", who,
	      (unsigned long long)set_blkno(i), (unsigned long long)seq, (unsigned long long)blkno,
	      (unsigned long long)tail);
	return seq;
}

static void open_client(uint32_t timeout_ms)
{
	struct ngnfs_client_ops ops = { .revoke = grab_revoke,
					.session_reset = grab_session_reset };
	int ret;

	grab.client = NULL;
	for (int tries = 0; tries < 100; tries++) {
		ret =
		    client_test_try_open(&fs, NULL, fs.fs_id, &ops, NULL, timeout_ms, &grab.client);
		if (!ret)
			return;
		usleep(100000);
	}
	CHECK(false, "opening a client: expected success within 10 s, last error %d", ret);
}

static void append_number(const char *path, uint64_t number)
{
	char line[32];
	int length = snprintf(line, sizeof(line), "%llu\n", (unsigned long long)number);
	int fd = open(path, O_WRONLY | O_APPEND | O_CREAT, 0644);

	CHECK(fd >= 0, "opening %s: %s", path, strerror(errno));
	CHECK(write(fd, line, (size_t)length) == length, "appending to %s", path);
	close(fd);
}

static uint64_t last_number(const char *path)
{
	char *text = ngnfs_test_read_file(path, NULL);
	uint64_t last = 0;
	char *line, *save = NULL;

	if (!text)
		return 0;
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
		last = strtoull(line, NULL, 10);
	free(text);
	return last;
}

static int writer(void *arg)
{
	uint64_t seq = *(uint64_t *)arg;

	open_client(3000);
	for (;; seq++) {
		struct ngnfs_block_request blocks[SET_BLOCKS];
		struct ngnfs_write_set set = { .blocks = blocks,
					       .block_count = SET_BLOCKS,
					       .release = true,
					       .release_access = NGNFS_ACCESS_NONE };
		uint64_t versions[SET_BLOCKS];
		int ret;

		ret = grab_all(NGNFS_ACCESS_WRITE);
		if (ret) {
			grab_finish(false, true);
			usleep(20000);
			continue;
		}
		for (int i = 0; i < SET_BLOCKS; i++) {
			uint64_t blkno = set_blkno(i);

			memcpy(grab.data[i], &seq, 8);
			memcpy(grab.data[i] + 8, &blkno, 8);
			memcpy(grab.data[i] + NGNFS_BLOCK_SIZE - 8, &seq, 8);
			blocks[i] = (struct ngnfs_block_request){ .blkno = blkno,
								  .version = grab.version[i],
								  .access = NGNFS_ACCESS_WRITE,
								  .data = grab.data[i] };
		}
		append_number(attempts_path, seq);
		ret = ngnfs_client_write_set_sync(grab.client, &set, versions);
		if (!ret) {
			append_number(acks_path, seq);
			for (int i = 0; i < SET_BLOCKS; i++)
				grab.version[i] = versions[i];
		} else {
			/* Outcome unknown: refetch everything. */
			for (int i = 0; i < SET_BLOCKS; i++)
				grab.version[i] = 0;
		}
		grab_finish(true, false);
	}
	return 0;
}

static void reader_sigterm(int sig)
{
	(void)sig;
	reader_stop = 1;
}

static int reader(void *arg)
{
	uint64_t snapshots = 0, errors = 0;

	(void)arg;
	signal(SIGTERM, reader_sigterm);
	open_client(3000);
	while (!reader_stop) {
		uint64_t seqs[SET_BLOCKS];
		int ret = grab_all(NGNFS_ACCESS_READ);

		if (ret) {
			errors++;
			grab_finish(false, true);
			usleep(20000);
			continue;
		}
		for (int i = 0; i < SET_BLOCKS; i++)
			seqs[i] = read_seq(grab.data[i], i, "reader");
		CHECK(seqs[0] == seqs[1] && seqs[1] == seqs[2],
		      "reader holding read grants on all three blocks saw a mixed set: sequence "
		      "numbers %llu %llu %llu",
		      (unsigned long long)seqs[0], (unsigned long long)seqs[1],
		      (unsigned long long)seqs[2]);
		snapshots++;
		grab_finish(false, true);
		usleep(1000);
	}
	printf("reader: %llu consistent snapshots, %llu retried errors\n",
	       (unsigned long long)snapshots, (unsigned long long)errors);
	fflush(stdout);
	ngnfs_client_destroy(grab.client);
	return 0;
}

/* The checker, in its own process so that the test process holds no client while forking. */
static int checker(void *arg)
{
	uint64_t *bounds = arg; /* [0] last ack, [1] last attempt */
	uint64_t deadline = client_test_now_ms() + 30000;
	uint64_t seqs[SET_BLOCKS];
	int ret;

	open_client(20000);
	/* Staged blocks stay write-granted to their set until it is resolved. */
	while ((ret = grab_all(NGNFS_ACCESS_READ)) != 0) {
		grab_finish(false, true);
		CHECK(client_test_now_ms() < deadline,
		      "checker: expected read grants on the set within 30 s, last error %d (%s)",
		      ret, strerror(-ret));
		usleep(50000);
	}
	for (int i = 0; i < SET_BLOCKS; i++)
		seqs[i] = read_seq(grab.data[i], i, "checker");
	CHECK(seqs[0] == seqs[1] && seqs[1] == seqs[2],
	      "after recovery: expected one sequence number in all three blocks, got %llu %llu "
	      "%llu (a half-applied set)",
	      (unsigned long long)seqs[0], (unsigned long long)seqs[1],
	      (unsigned long long)seqs[2]);
	CHECK(seqs[0] >= bounds[0],
	      "after recovery: the set carries sequence %llu but %llu was acknowledged (lost an "
	      "acknowledged set)",
	      (unsigned long long)seqs[0], (unsigned long long)bounds[0]);
	CHECK(seqs[0] <= bounds[1],
	      "after recovery: the set carries sequence %llu, never attempted (last attempt %llu)",
	      (unsigned long long)seqs[0], (unsigned long long)bounds[1]);
	grab_finish(false, true);
	printf("checker: set at sequence %llu (acknowledged %llu, attempted %llu)\n",
	       (unsigned long long)seqs[0], (unsigned long long)bounds[0],
	       (unsigned long long)bounds[1]);
	fflush(stdout);
	ngnfs_client_destroy(grab.client);
	return 0;
}

static unsigned int random_ms(unsigned int *seed, unsigned int low, unsigned int high)
{
	return low + (unsigned int)rand_r(seed) % (high - low + 1);
}

int main(void)
{
	const char *extra[] = { "--grace-ms", "300", NULL };
	unsigned int seed = client_test_seed("client atomicity");
	uint64_t next_seq = 1;
	pid_t reader_pid, reader_gone;
	int status;

	client_test_fs_start(&fs, SET_BLOCKS, "client-atomicity", extra);
	snprintf(attempts_path, sizeof(attempts_path), "%s/attempts",
		 ngnfs_test_cluster_dir(fs.cluster));
	snprintf(acks_path, sizeof(acks_path), "%s/acks", ngnfs_test_cluster_dir(fs.cluster));

	reader_pid = client_test_fork(reader, NULL);
	for (int iteration = 0; iteration < ITERATIONS; iteration++) {
		uint64_t bounds[2];
		pid_t writer_pid = client_test_fork(writer, &next_seq);
		int killed_device = -1;

		usleep(random_ms(&seed, 100, 400) * 1000);
		if (iteration % 2 == 1) {
			killed_device = (int)random_ms(&seed, 0, SET_BLOCKS - 1);
			CHECK_OK(ngnfs_test_cluster_kill(fs.cluster, (unsigned int)killed_device,
							 SIGKILL),
				 "SIGKILL of a blockd");
			usleep(random_ms(&seed, 0, 300) * 1000);
			CHECK_OK(
			    ngnfs_test_cluster_restart(fs.cluster, (unsigned int)killed_device),
			    "restarting the blockd");
			usleep(random_ms(&seed, 0, 400) * 1000);
		}
		kill(writer_pid, SIGKILL);
		waitpid(writer_pid, &status, 0);

		bounds[0] = last_number(acks_path);
		bounds[1] = last_number(attempts_path);
		printf("iteration %d: writer killed, blockd %d killed; acknowledged %llu, "
		       "attempted %llu\n",
		       iteration, killed_device, (unsigned long long)bounds[0],
		       (unsigned long long)bounds[1]);
		fflush(stdout);
		status =
		    client_test_wait_child(client_test_fork(checker, bounds), 60000, "checker");
		if (status)
			ngnfs_test_cluster_dump_logs(fs.cluster, 4000);
		CHECK(status == 0, "iteration %d (seed %u): checker failed (exit %d)", iteration,
		      seed, status);
		next_seq = bounds[1] + 1;
		reader_gone = waitpid(reader_pid, &status, WNOHANG);
		if (reader_gone != 0)
			ngnfs_test_cluster_dump_logs(fs.cluster, 6000);
		CHECK(reader_gone == 0,
		      "iteration %d: the reader exited early (it saw a mixed set or failed)",
		      iteration);
	}
	CHECK(last_number(acks_path) > 0, "the writers never got a set acknowledged");
	kill(reader_pid, SIGTERM);
	status = client_test_wait_child(reader_pid, 20000, "reader");
	CHECK(status == 0, "reader: expected exit 0 (no mixed set seen), got %d", status);
	client_test_fs_stop(&fs);
	return 0;
}
