/* SPDX-License-Identifier: MIT */
/*
 * run_arguments: what a caller may ask of a run, checked in one place.
 * run_code's JSON arguments are parsed here into a struct runner_request, and
 * every value is checked against the operator's limits (time, memory and CPUs,
 * code, stdin and inputs sizes, environment names and size, network) with
 * a message that tells a model what to do instead. The runner checks a request
 * again with run_arguments_check before it starts anything, so no caller can
 * bypass a limit.
 *
 * Stateless and thread-safe.
 */
#ifndef MCPSD_RUNARGS_H
#define MCPSD_RUNARGS_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "config/config.h"
#include "config/egress_policy.h"
#include "run/request.h"

#define RUN_ARGUMENTS_ENV_NAME_MAX 128
#define RUN_ARGUMENTS_MEMORY_MIN_MB                                            \
	16                          /* as SANDBOX_MEMORY_MB's own minimum      \
	                             */
#define RUN_ARGUMENTS_CPUS_MIN 0.01 /* the engine's smallest CPU quota */

/* What run_arguments_parse allocates for a request. */
struct run_arguments_store {
	char **env;            /* NULL-terminated "NAME=value" */
	char *inputs;          /* the inputs object as compact JSON, or NULL */
	const char **packages; /* borrowed strings of args */
	/* network: [...] as an allow-list, or NULL (true, false, absent) */
	struct egress_list *network;
};

/*
 * Fills the caller-facing fields of req (language, code, stdin, env,
 * network, timeout_s, memory_mb, cpus, inputs, packages) from run_code's
 * arguments (packages are checked against their manager by the runner),
 * then run_arguments_check. Strings are borrowed from args; the environment and
 * the inputs' JSON are allocated into st (free with run_arguments_store_finish
 * whatever the result). Other fields of req are left as they are. Returns
 * 0, -EINVAL with a message for the model in err, or -ENOMEM.
 */
__attribute__((warn_unused_result)) int
run_arguments_parse(const cJSON *args, const struct config *cfg,
                    struct runner_request *req, struct run_arguments_store *st,
                    char *err, size_t errlen);
void run_arguments_store_finish(struct run_arguments_store *st);

/*
 * An optional string argument of a tool: *out is NULL (and *len 0, when len
 * is given) when it is absent or null, else borrowed from args. -EINVAL
 * when it is anything but a string.
 */
__attribute__((warn_unused_result)) int run_arguments_opt_str(const cJSON *args,
                                                              const char *name,
                                                              const char **out,
                                                              size_t *len);

/* A minted conversationId: "c-" and 32 hex digits (128 random bits). */
#define RUN_ARGUMENTS_CONV_PREFIX "c-"
#define RUN_ARGUMENTS_CONV_MINT_LEN (sizeof(RUN_ARGUMENTS_CONV_PREFIX) - 1 + 32)

/*
 * The conversationId of a tool call that may open a conversation (run_code,
 * upload_file). Given as a string: *id is borrowed from args (its text is
 * checked where the workspace is opened) and minted is "". Absent or null:
 * a fresh, unguessable id is written to minted and *id points to it: a
 * model's own ids collide across the chats of one tenant ("demo" in two
 * chats shares files and state), the minted one names one chat only.
 * Returns 0, or -EINVAL (not a string) or -EIO (no random bytes) with a
 * message for the model in err.
 */
__attribute__((warn_unused_result)) int
run_arguments_conversation_id(const cJSON *args,
                              char minted[RUN_ARGUMENTS_CONV_MINT_LEN + 1],
                              const char **id, char *err, size_t errlen);

#define RUN_ARGUMENTS_CHECK_TIMEOUT_S                                          \
	30 /* a check's time limit (or the max)                                \
	    */

/*
 * Fills req from check_code's arguments (language, code; conversationId
 * is accepted and unused): a check, one-off, RUN_ARGUMENTS_CHECK_TIMEOUT_S,
 * then run_arguments_check. Strings are borrowed from args. 0 or -EINVAL with a
 * message for the model in err.
 */
__attribute__((warn_unused_result)) int
run_arguments_check_parse(const cJSON *args, const struct config *cfg,
                          struct runner_request *req, char *err, size_t errlen);

/*
 * Checks the caller-facing fields of req against cfg. A check
 * (req->check) may carry nothing but its language and code. 0, -EINVAL (bad
 * value), or -EPERM (network asked for but not allowed by the operator),
 * with a message for the model in err.
 */
__attribute__((warn_unused_result)) int
run_arguments_check(const struct runner_request *req, const struct config *cfg,
                    char *err, size_t errlen);

/*
 * Checks one caller variable: the name matches [A-Za-z_][A-Za-z0-9_]{0,127}
 * and is not injected by the server (HOME, LANG, FILE_BASE_URL) nor one
 * that would subvert the container's own programs (LD_*, any name starting
 * with SANDBOX_). -EINVAL with the rule in err.
 */
__attribute__((warn_unused_result)) int
run_arguments_env_check(const char *name, const char *value, char *err,
                        size_t errlen);

/*
 * Turns a JSON object of string -> string into "NAME=value" strings after
 * run_arguments_env_check on each, with the total of name, '=', value and a NUL
 * over all variables at most max_bytes. NULL or JSON null gives none.
 * *out is a NULL-terminated array (caller frees with run_arguments_env_free).
 */
__attribute__((warn_unused_result)) int
run_arguments_env_from_json(const cJSON *obj, size_t max_bytes, char ***out,
                            size_t *n, char *err, size_t errlen);
void run_arguments_env_free(char **env);

#endif
