/* SPDX-License-Identifier: MIT */
/*
 * agentblob: the in-container agent (cmd/mcpsd-agent, a static binary) and
 * its Python kernel, embedded in the daemon at build time
 * (cmd/mcpsd-agent/embed.py), so a daemon always installs the agent that
 * speaks its own protocol version. Read-only data.
 */
#ifndef MCPSD_AGENTBLOB_H
#define MCPSD_AGENTBLOB_H

#include <stddef.h>

extern const unsigned char agentblob_agent[];
extern const size_t agentblob_agent_len;
extern const unsigned char agentblob_kernel[];
extern const size_t agentblob_kernel_len;

#endif
