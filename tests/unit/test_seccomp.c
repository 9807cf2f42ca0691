/* SPDX-License-Identifier: MIT */
/*
 * test_seccomp: the sandbox's seccomp profile has the shape Docker
 * expects, denies by default, and never allows the calls that matter.
 * (That it works is shown in a real container by the integration tests.)
 */
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "backend/seccomp.h"
#include "tap.h"

/* The names of every rule with the given action. */
static bool rule_has(const cJSON *rules, const char *action, const char *name,
                     const cJSON **rule_out)
{
	const cJSON *r, *n;

	cJSON_ArrayForEach (r, rules) {
		const char *a = cJSON_GetStringValue(
		    cJSON_GetObjectItemCaseSensitive(r, "action"));

		if (!a || strcmp(a, action) != 0)
			continue;
		cJSON_ArrayForEach (
		    n, cJSON_GetObjectItemCaseSensitive(r, "names")) {
			if (cJSON_IsString(n) &&
			    strcmp(n->valuestring, name) == 0) {
				if (rule_out)
					*rule_out = r;
				return true;
			}
		}
	}
	return false;
}

int main(void)
{
	static const char *const never[] = {
	    "unshare",
	    "setns",
	    "mount",
	    "umount2",
	    "pivot_root",
	    "chroot",
	    "ptrace",
	    "bpf",
	    "perf_event_open",
	    "keyctl",
	    "add_key",
	    "request_key",
	    "userfaultfd",
	    "kexec_load",
	    "kexec_file_load",
	    "init_module",
	    "finit_module",
	    "delete_module",
	    "reboot",
	    "swapon",
	    "swapoff",
	    "acct",
	    "io_uring_setup",
	    "io_uring_enter",
	    "io_uring_register",
	    "open_by_handle_at",
	    "process_vm_writev",
	    "move_mount",
	    "fsopen",
	    "clone3",
	    "personality",
	};
	static const char *const needed[] = {
	    "read",        "write",        "openat",    "execve",
	    "mmap",        "futex",        "wait4",     "pipe2",
	    "epoll_pwait", "rt_sigaction", "getrandom", "statx",
	    "arch_prctl",  "rseq",         "prlimit64", "socketpair",
	};
	cJSON *p = seccomp_profile_build(), *rules;
	const cJSON *r = NULL, *arg;
	char *opt = NULL;

	ok(p != NULL, "profile built");
	is_str(cJSON_GetStringValue(
	           cJSON_GetObjectItemCaseSensitive(p, "defaultAction")),
	       "SCMP_ACT_ERRNO", "deny by default");
	ok(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(p, "archMap")) ==
	       2,
	   "x86_64 and aarch64 arch maps");
	rules = cJSON_GetObjectItemCaseSensitive(p, "syscalls");
	for (size_t i = 0; i < sizeof(never) / sizeof(*never); i++)
		ok(!rule_has(rules, "SCMP_ACT_ALLOW", never[i], NULL) ||
		       strcmp(never[i], "personality") == 0,
		   "%s not allowed unconditionally", never[i]);
	for (size_t i = 0; i < sizeof(needed) / sizeof(*needed); i++)
		ok(rule_has(rules, "SCMP_ACT_ALLOW", needed[i], NULL),
		   "%s allowed", needed[i]);
	ok(rule_has(rules, "SCMP_ACT_ERRNO", "io_uring_setup", &r) &&
	       cJSON_GetObjectItemCaseSensitive(r, "errnoRet")->valuedouble ==
	           38,
	   "io_uring_setup fails with ENOSYS");
	ok(rule_has(rules, "SCMP_ACT_ERRNO", "clone3", &r) &&
	       cJSON_GetObjectItemCaseSensitive(r, "errnoRet")->valuedouble ==
	           38,
	   "clone3 fails with ENOSYS (glibc falls back to clone)");
	ok(rule_has(rules, "SCMP_ACT_ALLOW", "clone", &r), "clone has a rule");
	arg =
	    cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(r, "args"), 0);
	ok(arg &&
	       strcmp(cJSON_GetObjectItemCaseSensitive(arg, "op")->valuestring,
	              "SCMP_CMP_MASKED_EQ") == 0 &&
	       cJSON_GetObjectItemCaseSensitive(arg, "value")->valuedouble ==
	           (double)0x7E020000 &&
	       cJSON_GetObjectItemCaseSensitive(arg, "valueTwo")->valuedouble ==
	           0,
	   "clone only without namespace flags");
	ok(rule_has(rules, "SCMP_ACT_ALLOW", "personality", &r) &&
	       cJSON_GetObjectItemCaseSensitive(r, "args") != NULL,
	   "personality only with conditions");
	ok(!rule_has(rules, "SCMP_ACT_ALLOW", "unshare", NULL) &&
	       !rule_has(rules, "SCMP_ACT_ALLOW", "io_uring_setup", NULL),
	   "unshare and io_uring_setup are never allowed");
	is_int(seccomp_security_opt(&opt), 0, "SecurityOpt entry");
	ok(opt && strncmp(opt, "seccomp={", 9) == 0 && !strchr(opt, '\n'),
	   "\"seccomp=\" followed by compact JSON");
	{
		cJSON *again = opt ? cJSON_Parse(opt + 8) : NULL;

		ok(again != NULL, "the entry's JSON parses");
		cJSON_Delete(again);
	}
	free(opt);
	cJSON_Delete(p);
	return tap_done();
}
