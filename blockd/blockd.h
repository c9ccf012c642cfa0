/* SPDX-License-Identifier: GPL-2.0-or-later */
#ifndef NGNFS_BLOCKD_H
#define NGNFS_BLOCKD_H

/*
 * The state of one blockd server and the interfaces between its parts.
 *
 * Threads: the event loop thread owns everything in struct blockd and
 * every session, grant, reservation and staged set; the commit thread
 * (commit.c) only writes batches it is handed; the resolver thread
 * (resolver.c) only talks to other blockd servers and hands answers
 * back.  So nothing here is locked: a request is decoded, checked and
 * turned into a write batch on the loop, and its effects on memory are
 * applied on the loop when the batch is durable.
 *
 * A session processes its requests strictly in order and stops reading
 * while one of its requests waits for the commit thread, so that a
 * client's RELEASE never overtakes its WRITE and a base version is
 * never checked against a write still in flight.  The one exception is
 * a one-frame WRITE none of whose blocks is in a write in flight
 * (session.c, write_may_overtake_reply): it joins the commit queue behind
 * its session's earlier writes, so that a client may keep several writes
 * in flight to one device.  Group commit comes from many sessions, and
 * such a session's several writes, sharing a batch.
 *
 * XXX:
 *  - One event loop thread: request checks and RocksDB reads of all
 *    sessions share one core.
 *  - No per-session limits (queued GETs, output buffer, reservations).
 */

#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <stdbool.h>
#include <stdint.h>

#include "commit.h"
#include "config.h"
#include "map.h"
#include "msg.h"
#include "store.h"

struct blockd;
struct staged_set;
struct held_write;

struct session {
	struct session *next;
	struct session *prev;
	struct blockd *server;
	struct bufferevent *bev;
	uint64_t id;
	char peer[64];
	char name[96]; /* "session N (host:port)" for log lines */
	uint64_t client_id;
	uint32_t flags; /* NGNFS_HELLO_* */
	bool hello_done;
	bool closing;		      /* flushing a final ERROR, then closed */
	bool gone;		      /* connection closed; struct lives while refs > 0 */
	bool output_full;	      /* not read until its unread replies drain (session.c) */
	unsigned int inflight;	      /* requests waiting on the commit thread */
	unsigned int inflight_writes; /* of them, one-device WRITEs (session.c) */
	unsigned int refs;
	uint64_t reserved_count;
	uint32_t session_epoch;	       /* 0 until its first ALLOC (alloc_session_epoch) */
	struct held_write *held_write; /* a multi-frame WRITE before its last frame */
};

/* One holder of a grant on a block. */
struct grant_holder {
	struct session *session;
	uint8_t access;
	uint8_t revoked_to;  /* lowest access a REVOKE asked for, or 0xff */
	uint64_t revoked_ms; /* monotonic, when the first unanswered REVOKE went */
};

/*
 * A REVOKE sent to a holder that had none outstanding, for the revoke
 * timeout (grant.c).  Holds a session reference.
 */
struct revoke_record {
	struct session *session;
	uint64_t blkno;
	uint64_t sent_ms;
};

/* Revoke records in the order they were sent: a ring. */
struct revoke_queue {
	struct revoke_record *records;
	size_t head;
	size_t count;
	size_t capacity;
};

/* One queued GET entry. */
struct grant_waiter {
	struct grant_waiter *next;
	struct session *session;
	uint64_t request_id;
	uint64_t cached_version;
	uint8_t access;
};

/* Per-block coherency state; exists only while someone holds, waits or pins. */
struct block_state {
	uint64_t blkno;
	struct grant_holder *holders;
	unsigned int holder_count;
	unsigned int holder_capacity;
	struct grant_waiter *queue_head;
	struct grant_waiter *queue_tail;
	struct staged_set *pin; /* staged, unresolved set this block belongs to */
	/*
	 * Another unresolved set also stages this block.  Only a store
	 * written before the drop of a set was persisted can hold that (a
	 * STAGE of a pinned block is refused); the pin then passes from set
	 * to set and lifts only when the last of them is resolved.
	 */
	bool pin_shared;
	unsigned int pending_writes;
};

enum staged_set_state {
	SET_STAGED,
	SET_APPLYING, /* apply or drop batch queued */
};

struct staged_set {
	uint64_t set_id;
	uint16_t participants[NGNFS_MSG_MAX_PARTICIPANTS];
	uint16_t participant_count;
	uint64_t *blknos; /* pinned blocks (writes and frees) */
	uint32_t block_count;
	uint32_t block_capacity;
	struct session *session; /* the staging session, NULL once it closed */
	uint64_t created_ms;	 /* monotonic */
	uint64_t last_ask_ms;
	enum staged_set_state state;
	unsigned int pending_stages; /* STAGE batches not yet durable */
	bool asking;		     /* a RESOLVE(UNKNOWN) to the primary is in flight */
	bool durable;		     /* its header is on disk */
};

/* Free space (alloc.c); see docs/blockd.md. */
struct allocator {
	uint64_t store_hwm;	  /* hwm after every queued batch */
	uint64_t alloc_hwm;	  /* next never-reserved index, >= store_hwm */
	struct u64map store_free; /* indexes with a FREE key after queued batches */
	struct u64map avail;	  /* indexes ALLOC may hand out (set) */
	uint64_t *avail_stack;	  /* same, LIFO order; stale entries skipped */
	size_t avail_stack_count;
	size_t avail_stack_capacity;
	struct u64map reserved;	     /* index -> session */
	uint64_t next_session_epoch; /* what the next session to allocate gets */
};

struct resolver;

struct blockd {
	struct blockd_config config;
	struct blockd_store store;
	struct committer committer;
	struct allocator alloc;
	struct resolver *resolver;
	struct event_base *base;
	struct evconnlistener *listener;
	struct event *signal_term;
	struct event *signal_int;
	struct event *tick;
	struct event *grace_end;
	struct session sessions; /* list head */
	uint32_t session_count;	 /* on the list: open connections */
	uint64_t next_session_id;
	struct u64map blocks;	/* blkno -> struct block_state */
	struct u64map sets;	/* set id -> struct staged_set */
	struct u64map outcomes; /* set id -> (void *)(uintptr_t)outcome */
	struct revoke_queue revokes;
	uint64_t server_instance;
	uint64_t start_ms;
	uint64_t overtaking_writes; /* WRITEs taken while their session's earlier ones committed */
	bool in_grace;
	bool formatting;
	bool shutting_down;
	int exit_status;
};

uint64_t blockd_now_ms(void);

/*
 * A request waiting for the commit thread.  The session is referenced and
 * stalled (reads nothing more) until pending_finish().  session is NULL
 * for work blockd does on its own (resolving an in-doubt set).
 */
struct pending {
	struct commit_op op;
	struct session *session;
	uint64_t request_id;
	enum ngnfs_msg_type request_type;
};

void pending_start(struct pending *pending, struct session *session, uint64_t request_id,
		   enum ngnfs_msg_type request_type, void (*done)(struct commit_op *));
void pending_finish(struct pending *pending);

/* request.c */
void request_dispatch(struct session *session, const struct ngnfs_msg *msg);
/* Drops the frames of a multi-frame WRITE the session did not finish. */
void request_session_gone(struct session *session);
/* Answer a request with only an error status, in its own reply type. */
void reply_refused(struct session *session, enum ngnfs_msg_type request_type, uint64_t request_id,
		   int status);
/*
 * May session write blkno, based on base_version?  For staged sets, set
 * is the set being staged (its own pin is a duplicate, not a conflict).
 * Returns 0 or a negative errno with *why saying why.
 */
int request_check_write(struct blockd *server, struct session *session, uint64_t blkno,
			uint64_t base_version, const char **why);
int request_check_free(struct blockd *server, struct session *session, uint64_t blkno,
		       const char **why);
const char *session_name(struct session *session);

/* session.c */
void session_ref(struct session *session);
void session_put(struct session *session);
void session_send(struct session *session, struct ngnfs_buffer *buffer);
void session_resume(struct session *session);
void session_close_all(struct blockd *server);
/* Close a session now, for reason (logged); its grants go to the waiters. */
void session_close(struct session *session, const char *reason);
/* The session has bytes read from its socket or waiting in it, not yet processed. */
bool session_has_unread_input(struct session *session);
void session_accept(struct blockd *server, evutil_socket_t fd, const char *peer);
/* The session's first HELLO was accepted: it may now stay idle. */
void session_hello_received(struct session *session);
/* Validate a block number for this device: 0, -EXDEV or -ERANGE. */
int blockd_check_blkno(struct blockd *server, uint64_t blkno);

/* grant.c */
struct block_state *block_state_get(struct blockd *server, uint64_t blkno, bool create);
void block_state_maybe_free(struct blockd *server, struct block_state *block);
struct grant_holder *grant_find_holder(struct block_state *block, struct session *session);
bool grant_holds_write(struct blockd *server, struct session *session, uint64_t blkno);
int grant_add_holder(struct block_state *block, struct session *session, uint8_t access);
int grant_queue_get(struct blockd *server, struct session *session, uint64_t request_id,
		    uint64_t blkno, uint64_t cached_version, uint8_t access);
void grant_release(struct blockd *server, struct session *session, uint64_t blkno, uint8_t keep);
void grant_examine(struct blockd *server, struct block_state *block);
void grant_examine_all(struct blockd *server);
void grant_session_gone(struct blockd *server, struct session *session);
/* Ask every reader other than session to drop a block (after CMPXCHG). */
void grant_revoke_readers(struct blockd *server, struct block_state *block,
			  struct session *session);
/* From the tick: close the sessions that left a REVOKE unanswered too long. */
void grant_tick(struct blockd *server);
/* At shutdown: drop the revoke records and their session references. */
void grant_free_revokes(struct blockd *server);

/* alloc.c */
int alloc_init(struct blockd *server);
void alloc_free(struct allocator *alloc);
/* Reserve up to count blocks for session; returns how many, indexes in out. */
uint32_t alloc_reserve(struct blockd *server, struct session *session, uint32_t count,
		       uint64_t *out);
void alloc_session_gone(struct blockd *server, struct session *session);
/* Gives the session its epoch (ALLOC_REPLY) if it has none yet. */
int alloc_session_epoch(struct blockd *server, struct session *session);
/* The write batch that writes index makes it allocated. */
int alloc_note_write(struct blockd *server, rocksdb_writebatch_t *batch, uint64_t index);
/* 0 if index may be freed (allocated), -EINVAL otherwise. */
int alloc_check_free(struct blockd *server, uint64_t index);
/* Not allocated (freed, never written, or reserved and not yet written): reads as zeros. */
bool alloc_is_free(struct blockd *server, uint64_t index);
void alloc_note_free(struct blockd *server, rocksdb_writebatch_t *batch, uint64_t index);
/* Whether index would be refused by alloc_note_write (gap too large). */
int alloc_check_write(struct blockd *server, uint64_t index);
uint64_t alloc_free_blocks(struct blockd *server);

/* sets.c */
int sets_load(struct blockd *server);
void sets_free(struct blockd *server);
void sets_handle_stage(struct session *session, const struct ngnfs_msg *msg);
void sets_handle_commit(struct session *session, const struct ngnfs_msg *msg);
void sets_handle_resolve(struct session *session, const struct ngnfs_msg *msg);
void sets_session_gone(struct blockd *server, struct session *session);
void sets_tick(struct blockd *server);
/* The primary's answer to a RESOLVE(UNKNOWN) from the resolver thread. */
void sets_resolved(struct blockd *server, uint64_t set_id, int status, uint8_t outcome);

/* resolver.c */
int resolver_start(struct blockd *server);
void resolver_stop(struct blockd *server);
void resolver_ask(struct blockd *server, uint64_t set_id, uint16_t primary);

#endif
