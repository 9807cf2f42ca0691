/* SPDX-License-Identifier: MIT */
/*
 * runner_latency: the time of one run (request to result) of a hello world
 * through runner_run, next to `docker run --rm -i` of the same image with
 * the same limits, seccomp profile and mounts, alternating the two so both
 * see the same engine state. Prints p50/p95/mean in ms and the ratio of
 * medians; never fails on timing.
 *
 *   runner_latency [language [runs]]     (default: python 20)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "backend/seccomp.h"
#include "config/config.h"
#include "runner.h"
#include "util/log.h"
#include "util/mono.h"

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static void report(const char *name, double *v, int n)
{
	double sum = 0;

	for (int i = 0; i < n; i++)
		sum += v[i];
	qsort(v, (size_t)n, sizeof(*v), cmp);
	printf("%-22s p50 %7.1f ms  p95 %7.1f ms  mean %7.1f ms  (n=%d)\n",
	       name, v[n / 2], v[(n * 95 + 99) / 100 - 1], sum / n, n);
}

int main(int argc, char **argv)
{
	const char *lang = argc > 1 ? argv[1] : "python";
	int n = argc > 2 ? (int)strtol(argv[2], NULL, 10) : 20;
	static char root[] = "/tmp/mcpsd-lat-XXXXXX";
	const struct catalog_image *img;
	struct catalog *cat;
	struct runner *r = NULL;
	struct config cfg;
	char err[512], ws[300], code_dir[300], code_file[400], prof[300],
	    cmd[4096];
	const char *code;
	double *mine, *cli;
	char *opt = NULL;
	FILE *f;

	if (n < 2 || n > 1000 || !mkdtemp(root))
		return 2;
	mine = calloc((size_t)n, sizeof(*mine));
	cli = calloc((size_t)n, sizeof(*cli));
	snprintf(ws, sizeof(ws), "%s/ws", root);
	snprintf(code_dir, sizeof(code_dir), "%s/code", root);
	if (!mine || !cli || mkdir(ws, 0755) || chown(ws, 64321, 64321) ||
	    mkdir(code_dir, 0755))
		return 2;
	setenv("SANDBOX_ROOT", root, 1);
	setenv("MCP_AUTH", "none", 1);
	setenv("MCP_INSTANCE_NAME", "latency", 1);
	log_set_level(LOG_LEVEL_WARN);
	memset(&cfg, 0, sizeof(cfg));
	if (config_load(&cfg, NULL, err, sizeof(err)) < 0 ||
	    runner_create(&cfg, &r, err, sizeof(err)) < 0) {
		fprintf(stderr, "setup: %s\n", err);
		return 2;
	}
	cat = runner_catalog_get(r);
	img = catalog_find(cat, lang);
	if (!img) {
		fprintf(stderr, "no runner for %s\n", lang);
		return 2;
	}
	code = strcmp(img->language, "python") == 0 ? "print('hello')\n"
	       : strcmp(img->language, "typescript") == 0
	           ? "console.log('hello')\n"
	           : "echo hello\n";
	/* The CLI side: the same code file, profile and limits. */
	snprintf(code_file, sizeof(code_file), "%s/%s", code_dir,
	         img->filename);
	snprintf(prof, sizeof(prof), "%s/seccomp.json", root);
	f = fopen(code_file, "w");
	if (!f || fputs(code, f) < 0 || fclose(f) != 0 ||
	    seccomp_security_opt(&opt) < 0 || !(f = fopen(prof, "w")) ||
	    fputs(opt + 8, f) < 0 || fclose(f) != 0)
		return 2;
	{
		int off = snprintf(
		    cmd, sizeof(cmd),
		    "docker run --rm -i --network none --memory %um "
		    "--memory-swap %um --cpus %g --pids-limit %u --read-only "
		    "--tmpfs /tmp:rw,exec,nosuid,nodev,size=%um,mode=1777 "
		    "--shm-size %um --user %u:%u --cap-drop ALL --security-opt "
		    "no-new-privileges:true --security-opt seccomp=%s --init "
		    "--ipc private --ulimit nofile=%u:%u --ulimit "
		    "fsize=%llu:%llu --ulimit core=0:0 --log-driver none -e "
		    "HOME=/tmp -e LANG=C.UTF-8 -w /data --mount "
		    "type=bind,src=%s,dst=/data --mount "
		    "type=bind,src=%s,dst=/sandbox,readonly %s",
		    cfg.memory_mb, cfg.memory_mb, cfg.cpus, cfg.pids_limit,
		    cfg.tmp_mb, cfg.tmp_mb, cfg.sandbox_uid, cfg.sandbox_gid,
		    prof, cfg.nofile, cfg.nofile,
		    (unsigned long long)cfg.fsize_mb << 20,
		    (unsigned long long)cfg.fsize_mb << 20, ws, code_dir,
		    img->image_id);

		for (size_t i = 0;
		     i < img->n_command && off > 0 && (size_t)off < sizeof(cmd);
		     i++)
			off += snprintf(cmd + off, sizeof(cmd) - (size_t)off,
			                " '%s'", img->command[i]);
		snprintf(cmd + off, sizeof(cmd) - (size_t)off,
		         " </dev/null >/dev/null");
	}
	printf("# %s (%s), %d runs each, alternating\n", img->language,
	       img->image, n);
	for (int i = -2; i < n; i++) { /* two warm-up rounds */
		struct runner_request q;
		struct runner_result res;
		double t0;
		int rc;

		memset(&q, 0, sizeof(q));
		q.language = lang;
		q.code = code;
		q.code_len = strlen(code);
		q.workspace_host_path = ws;
		q.stdout_fd = q.stderr_fd = -1;
		t0 = mono_ms();
		rc = runner_run(r, &q, &res);
		if (rc < 0 || res.status != RUNNER_COMPLETED) {
			fprintf(stderr, "run failed: %s\n", res.message);
			return 1;
		}
		if (i >= 0)
			mine[i] = mono_ms() - t0;
		runner_result_finish(&res);
		usleep(200 * 1000); /* let the background removal finish */
		t0 = mono_ms();
		if (system(cmd) != 0) {
			fprintf(stderr, "docker run failed: %s\n", cmd);
			return 1;
		}
		if (i >= 0)
			cli[i] = mono_ms() - t0;
		usleep(200 * 1000);
	}
	catalog_put(cat);
	report("runner_run", mine, n);
	report("docker run --rm", cli, n);
	printf("ratio of medians (runner / CLI): %.2f\n",
	       mine[n / 2] / cli[n / 2]);
	runner_destroy(r);
	config_finish(&cfg);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	if (system(cmd) != 0)
		return 1;
	free(opt);
	free(mine);
	free(cli);
	return 0;
}
