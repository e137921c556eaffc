#!/usr/bin/python3
"""bench/plot on hand-made results.

A dstrain bench file (small cpu: fp32 and fp16 train at batches 1, 2, 4, 8,
one fp32 result with layers) and a pytorch_ds2 file (fp32 train at 2, 4)
must give throughput-small-cpu.png and one layers-...png, each a non-empty
PNG (the 8-byte signature, over 1 kB), exit 0 and one "wrote" line per file.
A scaling.json gives scaling-speedup.png and scaling-efficiency.png.
Without gnuplot on PATH the script exits 1 and says gnuplot is missing;
with only failed results it exits 2.
"""

import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fixtures import PY, Checker, doc, result, run, write  # noqa: E402

PNG = b"\x89PNG\r\n\x1a\n"
ck = Checker("plot_test")


class _Keep:
    """PLOT_TEST_KEEP=DIR: work in DIR and keep the PNGs (to look at them)."""

    def __init__(self, d):
        self.d = d

    def __enter__(self):
        os.makedirs(self.d, exist_ok=True)
        return self.d

    def __exit__(self, *exc):
        return False


def is_png(p):
    if not os.path.exists(p) or os.path.getsize(p) < 1000:
        return False
    with open(p, "rb") as f:
        return f.read(8) == PNG


layers = [{"name": "conv 1", "fwd_ms": 10.0, "bwd_ms": 12.0, "share": 0.22},
          {"name": "conv 2", "fwd_ms": 20.0, "bwd_ms": 35.0, "share": 0.55},
          {"name": "rnn 1", "fwd_ms": 5.0, "bwd_ms": 9.0, "share": 0.14},
          {"name": "output+fc+lookahead", "fwd_ms": 0.0, "bwd_ms": 2.0, "share": 0.02}]
KEEP = os.environ.get("PLOT_TEST_KEEP")
with (tempfile.TemporaryDirectory() if not KEEP else _Keep(KEEP)) as tmp:
    res = []
    for prec, base in (("fp32", 20.0), ("fp16", 35.0)):
        for b in (1, 2, 4, 8):
            extra = {"layers": layers} if (prec == "fp32" and b == 8) else {}
            res.append(result(precision=prec, batch=b, samples_per_s=base * b ** 0.8, **extra))
    a = write(os.path.join(tmp, "a.json"), doc(res))
    bfile = write(os.path.join(tmp, "b.json"), doc(
        [result(batch=b, samples_per_s=15.0 * b ** 0.7, impl="torch-eager") for b in (2, 4)],
        tool="pytorch_ds2"))
    out = os.path.join(tmp, "png")
    rc, text = run("plot", a, bfile, "--out", out)
    ck(rc == 0, "exit 0 (got %d)" % rc)
    thr = os.path.join(out, "throughput-small-cpu.png")
    lay = os.path.join(out, "layers-small-cpu-fp32-train-b8.png")
    ck(is_png(thr), "throughput-small-cpu.png is a non-empty PNG")
    ck(is_png(lay), "layers-small-cpu-fp32-train-b8.png is a non-empty PNG")
    ck(sorted(os.listdir(out)) == sorted([os.path.basename(thr), os.path.basename(lay)]),
       "exactly those two files (%s)" % sorted(os.listdir(out)))
    ck(text.count("wrote ") == 2, "two 'wrote' lines")

    sc = write(os.path.join(tmp, "scaling.json"), {
        "tool": "scaling-report", "schema": 1, "configs": [{
            "model": "ds2", "device": "cuda", "precision": "fp16", "mode": "train", "batch": 8,
            "impl": "dstrain", "baseline_gpus": 1, "note": None, "rows": [
                {"gpus": n, "samples_per_s": 100.0 * n * e, "per_gpu": 100.0 * e,
                 "speedup": n * e, "efficiency": e, "step_ms": 80.0 / e, "status": "ok"}
                for n, e in ((1, 1.0), (2, 0.95), (4, 0.9), (8, 0.8), (16, 0.7))]}]})
    out2 = os.path.join(tmp, "png2")
    rc, text2 = run("plot", sc, "--out", out2)
    ck(rc == 0 and all(is_png(os.path.join(out2, n))
                       for n in ("scaling-speedup.png", "scaling-efficiency.png")),
       "scaling.json: speedup and efficiency PNGs (exit %d)" % rc)

    # no gnuplot: PATH without it (and GNUPLOT unset)
    empty = os.path.join(tmp, "emptybin")
    os.makedirs(empty, exist_ok=True)
    env = {"PATH": empty, "GNUPLOT": ""}
    rc, text3 = run("plot", a, "--out", os.path.join(tmp, "png3"), env=env)
    ck(rc == 1 and "gnuplot not found" in text3 and "gnuplot-nox" in text3,
       "no gnuplot: exit 1 naming gnuplot-nox (%d: %s)" % (rc, text3.strip()))

    f = write(os.path.join(tmp, "f.json"), doc([result(status="error")]))
    rc, text4 = run("plot", f, "--out", os.path.join(tmp, "png4"))
    ck(rc == 2 and "nothing to plot" in text4, "only failed results: exit 2 (%d)" % rc)
ck.close(text + text2)
