"""Hand-made bench JSON documents for the bench script tests."""

import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
BENCH = os.path.join(REPO, "bench")
PY = "/usr/bin/python3"


def result(model="small", device="cpu", precision="fp32", mode="train", batch=8, ranks=1,
           samples_per_s=100.0, impl="dstrain", status="ok", **extra):
    r = {"model": model, "device": device, "precision": precision, "mode": mode,
         "impl": impl, "batch": batch, "ranks": ranks, "global_batch": batch * ranks,
         "status": status, "warmup": 10, "steps": 50}
    if status == "ok":
        step_ms = batch * ranks * 1000.0 / samples_per_s
        r.update(samples_per_s=samples_per_s, samples_per_s_mean=samples_per_s,
                 samples_per_s_ci95=[samples_per_s * 0.99, samples_per_s * 1.01],
                 samples_per_s_per_rank=samples_per_s / ranks, step_ms=step_ms,
                 step_ms_mean=step_ms, step_ms_ci95=[step_ms * 0.99, step_ms * 1.01],
                 step_ms_all=[step_ms] * 3)
    else:
        r["error"] = "did not fit" if status == "oom" else "failed"
    r.update(extra)
    return r


def doc(results, tool="dstrain bench"):
    return {"tool": tool, "schema": 1,
            "env": {"host": "test", "cpu": "test cpu", "threads": 2, "device_name": "test cpu",
                    "gpu": None, "versions": {}, "git": None, "command": "fixture",
                    "date": "2026-01-01T00:00:00+00:00"},
            "results": results}


def write(path, d):
    with open(path, "w") as f:
        json.dump(d, f, indent=1)
    return path


def run(script, *args, env=None):
    """Runs bench/SCRIPT with /usr/bin/python3; returns (rc, stdout+stderr)."""
    e = dict(os.environ)
    if env:
        e.update(env)
    r = subprocess.run([PY, os.path.join(BENCH, script)] + [str(a) for a in args],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=e, timeout=300)
    return r.returncode, r.stdout.decode("utf-8", "replace")


class Checker:
    def __init__(self, name):
        self.name, self.fails = name, []

    def __call__(self, ok, what):
        print("%-72s %s" % (what, "ok" if ok else "FAIL"))
        if not ok:
            self.fails.append(what)
        return ok

    def close(self, text=None):
        if self.fails and text is not None:
            print("---- output\n" + text)
        print("%s: %s" % (self.name, "PASS" if not self.fails else "FAIL (%d)" % len(self.fails)))
        sys.exit(1 if self.fails else 0)


def near(a, b, rel=1e-9):
    return a is not None and b is not None and abs(a - b) <= rel * max(abs(a), abs(b), 1e-300)
