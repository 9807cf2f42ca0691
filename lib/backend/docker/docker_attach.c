/* SPDX-License-Identifier: MIT */
/*
 * docker_attach: hijacked attach streams. docker_container_attach opens a
 * connection of its own through libcurl in CONNECT_ONLY mode, sends the
 * attach request itself, reads the response head (keeping any stream bytes
 * that came with it), and hands the socket to the caller, who drives it
 * non-blocking. Part of the docker module (docker_internal.h); a
 * struct docker_attach belongs to one thread at a time.
 */
#include "backend/docker/docker.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <curl/curl.h>

#include "backend/docker/docker_internal.h"
#include "util/mono.h"
#include "util/num.h"

#define DOCKER_ATTACH_HDR_MAX 4096

struct docker_attach {
	CURL *h;
	int fd;
	char pending[DOCKER_ATTACH_HDR_MAX];
	size_t pend_off, pend_len;
};

/* Waits for events on fd until the deadline. 0, -ETIMEDOUT or -errno. */
static int docker_wait_fd(int fd, short events, long long deadline)
{
	struct pollfd p = {.fd = fd, .events = events};
	long long left;
	int n;

	for (;;) {
		left = deadline - mono_ms();
		if (left <= 0)
			return -ETIMEDOUT;
		n = poll(&p, 1, (int)(left > INT32_MAX ? INT32_MAX : left));
		if (n > 0)
			return 0;
		if (n == 0)
			return -ETIMEDOUT;
		if (errno != EINTR)
			return -errno;
	}
}

/* Sends the whole request through curl, waiting for room as needed. */
static int docker_attach_send(CURL *h, int fd, const char *req, size_t len,
                              long long deadline)
{
	size_t off = 0, sent;
	CURLcode rc;
	int r;

	while (off < len) {
		rc = curl_easy_send(h, req + off, len - off, &sent);
		if (rc == CURLE_AGAIN) {
			r = docker_wait_fd(fd, POLLOUT, deadline);
			if (r < 0)
				return r;
			continue;
		}
		if (rc != CURLE_OK)
			return -EPIPE;
		off += sent;
	}
	return 0;
}

/* Case-insensitive search for a header's value in a response head. */
static const char *docker_find_header(const char *head, const char *name)
{
	size_t n = strlen(name);

	for (const char *p = strstr(head, "\r\n"); p; p = strstr(p, "\r\n")) {
		p += 2;
		if (strncasecmp(p, name, n) == 0 && p[n] == ':')
			return p + n + 1;
	}
	return NULL;
}

/*
 * Connects a's own handle to the engine's socket (CONNECT_ONLY) and takes
 * its socket into a->fd. 0, or a negative errno with a message in err.
 */
static int docker_attach_connect(struct docker *d, struct docker_attach *a,
                                 char *err, size_t errlen)
{
	char cerr[CURL_ERROR_SIZE] = "";
	curl_socket_t sock = CURL_SOCKET_BAD;
	long oserr = 0;
	CURLcode rc;

	curl_easy_setopt(a->h, CURLOPT_URL, "http://docker/");
	curl_easy_setopt(a->h, CURLOPT_UNIX_SOCKET_PATH, d->sock_path);
	curl_easy_setopt(a->h, CURLOPT_CONNECT_ONLY, 1L);
	curl_easy_setopt(a->h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(a->h, CURLOPT_CONNECTTIMEOUT_MS,
	                 (long)DOCKER_CONNECT_TIMEOUT_MS);
	curl_easy_setopt(a->h, CURLOPT_ERRORBUFFER, cerr);
	rc = curl_easy_perform(a->h);
	curl_easy_setopt(a->h, CURLOPT_ERRORBUFFER, NULL);
	if (rc != CURLE_OK) {
		const char *hint;

		curl_easy_getinfo(a->h, CURLINFO_OS_ERRNO, &oserr);
		hint = docker_connect_hint(oserr);
		snprintf(err, errlen, "Docker engine not reachable at %s: %s",
		         d->host,
		         hint ? hint
		              : (cerr[0] ? cerr : curl_easy_strerror(rc)));
		docker_mark_down(d, err);
		return -ECONNREFUSED;
	}
	if (curl_easy_getinfo(a->h, CURLINFO_ACTIVESOCKET, &sock) != CURLE_OK ||
	    sock == CURL_SOCKET_BAD) {
		snprintf(err, errlen, "attach: no socket from libcurl");
		return -EIO;
	}
	a->fd = (int)sock;
	return 0;
}

/*
 * Reads from a->fd into head (DOCKER_ATTACH_HDR_MAX + 1 bytes) up to the
 * end of the response head, by the deadline. Returns 0 with *hlen bytes
 * read, NUL-terminated, and the offset of what follows the head in
 * *body_off; or a negative errno with a message in err.
 */
static int docker_attach_head(struct docker *d, struct docker_attach *a,
                              const char *what, char *head, size_t *hlen,
                              size_t *body_off, long long deadline, char *err,
                              size_t errlen)
{
	const char *eoh = NULL;
	ssize_t got;
	int r;

	while (!eoh) {
		if (*hlen == DOCKER_ATTACH_HDR_MAX) {
			snprintf(err, errlen,
			         "Docker %s response head too long", what);
			return -EPROTO;
		}
		r = docker_wait_fd(a->fd, POLLIN, deadline);
		if (r < 0) {
			snprintf(err, errlen,
			         "Docker engine at %s did not answer the "
			         "%s request within %u ms",
			         d->host, what, d->timeout_ms);
			docker_mark_down(d, err);
			return r;
		}
		got = recv(a->fd, head + *hlen, DOCKER_ATTACH_HDR_MAX - *hlen,
		           MSG_DONTWAIT);
		if (got < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (got <= 0) {
			snprintf(err, errlen,
			         "Docker engine at %s closed the %s "
			         "connection",
			         d->host, what);
			docker_mark_down(d, err);
			return -ECONNREFUSED;
		}
		*hlen += (size_t)got;
		head[*hlen] = '\0';
		eoh = memmem(head, *hlen, "\r\n\r\n", 4);
	}
	*body_off = (size_t)(eoh - head) + 4;
	return 0;
}

/*
 * The engine refused to attach (status is neither 101 nor 200): reads the
 * JSON error body that arrives quickly after the head already in head,
 * and puts its message in err. Returns the negative errno for status.
 */
static int docker_attach_refused(struct docker_attach *a, const char *what,
                                 long status, char *head, size_t hlen,
                                 size_t body_off, char *err, size_t errlen)
{
	const char *cl = docker_find_header(head, "Content-Length");
	uint64_t want = 0;
	const char *msg;
	ssize_t got;
	cJSON *j;

	/* A missing or malformed length: read what is there. */
	if (cl) {
		cl += strspn(cl, " \t");
		if (num_u64n(cl, strcspn(cl, " \t\r\n"), DOCKER_ATTACH_HDR_MAX,
		             &want) < 0)
			want = 0;
	}

	while (want > hlen - body_off && hlen < DOCKER_ATTACH_HDR_MAX &&
	       docker_wait_fd(a->fd, POLLIN, mono_ms() + 1000) == 0) {
		got = recv(a->fd, head + hlen, DOCKER_ATTACH_HDR_MAX - hlen,
		           MSG_DONTWAIT);
		if (got <= 0)
			break;
		hlen += (size_t)got;
	}
	head[hlen] = '\0';
	j = cJSON_ParseWithLength(head + body_off, hlen - body_off);
	msg = cJSON_GetStringValue(
	    cJSON_GetObjectItemCaseSensitive(j, "message"));
	snprintf(err, errlen,
	         "Docker engine refused the %s request: %s (HTTP %ld)", what,
	         msg ? msg : "no message", status);
	cJSON_Delete(j);
	return status == 404 ? -ENOENT : status == 409 ? -EBUSY : -EIO;
}

/*
 * Sends "<method> /v<version><path> <proto>" and the extra header lines on
 * a connection of its own and reads the answer's head; on 101 or 200 the
 * connection is handed out as a stream of the body (attach: hijacked; an
 * HTTP/1.0 GET: the body until the engine closes, never chunked).
 */
static int docker_hijack(struct docker *d, const char *method, const char *path,
                         const char *proto, const char *extra, const char *what,
                         struct docker_attach **out, char *err, size_t errlen)
{
	struct docker_attach *a = NULL;
	char req[1536], head[DOCKER_ATTACH_HDR_MAX + 1], ver[16];
	long long deadline = mono_ms() + d->timeout_ms;
	size_t hlen = 0, body_off = 0;
	long status = 0;
	int r, n, fl;

	*out = NULL;
	r = docker_api_version(d, ver, sizeof(ver), err, errlen);
	if (r < 0)
		return r;
	a = calloc(1, sizeof(*a));
	if (!a || !(a->h = curl_easy_init())) {
		snprintf(err, errlen, "out of memory");
		r = -ENOMEM;
		goto out;
	}
	a->fd = -1;
	r = docker_attach_connect(d, a, err, errlen);
	if (r < 0)
		goto out;
	n = snprintf(req, sizeof(req), "%s /v%s%s %s\r\nHost: docker\r\n%s\r\n",
	             method, ver, path, proto, extra);
	if (n < 0 || (size_t)n >= sizeof(req)) {
		snprintf(err, errlen, "%s request too long", what);
		r = -EINVAL;
		goto out;
	}
	r = docker_attach_send(a->h, a->fd, req, (size_t)n, deadline);
	if (r < 0) {
		snprintf(err, errlen,
		         "Docker engine at %s: sending the %s request "
		         "failed: %s",
		         d->host, what, strerror(-r));
		docker_mark_down(d, err);
		goto out;
	}
	/* Read up to the end of the response head; keep what follows. */
	r = docker_attach_head(d, a, what, head, &hlen, &body_off, deadline,
	                       err, errlen);
	if (r < 0)
		goto out;
	if (sscanf(head, "HTTP/1.%*1[01] %3ld", &status) != 1) {
		snprintf(err, errlen,
		         "Docker engine sent a malformed %s response", what);
		r = -EPROTO;
		goto out;
	}
	docker_mark_ok(d);
	if (status != 101 && status != 200) {
		r = docker_attach_refused(a, what, status, head, hlen, body_off,
		                          err, errlen);
		goto out;
	}
	memcpy(a->pending, head + body_off, hlen - body_off);
	a->pend_len = hlen - body_off;
	fl = fcntl(a->fd, F_GETFL);
	if (fl >= 0)
		(void)fcntl(a->fd, F_SETFL, fl | O_NONBLOCK);
	*out = a;
	return 0;
out:
	docker_attach_close(a);
	return r;
}

int docker_container_attach(struct docker *d, const char *id,
                            struct docker_attach **out, char *err,
                            size_t errlen)
{
	char path[256];

	*out = NULL;
	if (!docker_id_ok(id))
		return docker_bad_id("container id", err, errlen);
	snprintf(path, sizeof(path),
	         "/containers/%s/attach?stream=1&stdin=1&stdout=1&stderr=1",
	         id);
	return docker_hijack(d, "POST", path, "HTTP/1.1",
	                     "Content-Type: text/plain\r\n"
	                     "Content-Length: 0\r\n"
	                     "Connection: Upgrade\r\n"
	                     "Upgrade: tcp\r\n",
	                     "attach", out, err, errlen);
}

int docker_stream_get(struct docker *d, const char *path,
                      struct docker_attach **out, char *err, size_t errlen)
{
	*out = NULL;
	if (path[0] != '/' || strpbrk(path, " \r\n")) {
		snprintf(err, errlen, "invalid Docker request path");
		return -EINVAL;
	}
	return docker_hijack(d, "GET", path, "HTTP/1.0", "", "stream", out, err,
	                     errlen);
}

int docker_attach_fd(const struct docker_attach *a)
{
	return a->fd;
}

bool docker_attach_pending(const struct docker_attach *a)
{
	return a->pend_off < a->pend_len;
}

ssize_t docker_attach_read(struct docker_attach *a, void *buf, size_t n)
{
	ssize_t got;

	if (a->pend_off < a->pend_len) {
		size_t take = a->pend_len - a->pend_off;

		if (take > n)
			take = n;
		memcpy(buf, a->pending + a->pend_off, take);
		a->pend_off += take;
		return (ssize_t)take;
	}
	got = recv(a->fd, buf, n, MSG_DONTWAIT);
	if (got < 0)
		return errno == EWOULDBLOCK ? -EAGAIN : -errno;
	return got;
}

ssize_t docker_attach_write(struct docker_attach *a, const void *p, size_t n)
{
	ssize_t w = send(a->fd, p, n, MSG_DONTWAIT | MSG_NOSIGNAL);

	if (w < 0)
		return errno == EWOULDBLOCK ? -EAGAIN : -errno;
	return w;
}

void docker_attach_close_write(struct docker_attach *a)
{
	(void)shutdown(a->fd, SHUT_WR);
}

void docker_attach_close(struct docker_attach *a)
{
	if (!a)
		return;
	if (a->fd >= 0)
		(void)shutdown(a->fd, SHUT_RDWR);
	if (a->h)
		curl_easy_cleanup(a->h);
	free(a);
}
