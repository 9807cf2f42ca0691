/* SPDX-License-Identifier: MIT */
/*
 * swarm_spec: the ServiceSpec of a run, its check after a read-back, the
 * conversation's service name and the task preamble; see swarm_spec.h.
 */
#include "backend/swarm/swarm_spec.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <openssl/evp.h>

#include "util/errmsg.h"
#include "util/hex.h"
#include "util/jsonx.h"

/*
 * Runs under /bin/sh (dash in the runner images) with only builtins: the
 * settings a service cannot carry on API 1.41 are the node engine's to
 * give, so each task looks at what it got before the code starts. $1 is
 * the stdin file, the rest the program. The status of this shell is
 * what /proc/self shows: the code inherits it through exec. The code runs
 * as a user without capabilities, so CapEff is 0 whatever the service
 * asked: the bounding set (CapBnd) shows whether CapabilityDrop ALL held.
 */
#define SWARM_STR_(x) #x
#define SWARM_STR(x) SWARM_STR_(x)
#define SWARM_CHECK_EXIT_TEXT SWARM_STR(SWARM_CHECK_EXIT)
static const char preamble[] = "nnp= sc= ce= cb= sw= net=1\n"
                               "while IFS= read -r l; do\n"
                               "  case $l in\n"
                               "  'NoNewPrivs:\t1') nnp=1 ;;\n"
                               "  'Seccomp:\t2') sc=1 ;;\n"
                               "  'CapEff:\t0000000000000000') ce=1 ;;\n"
                               "  'CapBnd:\t0000000000000000') cb=1 ;;\n"
                               "  esac\n"
                               "done </proc/self/status\n"
                               "while IFS= read -r l; do\n"
                               "  case $l in SwapTotal:*' 0 kB') sw=1 ;; esac\n"
                               "done </proc/meminfo\n"
                               "for i in /sys/class/net/*; do\n"
                               "  [ \"$i\" = /sys/class/net/lo ] || net=\n"
                               "done\n"
                               "m=\n"
                               "[ -n \"$nnp\" ] || m=\"$m no-new-privileges\"\n"
                               "[ -n \"$sc\" ] || m=\"$m seccomp\"\n"
                               "[ -n \"$ce\" ] && [ -n \"$cb\" ] || "
                               "m=\"$m capabilities\"\n"
                               "[ -n \"$sw\" ] || m=\"$m swap-off\"\n"
                               "[ -n \"$net\" ] || m=\"$m network-none\"\n"
                               "if [ -n \"$m\" ]; then\n"
                               "  echo \"" SWARM_CHECK_MARK "$m\" >&2\n"
                               "  exit " SWARM_CHECK_EXIT_TEXT "\n"
                               "fi\n"
                               "in=$1\n"
                               "shift\n"
                               "exec \"$@\" <\"$in\"\n";

const char *swarm_spec_preamble(void)
{
	return preamble;
}

int swarm_spec_name(const struct box_spec *spec, char out[SWARM_NAME_MAX])
{
	static const char tag[] = "mcp-sandboxd/conversation";
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned mdlen = 0;
	EVP_MD_CTX *c;
	char hex[2 * EVP_MAX_MD_SIZE + 1];
	bool ok;

	out[0] = '\0';
	if (!spec->exclusive || !spec->exclusive[0]) {
		const char *id = spec->name ? strrchr(spec->name, '-') : NULL;

		if (!id || strlen(id + 1) != 16 ||
		    strspn(id + 1, "0123456789abcdef") != 16)
			return -EINVAL;
		snprintf(out, SWARM_NAME_MAX, "mcpsd-r-%s", id + 1);
		return 0;
	}
	/*
	 * A hash, not the workspace name: that name is the secret part of
	 * the conversation's file URLs and must not show in service lists.
	 */
	c = EVP_MD_CTX_new();
	ok = c && EVP_DigestInit_ex(c, EVP_sha256(), NULL) &&
	     EVP_DigestUpdate(c, tag, sizeof(tag)) &&
	     EVP_DigestUpdate(c, spec->exclusive, strlen(spec->exclusive)) &&
	     EVP_DigestFinal_ex(c, md, &mdlen);
	EVP_MD_CTX_free(c);
	if (!ok || mdlen < 20)
		return -ENOMEM;
	hex_encode(md, 20, hex);
	snprintf(out, SWARM_NAME_MAX, "mcpsd-c-%.40s", hex);
	return 0;
}

static bool add_str(cJSON *o, const char *k, const char *v)
{
	return cJSON_AddStringToObject(o, k, v) != NULL;
}

static bool add_num(cJSON *o, const char *k, double v)
{
	return cJSON_AddNumberToObject(o, k, v) != NULL;
}

static bool add_labels(cJSON *o, const char *owner, const char *boot,
                       time_t deadline, const struct box_spec *sp)
{
	cJSON *l = cJSON_AddObjectToObject(o, "Labels");
	char dl[24];

	snprintf(dl, sizeof(dl), "%lld", (long long)deadline);
	if (!l || !add_str(l, "sandbox.managed", "true") ||
	    !add_str(l, "sandbox.owner", owner) ||
	    !add_str(l, "sandbox.boot", boot) ||
	    !add_str(l, "sandbox.deadline", dl))
		return false;
	for (size_t i = 0; i < sp->n_labels; i++)
		if (!add_str(l, sp->labels[i].key, sp->labels[i].value))
			return false;
	return true;
}

static bool add_command(cJSON *cs, const struct box_spec *sp)
{
	cJSON *a = cJSON_AddArrayToObject(cs, "Command");
	const char *head[] = {"/bin/sh", "-c", preamble, "mcpsd-run",
	                      sp->stdin_path ? sp->stdin_path : "/dev/null"};

	if (!a)
		return false;
	for (size_t i = 0; i < sizeof(head) / sizeof(head[0]); i++)
		if (!cJSON_AddItemToArray(a, cJSON_CreateString(head[i])))
			return false;
	for (size_t i = 0; i < sp->n_cmd; i++)
		if (!cJSON_AddItemToArray(a, cJSON_CreateString(sp->cmd[i])))
			return false;
	return true;
}

static bool add_ulimit(cJSON *a, const char *name, double v)
{
	cJSON *u = cJSON_CreateObject();

	if (!u || !cJSON_AddItemToArray(a, u))
		return false;
	return add_str(u, "Name", name) && add_num(u, "Soft", v) &&
	       add_num(u, "Hard", v);
}

static bool add_mounts(cJSON *cs, const struct config *cfg,
                       const struct box_spec *sp)
{
	cJSON *a = cJSON_AddArrayToObject(cs, "Mounts"), *m, *o;

	if (!a)
		return false;
	for (size_t i = 0; i < sp->n_mounts; i++) {
		m = cJSON_CreateObject();
		if (!m || !cJSON_AddItemToArray(a, m) ||
		    !add_str(m, "Type", "bind") ||
		    !add_str(m, "Source", sp->mounts[i].source) ||
		    !add_str(m, "Target", sp->mounts[i].target) ||
		    /* The engine leaves false out of what it answers. */
		    (sp->mounts[i].read_only &&
		     !cJSON_AddBoolToObject(m, "ReadOnly", 1)))
			return false;
		o = cJSON_AddObjectToObject(m, "BindOptions");
		if (!o ||
		    !add_str(o, "Propagation",
		             sp->mounts[i].follow_host_mounts ? "rslave"
		                                              : "rprivate"))
			return false;
	}
	/*
	 * /tmp: a service's tmpfs takes only a size and a mode on API 1.41,
	 * and the engine mounts it noexec (docs/deployment.md).
	 */
	m = cJSON_CreateObject();
	if (!m || !cJSON_AddItemToArray(a, m) || !add_str(m, "Type", "tmpfs") ||
	    !add_str(m, "Target", "/tmp"))
		return false;
	o = cJSON_AddObjectToObject(m, "TmpfsOptions");
	return o &&
	       add_num(o, "SizeBytes", (double)cfg->tmp_mb * 1024 * 1024) &&
	       add_num(o, "Mode", 01777);
}

static bool add_container(cJSON *tt, const struct config *cfg,
                          const struct box_spec *sp)
{
	cJSON *cs = cJSON_AddObjectToObject(tt, "ContainerSpec"), *a;
	char user[32];

	snprintf(user, sizeof(user), "%u:%u", cfg->sandbox_uid,
	         cfg->sandbox_gid);
	if (!cs || !add_str(cs, "Image", sp->image) || !add_command(cs, sp) ||
	    !add_str(cs, "User", user) ||
	    !cJSON_AddBoolToObject(cs, "ReadOnly", 1) ||
	    !cJSON_AddBoolToObject(cs, "Init", 1) ||
	    !add_str(cs, "StopSignal", "SIGKILL") ||
	    (sp->workdir && !add_str(cs, "Dir", sp->workdir)))
		return false;
	if (sp->n_env) {
		a = cJSON_CreateStringArray(sp->env, (int)sp->n_env);
		if (!a || !cJSON_AddItemToObject(cs, "Env", a)) {
			cJSON_Delete(a);
			return false;
		}
	}
	a = cJSON_AddArrayToObject(cs, "CapabilityDrop");
	if (!a || !cJSON_AddItemToArray(a, cJSON_CreateString("ALL")))
		return false;
	a = cJSON_AddArrayToObject(cs, "Ulimits");
	if (!a || !add_ulimit(a, "nofile", cfg->nofile) ||
	    !add_ulimit(a, "fsize", (double)cfg->fsize_mb * 1024 * 1024) ||
	    !add_ulimit(a, "core", 0))
		return false;
	return add_mounts(cs, cfg, sp);
}

static bool add_resources(cJSON *tt, const struct config *cfg,
                          const struct box_spec *sp, bool global)
{
	cJSON *r = cJSON_AddObjectToObject(tt, "Resources"), *l;
	double mem = (double)(sp->memory_mb ? sp->memory_mb : cfg->memory_mb) *
	             1024 * 1024;
	double cpu = llround((sp->cpus > 0 ? sp->cpus : cfg->cpus) * 1e9);

	l = r ? cJSON_AddObjectToObject(r, "Limits") : NULL;
	if (!l || !add_num(l, "NanoCPUs", cpu) ||
	    !add_num(l, "MemoryBytes", mem) ||
	    !add_num(l, "Pids", cfg->pids_limit))
		return false;
	if (global)
		return true;
	/* What Swarm schedules by: a task waits until a node has this. */
	l = cJSON_AddObjectToObject(r, "Reservations");
	return l && add_num(l, "NanoCPUs", cpu) &&
	       add_num(l, "MemoryBytes", mem);
}

static bool add_placement(cJSON *tt, const struct config *cfg)
{
	cJSON *p = cJSON_AddObjectToObject(tt, "Placement");
	cJSON *a = p ? cJSON_AddArrayToObject(p, "Constraints") : NULL;
	const char *s = cfg->swarm_constraints, *c;
	char one[SWARM_CONSTRAINT_MAX];
	size_t n;

	if (!a)
		return false;
	while (swarm_constraint_next(&s, &c, &n)) {
		if (n >= sizeof(one))
			return false; /* never dropped: configure refuses it */
		if (!n)
			continue;
		memcpy(one, c, n);
		one[n] = '\0';
		if (!cJSON_AddItemToArray(a, cJSON_CreateString(one)))
			return false;
	}
	/* No constraint would place code on any node, managers included. */
	return cJSON_GetArraySize(a) > 0;
}

static bool add_logging(cJSON *tt, const struct config *cfg)
{
	cJSON *l = cJSON_AddObjectToObject(tt, "LogDriver");
	cJSON *o = l ? cJSON_AddObjectToObject(l, "Options") : NULL;
	char size[32];

	/*
	 * "local" keeps bytes as they were (json-file turns invalid UTF-8
	 * into U+FFFD); bounded a little above the output cap, past which
	 * the run is stopped anyway.
	 */
	snprintf(size, sizeof(size), "%zu",
	         cfg->output_max_bytes + cfg->output_max_bytes / 4 + 65536);
	return o && add_str(l, "Name", "local") &&
	       add_str(o, "max-size", size) && add_str(o, "max-file", "2") &&
	       add_str(o, "compress", "false");
}

cJSON *swarm_spec_body(const struct config *cfg, const char *name,
                       const char *owner, const char *boot, time_t deadline,
                       const struct box_spec *sp, bool global)
{
	cJSON *b, *tt, *x;

	if (sp->n_cmd == 0 || !sp->image || sp->network ||
	    sp->n_labels > BOX_LABELS_MAX || sp->n_mounts > BOX_MOUNTS_MAX)
		return NULL;
	b = cJSON_CreateObject();
	if (!b || !add_str(b, "Name", name) ||
	    !add_labels(b, owner, boot, deadline, sp))
		goto fail;
	tt = cJSON_AddObjectToObject(b, "TaskTemplate");
	if (!tt || !add_container(tt, cfg, sp) ||
	    !add_resources(tt, cfg, sp, global) || !add_placement(tt, cfg) ||
	    !add_logging(tt, cfg))
		goto fail;
	x = cJSON_AddObjectToObject(tt, "RestartPolicy");
	if (!x || !add_str(x, "Condition", "none") ||
	    !add_num(x, "MaxAttempts", 0))
		goto fail;
	x = cJSON_AddObjectToObject(b, "Mode");
	if (!x)
		goto fail;
	if (global) {
		if (!cJSON_AddObjectToObject(x, "Global"))
			goto fail;
	} else {
		x = cJSON_AddObjectToObject(x, "Replicated");
		if (!x || !add_num(x, "Replicas", 1))
			goto fail;
	}
	return b;
fail:
	cJSON_Delete(b);
	return NULL;
}

int swarm_spec_verify(const cJSON *sent, const cJSON *got, char *err,
                      size_t errlen)
{
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
	const cJSON *nets;

	for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
		const cJSON *a = jsonx_at(sent, fields[i]),
		            *b = jsonx_at(got, fields[i]);

		if (!a)
			continue; /* not sent: nothing to lose */
		if (!b || !cJSON_Compare(a, b, true)) {
			snprintf(
			    err, errlen,
			    "the Swarm manager %s %s of the run's service; "
			    "refusing to run code without it (is the "
			    "engine older than API 1.41?)",
			    b ? "changed" : "dropped", fields[i]);
			return -EPERM;
		}
	}
	/* No network may have been added on the way. */
	nets = jsonx_at(got, "TaskTemplate.Networks");
	if (nets && cJSON_GetArraySize(nets) > 0) {
		snprintf(err, errlen,
		         "the Swarm manager attached networks to the run's "
		         "service; refusing to run code with network access");
		return -EPERM;
	}
	return 0;
}

/* ---- the settings ------------------------------------------------------- */

bool swarm_constraint_next(const char **s, const char **start, size_t *len)
{
	const char *p = *s;
	size_t n, b = 0, e;

	if (!*p)
		return false;
	n = strcspn(p, ";");
	e = n;
	while (b < e && p[b] == ' ')
		b++;
	while (e > b && p[e - 1] == ' ')
		e--;
	*start = p + b;
	*len = e - b;
	*s = p + n + (p[n] == ';');
	return true;
}

/* At least one constraint, none of SWARM_CONSTRAINT_MAX bytes or more. */
static int swarm_constraints_check(const char *s)
{
	const char *c;
	size_t n;
	unsigned n_ok = 0;

	while (swarm_constraint_next(&s, &c, &n)) {
		if (n >= SWARM_CONSTRAINT_MAX)
			return -EINVAL;
		n_ok += n > 0;
	}
	return n_ok ? 0 : -EINVAL;
}

int swarm_spec_configure(const struct config *cfg, bool chosen, char *err,
                         size_t errlen)
{
	const char *p = cfg->swarm_constraints ? cfg->swarm_constraints : "";

	for (const char *q = p; *q; q++) {
		if (!(isalnum((unsigned char)*q) || strchr("._-=!; ", *q)))
			return errmsg_fail(
			    -EINVAL, err, errlen,
			    "SWARM_CONSTRAINTS='%s' must be Swarm "
			    "placement constraints separated by ';', e.g. "
			    "SWARM_CONSTRAINTS=node.labels.mcp-sandboxd."
			    "sandbox==true",
			    p);
	}
	if (!chosen)
		return 0;
	if (cfg->runtime && cfg->runtime[0])
		return errmsg_fail(
		    -EINVAL, err, errlen,
		    "SANDBOX_RUNTIME cannot be chosen per service on a Swarm "
		    "(Docker 20.10); make it the sandbox nodes' default "
		    "runtime in their daemon.json and leave SANDBOX_RUNTIME "
		    "empty");
	if (swarm_constraints_check(p) < 0)
		return errmsg_fail(
		    -EINVAL, err, errlen,
		    "SWARM_CONSTRAINTS needs at least one placement "
		    "constraint, each under %d characters (without one, runs "
		    "could land on any node, managers included), e.g. "
		    "SWARM_CONSTRAINTS=node.labels.mcp-sandboxd.sandbox==true",
		    SWARM_CONSTRAINT_MAX);
	return 0;
}
