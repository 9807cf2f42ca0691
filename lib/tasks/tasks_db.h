/* SPDX-License-Identifier: MIT */
/*
 * tasks_db: the tasks backend (tasks_backend.h) in the daemon's durable
 * store (store.h): one row of task_records per task, its result or error
 * as JSON text once it ended. tasks.c selects it when it is given a store;
 * the rules (ids, limits, retention, what a restart means) stay there.
 *
 * Each backend operation is one short transaction of its own, committed
 * (with the store's synchronous=FULL: on disk) before it returns, so a task
 * recorded or ended is there after a crash. Every query is a constant
 * string, prepared once and cached by the store.
 *
 * Errors: negative errno from the store (-EIO, -EBUSY, -ENOSPC; logged
 * there), -ENOENT for no such record, -ENOMEM.
 *
 * Threads: called with the tasks mutex held, never concurrently; the store
 * serializes these transactions with those of other modules. The store
 * must outlive the backend's data.
 */
#ifndef MCPSD_TASKS_DB_H
#define MCPSD_TASKS_DB_H

#include "store/store.h"
#include "tasks/tasks_backend.h"

/*
 * Schema step of the tasks module (see store.c's migrations[]). Never
 * edit: add another. status is the name task_status_name() gives; a task
 * may be deleted once created_ms + ttl_ms has passed.
 */
#define TASKS_DB_MIGRATION_1                                                   \
	"CREATE TABLE task_records ("                                          \
	"  id TEXT PRIMARY KEY CHECK (length(id) = 32),"                       \
	"  tenant TEXT NOT NULL,"                                              \
	"  tool TEXT NOT NULL,"                                                \
	"  status TEXT NOT NULL CHECK (status IN ('working', "                 \
	"    'input_required', 'completed', 'failed', 'cancelled')),"          \
	"  created_ms INTEGER NOT NULL,"                                       \
	"  updated_ms INTEGER NOT NULL,"                                       \
	"  ttl_ms INTEGER NOT NULL,"                                           \
	"  message TEXT,"                                                      \
	"  result TEXT,"                                                       \
	"  error TEXT"                                                         \
	") STRICT;"                                                            \
	"CREATE INDEX task_records_tenant ON task_records(tenant, "            \
	"updated_ms);"                                                         \
	"CREATE INDEX task_records_expiry ON task_records(created_ms + "       \
	"ttl_ms);"

/*
 * The same for PostgreSQL: BIGINT for INTEGER, and a rowid column (an
 * identity, in insertion order like SQLite's rowid) so that the queries
 * ordering by rowid run on both. Never edit.
 */
#define TASKS_DB_MIGRATION_1_PG                                                \
	"CREATE TABLE task_records ("                                          \
	"  id TEXT PRIMARY KEY CHECK (length(id) = 32),"                       \
	"  tenant TEXT NOT NULL,"                                              \
	"  tool TEXT NOT NULL,"                                                \
	"  status TEXT NOT NULL CHECK (status IN ('working', "                 \
	"    'input_required', 'completed', 'failed', 'cancelled')),"          \
	"  created_ms BIGINT NOT NULL,"                                        \
	"  updated_ms BIGINT NOT NULL,"                                        \
	"  ttl_ms BIGINT NOT NULL,"                                            \
	"  message TEXT,"                                                      \
	"  result TEXT,"                                                       \
	"  error TEXT,"                                                        \
	"  rowid BIGINT GENERATED ALWAYS AS IDENTITY"                          \
	");"                                                                   \
	"CREATE INDEX task_records_tenant ON task_records(tenant, "            \
	"updated_ms);"                                                         \
	"CREATE INDEX task_records_expiry ON task_records((created_ms + "      \
	"ttl_ms));"

/*
 * Replicas sharing the store: the replica that runs a task (owner, "" for
 * the only daemon), a cancel asked through another replica, and when each
 * replica was last seen (task_replicas). Valid in both dialects but for
 * STRICT and the integer width, hence the two texts.
 */
#define TASKS_DB_MIGRATION_2_COMMON                                            \
	"ALTER TABLE task_records ADD COLUMN owner TEXT NOT NULL DEFAULT '';"  \
	"ALTER TABLE task_records ADD COLUMN cancel_asked INTEGER NOT NULL "   \
	"DEFAULT 0;"                                                           \
	"CREATE INDEX task_records_owner ON task_records(owner, status);"
#define TASKS_DB_MIGRATION_2                                                   \
	TASKS_DB_MIGRATION_2_COMMON                                            \
	"CREATE TABLE task_replicas (name TEXT PRIMARY KEY, "                  \
	"seen_ms INTEGER NOT NULL) STRICT;"
#define TASKS_DB_MIGRATION_2_PG                                                \
	TASKS_DB_MIGRATION_2_COMMON                                            \
	"CREATE TABLE task_replicas (name TEXT PRIMARY KEY, "                  \
	"seen_ms BIGINT NOT NULL);"

/*
 * The bytes each record keeps (message, result and error), so a tenant's
 * ended records can be held to MCP_TASK_RESULT_BYTES_PER_TENANT; records
 * from before it get their size here. Never edit.
 */
#define TASKS_DB_MIGRATION_3                                                   \
	"ALTER TABLE task_records ADD COLUMN bytes INTEGER NOT NULL "          \
	"DEFAULT 0;"                                                           \
	"UPDATE task_records SET bytes = "                                     \
	"coalesce(length(CAST(message AS BLOB)), 0) + "                        \
	"coalesce(length(CAST(result AS BLOB)), 0) + "                         \
	"coalesce(length(CAST(error AS BLOB)), 0);"
#define TASKS_DB_MIGRATION_3_PG                                                \
	"ALTER TABLE task_records ADD COLUMN bytes BIGINT NOT NULL "           \
	"DEFAULT 0;"                                                           \
	"UPDATE task_records SET bytes = coalesce(octet_length(message), 0) "  \
	"+ coalesce(octet_length(result), 0) + "                               \
	"coalesce(octet_length(error), 0);"

/* The backend; its data comes from tasks_db_open. */
extern const struct tasks_backend tasks_db_backend;

/*
 * The backend's data for store st (borrowed; it must outlive the data,
 * which tasks_db_backend.destroy frees). -ENOMEM.
 */
__attribute__((warn_unused_result)) int tasks_db_open(struct store *st,
                                                      void **bd);

#endif
