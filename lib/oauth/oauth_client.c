/* SPDX-License-Identifier: MIT */
/*
 * oauth_client: the JSON is scanned (grammar, strict UTF-8, nesting depth)
 * by rpc_scan before cJSON parses it, as every JSON body from outside is.
 * Strings the consent page shows (the client's name) are bounded and free
 * of control characters, so nothing a client registers can lay out the
 * page or a log line.
 */
#include "oauth/oauth_client.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "mcp/rpc.h"
#include "util/errmsg.h"

const char *oauth_auth_method_name(enum oauth_auth_method m)
{
	switch (m) {
	case OAUTH_AUTH_SECRET_POST:
		return "client_secret_post";
	case OAUTH_AUTH_SECRET_BASIC:
		return "client_secret_basic";
	case OAUTH_AUTH_NONE:
		break;
	}
	return "none";
}

void oauth_client_meta_finish(struct oauth_client_meta *m)
{
	if (!m)
		return;
	for (size_t i = 0; i < m->n_redirect; i++)
		free(m->redirect_uris[i]);
	free(m->client_name);
	free(m->client_uri);
	free(m->scope);
	free(m->software_id);
	free(m->software_version);
	memset(m, 0, sizeof(*m));
}

/* Printable text without control characters, at most max bytes. */
static bool text_ok(const char *s, size_t max)
{
	size_t n = strlen(s);

	if (n > max)
		return false;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c < 0x20 || c == 0x7f)
			return false;
	}
	return true;
}

/*
 * An optional string member: absent or null leaves *dst NULL; anything but
 * a bounded string is an error.
 */
static int opt_string(const cJSON *obj, const char *name, size_t max,
                      char **dst, char *err, size_t errlen)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, name);

	if (!v || cJSON_IsNull(v))
		return 0;
	if (!cJSON_IsString(v) || !text_ok(v->valuestring, max))
		return errmsg_fail(-EINVAL, err, errlen,
		                   "'%s' must be a string of at most %zu "
		                   "characters without control characters",
		                   name, max);
	if (!*v->valuestring)
		return 0;
	*dst = strdup(v->valuestring);
	return *dst ? 0 : -ENOMEM;
}

/* Whether every element of an optional string array is in allowed[]. */
static int string_set(const cJSON *obj, const char *name,
                      const char *const *allowed, unsigned *seen, char *err,
                      size_t errlen)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, name);
	const cJSON *e;

	*seen = 0;
	if (!v || cJSON_IsNull(v))
		return 1; /* absent: the caller applies the default */
	if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) > 8)
		return errmsg_fail(-EINVAL, err, errlen,
		                   "'%s' must be an array of strings", name);
	cJSON_ArrayForEach (e, v) {
		size_t i;

		if (!cJSON_IsString(e))
			return errmsg_fail(-EINVAL, err, errlen,
			                   "'%s' must be an array of strings",
			                   name);
		for (i = 0; allowed[i]; i++) {
			if (strcmp(e->valuestring, allowed[i]) == 0)
				break;
		}
		if (!allowed[i])
			return errmsg_fail(
			    -EINVAL, err, errlen,
			    "'%s' contains '%.40s', which this server does not "
			    "support (supported: %s%s%s)",
			    name, e->valuestring, allowed[0],
			    allowed[1] ? ", " : "",
			    allowed[1] ? allowed[1] : "");
		*seen |= 1u << i;
	}
	return 0;
}

static int parse_redirects(const cJSON *root,
                           const struct oauth_uri_policy *pol,
                           struct oauth_client_meta *m, char *err,
                           size_t errlen)
{
	const cJSON *v =
	    cJSON_GetObjectItemCaseSensitive(root, "redirect_uris");
	const cJSON *e;

	if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) == 0)
		return errmsg_fail(
		    -EINVAL, err, errlen,
		    "'redirect_uris' must be a non-empty array of "
		    "URIs, e.g. "
		    "[\"https://claude.ai/api/mcp/auth_callback\"]");
	if (cJSON_GetArraySize(v) > OAUTH_CLIENT_MAX_REDIRECTS)
		return errmsg_fail(
		    -EINVAL, err, errlen,
		    "more than %d redirect URIs; register at most "
		    "%d",
		    OAUTH_CLIENT_MAX_REDIRECTS, OAUTH_CLIENT_MAX_REDIRECTS);
	cJSON_ArrayForEach (e, v) {
		struct oauth_uri u;
		char why[300];

		if (!cJSON_IsString(e))
			return errmsg_fail(
			    -EINVAL, err, errlen,
			    "'redirect_uris' must contain strings");
		if (oauth_uri_parse(e->valuestring, &u, why, sizeof(why)) < 0 ||
		    (pol && !oauth_uri_allowed(&u, pol, why, sizeof(why))))
			return errmsg_fail(-EINVAL, err, errlen, "%s", why);
		m->redirect_uris[m->n_redirect] = strdup(e->valuestring);
		if (!m->redirect_uris[m->n_redirect])
			return -ENOMEM;
		m->n_redirect++;
	}
	return 0;
}

int oauth_client_parse(const char *json, size_t len, const char *cimd_url,
                       const struct oauth_uri_policy *pol,
                       struct oauth_client_meta *out, const char **error,
                       char *err, size_t errlen)
{
	static const char *const grants[] = {"authorization_code",
	                                     "refresh_token", NULL};
	static const char *const responses[] = {"code", NULL};
	struct rpc_scan scan;
	cJSON *root = NULL;
	const cJSON *v;
	unsigned seen = 0;
	int r;

	memset(out, 0, sizeof(*out));
	*error = OAUTH_ERR_METADATA;
	if (len > OAUTH_CLIENT_JSON_MAX)
		return errmsg_fail(-EINVAL, err, errlen,
		                   "client metadata is larger than %d bytes",
		                   OAUTH_CLIENT_JSON_MAX);
	if (rpc_scan(json, len, OAUTH_CLIENT_JSON_DEPTH, &scan) < 0)
		return errmsg_fail(-EINVAL, err, errlen,
		                   "client metadata is not valid JSON (%s at "
		                   "byte %zu)",
		                   scan.err ? scan.err : "too deep",
		                   scan.err_offset);
	root = cJSON_ParseWithLength(json, len);
	if (!root)
		return errmsg_fail(-ENOMEM, err, errlen, "out of memory");
	if (!cJSON_IsObject(root)) {
		r = errmsg_fail(-EINVAL, err, errlen,
		                "client metadata must be a JSON object");
		goto out;
	}
	if (cimd_url) {
		v = cJSON_GetObjectItemCaseSensitive(root, "client_id");
		if (!cJSON_IsString(v) ||
		    strcmp(v->valuestring, cimd_url) != 0) {
			r = errmsg_fail(
			    -EINVAL, err, errlen,
			    "the metadata document's 'client_id' is "
			    "not its own URL %s",
			    cimd_url);
			goto out;
		}
	}
	r = parse_redirects(root, pol, out, err, errlen);
	if (r < 0) {
		if (r == -EINVAL)
			*error = OAUTH_ERR_REDIRECT;
		goto out;
	}
	v = cJSON_GetObjectItemCaseSensitive(root,
	                                     "token_endpoint_auth_method");
	if (!v || cJSON_IsNull(v)) {
		/* RFC 7591 section 2: the default is client_secret_basic. */
		out->auth_method =
		    cimd_url ? OAUTH_AUTH_NONE : OAUTH_AUTH_SECRET_BASIC;
	} else if (!cJSON_IsString(v)) {
		r = errmsg_fail(
		    -EINVAL, err, errlen,
		    "'token_endpoint_auth_method' must be a string");
		goto out;
	} else if (strcmp(v->valuestring, "none") == 0) {
		out->auth_method = OAUTH_AUTH_NONE;
	} else if (strcmp(v->valuestring, "client_secret_post") == 0) {
		out->auth_method = OAUTH_AUTH_SECRET_POST;
	} else if (strcmp(v->valuestring, "client_secret_basic") == 0) {
		out->auth_method = OAUTH_AUTH_SECRET_BASIC;
	} else {
		r = errmsg_fail(-EINVAL, err, errlen,
		                "token_endpoint_auth_method '%.40s' is not "
		                "supported; use none, client_secret_post or "
		                "client_secret_basic",
		                v->valuestring);
		goto out;
	}
	if (cimd_url && out->auth_method != OAUTH_AUTH_NONE) {
		r = errmsg_fail(
		    -EINVAL, err, errlen,
		    "a client metadata document must use "
		    "token_endpoint_auth_method 'none' (there is no "
		    "shared secret)");
		goto out;
	}
	r = string_set(root, "grant_types", grants, &seen, err, errlen);
	if (r < 0)
		goto out;
	if (r == 0 && !(seen & 1u)) {
		r = errmsg_fail(-EINVAL, err, errlen,
		                "'grant_types' must include "
		                "'authorization_code'");
		goto out;
	}
	/* Absent: authorization_code only (RFC 7591); refresh is allowed too,
	 * since clients that omit the list still expect to refresh. */
	out->refresh = r == 1 || (seen & 2u);
	r = string_set(root, "response_types", responses, &seen, err, errlen);
	if (r < 0)
		goto out;
	r = opt_string(root, "client_name", OAUTH_CLIENT_NAME_MAX,
	               &out->client_name, err, errlen);
	if (r == 0)
		r = opt_string(root, "client_uri", OAUTH_URI_MAX,
		               &out->client_uri, err, errlen);
	if (r == 0)
		r = opt_string(root, "scope", 1000, &out->scope, err, errlen);
	if (r == 0)
		r = opt_string(root, "software_id", 200, &out->software_id, err,
		               errlen);
	if (r == 0)
		r = opt_string(root, "software_version", 100,
		               &out->software_version, err, errlen);
out:
	cJSON_Delete(root);
	if (r == -ENOMEM)
		errmsg_set(err, errlen, "out of memory");
	if (r < 0)
		oauth_client_meta_finish(out);
	return r < 0 ? r : 0;
}

bool oauth_client_meta_to_json(const struct oauth_client_meta *m, cJSON *obj)
{
	cJSON *a = cJSON_AddArrayToObject(obj, "redirect_uris");
	cJSON *g, *rt;
	bool ok = a != NULL;

	for (size_t i = 0; ok && i < m->n_redirect; i++) {
		cJSON *s = cJSON_CreateString(m->redirect_uris[i]);

		ok = s && cJSON_AddItemToArray(a, s);
	}
	ok = ok &&
	     cJSON_AddStringToObject(obj, "token_endpoint_auth_method",
	                             oauth_auth_method_name(m->auth_method));
	g = ok ? cJSON_AddArrayToObject(obj, "grant_types") : NULL;
	ok = g &&
	     cJSON_AddItemToArray(g, cJSON_CreateString("authorization_code"));
	if (ok && m->refresh)
		ok = cJSON_AddItemToArray(g,
		                          cJSON_CreateString("refresh_token"));
	rt = ok ? cJSON_AddArrayToObject(obj, "response_types") : NULL;
	ok = rt && cJSON_AddItemToArray(rt, cJSON_CreateString("code"));
	if (ok && m->client_name)
		ok = cJSON_AddStringToObject(obj, "client_name",
		                             m->client_name) != NULL;
	if (ok && m->client_uri)
		ok = cJSON_AddStringToObject(obj, "client_uri",
		                             m->client_uri) != NULL;
	if (ok && m->scope)
		ok = cJSON_AddStringToObject(obj, "scope", m->scope) != NULL;
	if (ok && m->software_id)
		ok = cJSON_AddStringToObject(obj, "software_id",
		                             m->software_id) != NULL;
	if (ok && m->software_version)
		ok = cJSON_AddStringToObject(obj, "software_version",
		                             m->software_version) != NULL;
	return ok;
}

bool oauth_client_redirect_ok(const struct oauth_client_meta *m,
                              const char *requested, const char **which)
{
	for (size_t i = 0; i < m->n_redirect; i++) {
		if (oauth_uri_match(m->redirect_uris[i], requested)) {
			if (which)
				*which = m->redirect_uris[i];
			return true;
		}
	}
	return false;
}
