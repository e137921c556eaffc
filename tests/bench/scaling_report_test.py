#!/usr/bin/python3
"""bench/scaling-report on hand-made sweeps.

Sweep 1 (bench-g001..g008.json, batch 8 per GPU): samples/s 100, 190, 360,
640 at 1, 2, 4, 8 GPUs. Expected, exactly:
  per GPU    100, 95, 90, 80
  speedup    190/100 = 1.9, 360/100 = 3.6, 640/100 = 6.4
  efficiency 1.9/2 = 0.95, 3.6/4 = 0.9, 6.4/8 = 0.8
read back from DIR/scaling.tsv and DIR/scaling.json (to 1e-12), exit 0, and
the speedup and efficiency PNGs written (PNG signature).
Sweep 2, no 1-GPU run: 2, 4, 8 GPUs at 200, 360, 560 samples/s: the note
says the baseline is 2 GPUs and speedup = thr_N / thr_2 * 2: 2, 3.6, 5.6;
efficiency 1, 0.9, 0.7.
Sweep 3: --expect 1,2,4 with the 4-GPU file missing and the 2-GPU result
oom: rows missing / oom, exit 1.
"""

import csv
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fixtures import Checker, doc, near, result, run, write  # noqa: E402

PNG = b"\x89PNG\r\n\x1a\n"
ck = Checker("scaling_report_test")


def sweep(d, rates):
    for n, thr in rates.items():
        st = "ok" if thr else "oom"
        write(os.path.join(d, "bench-g%03d.json" % n),
              doc([result(model="ds2", device="cuda", precision="fp16", batch=8, ranks=n,
                          samples_per_s=thr or 1.0, status=st)]))


def tsv_rows(d):
    with open(os.path.join(d, "scaling.tsv")) as f:
        return list(csv.DictReader(f, delimiter="\t"))


with tempfile.TemporaryDirectory() as tmp:
    d1 = os.path.join(tmp, "s1")
    os.makedirs(d1)
    sweep(d1, {1: 100.0, 2: 190.0, 4: 360.0, 8: 640.0})
    rc, out = run("scaling-report", d1)
    ck(rc == 0, "sweep 1: exit 0 (got %d)" % rc)
    rows = tsv_rows(d1)
    ck([int(r["gpus"]) for r in rows] == [1, 2, 4, 8], "sweep 1: rows 1, 2, 4, 8")
    want = {1: (100, 1.0, 1.0), 2: (95, 1.9, 0.95), 4: (90, 3.6, 0.9), 8: (80, 6.4, 0.8)}
    for r in rows:
        n = int(r["gpus"])
        pg, sp, ef = want[n]
        ck(near(float(r["per_gpu"]), pg, 1e-6) and near(float(r["speedup"]), sp, 1e-6)
           and near(float(r["efficiency"]), ef, 1e-6),
           "tsv %d GPUs: per GPU %s, speedup %s, efficiency %s" % (n, r["per_gpu"], r["speedup"],
                                                                 r["efficiency"]))
    with open(os.path.join(d1, "scaling.json")) as f:
        js = json.load(f)
    jr = {r["gpus"]: r for r in js["configs"][0]["rows"]}
    ck(all(near(jr[n]["speedup"], want[n][1], 1e-12) and near(jr[n]["efficiency"], want[n][2], 1e-12)
           for n in want), "scaling.json: speedups and efficiencies exact to 1e-12")
    ck(js["configs"][0]["baseline_gpus"] == 1 and js["configs"][0]["note"] is None,
       "baseline: 1 GPU, no note")
    for name in ("scaling-speedup.png", "scaling-efficiency.png"):
        p = os.path.join(d1, name)
        ok = os.path.exists(p) and os.path.getsize(p) > 1000
        if ok:
            with open(p, "rb") as f:
                ok = f.read(8) == PNG
        ck(ok, "%s written, a PNG" % name)

    d2 = os.path.join(tmp, "s2")
    os.makedirs(d2)
    sweep(d2, {2: 200.0, 4: 360.0, 8: 560.0})
    rc, out2 = run("scaling-report", d2, "--no-plot")
    ck(rc == 0, "sweep 2: exit 0 (got %d)" % rc)
    ck("no 1-GPU result: the baseline is 2 GPUs" in out2, "sweep 2: says the baseline is 2 GPUs")
    rows = {int(r["gpus"]): r for r in tsv_rows(d2)}
    for n, sp, ef in ((2, 2.0, 1.0), (4, 3.6, 0.9), (8, 5.6, 0.7)):
        ck(near(float(rows[n]["speedup"]), sp, 1e-6) and near(float(rows[n]["efficiency"]), ef, 1e-6),
           "sweep 2, %d GPUs: speedup %s (want %g), efficiency %s (want %g)"
           % (n, rows[n]["speedup"], sp, rows[n]["efficiency"], ef))

    d3 = os.path.join(tmp, "s3")
    os.makedirs(d3)
    sweep(d3, {1: 100.0, 2: None})
    rc, out3 = run("scaling-report", d3, "--expect", "1,2,4", "--no-plot")
    rows = {int(r["gpus"]): r for r in tsv_rows(d3)}
    ck(rc == 1, "sweep 3: exit 1 (got %d)" % rc)
    ck(rows.get(2, {}).get("status") == "oom" and rows.get(4, {}).get("status") == "missing"
       and rows.get(1, {}).get("status") == "ok",
       "sweep 3: 1 ok, 2 oom, 4 missing (%s)" % {n: r["status"] for n, r in rows.items()})
    rc, _ = run("scaling-report", os.path.join(tmp, "nonexistent"))
    ck(rc == 1, "no such directory: exit 1")
ck.close(out + out2 + out3)
