/* SPDX-License-Identifier: MIT */
/*
 * Addresses, CIDR lists (MCP_TRUSTED_PROXIES) and the client behind
 * trusted proxies: hostile header values never become the client address.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "tap.h"
#include "util/netaddr.h"

static bool parses(const char *s)
{
	struct netaddr a;

	return netaddr_parse(s, strlen(s), &a) == 0;
}

/* s with control characters as \xNN, for test names. */
static const char *shown(const char *s)
{
	static char out[256];
	size_t n = 0;

	for (; *s && n + 5 < sizeof(out); s++) {
		if ((unsigned char)*s < 0x20)
			n += (size_t)snprintf(out + n, sizeof(out) - n,
			                      "\\x%02x", (unsigned char)*s);
		else
			out[n++] = *s;
	}
	out[n] = '\0';
	return out;
}

static void test_parse(void)
{
	static const char *const good[] = {
	    "127.0.0.1",   "0.0.0.0",         "::1",
	    "2001:db8::1", "::ffff:10.1.2.3", "255.255.255.255"};
	static const char *const bad[] = {
	    "",
	    "1.2.3",
	    "1.2.3.4.5",
	    "01.2.3.4",
	    "1.2.3.256",
	    " 1.2.3.4",
	    "1.2.3.4 ",
	    "1.2.3.4:80",
	    "[::1]",
	    "fe80::1%eth0",
	    "localhost",
	    "0x7f.0.0.1",
	    "2001:db8::g",
	    "1.2.3.4\r\n",
	    "unknown",
	    "::1::2",
	    "12345678901234567890123456789012345678901234567890"};
	struct netaddr a;
	char text[NETADDR_TEXT_MAX];

	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		ok(parses(good[i]), "'%s' parses", good[i]);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ok(!parses(bad[i]), "'%s' is refused", shown(bad[i]));
	ok(netaddr_parse("1.2.3.4xyz", 7, &a) == 0, "only n bytes are read");
	is_int(a.family, AF_INET, "an IPv4 address");
	ok(netaddr_parse("::ffff:10.1.2.3", 15, &a) == 0 && a.family == AF_INET,
	   "an IPv4-mapped address counts as IPv4");
	netaddr_format(&a, text, sizeof(text));
	is_str(text, "10.1.2.3", "and is written as IPv4");
	ok(netaddr_parse("2001:DB8:0:0::1", 15, &a) == 0, "upper case");
	netaddr_format(&a, text, sizeof(text));
	is_str(text, "2001:db8::1", "canonical text");
}

static bool list_ok(const char *s, size_t want_n)
{
	struct netaddr_cidr *c = NULL;
	size_t n = 99;
	char err[256] = "";
	bool r = netaddr_cidrs_parse("X", s, &c, &n, err, sizeof(err)) == 0 &&
	         n == want_n;

	free(c);
	return r;
}

static void list_err(const char *s, const char *want)
{
	struct netaddr_cidr *c = NULL;
	size_t n = 99;
	char err[256] = "";
	int r = netaddr_cidrs_parse("MCP_TRUSTED_PROXIES", s, &c, &n, err,
	                            sizeof(err));

	ok(r < 0 && c == NULL && n == 0 && strstr(err, want) &&
	       strstr(err, "MCP_TRUSTED_PROXIES"),
	   "'%s' refused, naming the setting: %s", s, err);
	free(c);
}

static void test_lists(void)
{
	char big[2048];
	size_t len = 0;

	ok(list_ok("", 0), "an empty list");
	ok(list_ok("  ", 0), "a blank list");
	ok(list_ok("127.0.0.1", 1), "one address");
	ok(list_ok(" 127.0.0.1 , ::1,10.0.0.0/8,fd00::/8, 0.0.0.0/0", 5),
	   "addresses and ranges with spaces");
	ok(list_ok("::ffff:10.0.0.0/104", 1), "a mapped range");
	list_err("127.0.0.1,", "empty entry");
	list_err(",127.0.0.1", "empty entry");
	list_err("127.0.0.1,,::1", "empty entry");
	list_err("localhost", "'localhost' is not");
	list_err("10.0.0.1/8", "e.g. 10.0.0.0/8");
	list_err("10.0.0.0/33", "not an IPv4");
	list_err("10.0.0.0/", "not an IPv4");
	list_err("10.0.0.0/08", "not an IPv4");
	list_err("10.0.0.0/-1", "not an IPv4");
	list_err("::/129", "not an IPv4");
	list_err("1.2.3.4:80", "not an IPv4");
	for (int i = 0; i < NETADDR_LIST_MAX + 1; i++)
		len += (size_t)snprintf(big + len, sizeof(big) - len,
		                        "%s10.%d.0.0/16", i ? "," : "", i);
	list_err(big, "more than 64");
}

/* The client of a request from peer with the given headers. */
static enum netaddr_from client(const char *trusted, const char *peer,
                                const char *cf, const char *xff, char *out)
{
	struct netaddr_cidr *c = NULL;
	size_t n = 0;
	char err[256];
	enum netaddr_from f;

	if (netaddr_cidrs_parse("X", trusted, &c, &n, err, sizeof(err)) < 0)
		return (enum netaddr_from) - 1;
	f = netaddr_client(c, n, peer, cf, &xff, xff ? 1 : 0, out,
	                   NETADDR_TEXT_MAX);
	free(c);
	return f;
}

#define CLIENT(trusted, peer, cf, xff, want_from, want_addr, name)             \
	do {                                                                   \
		char got_[NETADDR_TEXT_MAX];                                   \
		enum netaddr_from f_ = client(trusted, peer, cf, xff, got_);   \
		ok(f_ == (want_from) && strcmp(got_, (want_addr)) == 0,        \
		   "%s (got %d '%s')", name, (int)f_, got_);                   \
	} while (0)

static void test_client(void)
{
	CLIENT("", "127.0.0.1", "198.51.100.7", "198.51.100.8",
	       NETADDR_FROM_PEER, "127.0.0.1",
	       "no trusted proxies: headers are ignored");
	CLIENT("10.0.0.0/8", "127.0.0.1", "198.51.100.7", NULL,
	       NETADDR_FROM_PEER, "127.0.0.1",
	       "an untrusted peer's CF-Connecting-IP is ignored");
	CLIENT("127.0.0.1", "127.0.0.1", "198.51.100.7", "203.0.113.9",
	       NETADDR_FROM_CF, "198.51.100.7",
	       "a trusted peer's CF-Connecting-IP wins");
	CLIENT("127.0.0.1", "::ffff:127.0.0.1", " 2001:db8::7 ", NULL,
	       NETADDR_FROM_CF, "2001:db8::7",
	       "a mapped peer; CF-Connecting-IP with spaces");
	CLIENT("127.0.0.1", "127.0.0.1", "198.51.100.7, 1.2.3.4", "203.0.113.9",
	       NETADDR_FROM_XFF, "203.0.113.9",
	       "a CF-Connecting-IP that is a list is not taken");
	CLIENT("127.0.0.1", "127.0.0.1", NULL, "203.0.113.9", NETADDR_FROM_XFF,
	       "203.0.113.9", "one X-Forwarded-For entry");
	CLIENT("127.0.0.1", "127.0.0.1", NULL, "6.6.6.6, 203.0.113.9",
	       NETADDR_FROM_XFF, "203.0.113.9",
	       "the right-most entry: what the proxy saw, not what the "
	       "client wrote");
	CLIENT("127.0.0.1,10.0.0.0/8", "127.0.0.1", NULL,
	       "6.6.6.6,203.0.113.9, 10.1.1.1,10.2.2.2", NETADDR_FROM_XFF,
	       "203.0.113.9", "trusted hops are skipped");
	CLIENT("127.0.0.1,10.0.0.0/8", "127.0.0.1", NULL,
	       "203.0.113.9, garbage, 10.2.2.2", NETADDR_FROM_PROXY, "10.2.2.2",
	       "garbage stops the walk at the last trusted hop");
	CLIENT("127.0.0.1", "127.0.0.1", NULL, "203.0.113.9,",
	       NETADDR_FROM_PROXY, "127.0.0.1",
	       "an empty last entry: the proxy itself");
	CLIENT("127.0.0.1", "127.0.0.1", NULL, "", NETADDR_FROM_PROXY,
	       "127.0.0.1", "an empty header: the proxy itself");
	CLIENT("127.0.0.1", "127.0.0.1", "not-an-ip", NULL, NETADDR_FROM_PROXY,
	       "127.0.0.1", "a bad CF-Connecting-IP and no XFF");
	CLIENT("127.0.0.1", "127.0.0.1", NULL, "203.0.113.9:4711",
	       NETADDR_FROM_XFF, "203.0.113.9", "IPv4 with a port");
	CLIENT("127.0.0.1", "127.0.0.1", NULL, "[2001:db8::9]:4711",
	       NETADDR_FROM_XFF, "2001:db8::9", "bracketed IPv6 with a port");
	CLIENT("127.0.0.1", "127.0.0.1", NULL, "[2001:db8::9]",
	       NETADDR_FROM_XFF, "2001:db8::9", "bracketed IPv6");
	CLIENT("127.0.0.1", "127.0.0.1", NULL, "2001:db8::9", NETADDR_FROM_XFF,
	       "2001:db8::9", "bare IPv6");
	CLIENT("127.0.0.1", "127.0.0.1", NULL, "203.0.113.9:0",
	       NETADDR_FROM_PROXY, "127.0.0.1", "port 0 is refused");
	CLIENT("127.0.0.1", "127.0.0.1", NULL, "203.0.113.9:65536",
	       NETADDR_FROM_PROXY, "127.0.0.1", "port 65536 is refused");
	CLIENT("127.0.0.1", "127.0.0.1", NULL, "[1.2.3.4]:80",
	       NETADDR_FROM_PROXY, "127.0.0.1", "IPv4 in brackets is refused");
	CLIENT("127.0.0.1", "127.0.0.1", NULL, "[2001:db8::9]x",
	       NETADDR_FROM_PROXY, "127.0.0.1", "junk after brackets");
	CLIENT("127.0.0.1", "127.0.0.1", NULL, "[2001:db8::9",
	       NETADDR_FROM_PROXY, "127.0.0.1", "an unclosed bracket");
	CLIENT("127.0.0.1", "127.0.0.1", NULL, "unknown", NETADDR_FROM_PROXY,
	       "127.0.0.1", "RFC 7239 'unknown' is not an address");
	CLIENT("127.0.0.1", "127.0.0.1", NULL, "1.2.3.4\r\nX-Evil: 1",
	       NETADDR_FROM_PROXY, "127.0.0.1", "CR LF");
	CLIENT("127.0.0.1", "garbage", "1.2.3.4", NULL, NETADDR_FROM_PEER, "",
	       "a peer that does not parse");
	CLIENT("0.0.0.0/0,::/0", "127.0.0.1", NULL, "1.1.1.1,2.2.2.2",
	       NETADDR_FROM_PROXY, "1.1.1.1",
	       "everything trusted: the left-most entry");

	/* More hops than are examined: the walk stops at a trusted one. */
	char xff[4096];
	size_t len = snprintf(xff, sizeof(xff), "203.0.113.9");
	for (int i = 0; i < NETADDR_XFF_HOPS_MAX + 5; i++)
		len += (size_t)snprintf(xff + len, sizeof(xff) - len,
		                        ",10.0.0.%d", i);
	CLIENT("127.0.0.1,10.0.0.0/8", "127.0.0.1", NULL, xff,
	       NETADDR_FROM_PROXY, "10.0.0.5", "the walk is bounded");
}

/* Several X-Forwarded-For headers read as one list, in order. */
static void test_client_headers(void)
{
	struct netaddr_cidr *c = NULL;
	size_t n = 0;
	char err[256], out[NETADDR_TEXT_MAX];
	const char *two[] = {"6.6.6.6, 203.0.113.9", "10.0.0.1"};
	const char *bad[] = {"203.0.113.9", "nonsense"};

	ok(netaddr_cidrs_parse("X", "127.0.0.1,10.0.0.0/8", &c, &n, err,
	                       sizeof(err)) == 0,
	   "parsed");
	ok(netaddr_client(c, n, "127.0.0.1", NULL, two, 2, out, sizeof(out)) ==
	           NETADDR_FROM_XFF &&
	       strcmp(out, "203.0.113.9") == 0,
	   "the second header's trusted hop is skipped (%s)", out);
	ok(netaddr_client(c, n, "127.0.0.1", NULL, bad, 2, out, sizeof(out)) ==
	           NETADDR_FROM_PROXY &&
	       strcmp(out, "127.0.0.1") == 0,
	   "garbage in the last header stops the walk (%s)", out);
	free(c);
}

static void test_source_key(void)
{
	char k[80];

	netaddr_source_key("198.51.100.7", k, sizeof(k));
	is_str(k, "198.51.100.7", "IPv4: the address");
	netaddr_source_key("2001:db8:1:2:aaaa:bbbb:cccc:dddd", k, sizeof(k));
	is_str(k, "2001:db8:1:2::/64", "IPv6: its /64");
	netaddr_source_key("::ffff:198.51.100.7", k, sizeof(k));
	is_str(k, "198.51.100.7", "mapped IPv4: the IPv4 address");
	netaddr_source_key("", k, sizeof(k));
	is_str(k, "", "empty stays empty");
}

int main(void)
{
	test_parse();
	test_lists();
	test_client();
	test_client_headers();
	test_source_key();
	return tap_done();
}
