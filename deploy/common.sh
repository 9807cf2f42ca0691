# SPDX-License-Identifier: MIT
# Shared helpers for deploy/run.sh and tests/run.sh: install what is
# missing (idempotently), start a Docker engine when none answers, build the
# runner images. Sourced, not run. Expects ROOT to be the repository root.

# shellcheck shell=bash

msg() { printf '==> %s\n' "$*" >&2; }
warn() { printf 'WARNING: %s\n' "$*" >&2; }
die() {
	printf 'ERROR: %s\n' "$*" >&2
	exit 1
}

# Runs a command as root (directly when we are root, else through sudo).
as_root() {
	if [ "$(id -u)" -eq 0 ]; then
		"$@"
	elif command -v sudo >/dev/null 2>&1; then
		sudo "$@"
	else
		die "need root for: $* (run as root or install sudo)"
	fi
}

APT_UPDATED=0
# ensure_apt PKG...: installs the Debian packages that are not installed.
ensure_apt() {
	local missing=() p
	for p in "$@"; do
		if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
			missing+=("$p")
		fi
	done
	[ ${#missing[@]} -eq 0 ] && return 0
	command -v apt-get >/dev/null 2>&1 || die "apt-get not found; install by hand: ${missing[*]}"
	msg "installing ${missing[*]}"
	if [ "$APT_UPDATED" -eq 0 ]; then
		as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q >/dev/null ||
			die "apt-get update failed"
		APT_UPDATED=1
	fi
	as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
		"${missing[@]}" >/dev/null || die "apt-get install ${missing[*]} failed"
}

BUILD_PACKAGES=(meson ninja-build pkg-config gcc libc6-dev libmicrohttpd-dev libcjson-dev
	libcurl4-openssl-dev libssl-dev libsqlite3-dev libpq-dev e2fsprogs util-linux curl ca-certificates openssl)

ensure_build_deps() {
	ensure_apt "${BUILD_PACKAGES[@]}"
}

DOCKER_SOCK=${DOCKER_SOCK:-/var/run/docker.sock}

docker_answers() {
	curl -sf --max-time 5 --unix-socket "$DOCKER_SOCK" http://docker/_ping >/dev/null 2>&1
}

# ensure_docker: installs the engine if absent and starts it if no engine
# answers on $DOCKER_SOCK.
ensure_docker() {
	ensure_apt curl
	docker_answers && return 0
	if ! command -v dockerd >/dev/null 2>&1; then
		ensure_apt docker.io
	fi
	command -v docker >/dev/null 2>&1 || ensure_apt docker.io
	docker_answers && return 0
	if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
		as_root systemctl start docker 2>/dev/null || true
	fi
	if ! docker_answers; then
		msg "starting dockerd (log: /var/log/dockerd.log)"
		as_root sh -c "setsid nohup dockerd --host=unix://$DOCKER_SOCK >/var/log/dockerd.log 2>&1 &"
	fi
	for _ in $(seq 1 60); do
		docker_answers && return 0
		sleep 1
	done
	die "the Docker engine did not answer on $DOCKER_SOCK within 60 s; see /var/log/dockerd.log"
}

# ensure_node_modules DIR: npm ci when node_modules is absent or stale.
ensure_node_modules() {
	local dir=$1
	command -v npm >/dev/null 2>&1 || ensure_apt nodejs npm
	if [ ! -d "$dir/node_modules" ] || [ "$dir/package-lock.json" -nt "$dir/node_modules/.stamp" ]; then
		msg "installing npm packages in ${dir#"$ROOT"/}"
		(cd "$dir" && npm ci --no-audit --no-fund --loglevel=error >/dev/null) ||
			die "npm ci failed in $dir"
		touch "$dir/node_modules/.stamp"
	fi
}

# ensure_runner_images: builds the runner images (cached; quick when done).
ensure_runner_images() {
	"$ROOT/runners/build.sh" || die "building the runner images failed (runners/build.sh)"
}

# The runner images built in the background while the daemon serves
# (deploy/run.sh): runners/build.sh keeps RUNNER_PROGRESS up to date, one
# "<lang> <queued|building|done|failed|skipped>" a line, Python first.
RUNNER_BUILD_PID=${RUNNER_BUILD_PID:-$ROOT/var/runner-build.pid}
RUNNER_BUILD_LOG=${RUNNER_BUILD_LOG:-$ROOT/var/runner-build.log}
RUNNER_PROGRESS=${RUNNER_PROGRESS:-$ROOT/var/runner-build.progress}

# runner_build_running: whether the background build is still running.
runner_build_running() {
	local pid
	pid=$(cat "$RUNNER_BUILD_PID" 2>/dev/null) || return 1
	[ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && grep -q build.sh "/proc/$pid/cmdline" 2>/dev/null
}

# start_runner_build: starts runners/build.sh in the background, detached
# (it outlives this script and the daemon exec'd after it), unless one is
# running already.
start_runner_build() {
	RUNNER_IMAGES_BEFORE=$(runner_images_on_engine)
	if runner_build_running; then
		msg "the runner images are still being built in the background (pid $(cat "$RUNNER_BUILD_PID"); log: $RUNNER_BUILD_LOG)"
		return 0
	fi
	mkdir -p "$(dirname "$RUNNER_BUILD_LOG")"
	rm -f "$RUNNER_PROGRESS"
	# The subshell exits at once: build.sh is reparented to init, no zombie
	# is left to the daemon.
	(
		setsid nohup "$ROOT/runners/build.sh" --progress "$RUNNER_PROGRESS" \
			>"$RUNNER_BUILD_LOG" 2>&1 </dev/null &
		echo $! >"$RUNNER_BUILD_PID"
	)
	msg "building the runner images in the background, Python first (log: $RUNNER_BUILD_LOG)"
}

# runners_in STATE...: the languages of the background build in those
# states, comma-separated.
runners_in() {
	local states=" $* "
	[ -f "$RUNNER_PROGRESS" ] || return 0
	awk -v s="$states" 'index(s, " " $2 " ") { printf "%s%s", n++ ? ", " : "", $1 }' "$RUNNER_PROGRESS"
}

# runner_images_on_engine: how many tagged runner images the engine has.
runner_images_on_engine() {
	docker images --filter label=sandbox.runner=true --format '{{.Repository}}:{{.Tag}}' 2>/dev/null |
		grep -vc '<none>' || true
}

# wait_first_runner SECONDS: waits until the background build has finished
# one image (Python, the first), or until it ends; fails, showing the end of
# its log, when it ends with no runner image on the engine. Returns at once
# when the engine had runner images before the build started (a re-run: they
# serve while build.sh checks and replaces them).
wait_first_runner() {
	local limit=$1 t0 done_list
	t0=$(date +%s)
	if [ "${RUNNER_IMAGES_BEFORE:-0}" -gt 0 ]; then
		msg "serving with the $RUNNER_IMAGES_BEFORE runner images already built while build.sh checks them"
		return 0
	fi
	while :; do
		done_list=$(runners_in "done")
		[ -z "$done_list" ] || break
		if ! runner_build_running; then
			[ "$(runner_images_on_engine)" -gt 0 ] && break
			tail -n 30 "$RUNNER_BUILD_LOG" >&2 2>/dev/null || true
			die "building the runner images failed and there is none to serve with (log: $RUNNER_BUILD_LOG)"
		fi
		[ $(($(date +%s) - t0)) -lt "$limit" ] ||
			die "no runner image was ready within $limit s (log: $RUNNER_BUILD_LOG)"
		sleep 2
	done
	msg "runner images ready: ${done_list:-those already built} (after $(($(date +%s) - t0)) s)"
}

# runner_build_summary: one line for a person on the background build.
runner_build_summary() {
	local building failed
	if runner_build_running; then
		building=$(runners_in queued building)
		echo "building in the background (pid $(cat "$RUNNER_BUILD_PID"))," \
			"still building: ${building:-the base image}; each language is served once built (log: $RUNNER_BUILD_LOG)"
		return 0
	fi
	[ -f "$RUNNER_PROGRESS" ] || return 0
	failed=$(runners_in failed skipped)
	if [ -n "$failed" ]; then
		echo "the last build failed for: $failed (log: $RUNNER_BUILD_LOG; runners/build.sh --only LANGS retries)"
	else
		echo "all built ($(runners_in "done"))"
	fi
}

# meson_build DIR [OPTIONS...]: configures (once) and builds.
meson_build() {
	local dir=$1
	shift
	if [ ! -f "$dir/build.ninja" ]; then
		meson setup "$dir" "$ROOT" "$@" >/dev/null || die "meson setup $dir failed"
	fi
	ninja -C "$dir" >/dev/null || {
		ninja -C "$dir" 2>&1 | tail -30 >&2
		die "build in $dir failed"
	}
}

# free_port: prints a free TCP port on 127.0.0.1.
free_port() {
	python3 - <<'EOF' 2>/dev/null || echo $((20000 + RANDOM % 20000))
import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])
EOF
}

random_secret() {
	openssl rand -hex 32
}
