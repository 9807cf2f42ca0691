#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Benchmarks of mcp-sandboxd against the real daemon, the real Docker engine
# and the official MCP SDK client, on loopback. Prints figures, never fails
# on timing. Builds what it needs (build/bench, release), starts its own
# daemons with fresh secrets in a temporary SANDBOX_ROOT, and cleans up.
#
# Usage: tests/bench/run.sh [--quick] [--only SECTION[,SECTION...]]
#                           [--runs N] [--markdown FILE] [--keep]
# Sections: latency     one-off run_code p50/p95 (Python, TypeScript, Bash)
#                       through /mcp next to `docker run --rm`, interleaved
#           warm        warm sessions (tests/bench/warm_bench.mjs): warm
#                       print(1), df.describe() after import pandas, a pool
#                       hit, TypeScript and Bash, 16 x 20 calls at once,
#                       idle box memory; next to `docker run --rm`
#           engine      a cold run's create/start/wait/remove on the Engine
#                       API, hardened create body vs bare ones
#           throughput  one-off Python hello world at 1, 4 and 16 calls
#           http        tools/list requests per second with wrk (1 and 64
#                       connections)
#           rss         daemon VmRSS idle, with 200 SSE streams, over
#                       10,000 calls and 200 run_code calls
#           kernel      issue 22's yardstick: warm print(1) through MCP (the
#                       SDK client and a raw keep-alive HTTP client) and
#                       df.describe() on 50,000 x 8 next to a bare Jupyter
#                       kernel with the same limits (tests/bench/jupyter),
#                       interleaved, quiet and while 2 loops of docker run
#                       --rm start and remove containers beside them; MCP
#                       ping vs kernel_info (tests/bench/kernel_bench.mjs)
#           cold        a one-off run (memory_mb 512: no warm session, a
#                       pool box with its limits changed; 128: a container
#                       of its own) vs docker run --rm of the same image,
#                       code and limits
#           first       the first call of a new conversation in every
#                       language vs docker run --rm of its hello world
#           poolmem     host memory of the daemon's idle pool boxes
#           tools       tools/list size: names + descriptions + input
#                       schemas (what reaches a model), output schemas apart
#           rawwarm     warm print(1), and a call printing 300 lines, through
#                       a raw keep-alive HTTP client
#                       (tests/bench/warm_raw.c): 1 client (the daemon's
#                       time and CPU per call) and 16 clients (calls/s),
#                       this build next to BENCH_BASE_BIN (a baseline
#                       build, e.g. of main) when set, interleaved; quiet,
#                       then with 2 loops of docker run --rm beside it
#           swarm       (only when named) a Bash run through the swarm
#                       backend on the lab of tests/swarm/lab.sh, next to
#                       a local one-off run and docker run --rm on the host
#                       and on a lab worker, interleaved
#                       (tests/bench/swarm_bench.mjs); as root, brings the
#                       lab up and down itself and refuses while another
#                       run holds the lab's lock
# --quick     fewer runs (about 5 minutes instead of about 12)
# --runs N    latency runs per language, warm runs per measure, swarm
#             runs per path (default 30, quick 8) and kernel and cold
#             rounds (default 25, quick 8)
# --rss-calls N, --rss-runs N   cheap calls and run_code calls of the rss
#             section (default 10000 and 200; quick 2000 and 20)
# --markdown  also write the tables as Markdown to FILE
# --keep      keep the scratch directory (logs, results.jsonl)
# --no-setup  install and build nothing but the bench's own release build:
#             no apt, no npm ci, no runners/build.sh (the runner images and
#             node_modules must be there already; a shared engine's images
#             are never rebuilt then)
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
export ROOT
# shellcheck source=../../deploy/common.sh
. "$ROOT/deploy/common.sh"

ARGS="$*"
ALL="latency,warm,engine,throughput,http,rss,kernel,cold,first,poolmem,tools,rawwarm"
ONLY=$ALL
QUICK=0
RUNS=""
RUNS_SET=""
RSS_CALLS_OPT=""
RSS_RUNS_OPT=""
MARKDOWN=""
KEEP=0
SETUP=1
while [ $# -gt 0 ]; do
	case $1 in
	--quick) QUICK=1; shift ;;
	--only) ONLY=$2; shift 2 ;;
	--runs) RUNS=$2; RUNS_SET=$2; shift 2 ;;
	--rss-calls) RSS_CALLS_OPT=$2; shift 2 ;;
	--rss-runs) RSS_RUNS_OPT=$2; shift 2 ;;
	--markdown) MARKDOWN=$2; shift 2 ;;
	--keep) KEEP=1; shift ;;
	--no-setup) SETUP=0; shift ;;
	-h | --help)
		sed -n '3,61p' "$0" | sed 's/^# \{0,1\}//'
		exit 0
		;;
	*) die "unknown option $1 (see --help)" ;;
	esac
done
want() { [[ ",$ONLY," == *",$1,"* ]]; }
# Sections run only when named: swarm needs root and the lab.
OPTIONAL="swarm"
for s in ${ONLY//,/ }; do
	[[ ",$ALL,$OPTIONAL," == *",$s,"* ]] || die "unknown section $s (sections: $ALL,$OPTIONAL)"
done

# The swarm lab is exclusive (tests/run.sh's swarm layer takes the same
# lock): refuse now, before building, rather than tear down another run's.
SWARM_LAB=/var/tmp/mcpsd-swarm-lab
SWARM_LOCK=/var/tmp/mcpsd-swarm-lab.lock
SWARM_IMAGE=mcp-sandboxd/runner-bash:latest
LAB_FD=
LAB_UP=0
if want swarm; then
	[ "$(id -u)" -eq 0 ] || die "the swarm section needs root (the lab's network namespaces and dockerds)"
	for c in ip nsenter dockerd flock; do
		command -v "$c" >/dev/null 2>&1 || die "the swarm section needs $c"
	done
	exec {LAB_FD}>"$SWARM_LOCK"
	flock -n "$LAB_FD" ||
		die "the swarm lab is in use by another run (its lock $SWARM_LOCK is held, e.g. by tests/run.sh --only swarm); run the swarm section when that ends"
fi

if [ "$QUICK" -eq 1 ]; then
	RUNS=${RUNS:-8}
	WARMUP=1
	TP_CALLS=6,12,32
	WRK_SECONDS=4
	RSS_CALLS=2000
	RSS_RUNS=20
	ENGINE_ROUNDS=4
	POOL_RUNS=4
	WARM_CONC_CALLS=5
	KERNEL_RUNS=8
	FIRST_RUNS=1
	RAW_ROUNDS=1
	RAW_CALLS=200
else
	RUNS=${RUNS:-30}
	WARMUP=2
	TP_CALLS=24,32,48
	WRK_SECONDS=10
	RSS_CALLS=10000
	RSS_RUNS=200
	ENGINE_ROUNDS=10
	POOL_RUNS=12
	WARM_CONC_CALLS=20
	KERNEL_RUNS=25
	FIRST_RUNS=3
	RAW_ROUNDS=3
	RAW_CALLS=1000
fi
KERNEL_RUNS=${RUNS_SET:-$KERNEL_RUNS}
RSS_CALLS=${RSS_CALLS_OPT:-$RSS_CALLS}
RSS_RUNS=${RSS_RUNS_OPT:-$RSS_RUNS}
RSS_SSE=200

T0=$(date +%s)
BUILD="$ROOT/build/bench"
NODE_DIR="$ROOT/tests/integration"
BENCH_JS="$ROOT/tests/bench/mcp_bench.mjs"
WARM_JS="$ROOT/tests/bench/warm_bench.mjs"
KERNEL_JS="$ROOT/tests/bench/kernel_bench.mjs"
JUPYTER_IMAGE=mcp-sandboxd/bench-jupyter:latest

if [ "$SETUP" -eq 1 ]; then
	msg "installing what is missing"
	ensure_build_deps
	ensure_docker
	ensure_node_modules "$NODE_DIR"
	want http && ensure_apt wrk
	ensure_runner_images
	if want kernel; then
		# The baseline: Debian's jupyter_client on the host (Debian's
		# python3, not another one on PATH), its kernel in an image FROM the
		# Python runner (tests/bench/jupyter/Dockerfile).
		ensure_apt python3-jupyter-client
		msg "building the Jupyter kernel baseline image $JUPYTER_IMAGE"
		docker build -q -t "$JUPYTER_IMAGE" "$ROOT/tests/bench/jupyter" >/dev/null ||
			die "building $JUPYTER_IMAGE failed (docker build tests/bench/jupyter)"
		# FROM the runner inherits sandbox.runner=true; the Dockerfile
		# overrides it, or every daemon on this engine would list a second
		# Python.
		[ "$(docker image inspect -f '{{index .Config.Labels "sandbox.runner"}}' "$JUPYTER_IMAGE")" = false ] ||
			die "$JUPYTER_IMAGE is labelled sandbox.runner=true: daemons would take it for a runner"
		! docker images -q --filter label=sandbox.runner=true --no-trunc | grep -qx "$(docker image inspect -f '{{.Id}}' "$JUPYTER_IMAGE")" ||
			die "$JUPYTER_IMAGE is among the images the daemon discovers (label sandbox.runner=true)"
	fi
else
	msg "--no-setup: using the runner images and node_modules as they are"
	docker_answers || die "--no-setup: the Docker engine does not answer on $DOCKER_SOCK"
	[ -d "$NODE_DIR/node_modules" ] || die "--no-setup: $NODE_DIR/node_modules is missing (run without --no-setup once)"
	docker image inspect mcp-sandboxd/runner-python:latest >/dev/null 2>&1 ||
		die "--no-setup: the runner images are not on the engine (run runners/build.sh, or the bench without --no-setup)"
	! want kernel || docker image inspect "$JUPYTER_IMAGE" >/dev/null 2>&1 ||
		die "--no-setup: the kernel section needs $JUPYTER_IMAGE (run the bench once without --no-setup)"
fi
msg "building (release) in ${BUILD#"$ROOT"/}"
# As deploy/run.sh builds, but a warning -O3 alone raises must not stop a
# benchmark (tests/run.sh's layers keep -Werror).
meson_build "$BUILD" --buildtype=release -Dwerror=false
BIN="$BUILD/cmd/mcp-sandboxd"
CREATE_BODY="$BUILD/tests/bench/create_body"
[ -x "$CREATE_BODY" ] || die "$CREATE_BODY was not built"

WORK=$(mktemp -d /tmp/mcpsd-bench-XXXXXX)
chmod 755 "$WORK"
RESULTS="$WORK/results.jsonl"
: >"$RESULTS"
BENCH_TAG="run$$-$(date +%s)"
export BENCH_RESULTS="$RESULTS" BENCH_WORK="$WORK" BENCH_CREATE_BODY="$CREATE_BODY" BENCH_TAG
export DOCKER_SOCK
PIDS=()
INSTANCES=()

stop_pid() {
	local pid=$1
	kill -0 "$pid" 2>/dev/null || return 0
	kill -TERM "$pid" 2>/dev/null
	for _ in $(seq 1 600); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 "$pid" 2>/dev/null; then
		warn "daemon $pid did not stop within 60 s; killing it"
		kill -KILL "$pid" 2>/dev/null
	fi
	wait "$pid" 2>/dev/null
}

cleanup() {
	local pid inst ids m left
	declare -F busy_engine_stop >/dev/null && busy_engine_stop
	for pid in "${PIDS[@]}"; do stop_pid "$pid"; done
	PIDS=()
	# Anything of ours still on the engine (there should be nothing).
	ids=$(docker ps -aq --filter "label=mcpsd.bench=$BENCH_TAG" 2>/dev/null)
	for inst in "${INSTANCES[@]}"; do
		ids="$ids $(docker ps -aq --filter "label=sandbox.owner=$inst" 2>/dev/null)"
	done
	ids=$(echo "$ids" | xargs)
	if [ -n "$ids" ]; then
		warn "removing leftover containers: $ids"
		# shellcheck disable=SC2086
		docker rm -f $ids >/dev/null 2>&1
	fi
	# Workspaces the daemons mounted (loop images), deepest first.
	while read -r m; do
		[ -n "$m" ] && umount -l "$m" 2>/dev/null
	done < <(awk -v w="$WORK" 'index($2, w) == 1 {print $2}' /proc/mounts | sort -r)
	if [ "$KEEP" -eq 1 ]; then
		msg "kept $WORK (logs, results.jsonl)"
	else
		rm -rf "$WORK"
	fi
	left=$(docker ps -aq --filter "label=mcpsd.bench=$BENCH_TAG" | wc -l)
	for inst in "${INSTANCES[@]}"; do
		left=$((left + $(docker ps -aq --filter "label=sandbox.owner=$inst" | wc -l)))
	done
	msg "containers of this bench left on the engine: $left ($(echo "$ids" | wc -w) removed at cleanup); sandbox.managed=true containers of any daemon: $(docker ps -aq --filter label=sandbox.managed=true | wc -l)"
	if [ "$LAB_UP" -eq 1 ]; then
		msg "left on the swarm lab before its removal: $(lab docker n1 service ls -q | wc -l) services, $(lab docker n1 ps -aq 2>/dev/null | wc -l)+$(lab docker n2 ps -aq | wc -l)+$(lab docker n3 ps -aq | wc -l) containers (n1+n2+n3)"
		lab down
		LAB_UP=0
	fi
	[ -n "$LAB_FD" ] && exec {LAB_FD}>&-
}
lab() { MCPSD_LAB_DIR=$SWARM_LAB MCPSD_BIN=$BIN "$ROOT/tests/swarm/lab.sh" "$@"; }
trap cleanup EXIT
trap 'exit 130' INT TERM

# start_daemon NAME LOG_LEVEL [SETTING=VALUE...]: a daemon on a free
# loopback port with fresh secrets and its own SANDBOX_ROOT; sets BENCH_URL,
# BENCH_TOKEN, BENCH_PID, BENCH_LOG, BENCH_INSTANCE, BENCH_ENV_FILE
# (exported for mcp_bench.mjs).
start_daemon() {
	local name=$1 level=$2 port envf
	shift 2
	port=$(free_port)
	envf="$WORK/$name.env"
	BENCH_TOKEN=$(random_secret)
	BENCH_INSTANCE="bench-$name-$$"
	BENCH_LOG="$WORK/$name.log"
	mkdir -p "$WORK/$name-root"
	cat >"$envf" <<EOF
MCP_HTTP_ADDR=127.0.0.1:$port
MCP_API_TOKEN=$BENCH_TOKEN
FILE_SECRET=$(random_secret)
SANDBOX_ROOT=$WORK/$name-root
MCP_INSTANCE_NAME=$BENCH_INSTANCE
MCP_LOG_LEVEL=$level
EOF
	printf '%s\n' "$@" >>"$envf"
	# BENCH_SETTINGS: more SETTING=VALUE words for every daemon (a
	# side-by-side run, e.g. SANDBOX_WARM_CHANNEL=attach for the baseline).
	[ -z "${BENCH_SETTINGS:-}" ] || printf '%s\n' $BENCH_SETTINGS >>"$envf"
	env -i PATH="$PATH" HOME="${HOME:-/root}" "$BIN" --env-file "$envf" >"$BENCH_LOG" 2>&1 &
	BENCH_PID=$!
	PIDS+=("$BENCH_PID")
	INSTANCES+=("$BENCH_INSTANCE")
	BENCH_URL="http://127.0.0.1:$port/mcp"
	BENCH_ENV_FILE=$envf
	export BENCH_URL BENCH_TOKEN BENCH_PID BENCH_LOG BENCH_INSTANCE BENCH_ENV_FILE
	for _ in $(seq 1 200); do
		curl -sf "http://127.0.0.1:$port/healthz" >/dev/null 2>&1 && return 0
		kill -0 "$BENCH_PID" 2>/dev/null || break
		sleep 0.1
	done
	tail -20 "$BENCH_LOG" >&2
	die "daemon $name did not become healthy (log above)"
}

stop_daemon() {
	stop_pid "$BENCH_PID"
	local keep=() p
	for p in "${PIDS[@]}"; do [ "$p" != "$BENCH_PID" ] && keep+=("$p"); done
	PIDS=("${keep[@]}")
}

bench() { (cd "$ROOT" && node "$BENCH_JS" "$@"); }
kernel_bench() { (cd "$ROOT" && JUPYTER_PYTHON=/usr/bin/python3 node "$KERNEL_JS" "$@"); }
warm_bench() { (cd "$ROOT" && node "$WARM_JS" "$@"); }
swarm_bench() { (cd "$ROOT" && node "$ROOT/tests/bench/swarm_bench.mjs" "$@"); }

# check_daemon NAME LEVEL [SETTING=VALUE...]: after a section, a daemon that
# died is a finding,
# not a reason to stop: say so with its log's tail and start a fresh one.
check_daemon() {
	local st keep
	kill -0 "$BENCH_PID" 2>/dev/null && return 0
	wait "$BENCH_PID" 2>/dev/null
	st=$?
	FAILED=1
	mkdir -p "$ROOT/build/bench-logs"
	keep="$ROOT/build/bench-logs/daemon-$1-died-$(date +%Y%m%dT%H%M%S).log"
	cp "$BENCH_LOG" "$keep"
	DIED+=("daemon $1 (pid $BENCH_PID) exited with status $st$([ "$st" -gt 128 ] && echo " (signal $((st - 128)))") during the bench; its log: ${keep#"$ROOT"/}")
	warn "${DIED[-1]}; last lines:"
	tail -5 "$BENCH_LOG" >&2
	start_daemon "${1}2" "${@:2}"
}

# busy_engine_start N: N loops of docker run --rm of the Bash runner, as
# kernel_bench's busy engine; busy_engine_stop ends them.
BUSY_PIDS=()
busy_engine_start() {
	local i
	for i in $(seq 1 "$1"); do
		(while :; do
			docker run --rm --network none --label "mcpsd.bench=$BENCH_TAG" \
				mcp-sandboxd/runner-bash:latest true >/dev/null 2>&1
		done) &
		BUSY_PIDS+=($!)
	done
}
busy_engine_stop() {
	local p
	for p in "${BUSY_PIDS[@]}"; do kill "$p" 2>/dev/null; done
	for p in "${BUSY_PIDS[@]}"; do wait "$p" 2>/dev/null; done
	BUSY_PIDS=()
}

# rawwarm_round BUILD ENGINE PREFIX: one round of warm_raw against the
# daemon named by BENCH_URL/BENCH_PID: print(1) from 1 client, then 16, then
# 1 client whose code prints 300 short lines (the kernel's output path:
# writes, frames, the agent's relay); a JSON line each to the results.
RAW_PRINTS='for i in range(300): print(i, i * i, 7)'
rawwarm_round() {
	local build=$1 engine=$2 prefix=$3 spec c n code line
	for spec in 1 16 1p; do
		c=${spec%p} n=$RAW_CALLS code='print(1)'
		[ "$c" -eq 16 ] && n=$((RAW_CALLS / 4))
		[ "$spec" = 1p ] && n=$((RAW_CALLS / 5)) code=$RAW_PRINTS
		line=$(MCPSD_TOKEN=$BENCH_TOKEN "$RAW" -u "$BENCH_URL" -c "$c" -n "$n" -w 2 \
			-e "$code" -p "$prefix-$spec" --pid "$BENCH_PID") || warn "warm_raw ($build, $c clients) reported failures"
		[ -n "$line" ] || return 1
		echo "$build $engine: $line"
		node -e '
			const [l, build, engine, load, code] = process.argv.slice(1);
			const r = JSON.parse(l);
			Object.assign(r, { section: "rawwarm", build, engine, load: Number(load), code });
			// The Musts are for print(1); the loop is a figure beside the baseline.
			if (code === "print(1)")
				Object.assign(r, r.clients === 1
					? { must: "call - duration <= 0.5 ms", goal: "<= 0.2 ms" }
					: { must: ">= 1,000 calls/s", goal: ">= 2,000 calls/s" });
			console.log(JSON.stringify(r));
		' "$line" "$build" "$engine" "$(cut -d' ' -f1 /proc/loadavg)" "$code" >>"$RESULTS"
	done
}

# The raw warm section: daemon R of this build and, with BENCH_BASE_BIN,
# daemon R0 of the baseline, both with one tenant's waiting cap raised for
# 16 clients; rounds alternate between them, quiet then busy.
rawwarm_section() {
	local r engine url=() pid=() tok=() builds=(this) i
	RAW="$BUILD/tests/bench/warm_raw"
	[ -x "$RAW" ] || { warn "$RAW was not built"; return 1; }
	# One tenant makes every conversation: its waiting cap and its rate of
	# new workspaces (16 a round) are raised, so the measure is capacity.
	local set=(TENANT_MAX_QUEUED=64 SANDBOX_QUEUE_LENGTH=128 WORKSPACE_CREATE_BURST=100000)
	msg "daemon R (this build, default settings but the waiting caps)"
	start_daemon R info "${set[@]}"
	url+=("$BENCH_URL"); pid+=("$BENCH_PID"); tok+=("$BENCH_TOKEN")
	if [ -n "${BENCH_BASE_BIN:-}" ]; then
		msg "daemon R0 (the baseline build $BENCH_BASE_BIN)"
		local keep=$BIN
		BIN=$BENCH_BASE_BIN
		start_daemon R0 info "${set[@]}"
		BIN=$keep
		url+=("$BENCH_URL"); pid+=("$BENCH_PID"); tok+=("$BENCH_TOKEN")
		builds+=(baseline)
	fi
	for engine in quiet busy; do
		[ "$engine" = busy ] && busy_engine_start 2
		for r in $(seq 1 "$RAW_ROUNDS"); do
			for i in "${!builds[@]}"; do
				BENCH_URL=${url[$i]} BENCH_PID=${pid[$i]} BENCH_TOKEN=${tok[$i]} \
					rawwarm_round "${builds[$i]}" "$engine" "$engine$r" || { busy_engine_stop; return 1; }
			done
		done
		[ "$engine" = busy ] && busy_engine_stop
	done
	for i in "${!pid[@]}"; do
		kill -0 "${pid[$i]}" 2>/dev/null || { warn "daemon ${builds[$i]} died during rawwarm"; return 1; }
		stop_pid "${pid[$i]}"
	done
	PIDS=()
}

# mcp_post SID BODY [CURL ARGS...]: one JSON-RPC POST to the daemon.
mcp_post() {
	local sid=$1 body=$2
	shift 2
	curl -s --max-time 10 -X POST "$BENCH_URL" \
		-H "Authorization: Bearer $BENCH_TOKEN" \
		-H 'Content-Type: application/json' \
		-H 'Accept: application/json, text/event-stream' \
		${sid:+-H "Mcp-Session-Id: $sid"} \
		${PROTO:+-H "MCP-Protocol-Version: $PROTO"} \
		-d "$body" "$@"
}

# new_session: initializes an MCP session with curl; prints its id.
new_session() {
	local hdr sid
	hdr=$(mcp_post "" '{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench-wrk","version":"1"}}}' -D - -o "$WORK/init.out")
	sid=$(echo "$hdr" | tr -d '\r' | awk 'tolower($1) == "mcp-session-id:" {print $2}')
	[ -n "$sid" ] || die "initialize gave no session id: $hdr $(cat "$WORK/init.out")"
	PROTO=$(grep -o '"protocolVersion":"[^"]*"' "$WORK/init.out" | head -1 | cut -d'"' -f4)
	mcp_post "$sid" '{"jsonrpc":"2.0","method":"notifications/initialized"}' -o /dev/null
	echo "$sid"
}

run_wrk() {
	local conns=$1 threads=$2 sids=() out
	PROTO=""
	while [ ${#sids[@]} -lt "$threads" ]; do sids+=("$(new_session)"); done
	# The version the daemon chose (new_session ran in a subshell).
	PROTO=$(grep -o '"protocolVersion":"[^"]*"' "$WORK/init.out" | head -1 | cut -d'"' -f4)
	mcp_post "${sids[0]}" '{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}' |
		grep -q '"run_code"' || die "tools/list through curl did not list run_code"
	out="$WORK/wrk-$conns.txt"
	BENCH_SESSIONS=$(
		IFS=,
		echo "${sids[*]}"
	) BENCH_PROTOCOL=$PROTO \
		timeout $((WRK_SECONDS + 30)) wrk -t"$threads" -c"$conns" -d"${WRK_SECONDS}s" --timeout 5s \
		--latency -s "$ROOT/tests/bench/tools_list.lua" "$BENCH_URL" >"$out" 2>&1
	bench wrk-parse --file "$out" --connections "$conns" --threads "$threads"
}

describe_machine() {
	local cg
	if [ -f /sys/fs/cgroup/cgroup.controllers ]; then cg=v2; else cg=v1; fi
	echo "machine: $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)), $(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo), kernel $(uname -r), $(. /etc/os-release && echo "$PRETTY_NAME")"
	echo "docker: engine $(docker version --format '{{.Server.Version}}' 2>/dev/null), API $(docker version --format '{{.Server.APIVersion}}' 2>/dev/null), storage $(docker info --format '{{.Driver}}' 2>/dev/null), cgroup $cg, runtime $(docker info --format '{{.DefaultRuntime}}' 2>/dev/null)"
	echo "node $(node --version), wrk $(wrk -v 2>&1 | awk 'NR==1 {print $2}'), daemon $("$BIN" --version 2>&1 | head -1) (release build)"
	echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg); other containers running: $(docker ps -q | wc -l)"
	want swarm && echo "swarm lab: tests/swarm/lab.sh, 3 engines $(dockerd --version | awk '{print $3}' | tr -d ,) in network namespaces on this machine (n1 drained manager, n2 and n3 sandbox workers), image $SWARM_IMAGE"
	echo "command: tests/bench/run.sh $ARGS"
}

DESC="$WORK/machine.txt"
describe_machine | tee "$DESC"

FAILED=0
DIED=()
# The one-off path (a fresh box per run) is measured with warm sessions off;
# the warm section has daemons of its own.
ONEOFF=SANDBOX_WARM=false
if want latency || want engine || want throughput; then
	msg "daemon A (debug log, for its phase timings; one-off runs)"
	start_daemon A debug "$ONEOFF"
	if want latency; then
		msg "latency: $RUNS runs per language, interleaved with docker run --rm"
		bench latency --runs "$RUNS" --warmup "$WARMUP" || FAILED=1
		check_daemon A debug "$ONEOFF"
	fi
	if want engine; then
		msg "engine: create/start/wait/remove, hardened vs bare"
		bench engine --rounds "$ENGINE_ROUNDS" || FAILED=1
	fi
	if want throughput; then
		msg "throughput at 1, 4, 16 concurrent calls"
		bench throughput --levels 1,4,16 --calls "$TP_CALLS" || FAILED=1
		check_daemon A debug "$ONEOFF"
	fi
	stop_daemon
fi
if want warm; then
	# One tenant makes all 16 conversations: its own cap on waiting runs
	# (TENANT_MAX_QUEUED, 8, a fairness limit between tenants) is raised
	# to the queue's length, so the measure is the daemon's capacity.
	msg "daemon W (warm sessions, the pool on; TENANT_MAX_QUEUED=32)"
	start_daemon W info SANDBOX_WARM=true TENANT_MAX_QUEUED=32
	msg "warm: $RUNS runs per measure, $POOL_RUNS pool hits, 16 x $WARM_CONC_CALLS calls at once"
	warm_bench warm --runs "$RUNS" --warmup "$WARMUP" --pool-runs "$POOL_RUNS" --conc 16 --calls "$WARM_CONC_CALLS" || FAILED=1
	check_daemon W info SANDBOX_WARM=true TENANT_MAX_QUEUED=32
	stop_daemon
	msg "daemon M (warm sessions, no pool: boxes with nothing preloaded)"
	start_daemon M info SANDBOX_WARM=true SANDBOX_POOL_SIZE=0
	warm_bench warm-memory || FAILED=1
	check_daemon M info SANDBOX_WARM=true SANDBOX_POOL_SIZE=0
	stop_daemon
fi
if want kernel || want cold || want poolmem || want tools; then
	# The defaults a user gets: warm sessions and the pool on.
	msg "daemon K (the default settings: warm sessions, the pool on)"
	start_daemon K info
	if want tools; then
		msg "tools: the size of tools/list"
		kernel_bench tools || FAILED=1
	fi
	if want poolmem; then
		msg "poolmem: the idle pool boxes"
		kernel_bench poolmem || FAILED=1
	fi
	if want kernel; then
		msg "kernel: $KERNEL_RUNS interleaved rounds, quiet then busy, next to a Jupyter kernel"
		kernel_bench kernel --runs "$KERNEL_RUNS" --warmup "$WARMUP" --load 2 || FAILED=1
		check_daemon K info
	fi
	if want cold; then
		msg "cold: $KERNEL_RUNS one-off runs next to docker run --rm"
		kernel_bench cold --runs "$KERNEL_RUNS" --warmup "$WARMUP" || FAILED=1
		check_daemon K info
	fi
	stop_daemon
fi
if want first; then
	# A fresh daemon: every first call opens a warm session that stays
	# (idle for SANDBOX_WARM_IDLE_SECONDS), and a full set of warm boxes
	# (SANDBOX_WARM_MAX, 32) leaves no room for the pool to refill: with
	# every language pooled, 3 first calls in each of ten languages would
	# fill it, so the sessions the measure opens end after 20 s idle
	# (the only setting changed; the bench waits for each language's box).
	msg "daemon F (the default settings but SANDBOX_WARM_IDLE_SECONDS=20, no session yet)"
	start_daemon F info SANDBOX_WARM_IDLE_SECONDS=20
	msg "first: the first call in every language, $FIRST_RUNS each"
	kernel_bench first --runs "$FIRST_RUNS" || FAILED=1
	check_daemon F info SANDBOX_WARM_IDLE_SECONDS=20
	stop_daemon
fi
if want rawwarm; then
	rawwarm_section || FAILED=1
fi
if want rss || want http; then
	msg "daemon B (info log; one-off runs)"
	start_daemon B info "$ONEOFF"
	if want rss; then
		msg "rss: idle, $RSS_SSE SSE streams, $RSS_CALLS calls, $RSS_RUNS run_code calls"
		bench rss --sse "$RSS_SSE" --calls "$RSS_CALLS" --runs "$RSS_RUNS" || FAILED=1
		check_daemon B info "$ONEOFF"
	fi
	if want http; then
		msg "tools/list with wrk, ${WRK_SECONDS}s per level"
		run_wrk 1 1 || FAILED=1
		run_wrk 64 2 || FAILED=1
		bench rss-point --label "after wrk" || FAILED=1
		check_daemon B info "$ONEOFF"
	fi
	stop_daemon
fi

if want swarm; then
	msg "the swarm lab (tests/swarm/lab.sh up)"
	MCPSD_LAB_DIR=$SWARM_LAB MCPSD_BIN=$BIN timeout 300 "$ROOT/tests/swarm/lab.sh" up \
		--images "$SWARM_IMAGE" </dev/null || die "the swarm lab did not come up"
	LAB_UP=1
	msg "daemon S (the swarm backend, the lab's manager)"
	start_daemon S info SANDBOX_BACKEND=swarm "DOCKER_HOST=unix://$SWARM_LAB/n1/docker.sock" SANDBOX_WARM=false
	S_PID=$BENCH_PID
	# Its node check runs a global service at start-up: let it end first.
	for _ in $(seq 1 120); do
		curl -sf "${BENCH_URL%/mcp}/healthz" | grep -q '"checked":true' && break
		sleep 0.5
	done
	export BENCH_SWARM_URL=$BENCH_URL BENCH_SWARM_TOKEN=$BENCH_TOKEN BENCH_SWARM_PID=$S_PID
	msg "daemon L (the local engine, one-off runs)"
	start_daemon L info "$ONEOFF"
	msg "swarm: $RUNS runs per path, interleaved"
	BENCH_LAB_WORKER_SOCK=$SWARM_LAB/n2/docker.sock swarm_bench swarm --runs "$RUNS" --warmup "$WARMUP" || FAILED=1
	for p in "$S_PID" "$BENCH_PID"; do
		kill -0 "$p" 2>/dev/null || { FAILED=1; warn "daemon $p died during the swarm section"; }
		stop_pid "$p"
	done
	PIDS=()
fi

echo
cat "$DESC"
bench table ${MARKDOWN:+--markdown "$MARKDOWN"}
echo
echo "bench took $(($(date +%s) - T0)) s"
for d in "${DIED[@]}"; do warn "$d"; done
[ "$FAILED" -eq 0 ] || warn "a section did not finish (see above)"
exit "$FAILED"
