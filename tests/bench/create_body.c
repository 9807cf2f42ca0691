/* SPDX-License-Identifier: MIT */
/*
 * create_body: prints the JSON body of POST /containers/create that the
 * daemon would send for one run, so the benchmark can give `docker run
 * --rm` exactly the same image, command, limits, seccomp profile and
 * mounts. Settings come from the environment (as the daemon's do); the
 * runner images from the GET /images/json answer read on standard input.
 * Pure: no Docker call, no thread.
 *
 *   curl -s --unix-socket /var/run/docker.sock \
 *     'http://d/images/json?filters={"label":["sandbox.runner=true"]}' |
 *   create_body LANGUAGE WORKSPACE_DIR CODE_DIR
 *
 * Also writes the code file name (the image's sandbox.filename) to
 * standard error as "filename=<name>".
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "backend/backend.h"
#include "backend/docker/backend_docker.h"
#include "backend/seccomp.h"
#include "config/config.h"
#include "run/catalog.h"
#include "run/oneoff.h"
#include "runner.h"

static char *read_all(FILE *f)
{
	size_t len = 0, cap = 1 << 16;
	char *b = malloc(cap);

	while (b) {
		size_t n = fread(b + len, 1, cap - len - 1, f);

		len += n;
		if (n == 0)
			break;
		if (cap - len < 2) {
			char *nb =
			    cap < (64u << 20) ? realloc(b, cap * 2) : NULL;

			if (!nb) {
				free(b);
				return NULL;
			}
			b = nb;
			cap *= 2;
		}
	}
	if (b)
		b[len] = '\0';
	return b;
}

int main(int argc, char **argv)
{
	struct config cfg;
	struct catalog *cat = NULL;
	const struct catalog_image *img;
	struct oneoff_spec spec;
	struct oneoff_spec_store st;
	struct box_spec bs;
	cJSON *summaries, *body = NULL;
	char err[512], *in, *opt = NULL, *txt;
	int rc = 1;

	if (argc != 4) {
		fprintf(stderr,
		        "usage: create_body LANGUAGE WORKSPACE_DIR CODE_DIR "
		        "< images.json\n");
		return 2;
	}
	memset(&cfg, 0, sizeof(cfg));
	if (config_load(&cfg, NULL, err, sizeof(err)) < 0) {
		fprintf(stderr, "create_body: %s\n", err);
		config_finish(&cfg);
		return 2;
	}
	in = read_all(stdin);
	summaries = in ? cJSON_Parse(in) : NULL;
	free(in);
	if (!summaries || catalog_build(summaries, &cat) < 0) {
		fprintf(stderr, "create_body: cannot read the image list\n");
		goto out;
	}
	img = catalog_find(cat, argv[1]);
	if (!img) {
		fprintf(stderr, "create_body: no runner image for %s\n",
		        argv[1]);
		goto out;
	}
	if (seccomp_security_opt(&opt) < 0)
		goto out;
	memset(&spec, 0, sizeof(spec));
	spec.image = img;
	spec.run_id = "0000000000000000";
	spec.code_host_dir = argv[3];
	spec.workspace_host_path = argv[2];
	spec.timeout_s = cfg.timeout_s;
	spec.deadline = time(NULL) + 3600;
	/* What the Docker backend makes of the run layer's box spec. */
	if (oneoff_box_spec(&cfg, &spec, &bs, &st) == 0) {
		body = backend_docker_create_body(&cfg, opt, "bench-cli", "0",
		                                  &bs);
		oneoff_spec_store_finish(&st);
	}
	txt = body ? cJSON_PrintUnformatted(body) : NULL;
	if (txt) {
		puts(txt);
		fprintf(stderr, "filename=%s\n", img->filename);
		rc = 0;
	}
	cJSON_free(txt);
	cJSON_Delete(body);
out:
	free(opt);
	if (cat)
		catalog_put(cat);
	cJSON_Delete(summaries);
	config_finish(&cfg);
	return rc;
}
