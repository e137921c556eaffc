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
ck.close("\n".join(outs))
