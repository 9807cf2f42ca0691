/* SPDX-License-Identifier: MIT */
/*
 * schema: see schema.h. Adding a table: define its migration in the module
 * that owns it (as oauth_db.h does) and append one entry here.
 */
#include "schema.h"

#include "audit/audit.h"
#include "audit/usage.h"
#include "oauth/oauth_db.h"
#include "run/budget.h"
#include "run/lease.h"
#include "tasks/tasks_db.h"

/*
 * Every schema step of the daemon, oldest first. Append only; never edit or
 * reorder an entry that has shipped (see store.h).
 */
static const struct store_migration migrations[] = {
    {1, "oauth", OAUTH_DB_MIGRATION_1, OAUTH_DB_MIGRATION_1_PG},
    {2, "tasks", TASKS_DB_MIGRATION_1, TASKS_DB_MIGRATION_1_PG},
    {3, "budget", BUDGET_MIGRATION_1, BUDGET_MIGRATION_1_PG},
    {4, "tasks", TASKS_DB_MIGRATION_2, TASKS_DB_MIGRATION_2_PG},
    {5, "tasks", TASKS_DB_MIGRATION_3, TASKS_DB_MIGRATION_3_PG},
    {6, "audit", AUDIT_MIGRATION_1, AUDIT_MIGRATION_1_PG},
    {7, "usage", USAGE_MIGRATION_1, USAGE_MIGRATION_1_PG},
    {8, "lease", LEASE_MIGRATION_1, LEASE_MIGRATION_1_PG},
};

#define N_MIGRATIONS (sizeof(migrations) / sizeof(migrations[0]))

int schema_open(const char *where, struct store **out, char *err, size_t errlen)
{
	return store_open_with(where, migrations, N_MIGRATIONS, out, err,
	                       errlen);
}

unsigned schema_version(void)
{
	return migrations[N_MIGRATIONS - 1].version;
}
