/* SPDX-License-Identifier: MIT */
/*
 * http_metrics: GET /metrics, the Prometheus text exposition (0.0.4) of
 * the daemon's stats (stats.h). Who may read it: with METRICS_TOKEN set, a
 * request bearing that token (its SHA-256 compared with CRYPTO_memcmp, so
 * neither its length nor its content shows in the timing); without it,
 * loopback clients only (a scraper on the host; behind a trusted proxy
 * the client it names must be loopback too), and only while
 * PUBLIC_BASE_URL is unset or loopback: a public one means a proxy or
 * tunnel in front, whose requests may all come from loopback whoever sent
 * them, so there the token is required. The API tokens do not open it: a
 * scraper never holds a key that runs code. The operator's endpoints
 * (/admin/..., OPERATOR_TOKEN) follow the same rule through
 * http_operator_ok. Runs on connection threads; the stats pointer is set
 * before serving and never changes.
 */
#include <arpa/inet.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <string.h>
#include <strings.h>

#include "http/http_internal.h"
#include "util/stats.h"

static bool sha256(const char *p, size_t n, unsigned char out[32])
{
	unsigned len = 0;

	return EVP_Digest(p, n, out, &len, EVP_sha256(), NULL) == 1 &&
	       len == 32;
}

/* Whether the Authorization header is "Bearer <METRICS_TOKEN>". */
static bool token_ok(const struct http_request *rq, const char *want)
{
	const char *h = http_request_header(rq, "Authorization");
	unsigned char a[32], b[32];

	if (!h || strncasecmp(h, "Bearer ", 7) != 0)
		return false;
	h += 7;
	while (*h == ' ')
		h++;
	return sha256(h, strlen(h), a) && sha256(want, strlen(want), b) &&
	       CRYPTO_memcmp(a, b, sizeof(a)) == 0;
}

/* 127.0.0.0/8, ::1 and ::ffff:127.0.0.0/104. */
static bool peer_loopback(const char *peer)
{
	struct in6_addr a6;
	struct in_addr a4;

	if (inet_pton(AF_INET, peer, &a4) == 1)
		return (ntohl(a4.s_addr) >> 24) == 127;
	if (inet_pton(AF_INET6, peer, &a6) != 1)
		return false;
	if (IN6_IS_ADDR_LOOPBACK(&a6))
		return true;
	return IN6_IS_ADDR_V4MAPPED(&a6) && a6.s6_addr[12] == 127;
}

bool http_operator_ok(struct http_request *rq, const char *token,
                      const char *setting, const char *path)
{
	struct http_server *hs = rq->hs;

	if (token[0]) {
		if (token_ok(rq, token))
			return true;
		(void)http_reply_error(
		    rq, MHD_HTTP_UNAUTHORIZED,
		    "%s needs 'Authorization: Bearer <token>' with the "
		    "server's %s (the API tokens do not open it); see "
		    "docs/operations.md",
		    path, setting);
		(void)http_reply_header(rq, "WWW-Authenticate",
		                        "Bearer realm=\"operator\"");
		return false;
	}
	if (hs->cfg->public_remote) {
		(void)http_reply_error(
		    rq, MHD_HTTP_FORBIDDEN,
		    "%s needs %s on a server with a public PUBLIC_BASE_URL "
		    "(behind a proxy or tunnel every request comes from "
		    "loopback); set %s and send it as a bearer token "
		    "(docs/operations.md)",
		    path, setting, setting);
		return false;
	}
	if (!peer_loopback(rq->peer) || !peer_loopback(rq->client)) {
		(void)http_reply_error(
		    rq, MHD_HTTP_FORBIDDEN,
		    "%s answers loopback peers only while %s is unset; set "
		    "%s and send it as a bearer token (docs/operations.md)",
		    path, setting, setting);
		return false;
	}
	return true;
}

void http_metrics_handle(void *data, struct http_request *rq)
{
	struct http_server *hs = rq->hs;
	struct buf out;

	(void)data;
	if (!http_operator_ok(rq, hs->cfg->metrics_token, "METRICS_TOKEN",
	                      "/metrics"))
		return;
	if (!hs->stats) {
		(void)http_reply_error(
		    rq, MHD_HTTP_SERVICE_UNAVAILABLE,
		    "metrics are not set up in this process");
		return;
	}
	buf_init(&out, 16u << 20); /* 256 series a metric at most */
	if (stats_render(hs->stats, &out) < 0) {
		buf_finish(&out);
		(void)http_reply_error(rq, MHD_HTTP_INTERNAL_SERVER_ERROR,
		                       "rendering the metrics failed (out of "
		                       "memory?); try again");
		return;
	}
	(void)http_reply(rq, MHD_HTTP_OK,
	                 "text/plain; version=0.0.4; charset=utf-8",
	                 out.data ? out.data : "", out.len);
	buf_finish(&out);
}
