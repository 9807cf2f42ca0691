# shellcheck shell=sh
# Run by build.sh inside the built image (sh -s, no network, read-only root):
# prints version=, libraries= and description= for the image labels.
set -eu
v="$(g++ -dumpfullversion)"
glibc="$(getconf GNU_LIBC_VERSION | sed 's/^glibc //')"
# libstdc++'s version is GCC's; check that its headers are there.
for h in iostream vector thread cmath; do
  printf '#include <%s>\n' "$h" | g++ -std=gnu++17 -E -x c++ - >/dev/null
done
echo "version=$v"
echo "libraries=libstdc++ $v,glibc $glibc,libm $glibc,pthreads $glibc"
echo "description=C++ on G++ $v (-std=gnu++17 -O2; libstdc++, pthreads linked), compiled and run in one call; a compile error fails the run with G++'s message on stderr. Extra flags (e.g. -std=gnu++20): CXXFLAGS in environment. Save files to /data to return them."
