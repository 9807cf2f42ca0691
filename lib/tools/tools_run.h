/* SPDX-License-Identifier: MIT */
/*
 * tools_run: the run_code and list_runners MCP tools. run_code validates
 * its arguments, opens and locks the conversation's workspace (runs of one
 * conversation are serialized: they share /data), runs the code through
 * the runner with client cancellation and progress notifications, and
 * turns the outcome into a CallToolResult whose structuredContent follows
 * the published outputSchema. Descriptions and the language enum come from
 * the discovered runner images, so tools/list shows what is installed.
 *
 * Threads: handlers run on the MCP server's tool threads; all state is
 * borrowed from the runner and the workspace manager, which are
 * thread-safe.
 */
#ifndef MCPSD_TOOLS_RUN_H
#define MCPSD_TOOLS_RUN_H

#include <cjson/cJSON.h>

#include "config/config.h"
#include "mcp/mcp.h"
#include "run/catalog.h"
#include "runner.h"
#include "util/buf.h"
#include "workspace/workspace.h"

/*
 * The key of a warm run's result _meta that holds its timing: {"run_us":
 * the agent's round trip in microseconds} (duration_ms, to the
 * microsecond).
 */
#define TOOLS_RUN_META_TIMING "mcp-sandboxd/timing"

/*
 * Registers run_code, list_runners and check_code (tools_check.h) on srv and
 * makes runner catalog changes send notifications/tools/list_changed. srv, r
 * and wm are borrowed and must outlive the server. Call once per process,
 * before serving starts.
 */
void tools_run_register(struct mcp_server *srv, struct runner *r,
                        struct workspace_mgr *wm);

/*
 * Replicas that each drive their own node's engine: every run takes the
 * conversation's lease first (lib/run/lease.h; l borrowed, must outlive
 * the server). Call before serving starts.
 */
struct lease;
void tools_run_set_lease(struct lease *l);

/*
 * The CallToolResult of a finished run (caller owns; NULL on allocation
 * failure): structuredContent per the outputSchema, a readable text block,
 * and isError unless the program exited 0. Every run_code outcome is built
 * here, so later additions (a files manifest) have one place to go.
 */
cJSON *tools_run_result(const struct runner_result *res,
                        const struct config *cfg);

/* The published schemas of run_code (static JSON text). */
extern const char tools_run_output_schema[];
extern const char tools_run_input_schema[];

/*
 * run_code's description and input schema for the runners installed now
 * and the settings (caller owns both outputs). For tools/list.
 */
void tools_run_describe(struct runner *runner, char **description,
                        cJSON **input_schema);

/*
 * Whether runs on runner may ask for packages: SANDBOX_PACKAGES, and a
 * backend that can install them (BACKEND_CAN_PACKAGES).
 */
bool tools_run_packages_on(struct runner *runner);

/* Appends the "Languages:" list of cat to b. 0 or a buf error. */
__attribute__((warn_unused_result)) int
tools_run_describe_runners(struct buf *b, const struct catalog *cat,
                           bool packages);

#endif
