/* SPDX-License-Identifier: MIT */
/*
 * packages_cran: see packages_cran.h.
 */
#include "run/packages_cran.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs/fstree.h"
#include "run/oneoff.h"
#include "util/errmsg.h"

/* The installer program (packages_cran.R), embedded by meson. */
extern const char packages_cran_program[];

static bool is_ascii_alpha(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static bool is_ascii_alnum(char c)
{
	return is_ascii_alpha(c) || (c >= '0' && c <= '9');
}

/* A CRAN package name at p: its length, or 0. */
static size_t cran_name_len(const char *p)
{
	size_t n = 0;

	if (!is_ascii_alpha(p[0]))
		return 0;
	while (is_ascii_alnum(p[n]) || p[n] == '.')
		n++;
	return n >= 2 && p[n - 1] != '.' ? n : 0;
}

/* An R package version: two or more numbers joined by '.' or '-'. */
static bool cran_version_ok(const char *v)
{
	size_t parts = 0;

	for (;;) {
		size_t d = strspn(v, "0123456789");

		if (d == 0 || d > 16)
			return false;
		parts++;
		v += d;
		if (*v == '\0')
			return parts >= 2;
		if (*v != '.' && *v != '-')
			return false;
		v++;
	}
}

/*
 * Whether the n-byte name at p ends like an archive ("x.tgz",
 * "x.tar.gz"): no CRAN package is called so, and every installer of the
 * project refuses such names, which others read as local files.
 */
static bool cran_archive_like(const char *p, size_t n)
{
	static const char *const ext[] = {"tgz", "tar", "gz",  "zip", "whl",
	                                  "tbz", "txz", "bz2", "xz",  "zst"};
	const char *dot = memrchr(p, '.', n);

	if (!dot)
		return false;
	for (size_t i = 0; i < sizeof(ext) / sizeof(ext[0]); i++)
		if ((size_t)(p + n - dot - 1) == strlen(ext[i]) &&
		    strncasecmp(dot + 1, ext[i], strlen(ext[i])) == 0)
			return true;
	return false;
}

int packages_cran_check(const char *spec, const char *shown, char *err,
                        size_t errlen)
{
	size_t n = cran_name_len(spec);

	if (n > 0 && cran_archive_like(spec, n))
		return errmsg_fail(
		    -EINVAL, err, errlen,
		    "R package '%.64s' names an archive file; packages come "
		    "from the repository by name, e.g. \"glue\" or "
		    "\"glue@1.7.0\"",
		    shown);

	if (n == 0 || (spec[n] != '\0' && spec[n] != '@'))
		return errmsg_fail(
		    -EINVAL, err, errlen,
		    "R package '%.64s' is not a CRAN package name with an "
		    "optional version: a name starts with a letter and has "
		    "only letters, digits and '.' (at least 2 characters, "
		    "not ending in '.'), and an exact version follows '@', "
		    "e.g. \"glue\", \"data.table\" or \"glue@1.7.0\" (no "
		    "URLs, paths, GitHub repositories or options)",
		    shown);
	if (spec[n] == '@' && !cran_version_ok(spec + n + 1))
		return errmsg_fail(
		    -EINVAL, err, errlen,
		    "R package '%.64s': the version after '@' must be an "
		    "exact R package version (numbers joined by '.' or "
		    "'-', at least two), e.g. \"glue@1.7.0\"; ranges are "
		    "not supported: leave the version out for the newest",
		    shown);
	return 0;
}

void packages_cran_key(const char *spec, char *name, size_t nlen, char *pin,
                       size_t plen)
{
	const char *at = strchr(spec, '@');
	size_t n = at ? (size_t)(at - spec) : strlen(spec);

	snprintf(name, nlen, "%.*s", (int)n, spec);
	snprintf(pin, plen, "%s", at ? at + 1 : "");
}

/* The Version field of a DESCRIPTION (Debian control format) in text. */
static bool description_version(const char *text, char *out, size_t outlen)
{
	const char *p = text;

	while (p && *p) {
		if (strncmp(p, "Version:", 8) == 0) {
			const char *v = p + 8;
			size_t len;

			v += strspn(v, " \t");
			len = strcspn(v, " \t\r\n");
			if (len == 0 || len >= outlen)
				return false;
			memcpy(out, v, len);
			out[len] = '\0';
			return true;
		}
		p = strchr(p, '\n');
		if (p)
			p++;
	}
	return false;
}

bool packages_cran_cached(int wsfd, const char *name, const char *pin)
{
	char rel[PACKAGES_SPEC_MAX + 64], have[64];
	struct stat st;
	char *text = NULL;
	bool found = false;
	ssize_t got;
	int fd;

	/* PACKAGES_R_DIR beneath the workspace's root (/data). */
	if (wsfd < 0 || (size_t)snprintf(rel, sizeof(rel), "%s/%s/DESCRIPTION",
	                                 &PACKAGES_R_DIR[sizeof("/data")],
	                                 name) >= sizeof(rel))
		return false;
	fd = fstree_open_regular(wsfd, rel, &st);
	if (fd < 0)
		return false;
	if (st.st_size > 0 && st.st_size <= (off_t)PACKAGES_CRAN_DESC_MAX &&
	    (text = malloc((size_t)st.st_size + 1)) != NULL &&
	    (got = read(fd, text, (size_t)st.st_size)) > 0) {
		text[got] = '\0';
		found = description_version(text, have, sizeof(have)) &&
		        (!pin[0] || strcmp(have, pin) == 0);
	}
	free(text);
	close(fd);
	return found;
}

/*
 * Box 1, run by sh -c in the R image with the installers' network: $1 the
 * fetch directory (under /data), $2 the repositories (comma-separated),
 * $3 the R program, then the specs.
 *
 * As for pip and npm (packages.c), it works in /stage, a directory no code
 * of the conversation can write, with HOME and TMPDIR there and an
 * environment of our making (env -i: no proxy variable, no R_LIBS or
 * R_PROFILE of the image); Rscript --vanilla reads no .Rprofile,
 * .Renviron or site file. The R program downloads into /stage/dl and
 * reads nothing under /data; it only writes the files it checked into the
 * fetch directory, made anew here.
 */
static const char cran_fetch_script[] =
    "umask 022\n"
    "f=$1 repos=$2 prog=$3\n"
    "shift 3\n"
    "s=" ONEOFF_STAGE_PATH "\n"
    "mkdir -p \"$s/home\" \"$s/tmp\" \"$s/dl\" && cd \"$s\" || exit 71\n"
    "printf '%s' \"$prog\" >install.R || exit 71\n"
    "rm -rf \"$f\" && mkdir -p \"$f\" || exit 71\n"
    "ca=\n"
    "[ -f /sandbox/ca.pem ] && ca=CURL_CA_BUNDLE=/sandbox/ca.pem\n"
    "env -i PATH=\"$PATH\" LANG=C.UTF-8 HOME=\"$s/home\" TMPDIR=\"$s/tmp\" "
    "R_LIBS_USER=' ' $ca Rscript --vanilla install.R fetch \"$s/dl\" \"$f\" "
    "\"$repos\" \"$@\" || { rc=$?; rm -rf \"$f\"; exit $rc; }\n";

/*
 * Box 2, run by sh -c in the R image without network: $1 the cache (the
 * conversation's R library), $2 the size cap in KiB (0: none), $3 the R
 * program, $4 the fetch directory, $5 the requested names
 * (comma-separated), then the files in dependency order.
 *
 * Package code runs here (R CMD INSTALL evaluates it), with no more than
 * the conversation's own code has: no network, its /data. R CMD INSTALL
 * fills a staging library beside the cache; the size cap is checked on it
 * and the cache together, and only then each package replaces its older
 * copy in the cache (a copy beside it, then a rename), so a refused or
 * failed installation leaves the cache as it was.
 */
static const char cran_install_script[] =
    "umask 022\n"
    "d=$1 max=$2 prog=$3 f=$4 req=$5\n"
    "shift 5\n"
    "t=${d%/*}/.r-stage w=/tmp/mcpsd-r\n"
    "rm -rf \"$t\" \"$w\" && mkdir -p \"$t/lib\" \"$w/home\" \"$w/tmp\" && "
    "cd \"$t\" || exit 71\n"
    "printf '%s' \"$prog\" >\"$w/install.R\" || exit 71\n"
    "env -i PATH=\"$PATH\" LANG=C.UTF-8 HOME=\"$w/home\" TMPDIR=\"$w/tmp\" "
    "R_LIBS_USER=' ' Rscript --vanilla \"$w/install.R\" install \"$d\" "
    "\"$t/lib\" \"$f\" \"$req\" \"$@\" || { rc=$?; cd /; rm -rf \"$t\" "
    "\"$f\"; exit $rc; }\n"
    "cd / && rm -rf \"$f\"\n"
    "if [ \"$max\" -gt 0 ]; then\n"
    "  kb=$(du -sk \"$t/lib\" | cut -f1) old=0\n"
    "  [ -d \"$d\" ] && old=$(du -sk \"$d\" | cut -f1)\n"
    "  if [ $((kb + old)) -gt \"$max\" ]; then\n"
    "    echo \"mcp-sandboxd: the package cache would take "
    "$(((kb + old) / 1024)) MB, more than the $((max / 1024)) MB allowed "
    "(SANDBOX_PACKAGES_MAX_MB); it was left as it was\" >&2\n"
    "    rm -rf \"$t\"\n"
    "    exit 75\n"
    "  fi\n"
    "fi\n"
    "mkdir -p \"$d\" || exit 73\n"
    "for p in \"$t/lib\"/*; do\n"
    "  n=${p##*/}\n"
    "  case $n in 00LOCK*|'*') continue;; esac\n"
    "  rm -rf \"$d/.$n.new\" && cp -a \"$p\" \"$d/.$n.new\" &&\n"
    "    rm -rf \"$d/$n\" && mv \"$d/.$n.new\" \"$d/$n\" ||\n"
    "    { rm -rf \"$d/.$n.new\" \"$t\"; exit 73; }\n"
    "done\n"
    "rm -rf \"$t\"\n";

int packages_cran_command(const struct config *cfg, const char *const *specs,
                          size_t n, struct packages_cmd *c)
{
	size_t k = 0;

	memset(c, 0, sizeof(*c));
	if (n == 0 || n > PACKAGES_MAX)
		return -EINVAL;
	c->argv[k++] = "sh";
	c->argv[k++] = "-c";
	c->argv[k++] = cran_fetch_script;
	c->argv[k++] = "sh";
	c->argv[k++] = PACKAGES_R_FETCH_DIR;
	c->argv[k++] = cfg->cran_repos;
	c->argv[k++] = packages_cran_program;
	for (size_t i = 0; i < n; i++)
		c->argv[k++] = specs[i];
	c->argc = k;
	return 0;
}

/* Whether f (len bytes) is "name_version.tar.gz" by CRAN's rules. */
static bool cran_file_ok(const char *f, size_t len)
{
	char v[PACKAGES_CRAN_FILE_MAX];
	size_t n = cran_name_len(f);

	if (n == 0 || n >= len || f[n] != '_' || len < n + 1 + 7 + 3 ||
	    len >= sizeof(v) || strncmp(f + len - 7, ".tar.gz", 7) != 0)
		return false;
	memcpy(v, f + n + 1, len - n - 1 - 7);
	v[len - n - 1 - 7] = '\0';
	return cran_version_ok(v);
}

/* The requested names, comma-separated, into c->requested. */
static void cran_requested(const char *const *specs, size_t n,
                           struct packages_cran_install *c)
{
	size_t off = 0;

	for (size_t i = 0; i < n; i++) {
		size_t len = strcspn(specs[i], "@");

		if (off + len + 2 > sizeof(c->requested))
			break;
		if (off)
			c->requested[off++] = ',';
		memcpy(c->requested + off, specs[i], len);
		off += len;
	}
	c->requested[off] = '\0';
}

int packages_cran_install_command(const struct config *cfg, const char *fetched,
                                  const char *const *specs, size_t n,
                                  struct packages_cran_install *c, char *err,
                                  size_t errlen)
{
	static const char mark[] = "mcp-sandboxd-fetched ";
	const char *p = fetched ? fetched : "";
	size_t k = 0, nf = 0;

	memset(c, 0, sizeof(*c));
	snprintf(c->max_kb, sizeof(c->max_kb), "%llu",
	         (unsigned long long)cfg->packages_max_mb * 1024ull);
	cran_requested(specs, n, c);
	c->argv[k++] = "sh";
	c->argv[k++] = "-c";
	c->argv[k++] = cran_install_script;
	c->argv[k++] = "sh";
	c->argv[k++] = PACKAGES_R_DIR;
	c->argv[k++] = c->max_kb;
	c->argv[k++] = packages_cran_program;
	c->argv[k++] = PACKAGES_R_FETCH_DIR;
	c->argv[k++] = c->requested;
	while (*p) {
		const char *eol = strchr(p, '\n');
		size_t len = eol ? (size_t)(eol - p) : strlen(p);

		if (len > sizeof(mark) - 1 &&
		    strncmp(p, mark, sizeof(mark) - 1) == 0) {
			const char *f = p + sizeof(mark) - 1;
			size_t flen = len - (sizeof(mark) - 1);

			if (nf == PACKAGES_CRAN_FILES_MAX ||
			    !cran_file_ok(f, flen))
				return errmsg_fail(
				    -EINVAL, err, errlen,
				    "the R installer named %s file than it "
				    "may (name_version.tar.gz, at most %d); "
				    "is the R image's sandbox.packages right?",
				    nf == PACKAGES_CRAN_FILES_MAX ? "one more"
				                                  : "another",
				    PACKAGES_CRAN_FILES_MAX);
			memcpy(c->files[nf], f, flen);
			c->files[nf][flen] = '\0';
			c->argv[k++] = c->files[nf++];
		}
		if (!eol)
			break;
		p = eol + 1;
	}
	if (nf == 0)
		return errmsg_fail(-EINVAL, err, errlen,
		                   "the R installer fetched nothing and said "
		                   "no error");
	c->argc = k;
	return 0;
}
