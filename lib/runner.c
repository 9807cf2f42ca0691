/* SPDX-License-Identifier: MIT */
/*
 * runner: the catalog, one-off runs and the glue to the scheduler and the
 * backend. Layers, bottom up: catalog.c resolves images; runargs.c checks
 * requests; slots.c hands out slots; the backend (backend.h) makes boxes;
 * attachio.c drives a one-off run's stream. runner_run strings them
 * together; the job functions run discovery and reaping for cron.c.
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
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "attachio.h"
#include "docker/backend_docker.h"
#include "log.h"
#include "runargs.h"
#include "slots.h"
#include "util/errmsg.h"
#include "util/hex.h"
#include "util/mono.h"
#include "warm.h"

#define RUNNER_WAIT_SLICE_MS 1000
#define RUNNER_REFRESH_MIN_MS 2000

struct runner {
	const struct config *cfg;
	struct backend *be;
	struct slots *slots;
	struct warm *warm; /* NULL: warm sessions off */
	char boot[17];
	char runs_dir[PATH_MAX];      /* SANDBOX_ROOT/runs */
	char runs_host_dir[PATH_MAX]; /* SANDBOX_HOST_PATH/runs */

	pthread_mutex_t lock;
	struct catalog *catalog;
	runner_changed_fn changed_fn;
	void *changed_arg;

	pthread_mutex_t disc_lock; /* one discovery at a time */
	long long last_refresh_ms;
	int last_refresh_rc;
	char last_refresh_err[256];
};

struct runner_cancel {
	int fd;
	atomic_bool flag;
};

/* A one-off run's code directory, as we and the engine's host see it. */
struct runner_run_dir {
	char run_id[17];
	char dir[PATH_MAX];
	char host_dir[PATH_MAX];
	bool dir_made;
};

const char *runner_status_name(enum runner_status s)
{
	switch (s) {
	case RUNNER_COMPLETED:
		return "completed";
	case RUNNER_FAILED:
		return "failed";
	case RUNNER_TIMED_OUT:
		return "timed_out";
	case RUNNER_OOM_KILLED:
		return "oom_killed";
	case RUNNER_OUTPUT_LIMIT:
		return "output_limit";
	case RUNNER_CANCELLED:
		return "cancelled";
	case RUNNER_BUSY:
		return "busy";
	case RUNNER_ERROR:
		return "error";
	}
	return "error";
}

/* ---- cancellation ------------------------------------------------------- */

int runner_cancel_create(struct runner_cancel **out)
{
	struct runner_cancel *c = calloc(1, sizeof(*c));

	*out = NULL;
	if (!c)
		return -ENOMEM;
	c->fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (c->fd < 0) {
		int e = errno;

		free(c);
		return -e;
	}
	atomic_init(&c->flag, false);
	*out = c;
	return 0;
}

void runner_cancel_destroy(struct runner_cancel *c)
{
	if (!c)
		return;
	close(c->fd);
	free(c);
}

void runner_cancel_trigger(void *arg)
{
	struct runner_cancel *c = arg;
	uint64_t one = 1;

	if (!c || atomic_exchange(&c->flag, true))
		return;
	/* Leaves the eventfd readable for good: pollers see it at once. */
	if (write(c->fd, &one, sizeof(one)) < 0)
		log_debug("cancel: eventfd write failed");
}

bool runner_cancel_requested(const struct runner_cancel *c)
{
	return c && atomic_load(&c->flag);
}

int runner_cancel_fd(const struct runner_cancel *c)
{
	return c ? c->fd : -1;
}

/* ---- the code directory ------------------------------------------------- */

/* Removes a directory we made, one level deep, never following links. */
static void runner_rmdir_flat(const char *path)
{
	int dfd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	DIR *d;
	struct dirent *e;

	if (dfd >= 0) {
		d = fdopendir(dfd);
		if (!d) {
			close(dfd);
		} else {
			while ((e = readdir(d)))
				if (strcmp(e->d_name, ".") != 0 &&
				    strcmp(e->d_name, "..") != 0 &&
				    unlinkat(dirfd(d), e->d_name, 0) < 0 &&
				    errno == EISDIR)
					(void)unlinkat(dirfd(d), e->d_name,
					               AT_REMOVEDIR);
			closedir(d);
		}
	}
	if (rmdir(path) < 0 && errno != ENOENT)
		log_warn("removing %s", path);
}

/* Makes runs/<run id>/<filename> holding the code. */
static int runner_box_code(struct runner *r, struct runner_run_dir *b,
                           const struct catalog_image *img, const char *code,
                           size_t len, char *err, size_t errlen)
{
	int dfd = -1, fd = -1, rc = 0;
	size_t off = 0;

	if ((size_t)snprintf(b->dir, sizeof(b->dir), "%s/%s", r->runs_dir,
	                     b->run_id) >= sizeof(b->dir) ||
	    (size_t)snprintf(b->host_dir, sizeof(b->host_dir), "%s/%s",
	                     r->runs_host_dir,
	                     b->run_id) >= sizeof(b->host_dir)) {
		snprintf(err, errlen, "SANDBOX_ROOT path too long");
		return -ENAMETOOLONG;
	}
	if (mkdir(b->dir, 0755) < 0) {
		rc = -errno;
		snprintf(err, errlen, "cannot create %.200s: %s", b->dir,
		         strerror(errno));
		return rc;
	}
	b->dir_made = true;
	/* mkdir obeys the umask; the sandbox user must read the code. */
	dfd = open(b->dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0 || fchmod(dfd, 0755) < 0)
		goto fail;
	fd = openat(dfd, img->filename,
	            O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0 || fchmod(fd, 0644) < 0)
		goto fail;
	while (off < len) {
		ssize_t w = write(fd, code + off, len - off);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			goto fail;
		off += (size_t)w;
	}
	if (close(fd) < 0) {
		fd = -1;
		goto fail;
	}
	close(dfd);
	return 0;
fail:
	rc = -errno;
	snprintf(err, errlen, "cannot write the code file in %.200s: %s",
	         b->dir, strerror(errno));
	if (fd >= 0)
		close(fd);
	if (dfd >= 0)
		close(dfd);
	return rc ? rc : -EIO;
}

static void runner_run_dir_release(struct runner_run_dir *d)
{
	if (d->dir_made)
		runner_rmdir_flat(d->dir);
	d->dir_made = false;
}

/* ---- the box of a one-off run -------------------------------------------- */

void runner_spec_store_finish(struct runner_spec_store *st)
{
	free(st->env);
	free(st->base_url_env);
	st->env = NULL;
	st->base_url_env = NULL;
}

int runner_box_spec(const struct config *cfg, const struct runner_spec *sp,
                    struct box_spec *o, struct runner_spec_store *st)
{
	const struct catalog_image *img = sp->image;
	size_t nc = 0, ne = 0;

	memset(st, 0, sizeof(*st));
	memset(o, 0, sizeof(*o));
	if (img->n_command == 0 || img->n_command > CATALOG_COMMAND_MAX)
		return -EINVAL;
	/* The image's own deadline: kill -9 shortly after ours would. */
	if (img->watchdog) {
		snprintf(st->limit_arg, sizeof(st->limit_arg), "%us",
		         sp->timeout_s + RUNNER_WATCHDOG_GRACE_S);
		st->cmd[nc++] = img->watchdog;
		st->cmd[nc++] = "-s";
		st->cmd[nc++] = "KILL";
		st->cmd[nc++] = st->limit_arg;
	}
	for (size_t i = 0; i < img->n_command; i++)
		st->cmd[nc++] = img->command[i];

	st->env = calloc(sp->n_env + 3, sizeof(*st->env));
	if (!st->env)
		return -ENOMEM;
	st->env[ne++] = "HOME=/tmp";
	st->env[ne++] = "LANG=C.UTF-8";
	if (sp->file_base_url) {
		st->base_url_env =
		    buf_asprintf("FILE_BASE_URL=%s", sp->file_base_url);
		if (!st->base_url_env) {
			runner_spec_store_finish(st);
			return -ENOMEM;
		}
		st->env[ne++] = st->base_url_env;
	}
	for (size_t i = 0; i < sp->n_env; i++)
		st->env[ne++] = sp->env[i];

	o->image = img->image_id;
	o->cmd = st->cmd;
	o->n_cmd = nc;
	o->env = st->env;
	o->n_env = ne;
	o->workdir = "/data";
	o->labels[o->n_labels++] = (struct box_label){"sandbox.kind", "run"};
	o->labels[o->n_labels++] =
	    (struct box_label){"sandbox.run", sp->run_id};
	if (sp->tenant_fp)
		o->labels[o->n_labels++] =
		    (struct box_label){"sandbox.tenant", sp->tenant_fp};
	if (sp->workspace_host_path)
		o->mounts[o->n_mounts++] = (struct box_mount){
		    sp->workspace_host_path, "/data", false, false};
	o->mounts[o->n_mounts++] =
	    (struct box_mount){sp->code_host_dir, "/sandbox", true, false};
	o->open_stdin = true;
	o->network = sp->network;
	o->deadline = sp->deadline;
	return 0;
}

cJSON *runner_create_body(const struct config *cfg, const char *seccomp_opt,
                          const char *owner, const char *boot,
                          const struct runner_spec *spec)
{
	struct runner_spec_store st;
	struct box_spec bs;
	cJSON *b;

	if (runner_box_spec(cfg, spec, &bs, &st) < 0)
		return NULL;
	b = backend_docker_create_body(cfg, seccomp_opt, owner, boot, &bs);
	runner_spec_store_finish(&st);
	return b;
}

/* ---- one execution ------------------------------------------------------ */

/* Waits for the box to stop, in slices so cancellation is seen. */
static int runner_wait_exit(struct box *box, long long deadline,
                            const struct runner_cancel *cc, bool *timed_out,
                            bool *cancelled, char *err, size_t errlen)
{
	int rc;

	for (;;) {
		long long left = deadline - mono_ms();

		if (runner_cancel_requested(cc)) {
			*cancelled = true;
			return 0;
		}
		if (left <= 0) {
			*timed_out = true;
			return 0;
		}
		rc = box_wait(box,
		              (unsigned)(left < RUNNER_WAIT_SLICE_MS
		                             ? left
		                             : RUNNER_WAIT_SLICE_MS),
		              err, errlen);
		if (rc != -ETIMEDOUT)
			return rc;
	}
}

/* Kills a box whose stream is already closed; waits until it stops. */
static void runner_kill(struct runner *r, struct box *box)
{
	char err[512];
	int rc;

	rc = box_signal(box, "KILL", err, sizeof(err));
	if (rc < 0 && rc != -ESRCH && rc != -ENOENT) {
		log_warnx("killing box %s: %s", box->id, err);
		return;
	}
	rc = box_wait(box, r->cfg->docker_timeout_s * 1000u, err, sizeof(err));
	if (rc < 0)
		log_warnx("waiting for killed box %s: %s", box->id, err);
}

int runner_output_fill(const struct attachio_capture *c,
                       struct runner_output *o)
{
	if (!c->head)
		return 0; /* never initialized: nothing to say */
	o->total = c->total;
	o->saved = c->saved;
	o->text = attachio_capture_text(c, &o->truncated);
	return o->text ? 0 : -ENOMEM;
}

static void runner_event(const struct runner_request *req, enum runner_event ev,
                         unsigned n)
{
	if (req->on_event)
		req->on_event(req->event_arg, ev, n);
}

/* How a one-off run ended, from the stream's end and the box's state. */
static void runner_classify(struct runner_result *res, enum attachio_end end,
                            bool timed_out, bool cancelled)
{
	res->timed_out = timed_out;
	if (cancelled)
		res->status = RUNNER_CANCELLED;
	else if (end == ATTACHIO_LIMIT)
		res->status = RUNNER_OUTPUT_LIMIT;
	else if (end == ATTACHIO_BROKEN)
		res->status = RUNNER_ERROR;
	else if (timed_out)
		res->status = RUNNER_TIMED_OUT;
	else if (res->oom_killed)
		res->status = RUNNER_OOM_KILLED;
	else if (res->exit_code == 0)
		res->status = RUNNER_COMPLETED;
	else
		res->status = RUNNER_FAILED;
}

/*
 * Drives a started box's stream to its end, then stops the box as that
 * end requires. Returns how the stream ended; sets the flags.
 */
static enum attachio_end
runner_drive(struct runner *r, const struct runner_request *req,
             struct box *box, struct box_stream **sp, long long t_start,
             struct runner_result *res, struct attachio_capture *cap_out,
             struct attachio_capture *cap_err, bool *timed_out, bool *cancelled)
{
	struct attachio_params x;
	enum attachio_end end;
	char msg[512] = "";
	int rc;

	memset(&x, 0, sizeof(x));
	x.in = req->stdin_data;
	x.in_len = req->stdin_data ? req->stdin_len : 0;
	x.deadline = t_start + (long long)res->timeout_s * 1000;
	x.cancel_fd = req->cancel ? req->cancel->fd : -1;
	x.max_total = r->cfg->output_max_bytes;
	x.out = cap_out;
	x.err = cap_err;
	x.on_output = req->on_output;
	x.on_tick = req->on_tick;
	x.output_arg = req->event_arg;
	end = attachio_run(*sp, &x, msg, sizeof(msg));
	/*
	 * Close the stream before anything else: kill hangs while an attach
	 * stream is open and unread (moby#41827).
	 */
	box_stream_close(*sp);
	*sp = NULL;
	switch (end) {
	case ATTACHIO_EOF:
		rc = runner_wait_exit(box, x.deadline, req->cancel, timed_out,
		                      cancelled, msg, sizeof(msg));
		if (rc < 0) {
			snprintf(res->message, sizeof(res->message), "%s", msg);
			runner_kill(r, box);
			return ATTACHIO_BROKEN;
		}
		if (*timed_out || *cancelled)
			runner_kill(r, box);
		break;
	case ATTACHIO_DEADLINE:
		*timed_out = true;
		runner_kill(r, box);
		break;
	case ATTACHIO_CANCEL:
		*cancelled = true;
		runner_kill(r, box);
		break;
	case ATTACHIO_LIMIT:
		runner_kill(r, box);
		break;
	case ATTACHIO_BROKEN:
		runner_kill(r, box);
		snprintf(res->message, sizeof(res->message), "%s", msg);
		break;
	}
	return end;
}

/*
 * One-off run: create (attached) -> start -> stream -> wait/kill ->
 * inspect. Returns -ENOENT when the image vanished before the box was
 * made (the result says so, and the caller may retry with a fresh
 * catalog), else 0.
 */
static int runner_execute(struct runner *r, const struct runner_request *req,
                          const struct catalog_image *img,
                          struct runner_result *res)
{
	struct runner_run_dir dir;
	struct runner_spec spec;
	struct runner_spec_store st;
	struct box_spec bs;
	struct box *box = NULL;
	struct box_stream *s = NULL;
	struct attachio_capture cap_out, cap_err;
	struct box_state bst;
	enum attachio_end end = ATTACHIO_BROKEN;
	char tenant_fp[13], name[32], msg[512] = "";
	bool timed_out = false, cancelled = false, have_spec = false;
	long long t_start = 0, t_end, ph[3] = {0, 0, 0};
	int rc, ret = 0;

	memset(&dir, 0, sizeof(dir));
	memset(&spec, 0, sizeof(spec));
	memset(&cap_out, 0, sizeof(cap_out));
	memset(&cap_err, 0, sizeof(cap_err));
	res->status = RUNNER_ERROR;
	if (attachio_capture_init(&cap_out, r->cfg->output_inline_bytes,
	                          req->stdout_fd,
	                          r->cfg->output_max_bytes) < 0 ||
	    attachio_capture_init(&cap_err, r->cfg->output_inline_bytes,
	                          req->stderr_fd,
	                          r->cfg->output_max_bytes) < 0) {
		snprintf(res->message, sizeof(res->message), "out of memory");
		goto out;
	}
	if (hex_random(dir.run_id, 8) < 0) {
		snprintf(res->message, sizeof(res->message),
		         "no randomness for a run id");
		goto out;
	}
	snprintf(name, sizeof(name), "mcpsd-%s", dir.run_id);
	rc = runner_box_code(r, &dir, img, req->code, req->code_len, msg,
	                     sizeof(msg));
	if (rc < 0) {
		snprintf(res->message, sizeof(res->message), "%s", msg);
		goto out;
	}
	if (req->tenant)
		log_fingerprint(req->tenant, strlen(req->tenant), tenant_fp);
	spec.image = img;
	spec.run_id = dir.run_id;
	spec.code_host_dir = dir.host_dir;
	spec.workspace_host_path = req->workspace_host_path;
	spec.file_base_url = req->file_base_url;
	spec.tenant_fp = req->tenant ? tenant_fp : NULL;
	spec.env = req->env;
	spec.n_env = req->n_env;
	spec.network = req->network;
	spec.timeout_s = res->timeout_s;
	spec.deadline = time(NULL) + 2 * (time_t)r->cfg->docker_timeout_s +
	                res->timeout_s + RUNNER_WATCHDOG_GRACE_S + 10;
	if (runner_box_spec(r->cfg, &spec, &bs, &st) < 0) {
		snprintf(res->message, sizeof(res->message), "out of memory");
		goto out;
	}
	have_spec = true;
	bs.name = name;

	ph[0] = mono_ms();
	rc = box_create(r->be, &bs, &box, msg, sizeof(msg));
	if (rc == -ENOENT) {
		ret = -ENOENT;
		snprintf(res->message, sizeof(res->message),
		         "the runner image %s for %s is gone from the engine "
		         "(%s); the runner list is being refreshed, try again",
		         img->image, img->language, msg);
		goto out;
	}
	if (rc < 0) {
		snprintf(res->message, sizeof(res->message), "%s", msg);
		goto out;
	}
	snprintf(res->container, sizeof(res->container), "%s", box->id);
	ph[1] = mono_ms();
	rc = box_attach(box, &s, msg, sizeof(msg));
	if (rc == 0) {
		ph[2] = mono_ms();
		rc = box_start(box, msg, sizeof(msg));
	}
	if (rc < 0) {
		snprintf(res->message, sizeof(res->message), "%s", msg);
		goto out;
	}
	t_start = mono_ms();
	runner_event(req, RUNNER_EVENT_STARTED, 0);
	end = runner_drive(r, req, box, &s, t_start, res, &cap_out, &cap_err,
	                   &timed_out, &cancelled);
	t_end = mono_ms();
	res->duration_ms = t_end - t_start;
	rc = box_inspect(box, &bst, msg, sizeof(msg));
	log_debug("run %s: create %lld ms, attach %lld ms, start %lld ms, "
	          "run and stop %lld ms, inspect %lld ms",
	          box->id, ph[1] - ph[0], ph[2] - ph[1], t_start - ph[2],
	          t_end - t_start, mono_ms() - t_end);
	if (rc < 0 && end != ATTACHIO_BROKEN) {
		snprintf(res->message, sizeof(res->message), "%s", msg);
		end = ATTACHIO_BROKEN;
	}
	if (rc == 0) {
		res->oom_killed = bst.oom_killed;
		if (!bst.running && !timed_out && !cancelled &&
		    end != ATTACHIO_LIMIT)
			res->exit_code = bst.exit_code;
	}
	runner_classify(res, end, timed_out, cancelled);
out:
	box_stream_close(s);
	box_release(box);
	runner_run_dir_release(&dir);
	if (have_spec)
		runner_spec_store_finish(&st);
	if (runner_output_fill(&cap_out, &res->out) < 0 ||
	    runner_output_fill(&cap_err, &res->err) < 0) {
		res->status = RUNNER_ERROR;
		snprintf(res->message, sizeof(res->message), "out of memory");
	}
	attachio_capture_finish(&cap_out);
	attachio_capture_finish(&cap_err);
	return ret;
}

void runner_result_finish(struct runner_result *res)
{
	if (!res)
		return;
	free(res->out.text);
	free(res->err.text);
	cJSON_free(res->value_json);
	res->out.text = res->err.text = NULL;
	res->value_json = NULL;
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
	memset(res, 0, sizeof(*res));
	res->exit_code = -1;
	res->queue_ms = queue_ms;
	res->timeout_s = req->timeout_s ? req->timeout_s : r->cfg->timeout_s;
	runner_result_fill_image(res, again);
	(void)runner_execute(r, req, again, res);
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
	res->cpu_ms = -1;
	if (!r->warm)
		why = "disabled";
	else if (req->network)
		why = "network";
	else if (req->one_off)
		why = "one_off";
	else if (warm_run(r->warm, req, img, res) == 0)
		return 0;
	snprintf(res->session.state, sizeof(res->session.state), "none");
	if (why)
		snprintf(res->session.reason, sizeof(res->session.reason), "%s",
		         why);
	return 1;
}

static void runner_on_queued(void *arg, unsigned pos)
{
	const struct runner_request *req = *(const struct runner_request **)arg;

	runner_event(req, RUNNER_EVENT_QUEUED, pos);
}

/* Takes a slot; 0, or 1 when res says why the run did not start. */
static int runner_take_slot(struct runner *r, const struct runner_request *req,
                            struct runner_result *res, int *rc)
{
	unsigned retry = 0;
	const struct runner_request *arg = req;
	int got = slots_acquire(r->slots, req->cancel ? req->cancel->fd : -1,
	                        runner_on_queued, &arg, &retry);

	*rc = 0;
	if (got == 0 && !runner_cancel_requested(req->cancel))
		return 0;
	if (got == 0) {
		slots_release(r->slots, 0);
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

int runner_run(struct runner *r, const struct runner_request *req,
               struct runner_result *res)
{
	const struct config *cfg = r->cfg;
	struct catalog *cat = NULL;
	const struct catalog_image *img;
	long long t0 = mono_ms(), t_slot;
	char langs[256];
	int rc;

	memset(res, 0, sizeof(*res));
	res->exit_code = -1;
	res->timeout_s = req->timeout_s ? req->timeout_s : cfg->timeout_s;
	rc = runargs_check(req, cfg, res->message, sizeof(res->message));
	if (rc < 0)
		return runner_refuse(res, rc, "%s", res->message);
	img = runner_image(r, req->language, &cat);
	if (!img) {
		catalog_languages(cat, langs, sizeof(langs));
		catalog_put(cat);
		return runner_refuse(res, -ENOENT,
		                     "no runner for language '%.40s'; "
		                     "available: %s",
		                     req->language, langs);
	}
	runner_result_fill_image(res, img);

	if (runner_take_slot(r, req, res, &rc)) {
		res->queue_ms = mono_ms() - t0;
		goto out;
	}
	t_slot = mono_ms();
	res->queue_ms = t_slot - t0;
	if (runner_warm(r, req, img, res) != 0 &&
	    runner_execute(r, req, img, res) == -ENOENT)
		runner_retry_vanished(r, req, &cat, &img, res);
	slots_release(r->slots, mono_ms() - t_slot);
	log_info("run %s lang=%s status=%s exit=%d duration=%lldms "
	         "queue=%lldms out=%zu err=%zu",
	         res->container[0] ? res->container : "-", req->language,
	         runner_status_name(res->status), res->exit_code,
	         res->duration_ms, res->queue_ms, res->out.total,
	         res->err.total);
out:
	catalog_put(cat);
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

/* Removes code directories older than any run can be (crash leftovers). */
static void runner_sweep_runs(struct runner *r)
{
	time_t max_age = (time_t)r->cfg->max_timeout_s +
	                 4 * (time_t)r->cfg->docker_timeout_s + 300;
	time_t now = time(NULL);
	DIR *d = opendir(r->runs_dir);
	struct dirent *e;
	struct stat sb;
	char path[PATH_MAX];

	if (!d)
		return;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		if (fstatat(dirfd(d), e->d_name, &sb, AT_SYMLINK_NOFOLLOW) <
		        0 ||
		    !S_ISDIR(sb.st_mode) || now - sb.st_mtime < max_age)
			continue;
		if ((size_t)snprintf(path, sizeof(path), "%s/%s", r->runs_dir,
		                     e->d_name) < sizeof(path))
			runner_rmdir_flat(path);
	}
	closedir(d);
}

void runner_job_discover(void *runner)
{
	struct runner *r = runner;
	char err[512];

	if (runner_discover_now(r, err, sizeof(err)) < 0)
		log_debug("discovery: %s", err);
}

void runner_job_warm(void *runner)
{
	struct runner *r = runner;
	struct catalog *cat;

	if (!r->warm)
		return;
	cat = runner_catalog_get(r);
	warm_tick(r->warm, cat);
	catalog_put(cat);
}

void runner_job_reap(void *runner)
{
	struct runner *r = runner;
	char err[512];

	if (runner_reap(r, err, sizeof(err)) < 0)
		log_debug("reaper: %s", err);
	runner_sweep_runs(r);
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
	int n = snprintf(r->runs_dir, sizeof(r->runs_dir), "%s/runs",
	                 cfg->sandbox_root);
	int rc;

	if (n < 0 || (size_t)n >= sizeof(r->runs_dir) - 64 ||
	    (size_t)snprintf(r->runs_host_dir, sizeof(r->runs_host_dir),
	                     "%s/runs", host) >= sizeof(r->runs_host_dir) - 64)
		return errmsg_fail(-ENAMETOOLONG, err, errlen,
		                   "SANDBOX_ROOT is too long");
	rc = runner_mkdir(cfg->sandbox_root, 0711, err, errlen);
	if (rc == 0)
		rc = runner_mkdir(r->runs_dir, 0700, err, errlen);
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
	r->slots = slots_create(cfg->max_concurrent, cfg->queue_length);
	rc = catalog_build(NULL, &r->catalog);
	if (!r->slots || rc < 0) {
		rc = errmsg_fail(-ENOMEM, err, errlen, "out of memory");
		goto fail;
	}
	rc = backend_docker_create(cfg, r->boot, &r->be, err, errlen);
	if (rc == 0 && cfg->warm)
		rc = warm_create(cfg, r->be, r->boot, &r->warm, err, errlen);
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
	runner_sweep_runs(r);
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
	/* Removes what is queued for removal and what this boot left. */
	backend_destroy(r->be);
	slots_destroy(r->slots);
	catalog_put(r->catalog);
	pthread_mutex_destroy(&r->lock);
	pthread_mutex_destroy(&r->disc_lock);
	free(r);
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
		cJSON_AddNumberToObject(runs, "total", (double)rs.runs_total);
		cJSON_AddNumberToObject(runs, "runners", (double)rs.runners);
		cJSON_AddBoolToObject(runs, "draining", rs.draining);
	}
	return engine && rs.runners > 0;
}
