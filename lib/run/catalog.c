/* SPDX-License-Identifier: MIT */
/*
 * catalog: parsing runner image labels and resolving languages. Invalid
 * labels never abort discovery: the image is skipped with a warning that
 * says which label is wrong.
 */
#include "run/catalog.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/buf.h"
#include "util/log.h"
#include "util/num.h"

#define CATALOG_ALIASES_MAX 16
#define CATALOG_LIBS_MAX 256

static const char *catalog_label(const cJSON *labels, const char *name)
{
	return cJSON_GetStringValue(
	    cJSON_GetObjectItemCaseSensitive(labels, name));
}

/* A copy of s without control characters, at most max bytes. */
static char *catalog_clean_text(const char *s, size_t max)
{
	size_t n = s ? strnlen(s, max) : 0;
	char *o = malloc(n + 1);

	if (!o)
		return NULL;
	for (size_t i = 0; i < n; i++)
		o[i] = (unsigned char)s[i] < 0x20 || s[i] == 0x7f ? ' ' : s[i];
	o[n] = '\0';
	return o;
}

static void catalog_strv_free(char **v, size_t n)
{
	if (!v)
		return;
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

static bool catalog_name_ok(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > CATALOG_NAME_MAX)
		return false;
	if (!((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= '0' && s[0] <= '9')))
		return false;
	return strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789_+.-") == n;
}

/* A lower-case copy of a trimmed language or alias name, or NULL. */
static char *catalog_name_dup(const char *s, size_t len)
{
	char *o;

	while (len && isspace((unsigned char)*s)) {
		s++;
		len--;
	}
	while (len && isspace((unsigned char)s[len - 1]))
		len--;
	if (len == 0 || len > CATALOG_NAME_MAX)
		return NULL;
	o = malloc(len + 1);
	if (!o)
		return NULL;
	for (size_t i = 0; i < len; i++)
		o[i] = (char)tolower((unsigned char)s[i]);
	o[len] = '\0';
	if (!catalog_name_ok(o)) {
		free(o);
		return NULL;
	}
	return o;
}

static bool catalog_filename_ok(const char *s)
{
	size_t n = strlen(s);

	return n > 0 && n <= 64 && s[0] != '.' &&
	       strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
	                 "0123456789._-") == n;
}

/* Splits a comma list into trimmed, non-empty, cleaned entries. */
static int catalog_split(const char *s, size_t max_items, bool names,
                         char ***out, size_t *n)
{
	char **v = NULL;
	size_t cnt = 0;

	*out = NULL;
	*n = 0;
	if (!s || !*s)
		return 0;
	v = calloc(max_items, sizeof(*v));
	if (!v)
		return -ENOMEM;
	while (*s && cnt < max_items) {
		const char *e = strchr(s, ',');
		size_t len = e ? (size_t)(e - s) : strlen(s);
		char *item;

		if (names) {
			item = catalog_name_dup(s, len);
			if (!item)
				log_debug("ignoring invalid alias '%.*s'",
				          (int)(len > 40 ? 40 : len), s);
		} else {
			while (len && isspace((unsigned char)*s)) {
				s++;
				len--;
			}
			while (len && isspace((unsigned char)s[len - 1]))
				len--;
			item = NULL;
			if (len) {
				char tmp[128];

				snprintf(tmp, sizeof(tmp), "%.*s",
				         (int)(len > 127 ? 127 : len), s);
				item = catalog_clean_text(tmp, sizeof(tmp));
				if (!item) {
					catalog_strv_free(v, cnt);
					return -ENOMEM;
				}
			}
		}
		if (item)
			v[cnt++] = item;
		s += len;
		while (*s == ',' || isspace((unsigned char)*s))
			s++;
	}
	*out = v;
	*n = cnt;
	return 0;
}

void catalog_image_finish(struct catalog_image *img)
{
	if (!img)
		return;
	free(img->language);
	catalog_strv_free(img->aliases, img->n_aliases);
	free(img->image);
	free(img->image_id);
	free(img->filename);
	catalog_strv_free(img->command, img->n_command);
	catalog_strv_free(img->check, img->n_check);
	catalog_strv_free(img->kernel, img->n_kernel);
	free(img->watchdog);
	free(img->version);
	free(img->description);
	catalog_strv_free(img->libraries, img->n_libraries);
	memset(img, 0, sizeof(*img));
}

/* A command label (a JSON array of 1..CATALOG_COMMAND_MAX strings). */
static int catalog_parse_argv(const char *label, const char *s, char ***out,
                              size_t *nout, char *err, size_t errlen)
{
	cJSON *j = s ? cJSON_Parse(s) : NULL, *it;
	int n, r = -EINVAL;
	size_t i = 0;

	n = cJSON_GetArraySize(j);
	if (!cJSON_IsArray(j) || n < 1 || n > CATALOG_COMMAND_MAX) {
		snprintf(err, errlen,
		         "%s must be a JSON array of 1 to %d strings", label,
		         CATALOG_COMMAND_MAX);
		goto out;
	}
	*out = calloc((size_t)n, sizeof(char *));
	if (!*out) {
		r = -ENOMEM;
		goto out;
	}
	cJSON_ArrayForEach (it, j) {
		const char *a = cJSON_GetStringValue(it);

		if (!a || !a[0] || strlen(a) > 4096) {
			snprintf(err, errlen,
			         "%s entries must be non-empty strings", label);
			goto out;
		}
		(*out)[i] = strdup(a);
		if (!(*out)[i]) {
			r = -ENOMEM;
			goto out;
		}
		*nout = ++i;
	}
	r = 0;
out:
	cJSON_Delete(j);
	return r;
}

/*
 * sandbox.command (required), sandbox.check and sandbox.kernel (optional;
 * the kernel's argv, e.g. ["bun","/opt/mcp-sandboxd/kernel.ts"]: the agent
 * runs it with --kernel, see docs/agent-protocol.md).
 */
static int catalog_parse_commands(const cJSON *labels,
                                  struct catalog_image *out, char *err,
                                  size_t errlen)
{
	const char *check = catalog_label(labels, "sandbox.check");
	const char *kernel = catalog_label(labels, "sandbox.kernel");
	int r = catalog_parse_argv("sandbox.command",
	                           catalog_label(labels, "sandbox.command"),
	                           &out->command, &out->n_command, err, errlen);

	if (r == 0 && check && check[0])
		r = catalog_parse_argv("sandbox.check", check, &out->check,
		                       &out->n_check, err, errlen);
	if (r == 0 && kernel && kernel[0])
		r = catalog_parse_argv("sandbox.kernel", kernel, &out->kernel,
		                       &out->n_kernel, err, errlen);
	return r;
}

/* sandbox.language and sandbox.filename, both required, and the id. */
static int catalog_parse_identity(const cJSON *labels, const char *id,
                                  struct catalog_image *out, char *err,
                                  size_t errlen)
{
	const char *lang = catalog_label(labels, "sandbox.language");
	const char *file;

	out->language = lang ? catalog_name_dup(lang, strlen(lang)) : NULL;
	if (!out->language) {
		snprintf(err, errlen,
		         "image %.19s: sandbox.language must be a lower-case "
		         "name like 'python' ([a-z0-9][a-z0-9_+.-]*, at most "
		         "%d characters)",
		         id, CATALOG_NAME_MAX);
		return -EINVAL;
	}
	file = catalog_label(labels, "sandbox.filename");
	if (!file || !catalog_filename_ok(file)) {
		snprintf(err, errlen,
		         "image %.19s: sandbox.filename must be a plain file "
		         "name like 'main.py'",
		         id);
		return -EINVAL;
	}
	out->filename = strdup(file);
	out->image_id = strdup(id);
	if (!out->filename || !out->image_id)
		return -ENOMEM;
	return 0;
}

/* sandbox.watchdog, sandbox.packages and sandbox.priority, all optional. */
static int catalog_parse_options(const cJSON *labels, const char *id,
                                 struct catalog_image *out, char *err,
                                 size_t errlen)
{
	const char *wd = catalog_label(labels, "sandbox.watchdog");
	const char *prio, *pk;

	if (wd && wd[0]) {
		if (wd[0] != '/' || strlen(wd) > 256 ||
		    strpbrk(wd, " \t\r\n")) {
			snprintf(err, errlen,
			         "image %.19s: sandbox.watchdog must be an "
			         "absolute path",
			         id);
			return -EINVAL;
		}
		out->watchdog = strdup(wd);
		if (!out->watchdog)
			return -ENOMEM;
	}
	pk = catalog_label(labels, "sandbox.packages");
	if (pk && pk[0]) {
		if (strcmp(pk, "pip") != 0 && strcmp(pk, "npm") != 0) {
			snprintf(err, errlen,
			         "image %.19s: sandbox.packages must be pip or "
			         "npm (the installer run_code's packages use)",
			         id);
			return -EINVAL;
		}
		snprintf(out->packages, sizeof(out->packages), "%s", pk);
	}
	prio = catalog_label(labels, "sandbox.priority");
	if (prio && prio[0]) {
		int64_t p = 0;

		if (num_i64(prio, INT_MIN, INT_MAX, &p) < 0) {
			snprintf(err, errlen,
			         "image %.19s: sandbox.priority must be an "
			         "integer",
			         id);
			return -EINVAL;
		}
		out->priority = (int)p;
	}
	return 0;
}

/* The name to show: the first real tag, else the short id. NULL: ENOMEM. */
static char *catalog_image_name(const cJSON *tags, const char *id)
{
	char shortid[20];
	const cJSON *t;

	cJSON_ArrayForEach (t, tags) {
		const char *v = cJSON_GetStringValue(t);

		if (v && strcmp(v, "<none>:<none>") != 0 && strlen(v) < 256)
			return strdup(v);
	}
	snprintf(shortid, sizeof(shortid), "%.19s", id);
	return strdup(shortid);
}

int catalog_image_parse(const cJSON *s, struct catalog_image *out, char *err,
                        size_t errlen)
{
	const cJSON *labels = cJSON_GetObjectItemCaseSensitive(s, "Labels");
	const cJSON *tags = cJSON_GetObjectItemCaseSensitive(s, "RepoTags");
	const cJSON *created = cJSON_GetObjectItemCaseSensitive(s, "Created");
	const char *id =
	    cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(s, "Id"));
	int r;

	memset(out, 0, sizeof(*out));
	if (!id || strncmp(id, "sha256:", 7) != 0 || strlen(id) != 71 ||
	    strspn(id + 7, "0123456789abcdef") != 64) {
		snprintf(err, errlen, "image summary without a valid Id");
		return -EINVAL;
	}
	if (!cJSON_IsObject(labels) ||
	    !catalog_label(labels, "sandbox.runner") ||
	    strcmp(catalog_label(labels, "sandbox.runner"), "true") != 0) {
		snprintf(err, errlen,
		         "image %.19s is not labelled "
		         "sandbox.runner=true",
		         id);
		return -EINVAL;
	}
	if ((r = catalog_parse_identity(labels, id, out, err, errlen)) < 0 ||
	    (r = catalog_parse_commands(labels, out, err, errlen)) < 0 ||
	    (r = catalog_parse_options(labels, id, out, err, errlen)) < 0)
		goto fail;
	/* From here on only allocations can fail. */
	r = -ENOMEM;
	out->version =
	    catalog_clean_text(catalog_label(labels, "sandbox.version"), 63);
	out->description = catalog_clean_text(
	    catalog_label(labels, "sandbox.description"), 1024);
	if (!out->version || !out->description)
		goto fail;
	if (catalog_split(catalog_label(labels, "sandbox.aliases"),
	                  CATALOG_ALIASES_MAX, true, &out->aliases,
	                  &out->n_aliases) < 0 ||
	    catalog_split(catalog_label(labels, "sandbox.libraries"),
	                  CATALOG_LIBS_MAX, false, &out->libraries,
	                  &out->n_libraries) < 0)
		goto fail;
	out->image = catalog_image_name(tags, id);
	if (!out->image)
		goto fail;
	if (cJSON_IsNumber(created))
		out->created = (long long)created->valuedouble;
	return 0;
fail:
	if (r == -ENOMEM)
		snprintf(err, errlen, "out of memory");
	catalog_image_finish(out);
	return r;
}

/* Ranking among images: priority, then newer, then smaller id. */
static int catalog_rank_cmp(const struct catalog_image *a,
                            const struct catalog_image *b)
{
	if (a->priority != b->priority)
		return a->priority > b->priority ? -1 : 1;
	if (a->created != b->created)
		return a->created > b->created ? -1 : 1;
	return strcmp(a->image_id, b->image_id);
}

static int catalog_lang_rank_cmp(const void *pa, const void *pb)
{
	const struct catalog_image *a = pa, *b = pb;
	int c = strcmp(a->language, b->language);

	return c ? c : catalog_rank_cmp(a, b);
}

static int catalog_rank_cmp_ptr(const void *pa, const void *pb)
{
	const struct catalog_image *const *a = pa, *const *b = pb;

	return catalog_rank_cmp(*a, *b);
}

static void catalog_free(struct catalog *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->n; i++)
		catalog_image_finish(&c->items[i]);
	free(c->items);
	free(c->fingerprint_);
	free(c);
}

/* Keeps only the aliases img may have, given the winners ranked before. */
static void catalog_filter_aliases(struct catalog_image *img,
                                   struct catalog_image *const *ranked,
                                   size_t before, const struct catalog *c)
{
	size_t k = 0;

	for (size_t i = 0; i < img->n_aliases; i++) {
		char *a = img->aliases[i];
		bool drop = false;

		for (size_t j = 0; j < c->n && !drop; j++)
			drop = strcmp(c->items[j].language, a) == 0;
		for (size_t j = 0; j < before && !drop; j++)
			for (size_t m = 0; m < ranked[j]->n_aliases && !drop;
			     m++)
				drop = strcmp(ranked[j]->aliases[m], a) == 0;
		for (size_t j = 0; j < k && !drop; j++)
			drop = strcmp(img->aliases[j], a) == 0;
		if (drop)
			free(a);
		else
			img->aliases[k++] = a;
	}
	img->n_aliases = k;
}

static int catalog_fingerprint(struct catalog *c)
{
	struct buf b;
	int r = 0;

	buf_init(&b, 0);
	for (size_t i = 0; i < c->n && r == 0; i++) {
		const struct catalog_image *m = &c->items[i];

		r = buf_printf(&b, "%s\x1f%s\x1f%s\x1f%s\x1f%s\x1f%s\x1f",
		               m->language, m->image_id, m->image, m->version,
		               m->description, m->filename);
		for (size_t j = 0; r == 0 && j < m->n_aliases; j++)
			r = buf_printf(&b, "a:%s,", m->aliases[j]);
		for (size_t j = 0; r == 0 && j < m->n_libraries; j++)
			r = buf_printf(&b, "l:%s,", m->libraries[j]);
		for (size_t j = 0; r == 0 && j < m->n_kernel; j++)
			r = buf_printf(&b, "k:%s,", m->kernel[j]);
		if (r == 0)
			r = buf_putc(&b, '\x1e');
	}
	if (r == 0) {
		c->fingerprint_ = buf_take(&b, NULL);
		if (!c->fingerprint_)
			r = -ENOMEM;
	}
	buf_finish(&b);
	return r;
}

int catalog_build(const cJSON *summaries, struct catalog **out)
{
	struct catalog *c = NULL;
	struct catalog_image *all = NULL, **ranked = NULL;
	size_t n = 0, cap = (size_t)cJSON_GetArraySize(summaries), k = 0;
	const cJSON *s;
	char err[256];
	int r = -ENOMEM;

	*out = NULL;
	c = calloc(1, sizeof(*c));
	all = calloc(cap ? cap : 1, sizeof(*all));
	if (!c || !all)
		goto fail;
	c->refs_ = 1;
	cJSON_ArrayForEach (s, summaries) {
		if (n == cap)
			break;
		r = catalog_image_parse(s, &all[n], err, sizeof(err));
		if (r == -ENOMEM)
			goto fail;
		if (r < 0) {
			log_warnx("skipping runner image: %s", err);
			continue;
		}
		n++;
	}
	if (n > 1)
		qsort(all, n, sizeof(*all), catalog_lang_rank_cmp);
	/* The first of each language group wins; the rest are dropped. */
	for (size_t i = 0; i < n; i++) {
		if (k > 0 &&
		    strcmp(all[k - 1].language, all[i].language) == 0) {
			log_debug("runner image %s for '%s' is shadowed by %s "
			          "(lower sandbox.priority, older, or larger "
			          "id)",
			          all[i].image, all[i].language,
			          all[k - 1].image);
			catalog_image_finish(&all[i]);
			continue;
		}
		if (k != i) {
			all[k] = all[i];
			memset(&all[i], 0, sizeof(all[i]));
		}
		k++;
	}
	c->items = all;
	c->n = k;
	all = NULL;
	ranked = calloc(k ? k : 1, sizeof(*ranked));
	if (!ranked)
		goto fail;
	for (size_t i = 0; i < k; i++)
		ranked[i] = &c->items[i];
	if (k > 1)
		qsort(ranked, k, sizeof(*ranked), catalog_rank_cmp_ptr);
	for (size_t i = 0; i < k; i++)
		catalog_filter_aliases(ranked[i], ranked, i, c);
	free(ranked);
	r = catalog_fingerprint(c);
	if (r < 0)
		goto fail;
	*out = c;
	return 0;
fail:
	if (all) {
		for (size_t i = 0; i < n; i++)
			catalog_image_finish(&all[i]);
		free(all);
	}
	catalog_free(c);
	return -ENOMEM;
}

const struct catalog_image *catalog_find(const struct catalog *c,
                                         const char *name)
{
	char low[CATALOG_NAME_MAX + 1];
	size_t n;

	if (!c || !name)
		return NULL;
	n = strlen(name);
	if (n == 0 || n > CATALOG_NAME_MAX)
		return NULL;
	for (size_t i = 0; i <= n; i++)
		low[i] = (char)tolower((unsigned char)name[i]);
	for (size_t i = 0; i < c->n; i++)
		if (strcmp(c->items[i].language, low) == 0)
			return &c->items[i];
	for (size_t i = 0; i < c->n; i++)
		for (size_t j = 0; j < c->items[i].n_aliases; j++)
			if (strcmp(c->items[i].aliases[j], low) == 0)
				return &c->items[i];
	return NULL;
}

/* The languages of c (those with a check only, when checkable). */
enum catalog_which { CATALOG_ALL, CATALOG_CHECKABLE, CATALOG_INSTALLABLE };

static void catalog_list(const struct catalog *c, enum catalog_which which,
                         char *out, size_t len)
{
	size_t off = 0;

	if (len == 0)
		return;
	out[0] = '\0';
	for (size_t i = 0; c && i < c->n && off < len; i++) {
		const struct catalog_image *m = &c->items[i];
		int w;

		if ((which == CATALOG_CHECKABLE && m->n_check == 0) ||
		    (which == CATALOG_INSTALLABLE && !m->packages[0]))
			continue;
		w = snprintf(out + off, len - off, "%s%s", off ? ", " : "",
		             m->language);
		if (w >= 0 && which == CATALOG_INSTALLABLE &&
		    off + (size_t)w < len)
			w += snprintf(out + off + (size_t)w,
			              len - off - (size_t)w, " (%s)",
			              m->packages);
		if (w < 0)
			break;
		off += (size_t)w;
	}
	if (off == 0)
		snprintf(out, len, "none");
}

void catalog_languages(const struct catalog *c, char *out, size_t len)
{
	catalog_list(c, CATALOG_ALL, out, len);
}

void catalog_checkable(const struct catalog *c, char *out, size_t len)
{
	catalog_list(c, CATALOG_CHECKABLE, out, len);
}

void catalog_installable(const struct catalog *c, char *out, size_t len)
{
	catalog_list(c, CATALOG_INSTALLABLE, out, len);
}

struct catalog *catalog_ref(struct catalog *c)
{
	__atomic_add_fetch(&c->refs_, 1, __ATOMIC_RELAXED);
	return c;
}

void catalog_put(struct catalog *c)
{
	if (c && __atomic_sub_fetch(&c->refs_, 1, __ATOMIC_ACQ_REL) == 0)
		catalog_free(c);
}

bool catalog_same(const struct catalog *a, const struct catalog *b)
{
	return strcmp(a->fingerprint_, b->fingerprint_) == 0;
}
