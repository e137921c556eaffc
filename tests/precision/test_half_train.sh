#!/usr/bin/env bash
# fp16 and bf16 training on the CPU (emulated 16-bit storage, ops_half.inc)
# against fp32 on the same data and seed, tiny preset, 150 steps:
#  - both learn like fp32: the mean loss of the last 20 steps within 25% of
#    fp32's, and far below the first;
#  - fp16 runs with the dynamic loss scale (every log line carries it): the
#    first steps overflow at 65536 and are skipped, the scale halving each
#    time, until steps go through; bf16 needs no scale;
#  - an Inf injected at step 100 (DSTRAIN_FAULT=inf:0:100) is skipped, the
#    scale halves, and training goes on;
#  - the fp16 checkpoint holds FP32 parameters (the master copy).
# usage: test_half_train.sh DSTRAIN WORKDIR
set -uo pipefail
bin=$1 work=$2
rm -rf "$work" && mkdir -p "$work"
. "$(dirname "$0")/../lib/checks.sh"

common=(train --model tiny --synthetic --steps 150 --seed 3 --print-every 0)
for p in fp32 fp16 bf16; do
  if "$bin" "${common[@]}" --precision $p --log "$work/$p.jsonl" >"$work/$p.out" 2>&1; then ok
  else bad "$p training failed: $(tail -3 "$work/$p.out")"; fi
done
if DSTRAIN_FAULT=inf:0:100 "$bin" "${common[@]}" --precision fp16 --log "$work/fault.jsonl" \
     --checkpoint-dir "$work/ckpt" --checkpoint-every 150 >"$work/fault.out" 2>&1; then ok
else bad "fp16 with an injected Inf failed: $(tail -3 "$work/fault.out")"; fi

if /usr/bin/python3 - "$work" <<'PY'
import json, math, statistics, sys, h5py
w = sys.argv[1]
log = {n: [json.loads(l) for l in open(f"{w}/{n}.jsonl") if l.startswith('{"step"')]
       for n in ("fp32", "fp16", "bf16", "fault")}
bad = []
tail = {n: statistics.mean(e["loss"] for e in log[n][-20:]) for n in log}
for n in ("fp16", "bf16"):
    if abs(tail[n] - tail["fp32"]) > 0.25 * tail["fp32"]:
        bad.append(f"{n} ends at mean loss {tail[n]:.3f}, fp32 at {tail['fp32']:.3f}")
    if not tail[n] < 0.05 * log[n][0]["loss"]:
        bad.append(f"{n} did not learn: {log[n][0]['loss']:.1f} -> {tail[n]:.3f}")
f16 = log["fp16"]
if any("loss_scale" not in e for e in f16):
    bad.append("an fp16 log line lacks loss_scale")
if any("loss_scale" in e for e in log["fp32"] + log["bf16"]):
    bad.append("fp32 or bf16 logs a loss scale")
early = [e for e in f16[:20] if e["skipped"]]
if not early or early[0]["loss_scale"] != 65536:
    bad.append(f"fp16 did not start at 65536 with a skipped overflow: {f16[0]}")
for a, b in zip(early, early[1:]):
    if b["loss_scale"] != a["loss_scale"] / 2:
        bad.append(f"scale {a['loss_scale']} then {b['loss_scale']} after a skip")
if len(early) == 20 or sum(e["skipped"] for e in f16[20:]) > 0:
    bad.append(f"fp16 kept skipping: {sum(e['skipped'] for e in f16)} of {len(f16)} steps")
fault = log["fault"]
s100, s101 = fault[99], fault[100]
if not s100["skipped"] or s101["loss_scale"] != s100["loss_scale"] / 2:
    bad.append(f"injected Inf: step 100 skipped {s100['skipped']}, scale {s100['loss_scale']} "
               f"-> {s101['loss_scale']}")
if not (math.isfinite(fault[-1]["loss"]) and statistics.mean(e["loss"] for e in fault[-20:]) < 1.25 * tail["fp32"]):
    bad.append(f"training did not go on after the Inf: last loss {fault[-1]['loss']}")
ck = h5py.File(f"{w}/ckpt/step-00000150.h5", "r")
kinds = {str(ck["params"][k].dtype) for k in ck["params"]}
if kinds != {"float32"} or ck.attrs["dtype"] != b"float16" and ck.attrs["dtype"] != "float16":
    bad.append(f"fp16 checkpoint: params {kinds}, dtype {ck.attrs['dtype']}")
print("\n".join(bad) if bad else
      f"mean loss of the last 20 steps: fp32 {tail['fp32']:.3f}, fp16 {tail['fp16']:.3f}, "
      f"bf16 {tail['bf16']:.3f}; fp16 skipped {len(early)} early steps down to scale "
      f"{f16[len(early)]['loss_scale']:g}")
sys.exit(1 if bad else 0)
PY
then ok; else bad "half-precision training checks (above)"; fi
echo "test_half_train: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
