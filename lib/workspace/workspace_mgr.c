/* SPDX-License-Identifier: MIT */
/*
 * workspace_mgr: the workspace manager's lifetime and its housekeeping of
 * SANDBOX_ROOT. Start-up takes the root lock, creates the directories,
 * probes whether loop images work to choose the quota mode, and recovers
 * what an earlier instance left (counting workspaces, adopting or unmounting
 * mounts, removing unfinished ones); the retention sweep deletes expired
 * workspaces and unmounts idle images, in steps with a budget when it runs
 * as the housekeeping job; shutdown unmounts what is idle.
 * The layout on disk and the locking model are described in workspace.c.
 * Thread-safety as workspace.h.
 */
#include "workspace/workspace.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "backend/backend.h"
#include "fs/fstree.h"
#include "fs/loopfs.h"
#include "util/errmsg.h"
#include "util/log.h"
#include "util/mono.h"
#include "workspace/workspace_internal.h"

#define IDLE_UNMOUNT_MS 60000
#define PROBE_BYTES (16ULL * 1024 * 1024)

static const char name_purpose[] = "mcp-sandboxd workspace name v1";
static const char tenant_purpose[] = "mcp-sandboxd workspace tenant v1";

/* ---- accessors and health ---------------------------------------------- */

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
	cJSON_AddNumberToObject(o, "maxPerTenant", m->per_tenant_max);
	cJSON_AddNumberToObject(o, "mounted", mounted);
	cJSON_AddStringToObject(o, "quotaMode", workspace_mgr_quota_mode(m));
	return true;
}

/* ---- retention ------------------------------------------------------- */

/* Deletes what a workspace has on disk, marker last. Entry is busy. */
static int delete_workspace(struct workspace_mgr *m, struct ws_entry *e)
{
	char dir[400], img[400];
	int r;

	workspace_paths(m, e->name, dir, sizeof(dir), img, sizeof(img));
	if (workspace_image_exists(m, e->name)) {
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
	/* What the daemon keeps of it outside /data (the notebook's cells). */
	r = fstree_remove(m->privfd, e->name);
	if (r < 0 && r != -ENOENT)
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
	return now - st.st_mtime >= (time_t)m->cfg->retention_s;
}

const char *workspace_retention_text(const struct config *cfg, char *buf,
                                     size_t n)
{
	unsigned s = cfg->retention_s;

	if (s >= 3600 && s % 3600 == 0)
		snprintf(buf, n, "%u hour%s", s / 3600, s == 3600 ? "" : "s");
	else
		snprintf(buf, n, "%u second%s", s, s == 1 ? "" : "s");
	return buf;
}

/* Deletes one expired workspace unless it is in use. Returns 1 if so. */
static int try_delete(struct workspace_mgr *m, const char *name)
{
	char fp[WS_TENANT_FP_LEN + 1] = "";
	struct ws_entry *e;
	char span[48];
	int r = 1;

	pthread_mutex_lock(&m->mu);
	e = workspace_entry_get(m, name);
	if (!e || e->refs || e->busy || e->locked) {
		if (e)
			workspace_entry_maybe_free(m, e);
		pthread_mutex_unlock(&m->mu);
		return 0;
	}
	e->busy = true;
	pthread_mutex_unlock(&m->mu);
	/* Used between the scan and the claim? Then it stays. */
	if (expired(m, name)) {
		/* Whose it was, read before the marker goes. */
		(void)!workspace_marker_tenant(m, name, fp);
		r = delete_workspace(m, e);
	}
	pthread_mutex_lock(&m->mu);
	e->busy = false;
	e->ready = false;
	if (r == 0 && m->count)
		m->count--;
	if (r == 0)
		(void)!workspace_tenant_add(m, fp, -1);
	pthread_cond_broadcast(&m->cond);
	workspace_entry_maybe_free(m, e);
	pthread_mutex_unlock(&m->mu);
	if (r < 0)
		log_warnx("workspace %.12s: deletion postponed: %s", name,
		          strerror(-r));
	else if (r == 0)
		log_info("workspace %.12s deleted after %s without use", name,
		         workspace_retention_text(m->cfg, span, sizeof(span)));
	return r == 0;
}

/*
 * Unmounts idle images (all: regardless of how long they were idle), each
 * once per pass: fresh starts a pass. Returns true when it stopped because
 * deadline_ms had passed, with images of this pass left to look at.
 */
static bool unmount_idle(struct workspace_mgr *m, bool all, bool fresh,
                         long long deadline_ms)
{
	bool stopped = false;
	unsigned gen;

	pthread_mutex_lock(&m->mu);
	if (fresh)
		++m->sweep_gen;
	gen = m->sweep_gen;
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
		if (now >= deadline_ms) {
			stopped = true;
			break;
		}
		e->sweep_gen = gen;
		e->busy = true;
		pthread_mutex_unlock(&m->mu);
		workspace_paths(m, e->name, dir, sizeof(dir), img, sizeof(img));
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
		workspace_entry_maybe_free(m, e);
	}
	pthread_mutex_unlock(&m->mu);
	return stopped;
}

/* Forgets where an unfinished sweep stopped. sweep_mu held. */
static void sweep_reset(struct workspace_mgr *m)
{
	if (m->sweep_dir)
		closedir(m->sweep_dir);
	m->sweep_dir = NULL;
	m->sweep_unmounting = false;
}

/* Opens the walk of meta/ for a new pass. sweep_mu held. */
static bool sweep_open(struct workspace_mgr *m)
{
	int fd = openat(m->metafd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0)
		return false;
	m->sweep_dir = fdopendir(fd);
	if (!m->sweep_dir) {
		close(fd);
		return false;
	}
	return true;
}

/*
 * Goes on with the sweep where the last step stopped, or starts a pass:
 * unmounting idle images, then walking meta/ and deleting what expired,
 * until the pass ends or deadline_ms has passed (checked after each
 * deletion and every SWEEP_NAMES_PER_CHECK names, so a step always makes
 * progress). Adds the deletions to *deleted. Returns true when the pass has
 * more to go. sweep_mu held.
 */
#define SWEEP_NAMES_PER_CHECK 64
static bool sweep_step(struct workspace_mgr *m, bool unmount_all,
                       long long deadline_ms, unsigned *deleted)
{
	unsigned seen = 0;
	struct dirent *de;

	if (!m->sweep_dir && !m->sweep_unmounting) {
		m->sweep_unmounting = m->loop;
		if (m->loop && unmount_idle(m, unmount_all, true, deadline_ms))
			return true;
	} else if (m->sweep_unmounting &&
	           unmount_idle(m, unmount_all, false, deadline_ms)) {
		return true;
	}
	m->sweep_unmounting = false;
	if (!m->sweep_dir && !sweep_open(m))
		return false;
	while ((de = readdir(m->sweep_dir))) {
		bool tried = false;

		if (workspace_is_name(de->d_name) && expired(m, de->d_name)) {
			*deleted += (unsigned)try_delete(m, de->d_name);
			tried = true;
		}
		if ((tried || ++seen % SWEEP_NAMES_PER_CHECK == 0) &&
		    cron_past(deadline_ms))
			return true;
	}
	sweep_reset(m);
	return false;
}

unsigned workspace_mgr_sweep(struct workspace_mgr *mgr, bool unmount_all)
{
	unsigned deleted = 0;

	pthread_mutex_lock(&mgr->sweep_mu);
	sweep_reset(mgr);
	while (sweep_step(mgr, unmount_all, LLONG_MAX, &deleted))
		;
	pthread_mutex_unlock(&mgr->sweep_mu);
	return deleted;
}

enum cron_next workspace_job_sweep(void *mgr, long long deadline_ms)
{
	struct workspace_mgr *m = mgr;
	unsigned deleted = 0;
	bool more;

	pthread_mutex_lock(&m->sweep_mu);
	more = sweep_step(m, false, deadline_ms, &deleted);
	pthread_mutex_unlock(&m->sweep_mu);
	return more ? CRON_MORE : CRON_DONE;
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

/*
 * One daemon per SANDBOX_ROOT, or replicas (MCP_REPLICA_NAME) sharing it:
 * the only daemon holds .lock exclusively; a replica holds it shared and
 * .lock.<name> exclusively, so replicas of distinct names run side by side
 * while a second daemon of one name, or a lone daemon beside replicas, is
 * refused. flock() works across hosts on NFS (as a POSIX lock) and CephFS.
 */
static int lock_fd(struct workspace_mgr *m, const char *name, int op, int *fd,
                   char *err, size_t errlen)
{
	*fd = openat(m->rootfd, name, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC,
	             0600);
	if (*fd < 0)
		return errmsg_fail(-errno, err, errlen,
		                   "cannot create %s/%s: %s",
		                   m->cfg->sandbox_root, name, strerror(errno));
	return flock(*fd, op | LOCK_NB) < 0 ? -EBUSY : 0;
}

static int lock_root(struct workspace_mgr *m, char *err, size_t errlen)
{
	const char *root = m->cfg->sandbox_root;
	const char *replica = m->cfg->replica_name ? m->cfg->replica_name : "";
	char own[8 + MCP_REPLICA_NAME_MAX];
	int r;

	r = lock_fd(m, ".lock", replica[0] ? LOCK_SH : LOCK_EX, &m->lockfd, err,
	            errlen);
	if (r == -EBUSY)
		return errmsg_fail(
		    -EBUSY, err, errlen,
		    replica[0]
		        ? "an mcp-sandboxd without MCP_REPLICA_NAME uses "
		          "SANDBOX_ROOT=%s; replicas share a root only with "
		          "replicas"
		        : "another mcp-sandboxd uses SANDBOX_ROOT=%s; give "
		          "each instance its own, or give replicas that "
		          "share it an MCP_REPLICA_NAME each "
		          "(docs/deployment.md)",
		    root);
	if (r < 0 || !replica[0])
		return r;
	snprintf(own, sizeof(own), ".lock.%s", replica);
	r = lock_fd(m, own, LOCK_EX, &m->replica_lockfd, err, errlen);
	if (r == -EBUSY)
		return errmsg_fail(-EBUSY, err, errlen,
		                   "another mcp-sandboxd with "
		                   "MCP_REPLICA_NAME=%s uses SANDBOX_ROOT=%s; "
		                   "give each replica its own name",
		                   replica, root);
	return r;
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
	if ((r = lock_root(m, err, errlen)) < 0)
		return r;
	if ((r = open_sub(m, "workspaces", &m->wsfd, err, errlen)) < 0 ||
	    (r = open_sub(m, "meta", &m->metafd, err, errlen)) < 0 ||
	    (r = open_sub(m, "images", &m->imgfd, err, errlen)) < 0 ||
	    (r = open_sub(m, "private", &m->privfd, err, errlen)) < 0)
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
	r = loopfs_mount(img, mnt, true, why, whylen);
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

/*
 * Loop images are mounted on this host: a backend whose boxes may run on
 * other hosts (no BACKEND_CAN_HOST_MOUNTS) sees them only on this one.
 */
static void workspace_mgr_warn_hosts(const struct config *cfg)
{
	const struct backend_impl *bi = backend_find(cfg->backend);

	if (!bi || backend_impl_has(bi, BACKEND_CAN_HOST_MOUNTS))
		return;
	log_warnx("loop-mode workspaces with SANDBOX_BACKEND=%s: %s, and a "
	          "box sees the images only if its host shares this host's "
	          "mount namespace (one host); with boxes on other hosts "
	          "runs would write under the mount points. Set "
	          "WORKSPACE_QUOTA_MODE=none there (docs/deployment.md)",
	          bi->name, backend_lacks(bi, BACKEND_CAN_HOST_MOUNTS));
}

static int choose_mode(struct workspace_mgr *m, char *err, size_t errlen)
{
	const struct config *cfg = m->cfg;
	char why[600];
	int r;

	if (cfg->replica_name && cfg->replica_name[0] &&
	    strcmp(cfg->quota_mode, "loop") == 0) {
		/* A workspace's image mounted by two hosts at once would be
		 * corrupted, and the sandbox nodes would not see the mount. */
		errmsg_set(err, errlen,
		           "WORKSPACE_QUOTA_MODE=%s cannot be used by replicas "
		           "(MCP_REPLICA_NAME=%s): a loop image is mounted on "
		           "one host, and replicas share SANDBOX_ROOT. Set "
		           "WORKSPACE_QUOTA_MODE=none and give the shared file "
		           "system a quota of its own (docs/deployment.md)",
		           cfg->quota_mode, cfg->replica_name);
		return -EINVAL;
	}
	if (cfg->replica_name && cfg->replica_name[0]) {
		m->loop = false;
		log_warnx("WORKSPACE QUOTAS ARE NOT ENFORCED by the file "
		          "system for this replica (MCP_REPLICA_NAME=%s): a "
		          "loop image is mounted on one host, so replicas use "
		          "quota mode none, where a run is stopped about a "
		          "second after its workspace passes the quota; give "
		          "the shared file system under %s a quota of its own "
		          "for a hard limit (docs/deployment.md)",
		          cfg->replica_name, cfg->sandbox_root);
		return 0;
	}
	if (strcmp(cfg->quota_mode, "none") == 0) {
		m->loop = false;
		log_warnx(
		    "WORKSPACE QUOTAS ARE NOT ENFORCED by the file "
		    "system: WORKSPACE_QUOTA_MODE=none; a run is stopped "
		    "about a second after its workspace passes the quota, "
		    "so code can write past it under %s for that long "
		    "(see docs/workspaces.md)",
		    cfg->sandbox_root);
		return 0;
	}
	r = probe_loop(m, why, sizeof(why));
	if (r == 0) {
		m->loop = true;
		log_info("workspace quotas: loop mode, an ext4 image of %llu "
		         "bytes with about %u inodes per conversation, mounted "
		         "nosuid,nodev,noexec",
		         (unsigned long long)workspace_image_bytes(cfg),
		         cfg->workspace_max_files);
		workspace_mgr_warn_hosts(cfg);
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
	log_warnx("WORKSPACE QUOTAS ARE NOT ENFORCED by the file system: loop "
	          "mounts do not work here (%s), so quota mode is none: a run "
	          "is stopped about a second after its workspace passes the "
	          "quota, so code can write past it under %s for that long. "
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
	while ((de = readdir(d))) {
		char fp[WS_TENANT_FP_LEN + 1];

		if (!workspace_is_name(de->d_name))
			continue;
		m->count++;
		/* Markers of older versions name nobody: counted when their
		 * tenant next opens them (workspace.c, note_owner). */
		if (workspace_marker_tenant(m, de->d_name, fp) == 0 &&
		    workspace_tenant_add(m, fp, 1) < 0) {
			closedir(d);
			return -ENOMEM;
		}
	}
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

		if (!workspace_is_name(de->d_name))
			continue;
		marker = workspace_marker_exists(m, de->d_name);
		workspace_paths(m, de->d_name, dir, sizeof(dir), img,
		                sizeof(img));
		if (loopfs_is_mountpoint(m->wsfd, de->d_name) == 1) {
			int r = loopfs_umount(dir);

			if (r == -EBUSY && marker) {
				struct ws_entry *e =
				    workspace_entry_get(m, de->d_name);

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
			workspace_remove_data(m, de->d_name, true);
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

		/* Spares made for the settings of an earlier start. */
		if (strncmp(de->d_name, WORKSPACE_SPARE_PREFIX,
		            strlen(WORKSPACE_SPARE_PREFIX)) == 0) {
			unlinkat(m->imgfd, de->d_name, 0);
			continue;
		}
		if (n != WORKSPACE_NAME_LEN + 4 ||
		    strcmp(de->d_name + WORKSPACE_NAME_LEN, ".img") != 0)
			continue;
		snprintf(name, sizeof(name), "%.*s", WORKSPACE_NAME_LEN,
		         de->d_name);
		if (workspace_is_name(name) &&
		    !workspace_marker_exists(m, name))
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
	char span[48];
	int r;

	*out = NULL;
	if (err && errlen)
		err[0] = '\0';
	m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	m->cfg = cfg;
	m->rootfd = m->wsfd = m->metafd = m->imgfd = m->lockfd = -1;
	m->privfd = -1;
	m->replica_lockfd = -1;
	pthread_mutex_init(&m->mu, NULL);
	pthread_mutex_init(&m->sweep_mu, NULL);
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
	if (!HMAC(EVP_sha256(), cfg->file_secret, (int)cfg->file_secret_len,
	          (const unsigned char *)tenant_purpose,
	          sizeof(tenant_purpose) - 1, m->tenant_key, &klen) ||
	    klen != sizeof(m->tenant_key)) {
		r = errmsg_fail(-EIO, err, errlen,
		                "cannot derive the workspace tenant key");
		goto fail;
	}
	r = workspace_tenants_setup(m, err, errlen);
	if (r < 0)
		goto fail;
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
	         "deleted after %s without use",
	         m->count, cfg->max_workspaces, cfg->sandbox_root,
	         cfg->sandbox_host_path,
	         workspace_retention_text(cfg, span, sizeof(span)));
	log_info("workspaces per tenant: at most %u (WORKSPACE_MAX_PER_TENANT"
	         "%s, %u tenant(s)); new ones %s",
	         m->per_tenant_max,
	         cfg->workspace_max_per_tenant
	             ? ""
	             : "=0: a share of WORKSPACE_MAX_COUNT",
	         m->n_config_tenants,
	         m->create_rl ? "rate-limited (WORKSPACE_CREATE_BURST, "
	                        "WORKSPACE_CREATE_PER_HOUR)"
	                      : "not rate-limited");
	workspace_check_disk(m);
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
	sweep_reset(mgr);
	if (mgr->loop && mgr->wsfd >= 0)
		(void)unmount_idle(mgr, true, true, LLONG_MAX);
	if (mgr->loop && mgr->imgfd >= 0)
		unlinkat(mgr->imgfd, WORKSPACE_SPARE_IMAGE, 0);
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
		if (e->defer_due)
			log_info("workspace %.12s: a deferred write was left "
			         "(the next run makes it)",
			         e->name);
		free(e->defer_conv);
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
	if (mgr->privfd >= 0)
		close(mgr->privfd);
	if (mgr->lockfd >= 0)
		close(mgr->lockfd); /* releases the flock */
	if (mgr->replica_lockfd >= 0)
		close(mgr->replica_lockfd);
	EVP_MAC_free(mgr->mac);
	workspace_tenants_finish(mgr);
	OPENSSL_cleanse(mgr->key, sizeof(mgr->key));
	OPENSSL_cleanse(mgr->tenant_key, sizeof(mgr->tenant_key));
	pthread_cond_destroy(&mgr->cond);
	pthread_mutex_destroy(&mgr->sweep_mu);
	pthread_mutex_destroy(&mgr->mu);
	free(mgr);
}
