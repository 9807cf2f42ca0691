/* SPDX-License-Identifier: MIT */
/*
 * warm_state: durable sessions, daemon side (docs/sessions.md). A warm
 * Python kernel saves its namespace after every call into the
 * conversation's workspace (/data/.mcp/state/<language>), and loads it
 * back in a new box; this module is what the daemon does about it. It
 * never reads a saved state: the files are code-bearing data written by
 * the conversation's code and are only ever loaded by the kernel in that
 * conversation's own box. It turns the kernel's report (the "state" object
 * of its X frame, hostile JSON written by code in the box) into a bounded,
 * checked object for the result, and drops a conversation's saved state
 * when it must go (session "new", exit()).
 *
 * Threads: stateless and thread-safe.
 */
#ifndef MCPSD_WARM_STATE_H
#define MCPSD_WARM_STATE_H

#include <stdbool.h>
#include <stddef.h>

#include <cjson/cJSON.h>

/* Where a language's state lives in the box (and below the workspace). */
#define WARM_STATE_DIR "/data/.mcp/state"
#define WARM_STATE_REL ".mcp/state"
/* Names listed in a report (the rest are counted by the kernel). */
#define WARM_STATE_NAMES_MAX 50
/* Bytes of one string of a report. */
#define WARM_STATE_TEXT_MAX 400

/*
 * A checked copy of the "state" object of an X frame (x_state, borrowed;
 * may be anything): only known fields of the right types, numbers in
 * range, strings valid UTF-8 cut to WARM_STATE_TEXT_MAX, lists cut to
 * WARM_STATE_NAMES_MAX, saved_at as an ISO 8601 time. Shape:
 *   {"run": N, "kept": [N...],
 *    "saved": {"run","ok","bytes","ms","not_saved":[{"name","why"}],
 *              "error"} | absent,
 *    "restored": {"kind":"restore"|"rewind","run","saved_at","ms",
 *                 "names","imports":[str],"not_restored":[{"name","why"}],
 *                 "error"} | absent}
 * Caller owns (cJSON_Delete); NULL when x_state is not an object or out of
 * memory.
 */
cJSON *warm_state_take(const cJSON *x_state);

/*
 * What a checked report (from warm_state_take, or NULL) says of this call's
 * restore: "restore" (the saved state was loaded), "rewind", or NULL when
 * none was loaded (none asked, none saved, or it failed: see its error).
 */
const char *warm_state_loaded(const cJSON *st);

/*
 * Removes the saved state of lang from the workspace whose root is the
 * directory wsfd (borrowed; O_PATH is fine), without following links.
 * 0 (also when there is none), or -errno.
 */
__attribute__((warn_unused_result)) int warm_state_drop(int wsfd,
                                                        const char *lang);

/*
 * Whether the kernel is writing a save of lang into the workspace whose
 * root is wsfd (a .run-<n>.tmp-<pid> file is there). Never follows links.
 */
bool warm_state_saving(int wsfd, const char *lang);

/* Whether the save of run (run-<run>.state) of lang is there, complete. */
bool warm_state_saved(int wsfd, const char *lang, unsigned long long run);

#endif
