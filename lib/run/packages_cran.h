/* SPDX-License-Identifier: MIT */
/*
 * packages_cran: the R side of packages on demand (packages.h): CRAN
 * specs, the conversation's R library /data/.mcp/packages/r, and the
 * installer's argv. The installer is an R program of ours
 * (packages_cran.R, embedded at build time) run with Rscript --vanilla in
 * the runner image: it reads the index (src/contrib/PACKAGES) of the
 * repositories SANDBOX_PACKAGES_CRAN_REPOS names, resolves the
 * dependencies the image and the cache lack, refuses packages with code to
 * compile (the R image has no compilers) before installing anything,
 * installs source packages with R CMD INSTALL into a staging library in
 * ONEOFF_STAGE_PATH, and only then, within SANDBOX_PACKAGES_MAX_MB, puts
 * each one into the cache in place of an older copy. A spec is a package
 * name with an optional exact version after '@' (pak's syntax), e.g.
 * "glue" or "glue@1.7.0"; a version that is not the current one comes from
 * the repository's src/contrib/Archive.
 *
 * Threads: stateless and thread-safe. Part of the packages module: only
 * packages.c calls it.
 */
#ifndef MCPSD_PACKAGES_CRAN_H
#define MCPSD_PACKAGES_CRAN_H

#include <stdbool.h>
#include <stddef.h>

#include "config/config.h"
#include "run/packages.h"

/*
 * Checks one CRAN spec: a name (an ASCII letter, then letters, digits and
 * '.', not ending in '.', at least 2 characters) and an optional version
 * after '@' (numbers joined by '.' or '-', at least two). shown: the spec
 * as a message may show it. 0, or -EINVAL with the rule and an example.
 */
__attribute__((warn_unused_result)) int packages_cran_check(const char *spec,
                                                            const char *shown,
                                                            char *err,
                                                            size_t errlen);

/* The name of a valid spec into name and its version into pin ("" if none). */
void packages_cran_key(const char *spec, char *name, size_t nlen, char *pin,
                       size_t plen);

/*
 * Whether the conversation's R library under wsfd has name (its
 * DESCRIPTION's Version equal to pin when pin is not ""). Nothing is
 * followed; a DESCRIPTION is read to PACKAGES_CRAN_DESC_MAX bytes.
 */
#define PACKAGES_CRAN_DESC_MAX (64u << 10)
bool packages_cran_cached(int wsfd, const char *name, const char *pin);

/*
 * Fills c with the R installer for specs (all valid, 1 to PACKAGES_MAX):
 * sh -c with our script, the cache, the size cap, the repositories and
 * the R program as arguments, then the specs. A CA bundle mounted at
 * /sandbox/ca.pem becomes libcurl's CURL_CA_BUNDLE. Pure; -EINVAL for no
 * or too many specs.
 */
__attribute__((warn_unused_result)) int
packages_cran_command(const struct config *cfg, const char *const *specs,
                      size_t n, struct packages_cmd *c);

#endif
