/* SPDX-License-Identifier: MIT */
/*
 * test_runner: the pure parts of the runner: the container create body
 * (checked against docs/security.md, "The sandbox"), environment
 * validation and the reaper's decision. Label parsing and resolution:
 * test_catalog.c.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "backend/docker/backend_docker.h"
#include "config/config.h"
#include "run/oneoff.h"
#include "run/run_arguments.h"
#include "runner.h"
#include "tap.h"
#include "util/buf.h"
#include "util/jsonx.h"
#include "util/log.h"

#define ID(c)                                                                  \
	"sha256:" c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c  \
	    c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c  \
	        c

/*
 * The Docker create body of a one-off run: the run layer's box spec
 * (oneoff_box_spec), as the Docker backend turns it into a container.
 */
static cJSON *oneoff_create_body(const struct config *cfg,
                                 const char *seccomp_opt, const char *owner,
                                 const char *boot,
                                 const struct oneoff_spec *spec)
{
	struct oneoff_spec_store st;
	struct box_spec bs;
	cJSON *b;

	if (oneoff_box_spec(cfg, spec, &bs, &st) < 0)
		return NULL;
	b = backend_docker_create_body(cfg, seccomp_opt, owner, boot, &bs);
	oneoff_spec_store_finish(&st);
	return b;
}

static bool array_has_prefix(const cJSON *a, const char *s)
{
	const cJSON *it;

	cJSON_ArrayForEach (it, a) {
		if (cJSON_IsString(it) &&
		    strncmp(it->valuestring, s, strlen(s)) == 0)
			return true;
	}
	return false;
}

static void test_env(void)
{
	char err[256], **env = NULL;
	size_t n = 0;
	cJSON *o;

	is_int(run_arguments_env_check("MY_VAR1", "x", err, sizeof(err)), 0,
	       "ordinary name");
	is_int(run_arguments_env_check("_x", "", err, sizeof(err)), 0,
	       "underscore start, empty value");
	is_int(run_arguments_env_check("1X", "x", err, sizeof(err)), -EINVAL,
	       "digit start refused");
	is_int(run_arguments_env_check("A-B", "x", err, sizeof(err)), -EINVAL,
	       "dash refused");
	is_int(run_arguments_env_check("A=B", "x", err, sizeof(err)), -EINVAL,
	       "'=' refused");
	is_int(run_arguments_env_check("", "x", err, sizeof(err)), -EINVAL,
	       "empty name refused");
	is_int(run_arguments_env_check("HOME", "/", err, sizeof(err)), -EINVAL,
	       "HOME is injected");
	ok(strstr(err, "set by the server") != NULL, "message says why");
	is_int(run_arguments_env_check("FILE_BASE_URL", "x", err, sizeof(err)),
	       -EINVAL, "FILE_BASE_URL is injected");
	is_int(run_arguments_env_check("LANG", "x", err, sizeof(err)), -EINVAL,
	       "LANG is injected");
	is_int(run_arguments_env_check("LD_PRELOAD", "/data/x.so", err,
	                               sizeof(err)),
	       -EINVAL, "LD_PRELOAD refused");
	is_int(
	    run_arguments_env_check("LD_LIBRARY_PATH", "x", err, sizeof(err)),
	    -EINVAL, "LD_* refused");
	{
		char longname[200];

		memset(longname, 'A', 129);
		longname[129] = '\0';
		is_int(run_arguments_env_check(longname, "x", err, sizeof(err)),
		       -EINVAL, "129-character name refused");
		longname[128] = '\0';
		is_int(run_arguments_env_check(longname, "x", err, sizeof(err)),
		       0, "128-character name accepted");
	}

	o = cJSON_Parse("{\"A\":\"1\",\"B_2\":\"two words\"}");
	is_int(run_arguments_env_from_json(o, 1024, &env, &n, err, sizeof(err)),
	       0, "object accepted");
	is_int(n, 2, "two variables");
	is_str(env && n == 2 ? env[1] : NULL, "B_2=two words", "NAME=value");
	ok(env && env[n] == NULL, "NULL-terminated");
	run_arguments_env_free(env);
	is_int(run_arguments_env_from_json(o, 11, &env, &n, err, sizeof(err)),
	       -EINVAL, "size cap enforced");
	ok(strstr(err, "larger than 11 bytes") != NULL, "size message");
	is_int(
	    run_arguments_env_from_json(o, 4 + 16, &env, &n, err, sizeof(err)),
	    0, "exactly at the cap accepted");
	run_arguments_env_free(env);
	cJSON_Delete(o);
	o = cJSON_Parse("{\"A\":1}");
	is_int(run_arguments_env_from_json(o, 1024, &env, &n, err, sizeof(err)),
	       -EINVAL, "non-string value refused");
	cJSON_Delete(o);
	o = cJSON_Parse("[\"A=1\"]");
	is_int(run_arguments_env_from_json(o, 1024, &env, &n, err, sizeof(err)),
	       -EINVAL, "array refused");
	cJSON_Delete(o);
	is_int(
	    run_arguments_env_from_json(NULL, 1024, &env, &n, err, sizeof(err)),
	    0, "absent environment");
	ok(n == 0 && env && env[0] == NULL, "absent: empty list");
	run_arguments_env_free(env);
}

static char no_runtime[] = "";
static char runsc[] = "runsc";

static void fill_config(struct config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->memory_mb = 256;
	cfg->cpus = 0.5;
	cfg->timeout_s = 30;
	cfg->max_timeout_s = 300;
	cfg->pids_limit = 128;
	cfg->tmp_mb = 64;
	cfg->nofile = 1024;
	cfg->fsize_mb = 128;
	cfg->sandbox_uid = 64321;
	cfg->sandbox_gid = 64322;
	cfg->runtime = no_runtime;
	cfg->allow_network = false;
}

static void test_body(void)
{
	static char lang[] = "python", file[] = "main.py",
	            wd[] = "/usr/bin/timeout", id[] = ID("a"), a0[] = "python3",
	            a1[] = "-u", a2[] = "/sandbox/main.py";
	char *cmd[] = {a0, a1, a2};
	struct catalog_image img = {.language = lang,
	                            .image_id = id,
	                            .filename = file,
	                            .command = cmd,
	                            .n_command = 3,
	                            .watchdog = wd};
	struct config cfg;
	struct oneoff_spec sp;
	const char *env[] = {"FOO=bar"};
	cJSON *b;
	const cJSON *hc, *x, *m;

	fill_config(&cfg);
	memset(&sp, 0, sizeof(sp));
	sp.image = &img;
	sp.run_id = "0123456789abcdef";
	sp.code_host_dir = "/srv/root/runs/0123456789abcdef";
	sp.workspace_host_path = "/srv/root/ws/abc";
	sp.file_base_url = "https://files.example/files/abc/";
	sp.tenant_fp = "123456789abc";
	sp.env = env;
	sp.n_env = 1;
	sp.network = true; /* asked for, but the operator does not allow it */
	sp.timeout_s = 30;
	sp.deadline = 1700000000;
	b = oneoff_create_body(&cfg, "seccomp={}", "inst-1", "feedface00000000",
	                       &sp);
	ok(b != NULL, "create body built");
	hc = jsonx_at(b, "HostConfig");
	is_str(cJSON_GetStringValue(jsonx_at(b, "Image")), ID("a"),
	       "image pinned by id");
	is_str(cJSON_GetStringValue(jsonx_at(hc, "NetworkMode")), "none",
	       "network none unless the operator allows it");
	is_int(jsonx_at(hc, "Memory")->valuedouble, 256.0 * 1024 * 1024,
	       "Memory from SANDBOX_MEMORY_MB");
	is_int(jsonx_at(hc, "MemorySwap")->valuedouble, 256.0 * 1024 * 1024,
	       "MemorySwap equals Memory");
	is_int(jsonx_at(hc, "NanoCpus")->valuedouble, 500000000, "NanoCpus");
	is_int(jsonx_at(hc, "PidsLimit")->valuedouble, 128, "PidsLimit");
	ok(tap_json_has(jsonx_at(hc, "CapDrop"), "ALL"), "CapDrop ALL");
	ok(jsonx_at(hc, "CapAdd") == NULL, "no CapAdd");
	ok(tap_json_has(jsonx_at(hc, "SecurityOpt"), "no-new-privileges:true"),
	   "no-new-privileges");
	ok(tap_json_has(jsonx_at(hc, "SecurityOpt"), "seccomp={}"),
	   "seccomp profile content");
	ok(!array_has_prefix(jsonx_at(hc, "SecurityOpt"),
	                     "seccomp=unconfined") &&
	       !array_has_prefix(jsonx_at(hc, "SecurityOpt"),
	                         "apparmor=unconfined"),
	   "nothing unconfined");
	ok(cJSON_IsTrue(jsonx_at(hc, "ReadonlyRootfs")), "read-only root");
	x = jsonx_at(hc, "Tmpfs./tmp");
	ok(x && strstr(x->valuestring, "size=64m") &&
	       strstr(x->valuestring, "exec") &&
	       strstr(x->valuestring, "nosuid"),
	   "/tmp tmpfs capped, exec, nosuid (%s)", x ? x->valuestring : "");
	ok(cJSON_IsTrue(jsonx_at(hc, "Init")), "Init");
	is_str(cJSON_GetStringValue(jsonx_at(hc, "IpcMode")), "private",
	       "IpcMode private");
	ok(cJSON_IsFalse(jsonx_at(hc, "OomKillDisable")), "OOM killer on");
	ok(cJSON_IsFalse(jsonx_at(hc, "Privileged")), "not privileged");
	is_str(cJSON_GetStringValue(jsonx_at(hc, "RestartPolicy.Name")), "no",
	       "no restarts");
	is_str(cJSON_GetStringValue(jsonx_at(hc, "LogConfig.Type")), "none",
	       "no logging");
	ok(jsonx_at(hc, "Binds") == NULL, "no Binds");
	ok(jsonx_at(hc, "Runtime") == NULL, "engine's runtime when unset");
	x = jsonx_at(hc, "Ulimits");
	is_int(cJSON_GetArraySize(x), 3, "three ulimits");
	is_str(cJSON_GetStringValue(jsonx_at(cJSON_GetArrayItem(x, 0), "Name")),
	       "nofile", "nofile");
	is_int(jsonx_at(cJSON_GetArrayItem(x, 1), "Soft")->valuedouble,
	       128.0 * 1024 * 1024, "fsize in bytes");
	is_int(jsonx_at(cJSON_GetArrayItem(x, 2), "Hard")->valuedouble, 0,
	       "core 0");
	x = jsonx_at(hc, "Mounts");
	is_int(cJSON_GetArraySize(x), 2, "two mounts");
	m = cJSON_GetArrayItem(x, 0);
	ok(strcmp(jsonx_at(m, "Type")->valuestring, "bind") == 0 &&
	       strcmp(jsonx_at(m, "Target")->valuestring, "/data") == 0 &&
	       strcmp(jsonx_at(m, "Source")->valuestring, "/srv/root/ws/abc") ==
	           0 &&
	       cJSON_IsFalse(jsonx_at(m, "ReadOnly")),
	   "/data: the workspace, read-write bind");
	m = cJSON_GetArrayItem(x, 1);
	ok(strcmp(jsonx_at(m, "Type")->valuestring, "bind") == 0 &&
	       strcmp(jsonx_at(m, "Target")->valuestring, "/sandbox") == 0 &&
	       cJSON_IsTrue(jsonx_at(m, "ReadOnly")),
	   "/sandbox: the code, read-only bind");
	is_str(cJSON_GetStringValue(jsonx_at(b, "User")), "64321:64322",
	       "uid:gid from the config");
	is_str(cJSON_GetStringValue(jsonx_at(b, "WorkingDir")), "/data",
	       "working directory /data");
	x = jsonx_at(b, "Env");
	is_int(cJSON_GetArraySize(x), 4, "only the injected and caller's env");
	ok(tap_json_has(x, "HOME=/tmp") && tap_json_has(x, "LANG=C.UTF-8") &&
	       tap_json_has(x,
	                    "FILE_BASE_URL=https://files.example/files/abc/") &&
	       tap_json_has(x, "FOO=bar"),
	   "environment content");
	x = jsonx_at(b, "Labels");
	ok(strcmp(cJSON_GetObjectItemCaseSensitive(x, "sandbox.managed")
	              ->valuestring,
	          "true") == 0 &&
	       strcmp(cJSON_GetObjectItemCaseSensitive(x, "sandbox.owner")
	                  ->valuestring,
	              "inst-1") == 0 &&
	       strcmp(cJSON_GetObjectItemCaseSensitive(x, "sandbox.boot")
	                  ->valuestring,
	              "feedface00000000") == 0 &&
	       strcmp(cJSON_GetObjectItemCaseSensitive(x, "sandbox.deadline")
	                  ->valuestring,
	              "1700000000") == 0 &&
	       strcmp(cJSON_GetObjectItemCaseSensitive(x, "sandbox.tenant")
	                  ->valuestring,
	              "123456789abc") == 0,
	   "labels: managed, owner, boot, deadline, tenant");
	x = jsonx_at(b, "Cmd");
	ok(cJSON_GetArraySize(x) == 7 &&
	       strcmp(cJSON_GetArrayItem(x, 0)->valuestring,
	              "/usr/bin/timeout") == 0 &&
	       strcmp(cJSON_GetArrayItem(x, 1)->valuestring, "-s") == 0 &&
	       strcmp(cJSON_GetArrayItem(x, 2)->valuestring, "KILL") == 0 &&
	       strcmp(cJSON_GetArrayItem(x, 3)->valuestring, "35s") == 0 &&
	       strcmp(cJSON_GetArrayItem(x, 4)->valuestring, "python3") == 0,
	   "command wrapped in the image's watchdog (limit + grace)");
	ok(cJSON_IsTrue(jsonx_at(b, "OpenStdin")) &&
	       cJSON_IsTrue(jsonx_at(b, "StdinOnce")),
	   "stdin open once");
	cJSON_Delete(b);

	/* Network when both asked for and allowed; a runtime; no workspace. */
	cfg.allow_network = true;
	cfg.runtime = runsc;
	sp.workspace_host_path = NULL;
	sp.file_base_url = NULL;
	sp.tenant_fp = NULL;
	img.watchdog = NULL;
	b = oneoff_create_body(&cfg, "seccomp={}", "inst-1", "feedface00000000",
	                       &sp);
	hc = jsonx_at(b, "HostConfig");
	is_str(cJSON_GetStringValue(jsonx_at(hc, "NetworkMode")), "bridge",
	       "network when asked for and allowed");
	is_str(cJSON_GetStringValue(jsonx_at(hc, "Runtime")), "runsc",
	       "SANDBOX_RUNTIME used");
	is_int(cJSON_GetArraySize(jsonx_at(hc, "Mounts")), 1,
	       "no /data without a workspace");
	is_int(cJSON_GetArraySize(jsonx_at(b, "Env")), 3,
	       "no FILE_BASE_URL when none given");
	is_int(cJSON_GetArraySize(jsonx_at(b, "Cmd")), 3,
	       "no watchdog, bare command");
	sp.network = false;
	cJSON_Delete(b);
	b = oneoff_create_body(&cfg, "seccomp={}", "inst-1", "feedface00000000",
	                       &sp);
	is_str(cJSON_GetStringValue(jsonx_at(b, "HostConfig.NetworkMode")),
	       "none", "allowed but not asked for: none");
	cJSON_Delete(b);

	/* A syntax check: the check command, never /data, same hardening. */
	{
		char c0[] = "bash", c1[] = "-n", c2[] = "/sandbox/main.sh";
		char *chk[] = {c0, c1, c2};

		img.check = chk;
		img.n_check = 3;
		img.watchdog = wd;
		sp.check = true;
		sp.workspace_host_path = "/srv/root/ws/abc";
		b = oneoff_create_body(&cfg, "seccomp={}", "inst-1",
		                       "feedface00000000", &sp);
		hc = jsonx_at(b, "HostConfig");
		x = jsonx_at(b, "Cmd");
		ok(cJSON_GetArraySize(x) == 7 &&
		       strcmp(cJSON_GetArrayItem(x, 4)->valuestring, "bash") ==
		           0 &&
		       strcmp(cJSON_GetArrayItem(x, 5)->valuestring, "-n") == 0,
		   "check: the sandbox.check command behind the watchdog");
		is_int(cJSON_GetArraySize(jsonx_at(hc, "Mounts")), 1,
		       "check: no /data even with a workspace path");
		is_str(cJSON_GetStringValue(jsonx_at(b, "WorkingDir")), "/tmp",
		       "check: works in /tmp");
		ok(cJSON_IsTrue(jsonx_at(hc, "ReadonlyRootfs")) &&
		       tap_json_has(jsonx_at(hc, "CapDrop"), "ALL") &&
		       tap_json_has(jsonx_at(hc, "SecurityOpt"),
		                    "no-new-privileges:true") &&
		       strcmp(cJSON_GetStringValue(jsonx_at(hc, "NetworkMode")),
		              "none") == 0,
		   "check: same hardening, no network");
		cJSON_Delete(b);
		img.n_check = 0;
		img.check = NULL;
		b = oneoff_create_body(&cfg, "seccomp={}", "inst-1",
		                       "feedface00000000", &sp);
		ok(b == NULL, "check: refused for an image without one");
		cJSON_Delete(b);
	}
}

static cJSON *container(const char *managed, const char *owner,
                        const char *boot, const char *deadline)
{
	cJSON *c = cJSON_CreateObject(), *l;

	cJSON_AddStringToObject(c, "Id", "x");
	l = cJSON_AddObjectToObject(c, "Labels");
	if (managed)
		cJSON_AddStringToObject(l, "sandbox.managed", managed);
	if (owner)
		cJSON_AddStringToObject(l, "sandbox.owner", owner);
	if (boot)
		cJSON_AddStringToObject(l, "sandbox.boot", boot);
	if (deadline)
		cJSON_AddStringToObject(l, "sandbox.deadline", deadline);
	return c;
}

static void test_reap(void)
{
	struct {
		const char *managed, *owner, *boot, *deadline;
		bool want;
		const char *name;
	} cases[] = {
	    {"true", "me", "b2", "2000", false, "ours, this boot, in time"},
	    {"true", "me", "b1", "2000", true, "ours, earlier boot"},
	    {"true", "me", NULL, "2000", true, "ours, no boot label"},
	    {"true", "other", "b1", "2000", false, "another owner, in time"},
	    {"true", "other", "b1", "900", true,
	     "another owner, past deadline"},
	    {"true", "me", "b2", "900", true, "ours, past deadline"},
	    {"true", "other", "b1", "970", false, "within the grace period"},
	    {"true", "other", "b1", "soon", false, "bad deadline: kept"},
	    {NULL, "me", "b1", "900", false, "not managed: never"},
	    {"false", "me", "b1", "900", false, "managed=false: never"},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
		cJSON *c = container(cases[i].managed, cases[i].owner,
		                     cases[i].boot, cases[i].deadline);

		ok(backend_docker_reap_wanted(c, "me", "b2", 1000 + 60 - 40,
		                              60) == cases[i].want,
		   "reaper: %s", cases[i].name);
		cJSON_Delete(c);
	}
	/* SANDBOX_REAP_GRACE_SECONDS: a shorter grace reaps sooner. */
	cJSON *c = container("true", "other", "b1", "970");
	ok(backend_docker_reap_wanted(c, "me", "b2", 1020, 5),
	   "reaper: past deadline and a 5 s grace");
	ok(!backend_docker_reap_wanted(c, "me", "b2", 1020, 50),
	   "reaper: within a 50 s grace");
	ok(!backend_docker_reap_wanted(c, "me", "b2", 1020, 86400),
	   "reaper: within a day's grace");
	cJSON_Delete(c);
}

int main(void)
{
	test_env();
	test_body();
	test_reap();
	is_str(runner_status_name(RUNNER_OOM_KILLED), "oom_killed",
	       "status names");
	is_str(runner_status_name(RUNNER_OUTPUT_LIMIT), "output_limit",
	       "status names");
	return tap_done();
}
