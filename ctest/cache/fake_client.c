// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * An in-process double of the network client (client.h) for the cache
 * and transaction tests that must not wait for real servers.
 *
 * Every fake client of the process talks to one fake server: a block
 * store (versions bumped on each write), a grant table with the same
 * rules as blockd (many readers or one writer, a FIFO queue per block, a
 * compatible request still waits behind a queued conflicting one, REVOKE
 * sent to each conflicting holder) and a per-device allocator.  So two
 * caches in one process revoke each other like two gateways do.
 *
 * Each fake client has its own I/O thread that delivers GRANTs, write
 * completions, REVOKEs and session resets in order, asynchronously, as
 * the real client does; write completions are delayed by a configurable
 * latency (a device's fsync), which is what lets group commit gather
 * concurrent commits in the tests.  A set is applied at once under the
 * server lock (atomic whatever its devices), so the double says nothing
 * about the multi-device commit protocol: that is the real client's and
 * blockd's business and their own tests'.
 *
 * XXX:
 *  - No sessions, timeouts or reconnects; fake_client_reset_session()
 *    drops a client's grants on one device and reports it.
 *  - cmpxchg, statfs, format and device_info answer -EOPNOTSUPP.
 *  - Like blockd, a free leaves the grants in place (the freer releases
 *    them) and ALLOC only hands out free blocks nobody holds.
 */

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "client.h"
#include "fake_client.h"

#define FAKE_MAX_CLIENTS 8
#define FAKE_BUCKETS	 4096
#define FAKE_ALLOC_FIRST (1ULL << 32)

struct fake_request {
	struct fake_request *next;
	struct ngnfs_client *client;
	uint64_t cached_version;
	uint8_t access;
	ngnfs_grant_done_fn done;
	void *arg;
};

struct fake_block {
	struct fake_block *next;
	uint64_t blkno;
	uint64_t version;
	uint8_t data[NGNFS_BLOCK_SIZE];
	uint8_t access[FAKE_MAX_CLIENTS];
	uint8_t revoke_sent[FAKE_MAX_CLIENTS]; /* target + 1, 0 when none sent */
	struct fake_request *queue;
};

enum fake_event_type {
	FAKE_EVENT_GRANT,
	FAKE_EVENT_WRITE_DONE,
	FAKE_EVENT_REVOKE,
	FAKE_EVENT_RESET,
};

struct fake_event {
	struct fake_event *next;
	enum fake_event_type type;
	uint64_t due_us;
	int status;
	uint64_t blkno;
	uint64_t version;
	uint8_t access;
	bool has_data;
	uint8_t data[NGNFS_BLOCK_SIZE];
	ngnfs_grant_done_fn grant_done;
	ngnfs_write_done_fn write_done;
	void *arg;
	uint64_t *versions;
	uint16_t device;
};

struct ngnfs_client {
	int index;
	uint16_t device_count;
	uint64_t id;
	struct ngnfs_client_ops ops;
	void *owner;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct fake_event *head;
	struct fake_event *tail;
	bool stopping;
	uint64_t resets_delivered;
	uint32_t commit_retry_ms; /* as configured; the double never retries */
	int reset_during_alloc;	  /* device + 1 whose next ALLOC the session ends in; 0 none */
};

static struct {
	pthread_mutex_t lock;
	struct fake_block *buckets[FAKE_BUCKETS];
	struct ngnfs_client *clients[FAKE_MAX_CLIENTS];
	uint64_t next_index[64];
	uint64_t *free_list;
	uint32_t free_count;
	uint32_t free_capacity;
	uint64_t writes;
	unsigned int write_latency_us;
	bool hold_writes;
	struct held_write *held;
	struct held_write **held_tail;
} server = { .lock = PTHREAD_MUTEX_INITIALIZER };

struct held_write {
	struct held_write *next;
	struct ngnfs_client *client;
	struct ngnfs_write_set set; /* blocks and frees copied, block data not */
	ngnfs_write_done_fn done;
	void *arg;
};

static uint64_t now_us(void)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (uint64_t)now.tv_sec * 1000000 + (uint64_t)now.tv_nsec / 1000;
}

static struct fake_block *find_block(uint64_t blkno, bool create)
{
	size_t bucket = (blkno * 0x9e3779b97f4a7c15ULL) >> 52;
	struct fake_block *block;

	for (block = server.buckets[bucket]; block; block = block->next) {
		if (block->blkno == blkno)
			return block;
	}
	if (!create)
		return NULL;
	block = calloc(1, sizeof(*block));
	if (!block)
		abort();
	block->blkno = blkno;
	block->next = server.buckets[bucket];
	server.buckets[bucket] = block;
	return block;
}

static void post(struct ngnfs_client *client, struct fake_event *event)
{
	pthread_mutex_lock(&client->lock);
	event->next = NULL;
	if (client->tail)
		client->tail->next = event;
	else
		client->head = event;
	client->tail = event;
	pthread_cond_broadcast(&client->cond);
	pthread_mutex_unlock(&client->lock);
}

static struct fake_event *new_event(enum fake_event_type type)
{
	struct fake_event *event = calloc(1, sizeof(*event));

	if (!event)
		abort();
	event->type = type;
	return event;
}

static bool on_free_list(uint64_t blkno);

/* Grant what the FIFO allows, revoke what stands in the way (server lock held). */
static void process_block(struct fake_block *block)
{
	while (block->queue) {
		struct fake_request *request = block->queue;
		int me = request->client->index;
		bool conflict = false;
		int i;

		for (i = 0; i < FAKE_MAX_CLIENTS; i++) {
			if (i == me || block->access[i] == NGNFS_ACCESS_NONE)
				continue;
			if (request->access == NGNFS_ACCESS_WRITE ||
			    block->access[i] == NGNFS_ACCESS_WRITE)
				conflict = true;
		}
		if (conflict) {
			uint8_t target = request->access == NGNFS_ACCESS_READ ? NGNFS_ACCESS_READ
									      : NGNFS_ACCESS_NONE;

			for (i = 0; i < FAKE_MAX_CLIENTS; i++) {
				struct fake_event *event;

				if (i == me || block->access[i] == NGNFS_ACCESS_NONE)
					continue;
				if (request->access == NGNFS_ACCESS_READ &&
				    block->access[i] != NGNFS_ACCESS_WRITE)
					continue;
				if (block->revoke_sent[i] && block->revoke_sent[i] <= target + 1)
					continue;
				block->revoke_sent[i] = target + 1;
				event = new_event(FAKE_EVENT_REVOKE);
				event->blkno = block->blkno;
				event->access = target;
				post(server.clients[i], event);
			}
			return;
		}
		block->queue = request->next;
		if (request->access > block->access[me])
			block->access[me] = request->access;
		{
			struct fake_event *event = new_event(FAKE_EVENT_GRANT);

			event->blkno = block->blkno;
			event->version = block->version;
			event->access = block->access[me];
			event->grant_done = request->done;
			event->arg = request->arg;
			if (on_free_list(block->blkno)) {
				/* Like blockd: a freed block reads as zeros, at any version. */
				event->has_data = true;
				memset(event->data, 0, NGNFS_BLOCK_SIZE);
			} else if (request->cached_version != block->version ||
				   block->version == 0) {
				event->has_data = true;
				memcpy(event->data, block->data, NGNFS_BLOCK_SIZE);
			}
			post(request->client, event);
		}
		free(request);
	}
}

static void *io_main(void *arg)
{
	struct ngnfs_client *client = arg;

	pthread_mutex_lock(&client->lock);
	for (;;) {
		struct fake_event *event = client->head;
		uint64_t now;

		if (client->stopping)
			break;
		if (!event) {
			pthread_cond_wait(&client->cond, &client->lock);
			continue;
		}
		now = now_us();
		if (event->due_us > now) {
			struct timespec deadline;
			uint64_t due = event->due_us;

			deadline.tv_sec = due / 1000000;
			deadline.tv_nsec = (long)(due % 1000000) * 1000;
			pthread_cond_timedwait(&client->cond, &client->lock, &deadline);
			continue;
		}
		client->head = event->next;
		if (!client->head)
			client->tail = NULL;
		pthread_mutex_unlock(&client->lock);
		switch (event->type) {
		case FAKE_EVENT_GRANT:
			event->grant_done(event->arg, event->status, event->blkno, event->version,
					  event->access, event->has_data ? event->data : NULL);
			break;
		case FAKE_EVENT_WRITE_DONE:
			event->write_done(event->arg, event->status, event->versions);
			free(event->versions);
			break;
		case FAKE_EVENT_REVOKE:
			if (client->ops.revoke)
				client->ops.revoke(client->owner, event->blkno, event->access);
			break;
		case FAKE_EVENT_RESET:
			if (client->ops.session_reset)
				client->ops.session_reset(client->owner, event->device, false);
			pthread_mutex_lock(&client->lock);
			client->resets_delivered++;
			pthread_cond_broadcast(&client->cond);
			pthread_mutex_unlock(&client->lock);
			break;
		}
		free(event);
		pthread_mutex_lock(&client->lock);
	}
	pthread_mutex_unlock(&client->lock);
	return NULL;
}

void fake_server_reset(unsigned int write_latency_us)
{
	size_t i;

	pthread_mutex_lock(&server.lock);
	for (i = 0; i < FAKE_BUCKETS; i++) {
		while (server.buckets[i]) {
			struct fake_block *block = server.buckets[i];

			server.buckets[i] = block->next;
			while (block->queue) {
				struct fake_request *request = block->queue;

				block->queue = request->next;
				free(request);
			}
			free(block);
		}
	}
	memset(server.next_index, 0, sizeof(server.next_index));
	free(server.free_list);
	server.free_list = NULL;
	server.free_count = 0;
	server.free_capacity = 0;
	server.writes = 0;
	server.write_latency_us = write_latency_us;
	server.hold_writes = false;
	pthread_mutex_unlock(&server.lock);
}

uint64_t fake_server_writes(void)
{
	uint64_t writes;

	pthread_mutex_lock(&server.lock);
	writes = server.writes;
	pthread_mutex_unlock(&server.lock);
	return writes;
}

void fake_server_poke(uint64_t blkno, const uint8_t *data)
{
	struct fake_block *block;

	pthread_mutex_lock(&server.lock);
	block = find_block(blkno, true);
	memcpy(block->data, data, NGNFS_BLOCK_SIZE);
	block->version++;
	pthread_mutex_unlock(&server.lock);
}

void fake_client_reset_session(struct ngnfs_client *client, uint16_t device)
{
	struct fake_event *event;
	uint64_t target;
	size_t i;

	pthread_mutex_lock(&server.lock);
	for (i = 0; i < FAKE_BUCKETS; i++) {
		struct fake_block *block;

		for (block = server.buckets[i]; block; block = block->next) {
			if (ngnfs_blkno_device(block->blkno) != device)
				continue;
			block->access[client->index] = NGNFS_ACCESS_NONE;
			block->revoke_sent[client->index] = 0;
			process_block(block);
		}
	}
	event = new_event(FAKE_EVENT_RESET);
	event->device = device;
	pthread_mutex_lock(&client->lock);
	target = client->resets_delivered + 1;
	pthread_mutex_unlock(&client->lock);
	post(client, event);
	pthread_mutex_unlock(&server.lock);
	/* Like a real reset, the owner hears of it before anything else is sent. */
	pthread_mutex_lock(&client->lock);
	while (client->resets_delivered < target)
		pthread_cond_wait(&client->cond, &client->lock);
	pthread_mutex_unlock(&client->lock);
}

int ngnfs_client_create(const struct ngnfs_client_config *config,
			const struct ngnfs_client_ops *ops, void *owner,
			struct ngnfs_client **client_out)
{
	struct ngnfs_client *client = calloc(1, sizeof(*client));
	int i;

	if (!client)
		return -ENOMEM;
	pthread_mutex_lock(&server.lock);
	for (i = 0; i < FAKE_MAX_CLIENTS && server.clients[i]; i++)
		;
	if (i == FAKE_MAX_CLIENTS) {
		pthread_mutex_unlock(&server.lock);
		free(client);
		return -EMFILE;
	}
	server.clients[i] = client;
	pthread_mutex_unlock(&server.lock);
	client->index = i;
	client->id = (uint64_t)i + 1;
	client->device_count = config->device_count;
	client->commit_retry_ms = config->commit_retry_ms;
	if (ops)
		client->ops = *ops;
	client->owner = owner;
	pthread_mutex_init(&client->lock, NULL);
	pthread_cond_init(&client->cond, NULL);
	if (pthread_create(&client->thread, NULL, io_main, client)) {
		pthread_mutex_lock(&server.lock);
		server.clients[i] = NULL;
		pthread_mutex_unlock(&server.lock);
		free(client);
		return -EAGAIN;
	}
	*client_out = client;
	return 0;
}

void ngnfs_client_destroy(struct ngnfs_client *client)
{
	size_t i;

	if (!client)
		return;
	pthread_mutex_lock(&client->lock);
	client->stopping = true;
	pthread_cond_broadcast(&client->cond);
	pthread_mutex_unlock(&client->lock);
	pthread_join(client->thread, NULL);

	pthread_mutex_lock(&server.lock);
	for (i = 0; i < FAKE_BUCKETS; i++) {
		struct fake_block *block;

		for (block = server.buckets[i]; block; block = block->next) {
			struct fake_request **link = &block->queue;

			while (*link) {
				if ((*link)->client == client) {
					struct fake_request *gone = *link;

					*link = gone->next;
					free(gone);
				} else {
					link = &(*link)->next;
				}
			}
			block->access[client->index] = NGNFS_ACCESS_NONE;
			block->revoke_sent[client->index] = 0;
			process_block(block);
		}
	}
	server.clients[client->index] = NULL;
	pthread_mutex_unlock(&server.lock);
	while (client->head) {
		struct fake_event *event = client->head;

		client->head = event->next;
		free(event->versions);
		free(event);
	}
	pthread_mutex_destroy(&client->lock);
	pthread_cond_destroy(&client->cond);
	free(client);
}

uint16_t ngnfs_client_device_count(const struct ngnfs_client *client)
{
	return client->device_count;
}

uint64_t ngnfs_client_id(const struct ngnfs_client *client)
{
	return client->id;
}

int ngnfs_client_device_info(struct ngnfs_client *client, uint16_t device,
			     struct ngnfs_msg *hello_reply)
{
	(void)client;
	(void)device;
	(void)hello_reply;
	return -EOPNOTSUPP;
}

uint32_t ngnfs_client_commit_retry_ms(const struct ngnfs_client *client)
{
	return client->commit_retry_ms;
}

/* The double has no sessions to lose: every device is always reachable. */
uint64_t ngnfs_client_unreachable_ms(struct ngnfs_client *client, uint16_t device)
{
	(void)client;
	(void)device;
	return 0;
}

/* The double's I/O thread is never behind: it delivers as soon as the server acts. */
bool ngnfs_client_io_current(struct ngnfs_client *client)
{
	(void)client;
	return true;
}

int ngnfs_client_wait_io_pass(struct ngnfs_client *client)
{
	(void)client;
	return 0;
}

int ngnfs_client_get(struct ngnfs_client *client, const struct ngnfs_block_request *blocks,
		     uint32_t count, ngnfs_grant_done_fn done, void *arg)
{
	uint32_t i;

	pthread_mutex_lock(&server.lock);
	for (i = 0; i < count; i++) {
		struct fake_block *block = find_block(blocks[i].blkno, true);
		struct fake_request *request = calloc(1, sizeof(*request));
		struct fake_request **link = &block->queue;

		if (!request)
			abort();
		request->client = client;
		request->cached_version = blocks[i].version;
		request->access = blocks[i].access;
		request->done = done;
		request->arg = arg;
		while (*link)
			link = &(*link)->next;
		*link = request;
		process_block(block);
	}
	pthread_mutex_unlock(&server.lock);
	return 0;
}

int ngnfs_client_release(struct ngnfs_client *client, uint64_t blkno, uint8_t access)
{
	struct fake_block *block;

	pthread_mutex_lock(&server.lock);
	block = find_block(blkno, true);
	if (block->access[client->index] > access)
		block->access[client->index] = access;
	block->revoke_sent[client->index] = 0;
	process_block(block);
	pthread_mutex_unlock(&server.lock);
	return 0;
}

/* Server lock held. */
static bool on_free_list(uint64_t blkno)
{
	uint32_t i;

	for (i = 0; i < server.free_count; i++)
		if (server.free_list[i] == blkno)
			return true;
	return false;
}

/*
 * Server lock held.  fail_status: nothing applied, the write completes
 * with it.  staged: the devices accepted the set before the writer's
 * grants went (a multi-device set staged, then a session reset), so the
 * grants are not checked.  reply_status: applied (when the checks pass),
 * but the reply is lost and the write completes with this status instead.
 */
static void apply_write(struct ngnfs_client *client, const struct ngnfs_write_set *set,
			ngnfs_write_done_fn done, void *arg, int fail_status, bool staged,
			int reply_status)
{
	struct fake_event *event = new_event(FAKE_EVENT_WRITE_DONE);
	int me = client->index;
	uint32_t i;

	event->write_done = done;
	event->arg = arg;
	event->status = fail_status;
	event->versions = calloc(set->block_count + 1, sizeof(uint64_t));
	if (!event->versions)
		abort();
	for (i = 0; i < set->block_count && !event->status; i++) {
		struct fake_block *block = find_block(set->blocks[i].blkno, true);

		if (block->access[me] != NGNFS_ACCESS_WRITE && !staged)
			event->status = -EPERM;
		else if (block->version != set->blocks[i].version)
			event->status = -ESTALE;
	}
	/* Like blockd: "block to free is not allocated". */
	for (i = 0; i < set->free_count && !event->status; i++)
		if (on_free_list(set->frees[i]))
			event->status = -EINVAL;
	if (!event->status) {
		for (i = 0; i < set->block_count; i++) {
			struct fake_block *block = find_block(set->blocks[i].blkno, true);

			memcpy(block->data, set->blocks[i].data, NGNFS_BLOCK_SIZE);
			block->version++;
			event->versions[i] = block->version;
		}
		for (i = 0; i < set->free_count; i++) {
			/* Grants stay: like blockd, the freer releases them itself. */
			if (server.free_count == server.free_capacity) {
				server.free_capacity =
				    server.free_capacity ? server.free_capacity * 2 : 64;
				server.free_list = realloc(server.free_list,
							   server.free_capacity * sizeof(uint64_t));
				if (!server.free_list)
					abort();
			}
			server.free_list[server.free_count++] = set->frees[i];
		}
	}
	server.writes++;
	for (i = 0; i < set->block_count; i++) {
		struct fake_block *block = find_block(set->blocks[i].blkno, true);

		if (set->release && block->access[me] > set->release_access) {
			block->access[me] = set->release_access;
			block->revoke_sent[me] = 0;
		}
		process_block(block);
	}
	event->due_us = now_us() + server.write_latency_us;
	if (!event->status)
		event->status = reply_status;
	if (event->status) {
		free(event->versions);
		event->versions = NULL;
	}
	post(client, event);
}

int ngnfs_client_write_set(struct ngnfs_client *client, const struct ngnfs_write_set *set,
			   ngnfs_write_done_fn done, void *arg)
{
	struct ngnfs_block_request *blocks;
	struct held_write *held;
	uint64_t *frees;

	pthread_mutex_lock(&server.lock);
	if (!server.hold_writes) {
		apply_write(client, set, done, arg, 0, false, 0);
		pthread_mutex_unlock(&server.lock);
		return 0;
	}
	held = calloc(1, sizeof(*held));
	if (!held)
		abort();
	held->client = client;
	held->set = *set;
	blocks = calloc(set->block_count + 1, sizeof(*blocks));
	frees = calloc(set->free_count + 1, sizeof(*frees));
	if (!blocks || !frees)
		abort();
	memcpy(blocks, set->blocks, set->block_count * sizeof(*blocks));
	if (set->free_count)
		memcpy(frees, set->frees, set->free_count * sizeof(*frees));
	held->set.blocks = blocks;
	held->set.frees = frees;
	held->done = done;
	held->arg = arg;
	if (!server.held)
		server.held_tail = &server.held;
	*server.held_tail = held;
	server.held_tail = &held->next;
	pthread_mutex_unlock(&server.lock);
	return 0;
}

void fake_server_hold_writes(bool hold)
{
	pthread_mutex_lock(&server.lock);
	server.hold_writes = hold;
	pthread_mutex_unlock(&server.lock);
}

unsigned int fake_server_held_writes(void)
{
	struct held_write *held;
	unsigned int count = 0;

	pthread_mutex_lock(&server.lock);
	for (held = server.held; held; held = held->next)
		count++;
	pthread_mutex_unlock(&server.lock);
	return count;
}

static void release_writes(int fail_status, bool staged, int reply_status)
{
	pthread_mutex_lock(&server.lock);
	while (server.held) {
		struct held_write *held = server.held;

		server.held = held->next;
		apply_write(held->client, &held->set, held->done, held->arg, fail_status, staged,
			    reply_status);
		free((void *)held->set.blocks);
		free((void *)held->set.frees);
		free(held);
	}
	pthread_mutex_unlock(&server.lock);
}

void fake_server_release_writes(int fail_status)
{
	release_writes(fail_status, false, 0);
}

void fake_server_release_writes_staged(void)
{
	release_writes(0, true, 0);
}

unsigned int fake_server_free_count_of(uint64_t blkno)
{
	unsigned int count = 0;
	uint32_t i;

	pthread_mutex_lock(&server.lock);
	for (i = 0; i < server.free_count; i++)
		count += server.free_list[i] == blkno;
	pthread_mutex_unlock(&server.lock);
	return count;
}

void fake_server_release_writes_reply_lost(int reply_status)
{
	release_writes(0, true, reply_status);
}

struct sync_wait {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool done;
	int status;
	uint64_t version;
	uint8_t *data;
	bool changed;
	uint64_t *versions;
	uint32_t count;
};

static void sync_grant_done(void *arg, int status, uint64_t blkno, uint64_t version, uint8_t access,
			    const uint8_t *data)
{
	struct sync_wait *wait = arg;

	(void)blkno;
	(void)access;
	pthread_mutex_lock(&wait->lock);
	wait->status = status;
	wait->version = version;
	if (data && wait->data)
		memcpy(wait->data, data, NGNFS_BLOCK_SIZE);
	wait->changed = data != NULL;
	wait->done = true;
	pthread_cond_signal(&wait->cond);
	pthread_mutex_unlock(&wait->lock);
}

static void sync_write_done(void *arg, int status, const uint64_t *versions)
{
	struct sync_wait *wait = arg;

	pthread_mutex_lock(&wait->lock);
	wait->status = status;
	if (!status && versions && wait->versions)
		memcpy(wait->versions, versions, wait->count * sizeof(uint64_t));
	wait->done = true;
	pthread_cond_signal(&wait->cond);
	pthread_mutex_unlock(&wait->lock);
}

static int sync_wait_for(struct sync_wait *wait)
{
	pthread_mutex_lock(&wait->lock);
	while (!wait->done)
		pthread_cond_wait(&wait->cond, &wait->lock);
	pthread_mutex_unlock(&wait->lock);
	pthread_mutex_destroy(&wait->lock);
	pthread_cond_destroy(&wait->cond);
	return wait->status;
}

int ngnfs_client_get_sync(struct ngnfs_client *client, uint64_t blkno, uint8_t access,
			  uint64_t cached_version, uint64_t *version, uint8_t *data,
			  bool *data_changed)
{
	struct sync_wait wait = { .lock = PTHREAD_MUTEX_INITIALIZER,
				  .cond = PTHREAD_COND_INITIALIZER,
				  .data = data };
	struct ngnfs_block_request request = { .blkno = blkno,
					       .version = cached_version,
					       .access = access };
	int ret;

	ret = ngnfs_client_get(client, &request, 1, sync_grant_done, &wait);
	if (ret)
		return ret;
	ret = sync_wait_for(&wait);
	if (version)
		*version = wait.version;
	if (data_changed)
		*data_changed = wait.changed;
	return ret;
}

int ngnfs_client_write_set_sync(struct ngnfs_client *client, const struct ngnfs_write_set *set,
				uint64_t *versions)
{
	struct sync_wait wait = { .lock = PTHREAD_MUTEX_INITIALIZER,
				  .cond = PTHREAD_COND_INITIALIZER,
				  .versions = versions,
				  .count = set->block_count };
	int ret;

	ret = ngnfs_client_write_set(client, set, sync_write_done, &wait);
	if (ret)
		return ret;
	return sync_wait_for(&wait);
}

int ngnfs_client_alloc_sync(struct ngnfs_client *client, uint16_t device, uint32_t count,
			    uint64_t *blknos, uint64_t *versions, uint32_t *session_epoch,
			    uint32_t *allocated)
{
	uint32_t i;
	uint32_t n = 0;

	if (device >= client->device_count || device >= 64)
		return -EINVAL;
	pthread_mutex_lock(&server.lock);
	for (i = 0; i < count; i++) {
		struct fake_block *block;
		uint64_t blkno = 0;
		uint32_t j;

		for (j = 0; j < server.free_count; j++) {
			struct fake_block *candidate = find_block(server.free_list[j], true);
			bool held = candidate->queue != NULL;
			int c;

			/* Like blockd: a block somebody still holds is not reservable. */
			for (c = 0; c < FAKE_MAX_CLIENTS; c++)
				held |= candidate->access[c] != NGNFS_ACCESS_NONE;
			if (!held && ngnfs_blkno_device(server.free_list[j]) == device) {
				blkno = server.free_list[j];
				server.free_list[j] = server.free_list[--server.free_count];
				break;
			}
		}
		if (!blkno)
			blkno = ngnfs_blkno_make(device,
						 FAKE_ALLOC_FIRST + server.next_index[device]++);
		block = find_block(blkno, true);
		block->access[client->index] = NGNFS_ACCESS_WRITE;
		blknos[n] = blkno;
		versions[n] = block->version;
		n++;
	}
	pthread_mutex_unlock(&server.lock);
	if (client->reset_during_alloc == device + 1) {
		/* the reply is on its way when the session ends: the reservations go with it */
		client->reset_during_alloc = 0;
		fake_client_reset_session(client, device);
	}
	if (session_epoch)
		*session_epoch = (uint32_t)client->index + 1; /* one session per fake client */
	*allocated = n;
	return 0;
}

void fake_client_reset_during_next_alloc(struct ngnfs_client *client, uint16_t device)
{
	client->reset_during_alloc = device + 1;
}

int ngnfs_client_cmpxchg_sync(struct ngnfs_client *client, uint64_t blkno,
			      uint64_t expected_version, const uint8_t *data, uint64_t *version)
{
	(void)client;
	(void)blkno;
	(void)expected_version;
	(void)data;
	(void)version;
	return -EOPNOTSUPP;
}

int ngnfs_client_read_incoherent_sync(struct ngnfs_client *client, uint64_t blkno,
				      uint64_t *version, uint8_t *data)
{
	struct fake_block *block;

	(void)client;
	pthread_mutex_lock(&server.lock);
	block = find_block(blkno, false);
	if (block) {
		*version = block->version;
		memcpy(data, block->data, NGNFS_BLOCK_SIZE);
	} else {
		*version = 0;
		memset(data, 0, NGNFS_BLOCK_SIZE);
	}
	pthread_mutex_unlock(&server.lock);
	return 0;
}

int ngnfs_client_statfs_sync(struct ngnfs_client *client, uint16_t device,
			     struct ngnfs_statfs_figures *statfs)
{
	(void)client;
	(void)device;
	(void)statfs;
	return -EOPNOTSUPP;
}

int ngnfs_client_format_sync(struct ngnfs_client *client, uint16_t device,
			     const uint8_t fs_id[NGNFS_FS_ID_SIZE], uint32_t device_count)
{
	(void)client;
	(void)device;
	(void)fs_id;
	(void)device_count;
	return -EOPNOTSUPP;
}
