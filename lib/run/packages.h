/* SPDX-License-Identifier: MIT */
/*
 * packages: run_code's packages on demand. A run may name packages (pip
 * requirements for Python, npm packages for TypeScript/JavaScript, CRAN
 * packages for R); those not yet in the conversation's cache are installed
 * first by the runner image's own installer (label sandbox.packages: pip,
 * npm or cran), in a one-off box that alone has network
 * (SANDBOX_PACKAGES_NETWORK), into
 *   /data/.mcp/packages/python        (pip --prefix; what the image has
 *                                      satisfies dependencies)
 *   /data/.mcp/packages/node          (package.json, node_modules)
 *   /data/.mcp/packages/r             (an R library; packages_cran.h)
 * on the workspace's file system, so the cache counts against its quota
 * and later runs and the warm session find it (PYTHONPATH and the
 * kernel's sys.path; a node_modules link beside the code; R_LIBS and the
 * R kernel's .libPaths()).
 *
 * Installation never runs code of a package: pip takes wheels only
 * (--only-binary=:all:, no setup.py) and npm packages' lifecycle scripts
 * are skipped (--ignore-scripts); R source packages with code to compile
 * are refused before anything is installed (R CMD INSTALL of the rest runs
 * no code of theirs beyond R's own package installation). The installer never
 * reads configuration from the cache the conversation's code can write: it
 * works in a staging directory of its own (oneoff.h: ONEOFF_STAGE_PATH) with
 * HOME there and an environment we set (no proxy variables), bun from a
 * package.json we write from validated specs, pip isolated (python3 -I, pip
 * --isolated); the registry and index are passed explicitly. Specs are names
 * with an optional version, never URLs, paths, tarballs or options.
 *
 * Threads: stateless and thread-safe.
 */
#ifndef MCPSD_PACKAGES_H
#define MCPSD_PACKAGES_H

#include <stdbool.h>
#include <stddef.h>

#include <cjson/cJSON.h>

#include "config/config.h"
#include "run/catalog.h"
#include "run/request.h"

#define PACKAGES_MAX 32       /* packages in one run */
#define PACKAGES_SPEC_MAX 128 /* bytes of one spec */
#define PACKAGES_DIR "/data/.mcp/packages"
#define PACKAGES_PYTHON_DIR PACKAGES_DIR "/python"
/* pip --prefix puts packages in local/lib/python3.N/dist-packages (Debian's
 * scheme); the installer links it here, the path runs put on sys.path. */
#define PACKAGES_PYTHON_SITE PACKAGES_PYTHON_DIR "/site"
#define PACKAGES_NODE_MODULES PACKAGES_DIR "/node/node_modules"
#define PACKAGES_R_DIR PACKAGES_DIR "/r"
/* The installer's exit status when the cache passed SANDBOX_PACKAGES_MAX_MB */
#define PACKAGES_EXIT_TOO_BIG 75

struct oneoff_context;

/*
 * Checks one spec for manager ("pip", "npm" or "cran"). pip: a
 * distribution name with optional extras and version clauses, e.g.
 * "pandas", "requests[socks]", "numpy>=1.26,<2". npm: a package name,
 * optionally scoped, with an optional version or range or tag after '@',
 * e.g. "zod", "@scope/pkg@^1.2". cran: a package name with an optional
 * exact version after '@', e.g. "glue", "glue@1.7.0".
 * 0, or -EINVAL with the rule it broke and an example in err.
 */
__attribute__((warn_unused_result)) int packages_check_spec(const char *manager,
                                                            const char *spec,
                                                            char *err,
                                                            size_t errlen);

/*
 * The name of a valid spec as the cache knows it (pip: lower case, runs
 * of '-', '_', '.' as one '_'; npm and cran: as written) and its exact
 * version when it pins one ("==1.2" or "@1.2.3"), else "" in pin; "" in pin and
 * false returned when the spec cannot be checked against the cache
 * (extras, ranges, tags): then it is always installed. true when the
 * cache can answer for it.
 */
bool packages_spec_key(const char *manager, const char *spec, char *name,
                       size_t nlen, char *pin, size_t plen);

/*
 * Whether a spec is already in the cache of the workspace whose root is
 * wsfd (which hostile code has written: nothing is followed or trusted
 * beyond a name and a version).
 */
bool packages_cached(int wsfd, const char *manager, const char *spec);

/* The argv of an installation, pointing into itself and cfg. */
struct packages_cmd {
	const char *argv[PACKAGES_MAX + 40];
	size_t argc;
	char host[256];  /* --trusted-host of an http:// index */
	char max_kb[24]; /* SANDBOX_PACKAGES_MAX_MB in KiB, "0" for none */
};

/*
 * Fills cmd with the installer of manager for specs (all valid): a short
 * sh script that runs pip or bun in the box's staging directory
 * (ONEOFF_STAGE_PATH) with everything fixed here and an environment of its
 * own, puts the result into the cache, and enforces the size cap. ca: a CA
 * bundle is mounted at /sandbox/ca.pem. manifest: for npm, the
 * package.json bun starts from (packages_npm_manifest; borrowed, must
 * outlive cmd), ignored for pip. Pure. -EINVAL for an unknown manager, no
 * manifest for npm, or too many specs.
 */
__attribute__((warn_unused_result)) int
packages_command(const struct config *cfg, const char *manager, bool ca,
                 const char *manifest, const char *const *specs, size_t n,
                 struct packages_cmd *cmd);

/*
 * The package.json an npm installation starts from, written by us: the
 * dependencies of the cache's package.json (which hostile code may have
 * written) that are valid specs by packages_check_spec (a name and a
 * version, range or tag: no URL, path, git, alias or tarball), except
 * those named in specs (installed anew), at most PACKAGES_KEEP_MAX. *json:
 * caller frees with cJSON_free; *dropped: how many entries were left out as
 * invalid. 0, or -ENOMEM. A missing or unreadable cache manifest gives
 * one with no dependencies.
 */
#define PACKAGES_KEEP_MAX 256
__attribute__((warn_unused_result)) int
packages_npm_manifest(int wsfd, const char *const *specs, size_t n, char **json,
                      size_t *dropped);

/*
 * The first line of an installer's output that says what went wrong
 * ("ERROR: ..." from pip, "error: ..." from bun), copied into out
 * (bounded, control characters replaced); "" when there is none.
 */
void packages_first_error(const char *text, char *out, size_t outlen);

/* What an installation that failed ran into (packages_diagnose). */
enum packages_failure {
	PACKAGES_FAIL_OTHER = 0,   /* none of these: names and versions */
	PACKAGES_FAIL_CERT,        /* a TLS certificate it did not trust */
	PACKAGES_FAIL_UNREACHABLE, /* refused, no such host, no route */
	PACKAGES_FAIL_TIMEOUT,     /* a connection or a read timed out */
	PACKAGES_FAIL_HTTP,        /* an HTTP error other than 404 */
};

/*
 * Reads an installer's output (pip's retry warnings and "Could not fetch
 * URL" lines, bun's "error: DEPTH_ZERO_SELF_SIGNED_CERT ...", "error: GET
 * <url> - 500" lines) for a failure to reach the index rather than a
 * package it lacks; the first such line, bounded and with control
 * characters replaced, into line (may be NULL). Pure.
 */
enum packages_failure packages_diagnose(const char *text, char *line,
                                        size_t linelen);

/*
 * Lines of an installer's output in which pip reports a dependency
 * conflict it left in place ("x requires y<2, but you have y 3 ..."):
 * up to 4, control characters replaced, added to the JSON array arr.
 */
void packages_conflicts(const char *text, cJSON *arr);

/*
 * Before a run of req in img: installs what req->packages lacks in the
 * cache. 0 when the code may run (res->packages_json and packages_note
 * say what was installed and reused); 1 when it must not, with res filled
 * (status failed and why, the installer's output as stdout and stderr;
 * cancelled; or error for engine trouble).
 */
int packages_prepare(const struct oneoff_context *env,
                     const struct runner_request *req,
                     const struct catalog_image *img,
                     struct runner_result *res);

/*
 * SANDBOX_PACKAGES_NETWORK's value that sends installers through the
 * egress proxy (egress.h), allowed to the index or registry only.
 */
#define PACKAGES_NETWORK_EGRESS "egress"

#endif
