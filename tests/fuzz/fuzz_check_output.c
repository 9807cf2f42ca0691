/* SPDX-License-Identifier: MIT */
/*
 * fuzz_check_output: a syntax checker's output, as hostile as the code it
 * read. The first byte picks the code file's name; the rest is the output.
 * Whatever check_output reports has at most the asked-for number of errors,
 * lines and columns of at most 999999999, and messages that are non-empty,
 * bounded, strict UTF-8 without control characters and without a blank at
 * either end. Any violation aborts.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fs/fsname.h"
#include "tools/check_output.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_message(const char *m)
{
	size_t n = strnlen(m, CHECK_OUTPUT_MESSAGE_MAX);

	if (n == 0 || n >= CHECK_OUTPUT_MESSAGE_MAX || !fsname_utf8_valid(m, n))
		abort();
	if (m[0] == ' ' || m[n - 1] == ' ')
		abort();
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)m[i] < 0x20 || m[i] == 0x7f)
			abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const names[] = {"main.c",  "main.py",  "main.ts",
	                                    "main.sh", "main.php", "main.rb",
	                                    "main.go", "main.rs"};
	struct check_output_error e[CHECK_OUTPUT_ERRORS_MAX], one;
	const char *text = (const char *)data + 1;
	size_t n, max;

	if (size < 1)
		return 0;
	max = 1 + data[0] % CHECK_OUTPUT_ERRORS_MAX;
	n = check_output_errors(text, size - 1, names[(data[0] >> 5) & 7], e,
	                        max);
	if (n > max)
		abort();
	for (size_t i = 0; i < n; i++) {
		if (e[i].line > 999999999u || e[i].column > 999999999u)
			abort();
		check_message(e[i].message);
	}
	if (check_output_first_line(text, size - 1, &one) == 0)
		check_message(one.message);
	else if (one.message[0])
		abort();
	return 0;
}
