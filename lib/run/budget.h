/* SPDX-License-Identifier: MIT */
/*
 * budget: each tenant's CPU-time budget per window (TENANT_CPU_SECONDS per
 * TENANT_CPU_WINDOW_SECONDS), counted in the daemon's durable store (store.h)
 * so a restart does not reset it (charges are relaxed commits,
 * store_commit_relaxed: a power cut may lose the last moments' charges,
 * a crash of the daemon does not). Windows are fixed, aligned to the Unix
 * epoch (a window starts at a multiple of its length), and judged by the
 * wall clock: a tenant that has used its budget is refused until the
 * current window ends. A run is admitted while the tenant is under budget
 * and charged in full when it ends, so a tenant can pass its budget by what
 * its runs already admitted use (at most TENANT_MAX_RUNNING runs' worth).
 * CPU that warm boxes use between runs is charged as it is measured
 * (warm.c), with no run counted. Without a limit nothing is charged.
 *
 * The module owns the table budget_usage of BUDGET_MIGRATION_1: one row per
 * tenant and window; rows of ended windows are deleted when the tenant is
 * next charged. Tenant names are stored as given (they are not secrets).
 *
 * Errors: negative errno from the store (-EIO, -EBUSY, -ENOSPC; logged
 * there), -ENOMEM.
 *
 * Threads: every function is thread-safe; each call is one short
 * transaction of the store.
 */
#ifndef MCPSD_BUDGET_H
#define MCPSD_BUDGET_H

#include <stdbool.h>

#include "store/store.h"

/*
 * Schema step of the budget module (see store.c's migrations[]). Never
 * edit: add another. window_start is in seconds since the epoch.
 */
#define BUDGET_MIGRATION_1                                                     \
	"CREATE TABLE budget_usage ("                                          \
	"  tenant TEXT NOT NULL,"                                              \
	"  window_start INTEGER NOT NULL,"                                     \
	"  cpu_ms INTEGER NOT NULL CHECK (cpu_ms >= 0),"                       \
	"  runs INTEGER NOT NULL CHECK (runs >= 0),"                           \
	"  PRIMARY KEY (tenant, window_start)"                                 \
	") STRICT;"

/* The same for PostgreSQL (BIGINT for INTEGER). Never edit. */
#define BUDGET_MIGRATION_1_PG                                                  \
	"CREATE TABLE budget_usage ("                                          \
	"  tenant TEXT NOT NULL,"                                              \
	"  window_start BIGINT NOT NULL,"                                      \
	"  cpu_ms BIGINT NOT NULL CHECK (cpu_ms >= 0),"                        \
	"  runs BIGINT NOT NULL CHECK (runs >= 0),"                            \
	"  PRIMARY KEY (tenant, window_start)"                                 \
	");"

struct budget;

/* ---- arithmetic (pure) --------------------------------------------------- */

/* Start of the window holding now_s (seconds since the epoch). */
long long budget_window_start(long long now_s, unsigned window_s);

/* Seconds from now_s until its window ends, at least 1. */
unsigned budget_window_left(long long now_s, unsigned window_s);

/*
 * Milliseconds of CPU to charge for a run: cpu_ms when known (>= 0), else
 * the upper bound wall_ms x cpus (*estimated set). Never negative.
 */
long long budget_charge_ms(long long cpu_ms, long long wall_ms, double cpus,
                           bool *estimated);

/* ---- the budget ---------------------------------------------------------- */

struct budget_state {
	long long used_ms;  /* charged in the current window */
	long long limit_ms; /* 0: unlimited */
	unsigned runs;      /* runs charged in the current window */
	unsigned retry_s;   /* over budget: seconds until the window ends */
	long long window_start;
	unsigned window_s;
};

/*
 * A budget of cpu_s CPU-seconds per window_s seconds (cpu_s 0: unlimited,
 * nothing is refused but usage is still counted) over store st (borrowed;
 * it must outlive the budget). Caller owns *out; free with budget_destroy.
 * -EINVAL (window_s 0), -ENOMEM.
 */
__attribute__((warn_unused_result)) int budget_create(struct store *st,
                                                      unsigned cpu_s,
                                                      unsigned window_s,
                                                      struct budget **out);

/* NULL-safe. */
void budget_destroy(struct budget *b);

/*
 * Whether a limit is set (TENANT_CPU_SECONDS > 0): without one no tenant
 * is ever refused, and a run need not read the store before it starts.
 */
bool budget_limited(const struct budget *b);

/*
 * Reads tenant's usage in the window of now_s into *out. Returns 0 when
 * tenant may start a run, -EDQUOT when it has used its budget (out says
 * how much and when to retry), or a store error (out then reads as no
 * usage).
 */
__attribute__((warn_unused_result)) int budget_check(struct budget *b,
                                                     const char *tenant,
                                                     long long now_s,
                                                     struct budget_state *out);

/*
 * Adds ms of CPU time and one run to tenant's usage in the window of now_s
 * and forgets its ended windows. 0 or a store error. Without a limit
 * (TENANT_CPU_SECONDS=0) nothing is written: nothing would read it (the
 * usage tool and /admin/usage count from the audit trail), and a write
 * per run is most of what the store costs a warm call. A limit set later
 * counts from the restart that sets it.
 */
__attribute__((warn_unused_result)) int budget_charge(struct budget *b,
                                                      const char *tenant,
                                                      long long ms,
                                                      long long now_s);

/*
 * Adds ms of CPU time and runs runs (0 for CPU used outside any run: a
 * warm box's threads between calls) to tenant's usage in the window of
 * now_s, and forgets its ended windows. 0 or a store error.
 */
__attribute__((warn_unused_result)) int budget_add(struct budget *b,
                                                   const char *tenant,
                                                   long long ms, unsigned runs,
                                                   long long now_s);

#endif
