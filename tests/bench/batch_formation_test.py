#!/usr/bin/python3
"""Batches of LibriSpeech lengths are formed as the training sampler forms
them, in dstrain bench and in bench/pytorch_ds2.py alike (issue 34, item 2).

  batch_formation_test.py DSTRAIN

1. benchlib.sorted_bucket_lengths: pool batches of batch lengths, each
   sorted, the pool's batches in increasing order and spread over the
   distribution (their longest from under 11 s to over 15 s), each padded
   by under 2% of its frames, where batches drawn at random (the old way)
   pad by over 10% (measured: 0.05-0.8% sorted, 17-26% random).
2. dstrain bench --length-dist librispeech: its JSON says
   "batch_formation": "sorted" and its batches' pad_share is under 2%;
   with the default read lengths it says "random" and pads more.
"""
import json
import os
import random
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
import benchlib as bl  # noqa: E402

fails = 0


def check(cond, what):
    global fails
    if not cond:
        fails += 1
        print("FAIL:", what)


def pad(b):
    return 1 - sum(b) / (len(b) * max(b))


for seed in range(5):
    rng = random.Random(seed)
    s = bl.sorted_bucket_lengths(rng, 32, 4, 1700, "librispeech", 8)
    check(len(s) == 4 and all(len(b) == 32 for b in s), "seed %d: shape %s" % (seed, [len(b) for b in s]))
    check(all(b == sorted(b) for b in s), "seed %d: a batch is not sorted" % seed)
    check([max(b) for b in s] == sorted(max(b) for b in s), "seed %d: batches out of order" % seed)
    check(max(s[0]) < 1100 and max(s[-1]) > 1500, "seed %d: longest %s" % (seed, [max(b) for b in s]))
    check(max(pad(b) for b in s) < 0.02, "seed %d: sorted padding %s" % (seed, [pad(b) for b in s]))
    rng = random.Random(seed)
    r = [bl.synthetic_lengths(rng, 32, 1700, "librispeech", 8) for _ in range(4)]
    check(sum(pad(b) for b in r) / 4 > 0.10, "seed %d: random padding %s (the contrast)" % (seed, [pad(b) for b in r]))

dstrain = sys.argv[1]
with tempfile.TemporaryDirectory() as d:
    for dist, formation, lo, hi in (("librispeech", "sorted", 0.0, 0.02), ("read", "random", 0.02, 1.0)):
        out = os.path.join(d, dist + ".json")
        args = [dstrain, "bench", "--model", "tiny", "--batch", "8", "--warmup", "1", "--steps", "3",
                "--out", out]
        if dist == "librispeech":
            args += ["--length-dist", "librispeech", "--max-frames", "1700"]
        p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if p.returncode != 0:
            check(False, "%s: exit %d: %s" % (" ".join(args), p.returncode, p.stdout[-500:]))
            continue
        doc = json.load(open(out))
        r = doc["results"][0]
        check(r["config"]["batch_formation"] == formation, "%s: batch_formation %s" % (dist, r["config"]))
        check(lo <= r["pad_share"] < hi, "%s: pad_share %.4f not in [%g, %g)" % (dist, r["pad_share"], lo, hi))

print("batch_formation: %s" % ("ok" if not fails else "%d failed" % fails))
sys.exit(1 if fails else 0)
