/* SPDX-License-Identifier: MIT */
/*
 * docker_handover: a running container takes a host directory through a
 * mount made below a shared mount; see docker_handover.h. No lock: the
 * pool is prepared before boxes exist, a slot has one owner.
 */
#include "backend/docker/docker_handover.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/errmsg.h"
#include "util/log.h"

/* Room left in the pool's path for "/<box name>". */
#define HANDOVER_NAME_ROOM 80

/* Unmounts and removes the pool/<name> directories an earlier boot left. */
static void handover_sweep(const struct docker_handover *h)
{
	DIR *d = opendir(h->dir);
	struct dirent *e;
	char path[PATH_MAX];

	if (!d)
		return;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		if ((size_t)snprintf(path, sizeof(path), "%s/%s", h->dir,
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

int docker_handover_prepare(struct docker_handover *h, const struct config *cfg,
                            char *err, size_t errlen)
{
	const char *host = cfg->sandbox_host_path && cfg->sandbox_host_path[0]
	                       ? cfg->sandbox_host_path
	                       : cfg->sandbox_root;

	/* Replicas sharing SANDBOX_ROOT each sweep and mount their own. */
	const char *rn = cfg->replica_name ? cfg->replica_name : "";
	const char *dash = rn[0] ? "-" : "";

	if ((size_t)snprintf(h->dir, sizeof(h->dir), "%s/pool%s%s",
	                     cfg->sandbox_root, dash,
	                     rn) >= sizeof(h->dir) - HANDOVER_NAME_ROOM ||
	    (size_t)snprintf(h->host_dir, sizeof(h->host_dir), "%s/pool%s%s",
	                     host, dash,
	                     rn) >= sizeof(h->host_dir) - HANDOVER_NAME_ROOM)
		return errmsg_fail(-ENAMETOOLONG, err, errlen,
		                   "SANDBOX_ROOT is too long");
	if (mkdir(h->dir, 0711) < 0 && errno != EEXIST)
		return errmsg_fail(-errno, err, errlen, "cannot create %s: %s",
		                   h->dir, strerror(errno));
	handover_sweep(h);
	/* An earlier boot's shared mount is fine; a fresh one is made. */
	while (umount2(h->dir, MNT_DETACH | UMOUNT_NOFOLLOW) == 0)
		;
	if (mount(h->dir, h->dir, NULL, MS_BIND, NULL) < 0)
		return errmsg_fail(-errno, err, errlen,
		                   "cannot bind-mount %s on itself: %s (the "
		                   "daemon needs CAP_SYS_ADMIN, as for loop "
		                   "quotas)",
		                   h->dir, strerror(errno));
	h->mounted = true;
	if (mount(NULL, h->dir, NULL, MS_SHARED, NULL) < 0)
		return errmsg_fail(-errno, err, errlen,
		                   "cannot make %s a shared mount: %s", h->dir,
		                   strerror(errno));
	return 0;
}

void docker_handover_finish(struct docker_handover *h)
{
	if (h->mounted && umount2(h->dir, MNT_DETACH) < 0)
		log_warn("unmounting %s", h->dir);
	h->mounted = false;
}

int docker_handover_slot(const struct docker_handover *h, const char *name,
                         struct docker_handover_slot *slot, char *host_path,
                         size_t host_len, char *err, size_t errlen)
{
	memset(slot, 0, sizeof(*slot));
	if (!h->mounted)
		return errmsg_fail(-EINVAL, err, errlen,
		                   "a box that takes a directory later needs "
		                   "the pool directory prepared first");
	if (!name || !name[0] || name[0] == '.' || strchr(name, '/') ||
	    strlen(name) >= HANDOVER_NAME_ROOM - 1)
		return errmsg_fail(-EINVAL, err, errlen,
		                   "a box that takes a directory later needs "
		                   "a name of one path component");
	if ((size_t)snprintf(slot->dir, sizeof(slot->dir), "%s/%s", h->dir,
	                     name) >= sizeof(slot->dir) ||
	    (size_t)snprintf(host_path, host_len, "%s/%s", h->host_dir, name) >=
	        host_len) {
		slot->dir[0] = '\0';
		return errmsg_fail(-ENAMETOOLONG, err, errlen,
		                   "SANDBOX_ROOT is too long");
	}
	/* root's and empty until given: nothing lands there. */
	if (mkdir(slot->dir, 0755) < 0) {
		int e = errno;

		errmsg_set(err, errlen, "cannot create %s: %s", slot->dir,
		           strerror(e));
		slot->dir[0] = '\0';
		return -e;
	}
	/* mkdir obeys the umask; the sandbox user must read it. */
	if (chmod(slot->dir, 0755) < 0) {
		int e = errno;

		errmsg_set(err, errlen, "cannot make %s readable: %s",
		           slot->dir, strerror(e));
		docker_handover_release(slot);
		return -e;
	}
	return 0;
}

int docker_handover_give(struct docker_handover_slot *slot, int dirfd,
                         char *err, size_t errlen)
{
	char src[64];

	if (!slot->dir[0])
		return errmsg_fail(-EINVAL, err, errlen,
		                   "the box was not made to take a directory "
		                   "later");
	if (slot->given)
		return errmsg_fail(
		    -EALREADY, err, errlen,
		    "the box has been given a directory already");
	/* The handle's directory, whatever mount it lives on. */
	snprintf(src, sizeof(src), "/proc/self/fd/%d", dirfd);
	if (mount(src, slot->dir, NULL, MS_BIND, NULL) < 0)
		return errmsg_fail(-errno, err, errlen,
		                   "cannot mount the workspace into the box: "
		                   "%s",
		                   strerror(errno));
	slot->given = true;
	return 0;
}

bool docker_handover_intact(const struct docker_handover_slot *slot,
                            char *detail, size_t len)
{
	struct stat sb;

	if (!slot->dir[0] || slot->given)
		return true;
	if (lstat(slot->dir, &sb) == 0 && S_ISDIR(sb.st_mode))
		return true;
	snprintf(detail, len, "its mount point %s was removed", slot->dir);
	return false;
}

void docker_handover_release(struct docker_handover_slot *slot)
{
	if (slot->given && umount2(slot->dir, MNT_DETACH) < 0)
		log_warn("unmounting %s", slot->dir);
	slot->given = false;
	if (slot->dir[0] && rmdir(slot->dir) < 0 && errno != ENOENT)
		log_warn("removing %s", slot->dir);
	slot->dir[0] = '\0';
}
