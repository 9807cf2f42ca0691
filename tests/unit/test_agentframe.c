/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "run/warm/agentframe.h"
#include "tap.h"
#include "util/buf.h"

struct got {
	struct buf types;    /* one byte per frame */
	struct buf payloads; /* payloads joined with '|' */
	size_t frames;
	size_t
	    stop_at; /* return -ECANCELED on this frame (1-based), 0: never */
};

static int got_fn(void *arg, unsigned char type, const unsigned char *p,
                  size_t n)
{
	struct got *g = arg;

	g->frames++;
	if (g->stop_at && g->frames == g->stop_at)
		return -ECANCELED;
	if (buf_putc(&g->types, (char)type) < 0 ||
	    buf_append(&g->payloads, p, n) < 0 ||
	    buf_putc(&g->payloads, '|') < 0)
		return -ENOMEM;
	return 0;
}

static void got_init(struct got *g)
{
	memset(g, 0, sizeof(*g));
	buf_init(&g->types, 0);
	buf_init(&g->payloads, 0);
}

static void got_finish(struct got *g)
{
	buf_finish(&g->types);
	buf_finish(&g->payloads);
}

/* Appends one frame (length, type, payload) to b. */
static void frame(struct buf *b, unsigned char type, const char *payload,
                  size_t n)
{
	unsigned char h[AGENTFRAME_HDR];

	if (agentframe_header(h, type, n, UINT32_MAX) < 0 ||
	    buf_append(b, h, sizeof(h)) < 0 || buf_append(b, payload, n) < 0)
		abort();
}

static void test_header(void)
{
	unsigned char h[AGENTFRAME_HDR];

	is_int(agentframe_header(h, 'o', 3, 16), 0, "header fits");
	ok(memcmp(h, "\0\0\0\4o", 5) == 0, "header is length 4, type o");
	is_int(agentframe_header(h, 'o', 16, 16), -EMSGSIZE,
	       "payload + type above max refused");
	is_int(agentframe_header(h, 'p', 0, 16), 0, "empty payload allowed");
	ok(memcmp(h, "\0\0\0\1p", 5) == 0, "empty payload has length 1");
	is_int(
	    agentframe_header(h, 'o', AGENTFRAME_OUTPUT_CHUNK, AGENTFRAME_MAX),
	    0, "a full output chunk fits the agent's limit");
}

/* Feeds s in chunks of step bytes (0: all at once). */
static int feed_steps(struct agentframe_decoder *d, const struct buf *s,
                      size_t step, struct got *g)
{
	size_t off = 0;
	int r = 0;

	while (off < s->len && r == 0) {
		size_t take = step ? step : s->len;

		if (take > s->len - off)
			take = s->len - off;
		r = agentframe_feed(d, s->data + off, take, got_fn, g);
		off += take;
	}
	return r;
}

static void test_decode_chunks(void)
{
	static const size_t steps[] = {0, 1, 2, 3, 4, 5, 7, 64};
	struct buf s;

	buf_init(&s, 0);
	frame(&s, 'E', "hello", 5);
	frame(&s, 'P', "", 0);
	frame(&s, 'C', "/data", 5);
	for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
		struct agentframe_decoder d;
		struct got g;
		int r;

		got_init(&g);
		agentframe_decoder_init(&d, 64);
		r = feed_steps(&d, &s, steps[i], &g);
		is_int(r, 0, "three frames decode");
		is_str(g.types.data, "EPC", "types in order");
		is_str(g.payloads.data, "hello||/data|", "payloads intact");
		is_int(agentframe_end(&d), 0, "ends on a boundary");
		is_int(agentframe_offset(&d), s.len, "every byte consumed");
		agentframe_decoder_finish(&d);
		got_finish(&g);
	}
	buf_finish(&s);
}

static void test_decode_errors(void)
{
	struct agentframe_decoder d;
	struct got g;
	struct buf s;
	int r;

	/* Zero length. */
	got_init(&g);
	agentframe_decoder_init(&d, 64);
	r = agentframe_feed(&d, "\0\0\0\0", 4, got_fn, &g);
	is_int(r, -EPROTO, "zero length is a protocol error");
	is_int(agentframe_feed(&d, "\0\0\0\1P", 5, got_fn, &g), -EPROTO,
	       "the error is sticky");
	is_int(g.frames, 0, "nothing delivered");
	agentframe_decoder_finish(&d);
	got_finish(&g);

	/* Over the cap, even before any payload arrives. */
	got_init(&g);
	agentframe_decoder_init(&d, 64);
	r = agentframe_feed(&d, "\0\0\0\x41", 4, got_fn, &g);
	is_int(r, -EMSGSIZE, "length 65 over a cap of 64 refused");
	is_int(agentframe_buffered(&d), 0, "nothing allocated for it");
	agentframe_decoder_finish(&d);
	got_finish(&g);

	/* A huge claimed length. */
	got_init(&g);
	agentframe_decoder_init(&d, AGENTFRAME_MAX_IN);
	r = agentframe_feed(&d, "\xff\xff\xff\xffX", 5, got_fn, &g);
	is_int(r, -EMSGSIZE, "4 GiB claim refused");
	is_int(agentframe_offset(&d), 4, "stopped after the length");
	agentframe_decoder_finish(&d);
	got_finish(&g);

	/* Exactly at the cap. */
	got_init(&g);
	buf_init(&s, 0);
	{
		char p[63];

		memset(p, 'x', sizeof(p));
		frame(&s, 'o', p, sizeof(p));
	}
	agentframe_decoder_init(&d, 64);
	is_int(feed_steps(&d, &s, 10, &g), 0, "length equal to the cap ok");
	is_int(g.frames, 1, "delivered");
	agentframe_decoder_finish(&d);
	got_finish(&g);
	buf_finish(&s);

	/* Truncated input. */
	got_init(&g);
	agentframe_decoder_init(&d, 64);
	is_int(agentframe_feed(&d, "\0\0", 2, got_fn, &g), 0, "half a length");
	is_int(agentframe_end(&d), -EPIPE, "cut inside the length");
	is_int(agentframe_feed(&d, "\0\3Xa", 4, got_fn, &g), 0, "cut payload");
	is_int(agentframe_end(&d), -EPIPE, "cut inside the payload");
	is_int(agentframe_feed(&d, "b", 1, got_fn, &g), 0, "rest arrives");
	is_int(agentframe_end(&d), 0, "now on a boundary");
	is_str(g.payloads.data, "ab|", "split payload joined");
	agentframe_decoder_finish(&d);
	got_finish(&g);

	/* A callback error stops the decoder where it was. */
	got_init(&g);
	g.stop_at = 2;
	buf_init(&s, 0);
	frame(&s, 'a', "1", 1);
	frame(&s, 'b', "2", 1);
	frame(&s, 'c', "3", 1);
	agentframe_decoder_init(&d, 64);
	is_int(agentframe_feed(&d, s.data, s.len, got_fn, &g), -ECANCELED,
	       "callback error returned");
	is_str(g.types.data, "a", "frames after the error not delivered");
	is_int(agentframe_feed(&d, "", 0, got_fn, &g), -ECANCELED,
	       "callback error sticky");
	agentframe_decoder_finish(&d);
	got_finish(&g);
	buf_finish(&s);

	agentframe_decoder_finish(NULL);
	ok(strlen(agentframe_strerror(-EMSGSIZE)) > 0, "strerror");
}

/* A large split frame is buffered once and released afterwards. */
static void test_decode_large(void)
{
	struct agentframe_decoder d;
	struct got g;
	struct buf s;
	char *p = malloc(200000);

	if (!p)
		abort();
	memset(p, 'z', 200000);
	buf_init(&s, 0);
	frame(&s, 'E', p, 200000);
	got_init(&g);
	agentframe_decoder_init(&d, AGENTFRAME_MAX_IN);
	is_int(feed_steps(&d, &s, 4096, &g), 0, "200 kB frame in 4 kB pieces");
	is_int(g.payloads.len, 200001, "payload whole");
	is_int(agentframe_buffered(&d), 0, "large buffer released");
	agentframe_decoder_finish(&d);
	got_finish(&g);
	buf_finish(&s);
	free(p);
}

static void test_tlv(void)
{
	unsigned char b[64];
	struct agentframe_tlv it;
	const unsigned char *v;
	unsigned char tag;
	size_t off = 0, len;

	is_int(agentframe_tlv_put(b, sizeof(b), &off, 'n', "7", 1), 0, "put n");
	is_int(agentframe_tlv_put(b, sizeof(b), &off, 'a', "echo", 4), 0,
	       "put a");
	is_int(agentframe_tlv_put(b, sizeof(b), &off, 'a', "", 0), 0,
	       "put empty a");
	is_int(off, 5 + 1 + 5 + 4 + 5, "offset advanced");
	is_int(agentframe_tlv_check(b, off), 0, "records check");
	agentframe_tlv_init(&it, b, off);
	is_int(agentframe_tlv_next(&it, &tag, &v, &len), 1, "first record");
	ok(tag == 'n' && len == 1 && v[0] == '7', "n = 7");
	is_int(agentframe_tlv_next(&it, &tag, &v, &len), 1, "second");
	ok(tag == 'a' && len == 4 && memcmp(v, "echo", 4) == 0, "a = echo");
	is_int(agentframe_tlv_next(&it, &tag, &v, &len), 1, "third");
	ok(tag == 'a' && len == 0, "empty value");
	is_int(agentframe_tlv_next(&it, &tag, &v, &len), 0, "end");
	is_int(agentframe_tlv_next(&it, &tag, &v, &len), 0, "end again");

	/* Does not fit. */
	{
		size_t o2 = 60;

		is_int(agentframe_tlv_put(b, sizeof(b), &o2, 'x', "abc", 3),
		       -ENOSPC, "record past cap refused");
		is_int(o2, 60, "offset unchanged");
		o2 = 100;
		is_int(agentframe_tlv_put(b, sizeof(b), &o2, 'x', "", 0),
		       -ENOSPC, "offset past cap refused");
	}

	/* Truncated and lying records. */
	is_int(agentframe_tlv_check(b, off - 1), -EPROTO, "cut value");
	is_int(agentframe_tlv_check(b, 3), -EPROTO, "cut header");
	is_int(agentframe_tlv_check(b, 0), 0, "empty payload is fine");
	{
		const unsigned char lie[] = {'a', 0xff, 0xff, 0xff, 0xff, 'x'};

		is_int(agentframe_tlv_check(lie, sizeof(lie)), -EPROTO,
		       "length beyond the payload");
	}
}

static void test_id(void)
{
	uint64_t v;

	is_int(agentframe_parse_id("0", 1, &v), 0, "0");
	is_int(agentframe_parse_id("42", 2, &v), 0, "42");
	is_int(v, 42, "value 42");
	is_int(agentframe_parse_id("9007199254740991", 16, &v), 0, "2^53 - 1");
	is_int(agentframe_parse_id("9007199254740992", 16, &v), -EINVAL,
	       "2^53 refused");
	is_int(agentframe_parse_id("", 0, &v), -EINVAL, "empty");
	is_int(agentframe_parse_id("07", 2, &v), -EINVAL, "leading zero");
	is_int(agentframe_parse_id("-1", 2, &v), -EINVAL, "sign");
	is_int(agentframe_parse_id("1 ", 2, &v), -EINVAL, "space");
	is_int(agentframe_parse_id("99999999999999999", 17, &v), -EINVAL,
	       "17 digits");
}

/* json_str output must parse back to the expected string. */
static void json_case(const char *in, size_t n, const char *want,
                      const char *name)
{
	char out[256];
	size_t len = agentframe_json_str(out, sizeof(out), in, n);
	cJSON *j;

	ok(len < sizeof(out), "%s: fits", name);
	j = cJSON_ParseWithLength(out, len);
	ok(j && cJSON_IsString(j) && strcmp(j->valuestring, want) == 0,
	   "%s: parses back", name);
	cJSON_Delete(j);
}

static void test_json(void)
{
	char small[8];
	size_t len;

	json_case("plain", 5, "plain", "ascii");
	json_case("a\"b\\c", 5, "a\"b\\c", "quote and backslash");
	json_case("l1\nl2\tx\r", 8, "l1\nl2\tx\r", "newline tab cr");
	json_case("\x01\x1f", 2, "\x01\x1f", "control characters");
	json_case("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", 14,
	          "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", "utf-8 kept");
	json_case("a\xff"
	          "b",
	          3,
	          "a\xef\xbf\xbd"
	          "b",
	          "invalid byte replaced");
	json_case("\xc0\xaf", 2, "\xef\xbf\xbd\xef\xbf\xbd", "overlong");
	json_case("\xed\xa0\x80", 3, "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd",
	          "surrogate");
	json_case("\xe2\x82", 2, "\xef\xbf\xbd\xef\xbf\xbd", "cut sequence");
	json_case("\xf4\x90\x80\x80", 4,
	          "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd",
	          "above U+10FFFF");
	json_case("a\0b", 3, "a", "NUL escaped (cJSON stops at it)");
	{
		char out[16];

		len = agentframe_json_str(out, sizeof(out), "a\0b", 3);
		is_str(out, "\"a\\u0000b\"", "NUL as \\u0000");
		is_int(len, 10, "length of it");
	}

	/* Cut short: reports the need, stays NUL-terminated and whole. */
	len = agentframe_json_str(small, sizeof(small), "abc\"\"\"\"", 7);
	is_int(len, 2 + 3 + 8, "needed length reported");
	is_str(small, "\"abc\\\"", "cut at an escape boundary");
	len = agentframe_json_str(small, 7, "\xe2\x82\xac\xe2\x82\xac", 6);
	is_str(small, "\"\xe2\x82\xac", "cut at a character boundary");
	is_int(len, 8, "need");
	is_int(agentframe_json_str(NULL, 0, "x", 1), 3, "size query");
}

int main(void)
{
	test_header();
	test_decode_chunks();
	test_decode_errors();
	test_decode_large();
	test_tlv();
	test_id();
	test_json();
	return tap_done();
}
