/* SPDX-License-Identifier: MIT */
/*
 * audit_canon: see audit_canon.h. Stateless; recursion is bounded by
 * cJSON's nesting limit (CJSON_NESTING_LIMIT) on parsed values.
 */
#include "audit/audit_canon.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "util/errmsg.h"
#include "util/hex.h"

#define AUDIT_INT_MAX 9007199254740992.0 /* 2^53 */

bool audit_utf8_valid(const char *p, size_t n)
{
	const unsigned char *s = (const unsigned char *)p;
	size_t i = 0;

	while (i < n) {
		unsigned c = s[i], need, min, cp;

		if (c < 0x80) {
			i++;
			continue;
		}
		if (c >= 0xc2 && c <= 0xdf) {
			need = 1, min = 0x80, cp = c & 0x1f;
		} else if (c >= 0xe0 && c <= 0xef) {
			need = 2, min = 0x800, cp = c & 0x0f;
		} else if (c >= 0xf0 && c <= 0xf4) {
			need = 3, min = 0x10000, cp = c & 0x07;
		} else {
			return false;
		}
		if (n - i <= need)
			return false;
		for (unsigned k = 1; k <= need; k++) {
			if ((s[i + k] & 0xc0) != 0x80)
				return false;
			cp = cp << 6 | (s[i + k] & 0x3f);
		}
		if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
			return false;
		i += need + 1;
	}
	return true;
}

static int canon_string(const char *s, struct buf *out, char *err,
                        size_t errlen)
{
	size_t n = strlen(s), run = 0;
	int r;

	if (!audit_utf8_valid(s, n))
		return errmsg_fail(-EINVAL, err, errlen,
		                   "a string is not valid UTF-8");
	r = buf_putc(out, '"');
	for (size_t i = 0; i < n && r == 0; i++) {
		unsigned char c = (unsigned char)s[i];
		const char *esc = NULL;
		char u[8];

		if (c == '"')
			esc = "\\\"";
		else if (c == '\\')
			esc = "\\\\";
		else if (c == '\b')
			esc = "\\b";
		else if (c == '\f')
			esc = "\\f";
		else if (c == '\n')
			esc = "\\n";
		else if (c == '\r')
			esc = "\\r";
		else if (c == '\t')
			esc = "\\t";
		else if (c < 0x20)
			esc = (snprintf(u, sizeof(u), "\\u%04x", c), u);
		if (!esc) {
			run++;
			continue;
		}
		r = buf_append(out, s + i - run, run);
		run = 0;
		if (r == 0)
			r = buf_puts(out, esc);
	}
	if (r == 0)
		r = buf_append(out, s + n - run, run);
	if (r == 0)
		r = buf_putc(out, '"');
	return r;
}

static int canon_number(double v, struct buf *out, char *err, size_t errlen)
{
	if (!isfinite(v) || v != floor(v) || fabs(v) > AUDIT_INT_MAX)
		return errmsg_fail(-EINVAL, err, errlen,
		                   "a number is not an integer within +-2^53");
	return buf_printf(out, "%lld", (long long)v);
}

static int by_key(const void *a, const void *b)
{
	const cJSON *x = *(const cJSON *const *)a;
	const cJSON *y = *(const cJSON *const *)b;

	return strcmp(x->string, y->string);
}

static int canon_object(const cJSON *v, struct buf *out, char *err,
                        size_t errlen)
{
	const cJSON **kids;
	const cJSON *k;
	size_t n = 0, i = 0;
	int r = 0;

	cJSON_ArrayForEach (k, v)
		n++;
	if (n == 0)
		return buf_puts(out, "{}");
	kids = calloc(n, sizeof(*kids));
	if (!kids)
		return -ENOMEM;
	cJSON_ArrayForEach (k, v)
		kids[i++] = k;
	qsort(kids, n, sizeof(*kids), by_key);
	r = buf_putc(out, '{');
	for (i = 0; i < n && r == 0; i++) {
		if (i && strcmp(kids[i - 1]->string, kids[i]->string) == 0) {
			r = errmsg_fail(-EINVAL, err, errlen,
			                "key \"%.40s\" appears twice",
			                kids[i]->string);
			break;
		}
		if (i)
			r = buf_putc(out, ',');
		if (r == 0)
			r = canon_string(kids[i]->string, out, err, errlen);
		if (r == 0)
			r = buf_putc(out, ':');
		if (r == 0)
			r = audit_canon(kids[i], out, err, errlen);
	}
	if (r == 0)
		r = buf_putc(out, '}');
	free(kids);
	return r;
}

int audit_canon(const cJSON *v, struct buf *out, char *err, size_t errlen)
{
	const cJSON *k;
	int r = 0;

	if (!v)
		return errmsg_fail(-EINVAL, err, errlen, "no value");
	if (cJSON_IsNull(v))
		return buf_puts(out, "null");
	if (cJSON_IsTrue(v))
		return buf_puts(out, "true");
	if (cJSON_IsFalse(v))
		return buf_puts(out, "false");
	if (cJSON_IsNumber(v))
		return canon_number(v->valuedouble, out, err, errlen);
	if (cJSON_IsString(v))
		return canon_string(v->valuestring, out, err, errlen);
	if (cJSON_IsObject(v))
		return canon_object(v, out, err, errlen);
	if (!cJSON_IsArray(v))
		return errmsg_fail(-EINVAL, err, errlen,
		                   "a value of an unknown kind");
	r = buf_putc(out, '[');
	cJSON_ArrayForEach (k, v) {
		if (r == 0 && k != v->child)
			r = buf_putc(out, ',');
		if (r == 0)
			r = audit_canon(k, out, err, errlen);
	}
	if (r == 0)
		r = buf_putc(out, ']');
	return r;
}

int audit_sha256_hex(const void *p, size_t n, char *out)
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned len = 0;

	out[0] = '\0';
	if (EVP_Digest(p, n, md, &len, EVP_sha256(), NULL) != 1 || len != 32)
		return -EIO;
	hex_encode(md, 32, out);
	return 0;
}

int audit_chain_hash(const char *prev, const char *body, size_t n, char *out)
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned len = 0;
	EVP_MD_CTX *c = EVP_MD_CTX_new();
	bool ok = c && EVP_DigestInit_ex(c, EVP_sha256(), NULL) == 1 &&
	          EVP_DigestUpdate(c, prev, strlen(prev)) == 1 &&
	          EVP_DigestUpdate(c, "\n", 1) == 1 &&
	          EVP_DigestUpdate(c, body, n) == 1 &&
	          EVP_DigestFinal_ex(c, md, &len) == 1 && len == 32;

	EVP_MD_CTX_free(c);
	out[0] = '\0';
	if (!ok)
		return -EIO;
	hex_encode(md, 32, out);
	return 0;
}

/* ---- checking a chain ---------------------------------------------------- */

void audit_check_begin(struct audit_check *c, long long first_seq,
                       const char *anchor)
{
	memset(c, 0, sizeof(*c));
	c->next_seq = first_seq;
	snprintf(c->prev, sizeof(c->prev), "%s", anchor ? anchor : "");
}

static bool check_fail(struct audit_check *c, long long seq, const char *fmt,
                       ...) __attribute__((format(printf, 3, 4)));

static bool check_fail(struct audit_check *c, long long seq, const char *fmt,
                       ...)
{
	va_list ap;

	c->broken = true;
	c->broken_seq = seq;
	va_start(ap, fmt);
	errmsg_vset(c->reason, sizeof(c->reason), fmt, ap);
	va_end(ap);
	return false;
}

/* Whether the body's field name is the string want (NULL: absent ok). */
static bool field_is(const cJSON *body, const char *name, const char *want)
{
	const cJSON *f = cJSON_GetObjectItemCaseSensitive(body, name);

	return cJSON_IsString(f) && strcmp(f->valuestring, want) == 0;
}

static bool field_int(const cJSON *body, const char *name, long long want)
{
	const cJSON *f = cJSON_GetObjectItemCaseSensitive(body, name);

	return cJSON_IsNumber(f) && (long long)f->valuedouble == want;
}

/* The body is canonical and says what the row's columns say. */
static bool check_body(struct audit_check *c, const struct audit_row *row)
{
	cJSON *body = cJSON_Parse(row->body);
	struct buf b;
	char why[128] = "";
	bool same;

	if (!body)
		return check_fail(c, row->seq,
		                  "entry %lld: its text is not JSON", row->seq);
	buf_init(&b, 0);
	same = audit_canon(body, &b, why, sizeof(why)) == 0 && b.data &&
	       strcmp(b.data, row->body) == 0;
	buf_finish(&b);
	if (!same) {
		cJSON_Delete(body);
		return check_fail(c, row->seq,
		                  "entry %lld: its text is not in canonical "
		                  "form%s%s (it was written by something else "
		                  "than the daemon)",
		                  row->seq, why[0] ? ": " : "", why);
	}
	same = field_int(body, "seq", row->seq) &&
	       field_int(body, "time_ms", row->time_ms) &&
	       field_is(body, "kind", row->kind) &&
	       field_is(body, "tenant", row->tenant) &&
	       field_is(body, "conversation", row->conversation);
	cJSON_Delete(body);
	if (!same)
		return check_fail(c, row->seq,
		                  "entry %lld: its columns (seq, time, kind, "
		                  "tenant, conversation) disagree with its "
		                  "hashed text: a column was altered",
		                  row->seq);
	return true;
}

bool audit_check_row(struct audit_check *c, const struct audit_row *row)
{
	char want[AUDIT_HASH_HEX + 1];

	if (c->broken)
		return false;
	if (row->seq != c->next_seq)
		return row->seq > c->next_seq
		           ? check_fail(c, c->next_seq,
		                        "entry %lld is missing: the trail "
		                        "goes from %lld to %lld",
		                        c->next_seq, c->next_seq - 1, row->seq)
		           : check_fail(c, row->seq,
		                        "entry %lld appears out of order "
		                        "(expected %lld)",
		                        row->seq, c->next_seq);
	if (!row->prev || strcmp(row->prev, c->prev) != 0)
		return check_fail(c, row->seq,
		                  "entry %lld does not continue from the hash "
		                  "of the entry before it: an entry before it "
		                  "was altered, removed or inserted",
		                  row->seq);
	if (!row->body || !row->hash || !row->kind || !row->tenant ||
	    !row->conversation)
		return check_fail(c, row->seq, "entry %lld has an empty field",
		                  row->seq);
	if (audit_chain_hash(row->prev, row->body, strlen(row->body), want) < 0)
		return check_fail(c, row->seq, "entry %lld: hashing failed",
		                  row->seq);
	if (strcmp(want, row->hash) != 0)
		return check_fail(c, row->seq,
		                  "entry %lld was altered: its hash does not "
		                  "match its text",
		                  row->seq);
	if (!check_body(c, row))
		return false;
	snprintf(c->prev, sizeof(c->prev), "%s", row->hash);
	c->next_seq = row->seq + 1;
	c->entries++;
	return true;
}
