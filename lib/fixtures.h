/* SPDX-License-Identifier: MIT */
/*
 * fixtures: the tools, resources, prompts and completions that the official
 * MCP conformance suite calls by fixed names. Compiled only with
 * -Dfixtures=true; never part of a default build.
 */
#ifndef MCPSD_FIXTURES_H
#define MCPSD_FIXTURES_H

#include "mcp.h"

/* Registers every fixture with the server. */
void fixtures_register(struct mcp_server *srv);

/*
 * The 2026-07-28 and tasks-extension fixtures (fixtures_modern.c);
 * fixtures_register() calls it.
 */
void fixtures_register_modern(struct mcp_server *srv);

#endif
