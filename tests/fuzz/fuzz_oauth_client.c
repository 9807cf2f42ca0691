/* SPDX-License-Identifier: MIT */
/*
 * fuzz_oauth_client: registration requests and metadata documents.
 * Whatever parses has 1..OAUTH_CLIENT_MAX_REDIRECTS redirect URIs, each
 * allowed by the policy, a bounded name without control characters, and
 * survives a round trip through the JSON the store keeps. A refusal names
 * an RFC 7591 error code and a reason. Any violation aborts.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "oauth/oauth_client.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char h1[] = "claude.ai", h2[] = "claude.com";
	static char *hosts[] = {h1, h2, NULL};
	struct oauth_uri_policy pol = {.hosts = hosts, .loopback = true};
	struct oauth_client_meta m, back;
	const char *code = NULL;
	char err[512] = "";
	const char *cimd =
	    size && data[0] == 'D' ? "https://claude.ai/oauth/metadata" : NULL;
	cJSON *j;
	char *text;

	if (cimd) {
		data++;
		size--;
	}
	if (oauth_client_parse((const char *)data, size, cimd, &pol, &m, &code,
	                       err, sizeof(err)) < 0) {
		if (!code || !err[0] ||
		    (strcmp(code, OAUTH_ERR_REDIRECT) != 0 &&
		     strcmp(code, OAUTH_ERR_METADATA) != 0))
			abort();
		return 0;
	}
	if (m.n_redirect == 0 || m.n_redirect > OAUTH_CLIENT_MAX_REDIRECTS)
		abort();
	if (cimd && m.auth_method != OAUTH_AUTH_NONE)
		abort();
	for (size_t i = 0; i < m.n_redirect; i++) {
		struct oauth_uri u;

		if (oauth_uri_parse(m.redirect_uris[i], &u, NULL, 0) < 0 ||
		    !oauth_uri_allowed(&u, &pol, NULL, 0))
			abort();
	}
	if (m.client_name) {
		if (strlen(m.client_name) > OAUTH_CLIENT_NAME_MAX)
			abort();
		for (const char *p = m.client_name; *p; p++) {
			if ((unsigned char)*p < 0x20 || *p == 0x7f)
				abort();
		}
	}
	j = cJSON_CreateObject();
	if (!j || !oauth_client_meta_to_json(&m, j)) {
		cJSON_Delete(j);
		oauth_client_meta_finish(&m);
		return 0;
	}
	text = cJSON_PrintUnformatted(j);
	cJSON_Delete(j);
	if (text) {
		if (oauth_client_parse(text, strlen(text), NULL, NULL, &back,
		                       &code, err, sizeof(err)) < 0 ||
		    back.n_redirect != m.n_redirect ||
		    back.auth_method != m.auth_method ||
		    back.refresh != m.refresh ||
		    strcmp(back.redirect_uris[0], m.redirect_uris[0]) != 0)
			abort();
		oauth_client_meta_finish(&back);
		cJSON_free(text);
	}
	oauth_client_meta_finish(&m);
	return 0;
}
