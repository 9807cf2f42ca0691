/* SPDX-License-Identifier: MIT */
/*
 * test_request_state: sealed request state. What is sealed opens with the same
 * key and only with it; any change to the text, a truncation, another
 * key, an expired state and oversized or malformed text are refused with
 * a message; the payload comes back as it went in.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "mcp/request_state.h"
#include "tap.h"

#define NOW 1800000000LL

static char *seal_sample(const unsigned char *key, long long expires)
{
	cJSON *p = cJSON_CreateObject();
	char *s;

	cJSON_AddStringToObject(p, "b", "binding");
	cJSON_AddItemToObject(p, "a",
	                      cJSON_Parse("{\"k\":{\"action\":"
	                                  "\"accept\"}}"));
	s = request_state_seal(key, p, expires);
	cJSON_Delete(p);
	return s;
}

static int open_text(const unsigned char *key, const char *s, long long now,
                     cJSON **out)
{
	char err[256] = "";
	int r =
	    request_state_open(key, s, strlen(s), now, out, err, sizeof(err));

	if (r < 0 && !err[0])
		return -9999; /* every refusal must say why */
	return r;
}

int main(void)
{
	unsigned char key[REQUEST_STATE_KEY_LEN], other[REQUEST_STATE_KEY_LEN];
	cJSON *p = NULL;
	char *s, *t;
	size_t n;

	request_state_key(
	    (const unsigned char *)"secret-one-0123456789abcdef0123", 31, key);
	request_state_key(
	    (const unsigned char *)"secret-two-0123456789abcdef0123", 31,
	    other);
	ok(memcmp(key, other, sizeof(key)) != 0, "secrets give distinct keys");

	s = seal_sample(key, NOW + 60);
	ok(s && strchr(s, '.'), "sealed text has payload and tag");
	is_int(open_text(key, s, NOW, &p), 0, "opens with its key");
	ok(p && cJSON_IsString(cJSON_GetObjectItem(p, "b")) &&
	       strcmp(cJSON_GetObjectItem(p, "b")->valuestring, "binding") == 0,
	   "payload member survives");
	ok(p && cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(
	            cJSON_GetObjectItem(p, "a"), "k")),
	   "nested answers survive");
	cJSON_Delete(p);
	p = NULL;

	is_int(open_text(other, s, NOW, &p), -EINVAL, "another key: refused");
	ok(p == NULL, "nothing returned on refusal");
	is_int(open_text(key, s, NOW + 61, &p), -ETIMEDOUT, "expired: refused");

	n = strlen(s);
	t = malloc(n + 16);
	memcpy(t, s, n + 1);
	t[3] = t[3] == 'A' ? 'B' : 'A';
	is_int(open_text(key, t, NOW, &p), -EINVAL, "payload byte changed");
	memcpy(t, s, n + 1);
	t[n - 3] = t[n - 3] == 'A' ? 'B' : 'A';
	is_int(open_text(key, t, NOW, &p), -EINVAL, "tag byte changed");
	memcpy(t, s, n + 1);
	strcpy(t + n, "-TAMPERED");
	is_int(open_text(key, t, NOW, &p), -EINVAL, "suffix appended");
	t[n - 1] = '\0';
	is_int(open_text(key, t, NOW, &p), -EINVAL, "truncated");
	is_int(open_text(key, "", NOW, &p), -EINVAL, "empty text");
	is_int(open_text(key, "no-dot-at-all", NOW, &p), -EINVAL, "no tag");
	is_int(open_text(key, ".AAAA", NOW, &p), -EINVAL, "bad tag length");
	free(t);

	t = malloc(REQUEST_STATE_MAX_TEXT + 2);
	memset(t, 'A', REQUEST_STATE_MAX_TEXT + 1);
	t[REQUEST_STATE_MAX_TEXT + 1] = '\0';
	is_int(open_text(key, t, NOW, &p), -E2BIG, "oversized text refused");
	free(t);
	free(s);

	/* A payload too large to carry is not sealed at all. */
	p = cJSON_CreateObject();
	t = malloc(REQUEST_STATE_MAX_TEXT);
	memset(t, 'x', REQUEST_STATE_MAX_TEXT - 1);
	t[REQUEST_STATE_MAX_TEXT - 1] = '\0';
	cJSON_AddStringToObject(p, "big", t);
	ok(request_state_seal(key, p, NOW) == NULL,
	   "oversized payload not sealed");
	cJSON_Delete(p);
	free(t);
	return tap_done();
}
