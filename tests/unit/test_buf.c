/* SPDX-License-Identifier: MIT */
/* test_buf: the bounded buffer (limits, consume, take, finish and reuse). */
#include <errno.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tap.h"
#include "util/buf.h"

/* The exit status of a child that calls buf_finish(NULL); -1 if it did
 * not exit normally (a crash). */
static int exit_of_finish_null(void)
{
	int status;
	pid_t pid;

	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		buf_finish(NULL);
		_exit(0);
	}
	if (pid < 0 || waitpid(pid, &status, 0) < 0 || !WIFEXITED(status))
		return -1;
	return WEXITSTATUS(status);
}

int main(void)
{
	struct buf b;
	char *s;
	size_t len;

	buf_init(&b, 8);
	is_int(buf_puts(&b, "abcd"), 0, "append within the limit");
	is_int(buf_puts(&b, "efgh"), 0, "append up to the limit");
	is_int(buf_putc(&b, 'x'), -E2BIG, "one byte past the limit refused");
	is_str(b.data, "abcdefgh", "content intact after a refusal");
	buf_consume(&b, 3);
	is_str(b.data, "defgh", "consume drops the head");
	buf_consume(&b, 5);
	is_str(b.data, "", "consume of everything empties it");
	is_int(buf_printf(&b, "%s%d", "defgh", 123), 0,
	       "printf within the limit");
	is_int(buf_printf(&b, "%s", "x"), -E2BIG,
	       "printf past the limit refused");
	s = buf_take(&b, &len);
	is_str(s, "defgh123", "take hands the text over");
	is_int(len, 8, "take reports the length");
	ok(b.data == NULL && b.len == 0, "take resets the buffer");
	free(s);
	s = buf_take(&b, NULL);
	ok(s && s[0] == '\0', "take of an empty buffer gives an empty string");
	free(s);
	is_int(buf_puts(&b, "kept"), 0, "append after a take");
	buf_finish(&b);
	ok(b.data == NULL && b.len == 0 && b.cap == 0,
	   "finish frees and clears the buffer");
	buf_init(&b, 8);
	is_int(buf_puts(&b, "again"), 0, "a finished buffer is reusable");
	is_str(b.data, "again", "its text after reuse");
	buf_finish(&b);
	is_int(exit_of_finish_null(), 0,
	       "finish accepts NULL (a child calls it)");
	return tap_done();
}
