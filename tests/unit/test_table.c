/* SPDX-License-Identifier: MIT */
/*
 * test_table: the run viewer's frame parser (tools/view/table.c) on frames
 * as kernel.py writes them and on hostile files (wrong shapes, nesting,
 * sizes), sorting (kinds, nulls last, ties in frame order, descending) and
 * pages. Each case runs alone: `test_table CASE...` (`test_table --list`).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"
#include "tools/view/table.h"

static int parse(const char *s, struct table **t, char *err, size_t errlen)
{
	err[0] = '\0';
	return table_parse(s, strlen(s), t, err, errlen);
}

/* The cells of one column of a page, joined by ',' (numbers as integers). */
static void column_of(const cJSON *page, int col, char *out, size_t n)
{
	const cJSON *row;
	size_t used = 0;

	out[0] = '\0';
	cJSON_ArrayForEach (row,
	                    cJSON_GetObjectItemCaseSensitive(page, "rows")) {
		const cJSON *c = cJSON_GetArrayItem(row, col);
		char cell[64];

		if (cJSON_IsNumber(c))
			snprintf(cell, sizeof(cell), "%g", c->valuedouble);
		else if (cJSON_IsString(c))
			snprintf(cell, sizeof(cell), "%s", c->valuestring);
		else if (cJSON_IsBool(c))
			snprintf(cell, sizeof(cell), "%s",
			         cJSON_IsTrue(c) ? "true" : "false");
		else
			snprintf(cell, sizeof(cell), "null");
		used += (size_t)snprintf(out + used, n - used, "%s%s",
		                         used ? "," : "", cell);
		if (used >= n)
			return;
	}
}

/* A frame in pandas' split layout parses; labels that are not strings are
 * shown as their JSON text. */
static void test_parse_frame(void)
{
	struct table *t = NULL;
	char err[256];
	cJSON *page;
	char *s;

	is_int(parse("{\"columns\":[\"a\",2,[\"x\",\"y\"],null],"
	             "\"data\":[[1,\"one\",true,null],[2.5,\"two\",false,3]]}",
	             &t, err, sizeof(err)),
	       0, "a frame with mixed labels and cells parses");
	is_int(table_rows(t), 2, "two rows");
	is_int(table_columns(t), 4, "four columns");
	page = table_page(t, 0, 10);
	s = cJSON_PrintUnformatted(
	    cJSON_GetObjectItemCaseSensitive(page, "columns"));
	is_str(s, "[\"a\",\"2\",\"[\\\"x\\\",\\\"y\\\"]\",\"null\"]",
	       "labels as strings");
	cJSON_free(s);
	s = cJSON_PrintUnformatted(
	    cJSON_GetObjectItemCaseSensitive(page, "rows"));
	is_str(s, "[[1,\"one\",true,null],[2.5,\"two\",false,3]]",
	       "rows as they were");
	cJSON_free(s);
	is_int(cJSON_GetNumberValue(
	           cJSON_GetObjectItemCaseSensitive(page, "total")),
	       2, "total");
	cJSON_Delete(page);
	table_destroy(t);

	is_int(parse(" {\"data\":[],\"columns\":[\"only\"]} ", &t, err,
	             sizeof(err)),
	       0, "an empty frame (keys in any order, white space)");
	is_int(table_rows(t), 0, "no rows");
	page = table_page(t, 0, 50);
	is_int(
	    cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(page, "rows")),
	    0, "an empty page");
	cJSON_Delete(page);
	table_destroy(t);
	table_destroy(NULL);
	is_int(table_rows(NULL), 0, "a NULL table has no rows");
}

/* What is not a frame is refused with what is wrong. */
static void test_parse_refusals(void)
{
	static const struct {
		const char *text, *why;
		int code;
	} bad[] = {
	    {"", "(empty body)", -EINVAL},
	    {"{\"columns\":[\"a\"],\"data\":[[1]]", "(unexpected end of input)",
	     -EINVAL},
	    {"[[1]]", "an array", -EINVAL},
	    {"\"text\"", "not a JSON object", -EINVAL},
	    {"{\"columns\":[\"a\"]}", "\"columns\" and \"data\"", -EINVAL},
	    {"{\"columns\":\"a\",\"data\":[]}", "\"columns\" and \"data\"",
	     -EINVAL},
	    {"{\"columns\":[],\"data\":[]}", "0 columns", -EINVAL},
	    {"{\"columns\":[\"a\",\"b\"],\"data\":[[1,2],[3]]}",
	     "row 1 is not an array of 2 cells", -EINVAL},
	    {"{\"columns\":[\"a\"],\"data\":[5]}",
	     "row 0 is not an array of 1 cells", -EINVAL},
	    {"{\"columns\":[\"a\"],\"data\":[[{\"x\":1}]]}",
	     "row 0 holds a cell that is not", -EINVAL},
	    {"{\"columns\":[\"a\"],\"data\":[[[1]]]}",
	     "row 0 holds a cell that is not", -EINVAL},
	    {"{\"columns\":[\"a\"],\"data\":[[[[1]]]]}", "(nested too deeply)",
	     -EINVAL},
	};
	struct table *t;
	char err[256];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		t = (struct table *)1;
		is_int(parse(bad[i].text, &t, err, sizeof(err)), bad[i].code,
		       bad[i].text);
		ok(strstr(err, bad[i].why) != NULL, "'%s': '%s' says '%s'",
		   bad[i].text, err, bad[i].why);
		ok(t == NULL, "no table for '%s'", bad[i].text);
	}
}

static char *repeat(const char *head, const char *item, size_t n,
                    const char *tail)
{
	size_t hl = strlen(head), il = strlen(item), tl = strlen(tail);
	char *s = malloc(hl + n * (il + 1) + tl + 1), *p = s;

	memcpy(p, head, hl);
	p += hl;
	for (size_t i = 0; i < n; i++) {
		if (i)
			*p++ = ',';
		memcpy(p, item, il);
		p += il;
	}
	memcpy(p, tail, tl + 1);
	return s;
}

/* Sizes: bytes, values counted before parsing, cells, columns. */
static void test_parse_limits(void)
{
	struct table *t = NULL;
	char err[256], *s;

	is_int(table_parse("{}", (size_t)TABLE_MAX_BYTES + 1, &t, err,
	                   sizeof(err)),
	       -EFBIG, "a file over the byte cap is refused unread");
	ok(strstr(err, "larger than 32 MB") != NULL, "%s", err);

	/*
	 * More values than a table holds: refused before cJSON builds them
	 * (parsed, this data would be refused as a row that is no array).
	 */
	s = repeat("{\"columns\":[\"a\"],\"data\":[", "0", TABLE_MAX_VALUES,
	           "]}");
	is_int(parse(s, &t, err, sizeof(err)), -EFBIG,
	       "more values than a table may hold");
	ok(strstr(err, "holds more than 1000000 cells") != NULL, "%s", err);
	free(s);

	s = repeat("{\"columns\":[\"a\"],\"data\":[", "[0]",
	           TABLE_MAX_CELLS + 1, "]}");
	is_int(parse(s, &t, err, sizeof(err)), -EFBIG,
	       "one row more than the cells a table holds");
	ok(strstr(err, "holds more than 1000000 cells") != NULL, "%s", err);
	free(s);

	/* Exactly the cap in one column parses. */
	s = repeat("{\"columns\":[\"a\"],\"data\":[", "[0]", TABLE_MAX_CELLS,
	           "]}");
	is_int(parse(s, &t, err, sizeof(err)), 0, "a frame at the cap");
	is_int(table_rows(t), TABLE_MAX_CELLS, "all its rows");
	table_destroy(t);
	free(s);

	/* Commas inside strings are not values. */
	s = repeat("{\"columns\":[\"a\"],\"data\":[[\"", ",,,,,,,,,,",
	           TABLE_MAX_CELLS / 4, "\"]]}");
	is_int(parse(s, &t, err, sizeof(err)), 0,
	       "a cell full of commas is one value");
	table_destroy(t);
	free(s);

	s = repeat("{\"columns\":[", "\"c\"", TABLE_MAX_COLUMNS + 1,
	           "],\"data\":[]}");
	is_int(parse(s, &t, err, sizeof(err)), -EINVAL, "too many columns");
	ok(strstr(err, "1001 columns (1 to 1000") != NULL, "%s", err);
	free(s);

	/* 1000 columns x 1001 rows: within the values, over the cells. */
	{
		char *row = repeat("[", "0", TABLE_MAX_COLUMNS, "]");
		char *cols = repeat("{\"columns\":[", "\"c\"",
		                    TABLE_MAX_COLUMNS, "],\"data\":[");

		s = repeat(cols, row, TABLE_MAX_CELLS / TABLE_MAX_COLUMNS + 1,
		           "]}");
		is_int(parse(s, &t, err, sizeof(err)), -EFBIG,
		       "more cells than a table holds");
		ok(strstr(err, "holds more than 1000000 cells") != NULL, "%s",
		   err);
		free(s);
		free(row);
		free(cols);
	}
}

/* Numbers by value, then strings, then booleans; nulls last both ways;
 * ties in the frame's order. */
static void test_sort(void)
{
	struct table *t = NULL;
	char err[256], got[256];
	cJSON *page;

	is_int(parse("{\"columns\":[\"k\",\"id\"],\"data\":["
	             "[null,0],[\"b\",1],[10,2],[true,3],[-1.5,4],"
	             "[\"a\",5],[10,6],[false,7],[2,8],[null,9]]}",
	             &t, err, sizeof(err)),
	       0, "a mixed column parses");
	is_int(table_sort(t, "k", false, err, sizeof(err)), 0, "sort by k");
	page = table_page(t, 0, 50);
	column_of(page, 1, got, sizeof(got));
	is_str(got, "4,8,2,6,5,1,7,3,0,9",
	       "ascending: numbers, strings, false, true, nulls; ties kept");
	cJSON_Delete(page);

	is_int(table_sort(t, "k", true, err, sizeof(err)), 0, "descending");
	page = table_page(t, 0, 50);
	column_of(page, 1, got, sizeof(got));
	is_str(got, "3,7,1,5,2,6,8,4,0,9",
	       "descending: reversed, nulls still last, ties in frame order");
	cJSON_Delete(page);

	is_int(table_sort(t, "missing", false, err, sizeof(err)), -ENOENT,
	       "no such column");
	is_str(err, "no column 'missing'; the columns are: k id",
	       "the error lists the columns");
	table_destroy(t);
}

/* Pages: offset and limit, the cap, past the end. */
static void test_page(void)
{
	struct table *t = NULL;
	char err[256], got[4096], *s;
	cJSON *page;
	size_t used = 0;

	s = malloc(16 * 1000 + 64);
	used = (size_t)snprintf(s, 64, "{\"columns\":[\"n\"],\"data\":[");
	for (int i = 0; i < 1000; i++)
		used +=
		    (size_t)snprintf(s + used, 16, "%s[%d]", i ? "," : "", i);
	memcpy(s + used, "]}", 3);
	is_int(parse(s, &t, err, sizeof(err)), 0, "1000 rows");
	free(s);

	page = table_page(t, 10, 3);
	column_of(page, 0, got, sizeof(got));
	is_str(got, "10,11,12", "rows 11 to 13");
	is_int(cJSON_GetNumberValue(
	           cJSON_GetObjectItemCaseSensitive(page, "offset")),
	       10, "the page says its offset");
	cJSON_Delete(page);

	page = table_page(t, 0, 100000);
	is_int(
	    cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(page, "rows")),
	    TABLE_PAGE_MAX, "a page holds TABLE_PAGE_MAX rows at most");
	cJSON_Delete(page);

	page = table_page(t, 998, 50);
	column_of(page, 0, got, sizeof(got));
	is_str(got, "998,999", "the last page is short");
	cJSON_Delete(page);

	page = table_page(t, (size_t)-1, 50);
	column_of(page, 0, got, sizeof(got));
	is_str(got, "", "an offset past the end gives no rows");
	is_int(cJSON_GetNumberValue(
	           cJSON_GetObjectItemCaseSensitive(page, "total")),
	       1000, "and the total");
	cJSON_Delete(page);
	table_destroy(t);
}

int main(int argc, char **argv)
{
	static const struct tap_case cases[] = {
	    {"parse-frame", test_parse_frame},
	    {"parse-refusals", test_parse_refusals},
	    {"parse-limits", test_parse_limits},
	    {"sort", test_sort},
	    {"page", test_page},
	};

	return tap_run_cases(argc, argv, cases,
	                     sizeof(cases) / sizeof(cases[0]));
}
