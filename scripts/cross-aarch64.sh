#!/usr/bin/env bash
# Cross-compiles dstrain for aarch64 (CUDA off) and runs the CPU op tests
# under qemu-user: see usage below.
set -euo pipefail
cd "$(dirname "$0")/.."
prog=$(basename "$0")
root=$PWD

build=${AARCH64_BUILD_DIR:-build-aarch64}
sysroot=${AARCH64_SYSROOT:-build-aarch64-sysroot}
case $sysroot in /*) ;; *) sysroot=$root/$sysroot ;; esac
triplet=aarch64-linux-gnu
# the CPU op tests: every op of the seam, forward and backward, in each dtype
default_tests='^(test_ops_conv_bn|test_ops_dense|test_ops_rnn|test_ctc|test_optim|test_gradcheck_model|parity_cpu_float32|parity_cpu_float64|parity_cpu_float16|parity_cpu_bfloat16)$'
tests=$default_tests
ctest_args=()

usage() {
  cat <<EOF
Usage: scripts/$prog [--tests REGEX] [--no-install] [--help] [-- CTEST_ARGS...]

Builds dstrain for aarch64 (arm64) Linux on this amd64 Debian and runs its
CPU op tests under qemu-user:

  install    the host's cross compiler ($triplet-gcc) and qemu-user (apt),
             and an arm64 sysroot in $sysroot:
             Debian's arm64 packages of the libraries the build links
             (OpenBLAS, Open MPI, HDF5, cJSON, zlib, libzip, FFTW,
             libsndfile) with their dependencies, downloaded with apt-get
             into a private apt state and unpacked with dpkg-deb (the host's
             dpkg is not touched: Debian 12's arm64 libopenmpi-dev and
             libhdf5-dev would remove the amd64 ones). Done once; later runs
             reuse it while the package list is the same.
  configure  $build with cmake/aarch64-linux-gnu.cmake, -DDSTRAIN_CUDA=OFF
  build      every target of the project (libraries, dstrain, the test
             and bench programs), then checks that dstrain is an aarch64
             program whose CPU ops use NEON (fmla on v registers: GCC
             lowers the vector-extension loops of cpu/ to NEON)
  tests      ctest -R REGEX in $build: each test program runs under
             qemu-aarch64 -L SYSROOT (the toolchain file's
             CMAKE_CROSSCOMPILING_EMULATOR)

Prints each phase's wall time and closes with "N passed, N failed".
Exits 1 when a step or a test fails, 77 when it cannot run here (no apt,
not root and no sudo, a package that cannot be had).

  --no-install   install nothing on the host: skip (77) when the cross
                 compiler or qemu-aarch64 is missing (scripts/install-deps.sh
                 installs both; the ctest cross_aarch64 runs this way)
  --tests REGEX  the tests to run (ctest -R); default, the CPU op tests:
                 $default_tests
  CTEST_ARGS     passed to ctest (e.g. -j 1, --timeout 900)

Environment: AARCH64_BUILD_DIR (build-aarch64), AARCH64_SYSROOT
(build-aarch64-sysroot; relative to the repository).
EOF
}

no_install=0
while [ $# -gt 0 ]; do
  case $1 in
    -h|--help) usage; exit 0 ;;
    --no-install) no_install=1; shift ;;
    --tests) [ $# -ge 2 ] || { usage >&2; exit 2; }; tests=$2; shift 2 ;;
    --tests=*) tests=${1#--tests=}; shift ;;
    --) shift; ctest_args=("$@"); break ;;
    *) echo "$prog: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
  esac
done

skip() { echo "$prog: skipped: $*" >&2; exit 77; }
die() { echo "$prog: error: $*" >&2; exit 1; }
now() { date +%s; }
phase_times=()
begin=$(now)
t0=$begin
phase_done() {   # NAME: records the seconds since the last phase ended
  local t; t=$(now)
  phase_times+=("$1 $((t - t0)) s")
  echo "$prog: $1 took $((t - t0)) s"
  t0=$t
}

log=$(mktemp)
trap 'rm -f "$log"' EXIT

# ---------------------------------------------------------------- install
if ! command -v apt-get >/dev/null || ! command -v dpkg-deb >/dev/null; then
  skip "needs a Debian with apt-get and dpkg-deb"
fi
# The host's side: the cross compiler, qemu, the build tools (as root, or
# with sudo, when one is missing).
host_packages=("gcc-$triplet" "binutils-$triplet" qemu-user cmake make pkg-config)
if [ "$no_install" -eq 1 ]; then
  command -v "$triplet-gcc" >/dev/null || skip "no $triplet-gcc (--no-install: scripts/install-deps.sh installs it)"
elif ! timeout 900 scripts/install-deps.sh "${host_packages[@]}" >"$log" 2>&1; then
  cat "$log" >&2
  skip "apt could not install ${host_packages[*]}"
else
  grep -E '^install-deps:' "$log" || true
fi
command -v qemu-aarch64 >/dev/null || skip "qemu-aarch64 not found after installing qemu-user"

# The arm64 side: what the CPU build links (scripts/install-deps.sh's -dev
# list, for arm64), the C library, and OpenMP's runtime.
arm64_packages=(libc6-dev libgomp1 libopenblas-dev libopenmpi-dev libhdf5-dev libcjson-dev
                zlib1g-dev libzip-dev libfftw3-dev libsndfile1-dev)
# Programs that come along as dependencies but are never run or linked
# here (the arm64 native compilers, perl, dpkg...): not unpacked.
not_unpacked='^(gcc-12|cpp-12|gfortran-12|gcc|cpp|gfortran|libgcc-12-dev|libgfortran-12-dev|lib(asan8|tsan2|hwasan0|lsan0|ubsan1|itm1|cc1-0|isl23|mpc3|mpfr6)|binutils.*|libbinutils|libctf.*|libgprofng0|libjansson4|perl|perl-base|perl-modules-.*|libperl.*|dpkg|tar|debconf|adduser|passwd|autoconf|automake|autotools-dev|m4|libtool|openssh-client|libjs-.*|openmpi-bin|hdf5-helpers|libfftw3-bin)$'
stamp_text="$triplet ${arm64_packages[*]}"
apt_dir=$sysroot.apt
if [ -f "$sysroot/.complete" ] && [ "$(cat "$sysroot/.complete")" = "$stamp_text" ]; then
  echo "$prog: arm64 sysroot $sysroot is up to date"
else
  echo "$prog: making the arm64 sysroot in $sysroot"
  # only a folder this script made (its .complete inside, written empty
  # first) is emptied, with the downloads of another package list
  if [ -e "$sysroot" ] && [ -n "$(ls -A "$sysroot" 2>/dev/null)" ]; then
    [ -f "$sysroot/.complete" ] || die "$sysroot exists and was not made by $prog: set AARCH64_SYSROOT to a new folder"
    rm -rf "$sysroot" "$apt_dir/cache/archives"
  fi
  mkdir -p "$apt_dir/state/lists/partial" "$apt_dir/cache/archives/partial" "$sysroot"
  : >"$sysroot/.complete"
  # a private apt: arm64 as its only architecture, nothing installed; the
  # host's sources and keys, its own lists and downloads
  : >"$apt_dir/state/status"
  cat >"$apt_dir/apt.conf" <<EOF
APT::Architecture "arm64";
APT::Architectures { "arm64"; };
Dir::State "$apt_dir/state";
Dir::State::status "$apt_dir/state/status";
Dir::Cache "$apt_dir/cache";
APT::Install-Recommends "false";
APT::Sandbox::User "root";
Debug::NoLocking "true";
EOF
  export APT_CONFIG=$apt_dir/apt.conf
  timeout 600 apt-get update -qq >"$log" 2>&1 || { cat "$log" >&2; skip "apt-get update for arm64 failed"; }
  timeout 600 apt-get install -y -qq --download-only "${arm64_packages[@]}" >"$log" 2>&1 \
    || { cat "$log" >&2; skip "apt could not download the arm64 packages"; }
  unset APT_CONFIG
  n=0
  for deb in "$apt_dir"/cache/archives/*.deb; do
    name=$(dpkg-deb -f "$deb" Package)
    [[ $name =~ $not_unpacked ]] && continue
    dpkg-deb -x "$deb" "$sysroot"
    n=$((n + 1))
  done
  echo "$prog: unpacked $n arm64 packages ($(du -sh "$apt_dir/cache/archives" | cut -f1) downloaded)"
  # Absolute links point into the host's /: make them relative, inside the
  # sysroot (a link into /etc/alternatives is left dangling there).
  while IFS= read -r -d '' link; do
    target=$(readlink "$link")
    case $target in
      /*) ln -sfn "$(realpath -m -s --relative-to="$(dirname "$link")" "$sysroot$target")" "$link" ;;
    esac
  done < <(find "$sysroot" -type l -print0)
  # What update-alternatives would do for OpenBLAS (its postinst scripts):
  # libopenblas.so.0, libblas.so.3, cblas.h, ... from openblas-pthread/.
  lib=$sysroot/usr/lib/$triplet
  for f in "$lib"/openblas-pthread/lib{openblas,blas,lapack}.so*; do
    [ -e "$f" ] && ln -sfn "openblas-pthread/$(basename "$f")" "$lib/$(basename "$f")"
  done
  inc=$sysroot/usr/include/$triplet
  [ -e "$inc/openblas-pthread/cblas.h" ] && ln -sfn openblas-pthread/cblas.h "$inc/cblas.h"
  for f in "$lib/libopenblas.so.0" "$lib/openmpi/lib/libmpi.so" "$sysroot/usr/include/hdf5/serial/hdf5.h"; do
    [ -e "$f" ] || die "the arm64 sysroot lacks $f after unpacking"
  done
  echo "$stamp_text" >"$sysroot/.complete"
fi
phase_done install

# ---------------------------------------------------------------- configure
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDSTRAIN_CUDA=OFF \
  -DCMAKE_TOOLCHAIN_FILE="$root/cmake/aarch64-linux-gnu.cmake" \
  -DDSTRAIN_AARCH64_SYSROOT="$sysroot" >"$log" 2>&1 \
  || { cat "$log" >&2; die "configure failed"; }
phase_done configure

# ---------------------------------------------------------------- build
echo "$prog: building every target for $triplet in $build"
cmake --build "$build" -j "$(nproc)" >"$log" 2>&1 || { tail -60 "$log" >&2; die "build failed"; }
grep -E 'warning:' "$log" | sort -u | head -20 || true
# e_machine (ELF offset 18, little-endian): 183 = EM_AARCH64
machine=$(od -An -tu2 -j18 -N2 "$build/dstrain" | tr -d ' ')
[ "$machine" = 183 ] || die "$build/dstrain is not an aarch64 program (e_machine $machine)"
# NEON: the CPU ops' multiply-adds on vector registers (4 floats, 2 doubles)
neon=$("$triplet-objdump" -d --no-show-raw-insn "$build/dstrain" \
  | grep -oE '\sfmla\s+v[0-9]+\.(4s|2d)' | awk '{print $2}' | sed 's/^v[0-9]*//' | sort | uniq -c \
  | awk '{printf "%s%s fmla %s", sep, $1, $2; sep=", "}' || true)
[ -n "$neon" ] || die "no NEON multiply-add (fmla v.4s/v.2d) in $build/dstrain"
echo "$prog: NEON in dstrain: $neon"
# and it runs: what it was built with and which CPU path it takes, under qemu
timeout 120 qemu-aarch64 -L "$sysroot" "$build/dstrain" version >"$log" 2>&1 \
  || { cat "$log" >&2; die "$build/dstrain version fails under qemu-aarch64"; }
sed 's/^/  /' "$log"
phase_done build

# ---------------------------------------------------------------- tests
rc=0
ctest --test-dir "$build" -R "$tests" --output-on-failure -j "$(nproc)" "${ctest_args[@]}" \
  2>&1 | tee "$log" || rc=$?
phase_done tests

summary=$(grep -E '^[0-9]+% tests passed, [0-9]+ tests? failed out of [0-9]+' "$log" | tail -1 || true)
total=$(sed -E 's/.* out of ([0-9]+).*/\1/' <<<"$summary")
failed=$(sed -E 's/.*passed, ([0-9]+) tests? failed.*/\1/' <<<"$summary")
if [ -z "$summary" ]; then total=0; failed=0; fi
times=$(printf '%s, ' "${phase_times[@]}")
echo "$prog: wall time: ${times}total $(($(now) - begin)) s"
echo "$((total - failed)) passed, $failed failed"
[ "$total" -gt 0 ] || { echo "$prog: no test ran" >&2; exit 1; }
[ "$rc" -eq 0 ] && [ "$failed" -eq 0 ] || exit 1
