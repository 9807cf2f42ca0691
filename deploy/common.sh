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
