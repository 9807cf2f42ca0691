/* SPDX-License-Identifier: MIT */
/*
 * mcp-sandboxd: parses flags and the configuration, wires the modules
 * together, and waits for a signal. SIGTERM and SIGINT drain: new tool calls
 * are refused, running ones finish (or reach their deadline), then the
 * daemon exits.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "audit/audit.h"
#include "audit_cli.h"
#include "audit/audit_http.h"
#include "backend/backend.h"
#include "backend/seccomp.h"
#include "build_config.h"
#include "config/config.h"
#include "http/http.h"
#include "mcp/mcp.h"
#include "mcp/mcp_stdio.h"
#include "oauth/oauth.h"
#include "oauth/oauth_http.h"
#include "run/budget.h"
#include "run/lease.h"
#include "runner.h"
#include "schema.h"
#include "store/store.h"
#include "tasks/tasks.h"
#include "tools/audit/tools_audit.h"
#include "tools/notebook/tools_notebook.h"
#include "tools/tools_files.h"
#include "tools/tools_run.h"
#include "util/cron.h"
#include "util/log.h"
#include "util/stats.h"
#include "workspace/files.h"
#include "workspace/workspace.h"

#if MCPSD_FIXTURES
#include "fixtures.h"
#endif

#define EXIT_CONFIG 2

/* Discovery found, lost or changed a runner: clients re-list tools. */
static atomic_bool stdin_closed;

/* --stdio: the client closed standard input; stop as on SIGTERM. */
static void stdin_ended(void *arg)
{
	(void)arg;
	atomic_store(&stdin_closed, true);
	kill(getpid(), SIGTERM);
}

static void usage(FILE *out)
{
	fprintf(
	    out,
	    "Usage: mcp-sandboxd [--env-file PATH] [--check-config] [--stdio]\n"
	    "       mcp-sandboxd --print-reference markdown|env|readme\n"
	    "       mcp-sandboxd [--env-file PATH] audit verify\n"
	    "       mcp-sandboxd [--env-file PATH] audit export [--tenant T] "
	    "[--conversation C]\n"
	    "       mcp-sandboxd --help | --version\n"
	    "\n"
	    "A remote MCP server that runs code in Docker sandboxes: Python, "
	    "R,\n"
	    "TypeScript/JavaScript, Bash, C, C++, Go, Rust, Ruby and PHP, one\n"
	    "runner image each (runners/build.sh; list_runners shows those\n"
	    "installed). Settings come from the environment and from a .env\n"
	    "file in the working directory (the environment wins).\n"
	    "\n"
	    "Options:\n"
	    "  --env-file PATH   read settings from PATH instead of ./.env\n"
	    "  --check-config    validate, print the effective settings\n"
	    "                    (secrets masked) and exit\n"
	    "  --stdio           also serve one local MCP client on standard\n"
	    "                    input and output (newline-delimited "
	    "JSON-RPC)\n"
	    "                    as the tenant STDIO_TENANT; exits when\n"
	    "                    standard input ends. Logs go to stderr.\n"
	    "  --print-seccomp-profile\n"
	    "                    print the seccomp profile of every run (for\n"
	    "                    the daemon.json of Swarm sandbox nodes)\n"
	    "  --print-reference FORMAT\n"
	    "                    print the settings reference generated from\n"
	    "                    the table below: markdown\n"
	    "                    (docs/configuration.md), env (.env.example)\n"
	    "                    or readme (the README's day-one table)\n"
	    "  audit verify      check the audit trail's hash chain in the\n"
	    "                    store; exit 0 intact, 1 broken\n"
	    "  audit export      print the audit trail as JSON lines\n"
	    "  --help            show this help\n"
	    "  --version         print the version\n"
	    "\n"
	    "Settings (docs/configuration.md has the whole reference):\n");
	config_print_help(out);
}

/* The seccomp profile as a file for dockerd's "seccomp-profile". */
static int print_seccomp(void)
{
	cJSON *p = seccomp_profile_build();
	char *txt = p ? cJSON_Print(p) : NULL;
	int rc = txt && puts(txt) >= 0 && fflush(stdout) == 0 ? 0 : 1;

	cJSON_free(txt);
	cJSON_Delete(p);
	return rc;
}

/* Everything the daemon runs, created in order and freed in reverse. */
struct daemon {
	struct config cfg;
	struct mcp_server *mcp;
	struct tasks *tasks;
	struct http_server *http;
	struct workspace_mgr *wm;
	struct runner *runner;
	struct cron *cron;
	struct stats *stats;
	struct store *store;
	struct budget *budget;
	struct audit *audit;
	struct oauth *oauth;
	struct mcp_stdio *sio;
	struct lease *lease; /* replicas on their own engines, or NULL */
};

/* No core dumps or ptrace of the daemon; sandboxes die before it. */
static void harden_process(void)
{
	FILE *f;
	bool ok;

	/*
	 * Not dumpable: no core file with tokens in it, and a process of the
	 * same uid (an escaped sandbox in the non-root deployment) cannot
	 * ptrace this one or read its /proc environ and memory.
	 */
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0)
		log_warn("cannot make the process non-dumpable");
	/*
	 * Sandboxes start with the highest OOM score and may lower theirs to
	 * 0; under memory pressure the kernel must still pick them before
	 * the daemon. Lowering needs CAP_SYS_RESOURCE: best effort.
	 */
	f = fopen("/proc/self/oom_score_adj", "we");
	ok = f && fputs("-500", f) >= 0;
	if (f && fclose(f) != 0)
		ok = false;
	if (!ok)
		log_info("cannot lower this daemon's OOM score (needs "
		         "CAP_SYS_RESOURCE); sandboxes may be picked after it "
		         "under memory pressure");
}

/*
 * Replicas that each drive their own node's engine (a backend without
 * BACKEND_CAN_REPLICAS): a conversation's runs are kept on one replica at
 * a time by leases in the shared store (lib/run/lease.h).
 */
static int daemon_leases(struct daemon *d)
{
	const struct config *cfg = &d->cfg;

	if (!cfg->replica_name[0] ||
	    backend_has(runner_backend(d->runner), BACKEND_CAN_REPLICAS))
		return 0;
	if (lease_create(d->store, cfg->replica_name,
	                 (long long)cfg->conversation_lease_s * 1000,
	                 &d->lease) < 0) {
		log_errorx("out of memory");
		return -1;
	}
	lease_set_holder(d->lease, runner_lease_holds, runner_lease_hand_off,
	                 d->runner);
	lease_set_stats(d->lease, d->stats);
	if (lease_set_fence(d->lease, runner_cancel_lease) < 0) {
		log_errorx("cannot start the conversation leases' fence "
		           "thread");
		return -1;
	}
	tools_run_set_lease(d->lease);
	if (lease_renew(d->lease, lease_now_ms()) < 0)
		log_warnx("renewing this replica's conversation leases failed; "
		          "its job tries again every second");
	log_info("replica %s runs conversations on its own engine; a "
	         "conversation's lease in the store keeps it on one replica "
	         "at a time (MCP_CONVERSATION_LEASE_SECONDS=%u)",
	         cfg->replica_name, cfg->conversation_lease_s);
	return 0;
}

/* The MCP core, workspaces, the store and what lives in it, the runner. */
static int daemon_core(struct daemon *d, char *err, size_t errlen)
{
	const struct config *cfg = &d->cfg;

	d->mcp = mcp_server_create(cfg);
	if (!d->mcp) {
		log_errorx("cannot create the MCP server: out of memory");
		return -1;
	}
	mcp_server_set_instructions(
	    d->mcp, "Runs code in isolated sandboxes. A conversationId names "
	            "one chat and must be unique to it: leave it out on the "
	            "chat's first call and pass the id the result returns on "
	            "every later call. Files written to /data persist between "
	            "calls and come back as links.");
	/* 2026-07-28 clients send it as a header: route by conversation. */
	mcp_server_add_header_param(d->mcp, "conversationId",
	                            "Conversation-Id");
	if (workspace_mgr_create(cfg, &d->wm, err, errlen) < 0) {
		log_errorx("workspaces: %s", err);
		return -1;
	}
	/* After the workspaces: SANDBOX_ROOT, the store's home, exists. */
	if (schema_open(*cfg->store_url ? cfg->store_url : cfg->store_path,
	                &d->store, err, errlen) < 0) {
		log_errorx("store: %s", err);
		return -1;
	}
	/* Task records live in the store: results outlast a restart. */
	if (tasks_open(cfg, d->store, &d->tasks, err, errlen) < 0) {
		log_errorx("tasks: %s", err);
		return -1;
	}
	mcp_server_set_tasks(d->mcp, d->tasks);
	/* Seen by the other replicas before its first task exists. */
	if (cfg->replica_name[0])
		(void)tasks_job_replica(d->tasks, LLONG_MAX);
	if (cfg->oauth &&
	    oauth_create(cfg, d->store, &d->oauth, err, errlen) < 0) {
		log_errorx("oauth: %s", err);
		return -1;
	}
	if (runner_create(cfg, &d->runner, err, errlen) < 0) {
		log_errorx("runner: %s", err);
		return -1;
	}
	d->stats = stats_create();
	if (!d->stats) {
		log_errorx("out of memory");
		return -1;
	}
	runner_set_stats(d->runner, d->stats);
	if (d->oauth)
		oauth_set_stats(d->oauth, d->stats);
	/* Usage counters live in the store: a restart does not reset them. */
	if (budget_create(d->store, cfg->tenant_cpu_s, cfg->tenant_cpu_window_s,
	                  &d->budget) < 0) {
		log_errorx("out of memory");
		return -1;
	}
	runner_set_budget(d->runner, d->budget);
	/* Usage and the audit trail live in the store too. */
	if (audit_create(d->store, cfg->audit_keep_code, &d->audit) < 0) {
		log_errorx("out of memory");
		return -1;
	}
	audit_set_retention(d->audit, cfg->audit_retention_days,
	                    cfg->usage_retention_days);
	tools_audit_register(d->mcp, d->audit);
	tools_run_register(d->mcp, d->runner, d->wm);
	if (daemon_leases(d) < 0)
		return -1;
	tools_files_register(d->mcp, d->wm);
#if MCPSD_FIXTURES
	fixtures_register(d->mcp);
	log_warnx("conformance fixtures are compiled in: this is a test "
	          "build");
#endif
	return 0;
}

/* The housekeeping loops and their jobs; which lane is which: cron.h. */
static int daemon_jobs(struct daemon *d)
{
	const struct config *cfg = &d->cfg;
	struct cron *c = cron_create(CRON_BUDGET_MS);
	bool replica = cfg->replica_name[0] != '\0';

	d->cron = c;
	if (!c) {
		log_errorx("out of memory");
		return -1;
	}
	cron_set_stats(c, d->stats);
	if ((replica &&
	     (cron_add(c, CRON_PROMPT, "task-cancels",
	               MCP_TASK_CANCELS_INTERVAL_MS, mcp_job_task_cancels,
	               d->mcp) < 0 ||
	      cron_add(c, CRON_PROMPT, "replica", TASKS_LEASE_INTERVAL_MS(cfg),
	               tasks_job_replica, d->tasks) < 0)) ||
	    cron_add(c, CRON_PROMPT, "sessions", MCP_SWEEP_INTERVAL_MS,
	             mcp_job_sweep, d->mcp) < 0 ||
	    cron_add(c, CRON_SLOW, "discovery",
	             cfg->discovery_interval_s * 1000u, runner_job_discover,
	             d->runner) < 0 ||
	    cron_add(c, CRON_SLOW, "reaper", cfg->reap_interval_s * 1000u,
	             runner_job_reap, d->runner) < 0 ||
	    cron_add(c, CRON_SLOW, "runs", cfg->reap_interval_s * 1000u,
	             runner_job_runs, d->runner) < 0 ||
	    cron_add(c, CRON_SLOW, "workspaces",
	             WORKSPACE_SWEEP_INTERVAL_MS(cfg), workspace_job_sweep,
	             d->wm) < 0 ||
	    cron_add(c, CRON_SLOW, "warm", 1000, runner_job_warm, d->runner) <
	        0 ||
	    cron_add(c, CRON_WRITES, "spare-image", WORKSPACE_SPARE_INTERVAL_MS,
	             workspace_job_spare, d->wm) < 0 ||
	    cron_add(c, CRON_WRITES, "notebook",
	             WORKSPACE_DEFER_JOB_MS(TOOLS_NOTEBOOK_REWRITE_MS),
	             workspace_job_deferred, d->wm) < 0 ||
	    (d->lease &&
	     (cron_add(c, CRON_PROMPT, "lease-renewal",
	               LEASE_RENEW_INTERVAL_MS(cfg->conversation_lease_s),
	               lease_job_renew, d->lease) < 0 ||
	      cron_add(c, CRON_SLOW, "leases", 1000, lease_job, d->lease) <
	          0)) ||
	    cron_add(c, CRON_SLOW, "tasks", TASKS_SWEEP_INTERVAL_MS,
	             tasks_job_sweep, d->tasks) < 0 ||
	    (d->oauth && cron_add(c, CRON_SLOW, "oauth", OAUTH_PURGE_MS,
	                          oauth_job_purge, d->oauth) < 0) ||
	    cron_add(c, CRON_SLOW, "audit-retention",
	             AUDIT_RETENTION_INTERVAL_MS, audit_job_retention,
	             d->audit) < 0 ||
	    cron_start(c) < 0) {
		log_errorx("cannot start the housekeeping loops");
		return -1;
	}
	return 0;
}

/* The HTTP front, then (with --stdio) the stdio transport. */
static int daemon_serve(struct daemon *d, bool use_stdio, char *err,
                        size_t errlen)
{
	const struct config *cfg = &d->cfg;

	if (http_server_bind(cfg, d->mcp, &d->http, err, errlen) < 0 ||
	    (d->oauth &&
	     oauth_http_register(d->oauth, d->http, err, errlen) < 0) ||
	    audit_http_register(d->http, cfg, d->store, err, errlen) < 0) {
		log_errorx("%s", err);
		return -1;
	}
	http_server_set_files(d->http, files_http_get, d->wm);
	http_server_add_health(d->http, runner_health, d->runner);
	http_server_add_health(d->http, workspace_mgr_health, d->wm);
	http_server_add_health(d->http, store_health, d->store);
	http_server_set_stats(d->http, d->stats);
	if (http_server_start(d->http, err, errlen) < 0) {
		log_errorx("%s", err);
		return -1;
	}
	log_info("mcp-sandboxd %s listening on %s:%u; MCP endpoint %s/mcp, "
	         "%zu token(s) configured, OAuth %s",
	         MCPSD_VERSION, cfg->listen_host[0] ? cfg->listen_host : "*",
	         http_server_port(d->http), cfg->public_base_url, cfg->n_tokens,
	         d->oauth ? "on" : "off");
	if (use_stdio) {
		struct mcp_stdio_opts so = {
		    .tenant = cfg->stdio_tenant,
		    .max_line = cfg->max_body_bytes,
		    .in_fd = STDIN_FILENO,
		    .out_fd = STDOUT_FILENO,
		    .on_eof = stdin_ended,
		};

		if (mcp_stdio_start(d->mcp, &so, &d->sio, err, errlen) < 0) {
			log_errorx("stdio: %s", err);
			return -1;
		}
		log_info("serving MCP on standard input and output as tenant "
		         "'%s'",
		         cfg->stdio_tenant);
	}
	return 0;
}

/*
 * A replica that stops (a drained node: SIGTERM within the stack's
 * stop_grace_period) hands its conversations over: each one's last state
 * save is written, its boxes end and its lease is released, so the next
 * call restores it on another replica at once instead of after the lease.
 */
static void daemon_hand_over(struct daemon *d)
{
	int n;

	if (!d->lease)
		return;
	n = lease_release_all(d->lease);
	if (n < 0)
		log_warnx("releasing this replica's conversations failed (%s); "
		          "other replicas take them over after "
		          "MCP_CONVERSATION_LEASE_SECONDS=%u",
		          strerror(-n), d->cfg.conversation_lease_s);
	else
		log_info("%d conversation(s) handed over for other replicas",
		         n);
}

/* After SIGTERM or SIGINT: running calls finish, their answers leave. */
static void daemon_drain(struct daemon *d, int sig)
{
	unsigned left;

	if (atomic_load(&stdin_closed))
		log_info("standard input ended; stopping");
	log_info("received %s; draining (new calls are refused, running "
	         "ones may take up to %u s)",
	         sig == SIGTERM ? "SIGTERM" : "SIGINT", d->cfg.max_timeout_s);
	left = mcp_server_drain(d->mcp, (d->cfg.max_timeout_s + 15) * 1000);
	if (left)
		log_warnx("%u call(s) still running at shutdown", left);
	left = runner_drain(d->runner, 5000);
	if (left)
		log_warnx("%u run(s) still running at shutdown", left);
	/* The notebooks' copies left for later, before anyone else's turn. */
	workspace_mgr_flush_deferred(d->wm, 5000);
	daemon_hand_over(d);
	/*
	 * Ending the sessions ends their event streams; their last events
	 * (the results of the calls that just finished) are still sent.
	 * Then wait for every answer to leave before closing connections.
	 */
	mcp_server_close_sessions(d->mcp);
	mcp_stdio_stop(d->sio, 5000);
	d->sio = NULL;
	if (http_server_wait_idle(d->http, 5000))
		log_warnx("some responses were still being sent at shutdown");
}

static void daemon_free(struct daemon *d)
{
	mcp_stdio_stop(d->sio, 0);
	cron_destroy(d->cron);
	http_server_destroy(d->http);
	mcp_server_destroy(d->mcp);
	tasks_close(d->tasks);
	runner_destroy(d->runner);
	lease_destroy(d->lease);
	budget_destroy(d->budget);
	audit_destroy(d->audit);
	oauth_destroy(d->oauth);
	store_close(d->store);
	workspace_mgr_destroy(d->wm);
	stats_destroy(d->stats);
	log_info("stopped");
	config_finish(&d->cfg);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"help", no_argument, NULL, 'h'},
	    {"version", no_argument, NULL, 'V'},
	    {"check-config", no_argument, NULL, 'c'},
	    {"env-file", required_argument, NULL, 'e'},
	    {"stdio", no_argument, NULL, 's'},
	    {"print-seccomp-profile", no_argument, NULL, 'p'},
	    {"print-reference", required_argument, NULL, 'r'},
	    {NULL, 0, NULL, 0},
	};
	static struct daemon d;
	const char *env_file = ".env";
	bool check = false, use_stdio = false;
	char err[1024];
	sigset_t sigs;
	int sig = 0, opt, rc = 0;

	while ((opt = getopt_long(argc, argv, "+hVce:", opts, NULL)) != -1) {
		switch (opt) {
		case 'h':
			usage(stdout);
			return 0;
		case 'V':
			printf("mcp-sandboxd %s\n", MCPSD_VERSION);
			return 0;
		case 'c':
			check = true;
			break;
		case 'e':
			env_file = optarg;
			break;
		case 's':
			use_stdio = true;
			break;
		case 'p':
			return print_seccomp();
		case 'r':
			if (config_print_reference(optarg, stdout, err,
			                           sizeof(err)) < 0) {
				fprintf(stderr, "mcp-sandboxd: %s\n", err);
				return EXIT_CONFIG;
			}
			return 0;
		default:
			usage(stderr);
			return EXIT_CONFIG;
		}
	}
	if (optind < argc && strcmp(argv[optind], "audit") != 0) {
		fprintf(stderr, "mcp-sandboxd: unexpected argument '%s'\n",
		        argv[optind]);
		usage(stderr);
		return EXIT_CONFIG;
	}

	/* The table of settings, then the backend's own (its folder's). */
	if (config_load(&d.cfg, env_file, err, sizeof(err)) < 0 ||
	    backend_configure(&d.cfg, err, sizeof(err)) < 0) {
		fprintf(stderr, "mcp-sandboxd: configuration error: %s\n", err);
		config_finish(&d.cfg);
		return EXIT_CONFIG;
	}
	log_set_level(d.cfg.log_level);
	if (optind < argc) {
		rc = audit_cli(&d.cfg, argc - optind - 1, argv + optind + 1,
		               stdout, stderr);
		config_finish(&d.cfg);
		return rc;
	}
	if (check) {
		config_print(&d.cfg, stdout);
		config_finish(&d.cfg);
		return 0;
	}
	harden_process();

	/* Signals go to this thread only, through sigwait below. */
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);

	if (d.cfg.auth_none)
		log_warnx("AUTHENTICATION IS DISABLED (MCP_AUTH=none): anyone "
		          "who reaches %s:%u can run code. Listening on "
		          "loopback only. Never use this in production.",
		          d.cfg.listen_host, d.cfg.listen_port);
	if (d.cfg.file_secret_ephemeral)
		log_warnx("FILE_SECRET is not set: workspace names and file "
		          "links change at every restart");

	if (daemon_core(&d, err, sizeof(err)) < 0 || daemon_jobs(&d) < 0 ||
	    daemon_serve(&d, use_stdio, err, sizeof(err)) < 0) {
		rc = 1;
	} else {
		while (sigwait(&sigs, &sig) != 0)
			;
		daemon_drain(&d, sig);
	}
	daemon_free(&d);
	return rc;
}
