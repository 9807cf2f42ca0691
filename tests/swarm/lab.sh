#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A Docker Swarm of three engines on this one machine, for the swarm tests:
# one dockerd per network namespace (mcpsdlab-n1 the manager, n2 and n3
# workers), joined by veth pairs to a bridge that lives in a namespace of
# its own (mcpsdlab-br), on a private /24 that only those veths carry.
# Nothing is added to the host's network namespace. The engines share the
# kernel and the mount namespace, so one host directory stands in for the
# shared file system; the daemon under test talks to the manager over its
# unix socket. The workers are configured as docs/deployment.md asks of
# sandbox nodes: no-new-privileges, the project's seccomp profile, the
# local log driver, --bridge=none (tasks see only lo) and the node label
# mcp-sandboxd.sandbox=true; the manager is drained. Each engine has a UTS
# namespace of its own with the host name mcpsdlab-N.
#
# Usage: tests/swarm/lab.sh up [--images IMG,...]   start, form the swarm,
#                                                   load the images
#        tests/swarm/lab.sh down                    stop and remove it all
#        tests/swarm/lab.sh status                  nodes, services, tasks
#        tests/swarm/lab.sh docker N ARGS...        docker against node N
#        tests/swarm/lab.sh cut N | heal N          take a node's link down
#                                                   or up (a partition)
# Environment: MCPSD_LAB_DIR (state, default /var/tmp/mcpsd-swarm-lab),
#   MCPSD_BIN (the daemon, for its seccomp profile).
# Tears down by PID file and `ip netns del`; `down` is safe to repeat and
# removes what a killed run left.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# shellcheck source=deploy/common.sh
. "$ROOT/deploy/common.sh"

LAB=${MCPSD_LAB_DIR:-/var/tmp/mcpsd-swarm-lab}
PREFIX=mcpsdlab
NET=10.77.91
NODES=(n1 n2 n3)

ns() { echo "$PREFIX-$1"; }
addr() { echo "$NET.$((10 + ${1#n}))"; }
sock() { echo "$LAB/$1/docker.sock"; }

# ldocker N ARGS...: the docker client against node N.
ldocker() {
	local n=$1
	shift
	DOCKER_HOST="unix://$(sock "$n")" timeout 120 docker "$@"
}

answers() {
	curl -sf --max-time 3 --unix-socket "$(sock "$1")" http://docker/_ping >/dev/null 2>&1
}

# The seccomp profile the daemon sends with every local run, as a file
# for the sandbox nodes' daemon.json.
write_seccomp() {
	local bin=${MCPSD_BIN:-$ROOT/build/test-default/cmd/mcp-sandboxd}
	[ -x "$bin" ] || die "no daemon at $bin to print the seccomp profile (build first)"
	"$bin" --print-seccomp-profile >"$LAB/seccomp.json" || die "printing the seccomp profile failed"
}

net_up() {
	local n i
	ip netns add "$(ns br)" || return 1
	ip -n "$(ns br)" link add br0 type bridge || return 1
	ip -n "$(ns br)" link set br0 up
	ip -n "$(ns br)" link set lo up
	for n in "${NODES[@]}"; do
		i=$(ns "$n")
		ip netns add "$i" || return 1
		ip -n "$i" link add eth0 type veth peer name "$n" netns "$(ns br)" || return 1
		ip -n "$(ns br)" link set "$n" master br0
		ip -n "$(ns br)" link set "$n" up
		ip -n "$i" addr add "$(addr "$n")/24" dev eth0
		ip -n "$i" link set eth0 up
		ip -n "$i" link set lo up
	done
}

start_engine() {
	local n=$1 d="$LAB/$1" role=$2
	mkdir -p "$d/data" "$d/exec"
	if [ "$role" = worker ]; then
		cat >"$d/daemon.json" <<EOF
{
  "no-new-privileges": true,
  "seccomp-profile": "$LAB/seccomp.json",
  "log-driver": "local",
  "bridge": "none",
  "iptables": false,
  "ip-forward": false,
  "ip-masq": false
}
EOF
	else
		cat >"$d/daemon.json" <<EOF
{
  "log-driver": "local",
  "bridge": "none",
  "iptables": false,
  "ip-forward": false,
  "ip-masq": false
}
EOF
	fi
	# nsenter, not `ip netns exec`: that one remounts /sys and hides the
	# cgroup tree from dockerd. A UTS namespace of its own gives each node
	# its host name (mcpsdlab-n2, ...), as separate hosts have: Swarm's
	# {{.Node.Hostname}} names each node's daemon in deploy/stack-nodes.yml.
	# shellcheck disable=SC2016 # expanded by that sh
	nsenter --net="/run/netns/$(ns "$n")" unshare --uts -- setsid sh -c \
		'hostname "$0" && exec dockerd "$@"' "$PREFIX-$n" \
		--data-root "$d/data" --exec-root "$d/exec" --pidfile "$d/dockerd.pid" \
		--host "unix://$d/docker.sock" --config-file "$d/daemon.json" \
		--cgroup-parent "/$PREFIX-$n" --storage-driver overlay2 \
		>"$d/dockerd.log" 2>&1 </dev/null &
	echo $! >"$d/launcher.pid"
}

wait_engines() {
	local n
	for n in "${NODES[@]}"; do
		for _ in $(seq 1 60); do
			answers "$n" && continue 2
			sleep 0.5
		done
		echo "engine $n did not answer; its log:" >&2
		tail -20 "$LAB/$n/dockerd.log" >&2
		return 1
	done
}

form_swarm() {
	local tok n id
	ldocker n1 swarm init --advertise-addr "$(addr n1)" --listen-addr "$(addr n1):2377" \
		--task-history-limit 1 >/dev/null || return 1
	tok=$(ldocker n1 swarm join-token -q worker) || return 1
	for n in n2 n3; do
		ldocker "$n" swarm join --token "$tok" --advertise-addr "$(addr "$n")" \
			--listen-addr "$(addr "$n"):2377" "$(addr n1):2377" >/dev/null || return 1
	done
	for _ in $(seq 1 60); do
		[ "$(ldocker n1 node ls --format '{{.Status}}' | grep -c Ready)" -eq 3 ] && break
		sleep 0.5
	done
	ldocker n1 node update --availability drain "$(ldocker n1 info --format '{{.Swarm.NodeID}}')" >/dev/null
	for n in n2 n3; do
		id=$(ldocker "$n" info --format '{{.Swarm.NodeID}}')
		ldocker n1 node update --label-add mcp-sandboxd.sandbox=true "$id" >/dev/null || return 1
	done
}

load_images() {
	local imgs=$1 img n tar="$LAB/images.tar"
	[ -n "$imgs" ] || return 0
	# shellcheck disable=SC2086 # a comma list made into words
	docker save -o "$tar" ${imgs//,/ } || return 1
	for n in "${NODES[@]}"; do
		ldocker "$n" load -q -i "$tar" >/dev/null || return 1
	done
	rm -f "$tar"
	for img in ${imgs//,/ }; do
		echo "loaded $img ($(docker image inspect -f '{{.Id}}' "$img"))"
	done
}

up() {
	local images=""
	while [ $# -gt 0 ]; do
		case $1 in
		--images) images=$2; shift 2 ;;
		*) die "unknown option $1" ;;
		esac
	done
	down >/dev/null 2>&1
	mkdir -p "$LAB/shared"
	# A shared mount, as / is on a host with systemd: a daemon deployed
	# with deploy/stack-nodes.yml binds it with rshared propagation (the
	# pool's mounts reach its node's engine). down unmounts it.
	if ! { mount --bind "$LAB/shared" "$LAB/shared" && mount --make-rshared "$LAB/shared"; }; then
		die "making $LAB/shared a shared mount failed"
	fi
	write_seccomp
	net_up || { down; die "making the lab's namespaces failed"; }
	start_engine n1 manager
	start_engine n2 worker
	start_engine n3 worker
	wait_engines || { down; die "the lab's engines did not start"; }
	form_swarm || { down; die "forming the swarm failed"; }
	load_images "$images" || { down; die "loading images into the lab failed"; }
	echo "lab up: manager unix://$(sock n1), shared directory $LAB/shared"
}

# Stops one engine by its PID file (SIGTERM, then SIGKILL after 20 s).
stop_engine() {
	local d="$LAB/$1" pid
	for f in dockerd.pid launcher.pid; do
		pid=$(cat "$d/$f" 2>/dev/null) || continue
		kill -0 "$pid" 2>/dev/null || continue
		grep -q dockerd "/proc/$pid/cmdline" 2>/dev/null || continue
		kill -TERM "$pid" 2>/dev/null
		for _ in $(seq 1 40); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.5
		done
		kill -KILL "$pid" 2>/dev/null
	done
}

# Processes still running from a directory of the lab (containerd, shims,
# container processes of a node whose engine died).
lab_pids() {
	local p exe
	for p in /proc/[0-9]*; do
		# A process may end between the glob and the read.
		{ exe=$(tr '\0' ' ' <"$p/cmdline"); } 2>/dev/null || continue
		case $exe in
		*"$LAB/"*) echo "${p#/proc/}" ;;
		esac
	done
}

down() {
	local n p m
	for n in "${NODES[@]}"; do
		stop_engine "$n" &
	done
	wait
	for p in $(lab_pids); do
		kill -KILL "$p" 2>/dev/null
	done
	# Mounts the engines left (overlay, shm, netns files), deepest first.
	while read -r m; do
		umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null
	done < <(awk -v d="$LAB" 'index($2, d "/") == 1 { print $2 }' /proc/self/mounts | sort -r)
	for n in "${NODES[@]}" br; do
		ip netns del "$(ns "$n")" 2>/dev/null
	done
	# The engines' cgroups (v1: one directory per controller).
	for m in /sys/fs/cgroup/*/"$PREFIX"-n*; do
		[ -d "$m" ] && find "$m" -depth -type d -exec rmdir {} + 2>/dev/null
	done
	rm -rf "$LAB"
	return 0
}

status() {
	ldocker n1 node ls
	ldocker n1 service ls
	for n in "${NODES[@]}"; do
		echo "$n containers: $(ldocker "$n" ps -aq | wc -l)"
	done
}

cmd=${1:-}
shift || true
case $cmd in
up) up "$@" ;;
down) down ;;
status) status ;;
docker) n=$1; shift; ldocker "$n" "$@" ;;
cut) ip -n "$(ns br)" link set "$1" down ;;
heal) ip -n "$(ns br)" link set "$1" up ;;
*) die "usage: $0 up|down|status|docker N ...|cut N|heal N" ;;
esac
