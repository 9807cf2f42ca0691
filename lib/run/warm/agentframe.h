/* SPDX-License-Identifier: MIT */
/*
 * agentframe: the wire format between the daemon and the in-container agent
 * (docs/agent-protocol.md), shared by both. Pure C on libc only, so the
 * agent, a static binary built apart from the daemon's library, compiles
 * the same file.
 *
 * A frame is a 4-byte big-endian length L (at least 1), a type byte and
 * L - 1 payload bytes. The decoder is incremental: bytes are fed in chunks
 * of any size, split anywhere, and every complete frame is handed to a
 * callback. It never holds more than one frame, and never allocates more
 * than the cap the caller gave, whatever a header claims. Requests carry
 * TLV records (a tag byte, a 4-byte big-endian length, the value), iterated
 * with bounds checks; replies carry JSON, whose strings are written with
 * agentframe_json_str.
 *
 * Errors: negative errno values; -EMSGSIZE for a length above the cap,
 * -EPROTO for a zero length or a malformed record, -ENOMEM, -ENOSPC when
 * an encoding does not fit the caller's buffer.
 *
 * Threads: no global state; a decoder belongs to one thread at a time.
 */
#ifndef MCPSD_AGENTFRAME_H
#define MCPSD_AGENTFRAME_H

#include <stddef.h>
#include <stdint.h>

#define AGENTFRAME_LEN_BYTES 4 /* the length prefix */
#define AGENTFRAME_HDR 5       /* length prefix and type byte */
#define AGENTFRAME_TLV_HDR 5   /* tag byte and 4-byte length */

/* Largest L the daemon sends to the agent (and the agent to the kernel). */
#define AGENTFRAME_MAX_IN (1024u * 1024u)
/* Largest L the agent sends to the daemon, and the kernel to the agent. */
#define AGENTFRAME_MAX (256u * 1024u)
/* Largest payload of an output frame (`o`, `e`). */
#define AGENTFRAME_OUTPUT_CHUNK (64u * 1024u)
/* Largest exec id: ids travel as JSON numbers, exact up to 2^53 - 1. */
#define AGENTFRAME_ID_MAX 9007199254740991ull

/*
 * Writes the 5-byte header (length and type) of a frame whose payload is
 * payload_len bytes. -EMSGSIZE when payload_len + 1 exceeds max.
 */
__attribute__((warn_unused_result)) int
agentframe_header(unsigned char hdr[AGENTFRAME_HDR], unsigned char type,
                  size_t payload_len, uint32_t max);

/*
 * Receives one whole frame: its type and payload (n may be 0). p is
 * borrowed, valid only during the call. A negative return stops the
 * decoder: agentframe_feed returns that value, now and on every later call.
 */
typedef int (*agentframe_fn)(void *arg, unsigned char type,
                             const unsigned char *p, size_t n);

struct agentframe_decoder {
	/* private */
	uint32_t max; /* largest L accepted */
	unsigned char len[AGENTFRAME_LEN_BYTES];
	size_t len_have;    /* length bytes collected */
	uint32_t frame_len; /* L of the frame being collected, 0 between */
	unsigned char *buf; /* owned; holds a frame split across feeds */
	size_t buf_cap;
	size_t buf_have;
	int error;       /* sticky: 0 or a negative errno */
	uint64_t offset; /* bytes consumed, for messages */
};

/*
 * Initializes caller memory for frames of L at most max (1 ..
 * AGENTFRAME_MAX_IN * 16). Release with agentframe_decoder_finish.
 */
void agentframe_decoder_init(struct agentframe_decoder *d, uint32_t max);

/* Frees what the decoder holds; it may be initialized again. NULL-safe. */
void agentframe_decoder_finish(struct agentframe_decoder *d);

/*
 * Consumes n bytes, calling fn for each frame completed. A frame that lies
 * entirely within one call is passed without copying; a split one is
 * collected in a buffer of at most its length. Returns 0, -EMSGSIZE,
 * -EPROTO (L = 0), -ENOMEM, or fn's negative value; errors are sticky and
 * nothing is consumed after one.
 */
__attribute__((warn_unused_result)) int
agentframe_feed(struct agentframe_decoder *d, const void *p, size_t n,
                agentframe_fn fn, void *arg);

/*
 * Declares the end of input: 0 on a frame boundary, -EPIPE when a frame
 * was cut short, or the sticky error.
 */
__attribute__((warn_unused_result)) int
agentframe_end(const struct agentframe_decoder *d);

/* Bytes consumed so far (up to the error, if any). */
uint64_t agentframe_offset(const struct agentframe_decoder *d);

/* Bytes held for a frame split across feeds (for memory accounting). */
size_t agentframe_buffered(const struct agentframe_decoder *d);

/* A short description of an agentframe error code. */
const char *agentframe_strerror(int err);

/* ---- TLV records --------------------------------------------------------- */

/*
 * Appends one record (tag, len, value) at dst[*off] within cap bytes and
 * advances *off. -ENOSPC when it does not fit (nothing written), -EMSGSIZE
 * when len does not fit in 32 bits.
 */
__attribute__((warn_unused_result)) int
agentframe_tlv_put(void *dst, size_t cap, size_t *off, unsigned char tag,
                   const void *val, size_t len);

struct agentframe_tlv {
	/* private */
	const unsigned char *p;
	size_t n, off;
};

/* Starts iterating the records of p[0..n) (borrowed for the iteration). */
void agentframe_tlv_init(struct agentframe_tlv *it, const void *p, size_t n);

/*
 * The next record: returns 1 and sets *tag, *val (borrowed from the
 * payload) and *len; 0 at the end; -EPROTO when the rest is not a whole
 * record (the iteration then stays at the error).
 */
__attribute__((warn_unused_result)) int
agentframe_tlv_next(struct agentframe_tlv *it, unsigned char *tag,
                    const unsigned char **val, size_t *len);

/* 0 when p[0..n) is a sequence of whole records, else -EPROTO. */
__attribute__((warn_unused_result)) int agentframe_tlv_check(const void *p,
                                                             size_t n);

/*
 * Parses an exec id: decimal digits, no sign, no leading zero (except "0"),
 * at most AGENTFRAME_ID_MAX. -EINVAL otherwise.
 */
__attribute__((warn_unused_result)) int
agentframe_parse_id(const void *p, size_t n, uint64_t *out);

/* ---- JSON strings ------------------------------------------------------ */

/*
 * Writes src[0..n) as a quoted JSON string into dst (cap bytes, always
 * NUL-terminated when cap > 0) and returns the length the whole string
 * needs, excluding the NUL, like snprintf: a result >= cap means it was cut
 * short (at a character boundary, so what was written is still valid
 * UTF-8, but not a whole JSON string). Quotes, backslashes and control
 * characters are escaped; bytes that are not valid UTF-8 (overlong forms,
 * surrogates, code points above U+10FFFF, truncated sequences) become
 * U+FFFD, so the output always parses.
 */
size_t agentframe_json_str(char *dst, size_t cap, const void *src, size_t n);

/* The largest length agentframe_json_str can return for n input bytes. */
#define AGENTFRAME_JSON_STR_MAX(n) ((n)*6 + 2)

#endif
