#!/usr/bin/env bash
# gpu-check.sh - the GPU acceptance run on a lent GPU machine, sized for its
# short lease: a first profile that answers the main questions in one
# 10-minute device call (build, every 1-GPU correctness test, a ds2 timing
# beside PyTorch), a second for what is left (bench sweep, kernel profile,
# fp16 convergence, the mini corpus, memcheck, multi-GPU tests). See usage().
# Runs from the checkout root, as root, without network.
# No `set -e`/`-u`: a failing command or an unset variable ends its part,
# never the run (every part must run and be recorded).
set -o pipefail
export LC_ALL=C

prog=${0##*/}
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo" || exit 1

# Parts in order of priority, and each part's cap in seconds. A profile's
# caps add up to no more than its budget (tests/gpu/gpu_check_dry.sh checks).
FIRST_PARTS="env libs build tests timing peer f16"
SECOND_PARTS="env libs build precision sweep families kernels mini memcheck multi"
ALL_PARTS="env libs build tests timing peer f16 precision sweep families kernels mini memcheck multi"
# multi: on one GPU (the usual lent machine) it records "not run" in a second;
# on a machine with several, run --parts multi with its own budget
declare -A CAP=([env]=15 [libs]=20 [build]=60 [tests]=100 [timing]=190 [peer]=90 [f16]=65
                [precision]=75 [sweep]=70 [families]=60 [kernels]=60 [mini]=70 [memcheck]=50
                [multi]=20)
# the second profile's build is incremental when the first's build-gpu is there
CAP_SECOND_BUILD=90
BUDGET_DEFAULT=540
# Tests labelled cuda that the first profile leaves to the second: they are
# not 1-GPU correctness checks of the ops (fp16 convergence over 300 steps,
# the CUPTI kernel profile).
SECOND_TESTS="fp16_small_gpu test_profile_backend_cuda"

usage() {
  cat <<EOF
Usage: scripts/$prog --first|--second [--dry-run] [--parts LIST] [--help]

The GPU acceptance run. On the device tool's GPU machine (one H100 or H200,
16 cores, 15 minutes of machine time in all, at most 10 minutes a call,
handed back after 30 s idle), from the checkout root, two calls in order:

  1. DSTRAIN_GIT_REV=<git rev-parse --short HEAD, here> scripts/$prog --first
                               timeout_s 600; carry .gpu-bundle.tar.xz
  2. scripts/$prog --second    at once after it, on the still warm machine,
                               with the time left: GPU_CHECK_BUDGET=<that
                               minus 30> scripts/$prog --second, timeout_s
                               the time left; carry .gpu-bundle.tar.xz and
                               .gpu-data

Prepare both here first: scripts/gpu-bundle.sh (the libraries the machine
lacks: MPI, HDF5, OpenBLAS, FFTW, libsndfile, cJSON) and scripts/gpu-data.sh
(the mini corpus' features, made on this CPU; nothing that can run here runs
there). Together with the working tree they stay under the tool's 64 MiB.

--first (budget $BUDGET_DEFAULT s; parts in order of priority, each with its cap):
  env       ${CAP[env]} s  the bundle's env.sh (unpacked from .gpu-bundle.tar.xz);
            GPU name, driver, memory, compute capability, GPU count; nvcc,
            CMake, gcc
  libs      ${CAP[libs]} s  cuDNN, NCCL and CUPTI: /usr/local/cuda (and /usr) first,
            else python3's pip packages (nvidia-cudnn-cu13, nvidia-nccl-cu13,
            nvidia-cuda-cupti), else (CUPTI only) the bundle's copy; a missing
            CUPTI is recorded, not a failure
  build     ${CAP[build]} s  a fresh build-gpu for this GPU's architecture only
            (-DDSTRAIN_CUDA_ARCHS=XX), all cores; without CUPTI it goes on
            without the kernel profile
  tests     ${CAP[tests]} s  every 1-GPU correctness test: ctest -L cuda -LE multi-gpu,
            less $SECOND_TESTS (the unit *_cuda tests, parity
            float32/64/16/bf16, model_gpu_vs_cpu*, test_convert_cuda,
            nccl_one_rank, gpu_out_of_memory, data_parallel_gpu, ...);
            a skip fails here (a GPU is there)
  timing    ${CAP[timing]} s  dstrain bench ds2, LibriSpeech-like lengths, batch 32,
            train: fp32, fp16 three times (its spread run to run), fp32
            --tf32; the paths off by default on, each beside the default
            in the same call: --cuda-graphs --bucket-frames 32 (fp16),
            --rnn-algo auto (fp32, fp16), --bucket-frames 32 (fp16), both
            (fp16), all three (fp32, fp16); then fp32 and fp16 under --profile kernels (CUPTI:
            launches and kernel time per step); bench/step-anatomy: per
            configuration the step time, the host's enqueue time, the main
            thread's CPU share, kernel time and launches, host- or
            device-bound; the convolution algorithms chosen per layer
  peer      ${CAP[peer]} s  bench/pytorch_ds2.py, the same model, lengths and batch:
            eager fp32 and AMP; bench/compare against the timing, and
            step-anatomy again with issue 34's targets against AMP
  f16       ${CAP[f16]} s  tests/gpu/f16_switches.sh, float16: test_model_gpu_vs_cpu
            under each switch of the 16-bit gradient question (rnn or
            conv in FP32 inside the 16-bit model, sorted and equal
            lengths, cuDNN's default math, loss scale 1, 64, 16384,
            CUDA_LAUNCH_BLOCKING) beside the CPU's emulation: a table in
            f16-switches.md, not a verdict
--second (budget $BUDGET_DEFAULT s, or GPU_CHECK_BUDGET):
  env, libs as above; build ${CAP_SECOND_BUILD} s, incremental on the first's build-gpu
  precision ${CAP[precision]} s  tests/gpu/f16_switches.sh in bfloat16 and float16's
            compute-sanitizer initcheck; tests/gpu/model_variants.sh on cuda and cpu (a record in the logs),
            ctest fp16_small_gpu (small preset, fp16 and bf16 within 5%
            of fp32 after 300 steps)
  sweep     ${CAP[sweep]} s  dstrain bench ds2, train: batch 16,32,64, one call per
            precision (fp32, fp16, bf16); plots
  families  ${CAP[families]} s  the other families beside the sweep's ds2 at batch 32: dstrain
            bench jasper-10x3 and ds1, fp32 and fp16 (the study's FP32
            against mixed precision, convolutional against recurrent)
  kernels   ${CAP[kernels]} s  ctest test_profile_backend_cuda; bench --profile kernels
            (CUPTI) at batch 32 fp16 with a trace; skipped without CUPTI
  mini      ${CAP[mini]} s  the small preset trained on the GPU on the mini corpus'
            features from .gpu-data (made here by scripts/gpu-data.sh), as
            long as the CPU reference gpu-data.sh trained there: dev CER
            before and after; fails unless it falls below 0.9 x untrained
            and comes within $MINI_CER_MARGIN of the CPU reference's
  memcheck  ${CAP[memcheck]} s  compute-sanitizer --tool memcheck on 5 steps of tiny
  multi     ${CAP[multi]} s  the multi-gpu tests whose GPU count (label gpus-N) is
            at most the GPUs visible; none on one GPU (recorded as not run)

A part runs under timeout(1) with its cap, less when the budget has less
left; a part with under 15 s left is recorded "not run (budget spent)".
Every part runs even when an earlier one failed. After every part the
results table and the log are rewritten in \$OUT (when set; the device
tool's folder) and in build-gpu/gpu-check/, so a call stopped at its limit
still brings back every finished part. Files in \$OUT: the table
gpu-check-<UTC date>-<gpu>.md, gpu-check.log, logs.tar.gz (every part's
logs), ds2-timing.json and ds2-torch.json (first); ds2-profile.json and
bench.tar.gz (second: the sweep's JSON, CSV and plots, the trace). The table is also written to
bench/results/ in the checkout: commit it there with the figures. Exit 1 if
a part run now failed, else 0.

--dry-run     plan without a GPU: the parts, their caps and the budget, the
              tests selected (from the build folder's ctest list), and each
              part's command, recorded as "dry-run" with the same table
              written after every part; builds and runs nothing.
              GPU_CHECK_GPUS (1) is the GPU count it plans for,
              GPU_CHECK_ARCH (90) the architecture, GPU_CHECK_BUILD the
              build folder whose tests it lists (build-gpu, else build).
--parts LIST  run only these parts (comma-separated, from: ${ALL_PARTS// /,});
              env and libs always run.

Environment:
  GPU_CHECK_BUDGET  seconds for the whole run ($BUDGET_DEFAULT)
  GPU_CHECK_JOBS    ctest -j for the test parts (6)
  GPU_CHECK_ARCH    the sm_XX to build for instead of this GPU's
  GPU_CHECK_GPUS    the GPU count to plan for instead of nvidia-smi's
  DSTRAIN_GIT_REV   the revision to record where the checkout has no .git
  OUT               a folder for the results as they are made
EOF
}

# ---- arguments ----------------------------------------------------------------------
profile="" parts="" dry=0
while [ $# -gt 0 ]; do
  case $1 in
    -h|--help) usage; exit 0 ;;
    --first) profile=first; shift ;;
    --second) profile=second; shift ;;
    --dry-run) dry=1; shift ;;
    --parts) [ $# -ge 2 ] || { usage >&2; exit 2; }; parts="env libs ${2//,/ }"; shift 2 ;;
    --parts=*) parts="env libs $(tr , ' ' <<<"${1#--parts=}")"; shift ;;
    *) echo "$prog: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
  esac
done
if [ -z "$parts" ]; then
  case $profile in
    first) parts=$FIRST_PARTS ;;
    second) parts=$SECOND_PARTS ;;
    *) echo "$prog: say --first or --second (or --parts LIST)" >&2; usage >&2; exit 2 ;;
  esac
fi
for p in $parts; do
  [[ " $ALL_PARTS " == *" $p "* ]] || { echo "$prog: unknown part '$p' (parts: $ALL_PARTS)" >&2; exit 2; }
done
wants() { [[ " $parts " == *" $1 "* ]]; }
# the parts in priority order, each once
parts=$(for p in $ALL_PARTS; do wants "$p" && echo "$p"; done | tr '\n' ' ')
[ "$profile" = second ] && CAP[build]=$CAP_SECOND_BUILD

build=$repo/build-gpu
work=$build/gpu-check                 # logs, the part table, runs
[ "$dry" -eq 1 ] && work=${GPU_CHECK_WORK:-$repo/build-gpu-check-dry}
state=$work/parts.tsv                 # PART<TAB>RESULT<TAB>SECONDS<TAB>FIGURES
tests_tsv=$work/tests.tsv             # TEST<TAB>RESULT<TAB>SECONDS
info=$work/info.txt                   # KEY<TAB>VALUE: machine and library versions
log=$work/gpu-check.log
budget=${GPU_CHECK_BUDGET:-$BUDGET_DEFAULT}
[[ $budget =~ ^[0-9]+$ ]] || { echo "$prog: GPU_CHECK_BUDGET must be whole seconds, not '$budget'" >&2; exit 2; }
start=$SECONDS
command_line="scripts/$prog${profile:+ --$profile}"
[ "$dry" -eq 1 ] && command_line+=" --dry-run"
case " $FIRST_PARTS | $SECOND_PARTS " in
  *" ${parts% } |"* | *"| ${parts% } "*) ;;   # a whole profile
  *) command_line+=" --parts $(tr ' ' , <<<"${parts% }" | sed 's/,$//')" ;;
esac
[ -n "${GPU_CHECK_BUDGET:-}" ] && command_line="GPU_CHECK_BUDGET=$budget $command_line"
out_dir=${OUT:-}
[ -n "$out_dir" ] && { mkdir -p "$out_dir" || out_dir=""; }

# A first profile (or a fresh build) starts from nothing: a new build folder,
# no results of another build. The second keeps the first's.
fresh=0
{ [ "$profile" = first ] || { wants build && [ "$profile" != second ]; }; } && fresh=1
[ "$fresh" -eq 1 ] && [ "$dry" -eq 0 ] && rm -rf "$build"
[ "$dry" -eq 1 ] && rm -rf "$work"
mkdir -p "$work"
[ "$fresh" -eq 1 ] && : >"$state" && : >"$tests_tsv" && : >"$info"
touch "$state" "$tests_tsv" "$info"
# The log goes where a stopped call still brings it back: $OUT when set.
[ -n "$out_dir" ] && log=$out_dir/gpu-check.log
exec > >(tee -a "$log") 2>&1
tee_pid=$!
echo "== $prog: $(date -u '+%Y-%m-%d %H:%M:%S UTC'), ${profile:-custom} profile$([ "$dry" -eq 1 ] && echo ", dry run"), budget ${budget}s"

# The plan: each part's cap, their sum against the budget.
plan_total=0
plan_line=""
for p in $parts; do plan_total=$((plan_total + CAP[$p])); plan_line+=" $p ${CAP[$p]}"; done
echo "plan:$plan_line; caps total ${plan_total}s of a ${budget}s budget"

# ---- bookkeeping -----------------------------------------------------------------------
failed_now=0
set_info() { grep -v "^$1	" "$info" >"$info.tmp"; printf '%s\t%s\n' "$1" "$2" >>"$info.tmp"; mv "$info.tmp" "$info"; }
get_info() { awk -F '\t' -v k="$1" '$1 == k { print $2 }' "$info"; }
record() {   # record PART RESULT SECONDS FIGURES
  grep -v "^$1	" "$state" >"$state.tmp"
  printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "${4//	/ }" >>"$state.tmp"
  mv "$state.tmp" "$state"
}

# run_part NAME FUNCTION: runs FUNCTION with $deadline set (the part's cap,
# less if the budget has less left), records pass / fail / skipped (the
# function returned 77: nothing it could do here, said in $fig), the seconds
# and the figures the function left in $fig; then writes the results.
run_part() {
  local name=$1 fn=$2 cap=${CAP[$1]} left t0 rc result
  left=$((budget - $(elapsed)))
  [ "$left" -lt "$cap" ] && cap=$left
  echo
  if [ "$cap" -lt 15 ]; then
    echo "== part $name: not run (budget spent: ${left}s left of ${budget}s)"
    record "$name" "not run" 0 "budget spent (${left}s left of ${budget}s)"
    write_results
    return
  fi
  deadline=$((SECONDS + cap))
  fig=""
  echo "== part $name (at most ${cap}s)"
  t0=$SECONDS
  if [ "$dry" -eq 1 ]; then
    "dry_$fn"; rc=$?
    result=dry-run
  else
    "$fn"; rc=$?
    case $rc in 0) result=pass ;; 77) result=skipped ;; *) result=fail; failed_now=1 ;; esac
  fi
  [ "$dry" -eq 1 ] && dry_clock=$((dry_clock + cap))   # a dry part takes its whole cap
  echo "== part $name: $result ($((SECONDS - t0))s) $fig"
  record "$name" "$result" "$((SECONDS - t0))" "$fig"
  write_results
  if [ "$dry" -eq 1 ] && [ "${GPU_CHECK_DRY_STOP_AFTER:-}" = "$name" ]; then
    echo "== stopping here (GPU_CHECK_DRY_STOP_AFTER=$name): SIGKILL, as a call's limit would"
    sleep 0.2
    kill -9 $$
  fi
}
# elapsed: seconds of the budget used; a dry run counts every part as
# taking its whole cap, so that it shows what a budget leaves out
dry_clock=0
elapsed() { if [ "$dry" -eq 1 ]; then echo "$dry_clock"; else echo $((SECONDS - start)); fi; }
# left: seconds until this part's deadline (at least 5), for `timeout`
left() { local l=$((deadline - SECONDS)); [ $l -lt 5 ] && l=5; echo $l; }
# timed_out RC: the command hit its timeout (124; 137 after the KILL that
# follows 10 s later). timeout(1) signals the whole process group, so the
# tests and ranks a command started end with it.
timed_out() { [ "$1" -eq 124 ] || [ "$1" -eq 137 ]; }
have_build() { [ -x "$build/dstrain" ] || { fig="no build-gpu/dstrain (the build part failed or did not run)"; return 1; }; }
# the Python for the peer checks and the PyTorch timing: the first of these
# that imports torch, numpy and h5py (part libs settles it; the image's is
# /opt/torch/.venv/bin/python3, which PATH may not put first)
py=$(command -v python3 || echo /usr/bin/python3)
PY_CANDIDATES="/opt/torch/.venv/bin/python3 python3 /usr/bin/python3"

# ---- the bundle and the libraries' places -------------------------------------------------
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

# ---- where cuDNN, NCCL and CUPTI are ------------------------------------------------------
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
    py_dirs=$(timeout 60 "$py" -c 'import nvidia; print("\n".join(nvidia.__path__))' 2>/dev/null)
    inc=$(for d in $py_dirs; do find "$d" -maxdepth 4 -name "$header" -printf '%h\n' 2>/dev/null; done | head -1)
    lib=$(for d in $py_dirs; do find "$d" -maxdepth 4 -name "lib$name.so*" -printf '%h\n' 2>/dev/null; done | head -1)
    how="pip ($("$py" -c 'import sys; print(sys.executable)' 2>/dev/null))"
  fi
  printf -v "${name}_inc" '%s' "$inc"; printf -v "${name}_lib" '%s' "$lib"; printf -v "${name}_how" '%s' "$how"
  [ -n "$inc" ] && [ -n "$lib" ]
}
# add_lib_dir DIR: DIR on LD_LIBRARY_PATH, unless the loader searches it
# anyway (ld.so.conf, /lib, /usr/lib) or it is there already. A system folder
# on LD_LIBRARY_PATH would come before the bundle's and mix two builds: on
# Ubuntu 24.04, /usr/lib/x86_64-linux-gnu (cuDNN's) put that system's
# libopen-rte and libpmix under the bundle's mpiexec, which crashed, and
# gave PyTorch the system's cuDNN instead of its own.
add_lib_dir() {
  local dir=$1 d
  [ -n "$dir" ] || return 0
  for d in $(ldconfig -p 2>/dev/null | sed -n 's|.* => \(.*\)/[^/]*$|\1|p' | sort -u) /lib /usr/lib /lib64 /usr/lib64; do
    [ "$(realpath -m "$d")" = "$(realpath -m "$dir")" ] && return 0
  done
  [[ ":${LD_LIBRARY_PATH:-}:" == *":$dir:"* ]] && return 0
  export LD_LIBRARY_PATH=$dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
}
header_version() {
  awk -v p="$2" '$1 == "#define" && $2 ~ "^" p "(MAJOR|MINOR|PATCH|PATCHLEVEL)$" { v[$2] = $3 }
    END { printf "%s.%s.%s", v[p "MAJOR"], v[p "MINOR"], (p "PATCH") in v ? v[p "PATCH"] : v[p "PATCHLEVEL"] }' "$1"
}
link_unversioned() {
  local name=$1 dir=$2 real
  if [ -e "$dir/lib$name.so" ]; then echo "$dir/lib$name.so"; return; fi
  real=$(ls "$dir"/lib"$name".so.[0-9]* 2>/dev/null | sort -V | head -1)
  [ -n "$real" ] || return 1
  mkdir -p "$work/links"
  ln -sfn "$real" "$work/links/lib$name.so"
  echo "$work/links/lib$name.so"
}
bundle_cupti() {
  [ -n "${DSTRAIN_BUNDLE_CUPTI:-}" ] && [ -f "$DSTRAIN_BUNDLE_CUPTI/include/cupti.h" ] || return 1
  cupti_inc=$DSTRAIN_BUNDLE_CUPTI/include
  cupti_lib=$DSTRAIN_BUNDLE_CUPTI/lib
  cupti_how="the GPU bundle's: $(cat "$DSTRAIN_BUNDLE_CUPTI/VERSION" 2>/dev/null || echo "version unknown")"
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

# ---- env: the bundle, the GPU, the toolchain ---------------------------------------------
part_env() {
  local ok=0 q name drv mem cc n
  load_bundle || { ok=1; fig="bundle missing (scripts/gpu-bundle.sh); "; }
  [ -d /usr/local/cuda/bin ] && [[ ":$PATH:" != *":/usr/local/cuda/bin:"* ]] && PATH=$PATH:/usr/local/cuda/bin
  if q=$(timeout -k 10 "$(left)" nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap \
           --format=csv,noheader 2>&1) && [ -n "$q" ] && [[ $q != *"failed"* ]]; then
    n=$(grep -c . <<<"$q")
    IFS=, read -r name drv mem cc <<<"$(head -1 <<<"$q")"
    name=$(echo $name) drv=$(echo $drv) mem=$(echo $mem) cc=$(echo $cc)
  else
    echo "nvidia-smi: ${q:-not found}"; ok=1; n=0
  fi
  # compute capability from torch when this nvidia-smi lacks compute_cap
  if [[ ! ${cc:-} =~ ^[0-9]+\.[0-9]+$ ]]; then
    cc=$(timeout -k 5 "$(left)" "$py" -c 'import torch; print("%d.%d" % torch.cuda.get_device_capability())' 2>/dev/null)
  fi
  set_info gpu "${name:-unknown}"; set_info driver "${drv:-unknown}"; set_info gpu_memory "${mem:-unknown}"
  set_info compute_capability "${cc:-unknown}"
  set_info gpus "${GPU_CHECK_GPUS:-$n}"
  if [[ ${cc:-} =~ ^[0-9]+\.[0-9]+$ ]]; then set_info arch "${cc/./}"; else set_info arch native; ok=1; fi
  set_info nvcc "$(nvcc --version 2>/dev/null | sed -n 's/.*release \([0-9.]*\).*/\1/p' | head -1)"
  [ "${n:-0}" -gt 0 ] &&
    set_info cuda_driver_api "$(timeout -k 5 10 nvidia-smi 2>/dev/null | sed -n 's/.*CUDA Version: *\([0-9.]*\).*/\1/p' | head -1)"
  set_info cmake "$(cmake --version 2>/dev/null | head -1 | awk '{ print $3 }')"
  set_info gcc "$(gcc -dumpfullversion 2>/dev/null)"
  set_info os "$(. /etc/os-release 2>/dev/null; echo "${PRETTY_NAME:-unknown}")"
  set_info cpus "$(nproc)"
  # the host's CPU and clocks: a host-bound step (issue 34) moves with them
  set_info cpu_model "$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)"
  set_info cpu_mhz "now $(awk -F': ' '/^cpu MHz/ { s += $2; n++ } END { if (n) printf "%.0f (mean of %d)", s / n, n }' /proc/cpuinfo); max $(cat /sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq 2>/dev/null | awk '{ printf "%.0f", $1 / 1000 }')"
  set_info cpu_governor "$(cat /sys/devices/system/cpu/cpu0/cpufreq/scaling_governor 2>/dev/null || echo unknown)"
  # the bundle's Debian 12 libraries need a C library at least as new
  local glibc
  glibc=$(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{ print $2 }')
  set_info glibc "${glibc:-unknown} (the bundle needs ${DSTRAIN_BUNDLE_GLIBC:-?})"
  if [ -n "${DSTRAIN_BUNDLE_GLIBC:-}" ] && [ -n "$glibc" ] &&
     [ "$(printf '%s\n' "$glibc" "$DSTRAIN_BUNDLE_GLIBC" | sort -V | head -1)" != "$DSTRAIN_BUNDLE_GLIBC" ]; then
    echo "glibc $glibc here is older than the $DSTRAIN_BUNDLE_GLIBC the bundle's MPI, HDF5 and BLAS need:" \
         "configure and every MPI program will fail (make the bundle on a system no newer than this one)"
    ok=1; fig="glibc $glibc < bundle's $DSTRAIN_BUNDLE_GLIBC; "
  fi
  record_git
  command -v nvcc >/dev/null || { echo "nvcc not found (PATH, /usr/local/cuda/bin)"; ok=1; }
  fig+="${name:-no GPU} x${n}, driver ${drv:-?}, ${mem:-?}, compute ${cc:-?}; nvcc $(get_info nvcc)"
  return $ok
}
record_git() {
  # DSTRAIN_GIT_REV first: the device's copy of the tree may carry a .git
  # whose HEAD is older than the tree (seen on the first H100 runs)
  set_info git "${DSTRAIN_GIT_REV:-$(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo "unknown (no .git; set DSTRAIN_GIT_REV)")}"
}
dry_part_env() {
  set_info gpu "dry run (no GPU)"; set_info arch "${GPU_CHECK_ARCH:-90}"; set_info gpus "${GPU_CHECK_GPUS:-1}"
  record_git
  fig="would unpack .gpu-bundle.tar.xz, read nvidia-smi; planning for $(get_info gpus) GPU(s), sm_$(get_info arch)"
}

# ---- libs: cuDNN, NCCL, CUPTI ---------------------------------------------------------
# shellcheck disable=SC2154  # cudnn_inc/_lib/_how, nccl_*, cupti_*: set by find_lib (printf -v)
part_libs() {
  local ok=0
  cmake_libs=()
  if find_lib cudnn cudnn_version.h; then
    cudnn_so=$(link_unversioned cudnn "$cudnn_lib")
    set_info cudnn "$(header_version "$cudnn_inc/cudnn_version.h" CUDNN_) ($cudnn_how: $cudnn_lib)"
    cmake_libs+=(-DCUDNN_INCLUDE_DIR="$cudnn_inc" -DCUDNN_LIBRARY="$cudnn_so")
    add_lib_dir "$cudnn_lib"
  else
    set_info cudnn "not found"; ok=1
  fi
  if find_lib nccl nccl.h; then
    nccl_so=$(link_unversioned nccl "$nccl_lib")
    set_info nccl "$(header_version "$nccl_inc/nccl.h" NCCL_) ($nccl_how: $nccl_lib)"
    cmake_libs+=(-DNCCL_INCLUDE_DIR="$nccl_inc" -DNCCL_LIBRARY="$nccl_so")
    add_lib_dir "$nccl_lib"
  else
    set_info nccl "not found"; ok=1
  fi
  # CUPTI (the kernel profile): the machine's, else the bundle's; without it
  # the build goes on without the kernel profile (recorded here)
  if find_lib cupti cupti.h || bundle_cupti; then
    cupti_so=$(link_unversioned cupti "$cupti_lib")
    set_info cupti "API $(awk '$2 == "CUPTI_API_VERSION" { print $3 }' "$cupti_inc/cupti_version.h") ($cupti_how: $cupti_lib)"
    cmake_libs+=(-DCUPTI_INCLUDE_DIR="$cupti_inc" -DCUPTI_LIBRARY="$cupti_so")
    add_lib_dir "$cupti_lib"
  else
    set_info cupti "not found: built without the kernel profile (--profile kernels)"
  fi
  # the peer checks need a python with torch, numpy and h5py: the image's
  local cand said
  for cand in $PY_CANDIDATES; do
    cand=$(command -v "$cand") || continue
    said=$(timeout -k 5 "$(left)" "$cand" -c 'import torch, numpy, h5py; print("torch", torch.__version__, "cuda", torch.cuda.is_available(), "numpy", numpy.__version__, "h5py", h5py.__version__)' 2>&1 | tail -1)
    [[ $said == torch* ]] && { py=$cand; break; }
  done
  printf '%s\n' "$py" >"$work/python.txt"
  set_info python "$py ${said:-}"
  printf '%s\n' "${cmake_libs[@]}" >"$work/cmake-libs.txt"
  fig="cuDNN $(get_info cudnn); NCCL $(get_info nccl); CUPTI $(get_info cupti)"
  return $ok
}
dry_part_libs() { fig="would look for cuDNN, NCCL and CUPTI in /usr/local/cuda, /usr, python3's nvidia-* packages, the bundle"; }

# ---- build ----------------------------------------------------------------------------------
# CMake with the bundle's wrappers (DSTRAIN_BUNDLE_CMAKE_ARGS), the library
# paths of libs, this GPU's architecture only; ninja when the image has it.
# An existing build-gpu (the second profile on the first's machine) is
# built again incrementally.
build_arch() { echo "${GPU_CHECK_ARCH:-$(get_info arch)}"; }
part_build() {
  local gen=() rc arch
  arch=$(build_arch)
  command -v ninja >/dev/null && [ ! -f "$build/Makefile" ] && gen=(-G Ninja)
  mapfile -t cmake_libs <"$work/cmake-libs.txt"
  # shellcheck disable=SC2086  # DSTRAIN_BUNDLE_CMAKE_ARGS is a list of -D options
  timeout -k 10 "$(left)" cmake -S "$repo" -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DDSTRAIN_CUDA=ON -DDSTRAIN_CUDA_ARCHS="$arch" "${cmake_libs[@]}" \
    -DDSTRAIN_PEER_PYTHON="$py" ${DSTRAIN_BUNDLE_CMAKE_ARGS:-} >"$work/configure.log" 2>&1
  rc=$?
  grep -E '^-- (dstrain|Found (MPI|HDF5|BLAS|CUDAToolkit))' "$work/configure.log"
  if [ $rc -ne 0 ]; then
    tail -40 "$work/configure.log"; fig="configure failed (configure.log)"; return 1
  fi
  set_info configure "$(grep -o 'dstrain: CUDA toolkit.*' "$work/configure.log" | tail -1)"
  grep -q 'CUDA backend ON' "$work/configure.log" ||
    { fig="configured without the CUDA backend: $(get_info configure)"; return 1; }
  local profile_note="kernel profile ON"
  grep -q 'kernel profile ON' "$work/configure.log" || profile_note="kernel profile OFF (no CUPTI: recorded, going on)"
  set_info kernel_profile "$profile_note"
  timeout -k 10 "$(left)" cmake --build "$build" -j "$(nproc)" >"$work/build.log" 2>&1
  rc=$?
  if [ $rc -ne 0 ]; then
    grep -E 'error|In file included from' "$work/build.log" | head -30
    timed_out $rc && { fig="build timed out (build.log)"; return 1; }
    fig="build failed (build.log)"
    build_with_cpath
    return 1
  fi
  record_version
  fig="sm_$arch, $([ ${#gen[@]} -gt 0 ] && echo ninja || echo make) -j$(nproc), CUDA backend ON, $profile_note"
}
record_version() {
  "$build/dstrain" --version | tee "$work/version.txt"
  set_info dstrain_version "$(tr '\n' ';' <"$work/version.txt" | sed 's/;*$//; s/;/; /g')"
}
dry_part_build() {
  fig="would configure and build build-gpu for sm_$(build_arch) only ($([ "$profile" = second ] && echo "incremental on the first's" || echo fresh))"
}

# ---- tests ----------------------------------------------------------------------------------
# The build folder whose tests are listed: build-gpu; a dry run without one
# lists this machine's build (the same CMake registers the CUDA tests
# wherever nvcc is found).
list_build() {
  if [ -n "${GPU_CHECK_BUILD:-}" ]; then echo "$GPU_CHECK_BUILD"
  elif [ -f "$build/CTestTestfile.cmake" ] || [ "$dry" -eq 0 ]; then echo "$build"
  else echo "$repo/build"; fi
}
test_names() { ctest --test-dir "$(list_build)" -N "$@" 2>/dev/null | sed -nE 's/^ *Test +#[0-9]+: //p'; }
gpu_count() { local n; n=$(get_info gpus); [[ $n =~ ^[0-9]+$ ]] && echo "$n" || echo 1; }

# first_tests: every test labelled cuda but multi-gpu, less SECOND_TESTS
first_tests() {
  local t
  test_names -L '^cuda$' -LE '^multi-gpu$' | while read -r t; do
    [[ " $SECOND_TESTS " == *" $t "* ]] || echo "$t"
  done | sort
}
# multi_tests GPUS: the multi-gpu tests whose label gpus-N has N <= GPUS;
# one without such a label needs more GPUs than any machine has (never run).
multi_tests() {
  local have=$1 n
  for n in 2 4 8 16; do
    [ "$n" -le "$have" ] && test_names -L "^gpus-$n\$" -L '^multi-gpu$'
  done | sort -u
}
# multi_needs: "TEST:N" for every multi-gpu test (N "?" without a gpus-N label)
multi_needs() {
  local t n found
  for t in $(test_names -L '^multi-gpu$'); do
    found="?"
    for n in 2 4 8 16; do test_names -L "^gpus-$n\$" | grep -qx "$t" && { found=$n; break; }; done
    echo "$t:$found"
  done
}

# ctest_run NAME... : runs exactly these tests, records each one's result
# and seconds in $tests_tsv; "Skipped" is a failure here (only tests this
# machine can run are selected).
ctest_run() {
  local regex rc
  regex="^($(printf '%s|' "$@" | sed 's/|$//'))\$"
  timeout -k 10 "$(left)" ctest --test-dir "$build" -R "$regex" --output-on-failure --timeout 600 \
    -j "${GPU_CHECK_JOBS:-6}" >"$work/ctest-$part_name.log" 2>&1
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

part_tests() {
  have_build || return 1
  local names
  part_name=tests
  names=$(first_tests)
  [ -n "$names" ] || { fig="no test labelled cuda"; return 1; }
  # shellcheck disable=SC2086
  ctest_run $names
}
dry_part_tests() {
  local names
  names=$(first_tests)
  echo "selected ($(wc -w <<<"$names")): $(echo $names)"
  echo "left to the second profile: $SECOND_TESTS"
  fig="would run $(wc -w <<<"$names") tests from $(list_build): $(echo $names)"
}

# ---- timing and the PyTorch peer -------------------------------------------------------------
# Files meant to come back go to $OUT as they are made (else the work folder).
outf() { echo "${out_dir:-$work}/$1"; }
# --warmup 4: both tools cycle 4 synthetic batches, so every shape (cuDNN's
# autotuning in PyTorch) is met before the clock starts
TIMING_ARGS="--model ds2 --device cuda --length-dist librispeech --batch 32 --mode train --warmup 4 --steps 10"
# bench_figures JSON: "PREC N utt/s (M ms/step)" per result
bench_figures() {
  "$py" - "$1" <<'PY' 2>/dev/null
import json, sys
r = json.load(open(sys.argv[1]))["results"]
def one(x):
    what = f"{x.get('impl') or 'dstrain'} {x['precision']} {x.get('mode', 'train')} b{x['batch']}"
    if x["status"] != "ok":
        return f"{what} {x['status']}: {str(x.get('error', ''))[:120]}"
    return f"{what} {x.get('samples_per_s') or 0:.1f} utt/s ({x.get('step_ms') or 0:.0f} ms/step)"
print("; ".join(one(x) for x in r))
PY
}
# bench_ok JSON N: the file holds N results, every one with status ok
bench_ok() {
  "$py" - "$1" "$2" <<'PY' 2>/dev/null
import json, sys
r = json.load(open(sys.argv[1]))["results"]
sys.exit(not (len(r) == int(sys.argv[2]) and all(x["status"] == "ok" for x in r)))
PY
}
# step_anatomy [PEER.json]: bench/step-anatomy over the timing's files, into
# ds2-anatomy.txt / .json (the verdicts and the targets)
step_anatomy() {
  local k=() p=()
  [ -f "$(outf ds2-kernels.json)" ] && k=(--kernels "$(outf ds2-kernels.json)")
  [ -n "${1:-}" ] && [ -f "$1" ] && p=(--peer "$1")
  "$py" "$repo/bench/step-anatomy" "$(outf ds2-timing.json)" "${k[@]}" "${p[@]}" \
    --json "$(outf ds2-anatomy.json)" >"$(outf ds2-anatomy.txt)" 2>&1
  cat "$(outf ds2-anatomy.txt)"
}
# The convolution algorithms a result ran (its "choices"), one per line.
bench_choices() {
  "$py" - "$1" <<'PY' 2>/dev/null
import json, sys
for r in json.load(open(sys.argv[1]))["results"]:
    for c in r.get("choices") or []:
        print("%s %s: %s: %s" % (r["precision"], r["mode"], c["what"], c["how"]))
PY
}
part_timing() {
  have_build || return 1
  local rc rc_tf32 rc_k json tf32=$work/ds2-timing-tf32.json
  json=$(outf ds2-timing.json)
  # fp16 three times, each in its own process: its spread run to run
  # shellcheck disable=SC2086
  timeout -k 10 "$(left)" "$build/dstrain" bench $TIMING_ARGS --precision fp32,fp16,fp16,fp16 \
    --out "$json" >"$work/timing.log" 2>&1
  rc=$?
  cat "$work/timing.log"
  # shellcheck disable=SC2086
  timeout -k 10 "$(left)" "$build/dstrain" bench $TIMING_ARGS --precision fp32 --tf32 --out "$tf32" \
    >>"$work/timing.log" 2>&1
  rc_tf32=$?
  # the paths that are off by default (issue 34, item 7), each timed beside
  # the default above: on by default only once a run like this one shows
  # them correct (the tests part) and faster (ds2-anatomy.txt)
  local extra k=0
  # graphs first: --cuda-graphs is the item this run has to decide
  for extra in "--precision fp16 --cuda-graphs --bucket-frames 32" \
               "--precision fp32,fp16 --rnn-algo auto" "--precision fp16 --bucket-frames 32" \
               "--precision fp16 --rnn-algo auto --bucket-frames 32" \
               "--precision fp32,fp16 --cuda-graphs --rnn-algo auto --bucket-frames 32"; do
    # shellcheck disable=SC2086
    timeout -k 10 "$(left)" "$build/dstrain" bench $TIMING_ARGS $extra --out "$work/ds2-timing-new$k.json" \
      >>"$work/timing.log" 2>&1 || fig+="bench $extra failed; "
    k=$((k + 1))
  done
  # one file for step-anatomy: every result beside the others
  "$py" - "$json" "$tf32" "$work"/ds2-timing-new*.json <<'PY' 2>/dev/null
import json, sys
a = json.load(open(sys.argv[1]))
for p in sys.argv[2:]:
    try:
        a["results"] += json.load(open(p))["results"]
    except (OSError, ValueError):
        pass
json.dump(a, open(sys.argv[1], "w"), indent=1)
PY
  # the kernels behind the step (CUPTI), fewer steps: the profile slows the host
  # shellcheck disable=SC2086
  timeout -k 10 "$(left)" "$build/dstrain" bench ${TIMING_ARGS/--steps 10/--steps 3} --precision fp32,fp16 \
    --profile kernels --out "$(outf ds2-kernels.json)" >"$work/kernels-timing.log" 2>&1
  rc_k=$?
  tail -3 "$work/kernels-timing.log"
  bench_choices "$json" | sort -u >"$(outf ds2-conv-algorithms.txt)"
  echo "convolution algorithms:"; cat "$(outf ds2-conv-algorithms.txt)"
  step_anatomy
  fig+=$(bench_figures "$json")
  fig+="; $(grep -E '^  ' "$(outf ds2-anatomy.txt)" | awk '{ printf "%s %s: enqueue %s ms, kernels %s ms, %s launches, %s; ", $3, ($4 == "tf32" ? "tf32" : ""), $(NF-4), $(NF-2), $(NF-1), $NF }')"
  { [ $rc_k -eq 0 ] && bench_ok "$(outf ds2-kernels.json)" 2; } ||
    fig+="; --profile kernels failed ($(grep -m1 -E 'error|failed' "$work/kernels-timing.log" | cut -c1-200))"
  timed_out $rc && fig="timed out; $fig"
  [ -n "$fig" ] || fig="no results ($(tail -1 "$work/timing.log"))"
  [ $rc -eq 0 ] && [ $rc_tf32 -eq 0 ] && bench_ok "$json" 9
}
dry_part_timing() {
  fig="would run: dstrain bench $TIMING_ARGS --precision fp32,fp16,fp16,fp16 --out $(outf ds2-timing.json);"
  fig+=" the same --precision fp32 --tf32; --cuda-graphs --bucket-frames 32 (fp16); --rnn-algo auto (fp32,fp16),"
  fig+=" --bucket-frames 32 (fp16), both (fp16), all three (fp32,fp16);"
  fig+=" --profile kernels --precision fp32,fp16 --steps 3; bench/step-anatomy"
}

part_peer() {
  local rc json
  json=$(outf ds2-torch.json)
  timeout -k 5 "$(left)" "$py" -c 'import torch, sys; sys.exit(not torch.cuda.is_available())' 2>/dev/null ||
    { fig="no CUDA PyTorch in $py"; return 1; }
  # PyTorch loads its own CUDA libraries: none of the bundle's or this
  # script's folders (a cuDNN older than PyTorch's is refused)
  # shellcheck disable=SC2086
  timeout -k 10 "$(left)" env -u LD_LIBRARY_PATH "$py" "$repo/bench/pytorch_ds2.py" $TIMING_ARGS \
    --impl eager,amp --out "$json" >"$work/peer.log" 2>&1
  rc=$?
  cat "$work/peer.log"
  fig=$(bench_figures "$json")
  [ -f "$(outf ds2-timing.json)" ] &&
    "$py" "$repo/bench/compare" "$(outf ds2-timing.json)" "$json" >"$work/compare.txt" 2>&1 && cat "$work/compare.txt"
  [ -f "$(outf ds2-timing.json)" ] && step_anatomy "$json"
  timed_out $rc && fig="timed out; $fig"
  [ -n "$fig" ] || fig="no results ($(tail -1 "$work/peer.log"))"
  [ $rc -eq 0 ] && bench_ok "$json" 2
}
dry_part_peer() { fig="would run: python3 bench/pytorch_ds2.py $TIMING_ARGS --impl eager,amp --out $(outf ds2-torch.json); bench/compare"; }

# The 16-bit gradient question's switches (issue 34, item 6): float16 here,
# bfloat16 and initcheck in the second profile's precision part.
part_f16() {
  have_build || return 1
  local runs=12
  F16_SWITCH_TIMEOUT=$(( $(left) / runs > 5 ? $(left) / runs : 5 )) F16_SWITCH_INITCHECK=0 \
    timeout -k 5 "$(left)" "$repo/tests/gpu/f16_switches.sh" "$build/tests/test_model_gpu_vs_cpu" cuda float16 \
    >"$(outf f16-switches.md)" 2>&1
  cat "$(outf f16-switches.md)"
  fig="$(grep -c '^| [a-z]' "$(outf f16-switches.md)") runs in f16-switches.md; baseline worst $(awk -F'|' '$2 ~ /baseline/ { print $4 }' "$(outf f16-switches.md)" | head -1)"
  grep -q '^| baseline' "$(outf f16-switches.md)"
}
dry_part_f16() { fig="would run: tests/gpu/f16_switches.sh build-gpu/tests/test_model_gpu_vs_cpu cuda float16"; }

# ---- the second profile ------------------------------------------------------------------------
part_precision() {
  have_build || return 1
  part_name=precision
  F16_SWITCH_TIMEOUT=60 timeout -k 5 "$(left)" "$repo/tests/gpu/f16_switches.sh" \
    "$build/tests/test_model_gpu_vs_cpu" cuda bfloat16 >"$(outf f16-switches-bf16.md)" 2>&1
  # where the 16-bit whole-model differences come from (model_gpu_vs_cpu_f16
  # and _bf16 failed on an H100): the GRU model's variants on the test's own
  # parameters and batch, the GPU beside the CPU's emulated 16-bit tables;
  # a record in the logs, not a verdict
  timeout -k 5 "$(left)" "$repo/tests/gpu/model_variants.sh" "$build/tests/test_model_gpu_vs_cpu" cuda 1 \
    >"$work/model-variants-cuda.log" 2>&1
  timeout -k 5 "$(left)" "$repo/tests/gpu/model_variants.sh" "$build/tests/test_model_gpu_vs_cpu" cpu 1 \
    >"$work/model-variants-cpu.log" 2>&1
  ctest_run fp16_small_gpu
}
dry_part_precision() { fig="would run: tests/gpu/model_variants.sh (cuda, cpu), ctest fp16_small_gpu"; }

# One bench call per precision (bench writes its JSON at the end of a call,
# and every configuration is a process of its own, a few seconds each), so
# that a sweep cut short keeps the precisions it finished.
SWEEP_ARGS="--model ds2 --device cuda --length-dist librispeech --batch 16,32,64 --mode train --warmup 4 --steps 10"
part_sweep() {
  have_build || return 1
  local rc ok=0 p bench=$work/bench figs=""
  mkdir -p "$bench"
  for p in fp32 fp16 bf16; do
    # shellcheck disable=SC2086
    timeout -k 10 "$(left)" "$build/dstrain" bench $SWEEP_ARGS --precision $p --out "$bench/ds2-sweep-$p.json" \
      --csv "$bench/ds2-sweep-$p.csv" >"$bench/ds2-sweep-$p.txt" 2>&1
    rc=$?
    cat "$bench/ds2-sweep-$p.txt"
    bench_ok "$bench/ds2-sweep-$p.json" 3 || ok=1
    timed_out $rc && figs+="$p timed out; "
    figs+="$(bench_figures "$bench/ds2-sweep-$p.json" | tr ';' '\n' | grep ' b32' | tr '\n' ';') "
    timeout -k 5 "$(left)" "$py" "$repo/bench/plot" "$bench/ds2-sweep-$p.json" --out "$bench/plots-$p" \
      >"$bench/plot-$p.txt" 2>&1 || true
    pack_bench
  done
  fig=${figs:-no results}
  return $ok
}
# The precision comparison across model families (a study's table: time per
# step, fp32 against fp16, DS2 against the others), at the sweep's batch 32
# and lengths: Jasper 10x3 first (the study's convolutional model), then DS1.
FAMILIES="jasper-10x3 ds1"
FAMILIES_ARGS="--device cuda --length-dist librispeech --batch 32 --mode train --warmup 2 --steps 4"
part_families() {
  have_build || return 1
  local rc ok=0 bench=$work/bench model figs=""
  mkdir -p "$bench"
  for model in $FAMILIES; do
    # shellcheck disable=SC2086
    timeout -k 10 "$(left)" "$build/dstrain" bench --model "$model" $FAMILIES_ARGS \
      --precision fp32,fp16 --out "$bench/$model-b32.json" --csv "$bench/$model-b32.csv" \
      >"$bench/$model-b32.txt" 2>&1
    rc=$?
    cat "$bench/$model-b32.txt"
    bench_ok "$bench/$model-b32.json" 2 || ok=1
    figs+="${figs:+; }$model: $(bench_figures "$bench/$model-b32.json")"
    timed_out $rc && { figs+="; timed out"; break; }
  done
  fig="$figs; w2l-plus: not in this profile's time (dstrain bench --model w2l-plus)"
  pack_bench
  return $ok
}
dry_part_families() { fig="would run: dstrain bench --model {${FAMILIES// /,}} $FAMILIES_ARGS --precision fp32,fp16 (ds2's figures: the sweep's b32)"; }

dry_part_sweep() { fig="would run, once per precision (fp32, fp16, bf16): dstrain bench $SWEEP_ARGS --precision P; bench/plot; into bench.tar.gz"; }
# bench.tar.gz in $OUT: the CSV, trace, plots and texts (the tool brings back 8 files)
pack_bench() {
  [ -n "$out_dir" ] && [ -d "$work/bench" ] &&
    tar -C "$work" -czf "$out_dir/bench.tar.gz.tmp" bench && mv "$out_dir/bench.tar.gz.tmp" "$out_dir/bench.tar.gz"
}

PROFILE_ARGS="--model ds2 --device cuda --length-dist librispeech --batch 32 --precision fp16 --warmup 4 --steps 5 --profile kernels"
part_kernels() {
  have_build || return 1
  [[ $(get_info kernel_profile) == *ON* ]] || { fig="skipped: built without CUPTI ($(get_info cupti))"; return 77; }
  local rc ok=0 bench=$work/bench
  mkdir -p "$bench"
  part_name=kernels
  ctest_run test_profile_backend_cuda || ok=1
  local tests_fig=$fig
  # shellcheck disable=SC2086
  timeout -k 10 "$(left)" "$build/dstrain" bench $PROFILE_ARGS --trace "$bench/ds2-fp16-b32-trace.json" \
    --out "$(outf ds2-profile.json)" >"$bench/ds2-profile.txt" 2>&1
  rc=$?
  head -60 "$bench/ds2-profile.txt"
  pack_bench
  fig="$tests_fig; profile: $([ $rc -eq 0 ] && echo "ds2-profile.json, trace in bench.tar.gz" || echo "exit $rc: $(grep -m1 -iE 'error|fail|unsupported' "$bench/ds2-profile.txt" || tail -1 "$bench/ds2-profile.txt")")"
  [ $ok -eq 0 ] && [ $rc -eq 0 ]
}
dry_part_kernels() { fig="would run: ctest test_profile_backend_cuda; dstrain bench $PROFILE_ARGS (without CUPTI: skipped)"; }

# The small preset trained on the GPU on the mini corpus' features made here
# (scripts/gpu-data.sh, carried as .gpu-data): dev CER of the untrained model
# (one step at learning rate 0; `dstrain eval` runs on the CPU) against the
# trained one's last validation, and against the CPU reference gpu-data.sh
# trained the same way (its mini-reference.txt). The margin: dev CER on 40
# utterances moves by 0.01-0.02 from epoch to epoch, and the GPU's rounding
# takes another path than the CPU's.
MINI_CER_MARGIN=0.05
part_mini() {
  have_build || return 1
  local out=$work/mini pack=$repo/.gpu-data/mini-features.tar.xz rc bin=$build/dstrain before after wer ref epochs
  [ -f "$pack" ] || { fig="no .gpu-data/mini-features.tar.xz: run scripts/gpu-data.sh where the checkout was made and carry .gpu-data"; return 1; }
  mkdir -p "$out"
  if [ ! -f "$out/mini-reference.txt" ]; then
    tar -C "$out" -xJf "$pack" || { fig="cannot unpack $pack"; return 1; }
  fi
  ref=$(awk '$1 == "cer" { print $2 }' "$out/mini-reference.txt" 2>/dev/null)
  epochs=$(awk '$1 == "epochs" { print $2 }' "$out/mini-reference.txt" 2>/dev/null)
  [ -n "$ref" ] && [ -n "$epochs" ] || { fig="no CPU reference in $pack (scripts/gpu-data.sh makes it)"; return 1; }
  local common=(--model small --device cuda --train "$out/mini-train.h5" --val "$out/mini-dev.h5" --batch 8
                --seed 7 --optimizer adamw --lr 1e-3 --print-every 0)
  rm -rf "$out/untrained" "$out/ckpt"
  timeout -k 10 "$(left)" "$bin" train "${common[@]}" --steps 1 --lr 0 --checkpoint-dir "$out/untrained" >"$out/untrained.log" 2>&1 &&
    before=$(timeout -k 10 "$(left)" "$bin" eval --checkpoint "$out/untrained/step-00000001.h5" --data "$out/mini-dev.h5" 2>/dev/null |
             sed -nE 's/^WER ([0-9.]+) +CER ([0-9.]+).*/\2/p')
  timeout -k 10 "$(left)" "$bin" train "${common[@]}" --epochs "$epochs" --checkpoint-dir "$out/ckpt" --log "$out/train.jsonl" \
    >"$out/train.log" 2>&1
  rc=$?
  grep -E '^(epoch|validation|done)' "$out/train.log"
  after=$(grep '^validation:' "$out/train.log" | tail -1 | sed -nE 's/.*CER ([0-9.]+).*/\1/p')
  wer=$(grep '^validation:' "$out/train.log" | tail -1 | sed -nE 's/.*WER ([0-9.]+).*/\1/p')
  fig="$(grep '^done:' "$out/train.log" | tail -1 | sed -E 's/^done: //'); dev CER ${before:-?} untrained -> ${after:-?}, WER ${wer:-?} ($epochs epochs; CPU reference $ref)"
  timed_out $rc && fig="timed out; $fig"
  [ "$rc" -eq 0 ] || fig="exit $rc: $(grep -v '^ *$' "$out/train.log" | tail -1 | cut -c1-200); $fig"
  [ -n "${before:-}" ] || fig="untrained run or eval failed ($(tail -1 "$out/untrained.log")); $fig"
  [ $rc -eq 0 ] && [ -n "${before:-}" ] && [ -n "${after:-}" ] &&
    awk -v a="$after" -v b="$before" -v r="$ref" -v m="$MINI_CER_MARGIN" 'BEGIN { exit !(a < 0.9 * b && a <= r + m) }'
}
dry_part_mini() {
  local pack=$repo/.gpu-data/mini-features.tar.xz
  fig="would train small on the GPU as long as the CPU reference did, on $([ -f "$pack" ] && echo ".gpu-data/mini-features.tar.xz ($(du -h "$pack" | cut -f1))" || echo "MISSING .gpu-data/mini-features.tar.xz (scripts/gpu-data.sh)")"
}

part_memcheck() {
  have_build || return 1
  local cs rc log_mc=$work/memcheck.log
  cs=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer /usr/local/cuda/compute-sanitizer/compute-sanitizer 2>/dev/null | head -1)
  [ -n "$cs" ] || { fig="compute-sanitizer not found"; return 1; }
  timeout -k 10 "$(left)" "$cs" --tool memcheck --error-exitcode 1 "$build/dstrain" train --model tiny --synthetic \
    --device cuda --steps 5 --batch 4 --print-every 0 >"$log_mc" 2>&1
  rc=$?
  tail -15 "$log_mc"
  fig="$(grep -m1 'ERROR SUMMARY' "$log_mc" | sed 's/^=* *//')"
  timed_out $rc && fig="timed out; ${fig}"
  [ -n "$fig" ] || fig="exit $rc: $(tail -1 "$log_mc")"
  [ $rc -eq 0 ] && grep -q 'ERROR SUMMARY: 0 errors' "$log_mc"
}
dry_part_memcheck() { fig="would run: compute-sanitizer --tool memcheck dstrain train --model tiny --synthetic --device cuda --steps 5"; }

# multi: what the GPU count allows; on one GPU nothing, recorded as not run
multi_fig() {
  local have=$1 names=$2 rest
  rest=$(multi_needs | awk -F: -v h="$have" '$2 == "?" || $2 > h { printf "%s (%s GPUs) ", $1, $2 }')
  echo "$(gpu_count) GPU(s) visible; selected: ${names:-none}; not run, needing more GPUs: ${rest:-none}"
}
part_multi() {
  have_build || return 1
  local names
  part_name=multi
  names=$(multi_tests "$(gpu_count)")
  if [ -z "$names" ]; then fig="not run: $(multi_fig "$(gpu_count)" "")"; return 77; fi
  # shellcheck disable=SC2086
  ctest_run $names
  local rc=$?
  fig="$fig; $(multi_fig "$(gpu_count)" "$(echo $names)")"
  return $rc
}
dry_part_multi() {
  local names
  names=$(multi_tests "$(gpu_count)")
  echo "multi-gpu selected ($(wc -w <<<"$names")): $(echo $names)"
  fig="$(multi_fig "$(gpu_count)" "$(echo $names)")"
}

# ---- the results ---------------------------------------------------------------------------------
part_title() {
  case $1 in
    env) echo "GPU, driver, toolchain, bundle" ;; libs) echo "cuDNN, NCCL, CUPTI" ;;
    build) echo "build-gpu (CUDA backend, this GPU's architecture)" ;;
    tests) echo "every 1-GPU correctness test (ctest -L cuda -LE multi-gpu)" ;;
    timing) echo "dstrain bench ds2, batch 32, LibriSpeech lengths, fp32 and fp16" ;;
    peer) echo "PyTorch ds2 (bench/pytorch_ds2.py), eager fp32 and AMP" ;;
    f16) echo "the 16-bit gradient question's switches (tests/gpu/f16_switches.sh, float16)" ;;
    precision) echo "fp16_small_gpu: fp16 and bf16 follow fp32" ;;
    sweep) echo "dstrain bench ds2: batch x precision x mode" ;;
    families) echo "dstrain bench jasper-10x3 and ds1 at batch 32, fp32 and fp16, beside ds2's" ;;
    kernels) echo "kernel profile (CUPTI)" ;;
    mini) echo "small on the mini corpus' features, trained on the GPU" ;;
    memcheck) echo "compute-sanitizer memcheck, tiny, 5 steps" ;;
    multi) echo "multi-gpu tests the GPU count allows" ;;
  esac
}
# write_results: the table, to bench/results/ and $OUT (each written whole,
# then renamed), and the work folder's logs to $OUT/logs.tar.gz
write_results() {
  local short day name p row file tmp
  short=$(get_info gpu | tr 'A-Z' 'a-z' | sed 's/nvidia//' | grep -oE '[a-z]+[0-9]+[a-z]*' | head -1)
  day=$(date -u +%Y-%m-%d)
  name=gpu-check-$day-${short:-gpu}.md
  [ "$dry" -eq 1 ] && name=gpu-check-dry-run.md
  tmp=$work/results.md
  {
    echo "# GPU check: $(get_info gpu), $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo
    echo "| part | result | figures | seconds |"
    echo "|---|---|---|---|"
    for p in $ALL_PARTS; do
      row=$(awk -F '\t' -v p="$p" '$1 == p' "$state")
      if [ -n "$row" ]; then
        awk -F '\t' -v t="$(part_title "$p")" '{ printf "| %s: %s | %s | %s | %s |\n", $1, t, $2, $4, $3 }' <<<"$row"
      elif wants "$p"; then
        echo "| $p: $(part_title "$p") | not run yet | | |"
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
    echo "- command: \`$command_line\` (from the checkout root; a second profile keeps the first's rows)"
  } >"$tmp"
  if [ "$dry" -eq 0 ]; then
    mkdir -p "$repo/bench/results"
    cp "$tmp" "$repo/bench/results/$name.tmp" && mv "$repo/bench/results/$name.tmp" "$repo/bench/results/$name"
  fi
  results_file=$repo/bench/results/$name
  if [ -n "$out_dir" ]; then
    cp "$tmp" "$out_dir/$name.tmp" && mv "$out_dir/$name.tmp" "$out_dir/$name"
    (cd "$work" && find . -maxdepth 3 -name '*.log' -size -20M -print0 |
       tar --null -czf "$out_dir/logs.tar.gz.tmp" -T - 2>/dev/null) &&
      mv "$out_dir/logs.tar.gz.tmp" "$out_dir/logs.tar.gz"
    rm -f "$out_dir/logs.tar.gz.tmp"
  fi
}

# ---- main ---------------------------------------------------------------------------------------------
for p in $parts; do run_part "$p" "part_$p"; done
[ "$dry" -eq 1 ] && cat "$work/results.md"
[ "$dry" -eq 0 ] && echo "results: $results_file"
echo "== $prog: $((SECONDS - start))s, $([ $failed_now -eq 0 ] && echo "every part run now passed" || echo "a part failed")"
# let tee write the last lines before the call returns
exec >&- 2>&-
wait "$tee_pid" 2>/dev/null || sleep 1
exit $failed_now
