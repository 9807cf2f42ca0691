/* SPDX-License-Identifier: MIT */
/*
 * workspace: the manager of per-conversation directories. On disk, under
 * SANDBOX_ROOT:
 *   .lock                one daemon per SANDBOX_ROOT (flock)
 *   workspaces/<name>/   what containers get as /data: a plain directory
 *                        (quota mode none) or the mount point of the image
 *                        (loop mode; mode 000 while unmounted, so nothing
 *                        can be written to it by mistake)
 *   images/<name>.img    the ext4 image of a loop-mode workspace
 *   meta/<name>          marker: exists once the workspace is complete; its
 *                        mtime is the last use, out of reach of code
 * In memory, an entry per workspace that is open, being prepared or torn
 * down, or mounted. One mutex guards the entries; slow work (mkfs, mount,
 * unmount, deletion) happens outside it with the entry marked busy, and
 * anyone else wanting that entry waits on the condition variable.
 */
#include "workspace.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/params.h>
#include <openssl/rand.h>

#include "buf.h"
#include "files.h"
#include "fsname.h"
#include "fstree.h"
#include "log.h"
#include "util/errmsg.h"
#include "loopfs.h"
#include "util/hex.h"
#include "util/mono.h"
#include "util/pct.h"

#define IDLE_UNMOUNT_MS 60000
#define IMAGE_MIN_BYTES (8ULL * 1024 * 1024)
#define PROBE_BYTES (16ULL * 1024 * 1024)
#define CONVERSATION_ID_MAX 256

static const char name_purpose[] = "mcp-sandboxd workspace name v1";

struct ws_entry {
	struct ws_entry *next;
	char name[WORKSPACE_NAME_LEN + 1];
	unsigned refs;    /* open handles */
	unsigned waiters; /* threads waiting for busy to clear */
	bool busy;        /* prepared, unmounted or deleted outside the lock */
	bool ready;       /* exists, and is mounted when loop */
	bool loop;        /* an image-backed workspace */
	bool mounted;
	bool locked; /* the run lock */
	unsigned sweep_gen;
	long long idle_since; /* monotonic ms when refs last fell to 0 */
};

struct workspace_mgr {
	const struct config *cfg;
	EVP_MAC *mac;
	unsigned char key[32];
	bool loop; /* the quota mode in effect */
	int rootfd, wsfd, metafd, imgfd, lockfd;
	char ws_path[300], img_path[300];
	pthread_mutex_t mu;
	pthread_cond_t cond; /* entry state changed; CLOCK_MONOTONIC */
	struct ws_entry *entries;
	unsigned count; /* complete workspaces on disk, plus reservations */
	unsigned sweep_gen;
};

struct workspace {
	struct workspace_mgr *mgr;
	struct ws_entry *e;
	int dirfd;
	bool locked;
	char *host_path;
	char *conv; /* NULL when opened by name */
};

/* ---- small helpers ---------------------------------------------------- */

static bool is_name(const char *s)
{
	size_t i;

	for (i = 0; s[i]; i++)
		if (!((s[i] >= '0' && s[i] <= '9') ||
		      (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return i == WORKSPACE_NAME_LEN;
}

/* Who owns what the daemon creates in a workspace ((uid_t)-1: nobody). */
static void owner(const struct workspace_mgr *m, uid_t *uid, gid_t *gid)
{
	if (geteuid() == 0) {
		*uid = (uid_t)m->cfg->sandbox_uid;
		*gid = (gid_t)m->cfg->sandbox_gid;
	} else {
		*uid = (uid_t)-1;
		*gid = (gid_t)-1;
	}
}

static uint64_t image_bytes(const struct config *cfg)
{
	uint64_t b = cfg->workspace_quota_bytes;

	return b < IMAGE_MIN_BYTES ? IMAGE_MIN_BYTES : b;
}

/* ---- names ------------------------------------------------------------ */

static int mac_field(EVP_MAC_CTX *ctx, const char *s)
{
	size_t n = s ? strlen(s) : 0;
	unsigned char len[8];

	for (int i = 0; i < 8; i++)
		len[i] = (unsigned char)((uint64_t)n >> (56 - 8 * i));
	if (!EVP_MAC_update(ctx, len, sizeof(len)))
		return -1;
	if (n && !EVP_MAC_update(ctx, (const unsigned char *)s, n))
		return -1;
	return 0;
}

void workspace_name_for(const struct workspace_mgr *mgr, const char *tenant,
                        const char *conversation_id,
                        char out[WORKSPACE_NAME_LEN + 1])
{
	char digest[] = "SHA256";
	OSSL_PARAM params[] = {
	    OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
	    OSSL_PARAM_construct_end(),
	};
	unsigned char md[EVP_MAX_MD_SIZE];
	size_t mdlen = 0;
	EVP_MAC_CTX *ctx = EVP_MAC_CTX_new(mgr->mac);

	out[0] = '\0';
	/*
	 * Each field is preceded by its length, so ("ab", "c") and
	 * ("a", "bc") are different messages.
	 */
	if (ctx && EVP_MAC_init(ctx, mgr->key, sizeof(mgr->key), params) &&
	    mac_field(ctx, tenant) == 0 &&
	    mac_field(ctx, conversation_id) == 0 &&
	    EVP_MAC_final(ctx, md, &mdlen, sizeof(md)) && mdlen >= 32)
		hex_encode(md, 32, out);
	EVP_MAC_CTX_free(ctx);
}

int workspace_check_conversation_id(const char *id, char *err, size_t errlen)
{
	char why[200];

	if (!id)
		return errmsg_fail(-EINVAL, err, errlen,
		                   "conversationId is required");
	if (fsname_check_text(id, strlen(id), CONVERSATION_ID_MAX,
	                      "conversationId", why, sizeof(why)) < 0) {
		errmsg_set(
		    err, errlen,
		    "%s; use 1 to %d bytes of printable UTF-8, the same id "
		    "on every call of one conversation, e.g. 'chat-42'",
		    why, CONVERSATION_ID_MAX);
		return -EINVAL;
	}
	return 0;
}

/* ---- entries ------------------------------------------------------------ */

static struct ws_entry *entry_find(struct workspace_mgr *m, const char *name)
{
	for (struct ws_entry *e = m->entries; e; e = e->next)
		if (strcmp(e->name, name) == 0)
			return e;
	return NULL;
}

static struct ws_entry *entry_get(struct workspace_mgr *m, const char *name)
{
	struct ws_entry *e = entry_find(m, name);

	if (e)
		return e;
	e = calloc(1, sizeof(*e));
	if (!e)
		return NULL;
	/* Names are 64 hex characters; the precision says so to the compiler.
	 */
	snprintf(e->name, sizeof(e->name), "%.*s", WORKSPACE_NAME_LEN, name);
	e->next = m->entries;
	m->entries = e;
	return e;
}

/* Frees an entry nobody needs. Called with the lock held. */
static void entry_maybe_free(struct workspace_mgr *m, struct ws_entry *e)
{
	if (e->refs || e->waiters || e->busy || e->mounted || e->locked)
		return;
	for (struct ws_entry **pp = &m->entries; *pp; pp = &(*pp)->next) {
		if (*pp == e) {
			*pp = e->next;
			free(e);
			return;
		}
	}
}

static void entry_wait_idle(struct workspace_mgr *m, struct ws_entry *e)
{
	while (e->busy) {
		e->waiters++;
		pthread_cond_wait(&m->cond, &m->mu);
		e->waiters--;
	}
}

/* ---- on disk ------------------------------------------------------------ */

static bool marker_exists(struct workspace_mgr *m, const char *name)
{
	struct stat st;

	return fstatat(m->metafd, name, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

static bool image_exists(struct workspace_mgr *m, const char *name)
{
	char img[WORKSPACE_NAME_LEN + 8];
	struct stat st;

	snprintf(img, sizeof(img), "%s.img", name);
	return fstatat(m->imgfd, img, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

static void paths(struct workspace_mgr *m, const char *name, char *dir,
                  size_t dirlen, char *img, size_t imglen)
{
	snprintf(dir, dirlen, "%s/%.64s", m->ws_path, name);
	snprintf(img, imglen, "%s/%.64s.img", m->img_path, name);
}

/* Mounts an existing image at its mount point, adopting a live mount. */
static int mount_image(struct workspace_mgr *m, struct ws_entry *e, char *err,
                       size_t errlen)
{
	char dir[400], img[400], why[512];
	int r;

	paths(m, e->name, dir, sizeof(dir), img, sizeof(img));
	if (mkdirat(m->wsfd, e->name, 0) < 0 && errno != EEXIST)
		return errmsg_fail(-EIO, err, errlen, "cannot create %s: %s",
		                   dir, strerror(errno));
	r = loopfs_is_mountpoint(m->wsfd, e->name);
	if (r == 1) {
		e->mounted = true;
		return 0;
	}
	r = loopfs_mount(img, dir, why, sizeof(why));
	if (r < 0) {
		log_errorx("workspace %.12s: %s", e->name, why);
		errmsg_set(
		    err, errlen,
		    "the workspace of this conversation cannot be mounted "
		    "now; try again later");
		return r;
	}
	e->mounted = true;
	return 0;
}

/* Makes the root of a freshly mounted image ready for the sandbox user. */
static int tidy_new_root(struct workspace_mgr *m, const char *name)
{
	int fd = openat(m->wsfd, name,
	                O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	int r = 0;

	if (fd < 0)
		return -errno;
	/* fsck alone needs lost+found; code does not. */
	if (unlinkat(fd, "lost+found", AT_REMOVEDIR) < 0 && errno != ENOENT)
		r = -errno;
	if (r == 0 && fchmod(fd, 0700) < 0)
		r = -errno;
	close(fd);
	return r;
}

static void remove_data(struct workspace_mgr *m, const char *name, bool loop)
{
	char dir[400], img[400];

	paths(m, name, dir, sizeof(dir), img, sizeof(img));
	if (loop) {
		if (loopfs_is_mountpoint(m->wsfd, name) == 1)
			(void)!loopfs_umount(dir);
		snprintf(img, sizeof(img), "%s.img", name);
		unlinkat(m->imgfd, img, 0);
	}
	(void)!fstree_remove(m->wsfd, name);
}

/* Creates a workspace; the count is already reserved by the caller. */
static int create_workspace(struct workspace_mgr *m, struct ws_entry *e,
                            char *err, size_t errlen)
{
	const struct config *cfg = m->cfg;
	char dir[400], img[400], why[512];
	uid_t uid;
	gid_t gid;
	int r, fd;

	owner(m, &uid, &gid);
	paths(m, e->name, dir, sizeof(dir), img, sizeof(img));
	e->loop = m->loop;
	if (m->loop) {
		struct statvfs sv;

		/*
		 * Images are sparse, so the host can promise more than it has.
		 * Admit a new one only while a whole quota still fits: an
		 * image whose writes fail on the host aborts its journal and
		 * turns read-only, which is worse than a clear refusal now.
		 */
		if (statvfs(cfg->sandbox_root, &sv) == 0 &&
		    (unsigned long long)sv.f_bavail * sv.f_frsize <
		        image_bytes(cfg) + 8ULL * 1024 * 1024) {
			log_warnx("refusing a new workspace: %s has less free "
			          "space than one quota (%zu bytes) plus 8 MB",
			          cfg->sandbox_root,
			          cfg->workspace_quota_bytes);
			errmsg_set(
			    err, errlen,
			    "the server's disk is too full for a new "
			    "workspace; "
			    "try again later (the operator has been told)");
			return -ENOSPC;
		}
		r = loopfs_format(
		    img, image_bytes(cfg), cfg->workspace_max_files,
		    uid == (uid_t)-1 ? geteuid() : uid,
		    gid == (gid_t)-1 ? getegid() : gid, why, sizeof(why));
		if (r < 0) {
			log_errorx("workspace %.12s: %s", e->name, why);
			errmsg_set(err, errlen,
			           "cannot create a workspace for this "
			           "conversation now; try again later");
			return r;
		}
		r = mount_image(m, e, err, errlen);
		if (r == 0)
			r = tidy_new_root(m, e->name);
	} else {
		r = mkdirat(m->wsfd, e->name, 0700) < 0 ? -errno : 0;
		if (r == 0 && uid != (uid_t)-1 &&
		    fchownat(m->wsfd, e->name, uid, gid, AT_SYMLINK_NOFOLLOW) <
		        0)
			r = -errno;
	}
	if (r < 0)
		goto undo;
	/* The marker commits the workspace: it exists from here on. */
	fd = openat(m->metafd, e->name,
	            O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0) {
		r = -errno;
		goto undo;
	}
	close(fd);
	log_info("workspace %.12s created (%s)", e->name,
	         m->loop ? "loop image" : "plain directory");
	return 0;
undo:
	if (err && !err[0])
		errmsg_set(
		    err, errlen,
		    "cannot create a workspace for this conversation: %s",
		    strerror(-r));
	log_errorx("workspace %.12s: creation failed: %s", e->name,
	           strerror(-r));
	remove_data(m, e->name, m->loop);
	e->mounted = false;
	return r;
}

/* Brings an entry to ready: creates, recreates or mounts as needed. */
static int prepare(struct workspace_mgr *m, struct ws_entry *e, bool create,
                   char *err, size_t errlen)
{
	const struct config *cfg = m->cfg;
	uid_t uid;
	gid_t gid;
	int r;

	if (!marker_exists(m, e->name)) {
		if (!create)
			return -ENOENT;
		pthread_mutex_lock(&m->mu);
		if (m->count >= cfg->max_workspaces) {
			pthread_mutex_unlock(&m->mu);
			log_warnx("workspace cap of %u reached",
			          cfg->max_workspaces);
			errmsg_set(
			    err, errlen,
			    "this server already keeps %u workspaces, its "
			    "maximum; try again later (idle workspaces are "
			    "deleted after %u hours) or ask the operator to "
			    "raise WORKSPACE_MAX_COUNT",
			    cfg->max_workspaces, cfg->retention_hours);
			return -ENOSPC;
		}
		m->count++;
		pthread_mutex_unlock(&m->mu);
		r = create_workspace(m, e, err, errlen);
		if (r < 0) {
			pthread_mutex_lock(&m->mu);
			m->count--;
			pthread_mutex_unlock(&m->mu);
		}
		return r;
	}
	e->loop = image_exists(m, e->name);
	if (e->loop) {
		if (!m->loop) {
			log_errorx("workspace %.12s has an image but loop "
			           "mounts are not in use",
			           e->name);
			errmsg_set(
			    err, errlen,
			    "the workspace of this conversation was made "
			    "with a quota image, which this server cannot "
			    "mount now; ask the operator (quota mode)");
			return -EIO;
		}
		return e->mounted ? 0 : mount_image(m, e, err, errlen);
	}
	/* A marker without its directory: deletion was cut short. */
	owner(m, &uid, &gid);
	if (mkdirat(m->wsfd, e->name, 0700) == 0) {
		if (uid != (uid_t)-1)
			(void)!fchownat(m->wsfd, e->name, uid, gid,
			                AT_SYMLINK_NOFOLLOW);
	} else if (errno != EEXIST) {
		return errmsg_fail(-EIO, err, errlen,
		                   "cannot prepare the workspace: %s",
		                   strerror(errno));
	}
	return 0;
}

/* ---- opening and closing ----------------------------------------------- */

static int acquire(struct workspace_mgr *m, const char *name, bool create,
                   struct ws_entry **out, char *err, size_t errlen)
{
	struct ws_entry *e;
	int r = 0;

	*out = NULL;
	pthread_mutex_lock(&m->mu);
	e = entry_get(m, name);
	if (!e) {
		pthread_mutex_unlock(&m->mu);
		return -ENOMEM;
	}
	entry_wait_idle(m, e);
	e->refs++;
	if (!e->ready) {
		e->busy = true;
		pthread_mutex_unlock(&m->mu);
		r = prepare(m, e, create, err, errlen);
		pthread_mutex_lock(&m->mu);
		e->busy = false;
		e->ready = r == 0;
		pthread_cond_broadcast(&m->cond);
	}
	if (r < 0) {
		e->refs--;
		entry_maybe_free(m, e);
	} else {
		*out = e;
	}
	pthread_mutex_unlock(&m->mu);
	return r;
}

static void release(struct workspace_mgr *m, struct ws_entry *e, bool unlock)
{
	pthread_mutex_lock(&m->mu);
	if (unlock && e->locked) {
		e->locked = false;
		pthread_cond_broadcast(&m->cond);
	}
	if (--e->refs == 0)
		e->idle_since = mono_ms();
	entry_maybe_free(m, e);
	pthread_mutex_unlock(&m->mu);
}

static int open_handle(struct workspace_mgr *m, const char *name, bool create,
                       const char *conv, struct workspace **out, char *err,
                       size_t errlen)
{
	struct workspace *ws;
	struct ws_entry *e;
	struct stat self, parent;
	int r;

	r = acquire(m, name, create, &e, err, errlen);
	if (r < 0)
		return r;
	ws = calloc(1, sizeof(*ws));
	if (!ws) {
		release(m, e, false);
		return -ENOMEM;
	}
	ws->mgr = m;
	ws->e = e;
	ws->dirfd = openat(m->wsfd, name,
	                   O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (ws->dirfd < 0) {
		r = -errno;
		goto fail;
	}
	/* In loop mode the directory must be the image, never the bare dir. */
	if (e->loop &&
	    (fstat(ws->dirfd, &self) < 0 || fstat(m->wsfd, &parent) < 0 ||
	     self.st_dev == parent.st_dev)) {
		log_errorx("workspace %.12s: not mounted where expected", name);
		errmsg_set(
		    err, errlen,
		    "the workspace of this conversation is not available "
		    "now; try again later");
		r = -EIO;
		goto fail;
	}
	ws->host_path =
	    buf_asprintf("%s/workspaces/%s", m->cfg->sandbox_host_path, name);
	ws->conv = conv ? strdup(conv) : NULL;
	if (!ws->host_path || (conv && !ws->conv)) {
		r = -ENOMEM;
		goto fail;
	}
	*out = ws;
	return 0;
fail:
	if (ws->dirfd >= 0)
		close(ws->dirfd);
	free(ws->host_path);
	free(ws->conv);
	free(ws);
	release(m, e, false);
	return r;
}

int workspace_open(struct workspace_mgr *mgr, const char *tenant,
                   const char *conversation_id, bool create,
                   struct workspace **out, char *err, size_t errlen)
{
	char name[WORKSPACE_NAME_LEN + 1];
	int r;

	*out = NULL;
	if (err && errlen)
		err[0] = '\0';
	r = workspace_check_conversation_id(conversation_id, err, errlen);
	if (r < 0)
		return r;
	workspace_name_for(mgr, tenant, conversation_id, name);
	if (!name[0])
		return -ENOMEM;
	r = open_handle(mgr, name, create, conversation_id, out, err, errlen);
	if (r == -ENOENT && err && errlen && !err[0])
		errmsg_set(
		    err, errlen,
		    "this conversation has no files yet: upload one with "
		    "upload_file or write to /data in a run");
	if (r < 0)
		return r;
	/* Last use, for retention: kept where code cannot touch it. */
	if (utimensat(mgr->metafd, name, NULL, AT_SYMLINK_NOFOLLOW) < 0)
		log_warn("workspace %.12s: cannot record its use", name);
	return 0;
}

int workspace_open_by_name(struct workspace_mgr *mgr, const char *name,
                           struct workspace **out)
{
	*out = NULL;
	if (!name || !is_name(name))
		return -ENOENT;
	return open_handle(mgr, name, false, NULL, out, NULL, 0);
}

void workspace_close(struct workspace *ws)
{
	if (!ws)
		return;
	close(ws->dirfd);
	release(ws->mgr, ws->e, ws->locked);
	free(ws->host_path);
	free(ws->conv);
	free(ws);
}

int workspace_lock(struct workspace *ws, unsigned timeout_ms)
{
	struct workspace_mgr *m = ws->mgr;
	struct timespec dl;
	int r = 0;

	mono_deadline(&dl, timeout_ms);

	if (ws->locked)
		return -EDEADLK;
	pthread_mutex_lock(&m->mu);
	while (ws->e->locked && r != ETIMEDOUT)
		r = pthread_cond_timedwait(&m->cond, &m->mu, &dl);
	if (ws->e->locked) {
		pthread_mutex_unlock(&m->mu);
		return -ETIMEDOUT;
	}
	ws->e->locked = true;
	ws->locked = true;
	pthread_mutex_unlock(&m->mu);
	return 0;
}

const char *workspace_name(const struct workspace *ws)
{
	return ws->e->name;
}

const char *workspace_host_path(const struct workspace *ws)
{
	return ws->host_path;
}

int workspace_dirfd(const struct workspace *ws)
{
	return ws->dirfd;
}

char *workspace_file_url(const struct workspace_mgr *mgr,
                         const struct workspace *ws, const char *rel)
{
	char *enc = pct_encode(rel, true), *url;

	if (!enc)
		return NULL;
	url = buf_asprintf("%s/files/%s/%s", mgr->cfg->files_base_url,
	                   ws->e->name, enc);
	free(enc);
	return url;
}

char *workspace_resource_uri(const struct workspace *ws, const char *rel)
{
	char *c, *r, *uri = NULL;

	if (!ws->conv)
		return NULL;
	c = pct_encode(ws->conv, false);
	r = pct_encode(rel, true);
	if (c && r)
		uri = buf_asprintf("sandbox://%s/%s", c, r);
	free(c);
	free(r);
	return uri;
}

const char *workspace_mgr_quota_mode(const struct workspace_mgr *mgr)
{
	return mgr->loop ? "loop" : "none";
}

const struct config *workspace_mgr_config(const struct workspace_mgr *mgr)
{
	return mgr->cfg;
}

bool workspace_mgr_health(void *data, cJSON *health)
{
	struct workspace_mgr *m = data;
	unsigned count, mounted = 0;
	cJSON *o;

	pthread_mutex_lock(&m->mu);
	count = m->count;
	for (struct ws_entry *e = m->entries; e; e = e->next)
		mounted += !e->busy && e->mounted;
	pthread_mutex_unlock(&m->mu);
	o = cJSON_AddObjectToObject(health, "workspaces");
	if (!o)
		return true;
	cJSON_AddNumberToObject(o, "count", count);
	cJSON_AddNumberToObject(o, "max", m->cfg->max_workspaces);
	cJSON_AddNumberToObject(o, "mounted", mounted);
	cJSON_AddStringToObject(o, "quotaMode", workspace_mgr_quota_mode(m));
	return true;
}

struct workspace_mgr *workspace_mgr_of(const struct workspace *ws)
{
	return ws->mgr;
}

bool workspace_quota_enforced(const struct workspace *ws)
{
	return ws->e->loop;
}

const char *workspace_conversation_id(const struct workspace *ws)
{
	return ws->conv;
}

/* ---- retention ------------------------------------------------------------
 */

/* Deletes what a workspace has on disk, marker last. Entry is busy. */
static int delete_workspace(struct workspace_mgr *m, struct ws_entry *e)
{
	char dir[400], img[400];
	int r;

	paths(m, e->name, dir, sizeof(dir), img, sizeof(img));
	if (image_exists(m, e->name)) {
		if (e->mounted || loopfs_is_mountpoint(m->wsfd, e->name) == 1) {
			r = loopfs_umount(dir);
			if (r < 0 && r != -EINVAL)
				return r;
		}
		e->mounted = false;
		snprintf(img, sizeof(img), "%s.img", e->name);
		if (unlinkat(m->imgfd, img, 0) < 0 && errno != ENOENT)
			return -errno;
	} else if (loopfs_is_mountpoint(m->wsfd, e->name) == 1) {
		return -EBUSY; /* something else is mounted there */
	}
	r = fstree_remove(m->wsfd, e->name);
	if (r < 0)
		return r;
	if (unlinkat(m->metafd, e->name, 0) < 0 && errno != ENOENT)
		return -errno;
	return 0;
}

static bool expired(struct workspace_mgr *m, const char *name)
{
	struct stat st;
	time_t now = time(NULL);

	if (fstatat(m->metafd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return false;
	return now - st.st_mtime >= (time_t)m->cfg->retention_hours * 3600;
}

/* Deletes one expired workspace unless it is in use. Returns 1 if so. */
static int try_delete(struct workspace_mgr *m, const char *name)
{
	struct ws_entry *e;
	int r;

	pthread_mutex_lock(&m->mu);
	e = entry_get(m, name);
	if (!e || e->refs || e->busy || e->locked) {
		if (e)
			entry_maybe_free(m, e);
		pthread_mutex_unlock(&m->mu);
		return 0;
	}
	e->busy = true;
	pthread_mutex_unlock(&m->mu);
	/* Used between the scan and the claim? Then it stays. */
	r = expired(m, name) ? delete_workspace(m, e) : 1;
	pthread_mutex_lock(&m->mu);
	e->busy = false;
	e->ready = false;
	if (r == 0 && m->count)
		m->count--;
	pthread_cond_broadcast(&m->cond);
	entry_maybe_free(m, e);
	pthread_mutex_unlock(&m->mu);
	if (r < 0)
		log_warnx("workspace %.12s: deletion postponed: %s", name,
		          strerror(-r));
	else if (r == 0)
		log_info("workspace %.12s deleted after %u hours without use",
		         name, m->cfg->retention_hours);
	return r == 0;
}

/* Unmounts idle images. all: regardless of how long they were idle. */
static void unmount_idle(struct workspace_mgr *m, bool all)
{
	unsigned gen;

	pthread_mutex_lock(&m->mu);
	gen = ++m->sweep_gen;
	for (;;) {
		struct ws_entry *e;
		char dir[400], img[400];
		long long now = mono_ms();
		int r;

		for (e = m->entries; e; e = e->next)
			/* busy first: mounted is not ours to read then. */
			if (!e->busy && e->mounted && !e->refs && !e->waiters &&
			    e->sweep_gen != gen &&
			    (all || now - e->idle_since >= IDLE_UNMOUNT_MS))
				break;
		if (!e)
			break;
		e->sweep_gen = gen;
		e->busy = true;
		pthread_mutex_unlock(&m->mu);
		paths(m, e->name, dir, sizeof(dir), img, sizeof(img));
		r = loopfs_umount(dir);
		pthread_mutex_lock(&m->mu);
		e->busy = false;
		if (r == 0 || r == -EINVAL) {
			e->mounted = false;
			e->ready = false;
		} else {
			log_debug("workspace %.12s: still busy (%s), stays "
			          "mounted",
			          e->name, strerror(-r));
		}
		pthread_cond_broadcast(&m->cond);
		entry_maybe_free(m, e);
	}
	pthread_mutex_unlock(&m->mu);
}

unsigned workspace_mgr_sweep(struct workspace_mgr *mgr, bool unmount_all)
{
	unsigned deleted = 0;
	struct dirent *de;
	DIR *d;
	int fd;

	if (mgr->loop)
		unmount_idle(mgr, unmount_all);
	fd = openat(mgr->metafd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	d = fdopendir(fd);
	if (!d) {
		close(fd);
		return 0;
	}
	while ((de = readdir(d)))
		if (is_name(de->d_name) && expired(mgr, de->d_name))
			deleted += (unsigned)try_delete(mgr, de->d_name);
	closedir(d);
	return deleted;
}

void workspace_job_sweep(void *mgr)
{
	workspace_mgr_sweep(mgr, false);
}

/* ---- start-up ------------------------------------------------------------ */

static int open_sub(struct workspace_mgr *m, const char *sub, int *fd,
                    char *err, size_t errlen)
{
	if (mkdirat(m->rootfd, sub, 0700) < 0 && errno != EEXIST)
		return errmsg_fail(-errno, err, errlen,
		                   "cannot create %s/%s: %s",
		                   m->cfg->sandbox_root, sub, strerror(errno));
	*fd = openat(m->rootfd, sub,
	             O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (*fd < 0)
		return errmsg_fail(-errno, err, errlen, "cannot open %s/%s: %s",
		                   m->cfg->sandbox_root, sub, strerror(errno));
	return 0;
}

static int prepare_dirs(struct workspace_mgr *m, char *err, size_t errlen)
{
	const char *root = m->cfg->sandbox_root;
	int r;

	if (mkdir(root, 0711) < 0 && errno != EEXIST)
		return errmsg_fail(-errno, err, errlen,
		                   "cannot create SANDBOX_ROOT=%s: %s", root,
		                   strerror(errno));
	m->rootfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (m->rootfd < 0)
		return errmsg_fail(-errno, err, errlen,
		                   "cannot open SANDBOX_ROOT=%s: %s", root,
		                   strerror(errno));
	m->lockfd = openat(m->rootfd, ".lock",
	                   O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (m->lockfd < 0)
		return errmsg_fail(-errno, err, errlen,
		                   "cannot create %s/.lock: %s", root,
		                   strerror(errno));
	if (flock(m->lockfd, LOCK_EX | LOCK_NB) < 0)
		return errmsg_fail(
		    -EBUSY, err, errlen,
		    "another mcp-sandboxd uses SANDBOX_ROOT=%s; give "
		    "each instance its own",
		    root);
	if ((r = open_sub(m, "workspaces", &m->wsfd, err, errlen)) < 0 ||
	    (r = open_sub(m, "meta", &m->metafd, err, errlen)) < 0 ||
	    (r = open_sub(m, "images", &m->imgfd, err, errlen)) < 0)
		return r;
	snprintf(m->ws_path, sizeof(m->ws_path), "%s/workspaces", root);
	snprintf(m->img_path, sizeof(m->img_path), "%s/images", root);
	return 0;
}

/* Tries a real image, mount and write once; the reason in why. */
static int probe_loop(struct workspace_mgr *m, char *why, size_t whylen)
{
	const char *root = m->cfg->sandbox_root;
	char img[300], mnt[300];
	struct statvfs sv;
	int r, fd;

	snprintf(img, sizeof(img), "%s/.probe.img", root);
	snprintf(mnt, sizeof(mnt), "%s/.probe", root);
	if (loopfs_is_mountpoint(m->rootfd, ".probe") == 1)
		(void)!loopfs_umount(mnt);
	unlinkat(m->rootfd, ".probe.img", 0);
	(void)!fstree_remove(m->rootfd, ".probe");
	if (mkdirat(m->rootfd, ".probe", 0) < 0)
		return errmsg_fail(-errno, why, whylen, "cannot create %s: %s",
		                   mnt, strerror(errno));
	r = loopfs_format(img, PROBE_BYTES, 64, geteuid(), getegid(), why,
	                  whylen);
	if (r < 0)
		goto out;
	r = loopfs_mount(img, mnt, why, whylen);
	if (r < 0)
		goto out;
	if (loopfs_is_mountpoint(m->rootfd, ".probe") != 1) {
		r = errmsg_fail(-EIO, why, whylen,
		                "the mount at %s is not visible", mnt);
		goto umount;
	}
	fd = open(mnt, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || fstatvfs(fd, &sv) < 0 || sv.f_files > 1024) {
		r = errmsg_fail(-EIO, why, whylen,
		                "the probe image does not limit inodes");
		if (fd >= 0)
			close(fd);
		goto umount;
	}
	close(fd);
	r = 0;
umount:
	if (loopfs_umount(mnt) < 0 && r == 0)
		r = errmsg_fail(-EIO, why, whylen, "cannot unmount %s: %s", mnt,
		                strerror(errno));
out:
	unlinkat(m->rootfd, ".probe.img", 0);
	unlinkat(m->rootfd, ".probe", AT_REMOVEDIR);
	return r;
}

static int choose_mode(struct workspace_mgr *m, char *err, size_t errlen)
{
	const struct config *cfg = m->cfg;
	char why[600];
	int r;

	if (strcmp(cfg->quota_mode, "none") == 0) {
		m->loop = false;
		log_warnx("WORKSPACE QUOTAS ARE NOT ENFORCED: "
		          "WORKSPACE_QUOTA_MODE=none; code can fill the disk "
		          "under %s until a check after its run refuses the "
		          "next one (see docs/workspaces.md)",
		          cfg->sandbox_root);
		return 0;
	}
	r = probe_loop(m, why, sizeof(why));
	if (r == 0) {
		m->loop = true;
		log_info("workspace quotas: loop mode, an ext4 image of %llu "
		         "bytes with about %u inodes per conversation, mounted "
		         "nosuid,nodev,noexec",
		         (unsigned long long)image_bytes(cfg),
		         cfg->workspace_max_files);
		/* Only a daemon in a container has a mount namespace of its
		 * own that the Docker host would not see. */
		if ((strcmp(cfg->sandbox_root, cfg->sandbox_host_path) != 0 ||
		     access("/.dockerenv", F_OK) == 0) &&
		    !loopfs_engine_shares_mounts() &&
		    loopfs_propagates(cfg->sandbox_root) == 0)
			log_warnx("SANDBOX_ROOT=%s is on a mount that does not "
			          "propagate mounts: the Docker host will not "
			          "see the workspace images and runs will find "
			          "an unwritable /data; bind it with "
			          "propagation rshared (docs/workspaces.md)",
			          cfg->sandbox_root);
		return 0;
	}
	if (strcmp(cfg->quota_mode, "loop") == 0) {
		errmsg_set(
		    err, errlen,
		    "WORKSPACE_QUOTA_MODE=loop, but loop mounts do not work "
		    "here: %s. Run the daemon as root with /dev/loop-control "
		    "and /dev/loop* (docs/workspaces.md), or set "
		    "WORKSPACE_QUOTA_MODE=none to run without hard quotas",
		    why);
		return -EOPNOTSUPP;
	}
	m->loop = false;
	log_warnx("WORKSPACE QUOTAS ARE NOT ENFORCED: loop mounts do not work "
	          "here (%s), so quota mode is none: code can fill the disk "
	          "under %s until a check after its run refuses the next one. "
	          "Give the daemon root and the loop devices for hard quotas "
	          "(docs/workspaces.md)",
	          why, cfg->sandbox_root);
	return 0;
}

/*
 * Counts the workspaces and tidies what an earlier instance left: mounts
 * (unmounted, or adopted while still busy) and directories or images
 * without a marker (a creation or deletion cut short).
 */
static int recover(struct workspace_mgr *m)
{
	struct dirent *de;
	DIR *d;
	int fd;

	m->count = 0;
	fd = openat(m->metafd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || !(d = fdopendir(fd))) {
		if (fd >= 0)
			close(fd);
		return -errno;
	}
	while ((de = readdir(d)))
		m->count += is_name(de->d_name);
	closedir(d);

	fd = openat(m->wsfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || !(d = fdopendir(fd))) {
		if (fd >= 0)
			close(fd);
		return -errno;
	}
	while ((de = readdir(d))) {
		char dir[400], img[400];
		bool marker;

		if (!is_name(de->d_name))
			continue;
		marker = marker_exists(m, de->d_name);
		paths(m, de->d_name, dir, sizeof(dir), img, sizeof(img));
		if (loopfs_is_mountpoint(m->wsfd, de->d_name) == 1) {
			int r = loopfs_umount(dir);

			if (r == -EBUSY && marker) {
				struct ws_entry *e = entry_get(m, de->d_name);

				if (e) {
					e->loop = e->mounted = e->ready = true;
					e->idle_since = mono_ms();
				}
				log_warnx("workspace %.12s is still in use "
				          "from an earlier run; kept mounted",
				          de->d_name);
				continue;
			}
			if (r < 0) {
				log_warnx("workspace %.12s: cannot unmount: "
				          "%s",
				          de->d_name, strerror(-r));
				continue;
			}
		}
		if (!marker) {
			log_info("removing the unfinished workspace %.12s",
			         de->d_name);
			remove_data(m, de->d_name, true);
		}
	}
	closedir(d);

	fd = openat(m->imgfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || !(d = fdopendir(fd))) {
		if (fd >= 0)
			close(fd);
		return -errno;
	}
	while ((de = readdir(d))) {
		char name[WORKSPACE_NAME_LEN + 1];
		size_t n = strlen(de->d_name);

		if (n != WORKSPACE_NAME_LEN + 4 ||
		    strcmp(de->d_name + WORKSPACE_NAME_LEN, ".img") != 0)
			continue;
		snprintf(name, sizeof(name), "%.*s", WORKSPACE_NAME_LEN,
		         de->d_name);
		if (is_name(name) && !marker_exists(m, name))
			unlinkat(m->imgfd, de->d_name, 0);
	}
	closedir(d);
	return 0;
}

int workspace_mgr_create(const struct config *cfg, struct workspace_mgr **out,
                         char *err, size_t errlen)
{
	struct workspace_mgr *m;
	unsigned int klen = 0;
	int r;

	*out = NULL;
	if (err && errlen)
		err[0] = '\0';
	m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	m->cfg = cfg;
	m->rootfd = m->wsfd = m->metafd = m->imgfd = m->lockfd = -1;
	pthread_mutex_init(&m->mu, NULL);
	mono_cond_init(&m->cond);

	/* A key for this purpose only, so names say nothing of others. */
	if (!HMAC(EVP_sha256(), cfg->file_secret, (int)cfg->file_secret_len,
	          (const unsigned char *)name_purpose, sizeof(name_purpose) - 1,
	          m->key, &klen) ||
	    klen != sizeof(m->key)) {
		r = errmsg_fail(-EIO, err, errlen,
		                "cannot derive the workspace name key");
		goto fail;
	}
	m->mac = EVP_MAC_fetch(NULL, "HMAC", NULL);
	if (!m->mac) {
		r = errmsg_fail(-EIO, err, errlen, "OpenSSL has no HMAC");
		goto fail;
	}
	r = prepare_dirs(m, err, errlen);
	if (r < 0)
		goto fail;
	r = choose_mode(m, err, errlen);
	if (r < 0)
		goto fail;
	r = recover(m);
	if (r < 0) {
		errmsg_set(err, errlen, "cannot read %s: %s", cfg->sandbox_root,
		           strerror(-r));
		goto fail;
	}
	log_info("workspaces: %u of at most %u under %s (Docker host path %s), "
	         "deleted after %u hours without use",
	         m->count, cfg->max_workspaces, cfg->sandbox_root,
	         cfg->sandbox_host_path, cfg->retention_hours);
	*out = m;
	return 0;
fail:
	workspace_mgr_destroy(m);
	return r;
}

void workspace_mgr_destroy(struct workspace_mgr *mgr)
{
	struct ws_entry *e, *next;

	if (!mgr)
		return;
	if (mgr->loop && mgr->wsfd >= 0)
		unmount_idle(mgr, true);
	for (e = mgr->entries; e; e = next) {
		next = e->next;
		if (e->refs)
			log_warnx("workspace %.12s: %u handle(s) still open at "
			          "shutdown",
			          e->name, e->refs);
		if (e->mounted)
			log_warnx("workspace %.12s stays mounted (in use); "
			          "the next start takes it over",
			          e->name);
		free(e);
	}
	if (mgr->rootfd >= 0)
		close(mgr->rootfd);
	if (mgr->wsfd >= 0)
		close(mgr->wsfd);
	if (mgr->metafd >= 0)
		close(mgr->metafd);
	if (mgr->imgfd >= 0)
		close(mgr->imgfd);
	if (mgr->lockfd >= 0)
		close(mgr->lockfd); /* releases the flock */
	EVP_MAC_free(mgr->mac);
	OPENSSL_cleanse(mgr->key, sizeof(mgr->key));
	pthread_cond_destroy(&mgr->cond);
	pthread_mutex_destroy(&mgr->mu);
	free(mgr);
}
