/* SPDX-License-Identifier: MIT */
/*
 * workspace_tenant: who owns which workspace, for the per-tenant limits.
 * A workspace's marker (meta/<name>) holds a keyed fingerprint of its
 * tenant (HMAC-SHA256 under a key derived from FILE_SECRET for this
 * purpose, 32 hex characters), so the count of each tenant's workspaces is
 * rebuilt from disk at start-up; markers written before tenants were
 * recorded are empty and count for their tenant from the first time it
 * opens them (the name proves whose they are). This file holds the
 * fingerprints, the per-tenant counts, the checks before a creation (the
 * cap WORKSPACE_MAX_PER_TENANT and the rate WORKSPACE_CREATE_BURST /
 * WORKSPACE_CREATE_PER_HOUR) and the start-up check of disk space.
 * Thread-safety as workspace.h; functions say when they need mgr->mu.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "util/errmsg.h"
#include "util/hex.h"
#include "util/log.h"
#include "util/ratelimit.h"
#include "workspace/workspace.h"
#include "workspace/workspace_internal.h"

#define RATE_KEYS 1024 /* tenants the creation rate remembers */
#define MB (1024ULL * 1024)

void workspace_tenant_fp(const struct workspace_mgr *m, const char *tenant,
                         char out[WS_TENANT_FP_LEN + 1])
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;

	out[0] = '\0';
	if (!tenant ||
	    !HMAC(EVP_sha256(), m->tenant_key, sizeof(m->tenant_key),
	          (const unsigned char *)tenant, strlen(tenant), md, &mdlen) ||
	    mdlen < WS_TENANT_FP_LEN / 2)
		return;
	hex_encode(md, WS_TENANT_FP_LEN / 2, out);
}

int workspace_marker_tenant(struct workspace_mgr *m, const char *name,
                            char fp[WS_TENANT_FP_LEN + 1])
{
	char buf[WS_TENANT_FP_LEN + 2];
	ssize_t n;
	int fd;

	fp[0] = '\0';
	fd = openat(m->metafd, name,
	            O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? -ENOENT : 0;
	n = read(fd, buf, sizeof(buf));
	close(fd);
	if (n == WS_TENANT_FP_LEN && hex_is_lower(buf, WS_TENANT_FP_LEN)) {
		memcpy(fp, buf, WS_TENANT_FP_LEN);
		fp[WS_TENANT_FP_LEN] = '\0';
	}
	return 0;
}

int workspace_marker_write_tenant(int fd, const char *fp)
{
	ssize_t n = pwrite(fd, fp, WS_TENANT_FP_LEN, 0);

	return n == WS_TENANT_FP_LEN ? 0 : n < 0 ? -errno : -EIO;
}

static struct ws_tenant *tenant_find(struct workspace_mgr *m, const char *fp,
                                     bool create)
{
	struct ws_tenant *t;

	for (size_t i = 0; i < m->n_tenants; i++)
		if (strcmp(m->tenants[i].fp, fp) == 0)
			return &m->tenants[i];
	if (!create)
		return NULL;
	if (m->n_tenants == m->cap_tenants) {
		size_t cap = m->cap_tenants ? m->cap_tenants * 2 : 8;

		t = realloc(m->tenants, cap * sizeof(*t));
		if (!t)
			return NULL;
		m->tenants = t;
		m->cap_tenants = cap;
	}
	t = &m->tenants[m->n_tenants++];
	memset(t, 0, sizeof(*t));
	snprintf(t->fp, sizeof(t->fp), "%.*s", WS_TENANT_FP_LEN, fp);
	return t;
}

int workspace_tenant_add(struct workspace_mgr *m, const char *fp, int delta)
{
	struct ws_tenant *t;

	if (!fp || !fp[0])
		return 0;
	t = tenant_find(m, fp, delta > 0);
	if (!t)
		return delta > 0 ? -ENOMEM : 0;
	if (delta < 0 && t->count < (unsigned)-delta)
		t->count = 0;
	else
		t->count += (unsigned)delta;
	return 0;
}

int workspace_tenant_may_create(struct workspace_mgr *m, const char *fp,
                                char *err, size_t errlen)
{
	const struct config *cfg = m->cfg;
	struct ws_tenant *t = tenant_find(m, fp, false);
	unsigned have = t ? t->count : 0, wait_s = 0;
	char span[48];

	/* With one tenant the server's own cap says it better. */
	if (m->per_tenant_max < cfg->max_workspaces &&
	    have >= m->per_tenant_max) {
		log_warnx("tenant %.8s: workspace cap of %u reached", fp,
		          m->per_tenant_max);
		errmsg_set(
		    err, errlen,
		    "this tenant already keeps %u conversations' "
		    "workspaces, the most it may keep (%u: "
		    "WORKSPACE_MAX_PER_TENANT%s); use the conversationId "
		    "of an earlier conversation, or wait: a workspace "
		    "unused for %s (WORKSPACE_RETENTION_%s) is "
		    "deleted and makes room; or ask the operator to raise "
		    "WORKSPACE_MAX_PER_TENANT",
		    have, m->per_tenant_max,
		    cfg->workspace_max_per_tenant
		        ? ""
		        : ", by default WORKSPACE_MAX_COUNT shared among the "
		          "server's tenants",
		    workspace_retention_text(cfg, span, sizeof(span)),
		    cfg->retention_seconds ? "SECONDS" : "HOURS");
		return -EDQUOT;
	}
	if (m->create_rl && !ratelimit_take(m->create_rl, fp, &wait_s)) {
		log_warnx("tenant %.8s: new workspaces rate-limited", fp);
		errmsg_set(err, errlen,
		           "this tenant is creating workspaces for new "
		           "conversations faster than the server allows (%u "
		           "at once, then %u an hour: WORKSPACE_CREATE_BURST, "
		           "WORKSPACE_CREATE_PER_HOUR); try again in %u s, or "
		           "use the conversationId of an earlier conversation",
		           cfg->workspace_create_burst,
		           cfg->workspace_create_per_hour, wait_s);
		return -EAGAIN;
	}
	return 0;
}

/* ---- limits and start-up ---------------------------------------------- */

bool workspace_disk_advice(unsigned max_count, unsigned long long quota_bytes,
                           unsigned long long free_bytes, const char *root,
                           char *msg, size_t msglen)
{
	unsigned long long fit, quota_mb = quota_bytes / MB, fit_mb;
	char quota_hint[80] = "";

	if (msg && msglen)
		msg[0] = '\0';
	/* max_count * quota_bytes > free_bytes, without overflow. */
	if (quota_bytes == 0 || max_count == 0 ||
	    (unsigned long long)max_count <= free_bytes / quota_bytes)
		return false;
	fit = free_bytes / quota_bytes;
	fit_mb = free_bytes / max_count / MB;
	if (fit == 0) {
		errmsg_set(msg, msglen,
		           "SANDBOX_ROOT=%s has %llu MB free, less than one "
		           "workspace's quota (WORKSPACE_QUOTA_MB=%llu): new "
		           "workspaces will be refused. Lower "
		           "WORKSPACE_QUOTA_MB to at most %llu, or give "
		           "SANDBOX_ROOT more disk",
		           root, free_bytes / MB, quota_mb, free_bytes / MB);
		return true;
	}
	/* A quota under 1 MB is no advice. */
	if (fit_mb)
		snprintf(quota_hint, sizeof(quota_hint),
		         " or WORKSPACE_QUOTA_MB to %llu", fit_mb);
	errmsg_set(msg, msglen,
	           "WORKSPACE_MAX_COUNT=%u workspaces of "
	           "WORKSPACE_QUOTA_MB=%llu can hold %llu MB, more than the "
	           "%llu MB free under SANDBOX_ROOT=%s: once the disk is "
	           "full, new workspaces are refused and runs fail writing. "
	           "Lower WORKSPACE_MAX_COUNT to %llu%s, or give "
	           "SANDBOX_ROOT more disk",
	           max_count, quota_mb,
	           (unsigned long long)max_count * quota_mb, free_bytes / MB,
	           root, fit, quota_hint);
	return true;
}

void workspace_check_disk(struct workspace_mgr *m)
{
	const struct config *cfg = m->cfg;
	struct statvfs sv;
	char msg[600];

	if (fstatvfs(m->wsfd, &sv) < 0) {
		log_warn("cannot read the free space of SANDBOX_ROOT=%s",
		         cfg->sandbox_root);
		return;
	}
	if (workspace_disk_advice(cfg->max_workspaces,
	                          cfg->workspace_quota_bytes,
	                          (unsigned long long)sv.f_bavail * sv.f_frsize,
	                          cfg->sandbox_root, msg, sizeof(msg)))
		log_warnx("%s", msg);
}

unsigned workspace_tenants_of(const struct config *cfg)
{
	unsigned n = 0;

	/* Every request is the tenant "local" then, tokens or not. */
	if (cfg->auth_none)
		return 1;
	for (size_t i = 0; i < cfg->n_tokens; i++) {
		size_t j;

		for (j = 0; j < i; j++)
			if (strcmp(cfg->tokens[i].tenant,
			           cfg->tokens[j].tenant) == 0)
				break;
		n += j == i;
	}
	return n ? n : 1;
}

/*
 * The default cap divides WORKSPACE_MAX_COUNT among the configured tenants,
 * so that every tenant can reach its cap whatever the others do: no tenant
 * can lock another out of new conversations.
 */
int workspace_tenants_setup(struct workspace_mgr *m, char *err, size_t errlen)
{
	const struct config *cfg = m->cfg;
	unsigned n = workspace_tenants_of(cfg);

	m->n_config_tenants = n;
	m->per_tenant_max = cfg->workspace_max_per_tenant;
	if (!m->per_tenant_max)
		m->per_tenant_max =
		    cfg->max_workspaces / n ? cfg->max_workspaces / n : 1;
	if (cfg->workspace_create_per_hour) {
		m->create_rl = ratelimit_create(
		    RATE_KEYS,
		    cfg->workspace_create_burst ? cfg->workspace_create_burst
		                                : 1,
		    cfg->workspace_create_per_hour / 3600.0);
		if (!m->create_rl)
			return errmsg_fail(-ENOMEM, err, errlen,
			                   "out of memory");
	}
	return 0;
}

void workspace_tenants_finish(struct workspace_mgr *m)
{
	ratelimit_destroy(m->create_rl);
	m->create_rl = NULL;
	free(m->tenants);
	m->tenants = NULL;
	m->n_tenants = m->cap_tenants = 0;
}
