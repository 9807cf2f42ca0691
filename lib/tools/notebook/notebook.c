/* SPDX-License-Identifier: MIT */
/*
 * notebook: records of runs, kept outside /data, and the nbformat 4.5
 * notebook rendered from them. See notebook.h. No shared state.
 */
#include "tools/notebook/notebook.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "util/buf.h"
#include "workspace/files.h"

/*
 * NOTEBOOK_COUNT, "<bytes of NOTEBOOK_RECORDS> <cells>\n", written after
 * each append: the count of a records file of size bytes; else (another
 * size: a crash between the writes, a version without it) every line of
 * the records, counted.
 */
static long notebook_count_kept(int dirfd, size_t size)
{
	char *data = NULL;
	size_t len = 0, bytes = 0;
	long cells = -1;

	if (files_read(dirfd, NOTEBOOK_COUNT, 64, &data, &len, NULL) == 0 &&
	    sscanf(data, "%zu %ld", &bytes, &cells) == 2 && bytes == size &&
	    cells >= 0) {
		free(data);
		return cells;
	}
	free(data);
	data = NULL;
	cells = 0;
	if (files_read(dirfd, NOTEBOOK_RECORDS, NOTEBOOK_MAX_BYTES, &data, &len,
	               NULL) == 0)
		for (const char *p = data;
		     (p = memchr(p, '\n', (size_t)(data + len - p))); p++)
			cells++;
	free(data);
	return cells;
}

/*
 * Rewritten in place at one fixed width, not truncated: ext4 flushes a file
 * truncated and written again when it is closed (auto_da_alloc), which
 * cost a write to the disk per run.
 */
static void notebook_count_keep(int dirfd, size_t size, long cells)
{
	char line[48];
	int n = snprintf(line, sizeof(line), "%020zu %010ld\n", size, cells);
	int fd;

	if (n != 32)
		return;
	fd = openat(dirfd, NOTEBOOK_COUNT,
	            O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return;
	if (pwrite(fd, line, (size_t)n, 0) != n)
		(void)ftruncate(fd, 0); /* read as no count: counted again */
	close(fd);
}

/* ---- records ----------------------------------------------------------- */

static cJSON *notebook_stream(const char *name, const char *text)
{
	cJSON *o = cJSON_CreateObject();

	cJSON_AddStringToObject(o, "output_type", "stream");
	cJSON_AddStringToObject(o, "name", name);
	cJSON_AddStringToObject(o, "text", text);
	return o;
}

/* The last line of stderr that starts with the exception's name. */
static char *notebook_evalue(const char *err, const char *ename)
{
	size_t n = strlen(ename);
	const char *p = err, *best = NULL;

	for (; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		if (strncmp(p, ename, n) == 0 && (p[n] == ':' || p[n] == '\n'))
			best = p;
	if (!best)
		return strdup("");
	best += n;
	if (*best == ':')
		best++;
	while (*best == ' ')
		best++;
	return strndup(best, strcspn(best, "\n"));
}

/* Each line of text as an element (a traceback's list of lines). */
static cJSON *notebook_lines(const char *text)
{
	cJSON *a = cJSON_CreateArray();
	const char *p = text;

	while (a && p && *p) {
		size_t n = strcspn(p, "\n");
		char *line = strndup(p, n);

		if (line)
			cJSON_AddItemToArray(a, cJSON_CreateString(line));
		free(line);
		p += n;
		if (*p == '\n')
			p++;
	}
	return a;
}

static cJSON *notebook_figure(const unsigned char *png, size_t len)
{
	cJSON *o = cJSON_CreateObject(), *data;
	char *b64;

	if (!o)
		return NULL;
	b64 = malloc(4 * ((len + 2) / 3) + 1);
	if (!b64) {
		cJSON_Delete(o);
		return NULL;
	}
	EVP_EncodeBlock((unsigned char *)b64, png, (int)len);
	cJSON_AddStringToObject(o, "output_type", "display_data");
	data = cJSON_AddObjectToObject(o, "data");
	cJSON_AddStringToObject(data, "image/png", b64);
	cJSON_AddObjectToObject(o, "metadata");
	free(b64);
	return o;
}

/*
 * The last value's MIME bundle, as nbformat wants it: text only. The kernel
 * runs beside the code, which can make it send anything; other members are
 * left out, and a bundle left empty is no value.
 */
static cJSON *notebook_value(const char *json)
{
	cJSON *v = json ? cJSON_Parse(json) : NULL, *m = v ? v->child : NULL;

	if (!cJSON_IsObject(v)) {
		cJSON_Delete(v);
		return NULL;
	}
	while (m) {
		cJSON *next = m->next;

		if (!cJSON_IsString(m) || !m->string[0])
			cJSON_Delete(cJSON_DetachItemViaPointer(v, m));
		m = next;
	}
	if (!v->child) {
		cJSON_Delete(v);
		return NULL;
	}
	return v;
}

cJSON *notebook_record(const struct notebook_run *run)
{
	cJSON *rec = cJSON_CreateObject(), *outs, *v;
	char *src = strndup(run->code, run->code_len);

	if (!rec || !src)
		goto fail;
	cJSON_AddStringToObject(rec, "language", run->language);
	cJSON_AddStringToObject(rec, "source", src);
	cJSON_AddStringToObject(rec, "status", run->status);
	cJSON_AddNumberToObject(rec, "exit_code", run->exit_code);
	outs = cJSON_AddArrayToObject(rec, "outputs");
	if (!outs)
		goto fail;
	if (run->out && run->out[0])
		cJSON_AddItemToArray(outs, notebook_stream("stdout", run->out));
	if (run->err && run->err[0])
		cJSON_AddItemToArray(outs, notebook_stream("stderr", run->err));
	v = notebook_value(run->value_json);
	if (v) {
		cJSON *o = cJSON_CreateObject();

		cJSON_AddStringToObject(o, "output_type", "execute_result");
		cJSON_AddItemToObject(o, "data", v);
		cJSON_AddObjectToObject(o, "metadata");
		cJSON_AddItemToArray(outs, o);
	}
	for (size_t i = 0; i < run->n_figures && i < NOTEBOOK_FIGURES_MAX; i++)
		if (run->figure_lens[i] <= NOTEBOOK_FIGURE_MAX_BYTES)
			cJSON_AddItemToArray(
			    outs, notebook_figure(run->figures[i],
			                          run->figure_lens[i]));
	if (run->error_name && run->error_name[0]) {
		cJSON *o = cJSON_CreateObject();
		char *evalue =
		    notebook_evalue(run->err ? run->err : "", run->error_name);

		cJSON_AddStringToObject(o, "output_type", "error");
		cJSON_AddStringToObject(o, "ename", run->error_name);
		cJSON_AddStringToObject(o, "evalue", evalue ? evalue : "");
		cJSON_AddItemToObject(o, "traceback",
		                      notebook_lines(run->err ? run->err : ""));
		cJSON_AddItemToArray(outs, o);
		free(evalue);
	}
	if (run->packages_json && (v = cJSON_Parse(run->packages_json)) != NULL)
		cJSON_AddItemToObject(rec, "packages", v);
	free(src);
	return rec;
fail:
	free(src);
	cJSON_Delete(rec);
	return NULL;
}

/* ---- the records file --------------------------------------------------- */

/*
 * The records in dirfd as an array, and in *used (optional) how many bytes
 * of the file their lines take (whole lines: one cut short by a crash is
 * left out, as are lines that are not objects).
 */
static int notebook_load_upto(int dirfd, cJSON **records, size_t *used)
{
	char *data = NULL, *p, *nl;
	size_t len = 0;
	cJSON *arr;
	int r;

	*records = NULL;
	if (used)
		*used = 0;
	arr = cJSON_CreateArray();
	if (!arr)
		return -ENOMEM;
	r = files_read(dirfd, NOTEBOOK_RECORDS, NOTEBOOK_MAX_BYTES, &data, &len,
	               NULL);
	if (r == -ENOENT) {
		*records = arr;
		return 0;
	}
	if (r < 0) {
		cJSON_Delete(arr);
		return r;
	}
	for (p = data; p < data + len; p = nl + 1) {
		cJSON *rec;

		nl = memchr(p, '\n', (size_t)(data + len - p));
		if (!nl)
			break;
		rec = cJSON_ParseWithLength(p, (size_t)(nl - p));
		if (cJSON_IsObject(rec))
			cJSON_AddItemToArray(arr, rec);
		else
			cJSON_Delete(rec);
		if (used)
			*used = (size_t)(nl + 1 - data);
	}
	free(data);
	*records = arr;
	return 0;
}

int notebook_load(int dirfd, cJSON **records)
{
	return notebook_load_upto(dirfd, records, NULL);
}

int notebook_append(int dirfd, const cJSON *record)
{
	char *line = cJSON_PrintUnformatted(record);
	size_t n = line ? strlen(line) : 0;
	struct stat st;
	long cells;
	ssize_t w;
	int fd, r = 0;

	if (!line)
		return -ENOMEM;
	fd = openat(dirfd, NOTEBOOK_RECORDS,
	            O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC,
	            0600);
	if (fd < 0) {
		r = -errno;
		goto out;
	}
	if (fstat(fd, &st) < 0) {
		r = -errno;
		goto out;
	}
	if ((size_t)st.st_size + n + 1 > NOTEBOOK_MAX_BYTES) {
		r = -EFBIG;
		goto out;
	}
	cells = notebook_count_kept(dirfd, (size_t)st.st_size);
	if (cells >= NOTEBOOK_MAX_CELLS) {
		r = -EFBIG;
		goto out;
	}
	line[n] = '\n'; /* over the NUL: one write(2) of the whole line */
	w = write(fd, line, n + 1);
	if (w != (ssize_t)(n + 1)) {
		r = w < 0 ? -errno : -EIO;
		/* A partial line is left out by notebook_load. */
		if (w > 0 && ftruncate(fd, st.st_size) < 0)
			r = -errno;
		goto out;
	}
	r = (int)cells + 1;
	notebook_count_keep(dirfd, (size_t)st.st_size + n + 1, r);
out:
	if (fd >= 0)
		close(fd);
	cJSON_free(line);
	return r;
}

/* ---- nbformat ------------------------------------------------------------ */

static const char *notebook_str(const cJSON *o, const char *key)
{
	const char *s =
	    cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, key));

	return s ? s : "";
}

/* Whether an output of this type is in the record. */
static const cJSON *notebook_output(const cJSON *rec, const char *type,
                                    const char *name)
{
	const cJSON *o;

	cJSON_ArrayForEach (o, cJSON_GetObjectItemCaseSensitive(rec, "outputs"))
		if (strcmp(notebook_str(o, "output_type"), type) == 0 &&
		    (!name || strcmp(notebook_str(o, "name"), name) == 0))
			return o;
	return NULL;
}

/* nbformat wants source and stream text as strings or lists of lines. */
static cJSON *notebook_cell(const cJSON *rec, size_t i, bool python_kernel)
{
	const char *lang = notebook_str(rec, "language");
	bool python = strcmp(lang, "python") == 0;
	cJSON *c = cJSON_CreateObject(), *md, *outs, *tags, *o;
	const cJSON *src;
	char id[32];

	snprintf(id, sizeof(id), "cell-%zu", i + 1);
	cJSON_AddStringToObject(c, "cell_type", "code");
	cJSON_AddStringToObject(c, "id", id);
	cJSON_AddNumberToObject(c, "execution_count", (double)(i + 1));
	md = cJSON_AddObjectToObject(c, "metadata");
	cJSON_AddStringToObject(md, "language", lang);
	if (!python)
		cJSON_AddStringToObject(cJSON_AddObjectToObject(md, "vscode"),
		                        "languageId", lang);
	o = cJSON_AddObjectToObject(md, "mcp-sandboxd");
	cJSON_AddStringToObject(o, "status", notebook_str(rec, "status"));
	cJSON_AddItemToObject(
	    o, "exit_code",
	    cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(rec, "exit_code"),
	                    true));
	if (cJSON_GetObjectItemCaseSensitive(rec, "packages"))
		cJSON_AddItemToObject(
		    o, "packages",
		    cJSON_Duplicate(
		        cJSON_GetObjectItemCaseSensitive(rec, "packages"),
		        true));
	tags = cJSON_CreateArray();
	if (python_kernel && !python)
		cJSON_AddItemToArray(tags,
		                     cJSON_CreateString("skip-execution"));
	if (notebook_output(rec, "error", NULL))
		cJSON_AddItemToArray(tags,
		                     cJSON_CreateString("raises-exception"));
	if (cJSON_GetArraySize(tags))
		cJSON_AddItemToObject(md, "tags", tags);
	else
		cJSON_Delete(tags);
	src = cJSON_GetObjectItemCaseSensitive(rec, "source");
	cJSON_AddStringToObject(c, "source",
	                        cJSON_IsString(src) ? src->valuestring : "");
	outs = cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(rec, "outputs"),
	                       true);
	if (!cJSON_IsArray(outs)) {
		cJSON_Delete(outs);
		outs = cJSON_CreateArray();
	}
	/* An execute_result names its cell's execution count. */
	cJSON_ArrayForEach (o, outs)
		if (strcmp(notebook_str(o, "output_type"), "execute_result") ==
		    0)
			cJSON_AddNumberToObject(o, "execution_count",
			                        (double)(i + 1));
	cJSON_AddItemToObject(c, "outputs", outs);
	return c;
}

/* The kernel a notebook of these cells declares: its first cell's language,
 * Python's when any cell is Python (see notebook_render). */
struct notebook_kernel {
	char first[32];
	bool python;
};

static void notebook_kernel_add(struct notebook_kernel *k, const char *lang)
{
	k->python |= strcmp(lang, "python") == 0;
	if (!k->first[0])
		snprintf(k->first, sizeof(k->first), "%s", lang);
}

/*
 * The notebook's text around its cells, for kernel k: *head ends with the
 * '[' that opens the cells array, *tail (inside *head's allocation) starts
 * with its ']'. Caller frees *head with cJSON_free.
 */
static int notebook_frame(const struct notebook_kernel *k,
                          const char *conversation_id, char **head,
                          const char **tail)
{
	cJSON *nb = cJSON_CreateObject(), *md, *ks, *li, *own;
	const char *first = k->first[0] ? k->first : "python";
	bool python = k->python || !k->first[0]; /* no cell yet: Python */
	char *text, *p, *last = NULL;

	*head = NULL;
	*tail = NULL;
	if (!nb)
		return -ENOMEM;
	cJSON_AddNumberToObject(nb, "nbformat", 4);
	cJSON_AddNumberToObject(nb, "nbformat_minor", 5);
	md = cJSON_AddObjectToObject(nb, "metadata");
	ks = cJSON_AddObjectToObject(md, "kernelspec");
	li = cJSON_AddObjectToObject(md, "language_info");
	cJSON_AddStringToObject(ks, "name", python ? "python3" : first);
	cJSON_AddStringToObject(ks, "display_name",
	                        python ? "Python 3" : first);
	cJSON_AddStringToObject(ks, "language", python ? "python" : first);
	cJSON_AddStringToObject(li, "name", python ? "python" : first);
	own = cJSON_AddObjectToObject(md, "mcp-sandboxd");
	cJSON_AddStringToObject(own, "conversationId", conversation_id);
	/* Last member: its "[]" is the last one in the text. */
	cJSON_AddArrayToObject(nb, "cells");
	text = cJSON_Print(nb);
	cJSON_Delete(nb);
	if (!text)
		return -ENOMEM;
	for (p = strstr(text, "[]"); p; p = strstr(p + 1, "[]"))
		last = p;
	if (!last) {
		cJSON_free(text);
		return -EIO;
	}
	*head = text;
	*tail = last + 1;
	return 0;
}

/* Appends cell i of record rec to b as the cells cache holds it: "\n" before
 * the first cell, ",\n" before the others. */
static int notebook_cell_append(struct buf *b, const cJSON *rec, size_t i,
                                bool python_kernel)
{
	cJSON *c = notebook_cell(rec, i, python_kernel);
	char *t = c ? cJSON_Print(c) : NULL;
	int r = t ? 0 : -ENOMEM;

	if (t && (buf_puts(b, i ? ",\n" : "\n") < 0 || buf_puts(b, t) < 0))
		r = -ENOMEM;
	cJSON_free(t);
	cJSON_Delete(c);
	return r;
}

/* The whole text: frame around the cells (as notebook_cell_append wrote
 * them). Caller frees with free. */
static char *notebook_join(const struct notebook_kernel *k,
                           const char *conversation_id, const char *cells,
                           size_t cells_len, size_t *len)
{
	char *head = NULL, *text = NULL;
	const char *tail;
	struct buf b;

	if (notebook_frame(k, conversation_id, &head, &tail) < 0)
		return NULL;
	buf_init(&b, 0);
	if (buf_append(&b, head, (size_t)(tail - head)) == 0 &&
	    buf_append(&b, cells, cells_len) == 0 &&
	    buf_puts(&b, cells_len ? "\n" : "") == 0 && buf_puts(&b, tail) == 0)
		text = buf_take(&b, len);
	buf_finish(&b);
	cJSON_free(head);
	return text;
}

/* Every record's cell, for kernel k (filled from the records). */
static int notebook_cells_all(const cJSON *records, struct notebook_kernel *k,
                              struct buf *cells)
{
	const cJSON *rec;
	size_t i = 0;

	memset(k, 0, sizeof(*k));
	for (rec = records ? records->child : NULL; rec; rec = rec->next)
		notebook_kernel_add(k, notebook_str(rec, "language"));
	for (rec = records ? records->child : NULL; rec; rec = rec->next)
		if (notebook_cell_append(cells, rec, i++, k->python) < 0)
			return -ENOMEM;
	return 0;
}

char *notebook_render(const cJSON *records, const char *conversation_id,
                      size_t *len)
{
	struct notebook_kernel k;
	struct buf cells;
	char *text = NULL;
	size_t n = 0;

	buf_init(&cells, 0);
	if (notebook_cells_all(records, &k, &cells) == 0)
		text =
		    notebook_join(&k, conversation_id,
		                  cells.data ? cells.data : "", cells.len, &n);
	buf_finish(&cells);
	if (len)
		*len = text ? n : 0;
	return text;
}

/* ---- the rendered cells, kept ------------------------------------------- */

/*
 * The cache's account, NOTEBOOK_META: "<cells> <bytes of NOTEBOOK_CELLS>
 * <python 0|1> <first language> <bytes of NOTEBOOK_RECORDS>\n": the cells
 * are those of the records in the first <bytes> of the records file (whole
 * lines). Both files are the daemon's, in the private directory; a crash
 * between their writes leaves counts that do not match, and the next
 * rendering rebuilds both from the records (as it does an account written
 * by a version without the last field).
 */
struct notebook_meta {
	long cells;
	size_t bytes;
	struct notebook_kernel k;
	size_t records;
};

static bool notebook_meta_read(int dirfd, struct notebook_meta *m)
{
	char *data = NULL;
	size_t len = 0;
	int py = 0;
	bool ok;

	memset(m, 0, sizeof(*m));
	if (files_read(dirfd, NOTEBOOK_META, 256, &data, &len, NULL) < 0)
		return false;
	ok = sscanf(data, "%ld %zu %d %31s %zu", &m->cells, &m->bytes, &py,
	            m->k.first, &m->records) == 5 &&
	     m->cells >= 0;
	m->k.python = py == 1;
	free(data);
	return ok;
}

/* Writes a whole file of the private directory (O_TRUNC, no links). */
static int notebook_put(int dirfd, const char *name, const char *data,
                        size_t len, int flags)
{
	int fd =
	    openat(dirfd, name,
	           O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC | flags, 0600);
	ssize_t w;
	int r = 0;

	if (fd < 0)
		return -errno;
	w = len ? write(fd, data, len) : 0;
	if (w != (ssize_t)len)
		r = w < 0 ? -errno : -EIO;
	close(fd);
	return r;
}

static int notebook_meta_write(int dirfd, const struct notebook_meta *m)
{
	char line[128];
	int n = snprintf(line, sizeof(line), "%ld %zu %d %s %zu\n", m->cells,
	                 m->bytes, m->k.python ? 1 : 0,
	                 m->k.first[0] ? m->k.first : "-", m->records);

	if (n < 0 || (size_t)n >= sizeof(line))
		return -EINVAL;
	return notebook_put(dirfd, NOTEBOOK_META, line, (size_t)n, O_TRUNC);
}

/* Rebuilds the cache from the records; *cells holds the cells. */
static int notebook_rebuild(int dirfd, struct notebook_meta *m,
                            struct buf *cells)
{
	cJSON *records = NULL;
	int r = notebook_load_upto(dirfd, &records, &m->records);

	if (r == 0)
		r = notebook_cells_all(records, &m->k, cells);
	m->cells = cJSON_GetArraySize(records);
	cJSON_Delete(records);
	if (r < 0)
		return r;
	m->bytes = cells->len;
	r = notebook_put(dirfd, NOTEBOOK_CELLS, cells->data ? cells->data : "",
	                 cells->len, O_TRUNC);
	return r < 0 ? r : notebook_meta_write(dirfd, m);
}

/*
 * The kept cells into cells, with a cell added for every record past those
 * the account covers: 1 done, 0 when the cache must be rebuilt (it does not
 * match its account, the records are shorter than it says, a Python cell
 * turns the kernel), or a negative errno.
 */
static int notebook_catch_up(int dirfd, struct notebook_meta *m,
                             struct buf *cells)
{
	char *kept = NULL, *data = NULL;
	const char *p, *nl, *end;
	size_t klen = 0, len = 0, before, was;
	int r;

	if (!notebook_meta_read(dirfd, m))
		return 0;
	if (m->cells == 0)
		memset(&m->k, 0, sizeof(m->k));
	r = files_read(dirfd, NOTEBOOK_CELLS, 4 * (size_t)NOTEBOOK_MAX_BYTES,
	               &kept, &klen, NULL);
	if (r == -ENOENT && m->cells == 0)
		r = 0;
	if (r < 0 || klen != m->bytes) {
		free(kept);
		return r == -ENOMEM ? r : 0;
	}
	r = buf_append(cells, kept ? kept : "", klen);
	free(kept);
	if (r < 0)
		return -ENOMEM;
	r = files_read(dirfd, NOTEBOOK_RECORDS, NOTEBOOK_MAX_BYTES, &data, &len,
	               NULL);
	if (r == -ENOENT)
		r = 0;
	if (r < 0 || len < m->records ||
	    (m->records && data[m->records - 1] != '\n')) {
		free(data);
		return r == -ENOMEM ? r : 0;
	}
	before = cells->len;
	was = m->records;
	end = data + len;
	for (p = data + m->records; p < end && r == 0; p = nl + 1) {
		cJSON *rec;
		const char *lang;

		nl = memchr(p, '\n', (size_t)(end - p));
		if (!nl)
			break; /* cut short by a crash: left out, as by load */
		rec = cJSON_ParseWithLength(p, (size_t)(nl - p));
		m->records = (size_t)(nl + 1 - data);
		if (!cJSON_IsObject(rec)) {
			cJSON_Delete(rec);
			continue;
		}
		lang = notebook_str(rec, "language");
		if (m->cells > 0 && strcmp(lang, "python") == 0 &&
		    !m->k.python) {
			r = 1; /* the kernel turns Python: every cell changes */
		} else {
			notebook_kernel_add(&m->k, lang);
			if (notebook_cell_append(cells, rec, (size_t)m->cells,
			                         m->k.python) < 0)
				r = -ENOMEM;
			else
				m->cells++;
		}
		cJSON_Delete(rec);
	}
	free(data);
	if (r != 0)
		return r < 0 ? r : 0;
	if (m->records == was)
		return 1;
	r = notebook_put(dirfd, NOTEBOOK_CELLS, cells->data + before,
	                 cells->len - before, O_APPEND);
	if (r < 0)
		return r;
	m->bytes = cells->len;
	r = notebook_meta_write(dirfd, m);
	return r < 0 ? r : 1;
}

int notebook_publish(int dirfd, const char *conversation_id, char **text,
                     size_t *len)
{
	struct notebook_meta m;
	struct buf cells;
	int r;

	*text = NULL;
	*len = 0;
	buf_init(&cells, 0);
	r = notebook_catch_up(dirfd, &m, &cells);
	if (r == 0) {
		buf_reset(&cells);
		memset(&m, 0, sizeof(m));
		r = notebook_rebuild(dirfd, &m, &cells);
	}
	if (r >= 0) {
		*text =
		    notebook_join(&m.k, conversation_id,
		                  cells.data ? cells.data : "", cells.len, len);
		r = *text ? 0 : -ENOMEM;
	}
	buf_finish(&cells);
	return r;
}

/* ---- replay -------------------------------------------------------------- */

static const char *notebook_stream_text(const cJSON *rec, const char *name)
{
	return notebook_str(notebook_output(rec, "stream", name), "text");
}

static const char *notebook_value_text(const cJSON *rec)
{
	return notebook_str(
	    cJSON_GetObjectItemCaseSensitive(
	        notebook_output(rec, "execute_result", NULL), "data"),
	    "text/plain");
}

static int notebook_figures(const cJSON *rec)
{
	const cJSON *o;
	int n = 0;

	cJSON_ArrayForEach (o, cJSON_GetObjectItemCaseSensitive(rec, "outputs"))
		n +=
		    strcmp(notebook_str(o, "output_type"), "display_data") == 0;
	return n;
}

cJSON *notebook_diff(const cJSON *a, const cJSON *b)
{
	cJSON *d = cJSON_CreateArray();

	if (!d)
		return NULL;
	if (strcmp(notebook_stream_text(a, "stdout"),
	           notebook_stream_text(b, "stdout")) != 0)
		cJSON_AddItemToArray(d, cJSON_CreateString("stdout"));
	if (strcmp(notebook_value_text(a), notebook_value_text(b)) != 0)
		cJSON_AddItemToArray(d, cJSON_CreateString("value"));
	if (strcmp(notebook_str(notebook_output(a, "error", NULL), "ename"),
	           notebook_str(notebook_output(b, "error", NULL), "ename")) !=
	    0)
		cJSON_AddItemToArray(d, cJSON_CreateString("error"));
	if (notebook_figures(a) != notebook_figures(b))
		cJSON_AddItemToArray(d, cJSON_CreateString("figures"));
	return d;
}
