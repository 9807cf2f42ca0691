/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for check_output: each checker's real output format (captured
 * from the runner images: gcc 12, rustc 1.63, gofmt 1.19, Bun 1.4, Python
 * 3.11, bash 5.2, Ruby 3.1, PHP 8.2), and hostile output.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"
#include "tools/check_output.h"

static struct check_output_error e[CHECK_OUTPUT_ERRORS_MAX];

static size_t parse(const char *text, const char *file)
{
	memset(e, 0, sizeof(e));
	return check_output_errors(text, strlen(text), file, e,
	                           CHECK_OUTPUT_ERRORS_MAX);
}

static void test_formats(void)
{
	is_int(parse("/sandbox/main.c: In function 'main':\n"
	             "/sandbox/main.c:4:2: error: expected ',' or ';' before "
	             "'return'\n",
	             "main.c"),
	       1, "gcc: one error, the 'In function' line skipped");
	ok(e[0].line == 4 && e[0].column == 2, "gcc: line and column");
	is_str(e[0].message, "expected ',' or ';' before 'return'",
	       "gcc: message without 'error:'");

	is_int(parse("/sandbox/main.c:1:10: fatal error: nope.h: No such file "
	             "or directory\n",
	             "main.c"),
	       1, "gcc: fatal error");
	is_str(e[0].message, "nope.h: No such file or directory",
	       "gcc: fatal error prefix dropped");

	is_int(parse("/sandbox/main.c:2:5: warning: unused variable 'x'\n"
	             "/sandbox/main.c:3:1: note: something\n"
	             "/usr/include/stdio.h:9:1: error: in a header\n"
	             "/sandbox/main.c:7:3: error: real one\n",
	             "main.c"),
	       1, "gcc: warnings, notes and other files skipped");
	is_int(e[0].line, 7, "gcc: the code file's error");

	is_int(parse("/sandbox/main.rs:2:12: error: expected `;`, found "
	             "keyword `let`\nerror: aborting due to previous error\n",
	             "main.rs"),
	       1, "rustc short format");
	ok(e[0].line == 2 && e[0].column == 12, "rustc: line and column");

	is_int(parse("/sandbox/main.go:4:1: expected operand, found '}'\n"
	             "/sandbox/main.go:4:3: expected ';', found 'EOF'\n"
	             "/sandbox/main.go:4:3: expected ';', found 'EOF'\n",
	             "main.go"),
	       2, "gofmt: errors without 'error:', duplicates kept once");
	is_str(e[0].message, "expected operand, found '}'", "gofmt message");

	is_int(parse("  File \"<string>\", line 1, in <module>\n"
	             "  File \"/usr/lib/python3.11/ast.py\", line 50, in "
	             "parse\n"
	             "  File \"/sandbox/main.py\", line 2\n"
	             "    x = (\n"
	             "        ^\n"
	             "SyntaxError: '(' was never closed\n",
	             "main.py"),
	       1, "python traceback");
	is_int(e[0].line, 2, "python: the code file's frame");
	is_str(e[0].message, "SyntaxError: '(' was never closed",
	       "python: exception and message");
	is_int(parse("  File \"/sandbox/main.py\", line 3\n"
	             "IndentationError: expected an indented block\n",
	             "main.py"),
	       1, "python: IndentationError");
	is_int(parse("SyntaxError: no frame\n", "main.py"), 0,
	       "python: no frame of the code file, no located error");

	is_int(parse("/sandbox/main.sh: line 4: syntax error: unexpected end "
	             "of file\n",
	             "main.sh"),
	       1, "bash -n");
	ok(e[0].line == 4 && e[0].column == 0, "bash: line, no column");
	is_str(e[0].message, "syntax error: unexpected end of file",
	       "bash message");

	is_int(parse("/sandbox/main.rb:1: warning: possibly useless use\n"
	             "/sandbox/main.rb:3: syntax error, unexpected `end', "
	             "expecting ')'\nend end\n^~~\n",
	             "main.rb"),
	       1, "ruby -c: warning skipped");
	is_int(e[0].line, 3, "ruby line");

	is_int(parse("PHP Parse error:  syntax error, unexpected token \";\" "
	             "in /tmp/main.php on line 3\n"
	             "Errors parsing /tmp/main.php\n",
	             "main.php"),
	       1, "php -l");
	is_int(e[0].line, 3, "php line");
	is_str(e[0].message,
	       "Parse error: syntax error, unexpected token \";\"",
	       "php message: prefix and path dropped, blanks collapsed");

	is_int(parse("2 | let b = ;\n            ^\nerror: Unexpected ;\n"
	             "    at /sandbox/main.ts:2:9\n",
	             "main.ts"),
	       1, "bun build format");
	ok(e[0].line == 2 && e[0].column == 9, "bun: line and column");
	is_str(e[0].message, "Unexpected ;", "bun message");

	is_int(
	    parse("C:\\x:/sandbox/main.c:5:1: error: colon path\n", "main.c"),
	    1, "gcc: a path with colons");
	is_int(e[0].line, 5, "colon path line");
}

static void test_hostile(void)
{
	static char big[100000];
	struct check_output_error one;
	size_t n;

	is_int(parse("main.c:0:1: error: zero line\n"
	             "main.c:1234567890:1: error: ten digits\n"
	             "main.c:-3:1: error: negative\n"
	             "main.c:x:1: error: not a number\n",
	             "main.c"),
	       0, "bad line numbers refused");
	is_int(parse("main.c:3:99999999999: error: column too big\n", "main.c"),
	       1, "an unreadable column is dropped, the line kept");
	ok(e[0].line == 3 && e[0].column == 0, "line 3, no column");
	is_int(parse("xmain.c:3:1: error: other file\n", "main.c"), 0,
	       "a path merely ending in the name is another file");
	is_int(parse("main.c:3: error: \x01\x1b[31mred\x7f\t\tend \xff\xfe\n",
	             "main.c"),
	       1, "control characters and bad UTF-8");
	is_str(e[0].message, "[31mred end ??", "cleaned message");

	/* A line far longer than the limit, and a huge message. */
	memset(big, 'a', sizeof(big) - 1);
	memcpy(big, "main.c:9:1: error: ", 19);
	n = check_output_errors(big, sizeof(big) - 1, "main.c", e,
	                        CHECK_OUTPUT_ERRORS_MAX);
	is_int(n, 1, "a very long line still parses");
	ok(strlen(e[0].message) < CHECK_OUTPUT_MESSAGE_MAX,
	   "message bounded (%zu)", strlen(e[0].message));
	/* Multi-byte characters are never cut in half. */
	for (size_t i = 19; i + 2 < sizeof(big) - 1; i += 2)
		memcpy(big + i, "\xc3\xa9", 2);
	n = check_output_errors(big, sizeof(big) - 1, "main.c", e,
	                        CHECK_OUTPUT_ERRORS_MAX);
	ok(n == 1 &&
	       (unsigned char)e[0].message[strlen(e[0].message) - 1] == 0xa9,
	   "cut between characters");

	/* A blank just before the cut is not left at the end (fuzz). */
	memset(big, 'a', 19 + 297);
	memcpy(big, "main.c:9:1: error: ", 19);
	memcpy(big + 19 + 297, " \xc3\xa9\xc3\xa9", 5);
	n = check_output_errors(big, 19 + 297 + 5, "main.c", e,
	                        CHECK_OUTPUT_ERRORS_MAX);
	ok(n == 1 && strlen(e[0].message) == 297 &&
	       e[0].message[strlen(e[0].message) - 1] == 'a',
	   "no trailing blank after a cut (%zu)", strlen(e[0].message));

	/* Many errors: at most max. */
	{
		char *many = malloc(64 * 1000);
		size_t off = 0;

		for (int i = 1; many && i <= 1000; i++)
			off += (size_t)snprintf(many + off, 64 * 1000 - off,
			                        "main.c:%d:1: error: e\n", i);
		n = many ? check_output_errors(many, off, "main.c", e, 5) : 0;
		is_int(n, 5, "stops at max");
		free(many);
	}
	is_int(check_output_errors("main.c:1:1: error: x", 0, "main.c", e, 5),
	       0, "len 0 reads nothing");
	is_int(check_output_errors("main.c:1:1: error: x\0main.c:2:1: error: y",
	                           41, "main.c", e, 5),
	       1, "NUL inside output is a space, not an end");
	is_int(check_output_errors("main.c:1:1: error: x", 20, "", e, 5), 0,
	       "no file name, no errors");

	is_int(check_output_first_line("\n  \nboom: it broke\nmore", 22, &one),
	       0, "first non-empty line");
	is_str(one.message, "boom: it broke", "first line text");
	is_int(check_output_first_line(" \n\t\n", 4, &one), -ENOENT,
	       "blank output: no line");
}

int main(void)
{
	test_formats();
	test_hostile();
	return tap_done();
}
