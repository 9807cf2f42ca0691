# shellcheck shell=sh
# Run by build.sh inside the built image (sh -s, no network, read-only root):
# prints version=, libraries= and description= for the image labels.
set -eu
v="$(go env GOVERSION)"
v="${v#go}"
# The standard library compiled into the baked cache must match this
# environment (CGO_ENABLED=0 and the rest), or every run would compile parts
# of it: seeded as sandbox.command seeds a run's cache, nothing may be stale.
GOCACHE=/tmp/.cache/go-build-detect
export GOCACHE
mkdir -p /tmp/.cache
cp -rs /usr/local/share/mcp-sandboxd/go-build "$GOCACHE"
date +%s >"$GOCACHE/trim.txt"
stale="$(go list -f '{{if .Stale}}{{.ImportPath}}{{end}}' std | head -n 5)"
if [ -n "$stale" ]; then
  echo "stale standard library packages (the Dockerfile's go build std into the baked cache did not take): $stale" >&2
  exit 1
fi
echo "version=$v"
rm -rf "$GOCACHE"
echo "libraries=std $v"
echo "description=Go $v (standard library only: no third-party modules, no cgo); built with go build and run in one call; a compile error fails the run with the compiler's message on stderr. Extra flags: GOFLAGS in environment. Save files to /data to return them."
