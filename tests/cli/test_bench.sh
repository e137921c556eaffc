#!/usr/bin/env bash
# dstrain bench on the tiny preset on the CPU, as a user runs it: the JSON
# and CSV are well formed and agree; warm-up steps are not timed (a step made
# 0.5 s slower with DSTRAIN_FAULT=slow shows only when it is a timed one);
# forward-only steps do less than a third of training's work; --profile layers names
# every layer and its times fit in the step; --batch max finds the limit an
# artificial memory cap sets (the batch it names fits, one more does not);
# under mpiexec -np 2 the results count both ranks.
# usage: test_bench.sh DSTRAIN
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../lib/checks.sh"
bin=$1
py=/usr/bin/python3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
run() { "$bin" bench --model tiny --max-frames 200 "$@"; }
# field FILE EXPR: a Python expression over the first result r (and the document d)
field() { "$py" -c "import json,sys; d=json.load(open(sys.argv[1])); r=d['results'][0]; print($2)" "$1"; }

# 1. JSON and CSV of two configurations (each in its own process)
if run --batch 2,4 --warmup 1 --steps 3 --out a.json --csv a.csv >out.txt 2>err.txt; then ok; else
  bad "bench --batch 2,4 failed: $(cat err.txt)"; fi
"$py" - a.json a.csv <<'PY' && ok || bad "JSON/CSV of bench --batch 2,4"
import csv, json, sys
d = json.load(open(sys.argv[1]))
assert d["tool"] == "dstrain bench" and d["schema"] == 1
for k in ("host", "cpu", "threads", "versions", "git", "command", "date"):
    assert k in d["env"], k
res = d["results"]
assert [r["batch"] for r in res] == [2, 4], res
for r in res:
    assert r["status"] == "ok" and r["model"] == "tiny" and r["device"] == "cpu"
    assert r["precision"] == "fp32" and r["mode"] == "train" and r["ranks"] == 1
    assert len(r["step_ms_all"]) == 3
    for k in ("samples_per_s", "step_ms", "audio_s_per_s", "flops_per_step", "flop_per_s",
              "peak_flop_per_s", "peak_fraction", "peak_mem_bytes"):
        assert r[k] > 0, k
    lo, hi = r["samples_per_s_ci95"]
    assert lo <= r["samples_per_s_mean"] <= hi
    steps = sorted(r["step_ms_all"])
    assert abs(r["step_ms"] - steps[1]) < 1e-9          # the median of 3
    assert abs(r["samples_per_s"] - 2 * 1000 / (r["step_ms"] / r["batch"] * 2)) < 1e-6 * r["samples_per_s"]
    assert "sgemm" in r["peak_source"]
assert res[1]["peak_mem_bytes"] > res[0]["peak_mem_bytes"]   # a bigger batch holds more
rows = list(csv.DictReader(open(sys.argv[2])))
assert len(rows) == 2 and [int(x["batch"]) for x in rows] == [2, 4]
assert abs(float(rows[0]["samples_per_s"]) - res[0]["samples_per_s"]) < 1e-6 * res[0]["samples_per_s"]
PY
grep -qE '^tiny +cpu +fp32 +train +4 ' out.txt && ok || bad "no table row for batch 4: $(cat out.txt)"

# 2. warm-up excluded: steps count from 1; warm-up 2, timed 3..5
DSTRAIN_FAULT=slow:0:2 run --batch 2 --warmup 2 --steps 3 --out w.json >/dev/null 2>&1 || bad "slow warm-up run"
[ "$(field w.json "sum(t >= 450 for t in r['step_ms_all'])")" = 0 ] && ok || bad "a slow warm-up step was timed"
DSTRAIN_FAULT=slow:0:4 run --batch 2 --warmup 2 --steps 3 --out t.json >/dev/null 2>&1 || bad "slow timed run"
[ "$(field t.json "[t >= 450 for t in r['step_ms_all']]")" = "[False, True, False]" ] && ok ||
  bad "the slow second timed step: $(field t.json "r['step_ms_all']")"

# 3. forward-only against training steps, one process each
run --batch 4 --mode train,forward --warmup 2 --steps 5 --out m.json >/dev/null 2>&1 || bad "train,forward"
# (cheaper in work, counted; its time is measured, not asserted: on the tiny
# preset a step is milliseconds, and a loaded machine reversed the order once)
[ "$(field m.json "[x['mode'] for x in d['results']] == ['train', 'forward'] and d['results'][1]['step_ms'] > 0 and d['results'][1]['flops_per_step'] * 2.5 < d['results'][0]['flops_per_step']")" = True ] &&
  ok || bad "forward is not cheaper than train: $(field m.json "[(x['mode'], x['step_ms'], x['flops_per_step']) for x in d['results']]")"
# where the step's time goes: each step's enqueue lies inside the step, and
# the CPU computes while it queues, so it is most of the step; the main
# thread's CPU time is within its wall time; no kernels are counted on the CPU
"$py" - m.json <<'PY' && ok || bad "host_enqueue_ms / main_thread_cpu_share / launches_per_step: $(cat m.json)"
import json, sys
for r in json.load(open(sys.argv[1]))["results"]:
    mean = sum(r["step_ms_all"]) / len(r["step_ms_all"])
    assert 0.5 * mean <= r["host_enqueue_ms"] <= mean * (1 + 1e-9), (r["mode"], r["host_enqueue_ms"], mean)
    assert 0 < r["main_thread_cpu_share"] <= 1.02, (r["mode"], r["main_thread_cpu_share"])
    assert r["launches_per_step"] is None and r["kernel_ms_per_step"] is None and r["bound"] is None, r["mode"]
    assert r["choices"] == [], r["choices"]   # the CPU has one algorithm per op
PY

# 4. per-layer profile and its trace
run --batch 4 --warmup 1 --steps 3 --profile layers --trace trace.json --out p.json >p.txt 2>&1 || bad "--profile layers: $(cat p.txt)"
"$py" - p.json trace.json <<'PY' && ok || bad "--profile layers: $(cat p.txt)"
import json, sys
r = json.load(open(sys.argv[1]))["results"][0]
names = [l["name"] for l in r["layers"]]
for want in ("conv 1", "conv_to_seq", "rnn 1", "rnn 2", "output"):
    assert want in names, (want, names)
conv = r["layers"][names.index("conv 1")]
assert conv["fwd_ms"] > 0 and conv["bwd_ms"] > 0
total = sum(l["fwd_ms"] + l["bwd_ms"] for l in r["layers"])
# layer times are means over the timed steps: compare with the mean step, not
# the median (one slow step on a busy machine moves the two apart)
assert 0.3 * r["step_ms_mean"] < total <= 1.02 * r["step_ms_mean"], (total, r["step_ms_mean"])
phases = {p["name"]: p["ms"] for p in r["phases"]}
assert {"forward", "backward", "optimizer"} <= set(phases), phases
events = json.load(open(sys.argv[2]))["traceEvents"]
assert len(events) >= 3 * len(names) and all(e["ph"] == "X" and e["dur"] >= 0 for e in events)
PY
grep -q "time per step by layer" p.txt && ok || bad "no layer table printed"

# 5. --batch max under a memory cap; then the batch it found fits and one more does not
cap=40
run --batch max --max-batch 64 --mem-limit $cap --warmup 1 --steps 2 --out x.json >x.txt 2>&1 || bad "--batch max: $(cat x.txt)"
max=$(sed -nE 's/^# largest batch that fits: ([0-9]+).*/\1/p' x.txt)
if [ -n "$max" ] && [ "$max" -gt 1 ] && [ "$max" -lt 64 ]; then ok; else bad "--batch max found '$max': $(cat x.txt)"; fi
run --batch "$max" --mem-limit $cap --warmup 1 --steps 1 --out f1.json >/dev/null 2>&1
[ "$(field f1.json "r['status']")" = ok ] && ok || bad "batch $max does not fit under $cap MiB"
run --batch $((max + 1)) --mem-limit $cap --warmup 1 --steps 1 --out f2.json >/dev/null 2>&1
[ "$(field f2.json "r['status']")" = oom ] && ok || bad "batch $((max + 1)) fits under $cap MiB"
# every measured batch of the ladder is there, ending at the maximum
[ "$(field x.json "[x['batch'] for x in d['results']][-1] == $max and all(x['status'] == 'ok' for x in d['results'])")" = True ] &&
  ok || bad "the ladder of --batch max: $(field x.json "[(x['batch'], x['status']) for x in d['results']]")"

# 6. two ranks: the global batch and both ranks counted
mpiexec -np 2 "$bin" bench --model tiny --max-frames 200 --batch 2 --warmup 1 --steps 2 --out r.json >r.txt 2>&1 ||
  bad "mpiexec -np 2 bench: $(cat r.txt)"
[ "$(field r.json "(r['ranks'], r['global_batch'], r['status'])")" = "(2, 4, 'ok')" ] && ok ||
  bad "2 ranks: $(field r.json "(r['ranks'], r['global_batch'], r['status'])")"
# ... and the machines they ran on: every node's host and CPU, its ranks
want="(1, '$(hostname)', [0, 1], True)"
got=$(field r.json "(d['env']['node_count'], d['env']['nodes'][0]['host'], d['env']['nodes'][0]['ranks'], len(d['env']['nodes'][0]['cpu']) > 0 or 'model name' not in open('/proc/cpuinfo').read())")
[ "$got" = "$want" ] && ok || bad "2 ranks' nodes: $got, expected $want"

# 7. bad input is refused with a message naming the flag
run --batch 0 2>e.txt >/dev/null; [ $? -eq 2 ] && grep -q -- "--batch" e.txt && ok || bad "--batch 0 accepted"
run --precision fp8 2>e.txt >/dev/null; [ $? -eq 2 ] && grep -q -- "--precision" e.txt && ok || bad "--precision fp8 accepted"
run --warmup 0 2>e.txt >/dev/null; [ $? -eq 2 ] && ok || bad "--warmup 0 accepted"
run --profile kernels --warmup 1 --steps 1 2>e.txt >/dev/null; [ $? -ne 0 ] && grep -q "kernel profiler" e.txt && ok ||
  bad "--profile kernels on the cpu: $(cat e.txt)"

echo "test_bench: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
