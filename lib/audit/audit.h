/* SPDX-License-Identifier: MIT */
/*
 * audit: the record of what ran, in the daemon's durable store (store.h):
 * for every run, who asked (tenant, OAuth client or token), in which
 * conversation, when, the SHA-256 of the code (and the code itself with
 * AUDIT_KEEP_CODE), language, status, limits, CPU and memory used,
 * packages, network destinations allowed and blocked ("host:port", as the
 * egress proxy logged them), and files published. Entries are appended
 * only, each with a hash over the previous entry's hash and its own
 * canonical text (audit_canon.h), so an entry altered, removed or inserted
 * anywhere but at the very end breaks the chain, and audit_verify names
 * the first broken link. What the chain does not prove (someone who can
 * write the store can rebuild it whole; the newest entries can be cut off
 * unless the head is kept elsewhere): docs/security.md.
 *
 * Appending is one write transaction that reads the head and inserts after
 * it; the store serializes write transactions across threads and, on
 * PostgreSQL, across replicas (an advisory lock), and seq is the primary
 * key, so the chain stays one line whoever appends. audit_record writes
 * the run's usage row (usage.h) in the same transaction.
 *
 * Retention: audit_prune deletes the entries older than a cutoff and
 * appends a checkpoint entry that records the last deleted entry's seq
 * and hash, which the first remaining entry continues from; the trail is
 * verifiable after pruning.
 *
 * The module owns the table audit_log of AUDIT_MIGRATION_1.
 *
 * Errors: negative errno from the store (-EIO, -EBUSY, -ENOSPC; logged
 * there), -EINVAL, -ENOMEM.
 *
 * Threads: every function is thread-safe; each is a few short
 * transactions of the store.
 */
#ifndef MCPSD_AUDIT_H
#define MCPSD_AUDIT_H

#include <stdbool.h>
#include <stddef.h>

#include <cjson/cJSON.h>

#include "audit/audit_canon.h"
#include "store/store.h"
#include "util/cron.h"

/* How often the retention job looks for old entries and hours. */
#define AUDIT_RETENTION_INTERVAL_MS (3600 * 1000)

/*
 * Schema step of the audit module (see lib/schema.c). Never edit: add
 * another. body is the entry's canonical text; seq, time_ms, kind, tenant
 * and conversation repeat fields of it for queries (audit_verify checks
 * that they agree).
 */
#define AUDIT_MIGRATION_1                                                      \
	"CREATE TABLE audit_log ("                                             \
	"  seq INTEGER PRIMARY KEY CHECK (seq >= 1),"                          \
	"  time_ms INTEGER NOT NULL,"                                          \
	"  kind TEXT NOT NULL,"                                                \
	"  tenant TEXT NOT NULL,"                                              \
	"  conversation TEXT NOT NULL,"                                        \
	"  prev TEXT NOT NULL,"                                                \
	"  hash TEXT NOT NULL,"                                                \
	"  body TEXT NOT NULL"                                                 \
	") STRICT;"                                                            \
	"CREATE INDEX audit_log_tenant ON audit_log (tenant, conversation, "   \
	"seq);"                                                                \
	"CREATE INDEX audit_log_time ON audit_log (time_ms);"

/* The same for PostgreSQL (BIGINT for INTEGER). Never edit. */
#define AUDIT_MIGRATION_1_PG                                                   \
	"CREATE TABLE audit_log ("                                             \
	"  seq BIGINT PRIMARY KEY CHECK (seq >= 1),"                           \
	"  time_ms BIGINT NOT NULL,"                                           \
	"  kind TEXT NOT NULL,"                                                \
	"  tenant TEXT NOT NULL,"                                              \
	"  conversation TEXT NOT NULL,"                                        \
	"  prev TEXT NOT NULL,"                                                \
	"  hash TEXT NOT NULL,"                                                \
	"  body TEXT NOT NULL"                                                 \
	");"                                                                   \
	"CREATE INDEX audit_log_tenant ON audit_log (tenant, conversation, "   \
	"seq);"                                                                \
	"CREATE INDEX audit_log_time ON audit_log (time_ms);"

struct audit;

/* A file a run published (borrowed). */
struct audit_file {
	const char *name;
	long long size;
};

/* One run, as the tools layer saw it end (every pointer borrowed). */
struct audit_run {
	const char *tool;         /* "run_code", "check_code", ... */
	const char *tenant;       /* never NULL */
	const char *client;       /* "oauth:<client_id>", "token:<fp>", ... */
	const char *conversation; /* "" for none */
	const char *language;
	const char *status; /* runner_status_name() */
	int exit_code;
	const char *code;
	size_t code_len;
	/* limits */
	unsigned timeout_s, memory_mb;
	double cpus;
	bool network;
	/* measured (-1: unknown) */
	long long duration_ms;
	long long cpu_ms; /* what the tenant is charged for */
	long long memory_peak_bytes;
	long long storage_bytes; /* the workspace after the run */
	/* packages asked for, and how many were installed (not reused) */
	const char *const *packages;
	size_t n_packages;
	long long packages_installed;
	/* network destinations ("host:port") from the egress proxy's log */
	const char *const *net_allowed;
	size_t n_net_allowed;
	const char *const *net_blocked;
	size_t n_net_blocked;
	long long egress_bytes;
	const struct audit_file *files;
	size_t n_files;
};

/*
 * An audit trail over st (borrowed; must outlive it). keep_code: entries
 * carry the code itself, not only its hash. Caller owns *out; free with
 * audit_destroy. -ENOMEM.
 */
__attribute__((warn_unused_result)) int
audit_create(struct store *st, bool keep_code, struct audit **out);

/* NULL-safe. */
void audit_destroy(struct audit *a);

/*
 * Keeps audit entries audit_days and usage hours usage_days (0: forever)
 * from now on; audit_job_retention deletes what is older. Before the job
 * is registered.
 */
void audit_set_retention(struct audit *a, unsigned audit_days,
                         unsigned usage_days);

/*
 * The retention job (cron.h, every AUDIT_RETENTION_INTERVAL_MS): prunes
 * the trail (audit_prune) and the usage (usage_prune). Failures are
 * logged and retried at the next run.
 */
enum cron_next audit_job_retention(void *audit, long long deadline_ms);

/* The store it writes to (borrowed). */
struct store *audit_store(const struct audit *a);

/*
 * Appends run to the trail and adds it to its tenant's and conversation's
 * usage, in one transaction. now_ms: the wall clock. 0 or an error (the
 * run is then in neither; logged).
 */
__attribute__((warn_unused_result)) int
audit_record(struct audit *a, const struct audit_run *run, long long now_ms);

/*
 * audit_record in two steps, for a run whose answer need not wait for the
 * store: audit_prepare builds the entry from run (which it no longer needs
 * afterwards) into *out; audit_write appends it and adds the usage as
 * audit_record does, in one durable transaction, and frees it (call it
 * exactly once, on any thread). Runs that end together share that
 * transaction and its fsync (group commit: the first writer takes every
 * entry submitted meanwhile, up to 64; the others wait for it; while
 * batches follow one another, within 5 ms of the last, it first waits 5 ms
 * for more on SQLite, so back-to-back runs share an fsync too); each
 * returns only
 * once its own entry is committed. Between the two, the readers of
 * the trail and the usage wait for it (audit_wait_written).
 */
struct audit_pending;
__attribute__((warn_unused_result)) int
audit_prepare(struct audit *a, const struct audit_run *run, long long now_ms,
              struct audit_pending **out);
int audit_write(struct audit_pending *p);

/*
 * Waits until every prepared entry of this process is written (or
 * timeout_ms passed): a reader of the trail or the usage then sees every
 * run that was answered before it asked.
 */
#define AUDIT_WAIT_WRITTEN_MS 10000
void audit_wait_written(unsigned timeout_ms);

/* What audit_verify found. */
struct audit_verdict {
	bool ok;
	long long entries;   /* checked */
	long long first_seq; /* 0 for an empty trail */
	long long head_seq;
	char head_hash[AUDIT_HASH_HEX + 1]; /* record it elsewhere */
	long long broken_seq;               /* !ok: the first broken entry */
	char reason[300];                   /* !ok: what is wrong */
};

/*
 * Walks the whole trail in pages (a short read transaction each, so runs
 * keep ending meanwhile) and fills *v. Returns 0 whether or not the chain
 * is intact (v->ok says), or a store error.
 */
__attribute__((warn_unused_result)) int audit_verify(struct store *st,
                                                     struct audit_verdict *v);

/* Which entries to export. */
struct audit_filter {
	const char *tenant;       /* NULL or "": all */
	const char *conversation; /* NULL or "": all */
	long long from_ms, to_ms; /* [from, to); 0 and 0: all */
	long long after_seq;      /* entries after this seq */
	unsigned limit;           /* at most; 0: AUDIT_EXPORT_MAX */
};
#define AUDIT_EXPORT_MAX 100000

/*
 * Calls emit once per entry matching f, in seq order, with one JSON line
 * (ending in '\n'): {"seq","prev","hash","entry"} where entry is the
 * stored canonical text, so a line can be checked on its own
 * (SHA-256 of prev, "\n", entry). *last is the last seq emitted (0 for
 * none). emit returns 0 or stops the export with its negative errno.
 */
__attribute__((warn_unused_result)) int
audit_export(struct store *st, const struct audit_filter *f,
             int (*emit)(void *arg, const char *line, size_t n), void *arg,
             long long *last);

/*
 * Deletes the entries older than before_ms and appends a checkpoint entry
 * that records where the remaining trail continues from. Returns how many
 * entries went (0: nothing old enough), or an error.
 */
__attribute__((warn_unused_result)) int
audit_prune(struct store *st, long long before_ms, long long now_ms);

#endif
