/* SPDX-License-Identifier: MIT */
/*
 * mcp_internal: what the files of the mcp module share with one another and
 * with nothing else. It defines the private structs (events, streams,
 * readers, pending server requests, calls, sessions, the server) and
 * declares the functions one file of the module calls in another:
 * mcp_stream.c (events, streams, readers, clock helpers), mcp_session.c (the
 * session table, per-tenant accounting), mcp_call.c (call lifetime,
 * cancellation, requests to the client, the mcp_call_* API), mcp_methods.c
 * (method handlers, dispatch) and mcp.c (HTTP entry points, the server).
 * Locking model: one mutex, srv->lock, guards every session, stream, call
 * and pending request and the server's session table, counters and flags;
 * waiters use per-object condition variables, clocked by CLOCK_MONOTONIC,
 * with that mutex. The registration tables (tools, providers, prompts,
 * completion, instructions) are filled before the server serves and only
 * read afterwards, without the lock. Every function below must be called
 * with srv->lock held unless its comment says otherwise.
 */
#ifndef MCPSD_MCP_INTERNAL_H
#define MCPSD_MCP_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "mcp.h"
#include "rpc.h"
#include "util/mono.h"

#define MAX_TOOLS 64
#define MAX_PROVIDERS 16
#define MAX_PROMPTS 64
#define MAX_SUBSCRIPTIONS 64

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

/* The names of enum mcp_log_level, in its order (lib/mcp_call.c). */
extern const char *const mcp_level_names[8];

/* ------------------------------------------------------------------ */
/* lib/mcp_stream.c: streams of one session (struct stream, not readers) */

/*
 * Creates a stream of the given kind, numbered and linked into s->streams.
 * The session owns it: mcp_events_drop() or the session's last reference
 * frees it. NULL when out of memory.
 */
struct stream *mcp_events_new(struct session *s, enum stream_kind kind);

/*
 * Unlinks and frees st (and clears s->get_stream if it was st). No reader
 * may hold st.
 */
void mcp_events_drop(struct session *s, struct stream *st);

/*
 * Appends the message json as an event and wakes st's readers; when the
 * stream is over its bounds the oldest events are dropped. A response keeps
 * its JSON for a plain JSON answer; anything else marks the stream as
 * having sent something other than responses. Takes ownership of json
 * whatever the result (NULL gives -ENOMEM). Returns 0, -EPIPE when st has
 * ended, or another negative errno.
 */
int mcp_events_push(struct stream *st, char *json, bool response);

/*
 * Appends a formatted SSE record that is not a message (the priming event,
 * the legacy endpoint event), even on an ended stream. Returns 0 or a
 * negative errno.
 */
int mcp_events_push_raw(struct stream *st, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Appends the priming event (an id to resume from and the retry delay). */
int mcp_events_prime(struct stream *st);

/* Marks st ended (nothing more is appended) and wakes its readers. */
void mcp_events_end(struct stream *st);

/* The stream of s numbered id, borrowed; NULL if s has none. */
struct stream *mcp_session_find_stream(struct session *s, unsigned id);

/*
 * Frees the ended streams of s that nobody reads (the standalone stream
 * excepted) once they have lingered long enough or s has too many;
 * force_old frees them all.
 */
void mcp_session_trim_streams(struct session *s, bool force_old);

/*
 * Creates a reader of st that hands out the events after seq cursor. The
 * reader holds a reference on st's session and counts in st->readers. The
 * caller owns it: free with mcp_stream_release(), which takes srv->lock
 * itself and so must be called without it. NULL when out of memory.
 */
struct mcp_stream *mcp_reader_new(struct mcp_server *srv, struct stream *st,
                                  unsigned long long cursor);

/* ------------------------------------------------------------------ */
/* lib/mcp_session.c: sessions */

/* Whether s speaks 2025-11-25 or later (and so gets priming events). */
bool mcp_session_wants_priming(const struct session *s);

/*
 * The live session of tenant named id, borrowed: no reference is taken.
 * NULL when the id is unknown, ended, or another tenant's.
 */
struct session *mcp_session_find(struct mcp_server *srv, const char *id,
                                 const char *tenant);

/* Whether s has no call running and no stream being read. */
bool mcp_session_idle(const struct session *s);

/*
 * Ends s (does nothing if it has ended): takes it out of the table, cancels
 * its calls (their cancel hooks run here, under the lock), ends its streams,
 * wakes its pending requests and drops the table's reference. s is freed on
 * return unless the caller holds a reference of its own.
 */
void mcp_session_end(struct mcp_server *srv, struct session *s);

/* Drops a reference on s; the last one frees s and all its streams. */
void mcp_session_unref(struct mcp_server *srv, struct session *s);

/*
 * Creates a session for tenant and links it into the table. *out is
 * borrowed: the table holds the only reference, so a caller that keeps s
 * past releasing the lock takes its own (s->refs++). At the per-tenant cap
 * the least recently used idle session of tenant is ended to make room.
 * Returns 0, -EBUSY (at the cap with no idle session), -EIO (no random
 * bytes for the id) or -ENOMEM.
 */
int mcp_session_new(struct mcp_server *srv, const char *tenant, bool legacy,
                    struct session **out);

/* ------------------------------------------------------------------ */
/* lib/mcp_call.c: calls and requests to the client */

/*
 * Marks c cancelled, wakes the session's pending requests and runs c's
 * cancel hook, under the lock. Does nothing if c is done or cancelled.
 */
void mcp_call_cancel_locked(struct mcp_call *c);

/*
 * Creates the call of request m (copies of its id, method, params and
 * progress token), linked into s->calls. It holds a reference on s and
 * counts as a response st still owes (st may be NULL). The session owns
 * it until mcp_call_finish_locked(). NULL when out of memory.
 */
struct mcp_call *mcp_call_new(struct mcp_server *srv, struct session *s,
                              struct stream *st, const struct rpc_msg *m);

/*
 * Finishes c: queues its response (result, or the error code and msg when
 * result is NULL) unless it was cancelled, its session ended or it has no
 * stream; ends a POST stream that owes nothing more; unlinks c, drops its
 * session reference and frees it. Takes ownership of result. c is invalid
 * on return.
 */
void mcp_call_finish_locked(struct mcp_call *c, cJSON *result, int code,
                            const char *msg);

/*
 * Hands the client's response m to the mcp_call_request() waiting for it
 * (copies of its result and error); one nobody waits for is ignored.
 */
void mcp_deliver_response(struct session *s, const struct rpc_msg *m);

/* ------------------------------------------------------------------ */
/* lib/mcp_methods.c: method handlers and dispatch */

/* Whether v is one of mcp_protocol_versions. No lock needed. */
bool mcp_version_supported(const char *v);

/*
 * Hands each message of b to its handler: responses to the pending
 * requests, notifications to their handlers, requests to new calls that
 * are answered here or on a tool thread. Answers go to st, which may be
 * NULL only when b holds nothing to answer. The caller holds a reference on
 * s and keeps st alive throughout. Call WITHOUT srv->lock: it takes the
 * lock as needed, and the handlers run without it.
 */
void mcp_process_batch(struct mcp_server *srv, struct session *s,
                       struct stream *st, struct rpc_batch *b);

#endif
