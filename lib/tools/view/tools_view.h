/* SPDX-License-Identifier: MIT */
/*
 * tools_view: the run viewer, an MCP App (the io.modelcontextprotocol/ui
 * extension). It serves the view (ui://mcp-sandboxd/run-viewer.html,
 * text/html;profile=mcp-app, a CSP with no outside origin) as a resource,
 * registers view_table (an app-only tool: the view pages and sorts the last
 * value's data frame through it, and the model never sees those pages), and
 * adds to run_code's result, for clients that render Apps only, what the
 * view needs in _meta. Clients without Apps support see none of it: not the
 * resource, not the tool, not the _meta.
 *
 * Threads: handlers run on the MCP server's threads; no state of its own
 * besides the borrowed workspace manager.
 */
#ifndef MCPSD_TOOLS_VIEW_H
#define MCPSD_TOOLS_VIEW_H

#include <time.h>

#include <cjson/cJSON.h>

#include "mcp/mcp.h"
#include "workspace/workspace.h"

#define TOOLS_VIEW_URI "ui://mcp-sandboxd/run-viewer.html"
/* run_code's _meta, listed to Apps clients only (tool_impl.ui_meta). */
#define TOOLS_VIEW_TOOL_META                                                   \
	"{\"ui\":{\"resourceUri\":\"" TOOLS_VIEW_URI "\"},"                    \
	"\"ui/resourceUri\":\"" TOOLS_VIEW_URI "\"}"
#define TOOLS_VIEW_TABLES_KEPT 8 /* saved frames a conversation keeps */

/* Registers the resource and view_table. wm is borrowed for good. */
void tools_view_register(struct mcp_server *srv, struct workspace_mgr *wm);

/*
 * For a client that renders Apps, after a run: keeps the data frame the
 * kernel saved (.mcp/value.json, written after started) as a table the
 * view can page, and adds result._meta["mcp-sandboxd/view"]
 * {"conversationId", "table": {"id"}?, "notebook_url"?}. Caller holds the
 * workspace lock. Failures leave the result as it is.
 */
void tools_view_annotate(struct workspace *ws, const char *conv, time_t started,
                         bool has_value, const char *notebook_url,
                         cJSON *result);

#endif
