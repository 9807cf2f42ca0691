/* SPDX-License-Identifier: MIT */
/*
 * tools_audit: the tools' side of the audit trail and usage (audit/):
 * tools_audit_run turns a finished run of run_code, check_code or a
 * notebook replay into an audit entry and a usage row, and the `usage`
 * tool lets a tenant read its own usage (the caller's tenant only: no
 * argument names another). The operator reads everyone's through
 * /admin/usage (audit_http.h).
 *
 * Threads: the trail is set once before serving (tools_audit_register)
 * and never changes; recording and the tool run on the MCP server's tool
 * threads, and audit/ is thread-safe.
 */
#ifndef MCPSD_TOOLS_AUDIT_H
#define MCPSD_TOOLS_AUDIT_H

#include <cjson/cJSON.h>

#include "audit/audit.h"
#include "mcp/mcp.h"
#include "run/request.h"

/*
 * Records runs from now on into a (borrowed; must outlive the server) and
 * registers the `usage` tool on srv. Call once, before serving starts;
 * without it runs are not recorded.
 */
void tools_audit_register(struct mcp_server *srv, struct audit *a);

/*
 * Records one finished run (runner_run returned >= 0) of tool for the
 * caller of call in conversation conv ("" for none). result is the run's
 * CallToolResult (its structuredContent's files and workspace size are
 * taken from it) or NULL. Failures are logged, never returned: a run's
 * answer does not depend on its record.
 */
void tools_audit_run(struct mcp_call *call, const char *tool, const char *conv,
                     const struct runner_request *req,
                     const struct runner_result *res, const cJSON *result);

/*
 * As tools_audit_run, for a run whose answer goes out first: the entry is
 * built now and returned (NULL: none, e.g. no audit), to be written with
 * audit_write() after the answer; readers of the trail and the usage wait
 * for it meanwhile.
 */
struct audit_pending *tools_audit_prepare(struct mcp_call *call,
                                          const char *tool, const char *conv,
                                          const struct runner_request *req,
                                          const struct runner_result *res,
                                          const cJSON *result);

#endif
