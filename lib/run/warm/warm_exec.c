/* SPDX-License-Identifier: MIT */
/*
 * warm_exec: one call in a warm box, daemon side (docs/agent-protocol.md):
 * the code and stdin written to the box's /sandbox, the exec frame, the
 * output, the escalation on a deadline, cancel or output cap (interrupt,
 * then kill the kernel, then the box), and the result read from the
 * agent's frames. A box is used by one thread at a time.
 */
#include "run/warm/warm_exec.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "egress/egress.h"
#include "run/capture.h"
#include "run/oneoff.h"
#include "run/warm/warm_io.h"
#include "util/buf.h"
#include "util/errmsg.h"
#include "util/log.h"
#include "util/mono.h"
#include "run/warm/warm_state.h"
#include "workspace/workspace.h"

#define WARM_EXEC_MAX (64 * 1024) /* an exec frame's payload */
/*
 * A cancel's grace at each step, whatever SANDBOX_INTERRUPT_GRACE_MS says:
 * whoever cancels expects the run gone within two seconds, state or not.
 */
#define WARM_CANCEL_GRACE_MS 750

/* ---- one call ----------------------------------------------------------- */

/*
 * Removes a file from the box's /sandbox directory: through the descriptor
 * held since the box was made, which is the directory the box has mounted.
 */
static void warm_drop_file(const struct warm_box *b, const char *name)
{
	if (unlinkat(b->dir_fd, name, 0) < 0 && errno != ENOENT)
		log_warn("removing %s/%s", b->dir, name);
}

/* Writes a file into the box's /sandbox directory (replacing it). */
static int warm_put_file(const struct warm_box *b, const char *name,
                         const char *p, size_t n)
{
	(void)unlinkat(b->dir_fd, name, 0);
	return warm_io_write_file(b->dir_fd, name, p, n, 0644);
}

/*
 * Durable sessions (warm_state.h): where the kernel saves its state (s),
 * its cap in bytes (z), how many saves it keeps (K), and what it loads
 * before the code (L: "latest" in a new kernel, a run number to rewind).
 */
static int warm_exec_state_records(struct warm_box *b,
                                   const struct runner_request *req,
                                   const struct config *cfg, unsigned char *rec,
                                   size_t len, size_t *off)
{
	char dir[sizeof(WARM_STATE_DIR) + CATALOG_NAME_MAX + 2], num[24];
	unsigned long long cap = (unsigned long long)cfg->state_max_mb << 20;
	int n = snprintf(dir, sizeof(dir), "%s/%s", WARM_STATE_DIR, b->lang);
	int rc = agentframe_tlv_put(rec, len, off, 's', dir, (size_t)n);

	/* At most half the workspace: its files must keep room too. */
	if (cfg->workspace_quota_bytes && cap > cfg->workspace_quota_bytes / 2)
		cap = cfg->workspace_quota_bytes / 2;
	n = snprintf(num, sizeof(num), "%llu", cap);
	if (rc == 0)
		rc = agentframe_tlv_put(rec, len, off, 'z', num, (size_t)n);
	n = snprintf(num, sizeof(num), "%u", cfg->state_keep);
	if (rc == 0)
		rc = agentframe_tlv_put(rec, len, off, 'K', num, (size_t)n);
	b->restoring = false;
	if (rc == 0 && req->rewind_to) {
		n = snprintf(num, sizeof(num), "%llu", req->rewind_to);
		rc = agentframe_tlv_put(rec, len, off, 'L', num, (size_t)n);
	} else if (rc == 0 && b->restore_next) {
		rc = agentframe_tlv_put(rec, len, off, 'L', "latest", 6);
		b->restoring = true;
	}
	return rc;
}

/* The exec frame's records. -ENOSPC when they do not fit. */
static int warm_exec_records(struct warm_box *b,
                             const struct runner_request *req,
                             const struct catalog_image *img,
                             const struct config *cfg, uint64_t id,
                             unsigned char *rec, size_t cap, size_t *off)
{
	char num[24], path[80], *base_url = NULL;
	int n = snprintf(num, sizeof(num), "%llu", (unsigned long long)id);
	int rc = agentframe_tlv_put(rec, cap, off, 'n', num, (size_t)n);

	snprintf(path, sizeof(path), "/sandbox/%s", img->filename);
	if (rc == 0 && b->kernel)
		rc = agentframe_tlv_put(rec, cap, off, 'k', "1", 1);
	if (rc == 0 && b->kernel)
		rc = agentframe_tlv_put(rec, cap, off, 'f', path, strlen(path));
	/* A syntax check runs the image's checker instead of its command. */
	const char *const *argv =
	    (const char *const *)(req->check ? img->check : img->command);
	size_t argc = req->check ? img->n_check : img->n_command;

	for (size_t i = 0; rc == 0 && !b->kernel && i < argc; i++)
		rc = agentframe_tlv_put(rec, cap, off, 'a', argv[i],
		                        strlen(argv[i]));
	if (rc == 0 && req->stdin_data)
		rc = agentframe_tlv_put(rec, cap, off, 'i', "/sandbox/stdin",
		                        14);
	if (rc == 0 && req->file_base_url) {
		base_url = buf_asprintf("FILE_BASE_URL=%s", req->file_base_url);
		rc = base_url ? agentframe_tlv_put(rec, cap, off, 'v', base_url,
		                                   strlen(base_url))
		              : -ENOMEM;
		free(base_url);
	}
	for (size_t i = 0; rc == 0 && i < req->n_env; i++)
		rc = agentframe_tlv_put(rec, cap, off, 'v', req->env[i],
		                        strlen(req->env[i]));
	if (rc == 0 && !b->kernel && !req->check) {
		/* A fresh process finds the inputs and the package cache as
		 * in a one-off box. */
		struct oneoff_inputs in = {0};
		const char *inputs;
		char *pkg = NULL;

		if (req->inputs_json)
			oneoff_inputs_for(img->language, &in);
		rc = oneoff_path_env(cfg, img, in.env, &pkg, &inputs);
		if (rc == 0 && inputs)
			rc = agentframe_tlv_put(rec, cap, off, 'v', inputs,
			                        strlen(inputs));
		if (rc == 0 && pkg)
			rc = agentframe_tlv_put(rec, cap, off, 'v', pkg,
			                        strlen(pkg));
		free(pkg);
	}
	if (rc == 0)
		rc = agentframe_tlv_put(rec, cap, off, 'c', warm_exec_dir(req),
		                        strlen(warm_exec_dir(req)));
	if (rc == 0 && b->kernel && cfg->state_save && !b->once)
		rc = warm_exec_state_records(b, req, cfg, rec, cap, off);
	return rc;
}

/*
 * Writes the code (and stdin) on the host, for the box's /sandbox. 0 or
 * -errno with a message (the host's disk full, say: the box is fine).
 */
static int warm_exec_files(struct warm_box *b, const struct runner_request *req,
                           const struct catalog_image *img, char *err,
                           size_t errlen)
{
	int rc = warm_put_file(b, img->filename, req->code, req->code_len);
	struct oneoff_inputs in;

	if (rc == 0 && req->stdin_data)
		rc = warm_put_file(b, "stdin", req->stdin_data, req->stdin_len);
	/* The kernel reads inputs.json itself before each run. */
	oneoff_inputs_for(img->language, &in);
	if (rc == 0 && req->inputs_json)
		rc = warm_put_file(b, ONEOFF_INPUTS_FILE, req->inputs_json,
		                   req->inputs_len);
	if (rc == 0 && req->inputs_json && !b->kernel && in.file &&
	    strcmp(in.file, img->filename) != 0)
		rc = warm_put_file(b, in.file, in.text, strlen(in.text));
	if (rc < 0)
		return errmsg_fail(
		    rc, err, errlen,
		    "cannot write the code for the sandbox on the "
		    "server: %s",
		    strerror(-rc));
	return 0;
}

/* Sends the exec. 0 or -errno with a message: the agent is unreachable. */
static int warm_exec_send(struct warm_box *b, const struct runner_request *req,
                          const struct catalog_image *img,
                          const struct config *cfg, uint64_t id, char *err,
                          size_t errlen)
{
	unsigned char *rec = malloc(WARM_EXEC_MAX);
	size_t off = 0;
	int rc;

	if (!rec)
		return errmsg_fail(-ENOMEM, err, errlen, "out of memory");
	rc = warm_exec_records(b, req, img, cfg, id, rec, WARM_EXEC_MAX, &off);
	if (rc == 0)
		rc = warm_io_send(b, 'E', rec, off);
	free(rec);
	if (rc < 0)
		return errmsg_fail(rc, err, errlen,
		                   "cannot reach the sandbox agent: %s",
		                   strerror(-rc));
	return 0;
}

/*
 * Whether the box's host side is whole before a call; a damaged box (its
 * code directory removed, say) could never run anything again, so it is
 * killed here and the caller replaces it.
 */
static bool warm_exec_usable(struct warm_box *b)
{
	char what[PATH_MAX + 64];

	if (warm_box_intact(b, what, sizeof(what)))
		return true;
	log_warnx("warm box %s (%s) is damaged: %s; replacing it", b->box->id,
	          b->lang, what);
	snprintf(b->dead_detail, sizeof(b->dead_detail), "%.199s", what);
	warm_io_kill(b, "sandbox_damaged");
	return false;
}

/* How a call is being brought to an end. */
enum warm_phase {
	WARM_RUNNING,
	WARM_INTERRUPTED, /* SIGINT sent: waiting for the kernel to stop */
	WARM_KILLED,      /* the kernel (or process) was killed */
};

struct warm_call {
	struct warm_io io;
	enum warm_phase phase;
	bool timed_out, cancelled;
	bool quota; /* the cancel came from the quota watch */
	uint64_t id;
};

static bool warm_exec_done_or_limit(const struct warm_io *io)
{
	return io->done || io->limit;
}

/*
 * Escalates one step: interrupt (state kept), then kill the kernel or
 * process (state lost). false when there is no step left or the agent
 * cannot be told: the box itself must go.
 */
static bool warm_escalate(struct warm_box *b, struct warm_call *c)
{
	switch (c->phase) {
	case WARM_RUNNING:
		c->phase = WARM_INTERRUPTED;
		if (warm_io_send_id(b, 'I', c->id) < 0)
			return false;
		break;
	case WARM_INTERRUPTED:
		c->phase = WARM_KILLED;
		if (warm_io_send_id(b, 'K', c->id) < 0)
			return false;
		break;
	case WARM_KILLED:
		return false;
	}
	return true;
}

/*
 * Drives a sent exec to its D frame, interrupting and killing on the
 * deadline, a cancel or the output cap. Returns with c->io.done, or with b
 * dead.
 */
static void warm_exec_drive(const struct warm_context *env, struct warm_box *b,
                            const struct runner_request *req,
                            struct warm_call *c, long long deadline)
{
	long long until = deadline, grace;
	bool oom;

	for (;;) {
		bool cancelled = false;
		int rc = warm_io_pump(
		    &c->io, until,
		    c->phase == WARM_RUNNING ? runner_cancel_fd(req->cancel)
		                             : -1,
		    c->phase == WARM_RUNNING ? warm_exec_done_or_limit
		                             : warm_io_until_done,
		    &cancelled);

		if (rc == 1 && c->io.done)
			return;
		if (rc == -EPIPE) {
			warm_io_died(b, &oom);
			return;
		}
		if (rc < 0) {
			log_warnx("warm box %s: %s; ending its session",
			          b->box->id,
			          c->io.proto[0] ? c->io.proto : strerror(-rc));
			warm_io_kill(b, "protocol");
			return;
		}
		if (c->phase == WARM_RUNNING) {
			if (cancelled || runner_cancel_requested(req->cancel)) {
				c->cancelled = true;
				c->quota = runner_cancel_for_quota(req->cancel);
			} else if (!c->io.limit)
				c->timed_out = true;
		}
		if (!warm_escalate(b, c)) {
			log_warnx("warm box %s does not answer; killing it",
			          b->box->id);
			warm_io_kill(b, "unresponsive");
			return;
		}
		/* Output stops counting; the agent has the grace to answer. */
		grace = env->cfg->interrupt_grace_ms;
		if (c->cancelled && grace > WARM_CANCEL_GRACE_MS)
			grace = WARM_CANCEL_GRACE_MS;
		until = mono_ms() + grace;
	}
}

/* A number of a D frame's field (or of its "mem" object), or -1. */
static long long warm_num(const cJSON *o, const char *name)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);

	return cJSON_IsNumber(v) && v->valuedouble >= 0 && v->valuedouble < 9e15
	           ? (long long)v->valuedouble
	           : -1;
}

/* The kernel's result (X): the value and an exception's type. */
static void warm_take_x(const cJSON *x, struct runner_result *res)
{
	const cJSON *value = cJSON_GetObjectItemCaseSensitive(x, "value");
	const cJSON *error = cJSON_GetObjectItemCaseSensitive(x, "error");
	const char *ename = cJSON_GetStringValue(
	    cJSON_GetObjectItemCaseSensitive(error, "ename"));

	if (cJSON_IsObject(value) && cJSON_GetArraySize(value) > 0)
		res->value_json = cJSON_PrintUnformatted(value);
	if (ename)
		snprintf(res->error_name, sizeof(res->error_name), "%.63s",
		         ename);
}

/*
 * What the kernel says it leaves running after the call (X's
 * "background"): threads other than its main one, and the bytes they
 * printed between calls (dropped). Informational: the code writes X, so
 * it is bounded and never trusted for a decision (the CPU they use is
 * measured on the host, warm.c).
 */
static void warm_take_background(const cJSON *x, struct runner_result *res)
{
	const cJSON *bg = cJSON_GetObjectItemCaseSensitive(x, "background");
	long long threads = warm_num(bg, "threads");
	long long dropped = warm_num(bg, "dropped_bytes");

	if (threads >= 0)
		res->session.background_threads =
		    threads < 1000000 ? (int)threads : 1000000;
	if (dropped > 0)
		res->session.background_dropped_bytes = dropped;
}

/*
 * The kernel's report on saving and loading its state (X's "state"),
 * checked and kept as JSON for the result; what it loaded, if anything,
 * becomes the session's state word.
 */
static void warm_take_state(const cJSON *x, struct runner_result *res)
{
	cJSON *st =
	    warm_state_take(cJSON_GetObjectItemCaseSensitive(x, "state"));
	const char *loaded = warm_state_loaded(st);

	if (!st)
		return;
	cJSON_free(res->state_json);
	res->state_json = cJSON_PrintUnformatted(st);
	if (loaded)
		snprintf(res->session.state, sizeof(res->session.state), "%s",
		         strcmp(loaded, "rewind") == 0 ? "rewound"
		                                       : "restored");
	cJSON_Delete(st);
}

/* Why the kernel died, for the state report, from what we did to it. */
static const char *warm_lost_reason(const struct warm_call *c,
                                    const char *agent_says)
{
	if (agent_says && strcmp(agent_says, "killed") == 0)
		return c->timed_out ? "timeout_kill"
		       : c->cancelled
		           ? (c->quota ? "quota_kill" : "cancel_kill")
		           : "output_limit_kill";
	return agent_says && agent_says[0] ? agent_says : "crash";
}

/*
 * The kernel died in a call: exit() is the way to start over, so its saved
 * state goes; after any other death the new kernel loads the last save.
 */
static void warm_exec_state_after_loss(struct warm_box *b, const char *why)
{
	int rc;

	if (!b->kernel)
		return;
	if (strcmp(why, "exit") != 0) {
		/*
		 * A state whose loading killed the interpreter (it filled the
		 * memory, say) is not loaded again by itself, or every run
		 * would die the same way: rewind_to an older run, or session
		 * "new", is the way on.
		 */
		b->restore_next = !b->restoring;
		if (b->restoring)
			log_info(
			    "warm session %.12s: the interpreter died (%s) "
			    "while loading its saved state; not loading it "
			    "again",
			    b->key, why);
		return;
	}
	b->restore_next = false;
	if (!b->hold)
		return;
	rc = warm_state_drop(workspace_dirfd(b->hold), b->lang);
	if (rc < 0)
		log_warnx("warm session %.12s: cannot drop the saved state "
		          "after exit(): %s",
		          b->key, strerror(-rc));
}

/* Reads the D frame into res; updates what b knows of its kernel. */
static void warm_take_d(struct warm_box *b, const struct warm_call *c,
                        struct runner_result *res)
{
	const cJSON *d = c->io.d;
	const cJSON *mem = cJSON_GetObjectItemCaseSensitive(d, "mem");
	const char *kernel =
	    cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(d, "kernel"));
	const char *why = cJSON_GetStringValue(
	    cJSON_GetObjectItemCaseSensitive(d, "kernel_reason"));
	long long code = warm_num(d, "exit_code");
	long long sig = warm_num(d, "signal");
	long long ooms = warm_num(mem, "oom_kills");

	/*
	 * Killed by a signal (an abort(), a segfault): 128 + its number, as a
	 * one-off run's box reports it and as a shell would.
	 */
	if (code < 0 && sig > 0 && sig < 128)
		code = 128 + sig;
	res->exit_code = code >= 0 && code < 256 ? (int)code : -1;
	res->cpu_ms = warm_num(d, "cpu_ms");
	res->session.memory_bytes = warm_num(mem, "usage");
	res->session.memory_peak_bytes = warm_num(mem, "peak");
	/* The box's high-water mark: the session's so far, this run's too. */
	res->memory_peak_bytes = res->session.memory_peak_bytes;
	res->session.memory_limit_bytes = warm_num(mem, "limit");
	if (ooms > b->oom_kills_seen) {
		res->child_oom = true;
		b->oom_kills_seen = ooms;
	}
	if (kernel && strcmp(kernel, "lost") == 0) {
		const char *r = warm_lost_reason(c, why);

		res->session.lost = true;
		snprintf(res->session.lost_reason,
		         sizeof(res->session.lost_reason), "%s", r);
		/* Told again with the next run, which gets a new kernel. */
		snprintf(b->lost, sizeof(b->lost), "%s", r);
		/*
		 * The new kernel's R may have come in the same read as the D
		 * (io.ready is cleared at the D): then it is ready already,
		 * and waiting for another R would end as "unresponsive".
		 */
		b->ready = c->io.ready;
		warm_exec_state_after_loss(b, r);
		if (strcmp(r, "oom") == 0) {
			/*
			 * What filled the memory may well outlive the
			 * interpreter (files in /tmp and /dev/shm are memory):
			 * the box goes, and the next run starts in a fresh one.
			 */
			res->oom_killed = true;
			warm_io_kill(b, "oom");
		}
	} else {
		b->ready = true;
	}
	if (c->io.x)
		warm_take_x(c->io.x, res);
	if (c->io.x)
		warm_take_background(c->io.x, res);
	if (c->io.x)
		warm_take_state(c->io.x, res);
}

/* The run's status from how it ended. */
static void warm_classify(const struct warm_box *b, const struct warm_call *c,
                          struct runner_result *res)
{
	res->timed_out = c->timed_out;
	/* Stopped from outside: it did not exit by itself. */
	if (c->timed_out || c->cancelled || c->io.limit)
		res->exit_code = -1;
	if (c->cancelled)
		res->status = RUNNER_CANCELLED;
	else if (c->io.limit)
		res->status = RUNNER_OUTPUT_LIMIT;
	else if (c->timed_out)
		res->status = RUNNER_TIMED_OUT;
	else if (!c->io.done && b->dead && strcmp(b->dead_reason, "oom") == 0) {
		res->oom_killed = true;
		res->status = RUNNER_OOM_KILLED;
	} else if (!c->io.done) {
		res->status = RUNNER_ERROR;
		if (!res->message[0])
			snprintf(res->message, sizeof(res->message),
			         "the sandbox of this conversation stopped "
			         "(%s%s%s); run again to get a fresh one",
			         b->dead_reason, b->dead_detail[0] ? ": " : "",
			         b->dead_detail);
	} else if (res->oom_killed || res->child_oom) {
		res->oom_killed = true;
		res->status = RUNNER_OOM_KILLED;
	} else if (res->exit_code == 0) {
		res->status = RUNNER_COMPLETED;
	} else {
		res->status = RUNNER_FAILED;
	}
	if (b->dead) {
		res->session.lost = true;
		snprintf(res->session.lost_reason,
		         sizeof(res->session.lost_reason), "%s",
		         b->dead_reason);
	}
}

/* Waits for a kernel that is restarting; 0 or -errno with a message. */
static int warm_exec_ready(struct warm_box *b, const struct runner_request *req,
                           struct runner_result *res)
{
	struct warm_io io = {.b = b};
	bool cancelled = false, oom;
	int rc;

	if (b->ready)
		return 0;
	rc = warm_io_pump(&io, mono_ms() + WARM_IO_START_MS,
	                  runner_cancel_fd(req->cancel), warm_io_until_ready,
	                  &cancelled);
	warm_io_finish(&io);
	if (rc == 1)
		return 0;
	if (cancelled) {
		res->status = RUNNER_CANCELLED;
		snprintf(res->message, sizeof(res->message),
		         "cancelled before the run started");
		return -ECANCELED;
	}
	if (rc == -EPIPE)
		warm_io_died(b, &oom);
	else
		warm_io_kill(b, rc == 0 ? "unresponsive" : "protocol");
	return -EIO;
}

/* A warm run's way out through the egress proxy (egress.h). */
struct warm_egress {
	struct egress_run *run;
	struct runner_request req; /* the run's, with the proxy variables */
	const char **env;
	bool joined;
};

/*
 * Opens the run's egress and puts the box on its network, for this run
 * only. 0 (we->req is the request to send), or -errno with res->message.
 */
static int warm_egress_begin(const struct warm_context *env, struct warm_box *b,
                             const struct runner_request *req,
                             struct warm_egress *we, struct runner_result *res)
{
	const char *const *pe;
	char msg[512];
	size_t n;
	int rc;

	if (!env->egress) {
		snprintf(res->message, sizeof(res->message),
		         "this server has no egress proxy for runs with "
		         "network; run without network");
		return -ENOTSUP;
	}
	rc = egress_run_begin(env->egress, req->egress, &we->run, msg,
	                      sizeof(msg));
	if (rc == 0) {
		rc =
		    box_join(b->box, egress_run_box(we->run), msg, sizeof(msg));
		we->joined = rc == 0;
	}
	if (rc < 0) {
		snprintf(res->message, sizeof(res->message),
		         "cannot give this run network: %.400s", msg);
		return rc;
	}
	pe = egress_run_env(we->run, &n);
	we->env = calloc(req->n_env + n, sizeof(*we->env));
	if (!we->env) {
		snprintf(res->message, sizeof(res->message), "out of memory");
		return -ENOMEM;
	}
	for (size_t i = 0; i < req->n_env; i++)
		we->env[i] = req->env[i];
	for (size_t i = 0; i < n; i++)
		we->env[req->n_env + i] = pe[i];
	we->req = *req;
	we->req.env = we->env;
	we->req.n_env = req->n_env + n;
	return 0;
}

/*
 * Takes the box off the egress network and keeps what the run did. A box
 * that cannot be taken off is ended: a later run without network must
 * have none.
 */
static void warm_egress_end(const struct warm_context *env, struct warm_box *b,
                            struct warm_egress *we, struct runner_result *res)
{
	char msg[512];

	if (we->joined &&
	    box_leave(b->box, egress_run_box(we->run), msg, sizeof(msg)) < 0) {
		log_warnx("warm box %s: cannot take it off its egress network "
		          "(%s); ending the session",
		          b->box->id, msg);
		warm_io_kill(b, "network");
	}
	if (we->run) {
		free(res->egress);
		res->egress = calloc(1, sizeof(*res->egress));
		egress_run_end(env->egress, we->run, res->egress);
	}
	free(we->env);
}

int warm_exec_run(const struct warm_context *env, struct warm_box *b,
                  const struct runner_request *req,
                  const struct catalog_image *img, struct runner_result *res)
{
	const struct config *cfg = env->cfg;
	struct capture cap_out, cap_err;
	struct warm_call c;
	struct warm_egress we;
	long long t_start, t_start_us;
	int ret = 0;

	memset(&we, 0, sizeof(we));

	memset(&c, 0, sizeof(c));
	memset(&cap_out, 0, sizeof(cap_out));
	memset(&cap_err, 0, sizeof(cap_err));
	res->session.warm = true;
	res->session.stateful = b->kernel;
	res->session.memory_bytes = res->session.memory_peak_bytes = -1;
	res->session.memory_limit_bytes = -1;
	res->cpu_ms = res->memory_peak_bytes = -1;
	res->status = RUNNER_ERROR;
	snprintf(res->container, sizeof(res->container), "%s", b->box->id);
	if (b->lost[0] && strcmp(res->session.state, "continued") == 0) {
		snprintf(res->session.state, sizeof(res->session.state),
		         "restarted");
		snprintf(res->session.reason, sizeof(res->session.reason), "%s",
		         b->lost);
	}
	b->lost[0] = '\0';
	if (capture_init_run(&cap_out, &cap_err, cfg->output_inline_bytes,
	                     cfg->output_max_bytes, req->stdout_fd,
	                     req->stderr_fd, req->output_file,
	                     req->output_file_arg) < 0) {
		snprintf(res->message, sizeof(res->message), "out of memory");
		goto out;
	}
	if (warm_exec_ready(b, req, res) < 0) {
		ret = res->status == RUNNER_CANCELLED ? 0 : -EAGAIN;
		goto classify_dead;
	}
	c.id = b->next_id++;
	c.io.b = b;
	c.io.req = req;
	c.io.exec_id = c.id;
	c.io.out = &cap_out;
	c.io.err = &cap_err;
	c.io.max_total = cfg->output_max_bytes;
	if (!warm_exec_usable(b) || warm_exec_files(b, req, img, res->message,
	                                            sizeof(res->message)) < 0) {
		if (b->dead) {
			/* Nothing ran: the caller tries a fresh box. */
			res->message[0] = '\0';
			ret = -EAGAIN;
			goto classify_dead;
		}
		/* Nothing ran and the box is fine (the host's disk is full,
		 * say): the session stays. */
		res->status = RUNNER_ERROR;
		goto out;
	}
	if (req->egress) {
		if (warm_egress_begin(env, b, req, &we, res) < 0) {
			res->status = RUNNER_ERROR;
			goto out;
		}
		c.io.req = req = &we.req;
	}
	if (warm_exec_send(b, req, img, cfg, c.id, res->message,
	                   sizeof(res->message)) < 0) {
		/* Nothing ran: the caller may try a fresh box. */
		warm_io_kill(b, "unresponsive");
		ret = -EAGAIN;
		goto classify_dead;
	}
	b->ready = false;
	b->restore_next = false;
	b->calls++;
	t_start_us = mono_us();
	t_start = t_start_us / 1000;
	if (req->on_event)
		req->on_event(req->event_arg, RUNNER_EVENT_STARTED, 0);
	warm_exec_drive(env, b, req, &c,
	                t_start + (long long)res->timeout_s * 1000);
	res->duration_us = mono_us() - t_start_us;
	res->duration_ms = res->duration_us / 1000;
	if (c.io.done)
		warm_take_d(b, &c, res);
	warm_classify(b, &c, res);
	goto out;
classify_dead:
	if (res->status != RUNNER_CANCELLED)
		warm_classify(b, &c, res);
out:
	if (req->egress)
		warm_egress_end(env, b, &we, res);
	/* A run's stdin is its own: the next run of the box must not see it. */
	if (req->stdin_data)
		warm_drop_file(b, "stdin");
	if (req->inputs_json)
		warm_drop_file(b, ONEOFF_INPUTS_FILE);
	warm_io_finish(&c.io);
	runner_output_collect(&cap_out, &cap_err, res);
	return ret;
}
