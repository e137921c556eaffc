# env_checks.sh - sourced by the job scripts (jobs/mpiexec/train.sh,
# jobs/slurm/*.sbatch, sweep.sh, preempt.sh): their counts from the
# environment checked before anything uses them.
#
#   need_counts WHO LEAST NAME...
#
# Each NAME, when set and not empty, must be a whole number >= LEAST; the
# first that is not is named on stderr as "WHO: NAME=VALUE: must be a whole
# number >= LEAST" and need_counts returns 2 (the caller exits or returns).
# Why: bash's arithmetic reads "two" as a variable's name ("unbound
# variable" under set -u), and a failed [ -ge ] let DSTRAIN_MAX_REQUEUES=five
# skip the requeue cap.
need_counts() {
  local who=$1 least=$2 name v
  shift 2
  for name in "$@"; do
    v=${!name:-}
    [ -z "$v" ] && continue
    if ! [[ $v =~ ^[0-9]+$ ]] || [ "$((10#$v))" -lt "$least" ]; then
      echo "$who: $name=$v: must be a whole number >= $least" >&2
      return 2
    fi
  done
  return 0
}
