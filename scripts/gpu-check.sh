#!/usr/bin/env bash
# gpu-check.sh - the GPU acceptance run on a lent GPU machine: build with
# CUDA, run every CUDA test, compare the whole model with the CPU, train ds2
# and the mini corpus on the GPU, memcheck a short run; one results file.
# See usage(). Runs from the checkout root, as root, without network.
# No `set -e`/`-u`: a failing command or an unset variable ends its part,
# never the run (every part must run and be recorded).
set -o pipefail
export LC_ALL=C

prog=${0##*/}
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo" || exit 1
ALL_PARTS="env libs build tests model ds2 precision bench mini memcheck"

usage() {
  cat <<EOF
Usage: scripts/$prog [--parts LIST] [--help]

On a machine with an NVIDIA GPU, CUDA (nvcc), CMake and gcc, after
scripts/gpu-bundle.sh has been run where the checkout was made (its
.gpu-bundle.tar.xz travels with the checkout, or .gpu-bundle/ is there):

  env       the bundle's env.sh (unpacked from .gpu-bundle.tar.xz if needed);
            GPU name, driver, memory, compute capability; nvcc, CMake, gcc
  libs      cuDNN, NCCL and CUPTI: /usr/local/cuda (and /usr) first, else the
            pip packages of python3 (nvidia-cudnn-cu13, nvidia-nccl-cu13,
            nvidia-cuda-cupti), else (CUPTI only) the bundle's copy of the
            toolkit's where the bundle was made; unversioned .so links made
            where only libX.so.N exists
  build     a fresh build-gpu: -DDSTRAIN_CUDA_ARCHS=<this GPU only> and the
            cuDNN/NCCL/CUPTI paths above, all cores; fails without the
            CUDA backend or without its kernel profile (CUPTI)
  tests     ctest: every test labelled cuda and every test whose name has
            "gpu" (but model_gpu_vs_cpu*), --output-on-failure; a skipped
            test fails the part (a GPU is there: nothing may skip)
  model     ctest model_gpu_vs_cpu* (the whole model, GPU against CPU);
            "not found" (a failure) when the build has no such test
  ds2       dstrain train --model ds2 --synthetic --device cuda --precision
            fp32 --steps 200 --batch 32: first/last loss, ms/step, utt/s, memory
  precision ds2 on synthetic data, 30 steps at batch 32 and 64 in fp32, fp16
            and bf16: median ms/step of the steps after the 5th, and the
            fp16/fp32 and bf16/fp32 speedups; then the small preset 300 steps
            in fp16 and fp32 (same data and seed): fails unless fp16's mean
            loss over the last 20 steps is within 5% of fp32's
  mini      the mini corpus (data/make-mini-librispeech.sh with the bundle's
            espeak-ng and sox), prep train/dev, the small preset on the GPU for
            8 epochs (adamw, lr 1e-3, batch 8, seed 7): dev CER/WER before and
            after; fails unless CER falls below 0.75 x untrained
  memcheck  compute-sanitizer --tool memcheck --error-exitcode 1 on 5 steps
            of the tiny preset

Every part runs even when an earlier one failed, each under a timeout
(timeout(1)) inside a total budget. Results: one markdown table
bench/results/gpu-check-<UTC date>-<gpu>.md (part, pass/fail, figures,
seconds; the tests one by one; GPU, driver, CUDA, cuDNN, NCCL, git revision,
the command), copied with the full log to \$OUT when that is set. Exit 1 if
any part run now failed, 0 otherwise.

--parts LIST  run only these parts (comma-separated, from: ${ALL_PARTS// /,});
              env and libs always run. The results of earlier calls on the
              same build-gpu are kept in the table, so a run longer than one
              device call can be split:
                scripts/$prog --parts build,tests,model
                scripts/$prog --parts ds2,precision,bench
                scripts/$prog --parts mini,memcheck
              (build clears the earlier results: they were another build's)

Environment:
  GPU_CHECK_BUDGET  seconds for the whole run (1140; 570 when \$OUT is set,
                    the device tool's 10-minute call); each part gets at most
                    its own cap and leaves 30 s for every part after it
  GPU_CHECK_JOBS    ctest -j for the tests part (4)
  GPU_CHECK_ARCH    the sm_XX to build for instead of this GPU's (a dry run
                    on a machine without one: GPU_CHECK_ARCH=90)
  DSTRAIN_GIT_REV   the revision to record where the checkout has no .git
  OUT               a folder for a copy of the results and the full log
EOF
}

# ---- arguments ----------------------------------------------------------------------
parts=$ALL_PARTS
while [ $# -gt 0 ]; do
  case $1 in
    -h|--help) usage; exit 0 ;;
    --parts) [ $# -ge 2 ] || { usage >&2; exit 2; }; parts="env libs ${2//,/ }"; shift 2 ;;
    --parts=*) parts="env libs $(tr , ' ' <<<"${1#--parts=}")"; shift ;;
    *) echo "$prog: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
  esac
done
for p in $parts; do
  [[ " $ALL_PARTS " == *" $p "* ]] || { echo "$prog: unknown part '$p' (parts: $ALL_PARTS)" >&2; exit 2; }
done
wants() { [[ " $parts " == *" $1 "* ]]; }

build=$repo/build-gpu
work=$build/gpu-check                 # logs, the part table, corpus, runs
state=$work/parts.tsv                 # PART<TAB>RESULT<TAB>SECONDS<TAB>FIGURES
tests_tsv=$work/tests.tsv             # TEST<TAB>RESULT<TAB>SECONDS
info=$work/info.txt                   # KEY<TAB>VALUE: machine and library versions
log=$work/gpu-check.log
budget=${GPU_CHECK_BUDGET:-$([ -n "${OUT:-}" ] && echo 570 || echo 1140)}
start=$SECONDS
command_line="scripts/$prog${*:+ $*}"
[ "$parts" = "$ALL_PARTS" ] || command_line="scripts/$prog --parts $(tr ' ' , <<<"$parts")"

# "build" starts from nothing: a fresh build folder, no results of another build.
if wants build; then rm -rf "$build"; fi
mkdir -p "$work"
touch "$state" "$tests_tsv" "$info"
exec > >(tee -a "$log") 2>&1
echo "== $prog: $(date -u '+%Y-%m-%d %H:%M:%S UTC'), parts: $parts, budget ${budget}s"

# ---- bookkeeping -----------------------------------------------------------------------
failed_now=0
set_info() { grep -v "^$1	" "$info" >"$info.tmp"; printf '%s\t%s\n' "$1" "$2" >>"$info.tmp"; mv "$info.tmp" "$info"; }
get_info() { awk -F '\t' -v k="$1" '$1 == k { print $2 }' "$info"; }

# run_part NAME CAP FUNCTION: runs FUNCTION with $deadline set (CAP seconds,
# less if the budget must keep 30 s for each later part), records
# "pass"/"fail", the seconds and the figures the function left in $fig.
run_part() {
  local name=$1 cap=$2 fn=$3 later p left t0 rc
  # the parts still to come in this run
  later=$(for p in $ALL_PARTS; do echo "$p"; done | sed -n "/^$name\$/,\$p" | tail -n +2 |
          while read -r p; do wants "$p" && echo x; done | wc -l)
  left=$((budget - (SECONDS - start) - 30 * later))
  [ "$left" -lt "$cap" ] && cap=$left
  [ "$cap" -lt 10 ] && cap=10
  deadline=$((SECONDS + cap))
  fig=""
  echo
  echo "== part $name (at most ${cap}s)"
  t0=$SECONDS
  "$fn"; rc=$?
  local result=pass
  [ $rc -eq 0 ] || { result=fail; failed_now=1; }
  echo "== part $name: $result ($((SECONDS - t0))s) $fig"
  grep -v "^$name	" "$state" >"$state.tmp"
  printf '%s\t%s\t%s\t%s\n' "$name" "$result" "$((SECONDS - t0))" "${fig//	/ }" >>"$state.tmp"
  mv "$state.tmp" "$state"
}
# left: seconds until this part's deadline (at least 5), for `timeout`
left() { local l=$((deadline - SECONDS)); [ $l -lt 5 ] && l=5; echo $l; }
# timed_out RC: the command hit its timeout (124; 137 after the KILL that
# follows 10 s later). timeout(1) signals the whole process group, so the
# tests and ranks a command started end with it.
timed_out() { [ "$1" -eq 124 ] || [ "$1" -eq 137 ]; }
have_build() { [ -x "$build/dstrain" ] || { fig="no build-gpu/dstrain (the build part failed or did not run)"; return 1; }; }

# ---- env: the bundle, the GPU, the toolchain ---------------------------------------------
# The bundle comes as .gpu-bundle.tar.xz (what the device tool carries). It
# is unpacked next to it unless .gpu-bundle/ already holds this very archive
# (its .archive stamp: size and time, written here and by gpu-bundle.sh).
load_bundle() {
  local dir=$repo/.gpu-bundle archive=$repo/.gpu-bundle.tar.xz tmp stamp
  if [ -f "$archive" ]; then
    stamp=$(stat -c '%s %Y' "$archive")
    if [ ! -f "$dir/env.sh" ] || [ "$(cat "$dir/.archive" 2>/dev/null)" != "$stamp" ]; then
      echo "unpacking $archive"
      tmp=$repo/.gpu-bundle.unpack.$$
      rm -rf "$tmp"; mkdir -p "$tmp"
      if tar -C "$tmp" -xJf "$archive" 2>/dev/null ||
         python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$archive" "$tmp"; then
        rm -rf "$dir"; mv "$tmp/.gpu-bundle" "$dir"; echo "$stamp" >"$dir/.archive"
      else
        echo "cannot unpack $archive (tar -xJ and python3's tarfile both failed)"
      fi
      rm -rf "$tmp"
    fi
  fi
  if [ ! -f "$dir/env.sh" ]; then
    echo "no GPU bundle: neither .gpu-bundle/env.sh nor .gpu-bundle.tar.xz in $repo." \
         "Make it with scripts/gpu-bundle.sh (on Debian 12) and carry .gpu-bundle.tar.xz."
    return 1
  fi
  # shellcheck source=/dev/null
  source "$dir/env.sh"
  echo "bundle: $DSTRAIN_BUNDLE ($(wc -l <"$dir/PACKAGES.txt") Debian packages)"
}

part_env() {
  local ok=0 q name drv mem cc
  load_bundle || { ok=1; fig="bundle missing (scripts/gpu-bundle.sh); "; }
  [ -d /usr/local/cuda/bin ] && [[ ":$PATH:" != *":/usr/local/cuda/bin:"* ]] && PATH=$PATH:/usr/local/cuda/bin
  if q=$(timeout -k 10 "$(left)" nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap \
           --format=csv,noheader 2>&1 | head -1) && [ -n "$q" ] && [[ $q != *"failed"* ]]; then
    IFS=, read -r name drv mem cc <<<"$q"
    name=$(echo $name) drv=$(echo $drv) mem=$(echo $mem) cc=$(echo $cc)
  else
    echo "nvidia-smi: ${q:-not found}"; ok=1
  fi
  # compute capability from torch when this nvidia-smi lacks compute_cap
  if [[ ! ${cc:-} =~ ^[0-9]+\.[0-9]+$ ]]; then
    cc=$(timeout 60 python3 -c 'import torch; print("%d.%d" % torch.cuda.get_device_capability())' 2>/dev/null)
  fi
  set_info gpu "${name:-unknown}"; set_info driver "${drv:-unknown}"; set_info gpu_memory "${mem:-unknown}"
  set_info compute_capability "${cc:-unknown}"
  if [[ ${cc:-} =~ ^[0-9]+\.[0-9]+$ ]]; then set_info arch "${cc/./}"; else set_info arch native; ok=1; fi
  set_info nvcc "$(nvcc --version 2>/dev/null | sed -n 's/.*release \([0-9.]*\).*/\1/p' | head -1)"
  set_info cuda_driver_api "$(nvidia-smi 2>/dev/null | sed -n 's/.*CUDA Version: *\([0-9.]*\).*/\1/p' | head -1)"
  set_info cmake "$(cmake --version 2>/dev/null | head -1 | awk '{ print $3 }')"
  set_info gcc "$(gcc -dumpfullversion 2>/dev/null)"
  set_info os "$(. /etc/os-release 2>/dev/null; echo "${PRETTY_NAME:-unknown}")"
  set_info cpus "$(nproc)"
  set_info git "$(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo "${DSTRAIN_GIT_REV:-unknown (no .git; set DSTRAIN_GIT_REV)}")"
  command -v nvcc >/dev/null || { echo "nvcc not found (PATH, /usr/local/cuda/bin)"; ok=1; }
  fig+="${name:-no GPU}, driver ${drv:-?}, ${mem:-?}, compute ${cc:-?}; nvcc $(get_info nvcc)"
  return $ok
}

# ---- libs: cuDNN and NCCL ---------------------------------------------------------------
# find_lib NAME HEADER: sets ${NAME}_inc/_lib/_how. The CUDA toolkit and the
# system first, then the pip packages of python3 (nvidia/*/include, lib).
find_lib() {
  local name=$1 header=$2 d inc="" lib="" how="" py_dirs
  for d in /usr/local/cuda/include /usr/local/cuda/targets/x86_64-linux/include /usr/include \
           /usr/include/x86_64-linux-gnu /usr/local/cuda/extras/CUPTI/include; do
    [ -f "$d/$header" ] && { inc=$d; break; }
  done
  if [ -n "$inc" ]; then
    for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/lib/x86_64-linux-gnu \
             /usr/local/cuda/extras/CUPTI/lib64; do
      ls "$d"/lib"$name".so* >/dev/null 2>&1 && { lib=$d; how=system; break; }
    done
  fi
  if [ -z "$lib" ]; then
    # pip: nvidia is a namespace package (no __file__): search its folders
    py_dirs=$(timeout 60 python3 -c 'import nvidia; print("\n".join(nvidia.__path__))' 2>/dev/null)
    inc=$(for d in $py_dirs; do find "$d" -maxdepth 4 -name "$header" -printf '%h\n' 2>/dev/null; done | head -1)
    lib=$(for d in $py_dirs; do find "$d" -maxdepth 4 -name "lib$name.so*" -printf '%h\n' 2>/dev/null; done | head -1)
    how="pip ($(python3 -c 'import sys; print(sys.executable)' 2>/dev/null))"
  fi
  printf -v "${name}_inc" '%s' "$inc"; printf -v "${name}_lib" '%s' "$lib"; printf -v "${name}_how" '%s' "$how"
  [ -n "$inc" ] && [ -n "$lib" ]
}
# header_version FILE PREFIX: "MAJOR.MINOR.PATCH" from #defines
header_version() {
  awk -v p="$2" '$1 == "#define" && $2 ~ "^" p "(MAJOR|MINOR|PATCH|PATCHLEVEL)$" { v[$2] = $3 }
    END { printf "%s.%s.%s", v[p "MAJOR"], v[p "MINOR"], (p "PATCH") in v ? v[p "PATCH"] : v[p "PATCHLEVEL"] }' "$1"
}
# link_unversioned NAME DIR: the path of libNAME.so, made as a link in
# $work/links when DIR has only libNAME.so.N (as pip's packages do).
link_unversioned() {
  local name=$1 dir=$2 real
  if [ -e "$dir/lib$name.so" ]; then echo "$dir/lib$name.so"; return; fi
  real=$(ls "$dir"/lib"$name".so.[0-9]* 2>/dev/null | sort -V | head -1)
  [ -n "$real" ] || return 1
  mkdir -p "$work/links"
  ln -sfn "$real" "$work/links/lib$name.so"
  echo "$work/links/lib$name.so"
}

# bundle_cupti: sets cupti_inc/_lib/_how to the GPU bundle's CUPTI, when it has one
bundle_cupti() {
  [ -n "${DSTRAIN_BUNDLE_CUPTI:-}" ] && [ -f "$DSTRAIN_BUNDLE_CUPTI/include/cupti.h" ] || return 1
  cupti_inc=$DSTRAIN_BUNDLE_CUPTI/include
  cupti_lib=$DSTRAIN_BUNDLE_CUPTI/lib
  cupti_how="the GPU bundle's: $(cat "$DSTRAIN_BUNDLE_CUPTI/VERSION" 2>/dev/null || echo "version unknown")"
}

# shellcheck disable=SC2154  # cudnn_inc/_lib/_how, nccl_*, cupti_*: set by find_lib (printf -v)
part_libs() {
  local ok=0
  cmake_libs=()
  if find_lib cudnn cudnn_version.h; then
    cudnn_so=$(link_unversioned cudnn "$cudnn_lib")
    set_info cudnn "$(header_version "$cudnn_inc/cudnn_version.h" CUDNN_) ($cudnn_how: $cudnn_lib)"
    cmake_libs+=(-DCUDNN_INCLUDE_DIR="$cudnn_inc" -DCUDNN_LIBRARY="$cudnn_so")
    export LD_LIBRARY_PATH=$cudnn_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  else
    set_info cudnn "not found"; ok=1
  fi
  if find_lib nccl nccl.h; then
    nccl_so=$(link_unversioned nccl "$nccl_lib")
    set_info nccl "$(header_version "$nccl_inc/nccl.h" NCCL_) ($nccl_how: $nccl_lib)"
    cmake_libs+=(-DNCCL_INCLUDE_DIR="$nccl_inc" -DNCCL_LIBRARY="$nccl_so")
    [ "$nccl_lib" = "${cudnn_lib:-}" ] || export LD_LIBRARY_PATH=$nccl_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  else
    set_info nccl "not found"; ok=1
  fi
  # CUPTI (the kernel profile): the machine's, else the bundle's (gpu-bundle.sh, add_cupti)
  if find_lib cupti cupti.h || bundle_cupti; then
    cupti_so=$(link_unversioned cupti "$cupti_lib")
    set_info cupti "API $(awk '$2 == "CUPTI_API_VERSION" { print $3 }' "$cupti_inc/cupti_version.h") ($cupti_how: $cupti_lib)"
    cmake_libs+=(-DCUPTI_INCLUDE_DIR="$cupti_inc" -DCUPTI_LIBRARY="$cupti_so")
    export LD_LIBRARY_PATH=$cupti_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  else
    set_info cupti "not found"; ok=1
  fi
  # the peer checks need a python with torch, numpy and h5py: the image's
  set_info python "$(command -v python3) $(python3 -c 'import torch, numpy, h5py; print("torch", torch.__version__, "numpy", numpy.__version__, "h5py", h5py.__version__)' 2>&1 | tail -1)"
  printf '%s\n' "${cmake_libs[@]}" >"$work/cmake-libs.txt"
  fig="cuDNN $(get_info cudnn); NCCL $(get_info nccl); CUPTI $(get_info cupti)"
  return $ok
}

# ---- build ----------------------------------------------------------------------------------
# CMake runs with the bundle's wrappers (DSTRAIN_BUNDLE_CMAKE_ARGS) and the
# cuDNN/NCCL paths; ninja when the image has it.
part_build() {
  local gen=() rc arch
  arch=${GPU_CHECK_ARCH:-$(get_info arch)}
  command -v ninja >/dev/null && gen=(-G Ninja)
  mapfile -t cmake_libs <"$work/cmake-libs.txt"
  # shellcheck disable=SC2086  # DSTRAIN_BUNDLE_CMAKE_ARGS is a list of -D options
  timeout -k 10 "$(left)" cmake -S "$repo" -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DDSTRAIN_CUDA=ON -DDSTRAIN_CUDA_ARCHS="$arch" "${cmake_libs[@]}" \
    -DDSTRAIN_PEER_PYTHON="$(command -v python3)" ${DSTRAIN_BUNDLE_CMAKE_ARGS:-} >"$work/configure.log" 2>&1
  rc=$?
  grep -E '^-- (dstrain|Found (MPI|HDF5|BLAS|CUDAToolkit))' "$work/configure.log"
  if [ $rc -ne 0 ]; then
    tail -40 "$work/configure.log"; fig="configure failed (build-gpu/gpu-check/configure.log)"; return 1
  fi
  set_info configure "$(grep -o 'dstrain: CUDA toolkit.*' "$work/configure.log")"
  grep -q 'CUDA backend ON' "$work/configure.log" ||
    { fig="configured without the CUDA backend: $(grep -o 'dstrain: CUDA toolkit.*' "$work/configure.log")"; return 1; }
  grep -q 'kernel profile ON' "$work/configure.log" ||
    { fig="configured without the kernel profile (CUPTI): $(grep -o 'dstrain: CUDA toolkit.*' "$work/configure.log")"; return 1; }
  timeout -k 10 "$(left)" cmake --build "$build" -j "$(nproc)" >"$work/build.log" 2>&1
  rc=$?
  if [ $rc -ne 0 ]; then
    grep -E 'error|In file included from' "$work/build.log" | head -30
    timed_out $rc && { fig="build timed out (build-gpu/gpu-check/build.log)"; return 1; }
    fig="build failed (build-gpu/gpu-check/build.log)"
    build_with_cpath
    return 1
  fi
  record_version
  fig="sm_$arch, ${gen[*]:-make} -j$(nproc), CUDA backend ON"
}
record_version() {
  "$build/dstrain" --version | tee "$work/version.txt"
  set_info dstrain_version "$(tr '\n' ';' <"$work/version.txt" | sed 's/;*$//; s/;/; /g')"
}
# build_with_cpath: a target that includes a header of a bundled library
# without that library's include folder builds on a machine that has the
# header in /usr/include, not here. The part has failed then; this second
# build, with the bundle's include folders on CPATH, only lets the later
# parts run.
build_with_cpath() {
  local missing
  missing=$(sed -nE 's/.*fatal error: ([^:]+): No such file or directory.*/\1/p' "$work/build.log" | sort -u)
  [ -n "$missing" ] && [ -n "${DSTRAIN_BUNDLE:-}" ] || return 0
  echo "headers not found: $missing; building again with the bundle's include folders on CPATH"
  CPATH=$DSTRAIN_BUNDLE/root/usr/include:$DSTRAIN_BUNDLE/root/usr/include/x86_64-linux-gnu/openblas-pthread \
    timeout -k 10 "$(left)" cmake --build "$build" -j "$(nproc)" >"$work/build-cpath.log" 2>&1 || return 0
  record_version
  fig+="; headers not found: $(echo $missing) (a target lacks that library's include folder: fix CMakeLists);"
  fig+=" built with CPATH=bundle includes so that the later parts could run"
}

# ---- tests ----------------------------------------------------------------------------------
# ctest_run NAME... : runs exactly these tests, records each one's result
# and seconds in $tests_tsv; "Skipped" is a failure here (a GPU is present).
ctest_run() {
  local regex rc
  regex="^($(printf '%s|' "$@" | sed 's/|$//'))\$"
  timeout -k 10 "$(left)" ctest --test-dir "$build" -R "$regex" --output-on-failure --timeout 600 \
    -j "${GPU_CHECK_JOBS:-4}" >"$work/ctest-$part_name.log" 2>&1
  rc=$?
  cat "$work/ctest-$part_name.log"
  local t res secs pass=0 fail=0 skip=0
  for t in "$@"; do
    read -r res secs < <(sed -nE "s/^ *[0-9]+\/[0-9]+ Test +#[0-9]+: $t \.+ *\**([A-Za-z]+)[^0-9]*([0-9.]+) sec.*/\1 \2/p" \
                          "$work/ctest-$part_name.log" | tail -1)
    case ${res:-} in
      Passed) pass=$((pass + 1)) ;;
      Skipped) skip=$((skip + 1)); res="skipped (fails here)" ;;
      "") fail=$((fail + 1)); res="did not run"; secs="" ;;
      *) fail=$((fail + 1)); res="failed ($res)" ;;
    esac
    grep -v "^$t	" "$tests_tsv" >"$tests_tsv.tmp"
    printf '%s\t%s\t%s\n' "$t" "$res" "${secs:-}" >>"$tests_tsv.tmp"; mv "$tests_tsv.tmp" "$tests_tsv"
  done
  fig="$pass passed, $fail failed, $skip skipped (of $#)"
  timed_out $rc && fig+="; ctest timed out"
  [ $fail -eq 0 ] && [ $skip -eq 0 ] && [ $rc -eq 0 ]
}
test_names() { ctest --test-dir "$build" -N "$@" 2>/dev/null | sed -nE 's/^ *Test +#[0-9]+: //p'; }

part_tests() {
  have_build || return 1
  local names
  part_name=tests
  names=$( { test_names -L '^cuda$'; test_names | grep -i gpu; } | grep -v '^model_gpu_vs_cpu' | sort -u)
  [ -n "$names" ] || { fig="no test labelled cuda or named *gpu*"; return 1; }
  # shellcheck disable=SC2086
  ctest_run $names
}

part_model() {
  have_build || return 1
  local names
  part_name=model
  names=$(test_names | grep '^model_gpu_vs_cpu' | sort)
  grep -qx model_gpu_vs_cpu <<<"$names" || { fig="model_gpu_vs_cpu: not found"; return 1; }
  # shellcheck disable=SC2086
  ctest_run $names
}

# ---- training runs ----------------------------------------------------------------------------
# why RC LOG: for a run that failed, its status and the last line it printed
why() { echo "exit $1: $(grep -v '^ *$' "$2" 2>/dev/null | tail -1 | cut -c1-300)"; }
# done_figures LOG: "loss A -> B, X ms/step, Y utt/s" from dstrain's closing
# line, and its memory line.
done_figures() {
  local d m
  d=$(grep '^done:' "$1" | tail -1 | sed -E 's/^done: [0-9]+ steps, //')
  m=$(grep -E '^[a-z]+ memory:' "$1" | tail -1)
  echo "${d:-no closing line}; ${m:-no memory line}"
}

part_ds2() {
  have_build || return 1
  local out=$work/ds2 rc
  mkdir -p "$out"
  timeout -k 10 "$(left)" "$build/dstrain" train --model ds2 --synthetic --device cuda --precision fp32 \
    --steps 200 --batch 32 --print-every 20 --log "$out/train.jsonl" 2>&1 | tee "$out/train.log"
  rc=${PIPESTATUS[0]}
  fig="$(done_figures "$out/train.log")"
  timed_out $rc && fig="timed out; $fig"
  [ "$rc" -eq 0 ] || fig="$(why "$rc" "$out/train.log"); $fig"
  [ "$rc" -eq 0 ] && grep -q '^done: 200 steps' "$out/train.log"
}

# median_ms LOG.jsonl: the median step_ms of the steps after the 5th (warm)
median_ms() {
  python3 - "$1" <<'PY' 2>/dev/null
import json, statistics, sys
ms = [json.loads(l)["step_ms"] for l in open(sys.argv[1]) if l.startswith('{"step"')][5:]
print(f"{statistics.median(ms):.1f}" if ms else "")
PY
}
# tail_loss LOG.jsonl: the mean loss of the last 20 steps
tail_loss() {
  python3 -c 'import json, statistics, sys
L = [json.loads(l)["loss"] for l in open(sys.argv[1]) if l.startswith("{\"step\"")][-20:]
print(f"{statistics.mean(L):.4f}" if L else "")' "$1" 2>/dev/null
}

part_precision() {
  have_build || return 1
  local out=$work/precision p b rc ok=1 ms f32 r16 rb16 figs="" l32 l16
  mkdir -p "$out"
  for b in 32 64; do
    f32=""
    for p in fp32 fp16 bf16; do
      timeout -k 10 "$(left)" "$build/dstrain" train --model ds2 --synthetic --device cuda --precision $p \
        --steps 30 --batch $b --print-every 0 --log "$out/ds2-$p-$b.jsonl" >"$out/ds2-$p-$b.log" 2>&1
      rc=$?
      ms=$(median_ms "$out/ds2-$p-$b.jsonl")
      [ "$rc" -eq 0 ] && [ -n "$ms" ] || { ok=0; ms="failed ($(why "$rc" "$out/ds2-$p-$b.log"))"; }
      [ "$p" = fp32 ] && f32=$ms
      figs="$figs ds2 b$b $p ${ms} ms;"
    done
    r16=$(awk -v a="$f32" -v b="$(median_ms "$out/ds2-fp16-$b.jsonl")" 'BEGIN { if (a > 0 && b > 0) printf "%.2f", a / b }')
    rb16=$(awk -v a="$f32" -v b="$(median_ms "$out/ds2-bf16-$b.jsonl")" 'BEGIN { if (a > 0 && b > 0) printf "%.2f", a / b }')
    figs="$figs b$b fp16/fp32 speedup ${r16:-?}x, bf16 ${rb16:-?}x;"
  done
  for p in fp32 fp16; do
    timeout -k 10 "$(left)" "$build/dstrain" train --model small --synthetic --device cuda --precision $p \
      --steps 300 --batch 16 --seed 4 --print-every 0 --log "$out/small-$p.jsonl" >"$out/small-$p.log" 2>&1 || ok=0
  done
  l32=$(tail_loss "$out/small-fp32.jsonl"); l16=$(tail_loss "$out/small-fp16.jsonl")
  figs="$figs small 300 steps: loss fp32 ${l32:-?}, fp16 ${l16:-?}"
  fig=${figs# }
  [ "$ok" -eq 1 ] && [ -n "$l32" ] && [ -n "$l16" ] &&
    awk -v a="$l32" -v b="$l16" 'BEGIN { d = b - a; if (d < 0) d = -d; exit !(d <= 0.05 * a) }'
}

# dstrain bench on ds2 (LibriSpeech-like lengths): the batch sweep in fp32,
# fp16 and bf16, train and forward; the per-layer and per-kernel profiles of
# fp16 at batch 32 with a trace; the PyTorch peer (eager fp32, AMP,
# torch.compile) at batch 32 where the machine's python has CUDA torch; and
# the plots. Everything lands in $OUT/bench/ (commit it under bench/results/).
part_bench() {
  have_build || return 1
  local out=${OUT:-$work}/bench bin=$build/dstrain rc ok=1 figs
  mkdir -p "$out"
  timeout -k 10 "$(left)" "$bin" bench --model ds2 --device cuda --length-dist librispeech \
    --batch 8,16,32,64 --precision fp32,fp16,bf16 --mode train,forward --warmup 5 --steps 20 \
    --out "$out/ds2-sweep.json" --csv "$out/ds2-sweep.csv" >"$out/ds2-sweep.txt" 2>&1 || ok=0
  timeout -k 10 "$(left)" "$bin" bench --model ds2 --device cuda --length-dist librispeech \
    --batch 32 --precision fp16 --warmup 5 --steps 10 --profile kernels --trace "$out/ds2-fp16-b32-trace.json" \
    --out "$out/ds2-profile.json" >"$out/ds2-profile.txt" 2>&1 || ok=0
  if python3 -c 'import torch, sys; sys.exit(not torch.cuda.is_available())' 2>/dev/null; then
    timeout -k 10 "$(left)" python3 "$repo/bench/pytorch_ds2.py" --model ds2 --device cuda \
      --length-dist librispeech --batch 32 --impl eager,amp,compile \
      --warmup 5 --steps 20 --out "$out/ds2-torch.json" >"$out/ds2-torch.txt" 2>&1 || ok=0
    python3 "$repo/bench/compare" "$out/ds2-sweep.json" "$out/ds2-torch.json" >"$out/compare.txt" 2>&1 || true
  else
    echo "no CUDA PyTorch on this machine: the peer comparison did not run" >"$out/compare.txt"
  fi
  python3 "$repo/bench/plot" "$out/ds2-sweep.json" "$out/ds2-profile.json" --out "$out" >"$out/plot.txt" 2>&1 || true
  figs=$(python3 - "$out/ds2-sweep.json" <<'PY' 2>/dev/null
import json, sys
r = [x for x in json.load(open(sys.argv[1]))["results"] if x["mode"] == "train" and x["batch"] == 32]
print("; ".join(f"ds2 b32 {x['precision']} {x.get('samples_per_s', 0):.1f} utt/s ({x['status']})" for x in r))
PY
)
  fig="${figs:-no sweep results}; files in bench/"
  [ "$ok" -eq 1 ] && [ -n "$figs" ]
}

# The mini corpus at its default size, the small preset trained on the GPU
# (seed 7, batch 8, adamw at 1e-3, 8 epochs); dev CER of the untrained model
# (one step at learning rate 0; `dstrain eval` runs on the CPU) against the
# trained one's last validation.
part_mini() {
  have_build || return 1
  local out=$work/mini corpus=$work/mini/corpus rc bin=$build/dstrain s before after wer
  mkdir -p "$out"
  if [ ! -f "$corpus/.complete" ]; then
    timeout -k 10 "$(left)" bash "$repo/data/make-mini-librispeech.sh" "$corpus" >"$out/corpus.log" 2>&1 &&
      touch "$corpus/.complete" || { tail -5 "$out/corpus.log"; fig="making the mini corpus failed (espeak-ng/sox from the bundle?)"; return 1; }
  fi
  for s in train dev; do
    timeout -k 10 "$(left)" "$bin" prep librispeech "$corpus/$s" --out "$out/$s.h5" --quiet >"$out/prep-$s.log" 2>&1 ||
      { tail -5 "$out/prep-$s.log"; fig="prep $s failed"; return 1; }
  done
  local common=(--model small --device cuda --train "$out/train.h5" --val "$out/dev.h5" --batch 8 --seed 7
                --optimizer adamw --lr 1e-3 --print-every 0)
  rm -rf "$out/untrained" "$out/ckpt"
  timeout -k 10 "$(left)" "$bin" train "${common[@]}" --steps 1 --lr 0 --checkpoint-dir "$out/untrained" >"$out/untrained.log" 2>&1 &&
    before=$(timeout -k 10 "$(left)" "$bin" eval --checkpoint "$out/untrained/step-00000001.h5" --data "$out/dev.h5" 2>/dev/null |
             sed -nE 's/^WER ([0-9.]+) +CER ([0-9.]+).*/\2/p')
  timeout -k 10 "$(left)" "$bin" train "${common[@]}" --epochs 8 --checkpoint-dir "$out/ckpt" --log "$out/train.jsonl" \
    2>&1 | tee "$out/train.log" | grep -E '^(epoch|validation|done)'
  rc=${PIPESTATUS[0]}
  after=$(grep '^validation:' "$out/train.log" | tail -1 | sed -nE 's/.*CER ([0-9.]+).*/\1/p')
  wer=$(grep '^validation:' "$out/train.log" | tail -1 | sed -nE 's/.*WER ([0-9.]+).*/\1/p')
  fig="$(done_figures "$out/train.log" | cut -d';' -f1); dev CER ${before:-?} untrained -> ${after:-?}, WER ${wer:-?} (8 epochs)"
  timed_out $rc && fig="timed out; $fig"
  [ "$rc" -eq 0 ] || fig="$(why "$rc" "$out/train.log"); $fig"
  [ -n "${before:-}" ] || fig="untrained run or eval failed ($(why 1 "$out/untrained.log")); $fig"
  [ $rc -eq 0 ] && [ -n "${before:-}" ] && [ -n "${after:-}" ] &&
    awk -v a="$after" -v b="$before" 'BEGIN { exit !(a < 0.75 * b) }'
}

part_memcheck() {
  have_build || return 1
  local cs rc out=$work/memcheck.log
  cs=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer /usr/local/cuda/compute-sanitizer/compute-sanitizer 2>/dev/null | head -1)
  [ -n "$cs" ] || { fig="compute-sanitizer not found"; return 1; }
  timeout -k 10 "$(left)" "$cs" --tool memcheck --error-exitcode 1 "$build/dstrain" train --model tiny --synthetic \
    --device cuda --steps 5 --batch 4 --print-every 0 >"$out" 2>&1
  rc=$?
  tail -15 "$out"
  fig="$(grep -m1 'ERROR SUMMARY' "$out" | sed 's/^=* *//')"
  timed_out $rc && fig="timed out; ${fig}"
  [ -n "$fig" ] || fig="$(why "$rc" "$out")"
  [ $rc -eq 0 ] && grep -q 'ERROR SUMMARY: 0 errors' "$out"
}

# ---- the results file ----------------------------------------------------------------------------
write_results() {
  local short day file p row title
  short=$(get_info gpu | tr 'A-Z' 'a-z' | sed 's/nvidia//' | grep -oE '[a-z]+[0-9]+[a-z]*' | head -1)
  day=$(date -u +%Y-%m-%d)
  mkdir -p "$repo/bench/results"
  file=$repo/bench/results/gpu-check-$day-${short:-gpu}.md
  {
    echo "# GPU check: $(get_info gpu), $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo
    echo "| part | result | figures | seconds |"
    echo "|---|---|---|---|"
    for p in $ALL_PARTS; do
      row=$(awk -F '\t' -v p="$p" '$1 == p' "$state")
      case $p in
        env) title="GPU, driver, toolchain, bundle" ;; libs) title="cuDNN and NCCL" ;;
        build) title="build-gpu (CUDA backend)" ;; tests) title="ctest -L cuda + *gpu*" ;;
        model) title="model_gpu_vs_cpu" ;; ds2) title="ds2 fp32, 200 steps, batch 32, synthetic" ;;
        precision) title="ds2 ms/step fp32/fp16/bf16 at batch 32, 64; small fp16 vs fp32, 300 steps" ;;
        bench) title="dstrain bench ds2: batch sweep, profiles, PyTorch peer" ;;
        mini) title="small on the mini corpus, 8 epochs" ;; memcheck) title="compute-sanitizer memcheck, tiny, 5 steps" ;;
      esac
      if [ -n "$row" ]; then
        awk -F '\t' -v t="$title" '{ printf "| %s: %s | %s | %s | %s |\n", $1, t, $2, $4, $3 }' <<<"$row"
      else
        echo "| $p: $title | not run | | |"
      fi
    done
    if [ -s "$tests_tsv" ]; then
      echo
      echo "## Tests"
      echo
      echo "| test | result | seconds |"
      echo "|---|---|---|"
      sort "$tests_tsv" | awk -F '\t' '{ printf "| %s | %s | %s |\n", $1, $2, $3 }'
    fi
    echo
    echo "## Machine and build"
    echo
    awk -F '\t' '{ printf "- %s: %s\n", $1, $2 }' "$info"
    echo "- command: \`$command_line\` (from the checkout root; parts of earlier calls on the same build are kept)"
  } >"$file"
  echo
  cat "$file"
  echo "results: $file"
  results_file=$file
}
# copy_out: the results file and the full log to $OUT (the device tool's
# folder), last, so that the log is complete
copy_out() {
  [ -n "${OUT:-}" ] && [ -d "${OUT:-}" ] || return 0
  echo "copying to $OUT: ${results_file##*/}, gpu-check.log"
  sleep 1   # let tee write the last lines
  cp "$results_file" "$OUT/" && cp "$log" "$OUT/gpu-check.log"
}

# ---- main ---------------------------------------------------------------------------------------------
wants build && : >"$state" && : >"$tests_tsv"
run_part env 60 part_env
run_part libs 60 part_libs
wants build && run_part build 480 part_build
wants tests && run_part tests 420 part_tests
wants model && run_part model 300 part_model
wants ds2 && run_part ds2 240 part_ds2
wants precision && run_part precision 300 part_precision
wants bench && run_part bench 480 part_bench
wants mini && run_part mini 300 part_mini
wants memcheck && run_part memcheck 180 part_memcheck
write_results
echo "== $prog: $((SECONDS - start))s, $([ $failed_now -eq 0 ] && echo "every part run now passed" || echo "a part failed")"
copy_out
exit $failed_now
