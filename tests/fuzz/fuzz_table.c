/* SPDX-License-Identifier: MIT */
/*
 * fuzz_table: the data frame a run leaves for the run viewer
 * (/data/.mcp/value.json), written by hostile code and parsed by
 * table_parse. A refusal leaves no table and says why; a table has 1 to
 * TABLE_MAX_COLUMNS columns and at most TABLE_MAX_CELLS cells; sorted by
 * its first column ascending and by its last descending, every page of it
 * holds rows as wide as the columns, in the documented order (numbers by
 * value, then strings by bytes, then booleans, nulls last either way), and
 * the pages together hold every row. Any violation aborts.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/view/table.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int kind(const cJSON *c)
{
	if (cJSON_IsNumber(c))
		return 0;
	if (cJSON_IsString(c))
		return 1;
	if (cJSON_IsBool(c))
		return 2;
	if (cJSON_IsNull(c))
		return 3;
	abort(); /* table_parse let a cell through that is no scalar */
}

/* <0, 0, >0 as a sorts before b ascending (table.h's order). */
static int order(const cJSON *a, const cJSON *b)
{
	int ka = kind(a), kb = kind(b);

	if (ka != kb)
		return ka - kb;
	if (ka == 0)
		return (a->valuedouble > b->valuedouble) -
		       (a->valuedouble < b->valuedouble);
	if (ka == 1)
		return strcmp(a->valuestring, b->valuestring);
	if (ka == 2)
		return cJSON_IsTrue(a) - cJSON_IsTrue(b);
	return 0;
}

/* Pages through t; checks widths, the order of column col, and the count. */
static void check_pages(const struct table *t, size_t col, bool desc)
{
	cJSON *prev = NULL;
	size_t seen = 0;

	for (size_t off = 0; off < table_rows(t); off += TABLE_PAGE_MAX) {
		cJSON *page = table_page(t, off, TABLE_PAGE_MAX), *row;

		if (!page)
			return; /* out of memory: nothing to check */
		cJSON_ArrayForEach (
		    row, cJSON_GetObjectItemCaseSensitive(page, "rows")) {
			cJSON *c = cJSON_GetArrayItem(row, (int)col);

			if ((size_t)cJSON_GetArraySize(row) != table_columns(t))
				abort();
			if (prev) {
				int o = order(prev, c);
				bool nulls = kind(prev) == 3 || kind(c) == 3;

				if ((!desc || nulls) && o > 0)
					abort();
				if (desc && !nulls && o < 0)
					abort();
			}
			cJSON_Delete(prev);
			prev = cJSON_Duplicate(c, true);
			seen++;
		}
		cJSON_Delete(page);
	}
	cJSON_Delete(prev);
	if (seen != table_rows(t))
		abort();
}

#define NO_COLUMN "\x01 no such column"

static bool has_name(const cJSON *cols, const char *name)
{
	const cJSON *c;

	cJSON_ArrayForEach (c, cols)
		if (strcmp(c->valuestring, name) == 0)
			return true;
	return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct table *t = (struct table *)&size; /* must be cleared */
	char err[512] = "", name[TABLE_PAGE_MAX];
	cJSON *page, *cols;
	size_t last;
	int r;

	r = table_parse((const char *)data, size, &t, err, sizeof(err));
	if (r < 0) {
		if (t || (r != -ENOMEM && !err[0]))
			abort();
		return 0;
	}
	if (!t || table_columns(t) < 1 ||
	    table_columns(t) > TABLE_MAX_COLUMNS ||
	    table_rows(t) > TABLE_MAX_CELLS / table_columns(t))
		abort();
	page = table_page(t, 0, 1);
	cols = page ? cJSON_GetObjectItemCaseSensitive(page, "columns") : NULL;
	if (page && (size_t)cJSON_GetArraySize(cols) != table_columns(t))
		abort();
	last = table_columns(t) - 1;
	r = page ? table_sort(t, cJSON_GetArrayItem(cols, 0)->valuestring,
	                      false, err, sizeof(err))
	         : -ENOMEM;
	if (r == 0)
		check_pages(t, 0, false);
	/* Duplicate names sort by the first column of that name. */
	if (page && strlen(cJSON_GetArrayItem(cols, (int)last)->valuestring) <
	                sizeof(name)) {
		const cJSON *c;
		size_t first = 0;

		snprintf(name, sizeof(name), "%s",
		         cJSON_GetArrayItem(cols, (int)last)->valuestring);
		cJSON_ArrayForEach (c, cols) {
			if (strcmp(c->valuestring, name) == 0)
				break;
			first++;
		}
		if (table_sort(t, name, true, err, sizeof(err)) == 0)
			check_pages(t, first, true);
	}
	if (page && !has_name(cols, NO_COLUMN) &&
	    (table_sort(t, NO_COLUMN, false, err, sizeof(err)) != -ENOENT ||
	     !err[0]))
		abort();
	cJSON_Delete(page);
	table_destroy(t);
	return 0;
}
