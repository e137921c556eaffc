#!/usr/bin/env bash
# dstrain against stock PyTorch on this machine's CPU, alternating the two in
# one run so both see the same machine: small at batch 8 and ds2 at batch 4
# (synthetic lengths up to 400 frames, fp32, 2 threads each), the issue's
# comparison. Prints both throughputs, the ratio and dstrain's FLOP/s against
# the sgemm rate measured in the same run; writes the JSONs to DIR.
# usage: bench/cpu-vs-pytorch.sh [DIR]   (env: ROUNDS=2 THREADS=2 DSTRAIN=build/dstrain)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
bin=${DSTRAIN:-$here/build/dstrain}
dir=${1:-$here/out/cpu-vs-pytorch}
rounds=${ROUNDS:-2} threads=${THREADS:-2}
mkdir -p "$dir"
export OPENBLAS_NUM_THREADS=$threads
# preset batch dstrain-steps torch-steps (ds2 in torch takes about a minute a step here)
cases=("small 8 3 10" "ds2 4 2 4")
for r in $(seq "$rounds"); do
  for c in "${cases[@]}"; do
    read -r model batch warm steps <<<"$c"
    "$bin" bench --model "$model" --batch "$batch" --max-frames 400 --warmup "$warm" --steps "$steps" \
      --out "$dir/dstrain-$model-r$r.json" >/dev/null
    /usr/bin/python3 "$here/bench/pytorch_ds2.py" --model "$model" --batch "$batch" --max-frames 400 \
      --threads "$threads" --impl eager --precision fp32 --warmup 1 --steps "$((steps > 4 ? 4 : steps))" \
      --out "$dir/torch-$model-r$r.json" >/dev/null
  done
done
/usr/bin/python3 - "$dir" "$rounds" <<'PY'
import json, statistics, sys
d, rounds = sys.argv[1], int(sys.argv[2])
def res(p): return json.load(open(p))["results"][0]
print(f"{'model':6} {'batch':>5} {'dstrain ms':>11} {'torch ms':>9} {'ratio':>6} {'GFLOP/s':>8} {'sgemm GF/s':>10} {'of sgemm':>8}")
for model, batch in (("small", 8), ("ds2", 4)):
    ds = [res(f"{d}/dstrain-{model}-r{r}.json") for r in range(1, rounds + 1)]
    th = [res(f"{d}/torch-{model}-r{r}.json") for r in range(1, rounds + 1)]
    dms = statistics.median(x["step_ms"] for x in ds)
    tms = statistics.median(x["step_ms"] for x in th)
    gf = statistics.median(x["flop_per_s"] for x in ds) / 1e9
    peak = statistics.median(x["peak_flop_per_s"] for x in ds) / 1e9
    print(f"{model:6} {batch:5} {dms:11.1f} {tms:9.1f} {tms / dms:6.2f} {gf:8.1f} {peak:10.1f} {100 * gf / peak:7.1f}%")
PY
