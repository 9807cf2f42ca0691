/* SPDX-License-Identifier: MIT */
/*
 * tools_check: the check_code MCP tool. It runs the language's syntax
 * checker (the runner image's sandbox.check label, catalog.h) on the code
 * in a one-off sandbox with the usual hardening and limits, no network
 * and no /data, for at most RUN_ARGUMENTS_CHECK_TIMEOUT_S; the code itself is
 * never run. The checker's output is parsed by check_output.h into
 * structuredContent {ok, language, errors: [{line, column?, message}],
 * checker}, and the text names the first error's line and message.
 *
 * Threads: the handler runs on the MCP server's tool threads; all state is
 * borrowed from the runner, which is thread-safe.
 */
#ifndef MCPSD_TOOLS_CHECK_H
#define MCPSD_TOOLS_CHECK_H

#include <cjson/cJSON.h>

#include "mcp/mcp.h"
#include "runner.h"

/*
 * Registers check_code on srv. srv and r are borrowed and must outlive the
 * server. Call once per process, before serving starts.
 */
void tools_check_register(struct mcp_server *srv, struct runner *r);

/*
 * The CallToolResult of a finished check (caller owns; NULL on allocation
 * failure). filename is the code file's name in the sandbox (what the
 * checker's messages name), checker says which tool checked ("gcc (c
 * 12.2.0)"). A checker that exited 0 means ok; one that exited otherwise
 * means errors, located where its output says; a check that did not end
 * by itself (time limit, memory, engine trouble) is an isError result.
 */
cJSON *tools_check_result(const struct runner_result *res, const char *filename,
                          const char *checker);

/* The published output schema of check_code (static JSON text). */
extern const char tools_check_output_schema[];

#endif
