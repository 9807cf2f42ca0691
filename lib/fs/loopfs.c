/* SPDX-License-Identifier: MIT */
/*
 * loopfs: mkfs.ext4 through posix_spawn (fixed argv and environment, output
 * captured for the error message, a time limit), loop devices through
 * LOOP_CTL_GET_FREE and LOOP_CONFIGURE with LO_FLAGS_AUTOCLEAR (so an
 * unmount frees the device and a failed mount leaves nothing behind), and
 * mount(2) with MS_NOSUID | MS_NODEV | MS_NOEXEC.
 */
#include "fs/loopfs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/loop.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "util/log.h"
#include "util/mono.h"

#define MKFS_TIMEOUT_MS 60000
#define ATTACH_TRIES 32

static const char *const mkfs_paths[] = {
    "/usr/sbin/mkfs.ext4",
    "/sbin/mkfs.ext4",
    "/usr/sbin/mke2fs",
    "/sbin/mke2fs",
};

/* posix_spawn takes char *const argv[]; it does not write to them. */
static char *arg(const char *s)
{
	return (char *)(uintptr_t)s;
}

/* Keeps the printable part of the last output of a command, one line. */
static void tidy_output(char *s)
{
	size_t n = strlen(s);

	while (n && (s[n - 1] == '\n' || s[n - 1] == ' '))
		s[--n] = '\0';
	for (char *p = s; *p; p++)
		if ((unsigned char)*p < 0x20 || (unsigned char)*p >= 0x7f)
			*p = ' ';
}

/*
 * Runs argv (argv[0] an absolute path) with stdin from /dev/null and
 * stdout/stderr captured. Returns the exit status (0..255), or a negative
 * errno when it could not run or was killed at the time limit.
 */
static int run_tool(char *const argv[], char *out, size_t outlen)
{
	static char env_path[] = "PATH=/usr/sbin:/usr/bin:/sbin:/bin";
	static char env_lc[] = "LC_ALL=C";
	static char *const envp[] = {env_path, env_lc, NULL};
	posix_spawn_file_actions_t fa;
	long long deadline = mono_ms() + MKFS_TIMEOUT_MS;
	size_t len = 0;
	int pipefd[2], status = 0, r;
	pid_t pid;

	out[0] = '\0';
	if (pipe2(pipefd, O_CLOEXEC) < 0)
		return -errno;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, pipefd[1], 1);
	posix_spawn_file_actions_adddup2(&fa, pipefd[1], 2);
	r = posix_spawn(&pid, argv[0], &fa, NULL, argv, envp);
	posix_spawn_file_actions_destroy(&fa);
	close(pipefd[1]);
	if (r != 0) {
		close(pipefd[0]);
		return -r;
	}
	for (;;) {
		struct pollfd p = {.fd = pipefd[0], .events = POLLIN};
		long long left = deadline - mono_ms();
		char chunk[512];
		ssize_t n;

		if (left <= 0) {
			kill(pid, SIGKILL);
			snprintf(out, outlen, "%s did not finish in %d s",
			         argv[0], MKFS_TIMEOUT_MS / 1000);
			r = -ETIMEDOUT;
			break;
		}
		if (poll(&p, 1, (int)left) < 0) {
			if (errno == EINTR)
				continue;
			r = -errno;
			kill(pid, SIGKILL);
			break;
		}
		n = read(pipefd[0], chunk, sizeof(chunk));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		/* Keep the tail: the reason comes last. */
		if ((size_t)n >= outlen) {
			memcpy(out, chunk + (size_t)n - (outlen - 1),
			       outlen - 1);
			len = outlen - 1;
		} else {
			if (len + (size_t)n >= outlen) {
				size_t drop = len + (size_t)n - (outlen - 1);

				memmove(out, out + drop, len - drop);
				len -= drop;
			}
			memcpy(out + len, chunk, (size_t)n);
			len += (size_t)n;
		}
		out[len] = '\0';
	}
	close(pipefd[0]);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	tidy_output(out);
	if (r < 0)
		return r;
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	return -ECHILD;
}

int loopfs_format(const char *image, uint64_t size, unsigned inodes, uid_t uid,
                  gid_t gid, char *err, size_t errlen)
{
	char n_inodes[32], ext[96], output[512];
	const char *mkfs = NULL;
	int fd, r;

	for (size_t i = 0; i < sizeof(mkfs_paths) / sizeof(mkfs_paths[0]); i++)
		if (access(mkfs_paths[i], X_OK) == 0) {
			mkfs = mkfs_paths[i];
			break;
		}
	if (!mkfs) {
		snprintf(err, errlen,
		         "mkfs.ext4 was not found in /usr/sbin or /sbin: "
		         "install e2fsprogs");
		return -ENOENT;
	}
	fd = open(image, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
	          0600);
	if (fd < 0) {
		r = -errno;
		snprintf(err, errlen, "cannot create %s: %s", image,
		         strerror(-r));
		return r;
	}
	if (ftruncate(fd, (off_t)size) < 0) {
		r = -errno;
		close(fd);
		snprintf(err, errlen, "cannot size %s to %llu bytes: %s", image,
		         (unsigned long long)size, strerror(-r));
		goto fail;
	}
	close(fd);
	snprintf(n_inodes, sizeof(n_inodes), "%u", inodes);
	snprintf(ext, sizeof(ext), "root_owner=%u:%u,nodiscard", (unsigned)uid,
	         (unsigned)gid);
	{
		char *const argv[] = {
		    arg(mkfs), arg("-q"),       arg("-F"),
		    arg("-t"), arg("ext4"),     arg("-m"),
		    arg("0"),  arg("-N"),       n_inodes,
		    arg("-L"), arg("mcpsd-ws"), arg("-E"),
		    ext,       arg(image),      NULL,
		};

		r = run_tool(argv, output, sizeof(output));
	}
	if (r != 0) {
		snprintf(err, errlen, "%s failed (%s%d): %s", mkfs,
		         r < 0 ? "error " : "exit status ", r < 0 ? -r : r,
		         output[0] ? output : "no output");
		r = r < 0 ? r : -EIO;
		goto fail;
	}
	return 0;
fail:
	unlink(image);
	return r;
}

/* Finds a loop device the image is attached to already ("" if none). */
static void find_attached(const char *image, char *dev, size_t devlen)
{
	char real[4096], path[300], backing[4096];
	DIR *d;
	struct dirent *de;

	dev[0] = '\0';
	if (!realpath(image, real))
		return;
	d = opendir("/sys/block");
	if (!d)
		return;
	while ((de = readdir(d))) {
		FILE *f;
		size_t n;

		if (strncmp(de->d_name, "loop", 4) != 0 ||
		    strlen(de->d_name) > 32)
			continue;
		snprintf(path, sizeof(path), "/sys/block/%s/loop/backing_file",
		         de->d_name);
		f = fopen(path, "re");
		if (!f)
			continue;
		n = fread(backing, 1, sizeof(backing) - 1, f);
		fclose(f);
		backing[n] = '\0';
		while (n && backing[n - 1] == '\n')
			backing[--n] = '\0';
		if (strcmp(backing, real) == 0) {
			snprintf(dev, devlen, "/dev/%.32s", de->d_name);
			break;
		}
	}
	closedir(d);
}

/* Attaches image to a free loop device; returns its fd. */
static int attach(int imgfd, char *dev, size_t devlen, char *err, size_t errlen)
{
	int ctl, lfd = -1, r = -EBUSY;

	ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
	if (ctl < 0) {
		r = -errno;
		snprintf(err, errlen,
		         "cannot open /dev/loop-control: %s (loop mode needs "
		         "root and the loop devices; see docs/workspaces.md)",
		         strerror(-r));
		return r;
	}
	for (int i = 0; i < ATTACH_TRIES; i++) {
		struct loop_config lc;
		int n = ioctl(ctl, LOOP_CTL_GET_FREE);

		if (n < 0) {
			r = -errno;
			snprintf(err, errlen, "no free loop device: %s",
			         strerror(-r));
			break;
		}
		snprintf(dev, devlen, "/dev/loop%d", n);
		lfd = open(dev, O_RDWR | O_CLOEXEC);
		if (lfd < 0) {
			r = -errno;
			snprintf(err, errlen,
			         "cannot open %s: %s (a daemon in a container "
			         "needs the host's /dev/loop* nodes; see "
			         "docs/workspaces.md)",
			         dev, strerror(-r));
			break;
		}
		memset(&lc, 0, sizeof(lc));
		lc.fd = (__u32)imgfd;
		lc.info.lo_flags = LO_FLAGS_AUTOCLEAR;
		if (ioctl(lfd, LOOP_CONFIGURE, &lc) == 0) {
			r = 0;
			break;
		}
		r = -errno;
		if (r == -EINVAL || r == -ENOTTY) {
			/* Before Linux 5.8: the two-step interface. */
			struct loop_info64 li;

			memset(&li, 0, sizeof(li));
			li.lo_flags = LO_FLAGS_AUTOCLEAR;
			if (ioctl(lfd, LOOP_SET_FD, imgfd) == 0) {
				if (ioctl(lfd, LOOP_SET_STATUS64, &li) == 0) {
					r = 0;
					break;
				}
				r = -errno;
				ioctl(lfd, LOOP_CLR_FD, 0);
			} else {
				r = -errno;
			}
		}
		close(lfd);
		lfd = -1;
		if (r != -EBUSY) {
			snprintf(err, errlen, "cannot attach a loop device: %s",
			         strerror(-r));
			break;
		}
		/* Someone took that device between GET_FREE and us. */
	}
	close(ctl);
	if (r == -EBUSY && lfd < 0)
		snprintf(err, errlen,
		         "no loop device could be attached: all "
		         "were taken while trying");
	return r < 0 ? r : lfd;
}

int loopfs_mount(const char *image, const char *target, bool fresh, char *err,
                 size_t errlen)
{
	char dev[64], via[64];
	int imgfd = -1, lfd = -1, tfd = -1, r;

	tfd = open(target, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (tfd < 0) {
		r = -errno;
		snprintf(err, errlen, "cannot open mount point %s: %s", target,
		         strerror(-r));
		goto out;
	}
	dev[0] = '\0';
	if (!fresh)
		find_attached(image, dev, sizeof(dev));
	if (dev[0]) {
		lfd = open(dev, O_RDWR | O_CLOEXEC);
		if (lfd < 0) {
			r = -errno;
			snprintf(err, errlen, "cannot open %s: %s", dev,
			         strerror(-r));
			goto out;
		}
	} else {
		imgfd = open(image, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
		if (imgfd < 0) {
			r = -errno;
			snprintf(err, errlen, "cannot open %s: %s", image,
			         strerror(-r));
			goto out;
		}
		lfd = attach(imgfd, dev, sizeof(dev), err, errlen);
		if (lfd < 0) {
			r = lfd;
			goto out;
		}
	}
	/* Mount on the directory we opened, not on whatever the path is. */
	snprintf(via, sizeof(via), "/proc/self/fd/%d", tfd);
	/*
	 * discard: a file deleted inside gives its blocks back to the host
	 * (the loop device punches holes in the sparse image).
	 */
	if (mount(dev, via, "ext4", MS_NOSUID | MS_NODEV | MS_NOEXEC,
	          "discard") < 0) {
		r = -errno;
		snprintf(err, errlen, "cannot mount %s (%s) at %s: %s", image,
		         dev, target, strerror(-r));
		goto out;
	}
	r = 0;
out:
	if (lfd >= 0)
		close(lfd); /* the mount holds the device now */
	if (imgfd >= 0)
		close(imgfd);
	if (tfd >= 0)
		close(tfd);
	return r;
}

int loopfs_umount(const char *target)
{
	if (umount2(target, UMOUNT_NOFOLLOW) < 0)
		return -errno;
	return 0;
}

int loopfs_is_mountpoint(int parentfd, const char *name)
{
	struct stat parent, self;

	if (fstat(parentfd, &parent) < 0)
		return -errno;
	if (fstatat(parentfd, name, &self, AT_SYMLINK_NOFOLLOW) < 0)
		return -errno;
	if (!S_ISDIR(self.st_mode))
		return 0;
	if (self.st_dev != parent.st_dev)
		return 1;
#ifdef STATX_ATTR_MOUNT_ROOT
	{
		struct statx sx;

		if (statx(parentfd, name, AT_SYMLINK_NOFOLLOW,
		          STATX_BASIC_STATS, &sx) == 0 &&
		    (sx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT))
			return (sx.stx_attributes & STATX_ATTR_MOUNT_ROOT) ? 1
			                                                   : 0;
	}
#endif
	return 0;
}

/* Undoes the octal escapes of /proc/self/mountinfo in place. */
static void unescape_mountinfo(char *s)
{
	char *w = s;

	for (char *p = s; *p; p++) {
		if (p[0] == '\\' && p[1] >= '0' && p[1] <= '3' && p[2] >= '0' &&
		    p[2] <= '7' && p[3] >= '0' && p[3] <= '7') {
			*w++ = (char)((p[1] - '0') * 64 + (p[2] - '0') * 8 +
			              (p[3] - '0'));
			p += 3;
		} else {
			*w++ = *p;
		}
	}
	*w = '\0';
}

static bool under(const char *path, const char *mnt)
{
	size_t n = strlen(mnt);

	if (strcmp(mnt, "/") == 0)
		return true;
	return strncmp(path, mnt, n) == 0 && (path[n] == '/' || !path[n]);
}

int loopfs_propagates(const char *path)
{
	char line[4096], real[4096];
	size_t best = 0;
	int result = -ENOENT;
	FILE *f;

	if (!realpath(path, real))
		return -errno;
	f = fopen("/proc/self/mountinfo", "re");
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		char *p = line, *mnt = NULL;
		bool shared = false;

		/* id parent maj:min root mountpoint options [opt...] - ... */
		for (int field = 0; *p && *p != '\n'; field++) {
			char *tok = p;

			while (*p && *p != ' ' && *p != '\n')
				p++;
			if (*p)
				*p++ = '\0';
			if (field == 4)
				mnt = tok;
			if (field >= 6 && strcmp(tok, "-") == 0)
				break;
			if (field >= 6 && strncmp(tok, "shared:", 7) == 0)
				shared = true;
		}
		if (!mnt)
			continue;
		unescape_mountinfo(mnt);
		if (under(real, mnt) && strlen(mnt) >= best) {
			best = strlen(mnt);
			result = shared ? 1 : 0;
		}
	}
	fclose(f);
	return result;
}

bool loopfs_engine_shares_mounts(void)
{
	struct stat self, other;
	DIR *d;
	struct dirent *e;
	bool same = false;

	if (stat("/proc/self/ns/mnt", &self) < 0)
		return false;
	d = opendir("/proc");
	if (!d)
		return false;
	while (!same && (e = readdir(d))) {
		char path[64], comm[32] = "";
		FILE *f;

		if (e->d_name[0] < '1' || e->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%.20s/comm", e->d_name);
		f = fopen(path, "re");
		if (!f)
			continue;
		if (!fgets(comm, sizeof(comm), f))
			comm[0] = '\0';
		fclose(f);
		if (strcmp(comm, "dockerd\n") != 0)
			continue;
		snprintf(path, sizeof(path), "/proc/%.20s/ns/mnt", e->d_name);
		same = stat(path, &other) == 0 && other.st_ino == self.st_ino &&
		       other.st_dev == self.st_dev;
	}
	closedir(d);
	return same;
}
