/* SPDX-License-Identifier: MIT */
/*
 * agentblob: the in-container agent (cmd/mcpsd-agent, a static binary) and
 * its kernels (kernel.py, kernel.R, ...: the list is mcpsd_kernels in
 * cmd/mcpsd-agent/meson.build), embedded in the daemon at build time
 * (cmd/mcpsd-agent/embed.py), so a daemon always installs the agent that
 * speaks its own protocol version. The daemon writes every file into one
 * directory named by a hash of them all, mounted read-only at
 * AGENTBLOB_MOUNT; a runner image names its kernel with the label
 * sandbox.kernel (catalog.h). Read-only data: a leaf header, included by the
 * catalog to check those labels and by warm_agent.c to install the files.
 */
#ifndef MCPSD_AGENTBLOB_H
#define MCPSD_AGENTBLOB_H

#include <stddef.h>
#include <string.h>

/* Where the files are mounted in a session container. */
#define AGENTBLOB_MOUNT "/opt/mcp-sandboxd"
/* The agent binary's name there. */
#define AGENTBLOB_AGENT_NAME "mcpsd-agent"

struct agentblob_file {
	const char *name; /* "kernel.py": a plain name, kernel.<ext> */
	const unsigned char *data;
	size_t len;
};

extern const unsigned char agentblob_agent[];
extern const size_t agentblob_agent_len;
extern const struct agentblob_file agentblob_kernels[];
extern const size_t agentblob_n_kernels;

/* The embedded kernel file called name, or NULL. */
static inline const struct agentblob_file *agentblob_kernel(const char *name)
{
	for (size_t i = 0; i < agentblob_n_kernels; i++)
		if (strcmp(agentblob_kernels[i].name, name) == 0)
			return &agentblob_kernels[i];
	return NULL;
}

#endif
