#!/usr/bin/env bash
# The figures of docs/measurements.md: bench_loader on one rank, warm and cold, each
# configuration REPS times, one summary line per run.
# usage: run.sh BENCH_LOADER FILE.h5 "THREADS..." [more bench_loader options]
#   THREADS "-" runs without --threads (a loader that has no such option).
# Environment: REPS (default 3), BATCH (default 16), EPOCHS (default 1).
set -euo pipefail
bench=$1 data=$2 threads=$3
shift 3
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
cat "$data" >/dev/null   # warm: the whole file in the page cache first
printf '%-5s %-7s %-3s %9s %9s %9s %6s\n' mode threads rep utt/s read/feat disk/feat load1
for mode in warm cold; do
  for t in $threads; do
    for rep in $(seq "${REPS:-3}"); do
      args=(--data "$data" --batch "${BATCH:-16}" --epochs "${EPOCHS:-1}" "$@")
      [ "$t" = - ] || args+=(--threads "$t")
      [ $mode = cold ] && args+=(--cold)
      out=$(mpiexec -np 1 "$bench" "${args[@]}")
      row=$(grep '^ *total ' <<<"$out")
      load=$(grep -o 'load average [0-9.]*' <<<"$out" | awk '{print $3}')
      awk -v m=$mode -v t="$t" -v r="$rep" -v l="$load" \
        '{printf "%-5s %-7s %-3s %9.1f %9.3f %9.3f %6s\n", m, t, r, $6, $13, $14, l}' <<<"$row"
    done
  done
done
