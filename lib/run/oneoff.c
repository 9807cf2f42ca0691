/* SPDX-License-Identifier: MIT */
/*
 * oneoff: see oneoff.h. Stateless beyond its environment; every run's
 * state lives on the calling thread.
 */
#include "run/oneoff.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "egress/egress.h"
#include "fs/fstree.h"
#include "run/capture.h"
#include "run/packages.h"
#include "util/buf.h"
#include "util/hex.h"
#include "util/log.h"
#include "util/mono.h"

#define ONEOFF_WAIT_SLICE_MS 1000
/* stdin as a file of the code directory, for backends without a stream. */
#define ONEOFF_STDIN_NAME ".stdin"
#define ONEOFF_STDIN_PATH "/sandbox/" ONEOFF_STDIN_NAME

/* A one-off run's code directory, as we and the engine's host see it. */
struct oneoff_dir {
	char run_id[17];
	char dir[PATH_MAX];
	char host_dir[PATH_MAX];
	char stage_host_dir[PATH_MAX]; /* an installer's, or "" */
	bool dir_made;
	int hold_fd; /* oneoff_dir_hold's, or -1 */
};

/* ---- the code directory ----------------------------------------------- */

/*
 * Removes a directory we made and what is in it, never following links (an
 * installer's staging tree is deep: fstree_remove walks it).
 */
static void oneoff_rmdir_flat(const char *path)
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
				    errno == EISDIR &&
				    fstree_remove(dirfd(d), e->d_name) < 0)
					log_warnx("removing %s/%s", path,
					          e->d_name);
			closedir(d);
		}
	}
	if (rmdir(path) < 0 && errno != ENOENT)
		log_warn("removing %s", path);
}

void oneoff_inputs_for(const char *language, struct oneoff_inputs *out)
{
	static const char py[] =
	    "# Written by mcp-sandboxd: run_code's inputs as a ready "
	    "variable.\n"
	    "import builtins, json\n"
	    "try:\n"
	    "    with open('/sandbox/" ONEOFF_INPUTS_FILE "', "
	    "encoding='utf-8') as _f:\n"
	    "        builtins.inputs = json.load(_f)\n"
	    "    del _f\n"
	    "except OSError:\n"
	    "    pass\n";
	static const char js[] =
	    "// Written by mcp-sandboxd: run_code's inputs as a ready "
	    "variable.\n"
	    "globalThis.inputs = JSON.parse(require('fs').readFileSync("
	    "'/sandbox/" ONEOFF_INPUTS_FILE "', 'utf8'));\n";

	memset(out, 0, sizeof(*out));
	if (strcmp(language, "python") == 0) {
		out->file = "sitecustomize.py";
		out->text = py;
		out->env = "PYTHONPATH=/sandbox";
	} else if (strcmp(language, "typescript") == 0 ||
	           strcmp(language, "javascript") == 0) {
		out->file = "inputs-preload.cjs";
		out->text = js;
		out->env = "BUN_OPTIONS=--preload=/sandbox/inputs-preload.cjs";
	}
}

/* Writes one readable file into the code directory. */
static int oneoff_put(int dfd, const char *name, const char *p, size_t len)
{
	size_t off = 0;
	int fd =
	    openat(dfd, name,
	           O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);

	if (fd < 0 || fchmod(fd, 0644) < 0)
		goto fail;
	while (off < len) {
		ssize_t w = write(fd, p + off, len - off);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			goto fail;
		off += (size_t)w;
	}
	if (close(fd) < 0)
		return -errno;
	return 0;
fail:
	if (fd >= 0) {
		int e = errno;

		close(fd);
		errno = e;
	}
	return -errno;
}

/*
 * An installer's staging directory, runs/<run id>/stage, mounted writable
 * at ONEOFF_STAGE_PATH: its working directory and HOME, on no file system
 * the conversation's code can write (packages.c). Owned by the sandbox
 * user when we are root, as the workspaces are.
 */
static int oneoff_stage(const struct oneoff_context *r, struct oneoff_dir *b,
                        int dfd)
{
	bool root = geteuid() == 0;
	int fd;

	if ((size_t)snprintf(b->stage_host_dir, sizeof(b->stage_host_dir),
	                     "%s/stage",
	                     b->host_dir) >= sizeof(b->stage_host_dir))
		return -ENAMETOOLONG;
	fd = fstree_mkdirs(dfd, "stage",
	                   root ? (uid_t)r->cfg->sandbox_uid : (uid_t)-1,
	                   root ? (gid_t)r->cfg->sandbox_gid : (gid_t)-1);
	if (fd < 0)
		return fd;
	close(fd);
	return 0;
}

/*
 * Makes runs/<run id>/ holding the code (<filename>) and, when given, the
 * inputs (inputs.json and the language's helper).
 */
static int oneoff_code(const struct oneoff_context *r, struct oneoff_dir *b,
                       const struct catalog_image *img,
                       const struct runner_request *req, char *err,
                       size_t errlen)
{
	struct oneoff_inputs in;
	int dfd = -1, rc = 0;

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
	dfd = oneoff_dir_hold(b->dir);
	if (dfd < 0) {
		rc = dfd;
		goto fail;
	}
	b->hold_fd = dfd;
	if (fchmod(dfd, 0755) < 0) {
		rc = -errno;
		goto fail;
	}
	rc = oneoff_put(dfd, img->filename, req->code, req->code_len);
	if (rc == 0 && req->inputs_json)
		rc = oneoff_put(dfd, ONEOFF_INPUTS_FILE, req->inputs_json,
		                req->inputs_len);
	oneoff_inputs_for(img->language, &in);
	/* A code file of the same name wins: then the file only. */
	if (rc == 0 && req->inputs_json && in.file &&
	    strcmp(in.file, img->filename) != 0)
		rc = oneoff_put(dfd, in.file, in.text, strlen(in.text));
	if (rc == 0 && req->aux_name)
		rc =
		    oneoff_put(dfd, req->aux_name, req->aux_text, req->aux_len);
	if (rc == 0 && req->install)
		rc = oneoff_stage(r, b, dfd);
	/* Bun finds the conversation's packages by walking up from the
	 * code, before the image's own /node_modules. */
	if (rc == 0 && r->cfg->packages && !req->install && !req->check &&
	    strcmp(img->packages, "npm") == 0 &&
	    symlinkat(PACKAGES_NODE_MODULES, dfd, "node_modules") < 0)
		rc = -errno;
	if (rc < 0)
		goto fail;
	return 0;
fail:
	snprintf(err, errlen, "cannot write the code file in %.200s: %s",
	         b->dir, strerror(-rc));
	return rc ? rc : -EIO;
}

/*
 * For backends that cannot stream stdin: writes it as the file
 * ONEOFF_STDIN_NAME of the code directory (read-only at /sandbox).
 */
static int oneoff_stdin_file(struct oneoff_dir *b, const char *data, size_t len,
                             char *err, size_t errlen)
{
	int dfd, fd = -1, rc = 0;
	size_t off = 0;

	dfd = open(b->dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd >= 0)
		fd = openat(
		    dfd, ONEOFF_STDIN_NAME,
		    O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0 || fchmod(fd, 0644) < 0)
		goto fail;
	while (off < len) {
		ssize_t w = write(fd, data + off, len - off);

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
	rc = errno ? -errno : -EIO;
	snprintf(err, errlen, "cannot write the stdin file in %.200s: %s",
	         b->dir, strerror(-rc));
	if (fd >= 0)
		close(fd);
	if (dfd >= 0)
		close(dfd);
	return rc;
}

static void oneoff_dir_release(struct oneoff_dir *d)
{
	if (d->dir_made)
		oneoff_rmdir_flat(d->dir);
	d->dir_made = false;
	if (d->hold_fd >= 0)
		close(d->hold_fd);
	d->hold_fd = -1;
}

int oneoff_dir_hold(const char *path)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	if (flock(fd, LOCK_SH) < 0) {
		int rc = -errno;

		close(fd);
		return rc;
	}
	return fd;
}

/* ---- the box of a one-off run -------------------------------------------- */

void oneoff_spec_store_finish(struct oneoff_spec_store *st)
{
	free(st->env);
	free(st->base_url_env);
	free(st->pythonpath_env);
	st->env = NULL;
	st->base_url_env = NULL;
	st->pythonpath_env = NULL;
}

int oneoff_path_env(const struct config *cfg, const struct catalog_image *img,
                    const char *inputs_env, char **pkg, const char **inputs)
{
	bool on_path =
	    inputs_env && strncmp(inputs_env, "PYTHONPATH=", 11) == 0;

	*pkg = NULL;
	*inputs = inputs_env;
	if (!cfg->packages)
		return 0;
	if (strcmp(img->packages, "cran") == 0)
		*pkg = strdup("R_LIBS=" PACKAGES_R_DIR);
	else if (strcmp(img->packages, "pip") == 0)
		*pkg =
		    buf_asprintf("PYTHONPATH=%s%s", on_path ? "/sandbox:" : "",
		                 PACKAGES_PYTHON_SITE);
	else
		return 0;
	if (!*pkg)
		return -ENOMEM;
	if (on_path)
		*inputs = NULL; /* *pkg carries /sandbox: one PYTHONPATH */
	return 0;
}

int oneoff_box_spec(const struct config *cfg, const struct oneoff_spec *sp,
                    struct box_spec *o, struct oneoff_spec_store *st)
{
	const struct catalog_image *img = sp->image;
	const char *const *argv =
	    sp->argv
	        ? sp->argv
	        : (const char *const *)(sp->check ? img->check : img->command);
	size_t argc = sp->argv    ? sp->n_argv
	              : sp->check ? img->n_check
	                          : img->n_command;
	const char *inputs_env = sp->inputs_env;
	size_t nc = 0, ne = 0;

	memset(st, 0, sizeof(*st));
	memset(o, 0, sizeof(*o));
	if (argc == 0 ||
	    argc > (sp->argv ? CATALOG_COMMAND_MAX + 72 : CATALOG_COMMAND_MAX))
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
	for (size_t i = 0; i < argc; i++)
		st->cmd[nc++] = argv[i];

	st->env = calloc(sp->n_env + sp->n_egress_env + 5, sizeof(*st->env));
	/* The package cache is not for an install or a check. */
	if (!st->env ||
	    (!sp->install && !sp->check &&
	     oneoff_path_env(cfg, img, sp->inputs_env, &st->pythonpath_env,
	                     &inputs_env) < 0)) {
		oneoff_spec_store_finish(st);
		return -ENOMEM;
	}
	st->env[ne++] = "HOME=/tmp";
	st->env[ne++] = "LANG=C.UTF-8";
	if (sp->file_base_url) {
		st->base_url_env =
		    buf_asprintf("FILE_BASE_URL=%s", sp->file_base_url);
		if (!st->base_url_env) {
			oneoff_spec_store_finish(st);
			return -ENOMEM;
		}
		st->env[ne++] = st->base_url_env;
	}
	for (size_t i = 0; i < sp->n_env; i++)
		st->env[ne++] = sp->env[i];
	/* After the caller's: the engine keeps the last of a name. */
	for (size_t i = 0; i < sp->n_egress_env; i++)
		st->env[ne++] = sp->egress_env[i];
	if (inputs_env)
		st->env[ne++] = inputs_env;
	if (st->pythonpath_env)
		st->env[ne++] = st->pythonpath_env;

	o->image = img->image_id;
	o->cmd = st->cmd;
	o->n_cmd = nc;
	o->env = st->env;
	o->n_env = ne;
	/* A check has no /data: the checker must not see or touch it. */
	o->workdir = sp->check ? "/tmp" : "/data";
	o->labels[o->n_labels++] = (struct box_label){"sandbox.kind", "run"};
	o->labels[o->n_labels++] =
	    (struct box_label){"sandbox.run", sp->run_id};
	if (sp->tenant_fp)
		o->labels[o->n_labels++] =
		    (struct box_label){"sandbox.tenant", sp->tenant_fp};
	if (sp->workspace_host_path && !sp->check)
		o->mounts[o->n_mounts++] = (struct box_mount){
		    sp->workspace_host_path, "/data", false, false};
	o->mounts[o->n_mounts++] =
	    (struct box_mount){sp->code_host_dir, "/sandbox", true, false};
	if (sp->install && sp->stage_host_dir)
		o->mounts[o->n_mounts++] = (struct box_mount){
		    sp->stage_host_dir, ONEOFF_STAGE_PATH, false, false};
	o->open_stdin = true;
	o->network = sp->network;
	o->egress = sp->egress;
	o->install = sp->install;
	o->memory_mb = sp->memory_mb;
	o->cpus = sp->cpus;
	o->measure = true;
	o->deadline = sp->deadline;
	return 0;
}

/* ---- one execution ------------------------------------------------------ */

/* Waits for the box to stop, in slices so cancellation is seen. */
static int oneoff_wait_exit(struct box *box, long long deadline,
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
		              (unsigned)(left < ONEOFF_WAIT_SLICE_MS
		                             ? left
		                             : ONEOFF_WAIT_SLICE_MS),
		              err, errlen);
		if (rc != -ETIMEDOUT)
			return rc;
	}
}

/* Kills a box whose stream is already closed; waits until it stops. */
static void oneoff_kill(const struct oneoff_context *r, struct box *box)
{
	char err[512];
	int rc;

	rc = box_signal(box, "KILL", err, sizeof(err));
	if (rc < 0 && rc != -ESRCH && rc != -ENOENT) {
		log_warnx("killing box %s: %s", box->id, err);
		return;
	}
	rc = box_wait(box, r->cfg->engine_timeout_s * 1000u, err, sizeof(err));
	if (rc < 0)
		log_warnx("waiting for killed box %s: %s", box->id, err);
}

static void oneoff_event(const struct runner_request *req, enum runner_event ev,
                         unsigned n)
{
	if (req->on_event)
		req->on_event(req->event_arg, ev, n);
}

/* The stopped box's peak memory and CPU time, when the backend knows. */
static void oneoff_usage(struct box *box, struct runner_result *res)
{
	struct box_usage u;
	char msg[256];
	int rc = box_usage(box, &u, msg, sizeof(msg));

	if (rc < 0 && rc != -ENOTSUP)
		log_debug("run %s: %s", box->id, msg);
	res->memory_peak_bytes = u.memory_peak_bytes;
	res->cpu_ms = u.cpu_ms;
}

/* How a one-off run ended, from the stream's end and the box's state. */
static void oneoff_classify(struct runner_result *res, enum capture_end end,
                            bool timed_out, bool cancelled)
{
	res->timed_out = timed_out;
	if (cancelled)
		res->status = RUNNER_CANCELLED;
	else if (end == CAPTURE_LIMIT)
		res->status = RUNNER_OUTPUT_LIMIT;
	else if (end == CAPTURE_BROKEN)
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
static enum capture_end
oneoff_drive(const struct oneoff_context *r, const struct runner_request *req,
             struct box *box, struct box_stream **sp, long long t_start,
             struct runner_result *res, struct capture *cap_out,
             struct capture *cap_err, bool *timed_out, bool *cancelled)
{
	struct capture_params x;
	enum capture_end end;
	char msg[512] = "";
	int rc;

	memset(&x, 0, sizeof(x));
	if (backend_has(r->be, BACKEND_CAN_STDIN)) {
		x.in = req->stdin_data;
		x.in_len = req->stdin_data ? req->stdin_len : 0;
	}
	x.deadline = t_start + (long long)res->timeout_s * 1000;
	x.cancel_fd = runner_cancel_fd(req->cancel);
	x.max_total = r->cfg->output_max_bytes;
	x.out = cap_out;
	x.err = cap_err;
	x.on_output = req->on_output;
	x.on_tick = req->on_tick;
	x.output_arg = req->event_arg;
	end = capture_run(*sp, &x, msg, sizeof(msg));
	/*
	 * Close the stream before anything else: kill hangs while an attach
	 * stream is open and unread (moby#41827).
	 */
	box_stream_close(*sp);
	*sp = NULL;
	switch (end) {
	case CAPTURE_EOF:
		rc = oneoff_wait_exit(box, x.deadline, req->cancel, timed_out,
		                      cancelled, msg, sizeof(msg));
		if (rc < 0) {
			snprintf(res->message, sizeof(res->message), "%s", msg);
			oneoff_kill(r, box);
			return CAPTURE_BROKEN;
		}
		if (*timed_out || *cancelled)
			oneoff_kill(r, box);
		break;
	case CAPTURE_DEADLINE:
		*timed_out = true;
		oneoff_kill(r, box);
		break;
	case CAPTURE_CANCEL:
		*cancelled = true;
		oneoff_kill(r, box);
		break;
	case CAPTURE_LIMIT:
		oneoff_kill(r, box);
		break;
	case CAPTURE_BROKEN:
		oneoff_kill(r, box);
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
/* What oneoff_box_spec needs to know of this run. */
static void oneoff_fill_spec(const struct oneoff_context *r,
                             const struct runner_request *req,
                             const struct catalog_image *img,
                             const struct runner_result *res,
                             const struct oneoff_dir *dir, char tenant_fp[13],
                             struct oneoff_spec *spec)
{
	if (req->tenant)
		log_fingerprint(req->tenant, strlen(req->tenant), tenant_fp);
	spec->image = img;
	spec->run_id = dir->run_id;
	spec->code_host_dir = dir->host_dir;
	spec->workspace_host_path =
	    req->check ? NULL : req->workspace_host_path;
	spec->check = req->check;
	spec->file_base_url = req->file_base_url;
	spec->tenant_fp = req->tenant ? tenant_fp : NULL;
	spec->env = req->env;
	spec->n_env = req->n_env;
	spec->network = req->network;
	spec->argv = req->argv;
	spec->n_argv = req->n_argv;
	spec->install = req->install;
	spec->stage_host_dir =
	    dir->stage_host_dir[0] ? dir->stage_host_dir : NULL;
	spec->timeout_s = res->timeout_s;
	spec->memory_mb = req->memory_mb;
	spec->cpus = req->cpus;
	if (req->inputs_json && !req->install) {
		struct oneoff_inputs in;

		oneoff_inputs_for(img->language, &in);
		spec->inputs_env = in.env;
	}
	spec->deadline = time(NULL) + 2 * (time_t)r->cfg->engine_timeout_s +
	                 res->timeout_s + RUNNER_WATCHDOG_GRACE_S + 10;
}

/*
 * Creates, attaches and starts the box and waits until it runs (a cluster
 * may queue it). 0, or a negative errno with res->message (and
 * RUNNER_CANCELLED when cancelled while queued); -ENOENT when the image is
 * gone. ph receives the times of create, attach and start.
 */
static int oneoff_start(const struct oneoff_context *r,
                        const struct runner_request *req,
                        const struct catalog_image *img,
                        const struct box_spec *bs, struct box **box,
                        struct box_stream **s, struct runner_result *res,
                        long long ph[3])
{
	char msg[512] = "";
	long long t_wait;
	int rc;

	ph[0] = mono_ms();
	rc = box_create(r->be, bs, box, msg, sizeof(msg));
	if (rc == -ENOENT) {
		snprintf(res->message, sizeof(res->message),
		         "the runner image %s for %s is gone from the engine "
		         "(%s); the runner list is being refreshed, try again",
		         img->image, img->language, msg);
		return rc;
	}
	if (rc < 0)
		goto fail;
	snprintf(res->container, sizeof(res->container), "%s", (*box)->id);
	ph[1] = mono_ms();
	rc = box_attach(*box, s, msg, sizeof(msg));
	if (rc < 0)
		goto fail;
	ph[2] = mono_ms();
	rc = box_start(*box, msg, sizeof(msg));
	if (rc < 0)
		goto fail;
	/* A cluster may queue the box: the time limit starts after. */
	t_wait = mono_ms();
	rc = box_wait_running(*box, runner_cancel_fd(req->cancel), msg,
	                      sizeof(msg));
	res->queue_ms += mono_ms() - t_wait;
	if (rc == -ECANCELED) {
		res->status = RUNNER_CANCELLED;
		snprintf(res->message, sizeof(res->message),
		         "cancelled while waiting for a sandbox");
		return rc;
	}
	if (rc == 0)
		return 0;
fail:
	snprintf(res->message, sizeof(res->message), "%s", msg);
	/* Only a create that found no image means "image gone". */
	return rc == -ENOENT ? -EIO : rc;
}

/*
 * Opens the run's way out through the egress proxy (egress.h) and puts it
 * in spec. 0, or a negative errno with res->message.
 */
static int oneoff_egress_begin(const struct oneoff_context *r,
                               const struct runner_request *req,
                               struct egress_run **run,
                               struct oneoff_spec *spec,
                               struct runner_result *res)
{
	char msg[512];
	int rc;

	if (!r->egress) {
		snprintf(res->message, sizeof(res->message),
		         "this server has no egress proxy for runs with "
		         "network; run without network");
		return -ENOTSUP;
	}
	rc = egress_run_begin(r->egress, req->egress, run, msg, sizeof(msg));
	if (rc < 0) {
		snprintf(res->message, sizeof(res->message),
		         "cannot give this run network: %.400s", msg);
		if (rc == -EAGAIN)
			res->status = RUNNER_BUSY;
		return rc;
	}
	spec->egress = egress_run_box(*run);
	spec->egress_env = egress_run_env(*run, &spec->n_egress_env);
	return 0;
}

/* Ends the run's way out (after its box) and keeps what it did in res. */
static void oneoff_egress_end(const struct oneoff_context *r,
                              struct egress_run *run, struct runner_result *res)
{
	struct egress_facts *f;

	if (!run)
		return;
	f = calloc(1, sizeof(*f));
	egress_run_end(r->egress, run, f);
	free(res->egress);
	res->egress = f;
}

int oneoff_run(const struct oneoff_context *r, const struct runner_request *req,
               const struct catalog_image *img, struct runner_result *res)
{
	struct oneoff_dir dir;
	struct oneoff_spec spec;
	struct oneoff_spec_store st;
	struct box_spec bs;
	struct box *box = NULL;
	struct box_stream *s = NULL;
	struct capture cap_out, cap_err;
	struct box_state bst;
	enum capture_end end = CAPTURE_BROKEN;
	char tenant_fp[13], name[32], msg[512] = "";
	bool timed_out = false, cancelled = false, have_spec = false;
	long long t_start = 0, t_end, ph[3] = {0, 0, 0};
	struct egress_run *eg_run = NULL;
	int rc, ret = 0;

	memset(&dir, 0, sizeof(dir));
	dir.hold_fd = -1;
	memset(&spec, 0, sizeof(spec));
	memset(&cap_out, 0, sizeof(cap_out));
	memset(&cap_err, 0, sizeof(cap_err));
	res->status = RUNNER_ERROR;
	if (capture_init_run(&cap_out, &cap_err, r->cfg->output_inline_bytes,
	                     r->cfg->output_max_bytes, req->stdout_fd,
	                     req->stderr_fd, req->output_file,
	                     req->output_file_arg) < 0) {
		snprintf(res->message, sizeof(res->message), "out of memory");
		goto out;
	}
	if (hex_random(dir.run_id, 8) < 0) {
		snprintf(res->message, sizeof(res->message),
		         "no randomness for a run id");
		goto out;
	}
	snprintf(name, sizeof(name), "mcpsd-%s", dir.run_id);
	rc = oneoff_code(r, &dir, img, req, msg, sizeof(msg));
	if (rc < 0) {
		snprintf(res->message, sizeof(res->message), "%s", msg);
		goto out;
	}
	if (!backend_has(r->be, BACKEND_CAN_STDIN) && req->stdin_data) {
		rc = oneoff_stdin_file(&dir, req->stdin_data, req->stdin_len,
		                       msg, sizeof(msg));
		if (rc < 0) {
			snprintf(res->message, sizeof(res->message), "%s", msg);
			goto out;
		}
	}
	oneoff_fill_spec(r, req, img, res, &dir, tenant_fp, &spec);
	if (req->egress) {
		rc = oneoff_egress_begin(r, req, &eg_run, &spec, res);
		if (rc < 0)
			goto out;
	}
	rc = oneoff_box_spec(r->cfg, &spec, &bs, &st);
	if (rc < 0) {
		snprintf(res->message, sizeof(res->message), "%s",
		         rc == -ENOMEM ? "out of memory"
		                       : "the runner image has no command for "
		                         "this run (sandbox.check missing?)");
		goto out;
	}
	have_spec = true;
	bs.name = name;
	if (!backend_has(r->be, BACKEND_CAN_STDIN) && req->stdin_data)
		bs.stdin_path = ONEOFF_STDIN_PATH;
	bs.exclusive = req->workspace_name;

	rc = oneoff_start(r, req, img, &bs, &box, &s, res, ph);
	if (rc < 0) {
		if (rc == -ENOENT)
			ret = -ENOENT;
		goto out;
	}
	t_start = mono_ms();
	oneoff_event(req, RUNNER_EVENT_STARTED, 0);
	end = oneoff_drive(r, req, box, &s, t_start, res, &cap_out, &cap_err,
	                   &timed_out, &cancelled);
	t_end = mono_ms();
	res->duration_ms = t_end - t_start;
	rc = box_inspect(box, &bst, msg, sizeof(msg));
	log_debug("run %s: create %lld ms, attach %lld ms, start %lld ms, "
	          "run and stop %lld ms, inspect %lld ms",
	          box->id, ph[1] - ph[0], ph[2] - ph[1], t_start - ph[2],
	          t_end - t_start, mono_ms() - t_end);
	if (rc < 0 && end != CAPTURE_BROKEN) {
		snprintf(res->message, sizeof(res->message), "%s", msg);
		end = CAPTURE_BROKEN;
	}
	if (rc == 0) {
		res->oom_killed = bst.oom_killed;
		if (!bst.running && !timed_out && !cancelled &&
		    end != CAPTURE_LIMIT)
			res->exit_code = bst.exit_code;
	}
	oneoff_classify(res, end, timed_out, cancelled);
	oneoff_usage(box, res);
out:
	box_stream_close(s);
	box_release(box);
	oneoff_egress_end(r, eg_run, res);
	oneoff_dir_release(&dir);
	if (have_spec)
		oneoff_spec_store_finish(&st);
	runner_output_collect(&cap_out, &cap_err, res);
	return ret;
}

/*
 * The age past which an unheld code directory is a leftover: the setting,
 * or the longest a run can take with every engine call timing out.
 */
static time_t oneoff_sweep_age(const struct config *cfg)
{
	if (cfg->runs_sweep_s)
		return (time_t)cfg->runs_sweep_s;
	return (time_t)cfg->max_timeout_s + 4 * (time_t)cfg->engine_timeout_s +
	       300;
}

/*
 * Whether the directory name of d is a leftover: old enough and held by
 * nobody (a run or a warm box of this or another process holds its own
 * with oneoff_dir_hold for as long as it lives, whatever its age: a pool
 * box may wait for a claim for hours).
 */
static bool oneoff_leftover(DIR *d, const char *name, time_t max_age)
{
	struct stat sb;
	bool free_now;
	int fd;

	if (fstatat(dirfd(d), name, &sb, AT_SYMLINK_NOFOLLOW) < 0 ||
	    !S_ISDIR(sb.st_mode) || time(NULL) - sb.st_mtime < max_age)
		return false;
	fd = openat(dirfd(d), name,
	            O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return false;
	free_now = flock(fd, LOCK_EX | LOCK_NB) == 0;
	close(fd);
	return free_now;
}

void oneoff_sweep_finish(struct oneoff_context *r)
{
	if (r->sweep_dir)
		closedir(r->sweep_dir);
	r->sweep_dir = NULL;
	if (r->sweep_removed)
		log_info("removed %u leftover code director%s under %s",
		         r->sweep_removed, r->sweep_removed == 1 ? "y" : "ies",
		         r->runs_dir);
	r->sweep_removed = 0;
}

/* Names looked at between two looks at the clock. */
#define ONEOFF_SWEEP_NAMES_PER_CHECK 64

bool oneoff_sweep(struct oneoff_context *r, long long deadline_ms)
{
	time_t max_age = oneoff_sweep_age(r->cfg);
	char path[PATH_MAX];
	struct dirent *e;
	unsigned seen = 0;

	if (!r->sweep_dir && !(r->sweep_dir = opendir(r->runs_dir)))
		return false;
	while ((e = readdir(r->sweep_dir))) {
		bool removed = false;

		if (e->d_name[0] != '.' &&
		    oneoff_leftover(r->sweep_dir, e->d_name, max_age) &&
		    (size_t)snprintf(path, sizeof(path), "%s/%s", r->runs_dir,
		                     e->d_name) < sizeof(path)) {
			oneoff_rmdir_flat(path);
			r->sweep_removed++;
			removed = true;
		}
		if ((removed || ++seen % ONEOFF_SWEEP_NAMES_PER_CHECK == 0) &&
		    mono_ms() >= deadline_ms)
			return true;
	}
	oneoff_sweep_finish(r);
	return false;
}
