/* SPDX-License-Identifier: MIT */
/*
 * check_output: finds the errors a syntax checker reported about the code
 * file in its output (check_code). The output comes from a program in a
 * sandbox that read hostile code, so it is hostile too: any bytes, any
 * length. Recognized, line by line, for the code file only (a path equal
 * to its name or ending in "/<name>"):
 *   gcc style   path:LINE:COL: [fatal ]error: message  (gcc, g++, rustc
 *               --error-format=short, gofmt -e, the Bun check script);
 *               warnings and notes are skipped
 *   ruby -c     path:LINE: message
 *   bash -n     path: line LINE: message
 *   php -l      [PHP ]Parse error: message in path on line LINE
 *   Python      File "path", line LINE ... then XxxError: message
 *   Bun build   error: message ... then "at path:LINE:COL"
 * Messages are cut to CHECK_OUTPUT_MESSAGE_MAX bytes on a UTF-8 boundary,
 * control characters become spaces; repeated errors are kept once.
 *
 * Pure, stateless and thread-safe.
 */
#ifndef MCPSD_CHECKPARSE_H
#define MCPSD_CHECKPARSE_H

#include <stddef.h>

#define CHECK_OUTPUT_MESSAGE_MAX 300 /* bytes of a message, NUL included */
#define CHECK_OUTPUT_ERRORS_MAX 20   /* errors worth reporting */
#define CHECK_OUTPUT_LINE_MAX 4096   /* longer output lines are cut */

struct check_output_error {
	unsigned line;   /* from 1; 0 when the checker gave none */
	unsigned column; /* from 1; 0 when the checker gave none */
	char message[CHECK_OUTPUT_MESSAGE_MAX];
};

/*
 * Fills out with up to max errors about filename (a plain name such as
 * "main.c") found in the len bytes at text, in the order they appear, and
 * returns how many. text need not be NUL-terminated.
 */
size_t check_output_errors(const char *text, size_t len, const char *filename,
                           struct check_output_error *out, size_t max);

/*
 * The first non-empty line of text, cleaned as a message (for a checker
 * that failed without a located error). Returns 0 or -ENOENT when text
 * has no such line.
 */
__attribute__((warn_unused_result)) int
check_output_first_line(const char *text, size_t len,
                        struct check_output_error *out);

#endif
