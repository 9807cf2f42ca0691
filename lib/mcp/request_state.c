/* SPDX-License-Identifier: MIT */
/*
 * request_state: sealed request state for multi round-trip requests. See
 * request_state.h. Stateless and thread-safe.
 */
#include "mcp/request_state.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "util/b64.h"

#define TAG_LEN 32
#define TAG_B64 44 /* base64 of TAG_LEN bytes */
#define LABEL "mcp-sandboxd requestState v1"

void request_state_key(const unsigned char *secret, size_t secret_len,
                       unsigned char key[REQUEST_STATE_KEY_LEN])
{
	unsigned int n = REQUEST_STATE_KEY_LEN;
	static const unsigned char none[1] = {0};

	if (!HMAC(EVP_sha256(), secret_len ? secret : none, (int)secret_len,
	          (const unsigned char *)LABEL, sizeof(LABEL) - 1, key, &n))
		memset(key, 0, REQUEST_STATE_KEY_LEN);
}

static bool tag_of(const unsigned char key[REQUEST_STATE_KEY_LEN],
                   const char *payload, size_t len, unsigned char tag[TAG_LEN])
{
	unsigned int n = TAG_LEN;

	return HMAC(EVP_sha256(), key, REQUEST_STATE_KEY_LEN,
	            (const unsigned char *)payload, len, tag, &n) != NULL;
}

char *request_state_seal(const unsigned char key[REQUEST_STATE_KEY_LEN],
                         cJSON *payload, long long expires)
{
	unsigned char tag[TAG_LEN];
	char *json, *out = NULL;
	size_t jlen, b64len;
	cJSON *e;

	e = cJSON_CreateNumber((double)expires);
	if (!e || !cJSON_IsObject(payload)) {
		cJSON_Delete(e);
		return NULL;
	}
	if (cJSON_GetObjectItemCaseSensitive(payload, "exp"))
		cJSON_ReplaceItemInObjectCaseSensitive(payload, "exp", e);
	else
		cJSON_AddItemToObject(payload, "exp", e);
	json = cJSON_PrintUnformatted(payload);
	if (!json)
		return NULL;
	jlen = strlen(json);
	b64len = (jlen + 2) / 3 * 4;
	if (b64len + 1 + TAG_B64 > REQUEST_STATE_MAX_TEXT)
		goto out;
	out = malloc(b64len + 1 + TAG_B64 + 1);
	if (!out || !tag_of(key, json, jlen, tag)) {
		free(out);
		out = NULL;
		goto out;
	}
	EVP_EncodeBlock((unsigned char *)out, (const unsigned char *)json,
	                (int)jlen);
	out[b64len] = '.';
	EVP_EncodeBlock((unsigned char *)out + b64len + 1, tag, TAG_LEN);
out:
	cJSON_free(json);
	return out;
}

static int refuse(char *err, size_t errlen, int code, const char *why)
{
	snprintf(err, errlen,
	         "requestState %s; send the requestState of the latest "
	         "InputRequiredResult unchanged, or call again without it "
	         "to start over",
	         why);
	return code;
}

int request_state_open(const unsigned char key[REQUEST_STATE_KEY_LEN],
                       const char *text, size_t len, long long now,
                       cJSON **payload, char *err, size_t errlen)
{
	/* b64_decode() may write n / 4 * 3 bytes before it checks the end. */
	unsigned char tag[TAG_B64 / 4 * 3], want[TAG_LEN];
	unsigned char *json = NULL;
	const char *dot;
	size_t plen, jlen, tlen;
	char why[160];
	const cJSON *exp;
	cJSON *p;
	int r;

	*payload = NULL;
	if (len > REQUEST_STATE_MAX_TEXT)
		return refuse(err, errlen, -E2BIG, "is too long");
	dot = memchr(text, '.', len);
	if (!dot || (size_t)(text + len - dot - 1) != TAG_B64)
		return refuse(err, errlen, -EINVAL,
		              "was not issued by this server or was altered");
	plen = (size_t)(dot - text);
	if (b64_decode(dot + 1, TAG_B64, tag, &tlen, why, sizeof(why)) < 0 ||
	    tlen != TAG_LEN)
		return refuse(err, errlen, -EINVAL,
		              "was not issued by this server or was altered");
	json = malloc(plen / 4 * 3 + 1);
	if (!json)
		return refuse(err, errlen, -ENOMEM, "could not be read");
	if (b64_decode(text, plen, json, &jlen, why, sizeof(why)) < 0 ||
	    !tag_of(key, (const char *)json, jlen, want) ||
	    CRYPTO_memcmp(tag, want, TAG_LEN) != 0) {
		r = refuse(err, errlen, -EINVAL,
		           "was not issued by this server or was altered");
		goto out;
	}
	/* Authentic: the server wrote this JSON itself. */
	p = cJSON_ParseWithLength((const char *)json, jlen);
	exp = cJSON_GetObjectItemCaseSensitive(p, "exp");
	if (!cJSON_IsObject(p) || !cJSON_IsNumber(exp)) {
		cJSON_Delete(p);
		r = refuse(err, errlen, -EINVAL, "could not be read");
		goto out;
	}
	if ((double)now > exp->valuedouble) {
		cJSON_Delete(p);
		r = refuse(err, errlen, -ETIMEDOUT, "has expired");
		goto out;
	}
	*payload = p;
	r = 0;
out:
	free(json);
	return r;
}
