#!/usr/bin/env bash
# Data-parallel dstrain training with mpiexec, no scheduler: NTASKS ranks on
# this machine, or on the hosts of HOSTFILE. One rank per GPU; each rank binds
# its GPU from its local rank (dstrain does it).
#
#   jobs/mpiexec/train.sh [DSTRAIN TRAIN OPTIONS...]
#   NTASKS=4 DSTRAIN_MODEL=small jobs/mpiexec/train.sh --print-every 5
#   HOSTFILE=hosts NODES=2 GPUS_PER_NODE=8 DSTRAIN_MODEL=ds2 DSTRAIN_DATA=train.h5 jobs/mpiexec/train.sh
#
# With no variables: 2 ranks train the tiny preset for 20 steps on synthetic
# data (dstrain train --model tiny --synthetic --steps 20 --batch 4
# --max-frames 200 --log OUT/metrics-rank0.jsonl), oversubscribing the cores
# if there are fewer than 2. Arguments are appended to the dstrain train command.
#
# Environment (all optional):
#   DSTRAIN            the dstrain binary (default: build/dstrain of this checkout, else dstrain on PATH)
#   DSTRAIN_MODEL      preset name or a JSON config file (tiny)
#   DSTRAIN_DATA       training feature file (dstrain prep); unset: --synthetic
#   DSTRAIN_VAL        validation feature file (WER/CER after each epoch)
#   DSTRAIN_BATCH      utterances per rank and step (4)
#   DSTRAIN_STEPS      steps (synthetic: 20; with DSTRAIN_DATA: dstrain's default, 1 epoch)
#   DSTRAIN_EPOCHS     epochs (instead of DSTRAIN_STEPS)
#   DSTRAIN_MAX_FRAMES longest synthetic utterance in 10 ms frames (200)
#   DSTRAIN_PRECISION  fp32 | fp64 | fp16 | bf16 (dstrain's default: fp32)
#   DSTRAIN_DEVICE     cpu | cuda (cuda when GPUS_PER_NODE is set, else cpu)
#   DSTRAIN_ARGS       more dstrain train options, split on spaces
#   DSTRAIN_OUT        output directory (out/mpiexec-YYYYMMDD-HHMMSS in this checkout)
#   DSTRAIN_LOG        metrics file, one JSON object per step (DSTRAIN_OUT/metrics-rank0.jsonl)
#   NTASKS             ranks (NODES x GPUS_PER_NODE when GPUS_PER_NODE is set, else 2)
#   NODES              nodes, with GPUS_PER_NODE (1)
#   GPUS_PER_NODE      ranks per node: --map-by ppr:GPUS_PER_NODE:node
#   HOSTFILE           mpiexec --hostfile (unset: this machine only)
#   MPIEXEC            the launcher (mpiexec)
#   MPI_ARGS           more launcher options, split on spaces (e.g. "-x NCCL_DEBUG=INFO")
#   DSTRAIN_BIND       --bind-to: none (default; each rank has a loader and a reduction
#                      thread besides the main one), core, socket, numa
#   DSTRAIN_OVERSUBSCRIBE  1 (default): more ranks than cores allowed
#                      (OMPI_MCA_rmaps_base_oversubscribe=1); 0: Open MPI's default
#   OPENBLAS_NUM_THREADS  BLAS threads per rank (default: each node's cores / the ranks on
#                      that node, at least 1, worked out on the node: jobs/lib/rank_threads.sh)
#   OMP_NUM_THREADS    the CPU backend's threads per rank (default: OPENBLAS_NUM_THREADS)
# Every DSTRAIN_*, OMP_* and OPENBLAS_* variable exported reaches every rank,
# on every node (mpiexec -x). Open MPI's settings for several nodes come from
# jobs/lib/ompi_multinode.sh (a lost node ends the job).
# SIGTERM, SIGINT or SIGUSR1 to the script: the ranks checkpoint (given
# --checkpoint-dir) and stop, and the script exits 75 (see the end). The
# run's output is also in OUT/console.txt.
# Open MPI may run as root (OMPI_ALLOW_RUN_AS_ROOT=1, OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1).
set -euo pipefail
die() { echo "jobs/mpiexec/train.sh: $*" >&2; exit 1; }
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
. "$repo/jobs/lib/env_checks.sh"
# counts from the environment, checked before any is used (env_checks.sh)
need_counts jobs/mpiexec/train.sh 1 NTASKS NODES GPUS_PER_NODE DSTRAIN_BATCH DSTRAIN_STEPS \
  DSTRAIN_EPOCHS DSTRAIN_MAX_FRAMES OPENBLAS_NUM_THREADS OMP_NUM_THREADS || exit 1

bin=${DSTRAIN:-}
[ -z "$bin" ] && [ -x "$repo/build/dstrain" ] && bin=$repo/build/dstrain
[ -z "$bin" ] && bin=$(command -v dstrain || true)
if [ -z "$bin" ] || [ ! -x "$bin" ]; then die "no dstrain binary: set DSTRAIN, build this checkout (scripts/build.sh), or put dstrain on PATH"; fi

gpn=${GPUS_PER_NODE:-}
nodes=${NODES:-1}
if [ -n "${NTASKS:-}" ]; then ntasks=$NTASKS
elif [ -n "$gpn" ]; then ntasks=$((nodes * gpn))
else ntasks=2; fi
out=${DSTRAIN_OUT:-$repo/out/mpiexec-$(date +%Y%m%d-%H%M%S)}
metrics=${DSTRAIN_LOG:-$out/metrics-rank0.jsonl}
mkdir -p "$out" "$(dirname "$metrics")"

args=(train)
model=${DSTRAIN_MODEL:-tiny}
if [ -f "$model" ]; then args+=(--config "$model"); else args+=(--model "$model"); fi
if [ -n "${DSTRAIN_DATA:-}" ]; then
  args+=(--train "$DSTRAIN_DATA")
  [ -n "${DSTRAIN_VAL:-}" ] && args+=(--val "$DSTRAIN_VAL")
  [ -n "${DSTRAIN_STEPS:-}" ] && args+=(--steps "$DSTRAIN_STEPS")
else
  args+=(--synthetic --max-frames "${DSTRAIN_MAX_FRAMES:-200}")
  [ -n "${DSTRAIN_STEPS:-}${DSTRAIN_EPOCHS:-}" ] || args+=(--steps 20)
  [ -n "${DSTRAIN_STEPS:-}" ] && args+=(--steps "$DSTRAIN_STEPS")
fi
[ -n "${DSTRAIN_EPOCHS:-}" ] && args+=(--epochs "$DSTRAIN_EPOCHS")
args+=(--batch "${DSTRAIN_BATCH:-4}")
[ -n "${DSTRAIN_PRECISION:-}" ] && args+=(--precision "$DSTRAIN_PRECISION")
device=${DSTRAIN_DEVICE:-}
[ -z "$device" ] && [ -n "$gpn" ] && device=cuda
[ -n "$device" ] && args+=(--device "$device")
args+=(--log "$metrics")
read -r -a extra <<<"${DSTRAIN_ARGS:-}"
args+=("${extra[@]}" "$@")

export OMPI_ALLOW_RUN_AS_ROOT=${OMPI_ALLOW_RUN_AS_ROOT:-1}
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=${OMPI_ALLOW_RUN_AS_ROOT_CONFIRM:-1}
[ "${DSTRAIN_OVERSUBSCRIBE:-1}" = 1 ] && export OMPI_MCA_rmaps_base_oversubscribe=1
# a node that vanishes ends the job (Open MPI's keepalive on its daemons' channel)
. "$repo/jobs/lib/ompi_multinode.sh"
ompi_multinode_env
# BLAS and OpenMP threads per rank: each node's cores divided by the ranks
# on that node, worked out by each rank at its start (jobs/lib/rank_threads.sh)
# unless OPENBLAS_NUM_THREADS is given (libgomp would start a thread per core
# in every rank)
# (it keeps given counts; rank 0 records the job's Open MPI id for the
# cleanup below)
threads=("$repo/jobs/lib/rank_threads.sh")
[ -n "${OPENBLAS_NUM_THREADS:-}" ] && export OMP_NUM_THREADS=${OMP_NUM_THREADS:-$OPENBLAS_NUM_THREADS}
export DSTRAIN_JOB_RECORD=$out/.ompi-jobid
rm -f "$DSTRAIN_JOB_RECORD"

mpiexec=${MPIEXEC:-mpiexec}
launch=("$mpiexec" -np "$ntasks" --bind-to "${DSTRAIN_BIND:-none}")
[ -n "${HOSTFILE:-}" ] && launch+=(--hostfile "$HOSTFILE")
[ -n "$gpn" ] && launch+=(--map-by "ppr:$gpn:node")
# Open MPI passes only what -x names to ranks on other hosts: every DSTRAIN_*
# (DSTRAIN_CPU_ISA, DSTRAIN_BLAS_THREADS, ...), OMP_* and OPENBLAS_* variable
# (4.1 says "mpiexec (OpenRTE) 4.1.4", 5.0 "mpiexec (Open MPI) 5.0.3")
if grep -Eq "Open MPI|OpenRTE|open-mpi.org" <<<"$("$mpiexec" --version 2>&1 || true)"; then
  for v in $(compgen -e | grep -E '^(DSTRAIN_|OMP_|OPENBLAS_)' || true); do launch+=(-x "$v"); done
fi
read -r -a extra <<<"${MPI_ARGS:-}"
launch+=("${extra[@]}")

{
  echo "$ntasks ranks${HOSTFILE:+ on the hosts of $HOSTFILE}, out: $out"
  echo "command: ${launch[*]} ${threads[*]} $bin ${args[*]}"
} | tee "$out/command.txt"

# SIGTERM, SIGINT or SIGUSR1 to this script: every rank finishes its step,
# writes a checkpoint (with --checkpoint-dir) and exits 75, and so does this
# script. mpiexec runs in a session of its own, so that a signal to this
# script's process group (Ctrl-C, kill -- -PGID) does not reach it directly:
# Open MPI 4.1's mpiexec, given SIGTERM or SIGINT, forwards it but ends
# with 1 whatever the ranks did; given SIGUSR1 it forwards it and ends with
# the ranks' 75. The script sends it SIGUSR1; should mpiexec still end with
# another status, the ranks' outcome decides: rank 0's "stopped by ... after
# step N" line in OUT/console.txt (the run's output, both streams) means 75.
console=$out/console.txt
: >"$console"
# the tees ignore the signals (they are in this script's process group): the
# ranks' last lines, after the signal, must still come through
exec {tee_out}> >(trap '' TERM INT USR1; exec tee -a "$console")
tees=($!)
exec {tee_err}> >(trap '' TERM INT USR1; exec tee -a "$console" >&2)
tees+=($!)
sessions=(); command -v setsid >/dev/null && sessions=(setsid)
"${sessions[@]}" "${launch[@]}" "${threads[@]}" "$bin" "${args[@]}" </dev/null 1>&"$tee_out" 2>&"$tee_err" &
pid=$!
# an mpiexec left waiting on a lost node after the ranks ended is ended (ompi_multinode.sh)
ompi_guard "$pid" "$console" {tee_out}>&- {tee_err}>&- &
guard=$!
stopping=
for sig in TERM INT USR1; do
  # shellcheck disable=SC2064  # the signal's name is fixed now
  trap "[ -z \"\$stopping\" ] && echo 'jobs/mpiexec/train.sh: SIG$sig: every rank checkpoints and stops' >&2
        stopping=$sig; kill -USR1 $pid 2>/dev/null" "$sig"
done
while :; do
  rc=0; wait "$pid" || rc=$?
  kill -0 "$pid" 2>/dev/null || break   # a trap interrupted the wait: wait again
done
trap - TERM INT USR1
kill -KILL "$guard" 2>/dev/null || true   # its work ends with mpiexec; never waited on (a
                                          # wait on it was seen to block here)
exec {tee_out}>&- {tee_err}>&-
# the tees end when every writer has closed: mpiexec's children do at once,
# but an agent left to a lost node (ssh, its remote daemon) may hold the
# pipe for many minutes: they get 5 s, then the console is what came
for t in "${tees[@]}"; do
  for ((i = 0; i < 50; i++)); do kill -0 "$t" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$t" 2>/dev/null || true   # they ignore TERM, above
done
# a job that failed may leave, on a node whose daemon was killed, its
# session folder and shared memory: one process per node removes this
# job's (ompi_multinode.sh), bounded
jobid=$(cat "$out/.ompi-jobid" 2>/dev/null || true)
if [ "$rc" -ne 0 ] && [ "$rc" -ne 75 ] && [ -n "$jobid" ]; then
  clean=("$mpiexec" --map-by ppr:1:node)
  [ -n "${HOSTFILE:-}" ] && clean+=(--hostfile "$HOSTFILE")
  timeout -k 5 30 "${clean[@]}" sh -c "$(ompi_leftovers_script "$jobid" "$pid")" </dev/null >/dev/null 2>&1 ||
    echo "jobs/mpiexec/train.sh: the nodes' cleanup after the failed job did not finish (exit $?)" >&2
fi
if [ -n "$stopping" ] && [ "$rc" -ne 75 ] && grep -q '^stopped by .* after step' "$console"; then
  echo "jobs/mpiexec/train.sh: mpiexec ended with $rc, but the ranks stopped after SIG$stopping as asked: exit 75" >&2
  rc=75
fi
exit "$rc"
