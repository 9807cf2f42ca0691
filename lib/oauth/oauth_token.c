/* SPDX-License-Identifier: MIT */
/*
 * oauth_token: the token endpoint (authorization code and refresh token
 * grants) and revocation. Each exchange is one write transaction, so a
 * code or refresh token is consumed exactly once even when two requests
 * race: the second finds it used. A second use of either is treated as
 * theft (RFC 6749 section 4.1.2, OAuth 2.1 section 4.3.1): the whole grant,
 * with every token issued from it, is deleted. Errors that follow a
 * consumed code still commit, so the mark stays.
 */
#include "oauth/oauth_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "oauth/oauth_cimd.h"
#include "util/log.h"

#define SECRET_MAX 256

/* Parameters come in the body; the query must be empty. */
static bool params(const struct oauth_req *rq, struct oauth_form *f,
                   struct oauth_resp *out)
{
	char why[300];

	if (rq->query_error || (rq->query && rq->query->n > 0)) {
		oauth_json_error(out, 400, "invalid_request",
		                 "send the parameters in the request body "
		                 "(application/x-www-form-urlencoded), not in "
		                 "the URL");
		return false;
	}
	if (oauth_form_parse(f, rq->body ? rq->body : "", rq->body_len, why,
	                     sizeof(why)) < 0) {
		oauth_json_error(out, 400, "invalid_request", why);
		return false;
	}
	return true;
}

static void invalid_client(struct oauth_resp *out, bool basic, const char *desc)
{
	oauth_json_error(out, 401, "invalid_client", desc);
	if (basic)
		out->www_authenticate =
		    strdup("Basic realm=\"mcp-sandboxd\", charset=\"UTF-8\"");
}

/*
 * Authenticates the client of a token or revocation request: Basic
 * credentials, or client_id (and client_secret) in the body, never both.
 * Returns true with *c filled (release with oauth_db_client_finish), or
 * false with the error in out.
 */
static bool authenticate(struct oauth *o, const struct oauth_req *rq,
                         const struct oauth_form *f, struct oauth_db_client *c,
                         struct oauth_resp *out)
{
	char id[OAUTH_URI_MAX + 1], secret[SECRET_MAX];
	const char *bid = oauth_form_get(f, "client_id");
	const char *bsecret = oauth_form_get(f, "client_secret");
	unsigned char hash[OAUTH_DB_HASH_LEN];
	struct store_tx *tx;
	bool ok = false;
	int basic, r;

	memset(c, 0, sizeof(*c));
	basic = oauth_form_basic(rq->authorization, id, sizeof(id), secret,
	                         sizeof(secret));
	if (basic < 0) {
		invalid_client(out, true, "malformed Basic credentials");
		return false;
	}
	if (basic && (bsecret || (bid && strcmp(bid, id) != 0))) {
		oauth_json_error(out, 400, "invalid_request",
		                 "client credentials both in the Authorization "
		                 "header and in the body; use one method");
		goto out;
	}
	if (!basic) {
		if (!bid || strlen(bid) > OAUTH_URI_MAX ||
		    (bsecret && strlen(bsecret) >= sizeof(secret))) {
			invalid_client(out, false,
			               "client_id is missing or too long");
			goto out;
		}
		snprintf(id, sizeof(id), "%s", bid);
		snprintf(secret, sizeof(secret), "%s", bsecret ? bsecret : "");
	}
	r = store_begin(o->st, false, &tx);
	if (r == 0) {
		r = oauth_db_client_get(tx, id, c);
		store_rollback(tx);
	}
	if (r == -ENOENT || (r == 0 && c->is_document && !o->cfg->oauth_cimd)) {
		/* invalid_client makes clients such as claude.ai register
		 * again, which is the way out of a forgotten client. */
		invalid_client(out, basic, "unknown client; register again");
		goto out;
	}
	if (r < 0) {
		oauth_json_error(
		    out, 503, "temporarily_unavailable",
		    "the server's store is unavailable; retry later");
		out->retry_after = 10;
		goto out;
	}
	if (c->has_secret) {
		oauth_hash(secret, strlen(secret), hash);
		if (!secret[0] ||
		    CRYPTO_memcmp(hash, c->secret_hash, sizeof(hash)) != 0) {
			log_info("oauth: client %.64s failed to authenticate",
			         id);
			invalid_client(out, basic,
			               "client authentication failed");
			goto out;
		}
	}
	ok = true;
out:
	OPENSSL_cleanse(secret, sizeof(secret));
	if (!ok)
		oauth_db_client_finish(c);
	return ok;
}

/* BASE64URL(SHA-256(verifier)) == challenge, in constant time. */
static bool pkce_ok(const char *verifier, const char *challenge)
{
	unsigned char md[OAUTH_DB_HASH_LEN], b64[48];
	size_t n, cl = strlen(challenge);

	if (!verifier || strlen(verifier) < 43 || strlen(verifier) > 128)
		return false;
	for (const char *p = verifier; *p; p++) {
		if (!((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
		      (*p >= '0' && *p <= '9') || strchr("-._~", *p)))
			return false;
	}
	oauth_hash(verifier, strlen(verifier), md);
	EVP_EncodeBlock(b64, md, sizeof(md));
	/* base64url without padding: 43 characters for 32 bytes. */
	for (n = 0; n < 43; n++) {
		if (b64[n] == '+')
			b64[n] = '-';
		else if (b64[n] == '/')
			b64[n] = '_';
	}
	return cl == 43 && CRYPTO_memcmp(b64, challenge, 43) == 0;
}

/* Issues an access token (and a refresh token) for a grant into res. */
static int issue(struct oauth *o, struct store_tx *tx,
                 const struct oauth_db_grant *g, bool refresh, cJSON **res)
{
	char access[OAUTH_TOKEN_MAX], rt[OAUTH_TOKEN_MAX] = "";
	unsigned char hash[OAUTH_DB_HASH_LEN];
	long long now = oauth_now();
	cJSON *j;
	int r;

	*res = NULL;
	if (oauth_new_secret(OAUTH_ACCESS_PREFIX, access, sizeof(access)) < 0 ||
	    (refresh &&
	     oauth_new_secret(OAUTH_REFRESH_PREFIX, rt, sizeof(rt)) < 0))
		return -EIO;
	oauth_hash(access, strlen(access), hash);
	r = oauth_db_token_insert(tx, hash, g->grant_id, OAUTH_DB_ACCESS,
	                          now + o->cfg->oauth_access_ttl_s);
	if (r == 0 && refresh) {
		oauth_hash(rt, strlen(rt), hash);
		r = oauth_db_token_insert(
		    tx, hash, g->grant_id, OAUTH_DB_REFRESH,
		    now + 86400LL * o->cfg->oauth_refresh_ttl_days);
	}
	j = r == 0 ? cJSON_CreateObject() : NULL;
	if (j) {
		cJSON_AddStringToObject(j, "access_token", access);
		cJSON_AddStringToObject(j, "token_type", "Bearer");
		cJSON_AddNumberToObject(j, "expires_in",
		                        o->cfg->oauth_access_ttl_s);
		cJSON_AddStringToObject(j, "scope", g->scope);
		if (refresh)
			cJSON_AddStringToObject(j, "refresh_token", rt);
	} else if (r == 0) {
		r = -ENOMEM;
	}
	OPENSSL_cleanse(access, sizeof(access));
	OPENSSL_cleanse(rt, sizeof(rt));
	*res = j;
	return r;
}

/* Whether the client's metadata allows refresh tokens. */
static bool client_refreshes(const struct oauth_db_client *c)
{
	cJSON *m = cJSON_Parse(c->metadata);
	cJSON *g =
	    m ? cJSON_GetObjectItemCaseSensitive(m, "grant_types") : NULL;
	const cJSON *e;
	bool yes = false;

	cJSON_ArrayForEach (e, g) {
		if (cJSON_IsString(e) &&
		    strcmp(e->valuestring, "refresh_token") == 0)
			yes = true;
	}
	cJSON_Delete(m);
	return yes;
}

/* Ends a transaction and answers: commit first so marks persist. */
static void finish_tx(struct store_tx *tx, struct oauth_resp *out,
                      unsigned status, const char *error, const char *desc,
                      cJSON *ok)
{
	if (store_commit(tx) < 0) {
		cJSON_Delete(ok);
		oauth_json_error(
		    out, 503, "temporarily_unavailable",
		    "the server's store is unavailable; retry later");
		out->retry_after = 10;
		return;
	}
	if (ok)
		oauth_json(out, 200, ok);
	else
		oauth_json_error(out, status, error, desc);
}

static void code_grant(struct oauth *o, const struct oauth_form *f,
                       const struct oauth_db_client *c, struct oauth_resp *out)
{
	const char *code = oauth_form_get(f, "code");
	const char *verifier = oauth_form_get(f, "code_verifier");
	const char *redirect = oauth_form_get(f, "redirect_uri");
	const char *resource = oauth_form_get(f, "resource");
	unsigned char hash[OAUTH_DB_HASH_LEN];
	struct oauth_db_code dc;
	struct store_tx *tx;
	cJSON *res = NULL;
	int r;

	if (!code || !oauth_vschar(code, OAUTH_TOKEN_MAX) || !verifier) {
		oauth_json_error(out, 400, "invalid_request",
		                 "code and code_verifier are required");
		return;
	}
	if (resource && !oauth_audience_ok(o, resource)) {
		oauth_json_error(out, 400, "invalid_target",
		                 "resource names another server");
		return;
	}
	oauth_hash(code, strlen(code), hash);
	if (store_begin(o->st, true, &tx) < 0) {
		oauth_json_error(
		    out, 503, "temporarily_unavailable",
		    "the server's store is unavailable; retry later");
		return;
	}
	r = oauth_db_code_take(tx, hash, oauth_now(), &dc);
	if (r == -ENOENT) {
		store_rollback(tx);
		oauth_json_error(out, 400, "invalid_grant",
		                 "unknown or expired authorization code");
		return;
	}
	if (r < 0) {
		store_rollback(tx);
		oauth_json_error(
		    out, 503, "temporarily_unavailable",
		    "the server's store is unavailable; retry later");
		return;
	}
	if (dc.used_before) {
		log_warnx("oauth: authorization code of grant %.8s used again; "
		          "revoking the grant and its tokens",
		          dc.grant.grant_id);
		r = oauth_db_grant_delete(tx, dc.grant.grant_id);
		finish_tx(tx, out, 400, "invalid_grant",
		          "authorization code already used; every token issued "
		          "with it is revoked",
		          NULL);
		return;
	}
	if (strcmp(dc.grant.client_id, c->client_id) != 0) {
		finish_tx(tx, out, 400, "invalid_grant",
		          "the code was issued to another client", NULL);
		return;
	}
	if (dc.expires_at < oauth_now()) {
		finish_tx(tx, out, 400, "invalid_grant",
		          "the authorization code has expired", NULL);
		return;
	}
	if ((dc.redirect_given || redirect) &&
	    (!redirect || strcmp(redirect, dc.redirect_uri) != 0)) {
		finish_tx(tx, out, 400, "invalid_grant",
		          "redirect_uri differs from the authorization request",
		          NULL);
		return;
	}
	if (!pkce_ok(verifier, dc.challenge)) {
		finish_tx(tx, out, 400, "invalid_grant",
		          "code_verifier does not match the code_challenge",
		          NULL);
		return;
	}
	if (!oauth_tenant_bound(o, dc.grant.tenant, dc.grant.binding)) {
		r = oauth_db_grant_delete(tx, dc.grant.grant_id);
		finish_tx(tx, out, 400, "invalid_grant",
		          "the API token that approved this was changed", NULL);
		return;
	}
	r = issue(o, tx, &dc.grant, client_refreshes(c), &res);
	if (r < 0) {
		store_rollback(tx);
		cJSON_Delete(res);
		oauth_json_error(out, 503, "temporarily_unavailable",
		                 "cannot issue tokens now; retry later");
		return;
	}
	finish_tx(tx, out, 200, NULL, NULL, res);
	if (out->status == 200)
		log_info("oauth: issued tokens to client %.64s for tenant %s "
		         "(grant %.8s)",
		         c->client_id, dc.grant.tenant, dc.grant.grant_id);
}

static void refresh_grant(struct oauth *o, const struct oauth_form *f,
                          const struct oauth_db_client *c,
                          struct oauth_resp *out)
{
	const char *rt = oauth_form_get(f, "refresh_token");
	const char *resource = oauth_form_get(f, "resource");
	unsigned char hash[OAUTH_DB_HASH_LEN];
	struct oauth_db_token t;
	struct store_tx *tx;
	long long now = oauth_now();
	cJSON *res = NULL;
	int r;

	if (!rt || !oauth_vschar(rt, OAUTH_TOKEN_MAX)) {
		oauth_json_error(out, 400, "invalid_request",
		                 "refresh_token is required");
		return;
	}
	if (resource && !oauth_audience_ok(o, resource)) {
		oauth_json_error(out, 400, "invalid_target",
		                 "resource names another server");
		return;
	}
	oauth_hash(rt, strlen(rt), hash);
	if (store_begin(o->st, true, &tx) < 0) {
		oauth_json_error(
		    out, 503, "temporarily_unavailable",
		    "the server's store is unavailable; retry later");
		return;
	}
	r = oauth_db_token_get(tx, hash, OAUTH_DB_REFRESH, &t);
	if (r < 0 || strcmp(t.grant.client_id, c->client_id) != 0) {
		store_rollback(tx);
		if (r < 0 && r != -ENOENT)
			oauth_json_error(out, 503, "temporarily_unavailable",
			                 "the server's store is unavailable; "
			                 "retry later");
		else
			oauth_json_error(out, 400, "invalid_grant",
			                 "unknown, expired or revoked refresh "
			                 "token");
		return;
	}
	if (t.rotated_at) {
		log_warnx("oauth: a replaced refresh token of grant %.8s was "
		          "used again; revoking the grant and its tokens",
		          t.grant.grant_id);
		r = oauth_db_grant_delete(tx, t.grant.grant_id);
		finish_tx(tx, out, 400, "invalid_grant",
		          "refresh token already used; the grant is revoked, "
		          "authorize again",
		          NULL);
		return;
	}
	if (t.expires_at < now) {
		store_rollback(tx);
		oauth_json_error(out, 400, "invalid_grant",
		                 "the refresh token has expired; authorize "
		                 "again");
		return;
	}
	if (!oauth_tenant_bound(o, t.grant.tenant, t.grant.binding)) {
		r = oauth_db_grant_delete(tx, t.grant.grant_id);
		finish_tx(tx, out, 400, "invalid_grant",
		          "the API token that approved this was changed; "
		          "authorize again",
		          NULL);
		return;
	}
	r = oauth_db_token_rotate(tx, hash, now);
	if (r == 0)
		r = oauth_db_grant_touch(tx, t.grant.grant_id, now);
	if (r == 0)
		r = issue(o, tx, &t.grant, true, &res);
	if (r < 0) {
		store_rollback(tx);
		cJSON_Delete(res);
		oauth_json_error(out, 503, "temporarily_unavailable",
		                 "cannot issue tokens now; retry later");
		return;
	}
	finish_tx(tx, out, 200, NULL, NULL, res);
}

void oauth_token(struct oauth *o, const struct oauth_req *rq,
                 struct oauth_resp *out)
{
	struct oauth_form f;
	struct oauth_db_client c;
	const char *gt;

	oauth_form_init(&f);
	memset(&c, 0, sizeof(c));
	if (!params(rq, &f, out) || !authenticate(o, rq, &f, &c, out))
		goto out;
	gt = oauth_form_get(&f, "grant_type");
	if (gt && strcmp(gt, "authorization_code") == 0)
		code_grant(o, &f, &c, out);
	else if (gt && strcmp(gt, "refresh_token") == 0)
		refresh_grant(o, &f, &c, out);
	else
		oauth_json_error(
		    out, 400, gt ? "unsupported_grant_type" : "invalid_request",
		    "grant_type must be authorization_code or "
		    "refresh_token");
out:
	oauth_db_client_finish(&c);
	oauth_form_finish(&f);
}

void oauth_revoke(struct oauth *o, const struct oauth_req *rq,
                  struct oauth_resp *out)
{
	struct oauth_form f;
	struct oauth_db_client c;
	struct oauth_db_token t;
	unsigned char hash[OAUTH_DB_HASH_LEN];
	struct store_tx *tx;
	const char *token;
	int r;

	oauth_form_init(&f);
	memset(&c, 0, sizeof(c));
	if (!params(rq, &f, out) || !authenticate(o, rq, &f, &c, out))
		goto out;
	token = oauth_form_get(&f, "token");
	if (!token) {
		oauth_json_error(out, 400, "invalid_request",
		                 "token is required");
		goto out;
	}
	oauth_hash(token, strlen(token), hash);
	r = store_begin(o->st, true, &tx);
	if (r < 0) {
		oauth_json_error(
		    out, 503, "temporarily_unavailable",
		    "the server's store is unavailable; retry later");
		goto out;
	}
	/*
	 * A refresh token ends its grant with every token of it; an access
	 * token ends alone (RFC 7009 section 2.1). Another client's token,
	 * or an unknown one, is answered the same way and left alone.
	 */
	r = oauth_db_token_get(tx, hash, OAUTH_DB_REFRESH, &t);
	if (r == 0 && strcmp(t.grant.client_id, c.client_id) == 0) {
		r = oauth_db_grant_delete(tx, t.grant.grant_id);
		if (r == 0)
			log_info("oauth: client %.64s revoked grant %.8s",
			         c.client_id, t.grant.grant_id);
	} else if (r == -ENOENT || r == 0) {
		r = oauth_db_token_get(tx, hash, OAUTH_DB_ACCESS, &t);
		if (r == 0 && strcmp(t.grant.client_id, c.client_id) == 0)
			r = oauth_db_token_delete(tx, hash);
		else if (r == -ENOENT || r == 0)
			r = 0;
	}
	if (r == 0)
		r = store_commit(tx);
	else
		store_rollback(tx);
	if (r < 0) {
		oauth_json_error(
		    out, 503, "temporarily_unavailable",
		    "the server's store is unavailable; retry later");
		goto out;
	}
	out->status = 200;
	out->content_type = "application/json";
	out->cache_control = "no-store";
	out->body = strdup("{}");
out:
	oauth_db_client_finish(&c);
	oauth_form_finish(&f);
}
