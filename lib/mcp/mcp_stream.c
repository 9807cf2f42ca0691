/* SPDX-License-Identifier: MIT */
/*
 * mcp_stream: the event streams of the mcp module and their readers. A
 * stream belongs to one session and keeps the messages queued for the
 * client as numbered SSE events, bounded in count and bytes, so that a
 * client can resume with Last-Event-ID; a reader (struct mcp_stream) is what
 * the transport holds while it drains one into an HTTP response. Events
 * hold references on immutable message texts (struct mcp_msg), so one text
 * serves every stream it goes to, a reader copies it out without the lock,
 * and the SSE framing (id, event, data) is written by the reader as it
 * copies. Thread-safety: everything here runs with srv->lock held, except
 * the mcp_msg_* functions and mcp_stream_free(), which need no lock, and
 * mcp_stream_read() and mcp_stream_release(), which take it themselves;
 * readers wait on the stream's condition variable with that mutex.
 */
#include "mcp/mcp_internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/buf.h"

#define STREAM_MAX_EVENTS 4096
#define STREAM_MAX_BYTES (32u * 1024 * 1024)
#define SESSION_MAX_STREAMS 32
#define STREAM_LINGER_S 300
#define RETRY_MS 1000
/* What the SSE framing of a message adds, for the stream's byte bound. */
#define EVENT_FRAMING_BYTES 64

/* ------------------------------------------------------------------ */
/* message texts */

struct mcp_msg *mcp_msg_new(char *text)
{
	struct mcp_msg *m;

	if (!text)
		return NULL;
	m = malloc(sizeof(*m));
	if (!m) {
		free(text);
		return NULL;
	}
	atomic_init(&m->refs, 1);
	m->data = text;
	m->len = strlen(text);
	m->code = 0; /* not an error response unless the caller says so */
	return m;
}

struct mcp_msg *mcp_msg_ref(struct mcp_msg *m)
{
	atomic_fetch_add_explicit(&m->refs, 1, memory_order_relaxed);
	return m;
}

void mcp_msg_unref(struct mcp_msg *m)
{
	if (!m ||
	    atomic_fetch_sub_explicit(&m->refs, 1, memory_order_acq_rel) != 1)
		return;
	free(m->data);
	free(m);
}

/* ------------------------------------------------------------------ */
/* streams */

struct stream *mcp_events_new(struct session *s, enum stream_kind kind)
{
	struct stream *st = calloc(1, sizeof(*st));

	if (!st)
		return NULL;
	st->sess = s;
	st->refs = 1; /* the session's list */
	st->id = ++s->next_stream_id;
	st->kind = kind;
	st->retry_ms = RETRY_MS;
	mono_cond_init(&st->cond);
	st->next = s->streams;
	s->streams = st;
	s->n_streams++;
	return st;
}

void mcp_events_hold(struct stream *st)
{
	st->refs++;
}

void mcp_events_unref(struct mcp_server *srv, struct stream *st)
{
	if (--st->refs)
		return;
	st->next = srv->later_streams;
	srv->later_streams = st;
}

static void event_free(struct event *e)
{
	mcp_msg_unref(e->msg);
	free(e);
}

void mcp_stream_free(struct stream *st)
{
	struct event *e = st->head;

	while (e) {
		struct event *n = e->next;

		event_free(e);
		e = n;
	}
	pthread_cond_destroy(&st->cond);
	free(st);
}

void mcp_events_drop(struct session *s, struct stream *st)
{
	for (struct stream **pp = &s->streams; *pp; pp = &(*pp)->next) {
		if (*pp == st) {
			*pp = st->next;
			s->n_streams--;
			break;
		}
	}
	if (s->get_stream == st)
		s->get_stream = NULL;
	mcp_events_unref(s->srv, st);
}

static size_t event_bytes(const struct event *e)
{
	return e->msg->len + (e->raw ? 0 : EVENT_FRAMING_BYTES);
}

/* Unlinks and frees the first event of st. */
static void drop_head(struct stream *st)
{
	struct event *e = st->head;

	st->head = e->next;
	if (!st->head)
		st->tail = NULL;
	st->n_events--;
	st->bytes -= event_bytes(e);
	event_free(e);
}

/* Drops the oldest events while the stream is over its bounds. */
static void stream_trim(struct stream *st)
{
	while (st->head && (st->n_events > STREAM_MAX_EVENTS ||
	                    st->bytes > STREAM_MAX_BYTES)) {
		st->dropped_upto = st->head->seq;
		drop_head(st);
	}
}

/* Appends an event holding a new reference on m and wakes the readers. */
static int append(struct stream *st, struct mcp_msg *m, bool response, bool raw)
{
	struct event *e = calloc(1, sizeof(*e));

	if (!e)
		return -ENOMEM;
	e->seq = ++st->next_seq;
	e->msg = mcp_msg_ref(m);
	e->response = response;
	e->raw = raw;
	if (st->tail)
		st->tail->next = e;
	else
		st->head = e;
	st->tail = e;
	st->n_events++;
	st->bytes += event_bytes(e);
	pthread_cond_broadcast(&st->cond);
	return 0;
}

int mcp_events_push(struct stream *st, struct mcp_msg *m, bool response)
{
	int r;

	if (!m)
		return -ENOMEM;
	if (st->ended)
		return -EPIPE;
	r = append(st, m, response, false);
	if (r < 0)
		return r;
	if (!response)
		st->sent_other = true;
	stream_trim(st);
	return 0;
}

/* Appends a raw SSE record (priming, endpoint) that is not a message. */
int mcp_events_push_raw(struct stream *st, const char *fmt, ...)
{
	struct mcp_msg *m;
	struct buf b;
	va_list ap;
	int r;

	buf_init(&b, 4096);
	va_start(ap, fmt);
	r = buf_vprintf(&b, fmt, ap);
	va_end(ap);
	if (r < 0) {
		buf_finish(&b);
		return r;
	}
	m = mcp_msg_new(buf_take(&b, NULL));
	if (!m)
		return -ENOMEM;
	r = append(st, m, false, true);
	mcp_msg_unref(m);
	return r;
}

int mcp_events_prime(struct stream *st)
{
	return mcp_events_push_raw(st, "id: %u_%llu\nretry: %u\ndata: \n\n",
	                           st->id, st->next_seq + 1, st->retry_ms);
}

void mcp_events_end(struct stream *st)
{
	if (st->ended)
		return;
	st->ended = true;
	st->ended_at = mono_s();
	pthread_cond_broadcast(&st->cond);
}

struct stream *mcp_session_find_stream(struct session *s, unsigned id)
{
	for (struct stream *st = s->streams; st; st = st->next) {
		if (st->id == id)
			return st;
	}
	return NULL;
}

/* Drops ended streams nobody reads once they are old or too many. */
void mcp_session_trim_streams(struct session *s, bool force_old)
{
	time_t t = mono_s();

	for (struct stream *st = s->streams, *next; st; st = next) {
		next = st->next;
		if (!st->ended || st->readers || st == s->get_stream)
			continue;
		if (force_old || s->n_streams > SESSION_MAX_STREAMS ||
		    t - st->ended_at > STREAM_LINGER_S)
			mcp_events_drop(s, st);
	}
}

/* ------------------------------------------------------------------ */
/* readers */

struct mcp_stream *mcp_reader_new(struct mcp_server *srv, struct stream *st,
                                  unsigned long long cursor)
{
	struct mcp_stream *r = calloc(1, sizeof(*r));

	if (!r)
		return NULL;
	r->srv = srv;
	r->st = st;
	r->sess = st->sess;
	r->sess->refs++;
	mcp_events_hold(st);
	r->cursor = cursor;
	r->generation = st->generation;
	st->readers++;
	return r;
}

/*
 * Makes e the event r copies out next: a reference on its text and, for a
 * message, the SSE lines that go before it. Lock held.
 */
static void reader_take(struct mcp_stream *r, const struct event *e)
{
	const struct stream *st = r->st;
	int n = 0;

	r->cursor = e->seq;
	r->out_msg = mcp_msg_ref(e->msg);
	r->out_off = 0;
	r->out_tail = !e->raw;
	if (e->raw)
		n = 0;
	else if (st->kind == STREAM_LEGACY || r->sess->stateless)
		/* No ids where streams cannot be resumed (2026-07-28). */
		n = snprintf(r->out_head, sizeof(r->out_head),
		             "event: message\ndata: ");
	else
		n = snprintf(r->out_head, sizeof(r->out_head),
		             "id: %u_%llu\nevent: message\ndata: ", st->id,
		             e->seq);
	r->out_head_len = n > 0 ? (size_t)n : 0;
}

/*
 * Copies up to max bytes of the event being handed out (its SSE lines, its
 * text, the blank line that ends it) into out. Lock NOT held: the text is
 * immutable and only this reader's thread uses the out_* fields.
 */
static ssize_t reader_copy(struct mcp_stream *r, char *out, size_t max)
{
	const struct {
		const char *p;
		size_t len;
	} seg[3] = {
	    {r->out_head, r->out_head_len},
	    {r->out_msg->data, r->out_msg->len},
	    {"\n\n", r->out_tail ? 2 : 0},
	};
	size_t n = 0, base = 0;

	for (size_t i = 0; i < 3; i++) {
		if (n < max && r->out_off < base + seg[i].len) {
			size_t from = r->out_off - base;
			size_t k = seg[i].len - from;

			if (k > max - n)
				k = max - n;
			memcpy(out + n, seg[i].p + from, k);
			n += k;
			r->out_off += k;
		}
		base += seg[i].len;
	}
	if (r->out_off == base) {
		mcp_msg_unref(r->out_msg);
		r->out_msg = NULL;
	}
	return (ssize_t)n;
}

ssize_t mcp_stream_read(struct mcp_stream *r, char *out, size_t max,
                        unsigned wait_ms)
{
	struct mcp_server *srv = r->srv;
	struct stream *st = r->st;
	struct timespec dl;
	ssize_t n = -1;
	bool got = false;

	if (max == 0)
		return -1;
	if (r->out_msg)
		return reader_copy(r, out, max);
	if (r->done)
		return -1;
	mcp_lock(srv);
	mono_deadline(&dl, wait_ms);
	for (;;) {
		if (r->generation != st->generation ||
		    (r->post && st->cut_seq && r->cursor >= st->cut_seq)) {
			/* Polling: this HTTP response ends here. */
			r->done = true;
			break;
		}
		const struct event *e = st->head;

		while (e && e->seq <= r->cursor)
			e = e->next;
		if (e) {
			reader_take(r, e);
			got = true;
			break;
		}
		if (st->ended) {
			r->done = true;
			break;
		}
		if (pthread_cond_timedwait(&st->cond, &srv->lock, &dl) ==
		    ETIMEDOUT) {
			n = 0;
			break;
		}
	}
	if (got) {
		r->sess->last_active = mono_s();
		/* The legacy stream needs no replay. */
		while (st->kind == STREAM_LEGACY && st->head &&
		       st->head->seq <= r->cursor)
			drop_head(st);
	}
	mcp_unlock(srv);
	return got ? reader_copy(r, out, max) : n;
}

void mcp_stream_release(struct mcp_stream *r)
{
	struct mcp_server *srv;
	struct session *s;
	struct stream *st;

	if (!r)
		return;
	srv = r->srv;
	s = r->sess;
	st = r->st;
	mcp_lock(srv);
	st->readers--;
	s->last_active = mono_s();
	/* A legacy session lives as long as its event stream. */
	if (s->legacy && st == s->get_stream && !s->gone)
		mcp_session_end(srv, s);
	/*
	 * A 2026-07-28 request lives as long as its answer's stream: a
	 * client that closes it cancels the request (but not a task).
	 */
	if (s->stateless && !s->gone)
		mcp_session_end(srv, s);
	if (st->kind == STREAM_POST && st->ended && !st->readers && !s->gone)
		mcp_session_trim_streams(s, false);
	mcp_events_unref(srv, st);
	mcp_session_unref(srv, s);
	mcp_unlock(srv);
	mcp_msg_unref(r->out_msg);
	free(r);
}
