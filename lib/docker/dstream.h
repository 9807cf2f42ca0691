/* SPDX-License-Identifier: MIT */
/*
 * dstream: an incremental demultiplexer for the Docker "raw stream" format
 * of attach, logs and exec when the container has no TTY. Each frame is an
 * 8-byte header (stream type, three zero bytes, a big-endian 32-bit length)
 * followed by that many payload bytes. Input may be fed in chunks of any
 * size, split anywhere; payload is handed to a callback as it arrives, so the
 * parser never allocates and never buffers more than one header, whatever a
 * header claims. Malformed input (unknown stream type, non-zero padding, a
 * frame larger than the cap) puts the parser in a sticky error state.
 *
 * Threads: a parser is plain caller memory used by one thread at a time.
 */
#ifndef MCPSD_DSTREAM_H
#define MCPSD_DSTREAM_H

#include <stddef.h>
#include <stdint.h>

enum dstream_id {
	DSTREAM_STDIN = 0, /* the engine documents it as written on stdout */
	DSTREAM_STDOUT = 1,
	DSTREAM_STDERR = 2,
	DSTREAM_SYSTEM = 3, /* engine-side errors (moby's Systemerr) */
};

#define DSTREAM_HEADER_LEN 8
#define DSTREAM_DEFAULT_MAX_FRAME (1024u * 1024u)

/*
 * Receives n > 0 payload bytes of stream id. A frame may arrive in several
 * calls. Returning a negative value stops the parser: dstream_feed returns
 * that value and every later call returns it too.
 */
typedef int (*dstream_fn)(void *arg, enum dstream_id id, const char *p,
                          size_t n);

struct dstream {
	/* private */
	dstream_fn fn;
	void *arg;
	uint32_t max_frame;
	unsigned char hdr[DSTREAM_HEADER_LEN];
	size_t hdr_len;     /* header bytes collected so far */
	uint32_t remaining; /* payload bytes left in the current frame */
	enum dstream_id cur;
	int error;       /* sticky: 0 or a negative errno */
	uint64_t offset; /* bytes consumed, for error messages */
};

/*
 * Initializes caller memory. max_frame caps the length a header may claim
 * (0 means DSTREAM_DEFAULT_MAX_FRAME). fn is required. Nothing to free.
 */
void dstream_init(struct dstream *ds, uint32_t max_frame, dstream_fn fn,
                  void *arg);

/*
 * Consumes n bytes. Returns 0, -EPROTO for a malformed header (unknown
 * stream type or non-zero padding), -EMSGSIZE for a frame above the cap, or
 * the callback's negative value. Errors are sticky.
 */
__attribute__((warn_unused_result)) int dstream_feed(struct dstream *ds,
                                                     const void *p, size_t n);

/*
 * Declares the end of input. Returns 0 when it fell on a frame boundary,
 * -EPIPE when a header or payload was cut short, or the sticky error.
 */
__attribute__((warn_unused_result)) int dstream_end(const struct dstream *ds);

/* Bytes consumed so far (up to the error, if any). */
uint64_t dstream_offset(const struct dstream *ds);

/* A short description of a dstream error code for messages and logs. */
const char *dstream_strerror(int err);

#endif
