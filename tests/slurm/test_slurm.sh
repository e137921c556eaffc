#!/usr/bin/env bash
# The Slurm job scripts on a real, one-node Slurm started here for the test.
# usage: test_slurm.sh PATH/TO/dstrain
#
# 1. Installs slurm-wlm, munge and libpmix-dev when missing
#    (scripts/install-slurm.sh; apt-get, needs root and Debian's archive).
# 2. In a temporary directory: a fresh munge key, munged on its own socket,
#    and a slurm.conf for this host only (NodeAddr 127.0.0.1, CPUs and memory
#    from `slurmd -C`, SlurmUser root, select/cons_tres, proctrack/linuxproc,
#    task/none, MpiDefault pmix when the plugin is there, no accounting,
#    ports 6817/6818 or the next free pair). slurmctld and slurmd run in the
#    foreground as children of this script and talk over 127.0.0.1 only;
#    nothing in /etc is changed.
# 3. Waits (bounded) until sinfo shows the node idle, then runs, waiting for
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
mpi_required=1

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

# Ends one process by pid: TERM, up to 10 s, then KILL.
stop_pid() {
  local pid=$1 i
  kill -TERM "$pid" 2>/dev/null || return 0
  for i in $(seq 50); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.2; done
  kill -KILL "$pid" 2>/dev/null
}
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
  local rc=$? i pid left
  trap - EXIT INT TERM
  if [ -S "$tmp/munge/munge.socket" ] && [ -n "${pids[1]:-}" ]; then
    scancel --quiet --user="$(id -un)" >/dev/null 2>&1
    for i in $(seq 30); do [ -z "$(squeue -h -o %i 2>/dev/null)" ] && break; sleep 1; done
  fi
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do stop_pid "${pids[$i]}"; done
  wait 2>/dev/null
  left=$(ours)
  for pid in $left; do stop_pid "$pid"; done
  [ -z "$left" ] || log "ended leftover processes: $left"
  if [ "${KEEP_SLURM_TEST:-0}" = 1 ]; then log "kept $tmp"; else rm -rf "$tmp"; fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---- munge: a private key and socket ----------------------------------------
mkdir -p "$tmp/munge" && chmod 755 "$tmp/munge"
if command -v mungekey >/dev/null; then
  mungekey --create --keyfile="$tmp/munge/munge.key" >/dev/null 2>&1
fi
[ -s "$tmp/munge/munge.key" ] || head -c 1024 /dev/urandom >"$tmp/munge/munge.key"
chmod 600 "$tmp/munge/munge.key"
munged --foreground --socket="$tmp/munge/munge.socket" --key-file="$tmp/munge/munge.key" \
       --log-file="$tmp/munge/munged.log" --pid-file="$tmp/munge/munged.pid" \
       --seed-file="$tmp/munge/munged.seed" >"$tmp/munge/stdout" 2>&1 &
pids+=($!)
for i in $(seq 50); do [ -S "$tmp/munge/munge.socket" ] && break; sleep 0.2; done
munge -S "$tmp/munge/munge.socket" -n | unmunge -S "$tmp/munge/munge.socket" >/dev/null ||
  { cat "$tmp/munge/munged.log" "$tmp/munge/stdout"; log "munged does not answer"; exit 1; }

# ---- slurm.conf for this host -------------------------------------------------
host=$(hostname -s)
hw=$(slurmd -C | head -1)
cpus=$(sed -nE 's/.* CPUs=([0-9]+).*/\1/p' <<<"$hw")
mem=$(sed -nE 's/.* RealMemory=([0-9]+).*/\1/p' <<<"$hw")
{ [ -n "$cpus" ] && [ -n "$mem" ]; } || { log "slurmd -C: $hw"; log "no CPUs or RealMemory there"; exit 1; }
if [ "$cpus" -ge 2 ]; then node=${hw#NodeName=* }   # CPUs, boards, sockets, cores, threads, memory
else node="CPUs=2 RealMemory=$mem"; fi             # 2 tasks even on 1 core (config_overrides)
# The first pair of ports from 6817 that nothing on 127.0.0.1 accepts.
listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
port=6817
while listening "$port" || listening $((port + 1)); do port=$((port + 2)); done
dport=$((port + 1))
mkdir -p "$tmp/state" "$tmp/spool" "$tmp/log" "$tmp/run" "$tmp/jobs"
cat >"$SLURM_CONF" <<EOF
# one-node Slurm for dstrain's slurm_train test (written by tests/slurm/test_slurm.sh)
ClusterName=dstrain-test
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$port
SlurmdPort=$dport
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$tmp/munge/munge.socket
StateSaveLocation=$tmp/state
SlurmdSpoolDir=$tmp/spool
SlurmctldPidFile=$tmp/run/slurmctld.pid
SlurmdPidFile=$tmp/run/slurmd.pid
SlurmctldLogFile=$tmp/log/slurmctld.log
SlurmdLogFile=$tmp/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
ReturnToService=2
SlurmdParameters=config_overrides
MailProg=/bin/true
InactiveLimit=0
KillWait=5
MinJobAge=600
NodeName=$host NodeHostname=$host NodeAddr=127.0.0.1 $node State=UNKNOWN
PartitionName=test Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
# srun reads slurm.conf even to list its MPI plugins
if grep -qw pmix <<<"$(srun --mpi=list 2>&1)"; then
  sed -i 's/^MpiDefault=none$/MpiDefault=pmix/' "$SLURM_CONF"
fi
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
  tail -n 20 "$tmp/log/slurmctld.log" "$tmp/log/slurmd.log" "$tmp/log/"*.stdout
  log "the node is not idle after 60 s (state: '${state:-none}')"; exit 1
fi
ok "slurmctld and slurmd up, node $host idle"

# ---- jobs ---------------------------------------------------------------------
# check_train NAME OUTFILE METRICS: the job output shows 2 ranks trained to the end.
check_train() {
  local name=$1 out=$2 metrics=$3 banners dones lines mpi=1
  banners=$(grep -c '^dstrain train: ' "$out")
  dones=$(grep -c '^done: ' "$out")
  if grep -q '^dstrain train: .* 2 ranks' "$out"; then
    if [ "$banners" -eq 1 ] && [ "$dones" -eq 1 ]; then ok "$name: one banner with 2 ranks, one 'done:'"
    else bad "$name: $banners banners and $dones 'done:' lines, expected 1 each from rank 0"; fi
  elif [ "$mpi_required" = 0 ] && [ "$banners" -eq 2 ] && [ "$dones" -eq 2 ]; then
    mpi=0
    ok "$name: 2 tasks each trained to 'done:' (independent single-rank runs: dstrain has no MPI yet)"
  else
    bad "$name: no banner with '2 ranks' ($banners banners, $dones 'done:' lines)"
  fi
  # step records only: the log also holds each checkpoint's record
  lines=$(grep -c '^{"step":' "$metrics" 2>/dev/null || echo 0)
  if [ "$lines" -eq 20 ] && grep '^{"step":' "$metrics" | tail -n 1 | grep -q '^{"step":20,'; then
    ok "$name: $metrics has 20 steps"
  elif [ "$mpi" = 0 ] && grep -q '"step":20,' "$metrics"; then
    # two independent processes wrote the same file over each other
    ok "$name: $metrics reaches step 20 ($lines lines from 2 writers over each other)"
  else
    bad "$name: $metrics has $lines lines, last: $(tail -n 1 "$metrics" 2>/dev/null)"
  fi
}
# wait_job ID SECONDS: until the job leaves the queue; fails unless it COMPLETED.
wait_job() {
  local id=$1 i state
  for ((i = 0; i < $2; i++)); do
    [ -z "$(squeue -h -j "$id" -o %i 2>/dev/null)" ] && break
    sleep 1
  done
  state=$(scontrol show job "$id" 2>/dev/null | sed -nE 's/.*JobState=([A-Z_]+).*/\1/p')
  echo "$state"
  [ "$state" = COMPLETED ]
}
# run_job NAME SCRIPT [VAR=VALUE...]: the script with 2 tasks, waiting at most
# 300 s, then check_train. Without VAR=VALUE: sbatch --ntasks=2 SCRIPT; with
# them: the script run directly with those variables (NTASKS=2), so that it
# submits itself.
run_job() {
  local name=$1 script=$2 out=$tmp/jobs/$1.out dir=$tmp/jobs/$1 id state t0
  shift 2
  t0=$(date +%s)
  if [ $# -eq 0 ]; then
    id=$(DSTRAIN=$bin DSTRAIN_OUT=$dir sbatch --parsable --ntasks=2 --job-name="$name" \
           --output="$out" "$here/$script" 2>"$tmp/jobs/$name.err")
  else
    id=$(env "$@" DSTRAIN="$bin" DSTRAIN_OUT="$dir" SBATCH_ARGS="--parsable --job-name=$name --output=$out" \
           "$here/$script" 2>"$tmp/jobs/$name.err")
  fi
  if [ -z "$id" ]; then bad "$name: sbatch failed: $(cat "$tmp/jobs/$name.err")"; return; fi
  state=$(wait_job "$id" 300)
  log "$name: job $id $state after $(($(date +%s) - t0)) s; output:"
  sed 's/^/    /' "$out" 2>/dev/null
  if [ "$state" != COMPLETED ]; then bad "$name: job $id ended ${state:-in an unknown state}"; return; fi
  check_train "$name" "$out" "$dir/metrics-rank0.jsonl"
}
run_job train-srun jobs/slurm/train.sbatch
run_job train-mpirun jobs/slurm/train-mpirun.sbatch NTASKS=2

# Preemption: the time-limit warning (what --signal=B:USR1@120 sends the
# batch script) mid-run; the script passes it to the ranks, they checkpoint
# and exit 75, the job requeues itself and the requeued run resumes; its
# final parameters equal those of the same training run uninterrupted.
preempt_job() {   # NAME SCRIPT
  local name=$1 script=$2 dir=$tmp/jobs/$1 out=$tmp/jobs/$1.out id i t0 state restarts
  local steps=40 opts="--checkpoint-every 5 --print-every 1"
  t0=$(date +%s)
  # Steps 9 to 20 take half a second more on rank 0 (DSTRAIN_FAULT=slow): the
  # warning sent once 8 steps are logged lands mid-run, however fast the
  # CPU runs tiny (a few ms a step: the whole run could end before it)
  id=$(DSTRAIN_FAULT=slow:0:9-20 DSTRAIN=$bin DSTRAIN_OUT=$dir DSTRAIN_STEPS=$steps DSTRAIN_BATCH=2 DSTRAIN_MAX_FRAMES=120 \
         DSTRAIN_ARGS="$opts" sbatch --parsable --ntasks=2 --job-name=$name --open-mode=append \
         --output="$out" "$here/$script" 2>"$tmp/jobs/$name.err")
  if [ -z "$id" ]; then bad "$name: sbatch failed: $(cat "$tmp/jobs/$name.err")"; return; fi
  for i in $(seq 1 1200); do   # until 8 steps are logged (bounded: 120 s)
    [ "$({ wc -l <"$dir/metrics-rank0.jsonl"; } 2>/dev/null || echo 0)" -ge 8 ] && break
    sleep 0.1
  done
  scancel --signal=USR1 --batch "$id" || bad "$name: scancel --signal=USR1 --batch $id failed"
  # Slurm makes a requeued job eligible 120 s later; the test starts it at
  # once, but only when the old run's batch script and step have ended (the
  # script's exit would end the new run's job; a step still ending takes the
  # new run's step id)
  for i in $(seq 1 600); do
    restarts=$(scontrol show job "$id" 2>/dev/null | sed -nE 's/.*Restarts=([0-9]+).*/\1/p')
    state=$(scontrol show job "$id" 2>/dev/null | sed -nE 's/.*JobState=([A-Z_]+).*/\1/p')
    [ "${restarts:-0}" -ge 1 ] && [ "$state" = PENDING ] &&
      ! pgrep -f "slurmstepd: \[$id\." >/dev/null && break
    sleep 0.2
  done
  # slurmd revokes the old run's credentials by the second: a new run
  # started within the same second is refused ("Job credential revoked")
  sleep 2
  scontrol update jobid="$id" StartTime=now >/dev/null 2>&1
  state=$(wait_job "$id" 300)
  restarts=$(scontrol show job "$id" 2>/dev/null | sed -nE 's/.*Restarts=([0-9]+).*/\1/p')
  log "$name: job $id $state after $(($(date +%s) - t0)) s, restarts ${restarts:-0}; output:"
  sed 's/^/    /' "$out" 2>/dev/null
  if [ "$state" = COMPLETED ] && [ "${restarts:-0}" -ge 1 ] && grep -q "requeueing job $id" "$out" &&
     grep -q "stopped by User defined signal 1" "$out" && grep -q "^resumed from .*step-" "$out"; then
    ok "$name: SIGUSR1 -> checkpoint, exit 75, requeued, resumed, COMPLETED"
  else bad "$name: job $id ${state:-unknown}, restarts ${restarts:-0}"; return; fi
  # the same run without the interruption, on 2 ranks outside Slurm
  local ref=$tmp/jobs/$name-ref
  OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 \
    timeout 300 mpiexec -np 2 "$bin" train --model tiny --synthetic --max-frames 120 --steps $steps \
    --batch 2 $opts --checkpoint-dir "$ref" >"$ref.out" 2>&1 || bad "$name: reference run: $(tail -3 "$ref.out")"
  local last; last=$(printf 'step-%08d.h5' $steps)
  if (for g in /params /state /optim; do
        h5diff -q "$dir/checkpoints/$last" "$ref/$last" "$g" "$g" >/dev/null 2>&1 || exit 1
      done); then
    ok "$name: parameters, BatchNorm and optimizer state equal the uninterrupted run's, bit for bit"
  else bad "$name: the preempted and requeued job ends with other parameters than an uninterrupted run"; fi
}
preempt_job preempt-srun jobs/slurm/train.sbatch
preempt_job preempt-mpirun jobs/slurm/train-mpirun.sbatch

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
[ "$fail" -eq 0 ] || { tail -n 30 "$tmp/log/slurmctld.log" "$tmp/log/slurmd.log"; exit 1; }
