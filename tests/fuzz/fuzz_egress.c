/* SPDX-License-Identifier: MIT */
/*
 * fuzz_egress: arbitrary bytes as the egress proxy's access log (what the
 * daemon reads back from Squid, host names chosen by code in a sandbox)
 * and as egress patterns (run_code's network: [...] and the settings).
 * Invariants: the feeder never consumes past the input, every entry it
 * hands out has a bounded host of [A-Za-z0-9.-_:[]] only, a port up to
 * 65535, a dotted IPv4 source and a known verdict; facts stay within their
 * cap and always turn into JSON; an accepted pattern is lower case with
 * only [a-z0-9.-] and an optional leading "*.", renders into policy lines
 * without spaces inside a pattern, and parses back to itself. Any
 * violation aborts. Seed corpus: tests/fuzz/corpus/egress.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "egress/egress_log.h"
#include "config/egress_policy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_entry(void *arg, const struct egress_log_entry *e)
{
	struct egress_facts *f = arg;
	size_t n = strnlen(e->host, sizeof(e->host));

	if (n == 0 || n > EGRESS_HOST_MAX || e->port > 65535 ||
	    !strchr(e->src, '.') ||
	    strspn(e->host,
	           "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
	           "0123456789.-_:[]") != n ||
	    (e->verdict != EGRESS_ALLOWED &&
	     e->verdict != EGRESS_BLOCKED_LIST &&
	     e->verdict != EGRESS_BLOCKED_ADDRESS) ||
	    e->bytes_in < 0 || e->bytes_out < 0)
		abort();
	egress_facts_add(f, e);
	if (f->n_dests > EGRESS_FACTS_DEST_MAX)
		abort();
}

static void check_pattern(const char *s, size_t n)
{
	struct egress_rule r, again;
	struct egress_ports ports = {{80, 443}, 2};
	struct egress_list l;
	char err[512], shown[EGRESS_NAME_MAX + 16], buf[1024];

	if (egress_rule_parse(s, n, &r, err, sizeof(err)) < 0) {
		if (!err[0] || strpbrk(err, "\r\n"))
			abort();
		return;
	}
	if (strspn(r.name, "abcdefghijklmnopqrstuvwxyz0123456789.-") !=
	        strlen(r.name) ||
	    r.port > 65535)
		abort();
	egress_rule_format(&r, shown, sizeof(shown));
	if (egress_rule_parse(shown, strlen(shown), &again, err, sizeof(err)) <
	        0 ||
	    again.wildcard != r.wildcard || again.port != r.port ||
	    strcmp(again.name, r.name) != 0)
		abort();
	l.n = 1;
	l.rules[0] = r;
	if (egress_list_render(&l, &ports, buf, sizeof(buf)) < 0 ||
	    strchr(buf, '?') || strchr(buf, '['))
		abort();
	if (!egress_rule_covers(&r, &r, &ports))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct egress_facts *f = calloc(1, sizeof(*f));
	char *s = malloc(size + 1);
	cJSON *j;
	size_t used;

	if (!f || !s)
		goto out;
	memcpy(s, data, size);
	s[size] = '\0';
	used = egress_log_feed(s, size, check_entry, f);
	if (used > size)
		abort();
	j = egress_facts_json(f);
	if (!j)
		abort();
	cJSON_Delete(j);
	check_pattern(s, size < 300 ? size : 300);
	{
		struct egress_list *l = malloc(sizeof(*l));
		char err[512];

		if (l &&
		    egress_list_parse(s, "fuzz", l, err, sizeof(err)) == 0 &&
		    l->n > EGRESS_RULES_MAX)
			abort();
		free(l);
	}
out:
	free(f);
	free(s);
	return 0;
}
