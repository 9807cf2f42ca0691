/* SPDX-License-Identifier: MIT */
/*
 * seccomp: the sandbox's system-call allow list and the JSON profile built
 * from it. The list below is meant to be read and reviewed: calls are
 * grouped by what they do, and a call missing from it is denied. Names a
 * given architecture lacks (the 32-bit "*64" and "*32" variants, arm's
 * cache calls, x86's arch_prctl) are skipped by the runtime on the others.
 *
 * Deliberately absent (denied with EPERM): mount, umount, umount2,
 * pivot_root, chroot, unshare, setns, the new mount API (open_tree,
 * move_mount, fsopen, fsconfig, fsmount, fspick, mount_setattr), ptrace,
 * process_vm_readv/writev, kcmp, pidfd_getfd, bpf, perf_event_open,
 * userfaultfd, keyctl, add_key, request_key, kexec_load, kexec_file_load,
 * init_module, finit_module, delete_module, reboot, swapon, swapoff, acct,
 * quotactl, syslog, lookup_dcookie, open_by_handle_at, name_to_handle_at,
 * fanotify_init, iopl, ioperm, modify_ldt, vm86, uselib, ustat, sysfs,
 * _sysctl, settimeofday, clock_settime, stime, sethostname, setdomainname,
 * mbind, set_mempolicy, migrate_pages, move_pages, memfd_secret,
 * process_madvise, vhangup, nfsservctl.
 */
#include "backend/seccomp.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define SECCOMP_EPERM 1
#define SECCOMP_ENOSYS 38

/* Unconditionally allowed. */
static const char *const seccomp_allow[] = {
    /* files and descriptors */
    "access", "chdir", "chmod", "chown", "chown32", "close", "close_range",
    "copy_file_range", "creat", "dup", "dup2", "dup3", "faccessat",
    "faccessat2", "fadvise64", "fadvise64_64", "fallocate", "fchdir", "fchmod",
    "fchmodat", "fchmodat2", "fchown", "fchown32", "fchownat", "fcntl",
    "fcntl64", "fdatasync", "flock", "fstat", "fstat64", "fstatat64", "fstatfs",
    "fstatfs64", "fsync", "ftruncate", "ftruncate64", "futimesat", "getcwd",
    "getdents", "getdents64", "ioctl", "lchown", "lchown32", "link", "linkat",
    "_llseek", "lseek", "lstat", "lstat64", "mkdir", "mkdirat", "mknod",
    "mknodat", "newfstatat", "open", "openat", "openat2", "pipe", "pipe2",
    "pread64", "preadv", "preadv2", "pwrite64", "pwritev", "pwritev2", "read",
    "readahead", "readlink", "readlinkat", "readv", "rename", "renameat",
    "renameat2", "rmdir", "sendfile", "sendfile64", "splice", "stat", "stat64",
    "statfs", "statfs64", "statx", "symlink", "symlinkat", "sync",
    "sync_file_range", "syncfs", "tee", "truncate", "truncate64", "umask",
    "unlink", "unlinkat", "utime", "utimensat", "utimensat_time64", "utimes",
    "vmsplice", "write", "writev",

    /* extended attributes */
    "fgetxattr", "flistxattr", "fremovexattr", "fsetxattr", "getxattr",
    "lgetxattr", "listxattr", "llistxattr", "lremovexattr", "lsetxattr",
    "removexattr", "setxattr",

    /* waiting on descriptors and events */
    "epoll_create", "epoll_create1", "epoll_ctl", "epoll_ctl_old",
    "epoll_pwait", "epoll_pwait2", "epoll_wait", "epoll_wait_old", "eventfd",
    "eventfd2", "inotify_add_watch", "inotify_init", "inotify_init1",
    "inotify_rm_watch", "_newselect", "poll", "ppoll", "ppoll_time64",
    "pselect6", "pselect6_time64", "select", "signalfd", "signalfd4",
    "timerfd_create", "timerfd_gettime", "timerfd_gettime64", "timerfd_settime",
    "timerfd_settime64",

    /* asynchronous I/O (the old interface; io_uring is refused) */
    "io_cancel", "io_destroy", "io_getevents", "io_pgetevents",
    "io_pgetevents_time64", "io_setup", "io_submit",

    /* memory */
    "brk", "get_mempolicy", "madvise", "membarrier", "memfd_create", "mincore",
    "mlock", "mlock2", "mlockall", "mmap", "mmap2", "mprotect", "mremap",
    "msync", "munlock", "munlockall", "munmap", "pkey_alloc", "pkey_free",
    "pkey_mprotect", "remap_file_pages",

    /* processes and threads (clone is conditional, see below) */
    "execve", "execveat", "exit", "exit_group", "fork", "getcpu", "getpgid",
    "getpgrp", "getpid", "getppid", "getpriority", "getrlimit",
    "get_robust_list", "getrusage", "getsid", "gettid", "ioprio_get",
    "ioprio_set", "kill", "pidfd_open", "pidfd_send_signal", "prctl",
    "prlimit64", "rseq", "sched_getaffinity", "sched_getattr", "sched_getparam",
    "sched_get_priority_max", "sched_get_priority_min", "sched_getscheduler",
    "sched_rr_get_interval", "sched_rr_get_interval_time64",
    "sched_setaffinity", "sched_setattr", "sched_setparam",
    "sched_setscheduler", "sched_yield", "seccomp", "setpgid", "setpriority",
    "setrlimit", "set_robust_list", "setsid", "set_tid_address", "tgkill",
    "tkill", "ugetrlimit", "vfork", "wait4", "waitid", "waitpid",

    /* credentials (only ever lowering them: all capabilities are gone) */
    "capget", "capset", "getegid", "getegid32", "geteuid", "geteuid32",
    "getgid", "getgid32", "getgroups", "getgroups32", "getresgid",
    "getresgid32", "getresuid", "getresuid32", "getuid", "getuid32", "setfsgid",
    "setfsgid32", "setfsuid", "setfsuid32", "setgid", "setgid32", "setgroups",
    "setgroups32", "setregid", "setregid32", "setresgid", "setresgid32",
    "setresuid", "setresuid32", "setreuid", "setreuid32", "setuid", "setuid32",

    /* signals */
    "alarm", "pause", "restart_syscall", "rt_sigaction", "rt_sigpending",
    "rt_sigprocmask", "rt_sigqueueinfo", "rt_sigreturn", "rt_sigsuspend",
    "rt_sigtimedwait", "rt_sigtimedwait_time64", "rt_tgsigqueueinfo",
    "sigaltstack", "sigprocmask", "sigreturn",

    /* time and timers (reading clocks; setting them needs a capability) */
    "adjtimex", "clock_adjtime", "clock_adjtime64", "clock_getres",
    "clock_getres_time64", "clock_gettime", "clock_gettime64",
    "clock_nanosleep", "clock_nanosleep_time64", "getitimer", "gettimeofday",
    "nanosleep", "setitimer", "time", "timer_create", "timer_delete",
    "timer_getoverrun", "timer_gettime", "timer_gettime64", "timer_settime",
    "timer_settime64", "times",

    /* futexes */
    "futex", "futex_time64", "futex_waitv",

    /* sockets (socket itself is conditional, see below) */
    "accept", "accept4", "bind", "connect", "getpeername", "getsockname",
    "getsockopt", "listen", "recv", "recvfrom", "recvmmsg", "recvmmsg_time64",
    "recvmsg", "send", "sendmmsg", "sendmsg", "sendto", "setsockopt",
    "shutdown", "socketcall", "socketpair",

    /* System V and POSIX IPC (the container has a private IPC namespace) */
    "ipc", "mq_getsetattr", "mq_notify", "mq_open", "mq_timedreceive",
    "mq_timedreceive_time64", "mq_timedsend", "mq_timedsend_time64",
    "mq_unlink", "msgctl", "msgget", "msgrcv", "msgsnd", "semctl", "semget",
    "semop", "semtimedop", "semtimedop_time64", "shmat", "shmctl", "shmdt",
    "shmget",

    /* system information */
    "getrandom", "sysinfo", "uname",

    /* architecture specific */
    "arch_prctl", "get_thread_area", "set_thread_area", /* x86 */
    "arm_fadvise64_64", "arm_sync_file_range", "breakpoint", "cacheflush",
    "set_tls", "sync_file_range2", /* arm */
};

/* clone flags that create namespaces: CLONE_NEWNS, NEWCGROUP, NEWUTS,
 * NEWIPC, NEWUSER, NEWPID, NEWNET. */
#define SECCOMP_CLONE_NS_FLAGS 0x7E020000ULL

/* personality() values that change nothing dangerous. */
static const unsigned long long seccomp_personality_ok[] = {
    0x0,        /* PER_LINUX */
    0x0008,     /* UNAME26 */
    0x20000,    /* ADDR_NO_RANDOMIZE */
    0x20008,    /* UNAME26 | ADDR_NO_RANDOMIZE */
    0xffffffff, /* query the current persona */
};

/* Refused with ENOSYS, so callers fall back as on an older kernel. */
static const char *const seccomp_enosys[] = {
    "clone3",
    "io_uring_enter",
    "io_uring_register",
    "io_uring_setup",
};

#define SECCOMP_AF_VSOCK 40

/* Adds {"names":[name...],"action":action} to rules; returns the rule. */
static cJSON *seccomp_rule(cJSON *rules, const char *const *names, size_t n,
                           const char *action)
{
	cJSON *r = cJSON_CreateObject(), *a;

	if (!r || !cJSON_AddItemToArray(rules, r)) {
		cJSON_Delete(r);
		return NULL;
	}
	a = cJSON_CreateStringArray(names, (int)n);
	if (!a || !cJSON_AddItemToObject(r, "names", a)) {
		cJSON_Delete(a);
		return NULL;
	}
	if (!cJSON_AddStringToObject(r, "action", action))
		return NULL;
	return r;
}

/* Adds one argument condition to a rule. */
static bool seccomp_arg(cJSON *rule, unsigned index, unsigned long long value,
                        unsigned long long value_two, const char *op)
{
	cJSON *args = cJSON_GetObjectItemCaseSensitive(rule, "args"), *a;

	if (!args)
		args = cJSON_AddArrayToObject(rule, "args");
	a = cJSON_CreateObject();
	if (!args || !a || !cJSON_AddItemToArray(args, a)) {
		cJSON_Delete(a);
		return false;
	}
	return cJSON_AddNumberToObject(a, "index", index) &&
	       cJSON_AddNumberToObject(a, "value", (double)value) &&
	       cJSON_AddNumberToObject(a, "valueTwo", (double)value_two) &&
	       cJSON_AddStringToObject(a, "op", op);
}

/* Adds {"architecture":arch,"subArchitectures":[sub...]} to map. */
static bool seccomp_arch(cJSON *map, const char *arch, const char *const *sub,
                         size_t n)
{
	cJSON *e = cJSON_CreateObject(), *a;

	if (!e || !cJSON_AddItemToArray(map, e)) {
		cJSON_Delete(e);
		return false;
	}
	if (!cJSON_AddStringToObject(e, "architecture", arch))
		return false;
	a = cJSON_CreateStringArray(sub, (int)n);
	if (!a || !cJSON_AddItemToObject(e, "subArchitectures", a)) {
		cJSON_Delete(a);
		return false;
	}
	return true;
}

static bool seccomp_arches(cJSON *p)
{
	static const char *const x86[] = {"SCMP_ARCH_X86", "SCMP_ARCH_X32"};
	static const char *const arm[] = {"SCMP_ARCH_ARM"};
	cJSON *map = cJSON_AddArrayToObject(p, "archMap");

	return map && seccomp_arch(map, "SCMP_ARCH_X86_64", x86, 2) &&
	       seccomp_arch(map, "SCMP_ARCH_AARCH64", arm, 1);
}

cJSON *seccomp_profile_build(void)
{
	static const char *const clone[] = {"clone"};
	static const char *const personality[] = {"personality"};
	static const char *const sock[] = {"socket"};
	cJSON *p = cJSON_CreateObject(), *rules, *r;

	if (!p ||
	    !cJSON_AddStringToObject(p, "defaultAction", "SCMP_ACT_ERRNO") ||
	    !cJSON_AddNumberToObject(p, "defaultErrnoRet", SECCOMP_EPERM) ||
	    !seccomp_arches(p))
		goto fail;
	rules = cJSON_AddArrayToObject(p, "syscalls");
	if (!rules)
		goto fail;
	if (!seccomp_rule(rules, seccomp_allow,
	                  sizeof(seccomp_allow) / sizeof(*seccomp_allow),
	                  "SCMP_ACT_ALLOW"))
		goto fail;

	/* clone(flags, ...) without any namespace flag. */
	r = seccomp_rule(rules, clone, 1, "SCMP_ACT_ALLOW");
	if (!r ||
	    !seccomp_arg(r, 0, SECCOMP_CLONE_NS_FLAGS, 0, "SCMP_CMP_MASKED_EQ"))
		goto fail;

	/* socket(domain, ...) for any family but vsock (host sockets). */
	r = seccomp_rule(rules, sock, 1, "SCMP_ACT_ALLOW");
	if (!r || !seccomp_arg(r, 0, SECCOMP_AF_VSOCK, 0, "SCMP_CMP_NE"))
		goto fail;

	/* Conditions of one rule are ANDed: one rule per allowed value. */
	for (size_t i = 0; i < sizeof(seccomp_personality_ok) /
	                           sizeof(*seccomp_personality_ok);
	     i++) {
		r = seccomp_rule(rules, personality, 1, "SCMP_ACT_ALLOW");
		if (!r || !seccomp_arg(r, 0, seccomp_personality_ok[i], 0,
		                       "SCMP_CMP_EQ"))
			goto fail;
	}

	r = seccomp_rule(rules, seccomp_enosys,
	                 sizeof(seccomp_enosys) / sizeof(*seccomp_enosys),
	                 "SCMP_ACT_ERRNO");
	if (!r || !cJSON_AddNumberToObject(r, "errnoRet", SECCOMP_ENOSYS))
		goto fail;
	return p;
fail:
	cJSON_Delete(p);
	return NULL;
}

int seccomp_security_opt(char **out)
{
	static const char prefix[] = "seccomp=";
	cJSON *p;
	char *json, *s;
	size_t n;

	*out = NULL;
	p = seccomp_profile_build();
	if (!p)
		return -ENOMEM;
	json = cJSON_PrintUnformatted(p);
	cJSON_Delete(p);
	if (!json)
		return -ENOMEM;
	n = strlen(json);
	s = malloc(sizeof(prefix) + n);
	if (s) {
		memcpy(s, prefix, sizeof(prefix) - 1);
		memcpy(s + sizeof(prefix) - 1, json, n + 1);
	}
	cJSON_free(json);
	if (!s)
		return -ENOMEM;
	*out = s;
	return 0;
}
