/* SPDX-License-Identifier: MIT */
/*
 * capture: the output of one program: captures (head and tail of each
 * stream within a fixed inline budget, optionally a whole copy in a file
 * descriptor) and, for a one-off run, the drive of the box's stream
 * (backend.h): stdin in, stdout and stderr out, until the first of end of
 * output, a deadline, a total output cap or a cancellation. It does not
 * know which backend made the stream nor what happens to the program
 * afterwards; warm sessions feed the same captures from their own protocol.
 *
 * Threads: a capture and a run belong to one thread.
 */
#ifndef MCPSD_ATTACHIO_H
#define MCPSD_ATTACHIO_H

#include <stdbool.h>
#include <stddef.h>

#include "backend/backend.h"
#include "util/buf.h"

/* The head and tail of one output stream, within a fixed budget. */
struct capture {
	size_t total; /* bytes the program wrote */
	size_t saved; /* bytes copied to fd */
	/* private */
	char *head, *tail;
	size_t head_cap, head_len;
	size_t tail_cap, tail_len, tail_pos; /* ring */
	int fd;
	size_t fd_limit;
	bool fd_failed;
	/* capture_lazy_file's: fd made only when first needed. */
	int (*fd_open)(void *arg, int which);
	void *fd_arg;
	int fd_which;
};

/*
 * Prepares caller memory: inline_bytes of memory split between head and
 * tail, allocated now and never grown; every byte is also written to fd
 * (-1 for none) up to fd_limit. -ENOMEM. Release with
 * capture_finish whatever the result.
 */
__attribute__((warn_unused_result)) int
capture_init(struct capture *c, size_t inline_bytes, int fd, size_t fd_limit);
void capture_finish(struct capture *c);

/*
 * Instead of an fd given to capture_init (which must have been -1): the
 * whole copy goes to the file open(arg, which) returns (-1: none), made
 * only once the output no longer fits the inline budget (the head and
 * tail then hold every byte so far, which are written to it first). The
 * fd is open's caller's to close. Most runs print less than the budget
 * and need no file at all.
 */
void capture_lazy_file(struct capture *c, int (*open)(void *arg, int which),
                       void *arg, int which);

/*
 * A run's two captures (stdout, then stderr) as capture_init makes them,
 * with the copies in out_fd and err_fd, or, when both are -1 and open is
 * set, in files open makes when needed (capture_lazy_file). -ENOMEM.
 */
__attribute__((warn_unused_result)) int
capture_init_run(struct capture *out, struct capture *err, size_t inline_bytes,
                 size_t fd_limit, int out_fd, int err_fd,
                 int (*open)(void *arg, int which), void *arg);

/* Adds program output. Never fails; a failing fd is logged and dropped. */
void capture_add(struct capture *c, const char *p, size_t n);

/*
 * The stream as valid UTF-8 text (caller frees): all of it, or the head, a
 * line "[... N bytes omitted ...]" and the tail, cut on character
 * boundaries. *truncated says which. NULL on allocation failure.
 */
char *capture_text(const struct capture *c, bool *truncated);

/*
 * Makes valid UTF-8 of n bytes of program output: invalid sequences and NUL
 * become U+FFFD. Appends to out. -ENOMEM, -E2BIG (out's limit).
 */
__attribute__((warn_unused_result)) int
capture_utf8_sanitize(const char *p, size_t n, struct buf *out);

enum capture_end {
	CAPTURE_EOF,      /* the program closed its output */
	CAPTURE_DEADLINE, /* the deadline passed */
	CAPTURE_LIMIT,    /* output passed max_total */
	CAPTURE_CANCEL,   /* cancel_fd became readable */
	CAPTURE_BROKEN,   /* the stream failed or was malformed */
};

struct capture_params {
	const char *in; /* stdin bytes, or NULL */
	size_t in_len;
	long long deadline; /* mono_ms() clock (util/mono.h) */
	int cancel_fd;      /* readable means cancel; -1 for none */
	size_t max_total;   /* stdout + stderr bytes before CAPTURE_LIMIT */
	struct capture *out, *err; /* borrowed */
	/* Optional: sees every piece of output as it arrives (which: 1, 2). */
	void (*on_output)(void *arg, int which, const char *p, size_t n);
	/* Optional: called about once a second while the drive goes on. */
	void (*on_tick)(void *arg);
	void *output_arg;
};

/*
 * Drives the stream until one of the ends above; stdin is closed
 * (shutdown(SHUT_WR)) once written. Does not close the stream: after
 * anything but CAPTURE_EOF the caller must close it before killing the
 * program (moby#41827). err gets a message for CAPTURE_BROKEN.
 */
enum capture_end capture_run(struct box_stream *s,
                             const struct capture_params *p, char *err,
                             size_t errlen);

#endif
