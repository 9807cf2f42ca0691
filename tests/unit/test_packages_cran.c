/* SPDX-License-Identifier: MIT */
/*
 * test_packages_cran: R's packages on demand (packages_cran.h) as
 * packages.h dispatches them: CRAN names with an optional exact version
 * pass, URLs, paths, GitHub repositories, options, ranges and R code do
 * not (with a message that shows a good one); keys and pins; the cache
 * lookup in a tree hostile code wrote (a DESCRIPTION's Version, no link
 * followed, an oversized file ignored); the two boxes' exact argv (our
 * scripts and R program, the repositories, the cap, the specs; box 2's
 * files only as box 1 named them and only valid ones); what
 * libcurl's words through R say went wrong; SANDBOX_PACKAGES_CRAN_REPOS
 * checked at start-up.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config/config.h"
#include "run/oneoff.h"
#include "run/packages.h"
#include "run/packages_cran.h"
#include "tap.h"

static void test_specs(void)
{
	static const char *const good[] = {
	    "glue",       "data.table", "R6",          "ggplot2",
	    "glue@1.7.0", "zoo@1.8-12", "Rcpp@1.0.12", "mcpsdHello",
	    "A3@1.0.0",   "x1@0.1-2.3", "BH@1.84.0-0", "cli@3.6.3"};
	static const char *const bad[] = {
	    "",
	    "a",
	    "2x",
	    ".x",
	    "x.",
	    "x_y",
	    "x-y",
	    "user/repo",
	    "github::user/repo",
	    "https://cran.example/src/contrib/glue_1.7.0.tar.gz",
	    "../glue",
	    "/tmp/glue",
	    "-e",
	    "--configure-args=x",
	    "glue;system('id')",
	    "glue\nrm",
	    "glue ",
	    "glüe",
	    "glue@",
	    "glue@1",
	    "glue@>=1.0",
	    "glue@1.0@2",
	    "glue@1.x",
	    "glue@1..2",
	    "glue (>= 1.0)",
	    "glue@latest",
	    "x.tgz",
	    "glue.tar.gz",
	    "glue.ZIP",
	    "glue.whl@1.0"};
	char err[512];

	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		ok(packages_check_spec("cran", good[i], err, sizeof(err)) == 0,
		   "cran accepts '%s'", good[i]);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int rc = packages_check_spec("cran", bad[i], err, sizeof(err));

		ok(rc == -EINVAL && (strstr(err, "e.g. \"glue") ||
		                     strstr(err, "e.g. \"pandas\"")),
		   "cran refuses '%s' with an example: %s", bad[i], err);
	}
	ok(packages_check_spec("cran", "glue@1.x", err, sizeof(err)) ==
	           -EINVAL &&
	       strstr(err, "exact R package version"),
	   "a bad version says what a version is: %s", err);
	ok(packages_check_spec("cran", "glue\x01", err, sizeof(err)) ==
	           -EINVAL &&
	       !strchr(err, '\x01'),
	   "the message shows no control character");
}

static void test_keys(void)
{
	char name[PACKAGES_SPEC_MAX + 1], pin[PACKAGES_SPEC_MAX + 1];

	ok(packages_spec_key("cran", "data.table", name, sizeof(name), pin,
	                     sizeof(pin)) &&
	       strcmp(name, "data.table") == 0 && pin[0] == '\0',
	   "a bare name is its own key, case and dots kept");
	ok(packages_spec_key("cran", "zoo@1.8-12", name, sizeof(name), pin,
	                     sizeof(pin)) &&
	       strcmp(name, "zoo") == 0 && strcmp(pin, "1.8-12") == 0,
	   "an exact version is a pin");
}

static void test_cache(void)
{
	char root[] = "/tmp/test-packages-cran-XXXXXX", path[512], *big;
	int wsfd;

	if (!mkdtemp(root)) {
		ok(0, "temporary directory");
		return;
	}
	tap_mkdir(root, ".mcp");
	tap_mkdir(root, ".mcp/packages");
	tap_mkdir(root, ".mcp/packages/r");
	tap_mkdir(root, ".mcp/packages/r/glue");
	tap_put(root, ".mcp/packages/r/glue/DESCRIPTION",
	        "Package: glue\nTitle: x\nVersion: 1.7.0\nLicense: MIT\n");
	tap_mkdir(root, ".mcp/packages/r/zoo");
	tap_put(root, ".mcp/packages/r/zoo/DESCRIPTION",
	        "Package: zoo\r\nVersion:  1.8-12\r\n");
	tap_mkdir(root, ".mcp/packages/r/noversion");
	tap_put(root, ".mcp/packages/r/noversion/DESCRIPTION",
	        "Package: noversion\nXVersion: 1.0\n");
	/* What the code could plant: links, a directory, a huge file. */
	tap_put(root, "elsewhere", "Package: linked\nVersion: 1.0\n");
	tap_mkdir(root, ".mcp/packages/r/linked");
	snprintf(path, sizeof(path), "%s/.mcp/packages/r/linked/DESCRIPTION",
	         root);
	if (symlink("../../../../elsewhere", path) < 0)
		ok(0, "symlink");
	snprintf(path, sizeof(path), "%s/.mcp/packages/r/dirlink", root);
	if (symlink("glue", path) < 0)
		ok(0, "symlink");
	tap_mkdir(root, ".mcp/packages/r/isdir");
	tap_mkdir(root, ".mcp/packages/r/isdir/DESCRIPTION");
	tap_mkdir(root, ".mcp/packages/r/huge");
	big = malloc(PACKAGES_CRAN_DESC_MAX + 64);
	if (big) {
		memset(big, 'x', PACKAGES_CRAN_DESC_MAX + 32);
		memcpy(big, "Version: 1.0\n", 13);
		big[PACKAGES_CRAN_DESC_MAX + 32] = '\0';
		tap_put(root, ".mcp/packages/r/huge/DESCRIPTION", big);
		free(big);
	}
	wsfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	ok(packages_cached(wsfd, "cran", "glue"), "a package in the cache");
	ok(packages_cached(wsfd, "cran", "glue@1.7.0"),
	   "with the version pinned");
	ok(!packages_cached(wsfd, "cran", "glue@1.6.2"),
	   "another version is installed anew");
	ok(packages_cached(wsfd, "cran", "zoo@1.8-12"),
	   "CRLF and spaces around the version");
	ok(!packages_cached(wsfd, "cran", "Glue"), "names are case-sensitive");
	ok(!packages_cached(wsfd, "cran", "noversion"),
	   "a DESCRIPTION without Version is no package");
	ok(!packages_cached(wsfd, "cran", "linked"),
	   "a DESCRIPTION that is a link is not followed");
	ok(!packages_cached(wsfd, "cran", "dirlink"),
	   "a package directory that is a link is not followed");
	ok(!packages_cached(wsfd, "cran", "isdir"),
	   "a DESCRIPTION that is a directory is no package");
	ok(!packages_cached(wsfd, "cran", "huge"),
	   "a DESCRIPTION past PACKAGES_CRAN_DESC_MAX is not read");
	ok(!packages_cached(wsfd, "cran", "absent"), "an absent package");
	ok(!packages_cached(-1, "cran", "glue"), "no workspace, no cache");
	close(wsfd);
	snprintf(path, sizeof(path), "rm -rf '%s'", root);
	if (system(path) != 0)
		ok(0, "cleanup");
}

static bool has_arg(const struct packages_cmd *c, const char *a)
{
	for (size_t i = 0; i < c->argc; i++)
		if (strcmp(c->argv[i], a) == 0)
			return true;
	return false;
}

static void test_command(void)
{
	struct config cfg;
	struct packages_cmd c;
	const char *specs[] = {"glue", "zoo@1.8-12"};
	const char *many[PACKAGES_MAX + 1];
	char repos[] = "https://cloud.r-project.org,http://10.0.0.1:8080";

	memset(&cfg, 0, sizeof(cfg));
	cfg.cran_repos = repos;
	cfg.packages_max_mb = 50;
	is_int(packages_command(&cfg, "cran", true, NULL, specs, 2, &c), 0,
	       "cran");
	ok(c.argc == 9 && strcmp(c.argv[0], "sh") == 0 &&
	       strcmp(c.argv[1], "-c") == 0 && strcmp(c.argv[3], "sh") == 0,
	   "box 1: sh -c our script, $0 sh");
	is_str(c.argv[4], PACKAGES_R_FETCH_DIR, "$1 the fetch directory");
	is_str(c.argv[5], repos, "$2 the repositories as set");
	ok(strstr(c.argv[6], "R CMD INSTALL") &&
	       strstr(c.argv[6], "NeedsCompilation") &&
	       strstr(c.argv[6], "available.packages"),
	   "$3 the R program, embedded");
	ok(strcmp(c.argv[7], "glue") == 0 &&
	       strcmp(c.argv[8], "zoo@1.8-12") == 0,
	   "the specs last, as given");
	ok(strstr(c.argv[2], "env -i ") &&
	       strstr(c.argv[2], "Rscript --vanilla install.R fetch") &&
	       strstr(c.argv[2], "HOME=\"$s/home\""),
	   "R fetches with an environment of ours and no profile");
	ok(strstr(c.argv[2], "cd \"$s\"") &&
	       strstr(c.argv[2], "s=" ONEOFF_STAGE_PATH),
	   "in the staging directory, not /data");
	ok(strstr(c.argv[2], "CURL_CA_BUNDLE=/sandbox/ca.pem") != NULL,
	   "the operator's CA bundle, when mounted, for libcurl");
	ok(!strstr(c.argv[2], "INSTALL"), "box 1 installs nothing");
	ok(!has_arg(&c, "--vanilla"), "nothing for R in the argv but ours");
	for (size_t i = 0; i < PACKAGES_MAX + 1; i++)
		many[i] = "glue";
	is_int(packages_command(&cfg, "cran", false, NULL, many,
	                        PACKAGES_MAX + 1, &c),
	       -EINVAL, "too many specs");
	is_int(packages_command(&cfg, "cran", false, NULL, many, 0, &c),
	       -EINVAL, "no spec");
}

static void test_install_command(void)
{
	static const char *const bad[] = {
	    "mcp-sandboxd-fetched ../x_1.0.tar.gz\n",
	    "mcp-sandboxd-fetched glue_1.0.tar.gz; rm -rf /\n",
	    "mcp-sandboxd-fetched glue-1.0.tar.gz\n",
	    "mcp-sandboxd-fetched glue_1.tar.gz\n",
	    "mcp-sandboxd-fetched glue_1.0.zip\n",
	    "mcp-sandboxd-fetched glue_1.0.tar.gz \n",
	    "mcp-sandboxd-fetched _1.0.tar.gz\n",
	    "mcp-sandboxd-fetched \n",
	    "nothing fetched\n",
	    ""};
	struct config cfg;
	struct packages_cran_install *c = calloc(1, sizeof(*c));
	const char *specs[] = {"glue", "zoo@1.8-12"};
	char err[256], *many;
	size_t off = 0;

	memset(&cfg, 0, sizeof(cfg));
	cfg.packages_max_mb = 50;
	if (!c) {
		ok(0, "memory");
		return;
	}
	is_int(packages_cran_install_command(
	           &cfg,
	           "trying URL\nmcp-sandboxd-fetched zoo_1.8-12.tar.gz\n"
	           "mcp-sandboxd-fetched glue_1.7.0.tar.gz\nother line\n",
	           specs, 2, c, err, sizeof(err)),
	       0, "box 2 from box 1's output");
	ok(c->argc == 11 && strcmp(c->argv[0], "sh") == 0 &&
	       strcmp(c->argv[1], "-c") == 0,
	   "box 2: sh -c our script");
	is_str(c->argv[4], PACKAGES_R_DIR, "$1 the cache");
	is_str(c->argv[5], "51200", "$2 the cap in KiB");
	ok(strstr(c->argv[6], "R CMD INSTALL") != NULL, "$3 the R program");
	is_str(c->argv[7], PACKAGES_R_FETCH_DIR, "$4 the fetch directory");
	is_str(c->argv[8], "glue,zoo", "$5 the names asked for");
	ok(strcmp(c->argv[9], "zoo_1.8-12.tar.gz") == 0 &&
	       strcmp(c->argv[10], "glue_1.7.0.tar.gz") == 0,
	   "the files in box 1's order");
	ok(strstr(c->argv[2], "env -i ") &&
	       strstr(c->argv[2], "install.R\" install"),
	   "R installs with an environment of ours");
	ok(strstr(c->argv[2], "exit 75") &&
	       strstr(c->argv[2], "SANDBOX_PACKAGES_MAX_MB"),
	   "the cap checked before the cache changes");
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ok(packages_cran_install_command(&cfg, bad[i], specs, 2, c, err,
		                                 sizeof(err)) == -EINVAL &&
		       err[0],
		   "box 1 output %zu refused: %s", i, err);
	is_int(packages_cran_install_command(&cfg, NULL, specs, 2, c, err,
	                                     sizeof(err)),
	       -EINVAL, "no output");
	many = malloc((PACKAGES_CRAN_FILES_MAX + 1) * 40);
	if (many) {
		for (int i = 0; i <= PACKAGES_CRAN_FILES_MAX; i++)
			off += (size_t)snprintf(
			    many + off, 40,
			    "mcp-sandboxd-fetched p%d_1.0.tar.gz\n", i + 10);
		ok(packages_cran_install_command(&cfg, many, specs, 2, c, err,
		                                 sizeof(err)) == -EINVAL &&
		       strstr(err, "one more"),
		   "more files than PACKAGES_CRAN_FILES_MAX: %s", err);
		free(many);
	}
	free(c);
}

static void test_diagnose(void)
{
	static const struct {
		const char *text;
		enum packages_failure want;
	} cases[] = {
	    {"mcp-sandboxd: could not read the package index "
	     "(src/contrib/PACKAGES) of http://10.0.0.1:1: URL "
	     "'http://10.0.0.1:1/src/contrib/PACKAGES.rds': status was "
	     "'Could not connect to server'\n",
	     PACKAGES_FAIL_UNREACHABLE},
	    {"mcp-sandboxd: could not read the package index of "
	     "https://cran.invalid: status was 'Could not resolve host: "
	     "cran.invalid'\n",
	     PACKAGES_FAIL_UNREACHABLE},
	    {"mcp-sandboxd: could not read the package index of "
	     "https://x: status was 'SSL certificate problem: self-signed "
	     "certificate'\n",
	     PACKAGES_FAIL_CERT},
	    {"mcp-sandboxd: could not read the package index of "
	     "https://x: status was 'Timeout was reached'\n",
	     PACKAGES_FAIL_TIMEOUT},
	    {"mcp-sandboxd: could not read the package index of "
	     "https://x: URL 'https://x/src/contrib/PACKAGES': status was "
	     "'500 Internal Server Error'\n",
	     PACKAGES_FAIL_HTTP},
	    {"mcp-sandboxd: could not read the package index of "
	     "https://x: status was '404 Not Found'\n",
	     PACKAGES_FAIL_OTHER},
	    {"mcp-sandboxd: package 'glue' is not in https://x; check the "
	     "name\n",
	     PACKAGES_FAIL_OTHER},
	};
	char line[160];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		ok(packages_diagnose(cases[i].text, line, sizeof(line)) ==
		       cases[i].want,
		   "R's words, case %zu: %s", i, line);
}

static void test_setting(void)
{
	static const char *const good[] = {
	    "https://cloud.r-project.org",
	    "http://10.0.0.1:8080,https://cloud.r-project.org",
	    "https://a.example/cran/,https://b.example,https://c.example"};
	static const char *const bad[] = {
	    "",
	    "cloud.r-project.org",
	    "https://a.example,",
	    ",https://a.example",
	    "https://a.example, https://b.example",
	    "https://a.example/<x>",
	    "ftp://a.example",
	    ("https://1,https://2,https://3,https://4,https://5,https://6,"
	     "https://7,https://8,https://9")};
	struct config c;
	char err[1024];

	setenv("MCP_API_TOKEN", "0123456789abcdef0123", 1);
	setenv("FILE_SECRET", "00112233445566778899aabbccddeeff", 1);
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		setenv("SANDBOX_PACKAGES_CRAN_REPOS", good[i], 1);
		ok(config_load(&c, NULL, err, sizeof(err)) == 0,
		   "SANDBOX_PACKAGES_CRAN_REPOS=%s: %s", good[i], err);
		config_finish(&c);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		setenv("SANDBOX_PACKAGES_CRAN_REPOS", bad[i], 1);
		err[0] = '\0';
		ok(config_load(&c, NULL, err, sizeof(err)) < 0 &&
		       strstr(err, "SANDBOX_PACKAGES_CRAN_REPOS") &&
		       strstr(err, "e.g. "),
		   "SANDBOX_PACKAGES_CRAN_REPOS='%s' refused: %s", bad[i], err);
		config_finish(&c);
	}
	unsetenv("SANDBOX_PACKAGES_CRAN_REPOS");
	ok(config_load(&c, NULL, err, sizeof(err)) == 0, "the default: %s",
	   err);
	is_str(c.cran_repos, "https://cloud.r-project.org",
	       "default: CRAN's cloud mirror");
	config_finish(&c);
}

int main(void)
{
	test_specs();
	test_keys();
	test_cache();
	test_command();
	test_install_command();
	test_diagnose();
	test_setting();
	return tap_done();
}
