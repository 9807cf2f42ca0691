/* SPDX-License-Identifier: MIT */
/*
 * mcp_stream: the event streams of the mcp module and their readers. A
 * stream belongs to one session and keeps the messages queued for the
 * client as numbered SSE events, bounded in count and bytes, so that a
 * client can resume with Last-Event-ID; a reader (struct mcp_stream) is what
 * the transport holds while it drains one into an HTTP response. It also
 * holds the module's clock helpers. Thread-safety: everything here runs
 * with srv->lock held, the one mutex that guards all session state, except
 * mcp_stream_read() and mcp_stream_release(), which take it themselves;
 * readers wait on the stream's condition variable with that mutex.
 */
#include "mcp_internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "buf.h"

#define STREAM_MAX_EVENTS 4096
#define STREAM_MAX_BYTES (32u * 1024 * 1024)
#define SESSION_MAX_STREAMS 32
#define STREAM_LINGER_S 300
#define RETRY_MS 1000

/* ------------------------------------------------------------------ */
/* streams */

struct stream *mcp_events_new(struct session *s, enum stream_kind kind)
{
	struct stream *st = calloc(1, sizeof(*st));

	if (!st)
		return NULL;
	st->sess = s;
	st->id = ++s->next_stream_id;
	st->kind = kind;
	st->retry_ms = RETRY_MS;
	mono_cond_init(&st->cond);
	st->next = s->streams;
	s->streams = st;
	s->n_streams++;
	return st;
}

static void event_free(struct event *e)
{
	if (!e)
		return;
	free(e->text);
	free(e->json);
	free(e);
}

static void stream_free(struct stream *st)
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

/* Unlinks and frees a stream no reader uses. */
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
	stream_free(st);
}

/* Drops the oldest events while the stream is over its bounds. */
static void stream_trim(struct stream *st)
{
	while (st->head && (st->n_events > STREAM_MAX_EVENTS ||
	                    st->bytes > STREAM_MAX_BYTES)) {
		struct event *e = st->head;

		st->head = e->next;
		if (!st->head)
			st->tail = NULL;
		st->n_events--;
		st->bytes -= e->len;
		st->dropped_upto = e->seq;
		event_free(e);
	}
}

/*
 * Appends a message (takes ownership of json) as an event. The SSE record
 * carries an id unless the stream is legacy.
 */
int mcp_events_push(struct stream *st, char *json, bool response)
{
	struct event *e;
	struct buf b;
	int r;

	if (!json)
		return -ENOMEM;
	if (st->ended) {
		free(json);
		return -EPIPE;
	}
	e = calloc(1, sizeof(*e));
	if (!e) {
		free(json);
		return -ENOMEM;
	}
	e->seq = ++st->next_seq;
	buf_init(&b, 0);
	if (st->kind == STREAM_LEGACY)
		r = buf_printf(&b, "event: message\ndata: %s\n\n", json);
	else
		r = buf_printf(&b, "id: %u_%llu\nevent: message\ndata: %s\n\n",
		               st->id, e->seq, json);
	if (r < 0) {
		buf_finish(&b);
		free(json);
		free(e);
		return r;
	}
	e->text = buf_take(&b, &e->len);
	e->response = response;
	if (response)
		e->json = json;
	else
		free(json);
	if (!e->text) {
		event_free(e);
		return -ENOMEM;
	}
	if (!response)
		st->sent_other = true;
	if (st->tail)
		st->tail->next = e;
	else
		st->head = e;
	st->tail = e;
	st->n_events++;
	st->bytes += e->len;
	stream_trim(st);
	pthread_cond_broadcast(&st->cond);
	return 0;
}

/* Appends a raw SSE record (priming, endpoint) that is not a message. */
int mcp_events_push_raw(struct stream *st, const char *fmt, ...)
{
	struct event *e = calloc(1, sizeof(*e));
	struct buf b;
	va_list ap;
	int r;

	if (!e)
		return -ENOMEM;
	e->seq = ++st->next_seq;
	e->priming = true;
	buf_init(&b, 4096);
	va_start(ap, fmt);
	r = buf_vprintf(&b, fmt, ap);
	va_end(ap);
	if (r < 0) {
		buf_finish(&b);
		free(e);
		return r;
	}
	e->text = buf_take(&b, &e->len);
	if (!e->text) {
		free(e);
		return -ENOMEM;
	}
	if (st->tail)
		st->tail->next = e;
	else
		st->head = e;
	st->tail = e;
	st->n_events++;
	st->bytes += e->len;
	pthread_cond_broadcast(&st->cond);
	return 0;
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

/* Frees ended streams nobody reads once they are old or too many. */
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
	r->cursor = cursor;
	r->generation = st->generation;
	st->readers++;
	return r;
}

ssize_t mcp_stream_read(struct mcp_stream *r, char *out, size_t max,
                        unsigned wait_ms)
{
	struct mcp_server *srv = r->srv;
	struct stream *st = r->st;
	struct timespec dl;
	ssize_t n = -1;

	if (r->done || max == 0)
		return -1;
	pthread_mutex_lock(&srv->lock);
	mono_deadline(&dl, wait_ms);
	for (;;) {
		if (r->partial) {
			size_t left = r->partial_len - r->partial_off;
			size_t k = left < max ? left : max;

			memcpy(out, r->partial + r->partial_off, k);
			r->partial_off += k;
			if (r->partial_off == r->partial_len) {
				free(r->partial);
				r->partial = NULL;
			}
			n = (ssize_t)k;
			break;
		}
		if (r->generation != st->generation ||
		    (r->post && st->cut_seq && r->cursor >= st->cut_seq)) {
			/* Polling: this HTTP response ends here. */
			r->done = true;
			break;
		}
		struct event *e = st->head;

		while (e && e->seq <= r->cursor)
			e = e->next;
		if (e) {
			r->cursor = e->seq;
			r->partial = malloc(e->len);
			if (!r->partial) {
				r->done = true;
				break;
			}
			memcpy(r->partial, e->text, e->len);
			r->partial_len = e->len;
			r->partial_off = 0;
			/* The legacy stream needs no replay. */
			if (st->kind == STREAM_LEGACY) {
				while (st->head && st->head->seq <= r->cursor) {
					struct event *h = st->head;

					st->head = h->next;
					if (!st->head)
						st->tail = NULL;
					st->n_events--;
					st->bytes -= h->len;
					event_free(h);
				}
			}
			continue;
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
	if (n > 0)
		r->sess->last_active = mono_s();
	pthread_mutex_unlock(&srv->lock);
	return n;
}

void mcp_stream_release(struct mcp_stream *r)
{
	struct mcp_server *srv;
	struct session *s;

	if (!r)
		return;
	srv = r->srv;
	s = r->sess;
	pthread_mutex_lock(&srv->lock);
	r->st->readers--;
	s->last_active = mono_s();
	/* A legacy session lives as long as its event stream. */
	if (s->legacy && r->st == s->get_stream && !s->gone)
		mcp_session_end(srv, s);
	if (r->st->kind == STREAM_POST && r->st->ended && !r->st->readers &&
	    !s->gone)
		mcp_session_trim_streams(s, false);
	mcp_session_unref(srv, s);
	pthread_mutex_unlock(&srv->lock);
	free(r->partial);
	free(r);
}
