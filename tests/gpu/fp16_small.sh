#!/usr/bin/env bash
# On the GPU: the small preset, 300 steps on synthetic data, fp16 (dynamic
# loss scaling) and bf16 against fp32 on the same data and seed: the mean
# loss of the last 20 steps within 5% of fp32's. Skips (77) without a device.
# usage: fp16_small.sh DSTRAIN WORKDIR
set -uo pipefail
bin=$1 work=$2
. "$(dirname "$0")/cuda_device.sh"
require_cuda_device "$bin"
rm -rf "$work" && mkdir -p "$work"
. "$(dirname "$0")/../lib/checks.sh"
for p in fp32 fp16 bf16; do
  if "$bin" train --model small --synthetic --device cuda --precision $p --steps 300 --batch 16 \
       --seed 4 --print-every 0 --log "$work/$p.jsonl" >"$work/$p.out" 2>&1; then ok
  else bad "$p: $(tail -3 "$work/$p.out")"; fi
done
if /usr/bin/python3 - "$work" <<'PY'
import json, statistics, sys
w = sys.argv[1]
tail = {p: statistics.mean(json.loads(l)["loss"] for l in open(f"{w}/{p}.jsonl").readlines()[-20:])
        for p in ("fp32", "fp16", "bf16")}
bad = [f"{p}: mean loss {tail[p]:.4f}, fp32 {tail['fp32']:.4f}" for p in ("fp16", "bf16")
       if abs(tail[p] - tail["fp32"]) > 0.05 * tail["fp32"]]
print("\n".join(bad) if bad else f"mean loss of the last 20 steps: {tail}")
sys.exit(1 if bad else 0)
PY
then ok; else bad "16-bit training does not follow fp32 (above)"; fi
echo "fp16_small: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
