# shellcheck shell=sh
# Run by build.sh inside the built image (sh -s, no network, read-only root):
# prints version=, libraries= and description= for the image labels.
# Library versions: the upstream part of the installed Debian package version.
set -eu
v="$(bash -c 'echo "${BASH_VERSINFO[0]}.${BASH_VERSINFO[1]}.${BASH_VERSINFO[2]}"')"
libs=""
for p in coreutils grep sed gawk jq bc findutils diffutils sqlite3 file xxd bsdextrautils \
         tar gzip bzip2 xz-utils zip unzip patch; do
  dv="$(dpkg-query -W -f '${Version}' "$p")"          # fails if not installed
  # upstream version: no epoch, no Debian revision, no repack suffix
  uv="$(printf '%s' "$dv" | sed -e 's/^[0-9]*://' -e 's/-[^-]*$//' -e 's/[+~]\(dfsg\|ds\).*$//')"
  case "$p" in          # name the tool rather than the package
    bsdextrautils) p=column ;;
    xz-utils) p=xz ;;
  esac
  libs="${libs:+$libs,}$p $uv"
done
for t in timeout jq gawk bc sqlite3 file xxd column zip unzip; do
  command -v "$t" >/dev/null || { echo "missing: $t" >&2; exit 1; }
done
echo "version=$v"
echo "libraries=$libs"
echo "description=Bash ${v%.*} with coreutils, grep, sed, gawk, jq, bc, sqlite3, file, xxd, column, tar/gzip/bzip2/xz, zip/unzip. Save files to /data to return them."
