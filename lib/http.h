/* SPDX-License-Identifier: MIT */
/*
 * http: the HTTP front on libmicrohttpd. It owns the listening socket,
 * routing, every transport-level check (Host and Origin allow-lists, bearer
 * auth, Accept and Content-Type, header and body limits, slow-client
 * timeouts) and the mapping of failures to HTTP statuses. MCP semantics live
 * in mcp.c; file lookup lives behind the files hook. One thread per
 * connection, so a handler may block (a POST waiting for a quick result, a
 * stream waiting for events) without holding up anyone else.
 */
#ifndef MCPSD_HTTP_H
#define MCPSD_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "config.h"
#include "mcp.h"

struct http_server;

/* A file to serve, filled in by the files hook. */
struct http_file {
	int fd; /* open, regular; the server closes it */
	uint64_t size;
	time_t mtime;
	const char *content_type; /* static string */
	bool inline_ok;           /* raster image or plain text */
	char etag[80];            /* quoted strong validator */
	char filename[256];       /* base name, for Content-Disposition */
};

/*
 * Resolves the part of a /files/ URL after "/files/" (still
 * percent-encoded). Returns 0 with *out filled, or an HTTP status (400,
 * 404, ...) with a message for the client in err.
 */
typedef int (*http_files_fn)(void *data, const char *path,
                             struct http_file *out, char *err, size_t errlen);

/* Adds fields to the /healthz document; returns false if degraded. */
typedef bool (*http_health_fn)(void *data, cJSON *health);

/*
 * Binds the configured address and starts serving. cfg and mcp are
 * borrowed and must outlive the server. On failure returns a negative
 * errno and a message for a person in err.
 */
__attribute__((warn_unused_result)) int
http_server_create(const struct config *cfg, struct mcp_server *mcp,
                   struct http_server **out, char *err, size_t errlen);

/* Hooks; set before traffic arrives. data is borrowed. */
void http_server_set_files(struct http_server *hs, http_files_fn fn,
                           void *data);
void http_server_add_health(struct http_server *hs, http_health_fn fn,
                            void *data);

/* The port actually bound (useful when configured as 0). */
unsigned http_server_port(const struct http_server *hs);

/*
 * Waits up to timeout_ms until no request is in progress (every response
 * sent), so a shutdown does not cut answers already produced. Returns the
 * number still in progress. Open event streams count: end them first
 * (mcp_server_close_sessions).
 */
unsigned http_server_wait_idle(struct http_server *hs, unsigned timeout_ms);

/* Stops serving, closing every connection, and frees. NULL-safe. */
void http_server_destroy(struct http_server *hs);

/* ---- pure helpers, exposed for tests and fuzzing -------------------- */

/*
 * Parses a Range header against a file of size bytes. Returns 1 with
 * [*first, *last] for one satisfiable range, 0 to ignore the header (absent,
 * malformed or several ranges: serve the whole file), -1 when unsatisfiable
 * (416).
 */
int http_parse_range(const char *h, uint64_t size, uint64_t *first,
                     uint64_t *last);

/* Whether an Accept header lists the media type (or a matching wildcard). */
bool http_accepts(const char *accept, const char *type);

/* Whether a Content-Type header is exactly the media type (params ok). */
bool http_media_type_is(const char *content_type, const char *type);

/*
 * Whether a Host or Origin value is allowed by a NULL-terminated list of
 * patterns: exact (case-insensitive), "*" for any, and for origins a
 * trailing ":*" matching any port. is_origin selects origin matching.
 */
bool http_allowed(const char *value, char *const *patterns, bool is_origin);

#endif
