/* SPDX-License-Identifier: MIT */
/*
 * test_packages: run_code's packages as packages.h checks them (names with
 * versions pass; URLs, paths, options, markers, git and file specs do not,
 * with a message that shows a good one), the cache keys and pins, the
 * installer's exact argv (wheels only, isolated, no scripts, the index
 * and CA the operator set, the staging directory and an environment of
 * its own), the first error line of an installer's output, what real pip
 * and bun output says went wrong (certificate, unreachable, timeout, HTTP),
 * the cache lookup in a tree hostile code wrote (links not followed), and
 * the npm manifest rebuilt from a planted package.json (only names with
 * versions survive).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "config/config.h"
#include "run/packages.h"
#include "tap.h"

static void test_specs(void)
{
	static const char *const pip_ok[] = {"pandas",
	                                     "scikit-learn",
	                                     "numpy==1.26.4",
	                                     "scipy>=1.11,<2",
	                                     "requests[socks]",
	                                     "a.b_c-d",
	                                     "zope.interface~=5.0",
	                                     "pkg===1.0",
	                                     "x!=1.*",
	                                     "Foo[bar,baz]>1"};
	static const char *const pip_bad[] = {
	    "-r",
	    "--index-url=http://evil/simple",
	    "git+https://github.com/x/y",
	    "pkg @ https://x/y.whl",
	    "pkg;python_version<'3'",
	    "../x",
	    "/abs/path",
	    "a b",
	    "pkg==",
	    "pkg[",
	    "pkg[]",
	    "pkg,",
	    "x>=1,",
	    "file:///tmp/x",
	    "pkg\n",
	    "pkg$(id)",
	    "pkg`id`",
	    "_leading",
	    /* archives pip would install as local files */
	    "x.whl",
	    "evil-1.0-py3-none-any.whl",
	    "pkg.tar.gz",
	    "a.ZIP",
	    "src.tgz",
	    /* the whole line counts: pip reads "x<1.tgz" as a file too
	     * (found by fuzz_packages) */
	    "numpy>=1.26,<2ecc.tc.3131..tgz",
	    "x<1.whl",
	};
	static const char *const npm_ok[] = {
	    "zod",          "@types/node",   "@types/node@20.1.0",
	    "date-fns@^3",  "lodash@latest", "is-odd@3.0.1",
	    "JSONStream",   "a..b",          "x@>=1.2<2",
	    "left-pad@1||2"};
	static const char *const npm_bad[] = {
	    "-g",
	    "user/repo",
	    "git+https://github.com/x/y",
	    "file:../x",
	    "npm:zod",
	    "@scope",
	    "@/x",
	    "@a/../b",
	    "zod@",
	    "http://x/y.tgz",
	    "a b",
	    "zod@1.0.0 || 2",
	    "zod@https://x",
	    ".hidden",
	    "zod@1;id",
	    /* tarballs bun would read as local files */
	    "x.tgz",
	    "secret.tar.gz",
	    "@s/x.tar",
	    "zod@x.tgz",
	    "X.TGZ",
	};
	char err[256], big[PACKAGES_SPEC_MAX + 2];

	for (size_t i = 0; i < sizeof(pip_ok) / sizeof(*pip_ok); i++)
		is_int(packages_check_spec("pip", pip_ok[i], err, sizeof(err)),
		       0, pip_ok[i]);
	for (size_t i = 0; i < sizeof(pip_bad) / sizeof(*pip_bad); i++)
		ok(packages_check_spec("pip", pip_bad[i], err, sizeof(err)) ==
		           -EINVAL &&
		       strstr(err, "e.g."),
		   "pip refuses bad spec %zu with an example (%s)", i, err);
	for (size_t i = 0; i < sizeof(npm_ok) / sizeof(*npm_ok); i++)
		is_int(packages_check_spec("npm", npm_ok[i], err, sizeof(err)),
		       0, npm_ok[i]);
	for (size_t i = 0; i < sizeof(npm_bad) / sizeof(*npm_bad); i++)
		ok(packages_check_spec("npm", npm_bad[i], err, sizeof(err)) ==
		           -EINVAL &&
		       strstr(err, "e.g."),
		   "npm refuses bad spec %zu with an example (%s)", i, err);
	is_int(packages_check_spec("pip", "", err, sizeof(err)), -EINVAL,
	       "empty refused");
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	is_int(packages_check_spec("pip", big, err, sizeof(err)), -EINVAL,
	       "longer than PACKAGES_SPEC_MAX refused");
	big[PACKAGES_SPEC_MAX] = '\0';
	is_int(packages_check_spec("pip", big, err, sizeof(err)), 0,
	       "PACKAGES_SPEC_MAX bytes accepted");
	is_int(packages_check_spec("apt", "curl", err, sizeof(err)), -EINVAL,
	       "unknown manager refused");
}

static void test_keys(void)
{
	char name[PACKAGES_SPEC_MAX + 1], pin[PACKAGES_SPEC_MAX + 1];

	ok(packages_spec_key("pip", "Foo.Bar--baz==1.2", name, sizeof(name),
	                     pin, sizeof(pin)) &&
	       strcmp(name, "foo_bar_baz") == 0 && strcmp(pin, "1.2") == 0,
	   "pip: normalized name and pin (%s %s)", name, pin);
	ok(packages_spec_key("pip", "tabulate", name, sizeof(name), pin,
	                     sizeof(pin)) &&
	       strcmp(name, "tabulate") == 0 && !pin[0],
	   "pip: a bare name is looked up without a version");
	ok(!packages_spec_key("pip", "x>=1", name, sizeof(name), pin,
	                      sizeof(pin)),
	   "pip: a range always goes to the installer");
	ok(!packages_spec_key("pip", "x[y]", name, sizeof(name), pin,
	                      sizeof(pin)),
	   "pip: extras always go to the installer");
	ok(!packages_spec_key("pip", "x==1.*", name, sizeof(name), pin,
	                      sizeof(pin)),
	   "pip: a wildcard is not a pin");
	ok(packages_spec_key("npm", "@types/node@20.1.0", name, sizeof(name),
	                     pin, sizeof(pin)) &&
	       strcmp(name, "@types/node") == 0 && strcmp(pin, "20.1.0") == 0,
	   "npm: scoped name and pin (%s %s)", name, pin);
	ok(packages_spec_key("npm", "zod", name, sizeof(name), pin,
	                     sizeof(pin)) &&
	       strcmp(name, "zod") == 0 && !pin[0],
	   "npm: a bare name");
	ok(!packages_spec_key("npm", "zod@^3", name, sizeof(name), pin,
	                      sizeof(pin)),
	   "npm: a range always goes to the installer");
	ok(!packages_spec_key("npm", "zod@latest", name, sizeof(name), pin,
	                      sizeof(pin)),
	   "npm: a tag always goes to the installer");
}

static bool has_arg(const struct packages_cmd *c, const char *a)
{
	for (size_t i = 0; i < c->argc; i++)
		if (strcmp(c->argv[i], a) == 0)
			return true;
	return false;
}

static size_t arg_index(const struct packages_cmd *c, const char *a)
{
	for (size_t i = 0; i < c->argc; i++)
		if (strcmp(c->argv[i], a) == 0)
			return i;
	return (size_t)-1;
}

static void test_command(void)
{
	struct config cfg;
	struct packages_cmd c;
	const char *specs[] = {"pandas", "tabulate==0.9.0"};
	char pip_index[] = "http://10.0.0.1:3141/root/simple";
	char https_index[] = "https://pypi.org/simple";
	char registry[] = "https://registry.npmjs.org/";
	char egress[] = "egress";
	size_t i;

	memset(&cfg, 0, sizeof(cfg));
	cfg.pip_index = pip_index;
	cfg.npm_registry = registry;
	cfg.packages_max_mb = 50;
	is_int(packages_command(&cfg, "pip", true, NULL, specs, 2, &c), 0,
	       "pip");
	ok(c.argc > 6 && strcmp(c.argv[0], "sh") == 0 &&
	       strcmp(c.argv[1], "-c") == 0,
	   "behind the preparing script");
	is_str(c.argv[4], PACKAGES_PYTHON_DIR, "the cache directory");
	is_str(c.argv[5], "51200", "the cap in KiB");
	ok(has_arg(&c, "-I") && has_arg(&c, "--isolated"),
	   "python and pip isolated from the cache and the environment");
	ok(has_arg(&c, "--only-binary=:all:"), "wheels only: no setup.py");
	ok(has_arg(&c, "--no-cache-dir"), "no cache outside the workspace");
	i = arg_index(&c, "--prefix");
	ok(i != (size_t)-1 && i + 1 < c.argc &&
	       strcmp(c.argv[i + 1], PACKAGES_PYTHON_DIR) == 0,
	   "--prefix the cache: what the image has satisfies dependencies");
	ok(!has_arg(&c, "--target") && !has_arg(&c, "--upgrade") &&
	       !has_arg(&c, "--ignore-installed"),
	   "neither --target nor --upgrade: the image's packages are not "
	   "downloaded again");
	ok(strstr(c.argv[2], "ln -s \"$s\" site") != NULL,
	   "the script links the version's directory as site");
	i = arg_index(&c, "--index-url");
	ok(i != (size_t)-1 && strcmp(c.argv[i + 1], pip_index) == 0,
	   "the operator's index");
	i = arg_index(&c, "--trusted-host");
	ok(i != (size_t)-1 && strcmp(c.argv[i + 1], "10.0.0.1:3141") == 0,
	   "an http index is trusted as given (%s)",
	   i != (size_t)-1 ? c.argv[i + 1] : "-");
	i = arg_index(&c, "--cert");
	ok(i != (size_t)-1 && strcmp(c.argv[i + 1], "/sandbox/ca.pem") == 0,
	   "the operator's CA bundle");
	i = arg_index(&c, "--");
	ok(i != (size_t)-1 && i + 3 == c.argc &&
	       strcmp(c.argv[i + 1], "pandas") == 0 &&
	       strcmp(c.argv[i + 2], "tabulate==0.9.0") == 0,
	   "the specs last, after --");

	cfg.pip_index = https_index;
	cfg.packages_max_mb = 0;
	is_int(packages_command(&cfg, "pip", false, NULL, specs, 1, &c), 0,
	       "pip over https");
	ok(!has_arg(&c, "--trusted-host") && !has_arg(&c, "--cert"),
	   "https: no trusted host; no CA unless given");
	is_str(c.argv[5], "0", "no cap");
	ok(!has_arg(&c, "--proxy"), "no proxy on a network of their own");
	cfg.packages_network = egress;
	is_int(packages_command(&cfg, "pip", false, NULL, specs, 1, &c), 0,
	       "pip through the egress proxy");
	i = arg_index(&c, "--proxy");
	ok(i != (size_t)-1 &&
	       strcmp(c.argv[i + 1], "http://mcpsd-egress:3128") == 0,
	   "pip --isolated is told the proxy (it ignores HTTP_PROXY)");
	cfg.packages_network = NULL;

	is_int(packages_command(&cfg, "npm", true, NULL, specs, 1, &c), -EINVAL,
	       "npm without our manifest refused");
	is_int(packages_command(&cfg, "npm", true, "{\"private\":true}", specs,
	                        1, &c),
	       0, "npm");
	is_str(c.argv[4], PACKAGES_DIR "/node", "the npm cache directory");
	is_str(c.argv[6], "{\"private\":true}",
	       "our manifest for package.json");
	ok(has_arg(&c, "bun") && has_arg(&c, "add"), "bun add");
	ok(has_arg(&c, "--ignore-scripts"), "no lifecycle scripts");
	i = arg_index(&c, "--registry");
	ok(i != (size_t)-1 && strcmp(c.argv[i + 1], registry) == 0,
	   "the operator's registry");
	is_str(c.argv[c.argc - 1], "pandas", "the spec last");
	ok(strstr(c.argv[2], "NODE_EXTRA_CA_CERTS=/sandbox/ca.pem") != NULL,
	   "the script adds the CA");
	ok(strstr(c.argv[2], "cd \"$s/work\"") &&
	       strstr(c.argv[2], "s=/stage") &&
	       strstr(c.argv[2], "env -i PATH=\"$PATH\" LANG=C.UTF-8 "
	                         "HOME=\"$s/home\""),
	   "the installer works in the staging directory, HOME there, with "
	   "an environment of ours (no proxy variables)");
	ok(strstr(c.argv[2], "cd /data") == NULL &&
	       strstr(c.argv[2], "cd \"$d\" || exit 71\nseen") != NULL,
	   "only pip's own bookkeeping runs in the cache, after pip");

	is_int(packages_command(&cfg, "apt", false, NULL, specs, 1, &c),
	       -EINVAL, "unknown manager");
	is_int(packages_command(&cfg, "pip", false, NULL, specs, 0, &c),
	       -EINVAL, "no specs");
	is_int(packages_command(&cfg, "pip", false, NULL, specs,
	                        PACKAGES_MAX + 1, &c),
	       -EINVAL, "too many specs");
}

static void test_first_error(void)
{
	char out[64];

	packages_first_error("Looking in indexes: x\n  ERROR: Could not find "
	                     "a version\nERROR: No matching\n",
	                     out, sizeof(out));
	is_str(out, "ERROR: Could not find a version", "pip's first error");
	packages_first_error("bun add v1.4\nerror: GET https://r/x - 404\n",
	                     out, sizeof(out));
	is_str(out, "error: GET https://r/x - 404", "bun's error");
	packages_first_error("mcp-sandboxd: the cache would take 9 MB\n", out,
	                     sizeof(out));
	is_str(out, "mcp-sandboxd: the cache would take 9 MB", "the cap");
	packages_first_error("all fine\nERROR:\n", out, sizeof(out));
	is_str(out, "", "no error line");
	packages_first_error("ERROR: a\x1b[31mred\ttab", out, sizeof(out));
	is_str(out, "ERROR: a [31mred tab", "control characters replaced");
	packages_first_error("ERROR: "
	                     "0123456789012345678901234567890123456789012345678"
	                     "9012345678901234567890",
	                     out, sizeof(out));
	ok(strlen(out) == sizeof(out) - 1, "bounded");
}

static void test_conflicts(void)
{
	cJSON *a = cJSON_CreateArray();

	packages_conflicts(
	    "ERROR: pip's dependency resolver does not currently take into "
	    "account all the packages that are installed.\n"
	    "scipy 1.10.1 requires numpy<1.27.0,>=1.19.5, but you have numpy "
	    "99.0 which is incompatible.\n"
	    "Successfully installed numpy-99.0\n",
	    a);
	ok(cJSON_GetArraySize(a) == 1 &&
	       strcmp(cJSON_GetStringValue(cJSON_GetArrayItem(a, 0)),
	              "scipy 1.10.1 requires numpy<1.27.0,>=1.19.5, but you "
	              "have numpy 99.0 which is incompatible.") == 0,
	   "a conflict pip left in place is kept");
	for (int i = 0; i < 6; i++)
		packages_conflicts("a requires b, but you have c\x1b\n", a);
	ok(cJSON_GetArraySize(a) == 4, "at most 4");
	ok(strchr(cJSON_GetStringValue(cJSON_GetArrayItem(a, 3)), 0x1b) == NULL,
	   "control characters replaced");
	cJSON_Delete(a);
}

static void test_cache(void)
{
	char root[] = "/tmp/test-packages-XXXXXX", path[512];
	int wsfd;

	if (!mkdtemp(root)) {
		ok(0, "temporary directory");
		return;
	}
	tap_mkdir(root, ".mcp");
	tap_mkdir(root, ".mcp/packages");
	tap_mkdir(root, ".mcp/packages/python");
	tap_mkdir(root, ".mcp/packages/python/local");
	tap_mkdir(root, ".mcp/packages/python/local/lib");
	tap_mkdir(root, ".mcp/packages/python/local/lib/python3.11");
	tap_mkdir(root, ".mcp/packages/python/local/lib/python3.11/"
	                "dist-packages");
	tap_mkdir(root, ".mcp/packages/python/local/lib/python3.11/"
	                "dist-packages/Foo_Bar-1.2.dist-info");
	tap_mkdir(root, ".mcp/packages/python/local/lib/python3.11/"
	                "dist-packages/tabulate-0.9.0.dist-info");
	/* What the code could plant: a site link elsewhere, which the
	 * lookup never follows. */
	tap_mkdir(root, ".mcp/packages/python/elsewhere");
	tap_mkdir(root, ".mcp/packages/python/elsewhere/planted-1.0.dist-info");
	snprintf(path, sizeof(path), "%s/.mcp/packages/python/site", root);
	if (symlink("elsewhere", path) < 0)
		ok(0, "symlink");
	tap_mkdir(root, ".mcp/packages/node");
	tap_mkdir(root, ".mcp/packages/node/node_modules");
	tap_mkdir(root, ".mcp/packages/node/node_modules/zod");
	tap_put(root, ".mcp/packages/node/node_modules/zod/package.json",
	        "{\"name\":\"zod\",\"version\":\"3.23.8\"}");
	tap_mkdir(root, ".mcp/packages/node/node_modules/@types");
	tap_mkdir(root, ".mcp/packages/node/node_modules/@types/node");
	tap_put(root,
	        ".mcp/packages/node/node_modules/@types/node/package.json",
	        "{\"version\":\"20.1.0\"}");
	tap_mkdir(root, ".mcp/packages/node/node_modules/junk");
	tap_put(root, ".mcp/packages/node/node_modules/junk/package.json",
	        "{not json");
	snprintf(path, sizeof(path),
	         "%s/.mcp/packages/node/node_modules/linked", root);
	if (symlink("zod", path) < 0)
		ok(0, "symlink");
	wsfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	ok(packages_cached(wsfd, "pip", "foo-bar"), "pip: normalized match");
	ok(packages_cached(wsfd, "pip", "Foo.Bar==1.2"), "pip: the pinned "
	                                                 "version");
	ok(!packages_cached(wsfd, "pip", "foo-bar==1.3"),
	   "pip: another version is installed again");
	ok(!packages_cached(wsfd, "pip", "foo"), "pip: no prefix match");
	ok(!packages_cached(wsfd, "pip", "tabulate>=0.9"),
	   "pip: a range is installed again");
	ok(!packages_cached(wsfd, "pip", "planted"),
	   "pip: the site link is not followed");
	ok(packages_cached(wsfd, "npm", "zod") &&
	       packages_cached(wsfd, "npm", "zod@3.23.8"),
	   "npm: name and pin");
	ok(!packages_cached(wsfd, "npm", "zod@3.22.0"),
	   "npm: another version is installed again");
	ok(packages_cached(wsfd, "npm", "@types/node@20.1.0"),
	   "npm: a scoped package");
	ok(packages_cached(wsfd, "npm", "junk") &&
	       !packages_cached(wsfd, "npm", "junk@1.0.0"),
	   "npm: a broken package.json is present but has no version");
	ok(!packages_cached(wsfd, "npm", "linked"),
	   "npm: a link in the cache is not followed");
	ok(!packages_cached(wsfd, "npm", "absent"), "npm: absent");
	close(wsfd);
	snprintf(path, sizeof(path), "rm -rf '%s'", root);
	if (system(path) != 0)
		ok(0, "cleanup");
	ok(!packages_cached(-1, "pip", "x"), "no workspace: nothing cached");
}

/* Real output of pip 23 and bun 1.x that could not reach their index. */
static void test_diagnose(void)
{
	static const char pip_cert[] =
	    "Looking in indexes: https://127.0.0.1:18443/simple\n"
	    "WARNING: Retrying (Retry(total=4, connect=None, read=None, "
	    "redirect=None, status=None)) after connection broken by "
	    "'SSLError(SSLCertVerificationError(1, '[SSL: "
	    "CERTIFICATE_VERIFY_FAILED] certificate verify failed: "
	    "self-signed certificate (_ssl.c:1006)'))': /simple/mcpsd-x/\n"
	    "Could not fetch URL https://127.0.0.1:18443/simple/mcpsd-x/: "
	    "There was a problem confirming the ssl certificate: "
	    "HTTPSConnectionPool(host='127.0.0.1', port=18443): Max retries "
	    "exceeded with url: /simple/mcpsd-x/ (Caused by "
	    "SSLError(SSLCertVerificationError(1, '[SSL: "
	    "CERTIFICATE_VERIFY_FAILED] certificate verify failed: "
	    "self-signed certificate (_ssl.c:1006)'))) - skipping\n"
	    "ERROR: Could not find a version that satisfies the requirement "
	    "mcpsd-x (from versions: none)\n"
	    "ERROR: No matching distribution found for mcpsd-x\n";
	static const char pip_refused[] =
	    "Looking in indexes: http://127.0.0.1:1/simple\n"
	    "WARNING: Retrying (Retry(total=4, connect=None, read=None, "
	    "redirect=None, status=None)) after connection broken by "
	    "'NewConnectionError('<pip._vendor.urllib3.connection."
	    "HTTPConnection object at 0x7fbcada3c710>: Failed to establish a "
	    "new connection: [Errno 111] Connection refused')': "
	    "/simple/mcpsd-x/\n"
	    "ERROR: Could not find a version that satisfies the requirement "
	    "mcpsd-x (from versions: none)\n";
	static const char pip_dns[] =
	    "WARNING: Retrying (Retry(total=0, connect=None, read=None, "
	    "redirect=None, status=None)) after connection broken by "
	    "'NewConnectionError('<pip._vendor.urllib3.connection."
	    "HTTPSConnection object at 0x7f884ffa8150>: Failed to establish "
	    "a new connection: [Errno -3] Temporary failure in name "
	    "resolution')': /simple/mcpsd-x/\n"
	    "ERROR: No matching distribution found for mcpsd-x\n";
	static const char pip_timeout[] =
	    "WARNING: Retrying (Retry(total=4, connect=None, read=None, "
	    "redirect=None, status=None)) after connection broken by "
	    "'ReadTimeoutError(\"HTTPConnectionPool(host='127.0.0.1', "
	    "port=18444): Read timed out. (read timeout=3.0)\")': "
	    "/simple/mcpsd-x/\n"
	    "ERROR: No matching distribution found for mcpsd-x\n";
	static const char pip_missing[] =
	    "Looking in indexes: http://172.17.0.1:41234/simple\n"
	    "ERROR: Could not find a version that satisfies the requirement "
	    "mcpsd-no-such-thing (from versions: none)\n"
	    "ERROR: No matching distribution found for mcpsd-no-such-thing\n";
	static const char bun_cert[] =
	    "Resolving dependencies\nResolved, downloaded and extracted [1]\n"
	    "error: DEPTH_ZERO_SELF_SIGNED_CERT downloading package manifest "
	    "mcpsd-x\n";
	static const char bun_issuer[] =
	    "error: UNABLE_TO_GET_ISSUER_CERT_LOCALLY downloading package "
	    "manifest zod\n";
	static const char bun_refused[] =
	    "Resolving dependencies\nResolved, downloaded and extracted [6]\n"
	    "error: ConnectionRefused downloading package manifest mcpsd-x\n";
	static const char bun_dns[] = "error: DNSResolveFailed downloading "
	                              "package manifest mcpsd-x\n";
	static const char bun_500[] =
	    "Resolving dependencies\nResolved, downloaded and extracted [6]\n"
	    "error: GET http://127.0.0.1:18445/mcpsd-x - 500\n";
	static const char bun_403[] =
	    "error: GET http://127.0.0.1:18446/mcpsd-x - 403\n";
	static const char bun_404[] =
	    "error: GET http://172.17.0.1:4873/mcpsd-no-such-package-zz9 - "
	    "404\nerror: mcpsd-no-such-package-zz9@latest failed to resolve\n";
	char line[160];

	is_int(packages_diagnose(pip_cert, line, sizeof(line)),
	       PACKAGES_FAIL_CERT, "pip: an untrusted certificate");
	ok(strncmp(line,
	           "CERTIFICATE_VERIFY_FAILED] certificate verify "
	           "failed: self-signed",
	           55) == 0,
	   "from the words that say it (%s)", line);
	is_int(packages_diagnose(pip_refused, line, sizeof(line)),
	       PACKAGES_FAIL_UNREACHABLE, "pip: connection refused");
	ok(strncmp(line, "Connection refused", 18) == 0, "(%s)", line);
	is_int(packages_diagnose(pip_dns, line, sizeof(line)),
	       PACKAGES_FAIL_UNREACHABLE, "pip: no such host");
	is_int(packages_diagnose(pip_timeout, line, sizeof(line)),
	       PACKAGES_FAIL_TIMEOUT, "pip: a read timed out");
	ok(strncmp(line, "ReadTimeoutError", 16) == 0, "(%s)", line);
	is_int(packages_diagnose(pip_missing, line, sizeof(line)),
	       PACKAGES_FAIL_OTHER, "pip: a missing package is none of these");
	is_str(line, "", "and shows no line");
	is_int(packages_diagnose(bun_cert, line, sizeof(line)),
	       PACKAGES_FAIL_CERT, "bun: a self-signed certificate");
	is_str(line,
	       "DEPTH_ZERO_SELF_SIGNED_CERT downloading package manifest "
	       "mcpsd-x",
	       "the whole word");
	is_int(packages_diagnose(bun_issuer, NULL, 0), PACKAGES_FAIL_CERT,
	       "bun: an unknown issuer (a TLS-inspecting proxy)");
	is_int(packages_diagnose(bun_refused, line, sizeof(line)),
	       PACKAGES_FAIL_UNREACHABLE, "bun: connection refused");
	is_int(packages_diagnose(bun_dns, line, sizeof(line)),
	       PACKAGES_FAIL_UNREACHABLE, "bun: DNS");
	is_int(packages_diagnose(bun_500, line, sizeof(line)),
	       PACKAGES_FAIL_HTTP, "bun: HTTP 500");
	is_str(line, "error: GET http://127.0.0.1:18445/mcpsd-x - 500",
	       "the line");
	is_int(packages_diagnose(bun_403, NULL, 0), PACKAGES_FAIL_HTTP,
	       "bun: HTTP 403");
	is_int(packages_diagnose(bun_404, line, sizeof(line)),
	       PACKAGES_FAIL_OTHER, "bun: 404 is a name that is not there");
	is_int(packages_diagnose("error: GET \x1b[31mx - 500\x07\n", line,
	                         sizeof(line)),
	       PACKAGES_FAIL_OTHER, "a status must end the line");
	is_int(packages_diagnose("Connection refused\x1b[0m\n", line, 8),
	       PACKAGES_FAIL_UNREACHABLE, "bounded");
	is_str(line, "Connect", "cut to the buffer");
	is_int(packages_diagnose("", line, sizeof(line)), PACKAGES_FAIL_OTHER,
	       "empty output");
}

/* The manifest bun starts from: only valid name@version from the cache. */
static void test_manifest(void)
{
	char root[] = "/tmp/test_packages_mf_XXXXXX", path[256];
	const char *specs[] = {"zod@3.23.8", "@types/node"};
	char *json = NULL;
	cJSON *j, *deps;
	size_t dropped = 99;
	int wsfd;

	if (!mkdtemp(root)) {
		ok(0, "mkdtemp");
		return;
	}
	wsfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	is_int(packages_npm_manifest(wsfd, specs, 2, &json, &dropped), 0,
	       "no cache yet");
	is_str(json, "{\"dependencies\":{},\"private\":true}",
	       "no dependencies");
	is_int((int)dropped, 0, "nothing dropped");
	cJSON_free(json);

	tap_mkdir(root, ".mcp");
	tap_mkdir(root, ".mcp/packages");
	tap_mkdir(root, ".mcp/packages/node");
	tap_put(root, ".mcp/packages/node/package.json",
	        "{\"dependencies\":{"
	        "\"keep\":\"^1.2.3\",\"@s/kept\":\"latest\","
	        "\"zod\":\"^3.0.0\",\"@types/node\":\"20\","
	        "\"exfil\":\"http://10.0.0.1/secret.tgz\","
	        "\"alias\":\"npm:zod@3\",\"gh\":\"github:user/repo\","
	        "\"short\":\"user/repo\",\"git\":\"git+https://x/y\","
	        "\"local\":\"file:../../x\",\"tar\":\"x.tgz\","
	        "\"path\":\"./x\",\"home\":\"~/x\",\"ws\":\"workspace:*\","
	        "\"link\":\"link:x\",\"num\":1,\"empty\":\"\","
	        "\"bad name\":\"1.0.0\",\"x@1\":\"2\",\"keep\":\"9.9.9\"},"
	        "\"optionalDependencies\":{\"o\":\"http://x/o.tgz\"},"
	        "\"scripts\":{\"preinstall\":\"curl x\"},"
	        "\"workspaces\":[\"../..\"]}");
	is_int(packages_npm_manifest(wsfd, specs, 2, &json, &dropped), 0,
	       "a planted manifest");
	j = cJSON_Parse(json);
	deps = cJSON_GetObjectItemCaseSensitive(j, "dependencies");
	ok(cJSON_GetArraySize(deps) == 2, "two entries kept (%s)", json);
	is_str(cJSON_GetStringValue(
	           cJSON_GetObjectItemCaseSensitive(deps, "keep")),
	       "^1.2.3", "a range kept, the duplicate name ignored");
	is_str(cJSON_GetStringValue(
	           cJSON_GetObjectItemCaseSensitive(deps, "@s/kept")),
	       "latest", "a scoped name with a tag kept");
	ok(!cJSON_GetObjectItemCaseSensitive(deps, "zod") &&
	       !cJSON_GetObjectItemCaseSensitive(deps, "@types/node"),
	   "what the call asks for is left to bun add");
	is_int((int)dropped, 15,
	       "URLs, aliases, git, paths, tarballs, workspace:, link:, "
	       "non-strings, empty and bad names dropped");
	ok(cJSON_GetArraySize(j) == 2 &&
	       cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "private")),
	   "nothing else of the planted file (scripts, workspaces, "
	   "optionalDependencies) comes along");
	cJSON_Delete(j);
	cJSON_free(json);

	/* A link in place of the manifest is not followed. */
	snprintf(path, sizeof(path), "%s/.mcp/packages/node/package.json",
	         root);
	unlink(path);
	tap_put(root, "elsewhere.json", "{\"dependencies\":{\"a\":\"1\"}}");
	snprintf(path, sizeof(path), "%s/.mcp/packages/node/package.json",
	         root);
	if (symlink("../../../elsewhere.json", path) < 0)
		ok(0, "symlink");
	is_int(packages_npm_manifest(wsfd, specs, 2, &json, &dropped), 0,
	       "a linked manifest");
	is_str(json, "{\"dependencies\":{},\"private\":true}",
	       "is not followed");
	cJSON_free(json);
	is_int(packages_npm_manifest(-1, specs, 2, &json, &dropped), 0,
	       "no workspace");
	cJSON_free(json);
	close(wsfd);
	snprintf(path, sizeof(path), "rm -rf '%s'", root);
	if (system(path) != 0)
		ok(0, "cleanup");
}

int main(void)
{
	test_specs();
	test_keys();
	test_command();
	test_first_error();
	test_conflicts();
	test_cache();
	test_diagnose();
	test_manifest();
	return tap_done();
}
