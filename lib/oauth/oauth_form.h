/* SPDX-License-Identifier: MIT */
/*
 * oauth_form: the parameters of an OAuth request, from an
 * application/x-www-form-urlencoded body or a query string (the same
 * encoding), or added one by one from values a caller already decoded. Each
 * escape is decoded exactly once; a NUL, a malformed escape, a parameter
 * given twice (RFC 6749 section 3.1), more than OAUTH_FORM_MAX_PARAMS
 * parameters or a value longer than OAUTH_FORM_MAX_VALUE is refused. An
 * empty value counts as absent, as RFC 6749 says. Not thread-safe; a form
 * belongs to one request.
 */
#ifndef MCPSD_OAUTH_FORM_H
#define MCPSD_OAUTH_FORM_H

#include <stddef.h>

#define OAUTH_FORM_MAX_PARAMS 32
#define OAUTH_FORM_MAX_KEY 64
#define OAUTH_FORM_MAX_VALUE 4096

struct oauth_form {
	size_t n;
	struct {
		char *key;   /* owned */
		char *value; /* owned; "" when given without a value */
	} p[OAUTH_FORM_MAX_PARAMS];
};

/* Initializes caller memory; release with oauth_form_finish. */
void oauth_form_init(struct oauth_form *f);

/* Frees every parameter; the form may be reused. NULL-safe. */
void oauth_form_finish(struct oauth_form *f);

/*
 * Parses n bytes of "k=v&k2=v2" ('+' is a space) and adds the parameters.
 * Errors, with a message for the client naming the parameter in err:
 * -EINVAL (malformed escape, NUL or control character, bad key), -E2BIG
 * (too many parameters, or a key or value too long), -EEXIST (a parameter
 * twice), -ENOMEM. The form keeps what was added before the error.
 */
__attribute__((warn_unused_result)) int oauth_form_parse(struct oauth_form *f,
                                                         const char *s,
                                                         size_t n, char *err,
                                                         size_t errlen);

/* Adds one decoded parameter (copied), with the same checks. */
__attribute__((warn_unused_result)) int
oauth_form_add(struct oauth_form *f, const char *key, const char *value,
               char *err, size_t errlen);

/* The value of key (borrowed from the form), or NULL if absent or empty. */
const char *oauth_form_get(const struct oauth_form *f, const char *key);

/*
 * Parses an "Authorization: Basic" header value carrying OAuth client
 * credentials (RFC 6749 section 2.3.1: base64 of the form-encoded client id
 * and secret joined by ':'). Returns 1 with both decoded into id and secret
 * (NUL-terminated), 0 when the header is not Basic, -EINVAL when it is
 * malformed or a part does not fit its buffer.
 */
__attribute__((warn_unused_result)) int oauth_form_basic(const char *header,
                                                         char *id, size_t idlen,
                                                         char *secret,
                                                         size_t secretlen);

#endif
