/* SPDX-License-Identifier: MIT */
/*
 * docker_channel: see docker_channel.h. Everything read from the
 * connection is hostile and is handed on, bounded by the chunk size, to
 * the caller's decoder (warm_io.c, agentframe.c), which bounds frames.
 */
#include "backend/docker/docker_channel.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "util/log.h"

#define CHAN_CHUNK (64 * 1024)
#define CHAN_CGROUP_MAX (16 * 1024) /* /proc/<pid>/cgroup, bounded */
#define CHAN_SOCK "channel"

struct chan_stream {
	struct box_stream base;
	int lfd;    /* the listener until the agent's connection is taken */
	int fd;     /* the agent's connection, -1 before */
	int dir_fd; /* the slot's directory, to unlink the socket */
	int error;  /* sticky */
	uid_t uid;
	char cid[72];
	char *buf;
};

static const struct box_stream_impl chan_stream_impl;

void docker_channel_dir_init(struct docker_channel_dir *d,
                             const struct config *cfg)
{
	const char *host = cfg->sandbox_host_path && cfg->sandbox_host_path[0]
	                       ? cfg->sandbox_host_path
	                       : cfg->sandbox_root;

	memset(d, 0, sizeof(*d));
	pthread_mutex_init(&d->lock, NULL);
	snprintf(d->dir, sizeof(d->dir), "%s/chan", cfg->sandbox_root);
	snprintf(d->host_dir, sizeof(d->host_dir), "%s/chan", host);
}

void docker_channel_dir_finish(struct docker_channel_dir *d)
{
	pthread_mutex_destroy(&d->lock);
}

/* Removes one leftover slot directory below dfd (no link is followed). */
static void chan_sweep_one(int dfd, const char *name)
{
	int sfd =
	    openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

	if (sfd >= 0) {
		(void)unlinkat(sfd, CHAN_SOCK, 0);
		close(sfd);
	}
	if (unlinkat(dfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
		log_debug("cannot remove channel directory %s: %s", name,
		          strerror(errno));
}

/*
 * Makes SANDBOX_ROOT/chan (root's, 0700: only the engine's bind mount
 * reaches below it) and removes what an earlier boot left. d->lock held.
 */
static int chan_dir_ready(struct docker_channel_dir *d, char *err,
                          size_t errlen)
{
	struct dirent *de;
	struct stat st;
	DIR *dir;
	int dfd;

	if (d->ready)
		return 0;
	if (mkdir(d->dir, 0700) < 0 && errno != EEXIST)
		goto fail;
	dfd = open(d->dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0)
		goto fail;
	if (fstat(dfd, &st) < 0 || st.st_uid != geteuid() ||
	    fchmod(dfd, 0700) < 0) {
		close(dfd);
		snprintf(err, errlen,
		         "%s must be a directory of the daemon's own user",
		         d->dir);
		return -EPERM;
	}
	dir = fdopendir(dfd);
	if (!dir) {
		close(dfd);
		goto fail;
	}
	while ((de = readdir(dir)))
		if (strcmp(de->d_name, ".") != 0 &&
		    strcmp(de->d_name, "..") != 0)
			chan_sweep_one(dirfd(dir), de->d_name);
	closedir(dir);
	d->ready = true;
	return 0;
fail:
	snprintf(err, errlen, "cannot create %s: %s", d->dir, strerror(errno));
	return -errno;
}

/* Box names: [A-Za-z0-9_.-], not "." or "..", 1-64 characters. */
static bool chan_name_ok(const char *name)
{
	size_t n = strlen(name);

	if (n == 0 || n > 64 || strcmp(name, ".") == 0 ||
	    strcmp(name, "..") == 0)
		return false;
	return strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUV"
	                    "WXYZ0123456789_.-") == n;
}

/* Binds a listener to "channel" in the directory open at dir_fd. */
static int chan_listen(int dir_fd, int *out, char *err, size_t errlen)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);

	*out = -1;
	/* Through the descriptor: short, whatever SANDBOX_ROOT's length. */
	snprintf(sa.sun_path, sizeof(sa.sun_path), "/proc/self/fd/%d/%s",
	         dir_fd, CHAN_SOCK);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    fchmodat(dir_fd, CHAN_SOCK, 0666, 0) < 0 || listen(fd, 1) < 0) {
		int e = errno;

		snprintf(err, errlen, "cannot listen for a box's channel: %s",
		         strerror(e));
		if (fd >= 0)
			close(fd);
		return -e;
	}
	*out = fd;
	return 0;
}

int docker_channel_slot_open(struct docker_channel_dir *d, const char *name,
                             struct docker_channel_slot *slot, char *host_path,
                             size_t host_len, char *err, size_t errlen)
{
	int rc;

	memset(slot, 0, sizeof(*slot));
	slot->dir_fd = slot->listen_fd = -1;
	if (!name || !chan_name_ok(name)) {
		snprintf(err, errlen,
		         "a box with a channel needs a plain name");
		return -EINVAL;
	}
	pthread_mutex_lock(&d->lock);
	rc = chan_dir_ready(d, err, errlen);
	pthread_mutex_unlock(&d->lock);
	if (rc < 0)
		return rc;
	if ((size_t)snprintf(slot->dir, sizeof(slot->dir), "%s/%s", d->dir,
	                     name) >= sizeof(slot->dir) ||
	    (size_t)snprintf(host_path, host_len, "%s/%s", d->host_dir, name) >=
	        host_len) {
		slot->dir[0] = '\0';
		snprintf(err, errlen, "SANDBOX_ROOT is too long");
		return -ENAMETOOLONG;
	}
	if (mkdir(slot->dir, 0755) < 0) {
		rc = -errno;
		snprintf(err, errlen, "cannot create %s: %s", slot->dir,
		         strerror(-rc));
		slot->dir[0] = '\0';
		return rc;
	}
	slot->dir_fd =
	    open(slot->dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	/* mkdir obeys the umask; the sandbox user must search it. */
	if (slot->dir_fd < 0 || fchmod(slot->dir_fd, 0755) < 0) {
		rc = -errno;
		snprintf(err, errlen, "cannot open %s: %s", slot->dir,
		         strerror(-rc));
		docker_channel_slot_release(slot);
		return rc;
	}
	rc = chan_listen(slot->dir_fd, &slot->listen_fd, err, errlen);
	if (rc < 0)
		docker_channel_slot_release(slot);
	return rc;
}

void docker_channel_slot_release(struct docker_channel_slot *slot)
{
	if (slot->listen_fd >= 0)
		close(slot->listen_fd);
	slot->listen_fd = -1;
	if (slot->dir_fd >= 0) {
		(void)unlinkat(slot->dir_fd, CHAN_SOCK, 0);
		close(slot->dir_fd);
	}
	slot->dir_fd = -1;
	if (slot->dir[0] && rmdir(slot->dir) < 0 && errno != ENOENT)
		log_debug("cannot remove %s: %s", slot->dir, strerror(errno));
	slot->dir[0] = '\0';
}

/* ---- the peer ----------------------------------------------------------- */

static bool chan_hex(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

bool docker_channel_cgroup_names(const char *text, size_t n, const char *cid)
{
	size_t len = strlen(cid);
	const char *p = text, *end = text + n;

	if (len != 64)
		return false;
	for (size_t i = 0; i < len; i++)
		if (!chan_hex(cid[i]))
			return false;
	while ((p = memmem(p, (size_t)(end - p), cid, len))) {
		char before = p > text ? p[-1] : '\0';
		const char *after = p + len;
		bool end_ok = after == end || *after == '\n' || *after == '/' ||
		              ((size_t)(end - after) >= 6 &&
		               memcmp(after, ".scope", 6) == 0);

		if ((before == '/' || before == '-') && end_ok)
			return true;
		p++;
	}
	return false;
}

/* Whether /proc/<pid>/cgroup names the container cid. */
static bool chan_pid_in(pid_t pid, const char *cid)
{
	char path[64], *text = malloc(CHAN_CGROUP_MAX);
	size_t n = 0;
	bool ok = false;
	int fd;

	if (!text)
		return false;
	snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		ssize_t r;

		while (n < CHAN_CGROUP_MAX &&
		       (r = read(fd, text + n, CHAN_CGROUP_MAX - n)) > 0)
			n += (size_t)r;
		close(fd);
		ok = docker_channel_cgroup_names(text, n, cid);
	}
	free(text);
	return ok;
}

/*
 * Checks the process at the other end of fd. Its uid must be the sandbox
 * user's; when its pid is visible to us (0 means it lives in a pid
 * namespace we cannot see: a daemon in a container), it must be a
 * process of the container. 0 or -EPERM with a message.
 */
static int chan_peer_ok(struct chan_stream *s, int fd, char *err, size_t errlen)
{
	struct ucred cr;
	socklen_t len = sizeof(cr);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) < 0) {
		snprintf(err, errlen, "the box's channel: no peer credentials");
		return -EPERM;
	}
	if (cr.uid != s->uid) {
		snprintf(err, errlen,
		         "the box's channel was taken by uid %u, not the "
		         "sandbox user %u (a user namespace remap needs "
		         "SANDBOX_WARM_CHANNEL=attach)",
		         (unsigned)cr.uid, (unsigned)s->uid);
		return -EPERM;
	}
	if (cr.pid == 0)
		log_debug(
		    "box %.12s: its agent's pid is not visible here (a "
		    "daemon in a pid namespace of its own): the channel is "
		    "taken on its uid",
		    s->cid);
	if (cr.pid > 0 && !chan_pid_in(cr.pid, s->cid)) {
		snprintf(err, errlen,
		         "the box's channel was taken by process %d, which "
		         "is not in the box",
		         (int)cr.pid);
		return -EPERM;
	}
	return 0;
}

/*
 * Takes the agent's connection if it came: checks the peer, then closes
 * and unlinks the listener. 1 when taken, -EAGAIN when not yet, -errno.
 */
static int chan_accept(struct chan_stream *s, char *err, size_t errlen)
{
	int fd = accept4(s->lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
	int rc;

	if (fd < 0) {
		if (errno == EAGAIN || errno == EINTR || errno == ECONNABORTED)
			return -EAGAIN;
		rc = -errno;
		snprintf(err, errlen, "accepting the box's channel: %s",
		         strerror(-rc));
		return rc;
	}
	/* One connection only: nothing else reaches the agent's channel. */
	close(s->lfd);
	s->lfd = -1;
	(void)unlinkat(s->dir_fd, CHAN_SOCK, 0);
	rc = chan_peer_ok(s, fd, err, errlen);
	if (rc < 0) {
		log_warnx("box %.12s: %s", s->cid, err);
		close(fd);
		return rc;
	}
	s->fd = fd;
	return 1;
}

/* ---- the stream --------------------------------------------------------- */

int docker_channel_stream(struct docker_channel_slot *slot, const char *cid,
                          uid_t uid, struct box_stream **out, char *err,
                          size_t errlen)
{
	struct chan_stream *s;

	*out = NULL;
	if (slot->listen_fd < 0 || slot->dir_fd < 0) {
		snprintf(err, errlen, "the box has no channel socket");
		return -ENOENT;
	}
	s = calloc(1, sizeof(*s));
	if (s)
		s->buf = malloc(CHAN_CHUNK);
	if (s && s->buf)
		s->dir_fd = fcntl(slot->dir_fd, F_DUPFD_CLOEXEC, 0);
	if (!s || !s->buf || s->dir_fd < 0) {
		if (s)
			free(s->buf);
		free(s);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	s->base.impl = &chan_stream_impl;
	s->lfd = slot->listen_fd;
	slot->listen_fd = -1;
	s->fd = -1;
	s->uid = uid;
	snprintf(s->cid, sizeof(s->cid), "%s", cid);
	*out = &s->base;
	return 0;
}

static int chan_fd(const struct box_stream *base)
{
	const struct chan_stream *s = (const struct chan_stream *)base;

	return s->fd >= 0 ? s->fd : s->lfd;
}

static bool chan_pending(const struct box_stream *base)
{
	(void)base;
	return false;
}

static int chan_pump(struct box_stream *base, box_output_fn fn, void *arg,
                     char *err, size_t errlen)
{
	struct chan_stream *s = (struct chan_stream *)base;
	ssize_t got;
	int rc;

	if (s->error)
		return s->error;
	if (s->fd < 0) {
		rc = chan_accept(s, err, errlen);
		if (rc < 0 && rc != -EAGAIN)
			s->error = rc;
		if (rc < 0)
			return rc;
	}
	got = recv(s->fd, s->buf, CHAN_CHUNK, MSG_DONTWAIT);
	if (got < 0 && (errno == EAGAIN || errno == EINTR))
		return -EAGAIN;
	if (got < 0) {
		snprintf(err, errlen, "reading the box's channel failed: %s",
		         strerror(errno));
		return s->error = -errno;
	}
	if (got == 0)
		return 0;
	rc = fn(arg, 1, s->buf, (size_t)got);
	if (rc < 0)
		return s->error = rc;
	return 1;
}

static ssize_t chan_write(struct box_stream *base, const void *p, size_t n)
{
	struct chan_stream *s = (struct chan_stream *)base;
	ssize_t w;

	/* Before the agent connected there is nobody to write to. */
	if (s->fd < 0)
		return -EAGAIN;
	w = send(s->fd, p, n, MSG_DONTWAIT | MSG_NOSIGNAL);
	if (w < 0)
		return errno == EWOULDBLOCK ? -EAGAIN : -errno;
	return w;
}

static void chan_close_write(struct box_stream *base)
{
	struct chan_stream *s = (struct chan_stream *)base;

	if (s->fd >= 0)
		(void)shutdown(s->fd, SHUT_WR);
}

static void chan_close(struct box_stream *base)
{
	struct chan_stream *s = (struct chan_stream *)base;

	if (s->fd >= 0)
		close(s->fd);
	if (s->lfd >= 0) {
		close(s->lfd);
		(void)unlinkat(s->dir_fd, CHAN_SOCK, 0);
	}
	close(s->dir_fd);
	free(s->buf);
	free(s);
}

static const struct box_stream_impl chan_stream_impl = {
    .fd = chan_fd,
    .pending = chan_pending,
    .pump = chan_pump,
    .write = chan_write,
    .close_write = chan_close_write,
    .close = chan_close,
};

/* Whether v is the /info security option name, alone or with ",key=val". */
static bool chan_secopt(const char *v, const char *name)
{
	size_t n = strlen(name);

	return v && strncmp(v, name, n) == 0 && (v[n] == '\0' || v[n] == ',');
}

bool docker_channel_auto(const cJSON *info, char *why, size_t whylen)
{
	const cJSON *opts =
	    cJSON_GetObjectItemCaseSensitive(info, "SecurityOptions");
	const char *os = cJSON_GetStringValue(
	    cJSON_GetObjectItemCaseSensitive(info, "OperatingSystem"));
	const cJSON *o;

	cJSON_ArrayForEach (o, opts) {
		const char *v = cJSON_GetStringValue(o);

		if (chan_secopt(v, "name=userns")) {
			snprintf(why, whylen,
			         "the engine remaps user ids "
			         "(userns-remap)");
			return false;
		}
		if (chan_secopt(v, "name=rootless")) {
			snprintf(why, whylen, "the engine is rootless");
			return false;
		}
	}
	if (os && strstr(os, "Docker Desktop")) {
		snprintf(why, whylen,
		         "the engine is Docker Desktop's, in a VM");
		return false;
	}
	snprintf(why, whylen, "a local engine without user id remapping");
	return true;
}
