/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"
#include "util/buf.h"

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
	buf_finish(&b);
	buf_finish(NULL);
	ok(true, "finish accepts NULL");
	return tap_done();
}
