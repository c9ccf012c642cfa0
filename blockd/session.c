/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Sessions: one per accepted connection, on the libevent loop.
 *
 * Framing is done here and nowhere else: the 32-byte header is checked
 * with the codec before the rest of the frame is waited for, so a peer
 * announcing an oversized frame is refused before blockd buffers it.  A
 * frame that fails any check is answered with ERROR (status and reason),
 * logged with the peer address, and the connection is closed once the
 * ERROR is flushed, because the stream position can no longer be
 * trusted.  Requests already decoded are unaffected; nothing of the
 * malformed frame reaches the store.  Nor does anything of a frame the
 * stream ends in the middle of; the log line says so.
 *
 * A session stops reading while one of its requests waits for the
 * commit thread (see blockd.h), by disabling EV_READ; the frames that
 * arrive meanwhile wait in the kernel and in the input buffer.  Behind
 * WRITEs only it goes on reading, and takes a WRITE that may overtake
 * their replies (write_may_overtake_reply) at once; it stops at the first
 * frame that may not, leaving that frame whole in the input buffer for
 * the next completion to look at again.  It also
 * stops while SESSION_OUTPUT_HIGH bytes of its replies wait to be sent,
 * until half of them have left: a peer that sends requests and never
 * reads the replies (a bug, or hostile) would otherwise grow blockd
 * without bound, a READ_INCOHERENT of 256 blocks asking for a 1 MiB
 * reply in 2 KiB; so replies take at most max_sessions times that bound
 * (4 GiB at the default 512 sessions, in the worst case).  A gateway
 * reads its replies as they come and at worst pauses its own requests.
 *
 * Closing a session drops its grants, queued GETs and reservations and
 * hands its staged sets to recovery (sets.c).  The struct itself lives
 * on while requests in the commit queue still reference it.
 *
 * At most max_sessions connections are open at once; one more is closed
 * at accept with a log line.  Gateways hold one session per device and
 * peers one per question, so the limit only bites on a flood, and it
 * keeps file descriptors for RocksDB, whose failed write stops blockd.
 *
 * A connection silent for hello_timeout_ms before its HELLO is closed (a
 * read timeout on its bufferevent, lifted by the HELLO), so that
 * connections which never speak cannot keep those slots.
 *
 * After HELLO there is no idle timeout: a gateway's session may rightly
 * be quiet for hours.  TCP keepalive (NGNFS_SESSION_KEEPALIVE_*, msg.h) closes the
 * session of a host that went away without closing it, so that its
 * reservations and session slot come back, and TCP_USER_TIMEOUT bounds
 * how long data sent to such a host may stay unacknowledged.  A session
 * that holds grants somebody needs is closed sooner, by the revoke
 * timeout (grant.c).
 */

#include <endian.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include <event2/buffer.h>

#include "blockd.h"
#include "log.h"

/* bytes libevent may read or write on a session in one callback */
#define SESSION_MAX_SINGLE_IO (256 * 1024)
/* unsent replies at which a session stops being read, and where it resumes */
#define SESSION_OUTPUT_HIGH (8U << 20)
#define SESSION_OUTPUT_LOW  (SESSION_OUTPUT_HIGH / 2)
/*
 * WRITEs of one session in the commit queue at once: libcore keeps at most
 * two per device (plus the multi-device one), and the bound keeps a
 * client that sends WRITE after WRITE from filling blockd's memory.
 */
#define SESSION_WRITES_IN_FLIGHT 8

/*
 * A silent peer is probed after 30 s idle, every 10 s, and given up after
 * 3 unanswered probes: a dead host's session ends about a minute later.
 * Sent data unacknowledged for as long ends it too (TCP's default is ~15
 * minutes of retransmissions).
 */

static void session_free_connection(struct session *session);
static void read_callback(struct bufferevent *bev, void *arg);
static void output_drained_callback(struct bufferevent *bev, void *arg);
static void event_callback(struct bufferevent *bev, short what, void *arg);

void session_ref(struct session *session)
{
	session->refs++;
}

void session_put(struct session *session)
{
	if (--session->refs == 0)
		free(session);
}

void session_send(struct session *session, struct ngnfs_buffer *buffer)
{
	if (session->gone || buffer->error || buffer->length == 0)
		return;
	bufferevent_write(session->bev, buffer->data, buffer->length);
}

static void session_end(struct session *session, const char *reason)
{
	struct blockd *server = session->server;

	if (session->gone)
		return;
	session->gone = true;
	log_info("%s ended: %s", session->name, reason);
	session->prev->next = session->next;
	session->next->prev = session->prev;
	server->session_count--;
	grant_session_gone(server, session);
	alloc_session_gone(server, session);
	sets_session_gone(server, session);
	request_session_gone(session);
	session_free_connection(session);
	session_put(session);
}

static void session_free_connection(struct session *session)
{
	if (session->bev) {
		bufferevent_free(session->bev);
		session->bev = NULL;
	}
}

static void flushed_callback(struct bufferevent *bev, void *arg)
{
	struct session *session = arg;

	(void)bev;
	session_end(session, "closed by blockd after a refused request");
}

/* Stop reading, flush what was sent, then close. */
static void session_close_after_flush(struct session *session)
{
	bufferevent_disable(session->bev, EV_READ);
	bufferevent_setwatermark(session->bev, EV_WRITE, 0, 0);
	if (evbuffer_get_length(bufferevent_get_output(session->bev)) == 0) {
		session_end(session, "closed by blockd after a refused request");
		return;
	}
	bufferevent_setcb(session->bev, NULL, flushed_callback, event_callback, session);
}

static void protocol_error(struct session *session, const uint8_t *header, int status,
			   const char *why)
{
	struct ngnfs_buffer buffer;
	uint64_t request_id;

	memcpy(&request_id, header + 16, sizeof(request_id));
	request_id = le64toh(request_id);
	log_warn("malformed frame from %s: %s (%s); closing the connection", session->name,
		 why ? why : "no reason given", strerror(-status));
	ngnfs_buffer_init(&buffer);
	ngnfs_encode_error(&buffer, request_id, status, why ? why : "malformed frame");
	session_send(session, &buffer);
	ngnfs_buffer_free(&buffer);
	session->closing = true;
}

/*
 * libevent 2.1 reads at most 4 KiB per read event, so a 20 KiB WRITE
 * frame would take five trips through the loop (epoll_wait, FIONREAD,
 * readv each).  Once the header has said how long the frame is, the rest
 * that already waits in the socket is read straight into the input
 * buffer with one recvmsg.  Returns 0, or -ECONNRESET (and friends) or
 * -EPIPE for the end of the stream, which the caller ends the session
 * with: once read here, the bufferevent would never see it.
 */
static int session_read_rest(struct session *session, struct evbuffer *input, size_t missing)
{
	struct evbuffer_iovec space[2];
	struct iovec iov[2];
	struct msghdr message = { .msg_iov = iov };
	ssize_t got;
	int error = 0;
	int count;

	/* A bufferevent freezes the end of its input; it thaws it to read, as here. */
	evbuffer_unfreeze(input, 0);
	count = evbuffer_reserve_space(input, (ev_ssize_t)missing, space, 2);
	if (count <= 0) {
		evbuffer_freeze(input, 0);
		return 0;
	}
	/* Only this frame: the extents may be larger than asked for. */
	for (int i = 0; i < count; i++) {
		if (space[i].iov_len > missing)
			space[i].iov_len = missing;
		missing -= space[i].iov_len;
		iov[i].iov_base = space[i].iov_base;
		iov[i].iov_len = space[i].iov_len;
	}
	message.msg_iovlen = (size_t)count;
	got = recvmsg(bufferevent_getfd(session->bev), &message, MSG_DONTWAIT);
	if (got < 0) {
		if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
			error = -errno;
		got = 0;
	} else if (got == 0) {
		error = -EPIPE;
	}
	for (int i = 0; i < count; i++) {
		size_t used = (size_t)got < space[i].iov_len ? (size_t)got : space[i].iov_len;

		space[i].iov_len = used;
		got -= (ssize_t)used;
	}
	evbuffer_commit_space(input, space, count);
	evbuffer_freeze(input, 0);
	return error;
}

/*
 * Why a session ended at the end of its stream: a peer that stops in the
 * middle of a frame (a crash, a cut cable, a client bug) is worth telling
 * apart from one that closed between requests.
 */
static void session_end_of_stream(struct session *session, int error)
{
	size_t partial = evbuffer_get_length(bufferevent_get_input(session->bev));
	char reason[160];

	if (error && error != -EPIPE)
		snprintf(reason, sizeof(reason), "%s", strerror(-error));
	else
		snprintf(reason, sizeof(reason), "connection closed by peer");
	if (session->output_full)
		/* its input holds whole requests blockd chose not to read yet */
		snprintf(reason + strlen(reason), sizeof(reason) - strlen(reason),
			 " with %zu bytes of replies unread",
			 evbuffer_get_length(bufferevent_get_output(session->bev)));
	else if (partial)
		snprintf(reason + strlen(reason), sizeof(reason) - strlen(reason),
			 " in the middle of a frame (%zu bytes of it received, discarded)",
			 partial);
	session_end(session, reason);
}

/*
 * Whether the peer has left too many replies unread to take another
 * request; the first time, libevent is asked to call back once the
 * output is down to SESSION_OUTPUT_LOW.
 */
static bool session_output_full(struct session *session)
{
	size_t unsent;

	if (session->output_full)
		return true;
	unsent = evbuffer_get_length(bufferevent_get_output(session->bev));
	if (unsent < SESSION_OUTPUT_HIGH)
		return false;
	session->output_full = true;
	log_info("%s has %zu bytes of replies unread: not reading its requests until half of "
		 "them have left",
		 session->name, unsent);
	bufferevent_setwatermark(session->bev, EV_WRITE, SESSION_OUTPUT_LOW, 0);
	bufferevent_setcb(session->bev, read_callback, output_drained_callback, event_callback,
			  session);
	return true;
}

/*
 * Whether a request may be taken while earlier ones of its session wait
 * for the commit thread: only a one-frame WRITE of a set that lives on
 * this device, behind nothing but such WRITEs, none of whose blocks or
 * frees is in a write still in flight or pinned by a staged set (whose
 * resolution may be what is in flight: the client need not wait for it),
 * and fewer than SESSION_WRITES_IN_FLIGHT of them.  Its checks (grants, base
 * versions read from the store) then see what they would see once the
 * earlier writes are done, since those change none of its blocks and
 * release no grant it relies on (a RELEASE is never taken early, nor is
 * anything else); and the commit queue keeps the batches, and so the
 * replies, in the order of the requests.
 * This lets a client keep more than one write in flight per device, each
 * joining the next group commit instead of waiting for the last reply.
 */
static bool write_may_overtake_reply(struct session *session, const struct ngnfs_msg *msg)
{
	struct blockd *server = session->server;
	uint32_t i;

	if (session->inflight != session->inflight_writes ||
	    session->inflight >= SESSION_WRITES_IN_FLIGHT || msg->type != NGNFS_MSG_WRITE ||
	    msg->write.phase != NGNFS_WRITE_SINGLE || msg->write.frame_count != 1 ||
	    session->held_write)
		return false;
	for (i = 0; i < msg->write.block_count; i++) {
		uint64_t blkno, base_version;
		const struct block_state *block;

		ngnfs_msg_write_block(msg, i, &blkno, &base_version);
		block = block_state_get(server, blkno, false);
		if (block && (block->pending_writes || block->pin))
			return false;
	}
	for (i = 0; i < msg->write.free_count; i++) {
		const struct block_state *block =
		    block_state_get(server, ngnfs_msg_write_free(msg, i), false);

		if (block && (block->pending_writes || block->pin))
			return false;
	}
	return true;
}

static void session_process(struct session *session)
{
	struct evbuffer *input;
	bool waiting = false; /* a whole frame waits for the session's requests in flight */

	if (session->gone)
		return;
	input = bufferevent_get_input(session->bev);
	while (!session->closing && !session->server->shutting_down &&
	       !session_output_full(session)) {
		uint8_t header[NGNFS_MSG_HEADER_SIZE];
		size_t available = evbuffer_get_length(input);
		struct ngnfs_msg msg;
		size_t frame_length;
		const char *why = NULL;
		uint8_t *frame;
		int ret;

		if (available < NGNFS_MSG_HEADER_SIZE)
			break;
		evbuffer_copyout(input, header, sizeof(header));
		ret = ngnfs_msg_check_header(header, &frame_length, &why);
		if (session->inflight &&
		    (ret ||
		     le16toh(((const struct ngnfs_msg_header *)header)->type) != NGNFS_MSG_WRITE)) {
			/* answered (a malformed one refused) once the requests before it are */
			waiting = true;
			break;
		}
		if (ret) {
			protocol_error(session, header, ret, why);
			break;
		}
		if (available < frame_length) {
			ret = session_read_rest(session, input, frame_length - available);
			if (ret) {
				session_end_of_stream(session, ret);
				return;
			}
			available = evbuffer_get_length(input);
			if (available < frame_length)
				break;
		}
		frame = malloc(frame_length);
		if (!frame) {
			if (session->inflight) {
				waiting = true; /* a completion comes back here */
				break;
			}
			protocol_error(session, header, -ENOMEM, "out of memory for the frame");
			break;
		}
		if (session->inflight) {
			/*
			 * Taken only if it may overtake; otherwise (a malformed one
			 * too) left for the completion, which looks at it again.
			 */
			evbuffer_copyout(input, frame, frame_length);
			if (ngnfs_msg_decode(frame, frame_length, &msg, &why) ||
			    !write_may_overtake_reply(session, &msg)) {
				free(frame);
				waiting = true;
				break;
			}
			evbuffer_drain(input, frame_length);
			session->server->overtaking_writes++;
		} else {
			evbuffer_remove(input, frame, frame_length);
			ret = ngnfs_msg_decode(frame, frame_length, &msg, &why);
			if (ret) {
				protocol_error(session, header, ret, why);
				free(frame);
				continue;
			}
		}
		request_dispatch(session, &msg);
		free(frame);
	}
	if (session->gone)
		return;
	if (session->closing) {
		session_close_after_flush(session);
		return;
	}
	/*
	 * Behind WRITEs in flight the session is still read, so that its next
	 * WRITE can join the next group commit; it stops at a frame that must
	 * wait (so at most one frame and one read's worth are buffered), and
	 * behind anything else.
	 */
	if (session->server->shutting_down || session->output_full || waiting ||
	    session->inflight != session->inflight_writes)
		bufferevent_disable(session->bev, EV_READ);
	else
		bufferevent_enable(session->bev, EV_READ);
}

void session_resume(struct session *session)
{
	session_process(session);
}

static void read_callback(struct bufferevent *bev, void *arg)
{
	(void)bev;
	session_process(arg);
}

static void output_drained_callback(struct bufferevent *bev, void *arg)
{
	struct session *session = arg;

	(void)bev;
	if (!session->output_full || session->closing)
		return;
	session->output_full = false;
	bufferevent_setwatermark(session->bev, EV_WRITE, 0, 0);
	bufferevent_setcb(session->bev, read_callback, NULL, event_callback, session);
	log_info("%s read its replies: reading its requests again", session->name);
	session_process(session);
}

static void event_callback(struct bufferevent *bev, short what, void *arg)
{
	struct session *session = arg;

	(void)bev;
	if (what & BEV_EVENT_TIMEOUT)
		session_end(session, "no HELLO within hello_timeout_ms");
	else if (what & BEV_EVENT_EOF)
		session_end_of_stream(session, 0);
	else if (what & BEV_EVENT_ERROR)
		session_end_of_stream(session,
				      EVUTIL_SOCKET_ERROR() ? -EVUTIL_SOCKET_ERROR() : -EIO);
}

/* Best effort: a session works without them, only it notices a dead peer later. */
static void set_socket_options(evutil_socket_t fd, const char *peer)
{
	/* Replies are small and latency-bound: never wait for Nagle. */
	const struct {
		int level, name, value;
		const char *what;
	} options[] = {
		{ IPPROTO_TCP, TCP_NODELAY, 1, "TCP_NODELAY" },
		{ SOL_SOCKET, SO_KEEPALIVE, 1, "SO_KEEPALIVE" },
		{ IPPROTO_TCP, TCP_KEEPIDLE, NGNFS_SESSION_KEEPALIVE_IDLE_S, "TCP_KEEPIDLE" },
		{ IPPROTO_TCP, TCP_KEEPINTVL, NGNFS_SESSION_KEEPALIVE_INTERVAL_S, "TCP_KEEPINTVL" },
		{ IPPROTO_TCP, TCP_KEEPCNT, NGNFS_SESSION_KEEPALIVE_PROBES, "TCP_KEEPCNT" },
		{ IPPROTO_TCP, TCP_USER_TIMEOUT, NGNFS_SESSION_USER_TIMEOUT_MS,
		  "TCP_USER_TIMEOUT" },
	};

	for (size_t i = 0; i < sizeof(options) / sizeof(options[0]); i++) {
		if (setsockopt(fd, options[i].level, options[i].name, &options[i].value,
			       sizeof(options[i].value)) < 0)
			log_warn("connection from %s: cannot set %s: %s", peer, options[i].what,
				 strerror(errno));
	}
}

void session_accept(struct blockd *server, evutil_socket_t fd, const char *peer)
{
	struct session *session;

	if (server->session_count >= server->config.max_sessions) {
		log_warn("refusing the connection from %s: %u sessions are open (max_sessions)",
			 peer, server->session_count);
		evutil_closesocket(fd);
		return;
	}
	session = calloc(1, sizeof(*session));
	if (!session) {
		log_error("cannot accept connection from %s: out of memory", peer);
		evutil_closesocket(fd);
		return;
	}
	set_socket_options(fd, peer);
	session->server = server;
	session->id = ++server->next_session_id;
	session->refs = 1;
	snprintf(session->peer, sizeof(session->peer), "%s", peer);
	snprintf(session->name, sizeof(session->name), "session %llu (%s)",
		 (unsigned long long)session->id, peer);
	session->bev = bufferevent_socket_new(server->base, fd, BEV_OPT_CLOSE_ON_FREE);
	if (!session->bev) {
		log_error("cannot accept connection from %s: out of memory", peer);
		evutil_closesocket(fd);
		free(session);
		return;
	}
	/*
	 * libevent writes at most 16 KiB per callback by default; raising it
	 * lets a large reply leave in one trip through the loop.  Reads do
	 * not follow the setting in libevent 2.1: its evbuffer_read takes at
	 * most 4 KiB per read event (EVBUFFER_MAX_READ), which is why
	 * session_read_rest reads the rest of a frame itself.
	 */
	if (bufferevent_set_max_single_read(session->bev, SESSION_MAX_SINGLE_IO) ||
	    bufferevent_set_max_single_write(session->bev, SESSION_MAX_SINGLE_IO))
		log_warn("%s: cannot raise libevent's per-call I/O size; staying at its default",
			 session->name);
	session->next = server->sessions.next;
	session->prev = &server->sessions;
	server->sessions.next->prev = session;
	server->sessions.next = session;
	server->session_count++;
	log_debug("%s connected", session->name);
	bufferevent_setcb(session->bev, read_callback, NULL, event_callback, session);
	{
		struct timeval hello_timeout = {
			.tv_sec = server->config.hello_timeout_ms / 1000,
			.tv_usec = (server->config.hello_timeout_ms % 1000) * 1000,
		};

		bufferevent_set_timeouts(session->bev, &hello_timeout, NULL);
	}
	bufferevent_enable(session->bev, EV_READ | EV_WRITE);
}

void session_hello_received(struct session *session)
{
	bufferevent_set_timeouts(session->bev, NULL, NULL);
}

void session_close(struct session *session, const char *reason)
{
	session_end(session, reason);
}

bool session_has_unread_input(struct session *session)
{
	int waiting = 0;

	if (session->gone)
		return false;
	if (evbuffer_get_length(bufferevent_get_input(session->bev)) > 0)
		return true;
	return ioctl(bufferevent_getfd(session->bev), FIONREAD, &waiting) == 0 && waiting > 0;
}

void session_close_all(struct blockd *server)
{
	while (server->sessions.next != &server->sessions)
		session_end(server->sessions.next, "blockd is shutting down");
}
