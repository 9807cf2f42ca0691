/* SPDX-License-Identifier: MIT */
/*
 * test_rpc: the JSON-RPC scanner (depth, strings, grammar, ids), the parser's
 * message kinds and refusals, id keys and error envelopes. Each case runs
 * alone: `test_rpc CASE...` (`test_rpc --list` names them).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "mcp/rpc.h"
#include "tap.h"

static int scan(const char *s, unsigned depth, struct rpc_scan *sc)
{
	return rpc_scan(s, strlen(s), depth, sc);
}

static char *nested(size_t n)
{
	char *s = malloc(2 * n + 1);

	for (size_t i = 0; i < n; i++) {
		s[i] = '[';
		s[2 * n - 1 - i] = ']';
	}
	s[2 * n] = '\0';
	return s;
}

/* The scanner records raw id spans and refuses nesting past the limit without
 * recursing. */
static void test_scan_depth(void)
{
	struct rpc_scan sc;
	char *s;

	is_int(scan("{\"jsonrpc\":\"2.0\",\"id\":12345678901234567890,"
	            "\"method\":\"ping\"}",
	            64, &sc),
	       0, "valid object scans");
	is_int(sc.ids[0].len, 20, "raw id span recorded");

	s = nested(65);
	ok(rpc_scan(s, strlen(s), 64, &sc) == -E2BIG,
	   "65 levels refused at 64");
	free(s);
	s = nested(100000);
	ok(rpc_scan(s, strlen(s), 64, &sc) == -E2BIG,
	   "100000 levels refused without recursion");
	free(s);
	s = nested(64);
	is_int(rpc_scan(s, strlen(s), 64, &sc), 0, "64 levels accepted");
	free(s);
}

/* Strings: escapes and UTF-8 the scanner refuses or accepts. */
static void test_scan_strings(void)
{
	struct rpc_scan sc;

	ok(scan("{\"a\":\"\\u0000\"}", 64, &sc) == -EINVAL,
	   "NUL escape refused");
	ok(scan("{\"a\":\"\\ud800\"}", 64, &sc) == -EINVAL,
	   "lone high surrogate refused");
	ok(scan("{\"a\":\"\\udc00x\"}", 64, &sc) == -EINVAL,
	   "lone low surrogate refused");
	is_int(scan("{\"a\":\"\\ud83d\\ude00\"}", 64, &sc), 0,
	       "surrogate pair accepted");
	ok(scan("{\"a\":\"\xc0\xaf\"}", 64, &sc) == -EINVAL,
	   "overlong UTF-8 refused");
	ok(scan("{\"a\":\"\xed\xa0\x80\"}", 64, &sc) == -EINVAL,
	   "UTF-8 encoded surrogate refused");
}

/* Grammar the scanner refuses, batches it counts, escaped keys it recognises.
 */
static void test_scan_grammar(void)
{
	struct rpc_scan sc;

	ok(scan("{\"a\":1,}", 64, &sc) == -EINVAL, "trailing comma refused");
	ok(scan("{\"a\":01}", 64, &sc) == -EINVAL, "leading zero refused");
	ok(scan("{} x", 64, &sc) == -EINVAL, "trailing garbage refused");
	ok(scan("\"str\"", 64, &sc) == -EINVAL, "bare string refused");
	is_int(scan("[{}, [], 1]", 64, &sc), 0, "batch scans");
	is_int(sc.n_items, 3, "batch item count");
	is_int(scan("[]", 64, &sc), 0, "empty batch scans");
	is_int(sc.n_items, 0, "empty batch has no items");
	is_int(scan("{\"\\u0069d\":7,\"method\":\"x\"}", 64, &sc), 0,
	       "escaped id key");
	is_int(sc.ids[0].len, 1, "escaped id key recognized");
}

/* Ids are kept exactly as sent and echoed back unchanged. */
static void test_parse_ids(void)
{
	struct rpc_batch b;
	int code;
	const char *msg;
	const char *body;
	char *out;

	body =
	    "{\"jsonrpc\":\"2.0\",\"id\":9007199254740993,\"method\":\"ping\"}";
	is_int(rpc_parse(body, strlen(body), 64, &b, &code, &msg), 0,
	       "big id parses");
	is_int(b.msgs[0].kind, RPC_KIND_REQUEST, "it is a request");
	is_str(b.msgs[0].id_raw, "9007199254740993", "id kept exactly");
	out = rpc_result(b.msgs[0].id_raw, NULL);
	is_str(out,
	       "{\"jsonrpc\":\"2.0\",\"id\":9007199254740993,\"result\":{}}",
	       "response echoes the exact id");
	free(out);
	rpc_batch_finish(&b);

	body = "{\"jsonrpc\":\"2.0\",\"id\":\"a\\\"b\",\"method\":\"x\"}";
	is_int(rpc_parse(body, strlen(body), 64, &b, &code, &msg), 0,
	       "string id parses");
	is_str(b.msgs[0].id_key, "s:a\"b", "string id key decoded");
	rpc_batch_finish(&b);
}

/* What kind of message each envelope is, and which are invalid. */
static void test_parse_kinds(void)
{
	struct rpc_batch b;
	int code;
	const char *msg;
	const char *body;

	body = "{\"jsonrpc\":\"2.0\",\"id\":1.5,\"method\":\"x\"}";
	is_int(rpc_parse(body, strlen(body), 64, &b, &code, &msg), 0,
	       "fractional id parses");
	is_int(b.msgs[0].kind, RPC_KIND_INVALID, "fractional id is invalid");
	rpc_batch_finish(&b);

	body = "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}";
	is_int(rpc_parse(body, strlen(body), 64, &b, &code, &msg), 0,
	       "notification parses");
	is_int(b.msgs[0].kind, RPC_KIND_NOTIFICATION, "it is a notification");
	rpc_batch_finish(&b);

	body = "{\"jsonrpc\":\"2.0\",\"id\":\"srv-1\",\"result\":{}}";
	is_int(rpc_parse(body, strlen(body), 64, &b, &code, &msg), 0,
	       "response parses");
	is_int(b.msgs[0].kind, RPC_KIND_RESPONSE, "it is a response");
	rpc_batch_finish(&b);

	body = "{\"jsonrpc\":\"1.0\",\"id\":1,\"method\":\"x\"}";
	is_int(rpc_parse(body, strlen(body), 64, &b, &code, &msg), 0,
	       "wrong version parses");
	is_int(b.msgs[0].kind, RPC_KIND_INVALID, "wrong version is invalid");
	is_str(b.msgs[0].id_raw, "1", "its id is still known");
	rpc_batch_finish(&b);

	body = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":5}";
	is_int(rpc_parse(body, strlen(body), 64, &b, &code, &msg), 0,
	       "numeric method parses");
	is_int(b.msgs[0].kind, RPC_KIND_INVALID, "numeric method is invalid");
	rpc_batch_finish(&b);

	body = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x\",\"params\":3}";
	is_int(rpc_parse(body, strlen(body), 64, &b, &code, &msg), 0,
	       "scalar params parses");
	is_int(b.msgs[0].kind, RPC_KIND_INVALID, "scalar params is invalid");
	rpc_batch_finish(&b);
}

/* Bodies refused as a whole: truncated JSON, empty and oversized batches. */
static void test_parse_refusals(void)
{
	struct rpc_batch b;
	int code;
	const char *msg;
	const char *body;

	body = "{\"jsonrpc\":";
	ok(rpc_parse(body, strlen(body), 64, &b, &code, &msg) < 0 &&
	       code == RPC_PARSE_ERROR,
	   "truncated JSON is a parse error");

	body = "[]";
	ok(rpc_parse(body, strlen(body), 64, &b, &code, &msg) < 0 &&
	       code == RPC_INVALID_REQUEST,
	   "empty batch is an invalid request");

	{
		char big[RPC_MAX_BATCH * 3 + 8];
		size_t k = 0;

		big[k++] = '[';
		for (int i = 0; i <= RPC_MAX_BATCH; i++) {
			big[k++] = '1';
			big[k++] = ',';
		}
		big[k - 1] = ']';
		big[k] = '\0';
		ok(rpc_parse(big, k, 64, &b, &code, &msg) < 0 &&
		       code == RPC_INVALID_REQUEST,
		   "oversized batch refused");
	}
}

/* Number ids are keys only while a double holds them exactly. */
static void test_id_key(void)
{
	cJSON *n = cJSON_CreateNumber(9007199254740991.0);
	char *k = rpc_id_key(n);

	is_str(k, "n:9007199254740991", "2^53 - 1 is an exact id key");
	free(k);
	cJSON_SetNumberValue(n, 9007199254740992.0);
	k = rpc_id_key(n);
	ok(k == NULL, "2^53 is refused: 2^53 + 1 reads as the same double");
	free(k);
	cJSON_SetNumberValue(n, 1.5);
	k = rpc_id_key(n);
	ok(k == NULL, "a fraction is not an id");
	free(k);
	cJSON_Delete(n);
}

/* Error envelopes: escaped, formatted, and cut at 511 bytes. */
static void test_error_envelopes(void)
{
	char *out;

	out = rpc_error(NULL, RPC_METHOD_NOT_FOUND, "no \"such\" method", NULL);
	is_str(out,
	       "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32601,"
	       "\"message\":\"no \\\"such\\\" method\"}}",
	       "error envelope escapes the message");
	free(out);
	out = rpc_errorf("7", RPC_INVALID_PARAMS, "unknown tool '%.3s'; %d",
	                 "abcdef", 2);
	is_str(out,
	       "{\"jsonrpc\":\"2.0\",\"id\":7,\"error\":{\"code\":-32602,"
	       "\"message\":\"unknown tool 'abc'; 2\"}}",
	       "rpc_errorf formats the message");
	free(out);
	{
		char big[1000];

		memset(big, 'x', sizeof(big) - 1);
		big[sizeof(big) - 1] = '\0';
		out = rpc_errorf(NULL, RPC_INTERNAL_ERROR, "%s", big);
		cJSON *o = out ? cJSON_Parse(out) : NULL;
		const cJSON *m = cJSON_GetObjectItemCaseSensitive(
		    cJSON_GetObjectItemCaseSensitive(o, "error"), "message");

		ok(cJSON_IsString(m) && strlen(m->valuestring) == 511,
		   "rpc_errorf cuts a long message at 511 bytes");
		cJSON_Delete(o);
		free(out);
	}
}

int main(int argc, char **argv)
{
	static const struct tap_case cases[] = {
	    {"scan-depth", test_scan_depth},
	    {"scan-strings", test_scan_strings},
	    {"scan-grammar", test_scan_grammar},
	    {"parse-ids", test_parse_ids},
	    {"parse-kinds", test_parse_kinds},
	    {"parse-refusals", test_parse_refusals},
	    {"id-key", test_id_key},
	    {"error-envelopes", test_error_envelopes},
	};

	return tap_run_cases(argc, argv, cases,
	                     sizeof(cases) / sizeof(cases[0]));
}
