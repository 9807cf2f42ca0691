/* SPDX-License-Identifier: MIT */
/*
 * packages_cran: the R side of packages on demand (packages.h): CRAN
 * specs, the conversation's R library /data/.mcp/packages/r, and the two
 * boxes that install into it. Installing an R source package evaluates
 * its R code (R's lazy loading), and no package code may run where there
 * is network, so an R installation takes two boxes, both running our R
 * program (packages_cran.R, embedded at build time) with Rscript --vanilla:
 *   1. fetch, in the installer box (SANDBOX_PACKAGES_NETWORK): reads the
 *      index (src/contrib/PACKAGES) of SANDBOX_PACKAGES_CRAN_REPOS,
 *      resolves the dependencies the image lacks, downloads them into its
 *      private staging directory, refuses packages with code to compile
 *      (the image has no compilers), and copies the files into
 *      PACKAGES_R_FETCH_DIR, printing them in dependency order;
 *   2. install, in a box without network, with the file names the daemon
 *      read from 1's output and checked: R CMD INSTALL into a staging
 *      library on /data, then, within SANDBOX_PACKAGES_MAX_MB, each package
 *      in place of an older copy in the cache.
 * A spec is a package name with an optional exact version after '@'
 * (pak's syntax), e.g. "glue" or "glue@1.7.0"; a version that is not the
 * current one comes from the repository's src/contrib/Archive.
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

/* Where the fetch box leaves the files for the install box. */
#define PACKAGES_R_FETCH_DIR PACKAGES_DIR "/.r-fetch"
/* Files one installation takes (the R program refuses more). */
#define PACKAGES_CRAN_FILES_MAX 60
/* Bytes of one file name, "name_version.tar.gz". */
#define PACKAGES_CRAN_FILE_MAX (PACKAGES_SPEC_MAX + 40)

/*
 * Fills c with box 1, the fetch (run with the installers' network), for
 * specs (all valid, 1 to PACKAGES_MAX): sh -c with our script, the fetch
 * directory, the repositories and the R program as arguments, then the
 * specs. A CA bundle mounted at /sandbox/ca.pem becomes libcurl's
 * CURL_CA_BUNDLE. Pure; -EINVAL for no or too many specs.
 */
__attribute__((warn_unused_result)) int
packages_cran_command(const struct config *cfg, const char *const *specs,
                      size_t n, struct packages_cmd *c);

/* Box 2's argv, pointing into itself and cfg. */
struct packages_cran_install {
	const char *argv[16 + PACKAGES_CRAN_FILES_MAX];
	size_t argc;
	char max_kb[24];
	char requested[PACKAGES_MAX * (PACKAGES_SPEC_MAX + 1)];
	char files[PACKAGES_CRAN_FILES_MAX][PACKAGES_CRAN_FILE_MAX];
};

/*
 * Fills c with box 2, the installation (run without network), from the
 * standard output of box 1 (fetched: its "mcp-sandboxd-fetched FILE"
 * lines, each FILE checked to be "name_version.tar.gz" with a CRAN name
 * and version) for specs, which are always installed. 0; -EINVAL with
 * err when the output names no file, a bad one, or too many (box 1 is
 * ours, so this is a broken image, not the caller).
 */
__attribute__((warn_unused_result)) int packages_cran_install_command(
    const struct config *cfg, const char *fetched, const char *const *specs,
    size_t n, struct packages_cran_install *c, char *err, size_t errlen);

#endif
