/* SPDX-License-Identifier: MIT */
/*
 * warm_agent: one warm box and the agent protocol, daemon side; see
 * warm_agent.h and docs/agent-protocol.md. No lock here: a box belongs to
 * one thread at a time.
 */
#include "run/warm/warm_agent.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "run/capture.h"
#include "run/oneoff.h"
#include "run/packages.h"
#include "run/agentblob.h"
#include "run/warm/warm_io.h"
#include "util/buf.h"
#include "util/errmsg.h"
#include "util/hex.h"
#include "util/log.h"
#include "util/mono.h"
#include "workspace/workspace.h"

#define WARM_PRELOAD_MS 90000 /* a pool box's, with its imports */
#define WARM_CLAIM_MS 10000   /* the agent's answer to a claim */

/* ---- installing the agent ----------------------------------------------- */

/*
 * Names SANDBOX_ROOT/agent/<hash of every file>, where the agent and its
 * kernels live: a daemon with another agent or kernel installs anew.
 */
static int warm_agent_paths(struct warm_context *env, char *err, size_t errlen)
{
	const struct config *cfg = env->cfg;
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	char hash[17];
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	bool ok = ctx && EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) &&
	          EVP_DigestUpdate(ctx, agentblob_agent, agentblob_agent_len);

	/* Names too: the same bytes under another name is another install. */
	for (size_t i = 0; ok && i < agentblob_n_kernels; i++)
		ok = EVP_DigestUpdate(ctx, agentblob_kernels[i].name,
		                      strlen(agentblob_kernels[i].name) + 1) &&
		     EVP_DigestUpdate(ctx, agentblob_kernels[i].data,
		                      agentblob_kernels[i].len);
	if (!ok || !EVP_DigestFinal_ex(ctx, md, &mdlen)) {
		EVP_MD_CTX_free(ctx);
		return errmsg_fail(-ENOMEM, err, errlen, "out of memory");
	}
	EVP_MD_CTX_free(ctx);
	hex_encode(md, 8, hash);
	snprintf(env->agent_host_dir, sizeof(env->agent_host_dir),
	         "%s/agent/%s",
	         cfg->sandbox_host_path && cfg->sandbox_host_path[0]
	             ? cfg->sandbox_host_path
	             : cfg->sandbox_root,
	         hash);
	if ((size_t)snprintf(env->agent_dir, sizeof(env->agent_dir),
	                     "%s/agent/%s", cfg->sandbox_root,
	                     hash) >= sizeof(env->agent_dir) - 32)
		return errmsg_fail(-ENAMETOOLONG, err, errlen,
		                   "SANDBOX_ROOT is too long");
	return 0;
}

/* Whether dfd holds a regular file called name. */
static bool warm_agent_has(int dfd, const char *name)
{
	struct stat st;

	return fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
	       S_ISREG(st.st_mode);
}

/* Whether the agent's directory holds all its files. */
static bool warm_agent_present(const struct warm_context *env)
{
	int dfd = open(env->agent_dir,
	               O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	bool ok;

	if (dfd < 0)
		return false;
	ok = warm_agent_has(dfd, AGENTBLOB_AGENT_NAME);
	for (size_t i = 0; ok && i < agentblob_n_kernels; i++)
		ok = warm_agent_has(dfd, agentblob_kernels[i].name);
	close(dfd);
	return ok;
}

/* Removes the agent's files from dfd (a directory made anew). */
static void warm_agent_unlink(int dfd)
{
	(void)unlinkat(dfd, AGENTBLOB_AGENT_NAME, 0);
	for (size_t i = 0; i < agentblob_n_kernels; i++)
		(void)unlinkat(dfd, agentblob_kernels[i].name, 0);
}

/* Writes the agent and every kernel into dfd. 0 or -errno. */
static int warm_agent_write(int dfd)
{
	int rc = fchmod(dfd, 0755) < 0 ? -errno : 0;

	if (rc == 0)
		rc = warm_io_write_file(dfd, AGENTBLOB_AGENT_NAME,
		                        agentblob_agent, agentblob_agent_len,
		                        0755);
	for (size_t i = 0; rc == 0 && i < agentblob_n_kernels; i++)
		rc = warm_io_write_file(dfd, agentblob_kernels[i].name,
		                        agentblob_kernels[i].data,
		                        agentblob_kernels[i].len, 0644);
	return rc;
}

/*
 * Installs the agent in env->agent_dir unless it is there: at start-up,
 * and again before a box starts if something on the host removed it (the
 * boxes could not start without it).
 */
static int warm_agent_ensure(const struct warm_context *env, char *err,
                             size_t errlen)
{
	char dir[PATH_MAX], tmp[PATH_MAX];
	const char *dir_end;
	int dfd, rc;

	if (warm_agent_present(env))
		return 0;
	dir_end = strrchr(env->agent_dir, '/');
	snprintf(dir, sizeof(dir), "%.*s", (int)(dir_end - env->agent_dir),
	         env->agent_dir);
	if (mkdir(dir, 0711) < 0 && errno != EEXIST)
		return errmsg_fail(-errno, err, errlen, "cannot create %s: %s",
		                   dir, strerror(errno));
	/* A directory without its files: made anew. */
	dfd = open(env->agent_dir,
	           O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd >= 0) {
		warm_agent_unlink(dfd);
		close(dfd);
		(void)rmdir(env->agent_dir);
	}
	/* Written aside and renamed, so a box never sees half a file. */
	if ((size_t)snprintf(tmp, sizeof(tmp), "%s.%d", env->agent_dir,
	                     (int)getpid()) >= sizeof(tmp) ||
	    (mkdir(tmp, 0755) < 0 && errno != EEXIST))
		return errmsg_fail(-errno, err, errlen, "cannot create %s: %s",
		                   tmp, strerror(errno));
	dfd = open(tmp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0)
		return errmsg_fail(-errno, err, errlen, "cannot open %s: %s",
		                   tmp, strerror(errno));
	warm_agent_unlink(dfd);
	rc = warm_agent_write(dfd);
	close(dfd);
	if (rc == 0 && rename(tmp, env->agent_dir) < 0 && errno != EEXIST &&
	    errno != ENOTEMPTY)
		rc = -errno;
	if (rc < 0)
		return errmsg_fail(rc, err, errlen,
		                   "cannot install the sandbox agent in %s: %s",
		                   env->agent_dir, strerror(-rc));
	log_info("installed the sandbox agent in %s", env->agent_dir);
	return 0;
}

int warm_context_init(struct warm_context *env, const struct config *cfg,
                      struct backend *be, const char *boot, char *err,
                      size_t errlen)
{
	const char *host = cfg->sandbox_host_path && cfg->sandbox_host_path[0]
	                       ? cfg->sandbox_host_path
	                       : cfg->sandbox_root;
	int rc;

	memset(env, 0, sizeof(*env));
	env->cfg = cfg;
	env->be = be;
	snprintf(env->boot, sizeof(env->boot), "%s", boot);
	if ((size_t)snprintf(env->runs_dir, sizeof(env->runs_dir), "%s/runs",
	                     cfg->sandbox_root) >= sizeof(env->runs_dir) - 64 ||
	    (size_t)snprintf(env->runs_host_dir, sizeof(env->runs_host_dir),
	                     "%s/runs",
	                     host) >= sizeof(env->runs_host_dir) - 64)
		return errmsg_fail(-ENAMETOOLONG, err, errlen,
		                   "SANDBOX_ROOT is too long");
	if (mkdir(env->runs_dir, 0700) < 0 && errno != EEXIST)
		return errmsg_fail(-errno, err, errlen, "cannot create %s: %s",
		                   env->runs_dir, strerror(errno));
	rc = warm_agent_paths(env, err, errlen);
	return rc < 0 ? rc : warm_agent_ensure(env, err, errlen);
}

/* ---- the pool ---------------------------------------------------------- */

int warm_pool_prepare(struct warm_context *env, char *err, size_t errlen)
{
	return backend_handover_prepare(env->be, err, errlen);
}

/* ---- starting and claiming ---------------------------------------------- */

static int warm_mkdir(const char *path, mode_t mode)
{
	if (mkdir(path, mode) < 0)
		return -errno;
	/* mkdir obeys the umask; the sandbox user must read it. */
	return chmod(path, mode) < 0 ? -errno : 0;
}

/*
 * The argv of img's kernel, or NULL (a process-only agent): its
 * sandbox.kernel label, else kernel.py for the language python or any
 * runner whose command is python3 (a runner built FROM the Python image
 * under a language of its own, before images carried the label). *n: its
 * length; *python: whether it is kernel.py (the only one with a preload).
 */
static const char *const *warm_kernel_for(const struct catalog_image *img,
                                          size_t *n, bool *python)
{
	static const char *const py[] = {"python3", "-u",
	                                 AGENTBLOB_MOUNT "/kernel.py"};

	if (img->n_kernel > 0) {
		*n = img->n_kernel;
		*python = strcmp(img->kernel_file, "kernel.py") == 0;
		return (const char *const *)img->kernel;
	}
	*python =
	    strcmp(img->language, "python") == 0 ||
	    (img->n_command > 0 && strcmp(img->command[0], "python3") == 0);
	*n = *python ? 3 : 0;
	return *python ? py : NULL;
}

static bool warm_has_kernel(const struct catalog_image *img)
{
	size_t n = 0;
	bool python = false;

	return warm_kernel_for(img, &n, &python) != NULL;
}

/*
 * The agent's argv for img, at most WARM_CMD_MAX entries; channel is where
 * it connects to the daemon (backend_channel_path), or NULL to speak on
 * stdin and stdout.
 */
#define WARM_CMD_MAX (CATALOG_COMMAND_MAX + 6)
static size_t warm_cmd(const struct config *cfg,
                       const struct catalog_image *img, bool preload,
                       const char *channel, const char *cmd[WARM_CMD_MAX])
{
	size_t n = 0, nk = 0;
	bool python = false;
	const char *const *k = warm_kernel_for(img, &nk, &python);

	cmd[n++] = AGENTBLOB_MOUNT "/" AGENTBLOB_AGENT_NAME;
	if (channel) {
		cmd[n++] = "--channel";
		cmd[n++] = channel;
	}
	if (!k)
		return n;
	if (python && preload && cfg->pool_preload && cfg->pool_preload[0]) {
		cmd[n++] = "--preload";
		cmd[n++] = cfg->pool_preload;
	}
	cmd[n++] = "--kernel";
	for (size_t i = 0; i < nk; i++)
		cmd[n++] = k[i];
	return n;
}

/* Waits for R after a start; 0 or -errno with a message. */
static int warm_wait_ready(struct warm_box *b, long long until_ms, char *err,
                           size_t errlen)
{
	struct warm_io io = {.b = b};
	int rc = warm_io_pump(&io, until_ms, -1, warm_io_until_ready, NULL);

	warm_io_finish(&io);
	if (rc == 1)
		return 0;
	if (rc == 0)
		return errmsg_fail(-ETIMEDOUT, err, errlen,
		                   "the sandbox agent did not start in time");
	return errmsg_fail(rc, err, errlen,
	                   "the sandbox agent failed to start%s%s",
	                   io.proto[0] ? ": " : "", io.proto);
}

/* node_modules beside the code, to the conversation's npm packages. */
static int warm_link_packages(const char *dir)
{
	char path[PATH_MAX];

	if ((size_t)snprintf(path, sizeof(path), "%s/node_modules", dir) >=
	    sizeof(path)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	return symlink(PACKAGES_NODE_MODULES, path);
}

int warm_box_start(const struct warm_context *env,
                   const struct catalog_image *img,
                   const struct runner_request *req, const char *key,
                   struct warm_box **out, char *err, size_t errlen)
{
	const struct config *cfg = env->cfg;
	struct warm_box *b = calloc(1, sizeof(*b));
	struct box_spec bs;
	const char *cmd[WARM_CMD_MAX];
	const char *channel = backend_channel_path(env->be);
	const char *envv[] = {"HOME=/tmp", "LANG=C.UTF-8", NULL};
	bool pip = cfg->packages && strcmp(img->packages, "pip") == 0;
	bool cran = cfg->packages && strcmp(img->packages, "cran") == 0;
	char tenant_fp[13], name[32];
	long long t0 = mono_ms();
	int rc;

	*out = NULL;
	if (!b)
		return errmsg_fail(-ENOMEM, err, errlen, "out of memory");
	b->dir_fd = -1;
	rc = warm_agent_ensure(env, err, errlen);
	if (rc < 0) {
		free(b);
		return rc;
	}
	agentframe_decoder_init(&b->dec, AGENTFRAME_MAX);
	b->kernel = warm_has_kernel(img);
	snprintf(b->lang, sizeof(b->lang), "%s", img->language);
	snprintf(b->image_id, sizeof(b->image_id), "%s", img->image_id);
	b->expires_at = time(NULL) + (time_t)cfg->warm_max_s;
	b->next_id = 1;
	if (hex_random(b->id, 8) < 0) {
		rc = errmsg_fail(-EIO, err, errlen, "no random bytes");
		goto fail;
	}
	/* The directories were checked to leave room for these names. */
	if ((size_t)snprintf(b->dir, sizeof(b->dir), "%s/w-%s", env->runs_dir,
	                     b->id) >= sizeof(b->dir) ||
	    (size_t)snprintf(b->host_dir, sizeof(b->host_dir), "%s/w-%s",
	                     env->runs_host_dir, b->id) >= sizeof(b->host_dir))
		rc = -ENAMETOOLONG;
	else
		rc = warm_mkdir(b->dir, 0755);
	if (rc < 0) {
		errmsg_set(err, errlen, "cannot create %s: %s", b->dir,
		           strerror(-rc));
		b->dir[0] = '\0';
		goto fail;
	}
	/* Held for the box's life: the leftover sweep never takes it. */
	b->dir_fd = oneoff_dir_hold(b->dir);
	if (b->dir_fd < 0) {
		rc = errmsg_fail(b->dir_fd, err, errlen, "cannot open %s: %s",
		                 b->dir, strerror(-b->dir_fd));
		goto fail;
	}
	memset(&bs, 0, sizeof(bs));
	/* A name, so that a create whose answer is lost can be undone. */
	snprintf(name, sizeof(name), "mcpsd-w-%s", b->id);
	bs.name = name;
	bs.image = img->image_id;
	bs.cmd = cmd;
	bs.n_cmd = warm_cmd(cfg, img, req == NULL, channel, cmd);
	/* Runs find the conversation's packages (packages.h): the Python
	 * kernel puts them on sys.path, Bun walks up to the link. */
	if (cfg->packages && strcmp(img->packages, "npm") == 0 &&
	    warm_link_packages(b->dir) < 0) {
		rc = errmsg_fail(-errno, err, errlen,
		                 "cannot link the package cache in %s: %s",
		                 b->dir, strerror(errno));
		goto fail;
	}
	/* The kernels put the cache first on their path (kernel.py's
	 * sys.path, kernel.R's .libPaths()) once it exists. */
	envv[2] = pip    ? "MCPSD_PYTHON_PACKAGES=" PACKAGES_PYTHON_SITE
	          : cran ? "MCPSD_R_PACKAGES=" PACKAGES_R_DIR
	                 : NULL;
	bs.env = envv;
	bs.n_env = envv[2] ? 3 : 2;
	bs.workdir = "/data";
	/* Frames travel on the channel socket, or else on stdin/stdout. */
	bs.channel = channel != NULL;
	bs.open_stdin = channel == NULL;
	bs.main_is_init = true; /* see docs/agent-protocol.md, Trust */
	/* A run with network joins the egress network for that run only. */
	bs.joinable = env->egress != NULL;
	bs.deadline = b->expires_at + 60;
	/* Its CPU time is read on the host, between runs too (warm.c). */
	bs.measure = true;
	bs.labels[bs.n_labels++] =
	    (struct box_label){"sandbox.kind", req ? "warm" : "pool"};
	if (req) {
		snprintf(b->key, sizeof(b->key), "%s", key);
		rc = workspace_open_by_name(workspace_mgr_of(req->workspace),
		                            req->workspace_name, &b->hold);
		if (rc < 0) {
			errmsg_set(err, errlen, "the workspace is gone");
			goto fail;
		}
		if (req->tenant) {
			log_fingerprint(req->tenant, strlen(req->tenant),
			                tenant_fp);
			bs.labels[bs.n_labels++] =
			    (struct box_label){"sandbox.tenant", tenant_fp};
		}
		bs.mounts[bs.n_mounts++] = (struct box_mount){
		    req->workspace_host_path, "/data", false, false};
	} else {
		/* Empty until claimed: warm_box_claim hands it over. */
		bs.handover = "/data";
	}
	bs.mounts[bs.n_mounts++] =
	    (struct box_mount){b->host_dir, "/sandbox", true, false};
	bs.mounts[bs.n_mounts++] = (struct box_mount){
	    env->agent_host_dir, AGENTBLOB_MOUNT, true, false};
	rc = box_create(env->be, &bs, &b->box, err, errlen);
	if (rc == 0)
		rc = box_channel(b->box, &b->stream, err, errlen);
	if (rc == 0)
		rc = box_start(b->box, err, errlen);
	b->started_ms = t0;
	b->last_used_ms = t0;
	if (rc == 0 && !req) {
		/* A pool box gets ready in the background (warm_box_poll). */
		b->ready_by = t0 + WARM_PRELOAD_MS;
		*out = b;
		return 0;
	}
	if (rc == 0)
		rc = warm_wait_ready(b, t0 + WARM_IO_START_MS, err, errlen);
	if (rc < 0)
		goto fail;
	b->ready_ms = mono_ms() - t0;
	b->last_used_ms = mono_ms();
	log_debug("warm box %s (%s, session) ready in %lld ms", b->box->id,
	          img->language, b->ready_ms);
	*out = b;
	return 0;
fail:
	warm_box_destroy(env, b);
	return rc < 0 ? rc : -EIO;
}

/*
 * Whether b's code directory is still the one it made (and mounted at
 * /sandbox): not deleted, and its path not taken by another. 0, or -ENOENT
 * or -ESTALE.
 */
static int warm_dir_check(const struct warm_box *b)
{
	struct stat held, now;

	if (b->dir_fd < 0 || fstat(b->dir_fd, &held) < 0 || held.st_nlink == 0)
		return -ENOENT;
	if (lstat(b->dir, &now) < 0)
		return -ENOENT;
	if (now.st_ino != held.st_ino || now.st_dev != held.st_dev)
		return -ESTALE;
	return 0;
}

bool warm_box_intact(const struct warm_box *b, char *detail, size_t len)
{
	int rc = warm_dir_check(b);

	if (rc < 0) {
		snprintf(detail, len, "its code directory %s was %s", b->dir,
		         rc == -ENOENT ? "removed" : "replaced");
		return false;
	}
	return !b->box || box_intact(b->box, detail, len);
}

int warm_box_claim(const struct warm_context *env, struct warm_box *b,
                   const struct runner_request *req, const char *key, char *err,
                   size_t errlen)
{
	unsigned char rec[64];
	char what[PATH_MAX + 64];
	size_t off = 0;
	struct warm_io io = {.b = b};
	int rc;

	/* A damaged box is never handed to a conversation. */
	if (!warm_box_intact(b, what, sizeof(what)))
		return errmsg_fail(-ESTALE, err, errlen,
		                   "the pool box is damaged: %s", what);
	if (!warm_box_alive(env, b))
		return errmsg_fail(-EPIPE, err, errlen,
		                   "the pool box stopped (%s)", b->dead_reason);
	/* A check gets no workspace: its /data stays the empty pool one. */
	if (!(b->once && req->check)) {
		rc = workspace_open_by_name(workspace_mgr_of(req->workspace),
		                            req->workspace_name, &b->hold);
		if (rc < 0)
			return errmsg_fail(rc, err, errlen,
			                   "the workspace is gone");
		rc = box_hand_over(b->box, workspace_dirfd(b->hold), err,
		                   errlen);
		if (rc < 0)
			return rc;
	}
	snprintf(b->key, sizeof(b->key), "%s", key);
	if (agentframe_tlv_put(rec, sizeof(rec), &off, 'c', warm_exec_dir(req),
	                       strlen(warm_exec_dir(req))) < 0 ||
	    (b->once && b->kernel &&
	     agentframe_tlv_put(rec, sizeof(rec), &off, 'o', "1", 1) < 0))
		return errmsg_fail(-ENOSPC, err, errlen, "claim too large");
	rc = warm_io_send(b, 'C', rec, off);
	if (rc == 0)
		rc = warm_io_pump(&io, mono_ms() + WARM_CLAIM_MS, -1,
		                  warm_io_until_claimed, NULL);
	warm_io_finish(&io);
	if (rc == 1) {
		if (b->once) /* the agent ended its kernel: a process runs */
			b->kernel = false;
		return 0;
	}
	return errmsg_fail(rc < 0 ? rc : -ETIMEDOUT, err, errlen,
	                   "the sandbox agent did not take the claim%s%s",
	                   io.proto[0] ? ": " : "", io.proto);
}

int warm_box_poll(struct warm_box *b)
{
	struct warm_io io = {.b = b};
	int rc;

	if (b->dead)
		return -EPIPE;
	rc = warm_io_pump(&io, mono_ms(), -1, warm_io_never, NULL);
	warm_io_finish(&io);
	return rc < 0 ? rc : 0;
}

void warm_box_ended(struct warm_box *b, int rc)
{
	bool oom;

	if (b->dead)
		return;
	if (rc == -EPIPE)
		warm_io_died(b, &oom);
	else
		warm_io_kill(b, "protocol");
}

bool warm_box_alive(const struct warm_context *env, struct warm_box *b)
{
	int rc = warm_box_poll(b);

	(void)env;
	if (rc == 0)
		return true;
	warm_box_ended(b, rc);
	return false;
}

void warm_box_destroy(const struct warm_context *env, struct warm_box *b)
{
	char err[256];

	if (!b)
		return;
	box_stream_close(b->stream);
	/*
	 * Stopped before the workspace handle goes: a stopped box's mount
	 * namespace is gone, so the workspace's file system is no longer
	 * mounted anywhere but where the workspace manager knows.
	 */
	if (b->box && box_signal(b->box, "KILL", err, sizeof(err)) == 0 &&
	    box_wait(b->box, env->cfg->engine_timeout_s * 1000u, err,
	             sizeof(err)) < 0)
		log_warnx("box %s did not stop: %s", b->box->id, err);
	box_release(b->box);
	if (b->dir_fd >= 0) {
		/* Through the held descriptor: the path may name another
		 * directory by now (warm_box_intact). */
		bool ours = warm_dir_check(b) == 0;
		int dfd = fcntl(b->dir_fd, F_DUPFD_CLOEXEC, 0);
		DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
		struct dirent *e;

		while (d && (e = readdir(d)))
			if (e->d_name[0] != '.')
				(void)unlinkat(dfd, e->d_name, 0);
		if (d)
			closedir(d);
		else if (dfd >= 0)
			close(dfd);
		if (ours && rmdir(b->dir) < 0 && errno != ENOENT)
			log_warn("removing %s", b->dir);
		close(b->dir_fd);
	} else if (b->dir[0] && rmdir(b->dir) < 0 && errno != ENOENT) {
		log_warn("removing %s", b->dir);
	}
	workspace_close(b->hold);
	agentframe_decoder_finish(&b->dec);
	free(b);
}
