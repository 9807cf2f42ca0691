/* SPDX-License-Identifier: MIT */
/*
 * test_swarm_spec: the pure parts of the Swarm backend: the service name
 * that locks a conversation (a hash of the exclusive key, else the run id
 * of the box's name), the ServiceSpec of a run under the daemon's default
 * settings (one replica or a global node check, restart none, non-root,
 * read-only, no capabilities, the limits, reservations equal to them,
 * placement, no network, the labels, the preamble first), the check of a
 * spec read back from the engine (each security field dropped or changed
 * is refused and named; an added network is refused) and the preamble's
 * checks.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "backend/backend.h"
#include "backend/swarm/swarm_spec.h"
#include "config/config.h"
#include "tap.h"
#include "util/jsonx.h"

/* What swarm_spec_verify must find unchanged (its fields[] list). */
static const char *const fields[] = {
    "TaskTemplate.ContainerSpec.Image",
    "TaskTemplate.ContainerSpec.Command",
    "TaskTemplate.ContainerSpec.User",
    "TaskTemplate.ContainerSpec.ReadOnly",
    "TaskTemplate.ContainerSpec.Init",
    "TaskTemplate.ContainerSpec.CapabilityDrop",
    "TaskTemplate.ContainerSpec.Ulimits",
    "TaskTemplate.ContainerSpec.Mounts",
    "TaskTemplate.ContainerSpec.StopSignal",
    "TaskTemplate.Resources.Limits.NanoCPUs",
    "TaskTemplate.Resources.Limits.MemoryBytes",
    "TaskTemplate.Resources.Limits.Pids",
    "TaskTemplate.RestartPolicy.Condition",
    "TaskTemplate.Placement.Constraints",
    "TaskTemplate.LogDriver.Name",
};
#define N_FIELDS (sizeof(fields) / sizeof(fields[0]))

#define IMAGE                                                                  \
	"sha256:"                                                              \
	"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#define RUN_ID "0123456789abcdef"

static const char *const cmd[] = {"python3", "-u", "/sandbox/main.py"};
static const char *const env[] = {"FOO=bar", "LANG=C.UTF-8"};

/* The object holding the last key of path, and that key. */
static cJSON *parent_of(cJSON *root, const char *path, const char **last)
{
	const char *dot = strrchr(path, '.');
	char head[128];

	*last = dot ? dot + 1 : path;
	if (!dot)
		return root;
	snprintf(head, sizeof(head), "%.*s", (int)(dot - path), path);
	return jsonx_at(root, head);
}

static bool is_num(const cJSON *o, double want)
{
	return cJSON_IsNumber(o) && fabs(o->valuedouble - want) < 0.5;
}

static bool is_strv(const cJSON *o, const char *want)
{
	return cJSON_IsString(o) && strcmp(o->valuestring, want) == 0;
}

static const char *str_of(const cJSON *o)
{
	return cJSON_IsString(o) ? o->valuestring : NULL;
}

/* A run as oneoff.c describes one: a name with a run id, no key. */
static void fill_spec(struct box_spec *sp)
{
	memset(sp, 0, sizeof(*sp));
	sp->image = IMAGE;
	sp->name = "mcpsd-" RUN_ID;
	sp->cmd = cmd;
	sp->n_cmd = sizeof(cmd) / sizeof(cmd[0]);
	sp->env = env;
	sp->n_env = sizeof(env) / sizeof(env[0]);
	sp->workdir = "/sandbox";
	sp->labels[sp->n_labels++] = (struct box_label){"sandbox.kind", "run"};
	sp->labels[sp->n_labels++] = (struct box_label){"sandbox.run", RUN_ID};
	sp->mounts[sp->n_mounts++] = (struct box_mount){
	    "/srv/mcpsd/runs/" RUN_ID, "/sandbox", true, false};
	sp->stdin_path = "/sandbox/.stdin";
	sp->deadline = 1700000000;
}

/* The daemon's defaults, from the table in config.c. */
static int load_config(struct config *cfg)
{
	static const char *const unset[] = {"SANDBOX_MEMORY_MB",
	                                    "SANDBOX_CPUS",
	                                    "SANDBOX_PIDS_LIMIT",
	                                    "SANDBOX_TMP_MB",
	                                    "SANDBOX_NOFILE",
	                                    "SANDBOX_FSIZE_MB",
	                                    "SANDBOX_UID",
	                                    "SANDBOX_GID",
	                                    "SANDBOX_BACKEND",
	                                    "SWARM_CONSTRAINTS",
	                                    "MCP_API_TOKEN",
	                                    "MCP_API_TOKENS",
	                                    "FILE_SECRET",
	                                    "STORE_URL",
	                                    "MCP_REPLICA_NAME",
	                                    "SANDBOX_ALLOW_NETWORK",
	                                    NULL};
	char err[1024] = "";
	int rc;

	for (size_t i = 0; unset[i]; i++)
		unsetenv(unset[i]);
	setenv("MCP_AUTH", "none", 1);
	setenv("MCP_HTTP_ADDR", "127.0.0.1:8080", 1);
	setenv("SANDBOX_ROOT", "/nonexistent/mcpsd-test-swarm-spec", 1);
	setenv("MCP_LOG_LEVEL", "warn", 1);
	rc = config_load(cfg, NULL, err, sizeof(err));
	if (rc < 0)
		printf("# config: %s\n", err);
	return rc;
}

static void test_name(void)
{
	struct box_spec sp;
	char a[SWARM_NAME_MAX], b[SWARM_NAME_MAX], c[SWARM_NAME_MAX];
	int ra, rb, rc;

	fill_spec(&sp);
	sp.exclusive = "ws-Secret0123456789";
	ra = swarm_spec_name(&sp, a);
	rb = swarm_spec_name(&sp, b);
	is_int(ra, 0, "name: with a key");
	is_int(rb, 0, "name: with the key again");
	is_int(strlen(a), 8 + 40, "name: mcpsd-c- and 40 characters");
	ok(strncmp(a, "mcpsd-c-", 8) == 0, "name: mcpsd-c- prefix (%s)", a);
	is_int(strspn(a + 8, "0123456789abcdef"), 40, "name: 40 lowercase hex");
	is_str(a, b, "name: the same key, the same name");
	ok(strstr(a, "Secret") == NULL, "name: the key does not show");

	/* The run id of the name does not matter when there is a key. */
	sp.name = "mcpsd-fedcba9876543210";
	rb = swarm_spec_name(&sp, b);
	ok(rb == 0 && strcmp(a, b) == 0, "name: the key wins over the name");
	sp.name = NULL;
	rb = swarm_spec_name(&sp, b);
	ok(rb == 0 && strcmp(a, b) == 0, "name: a key without a name");

	sp.exclusive = "ws-Secret0123456788";
	rc = swarm_spec_name(&sp, c);
	ok(rc == 0 && strncmp(c, "mcpsd-c-", 8) == 0 && strlen(c) == 48,
	   "name: another key, same form (%s)", c);
	ok(strcmp(a, c) != 0, "name: another key, another name");

	/* Without a key: the run id of the box's name. */
	fill_spec(&sp);
	rc = swarm_spec_name(&sp, c);
	is_int(rc, 0, "name: without a key");
	is_str(c, "mcpsd-r-" RUN_ID, "name: mcpsd-r- and the run id");
	sp.exclusive = "";
	rc = swarm_spec_name(&sp, c);
	ok(rc == 0 && strcmp(c, "mcpsd-r-" RUN_ID) == 0,
	   "name: an empty key counts as none");
	sp.exclusive = NULL;
	sp.name = "some-prefix-with-dashes-fedcba9876543210";
	rc = swarm_spec_name(&sp, c);
	ok(rc == 0 && strcmp(c, "mcpsd-r-fedcba9876543210") == 0,
	   "name: the run id after the last dash");

	/* Neither usable. */
	{
		static const char *const bad[] = {
		    "mcpsd-0123456789abcde",   /* 15 hex */
		    "mcpsd-0123456789abcdef0", /* 17 hex */
		    "mcpsd-0123456789ABCDEF",  /* upper case */
		    "mcpsd-0123456789abcdeg",  /* not hex */
		    "0123456789abcdef",        /* no dash */
		    "mcpsd-",                  /* nothing after it */
		    "",
		};

		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			sp.name = bad[i];
			c[0] = 'x';
			rc = swarm_spec_name(&sp, c);
			ok(rc == -EINVAL && c[0] == '\0',
			   "name: '%s' without a key is -EINVAL, out cleared",
			   bad[i]);
		}
	}
	sp.name = NULL;
	rc = swarm_spec_name(&sp, c);
	is_int(rc, -EINVAL, "name: no name and no key is -EINVAL");
	sp.exclusive = "";
	rc = swarm_spec_name(&sp, c);
	is_int(rc, -EINVAL, "name: no name and an empty key is -EINVAL");
}

/* What every body, replicated or global, must carry. */
static void check_common(const cJSON *b, const struct config *cfg,
                         const struct box_spec *sp, const char *what)
{
	const cJSON *cs = jsonx_at(b, "TaskTemplate.ContainerSpec"), *x, *it;
	char user[32], want[32];
	double mem = (double)cfg->memory_mb * 1024 * 1024;
	double cpu = llround(cfg->cpus * 1e9);
	size_t i;
	bool ok_ = true;

	is_str(str_of(jsonx_at(b, "Name")), "mcpsd-r-" RUN_ID, what);
	is_str(str_of(jsonx_at(cs, "Image")), IMAGE, "body: image");

	/* Non-root, read-only, init, SIGKILL. */
	snprintf(user, sizeof(user), "%u:%u", cfg->sandbox_uid,
	         cfg->sandbox_gid);
	is_str(str_of(jsonx_at(cs, "User")), user, "body: user uid:gid");
	ok(cfg->sandbox_uid != 0 && cfg->sandbox_gid != 0 &&
	       strncmp(user, "0:", 2) != 0,
	   "body: user is not root (%s)", user);
	ok(cJSON_IsTrue(jsonx_at(cs, "ReadOnly")), "body: read-only root");
	ok(cJSON_IsTrue(jsonx_at(cs, "Init")), "body: init");
	is_str(str_of(jsonx_at(cs, "StopSignal")), "SIGKILL", "body: SIGKILL");
	x = jsonx_at(cs, "CapabilityDrop");
	ok(cJSON_IsArray(x) && tap_json_has(x, "ALL"),
	   "body: CapabilityDrop ALL");
	ok(jsonx_at(cs, "CapabilityAdd") == NULL, "body: no CapabilityAdd");
	is_str(str_of(jsonx_at(cs, "Dir")), "/sandbox", "body: workdir");
	x = jsonx_at(cs, "Env");
	ok(cJSON_GetArraySize(x) == 2 && tap_json_has(x, "FOO=bar") &&
	       tap_json_has(x, "LANG=C.UTF-8"),
	   "body: env");

	/* The command: sh -c preamble, $0, the stdin file, the program. */
	x = jsonx_at(cs, "Command");
	ok(cJSON_IsArray(x) && cJSON_GetArraySize(x) == 5 + (int)sp->n_cmd,
	   "body: command length");
	ok(is_strv(cJSON_GetArrayItem(x, 0), "/bin/sh") &&
	       is_strv(cJSON_GetArrayItem(x, 1), "-c") &&
	       is_strv(cJSON_GetArrayItem(x, 2), swarm_spec_preamble()),
	   "body: the command starts with /bin/sh -c and the preamble");
	is_str(str_of(cJSON_GetArrayItem(x, 4)), sp->stdin_path,
	       "body: stdin file is $1");
	for (i = 0; i < sp->n_cmd; i++)
		ok_ = ok_ &&
		      is_strv(cJSON_GetArrayItem(x, 5 + (int)i), sp->cmd[i]);
	ok(ok_, "body: the program after the preamble");

	/* Ulimits. */
	ok_ = cJSON_GetArraySize(jsonx_at(cs, "Ulimits")) == 3;
	cJSON_ArrayForEach (it, jsonx_at(cs, "Ulimits")) {
		const char *n = str_of(jsonx_at(it, "Name"));
		double v = !n                         ? -1
		           : strcmp(n, "nofile") == 0 ? cfg->nofile
		           : strcmp(n, "fsize") == 0
		               ? (double)cfg->fsize_mb * 1024 * 1024
		           : strcmp(n, "core") == 0 ? 0
		                                    : -1;

		ok_ = ok_ && v >= 0 && is_num(jsonx_at(it, "Soft"), v) &&
		      is_num(jsonx_at(it, "Hard"), v);
	}
	ok(ok_, "body: ulimits nofile, fsize, core");

	/* Mounts: the bind, then /tmp. */
	x = jsonx_at(cs, "Mounts");
	ok(cJSON_GetArraySize(x) == 2, "body: two mounts");
	it = cJSON_GetArrayItem(x, 0);
	ok(is_strv(jsonx_at(it, "Type"), "bind") &&
	       is_strv(jsonx_at(it, "Source"), sp->mounts[0].source) &&
	       is_strv(jsonx_at(it, "Target"), "/sandbox") &&
	       cJSON_IsTrue(jsonx_at(it, "ReadOnly")) &&
	       is_strv(jsonx_at(it, "BindOptions.Propagation"), "rprivate"),
	   "body: the bind mount, read-only, rprivate");
	it = cJSON_GetArrayItem(x, 1);
	ok(is_strv(jsonx_at(it, "Type"), "tmpfs") &&
	       is_strv(jsonx_at(it, "Target"), "/tmp") &&
	       is_num(jsonx_at(it, "TmpfsOptions.SizeBytes"),
	              (double)cfg->tmp_mb * 1024 * 1024) &&
	       is_num(jsonx_at(it, "TmpfsOptions.Mode"), 01777),
	   "body: /tmp tmpfs of SANDBOX_TMP_MB, 1777");

	/* Limits. */
	ok(is_num(jsonx_at(b, "TaskTemplate.Resources.Limits.MemoryBytes"),
	          mem),
	   "body: MemoryBytes = SANDBOX_MEMORY_MB (%u MiB)", cfg->memory_mb);
	ok(is_num(jsonx_at(b, "TaskTemplate.Resources.Limits.NanoCPUs"), cpu),
	   "body: NanoCPUs = SANDBOX_CPUS (%g)", cfg->cpus);
	ok(is_num(jsonx_at(b, "TaskTemplate.Resources.Limits.Pids"),
	          cfg->pids_limit),
	   "body: Pids = SANDBOX_PIDS_LIMIT (%u)", cfg->pids_limit);

	/* Restart none; placement; logs; no network. */
	is_str(str_of(jsonx_at(b, "TaskTemplate.RestartPolicy.Condition")),
	       "none", "body: restart condition none");
	ok(is_num(jsonx_at(b, "TaskTemplate.RestartPolicy.MaxAttempts"), 0),
	   "body: restart max attempts 0");
	x = jsonx_at(b, "TaskTemplate.Placement.Constraints");
	ok(cJSON_IsArray(x) && cJSON_GetArraySize(x) >= 1 &&
	       tap_json_has(x, cfg->swarm_constraints),
	   "body: placement constraints (%s)", cfg->swarm_constraints);
	is_str(str_of(jsonx_at(b, "TaskTemplate.LogDriver.Name")), "local",
	       "body: log driver local");
	snprintf(want, sizeof(want), "%zu",
	         cfg->output_max_bytes + cfg->output_max_bytes / 4 + 65536);
	is_str(str_of(jsonx_at(b, "TaskTemplate.LogDriver.Options.max-size")),
	       want, "body: log max-size above the output cap");
	ok(jsonx_at(b, "TaskTemplate.Networks") == NULL &&
	       jsonx_at(b, "Networks") == NULL,
	   "body: no networks");

	/* Labels (keys with dots: not through get): ours and the spec's. */
	x = cJSON_GetObjectItemCaseSensitive(b, "Labels");
	is_str(str_of(cJSON_GetObjectItemCaseSensitive(x, "sandbox.managed")),
	       "true", "body: label sandbox.managed");
	is_str(str_of(cJSON_GetObjectItemCaseSensitive(x, "sandbox.owner")),
	       "instance-a", "body: label sandbox.owner");
	is_str(str_of(cJSON_GetObjectItemCaseSensitive(x, "sandbox.boot")),
	       "boot-1", "body: label sandbox.boot");
	is_str(str_of(cJSON_GetObjectItemCaseSensitive(x, "sandbox.deadline")),
	       "1700000123", "body: label sandbox.deadline");
	is_str(str_of(cJSON_GetObjectItemCaseSensitive(x, "sandbox.kind")),
	       "run", "body: the spec's label sandbox.kind");
	is_str(str_of(cJSON_GetObjectItemCaseSensitive(x, "sandbox.run")),
	       RUN_ID, "body: the spec's label sandbox.run");
	is_int(cJSON_GetArraySize(x), 4 + (int)sp->n_labels,
	       "body: no other labels");
}

static cJSON *body_of(const struct config *cfg, const struct box_spec *sp,
                      bool global)
{
	return swarm_spec_body(cfg, "mcpsd-r-" RUN_ID, "instance-a", "boot-1",
	                       1700000123, sp, global);
}

static void test_body(const struct config *cfg)
{
	struct box_spec sp;
	cJSON *b;
	const cJSON *x;
	double mem = (double)cfg->memory_mb * 1024 * 1024;
	double cpu = llround(cfg->cpus * 1e9);

	fill_spec(&sp);
	b = body_of(cfg, &sp, false);
	ok(b != NULL, "body: replicated");
	if (!b)
		return;
	check_common(b, cfg, &sp, "body: name");
	x = jsonx_at(b, "Mode");
	ok(cJSON_GetArraySize(x) == 1 &&
	       is_num(jsonx_at(x, "Replicated.Replicas"), 1),
	   "body: Mode Replicated, 1 replica");
	ok(jsonx_at(x, "Global") == NULL, "body: not Global");
	ok(is_num(
	       jsonx_at(b, "TaskTemplate.Resources.Reservations.MemoryBytes"),
	       mem) &&
	       is_num(
	           jsonx_at(b, "TaskTemplate.Resources.Reservations.NanoCPUs"),
	           cpu),
	   "body: reservations equal to the limits");
	ok(cJSON_Compare(
	       jsonx_at(b, "TaskTemplate.Resources.Reservations.MemoryBytes"),
	       jsonx_at(b, "TaskTemplate.Resources.Limits.MemoryBytes"),
	       true) &&
	       cJSON_Compare(
	           jsonx_at(b, "TaskTemplate.Resources.Reservations.NanoCPUs"),
	           jsonx_at(b, "TaskTemplate.Resources.Limits.NanoCPUs"), true),
	   "body: reservations compare equal to limits");
	cJSON_Delete(b);

	/* Global: a node check, without reservations. */
	b = body_of(cfg, &sp, true);
	ok(b != NULL, "body: global");
	if (!b)
		return;
	check_common(b, cfg, &sp, "body global: name");
	x = jsonx_at(b, "Mode");
	ok(cJSON_GetArraySize(x) == 1 && cJSON_IsObject(jsonx_at(x, "Global")),
	   "body global: Mode Global only");
	ok(jsonx_at(b, "TaskTemplate.Resources.Reservations") == NULL,
	   "body global: no reservations");
	cJSON_Delete(b);

	/* The spec's own memory and CPUs win over the defaults. */
	sp.memory_mb = 512;
	sp.cpus = 1.25;
	sp.stdin_path = NULL;
	sp.mounts[0].read_only = false;
	sp.mounts[0].follow_host_mounts = true;
	b = body_of(cfg, &sp, false);
	ok(b != NULL, "body: own limits");
	if (!b)
		return;
	ok(is_num(jsonx_at(b, "TaskTemplate.Resources.Limits.MemoryBytes"),
	          512.0 * 1024 * 1024) &&
	       is_num(jsonx_at(
	                  b, "TaskTemplate.Resources.Reservations.MemoryBytes"),
	              512.0 * 1024 * 1024),
	   "body: the spec's memory_mb");
	ok(is_num(jsonx_at(b, "TaskTemplate.Resources.Limits.NanoCPUs"),
	          1.25e9) &&
	       is_num(
	           jsonx_at(b, "TaskTemplate.Resources.Reservations.NanoCPUs"),
	           1.25e9),
	   "body: the spec's cpus");
	is_str(str_of(cJSON_GetArrayItem(
	           jsonx_at(b, "TaskTemplate.ContainerSpec.Command"), 4)),
	       "/dev/null", "body: no stdin file reads /dev/null");
	x = cJSON_GetArrayItem(jsonx_at(b, "TaskTemplate.ContainerSpec.Mounts"),
	                       0);
	ok(jsonx_at(x, "ReadOnly") == NULL &&
	       is_strv(jsonx_at(x, "BindOptions.Propagation"), "rslave"),
	   "body: a writable bind has no ReadOnly; following mounts rslave");
	cJSON_Delete(b);
}

static void test_body_refused(const struct config *cfg)
{
	struct box_spec sp;
	cJSON *b;

	fill_spec(&sp);
	sp.network = true;
	b = body_of(cfg, &sp, false);
	ok(b == NULL, "body: a spec with network is refused");
	cJSON_Delete(b);

	fill_spec(&sp);
	sp.n_labels = BOX_LABELS_MAX + 1;
	b = body_of(cfg, &sp, false);
	ok(b == NULL, "body: more labels than allowed is refused");
	cJSON_Delete(b);

	fill_spec(&sp);
	sp.n_mounts = BOX_MOUNTS_MAX + 1;
	b = body_of(cfg, &sp, false);
	ok(b == NULL, "body: more mounts than allowed is refused");
	cJSON_Delete(b);

	fill_spec(&sp);
	sp.n_cmd = 0;
	b = body_of(cfg, &sp, false);
	ok(b == NULL, "body: no command is refused");
	cJSON_Delete(b);

	fill_spec(&sp);
	sp.image = NULL;
	b = body_of(cfg, &sp, false);
	ok(b == NULL, "body: no image is refused");
	cJSON_Delete(b);
}

/* SWARM_CONSTRAINTS: split at ';', spaces trimmed, empty parts skipped. */
static void test_constraints(struct config *cfg)
{
	static char several[] = " node.role==worker ;;node.labels.a==b; ";
	char *saved = cfg->swarm_constraints;
	struct box_spec sp;
	const cJSON *x;
	cJSON *b;

	fill_spec(&sp);
	cfg->swarm_constraints = several;
	b = body_of(cfg, &sp, false);
	cfg->swarm_constraints = saved;
	x = jsonx_at(b, "TaskTemplate.Placement.Constraints");
	ok(cJSON_GetArraySize(x) == 2 &&
	       is_strv(cJSON_GetArrayItem(x, 0), "node.role==worker") &&
	       is_strv(cJSON_GetArrayItem(x, 1), "node.labels.a==b"),
	   "constraints: split at ';', trimmed, empty parts skipped");
	cJSON_Delete(b);

	/* Never a service placed anywhere, never a constraint dropped. */
	{
		static char none[] = " ; ;";
		char longc[SWARM_CONSTRAINT_MAX + 32];

		cfg->swarm_constraints = none;
		b = body_of(cfg, &sp, false);
		ok(b == NULL, "constraints: none at all gives no body");
		cJSON_Delete(b);
		memset(longc, 'a', sizeof(longc) - 1);
		longc[sizeof(longc) - 1] = '\0';
		memcpy(longc, "node.role==worker;", 18);
		cfg->swarm_constraints = longc;
		b = body_of(cfg, &sp, false);
		ok(b == NULL,
		   "constraints: a too long one gives no body (not dropped)");
		cJSON_Delete(b);
		cfg->swarm_constraints = saved;
	}
}

/* A different value of the same kind as o (caller owns). */
static cJSON *changed(const cJSON *o)
{
	cJSON *c;

	if (cJSON_IsString(o)) {
		char s[512];

		snprintf(s, sizeof(s), "%s-changed", o->valuestring);
		return cJSON_CreateString(s);
	}
	if (cJSON_IsNumber(o))
		return cJSON_CreateNumber(o->valuedouble + 1);
	if (cJSON_IsBool(o))
		return cJSON_CreateBool(!cJSON_IsTrue(o));
	c = cJSON_Duplicate(o, true);
	if (cJSON_IsArray(c))
		cJSON_AddItemToArray(c, cJSON_CreateString("extra"));
	else if (cJSON_IsObject(c))
		cJSON_AddStringToObject(c, "Extra", "x");
	return c;
}

static void test_verify_field(const cJSON *sent, const char *field)
{
	char err[512];
	const char *last;
	cJSON *got, *p, *v;
	int rc;

	/* Dropped. */
	got = cJSON_Duplicate(sent, true);
	p = parent_of(got, field, &last);
	ok(cJSON_GetObjectItemCaseSensitive(p, last) != NULL,
	   "verify: %s is in the body", field);
	cJSON_DeleteItemFromObjectCaseSensitive(p, last);
	err[0] = '\0';
	rc = swarm_spec_verify(sent, got, err, sizeof(err));
	is_int(rc, -EPERM, field);
	ok(strstr(err, field) && strstr(err, "dropped"),
	   "verify: dropped %s named: %s", field, err);
	cJSON_Delete(got);

	/* Changed. */
	got = cJSON_Duplicate(sent, true);
	p = parent_of(got, field, &last);
	v = changed(cJSON_GetObjectItemCaseSensitive(p, last));
	ok(v && cJSON_ReplaceItemInObjectCaseSensitive(p, last, v),
	   "verify: %s replaced", field);
	err[0] = '\0';
	rc = swarm_spec_verify(sent, got, err, sizeof(err));
	is_int(rc, -EPERM, field);
	ok(strstr(err, field) && strstr(err, "changed"),
	   "verify: changed %s named: %s", field, err);
	cJSON_Delete(got);

	/* Changed to another type: null. */
	got = cJSON_Duplicate(sent, true);
	p = parent_of(got, field, &last);
	cJSON_ReplaceItemInObjectCaseSensitive(p, last, cJSON_CreateNull());
	err[0] = '\0';
	rc = swarm_spec_verify(sent, got, err, sizeof(err));
	ok(rc == -EPERM && strstr(err, field) && strstr(err, "changed"),
	   "verify: %s as null is changed", field);
	cJSON_Delete(got);

	/* Not sent: whatever the engine has is fine. */
	{
		cJSON *s = cJSON_Duplicate(sent, true);

		p = parent_of(s, field, &last);
		cJSON_DeleteItemFromObjectCaseSensitive(p, last);
		rc = swarm_spec_verify(s, sent, err, sizeof(err));
		is_int(rc, 0, "verify: a field not sent is not checked");
		cJSON_Delete(s);
	}
}

static void test_verify(const struct config *cfg)
{
	struct box_spec sp;
	char err[512];
	cJSON *sent, *got, *x, *n;
	int rc;

	fill_spec(&sp);
	sent = body_of(cfg, &sp, false);
	ok(sent != NULL, "verify: body");
	if (!sent)
		return;
	got = cJSON_Duplicate(sent, true);
	err[0] = '\0';
	rc = swarm_spec_verify(sent, got, err, sizeof(err));
	is_int(rc, 0, "verify: an identical copy passes");
	is_str(err, "", "verify: no message when it passes");
	cJSON_Delete(got);

	for (size_t i = 0; i < N_FIELDS; i++)
		test_verify_field(sent, fields[i]);

	/* Changes inside a field. */
	got = cJSON_Duplicate(sent, true);
	x = jsonx_at(got, "TaskTemplate.ContainerSpec.Mounts");
	cJSON_DeleteItemFromObjectCaseSensitive(cJSON_GetArrayItem(x, 0),
	                                        "ReadOnly");
	rc = swarm_spec_verify(sent, got, err, sizeof(err));
	ok(rc == -EPERM && strstr(err, "Mounts") && strstr(err, "changed"),
	   "verify: a bind mount made writable is refused");
	cJSON_Delete(got);

	got = cJSON_Duplicate(sent, true);
	x = jsonx_at(got, "TaskTemplate.ContainerSpec.Command");
	cJSON_ReplaceItemInArray(x, 2, cJSON_CreateString("exec \"$@\""));
	rc = swarm_spec_verify(sent, got, err, sizeof(err));
	ok(rc == -EPERM && strstr(err, "Command") && strstr(err, "changed"),
	   "verify: a preamble replaced is refused");
	cJSON_Delete(got);

	got = cJSON_Duplicate(sent, true);
	x = jsonx_at(got, "TaskTemplate.ContainerSpec.CapabilityDrop");
	cJSON_ReplaceItemInArray(x, 0, cJSON_CreateString("NET_RAW"));
	rc = swarm_spec_verify(sent, got, err, sizeof(err));
	ok(rc == -EPERM && strstr(err, "CapabilityDrop"),
	   "verify: CapabilityDrop ALL narrowed is refused");
	cJSON_Delete(got);

	got = cJSON_Duplicate(sent, true);
	cJSON_DeleteItemFromObjectCaseSensitive(jsonx_at(got, "TaskTemplate"),
	                                        "Resources");
	rc = swarm_spec_verify(sent, got, err, sizeof(err));
	ok(rc == -EPERM &&
	       strstr(err, "TaskTemplate.Resources.Limits.NanoCPUs") &&
	       strstr(err, "dropped"),
	   "verify: all limits dropped names the first: %s", err);
	cJSON_Delete(got);

	rc = swarm_spec_verify(sent, NULL, err, sizeof(err));
	ok(rc == -EPERM && strstr(err, fields[0]) && strstr(err, "dropped"),
	   "verify: no spec at all is refused");

	/* Fields the check leaves alone. */
	got = cJSON_Duplicate(sent, true);
	cJSON_DeleteItemFromObjectCaseSensitive(
	    jsonx_at(got, "TaskTemplate.Resources"), "Reservations");
	cJSON_ReplaceItemInObjectCaseSensitive(jsonx_at(got, "Mode.Replicated"),
	                                       "Replicas",
	                                       cJSON_CreateNumber(0));
	cJSON_AddStringToObject(jsonx_at(got, "TaskTemplate.ContainerSpec"),
	                        "Hostname", "x");
	rc = swarm_spec_verify(sent, got, err, sizeof(err));
	is_int(rc, 0, "verify: replicas, reservations, additions pass");
	cJSON_Delete(got);

	/* Networks added on the way. */
	got = cJSON_Duplicate(sent, true);
	x = cJSON_AddArrayToObject(jsonx_at(got, "TaskTemplate"), "Networks");
	n = cJSON_CreateObject();
	cJSON_AddStringToObject(n, "Target", "ingress");
	cJSON_AddItemToArray(x, n);
	err[0] = '\0';
	rc = swarm_spec_verify(sent, got, err, sizeof(err));
	is_int(rc, -EPERM, "verify: networks attached");
	ok(strstr(err, "network") != NULL,
	   "verify: the message says network: %s", err);
	cJSON_Delete(got);

	got = cJSON_Duplicate(sent, true);
	cJSON_AddArrayToObject(jsonx_at(got, "TaskTemplate"), "Networks");
	rc = swarm_spec_verify(sent, got, err, sizeof(err));
	is_int(rc, 0, "verify: an empty Networks array passes");
	cJSON_Delete(got);

	cJSON_Delete(sent);
}

static void test_preamble(void)
{
	static const char *const needles[] = {
	    "NoNewPrivs:\t1",
	    "Seccomp:\t2",
	    "CapEff:\t0000000000000000",
	    "CapBnd:\t0000000000000000",
	    "/proc/self/status",
	    "SwapTotal:",
	    "/proc/meminfo",
	    "/sys/class/net/",
	    "/sys/class/net/lo",
	    "no-new-privileges",
	    "seccomp",
	    "capabilities",
	    "swap-off",
	    "network-none",
	    SWARM_CHECK_MARK,
	    "exec \"$@\" <\"$in\"",
	};
	const char *p = swarm_spec_preamble();
	char exit_line[32];

	ok(p != NULL && p[0] != '\0', "preamble: not empty");
	if (!p)
		return;
	for (size_t i = 0; i < sizeof(needles) / sizeof(needles[0]); i++)
		ok(strstr(p, needles[i]) != NULL, "preamble: mentions '%s'",
		   needles[i]);
	snprintf(exit_line, sizeof(exit_line), "exit %d\n", SWARM_CHECK_EXIT);
	ok(strstr(p, exit_line) != NULL,
	   "preamble: exits %d on a missing check", SWARM_CHECK_EXIT);
	ok(strstr(p, ">&2") != NULL, "preamble: the mark goes to stderr");
	ok(p == swarm_spec_preamble(), "preamble: static");
}

int main(void)
{
	struct config cfg;
	int rc;

	test_name();
	test_preamble();
	memset(&cfg, 0, sizeof(cfg));
	rc = load_config(&cfg);
	is_int(rc, 0, "config: the defaults load");
	if (rc == 0) {
		ok(cfg.swarm_constraints && cfg.swarm_constraints[0],
		   "config: default SWARM_CONSTRAINTS is not empty");
		test_body(&cfg);
		test_body_refused(&cfg);
		test_constraints(&cfg);
		test_verify(&cfg);
	}
	config_finish(&cfg);
	return tap_done();
}
