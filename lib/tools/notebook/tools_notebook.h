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

/*
 * How often the copy in /data is rewritten at most per conversation while
 * runs follow one another quickly (workspace_defer): the first run after a
 * quiet second rewrites it at once, the others leave it to the
 * housekeeping job or to a download, whichever comes first.
 */
#define TOOLS_NOTEBOOK_REWRITE_MS 1000

/*
 * After a run that ran (not refused, not failed installing): records it
 * as the next cell, brings /data/.mcp/notebook.ipynb up to date and, on
 * the conversation's first cell, tells its link in the result's text and
 * structuredContent.notebook_url. Returns the notebook's URL (caller
 * frees) or NULL when it could not be kept (logged; the result is not
 * changed then). Caller holds the workspace lock.
 *
 * With later non-NULL, the cell is recorded now (the record is what the
 * notebook is made of) and *later says whether the copy in /data is left
 * for after the answer: tools_notebook_publish_later() then, with the
 * lock still held.
 */
char *tools_notebook_record(struct workspace *ws, const char *conv,
                            const struct runner_request *req,
                            const struct runner_result *res, cJSON *result,
                            bool *later);

/*
 * Rewrites the copy in /data now, or within TOOLS_NOTEBOOK_REWRITE_MS when
 * it was rewritten less than that ago (workspace_defer). ws must be open by
 * the conversation id and locked.
 */
void tools_notebook_publish_later(struct workspace *ws);

#endif
