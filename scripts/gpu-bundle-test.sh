#!/usr/bin/env bash
# gpu-bundle-test.sh - proves that the GPU bundle (scripts/gpu-bundle.sh) is
# enough: a build that uses only the bundle's libraries configures, compiles
# and runs CPU tests, MPI included. See usage().
set -uo pipefail
export LC_ALL=C

prog=${0##*/}
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bundle=${GPU_BUNDLE_DIR:-$repo/.gpu-bundle}
build=${1:-$repo/build-bundle}
# CPU tests that reach every bundled library: BLAS (ops, ctc), HDF5
# (checkpoint), FFTW (features), libsndfile (audio), cJSON (config limits),
# MPI with h5diff (data_parallel: 1, 2 and 4 ranks), espeak-ng and sox
# (mini_corpus).
tests='^(test_ops_dense|test_ctc|test_checkpoint|test_features|test_audio|test_config_limits|mini_corpus|data_parallel)$'

usage() {
  cat <<EOF
Usage: scripts/$prog [BUILD_DIR]     (default: build-bundle)

With the bundle's env.sh sourced, configures a fresh BUILD_DIR
(-DDSTRAIN_CUDA=OFF, CMAKE_FIND_ROOT_PATH and CMAKE_PREFIX_PATH in the
bundle, the bundle's mpicc, h5cc, h5diff, mpiexec and pkg-config), builds it
and checks:
  - CMakeCache.txt: MPI, HDF5, OpenBLAS, cblas.h, cJSON, FFTW, libsndfile,
    pkg-config, mpiexec and h5diff resolved inside the bundle
  - ldd BUILD_DIR/dstrain: libmpi, libhdf5, libopenblas, libfftw3,
    libsndfile and libcjson from the bundle, and nothing else from outside
    it but libc6, libgcc-s1 and libstdc++6
  - ctest: $tests
As root where mount namespaces work (unshare -m), all of it runs with every
system file that the bundle also holds hidden (a decoy bind-mounted over it:
an #error header, a non-ELF library, a program that cannot run), so that a
build or run that reaches for the system's copy fails; elsewhere only the
checks above prove it.

Exit 0: all passed; 1: a check failed; 77: no bundle (run scripts/gpu-bundle.sh).
The last line is "gpu-bundle-test: N passed, N failed".
EOF
}

case "${1:-}" in -h|--help) usage; exit 0 ;; -*) usage >&2; exit 2 ;; esac

if [ ! -f "$bundle/env.sh" ]; then
  echo "skipped: no GPU bundle in $bundle (make it with scripts/gpu-bundle.sh)"
  exit 77
fi

# ---- hiding the system's copies -------------------------------------------------
# Re-run this script in a private mount namespace, where mask_system has
# blanked every system file that the bundle also ships.
if [ -z "${DSTRAIN_BUNDLE_TEST_INNER:-}" ] && [ "$(id -u)" -eq 0 ] &&
   unshare -m --propagation private true 2>/dev/null; then
  DSTRAIN_BUNDLE_TEST_INNER=1 exec unshare -m --propagation private "$0" "$@"
fi

pass=0 fail=0
ok()  { pass=$((pass + 1)); echo "ok:   $*"; }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
finish() { echo "gpu-bundle-test: $pass passed, $fail failed"; [ "$fail" -eq 0 ]; exit; }

# shellcheck source=/dev/null
source "$bundle/env.sh"
B=$DSTRAIN_BUNDLE

# mask_system: bind a decoy over each regular file of the system that has a
# twin in the bundle (same path under root/). The decoy fails loudly however
# it is used: as a header (#error), as a library (not ELF), run as a program
# (not executable; as a shell script, exit 97). Programs keep working: the
# twins are found through LD_LIBRARY_PATH and PATH from env.sh.
mask_system() {
  local p n=0 decoy
  decoy=$(mktemp /tmp/gpu-bundle-test-decoy.XXXXXX)
  printf '#error "gpu-bundle-test: a system file was used; its twin is in the bundle"\nexit 97\n' >"$decoy"
  chmod 0444 "$decoy"
  while IFS= read -r p; do
    p=${p#.}
    [ -f "$p" ] && [ ! -L "$p" ] || continue
    mount --bind "$decoy" "$p" && n=$((n + 1))
  done < <(cd "$B/root" && find . -type f)
  echo "$n"
}
if [ -n "${DSTRAIN_BUNDLE_TEST_INNER:-}" ]; then
  echo "$prog: hiding the system's copies of the bundle's files (mount namespace)"
  n=$(mask_system)
  [ "$n" -gt 0 ] && ok "$n system files hidden for this test" || bad "no system file could be hidden"
else
  echo "$prog: note: not root or no mount namespaces: the system's copies stay visible;" \
       "the cache and ldd checks are the proof"
fi

# ---- configure and build -----------------------------------------------------------
echo "$prog: configuring $build"
case $(cd "$(dirname "$build")" 2>/dev/null && pwd)/$(basename "$build") in
  /|"$repo"|"$repo/"|"$HOME") echo "$prog: refusing to use $build as the build folder" >&2; exit 2 ;;
esac
rm -rf "$build"; mkdir -p "$build"
# shellcheck disable=SC2086  # DSTRAIN_BUNDLE_CMAKE_ARGS is a list of -D options
if cmake -S "$repo" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDSTRAIN_CUDA=OFF \
     -DCMAKE_FIND_ROOT_PATH="$B/root" -DCMAKE_PREFIX_PATH="$B/root/usr" \
     $DSTRAIN_BUNDLE_CMAKE_ARGS >"$build/bundle-test.configure.log" 2>&1; then
  ok "configured (log: $build/bundle-test.configure.log)"
else
  tail -30 "$build/bundle-test.configure.log"; bad "cmake configure failed"; finish
fi
echo "$prog: building with -j$(nproc)"
if cmake --build "$build" -j "$(nproc)" >"$build/bundle-test.build.log" 2>&1; then
  ok "built"
else
  grep -E 'error|In file included from' "$build/bundle-test.build.log" | head -20
  bad "build failed (log: $build/bundle-test.build.log)"; finish
fi

# ---- where things came from --------------------------------------------------------
# The cache: each library, header folder and tool CMake found is in the bundle.
cache_in_bundle() {
  local key val
  for key in MPI_mpi_LIBRARY MPI_C_HEADER_DIR MPI_C_COMPILER MPIEXEC_EXECUTABLE \
             HDF5_C_LIBRARY_hdf5 HDF5_C_COMPILER_EXECUTABLE HDF5_DIFF_EXECUTABLE \
             BLAS_openblas_LIBRARY CBLAS_INCLUDE_DIR CJSON_LIBRARY CJSON_INCLUDE_DIR \
             pkgcfg_lib_FFTW3_fftw3 pkgcfg_lib_SNDFILE_sndfile PKG_CONFIG_EXECUTABLE; do
    val=$(sed -n "s/^$key:[A-Z]*=//p" "$build/CMakeCache.txt")
    case $val in
      "$B"/*) ok "CMakeCache $key = ${val#"$B"/}" ;;
      *) bad "CMakeCache $key = '$val' is not in the bundle" ;;
    esac
  done
  # HDF5's include folder is not cached: the compile flags of the core
  # library name it
  val=$(grep -o -- '-isystem [^ ]*hdf5/serial' "$build/CMakeFiles/dstrain_core.dir/flags.make" | head -1)
  case $val in "-isystem $B"/*) ok "HDF5 headers: ${val#"-isystem $B"/}" ;;
               *) bad "HDF5 headers: '$val' (dstrain_core's flags.make)" ;; esac
}
cache_in_bundle

# ldd: the six libraries from the bundle, and nothing from outside it but
# the C and C++ runtimes (libc6, libgcc-s1, libstdc++6).
ldd_in_bundle() {
  local out lib path base
  out=$(ldd "$build/dstrain") || { bad "ldd $build/dstrain failed"; return; }
  for lib in libmpi.so libhdf5_serial.so libopenblas.so libfftw3.so libsndfile.so libcjson.so; do
    path=$(awk -v l="$lib" 'index($1, l) == 1 { print $3 }' <<<"$out")
    case $path in
      "$B"/*) ok "dstrain loads $lib from ${path#"$B"/}" ;;
      *) bad "dstrain loads $lib from '${path:-nowhere}'" ;;
    esac
  done
  base=$(dpkg -L libc6 libgcc-s1 libstdc++6 2>/dev/null | grep -E '\.so(\.|$)' | xargs -n1 basename | sort -u)
  local outside
  outside=$(awk '$2 == "=>" { print $1, $3 }' <<<"$out" | while read -r lib path; do
    case $path in "$B"/*) ;; *) grep -qxF "$lib" <<<"$base" || echo "$lib=$path" ;; esac
  done)
  [ -z "$outside" ] && ok "every other library of dstrain is the bundle's or libc/libgcc/libstdc++'s" ||
    bad "dstrain loads from outside the bundle: $outside"
}
ldd_in_bundle

# ---- the tests ------------------------------------------------------------------------
# Every name in $tests must exist (a renamed test must not pass silently).
names=$(ctest --test-dir "$build" -N | sed -nE 's/^ *Test +#[0-9]+: //p')
for want in $(sed -E 's/[()^$]//g; s/\|/ /g' <<<"$tests"); do
  grep -qx "$want" <<<"$names" || bad "no test named $want (ctest -N)"
done
echo "$prog: ctest -R '$tests'"
if ctest --test-dir "$build" -R "$tests" --output-on-failure --timeout 300 2>&1 | tee "$build/bundle-test.ctest.log" | grep -E '^ *[0-9]+/[0-9]+ Test|tests passed|Failed|Not Run'; then :; fi
while read -r name result; do
  case $result in Passed) ok "ctest $name" ;; *) bad "ctest $name: $result" ;; esac
done < <(sed -nE 's/^ *[0-9]+\/[0-9]+ Test +#[0-9]+: ([^ ]+) \.+ *([A-Za-z*]+( [A-Za-z]+)?).*/\1 \2/p' "$build/bundle-test.ctest.log")
finish
