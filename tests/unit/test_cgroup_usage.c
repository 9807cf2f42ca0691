/* SPDX-License-Identifier: MIT */
/*
 * test_cgroup_usage: reading a measured box's usage from a cgroup filesystem,
 * on a fake tree in a temporary directory: the probe (layout and engine
 * driver), parent names, cgroup v1 and v2 figures, hostile or missing
 * files, removal and the sweep of old parents.
 */
#include <errno.h>
#include <stdatomic.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include "backend/docker/cgroup_usage.h"
#include "tap.h"

static char base[64];  /* the temporary directory */
static char root[256]; /* the cgroup filesystem under test */

static void put(const char *rel, const char *text)
{
	tap_put(root, rel, text);
}

static void mk(const char *rel)
{
	tap_mkdir(root, rel);
}

static bool exists(const char *rel)
{
	char path[PATH_MAX + 512];

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	return access(path, F_OK) == 0;
}

static void rm_file(const char *rel)
{
	char path[PATH_MAX + 512];

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	(void)unlink(path);
}

/* Makes a directory look old (the sweep's age test). */
static void age(const char *rel)
{
	char path[PATH_MAX + 512];
	struct timeval tv[2] = {{1000000000, 0}, {1000000000, 0}};

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	(void)utimes(path, tv);
}

static void test_names(void)
{
	char p[96];

	is_int(cgroup_usage_parent("mcpsd-0123abcd", p, sizeof(p)), 0,
	       "a run's name");
	is_str(p, "/mcpsd-runs/mcpsd-0123abcd", "its CgroupParent");
	is_int(cgroup_usage_parent("../x", p, sizeof(p)), -EINVAL,
	       "no path in a name");
	is_int(cgroup_usage_parent("..", p, sizeof(p)), -EINVAL, "not ..");
	is_int(cgroup_usage_parent("", p, sizeof(p)), -EINVAL, "not empty");
	is_int(cgroup_usage_parent("a b", p, sizeof(p)), -EINVAL, "no space");
	is_int(cgroup_usage_parent("a", p, 8), -EINVAL, "too long for out");
}

static void test_v1(void)
{
	struct box_usage u;
	char why[256];

	mk("memory");
	mk("cpuacct");
	mk("pids");
	is_int(cgroup_usage_probe(root, "cgroupfs", why, sizeof(why)),
	       CGROUP_USAGE_OFF, "no accounting files: off");
	put("memory/memory.max_usage_in_bytes", "0\n");
	put("cpuacct/cpuacct.usage", "0\n");
	is_int(cgroup_usage_probe(root, "cgroupfs", why, sizeof(why)),
	       CGROUP_USAGE_V1, "cgroup v1");
	is_int(cgroup_usage_probe(root, "systemd", why, sizeof(why)),
	       CGROUP_USAGE_OFF, "the systemd driver is not supported");
	ok(strstr(why, "systemd") != NULL, "and says so: %s", why);
	is_int(cgroup_usage_probe("", "cgroupfs", why, sizeof(why)),
	       CGROUP_USAGE_OFF, "an empty setting turns it off");

	mk("memory/" CGROUP_USAGE_DIR);
	mk("cpuacct/" CGROUP_USAGE_DIR);
	mk("pids/" CGROUP_USAGE_DIR);
	is_int(cgroup_usage_read(root, CGROUP_USAGE_V1, "run1", NULL, &u),
	       -ENOENT, "a parent the engine did not make");
	mk("memory/" CGROUP_USAGE_DIR "/run1");
	mk("cpuacct/" CGROUP_USAGE_DIR "/run1");
	mk("pids/" CGROUP_USAGE_DIR "/run1");
	put("memory/" CGROUP_USAGE_DIR "/run1/memory.max_usage_in_bytes",
	    "109449216\n");
	put("cpuacct/" CGROUP_USAGE_DIR "/run1/cpuacct.usage", "821381461\n");
	is_int(cgroup_usage_read(root, CGROUP_USAGE_V1, "run1", NULL, &u), 0,
	       "read");
	is_int(u.memory_peak_bytes, 109449216, "peak bytes");
	is_int(u.cpu_ms, 821, "CPU ns to ms");

	put("memory/" CGROUP_USAGE_DIR "/run1/memory.max_usage_in_bytes",
	    "-5\n");
	put("cpuacct/" CGROUP_USAGE_DIR "/run1/cpuacct.usage",
	    "99999999999999999999999\n");
	is_int(cgroup_usage_read(root, CGROUP_USAGE_V1, "run1", NULL, &u), 0,
	       "garbage in both files: the parent is there");
	ok(u.memory_peak_bytes == -1 && u.cpu_ms == -1,
	   "a negative number and an overflow are unknown");
	put("memory/" CGROUP_USAGE_DIR "/run1/memory.max_usage_in_bytes",
	    "12 34\n");
	put("cpuacct/" CGROUP_USAGE_DIR "/run1/cpuacct.usage", "2000000\n");
	is_int(cgroup_usage_read(root, CGROUP_USAGE_V1, "run1", NULL, &u), 0,
	       "one figure readable");
	is_int(u.memory_peak_bytes, -1, "trailing bytes refused");
	is_int(u.cpu_ms, 2, "the other figure kept");
	is_int(cgroup_usage_read(root, CGROUP_USAGE_V1, "../memory", NULL, &u),
	       -EINVAL, "no path in a name");

	/* Removal: every hierarchy, files first (a real cgroupfs has none
	 * to remove; here rmdir needs an empty directory). */
	rm_file("memory/" CGROUP_USAGE_DIR "/run1/memory.max_usage_in_bytes");
	rm_file("cpuacct/" CGROUP_USAGE_DIR "/run1/cpuacct.usage");
	mk("pids/" CGROUP_USAGE_DIR "/run1/child");
	is_int(cgroup_usage_remove(root, CGROUP_USAGE_V1, "run1"), 0,
	       "removed where it can be");
	ok(!exists("memory/" CGROUP_USAGE_DIR "/run1") &&
	       !exists("cpuacct/" CGROUP_USAGE_DIR "/run1"),
	   "gone from memory and cpuacct");
	ok(exists("pids/" CGROUP_USAGE_DIR "/run1"),
	   "a parent with a child stays");
	is_int(cgroup_usage_remove(root, CGROUP_USAGE_V1, "run1"), 0,
	       "removing again is harmless");

	mk("memory/" CGROUP_USAGE_DIR "/old");
	mk("memory/" CGROUP_USAGE_DIR "/new");
	age("memory/" CGROUP_USAGE_DIR "/old");
	is_int(cgroup_usage_sweep(root, CGROUP_USAGE_V1, 3600), 1,
	       "the sweep removes an old empty parent");
	ok(!exists("memory/" CGROUP_USAGE_DIR "/old"), "the old one is gone");
	ok(exists("memory/" CGROUP_USAGE_DIR "/new"), "a recent one stays");
}

static void test_v2(void)
{
	struct box_usage u;
	char why[256];

	put("cgroup.controllers", "cpu memory pids\n");
	is_int(cgroup_usage_probe(root, "cgroupfs", why, sizeof(why)),
	       CGROUP_USAGE_V1, "v1 files win (hybrid hosts)");
	mk("v2");
	mk("v2/" CGROUP_USAGE_DIR);
	mk("v2/" CGROUP_USAGE_DIR "/run2");
	put("v2/cgroup.controllers", "cpu memory pids\n");
	put("v2/" CGROUP_USAGE_DIR "/run2/memory.peak", "4096\n");
	put("v2/" CGROUP_USAGE_DIR "/run2/cpu.stat",
	    "usage_usec 1500000\nuser_usec 1000000\nsystem_usec 500000\n");
	snprintf(root, sizeof(root), "%s/v2", base);
	is_int(cgroup_usage_probe(root, "cgroupfs", why, sizeof(why)),
	       CGROUP_USAGE_V2, "cgroup v2");
	is_int(cgroup_usage_read(root, CGROUP_USAGE_V2, "run2", NULL, &u), 0,
	       "read v2");
	is_int(u.memory_peak_bytes, 4096, "memory.peak");
	is_int(u.cpu_ms, 1500, "usage_usec to ms");
	/* A warm box's files, kept open between its runs. */
	{
		struct cgroup_usage_files f;
		int fds = 0;

		cgroup_usage_files_init(&f);
		is_int(cgroup_usage_read(root, CGROUP_USAGE_V2, "run2", &f, &u),
		       0, "read through kept files");
		ok(atomic_load(&f.mem) >= 0 && atomic_load(&f.cpu) >= 0,
		   "both opened by the first read");
		fds = atomic_load(&f.cpu);
		put(CGROUP_USAGE_DIR "/run2/cpu.stat", "usage_usec 2500000\n");
		put(CGROUP_USAGE_DIR "/run2/memory.peak", "8192\n");
		is_int(cgroup_usage_read(root, CGROUP_USAGE_V2, "run2", &f, &u),
		       0, "read again");
		ok(u.cpu_ms == 2500 && u.memory_peak_bytes == 8192,
		   "the new figures, from offset 0 (%lld ms, %lld bytes)",
		   u.cpu_ms, u.memory_peak_bytes);
		is_int(atomic_load(&f.cpu), fds, "through the same descriptor");
		cgroup_usage_files_close(&f);
		ok(atomic_load(&f.mem) == -1 && atomic_load(&f.cpu) == -1,
		   "closed");
		cgroup_usage_files_close(&f);
	}
	put(CGROUP_USAGE_DIR "/run2/cpu.stat", "user_usec 1\nusage_usec x\n");
	is_int(cgroup_usage_read(root, CGROUP_USAGE_V2, "run2", NULL, &u), 0,
	       "read again");
	is_int(u.cpu_ms, -1, "a bad usage_usec is unknown");
	rm_file(CGROUP_USAGE_DIR "/run2/memory.peak");
	rm_file(CGROUP_USAGE_DIR "/run2/cpu.stat");
	is_int(cgroup_usage_remove(root, CGROUP_USAGE_V2, "run2"), 0,
	       "removed");
	ok(!exists(CGROUP_USAGE_DIR "/run2"), "gone");
}

int main(void)
{
	char cmd[300];

	snprintf(base, sizeof(base), "/tmp/test_cgroup_usage.XXXXXX");
	if (!mkdtemp(base)) {
		ok(false, "mkdtemp");
		return tap_done();
	}
	snprintf(root, sizeof(root), "%s", base);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", base);
	test_names();
	test_v1();
	test_v2();
	if (system(cmd) != 0)
		ok(false, "cleanup");
	return tap_done();
}
