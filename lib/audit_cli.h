/* SPDX-License-Identifier: MIT */
/*
 * audit_cli: `mcp-sandboxd audit verify` and `mcp-sandboxd audit export`,
 * run by the operator on the host (or in the daemon's container) against
 * the store the configuration names, beside or without a running daemon:
 *   audit verify            walks the chain; prints one JSON line (ok,
 *                           entries, head_seq, head_hash, and for a broken
 *                           chain broken_seq and reason); exit 0 intact,
 *                           1 broken, 2 the store could not be read
 *   audit export [--tenant T] [--conversation C]
 *                           every matching entry as a JSON line on
 *                           standard output (audit.h, audit_export)
 * Single-threaded; owns the store it opens.
 */
#ifndef MCPSD_AUDIT_CLI_H
#define MCPSD_AUDIT_CLI_H

#include <stdio.h>

#include "config/config.h"

/*
 * Runs the command in argv[0..argc) (argv[0] is "verify" or "export")
 * against cfg's store; messages for a person go to err. Returns the exit
 * status.
 */
int audit_cli(const struct config *cfg, int argc, char **argv, FILE *out,
              FILE *err);

#endif
