# preempt.sh - sourced by train.sbatch and train-mpirun.sbatch: runs the
# launcher so that a preemption loses nothing and the job goes on by itself.
#
#   run_preemptible steps|launcher COMMAND...
#
# Slurm sends the batch script SIGUSR1 120 s before the time limit
# (--signal=B:USR1@120). The trap passes it to every rank: "steps" signals
# the job's steps (scancel --signal=USR1; srun), "launcher" signals the
# launcher, which forwards it to its ranks (Open MPI's mpirun does). dstrain
# finishes its step, writes a checkpoint and exits 75; then, for training,
# the job requeues itself (same job id, --requeue) and the requeued run
# resumes from that checkpoint (--resume auto). After DSTRAIN_MAX_REQUEUES
# requeues (20) it stops instead. Returns the launcher's status.

# need_counts: from the checkout this file is sourced from
. "$(dirname "${BASH_SOURCE[0]}")/../lib/env_checks.sh"

run_preemptible() {
  local forward=$1 pid rc again warned=0
  shift
  # the cap and the count, checked before the run: "five" made the cap's
  # test fail and the job requeue without end
  need_counts preempt 0 DSTRAIN_MAX_REQUEUES SLURM_RESTART_COUNT || return 2
  # in the background: bash runs a trap only between commands, and the
  # warning must reach the ranks while they train
  "$@" &
  pid=$!
  # shellcheck disable=SC2064  # the pid is fixed now
  trap "warned=1; echo 'preempt: SIGUSR1 (time limit near): every rank checkpoints and stops' >&2
        if [ $forward = steps ]; then scancel --signal=USR1 \"\$SLURM_JOB_ID\" 2>/dev/null || kill -USR1 $pid
        else kill -USR1 $pid; fi" USR1
  while :; do
    rc=0; wait "$pid" || rc=$?
    kill -0 "$pid" 2>/dev/null || break   # a trap interrupted the wait: wait again
  done
  if [ "$rc" -gt 128 ]; then   # the trap and the exit came together: the real status
    again=0; wait "$pid" 2>/dev/null || again=$?
    [ "$again" -ne 127 ] && rc=$again
  fi
  trap - USR1
  # 75: stopped by SIGTERM/SIGUSR1 after a checkpoint; go on in a requeued job
  if [ "$rc" -eq 75 ] && [ "${command:-train}" = train ] && [ -n "${SLURM_JOB_ID:-}" ]; then
    local restarts=${SLURM_RESTART_COUNT:-0}
    if [ "$((10#$restarts))" -ge "$((10#${DSTRAIN_MAX_REQUEUES:-20}))" ]; then
      echo "preempt: stopped after $restarts requeues (DSTRAIN_MAX_REQUEUES): not requeued; resubmit to go on" >&2
      return "$rc"
    fi
    echo "preempt: checkpoint written$([ "$warned" = 1 ] && echo " at the time-limit warning"); requeueing job $SLURM_JOB_ID (restart $((restarts + 1)))" >&2
    scontrol requeue "$SLURM_JOB_ID" && return 0
    echo "preempt: scontrol requeue $SLURM_JOB_ID failed: resubmit to go on (--resume auto)" >&2
  fi
  return "$rc"
}
