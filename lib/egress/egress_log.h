/* SPDX-License-Identifier: MIT */
/*
 * egress_log: the egress proxy's access log, read back by the daemon, and
 * the per-run record made from it (struct egress_facts: destinations
 * allowed and blocked, bytes), which the run's result, /metrics and the
 * audit trail take.
 *
 * The log is outside input: the proxy writes it, but the host names in it
 * are what code in a sandbox asked for. Lines are parsed whole with hard
 * limits (EGRESS_LOG_LINE_MAX); a line that does not have exactly the
 * shape of the "mcpsd" logformat the daemon configures (egress.c) is
 * skipped, never half-used. Fuzzed by tests/fuzz/fuzz_egress_log.c.
 *
 * The format, one request a line, fields separated by one space:
 *   <unix time.ms> <client ip> <method> <host> <port> <squid status>
 *   <http status> <bytes to client> <bytes from client> <acl note>
 * e.g. "1795905312.440 10.213.0.3 GET other.test 80 TCP_DENIED 403 291 143
 * not-allowed". The acl note is the ACL helper's log= value: "allowed" or
 * "not-allowed"; a denied request whose note says allowed was refused for
 * its address (a private, local or metadata address the operator did not
 * allow).
 *
 * Pure functions over caller memory; thread-safe.
 */
#ifndef MCPSD_EGRESS_LOG_H
#define MCPSD_EGRESS_LOG_H

#include <stdbool.h>
#include <stddef.h>

#include <cjson/cJSON.h>

#define EGRESS_LOG_LINE_MAX 1024
#define EGRESS_HOST_MAX 255
#define EGRESS_FACTS_DEST_MAX 32 /* distinct destinations kept per run */

enum egress_verdict {
	EGRESS_ALLOWED,
	EGRESS_BLOCKED_LIST,    /* not in the allow-list */
	EGRESS_BLOCKED_ADDRESS, /* resolves to a refused address */
};

struct egress_log_entry {
	long long time_ms;
	char src[16]; /* dotted IPv4 of the box */
	char method[17];
	char host[EGRESS_HOST_MAX + 1];
	unsigned port;
	enum egress_verdict verdict;
	int http_status;
	long long bytes_in;  /* proxy to box */
	long long bytes_out; /* box to proxy */
};

/*
 * Parses one line of n bytes (without its newline). 0, or -EINVAL when it
 * is not a line of the format above (out is then zeroed).
 */
__attribute__((warn_unused_result)) int
egress_log_parse(const char *p, size_t n, struct egress_log_entry *out);

/*
 * Calls fn for every complete line of buf[0..n) that parses; returns the
 * bytes consumed (up to and including the last newline; a line longer
 * than EGRESS_LOG_LINE_MAX is skipped whole). The rest is an incomplete
 * line the caller keeps for the next read.
 */
size_t egress_log_feed(const char *buf, size_t n,
                       void (*fn)(void *arg, const struct egress_log_entry *e),
                       void *arg);

/* One destination of a run, with what happened to it. */
struct egress_dest {
	char host[EGRESS_HOST_MAX + 1];
	unsigned port;
	enum egress_verdict verdict;
	unsigned requests;
	long long bytes; /* both directions */
};

/*
 * What a run did through the proxy. The audit trail (i25audit) records
 * dests[] and the totals; the run's result shows the blocked ones.
 */
struct egress_facts {
	struct egress_dest dests[EGRESS_FACTS_DEST_MAX];
	size_t n_dests;
	bool dests_truncated; /* more distinct destinations than kept */
	unsigned allowed;     /* requests */
	unsigned blocked;
	long long bytes_in, bytes_out;
};

/* Adds one log entry of the run to f. */
void egress_facts_add(struct egress_facts *f, const struct egress_log_entry *e);

/* The reason a verdict gives a person ("not in the allow-list"). */
const char *egress_verdict_reason(enum egress_verdict v);

/*
 * The run result's "egress" object: {"allowed": n, "blocked": n,
 * "bytes_in": n, "bytes_out": n, "destinations": [{"host", "port",
 * "allowed", "requests", "bytes", "reason"?}], "truncated"?}. Caller owns;
 * NULL on allocation failure.
 */
cJSON *egress_facts_json(const struct egress_facts *f);

#endif
