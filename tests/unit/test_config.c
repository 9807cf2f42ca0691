/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/config.h"
#include "tap.h"

static const char *const vars[] = {"MCP_HTTP_ADDR",
                                   "MCP_API_TOKEN",
                                   "MCP_API_TOKENS",
                                   "MCP_AUTH",
                                   "FILE_SECRET",
                                   "PUBLIC_BASE_URL",
                                   "SANDBOX_MEMORY_MB",
                                   "SANDBOX_CPUS",
                                   "MCP_MAX_BODY_BYTES",
                                   "MCP_ALLOWED_HOSTS",
                                   "SANDBOX_TIMEOUT_SECONDS",
                                   "DOCKER_HOST",
                                   "OAUTH_ENABLED",
                                   "OAUTH_REDIRECT_HOSTS",
                                   "OAUTH_CIMD_HOSTS",
                                   "OAUTH_CIMD_CA_FILE",
                                   "OAUTH_ACCESS_TOKEN_TTL_SECONDS",
                                   "STORE_PATH",
                                   "STORE_URL",
                                   "SANDBOX_ROOT",
                                   NULL};

static void clear_env(void)
{
	for (size_t i = 0; vars[i]; i++)
		unsetenv(vars[i]);
}

static int load(struct config *c, const char *dotenv, char *err, size_t n)
{
	return config_load(c, dotenv, err, n);
}

/* --check-config (config_print) prints no secret, only fingerprints. */
static void test_print_secrets(void)
{
	static const char metrics[] = "metrics-secret-0123456789abcdef";
	struct config c;
	char err[1024], *text = NULL;
	size_t len = 0;
	FILE *f;

	setenv("MCP_API_TOKEN", "0123456789abcdef0123", 1);
	setenv("FILE_SECRET", "00112233445566778899aabbccddeeff", 1);
	setenv("METRICS_TOKEN", metrics, 1);
	if (load(&c, NULL, err, sizeof(err)) < 0) {
		ok(false, "config for the print test: %s", err);
		unsetenv("METRICS_TOKEN");
		return;
	}
	f = open_memstream(&text, &len);
	if (f) {
		config_print(&c, f);
		fclose(f);
	}
	ok(text && !strstr(text, metrics) &&
	       !strstr(text, "0123456789abcdef0123") &&
	       !strstr(text, "00112233445566778899aabbccddeeff"),
	   "no secret in --check-config's output");
	ok(text && strstr(text, "METRICS_TOKEN=<set, fingerprint "),
	   "METRICS_TOKEN shows as set, with a fingerprint");
	free(text);
	config_finish(&c);
	unsetenv("METRICS_TOKEN");
}

/*
 * MCP_REPLICA_NAME: checked, and it keeps replicas' instance names apart.
 * That the backend can serve replicas is backend_configure's (test_backend).
 */
static void test_replica_name(void)
{
	static const char *const bad[] = {
	    "R1", "1r", "-r", "r_1", "r.1", "abcdefghijklm", NULL};
	struct config c;
	char err[1024], *one;

	setenv("MCP_API_TOKEN", "0123456789abcdef0123", 1);
	setenv("FILE_SECRET", "00112233445566778899aabbccddeeff", 1);
	setenv("SANDBOX_ROOT", "/srv/shared/mcpsd", 1);
	unsetenv("MCP_REPLICA_NAME");
	unsetenv("SANDBOX_BACKEND");
	unsetenv("STORE_URL");
	setenv("MCP_REPLICA_NAME", "r1", 1);
	setenv("SANDBOX_BACKEND", "swarm", 1);
	ok(load(&c, NULL, err, sizeof(err)) < 0 &&
	       strstr(err, "STORE_URL=postgresql://"),
	   "a replica without a shared store is refused: %s", err);
	config_finish(&c);
	setenv("STORE_URL", "postgresql://mcpsd@db.internal/mcpsd", 1);
	unsetenv("MCP_REPLICA_NAME");
	is_int(load(&c, NULL, err, sizeof(err)), 0, "no replica name");
	is_str(c.replica_name, "", "replica name empty by default");
	one = strdup(c.instance_name);
	config_finish(&c);
	setenv("MCP_REPLICA_NAME", "r1", 1);
	is_int(load(&c, NULL, err, sizeof(err)), 0, "MCP_REPLICA_NAME=r1");
	is_str(c.replica_name, "r1", "replica name kept");
	ok(one && strncmp(c.instance_name, one, strlen(one)) == 0 &&
	       strcmp(c.instance_name + strlen(one), "-r1") == 0,
	   "default instance name: the single daemon's plus -r1 (%s)",
	   c.instance_name);
	config_finish(&c);
	free(one);
	setenv("MCP_REPLICA_NAME", "abcdefghijkl", 1);
	is_int(load(&c, NULL, err, sizeof(err)), 0, "12 characters accepted");
	config_finish(&c);
	for (size_t i = 0; bad[i]; i++) {
		setenv("MCP_REPLICA_NAME", bad[i], 1);
		ok(load(&c, NULL, err, sizeof(err)) < 0 &&
		       strstr(err, "MCP_REPLICA_NAME") &&
		       strstr(err, "e.g. MCP_REPLICA_NAME=r1"),
		   "MCP_REPLICA_NAME=%s refused with an example", bad[i]);
		config_finish(&c);
	}
	unsetenv("MCP_REPLICA_NAME");
	unsetenv("SANDBOX_BACKEND");
	unsetenv("STORE_URL");
	clear_env();
}

/*
 * The per-tenant settings of issue 19: defaults, and a bound on task
 * results per token that could not hold one result is refused.
 */
static void test_tenant_settings(void)
{
	struct config c;
	char err[1024];

	setenv("MCP_API_TOKEN", "0123456789abcdef0123", 1);
	setenv("FILE_SECRET", "00112233445566778899aabbccddeeff", 1);
	is_int(load(&c, NULL, err, sizeof(err)), 0, "defaults load");
	ok(c.workspace_max_per_tenant == 0 && c.workspace_create_burst == 30 &&
	       c.workspace_create_per_hour == 300 &&
	       c.task_result_bytes_per_tenant == 128u * 1024 * 1024,
	   "WORKSPACE_MAX_PER_TENANT=0, WORKSPACE_CREATE_BURST=30, "
	   "WORKSPACE_CREATE_PER_HOUR=300, MCP_TASK_RESULT_BYTES_PER_TENANT="
	   "128m");
	config_finish(&c);
	setenv("MCP_TASK_RESULT_BYTES_PER_TENANT", "4m", 1);
	ok(load(&c, NULL, err, sizeof(err)) < 0 &&
	       strstr(err, "MCP_TASK_RESULT_BYTES_PER_TENANT=4194304 is below "
	                   "MCP_TASK_RESULT_MAX_BYTES=8388608"),
	   "a bound below one result is refused: %s", err);
	config_finish(&c);
	setenv("WORKSPACE_CREATE_BURST", "0", 1);
	unsetenv("MCP_TASK_RESULT_BYTES_PER_TENANT");
	ok(load(&c, NULL, err, sizeof(err)) < 0 &&
	       strstr(err, "WORKSPACE_CREATE_BURST='0'"),
	   "a burst of 0 is refused: %s", err);
	config_finish(&c);
	unsetenv("WORKSPACE_CREATE_BURST");
}

/*
 * The timers a soak test scales down (tests/soak): warm lifetimes and task
 * retention go down to seconds, and workspace retention has a setting in
 * seconds that replaces the hours when given.
 */
static void test_short_timers(void)
{
	struct config c;
	char err[1024];

	clear_env();
	setenv("MCP_API_TOKEN", "0123456789abcdef0123", 1);
	setenv("FILE_SECRET", "00112233445566778899aabbccddeeff", 1);
	is_int(load(&c, NULL, err, sizeof(err)), 0, "defaults load");
	is_int(c.retention_s, 168 * 3600,
	       "retention by default: WORKSPACE_RETENTION_HOURS=168");
	config_finish(&c);
	setenv("WORKSPACE_RETENTION_HOURS", "2", 1);
	is_int(load(&c, NULL, err, sizeof(err)), 0, "hours alone load");
	is_int(c.retention_s, 7200, "2 hours are 7200 seconds");
	config_finish(&c);
	setenv("WORKSPACE_RETENTION_SECONDS", "20", 1);
	setenv("SANDBOX_WARM_MAX_SECONDS", "10", 1);
	setenv("MCP_TASK_RETENTION_SECONDS", "5", 1);
	is_int(load(&c, NULL, err, sizeof(err)), 0,
	       "seconds of retention, warm lifetime and task retention");
	is_int(c.retention_s, 20, "WORKSPACE_RETENTION_SECONDS wins");
	is_int(c.warm_max_s, 10, "SANDBOX_WARM_MAX_SECONDS=10");
	is_int(c.task_retention_s, 5, "MCP_TASK_RETENTION_SECONDS=5");
	config_finish(&c);
	setenv("SANDBOX_WARM_MAX_SECONDS", "9", 1);
	ok(load(&c, NULL, err, sizeof(err)) < 0 &&
	       strstr(err, "SANDBOX_WARM_MAX_SECONDS='9'") &&
	       strstr(err, "from 10"),
	   "a warm lifetime under 10 s is refused, naming the minimum: %s",
	   err);
	config_finish(&c);
	unsetenv("SANDBOX_WARM_MAX_SECONDS");
	setenv("MCP_TASK_RETENTION_SECONDS", "4", 1);
	ok(load(&c, NULL, err, sizeof(err)) < 0 &&
	       strstr(err, "MCP_TASK_RETENTION_SECONDS='4'"),
	   "a task retention under 5 s is refused: %s", err);
	config_finish(&c);
	setenv("WORKSPACE_RETENTION_SECONDS", "20s", 1);
	unsetenv("MCP_TASK_RETENTION_SECONDS");
	ok(load(&c, NULL, err, sizeof(err)) < 0 &&
	       strstr(err, "WORKSPACE_RETENTION_SECONDS='20s'") &&
	       strstr(err, "e.g."),
	   "a retention with a unit is refused with an example: %s", err);
	config_finish(&c);
	unsetenv("WORKSPACE_RETENTION_SECONDS");
	unsetenv("WORKSPACE_RETENTION_HOURS");
	clear_env();
}

/* A document generated by config_print_reference, or NULL. */
static char *reference(const char *format, int *rc, char *err, size_t errlen)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	*rc = -1;
	if (!f)
		return NULL;
	*rc = config_print_reference(format, f, err, errlen);
	fclose(f);
	return text;
}

/* The setting names --help lists, each followed by a space, in order. */
static char *help_names(void)
{
	char *text = NULL, *names = NULL;
	size_t len = 0, nlen = 0;
	FILE *f = open_memstream(&text, &len), *n;

	if (!f)
		return NULL;
	config_print_help(f);
	fclose(f);
	n = open_memstream(&names, &nlen);
	if (!n) {
		free(text);
		return NULL;
	}
	for (const char *line = text; line && *line;) {
		const char *nl = strchr(line, '\n');
		size_t k = 2;

		/* "  NAME   default: ..." (help lines start with 6 spaces) */
		while (line[k] == '_' || (line[k] >= 'A' && line[k] <= 'Z') ||
		       (line[k] >= '0' && line[k] <= '9'))
			k++;
		if (strncmp(line, "  ", 2) == 0 && k > 2 && line[k] == ' ' &&
		    strncmp(line + k + strspn(line + k, " "), "default: ", 9) ==
		        0)
			fprintf(n, "%.*s ", (int)(k - 2), line + 2);
		line = nl ? nl + 1 : NULL;
	}
	fclose(n);
	free(text);
	return names;
}

/*
 * The generated reference, .env.example and README table: every setting
 * --help lists is in each, under its section; text Markdown would eat is
 * escaped; the .env file the generator writes loads as a .env file.
 */
static void test_reference(void)
{
	char err[1024], envpath[] = "/tmp/mcpsd-test-ref-XXXXXX";
	int rc, fd, missing_md = 0, missing_env = 0, nnames = 0, long_lines = 0;
	char *md = reference("markdown", &rc, err, sizeof(err));
	int rc_md = rc;
	char *env = reference("env", &rc, err, sizeof(err));
	int rc_env = rc;
	char *readme = reference("readme", &rc, err, sizeof(err));
	int rc_readme = rc;
	char *names = help_names(), *bogus;
	struct config c;
	FILE *f;

	is_int(rc_md, 0, "markdown reference generated");
	is_int(rc_env, 0, ".env.example generated");
	is_int(rc_readme, 0, "README table generated");
	if (!md || !env || !readme || !names) {
		ok(false, "the generated documents are in memory");
		goto out;
	}
	for (char *p = names, *sp; (sp = strchr(p, ' ')); p = sp + 1) {
		char want[128];

		nnames++;
		snprintf(want, sizeof(want), "\n### `%.*s`\n", (int)(sp - p),
		         p);
		if (!strstr(md, want)) {
			printf("# not in the markdown reference: %.*s\n",
			       (int)(sp - p), p);
			missing_md++;
		}
		snprintf(want, sizeof(want), "\n#%.*s=", (int)(sp - p), p);
		if (!strstr(env, want)) {
			snprintf(want, sizeof(want), "\n%.*s=\n", (int)(sp - p),
			         p);
			if (!strstr(env, want)) {
				printf("# not in .env.example: %.*s\n",
				       (int)(sp - p), p);
				missing_env++;
			}
		}
	}
	ok(nnames > 100, "--help lists the settings (%d)", nnames);
	is_int(missing_md, 0, "every setting has an entry in the reference");
	is_int(missing_env, 0, "every setting is in .env.example");
	ok(strstr(md, "\n## HTTP front\n") &&
	       strstr(md, "\n## Warm sessions\n") &&
	       strstr(md, "- [Packages on demand](#packages-on-demand)\n"),
	   "the reference has a heading per section and a contents list");
	ok(strstr(md, "### `MCP_MAX_BODY_BYTES`\n\nLargest request body "
	              "accepted.\n\n- Default: `16m`\n- Allowed: a size "
	              "from 1k to 1g\n- Example: `MCP_MAX_BODY_BYTES=16m`\n"),
	   "an entry says what, default, allowed range and example");
	ok(strstr(md, "http://127.0.0.1:&lt;port&gt;") &&
	       !strstr(md, "http://127.0.0.1:<port>)"),
	   "angle brackets in help are escaped, not read as HTML");
	ok(strstr(md, "[`PUBLIC_BASE_URL`](#public_base_url)") &&
	       strstr(md, "[docs/deployment.md](deployment.md)"),
	   "setting names and docs/ paths in help become links");
	ok(strstr(env, "\n# --- Warm sessions ---") &&
	       strstr(env, "\n#SANDBOX_WARM_IDLE_SECONDS=600\n") &&
	       strstr(env, "\nMCP_API_TOKEN=\n") &&
	       strstr(env, "\n#TUNNEL_TOKEN=\n"),
	   ".env.example: sections, defaults commented out, required "
	   "settings set, the compose variables kept");
	for (char *p = env, *nl; (nl = strchr(p, '\n')); p = nl + 1) {
		if (nl - p > 78 && p[0] == '#' && p[1] == ' ' &&
		    memchr(p + 2, ' ', (size_t)(nl - p - 2))) {
			printf("# long line: %.*s\n", (int)(nl - p), p);
			long_lines++;
		}
	}
	is_int(long_lines, 0, ".env.example comments fit 78 columns");
	ok(strstr(readme, "<!-- BEGIN day-one settings") &&
	       strstr(readme, "<!-- END day-one settings -->\n") &&
	       strstr(readme, "| [`FILE_SECRET`](docs/configuration.md#"
	                      "file_secret) | — | ") &&
	       strstr(readme, "| [`SANDBOX_MEMORY_MB`](docs/configuration."
	                      "md#sandbox_memory_mb) | `256` | "),
	   "README table: day-one settings, linked to the reference");

	/* What the generator writes is a .env file the daemon reads. */
	fd = mkstemp(envpath);
	f = fd >= 0 ? fdopen(fd, "w") : NULL;
	if (f) {
		fputs(env, f);
		fclose(f);
	}
	clear_env();
	setenv("MCP_API_TOKEN", "0123456789abcdef0123", 1);
	setenv("FILE_SECRET", "0123456789abcdef0123456789abcdef", 1);
	ok(f && load(&c, envpath, err, sizeof(err)) == 0,
	   "the generated .env.example loads as a .env file: %s", err);
	config_finish(&c);
	clear_env();
	unlink(envpath);

	bogus = reference("html", &rc, err, sizeof(err));
	ok(rc == -EINVAL && strstr(err, "'html'") && strstr(err, "markdown"),
	   "an unknown format is refused, naming the ones there are: %s", err);
	free(bogus);
out:
	free(md);
	free(env);
	free(readme);
	free(names);
}

int main(void)
{
	struct config c;
	char err[1024];
	size_t sz;
	char *host;
	unsigned port;
	char path[] = "/tmp/mcpsd-test-env-XXXXXX";
	int fd;
	FILE *f;

	clear_env();
	ok(load(&c, NULL, err, sizeof(err)) < 0 &&
	       strstr(err, "MCP_API_TOKEN") &&
	       strstr(err, "openssl rand -hex 32"),
	   "no token: refused with the variable and an example");
	config_finish(&c);

	setenv("MCP_API_TOKEN", "short", 1);
	ok(load(&c, NULL, err, sizeof(err)) < 0 && strstr(err, "at least 16"),
	   "short token refused");
	config_finish(&c);

	setenv("MCP_API_TOKEN", "0123456789abcdef0123", 1);
	ok(load(&c, NULL, err, sizeof(err)) < 0 && strstr(err, "FILE_SECRET"),
	   "missing FILE_SECRET refused");
	config_finish(&c);

	setenv(
	    "FILE_SECRET",
	    "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff",
	    1);
	is_int(load(&c, NULL, err, sizeof(err)), 0, "minimal valid config");
	is_int(c.listen_port, 8080, "default port");
	is_str(c.listen_host, "", "default: every interface");
	is_int(c.memory_mb, 256, "default memory");
	ok(c.cpus == 0.5, "default cpus");
	is_int(c.file_secret_len, 32, "hex secret decoded to bytes");
	is_int(c.n_tokens, 1, "one token");
	is_str(c.tokens[0].tenant, "default", "its tenant is default");
	is_str(c.public_base_url, "http://127.0.0.1:8080", "derived base URL");
	ok(c.allowed_hosts[0] == NULL, "no Host check off loopback");
	ok(!c.audit_keep_code && c.audit_retention_days == 365 &&
	       c.usage_retention_days == 400 && !c.operator_token[0],
	   "audit defaults: no code kept, a year of entries, no token");
	config_finish(&c);

	/* The operator's token: long enough, and not the scraper's. */
	setenv("OPERATOR_TOKEN", "short", 1);
	ok(load(&c, NULL, err, sizeof(err)) < 0 &&
	       strstr(err, "OPERATOR_TOKEN must have at least 16"),
	   "a short OPERATOR_TOKEN is refused: %s", err);
	config_finish(&c);
	setenv("OPERATOR_TOKEN", "same-token-0123456789", 1);
	setenv("METRICS_TOKEN", "same-token-0123456789", 1);
	ok(load(&c, NULL, err, sizeof(err)) < 0 &&
	       strstr(err, "must differ from METRICS_TOKEN"),
	   "OPERATOR_TOKEN equal to METRICS_TOKEN is refused: %s", err);
	config_finish(&c);
	unsetenv("OPERATOR_TOKEN");
	unsetenv("METRICS_TOKEN");

	setenv("MCP_HTTP_ADDR", "127.0.0.1:9999", 1);
	setenv("MCP_API_TOKENS",
	       "alice:aaaaaaaaaaaaaaaaaaaa, bob:bbbbbbbbbbbbbbbbbbbb", 1);
	is_int(load(&c, NULL, err, sizeof(err)), 0, "several tokens");
	is_int(c.n_tokens, 3, "three tokens");
	is_str(c.tokens[2].tenant, "bob", "tenant names kept");
	ok(c.listen_loopback, "loopback detected");
	ok(c.allowed_hosts[0] != NULL, "Host checked on loopback");
	config_finish(&c);

	setenv("MCP_API_TOKENS", "alice:0123456789abcdef0123", 1);
	ok(load(&c, NULL, err, sizeof(err)) < 0 && strstr(err, "twice"),
	   "the same token for two tenants refused");
	config_finish(&c);
	unsetenv("MCP_API_TOKENS");

	setenv("SANDBOX_MEMORY_MB", "lots", 1);
	ok(load(&c, NULL, err, sizeof(err)) < 0 &&
	       strstr(err, "SANDBOX_MEMORY_MB='lots'") && strstr(err, "e.g."),
	   "bad number names the variable, the value and an example");
	config_finish(&c);
	unsetenv("SANDBOX_MEMORY_MB");

	setenv("SANDBOX_CPUS", "0", 1);
	ok(load(&c, NULL, err, sizeof(err)) < 0 && strstr(err, "SANDBOX_CPUS"),
	   "zero CPUs refused");
	config_finish(&c);
	unsetenv("SANDBOX_CPUS");

	setenv("DOCKER_HOST", "tcp://1.2.3.4:2375", 1);
	ok(load(&c, NULL, err, sizeof(err)) < 0 && strstr(err, "unix"),
	   "tcp DOCKER_HOST refused");
	config_finish(&c);
	unsetenv("DOCKER_HOST");

	setenv("MCP_AUTH", "none", 1);
	unsetenv("MCP_API_TOKEN");
	unsetenv("FILE_SECRET");
	setenv("MCP_HTTP_ADDR", ":8080", 1);
	is_int(load(&c, NULL, err, sizeof(err)), 0, "auth none loads");
	ok(c.listen_loopback && strcmp(c.listen_host, "127.0.0.1") == 0,
	   "auth none forces loopback");
	ok(c.file_secret_ephemeral, "auth none gets an ephemeral secret");
	config_finish(&c);
	clear_env();

	/* .env file: read, environment wins, quotes and comments. */
	fd = mkstemp(path);
	f = fdopen(fd, "w");
	fprintf(f, "# comment\nexport MCP_API_TOKEN=\"from-file-0123456789\"\n"
	           "FILE_SECRET='abcdefghijklmnopqrstuvwxyz0123456789'\n"
	           "SANDBOX_MEMORY_MB=512 # inline comment\n");
	fclose(f);
	setenv("SANDBOX_MEMORY_MB", "300", 1);
	is_int(load(&c, path, err, sizeof(err)), 0, ".env loads");
	is_int(c.memory_mb, 300, "environment wins over .env");
	is_int(c.file_secret_len, 36, "non-hex secret used as bytes");
	config_finish(&c);
	unsetenv("SANDBOX_MEMORY_MB");
	is_int(load(&c, path, err, sizeof(err)), 0, ".env loads again");
	is_int(c.memory_mb, 512, ".env value with inline comment");
	config_finish(&c);
	unlink(path);

	/* OAuth and the store. */
	clear_env();
	setenv("MCP_API_TOKEN", "0123456789abcdef0123", 1);
	setenv("FILE_SECRET", "0123456789abcdef0123456789abcdef", 1);
	setenv("SANDBOX_ROOT", "/srv/sandbox", 1);
	ok(load(&c, NULL, err, sizeof(err)) == 0 && !c.oauth &&
	       strcmp(c.store_path, "/srv/sandbox/state.db") == 0,
	   "http base URL: OAuth off; the store under SANDBOX_ROOT");
	ok(c.oauth_redirect_loopback && c.oauth_redirect_hosts[0] &&
	       strcmp(c.oauth_redirect_hosts[0], "claude.ai") == 0 &&
	       strcmp(c.oauth_redirect_hosts[1], "claude.com") == 0 &&
	       !c.oauth_redirect_hosts[2],
	   "redirect hosts: claude.ai, claude.com and loopback");
	config_finish(&c);
	setenv("PUBLIC_BASE_URL", "https://sandbox.example.com/", 1);
	ok(load(&c, NULL, err, sizeof(err)) == 0 && c.oauth &&
	       strcmp(c.oauth_issuer, "https://sandbox.example.com") == 0,
	   "https base URL: OAuth on, issuer without the slash");
	config_finish(&c);
	setenv("PUBLIC_BASE_URL", "https://example.com/sandbox", 1);
	ok(load(&c, NULL, err, sizeof(err)) == 0 && !c.oauth &&
	       strstr(c.oauth_why, "path"),
	   "auto with a path: off, and says why");
	config_finish(&c);
	setenv("OAUTH_ENABLED", "true", 1);
	ok(load(&c, NULL, err, sizeof(err)) < 0 && strstr(err, "has a path") &&
	       strstr(err, "OAUTH_ENABLED=false"),
	   "true with a path: refused with the way out");
	config_finish(&c);
	setenv("PUBLIC_BASE_URL", "http://sandbox.example.com", 1);
	ok(load(&c, NULL, err, sizeof(err)) < 0 && strstr(err, "loopback"),
	   "true over plain http off loopback: refused");
	config_finish(&c);
	setenv("PUBLIC_BASE_URL", "http://127.0.0.1:8080", 1);
	ok(load(&c, NULL, err, sizeof(err)) == 0 && c.oauth,
	   "true over plain http on loopback: on (tests)");
	config_finish(&c);
	setenv("OAUTH_REDIRECT_HOSTS", "app.example.com,*", 1);
	ok(load(&c, NULL, err, sizeof(err)) < 0 &&
	       strstr(err, "OAUTH_REDIRECT_HOSTS"),
	   "a wildcard redirect host is refused");
	config_finish(&c);
	setenv("OAUTH_REDIRECT_HOSTS", "app.example.com", 1);
	ok(load(&c, NULL, err, sizeof(err)) == 0 &&
	       !c.oauth_redirect_loopback &&
	       strcmp(c.oauth_redirect_hosts[0], "app.example.com") == 0,
	   "without 'loopback' loopback redirects are off");
	config_finish(&c);
	setenv("OAUTH_ACCESS_TOKEN_TTL_SECONDS", "299", 1);
	ok(load(&c, NULL, err, sizeof(err)) < 0 &&
	       strstr(err, "OAUTH_ACCESS_TOKEN_TTL_SECONDS"),
	   "access tokens shorter than 10 minutes are refused");
	config_finish(&c);
	unsetenv("OAUTH_ACCESS_TOKEN_TTL_SECONDS");
	setenv("OAUTH_CIMD_CA_FILE", "/nonexistent/ca.pem", 1);
	ok(load(&c, NULL, err, sizeof(err)) < 0 &&
	       strstr(err, "OAUTH_CIMD_CA_FILE"),
	   "an unreadable CA file is refused");
	config_finish(&c);
	unsetenv("OAUTH_CIMD_CA_FILE");
	setenv("STORE_PATH", "relative.db", 1);
	ok(load(&c, NULL, err, sizeof(err)) < 0 && strstr(err, "STORE_PATH"),
	   "a relative STORE_PATH is refused");
	config_finish(&c);
	unsetenv("STORE_PATH");
	setenv("STORE_URL", "mysql://u:hunter2@h/db", 1);
	ok(load(&c, NULL, err, sizeof(err)) < 0 && strstr(err, "STORE_URL") &&
	       strstr(err, "postgresql://") && !strstr(err, "hunter2"),
	   "a STORE_URL that is not PostgreSQL is refused, and not echoed: %s",
	   err);
	config_finish(&c);
	unsetenv("STORE_URL");
	setenv("MCP_AUTH", "none", 1);
	unsetenv("STORE_PATH");
	ok(load(&c, NULL, err, sizeof(err)) < 0 && strstr(err, "MCP_AUTH=none"),
	   "OAUTH_ENABLED=true with MCP_AUTH=none: refused");
	config_finish(&c);
	clear_env();

	is_int(config_parse_bytes("16m", &sz), 0, "16m parses");
	is_int(sz, 16 * 1024 * 1024, "16m is 16 MiB");
	is_int(config_parse_bytes("2KiB", &sz), 0, "2KiB parses");
	is_int(sz, 2048, "2KiB value");
	ok(config_parse_bytes("-1", &sz) < 0, "negative size refused");
	ok(config_parse_bytes("99999999999999999999g", &sz) < 0,
	   "overflowing size refused");
	ok(config_parse_bytes("12q", &sz) < 0, "unknown suffix refused");

	is_int(config_parse_addr("[::1]:80", &host, &port), 0, "IPv6 addr");
	is_str(host, "::1", "IPv6 host");
	free(host);
	ok(config_parse_addr("::1:80", &host, &port) < 0, "bare IPv6 refused");
	ok(config_parse_addr("host:99999", &host, &port) < 0,
	   "port out of range refused");
	test_replica_name();
	test_print_secrets();
	test_tenant_settings();
	test_short_timers();
	test_reference();
	return tap_done();
}
