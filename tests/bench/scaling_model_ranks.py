#!/usr/bin/python3
"""bench/scaling-model against measured 2-rank CPU runs of dstrain bench.

  scaling_model_ranks.py --dstrain BUILD/dstrain --allreduce BUILD/bench/bench_allreduce
                         [--mpiexec mpiexec]

1. The link: bench_allreduce --op mpi (one MPI_Allreduce, what the
   reducer's transport calls) on 2 ranks over shared memory at 8 B and
   2 MiB; at N = 2 the ring cost is S/B + 2 * latency, so latency =
   t(8 B) / 2 and B = 2 MiB / (t(2 MiB) - t(8 B)); each t the fastest of
   up to 5 runs, measured again until t(2 MiB) > t(8 B). Not --op reducer:
   through the reducer's communication thread an 8 B sum measured 9 us to
   4.6 ms run to run here (2 ranks x 2 threads busy-polling 2 cores), a
   scheduling cost of this box, not the link's, and in CI once slower than
   2 MiB (a negative bandwidth).
2. `dstrain bench --model tiny --batch 8 --profile layers` on 1 rank and
   under `mpiexec -np 2` (same per-rank batch), OPENBLAS_NUM_THREADS=1.
3. scaling-model on the 1-rank JSON with --network custom (that link).

Asserted:
- scaling-model reads dstrain bench's real output: every parameter of the
  model is placed by layer name (no "not matched" note) and its N=1 step
  is the measured one (to 1e-6);
- a loose sanity bound on N=2: 0.8 <= measured / predicted <= 3.
Why so loose: this box has 2 cores, and 2 ranks run 6 threads (main,
loader, reducer each) on them, against 1 rank's 3 on 2 cores; per-rank
batches of different lengths make every step wait for the slower rank;
the model knows none of this (it assumes compute is unaffected by the
communication beside it, which on a GPU is nearly true and here is not),
so it is optimistic: it should not predict much slower than measured
(lower bound 0.8, for run-to-run noise), and a ratio above 3 means a unit
or parsing error rather than contention. The comparison is printed
either way. ctest runs this test alone (RUN_SERIAL).
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fixtures import Checker, run  # noqa: E402

ck = Checker("scaling_model_ranks")


def sh(cmd, env):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, timeout=300)
    out = r.stdout.decode("utf-8", "replace")
    if r.returncode != 0:
        print(out)
        ck(False, "%s exited %d" % (" ".join(cmd[:6]), r.returncode))
        ck.close()
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dstrain", required=True)
    ap.add_argument("--allreduce", required=True)
    ap.add_argument("--mpiexec", default="mpiexec")
    a = ap.parse_args()
    env = dict(os.environ)
    env.update(OPENBLAS_NUM_THREADS="1", OMPI_ALLOW_RUN_AS_ROOT="1",
               OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMPI_MCA_rmaps_base_oversubscribe="1")
    mpi = [a.mpiexec, "-np", "2", "--bind-to", "none"]
    # Each size's fastest of up to 5 runs: on 2 shared cores a run's mean can
    # be dominated by waiting for a core. A link is physical only when 2 MiB
    # takes longer than 8 B: measure until it does.
    times = {}
    for attempt in range(1, 6):
        out = sh(mpi + [a.allreduce, "-b", "8", "-e", "2M", "-f", "262144", "-n", "20", "-w", "3",
                        "--op", "mpi"], env)
        for line in out.splitlines():
            f = line.split()
            if line.startswith("#") or len(f) < 6 or not f[0].isdigit():
                continue
            size, us = int(f[0]), float(f[4])
            times[size] = min(us, times.get(size, us))
        if 8 in times and 2097152 in times and times[2097152] > times[8]:
            break
        print("link measurement %d: %s (2 MiB not slower than 8 B: contended); again" % (attempt, times))
    ck(8 in times and 2097152 in times, "bench_allreduce: rows for 8 B and 2 MiB (%s)" % times)
    ck(8 in times and 2097152 in times and times[2097152] > times[8],
       "a physical link: 2 MiB slower than 8 B in 5 runs (%s)" % times)
    if not (8 in times and 2097152 in times and times[2097152] > times[8]):
        ck.close()   # nothing to model with
    lat = times[8] / 2.0
    bw = 2097152 / ((times[2097152] - times[8]) * 1e-6) / 1e9
    print("link: latency %.2f us, %.2f GB/s (from %.2f us at 8 B, %.2f us at 2 MiB)"
          % (lat, bw, times[8], times[2097152]))
    with tempfile.TemporaryDirectory() as tmp:
        r1, r2 = os.path.join(tmp, "r1.json"), os.path.join(tmp, "r2.json")
        args = ["bench", "--model", "tiny", "--batch", "8", "--warmup", "5", "--steps", "30",
                "--profile", "layers"]
        sh([a.dstrain] + args + ["--out", r1], env)
        sh(mpi + [a.dstrain] + args + ["--out", r2], env)
        with open(r1) as f:
            m1 = json.load(f)["results"][0]
        with open(r2) as f:
            m2 = json.load(f)["results"][0]
        ck(m1["ranks"] == 1 and m2["ranks"] == 2 and m1["status"] == m2["status"] == "ok",
           "dstrain bench: 1-rank and 2-rank results ok")
        pj = os.path.join(tmp, "pred.json")
        rc, text = run("scaling-model", r1, "--network", "custom", "--bandwidth", "%.6g" % bw,
                       "--latency", "%.6g" % lat, "--gpus", "1,2", "--json", pj)
        print(text)
        ck(rc == 0, "scaling-model exit 0")
        ck(not re.search(r"not matched", text), "every parameter placed by dstrain bench's layer names")
        with open(pj) as f:
            rows = {r["gpus"]: r for r in json.load(f)["rows"]}
        ck(abs(rows[1]["step_ms"] - m1["step_ms"]) <= 1e-6 * m1["step_ms"],
           "N=1 prediction = measured 1-rank step (%.3f ms)" % m1["step_ms"])
        pred, meas = rows[2]["step_ms"], m2["step_ms"]
        ratio = meas / pred
        phases = {p["name"]: round(p["ms"], 2) for p in m2.get("phases", [])}
        print("2 ranks: predicted %.3f ms (exposed reduction %.3f ms), measured %.3f ms "
              "(95%% CI %.3f-%.3f; phases %s): measured / predicted = %.2f"
              % (pred, rows[2]["exposed_ms"], meas, m2["step_ms_ci95"][0], m2["step_ms_ci95"][1],
                 phases, ratio))
        ck(0.8 <= ratio <= 3.0, "sanity bound 0.8 <= measured / predicted (%.2f) <= 3" % ratio)
    ck.close()


if __name__ == "__main__":
    main()
