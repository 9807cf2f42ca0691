/* SPDX-License-Identifier: MIT */
/*
 * test_catalog: runner image labels and the deterministic resolution of
 * languages and aliases.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "run/catalog.h"
#include "tap.h"
#include "util/log.h"

#define ID(c)                                                                  \
	"sha256:" c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c  \
	    c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c  \
	        c

/* An image summary as GET /images/json returns it. */
static cJSON *summary(const char *id, const char *tag, long long created,
                      const char *lang, const char *aliases,
                      const char *priority)
{
	cJSON *s = cJSON_CreateObject(), *l, *tags;

	cJSON_AddStringToObject(s, "Id", id);
	tags = cJSON_AddArrayToObject(s, "RepoTags");
	if (tag)
		cJSON_AddItemToArray(tags, cJSON_CreateString(tag));
	cJSON_AddNumberToObject(s, "Created", (double)created);
	l = cJSON_AddObjectToObject(s, "Labels");
	cJSON_AddStringToObject(l, "sandbox.runner", "true");
	if (lang)
		cJSON_AddStringToObject(l, "sandbox.language", lang);
	if (aliases)
		cJSON_AddStringToObject(l, "sandbox.aliases", aliases);
	if (priority)
		cJSON_AddStringToObject(l, "sandbox.priority", priority);
	cJSON_AddStringToObject(l, "sandbox.filename", "main.py");
	cJSON_AddStringToObject(l, "sandbox.command",
	                        "[\"python3\",\"-u\",\"/sandbox/main.py\"]");
	cJSON_AddStringToObject(l, "sandbox.watchdog", "/usr/bin/timeout");
	cJSON_AddStringToObject(l, "sandbox.version", "3.11.2");
	cJSON_AddStringToObject(l, "sandbox.description",
	                        "Python\twith\nnumpy");
	cJSON_AddStringToObject(l, "sandbox.libraries",
	                        "numpy 1.24.2, pandas 1.5.3,,");
	return s;
}

static void set_label(cJSON *s, const char *k, const char *v)
{
	cJSON *l = cJSON_GetObjectItemCaseSensitive(s, "Labels");

	cJSON_DeleteItemFromObjectCaseSensitive(l, k);
	if (v)
		cJSON_AddStringToObject(l, k, v);
}

static void test_parse(void)
{
	struct catalog_image img;
	char err[256];
	cJSON *s;

	s = summary(ID("a"), "mcp-sandboxd/runner-python:latest", 100, "Python",
	            " py, Python3 ,bad alias!,", "100");
	is_int(catalog_image_parse(s, &img, err, sizeof(err)), 0,
	       "complete labels parse");
	is_str(img.language, "python", "language lower-cased");
	is_int(img.n_aliases, 2, "invalid alias dropped");
	is_str(img.n_aliases > 1 ? img.aliases[1] : NULL, "python3",
	       "aliases trimmed and lower-cased");
	is_str(img.image, "mcp-sandboxd/runner-python:latest", "tag shown");
	is_str(img.image_id, ID("a"), "image id kept");
	is_int(img.n_command, 3, "command array");
	is_str(img.watchdog, "/usr/bin/timeout", "watchdog");
	is_str(img.description, "Python with numpy",
	       "control characters removed from the description");
	is_int(img.n_libraries, 2, "libraries split, empty entries dropped");
	is_str(img.n_libraries ? img.libraries[1] : NULL, "pandas 1.5.3",
	       "library entry");
	is_int(img.priority, 100, "priority");
	is_int(img.created, 100, "created");
	catalog_image_finish(&img);

	cJSON_DeleteItemFromObjectCaseSensitive(s, "RepoTags");
	is_int(catalog_image_parse(s, &img, err, sizeof(err)), 0, "untagged");
	is_str(img.image, "sha256:aaaaaaaaaaaa", "untagged: short id shown");
	catalog_image_finish(&img);

	set_label(s, "sandbox.language", "rust lang");
	is_int(catalog_image_parse(s, &img, err, sizeof(err)), -EINVAL,
	       "bad language refused");
	ok(strstr(err, "sandbox.language") != NULL, "message names the label");
	set_label(s, "sandbox.language", "python");
	set_label(s, "sandbox.filename", "../main.py");
	is_int(catalog_image_parse(s, &img, err, sizeof(err)), -EINVAL,
	       "filename with a path refused");
	set_label(s, "sandbox.filename", "main.py");
	set_label(s, "sandbox.command", "python3 main.py");
	is_int(catalog_image_parse(s, &img, err, sizeof(err)), -EINVAL,
	       "command that is not a JSON array refused");
	set_label(s, "sandbox.command", "[\"python3\", 1]");
	is_int(catalog_image_parse(s, &img, err, sizeof(err)), -EINVAL,
	       "command with a non-string refused");
	set_label(s, "sandbox.command", "[\"python3\"]");
	is_int(catalog_image_parse(s, &img, err, sizeof(err)), 0,
	       "sandbox.check is optional");
	ok(img.check == NULL && img.n_check == 0, "no check without the label");
	catalog_image_finish(&img);
	set_label(s, "sandbox.check", "[\"bash\",\"-n\",\"/sandbox/main.sh\"]");
	is_int(catalog_image_parse(s, &img, err, sizeof(err)), 0,
	       "sandbox.check parses");
	is_int(img.n_check, 3, "check array");
	is_str(img.n_check == 3 ? img.check[1] : NULL, "-n", "check entry");
	catalog_image_finish(&img);
	set_label(s, "sandbox.check", "bash -n main.sh");
	is_int(catalog_image_parse(s, &img, err, sizeof(err)), -EINVAL,
	       "check that is not a JSON array refused");
	ok(strstr(err, "sandbox.check") != NULL, "message names sandbox.check");
	set_label(s, "sandbox.check", "[\"bash\",\"\"]");
	is_int(catalog_image_parse(s, &img, err, sizeof(err)), -EINVAL,
	       "check with an empty entry refused");
	set_label(s, "sandbox.check", NULL);
	ok(catalog_image_parse(s, &img, err, sizeof(err)) == 0 &&
	       img.kernel == NULL && img.n_kernel == 0,
	   "sandbox.kernel is optional");
	catalog_image_finish(&img);
	set_label(s, "sandbox.kernel",
	          "[\"bun\",\"/opt/mcp-sandboxd/kernel.ts\"]");
	is_int(catalog_image_parse(s, &img, err, sizeof(err)), 0,
	       "sandbox.kernel parses");
	is_int(img.n_kernel, 2, "kernel array");
	is_str(img.n_kernel == 2 ? img.kernel[1] : NULL,
	       "/opt/mcp-sandboxd/kernel.ts", "kernel entry");
	catalog_image_finish(&img);
	set_label(s, "sandbox.kernel", "bun kernel.ts");
	is_int(catalog_image_parse(s, &img, err, sizeof(err)), -EINVAL,
	       "kernel that is not a JSON array refused");
	ok(strstr(err, "sandbox.kernel") != NULL,
	   "message names sandbox.kernel");
	set_label(s, "sandbox.kernel", "[]");
	is_int(catalog_image_parse(s, &img, err, sizeof(err)), -EINVAL,
	       "empty kernel refused");
	set_label(s, "sandbox.kernel", NULL);
	set_label(s, "sandbox.watchdog", "timeout");
	is_int(catalog_image_parse(s, &img, err, sizeof(err)), -EINVAL,
	       "relative watchdog refused");
	set_label(s, "sandbox.watchdog", NULL);
	set_label(s, "sandbox.priority", "high");
	is_int(catalog_image_parse(s, &img, err, sizeof(err)), -EINVAL,
	       "non-numeric priority refused");
	set_label(s, "sandbox.priority", NULL);
	set_label(s, "sandbox.packages", "apt");
	is_int(catalog_image_parse(s, &img, err, sizeof(err)), -EINVAL,
	       "unknown package manager refused");
	ok(strstr(err, "sandbox.packages must be pip or npm") != NULL,
	   "message names the managers (%s)", err);
	set_label(s, "sandbox.packages", "npm");
	is_int(catalog_image_parse(s, &img, err, sizeof(err)), 0,
	       "sandbox.packages=npm");
	is_str(img.packages, "npm", "package manager kept");
	catalog_image_finish(&img);
	set_label(s, "sandbox.packages", NULL);
	is_int(catalog_image_parse(s, &img, err, sizeof(err)), 0,
	       "optional labels may be absent");
	ok(img.watchdog == NULL && img.priority == 0 && !img.packages[0],
	   "defaults");
	catalog_image_finish(&img);
	set_label(s, "sandbox.runner", "false");
	is_int(catalog_image_parse(s, &img, err, sizeof(err)), -EINVAL,
	       "sandbox.runner=false refused");
	cJSON_Delete(s);
}

static void test_resolve(void)
{
	cJSON *list = cJSON_CreateArray(), *bad;
	struct catalog *c = NULL;
	const struct catalog_image *m;
	char langs[128];

	/* python: priority decides, then age, then id. */
	cJSON_AddItemToArray(
	    list, summary(ID("1"), "py-low:1", 500, "python", "py", "10"));
	cJSON_AddItemToArray(
	    list, summary(ID("2"), "py-old:1", 100, "python", "py", "100"));
	cJSON_AddItemToArray(
	    list, summary(ID("4"), "py-new-b:1", 200, "python", "py", "100"));
	cJSON_AddItemToArray(
	    list, summary(ID("3"), "py-new-a:1", 200, "python", "py", "100"));
	/* typescript claims "py" and "python" as aliases: it gets neither. */
	cJSON_AddItemToArray(list, summary(ID("5"), "ts:1", 100, "typescript",
	                                   "ts,js,py,python", "100"));
	/* javascript-only image loses "js" to its language owner? No:
	 * "js" is nobody's language, so the better-ranked claimant wins. */
	cJSON_AddItemToArray(
	    list, summary(ID("6"), "node:1", 50, "node", "js,nodejs", "50"));
	bad = summary(ID("7"), "broken:1", 100, NULL, NULL, NULL);
	cJSON_AddItemToArray(list, bad);
	set_label(cJSON_GetArrayItem(list, 3), "sandbox.check",
	          "[\"python3\",\"-c\",\"pass\"]");

	log_set_level(LOG_LEVEL_ERROR);
	is_int(catalog_build(list, &c), 0, "catalog built");
	is_int(c->n, 3, "one runner per language; broken image skipped");
	m = catalog_find(c, "python");
	is_str(m ? m->image_id : NULL, ID("3"),
	       "highest priority, newest, then smallest id wins");
	m = catalog_find(c, "PY");
	is_str(m ? m->language : NULL, "python", "alias, case-insensitive");
	m = catalog_find(c, "js");
	is_str(m ? m->language : NULL, "typescript",
	       "contested alias goes to the better-ranked runner");
	m = catalog_find(c, "nodejs");
	is_str(m ? m->language : NULL, "node", "uncontested alias kept");
	m = catalog_find(c, "typescript");
	is_int(m ? m->n_aliases : 99, 2,
	       "aliases naming another runner's language dropped");
	ok(catalog_find(c, "rust") == NULL, "unknown language: NULL");
	ok(catalog_find(c, "") == NULL, "empty name: NULL");
	catalog_languages(c, langs, sizeof(langs));
	is_str(langs, "node, python, typescript", "languages listed, sorted");
	catalog_checkable(c, langs, sizeof(langs));
	is_str(langs, "python", "only languages with a check are checkable");
	catalog_put(c);

	/* Same input in another order resolves the same way. */
	{
		cJSON *rev = cJSON_CreateArray();
		struct catalog *c2 = NULL;

		for (int i = cJSON_GetArraySize(list) - 1; i >= 0; i--)
			cJSON_AddItemToArray(
			    rev,
			    cJSON_Duplicate(cJSON_GetArrayItem(list, i), true));
		is_int(catalog_build(rev, &c2), 0, "reversed input");
		m = catalog_find(c2, "python");
		is_str(m ? m->image_id : NULL, ID("3"),
		       "resolution does not depend on listing order");
		m = catalog_find(c2, "js");
		is_str(m ? m->language : NULL, "typescript",
		       "alias resolution does not depend on order");
		catalog_put(c2);
		cJSON_Delete(rev);
	}
	cJSON_Delete(list);

	is_int(catalog_build(NULL, &c), 0, "empty catalog");
	catalog_languages(c, langs, sizeof(langs));
	is_str(langs, "none", "empty catalog lists none");
	catalog_checkable(c, langs, sizeof(langs));
	is_str(langs, "none", "empty catalog: nothing checkable");
	catalog_put(c);
}

int main(void)
{
	test_parse();
	test_resolve();
	return tap_done();
}
