#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# deploy/stack-nodes.yml on the lab of tests/swarm/lab.sh: a daemon on every
# sandbox node as Swarm's global service, each on its node's engine, behind
# HAProxy with deploy/haproxy-nodes.cfg (in the manager's network namespace,
# where the client runs too), sharing the lab's shared directory and a
# scratch PostgreSQL (tests/lib/pg.sh; reached from each node's namespace
# through a socat relay on its loopback). Checks: a task runs on each
# sandbox node and none on the manager, each answers /healthz "ok", its
# replica name is its node's host name; a conversation through the
# balancer keeps its Python state across calls on one node; that node is
# drained (docker node update --availability drain): its daemon hands the
# conversation over and the next call is restored on the other node with
# its state and files (reason moved); after `docker stack rm` nothing is
# left on any node. Prints what it sees; exits non-zero on the first check
# that fails. A few minutes.
#
# Usage: tests/swarm/stack-nodes.sh  (as root, on a lab that is up with
#        mcp-sandboxd/runner-python:latest loaded, and the daemon's image
#        on the host's engine)
# Environment: MCPSD_IMAGE (default mcp-sandboxd/daemon:latest),
#   MCPSD_LAB_DIR.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# shellcheck source=deploy/common.sh
. "$ROOT/deploy/common.sh"

LAB=${MCPSD_LAB_DIR:-/var/tmp/mcpsd-swarm-lab}
IMAGE=${MCPSD_IMAGE:-mcp-sandboxd/daemon:latest}
STACK=mcpsd-nodes-test
SVC=${STACK}_mcp-sandboxd
PORT=18090
LB_PORT=18091

[ "$(id -u)" -eq 0 ] || die "run as root (the lab's network namespaces)"
[ -S "$LAB/n1/docker.sock" ] || die "no lab at $LAB: tests/swarm/lab.sh up --images mcp-sandboxd/runner-bash:latest,mcp-sandboxd/runner-python:latest"
docker image inspect "$IMAGE" >/dev/null 2>&1 || die "no $IMAGE on this engine: docker build -t $IMAGE . first"

WORK=$(mktemp -d /tmp/mcpsd-stack-nodes-XXXXXX)
chmod 0755 "$WORK" # the PostgreSQL server (user postgres) reaches its directory
PIDS=()
cleanup() {
	n1 stack rm "$STACK" >/dev/null 2>&1
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
	for n in n1 n2 n3; do n1 node update --availability active "$(nid "$n")" >/dev/null 2>&1; done
	n1 node update --availability drain "$(nid n1)" >/dev/null 2>&1
	"$ROOT/tests/lib/pg.sh" destroy "$WORK/pg" >/dev/null 2>&1
	rm -rf "$WORK" "$LAB/shared/stack-nodes"
}
trap cleanup EXIT
ldocker() { local n=$1; shift; DOCKER_HOST="unix://$LAB/$n/docker.sock" timeout 120 docker "$@"; }
n1() { ldocker n1 "$@"; }
nid() { ldocker "$1" info --format '{{.Swarm.NodeID}}'; }
in_n() { local n=$1; shift; nsenter --net="/run/netns/mcpsdlab-$n" "$@"; }
addr() { echo "10.77.91.$((10 + ${1#n}))"; }
fail() {
	echo "FAILED: $*" >&2
	n1 service ps --no-trunc "$SVC" >&2 2>/dev/null
	n1 service logs --raw "$SVC" 2>&1 | tail -30 >&2
	exit 1
}
# call CONV CODE: one run_code through the balancer (v2 SDK client,
# 2026-07-28), from the manager's namespace; prints the structured result.
call() {
	(cd "$ROOT/tests/integration" && in_n n1 env TOKEN="$TOKEN" URL="http://127.0.0.1:$LB_PORT/mcp" \
		CONV="$1" CODE="$2" node --input-type=module -e '
import { connectModern } from "./lib/modern.mjs";
const c = await connectModern({ url: process.env.URL, token: process.env.TOKEN });
const r = await c.callTool({ name: "run_code", arguments: { conversationId: process.env.CONV, language: "python", code: process.env.CODE } }, undefined, { timeout: 120000 });
console.log(JSON.stringify({ status: r.structuredContent?.status, stdout: r.structuredContent?.stdout, session: r.structuredContent?.session, text: r.structuredContent ? undefined : r.content }));
await c.close();
process.exit(0);
')
}
# node_of HOSTNAME: the lab node whose engine has that container.
node_of() {
	local n
	for n in n2 n3; do
		ldocker "$n" inspect "$1" >/dev/null 2>&1 && { echo "$n"; return; }
	done
	echo none
}
field() { node -e 'const o = JSON.parse(process.argv[1]); console.log(eval("o." + process.argv[2]) ?? "")' "$1" "$2"; }

# The store, reached from each node's loopback.
PGURL=$("$ROOT/tests/lib/pg.sh" start "$WORK/pg") || die "PostgreSQL did not start"
PGSOCK=$WORK/pg/sock
psql -qAt -h "$PGSOCK" -U postgres -d postgres -c 'CREATE DATABASE stacknodes' >/dev/null || fail "creating the database"
for n in n2 n3; do
	nsenter --net="/run/netns/mcpsdlab-$n" socat TCP-LISTEN:5432,bind=127.0.0.1,fork,reuseaddr \
		"UNIX-CONNECT:$PGSOCK/.s.PGSQL.5432" </dev/null >/dev/null 2>&1 &
	PIDS+=($!)
done
: "$PGURL"

for n in n1 n2 n3; do
	docker save "$IMAGE" | ldocker "$n" load -q >/dev/null || fail "loading $IMAGE into $n"
done
TOKEN=$(random_secret)
mkdir -p "$LAB/shared/stack-nodes"
printf 'MCP_API_TOKEN=%s\nFILE_SECRET=%s\nSTORE_URL=postgresql://postgres@127.0.0.1:5432/stacknodes\nPUBLIC_BASE_URL=http://127.0.0.1:%s\nMCP_LOG_LEVEL=info\nSANDBOX_POOL_SIZE=1\n' \
	"$TOKEN" "$(random_secret)" "$LB_PORT" >"$WORK/env"
export MCPSD_IMAGE=$IMAGE MCPSD_ENV_FILE=$WORK/env MCPSD_DATA=$LAB/shared/stack-nodes
# Each node's own engine socket, as /var/run/docker.sock is on separate
# hosts: here the bind's source names the node ({{.Node.Hostname}}).
mkdir -p "$WORK/sock"
for n in n1 n2 n3; do ln -s "$LAB/$n/docker.sock" "$WORK/sock/mcpsdlab-$n.sock"; done
export MCPSD_DOCKER_SOCKET="$WORK/sock/{{.Node.Hostname}}.sock" MCPSD_ADDR=0.0.0.0:$PORT MCPSD_STOP_GRACE=60s
t0=$(date +%s)
(cd "$ROOT" && n1 stack deploy --resolve-image never -c deploy/stack-nodes.yml "$STACK") || fail "docker stack deploy"
for n in n2 n3; do
	h=
	for _ in $(seq 1 120); do
		h=$(in_n "$n" curl -s --max-time 3 "http://$(addr "$n"):$PORT/healthz") && echo "$h" | grep -q '"status":"ok"' && break
		sleep 1
	done
	echo "$n /healthz after $(($(date +%s) - t0)) s: $(echo "$h" | head -c 160)"
	echo "$h" | grep -q '"status":"ok"' || fail "the daemon on $n is not ok"
done
tasks=$(n1 service ps "$SVC" --filter desired-state=running --format '{{.Node}}' | sort | tr '\n' ' ')
echo "tasks on: $tasks"
[ "$tasks" = "mcpsdlab-n2 mcpsdlab-n3 " ] || fail "one task on each sandbox node, none on the manager (got: $tasks)"
# Each task's replica name is its node's host name.
for n in n2 n3; do
	ldocker "$n" logs "$(ldocker "$n" ps -q --filter "label=com.docker.swarm.service.name=$SVC" | head -1)" 2>&1 |
		grep -q "replica mcpsdlab-$n runs conversations on its own engine" ||
		fail "the daemon on $n is not replica mcpsdlab-$n"
done

# HAProxy in the manager's namespace, in front of both nodes.
nsenter --net=/run/netns/mcpsdlab-n1 env MCPSD_LB_BIND="127.0.0.1:$LB_PORT" MCPSD_N1="$(addr n2):$PORT" MCPSD_N1_NAME=mcpsdlab-n2 \
	MCPSD_N2="$(addr n3):$PORT" MCPSD_N2_NAME=mcpsdlab-n3 haproxy -f "$ROOT/deploy/haproxy-nodes.cfg" -db \
	</dev/null >"$WORK/haproxy.log" 2>&1 &
PIDS+=($!)
sleep 5

CONV=stack-nodes-$$
r=$(call "$CONV" "import socket, pandas as pd
df = pd.DataFrame({'a': [1, 2, 3]})
open('/data/kept.txt', 'w').write('kept')
print(socket.gethostname())")
echo "first call: $(echo "$r" | head -c 300)"
[ "$(field "$r" status)" = completed ] || fail "the first call did not complete"
held=$(node_of "$(field "$r" 'stdout.trim()')")
echo "conversation on $held"
r=$(call "$CONV" "df['b'] = df.a * 2
import socket
print(int(df.b.sum()), socket.gethostname())")
[ "$(field "$r" 'session.state')" = continued ] || fail "the second call did not continue the session: $r"
[ "$(node_of "$(field "$r" 'stdout.split(" ")[1].trim()')")" = "$held" ] || fail "the second call ran elsewhere: $r"
echo "second call: $(field "$r" 'stdout.trim()') on $held, session $(field "$r" 'session.state')"

sleep 1 # the save after the run
echo "draining $held"
n1 node update --availability drain "$(nid "$held")" >/dev/null || fail "docker node update --availability drain"
for _ in $(seq 1 90); do
	[ -z "$(n1 service ps "$SVC" --filter desired-state=running --filter "node=mcpsdlab-${held}" -q)" ] &&
		[ "$(ldocker "$held" ps -q | wc -l)" -eq 0 ] && break
	sleep 1
done
echo "after the drain: $(ldocker "$held" ps -aq | wc -l) container(s) on $held"
t1=$(date +%s%N)
r=$(call "$CONV" "import socket
print(int(df.b.sum()), open('/data/kept.txt').read(), socket.gethostname())")
ms=$((($(date +%s%N) - t1) / 1000000))
echo "after the drain: $(echo "$r" | head -c 400) (${ms} ms)"
[ "$(field "$r" 'session.state')" = restored ] || fail "not restored after the drain: $r"
[ "$(field "$r" 'session.reason')" = moved ] || fail "not handed over (reason) after the drain: $r"
[ "$(field "$r" 'stdout.split(" ").slice(0, 2).join(" ")')" = "12 kept" ] || fail "the state or the file did not move: $r"
other=$(node_of "$(field "$r" 'stdout.split(" ")[2].trim()')")
{ [ "$other" != "$held" ] && [ "$other" != none ]; } || fail "served by $other after $held was drained"
echo "restored on $other with its state and file"

n1 stack rm "$STACK" >/dev/null || fail "docker stack rm"
for _ in $(seq 1 60); do
	left=$(for n in n1 n2 n3; do ldocker "$n" ps -aq; done | wc -l)
	[ "$left" -eq 0 ] && break
	sleep 1
done
echo "after docker stack rm: $left container(s) on the nodes"
[ "$left" -eq 0 ] || fail "containers were left"
echo "stack-nodes.yml: ok"
