#!/usr/bin/env bash
# dstrain against stock PyTorch on this machine's CPU, alternating the two in
# one run so both see the same machine: small at batch 8 and ds2 at batch 4
# (synthetic lengths up to 400 frames, fp32, 2 threads each), the issue's
# comparison. dstrain runs once per CPU instruction-set path in ISAS (each
# forced with DSTRAIN_CPU_ISA) beside one PyTorch run. Prints the CPU it ran
# on, both throughputs, the ratio and dstrain's FLOP/s against the sgemm
# rate measured in the same run; writes the JSONs and summary.txt to DIR.
# usage: bench/cpu-vs-pytorch.sh [DIR]
#   env: ROUNDS=2 THREADS=2 DSTRAIN=build/dstrain ISAS="auto" (e.g. "avx512 avx2")
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
bin=${DSTRAIN:-$here/build/dstrain}
dir=${1:-$here/out/cpu-vs-pytorch}
rounds=${ROUNDS:-2} threads=${THREADS:-2} isas=${ISAS:-auto}
mkdir -p "$dir"
export OPENBLAS_NUM_THREADS=$threads
cpu=$(lscpu | sed -nE 's/^Model name: *//p' | head -1)
flags=$(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -xE 'avx512f|avx2|fma|asimd' | paste -sd ' ')
echo "CPU: $cpu ($(nproc) cores; $flags); paths: $isas" | tee "$dir/machine.txt"
# preset batch dstrain-steps torch-steps (ds2 in torch takes about a minute a step)
cases=("small 8 3 10" "ds2 4 2 4")
for r in $(seq "$rounds"); do
  for c in "${cases[@]}"; do
    read -r model batch warm steps <<<"$c"
    for isa in $isas; do
      DSTRAIN_CPU_ISA=$isa "$bin" bench --model "$model" --batch "$batch" --max-frames 400 \
        --warmup "$warm" --steps "$steps" --out "$dir/dstrain-$model-$isa-r$r.json" >/dev/null
    done
    /usr/bin/python3 "$here/bench/pytorch_ds2.py" --model "$model" --batch "$batch" --max-frames 400 \
      --threads "$threads" --impl eager --precision fp32 --warmup 1 --steps "$((steps > 4 ? 4 : steps))" \
      --out "$dir/torch-$model-r$r.json" >/dev/null
  done
done
/usr/bin/python3 - "$dir" "$rounds" "$isas" <<'PY' | tee "$dir/summary.txt"
import json, statistics, sys
d, rounds, isas = sys.argv[1], int(sys.argv[2]), sys.argv[3].split()
def res(p): return json.load(open(p))["results"][0]
def env(p): return json.load(open(p))["env"]
print(f"{'model':6} {'batch':>5} {'path':8} {'dstrain ms':>11} {'torch ms':>9} {'ratio':>6} {'GFLOP/s':>8} {'sgemm GF/s':>10} {'of sgemm':>8}")
for model, batch in (("small", 8), ("ds2", 4)):
    th = [res(f"{d}/torch-{model}-r{r}.json") for r in range(1, rounds + 1)]
    tms = statistics.median(x["step_ms"] for x in th)
    for isa in isas:
        files = [f"{d}/dstrain-{model}-{isa}-r{r}.json" for r in range(1, rounds + 1)]
        ds = [res(f) for f in files]
        path = env(files[0]).get("cpu_isa", isa)
        dms = statistics.median(x["step_ms"] for x in ds)
        gf = statistics.median(x["flop_per_s"] for x in ds) / 1e9
        peak = statistics.median(x["peak_flop_per_s"] for x in ds) / 1e9
        print(f"{model:6} {batch:5} {path:8} {dms:11.1f} {tms:9.1f} {tms / dms:6.2f} {gf:8.1f} {peak:10.1f} {100 * gf / peak:7.1f}%")
PY
