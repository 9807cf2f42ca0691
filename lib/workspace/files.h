/* SPDX-License-Identifier: MIT */
/*
 * files: describing and serving the files of workspaces. It owns the
 * Content-Type allow-list (only raster images and plain text may be shown
 * inline; HTML, SVG, PDF, scripts and anything unknown are attachments, so
 * nothing a run wrote executes in the serving origin), strong ETags, reads
 * of whole files for MCP results, and the http_files_fn hook behind
 * GET/HEAD /files/<workspace>/<path>.
 *
 * Thread-safe: no state of its own.
 */
#ifndef MCPSD_FILES_H
#define MCPSD_FILES_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>
#include <time.h>

#include "http/http.h"

#define FILES_ISO8601_LEN 21 /* "2025-01-01T12:00:00Z" + NUL */

/*
 * The media type of a file name by its extension (case-insensitive), from
 * an allow-list; "application/octet-stream" when unknown. *inline_ok
 * (optional) is set when a browser may show it inline: raster images (PNG,
 * JPEG, GIF, WebP, AVIF) and plain text (txt, log, csv, tsv, md, json).
 * Text types carry "; charset=utf-8". Static string, never NULL.
 */
const char *files_mime_type(const char *name, bool *inline_ok);

/*
 * The media type without parameters ("text/csv" for "text/csv;
 * charset=utf-8"), for MCP mimeType fields. Static string.
 */
const char *files_mime_base(const char *name);

/*
 * The image type ("image/png", "image/jpeg", "image/gif", "image/webp")
 * when both the name's extension and the first bytes (magic number) say
 * so, else NULL.
 */
const char *files_image_type(const char *name, const unsigned char *head,
                             size_t len);

/* Whether a media type is text an MCP client can take as "text". */
bool files_is_text_type(const char *mime);

/* A quoted strong validator from device, inode, size, mtime and ctime. */
void files_etag(const struct stat *st, char *out, size_t outsize);

/* UTC time as "YYYY-MM-DDTHH:MM:SSZ". */
void files_iso8601(time_t t, char out[FILES_ISO8601_LEN]);

/*
 * Reads the regular file rel beneath dirfd (fstree_open_regular: no links,
 * no FIFOs) whole, if it has at most max bytes. Returns 0 with *data
 * (caller frees; NUL-terminated for convenience), *len and *st (optional),
 * -ENOENT when it is not a readable regular file, -EFBIG when larger than
 * max, or another negative errno.
 */
__attribute__((warn_unused_result)) int files_read(int dirfd, const char *rel,
                                                   size_t max, char **data,
                                                   size_t *len,
                                                   struct stat *st);
/* files_read without the FILES_PRIVATE_DIR check (a fork's copy). */
__attribute__((warn_unused_result)) int
files_read_any(int dirfd, const char *rel, size_t max, char **data, size_t *len,
               struct stat *st);

/*
 * The http_files_fn for /files/ (data is the struct workspace_mgr *). path
 * is "<64 lowercase hex>/<percent-encoded relative path>"; it is decoded
 * exactly once and checked with fsname, the workspace is opened by name
 * (mounted if needed) and the file beneath it with fstree_open_regular.
 * Returns 0 with out filled (the caller closes out->fd), 400 with the
 * broken naming rule in err for a malformed path, or 404 "file not found"
 * for everything that does not resolve: the same answer whether or not the
 * workspace exists.
 */
/*
 * The part of a workspace that is never served, read or listed by the
 * daemon's file tools: a conversation's saved interpreter state (durable
 * sessions, docs/sessions.md), code-bearing data only the conversation's
 * own sandbox loads.
 */
#define FILES_PRIVATE_DIR ".mcp/state"
/* Whether rel (a checked relative path) is FILES_PRIVATE_DIR or below. */
bool files_is_private(const char *rel);

int files_http_get(void *data, const char *path, struct http_file *out,
                   char *err, size_t errlen);

#endif
