/* SPDX-License-Identifier: MIT */
/*
 * config_derive: the settings that depend on others, derived after the
 * table was parsed (config.c): the log and authentication, tokens and
 * tenants, URLs and allow-lists, the engine, limits, paths, the secret,
 * the cluster and OAuth settings. Messages as in config.c: the variable,
 * what is wrong, and a good example.
 */
#include "config/config_internal.h"

#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <openssl/rand.h>

#include "config/egress_policy.h"
#include "store/store.h"
#include "util/buf.h"
#include "util/errmsg.h"
#include "util/log.h"
#include "util/netaddr.h"
#include "util/num.h"

static bool tenant_name_ok(const char *s, size_t n)
{
	if (n == 0 || n > 64)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];

		if (!(isalnum((unsigned char)c) || c == '_' || c == '-' ||
		      c == '.'))
			return false;
	}
	return true;
}

static int add_token(struct config *cfg, const char *tenant, size_t tlen,
                     const char *tok, size_t toklen, const char *var, char *err,
                     size_t errlen)
{
	struct config_token *nt, *t;
	unsigned int mdlen = 0;

	if (!tenant_name_ok(tenant, tlen))
		return errmsg_fail(
		    -EINVAL, err, errlen,
		    "%s: tenant name '%.*s' must be 1-64 letters, "
		    "digits, '.', '_' or '-', e.g. %s=alice:<token>",
		    var, (int)(tlen > 64 ? 64 : tlen), tenant, var);
	if (toklen < 16)
		return errmsg_fail(
		    -EINVAL, err, errlen,
		    "%s: the token of tenant '%.*s' has %zu characters; "
		    "use at least 16, e.g. the output of "
		    "'openssl rand -hex 32'",
		    var, (int)tlen, tenant, toklen);
	for (size_t i = 0; i < toklen; i++) {
		unsigned char c = (unsigned char)tok[i];

		if (c <= 0x20 || c >= 0x7f || c == ',')
			return errmsg_fail(
			    -EINVAL, err, errlen,
			    "%s: the token of tenant '%.*s' contains a "
			    "space, comma or non-printable character; "
			    "use printable ASCII, e.g. the output of "
			    "'openssl rand -hex 32'",
			    var, (int)tlen, tenant);
	}
	nt = realloc(cfg->tokens, (cfg->n_tokens + 1) * sizeof(*nt));
	if (!nt)
		return -ENOMEM;
	cfg->tokens = nt;
	t = &nt[cfg->n_tokens];
	memset(t, 0, sizeof(*t));
	t->tenant = strndup(tenant, tlen);
	if (!t->tenant)
		return -ENOMEM;
	EVP_Digest(tok, toklen, t->digest, &mdlen, EVP_sha256(), NULL);
	log_fingerprint(tok, toklen, t->fingerprint);
	cfg->n_tokens++;
	for (size_t i = 0; i + 1 < cfg->n_tokens; i++) {
		if (memcmp(cfg->tokens[i].digest, t->digest,
		           sizeof(t->digest)) == 0)
			return errmsg_fail(
			    -EINVAL, err, errlen,
			    "%s: the same token is configured twice "
			    "(tenants '%s' and '%s'); give each tenant "
			    "its own token",
			    var, cfg->tokens[i].tenant, t->tenant);
	}
	return 0;
}

static int parse_tokens(struct config *cfg, char *err, size_t errlen)
{
	const char *one = config_raw(cfg, "MCP_API_TOKEN");
	const char *many = config_raw(cfg, "MCP_API_TOKENS");
	int r;

	if (*one) {
		r = add_token(cfg, "default", 7, one, strlen(one),
		              "MCP_API_TOKEN", err, errlen);
		if (r < 0)
			return r;
	}
	for (const char *p = many; *p;) {
		const char *e = strchr(p, ',');
		size_t len = e ? (size_t)(e - p) : strlen(p);
		const char *colon = memchr(p, ':', len);

		while (len && isspace((unsigned char)*p)) {
			p++;
			len--;
			colon = memchr(p, ':', len);
		}
		while (len && isspace((unsigned char)p[len - 1]))
			len--;
		if (len) {
			if (!colon)
				return errmsg_fail(
				    -EINVAL, err, errlen,
				    "MCP_API_TOKENS: entry %zu has no "
				    "'tenant:' prefix; write entries as "
				    "tenant:token separated by commas, "
				    "e.g. MCP_API_TOKENS=alice:<token>,"
				    "bob:<token>",
				    (size_t)(cfg->n_tokens + 1));
			r = add_token(cfg, p, (size_t)(colon - p), colon + 1,
			              len - (size_t)(colon - p) - 1,
			              "MCP_API_TOKENS", err, errlen);
			if (r < 0)
				return r;
		}
		if (!e)
			break;
		p = e + 1;
	}
	return 0;
}

static int hex_value(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c = tolower(c);
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

static int parse_secret(struct config *cfg, char *err, size_t errlen)
{
	const char *s = config_raw(cfg, "FILE_SECRET");
	size_t n = strlen(s);

	if (n == 0) {
		if (!cfg->auth_none)
			return errmsg_fail(
			    -EINVAL, err, errlen,
			    "FILE_SECRET is not set; it keys workspace "
			    "names and file URLs. Set 32 or more "
			    "random characters, e.g. "
			    "FILE_SECRET=$(openssl rand -hex 32)");
		/* Local testing only: links die with the process. */
		if (RAND_bytes(cfg->file_secret, 32) != 1)
			return errmsg_fail(
			    -EINVAL, err, errlen,
			    "FILE_SECRET: no randomness available");
		cfg->file_secret_len = 32;
		cfg->file_secret_ephemeral = true;
		return 0;
	}
	if (n < 32)
		return errmsg_fail(
		    -EINVAL, err, errlen,
		    "FILE_SECRET has %zu characters; use at least 32, "
		    "e.g. FILE_SECRET=$(openssl rand -hex 32)",
		    n);
	if (n > CONFIG_SECRET_MAX * 2)
		return errmsg_fail(
		    -EINVAL, err, errlen,
		    "FILE_SECRET has %zu characters; use at most %d, "
		    "e.g. FILE_SECRET=$(openssl rand -hex 32)",
		    n, CONFIG_SECRET_MAX * 2);
	/* A hex secret is used as the bytes it spells. */
	bool hex = n % 2 == 0;

	for (size_t i = 0; hex && i < n; i++)
		hex = hex_value((unsigned char)s[i]) >= 0;
	if (hex && n / 2 <= CONFIG_SECRET_MAX) {
		for (size_t i = 0; i < n / 2; i++)
			cfg->file_secret[i] =
			    (unsigned char)(hex_value((unsigned char)s[2 * i])
			                        << 4 |
			                    hex_value(
			                        (unsigned char)s[2 * i + 1]));
		cfg->file_secret_len = n / 2;
	} else if (n <= CONFIG_SECRET_MAX) {
		memcpy(cfg->file_secret, s, n);
		cfg->file_secret_len = n;
	} else {
		return errmsg_fail(
		    -EINVAL, err, errlen,
		    "FILE_SECRET is longer than %d characters and not "
		    "hex; use e.g. FILE_SECRET=$(openssl rand -hex 32)",
		    CONFIG_SECRET_MAX);
	}
	return 0;
}

/* A host name for an allow-list: letters, digits, '.', '-', or [v6]. */
static bool hostname_ok(const char *h)
{
	size_t n = strlen(h);

	if (n == 0 || n > 253)
		return false;
	if (h[0] == '[')
		return n > 2 && h[n - 1] == ']' &&
		       strspn(h + 1, "0123456789abcdefABCDEF:.") == n - 2;
	return strspn(h, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
	                 "0123456789.-") == n;
}

/* The store's path. */
static int derive_store(struct config *cfg, char *err, size_t errlen)
{
	const char *v = config_raw(cfg, "STORE_PATH");

	if (*v) {
		if (config_set_str(&cfg->store_path, v) < 0)
			return -ENOMEM;
	} else {
		cfg->store_path =
		    buf_asprintf("%s/state.db", cfg->sandbox_root);
		if (!cfg->store_path)
			return -ENOMEM;
	}
	if (cfg->store_path[0] != '/' || strlen(cfg->store_path) > 1000 ||
	    cfg->store_path[strlen(cfg->store_path) - 1] == '/')
		return errmsg_fail(
		    -EINVAL, err, errlen,
		    "STORE_PATH='%s' must be the absolute path of a file, "
		    "e.g. STORE_PATH=/var/lib/mcp-sandboxd/state.db",
		    cfg->store_path);
	v = config_raw(cfg, "STORE_URL");
	if (config_set_str(&cfg->store_url, v) < 0)
		return -ENOMEM;
	/* Never echo the value: it may hold a password. */
	if (*v && !store_is_url(v))
		return errmsg_fail(
		    -EINVAL, err, errlen,
		    "STORE_URL must be empty (SQLite at STORE_PATH) or a "
		    "PostgreSQL URL starting with postgresql:// or "
		    "postgres://, "
		    "e.g. STORE_URL=postgresql://mcpsd@db.internal:5432/mcpsd");
	if (strlen(v) > 1000)
		return errmsg_fail(-EINVAL, err, errlen,
		                   "STORE_URL is longer than 1000 bytes");
	return 0;
}

/*
 * A replica (MCP_REPLICA_NAME) shares what outlives a request with the
 * others: runs and their conversation lock through a backend that can
 * (backend_configure checks that), durable state through PostgreSQL.
 * Checked once the store is known.
 */
static int derive_replica(struct config *cfg, char *err, size_t errlen)
{
	if (!cfg->replica_name[0])
		return 0;
	if (!cfg->store_url[0])
		return errmsg_fail(
		    -EINVAL, err, errlen,
		    "MCP_REPLICA_NAME=%s needs a store shared by the "
		    "replicas: set STORE_URL to a PostgreSQL database, "
		    "e.g. STORE_URL=postgresql://mcpsd@db.internal/mcpsd "
		    "(docs/deployment.md)",
		    cfg->replica_name);
	return 0;
}

/* The OAuth settings, once the URLs are known. */
static int derive_oauth(struct config *cfg, char *err, size_t errlen)
{
	const char *v;
	const char *u = cfg->public_base_url;
	bool https = strncmp(u, "https://", 8) == 0;
	const char *hp = u + (https ? 8 : 7);
	char host[300];
	bool want = false;
	size_t n = 0;

	if (config_split_list(config_raw(cfg, "OAUTH_REDIRECT_HOSTS"),
	                      &cfg->oauth_redirect_hosts) < 0)
		return -ENOMEM;
	for (char **p = cfg->oauth_redirect_hosts; *p;) {
		if (strcasecmp(*p, "loopback") == 0) {
			cfg->oauth_redirect_loopback = true;
			free(*p);
			memmove(p, p + 1,
			        sizeof(*p) * (config_strlen_list(p + 1) + 1));
			continue;
		}
		if (!hostname_ok(*p))
			return errmsg_fail(
			    -EINVAL, err, errlen,
			    "OAUTH_REDIRECT_HOSTS: '%s' is not a host name "
			    "(no scheme, port, path or wildcard), e.g. "
			    "OAUTH_REDIRECT_HOSTS=claude.ai,claude.com,"
			    "loopback",
			    *p);
		p++;
	}
	if (config_split_list(config_raw(cfg, "OAUTH_CIMD_HOSTS"),
	                      &cfg->oauth_cimd_hosts) < 0)
		return -ENOMEM;
	for (char **p = cfg->oauth_cimd_hosts; *p; p++) {
		if (strcmp(*p, "*") != 0 && !hostname_ok(*p))
			return errmsg_fail(
			    -EINVAL, err, errlen,
			    "OAUTH_CIMD_HOSTS: '%s' is not a host name or '*', "
			    "e.g. OAUTH_CIMD_HOSTS=claude.ai,claude.com",
			    *p);
	}
	if (cfg->oauth_cimd_ca_file[0] &&
	    access(cfg->oauth_cimd_ca_file, R_OK) < 0)
		return errmsg_fail(
		    -EINVAL, err, errlen,
		    "OAUTH_CIMD_CA_FILE='%s' cannot be read: %s; give a PEM "
		    "file of CA certificates, e.g. "
		    "OAUTH_CIMD_CA_FILE=/etc/ssl/certs/ca-certificates.crt",
		    cfg->oauth_cimd_ca_file, strerror(errno));

	v = config_raw(cfg, "OAUTH_ENABLED");
	if (!*v || strcasecmp(v, "auto") == 0) {
		/*
		 * auto never refuses to start: a deployment that worked
		 * before OAuth existed (MCP_AUTH=none, or a base URL with a
		 * path behind a proxy) keeps working, without OAuth.
		 */
		want = https && !cfg->auth_none && !strchr(hp, '/');
		cfg->oauth_why = want     ? "auto: PUBLIC_BASE_URL is https"
		                 : !https ? "auto: PUBLIC_BASE_URL is not https"
		                 : cfg->auth_none
		                     ? "auto: MCP_AUTH=none"
		                     : "auto: PUBLIC_BASE_URL has a path; "
		                       "OAuth needs the root of a host name";
	} else if (config_parse_bool(v, &want) < 0) {
		return errmsg_fail(-EINVAL, err, errlen,
		                   "OAUTH_ENABLED='%s' is not auto, true or "
		                   "false, e.g. OAUTH_ENABLED=auto",
		                   v);
	} else {
		cfg->oauth_why =
		    want ? "OAUTH_ENABLED=true" : "OAUTH_ENABLED=false";
	}
	if (!want)
		return 0;
	if (cfg->auth_none)
		return errmsg_fail(
		    -EINVAL, err, errlen,
		    "OAUTH_ENABLED=true needs tenants to approve access, but "
		    "MCP_AUTH=none; set MCP_AUTH=bearer with MCP_API_TOKEN, or "
		    "OAUTH_ENABLED=false");
	if (strchr(hp, '/'))
		return errmsg_fail(
		    -EINVAL, err, errlen,
		    "PUBLIC_BASE_URL='%s' has a path, but OAuth clients look "
		    "for /.well-known/..., /authorize and /token at the root "
		    "of the origin; serve the daemon at the root of its own "
		    "host name (e.g. PUBLIC_BASE_URL=https://sandbox."
		    "example.com) or set OAUTH_ENABLED=false",
		    u);
	if (hp[0] == '[') {
		n = strcspn(hp + 1, "]");
		snprintf(host, sizeof(host), "%.*s", (int)n, hp + 1);
	} else {
		snprintf(host, sizeof(host), "%.*s", (int)strcspn(hp, ":"), hp);
	}
	if (!https && !config_host_is_loopback(host))
		return errmsg_fail(
		    -EINVAL, err, errlen,
		    "OAuth over plain http is only for testing on loopback, "
		    "and PUBLIC_BASE_URL='%s' is not; use an https URL (e.g. "
		    "PUBLIC_BASE_URL=https://sandbox.example.com behind a "
		    "TLS proxy or tunnel) or OAUTH_ENABLED=false",
		    u);
	if (config_set_str(&cfg->oauth_issuer, u) < 0)
		return -ENOMEM;
	cfg->oauth = true;
	return 0;
}

/*
 * The metrics and operator tokens. The backend's settings are its own
 * (backend.h's backend_configure, after this).
 */
static int derive_cluster(struct config *cfg, char *err, size_t errlen)
{
	if (cfg->metrics_token[0] && strlen(cfg->metrics_token) < 16)
		return errmsg_fail(-EINVAL, err, errlen,
		                   "METRICS_TOKEN must have at least 16 "
		                   "characters, e.g. METRICS_TOKEN=$(openssl "
		                   "rand -hex 32)");
	if (cfg->operator_token[0] && strlen(cfg->operator_token) < 16)
		return errmsg_fail(-EINVAL, err, errlen,
		                   "OPERATOR_TOKEN must have at least 16 "
		                   "characters, e.g. OPERATOR_TOKEN=$(openssl "
		                   "rand -hex 32)");
	if (cfg->operator_token[0] && cfg->metrics_token[0] &&
	    strcmp(cfg->operator_token, cfg->metrics_token) == 0)
		return errmsg_fail(-EINVAL, err, errlen,
		                   "OPERATOR_TOKEN must differ from "
		                   "METRICS_TOKEN: a scraper's token must not "
		                   "read the audit trail");
	return 0;
}

/* The log, the authentication mode, the listen address and the tokens. */
static int derive_front(struct config *cfg, char *err, size_t errlen)
{
	const char *v;
	int r;

	/* Log level first, so later warnings respect it. */
	v = config_raw(cfg, "MCP_LOG_LEVEL");
	if (log_parse_level(v, &cfg->log_level) < 0)
		return errmsg_fail(
		    -EINVAL, err, errlen,
		    "MCP_LOG_LEVEL='%s' is not a level; use debug, "
		    "info, warn or error, e.g. MCP_LOG_LEVEL=info",
		    v);
	if (log_set_format(cfg->log_format) < 0)
		return errmsg_fail(
		    -EINVAL, err, errlen,
		    "MCP_LOG_FORMAT='%s' is not a format; use text or "
		    "json, e.g. MCP_LOG_FORMAT=json",
		    cfg->log_format);

	v = config_raw(cfg, "MCP_AUTH");
	if (strcasecmp(v, "none") == 0)
		cfg->auth_none = true;
	else if (strcasecmp(v, "bearer") != 0)
		return errmsg_fail(
		    -EINVAL, err, errlen,
		    "MCP_AUTH='%s' is not a mode; use bearer (tokens "
		    "required) or none (local testing only), e.g. "
		    "MCP_AUTH=bearer",
		    v);

	if (config_parse_addr(cfg->http_addr, &cfg->listen_host,
	                      &cfg->listen_port) < 0)
		return errmsg_fail(
		    -EINVAL, err, errlen,
		    "MCP_HTTP_ADDR='%s' is not host:port; e.g. "
		    "MCP_HTTP_ADDR=127.0.0.1:8080 (loopback only) or "
		    "MCP_HTTP_ADDR=:8080 (every interface)",
		    cfg->http_addr);
	cfg->listen_loopback =
	    cfg->listen_host[0] && config_host_is_loopback(cfg->listen_host);
	if (cfg->auth_none && !cfg->listen_loopback) {
		/* Without auth, only this machine may reach the server. */
		char *h = strdup("127.0.0.1");

		if (!h)
			return -ENOMEM;
		free(cfg->listen_host);
		cfg->listen_host = h;
		cfg->listen_loopback = true;
	}

	r = parse_tokens(cfg, err, errlen);
	if (r < 0)
		return r;
	if (!cfg->auth_none && cfg->n_tokens == 0)
		return errmsg_fail(
		    -EINVAL, err, errlen,
		    "MCP_API_TOKEN is not set and MCP_API_TOKENS is "
		    "empty; clients must present a bearer token. Set "
		    "e.g. MCP_API_TOKEN=$(openssl rand -hex 32), or "
		    "MCP_AUTH=none for local testing only");
	return 0;
}

/* The public URLs and the Origin and Host allow-lists derived from them. */
static int derive_urls(struct config *cfg, char *err, size_t errlen)
{
	const char *v;
	char buf[512];
	char origin[512], hostport[512];
	int r;

	v = config_raw(cfg, "PUBLIC_BASE_URL");
	if (*v) {
		snprintf(buf, sizeof(buf), "%s", v);
	} else {
		const char *h =
		    cfg->listen_host[0] ? cfg->listen_host : "127.0.0.1";
		bool v6 = strchr(h, ':') != NULL;

		snprintf(buf, sizeof(buf), "http://%s%s%s:%u", v6 ? "[" : "", h,
		         v6 ? "]" : "", cfg->listen_port);
	}
	if (strlen(v) >= 400)
		return errmsg_fail(
		    -EINVAL, err, errlen,
		    "PUBLIC_BASE_URL is longer than 400 characters; "
		    "use e.g. PUBLIC_BASE_URL=https://sandbox.example.com");
	if (config_set_str(&cfg->public_base_url, buf) < 0)
		return -ENOMEM;
	r = config_check_base_url("PUBLIC_BASE_URL", &cfg->public_base_url, err,
	                          errlen);
	if (r < 0)
		return r;
	config_url_parts(cfg->public_base_url, origin, sizeof(origin), hostport,
	                 sizeof(hostport));
	if (hostport[0] == '[')
		hostport[strcspn(hostport, "]")] = '\0';
	else
		hostport[strcspn(hostport, ":")] = '\0';
	cfg->public_remote = *config_raw(cfg, "PUBLIC_BASE_URL") &&
	                     !config_host_is_loopback(
	                         hostport[0] == '[' ? hostport + 1 : hostport);
	r = netaddr_cidrs_parse("MCP_TRUSTED_PROXIES", cfg->trusted_proxies_raw,
	                        &cfg->trusted_proxies, &cfg->n_trusted_proxies,
	                        err, errlen);
	if (r < 0)
		return r;
	if (strcmp(cfg->trusted_proxy_header, "auto") != 0 &&
	    strcmp(cfg->trusted_proxy_header, "cf-connecting-ip") != 0 &&
	    strcmp(cfg->trusted_proxy_header, "x-forwarded-for") != 0)
		return errmsg_fail(
		    -EINVAL, err, errlen,
		    "MCP_TRUSTED_PROXY_HEADER='%.64s' must be auto, "
		    "cf-connecting-ip or x-forwarded-for, e.g. "
		    "MCP_TRUSTED_PROXY_HEADER=x-forwarded-for behind nginx",
		    cfg->trusted_proxy_header);
	v = config_raw(cfg, "FILES_BASE_URL");
	if (strlen(v) >= 400)
		return errmsg_fail(
		    -EINVAL, err, errlen,
		    "FILES_BASE_URL is longer than 400 characters; "
		    "use e.g. FILES_BASE_URL=https://files.example.com");
	if (config_set_str(&cfg->files_base_url,
	                   *v ? v : cfg->public_base_url) < 0)
		return -ENOMEM;
	r = config_check_base_url("FILES_BASE_URL", &cfg->files_base_url, err,
	                          errlen);
	if (r < 0)
		return r;

	/* Origins: explicit list, else the public origins (+ loopback). */
	if (config_split_list(config_raw(cfg, "MCP_ALLOWED_ORIGINS"),
	                      &cfg->allowed_origins) < 0)
		return -ENOMEM;
	if (!cfg->allowed_origins[0]) {
		config_url_parts(cfg->public_base_url, origin, sizeof(origin),
		                 hostport, sizeof(hostport));
		if (config_list_add(&cfg->allowed_origins, origin) < 0)
			return -ENOMEM;
		config_url_parts(cfg->files_base_url, origin, sizeof(origin),
		                 hostport, sizeof(hostport));
		if (config_list_add(&cfg->allowed_origins, origin) < 0)
			return -ENOMEM;
		if (cfg->listen_loopback) {
			static const char *const lo[] = {
			    "http://localhost:*", "http://127.0.0.1:*",
			    "http://[::1]:*", "http://localhost",
			    "http://127.0.0.1"};
			for (size_t i = 0; i < sizeof(lo) / sizeof(lo[0]);
			     i++) {
				if (config_list_add(&cfg->allowed_origins,
				                    lo[i]) < 0)
					return -ENOMEM;
			}
		}
	}
	if (config_split_list(config_raw(cfg, "MCP_ALLOWED_HOSTS"),
	                      &cfg->allowed_hosts) < 0 ||
	    config_split_list(config_raw(cfg, "SANDBOX_POOL_LANGUAGES"),
	                      &cfg->pool_languages) < 0)
		return -ENOMEM;
	if (!cfg->allowed_hosts[0] && cfg->listen_loopback) {
		static const char *const lo[] = {"localhost", "127.0.0.1",
		                                 "[::1]"};

		for (size_t i = 0; i < sizeof(lo) / sizeof(lo[0]); i++) {
			if (config_list_add(&cfg->allowed_hosts, lo[i]) < 0)
				return -ENOMEM;
		}
		config_url_parts(cfg->public_base_url, origin, sizeof(origin),
		                 hostport, sizeof(hostport));
		if (config_list_add(&cfg->allowed_hosts, hostport) < 0)
			return -ENOMEM;
		config_url_parts(cfg->files_base_url, origin, sizeof(origin),
		                 hostport, sizeof(hostport));
		if (config_list_add(&cfg->allowed_hosts, hostport) < 0)
			return -ENOMEM;
	}
	return 0;
}

/* The instance name, the engine's socket and the container runtime. */
static int derive_engine(struct config *cfg, char *err, size_t errlen)
{
	const char *v;
	char buf[512];

	for (const char *p = cfg->replica_name; *p; p++) {
		if (!((*p >= 'a' && *p <= 'z') ||
		      (p > cfg->replica_name &&
		       ((*p >= '0' && *p <= '9') || *p == '-'))) ||
		    p - cfg->replica_name >= MCP_REPLICA_NAME_MAX)
			return errmsg_fail(
			    -EINVAL, err, errlen,
			    "MCP_REPLICA_NAME='%s' must be 1-12 lower-case "
			    "letters, digits or '-', starting with a letter, "
			    "e.g. MCP_REPLICA_NAME=r1",
			    cfg->replica_name);
	}
	v = config_raw(cfg, "MCP_INSTANCE_NAME");
	if (!*v) {
		/*
		 * The host name alone would let a second daemon on the same
		 * host (another SANDBOX_ROOT) reap the first one's running
		 * containers as leftovers of an earlier boot. A daemon is
		 * identified by its host and its SANDBOX_ROOT, which no two
		 * running daemons share.
		 */
		char host[41], fp[13];
		size_t rl = strlen(cfg->sandbox_root);

		while (rl > 1 && cfg->sandbox_root[rl - 1] == '/')
			rl--;
		if (gethostname(host, sizeof(host) - 1) < 0 || !host[0])
			snprintf(host, sizeof(host), "mcp-sandboxd");
		host[sizeof(host) - 1] = '\0';
		for (char *p = host; *p; p++) {
			if (!(isalnum((unsigned char)*p) || *p == '-' ||
			      *p == '.'))
				*p = '-';
		}
		log_fingerprint(cfg->sandbox_root, rl, fp);
		/* Replicas on one host share their SANDBOX_ROOT: the replica
		 * name keeps their instance names apart. */
		snprintf(buf, sizeof(buf), "%s-%.8s%s%s", host, fp,
		         cfg->replica_name[0] ? "-" : "", cfg->replica_name);
		v = buf;
	}
	for (const char *p = v; *p; p++) {
		if (!(isalnum((unsigned char)*p) || *p == '-' || *p == '_' ||
		      *p == '.') ||
		    p - v >= 63)
			return errmsg_fail(
			    -EINVAL, err, errlen,
			    "MCP_INSTANCE_NAME='%s' must be 1-63 "
			    "letters, digits, '.', '_' or '-', e.g. "
			    "MCP_INSTANCE_NAME=sandbox-1",
			    v);
	}
	if (config_set_str(&cfg->instance_name, v) < 0)
		return -ENOMEM;

	if (strncmp(cfg->docker_host, "unix://", 7) != 0 ||
	    cfg->docker_host[7] != '/')
		return errmsg_fail(
		    -EINVAL, err, errlen,
		    "DOCKER_HOST='%s' is not supported; this daemon "
		    "talks to the engine over a unix socket, e.g. "
		    "DOCKER_HOST=unix:///var/run/docker.sock",
		    cfg->docker_host);
	if (strlen(cfg->docker_host) - 7 >= 108)
		return errmsg_fail(
		    -EINVAL, err, errlen,
		    "DOCKER_HOST: the socket path is longer than a "
		    "unix socket allows (107 bytes); use a shorter "
		    "path, e.g. DOCKER_HOST=unix:///var/run/docker.sock");
	for (const char *p = cfg->runtime; *p; p++) {
		if (!(isalnum((unsigned char)*p) || *p == '-' || *p == '_' ||
		      *p == '.'))
			return errmsg_fail(
			    -EINVAL, err, errlen,
			    "SANDBOX_RUNTIME='%s' is not a runtime "
			    "name, e.g. SANDBOX_RUNTIME=runsc",
			    cfg->runtime);
	}
	return 0;
}

/* Limits that depend on each other or on the machine. */
static int derive_limits(struct config *cfg, char *err, size_t errlen)
{

	if (cfg->timeout_s > cfg->max_timeout_s)
		return errmsg_fail(
		    -EINVAL, err, errlen,
		    "SANDBOX_TIMEOUT_SECONDS=%u is above "
		    "SANDBOX_MAX_TIMEOUT_SECONDS=%u; lower it or raise "
		    "the maximum, e.g. SANDBOX_TIMEOUT_SECONDS=30",
		    cfg->timeout_s, cfg->max_timeout_s);
	if (cfg->memory_max_mb == 0)
		cfg->memory_max_mb =
		    cfg->memory_mb > 1024 ? cfg->memory_mb : 1024;
	if (cfg->memory_max_mb < cfg->memory_mb)
		return errmsg_fail(
		    -EINVAL, err, errlen,
		    "SANDBOX_MEMORY_MAX_MB=%u is below SANDBOX_MEMORY_MB=%u; "
		    "raise it, e.g. SANDBOX_MEMORY_MAX_MB=%u",
		    cfg->memory_max_mb, cfg->memory_mb, cfg->memory_mb * 4);
	if (cfg->cpus_max == 0)
		cfg->cpus_max = cfg->cpus > 1 ? cfg->cpus : 1;
	if (cfg->cpus_max < cfg->cpus)
		return errmsg_fail(
		    -EINVAL, err, errlen,
		    "SANDBOX_CPUS_MAX=%g is below SANDBOX_CPUS=%g; "
		    "raise it, e.g. SANDBOX_CPUS_MAX=%g",
		    cfg->cpus_max, cfg->cpus, cfg->cpus * 2);
	if (cfg->task_result_bytes_per_tenant < cfg->task_result_max_bytes)
		return errmsg_fail(
		    -EINVAL, err, errlen,
		    "MCP_TASK_RESULT_BYTES_PER_TENANT=%zu is below "
		    "MCP_TASK_RESULT_MAX_BYTES=%zu: a token could not keep "
		    "even one result of the largest size; raise it or lower "
		    "the maximum, e.g. MCP_TASK_RESULT_BYTES_PER_TENANT=128m",
		    cfg->task_result_bytes_per_tenant,
		    cfg->task_result_max_bytes);
	if (cfg->output_inline_bytes > cfg->output_max_bytes)
		return errmsg_fail(-EINVAL, err, errlen,
		                   "SANDBOX_OUTPUT_INLINE_BYTES is above "
		                   "SANDBOX_OUTPUT_MAX_BYTES; e.g. "
		                   "SANDBOX_OUTPUT_INLINE_BYTES=32k");
	/* At most 876000 hours: 3,153,600,000 seconds fit an unsigned. */
	cfg->retention_s = cfg->retention_seconds
	                       ? cfg->retention_seconds
	                       : cfg->retention_hours * 3600u;
	if (cfg->max_concurrent == 0) {
		long n = sysconf(_SC_NPROCESSORS_ONLN);

		cfg->max_concurrent = (unsigned)(n > 0 ? n * 2 : 2);
	}
	if (cfg->warm_memory_mb == 0) {
		long pages = sysconf(_SC_PHYS_PAGES);
		long psize = sysconf(_SC_PAGESIZE);

		cfg->warm_memory_mb =
		    pages > 0 && psize > 0
		        ? (unsigned)((unsigned long long)pages *
		                     (unsigned long long)psize / 2 /
		                     (1024 * 1024))
		        : 4096;
	}
	for (size_t i = 0; cfg->pool_preload[i]; i++) {
		char c = cfg->pool_preload[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || c == '_' || c == '.' ||
		      c == ','))
			return errmsg_fail(
			    -EINVAL, err, errlen,
			    "SANDBOX_POOL_PRELOAD='%s' must be module names "
			    "separated by commas, e.g. "
			    "SANDBOX_POOL_PRELOAD=numpy,pandas",
			    cfg->pool_preload);
	}
	return 0;
}

/* SANDBOX_ROOT, SANDBOX_HOST_PATH and the workspace quota. */
static int derive_paths(struct config *cfg, char *err, size_t errlen)
{
	const char *v;

	if (cfg->sandbox_root[0] != '/' || strlen(cfg->sandbox_root) > 200)
		return errmsg_fail(
		    -EINVAL, err, errlen,
		    "SANDBOX_ROOT='%s' must be an absolute path of at "
		    "most 200 characters, e.g. "
		    "SANDBOX_ROOT=/var/lib/mcp-sandboxd",
		    cfg->sandbox_root);
	v = config_raw(cfg, "SANDBOX_HOST_PATH");
	if (config_set_str(&cfg->sandbox_host_path,
	                   *v ? v : cfg->sandbox_root) < 0)
		return -ENOMEM;
	if (cfg->sandbox_host_path[0] != '/' ||
	    strlen(cfg->sandbox_host_path) > 200 ||
	    strpbrk(cfg->sandbox_host_path, ",:\n"))
		return errmsg_fail(
		    -EINVAL, err, errlen,
		    "SANDBOX_HOST_PATH='%s' must be an absolute path of "
		    "at most 200 characters without ',' or ':', e.g. "
		    "SANDBOX_HOST_PATH=/srv/mcp-sandboxd",
		    cfg->sandbox_host_path);
	for (char *p = cfg->sandbox_root + strlen(cfg->sandbox_root) - 1;
	     p > cfg->sandbox_root && *p == '/'; p--)
		*p = '\0';
	for (char *p =
	         cfg->sandbox_host_path + strlen(cfg->sandbox_host_path) - 1;
	     p > cfg->sandbox_host_path && *p == '/'; p--)
		*p = '\0';

	if (strcmp(cfg->quota_mode, "auto") &&
	    strcmp(cfg->quota_mode, "loop") && strcmp(cfg->quota_mode, "none"))
		return errmsg_fail(
		    -EINVAL, err, errlen,
		    "WORKSPACE_QUOTA_MODE='%s' is not a mode; use auto, "
		    "loop or none, e.g. WORKSPACE_QUOTA_MODE=auto",
		    cfg->quota_mode);
	{
		const char *q = config_raw(cfg, "WORKSPACE_QUOTA_MB");
		const struct setting *s =
		    config_setting_find("WORKSPACE_QUOTA_MB");
		uint64_t u = 0;

		if (num_u64(q, (uint64_t)s->max, &u) < 0 || (double)u < s->min)
			return errmsg_fail(
			    -EINVAL, err, errlen,
			    "WORKSPACE_QUOTA_MB='%s' must be a whole "
			    "number from 1 to 1048576, e.g. "
			    "WORKSPACE_QUOTA_MB=100",
			    q);
		cfg->workspace_quota_bytes = (size_t)u * 1024 * 1024;
	}
	return 0;
}

/* An installer's index or registry: an http(s) URL without spaces. */
static bool package_url_ok(const char *u)
{
	size_t n = strlen(u);

	if (n > 512 ||
	    (strncmp(u, "https://", 8) != 0 && strncmp(u, "http://", 7) != 0))
		return false;
	for (const char *p = u; *p; p++)
		if ((unsigned char)*p <= ' ' || (unsigned char)*p >= 0x7f ||
		    strchr("\"'`\\<>{}|^", *p))
			return false;
	/* A host after the scheme. */
	u = strstr(u, "://") + 3;
	return isalnum((unsigned char)*u) || *u == '[';
}

/* A Docker network name a container may be put on (not host, none, ...). */
static bool docker_net_name_ok(const char *net)
{
	return net[0] && strlen(net) <= 64 &&
	       strspn(net,
	              "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
	              "0123456789_.-") == strlen(net) &&
	       net[0] != '-' && net[0] != '.' && strcmp(net, "host") != 0 &&
	       strcmp(net, "none") != 0;
}

/*
 * SANDBOX_PACKAGES_CRAN_REPOS: 1 to CONFIG_CRAN_REPOS_MAX http(s) URLs,
 * separated by commas (the R installer splits them the same way).
 */
static int derive_cran_repos(const char *list, char *err, size_t errlen)
{
	const char *p = list;
	size_t n = 0;

	do {
		size_t len = strcspn(p, ",");
		char url[512];

		if (len == 0 || len >= sizeof(url) ||
		    ++n > CONFIG_CRAN_REPOS_MAX)
			return errmsg_fail(
			    -EINVAL, err, errlen,
			    "SANDBOX_PACKAGES_CRAN_REPOS='%.200s' must be 1 "
			    "to %d http(s) URLs of CRAN-like repositories "
			    "separated by commas (no spaces), e.g. "
			    "SANDBOX_PACKAGES_CRAN_REPOS=https://"
			    "cloud.r-project.org",
			    list, CONFIG_CRAN_REPOS_MAX);
		memcpy(url, p, len);
		url[len] = '\0';
		if (!package_url_ok(url))
			return errmsg_fail(
			    -EINVAL, err, errlen,
			    "SANDBOX_PACKAGES_CRAN_REPOS: '%.200s' is not an "
			    "http(s) URL of a CRAN-like repository (the "
			    "directory that has src/contrib), e.g. "
			    "https://cloud.r-project.org",
			    url);
		p += len;
	} while (*p++ == ',');
	return 0;
}

/* Packages on demand: the index, the registry, the network, the CAs. */
static int derive_packages(struct config *cfg, char *err, size_t errlen)
{
	const char *net = cfg->packages_network;
	int r;

	if (!package_url_ok(cfg->pip_index))
		return errmsg_fail(
		    -EINVAL, err, errlen,
		    "SANDBOX_PACKAGES_PIP_INDEX='%.200s' must be "
		    "an http(s) URL of a simple index, e.g. "
		    "SANDBOX_PACKAGES_PIP_INDEX=https://pypi.org/"
		    "simple",
		    cfg->pip_index);
	if (!package_url_ok(cfg->npm_registry))
		return errmsg_fail(
		    -EINVAL, err, errlen,
		    "SANDBOX_PACKAGES_NPM_REGISTRY='%.200s' must "
		    "be an http(s) URL of an npm registry, e.g. "
		    "SANDBOX_PACKAGES_NPM_REGISTRY=https://"
		    "registry.npmjs.org/",
		    cfg->npm_registry);
	r = derive_cran_repos(cfg->cran_repos, err, errlen);
	if (r < 0)
		return r;
	if (!net[0] || strlen(net) > 64 ||
	    strspn(net, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
	                "0123456789_.-") != strlen(net) ||
	    net[0] == '-' || net[0] == '.')
		return errmsg_fail(
		    -EINVAL, err, errlen,
		    "SANDBOX_PACKAGES_NETWORK='%.64s' must be the "
		    "name of a Docker network, e.g. "
		    "SANDBOX_PACKAGES_NETWORK=bridge",
		    net);
	if (strcmp(net, "host") == 0 || strcmp(net, "none") == 0 ||
	    strncmp(net, "container:", 10) == 0)
		return errmsg_fail(
		    -EINVAL, err, errlen,
		    "SANDBOX_PACKAGES_NETWORK=%s is refused: %s; use bridge or "
		    "a network of your own that reaches the index",
		    net,
		    strcmp(net, "none") == 0
		        ? "installers need a network (to turn packages off, "
		          "set SANDBOX_PACKAGES=false)"
		        : "it would give installers the host's network");
	if (cfg->packages_ca_file[0] && access(cfg->packages_ca_file, R_OK) < 0)
		return errmsg_fail(
		    -EINVAL, err, errlen,
		    "SANDBOX_PACKAGES_CA_FILE='%s' cannot be read: %s; give a "
		    "PEM file of CA certificates, e.g. "
		    "SANDBOX_PACKAGES_CA_FILE=/etc/ssl/certs/"
		    "ca-certificates.crt",
		    cfg->packages_ca_file, strerror(errno));
	return 0;
}

/* The settings that depend on others; after the table was parsed. */
int config_derive(struct config *cfg, char *err, size_t errlen)
{
	int r;

	r = derive_front(cfg, err, errlen);
	if (r == 0)
		r = derive_urls(cfg, err, errlen);
	if (r == 0)
		r = derive_engine(cfg, err, errlen);
	if (r == 0)
		r = derive_limits(cfg, err, errlen);
	if (r == 0)
		r = derive_paths(cfg, err, errlen);
	if (r < 0)
		return r;
	r = derive_cluster(cfg, err, errlen);
	if (r == 0)
		r = derive_packages(cfg, err, errlen);
	if (r == 0)
		r = egress_settings_check(
		    cfg->egress_allow, cfg->egress_tenants, cfg->egress_ports,
		    cfg->egress_private, cfg->egress_hosts, cfg->egress_subnet,
		    err, errlen);
	if (r == 0 && !docker_net_name_ok(cfg->egress_proxy_network))
		r = errmsg_fail(-EINVAL, err, errlen,
		                "SANDBOX_EGRESS_PROXY_NETWORK='%.64s' must be "
		                "the name of a Docker network with a route out "
		                "(not host or none), e.g. bridge",
		                cfg->egress_proxy_network);
	if (r < 0)
		return r;
	r = parse_secret(cfg, err, errlen);
	if (r < 0)
		return r;
	if (!tenant_name_ok(cfg->stdio_tenant, strlen(cfg->stdio_tenant)))
		return errmsg_fail(-EINVAL, err, errlen,
		                   "STDIO_TENANT='%.64s' must be 1-64 letters, "
		                   "digits, '_', '-' or '.', e.g. "
		                   "STDIO_TENANT=desktop",
		                   cfg->stdio_tenant);
	r = derive_store(cfg, err, errlen);
	if (r == 0)
		r = derive_replica(cfg, err, errlen);
	if (r < 0)
		return r;
	return derive_oauth(cfg, err, errlen);
}
