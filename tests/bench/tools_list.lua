-- SPDX-License-Identifier: MIT
-- wrk script: POSTs tools/list to /mcp, one MCP session per wrk thread.
-- Environment: BENCH_TOKEN, BENCH_SESSIONS (comma-separated session ids,
-- one per wrk thread, so no session carries more than its share of
-- connections: MCP_MAX_INFLIGHT_PER_SESSION), BENCH_PROTOCOL (optional).
-- Every request has its own JSON-RPC id (a session refuses an id that is
-- already in flight). Counts answers that are not a tools/list result
-- ("bad") so a fast error answer cannot pass for throughput.
local token = os.getenv("BENCH_TOKEN") or ""
local sessions = {}
for s in string.gmatch(os.getenv("BENCH_SESSIONS") or "", "[^,]+") do
	table.insert(sessions, s)
end
local proto = os.getenv("BENCH_PROTOCOL") or "2025-06-18"

wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Accept"] = "application/json, text/event-stream"
wrk.headers["Authorization"] = "Bearer " .. token
wrk.headers["MCP-Protocol-Version"] = proto

local threads = {}

function setup(thread)
	table.insert(threads, thread)
	thread:set("sid", sessions[(#threads - 1) % #sessions + 1])
end

function init(args)
	bad = 0
	good = 0
	wrk.headers["Mcp-Session-Id"] = sid
	next_id = 0
end

function request()
	next_id = next_id + 1
	return wrk.format(nil, nil, nil,
		'{"jsonrpc":"2.0","id":' .. next_id .. ',"method":"tools/list","params":{}}')
end

function response(status, headers, body)
	if status == 200 and body and string.find(body, '"run_code"', 1, true) then
		good = good + 1
	else
		bad = bad + 1
	end
end

function done(summary, latency, requests)
	local g, b = 0, 0
	for _, t in ipairs(threads) do
		g = g + t:get("good")
		b = b + t:get("bad")
	end
	io.write(string.format("lua: good %d bad %d\n", g, b))
end
