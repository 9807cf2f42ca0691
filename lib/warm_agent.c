/* SPDX-License-Identifier: MIT */
/*
 * warm_agent: one warm box and the agent protocol, daemon side; see
 * warm_agent.h and docs/agent-protocol.md. No lock here: a box belongs to
 * one thread at a time.
 */
#include "warm_agent.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "agentblob.h"
#include "attachio.h"
#include "buf.h"
#include "log.h"
#include "util/errmsg.h"
#include "util/hex.h"
#include "util/mono.h"
#include "workspace.h"

#define AGENT_MOUNT "/opt/mcp-sandboxd"
#define WARM_START_MS 30000       /* a box's start, kernel included */
#define WARM_PRELOAD_MS 90000     /* ... with the pool's imports */
#define WARM_CLAIM_MS 10000       /* the agent's answer to a claim */
#define WARM_WRITE_MS 10000       /* writing a frame to the agent */
#define WARM_EXEC_MAX (64 * 1024) /* an exec frame's payload */
#define WARM_STDERR_LOG 2048      /* agent diagnostics kept for the log */

/* ---- installing the agent ----------------------------------------------- */

static int warm_write_file(int dfd, const char *name, const void *p, size_t n,
                           mode_t mode)
{
	int fd =
	    openat(dfd, name,
	           O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
	size_t off = 0;
	int rc = 0;

	if (fd < 0)
		return -errno;
	while (off < n) {
		ssize_t w = write(fd, (const char *)p + off, n - off);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0) {
			rc = -errno;
			break;
		}
		off += (size_t)w;
	}
	if (rc == 0 && fchmod(fd, mode) < 0)
		rc = -errno;
	if (close(fd) < 0 && rc == 0)
		rc = -errno;
	return rc;
}

/* SANDBOX_ROOT/agent/<hash of both files>/{mcpsd-agent,kernel.py}. */
static int warm_install_agent(struct warm_env *env, char *err, size_t errlen)
{
	const struct config *cfg = env->cfg;
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	char hash[17], dir[PATH_MAX], tmp[PATH_MAX];
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	struct stat sb;
	int dfd, rc;

	if (!ctx || !EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) ||
	    !EVP_DigestUpdate(ctx, agentblob_agent, agentblob_agent_len) ||
	    !EVP_DigestUpdate(ctx, agentblob_kernel, agentblob_kernel_len) ||
	    !EVP_DigestFinal_ex(ctx, md, &mdlen)) {
		EVP_MD_CTX_free(ctx);
		return errmsg_fail(-ENOMEM, err, errlen, "out of memory");
	}
	EVP_MD_CTX_free(ctx);
	hex_encode(md, 8, hash);
	snprintf(dir, sizeof(dir), "%s/agent", cfg->sandbox_root);
	if (mkdir(dir, 0711) < 0 && errno != EEXIST)
		return errmsg_fail(-errno, err, errlen, "cannot create %s: %s",
		                   dir, strerror(errno));
	snprintf(env->agent_host_dir, sizeof(env->agent_host_dir),
	         "%s/agent/%s",
	         cfg->sandbox_host_path && cfg->sandbox_host_path[0]
	             ? cfg->sandbox_host_path
	             : cfg->sandbox_root,
	         hash);
	if ((size_t)snprintf(dir, sizeof(dir), "%s/agent/%s", cfg->sandbox_root,
	                     hash) >= sizeof(dir))
		return errmsg_fail(-ENAMETOOLONG, err, errlen,
		                   "SANDBOX_ROOT is too long");
	if (lstat(dir, &sb) == 0 && S_ISDIR(sb.st_mode))
		return 0; /* this version is installed */
	/* Written aside and renamed, so a box never sees half a file. */
	if ((size_t)snprintf(tmp, sizeof(tmp), "%s.%d", dir, (int)getpid()) >=
	        sizeof(tmp) ||
	    (mkdir(tmp, 0755) < 0 && errno != EEXIST))
		return errmsg_fail(-errno, err, errlen, "cannot create %s: %s",
		                   tmp, strerror(errno));
	dfd = open(tmp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0)
		return errmsg_fail(-errno, err, errlen, "cannot open %s: %s",
		                   tmp, strerror(errno));
	(void)unlinkat(dfd, "mcpsd-agent", 0);
	(void)unlinkat(dfd, "kernel.py", 0);
	rc = fchmod(dfd, 0755) < 0 ? -errno : 0;
	if (rc == 0)
		rc = warm_write_file(dfd, "mcpsd-agent", agentblob_agent,
		                     agentblob_agent_len, 0755);
	if (rc == 0)
		rc = warm_write_file(dfd, "kernel.py", agentblob_kernel,
		                     agentblob_kernel_len, 0644);
	close(dfd);
	if (rc == 0 && rename(tmp, dir) < 0 && errno != EEXIST &&
	    errno != ENOTEMPTY)
		rc = -errno;
	if (rc < 0)
		return errmsg_fail(rc, err, errlen,
		                   "cannot install the sandbox agent in %s: %s",
		                   dir, strerror(-rc));
	log_info("installed the sandbox agent in %s", dir);
	return 0;
}

int warm_env_init(struct warm_env *env, const struct config *cfg,
                  struct backend *be, const char *boot, char *err,
                  size_t errlen)
{
	const char *host = cfg->sandbox_host_path && cfg->sandbox_host_path[0]
	                       ? cfg->sandbox_host_path
	                       : cfg->sandbox_root;

	memset(env, 0, sizeof(*env));
	env->cfg = cfg;
	env->be = be;
	snprintf(env->boot, sizeof(env->boot), "%s", boot);
	if ((size_t)snprintf(env->runs_dir, sizeof(env->runs_dir), "%s/runs",
	                     cfg->sandbox_root) >= sizeof(env->runs_dir) - 64 ||
	    (size_t)snprintf(env->runs_host_dir, sizeof(env->runs_host_dir),
	                     "%s/runs",
	                     host) >= sizeof(env->runs_host_dir) - 64 ||
	    (size_t)snprintf(env->pool_dir, sizeof(env->pool_dir), "%s/pool",
	                     cfg->sandbox_root) >= sizeof(env->pool_dir) - 64 ||
	    (size_t)snprintf(env->pool_host_dir, sizeof(env->pool_host_dir),
	                     "%s/pool",
	                     host) >= sizeof(env->pool_host_dir) - 64)
		return errmsg_fail(-ENAMETOOLONG, err, errlen,
		                   "SANDBOX_ROOT is too long");
	if (mkdir(env->runs_dir, 0700) < 0 && errno != EEXIST)
		return errmsg_fail(-errno, err, errlen, "cannot create %s: %s",
		                   env->runs_dir, strerror(errno));
	return warm_install_agent(env, err, errlen);
}

void warm_env_finish(struct warm_env *env)
{
	if (env->pool_mounted && umount2(env->pool_dir, MNT_DETACH) < 0)
		log_warn("unmounting %s", env->pool_dir);
	env->pool_mounted = false;
}

/* ---- the pool directory ------------------------------------------------- */

/* Unmounts and removes pool/<id> directories an earlier boot left. */
static void warm_pool_sweep(struct warm_env *env)
{
	DIR *d = opendir(env->pool_dir);
	struct dirent *e;
	char path[PATH_MAX];

	if (!d)
		return;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		if ((size_t)snprintf(path, sizeof(path), "%s/%s", env->pool_dir,
		                     e->d_name) >= sizeof(path))
			continue;
		/* Possibly a workspace mounted there: never delete into it. */
		while (umount2(path, MNT_DETACH | UMOUNT_NOFOLLOW) == 0)
			;
		if (rmdir(path) < 0 && errno != ENOENT)
			log_warn("removing %s", path);
	}
	closedir(d);
}

int warm_pool_prepare(struct warm_env *env, char *err, size_t errlen)
{
	if (mkdir(env->pool_dir, 0711) < 0 && errno != EEXIST)
		return errmsg_fail(-errno, err, errlen, "cannot create %s: %s",
		                   env->pool_dir, strerror(errno));
	warm_pool_sweep(env);
	/* An earlier boot's shared mount is fine; a fresh one is made. */
	while (umount2(env->pool_dir, MNT_DETACH | UMOUNT_NOFOLLOW) == 0)
		;
	if (mount(env->pool_dir, env->pool_dir, NULL, MS_BIND, NULL) < 0)
		return errmsg_fail(-errno, err, errlen,
		                   "cannot bind-mount %s on itself: %s (the "
		                   "daemon needs CAP_SYS_ADMIN, as for loop "
		                   "quotas)",
		                   env->pool_dir, strerror(errno));
	env->pool_mounted = true;
	if (mount(NULL, env->pool_dir, NULL, MS_SHARED, NULL) < 0)
		return errmsg_fail(-errno, err, errlen,
		                   "cannot make %s a shared mount: %s",
		                   env->pool_dir, strerror(errno));
	return 0;
}

/* ---- frames ------------------------------------------------------------- */

/* Writes all of p to the box within WARM_WRITE_MS. 0 or -errno. */
static int warm_write_all(struct warm_box *b, const void *p, size_t n)
{
	long long deadline = mono_ms() + WARM_WRITE_MS;
	size_t off = 0;

	while (off < n) {
		struct pollfd pf = {.fd = box_stream_fd(b->stream),
		                    .events = POLLOUT};
		ssize_t w =
		    box_stream_write(b->stream, (const char *)p + off, n - off);
		long long left;

		if (w > 0) {
			off += (size_t)w;
			continue;
		}
		if (w != -EAGAIN)
			return w < 0 ? (int)w : -EIO;
		left = deadline - mono_ms();
		if (left <= 0)
			return -ETIMEDOUT;
		if (poll(&pf, 1, (int)left) < 0 && errno != EINTR)
			return -errno;
	}
	return 0;
}

/* Sends one frame of type with payload p. */
static int warm_send(struct warm_box *b, unsigned char type, const void *p,
                     size_t n)
{
	unsigned char hdr[AGENTFRAME_HDR];
	int rc = agentframe_header(hdr, type, n, AGENTFRAME_MAX_IN);

	if (rc == 0)
		rc = warm_write_all(b, hdr, sizeof(hdr));
	if (rc == 0 && n)
		rc = warm_write_all(b, p, n);
	return rc;
}

/* Sends a frame whose payload is the one record id ('n'). */
static int warm_send_id(struct warm_box *b, unsigned char type, uint64_t id)
{
	unsigned char rec[64];
	char num[24];
	size_t off = 0;
	int n = snprintf(num, sizeof(num), "%llu", (unsigned long long)id);

	if (agentframe_tlv_put(rec, sizeof(rec), &off, 'n', num, (size_t)n) < 0)
		return -ENOSPC;
	return warm_send(b, type, rec, off);
}

/*
 * What one read of a box's stream produced. A call to warm_pump hands every
 * whole frame to warm_frame, which fills this in.
 */
struct warm_io {
	struct warm_box *b;
	uint64_t exec_id; /* 0: no exec running */
	/* output of the exec */
	struct attachio_capture *out, *err;
	size_t total, max_total;
	bool limit;
	const struct runner_request *req;
	/* frames seen */
	bool ready, claimed, done, pong;
	cJSON *x, *d;
	/* the agent's own stderr, for the log */
	char diag[WARM_STDERR_LOG];
	size_t diag_len;
	char proto[160]; /* a protocol violation, "" for none */
	long long tick;  /* mono_ms of the last on_tick */
};

static int warm_protocol(struct warm_io *io, const char *what)
{
	snprintf(io->proto, sizeof(io->proto), "%s", what);
	return -EPROTO;
}

/* A JSON object from a frame payload (bounded by the frame), or NULL. */
static cJSON *warm_json(const unsigned char *p, size_t n)
{
	cJSON *j = cJSON_ParseWithLength((const char *)p, n);

	if (j && !cJSON_IsObject(j)) {
		cJSON_Delete(j);
		return NULL;
	}
	return j;
}

/* The exec id a result frame carries must be the exec's. */
static bool warm_id_is(const cJSON *j, uint64_t id)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, "id");

	return cJSON_IsNumber(v) && v->valuedouble == (double)id;
}

static void warm_ready(struct warm_io *io, const cJSON *r)
{
	const char *lost =
	    cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(r, "lost"));

	io->ready = true;
	io->b->ready = true;
	if (lost && lost[0])
		snprintf(io->b->lost, sizeof(io->b->lost), "%.23s", lost);
}

static void warm_output(struct warm_io *io, int which, const unsigned char *p,
                        size_t n)
{
	size_t room = io->max_total - io->total;

	if (io->limit)
		return;
	if (n > room) {
		n = room;
		io->limit = true;
	}
	attachio_capture_add(which == 2 ? io->err : io->out, (const char *)p,
	                     n);
	io->total += n;
	if (io->req && io->req->on_output)
		io->req->on_output(io->req->event_arg, which, (const char *)p,
		                   n);
}

static int warm_frame(void *arg, unsigned char type, const unsigned char *p,
                      size_t n)
{
	struct warm_io *io = arg;
	cJSON *j;

	switch (type) {
	case 'o':
	case 'e':
		if (!io->exec_id || io->done)
			return warm_protocol(io, "output outside an exec");
		if (n > AGENTFRAME_OUTPUT_CHUNK)
			return warm_protocol(io, "an output frame too large");
		warm_output(io, type == 'e' ? 2 : 1, p, n);
		return 0;
	case 'X':
	case 'D':
		if (!io->exec_id || io->done ||
		    (type == 'X' ? io->x != NULL : false))
			return warm_protocol(io, "a result outside an exec");
		j = warm_json(p, n);
		if (!j || !warm_id_is(j, io->exec_id)) {
			cJSON_Delete(j);
			return warm_protocol(io, "a result for another exec");
		}
		if (type == 'X') {
			io->x = j;
		} else {
			io->d = j;
			io->done = true;
		}
		return 0;
	case 'R':
		j = warm_json(p, n);
		if (!j)
			return warm_protocol(io, "a malformed ready frame");
		warm_ready(io, j);
		cJSON_Delete(j);
		return 0;
	case 'A':
		io->claimed = true;
		return 0;
	case 'p':
		io->pong = true;
		return 0;
	case 'L':
		log_debug("agent %s: %.*s", io->b->box->id,
		          (int)(n > 512 ? 512 : n), (const char *)p);
		return 0;
	default:
		return warm_protocol(io, "an unknown frame type");
	}
}

/* The box's stream: stdout carries frames, stderr the agent's notes. */
static int warm_stream_out(void *arg, int which, const char *p, size_t n)
{
	struct warm_io *io = arg;

	if (which == 2) {
		size_t room = sizeof(io->diag) - 1 - io->diag_len;

		if (n > room)
			n = room;
		memcpy(io->diag + io->diag_len, p, n);
		io->diag_len += n;
		io->diag[io->diag_len] = '\0';
		return 0;
	}
	return agentframe_feed(&io->b->dec, p, n, warm_frame, io);
}

/*
 * Reads what the box sent, waiting up to until_ms (mono_ms) or until stop
 * says enough, or cancel_fd is readable. Returns 1 when stop() became true,
 * 0 on time out or cancel (see *cancelled), -EPIPE at the end of the stream,
 * -EPROTO on a violation (io->proto says which), or another -errno.
 */
static int warm_pump(struct warm_io *io, long long until_ms, int cancel_fd,
                     bool (*stop)(const struct warm_io *io), bool *cancelled)
{
	struct warm_box *b = io->b;
	char msg[256];

	for (;;) {
		struct pollfd pf[2] = {
		    {.fd = box_stream_fd(b->stream), .events = POLLIN},
		    {.fd = cancel_fd, .events = POLLIN}};
		long long left;
		int rc, rounds;

		if (stop(io))
			return 1;
		if (io->req && io->req->on_tick &&
		    mono_ms() - io->tick >= 1000) {
			io->tick = mono_ms();
			io->req->on_tick(io->req->event_arg);
		}
		left = until_ms - mono_ms();
		if (left <= 0)
			return 0;
		if (!box_stream_pending(b->stream)) {
			rc = poll(pf, cancel_fd >= 0 ? 2 : 1,
			          (int)(left > 1000 ? 1000 : left));
			if (rc < 0 && errno != EINTR)
				return -errno;
			if (cancel_fd >= 0 && (pf[1].revents & POLLIN)) {
				if (cancelled)
					*cancelled = true;
				return 0;
			}
			if (rc <= 0 ||
			    !(pf[0].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
		}
		for (rounds = 0; rounds < 16 && !stop(io); rounds++) {
			rc = box_stream_pump(b->stream, warm_stream_out, io,
			                     msg, sizeof(msg));
			if (rc == -EAGAIN)
				break;
			if (rc == 0)
				return -EPIPE;
			if (rc == -EPROTO && io->proto[0])
				return -EPROTO;
			if (rc < 0) {
				if (!io->proto[0])
					snprintf(io->proto, sizeof(io->proto),
					         "%.150s",
					         rc == -EMSGSIZE
					             ? "a frame too large"
					             : msg);
				return -EPROTO;
			}
		}
	}
}

static bool warm_until_ready(const struct warm_io *io)
{
	return io->ready;
}

static bool warm_until_claimed(const struct warm_io *io)
{
	return io->claimed;
}

static bool warm_until_done(const struct warm_io *io)
{
	return io->done;
}

static bool warm_never(const struct warm_io *io)
{
	(void)io;
	return false;
}

static void warm_io_finish(struct warm_io *io)
{
	cJSON_Delete(io->x);
	cJSON_Delete(io->d);
	io->x = io->d = NULL;
	if (io->diag_len)
		log_debug("agent %s said: %s", io->b->box->id, io->diag);
}

/* Marks b dead for reason. */
static void warm_kill(struct warm_box *b, const char *reason)
{
	char err[256];

	b->dead = true;
	b->ready = false;
	if (!b->dead_reason[0])
		snprintf(b->dead_reason, sizeof(b->dead_reason), "%s", reason);
	/* The stream first: a kill hangs while it is open and unread. */
	box_stream_close(b->stream);
	b->stream = NULL;
	if (box_signal(b->box, "KILL", err, sizeof(err)) < 0)
		log_debug("killing box %s: %s", b->box->id, err);
}

/* Why a box's stream ended: the engine's word on its main process. */
static void warm_died(struct warm_box *b, bool *oom)
{
	struct box_state st;
	char err[256];

	*oom = false;
	box_stream_close(b->stream);
	b->stream = NULL;
	if (box_wait(b->box, 2000, err, sizeof(err)) == 0 &&
	    box_inspect(b->box, &st, err, sizeof(err)) == 0)
		*oom = st.oom_killed;
	warm_kill(b, *oom ? "oom" : "crash");
}

/* ---- starting and claiming ---------------------------------------------- */

static int warm_mkdir(const char *path, mode_t mode)
{
	if (mkdir(path, mode) < 0)
		return -errno;
	/* mkdir obeys the umask; the sandbox user must read it. */
	return chmod(path, mode) < 0 ? -errno : 0;
}

/* The agent's argv for img. */
static size_t warm_cmd(const struct config *cfg, bool kernel, bool preload,
                       const char *cmd[8])
{
	size_t n = 0;

	cmd[n++] = AGENT_MOUNT "/mcpsd-agent";
	if (!kernel)
		return n;
	if (preload && cfg->pool_preload && cfg->pool_preload[0]) {
		cmd[n++] = "--preload";
		cmd[n++] = cfg->pool_preload;
	}
	cmd[n++] = "--kernel";
	cmd[n++] = "python3";
	cmd[n++] = "-u";
	cmd[n++] = AGENT_MOUNT "/kernel.py";
	return n;
}

/* Waits for R after a start; 0 or -errno with a message. */
static int warm_wait_ready(struct warm_box *b, long long until_ms, char *err,
                           size_t errlen)
{
	struct warm_io io = {.b = b};
	int rc = warm_pump(&io, until_ms, -1, warm_until_ready, NULL);

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

int warm_box_start(const struct warm_env *env, const struct catalog_image *img,
                   const struct runner_request *req, const char *key,
                   struct warm_box **out, char *err, size_t errlen)
{
	const struct config *cfg = env->cfg;
	struct warm_box *b = calloc(1, sizeof(*b));
	struct box_spec bs;
	const char *cmd[8];
	const char *envv[] = {"HOME=/tmp", "LANG=C.UTF-8"};
	char pool_host[PATH_MAX], tenant_fp[13];
	long long t0 = mono_ms();
	int rc;

	*out = NULL;
	if (!b)
		return errmsg_fail(-ENOMEM, err, errlen, "out of memory");
	agentframe_decoder_init(&b->dec, AGENTFRAME_MAX);
	b->kernel = strcmp(img->language, "python") == 0;
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
	memset(&bs, 0, sizeof(bs));
	bs.image = img->image_id;
	bs.cmd = cmd;
	bs.n_cmd = warm_cmd(cfg, b->kernel, req == NULL, cmd);
	bs.env = envv;
	bs.n_env = 2;
	bs.workdir = "/data";
	bs.open_stdin = true;
	bs.deadline = b->expires_at + 60;
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
		if ((size_t)snprintf(b->mnt, sizeof(b->mnt), "%s/%s",
		                     env->pool_dir, b->id) >= sizeof(b->mnt) ||
		    (size_t)snprintf(pool_host, sizeof(pool_host), "%s/%s",
		                     env->pool_host_dir,
		                     b->id) >= sizeof(pool_host))
			rc = -ENAMETOOLONG;
		else /* root's and empty until claimed: nothing lands there */
			rc = warm_mkdir(b->mnt, 0755);
		if (rc < 0) {
			errmsg_set(err, errlen, "cannot create %s: %s", b->mnt,
			           strerror(-rc));
			b->mnt[0] = '\0';
			goto fail;
		}
		bs.mounts[bs.n_mounts++] =
		    (struct box_mount){pool_host, "/data", false, true};
	}
	bs.mounts[bs.n_mounts++] =
	    (struct box_mount){b->host_dir, "/sandbox", true, false};
	bs.mounts[bs.n_mounts++] =
	    (struct box_mount){env->agent_host_dir, AGENT_MOUNT, true, false};
	rc = box_create(env->be, &bs, &b->box, err, errlen);
	if (rc == 0)
		rc = box_attach(b->box, &b->stream, err, errlen);
	if (rc == 0)
		rc = box_start(b->box, err, errlen);
	if (rc == 0)
		rc = warm_wait_ready(
		    b, t0 + (req ? WARM_START_MS : WARM_PRELOAD_MS), err,
		    errlen);
	if (rc < 0)
		goto fail;
	b->ready_ms = mono_ms() - t0;
	b->last_used_ms = mono_ms();
	log_debug("warm box %s (%s, %s) ready in %lld ms", b->box->id,
	          img->language, req ? "session" : "pool", b->ready_ms);
	*out = b;
	return 0;
fail:
	warm_box_destroy(env, b);
	return rc < 0 ? rc : -EIO;
}

int warm_box_claim(const struct warm_env *env, struct warm_box *b,
                   const struct runner_request *req, const char *key, char *err,
                   size_t errlen)
{
	unsigned char rec[64];
	char src[64];
	size_t off = 0;
	struct warm_io io = {.b = b};
	int rc;

	rc = workspace_open_by_name(workspace_mgr_of(req->workspace),
	                            req->workspace_name, &b->hold);
	if (rc < 0)
		return errmsg_fail(rc, err, errlen, "the workspace is gone");
	/* The handle's directory, whatever mount it lives on. */
	snprintf(src, sizeof(src), "/proc/self/fd/%d",
	         workspace_dirfd(b->hold));
	if (mount(src, b->mnt, NULL, MS_BIND, NULL) < 0)
		return errmsg_fail(-errno, err, errlen,
		                   "cannot mount the workspace into the box: "
		                   "%s",
		                   strerror(errno));
	b->mnt_bound = true;
	snprintf(b->key, sizeof(b->key), "%s", key);
	if (agentframe_tlv_put(rec, sizeof(rec), &off, 'c', "/data", 5) < 0)
		return errmsg_fail(-ENOSPC, err, errlen, "claim too large");
	rc = warm_send(b, 'C', rec, off);
	if (rc == 0)
		rc = warm_pump(&io, mono_ms() + WARM_CLAIM_MS, -1,
		               warm_until_claimed, NULL);
	warm_io_finish(&io);
	if (rc == 1)
		return 0;
	return errmsg_fail(rc < 0 ? rc : -ETIMEDOUT, err, errlen,
	                   "the sandbox agent did not take the claim%s%s",
	                   io.proto[0] ? ": " : "", io.proto);
}

bool warm_box_alive(const struct warm_env *env, struct warm_box *b)
{
	struct warm_io io = {.b = b};
	bool oom;
	int rc;

	(void)env;
	if (b->dead)
		return false;
	rc = warm_pump(&io, mono_ms(), -1, warm_never, NULL);
	warm_io_finish(&io);
	if (rc == -EPIPE) {
		warm_died(b, &oom);
		return false;
	}
	if (rc < 0) {
		warm_kill(b, "protocol");
		return false;
	}
	return true;
}

void warm_box_destroy(const struct warm_env *env, struct warm_box *b)
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
	    box_wait(b->box, env->cfg->docker_timeout_s * 1000u, err,
	             sizeof(err)) < 0)
		log_warnx("box %s did not stop: %s", b->box->id, err);
	box_release(b->box);
	if (b->mnt_bound && umount2(b->mnt, MNT_DETACH) < 0)
		log_warn("unmounting %s", b->mnt);
	if (b->mnt[0] && rmdir(b->mnt) < 0 && errno != ENOENT)
		log_warn("removing %s", b->mnt);
	if (b->dir[0]) {
		int dfd = open(b->dir,
		               O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

		if (dfd >= 0) {
			DIR *d = fdopendir(dfd);
			struct dirent *e;

			while (d && (e = readdir(d)))
				if (e->d_name[0] != '.')
					(void)unlinkat(dfd, e->d_name, 0);
			if (d)
				closedir(d);
			else
				close(dfd);
		}
		if (rmdir(b->dir) < 0 && errno != ENOENT)
			log_warn("removing %s", b->dir);
	}
	workspace_close(b->hold);
	agentframe_decoder_finish(&b->dec);
	free(b);
}

/* ---- one call ----------------------------------------------------------- */

/* Writes a file into the box's /sandbox directory (replacing it). */
static int warm_put_file(const struct warm_box *b, const char *name,
                         const char *p, size_t n)
{
	int dfd = open(b->dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	int rc;

	if (dfd < 0)
		return -errno;
	(void)unlinkat(dfd, name, 0);
	rc = warm_write_file(dfd, name, p, n, 0644);
	close(dfd);
	return rc;
}

/* The exec frame's records. -ENOSPC when they do not fit. */
static int warm_exec_records(const struct warm_box *b,
                             const struct runner_request *req,
                             const struct catalog_image *img, uint64_t id,
                             unsigned char *rec, size_t cap, size_t *off)
{
	char num[24], path[80], *base_url = NULL;
	int n = snprintf(num, sizeof(num), "%llu", (unsigned long long)id);
	int rc = agentframe_tlv_put(rec, cap, off, 'n', num, (size_t)n);

	snprintf(path, sizeof(path), "/sandbox/%s", img->filename);
	if (rc == 0 && b->kernel)
		rc = agentframe_tlv_put(rec, cap, off, 'k', "1", 1);
	if (rc == 0 && b->kernel)
		rc = agentframe_tlv_put(rec, cap, off, 'f', path, strlen(path));
	for (size_t i = 0; rc == 0 && !b->kernel && i < img->n_command; i++)
		rc = agentframe_tlv_put(rec, cap, off, 'a', img->command[i],
		                        strlen(img->command[i]));
	if (rc == 0 && req->stdin_data)
		rc = agentframe_tlv_put(rec, cap, off, 'i', "/sandbox/stdin",
		                        14);
	if (rc == 0 && req->file_base_url) {
		base_url = buf_asprintf("FILE_BASE_URL=%s", req->file_base_url);
		rc = base_url ? agentframe_tlv_put(rec, cap, off, 'v', base_url,
		                                   strlen(base_url))
		              : -ENOMEM;
		free(base_url);
	}
	for (size_t i = 0; rc == 0 && i < req->n_env; i++)
		rc = agentframe_tlv_put(rec, cap, off, 'v', req->env[i],
		                        strlen(req->env[i]));
	if (rc == 0)
		rc = agentframe_tlv_put(rec, cap, off, 'c', "/data", 5);
	return rc;
}

/* Writes the code (and stdin) and sends the exec. 0 or -errno, message. */
static int warm_exec_send(struct warm_box *b, const struct runner_request *req,
                          const struct catalog_image *img, uint64_t id,
                          char *err, size_t errlen)
{
	unsigned char *rec = malloc(WARM_EXEC_MAX);
	size_t off = 0;
	int rc;

	if (!rec)
		return errmsg_fail(-ENOMEM, err, errlen, "out of memory");
	rc = warm_put_file(b, img->filename, req->code, req->code_len);
	if (rc == 0 && req->stdin_data)
		rc = warm_put_file(b, "stdin", req->stdin_data, req->stdin_len);
	if (rc < 0) {
		free(rec);
		return errmsg_fail(rc, err, errlen,
		                   "cannot write the code for the sandbox: %s",
		                   strerror(-rc));
	}
	rc = warm_exec_records(b, req, img, id, rec, WARM_EXEC_MAX, &off);
	if (rc == 0)
		rc = warm_send(b, 'E', rec, off);
	free(rec);
	if (rc < 0)
		return errmsg_fail(rc, err, errlen,
		                   "cannot reach the sandbox agent: %s",
		                   strerror(-rc));
	return 0;
}

/* How a call is being brought to an end. */
enum warm_phase {
	WARM_RUNNING,
	WARM_INTERRUPTED, /* SIGINT sent: waiting for the kernel to stop */
	WARM_KILLED,      /* the kernel (or process) was killed */
};

struct warm_call {
	struct warm_io io;
	enum warm_phase phase;
	bool timed_out, cancelled;
	uint64_t id;
};

static bool warm_until_done_or_limit(const struct warm_io *io)
{
	return io->done || io->limit;
}

/*
 * Escalates one step: interrupt (state kept), then kill the kernel or
 * process (state lost). false when there is no step left or the agent
 * cannot be told: the box itself must go.
 */
static bool warm_escalate(struct warm_box *b, struct warm_call *c)
{
	switch (c->phase) {
	case WARM_RUNNING:
		c->phase = WARM_INTERRUPTED;
		if (warm_send_id(b, 'I', c->id) < 0)
			return false;
		break;
	case WARM_INTERRUPTED:
		c->phase = WARM_KILLED;
		if (warm_send_id(b, 'K', c->id) < 0)
			return false;
		break;
	case WARM_KILLED:
		return false;
	}
	return true;
}

/*
 * Drives a sent exec to its D frame, interrupting and killing on the
 * deadline, a cancel or the output cap. Returns with c->io.done, or with b
 * dead.
 */
static void warm_exec_drive(const struct warm_env *env, struct warm_box *b,
                            const struct runner_request *req,
                            struct warm_call *c, long long deadline)
{
	long long until = deadline;
	bool oom;

	for (;;) {
		bool cancelled = false;
		int rc = warm_pump(
		    &c->io, until,
		    c->phase == WARM_RUNNING ? runner_cancel_fd(req->cancel)
		                             : -1,
		    c->phase == WARM_RUNNING ? warm_until_done_or_limit
		                             : warm_until_done,
		    &cancelled);

		if (rc == 1 && c->io.done)
			return;
		if (rc == -EPIPE) {
			warm_died(b, &oom);
			return;
		}
		if (rc < 0) {
			log_warnx("warm box %s: %s; ending its session",
			          b->box->id,
			          c->io.proto[0] ? c->io.proto : strerror(-rc));
			warm_kill(b, "protocol");
			return;
		}
		if (c->phase == WARM_RUNNING) {
			if (cancelled || runner_cancel_requested(req->cancel))
				c->cancelled = true;
			else if (!c->io.limit)
				c->timed_out = true;
		}
		if (!warm_escalate(b, c)) {
			log_warnx("warm box %s does not answer; killing it",
			          b->box->id);
			warm_kill(b, "unresponsive");
			return;
		}
		/* Output stops counting; the agent has the grace to answer. */
		until = mono_ms() + env->cfg->interrupt_grace_ms;
	}
}

/* A number of a D frame's field (or of its "mem" object), or -1. */
static long long warm_num(const cJSON *o, const char *name)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);

	return cJSON_IsNumber(v) && v->valuedouble >= 0 && v->valuedouble < 9e15
	           ? (long long)v->valuedouble
	           : -1;
}

/* The kernel's result (X): the value and an exception's type. */
static void warm_take_x(const cJSON *x, struct runner_result *res)
{
	const cJSON *value = cJSON_GetObjectItemCaseSensitive(x, "value");
	const cJSON *error = cJSON_GetObjectItemCaseSensitive(x, "error");
	const char *ename = cJSON_GetStringValue(
	    cJSON_GetObjectItemCaseSensitive(error, "ename"));

	if (cJSON_IsObject(value) && cJSON_GetArraySize(value) > 0)
		res->value_json = cJSON_PrintUnformatted(value);
	if (ename)
		snprintf(res->error_name, sizeof(res->error_name), "%.63s",
		         ename);
}

/* Why the kernel died, for the state report, from what we did to it. */
static const char *warm_lost_reason(const struct warm_call *c,
                                    const char *agent_says)
{
	if (agent_says && strcmp(agent_says, "killed") == 0)
		return c->timed_out   ? "timeout_kill"
		       : c->cancelled ? "cancel_kill"
		                      : "output_limit_kill";
	return agent_says && agent_says[0] ? agent_says : "crash";
}

/* Reads the D frame into res; updates what b knows of its kernel. */
static void warm_take_d(struct warm_box *b, const struct warm_call *c,
                        struct runner_result *res)
{
	const cJSON *d = c->io.d;
	const cJSON *mem = cJSON_GetObjectItemCaseSensitive(d, "mem");
	const char *kernel =
	    cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(d, "kernel"));
	const char *why = cJSON_GetStringValue(
	    cJSON_GetObjectItemCaseSensitive(d, "kernel_reason"));
	long long code = warm_num(d, "exit_code");
	long long ooms = warm_num(mem, "oom_kills");

	res->exit_code = code >= 0 && code < 256 ? (int)code : -1;
	res->cpu_ms = warm_num(d, "cpu_ms");
	res->session.memory_bytes = warm_num(mem, "usage");
	res->session.memory_peak_bytes = warm_num(mem, "peak");
	res->session.memory_limit_bytes = warm_num(mem, "limit");
	if (ooms > b->oom_kills_seen) {
		res->child_oom = true;
		b->oom_kills_seen = ooms;
	}
	if (kernel && strcmp(kernel, "lost") == 0) {
		const char *r = warm_lost_reason(c, why);

		res->session.lost = true;
		snprintf(res->session.lost_reason,
		         sizeof(res->session.lost_reason), "%s", r);
		/* Told again with the next run, which gets a new kernel. */
		snprintf(b->lost, sizeof(b->lost), "%s", r);
		b->ready = false;
		if (strcmp(r, "oom") == 0)
			res->oom_killed = true;
	} else {
		b->ready = true;
	}
	if (c->io.x)
		warm_take_x(c->io.x, res);
}

/* The run's status from how it ended. */
static void warm_classify(const struct warm_box *b, const struct warm_call *c,
                          struct runner_result *res)
{
	res->timed_out = c->timed_out;
	if (c->cancelled)
		res->status = RUNNER_CANCELLED;
	else if (c->io.limit)
		res->status = RUNNER_OUTPUT_LIMIT;
	else if (c->timed_out)
		res->status = RUNNER_TIMED_OUT;
	else if (!c->io.done && b->dead && strcmp(b->dead_reason, "oom") == 0) {
		res->oom_killed = true;
		res->status = RUNNER_OOM_KILLED;
	} else if (!c->io.done) {
		res->status = RUNNER_ERROR;
		if (!res->message[0])
			snprintf(res->message, sizeof(res->message),
			         "the sandbox of this conversation stopped "
			         "(%s); run again to get a fresh one",
			         b->dead_reason);
	} else if (res->oom_killed || res->child_oom) {
		res->oom_killed = true;
		res->status = RUNNER_OOM_KILLED;
	} else if (res->exit_code == 0) {
		res->status = RUNNER_COMPLETED;
	} else {
		res->status = RUNNER_FAILED;
	}
	if (b->dead) {
		res->session.lost = true;
		snprintf(res->session.lost_reason,
		         sizeof(res->session.lost_reason), "%s",
		         b->dead_reason);
	}
}

/* Waits for a kernel that is restarting; 0 or -errno with a message. */
static int warm_exec_ready(struct warm_box *b, const struct runner_request *req,
                           struct runner_result *res)
{
	struct warm_io io = {.b = b};
	bool cancelled = false, oom;
	int rc;

	if (b->ready)
		return 0;
	rc = warm_pump(&io, mono_ms() + WARM_START_MS,
	               runner_cancel_fd(req->cancel), warm_until_ready,
	               &cancelled);
	warm_io_finish(&io);
	if (rc == 1)
		return 0;
	if (cancelled) {
		res->status = RUNNER_CANCELLED;
		snprintf(res->message, sizeof(res->message),
		         "cancelled before the run started");
		return -ECANCELED;
	}
	if (rc == -EPIPE)
		warm_died(b, &oom);
	else
		warm_kill(b, rc == 0 ? "unresponsive" : "protocol");
	return -EIO;
}

int warm_box_exec(const struct warm_env *env, struct warm_box *b,
                  const struct runner_request *req,
                  const struct catalog_image *img, struct runner_result *res)
{
	const struct config *cfg = env->cfg;
	struct attachio_capture cap_out, cap_err;
	struct warm_call c;
	long long t_start;
	int ret = 0;

	memset(&c, 0, sizeof(c));
	memset(&cap_out, 0, sizeof(cap_out));
	memset(&cap_err, 0, sizeof(cap_err));
	res->session.warm = true;
	res->session.stateful = b->kernel;
	res->session.memory_bytes = res->session.memory_peak_bytes = -1;
	res->session.memory_limit_bytes = -1;
	res->cpu_ms = -1;
	res->status = RUNNER_ERROR;
	snprintf(res->container, sizeof(res->container), "%s", b->box->id);
	if (b->lost[0] && strcmp(res->session.state, "continued") == 0) {
		snprintf(res->session.state, sizeof(res->session.state),
		         "restarted");
		snprintf(res->session.reason, sizeof(res->session.reason), "%s",
		         b->lost);
	}
	b->lost[0] = '\0';
	if (attachio_capture_init(&cap_out, cfg->output_inline_bytes,
	                          req->stdout_fd, cfg->output_max_bytes) < 0 ||
	    attachio_capture_init(&cap_err, cfg->output_inline_bytes,
	                          req->stderr_fd, cfg->output_max_bytes) < 0) {
		snprintf(res->message, sizeof(res->message), "out of memory");
		goto out;
	}
	if (warm_exec_ready(b, req, res) < 0) {
		ret = res->status == RUNNER_CANCELLED ? 0 : -EAGAIN;
		goto classify_dead;
	}
	c.id = b->next_id++;
	c.io.b = b;
	c.io.req = req;
	c.io.exec_id = c.id;
	c.io.out = &cap_out;
	c.io.err = &cap_err;
	c.io.max_total = cfg->output_max_bytes;
	if (warm_exec_send(b, req, img, c.id, res->message,
	                   sizeof(res->message)) < 0) {
		/* Nothing ran: the caller may try a fresh box. */
		warm_kill(b, "unresponsive");
		ret = -EAGAIN;
		goto classify_dead;
	}
	b->ready = false;
	b->calls++;
	t_start = mono_ms();
	if (req->on_event)
		req->on_event(req->event_arg, RUNNER_EVENT_STARTED, 0);
	warm_exec_drive(env, b, req, &c,
	                t_start + (long long)res->timeout_s * 1000);
	res->duration_ms = mono_ms() - t_start;
	if (c.io.done)
		warm_take_d(b, &c, res);
	warm_classify(b, &c, res);
	goto out;
classify_dead:
	if (res->status != RUNNER_CANCELLED)
		warm_classify(b, &c, res);
out:
	warm_io_finish(&c.io);
	if (runner_output_fill(&cap_out, &res->out) < 0 ||
	    runner_output_fill(&cap_err, &res->err) < 0) {
		res->status = RUNNER_ERROR;
		snprintf(res->message, sizeof(res->message), "out of memory");
	}
	attachio_capture_finish(&cap_out);
	attachio_capture_finish(&cap_err);
	return ret;
}
