#!/usr/bin/python3
"""Checks cuda/README.md's "Finding an op's twins" table against the sources.

usage: ops_lookup_check.py SOURCE_DIR

Every member of ds_ops (src/backend.h) must have exactly one row, and in it:
  CPU body   `cpu/F.inc`: `cpu_OP`   F exists and defines cpu_OP; cuda/F.cu exists
             (the family file is named like its CUDA twin); cpu/ops_table.h's
             entry list holds `.OP = P##_OP`, the float32 and float64 tables
             (cpu/ops_f32.c, ops_f64.c) are DS_CPU_OPS_TABLE(cpu), the 16-bit
             ones (cpu/ops_f16.c, ops_bf16.c) DS_CPU_OPS_TABLE(half), and
             cpu/ops_half.inc defines half_OP;
  CUDA twin  `cuda/F.cu`: `cuda_OP<T>`  F defines cuda_OP and cuda/ops_table.cu
             holds `.OP = cuda_OP<T>`;
  unit       `tests/unit/test_ops_G.c` or `tests/unit/test_G.c`, optionally
             "(through `FN`)": the file names OP (or FN) as a word, and G is the
             family of the parity file (ops_G.c), so every family's unit and
             parity checks are grouped alike;
  parity     `tests/parity/ops_G.c`  it names a case "OP" or calls ops->OP(;
  peer       each `path` named exists (a dash: none).
Exit 0 when all hold, else 1 with one line per fault.
"""
import os
import re
import sys


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")
    faults = []

    def read(rel):
        p = os.path.join(root, rel)
        if not os.path.isfile(p):
            faults.append("missing file %s" % rel)
            return ""
        with open(p, encoding="utf-8") as f:
            return f.read()

    backend = read("src/backend.h")
    m = re.search(r"typedef struct ds_ops\s*\{(.*?)\}\s*ds_ops;", backend, re.S)
    if not m:
        print("ops_lookup_check: no ds_ops struct in src/backend.h")
        return 1
    ops = re.findall(r"\(\s*\*\s*([a-z0-9_]+)\s*\)\s*\(", m.group(1))
    if len(ops) < 20:
        print("ops_lookup_check: only %d ops found in ds_ops" % len(ops))
        return 1

    readme = read("cuda/README.md")
    rows = {}
    for line in readme.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 6 or not re.fullmatch(r"`[a-z0-9_]+`", cells[0]):
            continue
        op = cells[0].strip("`")
        if op in rows:
            faults.append("%s: two rows" % op)
        rows[op] = cells

    entries = read("cpu/ops_table.h")
    for t, p in (("ops_f32.c", "cpu"), ("ops_f64.c", "cpu"), ("ops_f16.c", "half"),
                 ("ops_bf16.c", "half")):
        if not re.search(r"= DS_CPU_OPS_TABLE\(%s\);" % p, read("cpu/" + t)):
            faults.append("cpu/%s: its table is not DS_CPU_OPS_TABLE(%s)" % (t, p))
    half = read("cpu/ops_half.inc")
    cuda_table = read("cuda/ops_table.cu")
    for op in ops:
        if op not in rows:
            faults.append("%s: no row" % op)
            continue
        _, cpu, cuda, unit, parity, peer = rows.pop(op)
        cm = re.fullmatch(r"`(cpu/([a-z_]+)\.inc)`: `cpu_%s`" % op, cpu)
        if not cm:
            faults.append("%s: CPU cell %r is not `cpu/F.inc`: `cpu_%s`" % (op, cpu, op))
        else:
            if not re.search(r"^static [a-z_ ]+?\**cpu_%s\(" % op, read(cm.group(1)), re.M):
                faults.append("%s: %s does not define cpu_%s" % (op, cm.group(1), op))
            if not os.path.isfile(os.path.join(root, "cuda", cm.group(2) + ".cu")):
                faults.append("%s: %s has no CUDA namesake cuda/%s.cu" % (op, cm.group(1), cm.group(2)))
        if not re.search(r"\.%s = P##_%s," % (op, op), entries):
            faults.append("%s: cpu/ops_table.h lacks .%s = P##_%s" % (op, op, op))
        if not re.search(r"^static [a-z_ ]+?\**half_%s\(" % op, half, re.M):
            faults.append("%s: cpu/ops_half.inc does not define half_%s" % (op, op))
        um = re.fullmatch(r"`(cuda/[a-z_]+\.cu)`: `cuda_%s<T>`" % op, cuda)
        if not um:
            faults.append("%s: CUDA cell %r is not `cuda/F.cu`: `cuda_%s<T>`" % (op, cuda, op))
        elif not re.search(r"\bcuda_%s\s*\(" % op, read(um.group(1))):
            faults.append("%s: %s does not define cuda_%s" % (op, um.group(1), op))
        if not re.search(r"\.%s = cuda_%s<T>," % (op, op), cuda_table):
            faults.append("%s: cuda/ops_table.cu lacks .%s = cuda_%s<T>" % (op, op, op))
        pm = re.fullmatch(r"`(tests/parity/ops_([a-z_]+)\.c)`", parity)
        if not pm:
            faults.append("%s: parity cell %r is not `tests/parity/ops_G.c`" % (op, parity))
        elif not re.search(r'"%s"|ops->%s\(' % (op, op), read(pm.group(1))):
            faults.append('%s: %s has no case "%s"' % (op, pm.group(1), op))
        tm = re.fullmatch(r"`(tests/unit/test_(?:ops_)?([a-z_]+)\.c)`(?: \(through `([a-z0-9_]+)`\))?",
                          unit)
        if not tm:
            faults.append("%s: unit cell %r is not `tests/unit/test_[ops_]G.c`" % (op, unit))
        else:
            name = tm.group(3) or op
            if not re.search(r"\b%s\b" % name, read(tm.group(1))):
                faults.append("%s: %s does not name %s" % (op, tm.group(1), name))
            if pm and tm.group(2) != pm.group(2):
                faults.append("%s: unit test family %s, parity family %s: grouped differently"
                              % (op, tm.group(2), pm.group(2)))
        paths = re.findall(r"`(tests/[^`]+)`", peer)
        if not paths and not peer.startswith("—"):
            faults.append("%s: peer cell %r names no file and no dash" % (op, peer))
        for p in paths:
            if not os.path.isfile(os.path.join(root, p)):
                faults.append("%s: peer check %s does not exist" % (op, p))
    for op in rows:
        faults.append("%s: a row for an op not in ds_ops" % op)

    for f in faults:
        print("ops_lookup_check: " + f)
    print("ops_lookup_check: %d ops, %d faults" % (len(ops), len(faults)))
    return 1 if faults else 0


if __name__ == "__main__":
    sys.exit(main())
