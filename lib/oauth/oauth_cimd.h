/* SPDX-License-Identifier: MIT */
/*
 * oauth_cimd: Client ID Metadata Documents. A client may use as its
 * client_id an https URL at which it publishes its metadata; the daemon
 * fetches that document with libcurl when the operator turned the feature
 * on (OAUTH_CIMD), only from the hosts OAUTH_CIMD_HOSTS allows, over https
 * without redirects, within a few seconds and a size limit. With '*' any
 * host is allowed but never one that resolves to a private, loopback or
 * link-local address, so a client id cannot make the daemon probe its own
 * network. Stateless and thread-safe (curl_global_init is the caller's, at
 * start-up).
 */
#ifndef MCPSD_OAUTH_CIMD_H
#define MCPSD_OAUTH_CIMD_H

#include <stdbool.h>
#include <stddef.h>

#include "config/config.h"

#define OAUTH_CIMD_MAX_BYTES 16384
#define OAUTH_CIMD_TIMEOUT_MS 5000

/* Whether a client_id has the form of a metadata document URL. */
bool oauth_cimd_is_url(const char *client_id);

/*
 * Fetches the document at url. On success *body (caller frees) and *len
 * hold it. On failure returns -EPERM (host not allowed), -EHOSTUNREACH
 * (cannot connect, DNS, TLS), -EPROTO (status, size or type wrong) or
 * -ENOMEM, with err saying what happened in words an operator can act on.
 */
__attribute__((warn_unused_result)) int
oauth_cimd_fetch(const struct config *cfg, const char *url, char **body,
                 size_t *len, char *err, size_t errlen);

#endif
