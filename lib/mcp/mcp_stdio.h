/* SPDX-License-Identifier: MIT */
/*
 * mcp_stdio: the MCP stdio transport (`mcp-sandboxd --stdio`). One local
 * client writes newline-delimited JSON-RPC messages to the daemon's
 * standard input and reads the daemon's messages, one per line, from its
 * standard output; logs stay on standard error.
 *
 * It is a transport over the MCP core like the HTTP ones: it opens one
 * legacy-style session for the tenant STDIO_TENANT (so the same tools,
 * limits, workspaces and sessions rules apply) and feeds it each line as
 * one POST would, copying every event of the session's stream to stdout.
 * Nothing here parses JSON: the core does, and answers a line it cannot
 * parse with a JSON-RPC error, written to stdout like any answer.
 *
 * Threads: two of its own, a reader of stdin and a writer of stdout. When
 * stdin ends (the client closed it, as the MCP specification says a client
 * ends a stdio session), on_eof is called once from the reader thread; the
 * caller then shuts down. mcp_stdio_stop must not be called from on_eof.
 */
#ifndef MCPSD_STDIO_MCP_H
#define MCPSD_STDIO_MCP_H

#include <stddef.h>

struct mcp_server;
struct mcp_stdio;

struct mcp_stdio_opts {
	const char *tenant; /* borrowed, must outlive the transport */
	size_t max_line;    /* longest message accepted, bytes */
	int in_fd, out_fd;
	void (*on_eof)(void *arg);
	void *arg;
};

/*
 * Opens the session and starts both threads. 0, or a negative errno with a
 * message in err (no session: the core refused it, or out of memory).
 */
int mcp_stdio_start(struct mcp_server *srv, const struct mcp_stdio_opts *o,
                    struct mcp_stdio **out, char *err, size_t errlen);

/*
 * Stops reading, lets the writer copy what the session's stream still
 * holds (until the core has closed it, e.g. by mcp_server_close_sessions,
 * or wait_ms passed), joins both threads and frees. NULL-safe.
 */
void mcp_stdio_stop(struct mcp_stdio *t, unsigned wait_ms);

#endif
