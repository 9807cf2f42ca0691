/* SPDX-License-Identifier: MIT */
/*
 * audit_canon: the pure half of the audit trail (audit.h): the canonical
 * encoding of an entry, the hash that links it to the one before, and the
 * check of a chain read back in order. Nothing here touches the store, so
 * the rules that make a trail verifiable are tested (and fuzzed) alone.
 *
 * The canonical encoding of a JSON value is one byte string, whoever
 * produced the value: objects with their keys sorted bytewise and no
 * duplicates, no whitespace, numbers only as integers within +-2^53
 * (written in decimal without exponent or leading zeros), strings in valid
 * UTF-8 with '"', '\\' and the bytes below 0x20 escaped (\b \f \n \r \t, the
 * rest as \u00XX) and nothing else escaped. An entry's hash is the SHA-256
 * (lower-case hex) of the previous entry's hash, a newline, and the entry's
 * canonical text; the first entry continues from AUDIT_GENESIS.
 *
 * Stateless and thread-safe; a struct audit_check belongs to its caller.
 */
#ifndef MCPSD_AUDIT_CANON_H
#define MCPSD_AUDIT_CANON_H

#include <stdbool.h>
#include <stddef.h>

#include <cjson/cJSON.h>

#include "util/buf.h"

#define AUDIT_HASH_HEX 64
/* What the first entry of a trail continues from. */
#define AUDIT_GENESIS                                                          \
	"0000000000000000000000000000000000000000000000000000000000000000"

/*
 * Appends the canonical text of v to out. -EINVAL (with what was wrong in
 * err) for a value that has none: a number that is not an integer or is
 * out of range, a string that is not valid UTF-8, duplicate keys; -ENOMEM
 * (or the buffer's limit). out is left with a partial text on error.
 */
__attribute__((warn_unused_result)) int
audit_canon(const cJSON *v, struct buf *out, char *err, size_t errlen);

/* Whether the n bytes at p are valid UTF-8 (no overlongs, surrogates). */
bool audit_utf8_valid(const char *p, size_t n);

/*
 * out (AUDIT_HASH_HEX + 1 bytes) = hex SHA-256 of prev, "\n" and the n
 * bytes of body. 0, or -EIO when the digest fails.
 */
__attribute__((warn_unused_result)) int
audit_chain_hash(const char *prev, const char *body, size_t n, char *out);

/* hex SHA-256 of n bytes into out (AUDIT_HASH_HEX + 1). 0 or -EIO. */
__attribute__((warn_unused_result)) int audit_sha256_hex(const void *p,
                                                         size_t n, char *out);

/* One stored entry, as read back (every field borrowed). */
struct audit_row {
	long long seq;
	long long time_ms;
	const char *kind; /* "run", "checkpoint" */
	const char *tenant;
	const char *conversation;
	const char *prev;
	const char *hash;
	const char *body;
};

/*
 * A walk over a trail in seq order that stops at the first broken link.
 * The first entry must continue from anchor: AUDIT_GENESIS when the trail
 * starts at seq 1, else the hash a checkpoint recorded for the entry
 * before it (audit.c finds it).
 */
struct audit_check {
	long long next_seq; /* the seq the next row must have */
	char prev[AUDIT_HASH_HEX + 1];
	long long entries;
	bool broken;
	long long broken_seq;
	char reason[300];
};

/* Starts a walk at first_seq, continuing from anchor (64 hex). */
void audit_check_begin(struct audit_check *c, long long first_seq,
                       const char *anchor);

/*
 * Checks one row: its seq is the next, its prev the last hash, its body
 * canonical and agreeing with the row's columns (seq, time, kind, tenant,
 * conversation), its hash right. Returns false (and records where and why,
 * for a person) at the first row that is not; every later call returns
 * false too.
 */
bool audit_check_row(struct audit_check *c, const struct audit_row *row);

#endif
