/* SPDX-License-Identifier: MIT */
/*
 * mcp: the Model Context Protocol server core, independent of HTTP and of
 * any tool. It owns sessions (id, tenant, negotiated version, client
 * capabilities, log level), the event streams that carry server messages to
 * a client (SSE bodies, with ids for resumption), in-flight requests with
 * their cancellation, and server-to-client requests. Tools, resources and
 * prompts register through the tables below; the transport (http.c) only
 * hands in request bodies and drains streams.
 *
 * Threads: every function here is thread-safe. Tool handlers run on their
 * own threads and may block for minutes; everything else returns quickly.
 * One mutex guards all session state, with a condition variable per waiter;
 * it is held only for bookkeeping, never while a message is serialized or
 * copied out, nor while a handler or a cancel hook runs.
 */
#ifndef MCPSD_MCP_H
#define MCPSD_MCP_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include <cjson/cJSON.h>

#include "config/config.h"
#include "util/cron.h"

struct mcp_server;
struct mcp_call;
struct mcp_stream;

/* ---- what tools, resources and prompts provide -------------------- */

/*
 * Whether a tool's calls may run as tasks (the io.modelcontextprotocol/tasks
 * extension of protocol 2026-07-28): a task answers the request at once with
 * a task id and keeps running on its thread after the HTTP request is over;
 * the client polls tasks/get for its state and result.
 */
enum mcp_task_support {
	MCP_TASK_NEVER = 0, /* always answered in the request */
	/* A task when the request's client declares the extension. */
	MCP_TASK_OPTIONAL,
	/* Only as a task: a client without the extension gets -32021. */
	MCP_TASK_REQUIRED,
};

/*
 * One tool. All strings are static or live as long as the server. The
 * handler returns a CallToolResult object (caller takes ownership). A failure
 * the model can act on (bad argument values, a failed run) is a result with
 * "isError": true and a text saying what to do; NULL means an internal
 * failure and becomes JSON-RPC error -32603.
 */
struct tool_impl {
	const char *name;
	const char *title;
	const char *description;
	const char *input_schema;  /* JSON text, root "type": "object" */
	const char *output_schema; /* JSON text or NULL */
	bool read_only, destructive, idempotent, open_world;
	/*
	 * Optional: fills in the description and/or input schema at list time
	 * from current state (e.g. discovered runners). Either output may be
	 * left NULL to keep the static one. Outputs are owned by the caller.
	 */
	void (*describe)(void *data, char **description, cJSON **input_schema);
	cJSON *(*call)(void *data, struct mcp_call *call, const cJSON *args);
	void *data;
	enum mcp_task_support tasks;
	/*
	 * With tasks: the core does not make the call a task before the
	 * handler runs; the handler calls mcp_call_become_task() once it has
	 * what it needs (e.g. after asking the client for input).
	 */
	bool task_deferred;
	/*
	 * MCP Apps (the io.modelcontextprotocol/ui extension). ui_meta, the
	 * JSON text of the tool's _meta (e.g. {"ui":{"resourceUri":
	 * "ui://..."}}), is listed only to clients that declare the extension
	 * (mcp_call_client_has_ui), so others see exactly the tool they saw
	 * before. A ui_only tool is for views, which call it through their
	 * host: it is listed to, and callable by, such clients only.
	 */
	const char *ui_meta;
	bool ui_only;
};

/*
 * A source of resources. read returns 0 and a "contents" array (caller
 * owns), -ENOENT when the URI is not this provider's (the next is asked),
 * or another negative errno with a message in err for the client.
 */
struct resource_provider {
	const char *name;
	/* Appends Resource objects to list. Optional. */
	void (*list)(void *data, struct mcp_call *call, cJSON *list);
	/* Appends ResourceTemplate objects to list. Optional. */
	void (*templates)(void *data, cJSON *list);
	int (*read)(void *data, struct mcp_call *call, const char *uri,
	            cJSON **contents, char *err, size_t errlen);
	void *data;
};

/*
 * A prompt. arguments_json is a JSON array of PromptArgument. get returns a
 * GetPromptResult (caller owns) or NULL with a message in err (-32602).
 */
struct prompt_impl {
	const char *name;
	const char *title;
	const char *description;
	const char *arguments_json;
	cJSON *(*get)(void *data, struct mcp_call *call, const cJSON *args,
	              char *err, size_t errlen);
	void *data;
};

/*
 * completion/complete: returns a "values" array (caller owns) for the
 * reference and argument, or NULL for no suggestions.
 */
typedef cJSON *(*mcp_complete_fn)(void *data, const cJSON *ref,
                                  const cJSON *argument, const cJSON *context);

/* ---- the server ---------------------------------------------------- */

/*
 * Creates a server. cfg is borrowed and must outlive it. Caller owns; free
 * with mcp_server_destroy. NULL on allocation failure.
 */
struct mcp_server *mcp_server_create(const struct config *cfg);

/*
 * Housekeeping (cron.h, every MCP_SWEEP_INTERVAL_MS): ends sessions idle
 * for MCP_SESSION_IDLE_SECONDS and frees ended streams nobody reads.
 */
enum cron_next mcp_job_sweep(void *srv, long long deadline_ms);

/*
 * Replicas (cron.h, every MCP_TASK_CANCELS_INTERVAL_MS): stops the tasks of
 * this replica that a client cancelled through another replica (their
 * marks in the shared store), TASKS_MAX_CANCELS a run: CRON_MORE after a
 * full batch.
 */
enum cron_next mcp_job_task_cancels(void *srv, long long deadline_ms);
#define MCP_TASK_CANCELS_INTERVAL_MS 1000
#define MCP_SWEEP_INTERVAL_MS 5000

/* Ends every session and frees the server. NULL-safe. */
void mcp_server_destroy(struct mcp_server *srv);

/*
 * Registration, before serving starts. The tables are borrowed and must
 * outlive the server. Order of registration is the order of listing.
 */
void mcp_server_add_tool(struct mcp_server *srv, const struct tool_impl *t);
void mcp_server_add_resources(struct mcp_server *srv,
                              const struct resource_provider *p);
void mcp_server_add_prompt(struct mcp_server *srv, const struct prompt_impl *p);
void mcp_server_set_completion(struct mcp_server *srv, mcp_complete_fn fn,
                               void *data);
/* Text for InitializeResult.instructions (borrowed). */
void mcp_server_set_instructions(struct mcp_server *srv, const char *text);

/*
 * Mirrors the tool argument named property into the request header
 * Mcp-Param-<header> (2026-07-28, SEP-2243): every tool whose input schema
 * has a top-level string, integer or boolean property of that name lists it
 * with "x-mcp-header": header to 2026-07-28 clients, which then send the
 * value as a header too, and the server refuses a call whose header and
 * argument disagree. A load balancer can then route by that argument (e.g.
 * conversationId) without reading bodies. Both strings are borrowed and must
 * outlive the server; header must be an HTTP token. At most 4.
 */
void mcp_server_add_header_param(struct mcp_server *srv, const char *property,
                                 const char *header);

struct tasks;

/*
 * Offers the tasks extension to 2026-07-28 clients, with t (borrowed; it
 * must outlive the server) keeping the tasks' state and results. Without
 * it, no call becomes a task.
 */
void mcp_server_set_tasks(struct mcp_server *srv, struct tasks *t);

/*
 * Tells every client listening for it that tools/list changed (discovery
 * found a runner): sessions' standalone streams, and subscriptions/listen
 * streams that asked for toolsListChanged.
 */
void mcp_server_tools_changed(struct mcp_server *srv);

/* The same for prompts/list (promptsListChanged). */
void mcp_server_prompts_changed(struct mcp_server *srv);

/*
 * Starts draining: new tools/call requests get an error result saying the
 * server is shutting down; waits up to timeout_ms for running calls to end.
 * Returns the number of calls still running.
 */
unsigned mcp_server_drain(struct mcp_server *srv, unsigned timeout_ms);

/*
 * Ends every session, which ends every open event stream, so connections
 * blocked on them return. Used at shutdown before the HTTP server stops.
 */
void mcp_server_close_sessions(struct mcp_server *srv);

/* Counters for /healthz. */
struct mcp_stats {
	unsigned sessions;
	unsigned streams_open;
	unsigned calls_running;   /* not answered yet */
	unsigned calls_finishing; /* answered, their after-work running */
	unsigned long long calls_total;
};
void mcp_server_stats(struct mcp_server *srv, struct mcp_stats *out);

/* ---- the transport's side ------------------------------------------ */

struct mcp_http_req {
	const char *tenant; /* authenticated tenant (borrowed) */
	/*
	 * Who within the tenant, for the audit trail: "oauth:<client_id>",
	 * "token:<fingerprint>", "none", "stdio"; NULL: "".
	 */
	const char *client;
	const char *session_id; /* Mcp-Session-Id or ?sessionId=, or NULL */
	const char *protocol_version; /* MCP-Protocol-Version or NULL */
	const char *last_event_id;    /* Last-Event-ID or NULL */
	const char *body;
	size_t body_len;
	/*
	 * Any other request header by name (compared without regard to
	 * case), or NULL when absent: the 2026-07-28 revision mirrors body
	 * fields into Mcp-Method, Mcp-Name and Mcp-Param-* headers, which the
	 * core checks against the body. Called during mcp_http_post() only,
	 * with hctx; the value is borrowed until the call returns. A
	 * transport without one (NULL) has every such header absent.
	 */
	const char *(*header)(void *hctx, const char *name);
	void *hctx;
};

struct mcp_http_resp {
	int status;                /* HTTP status */
	char *body;                /* owned JSON text or NULL (empty body) */
	char session_id[80];       /* Mcp-Session-Id to send, "" for none */
	struct mcp_stream *stream; /* owned reference: answer as SSE */
	unsigned retry_after;      /* seconds, 0 for none */
};

/* Streamable HTTP: POST, GET and DELETE on the MCP endpoint. */
void mcp_http_post(struct mcp_server *srv, const struct mcp_http_req *req,
                   struct mcp_http_resp *resp);
void mcp_http_get(struct mcp_server *srv, const struct mcp_http_req *req,
                  struct mcp_http_resp *resp);
void mcp_http_delete(struct mcp_server *srv, const struct mcp_http_req *req,
                     struct mcp_http_resp *resp);

/*
 * Legacy HTTP+SSE: GET /sse opens a session and its stream (the first event
 * names endpoint_path, e.g. "/messages"); POST to that path with
 * ?sessionId= answers 202 and sends the reply on the stream.
 */
void mcp_http_sse_open(struct mcp_server *srv, const struct mcp_http_req *req,
                       const char *endpoint_path, struct mcp_http_resp *resp);
void mcp_http_sse_post(struct mcp_server *srv, const struct mcp_http_req *req,
                       struct mcp_http_resp *resp);

/*
 * How a POST is served is decided per request by the revision it names:
 * one that carries the 2026-07-28 per-request metadata (the
 * io.modelcontextprotocol/protocolVersion key of params._meta, or an
 * MCP-Protocol-Version header naming no earlier revision, without an
 * Mcp-Session-Id) is served statelessly under 2026-07-28 rules; anything
 * else goes to the session it names, or starts one with initialize, under
 * the rules of the revision that session negotiated.
 */

/* Frees what a response holds (body, stream reference). */
void mcp_http_resp_finish(struct mcp_http_resp *resp);

/*
 * Reads SSE text from a stream into buf. Blocks up to wait_ms for an
 * event. Returns bytes written (> 0), 0 when nothing came in time (the
 * caller decides about keep-alive comments), or -1 at the end of the
 * stream. Only one reader at a time.
 */
ssize_t mcp_stream_read(struct mcp_stream *st, char *buf, size_t max,
                        unsigned wait_ms);

/* The transport is done with the stream (response sent or client gone). */
void mcp_stream_release(struct mcp_stream *st);

/* ---- what a request handler may do -------------------------------- */

enum mcp_log_level {
	MCP_LOG_DEBUG = 0,
	MCP_LOG_INFO,
	MCP_LOG_NOTICE,
	MCP_LOG_WARNING,
	MCP_LOG_ERROR,
	MCP_LOG_CRITICAL,
	MCP_LOG_ALERT,
	MCP_LOG_EMERGENCY,
};

/* The authenticated tenant (borrowed, valid during the call). */
const char *mcp_call_tenant(const struct mcp_call *call);

/*
 * Who within the tenant opened the call's session (mcp_http_req.client;
 * borrowed, valid during the call, "" when unknown).
 */
const char *mcp_call_client(const struct mcp_call *call);

/* MCP Apps: the extension's key and the media type of its views. */
#define MCP_UI_EXTENSION "io.modelcontextprotocol/ui"
#define MCP_UI_MIME "text/html;profile=mcp-app"

/*
 * Whether the request's client renders MCP Apps: its capabilities declare
 * extensions["io.modelcontextprotocol/ui"] with MCP_UI_MIME among its
 * mimeTypes.
 */
bool mcp_call_client_has_ui(const struct mcp_call *call);
/*
 * The protocol version of the request: the one its session negotiated, or
 * the one it named itself (2026-07-28). Borrowed, valid during the call.
 */
const char *mcp_call_protocol_version(const struct mcp_call *call);
/*
 * The client's declared capabilities object (borrowed; may be NULL): the
 * session's, or the request's own under 2026-07-28.
 */
const cJSON *mcp_call_client_capabilities(const struct mcp_call *call);

/* Whether the client cancelled this request (notifications/cancelled). */
bool mcp_call_cancelled(const struct mcp_call *call);

/*
 * Registers fn(arg) to run once when the request is cancelled: by
 * notifications/cancelled, or because its session ends (DELETE, a legacy
 * stream closing, shutdown). A new registration replaces the previous one.
 *
 * Where fn runs: on the thread that cancels, after it has released the
 * server's lock, so fn delays no HTTP request but the one that cancelled
 * (other sessions, and other requests of its own session, go on). If the
 * request is already cancelled when fn is
 * registered, fn runs at once on the registering thread, before
 * mcp_call_on_cancel returns. At most one hook of a request runs at a time.
 *
 * What fn may do: block for a short while (up to a few seconds, e.g. to
 * ask the Docker engine to stop a container and wait for it): the thread
 * that cancels is an HTTP connection (or the shutdown path) that answers
 * only when its hooks have returned, one after another for the requests of
 * a session that ends. It may call the mcp_call_* functions of its own
 * request (mcp_call_on_cancel(call, NULL) from inside fn returns at once).
 * It must not wait for the thread that runs the request's handler (join
 * it, wait on a condition it signals or a lock it holds while it calls
 * mcp_call_on_cancel or returns from the handler): that thread may itself
 * be waiting for fn to return, and the two would deadlock.
 *
 * Pass fn NULL to unregister: after that returns, fn is not running and
 * will not run; if it is running on another thread, this waits for it to
 * return. A handler's return waits for a running fn in the same way, so a
 * hook never outlives its request.
 */
void mcp_call_on_cancel(struct mcp_call *call, void (*fn)(void *arg),
                        void *arg);

/*
 * Registers fn(arg) to run once the tool's answer has been queued for the
 * client (or, for a task, recorded): work that must happen but need not
 * delay the answer (the notebook's copy in /data). It runs on the tool's
 * own thread, after the handler returned and after the request was freed
 * (so fn must not use call), before the server counts the call as ended:
 * a shutdown's drain waits for it. Only from a tools/call handler, at most
 * once; a second registration replaces the first. What fn needs it owns
 * (arg): nothing of the handler's stack outlives the handler.
 */
void mcp_call_after(struct mcp_call *call, void (*fn)(void *arg), void *arg);

/*
 * Whether progress reaches anyone: the request carried a progress token,
 * or the call runs as a task (whose status message is the latest progress
 * message).
 */
bool mcp_call_has_progress(const struct mcp_call *call);

/*
 * Sends notifications/progress (nothing without a progress token); for a
 * task, makes message its status message instead. total < 0 omits it;
 * message may be NULL. progress must increase.
 */
int mcp_call_progress(struct mcp_call *call, double progress, double total,
                      const char *message);

/*
 * Sends notifications/message when level is at or above the session's
 * level. Takes ownership of data (any JSON value; NULL means null).
 */
int mcp_call_log(struct mcp_call *call, enum mcp_log_level level,
                 const char *logger, cJSON *data);

/*
 * Input from the client (elicitation/create, sampling/createMessage,
 * roots/list): what to ask, and the answer. How it travels depends on the
 * request's revision, and the handler need not know:
 *  - a session (2025-11-25 and earlier): server-to-client requests on the
 *    request's stream, answered by the client's responses;
 *  - 2026-07-28 (multi round-trip requests, SEP-2322): the request is
 *    answered with an InputRequiredResult listing what is missing, and the
 *    client calls again with the answers (inputResponses) and the opaque,
 *    integrity-protected requestState the server handed out, which carries
 *    the answers of earlier rounds. The handler runs again from the start
 *    on each round and gets the answers it has so far, so it must ask in
 *    the same order with the same keys each time, and must not do anything
 *    it cannot repeat before it has all its input;
 *  - a task (2026-07-28 tasks extension): the task shows input_required
 *    with the questions until the client answers them with tasks/update.
 */
struct mcp_input {
	/*
	 * A name unique within the request (SEP-2322 "inputRequests" key),
	 * or NULL for one made from the position of the question.
	 */
	const char *key;
	const char *method; /* static */
	cJSON *params;      /* taken over by mcp_call_input() */
	cJSON *result;      /* out: the answer (caller owns), or NULL */
	cJSON *error;       /* out: an error response (caller owns), or NULL */
};

/*
 * Asks the client the n questions of in at once and waits up to timeout_ms
 * for every answer. Returns 0 with each in[i].result set; -EPROTO when some
 * answers are error responses (their in[i].error set, the others' results
 * set); -ETIMEDOUT, -ECANCELED (the request was cancelled) or -ENOTCONN (its
 * session ended); -EAGAIN under 2026-07-28 when the answers are not all
 * there yet: return from the handler at once (its result is discarded and
 * the request is answered with what is missing); -EOPNOTSUPP under
 * 2026-07-28 when the client did not declare the capability a question
 * needs: returning NULL from the handler then answers the request with
 * MissingRequiredClientCapabilityError (-32021), while a result (a degraded
 * answer) is sent as it is. Takes ownership of every in[i].params.
 */
__attribute__((warn_unused_result)) int mcp_call_input(struct mcp_call *call,
                                                       struct mcp_input *in,
                                                       size_t n,
                                                       unsigned timeout_ms);

/*
 * One question (see mcp_call_input) with an automatic key. Returns 0 with
 * *result (caller owns) on a result, -EPROTO with *error (caller owns) on an
 * error response, or mcp_call_input's other errors.
 */
__attribute__((warn_unused_result)) int
mcp_call_request(struct mcp_call *call, const char *method, cJSON *params,
                 unsigned timeout_ms, cJSON **result, cJSON **error);

/*
 * Makes this tools/call a task now, if it can be one: the tool allows
 * tasks, the request is a 2026-07-28 request whose client declared the
 * tasks extension, and the server offers it. The request is answered at
 * once with the task (CreateTaskResult, once it is durably recorded); the
 * handler goes on and its result becomes the task's. Returns whether the
 * call is a task (also when it already was). For tools with task_deferred;
 * the others are made tasks before their handler runs.
 */
bool mcp_call_become_task(struct mcp_call *call);

/*
 * Ends the HTTP response currently carrying this request's event stream
 * without ending the request (SEP-1699 polling): the client reconnects with
 * GET and Last-Event-ID after retry_ms and receives what follows, including
 * the result. Only for Streamable HTTP sessions on 2025-11-25 or later;
 * elsewhere it does nothing.
 */
void mcp_call_close_stream(struct mcp_call *call, unsigned retry_ms);

/* ---- helpers for building results --------------------------------- */

/* {"content":[{"type":"text","text":text}],"isError":is_error}; NULL on OOM */
cJSON *mcp_text_result(const char *text, bool is_error);

/* Same with printf formatting. */
cJSON *mcp_text_resultf(bool is_error, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/*
 * Names of the protocol versions a session can negotiate with initialize,
 * newest first, NULL-ended.
 */
extern const char *const mcp_protocol_versions[];

/* The stateless revision, served per request without a session. */
#define MCP_MODERN_VERSION "2026-07-28"

#endif
