# shellcheck shell=bash
# build.sh smoke test: run as /sandbox/main.sh through sandbox.command.
set -euo pipefail
printf '%s\n' '{"a":[1,2,3]}' | jq -e '.a | add == 6' >/dev/null
[[ "$(echo '2^10' | bc)" == 1024 ]]
[[ "$(printf '3 4\n' | gawk '{ print $1 * $2 }')" == 12 ]]
sqlite3 :memory: 'select 40 + 2;' | grep -qx 42
seq 1 5 | paste -sd, - > /data/smoke.txt
file /data/smoke.txt | grep -q text
echo "uid $(id -u) cwd $PWD"
echo "smoke ok"
