/* SPDX-License-Identifier: MIT */
/*
 * tools_content: see tools_content.h.
 */
#include "tools/tools_content.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "config/config.h"
#include "workspace/files.h"

cJSON *tools_content_usage(const struct workspace_usage *u)
{
	cJSON *o = cJSON_CreateObject();

	if (!o)
		return NULL;
	cJSON_AddNumberToObject(o, "bytesUsed", (double)u->bytes);
	cJSON_AddNumberToObject(o, "bytesQuota", (double)u->quota_bytes);
	cJSON_AddNumberToObject(o, "files", (double)u->files);
	cJSON_AddNumberToObject(o, "filesQuota", (double)u->quota_files);
	cJSON_AddBoolToObject(o, "enforced", u->enforced);
	cJSON_AddBoolToObject(o, "over", u->over);
	return o;
}

static const char *str_item(const cJSON *o, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

	return cJSON_IsString(v) ? v->valuestring : NULL;
}

int tools_content_links(cJSON *content, const cJSON *files)
{
	const cJSON *f;

	cJSON_ArrayForEach (f, files) {
		const cJSON *size = cJSON_GetObjectItemCaseSensitive(f, "size");
		const char *url = str_item(f, "url");
		const char *name = str_item(f, "name");
		const char *path = str_item(f, "path");
		const char *mime = str_item(f, "mimeType");
		cJSON *o;

		if (!url || !name)
			continue;
		o = cJSON_CreateObject();
		if (!o)
			return -ENOMEM;
		cJSON_AddStringToObject(o, "type", "resource_link");
		cJSON_AddStringToObject(o, "uri", url);
		cJSON_AddStringToObject(o, "name", name);
		if (path)
			cJSON_AddStringToObject(o, "title", path);
		if (mime)
			cJSON_AddStringToObject(o, "mimeType", mime);
		if (cJSON_IsNumber(size))
			cJSON_AddNumberToObject(o, "size", size->valuedouble);
		cJSON_AddItemToArray(content, o);
	}
	return 0;
}

int tools_content_images(struct workspace *ws, cJSON *content,
                         const cJSON *files, unsigned max_images)
{
	size_t max =
	    workspace_mgr_config(workspace_mgr_of(ws))->inline_image_max_bytes;
	const cJSON *f;
	int n = 0;

	cJSON_ArrayForEach (f, files) {
		const cJSON *size = cJSON_GetObjectItemCaseSensitive(f, "size");
		const char *name = str_item(f, "name");
		const char *mime;
		char *data = NULL, *b64;
		size_t len = 0;
		cJSON *o;

		if ((unsigned)n >= max_images)
			break;
		if (!name || !cJSON_IsNumber(size) || size->valuedouble > max ||
		    strncmp(files_mime_base(name), "image/", 6) != 0)
			continue;
		if (files_read(workspace_dirfd(ws), name, max, &data, &len,
		               NULL) < 0)
			continue;
		mime = files_image_type(name, (const unsigned char *)data, len);
		if (!mime) {
			free(data);
			continue;
		}
		b64 = malloc(4 * ((len + 2) / 3) + 1);
		o = cJSON_CreateObject();
		if (!b64 || !o) {
			free(b64);
			free(data);
			cJSON_Delete(o);
			return -ENOMEM;
		}
		EVP_EncodeBlock((unsigned char *)b64,
		                (const unsigned char *)data, (int)len);
		free(data);
		cJSON_AddStringToObject(o, "type", "image");
		cJSON_AddStringToObject(o, "data", b64);
		cJSON_AddStringToObject(o, "mimeType", mime);
		free(b64);
		cJSON_AddItemToArray(content, o);
		n++;
	}
	return n;
}
