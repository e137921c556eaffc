#!/usr/bin/python3
"""bench/compare on hand-made files.

A (dstrain bench): small cpu fp32 train b8 200/s, b16 300/s, fp16 train b8
oom, forward b8 1000/s (only in A). B (pytorch_ds2): small cpu fp32 train b8
100/s (torch-eager) and 50/s (torch-compile), b16 400/s, fp16 b8 120/s
(torch-amp), bf16 b4 (only in B).

Asserts: the rows and ratios (200/100 = 2.000, 200/50 = 4.000, 300/400 =
0.750), the oom row shows "oom" and no ratio, the configurations only one
side has are listed, exit status 0; two files sharing nothing exit 2; a file
that is not a bench JSON exits 1 naming the file.
"""

import os
import re
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fixtures import Checker, doc, result, run, write  # noqa: E402

ck = Checker("compare_test")
with tempfile.TemporaryDirectory() as tmp:
    a = write(os.path.join(tmp, "a.json"), doc([
        result(batch=8, samples_per_s=200.0),
        result(batch=16, samples_per_s=300.0),
        result(precision="fp16", batch=8, status="oom"),
        result(mode="forward", batch=8, samples_per_s=1000.0),
    ]))
    b = write(os.path.join(tmp, "b.json"), doc([
        result(batch=8, samples_per_s=100.0, impl="torch-eager"),
        result(batch=8, samples_per_s=50.0, impl="torch-compile"),
        result(batch=16, samples_per_s=400.0, impl="torch-eager"),
        result(precision="fp16", batch=8, samples_per_s=120.0, impl="torch-amp"),
        result(precision="bf16", batch=4, samples_per_s=10.0, impl="torch-amp"),
    ], tool="pytorch_ds2"))
    rc, out = run("compare", a, b)
    ck(rc == 0, "exit 0 with matches (got %d)" % rc)
    rows = [l.split() for l in out.splitlines() if not l.startswith("#") and l.strip()]
    # columns: model device prec mode batch ranks Aimpl Bimpl Athr Bthr ratio Ams Bms

    def row(prec, mode, batch, bimpl):
        for r in rows:
            if r[2] == prec and r[3] == mode and r[4] == str(batch) and r[7] == bimpl:
                return r
        return None

    r = row("fp32", "train", 8, "torch-eager")
    ck(r is not None and r[8] == "200" and r[9] == "100" and r[10] == "2.000",
       "fp32 train b8 vs eager: 200 / 100 = 2.000 (%s)" % r)
    r = row("fp32", "train", 8, "torch-compile")
    ck(r is not None and r[10] == "4.000", "fp32 train b8 vs compile: 200 / 50 = 4.000 (%s)" % r)
    r = row("fp32", "train", 16, "torch-eager")
    ck(r is not None and r[10] == "0.750" and r[11] == "53.3" and r[12] == "40.0",
       "fp32 train b16: 300 / 400 = 0.750, step 53.3 / 40.0 ms (%s)" % r)
    r = row("fp16", "train", 8, "torch-amp")
    ck(r is not None and r[8] == "oom" and r[10] == "-", "fp16 b8: A oom, no ratio (%s)" % r)
    ck(len(rows) == 4, "4 matched rows (got %d)" % len(rows))
    ck(re.search(r"only in A: small cpu fp32 forward batch 8", out) is not None,
       "forward b8 listed as only in A")
    ck(re.search(r"only in B: small cpu bf16 train batch 4", out) is not None,
       "bf16 b4 listed as only in B")

    c = write(os.path.join(tmp, "c.json"), doc([result(model="ds2", batch=2)]))
    rc, out2 = run("compare", a, c)
    ck(rc == 2, "no common configuration: exit 2 (got %d)" % rc)
    bad = os.path.join(tmp, "bad.json")
    with open(bad, "w") as f:
        f.write('{"hello": 1}')
    rc, out3 = run("compare", a, bad)
    ck(rc == 1 and "bad.json" in out3 and "results" in out3,
       "not a bench JSON: exit 1 naming the file (%d: %s)" % (rc, out3.strip()))
ck.close(out)
