/* SPDX-License-Identifier: MIT */
/*
 * schema: the daemon's durable schema. Every module that keeps tables in the
 * store (oauth, tasks, the CPU budget, ...) defines its own migrations; this
 * list puts them in the order they shipped, so the store itself names no
 * module and the modules do not know of one another. Stateless.
 */
#ifndef MCPSD_SCHEMA_H
#define MCPSD_SCHEMA_H

#include <stddef.h>

#include "store/store.h"

/*
 * Opens the store at where (see store_open_with) and brings its schema up to
 * date with the daemon's migrations. Caller owns *out; free with store_close.
 */
__attribute__((warn_unused_result)) int
schema_open(const char *where, struct store **out, char *err, size_t errlen);

/* The newest schema version this build knows. */
unsigned schema_version(void);

#endif
