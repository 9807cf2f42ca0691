/* SPDX-License-Identifier: MIT */
/*
 * File serving and the file tools: the media type allow-list, the /files/
 * hook on hostile workspaces (symlinks, FIFOs, sockets, devices,
 * directories), the real HTTP front on 127.0.0.1 with libcurl (Range,
 * ETag, headers, traversal attempts), and upload_file, list_files,
 * delete_file and resources/read called directly.
 */
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "config/config.h"
#include "fs/fstree.h"
#include "http/http.h"
#include "mcp/mcp.h"
#include "tap.h"
#include "tools/tools_files.h"
#include "util/b64.h"
#include "util/log.h"
#include "workspace/files.h"
#include "workspace/workspace.h"

static char root[300];
static char wsdir[600];
static char name[65];

static void test_mime(void)
{
	bool inl = true;

	ok(strcmp(files_mime_type("a/b.png", &inl), "image/png") == 0 && inl,
	   "png inline");
	ok(strcmp(files_mime_type("x.JPEG", &inl), "image/jpeg") == 0 && inl,
	   "JPEG by extension, any case");
	ok(strcmp(files_mime_type("r.csv", &inl), "text/csv; charset=utf-8") ==
	           0 &&
	       inl,
	   "csv is plain text");
	ok(strcmp(files_mime_type("p.html", &inl),
	          "text/html; charset=utf-8") == 0 &&
	       !inl,
	   "html is an attachment");
	ok(strcmp(files_mime_type("p.svg", &inl), "image/svg+xml") == 0 && !inl,
	   "svg is an attachment");
	ok(strcmp(files_mime_type("d.pdf", &inl), "application/pdf") == 0 &&
	       !inl,
	   "pdf is an attachment");
	ok(strcmp(files_mime_type("s.js", &inl), "text/javascript") == 0 &&
	       !inl,
	   "js is an attachment");
	ok(strcmp(files_mime_type("noext", &inl), "application/octet-stream") ==
	           0 &&
	       !inl,
	   "unknown: octet-stream attachment");
	ok(strcmp(files_mime_type("dir.png/file", &inl),
	          "application/octet-stream") == 0,
	   "extension of the last segment only");
	ok(strcmp(files_mime_base("r.csv"), "text/csv") == 0, "base type");
	ok(files_image_type("a.png", (const unsigned char *)"\x89PNG\r\n\x1a\n",
	                    8) != NULL &&
	       files_image_type("a.png", (const unsigned char *)"<svg>", 5) ==
	           NULL,
	   "image types need the magic number");
	{
		char t[FILES_ISO8601_LEN];

		files_iso8601(0, t);
		ok(strcmp(t, "1970-01-01T00:00:00Z") == 0, "ISO 8601");
	}
}

/* ---- the hook --------------------------------------------------------- */

__attribute__((format(printf, 5, 6))) static int hook(struct workspace_mgr *m,
                                                      struct http_file *f,
                                                      char *err, size_t errlen,
                                                      const char *fmt, ...)
{
	char path[2048];
	va_list ap;
	int r;

	va_start(ap, fmt);
	vsnprintf(path, sizeof(path), fmt, ap);
	va_end(ap);
	memset(f, 0, sizeof(*f));
	r = files_http_get(m, path, f, err, errlen);
	if (r == 0 && f->fd >= 0)
		close(f->fd);
	return r;
}

static void make_hostile(void)
{
	char p[900];
	int dfd = open(wsdir, O_RDONLY | O_DIRECTORY);

	ok(dfd >= 0, "workspace directory");
	ok(symlinkat("/etc/passwd", dfd, "passwd") == 0 &&
	       symlinkat("/etc", dfd, "etc") == 0 &&
	       symlinkat("/proc/self/environ", dfd, "environ") == 0 &&
	       mkfifoat(dfd, "fifo", 0644) == 0 &&
	       mknodat(dfd, "sock", S_IFSOCK | 0644, 0) == 0 &&
	       mknodat(dfd, "null", S_IFCHR | 0666, makedev(1, 3)) == 0 &&
	       mkdirat(dfd, "dir", 0755) == 0,
	   "hostile entries created");
	snprintf(p, sizeof(p), "%s/dir/inner.txt", wsdir);
	close(open(p, O_CREAT | O_WRONLY, 0644));
	close(dfd);
}

static void test_hook(struct workspace_mgr *m)
{
	struct http_file f;
	char err[512];
	int r;

	r = hook(m, &f, err, sizeof(err), "%s/hello.txt", name);
	ok(r == 0 && f.size == 6 && strcmp(f.filename, "hello.txt") == 0 &&
	       f.inline_ok &&
	       strcmp(f.content_type, "text/plain; charset=utf-8") == 0 &&
	       f.etag[0] == '"' && strlen(f.etag) == 34,
	   "regular file served: %s %s", f.content_type, f.etag);
	r = hook(m, &f, err, sizeof(err), "%s/page.html", name);
	ok(r == 0 && !f.inline_ok, "html is not inline");
	ok(hook(m, &f, err, sizeof(err), "%s/passwd", name) == 404,
	   "symlink to /etc/passwd: 404");
	ok(hook(m, &f, err, sizeof(err), "%s/etc/passwd", name) == 404,
	   "through a symlinked directory: 404");
	ok(hook(m, &f, err, sizeof(err), "%s/environ", name) == 404,
	   "symlink to /proc/self/environ: 404");
	{
		time_t t0 = time(NULL);

		ok(hook(m, &f, err, sizeof(err), "%s/fifo", name) == 404 &&
		       time(NULL) - t0 < 2,
		   "FIFO: 404 without blocking");
	}
	ok(hook(m, &f, err, sizeof(err), "%s/sock", name) == 404,
	   "socket: 404");
	ok(hook(m, &f, err, sizeof(err), "%s/null", name) == 404,
	   "device node: 404");
	ok(hook(m, &f, err, sizeof(err), "%s/dir", name) == 404,
	   "directory: 404");
	ok(hook(m, &f, err, sizeof(err), "%s/dir/inner.txt", name) == 0,
	   "file in a subdirectory");
	ok(hook(m, &f, err, sizeof(err), "%s/missing.txt", name) == 404 &&
	       strcmp(err, "file not found") == 0,
	   "missing file: 404 'file not found'");
	ok(hook(m, &f, err, sizeof(err), "%s/hello.txt",
	        "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcd"
	        "ef") == 404 &&
	       strcmp(err, "file not found") == 0,
	   "unknown workspace: the same 404");
	ok(hook(m, &f, err, sizeof(err), "%s/hello.txt", "ABCDEF") == 404,
	   "malformed workspace name: 404");
	ok(hook(m, &f, err, sizeof(err), "%s", name) == 404, "no path: 404");
	r = hook(m, &f, err, sizeof(err), "%s/%%2e%%2e/%%2e%%2e/etc/passwd",
	         name);
	ok(r == 400 && strstr(err, "'..'"), "encoded traversal: 400 %s", err);
	r = hook(m, &f, err, sizeof(err), "%s/..%%2f..%%2fetc%%2fpasswd", name);
	ok(r == 400, "encoded slash traversal: 400");
	r = hook(m, &f, err, sizeof(err), "%s/%%252e%%252e/x", name);
	ok(r == 404, "double-encoded dots decode once to a literal name: 404");
	r = hook(m, &f, err, sizeof(err), "%s/hello.txt%%00.png", name);
	ok(r == 400 && strstr(err, "NUL"), "NUL: 400 %s", err);
	r = hook(m, &f, err, sizeof(err), "%s/%%c0%%af", name);
	ok(r == 400, "overlong UTF-8: 400");
	r = hook(m, &f, err, sizeof(err), "%s/a%%e2%%88%%95b", name);
	ok(r == 400, "look-alike slash: 400");
	r = hook(m, &f, err, sizeof(err), "%s/a%%0d%%0aX-Evil:%%201", name);
	ok(r == 400 && !strpbrk(err, "\r\n"), "CR/LF: 400");
	r = hook(m, &f, err, sizeof(err), "%s/..\\..\\etc\\passwd", name);
	ok(r == 400, "backslashes: 400");
	{
		char longp[3000], path[3100];

		memset(longp, 'a', sizeof(longp) - 1);
		longp[sizeof(longp) - 1] = '\0';
		snprintf(path, sizeof(path), "%s/%s", name, longp);
		memset(&f, 0, sizeof(f));
		ok(files_http_get(m, path, &f, err, sizeof(err)) == 400,
		   "very long name: 400");
	}
}

/* ---- over HTTP ---------------------------------------------------------- */

struct resp {
	long status;
	char body[65536];
	size_t blen;
	char hdr[16384];
	size_t hlen;
};

static size_t on_body(char *p, size_t sz, size_t n, void *u)
{
	struct resp *r = u;
	size_t k = sz * n;

	if (r->blen + k < sizeof(r->body)) {
		memcpy(r->body + r->blen, p, k);
		r->blen += k;
		r->body[r->blen] = '\0';
	}
	return k;
}

static size_t on_header(char *p, size_t sz, size_t n, void *u)
{
	struct resp *r = u;
	size_t k = sz * n;

	if (r->hlen + k < sizeof(r->hdr)) {
		memcpy(r->hdr + r->hlen, p, k);
		r->hlen += k;
		r->hdr[r->hlen] = '\0';
	}
	return k;
}

static void get(unsigned port, const char *path, const char *header, bool head,
                struct resp *r)
{
	CURL *c = curl_easy_init();
	struct curl_slist *h = NULL;
	char url[4096];

	memset(r, 0, sizeof(*r));
	snprintf(url, sizeof(url), "http://127.0.0.1:%u%s", port, path);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_PATH_AS_IS, 1L);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, 5L);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, r);
	curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(c, CURLOPT_HEADERDATA, r);
	if (head)
		curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
	if (header) {
		h = curl_slist_append(h, header);
		curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
	}
	if (curl_easy_perform(c) == CURLE_OK)
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r->status);
	curl_slist_free_all(h);
	curl_easy_cleanup(c);
}

static bool has_header(const struct resp *r, const char *line)
{
	return strcasestr(r->hdr, line) != NULL;
}

static void test_http(const struct config *cfg, struct workspace_mgr *m)
{
	struct http_server *hs = NULL;
	struct mcp_server *mcp = mcp_server_create(cfg);
	char err[512], path[1024], etag[128] = "";
	struct resp r;
	unsigned port;
	const char *e;

	ok(mcp && http_server_create(cfg, mcp, &hs, err, sizeof(err)) == 0,
	   "HTTP server on 127.0.0.1 (%s)", err);
	if (!hs) {
		mcp_server_destroy(mcp);
		return;
	}
	http_server_set_files(hs, files_http_get, m);
	port = http_server_port(hs);

	snprintf(path, sizeof(path), "/files/%s/hello.txt", name);
	get(port, path, NULL, false, &r);
	ok(r.status == 200 && strcmp(r.body, "hello\n") == 0, "GET a file: %ld",
	   r.status);
	ok(has_header(&r, "Content-Type: text/plain; charset=utf-8") &&
	       has_header(&r, "Content-Disposition: inline") &&
	       has_header(&r, "X-Content-Type-Options: nosniff") &&
	       has_header(&r, "Content-Security-Policy: sandbox") &&
	       has_header(&r, "Referrer-Policy: no-referrer"),
	   "headers: type, inline, nosniff, CSP, referrer");
	e = strcasestr(r.hdr, "ETag: ");
	if (e)
		sscanf(e + 6, "%127[^\r\n]", etag);
	get(port, path, "Range: bytes=1-3", false, &r);
	ok(r.status == 206 && strcmp(r.body, "ell") == 0 &&
	       has_header(&r, "Content-Range: bytes 1-3/6"),
	   "Range: 206 'ell'");
	{
		char inm[200];

		snprintf(inm, sizeof(inm), "If-None-Match: %s", etag);
		get(port, path, inm, false, &r);
		ok(r.status == 304, "If-None-Match with the ETag: 304");
	}
	get(port, path, NULL, true, &r);
	ok(r.status == 200 && r.blen == 0 &&
	       has_header(&r, "Content-Length: 6"),
	   "HEAD");
	snprintf(path, sizeof(path), "/files/%s/page.html", name);
	get(port, path, NULL, false, &r);
	ok(r.status == 200 &&
	       has_header(&r, "Content-Disposition: attachment") &&
	       has_header(&r, "Content-Type: text/html"),
	   "HTML is an attachment");
	snprintf(path, sizeof(path), "/files/%s/passwd", name);
	get(port, path, NULL, false, &r);
	ok(r.status == 404 && !strstr(r.body, "root:"),
	   "symlink to /etc/passwd: 404");
	snprintf(path, sizeof(path), "/files/%s/fifo", name);
	get(port, path, NULL, false, &r);
	ok(r.status == 404, "FIFO: 404, no hang");
	snprintf(path, sizeof(path), "/files/%s/../../../etc/passwd", name);
	get(port, path, NULL, false, &r);
	ok(r.status == 400 || r.status == 404, "literal dot segments: %ld",
	   r.status);
	snprintf(path, sizeof(path), "/files/%s/%%2e%%2e/%%2e%%2e/etc/passwd",
	         name);
	get(port, path, NULL, false, &r);
	ok(r.status == 400 && !strstr(r.body, "root:"),
	   "encoded dot segments: %ld", r.status);
	snprintf(path, sizeof(path), "/files/%s/%%c0%%ae%%c0%%ae/x", name);
	get(port, path, NULL, false, &r);
	ok(r.status == 400, "overlong dots: %ld", r.status);
	snprintf(path, sizeof(path), "/files/%s/sp%%20ace.txt", name);
	get(port, path, NULL, false, &r);
	ok(r.status == 200 && strcmp(r.body, "space") == 0,
	   "encoded space: %ld", r.status);
	/* Exactly one decoding between the wire and the file name. */
	snprintf(path, sizeof(path), "/files/%s/lit%%2520.txt", name);
	get(port, path, NULL, false, &r);
	ok(r.status == 200 && strcmp(r.body, "literal") == 0,
	   "%%2520 is decoded once, to the literal name 'lit%%20.txt' (%ld "
	   "'%s')",
	   r.status, r.body);
	snprintf(path, sizeof(path), "/files/%s/hello.txt%%00.png", name);
	get(port, path, NULL, false, &r);
	ok(r.status == 400 || r.status == 404,
	   "%%00 in a name is refused, never cut short: %ld", r.status);
	snprintf(path, sizeof(path), "/files/%s/%%252e%%252e/hello.txt", name);
	get(port, path, NULL, false, &r);
	ok(r.status == 404 || r.status == 400,
	   "%%252e%%252e never climbs out: %ld", r.status);
	http_server_destroy(hs);
	mcp_server_destroy(mcp);
}

/* ---- the tools ---------------------------------------------------------- */

/* The first text of a result, on one line (TAP lines must not break). */
static const char *text_of(const cJSON *res)
{
	static char line[4][2048];
	static int next;
	const cJSON *c = cJSON_GetArrayItem(
	    cJSON_GetObjectItemCaseSensitive(res, "content"), 0);
	const cJSON *t = cJSON_GetObjectItemCaseSensitive(c, "text");
	char *out = line[next++ % 4];

	snprintf(out, sizeof(line[0]), "%s",
	         cJSON_IsString(t) ? t->valuestring : "");
	for (char *p = out; *p; p++)
		if (*p == '\n' || *p == '\r')
			*p = '|';
	return out;
}

static bool is_error(const cJSON *res)
{
	return cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(res, "isError"));
}

static cJSON *
call(cJSON *(*fn)(struct workspace_mgr *, const char *, const cJSON *),
     struct workspace_mgr *m, const char *tenant, const char *json)
{
	cJSON *args = cJSON_Parse(json);
	cJSON *res = fn(m, tenant, args);

	cJSON_Delete(args);
	return res;
}

static void test_base64(void)
{
	unsigned char out[64];
	char err[300];
	size_t n;

	ok(b64_decode("aGVsbG8=", 8, out, &n, err, sizeof(err)) == 0 &&
	       n == 5 && memcmp(out, "hello", 5) == 0,
	   "base64 with padding");
	ok(b64_decode("", 0, out, &n, err, sizeof(err)) == 0 && n == 0,
	   "empty base64");
	ok(b64_decode("aGVsbG8", 7, out, &n, err, sizeof(err)) == -EINVAL &&
	       strstr(err, "multiple of 4"),
	   "unpadded refused: %s", err);
	ok(b64_decode("aGVs\nbG8=", 9, out, &n, err, sizeof(err)) == -EINVAL,
	   "line break refused");
	ok(b64_decode("aGVsbG8-", 8, out, &n, err, sizeof(err)) == -EINVAL &&
	       strstr(err, "base64url"),
	   "base64url named: %s", err);
	ok(b64_decode("aG=sbG8=", 8, out, &n, err, sizeof(err)) == -EINVAL,
	   "inner padding refused");
	ok(b64_decode("aGVsbG9=", 8, out, &n, err, sizeof(err)) == -EINVAL &&
	       strstr(err, "stray bits"),
	   "non-canonical refused");
	ok(b64_decode("YQ==", 4, out, &n, err, sizeof(err)) == 0 && n == 1 &&
	       out[0] == 'a',
	   "two padding characters");
}

static void test_tools(struct workspace_mgr *m)
{
	cJSON *res, *sc, *contents = NULL;
	char err[512], json[512];
	const char *t;
	int r;

	res = call(tools_files_upload, m, "alice",
	           "{\"conversationId\":\"c9\",\"filename\":\"data/x.csv\","
	           "\"text\":\"a,b\\n1,2\\n\",\"unknownKey\":1}");
	sc = cJSON_GetObjectItemCaseSensitive(res, "structuredContent");
	ok(res && !is_error(res) && sc &&
	       cJSON_GetObjectItem(sc, "size")->valuedouble == 8 &&
	       strcmp(cJSON_GetObjectItem(sc, "sha256")->valuestring,
	              "492d5ea496056f1a6a6592241032fab764c321596317930b4fa0e1e8"
	              "bc3b7470") == 0 &&
	       strcmp(cJSON_GetObjectItem(sc, "mimeType")->valuestring,
	              "text/csv") == 0 &&
	       strstr(cJSON_GetObjectItem(sc, "url")->valuestring, "/files/") &&
	       strcmp(cJSON_GetObjectItem(sc, "uri")->valuestring,
	              "sandbox://c9/data/x.csv") == 0,
	   "upload_file text: %s", text_of(res));
	ok(cJSON_GetArraySize(cJSON_GetObjectItem(res, "content")) == 2,
	   "text and a resource_link");
	cJSON_Delete(res);
	res = call(tools_files_upload, m, "alice",
	           "{\"conversationId\":\"c9\",\"filename\":\"data/x.csv\","
	           "\"text\":\"again\"}");
	ok(is_error(res) && strstr(text_of(res), "overwrite"),
	   "no overwrite without asking: %s", text_of(res));
	cJSON_Delete(res);
	res = call(tools_files_upload, m, "alice",
	           "{\"conversationId\":\"c9\",\"filename\":\"data/x.csv\","
	           "\"content\":\"aGVsbG8=\",\"overwrite\":true}");
	ok(!is_error(res), "overwrite with base64");
	cJSON_Delete(res);
	res = call(tools_files_upload, m, "alice",
	           "{\"conversationId\":\"c9\",\"filename\":\"../etc/x\","
	           "\"text\":\"x\"}");
	ok(is_error(res) &&
	       strstr(text_of(res), "filename segment '..' is not allowed"),
	   "traversal refused: %s", text_of(res));
	cJSON_Delete(res);
	res = call(tools_files_upload, m, "alice",
	           "{\"conversationId\":\"c9\",\"filename\":\"a\\r\\nb\","
	           "\"text\":\"x\"}");
	ok(is_error(res) && strstr(text_of(res), "control character"),
	   "CR/LF name refused: %s", text_of(res));
	cJSON_Delete(res);
	res = call(tools_files_upload, m, "alice",
	           "{\"conversationId\":\"c9\",\"filename\":\"x\","
	           "\"text\":\"x\",\"content\":\"eA==\"}");
	ok(is_error(res) && strstr(text_of(res), "not both"),
	   "content and text refused");
	cJSON_Delete(res);
	res = call(tools_files_upload, m, "alice",
	           "{\"conversationId\":\"c9\",\"filename\":\"x\"}");
	ok(is_error(res) && strstr(text_of(res), "'content'"),
	   "no content refused");
	cJSON_Delete(res);
	res = call(tools_files_upload, m, "alice",
	           "{\"conversationId\":\"c9\",\"filename\":\"x\","
	           "\"content\":\"!!!!\"}");
	ok(is_error(res) && strstr(text_of(res), "not valid base64"),
	   "bad base64: %s", text_of(res));
	cJSON_Delete(res);
	/*
	 * Without conversationId an upload opens a new chat: the server mints
	 * an id, returns it and says to pass it on; list_files then finds the
	 * file under it, and list_files without an id says which to pass.
	 */
	res = call(tools_files_upload, m, "alice",
	           "{\"filename\":\"x\",\"text\":\"x\"}");
	sc = cJSON_GetObjectItemCaseSensitive(res, "structuredContent");
	{
		const char *id = cJSON_GetStringValue(
		    cJSON_GetObjectItemCaseSensitive(sc, "conversationId"));
		char want[128];

		ok(!is_error(res) && id && strlen(id) == 34 &&
		       strncmp(id, "c-", 2) == 0 &&
		       strspn(id + 2, "0123456789abcdef") == 32,
		   "no conversationId: one is minted: %s", text_of(res));
		snprintf(want, sizeof(want), "conversationId: %s (new: pass it",
		         id ? id : "?");
		ok(strncmp(text_of(res), want, strlen(want)) == 0,
		   "the text's first line gives it and says to pass it on");
		snprintf(json, sizeof(json), "{\"conversationId\":\"%s\"}",
		         id ? id : "");
		cJSON_Delete(res);
		res = call(tools_files_list, m, "alice", json);
		ok(!is_error(res) && strstr(text_of(res), "x"),
		   "list_files with the minted id finds the file: %s",
		   text_of(res));
	}
	cJSON_Delete(res);
	res = call(tools_files_upload, m, "alice",
	           "{\"filename\":\"x\",\"text\":\"x\"}");
	sc = cJSON_GetObjectItemCaseSensitive(res, "structuredContent");
	ok(!is_error(res) &&
	       cJSON_IsString(cJSON_GetObjectItem(sc, "conversationId")),
	   "another upload without an id: no clash with the first (%s)",
	   text_of(res));
	cJSON_Delete(res);
	res = call(tools_files_upload, m, "alice",
	           "{\"conversationId\":7,\"filename\":\"x\",\"text\":\"x\"}");
	ok(is_error(res) && strstr(text_of(res), "must be a string"),
	   "a conversationId that is not a string: %s", text_of(res));
	cJSON_Delete(res);
	res = call(tools_files_list, m, "alice", "{}");
	ok(is_error(res) &&
	       strstr(text_of(res), "conversationId is required") &&
	       strstr(text_of(res), "run_code"),
	   "list_files without an id says which to pass: %s", text_of(res));
	cJSON_Delete(res);
	res = call(tools_files_delete, m, "alice", "{\"filename\":\"x\"}");
	ok(is_error(res) && strstr(text_of(res), "conversationId is required"),
	   "delete_file without an id: %s", text_of(res));
	cJSON_Delete(res);
	res = call(tools_files_upload, m, "alice",
	           "{\"conversationId\":\"c9\",\"filename\":\"x\","
	           "\"text\":\"x\",\"overwrite\":\"yes\"}");
	ok(is_error(res) && strstr(text_of(res), "true or false"),
	   "overwrite must be boolean");
	cJSON_Delete(res);
	{
		/* Over UPLOAD_MAX_BYTES (64 KiB in this test). */
		size_t n = 100 * 1024;
		char *big = malloc(n + 200);

		snprintf(big, 200,
		         "{\"conversationId\":\"c9\",\"filename\":\"big\","
		         "\"content\":\"");
		size_t k = strlen(big);
		memset(big + k, 'A', n);
		snprintf(big + k + n, 200, "\"}");
		res = call(tools_files_upload, m, "alice", big);
		ok(is_error(res) && strstr(text_of(res), "upload limit"),
		   "size cap: %s", text_of(res));
		cJSON_Delete(res);
		free(big);
	}

	/* Tenants are separate. */
	res = call(tools_files_list, m, "bob", "{\"conversationId\":\"c9\"}");
	sc = cJSON_GetObjectItemCaseSensitive(res, "structuredContent");
	ok(!is_error(res) && cJSON_GetObjectItem(sc, "count")->valuedouble == 0,
	   "bob sees nothing of alice's c9: %s", text_of(res));
	cJSON_Delete(res);

	res = call(tools_files_list, m, "alice", "{\"conversationId\":\"c9\"}");
	sc = cJSON_GetObjectItemCaseSensitive(res, "structuredContent");
	t = text_of(res);
	ok(!is_error(res) &&
	       cJSON_GetObjectItem(sc, "count")->valuedouble == 1 &&
	       strstr(t, "data/x.csv") &&
	       cJSON_IsFalse(cJSON_GetObjectItem(sc, "truncated")),
	   "list_files: %s", t);
	{
		const cJSON *f =
		    cJSON_GetArrayItem(cJSON_GetObjectItem(sc, "files"), 0);

		ok(f && cJSON_GetObjectItem(f, "size")->valuedouble == 5 &&
		       strlen(
		           cJSON_GetObjectItem(f, "modified")->valuestring) ==
		           20,
		   "entry with size and ISO time");
	}
	cJSON_Delete(res);

	/* Resources. */
	r = tools_files_read_resource(m, "alice", "sandbox://c9/data/x.csv",
	                              &contents, err, sizeof(err));
	ok(r == 0 && strcmp(cJSON_GetObjectItem(cJSON_GetArrayItem(contents, 0),
	                                        "text")
	                        ->valuestring,
	                    "hello") == 0,
	   "resources/read text (%s)", err);
	cJSON_Delete(contents);
	r = tools_files_read_resource(m, "alice", "sandbox://c9/data%2Fx.csv",
	                              &contents, err, sizeof(err));
	ok(r == 0, "template expansion with %%2F works");
	cJSON_Delete(contents);
	r = tools_files_read_resource(m, "bob", "sandbox://c9/data/x.csv",
	                              &contents, err, sizeof(err));
	ok(r == -ENOENT && !contents, "another tenant: not found (%s)", err);
	r = tools_files_read_resource(m, "alice", "sandbox://c9/../x",
	                              &contents, err, sizeof(err));
	ok(r == -EINVAL && strstr(err, "'..'"), "traversal: %s", err);
	r = tools_files_read_resource(m, "alice", "test://other", &contents,
	                              err, sizeof(err));
	ok(r == -ENOENT, "other schemes are not ours");
	res = call(tools_files_upload, m, "alice",
	           "{\"conversationId\":\"c9\",\"filename\":\"b.bin\","
	           "\"content\":\"AAECAw==\"}");
	cJSON_Delete(res);
	r = tools_files_read_resource(m, "alice", "sandbox://c9/b.bin",
	                              &contents, err, sizeof(err));
	ok(r == 0 && strcmp(cJSON_GetObjectItem(cJSON_GetArrayItem(contents, 0),
	                                        "blob")
	                        ->valuestring,
	                    "AAECAw==") == 0,
	   "binary as blob");
	cJSON_Delete(contents);

	/* delete_file */
	res = call(tools_files_delete, m, "alice",
	           "{\"conversationId\":\"c9\",\"filename\":\"data\"}");
	ok(is_error(res) && strstr(text_of(res), "recursive"),
	   "non-empty directory needs recursive: %s", text_of(res));
	cJSON_Delete(res);
	res = call(tools_files_delete, m, "alice",
	           "{\"conversationId\":\"c9\",\"filename\":\"data/x.csv\"}");
	ok(!is_error(res), "delete a file: %s", text_of(res));
	cJSON_Delete(res);
	res = call(tools_files_delete, m, "alice",
	           "{\"conversationId\":\"c9\",\"filename\":\"data/x.csv\"}");
	ok(is_error(res) && strstr(text_of(res), "no file"),
	   "delete again: not found");
	cJSON_Delete(res);
	res = call(tools_files_delete, m, "alice",
	           "{\"conversationId\":\"c9\",\"filename\":\"data\"}");
	ok(!is_error(res), "delete an empty directory");
	cJSON_Delete(res);
	snprintf(json, sizeof(json),
	         "{\"conversationId\":\"c9\",\"filename\":\"..\"}");
	res = call(tools_files_delete, m, "alice", json);
	ok(is_error(res), "delete '..' refused");
	cJSON_Delete(res);
}

static void test_tools_hostile(struct workspace_mgr *m)
{
	cJSON *res, *sc;

	/* The shared workspace of tenant "t", conversation "files". */
	res = call(tools_files_list, m, "t", "{\"conversationId\":\"files\"}");
	sc = cJSON_GetObjectItemCaseSensitive(res, "structuredContent");
	ok(!is_error(res) &&
	       cJSON_GetArraySize(cJSON_GetObjectItem(sc, "skipped")) >= 5 &&
	       !strstr(text_of(res), "root:"),
	   "links, FIFOs, sockets, devices are skipped and reported: %s",
	   text_of(res));
	cJSON_Delete(res);
	res = call(tools_files_delete, m, "t",
	           "{\"conversationId\":\"files\",\"filename\":\"passwd\"}");
	ok(is_error(res) && strstr(text_of(res), "symlink") &&
	       access("/etc/passwd", F_OK) == 0,
	   "delete of a symlink refused: %s", text_of(res));
	cJSON_Delete(res);
	res = call(tools_files_upload, m, "t",
	           "{\"conversationId\":\"files\",\"filename\":\"etc/evil\","
	           "\"text\":\"x\"}");
	ok(is_error(res) && access("/etc/evil", F_OK) != 0,
	   "upload through a symlinked directory refused: %s", text_of(res));
	cJSON_Delete(res);
	res = call(tools_files_upload, m, "t",
	           "{\"conversationId\":\"files\",\"filename\":\"fifo\","
	           "\"text\":\"x\",\"overwrite\":true}");
	ok(is_error(res) && strstr(text_of(res), "not a regular file"),
	   "upload over a FIFO refused: %s", text_of(res));
	cJSON_Delete(res);
}

/* A port that was free a moment ago. */
static unsigned free_port(void)
{
	struct sockaddr_in a = {.sin_family = AF_INET};
	socklen_t len = sizeof(a);
	int s = socket(AF_INET, SOCK_STREAM, 0);
	unsigned port = 0;

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (s >= 0 && bind(s, (struct sockaddr *)&a, sizeof(a)) == 0 &&
	    getsockname(s, (struct sockaddr *)&a, &len) == 0)
		port = ntohs(a.sin_port);
	if (s >= 0)
		close(s);
	return port;
}

/*
 * workspace_fork: files and the saved state copied into an empty
 * workspace, links skipped, a workspace with files refused; and the saved
 * state never read, listed or served by the file functions.
 */
static void test_fork_and_private(struct workspace_mgr *m)
{
	struct workspace *src = NULL, *dst = NULL;
	struct workspace_fork_stats st;
	char err[512], dir[PATH_MAX], *data = NULL;
	size_t len = 0;

	ok(files_is_private(".mcp/state") &&
	       files_is_private(".mcp/state/python/run-1.state") &&
	       !files_is_private(".mcp/stateful.txt") &&
	       !files_is_private(".mcp/packages/x") &&
	       !files_is_private("data/.mcp/state"),
	   "files_is_private: .mcp/state and below only");
	if (workspace_open(m, "t", "fork-src", true, &src, err, sizeof(err)) <
	        0 ||
	    workspace_open(m, "t", "fork-dst", true, &dst, err, sizeof(err)) <
	        0) {
		ok(false, "workspaces: %s", err);
		goto out;
	}
	ok(workspace_write_file(src, "a/b.txt", "bee", 3, false, err,
	                        sizeof(err)) == 0 &&
	       workspace_write_file(src, ".mcp/state/python/run-1.state",
	                            "state", 5, false, err, sizeof(err)) == 0,
	   "source files (%s)", err);
	snprintf(dir, sizeof(dir), "%s/workspaces/%s/link", root,
	         workspace_name(src));
	ok(symlink("/etc/passwd", dir) == 0, "a link in the source");
	snprintf(dir, sizeof(dir), "%s/workspaces/%s/emptydir", root,
	         workspace_name(src));
	ok(mkdir(dir, 0755) == 0, "an empty directory in the source");
	err[0] = '\0';
	is_int(workspace_fork(dst, src, &st, err, sizeof(err)), 0, "fork");
	is_int(st.files, 2, "two files copied");
	is_int(st.skipped, 1, "the link skipped");
	ok(files_read(workspace_dirfd(dst), "a/b.txt", 100, &data, &len,
	              NULL) == 0 &&
	       len == 3 && memcmp(data, "bee", 3) == 0,
	   "a file copied");
	free(data);
	data = NULL;
	is_int(files_read(workspace_dirfd(dst), ".mcp/state/python/run-1.state",
	                  100, &data, &len, NULL),
	       -ENOENT, "files_read never reads the saved state");
	ok(files_read_any(workspace_dirfd(dst), ".mcp/state/python/run-1.state",
	                  100, &data, &len, NULL) == 0 &&
	       len == 5,
	   "but the state was copied");
	free(data);
	snprintf(dir, sizeof(dir), "%s/workspaces/%s/link", root,
	         workspace_name(dst));
	ok(access(dir, F_OK) != 0, "no link in the copy");
	snprintf(dir, sizeof(dir), "%s/workspaces/%s/emptydir", root,
	         workspace_name(dst));
	ok(access(dir, F_OK) == 0, "the empty directory copied");
	is_int(workspace_fork(dst, src, &st, err, sizeof(err)), -ENOTEMPTY,
	       "a workspace with files is never a fork's target");
	ok(strstr(err, "has files already") != NULL, "said so: %s", err);
out:
	workspace_close(src);
	workspace_close(dst);
}

int main(void)
{
	char tmpl[] = "/tmp/mcpsd-files-XXXXXX";
	char err[1024], cmd[600];
	struct config cfg;
	struct workspace_mgr *m = NULL;
	struct workspace *ws = NULL;

	if (geteuid() != 0) {
		printf("1..0 # SKIP needs root (chown, mknod)\n");
		return 0;
	}
	test_mime();
	test_base64();
	if (!mkdtemp(tmpl))
		return 1;
	snprintf(root, sizeof(root), "%s/root", tmpl);
	setenv("MCP_AUTH", "none", 1);
	snprintf(cmd, sizeof(cmd), "127.0.0.1:%u", free_port());
	setenv("MCP_HTTP_ADDR", cmd, 1);
	setenv("SANDBOX_ROOT", root, 1);
	setenv("WORKSPACE_QUOTA_MODE", "none", 1);
	setenv("UPLOAD_MAX_BYTES", "64k", 1);
	setenv("MCP_LOG_LEVEL", "warn", 1);
	unsetenv("FILE_SECRET");
	unsetenv("MCP_API_TOKEN");
	if (config_load(&cfg, NULL, err, sizeof(err)) < 0) {
		ok(false, "config: %s", err);
		return tap_done();
	}
	log_set_level(LOG_LEVEL_WARN);
	curl_global_init(CURL_GLOBAL_DEFAULT);
	ok(workspace_mgr_create(&cfg, &m, err, sizeof(err)) == 0, "manager");
	ok(workspace_open(m, "t", "files", true, &ws, err, sizeof(err)) == 0 &&
	       workspace_write_file(ws, "hello.txt", "hello\n", 6, false, err,
	                            sizeof(err)) == 0 &&
	       workspace_write_file(ws, "page.html", "<script>1</script>", 18,
	                            false, err, sizeof(err)) == 0 &&
	       workspace_write_file(ws, "sp ace.txt", "space", 5, false, err,
	                            sizeof(err)) == 0 &&
	       workspace_write_file(ws, "lit%20.txt", "literal", 7, false, err,
	                            sizeof(err)) == 0 &&
	       workspace_write_file(ws, "lit .txt", "decoded twice", 13, false,
	                            err, sizeof(err)) == 0,
	   "workspace with files (%s)", err);
	snprintf(name, sizeof(name), "%s", workspace_name(ws));
	snprintf(wsdir, sizeof(wsdir), "%s/workspaces/%s", root, name);
	workspace_close(ws);
	make_hostile();
	test_hook(m);
	test_http(&cfg, m);
	test_tools(m);
	test_tools_hostile(m);
	test_fork_and_private(m);
	workspace_mgr_destroy(m);
	config_finish(&cfg);
	curl_global_cleanup();
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpl);
	if (system(cmd) != 0)
		return 1;
	return tap_done();
}
