/* SPDX-License-Identifier: MIT */
/*
 * rpc: the JSON-RPC 2.0 envelope. A body is first scanned without recursion
 * (grammar, strict UTF-8, nesting depth, no NUL in strings) before cJSON sees
 * it, so hostile nesting cannot exhaust the stack. The scan also keeps the
 * exact text of every top-level "id", because cJSON turns numbers into
 * doubles and an id must go back exactly as it came. Stateless and
 * thread-safe.
 */
#ifndef MCPSD_RPC_H
#define MCPSD_RPC_H

#include <stdbool.h>
#include <stddef.h>

#include <cjson/cJSON.h>

/* JSON-RPC and MCP error codes. */
#define RPC_PARSE_ERROR -32700
#define RPC_INVALID_REQUEST -32600
#define RPC_METHOD_NOT_FOUND -32601
#define RPC_INVALID_PARAMS -32602
#define RPC_INTERNAL_ERROR -32603
#define RPC_RESOURCE_NOT_FOUND -32002
#define RPC_REQUEST_CANCELLED -32800

#define RPC_MAX_BATCH 64

/* Result of the pre-parse scan of one body. */
struct rpc_scan {
	bool is_array;
	size_t n_items; /* top-level items (1 for an object) */
	/* For each item: the id's text span, or len 0 if absent. */
	struct {
		size_t off, len;
	} ids[RPC_MAX_BATCH];
	size_t err_offset; /* where scanning failed */
	const char *err;   /* static description when failed */
};

/*
 * Scans s[0..n). Returns 0, -EINVAL (malformed: out->err says why), -E2BIG
 * (deeper than max_depth or a batch of more than RPC_MAX_BATCH items).
 */
__attribute__((warn_unused_result)) int
rpc_scan(const char *s, size_t n, unsigned max_depth, struct rpc_scan *out);

enum rpc_kind {
	RPC_KIND_INVALID = 0,
	RPC_KIND_REQUEST,
	RPC_KIND_NOTIFICATION,
	RPC_KIND_RESPONSE, /* result or error from the client */
};

struct rpc_msg {
	enum rpc_kind kind;
	cJSON *obj;         /* borrowed from the batch root */
	const char *method; /* borrowed; requests and notifications */
	cJSON *params;      /* borrowed; may be NULL */
	char *id_raw;       /* owned; exact JSON text of the id, NULL if none */
	char *id_key;     /* owned; canonical id ("s:<text>" or "n:<digits>") */
	int invalid_code; /* for RPC_KIND_INVALID */
	const char *invalid_msg; /* static */
};

struct rpc_batch {
	cJSON *root; /* owned */
	bool is_array;
	size_t n;
	struct rpc_msg msgs[RPC_MAX_BATCH];
};

/*
 * Parses a body into messages. On -EINVAL or -E2BIG the body as a whole is
 * unusable: *code and *msg say what to answer (-32700 or -32600) and nothing
 * needs finishing. On 0 the batch must be released with rpc_batch_finish.
 * Individual invalid items come back as RPC_KIND_INVALID.
 */
__attribute__((warn_unused_result)) int rpc_parse(const char *body, size_t len,
                                                  unsigned max_depth,
                                                  struct rpc_batch *out,
                                                  int *code, const char **msg);

/* Frees what rpc_parse allocated. NULL-safe. */
void rpc_batch_finish(struct rpc_batch *b);

/*
 * Canonical key of an id given as cJSON (string or integral number), for
 * matching notifications/cancelled requestId against in-flight requests.
 * Caller frees; NULL if the value is not a valid id.
 */
char *rpc_id_key(const cJSON *id);

/*
 * Message builders. Each returns a newly allocated JSON text (free with
 * free()) or NULL on allocation failure, and takes ownership of every cJSON
 * argument whatever the result. id_raw NULL means "id": null.
 */
char *rpc_result(const char *id_raw, cJSON *result);
char *rpc_error(const char *id_raw, int code, const char *message, cJSON *data);
/*
 * An error response whose message is printf-formatted (cut at 511 bytes),
 * with no data: the one way the server words an error for a client.
 */
char *rpc_errorf(const char *id_raw, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
char *rpc_notification(const char *method, cJSON *params);
char *rpc_request(const char *id_raw, const char *method, cJSON *params);

#endif
