/* SPDX-License-Identifier: MIT */
/*
 * warm_state: the daemon's side of durable sessions; see warm_state.h.
 * Everything here treats the kernel's report as hostile: it is copied field
 * by field, bounded and checked, never passed on as it came.
 */
#include "run/warm/warm_state.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs/fstree.h"
#include "run/capture.h"
#include "util/buf.h"
#include "workspace/files.h"

/* A non-negative integer field below 2^53, or -1. */
static double st_num(const cJSON *o, const char *name)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);

	if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) ||
	    v->valuedouble < 0 || v->valuedouble > 9007199254740991.0)
		return -1;
	return floor(v->valuedouble);
}

static bool st_add_num(cJSON *dst, const cJSON *src, const char *name)
{
	double n = st_num(src, name);

	return n < 0 || cJSON_AddNumberToObject(dst, name, n) != NULL;
}

/* A string of src as valid UTF-8, cut; NULL (not added) when not one. */
static bool st_add_str(cJSON *dst, const char *key, const cJSON *v)
{
	const char *s = cJSON_GetStringValue(v);
	struct buf b;
	size_t n;
	bool ok;

	if (!s)
		return true;
	n = strlen(s);
	if (n > WARM_STATE_TEXT_MAX) {
		n = WARM_STATE_TEXT_MAX;
		/* Not in the middle of a character. */
		while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80)
			n--;
	}
	buf_init(&b, WARM_STATE_TEXT_MAX * 3 + 16);
	ok = capture_utf8_sanitize(s, n, &b) == 0 && buf_putc(&b, '\0') == 0 &&
	     cJSON_AddStringToObject(dst, key, b.data) != NULL;
	buf_finish(&b);
	return ok;
}

/* [{"name","why"}...] of src, cut to WARM_STATE_NAMES_MAX. */
static bool st_add_names(cJSON *dst, const cJSON *src, const char *key)
{
	const cJSON *list = cJSON_GetObjectItemCaseSensitive(src, key);
	const cJSON *e;
	cJSON *out;
	int n = 0;

	if (!cJSON_IsArray(list))
		return true;
	out = cJSON_AddArrayToObject(dst, key);
	if (!out)
		return false;
	cJSON_ArrayForEach (e, list) {
		cJSON *o;

		if (n >= WARM_STATE_NAMES_MAX)
			break;
		if (!cJSON_IsObject(e) ||
		    !cJSON_IsString(
		        cJSON_GetObjectItemCaseSensitive(e, "name")))
			continue;
		o = cJSON_CreateObject();
		if (!o)
			return false;
		cJSON_AddItemToArray(out, o);
		if (!st_add_str(o, "name",
		                cJSON_GetObjectItemCaseSensitive(e, "name")) ||
		    !st_add_str(o, "why",
		                cJSON_GetObjectItemCaseSensitive(e, "why")))
			return false;
		n++;
	}
	return true;
}

/* ["text"...] of src, cut to WARM_STATE_NAMES_MAX. */
static bool st_add_strs(cJSON *dst, const cJSON *src, const char *key)
{
	const cJSON *list = cJSON_GetObjectItemCaseSensitive(src, key);
	const cJSON *e;
	cJSON *out, *tmp;
	int n = 0;

	if (!cJSON_IsArray(list))
		return true;
	out = cJSON_AddArrayToObject(dst, key);
	tmp = cJSON_CreateObject();
	if (!out || !tmp) {
		cJSON_Delete(tmp);
		return false;
	}
	cJSON_ArrayForEach (e, list) {
		cJSON *s;

		if (n >= WARM_STATE_NAMES_MAX)
			break;
		if (!cJSON_IsString(e))
			continue;
		if (!st_add_str(tmp, "s", e)) {
			cJSON_Delete(tmp);
			return false;
		}
		s = cJSON_DetachItemFromObjectCaseSensitive(tmp, "s");
		cJSON_AddItemToArray(out, s);
		n++;
	}
	cJSON_Delete(tmp);
	return true;
}

/* The run numbers saved: [N...], at most 64. */
static bool st_add_runs(cJSON *dst, const cJSON *src, const char *key)
{
	const cJSON *list = cJSON_GetObjectItemCaseSensitive(src, key);
	const cJSON *e;
	cJSON *out;
	int n = 0;

	if (!cJSON_IsArray(list))
		return true;
	out = cJSON_AddArrayToObject(dst, key);
	if (!out)
		return false;
	cJSON_ArrayForEach (e, list) {
		cJSON *num;

		if (n >= 64)
			break;
		if (!cJSON_IsNumber(e) || !isfinite(e->valuedouble) ||
		    e->valuedouble < 1 || e->valuedouble > 9007199254740991.0)
			continue;
		num = cJSON_CreateNumber(floor(e->valuedouble));
		if (!num)
			return false;
		cJSON_AddItemToArray(out, num);
		n++;
	}
	return true;
}

static cJSON *st_saved(const cJSON *s)
{
	cJSON *o = cJSON_CreateObject();
	const cJSON *ok = cJSON_GetObjectItemCaseSensitive(s, "ok");

	if (!o || !cJSON_AddBoolToObject(o, "ok", cJSON_IsTrue(ok)) ||
	    !st_add_num(o, s, "run") || !st_add_num(o, s, "bytes") ||
	    !st_add_num(o, s, "ms") || !st_add_num(o, s, "not_saved_more") ||
	    !st_add_names(o, s, "not_saved") ||
	    !st_add_str(o, "error",
	                cJSON_GetObjectItemCaseSensitive(s, "error"))) {
		cJSON_Delete(o);
		return NULL;
	}
	return o;
}

static cJSON *st_restored(const cJSON *r)
{
	cJSON *o = cJSON_CreateObject();
	const char *kind =
	    cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(r, "kind"));
	double at = st_num(r, "saved_at");
	char iso[FILES_ISO8601_LEN];

	if (!o)
		return NULL;
	if (!cJSON_AddStringToObject(
	        o, "kind",
	        kind && strcmp(kind, "rewind") == 0 ? "rewind" : "restore"))
		goto fail;
	if (at > 0 && at < 1e11) {
		files_iso8601((time_t)at, iso);
		if (!cJSON_AddStringToObject(o, "saved_at", iso))
			goto fail;
	}
	if (!st_add_num(o, r, "run") || !st_add_num(o, r, "ms") ||
	    !st_add_num(o, r, "names") || !st_add_strs(o, r, "imports") ||
	    !st_add_names(o, r, "not_restored") ||
	    !st_add_str(o, "error",
	                cJSON_GetObjectItemCaseSensitive(r, "error")))
		goto fail;
	return o;
fail:
	cJSON_Delete(o);
	return NULL;
}

cJSON *warm_state_take(const cJSON *x_state)
{
	const cJSON *saved, *restored;
	cJSON *out, *o;

	if (!cJSON_IsObject(x_state))
		return NULL;
	out = cJSON_CreateObject();
	if (!out || !st_add_num(out, x_state, "run") ||
	    !st_add_runs(out, x_state, "kept"))
		goto fail;
	saved = cJSON_GetObjectItemCaseSensitive(x_state, "saved");
	if (cJSON_IsObject(saved)) {
		o = st_saved(saved);
		if (!o)
			goto fail;
		cJSON_AddItemToObject(out, "saved", o);
	}
	restored = cJSON_GetObjectItemCaseSensitive(x_state, "restored");
	if (cJSON_IsObject(restored)) {
		o = st_restored(restored);
		if (!o)
			goto fail;
		cJSON_AddItemToObject(out, "restored", o);
	}
	return out;
fail:
	cJSON_Delete(out);
	return NULL;
}

const char *warm_state_loaded(const cJSON *st)
{
	const cJSON *r = cJSON_GetObjectItemCaseSensitive(st, "restored");
	const char *kind;

	if (!cJSON_IsObject(r) ||
	    cJSON_GetObjectItemCaseSensitive(r, "error") != NULL)
		return NULL;
	kind =
	    cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(r, "kind"));
	return kind && strcmp(kind, "rewind") == 0 ? "rewind" : "restore";
}

int warm_state_drop(int wsfd, const char *lang)
{
	struct stat sb;
	int mcp, st, rc;

	mcp = openat(wsfd, ".mcp",
	             O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (mcp < 0)
		return errno == ENOENT || errno == ENOTDIR || errno == ELOOP
		           ? 0
		           : -errno;
	if (fstatat(mcp, "state", &sb, AT_SYMLINK_NOFOLLOW) < 0) {
		rc = errno == ENOENT ? 0 : -errno;
		close(mcp);
		return rc;
	}
	if (!S_ISDIR(sb.st_mode)) {
		/* A link or file the code put there: it goes, never followed.
		 */
		rc = fstree_remove(mcp, "state");
		close(mcp);
		return rc;
	}
	st = openat(mcp, "state",
	            O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	close(mcp);
	if (st < 0)
		return errno == ENOENT ? 0 : -errno;
	rc = fstree_remove(st, lang);
	close(st);
	return rc;
}

/* Opens the directory .mcp/state/<lang> under wsfd one component at a
 * time, never following a link the code put there. -1 when absent. */
static int warm_state_dir(int wsfd, const char *lang)
{
	const char *part[] = {".mcp", "state", lang};
	int fd = wsfd, next;

	for (size_t i = 0; i < 3; i++) {
		next = openat(fd, part[i],
		              O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd != wsfd)
			close(fd);
		if (next < 0)
			return -1;
		fd = next;
	}
	return fd;
}

bool warm_state_saving(int wsfd, const char *lang)
{
	struct dirent *e;
	bool saving = false;
	int fd = warm_state_dir(wsfd, lang);
	DIR *d;

	if (fd < 0)
		return false;
	d = fdopendir(fd);
	if (!d) {
		close(fd);
		return false;
	}
	while (!saving && (e = readdir(d)))
		saving = strncmp(e->d_name, ".run-", 5) == 0 &&
		         strstr(e->d_name, ".tmp-") != NULL;
	closedir(d);
	return saving;
}

bool warm_state_saved(int wsfd, const char *lang, unsigned long long run)
{
	char name[48];
	struct stat sb;
	int fd = warm_state_dir(wsfd, lang);
	bool ok;

	if (fd < 0)
		return false;
	snprintf(name, sizeof(name), "run-%llu.state", run);
	/* The kernel renames a finished save into place: it is whole. */
	ok = fstatat(fd, name, &sb, AT_SYMLINK_NOFOLLOW) == 0 &&
	     S_ISREG(sb.st_mode);
	close(fd);
	return ok;
}
