/* SPDX-License-Identifier: MIT */
/*
 * notebook: every run of a conversation as a cell of a Jupyter notebook
 * (nbformat 4.5). The source of truth is the daemon's own file, one JSON
 * record per cell, in the workspace's private directory (workspace.h:
 * workspace_private_dirfd), where code in the sandbox cannot write; the
 * notebook in /data (.mcp/notebook.ipynb, served at its file URL like any
 * file) is only ever written from it, never read back, so nothing the code
 * does to that copy reaches the daemon. The replay check compares the
 * records of a fresh run of the cells with the recorded ones.
 *
 * Pure functions and calls on file descriptors the caller holds; the
 * caller serializes the calls of one conversation (its workspace lock).
 */
#ifndef MCPSD_NOTEBOOK_H
#define MCPSD_NOTEBOOK_H

#include <stdbool.h>
#include <stddef.h>

#include <cjson/cJSON.h>

#define NOTEBOOK_FILE ".mcp/notebook.ipynb" /* the copy in /data */
#define NOTEBOOK_RECORDS "notebook.jsonl"   /* in the private directory */
#define NOTEBOOK_CELLS "notebook.cells"     /* rendered cells, kept there */
#define NOTEBOOK_META "notebook.meta"       /* the cells file's account */
#define NOTEBOOK_COUNT "notebook.count"     /* the records' cells, kept */
#define NOTEBOOK_MAX_BYTES (32u << 20)      /* records of one notebook */
#define NOTEBOOK_MAX_CELLS 2000
#define NOTEBOOK_FIGURES_MAX 10              /* figures a cell embeds */
#define NOTEBOOK_FIGURE_MAX_BYTES (2u << 20) /* a figure embedded at most */

/* One finished run, as the notebook records it. Everything borrowed. */
struct notebook_run {
	const char *language; /* the runner's language ("python", ...) */
	const char *code;
	size_t code_len;
	const char *status;        /* runner_status_name() */
	int exit_code;             /* -1: did not exit by itself */
	const char *out, *err;     /* what the result shows of each stream */
	const char *value_json;    /* MIME type -> text, or NULL */
	const char *error_name;    /* "" when none */
	const char *packages_json; /* or NULL */
	/* PNG figures the run wrote, in order. */
	const unsigned char *const *figures;
	const size_t *figure_lens;
	size_t n_figures;
};

/*
 * The record of a run (caller owns; NULL when out of memory):
 * {"language", "source", "status", "exit_code", "outputs": [nbformat
 * outputs], "packages"?}.
 */
cJSON *notebook_record(const struct notebook_run *run);

/*
 * Appends a record to the records in dirfd (the private directory).
 * Returns the number of cells now recorded (>= 1), or a negative errno:
 * -EFBIG when the notebook holds NOTEBOOK_MAX_CELLS cells or the record
 * does not fit NOTEBOOK_MAX_BYTES (the run is then left out of it).
 */
__attribute__((warn_unused_result)) int notebook_append(int dirfd,
                                                        const cJSON *record);

/*
 * The records in dirfd as an array (caller owns), an empty one when there
 * are none yet. Returns 0 or a negative errno.
 */
__attribute__((warn_unused_result)) int notebook_load(int dirfd,
                                                      cJSON **records);

/*
 * The notebook of records as nbformat 4.5 JSON text (caller frees; NULL
 * when out of memory). The kernel is Python's when a Python cell is
 * there; cells of other languages carry their language in their metadata
 * (metadata.language, metadata.vscode.languageId) and the tag
 * skip-execution, cells that raised the tag raises-exception, so Jupyter
 * and nbclient run the notebook through.
 */
char *notebook_render(const cJSON *records, const char *conversation_id,
                      size_t *len);

/*
 * The notebook's text, as notebook_render of every record gives it, made
 * from the rendered cells the private directory dirfd keeps (NOTEBOOK_CELLS,
 * with NOTEBOOK_META): the records appended since the last call are
 * rendered, one cell each, not all of them again. When those files do not
 * hold the cells of the records they account for (none yet, a crash between
 * writes, the kernel turned Python), they are rebuilt from the records.
 * *text: caller frees with free. 0 or a negative errno.
 */
__attribute__((warn_unused_result)) int
notebook_publish(int dirfd, const char *conversation_id, char **text,
                 size_t *len);

/*
 * What differs between a recorded cell and the record of its replay: an
 * array of the names of the outputs that differ ("stdout", "value" (its
 * text/plain), "error" (the exception's type), "figures" (how many)),
 * empty when none. stderr is not compared: warnings and tracebacks carry
 * paths and wording that change from run to run. Caller owns; NULL when
 * out of memory.
 */
cJSON *notebook_diff(const cJSON *recorded, const cJSON *replayed);

#endif
