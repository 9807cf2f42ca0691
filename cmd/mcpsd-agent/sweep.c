/* SPDX-License-Identifier: MIT */
/*
 * sweep: no process started by a call outlives it. After every exec (and
 * before the next) the agent kills every process of the container except
 * PID 1 (the container's init), itself and the kernel, found by reading
 * /proc, which in the container's PID namespace lists exactly the
 * container's processes. Processes may fork while being killed, so the scan
 * repeats until one finds nothing alive, within AGENT_SWEEP_MS.
 *
 * Also the cgroup figures reported in `D`: cgroup v1 file names first (the
 * engine this project runs on), cgroup v2 names otherwise.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"

#define SWEEP_TRACK 4096 /* distinct pids remembered for the count */

/* Reads a small file into buf (NUL-terminated); -1 on failure. */
static ssize_t read_small(const char *path, char *buf, size_t cap)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	ssize_t n;

	if (fd < 0)
		return -1;
	do
		n = read(fd, buf, cap - 1);
	while (n < 0 && errno == EINTR);
	close(fd);
	if (n < 0)
		return -1;
	buf[n] = '\0';
	return n;
}

bool sweep_allowed(void)
{
	static const char *const inits[] = {
	    "docker-init", "tini", "tini-static", "catatonit", "dumb-init"};
	char cmd[256];
	const char *base;
	ssize_t n;

	if (getpid() == 1)
		return true;
	n = read_small("/proc/1/cmdline", cmd, sizeof(cmd));
	if (n <= 0)
		return false;
	base = strrchr(cmd, '/');
	base = base ? base + 1 : cmd;
	for (size_t i = 0; i < sizeof(inits) / sizeof(inits[0]); i++)
		if (strcmp(base, inits[i]) == 0)
			return true;
	return false;
}

/* The state letter of /proc/<pid>/stat, or 0 when it cannot be read. */
static char proc_state(const char *pid)
{
	char path[64], st[512];
	const char *rp;

	snprintf(path, sizeof(path), "/proc/%s/stat", pid);
	if (read_small(path, st, sizeof(st)) <= 0)
		return 0;
	/* "pid (comm) S ...": comm may hold ')' and spaces. */
	rp = strrchr(st, ')');
	if (!rp || rp[1] != ' ' || !rp[2])
		return 0;
	return rp[2];
}

static bool seen_has(const pid_t *seen, size_t n, pid_t p)
{
	for (size_t i = 0; i < n; i++)
		if (seen[i] == p)
			return true;
	return false;
}

/* One scan: kills what is alive; returns how many were alive. */
static unsigned sweep_round(pid_t self, pid_t keep, pid_t *seen, size_t *nseen,
                            unsigned *killed)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	unsigned alive = 0;

	if (!d)
		return 0;
	while ((e = readdir(d))) {
		char *end;
		long v;
		char st;

		if (e->d_name[0] < '1' || e->d_name[0] > '9')
			continue;
		errno = 0;
		v = strtol(e->d_name, &end, 10);
		if (errno || *end || v <= 1 || v > INT32_MAX)
			continue;
		if ((pid_t)v == self || (keep > 0 && (pid_t)v == keep))
			continue;
		st = proc_state(e->d_name);
		if (st == 0 || st == 'Z' || st == 'X' || st == 'x')
			continue; /* gone, or dead and waiting to be reaped */
		if (kill((pid_t)v, SIGKILL) < 0)
			continue; /* ESRCH: just ended; EPERM: not ours */
		alive++;
		if (!seen_has(seen, *nseen, (pid_t)v)) {
			if (*nseen < SWEEP_TRACK)
				seen[(*nseen)++] = (pid_t)v;
			(*killed)++;
		}
	}
	closedir(d);
	return alive;
}

unsigned sweep_run(const struct agent *a, pid_t keep, unsigned *left)
{
	static pid_t seen[SWEEP_TRACK];
	long long deadline = agent_now_ms() + AGENT_SWEEP_MS;
	size_t nseen = 0;
	unsigned killed = 0, alive, round = 0;
	pid_t self = getpid();

	*left = 0;
	if (!a->sweep_ok)
		return 0;
	for (;;) {
		alive = sweep_round(self, keep, seen, &nseen, &killed);
		if (alive == 0)
			break;
		if (agent_now_ms() >= deadline) {
			*left = alive;
			break;
		}
		/*
		 * SIGKILL is delivered at once, but a process takes a moment
		 * to release its memory and become a zombie.
		 */
		struct timespec ts = {0, round < 10 ? 1000000L : 5000000L};

		nanosleep(&ts, NULL);
		round++;
	}
	return killed;
}

/* ---- cgroup figures --------------------------------------------------- */

/* The first number in a file, or -1. */
static long long read_num(const char *path)
{
	char b[64], *end;
	long long v;

	if (read_small(path, b, sizeof(b)) <= 0)
		return -1;
	if (strncmp(b, "max", 3) == 0)
		return -1;
	errno = 0;
	v = strtoll(b, &end, 10);
	if (errno || end == b || v < 0)
		return -1;
	return v;
}

/* The value of "key N" in a flat keyed file, or -1. */
static long long read_key(const char *path, const char *key)
{
	char b[2048];
	size_t kl = strlen(key);
	const char *p;

	if (read_small(path, b, sizeof(b)) <= 0)
		return -1;
	for (p = b; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
		if (strncmp(p, key, kl) == 0 && p[kl] == ' ') {
			char *end;
			long long v;

			errno = 0;
			v = strtoll(p + kl + 1, &end, 10);
			return errno || end == p + kl + 1 || v < 0 ? -1 : v;
		}
	}
	return -1;
}

#define CG1 "/sys/fs/cgroup/memory/"
#define CG2 "/sys/fs/cgroup/"

long long stats_oom_kills(void)
{
	long long v = read_key(CG1 "memory.oom_control", "oom_kill");

	return v >= 0 ? v : read_key(CG2 "memory.events", "oom_kill");
}

long long stats_cpu_ns(void)
{
	long long v = read_num("/sys/fs/cgroup/cpuacct/cpuacct.usage");

	if (v >= 0)
		return v;
	v = read_key(CG2 "cpu.stat", "usage_usec");
	return v >= 0 ? v * 1000 : -1;
}

void stats_read(struct agent_stats *s)
{
	s->usage = read_num(CG1 "memory.usage_in_bytes");
	if (s->usage >= 0) {
		s->peak = read_num(CG1 "memory.max_usage_in_bytes");
		s->limit = read_num(CG1 "memory.limit_in_bytes");
	} else {
		s->usage = read_num(CG2 "memory.current");
		s->peak = read_num(CG2 "memory.peak");
		s->limit = read_num(CG2 "memory.max");
	}
	/* cgroup v1 says "no limit" with a number near 2^63. */
	if (s->limit >= (1LL << 53))
		s->limit = -1;
	s->oom_kills = stats_oom_kills();
	s->cpu_ns = stats_cpu_ns();
}
