/* SPDX-License-Identifier: MIT */
/*
 * http_files: the public read-only routes: /files/ (through the files hook:
 * Range, ETag and date validators, and the headers that keep a served file
 * from running script in this origin) and /healthz. Runs on connection
 * threads; the hooks are set before serving and never change.
 */
#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "build_config.h"
#include "http/http_internal.h"
#include "util/mono.h"

/* An empty answer (304, 416) whose file descriptor is not needed. */
static int reply_empty(struct http_request *rq, unsigned status,
                       struct http_file *f)
{
	close(f->fd);
	f->fd = -1;
	return http_reply(rq, status, NULL, "", 0);
}

/* RFC 6266: an ASCII fallback plus the UTF-8 name, escaped. */
static void content_disposition(const struct http_file *f, char *out,
                                size_t outlen)
{
	char ascii[256];
	struct buf enc;
	size_t k = 0;

	for (const char *p = f->filename; *p && k + 1 < sizeof(ascii); p++) {
		unsigned char c = (unsigned char)*p;

		ascii[k++] =
		    (c >= 0x20 && c < 0x7f && c != '"' && c != '\\' && c != '%')
		        ? (char)c
		        : '_';
	}
	ascii[k] = '\0';
	buf_init(&enc, 2048);
	for (const unsigned char *p = (const unsigned char *)f->filename; *p;
	     p++) {
		int e = isalnum(*p) || strchr("-._~", *p)
		            ? buf_putc(&enc, (char)*p)
		            : buf_printf(&enc, "%%%02X", *p);
		if (e < 0)
			break;
	}
	snprintf(out, outlen, "%s; filename=\"%s\"; filename*=UTF-8''%s",
	         f->inline_ok ? "inline" : "attachment", ascii,
	         enc.data ? enc.data : "");
	buf_finish(&enc);
}

/* Whether the client's copy is current (ETag first, then the date). */
static bool not_modified(const struct http_request *rq,
                         const struct http_file *f, const char *lm)
{
	const char *h = http_request_header(rq, "If-None-Match");

	if (h)
		return strstr(h, f->etag) || strcmp(h, "*") == 0;
	h = http_request_header(rq, "If-Modified-Since");
	return h && strcmp(h, lm) == 0;
}

/* Sets the answer for f (whose descriptor it takes). */
static int reply_file(struct http_request *rq, struct http_file *f,
                      const char *lm)
{
	char hdr[1200];
	uint64_t first = 0, last = 0;
	unsigned status = MHD_HTTP_OK;
	struct MHD_Response *r;
	const char *h;
	int range;

	range = http_parse_range(http_request_header(rq, "Range"), f->size,
	                         &first, &last);
	h = http_request_header(rq, "If-Range");
	if (range != 0 && h && strcmp(h, f->etag) != 0 && strcmp(h, lm) != 0)
		range = 0; /* the client's copy is stale: send it all */
	if (range < 0) {
		if (reply_empty(rq, MHD_HTTP_RANGE_NOT_SATISFIABLE, f) < 0)
			return -1;
		snprintf(hdr, sizeof(hdr), "bytes */%llu",
		         (unsigned long long)f->size);
		return http_reply_header(rq, "Content-Range", hdr);
	}
	if (range == 0) {
		first = 0;
		last = f->size ? f->size - 1 : 0;
	} else {
		status = MHD_HTTP_PARTIAL_CONTENT;
	}
	if (f->size == 0) {
		close(f->fd);
		f->fd = -1;
		r = MHD_create_response_from_buffer(0, (void *)(uintptr_t) "",
		                                    MHD_RESPMEM_PERSISTENT);
	} else {
		/* libmicrohttpd closes the descriptor with the response. */
		r = MHD_create_response_from_fd_at_offset64(last - first + 1,
		                                            f->fd, first);
		if (!r)
			close(f->fd);
		f->fd = -1;
	}
	if (http_reply_take(rq, status, r) < 0)
		return -1;
	MHD_add_response_header(r, "Content-Type", f->content_type);
	MHD_add_response_header(r, "Accept-Ranges", "bytes");
	MHD_add_response_header(r, "Content-Security-Policy",
	                        "sandbox; default-src 'none'; img-src 'self'; "
	                        "style-src 'unsafe-inline'");
	MHD_add_response_header(r, "Cross-Origin-Resource-Policy",
	                        "cross-origin");
	if (status == MHD_HTTP_PARTIAL_CONTENT) {
		snprintf(hdr, sizeof(hdr), "bytes %llu-%llu/%llu",
		         (unsigned long long)first, (unsigned long long)last,
		         (unsigned long long)f->size);
		MHD_add_response_header(r, "Content-Range", hdr);
	}
	content_disposition(f, hdr, sizeof(hdr));
	MHD_add_response_header(r, "Content-Disposition", hdr);
	return 0;
}

void http_files_handle(void *data, struct http_request *rq)
{
	struct http_server *hs = rq->hs;
	struct http_file f;
	char err[256] = "";
	char lm[64];
	struct tm tm;
	int rc;

	(void)data;
	if (!hs->files) {
		(void)http_reply_error(rq, MHD_HTTP_NOT_FOUND,
		                       "file serving is not enabled");
		return;
	}
	memset(&f, 0, sizeof(f));
	f.fd = -1;
	rc = hs->files(hs->files_data, http_request_subpath(rq), &f, err,
	               sizeof(err));
	if (rc != 0) {
		(void)http_reply_error(rq, (unsigned)rc, "%s",
		                       err[0] ? err : "file not found");
		return;
	}
	gmtime_r(&f.mtime, &tm);
	strftime(lm, sizeof(lm), "%a, %d %b %Y %H:%M:%S GMT", &tm);
	if (not_modified(rq, &f, lm))
		rc = reply_empty(rq, MHD_HTTP_NOT_MODIFIED, &f);
	else
		rc = reply_file(rq, &f, lm);
	if (f.fd >= 0)
		close(f.fd);
	/* Validators and caching go with every answer about the file. */
	if (rc == 0 && rq->status != MHD_HTTP_RANGE_NOT_SATISFIABLE) {
		(void)http_reply_header(rq, "ETag", f.etag);
		(void)http_reply_header(rq, "Last-Modified", lm);
		(void)http_reply_header(rq, "Cache-Control",
		                        "private, max-age=60");
	}
}

void http_health_handle(void *data, struct http_request *rq)
{
	struct http_server *hs = rq->hs;
	cJSON *h = cJSON_CreateObject();
	struct mcp_stats st;
	bool ok = true;

	(void)data;
	if (!h)
		return;
	mcp_server_stats(hs->mcp, &st);
	cJSON_AddStringToObject(h, "version", MCPSD_VERSION);
	cJSON_AddNumberToObject(h, "uptime_s",
	                        (double)(mono_s() - hs->started));
	cJSON_AddNumberToObject(h, "sessions", st.sessions);
	cJSON_AddNumberToObject(h, "streams_open", st.streams_open);
	cJSON_AddNumberToObject(h, "calls_running", st.calls_running);
	cJSON_AddNumberToObject(h, "calls_finishing", st.calls_finishing);
	cJSON_AddNumberToObject(h, "calls_total", (double)st.calls_total);
	for (size_t i = 0; i < hs->n_health; i++)
		ok &= hs->health[i].fn(hs->health[i].data, h);
	cJSON_AddStringToObject(h, "status", ok ? "ok" : "degraded");
	(void)http_reply_json(rq, MHD_HTTP_OK, h);
	cJSON_Delete(h);
}
