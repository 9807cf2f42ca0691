#!/bin/sh
# SPDX-License-Identifier: MIT
# Entry point of the mcp-sandboxd image: makes the loop device nodes that
# loop-mode workspace quotas need, then execs the daemon (which stays PID 1's
# only child, or PID 1 itself without --init) with the arguments given.
#
# Why nodes are made here: the daemon asks /dev/loop-control for a free loop
# device (LOOP_CTL_GET_FREE) and opens /dev/loopN. The kernel creates new
# devices on the host's devtmpfs, which a container's /dev never shows, so a
# container only has the nodes it was started with. Making /dev/loop0 ..
# /dev/loop(MCPSD_LOOP_DEVICES-1) here (default 256) gives the daemon all of
# them without bind-mounting the host's whole /dev. Opening them still needs
# the device cgroup rules 'c 10:237 rwm' and 'b 7:* rwm' (docker-compose.yml
# sets them); without those, or without root, nothing here fails: the
# daemon's own start-up probe decides the quota mode and logs why.
set -u

make_loop_nodes() {
	[ "$(id -u)" = 0 ] || return 0
	case ${WORKSPACE_QUOTA_MODE:-auto} in none) return 0 ;; esac
	n=${MCPSD_LOOP_DEVICES:-256}
	case $n in '' | *[!0-9]*) n=256 ;; esac
	[ -e /dev/loop-control ] || mknod -m 0660 /dev/loop-control c 10 237 2>/dev/null || return 0
	# With loop.max_part=P each device takes 2^fls(P) minors.
	max_part=$(cat /sys/module/loop/parameters/max_part 2>/dev/null || echo 0)
	case $max_part in '' | *[!0-9]*) max_part=0 ;; esac
	shift=0
	while [ $(((1 << shift) - 1)) -lt "$max_part" ]; do shift=$((shift + 1)); done
	i=0
	while [ "$i" -lt "$n" ]; do
		[ -e "/dev/loop$i" ] || mknod -m 0660 "/dev/loop$i" b 7 $((i << shift)) 2>/dev/null || return 0
		i=$((i + 1))
	done
}

make_loop_nodes
exec /usr/local/bin/mcp-sandboxd "$@"
