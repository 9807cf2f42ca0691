/* SPDX-License-Identifier: MIT */
/*
 * oauth_cimd: one libcurl easy handle per fetch (fetches are rare: a
 * document is cached in the store for an hour). The body is collected into
 * a bounded buffer and the transfer aborted past the limit; the socket
 * callback vets every address curl is about to connect to.
 */
#include "oauth/oauth_cimd.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include <curl/curl.h>

#include "build_config.h"
#include "oauth/oauth_uri.h"
#include "util/buf.h"
#include "util/errmsg.h"

struct fetch {
	struct buf body;
	bool too_big;
	bool public_only;
	bool refused; /* an address was refused */
	char refused_addr[INET6_ADDRSTRLEN];
};

bool oauth_cimd_is_url(const char *client_id)
{
	struct oauth_uri u;

	if (strncmp(client_id, "https://", 8) != 0 ||
	    oauth_uri_parse(client_id, &u, NULL, 0) < 0)
		return false;
	/* A path beyond "/" is what makes it a document, not an origin. */
	return client_id[u.path_off] == '/' && client_id[u.path_off + 1] &&
	       client_id[u.path_off + 1] != '?';
}

static bool private_v4(const unsigned char *a)
{
	return a[0] == 0 || a[0] == 10 || a[0] == 127 ||
	       (a[0] == 169 && a[1] == 254) ||
	       (a[0] == 172 && (a[1] & 0xf0) == 16) ||
	       (a[0] == 192 && a[1] == 168) ||
	       (a[0] == 100 && (a[1] & 0xc0) == 64) || a[0] >= 224;
}

/* Whether an address is loopback, private, link-local or otherwise local. */
static bool private_addr(const struct sockaddr *sa, char *text, size_t len)
{
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const void *)sa;
		const unsigned char *a = (const void *)&in->sin_addr;

		inet_ntop(AF_INET, &in->sin_addr, text, (socklen_t)len);
		return private_v4(a);
	}
	if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const void *)sa;
		const unsigned char *a = in6->sin6_addr.s6_addr;
		static const unsigned char mapped[12] = {
		    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

		inet_ntop(AF_INET6, &in6->sin6_addr, text, (socklen_t)len);
		if (memcmp(a, mapped, 12) == 0)
			return private_v4(a + 12);
		return IN6_IS_ADDR_UNSPECIFIED(&in6->sin6_addr) ||
		       IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr) ||
		       (a[0] & 0xfe) == 0xfc || /* fc00::/7 */
		       (a[0] == 0xfe && (a[1] & 0xc0) == 0x80) || a[0] == 0xff;
	}
	snprintf(text, len, "?");
	return true;
}

static curl_socket_t open_socket(void *data, curlsocktype purpose,
                                 struct curl_sockaddr *addr)
{
	struct fetch *f = data;

	(void)purpose;
	if (f->public_only && private_addr(&addr->addr, f->refused_addr,
	                                   sizeof(f->refused_addr))) {
		f->refused = true;
		return CURL_SOCKET_BAD;
	}
	return socket(addr->family, addr->socktype | SOCK_CLOEXEC,
	              addr->protocol);
}

static size_t on_data(char *p, size_t size, size_t n, void *data)
{
	struct fetch *f = data;

	if (buf_append(&f->body, p, size * n) < 0) {
		f->too_big = true;
		return 0; /* aborts the transfer */
	}
	return size * n;
}

/* Which of the allowed hosts admits this one; public_only for "*". */
static bool host_allowed(const struct config *cfg, const char *host,
                         bool *public_only)
{
	bool any = false;

	for (char **h = cfg->oauth_cimd_hosts; h && *h; h++) {
		if (strcasecmp(*h, host) == 0) {
			*public_only = false;
			return true;
		}
		if (strcmp(*h, "*") == 0)
			any = true;
	}
	*public_only = any;
	return any;
}

int oauth_cimd_fetch(const struct config *cfg, const char *url, char **body,
                     size_t *len, char *err, size_t errlen)
{
	struct fetch f = {0};
	struct oauth_uri u;
	char cerr[CURL_ERROR_SIZE] = "";
	struct curl_slist *hdrs = NULL;
	const char *ctype = NULL;
	long status = 0;
	CURL *c;
	CURLcode cc;
	int r = 0;

	*body = NULL;
	*len = 0;
	if (!oauth_cimd_is_url(url) || oauth_uri_parse(url, &u, NULL, 0) < 0)
		return errmsg_fail(-EPROTO, err, errlen,
		                   "'%.200s' is not an https URL with a path",
		                   url);
	if (!host_allowed(cfg, u.host, &f.public_only))
		return errmsg_fail(-EPERM, err, errlen,
		                   "the host %s is not in OAUTH_CIMD_HOSTS",
		                   u.host);
	c = curl_easy_init();
	if (!c)
		return errmsg_fail(-ENOMEM, err, errlen,
		                   "cannot start an HTTPS client");
	buf_init(&f.body, OAUTH_CIMD_MAX_BYTES);
	hdrs = curl_slist_append(NULL, "Accept: application/json");
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "https");
	curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)OAUTH_CIMD_TIMEOUT_MS);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS,
	                 (long)OAUTH_CIMD_TIMEOUT_MS);
	curl_easy_setopt(c, CURLOPT_MAXFILESIZE, (long)OAUTH_CIMD_MAX_BYTES);
	curl_easy_setopt(c, CURLOPT_USERAGENT, "mcp-sandboxd/" MCPSD_VERSION);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, cerr);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &f);
	curl_easy_setopt(c, CURLOPT_OPENSOCKETFUNCTION, open_socket);
	curl_easy_setopt(c, CURLOPT_OPENSOCKETDATA, &f);
	if (cfg->oauth_cimd_ca_file && cfg->oauth_cimd_ca_file[0])
		curl_easy_setopt(c, CURLOPT_CAINFO, cfg->oauth_cimd_ca_file);
	cc = curl_easy_perform(c);
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	curl_easy_getinfo(c, CURLINFO_CONTENT_TYPE, &ctype);
	if (f.refused)
		r = errmsg_fail(-EPERM, err, errlen,
		                "%s resolves to %s, a private or local "
		                "address, which OAUTH_CIMD_HOSTS=* does not "
		                "allow; list the host by name to allow it",
		                u.host, f.refused_addr);
	else if (f.too_big || cc == CURLE_FILESIZE_EXCEEDED)
		r = errmsg_fail(-EPROTO, err, errlen,
		                "the document is larger than %d bytes",
		                OAUTH_CIMD_MAX_BYTES);
	else if (cc != CURLE_OK)
		r = errmsg_fail(-EHOSTUNREACH, err, errlen,
		                "%s (this server needs outbound HTTPS to %s)",
		                cerr[0] ? cerr : curl_easy_strerror(cc),
		                u.host);
	else if (status != 200)
		r = errmsg_fail(-EPROTO, err, errlen,
		                "%s answered HTTP %ld instead of 200", u.host,
		                status);
	else if (ctype && !strstr(ctype, "json"))
		r = errmsg_fail(-EPROTO, err, errlen,
		                "the document has Content-Type '%.60s', not "
		                "application/json",
		                ctype);
	curl_slist_free_all(hdrs);
	curl_easy_cleanup(c);
	if (r == 0) {
		*body = buf_take(&f.body, len);
		if (!*body)
			r = errmsg_fail(-ENOMEM, err, errlen, "out of memory");
	}
	buf_finish(&f.body);
	return r;
}
