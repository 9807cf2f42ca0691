/* SPDX-License-Identifier: MIT */
/*
 * packages: see packages.h.
 */
#include "run/packages.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "config/egress_policy.h"
#include "fs/fstree.h"
#include "run/oneoff.h"
#include "run/packages_cran.h"
#include "util/buf.h"
#include "util/errmsg.h"
#include "util/log.h"
#include "util/mono.h"
#include "workspace/workspace.h"

#define PACKAGES_CA_MAX (4u << 20)    /* bytes of SANDBOX_PACKAGES_CA_FILE */
#define PACKAGES_JSON_MAX (64u << 10) /* bytes of a package.json we read */
#define PACKAGES_DIR_SCAN_MAX 100000  /* entries of the pip cache we read */

/* ---- specs -------------------------------------------------------------- */

static bool is_alnum(char c)
{
	return isalnum((unsigned char)c) != 0;
}

/* A pip distribution name at p: its length, or 0. */
static size_t pip_name_len(const char *p)
{
	size_t n = 0;

	if (!is_alnum(p[0]))
		return 0;
	while (is_alnum(p[n]) || p[n] == '.' || p[n] == '_' || p[n] == '-')
		n++;
	while (n > 0 && !is_alnum(p[n - 1]))
		n--;
	return n;
}

/* A pip version comparison operator at p: its length, or 0. */
static size_t pip_op_len(const char *p)
{
	static const char *const ops[] = {
	    "===", "==", "!=", "<=", ">=", "~=", "<", ">"};

	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++)
		if (strncmp(p, ops[i], strlen(ops[i])) == 0)
			return strlen(ops[i]);
	return 0;
}

/*
 * Whether the n bytes at p end like an archive file: pip installs
 * "x.whl" or "x.tar.gz" as a local file and bun "x.tgz" as a tarball,
 * though both look like names.
 */
static bool archive_suffix(const char *p, size_t n)
{
	static const char *const ext[] = {
	    ".whl",     ".zip",    ".tgz",      ".tar",     ".tar.gz",
	    ".tar.bz2", ".tbz",    ".tbz2",     ".tar.xz",  ".txz",
	    ".tlz",     ".tar.lz", ".tar.lzma", ".tar.zst", ".egg"};

	for (size_t i = 0; i < sizeof(ext) / sizeof(ext[0]); i++) {
		size_t e = strlen(ext[i]);

		if (n >= e && strncasecmp(p + n - e, ext[i], e) == 0)
			return true;
	}
	return false;
}

static int pip_check(const char *spec, const char *s, char *err, size_t errlen)
{
	const char *p = spec;
	size_t n = pip_name_len(p);

	if (n == 0)
		return errmsg_fail(-EINVAL, err, errlen,
		                   "pip package '%.64s' must start with a "
		                   "distribution name (letters, digits, '.', "
		                   "'_', '-'), e.g. \"pandas\" or "
		                   "\"numpy>=1.26\"",
		                   s);
	/* pip looks at the whole line: "x<1.tgz" would be a file too. */
	if (archive_suffix(p, n) || archive_suffix(spec, strlen(spec)))
		return errmsg_fail(
		    -EINVAL, err, errlen,
		    "pip package '%.64s' names an archive file, and pip would "
		    "install it as a local file; packages come from the index "
		    "by name, e.g. \"pandas\" or \"numpy==1.26.4\"",
		    s);
	p += n;
	if (*p == '[') {
		do {
			p++;
			n = pip_name_len(p);
			if (n == 0)
				return errmsg_fail(
				    -EINVAL, err, errlen,
				    "pip package '%.64s': extras are names "
				    "in brackets, e.g. \"requests[socks]\"",
				    s);
			p += n;
		} while (*p == ',');
		if (*p++ != ']')
			return errmsg_fail(
			    -EINVAL, err, errlen,
			    "pip package '%.64s': extras are names in "
			    "brackets, e.g. \"requests[socks]\"",
			    s);
	}
	while (*p) {
		size_t op = pip_op_len(p), v;

		if (op == 0)
			break;
		p += op;
		v = strspn(p, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTU"
		              "VWXYZ0123456789.*+!_-");
		if (v == 0) {
			p--; /* an operator without a version */
			break;
		}
		p += v;
		if (*p == ',' && p[1])
			p++;
		else if (*p)
			break;
	}
	if (*p)
		return errmsg_fail(
		    -EINVAL, err, errlen,
		    "pip package '%.64s' is not a name with an optional "
		    "version "
		    "(no spaces, URLs, paths, markers or options), e.g. "
		    "\"pandas\", \"numpy==1.26.4\" or \"scipy>=1.11,<2\"",
		    s);
	return 0;
}

/* An npm name segment at p (scope or package): its length, or 0. */
static size_t npm_segment_len(const char *p)
{
	size_t n = 0;

	if (!is_alnum(p[0]))
		return 0;
	while (p[n] && (is_alnum(p[n]) || strchr("._~-", p[n]) != NULL))
		n++;
	return n;
}

static int npm_check(const char *spec, const char *s, char *err, size_t errlen)
{
	const char *p = spec;
	size_t n;

	if (*p == '@') {
		n = npm_segment_len(p + 1);
		if (n == 0 || p[1 + n] != '/')
			return errmsg_fail(
			    -EINVAL, err, errlen,
			    "npm package '%.64s': a scoped name is "
			    "@scope/name, e.g. \"@types/node\"",
			    s);
		p += n + 2;
	}
	n = npm_segment_len(p);
	if (n == 0)
		return errmsg_fail(-EINVAL, err, errlen,
		                   "npm package '%.64s' must start with a "
		                   "package name (letters, digits, '.', '_', "
		                   "'~', '-'), e.g. \"zod\" or \"@types/node\"",
		                   s);
	if (archive_suffix(p, n))
		return errmsg_fail(
		    -EINVAL, err, errlen,
		    "npm package '%.64s' names a tarball, and the installer "
		    "would read it as a local file; packages come from the "
		    "registry by name, e.g. \"zod\" or \"date-fns@3.6.0\"",
		    s);
	p += n;
	if (*p == '@' && p[1]) {
		const char *v = ++p;

		p += strspn(
		    p, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXY"
		       "Z0123456789.^~<>=*+_|-");
		if (!*p && archive_suffix(v, (size_t)(p - v)))
			return errmsg_fail(
			    -EINVAL, err, errlen,
			    "npm package '%.64s': the version names a "
			    "tarball file; give a version, range or tag, "
			    "e.g. \"date-fns@3.6.0\" or \"zod@^3\"",
			    s);
	}
	if (*p)
		return errmsg_fail(
		    -EINVAL, err, errlen,
		    "npm package '%.64s' is not a name with an optional "
		    "version "
		    "(no spaces, URLs, git or file specs, aliases or options), "
		    "e.g. \"zod\", \"date-fns@3.6.0\" or \"@scope/pkg@^1.2\"",
		    s);
	return 0;
}

/* spec as a message may show it: 64 bytes, '?' for what is not printable */
static void packages_shown(const char *spec, char out[65])
{
	size_t i;

	for (i = 0; i < 64 && spec[i]; i++)
		out[i] = (unsigned char)spec[i] < 0x20 ||
		                 (unsigned char)spec[i] >= 0x7f
		             ? '?'
		             : spec[i];
	out[i] = '\0';
}

int packages_check_spec(const char *manager, const char *spec, char *err,
                        size_t errlen)
{
	char shown[65];

	if (!spec || !spec[0])
		return errmsg_fail(-EINVAL, err, errlen,
		                   "a package must be a non-empty name, e.g. "
		                   "\"pandas\"");
	if (strlen(spec) > PACKAGES_SPEC_MAX)
		return errmsg_fail(-EINVAL, err, errlen,
		                   "a package name is longer than %d bytes, "
		                   "e.g. \"pandas\" is a good one",
		                   PACKAGES_SPEC_MAX);
	packages_shown(spec, shown);
	if (strcmp(manager, "pip") == 0)
		return pip_check(spec, shown, err, errlen);
	if (strcmp(manager, "npm") == 0)
		return npm_check(spec, shown, err, errlen);
	if (strcmp(manager, "cran") == 0)
		return packages_cran_check(spec, shown, err, errlen);
	return errmsg_fail(-EINVAL, err, errlen, "unknown package manager %.8s",
	                   manager);
}

/* pip's normal form of a name (PEP 503, '_' for the separator). */
static void pip_normalize(const char *p, size_t n, char *out, size_t outlen)
{
	size_t o = 0;
	bool sep = false;

	for (size_t i = 0; i < n && o + 1 < outlen; i++) {
		if (p[i] == '-' || p[i] == '_' || p[i] == '.') {
			sep = true;
			continue;
		}
		if (sep && o > 0 && o + 2 < outlen)
			out[o++] = '_';
		sep = false;
		out[o++] = (char)tolower((unsigned char)p[i]);
	}
	out[o] = '\0';
}

/* A plain release version (digits and dots, a pre/post suffix). */
static bool plain_version(const char *v)
{
	return v[0] && isdigit((unsigned char)v[0]) &&
	       strspn(v, "0123456789.abcdefghijklmnopqrstuvwxyz+-") ==
	           strlen(v);
}

bool packages_spec_key(const char *manager, const char *spec, char *name,
                       size_t nlen, char *pin, size_t plen)
{
	name[0] = pin[0] = '\0';
	if (strcmp(manager, "pip") == 0) {
		size_t n = pip_name_len(spec);

		pip_normalize(spec, n, name, nlen);
		if (spec[n] == '\0')
			return true;
		if (strncmp(spec + n, "==", 2) == 0 && spec[n + 2] != '=' &&
		    plain_version(spec + n + 2) && !strchr(spec + n + 2, ',')) {
			snprintf(pin, plen, "%s", spec + n + 2);
			return true;
		}
		return false;
	}
	if (strcmp(manager, "npm") == 0) {
		const char *at = strchr(spec + (spec[0] == '@'), '@');
		size_t n = at ? (size_t)(at - spec) : strlen(spec);

		snprintf(name, nlen, "%.*s", (int)n, spec);
		if (!at)
			return true;
		if (isdigit((unsigned char)at[1]) &&
		    strspn(at + 1, "0123456789.") == strlen(at + 1) &&
		    strchr(at + 1, '.') != strrchr(at + 1, '.')) {
			snprintf(pin, plen, "%s", at + 1);
			return true;
		}
		return false;
	}
	if (strcmp(manager, "cran") == 0) {
		packages_cran_key(spec, name, nlen, pin, plen);
		return true;
	}
	return false;
}

/* ---- the cache ---------------------------------------------------------- */

/*
 * The directory pip --prefix installed into (python/lib/python3.N/
 * site-packages from the installer's venv; python/local/lib/python3.N/
 * dist-packages, Debian's scheme, in a cache an older installer made),
 * found by reading directories, never by following the "site" link the
 * code could have replaced. The venv's first, as the installer script
 * links it. An O_DIRECTORY fd, or -1.
 */
static int pip_site_fd(int wsfd)
{
	static const char *const schemes[][2] = {
	    {".mcp/packages/python/lib", "site-packages"},
	    {".mcp/packages/python/local/lib", "dist-packages"}};
	char rel[256];
	int fd = -1;

	for (size_t i = 0; fd < 0 && i < 2; i++) {
		int lfd =
		    fstree_open(wsfd, schemes[i][0], O_RDONLY | O_DIRECTORY, 0);
		DIR *d = lfd >= 0 ? fdopendir(lfd) : NULL;
		struct dirent *e;

		if (!d) {
			if (lfd >= 0)
				close(lfd);
			continue;
		}
		while (fd < 0 && (e = readdir(d)))
			if (strncmp(e->d_name, "python3.", 8) == 0 &&
			    strspn(e->d_name + 8, "0123456789") ==
			        strlen(e->d_name + 8) &&
			    (size_t)snprintf(rel, sizeof(rel), "%s/%s/%s",
			                     schemes[i][0], e->d_name,
			                     schemes[i][1]) < sizeof(rel))
				fd = fstree_open(wsfd, rel,
				                 O_RDONLY | O_DIRECTORY, 0);
		closedir(d);
	}
	return fd;
}

/* Whether the pip cache has "<name>-<version>.dist-info". */
static bool pip_cached(int wsfd, const char *name, const char *pin)
{
	int dfd = pip_site_fd(wsfd);
	DIR *d;
	struct dirent *e;
	bool found = false;
	size_t seen = 0;

	if (dfd < 0)
		return false;
	d = fdopendir(dfd);
	if (!d) {
		close(dfd);
		return false;
	}
	while (!found && seen++ < PACKAGES_DIR_SCAN_MAX && (e = readdir(d))) {
		const char *end = strstr(e->d_name, ".dist-info");
		const char *dash;
		char norm[PACKAGES_SPEC_MAX + 1];

		if (!end || end[10] != '\0')
			continue;
		dash = end;
		while (dash > e->d_name && dash[-1] != '-')
			dash--;
		if (dash == e->d_name)
			continue;
		pip_normalize(e->d_name, (size_t)(dash - 1 - e->d_name), norm,
		              sizeof(norm));
		if (strcmp(norm, name) != 0)
			continue;
		found = !pin[0] || ((size_t)(end - dash) == strlen(pin) &&
		                    strncmp(dash, pin, strlen(pin)) == 0);
	}
	closedir(d);
	return found;
}

/* The "version" of node_modules/<name>/package.json, or "" (into out). */
static void npm_version(int wsfd, const char *name, char *out, size_t outlen)
{
	char rel[PACKAGES_SPEC_MAX + 64];
	struct stat st;
	char *text = NULL;
	cJSON *j = NULL;
	const char *v;
	ssize_t got;
	int fd;

	out[0] = '\0';
	if ((size_t)snprintf(rel, sizeof(rel),
	                     ".mcp/packages/node/node_modules/%s/package.json",
	                     name) >= sizeof(rel))
		return;
	fd = fstree_open_regular(wsfd, rel, &st);
	if (fd < 0)
		return;
	if (st.st_size <= 0 || st.st_size > (off_t)PACKAGES_JSON_MAX ||
	    !(text = malloc((size_t)st.st_size + 1)))
		goto out;
	got = read(fd, text, (size_t)st.st_size);
	if (got <= 0)
		goto out;
	text[got] = '\0';
	j = cJSON_Parse(text);
	v = cJSON_GetStringValue(
	    cJSON_GetObjectItemCaseSensitive(j, "version"));
	if (v && strlen(v) < outlen)
		snprintf(out, outlen, "%s", v);
	else
		snprintf(out, outlen, "?");
out:
	cJSON_Delete(j);
	free(text);
	close(fd);
}

bool packages_cached(int wsfd, const char *manager, const char *spec)
{
	char name[PACKAGES_SPEC_MAX + 1], pin[PACKAGES_SPEC_MAX + 1];
	char have[64];

	if (!packages_spec_key(manager, spec, name, sizeof(name), pin,
	                       sizeof(pin)) ||
	    !name[0])
		return false;
	if (strcmp(manager, "pip") == 0)
		return pip_cached(wsfd, name, pin);
	if (strcmp(manager, "cran") == 0)
		return packages_cran_cached(wsfd, name, pin);
	npm_version(wsfd, name, have, sizeof(have));
	return have[0] && (!pin[0] || strcmp(have, pin) == 0);
}

/* Reads the cache's package.json (bounded, no link followed); NULL if none. */
static cJSON *npm_cache_manifest(int wsfd)
{
	struct stat st;
	char *text = NULL;
	cJSON *j = NULL;
	ssize_t got;
	int fd;

	if (wsfd < 0)
		return NULL;
	fd = fstree_open_regular(wsfd, ".mcp/packages/node/package.json", &st);
	if (fd < 0)
		return NULL;
	if (st.st_size > 0 && st.st_size <= (off_t)PACKAGES_JSON_MAX &&
	    (text = malloc((size_t)st.st_size + 1)) != NULL &&
	    (got = read(fd, text, (size_t)st.st_size)) > 0) {
		text[got] = '\0';
		j = cJSON_Parse(text);
	}
	free(text);
	close(fd);
	return j;
}

int packages_npm_manifest(int wsfd, const char *const *specs, size_t n,
                          char **json, size_t *dropped)
{
	cJSON *old = npm_cache_manifest(wsfd), *out = cJSON_CreateObject();
	cJSON *deps = out ? cJSON_AddObjectToObject(out, "dependencies") : NULL;
	const cJSON *e;
	size_t kept = 0;
	int rc = 0;

	*json = NULL;
	*dropped = 0;
	if (!deps || !cJSON_AddTrueToObject(out, "private")) {
		rc = -ENOMEM;
		goto out;
	}
	cJSON_ArrayForEach (
	    e, cJSON_GetObjectItemCaseSensitive(old, "dependencies")) {
		char spec[PACKAGES_SPEC_MAX + 2], err[8];
		char name[PACKAGES_SPEC_MAX + 1], pin[PACKAGES_SPEC_MAX + 1];
		const char *v = cJSON_GetStringValue(e);
		bool again = false;

		/* Only name@version as a caller could have asked for it. */
		if (!e->string || !v || !v[0] || kept >= PACKAGES_KEEP_MAX ||
		    (size_t)snprintf(spec, sizeof(spec), "%s@%s", e->string,
		                     v) >= sizeof(spec) ||
		    packages_check_spec("npm", spec, err, sizeof(err)) < 0) {
			++*dropped;
			continue;
		}
		packages_spec_key("npm", spec, name, sizeof(name), pin,
		                  sizeof(pin));
		if (strcmp(name, e->string) != 0) {
			++*dropped;
			continue;
		}
		for (size_t i = 0; i < n && !again; i++) {
			char sn[PACKAGES_SPEC_MAX + 1];

			packages_spec_key("npm", specs[i], sn, sizeof(sn), pin,
			                  sizeof(pin));
			again = strcmp(sn, e->string) == 0;
		}
		if (again ||
		    cJSON_GetObjectItemCaseSensitive(deps, e->string) != NULL)
			continue;
		if (!cJSON_AddStringToObject(deps, e->string, v)) {
			rc = -ENOMEM;
			goto out;
		}
		kept++;
	}
	*json = cJSON_PrintUnformatted(out);
	if (!*json)
		rc = -ENOMEM;
out:
	cJSON_Delete(old);
	cJSON_Delete(out);
	return rc;
}

/* ---- the installer ------------------------------------------------------- */

/*
 * Run by sh -c in the runner image: $1 the cache directory, $2 the size cap
 * in KiB (0: none), $3 the npm manifest (package.json) we wrote, then the
 * installer's argv.
 *
 * The installer works in /stage (ONEOFF_STAGE_PATH), a directory of its
 * own that no code of the conversation can write, with HOME there and an
 * environment of our making (env -i: no proxy or registry variable of the
 * image either). Nothing under /data is its working directory or
 * configuration: bun reads package.json, lockfiles, .env*, bunfig.toml and
 * .npmrc from its working directory, and code of the conversation writes
 * /data (a leftover thread of a warm session even while we install).
 *
 * npm: bun adds the specs to our manifest in /stage/work; package.json and
 * node_modules then replace the cache as a whole. pip: pip (-I --isolated,
 * reading no file of the cache), run from a venv in /stage that sees the
 * image's packages, installs into the cache with --prefix, so that what is
 * there and what the image has satisfy dependencies; its temporary files
 * are in /stage too.
 */
static const char packages_script[] =
    "umask 022\n"
    "d=$1 max=$2 manifest=$3\n"
    "shift 3\n"
    "s=" ONEOFF_STAGE_PATH "\n"
    "mkdir -p \"$s/home\" \"$s/tmp\" \"$s/work\" && cd \"$s/work\" || exit 71\n"
    "case $d in */node) printf '%s\\n' \"$manifest\" >package.json || exit "
    "71;;\n"
    /* pip: Debian 13's pip cannot uninstall what Debian installed (no
     * RECORD file) and stops when a spec replaces one of the image's
     * packages. Run from a venv that sees the system's packages, it leaves
     * those alone ("outside environment") and installs into the prefix, as
     * Debian 12's pip did; dependencies the image has still satisfy. */
    "  *) mkdir -p \"$d\" || exit 71\n"
    "     python3 -m venv --system-site-packages --without-pip \"$s/venv\" "
    "|| exit 71\n"
    "     PATH=\"$s/venv/bin:$PATH\";; esac\n"
    "ca=\n"
    "[ -f /sandbox/ca.pem ] && ca=NODE_EXTRA_CA_CERTS=/sandbox/ca.pem\n"
    "env -i PATH=\"$PATH\" LANG=C.UTF-8 HOME=\"$s/home\" TMPDIR=\"$s/tmp\" "
    "BUN_INSTALL_CACHE_DIR=\"$s/tmp/bun\" $ca \"$@\" || exit $?\n"
    "case $d in */node)\n"
    "  if [ \"$max\" -gt 0 ]; then\n"
    "    kb=$(du -sk . | cut -f1)\n"
    "    if [ \"$kb\" -gt \"$max\" ]; then\n"
    "      echo \"mcp-sandboxd: the package cache would take $((kb / 1024)) "
    "MB, more than the $((max / 1024)) MB allowed "
    "(SANDBOX_PACKAGES_MAX_MB); it was left as it was\" >&2\n"
    "      exit 75\n"
    "    fi\n"
    "  fi\n"
    /* A new cache beside the old one, then a rename: a failure (the
     * workspace's quota) leaves the old one whole. */
    "  n=${d%/*}/.node.$$\n"
    "  mkdir -p \"${d%/*}\" && rm -rf \"$n\" && mkdir \"$n\" &&\n"
    "    cp -a package.json \"$n/\" &&\n"
    "    { [ ! -d node_modules ] || cp -a node_modules \"$n/\"; } &&\n"
    "    rm -rf \"$d\" && mv \"$n\" \"$d\" || { rm -rf \"$n\"; exit 73; }\n"
    "  exit 0;; esac\n"
    "cd \"$d\" || exit 71\n"
    /* pip --prefix: link the version's directory as site; a package
     * installed again leaves the metadata of the version it replaced:
     * keep the newest of each name. */
    "seen=' '\n"
    "for s in lib/python3*/site-packages local/lib/python3*/dist-packages; "
    "do [ -d \"$s\" ] && [ ! -L \"$s\" ] && { rm -rf site; ln -s \"$s\" site; "
    "break; }; done\n"
    "for i in $(ls -dt -- \"$d\"/site/*.dist-info 2>/dev/null); do\n"
    "  b=${i%.dist-info}\n"
    "  n=$(basename \"${b%-*}\" | tr 'A-Z.-' 'a-z__' | tr -s _)\n"
    "  case $seen in *\" $n \"*) rm -rf \"$i\";; *) seen=\"$seen$n \";; "
    "esac\n"
    "done\n"
    "if [ \"$max\" -gt 0 ]; then\n"
    "  kb=$(du -sk \"$d\" | cut -f1)\n"
    "  if [ \"$kb\" -gt \"$max\" ]; then\n"
    "    echo \"mcp-sandboxd: the package cache would take $((kb / 1024)) "
    "MB, more than the $((max / 1024)) MB allowed "
    "(SANDBOX_PACKAGES_MAX_MB); it was emptied\" >&2\n"
    "    rm -rf \"$d\"\n"
    "    exit 75\n"
    "  fi\n"
    "fi\n";

/* The host of an http:// URL (for pip's --trusted-host), else "". */
/* SANDBOX_PACKAGES_NETWORK=egress (packages.h). */
static bool packages_through_egress(const struct config *cfg)
{
	return cfg->packages_network &&
	       strcmp(cfg->packages_network, PACKAGES_NETWORK_EGRESS) == 0;
}

static void http_host(const char *url, char *out, size_t outlen)
{
	const char *h, *end;

	out[0] = '\0';
	if (strncmp(url, "http://", 7) != 0)
		return;
	h = url + 7;
	end = h + strcspn(h, "/?#");
	if (memchr(h, '@', (size_t)(end - h)))
		h = (const char *)memchr(h, '@', (size_t)(end - h)) + 1;
	if ((size_t)(end - h) < outlen)
		snprintf(out, outlen, "%.*s", (int)(end - h), h);
}

int packages_command(const struct config *cfg, const char *manager, bool ca,
                     const char *manifest, const char *const *specs, size_t n,
                     struct packages_cmd *c)
{
	size_t k = 0;

	if (strcmp(manager, "cran") == 0)
		return packages_cran_command(cfg, specs, n, c);
	memset(c, 0, sizeof(*c));
	if (n == 0 || n > PACKAGES_MAX)
		return -EINVAL;
	snprintf(c->max_kb, sizeof(c->max_kb), "%llu",
	         (unsigned long long)cfg->packages_max_mb * 1024ull);
	c->argv[k++] = "sh";
	c->argv[k++] = "-c";
	c->argv[k++] = packages_script;
	c->argv[k++] = "sh";
	if (strcmp(manager, "pip") == 0) {
		static const char *const pip[] = {"python3",
		                                  "-I",
		                                  "-m",
		                                  "pip",
		                                  "install",
		                                  "--isolated",
		                                  "--no-input",
		                                  "--disable-pip-version-check",
		                                  "--no-cache-dir",
		                                  "--no-warn-script-location",
		                                  "--progress-bar",
		                                  "off",
		                                  "--only-binary=:all:",
		                                  "--prefix",
		                                  PACKAGES_PYTHON_DIR};

		c->argv[k++] = PACKAGES_PYTHON_DIR;
		c->argv[k++] = c->max_kb;
		c->argv[k++] = "";
		for (size_t i = 0; i < sizeof(pip) / sizeof(pip[0]); i++)
			c->argv[k++] = pip[i];
		c->argv[k++] = "--index-url";
		c->argv[k++] = cfg->pip_index;
		/* --isolated makes pip ignore HTTP(S)_PROXY: say it. */
		if (packages_through_egress(cfg)) {
			c->argv[k++] = "--proxy";
			c->argv[k++] =
			    "http://" BACKEND_EGRESS_PROXY_ALIAS ":3128";
		}
		http_host(cfg->pip_index, c->host, sizeof(c->host));
		if (c->host[0]) {
			c->argv[k++] = "--trusted-host";
			c->argv[k++] = c->host;
		}
		if (ca) {
			c->argv[k++] = "--cert";
			c->argv[k++] = "/sandbox/ca.pem";
		}
		c->argv[k++] = "--";
	} else if (strcmp(manager, "npm") == 0) {
		if (!manifest)
			return -EINVAL;
		c->argv[k++] = PACKAGES_DIR "/node";
		c->argv[k++] = c->max_kb;
		c->argv[k++] = manifest;
		c->argv[k++] = "bun";
		c->argv[k++] = "add";
		c->argv[k++] = "--ignore-scripts";
		c->argv[k++] = "--no-progress";
		c->argv[k++] = "--no-summary";
		c->argv[k++] = "--registry";
		c->argv[k++] = cfg->npm_registry;
	} else {
		return -EINVAL;
	}
	for (size_t i = 0; i < n; i++)
		c->argv[k++] = specs[i];
	c->argc = k;
	return 0;
}

void packages_first_error(const char *text, char *out, size_t outlen)
{
	const char *p = text;

	out[0] = '\0';
	while (p && *p) {
		const char *eol = strchr(p, '\n');
		size_t len = eol ? (size_t)(eol - p) : strlen(p);

		while (len && (*p == ' ' || *p == '\t')) {
			p++;
			len--;
		}
		if ((len > 6 && strncmp(p, "ERROR:", 6) == 0) ||
		    (len > 6 && strncmp(p, "error:", 6) == 0) ||
		    (len > 14 && strncmp(p, "mcp-sandboxd: ", 14) == 0)) {
			size_t o = 0;

			for (size_t i = 0; i < len && o + 1 < outlen; i++)
				out[o++] =
				    (unsigned char)p[i] < ' ' || p[i] == 0x7f
				        ? ' '
				        : p[i];
			out[o] = '\0';
			return;
		}
		p = eol ? eol + 1 : NULL;
	}
}

/* What each failure looks like in pip's (urllib3's) and bun's words. */
static const struct {
	enum packages_failure kind;
	const char *needle;
} packages_signs[] = {
    {PACKAGES_FAIL_CERT, "CERTIFICATE_VERIFY_FAILED"},
    {PACKAGES_FAIL_CERT, "certificate verify failed"},
    {PACKAGES_FAIL_CERT, "problem confirming the ssl certificate"},
    {PACKAGES_FAIL_CERT, "SSLError"},
    {PACKAGES_FAIL_CERT, "SELF_SIGNED_CERT"},
    {PACKAGES_FAIL_CERT, "UNABLE_TO_GET_ISSUER_CERT"},
    {PACKAGES_FAIL_CERT, "UNABLE_TO_VERIFY_LEAF_SIGNATURE"},
    {PACKAGES_FAIL_CERT, "CERT_HAS_EXPIRED"},
    {PACKAGES_FAIL_CERT, "CERT_NOT_YET_VALID"},
    {PACKAGES_FAIL_CERT, "CERT_UNTRUSTED"},
    {PACKAGES_FAIL_CERT, "ERR_TLS_CERT_ALTNAME_INVALID"},
    {PACKAGES_FAIL_CERT, "TLSHandshake"},
    {PACKAGES_FAIL_CERT, "SSL certificate problem"}, /* libcurl (R) */
    {PACKAGES_FAIL_TIMEOUT, "ReadTimeoutError"},
    {PACKAGES_FAIL_TIMEOUT, "ConnectTimeoutError"},
    {PACKAGES_FAIL_TIMEOUT, "timed out"},
    {PACKAGES_FAIL_TIMEOUT, "ETIMEDOUT"},
    {PACKAGES_FAIL_TIMEOUT, "Timeout"},
    {PACKAGES_FAIL_TIMEOUT, "TimedOut"},
    {PACKAGES_FAIL_UNREACHABLE, "Connection refused"},
    {PACKAGES_FAIL_UNREACHABLE, "ConnectionRefused"},
    {PACKAGES_FAIL_UNREACHABLE, "ECONNREFUSED"},
    {PACKAGES_FAIL_UNREACHABLE, "Name or service not known"},
    {PACKAGES_FAIL_UNREACHABLE, "Temporary failure in name resolution"},
    {PACKAGES_FAIL_UNREACHABLE, "No address associated with hostname"},
    {PACKAGES_FAIL_UNREACHABLE, "DNSResolveFailed"},
    {PACKAGES_FAIL_UNREACHABLE, "ENOTFOUND"},
    {PACKAGES_FAIL_UNREACHABLE, "No route to host"},
    {PACKAGES_FAIL_UNREACHABLE, "Network is unreachable"},
    {PACKAGES_FAIL_UNREACHABLE, "NetworkUnreachable"},
    {PACKAGES_FAIL_UNREACHABLE, "HostUnreachable"},
    {PACKAGES_FAIL_UNREACHABLE, "EHOSTUNREACH"},
    {PACKAGES_FAIL_UNREACHABLE, "ENETUNREACH"},
    {PACKAGES_FAIL_UNREACHABLE, "Failed to establish a new connection"},
    {PACKAGES_FAIL_UNREACHABLE, "ConnectionClosed"},
    {PACKAGES_FAIL_UNREACHABLE, "ECONNRESET"},
    /* libcurl's words, as R's download functions repeat them */
    {PACKAGES_FAIL_UNREACHABLE, "Could not connect to server"},
    {PACKAGES_FAIL_UNREACHABLE, "Couldn't connect to server"},
    {PACKAGES_FAIL_UNREACHABLE, "Could not resolve host"},
    {PACKAGES_FAIL_UNREACHABLE, "Couldn't resolve host"},
};

/*
 * bun's "error: GET <url> - <status>", or R's "status was '<status> ...'",
 * with a status that is not 404.
 */
static bool http_error_line(const char *p, size_t len)
{
	const char *dash, *r = memmem(p, len, "status was '", 12);

	if (r && (size_t)(r - p) + 15 <= len && isdigit((unsigned char)r[12]) &&
	    isdigit((unsigned char)r[13]) && isdigit((unsigned char)r[14]))
		return strncmp(r + 12, "404", 3) != 0;
	if (len < 14 || strncmp(p, "error: GET ", 11) != 0)
		return false;
	for (dash = p + len - 1; dash > p && *dash != ' '; dash--)
		;
	return dash - p >= 3 && strncmp(dash - 2, " - ", 3) == 0 &&
	       p + len - dash == 4 && isdigit((unsigned char)dash[1]) &&
	       strncmp(dash + 1, "404", 3) != 0;
}

enum packages_failure packages_diagnose(const char *text, char *line,
                                        size_t linelen)
{
	enum packages_failure best = PACKAGES_FAIL_OTHER;
	const char *p = text, *at = NULL;
	size_t at_len = 0;

	if (line && linelen)
		line[0] = '\0';
	/* The first line that shows a cause; a certificate before the rest
	 * (an untrusted certificate is also a failed connection). */
	while (p && *p && best != PACKAGES_FAIL_CERT) {
		const char *eol = strchr(p, '\n');
		size_t len = eol ? (size_t)(eol - p) : strlen(p);
		enum packages_failure k = PACKAGES_FAIL_OTHER;
		const char *hit = p;

		for (size_t i = 0;
		     i < sizeof(packages_signs) / sizeof(packages_signs[0]);
		     i++) {
			const char *m =
			    memmem(p, len, packages_signs[i].needle,
			           strlen(packages_signs[i].needle));

			if (m && (k == PACKAGES_FAIL_OTHER ||
			          packages_signs[i].kind < k)) {
				k = packages_signs[i].kind;
				hit = m;
			}
		}
		if (k == PACKAGES_FAIL_OTHER && http_error_line(p, len))
			k = PACKAGES_FAIL_HTTP;
		if (k != PACKAGES_FAIL_OTHER &&
		    (best == PACKAGES_FAIL_OTHER || k < best)) {
			/* From the start of the word that says it: pip's
			 * lines begin with pages of retry details. */
			while (hit > p && (is_alnum(hit[-1]) || hit[-1] == '_'))
				hit--;
			best = k;
			at = hit;
			at_len = len - (size_t)(hit - p);
		}
		p = eol ? eol + 1 : NULL;
	}
	if (at && line && linelen) {
		size_t o = 0;

		for (size_t i = 0; i < at_len && o + 1 < linelen; i++)
			line[o++] = (unsigned char)at[i] < ' ' || at[i] == 0x7f
			                ? ' '
			                : at[i];
		line[o] = '\0';
	}
	return best;
}

/* Reads SANDBOX_PACKAGES_CA_FILE; NULL with err when it cannot. */
static char *packages_read_ca(const char *path, size_t *len, char *err,
                              size_t errlen)
{
	struct buf b;
	char chunk[8192];
	FILE *f = fopen(path, "re");
	size_t got;
	char *text;

	if (!f) {
		errmsg_set(err, errlen,
		           "cannot read SANDBOX_PACKAGES_CA_FILE %s: %s", path,
		           strerror(errno));
		return NULL;
	}
	buf_init(&b, PACKAGES_CA_MAX);
	while ((got = fread(chunk, 1, sizeof(chunk), f)) > 0) {
		if (buf_append(&b, chunk, got) < 0) {
			errmsg_set(err, errlen,
			           "SANDBOX_PACKAGES_CA_FILE %s is larger than "
			           "%u bytes (or memory ran out)",
			           path, PACKAGES_CA_MAX);
			fclose(f);
			buf_finish(&b);
			return NULL;
		}
	}
	fclose(f);
	text = buf_take(&b, len);
	buf_finish(&b);
	if (!text)
		errmsg_set(err, errlen, "out of memory");
	return text;
}

/* ---- one installation ---------------------------------------------------- */

/* What packages_prepare worked out before the installer ran. */
struct packages_plan {
	const char *manager;
	const char *missing[PACKAGES_MAX];
	size_t n_missing;
	cJSON *reused;       /* in the conversation's cache */
	cJSON *preinstalled; /* in the image (sandbox.libraries) */
};

/*
 * Whether the image has spec preinstalled: a bare name, or an exact pin
 * of the version it has, among the image's libraries ("name version").
 */
static bool packages_preinstalled(const struct catalog_image *img,
                                  const char *spec)
{
	char name[PACKAGES_SPEC_MAX + 1], pin[PACKAGES_SPEC_MAX + 1];
	char lib[PACKAGES_SPEC_MAX + 1];
	bool pip = strcmp(img->packages, "pip") == 0;

	if (!packages_spec_key(img->packages, spec, name, sizeof(name), pin,
	                       sizeof(pin)))
		return false;
	for (size_t i = 0; i < img->n_libraries; i++) {
		const char *l = img->libraries[i], *sp = strchr(l, ' ');
		size_t n = sp ? (size_t)(sp - l) : strlen(l);

		if (n > PACKAGES_SPEC_MAX)
			continue;
		if (pip)
			pip_normalize(l, n, lib, sizeof(lib));
		else
			snprintf(lib, sizeof(lib), "%.*s", (int)n, l);
		if (strcmp(lib, name) == 0)
			return !pin[0] || (sp && strcmp(sp + 1, pin) == 0);
	}
	return false;
}

/*
 * pip's word on conflicts it left ("x 1.0 requires y<2, but you have y 3
 * which is incompatible."): up to 4 such lines of text into arr.
 */
void packages_conflicts(const char *text, cJSON *arr)
{
	const char *p = text;

	while (p && *p && cJSON_GetArraySize(arr) < 4) {
		const char *eol = strchr(p, '\n');
		size_t len = eol ? (size_t)(eol - p) : strlen(p);
		char line[300];

		if (len < sizeof(line)) {
			memcpy(line, p, len);
			line[len] = '\0';
			if (strstr(line, " requires ") &&
			    strstr(line, ", but you have ")) {
				for (char *c = line; *c; c++)
					if ((unsigned char)*c < ' ' ||
					    *c == 0x7f)
						*c = ' ';
				cJSON_AddItemToArray(arr,
				                     cJSON_CreateString(line));
			}
		}
		p = eol ? eol + 1 : NULL;
	}
}

/* Appends "; <before><count><after>" to the note when count is not 0. */
static void packages_note_add(struct runner_result *res, int *n,
                              const char *before, int count, const char *after)
{
	if (count <= 0 || *n < 0 || (size_t)*n >= sizeof(res->packages_note))
		return;
	*n += snprintf(res->packages_note + *n,
	               sizeof(res->packages_note) - (size_t)*n, "%s%s%d%s",
	               *n ? "; " : "", before, count, after);
}

/* res->packages_json and packages_note; ir is NULL when nothing ran. */
static void packages_report(const struct packages_plan *pl,
                            const struct runner_result *ir, bool ok,
                            struct runner_result *res)
{
	cJSON *j = cJSON_CreateObject(), *inst, *warn = NULL;
	const char *first;
	int n;

	cJSON_AddStringToObject(j, "manager", pl->manager);
	inst = cJSON_AddArrayToObject(j, "installed");
	for (size_t i = 0; ok && i < pl->n_missing; i++)
		cJSON_AddItemToArray(inst, cJSON_CreateString(pl->missing[i]));
	cJSON_AddItemReferenceToObject(j, "reused", pl->reused);
	if (cJSON_GetArraySize(pl->preinstalled) > 0)
		cJSON_AddItemReferenceToObject(j, "preinstalled",
		                               pl->preinstalled);
	if (ir && ok && (warn = cJSON_CreateArray()) != NULL) {
		packages_conflicts(ir->out.text ? ir->out.text : "", warn);
		packages_conflicts(ir->err.text ? ir->err.text : "", warn);
		if (cJSON_GetArraySize(warn) > 0)
			cJSON_AddItemToObject(j, "warnings", warn);
		else
			cJSON_Delete(warn);
	}
	if (ir) {
		cJSON_AddNumberToObject(j, "install_ms",
		                        (double)ir->duration_ms);
		if (ir->cpu_ms >= 0)
			cJSON_AddNumberToObject(j, "install_cpu_ms",
			                        (double)ir->cpu_ms);
	}
	cJSON_AddStringToObject(
	    j, "cache",
	    strcmp(pl->manager, "pip") == 0    ? PACKAGES_PYTHON_DIR
	    : strcmp(pl->manager, "cran") == 0 ? PACKAGES_R_DIR
	                                       : PACKAGES_NODE_MODULES);
	if (!ok)
		cJSON_AddBoolToObject(j, "failed", true);
	res->packages_json = cJSON_PrintUnformatted(j);
	first = cJSON_GetStringValue(cJSON_GetArrayItem(
	    cJSON_GetObjectItemCaseSensitive(j, "warnings"), 0));
	n = 0;
	if (ir && ok)
		n = snprintf(res->packages_note, sizeof(res->packages_note),
		             "installed %zu (%s, %.1f s)", pl->n_missing,
		             pl->manager, (double)ir->duration_ms / 1000.0);
	packages_note_add(res, &n, "reused ", cJSON_GetArraySize(pl->reused),
	                  " from the cache");
	packages_note_add(res, &n, "", cJSON_GetArraySize(pl->preinstalled),
	                  " preinstalled in the image");
	if (first && n >= 0 && (size_t)n < sizeof(res->packages_note))
		snprintf(res->packages_note + n, sizeof(res->packages_note) - n,
		         "; pip warns: %s", first);
	cJSON_Delete(j);
}

/*
 * The message of an installer that exited non-zero: what it ran into when
 * its output shows that (certificate, unreachable index, timeout, HTTP
 * error) and the setting that fixes it, else its own first error.
 */
static void packages_failed_message(const struct config *cfg,
                                    const char *manager,
                                    const struct runner_result *ir,
                                    const char *first,
                                    struct runner_result *res)
{
	bool pip = strcmp(manager, "pip") == 0;
	bool cran = strcmp(manager, "cran") == 0;
	const char *who = pip ? "pip" : cran ? "the R installer" : "bun add";
	const char *where = pip    ? cfg->pip_index
	                    : cran ? cfg->cran_repos
	                           : cfg->npm_registry;
	const char *setting = pip    ? "SANDBOX_PACKAGES_PIP_INDEX"
	                      : cran ? "SANDBOX_PACKAGES_CRAN_REPOS"
	                             : "SANDBOX_PACKAGES_NPM_REGISTRY";
	char line[160];
	enum packages_failure k = packages_diagnose(
	    ir->err.text ? ir->err.text : "", line, sizeof(line));

	if (k == PACKAGES_FAIL_OTHER)
		k = packages_diagnose(ir->out.text ? ir->out.text : "", line,
		                      sizeof(line));
	switch (k) {
	case PACKAGES_FAIL_CERT:
		snprintf(res->message, sizeof(res->message),
		         "%s could not verify the TLS certificate of %s (%s). "
		         "This is the server's setup, not the packages: the "
		         "installer box does not trust that certificate; set "
		         "SANDBOX_PACKAGES_CA_FILE to a CA bundle that does "
		         "(e.g. the host's /etc/ssl/certs/ca-certificates.crt "
		         "behind a TLS-inspecting proxy)",
		         who, where, line);
		break;
	case PACKAGES_FAIL_UNREACHABLE:
		snprintf(res->message, sizeof(res->message),
		         "%s could not reach %s (%s). This is the server's "
		         "setup, not the packages: check %s and that the "
		         "installers' Docker network SANDBOX_PACKAGES_NETWORK "
		         "(%s) reaches it",
		         who, where, line, setting, cfg->packages_network);
		break;
	case PACKAGES_FAIL_TIMEOUT:
		snprintf(res->message, sizeof(res->message),
		         "%s timed out talking to %s (%s). Check %s and "
		         "SANDBOX_PACKAGES_NETWORK (%s); a slow index may "
		         "need a larger SANDBOX_PACKAGES_TIMEOUT_SECONDS (%u)",
		         who, where, line, setting, cfg->packages_network,
		         cfg->packages_timeout_s);
		break;
	case PACKAGES_FAIL_HTTP:
		snprintf(res->message, sizeof(res->message),
		         "%s got an HTTP error from %s (%s). The index "
		         "refused or failed, not the names: check %s, or try "
		         "again later",
		         who, where, line, setting);
		break;
	case PACKAGES_FAIL_OTHER:
	default:
		/* The R installer says itself what was wrong and what to do. */
		if (cran && strncmp(first, "mcp-sandboxd: ", 14) == 0) {
			snprintf(res->message, sizeof(res->message), "%s",
			         first + 14);
			break;
		}
		snprintf(res->message, sizeof(res->message),
		         "%s exited with code %d: %s. Check the names and "
		         "versions (as on %s)",
		         who, ir->exit_code, first[0] ? first : "see stderr",
		         where);
		break;
	}
}

/* A failed installation: res tells the model what the installer said. */
static void packages_failed(const struct config *cfg,
                            const struct packages_plan *pl,
                            struct runner_result *ir, struct runner_result *res)
{
	char first[300] = "";

	packages_first_error(ir->err.text ? ir->err.text : "", first,
	                     sizeof(first));
	if (!first[0])
		packages_first_error(ir->out.text ? ir->out.text : "", first,
		                     sizeof(first));
	res->status = RUNNER_FAILED;
	res->install_failed = true;
	res->exit_code = -1;
	res->duration_ms = 0;
	if (ir->status == RUNNER_TIMED_OUT)
		snprintf(res->message, sizeof(res->message),
		         "installing %s packages took longer than %u s "
		         "(SANDBOX_PACKAGES_TIMEOUT_SECONDS) and was stopped; "
		         "ask for fewer or smaller packages",
		         pl->manager, cfg->packages_timeout_s);
	else if (ir->status == RUNNER_OOM_KILLED)
		snprintf(res->message, sizeof(res->message),
		         "the %s installer ran out of memory; ask for fewer "
		         "packages at once",
		         pl->manager);
	else if (ir->exit_code == PACKAGES_EXIT_TOO_BIG)
		snprintf(res->message, sizeof(res->message),
		         "%s; ask for fewer or smaller packages",
		         first[0] ? first + 14
		                  : "the package cache is too big");
	else if (strstr(ir->err.text ? ir->err.text : "", "No space left") ||
	         strstr(ir->err.text ? ir->err.text : "", "ENOSPC") ||
	         strstr(ir->out.text ? ir->out.text : "", "ENOSPC"))
		snprintf(res->message, sizeof(res->message),
		         "the packages do not fit in this conversation's "
		         "workspace (%zu MB, WORKSPACE_QUOTA_MB, or %u files); "
		         "delete files in /data or ask for fewer packages",
		         cfg->workspace_quota_bytes >> 20,
		         cfg->workspace_max_files);
	else
		packages_failed_message(cfg, pl->manager, ir, first, res);
	/* The installer's output is the output: it says what went wrong. */
	free(res->out.text);
	free(res->err.text);
	res->out = ir->out;
	res->err = ir->err;
	memset(&ir->out, 0, sizeof(ir->out));
	memset(&ir->err, 0, sizeof(ir->err));
}

/*
 * SANDBOX_PACKAGES_NETWORK=egress: the installer goes through the egress
 * proxy, allowed to the manager's index or registry only (its host and
 * port). 0, or -EINVAL with ir->message.
 */
static int packages_egress(const struct config *cfg, const char *manager,
                           struct runner_request *ireq,
                           struct egress_list *allow, struct runner_result *ir)
{
	const char *url =
	    strcmp(manager, "pip") == 0 ? cfg->pip_index : cfg->npm_registry;
	struct egress_list one;

	if (!packages_through_egress(cfg))
		return 0;
	if (strcmp(manager, "cran") != 0) {
		if (egress_url_list(url, allow, ir->message,
		                    sizeof(ir->message)) < 0)
			return -EINVAL;
	} else {
		/* Every repository of SANDBOX_PACKAGES_CRAN_REPOS (at most
		 * CONFIG_CRAN_REPOS_MAX, checked at load). */
		char repo[512];

		memset(allow, 0, sizeof(*allow));
		for (const char *p = cfg->cran_repos; *p;) {
			size_t len = strcspn(p, ",");

			snprintf(repo, sizeof(repo), "%.*s", (int)len, p);
			if (egress_url_list(repo, &one, ir->message,
			                    sizeof(ir->message)) < 0)
				return -EINVAL;
			if (allow->n < EGRESS_RULES_MAX)
				allow->rules[allow->n++] = one.rules[0];
			p += len + (p[len] == ',');
		}
	}
	ireq->network = true;
	ireq->egress = allow;
	return 0;
}

/* An installer's result before it runs (an error says what went wrong). */
static void packages_result_init(const struct config *cfg,
                                 struct runner_result *ir)
{
	memset(ir, 0, sizeof(*ir));
	ir->exit_code = -1;
	ir->cpu_ms = ir->memory_peak_bytes = -1;
	ir->timeout_s = cfg->packages_timeout_s;
}

/*
 * Runs argv in a one-off box of img on the conversation's workspace: with
 * the installers' network and a staging directory when install, without
 * network otherwise (R's second box). ca: the CA bundle for the box, or
 * NULL.
 */
static int packages_box(const struct oneoff_context *env,
                        const struct runner_request *req,
                        const struct catalog_image *img,
                        const char *const *argv, size_t argc, bool install,
                        const char *ca, size_t ca_len, struct runner_result *ir)
{
	const struct config *cfg = env->cfg;
	struct runner_request ireq;
	struct egress_list allow;
	unsigned mem;
	double cpus;

	memset(&ireq, 0, sizeof(ireq));
	/* The installers' network (SANDBOX_PACKAGES_NETWORK): through the
	 * egress proxy, to the index or registry only, when so set. */
	if (install &&
	    packages_egress(cfg, img->packages, &ireq, &allow, ir) < 0) {
		ir->status = RUNNER_ERROR;
		return 0;
	}
	ireq.language = req->language;
	ireq.code = "";
	ireq.argv = argv;
	ireq.n_argv = argc;
	ireq.install = install;
	ireq.aux_name = ca ? "ca.pem" : NULL;
	ireq.aux_text = ca;
	ireq.aux_len = ca_len;
	ireq.timeout_s = cfg->packages_timeout_s;
	/* pip and bun want more than a small run: 512 MB and 1 CPU, or
	 * what the operator allows when that is less. */
	mem = cfg->memory_max_mb < 512 ? cfg->memory_max_mb : 512;
	cpus = cfg->cpus_max < 1.0 ? cfg->cpus_max : 1.0;
	ireq.memory_mb = cfg->memory_mb < mem ? mem : 0;
	ireq.cpus = cfg->cpus < cpus ? cpus : 0;
	ir->memory_mb = ireq.memory_mb ? ireq.memory_mb : cfg->memory_mb;
	ir->cpus = ireq.cpus > 0 ? ireq.cpus : cfg->cpus;
	ireq.workspace_host_path = req->workspace_host_path;
	ireq.workspace = req->workspace;
	ireq.workspace_name = req->workspace_name;
	ireq.one_off = true;
	ireq.tenant = req->tenant;
	ireq.stdout_fd = ireq.stderr_fd = -1;
	ireq.cancel = req->cancel;
	ireq.on_output = req->on_output;
	ireq.on_tick = req->on_tick;
	ireq.event_arg = req->event_arg;
	return oneoff_run(env, &ireq, img, ir);
}

/*
 * R's second box (packages_cran.h): installs, without network, what the
 * first fetched (its output in ir), and leaves in ir the result of both:
 * the second's status and output, their times added.
 */
static int packages_cran_second(const struct oneoff_context *env,
                                const struct runner_request *req,
                                const struct catalog_image *img,
                                const struct packages_plan *pl,
                                struct runner_result *ir)
{
	struct packages_cran_install *c = malloc(sizeof(*c));
	struct runner_result second;
	int rc;

	if (!c) {
		ir->status = RUNNER_ERROR;
		snprintf(ir->message, sizeof(ir->message), "out of memory");
		return 0;
	}
	if (packages_cran_install_command(env->cfg, ir->out.text, pl->missing,
	                                  pl->n_missing, c, ir->message,
	                                  sizeof(ir->message)) < 0) {
		free(c);
		ir->status = RUNNER_ERROR;
		return 0;
	}
	packages_result_init(env->cfg, &second);
	rc = packages_box(env, req, img, c->argv, c->argc, false, NULL, 0,
	                  &second);
	free(c);
	second.duration_ms += ir->duration_ms;
	if (second.cpu_ms >= 0 && ir->cpu_ms > 0)
		second.cpu_ms += ir->cpu_ms;
	runner_result_finish(ir);
	*ir = second;
	return rc;
}

/* Runs the installer for pl->missing in a one-off box of img. */
static int packages_install(const struct oneoff_context *env,
                            const struct runner_request *req,
                            const struct catalog_image *img,
                            const struct packages_plan *pl,
                            struct runner_result *ir)
{
	const struct config *cfg = env->cfg;
	struct packages_cmd cmd;
	char *ca = NULL, *manifest = NULL;
	size_t ca_len = 0;
	int rc;

	packages_result_init(cfg, ir);
	if (cfg->packages_ca_file[0]) {
		ca = packages_read_ca(cfg->packages_ca_file, &ca_len,
		                      ir->message, sizeof(ir->message));
		if (!ca) {
			ir->status = RUNNER_ERROR;
			return 0;
		}
	}
	if (strcmp(pl->manager, "npm") == 0) {
		size_t dropped;

		if (packages_npm_manifest(workspace_dirfd(req->workspace),
		                          pl->missing, pl->n_missing, &manifest,
		                          &dropped) < 0) {
			free(ca);
			ir->status = RUNNER_ERROR;
			snprintf(ir->message, sizeof(ir->message),
			         "out of memory");
			return 0;
		}
		if (dropped)
			log_warnx("packages npm lang=%s: %zu entries of the "
			          "cache's package.json are no name with a "
			          "version and were left out",
			          img->language, dropped);
	}
	rc = packages_command(cfg, pl->manager, ca != NULL, manifest,
	                      pl->missing, pl->n_missing, &cmd);
	if (rc < 0) {
		free(ca);
		cJSON_free(manifest);
		ir->status = RUNNER_ERROR;
		snprintf(ir->message, sizeof(ir->message),
		         "no installer for %s", pl->manager);
		return 0;
	}
	rc = packages_box(env, req, img, cmd.argv, cmd.argc, true, ca, ca_len,
	                  ir);
	free(ca);
	cJSON_free(manifest);
	/* R installs in a second box, without network (packages_cran.h). */
	if (rc == 0 && strcmp(pl->manager, "cran") == 0 &&
	    ir->status == RUNNER_COMPLETED)
		rc = packages_cran_second(env, req, img, pl, ir);
	return rc;
}

/* Which of req's packages the cache lacks; 1 with res filled on refusal. */
static int packages_plan(const struct runner_request *req,
                         const struct catalog_image *img,
                         struct packages_plan *pl, struct runner_result *res)
{
	int wsfd = req->workspace ? workspace_dirfd(req->workspace) : -1;

	memset(pl, 0, sizeof(*pl));
	pl->manager = img->packages;
	pl->reused = cJSON_CreateArray();
	pl->preinstalled = cJSON_CreateArray();
	if (!pl->reused || !pl->preinstalled || wsfd < 0 ||
	    !req->workspace_host_path) {
		res->status = RUNNER_ERROR;
		snprintf(res->message, sizeof(res->message), "%s",
		         pl->reused && pl->preinstalled
		             ? "packages need the conversation's "
		               "workspace, and it is not open"
		             : "out of memory");
		return 1;
	}
	for (size_t i = 0; i < req->n_packages; i++) {
		const char *sp = req->packages[i];

		if (packages_cached(wsfd, pl->manager, sp))
			cJSON_AddItemToArray(pl->reused,
			                     cJSON_CreateString(sp));
		else if (packages_preinstalled(img, sp))
			cJSON_AddItemToArray(pl->preinstalled,
			                     cJSON_CreateString(sp));
		else
			pl->missing[pl->n_missing++] = sp;
	}
	return 0;
}

int packages_prepare(const struct oneoff_context *env,
                     const struct runner_request *req,
                     const struct catalog_image *img, struct runner_result *res)
{
	struct packages_plan pl;
	struct runner_result ir;
	long long t0 = mono_ms();
	int ret = 0;

	if (req->n_packages == 0)
		return 0;
	if (packages_plan(req, img, &pl, res)) {
		cJSON_Delete(pl.reused);
		cJSON_Delete(pl.preinstalled);
		return 1;
	}
	if (pl.n_missing == 0) {
		packages_report(&pl, NULL, true, res);
		cJSON_Delete(pl.reused);
		cJSON_Delete(pl.preinstalled);
		return 0;
	}
	/* An image that vanished is an error with a message, as any. */
	(void)packages_install(env, req, img, &pl, &ir);
	res->packages_cpu_ms = ir.cpu_ms > 0 ? ir.cpu_ms : 0;
	log_info("packages %s lang=%s: %zu to install, %d reused: %s in "
	         "%lld ms",
	         pl.manager, img->language, pl.n_missing,
	         cJSON_GetArraySize(pl.reused), runner_status_name(ir.status),
	         mono_ms() - t0);
	if (ir.status == RUNNER_COMPLETED) {
		packages_report(&pl, &ir, true, res);
	} else if (ir.status == RUNNER_CANCELLED) {
		res->status = RUNNER_CANCELLED;
		snprintf(res->message, sizeof(res->message),
		         "cancelled while installing packages");
		ret = 1;
	} else if (ir.status == RUNNER_ERROR ||
	           ir.status == RUNNER_OUTPUT_LIMIT) {
		res->status = RUNNER_ERROR;
		snprintf(res->message, sizeof(res->message),
		         "installing packages: %.400s",
		         ir.status == RUNNER_ERROR && ir.message[0]
		             ? ir.message
		             : "the installer wrote more output than allowed");
		ret = 1;
	} else {
		packages_report(&pl, &ir, false, res);
		packages_failed(env->cfg, &pl, &ir, res);
		ret = 1;
	}
	runner_result_finish(&ir);
	cJSON_Delete(pl.reused);
	cJSON_Delete(pl.preinstalled);
	return ret;
}
