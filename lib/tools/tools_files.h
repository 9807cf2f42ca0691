/* SPDX-License-Identifier: MIT */
/*
 * tools_files: the MCP face of workspaces. Tools upload_file, list_files and
 * delete_file, and a resource provider with the template
 * sandbox://{conversationId}/{path} (resources/read also accepts the public
 * file URL of a file). Every argument is validated before anything is
 * touched, and every bad input gets an isError result that says what was
 * wrong and what to do; unknown argument keys are ignored.
 *
 * Threads: handlers run on the server's tool threads; state lives in the
 * workspace manager, which is thread-safe.
 */
#ifndef MCPSD_TOOLS_FILES_H
#define MCPSD_TOOLS_FILES_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "mcp/mcp.h"
#include "workspace/workspace.h"

/*
 * Registers the three tools and the resource provider with srv. mgr is
 * borrowed and must outlive srv. Call once, before serving starts (the
 * tables are static: one registered manager per process).
 */
void tools_files_register(struct mcp_server *srv, struct workspace_mgr *mgr);

/*
 * The tool implementations with the tenant passed explicitly, for tests
 * and for callers without an mcp_call. Each returns a CallToolResult
 * (caller owns) or NULL on allocation failure.
 */
cJSON *tools_files_upload(struct workspace_mgr *mgr, const char *tenant,
                          const cJSON *args);
cJSON *tools_files_list(struct workspace_mgr *mgr, const char *tenant,
                        const cJSON *args);
cJSON *tools_files_delete(struct workspace_mgr *mgr, const char *tenant,
                          const cJSON *args);

/*
 * resources/read for tenant: returns 0 and a "contents" array (caller
 * owns), -ENOENT when uri is not a workspace file URI or names no file (err
 * says which), or -EINVAL with what is wrong in err.
 */
__attribute__((warn_unused_result)) int
tools_files_read_resource(struct workspace_mgr *mgr, const char *tenant,
                          const char *uri, cJSON **contents, char *err,
                          size_t errlen);

#endif
