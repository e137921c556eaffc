#!/usr/bin/env bash
# Loss scaling over real MPI ranks (4, oversubscribed), on the CPU in FP32:
#  - exact: power-of-two scales commute with rounding, so a run with a
#    dynamic scale that never overflows gives the same bits as one without
#    scaling (losses, norms, final parameters);
#  - the state machine: x2 after --loss-scale-window clean steps; an Inf
#    injected into one rank's gradients (DSTRAIN_FAULT=inf:RANK:STEP) makes
#    every rank skip that step together (--check-sync 1 compares all ranks'
#    parameters after every step) and halves the scale; training goes on;
#  - the same in fp16 (the CPU's emulated 16-bit storage, gradients summed
#    in 16 bits by our MPI op): the first steps overflow at 65536 on every
#    rank alike, then the injected Inf at step 16.
# usage: test_loss_scale.sh DSTRAIN WORKDIR
set -uo pipefail
bin=$1 work=$2
rm -rf "$work" && mkdir -p "$work"
. "$(dirname "$0")/../lib/checks.sh"

common=(train --model tiny --synthetic --steps 12 --batch 2 --seed 5 --max-frames 160 --print-every 0
        --check-sync 1 --checkpoint-every 12)
run() {   # run NAME ARGS...: 4 ranks, log and checkpoint under NAME
  local name=$1; shift
  if mpiexec -np 4 "$bin" "${common[@]}" --log "$work/$name.jsonl" --checkpoint-dir "$work/$name" "$@" \
       >"$work/$name.out" 2>&1; then ok
  else bad "$name failed: $(tail -3 "$work/$name.out")"; fi
}
run plain
run scaled --loss-scale dynamic --loss-scale-window 4
DSTRAIN_FAULT=inf:2:6 run fault --loss-scale dynamic --loss-scale-window 4
DSTRAIN_FAULT=inf:1:16 run fp16 --precision fp16 --steps 20 --checkpoint-every 20

grep -q "injected fault (inf) at step 6" "$work/fault.out" && ok || bad "the fault was not injected"
if /usr/bin/python3 - "$work" <<'PY'
import json, sys, h5py, numpy as np
w = sys.argv[1]
log = {n: [json.loads(l) for l in open(f"{w}/{n}.jsonl") if l.startswith('{"step"')]
       for n in ("plain", "scaled", "fault", "fp16")}
bad = []
# exact: same losses and norms, bit for bit, and the same final parameters
for a, b in zip(log["plain"], log["scaled"]):
    if a["loss"] != b["loss"] or a["grad_norm"] != b["grad_norm"]:
        bad.append(f"step {a['step']}: scaled loss/norm {b['loss']}/{b['grad_norm']} "
                   f"!= unscaled {a['loss']}/{a['grad_norm']}")
p, s = (h5py.File(f"{w}/{n}/step-00000012.h5", "r")["params"] for n in ("plain", "scaled"))
for name in p:
    if not np.array_equal(p[name][()], s[name][()]):
        bad.append(f"parameter {name} differs with loss scaling")
if "loss_scale" in log["plain"][0]:
    bad.append("an unscaled run logs a loss scale")
# the state machine: 4 clean steps double 65536; step 6 overflows on rank 2:
# skipped on every rank (check-sync passed), scale halved, then doubled again
want = [65536] * 4 + [131072, 131072] + [65536] * 4 + [131072, 131072]
got = [e["loss_scale"] for e in log["fault"]]
if got != want:
    bad.append(f"loss scales {got}, want {want}")
skipped = [e["step"] for e in log["fault"] if e["skipped"]]
if skipped != [6]:
    bad.append(f"skipped steps {skipped}, want [6]")
if [e["skipped_steps"] for e in log["fault"]] != [0] * 5 + [1] * 7:
    bad.append(f"skipped_steps {[e['skipped_steps'] for e in log['fault']]}")
f16 = log["fp16"]
early = [e["loss_scale"] for e in f16 if e["skipped"] and e["step"] < 16]
if not early or early[0] != 65536 or any(b != a / 2 for a, b in zip(early, early[1:])):
    bad.append(f"fp16: early overflows at scales {early}, want 65536 halving")
if not f16[15]["skipped"] or f16[16]["loss_scale"] != f16[15]["loss_scale"] / 2:
    bad.append(f"fp16: step 16 skipped {f16[15]['skipped']}, scale {f16[15]['loss_scale']} "
               f"-> {f16[16]['loss_scale']}")
if sum(e["skipped"] for e in f16) != len(early) + 1:
    bad.append(f"fp16: {sum(e['skipped'] for e in f16)} skipped steps, want {len(early) + 1}")
last = log["fault"][-1]["loss"]
if not (np.isfinite(last) and last < log["fault"][0]["loss"]):
    bad.append(f"training did not go on after the overflow: loss {log['fault'][0]['loss']} -> {last}")
print("\n".join(bad) if bad else f"exact under scaling over {len(log['plain'])} steps; "
      f"scales {got}; skipped {skipped}")
sys.exit(1 if bad else 0)
PY
then ok; else bad "loss scaling checks (above)"; fi
echo "test_loss_scale: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
