/* SPDX-License-Identifier: MIT */
/*
 * docker: Engine API client over libcurl and the engine's unix socket.
 * Each call borrows an easy handle from a small pool (handles keep their
 * connection cache, so consecutive calls reuse a connection) and returns it
 * afterwards; the pool, the negotiated version and the health record are
 * guarded by one mutex that is never held during I/O. Attach streams
 * (docker_attach.c) use their own handle in CONNECT_ONLY mode and are
 * driven by the caller; docker_internal.h is what the two files share.
 */
#include "backend/docker/docker.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>
#include <time.h>

#include <curl/curl.h>

#include "backend/docker/docker_internal.h"
#include "util/buf.h"
#include "util/log.h"
#include "util/num.h"

#define DOCKER_RESP_MAX (16u * 1024 * 1024)

/* One request and its answer. */
struct docker_req {
	const char *method;
	const char *path; /* after the version prefix */
	bool versioned;
	const char *body; /* JSON or NULL */
	unsigned timeout_ms;
	bool slow_ok; /* a timeout is the caller's business, not ill health */
	long status;
	struct buf resp;
	bool overflow;
};

static pthread_once_t docker_once = PTHREAD_ONCE_INIT;
static CURLcode docker_global_rc;

static void docker_global_init(void)
{
	docker_global_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

int docker_create(const char *host, unsigned timeout_s, struct docker **out,
                  char *err, size_t errlen)
{
	struct docker *d = NULL;
	const char *path;
	int r;

	*out = NULL;
	pthread_once(&docker_once, docker_global_init);
	if (docker_global_rc != CURLE_OK) {
		snprintf(err, errlen, "libcurl initialization failed: %s",
		         curl_easy_strerror(docker_global_rc));
		return -ENOMEM;
	}
	if (!host || strncmp(host, "unix://", 7) != 0 || host[7] != '/') {
		snprintf(err, errlen,
		         "DOCKER_HOST='%s' is not supported; use a unix "
		         "socket, e.g. unix:///var/run/docker.sock",
		         host ? host : "");
		return -EINVAL;
	}
	path = host + 7;
	if (strlen(path) >= sizeof(((struct sockaddr_un *)0)->sun_path)) {
		snprintf(err, errlen, "DOCKER_HOST: socket path too long");
		return -EINVAL;
	}
	d = calloc(1, sizeof(*d));
	if (!d) {
		r = -ENOMEM;
		goto out;
	}
	d->host = strdup(host);
	d->sock_path = strdup(path);
	if (!d->host || !d->sock_path) {
		r = -ENOMEM;
		goto out;
	}
	d->timeout_ms = (timeout_s ? timeout_s : 30) * 1000u;
	pthread_mutex_init(&d->lock, NULL);
	*out = d;
	return 0;
out:
	snprintf(err, errlen, "out of memory");
	if (d) {
		free(d->host);
		free(d->sock_path);
		free(d);
	}
	return r;
}

void docker_destroy(struct docker *d)
{
	if (!d)
		return;
	for (size_t i = 0; i < d->n_pool; i++)
		curl_easy_cleanup(d->pool[i]);
	pthread_mutex_destroy(&d->lock);
	free(d->host);
	free(d->sock_path);
	free(d);
}

const char *docker_host(const struct docker *d)
{
	return d->host;
}

void docker_health(struct docker *d, struct docker_health *out)
{
	pthread_mutex_lock(&d->lock);
	*out = d->health;
	pthread_mutex_unlock(&d->lock);
}

/* Records the outcome of a call that reached the engine. */
void docker_mark_ok(struct docker *d)
{
	bool was;

	pthread_mutex_lock(&d->lock);
	was = d->health.reachable || d->health.last_check == 0;
	d->health.reachable = true;
	d->health.last_error[0] = '\0';
	d->health.last_check = d->health.last_ok = time(NULL);
	pthread_mutex_unlock(&d->lock);
	if (!was)
		log_info("Docker engine at %s is reachable again", d->host);
}

/* Records a failure to reach the engine; forgets the negotiated version. */
void docker_mark_down(struct docker *d, const char *msg)
{
	bool was;

	pthread_mutex_lock(&d->lock);
	was = d->health.reachable || d->health.last_check == 0;
	d->health.reachable = false;
	d->health.api_version[0] = '\0';
	snprintf(d->health.last_error, sizeof(d->health.last_error), "%s", msg);
	d->health.last_check = time(NULL);
	pthread_mutex_unlock(&d->lock);
	if (was)
		log_warnx("%s", msg);
}

static CURL *docker_handle_get(struct docker *d)
{
	CURL *h = NULL;

	pthread_mutex_lock(&d->lock);
	if (d->n_pool > 0)
		h = d->pool[--d->n_pool];
	pthread_mutex_unlock(&d->lock);
	if (h)
		curl_easy_reset(h);
	else
		h = curl_easy_init();
	return h;
}

static void docker_handle_put(struct docker *d, CURL *h)
{
	pthread_mutex_lock(&d->lock);
	if (d->n_pool < DOCKER_POOL_MAX) {
		d->pool[d->n_pool++] = h;
		h = NULL;
	}
	pthread_mutex_unlock(&d->lock);
	if (h)
		curl_easy_cleanup(h);
}

static size_t docker_write_cb(char *p, size_t size, size_t nmemb, void *arg)
{
	struct docker_req *rq = arg;
	size_t n = size * nmemb;

	if (buf_append(&rq->resp, p, n) < 0) {
		rq->overflow = true;
		return 0;
	}
	return n;
}

/* "1.41" -> 1041; -1 when malformed. */
static long docker_version_num(const char *s)
{
	uint64_t major, minor;

	s = num_scan_u64(s, 99, &major);
	if (!s || *s != '.' || num_u64(s + 1, 999, &minor) < 0)
		return -1;
	return (long)(major * 1000 + minor);
}

/* What an errno from connect() means for a person running the daemon. */
const char *docker_connect_hint(long oserr)
{
	switch (oserr) {
	case ECONNREFUSED:
		return "connection refused; is dockerd running?";
	case ENOENT:
		return "no such socket; is dockerd running and DOCKER_HOST "
		       "right?";
	case EACCES:
	case EPERM:
		return "permission denied; run the daemon as root or as a "
		       "member of the docker group";
	case EAGAIN:
		return "the engine's listen queue is full; it is overloaded";
	default:
		return NULL;
	}
}

static int docker_negotiate(struct docker *d, char *err, size_t errlen);

/* The negotiated API version ("1.41"), negotiating first if none yet. */
int docker_api_version(struct docker *d, char *ver, size_t n, char *err,
                       size_t errlen)
{
	int r;

	for (int pass = 0; pass < 2; pass++) {
		pthread_mutex_lock(&d->lock);
		snprintf(ver, n, "%s", d->health.api_version);
		pthread_mutex_unlock(&d->lock);
		if (ver[0] || pass)
			return 0;
		r = docker_negotiate(d, err, errlen);
		if (r < 0)
			return r;
	}
	return 0;
}

/*
 * Sets h up for rq on url: the socket, timeouts (tmo), the error buffer
 * cerr, the write callback, headers and method. Returns the header list
 * (the caller frees it after the transfer), NULL when out of memory.
 */
static struct curl_slist *docker_call_setup(struct docker *d,
                                            struct docker_req *rq, CURL *h,
                                            const char *url, unsigned tmo,
                                            char *cerr)
{
	struct curl_slist *hdrs = NULL;

	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_UNIX_SOCKET_PATH, d->sock_path);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)tmo);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS,
	                 (long)(tmo < DOCKER_CONNECT_TIMEOUT_MS
	                            ? tmo
	                            : DOCKER_CONNECT_TIMEOUT_MS));
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, cerr);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, docker_write_cb);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, rq);
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http");
	hdrs = curl_slist_append(hdrs, "Expect:");
	if (rq->body)
		hdrs =
		    curl_slist_append(hdrs, "Content-Type: application/json");
	if (!hdrs)
		return NULL;
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
	if (strcmp(rq->method, "POST") == 0) {
		curl_easy_setopt(h, CURLOPT_POST, 1L);
		curl_easy_setopt(h, CURLOPT_POSTFIELDS,
		                 rq->body ? rq->body : "");
		curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE,
		                 (long)(rq->body ? strlen(rq->body) : 0));
	} else if (strcmp(rq->method, "GET") != 0) {
		curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, rq->method);
	}
	return hdrs;
}

/*
 * A transfer that failed (rc is not CURLE_OK): says why in err and marks
 * the engine down, unless it is a timeout the caller expects (slow_ok) or
 * an answer too large. Returns the negative errno for the caller.
 */
static int docker_call_failed(struct docker *d, const struct docker_req *rq,
                              CURLcode rc, long oserr, const char *cerr,
                              unsigned tmo, char *err, size_t errlen)
{
	if (rc == CURLE_WRITE_ERROR && rq->overflow) {
		snprintf(err, errlen,
		         "Docker engine answer to %s %s is larger than %u "
		         "bytes",
		         rq->method, rq->path, DOCKER_RESP_MAX);
		return -EPROTO;
	}
	if (rc == CURLE_COULDNT_CONNECT || rc == CURLE_COULDNT_RESOLVE_HOST ||
	    (rc == CURLE_OPERATION_TIMEDOUT && rq->status == 0 && oserr != 0)) {
		const char *hint = docker_connect_hint(oserr);

		snprintf(
		    err, errlen, "Docker engine not reachable at %s: %s",
		    d->host,
		    hint ? hint
		         : (oserr ? strerror((int)oserr)
		                  : (cerr[0] ? cerr : curl_easy_strerror(rc))));
		docker_mark_down(d, err);
		return -ECONNREFUSED;
	}
	if (rc == CURLE_RECV_ERROR || rc == CURLE_SEND_ERROR ||
	    rc == CURLE_GOT_NOTHING || rc == CURLE_PARTIAL_FILE) {
		/* The engine closed or reset the connection mid-request: it
		 * went away (stopped, restarted, its socket proxy died). */
		snprintf(err, errlen,
		         "Docker engine not reachable at %s: the connection "
		         "broke during %s %s (%s)",
		         d->host, rq->method, rq->path,
		         oserr ? strerror((int)oserr)
		               : (cerr[0] ? cerr : curl_easy_strerror(rc)));
		docker_mark_down(d, err);
		return -ECONNREFUSED;
	}
	if (rc == CURLE_OPERATION_TIMEDOUT) {
		snprintf(err, errlen,
		         "Docker engine at %s did not answer %s %s within "
		         "%u ms; is it overloaded or hung?",
		         d->host, rq->method, rq->path, tmo);
		if (!rq->slow_ok)
			docker_mark_down(d, err);
		return -ETIMEDOUT;
	}
	snprintf(err, errlen, "Docker engine at %s failed during %s %s: %s",
	         d->host, rq->method, rq->path,
	         cerr[0] ? cerr : curl_easy_strerror(rc));
	docker_mark_down(d, err);
	return -ECONNREFUSED;
}

/* An answer outside 2xx: the engine's message in err, status as errno. */
static int docker_call_refused(const struct docker_req *rq, char *err,
                               size_t errlen)
{
	cJSON *j = cJSON_ParseWithLength(rq->resp.data ? rq->resp.data : "",
	                                 rq->resp.len);
	const char *msg = cJSON_GetStringValue(
	    cJSON_GetObjectItemCaseSensitive(j, "message"));
	int r;

	snprintf(err, errlen, "Docker engine refused %s %s: %s (HTTP %ld)",
	         rq->method, rq->path, msg ? msg : "no message", rq->status);
	switch (rq->status) {
	case 400:
		r = -EINVAL;
		break;
	case 404:
		r = -ENOENT;
		break;
	case 409:
		r = -EBUSY;
		break;
	default:
		r = -EIO;
		break;
	}
	cJSON_Delete(j);
	return r;
}

static int docker_call(struct docker *d, struct docker_req *rq, char *err,
                       size_t errlen)
{
	char url[1024], ver[16], cerr[CURL_ERROR_SIZE] = "";
	struct curl_slist *hdrs;
	long oserr = 0;
	double sent_s = 0;
	unsigned tmo;
	CURLcode rc;
	CURL *h;
	int r, n;

	rq->status = 0;
	rq->overflow = false;
	buf_init(&rq->resp, DOCKER_RESP_MAX);
	ver[0] = '\0';
	if (rq->versioned) {
		r = docker_api_version(d, ver, sizeof(ver), err, errlen);
		if (r < 0)
			return r;
	}
	n = snprintf(url, sizeof(url), "http://docker%s%s%s",
	             ver[0] ? "/v" : "", ver, rq->path);
	if (n < 0 || (size_t)n >= sizeof(url)) {
		snprintf(err, errlen, "Docker request path too long");
		return -EINVAL;
	}
	h = docker_handle_get(d);
	if (!h) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	tmo = rq->timeout_ms ? rq->timeout_ms : d->timeout_ms;
	hdrs = docker_call_setup(d, rq, h, url, tmo, cerr);
	if (!hdrs) {
		docker_handle_put(d, h);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}

	rc = curl_easy_perform(h);
	curl_easy_getinfo(h, CURLINFO_OS_ERRNO, &oserr);
	/*
	 * libcurl before 8.8 keeps a pooled handle's last OS error, so a
	 * timeout after the request went out (on a new or a reused
	 * connection) is a hang, not a refusal.
	 */
	curl_easy_getinfo(h, CURLINFO_PRETRANSFER_TIME, &sent_s);
	if (rc == CURLE_OPERATION_TIMEDOUT && sent_s > 0)
		oserr = 0;
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &rq->status);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, NULL);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, NULL);
	curl_slist_free_all(hdrs);
	docker_handle_put(d, h);

	if (rc != CURLE_OK) {
		r = docker_call_failed(d, rq, rc, oserr, cerr, tmo, err,
		                       errlen);
		goto out;
	}
	docker_mark_ok(d);
	if (rq->status >= 200 && rq->status < 300)
		return 0;
	r = docker_call_refused(rq, err, errlen);
out:
	buf_finish(&rq->resp);
	return r;
}

/* Parses the answer body as JSON; -EPROTO with a message when it is not. */
static int docker_parse(struct docker_req *rq, cJSON **out, char *err,
                        size_t errlen)
{
	*out = cJSON_ParseWithLength(rq->resp.data ? rq->resp.data : "",
	                             rq->resp.len);
	if (!*out) {
		snprintf(err, errlen,
		         "Docker engine sent invalid JSON for %s %s",
		         rq->method, rq->path);
		return -EPROTO;
	}
	return 0;
}

int docker_request(struct docker *d, const char *method, const char *path,
                   const char *body, unsigned timeout_ms, cJSON **out,
                   char *err, size_t errlen)
{
	struct docker_req rq = {.method = method,
	                        .path = path,
	                        .versioned = true,
	                        .body = body,
	                        .timeout_ms = timeout_ms};
	int r;

	if (out)
		*out = NULL;
	if (path[0] != '/' || strpbrk(path, " \r\n")) {
		snprintf(err, errlen, "invalid Docker request path");
		return -EINVAL;
	}
	r = docker_call(d, &rq, err, errlen);
	if (r == 0 && out && rq.resp.len > 0)
		r = docker_parse(&rq, out, err, errlen);
	buf_finish(&rq.resp);
	return r;
}

static int docker_negotiate(struct docker *d, char *err, size_t errlen)
{
	struct docker_req rq = {.method = "GET", .path = "/version"};
	const char *sv, *api, *minapi;
	char use[16];
	long n, nmin, nmax, nsmin;
	cJSON *j = NULL;
	int r;

	r = docker_call(d, &rq, err, errlen);
	if (r < 0)
		return r;
	r = docker_parse(&rq, &j, err, errlen);
	if (r < 0)
		goto out;
	sv = cJSON_GetStringValue(
	    cJSON_GetObjectItemCaseSensitive(j, "Version"));
	api = cJSON_GetStringValue(
	    cJSON_GetObjectItemCaseSensitive(j, "ApiVersion"));
	minapi = cJSON_GetStringValue(
	    cJSON_GetObjectItemCaseSensitive(j, "MinAPIVersion"));
	n = docker_version_num(api);
	nmin = docker_version_num(DOCKER_API_MIN);
	nmax = docker_version_num(DOCKER_API_MAX);
	nsmin = docker_version_num(minapi);
	if (n < 0) {
		snprintf(err, errlen,
		         "Docker engine at %s did not say its API version",
		         d->host);
		r = -EPROTO;
		goto out;
	}
	if (n < nmin) {
		snprintf(err, errlen,
		         "Docker engine at %s speaks API %s, older than %s "
		         "(Docker 20.10); upgrade the engine",
		         d->host, api, DOCKER_API_MIN);
		r = -ENOTSUP;
		pthread_mutex_lock(&d->lock);
		snprintf(d->health.last_error, sizeof(d->health.last_error),
		         "%s", err);
		pthread_mutex_unlock(&d->lock);
		goto out;
	}
	if (n > nmax)
		n = nmax;
	if (nsmin > n)
		n = nsmin;
	snprintf(use, sizeof(use), "%u.%u", (unsigned)(n / 1000) % 100u,
	         (unsigned)(n % 1000));
	pthread_mutex_lock(&d->lock);
	if (strcmp(d->health.api_version, use) != 0)
		log_info("Docker engine %s at %s, using API %s",
		         sv ? sv : "(unknown version)", d->host, use);
	snprintf(d->health.api_version, sizeof(d->health.api_version), "%s",
	         use);
	snprintf(d->health.server_version, sizeof(d->health.server_version),
	         "%s", sv ? sv : "");
	pthread_mutex_unlock(&d->lock);
	r = 0;
out:
	cJSON_Delete(j);
	buf_finish(&rq.resp);
	return r;
}

int docker_ping(struct docker *d, char *err, size_t errlen)
{
	return docker_negotiate(d, err, errlen);
}

/* Container ids and names: [A-Za-z0-9_.-], 1-128 characters. */
bool docker_id_ok(const char *id)
{
	size_t n = 0;

	if (!id)
		return false;
	for (; id[n]; n++) {
		char c = id[n];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || c == '_' || c == '.' ||
		      c == '-'))
			return false;
	}
	return n > 0 && n <= 128;
}

/* Image references: ids, tags and digests, no URL-special characters. */
static bool docker_ref_ok(const char *ref)
{
	size_t n = 0;

	if (!ref)
		return false;
	for (; ref[n]; n++) {
		char c = ref[n];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || strchr("_.-:/@", c)))
			return false;
	}
	return n > 0 && n <= 512;
}

int docker_bad_id(const char *what, char *err, size_t errlen)
{
	snprintf(err, errlen, "invalid Docker %s", what);
	return -EINVAL;
}

/* Appends "filters=<escaped {"label":[label]}>" to path. */
static int docker_label_filter(char *path, size_t len, const char *base,
                               const char *label)
{
	cJSON *f = NULL, *arr;
	char *txt = NULL, *esc = NULL;
	int r = -ENOMEM, n;

	if (!label) {
		n = snprintf(path, len, "%s", base);
		return n < 0 || (size_t)n >= len ? -EINVAL : 0;
	}
	f = cJSON_CreateObject();
	arr = cJSON_AddArrayToObject(f, "label");
	if (!arr || !cJSON_AddItemToArray(arr, cJSON_CreateString(label)))
		goto out;
	txt = cJSON_PrintUnformatted(f);
	if (!txt)
		goto out;
	esc = curl_easy_escape(NULL, txt, 0);
	if (!esc)
		goto out;
	n = snprintf(path, len, "%s%sfilters=%s", base,
	             strchr(base, '?') ? "&" : "?", esc);
	r = n < 0 || (size_t)n >= len ? -EINVAL : 0;
out:
	curl_free(esc);
	cJSON_free(txt);
	cJSON_Delete(f);
	return r;
}

static int docker_get_json(struct docker *d, const char *path, cJSON **out,
                           char *err, size_t errlen)
{
	struct docker_req rq = {
	    .method = "GET", .path = path, .versioned = true};
	int r;

	r = docker_call(d, &rq, err, errlen);
	if (r < 0)
		return r;
	r = docker_parse(&rq, out, err, errlen);
	buf_finish(&rq.resp);
	return r;
}

int docker_engine_info(struct docker *d, cJSON **out, char *err, size_t errlen)
{
	int r;

	*out = NULL;
	r = docker_get_json(d, "/info", out, err, errlen);
	if (r == 0 && !cJSON_IsObject(*out)) {
		cJSON_Delete(*out);
		*out = NULL;
		snprintf(err, errlen, "Docker engine sent no object for /info");
		r = -EPROTO;
	}
	return r;
}

/* GET a list endpoint filtered by label; the answer must be an array. */
static int docker_list(struct docker *d, const char *base, const char *label,
                       const char *what, cJSON **out, char *err, size_t errlen)
{
	char path[1024];
	int r;

	*out = NULL;
	r = docker_label_filter(path, sizeof(path), base, label);
	if (r < 0) {
		snprintf(err, errlen, "invalid label filter");
		return r;
	}
	r = docker_get_json(d, path, out, err, errlen);
	if (r == 0 && !cJSON_IsArray(*out)) {
		snprintf(err, errlen, "Docker engine sent no %s list", what);
		cJSON_Delete(*out);
		*out = NULL;
		r = -EPROTO;
	}
	return r;
}

int docker_images_list(struct docker *d, const char *label, cJSON **out,
                       char *err, size_t errlen)
{
	return docker_list(d, "/images/json", label, "image", out, err, errlen);
}

int docker_networks_list(struct docker *d, const char *label, cJSON **out,
                         char *err, size_t errlen)
{
	return docker_list(d, "/networks", label, "network", out, err, errlen);
}

int docker_containers_list(struct docker *d, const char *label, cJSON **out,
                           char *err, size_t errlen)
{
	return docker_list(d, "/containers/json?all=1", label, "container", out,
	                   err, errlen);
}

/* ---- create body -------------------------------------------------------- */

static bool docker_add_kv(cJSON *parent, const char *name,
                          const struct docker_kv *kv, size_t n)
{
	cJSON *o = cJSON_AddObjectToObject(parent, name);

	if (!o)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!cJSON_AddStringToObject(o, kv[i].key, kv[i].value))
			return false;
	return true;
}

static bool docker_add_str(cJSON *o, const char *name, const char *v)
{
	return !v || cJSON_AddStringToObject(o, name, v);
}

static bool docker_add_num(cJSON *o, const char *name, long long v)
{
	return v == 0 || cJSON_AddNumberToObject(o, name, (double)v);
}

static bool docker_add_host(cJSON *hc, const struct docker_create_opts *o)
{
	cJSON *a, *x;

	if (!docker_add_num(hc, "Memory", o->memory_bytes) ||
	    !docker_add_num(hc, "MemorySwap", o->memory_swap_bytes) ||
	    !docker_add_num(hc, "NanoCpus", o->nano_cpus) ||
	    !docker_add_num(hc, "PidsLimit", o->pids_limit) ||
	    !docker_add_num(hc, "ShmSize", o->shm_size_bytes) ||
	    !docker_add_num(hc, "OomScoreAdj", o->oom_score_adj) ||
	    !cJSON_AddBoolToObject(hc, "OomKillDisable", 0) ||
	    !docker_add_str(hc, "NetworkMode", o->network_mode) ||
	    !cJSON_AddBoolToObject(hc, "ReadonlyRootfs", o->readonly_rootfs) ||
	    !cJSON_AddBoolToObject(hc, "Init", o->init) ||
	    !docker_add_str(hc, "IpcMode", o->ipc_mode) ||
	    !cJSON_AddBoolToObject(hc, "Privileged", 0) ||
	    !cJSON_AddBoolToObject(hc, "PublishAllPorts", 0) ||
	    !cJSON_AddBoolToObject(hc, "AutoRemove", 0))
		return false;
	if (o->runtime && o->runtime[0] &&
	    !cJSON_AddStringToObject(hc, "Runtime", o->runtime))
		return false;
	if (!docker_add_str(hc, "CgroupParent", o->cgroup_parent))
		return false;
	x = cJSON_AddObjectToObject(hc, "RestartPolicy");
	if (!x || !cJSON_AddStringToObject(x, "Name", "no"))
		return false;
	if (o->log_driver) {
		x = cJSON_AddObjectToObject(hc, "LogConfig");
		if (!x || !cJSON_AddStringToObject(x, "Type", o->log_driver) ||
		    !cJSON_AddObjectToObject(x, "Config"))
			return false;
	}
	if (o->n_tmpfs && !docker_add_kv(hc, "Tmpfs", o->tmpfs, o->n_tmpfs))
		return false;
	if (o->n_cap_drop) {
		a = cJSON_CreateStringArray(o->cap_drop, (int)o->n_cap_drop);
		if (!a || !cJSON_AddItemToObject(hc, "CapDrop", a)) {
			cJSON_Delete(a);
			return false;
		}
	}
	if (o->n_security_opt) {
		a = cJSON_CreateStringArray(o->security_opt,
		                            (int)o->n_security_opt);
		if (!a || !cJSON_AddItemToObject(hc, "SecurityOpt", a)) {
			cJSON_Delete(a);
			return false;
		}
	}
	if (o->n_ulimits) {
		a = cJSON_AddArrayToObject(hc, "Ulimits");
		if (!a)
			return false;
		for (size_t i = 0; i < o->n_ulimits; i++) {
			x = cJSON_CreateObject();
			if (!x || !cJSON_AddItemToArray(a, x) ||
			    !cJSON_AddStringToObject(x, "Name",
			                             o->ulimits[i].name) ||
			    !cJSON_AddNumberToObject(
			        x, "Soft", (double)o->ulimits[i].soft) ||
			    !cJSON_AddNumberToObject(
			        x, "Hard", (double)o->ulimits[i].hard))
				return false;
		}
	}
	if (o->n_mounts) {
		a = cJSON_AddArrayToObject(hc, "Mounts");
		if (!a)
			return false;
		for (size_t i = 0; i < o->n_mounts; i++) {
			cJSON *bo;

			x = cJSON_CreateObject();
			if (!x || !cJSON_AddItemToArray(a, x) ||
			    !cJSON_AddStringToObject(x, "Type", "bind") ||
			    !cJSON_AddStringToObject(x, "Source",
			                             o->mounts[i].source) ||
			    !cJSON_AddStringToObject(x, "Target",
			                             o->mounts[i].target) ||
			    !cJSON_AddBoolToObject(x, "ReadOnly",
			                           o->mounts[i].read_only))
				return false;
			bo = cJSON_AddObjectToObject(x, "BindOptions");
			if (!bo || !cJSON_AddStringToObject(bo, "Propagation",
			                                    o->mounts[i].rslave
			                                        ? "rslave"
			                                        : "rprivate"))
				return false;
		}
	}
	return true;
}

/* NetworkingConfig.EndpointsConfig.<net>.IPAMConfig.IPv4Address = ip */
static bool docker_add_endpoint(cJSON *b, const char *net, const char *ip)
{
	cJSON *nc = cJSON_AddObjectToObject(b, "NetworkingConfig"), *ec, *ep,
	      *ipam;

	ec = nc ? cJSON_AddObjectToObject(nc, "EndpointsConfig") : NULL;
	ep = ec ? cJSON_AddObjectToObject(ec, net) : NULL;
	ipam = ep ? cJSON_AddObjectToObject(ep, "IPAMConfig") : NULL;
	return ipam && cJSON_AddStringToObject(ipam, "IPv4Address", ip);
}

cJSON *docker_create_body(const struct docker_create_opts *o)
{
	cJSON *b = cJSON_CreateObject(), *a, *hc;

	if (!b)
		return NULL;
	if (!cJSON_AddStringToObject(b, "Image", o->image ? o->image : ""))
		goto fail;
	a = cJSON_CreateStringArray(o->cmd, (int)o->n_cmd);
	if (!a || !cJSON_AddItemToObject(b, "Cmd", a)) {
		cJSON_Delete(a);
		goto fail;
	}
	if (o->n_env) {
		a = cJSON_CreateStringArray(o->env, (int)o->n_env);
		if (!a || !cJSON_AddItemToObject(b, "Env", a)) {
			cJSON_Delete(a);
			goto fail;
		}
	}
	if (!docker_add_kv(b, "Labels", o->labels, o->n_labels) ||
	    !docker_add_str(b, "User", o->user) ||
	    !docker_add_str(b, "WorkingDir", o->working_dir) ||
	    !cJSON_AddBoolToObject(b, "Tty", 0) ||
	    !cJSON_AddBoolToObject(b, "AttachStdin", o->open_stdin) ||
	    !cJSON_AddBoolToObject(b, "OpenStdin", o->open_stdin) ||
	    !cJSON_AddBoolToObject(b, "StdinOnce", o->open_stdin) ||
	    !cJSON_AddBoolToObject(b, "AttachStdout", 1) ||
	    !cJSON_AddBoolToObject(b, "AttachStderr", 1))
		goto fail;
	hc = cJSON_AddObjectToObject(b, "HostConfig");
	if (!hc || !docker_add_host(hc, o))
		goto fail;
	if (o->n_dns) {
		a = cJSON_CreateStringArray(o->dns, (int)o->n_dns);
		if (!a || !cJSON_AddItemToObject(hc, "Dns", a)) {
			cJSON_Delete(a);
			goto fail;
		}
	}
	if (o->network_ip && o->network_mode &&
	    !docker_add_endpoint(b, o->network_mode, o->network_ip))
		goto fail;
	return b;
fail:
	cJSON_Delete(b);
	return NULL;
}

int docker_container_create(struct docker *d, const char *name,
                            const struct docker_create_opts *o,
                            char id[DOCKER_ID_LEN + 1], char *err,
                            size_t errlen)
{
	struct docker_req rq = {.method = "POST", .versioned = true};
	cJSON *body = NULL, *j = NULL, *w;
	char path[256], *txt = NULL;
	const char *s;
	int r;

	id[0] = '\0';
	if (name && !docker_id_ok(name))
		return docker_bad_id("container name", err, errlen);
	if (!docker_ref_ok(o->image))
		return docker_bad_id("image reference", err, errlen);
	snprintf(path, sizeof(path), "/containers/create%s%s",
	         name ? "?name=" : "", name ? name : "");
	rq.path = path;
	body = docker_create_body(o);
	if (body)
		txt = cJSON_PrintUnformatted(body);
	rq.body = txt;
	if (!txt) {
		snprintf(err, errlen, "out of memory");
		r = -ENOMEM;
		goto out;
	}
	r = docker_call(d, &rq, err, errlen);
	if (r < 0)
		goto out;
	r = docker_parse(&rq, &j, err, errlen);
	if (r < 0)
		goto out;
	s = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "Id"));
	if (!s || strlen(s) != DOCKER_ID_LEN || !docker_id_ok(s)) {
		snprintf(err, errlen, "Docker engine sent no container id");
		r = -EPROTO;
		goto out;
	}
	memcpy(id, s, DOCKER_ID_LEN + 1);
	cJSON_ArrayForEach (w,
	                    cJSON_GetObjectItemCaseSensitive(j, "Warnings")) {
		if (cJSON_IsString(w))
			log_warnx("Docker warning creating %.12s: %s", id,
			          w->valuestring);
	}
out:
	cJSON_Delete(j);
	cJSON_Delete(body);
	cJSON_free(txt);
	buf_finish(&rq.resp);
	return r;
}

int docker_container_update(struct docker *d, const char *id,
                            long long memory_bytes, long long nano_cpus,
                            char *err, size_t errlen)
{
	struct docker_req rq = {.method = "POST", .versioned = true};
	char path[256], body[160];
	int r;

	if (!docker_id_ok(id))
		return docker_bad_id("container id", err, errlen);
	if (memory_bytes <= 0 || nano_cpus <= 0) {
		snprintf(err, errlen, "no limits to update to");
		return -EINVAL;
	}
	snprintf(path, sizeof(path), "/containers/%s/update", id);
	snprintf(body, sizeof(body),
	         "{\"Memory\":%lld,\"MemorySwap\":%lld,\"NanoCpus\":%lld}",
	         memory_bytes, memory_bytes, nano_cpus);
	rq.path = path;
	rq.body = body;
	r = docker_call(d, &rq, err, errlen);
	buf_finish(&rq.resp);
	return r;
}

/* A POST or DELETE on /containers/{id}<suffix>, answer body unused. */
static int docker_simple(struct docker *d, const char *method, const char *id,
                         const char *suffix, char *err, size_t errlen)
{
	struct docker_req rq = {.method = method, .versioned = true};
	char path[256];
	int r;

	if (!docker_id_ok(id))
		return docker_bad_id("container id", err, errlen);
	snprintf(path, sizeof(path), "/containers/%s%s", id, suffix);
	rq.path = path;
	r = docker_call(d, &rq, err, errlen);
	buf_finish(&rq.resp);
	return r;
}

int docker_container_start(struct docker *d, const char *id, char *err,
                           size_t errlen)
{
	return docker_simple(d, "POST", id, "/start", err, errlen);
}

int docker_container_kill(struct docker *d, const char *id, const char *sig,
                          char *err, size_t errlen)
{
	char suffix[64];
	int r;

	if (!docker_id_ok(sig) || strlen(sig) > 32)
		return docker_bad_id("signal", err, errlen);
	snprintf(suffix, sizeof(suffix), "/kill?signal=%s", sig);
	r = docker_simple(d, "POST", id, suffix, err, errlen);
	return r == -EBUSY ? -ESRCH : r;
}

int docker_container_remove(struct docker *d, const char *id, char *err,
                            size_t errlen)
{
	return docker_simple(d, "DELETE", id, "?force=1&v=1", err, errlen);
}

int docker_container_wait(struct docker *d, const char *id, unsigned timeout_ms,
                          long *status, char *err, size_t errlen)
{
	struct docker_req rq = {.method = "POST",
	                        .versioned = true,
	                        .timeout_ms = timeout_ms ? timeout_ms : 1,
	                        .slow_ok = true};
	cJSON *j = NULL, *sc;
	char path[256];
	int r;

	*status = -1;
	if (!docker_id_ok(id))
		return docker_bad_id("container id", err, errlen);
	snprintf(path, sizeof(path),
	         "/containers/%s/wait?condition=not-running", id);
	rq.path = path;
	r = docker_call(d, &rq, err, errlen);
	if (r < 0)
		goto out;
	r = docker_parse(&rq, &j, err, errlen);
	if (r < 0)
		goto out;
	sc = cJSON_GetObjectItemCaseSensitive(j, "StatusCode");
	if (!cJSON_IsNumber(sc)) {
		snprintf(err, errlen, "Docker engine sent no exit status");
		r = -EPROTO;
		goto out;
	}
	*status = (long)sc->valuedouble;
out:
	cJSON_Delete(j);
	buf_finish(&rq.resp);
	return r;
}

static void docker_copy_str(char *dst, size_t len, const cJSON *o,
                            const char *name)
{
	const char *s =
	    cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, name));

	snprintf(dst, len, "%s", s ? s : "");
}

int docker_container_inspect(struct docker *d, const char *id,
                             struct docker_container_state *out, char *err,
                             size_t errlen)
{
	char path[256];
	cJSON *j = NULL, *st, *x;
	int r;

	memset(out, 0, sizeof(*out));
	out->exit_code = -1;
	if (!docker_id_ok(id))
		return docker_bad_id("container id", err, errlen);
	snprintf(path, sizeof(path), "/containers/%s/json", id);
	r = docker_get_json(d, path, &j, err, errlen);
	if (r < 0)
		return r;
	st = cJSON_GetObjectItemCaseSensitive(j, "State");
	if (!cJSON_IsObject(st)) {
		snprintf(err, errlen, "Docker engine sent no container state");
		r = -EPROTO;
		goto out;
	}
	out->running =
	    cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(st, "Running"));
	out->oom_killed =
	    cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(st, "OOMKilled"));
	x = cJSON_GetObjectItemCaseSensitive(st, "ExitCode");
	if (cJSON_IsNumber(x))
		out->exit_code = (int)x->valuedouble;
	x = cJSON_GetObjectItemCaseSensitive(st, "Pid");
	if (cJSON_IsNumber(x))
		out->pid = (int)x->valuedouble;
	docker_copy_str(out->status, sizeof(out->status), st, "Status");
	docker_copy_str(out->started_at, sizeof(out->started_at), st,
	                "StartedAt");
	docker_copy_str(out->finished_at, sizeof(out->finished_at), st,
	                "FinishedAt");
	docker_copy_str(out->error, sizeof(out->error), st, "Error");
out:
	cJSON_Delete(j);
	return r;
}
