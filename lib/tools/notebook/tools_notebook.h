/* SPDX-License-Identifier: MIT */
/*
 * tools_notebook: every run_code call of a conversation recorded as a
 * notebook cell (notebook.h), the notebook published in /data, its link
 * told once per conversation, and the replay_notebook tool, which runs a
 * conversation's Python cells again in a fresh session and says which
 * cells' outputs differ.
 *
 * Threads: handlers run on the MCP server's tool threads; the caller holds
 * the conversation's workspace lock where a function says so.
 */
#ifndef MCPSD_TOOLS_NOTEBOOK_H
#define MCPSD_TOOLS_NOTEBOOK_H

#include <cjson/cJSON.h>

#include "mcp/mcp.h"
#include "runner.h"
#include "workspace/workspace.h"

/* Registers replay_notebook. r and wm are borrowed for good. */
void tools_notebook_register(struct mcp_server *srv, struct runner *r,
                             struct workspace_mgr *wm);

/* A rendering of the notebook left for after the run's answer. */
struct tools_notebook_later;

/*
 * After a run that ran (not refused, not failed installing): records it
 * as the next cell, rewrites /data/.mcp/notebook.ipynb and, on the
 * conversation's first cell, tells its link in the result's text and
 * structuredContent.notebook_url. Returns the notebook's URL (caller
 * frees) or NULL when it could not be kept (logged; the result is not
 * changed then). Caller holds the workspace lock.
 *
 * With later non-NULL, the cell is recorded now (the record is what the
 * notebook is made of) and the rewrite of the .ipynb, which need not
 * delay the answer, is left in *later (NULL when there is none):
 * tools_notebook_publish_later() does it, with the lock still held. The
 * URL is then told once the cell is recorded; a rewrite that fails is
 * logged and the next run's rewrite writes every cell.
 */
char *tools_notebook_record(struct workspace *ws, const char *conv,
                            const struct runner_request *req,
                            const struct runner_result *res, cJSON *result,
                            struct tools_notebook_later **later);

/*
 * Rewrites the .ipynb left by tools_notebook_record and frees later
 * (NULL: nothing). The workspace must still be open and locked.
 */
void tools_notebook_publish_later(struct tools_notebook_later *later);

#endif
