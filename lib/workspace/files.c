/* SPDX-License-Identifier: MIT */
/*
 * files: the media type allow-list, validators and the /files/ hook. What
 * may be shown inline is decided here and nowhere else; http.c only turns
 * inline_ok into the Content-Disposition it sends.
 */
#include "workspace/files.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "fs/fsname.h"
#include "fs/fstree.h"
#include "util/hex.h"
#include "util/log.h"
#include "workspace/workspace.h"

struct mime {
	const char *ext;
	const char *type;
	bool inline_ok;
};

/*
 * Only raster images and plain text are inline. HTML and SVG run script in
 * the serving origin even with nosniff; PDF has its own script engine; the
 * rest is there so downloads get a useful type.
 */
static const struct mime mimes[] = {
    {"png", "image/png", true},
    {"jpg", "image/jpeg", true},
    {"jpeg", "image/jpeg", true},
    {"gif", "image/gif", true},
    {"webp", "image/webp", true},
    {"avif", "image/avif", true},
    {"txt", "text/plain; charset=utf-8", true},
    {"log", "text/plain; charset=utf-8", true},
    {"csv", "text/csv; charset=utf-8", true},
    {"tsv", "text/tab-separated-values; charset=utf-8", true},
    {"md", "text/markdown; charset=utf-8", true},
    {"json", "application/json", true},
    {"html", "text/html; charset=utf-8", false},
    {"htm", "text/html; charset=utf-8", false},
    {"xhtml", "application/xhtml+xml", false},
    {"svg", "image/svg+xml", false},
    {"pdf", "application/pdf", false},
    {"xml", "application/xml", false},
    {"js", "text/javascript", false},
    {"mjs", "text/javascript", false},
    {"css", "text/css", false},
    {"py", "text/x-python", false},
    {"ts", "application/typescript", false},
    {"sh", "text/x-shellscript", false},
    {"ipynb", "application/x-ipynb+json", false},
    {"yaml", "application/yaml", false},
    {"yml", "application/yaml", false},
    {"toml", "application/toml", false},
    {"sql", "application/sql", false},
    {"bmp", "image/bmp", false},
    {"tif", "image/tiff", false},
    {"tiff", "image/tiff", false},
    {"zip", "application/zip", false},
    {"gz", "application/gzip", false},
    {"tgz", "application/gzip", false},
    {"tar", "application/x-tar", false},
    {"xz", "application/x-xz", false},
    {"bz2", "application/x-bzip2", false},
    {"parquet", "application/vnd.apache.parquet", false},
    {"xlsx",
     "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
     false},
    {"docx",
     "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
     false},
    {"pptx",
     "application/"
     "vnd.openxmlformats-officedocument.presentationml.presentation",
     false},
    {"xls", "application/vnd.ms-excel", false},
    {"mp3", "audio/mpeg", false},
    {"wav", "audio/wav", false},
    {"ogg", "audio/ogg", false},
    {"mp4", "video/mp4", false},
    {"webm", "video/webm", false},
    {"wasm", "application/wasm", false},
};

static const char octet[] = "application/octet-stream";

static const struct mime *mime_of(const char *name)
{
	const char *slash = strrchr(name, '/');
	const char *dot = strrchr(slash ? slash + 1 : name, '.');

	if (!dot || !dot[1])
		return NULL;
	for (size_t i = 0; i < sizeof(mimes) / sizeof(mimes[0]); i++)
		if (strcasecmp(dot + 1, mimes[i].ext) == 0)
			return &mimes[i];
	return NULL;
}

const char *files_mime_type(const char *name, bool *inline_ok)
{
	const struct mime *m = mime_of(name);

	if (inline_ok)
		*inline_ok = m && m->inline_ok;
	return m ? m->type : octet;
}

const char *files_mime_base(const char *name)
{
	/* The same table without parameters; only text types have them. */
	static const struct {
		const char *full, *base;
	} bases[] = {
	    {"text/plain; charset=utf-8", "text/plain"},
	    {"text/csv; charset=utf-8", "text/csv"},
	    {"text/tab-separated-values; charset=utf-8",
	     "text/tab-separated-values"},
	    {"text/markdown; charset=utf-8", "text/markdown"},
	    {"text/html; charset=utf-8", "text/html"},
	};
	const char *t = files_mime_type(name, NULL);

	for (size_t i = 0; i < sizeof(bases) / sizeof(bases[0]); i++)
		if (strcmp(t, bases[i].full) == 0)
			return bases[i].base;
	return t;
}

const char *files_image_type(const char *name, const unsigned char *h, size_t n)
{
	const char *t = files_mime_base(name);

	if (strcmp(t, "image/png") == 0 && n >= 8 &&
	    memcmp(h, "\x89PNG\r\n\x1a\n", 8) == 0)
		return t;
	if (strcmp(t, "image/jpeg") == 0 && n >= 3 && h[0] == 0xFF &&
	    h[1] == 0xD8 && h[2] == 0xFF)
		return t;
	if (strcmp(t, "image/gif") == 0 && n >= 6 &&
	    (memcmp(h, "GIF87a", 6) == 0 || memcmp(h, "GIF89a", 6) == 0))
		return t;
	if (strcmp(t, "image/webp") == 0 && n >= 12 &&
	    memcmp(h, "RIFF", 4) == 0 && memcmp(h + 8, "WEBP", 4) == 0)
		return t;
	return NULL;
}

bool files_is_text_type(const char *mime)
{
	static const char *const text[] = {
	    "application/json",
	    "application/xml",
	    "application/yaml",
	    "application/toml",
	    "application/sql",
	    "application/typescript",
	    "application/x-ipynb+json",
	    "application/xhtml+xml",
	    "image/svg+xml",
	};

	if (strncmp(mime, "text/", 5) == 0)
		return true;
	for (size_t i = 0; i < sizeof(text) / sizeof(text[0]); i++)
		if (strcmp(mime, text[i]) == 0)
			return true;
	return false;
}

void files_etag(const struct stat *st, char *out, size_t outsize)
{
	unsigned long long v[8] = {
	    (unsigned long long)st->st_dev,
	    (unsigned long long)st->st_ino,
	    (unsigned long long)st->st_size,
	    (unsigned long long)st->st_mtim.tv_sec,
	    (unsigned long long)st->st_mtim.tv_nsec,
	    (unsigned long long)st->st_ctim.tv_sec,
	    (unsigned long long)st->st_ctim.tv_nsec,
	    0,
	};
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	char tag[35];

	/* Hashed, so inode numbers and devices do not show in headers. */
	if (!EVP_Digest(v, sizeof(v), md, &mdlen, EVP_sha256(), NULL) ||
	    mdlen < 16)
		memset(md, 0, 16);
	tag[0] = '"';
	hex_encode(md, 16, tag + 1);
	tag[33] = '"';
	tag[34] = '\0';
	snprintf(out, outsize, "%s", tag);
}

void files_iso8601(time_t t, char out[FILES_ISO8601_LEN])
{
	struct tm tm;

	if (!gmtime_r(&t, &tm) ||
	    strftime(out, FILES_ISO8601_LEN, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
		snprintf(out, FILES_ISO8601_LEN, "1970-01-01T00:00:00Z");
}

bool files_is_private(const char *rel)
{
	size_t n = strlen(FILES_PRIVATE_DIR);

	while (rel[0] == '/')
		rel++;
	return strncmp(rel, FILES_PRIVATE_DIR, n) == 0 &&
	       (rel[n] == '\0' || rel[n] == '/');
}

int files_read_any(int dirfd, const char *rel, size_t max, char **data,
                   size_t *len, struct stat *st_out)
{
	struct stat st;
	size_t n = 0, want;
	char *p = NULL;
	int fd, r = 0;

	*data = NULL;
	if (len)
		*len = 0;
	fd = fstree_open_regular(dirfd, rel, &st);
	if (fd < 0)
		return fd;
	if ((unsigned long long)st.st_size > max) {
		r = -EFBIG;
		goto out;
	}
	want = (size_t)st.st_size;
	p = malloc(want + 1);
	if (!p) {
		r = -ENOMEM;
		goto out;
	}
	while (n < want) {
		ssize_t k = read(fd, p + n, want - n);

		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0) {
			r = -errno;
			goto out;
		}
		if (k == 0)
			break; /* truncated meanwhile: return what is there */
		n += (size_t)k;
	}
	p[n] = '\0';
	*data = p;
	p = NULL;
	if (len)
		*len = n;
	if (st_out)
		*st_out = st;
out:
	free(p);
	close(fd);
	return r;
}

int files_read(int dirfd, const char *rel, size_t max, char **data, size_t *len,
               struct stat *st_out)
{
	*data = NULL;
	if (len)
		*len = 0;
	if (files_is_private(rel))
		return -ENOENT;
	return files_read_any(dirfd, rel, max, data, len, st_out);
}

int files_http_get(void *data, const char *path, struct http_file *out,
                   char *err, size_t errlen)
{
	struct workspace_mgr *mgr = data;
	char rel[FSNAME_PATH_MAX + 1], name[WORKSPACE_NAME_LEN + 1];
	const char *slash = strchr(path, '/');
	const char *base;
	struct workspace *ws = NULL;
	struct stat st;
	int fd, r;

	out->fd = -1;
	snprintf(err, errlen, "file not found");
	if (!slash || (size_t)(slash - path) != WORKSPACE_NAME_LEN ||
	    !hex_is_lower(path, WORKSPACE_NAME_LEN))
		return 404;
	if (fsname_url_decode(slash + 1, rel, sizeof(rel), NULL, NULL, err,
	                      errlen) < 0)
		return 400;
	snprintf(err, errlen, "file not found");
	if (files_is_private(rel))
		return 404;
	memcpy(name, path, WORKSPACE_NAME_LEN);
	name[WORKSPACE_NAME_LEN] = '\0';
	r = workspace_open_by_name(mgr, name, &ws);
	if (r == -ENOENT)
		return 404;
	if (r < 0) {
		log_warnx("files: cannot open a workspace for serving: %s",
		          strerror(-r));
		snprintf(err, errlen,
		         "the file cannot be served right now; try again "
		         "later");
		return 503;
	}
	/* A download sees what runs answered before it left for later. */
	workspace_flush_deferred(ws);
	fd = fstree_open_regular(workspace_dirfd(ws), rel, &st);
	workspace_close(ws);
	if (fd < 0) {
		if (fd != -ENOENT)
			log_debug("files: open failed: %s", strerror(-fd));
		return 404;
	}
	out->fd = fd;
	out->size = (uint64_t)st.st_size;
	out->mtime = st.st_mtim.tv_sec;
	out->content_type = files_mime_type(rel, &out->inline_ok);
	files_etag(&st, out->etag, sizeof(out->etag));
	base = strrchr(rel, '/');
	base = base ? base + 1 : rel;
	/* Segments are at most 255 bytes: the name always fits. */
	{
		size_t bl = strlen(base);

		if (bl >= sizeof(out->filename))
			bl = sizeof(out->filename) - 1;
		memcpy(out->filename, base, bl);
		out->filename[bl] = '\0';
	}
	err[0] = '\0';
	return 0;
}
