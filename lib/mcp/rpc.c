/* SPDX-License-Identifier: MIT */
/*
 * rpc: an iterative JSON validator that records the raw text of top-level
 * ids, then cJSON for the tree, then classification of each message.
 */
#include "mcp/rpc.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/buf.h"

struct scanner {
	const char *s;
	size_t n, i;
	const char *err;
};

static void skip_ws(struct scanner *sc)
{
	while (sc->i < sc->n) {
		char c = sc->s[sc->i];

		if (c != ' ' && c != '\t' && c != '\n' && c != '\r')
			break;
		sc->i++;
	}
}

static int hex4(const char *p, unsigned *out)
{
	unsigned v = 0;

	for (int k = 0; k < 4; k++) {
		char c = p[k];

		v <<= 4;
		if (c >= '0' && c <= '9')
			v |= (unsigned)(c - '0');
		else if (c >= 'a' && c <= 'f')
			v |= (unsigned)(c - 'a' + 10);
		else if (c >= 'A' && c <= 'F')
			v |= (unsigned)(c - 'A' + 10);
		else
			return -1;
	}
	*out = v;
	return 0;
}

/* Length of a valid UTF-8 sequence at p (max n bytes), 0 if invalid. */
static size_t utf8_len(const unsigned char *p, size_t n)
{
	unsigned c = p[0];
	size_t len;
	unsigned cp;

	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf) {
		len = 2;
		cp = c & 0x1f;
	} else if (c >= 0xe0 && c <= 0xef) {
		len = 3;
		cp = c & 0x0f;
	} else if (c >= 0xf0 && c <= 0xf4) {
		len = 4;
		cp = c & 0x07;
	} else {
		return 0;
	}
	if (len > n)
		return 0;
	for (size_t k = 1; k < len; k++) {
		if ((p[k] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (p[k] & 0x3f);
	}
	if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
	    (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff)
		return 0;
	return len;
}

/* Scans a string starting at the opening quote; leaves i after the close. */
static int scan_string(struct scanner *sc)
{
	sc->i++; /* opening quote */
	while (sc->i < sc->n) {
		unsigned char c = (unsigned char)sc->s[sc->i];

		if (c == '"') {
			sc->i++;
			return 0;
		}
		if (c < 0x20) {
			sc->err = "control character in a string (escape it)";
			return -EINVAL;
		}
		if (c == '\\') {
			char e;

			if (sc->i + 1 >= sc->n)
				break;
			e = sc->s[sc->i + 1];
			if (e == 'u') {
				unsigned u, lo;

				if (sc->i + 6 > sc->n ||
				    hex4(sc->s + sc->i + 2, &u) < 0) {
					sc->err = "bad \\u escape";
					return -EINVAL;
				}
				if (u == 0) {
					sc->err = "\\u0000 (NUL) is not "
					          "accepted in strings";
					return -EINVAL;
				}
				sc->i += 6;
				if (u >= 0xdc00 && u <= 0xdfff) {
					sc->err = "lone low surrogate in a "
					          "\\u escape";
					return -EINVAL;
				}
				if (u >= 0xd800 && u <= 0xdbff) {
					if (sc->i + 6 > sc->n ||
					    sc->s[sc->i] != '\\' ||
					    sc->s[sc->i + 1] != 'u' ||
					    hex4(sc->s + sc->i + 2, &lo) < 0 ||
					    lo < 0xdc00 || lo > 0xdfff) {
						sc->err = "lone high surrogate "
						          "in a \\u escape";
						return -EINVAL;
					}
					sc->i += 6;
				}
				continue;
			}
			if (!strchr("\"\\/bfnrt", e) || e == '\0') {
				sc->err = "bad escape in a string";
				return -EINVAL;
			}
			sc->i += 2;
			continue;
		}
		size_t l = utf8_len((const unsigned char *)sc->s + sc->i,
		                    sc->n - sc->i);
		if (!l) {
			sc->err = "invalid UTF-8 in a string";
			return -EINVAL;
		}
		sc->i += l;
	}
	sc->err = "unterminated string";
	return -EINVAL;
}

static int scan_number(struct scanner *sc)
{
	const char *s = sc->s;
	size_t i = sc->i, n = sc->n;

	if (i < n && s[i] == '-')
		i++;
	if (i >= n)
		goto bad;
	if (s[i] == '0') {
		i++;
	} else if (s[i] >= '1' && s[i] <= '9') {
		while (i < n && s[i] >= '0' && s[i] <= '9')
			i++;
	} else {
		goto bad;
	}
	if (i < n && s[i] == '.') {
		i++;
		if (i >= n || s[i] < '0' || s[i] > '9')
			goto bad;
		while (i < n && s[i] >= '0' && s[i] <= '9')
			i++;
	}
	if (i < n && (s[i] == 'e' || s[i] == 'E')) {
		i++;
		if (i < n && (s[i] == '+' || s[i] == '-'))
			i++;
		if (i >= n || s[i] < '0' || s[i] > '9')
			goto bad;
		while (i < n && s[i] >= '0' && s[i] <= '9')
			i++;
	}
	if (i - sc->i > 512) {
		sc->err = "number longer than 512 characters";
		return -EINVAL;
	}
	sc->i = i;
	return 0;
bad:
	sc->err = "malformed number";
	return -EINVAL;
}

static int scan_literal(struct scanner *sc)
{
	static const char *const lits[] = {"true", "false", "null"};

	for (size_t k = 0; k < 3; k++) {
		size_t l = strlen(lits[k]);

		if (sc->n - sc->i >= l &&
		    memcmp(sc->s + sc->i, lits[k], l) == 0) {
			sc->i += l;
			return 0;
		}
	}
	sc->err = "unexpected character";
	return -EINVAL;
}

/* Whether the key spanning s[a..b) (with quotes) spells "id". */
static bool key_is_id(const char *s, size_t a, size_t b)
{
	char dec[4];
	size_t n = 0;

	if (b - a == 4)
		return memcmp(s + a, "\"id\"", 4) == 0;
	if (b - a > 16)
		return false;
	/* Escaped spellings such as "\u0069d". */
	for (size_t i = a + 1; i + 1 < b; i++) {
		unsigned u;

		if (n >= 3)
			return false;
		if (s[i] == '\\' && s[i + 1] == 'u' && i + 6 <= b - 1 &&
		    hex4(s + i + 2, &u) == 0 && u < 0x80) {
			dec[n++] = (char)u;
			i += 5;
		} else {
			dec[n++] = s[i];
		}
	}
	return n == 2 && dec[0] == 'i' && dec[1] == 'd';
}

/*
 * Longer than a screen on purpose: one iterative state machine whose three
 * states (a value, a key, what follows a value) jump to one another and
 * share the depth stack and the id being recorded; split into functions,
 * they would hand all of that back and forth on every token.
 */
int rpc_scan(const char *s, size_t n, unsigned max_depth, struct rpc_scan *out)
{
	struct scanner sc = {.s = s, .n = n};
	/* One bit per level: 1 = object, 0 = array. */
	unsigned char kinds[1024 / 8 + 1];
	unsigned depth = 0;
	size_t item = 0;
	bool pending_id = false; /* next value is a top-level "id" */
	int r;

	memset(out, 0, sizeof(*out));
	if (max_depth > 1024)
		max_depth = 1024;
	skip_ws(&sc);
	if (sc.i >= n) {
		out->err = "empty body";
		return -EINVAL;
	}
	if (s[sc.i] != '{' && s[sc.i] != '[') {
		out->err = "a JSON-RPC message must be an object or an array";
		out->err_offset = sc.i;
		return -EINVAL;
	}
	out->is_array = s[sc.i] == '[';

	/*
	 * The loop reads one value per iteration; containers push a level and
	 * the code after a value consumes separators and closing brackets.
	 */
	for (;;) {
		size_t vstart;

		skip_ws(&sc);
		if (sc.i >= n) {
			sc.err = "unexpected end of input";
			goto fail;
		}
		vstart = sc.i;
		switch (s[sc.i]) {
		case '{':
		case '[': {
			bool obj = s[sc.i] == '{';

			if (depth >= max_depth) {
				out->err = "JSON nested too deeply";
				out->err_offset = sc.i;
				return -E2BIG;
			}
			if (obj)
				kinds[depth / 8] |=
				    (unsigned char)(1u << (depth % 8));
			else
				kinds[depth / 8] &=
				    (unsigned char)~(1u << (depth % 8));
			depth++;
			sc.i++;
			pending_id = false;
			skip_ws(&sc);
			if (sc.i < n && s[sc.i] == (obj ? '}' : ']')) {
				sc.i++;
				depth--;
				goto after_value;
			}
			if (obj)
				goto read_key;
			continue;
		}
		case '"':
			r = scan_string(&sc);
			break;
		case 't':
		case 'f':
		case 'n':
			r = scan_literal(&sc);
			break;
		default:
			r = scan_number(&sc);
			break;
		}
		if (r < 0)
			goto fail;
		if (pending_id) {
			if (item < RPC_MAX_BATCH && out->ids[item].len == 0) {
				out->ids[item].off = vstart;
				out->ids[item].len = sc.i - vstart;
			}
			pending_id = false;
		}
		goto after_value;

	read_key:
		skip_ws(&sc);
		if (sc.i >= n || s[sc.i] != '"') {
			sc.err = "expected a string key";
			goto fail;
		}
		{
			size_t ks = sc.i;
			unsigned item_depth = out->is_array ? 2 : 1;

			r = scan_string(&sc);
			if (r < 0)
				goto fail;
			pending_id =
			    depth == item_depth && key_is_id(s, ks, sc.i);
		}
		skip_ws(&sc);
		if (sc.i >= n || s[sc.i] != ':') {
			sc.err = "expected ':' after a key";
			goto fail;
		}
		sc.i++;
		continue;

	after_value:
		pending_id = false;
		for (;;) {
			bool obj;

			if (depth == 0) {
				skip_ws(&sc);
				if (sc.i != n) {
					sc.err = "trailing characters after "
					         "the JSON value";
					goto fail;
				}
				out->n_items = out->is_array ? item : 1;
				return 0;
			}
			obj = kinds[(depth - 1) / 8] >> ((depth - 1) % 8) & 1;
			skip_ws(&sc);
			if (sc.i >= n) {
				sc.err = "unexpected end of input";
				goto fail;
			}
			if (out->is_array && depth == 1 &&
			    (s[sc.i] == ',' || s[sc.i] == ']')) {
				if (++item > RPC_MAX_BATCH) {
					out->err = "batch has too many "
					           "messages";
					out->err_offset = sc.i;
					return -E2BIG;
				}
			}
			if (s[sc.i] == ',') {
				sc.i++;
				if (obj)
					goto read_key;
				break; /* next array element */
			}
			if (s[sc.i] == (obj ? '}' : ']')) {
				sc.i++;
				depth--;
				continue;
			}
			sc.err =
			    obj ? "expected ',' or '}'" : "expected ',' or ']'";
			goto fail;
		}
	}
fail:
	out->err = sc.err ? sc.err : "malformed JSON";
	out->err_offset = sc.i;
	return -EINVAL;
}

static bool is_integral_text(const char *t, size_t n)
{
	size_t i = 0;

	if (i < n && t[i] == '-')
		i++;
	if (i >= n)
		return false;
	for (; i < n; i++) {
		if (t[i] < '0' || t[i] > '9')
			return false;
	}
	return true;
}

char *rpc_id_key(const cJSON *id)
{
	struct buf b;

	buf_init(&b, 4096);
	if (cJSON_IsString(id)) {
		if (buf_puts(&b, "s:") < 0 || buf_puts(&b, id->valuestring) < 0)
			goto fail;
	} else if (cJSON_IsNumber(id)) {
		double d = id->valuedouble;

		/*
		 * Only integers below 2^53 survive the double unambiguously
		 * (2^53 + 1 is read as 2^53).
		 */
		if (d != (double)(int64_t)d || d >= 9007199254740992.0 ||
		    d <= -9007199254740992.0)
			goto fail;
		if (buf_printf(&b, "n:%lld", (long long)d) < 0)
			goto fail;
	} else {
		goto fail;
	}
	return buf_take(&b, NULL);
fail:
	buf_finish(&b);
	return NULL;
}

/* Canonical key from the raw id text (numbers keep their digits). */
static char *key_from_raw(const cJSON *id, const char *raw, size_t len)
{
	char *k;

	if (cJSON_IsNumber(id)) {
		if (!is_integral_text(raw, len))
			return NULL;
		k = malloc(len + 3);
		if (!k)
			return NULL;
		memcpy(k, "n:", 2);
		memcpy(k + 2, raw, len);
		k[len + 2] = '\0';
		/* "-0" and "0" are the same id. */
		if (strcmp(k, "n:-0") == 0)
			memcpy(k, "n:0", 4);
		return k;
	}
	return rpc_id_key(id);
}

static void classify(struct rpc_msg *m, cJSON *obj, const char *body,
                     size_t off, size_t len)
{
	cJSON *jv, *method, *id, *params, *result, *error;

	m->obj = obj;
	m->kind = RPC_KIND_INVALID;
	m->invalid_code = RPC_INVALID_REQUEST;
	if (!cJSON_IsObject(obj)) {
		m->invalid_msg = "a JSON-RPC message must be an object";
		return;
	}
	id = cJSON_GetObjectItemCaseSensitive(obj, "id");
	if (id && len) {
		if (cJSON_IsString(id) ||
		    (cJSON_IsNumber(id) && is_integral_text(body + off, len))) {
			m->id_raw = strndup(body + off, len);
			m->id_key = key_from_raw(id, body + off, len);
		}
	}
	jv = cJSON_GetObjectItemCaseSensitive(obj, "jsonrpc");
	if (!cJSON_IsString(jv) || strcmp(jv->valuestring, "2.0") != 0) {
		m->invalid_msg = "\"jsonrpc\" must be \"2.0\"";
		return;
	}
	method = cJSON_GetObjectItemCaseSensitive(obj, "method");
	result = cJSON_GetObjectItemCaseSensitive(obj, "result");
	error = cJSON_GetObjectItemCaseSensitive(obj, "error");
	if (id && !cJSON_IsNull(id) && !m->id_raw) {
		m->invalid_msg = "\"id\" must be a string or an integer";
		return;
	}
	if (id && (!m->id_raw || !m->id_key) && !cJSON_IsNull(id)) {
		m->invalid_msg = "\"id\" is not usable";
		return;
	}
	if (method) {
		if (!cJSON_IsString(method) || !method->valuestring[0]) {
			m->invalid_msg =
			    "\"method\" must be a non-empty string";
			return;
		}
		params = cJSON_GetObjectItemCaseSensitive(obj, "params");
		if (params && !cJSON_IsObject(params) &&
		    !cJSON_IsArray(params)) {
			m->invalid_msg = "\"params\" must be an object";
			return;
		}
		m->method = method->valuestring;
		m->params = params;
		if (!id) {
			m->kind = RPC_KIND_NOTIFICATION;
			return;
		}
		if (cJSON_IsNull(id)) {
			m->invalid_msg = "\"id\" must not be null in a request";
			return;
		}
		m->kind = RPC_KIND_REQUEST;
		return;
	}
	if ((result || error) && m->id_raw) {
		if (result && error) {
			m->invalid_msg = "a response has either \"result\" or "
			                 "\"error\", not both";
			return;
		}
		m->kind = RPC_KIND_RESPONSE;
		return;
	}
	m->invalid_msg = "not a request, notification or response (no "
	                 "\"method\")";
}

int rpc_parse(const char *body, size_t len, unsigned max_depth,
              struct rpc_batch *out, int *code, const char **msg)
{
	struct rpc_scan sc;
	int r;

	memset(out, 0, sizeof(*out));
	*code = 0;
	*msg = NULL;
	r = rpc_scan(body, len, max_depth, &sc);
	if (r < 0) {
		*code = r == -E2BIG && sc.err && strstr(sc.err, "batch")
		            ? RPC_INVALID_REQUEST
		            : RPC_PARSE_ERROR;
		*msg = sc.err;
		return r;
	}
	out->root = cJSON_ParseWithLength(body, len);
	if (!out->root) {
		*code = RPC_PARSE_ERROR;
		*msg = "malformed JSON";
		return -EINVAL;
	}
	out->is_array = sc.is_array;
	if (sc.is_array) {
		cJSON *it;
		size_t i = 0;

		if (sc.n_items == 0) {
			cJSON_Delete(out->root);
			out->root = NULL;
			*code = RPC_INVALID_REQUEST;
			*msg = "empty batch";
			return -EINVAL;
		}
		cJSON_ArrayForEach (it, out->root) {
			if (i >= RPC_MAX_BATCH)
				break;
			classify(&out->msgs[i], it, body, sc.ids[i].off,
			         sc.ids[i].len);
			i++;
		}
		out->n = i;
	} else {
		classify(&out->msgs[0], out->root, body, sc.ids[0].off,
		         sc.ids[0].len);
		out->n = 1;
	}
	return 0;
}

void rpc_batch_finish(struct rpc_batch *b)
{
	if (!b)
		return;
	for (size_t i = 0; i < b->n; i++) {
		free(b->msgs[i].id_raw);
		free(b->msgs[i].id_key);
	}
	cJSON_Delete(b->root);
	memset(b, 0, sizeof(*b));
}

static char *envelope(const char *id_raw, bool with_id, const char *method,
                      const char *member, cJSON *value)
{
	cJSON *o = cJSON_CreateObject();
	char *out = NULL, *p;

	if (!o) {
		cJSON_Delete(value);
		return NULL;
	}
	if (!cJSON_AddStringToObject(o, "jsonrpc", "2.0"))
		goto done;
	if (with_id) {
		if (!(id_raw ? cJSON_AddRawToObject(o, "id", id_raw)
		             : cJSON_AddNullToObject(o, "id")))
			goto done;
	}
	if (method && !cJSON_AddStringToObject(o, "method", method))
		goto done;
	if (value) {
		if (!cJSON_AddItemToObject(o, member, value))
			goto done;
		value = NULL;
	}
	p = cJSON_PrintUnformatted(o);
	if (p) {
		out = strdup(p);
		cJSON_free(p);
	}
done:
	cJSON_Delete(value);
	cJSON_Delete(o);
	return out;
}

char *rpc_result(const char *id_raw, cJSON *result)
{
	if (!result)
		result = cJSON_CreateObject();
	return envelope(id_raw, true, NULL, "result", result);
}

char *rpc_error(const char *id_raw, int code, const char *message, cJSON *data)
{
	cJSON *e = cJSON_CreateObject();

	if (!e || !cJSON_AddNumberToObject(e, "code", code) ||
	    !cJSON_AddStringToObject(e, "message", message)) {
		cJSON_Delete(e);
		cJSON_Delete(data);
		return NULL;
	}
	if (data)
		cJSON_AddItemToObject(e, "data", data);
	return envelope(id_raw, true, NULL, "error", e);
}

char *rpc_errorf(const char *id_raw, int code, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return rpc_error(id_raw, code, msg, NULL);
}

char *rpc_notification(const char *method, cJSON *params)
{
	return envelope(NULL, false, method, "params", params);
}

char *rpc_request(const char *id_raw, const char *method, cJSON *params)
{
	return envelope(id_raw, true, method, "params", params);
}
