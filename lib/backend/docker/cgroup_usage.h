/* SPDX-License-Identifier: MIT */
/*
 * cgroup_usage: a box's peak memory and CPU time after it stopped. runc removes
 * a container's own cgroup as soon as its main process exits, and the
 * engine's stats endpoint then reports zeros. A measured box is therefore
 * created inside a parent cgroup of its own (CgroupParent
 * "/mcpsd-runs/<name>", cgroupfs driver): the kernel charges the child's
 * memory and CPU time to the parent as well, and the parent's high-water
 * mark (cgroup v1 memory.max_usage_in_bytes, v2 memory.peak) and CPU
 * counter (cpuacct.usage, cpu.stat usage_usec) stay readable until we
 * remove it. Read from the host's cgroup filesystem (SANDBOX_CGROUP_FS), so
 * nothing a box does can change the figures.
 *
 * Everything under the cgroup filesystem is read with a size bound and
 * parsed strictly. Stateless and thread-safe.
 */
#ifndef MCPSD_CGUSAGE_H
#define MCPSD_CGUSAGE_H

#include <stdatomic.h>
#include <stddef.h>
#include <time.h>

#include "backend/backend.h"

#define CGROUP_USAGE_DIR "mcpsd-runs" /* below each hierarchy's root */
#define CGROUP_USAGE_NAME_MAX 64

enum cgroup_usage_mode {
	CGROUP_USAGE_OFF = 0,
	CGROUP_USAGE_V1, /* one hierarchy per controller: memory/, cpuacct/ */
	CGROUP_USAGE_V2, /* the unified hierarchy */
};

/*
 * Which layout the cgroup filesystem at fs has, given the engine's cgroup
 * driver (GET /info CgroupDriver): CGROUP_USAGE_OFF when fs is empty or not a
 * cgroup filesystem with memory and CPU accounting, or the driver is not
 * "cgroupfs" (systemd wants slices; not supported). why gets a reason for
 * the log when OFF.
 */
enum cgroup_usage_mode cgroup_usage_probe(const char *fs, const char *driver,
                                          char *why, size_t whylen);

/*
 * The CgroupParent of a measured box named name ([A-Za-z0-9_.-], at most
 * CGROUP_USAGE_NAME_MAX): "/mcpsd-runs/<name>". -EINVAL for a bad name.
 */
__attribute__((warn_unused_result)) int
cgroup_usage_parent(const char *name, char *out, size_t outlen);

/*
 * The two files a box's usage is read from, kept open between reads of a
 * box that is read often (a warm box, once per run): opened by the first
 * read, then read at offset 0, closed by cgroup_usage_files_close (before
 * the parent is removed). -1: not open. Reads may come from two threads at
 * once (positional reads; the first open wins).
 */
struct cgroup_usage_files {
	_Atomic int mem, cpu;
};
void cgroup_usage_files_init(struct cgroup_usage_files *f);
void cgroup_usage_files_close(struct cgroup_usage_files *f);

/*
 * Reads the usage accounted to the parent of box name, through the files
 * kept in f (NULL: opened and closed each time). 0 with both figures
 * (either may still be -1 when its file is unreadable), -ENOENT when the
 * parent is not there (the engine put the box elsewhere), -EINVAL.
 */
__attribute__((warn_unused_result)) int
cgroup_usage_read(const char *fs, enum cgroup_usage_mode mode, const char *name,
                  struct cgroup_usage_files *f, struct box_usage *out);

/*
 * Removes the parent of box name in every hierarchy (after its box was
 * removed). Returns 0, or -EBUSY while a process or a child cgroup is
 * still inside (try again later).
 */
int cgroup_usage_remove(const char *fs, enum cgroup_usage_mode mode,
                        const char *name);

/*
 * Removes parents left by crashed runs: those older than max_age seconds
 * that are empty (the kernel refuses the others). Returns how many.
 */
unsigned cgroup_usage_sweep(const char *fs, enum cgroup_usage_mode mode,
                            time_t max_age);

#endif
