/* SPDX-License-Identifier: MIT */
/*
 * tasks: the records of tasks (the io.modelcontextprotocol/tasks extension
 * of MCP 2026-07-28): a tools/call that runs on after its HTTP request, that
 * the client polls by task id. This module keeps what must outlive the
 * request and, with a durable store, the daemon: each task's id, owner
 * (tenant), status, status message, timestamps and, once it ended, its
 * result or error as JSON text. The MCP core (mcp_task.c) drives it and
 * keeps what lives only while a task runs (its call, the questions it
 * waits on) in memory.
 *
 * Storage goes through a small backend interface (tasks_backend.h): in
 * memory, where records die with the process, or in the daemon's SQLite
 * store (tasks_db.h), where a finished task's result survives a restart
 * until its retention ends. A record found still running when the records
 * are opened belonged to a daemon that stopped mid-run: it is marked failed
 * with that reason, never left running.
 *
 * Limits: results and errors above MCP_TASK_RESULT_MAX_BYTES are refused
 * (the task fails with a message saying so); a tenant keeps at most
 * MCP_TASK_MAX_PER_TENANT records, its oldest ended ones making room, and
 * its ended records together hold at most MCP_TASK_RESULT_BYTES_PER_TENANT
 * bytes (message, result and error), its oldest ended ones making room for
 * each task that ends; ended tasks are deleted MCP_TASK_RETENTION_SECONDS
 * after they end.
 *
 * Threads: every function is thread-safe (one mutex, held across each
 * backend operation; backends never call back).
 */
#ifndef MCPSD_TASKS_H
#define MCPSD_TASKS_H

#include <stdbool.h>
#include <stddef.h>

#include "config/config.h"
#include "tasks/task_record.h"
#include "util/cron.h"

struct store;
struct tasks;

/*
 * Opens the records: in store st when it is not NULL (durable; st is
 * borrowed and must outlive *out), else in memory. Records of tasks this
 * daemon (this MCP_REPLICA_NAME, or the only daemon) left running when it
 * stopped are marked failed with the reason, and expired ones deleted.
 * Replicas sharing a store touch only their own running records here; see
 * tasks_job_replica for those of a replica that is gone. cfg is borrowed.
 * Caller owns *out; free with tasks_close. Errors: -ENOMEM, -EIO, -EBUSY,
 * with err for the operator.
 */
__attribute__((warn_unused_result)) int tasks_open(const struct config *cfg,
                                                   struct store *st,
                                                   struct tasks **out,
                                                   char *err, size_t errlen);

/* Frees the records. NULL-safe. */
void tasks_close(struct tasks *t);

/* Whether records survive a restart (a store is behind them). */
bool tasks_durable(const struct tasks *t);

/*
 * Records a new working task of tenant for tool, durably when there is a
 * store: once this returns 0 a tasks_get() of the id finds it, in this
 * process or after a restart. *out is filled (caller finishes it). -EBUSY
 * when tenant has TASK_MAX_PER_TENANT tasks none of which has ended, -EIO
 * (store), -ENOMEM.
 */
__attribute__((warn_unused_result)) int tasks_create(struct tasks *t,
                                                     const char *tenant,
                                                     const char *tool,
                                                     struct task_record *out);

/*
 * Ends task id with status (completed, failed or cancelled), message (may
 * be NULL) and, for completed, result (JSON text of the result object) or,
 * for failed, error (JSON text of the error object). A result or error
 * longer than the limit makes the task failed with a message saying so.
 * Then the tenant's oldest other ended tasks are deleted while its ended
 * tasks hold more than MCP_TASK_RESULT_BYTES_PER_TENANT (0 in cfg: no
 * bound). -ENOENT (no such task, or it has ended), -EIO, -ENOMEM.
 */
__attribute__((warn_unused_result)) int
tasks_finish(struct tasks *t, const char *id, enum task_status status,
             const char *message, const char *result, const char *error);

/*
 * Copies task id of tenant into *out (caller finishes it). -ENOENT when
 * there is none (or it is another tenant's, or expired), -EIO, -ENOMEM.
 */
__attribute__((warn_unused_result)) int tasks_get(struct tasks *t,
                                                  const char *tenant,
                                                  const char *id,
                                                  struct task_record *out);

/*
 * Replicas sharing a store. A tasks/cancel that reaches a replica other than
 * the one running the task asks for the stop in the store:
 * tasks_request_cancel marks task id of tenant when it is still running (0),
 * -ENOENT when there is none or it has ended, -EOPNOTSUPP without a durable
 * store. The replica running it collects the marks of its own tasks with
 * tasks_take_cancels (up to max ids into ids, clearing the marks; returns
 * how many) and stops them.
 */
__attribute__((warn_unused_result)) int
tasks_request_cancel(struct tasks *t, const char *tenant, const char *id);
size_t tasks_take_cancels(struct tasks *t, char (*ids)[TASK_ID_LEN + 1],
                          size_t max);
#define TASKS_MAX_CANCELS 64

/*
 * Housekeeping of a replica (cron.h, every TASKS_LEASE_INTERVAL_MS(cfg)):
 * records in the store that this replica is alive, and fails the running
 * tasks of replicas not seen for MCP_REPLICA_LEASE_SECONDS (killed, or cut
 * off), saying so, so that no task stays "working" forever.
 */
enum cron_next tasks_job_replica(void *t, long long deadline_ms);
#define TASKS_LEASE_INTERVAL_MS(cfg) ((cfg)->replica_lease_s * 1000u / 3)

/*
 * Housekeeping (cron.h): deletes ended tasks past their retention, a batch
 * at a time until deadline_ms; CRON_MORE when it stopped with some left.
 */
enum cron_next tasks_job_sweep(void *t, long long deadline_ms);
#define TASKS_SWEEP_INTERVAL_MS 60000

#endif
