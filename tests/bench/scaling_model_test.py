#!/usr/bin/python3
"""bench/scaling-model against hand-computed values.

Case A: a one-GPU result, step 30 ms, phases backward 12 ms and optimizer
3 ms (so rest = 30 - 12 - 3 = 15 ms), layers with their parameter counts
(listed in forward order; backward runs them last first):
    conv 1  bwd 4 ms, 1e6 params      rnn 1  bwd 6 ms, 2e6 params
    output+fc+lookahead  bwd 2 ms, 1e6 params
fp32: 4 bytes per parameter -> buckets (per layer, --bucket-mb 0) of
4e6, 8e6, 4e6 bytes, final at 2, 8 and 12 ms of backward.
Link: --network custom --bandwidth 10 (GB/s) --latency 10 (us), --local-bn.
Ring cost of S bytes on N ranks: 2(N-1)/N * S/B + 2(N-1) * latency.
  N=2: 4e6 B -> 4e6/1e10 s = 0.4 ms + 2*10 us = 0.42 ms; 8e6 B -> 0.82 ms.
       head  2 -> 2.42;  rnn 8 -> 8.82;  conv 12 -> 12.42
       step = 15 + max(12, 12.42) + 3 = 30.42 ms, efficiency 30/30.42
  N=4: 1.5 * S/1e10 + 6 * 10 us: 4e6 -> 0.66 ms, 8e6 -> 1.26 ms
       conv 12 -> 12.66: step = 30.66 ms
Case A with --bucket-mb 8 (8388608 B), buckets cut from the end of the
16e6-byte buffer: [0, 8388608) needs head (4e6) and rnn (to 12e6): ready at
8 ms; [8388608, 16e6) = 7611392 B ready at 12 ms. N=2:
       8 + 0.8388608 + 0.02 = 8.8588608; 12 + 0.7611392 + 0.02 = 12.7811392
       step = 15 + 12.7811392 + 3 = 30.7811392 ms
Case A on a slow link (--bandwidth 0.5, per layer): N=2
       head 2 + 8.02 = 10.02; rnn starts at 10.02 (channel busy), + 16.02 =
       26.04; conv starts 26.04, + 8.02 = 34.06: step = 15 + 34.06 + 3 =
       52.06 ms, exposed 34.06 - 12 = 22.06 ms
Case B, synchronised BatchNorm, the tiny preset's layers by dstrain bench's
names (conv 1; conv_to_seq; rnn 1, rnn 2; lookahead+fc and output forward
only; output+fc+lookahead backward only). Parameters from configs/tiny.json:
    conv 1: 4*1*5*21 + 4 + 2*4 = 432 (BatchNorm 4 channels)
    rnn 1:  input 4 ch x 41 bins = 164; 2 dirs x (3*32*(164+32) + 2*3*32) = 38016
    rnn 2:  2 x (3*32*(32+32) + 192) + BatchNorm 2*32 = 12736 (BatchNorm 32)
    head:   fc.bn 2*32 + fc 32*29 = 992 (BatchNorm 32)        total 52176
Backward times: head 1, rnn 2 2, rnn 1 3, conv_to_seq 0.5, conv 1 1.5 ms
(phase backward 8), optimizer 1, step 20 -> rest 11 ms. Link 1 GB/s, 100 us,
N=2: cost(S) = S * 1e-6 ms + 0.2 ms; a BatchNorm sum is 2 x C doubles.
  forward syncs: 32, 32, 4 channels -> 0.200512 + 0.200512 + 0.200064 = 0.601088
  head: t=1, BN sum 1 -> 1.200512 (t = 1.200512), bucket 3968 B -> 1.40448
  rnn 2: t = 3.200512, BN sum -> 3.401024 (t), bucket 50944 B -> 3.651968
  rnn 1: t = 6.401024, bucket 152064 B -> 6.753088
  conv_to_seq: t = 6.901024 (no parameters)
  conv 1: t = 8.401024, BN sum -> 8.601088 (t), bucket 1728 B -> 8.802816
  step = 11 + 0.601088 + 8.802816 + 1 = 21.403904 ms
Case C, hierarchical: one layer of 16e6 bytes (4e6 params fp32), bwd 10 ms,
step 30, backward 10, optimizer 0; --network nvlink (450 GB/s, 3 us) with
ib-ndr (50 GB/s, 5 us) above 8 GPUs per node. N=16 (g=8, M=2):
  2*7/8 * 16e6/450e9 s + 14*3 us = 0.0622222 ms + 0.042 ms
  + 2*1/2 * 2e6/50e9 s + 2*5 us = 0.04 ms + 0.01 ms  -> reduce 0.1542222 ms
  step = 20 + 10 + 0.1542222 = 30.1542222 ms
Case E, the epoch model: step 100 ms, batch 10 (100 utt/s), phases
backward 60 and optimizer 10 (rest 30 ms: validation 10 utt / 30 ms =
333.33 utt/s), one layer of 1e6 parameters (4e6 B fp32); link 10 GB/s,
10 us, --local-bn: step(4) = 100 + 1.5 * 4e6/1e10 s + 6 * 10 us = 100.66 ms.
--epoch-utterances 1000 --val-utterances 90 --ckpt-bytes 2e9
--ckpt-write-GBps 0.5 (W = 4 s) --ckpt-snapshot-GBps 10 (0.2 s):
  N=1: 100 steps, train 10 s, valid 90/333.33 = 0.27 s; ideal 1000/100 = 10 s
       sync: 10 + 0.27 + 4 = 14.27 s, efficiency 10/14.27
       async: the write (4 s) ends within the epoch: stall 0.2, 10.47 s
  N=4: 1000 // 40 = 25 steps, train 25 x 0.10066 = 2.5165 s; ideal 2.5 s,
       efficiency without 2.5/2.5165
       valid sharded ceil(90/4) = 23 -> 0.069 s; replicated 90 -> 0.27 s
       sync sharded: 2.5165 + 0.069 + 4 = 6.5855 s
       async sharded: the previous write (4 s) is still going after the
       epoch's 2.5855 s: stall 0.2 + 4 - 2.5855 = 1.6145, epoch 4.2 s
       async, --ckpt-every-steps 10: saves after 10, 20 and 25 steps (+
       valid): 1.0066, 1.0066, 0.5723 s before each: stalls 3.1934 x 2 +
       3.6277 = 10.0145 s; sync: 3 x 4 = 12 s; N=1: 10 saves, 1 s of steps
       before each (the last 1.27 s with valid): 9 x (0.2 + 3) + 0.2 + 2.73
       = 31.73 s
       --loader-utt-per-s 50: step 10/50 = 200 ms > 100.66: train 25 x 0.2
       + 0.2 (the first batch) = 5.2 s; 1000 utt/s: 10 ms, not a bound,
       train 2.5165 + 0.01 s
  steps: 1035 utterances at N=4: 25 + (35 > 30) = 26; 1030: 25.
Case E with a forward-mode result (batch 10, 20 ms): validation 500 utt/s.
Case F, no layers and no phases (step 100 ms, batch 10, --grad-bytes 4e6):
step(2) = 100 + 0.42 ms, the reduction exposed; validation 3 x 10 / 0.1 s =
300 utt/s (said to be assumed); --gpu-utt-per-s 200: step(1) 50 ms.
All compared to 1e-9 relative, read from --json.
"""

import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fixtures import Checker, doc, near, result, run, write  # noqa: E402

ck = Checker("scaling_model_test")


def predict(tmp, name, res, *args):
    f = write(os.path.join(tmp, name + ".json"), doc([res]))
    js = os.path.join(tmp, name + ".pred.json")
    rc, out = run("scaling-model", f, "--json", js, *args)
    if rc != 0:
        ck(False, "%s: exit %d: %s" % (name, rc, out))
        return {}, out
    with open(js) as fh:
        d = json.load(fh)
    return {r["gpus"]: r for r in d["rows"]}, out


def rows_step(tmp, name, n):
    with open(os.path.join(tmp, name + ".pred.json")) as fh:
        return [r for r in json.load(fh)["rows"] if r["gpus"] == n][0]["step_ms"]


def bench_result(step, layers, phases, model="small", batch=8):
    return result(model=model, batch=batch, samples_per_s=batch * 1000.0 / step,
                  layers=layers, phases=[{"name": k, "ms": v, "share": v / step}
                                         for k, v in phases.items()])


outs = []
with tempfile.TemporaryDirectory() as tmp:
    A = bench_result(30.0, [
        {"name": "conv 1", "fwd_ms": 3.0, "bwd_ms": 4.0, "params": 1000000},
        {"name": "rnn 1", "fwd_ms": 3.0, "bwd_ms": 6.0, "params": 2000000},
        {"name": "output+fc+lookahead", "fwd_ms": 1.0, "bwd_ms": 2.0, "params": 1000000}],
        {"forward": 14.0, "backward": 12.0, "optimizer": 3.0})
    link = ["--network", "custom", "--bandwidth", "10", "--latency", "10", "--local-bn",
            "--gpus", "1,2,4"]
    rows, out = predict(tmp, "a", A, *(link + ["--bucket-mb", "0"]))
    outs.append(out)
    if rows:
        ck(near(rows[1]["step_ms"], 30.0), "A N=1: step 30 ms (%.9g)" % rows[1]["step_ms"])
        ck(near(rows[2]["step_ms"], 30.42), "A N=2: step 30.42 ms (%.9g)" % rows[2]["step_ms"])
        ck(near(rows[2]["exposed_ms"], 0.42), "A N=2: exposed 0.42 ms (%.9g)" % rows[2]["exposed_ms"])
        ck(near(rows[2]["reduce_ms"], 0.42 + 0.82 + 0.42), "A N=2: reduce 1.66 ms")
        ck(near(rows[2]["efficiency"], 30.0 / 30.42), "A N=2: efficiency 30/30.42")
        ck(near(rows[2]["speedup"], 2 * 30.0 / 30.42), "A N=2: speedup 2*30/30.42")
        ck(near(rows[4]["step_ms"], 30.66), "A N=4: step 30.66 ms (%.9g)" % rows[4]["step_ms"])
        ck(near(rows[4]["samples_per_s"], 4 * 8 * 1000.0 / 30.66), "A N=4: samples/s 32000/30.66")
    rows, out = predict(tmp, "a8", A, *(link + ["--bucket-mb", "8"]))
    if rows:
        ck(rows[2]["buckets"] == 2, "A 8 MiB buckets: 2 buckets (%d)" % rows[2]["buckets"])
        ck(near(rows[2]["step_ms"], 30.7811392), "A 8 MiB buckets N=2: step 30.7811392 ms (%.9g)"
           % rows[2]["step_ms"])
    slow = ["--network", "custom", "--bandwidth", "0.5", "--latency", "10", "--local-bn",
            "--gpus", "2", "--bucket-mb", "0"]
    rows, out = predict(tmp, "aslow", A, *slow)
    if rows:
        ck(near(rows[2]["step_ms"], 52.06) and near(rows[2]["exposed_ms"], 22.06),
           "A slow link N=2: step 52.06 ms, exposed 22.06 ms (%.9g, %.9g)"
           % (rows[2]["step_ms"], rows[2]["exposed_ms"]))

    B = bench_result(20.0, [
        {"name": "conv 1", "fwd_ms": 1.0, "bwd_ms": 1.5},
        {"name": "conv_to_seq", "fwd_ms": 0.2, "bwd_ms": 0.5},
        {"name": "rnn 1", "fwd_ms": 2.0, "bwd_ms": 3.0},
        {"name": "rnn 2", "fwd_ms": 1.0, "bwd_ms": 2.0},
        {"name": "lookahead+fc", "fwd_ms": 0.1, "bwd_ms": 0.0},
        {"name": "output", "fwd_ms": 0.3, "bwd_ms": 0.0},
        {"name": "output+fc+lookahead", "fwd_ms": 0.0, "bwd_ms": 1.0}],
        {"forward": 5.0, "loss": 1.0, "backward": 8.0, "optimizer": 1.0}, model="tiny")
    rows, out = predict(tmp, "b", B, "--network", "custom", "--bandwidth", "1", "--latency", "100",
                        "--gpus", "1,2", "--bucket-mb", "0")
    outs.append(out)
    if rows:
        ck(near(rows[1]["step_ms"], 20.0), "B N=1: step 20 ms, no syncs (%.9g)" % rows[1]["step_ms"])
        ck(near(rows[2]["forward_bn_ms"], 0.601088), "B N=2: forward BatchNorm syncs 0.601088 ms (%.9g)"
           % rows[2]["forward_bn_ms"])
        ck(near(rows[2]["backward_ms"], 8.601088), "B N=2: backward with BN syncs 8.601088 ms (%.9g)"
           % rows[2]["backward_ms"])
        ck(near(rows[2]["step_ms"], 21.403904), "B N=2: step 21.403904 ms (%.9g)" % rows[2]["step_ms"])
    ck("parameters not matched" not in out, "B: every parameter placed by layer name")

    C = bench_result(30.0, [{"name": "rnn 1", "fwd_ms": 20.0, "bwd_ms": 10.0, "params": 4000000}],
                     {"backward": 10.0, "optimizer": 0.0})
    rows, out = predict(tmp, "c", C, "--network", "nvlink", "--gpus", "8,16", "--local-bn",
                        "--bucket-mb", "0")
    outs.append(out)
    want = (2 * 7 / 8 * 16e6 / 450e9 + 14 * 3e-6 + 2e6 / 50e9 + 2 * 5e-6) * 1e3
    if rows:
        ck(near(rows[16]["reduce_ms"], want), "C N=16 hierarchical: reduce %.9g ms (want %.9g)"
           % (rows[16]["reduce_ms"], want))
        ck(near(rows[16]["step_ms"], 30.0 + want), "C N=16: step 30 + reduce")
        w8 = (2 * 7 / 8 * 16e6 / 450e9 + 14 * 3e-6) * 1e3
        ck(near(rows[8]["reduce_ms"], w8), "C N=8: NVLink only, %.9g ms" % rows[8]["reduce_ms"])
    ck("hierarchical" in out and "ib" in out.lower(), "C: the assumptions name the hierarchy")
    rc, out = run("scaling-model", os.path.join(tmp, "c.json"), "--network", "custom")
    ck(rc == 1 and "--bandwidth" in out, "custom without --bandwidth: exit 1")

    # ---------------------------------------------------------------- epoch
    E = bench_result(100.0, [{"name": "rnn 1", "fwd_ms": 25.0, "bwd_ms": 60.0,
                              "params": 1000000}],
                     {"forward": 25.0, "loss": 5.0, "backward": 60.0, "optimizer": 10.0},
                     batch=10)
    ep = ["--network", "custom", "--bandwidth", "10", "--latency", "10", "--local-bn",
          "--bucket-mb", "0", "--gpus", "1,4", "--epoch-utterances", "1000",
          "--val-utterances", "90", "--ckpt-bytes", "2e9", "--ckpt-write-GBps", "0.5",
          "--ckpt-snapshot-GBps", "10"]

    def epoch(name, res, *args):
        rows, out = predict(tmp, name, res, *(ep + list(args)))
        return {n: r["epoch"] for n, r in rows.items() if "epoch" in r}, out

    sy, out = epoch("e_sync", E, "--ckpt-sync")
    outs.append(out)
    if sy:
        ck(near(rows_step(tmp, "e_sync", 4), 100.66), "E N=4: step 100.66 ms")
        ck(sy[1]["steps"] == 100 and sy[4]["steps"] == 25, "E: 100 and 25 steps (%d, %d)"
           % (sy[1]["steps"], sy[4]["steps"]))
        ck(near(sy[1]["val_s"], 0.27), "E N=1: validation 90 / 333.33 = 0.27 s (%.9g)"
           % sy[1]["val_s"])
        ck(near(sy[1]["epoch_s"], 14.27) and near(sy[1]["efficiency"], 10 / 14.27),
           "E N=1 sync: epoch 14.27 s, efficiency 10/14.27 (%.9g)" % sy[1]["epoch_s"])
        ck(near(sy[4]["train_s"], 2.5165) and near(sy[4]["ideal_s"], 2.5),
           "E N=4: train 2.5165 s, ideal 2.5 s (%.9g)" % sy[4]["train_s"])
        ck(near(sy[4]["efficiency_without"], 2.5 / 2.5165), "E N=4: efficiency without 2.5/2.5165")
        ck(sy[4]["val_utterances"] == 23 and near(sy[4]["val_s"], 0.069),
           "E N=4 sharded: 23 utterances, 0.069 s (%.9g)" % sy[4]["val_s"])
        ck(near(sy[4]["ckpt_stall_s"], 4.0) and near(sy[4]["epoch_s"], 6.5855),
           "E N=4 sync: stall 4 s, epoch 6.5855 s (%.9g)" % sy[4]["epoch_s"])
        ck(near(sy[4]["efficiency"], 2.5 / 6.5855), "E N=4 sync: efficiency 2.5/6.5855")
    re_, out = epoch("e_repl", E, "--ckpt-sync", "--val-replicated")
    if re_ and sy:
        ck(near(re_[4]["val_s"], 0.27) and near(re_[1]["val_s"], re_[4]["val_s"]),
           "E replicated: 0.27 s of validation at N=1 and N=4 (%.9g)" % re_[4]["val_s"])
        ck(sy[4]["val_s"] < sy[1]["val_s"] / 3.5, "E sharded: validation shrinks with N")
        ck(near(re_[4]["epoch_s"], 2.5165 + 0.27 + 4), "E N=4 replicated sync: epoch 6.7865 s")
    asy, out = epoch("e_async", E)
    outs.append(out)
    if asy and sy:
        ck(near(asy[1]["ckpt_stall_s"], 0.2) and near(asy[1]["epoch_s"], 10.47),
           "E N=1 async: stall 0.2 s, epoch 10.47 s (%.9g)" % asy[1]["epoch_s"])
        ck(near(asy[4]["ckpt_stall_s"], 1.6145) and near(asy[4]["epoch_s"], 4.2),
           "E N=4 async: waits for the previous write: stall 1.6145 s, epoch 4.2 s (%.9g)"
           % asy[4]["ckpt_stall_s"])
        ck(all(asy[n]["ckpt_stall_s"] < sy[n]["ckpt_stall_s"] for n in (1, 4)),
           "E: async stall < sync stall")
        ck(asy[4]["efficiency"] > sy[4]["efficiency"], "E: async epoch more efficient")
    k10, out = epoch("e_k10", E, "--ckpt-every-steps", "10")
    k10s, out = epoch("e_k10s", E, "--ckpt-every-steps", "10", "--ckpt-sync")
    if k10 and k10s:
        ck(k10[4]["saves"] == 3 and near(k10[4]["ckpt_stall_s"], 10.0145),
           "E N=4 async every 10 steps: 3 saves, stalls 10.0145 s (%d, %.9g)"
           % (k10[4]["saves"], k10[4]["ckpt_stall_s"]))
        ck(near(k10s[4]["ckpt_stall_s"], 12.0), "E N=4 sync every 10 steps: 12 s")
        ck(k10[1]["saves"] == 10 and near(k10[1]["ckpt_stall_s"], 31.73),
           "E N=1 async every 10 steps: 10 saves, stalls 9 x 3.2 + 2.93 = 31.73 s (%.9g)"
           % k10[1]["ckpt_stall_s"])
    ld, out = epoch("e_load", E, "--loader-utt-per-s", "50")
    outs.append(out)
    if ld and asy:
        ck(ld[4]["loader_bound"] and near(ld[4]["step_ms"], 200.0) and near(ld[4]["train_s"], 5.2),
           "E N=4 loader 50 utt/s: step 200 ms, train 5.2 s (%.9g)" % ld[4]["train_s"])
        ck(ld[4]["efficiency"] < asy[4]["efficiency"] and
           near(ld[4]["efficiency_without"], asy[4]["efficiency_without"]),
           "E: a slow loader lowers the epoch's efficiency, not the one without costs")
        ck("the loader bounds the step" in out, "E: the output marks the loader bound")
    lf, out = epoch("e_loadfast", E, "--loader-utt-per-s", "1000")
    if lf:
        ck(not lf[4]["loader_bound"] and near(lf[4]["train_s"], 2.5165 + 0.01),
           "E N=4 loader 1000 utt/s: no bound, train 2.5265 s (%.9g)" % lf[4]["train_s"])
    for utts, want in ((1035, 26), (1030, 25), (1031, 26)):
        st, _ = epoch("e_steps%d" % utts, E, "--epoch-utterances", str(utts))
        if st:
            ck(st[4]["steps"] == want, "E N=4: %d utterances, %d steps (%d)"
               % (utts, want, st[4]["steps"]))
    fw = result(model="small", batch=10, mode="forward", samples_per_s=500.0)
    f = write(os.path.join(tmp, "e_fwd.json"), doc([E, fw]))
    js = os.path.join(tmp, "e_fwd.pred.json")
    rc, out = run("scaling-model", f, "--json", js, *ep)
    if ck(rc == 0, "E with a forward result: exit 0"):
        with open(js) as fh:
            d = json.load(fh)
        r4 = [r for r in d["rows"] if r["gpus"] == 4][0]["epoch"]
        ck(near(r4["val_s"], 23 / 500.0), "E N=4: validation at the forward result's "
           "500 utt/s (%.9g)" % r4["val_s"])
        srcs = {x["name"]: x["source"] for x in d["assumptions"]["epoch"]["list"]}
        ck(srcs["validation rate, one GPU"].startswith("measured: the forward-mode"),
           "E: the validation rate's source: the forward-mode result")
        ck(srcs["checkpoint size"] == "--ckpt-bytes"
           and "development machine" not in srcs["checkpoint write rate (rank 0)"]
           and "assumption" not in srcs["snapshot copy rate"],
           "E: options named as the source of what they set")
    rc, out = run("scaling-model", os.path.join(tmp, "e_sync.json"), "--gpus", "64")
    ck(rc == 0 and "default assumption: pinned device-to-host" in out
       and "development machine" in out and "LibriSpeech 960 h" in out
       and "(1 master + 2 adamw slots)" in out,
       "E defaults: every default said to be one, with its origin")

    F = result(model="small", batch=10, samples_per_s=100.0)
    rows, out = predict(tmp, "f", F, "--network", "custom", "--bandwidth", "10", "--latency",
                        "10", "--local-bn", "--grad-bytes", "4e6", "--gpus", "1,2",
                        "--epoch-utterances", "1000")
    outs.append(out)
    if rows:
        ck(near(rows[2]["step_ms"], 100.42) and near(rows[2]["exposed_ms"], 0.42),
           "F no phases N=2: step 100.42 ms, 0.42 exposed (%.9g)" % rows[2]["step_ms"])
        ck(near(rows[1]["epoch"]["val_s"], 5567 / 300.0),
           "F: validation at 3 x the train rate, 300 utt/s")
        ck("assumed: a third of the train step" in out, "F: the validation rate said assumed")
    rows, out = predict(tmp, "fbn", F, "--network", "custom", "--bandwidth", "10", "--latency",
                        "10", "--grad-bytes", "4e6", "--gpus", "2")
    if rows:
        ck(rows[2]["forward_bn_ms"] > 0 and rows[2]["step_ms"] > 100.42 + rows[2]["forward_bn_ms"],
           "F no phases, synchronised BatchNorm: syncs counted both ways")
    rows, out = predict(tmp, "fscale", F, "--gpu-utt-per-s", "200", "--gpus", "1",
                        "--local-bn")
    if rows:
        ck(near(rows[1]["step_ms"], 50.0) and near(rows[1]["epoch"]["ideal_s"], 281241 / 200.0),
           "F --gpu-utt-per-s 200: step 50 ms, ideal 281241/200 s (%.9g)" % rows[1]["step_ms"])
        ck("--gpu-utt-per-s (assumed)" in out, "F: the scaled rate said assumed")
    rc, out = run("scaling-model", os.path.join(tmp, "f.json"), "--epoch-utterances", "0",
                  "--gpus", "1")
    ck(rc == 0 and "# epoch" not in out, "--epoch-utterances 0: no epoch section")
    rc, out = run("scaling-model", os.path.join(tmp, "f.json"), "--loader-utt-per-s", "0")
    ck(rc == 1 and "--loader-utt-per-s" in out, "--loader-utt-per-s 0: exit 1")
ck.close("\n".join(outs))
