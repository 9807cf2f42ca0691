/* SPDX-License-Identifier: MIT */
/*
 * warm_exec: one call in a warm box (docs/agent-protocol.md): the code and
 * stdin written to the box's /sandbox, the exec frame, the output as it
 * comes, the escalation on a deadline, cancel or output cap (interrupt,
 * then kill the kernel, then the box), and the result read from the
 * agent's frames into a runner_result.
 *
 * Threads: a box is used by one thread at a time.
 */
#ifndef MCPSD_WARM_EXEC_H
#define MCPSD_WARM_EXEC_H

#include "run/catalog.h"
#include "run/request.h"
#include "run/warm/warm_agent.h"

/*
 * Runs req in b and fills res (status, exit code, output, value, memory,
 * res->session.lost when this call ended the state). Marks b dead when the
 * box must not be used again. Returns 0, or -EAGAIN when b turned out dead
 * before the code reached it (nothing ran: a fresh box may be tried).
 */
__attribute__((warn_unused_result)) int
warm_exec_run(const struct warm_context *env, struct warm_box *b,
              const struct runner_request *req, const struct catalog_image *img,
              struct runner_result *res);

#endif
