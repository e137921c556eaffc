#!/usr/bin/env bash
# The NCCL transport at N ranks, one GPU each (N > 1: ctest -L multi-gpu).
#  - bench_allreduce --transport nccl, float and double, sizes from 8 B to
#    4 MiB cut into buckets of 0.25 MiB: every row's #wrong is 0 (inputs
#    whose sum is exact, guard elements untouched);
#  - N > 1: `dstrain train --device cuda --precision fp64` with
#    --allreduce nccl and with --allreduce mpi, same seed, 6 steps, buckets
#    of 0.02 MiB: the final parameters agree to 1e-12 relative (at 2 ranks
#    each sum is one addition, so they are expected bit for bit; the script
#    says which), --check-sync 1 found every rank bit-identical after every
#    step, every step had several buckets, and the NCCL run's metrics carry
#    device reduction times (from the second step on, an earlier step's).
# usage: test_nccl_ranks.sh DSTRAIN BENCH_ALLREDUCE WORKDIR N
# Prints "skipped: ..." and exits 77 with fewer than N GPUs or without NCCL.
set -uo pipefail
bin=$1 bench=$2 work=$3 np=$4
. "$(dirname "$0")/gpus.sh"
require_gpus "$bin" "$np"
rm -rf "$work" && mkdir -p "$work"
. "$(dirname "$0")/../lib/checks.sh"
finish() { echo "test_nccl_ranks ($np): $pass passed, $fail failed"; [ "$fail" -eq 0 ]; exit; }

for t in float double; do
  if timeout 600 mpiexec -np "$np" "$bench" --transport nccl -d $t -b 8 -e 4M -f 4 -n 5 -w 2 \
       --bucket-mb 0.25 --timeout 60 >"$work/bench_$t.out" 2>&1; then ok
  else bad "bench_allreduce --transport nccl -d $t: $(tail -3 "$work/bench_$t.out")"; fi
  cat "$work/bench_$t.out"
  awk '!/^#/ && NF { rows++; if ($NF != "0") bad++ } END { exit !(rows == 10 && bad == 0) }' \
    "$work/bench_$t.out" && ok || bad "bench -d $t: a #wrong is not 0, or rows are missing"
done
[ "$np" -gt 1 ] || finish   # one rank: dstrain train makes no reducer

common=(train --device cuda --model tiny --synthetic --precision fp64 --steps 6 --seed 11
        --max-frames 160 --batch 4 --print-every 0 --checkpoint-every 6 --bucket-mb 0.02
        --check-sync 1 --timeout 120)
for t in mpi nccl; do
  if timeout 600 mpiexec -np "$np" "$bin" "${common[@]}" --allreduce $t --checkpoint-dir "$work/$t" \
       --log "$work/$t.jsonl" >"$work/$t.out" 2>&1; then ok
  else bad "--allreduce $t failed: $(tail -3 "$work/$t.out")"; fi
done
if "${DSTRAIN_TEST_PYTHON:-/usr/bin/python3}" - "$work" <<'PY'
import json, sys, h5py, numpy as np
w = sys.argv[1]
a, b = (h5py.File(f"{w}/{t}/step-00000006.h5", "r")["params"] for t in ("mpi", "nccl"))
worst, same = 0.0, True
for name in a:
    x, y = a[name][()], b[name][()]
    same = same and np.array_equal(x, y)
    worst = max(worst, np.linalg.norm(x - y) / max(np.linalg.norm(x), 1e-300))
print(f"nccl vs mpi: worst relative parameter difference {worst:.3g}, bit for bit: {same}")
log = [json.loads(l) for l in open(f"{w}/nccl.jsonl")]
# BatchNorm's backward sums are timed on their own stream (a step's line
# carries an earlier step's device times)
ok = (len(log) == 6 and all(s["buckets"] > 1 for s in log) and any(s["reduce_ms"] > 0 for s in log[1:])
      and any(s["bn_sums"] > 0 and s["bn_sum_ms"] > 0 for s in log[1:]))
print("nccl metrics:", {k: log[-1].get(k) for k in ("buckets", "buckets_early", "reduce_ms",
                                                   "reduce_hidden_ms", "reduce_wait_ms", "bn_sums",
                                                   "bn_sum_ms", "buckets_beside_bn_sums")})
sys.exit(0 if worst <= 1e-12 and ok else 1)
PY
then ok; else bad "nccl and mpi runs differ, or the nccl metrics lack buckets or times"; fi
finish
