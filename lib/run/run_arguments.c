/* SPDX-License-Identifier: MIT */
/*
 * run_arguments: see run_arguments.h. Stateless.
 */
#include "run/run_arguments.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "run/packages.h"
#include "util/errmsg.h"
#include "util/hex.h"

int run_arguments_opt_str(const cJSON *args, const char *name, const char **out,
                          size_t *len)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(args, name);

	*out = NULL;
	if (len)
		*len = 0;
	if (!v || cJSON_IsNull(v))
		return 0;
	if (!cJSON_IsString(v))
		return -EINVAL;
	*out = v->valuestring;
	if (len)
		*len = strlen(v->valuestring);
	return 0;
}

int run_arguments_conversation_id(const cJSON *args,
                                  char minted[RUN_ARGUMENTS_CONV_MINT_LEN + 1],
                                  const char **id, char *err, size_t errlen)
{
	const size_t pre = sizeof(RUN_ARGUMENTS_CONV_PREFIX) - 1;

	minted[0] = '\0';
	*id = NULL;
	if (run_arguments_opt_str(args, "conversationId", id, NULL) < 0)
		return errmsg_fail(-EINVAL, err, errlen,
		                   "conversationId must be a string: the id "
		                   "an earlier call of this chat returned, or "
		                   "leave it out on the chat's first call");
	if (*id)
		return 0;
	memcpy(minted, RUN_ARGUMENTS_CONV_PREFIX, pre);
	if (hex_random(minted + pre, (RUN_ARGUMENTS_CONV_MINT_LEN - pre) / 2) <
	    0) {
		minted[0] = '\0';
		return errmsg_fail(-EIO, err, errlen,
		                   "the server could not make a conversationId "
		                   "just now; retry in a moment");
	}
	*id = minted;
	return 0;
}

void run_arguments_store_finish(struct run_arguments_store *st)
{
	if (!st)
		return;
	run_arguments_env_free(st->env);
	cJSON_free(st->inputs);
	free(st->packages);
	free(st->network);
	st->packages = NULL;
	st->env = NULL;
	st->inputs = NULL;
	st->network = NULL;
}

/*
 * network: ["api.example.com", "*.github.com:8443"] into st->network. The
 * tenant's allow-list is applied by the runner (egress_resolve).
 */
static int run_arguments_network_list(const cJSON *v,
                                      struct run_arguments_store *st, char *err,
                                      size_t errlen)
{
	const cJSON *e;
	char why[384];

	st->network = calloc(1, sizeof(*st->network));
	if (!st->network)
		return errmsg_fail(-ENOMEM, err, errlen, "out of memory");
	if (cJSON_GetArraySize(v) == 0)
		return errmsg_fail(
		    -EINVAL, err, errlen,
		    "network: [] allows nothing; give the names "
		    "the code must reach, e.g. "
		    "[\"api.example.com\"], or leave network out");
	cJSON_ArrayForEach (e, v) {
		struct egress_rule r;
		bool dup = false;

		if (!cJSON_IsString(e))
			return errmsg_fail(
			    -EINVAL, err, errlen,
			    "network must list domain names as "
			    "strings, e.g. [\"api.example.com\"]");
		if (egress_rule_parse(e->valuestring, strlen(e->valuestring),
		                      &r, why, sizeof(why)) < 0)
			return errmsg_fail(-EINVAL, err, errlen, "network: %s",
			                   why);
		for (size_t i = 0; i < st->network->n && !dup; i++) {
			char a[EGRESS_NAME_MAX + 16], b[EGRESS_NAME_MAX + 16];

			egress_rule_format(&st->network->rules[i], a,
			                   sizeof(a));
			egress_rule_format(&r, b, sizeof(b));
			dup = strcmp(a, b) == 0;
		}
		if (dup)
			continue;
		if (st->network->n == EGRESS_RULES_MAX)
			return errmsg_fail(
			    -EINVAL, err, errlen,
			    "network lists more than %d names; use "
			    "wildcards such as *.example.com",
			    EGRESS_RULES_MAX);
		st->network->rules[st->network->n++] = r;
	}
	return 0;
}

/* memory_mb and cpus: optional, within the operator's maxima. */
static int run_arguments_limits(const cJSON *args, const struct config *cfg,
                                struct runner_request *req, char *err,
                                size_t errlen)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(args, "memory_mb");

	req->memory_mb = 0;
	req->cpus = 0;
	if (v && !cJSON_IsNull(v)) {
		if (!cJSON_IsNumber(v) ||
		    v->valuedouble < RUN_ARGUMENTS_MEMORY_MIN_MB ||
		    v->valuedouble > cfg->memory_max_mb ||
		    v->valuedouble != floor(v->valuedouble))
			return errmsg_fail(
			    -EINVAL, err, errlen,
			    "memory_mb must be a whole number from %u to %u "
			    "(the default is %u); for more data, process it "
			    "in chunks",
			    RUN_ARGUMENTS_MEMORY_MIN_MB, cfg->memory_max_mb,
			    cfg->memory_mb);
		req->memory_mb = (unsigned)v->valuedouble;
	}
	v = cJSON_GetObjectItemCaseSensitive(args, "cpus");
	if (v && !cJSON_IsNull(v)) {
		if (!cJSON_IsNumber(v) ||
		    !(v->valuedouble >= RUN_ARGUMENTS_CPUS_MIN) ||
		    v->valuedouble > cfg->cpus_max)
			return errmsg_fail(
			    -EINVAL, err, errlen,
			    "cpus must be a number from %g to %g "
			    "(the default is %g)",
			    RUN_ARGUMENTS_CPUS_MIN, cfg->cpus_max, cfg->cpus);
		req->cpus = v->valuedouble;
	}
	return 0;
}

/* inputs: an optional JSON object, kept as compact JSON. */
static int run_arguments_inputs(const cJSON *args, const struct config *cfg,
                                struct runner_request *req, char **text,
                                char *err, size_t errlen)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(args, "inputs");

	req->inputs_json = NULL;
	req->inputs_len = 0;
	if (!v || cJSON_IsNull(v))
		return 0;
	if (!cJSON_IsObject(v))
		return errmsg_fail(-EINVAL, err, errlen,
		                   "inputs must be a JSON object, e.g. "
		                   "{\"n\": 10, \"names\": [\"a\", \"b\"]}; "
		                   "the program reads it from "
		                   "/sandbox/inputs.json");
	*text = cJSON_PrintUnformatted(v);
	if (!*text)
		return errmsg_fail(-ENOMEM, err, errlen, "out of memory");
	req->inputs_json = *text;
	req->inputs_len = strlen(*text);
	return 0;
}

/* packages: an optional array of distinct non-empty strings. */
static int run_arguments_packages(const cJSON *args, struct runner_request *req,
                                  const char ***list, char *err, size_t errlen)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(args, "packages");
	const cJSON *e;
	int n;

	req->packages = NULL;
	req->n_packages = 0;
	if (!v || cJSON_IsNull(v))
		return 0;
	n = cJSON_GetArraySize(v);
	if (!cJSON_IsArray(v) || n > PACKAGES_MAX)
		return errmsg_fail(-EINVAL, err, errlen,
		                   "packages must be a list of at most %d "
		                   "package names, e.g. [\"pandas\", "
		                   "\"tabulate==0.9.0\"] for Python or "
		                   "[\"zod\"] for TypeScript",
		                   PACKAGES_MAX);
	if (n == 0)
		return 0;
	*list = calloc((size_t)n, sizeof(**list));
	if (!*list)
		return errmsg_fail(-ENOMEM, err, errlen, "out of memory");
	cJSON_ArrayForEach (e, v) {
		const char *s = cJSON_GetStringValue(e);

		if (!s || !s[0])
			return errmsg_fail(
			    -EINVAL, err, errlen,
			    "packages must be non-empty strings, "
			    "e.g. [\"pandas\"]");
		for (size_t i = 0; i < req->n_packages; i++)
			if (strcmp((*list)[i], s) == 0)
				return errmsg_fail(-EINVAL, err, errlen,
				                   "package '%.64s' is listed "
				                   "twice; name each once",
				                   s);
		(*list)[req->n_packages++] = s;
	}
	req->packages = *list;
	return 0;
}

int run_arguments_parse(const cJSON *args, const struct config *cfg,
                        struct runner_request *req,
                        struct run_arguments_store *st, char *err,
                        size_t errlen)
{
	const cJSON *v;
	int rc;

	st->env = NULL;
	st->inputs = NULL;
	st->packages = NULL;
	st->network = NULL;
	if (run_arguments_opt_str(args, "language", &req->language, NULL) < 0 ||
	    !req->language)
		return errmsg_fail(-EINVAL, err, errlen,
		                   "language is required: one of the languages "
		                   "list_runners names, e.g. \"python\"");
	if (run_arguments_opt_str(args, "code", &req->code, &req->code_len) <
	        0 ||
	    !req->code)
		return errmsg_fail(-EINVAL, err, errlen,
		                   "code is required: the program's source as "
		                   "a string");
	if (run_arguments_opt_str(args, "stdin", &req->stdin_data,
	                          &req->stdin_len) < 0)
		return errmsg_fail(-EINVAL, err, errlen,
		                   "stdin must be a string");
	v = cJSON_GetObjectItemCaseSensitive(args, "network");
	if (cJSON_IsArray(v)) {
		rc = run_arguments_network_list(v, st, err, errlen);
		if (rc < 0)
			return rc;
		req->network = true;
		req->network_asked = st->network;
	} else if (v && !cJSON_IsNull(v) && !cJSON_IsBool(v)) {
		return errmsg_fail(-EINVAL, err, errlen,
		                   "network must be true, false or a list of "
		                   "domain names, e.g. [\"api.example.com\", "
		                   "\"*.github.com\"]");
	} else {
		req->network = cJSON_IsTrue(v);
		req->network_asked = NULL;
	}
	v = cJSON_GetObjectItemCaseSensitive(args, "timeout_seconds");
	req->timeout_s = 0;
	if (v && !cJSON_IsNull(v)) {
		if (!cJSON_IsNumber(v) || v->valuedouble < 1 ||
		    v->valuedouble > cfg->max_timeout_s ||
		    v->valuedouble != floor(v->valuedouble))
			return errmsg_fail(
			    -EINVAL, err, errlen,
			    "timeout_seconds must be a whole number "
			    "from 1 to %u",
			    cfg->max_timeout_s);
		req->timeout_s = (unsigned)v->valuedouble;
	}
	v = cJSON_GetObjectItemCaseSensitive(args, "session");
	if (v && !cJSON_IsNull(v)) {
		const char *m = cJSON_GetStringValue(v);

		if (!m || (strcmp(m, "new") != 0 && strcmp(m, "continue") != 0))
			return errmsg_fail(-EINVAL, err, errlen,
			                   "session must be \"continue\" (the "
			                   "default: keep this conversation's "
			                   "state) or \"new\" (start afresh)");
		req->session_new = strcmp(m, "new") == 0;
	}
	v = cJSON_GetObjectItemCaseSensitive(args, "rewind_to");
	req->rewind_to = 0;
	if (v && !cJSON_IsNull(v)) {
		if (!cJSON_IsNumber(v) || v->valuedouble < 1 ||
		    v->valuedouble > 9007199254740991.0 ||
		    v->valuedouble != floor(v->valuedouble))
			return errmsg_fail(
			    -EINVAL, err, errlen,
			    "rewind_to must be the number of an earlier run "
			    "whose state was saved (session.saved_runs of a "
			    "result lists them), e.g. 3");
		if (req->session_new)
			return errmsg_fail(-EINVAL, err, errlen,
			                   "rewind_to and session \"new\" "
			                   "contradict each other: pass one");
		if (!cfg->warm || !cfg->state_save)
			return errmsg_fail(
			    -EINVAL, err, errlen,
			    "rewind_to needs saved session states, which are "
			    "off on this server (SANDBOX_WARM or "
			    "SANDBOX_STATE is false)");
		req->rewind_to = (unsigned long long)v->valuedouble;
	}
	if (run_arguments_opt_str(args, "fork_from", &req->fork_from, NULL) < 0)
		return errmsg_fail(
		    -EINVAL, err, errlen,
		    "fork_from must be the conversationId of "
		    "another conversation of yours, as a string");
	rc = run_arguments_limits(args, cfg, req, err, errlen);
	if (rc < 0)
		return rc;
	rc = run_arguments_env_from_json(
	    cJSON_GetObjectItemCaseSensitive(args, "environment"),
	    cfg->env_max_bytes, &st->env, &req->n_env, err, errlen);
	if (rc < 0)
		return rc;
	req->env = (const char *const *)st->env;
	rc = run_arguments_inputs(args, cfg, req, &st->inputs, err, errlen);
	if (rc < 0)
		return rc;
	rc = run_arguments_packages(args, req, &st->packages, err, errlen);
	if (rc < 0)
		return rc;
	return run_arguments_check(req, cfg, err, errlen);
}

int run_arguments_check_parse(const cJSON *args, const struct config *cfg,
                              struct runner_request *req, char *err,
                              size_t errlen)
{
	const char *conv;

	if (run_arguments_opt_str(args, "language", &req->language, NULL) < 0 ||
	    !req->language)
		return errmsg_fail(-EINVAL, err, errlen,
		                   "language is required: one of the languages "
		                   "list_runners names, e.g. \"python\"");
	if (run_arguments_opt_str(args, "code", &req->code, &req->code_len) <
	        0 ||
	    !req->code)
		return errmsg_fail(-EINVAL, err, errlen,
		                   "code is required: the program's source as "
		                   "a string");
	if (run_arguments_opt_str(args, "conversationId", &conv, NULL) < 0)
		return errmsg_fail(-EINVAL, err, errlen,
		                   "conversationId must be a string");
	req->check = true;
	req->one_off = true;
	req->timeout_s = cfg->max_timeout_s < RUN_ARGUMENTS_CHECK_TIMEOUT_S
	                     ? cfg->max_timeout_s
	                     : RUN_ARGUMENTS_CHECK_TIMEOUT_S;
	return run_arguments_check(req, cfg, err, errlen);
}

int run_arguments_check(const struct runner_request *req,
                        const struct config *cfg, char *err, size_t errlen)
{
	size_t env_total = 0;
	char msg[256];

	/* A check reads the code only: nothing it could act on or leak. */
	if (req->check && (req->network || req->n_env || req->stdin_data ||
	                   req->inputs_json || req->workspace_host_path ||
	                   req->workspace || req->n_packages))
		return errmsg_fail(-EINVAL, err, errlen,
		                   "a syntax check takes only a language and "
		                   "code: no network, environment, stdin, "
		                   "inputs, packages or /data");

	if (req->timeout_s > cfg->max_timeout_s)
		return errmsg_fail(-EINVAL, err, errlen,
		                   "timeout_seconds %u is above the maximum of "
		                   "%u; use at most %u",
		                   req->timeout_s, cfg->max_timeout_s,
		                   cfg->max_timeout_s);
	if (!req->language || !req->language[0])
		return errmsg_fail(-EINVAL, err, errlen,
		                   "language is required");
	if (!req->code || req->code_len > cfg->code_max_bytes)
		return errmsg_fail(-EINVAL, err, errlen,
		                   "code is %zu bytes, more than the %zu "
		                   "allowed; put data in a file under /data "
		                   "and read it from there",
		                   req->code ? req->code_len : 0,
		                   cfg->code_max_bytes);
	if (req->memory_mb && (req->memory_mb < RUN_ARGUMENTS_MEMORY_MIN_MB ||
	                       req->memory_mb > cfg->memory_max_mb))
		return errmsg_fail(-EINVAL, err, errlen,
		                   "memory_mb %u is outside the allowed range "
		                   "%u to %u",
		                   req->memory_mb, RUN_ARGUMENTS_MEMORY_MIN_MB,
		                   cfg->memory_max_mb);
	if (req->cpus != 0 && !(req->cpus >= RUN_ARGUMENTS_CPUS_MIN &&
	                        req->cpus <= cfg->cpus_max))
		return errmsg_fail(-EINVAL, err, errlen,
		                   "cpus %g is outside the allowed range %g to "
		                   "%g",
		                   req->cpus, RUN_ARGUMENTS_CPUS_MIN,
		                   cfg->cpus_max);
	if (req->inputs_json && req->inputs_len > cfg->inputs_max_bytes)
		return errmsg_fail(
		    -EINVAL, err, errlen,
		    "inputs is %zu bytes as JSON, more than the "
		    "%zu allowed; put large data in a file under "
		    "/data and read it from there",
		    req->inputs_len, cfg->inputs_max_bytes);
	if (req->stdin_data && req->stdin_len > cfg->stdin_max_bytes)
		return errmsg_fail(-EINVAL, err, errlen,
		                   "stdin is %zu bytes, more than the %zu "
		                   "allowed; put it in a file under /data "
		                   "instead",
		                   req->stdin_len, cfg->stdin_max_bytes);
	for (size_t i = 0; i < req->n_env; i++) {
		const char *eq = strchr(req->env[i], '=');
		char name[RUN_ARGUMENTS_ENV_NAME_MAX + 2];

		if (!eq ||
		    (size_t)(eq - req->env[i]) > RUN_ARGUMENTS_ENV_NAME_MAX)
			return errmsg_fail(-EINVAL, err, errlen,
			                   "environment entries must be "
			                   "NAME=value");
		snprintf(name, sizeof(name), "%.*s", (int)(eq - req->env[i]),
		         req->env[i]);
		if (run_arguments_env_check(name, eq + 1, msg, sizeof(msg)) < 0)
			return errmsg_fail(-EINVAL, err, errlen, "%s", msg);
		env_total += strlen(req->env[i]) + 1;
	}
	if (env_total > cfg->env_max_bytes)
		return errmsg_fail(
		    -EINVAL, err, errlen,
		    "environment is larger than %zu bytes (names "
		    "and values together); pass large data "
		    "through stdin or a file in /data instead",
		    cfg->env_max_bytes);
	if (req->network && !cfg->allow_network)
		return errmsg_fail(-EPERM, err, errlen,
		                   "network access is disabled by the operator "
		                   "of this server; run the code without "
		                   "\"network\": it has no internet access, so "
		                   "use data from stdin or /data");
	return 0;
}

int run_arguments_env_check(const char *name, const char *value, char *err,
                            size_t errlen)
{
	static const char *const injected[] = {"HOME", "LANG", "FILE_BASE_URL"};
	size_t n;

	if (!name || !name[0]) {
		snprintf(err, errlen,
		         "environment variable names must not "
		         "be empty");
		return -EINVAL;
	}
	n = strlen(name);
	if (n > RUN_ARGUMENTS_ENV_NAME_MAX ||
	    !(isalpha((unsigned char)name[0]) || name[0] == '_') ||
	    strspn(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	                 "0123456789_") != n) {
		snprintf(err, errlen,
		         "environment variable name '%.64s%s' is invalid: use "
		         "letters, digits and '_', not starting with a digit, "
		         "at most %d characters",
		         name, n > 64 ? "..." : "", RUN_ARGUMENTS_ENV_NAME_MAX);
		return -EINVAL;
	}
	for (size_t i = 0; i < sizeof(injected) / sizeof(*injected); i++) {
		if (strcmp(name, injected[i]) == 0) {
			snprintf(err, errlen,
			         "environment variable %s is set by the server "
			         "and cannot be overridden; use another name",
			         name);
			return -EINVAL;
		}
	}
	if (strncmp(name, "LD_", 3) == 0 || strncmp(name, "SANDBOX_", 8) == 0) {
		snprintf(err, errlen,
		         "environment variable %s is not allowed (LD_* and "
		         "SANDBOX_* are reserved); use another name",
		         name);
		return -EINVAL;
	}
	if (!value) {
		snprintf(err, errlen,
		         "environment variable %s must have a string value",
		         name);
		return -EINVAL;
	}
	return 0;
}

void run_arguments_env_free(char **env)
{
	if (!env)
		return;
	for (char **p = env; *p; p++)
		free(*p);
	free(env);
}

int run_arguments_env_from_json(const cJSON *obj, size_t max_bytes, char ***out,
                                size_t *n, char *err, size_t errlen)
{
	const cJSON *it;
	size_t count = 0, total = 0, i = 0;
	char **env = NULL;
	int r;

	*out = NULL;
	*n = 0;
	if (!obj || cJSON_IsNull(obj))
		count = 0;
	else if (!cJSON_IsObject(obj)) {
		snprintf(err, errlen,
		         "environment must be an object mapping names to "
		         "string values, e.g. {\"DEBUG\": \"1\"}");
		return -EINVAL;
	} else
		count = (size_t)cJSON_GetArraySize(obj);
	env = calloc(count + 1, sizeof(*env));
	if (!env) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	if (count == 0)
		goto done;
	cJSON_ArrayForEach (it, obj) {
		const char *v = cJSON_GetStringValue(it);
		size_t len;

		r = run_arguments_env_check(it->string, v, err, errlen);
		if (r < 0)
			goto fail;
		for (size_t j = 0; j < i; j++) {
			size_t nl = strlen(it->string);

			if (strncmp(env[j], it->string, nl) == 0 &&
			    env[j][nl] == '=') {
				snprintf(err, errlen,
				         "environment variable %s is given "
				         "twice",
				         it->string);
				r = -EINVAL;
				goto fail;
			}
		}
		len = strlen(it->string) + 1 + strlen(v) + 1;
		total += len;
		if (total > max_bytes) {
			snprintf(err, errlen,
			         "environment is larger than %zu bytes (names "
			         "and values together); pass large data "
			         "through stdin or a file in /data instead",
			         max_bytes);
			r = -EINVAL;
			goto fail;
		}
		env[i] = malloc(len);
		if (!env[i]) {
			snprintf(err, errlen, "out of memory");
			r = -ENOMEM;
			goto fail;
		}
		snprintf(env[i], len, "%s=%s", it->string, v);
		i++;
	}
done:
	*out = env;
	*n = i;
	return 0;
fail:
	run_arguments_env_free(env);
	return r;
}
