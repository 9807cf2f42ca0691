#!/bin/sh
# SPDX-License-Identifier: MIT
# Runs the daemon (MCPSD_REAL_BIN) in a PID namespace of its own, as it runs
# in a container: the processes of the boxes are not visible to it, so the
# warm channel's peer check sees pid 0 (warm_channel.test.mjs). unshare
# passes no signal on: signal the daemon, its child.
exec unshare --pid --fork --kill-child=SIGTERM -- "$MCPSD_REAL_BIN" "$@"
