/* SPDX-License-Identifier: MIT */
/*
 * tasks_db: the task records in the daemon's durable store, the table
 * task_records of TASKS_DB_MIGRATION_1 (see tasks_db.h). Each operation is
 * one short transaction. Thread-safety: called with the tasks mutex held;
 * the store serializes transactions itself.
 */
#include "tasks/tasks_db.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"

struct db {
	struct store *st;
};

static int text_or_null(struct store_stmt *s, int col, char **out)
{
	const char *t = store_col_text(s, col);

	*out = NULL;
	if (!t)
		return 0;
	*out = strdup(t);
	return *out ? 0 : -ENOMEM;
}

/* A status read back; a name this build does not know reads as failed. */
static enum task_status status_of(struct store_stmt *s, int col)
{
	const char *t = store_col_text(s, col);

	for (int i = TASK_WORKING; t && i <= TASK_CANCELLED; i++) {
		if (strcmp(t, task_status_name(i)) == 0)
			return (enum task_status)i;
	}
	return TASK_FAILED;
}

static void bind_status(struct store_stmt *s, int col, enum task_status st)
{
	store_bind_text(s, col, task_status_name(st));
}

static void bind_opt(struct store_stmt *s, int col, const char *v)
{
	if (v)
		store_bind_text(s, col, v);
	else
		store_bind_null(s, col);
}

/*
 * Parameters 1-7 of an UPDATE that ends running records (no result) as r
 * says: "SET status = ?, message = ?, error = ?, updated_ms = ?, ttl_ms = ?
 * - created_ms + ?, bytes = ?".
 */
static void bind_ending(struct store_stmt *s, const struct task_record *r)
{
	bind_status(s, 1, r->status);
	bind_opt(s, 2, r->message);
	bind_opt(s, 3, r->error);
	store_bind_int64(s, 4, r->updated_ms);
	store_bind_int64(s, 5, r->updated_ms);
	store_bind_int64(s, 6, r->ttl_ms);
	store_bind_int64(s, 7, task_record_bytes(r));
}

/* Runs a write in a transaction of its own: fn fills and steps. */
static int write_tx(struct db *db, int (*fn)(struct store_tx *, const void *),
                    const void *arg)
{
	struct store_tx *tx;
	int r = store_begin(db->st, true, &tx);

	if (r < 0)
		return r;
	r = fn(tx, arg);
	if (r < 0) {
		store_rollback(tx);
		return r;
	}
	return store_commit(tx);
}

struct insert_args {
	const struct task_record *r;
	const char *tenant, *tool;
};

static int do_insert(struct store_tx *tx, const void *arg)
{
	static const char sql[] =
	    "INSERT INTO task_records (id, tenant, tool, status, created_ms, "
	    "updated_ms, ttl_ms, message, owner) "
	    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)";
	const struct insert_args *a = arg;
	struct store_stmt *s = store_stmt(tx, sql);

	if (!s)
		return -EIO;
	store_bind_text(s, 1, a->r->id);
	store_bind_text(s, 2, a->tenant);
	store_bind_text(s, 3, a->tool);
	bind_status(s, 4, a->r->status);
	store_bind_int64(s, 5, a->r->created_ms);
	store_bind_int64(s, 6, a->r->updated_ms);
	store_bind_int64(s, 7, a->r->ttl_ms);
	bind_opt(s, 8, a->r->message);
	store_bind_text(s, 9, a->r->owner);
	return store_run(tx, s);
}

static int db_insert(void *bd, const struct task_record *r, const char *tenant,
                     const char *tool)
{
	struct insert_args a = {r, tenant, tool};

	return write_tx(bd, do_insert, &a);
}

struct finish_args {
	const struct task_record *r;
	size_t max_bytes;
	unsigned *dropped;
};

/*
 * Deletes the oldest ended records of the tenant of record id, never id
 * itself, while its ended records hold more than max bytes. The victims
 * are read first and deleted after, one statement at a time.
 */
static int trim_tenant(struct store_tx *tx, const char *id, size_t max,
                       unsigned *dropped)
{
	static const char total_sql[] =
	    "SELECT tenant, (SELECT coalesce(sum(o.bytes), 0) FROM "
	    "task_records o WHERE o.tenant = t.tenant AND o.status NOT IN "
	    "('working', 'input_required')) FROM task_records t WHERE id = ?";
	static const char pick_sql[] =
	    "SELECT id, bytes FROM task_records WHERE tenant = ? AND id <> ? "
	    "AND status NOT IN ('working', 'input_required') "
	    "ORDER BY updated_ms, rowid";
	static const char drop_sql[] = "DELETE FROM task_records WHERE id = ?";
	struct store_stmt *s = store_stmt(tx, total_sql);
	char(*ids)[TASK_ID_LEN + 1] = NULL;
	size_t n = 0, cap = 0;
	char *tenant = NULL;
	long long total;
	int r;

	if (!s)
		return -EIO;
	store_bind_text(s, 1, id);
	r = store_step(tx, s);
	if (r != 1)
		return r < 0 ? r : -ENOENT;
	tenant = strdup(store_col_text(s, 0) ? store_col_text(s, 0) : "");
	total = store_col_int64(s, 1);
	if (!tenant)
		return -ENOMEM;
	if (total <= (long long)max)
		goto out;
	s = store_stmt(tx, pick_sql);
	if (!s) {
		r = -EIO;
		goto out;
	}
	store_bind_text(s, 1, tenant);
	store_bind_text(s, 2, id);
	while (total > (long long)max && (r = store_step(tx, s)) == 1) {
		const char *victim = store_col_text(s, 0);

		if (!victim || strlen(victim) != TASK_ID_LEN)
			continue;
		if (n == cap) {
			size_t ncap = cap ? cap * 2 : 16;
			void *p = realloc(ids, ncap * sizeof(*ids));

			if (!p) {
				r = -ENOMEM;
				goto out;
			}
			ids = p;
			cap = ncap;
		}
		memcpy(ids[n++], victim, TASK_ID_LEN + 1);
		total -= store_col_int64(s, 1);
	}
	if (r < 0)
		goto out;
	for (size_t i = 0; i < n; i++) {
		s = store_stmt(tx, drop_sql);
		if (!s) {
			r = -EIO;
			goto out;
		}
		store_bind_text(s, 1, ids[i]);
		if ((r = store_run(tx, s)) < 0)
			goto out;
	}
	*dropped = (unsigned)n;
out:
	free(ids);
	free(tenant);
	return r < 0 ? r : 0;
}

/* Only a record that has not ended (working, input_required) ends. */
static int do_finish(struct store_tx *tx, const void *arg)
{
	static const char sql[] =
	    "UPDATE task_records SET status = ?, message = ?, result = ?, "
	    "error = ?, updated_ms = ?, ttl_ms = ? - created_ms + ?, "
	    "bytes = ? "
	    "WHERE id = ? AND status IN ('working', 'input_required')";
	const struct finish_args *a = arg;
	const struct task_record *r = a->r;
	struct store_stmt *s = store_stmt(tx, sql);
	int rc;

	if (!s)
		return -EIO;
	bind_status(s, 1, r->status);
	bind_opt(s, 2, r->message);
	bind_opt(s, 3, r->result);
	bind_opt(s, 4, r->error);
	store_bind_int64(s, 5, r->updated_ms);
	store_bind_int64(s, 6, r->updated_ms);
	store_bind_int64(s, 7, r->ttl_ms);
	store_bind_int64(s, 8, task_record_bytes(r));
	store_bind_text(s, 9, r->id);
	rc = store_run(tx, s);
	if (rc == 0 && store_changes(tx) == 0)
		rc = -ENOENT;
	if (rc == 0 && a->max_bytes)
		rc = trim_tenant(tx, r->id, a->max_bytes, a->dropped);
	return rc;
}

static int db_finish(void *bd, const struct task_record *r, size_t max_bytes,
                     unsigned *dropped)
{
	struct finish_args a = {r, max_bytes, dropped};
	int rc;

	*dropped = 0;
	rc = write_tx(bd, do_finish, &a);
	if (rc < 0)
		*dropped = 0;
	return rc;
}

static int db_get(void *bd, const char *tenant, const char *id,
                  struct task_record *out)
{
	static const char sql[] =
	    "SELECT status, created_ms, updated_ms, ttl_ms, message, result, "
	    "error, owner FROM task_records WHERE id = ? AND tenant = ?";
	struct db *db = bd;
	struct store_tx *tx;
	struct store_stmt *s;
	int r;

	if (strlen(id) != TASK_ID_LEN)
		return -ENOENT;
	r = store_begin(db->st, false, &tx);
	if (r < 0)
		return r;
	s = store_stmt(tx, sql);
	if (!s) {
		store_rollback(tx);
		return -EIO;
	}
	store_bind_text(s, 1, id);
	store_bind_text(s, 2, tenant);
	r = store_step(tx, s);
	if (r == 1) {
		memcpy(out->id, id, TASK_ID_LEN + 1);
		out->status = status_of(s, 0);
		out->created_ms = store_col_int64(s, 1);
		out->updated_ms = store_col_int64(s, 2);
		out->ttl_ms = store_col_int64(s, 3);
		r = text_or_null(s, 4, &out->message);
		if (r == 0)
			r = text_or_null(s, 5, &out->result);
		if (r == 0)
			r = text_or_null(s, 6, &out->error);
		snprintf(out->owner, sizeof(out->owner), "%s",
		         store_col_text(s, 7) ? store_col_text(s, 7) : "");
		if (r < 0)
			task_record_finish(out);
	} else if (r == 0) {
		r = -ENOENT;
	}
	store_rollback(tx);
	return r < 0 ? r : 0;
}

struct room_args {
	const char *tenant;
	unsigned max;
};

static int do_make_room(struct store_tx *tx, const void *arg)
{
	static const char count_sql[] =
	    "SELECT count(*), sum(CASE WHEN status IN ('working', "
	    "'input_required') THEN 1 ELSE 0 END) "
	    "FROM task_records WHERE tenant = ?";
	static const char drop_sql[] =
	    "DELETE FROM task_records WHERE id IN (SELECT id FROM "
	    "task_records WHERE tenant = ? AND "
	    "status NOT IN ('working', 'input_required') "
	    "ORDER BY updated_ms, rowid LIMIT ?)";
	const struct room_args *a = arg;
	struct store_stmt *s = store_stmt(tx, count_sql);
	long long n, live;
	int r;

	if (!s)
		return -EIO;
	store_bind_text(s, 1, a->tenant);
	r = store_step(tx, s);
	if (r != 1)
		return r < 0 ? r : -EIO;
	n = store_col_int64(s, 0);
	live = store_col_int64(s, 1);
	if (n < a->max)
		return 0;
	if (live >= a->max)
		return -EBUSY;
	s = store_stmt(tx, drop_sql);
	if (!s)
		return -EIO;
	store_bind_text(s, 1, a->tenant);
	store_bind_int64(s, 2, n - a->max + 1);
	return store_run(tx, s);
}

static int db_make_room(void *bd, const char *tenant, unsigned max)
{
	struct room_args a = {tenant, max};

	return write_tx(bd, do_make_room, &a);
}

struct purge_args {
	long long now_ms;
	unsigned max;
	unsigned *deleted;
};

static int do_purge(struct store_tx *tx, const void *arg)
{
	/* A batch: the subquery's LIMIT is portable, DELETE ... LIMIT not. */
	static const char sql[] =
	    "DELETE FROM task_records WHERE id IN (SELECT id FROM task_records "
	    "WHERE status NOT IN ('working', 'input_required') AND "
	    "created_ms + ttl_ms < ? LIMIT ?)";
	const struct purge_args *a = arg;
	struct store_stmt *s = store_stmt(tx, sql);
	int rc;

	if (!s)
		return -EIO;
	store_bind_int64(s, 1, a->now_ms);
	store_bind_int64(s, 2, a->max);
	rc = store_run(tx, s);
	if (rc == 0)
		*a->deleted = (unsigned)store_changes(tx);
	return rc;
}

static int db_purge(void *bd, long long now_ms, unsigned max, unsigned *deleted)
{
	struct purge_args a = {now_ms, max, deleted};

	*deleted = 0;
	return write_tx(bd, do_purge, &a);
}

static int do_fail_running(struct store_tx *tx, const void *arg)
{
	static const char sql[] =
	    "UPDATE task_records SET status = ?, message = ?, error = ?, "
	    "updated_ms = ?, ttl_ms = ? - created_ms + ?, bytes = ? "
	    "WHERE status IN ('working', 'input_required') AND owner = ?";
	const struct task_record *r = arg;
	struct store_stmt *s = store_stmt(tx, sql);
	int rc;

	if (!s)
		return -EIO;
	bind_ending(s, r);
	store_bind_text(s, 8, r->owner);
	rc = store_run(tx, s);
	if (rc == 0 && store_changes(tx) > 0)
		log_warnx("%lld task(s) were still running when the daemon "
		          "last stopped; they are marked failed",
		          store_changes(tx));
	return rc;
}

static int db_fail_running(void *bd, const struct task_record *r)
{
	return write_tx(bd, do_fail_running, r);
}

struct cancel_args {
	const char *tenant, *id;
};

static int do_request_cancel(struct store_tx *tx, const void *arg)
{
	static const char sql[] =
	    "UPDATE task_records SET cancel_asked = 1 WHERE id = ? AND "
	    "tenant = ? AND status IN ('working', 'input_required')";
	const struct cancel_args *a = arg;
	struct store_stmt *s = store_stmt(tx, sql);
	int rc;

	if (!s)
		return -EIO;
	store_bind_text(s, 1, a->id);
	store_bind_text(s, 2, a->tenant);
	rc = store_run(tx, s);
	if (rc == 0 && store_changes(tx) == 0)
		rc = -ENOENT;
	return rc;
}

static int db_request_cancel(void *bd, const char *tenant, const char *id)
{
	struct cancel_args a = {tenant, id};

	if (strlen(id) != TASK_ID_LEN)
		return -ENOENT;
	return write_tx(bd, do_request_cancel, &a);
}

struct take_args {
	const char *owner;
	char (*ids)[TASK_ID_LEN + 1];
	size_t max, *n;
};

static int do_take_cancels(struct store_tx *tx, const void *arg)
{
	static const char pick[] =
	    "SELECT id FROM task_records WHERE owner = ? AND cancel_asked = 1 "
	    "AND status IN ('working', 'input_required') ORDER BY id LIMIT ?";
	static const char clear[] =
	    "UPDATE task_records SET cancel_asked = 0 WHERE id = ?";
	const struct take_args *a = arg;
	struct store_stmt *s = store_stmt(tx, pick);
	int r;

	*a->n = 0;
	if (!s)
		return -EIO;
	store_bind_text(s, 1, a->owner);
	store_bind_int64(s, 2, (long long)a->max);
	while ((r = store_step(tx, s)) == 1) {
		const char *id = store_col_text(s, 0);

		if (id && strlen(id) == TASK_ID_LEN && *a->n < a->max)
			memcpy(a->ids[(*a->n)++], id, TASK_ID_LEN + 1);
	}
	if (r < 0)
		return r;
	for (size_t i = 0; i < *a->n; i++) {
		s = store_stmt(tx, clear);
		if (!s)
			return -EIO;
		store_bind_text(s, 1, a->ids[i]);
		if ((r = store_run(tx, s)) < 0)
			return r;
	}
	return 0;
}

static int db_take_cancels(void *bd, const char *owner,
                           char (*ids)[TASK_ID_LEN + 1], size_t max, size_t *n)
{
	struct take_args a = {owner, ids, max, n};
	int r = write_tx(bd, do_take_cancels, &a);

	if (r < 0)
		*n = 0;
	return r;
}

struct beat_args {
	const char *owner;
	long long now_ms, lease_ms;
	const struct task_record *r;
	long long *n;
};

static int do_heartbeat(struct store_tx *tx, const void *arg)
{
	static const char seen[] =
	    "INSERT INTO task_replicas (name, seen_ms) VALUES (?, ?) "
	    "ON CONFLICT (name) DO UPDATE SET seen_ms = excluded.seen_ms";
	/* A running record's owner is gone when it is not this replica and
	 * was not seen within the lease (or never: its row is missing). */
	static const char fail[] =
	    "UPDATE task_records SET status = ?, message = ?, error = ?, "
	    "updated_ms = ?, ttl_ms = ? - created_ms + ?, bytes = ? "
	    "WHERE status IN ('working', 'input_required') AND owner <> '' "
	    "AND owner <> ? AND NOT EXISTS (SELECT 1 FROM task_replicas "
	    "WHERE name = task_records.owner AND seen_ms >= ?)";
	const struct beat_args *a = arg;
	struct store_stmt *s = store_stmt(tx, seen);
	int r;

	if (!s)
		return -EIO;
	store_bind_text(s, 1, a->owner);
	store_bind_int64(s, 2, a->now_ms);
	if ((r = store_run(tx, s)) < 0)
		return r;
	s = store_stmt(tx, fail);
	if (!s)
		return -EIO;
	bind_ending(s, a->r);
	store_bind_text(s, 8, a->owner);
	store_bind_int64(s, 9, a->now_ms - a->lease_ms);
	if ((r = store_run(tx, s)) < 0)
		return r;
	*a->n = store_changes(tx);
	return 0;
}

static int db_heartbeat(void *bd, const char *owner, long long now_ms,
                        long long lease_ms, const struct task_record *r,
                        long long *n)
{
	struct beat_args a = {owner, now_ms, lease_ms, r, n};

	*n = 0;
	return write_tx(bd, do_heartbeat, &a);
}

static void db_destroy(void *bd)
{
	free(bd);
}

const struct tasks_backend tasks_db_backend = {
    .name = "store",
    .durable = true,
    .insert = db_insert,
    .finish = db_finish,
    .get = db_get,
    .make_room = db_make_room,
    .purge = db_purge,
    .fail_running = db_fail_running,
    .request_cancel = db_request_cancel,
    .take_cancels = db_take_cancels,
    .heartbeat = db_heartbeat,
    .destroy = db_destroy,
};

int tasks_db_open(struct store *st, void **bd)
{
	struct db *db = calloc(1, sizeof(*db));

	*bd = db;
	if (!db)
		return -ENOMEM;
	db->st = st;
	return 0;
}
