#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# One command from a fresh Debian/Ubuntu machine to a serving mcp-sandboxd:
# installs what is missing, starts a Docker engine if none answers, builds
# the runner images and the daemon, writes .env with fresh secrets if there
# is none (an existing one is never touched), and serves on 127.0.0.1:8080,
# printing the MCP URL, the token and client configurations.
#
# The runner images build in the background (runners/build.sh, Python
# first): it serves as soon as the first is ready (or at once when images of
# an earlier build are there), says which languages are still building, and
# the daemon picks each up as it is finished (its discovery). --status says
# how the build goes; --wait-images waits for all of them before serving.
#
# Re-running it is safe: when the instance it started is still running the
# same build with the same settings, it is left alone (warm sessions kept)
# and its status printed. It restarts the daemon only when the build or the
# settings changed, or with --restart, and then says so: a restart ends
# every warm session (Python state); files in /data are kept.
#
# Usage: deploy/run.sh [--detach | --stop | --status] [--restart]
#                      [--no-images | --wait-images]
#   (default)     serve in the foreground; Ctrl-C stops
#   --detach      serve in the background (log: var/mcp-sandboxd.log)
#   --restart     restart the running instance even when nothing changed
#   --stop        stop the running instance
#   --status      whether an instance is running: its pid, URL and health,
#                 and how the runner images' build goes
#   --no-images   skip building the runner images
#   --wait-images build every runner image before serving
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export ROOT
# shellcheck source=deploy/common.sh
. "$ROOT/deploy/common.sh"

MODE=foreground
IMAGES=1
RESTART=0
while [ $# -gt 0 ]; do
	case $1 in
	--detach) MODE=detach ;;
	--restart) RESTART=1 ;;
	--stop) MODE=stop ;;
	--status) MODE=status ;;
	--no-images) IMAGES=0 ;;
	--wait-images) IMAGES=2 ;;
	-h | --help)
		sed -n '3,30p' "$0" | sed 's/^# \{0,1\}//'
		exit 0
		;;
	*) die "unknown option $1 (see --help)" ;;
	esac
	shift
done

VAR="$ROOT/var"
PIDFILE="$VAR/mcp-sandboxd.pid"
LOG="$VAR/mcp-sandboxd.log"
BUILD="$ROOT/build/release"
BIN="$BUILD/cmd/mcp-sandboxd"
ENV_FILE="$ROOT/.env"
# What the running instance was started from (written at each start).
STATE="$VAR/mcp-sandboxd.started"

running_pid() {
	local pid
	[ -f "$PIDFILE" ] || return 1
	pid=$(cat "$PIDFILE")
	if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && grep -q mcp-sandboxd "/proc/$pid/cmdline" 2>/dev/null; then
		echo "$pid"
		return 0
	fi
	return 1
}

stop_running() {
	local pid
	pid=$(running_pid) || return 0
	msg "stopping the running instance (pid $pid)"
	kill -TERM "$pid"
	# Calls under way may take SANDBOX_MAX_TIMEOUT_SECONDS (300 by default).
	for _ in $(seq 1 700); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.5
	done
	kill -0 "$pid" 2>/dev/null && die "pid $pid did not stop within 350 s; see $LOG"
	rm -f "$PIDFILE" "$STATE"
}

# state_get KEY: a value recorded in $STATE at the last start.
state_get() {
	[ -f "$STATE" ] || return 0
	sed -n "s/^$1=//p" "$STATE" | tail -n 1
}

# json_num JSON KEY / json_str JSON KEY / json_obj JSON KEY: the first
# number, string or flat object of that key in /healthz's compact JSON.
json_num() { printf '%s' "$1" | grep -o "\"$2\":[0-9.]*" | head -n 1 | cut -d: -f2; }
json_str() { printf '%s' "$1" | grep -o "\"$2\":\"[^\"]*\"" | head -n 1 | cut -d'"' -f4; }
json_obj() { printf '%s' "$1" | grep -o "\"$2\":{[^{}]*}" | head -n 1; }

# print_status PID: the pid, URL and what /healthz says, for a person.
print_status() {
	local pid=$1 url base h docker warm runs since build
	url=$(state_get url)
	if [ -z "$url" ] && [ -x "$BIN" ] && [ -f "$ENV_FILE" ]; then
		url="$("$BIN" --env-file "$ENV_FILE" --check-config 2>/dev/null | sed -n 's/^PUBLIC_BASE_URL=//p')/mcp"
	fi
	base=${url%/mcp}
	since=$(ps -o lstart= -p "$pid" 2>/dev/null | sed 's/^ *//')
	echo "mcp-sandboxd is running (pid $pid${since:+, since $since})"
	echo "  URL:     ${url:-unknown (no record of the start; see .env)}"
	h=$(curl -sf --max-time 5 "$base/healthz" 2>/dev/null || true)
	if [ -z "$h" ]; then
		echo "  health:  no answer from $base/healthz (still starting, or stuck: see the log)"
	else
		docker=$(json_obj "$h" docker)
		warm=$(json_obj "$h" warm)
		runs=$(json_obj "$h" runs)
		echo "  health:  $(printf '%s' "$h" | grep -o '"status":"[a-z]*"' | tail -n 1 | cut -d'"' -f4)" \
			"(version $(json_str "$h" version), up $(json_num "$h" uptime_s) s)"
		if printf '%s' "$docker" | grep -q '"reachable":true'; then
			echo "  engine:  reachable (Docker $(json_str "$docker" server_version))"
		else
			echo "  engine:  NOT reachable: runs fail until the Docker engine answers"
		fi
		echo "  runners: $(json_num "$runs" runners) images; runs: $(json_num "$runs" running) running," \
			"$(json_num "$runs" queued) queued, $(json_num "$runs" total) so far"
		build=$(runner_build_summary)
		[ -z "$build" ] || echo "  images:  $build"
		if [ -n "$warm" ]; then
			echo "  warm:    $(json_num "$warm" sessions) sessions ($(json_num "$warm" busy) busy)," \
				"$(json_num "$warm" pool) pre-started boxes ready"
		else
			echo "  warm:    off (every run starts a fresh sandbox)"
		fi
	fi
	echo "  log:     $LOG"
}

case $MODE in
stop)
	stop_running
	exit 0
	;;
status)
	if pid=$(running_pid); then
		print_status "$pid"
	else
		echo "mcp-sandboxd is not running (start it with deploy/run.sh --detach)"
		exit 1
	fi
	exit 0
	;;
esac

msg "checking dependencies"
ensure_build_deps
ensure_docker
case $IMAGES in
1) start_runner_build ;;
2)
	msg "building the runner images (cached after the first time)"
	ensure_runner_images
	;;
esac
msg "building the daemon"
meson_build "$BUILD" --buildtype=release
# A fresh machine: Python's image is the first done (~2 min with the base,
# docs/runners.md).
[ "$IMAGES" -ne 1 ] || wait_first_runner 1800

mkdir -p "$VAR"
if [ ! -f "$ENV_FILE" ]; then
	msg "writing $ENV_FILE with fresh secrets"
	umask 077
	cat >"$ENV_FILE" <<EOF
# Written by deploy/run.sh on $(date -u +%Y-%m-%dT%H:%M:%SZ). See .env.example
# for every setting. Keep this file private: it holds the bearer token.
MCP_HTTP_ADDR=127.0.0.1:8080
PUBLIC_BASE_URL=http://127.0.0.1:8080
MCP_API_TOKEN=$(random_secret)
FILE_SECRET=$(random_secret)
SANDBOX_ROOT=$VAR/sandbox
EOF
	umask 022
fi

# The settings the daemon will use (environment first, then .env).
"$BIN" --env-file "$ENV_FILE" --check-config >/dev/null ||
	die "the configuration in $ENV_FILE is not valid (see above)"
setting() {
	local v
	v=$(printenv "$1" || true)
	[ -n "$v" ] || v=$(grep -E "^(export )?$1=" "$ENV_FILE" | tail -n 1 | cut -d= -f2- | sed -e 's/^"\(.*\)"$/\1/' -e "s/^'\(.*\)'$/\1/")
	printf '%s' "$v"
}
# The installers trust what this host trusts (a TLS-inspecting proxy's root
# too) unless SANDBOX_PACKAGES_CA_FILE is set, in the environment or .env.
HOST_CA=/etc/ssl/certs/ca-certificates.crt
if [ -z "$(setting SANDBOX_PACKAGES_CA_FILE)" ] && [ -r "$HOST_CA" ] &&
	! grep -qE '^(export )?SANDBOX_PACKAGES_CA_FILE=' "$ENV_FILE"; then
	export SANDBOX_PACKAGES_CA_FILE=$HOST_CA
	msg "the package installers trust this host's CA bundle $HOST_CA (SANDBOX_PACKAGES_CA_FILE)"
fi
CONFIG=$("$BIN" --env-file "$ENV_FILE" --check-config)
BASE=$(printf '%s\n' "$CONFIG" | sed -n 's/^PUBLIC_BASE_URL=//p')
TOKEN=$(setting MCP_API_TOKEN)
URL="$BASE/mcp"

# What an instance started now would run: the binary, .env, and the
# effective settings (the environment's too; secrets appear there only as
# fingerprints, and only their hash is kept). An unset FILE_SECRET is random
# at each start, so its line is left out.
sha() { sha256sum | cut -d' ' -f1; }
BIN_SHA=$(sha <"$BIN")
ENV_SHA=$(sha <"$ENV_FILE")
SETTINGS_SHA=$(printf '%s\n' "$CONFIG" | grep -v '^FILE_SECRET=<ephemeral' | sha)
# A stopping daemon lets calls under way finish (the daemon's drain on SIGTERM).
DRAIN_S=$(($(printf '%s\n' "$CONFIG" | sed -n 's/^SANDBOX_MAX_TIMEOUT_SECONDS=//p') + 15))

# Leaves a running instance alone when it runs what would be started now;
# otherwise says why it restarts and what that costs, and stops it.
if pid=$(running_pid); then
	why=()
	if [ ! -f "$STATE" ]; then
		why+=("there is no record of what it runs (started by hand or by an older deploy/run.sh)")
	else
		[ "$(state_get bin)" = "$BIN_SHA" ] || why+=("the daemon was rebuilt")
		[ "$(state_get env)" = "$ENV_SHA" ] || why+=("$ENV_FILE changed")
		[ "$(state_get settings)" = "$SETTINGS_SHA" ] || why+=("the effective settings changed")
	fi
	[ "$RESTART" -eq 0 ] || why+=("--restart was given")
	if [ ${#why[@]} -eq 0 ]; then
		msg "already running this build with these settings: nothing restarted, warm sessions kept (--restart forces a restart)"
		print_status "$pid"
		exit 0
	fi
	reasons=$(printf '%s; ' "${why[@]}")
	msg "restarting the running instance (pid $pid): ${reasons%; }"
	msg "a restart ends every warm session: Python's variables, imports and data come back from each conversation's last save (its next run says restored; with SANDBOX_STATE=false they are lost); files in /data are kept; calls under way get up to $DRAIN_S s to finish, and clients reconnect by themselves"
	stop_running
fi

# record_start PID: what the instance PID was started from.
record_start() {
	(
		umask 077
		printf 'pid=%s\nbin=%s\nenv=%s\nsettings=%s\nurl=%s\n' "$1" "$BIN_SHA" "$ENV_SHA" "$SETTINGS_SHA" "$URL" >"$STATE"
	)
}

print_clients() {
	cat <<EOF

mcp-sandboxd is serving.
  MCP endpoint (Streamable HTTP): $URL
  Legacy HTTP+SSE endpoint:       $BASE/sse
  Bearer token:                   $TOKEN
  Health:                         $BASE/healthz

Claude Code (it reads no .env: the token is in the command; -s user: in
every directory, without it only in the current one):
  claude mcp add --transport http -s user sandbox $URL \\
    --header "Authorization: Bearer $TOKEN"
  claude mcp list

Claude Desktop (claude_desktop_config.json), through mcp-remote:
  {
    "mcpServers": {
      "sandbox": {
        "command": "npx",
        "args": ["-y", "mcp-remote", "$URL", "--header", "Authorization:\${AUTH}"],
        "env": { "AUTH": "Bearer $TOKEN" }
      }
    }
  }

n8n ("MCP Client Tool" for an AI Agent, or "MCP Client" as a workflow step):
  Endpoint $URL, Server Transport "HTTP Streamable",
  Authentication "Bearer Auth" with the token above.

MCP Inspector (needs Node.js 22.19 or newer):
  npx @modelcontextprotocol/inspector --cli $URL --transport http \\
    --header "Authorization: Bearer $TOKEN" --method tools/list

When a client does not connect, README.md ("Connecting a client") lists what
each one prints for a wrong token, no token, a wrong URL or a stopped server.

EOF
}

# print_building: which languages are still being built, if any.
print_building() {
	local building
	runner_build_running || return 0
	building=$(runners_in queued building)
	echo "Runner images still building: ${building:-the base image}. The daemon serves each language as"
	echo "its image is finished (tools/list changes); deploy/run.sh --status shows the progress."
	echo
}

cd "$ROOT"
if [ "$MODE" = detach ]; then
	setsid nohup "$BIN" --env-file "$ENV_FILE" >>"$LOG" 2>&1 </dev/null &
	echo $! >"$PIDFILE"
	record_start $!
	for _ in $(seq 1 100); do
		curl -sf "$BASE/healthz" >/dev/null 2>&1 && break
		kill -0 "$(cat "$PIDFILE")" 2>/dev/null || { tail -20 "$LOG" >&2; die "the daemon exited; see $LOG"; }
		sleep 0.1
	done
	print_clients
	print_building
	echo "Running in the background (pid $(cat "$PIDFILE")); log: $LOG; stop with deploy/run.sh --stop"
else
	print_clients
	print_building
	echo "Serving in the foreground; Ctrl-C stops."
	# exec keeps this pid: --status and a re-run find this instance too.
	echo $$ >"$PIDFILE"
	record_start $$
	exec "$BIN" --env-file "$ENV_FILE"
fi
