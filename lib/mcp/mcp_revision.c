/* SPDX-License-Identifier: MIT */
/*
 * mcp_revision: what differs between the protocol revisions the server speaks,
 * in one place. Revisions up to 2025-11-25 (legacy) open a session with
 * initialize; 2026-07-28 (modern) is stateless: every request names its
 * version and the client's capabilities in params._meta and mirrors body
 * fields into headers. This file decides which era a POST belongs to,
 * checks a modern request's envelope (the _meta fields, the
 * MCP-Protocol-Version, Mcp-Method, Mcp-Name and Mcp-Param-* headers),
 * maps error codes to HTTP statuses, says which methods each era has,
 * builds the capabilities each era advertises, and shapes modern results
 * (resultType, caching hints, serverInfo). The rest of the module asks
 * here instead of comparing version strings. Thread-safety: everything
 * here reads only the registration tables (fixed before serving) and its
 * arguments; no lock is taken or needed.
 */
#include "mcp/mcp_internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "build_config.h"
#include "util/b64.h"
#include "util/jsonx.h"
#include "util/num.h"

const char *const mcp_protocol_versions[] = {"2025-11-25", "2025-06-18",
                                             "2025-03-26", "2024-11-05", NULL};

/* Versions served statelessly, newest first. */
static const char *const modern_versions[] = {MCP_MODERN_VERSION, NULL};

/* Cache hints (SEP-2549): lists change rarely, files at any time. */
#define TTL_DISCOVER_MS 300000
#define TTL_LIST_MS 60000
#define TTL_READ_MS 0
/* Longest Mcp-Name or Mcp-Param-* value compared after decoding. */
#define HEADER_VALUE_MAX 8192

bool mcp_version_supported(const char *v)
{
	for (size_t i = 0; mcp_protocol_versions[i]; i++) {
		if (strcmp(v, mcp_protocol_versions[i]) == 0)
			return true;
	}
	return false;
}

static bool modern_supported(const char *v)
{
	for (size_t i = 0; modern_versions[i]; i++) {
		if (strcmp(v, modern_versions[i]) == 0)
			return true;
	}
	return false;
}

/* ------------------------------------------------------------------ */
/* header values */

/* A header value with the optional white space around it removed. */
struct hval {
	const char *p;
	size_t n;
	bool present;
};

static struct hval trim(const char *v)
{
	struct hval h = {.p = v, .n = 0, .present = v != NULL};

	if (!v)
		return h;
	while (*h.p == ' ' || *h.p == '\t')
		h.p++;
	h.n = strlen(h.p);
	while (h.n && (h.p[h.n - 1] == ' ' || h.p[h.n - 1] == '\t'))
		h.n--;
	return h;
}

static struct hval header(const struct mcp_http_req *req, const char *name)
{
	return trim(req->header ? req->header(req->hctx, name) : NULL);
}

static bool hval_is(struct hval h, const char *s)
{
	return h.present && strlen(s) == h.n && memcmp(h.p, s, h.n) == 0;
}

/* RFC 9110 field-value characters: visible ASCII, space and tab. */
static bool hval_clean(struct hval h)
{
	for (size_t i = 0; i < h.n; i++) {
		unsigned char c = (unsigned char)h.p[i];

		if (c != '\t' && (c < 0x20 || c > 0x7e))
			return false;
	}
	return true;
}

/*
 * The text a header value stands for: itself, or what its Base64 sentinel
 * (=?base64?...?=) encodes. Returns 0 with the bytes in out (*len), or
 * -EINVAL when the value has bad characters or bad Base64.
 */
static int hval_decode(struct hval h, char *out, size_t cap, size_t *len)
{
	static const char pre[] = "=?base64?", post[] = "?=";
	const size_t np = sizeof(pre) - 1, nq = sizeof(post) - 1;
	char why[160];

	*len = 0;
	if (!hval_clean(h))
		return -EINVAL;
	if (h.n >= np + nq && memcmp(h.p, pre, np) == 0 &&
	    memcmp(h.p + h.n - nq, post, nq) == 0) {
		size_t in = h.n - np - nq;

		if (in / 4 * 3 > cap ||
		    b64_decode(h.p + np, in, (unsigned char *)out, len, why,
		               sizeof(why)) < 0)
			return -EINVAL;
		return 0;
	}
	if (h.n > cap)
		return -EINVAL;
	memcpy(out, h.p, h.n);
	*len = h.n;
	return 0;
}

/* ------------------------------------------------------------------ */
/* which era */

bool mcp_revision_is_modern(const struct mcp_http_req *req,
                            const struct rpc_batch *b)
{
	const struct rpc_msg *m;
	const cJSON *meta;
	struct hval v;
	char ver[32];

	if (b->is_array || b->n != 1)
		return false;
	m = &b->msgs[0];
	meta = m->params ? cJSON_GetObjectItemCaseSensitive(m->params, "_meta")
	                 : NULL;
	/* Only 2026-07-28 framing puts the version into the body. */
	if (cJSON_IsObject(meta) &&
	    cJSON_GetObjectItemCaseSensitive(meta, META_VERSION))
		return true;
	if (req->session_id && req->session_id[0])
		return false;
	v = trim(req->protocol_version);
	if (!v.present)
		return false;
	if (v.n >= sizeof(ver))
		return true;
	memcpy(ver, v.p, v.n);
	ver[v.n] = '\0';
	/* A header naming a session-era revision is session traffic. */
	return !mcp_version_supported(ver);
}

/* ------------------------------------------------------------------ */
/* checking a modern request */

/* An error answer for m, with status, for mcp_revision_check(). */
static int reject(const struct rpc_msg *m, char **answer, int *status, int code,
                  cJSON *data, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));

static int reject(const struct rpc_msg *m, char **answer, int *status, int code,
                  cJSON *data, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	*answer = rpc_error(m->id_raw, code, msg, data);
	*status = 400;
	return -EINVAL;
}

static int parse_level(const cJSON *v, enum mcp_log_level *out)
{
	*out = MCP_LOG_OFF;
	if (!v)
		return 0;
	for (size_t i = 0; cJSON_IsString(v) && i < 8; i++) {
		if (strcmp(v->valuestring, mcp_level_names[i]) == 0) {
			*out = (enum mcp_log_level)i;
			return 0;
		}
	}
	return -EINVAL;
}

/* The body field an Mcp-Name header mirrors, or NULL for this method. */
static const cJSON *name_source(const struct rpc_msg *m, const char **field)
{
	const char *f = NULL;

	if (strcmp(m->method, "tools/call") == 0 ||
	    strcmp(m->method, "prompts/get") == 0)
		f = "name";
	else if (strcmp(m->method, "resources/read") == 0)
		f = "uri";
	else if (strcmp(m->method, "tasks/get") == 0 ||
	         strcmp(m->method, "tasks/update") == 0 ||
	         strcmp(m->method, "tasks/cancel") == 0)
		f = "taskId";
	*field = f;
	return f && m->params ? cJSON_GetObjectItemCaseSensitive(m->params, f)
	                      : NULL;
}

/*
 * Whether header h carries exactly the body value v (a string, an integer
 * or a boolean). A missing or null body value wants no header.
 */
static bool mirrors(struct hval h, const cJSON *v)
{
	size_t len;
	char buf[HEADER_VALUE_MAX];
	double d;

	if (!v || cJSON_IsNull(v))
		return !h.present;
	if (!h.present || hval_decode(h, buf, sizeof(buf) - 1, &len) < 0)
		return false;
	buf[len] = '\0';
	if (cJSON_IsString(v))
		return strlen(v->valuestring) == len &&
		       memcmp(v->valuestring, buf, len) == 0;
	if (cJSON_IsBool(v))
		return strcmp(buf, cJSON_IsTrue(v) ? "true" : "false") == 0;
	if (cJSON_IsNumber(v))
		return strlen(buf) == len &&
		       num_double(buf, -1e308, 1e308, &d) == 0 &&
		       d == v->valuedouble;
	return false;
}

/* Checks the Mcp-Param-* headers of a tools/call. */
static int check_params(const struct mcp_server *srv,
                        const struct mcp_http_req *req, const struct rpc_msg *m,
                        char **answer, int *status)
{
	const cJSON *name = cJSON_GetObjectItemCaseSensitive(m->params, "name");
	const cJSON *args =
	    cJSON_GetObjectItemCaseSensitive(m->params, "arguments");
	size_t i;

	if (!cJSON_IsString(name))
		return 0;
	for (i = 0; i < srv->n_tools; i++) {
		if (strcmp(srv->tools[i]->name, name->valuestring) == 0)
			break;
	}
	if (i == srv->n_tools)
		return 0; /* answered as an unknown tool */
	for (size_t k = 0; k < srv->n_params; k++) {
		char hname[96];
		struct hval h;
		const cJSON *v;

		if (!mcp_revision_param_of(srv, i, k))
			continue;
		snprintf(hname, sizeof(hname), "Mcp-Param-%s",
		         srv->param_header[k]);
		h = header(req, hname);
		v = cJSON_IsObject(args) ? cJSON_GetObjectItemCaseSensitive(
		                               args, srv->param_prop[k])
		                         : NULL;
		if (h.present && !hval_clean(h))
			return reject(m, answer, status, RPC_HEADER_MISMATCH,
			              NULL,
			              "header %s has characters a header value "
			              "may not have; send the argument '%s' "
			              "Base64-encoded as =?base64?...?=",
			              hname, srv->param_prop[k]);
		if (!mirrors(h, v))
			return reject(
			    m, answer, status, RPC_HEADER_MISMATCH, NULL,
			    "header %s does not match the argument '%s' (or "
			    "one of them is missing); send the argument's "
			    "value in the header as the tool's x-mcp-header "
			    "annotation says",
			    hname, srv->param_prop[k]);
	}
	return 0;
}

int mcp_revision_check(const struct mcp_server *srv,
                       const struct mcp_http_req *req, const struct rpc_msg *m,
                       struct mcp_meta *meta, char **answer, int *status)
{
	const cJSON *mt, *ver, *caps, *lvl, *src;
	struct hval hv, hm, hn;
	const char *field;

	memset(meta, 0, sizeof(*meta));
	meta->log_level = MCP_LOG_OFF;
	*answer = NULL;
	*status = 200;
	hv = trim(req->protocol_version);
	if (!hv.present)
		return reject(m, answer, status, RPC_HEADER_MISMATCH, NULL,
		              "missing MCP-Protocol-Version header; send the "
		              "version of params._meta[\"%s\"] in it too",
		              META_VERSION);
	mt = m->params ? cJSON_GetObjectItemCaseSensitive(m->params, "_meta")
	               : NULL;
	ver = cJSON_GetObjectItemCaseSensitive(mt, META_VERSION);
	caps = cJSON_GetObjectItemCaseSensitive(mt, META_CAPS);
	if (!cJSON_IsObject(mt) || !cJSON_IsString(ver) ||
	    !cJSON_IsObject(caps))
		return reject(m, answer, status, RPC_INVALID_PARAMS, NULL,
		              "params._meta must carry \"%s\" (a string) and "
		              "\"%s\" (an object) on every request of protocol "
		              "%s",
		              META_VERSION, META_CAPS, MCP_MODERN_VERSION);
	if (!hval_is(hv, ver->valuestring))
		return reject(m, answer, status, RPC_HEADER_MISMATCH, NULL,
		              "MCP-Protocol-Version header '%.*s' does not "
		              "match params._meta[\"%s\"] '%.40s'; send the "
		              "same version in both",
		              (int)(hv.n > 40 ? 40 : hv.n), hv.p, META_VERSION,
		              ver->valuestring);
	if (!modern_supported(ver->valuestring)) {
		cJSON *data = cJSON_CreateObject();

		cJSON_AddItemToObject(data, "supported",
		                      jsonx_strv(modern_versions));
		cJSON_AddStringToObject(data, "requested", ver->valuestring);
		return reject(m, answer, status, RPC_UNSUPPORTED_VERSION, data,
		              "Unsupported protocol version '%.40s': requests "
		              "with per-request metadata use %s; for "
		              "2025-11-25 and earlier, start a session with "
		              "initialize",
		              ver->valuestring, MCP_MODERN_VERSION);
	}
	lvl = cJSON_GetObjectItemCaseSensitive(mt, META_LOG_LEVEL);
	if (parse_level(lvl, &meta->log_level) < 0)
		return reject(m, answer, status, RPC_INVALID_PARAMS, NULL,
		              "params._meta[\"%s\"] must be one of debug, "
		              "info, notice, warning, error, critical, alert, "
		              "emergency",
		              META_LOG_LEVEL);
	hm = header(req, "Mcp-Method");
	if (!hval_is(hm, m->method))
		return reject(m, answer, status, RPC_HEADER_MISMATCH, NULL,
		              "%s Mcp-Method header; it must be the request's "
		              "method '%.100s' exactly",
		              hm.present ? "wrong" : "missing", m->method);
	src = name_source(m, &field);
	hn = header(req, "Mcp-Name");
	if (field && !cJSON_IsString(src) && hn.present)
		return reject(m, answer, status, RPC_HEADER_MISMATCH, NULL,
		              "Mcp-Name header without params.%s", field);
	if (field && cJSON_IsString(src) && !mirrors(hn, src))
		return reject(m, answer, status, RPC_HEADER_MISMATCH, NULL,
		              "%s Mcp-Name header; it must be params.%s "
		              "('%.100s'), Base64-encoded as =?base64?...?= "
		              "when it is not plain ASCII",
		              hn.present ? "wrong" : "missing", field,
		              src->valuestring);
	if (strcmp(m->method, "tools/call") == 0 &&
	    check_params(srv, req, m, answer, status) < 0)
		return -EINVAL;
	meta->version = ver->valuestring;
	meta->caps = caps;
	meta->info = cJSON_GetObjectItemCaseSensitive(mt, META_INFO);
	return 0;
}

int mcp_revision_status(int code)
{
	switch (code) {
	case 0:
		return 200;
	case RPC_METHOD_NOT_FOUND:
		return 404;
	case RPC_PARSE_ERROR:
	case RPC_INVALID_REQUEST:
	case RPC_HEADER_MISMATCH:
	case RPC_MISSING_CAPABILITY:
	case RPC_UNSUPPORTED_VERSION:
		return 400;
	default:
		/* Other errors (a bad argument, ...) are the method's. */
		return 200;
	}
}

/* ------------------------------------------------------------------ */
/* methods, capabilities and results by era */

/* Methods of 2025-11-25 and earlier that 2026-07-28 removed. */
static const char *const session_only[] = {"initialize",
                                           "ping",
                                           "logging/setLevel",
                                           "resources/subscribe",
                                           "resources/unsubscribe",
                                           NULL};
/* Methods only 2026-07-28 has. */
static const char *const stateless_only[] = {
    "server/discover", "subscriptions/listen", "tasks/get",
    "tasks/update",    "tasks/cancel",         NULL};

static bool listed(const char *const *list, const char *s)
{
	for (size_t i = 0; list[i]; i++) {
		if (strcmp(list[i], s) == 0)
			return true;
	}
	return false;
}

bool mcp_revision_method_allowed(const struct session *s, const char *method)
{
	return !listed(s->stateless ? session_only : stateless_only, method);
}

cJSON *mcp_revision_server_info(void)
{
	cJSON *info = cJSON_CreateObject();

	cJSON_AddStringToObject(info, "name", "mcp-sandboxd");
	cJSON_AddStringToObject(info, "title", "Code sandbox");
	cJSON_AddStringToObject(info, "version", MCPSD_VERSION);
	return info;
}

cJSON *mcp_revision_capabilities(const struct mcp_server *srv, bool modern)
{
	cJSON *caps = cJSON_CreateObject(), *o;

	o = cJSON_AddObjectToObject(caps, "tools");
	cJSON_AddTrueToObject(o, "listChanged");
	if (srv->n_providers) {
		o = cJSON_AddObjectToObject(caps, "resources");
		cJSON_AddTrueToObject(o, "subscribe");
		cJSON_AddTrueToObject(o, "listChanged");
	}
	if (srv->n_prompts) {
		o = cJSON_AddObjectToObject(caps, "prompts");
		cJSON_AddFalseToObject(o, "listChanged");
	}
	cJSON_AddObjectToObject(caps, "logging");
	if (srv->complete)
		cJSON_AddObjectToObject(caps, "completions");
	/* Extensions are negotiated per request: 2026-07-28 only. */
	if (modern && srv->tasks) {
		o = cJSON_AddObjectToObject(caps, "extensions");
		cJSON_AddObjectToObject(o, TASKS_EXTENSION);
	}
	return caps;
}

bool mcp_revision_param_of(const struct mcp_server *srv, size_t tool, size_t k)
{
	const cJSON *props = cJSON_GetObjectItemCaseSensitive(
	    srv->tool_in_schema[tool], "properties");
	const cJSON *p =
	    cJSON_GetObjectItemCaseSensitive(props, srv->param_prop[k]);
	const cJSON *t = cJSON_GetObjectItemCaseSensitive(p, "type");

	return cJSON_IsString(t) && (strcmp(t->valuestring, "string") == 0 ||
	                             strcmp(t->valuestring, "integer") == 0 ||
	                             strcmp(t->valuestring, "boolean") == 0);
}

void mcp_revision_annotate_tool(const struct mcp_server *srv,
                                const struct session *s, size_t tool,
                                cJSON *entry)
{
	cJSON *props = cJSON_GetObjectItemCaseSensitive(
	    cJSON_GetObjectItemCaseSensitive(entry, "inputSchema"),
	    "properties");

	/* Clients before 2026-07-28 know no x-mcp-header. */
	if (!s->stateless)
		return;
	for (size_t k = 0; k < srv->n_params; k++) {
		cJSON *p;

		if (!mcp_revision_param_of(srv, tool, k))
			continue;
		p = cJSON_GetObjectItemCaseSensitive(props, srv->param_prop[k]);
		if (cJSON_IsObject(p) &&
		    !cJSON_GetObjectItemCaseSensitive(p, "x-mcp-header"))
			cJSON_AddStringToObject(p, "x-mcp-header",
			                        srv->param_header[k]);
	}
}

/* Caching hints for the results 2026-07-28 makes cacheable, or -1. */
static long cache_ttl(const char *method)
{
	if (strcmp(method, "server/discover") == 0)
		return TTL_DISCOVER_MS;
	if (strcmp(method, "tools/list") == 0 ||
	    strcmp(method, "prompts/list") == 0 ||
	    strcmp(method, "resources/list") == 0 ||
	    strcmp(method, "resources/templates/list") == 0)
		return TTL_LIST_MS;
	if (strcmp(method, "resources/read") == 0)
		return TTL_READ_MS;
	return -1;
}

cJSON *mcp_revision_shape(const struct session *s, const char *method,
                          cJSON *result)
{
	cJSON *meta;
	long ttl;

	if (!result || !s->stateless)
		return result;
	if (!cJSON_GetObjectItemCaseSensitive(result, "resultType"))
		cJSON_AddStringToObject(result, "resultType", "complete");
	ttl = cache_ttl(method);
	/* Results answer to one token: shared caches must not serve them. */
	if (ttl >= 0 && !cJSON_GetObjectItemCaseSensitive(result, "ttlMs")) {
		cJSON_AddNumberToObject(result, "ttlMs", (double)ttl);
		cJSON_AddStringToObject(result, "cacheScope", "private");
	}
	meta = cJSON_GetObjectItemCaseSensitive(result, "_meta");
	if (!meta)
		meta = cJSON_AddObjectToObject(result, "_meta");
	if (cJSON_IsObject(meta) &&
	    !cJSON_GetObjectItemCaseSensitive(meta, META_SERVER_INFO))
		cJSON_AddItemToObject(meta, META_SERVER_INFO,
		                      mcp_revision_server_info());
	return result;
}

cJSON *mcp_revision_missing(const char *capability)
{
	cJSON *data = cJSON_CreateObject();
	cJSON *req = cJSON_AddObjectToObject(data, "requiredCapabilities");

	if (strcmp(capability, TASKS_EXTENSION) == 0) {
		cJSON *ext = cJSON_AddObjectToObject(req, "extensions");

		cJSON_AddObjectToObject(ext, TASKS_EXTENSION);
	} else {
		cJSON_AddObjectToObject(req, capability);
	}
	return data;
}

bool mcp_revision_client_has_ui(const cJSON *caps)
{
	const cJSON *ui = cJSON_GetObjectItemCaseSensitive(
	    cJSON_GetObjectItemCaseSensitive(caps, "extensions"),
	    MCP_UI_EXTENSION);
	const cJSON *t;

	cJSON_ArrayForEach (t,
	                    cJSON_GetObjectItemCaseSensitive(ui, "mimeTypes"))
		if (cJSON_IsString(t) &&
		    strcmp(t->valuestring, MCP_UI_MIME) == 0)
			return true;
	return false;
}

bool mcp_revision_client_has(const cJSON *caps, const char *capability)
{
	if (strcmp(capability, TASKS_EXTENSION) == 0)
		return cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(
		    cJSON_GetObjectItemCaseSensitive(caps, "extensions"),
		    TASKS_EXTENSION));
	return cJSON_GetObjectItemCaseSensitive(caps, capability) != NULL;
}
