/* SPDX-License-Identifier: MIT */
/*
 * usage: what each tenant and conversation used, per hour, in the daemon's
 * durable store (store.h), for the operator's /admin/usage and each
 * tenant's `usage` tool. One row per (tenant, conversation, hour, status):
 * runs, CPU milliseconds, memory x time (MiB-milliseconds: a run's peak
 * memory times its wall time, an upper bound), packages installed, bytes
 * through the egress proxy (0 for runs without network) and the
 * workspace's size after the run (a level, not a flow: a bucket reports
 * the largest size seen, summed over conversations).
 *
 * The module owns the table usage_hourly of USAGE_MIGRATION_1. Rows are
 * written by audit_record (audit.h), in the transaction that appends the
 * run's audit entry, so the two never disagree. Rows older than the
 * retention are deleted by usage_prune.
 *
 * Errors: negative errno from the store (-EIO, -EBUSY, -ENOSPC; logged
 * there), -EINVAL with a message, -ENOMEM.
 *
 * Threads: every function is thread-safe; each is one short transaction
 * of the store (usage_add_tx runs in its caller's).
 */
#ifndef MCPSD_USAGE_H
#define MCPSD_USAGE_H

#include <stdbool.h>
#include <stddef.h>

#include <cjson/cJSON.h>

#include "store/store.h"
#include "util/buf.h"

/*
 * Schema step of the usage module (see lib/schema.c). Never edit: add
 * another. hour is the start of the hour, in seconds since the epoch.
 */
#define USAGE_MIGRATION_1                                                      \
	"CREATE TABLE usage_hourly ("                                          \
	"  tenant TEXT NOT NULL,"                                              \
	"  conversation TEXT NOT NULL,"                                        \
	"  hour INTEGER NOT NULL,"                                             \
	"  status TEXT NOT NULL,"                                              \
	"  runs INTEGER NOT NULL CHECK (runs >= 0),"                           \
	"  cpu_ms INTEGER NOT NULL CHECK (cpu_ms >= 0),"                       \
	"  memory_mib_ms INTEGER NOT NULL CHECK (memory_mib_ms >= 0),"         \
	"  packages INTEGER NOT NULL CHECK (packages >= 0),"                   \
	"  egress_bytes INTEGER NOT NULL CHECK (egress_bytes >= 0),"           \
	"  storage_bytes INTEGER NOT NULL CHECK (storage_bytes >= 0),"         \
	"  PRIMARY KEY (tenant, conversation, hour, status)"                   \
	") STRICT;"                                                            \
	"CREATE INDEX usage_hourly_hour ON usage_hourly (hour);"

/* The same for PostgreSQL (BIGINT for INTEGER). Never edit. */
#define USAGE_MIGRATION_1_PG                                                   \
	"CREATE TABLE usage_hourly ("                                          \
	"  tenant TEXT NOT NULL,"                                              \
	"  conversation TEXT NOT NULL,"                                        \
	"  hour BIGINT NOT NULL,"                                              \
	"  status TEXT NOT NULL,"                                              \
	"  runs BIGINT NOT NULL CHECK (runs >= 0),"                            \
	"  cpu_ms BIGINT NOT NULL CHECK (cpu_ms >= 0),"                        \
	"  memory_mib_ms BIGINT NOT NULL CHECK (memory_mib_ms >= 0),"          \
	"  packages BIGINT NOT NULL CHECK (packages >= 0),"                    \
	"  egress_bytes BIGINT NOT NULL CHECK (egress_bytes >= 0),"            \
	"  storage_bytes BIGINT NOT NULL CHECK (storage_bytes >= 0),"          \
	"  PRIMARY KEY (tenant, conversation, hour, status)"                   \
	");"                                                                   \
	"CREATE INDEX usage_hourly_hour ON usage_hourly (hour);"

/* At most this many rows in one report (then "truncated": true). */
#define USAGE_REPORT_MAX_ROWS 10000

/* What one run adds (negative figures count as 0). */
struct usage_delta {
	const char *tenant;
	const char *conversation; /* "" for none */
	long long time_s;         /* when the run ended */
	const char *status;       /* runner_status_name() */
	long long cpu_ms;
	long long memory_mib_ms;
	long long packages;
	long long egress_bytes;
	long long storage_bytes; /* the workspace after the run; -1 unknown */
};

/* Adds d to its hour's row inside the caller's write transaction. */
__attribute__((warn_unused_result)) int
usage_add_tx(struct store_tx *tx, const struct usage_delta *d);

/* A report's question. */
struct usage_query {
	const char *tenant;       /* NULL or "": every tenant */
	const char *conversation; /* NULL or "": every conversation */
	bool by_conversation;     /* a row per conversation, not per tenant */
	long long from_s, to_s;   /* [from, to), seconds since the epoch */
	unsigned bucket_s;        /* 3600 or 86400; 0: the whole window */
};

/*
 * A time from text: seconds since the epoch or an RFC 3339 UTC time
 * (2026-11-28T10:00:00Z). -EINVAL with a message naming name.
 */
__attribute__((warn_unused_result)) int
usage_time_parse(const char *name, const char *v, long long *out, char *err,
                 size_t errlen);

/*
 * Parses a report's question from text (query parameters or tool
 * arguments; NULL for absent): from and to as seconds since the epoch or
 * an RFC 3339 UTC time (2026-11-28T10:00:00Z; default: the last 7 days to
 * now_s), bucket "hour", "day" or "none" (default "day"). The window is
 * widened to whole hours. -EINVAL with a message for a person.
 */
__attribute__((warn_unused_result)) int
usage_query_parse(const char *from, const char *to, const char *bucket,
                  long long now_s, struct usage_query *q, char *err,
                  size_t errlen);

/*
 * The report for q: {"from", "to", "bucket", "rows": [{"tenant",
 * ["conversation"], "start", "end", "runs", "runs_by_status": {...},
 * "cpu_seconds", "memory_mib_seconds", "packages_installed",
 * "egress_bytes", "storage_bytes"}], "truncated"}. Caller owns *out
 * (cJSON_Delete).
 */
__attribute__((warn_unused_result)) int
usage_report(struct store *st, const struct usage_query *q, cJSON **out,
             char *err, size_t errlen);

/* The rows of a report as CSV (RFC 4180, a header line first). */
__attribute__((warn_unused_result)) int usage_csv(const cJSON *report,
                                                  struct buf *out);

/*
 * Deletes the hours that ended before before_s, in one transaction;
 * returns how many rows went, or a store error.
 */
__attribute__((warn_unused_result)) int usage_prune(struct store *st,
                                                    long long before_s);

#endif
