/* SPDX-License-Identifier: MIT */
/*
 * backend_docker: boxes as containers on the local Docker engine; see
 * backend_docker.h. The backend's own state is the client, the seccomp
 * profile, the pool directory of hand-overs (docker_handover.h, prepared
 * once before boxes use it), and the queue of containers to remove,
 * guarded by rm_lock and drained by one thread.
 */
#include "backend/docker/backend_docker.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/docker/cgroup_usage.h"
#include "backend/docker/docker_channel.h"
#include "backend/docker/docker_egress.h"
#include "backend/docker/docker_handover.h"
#include "backend/docker/docker_stream.h"
#include "backend/seccomp.h"
#include "util/log.h"
#include "util/mono.h"
#include "util/num.h"

#define DK_CHUNK (64 * 1024)
/* Removal retries: every 5 s, then less often, for about ten minutes. */
#define DK_RM_RETRY_MS 5000
#define DK_RM_TRIES 20
#define DK_RM_UNSURE_TRIES 6 /* about 80 s of looking (see struct dk_rm) */

struct dk_rm {
	struct dk_rm *next;
	char id[DOCKER_ID_LEN + 1]; /* or the name it was created by */
	char cg_name[CGROUP_USAGE_NAME_MAX + 1]; /* its usage parent, or "" */
	long long not_before; /* mono_ms, for retries after a failure */
	unsigned tries;
	/*
	 * A create whose answer was lost (the engine hung or went away): the
	 * container may exist, or appear when the engine gets to it, so "no
	 * such container" is tried again DK_RM_UNSURE_TRIES times.
	 */
	bool unsure;
};

struct dk_backend {
	struct backend base;
	const struct config *cfg;
	struct docker *docker;
	char *seccomp_opt;
	char boot[17];
	struct docker_handover handover;
	struct docker_channel_dir chan; /* SANDBOX_WARM_CHANNEL=socket */
	/* SANDBOX_WARM_CHANNEL=auto: decided at the first warm box, for good
	 * (the agent's command line and the box's mounts must agree). */
	pthread_mutex_t chan_lock;
	bool chan_decided, chan_socket;

	pthread_mutex_t rm_lock;
	pthread_cond_t rm_cond;
	struct dk_rm *rm_head; /* in the order of not_before */
	bool rm_stop;
	pthread_t rm_thread;
	bool rm_started;

	/* Usage of measured boxes (cgroup_usage.h), probed at the first one. */
	pthread_mutex_t cg_lock;
	bool cg_probed;
	enum cgroup_usage_mode cg_mode;
};

struct dk_box {
	struct box base;
	struct dk_backend *be;
	char cid[DOCKER_ID_LEN + 1];
	char cg_name[CGROUP_USAGE_NAME_MAX +
	             1];                  /* measured: its parent's name */
	struct docker_handover_slot slot; /* spec.handover's */
	struct docker_channel_slot chan;  /* spec.channel's */
	struct cgroup_usage_files cgf;    /* cg_name's, kept open */
};

struct dk_stream {
	struct box_stream base;
	struct docker_attach *a;
	struct docker_stream ds;
	box_output_fn fn; /* during a pump */
	void *arg;
	int error; /* sticky */
	char *buf;
};

static const struct box_stream_impl dk_stream_impl;

static struct dk_backend *dk_of(struct backend *be)
{
	return (struct dk_backend *)be;
}

static const char *dk_channel_path(struct backend *base);

/* ---- the create body ---------------------------------------------------- */

/* Storage for what a struct docker_create_opts points to. */
struct dk_opts_store {
	struct docker_kv labels[BOX_LABELS_MAX + 4];
	char deadline[24];
	char user[32];
	struct docker_kv tmpfs[1];
	char tmpfs_opts[96];
	struct docker_ulimit ulimits[3];
	const char *secopt[2];
	const char *capdrop[1];
	/* + spec.handover, + spec.channel */
	struct docker_mount mounts[BOX_MOUNTS_MAX + 2];
	const char *dns[1];
};

static int dk_opts_fill(const struct config *cfg, const char *seccomp_opt,
                        const char *owner, const char *boot,
                        const struct box_spec *sp, struct dk_opts_store *st,
                        struct docker_create_opts *o)
{
	size_t nl = 0;
	unsigned mem_mb = sp->memory_mb ? sp->memory_mb : cfg->memory_mb;
	double cpus = sp->cpus > 0 ? sp->cpus : cfg->cpus;

	memset(st, 0, sizeof(*st));
	memset(o, 0, sizeof(*o));
	if (sp->n_cmd == 0 || sp->n_labels > BOX_LABELS_MAX ||
	    sp->n_mounts > BOX_MOUNTS_MAX || !sp->image)
		return -EINVAL;
	snprintf(st->deadline, sizeof(st->deadline), "%lld",
	         (long long)sp->deadline);
	st->labels[nl++] = (struct docker_kv){"sandbox.managed", "true"};
	st->labels[nl++] = (struct docker_kv){"sandbox.owner", owner};
	st->labels[nl++] = (struct docker_kv){"sandbox.boot", boot};
	st->labels[nl++] = (struct docker_kv){"sandbox.deadline", st->deadline};
	for (size_t i = 0; i < sp->n_labels; i++)
		st->labels[nl++] =
		    (struct docker_kv){sp->labels[i].key, sp->labels[i].value};

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
	for (size_t i = 0; i < sp->n_mounts; i++)
		st->mounts[i] = (struct docker_mount){
		    sp->mounts[i].source, sp->mounts[i].target,
		    sp->mounts[i].read_only, sp->mounts[i].follow_host_mounts};

	o->image = sp->image;
	o->cmd = sp->cmd;
	o->n_cmd = sp->n_cmd;
	o->env = sp->env;
	o->n_env = sp->n_env;
	o->labels = st->labels;
	o->n_labels = nl;
	o->user = st->user;
	o->working_dir = sp->workdir;
	o->open_stdin = sp->open_stdin;
	o->memory_bytes = (long long)mem_mb * 1024 * 1024;
	o->memory_swap_bytes = o->memory_bytes; /* unset swap doubles it */
	o->nano_cpus = llround(cpus * 1e9);
	o->pids_limit = cfg->pids_limit;
	o->shm_size_bytes = (long long)cfg->tmp_mb * 1024 * 1024;
	o->oom_score_adj = 1000; /* under host pressure, sandboxes go first */
	if (sp->egress && sp->egress->network) {
		/*
		 * The run's own egress network, where only the proxy is. The
		 * engine's DNS forwards outside names to a resolver that
		 * cannot answer (nothing listens on the box's loopback port
		 * 53, and it cannot bind it): names resolve at the proxy only.
		 */
		o->network_mode = sp->egress->network;
		o->network_ip = sp->egress->ip;
		st->dns[0] = "127.0.0.1";
		o->dns = st->dns;
		o->n_dns = 1;
	} else if (sp->install && cfg->packages) {
		o->network_mode = cfg->packages_network;
	} else if (sp->joinable) {
		/*
		 * A container made with NetworkMode none can never join a
		 * network: this one is made on the proxy's network and taken
		 * off it before it starts (dk_box_create), so it starts with
		 * loopback only and can join an egress network later.
		 */
		o->network_mode = cfg->egress_proxy_network;
	} else {
		o->network_mode =
		    sp->network && cfg->allow_network ? "bridge" : "none";
	}
	o->readonly_rootfs = true;
	o->init = !sp->main_is_init;
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
	o->n_mounts = sp->n_mounts;
	o->runtime = cfg->runtime && cfg->runtime[0] ? cfg->runtime : NULL;
	o->log_driver = "none";
	return 0;
}

cJSON *backend_docker_create_body(const struct config *cfg,
                                  const char *seccomp_opt, const char *owner,
                                  const char *boot, const struct box_spec *spec)
{
	struct dk_opts_store st;
	struct docker_create_opts o;

	if (dk_opts_fill(cfg, seccomp_opt, owner, boot, spec, &st, &o) < 0)
		return NULL;
	return docker_create_body(&o);
}

/* ---- removal ------------------------------------------------------------ */

/* Appends m to the removal queue. Called with rm_lock held. */
/*
 * Queues m in the order of not_before (after those due at the same time),
 * so that an entry waiting to be retried never holds up one due now.
 */
static void dk_rm_insert(struct dk_backend *be, struct dk_rm *m)
{
	struct dk_rm **pp = &be->rm_head;

	while (*pp && (*pp)->not_before <= m->not_before)
		pp = &(*pp)->next;
	m->next = *pp;
	*pp = m;
}

/* The probed mode of usage measurement; CGROUP_USAGE_OFF before the probe. */
static enum cgroup_usage_mode dk_cg_probed(struct dk_backend *be)
{
	enum cgroup_usage_mode mode;

	pthread_mutex_lock(&be->cg_lock);
	mode = be->cg_probed ? be->cg_mode : CGROUP_USAGE_OFF;
	pthread_mutex_unlock(&be->cg_lock);
	return mode;
}

/* Removes a removed container's usage parent (cgroup_usage.h). */
static void dk_cg_remove(struct dk_backend *be, const char *cg_name)
{
	if (cg_name[0] && cgroup_usage_remove(be->cfg->cgroup_fs,
	                                      dk_cg_probed(be), cg_name) < 0)
		log_debug("cgroup %s still busy; the reaper removes it later",
		          cg_name);
}

static void dk_rm_queue(struct dk_backend *be, const char *id,
                        const char *cg_name, bool unsure)
{
	struct dk_rm *m = calloc(1, sizeof(*m));
	char err[256];

	if (!m) {
		/* No memory for the queue: remove it here, slowly. */
		if (docker_container_remove(be->docker, id, err, sizeof(err)) <
		    0)
			log_warnx("removing container %.12s: %s", id, err);
		else
			dk_cg_remove(be, cg_name);
		return;
	}
	snprintf(m->id, sizeof(m->id), "%s", id);
	snprintf(m->cg_name, sizeof(m->cg_name), "%s", cg_name);
	m->unsure = unsure;
	if (unsure)
		m->not_before = mono_ms() + DK_RM_RETRY_MS;
	pthread_mutex_lock(&be->rm_lock);
	dk_rm_insert(be, m);
	pthread_cond_signal(&be->rm_cond);
	pthread_mutex_unlock(&be->rm_lock);
}

/*
 * Removes queued containers. A removal that fails for a reason other than
 * "already gone" (the engine is down or busy) is retried later with
 * backoff, so a transient outage does not leave exited containers behind
 * until the reaper's deadline; at shutdown each gets one last try.
 */
static void *dk_rm_main(void *arg)
{
	struct dk_backend *be = arg;
	char err[512];

	pthread_mutex_lock(&be->rm_lock);
	for (;;) {
		struct dk_rm *m = be->rm_head;
		int rc;

		if (!m) {
			if (be->rm_stop)
				break;
			pthread_cond_wait(&be->rm_cond, &be->rm_lock);
			continue;
		}
		if (m->not_before > mono_ms() && !be->rm_stop) {
			struct timespec ts;

			mono_timespec(&ts, m->not_before);
			pthread_cond_timedwait(&be->rm_cond, &be->rm_lock, &ts);
			continue;
		}
		be->rm_head = m->next;
		pthread_mutex_unlock(&be->rm_lock);
		rc = docker_container_remove(be->docker, m->id, err,
		                             sizeof(err));
		pthread_mutex_lock(&be->rm_lock);
		if (rc == -ENOENT && m->unsure && !be->rm_stop &&
		    ++m->tries < DK_RM_UNSURE_TRIES) {
			m->not_before =
			    mono_ms() + (long long)DK_RM_RETRY_MS * m->tries;
			dk_rm_insert(be, m);
			continue;
		}
		if (rc == 0 || rc == -ENOENT) {
			if (rc == 0 && m->unsure)
				log_info("removed container %s, created by an "
				         "engine that did not answer in time",
				         m->id);
			log_debug("removed container %.12s", m->id);
			dk_cg_remove(be, m->cg_name);
		} else if (!be->rm_stop && ++m->tries < DK_RM_TRIES) {
			m->not_before =
			    mono_ms() + (long long)DK_RM_RETRY_MS * m->tries;
			log_info("removing container %.12s failed, retrying "
			         "later: %s",
			         m->id, err);
			dk_rm_insert(be, m);
			continue;
		} else {
			log_warnx("removing container %.12s failed (the "
			          "reaper removes it after its deadline): %s",
			          m->id, err);
		}
		free(m);
	}
	pthread_mutex_unlock(&be->rm_lock);
	return NULL;
}

/* ---- boxes -------------------------------------------------------------- */

/*
 * Whether boxes can be measured, probed once (again after a failure to
 * reach the engine): the cgroup filesystem and the engine's driver.
 */
static enum cgroup_usage_mode dk_cg_mode(struct dk_backend *be)
{
	enum cgroup_usage_mode mode;
	cJSON *info = NULL;
	char err[256], why[256];

	pthread_mutex_lock(&be->cg_lock);
	if (be->cg_probed) {
		mode = be->cg_mode;
		pthread_mutex_unlock(&be->cg_lock);
		return mode;
	}
	pthread_mutex_unlock(&be->cg_lock);
	if (!be->cfg->cgroup_fs[0]) {
		mode = cgroup_usage_probe("", NULL, why, sizeof(why));
	} else if (docker_engine_info(be->docker, &info, err, sizeof(err)) <
	           0) {
		log_debug("usage: engine info: %s", err);
		return CGROUP_USAGE_OFF; /* ask again with the next box */
	} else {
		mode = cgroup_usage_probe(
		    be->cfg->cgroup_fs,
		    cJSON_GetStringValue(
		        cJSON_GetObjectItemCaseSensitive(info, "CgroupDriver")),
		    why, sizeof(why));
		cJSON_Delete(info);
	}
	if (mode == CGROUP_USAGE_OFF)
		log_info("one-off runs report no peak memory and CPU time: %s",
		         why);
	else
		log_info("one-off runs are measured in cgroup v%d parents "
		         "under %s/.../" CGROUP_USAGE_DIR,
		         mode == CGROUP_USAGE_V1 ? 1 : 2, be->cfg->cgroup_fs);
	pthread_mutex_lock(&be->cg_lock);
	be->cg_probed = true;
	be->cg_mode = mode;
	pthread_mutex_unlock(&be->cg_lock);
	return mode;
}

static void dk_box_release(struct box *base);

static int dk_box_create(struct backend *base, const struct box_spec *spec,
                         struct box **out, char *err, size_t errlen)
{
	struct dk_backend *be = dk_of(base);
	struct dk_opts_store st;
	struct docker_create_opts o;
	struct dk_box *b;
	char parent[CGROUP_USAGE_NAME_MAX + 32], pool_host[PATH_MAX];
	char chan_host[PATH_MAX];
	int rc;

	*out = NULL;
	if (dk_opts_fill(be->cfg, be->seccomp_opt, be->cfg->instance_name,
	                 be->boot, spec, &st, &o) < 0) {
		snprintf(err, errlen, "a box spec the engine cannot carry");
		return -EINVAL;
	}
	b = calloc(1, sizeof(*b));
	if (!b) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	b->chan.dir_fd = b->chan.listen_fd = -1;
	cgroup_usage_files_init(&b->cgf);
	/* Empty until box_hand_over mounts a directory on pool/<name>. */
	if (spec->handover) {
		rc = docker_handover_slot(&be->handover, spec->name, &b->slot,
		                          pool_host, sizeof(pool_host), err,
		                          errlen);
		if (rc < 0) {
			free(b);
			return rc;
		}
		st.mounts[o.n_mounts++] = (struct docker_mount){
		    pool_host, spec->handover, false, true};
	}
	/* The agent connects out to it: read-only is enough for connect. */
	if (spec->channel && dk_channel_path(base)) {
		rc = docker_channel_slot_open(&be->chan, spec->name, &b->chan,
		                              chan_host, sizeof(chan_host), err,
		                              errlen);
		if (rc < 0) {
			docker_handover_release(&b->slot);
			free(b);
			return rc;
		}
		st.mounts[o.n_mounts++] = (struct docker_mount){
		    chan_host, DOCKER_CHANNEL_DIR, true, false};
	}
	if (spec->measure && spec->name && dk_cg_mode(be) != CGROUP_USAGE_OFF &&
	    cgroup_usage_parent(spec->name, parent, sizeof(parent)) == 0) {
		o.cgroup_parent = parent;
		snprintf(b->cg_name, sizeof(b->cg_name), "%s", spec->name);
	}
	rc = docker_container_create(be->docker, spec->name, &o, b->cid, err,
	                             errlen);
	if (rc < 0) {
		/*
		 * No answer (a hung engine, a connection that broke): the
		 * engine may still make the container. It has a name: remove
		 * it by that name once it shows up (looked for about 80 s).
		 */
		if ((rc == -ETIMEDOUT || rc == -ECONNREFUSED) && spec->name)
			dk_rm_queue(be, spec->name, b->cg_name, true);
		docker_handover_release(&b->slot);
		docker_channel_slot_release(&b->chan);
		free(b);
		return rc;
	}
	b->base.impl = &backend_docker_impl;
	b->base.be = base;
	b->be = be;
	snprintf(b->base.id, sizeof(b->base.id), "%.12s", b->cid);
	if (spec->joinable && !spec->egress) {
		/* Off its network before it ever starts (dk_opts_fill). */
		rc = docker_network_disconnect(be->docker, o.network_mode,
		                               b->cid, err, errlen);
		if (rc < 0) {
			dk_box_release(&b->base);
			return rc == -ENOENT ? -EIO : rc;
		}
	}
	*out = &b->base;
	return 0;
}

static int dk_box_attach(struct box *base, struct box_stream **out, char *err,
                         size_t errlen)
{
	struct dk_box *b = (struct dk_box *)base;
	struct dk_stream *s = calloc(1, sizeof(*s));
	int rc;

	*out = NULL;
	if (s)
		s->buf = malloc(DK_CHUNK);
	if (!s || !s->buf) {
		if (s)
			free(s->buf);
		free(s);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	rc = docker_container_attach(b->be->docker, b->cid, &s->a, err, errlen);
	if (rc < 0) {
		free(s->buf);
		free(s);
		return rc;
	}
	s->base.impl = &dk_stream_impl;
	*out = &s->base;
	return 0;
}

/*
 * The socket the agent connects to when the box was made with one
 * (docker_channel.h), else the attach stream with stdin, which lasts as
 * long as the container.
 */
static int dk_box_channel(struct box *base, struct box_stream **out, char *err,
                          size_t errlen)
{
	struct dk_box *b = (struct dk_box *)base;

	if (b->chan.listen_fd < 0)
		return dk_box_attach(base, out, err, errlen);
	return docker_channel_stream(&b->chan, b->cid, b->be->cfg->sandbox_uid,
	                             out, err, errlen);
}

static int dk_box_hand_over(struct box *base, int dirfd, char *err,
                            size_t errlen)
{
	return docker_handover_give(&((struct dk_box *)base)->slot, dirfd, err,
	                            errlen);
}

static bool dk_box_intact(const struct box *base, char *detail, size_t len)
{
	return docker_handover_intact(&((const struct dk_box *)base)->slot,
	                              detail, len);
}

static int dk_box_start(struct box *base, char *err, size_t errlen)
{
	struct dk_box *b = (struct dk_box *)base;

	return docker_container_start(b->be->docker, b->cid, err, errlen);
}

static int dk_box_wait(struct box *base, unsigned timeout_ms, char *err,
                       size_t errlen)
{
	struct dk_box *b = (struct dk_box *)base;
	long status;

	return docker_container_wait(b->be->docker, b->cid, timeout_ms, &status,
	                             err, errlen);
}

static int dk_box_inspect(struct box *base, struct box_state *out, char *err,
                          size_t errlen)
{
	struct dk_box *b = (struct dk_box *)base;
	struct docker_container_state cs;
	int rc;

	memset(out, 0, sizeof(*out));
	rc = docker_container_inspect(b->be->docker, b->cid, &cs, err, errlen);
	if (rc < 0)
		return rc;
	out->running = cs.running;
	out->oom_killed = cs.oom_killed;
	out->exit_code = cs.exit_code;
	snprintf(out->status, sizeof(out->status), "%s", cs.status);
	snprintf(out->error, sizeof(out->error), "%s", cs.error);
	return 0;
}

static int dk_box_signal(struct box *base, const char *sig, char *err,
                         size_t errlen)
{
	struct dk_box *b = (struct dk_box *)base;

	return docker_container_kill(b->be->docker, b->cid, sig, err, errlen);
}

static int dk_box_usage(struct box *base, struct box_usage *out, char *err,
                        size_t errlen)
{
	struct dk_box *b = (struct dk_box *)base;
	int rc;

	if (!b->cg_name[0]) {
		snprintf(err, errlen, "box %s was not measured", base->id);
		return -ENOTSUP;
	}
	rc = cgroup_usage_read(b->be->cfg->cgroup_fs, dk_cg_probed(b->be),
	                       b->cg_name, &b->cgf, out);
	if (rc == -ENOENT)
		snprintf(err, errlen,
		         "the engine did not make box %s's cgroup under %s",
		         base->id, b->be->cfg->cgroup_fs);
	else if (rc < 0)
		snprintf(err, errlen, "cannot read box %s's usage: %s",
		         base->id, strerror(-rc));
	return rc;
}

static int dk_box_limits(struct box *base, unsigned memory_mb, double cpus,
                         char *err, size_t errlen)
{
	struct dk_box *b = (struct dk_box *)base;

	return docker_container_update(b->be->docker, b->cid,
	                               (long long)memory_mb * 1024 * 1024,
	                               llround(cpus * 1e9), err, errlen);
}

static void dk_box_release(struct box *base)
{
	struct dk_box *b = (struct dk_box *)base;

	/* Unmounted now: the caller lets go of what it handed over next. */
	docker_handover_release(&b->slot);
	docker_channel_slot_release(&b->chan);
	cgroup_usage_files_close(&b->cgf); /* before its parent is removed */
	dk_rm_queue(b->be, b->cid, b->cg_name, false);
	free(b);
}

/* ---- a box's stream ----------------------------------------------------- */

static int dk_stream_fd(const struct box_stream *base)
{
	return docker_attach_fd(((const struct dk_stream *)base)->a);
}

static bool dk_stream_pending(const struct box_stream *base)
{
	return docker_attach_pending(((const struct dk_stream *)base)->a);
}

static int dk_stream_frame(void *arg, enum docker_stream_id id, const char *p,
                           size_t n)
{
	struct dk_stream *s = arg;

	return s->fn(
	    s->arg,
	    id == DOCKER_STREAM_STDERR || id == DOCKER_STREAM_SYSTEM ? 2 : 1, p,
	    n);
}

static int dk_stream_pump(struct box_stream *base, box_output_fn fn, void *arg,
                          char *err, size_t errlen)
{
	struct dk_stream *s = (struct dk_stream *)base;
	ssize_t got;
	int rc;

	if (s->error)
		return s->error;
	if (!s->ds.fn)
		docker_stream_init(&s->ds, 0, dk_stream_frame, s);
	got = docker_attach_read(s->a, s->buf, DK_CHUNK);
	if (got == -EAGAIN)
		return -EAGAIN;
	if (got < 0) {
		snprintf(err, errlen,
		         "reading the container's output failed: %s",
		         strerror((int)-got));
		return s->error = (int)got;
	}
	if (got == 0) {
		rc = docker_stream_end(&s->ds);
		if (rc < 0) {
			snprintf(err, errlen, "container output stream: %s",
			         docker_stream_strerror(rc));
			return s->error = rc;
		}
		return 0;
	}
	s->fn = fn;
	s->arg = arg;
	rc = docker_stream_feed(&s->ds, s->buf, (size_t)got);
	s->fn = NULL;
	if (rc == -EPROTO || rc == -EMSGSIZE) {
		snprintf(err, errlen, "container output stream: %s",
		         docker_stream_strerror(rc));
		return s->error = rc;
	}
	if (rc < 0)
		return s->error = rc; /* the callback's own value */
	return 1;
}

static ssize_t dk_stream_write(struct box_stream *base, const void *p, size_t n)
{
	return docker_attach_write(((struct dk_stream *)base)->a, p, n);
}

static void dk_stream_close_write(struct box_stream *base)
{
	docker_attach_close_write(((struct dk_stream *)base)->a);
}

static void dk_stream_close(struct box_stream *base)
{
	struct dk_stream *s = (struct dk_stream *)base;

	docker_attach_close(s->a);
	free(s->buf);
	free(s);
}

static const struct box_stream_impl dk_stream_impl = {
    .fd = dk_stream_fd,
    .pending = dk_stream_pending,
    .pump = dk_stream_pump,
    .write = dk_stream_write,
    .close_write = dk_stream_close_write,
    .close = dk_stream_close,
};

/* ---- the engine --------------------------------------------------------- */

static int dk_images(struct backend *base, const char *label, cJSON **out,
                     char *err, size_t errlen)
{
	return docker_images_list(dk_of(base)->docker, label, out, err, errlen);
}

static const char *dk_label(const cJSON *labels, const char *name)
{
	return cJSON_GetStringValue(
	    cJSON_GetObjectItemCaseSensitive(labels, name));
}

bool backend_docker_reap_wanted(const cJSON *s, const char *owner,
                                const char *boot, time_t now, unsigned grace_s)
{
	const cJSON *labels = cJSON_GetObjectItemCaseSensitive(s, "Labels");
	const char *managed = dk_label(labels, "sandbox.managed");
	const char *o = dk_label(labels, "sandbox.owner");
	const char *b = dk_label(labels, "sandbox.boot");
	const char *dl = dk_label(labels, "sandbox.deadline");
	int64_t d;

	if (!managed || strcmp(managed, "true") != 0)
		return false;
	if (o && owner && strcmp(o, owner) == 0 &&
	    (!b || !boot || strcmp(b, boot) != 0))
		return true;
	return dl && num_i64(dl, 0, INT64_MAX - (int64_t)grace_s, &d) == 0 &&
	       d + (int64_t)grace_s < (int64_t)now;
}

static int dk_reap(struct backend *base, char *err, size_t errlen)
{
	struct dk_backend *be = dk_of(base);
	cJSON *list = NULL, *s;
	time_t now = time(NULL);
	char msg[512];
	int rc, removed = 0;

	rc = docker_containers_list(be->docker, "sandbox.managed=true", &list,
	                            err, errlen);
	if (rc < 0)
		return rc;
	cJSON_ArrayForEach (s, list) {
		const char *id = cJSON_GetStringValue(
		    cJSON_GetObjectItemCaseSensitive(s, "Id"));

		if (!id || !backend_docker_reap_wanted(
		               s, be->cfg->instance_name, be->boot, now,
		               be->cfg->reap_grace_s))
			continue;
		rc = docker_container_remove(be->docker, id, msg, sizeof(msg));
		if (rc == 0 || rc == -ENOENT) {
			log_info("reaped leftover container %.12s", id);
			removed++;
		} else if (rc != -EBUSY) {
			log_warnx("reaping %.12s: %s", id, msg);
		}
	}
	cJSON_Delete(list);
	if (dk_cg_probed(be) != CGROUP_USAGE_OFF) {
		unsigned n = cgroup_usage_sweep(
		    be->cfg->cgroup_fs, dk_cg_probed(be),
		    (time_t)be->cfg->max_timeout_s +
		        4 * (time_t)be->cfg->engine_timeout_s + 600);

		if (n)
			log_info("removed %u leftover run cgroup directories",
			         n);
	}
	return removed;
}

/*
 * At shutdown: removes every container of this boot that is still there
 * (runs have ended by now; these are removals that kept failing), so a
 * clean stop leaves nothing behind.
 */
static void dk_sweep_own(struct backend *base)
{
	struct dk_backend *be = dk_of(base);
	char label[96], err[512];
	cJSON *list = NULL, *s;

	snprintf(label, sizeof(label), "sandbox.boot=%s", be->boot);
	if (docker_containers_list(be->docker, label, &list, err, sizeof(err)) <
	    0)
		return;
	cJSON_ArrayForEach (s, list) {
		const char *id = cJSON_GetStringValue(
		    cJSON_GetObjectItemCaseSensitive(s, "Id"));

		if (id && docker_container_remove(be->docker, id, err,
		                                  sizeof(err)) < 0)
			log_warnx("removing container %.12s at shutdown: %s",
			          id, err);
	}
	cJSON_Delete(list);
}

static bool dk_health(struct backend *base, cJSON *health)
{
	struct docker_health dh;
	cJSON *d;

	docker_health(dk_of(base)->docker, &dh);
	d = cJSON_AddObjectToObject(health, "docker");
	if (d) {
		cJSON_AddBoolToObject(d, "reachable", dh.reachable);
		cJSON_AddStringToObject(d, "server_version", dh.server_version);
		cJSON_AddStringToObject(d, "api_version", dh.api_version);
		if (dh.last_error[0])
			cJSON_AddStringToObject(d, "last_error", dh.last_error);
		cJSON_AddNumberToObject(d, "last_ok", (double)dh.last_ok);
	}
	return dh.reachable;
}

static int dk_ping(struct backend *base, char *err, size_t errlen)
{
	return docker_ping(dk_of(base)->docker, err, errlen);
}

static int dk_handover_prepare(struct backend *base, char *err, size_t errlen)
{
	struct dk_backend *be = dk_of(base);

	return docker_handover_prepare(&be->handover, be->cfg, err, errlen);
}

/* ---- egress ------------------------------------------------------------- */

static int dk_egress_proxy_start(struct backend *base,
                                 const struct backend_egress_proxy *p,
                                 char *err, size_t errlen)
{
	return docker_egress_proxy_start(dk_of(base)->docker, p, err, errlen);
}

static void dk_egress_proxy_stop(struct backend *base, const char *name)
{
	docker_egress_proxy_stop(dk_of(base)->docker, name);
}

static int dk_egress_net_open(struct backend *base,
                              const struct backend_egress_net *n, char *err,
                              size_t errlen)
{
	return docker_egress_net_open(dk_of(base)->docker, n, err, errlen);
}

static void dk_egress_net_close(struct backend *base,
                                const struct backend_egress_net *n)
{
	docker_egress_net_close(dk_of(base)->docker, n);
}

static int dk_box_join(struct box *base, const struct box_egress *e, char *err,
                       size_t errlen)
{
	struct dk_box *b = (struct dk_box *)base;

	return docker_network_connect(b->be->docker, e->network, b->cid, e->ip,
	                              NULL, err, errlen);
}

static int dk_box_leave(struct box *base, const struct box_egress *e, char *err,
                        size_t errlen)
{
	struct dk_box *b = (struct dk_box *)base;

	return docker_network_disconnect(b->be->docker, e->network, b->cid, err,
	                                 errlen);
}

/* SANDBOX_WARM_CHANNEL=auto's decision, from the engine's /info. */
static void dk_chan_decide(struct dk_backend *be)
{
	cJSON *info = NULL;
	char err[256], why[256];

	if (docker_engine_info(be->docker, &info, err, sizeof(err)) < 0) {
		be->chan_socket = false;
		snprintf(why, sizeof(why), "the engine's /info failed: %.200s",
		         err);
	} else {
		be->chan_socket = docker_channel_auto(info, why, sizeof(why));
		cJSON_Delete(info);
	}
	be->chan_decided = true;
	if (be->chan_socket)
		log_info("warm boxes talk to their agent over a unix socket "
		         "of their own, not through the engine "
		         "(SANDBOX_WARM_CHANNEL=auto: %s)",
		         why);
	else
		log_info("warm boxes talk to their agent through the engine's "
		         "attach stream (SANDBOX_WARM_CHANNEL=auto: %s; set "
		         "socket to insist)",
		         why);
}

static const char *dk_channel_path(struct backend *base)
{
	struct dk_backend *be = dk_of(base);
	const char *mode = be->cfg->warm_channel;
	bool socket;

	if (!mode || strcmp(mode, "attach") == 0)
		return NULL;
	if (strcmp(mode, "socket") == 0)
		return DOCKER_CHANNEL_PATH;
	pthread_mutex_lock(&be->chan_lock);
	if (!be->chan_decided)
		dk_chan_decide(be);
	socket = be->chan_socket;
	pthread_mutex_unlock(&be->chan_lock);
	return socket ? DOCKER_CHANNEL_PATH : NULL;
}

static int dk_configure(const struct config *cfg, bool chosen, char *err,
                        size_t errlen)
{
	const char *mode = cfg->warm_channel;

	(void)chosen;
	if (mode && strcmp(mode, "socket") != 0 &&
	    strcmp(mode, "attach") != 0 && strcmp(mode, "auto") != 0) {
		snprintf(err, errlen,
		         "SANDBOX_WARM_CHANNEL must be 'auto' (the default), "
		         "'socket' or 'attach', not '%.40s'",
		         mode);
		return -EINVAL;
	}
	return 0;
}

static const char *dk_lacks(unsigned feature)
{
	if (feature & BACKEND_CAN_REPLICAS)
		return "each daemon keeps them apart on its own engine only";
	return NULL;
}

static void dk_destroy(struct backend *base)
{
	struct dk_backend *be = dk_of(base);

	if (be->rm_started) {
		/* The remover empties its queue before it stops. */
		pthread_mutex_lock(&be->rm_lock);
		be->rm_stop = true;
		pthread_cond_signal(&be->rm_cond);
		pthread_mutex_unlock(&be->rm_lock);
		pthread_join(be->rm_thread, NULL);
		dk_sweep_own(base);
	}
	docker_handover_finish(&be->handover);
	docker_channel_dir_finish(&be->chan);
	docker_destroy(be->docker);
	free(be->seccomp_opt);
	pthread_cond_destroy(&be->rm_cond);
	pthread_mutex_destroy(&be->rm_lock);
	pthread_mutex_destroy(&be->cg_lock);
	pthread_mutex_destroy(&be->chan_lock);
	free(be);
}

const struct backend_impl backend_docker_impl = {
    .name = "docker",
    .features = BACKEND_CAN_STDIN | BACKEND_CAN_WARM | BACKEND_CAN_PACKAGES |
                BACKEND_CAN_NETWORK | BACKEND_CAN_HOST_MOUNTS |
                BACKEND_CAN_EGRESS,
    .configure = dk_configure,
    .create = backend_docker_create,
    .lacks = dk_lacks,
    .destroy = dk_destroy,
    .images = dk_images,
    .reap = dk_reap,
    .sweep_own = dk_sweep_own,
    .health = dk_health,
    .ping = dk_ping,
    .handover_prepare = dk_handover_prepare,
    .channel_path = dk_channel_path,
    .box_create = dk_box_create,
    .box_attach = dk_box_attach,
    .box_channel = dk_box_channel,
    .box_hand_over = dk_box_hand_over,
    .box_intact = dk_box_intact,
    .box_start = dk_box_start,
    .box_wait = dk_box_wait,
    .box_inspect = dk_box_inspect,
    .box_signal = dk_box_signal,
    .box_release = dk_box_release,
    .box_limits = dk_box_limits,
    .box_usage = dk_box_usage,
    .egress_proxy_start = dk_egress_proxy_start,
    .egress_proxy_stop = dk_egress_proxy_stop,
    .egress_net_open = dk_egress_net_open,
    .egress_net_close = dk_egress_net_close,
    .box_join = dk_box_join,
    .box_leave = dk_box_leave,
};

int backend_docker_create(const struct config *cfg, const char *boot,
                          struct backend **out, char *err, size_t errlen)
{
	struct dk_backend *be = calloc(1, sizeof(*be));
	int rc;

	*out = NULL;
	if (!be) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	be->base.impl = &backend_docker_impl;
	be->cfg = cfg;
	docker_channel_dir_init(&be->chan, cfg);
	snprintf(be->boot, sizeof(be->boot), "%s", boot);
	pthread_mutex_init(&be->rm_lock, NULL);
	pthread_mutex_init(&be->cg_lock, NULL);
	pthread_mutex_init(&be->chan_lock, NULL);
	mono_cond_init(&be->rm_cond);
	rc = seccomp_security_opt(&be->seccomp_opt);
	if (rc < 0) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	rc = docker_create(cfg->docker_host, cfg->engine_timeout_s, &be->docker,
	                   err, errlen);
	if (rc < 0)
		goto fail;
	rc = pthread_create(&be->rm_thread, NULL, dk_rm_main, be);
	if (rc != 0) {
		snprintf(err, errlen, "pthread_create: %s", strerror(rc));
		rc = -rc;
		goto fail;
	}
	be->rm_started = true;
	*out = &be->base;
	return 0;
fail:
	dk_destroy(&be->base);
	return rc;
}

struct docker *backend_docker_client(struct backend *be)
{
	return be->impl == &backend_docker_impl ? dk_of(be)->docker : NULL;
}
