# shellcheck shell=bash disable=SC2154  # bin, here, jobs, mpi_required: the test's
# slurm_jobs.sh - sourced by tests/slurm/test_slurm.sh and test_slurm_nodes.sh:
# the jobs both run on the Slurm they start, and their checks.
#
# The test sets, before calling these:
#   bin here jobs   the dstrain binary, the checkout, the folder of the jobs'
#                   output (shared by every node)
#   log ok bad      its messages and pass/fail counting
#   SLURM_ON        an array: the command prefix under which Slurm's client
#                   commands reach slurmctld (empty on the one-node Slurm;
#                   nsenter into node1 on the simulated cluster)
#   JOB_SHAPE       an array: the sbatch options of a job (--ntasks=2)
#   JOB_RANKS       the ranks such a job has (2)
#   mpi_required    1: the tasks form one MPI job (one banner, one 'done:')
#
#   sl CMD...                       CMD under SLURM_ON
#   job_field ID FIELD              FIELD of `scontrol show job ID` (JobState, Restarts)
#   wait_job ID SECONDS             until the job leaves the queue; prints its
#                                   state, fails unless it COMPLETED
#   check_train NAME OUT METRICS    the job trained JOB_RANKS ranks to the end:
#                                   one banner and one 'done:', 20 step records
#   run_job NAME SCRIPT [VAR=VALUE...]
#                                   the script, waited for at most 300 s, then
#                                   check_train. Without VAR=VALUE: sbatch
#                                   JOB_SHAPE SCRIPT; with them: the script run
#                                   with those variables, so that it submits
#                                   itself. Its output in $jobs/NAME.out
#   preempt_job NAME SCRIPT REF     preemption (below); REF is the test's
#                                   function that runs the same training
#                                   uninterrupted: REF DIR DSTRAIN-ARGS...
#                                   (checkpoints in DIR, output in DIR.out)

sl() { "${SLURM_ON[@]}" "$@"; }

job_field() { sl scontrol show job "$1" 2>/dev/null | sed -nE "s/.*[[:space:]]$2=([A-Za-z0-9_]+).*/\\1/p" | head -1; }

wait_job() {
  local id=$1 i state
  for ((i = 0; i < $2; i++)); do
    [ -z "$(sl squeue -h -j "$id" -o %i 2>/dev/null)" ] && break
    sleep 1
  done
  state=$(job_field "$id" JobState)
  echo "$state"
  [ "$state" = COMPLETED ]
}

check_train() {
  local name=$1 out=$2 metrics=$3 banners dones lines mpi=1 n=$JOB_RANKS
  banners=$(grep -c '^dstrain train: ' "$out")
  dones=$(grep -c '^done: ' "$out")
  if grep -q "^dstrain train: .* $n ranks" "$out"; then
    if [ "$banners" -eq 1 ] && [ "$dones" -eq 1 ]; then ok "$name: one banner with $n ranks, one 'done:'"
    else bad "$name: $banners banners and $dones 'done:' lines, expected 1 each from rank 0"; fi
  elif [ "$mpi_required" = 0 ] && [ "$banners" -eq "$n" ] && [ "$dones" -eq "$n" ]; then
    mpi=0
    ok "$name: $n tasks each trained to 'done:' (independent single-rank runs: dstrain has no MPI yet)"
  else
    bad "$name: no banner with '$n ranks' ($banners banners, $dones 'done:' lines)"
  fi
  # step records only: the log also holds each checkpoint's record
  lines=$(grep -c '^{"step":' "$metrics" 2>/dev/null || echo 0)
  if [ "$lines" -eq 20 ] && grep '^{"step":' "$metrics" | tail -n 1 | grep -q '^{"step":20,'; then
    ok "$name: $metrics has 20 steps"
  elif [ "$mpi" = 0 ] && grep -q '"step":20,' "$metrics"; then
    # independent processes wrote the same file over each other
    ok "$name: $metrics reaches step 20 ($lines lines from $n writers over each other)"
  else
    bad "$name: $metrics has $lines lines, last: $(tail -n 1 "$metrics" 2>/dev/null)"
  fi
}

run_job() {
  local name=$1 script=$2 out=$jobs/$1.out dir=$jobs/$1 id state t0
  shift 2
  t0=$(date +%s)
  if [ $# -eq 0 ]; then
    id=$(DSTRAIN=$bin DSTRAIN_OUT=$dir sl sbatch --parsable "${JOB_SHAPE[@]}" --job-name="$name" \
           --output="$out" "$here/$script" 2>"$jobs/$name.err")
  else
    id=$(sl env "$@" DSTRAIN="$bin" DSTRAIN_OUT="$dir" SBATCH_ARGS="--parsable --job-name=$name --output=$out" \
           "$here/$script" 2>"$jobs/$name.err")
  fi
  if [ -z "$id" ]; then bad "$name: sbatch failed: $(cat "$jobs/$name.err")"; return 1; fi
  state=$(wait_job "$id" 300)
  log "$name: job $id $state after $(($(date +%s) - t0)) s; output:"
  sed 's/^/    /' "$out" 2>/dev/null
  if [ "$state" != COMPLETED ]; then bad "$name: job $id ended ${state:-in an unknown state}"; return 1; fi
  check_train "$name" "$out" "$dir/metrics-rank0.jsonl"
}

# Preemption: the time-limit warning (what --signal=B:USR1@120 sends the
# batch script) mid-run; the script passes it to the ranks, they checkpoint
# and exit 75, the job requeues itself and the requeued run resumes; its
# final parameters, BatchNorm statistics and optimizer state equal those of
# the same training run uninterrupted, bit for bit.
preempt_job() {   # NAME SCRIPT REF
  local name=$1 script=$2 reffn=$3 dir=$jobs/$1 out=$jobs/$1.out id i t0 state restarts
  local steps=40 opts="--checkpoint-every 5 --print-every 1"
  t0=$(date +%s)
  # Steps 9 to 20 take half a second more on rank 0 (DSTRAIN_FAULT=slow): the
  # warning sent once 8 steps are logged lands mid-run, however fast the
  # CPU runs tiny (a few ms a step: the whole run could end before it)
  id=$(DSTRAIN_FAULT=slow:0:9-20 DSTRAIN=$bin DSTRAIN_OUT=$dir DSTRAIN_STEPS=$steps DSTRAIN_BATCH=2 DSTRAIN_MAX_FRAMES=120 \
         DSTRAIN_ARGS="$opts" sl sbatch --parsable "${JOB_SHAPE[@]}" --job-name="$name" --open-mode=append \
         --output="$out" "$here/$script" 2>"$jobs/$name.err")
  if [ -z "$id" ]; then bad "$name: sbatch failed: $(cat "$jobs/$name.err")"; return 1; fi
  for i in $(seq 1 1200); do   # until 8 steps are logged (bounded: 120 s)
    [ "$({ wc -l <"$dir/metrics-rank0.jsonl"; } 2>/dev/null || echo 0)" -ge 8 ] && break
    sleep 0.1
  done
  sl scancel --signal=USR1 --batch "$id" || bad "$name: scancel --signal=USR1 --batch $id failed"
  # Slurm makes a requeued job eligible 120 s later; the test starts it at
  # once, but only when the old run's batch script and steps have ended (the
  # script's exit would end the new run's job; a step still ending takes the
  # new run's step id)
  for i in $(seq 1 600); do
    restarts=$(job_field "$id" Restarts)
    state=$(job_field "$id" JobState)
    [ "${restarts:-0}" -ge 1 ] && [ "$state" = PENDING ] &&
      ! pgrep -f "slurmstepd: \[$id\." >/dev/null && break
    sleep 0.2
  done
  # slurmd revokes the old run's credentials by the second: a new run
  # started within the same second is refused ("Job credential revoked")
  sleep 2
  sl scontrol update jobid="$id" StartTime=now >/dev/null 2>&1
  state=$(wait_job "$id" 300)
  restarts=$(job_field "$id" Restarts)
  log "$name: job $id $state after $(($(date +%s) - t0)) s, restarts ${restarts:-0}; output:"
  sed 's/^/    /' "$out" 2>/dev/null
  if [ "$state" = COMPLETED ] && [ "${restarts:-0}" -ge 1 ] && grep -q "requeueing job $id" "$out" &&
     grep -q "stopped by User defined signal 1" "$out" && grep -q "^resumed from .*step-" "$out"; then
    ok "$name: SIGUSR1 -> checkpoint, exit 75, requeued, resumed, COMPLETED"
  else bad "$name: job $id ${state:-unknown}, restarts ${restarts:-0}"; return 1; fi
  # the same run without the interruption
  local ref=$jobs/$name-ref last
  # shellcheck disable=SC2086  # opts: several options
  "$reffn" "$ref" train --model tiny --synthetic --max-frames 120 --steps $steps --batch 2 $opts ||
    bad "$name: reference run: $(tail -3 "$ref.out")"
  last=$(printf 'step-%08d.h5' $steps)
  if (for g in /params /state /optim; do
        h5diff -q "$dir/checkpoints/$last" "$ref/$last" "$g" "$g" >/dev/null 2>&1 || exit 1
      done); then
    ok "$name: parameters, BatchNorm and optimizer state equal the uninterrupted run's, bit for bit"
  else bad "$name: the preempted and requeued job ends with other parameters than an uninterrupted run"; return 1; fi
}
