/* SPDX-License-Identifier: MIT */
/*
 * Redirect URI tests: what parses, what the policy allows, and matching
 * that is exact but for a loopback port. Each near miss of claude.ai's
 * callback (a character, a path, a scheme, a host) must not match.
 */
#include <stdlib.h>
#include <string.h>

#include "oauth/oauth_uri.h"
#include "tap.h"

#define CB "https://claude.ai/api/mcp/auth_callback"

int main(void)
{
	static char h1[] = "claude.ai", h2[] = "claude.com";
	static char *hosts[] = {h1, h2, NULL};
	struct oauth_uri_policy pol = {.hosts = hosts, .loopback = true};
	struct oauth_uri_policy nolo = {.hosts = hosts, .loopback = false};
	struct oauth_uri u;
	char err[300];
	static const char *const bad[] = {
	    "",
	    "claude.ai/cb",
	    "ftp://claude.ai/cb",
	    "https://claude.ai/cb#x",
	    "https://user:pw@claude.ai/cb",
	    "https://claude.ai:0/cb",
	    "https://claude.ai:65536/cb",
	    "https://claude.ai:12a/cb",
	    "https://claude.ai/c b",
	    "https://claude.ai/cb\n",
	    "https://claude.ai/%zz",
	    "https://[::1/cb",
	    "https://cla%75de.ai/cb",
	    "https:///cb",
	    "javascript:alert(1)",
	    "https://claude.ai\\@evil.example/",
	};

	ok(oauth_uri_parse(CB, &u, err, sizeof(err)) == 0, "claude's callback");
	ok(u.https && strcmp(u.host, "claude.ai") == 0 && u.port == 0,
	   "https, host claude.ai, no port");
	ok(oauth_uri_allowed(&u, &pol, err, sizeof(err)), "allowed");
	ok(oauth_uri_parse("https://Claude.AI:443/x?y=1", &u, err,
	                   sizeof(err)) == 0 &&
	       strcmp(u.host, "claude.ai") == 0 && u.port == 443,
	   "host lower-cased, port read");
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ok(oauth_uri_parse(bad[i], &u, err, sizeof(err)) < 0,
		   "refused: '%s' (%s)", bad[i], err);
	{
		char long_uri[2100];

		memset(long_uri, 'a', sizeof(long_uri) - 1);
		memcpy(long_uri, "https://claude.ai/", 18);
		long_uri[sizeof(long_uri) - 1] = '\0';
		ok(oauth_uri_parse(long_uri, &u, err, sizeof(err)) < 0,
		   "refused: longer than %d", OAUTH_URI_MAX);
	}

	ok(oauth_uri_parse("https://evil.example/cb", &u, err, sizeof(err)) ==
	           0 &&
	       !oauth_uri_allowed(&u, &pol, err, sizeof(err)),
	   "another host is not allowed: %s", err);
	ok(oauth_uri_parse("https://claude.ai.evil.example/cb", &u, err,
	                   sizeof(err)) == 0 &&
	       !oauth_uri_allowed(&u, &pol, err, sizeof(err)),
	   "a suffix trick is not allowed");
	ok(oauth_uri_parse("https://sub.claude.ai/cb", &u, err, sizeof(err)) ==
	           0 &&
	       !oauth_uri_allowed(&u, &pol, err, sizeof(err)),
	   "a subdomain is not allowed");
	ok(oauth_uri_parse("http://claude.ai/cb", &u, err, sizeof(err)) == 0 &&
	       !oauth_uri_allowed(&u, &pol, err, sizeof(err)),
	   "http to a listed host is not allowed");
	ok(oauth_uri_parse("http://127.0.0.1:8976/cb", &u, err, sizeof(err)) ==
	           0 &&
	       oauth_uri_is_loopback(&u) &&
	       oauth_uri_allowed(&u, &pol, err, sizeof(err)),
	   "http loopback allowed");
	ok(oauth_uri_parse("http://localhost:6274/oauth/callback", &u, err,
	                   sizeof(err)) == 0 &&
	       oauth_uri_allowed(&u, &pol, err, sizeof(err)),
	   "localhost allowed");
	ok(oauth_uri_parse("http://[::1]:1/cb", &u, err, sizeof(err)) == 0 &&
	       oauth_uri_is_loopback(&u),
	   "[::1] is loopback");
	ok(oauth_uri_parse("http://127.0.0.1.evil.example/cb", &u, err,
	                   sizeof(err)) == 0 &&
	       !oauth_uri_is_loopback(&u),
	   "127.0.0.1.evil.example is not loopback");
	ok(oauth_uri_parse("http://127.0.0.1:1/cb", &u, err, sizeof(err)) ==
	           0 &&
	       !oauth_uri_allowed(&u, &nolo, err, sizeof(err)),
	   "loopback refused when the policy says so");

	ok(oauth_uri_match(CB, CB), "the same URI matches");
	ok(!oauth_uri_match(CB, CB "x"), "a character more does not");
	ok(!oauth_uri_match(CB, "https://claude.ai/api/mcp/auth_callbacK"),
	   "a character changed does not");
	ok(!oauth_uri_match(CB, "https://claude.ai/api/mcp/auth_callback/"),
	   "a slash more does not");
	ok(!oauth_uri_match(CB, "https://claude.ai/api/mcp/other"),
	   "another path does not");
	ok(!oauth_uri_match(CB, "http://claude.ai/api/mcp/auth_callback"),
	   "another scheme does not");
	ok(!oauth_uri_match(CB, "https://claude.com/api/mcp/auth_callback"),
	   "another host does not");
	ok(!oauth_uri_match(CB, "https://claude.ai:443/api/mcp/auth_callback"),
	   "an explicit port on https does not");
	ok(oauth_uri_match("http://127.0.0.1:1234/cb", "http://127.0.0.1:9/cb"),
	   "loopback: another port matches");
	ok(oauth_uri_match("http://127.0.0.1/cb", "http://127.0.0.1:9/cb"),
	   "loopback: registered without a port matches any");
	ok(!oauth_uri_match("http://127.0.0.1:1/cb", "http://127.0.0.1:1/cc"),
	   "loopback: another path does not");
	ok(!oauth_uri_match("http://127.0.0.1:1/cb", "http://localhost:1/cb"),
	   "loopback: another host name does not");
	ok(!oauth_uri_match("http://127.0.0.1:1/cb", "https://127.0.0.1:1/cb"),
	   "loopback: another scheme does not");

	{
		const char *kv[] = {"code", "a b&c", "state",
		                    "x=y",  "iss",   "https://s.example",
		                    NULL};
		char *s = oauth_uri_with_params(CB, kv);

		is_str(s,
		       CB "?code=a%20b%26c&state=x%3Dy&iss=https%3A%2F%2Fs."
		          "example",
		       "parameters appended, encoded");
		free(s);
		s = oauth_uri_with_params("http://127.0.0.1:1/cb?k=v", kv);
		ok(s && strncmp(s, "http://127.0.0.1:1/cb?k=v&code=", 31) == 0,
		   "an existing query is kept");
		free(s);
	}
	return tap_done();
}
