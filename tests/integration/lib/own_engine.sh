#!/bin/bash
# SPDX-License-Identifier: MIT
# A Docker engine of a test's own, with live-restore on, so that a test can
# restart it (warm_restart.test.mjs) without touching the shared engine at
# /var/run/docker.sock. It runs in a network namespace of its own (like
# tests/swarm/lab.sh), with --bridge none there, so it never touches the
# host's docker0; its data, exec root, pid file and socket are below DIR.
#
# Usage: own_engine.sh up DIR [IMAGE...]   start it, copy IMAGEs from the
#                                          shared engine (docker save | load)
#        own_engine.sh stop DIR            SIGTERM; containers keep running
#        own_engine.sh start DIR           start it again on the same data
#        own_engine.sh down DIR            stop it, its containers and its
#                                          containerd; remove DIR
# The socket is unix://DIR/docker.sock. Needs root.
set -u

cmd=${1:?usage: own_engine.sh up|stop|start|down DIR [IMAGE...]}
dir=${2:?usage: own_engine.sh up|stop|start|down DIR [IMAGE...]}
shift 2
ns="mcpsd-own-$(basename "$dir" | tr -c 'A-Za-z0-9\n' '-' | cut -c1-20)"
sock="unix://$dir/docker.sock"

answers() { DOCKER_HOST=$sock timeout 5 docker info >/dev/null 2>&1; }

start() {
	mkdir -p "$dir/data" "$dir/exec"
	cat >"$dir/daemon.json" <<EOF
{
  "live-restore": true,
  "log-driver": "none",
  "bridge": "none",
  "iptables": false,
  "ip-forward": false,
  "ip-masq": false
}
EOF
	# nsenter, not `ip netns exec`: that one remounts /sys and hides the
	# cgroup tree from dockerd.
	nsenter --net="/run/netns/$ns" setsid dockerd \
		--data-root "$dir/data" --exec-root "$dir/exec" \
		--pidfile "$dir/dockerd.pid" --host "$sock" \
		--config-file "$dir/daemon.json" --storage-driver overlay2 \
		>>"$dir/dockerd.log" 2>&1 </dev/null &
	for _ in $(seq 1 120); do
		answers && return 0
		sleep 0.25
	done
	echo "the test's engine did not answer; its log:" >&2
	tail -20 "$dir/dockerd.log" >&2
	return 1
}

stop() {
	local pid
	pid=$(cat "$dir/dockerd.pid" 2>/dev/null) || return 0
	grep -q dockerd "/proc/$pid/cmdline" 2>/dev/null || return 0
	kill -TERM "$pid"
	for _ in $(seq 1 120); do
		kill -0 "$pid" 2>/dev/null || return 0
		sleep 0.25
	done
	echo "the test's engine did not stop within 30 s" >&2
	return 1
}

case $cmd in
up)
	[ -e "/run/netns/$ns" ] || ip netns add "$ns" || exit 1
	ip -n "$ns" link set lo up
	start || exit 1
	for img in "$@"; do
		docker save "$img" | DOCKER_HOST=$sock docker load -q >/dev/null ||
			exit 1
	done
	;;
stop) stop ;;
start) start ;;
down)
	if answers; then
		ids=$(DOCKER_HOST=$sock docker ps -aq)
		[ -n "$ids" ] && DOCKER_HOST=$sock docker rm -f $ids >/dev/null 2>&1
	fi
	stop
	# The containerd it started (live-restore leaves it running on a
	# stop): found by its state directory below ours, by pid.
	for p in $(pgrep -x containerd); do
		grep -qF "$dir/" "/proc/$p/cmdline" 2>/dev/null && kill -TERM "$p"
	done
	sleep 1
	for m in $(awk -v d="$dir/" 'index($5, d) == 1 {print $5}' /proc/self/mountinfo | sort -r); do
		umount -l "$m" 2>/dev/null
	done
	ip netns del "$ns" 2>/dev/null
	rm -rf "$dir"
	;;
*)
	echo "usage: own_engine.sh up|stop|start|down DIR [IMAGE...]" >&2
	exit 2
	;;
esac
