#!/usr/bin/env bash
# What runs without a GPU, in every CI run: the NCCL transport is refused
# with a clear message wherever it cannot run, and --version names NCCL.
#  - `dstrain --version` has an "nccl:" line (the library found at run time
#    and the one compiled against, or "not built");
#  - `mpiexec -np 2 dstrain train --device cpu --allreduce nccl` fails,
#    saying NCCL needs the CUDA backend and how to run instead;
#  - `--device cuda --allreduce nccl` fails cleanly (status 1..128) on a
#    machine without a GPU saying so, and on one with a single GPU saying
#    NCCL refuses two ranks on one GPU (with two or more GPUs it trains:
#    that part is then left to the multi-gpu tests);
#  - bench_allreduce --transport nccl fails cleanly without a GPU, and
#    refuses --transport nccl with --device cpu.
# usage: test_nccl_refused.sh DSTRAIN BENCH_ALLREDUCE WORKDIR
set -uo pipefail
bin=$1 bench=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
. "$(dirname "$0")/../lib/checks.sh"
clean_failure() { [ "$1" -ne 0 ] && [ "$1" -ne 124 ] && [ "$1" -le 128 ]; }

version=$("$bin" --version 2>&1)
nccl_line=$(grep '^nccl: ' <<<"$version")
echo "$nccl_line"
if grep -Eq '^nccl: +([0-9]+\.[0-9]+\.[0-9]+|not found) \(compiled [0-9]+\.[0-9]+\.[0-9]+\)|^nccl: +not built' \
     <<<"$nccl_line"; then ok; else bad "--version has no nccl line: $version"; fi
gpus=0
case $version in
  *"no CUDA device visible"* | *"cuda not built"* | *"backend not built"*) gpus=0 ;;
  *) gpus=$(sed -n 's/^gpu: *\([0-9][0-9]*\) device.*/\1/p' <<<"$version"); gpus=${gpus:-0} ;;
esac
built=1
case $nccl_line in *"not built"*) built=0 ;; esac

# the CPU backend: refused, naming what to do
timeout 120 mpiexec -np 2 "$bin" train --device cpu --synthetic --steps 1 --allreduce nccl \
  >"$work/cpu.out" 2>&1
rc=$?
clean_failure $rc && ok || bad "--device cpu --allreduce nccl: status $rc"
grep -q "allreduce nccl needs the CUDA backend" "$work/cpu.out" && grep -q -- "--allreduce mpi" "$work/cpu.out" \
  && ok || bad "cpu refusal unclear: $(tail -3 "$work/cpu.out")"

# the CUDA backend with fewer GPUs than ranks
if [ "$built" = 1 ] && [ "$gpus" -lt 2 ]; then
  timeout 120 mpiexec -np 2 "$bin" train --device cuda --synthetic --steps 1 --allreduce nccl \
    >"$work/cuda.out" 2>&1
  rc=$?
  clean_failure $rc && ok || bad "--device cuda --allreduce nccl with $gpus GPUs: status $rc"
  if [ "$gpus" = 0 ]; then want="no CUDA device"; else want="NCCL refuses two ranks on one GPU"; fi
  grep -q "$want" "$work/cuda.out" && ok || bad "expected \"$want\": $(tail -3 "$work/cuda.out")"
fi

# the benchmark
if [ "$built" = 1 ] && [ "$gpus" = 0 ]; then
  timeout 120 mpiexec -np 1 "$bench" --transport nccl -b 8 -e 64 -n 1 -w 0 >"$work/bench.out" 2>&1
  rc=$?
  clean_failure $rc && ok || bad "bench_allreduce --transport nccl without a GPU: status $rc"
  grep -q "no CUDA device" "$work/bench.out" && ok || bad "bench refusal unclear: $(tail -3 "$work/bench.out")"
fi
timeout 120 mpiexec -np 1 "$bench" --transport nccl --device cpu >"$work/bench_cpu.out" 2>&1
rc=$?
[ $rc = 2 ] && grep -q "transport nccl sums GPU memory: it needs --device cuda" "$work/bench_cpu.out" \
  && ok || bad "bench --transport nccl --device cpu: status $rc: $(head -2 "$work/bench_cpu.out")"

echo "test_nccl_refused ($gpus GPUs): $pass passed, $fail failed"
[ "$fail" -eq 0 ]
