/* SPDX-License-Identifier: MIT */
/*
 * cgusage: see cgusage.h. Stateless.
 */
#include "docker/cgusage.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/num.h"

/* Reads at most n-1 bytes of a small file; the count or -errno. */
static ssize_t cgusage_slurp(const char *path, char *b, size_t n)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	size_t off = 0;

	if (fd < 0)
		return -errno;
	while (off + 1 < n) {
		ssize_t r = read(fd, b + off, n - 1 - off);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		off += (size_t)r;
	}
	close(fd);
	b[off] = '\0';
	return (ssize_t)off;
}

/* The file holds one number and a newline; -1 when not. */
static long long cgusage_num(const char *path)
{
	char b[32];
	ssize_t n = cgusage_slurp(path, b, sizeof(b));
	uint64_t v;

	if (n <= 0)
		return -1;
	if (b[n - 1] == '\n')
		b[--n] = '\0';
	return num_u64(b, INT64_MAX, &v) == 0 ? (long long)v : -1;
}

/* "key N" in a flat keyed file (cpu.stat); -1 when absent. */
static long long cgusage_key(const char *path, const char *key)
{
	char b[1024];
	size_t kl = strlen(key);
	const char *p;

	if (cgusage_slurp(path, b, sizeof(b)) <= 0)
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

static bool cgusage_exists(const char *fs, const char *rel)
{
	char path[PATH_MAX];

	return (size_t)snprintf(path, sizeof(path), "%s/%s", fs, rel) <
	           sizeof(path) &&
	       access(path, R_OK) == 0;
}

enum cgusage_mode cgusage_probe(const char *fs, const char *driver, char *why,
                                size_t whylen)
{
	if (!fs || !fs[0]) {
		snprintf(why, whylen, "SANDBOX_CGROUP_FS is empty");
		return CGUSAGE_OFF;
	}
	if (!driver || strcmp(driver, "cgroupfs") != 0) {
		snprintf(why, whylen,
		         "the engine's cgroup driver is '%.32s', not cgroupfs",
		         driver ? driver : "unknown");
		return CGUSAGE_OFF;
	}
	if (cgusage_exists(fs, "memory/memory.max_usage_in_bytes") &&
	    cgusage_exists(fs, "cpuacct/cpuacct.usage"))
		return CGUSAGE_V1;
	if (cgusage_exists(fs, "cgroup.controllers"))
		return CGUSAGE_V2;
	snprintf(why, whylen,
	         "%.200s is not a cgroup filesystem with memory and cpuacct "
	         "(v1) or a unified one (v2) readable here",
	         fs);
	return CGUSAGE_OFF;
}

static bool cgusage_name_ok(const char *name)
{
	size_t n = name ? strlen(name) : 0;

	return n > 0 && n <= CGUSAGE_NAME_MAX && strcmp(name, ".") != 0 &&
	       strcmp(name, "..") != 0 &&
	       strspn(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvw"
	                    "xyz0123456789_.-") == n;
}

int cgusage_parent(const char *name, char *out, size_t outlen)
{
	if (!cgusage_name_ok(name) ||
	    (size_t)snprintf(out, outlen, "/%s/%s", CGUSAGE_DIR, name) >=
	        outlen)
		return -EINVAL;
	return 0;
}

int cgusage_read(const char *fs, enum cgusage_mode mode, const char *name,
                 struct box_usage *out)
{
	char mem[PATH_MAX], cpu[PATH_MAX];
	int a, b;
	long long v;

	out->memory_peak_bytes = out->cpu_ms = -1;
	if (!cgusage_name_ok(name) || mode == CGUSAGE_OFF)
		return -EINVAL;
	if (mode == CGUSAGE_V1) {
		a = snprintf(mem, sizeof(mem),
		             "%s/memory/" CGUSAGE_DIR
		             "/%s/memory.max_usage_in_bytes",
		             fs, name);
		b = snprintf(cpu, sizeof(cpu),
		             "%s/cpuacct/" CGUSAGE_DIR "/%s/cpuacct.usage", fs,
		             name);
	} else {
		a = snprintf(mem, sizeof(mem),
		             "%s/" CGUSAGE_DIR "/%s/memory.peak", fs, name);
		b = snprintf(cpu, sizeof(cpu), "%s/" CGUSAGE_DIR "/%s/cpu.stat",
		             fs, name);
	}
	if (a < 0 || b < 0 || (size_t)a >= sizeof(mem) ||
	    (size_t)b >= sizeof(cpu))
		return -EINVAL;
	out->memory_peak_bytes = cgusage_num(mem);
	if (mode == CGUSAGE_V1) {
		v = cgusage_num(cpu); /* nanoseconds */
		out->cpu_ms = v >= 0 ? v / 1000000 : -1;
	} else {
		v = cgusage_key(cpu, "usage_usec");
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
static void cgusage_each(const char *fs, enum cgusage_mode mode,
                         void (*fn)(const char *root, void *arg), void *arg)
{
	char root[PATH_MAX];
	struct dirent *e;
	DIR *d;

	if (mode == CGUSAGE_V2) {
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

struct cgusage_rm {
	const char *name;
	int rc;
};

static void cgusage_rm_one(const char *root, void *arg)
{
	struct cgusage_rm *x = arg;
	char path[PATH_MAX];

	if ((size_t)snprintf(path, sizeof(path), "%s/" CGUSAGE_DIR "/%s", root,
	                     x->name) >= sizeof(path))
		return;
	/* ENOENT: a hierarchy the engine did not use, or a second name. */
	if (rmdir(path) < 0 && errno == EBUSY)
		x->rc = -EBUSY;
}

int cgusage_remove(const char *fs, enum cgusage_mode mode, const char *name)
{
	struct cgusage_rm x = {name, 0};

	if (!cgusage_name_ok(name) || mode == CGUSAGE_OFF)
		return -EINVAL;
	cgusage_each(fs, mode, cgusage_rm_one, &x);
	return x.rc;
}

struct cgusage_sw {
	time_t before;
	unsigned removed;
};

static void cgusage_sweep_one(const char *root, void *arg)
{
	struct cgusage_sw *x = arg;
	char dir[PATH_MAX];
	struct dirent *e;
	struct stat sb;
	DIR *d;

	if ((size_t)snprintf(dir, sizeof(dir), "%s/" CGUSAGE_DIR, root) >=
	        sizeof(dir) ||
	    !(d = opendir(dir)))
		return;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.' || !cgusage_name_ok(e->d_name))
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

unsigned cgusage_sweep(const char *fs, enum cgusage_mode mode, time_t max_age)
{
	struct cgusage_sw x = {time(NULL) - max_age, 0};

	if (mode == CGUSAGE_OFF || !fs || !fs[0])
		return 0;
	cgusage_each(fs, mode, cgusage_sweep_one, &x);
	return x.removed;
}
