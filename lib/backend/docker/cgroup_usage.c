/* SPDX-License-Identifier: MIT */
/*
 * cgroup_usage: see cgroup_usage.h. Stateless.
 */
#include "backend/docker/cgroup_usage.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/num.h"

/* Reads fd from offset 0 into b (n bytes with the NUL at most). */
static ssize_t cgroup_usage_pread(int fd, char *b, size_t n)
{
	size_t off = 0;

	while (off + 1 < n) {
		ssize_t r = pread(fd, b + off, n - 1 - off, (off_t)off);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && off == 0)
			return -errno;
		if (r <= 0)
			break;
		off += (size_t)r;
	}
	b[off] = '\0';
	return (ssize_t)off;
}

/*
 * Reads path into b: through *kept (opened on first use; NULL: a
 * descriptor of its own, closed after).
 */
static ssize_t cgroup_usage_slurp(const char *path, _Atomic int *kept, char *b,
                                  size_t n)
{
	int fd = kept ? atomic_load(kept) : -1, mine = -1, want = -1;
	ssize_t r;

	if (fd < 0) {
		fd = mine = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
		if (fd < 0)
			return -errno;
		if (kept && atomic_compare_exchange_strong(kept, &want, fd))
			mine = -1; /* kept now */
		else if (kept) {
			close(mine); /* another read kept one first */
			mine = -1;
			fd = want;
		}
	}
	r = cgroup_usage_pread(fd, b, n);
	if (mine >= 0)
		close(mine);
	return r;
}

void cgroup_usage_files_init(struct cgroup_usage_files *f)
{
	atomic_init(&f->mem, -1);
	atomic_init(&f->cpu, -1);
}

void cgroup_usage_files_close(struct cgroup_usage_files *f)
{
	int fd = atomic_exchange(&f->mem, -1);

	if (fd >= 0)
		close(fd);
	fd = atomic_exchange(&f->cpu, -1);
	if (fd >= 0)
		close(fd);
}

/* The file holds one number and a newline; -1 when not. */
static long long cgroup_usage_num(const char *path, _Atomic int *kept)
{
	char b[32];
	ssize_t n = cgroup_usage_slurp(path, kept, b, sizeof(b));
	uint64_t v;

	if (n <= 0)
		return -1;
	if (b[n - 1] == '\n')
		b[--n] = '\0';
	return num_u64(b, INT64_MAX, &v) == 0 ? (long long)v : -1;
}

/* "key N" in a flat keyed file (cpu.stat); -1 when absent. */
static long long cgroup_usage_key(const char *path, _Atomic int *kept,
                                  const char *key)
{
	char b[1024];
	size_t kl = strlen(key);
	const char *p;

	if (cgroup_usage_slurp(path, kept, b, sizeof(b)) <= 0)
		return -1;
	for (p = b; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
		const char *e;
		uint64_t v;

		if (strncmp(p, key, kl) != 0 || p[kl] != ' ')
			continue;
		e = strchr(p + kl + 1, '\n');
		if (num_u64n(p + kl + 1,
		             e ? (size_t)(e - p - kl - 1) : strlen(p + kl + 1),
		             INT64_MAX, &v) < 0)
			return -1;
		return (long long)v;
	}
	return -1;
}

static bool cgroup_usage_exists(const char *fs, const char *rel)
{
	char path[PATH_MAX];

	return (size_t)snprintf(path, sizeof(path), "%s/%s", fs, rel) <
	           sizeof(path) &&
	       access(path, R_OK) == 0;
}

enum cgroup_usage_mode cgroup_usage_probe(const char *fs, const char *driver,
                                          char *why, size_t whylen)
{
	if (!fs || !fs[0]) {
		snprintf(why, whylen, "SANDBOX_CGROUP_FS is empty");
		return CGROUP_USAGE_OFF;
	}
	if (!driver || strcmp(driver, "cgroupfs") != 0) {
		snprintf(why, whylen,
		         "the engine's cgroup driver is '%.32s', not cgroupfs",
		         driver ? driver : "unknown");
		return CGROUP_USAGE_OFF;
	}
	if (cgroup_usage_exists(fs, "memory/memory.max_usage_in_bytes") &&
	    cgroup_usage_exists(fs, "cpuacct/cpuacct.usage"))
		return CGROUP_USAGE_V1;
	if (cgroup_usage_exists(fs, "cgroup.controllers"))
		return CGROUP_USAGE_V2;
	snprintf(why, whylen,
	         "%.200s is not a cgroup filesystem with memory and cpuacct "
	         "(v1) or a unified one (v2) readable here",
	         fs);
	return CGROUP_USAGE_OFF;
}

static bool cgroup_usage_name_ok(const char *name)
{
	size_t n = name ? strlen(name) : 0;

	return n > 0 && n <= CGROUP_USAGE_NAME_MAX && strcmp(name, ".") != 0 &&
	       strcmp(name, "..") != 0 &&
	       strspn(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvw"
	                    "xyz0123456789_.-") == n;
}

int cgroup_usage_parent(const char *name, char *out, size_t outlen)
{
	if (!cgroup_usage_name_ok(name) ||
	    (size_t)snprintf(out, outlen, "/%s/%s", CGROUP_USAGE_DIR, name) >=
	        outlen)
		return -EINVAL;
	return 0;
}

int cgroup_usage_read(const char *fs, enum cgroup_usage_mode mode,
                      const char *name, struct cgroup_usage_files *f,
                      struct box_usage *out)
{
	char mem[PATH_MAX], cpu[PATH_MAX];
	int a, b;
	long long v;

	out->memory_peak_bytes = out->cpu_ms = -1;
	if (!cgroup_usage_name_ok(name) || mode == CGROUP_USAGE_OFF)
		return -EINVAL;
	if (mode == CGROUP_USAGE_V1) {
		a = snprintf(mem, sizeof(mem),
		             "%s/memory/" CGROUP_USAGE_DIR
		             "/%s/memory.max_usage_in_bytes",
		             fs, name);
		b = snprintf(cpu, sizeof(cpu),
		             "%s/cpuacct/" CGROUP_USAGE_DIR "/%s/cpuacct.usage",
		             fs, name);
	} else {
		a = snprintf(mem, sizeof(mem),
		             "%s/" CGROUP_USAGE_DIR "/%s/memory.peak", fs,
		             name);
		b = snprintf(cpu, sizeof(cpu),
		             "%s/" CGROUP_USAGE_DIR "/%s/cpu.stat", fs, name);
	}
	if (a < 0 || b < 0 || (size_t)a >= sizeof(mem) ||
	    (size_t)b >= sizeof(cpu))
		return -EINVAL;
	out->memory_peak_bytes = cgroup_usage_num(mem, f ? &f->mem : NULL);
	if (mode == CGROUP_USAGE_V1) {
		v = cgroup_usage_num(cpu, f ? &f->cpu : NULL); /* ns */
		out->cpu_ms = v >= 0 ? v / 1000000 : -1;
	} else {
		v = cgroup_usage_key(cpu, f ? &f->cpu : NULL, "usage_usec");
		out->cpu_ms = v >= 0 ? v / 1000 : -1;
	}
	if (out->memory_peak_bytes < 0 && out->cpu_ms < 0) {
		/* Tell "not there" from "there but unreadable". */
		char *slash = strrchr(mem, '/');

		*slash = '\0';
		if (access(mem, F_OK) < 0)
			return -ENOENT;
	}
	return 0;
}

/*
 * Calls fn on every hierarchy's root: each directory (or link to one) at
 * fs for v1, fs itself for v2.
 */
static void cgroup_usage_each(const char *fs, enum cgroup_usage_mode mode,
                              void (*fn)(const char *root, void *arg),
                              void *arg)
{
	char root[PATH_MAX];
	struct dirent *e;
	DIR *d;

	if (mode == CGROUP_USAGE_V2) {
		fn(fs, arg);
		return;
	}
	d = opendir(fs);
	if (!d)
		return;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.' ||
		    (e->d_type != DT_DIR && e->d_type != DT_LNK &&
		     e->d_type != DT_UNKNOWN))
			continue;
		if ((size_t)snprintf(root, sizeof(root), "%s/%s", fs,
		                     e->d_name) < sizeof(root))
			fn(root, arg);
	}
	closedir(d);
}

struct cgroup_usage_rm {
	const char *name;
	int rc;
};

static void cgroup_usage_rm_one(const char *root, void *arg)
{
	struct cgroup_usage_rm *x = arg;
	char path[PATH_MAX];

	if ((size_t)snprintf(path, sizeof(path), "%s/" CGROUP_USAGE_DIR "/%s",
	                     root, x->name) >= sizeof(path))
		return;
	/* ENOENT: a hierarchy the engine did not use, or a second name. */
	if (rmdir(path) < 0 && errno == EBUSY)
		x->rc = -EBUSY;
}

int cgroup_usage_remove(const char *fs, enum cgroup_usage_mode mode,
                        const char *name)
{
	struct cgroup_usage_rm x = {name, 0};

	if (!cgroup_usage_name_ok(name) || mode == CGROUP_USAGE_OFF)
		return -EINVAL;
	cgroup_usage_each(fs, mode, cgroup_usage_rm_one, &x);
	return x.rc;
}

struct cgroup_usage_sw {
	time_t before;
	unsigned removed;
};

static void cgroup_usage_sweep_one(const char *root, void *arg)
{
	struct cgroup_usage_sw *x = arg;
	char dir[PATH_MAX];
	struct dirent *e;
	struct stat sb;
	DIR *d;

	if ((size_t)snprintf(dir, sizeof(dir), "%s/" CGROUP_USAGE_DIR, root) >=
	        sizeof(dir) ||
	    !(d = opendir(dir)))
		return;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.' || !cgroup_usage_name_ok(e->d_name))
			continue;
		if (fstatat(dirfd(d), e->d_name, &sb, AT_SYMLINK_NOFOLLOW) <
		        0 ||
		    !S_ISDIR(sb.st_mode) || sb.st_mtime >= x->before)
			continue;
		if (unlinkat(dirfd(d), e->d_name, AT_REMOVEDIR) == 0)
			x->removed++;
	}
	closedir(d);
}

unsigned cgroup_usage_sweep(const char *fs, enum cgroup_usage_mode mode,
                            time_t max_age)
{
	struct cgroup_usage_sw x = {time(NULL) - max_age, 0};

	if (mode == CGROUP_USAGE_OFF || !fs || !fs[0])
		return 0;
	cgroup_usage_each(fs, mode, cgroup_usage_sweep_one, &x);
	return x.removed;
}
