/* SPDX-License-Identifier: MIT */
/*
 * tools_content: the parts of tool results that show what is in a
 * workspace: resource_link items for files, inline image items, the usage
 * object. Storage (workspace.h) knows nothing of MCP; the tools build
 * what a client sees here. Stateless and thread-safe.
 */
#ifndef MCPSD_TOOLS_CONTENT_H
#define MCPSD_TOOLS_CONTENT_H

#include <cjson/cJSON.h>

#include "workspace/workspace.h"

/*
 * What the tools' input schemas say of conversationId (plain text without
 * quotes: it goes into JSON schemas as a literal). Every tools/list carries
 * it, so it says only what a model needs to call right. The first is for
 * tools that may open a conversation (run_code, upload_file), the second
 * for those that need an existing one.
 */
#define TOOLS_CONV_DESCRIPTION                                                 \
	"Unique to one chat: omit it on the chat's first call, then pass "     \
	"the id the result returns"
#define TOOLS_CONV_KNOWN_DESCRIPTION                                           \
	"Unique to one chat, as run_code returned it"

/*
 * {"bytesUsed", "bytesQuota", "files", "filesQuota", "enforced", "over"}
 * (caller owns; NULL on allocation failure).
 */
cJSON *tools_content_usage(const struct workspace_usage *u);

/*
 * Appends to the content array one "resource_link" item per entry of
 * files (as made by workspace_changes): {"type": "resource_link", "uri":
 * url, "name", "title": "/data/...", "mimeType", "size"}. Returns 0 or
 * -ENOMEM.
 */
__attribute__((warn_unused_result)) int tools_content_links(cJSON *content,
                                                            const cJSON *files);

/*
 * Appends to content an "image" item (base64 data and mimeType) for each of
 * the first max_images entries of files that is a PNG, JPEG, GIF or WebP
 * by name and by its first bytes, and no larger than
 * INLINE_IMAGE_MAX_BYTES. Files are read through the same safe open path as
 * served files. Returns the number of images appended (>= 0) or -ENOMEM.
 */
__attribute__((warn_unused_result)) int
tools_content_images(struct workspace *ws, cJSON *content, const cJSON *files,
                     unsigned max_images);

#endif
