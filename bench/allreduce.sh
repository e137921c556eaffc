#!/usr/bin/env bash
# Gradient-reduction bandwidth with 2 and 4 ranks: bench_allreduce under
# `mpiexec -np N` sums a buffer of each size across the ranks with dstrain's
# bucketed reducer (mpi/reduce.c: a communication thread, one MPI_Allreduce
# per bucket) and, for comparison, with one plain MPI_Allreduce, and prints
# per run an nccl-tests-style table: size, count, type, buckets, time (us,
# mean per iteration, slowest rank), algbw and busbw (GB/s), #wrong (elements
# that differ from the exactly known sum; must be 0), then the average bus
# bandwidth. See the header of bench/allreduce.c for the columns.
# usage: bench/allreduce.sh [bench_allreduce options...]
#   (the options go to every run after the ones below, so they override them;
#   OPS=reducer bench/allreduce.sh --transport nccl measures the NCCL
#   transport instead, one GPU per rank)
#
# Environment:
#   RANKS            rank counts to run (default "2 4")
#   OPS              reducer and/or mpi (default "reducer mpi")
#   TYPES            float and/or double (default "float")
#   MIN_BYTES        smallest size, -b; K, M, G suffixes (default 8)
#   MAX_BYTES        largest size, -e (default 64M: this box has 2 cores and
#                    4 ranks keep 4 copies)
#   FACTOR           size multiplication factor, -f (default 2)
#   ITERS            timed iterations per size, -n (default 20)
#   WARMUP           warm-up iterations per size, -w (default 5)
#   BUCKET_MB        reducer bucket, MiB, --bucket-mb (default 25, as training)
#   BUILD_DIR        the build directory (default: build/ of the repository)
#   BENCH_ALLREDUCE  the bench_allreduce binary (default: $BUILD_DIR/bench/bench_allreduce)
#   MPIEXEC          the MPI launcher (default: mpiexec)
#   MPIEXEC_ARGS     more launcher options, split on spaces (e.g. "--bind-to none")
# Open MPI is let run as root and oversubscribe the cores (4 ranks on a
# 2-core box): OMPI_ALLOW_RUN_AS_ROOT=1, OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1,
# OMPI_MCA_rmaps_base_oversubscribe=1 unless already set. OPENBLAS_NUM_THREADS
# defaults to 1 (nothing here uses BLAS). Oversubscribed ranks share cores, so
# 4-rank times on a 2-core box measure the scheduler as much as the reduction;
# each table prints the load average. Exit status: 1 when any run fails or
# reports a #wrong other than 0.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$here/build}
bench=${BENCH_ALLREDUCE:-$build/bench/bench_allreduce}
mpiexec=${MPIEXEC:-mpiexec}
ranks=${RANKS:-2 4}
ops=${OPS:-reducer mpi}
types=${TYPES:-float}
export OMPI_ALLOW_RUN_AS_ROOT=${OMPI_ALLOW_RUN_AS_ROOT:-1}
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=${OMPI_ALLOW_RUN_AS_ROOT_CONFIRM:-1}
export OMPI_MCA_rmaps_base_oversubscribe=${OMPI_MCA_rmaps_base_oversubscribe:-1}
export OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1}

die() { echo "bench/allreduce.sh: $*" >&2; exit 1; }
[ -x "$bench" ] || die "$bench: no bench_allreduce (build it: make bench_allreduce, or set BENCH_ALLREDUCE)"

args=(-b "${MIN_BYTES:-8}" -e "${MAX_BYTES:-64M}" -f "${FACTOR:-2}" -n "${ITERS:-20}"
      -w "${WARMUP:-5}" --bucket-mb "${BUCKET_MB:-25}")
first=1
for n in $ranks; do
  for t in $types; do
    for op in $ops; do
      [ $first = 1 ] || echo
      first=0
      run=(--op "$op" -d "$t" "${args[@]}" "$@")
      echo "## $mpiexec -np $n ${MPIEXEC_ARGS:+$MPIEXEC_ARGS }bench_allreduce ${run[*]}"
      # shellcheck disable=SC2086  # MPIEXEC_ARGS is split on purpose
      "$mpiexec" -np "$n" ${MPIEXEC_ARGS:-} "$bench" "${run[@]}" ||
        die "bench_allreduce with $n ranks, --op $op, -d $t failed (or a #wrong is not 0)"
    done
  done
done
