/* SPDX-License-Identifier: MIT */
/* auth: bearer tokens compared as SHA-256 digests in constant time. */
#include "http/auth.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

/* RFC 6750 b64token: what a hook is ever shown. */
static bool is_b64token(const char *s, size_t len)
{
	size_t i = 0;

	while (i < len &&
	       (((s[i] | 0x20) >= 'a' && (s[i] | 0x20) <= 'z') ||
	        (s[i] >= '0' && s[i] <= '9') || strchr("-._~+/", s[i])))
		i++;
	if (i == 0)
		return false;
	while (i < len && s[i] == '=')
		i++;
	return i == len;
}

enum auth_status auth_check(const struct config *cfg,
                            const struct auth_hook *hook, const char *header,
                            struct auth_result *out)
{
	unsigned char md[CONFIG_TOKEN_DIGEST_LEN];
	unsigned int mdlen = 0;
	const char *tok;
	size_t len;
	size_t match = (size_t)-1;
	enum auth_status st;

	memset(out, 0, sizeof(*out));
	if (cfg->auth_none) {
		out->method = AUTH_METHOD_NONE;
		snprintf(out->tenant, sizeof(out->tenant), "local");
		return AUTH_OK;
	}
	if (!header || strncasecmp(header, "Bearer ", 7) != 0)
		return AUTH_MISSING;
	tok = header + 7;
	while (*tok == ' ')
		tok++;
	len = strlen(tok);
	while (len && (tok[len - 1] == ' ' || tok[len - 1] == '\t'))
		len--;
	if (len == 0)
		return AUTH_MISSING;
	if (!EVP_Digest(tok, len, md, &mdlen, EVP_sha256(), NULL))
		return AUTH_INVALID;
	/* Visit every token whatever matches, so timing says nothing. */
	for (size_t i = 0; i < cfg->n_tokens; i++) {
		int differ =
		    CRYPTO_memcmp(md, cfg->tokens[i].digest, sizeof(md));

		if (!differ)
			match = i;
	}
	OPENSSL_cleanse(md, sizeof(md));
	if (match != (size_t)-1) {
		out->method = AUTH_METHOD_STATIC;
		snprintf(out->tenant, sizeof(out->tenant), "%s",
		         cfg->tokens[match].tenant);
		snprintf(out->fingerprint, sizeof(out->fingerprint), "%s",
		         cfg->tokens[match].fingerprint);
		return AUTH_OK;
	}
	if (!hook || !hook->verify || !is_b64token(tok, len))
		return AUTH_INVALID;
	st = hook->verify(hook->data, tok, len, out);
	out->tenant[sizeof(out->tenant) - 1] = '\0';
	out->scopes[sizeof(out->scopes) - 1] = '\0';
	out->fingerprint[sizeof(out->fingerprint) - 1] = '\0';
	if (st == AUTH_OK && !out->tenant[0])
		st = AUTH_INVALID; /* accepted without naming a tenant */
	if (st != AUTH_OK) {
		memset(out, 0, sizeof(*out));
		return st;
	}
	out->method = AUTH_METHOD_OAUTH;
	return AUTH_OK;
}

bool auth_has_scope(const struct auth_result *r, const char *scope)
{
	size_t sl;

	if (!scope || !*scope || r->method != AUTH_METHOD_OAUTH)
		return true;
	sl = strlen(scope);
	for (const char *p = r->scopes; *p;) {
		size_t wl = strcspn(p, " ");

		if (wl == sl && strncmp(p, scope, sl) == 0)
			return true;
		p += wl;
		while (*p == ' ')
			p++;
	}
	return false;
}

const char *auth_method_name(enum auth_method m)
{
	switch (m) {
	case AUTH_METHOD_NONE:
		return "none";
	case AUTH_METHOD_STATIC:
		return "static token";
	case AUTH_METHOD_OAUTH:
		return "oauth";
	}
	return "?";
}
