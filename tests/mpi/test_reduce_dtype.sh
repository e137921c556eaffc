#!/usr/bin/env bash
# --reduce-dtype over 2 real MPI ranks (MPI transport, direct and staged):
#  - fp32 gradients summed as fp32 give the default run's bits;
#  - summed as fp16 or bf16 (converted on the wire, summed by our 16-bit
#    MPI op) they give other bits (the conversion happens), every rank still
#    holds the same parameters (--check-sync 1), and training follows the
#    fp32 run (each step's loss within 2%);
#  - a dtype that is not one is refused, naming the flag.
# usage: test_reduce_dtype.sh DSTRAIN WORKDIR
set -uo pipefail
bin=$1 work=$2
rm -rf "$work" && mkdir -p "$work"
. "$(dirname "$0")/../lib/checks.sh"

common=(train --model tiny --synthetic --steps 30 --batch 4 --seed 9 --print-every 0 --check-sync 1
        --bucket-mb 0.02)
run() {   # run NAME ARGS...
  local name=$1; shift
  if mpiexec -np 2 "$bin" "${common[@]}" --log "$work/$name.jsonl" "$@" >"$work/$name.out" 2>&1; then ok
  else bad "$name failed: $(tail -3 "$work/$name.out")"; fi
}
run default
run fp32 --reduce-dtype fp32
run fp16 --reduce-dtype fp16
run bf16 --reduce-dtype bf16
DSTRAIN_STAGE_ALLREDUCE=1 run fp16staged --reduce-dtype fp16

if /usr/bin/python3 - "$work" <<'PY'
import json, sys
w = sys.argv[1]
log = {n: [(e["loss"], e["grad_norm"]) for e in map(json.loads, open(f"{w}/{n}.jsonl"))]
       for n in ("default", "fp32", "fp16", "bf16", "fp16staged")}
bad = []
if log["fp32"] != log["default"]:
    bad.append("--reduce-dtype fp32 differs from the default")
for n in ("fp16", "bf16"):
    if log[n] == log["default"]:
        bad.append(f"--reduce-dtype {n} gives the fp32 bits: nothing was converted")
    worst = max(abs(a[0] - b[0]) / b[0] for a, b in zip(log[n], log["default"]))
    if worst > 0.02:
        bad.append(f"--reduce-dtype {n}: a step's loss {worst:.3%} off the fp32 run")
if log["fp16staged"] != log["fp16"]:
    bad.append("the staged path sums fp16 differently from the direct one")
print("\n".join(bad) if bad else "fp32 wire = default; fp16/bf16 wire differ and follow it; staged = direct")
sys.exit(1 if bad else 0)
PY
then ok; else bad "reduce-dtype checks (above)"; fi
if "$bin" train --synthetic --reduce-dtype fp8 >/dev/null 2>"$work/err.txt"; then bad "fp8 accepted"
else grep -q -- "--reduce-dtype fp8: expected" "$work/err.txt" && ok || bad "fp8: $(cat "$work/err.txt")"; fi
echo "test_reduce_dtype: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
