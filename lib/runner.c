/* SPDX-License-Identifier: MIT */
/*
 * runner: the dispatcher (runner.h). Layers, bottom up: catalog.c resolves
 * images; run_arguments.c checks requests; slots.c hands out slots; the
 * backend (backend.h) makes boxes; packages.c installs what a run asks;
 * warm/ runs in a conversation's session, oneoff.c in a box of its own.
 * runner_run strings them together; the job functions run discovery and
 * reaping for cron.c. The request and result types are run/request.h's.
 * Locks: r->lock guards the catalog pointer and the change callback;
 * r->disc_lock serializes discoveries. No lock is held across an engine
 * call.
 */
#include "runner.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "backend/backend.h"
#include "run/budget.h"
#include "egress/egress.h"
#include "run/oneoff.h"
#include "run/packages.h"
#include "run/run_arguments.h"
#include "run/slots.h"
#include "run/warm/warm.h"
#include "util/errmsg.h"
#include "util/hex.h"
#include "util/log.h"
#include "util/mono.h"
#include "util/stats.h"

#define RUNNER_WAIT_SLICE_MS 1000
#define RUNNER_REFRESH_MIN_MS 2000

struct runner {
	const struct config *cfg;
	struct backend *be;
	struct slots *slots;
	struct budget *budget; /* borrowed, or NULL */
	struct warm *warm;     /* NULL: warm sessions off */
	struct egress *egress; /* NULL: no runs with network */
	struct stats_metric *m_runs, *m_duration, *m_queue;
	char boot[17];
	struct oneoff_context
	    oneoff; /* the runs directories, cfg and backend */

	pthread_mutex_t lock;
	struct catalog *catalog;
	runner_changed_fn changed_fn;
	void *changed_arg;

	pthread_mutex_t disc_lock; /* one discovery at a time */
	long long last_refresh_ms;
	int last_refresh_rc;
	char last_refresh_err[256];
};

/* What a result says before the run: the limits, nothing measured. */
static void runner_result_init(struct runner_result *res,
                               const struct runner_request *req,
                               const struct config *cfg)
{
	memset(res, 0, sizeof(*res));
	res->exit_code = -1;
	res->timeout_s = req->timeout_s ? req->timeout_s : cfg->timeout_s;
	res->memory_mb = req->memory_mb ? req->memory_mb : cfg->memory_mb;
	res->cpus = req->cpus > 0 ? req->cpus : cfg->cpus;
	res->cpu_ms = res->memory_peak_bytes = -1;
}

static void runner_result_fill_image(struct runner_result *res,
                                     const struct catalog_image *img)
{
	snprintf(res->language, sizeof(res->language), "%s", img->language);
	snprintf(res->image, sizeof(res->image), "%s", img->image);
	snprintf(res->image_id, sizeof(res->image_id), "%s", img->image_id);
	snprintf(res->version, sizeof(res->version), "%s", img->version);
}

static int runner_discover_now(struct runner *r, char *err, size_t errlen);

static int runner_refuse(struct runner_result *res, int rc, const char *fmt,
                         ...) __attribute__((format(printf, 3, 4)));

/* A run refused before any work: status error, the message, rc. */
static int runner_refuse(struct runner_result *res, int rc, const char *fmt,
                         ...)
{
	va_list ap;

	va_start(ap, fmt);
	errmsg_vset(res->message, sizeof(res->message), fmt, ap);
	va_end(ap);
	res->status = RUNNER_ERROR;
	return rc;
}

/* The image for req's language, refreshing the catalog once if unknown. */
static const struct catalog_image *
runner_image(struct runner *r, const char *language, struct catalog **cat)
{
	const struct catalog_image *img;
	char msg[256];

	*cat = runner_catalog_get(r);
	img = catalog_find(*cat, language);
	if (!img) {
		catalog_put(*cat);
		if (runner_refresh(r, msg, sizeof(msg)) < 0)
			log_debug("refresh: %s", msg);
		*cat = runner_catalog_get(r);
		img = catalog_find(*cat, language);
	}
	return img;
}

/*
 * Runs on a fresh catalog once more when the image vanished under the run
 * (rebuilt or removed since discovery). *cat and *img are replaced.
 */
static void runner_retry_vanished(struct runner *r,
                                  const struct runner_request *req,
                                  struct catalog **cat,
                                  const struct catalog_image **img,
                                  struct runner_result *res)
{
	const struct catalog_image *again;
	struct catalog *old = *cat;
	long long queue_ms = res->queue_ms;
	char msg[256];

	if (runner_discover_now(r, msg, sizeof(msg)) < 0)
		log_debug("rediscovery: %s", msg);
	/* img points into the old catalog: keep it until compared. */
	*cat = runner_catalog_get(r);
	again = catalog_find(*cat, req->language);
	if (again && strcmp(again->image_id, (*img)->image_id) == 0)
		again = NULL;
	catalog_put(old);
	*img = again;
	if (!again) {
		log_info("run lang=%s: the runner image was removed during the "
		         "run",
		         req->language);
		return;
	}
	runner_result_finish(res);
	runner_result_init(res, req, r->cfg);
	res->queue_ms = queue_ms;
	runner_result_fill_image(res, again);
	if (oneoff_run(&r->oneoff, req, again, res) < 0)
		log_info("run lang=%s: the runner image vanished again",
		         req->language);
}

/*
 * Runs req in its conversation's warm session when it can have one: 0 when
 * it ran there, 1 when it must run one-off (res->session says why).
 */
static int runner_warm(struct runner *r, const struct runner_request *req,
                       const struct catalog_image *img,
                       struct runner_result *res)
{
	const char *why = NULL;

	res->session.memory_bytes = res->session.memory_peak_bytes = -1;
	res->session.memory_limit_bytes = -1;
	res->session.background_threads = -1;
	res->session.background_cpu_ms = -1;
	res->cpu_ms = -1;
	if (!r->warm)
		why = "disabled";
	else if (req->network && !req->egress)
		why = "network";
	else if (req->check)
		why = "check";
	else if (req->one_off)
		why = "one_off";
	else if ((req->memory_mb && req->memory_mb != r->cfg->memory_mb) ||
	         (req->cpus > 0 && req->cpus != r->cfg->cpus))
		why = "limits"; /* warm boxes all have the default limits */
	else if (warm_run(r->warm, req, img, res) == 0)
		return 0;
	/*
	 * A one-off for limits of its own: a pool box, its limits changed; a
	 * syntax check: a pool box, without the conversation's /data.
	 */
	if (why && (strcmp(why, "limits") == 0 || strcmp(why, "check") == 0) &&
	    !req->rewind_to && !req->fork_from &&
	    warm_run_once(r->warm, req, img, res) == 0) {
		snprintf(res->session.reason, sizeof(res->session.reason), "%s",
		         why);
		return 0;
	}
	snprintf(res->session.state, sizeof(res->session.state), "none");
	if (why)
		snprintf(res->session.reason, sizeof(res->session.reason), "%s",
		         why);
	return 1;
}

static void runner_on_queued(void *arg, unsigned pos)
{
	const struct runner_request *req = *(const struct runner_request **)arg;

	if (req->on_event)
		req->on_event(req->event_arg, RUNNER_EVENT_QUEUED, pos);
}

/* Takes a slot; 0, or 1 when res says why the run did not start. */
static int runner_take_slot(struct runner *r, const struct runner_request *req,
                            struct runner_result *res, int *rc)
{
	unsigned retry = 0;
	const struct runner_request *arg = req;
	int got =
	    slots_acquire(r->slots, req->tenant, runner_cancel_fd(req->cancel),
	                  runner_on_queued, &arg, &retry);

	*rc = 0;
	if (got == 0 && !runner_cancel_requested(req->cancel))
		return 0;
	if (got == 0) {
		slots_release(r->slots, req->tenant, 0);
		res->status = RUNNER_CANCELLED;
		snprintf(res->message, sizeof(res->message),
		         "cancelled before the run started");
	} else if (got == -EBUSY) {
		res->status = RUNNER_BUSY;
		res->retry_after_s = retry;
		snprintf(res->message, sizeof(res->message),
		         "all %u sandboxes are busy and %u runs are waiting; "
		         "retry in %u s",
		         r->cfg->max_concurrent, r->cfg->queue_length, retry);
	} else if (got == -EDQUOT) {
		struct slots_stats ss;

		slots_stats(r->slots, &ss);
		res->status = RUNNER_RATE_LIMITED;
		res->retry_after_s = retry;
		snprintf(res->limit, sizeof(res->limit), "queued_runs");
		snprintf(res->message, sizeof(res->message),
		         "this tenant already has %u runs waiting for a "
		         "sandbox (TENANT_MAX_QUEUED); wait for them to "
		         "finish and retry in %u s",
		         ss.tenant_max_queued, retry);
	} else if (got == -ECANCELED) {
		res->status = RUNNER_CANCELLED;
		snprintf(res->message, sizeof(res->message),
		         "cancelled while waiting for a sandbox");
	} else if (got == -ESHUTDOWN) {
		*rc = runner_refuse(res, got,
		                    "the server is shutting down and accepts "
		                    "no new runs; retry on another instance or "
		                    "later");
	} else {
		*rc = runner_refuse(res, got, "cannot wait for a sandbox: %s",
		                    strerror(-got));
	}
	return 1;
}

/*
 * Refuses a run of a tenant that used its CPU budget: 1 with res filled,
 * 0 when it may run. A store that does not answer lets the run through
 * (logged): the budget shares the host fairly, it does not guard it.
 */
static int runner_over_budget(struct runner *r,
                              const struct runner_request *req,
                              struct runner_result *res)
{
	struct budget_state bs;
	int rc;

	/* No limit: nothing to refuse, no read of the store per run. */
	if (!budget_limited(r->budget))
		return 0;
	rc = budget_check(r->budget, req->tenant, (long long)time(NULL), &bs);
	if (rc == 0)
		return 0;
	if (rc != -EDQUOT) {
		log_warnx("budget: cannot read the usage of a tenant (%s); "
		          "the run goes ahead unchecked",
		          strerror(-rc));
		return 0;
	}
	res->status = RUNNER_RATE_LIMITED;
	res->retry_after_s = bs.retry_s;
	snprintf(res->limit, sizeof(res->limit), "cpu_seconds");
	snprintf(res->message, sizeof(res->message),
	         "this tenant used its CPU budget: %.1f of %lld CPU-seconds "
	         "in the current %u s window (TENANT_CPU_SECONDS); retry in "
	         "%u s, when the window ends%s",
	         (double)bs.used_ms / 1000.0, bs.limit_ms / 1000, bs.window_s,
	         bs.retry_s,
	         r->warm ? ". CPU that threads left running in warm sessions "
	                   "use between runs counts too; such sessions are "
	                   "ended while the budget is used up"
	                 : "");
	return 1;
}

/*
 * Charges a run that had a slot to its tenant's budget: its CPU time (in a
 * warm session the box's whole CPU time since its last charge, as warm.c
 * measured it), or when that is unknown wall time x cpus, an upper bound.
 */
static void runner_charge(struct runner *r, const struct runner_request *req,
                          const struct runner_result *res, long long slot_ms)
{
	long long wall = res->duration_ms > 0 ? res->duration_ms : slot_ms;
	bool estimated = false;
	long long ms;
	int rc;

	if (!r->budget)
		return;
	ms = res->cpu_charge_known
	         ? res->cpu_charge_ms
	         : budget_charge_ms(res->cpu_ms, wall, res->cpus, &estimated);
	ms += res->packages_cpu_ms;
	rc = budget_charge(r->budget, req->tenant, ms, (long long)time(NULL));
	if (rc < 0) {
		log_warnx("budget: cannot charge %lld ms of CPU to a tenant "
		          "(%s)",
		          ms, strerror(-rc));
		return;
	}
	log_debug("budget: charged %lld ms of CPU%s to tenant %.64s", ms,
	          estimated ? " (unknown: wall time x cpus)" : "",
	          req->tenant ? req->tenant : "");
}

/* Counts a finished run (stats.h). */
static void runner_count(struct runner *r, const struct runner_request *req,
                         const struct runner_result *res)
{
	const char *const labels[] = {runner_status_name(res->status),
	                              res->language,
	                              req->tenant ? req->tenant : "", NULL};
	const char *const lang[] = {res->language, NULL};

	stats_add(r->m_runs, labels, 1);
	if (res->status != RUNNER_BUSY && res->status != RUNNER_ERROR &&
	    res->status != RUNNER_RATE_LIMITED)
		stats_observe(r->m_duration, lang,
		              (double)res->duration_ms / 1000.0);
	stats_observe(r->m_queue, NULL, (double)res->queue_ms / 1000.0);
}

/*
 * Refuses packages the server cannot install for img: 0, or a negative
 * errno with the reason (and what does work) in res->message.
 */
static int runner_check_packages(struct runner *r,
                                 const struct runner_request *req,
                                 const struct catalog_image *img,
                                 const struct catalog *cat,
                                 struct runner_result *res)
{
	char langs[256], msg[256];

	if (!r->cfg->packages)
		return runner_refuse(
		    res, -EPERM,
		    "packages are turned off on this server "
		    "(SANDBOX_PACKAGES=false); use the "
		    "libraries the runners have (list_runners)");
	if (!backend_has(r->be, BACKEND_CAN_PACKAGES))
		return runner_refuse(
		    res, -EOPNOTSUPP,
		    "packages cannot be installed on this "
		    "server: %s (SANDBOX_BACKEND=%s); use the libraries "
		    "the runners have (list_runners)",
		    backend_lacks(r->be->impl, BACKEND_CAN_PACKAGES),
		    backend_name(r->be));
	if (!img->packages[0]) {
		catalog_installable(cat, langs, sizeof(langs));
		return runner_refuse(
		    res, -EOPNOTSUPP,
		    "the %s runner cannot install packages "
		    "(its image has no sandbox.packages label); "
		    "languages that can: %s",
		    img->language, langs);
	}
	if (req->n_packages > PACKAGES_MAX)
		return runner_refuse(
		    res, -EINVAL,
		    "%zu packages asked for; at most %d in one "
		    "run",
		    req->n_packages, PACKAGES_MAX);
	for (size_t i = 0; i < req->n_packages; i++)
		if (packages_check_spec(img->packages, req->packages[i], msg,
		                        sizeof(msg)) < 0)
			return runner_refuse(res, -EINVAL, "%s", msg);
	return 0;
}

/*
 * The allow-list of a run with network (egress_resolve) into *list and a
 * copy of req that carries it into *copy. 0, or a refusal.
 */
static int runner_egress_policy(struct runner *r,
                                const struct runner_request *req,
                                struct runner_request *copy,
                                struct egress_list **list,
                                struct runner_result *res)
{
	char msg[768];
	int rc;

	if (!r->egress)
		return runner_refuse(res, -EPERM,
		                     "runs with network need the egress proxy, "
		                     "which the %s backend does not have; run "
		                     "without network",
		                     backend_name(r->be));
	*list = malloc(sizeof(**list));
	if (!*list)
		return runner_refuse(res, -ENOMEM, "out of memory");
	rc = egress_resolve(r->cfg, req->tenant, req->network_asked, *list, msg,
	                    sizeof(msg));
	if (rc < 0)
		return runner_refuse(res, rc, "%s", msg);
	*copy = *req;
	copy->egress = *list;
	return 0;
}

static int runner_run_checked(struct runner *r,
                              const struct runner_request *req,
                              struct runner_result *res)
{
	struct catalog *cat = NULL;
	const struct catalog_image *img;
	long long t0 = mono_ms(), t_slot;
	char langs[256];
	int rc = 0; /* a refusal over budget returns it as it is */

	img = runner_image(r, req->language, &cat);
	if (!img) {
		catalog_languages(cat, langs, sizeof(langs));
		catalog_put(cat);
		return runner_refuse(res, -ENOENT,
		                     "no runner for language '%.40s'; "
		                     "available: %s",
		                     req->language, langs);
	}
	if (req->check && img->n_check == 0) {
		catalog_checkable(cat, langs, sizeof(langs));
		catalog_put(cat);
		return runner_refuse(res, -EOPNOTSUPP,
		                     "the %s runner has no syntax checker "
		                     "(its image has no sandbox.check label); "
		                     "languages that can be checked: %s",
		                     img->language, langs);
	}
	if (req->n_packages &&
	    (rc = runner_check_packages(r, req, img, cat, res)) < 0) {
		catalog_put(cat);
		return rc;
	}
	runner_result_fill_image(res, img);

	if (runner_over_budget(r, req, res)) {
		runner_count(r, req, res);
		goto out;
	}
	if (runner_take_slot(r, req, res, &rc)) {
		res->queue_ms = mono_ms() - t0;
		if (res->status == RUNNER_RATE_LIMITED)
			runner_count(r, req, res);
		goto out;
	}
	t_slot = mono_ms();
	res->queue_ms = t_slot - t0;
	if (packages_prepare(&r->oneoff, req, img, res) == 0 &&
	    runner_warm(r, req, img, res) != 0 &&
	    oneoff_run(&r->oneoff, req, img, res) == -ENOENT)
		runner_retry_vanished(r, req, &cat, &img, res);
	slots_release(r->slots, req->tenant, mono_ms() - t_slot);
	if (res->status == RUNNER_CANCELLED &&
	    runner_cancel_for_quota(req->cancel))
		res->status = RUNNER_QUOTA_EXCEEDED;
	if (res->status == RUNNER_CANCELLED &&
	    runner_cancel_for_lease(req->cancel)) {
		res->status = RUNNER_ERROR;
		snprintf(res->message, sizeof(res->message),
		         "this server lost touch with the store the servers "
		         "share, so it could no longer hold this conversation "
		         "(MCP_CONVERSATION_LEASE_SECONDS=%u) and stopped the "
		         "run before another server could take the "
		         "conversation over; the work since the last "
		         "completed run may be lost: call again",
		         r->cfg->conversation_lease_s);
	}
	runner_charge(r, req, res, mono_ms() - t_slot);
	runner_count(r, req, res);
	log_info("run %s lang=%s status=%s exit=%d duration=%lldms "
	         "queue=%lldms out=%zu err=%zu",
	         res->container[0] ? res->container : "-", req->language,
	         runner_status_name(res->status), res->exit_code,
	         res->duration_ms, res->queue_ms, res->out.total,
	         res->err.total);
	/* The server's own failures, with their cause, for the operator. */
	if (res->status == RUNNER_ERROR)
		log_warnx(
		    "run %s lang=%s failed on the server's side: %s",
		    res->container[0] ? res->container : "-", req->language,
		    res->message[0] ? res->message : "(no cause recorded)");
out:
	catalog_put(cat);
	return rc;
}

int runner_run(struct runner *r, const struct runner_request *req,
               struct runner_result *res)
{
	struct runner_request egress_req;
	struct egress_list *egress_list = NULL;
	int rc;

	runner_result_init(res, req, r->cfg);
	rc = run_arguments_check(req, r->cfg, res->message,
	                         sizeof(res->message));
	if (rc < 0)
		return runner_refuse(res, rc, "%s", res->message);
	if (req->network && !req->install) {
		rc = runner_egress_policy(r, req, &egress_req, &egress_list,
		                          res);
		if (rc < 0) {
			free(egress_list);
			return rc;
		}
		req = &egress_req;
	}
	rc = runner_run_checked(r, req, res);
	free(egress_list);
	return rc;
}

/* ---- catalog snapshots and discovery ------------------------------------ */

struct catalog *runner_catalog_get(struct runner *r)
{
	struct catalog *c;

	/*
	 * The runner's own reference is dropped only after the pointer was
	 * swapped under the lock, so the count cannot reach zero here.
	 */
	pthread_mutex_lock(&r->lock);
	c = catalog_ref(r->catalog);
	pthread_mutex_unlock(&r->lock);
	return c;
}

/* Discovers images and swaps the catalog when it changed. */
static int runner_discover(struct runner *r, char *err, size_t errlen)
{
	struct catalog *c = NULL, *old = NULL;
	runner_changed_fn fn = NULL;
	void *arg = NULL;
	cJSON *list = NULL;
	bool changed;
	int rc;

	rc = backend_images(r->be, "sandbox.runner=true", &list, err, errlen);
	if (rc < 0)
		return rc;
	rc = catalog_build(list, &c);
	cJSON_Delete(list);
	if (rc < 0) {
		snprintf(err, errlen, "out of memory");
		return rc;
	}
	pthread_mutex_lock(&r->lock);
	changed = !catalog_same(r->catalog, c);
	if (changed) {
		old = r->catalog;
		r->catalog = c;
		c = NULL;
		fn = r->changed_fn;
		arg = r->changed_arg;
	}
	pthread_mutex_unlock(&r->lock);
	catalog_put(c);
	if (changed) {
		struct catalog *now = runner_catalog_get(r);
		char langs[256];

		catalog_languages(now, langs, sizeof(langs));
		log_info("runners: %s", langs);
		catalog_put(now);
		catalog_put(old);
		if (fn)
			fn(arg);
	}
	return 0;
}

/* Discovers and records the outcome for runner_refresh. disc_lock held. */
static int runner_discover_record(struct runner *r, char *err, size_t errlen)
{
	int rc = runner_discover(r, r->last_refresh_err,
	                         sizeof(r->last_refresh_err));

	if (rc == 0)
		r->last_refresh_err[0] = '\0';
	r->last_refresh_rc = rc;
	r->last_refresh_ms = mono_ms();
	snprintf(err, errlen, "%s", r->last_refresh_err);
	return rc;
}

/* Discovers now, whatever the rate limit says. */
static int runner_discover_now(struct runner *r, char *err, size_t errlen)
{
	int rc;

	pthread_mutex_lock(&r->disc_lock);
	rc = runner_discover_record(r, err, errlen);
	pthread_mutex_unlock(&r->disc_lock);
	return rc;
}

int runner_refresh(struct runner *r, char *err, size_t errlen)
{
	long long now = mono_ms();
	int rc;

	pthread_mutex_lock(&r->disc_lock);
	if (r->last_refresh_ms &&
	    now - r->last_refresh_ms < RUNNER_REFRESH_MIN_MS) {
		rc = r->last_refresh_rc;
		snprintf(err, errlen, "%s", r->last_refresh_err);
	} else {
		rc = runner_discover_record(r, err, errlen);
	}
	pthread_mutex_unlock(&r->disc_lock);
	return rc;
}

/* ---- housekeeping ------------------------------------------------------- */

int runner_reap(struct runner *r, char *err, size_t errlen)
{
	return backend_reap(r->be, err, errlen);
}

enum cron_next runner_job_discover(void *runner, long long deadline_ms)
{
	struct runner *r = runner;
	char err[512];

	(void)deadline_ms;
	if (runner_discover_now(r, err, sizeof(err)) < 0)
		log_debug("discovery: %s", err);
	return CRON_DONE;
}

int runner_lease_holds(void *runner, const char *ws)
{
	struct runner *r = runner;

	return r->warm ? warm_holds(r->warm, ws) : 0;
}

int runner_lease_hand_off(void *runner, const char *ws)
{
	struct runner *r = runner;

	return r->warm ? warm_hand_off(r->warm, ws) : 0;
}

enum cron_next runner_job_warm(void *runner, long long deadline_ms)
{
	struct runner *r = runner;
	struct catalog *cat;

	(void)deadline_ms;
	if (!r->warm)
		return CRON_DONE;
	cat = runner_catalog_get(r);
	warm_tick(r->warm, cat);
	catalog_put(cat);
	return CRON_DONE;
}

enum cron_next runner_job_reap(void *runner, long long deadline_ms)
{
	struct runner *r = runner;
	char err[512];

	(void)deadline_ms;
	if (runner_reap(r, err, sizeof(err)) < 0)
		log_debug("reaper: %s", err);
	return CRON_DONE;
}

enum cron_next runner_job_runs(void *runner, long long deadline_ms)
{
	struct runner *r = runner;

	return oneoff_sweep(&r->oneoff, deadline_ms) ? CRON_MORE : CRON_DONE;
}

/* ---- create, destroy, drain --------------------------------------------- */

static int runner_mkdir(const char *path, mode_t mode, char *err, size_t errlen)
{
	struct stat sb;

	if (mkdir(path, mode) == 0)
		return 0;
	if (errno == EEXIST && lstat(path, &sb) == 0 && S_ISDIR(sb.st_mode))
		return 0;
	snprintf(err, errlen, "cannot create directory %.200s: %s", path,
	         strerror(errno));
	return -errno;
}

static int runner_dirs(struct runner *r, char *err, size_t errlen)
{
	const struct config *cfg = r->cfg;
	const char *host = cfg->sandbox_host_path && cfg->sandbox_host_path[0]
	                       ? cfg->sandbox_host_path
	                       : cfg->sandbox_root;
	struct oneoff_context *o = &r->oneoff;
	int n = snprintf(o->runs_dir, sizeof(o->runs_dir), "%s/runs",
	                 cfg->sandbox_root);
	int rc;

	o->cfg = cfg;
	if (n < 0 || (size_t)n >= sizeof(o->runs_dir) - 64 ||
	    (size_t)snprintf(o->runs_host_dir, sizeof(o->runs_host_dir),
	                     "%s/runs", host) >= sizeof(o->runs_host_dir) - 64)
		return errmsg_fail(-ENAMETOOLONG, err, errlen,
		                   "SANDBOX_ROOT is too long");
	rc = runner_mkdir(cfg->sandbox_root, 0711, err, errlen);
	if (rc == 0)
		rc = runner_mkdir(o->runs_dir, 0700, err, errlen);
	return rc;
}

int runner_create(const struct config *cfg, struct runner **out, char *err,
                  size_t errlen)
{
	struct runner *r;
	char msg[512];
	int rc;

	*out = NULL;
	r = calloc(1, sizeof(*r));
	if (!r)
		return errmsg_fail(-ENOMEM, err, errlen, "out of memory");
	r->cfg = cfg;
	pthread_mutex_init(&r->lock, NULL);
	pthread_mutex_init(&r->disc_lock, NULL);
	rc = hex_random(r->boot, 8);
	if (rc < 0) {
		errmsg_set(err, errlen, "no random bytes for a boot id");
		goto fail;
	}
	rc = runner_dirs(r, err, errlen);
	if (rc < 0)
		goto fail;
	r->slots =
	    slots_create(cfg->max_concurrent, cfg->queue_length,
	                 cfg->tenant_max_running, cfg->tenant_max_queued);
	rc = catalog_build(NULL, &r->catalog);
	if (!r->slots || rc < 0) {
		rc = errmsg_fail(-ENOMEM, err, errlen, "out of memory");
		goto fail;
	}
	rc = backend_create(cfg, r->boot, &r->be, err, errlen);
	r->oneoff.be = r->be;
	/* Warm sessions need a lasting channel and a workspace hand-over. */
	if (rc == 0 && cfg->warm && !backend_has(r->be, BACKEND_CAN_WARM))
		log_info("SANDBOX_WARM: the %s backend has no warm sessions; "
		         "every run is one-off",
		         backend_name(r->be));
	else if (rc == 0 && cfg->warm)
		rc = warm_create(cfg, r->be, r->boot, &r->warm, err, errlen);
	if (rc == 0 &&
	    (cfg->allow_network ||
	     (cfg->packages &&
	      strcmp(cfg->packages_network, PACKAGES_NETWORK_EGRESS) == 0)) &&
	    backend_has(r->be, BACKEND_CAN_EGRESS)) {
		rc =
		    egress_create(cfg, r->be, r->boot, &r->egress, err, errlen);
		r->oneoff.egress = r->egress;
		/* Before any warm box is made: they must be joinable. */
		if (rc == 0 && r->warm && cfg->allow_network)
			warm_set_egress(r->warm, r->egress);
	}
	if (rc < 0)
		goto fail;
	log_info("runner boot id %s, instance '%s', backend %s, %u at once, "
	         "queue %u",
	         r->boot, cfg->instance_name, backend_name(r->be),
	         cfg->max_concurrent, cfg->queue_length);
	/* Both are retried by their jobs when the engine is down now. */
	if (runner_refresh(r, msg, sizeof(msg)) < 0)
		log_warnx("runner discovery: %s", msg);
	rc = runner_reap(r, msg, sizeof(msg));
	if (rc < 0)
		log_warnx("start-up reaping: %s", msg);
	(void)oneoff_sweep(&r->oneoff, LLONG_MAX);
	*out = r;
	return 0;
fail:
	runner_destroy(r);
	return rc;
}

void runner_destroy(struct runner *r)
{
	if (!r)
		return;
	warm_destroy(r->warm);
	egress_destroy(r->egress);
	oneoff_sweep_finish(&r->oneoff);
	/* Removes what is queued for removal and what this boot left. */
	backend_destroy(r->be);
	slots_destroy(r->slots);
	catalog_put(r->catalog);
	pthread_mutex_destroy(&r->lock);
	pthread_mutex_destroy(&r->disc_lock);
	free(r);
}

static void runner_read_slots(void *arg, stats_emit_fn emit, void *ctx)
{
	struct runner *r = arg;
	struct slots_stats ss;
	const char *const running[] = {"running", NULL};
	const char *const queued[] = {"queued", NULL};

	slots_stats(r->slots, &ss);
	emit(ctx, running, ss.running);
	emit(ctx, queued, ss.queued);
}

static void runner_read_warm(void *arg, stats_emit_fn emit, void *ctx)
{
	struct runner *r = arg;
	struct warm_stats ws;
	const char *const busy[] = {"busy", NULL};
	const char *const idle[] = {"idle", NULL};
	const char *const pool[] = {"pool", NULL};

	if (!r->warm)
		return;
	warm_stats(r->warm, &ws);
	emit(ctx, busy, ws.busy);
	emit(ctx, idle, ws.sessions - ws.busy);
	emit(ctx, pool, ws.pool);
}

/*
 * The engine as the backend's health report has it: whether it answers.
 * Read at scrape time, so no second copy of the state is kept.
 */
static void runner_read_engine(void *arg, stats_emit_fn emit, void *ctx)
{
	struct runner *r = arg;
	cJSON *h = cJSON_CreateObject();
	const cJSON *d;

	if (!h)
		return;
	(void)backend_health(r->be, h);
	d = cJSON_GetObjectItemCaseSensitive(h, "docker");
	emit(ctx, NULL,
	     cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(d, "reachable")));
	cJSON_Delete(h);
}

void runner_set_budget(struct runner *r, struct budget *b)
{
	r->budget = b;
	/* Warm boxes use CPU between runs too: warm_tick charges it. */
	if (r->warm)
		warm_set_budget(r->warm, b);
}

void runner_set_stats(struct runner *r, struct stats *s)
{
	static const char *const run_labels[] = {"status", "language", "tenant",
	                                         NULL};
	static const char *const lang[] = {"language", NULL};
	static const char *const state[] = {"state", NULL};
	static const double secs[] = {0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1,
	                              2.5,  5,     10,   30,  60,   120, 300};

	r->m_runs =
	    stats_counter(s, "mcpsd_runs_total",
	                  "Runs by outcome, language and tenant", run_labels);
	r->m_duration =
	    stats_histogram(s, "mcpsd_run_duration_seconds",
	                    "Run time from the start of the program", lang,
	                    secs, sizeof(secs) / sizeof(secs[0]));
	r->m_queue = stats_histogram(s, "mcpsd_run_queue_seconds",
	                             "Time runs waited for a free slot", NULL,
	                             secs, sizeof(secs) / sizeof(secs[0]));
	stats_gauge_fn(s, "mcpsd_runs", "Runs running and waiting now", state,
	               runner_read_slots, r);
	stats_gauge_fn(s, "mcpsd_warm_boxes",
	               "Warm boxes: sessions busy, sessions idle, pool", state,
	               runner_read_warm, r);
	stats_gauge_fn(s, "mcpsd_engine_up",
	               "Whether the engine (DOCKER_HOST) answered last time",
	               NULL, runner_read_engine, r);
	backend_stats(r->be, s);
	if (r->egress)
		egress_stats(r->egress, s);
}

void runner_set_changed_cb(struct runner *r, runner_changed_fn fn, void *arg)
{
	pthread_mutex_lock(&r->lock);
	r->changed_fn = fn;
	r->changed_arg = arg;
	pthread_mutex_unlock(&r->lock);
}

unsigned runner_drain(struct runner *r, unsigned timeout_ms)
{
	return slots_drain(r->slots, timeout_ms);
}

void runner_stats(struct runner *r, struct runner_stats *out)
{
	struct slots_stats ss;

	slots_stats(r->slots, &ss);
	out->running = ss.running;
	out->queued = ss.queued;
	out->max_concurrent = ss.max_running;
	out->queue_length = ss.queue_length;
	out->runs_total = ss.runs_total;
	out->draining = ss.draining;
	out->avg_run_ms = ss.avg_run_ms;
	pthread_mutex_lock(&r->lock);
	out->runners = r->catalog->n;
	pthread_mutex_unlock(&r->lock);
}

struct backend *runner_backend(struct runner *r)
{
	return r->be;
}

const struct config *runner_config(const struct runner *r)
{
	return r->cfg;
}

const char *runner_boot_id(const struct runner *r)
{
	return r->boot;
}

bool runner_health(void *runner, cJSON *health)
{
	struct runner *r = runner;
	struct runner_stats rs;
	bool engine = backend_health(r->be, health);
	cJSON *runs;

	runner_stats(r, &rs);
	if (r->warm)
		warm_health(r->warm, health);
	runs = cJSON_AddObjectToObject(health, "runs");
	if (runs) {
		cJSON_AddNumberToObject(runs, "running", rs.running);
		cJSON_AddNumberToObject(runs, "queued", rs.queued);
		cJSON_AddNumberToObject(runs, "max_concurrent",
		                        rs.max_concurrent);
		cJSON_AddNumberToObject(runs, "queue_length", rs.queue_length);
		cJSON_AddNumberToObject(runs, "total",
		                        r->m_runs ? stats_total(r->m_runs)
		                                  : (double)rs.runs_total);
		cJSON_AddNumberToObject(runs, "runners", (double)rs.runners);
		cJSON_AddBoolToObject(runs, "draining", rs.draining);
	}
	return engine && rs.runners > 0;
}
