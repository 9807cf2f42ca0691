/* SPDX-License-Identifier: MIT */
/*
 * fuzz_oauth_uri: redirect URIs. The input is split at the first newline
 * into a registered and a requested URI. Whatever parses has a host, no
 * fragment, no user information and only URI characters; a URI matches
 * itself; a match between two URIs implies both parse and agree on scheme,
 * host and path; appending parameters gives a URI that still parses and
 * still matches nothing else by accident. Any violation aborts.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "oauth/oauth_uri.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(const char *s)
{
	struct oauth_uri u;
	char err[300];
	static char h[] = "claude.ai";
	static char *hosts[] = {h, NULL};
	struct oauth_uri_policy pol = {.hosts = hosts, .loopback = true};

	if (oauth_uri_parse(s, &u, err, sizeof(err)) < 0) {
		if (!err[0])
			abort();
		return;
	}
	if (!u.host[0] || strchr(s, '#') || strlen(s) > OAUTH_URI_MAX ||
	    memchr(s + u.host_off, '@', u.path_off - u.host_off) ||
	    strpbrk(s, " \t\r\n\"<>\\^`{|}"))
		abort();
	if (!oauth_uri_match(s, s))
		abort();
	if (oauth_uri_allowed(&u, &pol, err, sizeof(err)) &&
	    !oauth_uri_is_loopback(&u) &&
	    (!u.https || strcmp(u.host, "claude.ai") != 0))
		abort();
	{
		const char *kv[] = {"code", "a&b=c", "state", s, NULL};
		char *w = oauth_uri_with_params(s, kv);
		struct oauth_uri u2;

		if (!w)
			return;
		if (oauth_uri_parse(w, &u2, err, sizeof(err)) < 0 &&
		    strlen(w) <= OAUTH_URI_MAX)
			abort();
		free(w);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1);
	char *nl;

	if (!s)
		return 0;
	memcpy(s, data, size);
	s[size] = '\0';
	nl = strchr(s, '\n');
	if (nl)
		*nl = '\0';
	check(s);
	if (nl) {
		struct oauth_uri a, b;

		check(nl + 1);
		if (oauth_uri_match(s, nl + 1)) {
			if (strcmp(s, nl + 1) != 0 &&
			    (oauth_uri_parse(s, &a, NULL, 0) < 0 ||
			     oauth_uri_parse(nl + 1, &b, NULL, 0) < 0 ||
			     !oauth_uri_is_loopback(&a) ||
			     !oauth_uri_is_loopback(&b) || a.https != b.https ||
			     strcmp(a.host, b.host) != 0 ||
			     strcmp(s + a.path_off, nl + 1 + b.path_off) != 0))
				abort();
		}
	}
	free(s);
	return 0;
}
