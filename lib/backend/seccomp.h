/* SPDX-License-Identifier: MIT */
/*
 * seccomp: the system-call filter every sandbox runs under. The Docker API
 * takes a profile as JSON content in HostConfig.SecurityOpt
 * ("seccomp=<json>") and a custom profile replaces the engine's default, so
 * this module writes a complete allow-list profile in the spirit of
 * Docker's: anything not listed fails with EPERM; clone() may not create
 * namespaces; clone3() and io_uring fail with ENOSYS so libraries fall
 * back to the older calls; personality() takes only the harmless values;
 * no mount, namespace, ptrace, BPF, perf, keyring, userfaultfd, module,
 * kexec, reboot, swap or accounting calls. Architectures: x86_64 (with x86
 * and x32) and aarch64 (with arm).
 *
 * Threads: the functions are pure and thread-safe.
 */
#ifndef MCPSD_SECCOMP_H
#define MCPSD_SECCOMP_H

#include <stdbool.h>

#include <cjson/cJSON.h>

/* The profile as a JSON tree (caller owns, cJSON_Delete). NULL on OOM. */
cJSON *seccomp_profile_build(void);

/*
 * The HostConfig.SecurityOpt entry "seccomp=<compact profile JSON>".
 * Returns 0 and *out (caller frees with free()), or -ENOMEM.
 */
__attribute__((warn_unused_result)) int seccomp_security_opt(char **out);

#endif
