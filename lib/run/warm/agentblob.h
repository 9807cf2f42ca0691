/* SPDX-License-Identifier: MIT */
/*
 * agentblob: the in-container agent (cmd/mcpsd-agent, a static binary) and
 * its kernels (kernel.py, kernel.ts: each language's long-lived interpreter,
 * named by an image's sandbox.kernel label or, for Python, by default),
 * embedded in the daemon at build time (cmd/mcpsd-agent/embed.py), so a
 * daemon always installs the agent that speaks its own protocol version.
 * Read-only data.
 */
#ifndef MCPSD_AGENTBLOB_H
#define MCPSD_AGENTBLOB_H

#include <stddef.h>

/* A kernel file, installed beside the agent under name. */
struct agentblob_file {
	const char *name;
	const unsigned char *data;
	size_t len;
};

extern const unsigned char agentblob_agent[];
extern const size_t agentblob_agent_len;
extern const struct agentblob_file agentblob_kernels[];
extern const size_t agentblob_n_kernels;

#endif
