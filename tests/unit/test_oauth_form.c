/* SPDX-License-Identifier: MIT */
/*
 * Form and Basic credential parsing: decoding once, '+' as space, empty
 * values as absent, and refusals of duplicates, NUL, bad escapes, floods
 * and oversized values.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "oauth/oauth_form.h"
#include "tap.h"

static int parse(const char *s, struct oauth_form *f)
{
	char err[300];

	oauth_form_init(f);
	return oauth_form_parse(f, s, strlen(s), err, sizeof(err));
}

int main(void)
{
	struct oauth_form f;
	char big[20000], id[64], secret[64];

	is_int(parse("grant_type=authorization_code&code=a%2Bb+c&x=&y", &f), 0,
	       "a form parses");
	is_str(oauth_form_get(&f, "grant_type"), "authorization_code",
	       "plain value");
	is_str(oauth_form_get(&f, "code"), "a+b c", "%2B and + decoded once");
	ok(oauth_form_get(&f, "x") == NULL && oauth_form_get(&f, "y") == NULL,
	   "empty values count as absent");
	ok(oauth_form_get(&f, "z") == NULL, "absent is absent");
	oauth_form_finish(&f);
	is_int(parse("a=%252F", &f), 0, "double escape");
	is_str(oauth_form_get(&f, "a"), "%2F", "decoded exactly once");
	oauth_form_finish(&f);
	is_int(parse("code=1&code=2", &f), -EEXIST, "a parameter twice");
	oauth_form_finish(&f);
	is_int(parse("a=%00", &f), -EINVAL, "NUL refused");
	oauth_form_finish(&f);
	is_int(parse("a=%0d%0a", &f), -EINVAL, "CR LF refused");
	oauth_form_finish(&f);
	is_int(parse("a=%g1", &f), -EINVAL, "a bad escape");
	oauth_form_finish(&f);
	is_int(parse("a=%4", &f), -EINVAL, "a cut escape");
	oauth_form_finish(&f);
	is_int(parse("=v", &f), -EINVAL, "no name");
	oauth_form_finish(&f);
	is_int(parse("&&a=1&&", &f), 0, "empty pairs skipped");
	oauth_form_finish(&f);
	{
		size_t n = 0;

		for (int i = 0; i < 40; i++)
			n += (size_t)snprintf(big + n, sizeof(big) - n,
			                      "%sk%d=v", i ? "&" : "", i);
	}
	is_int(parse(big, &f), -E2BIG, "too many parameters");
	oauth_form_finish(&f);
	memset(big, 'v', sizeof(big) - 1);
	big[0] = 'a';
	big[1] = '=';
	big[sizeof(big) - 1] = '\0';
	is_int(parse(big, &f), -E2BIG, "a value too long");
	oauth_form_finish(&f);

	/* "id:se cret" */
	is_int(oauth_form_basic("Basic aWQ6c2UrY3JldA==", id, sizeof(id),
	                        secret, sizeof(secret)),
	       1, "Basic credentials");
	is_str(id, "id", "client id");
	is_str(secret, "se cret", "secret form-decoded");
	is_int(oauth_form_basic("Bearer abc", id, sizeof(id), secret,
	                        sizeof(secret)),
	       0, "not Basic");
	is_int(oauth_form_basic("Basic aWQ=", id, sizeof(id), secret,
	                        sizeof(secret)),
	       -EINVAL, "no colon");
	is_int(oauth_form_basic("Basic aWQ6c2Vj*mV0", id, sizeof(id), secret,
	                        sizeof(secret)),
	       -EINVAL, "a bad base64 character");
	is_int(oauth_form_basic("Basic aWQ6=c2Vj", id, sizeof(id), secret,
	                        sizeof(secret)),
	       -EINVAL, "padding in the middle");
	is_int(oauth_form_basic("Basic OnNlY3JldA==", id, sizeof(id), secret,
	                        sizeof(secret)),
	       -EINVAL, "an empty id");
	is_int(oauth_form_basic("Basic aWQAOnM=", id, sizeof(id), secret,
	                        sizeof(secret)),
	       -EINVAL, "a NUL inside");
	return tap_done();
}
