/* SPDX-License-Identifier: MIT */
/*
 * oauth: creation, the metadata documents, dynamic client registration,
 * the check of access tokens on MCP requests, and purging. The issuer is
 * the origin of PUBLIC_BASE_URL (config.c refuses a base URL with a path
 * when OAuth is on), never anything from a request's Host header, so a
 * request cannot make the server describe itself as another.
 */
#include "oauth/oauth_internal.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "oauth/oauth_page.h"
#include "util/buf.h"
#include "util/errmsg.h"
#include "util/hex.h"
#include "util/jsonx.h"
#include "util/log.h"
#include "util/netaddr.h"
#include "util/stats.h"

#define UNUSED_CLIENT_DAYS 7
#define REGISTER_BURST 20
#define REGISTER_PER_S (1.0 / 6) /* ten a minute from one address */
#define REGISTER_ALL_BURST 200
#define REGISTER_ALL_PER_S 2.0
#define CONSENT_BURST 10
#define CONSENT_PER_S (1.0 / 30) /* two failures a minute */

/* ---- helpers shared by the module ------------------------------------- */

/*
 * The pending table is the server's (struct oauth); oauth_authz.c fills
 * and empties its entries, and the server frees what is left when it is
 * destroyed, so the clearing lives here, below both.
 */
void oauth_pending_clear(struct oauth_pending *p)
{
	free(p->client_id);
	free(p->client_name);
	free(p->redirect_uri);
	free(p->state);
	free(p->challenge);
	free(p->resource);
	free(p->scope);
	OPENSSL_cleanse(p->csrf, sizeof(p->csrf));
	memset(p, 0, sizeof(*p));
}

void oauth_hash(const void *s, size_t n, unsigned char out[OAUTH_DB_HASH_LEN])
{
	unsigned int len = 0;

	if (!EVP_Digest(s, n, out, &len, EVP_sha256(), NULL))
		memset(out, 0, OAUTH_DB_HASH_LEN);
}

int oauth_new_secret(const char *prefix, char *out, size_t outlen)
{
	char hex[OAUTH_SECRET_HEX + 1];

	if (hex_random(hex, OAUTH_SECRET_HEX / 2) < 0 ||
	    (size_t)snprintf(out, outlen, "%s%s", prefix, hex) >= outlen) {
		out[0] = '\0';
		return -EIO;
	}
	OPENSSL_cleanse(hex, sizeof(hex));
	return 0;
}

long long oauth_now(void)
{
	return (long long)time(NULL);
}

bool oauth_audience_ok(const struct oauth *o, const char *resource)
{
	for (size_t i = 0; i < OAUTH_MAX_AUDIENCES && o->audiences[i]; i++) {
		if (strcmp(o->audiences[i], resource) == 0)
			return true;
	}
	return false;
}

const struct oauth_tenant *oauth_tenant_bound(const struct oauth *o,
                                              const char *tenant,
                                              const unsigned char *binding)
{
	for (size_t i = 0; i < o->n_tenants; i++) {
		const struct oauth_tenant *t = &o->tenants[i];

		if (strcmp(t->name, tenant) == 0)
			return CRYPTO_memcmp(t->binding, binding,
			                     OAUTH_DB_BINDING_LEN) == 0
			           ? t
			           : NULL;
	}
	return NULL;
}

const struct oauth_tenant *oauth_tenant_of_token(const struct oauth *o,
                                                 const char *token)
{
	unsigned char md[OAUTH_DB_HASH_LEN];
	const struct oauth_tenant *match = NULL;

	oauth_hash(token, strlen(token), md);
	/* Every tenant is compared, whatever matches, so timing says nothing.
	 */
	for (size_t i = 0; i < o->n_tenants; i++) {
		if (CRYPTO_memcmp(md, o->tenants[i].digest, sizeof(md)) == 0)
			match = &o->tenants[i];
	}
	OPENSSL_cleanse(md, sizeof(md));
	return match;
}

bool oauth_vschar(const char *s, size_t max)
{
	size_t n;

	if (!s)
		return false;
	n = strlen(s);
	if (n == 0 || n > max)
		return false;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < 0x20 || s[i] > 0x7e)
			return false;
	}
	return true;
}

void oauth_resp_finish(struct oauth_resp *r)
{
	if (!r)
		return;
	free(r->body);
	free(r->location);
	free(r->set_cookie);
	free(r->www_authenticate);
	memset(r, 0, sizeof(*r));
}

void oauth_json(struct oauth_resp *r, unsigned status, void *obj)
{
	cJSON *o = obj;

	r->status = status;
	r->content_type = "application/json";
	r->cache_control = "no-store";
	r->body = o ? cJSON_PrintUnformatted(o) : NULL;
	cJSON_Delete(o);
	if (!r->body) {
		r->status = 500;
		r->body = strdup("{\"error\":\"server_error\"}");
	}
}

void oauth_json_error(struct oauth_resp *r, unsigned status, const char *error,
                      const char *desc)
{
	cJSON *o = cJSON_CreateObject();

	if (o) {
		cJSON_AddStringToObject(o, "error", error);
		if (desc)
			cJSON_AddStringToObject(o, "error_description", desc);
	}
	oauth_json(r, status, o);
}

void oauth_error_page(struct oauth_resp *r, unsigned status, const char *title,
                      const char *what, const char *next)
{
	r->status = status;
	r->content_type = "text/html; charset=utf-8";
	r->cache_control = "no-store";
	r->page = true;
	r->body = oauth_page_error(title, what, next);
	if (!r->body) {
		r->status = 500;
		r->content_type = "text/plain; charset=utf-8";
		r->body = strdup("out of memory\n");
	}
}

/* ---- creation ------------------------------------------------------------ */

static bool keep_grant(void *data, const char *tenant,
                       const unsigned char *binding)
{
	return oauth_tenant_bound(data, tenant, binding) != NULL;
}

/* Drops grants approved with a token that is no longer configured. */
static int sweep_unbound(struct oauth *o, char *err, size_t errlen)
{
	struct store_tx *tx;
	long long n = 0;
	int r = store_begin(o->st, true, &tx);

	if (r == 0)
		r = oauth_db_grants_sweep(tx, keep_grant, o, &n);
	if (r == 0)
		r = store_commit(tx);
	else if (tx)
		store_rollback(tx);
	if (r < 0)
		return errmsg_fail(r, err, errlen,
		                   "cannot read the OAuth grants in the store "
		                   "%s (see the log)",
		                   store_path(o->st));
	if (n > 0)
		log_info("oauth: revoked %lld grant(s) approved with API "
		         "tokens that are no longer configured",
		         n);
	return 0;
}

int oauth_create(const struct config *cfg, struct store *st, struct oauth **out,
                 char *err, size_t errlen)
{
	static const char binding_label[] = "mcp-sandboxd oauth grant binding";
	const char *base = cfg->public_base_url;
	struct oauth *o;
	int r;

	*out = NULL;
	o = calloc(1, sizeof(*o));
	if (!o)
		return errmsg_fail(-ENOMEM, err, errlen, "out of memory");
	o->cfg = cfg;
	o->st = st;
	pthread_mutex_init(&o->mu, NULL);
	snprintf(o->resource, sizeof(o->resource), "%s/mcp", base);
	o->audiences[0] = buf_asprintf("%s/mcp", base);
	o->audiences[1] = buf_asprintf("%s/mcp/", base);
	o->audiences[2] = buf_asprintf("%s/sse", base);
	o->audiences[3] = buf_asprintf("%s", base);
	o->audiences[4] = buf_asprintf("%s/", base);
	/* The __Host- prefix needs Secure, which plain http cannot carry. */
	o->cookie_name = strncmp(cfg->oauth_issuer, "https://", 8) == 0
	                     ? "__Host-mcpsd_consent"
	                     : "mcpsd_consent";
	o->policy.hosts = cfg->oauth_redirect_hosts;
	o->policy.loopback = cfg->oauth_redirect_loopback;
	o->tenants =
	    calloc(cfg->n_tokens ? cfg->n_tokens : 1, sizeof(*o->tenants));
	o->reg_addr = ratelimit_create(4096, REGISTER_BURST, REGISTER_PER_S);
	o->reg_all =
	    ratelimit_create(1, REGISTER_ALL_BURST, REGISTER_ALL_PER_S);
	o->consent_addr = ratelimit_create(4096, CONSENT_BURST, CONSENT_PER_S);
	bool ok = o->tenants && o->reg_addr && o->reg_all && o->consent_addr;

	for (size_t i = 0; i < 5; i++)
		ok = ok && o->audiences[i];
	if (!ok) {
		oauth_destroy(o);
		return errmsg_fail(-ENOMEM, err, errlen, "out of memory");
	}
	/*
	 * A grant remembers a fingerprint of the token that approved it, not
	 * the token's digest itself: a leaked database tells nothing about
	 * the tokens, and a new token for the tenant changes the fingerprint.
	 */
	for (size_t i = 0; i < cfg->n_tokens; i++) {
		struct oauth_tenant *t = &o->tenants[i];
		unsigned char
		    in[sizeof(binding_label) + CONFIG_TOKEN_DIGEST_LEN];
		unsigned char md[OAUTH_DB_HASH_LEN];

		t->name = cfg->tokens[i].tenant;
		t->digest = cfg->tokens[i].digest;
		memcpy(in, binding_label, sizeof(binding_label));
		memcpy(in + sizeof(binding_label), t->digest,
		       CONFIG_TOKEN_DIGEST_LEN);
		oauth_hash(in, sizeof(in), md);
		memcpy(t->binding, md, OAUTH_DB_BINDING_LEN);
		o->n_tenants++;
	}
	r = sweep_unbound(o, err, errlen);
	if (r == 0 && oauth_purge(o) < 0)
		r = errmsg_fail(-EIO, err, errlen,
		                "cannot purge expired OAuth rows in the store "
		                "%s (see the log)",
		                store_path(st));
	if (r < 0) {
		oauth_destroy(o);
		return r;
	}
	*out = o;
	return 0;
}

void oauth_source_key(const struct oauth_req *rq, char out[OAUTH_SOURCE_MAX])
{
	netaddr_source_key(rq->client_addr, out, OAUTH_SOURCE_MAX);
}

void oauth_destroy(struct oauth *o)
{
	if (!o)
		return;
	for (size_t i = 0; i < OAUTH_MAX_PENDING; i++)
		oauth_pending_clear(&o->pending[i]);
	for (size_t i = 0; i < OAUTH_MAX_AUDIENCES; i++)
		free(o->audiences[i]);
	ratelimit_destroy(o->reg_addr);
	ratelimit_destroy(o->reg_all);
	ratelimit_destroy(o->consent_addr);
	free(o->tenants);
	pthread_mutex_destroy(&o->mu);
	free(o);
}

/*
 * Rows of each kind deleted in one transaction: a long purge never holds
 * the store for long at a time.
 */
#define OAUTH_PURGE_BATCH 500

/* One batch in one transaction; *full: a kind filled its batch. */
static long long oauth_purge_batch(struct oauth *o, long long now, bool *full)
{
	struct store_tx *tx;
	long long n = 0, clients = 0;
	int r = store_begin(o->st, true, &tx);

	*full = false;
	if (r == 0)
		r = oauth_db_purge(tx, now, OAUTH_PURGE_BATCH, &n, full);
	if (r == 0)
		r = oauth_db_clients_prune(tx,
		                           now - UNUSED_CLIENT_DAYS * 86400LL,
		                           OAUTH_PURGE_BATCH, &clients);
	if (r == 0)
		r = store_commit(tx);
	else if (tx)
		store_rollback(tx);
	if (r < 0) {
		log_warnx("oauth: purging expired rows failed");
		*full = false;
		return r;
	}
	if (clients >= OAUTH_PURGE_BATCH)
		*full = true;
	return n + clients;
}

/* Batches until none is full or deadline_ms has passed; after one. */
static long long oauth_purge_until(struct oauth *o, long long deadline_ms,
                                   bool *more)
{
	long long now = oauth_now(), total = 0, n;

	do {
		n = oauth_purge_batch(o, now, more);
		if (n < 0)
			return n;
		total += n;
	} while (*more && !cron_past(deadline_ms));
	if (total > 0)
		log_debug("oauth: purged %lld expired row(s) and unused "
		          "client(s)%s",
		          total, *more ? "; more next time" : "");
	return total;
}

long long oauth_purge(struct oauth *o)
{
	bool more;

	return oauth_purge_until(o, LLONG_MAX, &more);
}

enum cron_next oauth_job_purge(void *o, long long deadline_ms)
{
	bool more = false;

	(void)oauth_purge_until(o, deadline_ms, &more);
	return more ? CRON_MORE : CRON_DONE;
}

struct oauth_emit {
	stats_emit_fn emit;
	void *ctx;
};

static void oauth_emit_grants(void *arg, const char *tenant, long long n)
{
	const struct oauth_emit *e = arg;
	const char *const values[] = {tenant, NULL};

	e->emit(e->ctx, values, (double)n);
}

/* The grants gauge, read from the store (every replica's) at scrape time. */
static void oauth_read_grants(void *arg, stats_emit_fn emit, void *ctx)
{
	struct oauth *o = arg;
	struct oauth_emit e = {emit, ctx};
	struct store_tx *tx;

	if (store_begin(o->st, false, &tx) < 0)
		return;
	if (oauth_db_grants_by_tenant(tx, oauth_emit_grants, &e) < 0)
		log_warnx("oauth: counting grants for /metrics failed");
	store_rollback(tx);
}

void oauth_set_stats(struct oauth *o, struct stats *s)
{
	static const char *const tenant[] = {"tenant", NULL};

	stats_gauge_fn(s, "mcpsd_oauth_grants",
	               "OAuth grants in the store, by tenant", tenant,
	               oauth_read_grants, o);
}

/* ---- metadata ------------------------------------------------------------ */

void oauth_metadata(struct oauth *o, struct oauth_resp *out)
{
	static const char *const scopes[] = {OAUTH_SCOPE, NULL};
	static const char *const responses[] = {"code", NULL};
	static const char *const modes[] = {"query", NULL};
	static const char *const grants[] = {"authorization_code",
	                                     "refresh_token", NULL};
	static const char *const methods[] = {"none", "client_secret_post",
	                                      "client_secret_basic", NULL};
	static const char *const pkce[] = {"S256", NULL};
	const char *iss = o->cfg->oauth_issuer;
	cJSON *m = cJSON_CreateObject();
	char url[600];

	if (m) {
		cJSON_AddStringToObject(m, "issuer", iss);
		snprintf(url, sizeof(url), "%s%s", iss, OAUTH_PATH_AUTHORIZE);
		cJSON_AddStringToObject(m, "authorization_endpoint", url);
		snprintf(url, sizeof(url), "%s%s", iss, OAUTH_PATH_TOKEN);
		cJSON_AddStringToObject(m, "token_endpoint", url);
		snprintf(url, sizeof(url), "%s%s", iss, OAUTH_PATH_REGISTER);
		cJSON_AddStringToObject(m, "registration_endpoint", url);
		snprintf(url, sizeof(url), "%s%s", iss, OAUTH_PATH_REVOKE);
		cJSON_AddStringToObject(m, "revocation_endpoint", url);
		cJSON_AddItemToObject(m, "scopes_supported",
		                      jsonx_strv(scopes));
		cJSON_AddItemToObject(m, "response_types_supported",
		                      jsonx_strv(responses));
		cJSON_AddItemToObject(m, "response_modes_supported",
		                      jsonx_strv(modes));
		cJSON_AddItemToObject(m, "grant_types_supported",
		                      jsonx_strv(grants));
		cJSON_AddItemToObject(m,
		                      "token_endpoint_auth_methods_supported",
		                      jsonx_strv(methods));
		cJSON_AddItemToObject(
		    m, "revocation_endpoint_auth_methods_supported",
		    jsonx_strv(methods));
		cJSON_AddItemToObject(m, "code_challenge_methods_supported",
		                      jsonx_strv(pkce));
		cJSON_AddBoolToObject(
		    m, "authorization_response_iss_parameter_supported", true);
		cJSON_AddBoolToObject(m,
		                      "client_id_metadata_document_supported",
		                      o->cfg->oauth_cimd);
	}
	oauth_json(out, 200, m);
	out->cache_control = "public, max-age=300";
}

void oauth_resource_metadata(struct oauth *o, const char *suffix,
                             struct oauth_resp *out)
{
	static const char *const scopes[] = {OAUTH_SCOPE, NULL};
	static const char *const methods[] = {"header", NULL};
	const char *base = o->cfg->public_base_url;
	cJSON *m;
	cJSON *as;

	/*
	 * The resource is the URL people paste: <base>/mcp, also in the
	 * document at the root, which clients fetch when the path-specific
	 * one is missing. /sse is the same server for legacy clients.
	 */
	if (strcmp(suffix, "") != 0 && strcmp(suffix, "/") != 0 &&
	    strcmp(suffix, "/mcp") != 0 && strcmp(suffix, "/mcp/") != 0 &&
	    strcmp(suffix, "/sse") != 0) {
		oauth_json_error(out, 404, "not_found",
		                 "no protected resource at this path; the MCP "
		                 "endpoint is /mcp");
		return;
	}
	m = cJSON_CreateObject();
	if (m) {
		char *res =
		    buf_asprintf("%s%s", base,
		                 strcmp(suffix, "/sse") == 0 ? "/sse" : "/mcp");

		if (res)
			cJSON_AddStringToObject(m, "resource", res);
		free(res);
		as = cJSON_AddArrayToObject(m, "authorization_servers");
		if (as)
			cJSON_AddItemToArray(
			    as, cJSON_CreateString(o->cfg->oauth_issuer));
		cJSON_AddItemToObject(m, "scopes_supported",
		                      jsonx_strv(scopes));
		cJSON_AddItemToObject(m, "bearer_methods_supported",
		                      jsonx_strv(methods));
		cJSON_AddStringToObject(m, "resource_name",
		                        "mcp-sandboxd code sandbox");
	}
	oauth_json(out, 200, m);
	out->cache_control = "public, max-age=300";
}

/* ---- registration ---------------------------------------------------- */

/* Makes room under OAUTH_MAX_CLIENTS by pruning clients never used. */
static int make_room(struct oauth *o, struct store_tx *tx)
{
	long long n = 0, pruned = 0;
	int r = oauth_db_client_count(tx, &n);

	if (r < 0 || n < (long long)o->cfg->oauth_max_clients)
		return r;
	/* Unused for an hour: long enough for anyone mid-consent. */
	r = oauth_db_clients_prune(tx, oauth_now() - 3600, 100, &pruned);
	if (r < 0)
		return r;
	if (pruned > 0) {
		log_info("oauth: pruned %lld never-used client(s) at the limit "
		         "of %u",
		         pruned, o->cfg->oauth_max_clients);
		return 0;
	}
	log_warnx("oauth: refusing a registration: %lld clients, the limit "
	          "OAUTH_MAX_CLIENTS=%u, and none unused for an hour",
	          n, o->cfg->oauth_max_clients);
	return -ENOSPC;
}

void oauth_register(struct oauth *o, const struct oauth_req *rq,
                    struct oauth_resp *out)
{
	struct oauth_client_meta m;
	struct oauth_db_client c;
	struct store_tx *tx = NULL;
	char secret[OAUTH_SECRET_HEX + 16] = "";
	char desc[512];
	const char *error;
	unsigned wait = 0;
	char source[OAUTH_SOURCE_MAX];
	cJSON *res;
	int r;

	memset(&c, 0, sizeof(c));
	oauth_source_key(rq, source);
	if (!ratelimit_take(o->reg_addr, source, &wait) ||
	    !ratelimit_take(o->reg_all, "", &wait)) {
		oauth_json_error(out, 429, "temporarily_unavailable",
		                 "too many client registrations; retry later");
		out->retry_after = wait;
		return;
	}
	if (oauth_client_parse(rq->body ? rq->body : "", rq->body_len, NULL,
	                       &o->policy, &m, &error, desc,
	                       sizeof(desc)) < 0) {
		log_info("oauth: refused a registration: %s", desc);
		oauth_json_error(out, 400, error, desc);
		return;
	}
	if (hex_random(c.client_id, 16) < 0 ||
	    (m.auth_method != OAUTH_AUTH_NONE &&
	     oauth_new_secret("", secret, sizeof(secret)) < 0)) {
		oauth_json_error(out, 500, "server_error", "no randomness");
		goto out;
	}
	res = cJSON_CreateObject();
	if (!res || !oauth_client_meta_to_json(&m, res) ||
	    !(c.metadata = cJSON_PrintUnformatted(res))) {
		cJSON_Delete(res);
		oauth_json_error(out, 500, "server_error", "out of memory");
		goto out;
	}
	c.has_secret = secret[0] != '\0';
	if (c.has_secret)
		oauth_hash(secret, strlen(secret), c.secret_hash);
	c.auth_method = oauth_auth_method_name(m.auth_method);
	c.created_at = c.refreshed_at = oauth_now();
	r = store_begin(o->st, true, &tx);
	if (r == 0)
		r = make_room(o, tx);
	if (r == 0)
		r = oauth_db_client_insert(tx, &c);
	if (r == 0)
		r = store_commit(tx);
	else if (tx)
		store_rollback(tx);
	if (r < 0) {
		cJSON_Delete(res);
		if (r == -ENOSPC) {
			oauth_json_error(out, 503, "temporarily_unavailable",
			                 "this server has as many registered "
			                 "clients as it keeps; retry later");
			out->retry_after = 3600;
		} else {
			oauth_json_error(out, 503, "temporarily_unavailable",
			                 "the server's store is unavailable; "
			                 "retry later");
			out->retry_after = 10;
		}
		goto out;
	}
	cJSON_AddStringToObject(res, "client_id", c.client_id);
	cJSON_AddNumberToObject(res, "client_id_issued_at",
	                        (double)c.created_at);
	if (c.has_secret) {
		cJSON_AddStringToObject(res, "client_secret", secret);
		cJSON_AddNumberToObject(res, "client_secret_expires_at", 0);
	}
	log_info("oauth: registered client %s (%s, %s, %zu redirect URI(s))",
	         c.client_id, m.client_name ? m.client_name : "unnamed",
	         c.auth_method, m.n_redirect);
	oauth_json(out, 201, res);
out:
	OPENSSL_cleanse(secret, sizeof(secret));
	cJSON_free(c.metadata);
	oauth_client_meta_finish(&m);
}

/* ---- the protected resource --------------------------------------------- */

enum oauth_verdict oauth_verify(struct oauth *o, const char *token, size_t len,
                                const char **tenant)
{
	return oauth_verify_client(o, token, len, tenant, NULL, 0);
}

enum oauth_verdict oauth_verify_client(struct oauth *o, const char *token,
                                       size_t len, const char **tenant,
                                       char *client, size_t clientlen)
{
	static const size_t plen = sizeof(OAUTH_ACCESS_PREFIX) - 1;
	unsigned char hash[OAUTH_DB_HASH_LEN];
	struct oauth_db_token t;
	const struct oauth_tenant *ten;
	struct store_tx *tx;
	int r;

	*tenant = NULL;
	if (client && clientlen)
		client[0] = '\0';
	if (!o || len != plen + OAUTH_SECRET_HEX ||
	    memcmp(token, OAUTH_ACCESS_PREFIX, plen) != 0)
		return OAUTH_TOKEN_NOT_OURS;
	oauth_hash(token, len, hash);
	r = store_begin(o->st, false, &tx);
	if (r < 0)
		return OAUTH_TOKEN_UNAVAILABLE;
	r = oauth_db_token_get(tx, hash, OAUTH_DB_ACCESS, &t);
	store_rollback(tx);
	if (r == -ENOENT)
		return OAUTH_TOKEN_INVALID;
	if (r < 0)
		return OAUTH_TOKEN_UNAVAILABLE;
	if (t.expires_at <= oauth_now() ||
	    !oauth_audience_ok(o, t.grant.resource))
		return OAUTH_TOKEN_INVALID;
	ten = oauth_tenant_bound(o, t.grant.tenant, t.grant.binding);
	if (!ten)
		return OAUTH_TOKEN_INVALID;
	/* Space-separated scopes; MCP needs OAUTH_SCOPE among them. */
	{
		const char *p = t.grant.scope;
		size_t sl = strlen(OAUTH_SCOPE);
		bool found = false;

		while (*p && !found) {
			size_t n = strcspn(p, " ");

			found = n == sl && memcmp(p, OAUTH_SCOPE, sl) == 0;
			p += n;
			p += strspn(p, " ");
		}
		if (!found)
			return OAUTH_TOKEN_SCOPE;
	}
	*tenant = ten->name;
	if (client && clientlen)
		snprintf(client, clientlen, "%s", t.grant.client_id);
	return OAUTH_TOKEN_OK;
}

char *oauth_challenge(struct oauth *o, const char *path, enum oauth_verdict v,
                      bool presented)
{
	const char *doc = path && (strcmp(path, "/sse") == 0 ||
	                           strncmp(path, "/messages", 9) == 0)
	                      ? "/sse"
	                      : "/mcp";
	const char *error = v == OAUTH_TOKEN_SCOPE
	                        ? ", error=\"insufficient_scope\""
	                    : presented ? ", error=\"invalid_token\""
	                                : "";

	return buf_asprintf(
	    "Bearer realm=\"mcp\", resource_metadata=\"%s%s%s\", "
	    "scope=\"%s\"%s",
	    o->cfg->public_base_url, OAUTH_PATH_RESOURCE_METADATA, doc,
	    OAUTH_SCOPE, error);
}
