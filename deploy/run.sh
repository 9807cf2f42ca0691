#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# One command from a fresh Debian/Ubuntu machine to a serving mcp-sandboxd:
# installs what is missing, starts a Docker engine if none answers, builds
# the runner images and the daemon, writes .env with fresh secrets if there
# is none (an existing one is never touched), and serves on 127.0.0.1:8080,
# printing the MCP URL, the token and client configurations.
#
# Usage: deploy/run.sh [--detach | --stop | --status] [--no-images]
#   (default)   serve in the foreground; Ctrl-C stops
#   --detach    serve in the background (log: var/mcp-sandboxd.log)
#   --stop      stop a background instance started with --detach
#   --status    say whether a background instance is running
#   --no-images skip building the runner images
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export ROOT
# shellcheck source=deploy/common.sh
. "$ROOT/deploy/common.sh"

MODE=foreground
IMAGES=1
while [ $# -gt 0 ]; do
	case $1 in
	--detach) MODE=detach ;;
	--stop) MODE=stop ;;
	--status) MODE=status ;;
	--no-images) IMAGES=0 ;;
	-h | --help)
		sed -n '3,16p' "$0" | sed 's/^# \{0,1\}//'
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
	for _ in $(seq 1 600); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.5
	done
	rm -f "$PIDFILE"
}

case $MODE in
stop)
	stop_running
	exit 0
	;;
status)
	if pid=$(running_pid); then
		echo "running (pid $pid), log: $LOG"
	else
		echo "not running"
		exit 1
	fi
	exit 0
	;;
esac

msg "checking dependencies"
ensure_build_deps
ensure_docker
if [ "$IMAGES" -eq 1 ]; then
	msg "building the runner images (cached after the first time)"
	ensure_runner_images
fi
msg "building the daemon"
meson_build "$BUILD" --buildtype=release

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
BASE=$("$BIN" --env-file "$ENV_FILE" --check-config | sed -n 's/^PUBLIC_BASE_URL=//p')
TOKEN=$(setting MCP_API_TOKEN)
URL="$BASE/mcp"

stop_running

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

cd "$ROOT"
if [ "$MODE" = detach ]; then
	setsid nohup "$BIN" --env-file "$ENV_FILE" >>"$LOG" 2>&1 </dev/null &
	echo $! >"$PIDFILE"
	for _ in $(seq 1 100); do
		curl -sf "$BASE/healthz" >/dev/null 2>&1 && break
		kill -0 "$(cat "$PIDFILE")" 2>/dev/null || { tail -20 "$LOG" >&2; die "the daemon exited; see $LOG"; }
		sleep 0.1
	done
	print_clients
	echo "Running in the background (pid $(cat "$PIDFILE")); log: $LOG; stop with deploy/run.sh --stop"
else
	print_clients
	echo "Serving in the foreground; Ctrl-C stops."
	exec "$BIN" --env-file "$ENV_FILE"
fi
