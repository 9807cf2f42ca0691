/* SPDX-License-Identifier: MIT */
/*
 * fuzz_audit: the audit trail's canonical encoding and the usage report's
 * question, both of which take outside text (tool arguments and query
 * parameters; JSON read back from the store). The input's first three
 * lines are a usage question (from, to, bucket); a question that parses
 * has from < to on whole hours and a known bucket, one that does not has
 * a message. The rest is JSON: when it has a canonical text, that text is
 * valid UTF-8, parses back, and encodes to itself (the encoding is
 * idempotent); a chain of one entry built on it checks. Any violation
 * aborts.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "audit/audit_canon.h"
#include "audit/usage.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The next line of s (NUL-terminated copy, caller frees). */
static char *next_line(const char **s, const char *end)
{
	const char *nl = memchr(*s, '\n', (size_t)(end - *s));
	size_t n = nl ? (size_t)(nl - *s) : (size_t)(end - *s);
	char *l = strndup(*s, n);

	*s += nl ? n + 1 : n;
	return l;
}

static void question(const char **p, const char *end)
{
	char *from = next_line(p, end), *to = next_line(p, end);
	char *bucket = next_line(p, end);
	struct usage_query q;
	char err[256] = "";

	if (from && to && bucket &&
	    usage_query_parse(from[0] ? from : NULL, to[0] ? to : NULL,
	                      bucket[0] ? bucket : NULL, 1764324000, &q, err,
	                      sizeof(err)) == 0) {
		if (q.from_s >= q.to_s || q.from_s % 3600 || q.to_s % 3600 ||
		    (q.bucket_s != 0 && q.bucket_s != 3600 &&
		     q.bucket_s != 86400))
			abort();
	} else if (from && to && bucket && !err[0]) {
		abort();
	}
	free(from);
	free(to);
	free(bucket);
}

static void encoding(const char *json, size_t n)
{
	cJSON *v = cJSON_ParseWithLength(json, n), *again;
	struct buf a, b;
	char err[128], hash[AUDIT_HASH_HEX + 1];

	if (!v)
		return;
	buf_init(&a, 1u << 22);
	buf_init(&b, 1u << 22);
	if (audit_canon(v, &a, err, sizeof(err)) == 0 && a.data) {
		if (!audit_utf8_valid(a.data, a.len) || strlen(a.data) != a.len)
			abort();
		again = cJSON_Parse(a.data);
		if (!again || audit_canon(again, &b, err, sizeof(err)) != 0 ||
		    !b.data || strcmp(a.data, b.data) != 0)
			abort();
		cJSON_Delete(again);
		if (audit_chain_hash(AUDIT_GENESIS, a.data, a.len, hash) != 0 ||
		    strlen(hash) != AUDIT_HASH_HEX)
			abort();
	}
	buf_finish(&a);
	buf_finish(&b);
	cJSON_Delete(v);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *p = (const char *)data, *end = p + size;

	question(&p, end);
	encoding(p, (size_t)(end - p));
	return 0;
}
