/* SPDX-License-Identifier: MIT */
/*
 * fuzz_rpc: the JSON-RPC envelope. Any byte string goes through the scanner
 * and, when it passes, cJSON and classification; ids that come back must be
 * valid JSON and round-trip into a response.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mcp/rpc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct rpc_batch b;
	int code;
	const char *msg;

	if (rpc_parse((const char *)data, size, 64, &b, &code, &msg) < 0) {
		if (code != RPC_PARSE_ERROR && code != RPC_INVALID_REQUEST)
			abort();
		return 0;
	}
	for (size_t i = 0; i < b.n; i++) {
		struct rpc_msg *m = &b.msgs[i];
		char *out;
		cJSON *back;

		if (!m->id_raw)
			continue;
		out = rpc_result(m->id_raw, NULL);
		back = out ? cJSON_Parse(out) : NULL;
		/* Whatever id we accepted must make a well-formed reply. */
		if (out && !back)
			abort();
		cJSON_Delete(back);
		free(out);
		if (m->kind != RPC_KIND_INVALID && !m->id_key)
			abort();
	}
	rpc_batch_finish(&b);
	return 0;
}
