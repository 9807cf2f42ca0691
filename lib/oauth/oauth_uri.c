/* SPDX-License-Identifier: MIT */
/*
 * oauth_uri: see oauth_uri.h. The parser walks the string once and records
 * spans, so matching compares the original bytes, never a normalized copy:
 * normalizing is how two different URIs come to look equal.
 */
#include "oauth/oauth_uri.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util/buf.h"
#include "util/errmsg.h"
#include "util/num.h"
#include "util/pct.h"

/* Characters RFC 3986 allows in a URI (escapes are checked separately). */
static bool uri_char(unsigned char c)
{
	return isalnum(c) || strchr("-._~:/?[]@!$&'()*+,;=%", c) != NULL;
}

int oauth_uri_parse(const char *s, struct oauth_uri *out, char *err,
                    size_t errlen)
{
	size_t n = strlen(s), i, hs, he;

	memset(out, 0, sizeof(*out));
	if (n == 0 || n > OAUTH_URI_MAX)
		return errmsg_fail(-EINVAL, err, errlen,
		                   "redirect URI is empty or longer than %d "
		                   "characters",
		                   OAUTH_URI_MAX);
	for (i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c == '#')
			return errmsg_fail(-EINVAL, err, errlen,
			                   "redirect URI has a fragment ('#'); "
			                   "remove it");
		if (!uri_char(c))
			return errmsg_fail(
			    -EINVAL, err, errlen,
			    "redirect URI has a character not allowed in a "
			    "URI (byte 0x%02x at %zu); percent-encode it",
			    c, i);
		if (c == '%' &&
		    (i + 2 >= n || !isxdigit((unsigned char)s[i + 1]) ||
		     !isxdigit((unsigned char)s[i + 2])))
			return errmsg_fail(-EINVAL, err, errlen,
			                   "redirect URI has a malformed "
			                   "%%-escape at %zu",
			                   i);
	}
	if (strncmp(s, "https://", 8) == 0) {
		out->https = true;
		hs = 8;
	} else if (strncmp(s, "http://", 7) == 0) {
		hs = 7;
	} else {
		return errmsg_fail(-EINVAL, err, errlen,
		                   "redirect URI must start with https:// (or "
		                   "http:// for a loopback address), e.g. "
		                   "https://claude.ai/api/mcp/auth_callback");
	}
	he = hs + strcspn(s + hs, "/?");
	if (memchr(s + hs, '@', he - hs))
		return errmsg_fail(-EINVAL, err, errlen,
		                   "redirect URI has user information ('@' "
		                   "before the host); remove it");
	if (memchr(s + hs, '%', he - hs))
		return errmsg_fail(-EINVAL, err, errlen,
		                   "redirect URI has a %%-escape in its host");
	/* Host: [v6], or a name / IPv4 of letters, digits, '.' and '-'. */
	i = hs;
	if (s[i] == '[') {
		const char *rb = memchr(s + i, ']', he - i);

		if (!rb)
			return errmsg_fail(
			    -EINVAL, err, errlen,
			    "redirect URI has an unclosed '[' in "
			    "its host");
		for (const char *p = s + i + 1; p < rb; p++) {
			if (!isxdigit((unsigned char)*p) && *p != ':' &&
			    *p != '.')
				return errmsg_fail(
				    -EINVAL, err, errlen,
				    "redirect URI has a malformed "
				    "IPv6 host");
		}
		i = (size_t)(rb - s) + 1;
	} else {
		while (i < he && (isalnum((unsigned char)s[i]) || s[i] == '.' ||
		                  s[i] == '-'))
			i++;
	}
	out->host_off = hs;
	out->host_len = i - hs;
	if (out->host_len == 0 || out->host_len >= sizeof(out->host))
		return errmsg_fail(-EINVAL, err, errlen,
		                   "redirect URI has no host or a host longer "
		                   "than 255 characters");
	for (size_t k = 0; k < out->host_len; k++)
		out->host[k] = (char)tolower((unsigned char)s[hs + k]);
	out->host[out->host_len] = '\0';
	if (i < he) {
		uint64_t port = 0;

		if (s[i] != ':' ||
		    num_u64n(s + i + 1, he - i - 1, 65535, &port) < 0 ||
		    port == 0)
			return errmsg_fail(
			    -EINVAL, err, errlen,
			    "redirect URI has a malformed host or "
			    "port");
		out->port = (unsigned)port;
		out->port_off = i;
		out->port_len = he - i;
	}
	out->path_off = he;
	return 0;
}

bool oauth_uri_is_loopback(const struct oauth_uri *u)
{
	const char *h = u->host;

	if (strcmp(h, "localhost") == 0 || strcmp(h, "[::1]") == 0)
		return true;
	/* 127.0.0.0/8, as four decimal octets. */
	if (strncmp(h, "127.", 4) != 0)
		return false;
	{
		int dots = 0;

		for (const char *p = h; *p; p++) {
			if (*p == '.')
				dots++;
			else if (!isdigit((unsigned char)*p))
				return false;
		}
		return dots == 3;
	}
}

bool oauth_uri_allowed(const struct oauth_uri *u,
                       const struct oauth_uri_policy *pol, char *err,
                       size_t errlen)
{
	if (oauth_uri_is_loopback(u)) {
		if (pol->loopback)
			return true;
		errmsg_set(err, errlen,
		           "loopback redirect URIs are not allowed on this "
		           "server (OAUTH_REDIRECT_HOSTS lacks 'loopback')");
		return false;
	}
	if (!u->https) {
		errmsg_set(err, errlen,
		           "redirect URI to %s must use https:// (http:// is "
		           "only for loopback addresses)",
		           u->host);
		return false;
	}
	for (char *const *h = pol->hosts; h && *h; h++) {
		if (strcasecmp(*h, u->host) == 0)
			return true;
	}
	errmsg_set(err, errlen,
	           "redirect host '%s' is not allowed on this server; the "
	           "operator can add it to OAUTH_REDIRECT_HOSTS",
	           u->host);
	return false;
}

bool oauth_uri_match(const char *registered, const char *requested)
{
	struct oauth_uri a, b;

	if (strcmp(registered, requested) == 0)
		return true;
	if (oauth_uri_parse(registered, &a, NULL, 0) < 0 ||
	    oauth_uri_parse(requested, &b, NULL, 0) < 0 ||
	    !oauth_uri_is_loopback(&a) || !oauth_uri_is_loopback(&b))
		return false;
	/*
	 * Same bytes up to the end of the host and from the path on: only
	 * the port (present or not) may differ.
	 */
	{
		size_t ea = a.host_off + a.host_len;
		size_t eb = b.host_off + b.host_len;

		return ea == eb && memcmp(registered, requested, ea) == 0 &&
		       strcmp(registered + a.path_off,
		              requested + b.path_off) == 0;
	}
}

char *oauth_uri_with_params(const char *base, const char *const *kv)
{
	struct buf b;
	bool first = strchr(base, '?') == NULL;

	buf_init(&b, 0);
	if (buf_puts(&b, base) < 0)
		goto fail;
	for (size_t i = 0; kv[i] && kv[i + 1]; i += 2) {
		char *k = pct_encode(kv[i], false);
		char *v = pct_encode(kv[i + 1], false);
		int r = k && v
		            ? buf_printf(&b, "%c%s=%s", first ? '?' : '&', k, v)
		            : -1;

		free(k);
		free(v);
		if (r < 0)
			goto fail;
		first = false;
	}
	return buf_take(&b, NULL);
fail:
	buf_finish(&b);
	return NULL;
}
