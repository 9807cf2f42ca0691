/* SPDX-License-Identifier: MIT */
/*
 * audit_http: the operator's endpoints over the usage counters and the
 * audit trail, each behind OPERATOR_TOKEN (http_operator_ok: without the
 * token, loopback clients only):
 *   GET /admin/usage         usage of every tenant (or ?tenant=), per
 *                            tenant or ?by=conversation, ?from= ?to=
 *                            ?bucket=hour|day|none, as JSON or, with
 *                            ?format=csv (or Accept: text/csv), CSV
 *   GET /admin/audit         the trail as JSON lines (?tenant=
 *                            ?conversation= ?from= ?to= ?after=<seq>
 *                            ?limit=, default 10000); Audit-Last-Seq is
 *                            the last seq sent, to continue with ?after=
 *   GET /admin/audit/verify  walks the chain: 200 and {"ok": true, ...}
 *                            when intact, 409 and the first broken entry
 *                            when not
 * Handlers run on connection threads; the store is thread-safe.
 */
#ifndef MCPSD_AUDIT_HTTP_H
#define MCPSD_AUDIT_HTTP_H

#include <stddef.h>

#include "http/http.h"
#include "store/store.h"

/*
 * Adds the routes to hs (before http_server_start; once per process). cfg
 * and st are borrowed and must outlive the server. 0 or -errno with a
 * message in err.
 */
__attribute__((warn_unused_result)) int
audit_http_register(struct http_server *hs, const struct config *cfg,
                    struct store *st, char *err, size_t errlen);

#endif
