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

#include <cjson/cJSON.h>

#include "config/config.h"
#include "util/cron.h"

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
 * The start-up check of disk space: true when max_count workspaces of
 * quota_bytes each could hold more than free_bytes (the free space of
 * SANDBOX_ROOT=root), with a message for the operator in msg saying which
 * settings to lower and to what. Pure.
 */
bool workspace_disk_advice(unsigned max_count, unsigned long long quota_bytes,
                           unsigned long long free_bytes, const char *root,
                           char *msg, size_t msglen);

/*
 * The number of tenants WORKSPACE_MAX_PER_TENANT=0 divides
 * WORKSPACE_MAX_COUNT among: the distinct tenant names of the configured
 * tokens, at least 1 (MCP_AUTH=none and --stdio have one tenant).
 */
unsigned workspace_tenants_of(const struct config *cfg);

/*
 * The workspace name (64 hex characters + NUL) of (tenant, conversation_id).
 * Pure; exposed for tests and for building URLs. On an internal failure
 * (out of memory in OpenSSL) out is the empty string.
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
 * -EDQUOT when the tenant keeps WORKSPACE_MAX_PER_TENANT workspaces already,
 * -EAGAIN when it creates them faster than WORKSPACE_CREATE_BURST and
 * WORKSPACE_CREATE_PER_HOUR allow, -ENOSPC when the global workspace cap is
 * reached, or another negative errno; err says what to do. The marker of
 * a new workspace records a keyed fingerprint of its tenant, so the
 * per-tenant count survives a restart; one made by an older version
 * counts for its tenant from the first time that tenant opens it.
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
 * passes (-ETIMEDOUT); -EDEADLK when this handle holds it already.
 * workspace_close releases it.
 */
__attribute__((warn_unused_result)) int workspace_lock(struct workspace *ws,
                                                       unsigned timeout_ms);

/*
 * Writes that follow a run's answer (workspace_settle_begin, with the run
 * lock held, before answering; workspace_settle_end when they are done,
 * before the lock is released): until they end, workspace_open and
 * workspace_open_by_name of the same workspace wait (at most
 * WORKSPACE_SETTLE_WAIT_MS), so whoever was answered (a download, a
 * listing, the next run) sees what the run wrote. Each begin needs its end.
 */
#define WORKSPACE_SETTLE_WAIT_MS 10000
void workspace_settle_begin(struct workspace *ws);
void workspace_settle_end(struct workspace *ws);

/*
 * Deferred writes: a file made from what runs leave (the notebook's copy in
 * /data, rendered from its records) that readers want soon but that need
 * not be rewritten after every one of many quick runs. fn(ws, conv, arg)
 * makes it, called with ws open and locked (opened by conv, the
 * conversation id of the run that deferred it), on whichever thread does
 * the write. At most one write per interval_ms per workspace: a run's
 * workspace_defer writes at once when the last write is at least that old
 * (or there was none), and otherwise leaves it due interval_ms after the
 * last one, for workspace_job_deferred or a reader's
 * workspace_flush_deferred. interval_ms 0: every workspace_defer writes at
 * once. Set once, before the first run.
 */
typedef void (*workspace_deferred_fn)(struct workspace *ws, const char *conv,
                                      void *arg);
void workspace_mgr_set_deferred(struct workspace_mgr *mgr, unsigned interval_ms,
                                workspace_deferred_fn fn, void *arg);

/*
 * After a run, with ws locked and opened by its conversation id: writes
 * now, or leaves the write due (above). Without a deferred write set, or
 * out of memory, writes now too.
 */
void workspace_defer(struct workspace *ws);

/*
 * For a reader of what the deferred write makes (a download): does the
 * write pending on ws, if one is and ws's lock can be had at once (ws not
 * locked by the caller; a run that holds it defers or writes again after).
 */
void workspace_flush_deferred(struct workspace *ws);

/*
 * The housekeeping job (cron.h): does the deferred writes that are due,
 * until deadline_ms has passed (one at least). A workspace whose lock a
 * run holds is tried again an interval later; one that was deleted meanwhile
 * is dropped.
 */
enum cron_next workspace_job_deferred(void *mgr, long long deadline_ms);
/* How often the job looks: a quarter of the interval, at least 50 ms. */
#define WORKSPACE_DEFER_JOB_MS(interval_ms)                                    \
	((interval_ms) / 4 > 50 ? (interval_ms) / 4 : 50)

/*
 * At shutdown, once the runs have ended: every pending deferred write, due
 * or not, each waiting up to wait_ms for its workspace's lock.
 */
void workspace_mgr_flush_deferred(struct workspace_mgr *mgr, unsigned wait_ms);

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
 * A directory of the daemon's own for this workspace, outside /data and
 * never mounted into a sandbox (SANDBOX_ROOT/private/<name>/, made on first
 * use, deleted with the workspace). Returns a new fd the caller closes
 * (O_DIRECTORY), or a negative errno.
 */
__attribute__((warn_unused_result)) int
workspace_private_dirfd(struct workspace *ws);

/*
 * The public URL of a file in a workspace; rel is a validated relative path.
 * Caller frees. NULL on allocation failure.
 */
char *workspace_file_url(const struct workspace_mgr *mgr,
                         const struct workspace *ws, const char *rel);

/* ---- additions: serving, quotas, writing ---------------------------- */

/*
 * Opens an existing workspace by its 64-hex name, for serving files: never
 * creates one and does not count as use for retention. In loop mode the
 * image is mounted if it is not. Returns 0 and a handle (release with
 * workspace_close), or -ENOENT for a malformed name or a workspace that
 * does not exist (the two are not told apart), or another negative errno.
 */
__attribute__((warn_unused_result)) int
workspace_open_by_name(struct workspace_mgr *mgr, const char *name,
                       struct workspace **out);

/*
 * "sandbox://<conversationId>/<rel>" with both parts percent-encoded: the
 * MCP resource URI of a file. Caller frees. NULL on allocation failure or
 * for a handle from workspace_open_by_name.
 */
char *workspace_resource_uri(const struct workspace *ws, const char *rel);

/* The manager a handle belongs to (borrowed). */
struct workspace_mgr *workspace_mgr_of(const struct workspace *ws);

/*
 * Whether this workspace is a loop image, i.e. its file system itself
 * enforces the byte and file quotas (a workspace made in quota mode none
 * stays a plain directory even after the mode changes).
 */
bool workspace_quota_enforced(const struct workspace *ws);

/*
 * The conversation id the handle was opened with (borrowed, valid until
 * workspace_close), NULL for a handle from workspace_open_by_name.
 */
const char *workspace_conversation_id(const struct workspace *ws);

/* The quota mode in effect: "loop" or "none" (static string). */
const char *workspace_mgr_quota_mode(const struct workspace_mgr *mgr);

/* The configuration the manager was created with (borrowed). */
const struct config *workspace_mgr_config(const struct workspace_mgr *mgr);

/*
 * An http_health_fn (data is the manager): adds "workspaces": {count, max,
 * maxPerTenant, mounted, quotaMode} to the /healthz document. Never
 * degraded.
 */
bool workspace_mgr_health(void *data, cJSON *health);

/*
 * Runs a whole retention sweep now (the housekeeping job does it in steps
 * every WORKSPACE_SWEEP_INTERVAL_MS): deletes workspaces whose last use (a
 * marker in SANDBOX_ROOT/meta, out of reach of code in a container) is
 * older than the retention in effect (cfg->retention_s) and that no handle
 * holds, and in loop mode unmounts images idle for a minute (all idle ones
 * when unmount_all is true). A sweep the job left unfinished starts over.
 * Returns the number deleted.
 */
unsigned workspace_mgr_sweep(struct workspace_mgr *mgr, bool unmount_all);

/*
 * The sweep as a housekeeping job (cron.h) with a budget: it unmounts and
 * deletes until deadline_ms has passed (one workspace at least), then
 * returns CRON_MORE and the next run goes on where this one stopped.
 */
enum cron_next workspace_job_sweep(void *mgr, long long deadline_ms);

/*
 * Loop mode: formats the spare image a new workspace takes instead of
 * waiting for mkfs.ext4, when there is none and the host has room for it
 * (a housekeeping job, cron.h). Nothing in the other modes.
 */
enum cron_next workspace_job_spare(void *mgr, long long deadline_ms);
#define WORKSPACE_SPARE_INTERVAL_MS 1000u
/* How often the job runs: every minute, or every half of the retention
 * when that is shorter (at least once a second). */
#define WORKSPACE_SWEEP_INTERVAL_MS(cfg)                                       \
	((cfg)->retention_s >= 120 ? 60000u                                    \
	 : (cfg)->retention_s >= 2 ? (cfg)->retention_s * 500u                 \
	                           : 1000u)

/* Usage of one workspace. */
struct workspace_usage {
	unsigned long long bytes;       /* bytes in use */
	unsigned long long files;       /* files and directories in use */
	unsigned long long quota_bytes; /* loop: capacity of the image */
	unsigned long long quota_files; /* loop: inodes of the image */
	bool enforced; /* true: the file system itself holds the limits */
	bool over;     /* at or over a limit: runs and uploads are refused */
	bool partial;  /* none mode: counting stopped at a limit */
};

/*
 * Measures a workspace. Loop mode: statvfs of the mounted image (cheap;
 * includes the file system's own few MB of metadata). None mode: an
 * iterative walk that stops as soon as a limit is passed. Returns 0 or a
 * negative errno.
 */
__attribute__((warn_unused_result)) int
workspace_usage(struct workspace *ws, struct workspace_usage *out);

/*
 * What of u is over its quota, for a message: "over 2109440 bytes, over its
 * quota of 1048576 bytes", or the files and directories, or both; "over"
 * before a count when the walk stopped there (u->partial). For a u that is
 * over (u->over, quota mode none). Always NUL-terminates out.
 */
void workspace_usage_over(const struct workspace_usage *u, char *out,
                          size_t outlen);

/*
 * Whether the workspace may take another run or upload of extra bytes
 * (0 when unknown). Returns 0, or -EDQUOT with a message for the model
 * that names the limit passed ("the workspace of this conversation holds
 * over 10023 files and directories, over its quota of 10000; runs and
 * uploads are refused ...") when it is over a limit or extra bytes would
 * pass one. In loop mode only a full image or extra > free space is
 * refused: the kernel enforces the rest.
 */
__attribute__((warn_unused_result)) int
workspace_check_quota(struct workspace *ws, unsigned long long extra, char *err,
                      size_t errlen);

/*
 * Writes len bytes as the file rel (a path that passed fsname_check)
 * atomically: missing directories are created, the data goes to a
 * temporary file beneath the same directory and is renamed into place,
 * every step opened with openat2 beneath the workspace, no link followed.
 * The file (and new directories) belong to SANDBOX_UID:SANDBOX_GID so code
 * can change them. Without overwrite an existing name is refused with
 * -EEXIST; with it only a regular file is replaced. Returns 0 or a negative
 * errno with a message for the model in err (-EEXIST, -ENOTDIR/-ELOOP for
 * a path through a file or link, -EISDIR, -EDQUOT/-ENOSPC when full).
 * Caller holds the workspace lock.
 */
__attribute__((warn_unused_result)) int
workspace_write_file(struct workspace *ws, const char *rel, const void *data,
                     size_t len, bool overwrite, char *err, size_t errlen);

/*
 * What the daemon and the kernel keep under /data/.mcp for themselves, by
 * the path below /data (rel) and whether it is a directory. This is the one
 * list of them, for every walk of a workspace:
 *   WORKSPACE_OWN_HIDDEN  list_files does not list it (a directory: unless
 *                         asked for by its own path), and it is never one
 *                         of a run's files: .mcp/packages (packages.h),
 *                         .mcp/view (the run viewer's tables), .mcp/value.json
 *                         (the frame kernel.py saves for the viewer),
 *                         .mcp/state (durable sessions' saved states)
 *   WORKSPACE_OWN_LISTED  a file a person downloads (the results link it once
 *                         per conversation, /files/ serves it), listed when
 *                         list_files is asked for .mcp, never one of a run's
 *                         files: .mcp/notebook.ipynb (tools/notebook/)
 *   WORKSPACE_OWN_NONE    anything else: the conversation's files
 */
enum workspace_own {
	WORKSPACE_OWN_NONE,
	WORKSPACE_OWN_HIDDEN,
	WORKSPACE_OWN_LISTED,
};

enum workspace_own workspace_own_path(const char *rel, bool is_dir);

/* ---- additions for run_code ------------------------------------------ */

#define WORKSPACE_CHANGES_MAX 100 /* entries a changes list holds */
#define WORKSPACE_INLINE_IMAGES_MAX 3

struct workspace_snapshot;

/*
 * Records the regular files of a workspace (path, inode, size, mtime,
 * ctime) so workspace_changes can tell what a run created or changed.
 * Take it with the workspace lock held, just before the run. Returns 0 and
 * *out (caller owns; free with workspace_snapshot_destroy) or a negative
 * errno. Bounded: a workspace with more than WORKSPACE_MAX_FILES + 1000
 * entries is recorded that far.
 */
__attribute__((warn_unused_result)) int
workspace_snapshot_create(struct workspace *ws,
                          struct workspace_snapshot **out);
void workspace_snapshot_destroy(struct workspace_snapshot *snap);

/* What workspace_changes left out. */
struct workspace_changes_info {
	size_t changed; /* files created or changed, listed or not */
	bool truncated; /* more than max_entries changed */
	size_t skipped; /* new links, FIFOs, sockets, devices */
	size_t unnamed; /* refused names (CR/LF, ...) present: never listed */
};

/*
 * The regular files created or changed since before, sorted by name, at
 * most max_entries (<= WORKSPACE_CHANGES_MAX), walked without following
 * links. *files (caller owns, cJSON_Delete) is an array of objects
 *   {"name": "out/plot.png", "path": "/data/out/plot.png",
 *    "size": 1234, "mimeType": "image/png",
 *    "url": "https://files.example/files/<ws>/out/plot.png",
 *    "uri": "sandbox://<conversationId>/out/plot.png",
 *    "modified": "2025-01-01T12:00:00Z", "status": "created"|"modified"}
 * ready for structuredContent. before may be NULL (everything is new).
 * info is optional. Returns 0 or a negative errno.
 */
__attribute__((warn_unused_result)) int
workspace_changes(struct workspace *ws, const struct workspace_snapshot *before,
                  size_t max_entries, cJSON **files,
                  struct workspace_changes_info *info);

/*
 * One stream's whole output for workspace_save_outputs. The call fills
 * rel (".mcp/<stream>-<YYYYMMDDTHHMMSSZ>-<6 hex>.txt") and url when it
 * saved the stream, err (why, for the model) when it did not;
 * workspace_outputs_finish frees them.
 */
struct workspace_output {
	const char *stream; /* "stdout" or "stderr" */
	const void *data;   /* borrowed for the call */
	size_t len;
	char *rel;
	char *url;
	char err[256];
};

#define WORKSPACE_PRUNED_LIST 20 /* deleted saved outputs named in a result */

/*
 * The older saved outputs workspace_save_outputs deleted: how many, their
 * sizes together, and the first WORKSPACE_PRUNED_LIST of them as an array
 * of "/data/.mcp/..." strings, oldest first (NULL when none).
 */
struct workspace_pruned {
	size_t n;
	unsigned long long bytes;
	cJSON *paths;
};

/*
 * Saves the whole output of a run's streams (v[0..n), at most 2) as
 * ".mcp/<stream>-<YYYYMMDDTHHMMSSZ>-<6 hex>.txt" in the workspace, for
 * output longer than the inline cap. What is kept there is bounded: the
 * newest SANDBOX_OUTPUT_SAVED_FILES saved outputs of the conversation, at
 * most SANDBOX_OUTPUT_SAVED_BYTES (and half the workspace quota) together.
 * To make room for these, the oldest saved outputs (files of that name
 * pattern directly in .mcp, by modification time) are deleted first, also
 * when the workspace itself has no room for them; what was deleted is
 * told in *pruned. Files saved by this call are never deleted by it: a
 * stream that does not fit the limits with the ones before it is not
 * saved. Each v[i] says whether it was saved (rel and url) or why not (err:
 * over the limits, saving off, the workspace full, .mcp not a directory).
 * Returns 0 (whatever was saved), or a negative errno when it could not
 * try (-EINVAL for an unknown stream or n > 2, -ENOMEM). Call it after
 * workspace_changes, so the saved output is not listed as a file the run
 * made; free with workspace_outputs_finish. Caller holds the workspace
 * lock.
 */
__attribute__((warn_unused_result)) int
workspace_save_outputs(struct workspace *ws, struct workspace_output *v,
                       size_t n, struct workspace_pruned *pruned);

/* Frees what workspace_save_outputs filled in. NULL-safe. */
void workspace_outputs_finish(struct workspace_output *v, size_t n,
                              struct workspace_pruned *pruned);

/* ---- fork (workspace_fork.c) ----------------------------------------- */

struct workspace_fork_stats {
	size_t files;             /* regular files copied */
	unsigned long long bytes; /* their bytes */
	size_t skipped;           /* links, FIFOs, sockets, devices */
};

/*
 * Copies the files of src (a conversation of the same tenant: the caller
 * opened both for it) into dst, which must hold nothing yet (-ENOTEMPTY),
 * the saved interpreter state (.mcp/state) included. Regular files and
 * directories only, never following a link; each file written as
 * workspace_write_file does (dst's quota holds). Both handles locked by
 * the caller. 0 with stats, or a negative errno with a message for the
 * model in err.
 */
__attribute__((warn_unused_result)) int
workspace_fork(struct workspace *dst, struct workspace *src,
               struct workspace_fork_stats *stats, char *err, size_t errlen);

#endif
