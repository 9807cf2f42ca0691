/* SPDX-License-Identifier: MIT */
/*
 * buf: a growable byte buffer with a hard size limit, always NUL-terminated
 * so text can be used as a C string. Every append checks the limit before
 * growing, so a buffer filled from outside can never exceed what its owner
 * allowed. Not thread-safe; a buffer belongs to one thread at a time.
 */
#ifndef MCPSD_BUF_H
#define MCPSD_BUF_H

#include <stdarg.h>
#include <stddef.h>

struct buf {
	char *data; /* owned; NULL until the first append */
	size_t len;
	size_t cap;
	size_t limit; /* maximum len; 0 means SIZE_MAX / 2 */
};

/* Initializes caller memory; release with buf_finish. */
void buf_init(struct buf *b, size_t limit);
/* Frees the storage; the buffer may be reused after buf_init. NULL-safe. */
void buf_finish(struct buf *b);
/* Empties the buffer, keeping its storage. */
void buf_reset(struct buf *b);

/* Appends; -E2BIG past the limit (nothing appended), -ENOMEM. */
__attribute__((warn_unused_result)) int buf_append(struct buf *b, const void *p,
                                                   size_t n);
__attribute__((warn_unused_result)) int buf_puts(struct buf *b, const char *s);
__attribute__((warn_unused_result)) int buf_putc(struct buf *b, char c);
__attribute__((warn_unused_result, format(printf, 2, 3))) int
buf_printf(struct buf *b, const char *fmt, ...);
__attribute__((warn_unused_result, format(printf, 2, 0))) int
buf_vprintf(struct buf *b, const char *fmt, va_list ap);

/*
 * Hands the storage to the caller (free with free()) and resets the buffer.
 * Returns an empty allocated string when nothing was appended, NULL only on
 * allocation failure. *len (optional) receives the length.
 */
char *buf_take(struct buf *b, size_t *len);

/*
 * printf into a fresh allocation (free with free()); NULL on allocation
 * failure or a bad format.
 */
char *buf_asprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Removes the first n bytes (n <= len). */
void buf_consume(struct buf *b, size_t n);

#endif
