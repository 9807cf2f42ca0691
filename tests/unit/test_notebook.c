/* SPDX-License-Identifier: MIT */
/*
 * test_notebook: the conversation notebook's pure logic
 * (tools/notebook/notebook.c): a run's record and its nbformat outputs,
 * the records file (append, load, a torn last line, the caps, a link in
 * its place), the notebook rendered from records, and what replay
 * compares. Each case runs alone: `test_notebook CASE...`
 * (`test_notebook --list`).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tap.h"
#include "tools/notebook/notebook.h"

static const cJSON *get(const cJSON *o, const char *k)
{
	return cJSON_GetObjectItemCaseSensitive(o, k);
}

static const char *str(const cJSON *o, const char *k)
{
	const char *s = cJSON_GetStringValue(get(o, k));

	return s ? s : "(none)";
}

/* The output types of a record or cell, joined by ','. */
static void types_of(const cJSON *rec, char *out, size_t n)
{
	const cJSON *o;
	size_t used = 0;

	out[0] = '\0';
	cJSON_ArrayForEach (o, get(rec, "outputs"))
		if (used < n)
			used += (size_t)snprintf(out + used, n - used, "%s%s",
			                         used ? "," : "",
			                         str(o, "output_type"));
}

static const cJSON *output(const cJSON *rec, const char *type)
{
	const cJSON *o;

	cJSON_ArrayForEach (o, get(rec, "outputs"))
		if (strcmp(str(o, "output_type"), type) == 0)
			return o;
	return NULL;
}

static const unsigned char png[] = {0x89, 'P',  'N', 'G', '\r', '\n',
                                    0x1a, '\n', 0,   0,   0,    0};

/* A Python run that printed, warned, made two figures and raised. */
static cJSON *failed_run(void)
{
	const unsigned char *figs[] = {png, png};
	size_t lens[] = {sizeof(png), sizeof(png)};
	struct notebook_run run = {
	    .language = "python",
	    .code = "print('hi')\nraise KeyError('k')\nIGNORED",
	    .code_len = 32,
	    .status = "failed",
	    .exit_code = 1,
	    .out = "hi\n",
	    .err = "Traceback (most recent call last):\n"
	           "  File \"/tmp/x.py\", line 2\n"
	           "KeyErrorish: not this one\n"
	           "KeyError: 'k'\n",
	    .value_json = NULL,
	    .error_name = "KeyError",
	    .packages_json = "{\"installed\":[\"tabulate\"]}",
	    .figures = figs,
	    .figure_lens = lens,
	    .n_figures = 2,
	};

	return notebook_record(&run);
}

/* A record holds the source, the status and nbformat's outputs. */
static void test_record(void)
{
	char types[256];
	cJSON *rec = failed_run();
	const cJSON *err, *fig;

	ok(rec != NULL, "a record");
	is_str(str(rec, "source"), "print('hi')\nraise KeyError('k')\n",
	       "the source, code_len bytes of it");
	is_str(str(rec, "language"), "python", "the language");
	is_int(cJSON_GetNumberValue(get(rec, "exit_code")), 1, "exit code");
	types_of(rec, types, sizeof(types));
	is_str(types, "stream,stream,display_data,display_data,error",
	       "stdout, stderr, the figures, then the error");
	is_str(str(cJSON_GetArrayItem(get(rec, "outputs"), 0), "name"),
	       "stdout", "stdout first");
	err = output(rec, "error");
	is_str(str(err, "ename"), "KeyError", "ename");
	is_str(str(err, "evalue"), "'k'",
	       "evalue: the last line that names the exception itself");
	is_int(cJSON_GetArraySize(get(err, "traceback")), 4,
	       "the traceback, a line an element");
	fig = output(rec, "display_data");
	is_str(str(get(fig, "data"), "image/png"), "iVBORw0KGgoAAAAA",
	       "the figure in base64");
	ok(cJSON_IsObject(get(fig, "metadata")), "display_data has metadata");
	is_str(str(get(rec, "packages"), "installed") ? "(array)" : "",
	       "(array)", "packages kept");
	ok(cJSON_IsArray(get(get(rec, "packages"), "installed")),
	   "the packages as the run reported them");
	cJSON_Delete(rec);
}

/* The value: a MIME bundle of text; anything else the kernel sent is left
 * out. Figures over the caps are left out. */
static void test_record_value(void)
{
	unsigned char *big = calloc(1, NOTEBOOK_FIGURE_MAX_BYTES + 1);
	const unsigned char *figs[NOTEBOOK_FIGURES_MAX + 3];
	size_t lens[NOTEBOOK_FIGURES_MAX + 3];
	struct notebook_run run = {
	    .language = "python",
	    .code = "df",
	    .code_len = 2,
	    .status = "completed",
	    .out = "",
	    .err = "",
	    .value_json = "{\"text/plain\":\"   a\\n0  1\","
	                  "\"text/html\":\"<table/>\",\"n\":5,\"\":\"x\","
	                  "\"application/json\":{\"deep\":[1]}}",
	    .error_name = "",
	    .figures = figs,
	    .figure_lens = lens,
	    .n_figures = NOTEBOOK_FIGURES_MAX + 3,
	};
	const cJSON *v, *m;
	char types[512], *s;
	cJSON *rec;
	int n = 0;

	figs[0] = big;
	lens[0] = NOTEBOOK_FIGURE_MAX_BYTES + 1;
	for (size_t i = 1; i < NOTEBOOK_FIGURES_MAX + 3; i++) {
		figs[i] = png;
		lens[i] = sizeof(png);
	}
	rec = notebook_record(&run);
	types_of(rec, types, sizeof(types));
	ok(strncmp(types, "execute_result,display_data", 27) == 0,
	   "no empty streams; the value, then figures: %s", types);
	cJSON_ArrayForEach (m, get(rec, "outputs"))
		n += strcmp(str(m, "output_type"), "display_data") == 0;
	is_int(n, NOTEBOOK_FIGURES_MAX - 1,
	       "the figure over the size cap and those past the count cap "
	       "are left out");
	v = get(output(rec, "execute_result"), "data");
	s = cJSON_PrintUnformatted(v);
	is_str(s, "{\"text/plain\":\"   a\\n0  1\",\"text/html\":\"<table/>\"}",
	       "only named text members of the value are kept");
	cJSON_free(s);
	ok(get(rec, "packages") == NULL, "no packages when none reported");
	cJSON_Delete(rec);

	run.value_json = "{\"n\":5}";
	run.n_figures = 0;
	rec = notebook_record(&run);
	types_of(rec, types, sizeof(types));
	is_str(types, "", "a value with no text is no value");
	cJSON_Delete(rec);
	run.value_json = "[1,2]";
	rec = notebook_record(&run);
	types_of(rec, types, sizeof(types));
	is_str(types, "", "nor is one that is not an object");
	cJSON_Delete(rec);
	run.value_json = "{not json";
	rec = notebook_record(&run);
	types_of(rec, types, sizeof(types));
	is_str(types, "", "nor text that is not JSON");
	cJSON_Delete(rec);
	free(big);
}

static cJSON *simple(const char *lang, const char *code, const char *out)
{
	struct notebook_run run = {
	    .language = lang,
	    .code = code,
	    .code_len = strlen(code),
	    .status = "completed",
	    .out = out,
	    .error_name = "",
	};

	return notebook_record(&run);
}

static int tmpdir_fd(char *path, size_t n)
{
	snprintf(path, n, "/tmp/test_notebook.XXXXXX");
	if (!mkdtemp(path))
		return -1;
	return open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
}

static void rm_dir(const char *path, int fd)
{
	(void)unlinkat(fd, NOTEBOOK_RECORDS, 0);
	(void)unlinkat(fd, "elsewhere", 0);
	(void)unlinkat(fd, NOTEBOOK_CELLS, 0);
	(void)unlinkat(fd, NOTEBOOK_META, 0);
	close(fd);
	(void)rmdir(path);
}

/* Records are appended as lines and loaded back; a torn last line and a
 * line that is not an object are left out. */
static void test_records_file(void)
{
	char path[64];
	int fd = tmpdir_fd(path, sizeof(path)), wfd;
	cJSON *recs = NULL, *rec;

	ok(fd >= 0, "a scratch directory");
	is_int(notebook_load(fd, &recs), 0, "no records yet: loads");
	is_int(cJSON_GetArraySize(recs), 0, "as an empty array");
	cJSON_Delete(recs);
	for (int i = 1; i <= 3; i++) {
		char code[32];

		snprintf(code, sizeof(code), "print(%d)", i);
		rec = simple("python", code, "x\n");
		is_int(notebook_append(fd, rec), i, "append returns the count");
		cJSON_Delete(rec);
	}
	wfd = openat(fd, NOTEBOOK_RECORDS, O_WRONLY | O_APPEND);
	ok(write(wfd, "[1]\n{\"torn\":", 12) == 12,
	   "a stray line, then a torn one");
	close(wfd);
	is_int(notebook_load(fd, &recs), 0, "loads");
	is_int(cJSON_GetArraySize(recs), 3, "the three records");
	is_str(str(cJSON_GetArrayItem(recs, 2), "source"), "print(3)",
	       "in order");
	cJSON_Delete(recs);
	rm_dir(path, fd);

	/* A link where the records are is not followed either way. */
	fd = tmpdir_fd(path, sizeof(path));
	rec = simple("python", "1", "");
	is_int(notebook_append(fd, rec), 1, "a record");
	ok(renameat(fd, NOTEBOOK_RECORDS, fd, "elsewhere") == 0 &&
	       symlinkat("elsewhere", fd, NOTEBOOK_RECORDS) == 0,
	   "moved elsewhere, a link in its place");
	ok(notebook_append(fd, rec) < 0, "append refuses to follow it");
	cJSON_Delete(rec);
	recs = NULL;
	ok(notebook_load(fd, &recs) < 0 || cJSON_GetArraySize(recs) == 0,
	   "load does not read through it");
	cJSON_Delete(recs);
	wfd = openat(fd, "elsewhere", O_RDONLY);
	{
		char buf[4096];
		ssize_t n = read(wfd, buf, sizeof(buf));

		ok(n > 0 && memchr(buf, '\n', (size_t)n) == buf + n - 1,
		   "the target still holds its one line");
	}
	close(wfd);
	rm_dir(path, fd);
}

/* The caps: cells, then bytes. */
static void test_records_caps(void)
{
	char path[64], *code;
	int fd = tmpdir_fd(path, sizeof(path)), r = 0;
	cJSON *rec = simple("python", "1", "");

	for (int i = 0; i < NOTEBOOK_MAX_CELLS && r >= 0; i++)
		r = notebook_append(fd, rec);
	is_int(r, NOTEBOOK_MAX_CELLS, "cells up to the cap");
	is_int(notebook_append(fd, rec), -EFBIG, "then -EFBIG");
	cJSON_Delete(rec);
	rm_dir(path, fd);

	fd = tmpdir_fd(path, sizeof(path));
	code = malloc(NOTEBOOK_MAX_BYTES);
	memset(code, 'x', NOTEBOOK_MAX_BYTES - 1);
	code[NOTEBOOK_MAX_BYTES - 1] = '\0';
	rec = simple("python", code, "");
	is_int(notebook_append(fd, rec), -EFBIG,
	       "a record over the byte cap is left out");
	cJSON_Delete(rec);
	rec = simple("python", "small", "");
	is_int(notebook_append(fd, rec), 1, "and the next one fits");
	cJSON_Delete(rec);
	free(code);
	rm_dir(path, fd);
}

/* nbformat 4.5: the kernel, ids, counts, languages and tags. */
static void test_render(void)
{
	cJSON *recs = cJSON_CreateArray(), *nb;
	const cJSON *cells, *c;
	struct notebook_run value = {
	    .language = "python",
	    .code = "1 + 1",
	    .code_len = 5,
	    .status = "completed",
	    .value_json = "{\"text/plain\":\"2\"}",
	    .error_name = "",
	};
	size_t len = 0;
	char *text;

	cJSON_AddItemToArray(recs,
	                     simple("typescript", "console.log(1)", "1\n"));
	cJSON_AddItemToArray(recs, notebook_record(&value));
	cJSON_AddItemToArray(recs, failed_run());
	text = notebook_render(recs, "conv-1", &len);
	ok(text && len == strlen(text), "rendered, with its length");
	nb = cJSON_Parse(text);
	cJSON_free(text);
	is_int(cJSON_GetNumberValue(get(nb, "nbformat")), 4, "nbformat 4");
	is_int(cJSON_GetNumberValue(get(nb, "nbformat_minor")), 5, ".5");
	is_str(str(get(get(nb, "metadata"), "kernelspec"), "name"), "python3",
	       "a Python kernel when a Python cell is there");
	is_str(str(get(get(nb, "metadata"), "mcp-sandboxd"), "conversationId"),
	       "conv-1", "the conversation");
	cells = get(nb, "cells");
	is_int(cJSON_GetArraySize(cells), 3, "a cell per record");

	c = cJSON_GetArrayItem(cells, 0);
	is_str(str(c, "cell_type"), "code", "a code cell");
	is_str(str(c, "id"), "cell-1", "ids from 1");
	is_str(str(get(c, "metadata"), "language"), "typescript",
	       "the language in the metadata");
	is_str(str(get(get(c, "metadata"), "vscode"), "languageId"),
	       "typescript", "and for VS Code");
	ok(tap_json_has(get(get(c, "metadata"), "tags"), "skip-execution"),
	   "a TypeScript cell is skipped by a Python kernel");

	c = cJSON_GetArrayItem(cells, 1);
	is_int(cJSON_GetNumberValue(get(c, "execution_count")), 2,
	       "execution counts from 1");
	is_int(cJSON_GetNumberValue(
	           get(output(c, "execute_result"), "execution_count")),
	       2, "the result names its cell's count");
	ok(get(get(c, "metadata"), "tags") == NULL, "no tags when none apply");
	ok(get(get(c, "metadata"), "vscode") == NULL,
	   "a Python cell needs no languageId");

	c = cJSON_GetArrayItem(cells, 2);
	ok(tap_json_has(get(get(c, "metadata"), "tags"), "raises-exception"),
	   "a cell that raised is tagged so a run goes on");
	is_str(str(get(get(c, "metadata"), "mcp-sandboxd"), "status"), "failed",
	       "the run's status");
	ok(cJSON_IsArray(
	       get(get(get(c, "metadata"), "mcp-sandboxd"), "packages")
	           ? get(get(get(get(c, "metadata"), "mcp-sandboxd"),
	                     "packages"),
	                 "installed")
	           : NULL),
	   "and its packages");
	cJSON_Delete(nb);

	/* Only TypeScript: its kernel; no cell is skipped. */
	cJSON_DeleteItemFromArray(recs, 2);
	cJSON_DeleteItemFromArray(recs, 1);
	text = notebook_render(recs, "conv-2", NULL);
	nb = cJSON_Parse(text);
	cJSON_free(text);
	is_str(str(get(get(nb, "metadata"), "kernelspec"), "name"),
	       "typescript", "the first cell's language names the kernel");
	ok(get(get(cJSON_GetArrayItem(get(nb, "cells"), 0), "metadata"),
	       "tags") == NULL,
	   "nothing to skip without a Python kernel");
	cJSON_Delete(nb);
	cJSON_Delete(recs);

	recs = cJSON_CreateArray();
	text = notebook_render(recs, "conv-3", NULL);
	nb = cJSON_Parse(text);
	cJSON_free(text);
	is_int(cJSON_GetArraySize(get(nb, "cells")), 0, "no records, no cells");
	is_str(str(get(get(nb, "metadata"), "kernelspec"), "name"), "python3",
	       "and Python's kernel");
	cJSON_Delete(nb);
	cJSON_Delete(recs);
}

/* Publishes; 1 when the text equals a full render of the records. */
static int published_matches(int fd, const char *conv)
{
	cJSON *recs = NULL;
	char *text = NULL, *full;
	size_t len = 0, flen = 0;
	int same;

	if (notebook_publish(fd, conv, &text, &len) < 0 ||
	    notebook_load(fd, &recs) < 0) {
		free(text);
		return 0;
	}
	full = notebook_render(recs, conv, &flen);
	same = full && text && len == flen && strcmp(text, full) == 0;
	free(full);
	free(text);
	cJSON_Delete(recs);
	return same;
}

/* Appends rec and publishes; 1 when the text equals a full render. */
static int publish_matches(int fd, cJSON *rec, const char *conv)
{
	return notebook_append(fd, rec) >= 1 && published_matches(fd, conv);
}

/*
 * The kept cells: one run adds one cell, and the text is the full render's
 * byte for byte; through the kernel turning Python (every cell rendered
 * again), a cache a crash left behind and one that was removed.
 */
static void test_publish(void)
{
	char path[64];
	int fd = tmpdir_fd(path, sizeof(path)), all = 1, wfd;
	cJSON *rec;
	struct stat a, b;

	ok(fd >= 0, "a scratch directory");
	for (int i = 0; i < 5; i++) {
		rec = simple(i < 2    ? "bash"
		             : i == 3 ? "python"
		                      : "typescript",
		             "echo 1", "1\n");
		all &= publish_matches(fd, rec, "conv-p");
		cJSON_Delete(rec);
	}
	ok(all, "bash, typescript, then python: each text is the full render");
	ok(fstatat(fd, NOTEBOOK_CELLS, &a, 0) == 0, "the cells are kept");
	rec = simple("python", "print(2)", "2\n");
	ok(publish_matches(fd, rec, "conv-p"), "one more cell");
	ok(fstatat(fd, NOTEBOOK_CELLS, &b, 0) == 0 && b.st_size > a.st_size &&
	       b.st_ino == a.st_ino,
	   "appended to, not rewritten");

	/* A crash after the cells were appended, before the account. */
	wfd = openat(fd, NOTEBOOK_CELLS, O_WRONLY | O_APPEND);
	ok(write(wfd, ",\n{}", 4) == 4, "a cell the account does not know");
	close(wfd);
	ok(publish_matches(fd, rec, "conv-p"), "rebuilt from the records");
	ok(unlinkat(fd, NOTEBOOK_META, 0) == 0, "the account removed");
	ok(publish_matches(fd, rec, "conv-p"), "rebuilt again");
	cJSON_Delete(rec);
	rm_dir(path, fd);
}

/*
 * Runs that follow one another quickly publish once for several records:
 * the cells of all of them are added to the kept ones (appended, not
 * rewritten), past lines that are not records, and an account from before
 * it knew the records' length is rebuilt; append counts from the account.
 */
static void test_publish_catch_up(void)
{
	char path[64];
	int fd = tmpdir_fd(path, sizeof(path)), all = 1, wfd, n = 0;
	cJSON *rec;
	struct stat a, b;

	ok(fd >= 0, "a scratch directory");
	rec = simple("python", "print(1)", "1\n");
	ok(publish_matches(fd, rec, "conv-c"), "a first cell, published");
	ok(fstatat(fd, NOTEBOOK_CELLS, &a, 0) == 0, "the cells are kept");
	for (int i = 0; i < 4; i++)
		n = notebook_append(fd, rec);
	is_int(n, 5, "four more appended: append counts from the account");
	ok(published_matches(fd, "conv-c"), "one publish for the four");
	ok(fstatat(fd, NOTEBOOK_CELLS, &b, 0) == 0 && b.st_size > a.st_size &&
	       b.st_ino == a.st_ino,
	   "their cells appended, not the file rewritten");

	wfd = openat(fd, NOTEBOOK_RECORDS, O_WRONLY | O_APPEND);
	ok(write(wfd, "[1]\n", 4) == 4, "a stray line among the records");
	close(wfd);
	is_int(notebook_append(fd, rec), 7,
	       "it counts as a line when appending");
	ok(published_matches(fd, "conv-c"), "and is left out of the cells");
	for (int i = 0; i < 3; i++) {
		cJSON *r2 = simple(i == 1 ? "bash" : "python", "echo 2", "2\n");

		all &= notebook_append(fd, r2) >= 1;
		cJSON_Delete(r2);
	}
	ok(all && published_matches(fd, "conv-c"),
	   "the cells after it are numbered as a full render numbers them");

	wfd = openat(fd, NOTEBOOK_RECORDS, O_WRONLY | O_APPEND);
	ok(write(wfd, "{\"torn\":", 8) == 8, "a line cut short by a crash");
	close(wfd);
	ok(published_matches(fd, "conv-c"), "left out until it ends");

	wfd = openat(fd, NOTEBOOK_META, O_WRONLY | O_TRUNC);
	ok(write(wfd, "3 10 1 python\n", 14) == 14,
	   "an account from a version without the records' length");
	close(wfd);
	ok(published_matches(fd, "conv-c"), "rebuilt from the records");
	cJSON_Delete(rec);
	rm_dir(path, fd);

	/* The kernel turns Python after two Bash cells, both in one catch-up.
	 */
	fd = tmpdir_fd(path, sizeof(path));
	rec = simple("bash", "echo 1", "1\n");
	ok(publish_matches(fd, rec, "conv-k"), "a Bash cell");
	all = notebook_append(fd, rec) == 2;
	cJSON_Delete(rec);
	rec = simple("python", "print(3)", "3\n");
	all &= notebook_append(fd, rec) == 3;
	cJSON_Delete(rec);
	ok(all && published_matches(fd, "conv-k"),
	   "then Bash and Python: every cell rendered for Python's kernel");
	rm_dir(path, fd);
}

static void diff_is(const cJSON *a, const cJSON *b, const char *want,
                    const char *name)
{
	cJSON *d = notebook_diff(a, b);
	char *s = cJSON_PrintUnformatted(d);

	is_str(s, want, name);
	cJSON_free(s);
	cJSON_Delete(d);
}

/* What replay compares: stdout, the value's text, the exception's type,
 * the number of figures; not stderr. */
static void test_diff(void)
{
	cJSON *a = failed_run(), *b = failed_run();
	cJSON *outs, *o;

	diff_is(a, b, "[]", "a record is the same as itself");
	outs = cJSON_GetObjectItemCaseSensitive(b, "outputs");
	o = cJSON_GetArrayItem(outs, 1);
	cJSON_ReplaceItemInObjectCaseSensitive(
	    o, "text", cJSON_CreateString("a warning at another path\n"));
	diff_is(a, b, "[]", "stderr is not compared");
	o = cJSON_GetArrayItem(outs, 0);
	cJSON_ReplaceItemInObjectCaseSensitive(o, "text",
	                                       cJSON_CreateString("ho\n"));
	diff_is(a, b, "[\"stdout\"]", "stdout differs");
	cJSON_DeleteItemFromArray(outs, 2);
	diff_is(a, b, "[\"stdout\",\"figures\"]", "and a figure is missing");
	o = cJSON_GetArrayItem(outs, cJSON_GetArraySize(outs) - 1);
	cJSON_ReplaceItemInObjectCaseSensitive(
	    o, "ename", cJSON_CreateString("ValueError"));
	diff_is(a, b, "[\"stdout\",\"error\",\"figures\"]",
	        "and another exception");
	cJSON_Delete(b);

	b = simple("python", "print('hi')", "hi\n");
	diff_is(a, b, "[\"error\",\"figures\"]",
	        "no exception and no figures in the replay");
	cJSON_Delete(a);
	cJSON_Delete(b);

	{
		struct notebook_run v = {
		    .language = "python",
		    .code = "x",
		    .code_len = 1,
		    .status = "completed",
		    .value_json = "{\"text/plain\":\"1\"}",
		    .error_name = "",
		};

		a = notebook_record(&v);
		v.value_json = "{\"text/plain\":\"2\"}";
		b = notebook_record(&v);
		diff_is(a, b, "[\"value\"]", "the value's text differs");
		cJSON_Delete(b);
		v.value_json = "{\"text/plain\":\"1\",\"text/html\":\"<b>\"}";
		b = notebook_record(&v);
		diff_is(a, b, "[]", "only its text/plain is compared");
		cJSON_Delete(b);
		cJSON_Delete(a);
	}
}

int main(int argc, char **argv)
{
	static const struct tap_case cases[] = {
	    {"record", test_record},
	    {"record-value", test_record_value},
	    {"records-file", test_records_file},
	    {"records-caps", test_records_caps},
	    {"render", test_render},
	    {"publish", test_publish},
	    {"publish-catch-up", test_publish_catch_up},
	    {"diff", test_diff},
	};

	return tap_run_cases(argc, argv, cases,
	                     sizeof(cases) / sizeof(cases[0]));
}
