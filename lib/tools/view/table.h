/* SPDX-License-Identifier: MIT */
/*
 * table: the data frame a run's last value left for the run viewer
 * (kernel.py writes it as /data/.mcp/value.json, pandas' "split" layout:
 * {"columns": [...], "data": [[...], ...]}), parsed as hostile input
 * (code in the sandbox can write anything there): a size cap, the nesting
 * depth checked before cJSON sees it, and a shape check (every row an
 * array as wide as the columns, every cell a scalar). Then sorted by a
 * column and cut into pages for the view_table tool.
 *
 * A table is owned by one thread at a time; no shared state.
 */
#ifndef MCPSD_VIEW_TABLE_H
#define MCPSD_VIEW_TABLE_H

#include <stdbool.h>
#include <stddef.h>

#include <cjson/cJSON.h>

/*
 * What one parse may cost: the file's bytes, and the JSON values it holds
 * (counted before cJSON sees them, about 80 bytes of memory each): a frame
 * of TABLE_MAX_CELLS cells in rows of one cell needs two values a cell.
 */
#define TABLE_MAX_BYTES (32u << 20)
#define TABLE_MAX_COLUMNS 1000
#define TABLE_MAX_CELLS 1000000u
#define TABLE_MAX_VALUES (2 * TABLE_MAX_CELLS + TABLE_MAX_COLUMNS + 16)
#define TABLE_PAGE_MAX 500 /* rows one page holds at most */

struct table;

/*
 * Parses text[0..len). Returns 0 and *out (caller owns; free with
 * table_destroy), -EFBIG when over TABLE_MAX_BYTES, TABLE_MAX_VALUES or
 * TABLE_MAX_CELLS, -EINVAL for anything else that is not a table, or
 * -ENOMEM; err says what was wrong.
 */
__attribute__((warn_unused_result)) int table_parse(const char *text,
                                                    size_t len,
                                                    struct table **out,
                                                    char *err, size_t errlen);

void table_destroy(struct table *t);

size_t table_rows(const struct table *t);
size_t table_columns(const struct table *t);

/*
 * Orders the rows by the column named column (numbers by value, then
 * strings by bytes, then booleans, then nulls last; ties keep the frame's
 * order), descending when asked. -ENOENT with the column names in err when
 * there is no such column.
 */
__attribute__((warn_unused_result)) int table_sort(struct table *t,
                                                   const char *column,
                                                   bool descending, char *err,
                                                   size_t errlen);

/*
 * {"columns": [names], "rows": [[cells]], "total": rows, "offset": offset}
 * for at most limit (<= TABLE_PAGE_MAX) rows from offset, in the current
 * order. Caller owns; NULL when out of memory.
 */
cJSON *table_page(const struct table *t, size_t offset, size_t limit);

#endif
