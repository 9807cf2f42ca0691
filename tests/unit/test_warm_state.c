/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for warm_state: the kernel's state report (hostile JSON from
 * the box) checked field by field, what a report says was loaded, and
 * dropping a conversation's saved state without following links.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "run/warm/warm_state.h"
#include "tap.h"

/* warm_state_take of text, printed back compactly ("" for NULL). */
static char *take(const char *text)
{
	cJSON *in = cJSON_Parse(text), *out;
	char *s;

	out = warm_state_take(in);
	s = out ? cJSON_PrintUnformatted(out) : strdup("");
	cJSON_Delete(in);
	cJSON_Delete(out);
	return s;
}

static void test_take(void)
{
	char *s;

	s = take("{\"saved\":{\"run\":3,\"ok\":true,\"bytes\":960,\"ms\":2,"
	         "\"not_saved\":[{\"name\":\"g\",\"why\":\"a generator\"}],"
	         "\"error\":null,\"extra\":1},\"restored\":null,\"run\":4,"
	         "\"kept\":[1,2,3]}");
	is_str(s,
	       "{\"run\":4,\"kept\":[1,2,3],\"saved\":{\"ok\":true,\"run\":3,"
	       "\"bytes\":960,\"ms\":2,\"not_saved\":[{\"name\":\"g\",\"why\":"
	       "\"a generator\"}]}}",
	       "a save report: known fields only, null error left out");
	free(s);

	s = take("{\"restored\":{\"kind\":\"rewind\",\"run\":2,\"saved_at\":"
	         "1795893960.7,\"ms\":140,\"names\":6,\"imports\":[\"json as "
	         "j\",7,\"os\"],\"not_restored\":[{\"name\":\"t\",\"why\":"
	         "\"a thread\"},{\"why\":\"no name\"}]}}");
	is_str(
	    s,
	    "{\"restored\":{\"kind\":\"rewind\",\"saved_at\":\"2026-11-28T"
	    "19:26:00Z\",\"run\":2,\"ms\":140,\"names\":6,\"imports\":["
	    "\"json as j\",\"os\"],\"not_restored\":[{\"name\":\"t\",\"why\":"
	    "\"a thread\"}]}}",
	    "a rewind: the time as ISO 8601, entries of the wrong type "
	    "dropped");
	free(s);

	s = take("{\"restored\":{\"kind\":\"anything\",\"run\":-1,\"ms\":1e300,"
	         "\"saved_at\":\"x\"},\"run\":\"4\",\"kept\":[0,-2,1.5,"
	         "\"x\"],\"saved\":[]}");
	is_str(s, "{\"kept\":[1],\"restored\":{\"kind\":\"restore\"}}",
	       "numbers out of range, a kind not known and a list as saved "
	       "are not passed on");
	free(s);

	s = take("[1,2]");
	is_str(s, "", "not an object: NULL");
	free(s);
	ok(warm_state_take(NULL) == NULL, "NULL: NULL");
}

static void test_bounds(void)
{
	size_t big = 3 * WARM_STATE_TEXT_MAX;
	char *text = malloc(big + 4096), *s;
	size_t off = 0;
	cJSON *o;
	const cJSON *list, *err;

	off += (size_t)sprintf(text + off, "{\"saved\":{\"error\":\"");
	/* é repeated: a cut must not split one. */
	for (size_t i = 0; i < big / 2; i++)
		off += (size_t)sprintf(text + off, "\xc3\xa9");
	off += (size_t)sprintf(text + off, "\",\"not_saved\":[");
	for (int i = 0; i < 120; i++)
		off += (size_t)sprintf(text + off,
		                       "%s{\"name\":\"n%d\",\"why\":"
		                       "\"w\xff\"}",
		                       i ? "," : "", i);
	sprintf(text + off, "]}}");
	s = take(text);
	o = cJSON_Parse(s);
	list = cJSON_GetObjectItemCaseSensitive(
	    cJSON_GetObjectItemCaseSensitive(o, "saved"), "not_saved");
	err = cJSON_GetObjectItemCaseSensitive(
	    cJSON_GetObjectItemCaseSensitive(o, "saved"), "error");
	is_int(cJSON_GetArraySize(list), WARM_STATE_NAMES_MAX,
	       "names cut to the maximum");
	ok(cJSON_IsString(err) &&
	       strlen(err->valuestring) <= WARM_STATE_TEXT_MAX &&
	       strlen(err->valuestring) % 2 == 0,
	   "a long string is cut at a character boundary");
	free(s);
	free(text);
	cJSON_Delete(o);
}

static void test_loaded(void)
{
	cJSON *a = cJSON_Parse("{\"restored\":{\"kind\":\"restore\"}}");
	cJSON *b = cJSON_Parse("{\"restored\":{\"kind\":\"rewind\"}}");
	cJSON *c = cJSON_Parse(
	    "{\"restored\":{\"kind\":\"restore\",\"error\":\"no dill\"}}");
	cJSON *e = cJSON_Parse("{\"saved\":{}}");

	is_str(warm_state_loaded(a), "restore", "a restore");
	is_str(warm_state_loaded(b), "rewind", "a rewind");
	ok(warm_state_loaded(c) == NULL, "a failed restore loaded nothing");
	ok(warm_state_loaded(e) == NULL, "no restore");
	ok(warm_state_loaded(NULL) == NULL, "no report");
	cJSON_Delete(a);
	cJSON_Delete(b);
	cJSON_Delete(c);
	cJSON_Delete(e);
}

static bool exists(const char *root, const char *rel)
{
	char p[512];
	struct stat sb;

	snprintf(p, sizeof(p), "%s/%s", root, rel);
	return lstat(p, &sb) == 0;
}

static void test_drop(void)
{
	char root[] = "/tmp/test_warm_state.XXXXXX", outside[] =
	                                                 "/tmp/test_warm_state_"
	                                                 "out.XXXXXX";
	char p[512];
	int fd;

	if (!mkdtemp(root) || !mkdtemp(outside)) {
		ok(false, "temporary directories");
		return;
	}
	fd = open(root, O_PATH | O_DIRECTORY);
	is_int(warm_state_drop(fd, "python"), 0, "nothing to drop: 0");
	tap_mkdir(root, ".mcp");
	tap_mkdir(root, ".mcp/state");
	tap_mkdir(root, ".mcp/state/python");
	tap_put(root, ".mcp/state/python/run-1.state", "x");
	tap_put(root, ".mcp/state/bash", "y");
	tap_put(root, ".mcp/keep.txt", "z");
	is_int(warm_state_drop(fd, "python"), 0, "drop");
	ok(!exists(root, ".mcp/state/python"), "the language's state is gone");
	ok(exists(root, ".mcp/state/bash") && exists(root, ".mcp/keep.txt"),
	   "nothing else is touched");

	/* A link the code planted is removed, never followed. */
	tap_mkdir(outside, "python");
	tap_put(outside, "python/run-1.state", "victim");
	snprintf(p, sizeof(p), "%s/.mcp/state", root);
	{
		char cmd[1200];

		snprintf(cmd, sizeof(cmd), "rm -rf %s && ln -s %s %s", p,
		         outside, p);
		ok(system(cmd) == 0, "state replaced by a link");
	}
	is_int(warm_state_drop(fd, "python"), 0, "drop through a link");
	ok(!exists(root, ".mcp/state"), "the link is gone");
	ok(exists(outside, "python/run-1.state"), "its target is untouched");
	close(fd);
	snprintf(p, sizeof(p), "rm -rf %s %s", root, outside);
	ok(system(p) == 0, "cleanup");
}

int main(void)
{
	test_take();
	test_bounds();
	test_loaded();
	test_drop();
	return tap_done();
}
