#!/usr/bin/env bash
# jobs/slurm/sweep.sh's bench kind end to end, without Slurm: stand-ins for
# sbatch, srun and scontrol on PATH run each job at once, in order of
# submission (so every dependency is met), with SLURM_JOB_ID, SLURM_NTASKS
# and the --output file set; srun becomes `mpiexec -np SLURM_NTASKS`.
# (tests/slurm/test_slurm.sh runs the train kind on a real Slurm.)
#
#   sweep_bench_test.sh BUILD/dstrain
#
# DSTRAIN_SWEEP_KIND=bench DSTRAIN_SWEEP_MAX=2 DSTRAIN_SWEEP_WAIT=1 with the
# tiny preset, 2 warm-up and 5 timed steps. Asserts: sweep.sh exits 0; each
# job ran `dstrain bench` (its job-*.txt command) and wrote
# bench-g001.json / bench-g002.json with ranks 1 / 2 and status ok; the
# gather job's bench/scaling-report wrote scaling.tsv with ok rows for 1 and
# 2 GPUs whose speedup is samples/s(2) / samples/s(1) from those files (to
# 1e-4) and efficiency = speedup / 2; scaling-speedup.png is a PNG.
set -uo pipefail
bin=${1:?usage: sweep_bench_test.sh DSTRAIN}
here=$(cd "$(dirname "$0")/../.." && pwd)
bin=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")
tmp=$(mktemp -d "${TMPDIR:-/tmp}/dstrain-sweep-bench.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail=0
ok()  { echo "ok: $*"; }
bad() { echo "FAIL: $*"; fail=1; }

mkdir -p "$tmp/bin"
cat >"$tmp/bin/sbatch" <<'EOF'
#!/usr/bin/env bash
# sbatch stand-in: runs the job script now; prints the job id (--parsable).
set -uo pipefail
n=1 out= wait=0
while [ $# -gt 0 ]; do
  case $1 in
    --ntasks=*) n=${1#*=} ;;
    --output=*) out=${1#*=} ;;
    --wait) wait=1 ;;
    --*) ;;
    *) break ;;
  esac
  shift
done
script=$1; shift
id=$(( $(cat "$FAKE_SLURM_DIR/next" 2>/dev/null || echo 100) + 1 ))
echo "$id" >"$FAKE_SLURM_DIR/next"
out=${out:-slurm-%j.out}; out=${out//%j/$id}
SLURM_JOB_ID=$id SLURM_NTASKS=$n SLURM_SUBMIT_DIR=$PWD SLURM_JOB_NUM_NODES=1 \
  SLURM_JOB_NODELIST=localhost bash "$script" "$@" >"$out" 2>&1
rc=$?
echo "$id"
[ "$wait" = 1 ] && exit "$rc"
exit 0
EOF
cat >"$tmp/bin/srun" <<'EOF'
#!/usr/bin/env bash
# srun stand-in: --mpi=list says none; else mpiexec -np SLURM_NTASKS PROGRAM...
if [ "${1:-}" = --mpi=list ]; then echo "MPI plugin types are..."; echo "	none"; exit 0; fi
while [ $# -gt 0 ] && [ "${1#--}" != "$1" ]; do shift; done
exec "${MPIEXEC:-mpiexec}" -np "${SLURM_NTASKS:-1}" --oversubscribe --bind-to none "$@"
EOF
printf '#!/bin/sh\nexit 0\n' >"$tmp/bin/scontrol"
chmod +x "$tmp/bin/"*
export FAKE_SLURM_DIR=$tmp/bin PATH=$tmp/bin:$PATH
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1

dir=$tmp/sweep
(cd "$tmp" && DSTRAIN=$bin DSTRAIN_SWEEP_KIND=bench DSTRAIN_SWEEP_MAX=2 DSTRAIN_SWEEP_DIR=$dir \
  DSTRAIN_SWEEP_WAIT=1 DSTRAIN_STEPS=5 DSTRAIN_WARMUP=2 DSTRAIN_REPO=$here \
  timeout 300 bash "$here/jobs/slurm/sweep.sh") >"$tmp/sweep.out" 2>&1
rc=$?
sed 's/^/    /' "$tmp/sweep.out"
[ "$rc" -eq 0 ] && ok "sweep.sh exit 0" || {
  bad "sweep.sh exit $rc"
  for f in "$dir"/*.out; do [ -f "$f" ] && { echo "$f:"; sed 's/^/    /' "$f"; }; done
}
if grep -l "command: .*$bin bench " "$dir"/job-*.txt 2>/dev/null | wc -l | grep -qx 2; then
  ok "both jobs ran dstrain bench"
else
  bad "job commands: $(cat "$dir"/job-*.txt 2>/dev/null)"
fi
/usr/bin/python3 - "$dir" <<'EOF' || fail=1
import csv, json, os, sys
d = sys.argv[1]
bad = 0
def check(ok, what):
    global bad
    print(("ok: " if ok else "FAIL: ") + what)
    bad |= not ok
thr = {}
for g in (1, 2):
    p = os.path.join(d, "bench-g%03d.json" % g)
    try:
        r = json.load(open(p))["results"][0]
    except (OSError, ValueError, KeyError, IndexError) as e:
        check(False, "%s: %s" % (p, e))
        continue
    check(r["ranks"] == g and r["status"] == "ok", "bench-g%03d.json: ranks %s, %s" % (g, r["ranks"], r["status"]))
    thr[g] = r.get("samples_per_s")
try:
    rows = {int(r["gpus"]): r for r in csv.DictReader(open(os.path.join(d, "scaling.tsv")), delimiter="\t")}
except OSError as e:
    rows = {}
    check(False, "scaling.tsv: %s" % e)
if rows and len(thr) == 2:
    check(rows[1]["status"] == rows[2]["status"] == "ok", "scaling.tsv: rows 1 and 2 ok")
    sp, ef = float(rows[2]["speedup"]), float(rows[2]["efficiency"])
    want = thr[2] / thr[1]
    check(abs(sp - want) <= 1e-4 * want and abs(ef - sp / 2) <= 1e-4 * ef,
          "speedup %.6g = %.6g / %.6g, efficiency %.6g = speedup / 2" % (sp, thr[2], thr[1], ef))
png = os.path.join(d, "scaling-speedup.png")
check(os.path.exists(png) and open(png, "rb").read(8) == b"\x89PNG\r\n\x1a\n", "scaling-speedup.png is a PNG")
sys.exit(bad)
EOF
[ "$fail" -eq 0 ] && echo "sweep_bench_test: PASS" || echo "sweep_bench_test: FAIL"
exit "$fail"
