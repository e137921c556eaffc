#!/usr/bin/python3
"""bench/pytorch_ds2.py --steps 3 --warmup 1 on the tiny preset writes a
well-formed bench JSON and CSV.

Runs: --model tiny --batch 2,4 --mode train,forward --impl eager,amp,compile
--threads 1 --pool 1 --steps 3 --warmup 1 (one thread: under ctest -j2
another test shares the 2 cores, and spinning OpenMP threads oversubscribed
make steps 50x slower). Asserts:
- tool "pytorch_ds2", schema 1, the env keys, 12 results (2 batches x 2
  modes x 3 impls: torch-eager fp32, torch-amp bf16 (the CPU's autocast),
  torch-compile fp32);
- every ok result has every schema field; step_ms_all holds 3 steps,
  step_ms is their median, step_ms_mean their mean, the CI brackets the mean,
  samples_per_s is the median of batch / step, global_batch = batch, ranks 1;
- frames_per_step and flops_per_step equal the batch the script draws
  (make_batch, --pool 1, seed 1) through benchlib's formula;
- benchlib's formula on one tiny utterance of 100 frames equals the
  hand-computed value (below);
- eager and amp are ok; torch-compile is ok on torch >= 2, else status
  "error" with a message naming torch.compile;
- the CSV has a header and one row per result, with the same samples_per_s;
- exit status 0 if all ok, 3 if some result is not ok.

FLOPs by hand, tiny, one utterance of 100 frames: conv (5x21, stride 2x4,
pad 2x10): ho = (100+4-5)//2+1 = 50, wo = (161+20-21)//4+1 = 41,
2*4*50*41*1*5*21 = 1722000; GRU 32 (G=3), bidirectional, L = 50: layer 1 in
4*41 = 164: 2*50*2*3*32*(164+32) = 3763200, layer 2: 2*50*2*3*32*64 =
1228800; FC: 50*2*32*29 = 92800; forward 6806800; train = 3 * 6806800 -
1722000 = 18698400.
"""

import csv
import json
import math
import os
import random
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fixtures import BENCH, Checker, near, run  # noqa: E402

sys.path.insert(0, BENCH)
import benchlib as bl  # noqa: E402

ck = Checker("pytorch_ds2_smoke")
cfg = bl.load_config("tiny")
ck(bl.flops_per_step(cfg, [100], "forward") == 6806800, "tiny 100 frames: forward 6806800 FLOPs")
ck(bl.flops_per_step(cfg, [100], "train") == 18698400, "tiny 100 frames: train 18698400 FLOPs")

FIELDS = ["model", "device", "precision", "mode", "impl", "batch", "ranks", "global_batch",
          "status", "warmup", "steps", "samples_per_s", "samples_per_s_mean",
          "samples_per_s_ci95", "samples_per_s_per_rank", "step_ms", "step_ms_mean",
          "step_ms_ci95", "step_ms_all", "audio_s_per_s", "frames_per_step", "peak_mem_bytes",
          "flops_per_step", "flop_per_s", "peak_flop_per_s", "peak_source", "peak_fraction",
          "config"]

with tempfile.TemporaryDirectory() as tmp:
    js, cs = os.path.join(tmp, "r.json"), os.path.join(tmp, "r.csv")
    rc, out = run("pytorch_ds2.py", "--model", "tiny", "--batch", "2,4", "--mode", "train,forward",
                  "--impl", "eager,amp,compile", "--threads", "1", "--pool", "1", "--steps", "3",
                  "--warmup", "1", "--out", js, "--csv", cs)
    print(out)
    with open(js) as f:
        d = json.load(f)
    ck(d.get("tool") == "pytorch_ds2" and d.get("schema") == 1, "tool pytorch_ds2, schema 1")
    env = d.get("env", {})
    ck(all(k in env for k in ("host", "cpu", "threads", "device_name", "gpu", "versions", "git",
                              "command", "date")) and env["threads"] == 1
       and "torch" in env["versions"], "env keys, threads 1, torch version")
    res = d["results"]
    ck(len(res) == 12, "12 results (got %d)" % len(res))
    import torch  # noqa: E402 - only to know what torch.compile should do
    has_compile = hasattr(torch, "compile")
    import pytorch_ds2 as pd  # noqa: E402
    for r in res:
        tag = "%s %s %s b%d" % (r["impl"], r["precision"], r["mode"], r["batch"])
        if r["impl"] == "torch-compile" and not has_compile:
            ck(r["status"] == "error" and "torch.compile" in r.get("error", ""),
               "%s: error naming torch.compile" % tag)
            continue
        if not ck(r["status"] == "ok", "%s: ok (%s)" % (tag, r.get("error"))):
            continue
        missing = [k for k in FIELDS if k not in r]
        ck(not missing, "%s: all fields (missing %s)" % (tag, missing))
        s = r["step_ms_all"]
        rates = [r["batch"] * 1000.0 / x for x in s]
        ck(len(s) == 3 and near(r["step_ms"], statistics.median(s))
           and near(r["step_ms_mean"], sum(s) / 3)
           and r["step_ms_ci95"][0] <= r["step_ms_mean"] <= r["step_ms_ci95"][1]
           and near(r["samples_per_s"], statistics.median(rates))
           and r["global_batch"] == r["batch"] and r["ranks"] == 1,
           "%s: statistics consistent with step_ms_all" % tag)
        ck(r["precision"] == {"torch-eager": "fp32", "torch-amp": "bf16",
                              "torch-compile": "fp32"}[r["impl"]], "%s: precision" % tag)
        rng = random.Random(1)
        gen = torch.Generator().manual_seed(1)
        b = pd.make_batch(cfg, r["batch"], 400, "read", rng, gen)
        ck(r["frames_per_step"] == sum(b["list"])
           and r["flops_per_step"] == bl.flops_per_step(cfg, b["list"], r["mode"])
           and near(r["flop_per_s"], r["flops_per_step"] / (r["step_ms"] / 1000)),
           "%s: frames %s and FLOPs of the drawn batch" % (tag, r["frames_per_step"]))
        ck(r["peak_source"].startswith(("sgemm measured", "bf16 gemm measured"))
           and r["peak_flop_per_s"] > 0 and 0 < r["peak_fraction"] < 1,
           "%s: peak %s" % (tag, r["peak_source"]))
    with open(cs) as f:
        rows = list(csv.DictReader(f))
    ck(len(rows) == 12 and all((row["samples_per_s"] == "" and r["status"] != "ok") or
                               near(float(row["samples_per_s"]), r["samples_per_s"])
                               for row, r in zip(rows, res)),
       "CSV: 12 rows, samples_per_s as in the JSON")
    want_rc = 0 if all(r["status"] == "ok" for r in res) else 3
    ck(rc == want_rc, "exit status %d (got %d)" % (want_rc, rc))
ck.close()
