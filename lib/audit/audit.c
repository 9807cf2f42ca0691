/* SPDX-License-Identifier: MIT */
/*
 * audit: see audit.h. An entry's text is built as a cJSON object outside
 * any transaction; the append transaction adds its seq, encodes it
 * canonically, hashes it onto the head and inserts it. Every query is a
 * constant string the store prepares once.
 */
#include "audit/audit.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "audit/usage.h"
#include "util/buf.h"
#include "util/log.h"
#include "util/mono.h"

#define AUDIT_VERIFY_PAGE 500

struct audit {
	struct store *st;
	bool keep_code;
	unsigned audit_days, usage_days; /* 0: forever */
};

int audit_create(struct store *st, bool keep_code, struct audit **out)
{
	struct audit *a = calloc(1, sizeof(*a));

	*out = NULL;
	if (!a)
		return -ENOMEM;
	a->st = st;
	a->keep_code = keep_code;
	*out = a;
	return 0;
}

void audit_destroy(struct audit *a)
{
	free(a);
}

struct store *audit_store(const struct audit *a)
{
	return a->st;
}

void audit_set_retention(struct audit *a, unsigned audit_days,
                         unsigned usage_days)
{
	a->audit_days = audit_days;
	a->usage_days = usage_days;
}

/* Wall clock in milliseconds. */
static long long audit_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

enum cron_next audit_job_retention(void *audit, long long deadline_ms)
{
	struct audit *a = audit;
	long long now = audit_now_ms();
	int r;

	(void)deadline_ms;
	if (a->audit_days) {
		r = audit_prune(a->st, now - a->audit_days * 86400000LL, now);
		if (r < 0)
			log_warnx("audit: pruning entries older than %u days "
			          "failed (%s); retrying in an hour",
			          a->audit_days, strerror(-r));
	}
	if (a->usage_days) {
		r = usage_prune(a->st, now / 1000 - a->usage_days * 86400LL);
		if (r < 0)
			log_warnx("usage: deleting hours older than %u days "
			          "failed (%s); retrying in an hour",
			          a->usage_days, strerror(-r));
		else if (r > 0)
			log_info("usage: deleted %d hourly rows older than %u "
			         "days",
			         r, a->usage_days);
	}
	return CRON_DONE;
}

/* ---- an entry's text ------------------------------------------------------
 */

/*
 * A string as the canonical encoding accepts it: text that is not valid
 * UTF-8 (a file name hostile code chose) has each bad byte replaced by
 * U+FFFD, so the entry is still written and says that a name was odd.
 */
static cJSON *audit_text(const char *s)
{
	struct buf b;
	cJSON *v;
	size_t n;

	s = s ? s : "";
	n = strlen(s);
	if (audit_utf8_valid(s, n))
		return cJSON_CreateString(s);
	buf_init(&b, 0);
	for (size_t i = 0; i < n; i++) {
		size_t k = 1;

		/* The longest valid sequence starting here, else one byte. */
		while (k <= 4 && i + k <= n && !audit_utf8_valid(s + i, k))
			k++;
		if (k <= 4 && i + k <= n) {
			if (buf_append(&b, s + i, k) < 0)
				break;
			i += k - 1;
		} else if (buf_puts(&b, "\xef\xbf\xbd") < 0) {
			break;
		}
	}
	v = cJSON_CreateString(b.data ? b.data : "");
	buf_finish(&b);
	return v;
}

static void audit_add_text(cJSON *o, const char *name, const char *s)
{
	cJSON_AddItemToObject(o, name, audit_text(s));
}

static cJSON *audit_strings(const char *const *v, size_t n)
{
	cJSON *a = cJSON_CreateArray();

	for (size_t i = 0; a && i < n; i++)
		cJSON_AddItemToArray(a, audit_text(v[i]));
	return a;
}

/* The code itself (AUDIT_KEEP_CODE): as text, or base64 when not UTF-8. */
static void audit_add_code(cJSON *o, const char *code, size_t n)
{
	char *b64;

	if (audit_utf8_valid(code, n) && memchr(code, '\0', n) == NULL) {
		char *t = strndup(code, n);

		if (t)
			cJSON_AddStringToObject(o, "code", t);
		free(t);
		return;
	}
	b64 = malloc(4 * ((n + 2) / 3) + 1);
	if (!b64)
		return;
	EVP_EncodeBlock((unsigned char *)b64, (const unsigned char *)code,
	                (int)n);
	cJSON_AddStringToObject(o, "code_base64", b64);
	free(b64);
}

static cJSON *audit_run_body(const struct audit *a, const struct audit_run *r,
                             long long now_ms)
{
	cJSON *o = cJSON_CreateObject(), *lim, *use, *pk, *net, *files;
	char sha[AUDIT_HASH_HEX + 1];

	if (!o ||
	    audit_sha256_hex(r->code ? r->code : "", r->code_len, sha) < 0) {
		cJSON_Delete(o);
		return NULL;
	}
	cJSON_AddStringToObject(o, "kind", "run");
	cJSON_AddNumberToObject(o, "time_ms", (double)now_ms);
	audit_add_text(o, "tool", r->tool);
	audit_add_text(o, "tenant", r->tenant);
	audit_add_text(o, "client", r->client);
	audit_add_text(o, "conversation", r->conversation);
	audit_add_text(o, "language", r->language);
	audit_add_text(o, "status", r->status);
	cJSON_AddNumberToObject(o, "exit_code", r->exit_code);
	cJSON_AddStringToObject(o, "code_sha256", sha);
	cJSON_AddNumberToObject(o, "code_bytes", (double)r->code_len);
	if (a->keep_code && r->code)
		audit_add_code(o, r->code, r->code_len);
	lim = cJSON_AddObjectToObject(o, "limits");
	cJSON_AddNumberToObject(lim, "timeout_s", r->timeout_s);
	cJSON_AddNumberToObject(lim, "memory_mb", r->memory_mb);
	cJSON_AddNumberToObject(lim, "cpus_milli",
	                        (double)(long long)(r->cpus * 1000 + 0.5));
	cJSON_AddBoolToObject(lim, "network", r->network);
	use = cJSON_AddObjectToObject(o, "used");
	cJSON_AddNumberToObject(use, "duration_ms", (double)r->duration_ms);
	cJSON_AddNumberToObject(use, "cpu_ms", (double)r->cpu_ms);
	cJSON_AddNumberToObject(use, "memory_peak_bytes",
	                        (double)r->memory_peak_bytes);
	cJSON_AddNumberToObject(use, "storage_bytes", (double)r->storage_bytes);
	pk = cJSON_AddObjectToObject(o, "packages");
	cJSON_AddItemToObject(pk, "requested",
	                      audit_strings(r->packages, r->n_packages));
	cJSON_AddNumberToObject(pk, "installed", (double)r->packages_installed);
	net = cJSON_AddObjectToObject(o, "network");
	cJSON_AddItemToObject(net, "allowed",
	                      audit_strings(r->net_allowed, r->n_net_allowed));
	cJSON_AddItemToObject(net, "blocked",
	                      audit_strings(r->net_blocked, r->n_net_blocked));
	cJSON_AddNumberToObject(net, "egress_bytes", (double)r->egress_bytes);
	files = cJSON_AddArrayToObject(o, "files");
	for (size_t i = 0; files && i < r->n_files; i++) {
		cJSON *f = cJSON_CreateObject();

		if (!f || !cJSON_AddItemToArray(files, f)) {
			cJSON_Delete(f);
			break;
		}
		audit_add_text(f, "name", r->files[i].name);
		cJSON_AddNumberToObject(f, "size", (double)r->files[i].size);
	}
	return o;
}

/* ---- appending ------------------------------------------------------------
 */

/* A string field of an entry's body ("" when absent). */
static const char *audit_field(const cJSON *body, const char *name)
{
	const char *v =
	    cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(body, name));

	return v ? v : "";
}

/* The head's seq and hash (0 and AUDIT_GENESIS for an empty trail). */
static int audit_head(struct store_tx *tx, long long *seq, char *hash)
{
	static const char sql[] =
	    "SELECT seq, hash FROM audit_log ORDER BY seq DESC LIMIT 1";
	struct store_stmt *s = store_stmt(tx, sql);
	int r = store_step(tx, s);

	*seq = 0;
	snprintf(hash, AUDIT_HASH_HEX + 1, "%s", AUDIT_GENESIS);
	if (r == 1) {
		const char *h = store_col_text(s, 1);

		*seq = store_col_int64(s, 0);
		snprintf(hash, AUDIT_HASH_HEX + 1, "%s", h ? h : "");
		r = 0;
	}
	return r;
}

/*
 * Inserts body as entry seq continuing from prev, inside tx: its seq is
 * added here; its kind, time_ms, tenant and conversation go into the
 * columns too.
 */
static int audit_insert_tx(struct store_tx *tx, cJSON *body, long long seq,
                           const char *prev)
{
	static const char sql[] =
	    "INSERT INTO audit_log (seq, time_ms, kind, tenant, conversation, "
	    "prev, hash, body) VALUES (?, ?, ?, ?, ?, ?, ?, ?)";
	char hash[AUDIT_HASH_HEX + 1], why[128];
	const cJSON *t = cJSON_GetObjectItemCaseSensitive(body, "time_ms");
	struct store_stmt *s;
	struct buf text;
	int r;

	cJSON_DeleteItemFromObjectCaseSensitive(body, "seq");
	cJSON_AddNumberToObject(body, "seq", (double)seq);
	buf_init(&text, 0);
	r = audit_canon(body, &text, why, sizeof(why));
	if (r == 0 && !text.data)
		r = -ENOMEM;
	if (r == 0)
		r = audit_chain_hash(prev, text.data, text.len, hash);
	if (r < 0) {
		log_warnx("audit: cannot encode an entry: %s",
		          r == -EINVAL ? why : strerror(-r));
		buf_finish(&text);
		return r;
	}
	s = store_stmt(tx, sql);
	store_bind_int64(s, 1, seq);
	store_bind_int64(s, 2,
	                 cJSON_IsNumber(t) ? (long long)t->valuedouble : 0);
	store_bind_text(s, 3, audit_field(body, "kind"));
	store_bind_text(s, 4, audit_field(body, "tenant"));
	store_bind_text(s, 5, audit_field(body, "conversation"));
	store_bind_text(s, 6, prev);
	store_bind_text(s, 7, hash);
	store_bind_text(s, 8, text.data);
	r = store_run(tx, s);
	buf_finish(&text);
	return r;
}

/* Appends body after the head, inside tx (a write transaction). */
static int audit_append_tx(struct store_tx *tx, cJSON *body)
{
	char prev[AUDIT_HASH_HEX + 1];
	long long seq;
	int r = audit_head(tx, &seq, prev);

	return r < 0 ? r : audit_insert_tx(tx, body, seq + 1, prev);
}

/*
 * Entries prepared and not yet written (audit_prepare .. audit_write),
 * process-wide, in the order they were prepared: the readers
 * (/admin/usage, /admin/audit, the usage tool) hold the store, not the
 * audit, and wait for the ones prepared before they asked
 * (audit_wait_written), never for later ones, so a steady stream of runs
 * does not keep them waiting.
 */
static pthread_mutex_t audit_pending_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t audit_pending_cond = PTHREAD_COND_INITIALIZER;
static struct audit_pending *audit_pending_head, *audit_pending_tail;
static unsigned long long audit_pending_next = 1; /* the next ticket */
static bool audit_writing; /* a thread writes a batch (audit_write) */

struct audit_pending {
	struct audit_pending *prev, *next; /* in the list above */
	unsigned long long ticket;
	bool submitted; /* audit_write was called */
	bool taken;     /* in a batch being written */
	bool written;   /* the batch ended: rc says how */
	int rc;
	struct audit *a;
	cJSON *body;
	struct usage_delta d; /* its strings are the ones below */
	char *tenant, *conversation, *status;
};

static void audit_pending_add(struct audit_pending *p)
{
	pthread_mutex_lock(&audit_pending_mu);
	p->ticket = audit_pending_next++;
	p->prev = audit_pending_tail;
	if (audit_pending_tail)
		audit_pending_tail->next = p;
	else
		audit_pending_head = p;
	audit_pending_tail = p;
	pthread_mutex_unlock(&audit_pending_mu);
}

static void audit_pending_done(struct audit_pending *p)
{
	pthread_mutex_lock(&audit_pending_mu);
	if (p->prev)
		p->prev->next = p->next;
	else
		audit_pending_head = p->next;
	if (p->next)
		p->next->prev = p->prev;
	else
		audit_pending_tail = p->prev;
	pthread_cond_broadcast(&audit_pending_cond);
	pthread_mutex_unlock(&audit_pending_mu);
	cJSON_Delete(p->body);
	free(p->tenant);
	free(p->conversation);
	free(p->status);
	free(p);
}

int audit_prepare(struct audit *a, const struct audit_run *run,
                  long long now_ms, struct audit_pending **out)
{
	struct audit_pending *p = calloc(1, sizeof(*p));

	*out = NULL;
	if (!p)
		return -ENOMEM;
	audit_pending_add(p);
	p->a = a;
	p->body = audit_run_body(a, run, now_ms);
	p->tenant = strdup(run->tenant ? run->tenant : "");
	p->conversation = strdup(run->conversation ? run->conversation : "");
	p->status = strdup(run->status ? run->status : "");
	if (!p->body || !p->tenant || !p->conversation || !p->status) {
		audit_pending_done(p);
		return -ENOMEM;
	}
	p->d = (struct usage_delta){
	    .tenant = p->tenant,
	    .conversation = p->conversation,
	    .time_s = now_ms / 1000,
	    .status = p->status,
	    .cpu_ms = run->cpu_ms,
	    .packages = run->packages_installed,
	    .egress_bytes = run->egress_bytes,
	    .storage_bytes = run->storage_bytes,
	};
	/* Peak memory x wall time, in MiB-milliseconds: an upper bound. */
	if (run->memory_peak_bytes > 0 && run->duration_ms > 0)
		p->d.memory_mib_ms =
		    run->memory_peak_bytes / (1024 * 1024) * run->duration_ms;
	*out = p;
	return 0;
}

/* Entries v[0..n) of store st in one durable transaction. */
static int audit_write_tx(struct store *st, struct audit_pending **v, size_t n)
{
	struct store_tx *tx;
	int r = store_begin(st, true, &tx);

	if (r < 0)
		return r;
	for (size_t i = 0; i < n && r == 0; i++) {
		r = audit_append_tx(tx, v[i]->body);
		if (r == 0)
			r = usage_add_tx(tx, &v[i]->d);
	}
	if (r < 0) {
		store_rollback(tx);
		return r;
	}
	return store_commit(tx);
}

/* Entries one transaction writes at most (one fsync for all of them). */
#define AUDIT_BATCH_MAX 64

/*
 * The commit delay (PostgreSQL's commit_delay): while runs end back to back
 * (the last batch ended under AUDIT_COMMIT_DELAY_MS ago), the next writer
 * waits that long for more entries before it takes its batch, so a stream
 * of quick runs, even one conversation's calls one after another, shares an
 * fsync per delay instead of paying one each; each entry is then on disk
 * at most that much later than it would be. An entry after a quiet spell
 * is written at once. Not on a store replicas share (PostgreSQL): there
 * the other replicas' readers, who do not wait for this one's entries,
 * would see them that much later, and the server groups commits itself.
 * audit_pending_mu guards the time.
 */
#define AUDIT_COMMIT_DELAY_MS 5
static long long audit_last_batch_ms;

/*
 * Group commit: p and every other entry submitted for the same store and
 * not yet taken, in one transaction, so runs that end together share one
 * fsync instead of queueing for one each. A batch that fails is written
 * again one entry a transaction, so one bad entry loses no other.
 * audit_pending_mu held on entry and return, released while writing.
 */
static void audit_write_batch(struct audit_pending *p)
{
	struct audit_pending *v[AUDIT_BATCH_MAX];
	struct store *st = p->a->st;
	size_t n = 0;
	int r;

	audit_writing = true; /* others queue behind this batch from now */
	if (!store_is_shared(st) &&
	    mono_ms() - audit_last_batch_ms < AUDIT_COMMIT_DELAY_MS) {
		pthread_mutex_unlock(&audit_pending_mu);
		usleep(AUDIT_COMMIT_DELAY_MS * 1000);
		pthread_mutex_lock(&audit_pending_mu);
	}
	v[n++] = p;
	for (struct audit_pending *q = audit_pending_head;
	     q && n < AUDIT_BATCH_MAX; q = q->next)
		if (q != p && q->submitted && !q->taken && q->a->st == st)
			v[n++] = q;
	for (size_t i = 0; i < n; i++)
		v[i]->taken = true;
	pthread_mutex_unlock(&audit_pending_mu);
	r = audit_write_tx(st, v, n);
	for (size_t i = 0; i < n; i++)
		v[i]->rc = r < 0 && n > 1 ? audit_write_tx(st, &v[i], 1) : r;
	pthread_mutex_lock(&audit_pending_mu);
	for (size_t i = 0; i < n; i++)
		v[i]->written = true;
	audit_last_batch_ms = mono_ms();
	audit_writing = false;
	pthread_cond_broadcast(&audit_pending_cond);
}

int audit_write(struct audit_pending *p)
{
	int r;

	if (!p)
		return -EINVAL;
	pthread_mutex_lock(&audit_pending_mu);
	p->submitted = true;
	while (!p->written) {
		if (!audit_writing && !p->taken)
			audit_write_batch(p);
		else
			pthread_cond_wait(&audit_pending_cond,
			                  &audit_pending_mu);
	}
	r = p->rc;
	pthread_mutex_unlock(&audit_pending_mu);
	if (r < 0)
		log_warnx("audit: a run of tenant %.64s could not be recorded "
		          "(%s); it is missing from the audit trail and the "
		          "usage",
		          p->tenant, strerror(-r));
	audit_pending_done(p);
	return r;
}

void audit_wait_written(unsigned timeout_ms)
{
	struct timespec dl;
	unsigned long long asked;
	int r = 0;

	pthread_mutex_lock(&audit_pending_mu);
	asked = audit_pending_next;
	if (audit_pending_head && audit_pending_head->ticket < asked) {
		clock_gettime(CLOCK_REALTIME, &dl);
		dl.tv_sec += timeout_ms / 1000;
		dl.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
		if (dl.tv_nsec >= 1000000000L) {
			dl.tv_sec++;
			dl.tv_nsec -= 1000000000L;
		}
		while (audit_pending_head &&
		       audit_pending_head->ticket < asked && r != ETIMEDOUT)
			r = pthread_cond_timedwait(&audit_pending_cond,
			                           &audit_pending_mu, &dl);
	}
	pthread_mutex_unlock(&audit_pending_mu);
}

int audit_record(struct audit *a, const struct audit_run *run, long long now_ms)
{
	struct audit_pending *p;
	int r = audit_prepare(a, run, now_ms, &p);

	if (r < 0) {
		log_warnx("audit: a run of tenant %.64s could not be recorded "
		          "(%s); it is missing from the audit trail and the "
		          "usage",
		          run->tenant, strerror(-r));
		return r;
	}
	return audit_write(p);
}

/* ---- verifying ------------------------------------------------------------
 */

/*
 * Where a trail that does not start at 1 continues from: the hash a
 * checkpoint recorded for the entry before first. 0 with anchor filled,
 * -ENOENT when no checkpoint says, or a store error.
 */
static int audit_anchor(struct store_tx *tx, long long first, char *anchor)
{
	static const char sql[] = "SELECT body FROM audit_log WHERE kind = "
	                          "'checkpoint' ORDER BY seq DESC";
	struct store_stmt *s = store_stmt(tx, sql);
	int r;

	while ((r = store_step(tx, s)) == 1) {
		cJSON *b = cJSON_Parse(store_col_text(s, 0));
		const cJSON *th =
		    cJSON_GetObjectItemCaseSensitive(b, "pruned_through");
		const char *h = cJSON_GetStringValue(
		    cJSON_GetObjectItemCaseSensitive(b, "pruned_hash"));
		bool hit = cJSON_IsNumber(th) &&
		           (long long)th->valuedouble == first - 1 && h &&
		           strlen(h) == AUDIT_HASH_HEX;

		if (hit)
			snprintf(anchor, AUDIT_HASH_HEX + 1, "%s", h);
		cJSON_Delete(b);
		if (hit)
			return 0;
	}
	return r < 0 ? r : -ENOENT;
}

/* The first seq and the anchor; *first 0 for an empty trail. */
static int audit_verify_start(struct store *st, long long *first, char *anchor,
                              struct audit_verdict *v)
{
	static const char sql[] = "SELECT MIN(seq) FROM audit_log";
	struct store_tx *tx;
	struct store_stmt *s;
	int r = store_begin(st, false, &tx);

	if (r < 0)
		return r;
	s = store_stmt(tx, sql);
	r = store_step(tx, s);
	*first = r == 1 ? store_col_int64(s, 0) : 0;
	snprintf(anchor, AUDIT_HASH_HEX + 1, "%s", AUDIT_GENESIS);
	if (r >= 0 && *first > 1) {
		r = audit_anchor(tx, *first, anchor);
		if (r == -ENOENT) {
			v->broken_seq = *first;
			snprintf(v->reason, sizeof(v->reason),
			         "the trail starts at entry %lld and no "
			         "checkpoint records the entries before it: "
			         "entries were removed from its start",
			         *first);
			r = 0;
		}
	}
	store_rollback(tx);
	return r < 0 ? r : 0;
}

/* Checks one page of rows from seq from on; *more when it was full. */
static int audit_verify_page(struct store *st, struct audit_check *c,
                             struct audit_verdict *v, bool *more)
{
	static const char sql[] =
	    "SELECT seq, time_ms, kind, tenant, conversation, prev, hash, "
	    "body FROM audit_log WHERE seq >= ? ORDER BY seq LIMIT ?";
	struct store_tx *tx;
	struct store_stmt *s;
	long long n = 0;
	int r = store_begin(st, false, &tx);

	*more = false;
	if (r < 0)
		return r;
	s = store_stmt(tx, sql);
	store_bind_int64(s, 1, c->next_seq);
	store_bind_int64(s, 2, AUDIT_VERIFY_PAGE);
	while ((r = store_step(tx, s)) == 1) {
		struct audit_row row = {
		    .seq = store_col_int64(s, 0),
		    .time_ms = store_col_int64(s, 1),
		    .kind = store_col_text(s, 2),
		    .tenant = store_col_text(s, 3),
		    .conversation = store_col_text(s, 4),
		    .prev = store_col_text(s, 5),
		    .hash = store_col_text(s, 6),
		    .body = store_col_text(s, 7),
		};

		n++;
		if (!audit_check_row(c, &row))
			break;
		v->head_seq = row.seq;
		snprintf(v->head_hash, sizeof(v->head_hash), "%s", row.hash);
	}
	store_rollback(tx);
	*more = r >= 0 && !c->broken && n == AUDIT_VERIFY_PAGE;
	return r < 0 ? r : 0;
}

int audit_verify(struct store *st, struct audit_verdict *v)
{
	char anchor[AUDIT_HASH_HEX + 1];
	struct audit_check c;
	bool more = true;
	int r;

	memset(v, 0, sizeof(*v));
	r = audit_verify_start(st, &v->first_seq, anchor, v);
	if (r < 0 || v->first_seq == 0 || v->reason[0]) {
		v->ok = r == 0 && !v->reason[0];
		return r;
	}
	audit_check_begin(&c, v->first_seq, anchor);
	while (more && r == 0)
		r = audit_verify_page(st, &c, v, &more);
	if (r < 0)
		return r;
	v->entries = c.entries;
	v->ok = !c.broken;
	if (c.broken) {
		v->broken_seq = c.broken_seq;
		snprintf(v->reason, sizeof(v->reason), "%s", c.reason);
	}
	return 0;
}

/* ---- exporting ------------------------------------------------------------
 */

int audit_export(struct store *st, const struct audit_filter *f,
                 int (*emit)(void *arg, const char *line, size_t n), void *arg,
                 long long *last)
{
	static const char sql[] =
	    "SELECT seq, prev, hash, body FROM audit_log WHERE seq > ?1 "
	    "AND (?2 = '' OR tenant = ?2) AND (?3 = '' OR conversation = ?3) "
	    "AND time_ms >= ?4 AND time_ms < ?5 ORDER BY seq LIMIT ?6";
	unsigned limit = f->limit && f->limit < AUDIT_EXPORT_MAX
	                     ? f->limit
	                     : AUDIT_EXPORT_MAX;
	struct store_tx *tx;
	struct store_stmt *s;
	struct buf line;
	int r;

	*last = 0;
	r = store_begin(st, false, &tx);
	if (r < 0)
		return r;
	s = store_stmt(tx, sql);
	store_bind_int64(s, 1, f->after_seq);
	store_bind_text(s, 2, f->tenant ? f->tenant : "");
	store_bind_text(s, 3, f->conversation ? f->conversation : "");
	store_bind_int64(s, 4, f->from_ms);
	store_bind_int64(s, 5, f->to_ms > 0 ? f->to_ms : 1LL << 62);
	store_bind_int64(s, 6, limit);
	buf_init(&line, 0);
	while ((r = store_step(tx, s)) == 1) {
		const char *prev = store_col_text(s, 1);
		const char *hash = store_col_text(s, 2);
		const char *body = store_col_text(s, 3);
		long long seq = store_col_int64(s, 0);

		buf_reset(&line);
		/* prev and hash are hex, body is JSON: no escaping needed,
		 * but a tampered row is quoted safely all the same. */
		r = buf_printf(&line, "{\"seq\":%lld,\"prev\":", seq);
		if (r == 0) {
			cJSON *p = cJSON_CreateString(prev ? prev : "");
			cJSON *h = cJSON_CreateString(hash ? hash : "");
			char *ps = p ? cJSON_PrintUnformatted(p) : NULL;
			char *hs = h ? cJSON_PrintUnformatted(h) : NULL;

			r = ps && hs
			        ? buf_printf(&line, "%s,\"hash\":%s", ps, hs)
			        : -ENOMEM;
			cJSON_free(ps);
			cJSON_free(hs);
			cJSON_Delete(p);
			cJSON_Delete(h);
		}
		if (r == 0)
			r = buf_printf(&line, ",\"entry\":%s}\n",
			               body ? body : "null");
		if (r == 0)
			r = emit(arg, line.data, line.len);
		if (r < 0)
			break;
		*last = seq;
	}
	buf_finish(&line);
	store_rollback(tx);
	return r < 0 ? r : 0;
}

/* ---- retention ------------------------------------------------------------
 */

int audit_prune(struct store *st, long long before_ms, long long now_ms)
{
	static const char last_old[] =
	    "SELECT seq, hash FROM audit_log WHERE time_ms < ? AND kind = "
	    "'run' ORDER BY seq DESC LIMIT 1";
	static const char del[] = "DELETE FROM audit_log WHERE seq <= ?";
	struct store_tx *tx;
	struct store_stmt *s;
	char hash[AUDIT_HASH_HEX + 1] = "", head[AUDIT_HASH_HEX + 1];
	long long through = 0, gone = 0, head_seq = 0;
	cJSON *cp = NULL;
	int r = store_begin(st, true, &tx);

	if (r < 0)
		return r;
	s = store_stmt(tx, last_old);
	store_bind_int64(s, 1, before_ms);
	r = store_step(tx, s);
	if (r == 1) {
		through = store_col_int64(s, 0);
		snprintf(hash, sizeof(hash), "%s",
		         store_col_text(s, 1) ? store_col_text(s, 1) : "");
		r = 0;
	}
	if (r < 0 || through == 0) {
		store_rollback(tx);
		return r;
	}
	/* The checkpoint goes after the head, which may be deleted too. */
	r = audit_head(tx, &head_seq, head);
	cp = r == 0 ? cJSON_CreateObject() : NULL;
	if (!cp) {
		store_rollback(tx);
		return r < 0 ? r : -ENOMEM;
	}
	s = store_stmt(tx, del);
	store_bind_int64(s, 1, through);
	r = store_run(tx, s);
	gone = r == 0 ? store_changes(tx) : 0;
	cJSON_AddStringToObject(cp, "kind", "checkpoint");
	cJSON_AddNumberToObject(cp, "time_ms", (double)now_ms);
	cJSON_AddStringToObject(cp, "tenant", "");
	cJSON_AddStringToObject(cp, "conversation", "");
	cJSON_AddNumberToObject(cp, "pruned_through", (double)through);
	cJSON_AddStringToObject(cp, "pruned_hash", hash);
	cJSON_AddNumberToObject(cp, "pruned_entries", (double)gone);
	cJSON_AddNumberToObject(cp, "pruned_before_ms", (double)before_ms);
	if (r == 0)
		r = audit_insert_tx(tx, cp, head_seq + 1, head);
	cJSON_Delete(cp);
	if (r < 0) {
		store_rollback(tx);
		return r;
	}
	r = store_commit(tx);
	if (r == 0)
		log_info("audit: removed %lld entries older than the retention "
		         "(through entry %lld); a checkpoint records where the "
		         "trail continues from",
		         gone, through);
	return r < 0 ? r : (int)(gone > 1000000000 ? 1000000000 : gone);
}
