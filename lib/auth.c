/* SPDX-License-Identifier: MIT */
/* auth: bearer tokens compared as SHA-256 digests in constant time. */
#include "auth.h"

#include <string.h>
#include <strings.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

enum auth_result auth_check(const struct config *cfg, const char *header,
                            const char **tenant)
{
	unsigned char md[CONFIG_TOKEN_DIGEST_LEN];
	unsigned int mdlen = 0;
	const char *tok;
	size_t len;
	size_t match = (size_t)-1;

	*tenant = NULL;
	if (cfg->auth_none) {
		*tenant = "local";
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
	if (match == (size_t)-1)
		return AUTH_INVALID;
	*tenant = cfg->tokens[match].tenant;
	return AUTH_OK;
}
