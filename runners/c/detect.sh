# shellcheck shell=sh
# Run by build.sh inside the built image (sh -s, no network, read-only root):
# prints version=, libraries= and description= for the image labels.
set -eu
v="$(gcc -dumpfullversion)"
glibc="$(getconf GNU_LIBC_VERSION | sed 's/^glibc //')"
# The headers and libraries sandbox.command links must be there.
for h in stdio.h math.h pthread.h; do
  printf '#include <%s>\n' "$h" | gcc -E -x c - >/dev/null
done
echo "version=$v"
echo "libraries=glibc $glibc,libm $glibc,pthreads $glibc"
echo "description=C on GCC $v (-std=gnu17 -O2; libm and pthreads linked), compiled and run in one call; a compile error fails the run with GCC's message on stderr. Extra flags: CFLAGS in environment. Save files to /data to return them."
