/* SPDX-License-Identifier: MIT */
/*
 * table: a saved data frame parsed as hostile input, sorted and paged for
 * the run viewer. See table.h. No shared state.
 */
#include "tools/view/table.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcp/rpc.h"
#include "util/buf.h"
#include "util/errmsg.h"

/* A frame's JSON is an object of arrays of arrays of scalars: 3 levels. */
#define TABLE_MAX_DEPTH 4

struct table {
	cJSON *root;
	cJSON *columns;   /* borrowed from root: the names, as strings */
	cJSON **rows;     /* borrowed from root, in the current order */
	size_t *position; /* each row's place in the frame, for ties */
	size_t n_rows, n_cols;
};

size_t table_rows(const struct table *t)
{
	return t ? t->n_rows : 0;
}

size_t table_columns(const struct table *t)
{
	return t ? t->n_cols : 0;
}

void table_destroy(struct table *t)
{
	if (!t)
		return;
	cJSON_Delete(t->root);
	free(t->rows);
	free(t->position);
	free(t);
}

static bool table_scalar(const cJSON *c)
{
	return cJSON_IsNumber(c) || cJSON_IsString(c) || cJSON_IsBool(c) ||
	       cJSON_IsNull(c);
}

/*
 * The column labels as strings: pandas labels may be numbers or, for a
 * MultiIndex, arrays; those are shown as their JSON text.
 */
static int table_names(struct table *t, const cJSON *labels)
{
	const cJSON *l;

	t->columns = cJSON_CreateArray();
	if (!t->columns)
		return -ENOMEM;
	cJSON_AddItemToObject(t->root, "mcpsd_names", t->columns);
	cJSON_ArrayForEach (l, labels) {
		char *s = cJSON_IsString(l) ? NULL : cJSON_PrintUnformatted(l);
		cJSON *n = cJSON_CreateString(cJSON_IsString(l) ? l->valuestring
		                              : s               ? s
		                                                : "?");

		cJSON_free(s);
		if (!n)
			return -ENOMEM;
		cJSON_AddItemToArray(t->columns, n);
	}
	return 0;
}

/* Checks the shape and indexes the rows. */
static int table_index(struct table *t, cJSON *data, char *err, size_t errlen)
{
	cJSON *row;
	const cJSON *cell;
	size_t i = 0;

	t->n_rows = (size_t)cJSON_GetArraySize(data);
	if (t->n_cols && t->n_rows > TABLE_MAX_CELLS / t->n_cols)
		return errmsg_fail(-EFBIG, err, errlen,
		                   "the saved table holds more than %u cells",
		                   TABLE_MAX_CELLS);
	t->rows = calloc(t->n_rows ? t->n_rows : 1, sizeof(*t->rows));
	t->position = calloc(t->n_rows ? t->n_rows : 1, sizeof(*t->position));
	if (!t->rows || !t->position)
		return -ENOMEM;
	cJSON_ArrayForEach (row, data) {
		if (!cJSON_IsArray(row) ||
		    (size_t)cJSON_GetArraySize(row) != t->n_cols)
			return errmsg_fail(
			    -EINVAL, err, errlen,
			    "row %zu is not an array of %zu cells", i,
			    t->n_cols);
		cJSON_ArrayForEach (cell, row)
			if (!table_scalar(cell))
				return errmsg_fail(
				    -EINVAL, err, errlen,
				    "row %zu holds a cell that is "
				    "not a number, string, boolean "
				    "or null",
				    i);
		t->rows[i] = row;
		t->position[i] = i;
		i++;
	}
	return 0;
}

/*
 * An upper bound on the values in JSON text the scanner accepted: every
 * value but the first follows a comma or opens an array or object. Strings
 * are skipped (their commas and brackets are text).
 */
static size_t table_values(const char *text, size_t len)
{
	size_t n = 1;
	bool in_string = false;

	for (size_t i = 0; i < len; i++) {
		char c = text[i];

		if (in_string) {
			if (c == '\\')
				i++;
			else if (c == '"')
				in_string = false;
		} else if (c == '"') {
			in_string = true;
		} else if (c == ',' || c == '[' || c == '{') {
			n++;
		}
	}
	return n;
}

int table_parse(const char *text, size_t len, struct table **out, char *err,
                size_t errlen)
{
	struct rpc_scan scan;
	struct table *t;
	const cJSON *labels;
	cJSON *data;
	int r;

	*out = NULL;
	if (len > TABLE_MAX_BYTES)
		return errmsg_fail(-EFBIG, err, errlen,
		                   "the saved table is larger than %u MB",
		                   TABLE_MAX_BYTES >> 20);
	r = rpc_scan(text, len, TABLE_MAX_DEPTH, &scan);
	if (r < 0 || scan.is_array)
		return errmsg_fail(
		    -EINVAL, err, errlen,
		    "the saved table is not a JSON object of arrays "
		    "(%s)",
		    scan.is_array ? "an array"
		    : r == -E2BIG ? "nested too deeply"
		    : scan.err    ? scan.err
		                  : "not JSON");
	if (table_values(text, len) > TABLE_MAX_VALUES)
		return errmsg_fail(-EFBIG, err, errlen,
		                   "the saved table holds more than %u cells",
		                   TABLE_MAX_CELLS);
	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->root = cJSON_ParseWithLength(text, len);
	if (!t->root) {
		table_destroy(t);
		return -ENOMEM; /* the scan accepted it: only memory is left */
	}
	labels = cJSON_GetObjectItemCaseSensitive(t->root, "columns");
	data = cJSON_GetObjectItemCaseSensitive(t->root, "data");
	if (!cJSON_IsArray(labels) || !cJSON_IsArray(data)) {
		table_destroy(t);
		return errmsg_fail(
		    -EINVAL, err, errlen,
		    "the saved table needs the arrays \"columns\" "
		    "and \"data\"");
	}
	t->n_cols = (size_t)cJSON_GetArraySize(labels);
	if (t->n_cols == 0 || t->n_cols > TABLE_MAX_COLUMNS) {
		size_t n = t->n_cols;

		table_destroy(t);
		return errmsg_fail(-EINVAL, err, errlen,
		                   "the saved table has %zu columns (1 to %u "
		                   "are shown)",
		                   n, TABLE_MAX_COLUMNS);
	}
	r = table_names(t, labels);
	if (r == 0)
		r = table_index(t, data, err, errlen);
	if (r < 0) {
		table_destroy(t);
		return r;
	}
	*out = t;
	return 0;
}

/* ---- sorting ----------------------------------------------------------- */

/* The rank of a cell's kind in the order: numbers, strings, bools, null. */
static int table_kind(const cJSON *c)
{
	if (cJSON_IsNumber(c))
		return 0;
	if (cJSON_IsString(c))
		return 1;
	if (cJSON_IsBool(c))
		return 2;
	return 3;
}

static int table_cmp_cells(const cJSON *a, const cJSON *b)
{
	int ka = table_kind(a), kb = table_kind(b);

	if (ka != kb)
		return ka < kb ? -1 : 1;
	if (ka == 0)
		return a->valuedouble < b->valuedouble   ? -1
		       : a->valuedouble > b->valuedouble ? 1
		                                         : 0;
	if (ka == 1)
		return strcmp(a->valuestring, b->valuestring);
	if (ka == 2)
		return cJSON_IsTrue(a) - cJSON_IsTrue(b);
	return 0;
}

struct table_key {
	const cJSON *cell;
	size_t position;
	cJSON *row;
	bool desc; /* qsort's comparator has no argument of its own */
};

static int table_cmp(const void *pa, const void *pb)
{
	const struct table_key *a = pa, *b = pb;
	int c = table_cmp_cells(a->cell, b->cell);

	/* Nulls stay last whichever way, as in a spreadsheet. */
	if (c && a->desc && table_kind(a->cell) != 3 &&
	    table_kind(b->cell) != 3)
		c = -c;
	if (c)
		return c;
	return a->position < b->position ? -1 : a->position > b->position;
}

int table_sort(struct table *t, const char *column, bool descending, char *err,
               size_t errlen)
{
	const cJSON *n;
	struct table_key *keys;
	size_t col = 0;
	bool found = false;

	cJSON_ArrayForEach (n, t->columns) {
		if (strcmp(n->valuestring, column) == 0) {
			found = true;
			break;
		}
		col++;
	}
	if (!found) {
		struct buf b;
		int r;

		buf_init(&b, 1024);
		r = buf_printf(&b,
		               "no column '%.100s'; the columns are:", column);
		cJSON_ArrayForEach (n, t->columns)
			if (r == 0)
				r = buf_printf(&b, " %.100s", n->valuestring);
		errmsg_set(err, errlen, "%s",
		           b.data ? b.data : "no such column");
		buf_finish(&b);
		return -ENOENT;
	}
	keys = calloc(t->n_rows ? t->n_rows : 1, sizeof(*keys));
	if (!keys)
		return -ENOMEM;
	for (size_t i = 0; i < t->n_rows; i++) {
		keys[i].row = t->rows[i];
		keys[i].position = t->position[i];
		keys[i].cell = cJSON_GetArrayItem(t->rows[i], (int)col);
		keys[i].desc = descending;
	}
	/* Look-ups by index are linear in cJSON: done once above. */
	qsort(keys, t->n_rows, sizeof(*keys), table_cmp);
	for (size_t i = 0; i < t->n_rows; i++) {
		t->rows[i] = keys[i].row;
		t->position[i] = keys[i].position;
	}
	free(keys);
	return 0;
}

cJSON *table_page(const struct table *t, size_t offset, size_t limit)
{
	cJSON *o = cJSON_CreateObject(), *rows;

	if (limit > TABLE_PAGE_MAX)
		limit = TABLE_PAGE_MAX;
	if (!o || !cJSON_AddItemToObject(o, "columns",
	                                 cJSON_Duplicate(t->columns, true)))
		goto fail;
	rows = cJSON_AddArrayToObject(o, "rows");
	if (!rows)
		goto fail;
	for (size_t i = offset; i < t->n_rows && i - offset < limit; i++) {
		cJSON *r = cJSON_Duplicate(t->rows[i], true);

		if (!r || !cJSON_AddItemToArray(rows, r)) {
			cJSON_Delete(r);
			goto fail;
		}
	}
	cJSON_AddNumberToObject(o, "total", (double)t->n_rows);
	cJSON_AddNumberToObject(o, "offset", (double)offset);
	return o;
fail:
	cJSON_Delete(o);
	return NULL;
}
