/* SPDX-License-Identifier: MIT */
/*
 * config_load: reading a configuration, in order: the .env file (kept raw
 * in cfg for config_raw), the table's rows (config.c), then the settings
 * that depend on others (config_derive.c). It sits above both so that
 * calls go one way: config_load -> config_derive -> config. Called once at
 * start-up, on one thread.
 */
#include "config/config_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/errmsg.h"
#include "util/log.h"

/* Parses one .env value: trims, strips matching quotes, drops comments. */
static char *dotenv_value(char *v)
{
	size_t n;

	while (*v == ' ' || *v == '\t')
		v++;
	n = strlen(v);
	while (n && (v[n - 1] == ' ' || v[n - 1] == '\t' || v[n - 1] == '\r'))
		v[--n] = '\0';
	if (n >= 2 && (v[0] == '"' || v[0] == '\'') && v[n - 1] == v[0]) {
		v[n - 1] = '\0';
		return v + 1;
	}
	/* An unquoted value ends at " #", as in shells. */
	for (char *p = v; *p; p++) {
		if (*p == '#' && (p == v || p[-1] == ' ' || p[-1] == '\t')) {
			*p = '\0';
			n = strlen(v);
			while (n && (v[n - 1] == ' ' || v[n - 1] == '\t'))
				v[--n] = '\0';
			break;
		}
	}
	return v;
}

static int dotenv_read(struct config *cfg, const char *path, char *err,
                       size_t errlen)
{
	FILE *f;
	char line[8192];
	size_t n = 0, cap = 0;
	char **pairs = NULL;
	int lineno = 0, r = 0;

	if (!path)
		return 0;
	f = fopen(path, "re");
	if (!f)
		return 0; /* an absent .env is normal */
	while (fgets(line, sizeof(line), f)) {
		char *k = line, *eq, *v;

		lineno++;
		if (!strchr(line, '\n') && !feof(f)) {
			r = errmsg_fail(
			    -EINVAL, err, errlen,
			    "%s:%d: line longer than %zu bytes; shorten "
			    "it",
			    path, lineno, sizeof(line) - 2);
			goto out;
		}
		line[strcspn(line, "\n")] = '\0';
		while (*k == ' ' || *k == '\t')
			k++;
		if (*k == '\0' || *k == '#')
			continue;
		if (strncmp(k, "export ", 7) == 0)
			k += 7;
		eq = strchr(k, '=');
		if (!eq) {
			r = errmsg_fail(-EINVAL, err, errlen,
			                "%s:%d: expected NAME=value, e.g. "
			                "MCP_HTTP_ADDR=127.0.0.1:8080",
			                path, lineno);
			goto out;
		}
		*eq = '\0';
		for (char *e = eq - 1; e >= k && (*e == ' ' || *e == '\t'); e--)
			*e = '\0';
		v = dotenv_value(eq + 1);
		if (n + 2 > cap) {
			size_t ncap = cap ? cap * 2 : 32;
			char **np = realloc(pairs, ncap * sizeof(*np));

			if (!np) {
				r = -ENOMEM;
				goto out;
			}
			pairs = np;
			cap = ncap;
		}
		size_t kl = strlen(k), vl = strlen(v);
		char *kv = malloc(kl + vl + 2);

		if (!kv) {
			r = -ENOMEM;
			goto out;
		}
		memcpy(kv, k, kl);
		kv[kl] = '=';
		memcpy(kv + kl + 1, v, vl + 1);
		pairs[n++] = kv;
		pairs[n] = NULL;
	}
out:
	fclose(f);
	cfg->dotenv_ = pairs;
	if (r == -ENOMEM)
		snprintf(err, errlen, "out of memory reading %s", path);
	return r;
}

int config_load(struct config *cfg, const char *dotenv_path, char *err,
                size_t errlen)
{
	int r;

	memset(cfg, 0, sizeof(*cfg));
	if (errlen)
		err[0] = '\0';
	r = dotenv_read(cfg, dotenv_path, err, errlen);
	if (r < 0)
		return -EINVAL;
	/* Catch typos: a MCP_/SANDBOX_ name in .env that nothing reads. */
	for (char **p = cfg->dotenv_; p && *p; p++) {
		size_t kl = strcspn(*p, "=");
		char name[128];

		snprintf(name, sizeof(name), "%.*s", (int)kl, *p);
		if (!config_setting_find(name) &&
		    (strncmp(name, "MCP_", 4) == 0 ||
		     strncmp(name, "SANDBOX_", 8) == 0 ||
		     strncmp(name, "WORKSPACE_", 10) == 0 ||
		     strncmp(name, "OAUTH_", 6) == 0 ||
		     strncmp(name, "STORE_", 6) == 0))
			log_warnx("%s sets %s, which is not a setting of this "
			          "version; see --help",
			          dotenv_path, name);
	}
	r = config_parse_table(cfg, err, errlen);
	if (r == 0)
		r = config_derive(cfg, err, errlen);
	if (r == -ENOMEM) {
		snprintf(err, errlen,
		         "out of memory loading the configuration");
		r = -EINVAL;
	}
	return r;
}
