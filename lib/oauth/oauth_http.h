/* SPDX-License-Identifier: MIT */
/*
 * oauth_http: the OAuth endpoints as routes of the HTTP front, and the hook
 * that lets the front accept OAuth access tokens on the MCP routes. The
 * only file that knows both oauth.h and http.h: it turns requests into
 * struct oauth_req and struct oauth_resp into replies. Thread-safe as the
 * modules it joins.
 */
#ifndef MCPSD_OAUTH_HTTP_H
#define MCPSD_OAUTH_HTTP_H

#include <stddef.h>

#include "http/http.h"
#include "oauth/oauth.h"

/*
 * Adds the metadata, registration, authorization, token and revocation
 * routes and installs the access-token hook. Between http_server_bind and
 * http_server_start; o must outlive hs. 0, or a negative errno with a
 * message in err.
 */
__attribute__((warn_unused_result)) int
oauth_http_register(struct oauth *o, struct http_server *hs, char *err,
                    size_t errlen);

#endif
