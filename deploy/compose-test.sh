#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# End-to-end test of the compose deployment on the local Docker engine.
# Validates docker-compose.yml and deploy/docker-compose.cloudflare.yml, then
# for each variant builds the stack with docker-compose under a temporary
# project name, with a temporary .env (fresh secrets, a free port, a
# temporary workspace directory), brings it up, waits for /healthz and the
# container's health check, calls it with the official MCP SDK
# (tests/integration/compose_client.mjs: run_code writing /data/hello.txt,
# then downloading it through its public URL; tools/list and ping only when
# run_code is not registered), tears it down with `down -v` and checks that
# nothing is left: no containers (the stack's or the sandboxes'), networks,
# volumes, mounts or temporary directory.
#
# Usage: deploy/compose-test.sh [--variants LIST] [--keep]
#   --variants root,nonroot  what to test (default: both)
#       root     the default configuration: root in the container, loop-mode
#                quotas, rshared workspace bind
#       nonroot  the documented non-root variant: uid 64321 with the
#                socket's group, WORKSPACE_QUOTA_MODE=none, rprivate
#   --keep       leave the stacks running (debugging);
#                the next run removes them
# Environment: BASE_IMAGE (registry base, default the local one),
#   COMPOSE_TEST_LOG_DIR (default build/test-logs).
# Needs root (the workspace bind mount, loop devices), a Docker engine,
# docker-compose, node. Ends with "compose: N passed, N failed"; exits
# non-zero when anything failed. Takes about a minute with warm caches.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export ROOT
# shellcheck source-path=SCRIPTDIR source=common.sh
. "$ROOT/deploy/common.sh"

VARIANTS=root,nonroot
KEEP=0
while [ $# -gt 0 ]; do
	case $1 in
	--variants)
		[ $# -ge 2 ] || die "--variants needs a list"
		VARIANTS=$2
		shift
		;;
	--keep) KEEP=1 ;;
	-h | --help)
		sed -n '3,27p' "$0" | sed 's/^# \{0,1\}//'
		exit 0
		;;
	*) die "unknown option $1 (see --help)" ;;
	esac
	shift
done

STATE_BASE=${TMPDIR:-/tmp}
STATE_PREFIX=mcpsd-compose-test.
PROJECT_PREFIX=mcpsdct
LOG_DIR=${COMPOSE_TEST_LOG_DIR:-$ROOT/build/test-logs}
NODE_DIR=$ROOT/tests/integration
SOCK=${DOCKER_SOCK:-/var/run/docker.sock}
SANDBOX_UID=64321
PASSED=0
FAILED=0
SKIPPED=0

pass() {
	PASSED=$((PASSED + 1))
	echo "PASS $*"
}
fail() {
	FAILED=$((FAILED + 1))
	echo "FAIL $*"
}
skip() {
	SKIPPED=$((SKIPPED + 1))
	echo "SKIP $*"
}

finish() {
	local extra=""
	[ "$SKIPPED" -gt 0 ] && extra=", $SKIPPED skipped"
	echo "compose: $PASSED passed, $FAILED failed$extra"
	[ "$FAILED" -eq 0 ]
	exit
}

# dc SECONDS DIR ARGS...: docker-compose for the project whose state is in
# DIR, limited in time. Only the temporary .env shapes the files: the
# caller's environment could otherwise override it (compose prefers the
# shell's variables to --env-file's).
dc() {
	local secs=$1 dir=$2
	shift 2
	(cd "$ROOT" && env -i PATH="$PATH" HOME="${HOME:-/root}" DOCKER_HOST="unix://$SOCK" \
		timeout "$secs" docker-compose -p "$(cat "$dir/project")" --env-file "$dir/.env" "$@")
}

# Unmounts everything at or below $1, deepest first.
umount_below() {
	local m
	while read -r m; do
		umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
	done < <(awk -v d="$1" '$2 == d || index($2, d "/") == 1 { print $2 }' /proc/self/mounts | sort -r)
}

mounts_below() {
	awk -v d="$1" '$2 == d || index($2, d "/") == 1' /proc/self/mounts | wc -l
}

# Removes everything of the project whose state directory is $1, whether
# or not docker-compose still can: containers (the stack's and the sandboxes
# its daemon started), networks, volumes, the test's image tags, mounts, the
# directory.
teardown() {
	local dir=$1 project label tag
	project=$(cat "$dir/project" 2>/dev/null) || project=""
	if [ -n "$project" ]; then
		label="com.docker.compose.project=$project"
		if [ -f "$dir/.env" ]; then
			dc 180 "$dir" down -v --remove-orphans -t 60 >/dev/null 2>&1 || true
		fi
		docker ps -aq --filter "label=$label" | xargs -r docker rm -f >/dev/null 2>&1
		docker ps -aq --filter "label=sandbox.owner=$project" | xargs -r docker rm -f >/dev/null 2>&1
		docker network ls -q --filter "label=$label" | xargs -r docker network rm >/dev/null 2>&1
		docker volume ls -q --filter "label=$label" | xargs -r docker volume rm >/dev/null 2>&1
		# --no-prune keeps the untagged parents: the next build reuses them.
		for tag in "mcp-sandboxd/daemon:$project" "mcp-sandboxd/runner-python:$project" \
			"mcp-sandboxd/runner-typescript:$project" "mcp-sandboxd/runner-bash:$project"; do
			docker image rm --no-prune "$tag" >/dev/null 2>&1 || true
		done
	fi
	umount_below "$dir"
	rm -rf "$dir"
}

# Tears down what earlier runs left (killed, or --keep), but not the state
# of a run that is still going. A run killed with SIGKILL can leave a
# docker-compose behind that finishes after its directory is gone, so
# projects and image tags of this script's naming without a live run are
# removed too.
sweep_stale() {
	local d pid p live=" "
	for d in "$STATE_BASE/$STATE_PREFIX"*; do
		[ -d "$d" ] || continue
		pid=$(cat "$d/owner.pid" 2>/dev/null) || pid=""
		# A run that has just made its directory has not written its pid.
		if [ -z "$pid" ] && [ -n "$(find "$d" -maxdepth 0 -newermt '-2 minutes' 2>/dev/null)" ]; then
			continue
		fi
		if [ -n "$pid" ] && [ "$pid" != "$$" ] && kill -0 "$pid" 2>/dev/null &&
			grep -q compose-test "/proc/$pid/cmdline" 2>/dev/null; then
			live+="$(cat "$d/project" 2>/dev/null) "
			continue
		fi
		msg "removing the leftovers of an earlier run: $d"
		teardown "$d"
	done
	for p in $( (docker ps -a --format '{{.Label "com.docker.compose.project"}}'
		docker network ls --format '{{.Label "com.docker.compose.project"}}'
		docker images --format '{{.Tag}}' 'mcp-sandboxd/*') 2>/dev/null | grep -E "^${PROJECT_PREFIX}[0-9a-f]{8}\$" | sort -u); do
		[[ $live == *" $p "* ]] && continue
		msg "removing the leftovers of an earlier run: project $p"
		d=$(mktemp -d "$STATE_BASE/$STATE_PREFIX$p.XXXXXX")
		echo "$p" >"$d/project"
		teardown "$d"
	done
}

# ----------------------------------------------------------------- static

check_static() {
	local env out
	env=$(mktemp)
	printf '%s\n' "MCP_API_TOKEN=0123456789abcdef0123456789abcdef" \
		"FILE_SECRET=0123456789abcdef0123456789abcdef" \
		"MCPSD_ENV_FILE=$env" "TUNNEL_TOKEN=dummy" \
		"PUBLIC_BASE_URL=https://sandbox.example.com" >"$env"
	if out=$(cd "$ROOT" && env -i PATH="$PATH" HOME="${HOME:-/root}" docker-compose --env-file "$env" \
		-f docker-compose.yml config 2>&1 >"$env.main"); then
		pass "docker-compose.yml: docker-compose config"
	else
		fail "docker-compose.yml: docker-compose config: $out"
	fi
	if out=$(cd "$ROOT" && env -i PATH="$PATH" HOME="${HOME:-/root}" docker-compose --env-file "$env" \
		-f deploy/docker-compose.cloudflare.yml config 2>&1 >"$env.cf"); then
		pass "deploy/docker-compose.cloudflare.yml: docker-compose config"
	else
		fail "deploy/docker-compose.cloudflare.yml: docker-compose config: $out"
	fi
	# The Cloudflare stack publishes nothing, has the tunnel, and its other
	# services match the main file but for the port and the public URL.
	if out=$(python3 - "$env.main" "$env.cf" <<'EOF' 2>&1
import sys, yaml
main = yaml.safe_load(open(sys.argv[1]))["services"]
cf = yaml.safe_load(open(sys.argv[2]))["services"]
errs = []
for name, svc in cf.items():
    if svc.get("ports"):
        errs.append(f"service {name} publishes {svc['ports']}")
if "cloudflared" not in cf:
    errs.append("no cloudflared service")
elif cf["cloudflared"].get("command") != ["tunnel", "--no-autoupdate", "run"]:
    errs.append("cloudflared does not run 'tunnel --no-autoupdate run'")
for name, svc in main.items():
    other = dict(cf.get(name) or {})
    mine = dict(svc)
    mine.pop("ports", None)
    # config inlines env_file into environment; the Cloudflare file adds
    # PUBLIC_BASE_URL there (it insists on one).
    for s in (mine, other):
        if "environment" in s:
            s["environment"] = {k: v for k, v in s["environment"].items() if k != "PUBLIC_BASE_URL"}
    if mine != other:
        keys = sorted(k for k in set(mine) | set(other) if mine.get(k) != other.get(k))
        errs.append(f"service {name} differs between the two files in: {', '.join(keys)}")
print("; ".join(errs))
sys.exit(1 if errs else 0)
EOF
	); then
		pass "cloudflare stack: no published port, same services as docker-compose.yml"
	else
		fail "cloudflare stack: $out"
	fi
	grep -v '^TUNNEL_TOKEN=' "$env" >"$env.nt"
	if out=$(cd "$ROOT" && env -i PATH="$PATH" HOME="${HOME:-/root}" docker-compose --env-file "$env.nt" \
		-f deploy/docker-compose.cloudflare.yml config -q 2>&1); then
		fail "cloudflare stack: config without TUNNEL_TOKEN should be refused"
	elif grep -q TUNNEL_TOKEN <<<"$out"; then
		pass "cloudflare stack: refuses to start without TUNNEL_TOKEN"
	else
		fail "cloudflare stack: unexpected error without TUNNEL_TOKEN: $out"
	fi
	rm -f "$env" "$env.main" "$env.cf" "$env.nt"
}

# ----------------------------------------------------------------- one stack

# Waits up to $2 seconds for $1 (a command) to succeed.
wait_for() {
	local cmd=$1 limit=$2 t0
	t0=$(date +%s)
	while ! eval "$cmd" >/dev/null 2>&1; do
		[ $(($(date +%s) - t0)) -ge "$limit" ] && return 1
		sleep 1
	done
}

run_variant() {
	local variant=$1 project dir data env port token log cid health mode
	local t0 out user gid
	project="$PROJECT_PREFIX$(openssl rand -hex 4)"
	dir="$STATE_BASE/$STATE_PREFIX$project"
	data="$dir/data"
	env="$dir/.env"
	log="$LOG_DIR/compose-$variant.log"
	mkdir -p "$LOG_DIR"
	: >"$log"
	echo "--- variant $variant (project $project, log ${log#"$ROOT"/})"
	(umask 077 && mkdir -p "$data") || {
		fail "$variant: cannot create $data"
		return
	}
	echo "$$" >"$dir/owner.pid"
	echo "$project" >"$dir/project"
	port=$(free_port)
	token=$(random_secret)

	case $variant in
	root)
		mode=loop
		user=0:0
		gid=0
		chmod 0711 "$data"
		# rshared needs the host directory on a shared mount (systemd
		# hosts: already; this machine kind: not).
		if [ "$(findmnt -no PROPAGATION --target "$data" 2>/dev/null)" != shared ]; then
			if ! mount --bind "$data" "$data" || ! mount --make-rshared "$data"; then
				fail "$variant: cannot make $data a shared mount"
				teardown "$dir"
				return
			fi
		fi
		;;
	nonroot)
		mode=none
		user=$SANDBOX_UID:$SANDBOX_UID
		gid=$(stat -c %g "$SOCK")
		chown "$SANDBOX_UID:$SANDBOX_UID" "$data"
		chmod 0700 "$data"
		;;
	*)
		fail "unknown variant $variant"
		teardown "$dir"
		return
		;;
	esac

	(
		umask 077
		cat >"$env" <<EOF
# deploy/compose-test.sh, variant $variant
MCP_API_TOKEN=$token
FILE_SECRET=$(random_secret)
PUBLIC_BASE_URL=http://127.0.0.1:$port
MCP_INSTANCE_NAME=$project
MCP_LOG_LEVEL=debug
WORKSPACE_QUOTA_MODE=$mode
MCPSD_ENV_FILE=$env
MCPSD_BIND=127.0.0.1
MCPSD_PORT=$port
MCPSD_DATA=$data
MCPSD_PROPAGATION=$([ "$variant" = root ] && echo rshared || echo rprivate)
MCPSD_USER=$user
MCPSD_SOCKET_GID=$gid
MCPSD_IMAGE=mcp-sandboxd/daemon:$project
MCPSD_STOP_GRACE=60s
RUNNER_IMAGE_TAG=$project
EOF
		if [ -n "${BASE_IMAGE:-}" ]; then echo "BASE_IMAGE=$BASE_IMAGE"; fi >>"$env"
	)

	t0=$(date +%s)
	if dc 1200 "$dir" build >>"$log" 2>&1; then
		pass "$variant: docker-compose build ($(($(date +%s) - t0)) s)"
	else
		fail "$variant: docker-compose build failed; last lines:"
		tail -n 25 "$log" | sed 's/^/    /'
		teardown "$dir"
		return
	fi

	if out=$(dc 300 "$dir" up -d 2>&1); then
		pass "$variant: docker-compose up -d"
	else
		echo "$out" >>"$log"
		fail "$variant: docker-compose up -d: $(tail -n 5 <<<"$out")"
		teardown "$dir"
		return
	fi

	if wait_for "curl -fsS --max-time 3 http://127.0.0.1:$port/healthz | grep -q '\"status\":\"ok\"'" 90; then
		pass "$variant: /healthz answers \"status\":\"ok\" on 127.0.0.1:$port"
	else
		fail "$variant: /healthz not ok within 90 s: $(curl -sS --max-time 3 "http://127.0.0.1:$port/healthz" 2>&1 | head -c 400)"
	fi
	health=$(curl -fsS --max-time 3 "http://127.0.0.1:$port/healthz" 2>/dev/null)
	if grep -q "\"quotaMode\":\"$mode\"" <<<"$health"; then
		pass "$variant: workspace quota mode is $mode"
	else
		fail "$variant: workspace quota mode is not $mode: $health"
	fi

	cid=$(dc 30 "$dir" ps -q mcp-sandboxd 2>/dev/null)
	if [ -n "$cid" ] && wait_for "[ \"\$(docker inspect -f '{{.State.Health.Status}}' $cid)\" = healthy ]" 60; then
		pass "$variant: the container's health check says healthy"
	else
		fail "$variant: the container is not healthy within 60 s: $(docker inspect -f '{{json .State.Health}}' "$cid" 2>&1 | head -c 400)"
	fi
	out=$(docker top "$cid" -o pid,uid,comm 2>&1 | awk '$3 == "mcp-sandboxd" { print $2 }')
	if [ "$out" = "${user%%:*}" ]; then
		pass "$variant: the daemon process runs as uid ${user%%:*}"
	else
		fail "$variant: the daemon process runs as uid '$out', not ${user%%:*}"
	fi
	out=$(docker inspect -f '{{json .NetworkSettings.Ports}}' "$cid" 2>&1)
	if [ "$out" = "{\"8080/tcp\":[{\"HostIp\":\"127.0.0.1\",\"HostPort\":\"$port\"}]}" ]; then
		pass "$variant: the port is published on 127.0.0.1:$port only"
	else
		fail "$variant: unexpected published ports: $out"
	fi

	out=$(cd "$NODE_DIR" && MCP_URL="http://127.0.0.1:$port/mcp" MCP_TOKEN=$token \
		FILES_BASE="http://127.0.0.1:$port" timeout 300 node compose_client.mjs 2>&1)
	echo "$out" >>"$log"
	while IFS= read -r line; do
		case $line in
		PASS\ *) pass "$variant: ${line#PASS }" ;;
		FAIL\ *) fail "$variant: ${line#FAIL }" ;;
		SKIP\ *) skip "$variant: ${line#SKIP }" ;;
		*) echo "$line" ;;
		esac
	done <<<"$out"
	if ! grep -qE '^(PASS|FAIL|SKIP) ' <<<"$out"; then
		fail "$variant: compose_client.mjs printed no result: $(tail -n 5 <<<"$out")"
	fi

	dc 60 "$dir" logs --no-color >>"$log" 2>&1
	if [ "$KEEP" -eq 1 ]; then
		echo "kept: project $project, http://127.0.0.1:$port/mcp, token in $env; the next run removes it"
		return
	fi

	# Down, then nothing may be left.
	if out=$(dc 180 "$dir" down -v --remove-orphans -t 60 2>&1); then
		pass "$variant: docker-compose down -v"
	else
		fail "$variant: docker-compose down -v: $(tail -n 5 <<<"$out")"
	fi
	local left=()
	[ -z "$(docker ps -aq --filter "label=com.docker.compose.project=$project")" ] || left+=("containers")
	[ -z "$(docker ps -aq --filter "label=sandbox.owner=$project")" ] || left+=("sandbox containers")
	[ -z "$(docker network ls -q --filter "label=com.docker.compose.project=$project")" ] || left+=("networks")
	[ -z "$(docker volume ls -q --filter "label=com.docker.compose.project=$project")" ] || left+=("volumes")
	# The daemon unmounts the workspace images when it stops; only the
	# bind made above may remain.
	if [ "$(mounts_below "$data/workspaces")" -ne 0 ]; then
		left+=("workspace mounts: $(awk -v d="$data/" 'index($2, d) == 1 { print $2 }' /proc/self/mounts | tr '\n' ' ')")
	fi
	teardown "$dir"
	[ ! -e "$dir" ] || left+=("$dir")
	[ "$(mounts_below "$dir")" -eq 0 ] || left+=("mounts under $dir")
	if [ ${#left[@]} -eq 0 ]; then
		pass "$variant: nothing left behind (containers, networks, volumes, mounts, $dir)"
	else
		fail "$variant: left behind: ${left[*]}"
	fi
}

# ----------------------------------------------------------------- main

# The trap may run while a command's output goes to a log: the original
# stdout and stderr are kept as 3 and 4 for it.
exec 3>&1 4>&2
# shellcheck disable=SC2317 # invoked by the trap below
on_signal() {
	exec 1>&3 2>&4
	echo "interrupted; cleaning up" >&2
	local d
	for d in "$STATE_BASE/$STATE_PREFIX"*; do
		[ "$(cat "$d/owner.pid" 2>/dev/null)" = "$$" ] && teardown "$d"
	done
	fail "interrupted"
	finish
}
trap on_signal INT TERM

if [ "$(id -u)" -ne 0 ]; then
	fail "prerequisites: run as root (the workspace bind mount and the loop devices need it)"
	finish
fi
if ! out=$(ensure_docker 2>&1); then
	fail "prerequisites: no Docker engine: $out"
	finish
fi
if ! command -v docker-compose >/dev/null 2>&1 && ! out=$(ensure_apt docker-compose 2>&1); then
	fail "prerequisites: cannot install docker-compose: $out"
	finish
fi
if ! out=$(ensure_node_modules "$NODE_DIR" 2>&1); then
	fail "prerequisites: npm packages in tests/integration: $out"
	finish
fi
# The TypeScript runner's build context and the offline bases (Debian 12 for
# the daemon's image, Debian 13 for the runners') come from runners/build.sh
# (see docs/deployment.md).
if [ ! -x "$ROOT/runners/typescript/bun" ] || [ ! -d "$ROOT/runners/typescript/node_modules" ] ||
	{ [ -z "${BASE_IMAGE:-}" ] && ! docker image inspect mcp-sandboxd/base:bookworm >/dev/null 2>&1; } ||
	{ [ -z "${RUNNER_BASE_IMAGE:-}" ] && ! docker image inspect mcp-sandboxd/base:trixie >/dev/null 2>&1; }; then
	msg "preparing the runner build inputs with runners/build.sh"
	if ! out=$("$ROOT/runners/build.sh" --daemon-base 2>&1); then
		fail "prerequisites: runners/build.sh: $(tail -n 10 <<<"$out")"
		finish
	fi
fi

sweep_stale
check_static
IFS=, read -r -a list <<<"$VARIANTS"
for v in "${list[@]}"; do
	run_variant "$v"
done
finish
