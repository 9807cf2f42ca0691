/* SPDX-License-Identifier: MIT */
/*
 * runner: limits and executions. Layers, bottom up (catalog.c resolves
 * images; attachio.c drives one program's stream):
 *   - spec: the environment rules and the container create body (pure);
 *   - box: one container's lifecycle (code directory, create, removal on
 *     the remover thread);
 *   - slots: the concurrency cap and FIFO queue;
 *   - runner_run, which strings them together, and the housekeeping thread
 *     (discovery, reaping).
 * Locks: r->lock guards the catalog pointer, slots, statistics and flags;
 * r->rm_lock the removal queue; r->disc_lock serializes discoveries. No
 * lock is held across a Docker call.
 */
#include "runner.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "attachio.h"
#include "buf.h"
#include "log.h"
#include "seccomp.h"
#include "util/hex.h"
#include "util/mono.h"
#include "util/num.h"

#define RUNNER_CMD_MAX 64
#define CATALOG_NAME_MAX 32
#define RUNNER_ALIASES_MAX 16
#define RUNNER_LIBS_MAX 256
#define RUNNER_ENV_NAME_MAX 128
#define RUNNER_READ_CHUNK (64 * 1024)
#define RUNNER_WAIT_SLICE_MS 1000
#define RUNNER_REFRESH_MIN_MS 2000
#define RUNNER_AVG_INIT_MS 2000

/* ---- small helpers ------------------------------------------------------ */

static const char *runner_label(const cJSON *labels, const char *name)
{
	return cJSON_GetStringValue(
	    cJSON_GetObjectItemCaseSensitive(labels, name));
}

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

/* ---- environment -------------------------------------------------------- */

int runner_env_check(const char *name, const char *value, char *err,
                     size_t errlen)
{
	static const char *const injected[] = {"HOME", "LANG", "FILE_BASE_URL"};
	size_t n;

	if (!name || !name[0]) {
		snprintf(err, errlen,
		         "environment variable names must not "
		         "be empty");
		return -EINVAL;
	}
	n = strlen(name);
	if (n > RUNNER_ENV_NAME_MAX ||
	    !(isalpha((unsigned char)name[0]) || name[0] == '_') ||
	    strspn(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	                 "0123456789_") != n) {
		snprintf(err, errlen,
		         "environment variable name '%.64s%s' is invalid: use "
		         "letters, digits and '_', not starting with a digit, "
		         "at most %d characters",
		         name, n > 64 ? "..." : "", RUNNER_ENV_NAME_MAX);
		return -EINVAL;
	}
	for (size_t i = 0; i < sizeof(injected) / sizeof(*injected); i++) {
		if (strcmp(name, injected[i]) == 0) {
			snprintf(err, errlen,
			         "environment variable %s is set by the server "
			         "and cannot be overridden; use another name",
			         name);
			return -EINVAL;
		}
	}
	if (strncmp(name, "LD_", 3) == 0 || strncmp(name, "SANDBOX_", 8) == 0) {
		snprintf(err, errlen,
		         "environment variable %s is not allowed (LD_* and "
		         "SANDBOX_* are reserved); use another name",
		         name);
		return -EINVAL;
	}
	if (!value) {
		snprintf(err, errlen,
		         "environment variable %s must have a string value",
		         name);
		return -EINVAL;
	}
	return 0;
}

void runner_env_free(char **env)
{
	if (!env)
		return;
	for (char **p = env; *p; p++)
		free(*p);
	free(env);
}

int runner_env_from_json(const cJSON *obj, size_t max_bytes, char ***out,
                         size_t *n, char *err, size_t errlen)
{
	const cJSON *it;
	size_t count = 0, total = 0, i = 0;
	char **env = NULL;
	int r;

	*out = NULL;
	*n = 0;
	if (!obj || cJSON_IsNull(obj))
		count = 0;
	else if (!cJSON_IsObject(obj)) {
		snprintf(err, errlen,
		         "environment must be an object mapping names to "
		         "string values, e.g. {\"DEBUG\": \"1\"}");
		return -EINVAL;
	} else
		count = (size_t)cJSON_GetArraySize(obj);
	env = calloc(count + 1, sizeof(*env));
	if (!env) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	if (count == 0)
		goto done;
	cJSON_ArrayForEach (it, obj) {
		const char *v = cJSON_GetStringValue(it);
		size_t len;

		r = runner_env_check(it->string, v, err, errlen);
		if (r < 0)
			goto fail;
		for (size_t j = 0; j < i; j++) {
			size_t nl = strlen(it->string);

			if (strncmp(env[j], it->string, nl) == 0 &&
			    env[j][nl] == '=') {
				snprintf(err, errlen,
				         "environment variable %s is given "
				         "twice",
				         it->string);
				r = -EINVAL;
				goto fail;
			}
		}
		len = strlen(it->string) + 1 + strlen(v) + 1;
		total += len;
		if (total > max_bytes) {
			snprintf(err, errlen,
			         "environment is larger than %zu bytes (names "
			         "and values together); pass large data "
			         "through stdin or a file in /data instead",
			         max_bytes);
			r = -EINVAL;
			goto fail;
		}
		env[i] = malloc(len);
		if (!env[i]) {
			snprintf(err, errlen, "out of memory");
			r = -ENOMEM;
			goto fail;
		}
		snprintf(env[i], len, "%s=%s", it->string, v);
		i++;
	}
done:
	*out = env;
	*n = i;
	return 0;
fail:
	runner_env_free(env);
	return r;
}

/* ---- the create body ---------------------------------------------------- */

/* Storage for the strings and arrays a struct docker_create_opts points to.
 */
struct runner_opts_store {
	const char *cmd[RUNNER_CMD_MAX + 4];
	char limit_arg[24];
	const char **env;
	char *base_url_env;
	struct docker_kv labels[6];
	char deadline[24];
	char user[32];
	struct docker_kv tmpfs[1];
	char tmpfs_opts[96];
	struct docker_ulimit ulimits[3];
	const char *secopt[2];
	const char *capdrop[1];
	struct docker_mount mounts[2];
};

static void runner_opts_free(struct runner_opts_store *st)
{
	free(st->env);
	free(st->base_url_env);
}

static int runner_opts_fill(const struct config *cfg, const char *seccomp_opt,
                            const char *owner, const char *boot,
                            const struct runner_spec *sp,
                            struct runner_opts_store *st,
                            struct docker_create_opts *o)
{
	const struct catalog_image *img = sp->image;
	size_t nc = 0, ne = 0, nl = 0, nm = 0;

	memset(st, 0, sizeof(*st));
	memset(o, 0, sizeof(*o));
	if (img->n_command == 0 || img->n_command > RUNNER_CMD_MAX)
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
		size_t len =
		    strlen(sp->file_base_url) + sizeof("FILE_BASE_URL=");

		st->base_url_env = malloc(len);
		if (!st->base_url_env) {
			runner_opts_free(st);
			return -ENOMEM;
		}
		snprintf(st->base_url_env, len, "FILE_BASE_URL=%s",
		         sp->file_base_url);
		st->env[ne++] = st->base_url_env;
	}
	for (size_t i = 0; i < sp->n_env; i++)
		st->env[ne++] = sp->env[i];

	snprintf(st->deadline, sizeof(st->deadline), "%lld",
	         (long long)sp->deadline);
	st->labels[nl++] = (struct docker_kv){"sandbox.managed", "true"};
	st->labels[nl++] = (struct docker_kv){"sandbox.owner", owner};
	st->labels[nl++] = (struct docker_kv){"sandbox.boot", boot};
	st->labels[nl++] = (struct docker_kv){"sandbox.deadline", st->deadline};
	st->labels[nl++] = (struct docker_kv){"sandbox.run", sp->run_id};
	if (sp->tenant_fp)
		st->labels[nl++] =
		    (struct docker_kv){"sandbox.tenant", sp->tenant_fp};

	snprintf(st->user, sizeof(st->user), "%u:%u", cfg->sandbox_uid,
	         cfg->sandbox_gid);
	/* exec: native modules dlopen()ed from /tmp must load. */
	snprintf(st->tmpfs_opts, sizeof(st->tmpfs_opts),
	         "rw,exec,nosuid,nodev,size=%um,mode=1777", cfg->tmp_mb);
	st->tmpfs[0] = (struct docker_kv){"/tmp", st->tmpfs_opts};
	st->ulimits[0] =
	    (struct docker_ulimit){"nofile", cfg->nofile, cfg->nofile};
	st->ulimits[1] = (struct docker_ulimit){
	    "fsize", (long long)cfg->fsize_mb * 1024 * 1024,
	    (long long)cfg->fsize_mb * 1024 * 1024};
	st->ulimits[2] = (struct docker_ulimit){"core", 0, 0};
	st->secopt[0] = "no-new-privileges:true";
	st->secopt[1] = seccomp_opt;
	st->capdrop[0] = "ALL";
	if (sp->workspace_host_path)
		st->mounts[nm++] = (struct docker_mount){
		    sp->workspace_host_path, "/data", false};
	st->mounts[nm++] =
	    (struct docker_mount){sp->code_host_dir, "/sandbox", true};

	o->image = img->image_id;
	o->cmd = st->cmd;
	o->n_cmd = nc;
	o->env = st->env;
	o->n_env = ne;
	o->labels = st->labels;
	o->n_labels = nl;
	o->user = st->user;
	o->working_dir = "/data";
	o->open_stdin = true;
	o->memory_bytes = (long long)cfg->memory_mb * 1024 * 1024;
	o->memory_swap_bytes = o->memory_bytes; /* unset swap doubles it */
	o->nano_cpus = llround(cfg->cpus * 1e9);
	o->pids_limit = cfg->pids_limit;
	o->shm_size_bytes = (long long)cfg->tmp_mb * 1024 * 1024;
	o->oom_score_adj = 1000; /* under host pressure, sandboxes go first */
	o->network_mode = sp->network && cfg->allow_network ? "bridge" : "none";
	o->readonly_rootfs = true;
	o->init = true;
	o->ipc_mode = "private";
	o->tmpfs = st->tmpfs;
	o->n_tmpfs = 1;
	o->ulimits = st->ulimits;
	o->n_ulimits = 3;
	o->cap_drop = st->capdrop;
	o->n_cap_drop = 1;
	o->security_opt = st->secopt;
	o->n_security_opt = seccomp_opt ? 2 : 1;
	o->mounts = st->mounts;
	o->n_mounts = nm;
	o->runtime = cfg->runtime && cfg->runtime[0] ? cfg->runtime : NULL;
	o->log_driver = "none";
	return 0;
}

cJSON *runner_create_body(const struct config *cfg, const char *seccomp_opt,
                          const char *owner, const char *boot,
                          const struct runner_spec *spec)
{
	struct runner_opts_store st;
	struct docker_create_opts o;
	cJSON *b;

	if (runner_opts_fill(cfg, seccomp_opt, owner, boot, spec, &st, &o) < 0)
		return NULL;
	b = docker_create_body(&o);
	runner_opts_free(&st);
	return b;
}

/* ---- the runner object -------------------------------------------------- */

struct runner_waiter {
	struct runner_waiter *next;
	int fd; /* eventfd written when granted or refused */
	bool granted, refused;
};

struct runner_rm {
	struct runner_rm *next;
	char id[DOCKER_ID_LEN + 1];
	long long not_before; /* ms, for retries after a failure */
	unsigned tries;
};

/* Removal retries: every 5 s, then less often, for about ten minutes. */
#define RUNNER_RM_RETRY_MS 5000
#define RUNNER_RM_TRIES 20

struct runner {
	const struct config *cfg;
	struct docker *docker;
	char *seccomp_opt;
	char boot[17];
	char runs_dir[PATH_MAX];      /* SANDBOX_ROOT/runs */
	char runs_host_dir[PATH_MAX]; /* SANDBOX_HOST_PATH/runs */

	pthread_mutex_t lock;
	pthread_cond_t cond; /* housekeeping wake-ups, drain progress */
	struct catalog *catalog;
	runner_changed_fn changed_fn;
	void *changed_arg;
	unsigned running, queued;
	struct runner_waiter *qhead, *qtail;
	bool draining, stopping;
	unsigned long long runs_total;
	double avg_run_ms;

	pthread_mutex_t disc_lock; /* one discovery at a time */
	long long last_refresh_ms;
	int last_refresh_rc;
	char last_refresh_err[256];

	pthread_mutex_t rm_lock;
	pthread_cond_t rm_cond;
	struct runner_rm *rm_head, *rm_tail;
	bool rm_stop;

	pthread_t hk_thread, rm_thread;
	bool hk_started, rm_started;
};

struct runner_cancel {
	int fd;
	atomic_bool flag;
};

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

/* ---- box: one container ------------------------------------------------- */

struct runner_box {
	char run_id[17];
	char name[32];
	char id[DOCKER_ID_LEN + 1];
	char dir[PATH_MAX];      /* the code directory as we see it */
	char host_dir[PATH_MAX]; /* ... and as the Docker host sees it */
	bool dir_made;
};

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
static int runner_box_code(struct runner *r, struct runner_box *b,
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

/* Queues a container for removal by the remover thread. */
/* Appends m to the removal queue. Called with rm_lock held. */
static void runner_rm_append(struct runner *r, struct runner_rm *m)
{
	m->next = NULL;
	if (r->rm_tail)
		r->rm_tail->next = m;
	else
		r->rm_head = m;
	r->rm_tail = m;
}

static void runner_rm_queue(struct runner *r, const char *id)
{
	struct runner_rm *m = calloc(1, sizeof(*m));
	char err[256];

	if (!m) {
		/* No memory for the queue: remove it here, slowly. */
		if (docker_container_remove(r->docker, id, err, sizeof(err)) <
		    0)
			log_warnx("removing container %.12s: %s", id, err);
		return;
	}
	snprintf(m->id, sizeof(m->id), "%s", id);
	pthread_mutex_lock(&r->rm_lock);
	runner_rm_append(r, m);
	pthread_cond_signal(&r->rm_cond);
	pthread_mutex_unlock(&r->rm_lock);
}

/*
 * Removes queued containers. A removal that fails for a reason other than
 * "already gone" (the engine is down or busy) is retried later with
 * backoff, so a transient outage does not leave exited containers behind
 * until the reaper's deadline; at shutdown each gets one last try.
 */
static void *runner_rm_main(void *arg)
{
	struct runner *r = arg;
	char err[512];

	pthread_mutex_lock(&r->rm_lock);
	for (;;) {
		struct runner_rm *m = r->rm_head;
		long long now = mono_ms();
		int rc;

		if (!m) {
			if (r->rm_stop)
				break;
			pthread_cond_wait(&r->rm_cond, &r->rm_lock);
			continue;
		}
		if (m->not_before > now && !r->rm_stop) {
			struct timespec ts;

			mono_timespec(&ts, m->not_before);
			pthread_cond_timedwait(&r->rm_cond, &r->rm_lock, &ts);
			continue;
		}
		r->rm_head = m->next;
		if (!r->rm_head)
			r->rm_tail = NULL;
		pthread_mutex_unlock(&r->rm_lock);
		rc =
		    docker_container_remove(r->docker, m->id, err, sizeof(err));
		pthread_mutex_lock(&r->rm_lock);
		if (rc == 0 || rc == -ENOENT) {
			log_debug("removed container %.12s", m->id);
		} else if (!r->rm_stop && ++m->tries < RUNNER_RM_TRIES) {
			m->not_before =
			    mono_ms() +
			    (long long)RUNNER_RM_RETRY_MS * m->tries;
			log_info("removing container %.12s failed, retrying "
			         "later: %s",
			         m->id, err);
			runner_rm_append(r, m);
			continue;
		} else {
			log_warnx("removing container %.12s failed (the "
			          "reaper removes it after its deadline): %s",
			          m->id, err);
		}
		free(m);
	}
	pthread_mutex_unlock(&r->rm_lock);
	return NULL;
}

/* Ends a box: the code directory now, the container in the background. */
static void runner_box_release(struct runner *r, struct runner_box *b)
{
	if (b->id[0])
		runner_rm_queue(r, b->id);
	if (b->dir_made)
		runner_rmdir_flat(b->dir);
	b->id[0] = '\0';
	b->dir_made = false;
}

/* ---- slots: the concurrency cap and its queue ---------------------------- */

static unsigned runner_retry_estimate(struct runner *r)
{
	/* Every queued run ahead of a new caller needs one slot-time. */
	double waves =
	    (double)(r->queued + 1) /
	    (double)(r->cfg->max_concurrent ? r->cfg->max_concurrent : 1);
	double s = ceil(waves * r->avg_run_ms / 1000.0);

	return s < 1 ? 1 : s > 600 ? 600 : (unsigned)s;
}

/*
 * Takes a slot, waiting in FIFO order. 0, -EBUSY (queue full; *retry set),
 * -ECANCELED, -ESHUTDOWN.
 */
static int runner_slot_acquire(struct runner *r,
                               const struct runner_request *req,
                               unsigned *retry)
{
	struct runner_waiter w = {.fd = -1};
	int cancel_fd = req->cancel ? req->cancel->fd : -1;
	unsigned pos;
	int rc;

	pthread_mutex_lock(&r->lock);
	if (r->draining) {
		pthread_mutex_unlock(&r->lock);
		return -ESHUTDOWN;
	}
	if (r->running < r->cfg->max_concurrent && !r->qhead) {
		r->running++;
		pthread_mutex_unlock(&r->lock);
		return 0;
	}
	if (r->queued >= r->cfg->queue_length) {
		*retry = runner_retry_estimate(r);
		pthread_mutex_unlock(&r->lock);
		return -EBUSY;
	}
	w.fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (w.fd < 0) {
		rc = -errno;
		pthread_mutex_unlock(&r->lock);
		return rc;
	}
	if (r->qtail)
		r->qtail->next = &w;
	else
		r->qhead = &w;
	r->qtail = &w;
	pos = ++r->queued;
	pthread_mutex_unlock(&r->lock);

	if (req->on_event)
		req->on_event(req->event_arg, RUNNER_EVENT_QUEUED, pos);
	for (;;) {
		struct pollfd p[2] = {{.fd = w.fd, .events = POLLIN},
		                      {.fd = cancel_fd, .events = POLLIN}};
		int n = poll(p, cancel_fd >= 0 ? 2 : 1, -1);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 || p[0].revents || (cancel_fd >= 0 && p[1].revents))
			break;
	}
	pthread_mutex_lock(&r->lock);
	if (w.granted) {
		rc = 0;
	} else if (w.refused) {
		rc = -ESHUTDOWN;
	} else {
		/* Cancelled while waiting: leave the queue. */
		struct runner_waiter **pp = &r->qhead, *prev = NULL;

		while (*pp && *pp != &w) {
			prev = *pp;
			pp = &(*pp)->next;
		}
		if (*pp) {
			*pp = w.next;
			if (r->qtail == &w)
				r->qtail = prev;
			r->queued--;
		}
		rc = -ECANCELED;
	}
	pthread_mutex_unlock(&r->lock);
	close(w.fd);
	return rc;
}

/* Gives the slot to the first waiter, or frees it. */
static void runner_slot_release(struct runner *r, long long run_ms)
{
	uint64_t one = 1;

	pthread_mutex_lock(&r->lock);
	if (run_ms > 0) {
		r->avg_run_ms = 0.8 * r->avg_run_ms + 0.2 * (double)run_ms;
		r->runs_total++;
	}
	if (r->qhead) {
		struct runner_waiter *w = r->qhead;

		r->qhead = w->next;
		if (!r->qhead)
			r->qtail = NULL;
		r->queued--;
		w->granted = true;
		if (write(w->fd, &one, sizeof(one)) < 0)
			log_warn("waking a queued run");
	} else {
		r->running--;
		pthread_cond_broadcast(&r->cond);
	}
	pthread_mutex_unlock(&r->lock);
}

/* ---- one execution ------------------------------------------------------ */

/* Waits for the container to stop, in slices so cancellation is seen. */
static int runner_wait_exit(struct runner *r, const char *id,
                            long long deadline, const struct runner_cancel *cc,
                            bool *timed_out, bool *cancelled, char *err,
                            size_t errlen)
{
	long status;
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
		rc = docker_container_wait(
		    r->docker, id,
		    (unsigned)(left < RUNNER_WAIT_SLICE_MS
		                   ? left
		                   : RUNNER_WAIT_SLICE_MS),
		    &status, err, errlen);
		if (rc != -ETIMEDOUT)
			return rc;
	}
}

/* Kills a container whose stream is already closed; waits until it stops. */
static void runner_kill(struct runner *r, const char *id)
{
	char err[512];
	long status;
	int rc;

	rc = docker_container_kill(r->docker, id, "KILL", err, sizeof(err));
	if (rc < 0 && rc != -ESRCH && rc != -ENOENT) {
		log_warnx("killing container %.12s: %s", id, err);
		return;
	}
	rc = docker_container_wait(r->docker, id, docker_timeout_ms(r->docker),
	                           &status, err, sizeof(err));
	if (rc < 0)
		log_warnx("waiting for killed container %.12s: %s", id, err);
}

/* Fills a result's stream from its capture. */
static int runner_output(const struct attachio_capture *c,
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

/*
 * create (attached) -> start -> stream -> wait/kill -> inspect. Returns
 * -ENOENT when the image vanished before the container was made (the result
 * says so, and the caller may retry with a fresh catalog), else 0.
 */
static int runner_execute(struct runner *r, const struct runner_request *req,
                          const struct catalog_image *img,
                          struct runner_result *res)
{
	struct runner_box box;
	struct runner_spec spec;
	struct runner_opts_store st;
	struct docker_create_opts o;
	struct docker_attach *a = NULL;
	struct attachio_capture cap_out, cap_err;
	struct attachio_params x;
	struct docker_container_state cs;
	enum attachio_end end = ATTACHIO_BROKEN;
	char tenant_fp[13], msg[512] = "";
	bool timed_out = false, cancelled = false, opts = false;
	long long t_start = 0, t_end, ph[4] = {0, 0, 0, 0};
	int rc, ret = 0;

	memset(&box, 0, sizeof(box));
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
	if (hex_random(box.run_id, 8) < 0) {
		snprintf(res->message, sizeof(res->message),
		         "no randomness for a run id");
		goto out;
	}
	snprintf(box.name, sizeof(box.name), "mcpsd-%s", box.run_id);
	rc = runner_box_code(r, &box, img, req->code, req->code_len, msg,
	                     sizeof(msg));
	if (rc < 0) {
		snprintf(res->message, sizeof(res->message), "%s", msg);
		goto out;
	}
	if (req->tenant)
		log_fingerprint(req->tenant, strlen(req->tenant), tenant_fp);
	spec.image = img;
	spec.run_id = box.run_id;
	spec.code_host_dir = box.host_dir;
	spec.workspace_host_path = req->workspace_host_path;
	spec.file_base_url = req->file_base_url;
	spec.tenant_fp = req->tenant ? tenant_fp : NULL;
	spec.env = req->env;
	spec.n_env = req->n_env;
	spec.network = req->network;
	spec.timeout_s = res->timeout_s;
	spec.deadline = time(NULL) + 2 * (time_t)r->cfg->docker_timeout_s +
	                res->timeout_s + RUNNER_WATCHDOG_GRACE_S + 10;
	if (runner_opts_fill(r->cfg, r->seccomp_opt, r->cfg->instance_name,
	                     r->boot, &spec, &st, &o) < 0) {
		snprintf(res->message, sizeof(res->message), "out of memory");
		goto out;
	}
	opts = true;

	ph[0] = mono_ms();
	rc = docker_container_create(r->docker, box.name, &o, box.id, msg,
	                             sizeof(msg));
	if (rc == -ENOENT) {
		ret = -ENOENT;
		snprintf(res->message, sizeof(res->message),
		         "the runner image %s for %s is gone from the Docker "
		         "engine (%s); the runner list is being refreshed, "
		         "try again",
		         img->image, img->language, msg);
		goto out;
	}
	if (rc < 0) {
		snprintf(res->message, sizeof(res->message), "%s", msg);
		goto out;
	}
	snprintf(res->container, sizeof(res->container), "%.12s", box.id);
	ph[1] = mono_ms();
	rc = docker_container_attach(r->docker, box.id, &a, msg, sizeof(msg));
	if (rc < 0) {
		snprintf(res->message, sizeof(res->message), "%s", msg);
		goto out;
	}
	ph[2] = mono_ms();
	rc = docker_container_start(r->docker, box.id, msg, sizeof(msg));
	if (rc < 0) {
		snprintf(res->message, sizeof(res->message), "%s", msg);
		goto out;
	}
	t_start = mono_ms();
	runner_event(req, RUNNER_EVENT_STARTED, 0);

	memset(&x, 0, sizeof(x));
	x.in = req->stdin_data;
	x.in_len = req->stdin_data ? req->stdin_len : 0;
	x.deadline = t_start + (long long)res->timeout_s * 1000;
	x.cancel_fd = req->cancel ? req->cancel->fd : -1;
	x.max_total = r->cfg->output_max_bytes;
	x.out = &cap_out;
	x.err = &cap_err;
	end = attachio_run(a, &x, msg, sizeof(msg));
	ph[3] = mono_ms();

	/*
	 * Close the stream before anything else: kill hangs while an attach
	 * stream is open and unread (moby#41827).
	 */
	docker_attach_close(a);
	a = NULL;
	switch (end) {
	case ATTACHIO_EOF:
		rc = runner_wait_exit(r, box.id, x.deadline, req->cancel,
		                      &timed_out, &cancelled, msg, sizeof(msg));
		if (rc < 0) {
			snprintf(res->message, sizeof(res->message), "%s", msg);
			runner_kill(r, box.id);
			goto out;
		}
		if (timed_out || cancelled)
			runner_kill(r, box.id);
		break;
	case ATTACHIO_DEADLINE:
		timed_out = true;
		runner_kill(r, box.id);
		break;
	case ATTACHIO_CANCEL:
		cancelled = true;
		runner_kill(r, box.id);
		break;
	case ATTACHIO_LIMIT:
		runner_kill(r, box.id);
		break;
	case ATTACHIO_BROKEN:
		runner_kill(r, box.id);
		snprintf(res->message, sizeof(res->message), "%s", msg);
		break;
	}
	t_end = mono_ms();
	res->duration_ms = t_end - t_start;
	rc = docker_container_inspect(r->docker, box.id, &cs, msg, sizeof(msg));
	log_debug("run %.12s: create %lld ms, attach %lld ms, start %lld ms, "
	          "output %lld ms, exit %lld ms, inspect %lld ms",
	          box.id, ph[1] - ph[0], ph[2] - ph[1], t_start - ph[2],
	          ph[3] - t_start, t_end - ph[3], mono_ms() - t_end);
	if (rc < 0 && end != ATTACHIO_BROKEN) {
		snprintf(res->message, sizeof(res->message), "%s", msg);
		end = ATTACHIO_BROKEN;
	}
	if (rc == 0) {
		res->oom_killed = cs.oom_killed;
		if (!cs.running && !timed_out && !cancelled &&
		    end != ATTACHIO_LIMIT)
			res->exit_code = cs.exit_code;
	}
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
out:
	docker_attach_close(a);
	runner_box_release(r, &box);
	if (opts)
		runner_opts_free(&st);
	if (runner_output(&cap_out, &res->out) < 0 ||
	    runner_output(&cap_err, &res->err) < 0) {
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
	res->out.text = res->err.text = NULL;
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

static int runner_refuse(struct runner_result *res, int rc, const char *fmt,
                         ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(res->message, sizeof(res->message), fmt, ap);
	va_end(ap);
	res->status = RUNNER_ERROR;
	return rc;
}

int runner_run(struct runner *r, const struct runner_request *req,
               struct runner_result *res)
{
	const struct config *cfg = r->cfg;
	struct catalog *cat = NULL;
	const struct catalog_image *img;
	long long t0 = mono_ms(), t_slot;
	unsigned retry = 0;
	size_t env_total = 0;
	char langs[256], msg[256];
	int rc;

	memset(res, 0, sizeof(*res));
	res->exit_code = -1;
	res->timeout_s = req->timeout_s ? req->timeout_s : cfg->timeout_s;
	if (res->timeout_s > cfg->max_timeout_s)
		return runner_refuse(res, -EINVAL,
		                     "timeout_seconds %u is above the maximum "
		                     "of %u; use at most %u",
		                     req->timeout_s, cfg->max_timeout_s,
		                     cfg->max_timeout_s);
	if (!req->code || req->code_len > cfg->code_max_bytes)
		return runner_refuse(res, -EINVAL,
		                     "code is larger than %zu bytes; put data "
		                     "in a file under /data and read it from "
		                     "there",
		                     cfg->code_max_bytes);
	if (req->stdin_data && req->stdin_len > cfg->stdin_max_bytes)
		return runner_refuse(
		    res, -EINVAL,
		    "stdin is larger than %zu bytes; put it in "
		    "a file under /data instead",
		    cfg->stdin_max_bytes);
	for (size_t i = 0; i < req->n_env; i++) {
		const char *eq = strchr(req->env[i], '=');
		char name[RUNNER_ENV_NAME_MAX + 2];

		if (!eq || (size_t)(eq - req->env[i]) > RUNNER_ENV_NAME_MAX)
			return runner_refuse(res, -EINVAL,
			                     "environment entries must be "
			                     "NAME=value");
		snprintf(name, sizeof(name), "%.*s", (int)(eq - req->env[i]),
		         req->env[i]);
		if (runner_env_check(name, eq + 1, msg, sizeof(msg)) < 0)
			return runner_refuse(res, -EINVAL, "%s", msg);
		env_total += strlen(req->env[i]) + 1;
	}
	if (env_total > cfg->env_max_bytes)
		return runner_refuse(res, -EINVAL,
		                     "environment is larger than %zu bytes",
		                     cfg->env_max_bytes);
	if (req->network && !cfg->allow_network)
		return runner_refuse(res, -EPERM,
		                     "network access for runs is disabled by "
		                     "the server operator; run without "
		                     "\"network\" (the code cannot reach the "
		                     "internet)");

	cat = runner_catalog_get(r);
	img = catalog_find(cat, req->language);
	if (!img) {
		catalog_put(cat);
		if (runner_refresh(r, msg, sizeof(msg)) < 0)
			log_debug("refresh: %s", msg);
		cat = runner_catalog_get(r);
		img = catalog_find(cat, req->language);
	}
	if (!img) {
		catalog_languages(cat, langs, sizeof(langs));
		catalog_put(cat);
		return runner_refuse(res, -ENOENT,
		                     "no runner for language '%.40s'; "
		                     "available: %s",
		                     req->language ? req->language : "", langs);
	}
	runner_result_fill_image(res, img);

	rc = runner_slot_acquire(r, req, &retry);
	t_slot = mono_ms();
	res->queue_ms = t_slot - t0;
	if (rc == -EBUSY) {
		res->status = RUNNER_BUSY;
		res->retry_after_s = retry;
		snprintf(res->message, sizeof(res->message),
		         "all %u sandboxes are busy and %u runs are waiting; "
		         "retry in %u s",
		         cfg->max_concurrent, cfg->queue_length, retry);
		rc = 0;
		goto out;
	}
	if (rc == -ECANCELED) {
		res->status = RUNNER_CANCELLED;
		snprintf(res->message, sizeof(res->message),
		         "cancelled while waiting for a sandbox");
		rc = 0;
		goto out;
	}
	if (rc == -ESHUTDOWN) {
		rc = runner_refuse(res, rc,
		                   "the server is shutting down and accepts "
		                   "no new runs; retry on another instance or "
		                   "later");
		goto out;
	}
	if (rc < 0) {
		rc = runner_refuse(res, rc, "cannot wait for a sandbox: %s",
		                   strerror(-rc));
		goto out;
	}
	if (runner_cancel_requested(req->cancel)) {
		runner_slot_release(r, 0);
		res->status = RUNNER_CANCELLED;
		snprintf(res->message, sizeof(res->message),
		         "cancelled before the run started");
		rc = 0;
		goto out;
	}
	if (runner_execute(r, req, img, res) == -ENOENT) {
		/* Rebuilt or removed since discovery: look again, once. */
		const struct catalog_image *again;
		struct catalog *old = cat;

		if (runner_discover_now(r, msg, sizeof(msg)) < 0)
			log_debug("rediscovery: %s", msg);
		/* img points into the old catalog: keep it until compared. */
		cat = runner_catalog_get(r);
		again = catalog_find(cat, req->language);
		if (again && strcmp(again->image_id, img->image_id) == 0)
			again = NULL;
		img = again ? again : catalog_find(cat, req->language);
		if (!img) {
			/* The language vanished with the image. */
			catalog_put(old);
			runner_slot_release(r, mono_ms() - t_slot);
			log_info("run lang=%s: the runner image was removed "
			         "during the run",
			         req->language);
			rc = 0;
			goto out;
		}
		catalog_put(old);
		if (again) {
			long long queue_ms = res->queue_ms;

			runner_result_finish(res);
			memset(res, 0, sizeof(*res));
			res->exit_code = -1;
			res->queue_ms = queue_ms;
			res->timeout_s =
			    req->timeout_s ? req->timeout_s : cfg->timeout_s;
			runner_result_fill_image(res, img);
			(void)runner_execute(r, req, img, res);
		}
	}
	runner_slot_release(r, mono_ms() - t_slot);
	log_info("run %s lang=%s status=%s exit=%d duration=%lldms "
	         "queue=%lldms out=%zu err=%zu",
	         res->container[0] ? res->container : "-", img->language,
	         runner_status_name(res->status), res->exit_code,
	         res->duration_ms, res->queue_ms, res->out.total,
	         res->err.total);
	rc = 0;
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

	rc = docker_images_list(r->docker, "sandbox.runner=true", &list, err,
	                        errlen);
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

/* ---- reaping ------------------------------------------------------------ */

bool runner_reap_wanted(const cJSON *s, const char *owner, const char *boot,
                        time_t now)
{
	const cJSON *labels = cJSON_GetObjectItemCaseSensitive(s, "Labels");
	const char *managed = runner_label(labels, "sandbox.managed");
	const char *o = runner_label(labels, "sandbox.owner");
	const char *b = runner_label(labels, "sandbox.boot");
	const char *dl = runner_label(labels, "sandbox.deadline");

	if (!managed || strcmp(managed, "true") != 0)
		return false;
	if (o && owner && strcmp(o, owner) == 0 &&
	    (!b || !boot || strcmp(b, boot) != 0))
		return true;
	if (dl) {
		int64_t d;

		if (num_i64(dl, 0, INT64_MAX - RUNNER_REAP_GRACE_S, &d) == 0 &&
		    d + RUNNER_REAP_GRACE_S < (int64_t)now)
			return true;
	}
	return false;
}

int runner_reap(struct runner *r, char *err, size_t errlen)
{
	cJSON *list = NULL, *s;
	time_t now = time(NULL);
	char msg[512];
	int rc, removed = 0;

	rc = docker_containers_list(r->docker, "sandbox.managed=true", &list,
	                            err, errlen);
	if (rc < 0)
		return rc;
	cJSON_ArrayForEach (s, list) {
		const char *id = cJSON_GetStringValue(
		    cJSON_GetObjectItemCaseSensitive(s, "Id"));

		if (!id ||
		    !runner_reap_wanted(s, r->cfg->instance_name, r->boot, now))
			continue;
		rc = docker_container_remove(r->docker, id, msg, sizeof(msg));
		if (rc == 0 || rc == -ENOENT) {
			log_info("reaped leftover container %.12s", id);
			removed++;
		} else if (rc != -EBUSY) {
			log_warnx("reaping %.12s: %s", id, msg);
		}
	}
	cJSON_Delete(list);
	return removed;
}

/*
 * At shutdown: removes every container of this boot that is still there
 * (runs have ended by now; these are removals that kept failing), so a
 * clean stop leaves nothing behind.
 */
static void runner_sweep_own(struct runner *r)
{
	char label[96], err[512];
	cJSON *list = NULL, *s;

	snprintf(label, sizeof(label), "sandbox.boot=%s", r->boot);
	if (docker_containers_list(r->docker, label, &list, err, sizeof(err)) <
	    0)
		return;
	cJSON_ArrayForEach (s, list) {
		const char *id = cJSON_GetStringValue(
		    cJSON_GetObjectItemCaseSensitive(s, "Id"));

		if (id && docker_container_remove(r->docker, id, err,
		                                  sizeof(err)) < 0)
			log_warnx("removing container %.12s at shutdown: %s",
			          id, err);
	}
	cJSON_Delete(list);
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

/* ---- housekeeping thread ------------------------------------------------ */

static void *runner_hk_main(void *arg)
{
	struct runner *r = arg;
	long long next_disc = mono_ms() + r->cfg->discovery_interval_s * 1000LL;
	long long next_reap = mono_ms() + r->cfg->reap_interval_s * 1000LL;
	char err[512];

	pthread_mutex_lock(&r->lock);
	while (!r->stopping) {
		long long now = mono_ms();
		long long next = next_disc < next_reap ? next_disc : next_reap;
		bool disc, reap;

		if (now < next) {
			struct timespec ts;

			mono_timespec(&ts, next);
			pthread_cond_timedwait(&r->cond, &r->lock, &ts);
			continue;
		}
		disc = now >= next_disc;
		reap = now >= next_reap;
		pthread_mutex_unlock(&r->lock);
		if (disc) {
			if (runner_discover_now(r, err, sizeof(err)) < 0)
				log_debug("discovery: %s", err);
			next_disc =
			    mono_ms() + r->cfg->discovery_interval_s * 1000LL;
		}
		if (reap) {
			if (runner_reap(r, err, sizeof(err)) < 0)
				log_debug("reaper: %s", err);
			runner_sweep_runs(r);
			next_reap =
			    mono_ms() + r->cfg->reap_interval_s * 1000LL;
		}
		pthread_mutex_lock(&r->lock);
	}
	pthread_mutex_unlock(&r->lock);
	return NULL;
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

int runner_create(const struct config *cfg, struct runner **out, char *err,
                  size_t errlen)
{
	struct runner *r;
	char msg[512];
	int rc, n;

	*out = NULL;
	r = calloc(1, sizeof(*r));
	if (!r) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	r->cfg = cfg;
	r->avg_run_ms = RUNNER_AVG_INIT_MS;
	pthread_mutex_init(&r->lock, NULL);
	pthread_mutex_init(&r->disc_lock, NULL);
	pthread_mutex_init(&r->rm_lock, NULL);
	mono_cond_init(&r->cond);
	mono_cond_init(&r->rm_cond);

	rc = hex_random(r->boot, 8);
	if (rc < 0) {
		snprintf(err, errlen, "getrandom failed: %s", strerror(-rc));
		goto fail;
	}
	n = snprintf(r->runs_dir, sizeof(r->runs_dir), "%s/runs",
	             cfg->sandbox_root);
	if (n < 0 || (size_t)n >= sizeof(r->runs_dir) - 64 ||
	    (size_t)snprintf(
	        r->runs_host_dir, sizeof(r->runs_host_dir), "%s/runs",
	        cfg->sandbox_host_path && cfg->sandbox_host_path[0]
	            ? cfg->sandbox_host_path
	            : cfg->sandbox_root) >= sizeof(r->runs_host_dir) - 64) {
		snprintf(err, errlen, "SANDBOX_ROOT is too long");
		rc = -ENAMETOOLONG;
		goto fail;
	}
	rc = runner_mkdir(cfg->sandbox_root, 0711, err, errlen);
	if (rc == 0)
		rc = runner_mkdir(r->runs_dir, 0700, err, errlen);
	if (rc < 0)
		goto fail;
	rc = seccomp_security_opt(&r->seccomp_opt);
	if (rc < 0) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	rc = docker_create(cfg->docker_host, cfg->docker_timeout_s, &r->docker,
	                   err, errlen);
	if (rc < 0)
		goto fail;
	rc = catalog_build(NULL, &r->catalog);
	if (rc < 0) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	log_info("runner boot id %s, instance '%s', %u at once, queue %u",
	         r->boot, cfg->instance_name, cfg->max_concurrent,
	         cfg->queue_length);
	/* Both retry on their own threads when the engine is down now. */
	if (runner_refresh(r, msg, sizeof(msg)) < 0)
		log_warnx("runner discovery: %s", msg);
	rc = runner_reap(r, msg, sizeof(msg));
	if (rc < 0)
		log_warnx("start-up reaping: %s", msg);
	runner_sweep_runs(r);

	rc = pthread_create(&r->rm_thread, NULL, runner_rm_main, r);
	if (rc != 0) {
		snprintf(err, errlen, "pthread_create: %s", strerror(rc));
		rc = -rc;
		goto fail;
	}
	r->rm_started = true;
	rc = pthread_create(&r->hk_thread, NULL, runner_hk_main, r);
	if (rc != 0) {
		snprintf(err, errlen, "pthread_create: %s", strerror(rc));
		rc = -rc;
		goto fail;
	}
	r->hk_started = true;
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
	if (r->hk_started) {
		pthread_mutex_lock(&r->lock);
		r->stopping = true;
		pthread_cond_broadcast(&r->cond);
		pthread_mutex_unlock(&r->lock);
		pthread_join(r->hk_thread, NULL);
	}
	if (r->rm_started) {
		/* The remover empties its queue before it stops. */
		pthread_mutex_lock(&r->rm_lock);
		r->rm_stop = true;
		pthread_cond_signal(&r->rm_cond);
		pthread_mutex_unlock(&r->rm_lock);
		pthread_join(r->rm_thread, NULL);
	}
	runner_sweep_own(r);
	catalog_put(r->catalog);
	docker_destroy(r->docker);
	free(r->seccomp_opt);
	pthread_cond_destroy(&r->cond);
	pthread_cond_destroy(&r->rm_cond);
	pthread_mutex_destroy(&r->lock);
	pthread_mutex_destroy(&r->disc_lock);
	pthread_mutex_destroy(&r->rm_lock);
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
	long long end = mono_ms() + timeout_ms;
	uint64_t one = 1;
	unsigned left;

	pthread_mutex_lock(&r->lock);
	r->draining = true;
	while (r->qhead) {
		struct runner_waiter *w = r->qhead;

		r->qhead = w->next;
		r->queued--;
		w->refused = true;
		if (write(w->fd, &one, sizeof(one)) < 0)
			log_warn("refusing a queued run");
	}
	r->qtail = NULL;
	while (r->running > 0) {
		struct timespec ts;
		long long now = mono_ms();

		if (now >= end)
			break;
		mono_timespec(&ts, end);
		pthread_cond_timedwait(&r->cond, &r->lock, &ts);
	}
	left = r->running;
	pthread_mutex_unlock(&r->lock);
	return left;
}

void runner_stats(struct runner *r, struct runner_stats *out)
{
	pthread_mutex_lock(&r->lock);
	out->running = r->running;
	out->queued = r->queued;
	out->max_concurrent = r->cfg->max_concurrent;
	out->queue_length = r->cfg->queue_length;
	out->runs_total = r->runs_total;
	out->runners = r->catalog->n;
	out->draining = r->draining;
	out->avg_run_ms = (unsigned)r->avg_run_ms;
	pthread_mutex_unlock(&r->lock);
}

struct docker *runner_docker(struct runner *r)
{
	return r->docker;
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
	struct docker_health dh;
	struct runner_stats rs;
	cJSON *d, *runs;

	docker_health(r->docker, &dh);
	runner_stats(r, &rs);
	d = cJSON_AddObjectToObject(health, "docker");
	if (d) {
		cJSON_AddBoolToObject(d, "reachable", dh.reachable);
		cJSON_AddStringToObject(d, "server_version", dh.server_version);
		cJSON_AddStringToObject(d, "api_version", dh.api_version);
		if (dh.last_error[0])
			cJSON_AddStringToObject(d, "last_error", dh.last_error);
		cJSON_AddNumberToObject(d, "last_ok", (double)dh.last_ok);
	}
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
	return dh.reachable && rs.runners > 0;
}
