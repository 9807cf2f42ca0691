/* SPDX-License-Identifier: MIT */
/*
 * oauth_authz: the authorization endpoint and the consent form. Until the
 * client and its redirect URI are known to be good, every error is a page
 * for the person in front of the browser, never a redirect: a redirect to
 * an unchecked URI is an open redirect, and one to a wrong client leaks the
 * code. After that, errors go back to the client as RFC 6749 error
 * redirects with state and iss.
 *
 * A consent page is bound three ways: a random request id and CSRF token
 * in the form, and a random browser id in a SameSite=Strict cookie
 * (__Host- prefixed on https); the POST must carry all three and, when the
 * browser sends Origin, come from this server's origin. Wrong API tokens
 * are rate limited per source, and five on one page end it; a right one
 * is checked before any limit but its source's, so that guessers
 * elsewhere cannot lock a person out (a token's length, 16 characters
 * at least, and the per-page limit are what stop guessing). Each source
 * may have OAUTH_PENDING_PER_SOURCE pages waiting.
 */
#include "oauth/oauth_internal.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "oauth/oauth_cimd.h"
#include "oauth/oauth_page.h"
#include "util/buf.h"
#include "util/errmsg.h"
#include "util/hex.h"
#include "util/log.h"
#include "util/mono.h"

#define CIMD_CACHE_S 3600     /* a document is fetched again after this */
#define CIMD_STALE_OK_S 86400 /* a cached copy is used if a fetch fails */
#define STATE_MAX 1024

#define START_AGAIN "Go back to the application and start connecting again."

/*
 * The oldest entry of the source holding the most entries (of the oldest
 * such source on a tie): what goes when the table is full, so that one
 * source's flood pushes out its own entries before anyone else's. Only
 * reached with every slot in use. Lock held.
 */
static struct oauth_pending *pending_victim(struct oauth *o)
{
	struct oauth_pending *best = NULL;
	size_t best_n = 0;

	for (size_t i = 0; i < OAUTH_MAX_PENDING; i++) {
		struct oauth_pending *p = &o->pending[i], *oldest = p;
		bool seen = false;
		size_t n = 0;

		for (size_t j = 0; j < i && !seen; j++)
			seen = o->pending[j].used &&
			       strcmp(o->pending[j].source, p->source) == 0;
		if (!p->used || seen)
			continue;
		for (size_t j = i; j < OAUTH_MAX_PENDING; j++) {
			struct oauth_pending *q = &o->pending[j];

			if (!q->used || strcmp(q->source, p->source) != 0)
				continue;
			n++;
			if (q->created_ms < oldest->created_ms)
				oldest = q;
		}
		if (n > best_n ||
		    (n == best_n && oldest->created_ms < best->created_ms)) {
			best = oldest;
			best_n = n;
		}
	}
	return best;
}

/*
 * A free slot for a request from source, with expired entries freed; NULL
 * when source already has OAUTH_PENDING_PER_SOURCE entries waiting, with
 * *waiting set to that count and *retry_s to the time until its oldest
 * expires. Lock held.
 */
static struct oauth_pending *pending_new(struct oauth *o, const char *source,
                                         size_t *waiting, unsigned *retry_s)
{
	long long now = mono_ms();
	struct oauth_pending *free_slot = NULL, *mine_oldest = NULL;
	size_t mine = 0;

	for (size_t i = 0; i < OAUTH_MAX_PENDING; i++) {
		struct oauth_pending *p = &o->pending[i];

		if (p->used && now - p->created_ms > OAUTH_PENDING_TTL_MS)
			oauth_pending_clear(p);
		if (!p->used) {
			if (!free_slot)
				free_slot = p;
		} else if (strcmp(p->source, source) == 0) {
			mine++;
			if (!mine_oldest ||
			    p->created_ms < mine_oldest->created_ms)
				mine_oldest = p;
		}
	}
	if (mine >= OAUTH_PENDING_PER_SOURCE) {
		long long left =
		    mine_oldest->created_ms + OAUTH_PENDING_TTL_MS - now;

		*waiting = mine;
		*retry_s = (unsigned)(left > 0 ? left / 1000 + 1 : 1);
		return NULL;
	}
	if (!free_slot) {
		free_slot = pending_victim(o);
		oauth_pending_clear(free_slot);
	}
	return free_slot;
}

static struct oauth_pending *pending_find(struct oauth *o, const char *id)
{
	if (!id || strlen(id) != 32)
		return NULL;
	for (size_t i = 0; i < OAUTH_MAX_PENDING; i++) {
		struct oauth_pending *p = &o->pending[i];

		if (!p->used || strcmp(p->id, id) != 0)
			continue;
		if (mono_ms() - p->created_ms > OAUTH_PENDING_TTL_MS) {
			oauth_pending_clear(p);
			return NULL;
		}
		return p;
	}
	return NULL;
}

/* The value of cookie name in a Cookie header, into out (hex only). */
static bool cookie_value(const char *header, const char *name, char *out,
                         size_t outlen)
{
	size_t nl = strlen(name);
	const char *p = header;

	out[0] = '\0';
	while (p && *p) {
		size_t len;

		p += strspn(p, " ;");
		len = strcspn(p, ";");
		if (len > nl && strncmp(p, name, nl) == 0 && p[nl] == '=') {
			const char *v = p + nl + 1;
			size_t vl = len - nl - 1;

			while (vl && v[vl - 1] == ' ')
				vl--;
			if (vl == 0 || vl >= outlen)
				return false;
			for (size_t i = 0; i < vl; i++) {
				if (hex_digit((unsigned char)v[i]) < 0)
					return false;
			}
			memcpy(out, v, vl);
			out[vl] = '\0';
			return true;
		}
		p += len;
	}
	return false;
}

/* Equal secrets of equal, fixed length, compared in constant time. */
static bool secret_eq(const char *a, const char *b, size_t len)
{
	return a && b && strlen(a) == len && strlen(b) == len &&
	       CRYPTO_memcmp(a, b, len) == 0;
}

/* An RFC 6749 error redirect with state and iss. */
static void redirect_error(struct oauth *o, struct oauth_resp *out,
                           const char *redirect, const char *state,
                           const char *error, const char *desc)
{
	const char *kv[9];
	size_t n = 0;

	kv[n++] = "error";
	kv[n++] = error;
	kv[n++] = "error_description";
	kv[n++] = desc;
	if (state) {
		kv[n++] = "state";
		kv[n++] = state;
	}
	kv[n++] = "iss";
	kv[n++] = o->cfg->oauth_issuer;
	kv[n] = NULL;
	out->status = 303;
	out->cache_control = "no-store";
	out->location = oauth_uri_with_params(redirect, kv);
	if (!out->location)
		oauth_error_page(out, 500, "Server error", "Out of memory.",
		                 NULL);
}

/* ---- clients for an authorization request -------------------------------- */

/*
 * Fetches, checks and caches a metadata document. On failure the error is
 * logged for the operator and err says it for the person.
 */
static int fetch_document(struct oauth *o, const char *url,
                          struct oauth_db_client *c, char *err, size_t errlen)
{
	struct oauth_client_meta m;
	struct store_tx *tx = NULL;
	char why[512];
	const char *code;
	char *body = NULL;
	size_t len = 0;
	cJSON *j;
	int r;

	r = oauth_cimd_fetch(o->cfg, url, &body, &len, why, sizeof(why));
	if (r < 0) {
		log_warnx("oauth: cannot fetch the client metadata document "
		          "%s: %s",
		          url, why);
		return errmsg_fail(r, err, errlen,
		                   "This server could not fetch the "
		                   "application's metadata document %s: %s",
		                   url, why);
	}
	r = oauth_client_parse(body, len, url, &o->policy, &m, &code, why,
	                       sizeof(why));
	free(body);
	if (r < 0) {
		log_warnx("oauth: the client metadata document %s is not "
		          "usable: %s",
		          url, why);
		return errmsg_fail(-EPROTO, err, errlen,
		                   "The application's metadata document %s is "
		                   "not usable: %s",
		                   url, why);
	}
	j = cJSON_CreateObject();
	oauth_db_client_finish(c);
	memset(c, 0, sizeof(*c));
	snprintf(c->client_id, sizeof(c->client_id), "%s", url);
	c->auth_method = "none";
	c->is_document = true;
	c->created_at = c->refreshed_at = oauth_now();
	if (!j || !oauth_client_meta_to_json(&m, j) ||
	    !(c->metadata = cJSON_PrintUnformatted(j))) {
		cJSON_Delete(j);
		oauth_client_meta_finish(&m);
		return errmsg_fail(-ENOMEM, err, errlen, "Out of memory.");
	}
	cJSON_Delete(j);
	oauth_client_meta_finish(&m);
	r = store_begin(o->st, true, &tx);
	if (r == 0)
		r = oauth_db_client_upsert(tx, c);
	if (r == 0)
		r = store_commit(tx);
	else if (tx)
		store_rollback(tx);
	if (r < 0)
		return errmsg_fail(r, err, errlen,
		                   "The server's store is unavailable.");
	log_info("oauth: fetched the client metadata document %s", url);
	return 0;
}

/*
 * The client of an authorization request and its metadata. -ENOENT for an
 * unknown client; other errors with a sentence in err.
 */
static int load_client(struct oauth *o, const char *client_id,
                       struct oauth_db_client *c, struct oauth_client_meta *m,
                       char *err, size_t errlen)
{
	struct store_tx *tx;
	const char *code;
	char why[300];
	bool document = oauth_cimd_is_url(client_id);
	int r;

	memset(m, 0, sizeof(*m));
	if (document && !o->cfg->oauth_cimd)
		return errmsg_fail(-EPERM, err, errlen,
		                   "The application identifies itself with a "
		                   "metadata document (%s), which this server "
		                   "does not accept (OAUTH_CIMD is off).",
		                   client_id);
	r = store_begin(o->st, false, &tx);
	if (r == 0) {
		r = oauth_db_client_get(tx, client_id, c);
		store_rollback(tx);
	}
	if (r < 0 && r != -ENOENT)
		return errmsg_fail(r, err, errlen,
		                   "The server's store is unavailable.");
	if (document && (r == -ENOENT || !c->is_document ||
	                 oauth_now() - c->refreshed_at > CIMD_CACHE_S)) {
		bool stale_ok = r == 0 && c->is_document &&
		                oauth_now() - c->refreshed_at < CIMD_STALE_OK_S;
		int f = fetch_document(o, client_id, c, err, errlen);

		if (f < 0 && !stale_ok)
			return f;
		if (f < 0)
			log_warnx("oauth: using the cached copy of %s",
			          client_id);
		r = 0;
	}
	if (r < 0)
		return r;
	if (oauth_client_parse(c->metadata, strlen(c->metadata), NULL, NULL, m,
	                       &code, why, sizeof(why)) < 0)
		return errmsg_fail(
		    -EIO, err, errlen,
		    "The stored registration of this application "
		    "is damaged (%s); it should register again.",
		    why);
	return 0;
}

/* ---- GET /authorize ---------------------------------------------------------
 */

/* RFC 7636: 43 to 128 characters of [A-Za-z0-9-._~]. */
static bool pkce_text_ok(const char *s)
{
	size_t n = s ? strlen(s) : 0;

	if (n < 43 || n > 128)
		return false;
	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)s[i];

		if (!isalnum(ch) && !strchr("-._~", ch))
			return false;
	}
	return true;
}

/* The scope granted: the known ones asked for, else the default. */
static const char *grant_scope(const char *asked)
{
	(void)asked; /* one scope: unknown scopes are ignored, not refused */
	return OAUTH_SCOPE;
}

static void render_consent(struct oauth *o, const struct oauth_pending *p,
                           const char *error, unsigned status,
                           struct oauth_resp *out)
{
	struct oauth_uri u;
	struct oauth_page_consent pc = {0};
	char host[300];

	if (oauth_uri_parse(p->redirect_uri, &u, NULL, 0) < 0)
		u.host[0] = '\0';
	if (oauth_uri_is_loopback(&u) && u.port)
		snprintf(host, sizeof(host), "%s port %u", u.host, u.port);
	else
		snprintf(host, sizeof(host), "%s", u.host);
	pc.server = o->cfg->oauth_issuer;
	pc.client_name = p->client_name;
	pc.client_id = p->client_id;
	pc.client_is_document = p->is_document;
	pc.redirect_uri = p->redirect_uri;
	pc.redirect_host = host;
	pc.redirect_loopback = oauth_uri_is_loopback(&u);
	pc.action = OAUTH_PATH_AUTHORIZE;
	pc.request_id = p->id;
	pc.csrf = p->csrf;
	pc.error = error;
	pc.access_ttl_s = o->cfg->oauth_access_ttl_s;
	pc.refresh_ttl_days = o->cfg->oauth_refresh_ttl_days;
	out->status = status;
	out->content_type = "text/html; charset=utf-8";
	out->cache_control = "no-store";
	out->page = true;
	out->body = oauth_page_consent(&pc);
	out->set_cookie = buf_asprintf(
	    "%s=%s; Path=/; Max-Age=%d; HttpOnly; SameSite=Strict%s",
	    o->cookie_name, p->browser, OAUTH_PENDING_TTL_MS / 1000,
	    strncmp(o->cfg->oauth_issuer, "https://", 8) == 0 ? "; Secure"
	                                                      : "");
	if (!out->body || !out->set_cookie) {
		oauth_resp_finish(out);
		oauth_error_page(out, 500, "Server error", "Out of memory.",
		                 NULL);
	}
}

/* Copies a string into an owned field; false when out of memory. */
static bool dup_into(char **dst, const char *s)
{
	*dst = s ? strdup(s) : NULL;
	return !s || *dst;
}

/*
 * Checks the client and the address to send the browser back to, before
 * anything may be redirected: 0 with the client in c and m and the redirect
 * URI in *redirect (the registered one when the request names none and
 * there is only one), or -1 with an error page in out.
 */
static int authorize_client(struct oauth *o, const char *client_id,
                            const char **redirect, struct oauth_db_client *c,
                            struct oauth_client_meta *m, struct oauth_resp *out)
{
	struct oauth_uri u;
	char why[700];
	int r;

	if (!client_id || !oauth_vschar(client_id, OAUTH_URI_MAX)) {
		oauth_error_page(out, 400, "Malformed authorization request",
		                 "The request does not name its application "
		                 "(client_id is missing or malformed).",
		                 START_AGAIN);
		return -1;
	}
	r = load_client(o, client_id, c, m, why, sizeof(why));
	if (r == -ENOENT) {
		oauth_error_page(
		    out, 400, "Unknown application",
		    "This server does not know the application "
		    "that sent you here (its registration may have "
		    "expired).",
		    "Remove the connector in the application and "
		    "add it again, so it registers anew.");
		return -1;
	}
	if (r < 0) {
		oauth_error_page(out, r == -EIO ? 503 : 400,
		                 "Cannot connect this application", why,
		                 "Ask the operator of this server, or start "
		                 "again later.");
		return -1;
	}
	if (!*redirect && m->n_redirect == 1)
		*redirect = m->redirect_uris[0];
	if (!*redirect) {
		oauth_error_page(out, 400, "Malformed authorization request",
		                 "The request has no redirect_uri and the "
		                 "application registered several.",
		                 START_AGAIN);
		return -1;
	}
	if (!oauth_client_redirect_ok(m, *redirect, NULL) ||
	    oauth_uri_parse(*redirect, &u, why, sizeof(why)) < 0 ||
	    !oauth_uri_allowed(&u, &o->policy, why, sizeof(why))) {
		if (!oauth_client_redirect_ok(m, *redirect, NULL))
			snprintf(why, sizeof(why),
			         "The address this request would send you back "
			         "to is not one the application registered.");
		log_info("oauth: refused an authorization request of client "
		         "%.64s: %s",
		         client_id, why);
		oauth_error_page(out, 400, "Refused: unknown return address",
		                 why,
		                 "Nothing was sent anywhere. If you did not "
		                 "expect this, close this page.");
		return -1;
	}
	return 0;
}

/*
 * Checks the rest of the request once the redirect URI is known good: 0,
 * or -1 with an RFC 6749 error redirect to the client in out.
 */
static int authorize_params(struct oauth *o, const struct oauth_form *q,
                            const char *redirect, struct oauth_resp *out)
{
	const char *state = oauth_form_get(q, "state");
	const char *rtype = oauth_form_get(q, "response_type");
	const char *challenge = oauth_form_get(q, "code_challenge");
	const char *method = oauth_form_get(q, "code_challenge_method");
	const char *resource = oauth_form_get(q, "resource");

	if (state && !oauth_vschar(state, STATE_MAX)) {
		redirect_error(o, out, redirect, NULL, "invalid_request",
		               "state must be at most 1024 printable ASCII "
		               "characters");
		return -1;
	}
	if (!rtype || strcmp(rtype, "code") != 0) {
		redirect_error(o, out, redirect, state,
		               "unsupported_response_type",
		               "response_type must be 'code'");
		return -1;
	}
	if (!challenge || !method || strcmp(method, "S256") != 0 ||
	    !pkce_text_ok(challenge)) {
		redirect_error(o, out, redirect, state, "invalid_request",
		               "PKCE is required: send code_challenge (43-128 "
		               "characters) with code_challenge_method=S256");
		return -1;
	}
	if (resource && !oauth_audience_ok(o, resource)) {
		redirect_error(o, out, redirect, state, "invalid_target",
		               "resource names another server; this one is "
		               "the MCP endpoint of this server");
		return -1;
	}
	return 0;
}

/* Records a checked request as pending and shows its consent page. */
static void authorize_pending(struct oauth *o, const struct oauth_req *rq,
                              const struct oauth_form *q, const char *redirect,
                              const struct oauth_db_client *c,
                              const struct oauth_client_meta *m,
                              struct oauth_resp *out)
{
	const char *resource = oauth_form_get(q, "resource");
	struct oauth_pending *p;
	char cookie[33], source[OAUTH_SOURCE_MAX];
	size_t waiting = 0;
	unsigned wait = 0;
	int r = 0;

	oauth_source_key(rq, source);
	pthread_mutex_lock(&o->mu);
	p = pending_new(o, source, &waiting, &wait);
	if (!p) {
		/* A flood is refused a thousand times: warn every 10 s. */
		long long now = mono_ms();
		bool say = now - o->pending_warned_ms >= 10000;

		if (say)
			o->pending_warned_ms = now;
		pthread_mutex_unlock(&o->mu);
		if (say)
			log_warnx("oauth: refused an authorization request "
			          "from %s: %zu consent pages from it are "
			          "waiting (if every client shares this "
			          "address, a proxy in front is missing from "
			          "MCP_TRUSTED_PROXIES)",
			          *source ? source : "an unknown address",
			          waiting);
		else
			log_debug("oauth: refused an authorization request "
			          "from %s: %zu consent pages waiting",
			          *source ? source : "an unknown address",
			          waiting);
		oauth_error_page(out, 429, "Too many open approval requests",
		                 "Too many approval pages from your network "
		                 "are waiting for an answer.",
		                 "Answer or close the ones you have open, or "
		                 "wait a few minutes, then start again.");
		out->retry_after = wait;
		return;
	}
	p->used = true;
	memcpy(p->source, source, sizeof(p->source));
	p->created_ms = mono_ms();
	p->redirect_given = oauth_form_get(q, "redirect_uri") != NULL;
	p->is_document = c->is_document;
	if (!cookie_value(rq->cookie, o->cookie_name, cookie, sizeof(cookie)) ||
	    strlen(cookie) != 32)
		r = hex_random(cookie, 16);
	memcpy(p->browser, cookie, sizeof(cookie));
	if (r < 0 || hex_random(p->id, 16) < 0 || hex_random(p->csrf, 32) < 0 ||
	    !dup_into(&p->client_id, oauth_form_get(q, "client_id")) ||
	    !dup_into(&p->client_name, m->client_name) ||
	    !dup_into(&p->redirect_uri, redirect) ||
	    !dup_into(&p->state, oauth_form_get(q, "state")) ||
	    !dup_into(&p->challenge, oauth_form_get(q, "code_challenge")) ||
	    !dup_into(&p->resource, resource ? resource : o->resource) ||
	    !dup_into(&p->scope, grant_scope(oauth_form_get(q, "scope")))) {
		oauth_pending_clear(p);
		pthread_mutex_unlock(&o->mu);
		oauth_error_page(out, 500, "Server error",
		                 "Out of memory or randomness.", START_AGAIN);
		return;
	}
	render_consent(o, p, NULL, 200, out);
	pthread_mutex_unlock(&o->mu);
}

void oauth_authorize(struct oauth *o, const struct oauth_req *rq,
                     struct oauth_resp *out)
{
	static const struct oauth_form none;
	const struct oauth_form *q = rq->query ? rq->query : &none;
	const char *redirect = oauth_form_get(q, "redirect_uri");
	struct oauth_db_client c;
	struct oauth_client_meta m;

	memset(&c, 0, sizeof(c));
	memset(&m, 0, sizeof(m));
	if (rq->query_error) {
		oauth_error_page(out, 400, "Malformed authorization request",
		                 rq->query_error, START_AGAIN);
		return;
	}
	/* Errors are pages until the client and its redirect are checked;
	 * from then on the client hears about them through its redirect. */
	if (authorize_client(o, oauth_form_get(q, "client_id"), &redirect, &c,
	                     &m, out) == 0 &&
	    authorize_params(o, q, redirect, out) == 0)
		authorize_pending(o, rq, q, redirect, &c, &m, out);
	oauth_db_client_finish(&c);
	oauth_client_meta_finish(&m);
}

/* ---- POST /authorize (the consent form) -----------------------------------
 */

/* Creates the grant and its code; 0 with the code in code. */
static int approve(struct oauth *o, const struct oauth_pending *p,
                   const struct oauth_tenant *t, char *code, size_t codelen)
{
	struct oauth_db_grant g;
	unsigned char hash[OAUTH_DB_HASH_LEN];
	struct store_tx *tx = NULL;
	long long now = oauth_now();
	int r;

	memset(&g, 0, sizeof(g));
	if (hex_random(g.grant_id, OAUTH_DB_GRANT_ID_LEN / 2) < 0 ||
	    oauth_new_secret("", code, codelen) < 0)
		return -EIO;
	snprintf(g.client_id, sizeof(g.client_id), "%s", p->client_id);
	snprintf(g.tenant, sizeof(g.tenant), "%s", t->name);
	memcpy(g.binding, t->binding, sizeof(g.binding));
	snprintf(g.scope, sizeof(g.scope), "%s", p->scope);
	snprintf(g.resource, sizeof(g.resource), "%s", p->resource);
	g.created_at = g.used_at = now;
	oauth_hash(code, strlen(code), hash);
	r = store_begin(o->st, true, &tx);
	if (r == 0)
		r = oauth_db_grant_insert(tx, &g);
	if (r == 0)
		r = oauth_db_code_insert(tx, hash, g.grant_id, p->redirect_uri,
		                         p->redirect_given, p->challenge,
		                         now + o->cfg->oauth_code_ttl_s);
	if (r == 0)
		r = store_commit(tx);
	else if (tx)
		store_rollback(tx);
	if (r == 0)
		log_info("oauth: tenant %s approved client %.64s (grant %.8s)",
		         t->name, p->client_id, g.grant_id);
	return r;
}

/*
 * Locks o->mu and finds the pending request the form answers, checking its
 * CSRF token and browser cookie. Returns it with the lock held, or NULL
 * with the lock released and an error page in out.
 */
static struct oauth_pending *consent_find(struct oauth *o,
                                          const struct oauth_req *rq,
                                          const struct oauth_form *f,
                                          struct oauth_resp *out)
{
	struct oauth_pending *p;
	char cookie[33];

	pthread_mutex_lock(&o->mu);
	p = pending_find(o, oauth_form_get(f, "request"));
	if (!p) {
		pthread_mutex_unlock(&o->mu);
		oauth_error_page(
		    out, 400, "This page has expired",
		    "The approval request is no longer waiting (it "
		    "was answered, or it is older than 15 minutes).",
		    START_AGAIN);
		return NULL;
	}
	if (!secret_eq(oauth_form_get(f, "csrf"), p->csrf, 64) ||
	    !cookie_value(rq->cookie, o->cookie_name, cookie, sizeof(cookie)) ||
	    !secret_eq(cookie, p->browser, 32)) {
		pthread_mutex_unlock(&o->mu);
		log_info("oauth: refused a consent form without its security "
		         "token or cookie");
		oauth_error_page(out, 403,
		                 "Refused: the form could not be "
		                 "verified",
		                 "The form's security token or cookie is "
		                 "missing or wrong, so this may not be your "
		                 "request.",
		                 START_AGAIN);
		return NULL;
	}
	return p;
}

/*
 * A wrong API token on the consent page of p: charged against the limits,
 * and the page is shown again with an error. Returns true instead when p
 * has seen OAUTH_MAX_ATTEMPTS of them: it is then cleared, and no page is
 * set. Called with o->mu held.
 */
static bool consent_wrong_token(struct oauth *o, struct oauth_pending *p,
                                const char *addr, struct oauth_resp *out)
{
	(void)ratelimit_take(o->consent_addr, addr, NULL);
	log_info("oauth: a wrong API token was entered on the consent "
	         "page of client %.64s",
	         p->client_id);
	if (++p->attempts >= OAUTH_MAX_ATTEMPTS) {
		oauth_pending_clear(p);
		return true;
	}
	render_consent(o, p,
	               "That is not an API token of this server. "
	               "Check it and try again.",
	               403, out);
	return false;
}

/* Approves taken for tenant t and sends the browser back with the code. */
static void consent_approve(struct oauth *o, const struct oauth_pending *taken,
                            const struct oauth_tenant *t,
                            struct oauth_resp *out)
{
	char code[OAUTH_SECRET_HEX + 1];

	if (approve(o, taken, t, code, sizeof(code)) < 0) {
		oauth_error_page(out, 503, "Server error",
		                 "The approval could not be saved.",
		                 "Start again in a minute.");
	} else {
		const char *kv[] = {"code",
		                    code,
		                    "iss",
		                    o->cfg->oauth_issuer,
		                    taken->state ? "state" : NULL,
		                    taken->state,
		                    NULL};

		/* 303: the client's callback takes GET only. */
		out->status = 303;
		out->cache_control = "no-store";
		out->location = oauth_uri_with_params(taken->redirect_uri, kv);
		if (!out->location)
			oauth_error_page(out, 500, "Server error",
			                 "Out of memory.", NULL);
	}
	OPENSSL_cleanse(code, sizeof(code));
}

void oauth_consent(struct oauth *o, const struct oauth_req *rq,
                   struct oauth_resp *out)
{
	struct oauth_form f;
	struct oauth_pending *p, taken;
	const struct oauth_tenant *t;
	const char *action, *token;
	char why[300], addr[OAUTH_SOURCE_MAX];
	unsigned wait = 0;

	oauth_form_init(&f);
	memset(&taken, 0, sizeof(taken));
	oauth_source_key(rq, addr);
	if (rq->origin && strcmp(rq->origin, o->cfg->oauth_issuer) != 0) {
		log_info("oauth: refused a consent form posted from origin "
		         "%.100s",
		         rq->origin);
		oauth_error_page(out, 403, "Refused: cross-site request",
		                 "This form was sent from another site.",
		                 START_AGAIN);
		return;
	}
	if (oauth_form_parse(&f, rq->body ? rq->body : "", rq->body_len, why,
	                     sizeof(why)) < 0) {
		oauth_error_page(out, 400, "Malformed form", why, START_AGAIN);
		goto out;
	}
	action = oauth_form_get(&f, "action");
	token = oauth_form_get(&f, "token");
	p = consent_find(o, rq, &f, out);
	if (!p)
		goto out;
	if (action && strcmp(action, "deny") == 0) {
		taken = *p;
		memset(p, 0, sizeof(*p));
		pthread_mutex_unlock(&o->mu);
		log_info("oauth: a person denied client %.64s",
		         taken.client_id);
		redirect_error(o, out, taken.redirect_uri, taken.state,
		               "access_denied", "the request was denied");
		goto out;
	}
	if (!action || strcmp(action, "approve") != 0) {
		pthread_mutex_unlock(&o->mu);
		oauth_error_page(out, 400, "Malformed form",
		                 "The form says neither approve nor deny.",
		                 START_AGAIN);
		goto out;
	}
	/*
	 * Only the source's own limit comes before the token check: a limit
	 * shared with others (all sources) would let guessers elsewhere turn
	 * a person's right token into a 429.
	 */
	if (!ratelimit_peek(o->consent_addr, addr, &wait)) {
		pthread_mutex_unlock(&o->mu);
		log_warnx("oauth: consent form rate limited (%s)",
		          *addr ? addr : "unknown address");
		oauth_error_page(out, 429, "Too many attempts",
		                 "Too many wrong API tokens were entered here "
		                 "recently.",
		                 "Wait a few minutes, then start again.");
		out->retry_after = wait;
		goto out;
	}
	if (!token) {
		/* Nothing was guessed: no charge against the limits. */
		render_consent(o, p, "Enter the API token to approve.", 400,
		               out);
		pthread_mutex_unlock(&o->mu);
		goto out;
	}
	t = oauth_tenant_of_token(o, token);
	if (!t) {
		bool ended = consent_wrong_token(o, p, addr, out);

		pthread_mutex_unlock(&o->mu);
		if (ended)
			oauth_error_page(out, 403, "Too many wrong tokens",
			                 "This approval request ended after "
			                 "several wrong API tokens.",
			                 START_AGAIN);
		goto out;
	}
	taken = *p;
	memset(p, 0, sizeof(*p));
	pthread_mutex_unlock(&o->mu);
	consent_approve(o, &taken, t, out);
out:
	oauth_pending_clear(&taken);
	oauth_form_finish(&f);
}
