#!/usr/bin/env bash
# Scaling sweep: the same dstrain benchmark at 1, 2, 4, ... GPUs (doubling up
# to DSTRAIN_SWEEP_MAX), one Slurm job per count running jobs/slurm/train.sbatch
# (or train-mpirun.sbatch), every job's results in one directory, and a final
# job (dependency afterany on all of them) that writes the summary table:
# samples/s per GPU count, per GPU, speedup and efficiency.
#
#   jobs/slurm/sweep.sh              submit; prints the directory and the job ids
#   jobs/slurm/sweep.sh gather DIR   (re)write the summary from DIR's results and
#                                    print the table; the final job runs this, you
#                                    may run it any time
#
# Two kinds (DSTRAIN_SWEEP_KIND):
#   bench  each job runs `dstrain bench` (DSTRAIN_COMMAND=bench in train.sbatch:
#          warm-up steps left out, DSTRAIN_STEPS timed steps, median samples/s)
#          and rank 0 writes DIR/bench-gGGG.json; gather runs bench/scaling-report
#          DIR: DIR/scaling.tsv and scaling.json (GPUs, samples/s, per GPU,
#          speedup = thr_N / thr_1, efficiency = speedup / N), and the PNGs
#          scaling-speedup.png / scaling-efficiency.png when gnuplot is there.
#          The one to benchmark with.
#   train  (the default) each job runs `dstrain train --log DIR/metrics-gGGG.jsonl`;
#          gather writes DIR/summary.tsv and summary.txt from the steps after
#          DSTRAIN_SWEEP_WARMUP (mean step time; efficiency = per-GPU rate
#          against the smallest count). Checks that training runs at every count.
# gather picks the kind from DIR (bench-g*.json present: bench).
#
# DIR holds, per count G (3 digits): bench-gG.json or metrics-gG.jsonl,
# slurm-gG-JOBID.out (its console), job-JOBID.txt (its command); sweep.tsv
# (gpus, nodes, job id of every job submitted), gather-JOBID.out and the summary.
#
# Environment (all optional):
#   DSTRAIN_SWEEP_KIND    bench or train (train)
#   DSTRAIN_SWEEP_MAX     largest count (64); counts are 1, 2, 4, ... <= it
#   DSTRAIN_SWEEP_MIN     smallest count (1)
#   GPUS_PER_NODE         GPUs per node: a count G runs on ceil(G / GPUS_PER_NODE) nodes with
#                         --ntasks-per-node=min(G, GPUS_PER_NODE) --gres=gpu:min(G, GPUS_PER_NODE);
#                         unset: CPU ranks, --ntasks=G only (what the test does)
#   CPUS_PER_TASK         --cpus-per-task of every benchmark job
#   DSTRAIN_SWEEP_DIR     the results directory (./out/sweep-YYYYMMDD-HHMMSS)
#   DSTRAIN_SWEEP_LAUNCHER  srun (train.sbatch, default) or mpirun (train-mpirun.sbatch)
#   DSTRAIN_SWEEP_SERIAL  1: each job waits for the one before (afterany), so no two
#                         benchmarks share nodes or network (0: all queued at once)
#   DSTRAIN_SWEEP_WARMUP  first steps left out of the rates (5; all steps when a run has no more)
#   DSTRAIN_SWEEP_WAIT    1: wait for the final job (sbatch --wait) and exit with its status (0)
#   SBATCH_ARGS           more sbatch options for the benchmark jobs, split on spaces
#                         (e.g. "--exclusive --time=00:30:00"); for every job, the final one
#                         too, use sbatch's SBATCH_PARTITION, SBATCH_ACCOUNT, SBATCH_TIMELIMIT
#   DSTRAIN, DSTRAIN_MODEL, DSTRAIN_DATA, DSTRAIN_BATCH (per GPU), DSTRAIN_STEPS,
#   DSTRAIN_WARMUP (bench), DSTRAIN_PRECISION, DSTRAIN_DEVICE, DSTRAIN_ARGS, MPI_ARGS, ...:
#                         passed to every job, see jobs/slurm/train.sbatch (DSTRAIN_OUT,
#                         DSTRAIN_LOG, DSTRAIN_COMMAND, DSTRAIN_BENCH_OUT and
#                         DSTRAIN_CHECKPOINTS are set here)
#   PYTHON                the python for bench/scaling-report (/usr/bin/python3; stdlib only)
# A real benchmark, e.g.: DSTRAIN_SWEEP_KIND=bench GPUS_PER_NODE=8 DSTRAIN_MODEL=ds2
#   DSTRAIN_PRECISION=fp16 DSTRAIN_BATCH=32 DSTRAIN_STEPS=100 DSTRAIN_MAX_FRAMES=1700
#   DSTRAIN_ARGS="--length-dist librispeech" SBATCH_ARGS=--exclusive jobs/slurm/sweep.sh
set -euo pipefail
die() { echo "sweep.sh: $*" >&2; exit 1; }
# counts from the environment, checked before any is used (env_checks.sh of
# this checkout: the script's own, or DSTRAIN_REPO in the gather job, which
# sbatch runs as a copy in slurmd's spool directory)
lib=$(dirname "${BASH_SOURCE[0]}")/../lib/env_checks.sh
[ -f "$lib" ] || lib=${DSTRAIN_REPO:-}/jobs/lib/env_checks.sh
[ -f "$lib" ] || die "cannot find this checkout (its jobs/lib/env_checks.sh): set DSTRAIN_REPO to it"
. "$lib"
need_counts sweep.sh 1 DSTRAIN_SWEEP_MAX DSTRAIN_SWEEP_MIN GPUS_PER_NODE CPUS_PER_TASK || exit 1
need_counts sweep.sh 0 DSTRAIN_SWEEP_WARMUP || exit 1

# gather_bench DIR: bench/scaling-report over DIR's bench-g*.json, told the
# counts sweep.tsv lists (a count without a file is a "missing" row); exits 1
# when a count is missing or not ok.
gather_bench() {
  local dir=$1 here counts
  here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
  local repo=${DSTRAIN_REPO:-$(cd "$here/../.." && pwd)}
  local report=$repo/bench/scaling-report
  [ -f "$report" ] || die "$report: not found (set DSTRAIN_REPO to the checkout)"
  counts=$(awk -F'\t' 'NR > 1 { printf "%s%s", sep, $1; sep = "," }' "$dir/sweep.tsv" 2>/dev/null || true)
  "${PYTHON:-/usr/bin/python3}" "$report" "$dir" ${counts:+--expect "$counts"}
}

# gather DIR: the summary table from DIR's metrics files; exits 1 when a count
# has no metrics or its job printed no 'done:' line.
gather() {
  local dir=$1 warm=${DSTRAIN_SWEEP_WARMUP:-5} f g nodes out status row
  [ -d "$dir" ] || die "$dir: no such directory"
  if [ "${DSTRAIN_SWEEP_KIND:-}" = bench ] || compgen -G "$dir/bench-g*.json" >/dev/null; then
    gather_bench "$dir"
    return
  fi
  local rows=()
  if [ -f "$dir/sweep.tsv" ]; then
    while read -r g nodes _; do rows+=("$g $nodes"); done < <(grep -v '^gpus' "$dir/sweep.tsv")
  else
    for f in "$dir"/metrics-g*.jsonl; do
      [ -e "$f" ] || continue
      g=${f##*/metrics-g}; g=$((10#${g%.jsonl})); rows+=("$g -")
    done
  fi
  [ ${#rows[@]} -gt 0 ] || die "$dir: no sweep.tsv and no metrics-g*.jsonl"
  {
    printf 'gpus\tnodes\tsteps\tstep_ms\tsamples_per_s\tsamples_per_s_per_gpu\tefficiency\tstatus\n'
    for row in "${rows[@]}"; do
      read -r g nodes <<<"$row"
      f=$(printf '%s/metrics-g%03d.jsonl' "$dir" "$g")
      out=$(find "$dir" -maxdepth 1 -name "$(printf 'slurm-g%03d-*.out' "$g")" | sort | tail -n 1)
      status=ok
      if [ ! -s "$f" ]; then status=missing
      elif [ -n "$out" ] && ! grep -q '^done: ' "$out"; then status=failed; fi
      # steps, mean step_ms and samples/s over the steps after the warm-up
      # ("batch" is the step's utterances over all ranks)
      if [ -s "$f" ]; then
        awk -v warm="$warm" -v g="$g" -v nodes="$nodes" -v status="$status" '
          function num(k,   i) { i = index($0, "\"" k "\":"); return i ? substr($0, i + length(k) + 3) + 0 : -1 }
          num("step") >= 0 {
            n++; s = num("step"); b = num("batch"); t = num("step_ms")
            ab += b; at += t
            if (s > warm) { m++; mb += b; mt += t }
          }
          END {
            if (!m) { m = n; mb = ab; mt = at }
            rate = mt > 0 ? mb / (mt / 1000) : 0
            printf "%d\t%s\t%d\t%.2f\t%.1f\t%.1f\t-\t%s\n", g, nodes, n, m ? mt / m : 0, rate, rate / g, status
          }' "$f"
      else
        printf '%d\t%s\t0\t-\t-\t-\t-\t%s\n' "$g" "$nodes" "$status"
      fi
    done
  } | awk -F'\t' -v OFS='\t' '  # efficiency: per-GPU rate against the smallest count that ran
      NR > 1 && $8 == "ok" && base == "" { base = $6 }
      NR > 1 && $8 == "ok" && base > 0 { $7 = sprintf("%.3f", $6 / base) }
      { print }' >"$dir/summary.tsv"
  awk -F'\t' '{ printf "%6s %6s %6s %10s %14s %14s %10s  %s\n", $1, $2, $3, $4, $5, $6, $7, $8 }' \
    "$dir/summary.tsv" | tee "$dir/summary.txt"
  echo "summary: $dir/summary.tsv, $dir/summary.txt"
  awk -F'\t' 'NR > 1 && $8 != "ok" { bad = 1 } END { exit bad }' "$dir/summary.tsv"
}

if [ "${1:-}" = gather ]; then
  [ $# -eq 2 ] || die "usage: sweep.sh gather DIR"
  gather "$2"
  exit
fi
[ $# -eq 0 ] || die "usage: sweep.sh | sweep.sh gather DIR"

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
self=$here/$(basename "${BASH_SOURCE[0]}")
kind=${DSTRAIN_SWEEP_KIND:-train}
case $kind in train|bench) ;; *) die "DSTRAIN_SWEEP_KIND: train or bench, not '$kind'" ;; esac
case ${DSTRAIN_SWEEP_LAUNCHER:-srun} in
  srun) script=$here/train.sbatch ;;
  mpirun) script=$here/train-mpirun.sbatch ;;
  *) die "DSTRAIN_SWEEP_LAUNCHER: srun or mpirun, not '$DSTRAIN_SWEEP_LAUNCHER'" ;;
esac
max=${DSTRAIN_SWEEP_MAX:-64} min=${DSTRAIN_SWEEP_MIN:-1}
gpn=${GPUS_PER_NODE:-}
{ [ "$max" -ge "$min" ] && [ "$min" -ge 1 ]; } || die "need 1 <= DSTRAIN_SWEEP_MIN ($min) <= DSTRAIN_SWEEP_MAX ($max)"
dir=${DSTRAIN_SWEEP_DIR:-$PWD/out/sweep-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
read -r -a extra <<<"${SBATCH_ARGS:-}"
export DSTRAIN_REPO=${DSTRAIN_REPO:-$(cd "$here/../.." && pwd)} DSTRAIN_OUT=$dir
export DSTRAIN_SWEEP_KIND=$kind DSTRAIN_COMMAND=$kind

printf 'gpus\tnodes\tjob\n' >"$dir/sweep.tsv"
ids=() prev=
for ((g = min; g <= max; g *= 2)); do
  opts=(--parsable --job-name="dstrain-sweep-g$g" --output="$(printf '%s/slurm-g%03d-%%j.out' "$dir" "$g")"
        --ntasks="$g")
  nodes=1
  if [ -n "$gpn" ]; then
    per=$((g < gpn ? g : gpn)) nodes=$(((g + gpn - 1) / gpn))
    opts+=(--nodes="$nodes" --ntasks-per-node="$per" --gres="gpu:$per")
  fi
  [ -n "${CPUS_PER_TASK:-}" ] && opts+=(--cpus-per-task="$CPUS_PER_TASK")
  [ "${DSTRAIN_SWEEP_SERIAL:-0}" = 1 ] && [ -n "$prev" ] && opts+=(--dependency="afterany:$prev")
  # each rank count its own checkpoints: a requeued job resumes its own run
  id=$(DSTRAIN_LOG=$(printf '%s/metrics-g%03d.jsonl' "$dir" "$g") \
       DSTRAIN_BENCH_OUT=$(printf '%s/bench-g%03d.json' "$dir" "$g") \
       DSTRAIN_CHECKPOINTS=$(printf '%s/checkpoints-g%03d' "$dir" "$g") \
       sbatch "${opts[@]}" "${extra[@]}" "$script")
  id=${id%%;*}
  ids+=("$id") prev=$id
  printf '%d\t%d\t%s\n' "$g" "$nodes" "$id" >>"$dir/sweep.tsv"
  echo "sweep.sh: $g GPUs on $nodes node(s): job $id"
done
[ ${#ids[@]} -gt 0 ] || die "no counts between $min and $max"
deps=$(IFS=:; echo "${ids[*]}")
gopts=(--parsable --job-name=dstrain-sweep-gather --ntasks=1 --output="$dir/gather-%j.out"
       --dependency="afterany:$deps")
echo "sweep.sh: results in $dir"
if [ "${DSTRAIN_SWEEP_WAIT:-0}" = 1 ]; then
  echo "sweep.sh: waiting for the summary job"
  rc=0
  sbatch --wait "${gopts[@]}" "$self" gather "$dir" >/dev/null || rc=$?
  cat "$dir"/gather-*.out
  exit "$rc"
fi
id=$(sbatch "${gopts[@]}" "$self" gather "$dir")
if [ "$kind" = bench ]; then
  echo "sweep.sh: summary job ${id%%;*} writes $dir/scaling.tsv when all are done"
else
  echo "sweep.sh: summary job ${id%%;*} writes $dir/summary.tsv when all are done"
fi
echo "sweep.sh: or any time: $self gather $dir"
