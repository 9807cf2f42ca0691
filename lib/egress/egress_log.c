/* SPDX-License-Identifier: MIT */
/*
 * egress_log: parser of the egress proxy's access log and the per-run
 * facts made from it; see egress_log.h. Pure over caller memory.
 */
#include "egress/egress_log.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "util/netaddr.h"

#define EL_FIELDS 10

/* Digits only, at most max of them, into *v. */
static int el_num(const char *p, size_t n, size_t max, long long *v)
{
	long long x = 0;

	if (n == 0 || n > max)
		return -EINVAL;
	for (size_t i = 0; i < n; i++) {
		if (p[i] < '0' || p[i] > '9')
			return -EINVAL;
		x = x * 10 + (p[i] - '0');
	}
	*v = x;
	return 0;
}

/* A byte count: digits, or "-" for none. */
static int el_bytes(const char *p, size_t n, long long *v)
{
	if (n == 1 && p[0] == '-') {
		*v = 0;
		return 0;
	}
	return el_num(p, n, 15, v);
}

/* "1795905312.440" into milliseconds. */
static int el_time(const char *p, size_t n, long long *ms)
{
	const char *dot = memchr(p, '.', n);
	long long s, frac;

	if (!dot || n - (size_t)(dot - p) != 4 ||
	    el_num(p, (size_t)(dot - p), 12, &s) < 0 ||
	    el_num(dot + 1, 3, 3, &frac) < 0)
		return -EINVAL;
	*ms = s * 1000 + frac;
	return 0;
}

static bool el_token(const char *p, size_t n, size_t max, const char *set)
{
	if (n == 0 || n > max)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!strchr(set, p[i]) || p[i] == '\0')
			return false;
	return true;
}

static int el_copy(char *dst, size_t len, const char *p, size_t n)
{
	if (n >= len)
		return -EINVAL;
	memcpy(dst, p, n);
	dst[n] = '\0';
	return 0;
}

#define EL_UPPER "ABCDEFGHIJKLMNOPQRSTUVWXYZ_"
#define EL_HOST                                                                \
	"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_:[]"

static int el_verdict(const char *status, size_t sn, const char *note,
                      size_t nn, enum egress_verdict *v)
{
	bool denied = sn >= 10 && memcmp(status, "TCP_DENIED", 10) == 0;

	if (!el_token(note, nn, 16, "abcdefghijklmnopqrstuvwxyz-"))
		return -EINVAL;
	if (!denied)
		*v = EGRESS_ALLOWED;
	else if (nn == 7 && memcmp(note, "allowed", 7) == 0)
		*v = EGRESS_BLOCKED_ADDRESS;
	else
		*v = EGRESS_BLOCKED_LIST;
	return 0;
}

int egress_log_parse(const char *p, size_t n, struct egress_log_entry *out)
{
	const char *f[EL_FIELDS];
	size_t fl[EL_FIELDS], nf = 0, start = 0;
	long long port, code;
	struct netaddr a;

	memset(out, 0, sizeof(*out));
	if (n == 0 || n > EGRESS_LOG_LINE_MAX)
		return -EINVAL;
	for (size_t i = 0; i <= n; i++) {
		if (i < n && p[i] != ' ')
			continue;
		if (nf == EL_FIELDS || i == start)
			goto bad;
		f[nf] = p + start;
		fl[nf++] = i - start;
		start = i + 1;
	}
	if (nf != EL_FIELDS)
		goto bad;
	if (el_time(f[0], fl[0], &out->time_ms) < 0 ||
	    el_copy(out->src, sizeof(out->src), f[1], fl[1]) < 0 ||
	    netaddr_parse(f[1], fl[1], &a) < 0 || !strchr(out->src, '.') ||
	    !el_token(f[2], fl[2], 16, EL_UPPER) ||
	    el_copy(out->method, sizeof(out->method), f[2], fl[2]) < 0 ||
	    !el_token(f[3], fl[3], EGRESS_HOST_MAX, EL_HOST) ||
	    el_copy(out->host, sizeof(out->host), f[3], fl[3]) < 0 ||
	    el_num(f[4], fl[4], 5, &port) < 0 || port > 65535 ||
	    !el_token(f[5], fl[5], 40, EL_UPPER) ||
	    el_num(f[6], fl[6], 3, &code) < 0 ||
	    el_bytes(f[7], fl[7], &out->bytes_in) < 0 ||
	    el_bytes(f[8], fl[8], &out->bytes_out) < 0 ||
	    el_verdict(f[5], fl[5], f[9], fl[9], &out->verdict) < 0)
		goto bad;
	out->port = (unsigned)port;
	out->http_status = (int)code;
	return 0;
bad:
	memset(out, 0, sizeof(*out));
	return -EINVAL;
}

size_t egress_log_feed(const char *buf, size_t n,
                       void (*fn)(void *arg, const struct egress_log_entry *e),
                       void *arg)
{
	size_t at = 0;

	for (;;) {
		const char *nl = memchr(buf + at, '\n', n - at);
		struct egress_log_entry e;
		size_t len;

		if (!nl)
			break;
		len = (size_t)(nl - (buf + at));
		if (egress_log_parse(buf + at, len, &e) == 0)
			fn(arg, &e);
		at += len + 1;
	}
	return at;
}

const char *egress_verdict_reason(enum egress_verdict v)
{
	switch (v) {
	case EGRESS_ALLOWED:
		return "allowed";
	case EGRESS_BLOCKED_LIST:
		return "not in the allow-list";
	case EGRESS_BLOCKED_ADDRESS:
		return "resolves to a private, local or metadata address "
		       "the operator did not allow";
	}
	return "blocked";
}

void egress_facts_add(struct egress_facts *f, const struct egress_log_entry *e)
{
	struct egress_dest *d = NULL;

	if (e->verdict == EGRESS_ALLOWED)
		f->allowed++;
	else
		f->blocked++;
	f->bytes_in += e->bytes_in;
	f->bytes_out += e->bytes_out;
	for (size_t i = 0; i < f->n_dests && !d; i++)
		if (f->dests[i].port == e->port &&
		    f->dests[i].verdict == e->verdict &&
		    strcmp(f->dests[i].host, e->host) == 0)
			d = &f->dests[i];
	if (!d) {
		if (f->n_dests == EGRESS_FACTS_DEST_MAX) {
			f->dests_truncated = true;
			return;
		}
		d = &f->dests[f->n_dests++];
		memcpy(d->host, e->host, sizeof(d->host));
		d->port = e->port;
		d->verdict = e->verdict;
	}
	d->requests++;
	d->bytes += e->bytes_in + e->bytes_out;
}

static bool ef_dest_json(cJSON *arr, const struct egress_dest *d)
{
	cJSON *o = cJSON_CreateObject();

	if (!o || !cJSON_AddItemToArray(arr, o))
		return cJSON_Delete(o), false;
	if (!cJSON_AddStringToObject(o, "host", d->host) ||
	    !cJSON_AddNumberToObject(o, "port", d->port) ||
	    !cJSON_AddBoolToObject(o, "allowed",
	                           d->verdict == EGRESS_ALLOWED) ||
	    !cJSON_AddNumberToObject(o, "requests", d->requests) ||
	    !cJSON_AddNumberToObject(o, "bytes", (double)d->bytes))
		return false;
	if (d->verdict != EGRESS_ALLOWED &&
	    !cJSON_AddStringToObject(o, "reason",
	                             egress_verdict_reason(d->verdict)))
		return false;
	return true;
}

cJSON *egress_facts_json(const struct egress_facts *f)
{
	cJSON *o = cJSON_CreateObject(), *arr;

	if (!o || !cJSON_AddNumberToObject(o, "allowed", f->allowed) ||
	    !cJSON_AddNumberToObject(o, "blocked", f->blocked) ||
	    !cJSON_AddNumberToObject(o, "bytes_in", (double)f->bytes_in) ||
	    !cJSON_AddNumberToObject(o, "bytes_out", (double)f->bytes_out) ||
	    !(arr = cJSON_AddArrayToObject(o, "destinations")))
		goto fail;
	for (size_t i = 0; i < f->n_dests; i++)
		if (!ef_dest_json(arr, &f->dests[i]))
			goto fail;
	if (f->dests_truncated &&
	    !cJSON_AddBoolToObject(o, "destinations_truncated", true))
		goto fail;
	return o;
fail:
	cJSON_Delete(o);
	return NULL;
}
