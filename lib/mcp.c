/* SPDX-License-Identifier: MIT */
/*
 * mcp: sessions, event streams, requests and their dispatch.
 *
 * Every message the server sends travels as an event on a stream. A POST
 * that carries requests gets a stream of its own; its HTTP answer is decided
 * late: if the responses are all ready before anything else was sent, they
 * go back as plain JSON, otherwise (a notification, a server request, or the
 * keep-alive interval passing first) the POST is answered as SSE and drained
 * from the stream. Streams keep their events, numbered, so a client can
 * resume with Last-Event-ID. Legacy HTTP+SSE sessions have one stream that
 * carries everything.
 *
 * Locking: one mutex (srv->lock) guards every session, stream, call and
 * pending request. Waiters use per-object condition variables with that
 * mutex. Tool handlers and cancel hooks run without it.
 */
#include "mcp.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/rand.h>

#include "buf.h"
#include "build_config.h"
#include "log.h"
#include "rpc.h"

const char *const mcp_protocol_versions[] = {"2025-11-25", "2025-06-18",
                                             "2025-03-26", "2024-11-05", NULL};

#define MAX_TOOLS 64
#define MAX_PROVIDERS 16
#define MAX_PROMPTS 64
#define STREAM_MAX_EVENTS 4096
#define STREAM_MAX_BYTES (32u * 1024 * 1024)
#define SESSION_MAX_STREAMS 32
#define STREAM_LINGER_S 300
#define RETRY_MS 1000
#define SWEEP_INTERVAL_S 5
#define MAX_SUBSCRIPTIONS 64
#define TOOL_THREAD_STACK (1024 * 1024)

enum stream_kind {
	STREAM_POST,
	STREAM_GET,
	STREAM_LEGACY,
};

struct event {
	struct event *next;
	unsigned long long seq;
	char *text; /* formatted SSE record */
	size_t len;
	char *json; /* the message, for JSON answers (responses only) */
	bool response;
	bool priming;
};

struct stream {
	struct stream *next; /* in session->streams */
	struct session *sess;
	unsigned id;
	enum stream_kind kind;
	struct event *head, *tail;
	size_t n_events, bytes;
	unsigned long long next_seq;
	unsigned long long dropped_upto; /* events <= this were dropped */
	unsigned readers;
	unsigned generation; /* bumped to end the current HTTP response */
	unsigned long long cut_seq; /* POST answer ends after this event */
	unsigned retry_ms;
	unsigned pending; /* responses still owed on this stream */
	bool ended;       /* nothing more will be appended */
	bool sse;         /* a POST stream answered as SSE */
	bool sent_other;  /* something other than a response was queued */
	time_t ended_at;
	pthread_cond_t cond;
};

/* A reader: what the transport holds while it drains a stream. */
struct mcp_stream {
	struct mcp_server *srv;
	struct stream *st;
	struct session *sess;
	unsigned long long cursor; /* last seq handed out */
	unsigned generation;
	bool post;     /* the POST's own answer (not a resumption) */
	char *partial; /* event text not yet copied out */
	size_t partial_len, partial_off;
	bool done;
};

struct pending {
	struct pending *next;
	char *id_key;
	cJSON *result, *error;
	bool done;
	pthread_cond_t cond;
};

struct mcp_call {
	struct mcp_server *srv;
	struct session *sess;
	struct stream *st;     /* where its messages go */
	struct mcp_call *next; /* in session->calls */
	char *id_raw, *id_key;
	char *method;
	cJSON *params;         /* owned copy */
	cJSON *progress_token; /* owned copy, or NULL */
	const struct tool_impl *tool;
	bool cancelled;
	bool done;
	void (*cancel_fn)(void *); /* runs with srv->lock held */
	void *cancel_arg;
};

struct session {
	struct session *next; /* in srv->sessions */
	struct mcp_server *srv;
	char id[65];
	char *tenant;
	unsigned refs;
	bool legacy;
	bool initialized; /* initialize answered */
	bool gone;        /* ended: deleted, expired or disconnected */
	char version[16];
	cJSON *client_caps;
	enum mcp_log_level log_level;
	time_t last_active;
	unsigned next_stream_id;
	unsigned long long next_request_id;
	struct stream *streams;
	unsigned n_streams;
	struct stream *get_stream; /* standalone GET or the legacy stream */
	struct mcp_call *calls;
	unsigned n_calls;
	struct pending *pendings;
	char *subs[MAX_SUBSCRIPTIONS];
};

struct mcp_server {
	const struct config *cfg;
	pthread_mutex_t lock;
	pthread_cond_t drain_cond;
	pthread_cond_t sweep_cond;
	pthread_t sweeper;
	bool stopping;
	bool draining;
	struct session *sessions;
	unsigned n_sessions;
	unsigned calls_running;
	unsigned long long calls_total;
	const struct tool_impl *tools[MAX_TOOLS];
	cJSON *tool_in_schema[MAX_TOOLS];
	cJSON *tool_out_schema[MAX_TOOLS];
	size_t n_tools;
	const struct resource_provider *providers[MAX_PROVIDERS];
	size_t n_providers;
	const struct prompt_impl *prompts[MAX_PROMPTS];
	cJSON *prompt_args[MAX_PROMPTS];
	size_t n_prompts;
	mcp_complete_fn complete;
	void *complete_data;
	const char *instructions;
};

static const char *const level_names[] = {"debug",   "info",     "notice",
                                          "warning", "error",    "critical",
                                          "alert",   "emergency"};

/* ------------------------------------------------------------------ */
/* small helpers */

static time_t now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec;
}

static void deadline_in(struct timespec *ts, unsigned ms)
{
	clock_gettime(CLOCK_MONOTONIC, ts);
	ts->tv_sec += ms / 1000;
	ts->tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts->tv_nsec >= 1000000000L) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000L;
	}
}

static void cond_init_mono(pthread_cond_t *c)
{
	pthread_condattr_t a;

	pthread_condattr_init(&a);
	pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
	pthread_cond_init(c, &a);
	pthread_condattr_destroy(&a);
}

static bool version_supported(const char *v)
{
	for (size_t i = 0; mcp_protocol_versions[i]; i++) {
		if (strcmp(v, mcp_protocol_versions[i]) == 0)
			return true;
	}
	return false;
}

/* Whether the session speaks 2025-11-25 or later (priming events). */
static bool session_wants_priming(const struct session *s)
{
	return !s->legacy && strcmp(s->version, "2025-11-25") >= 0;
}

cJSON *mcp_text_result(const char *text, bool is_error)
{
	cJSON *r = cJSON_CreateObject();
	cJSON *content, *item;

	if (!r)
		return NULL;
	content = cJSON_AddArrayToObject(r, "content");
	item = cJSON_CreateObject();
	if (!content || !item) {
		cJSON_Delete(item);
		cJSON_Delete(r);
		return NULL;
	}
	cJSON_AddItemToArray(content, item);
	if (!cJSON_AddStringToObject(item, "type", "text") ||
	    !cJSON_AddStringToObject(item, "text", text) ||
	    (is_error && !cJSON_AddTrueToObject(r, "isError"))) {
		cJSON_Delete(r);
		return NULL;
	}
	return r;
}

cJSON *mcp_text_resultf(bool is_error, const char *fmt, ...)
{
	struct buf b;
	va_list ap;
	cJSON *r = NULL;
	int rc;

	buf_init(&b, 1024 * 1024);
	va_start(ap, fmt);
	rc = buf_vprintf(&b, fmt, ap);
	va_end(ap);
	if (rc == 0)
		r = mcp_text_result(b.data, is_error);
	buf_finish(&b);
	return r;
}

/* ------------------------------------------------------------------ */
/* streams */

static struct stream *stream_new(struct session *s, enum stream_kind kind)
{
	struct stream *st = calloc(1, sizeof(*st));

	if (!st)
		return NULL;
	st->sess = s;
	st->id = ++s->next_stream_id;
	st->kind = kind;
	st->retry_ms = RETRY_MS;
	cond_init_mono(&st->cond);
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
static void stream_drop(struct session *s, struct stream *st)
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
static int stream_push(struct stream *st, char *json, bool response)
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
static int stream_push_raw(struct stream *st, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static int stream_push_raw(struct stream *st, const char *fmt, ...)
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

static int stream_prime(struct stream *st)
{
	return stream_push_raw(st, "id: %u_%llu\nretry: %u\ndata: \n\n", st->id,
	                       st->next_seq + 1, st->retry_ms);
}

static void stream_end(struct stream *st)
{
	if (st->ended)
		return;
	st->ended = true;
	st->ended_at = now_s();
	pthread_cond_broadcast(&st->cond);
}

static struct stream *session_find_stream(struct session *s, unsigned id)
{
	for (struct stream *st = s->streams; st; st = st->next) {
		if (st->id == id)
			return st;
	}
	return NULL;
}

/* Frees ended streams nobody reads once they are old or too many. */
static void session_trim_streams(struct session *s, bool force_old)
{
	time_t t = now_s();

	for (struct stream *st = s->streams, *next; st; st = next) {
		next = st->next;
		if (!st->ended || st->readers || st == s->get_stream)
			continue;
		if (force_old || s->n_streams > SESSION_MAX_STREAMS ||
		    t - st->ended_at > STREAM_LINGER_S)
			stream_drop(s, st);
	}
}

/* ------------------------------------------------------------------ */
/* sessions */

static void session_unref(struct mcp_server *srv, struct session *s);

static struct session *session_find(struct mcp_server *srv, const char *id,
                                    const char *tenant)
{
	for (struct session *s = srv->sessions; s; s = s->next) {
		if (strcmp(s->id, id) == 0) {
			/* Another tenant's session id is as good as unknown. */
			if (s->gone || strcmp(s->tenant, tenant) != 0)
				return NULL;
			return s;
		}
	}
	return NULL;
}

static bool session_idle(const struct session *s)
{
	if (s->n_calls)
		return false;
	for (const struct stream *st = s->streams; st; st = st->next) {
		if (st->readers)
			return false;
	}
	return true;
}

static void call_cancel_locked(struct mcp_call *c);

/* Ends a session: cancels its calls, ends its streams, forgets it. */
static void session_end(struct mcp_server *srv, struct session *s)
{
	if (s->gone)
		return;
	s->gone = true;
	for (struct session **pp = &srv->sessions; *pp; pp = &(*pp)->next) {
		if (*pp == s) {
			*pp = s->next;
			srv->n_sessions--;
			break;
		}
	}
	for (struct mcp_call *c = s->calls; c; c = c->next)
		call_cancel_locked(c);
	for (struct stream *st = s->streams; st; st = st->next)
		stream_end(st);
	for (struct pending *p = s->pendings; p; p = p->next)
		pthread_cond_broadcast(&p->cond);
	session_unref(srv, s);
}

static void session_unref(struct mcp_server *srv, struct session *s)
{
	(void)srv;
	if (--s->refs)
		return;
	while (s->streams)
		stream_drop(s, s->streams);
	for (size_t i = 0; i < MAX_SUBSCRIPTIONS; i++)
		free(s->subs[i]);
	cJSON_Delete(s->client_caps);
	free(s->tenant);
	free(s);
}

static unsigned tenant_sessions(struct mcp_server *srv, const char *tenant,
                                struct session **lru_idle)
{
	unsigned n = 0;

	*lru_idle = NULL;
	for (struct session *s = srv->sessions; s; s = s->next) {
		if (strcmp(s->tenant, tenant) != 0)
			continue;
		n++;
		if (session_idle(s) &&
		    (!*lru_idle || s->last_active < (*lru_idle)->last_active))
			*lru_idle = s;
	}
	return n;
}

/*
 * Creates a session for tenant. At the per-tenant cap the least recently
 * used idle session makes room (its client will get 404 and
 * re-initialize); if none is idle, -EBUSY.
 */
static int session_new(struct mcp_server *srv, const char *tenant, bool legacy,
                       struct session **out)
{
	unsigned char rnd[32];
	static const char hex[] = "0123456789abcdef";
	struct session *s, *lru;

	*out = NULL;
	if (tenant_sessions(srv, tenant, &lru) >=
	    srv->cfg->max_sessions_per_tenant) {
		if (!lru)
			return -EBUSY;
		log_info("tenant %s is at %u sessions; ending the least "
		         "recently used idle one",
		         tenant, srv->cfg->max_sessions_per_tenant);
		session_end(srv, lru);
	}
	if (RAND_bytes(rnd, sizeof(rnd)) != 1)
		return -EIO;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->tenant = strdup(tenant);
	if (!s->tenant) {
		free(s);
		return -ENOMEM;
	}
	for (size_t i = 0; i < sizeof(rnd); i++) {
		s->id[2 * i] = hex[rnd[i] >> 4];
		s->id[2 * i + 1] = hex[rnd[i] & 15];
	}
	s->srv = srv;
	s->refs = 1; /* the table's */
	s->legacy = legacy;
	s->log_level = MCP_LOG_INFO;
	s->last_active = now_s();
	snprintf(s->version, sizeof(s->version), "%s",
	         legacy ? "2024-11-05" : "2025-03-26");
	s->next = srv->sessions;
	srv->sessions = s;
	srv->n_sessions++;
	*out = s;
	return 0;
}

/* ------------------------------------------------------------------ */
/* readers */

static struct mcp_stream *reader_new(struct mcp_server *srv, struct stream *st,
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
	deadline_in(&dl, wait_ms);
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
		r->sess->last_active = now_s();
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
	s->last_active = now_s();
	/* A legacy session lives as long as its event stream. */
	if (s->legacy && r->st == s->get_stream && !s->gone)
		session_end(srv, s);
	if (r->st->kind == STREAM_POST && r->st->ended && !r->st->readers &&
	    !s->gone)
		session_trim_streams(s, false);
	session_unref(srv, s);
	pthread_mutex_unlock(&srv->lock);
	free(r->partial);
	free(r);
}

/* ------------------------------------------------------------------ */
/* calls */

/*
 * Marks a call cancelled and runs its hook. The hook runs with the lock
 * held, so once mcp_call_on_cancel(NULL) returns no hook is running; hooks
 * therefore must not call back into this module.
 */
static void call_cancel_locked(struct mcp_call *c)
{
	if (c->cancelled || c->done)
		return;
	c->cancelled = true;
	for (struct pending *p = c->sess->pendings; p; p = p->next)
		pthread_cond_broadcast(&p->cond);
	if (c->cancel_fn)
		c->cancel_fn(c->cancel_arg);
}

static struct mcp_call *call_new(struct mcp_server *srv, struct session *s,
                                 struct stream *st, const struct rpc_msg *m)
{
	struct mcp_call *c = calloc(1, sizeof(*c));
	cJSON *meta, *tok;

	if (!c)
		return NULL;
	c->srv = srv;
	c->sess = s;
	c->st = st;
	c->id_raw = strdup(m->id_raw);
	c->id_key = strdup(m->id_key);
	c->method = strdup(m->method);
	c->params =
	    m->params ? cJSON_Duplicate(m->params, true) : cJSON_CreateObject();
	if (!c->id_raw || !c->id_key || !c->method || !c->params) {
		free(c->id_raw);
		free(c->id_key);
		free(c->method);
		cJSON_Delete(c->params);
		free(c);
		return NULL;
	}
	meta = cJSON_GetObjectItemCaseSensitive(c->params, "_meta");
	tok = meta ? cJSON_GetObjectItemCaseSensitive(meta, "progressToken")
	           : NULL;
	if (tok && (cJSON_IsString(tok) || cJSON_IsNumber(tok))) {
		/* Echo the token as sent: keep a number's raw text. */
		c->progress_token = cJSON_Duplicate(tok, false);
	}
	s->refs++;
	c->next = s->calls;
	s->calls = c;
	s->n_calls++;
	if (st)
		st->pending++;
	return c;
}

static void call_free(struct mcp_call *c)
{
	free(c->id_raw);
	free(c->id_key);
	free(c->method);
	cJSON_Delete(c->params);
	cJSON_Delete(c->progress_token);
	free(c);
}

/*
 * Finishes a call with a result (or an error when result is NULL): queues
 * the response unless the client cancelled, unlinks and frees the call.
 * Takes ownership of result and err_data. Called with the lock held.
 */
static void call_finish_locked(struct mcp_call *c, cJSON *result, int code,
                               const char *msg)
{
	struct mcp_server *srv = c->srv;
	struct session *s = c->sess;
	struct stream *st = c->st;
	char *json;

	c->done = true;
	if (c->cancelled || s->gone || !st) {
		cJSON_Delete(result);
	} else {
		json = result ? rpc_result(c->id_raw, result)
		              : rpc_error(c->id_raw, code, msg, NULL);
		if (stream_push(st, json, true) < 0)
			log_warnx("could not queue the response to a %s "
			          "request",
			          c->method);
	}
	if (st && st->pending && --st->pending == 0 && st->kind == STREAM_POST)
		stream_end(st);
	for (struct mcp_call **pp = &s->calls; *pp; pp = &(*pp)->next) {
		if (*pp == c) {
			*pp = c->next;
			s->n_calls--;
			break;
		}
	}
	s->last_active = now_s();
	session_unref(srv, s);
	call_free(c);
}

const char *mcp_call_tenant(const struct mcp_call *c)
{
	return c->sess->tenant;
}

const char *mcp_call_protocol_version(const struct mcp_call *c)
{
	return c->sess->version;
}

const cJSON *mcp_call_client_capabilities(const struct mcp_call *c)
{
	return c->sess->client_caps;
}

bool mcp_call_cancelled(const struct mcp_call *c)
{
	bool v;

	pthread_mutex_lock(&c->srv->lock);
	v = c->cancelled;
	pthread_mutex_unlock(&c->srv->lock);
	return v;
}

void mcp_call_on_cancel(struct mcp_call *c, void (*fn)(void *), void *arg)
{
	struct mcp_server *srv = c->srv;

	pthread_mutex_lock(&srv->lock);
	c->cancel_fn = fn;
	c->cancel_arg = arg;
	if (fn && c->cancelled)
		fn(arg);
	pthread_mutex_unlock(&srv->lock);
}

bool mcp_call_has_progress(const struct mcp_call *c)
{
	return c->progress_token != NULL;
}

/* Queues a notification on the call's stream (or the session's). */
static int call_notify(struct mcp_call *c, const char *method, cJSON *params)
{
	struct mcp_server *srv = c->srv;
	char *json = rpc_notification(method, params);
	int r;

	if (!json)
		return -ENOMEM;
	pthread_mutex_lock(&srv->lock);
	if (c->sess->gone || c->cancelled) {
		free(json);
		r = -ECANCELED;
	} else if (c->st && !c->st->ended) {
		r = stream_push(c->st, json, false);
	} else if (c->sess->get_stream) {
		r = stream_push(c->sess->get_stream, json, false);
	} else {
		free(json);
		r = -ENOTCONN;
	}
	pthread_mutex_unlock(&srv->lock);
	return r;
}

int mcp_call_progress(struct mcp_call *c, double progress, double total,
                      const char *message)
{
	cJSON *p;

	if (!c->progress_token)
		return 0;
	p = cJSON_CreateObject();
	if (!p)
		return -ENOMEM;
	cJSON_AddItemToObject(p, "progressToken",
	                      cJSON_Duplicate(c->progress_token, false));
	cJSON_AddNumberToObject(p, "progress", progress);
	if (total >= 0)
		cJSON_AddNumberToObject(p, "total", total);
	if (message)
		cJSON_AddStringToObject(p, "message", message);
	return call_notify(c, "notifications/progress", p);
}

int mcp_call_log(struct mcp_call *c, enum mcp_log_level level,
                 const char *logger, cJSON *data)
{
	cJSON *p;
	enum mcp_log_level threshold;

	pthread_mutex_lock(&c->srv->lock);
	threshold = c->sess->log_level;
	pthread_mutex_unlock(&c->srv->lock);
	if (level < threshold) {
		cJSON_Delete(data);
		return 0;
	}
	p = cJSON_CreateObject();
	if (!p) {
		cJSON_Delete(data);
		return -ENOMEM;
	}
	cJSON_AddStringToObject(p, "level", level_names[level]);
	if (logger)
		cJSON_AddStringToObject(p, "logger", logger);
	cJSON_AddItemToObject(p, "data", data ? data : cJSON_CreateNull());
	return call_notify(c, "notifications/message", p);
}

void mcp_call_close_stream(struct mcp_call *c, unsigned retry_ms)
{
	struct mcp_server *srv = c->srv;

	pthread_mutex_lock(&srv->lock);
	if (c->st && c->st->kind == STREAM_POST && !c->st->ended &&
	    session_wants_priming(c->sess)) {
		c->st->retry_ms = retry_ms;
		c->st->sse = true;
		c->st->sent_other = true;
		c->st->cut_seq = c->st->next_seq;
		c->st->generation++;
		pthread_cond_broadcast(&c->st->cond);
	}
	pthread_mutex_unlock(&srv->lock);
}

int mcp_call_request(struct mcp_call *c, const char *method, cJSON *params,
                     unsigned timeout_ms, cJSON **result, cJSON **error)
{
	struct mcp_server *srv = c->srv;
	struct session *s = c->sess;
	struct pending *p;
	struct timespec dl;
	char idbuf[48];
	char *json;
	int r = 0;

	*result = NULL;
	*error = NULL;
	p = calloc(1, sizeof(*p));
	if (!p) {
		cJSON_Delete(params);
		return -ENOMEM;
	}
	cond_init_mono(&p->cond);
	pthread_mutex_lock(&srv->lock);
	snprintf(idbuf, sizeof(idbuf), "\"srv-%llu\"", ++s->next_request_id);
	json = rpc_request(idbuf, method, params);
	p->id_key = malloc(strlen(idbuf) + 1);
	if (!json || !p->id_key) {
		free(json);
		r = -ENOMEM;
		goto out;
	}
	/* "s:" + the id without its quotes. */
	snprintf(p->id_key, strlen(idbuf) + 1, "s:%.*s", (int)strlen(idbuf) - 2,
	         idbuf + 1);
	if (s->gone || c->cancelled) {
		free(json);
		r = s->gone ? -ENOTCONN : -ECANCELED;
		goto out;
	}
	if (c->st && !c->st->ended)
		r = stream_push(c->st, json, false);
	else if (s->get_stream)
		r = stream_push(s->get_stream, json, false);
	else {
		free(json);
		r = -ENOTCONN;
	}
	if (r < 0)
		goto out;
	p->next = s->pendings;
	s->pendings = p;
	deadline_in(&dl, timeout_ms);
	while (!p->done && !s->gone && !c->cancelled) {
		if (pthread_cond_timedwait(&p->cond, &srv->lock, &dl) ==
		    ETIMEDOUT)
			break;
	}
	for (struct pending **pp = &s->pendings; *pp; pp = &(*pp)->next) {
		if (*pp == p) {
			*pp = p->next;
			break;
		}
	}
	if (p->done) {
		*result = p->result;
		*error = p->error;
		r = p->error ? -EPROTO : 0;
	} else {
		r = s->gone        ? -ENOTCONN
		    : c->cancelled ? -ECANCELED
		                   : -ETIMEDOUT;
		cJSON_Delete(p->result);
		cJSON_Delete(p->error);
	}
out:
	pthread_mutex_unlock(&srv->lock);
	free(p->id_key);
	pthread_cond_destroy(&p->cond);
	free(p);
	return r;
}

/* A response from the client to one of our requests. Lock held. */
static void deliver_response(struct session *s, const struct rpc_msg *m)
{
	for (struct pending *p = s->pendings; p; p = p->next) {
		if (strcmp(p->id_key, m->id_key) != 0 || p->done)
			continue;
		cJSON *res = cJSON_GetObjectItemCaseSensitive(m->obj, "result");
		cJSON *err = cJSON_GetObjectItemCaseSensitive(m->obj, "error");

		p->result = res ? cJSON_Duplicate(res, true) : NULL;
		p->error = err ? cJSON_Duplicate(err, true) : NULL;
		if (!p->result && !p->error)
			p->error = cJSON_CreateString("empty response");
		p->done = true;
		pthread_cond_broadcast(&p->cond);
		return;
	}
	log_debug("response to an unknown or expired request ignored");
}

/* ------------------------------------------------------------------ */
/* method handlers: run with the lock NOT held */

struct reply {
	cJSON *result; /* owned */
	int code;      /* when result is NULL */
	char msg[512];
};

static void reply_error(struct reply *rp, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void reply_error(struct reply *rp, int code, const char *fmt, ...)
{
	va_list ap;

	cJSON_Delete(rp->result);
	rp->result = NULL;
	rp->code = code;
	va_start(ap, fmt);
	vsnprintf(rp->msg, sizeof(rp->msg), fmt, ap);
	va_end(ap);
}

static const struct tool_impl *find_tool(struct mcp_server *srv,
                                         const char *name, size_t *idx)
{
	for (size_t i = 0; i < srv->n_tools; i++) {
		if (strcmp(srv->tools[i]->name, name) == 0) {
			if (idx)
				*idx = i;
			return srv->tools[i];
		}
	}
	return NULL;
}

static cJSON *tool_entry(struct mcp_server *srv, size_t i)
{
	const struct tool_impl *t = srv->tools[i];
	cJSON *o = cJSON_CreateObject(), *ann;
	char *desc = NULL;
	cJSON *schema = NULL;

	if (!o)
		return NULL;
	if (t->describe)
		t->describe(t->data, &desc, &schema);
	cJSON_AddStringToObject(o, "name", t->name);
	if (t->title)
		cJSON_AddStringToObject(o, "title", t->title);
	cJSON_AddStringToObject(o, "description", desc ? desc : t->description);
	cJSON_AddItemToObject(
	    o, "inputSchema",
	    schema ? schema : cJSON_Duplicate(srv->tool_in_schema[i], true));
	if (srv->tool_out_schema[i])
		cJSON_AddItemToObject(
		    o, "outputSchema",
		    cJSON_Duplicate(srv->tool_out_schema[i], true));
	ann = cJSON_AddObjectToObject(o, "annotations");
	if (ann) {
		if (t->title)
			cJSON_AddStringToObject(ann, "title", t->title);
		cJSON_AddBoolToObject(ann, "readOnlyHint", t->read_only);
		cJSON_AddBoolToObject(ann, "destructiveHint", t->destructive);
		cJSON_AddBoolToObject(ann, "idempotentHint", t->idempotent);
		cJSON_AddBoolToObject(ann, "openWorldHint", t->open_world);
	}
	free(desc);
	return o;
}

static void do_tools_list(struct mcp_call *c, struct reply *rp)
{
	struct mcp_server *srv = c->srv;
	cJSON *r = cJSON_CreateObject();
	cJSON *arr = r ? cJSON_AddArrayToObject(r, "tools") : NULL;

	if (!arr) {
		cJSON_Delete(r);
		reply_error(rp, RPC_INTERNAL_ERROR, "out of memory");
		return;
	}
	for (size_t i = 0; i < srv->n_tools; i++) {
		cJSON *e = tool_entry(srv, i);

		if (e)
			cJSON_AddItemToArray(arr, e);
	}
	rp->result = r;
}

/* Runs on its own thread: a tools/call. */
static void *tool_thread(void *arg)
{
	struct mcp_call *c = arg;
	struct mcp_server *srv = c->srv;
	const cJSON *args =
	    cJSON_GetObjectItemCaseSensitive(c->params, "arguments");
	cJSON *empty = NULL;
	cJSON *result;

	if (!cJSON_IsObject(args))
		args = empty = cJSON_CreateObject();
	result = args ? c->tool->call(c->tool->data, c, args) : NULL;
	cJSON_Delete(empty);
	pthread_mutex_lock(&srv->lock);
	if (result)
		call_finish_locked(c, result, 0, NULL);
	else
		call_finish_locked(c, NULL, RPC_INTERNAL_ERROR,
		                   "the tool failed internally; the server "
		                   "log has details");
	srv->calls_running--;
	pthread_cond_broadcast(&srv->drain_cond);
	pthread_mutex_unlock(&srv->lock);
	return NULL;
}

/*
 * tools/call: validates, then hands the call to a thread. Returns true when
 * the call was handed over (the thread answers), false when rp holds the
 * answer now.
 */
static bool do_tools_call(struct mcp_call *c, struct reply *rp)
{
	struct mcp_server *srv = c->srv;
	const cJSON *name = cJSON_GetObjectItemCaseSensitive(c->params, "name");
	const cJSON *args =
	    cJSON_GetObjectItemCaseSensitive(c->params, "arguments");
	pthread_attr_t attr;
	pthread_t th;
	int r;

	if (!cJSON_IsString(name)) {
		reply_error(rp, RPC_INVALID_PARAMS,
		            "tools/call needs params.name, the tool's name "
		            "(see tools/list)");
		return false;
	}
	c->tool = find_tool(srv, name->valuestring, NULL);
	if (!c->tool) {
		struct buf b;

		buf_init(&b, 2048);
		for (size_t i = 0; i < srv->n_tools; i++) {
			if (buf_printf(&b, "%s%s", i ? ", " : "",
			               srv->tools[i]->name) < 0)
				break;
		}
		reply_error(rp, RPC_INVALID_PARAMS,
		            "unknown tool '%.100s'; available: %s",
		            name->valuestring, b.data ? b.data : "none");
		buf_finish(&b);
		return false;
	}
	if (args && !cJSON_IsObject(args) && !cJSON_IsNull(args)) {
		reply_error(rp, RPC_INVALID_PARAMS,
		            "tools/call params.arguments must be an object");
		return false;
	}
	pthread_mutex_lock(&srv->lock);
	if (srv->draining) {
		pthread_mutex_unlock(&srv->lock);
		rp->result = mcp_text_result(
		    "The server is shutting down and takes no new work. "
		    "Retry in a minute; it will be back.",
		    true);
		return false;
	}
	srv->calls_running++;
	srv->calls_total++;
	pthread_mutex_unlock(&srv->lock);

	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, TOOL_THREAD_STACK);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	r = pthread_create(&th, &attr, tool_thread, c);
	pthread_attr_destroy(&attr);
	if (r != 0) {
		pthread_mutex_lock(&srv->lock);
		srv->calls_running--;
		pthread_cond_broadcast(&srv->drain_cond);
		pthread_mutex_unlock(&srv->lock);
		errno = r;
		log_warn("cannot start a thread for tools/call");
		reply_error(rp, RPC_INTERNAL_ERROR,
		            "the server is out of resources; retry shortly");
		return false;
	}
	return true;
}

static void do_resources_list(struct mcp_call *c, struct reply *rp,
                              bool templates)
{
	struct mcp_server *srv = c->srv;
	cJSON *r = cJSON_CreateObject();
	cJSON *arr = r ? cJSON_AddArrayToObject(
	                     r, templates ? "resourceTemplates" : "resources")
	               : NULL;

	if (!arr) {
		cJSON_Delete(r);
		reply_error(rp, RPC_INTERNAL_ERROR, "out of memory");
		return;
	}
	for (size_t i = 0; i < srv->n_providers; i++) {
		const struct resource_provider *p = srv->providers[i];

		if (templates && p->templates)
			p->templates(p->data, arr);
		else if (!templates && p->list)
			p->list(p->data, c, arr);
	}
	rp->result = r;
}

static void do_resources_read(struct mcp_call *c, struct reply *rp)
{
	struct mcp_server *srv = c->srv;
	const cJSON *uri = cJSON_GetObjectItemCaseSensitive(c->params, "uri");
	char err[512] = "";

	if (!cJSON_IsString(uri)) {
		reply_error(rp, RPC_INVALID_PARAMS,
		            "resources/read needs params.uri");
		return;
	}
	for (size_t i = 0; i < srv->n_providers; i++) {
		const struct resource_provider *p = srv->providers[i];
		cJSON *contents = NULL;
		int r;

		if (!p->read)
			continue;
		r = p->read(p->data, c, uri->valuestring, &contents, err,
		            sizeof(err));
		if (r == -ENOENT)
			continue;
		if (r < 0) {
			reply_error(rp,
			            r == -EINVAL ? RPC_INVALID_PARAMS
			                         : RPC_INTERNAL_ERROR,
			            "%s",
			            err[0] ? err : "cannot read the resource");
			return;
		}
		rp->result = cJSON_CreateObject();
		if (!rp->result) {
			cJSON_Delete(contents);
			reply_error(rp, RPC_INTERNAL_ERROR, "out of memory");
			return;
		}
		cJSON_AddItemToObject(rp->result, "contents", contents);
		return;
	}
	reply_error(rp, RPC_RESOURCE_NOT_FOUND,
	            "resource not found: %.300s%s%s", uri->valuestring,
	            err[0] ? "; " : "", err);
}

static void do_subscribe(struct mcp_call *c, struct reply *rp, bool on)
{
	struct mcp_server *srv = c->srv;
	struct session *s = c->sess;
	const cJSON *uri = cJSON_GetObjectItemCaseSensitive(c->params, "uri");
	size_t free_slot = MAX_SUBSCRIPTIONS;

	if (!cJSON_IsString(uri) || !uri->valuestring[0] ||
	    strlen(uri->valuestring) > 2048) {
		reply_error(rp, RPC_INVALID_PARAMS,
		            "resources/%s needs params.uri",
		            on ? "subscribe" : "unsubscribe");
		return;
	}
	pthread_mutex_lock(&srv->lock);
	for (size_t i = 0; i < MAX_SUBSCRIPTIONS; i++) {
		if (s->subs[i] && strcmp(s->subs[i], uri->valuestring) == 0) {
			if (!on) {
				free(s->subs[i]);
				s->subs[i] = NULL;
			}
			goto done;
		}
		if (!s->subs[i] && free_slot == MAX_SUBSCRIPTIONS)
			free_slot = i;
	}
	if (on) {
		if (free_slot == MAX_SUBSCRIPTIONS) {
			pthread_mutex_unlock(&srv->lock);
			reply_error(rp, RPC_INVALID_PARAMS,
			            "a session may hold at most %d "
			            "subscriptions; unsubscribe from one first",
			            MAX_SUBSCRIPTIONS);
			return;
		}
		s->subs[free_slot] = strdup(uri->valuestring);
	}
done:
	pthread_mutex_unlock(&srv->lock);
	rp->result = cJSON_CreateObject();
}

static void do_prompts_list(struct mcp_call *c, struct reply *rp)
{
	struct mcp_server *srv = c->srv;
	cJSON *r = cJSON_CreateObject();
	cJSON *arr = r ? cJSON_AddArrayToObject(r, "prompts") : NULL;

	if (!arr) {
		cJSON_Delete(r);
		reply_error(rp, RPC_INTERNAL_ERROR, "out of memory");
		return;
	}
	for (size_t i = 0; i < srv->n_prompts; i++) {
		const struct prompt_impl *p = srv->prompts[i];
		cJSON *o = cJSON_CreateObject();

		if (!o)
			break;
		cJSON_AddStringToObject(o, "name", p->name);
		if (p->title)
			cJSON_AddStringToObject(o, "title", p->title);
		cJSON_AddStringToObject(o, "description", p->description);
		if (srv->prompt_args[i])
			cJSON_AddItemToObject(
			    o, "arguments",
			    cJSON_Duplicate(srv->prompt_args[i], true));
		cJSON_AddItemToArray(arr, o);
	}
	rp->result = r;
}

static void do_prompts_get(struct mcp_call *c, struct reply *rp)
{
	struct mcp_server *srv = c->srv;
	const cJSON *name = cJSON_GetObjectItemCaseSensitive(c->params, "name");
	const cJSON *args =
	    cJSON_GetObjectItemCaseSensitive(c->params, "arguments");
	char err[512] = "";

	if (!cJSON_IsString(name)) {
		reply_error(rp, RPC_INVALID_PARAMS,
		            "prompts/get needs params.name");
		return;
	}
	for (size_t i = 0; i < srv->n_prompts; i++) {
		const struct prompt_impl *p = srv->prompts[i];

		if (strcmp(p->name, name->valuestring) != 0)
			continue;
		rp->result = p->get(p->data, c, args, err, sizeof(err));
		if (!rp->result)
			reply_error(rp, RPC_INVALID_PARAMS, "%s",
			            err[0] ? err : "cannot build the prompt");
		return;
	}
	reply_error(rp, RPC_INVALID_PARAMS, "unknown prompt '%.100s'",
	            name->valuestring);
}

static void do_complete(struct mcp_call *c, struct reply *rp)
{
	struct mcp_server *srv = c->srv;
	const cJSON *ref = cJSON_GetObjectItemCaseSensitive(c->params, "ref");
	const cJSON *arg =
	    cJSON_GetObjectItemCaseSensitive(c->params, "argument");
	cJSON *values = NULL, *r, *comp;

	if (!cJSON_IsObject(ref) || !cJSON_IsObject(arg)) {
		reply_error(rp, RPC_INVALID_PARAMS,
		            "completion/complete needs params.ref and "
		            "params.argument");
		return;
	}
	if (srv->complete)
		values = srv->complete(
		    srv->complete_data, ref, arg,
		    cJSON_GetObjectItemCaseSensitive(c->params, "context"));
	if (!values)
		values = cJSON_CreateArray();
	r = cJSON_CreateObject();
	comp = r ? cJSON_AddObjectToObject(r, "completion") : NULL;
	if (!comp) {
		cJSON_Delete(values);
		cJSON_Delete(r);
		reply_error(rp, RPC_INTERNAL_ERROR, "out of memory");
		return;
	}
	int n = cJSON_GetArraySize(values);

	cJSON_AddItemToObject(comp, "values", values);
	cJSON_AddNumberToObject(comp, "total", n);
	cJSON_AddFalseToObject(comp, "hasMore");
	rp->result = r;
}

static void do_set_level(struct mcp_call *c, struct reply *rp)
{
	const cJSON *lv = cJSON_GetObjectItemCaseSensitive(c->params, "level");

	for (size_t i = 0; cJSON_IsString(lv) && i < 8; i++) {
		if (strcmp(lv->valuestring, level_names[i]) == 0) {
			pthread_mutex_lock(&c->srv->lock);
			c->sess->log_level = (enum mcp_log_level)i;
			pthread_mutex_unlock(&c->srv->lock);
			rp->result = cJSON_CreateObject();
			return;
		}
	}
	reply_error(rp, RPC_INVALID_PARAMS,
	            "params.level must be one of debug, info, notice, "
	            "warning, error, critical, alert, emergency");
}

static cJSON *initialize_result(struct mcp_server *srv, const char *version)
{
	cJSON *r = cJSON_CreateObject();
	cJSON *caps, *info, *o;

	if (!r)
		return NULL;
	cJSON_AddStringToObject(r, "protocolVersion", version);
	caps = cJSON_AddObjectToObject(r, "capabilities");
	o = cJSON_AddObjectToObject(caps, "tools");
	cJSON_AddTrueToObject(o, "listChanged");
	if (srv->n_providers) {
		o = cJSON_AddObjectToObject(caps, "resources");
		cJSON_AddTrueToObject(o, "subscribe");
		cJSON_AddTrueToObject(o, "listChanged");
	}
	if (srv->n_prompts) {
		o = cJSON_AddObjectToObject(caps, "prompts");
		cJSON_AddFalseToObject(o, "listChanged");
	}
	cJSON_AddObjectToObject(caps, "logging");
	if (srv->complete)
		cJSON_AddObjectToObject(caps, "completions");
	info = cJSON_AddObjectToObject(r, "serverInfo");
	cJSON_AddStringToObject(info, "name", "mcp-sandboxd");
	cJSON_AddStringToObject(info, "title", "Code sandbox");
	cJSON_AddStringToObject(info, "version", MCPSD_VERSION);
	if (srv->instructions)
		cJSON_AddStringToObject(r, "instructions", srv->instructions);
	return r;
}

/* initialize on a session that exists (new, or legacy). Lock NOT held. */
static void do_initialize(struct mcp_call *c, struct reply *rp)
{
	struct mcp_server *srv = c->srv;
	struct session *s = c->sess;
	const cJSON *pv =
	    cJSON_GetObjectItemCaseSensitive(c->params, "protocolVersion");
	const cJSON *caps =
	    cJSON_GetObjectItemCaseSensitive(c->params, "capabilities");
	const cJSON *ci =
	    cJSON_GetObjectItemCaseSensitive(c->params, "clientInfo");
	const char *v;

	if (!cJSON_IsString(pv)) {
		reply_error(rp, RPC_INVALID_PARAMS,
		            "initialize needs params.protocolVersion, e.g. "
		            "\"2025-11-25\"");
		return;
	}
	v = version_supported(pv->valuestring) ? pv->valuestring
	                                       : mcp_protocol_versions[0];
	pthread_mutex_lock(&srv->lock);
	if (s->initialized) {
		pthread_mutex_unlock(&srv->lock);
		reply_error(rp, RPC_INVALID_REQUEST,
		            "this session is already initialized; start a new "
		            "session (POST initialize without Mcp-Session-Id)");
		return;
	}
	s->initialized = true;
	snprintf(s->version, sizeof(s->version), "%s", v);
	cJSON_Delete(s->client_caps);
	s->client_caps = cJSON_IsObject(caps) ? cJSON_Duplicate(caps, true)
	                                      : cJSON_CreateObject();
	pthread_mutex_unlock(&srv->lock);
	{
		const cJSON *n = cJSON_GetObjectItemCaseSensitive(ci, "name");
		const cJSON *ver =
		    cJSON_GetObjectItemCaseSensitive(ci, "version");
		char fp[13];

		log_fingerprint(s->id, strlen(s->id), fp);
		log_info("session %s: tenant %s, client %.64s %.32s, "
		         "protocol %s%s",
		         fp, s->tenant,
		         cJSON_IsString(n) ? n->valuestring : "?",
		         cJSON_IsString(ver) ? ver->valuestring : "?", v,
		         s->legacy ? " (HTTP+SSE)" : "");
	}
	rp->result = initialize_result(srv, v);
}

/*
 * Runs a request. Returns true if it continues on another thread (which
 * answers), false when it was answered (or failed) here.
 */
static bool dispatch_request(struct mcp_call *c)
{
	struct mcp_server *srv = c->srv;
	struct reply rp = {0};
	const char *m = c->method;

	if (strcmp(m, "initialize") == 0)
		do_initialize(c, &rp);
	else if (strcmp(m, "ping") == 0)
		rp.result = cJSON_CreateObject();
	else if (strcmp(m, "tools/list") == 0)
		do_tools_list(c, &rp);
	else if (strcmp(m, "tools/call") == 0) {
		if (do_tools_call(c, &rp))
			return true;
	} else if (strcmp(m, "resources/list") == 0)
		do_resources_list(c, &rp, false);
	else if (strcmp(m, "resources/templates/list") == 0)
		do_resources_list(c, &rp, true);
	else if (strcmp(m, "resources/read") == 0)
		do_resources_read(c, &rp);
	else if (strcmp(m, "resources/subscribe") == 0)
		do_subscribe(c, &rp, true);
	else if (strcmp(m, "resources/unsubscribe") == 0)
		do_subscribe(c, &rp, false);
	else if (strcmp(m, "prompts/list") == 0)
		do_prompts_list(c, &rp);
	else if (strcmp(m, "prompts/get") == 0)
		do_prompts_get(c, &rp);
	else if (strcmp(m, "completion/complete") == 0)
		do_complete(c, &rp);
	else if (strcmp(m, "logging/setLevel") == 0)
		do_set_level(c, &rp);
	else
		reply_error(&rp, RPC_METHOD_NOT_FOUND,
		            "method '%.100s' is not supported by this server",
		            m);
	if (!rp.result && !rp.code)
		reply_error(&rp, RPC_INTERNAL_ERROR, "out of memory");
	pthread_mutex_lock(&srv->lock);
	call_finish_locked(c, rp.result, rp.code, rp.msg);
	pthread_mutex_unlock(&srv->lock);
	return false;
}

/* A notification from the client. Lock NOT held. */
static void handle_notification(struct mcp_server *srv, struct session *s,
                                const struct rpc_msg *m)
{
	if (strcmp(m->method, "notifications/cancelled") == 0) {
		const cJSON *rid = m->params ? cJSON_GetObjectItemCaseSensitive(
		                                   m->params, "requestId")
		                             : NULL;
		char *key = rid ? rpc_id_key(rid) : NULL;

		if (!key)
			return;
		pthread_mutex_lock(&srv->lock);
		for (struct mcp_call *c = s->calls; c; c = c->next) {
			if (strcmp(c->id_key, key) == 0) {
				if (strcmp(c->method, "initialize") != 0)
					call_cancel_locked(c);
				break;
			}
		}
		pthread_mutex_unlock(&srv->lock);
		free(key);
		return;
	}
	/* initialized, roots/list_changed, progress: nothing to do. */
}

/* ------------------------------------------------------------------ */
/* the transport's entry points */

static void resp_error(struct mcp_http_resp *resp, int status, int code,
                       const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void resp_error(struct mcp_http_resp *resp, int status, int code,
                       const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	free(resp->body);
	resp->status = status;
	resp->body = rpc_error(NULL, code, msg, NULL);
}

static void resp_init(struct mcp_http_resp *resp)
{
	memset(resp, 0, sizeof(*resp));
}

void mcp_http_resp_finish(struct mcp_http_resp *resp)
{
	if (!resp)
		return;
	free(resp->body);
	resp->body = NULL;
	if (resp->stream)
		mcp_stream_release(resp->stream);
	resp->stream = NULL;
}

/* Looks up the session of a request and takes a reference. Lock held. */
static struct session *lookup_locked(struct mcp_server *srv,
                                     const struct mcp_http_req *req,
                                     struct mcp_http_resp *resp, bool legacy)
{
	struct session *s;

	if (!req->session_id || !req->session_id[0]) {
		if (legacy)
			resp_error(resp, 400, RPC_INVALID_REQUEST,
			           "missing ?sessionId=; use the endpoint URL "
			           "the /sse stream announced");
		else
			resp_error(resp, 400, RPC_INVALID_REQUEST,
			           "missing Mcp-Session-Id header; send "
			           "initialize first and repeat the id it "
			           "returns");
		return NULL;
	}
	s = session_find(srv, req->session_id, req->tenant);
	if (!s || s->legacy != legacy) {
		resp_error(resp, 404, RPC_INVALID_REQUEST,
		           "unknown or expired session; start a new one "
		           "with initialize");
		return NULL;
	}
	s->refs++;
	s->last_active = now_s();
	return s;
}

/* Checks MCP-Protocol-Version; false with resp filled when unsupported. */
static bool check_version_header(const struct mcp_http_req *req,
                                 struct mcp_http_resp *resp)
{
	if (!req->protocol_version || version_supported(req->protocol_version))
		return true;
	resp_error(resp, 400, RPC_INVALID_REQUEST,
	           "unsupported MCP-Protocol-Version '%.40s'; supported: "
	           "2025-11-25, 2025-06-18, 2025-03-26, 2024-11-05",
	           req->protocol_version);
	return false;
}

/*
 * Hands each message of a parsed body to its handler. Requests are
 * attached to st (may be NULL only when there are none). Lock NOT held.
 */
static void process_batch(struct mcp_server *srv, struct session *s,
                          struct stream *st, struct rpc_batch *b)
{
	for (size_t i = 0; i < b->n; i++) {
		struct rpc_msg *m = &b->msgs[i];
		struct mcp_call *c;

		switch (m->kind) {
		case RPC_KIND_RESPONSE:
			pthread_mutex_lock(&srv->lock);
			deliver_response(s, m);
			pthread_mutex_unlock(&srv->lock);
			break;
		case RPC_KIND_NOTIFICATION:
			handle_notification(srv, s, m);
			break;
		case RPC_KIND_INVALID:
			if (!m->id_raw && b->is_array)
				break; /* nothing to answer to */
			pthread_mutex_lock(&srv->lock);
			if (st)
				stream_push(st,
				            rpc_error(m->id_raw,
				                      m->invalid_code,
				                      m->invalid_msg, NULL),
				            true);
			pthread_mutex_unlock(&srv->lock);
			break;
		case RPC_KIND_REQUEST:
			pthread_mutex_lock(&srv->lock);
			if (s->n_calls >= srv->cfg->max_inflight_per_session) {
				stream_push(st,
				            rpc_error(m->id_raw,
				                      RPC_INTERNAL_ERROR,
				                      "too many requests in "
				                      "flight on this session; "
				                      "wait for some to finish",
				                      NULL),
				            true);
				pthread_mutex_unlock(&srv->lock);
				break;
			}
			for (c = s->calls; c; c = c->next) {
				if (strcmp(c->id_key, m->id_key) == 0)
					break;
			}
			if (c) {
				stream_push(st,
				            rpc_error(m->id_raw,
				                      RPC_INVALID_REQUEST,
				                      "a request with this id "
				                      "is already in flight",
				                      NULL),
				            true);
				pthread_mutex_unlock(&srv->lock);
				break;
			}
			c = call_new(srv, s, st, m);
			pthread_mutex_unlock(&srv->lock);
			if (!c) {
				pthread_mutex_lock(&srv->lock);
				stream_push(st,
				            rpc_error(m->id_raw,
				                      RPC_INTERNAL_ERROR,
				                      "out of memory", NULL),
				            true);
				pthread_mutex_unlock(&srv->lock);
				break;
			}
			dispatch_request(c);
			break;
		}
	}
}

static size_t count_answers(const struct rpc_batch *b)
{
	size_t n = 0;

	for (size_t i = 0; i < b->n; i++) {
		const struct rpc_msg *m = &b->msgs[i];

		if (m->kind == RPC_KIND_REQUEST ||
		    (m->kind == RPC_KIND_INVALID &&
		     (m->id_raw || !b->is_array)))
			n++;
	}
	return n;
}

/*
 * Waits until a POST stream can be answered as JSON (every response is
 * there and nothing else was sent) or must become SSE. Lock held.
 */
static void answer_post(struct mcp_server *srv, struct session *s,
                        struct stream *st, bool batch,
                        struct mcp_http_resp *resp)
{
	struct timespec dl;

	deadline_in(&dl, srv->cfg->keepalive_s * 1000);
	while (!st->sent_other && !st->sse && st->pending && !s->gone) {
		if (pthread_cond_timedwait(&st->cond, &srv->lock, &dl) ==
		    ETIMEDOUT)
			break;
	}
	if (!st->sent_other && !st->sse && (st->pending == 0 || s->gone)) {
		struct buf b;
		bool first = true;

		buf_init(&b, 0);
		if (batch && buf_putc(&b, '[') < 0)
			goto oom;
		for (struct event *e = st->head; e; e = e->next) {
			if (!e->response)
				continue;
			if ((!first && buf_putc(&b, ',') < 0) ||
			    buf_puts(&b, e->json) < 0)
				goto oom;
			first = false;
			if (!batch)
				break;
		}
		if (batch && buf_putc(&b, ']') < 0)
			goto oom;
		if (first && !batch) {
			/* The request was cancelled: nothing to say. */
			buf_finish(&b);
			resp->status = 202;
		} else {
			resp->status = 200;
			resp->body = buf_take(&b, NULL);
		}
		stream_end(st);
		return;
	oom:
		buf_finish(&b);
		resp_error(resp, 500, RPC_INTERNAL_ERROR, "out of memory");
		stream_end(st);
		return;
	}
	st->sse = true;
	resp->status = 200;
	resp->stream = reader_new(srv, st, 0);
	if (!resp->stream)
		resp_error(resp, 500, RPC_INTERNAL_ERROR, "out of memory");
	else
		resp->stream->post = true;
}

static bool batch_has_initialize(const struct rpc_batch *b)
{
	for (size_t i = 0; i < b->n; i++) {
		if (b->msgs[i].kind == RPC_KIND_REQUEST &&
		    strcmp(b->msgs[i].method, "initialize") == 0)
			return true;
	}
	return false;
}

static void parse_failed(struct mcp_http_resp *resp, int code, const char *msg)
{
	resp_error(resp, 400, code,
	           code == RPC_PARSE_ERROR
	               ? "parse error: %s; send one JSON-RPC message as a "
	                 "JSON object"
	               : "invalid request: %s",
	           msg ? msg : "malformed");
}

void mcp_http_post(struct mcp_server *srv, const struct mcp_http_req *req,
                   struct mcp_http_resp *resp)
{
	struct rpc_batch *b;
	struct session *s = NULL;
	struct stream *st = NULL;
	int code;
	const char *msg;

	resp_init(resp);
	if (!check_version_header(req, resp))
		return;
	b = malloc(sizeof(*b));
	if (!b) {
		resp_error(resp, 500, RPC_INTERNAL_ERROR, "out of memory");
		return;
	}
	if (rpc_parse(req->body, req->body_len, srv->cfg->max_json_depth, b,
	              &code, &msg) < 0) {
		parse_failed(resp, code, msg);
		free(b);
		return;
	}
	if (!b->is_array && b->msgs[0].kind == RPC_KIND_INVALID) {
		resp->status = 400;
		resp->body =
		    rpc_error(b->msgs[0].id_raw, b->msgs[0].invalid_code,
		              b->msgs[0].invalid_msg, NULL);
		goto out;
	}
	if (batch_has_initialize(b)) {
		if (b->is_array) {
			resp_error(resp, 400, RPC_INVALID_REQUEST,
			           "initialize must be sent alone, not in a "
			           "batch");
			goto out;
		}
		if (req->session_id && req->session_id[0]) {
			resp_error(
			    resp, 400, RPC_INVALID_REQUEST,
			    "initialize was sent with an Mcp-Session-Id; "
			    "a session is initialized once. Send "
			    "initialize without the header to start a "
			    "new session");
			goto out;
		}
		pthread_mutex_lock(&srv->lock);
		int r = session_new(srv, req->tenant, false, &s);

		if (r == -EBUSY) {
			pthread_mutex_unlock(&srv->lock);
			resp_error(resp, 429, RPC_INTERNAL_ERROR,
			           "this token already has %u active sessions; "
			           "end some (DELETE) or wait for them to go "
			           "idle",
			           srv->cfg->max_sessions_per_tenant);
			resp->retry_after = 30;
			goto out;
		}
		if (r < 0) {
			pthread_mutex_unlock(&srv->lock);
			resp_error(resp, 500, RPC_INTERNAL_ERROR,
			           "cannot create a session");
			goto out;
		}
		s->refs++;
		snprintf(resp->session_id, sizeof(resp->session_id), "%s",
		         s->id);
	} else {
		pthread_mutex_lock(&srv->lock);
		s = lookup_locked(srv, req, resp, false);
		if (!s) {
			pthread_mutex_unlock(&srv->lock);
			goto out;
		}
		if (b->is_array && strcmp(s->version, "2025-03-26") != 0) {
			session_unref(srv, s);
			pthread_mutex_unlock(&srv->lock);
			resp_error(resp, 400, RPC_INVALID_REQUEST,
			           "JSON-RPC batches are only allowed in "
			           "protocol version 2025-03-26; send one "
			           "message per request");
			goto out;
		}
	}
	if (count_answers(b)) {
		st = stream_new(s, STREAM_POST);
		if (!st) {
			session_unref(srv, s);
			pthread_mutex_unlock(&srv->lock);
			resp_error(resp, 500, RPC_INTERNAL_ERROR,
			           "out of memory");
			goto out;
		}
		/* Held by this function until every message is dispatched. */
		st->readers++;
		st->pending++;
		/* SEP-1699: the first event gives an id to resume from. */
		if (session_wants_priming(s))
			stream_prime(st);
	}
	pthread_mutex_unlock(&srv->lock);

	process_batch(srv, s, st, b);

	pthread_mutex_lock(&srv->lock);
	if (st) {
		st->readers--;
		if (--st->pending == 0)
			stream_end(st);
		answer_post(srv, s, st, b->is_array, resp);
		/* A stream answered as JSON is never resumed. */
		if (!resp->stream && !st->pending && !st->readers)
			stream_drop(s, st);
	} else {
		resp->status = 202;
	}
	session_unref(srv, s);
	pthread_mutex_unlock(&srv->lock);
out:
	rpc_batch_finish(b);
	free(b);
}

/* Parses "<stream>_<seq>". */
static bool parse_event_id(const char *s, unsigned *stream,
                           unsigned long long *seq)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || end == s || *end != '_' || v > UINT32_MAX)
		return false;
	*stream = (unsigned)v;
	s = end + 1;
	*seq = strtoull(s, &end, 10);
	return !errno && end != s && *end == '\0';
}

void mcp_http_get(struct mcp_server *srv, const struct mcp_http_req *req,
                  struct mcp_http_resp *resp)
{
	struct session *s;
	struct stream *st;

	resp_init(resp);
	if (!check_version_header(req, resp))
		return;
	pthread_mutex_lock(&srv->lock);
	s = lookup_locked(srv, req, resp, false);
	if (!s)
		goto out_unlocked;
	if (req->last_event_id && req->last_event_id[0]) {
		unsigned sid;
		unsigned long long seq;

		if (!parse_event_id(req->last_event_id, &sid, &seq) ||
		    !(st = session_find_stream(s, sid))) {
			resp_error(resp, 404, RPC_INVALID_REQUEST,
			           "Last-Event-ID names no stream this session "
			           "still has; open a new stream without it");
			goto out;
		}
		if (st->readers) {
			/* The old connection is gone but not yet noticed. */
			st->generation++;
			pthread_cond_broadcast(&st->cond);
		}
		if (seq < st->dropped_upto)
			log_info("resume from an event already dropped; the "
			         "client misses some messages");
		resp->status = 200;
		resp->stream = reader_new(srv, st, seq);
		if (!resp->stream)
			resp_error(resp, 500, RPC_INTERNAL_ERROR,
			           "out of memory");
		goto out;
	}
	st = s->get_stream;
	if (st && st->readers) {
		resp_error(resp, 409, RPC_INVALID_REQUEST,
		           "this session already has an open GET stream; "
		           "only one is allowed");
		goto out;
	}
	if (!st) {
		st = stream_new(s, STREAM_GET);
		if (!st) {
			resp_error(resp, 500, RPC_INTERNAL_ERROR,
			           "out of memory");
			goto out;
		}
		s->get_stream = st;
		if (session_wants_priming(s))
			stream_prime(st);
	}
	resp->status = 200;
	/* Undelivered events wait for the new reader; old ones do not. */
	resp->stream = reader_new(srv, st, st->dropped_upto);
	if (!resp->stream)
		resp_error(resp, 500, RPC_INTERNAL_ERROR, "out of memory");
out:
	session_unref(srv, s);
out_unlocked:
	pthread_mutex_unlock(&srv->lock);
}

void mcp_http_delete(struct mcp_server *srv, const struct mcp_http_req *req,
                     struct mcp_http_resp *resp)
{
	struct session *s;

	resp_init(resp);
	if (!check_version_header(req, resp))
		return;
	pthread_mutex_lock(&srv->lock);
	s = lookup_locked(srv, req, resp, false);
	if (s) {
		session_end(srv, s);
		session_unref(srv, s);
		resp->status = 200;
	}
	pthread_mutex_unlock(&srv->lock);
}

void mcp_http_sse_open(struct mcp_server *srv, const struct mcp_http_req *req,
                       const char *endpoint_path, struct mcp_http_resp *resp)
{
	struct session *s;
	struct stream *st;
	int r;

	resp_init(resp);
	pthread_mutex_lock(&srv->lock);
	r = session_new(srv, req->tenant, true, &s);
	if (r < 0) {
		pthread_mutex_unlock(&srv->lock);
		if (r == -EBUSY) {
			resp_error(resp, 429, RPC_INTERNAL_ERROR,
			           "this token already has %u active sessions; "
			           "close some streams first",
			           srv->cfg->max_sessions_per_tenant);
			resp->retry_after = 30;
		} else {
			resp_error(resp, 500, RPC_INTERNAL_ERROR,
			           "cannot create a session");
		}
		return;
	}
	st = stream_new(s, STREAM_LEGACY);
	if (!st ||
	    stream_push_raw(st, "event: endpoint\ndata: %s?sessionId=%s\n\n",
	                    endpoint_path, s->id) < 0) {
		session_end(srv, s);
		pthread_mutex_unlock(&srv->lock);
		resp_error(resp, 500, RPC_INTERNAL_ERROR, "out of memory");
		return;
	}
	s->get_stream = st;
	resp->status = 200;
	resp->stream = reader_new(srv, st, 0);
	if (!resp->stream) {
		session_end(srv, s);
		resp_error(resp, 500, RPC_INTERNAL_ERROR, "out of memory");
	}
	pthread_mutex_unlock(&srv->lock);
}

void mcp_http_sse_post(struct mcp_server *srv, const struct mcp_http_req *req,
                       struct mcp_http_resp *resp)
{
	struct rpc_batch *b;
	struct session *s;
	int code;
	const char *msg;

	resp_init(resp);
	pthread_mutex_lock(&srv->lock);
	s = lookup_locked(srv, req, resp, true);
	pthread_mutex_unlock(&srv->lock);
	if (!s)
		return;
	b = malloc(sizeof(*b));
	if (!b) {
		resp_error(resp, 500, RPC_INTERNAL_ERROR, "out of memory");
		goto out;
	}
	if (rpc_parse(req->body, req->body_len, srv->cfg->max_json_depth, b,
	              &code, &msg) < 0) {
		parse_failed(resp, code, msg);
		free(b);
		goto out;
	}
	/* Everything, answers included, travels on the session's stream. */
	process_batch(srv, s, s->get_stream, b);
	rpc_batch_finish(b);
	free(b);
	resp->status = 202;
out:
	pthread_mutex_lock(&srv->lock);
	session_unref(srv, s);
	pthread_mutex_unlock(&srv->lock);
}

/* ------------------------------------------------------------------ */
/* server-wide */

static void *sweeper_main(void *arg)
{
	struct mcp_server *srv = arg;
	struct timespec dl;

	pthread_mutex_lock(&srv->lock);
	while (!srv->stopping) {
		time_t t = now_s();

		for (struct session *s = srv->sessions, *next; s; s = next) {
			next = s->next;
			session_trim_streams(s, false);
			if (session_idle(s) &&
			    t - s->last_active >
			        (time_t)srv->cfg->session_idle_s)
				session_end(srv, s);
		}
		deadline_in(&dl, SWEEP_INTERVAL_S * 1000);
		pthread_cond_timedwait(&srv->sweep_cond, &srv->lock, &dl);
	}
	pthread_mutex_unlock(&srv->lock);
	return NULL;
}

struct mcp_server *mcp_server_create(const struct config *cfg)
{
	struct mcp_server *srv = calloc(1, sizeof(*srv));

	if (!srv)
		return NULL;
	srv->cfg = cfg;
	pthread_mutex_init(&srv->lock, NULL);
	cond_init_mono(&srv->drain_cond);
	cond_init_mono(&srv->sweep_cond);
	if (pthread_create(&srv->sweeper, NULL, sweeper_main, srv) != 0) {
		pthread_mutex_destroy(&srv->lock);
		pthread_cond_destroy(&srv->drain_cond);
		pthread_cond_destroy(&srv->sweep_cond);
		free(srv);
		return NULL;
	}
	return srv;
}

void mcp_server_destroy(struct mcp_server *srv)
{
	if (!srv)
		return;
	pthread_mutex_lock(&srv->lock);
	srv->stopping = true;
	pthread_cond_broadcast(&srv->sweep_cond);
	pthread_mutex_unlock(&srv->lock);
	pthread_join(srv->sweeper, NULL);
	pthread_mutex_lock(&srv->lock);
	while (srv->sessions)
		session_end(srv, srv->sessions);
	/* Tool threads still running hold references; let them finish. */
	while (srv->calls_running)
		pthread_cond_wait(&srv->drain_cond, &srv->lock);
	pthread_mutex_unlock(&srv->lock);
	for (size_t i = 0; i < srv->n_tools; i++) {
		cJSON_Delete(srv->tool_in_schema[i]);
		cJSON_Delete(srv->tool_out_schema[i]);
	}
	for (size_t i = 0; i < srv->n_prompts; i++)
		cJSON_Delete(srv->prompt_args[i]);
	pthread_cond_destroy(&srv->drain_cond);
	pthread_cond_destroy(&srv->sweep_cond);
	pthread_mutex_destroy(&srv->lock);
	free(srv);
}

void mcp_server_add_tool(struct mcp_server *srv, const struct tool_impl *t)
{
	cJSON *in, *out = NULL;

	if (srv->n_tools >= MAX_TOOLS) {
		log_errorx("too many tools; '%s' not registered", t->name);
		return;
	}
	in = cJSON_Parse(t->input_schema);
	if (t->output_schema)
		out = cJSON_Parse(t->output_schema);
	if (!cJSON_IsObject(in) || (t->output_schema && !cJSON_IsObject(out))) {
		log_errorx("tool '%s' has an invalid schema; not registered",
		           t->name);
		cJSON_Delete(in);
		cJSON_Delete(out);
		return;
	}
	srv->tool_in_schema[srv->n_tools] = in;
	srv->tool_out_schema[srv->n_tools] = out;
	srv->tools[srv->n_tools++] = t;
}

void mcp_server_add_resources(struct mcp_server *srv,
                              const struct resource_provider *p)
{
	if (srv->n_providers < MAX_PROVIDERS)
		srv->providers[srv->n_providers++] = p;
}

void mcp_server_add_prompt(struct mcp_server *srv, const struct prompt_impl *p)
{
	if (srv->n_prompts >= MAX_PROMPTS)
		return;
	srv->prompt_args[srv->n_prompts] =
	    p->arguments_json ? cJSON_Parse(p->arguments_json) : NULL;
	srv->prompts[srv->n_prompts++] = p;
}

void mcp_server_set_completion(struct mcp_server *srv, mcp_complete_fn fn,
                               void *data)
{
	srv->complete = fn;
	srv->complete_data = data;
}

void mcp_server_set_instructions(struct mcp_server *srv, const char *text)
{
	srv->instructions = text;
}

/* Sends a notification on every session's standalone stream. */
static void broadcast(struct mcp_server *srv, const char *method,
                      const char *uri)
{
	pthread_mutex_lock(&srv->lock);
	for (struct session *s = srv->sessions; s; s = s->next) {
		cJSON *params = NULL;
		bool subscribed = !uri;

		if (!s->initialized || !s->get_stream)
			continue;
		for (size_t i = 0; uri && i < MAX_SUBSCRIPTIONS; i++) {
			if (s->subs[i] && strcmp(s->subs[i], uri) == 0)
				subscribed = true;
		}
		if (!subscribed)
			continue;
		if (uri) {
			params = cJSON_CreateObject();
			cJSON_AddStringToObject(params, "uri", uri);
		}
		stream_push(s->get_stream, rpc_notification(method, params),
		            false);
	}
	pthread_mutex_unlock(&srv->lock);
}

void mcp_server_tools_changed(struct mcp_server *srv)
{
	broadcast(srv, "notifications/tools/list_changed", NULL);
}

void mcp_server_resource_updated(struct mcp_server *srv, const char *uri)
{
	broadcast(srv, "notifications/resources/updated", uri);
}

unsigned mcp_server_drain(struct mcp_server *srv, unsigned timeout_ms)
{
	struct timespec dl;
	unsigned left;

	deadline_in(&dl, timeout_ms);
	pthread_mutex_lock(&srv->lock);
	srv->draining = true;
	while (srv->calls_running) {
		if (pthread_cond_timedwait(&srv->drain_cond, &srv->lock, &dl) ==
		    ETIMEDOUT)
			break;
	}
	left = srv->calls_running;
	pthread_mutex_unlock(&srv->lock);
	return left;
}

void mcp_server_close_sessions(struct mcp_server *srv)
{
	pthread_mutex_lock(&srv->lock);
	while (srv->sessions)
		session_end(srv, srv->sessions);
	pthread_mutex_unlock(&srv->lock);
}

void mcp_server_stats(struct mcp_server *srv, struct mcp_stats *out)
{
	memset(out, 0, sizeof(*out));
	pthread_mutex_lock(&srv->lock);
	out->sessions = srv->n_sessions;
	for (struct session *s = srv->sessions; s; s = s->next) {
		for (struct stream *st = s->streams; st; st = st->next)
			out->streams_open += st->readers;
	}
	out->calls_running = srv->calls_running;
	out->calls_total = srv->calls_total;
	pthread_mutex_unlock(&srv->lock);
}
