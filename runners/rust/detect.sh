# shellcheck shell=sh
# Run by build.sh inside the built image (sh -s, no network, read-only root):
# prints version=, libraries= and description= for the image labels.
set -eu
v="$(rustc --version | cut -d' ' -f2)"
echo "version=$v"
echo "libraries=std $v,edition 2021"
echo "description=Rust $v (rustc, edition 2021, standard library only: no cargo or crates), compiled unoptimised (like cargo run) and run in one call; a compile error fails the run with rustc's message on stderr. Extra flags (e.g. -O): RUSTFLAGS in environment. Save files to /data to return them."
