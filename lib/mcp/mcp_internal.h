/* SPDX-License-Identifier: MIT */
/*
 * mcp_internal: what the files of the mcp module share with one another and
 * with nothing else. It defines the private structs (message texts, events,
 * streams, readers, pending server requests, calls, sessions, the server)
 * and declares the functions one file of the module calls in another:
 * mcp_lock.c (the lock and the work left for after it), mcp_stream.c
 * (message texts, events, streams, readers), mcp_session.c (the session
 * table, per-tenant accounting), mcp_call.c (call lifetime, cancellation,
 * the mcp_call_* API), mcp_input.c (input from the client in every
 * revision), mcp_revision.c (what differs between protocol revisions),
 * mcp_task.c (calls that run as tasks), mcp_listen.c (subscriptions/listen
 * streams), mcp_methods.c (method handlers, dispatch) and mcp.c (HTTP entry
 * points, the server).
 *
 * A 2026-07-28 request has no session in the protocol; here it gets a
 * stateless session of its own, made for it and ended with it (its stream
 * released, or its JSON answer given), so the stream, call and cancellation
 * machinery is the same for both eras and the differences stay in
 * mcp_revision.c.
 *
 * Locking model: one mutex, srv->lock, guards every session, stream, call
 * and pending request and the server's session table, counters and flags;
 * waiters use per-object condition variables, clocked by CLOCK_MONOTONIC,
 * with that mutex. The lock is held only for bookkeeping: messages are
 * serialized into immutable, reference-counted texts (struct mcp_msg)
 * before it is taken, readers copy those texts out after releasing it, and
 * the work a locked section cannot do under the lock (running cancel hooks,
 * freeing sessions and streams whose last reference went) is queued on the
 * server and done by mcp_unlock() once the lock is released. Every section
 * therefore ends with mcp_unlock(), and no thread waits on a condition
 * variable while it has such work queued. The registration tables (tools,
 * providers, prompts, completion, instructions) are filled before the
 * server serves and only read afterwards, without the lock. Every function
 * below must be called with srv->lock held unless its comment says
 * otherwise.
 */
#ifndef MCPSD_MCP_INTERNAL_H
#define MCPSD_MCP_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "mcp/mcp.h"
#include "mcp/rpc.h"
#include "util/mono.h"

#define MAX_TOOLS 64
#define MAX_PROVIDERS 16
#define MAX_PROMPTS 64
#define MAX_HEADER_PARAMS 4

/* A log level that lets nothing through (2026-07-28 without logLevel). */
#define MCP_LOG_OFF ((enum mcp_log_level)8)

/* JSON-RPC error codes of 2026-07-28. */
#define RPC_HEADER_MISMATCH -32020
#define RPC_MISSING_CAPABILITY -32021
#define RPC_UNSUPPORTED_VERSION -32022

/* The _meta keys of 2026-07-28 requests. */
#define META_VERSION "io.modelcontextprotocol/protocolVersion"
#define META_CAPS "io.modelcontextprotocol/clientCapabilities"
#define META_INFO "io.modelcontextprotocol/clientInfo"
#define META_LOG_LEVEL "io.modelcontextprotocol/logLevel"
#define META_SERVER_INFO "io.modelcontextprotocol/serverInfo"
#define META_SUBSCRIPTION "io.modelcontextprotocol/subscriptionId"
#define TASKS_EXTENSION "io.modelcontextprotocol/tasks"

enum stream_kind {
	STREAM_POST,
	STREAM_GET,
	STREAM_LEGACY,
};

/*
 * One message as JSON text (or, for a raw event, a whole SSE record),
 * immutable once made and shared by reference: by the events of every
 * stream it was queued on and by the readers copying it out. The reference
 * count is atomic, so the last reference may go with or without the lock.
 */
struct mcp_msg {
	atomic_uint refs;
	size_t len;
	char *data;
	int code; /* the error code of an error response, else 0 */
};

struct event {
	struct event *next;
	unsigned long long seq;
	struct mcp_msg *msg; /* a reference */
	bool response;       /* a response: part of a plain JSON answer */
	bool raw;            /* msg is a whole SSE record, not a message */
};

/*
 * Reference counted: the session's list holds one reference while the
 * stream is linked there, and every reader, call and POST handler that
 * uses it holds one. The last reference queues it for mcp_stream_free().
 */
struct stream {
	struct stream *next; /* in session->streams, or srv->later_streams */
	struct session *sess;
	unsigned refs;
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

/*
 * A reader: what the transport holds while it drains a stream. It holds a
 * reference on its stream and on its session. Only the one thread reading
 * uses the out_* fields, so they are copied from without the lock.
 */
struct mcp_stream {
	struct mcp_server *srv;
	struct stream *st;
	struct session *sess;
	unsigned long long cursor; /* last seq handed out */
	unsigned generation;
	bool post; /* the POST's own answer (not a resumption) */
	bool done;
	/* The event being copied out: out_head, then out_msg, then "\n\n". */
	struct mcp_msg *out_msg; /* a reference, NULL when none */
	char out_head[80];
	size_t out_head_len, out_off;
	bool out_tail;
};

struct pending {
	struct pending *next;
	char *id_key;
	cJSON *result, *error;
	bool done;
	pthread_cond_t cond;
};

struct task_run;

struct mcp_call {
	struct mcp_server *srv;
	struct session *sess;  /* a reference, once attached */
	struct stream *st;     /* where its messages go (a reference) */
	struct mcp_call *next; /* in session->calls */
	char *id_raw, *id_key;
	char *method;
	cJSON *params;         /* owned copy */
	cJSON *progress_token; /* owned copy, or NULL */
	const struct tool_impl *tool;
	bool cancelled;
	bool done;
	/*
	 * Finished without an answer of its own: a subscriptions/listen
	 * request (its stream stays open) or a call that became a task.
	 */
	bool no_response;
	int answer_code;       /* error code of the answer being finished */
	struct task_run *task; /* set once it runs as a task */
	/*
	 * The answer when the handler returns NULL, if not -32603: set by
	 * mcp_call_input() when a capability is missing (code 0: none).
	 */
	int fail_code;
	cJSON *fail_data;
	char *fail_msg;
	/*
	 * 2026-07-28 multi round-trip input (mcp_input.c), owned: the
	 * answers known so far by key (from requestState and inputResponses)
	 * and the questions asked and not answered, by key; the count of
	 * automatic keys given out; whether the answers were read.
	 */
	cJSON *mrtr_answers;
	cJSON *mrtr_missing;
	cJSON *mrtr_used; /* the answers this round used, for the next */
	unsigned input_seq;
	bool mrtr_loaded;
	/* The registered cancel hook, not yet claimed to run. */
	void (*cancel_fn)(void *);
	void *cancel_arg;
	/*
	 * A claimed hook: set (with hook_busy) under the lock by the thread
	 * that cancels, which runs it after releasing the lock and then
	 * clears hook_busy and broadcasts srv->hook_cond. While hook_busy,
	 * the call is not freed and no other hook of it starts.
	 */
	void (*hook_fn)(void *);
	void *hook_arg;
	bool hook_busy;
	pthread_t hook_thread;      /* the thread running it */
	struct mcp_call *hook_next; /* in srv->later_hooks */
	/* mcp_call_after(): run by tool_thread once the answer is out. */
	void (*after_fn)(void *);
	void *after_arg;
};

struct session {
	struct session *next; /* in srv->sessions, or srv->later_sessions */
	struct mcp_server *srv;
	/* [MCP_REPLICA_NAME "."] 64 hex digits: the replica prefix names the
	 * daemon that owns the session, for a load balancer. */
	char id[MCP_REPLICA_NAME_MAX + 1 + 64 + 1];
	char *tenant;
	char *client; /* mcp_http_req.client of its first request, or NULL */
	unsigned refs;
	bool legacy;
	/*
	 * A 2026-07-28 request's own: not in the table, no id, ended with
	 * its request (or kept by the calls that became tasks).
	 */
	bool stateless;
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
};

/* A subscriptions/listen stream (2026-07-28). */
enum listen_kind {
	LISTEN_TOOLS,
	LISTEN_PROMPTS,
	LISTEN_RESOURCES,
	LISTEN_KINDS,
};

struct listener {
	struct listener *next;
	struct session
	    *sess;         /* its stateless session; the listener goes first */
	struct stream *st; /* the request's stream (a reference) */
	/*
	 * The notifications it asked for, made when it was opened (they
	 * carry its subscription id); NULL for kinds it did not ask for.
	 */
	struct mcp_msg *note[LISTEN_KINDS];
	struct mcp_msg *closing; /* the result that ends it at shutdown */
};

struct mcp_server {
	const struct config *cfg;
	pthread_mutex_t lock;
	pthread_cond_t drain_cond;
	pthread_cond_t hook_cond; /* a claimed hook returned */
	bool stopping;
	bool draining;
	struct session *sessions;
	unsigned n_sessions;
	struct session *stateless; /* live stateless sessions */
	struct listener *listeners;
	struct task_run *tasks_live; /* calls running as tasks */
	struct tasks *tasks;         /* their records; NULL: no tasks */
	unsigned char state_key[32]; /* seals requestState (request_state.h) */
	const char *param_prop[MAX_HEADER_PARAMS];
	const char *param_header[MAX_HEADER_PARAMS];
	size_t n_params;
	unsigned calls_running;   /* counted until their after-work ends */
	unsigned calls_finishing; /* of those, answered (mcp_call_after) */
	unsigned long long calls_total;
	/* Queued for mcp_unlock(); empty whenever the lock is free. */
	struct mcp_call *later_hooks;
	struct session *later_sessions;
	struct stream *later_streams;
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

/* The names of enum mcp_log_level, in its order (lib/mcp/mcp_call.c). */
extern const char *const mcp_level_names[8];

/* ------------------------------------------------------------------ */
/* lib/mcp/mcp_lock.c: the lock and what is left for after it */

/* Takes srv->lock. */
void mcp_lock(struct mcp_server *srv);

/*
 * Releases srv->lock, then does what the locked section queued: runs the
 * cancel hooks it claimed (see mcp_call_cancel_locked) on this thread, and
 * frees the streams and sessions whose last reference went. Every locked
 * section of the module ends here.
 */
void mcp_unlock(struct mcp_server *srv);

/* ------------------------------------------------------------------ */
/* lib/mcp/mcp_stream.c: message texts, and the streams of one session */

/*
 * Makes a message of text (JSON, or a whole SSE record), taking ownership
 * of text whatever the result. Returns a reference (release with
 * mcp_msg_unref), or NULL when text is NULL or memory ran out. Lock not
 * needed; call it before taking the lock.
 */
struct mcp_msg *mcp_msg_new(char *text);

/* Takes another reference on m and returns m. Lock not needed. */
struct mcp_msg *mcp_msg_ref(struct mcp_msg *m);

/* Drops a reference; the last frees m. NULL-safe. Lock not needed. */
void mcp_msg_unref(struct mcp_msg *m);

/*
 * Creates a stream of the given kind, numbered and linked into s->streams;
 * the reference returned is the list's (mcp_events_drop() gives it up).
 * NULL when out of memory.
 */
struct stream *mcp_events_new(struct session *s, enum stream_kind kind);

/* Takes a reference on st (for a call, a reader or a POST handler). */
void mcp_events_hold(struct stream *st);

/*
 * Drops a reference on st; the last queues st to be freed by
 * mcp_unlock().
 */
void mcp_events_unref(struct mcp_server *srv, struct stream *st);

/*
 * Unlinks st from s (clearing s->get_stream if it was st) and drops the
 * list's reference. Whoever else holds one keeps st alive.
 */
void mcp_events_drop(struct session *s, struct stream *st);

/*
 * Frees st and its events. Only mcp_unlock() calls it, without the lock,
 * for a stream whose last reference went.
 */
void mcp_stream_free(struct stream *st);

/*
 * Appends the message m as an event and wakes st's readers; when the stream
 * is over its bounds the oldest events are dropped. m is borrowed: the
 * event takes a reference of its own. A response is kept for a plain JSON
 * answer; anything else marks the stream as having sent something other
 * than responses. Returns 0, -EPIPE when st has ended, or -ENOMEM.
 */
int mcp_events_push(struct stream *st, struct mcp_msg *m, bool response);

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
 * Drops the ended streams of s that nobody reads (the standalone stream
 * excepted) once they have lingered long enough or s has too many;
 * force_old drops them all.
 */
void mcp_session_trim_streams(struct session *s, bool force_old);

/*
 * Creates a reader of st that hands out the events after seq cursor. The
 * reader holds a reference on st and on st's session and counts in
 * st->readers. The caller owns it: free with mcp_stream_release(), which
 * takes srv->lock itself and so must be called without it. NULL when out
 * of memory.
 */
struct mcp_stream *mcp_reader_new(struct mcp_server *srv, struct stream *st,
                                  unsigned long long cursor);

/* ------------------------------------------------------------------ */
/* lib/mcp/mcp_session.c: sessions */

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
 * its calls (claiming their hooks for mcp_unlock() to run), ends its
 * streams, wakes its pending requests and drops the table's reference.
 */
void mcp_session_end(struct mcp_server *srv, struct session *s);

/*
 * Drops a reference on s; the last drops the list's reference on each of
 * its streams and queues s to be freed by mcp_unlock().
 */
void mcp_session_unref(struct mcp_server *srv, struct session *s);

/*
 * Frees s. Only mcp_unlock() calls it, without the lock, for a session
 * whose last reference went.
 */
void mcp_session_free(struct session *s);

/*
 * Records who opened s (mcp_http_req.client; copied, NULL for none). Out
 * of memory leaves it unknown: the audit trail then says "".
 */
void mcp_session_set_client(struct session *s, const char *client);

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

struct mcp_meta;

/*
 * Creates the stateless session of one 2026-07-28 request of tenant, with
 * meta's version, capabilities (copied) and log level, linked into
 * srv->stateless (not the table: it has no id and no idle expiry). *out is
 * borrowed as with mcp_session_new(). -EBUSY when tenant already has as
 * many requests in flight as its sessions could have
 * (MCP_MAX_SESSIONS_PER_TENANT times MCP_MAX_INFLIGHT_PER_SESSION),
 * -ENOMEM.
 */
int mcp_session_new_stateless(struct mcp_server *srv, const char *tenant,
                              const struct mcp_meta *meta,
                              struct session **out);

/* ------------------------------------------------------------------ */
/* lib/mcp/mcp_call.c: calls and requests to the client */

/*
 * Marks c cancelled and wakes the session's pending requests; if c has a
 * cancel hook, claims it (hook_busy, on this thread) and queues it for
 * mcp_unlock(), which runs it once the lock is released. Does nothing if c
 * is done or cancelled.
 */
void mcp_call_cancel_locked(struct mcp_call *c);

/*
 * Runs the claimed hooks of the list (linked by hook_next), one after
 * another, then marks each returned. Only mcp_unlock() calls it, without
 * the lock.
 */
void mcp_call_run_hooks(struct mcp_server *srv, struct mcp_call *list);

/*
 * Creates the call of request m (copies of its id, method, params and
 * progress token), not yet attached to a session. Lock NOT needed: call it
 * before taking the lock. Free an unattached call with mcp_call_discard().
 * NULL when out of memory.
 */
struct mcp_call *mcp_call_create(struct mcp_server *srv,
                                 const struct rpc_msg *m);

/* Frees a call that was never attached. Lock not needed. */
void mcp_call_discard(struct mcp_call *c);

/*
 * Attaches c to s (linked into s->calls, holding a reference on s) and to
 * st (st may be NULL), where it counts as a response st still owes. The
 * session owns c until mcp_call_finish().
 */
void mcp_call_attach(struct mcp_call *c, struct session *s, struct stream *st);

/*
 * Finishes c with its response, json (the whole JSON-RPC response text,
 * taken over whatever the result; NULL when memory ran out): waits for a
 * hook of c running on another thread to return, queues the response
 * unless c was cancelled, its session ended or it has no stream, ends a
 * POST stream that owes nothing more, unlinks c, drops its references and
 * frees it. Call WITHOUT the lock: it takes it. c is invalid on return.
 */
void mcp_call_finish(struct mcp_call *c, char *json);

/*
 * Hands the client's response (result and error, either may be NULL;
 * taken over) to the mcp_call_request() waiting for id_key. Returns false
 * when nobody waits for it: result and error are then the caller's still.
 */
bool mcp_deliver_response(struct session *s, const char *id_key, cJSON *result,
                          cJSON *error);

/*
 * Where the messages of c go besides its response: its own stream while
 * that is open, else the session's standalone one. NULL when neither is.
 * Lock held.
 */
struct stream *mcp_call_target(const struct mcp_call *c);

/* ------------------------------------------------------------------ */
/* lib/mcp/mcp_input.c: input from the client */

/*
 * Reads the inputResponses and requestState of a 2026-07-28 request that
 * may ask for input (tools/call, prompts/get, resources/read) before its
 * handler runs: checks their shape, opens and checks the state, and keeps
 * the answers they carry in the call. Returns NULL, or the error answer
 * (-32602) to finish the request with. Does nothing for session requests.
 * Lock NOT held.
 */
char *mcp_input_load(struct mcp_call *c);

/*
 * After the handler: the InputRequiredResult answer when it asked for
 * input that is missing (its result, if any, is then moot), else NULL.
 * Lock NOT held.
 */
char *mcp_input_answer(struct mcp_call *c);

/* Frees the call's multi round-trip state. Lock not needed. */
void mcp_input_discard(struct mcp_call *c);

/* ------------------------------------------------------------------ */
/* lib/mcp/mcp_task.c: calls that run as tasks */

/* Makes message the status message of c's task. Lock NOT held. */
void mcp_task_progress(struct mcp_call *c, const char *message);

/*
 * Records the end of c's task with result (taken over; NULL when the
 * handler failed) and finishes the call. Lock NOT held; c is invalid on
 * return.
 */
void mcp_task_finish(struct mcp_call *c, cJSON *result);

/* mcp_call_input() for a task: waits for tasks/update. Lock NOT held. */
int mcp_task_input(struct mcp_call *c, struct mcp_input *in, size_t n,
                   unsigned timeout_ms);

/*
 * The answers to tasks/get, tasks/update and tasks/cancel (c->answer_code
 * set for errors). Lock NOT held.
 */
char *mcp_task_get(struct mcp_call *c);
char *mcp_task_update(struct mcp_call *c);
char *mcp_task_cancel(struct mcp_call *c);

/* Cancels every running task (shutdown). Lock held. */
void mcp_task_cancel_all(struct mcp_server *srv);

/* ------------------------------------------------------------------ */
/* lib/mcp/mcp_listen.c: subscriptions/listen */

/*
 * Opens a listener on c's stream and queues the acknowledgement. Returns
 * NULL when the call is done (c->no_response set: the stream carries on
 * without it), or the error answer. Lock NOT held.
 */
char *mcp_listen_open(struct mcp_call *c);

/*
 * Ends the listeners of s, with their closing result when the server is
 * stopping. Lock held.
 */
void mcp_listen_drop_session(struct mcp_server *srv, struct session *s);

/* Queues kind's notification on every listener that asked for it. */
void mcp_listen_broadcast(struct mcp_server *srv, enum listen_kind k);

/* ------------------------------------------------------------------ */
/* lib/mcp/mcp_revision.c: what differs between revisions. No lock needed. */

/* Whether v is one of mcp_protocol_versions (a session's versions). */
bool mcp_version_supported(const char *v);

/*
 * Whether a POST with this parsed body is served statelessly under
 * 2026-07-28 (see mcp.h): its body carries params._meta's version key, or
 * it has no Mcp-Session-Id and an MCP-Protocol-Version that names no
 * session-era revision.
 */
bool mcp_revision_is_modern(const struct mcp_http_req *req,
                            const struct rpc_batch *b);

/* What a 2026-07-28 request says about itself (borrowed from its body). */
struct mcp_meta {
	const char *version;
	const cJSON *caps; /* the client's capabilities for this request */
	const cJSON *info; /* clientInfo, or NULL */
	enum mcp_log_level log_level; /* MCP_LOG_OFF without logLevel */
};

/*
 * Checks the envelope of the 2026-07-28 request m (a request): the
 * MCP-Protocol-Version header and params._meta's version agree and name a
 * supported version, the required _meta fields are there, and Mcp-Method,
 * Mcp-Name and the tool's Mcp-Param-* headers mirror the body. Returns 0
 * with *meta filled, or -EINVAL with the error answer in *answer (caller
 * frees; it carries m's id) and its HTTP status in *status.
 */
int mcp_revision_check(const struct mcp_server *srv,
                       const struct mcp_http_req *req, const struct rpc_msg *m,
                       struct mcp_meta *meta, char **answer, int *status);

/* The HTTP status of a stateless request answered with error code. */
int mcp_revision_status(int code);

/* Whether method exists in the revision s speaks. */
bool mcp_revision_method_allowed(const struct session *s, const char *method);

/* {"name": "mcp-sandboxd", ...} (caller owns). */
cJSON *mcp_revision_server_info(void);

/* The server's capabilities, as one era advertises them (caller owns). */
cJSON *mcp_revision_capabilities(const struct mcp_server *srv, bool modern);

/*
 * Whether header parameter k (mcp_server_add_header_param) applies to tool
 * number tool: its input schema has a primitive property of that name.
 */
bool mcp_revision_param_of(const struct mcp_server *srv, size_t tool, size_t k);

/* Adds x-mcp-header annotations to a tools/list entry for s's era. */
void mcp_revision_annotate_tool(const struct mcp_server *srv,
                                const struct session *s, size_t tool,
                                cJSON *entry);

/*
 * Shapes the result of method for s's era, in place, and returns it:
 * 2026-07-28 results get resultType (unless set), caching hints where the
 * revision requires them and serverInfo in _meta. NULL-safe.
 */
cJSON *mcp_revision_shape(const struct session *s, const char *method,
                          cJSON *result);

/*
 * The data of MissingRequiredClientCapabilityError for capability (a
 * capability name, or TASKS_EXTENSION). Caller owns.
 */
cJSON *mcp_revision_missing(const char *capability);

/* Whether caps (a client's capabilities) declare capability. */
bool mcp_revision_client_has(const cJSON *caps, const char *capability);

/* Whether caps declare the MCP Apps extension (mcp_call_client_has_ui). */
bool mcp_revision_client_has_ui(const cJSON *caps);

/* ------------------------------------------------------------------ */
/* lib/mcp/mcp_methods.c: method handlers and dispatch */

/*
 * Hands each message of b to its handler: responses to the pending
 * requests, notifications to their handlers, requests to new calls that
 * are answered here or on a tool thread. Answers go to st, which may be
 * NULL only when b holds nothing to answer. The caller holds a reference on
 * s and on st throughout. Call WITHOUT srv->lock: it takes the lock as
 * needed, and the handlers run without it.
 */
void mcp_process_batch(struct mcp_server *srv, struct session *s,
                       struct stream *st, struct rpc_batch *b);

#endif
