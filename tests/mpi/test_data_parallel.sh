#!/usr/bin/env bash
# Data parallelism over real MPI ranks:
#  - FP64 equivalence: -np 1 x batch 8, -np 2 x 4, -np 4 x 2 (oversubscribed), same seed, 5 steps:
#    final parameters agree to 1e-12 relative, and every rank holds bit-identical parameters;
#    for tiny (DeepSpeech2's graph) and for a Jasper DR (jasper-small with dense residuals,
#    dropout off: its masks are drawn per rank) whose residual branches' BatchNorm is
#    synchronised and whose residual tensors reach the buckets in backward's order;
#  - overlap: with several buckets, reductions start before backward ends (from the metrics log);
#  - faults: a rank that exits early, or hangs, ends the job with an error within --timeout.
# usage: test_data_parallel.sh DSTRAIN WORKDIR [DEVICE]
# DEVICE cuda (ctest data_parallel_gpu): the FP64 equivalence only, with every
# rank on the one GPU through the MPI transport's staged path (the only path a
# GPU backend has); the rest is host-side behaviour the CPU run covers.
# Without a CUDA device it prints "skipped: no CUDA device" and exits 77.
set -uo pipefail
bin=$1 work=$2 device=${3:-cpu}
if [ "$device" = cuda ]; then
  . "$(dirname "$0")/../gpu/cuda_device.sh"
  require_cuda_device "$bin"
fi
rm -rf "$work" && mkdir -p "$work"
. "$(dirname "$0")/../lib/checks.sh"
finish() {
  echo "test_data_parallel ($device): $pass passed, $fail failed"
  [ "$fail" -eq 0 ]; exit
}

common=(train --device "$device" --synthetic --precision fp64 --steps 5 --seed 11 --max-frames 160
        --print-every 0 --checkpoint-every 5 --bucket-mb 0.02 --check-sync 1 --allreduce mpi)
for np in 1 2 4; do
  b=$((8 / np))
  if mpiexec -np $np "$bin" "${common[@]}" --model tiny --batch $b --checkpoint-dir "$work/np$np" \
       --log "$work/np$np.jsonl" >"$work/np$np.out" 2>&1; then ok
  else bad "-np $np failed: $(tail -3 "$work/np$np.out")"; fi
done
# the MPI transport's staged path (what a GPU backend uses: each bucket and the
# BatchNorm moments copied through pinned host buffers) on the CPU: same result
# (on the GPU every run above is staged already)
if [ "$device" = cpu ]; then
  if DSTRAIN_STAGE_ALLREDUCE=1 mpiexec -np 2 "$bin" "${common[@]}" --model tiny --batch 4 --checkpoint-dir "$work/np2s" \
       --log "$work/np2s.jsonl" >"$work/np2s.out" 2>&1; then ok
  else bad "-np 2 staged failed: $(tail -3 "$work/np2s.out")"; fi
  if h5diff -q "$work/np2/step-00000005.h5" "$work/np2s/step-00000005.h5" /params; then ok
  else bad "staged reduction gives other parameters than the direct one"; fi
fi
# --check-sync 1 compared bit-exact parameter checksums of all ranks after every step
# (the banner names the device the ranks ran on)
grep -q "on $device, 2 ranks" "$work/np2.out" && grep -q "on $device, 4 ranks" "$work/np4.out" && ok \
  || bad "rank banners missing: $(grep -h "dstrain train:" "$work/np2.out" "$work/np4.out")"

# equivalent WORKDIR: the np1, np2 and np4 runs' final parameters within 1e-12
equivalent() {
  "${DSTRAIN_TEST_PYTHON:-/usr/bin/python3}" - "$1" <<'PY'
import sys, h5py, numpy as np
w = sys.argv[1]
f = {n: h5py.File(f"{w}/np{n}/step-00000005.h5", "r") for n in (1, 2, 4)}
worst, start = 0.0, None
for name in f[1]["params"]:
    a = f[1]["params"][name][()]
    for n in (2, 4):
        b = f[n]["params"][name][()]
        d = np.linalg.norm(a - b) / max(np.linalg.norm(a), 1e-300)
        worst = max(worst, d)
print(f"{w}: worst relative parameter difference across 1/2/4 ranks: {worst:.3g}")
sys.exit(0 if worst <= 1e-12 else 1)
PY
}
if equivalent "$work"; then ok; else bad "parameters differ across rank counts by more than 1e-12"; fi

# the same for Jasper DR's graph
sed 's/"dropout": 0.05/"dropout": 0/g; s/"n_classes": 29,/"n_classes": 29, "dense_residual": true,/' \
  "$(dirname "$0")/../../configs/jasper-small.json" >"$work/jasper-dr.json"
mkdir -p "$work/jasper"
for np in 1 2 4; do
  b=$((8 / np))
  if mpiexec -np $np "$bin" "${common[@]}" --config "$work/jasper-dr.json" --batch $b \
       --checkpoint-dir "$work/jasper/np$np" >"$work/jasper/np$np.out" 2>&1; then ok
  else bad "jasper -np $np failed: $(tail -3 "$work/jasper/np$np.out")"; fi
done
if equivalent "$work/jasper"; then ok; else bad "Jasper DR's parameters differ across rank counts by more than 1e-12"; fi
# the runs trained: parameters moved away from the initial ones
if "${DSTRAIN_TEST_PYTHON:-/usr/bin/python3}" -c "
import json,sys; l=[json.loads(x) for x in open('$work/np2.jsonl') if x.startswith('{\"step\"')]; sys.exit(0 if len(l)==5 and l[0]['loss']!=l[-1]['loss'] else 1)"; then ok; else bad "np2 log"; fi

# The rest is host-side behaviour, covered by the CPU run: the overlap is
# measured against the host's end of backward, which on a GPU only queues it.
[ "$device" = cpu ] || finish

# overlap: several buckets, at least one reduction started before backward finished
if "${DSTRAIN_TEST_PYTHON:-/usr/bin/python3}" -c "
import json,sys
l=[json.loads(x) for x in open('$work/np2.jsonl') if x.startswith('{\"step\"')]  # not the checkpoint records
sys.exit(0 if all(s['buckets']>1 for s in l) and sum(s['buckets_early'] for s in l)>=1 else 1)"; then ok
else bad "no reduction started before backward ended: $(head -1 "$work/np2.jsonl")"; fi

# a rank that exits early: the job ends with an error, no hang
start=$(date +%s)
DSTRAIN_FAULT=exit:1:3 timeout 120 mpiexec -np 2 "$bin" train --model tiny --synthetic --steps 20 --batch 2 \
  --max-frames 120 --print-every 0 --timeout 10 >"$work/exit.out" 2>&1
rc=$?; took=$(( $(date +%s) - start ))
if [ $rc -ne 0 ] && [ $rc -ne 124 ] && [ $took -lt 60 ]; then ok; else bad "early exit: status $rc after ${took}s"; fi

# a rank that hangs: the watchdog ends the job within --timeout, naming the wait
start=$(date +%s)
DSTRAIN_FAULT=hang:1:3 timeout 120 mpiexec -np 2 "$bin" train --model tiny --synthetic --steps 20 --batch 2 \
  --max-frames 120 --print-every 0 --timeout 5 >"$work/hang.out" 2>&1
rc=$?; took=$(( $(date +%s) - start ))
if [ $rc -ne 0 ] && [ $rc -ne 124 ] && [ $took -lt 40 ]; then ok; else bad "hang: status $rc after ${took}s"; fi
grep -q "rank 0 on [^ ]* waited .* for the other ranks (--timeout 5)" "$work/hang.out" && ok \
  || bad "watchdog message missing: $(tail -5 "$work/hang.out")"
# ... and the rank that hangs: alive (its watchdog answers the roll call) but not waiting
grep -q "rank 1 on [^ ]* answers but is not waiting on the others" "$work/hang.out" && ok \
  || bad "the hanging rank is not named: $(grep 'dstrain: rank 0' "$work/hang.out")"
grep -h "dstrain: rank 0 waited" "$work/hang.out"

# without --allreduce, a CPU run sums through MPI (NCCL is the default on cuda only)
mpiexec -np 2 "$bin" train --synthetic --steps 1 --print-every 0 >"$work/default.out" 2>&1
grep -q "^2 ranks, gradients in .* summed by mpi" "$work/default.out" && ok ||
  bad "the CPU's default reduction: $(grep 'ranks,' "$work/default.out")"

# nccl is refused clearly on a build without the CUDA backend
mpiexec -np 2 "$bin" train --synthetic --steps 1 --allreduce nccl >"$work/nccl.out" 2>&1
grep -q "allreduce nccl needs the CUDA backend" "$work/nccl.out" && ok || bad "nccl not refused: $(tail -3 "$work/nccl.out")"

finish
