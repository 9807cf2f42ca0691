# shellcheck shell=sh
# Run by build.sh inside the built image (sh -s, no network, read-only root):
# prints version=, libraries= and description= for the image labels.
set -eu
v="$(go env GOVERSION)"
v="${v#go}"
# The precompiled standard library must match this environment (CGO_ENABLED=0
# and the rest), or every run would recompile parts of it.
stale="$(go list -f '{{if .Stale}}{{.ImportPath}}{{end}}' std | head -n 5)"
if [ -n "$stale" ]; then
  echo "stale standard library packages (the Dockerfile's go install std did not take): $stale" >&2
  exit 1
fi
echo "version=$v"
echo "libraries=std $v"
echo "description=Go $v with the standard library (no third-party modules; no cgo), built with go build and run in one call; a compile error fails the run with the compiler's message on stderr. Extra flags: GOFLAGS in environment. Save files to /data to return them."
