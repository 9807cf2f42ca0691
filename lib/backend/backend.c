/* SPDX-License-Identifier: MIT */
/*
 * backend: the registry of execution backends, chosen by name
 * (SANDBOX_BACKEND), and the checks of the choice; see backend.h. The
 * table of backends is constant; nothing here holds state or a lock.
 */
#include "backend/backend.h"

#include <string.h>

#include "config/config.h"
#include "util/errmsg.h"

/*
 * Each backend's table, defined in its folder (backend_docker.h,
 * backend_swarm.h). Declared here rather than included, so that the
 * contract's folder does not include the folders that implement it.
 */
extern const struct backend_impl backend_docker_impl;
extern const struct backend_impl backend_swarm_impl;

/* The first is the default (the table of settings says so too). */
static const struct backend_impl *const backend_available[] = {
    &backend_docker_impl,
    &backend_swarm_impl,
};

#define BACKEND_N (sizeof(backend_available) / sizeof(backend_available[0]))

const struct backend_impl *backend_at(size_t i)
{
	return i < BACKEND_N ? backend_available[i] : NULL;
}

const struct backend_impl *backend_find(const char *name)
{
	for (size_t i = 0; name && i < BACKEND_N; i++)
		if (strcmp(backend_available[i]->name, name) == 0)
			return backend_available[i];
	return NULL;
}

const char *backend_names(unsigned features, const char *sep, char *out,
                          size_t len)
{
	size_t used = 0;

	if (len)
		out[0] = '\0';
	for (size_t i = 0; i < BACKEND_N && used < len; i++) {
		const struct backend_impl *bi = backend_available[i];
		int n;

		if (!backend_impl_has(bi, features))
			continue;
		n = snprintf(out + used, len - used, "%s%s", used ? sep : "",
		             bi->name);
		if (n < 0)
			break;
		used += (size_t)n;
	}
	return out;
}

const char *backend_lacks(const struct backend_impl *bi, unsigned feature)
{
	const char *why = bi->lacks ? bi->lacks(feature) : NULL;

	return why ? why : "the backend cannot";
}

/* The settings that need a capability the chosen backend lacks. */
static int backend_check_needs(const struct config *cfg,
                               const struct backend_impl *bi, char *err,
                               size_t errlen)
{
	if (cfg->allow_network && !backend_impl_has(bi, BACKEND_CAN_NETWORK))
		return errmsg_fail(
		    -EINVAL, err, errlen,
		    "SANDBOX_ALLOW_NETWORK=true cannot be honoured with "
		    "SANDBOX_BACKEND=%s: %s; set SANDBOX_ALLOW_NETWORK=false",
		    bi->name, backend_lacks(bi, BACKEND_CAN_NETWORK));
	return 0;
}

int backend_configure(const struct config *cfg, char *err, size_t errlen)
{
	const struct backend_impl *chosen = backend_find(cfg->backend);
	char names[128];
	int rc;

	if (!chosen)
		return errmsg_fail(
		    -EINVAL, err, errlen,
		    "SANDBOX_BACKEND='%s' is not a backend; use %s, e.g. "
		    "SANDBOX_BACKEND=%s",
		    cfg->backend ? cfg->backend : "",
		    backend_names(0, " or ", names, sizeof(names)),
		    backend_available[0]->name);
	rc = backend_check_needs(cfg, chosen, err, errlen);
	for (size_t i = 0; rc == 0 && i < BACKEND_N; i++) {
		const struct backend_impl *bi = backend_available[i];

		if (bi->configure)
			rc = bi->configure(cfg, bi == chosen, err, errlen);
	}
	return rc;
}

int backend_create(const struct config *cfg, const char *boot,
                   struct backend **out, char *err, size_t errlen)
{
	int rc;

	*out = NULL;
	rc = backend_configure(cfg, err, errlen);
	if (rc < 0)
		return rc;
	return backend_find(cfg->backend)->create(cfg, boot, out, err, errlen);
}
