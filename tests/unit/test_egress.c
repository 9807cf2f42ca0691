/* SPDX-License-Identifier: MIT */
/*
 * Egress allow-lists (egress_policy) and the proxy's access log
 * (egress_log): what a pattern matches and refuses, how a call's list is
 * narrowed within its tenant's, what the proxy's ACL helper gets, the
 * per-tenant setting, and a log parser that takes only whole, well-formed
 * lines and attributes them to destinations.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "egress/egress_log.h"
#include "config/egress_policy.h"
#include "tap.h"

static bool parses(const char *s)
{
	struct egress_rule r;
	char err[256] = "";

	return egress_rule_parse(s, strlen(s), &r, err, sizeof(err)) == 0;
}

static struct egress_rule rule(const char *s)
{
	struct egress_rule r;
	char err[256] = "";

	if (egress_rule_parse(s, strlen(s), &r, err, sizeof(err)) < 0)
		fprintf(stderr, "# %s: %s\n", s, err);
	return r;
}

static void test_patterns(void)
{
	static const char *const good[] = {
	    "api.example.com", "*.github.com", "pypi.org:443",   "localhost",
	    "10.1.2.3",        "a-b.c-d.e",    "API.Example.COM"};
	static const char *const bad[] = {
	    "",        "*",          "*.com",     "*.*.x.com", "a..b",
	    ".a.b",    "a.b.",       "-a.b",      "a-.b",      "a b",
	    "a.b:0",   "a.b:65536",  "a.b:08",    "a.b:",      "a*.b.c",
	    "a.b/c",   "http://a.b", "a.b\r\n",   "[::1]",     "a_b.c",
	    "a.b:1:2", "\xc3\xa9.x", "a.b;rm -rf"};
	struct egress_rule r;
	char err[256] = "";

	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		ok(parses(good[i]), "accepted: %s", good[i]);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ok(!parses(bad[i]), "refused: %zu", i);
	r = rule("API.Example.COM:8443");
	is_str(r.name, "api.example.com", "folded to lower case");
	is_int(r.port, 8443, "the port");
	ok(egress_rule_parse("*.com", 5, &r, err, sizeof(err)) < 0 &&
	       strstr(err, "too wide"),
	   "a wildcard over one label says why: %s", err);
}

static void test_match(void)
{
	struct egress_rule w = rule("*.github.com"), e = rule("github.com");

	ok(egress_rule_matches_name(&w, "api.github.com"), "below");
	ok(egress_rule_matches_name(&w, "a.b.github.com"), "deeper");
	ok(!egress_rule_matches_name(&w, "github.com"), "not the name itself");
	ok(!egress_rule_matches_name(&w, "evilgithub.com"), "not a suffix");
	ok(!egress_rule_matches_name(&w, "github.com.evil.org"), "not inside");
	ok(egress_rule_matches_name(&e, "github.com"), "exact");
	ok(!egress_rule_matches_name(&e, "api.github.com"), "exact only");
}

static void test_narrow(void)
{
	struct egress_ports ports;
	struct egress_list tenant, asked, out;
	char err[512] = "";

	ok(egress_ports_parse("80,443", &ports, err, sizeof(err)) == 0,
	   "ports");
	ok(egress_list_parse("*.github.com api.example.com:8443 pypi.org", "T",
	                     &tenant, err, sizeof(err)) == 0,
	   "tenant list");
	is_int(tenant.n, 3, "three rules");
	ok(egress_list_parse("api.github.com, *.x.github.com pypi.org:443",
	                     "call", &asked, err, sizeof(err)) == 0,
	   "asked");
	ok(egress_list_narrow(&tenant, &asked, &ports, &out, err,
	                      sizeof(err)) == 0,
	   "within: %s", err);
	is_int(out.n, 3, "the call's list");
	ok(egress_list_parse("github.com", "call", &asked, err, sizeof(err)) ==
	       0,
	   "asked the base name");
	ok(egress_list_narrow(&tenant, &asked, &ports, &out, err,
	                      sizeof(err)) == -EPERM &&
	       strstr(err, "'github.com' is not in this tenant's") &&
	       strstr(err, "*.github.com, api.example.com:8443, pypi.org"),
	   "the base name is not below *.: %s", err);
	ok(egress_list_parse("api.example.com", "call", &asked, err,
	                     sizeof(err)) == 0,
	   "asked another port");
	ok(egress_list_narrow(&tenant, &asked, &ports, &out, err,
	                      sizeof(err)) == -EPERM,
	   "a name allowed on 8443 only is not allowed on the default ports");
	ok(egress_list_parse("*.github.com", "call", &asked, err,
	                     sizeof(err)) == 0 &&
	       egress_list_narrow(&tenant, &asked, &ports, &out, err,
	                          sizeof(err)) == 0,
	   "the same wildcard");
	memset(&tenant, 0, sizeof(tenant));
	ok(egress_list_narrow(&tenant, &asked, &ports, &out, err,
	                      sizeof(err)) == -EPERM &&
	       strstr(err, "none: no network"),
	   "an empty tenant list allows nothing: %s", err);
}

static void test_render(void)
{
	struct egress_ports ports;
	struct egress_list l;
	char err[256] = "", buf[256], tiny[8];

	ok(egress_ports_parse("80 443", &ports, err, sizeof(err)) == 0,
	   "ports");
	ok(egress_ports_parse("", &ports, err, sizeof(err)) < 0, "no ports");
	ok(egress_ports_parse("80,x", &ports, err, sizeof(err)) < 0 &&
	       strstr(err, "'x'"),
	   "a bad port: %s", err);
	ok(egress_ports_parse("80,443", &ports, err, sizeof(err)) == 0,
	   "again");
	ok(egress_list_parse("*.a.com b.com:8443 b.com:8443", "L", &l, err,
	                     sizeof(err)) == 0,
	   "list");
	is_int(l.n, 2, "a duplicate is kept once");
	is_int(egress_list_render(&l, &ports, buf, sizeof(buf)),
	       strlen("*.a.com 80\n*.a.com 443\nb.com 8443\n"), "length");
	is_str(buf, "*.a.com 80\n*.a.com 443\nb.com 8443\n",
	       "one line per name and port");
	ok(egress_list_render(&l, &ports, tiny, sizeof(tiny)) == -ENOSPC &&
	       tiny[0] == '\0',
	   "too small: nothing half written");
}

static void test_tenants(void)
{
	const char *s = "team-a=api.example.com *.github.com; team-b=pypi.org";
	struct egress_list l;
	char err[256] = "";

	is_int(egress_tenant_list(s, "team-a", &l, err, sizeof(err)), 1,
	       "team-a named");
	is_int(l.n, 2, "its two patterns");
	is_int(egress_tenant_list(s, "team-b", &l, err, sizeof(err)), 1,
	       "team-b named");
	is_str(l.rules[0].name, "pypi.org", "its pattern");
	is_int(egress_tenant_list(s, "team", &l, err, sizeof(err)), 0,
	       "a prefix is not a tenant");
	is_int(l.n, 0, "and gets nothing from it");
	is_int(egress_tenant_list("", "x", &l, err, sizeof(err)), 0, "empty");
	ok(egress_tenant_list("team-a", NULL, &l, err, sizeof(err)) < 0 &&
	       strstr(err, "tenant=patterns"),
	   "no '=': %s", err);
	ok(egress_tenant_list("a=x..y", NULL, &l, err, sizeof(err)) < 0 &&
	       strstr(err, "tenant a"),
	   "a bad pattern names the tenant: %s", err);
}

static void test_settings(void)
{
	char err[256] = "";

	ok(egress_settings_check("a.com", "t=b.com", "80,443", "10.0.0.1/32",
	                         "a.test=10.0.0.1", "10.213.0.0/16", err,
	                         sizeof(err)) == 0,
	   "good settings: %s", err);
	ok(egress_settings_check("a.com", "", "80", "", "a.test=::1",
	                         "10.213.0.0/16", err, sizeof(err)) < 0 &&
	       strstr(err, "SANDBOX_EGRESS_HOSTS"),
	   "hosts: IPv4 only: %s", err);
	ok(egress_settings_check("a.com", "", "80", "", "", "10.213.0.0/28",
	                         err, sizeof(err)) < 0 &&
	       strstr(err, "SANDBOX_EGRESS_SUBNET"),
	   "a subnet too small for slots: %s", err);
	ok(egress_settings_check("a.com", "", "80", "10.0.0.1/8", "",
	                         "10.213.0.0/16", err, sizeof(err)) < 0 &&
	       strstr(err, "SANDBOX_EGRESS_PRIVATE"),
	   "private ranges are checked: %s", err);
	ok(egress_settings_check("*", "", "80", "", "", "10.213.0.0/16", err,
	                         sizeof(err)) < 0 &&
	       strstr(err, "SANDBOX_EGRESS_ALLOW"),
	   "the operator's list is checked: %s", err);
}

static void count(void *arg, const struct egress_log_entry *e)
{
	struct egress_facts *f = arg;

	egress_facts_add(f, e);
}

static void test_log(void)
{
	const char *lines =
	    "1795905312.430 10.213.0.3 GET web.test 18555 TCP_MISS 200 12710 "
	    "139 allowed\n"
	    "1795905312.440 10.213.0.3 GET other.test 18555 "
	    "TCP_DENIED_ABORTED 403 291 143 not-allowed\n"
	    "1795905312.444 10.213.0.3 GET meta.test 80 TCP_DENIED 403 3357 "
	    "141 allowed\n"
	    "garbage line\n"
	    "1795905312.448 10.213.0.3 CONNECT web.test 18555 TCP_TUNNEL 200 "
	    "409 1626 allowed\n"
	    "1795905312.449 10.213.0.3 CONNECT web.test 18555 TCP_TUNNEL 200 "
	    "- - allowed\n"
	    "1795905312.450 10.213.0.3 GET half";
	struct egress_log_entry e;
	struct egress_facts f;
	cJSON *j;
	char *txt;
	size_t used;

	memset(&f, 0, sizeof(f));
	used = egress_log_feed(lines, strlen(lines), count, &f);
	is_int(used, strrchr(lines, '\n') + 1 - lines,
	       "the incomplete last line is left");
	is_int(f.allowed, 3, "allowed requests");
	is_int(f.blocked, 2, "blocked requests");
	is_int(f.n_dests, 3, "distinct destinations");
	is_int(f.dests[0].requests, 3, "web.test three times");
	is_int(f.bytes_in, 12710 + 291 + 3357 + 409, "bytes in");
	is_int(f.dests[1].verdict, EGRESS_BLOCKED_LIST, "other.test: list");
	is_int(f.dests[2].verdict, EGRESS_BLOCKED_ADDRESS,
	       "meta.test: address");
	j = egress_facts_json(&f);
	txt = cJSON_PrintUnformatted(j);
	ok(txt && strstr(txt, "\"host\":\"other.test\",\"port\":18555,"
	                      "\"allowed\":false,\"requests\":1,\"bytes\":434,"
	                      "\"reason\":\"not in the allow-list\""),
	   "json: %s", txt ? txt : "");
	cJSON_free(txt);
	cJSON_Delete(j);

	static const char *const bad[] = {
	    "1.5 10.0.0.1 GET a 80 TCP_MISS 200 1 1 allowed",
	    "1795905312.430 10.0.0.1 GET a 80 TCP_MISS 200 1 1",
	    "1795905312.430 10.0.0.1 GET a 80 TCP_MISS 200 1 1 allowed x",
	    "1795905312.430 ::1 GET a 80 TCP_MISS 200 1 1 allowed",
	    "1795905312.430 10.0.0.1 GET a b 80 TCP_MISS 200 1 allowed",
	    "1795905312.430 10.0.0.1 GET a\x01 80 TCP_MISS 200 1 1 allowed",
	    "1795905312.430 10.0.0.1 GET a 65536 TCP_MISS 200 1 1 allowed",
	    "1795905312.430 10.0.0.1 get a 80 TCP_MISS 200 1 1 allowed",
	    "1795905312.430  10.0.0.1 GET a 80 TCP_MISS 200 1 1 allowed",
	    "1795905312.430 10.0.0.1 GET a 80 TCP_MISS 2000 1 1 allowed",
	    "1795905312.430 10.0.0.1 GET a 80 TCP_MISS 200 1 1 ALLOWED"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ok(egress_log_parse(bad[i], strlen(bad[i]), &e) < 0 &&
		       e.host[0] == '\0',
		   "refused line %zu", i);
}

static void test_facts_cap(void)
{
	struct egress_facts f;
	struct egress_log_entry e;

	memset(&f, 0, sizeof(f));
	memset(&e, 0, sizeof(e));
	for (unsigned i = 0; i < EGRESS_FACTS_DEST_MAX + 5; i++) {
		snprintf(e.host, sizeof(e.host), "h%u.test", i);
		e.port = 80;
		e.verdict = EGRESS_BLOCKED_LIST;
		egress_facts_add(&f, &e);
	}
	is_int(f.n_dests, EGRESS_FACTS_DEST_MAX, "destinations are capped");
	ok(f.dests_truncated, "and say so");
	is_int(f.blocked, EGRESS_FACTS_DEST_MAX + 5, "every request counted");
}

int main(void)
{
	test_patterns();
	test_match();
	test_narrow();
	test_render();
	test_tenants();
	test_settings();
	test_log();
	test_facts_cap();
	return tap_done();
}
