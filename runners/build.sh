#!/usr/bin/env bash
# Build the mcp-sandboxd runner images: mcp-sandboxd/runner-<lang>:latest for
# every runners/<lang>/Dockerfile (bash, c, cpp, go, php, python, r, ruby,
# rust, typescript), in that order: c before cpp and rust, whose first layer (GCC)
# is the same and is then taken from the build cache.
#
# Offline by default: the base image mcp-sandboxd/base:trixie (Debian 13) is made
# locally with debootstrap + docker import (no container registry needed). Those
# who can pull use a registry base instead: --base debian:trixie-slim. The
# daemon's own image (the repository's Dockerfile, docker-compose) stays on
# Debian 12: --daemon-base also makes mcp-sandboxd/base:bookworm for it.
#
# After each build the image is run (no network, read-only root, uid 64321) to
# detect the interpreter and library versions, which become the labels
# sandbox.version, sandbox.libraries and sandbox.description, and to run a smoke
# test through the sandbox.command label (and, when the image has one, through
# sandbox.check: the smoke program passes, a syntax error fails). See
# docs/runners.md.
set -Eeuo pipefail
umask 022

RUNNERS_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
readonly RUNNERS_DIR
readonly DEBIAN_SUITE=trixie
readonly LOCAL_BASE="mcp-sandboxd/base:$DEBIAN_SUITE"
# The Debian release of the daemon's image (Dockerfile, docker-compose.yml).
readonly DAEMON_SUITE=bookworm
readonly IMAGE_PREFIX="${RUNNER_IMAGE_PREFIX:-mcp-sandboxd/runner-}"
readonly DEBIAN_MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
readonly DEBIAN_SECURITY_MIRROR="${DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}"
readonly BUN_VERSION="${BUN_VERSION:-1}"
readonly SANDBOX_UID=64321
# The same restrictions the daemon applies to a run.
readonly -a SANDBOX_RUN_OPTS=(
  --rm --network none --read-only --tmpfs "/tmp:rw,exec,size=64m"
  --user "$SANDBOX_UID:$SANDBOX_UID" -e HOME=/tmp
  --cap-drop ALL --security-opt no-new-privileges
  --memory 512m --memory-swap 512m --pids-limit 128
)

if [[ -n "${RUNNER_CACHE_DIR:-}" ]]; then
  CACHE_DIR="$RUNNER_CACHE_DIR"
elif [[ -n "${XDG_CACHE_HOME:-}" ]]; then
  CACHE_DIR="$XDG_CACHE_HOME/mcp-sandboxd"
elif [[ "$(id -u)" == 0 ]]; then
  CACHE_DIR=/var/cache/mcp-sandboxd
else
  CACHE_DIR="$HOME/.cache/mcp-sandboxd"
fi
readonly CACHE_DIR LOG_DIR="$CACHE_DIR/logs"

# The classic builder is what this was verified with (Docker 20.10 engine, no
# buildx); set DOCKER_BUILDKIT=1 to try BuildKit.
export DOCKER_BUILDKIT="${DOCKER_BUILDKIT:-0}"

usage() {
  cat <<EOF
Usage: ${0##*/} [options]

Build the mcp-sandboxd runner images ${IMAGE_PREFIX}<lang>:latest from
runners/<lang>/Dockerfile. Languages: $(available_langs | paste -sd, -)

Options:
  --only LANGS    comma-separated subset to build, e.g. --only python,bash
  --base IMAGE    base image to build on, e.g. debian:trixie-slim (pulled by
                  docker build); default: $LOCAL_BASE, made locally with
                  debootstrap + docker import when missing
  --egress        build the egress proxy's image (mcp-sandboxd/egress, Squid;
                  EGRESS_IMAGE) alone, or besides those --only names
                  (without --only and --egress: every runner and the proxy)
  --daemon-base   also make mcp-sandboxd/base:$DAEMON_SUITE, the offline base of
                  the daemon's own image (Dockerfile, docker-compose.yml)
  --network NET   network of the build steps (docker build --network), e.g.
                  host on an engine whose bridge has no route out
  --no-cache      rebuild every Dockerfile step (docker build --no-cache)
  --refresh       fetch again what is cached: a new debootstrap of the local
                  base, the Bun binary (bun@\$BUN_VERSION) and node_modules
  --progress FILE keep FILE up to date with each language's state, one
                  "<lang> <queued|building|done|failed|skipped>" a line
  --skip-tests    do not run the smoke tests (version detection still runs)
  -j, --jobs N    build N images at a time (default 2, or RUNNER_BUILD_JOBS;
                  -v builds one at a time)
  -v, --verbose   show docker build output (default: logged to $LOG_DIR)
  -h, --help      show this help

Environment: RUNNER_BASE_IMAGE or BASE_IMAGE (same as --base),
RUNNER_BUILD_NETWORK (same as --network), RUNNER_CACHE_DIR (default
$CACHE_DIR), BUN_VERSION (npm spec, default 1), DEBIAN_MIRROR,
DEBIAN_SECURITY_MIRROR, RUNNER_IMAGE_PREFIX (default mcp-sandboxd/runner-).
EOF
}

log() { printf '==> %s\n' "$*"; }
warn() { printf 'build.sh: warning: %s\n' "$*" >&2; }
die() {
  printf 'build.sh: error: %s\n' "$*" >&2
  exit 1
}
# Anything failing that is not handled explicitly still gets a clear message.
STEP_LOG=""
on_err() {
  printf 'build.sh: error: command failed (exit %s) at line %s: %s%s\n' \
    "$1" "$2" "$3" "${STEP_LOG:+ (log: $STEP_LOG)}" >&2
}
trap 'on_err $? $LINENO "$BASH_COMMAND"' ERR
now_ms() { date +%s%3N; }
secs_since() { # $1 = start in ms -> "12.3s"
  local d=$(($(now_ms) - $1))
  printf '%d.%ds' $((d / 1000)) $((d % 1000 / 100))
}

available_langs() {
  local d
  for d in "$RUNNERS_DIR"/*/Dockerfile; do
    [[ -f "$d" ]] || continue
    d="${d%/Dockerfile}"
    # Not a runner: the egress proxy (--egress).
    [[ "${d##*/}" != egress ]] || continue
    printf '%s\n' "${d##*/}"
  done
}

# The egress proxy's image (runners/egress: Squid from Debian's packages),
# without the sandbox.runner label: the daemon runs no code in it.
build_egress() {
  local tag="${EGRESS_IMAGE:-mcp-sandboxd/egress:latest}" t0
  t0=$(now_ms)
  local -a args=(build -t "$tag" --build-arg "BASE_IMAGE=$BASE")
  [[ -z "$NETWORK" ]] || args+=(--network "$NETWORK")
  ((NO_CACHE)) && args+=(--no-cache)
  log "egress: docker build $RUNNERS_DIR/egress (log: $LOG_DIR/egress.log)"
  run_logged "$LOG_DIR/egress.log" docker "${args[@]}" "$RUNNERS_DIR/egress" ||
    die "egress: docker build failed (log: $LOG_DIR/egress.log)"
  [[ "$(docker image inspect -f '{{index .Config.Labels "sandbox.runner"}}' "$tag")" != true ]] ||
    die "egress: $tag carries sandbox.runner=true; it must not"
  if ((!SKIP_TESTS)); then
    docker run --rm --network none --read-only --cap-drop ALL --security-opt no-new-privileges \
      --entrypoint squid "$tag" -v >/dev/null ||
      die "egress: squid does not run in $tag"
    printf '10.0.0.3 a.example.com 443\n10.0.0.4 a.example.com 443\n' |
      docker run --rm -i --network none --read-only --cap-drop ALL --tmpfs /egress/policy \
        --entrypoint sh "$tag" -c 'echo "*.example.com 443" >/egress/policy/10.0.0.3 && /usr/local/lib/mcpsd-egress/acl' |
      tr '\n' ' ' | grep -qx 'OK log=allowed ERR log=not-allowed ' ||
      die "egress: the ACL helper does not answer as it should"
  fi
  log "egress: $tag built in $(secs_since "$t0")"
}

# Run a command with its output going to a log file; on failure show the end of
# the log. $1 = log file, rest = command.
run_logged() {
  local logfile="$1"
  shift
  if ((VERBOSE)); then
    "$@" 2>&1 | tee "$logfile"
    return "${PIPESTATUS[0]}"
  fi
  if ! "$@" >"$logfile" 2>&1; then
    printf -- '---- last lines of %s ----\n' "$logfile" >&2
    tail -n 40 "$logfile" >&2
    printf -- '----\n' >&2
    return 1
  fi
}

# ---------------------------------------------------------------- base image

umount_below() { # unmount anything left mounted below $1 (a failed debootstrap)
  local m
  while read -r m; do
    umount -l "$m" 2>/dev/null || true
  done < <(awk -v d="$1/" 'index($2, d) == 1 { print $2 }' /proc/mounts | sort -r)
}

# Make the debootstrapped tree look like debian:<suite>-slim: the suite's full
# sources (updates, security), upgraded, no docs/man/locales, no apt caches, no
# setuid/setgid bits, no host files. $1 = rootfs, $2 = suite.
slim_rootfs() {
  local root="$1" suite="$2"
  rm -f "$root/etc/apt/sources.list"
  cat >"$root/etc/apt/sources.list.d/debian.sources" <<EOF
Types: deb
URIs: $DEBIAN_MIRROR
Suites: $suite $suite-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: $DEBIAN_SECURITY_MIRROR
Suites: $suite-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
  cat >"$root/etc/dpkg/dpkg.cfg.d/mcp-sandboxd-slim" <<'EOF'
# As in debian:*-slim: no documentation, manuals or translations.
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/lintian/overrides/*
path-exclude /usr/share/locale/*
path-exclude /usr/share/man/*
EOF
  cat >"$root/etc/dpkg/dpkg.cfg.d/mcp-sandboxd-unsafe-io" <<'EOF'
# As in the debian images ("docker-apt-speedup"): no fsync for every file
# dpkg unpacks. An image build that dies half-way is thrown away anyway; with
# ~160 packages the Python image's install layer is the time to the first run.
force-unsafe-io
EOF
  cat >"$root/etc/apt/apt.conf.d/mcp-sandboxd-clean" <<'EOF'
// As in the debian images: no package caches left in image layers.
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
Acquire::Languages "none";
Acquire::GzipIndexes "true";
Acquire::CompressionTypes::Order:: "gz";
APT::AutoRemove::SuggestsImportant "false";
EOF
  printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
  chmod 0755 "$root/usr/sbin/policy-rc.d"

  # Security and point-release updates (debootstrap only takes the release).
  DEBIAN_FRONTEND=noninteractive chroot "$root" sh -c \
    'apt-get update && apt-get -y -o Dpkg::Options::=--force-confold dist-upgrade && apt-get clean'

  find "$root/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete
  find "$root/usr/share/doc" -mindepth 1 -type d -empty -delete
  rm -rf "$root"/usr/share/{man,info,groff,linda,locale}/* "$root/usr/share/lintian/overrides"
  rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/var/cache/apt/archives/*.deb
  rm -rf "$root"/var/log/* "$root/var/cache/debconf"/*-old "$root/var/lib/dpkg"/*-old
  rm -rf "$root"/tmp/* "$root"/var/tmp/* "$root/root/.bash_history"
  : >"$root/etc/resolv.conf"
  : >"$root/etc/hostname"
  rm -f "$root/etc/machine-id" "$root/var/lib/dbus/machine-id"
  echo 'setuid/setgid bits removed from:'
  find "$root" -xdev -type f -perm /6000 -print -exec chmod ug-s {} +
}

ensure_base() {
  if [[ "$BASE" != "$LOCAL_BASE" ]]; then
    log "base: $BASE (registry base; docker build pulls it if needed)"
  else
    make_local_base "$DEBIAN_SUITE"
  fi
  ((!DAEMON_BASE)) || make_local_base "$DAEMON_SUITE"
}

# Make mcp-sandboxd/base:<suite> (unless present) from a debootstrap of the
# suite, kept in the cache directory. $1 = suite.
make_local_base() {
  local suite="$1" tag="mcp-sandboxd/base:$1"
  if ((!REFRESH)) && docker image inspect "$tag" >/dev/null 2>&1; then
    log "base: $tag (present)"
    return
  fi
  local t0 rootfs="$CACHE_DIR/rootfs-$suite"
  t0=$(now_ms)
  if ((REFRESH)) || [[ ! -f "$rootfs.complete" ]]; then
    [[ "$(id -u)" == 0 ]] || die "making $tag needs root (debootstrap); run as root or pass --base debian:$suite-slim"
    if ! command -v debootstrap >/dev/null 2>&1; then
      log "installing debootstrap (apt-get)"
      run_logged "$LOG_DIR/apt-debootstrap.log" sh -c \
        'apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends debootstrap' ||
        die "could not install debootstrap with apt-get"
    fi
    log "debootstrap --variant=minbase $suite -> $rootfs (log: $LOG_DIR/debootstrap-$suite.log)"
    rm -f "$rootfs.complete"
    local d
    for d in "$rootfs.tmp" "$rootfs"; do
      umount_below "$d"
      rm -rf --one-file-system "$d"
    done
    mkdir -p "$rootfs.tmp"
    run_logged "$LOG_DIR/debootstrap-$suite.log" \
      debootstrap --variant=minbase "$suite" "$rootfs.tmp" "$DEBIAN_MIRROR" ||
      {
        umount_below "$rootfs.tmp"
        die "debootstrap failed (log: $LOG_DIR/debootstrap-$suite.log)"
      }
    umount_below "$rootfs.tmp"
    log "updating and slimming the rootfs (log: $LOG_DIR/slim-rootfs-$suite.log)"
    # Called directly (not in an `||` context) so that set -e applies inside.
    STEP_LOG="$LOG_DIR/slim-rootfs-$suite.log"
    slim_rootfs "$rootfs.tmp" "$suite" >"$STEP_LOG" 2>&1
    STEP_LOG=""
    mv "$rootfs.tmp" "$rootfs"
    touch "$rootfs.complete"
  fi
  log "docker import $rootfs -> $tag"
  tar --numeric-owner -C "$rootfs" -c . |
    docker import \
      --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
      --change 'ENV LANG=C.UTF-8' \
      --change 'CMD ["bash"]' \
      --message "debootstrap --variant=minbase $suite (mcp-sandboxd runners/build.sh)" \
      - "$tag" >/dev/null ||
    die "docker import of $rootfs failed"
  log "base: $tag made in $(secs_since "$t0")"
}

# ------------------------------------------------- per-language preparation

# Fill runners/typescript with the generated build inputs: `bun` (from npm) and
# node_modules/ (npm ci from package-lock.json). Both are git-ignored.
prepare_typescript() {
  local ctx="$RUNNERS_DIR/typescript"
  command -v npm >/dev/null 2>&1 ||
    die "npm not found: the TypeScript runner needs Node.js/npm on the host (apt-get install npm)"

  local arch pkg
  arch="$(uname -m)"
  case "$arch" in
    x86_64 | amd64) pkg=@oven/bun-linux-x64 ;;
    aarch64 | arm64) pkg=@oven/bun-linux-aarch64 ;;
    *) die "no Bun build for $arch" ;;
  esac
  local bundir="$CACHE_DIR/bun-npm" spec="bun@$BUN_VERSION"
  local bin="$bundir/node_modules/$pkg/bin/bun"
  if ((REFRESH)) || [[ ! -x "$bin" || "$(cat "$bundir/spec" 2>/dev/null)" != "$spec" ]]; then
    log "npm install $spec (into $bundir)"
    rm -rf "$bundir"
    mkdir -p "$bundir"
    printf '{"private":true}\n' >"$bundir/package.json"
    # --ignore-scripts: bun's postinstall would move the binary elsewhere.
    run_logged "$LOG_DIR/npm-bun.log" \
      npm install --prefix "$bundir" --ignore-scripts --no-save --no-package-lock \
      --no-audit --no-fund "$spec" ||
      die "npm install $spec failed (log: $LOG_DIR/npm-bun.log)"
    [[ -x "$bin" ]] || die "npm install $spec did not leave a binary at $bin"
    printf '%s\n' "$spec" >"$bundir/spec"
  fi
  if ! cmp -s "$bin" "$ctx/bun"; then
    cp "$bin" "$ctx/bun.tmp"
    chmod 0755 "$ctx/bun.tmp"
    mv -f "$ctx/bun.tmp" "$ctx/bun"
  fi

  local stamp
  stamp="$(cat "$ctx/package.json" "$ctx/package-lock.json" | sha256sum)"
  if ((REFRESH)) || [[ "$(cat "$ctx/node_modules/.mcp-sandboxd-stamp" 2>/dev/null)" != "$stamp" ]]; then
    log "npm ci (runners/typescript/node_modules)"
    # --ignore-scripts: nothing preinstalled needs an install script, and none
    # runs on the build host.
    run_logged "$LOG_DIR/npm-ci.log" \
      npm ci --prefix "$ctx" --ignore-scripts --omit=dev --no-audit --no-fund ||
      die "npm ci failed in $ctx (log: $LOG_DIR/npm-ci.log)"
    printf '%s\n' "$stamp" >"$ctx/node_modules/.mcp-sandboxd-stamp"
  fi
}

# ------------------------------------------------------------------ images

# Parse a JSON array of plain strings (no escapes) into the array CMD_ARGS.
parse_command_label() {
  local json="$1" inner
  CMD_ARGS=()
  [[ "$json" =~ ^\[\"(.*)\"\]$ ]] || return 1
  inner="${BASH_REMATCH[1]}"
  [[ "$inner" != *\\* ]] || return 1
  local IFS=$'\x1f'
  # shellcheck disable=SC2206 # intended split on the unit separator
  CMD_ARGS=(${inner//\",\"/$'\x1f'})
  [[ "${CMD_ARGS[*]}" != *\"* ]]
}

label_of() { docker image inspect -f "{{index .Config.Labels \"$2\"}}" "$1"; }

# Run runners/<lang>/smoke.* as sandbox.filename through sandbox.command, the way
# the daemon does: code read-only at /sandbox, a writable /data.
smoke_test() {
  local lang="$1" image="$2" src
  src="$(find "$RUNNERS_DIR/$lang" -maxdepth 1 -name 'smoke.*' -type f | head -n 1)"
  if [[ -z "$src" ]]; then
    warn "$lang: no runners/$lang/smoke.* file, smoke test skipped"
    return 0
  fi
  local filename command watchdog
  filename="$(label_of "$image" sandbox.filename)"
  command="$(label_of "$image" sandbox.command)"
  watchdog="$(label_of "$image" sandbox.watchdog)"
  parse_command_label "$command" || die "$lang: sandbox.command is not a JSON array of plain strings: $command"
  local tmp
  tmp="$(mktemp -d "${TMPDIR:-/tmp}/mcp-sandboxd-smoke.XXXXXX")"
  mkdir "$tmp/sandbox" "$tmp/data"
  cp "$src" "$tmp/sandbox/$filename"
  chmod -R a+rX "$tmp/sandbox"
  if [[ "$(id -u)" == 0 ]]; then chown "$SANDBOX_UID:$SANDBOX_UID" "$tmp/data"; else chmod 0777 "$tmp/data"; fi
  local out rc=0
  out="$(timeout 300 docker run "${SANDBOX_RUN_OPTS[@]}" --cpus 1 \
    --mount "type=bind,src=$tmp/sandbox,dst=/sandbox,readonly" \
    --mount "type=bind,src=$tmp/data,dst=/data" \
    "$image" "$watchdog" -s KILL 120s "${CMD_ARGS[@]}" 2>&1)" || rc=$?
  local files
  files="$(cd "$tmp/data" && find . -type f | sed 's|^\./||' | sort | paste -sd' ' -)"
  rm -rf "$tmp"
  if ((rc != 0)) || [[ "$out" != *"smoke ok"* ]]; then
    printf '%s\n' "$out" | tail -n 30 >&2
    die "$lang: smoke test failed (exit $rc): ${CMD_ARGS[*]}"
  fi
  log "$lang: smoke test ok (${CMD_ARGS[*]}; files written to /data: ${files:-none})"
  check_test "$lang" "$image" "$src" "$filename" "$watchdog"
}

# sandbox.check (check_code), the way the daemon runs it: no /data, cwd /tmp.
# The smoke program must pass; ")(}{" is a syntax error in every language.
check_test() {
  local lang="$1" image="$2" src="$3" filename="$4" watchdog="$5" check tmp
  check="$(label_of "$image" sandbox.check)"
  [[ -n "$check" ]] || { warn "$lang: no sandbox.check label: check_code cannot check $lang"; return 0; }
  parse_command_label "$check" || die "$lang: sandbox.check is not a JSON array of plain strings: $check"
  tmp="$(mktemp -d "${TMPDIR:-/tmp}/mcp-sandboxd-check.XXXXXX")"
  mkdir "$tmp/good" "$tmp/bad"
  cp "$src" "$tmp/good/$filename"
  printf ')(}{\n' >"$tmp/bad/$filename"
  chmod -R a+rX "$tmp"
  local out rc=0 bad=0
  out="$(timeout 120 docker run "${SANDBOX_RUN_OPTS[@]}" --cpus 1 -w /tmp \
    --mount "type=bind,src=$tmp/good,dst=/sandbox,readonly" \
    "$image" "$watchdog" -s KILL 60s "${CMD_ARGS[@]}" 2>&1)" || rc=$?
  timeout 120 docker run "${SANDBOX_RUN_OPTS[@]}" --cpus 1 -w /tmp \
    --mount "type=bind,src=$tmp/bad,dst=/sandbox,readonly" \
    "$image" "$watchdog" -s KILL 60s "${CMD_ARGS[@]}" >/dev/null 2>&1 || bad=$?
  rm -rf "$tmp"
  if ((rc != 0)); then
    printf '%s\n' "$out" | tail -n 30 >&2
    die "$lang: sandbox.check refused the smoke program (exit $rc): ${CMD_ARGS[*]}"
  fi
  ((bad != 0)) || die "$lang: sandbox.check accepted a syntax error: ${CMD_ARGS[*]}"
  log "$lang: check test ok (${CMD_ARGS[*]})"
}

build_lang() {
  local lang="$1" ctx="$RUNNERS_DIR/$1" tag="$IMAGE_PREFIX$1:latest"
  local t0 iid old
  t0=$(now_ms)
  if declare -F "prepare_$lang" >/dev/null; then "prepare_$lang"; fi

  log "$lang: docker build $ctx (log: $LOG_DIR/$lang.log)"
  local -a args=(build --iidfile "$CACHE_DIR/$lang.iid" --build-arg "BASE_IMAGE=$BASE")
  [[ -z "$NETWORK" ]] || args+=(--network "$NETWORK")
  ((NO_CACHE)) && args+=(--no-cache)
  rm -f "$CACHE_DIR/$lang.iid"
  run_logged "$LOG_DIR/$lang.log" docker "${args[@]}" "$ctx" ||
    die "$lang: docker build failed (log: $LOG_DIR/$lang.log)"
  iid="$(cat "$CACHE_DIR/$lang.iid")"

  # Detect what is really installed, under the sandbox restrictions.
  local detect="$ctx/detect.sh" out version="" libraries="" description=""
  [[ -f "$detect" ]] || die "$lang: missing $detect"
  out="$(timeout 300 docker run -i "${SANDBOX_RUN_OPTS[@]}" --entrypoint sh "$iid" -s <"$detect" 2>&1)" ||
    {
      printf '%s\n' "$out" >&2
      die "$lang: version detection failed (runners/$lang/detect.sh)"
    }
  local line
  while IFS= read -r line; do
    case "$line" in
      version=*) version="${line#version=}" ;;
      libraries=*) libraries="${line#libraries=}" ;;
      description=*) description="${line#description=}" ;;
    esac
  done <<<"$out"
  [[ -n "$version" ]] || {
    printf '%s\n' "$out" >&2
    die "$lang: detect.sh printed no version= line"
  }

  # Re-apply the detected labels on top of the built image (an empty layer).
  local -a labels=(--label "sandbox.version=$version" --label "sandbox.libraries=$libraries")
  [[ -n "$description" ]] && labels+=(--label "sandbox.description=$description")
  old="$(docker image inspect -f '{{.Id}}' "$tag" 2>/dev/null || true)"
  printf 'FROM %s\n' "$iid" |
    run_logged "$LOG_DIR/$lang-labels.log" docker build "${labels[@]}" -t "$tag" - ||
    die "$lang: labelling failed (log: $LOG_DIR/$lang-labels.log)"
  local new
  new="$(docker image inspect -f '{{.Id}}' "$tag")"
  # A replaced image would still carry sandbox.runner=true: remove it once
  # nothing refers to it (errors ignored: e.g. a container still uses it).
  if [[ -n "$old" && "$old" != "$new" && "$(docker image inspect -f '{{len .RepoTags}}' "$old" 2>/dev/null)" == 0 ]]; then
    docker image rm "$old" >/dev/null 2>&1 || true
  fi

  ((SKIP_TESTS)) || smoke_test "$lang" "$tag"

  local size
  size="$(docker image inspect -f '{{.Size}}' "$tag")"
  # A file, not a variable: with --jobs, this runs in a subshell.
  printf '%-40s %-12s %6s MB  %-8s %s\n' "$tag" "${new:7:12}" \
    $((size / 1000000)) "$(secs_since "$t0")" "$version" >"$SUMMARY_DIR/$lang"
}

# Python first, and alone: deploy/run.sh serves as soon as an image is done,
# and Python is the one a fresh machine must serve first; its byte-compiling
# (compileall on every core) is most of its time, so nothing else is built
# beside it (BUILD_ALONE). The other analyst's language, R, comes next. Then
# two at a time: the light ones, mostly downloads and dpkg; then the
# compilers: c before go, whose standard library compiles for minutes, and
# rust and cpp after c (below). The rest follow in alphabetical order.
readonly -a BUILD_FIRST=(python r bash ruby php typescript c go rust cpp)
# Languages built with no other build beside them (when in the list).
declare -rA BUILD_ALONE=([python]=1)
# lang -> the language whose image must be built first: cpp and rust begin
# with the same layer as c (GCC), which they then take from the build cache
# instead of building it again at the same time.
declare -rA BUILD_AFTER=([cpp]=c [rust]=c)

# --progress FILE: one line per language in build order, "<lang> <state>",
# state one of queued, building, done, failed, skipped (not built after a
# failure); rewritten whole (a rename) at every change, so a reader never
# sees half a file. deploy/run.sh serves as soon as the first is done.
declare -A PROGRESS=()
PROGRESS_ORDER=()
progress() { # $1 = lang, $2 = state
  [[ -n "$PROGRESS_FILE" ]] || return 0
  PROGRESS[$1]="$2"
  local l
  for l in "${PROGRESS_ORDER[@]}"; do
    printf '%s %s\n' "$l" "${PROGRESS[$l]:-queued}"
  done >"$PROGRESS_FILE.tmp"
  mv -f "$PROGRESS_FILE.tmp" "$PROGRESS_FILE"
}

# Whether a language of BUILD_ALONE is being built (pid_lang: build_all's).
alone_running() {
  local x
  for x in "${pid_lang[@]}"; do
    [[ -z "${BUILD_ALONE[$x]:-}" ]] || return 0
  done
  return 1
}

# Build LANGS with at most JOBS builds at a time (most of a build is dpkg and
# apt, which use one core). After a failure no new build starts; the running
# ones finish, and the script fails.
build_all() {
  local -a queue=() failed=() dropped=()
  local -A status=() pid_lang=() # status: lang -> done | failed
  local l dep pid rc
  for l in "${BUILD_FIRST[@]}" "${LANGS[@]}"; do
    if [[ " ${LANGS[*]} " == *" $l "* && " ${queue[*]} " != *" $l "* ]]; then
      queue+=("$l")
    fi
  done
  PROGRESS_ORDER=("${queue[@]}")
  progress "${queue[0]}" queued
  if ((JOBS == 1)); then
    for l in "${queue[@]}"; do
      progress "$l" building
      # A subshell, so that a failure is recorded before build.sh exits.
      if (build_lang "$l"); then progress "$l" "done"; else
        progress "$l" failed
        exit 1
      fi
    done
    return 0
  fi
  while ((${#queue[@]} > 0 || ${#pid_lang[@]} > 0)); do
    local -a waiting=()
    for l in "${queue[@]}"; do
      dep="${BUILD_AFTER[$l]:-}"
      [[ -n "$dep" && " ${LANGS[*]} " == *" $dep "* ]] || dep=""
      if ((${#failed[@]} > 0)); then
        dropped+=("$l")
        progress "$l" skipped
      elif [[ -n "$dep" && "${status[$dep]:-}" != "done" ]] || ((${#pid_lang[@]} >= JOBS)) ||
        { ((${#pid_lang[@]} > 0)) && [[ -n "${BUILD_ALONE[$l]:-}" ]]; } || alone_running; then
        waiting+=("$l")
      else
        progress "$l" building
        build_lang "$l" &
        pid_lang[$!]="$l"
      fi
    done
    queue=("${waiting[@]}")
    ((${#pid_lang[@]} > 0)) || break
    rc=0
    wait -n -p pid "${!pid_lang[@]}" || rc=$?
    l="${pid_lang[$pid]}"
    unset 'pid_lang[$pid]'
    if ((rc == 0)); then
      status[$l]="done"
      progress "$l" "done"
    else
      status[$l]="failed"
      progress "$l" failed
      failed+=("$l")
    fi
  done
  ((${#failed[@]} == 0)) ||
    die "failed: ${failed[*]}${dropped[*]:+; not built: ${dropped[*]}} (logs in $LOG_DIR)"
}

# -------------------------------------------------------------------- main

ONLY="" BASE="${RUNNER_BASE_IMAGE:-${BASE_IMAGE:-$LOCAL_BASE}}" NO_CACHE=0 REFRESH=0 SKIP_TESTS=0 VERBOSE=0
DAEMON_BASE=0 NETWORK="${RUNNER_BUILD_NETWORK:-}" PROGRESS_FILE="" EGRESS=0
JOBS="${RUNNER_BUILD_JOBS:-2}"
while (($#)); do
  case "$1" in
    --only) ONLY="${2:?--only needs a list}" && shift ;;
    --only=*) ONLY="${1#*=}" ;;
    --base) BASE="${2:?--base needs an image}" && shift ;;
    --base=*) BASE="${1#*=}" ;;
    --daemon-base) DAEMON_BASE=1 ;;
    --egress) EGRESS=1 ;;
    --progress) PROGRESS_FILE="${2:?--progress needs a file}" && shift ;;
    --progress=*) PROGRESS_FILE="${1#*=}" ;;
    --network) NETWORK="${2:?--network needs a network name, e.g. host}" && shift ;;
    --network=*) NETWORK="${1#*=}" ;;
    -j | --jobs) JOBS="${2:?--jobs needs a number}" && shift ;;
    --jobs=*) JOBS="${1#*=}" ;;
    --no-cache) NO_CACHE=1 ;;
    --refresh) REFRESH=1 ;;
    --skip-tests) SKIP_TESTS=1 ;;
    -v | --verbose) VERBOSE=1 ;;
    -h | --help)
      usage
      exit 0
      ;;
    *) die "unknown option: $1 (see --help)" ;;
  esac
  shift
done

mapfile -t ALL_LANGS < <(available_langs)
if ((EGRESS)) && [[ -z "$ONLY" ]]; then
  LANGS=()
elif [[ -n "$ONLY" ]]; then
  IFS=, read -r -a LANGS <<<"$ONLY"
  for l in "${LANGS[@]}"; do
    [[ -f "$RUNNERS_DIR/$l/Dockerfile" ]] ||
      die "unknown language '$l' (available: $(printf '%s ' "${ALL_LANGS[@]}"))"
  done
else
  # Everything: every runner and the egress proxy.
  LANGS=("${ALL_LANGS[@]}")
  EGRESS=1
fi
((${#LANGS[@]} || EGRESS)) || die "nothing to build"
[[ "$JOBS" =~ ^[1-9][0-9]?$ ]] || die "--jobs wants a number from 1 to 99, not '$JOBS'"
# Interleaved docker build output would be unreadable.
((VERBOSE)) && JOBS=1

command -v docker >/dev/null 2>&1 || die "docker CLI not found"
docker info >/dev/null 2>&1 ||
  die "cannot reach the Docker engine (${DOCKER_HOST:-unix:///var/run/docker.sock}); start it, e.g. /usr/sbin/dockerd >/var/log/dockerd.log 2>&1 &"
mkdir -p "$CACHE_DIR" "$LOG_DIR"
if command -v flock >/dev/null 2>&1; then
  exec 9>"$CACHE_DIR/build.lock"
  flock -n 9 || die "another build.sh is running (lock: $CACHE_DIR/build.lock)"
fi

T_START=$(now_ms)
SUMMARY_DIR="$(mktemp -d "${TMPDIR:-/tmp}/mcp-sandboxd-build.XXXXXX")"
readonly SUMMARY_DIR
trap 'rm -rf "$SUMMARY_DIR"' EXIT
ensure_base
((EGRESS)) && build_egress
((${#LANGS[@]})) || exit 0
build_all

log "built on $BASE in $(secs_since "$T_START"):"
printf '    %-40s %-12s %9s  %-8s %s\n' IMAGE ID SIZE TIME VERSION
for l in "${LANGS[@]}"; do
  printf '    %s\n' "$(cat "$SUMMARY_DIR/$l")"
done
