/* SPDX-License-Identifier: MIT */
/*
 * oauth_form: see oauth_form.h. Values are decoded into fresh allocations
 * bounded by OAUTH_FORM_MAX_VALUE before anything is allocated for them.
 */
#include "oauth/oauth_form.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/crypto.h>

#include "util/b64.h"
#include "util/errmsg.h"
#include "util/pct.h"

void oauth_form_init(struct oauth_form *f)
{
	memset(f, 0, sizeof(*f));
}

void oauth_form_finish(struct oauth_form *f)
{
	if (!f)
		return;
	for (size_t i = 0; i < f->n; i++) {
		free(f->p[i].key);
		free(f->p[i].value);
	}
	memset(f, 0, sizeof(*f));
}

static bool text_ok(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c < 0x20 || c == 0x7f)
			return false;
	}
	return true;
}

/* Appends a key and value the form takes ownership of (freed on error). */
static int add_owned(struct oauth_form *f, char *key, char *value, char *err,
                     size_t errlen)
{
	for (size_t i = 0; i < f->n; i++) {
		if (strcmp(f->p[i].key, key) == 0) {
			errmsg_set(err, errlen,
			           "parameter '%s' is given more than once; "
			           "send it once",
			           key);
			free(key);
			free(value);
			return -EEXIST;
		}
	}
	if (f->n == OAUTH_FORM_MAX_PARAMS) {
		free(key);
		free(value);
		return errmsg_fail(-E2BIG, err, errlen,
		                   "more than %d parameters; send only the "
		                   "ones the request needs",
		                   OAUTH_FORM_MAX_PARAMS);
	}
	f->p[f->n].key = key;
	f->p[f->n].value = value;
	f->n++;
	return 0;
}

int oauth_form_add(struct oauth_form *f, const char *key, const char *value,
                   char *err, size_t errlen)
{
	size_t kl = strlen(key), vl = value ? strlen(value) : 0;
	char *k, *v;

	if (kl == 0 || kl > OAUTH_FORM_MAX_KEY || !text_ok(key, kl))
		return errmsg_fail(-EINVAL, err, errlen,
		                   "a parameter name is empty, too long or "
		                   "has control characters");
	if (vl > OAUTH_FORM_MAX_VALUE)
		return errmsg_fail(-E2BIG, err, errlen,
		                   "parameter '%s' is longer than %d bytes",
		                   key, OAUTH_FORM_MAX_VALUE);
	if (!text_ok(value ? value : "", vl))
		return errmsg_fail(-EINVAL, err, errlen,
		                   "parameter '%s' contains a control "
		                   "character",
		                   key);
	k = strdup(key);
	v = strdup(value ? value : "");
	if (!k || !v) {
		free(k);
		free(v);
		return errmsg_fail(-ENOMEM, err, errlen, "out of memory");
	}
	return add_owned(f, k, v, err, errlen);
}

/* Decodes one component ('+' is a space) into a fresh string. */
static int decode(const char *s, size_t n, size_t max, char **out,
                  const char *what, char *err, size_t errlen)
{
	char *tmp, *dst;
	size_t len = 0;
	int r;

	*out = NULL;
	/* Every escape is 3 bytes for 1: a longer input cannot fit. */
	if (n > 3 * max)
		return errmsg_fail(-E2BIG, err, errlen,
		                   "a %s is longer than %zu bytes", what, max);
	tmp = malloc(n + 1);
	dst = malloc(n + 1);
	if (!tmp || !dst) {
		free(tmp);
		free(dst);
		return errmsg_fail(-ENOMEM, err, errlen, "out of memory");
	}
	for (size_t i = 0; i < n; i++)
		tmp[i] = s[i] == '+' ? ' ' : s[i];
	r = pct_decode(tmp, n, dst, n + 1, &len, NULL);
	free(tmp);
	if (r < 0) {
		free(dst);
		return errmsg_fail(-EINVAL, err, errlen,
		                   "a %s has a malformed %%-escape", what);
	}
	if (len > max) {
		free(dst);
		return errmsg_fail(-E2BIG, err, errlen,
		                   "a %s is longer than %zu bytes", what, max);
	}
	if (!text_ok(dst, len)) {
		free(dst);
		return errmsg_fail(-EINVAL, err, errlen,
		                   "a %s contains a NUL or control character",
		                   what);
	}
	*out = dst;
	return 0;
}

int oauth_form_parse(struct oauth_form *f, const char *s, size_t n, char *err,
                     size_t errlen)
{
	size_t i = 0;

	while (i < n) {
		const char *seg = s + i;
		const char *amp = memchr(seg, '&', n - i);
		size_t sl = amp ? (size_t)(amp - seg) : n - i;
		const char *eq = memchr(seg, '=', sl);
		size_t kl = eq ? (size_t)(eq - seg) : sl;
		char *k = NULL, *v = NULL;
		int r;

		i += sl + 1;
		if (sl == 0)
			continue; /* "a=1&&b=2" */
		r = decode(seg, kl, OAUTH_FORM_MAX_KEY, &k, "parameter name",
		           err, errlen);
		if (r == 0 && !*k)
			r = errmsg_fail(-EINVAL, err, errlen,
			                "a parameter has no name");
		if (r == 0)
			r = decode(eq ? eq + 1 : seg + sl, eq ? sl - kl - 1 : 0,
			           OAUTH_FORM_MAX_VALUE, &v, "parameter value",
			           err, errlen);
		if (r < 0) {
			free(k);
			free(v);
			return r;
		}
		r = add_owned(f, k, v, err, errlen);
		if (r < 0)
			return r;
	}
	return 0;
}

const char *oauth_form_get(const struct oauth_form *f, const char *key)
{
	for (size_t i = 0; i < f->n; i++) {
		if (strcmp(f->p[i].key, key) == 0)
			return f->p[i].value[0] ? f->p[i].value : NULL;
	}
	return NULL;
}

/* Form-decodes n bytes into a bounded buffer. */
static int part(const char *s, size_t n, char *out, size_t outsize)
{
	char *v = NULL;
	char err[8];
	int r = decode(s, n, outsize - 1, &v, "credential", err, sizeof(err));

	if (r < 0)
		return -EINVAL;
	snprintf(out, outsize, "%s", v);
	OPENSSL_cleanse(v, strlen(v));
	free(v);
	return 0;
}

int oauth_form_basic(const char *header, char *id, size_t idlen, char *secret,
                     size_t secretlen)
{
	char raw[1024];
	const char *p, *colon;
	size_t n = 0, len;
	int r;

	id[0] = secret[0] = '\0';
	if (!header || strncasecmp(header, "Basic ", 6) != 0)
		return 0;
	p = header + 6;
	p += strspn(p, " ");
	len = strlen(p);
	while (len && p[len - 1] == ' ')
		len--;
	/* Room for what len base64 characters decode to, and a NUL. */
	if (len / 4 * 3 >= sizeof(raw) ||
	    b64_decode(p, len, (unsigned char *)raw, &n, NULL, 0) < 0 ||
	    memchr(raw, '\0', n))
		return -EINVAL;
	colon = memchr(raw, ':', n);
	if (!colon)
		return -EINVAL;
	r = part(raw, (size_t)(colon - raw), id, idlen);
	if (r == 0)
		r = part(colon + 1, n - (size_t)(colon - raw) - 1, secret,
		         secretlen);
	OPENSSL_cleanse(raw, sizeof(raw));
	if (r < 0 || !id[0]) {
		id[0] = secret[0] = '\0';
		return -EINVAL;
	}
	return 1;
}
