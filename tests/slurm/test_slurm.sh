#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# The Slurm job scripts on a real, one-node Slurm started here for the test.
# usage: test_slurm.sh PATH/TO/dstrain
#
# 1. Installs slurm-wlm, munge and libpmix-dev when missing
#    (scripts/install-slurm.sh; apt-get, needs root and Debian's archive).
# 2. In a temporary directory: a fresh munge key, munged on its own socket,
#    and a slurm.conf for this host only (NodeAddr 127.0.0.1, CPUs and memory
#    from `slurmd -C`, SlurmUser root, select/cons_tres, proctrack/linuxproc,
#    task/none, MpiDefault pmix when the plugin is there, no accounting,
#    ports 6817/6818 or the next free pair; slurm_conf.sh, shared with the
#    2-node test). slurmctld and slurmd run in the foreground as children of
#    this script and talk over 127.0.0.1 only; nothing in /etc is changed.
# 3. Waits (bounded) until sinfo shows the node idle, then runs (the jobs and
#    their checks in slurm_jobs.sh, shared with the 2-node test), waiting for
#    each job at most 300 s: `sbatch --ntasks=2 jobs/slurm/train.sbatch`
#    (srun), `NTASKS=2 jobs/slurm/train-mpirun.sbatch` (submits itself; mpirun
#    inside the allocation), and jobs/slurm/sweep.sh capped at 2 ranks; checks
#    each job trained on 2 ranks and finished (banner, 'done:' line, a
#    metrics file of 20 steps) and that the sweep's summary has both rows.
#    Preemption, with each of the two scripts: SIGUSR1 to the batch script
#    mid-run (what --signal=B:USR1@120 sends), then the checkpoint, exit 75,
#    requeue and resumed run; the job COMPLETES with the parameters,
#    BatchNorm statistics and optimizer state of the same run uninterrupted.
# 4. On exit, always: cancels the jobs, stops slurmd, slurmctld and munged,
#    and ends any process still carrying this test's SLURM_CONF (by pid);
#    removes the directory unless KEEP_SLURM_TEST=1.
# Not root: skipped (exit 77).
set -uo pipefail
bin=${1:?usage: test_slurm.sh DSTRAIN}
here=$(cd "$(dirname "$0")/../.." && pwd)
bin=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")

# The 2 tasks form one MPI job: rank 0 prints one banner saying "2 ranks" and one
# 'done:' line. (mpi_required=0 would also accept 2 independent one-rank runs.)
mpi_required=1   # (slurm_jobs.sh)

log() { printf 'test_slurm: %s\n' "$*"; }
pass=0 fail=0
ok()  { pass=$((pass + 1)); log "ok: $*"; }
bad() { fail=$((fail + 1)); log "FAIL: $*" >&2; }

[ -x "$bin" ] || { log "$bin: not executable"; exit 1; }
[ "$(id -u)" -eq 0 ] || { log "SKIP: not root (slurmd must be root to start jobs here)"; exit 77; }
if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null ||
   ! dpkg-query -W -f='${Status}' libpmix-dev 2>/dev/null | grep -q "install ok installed"; then
  bash "$here/scripts/install-slurm.sh" || { log "installing Slurm failed"; exit 1; }
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/dstrain-slurm.XXXXXX")
chmod 755 "$tmp"   # munged wants every directory above its socket searchable by all
export SLURM_CONF=$tmp/slurm.conf
pids=()            # daemons started here: munged, slurmctld, slurmd
# shellcheck source=slurm_conf.sh
. "$here/tests/slurm/slurm_conf.sh"

# Processes other than this script whose environment carries this test's
# SLURM_CONF: the daemons, slurmstepd and the job's tasks.
ours() {
  local e pid
  for e in /proc/[0-9]*/environ; do
    pid=${e#/proc/}; pid=${pid%/environ}
    [ "$pid" = $$ ] && continue
    { tr "\\0" "\\n" <"$e"; } 2>/dev/null | grep -qxF "SLURM_CONF=$SLURM_CONF" && echo "$pid"
  done
}
cleanup() {
  local rc=$? pid left
  trap - EXIT INT TERM
  # shellcheck disable=SC2119  # no CLIENT prefix: slurmctld listens here
  slurm_stop_all
  left=$(ours)
  for pid in $left; do slurm_stop_pid "$pid"; done
  [ -z "$left" ] || log "ended leftover processes: $left"
  if [ "${KEEP_SLURM_TEST:-0}" = 1 ]; then log "kept $tmp"; else rm -rf "$tmp"; fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---- munge and slurm.conf for this host (slurm_conf.sh) -----------------------
slurm_munge_start "$tmp/munge" || exit 1
pids+=("$SLURM_MUNGED_PID")
host=$(hostname -s)
node=$(slurm_node_hw) || exit 1
# The first pair of ports from 6817 that nothing on 127.0.0.1 accepts.
listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
port=6817
while listening "$port" || listening $((port + 1)); do port=$((port + 2)); done
dport=$((port + 1))
mkdir -p "$tmp/jobs"
slurm_conf_write "$SLURM_CONF" "$tmp" "$tmp/munge/munge.socket" "$port" "$dport" \
  "$host" 127.0.0.1 "$node" "$host:127.0.0.1" || { log "writing slurm.conf failed"; exit 1; }
mpidefault=$(sed -n 's/^MpiDefault=//p' "$SLURM_CONF")
log "slurm.conf in $tmp: node $host ($node), ports $port/$dport, MpiDefault=$mpidefault"

slurmctld -D -i -f "$SLURM_CONF" >"$tmp/log/slurmctld.stdout" 2>&1 &
pids+=($!)
slurmd -D -f "$SLURM_CONF" >"$tmp/log/slurmd.stdout" 2>&1 &
pids+=($!)
state=
for i in $(seq 60); do
  state=$(sinfo -h -N -o %T 2>/dev/null | head -1)
  [ "$state" = idle ] && break
  sleep 1
done
if [ "$state" != idle ]; then
  tail -n 20 "$tmp/log/"*.log "$tmp/log/"*.stdout
  log "the node is not idle after 60 s (state: '${state:-none}')"; exit 1
fi
ok "slurmctld and slurmd up, node $host idle"

# ---- jobs (slurm_jobs.sh) -----------------------------------------------------
# shellcheck disable=SC2034  # for slurm_jobs.sh
jobs=$tmp/jobs
SLURM_ON=()              # the client commands reach slurmctld from here
JOB_SHAPE=(--ntasks=2)
JOB_RANKS=2
# shellcheck source=slurm_jobs.sh
. "$here/tests/slurm/slurm_jobs.sh"
run_job train-srun jobs/slurm/train.sbatch
run_job train-mpirun jobs/slurm/train-mpirun.sbatch NTASKS=2

# the preempted run's reference: the same training on 2 ranks outside Slurm
reference() {   # DIR DSTRAIN-ARGS...
  local ref=$1; shift
  OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 \
    timeout 300 mpiexec -np 2 "$bin" "$@" --checkpoint-dir "$ref" >"$ref.out" 2>&1 &
  wait $!   # in the background: a signal's trap runs at once, with the test's output
}
preempt_job preempt-srun jobs/slurm/train.sbatch reference
preempt_job preempt-mpirun jobs/slurm/train-mpirun.sbatch reference

# run_sweep NAME DIR [VAR=VALUE...]: jobs/slurm/sweep.sh at 1 and 2 ranks
# into DIR, waiting for its gather job; its output logged. Fails (and logs
# the jobs' output) when sweep.sh does.
run_sweep() {
  local name=$1 dir=$2 t0 rc
  shift 2
  t0=$(date +%s)
  (cd "$tmp" && env DSTRAIN="$bin" DSTRAIN_SWEEP_MAX=2 DSTRAIN_SWEEP_DIR="$dir" DSTRAIN_SWEEP_WAIT=1 "$@" \
    timeout 400 bash "$here/jobs/slurm/sweep.sh") >"$tmp/jobs/$name.out" 2>&1
  rc=$?
  log "$name (exit $rc, $(($(date +%s) - t0)) s):"
  sed 's/^/    /' "$tmp/jobs/$name.out"
  [ "$rc" -eq 0 ] && return 0
  bad "$name: sweep.sh exited $rc"
  for f in "$dir"/*.out; do [ -f "$f" ] && { log "$f:"; sed 's/^/    /' "$f"; }; done
  return 1
}

# The train kind: summary.tsv from the jobs' metrics.
sweepdir=$tmp/jobs/sweep
if ! run_sweep sweep "$sweepdir"; then
  :
elif [ "$(awk -F'\t' '$1 == 1 || $1 == 2 { if ($NF == "ok") n++ } END { print n + 0 }' \
          "$sweepdir/summary.tsv" 2>/dev/null)" -eq 2 ]; then
  ok "sweep: summary.tsv has rows for 1 and 2 ranks"
else
  bad "sweep: summary.tsv lacks ok rows for 1 and 2 ranks: $(cat "$sweepdir/summary.tsv" 2>/dev/null)"
fi

# The bench kind: every job runs dstrain bench, the gather job
# bench/scaling-report (speedup and efficiency from the jobs' JSON, and its plot).
bsweep=$tmp/jobs/bench-sweep
if ! run_sweep bench-sweep "$bsweep" DSTRAIN_SWEEP_KIND=bench DSTRAIN_STEPS=5 DSTRAIN_WARMUP=2 \
       DSTRAIN_REPO="$here"; then
  :
elif /usr/bin/python3 - "$bsweep" <<'EOF'
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
then
  ok "bench sweep: bench-g001/g002.json, scaling.tsv's speedup and efficiency, the plot"
else
  bad "bench sweep: see the lines above"
fi

log "$pass passed, $fail failed"
[ "$fail" -eq 0 ] || { tail -n 30 "$tmp/log/slurmctld.log" "$tmp/log/slurmd-"*.log; exit 1; }
