#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Regenerates the documents made from the table of settings in lib/config/config.c
# (the single source): docs/configuration.md, .env.example, and the README's
# table of day-one settings (between its "BEGIN day-one settings" and "END
# day-one settings" comments). Run it after changing the table; the docs layer
# of tests/run.sh fails while a committed copy is stale.
#
# Usage: deploy/gen-docs.sh [--bin PATH] [--out DIR]
#   --bin PATH  the mcp-sandboxd to ask (default: build build/test-default)
#   --out DIR   write DIR/docs/configuration.md, DIR/.env.example and
#               DIR/README.md instead of the files in the tree
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export ROOT
# shellcheck source=deploy/common.sh
. "$ROOT/deploy/common.sh"

BIN=""
OUT="$ROOT"
while [ $# -gt 0 ]; do
	case $1 in
	--bin) BIN=${2:?--bin needs the path of an mcp-sandboxd}; shift 2 ;;
	--out) OUT=${2:?--out needs a directory}; shift 2 ;;
	-h | --help)
		awk 'NR > 2 && /^#/ {sub(/^# ?/, ""); print; next} NR > 2 {exit}' "$0"
		exit 0
		;;
	*) die "unknown option $1 (see --help)" ;;
	esac
done
if [ -z "$BIN" ]; then
	meson_build "$ROOT/build/test-default"
	BIN="$ROOT/build/test-default/cmd/mcp-sandboxd"
fi
[ -x "$BIN" ] || die "$BIN is not an executable mcp-sandboxd; build it or pass --bin"
mkdir -p "$OUT/docs"

# Each file is written whole to a temporary name first, so a failure leaves
# the old one in place.
"$BIN" --print-reference markdown >"$OUT/docs/configuration.md.tmp"
mv "$OUT/docs/configuration.md.tmp" "$OUT/docs/configuration.md"
"$BIN" --print-reference env >"$OUT/.env.example.tmp"
mv "$OUT/.env.example.tmp" "$OUT/.env.example"

block=$(mktemp)
trap 'rm -f "$block"' EXIT
"$BIN" --print-reference readme >"$block"
if ! grep -q '^<!-- BEGIN day-one settings' "$ROOT/README.md" ||
	! grep -q '^<!-- END day-one settings' "$ROOT/README.md"; then
	die "README.md has lost its '<!-- BEGIN day-one settings' or '<!-- END day-one settings' line; put both back where the table belongs (section Configuration)"
fi
awk -v block="$block" '
	/^<!-- BEGIN day-one settings/ {
		while ((getline l < block) > 0) print l
		skip = 1
		next
	}
	/^<!-- END day-one settings/ { skip = 0; next }
	!skip { print }
' "$ROOT/README.md" >"$OUT/README.md.tmp"
mv "$OUT/README.md.tmp" "$OUT/README.md"
