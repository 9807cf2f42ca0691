/* SPDX-License-Identifier: MIT */
/*
 * workspace: the manager of per-conversation directories. On disk, under
 * SANDBOX_ROOT:
 *   .lock                one daemon per SANDBOX_ROOT (flock), or replicas
 *   .lock.<replica>      sharing it (workspace_mgr.c, lock_root)
 *   workspaces/<name>/   what containers get as /data: a plain directory
 *                        (quota mode none) or the mount point of the image
 *                        (loop mode; mode 000 while unmounted, so nothing
 *                        can be written to it by mistake)
 *   images/<name>.img    the ext4 image of a loop-mode workspace
 *   meta/<name>          marker: exists once the workspace is complete; its
 *                        mtime is the last use, out of reach of code
 *   private/<name>/      what the daemon keeps of a conversation outside
 *                        /data, out of reach of code (the notebook's cells)
 * In memory, an entry per workspace that is open, being prepared or torn
 * down, or mounted. One mutex guards the entries; slow work (mkfs, mount,
 * unmount, deletion) happens outside it with the entry marked busy, and
 * anyone else wanting that entry waits on the condition variable.
 * This file holds names, entries, creating and mounting a workspace, and
 * handles; workspace_mgr.c the manager's start-up, retention sweep and
 * shutdown; workspace_internal.h the structs both share.
 */
#include "workspace/workspace.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/params.h>

#include "fs/fsname.h"
#include "fs/fstree.h"
#include "fs/loopfs.h"
#include "util/buf.h"
#include "util/errmsg.h"
#include "util/hex.h"
#include "util/log.h"
#include "util/mono.h"
#include "util/pct.h"
#include "workspace/workspace_internal.h"

#define IMAGE_MIN_BYTES (8ULL * 1024 * 1024)
#define CONVERSATION_ID_MAX 256

/* ---- small helpers ---------------------------------------------------- */

bool workspace_is_name(const char *s)
{
	return strnlen(s, WORKSPACE_NAME_LEN + 1) == WORKSPACE_NAME_LEN &&
	       hex_is_lower(s, WORKSPACE_NAME_LEN);
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

uint64_t workspace_image_bytes(const struct config *cfg)
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

struct ws_entry *workspace_entry_get(struct workspace_mgr *m, const char *name)
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
void workspace_entry_maybe_free(struct workspace_mgr *m, struct ws_entry *e)
{
	if (e->refs || e->waiters || e->busy || e->mounted || e->locked ||
	    workspace_defer_holds(m, e))
		return;
	for (struct ws_entry **pp = &m->entries; *pp; pp = &(*pp)->next) {
		if (*pp == e) {
			*pp = e->next;
			free(e->defer_conv);
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

bool workspace_marker_exists(struct workspace_mgr *m, const char *name)
{
	struct stat st;

	return fstatat(m->metafd, name, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

bool workspace_image_exists(struct workspace_mgr *m, const char *name)
{
	char img[WORKSPACE_NAME_LEN + 8];
	struct stat st;

	snprintf(img, sizeof(img), "%s.img", name);
	return fstatat(m->imgfd, img, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

void workspace_paths(struct workspace_mgr *m, const char *name, char *dir,
                     size_t dirlen, char *img, size_t imglen)
{
	snprintf(dir, dirlen, "%s/%.64s", m->ws_path, name);
	snprintf(img, imglen, "%s/%.64s.img", m->img_path, name);
}

/*
 * Mounts an image at its mount point, adopting a live mount; fresh: just
 * formatted (loopfs_mount).
 */
static int mount_image(struct workspace_mgr *m, struct ws_entry *e, bool fresh,
                       char *err, size_t errlen)
{
	char dir[400], img[400], why[512];
	int r;

	workspace_paths(m, e->name, dir, sizeof(dir), img, sizeof(img));
	if (mkdirat(m->wsfd, e->name, 0) < 0 && errno != EEXIST)
		return errmsg_fail(-EIO, err, errlen, "cannot create %s: %s",
		                   dir, strerror(errno));
	r = loopfs_is_mountpoint(m->wsfd, e->name);
	if (r == 1) {
		e->mounted = true;
		return 0;
	}
	r = loopfs_mount(img, dir, fresh, why, sizeof(why));
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

void workspace_remove_data(struct workspace_mgr *m, const char *name, bool loop)
{
	char dir[400], img[400];

	workspace_paths(m, name, dir, sizeof(dir), img, sizeof(img));
	if (loop) {
		if (loopfs_is_mountpoint(m->wsfd, name) == 1)
			(void)!loopfs_umount(dir);
		snprintf(img, sizeof(img), "%s.img", name);
		unlinkat(m->imgfd, img, 0);
	}
	(void)!fstree_remove(m->wsfd, name);
}

/* ---- the spare image ---------------------------------------------------- */

/*
 * Whether the host has room for one more image: images are sparse, so the
 * host can promise more than it has; a new one is admitted only while a
 * whole quota still fits (an image whose writes fail on the host aborts its
 * journal and turns read-only, which is worse than a clear refusal now).
 */
static bool image_fits(const struct workspace_mgr *m)
{
	struct statvfs sv;

	return statvfs(m->cfg->sandbox_root, &sv) != 0 ||
	       (unsigned long long)sv.f_bavail * sv.f_frsize >=
	           workspace_image_bytes(m->cfg) + 8ULL * 1024 * 1024;
}

/* Formats an image of a new workspace at path (loopfs_format). */
static int format_image(const struct workspace_mgr *m, const char *path,
                        char *why, size_t whylen)
{
	uid_t uid;
	gid_t gid;

	owner(m, &uid, &gid);
	return loopfs_format(path, workspace_image_bytes(m->cfg),
	                     m->cfg->workspace_max_files,
	                     uid == (uid_t)-1 ? geteuid() : uid,
	                     gid == (gid_t)-1 ? getegid() : gid, why, whylen);
}

/* Takes the spare image as the image at path img: 0, or -errno. */
static int take_spare(struct workspace_mgr *m, const char *img)
{
	if (renameat2(m->imgfd, WORKSPACE_SPARE_IMAGE, AT_FDCWD, img,
	              RENAME_NOREPLACE) < 0)
		return -errno;
	return 0;
}

enum cron_next workspace_job_spare(void *mgr, long long deadline_ms)
{
	struct workspace_mgr *m = mgr;
	char tmp[64], path[400], why[512];
	int r;

	(void)deadline_ms;
	if (!m->loop || mono_ms() < m->spare_retry_ms || !image_fits(m) ||
	    faccessat(m->imgfd, WORKSPACE_SPARE_IMAGE, F_OK,
	              AT_SYMLINK_NOFOLLOW) == 0)
		return CRON_DONE;
	/* Made aside and renamed: a spare is always a whole image. */
	snprintf(tmp, sizeof(tmp), WORKSPACE_SPARE_PREFIX "-%d-%llu.img",
	         (int)getpid(), ++m->spare_seq);
	snprintf(path, sizeof(path), "%s/%s", m->img_path, tmp);
	r = format_image(m, path, why, sizeof(why));
	if (r < 0) {
		/* Said once a minute; new workspaces format their own. */
		m->spare_retry_ms = mono_ms() + WORKSPACE_SPARE_RETRY_MS;
		log_warnx("cannot make a spare workspace image (tried again in "
		          "%u s): %s",
		          WORKSPACE_SPARE_RETRY_MS / 1000, why);
		return CRON_DONE;
	}
	if (renameat2(m->imgfd, tmp, m->imgfd, WORKSPACE_SPARE_IMAGE,
	              RENAME_NOREPLACE) < 0)
		unlinkat(m->imgfd, tmp, 0); /* another one made it first */
	return CRON_DONE;
}

/*
 * Creates a workspace of tenant fp ("" for none); the count is already
 * reserved by the caller.
 */
static int create_workspace(struct workspace_mgr *m, struct ws_entry *e,
                            const char *fp, char *err, size_t errlen)
{
	const struct config *cfg = m->cfg;
	char dir[400], img[400], why[512];
	uid_t uid;
	gid_t gid;
	int r, fd;

	owner(m, &uid, &gid);
	workspace_paths(m, e->name, dir, sizeof(dir), img, sizeof(img));
	e->loop = m->loop;
	if (m->loop) {
		if (!image_fits(m)) {
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
		/* The spare made ahead (workspace_job_spare), or a new one. */
		r = take_spare(m, img);
		if (r < 0)
			r = format_image(m, img, why, sizeof(why));
		if (r < 0) {
			log_errorx("workspace %.12s: %s", e->name, why);
			errmsg_set(err, errlen,
			           "cannot create a workspace for this "
			           "conversation now; try again later");
			return r;
		}
		r = mount_image(m, e, true, err, errlen);
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
	/* Whose it is, for the per-tenant count after a restart. */
	if (fp[0] && workspace_marker_write_tenant(fd, fp) < 0)
		log_warn("workspace %.12s: cannot record its tenant; it "
		         "counts for its tenant again when next opened",
		         e->name);
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
	workspace_remove_data(m, e->name, m->loop);
	e->mounted = false;
	return r;
}

/*
 * For a workspace made before markers named their tenant: records the
 * tenant opening it (fp; the name says it is theirs) in its marker and
 * counts it for that tenant.
 */
static void note_owner(struct workspace_mgr *m, struct ws_entry *e,
                       const char *fp)
{
	char have[WS_TENANT_FP_LEN + 1];
	int fd;

	if (workspace_marker_tenant(m, e->name, have) < 0)
		return;
	if (have[0] || !fp || !fp[0])
		return;
	fd = openat(m->metafd, e->name, O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 || workspace_marker_write_tenant(fd, fp) < 0) {
		log_warn("workspace %.12s: cannot record its tenant", e->name);
		if (fd >= 0)
			close(fd);
		return;
	}
	close(fd);
	pthread_mutex_lock(&m->mu);
	if (workspace_tenant_add(m, fp, 1) < 0)
		log_warnx("workspace %.12s: out of memory counting its tenant",
		          e->name);
	pthread_mutex_unlock(&m->mu);
	log_info("workspace %.12s (made before workspaces named their "
	         "tenant) now counts for tenant %.8s",
	         e->name, fp);
}

/*
 * Brings an entry to ready: creates, recreates or mounts as needed. fp is
 * the opening tenant's fingerprint (NULL when opened by name).
 */
static int prepare(struct workspace_mgr *m, struct ws_entry *e, bool create,
                   const char *fp, char *err, size_t errlen)
{
	const struct config *cfg = m->cfg;
	char span[48];
	uid_t uid;
	gid_t gid;
	int r;

	if (!workspace_marker_exists(m, e->name)) {
		if (!create)
			return -ENOENT;
		if (!fp)
			fp = "";
		pthread_mutex_lock(&m->mu);
		/* Its own cap first: what the tenant can act on. */
		if (fp[0] &&
		    (r = workspace_tenant_may_create(m, fp, err, errlen)) < 0) {
			pthread_mutex_unlock(&m->mu);
			return r;
		}
		if (m->count >= cfg->max_workspaces) {
			pthread_mutex_unlock(&m->mu);
			log_warnx("workspace cap of %u reached",
			          cfg->max_workspaces);
			errmsg_set(
			    err, errlen,
			    "this server already keeps %u workspaces, its "
			    "maximum; try again later (idle workspaces are "
			    "deleted after %s) or ask the operator to "
			    "raise WORKSPACE_MAX_COUNT",
			    cfg->max_workspaces,
			    workspace_retention_text(cfg, span, sizeof(span)));
			return -ENOSPC;
		}
		if (workspace_tenant_add(m, fp, 1) < 0) {
			pthread_mutex_unlock(&m->mu);
			return -ENOMEM;
		}
		m->count++;
		pthread_mutex_unlock(&m->mu);
		r = create_workspace(m, e, fp, err, errlen);
		if (r < 0) {
			pthread_mutex_lock(&m->mu);
			m->count--;
			(void)!workspace_tenant_add(m, fp, -1);
			pthread_mutex_unlock(&m->mu);
		}
		return r;
	}
	note_owner(m, e, fp);
	e->loop = workspace_image_exists(m, e->name);
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
		return e->mounted ? 0 : mount_image(m, e, false, err, errlen);
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
                   const char *fp, struct ws_entry **out, char *err,
                   size_t errlen)
{
	struct ws_entry *e;
	int r = 0;

	*out = NULL;
	pthread_mutex_lock(&m->mu);
	e = workspace_entry_get(m, name);
	if (!e) {
		pthread_mutex_unlock(&m->mu);
		return -ENOMEM;
	}
	entry_wait_idle(m, e);
	e->refs++;
	if (!e->ready) {
		e->busy = true;
		pthread_mutex_unlock(&m->mu);
		r = prepare(m, e, create, fp, err, errlen);
		pthread_mutex_lock(&m->mu);
		e->busy = false;
		e->ready = r == 0;
		pthread_cond_broadcast(&m->cond);
	}
	if (r < 0) {
		e->refs--;
		workspace_entry_maybe_free(m, e);
	} else {
		*out = e;
	}
	pthread_mutex_unlock(&m->mu);
	return r;
}

void workspace_entry_unlock(struct workspace_mgr *m, struct ws_entry *e)
{
	if (e->locked) {
		e->locked = false;
		pthread_cond_broadcast(&m->cond);
	}
}

static void release(struct workspace_mgr *m, struct ws_entry *e, bool unlock)
{
	pthread_mutex_lock(&m->mu);
	if (unlock)
		workspace_entry_unlock(m, e);
	if (--e->refs == 0)
		e->idle_since = mono_ms();
	workspace_entry_maybe_free(m, e);
	pthread_mutex_unlock(&m->mu);
}

/*
 * Waits (bounded) for the writes a run makes after its answer; a handle
 * opened after a timeout sees the workspace as it is then (logged).
 */
static void wait_settled(struct workspace_mgr *m, struct ws_entry *e)
{
	struct timespec dl;
	int r = 0;

	pthread_mutex_lock(&m->mu);
	if (e->settling) {
		mono_deadline(&dl, WORKSPACE_SETTLE_WAIT_MS);
		while (e->settling && r != ETIMEDOUT)
			r = pthread_cond_timedwait(&m->cond, &m->mu, &dl);
		if (e->settling)
			log_warnx("workspace %.12s: a run's writes after its "
			          "answer took over %d s; opened without them",
			          e->name, WORKSPACE_SETTLE_WAIT_MS / 1000);
	}
	pthread_mutex_unlock(&m->mu);
}

void workspace_settle_begin(struct workspace *ws)
{
	pthread_mutex_lock(&ws->mgr->mu);
	ws->e->settling++;
	pthread_mutex_unlock(&ws->mgr->mu);
}

void workspace_settle_end(struct workspace *ws)
{
	pthread_mutex_lock(&ws->mgr->mu);
	if (ws->e->settling && --ws->e->settling == 0)
		pthread_cond_broadcast(&ws->mgr->cond);
	pthread_mutex_unlock(&ws->mgr->mu);
}

static int open_handle(struct workspace_mgr *m, const char *name, bool create,
                       const char *fp, const char *conv, struct workspace **out,
                       char *err, size_t errlen)
{
	struct workspace *ws;
	struct ws_entry *e;
	struct stat self, parent;
	int r;

	r = acquire(m, name, create, fp, &e, err, errlen);
	if (r < 0)
		return r;
	wait_settled(m, e);
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
	char name[WORKSPACE_NAME_LEN + 1], fp[WS_TENANT_FP_LEN + 1];
	int r;

	*out = NULL;
	if (err && errlen)
		err[0] = '\0';
	r = workspace_check_conversation_id(conversation_id, err, errlen);
	if (r < 0)
		return r;
	workspace_name_for(mgr, tenant, conversation_id, name);
	workspace_tenant_fp(mgr, tenant ? tenant : "", fp);
	if (!name[0] || !fp[0])
		return -ENOMEM;
	r = open_handle(mgr, name, create, fp, conversation_id, out, err,
	                errlen);
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
	if (!name || !workspace_is_name(name))
		return -ENOENT;
	return open_handle(mgr, name, false, NULL, NULL, out, NULL, 0);
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

int workspace_private_dirfd(struct workspace *ws)
{
	int fd;

	/* private/<name>: made on first use, 0700, never mounted anywhere. */
	if (mkdirat(ws->mgr->privfd, ws->e->name, 0700) < 0 && errno != EEXIST)
		return -errno;
	fd = openat(ws->mgr->privfd, ws->e->name,
	            O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
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
