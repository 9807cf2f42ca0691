/* SPDX-License-Identifier: MIT */
/*
 * audit_cli: see audit_cli.h.
 */
#include "audit_cli.h"

#include <errno.h>
#include <string.h>

#include "audit/audit.h"
#include "schema.h"
#include "store/store.h"

#define AUDIT_CLI_BROKEN 1
#define AUDIT_CLI_TROUBLE 2
#define AUDIT_CLI_PAGE 10000

static int audit_cli_verify(struct store *st, FILE *out, FILE *err)
{
	struct audit_verdict v;
	cJSON *o;
	char *txt;
	int r = audit_verify(st, &v);

	if (r < 0) {
		fprintf(err,
		        "mcp-sandboxd: the audit trail in %s could not be "
		        "read: %s\n",
		        store_path(st), strerror(-r));
		return AUDIT_CLI_TROUBLE;
	}
	o = cJSON_CreateObject();
	cJSON_AddBoolToObject(o, "ok", v.ok);
	cJSON_AddNumberToObject(o, "entries", (double)v.entries);
	cJSON_AddNumberToObject(o, "first_seq", (double)v.first_seq);
	cJSON_AddNumberToObject(o, "head_seq", (double)v.head_seq);
	cJSON_AddStringToObject(o, "head_hash", v.head_hash);
	if (!v.ok) {
		cJSON_AddNumberToObject(o, "broken_seq", (double)v.broken_seq);
		cJSON_AddStringToObject(o, "reason", v.reason);
	}
	txt = o ? cJSON_PrintUnformatted(o) : NULL;
	if (txt)
		fprintf(out, "%s\n", txt);
	cJSON_free(txt);
	cJSON_Delete(o);
	if (!v.ok)
		fprintf(err,
		        "mcp-sandboxd: the audit trail is broken at entry "
		        "%lld: %s\n",
		        v.broken_seq, v.reason);
	return v.ok ? 0 : AUDIT_CLI_BROKEN;
}

static int audit_cli_line(void *arg, const char *line, size_t n)
{
	return fwrite(line, 1, n, arg) == n ? 0 : -EIO;
}

static int audit_cli_export(struct store *st, int argc, char **argv, FILE *out,
                            FILE *err)
{
	struct audit_filter f = {.limit = AUDIT_CLI_PAGE};
	long long last;
	int r;

	for (int i = 1; i < argc; i++) {
		if (i + 1 < argc && strcmp(argv[i], "--tenant") == 0) {
			f.tenant = argv[++i];
		} else if (i + 1 < argc &&
		           strcmp(argv[i], "--conversation") == 0) {
			f.conversation = argv[++i];
		} else {
			fprintf(err,
			        "mcp-sandboxd: audit export: unexpected "
			        "'%s'; options: --tenant NAME, "
			        "--conversation ID\n",
			        argv[i]);
			return AUDIT_CLI_TROUBLE;
		}
	}
	do {
		r = audit_export(st, &f, audit_cli_line, out, &last);
		f.after_seq = last;
	} while (r == 0 && last);
	if (r < 0 || fflush(out) != 0) {
		fprintf(err, "mcp-sandboxd: audit export failed: %s\n",
		        strerror(r < 0 ? -r : errno));
		return AUDIT_CLI_TROUBLE;
	}
	return 0;
}

int audit_cli(const struct config *cfg, int argc, char **argv, FILE *out,
              FILE *err)
{
	struct store *st = NULL;
	char why[1024];
	int rc;

	if (argc < 1 || (strcmp(argv[0], "verify") != 0 &&
	                 strcmp(argv[0], "export") != 0)) {
		fprintf(err, "mcp-sandboxd: audit: give verify, or export "
		             "[--tenant NAME] [--conversation ID]\n");
		return AUDIT_CLI_TROUBLE;
	}
	if (strcmp(argv[0], "verify") == 0 && argc > 1) {
		fprintf(err, "mcp-sandboxd: audit verify takes no arguments\n");
		return AUDIT_CLI_TROUBLE;
	}
	if (schema_open(*cfg->store_url ? cfg->store_url : cfg->store_path, &st,
	                why, sizeof(why)) < 0) {
		fprintf(err, "mcp-sandboxd: store: %s\n", why);
		return AUDIT_CLI_TROUBLE;
	}
	rc = strcmp(argv[0], "verify") == 0
	         ? audit_cli_verify(st, out, err)
	         : audit_cli_export(st, argc, argv, out, err);
	store_close(st);
	return rc;
}
