#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# deploy/stack.yml on the lab of tests/swarm/lab.sh: brings the lab up
# (under its lock, as tests/run.sh's swarm layer does; refuses while
# another run holds it), loads the daemon's image into the manager, makes
# the manager active, runs `docker stack deploy`, waits for the task, for
# /healthz to say "status":"ok" (from the manager's network namespace) and
# for the container to be healthy, runs Bash code through /mcp with the SDK
# client, then `docker stack rm` and checks that no service, container or
# network is left on any node; tears the lab down. Prints what it sees;
# exits non-zero on the first check that fails. About a minute.
#
# Usage: tests/swarm/stack.sh        (as root; needs the image
#        mcp-sandboxd/daemon:latest on the host's engine: docker-compose
#        build, or docker build -t mcp-sandboxd/daemon:latest .)
# Environment: MCPSD_BIN (the daemon, for lab.sh's seccomp profile).
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# shellcheck source=deploy/common.sh
. "$ROOT/deploy/common.sh"

LAB=/var/tmp/mcpsd-swarm-lab
LOCK=/var/tmp/mcpsd-swarm-lab.lock
IMAGE=${MCPSD_IMAGE:-mcp-sandboxd/daemon:latest}
STACK=mcpsd-stack-test
SVC=${STACK}_mcp-sandboxd
PORT=18080
export MCPSD_LAB_DIR=$LAB
export MCPSD_BIN=${MCPSD_BIN:-$ROOT/build/test-default/cmd/mcp-sandboxd}

[ "$(id -u)" -eq 0 ] || die "run as root (the lab's network namespaces and dockerds)"
docker image inspect "$IMAGE" >/dev/null 2>&1 ||
	die "no $IMAGE on this engine: docker build -t $IMAGE . (or docker-compose build) first"
exec {FD}>"$LOCK"
flock -n "$FD" || die "the swarm lab is in use by another run (its lock $LOCK is held)"

WORK=$(mktemp -d /tmp/mcpsd-stack-XXXXXX)
cleanup() {
	"$ROOT/tests/swarm/lab.sh" down
	rm -rf "$WORK"
}
trap cleanup EXIT
fail() {
	echo "FAILED: $*" >&2
	lab docker n1 service ps --no-trunc "$SVC" >&2 2>/dev/null
	lab docker n1 service logs --raw "$SVC" 2>&1 | tail -20 >&2
	exit 1
}
lab() { "$ROOT/tests/swarm/lab.sh" "$@"; }
n1() { DOCKER_HOST="unix://$LAB/n1/docker.sock" timeout 120 docker "$@"; }
in_n1() { nsenter --net=/run/netns/mcpsdlab-n1 "$@"; }
left() {
	echo "services $(n1 service ls -q | wc -l), containers n1 $(lab docker n1 ps -aq | wc -l)" \
		"n2 $(lab docker n2 ps -aq | wc -l) n3 $(lab docker n3 ps -aq | wc -l)," \
		"stack networks $(n1 network ls -q --filter "label=com.docker.stack.namespace=$STACK" | wc -l)"
}

timeout 300 "$ROOT/tests/swarm/lab.sh" up --images mcp-sandboxd/runner-bash:latest || die "the lab did not come up"
docker save "$IMAGE" | n1 load -q || fail "loading $IMAGE into the manager"
n1 node update --availability active "$(n1 info --format '{{.Swarm.NodeID}}')" >/dev/null
TOKEN=$(random_secret)
printf 'MCP_API_TOKEN=%s\nFILE_SECRET=%s\nMCP_LOG_LEVEL=info\n' "$TOKEN" "$(random_secret)" >"$WORK/env"
export MCPSD_IMAGE=$IMAGE MCPSD_ENV_FILE=$WORK/env MCPSD_DATA=$LAB/shared/stack
export MCPSD_DOCKER_SOCKET=$LAB/n1/docker.sock MCPSD_ADDR=127.0.0.1:$PORT
mkdir -p "$MCPSD_DATA"
(cd "$ROOT" && n1 stack config -c deploy/stack.yml >"$WORK/config.yml") || fail "docker stack config"
t0=$(date +%s)
(cd "$ROOT" && n1 stack deploy --resolve-image never -c deploy/stack.yml "$STACK") || fail "docker stack deploy"
for _ in $(seq 1 90); do
	st=$(n1 service ps "$SVC" --format '{{.CurrentState}}' | head -1)
	case $st in Running*) break ;; esac
	sleep 1
done
case $st in Running*) echo "task running after $(($(date +%s) - t0)) s" ;; *) fail "the task is not running: $st" ;; esac
h=
for _ in $(seq 1 60); do
	h=$(in_n1 curl -s --max-time 3 "http://127.0.0.1:$PORT/healthz") && echo "$h" | grep -q '"sandbox_nodes_ok":2' && break
	sleep 1
done
echo "healthz: $h"
echo "$h" | grep -q '"status":"ok"' || fail "/healthz is not ok"
cid=$(n1 ps -q --filter "label=com.docker.swarm.service.name=$SVC" | head -1)
for _ in $(seq 1 60); do
	hs=$(n1 inspect -f '{{.State.Health.Status}}' "$cid")
	[ "$hs" = healthy ] && break
	sleep 2
done
echo "container health: $hs ($(($(date +%s) - t0)) s after deploy)"
[ "$hs" = healthy ] || fail "the container is $hs"
out=$(cd "$ROOT/tests/integration" && in_n1 env TOKEN="$TOKEN" URL="http://127.0.0.1:$PORT/mcp" node --input-type=module -e '
import { connectHttp } from "./lib/daemon.mjs";
const c = await connectHttp({ url: process.env.URL, token: process.env.TOKEN });
const r = await c.callTool({ name: "run_code", arguments: { conversationId: "stack", language: "bash",
  code: "echo on $(grep -o \"mcpsdlab-n[0-9]\" /proc/self/cgroup | head -1) as $(id -u); echo x > f" } }, undefined, { timeout: 120000 });
const sc = r.structuredContent ?? {};
console.log(`${sc.status} ${JSON.stringify(sc.stdout)} files ${(sc.files ?? []).map((f) => f.name)}`);
await c.close();
process.exit(0);
')
echo "run_code: $out"
echo "$out" | grep -Eq '^completed "on mcpsdlab-n[23] as 64321\\n" files f$' || fail "the run did not complete on a sandbox node"
n1 stack rm "$STACK" >/dev/null || fail "docker stack rm"
for _ in $(seq 1 60); do
	[ "$(left)" = "services 0, containers n1 0 n2 0 n3 0, stack networks 0" ] && break
	sleep 1
done
echo "after docker stack rm: $(left)"
[ "$(left)" = "services 0, containers n1 0 n2 0 n3 0, stack networks 0" ] || fail "something was left"
echo "stack.yml: ok"
