/* SPDX-License-Identifier: MIT */
/*
 * docker_stream: an incremental demultiplexer for the Docker "raw stream"
 * format of attach, logs and exec when the container has no TTY. Each frame is
 * an 8-byte header (stream type, three zero bytes, a big-endian 32-bit length)
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

enum docker_stream_id {
	DOCKER_STREAM_STDIN =
	    0, /* the engine documents it as written on stdout */
	DOCKER_STREAM_STDOUT = 1,
	DOCKER_STREAM_STDERR = 2,
	DOCKER_STREAM_SYSTEM = 3, /* engine-side errors (moby's Systemerr) */
};

#define DOCKER_STREAM_HEADER_LEN 8
#define DOCKER_STREAM_DEFAULT_MAX_FRAME (1024u * 1024u)

/*
 * Receives n > 0 payload bytes of stream id. A frame may arrive in several
 * calls. Returning a negative value stops the parser: docker_stream_feed
 * returns that value and every later call returns it too.
 */
typedef int (*docker_stream_fn)(void *arg, enum docker_stream_id id,
                                const char *p, size_t n);

struct docker_stream {
	/* private */
	docker_stream_fn fn;
	void *arg;
	uint32_t max_frame;
	unsigned char hdr[DOCKER_STREAM_HEADER_LEN];
	size_t hdr_len;     /* header bytes collected so far */
	uint32_t remaining; /* payload bytes left in the current frame */
	enum docker_stream_id cur;
	int error;       /* sticky: 0 or a negative errno */
	uint64_t offset; /* bytes consumed, for error messages */
};

/*
 * Initializes caller memory. max_frame caps the length a header may claim
 * (0 means DOCKER_STREAM_DEFAULT_MAX_FRAME). fn is required. Nothing to free.
 */
void docker_stream_init(struct docker_stream *ds, uint32_t max_frame,
                        docker_stream_fn fn, void *arg);

/*
 * Consumes n bytes. Returns 0, -EPROTO for a malformed header (unknown
 * stream type or non-zero padding), -EMSGSIZE for a frame above the cap, or
 * the callback's negative value. Errors are sticky.
 */
__attribute__((warn_unused_result)) int
docker_stream_feed(struct docker_stream *ds, const void *p, size_t n);

/*
 * Declares the end of input. Returns 0 when it fell on a frame boundary,
 * -EPIPE when a header or payload was cut short, or the sticky error.
 */
__attribute__((warn_unused_result)) int
docker_stream_end(const struct docker_stream *ds);

/* Bytes consumed so far (up to the error, if any). */
uint64_t docker_stream_offset(const struct docker_stream *ds);

/* A short description of a docker_stream error code for messages and logs. */
const char *docker_stream_strerror(int err);

#endif
