/* SPDX-License-Identifier: MIT */
/*
 * workspace: per-conversation directories under SANDBOX_ROOT. A workspace is
 * named by HMAC-SHA256 (a key derived from FILE_SECRET for this purpose) over
 * the length-prefixed tenant and conversation id, so names are unguessable,
 * never contain caller text, and two tenants never share one. The module
 * enforces quotas (bytes, files, number of workspaces), serializes runs of
 * one conversation, and deletes idle workspaces after the retention period
 * without ever following a link.
 *
 * Threads: all functions are thread-safe. A handle from workspace_open is
 * used by one thread at a time.
 */
#ifndef MCPSD_WORKSPACE_H
#define MCPSD_WORKSPACE_H

#include <stdbool.h>
#include <stddef.h>

#include "config.h"

#define WORKSPACE_NAME_LEN 64 /* hex characters */

struct workspace_mgr;
struct workspace;

/*
 * Prepares SANDBOX_ROOT (creating it if needed) and starts the retention
 * sweeper. cfg is borrowed and must outlive the manager. On failure returns
 * a negative errno with a message for a person in err.
 */
__attribute__((warn_unused_result)) int
workspace_mgr_create(const struct config *cfg, struct workspace_mgr **out,
                     char *err, size_t errlen);

/* Stops the sweeper and frees the manager. NULL-safe. */
void workspace_mgr_destroy(struct workspace_mgr *mgr);

/*
 * The workspace name (64 hex characters + NUL) of (tenant, conversation_id).
 * Pure; exposed for tests and for building URLs.
 */
void workspace_name_for(const struct workspace_mgr *mgr, const char *tenant,
                        const char *conversation_id,
                        char out[WORKSPACE_NAME_LEN + 1]);

/*
 * Validates a conversation id: 1-256 bytes of printable UTF-8 without
 * control characters. Returns 0 or -EINVAL with the rule it broke in err.
 */
__attribute__((warn_unused_result)) int
workspace_check_conversation_id(const char *id, char *err, size_t errlen);

/*
 * Opens the workspace of (tenant, conversation_id), creating it when
 * create is true (-ENOENT otherwise if absent). Returns 0 and a handle the
 * caller owns (release with workspace_close), -EINVAL for a bad id,
 * -ENOSPC when the global workspace cap is reached, or another negative
 * errno; err says what to do.
 */
__attribute__((warn_unused_result)) int
workspace_open(struct workspace_mgr *mgr, const char *tenant,
               const char *conversation_id, bool create, struct workspace **out,
               char *err, size_t errlen);

/* Releases a handle (unlocking it if locked). NULL-safe. */
void workspace_close(struct workspace *ws);

/*
 * Serializes work on one conversation (runs share /data): blocks until no
 * other handle of the same workspace holds the lock, or until timeout_ms
 * passes (-ETIMEDOUT). workspace_close releases it too.
 */
__attribute__((warn_unused_result)) int workspace_lock(struct workspace *ws,
                                                       unsigned timeout_ms);
void workspace_unlock(struct workspace *ws);

/* The 64-hex name (borrowed, valid until workspace_close). */
const char *workspace_name(const struct workspace *ws);

/*
 * The directory as the Docker host sees it, to bind-mount at /data
 * (borrowed, valid until workspace_close).
 */
const char *workspace_host_path(const struct workspace *ws);

/* A directory fd of the workspace root (borrowed; O_PATH|O_DIRECTORY). */
int workspace_dirfd(const struct workspace *ws);

/*
 * The public URL of a file in a workspace; rel is a validated relative path.
 * Caller frees. NULL on allocation failure.
 */
char *workspace_file_url(const struct workspace_mgr *mgr,
                         const struct workspace *ws, const char *rel);

#endif
