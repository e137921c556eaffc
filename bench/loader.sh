#!/usr/bin/env bash
# Data-loader throughput (no model) with 1, 2 and 4 ranks: bench_loader under
# `mpiexec -np N` drains every rank's loader and prints, per run, an
# nccl-tests-style table (a units line, one row per rank, a total row).
# usage: bench/loader.sh [FILE.h5]
#
# Without FILE.h5 the mini corpus is synthesized into a temporary directory
# (data/make-mini-librispeech.sh; needs espeak-ng and sox) and its train split
# prepped with `dstrain prep librispeech ... --quiet`; the directory is
# removed at the end.
#
# The comparison with a GPU is an ASSUMPTION, not a measurement: DeepSpeech2
# (ds2 preset) training on one H100 at GPU_UTT_PER_S utterances/s (default
# 250) of LibriSpeech, mean GPU_UTT_SECONDS (default 12.3) s per utterance.
# The headroom columns divide the loader's rate by that assumed rate, by
# utterances (x_utt) and by seconds of audio (x_audio, the fairer one for a
# corpus of shorter utterances such as the mini corpus).
#
# Environment:
#   RANKS            rank counts to run (default "1 2 4")
#   BATCH            utterances per rank and batch (default 16)
#   EPOCHS           epochs per run (default 5; more epochs, steadier rates)
#   NORM             utterance | global | none (default utterance)
#   SPEC_AUGMENT     1: SpecAugment on, as dstrain train --spec-augment (default 0)
#   DEPTH            batch buffers per loader (default: the loader's, 4)
#   THREADS          reader threads per loader (default: the loader's, 2)
#   COLD             1: evict FILE.h5 from the page cache before each epoch (default 0)
#   GPU_UTT_PER_S    the assumed consumer rate of one GPU, utterances/s (default 250)
#   GPU_UTT_SECONDS  the assumed consumer's mean utterance length, s (default 12.3)
#   BUILD_DIR        the build directory (default: build/ of the repository)
#   BENCH_LOADER     the bench_loader binary (default: $BUILD_DIR/bench/bench_loader)
#   DSTRAIN          the dstrain binary, for prep (default: $BUILD_DIR/dstrain)
#   MPIEXEC          the MPI launcher (default: mpiexec)
#   MPIEXEC_ARGS     more launcher options, split on spaces (e.g. "--bind-to none")
#   MINI_TRAIN, MINI_DEV, MINI_TEST, MINI_JOBS
#                    passed to make-mini-librispeech.sh when no FILE.h5 is given
# Open MPI is let run as root and oversubscribe the cores (4 ranks on a
# 2-core box): OMPI_ALLOW_RUN_AS_ROOT=1, OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1,
# OMPI_MCA_rmaps_base_oversubscribe=1 unless already set. OPENBLAS_NUM_THREADS
# defaults to 1 (nothing here uses BLAS). Timings on a loaded machine are not
# representative: each table prints the load average.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$here/build}
bench=${BENCH_LOADER:-$build/bench/bench_loader}
dstrain=${DSTRAIN:-$build/dstrain}
mpiexec=${MPIEXEC:-mpiexec}
ranks=${RANKS:-1 2 4}
export OMPI_ALLOW_RUN_AS_ROOT=${OMPI_ALLOW_RUN_AS_ROOT:-1}
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=${OMPI_ALLOW_RUN_AS_ROOT_CONFIRM:-1}
export OMPI_MCA_rmaps_base_oversubscribe=${OMPI_MCA_rmaps_base_oversubscribe:-1}
export OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1}

die() { echo "bench/loader.sh: $*" >&2; exit 1; }
[ $# -le 1 ] || die "usage: bench/loader.sh [FILE.h5]"
[ -x "$bench" ] || die "$bench: no bench_loader (build it: make bench_loader, or set BENCH_LOADER)"

data=${1:-}
if [ -z "$data" ]; then
  [ -x "$dstrain" ] || die "$dstrain: no dstrain to prep the mini corpus (set DSTRAIN)"
  tmp=$(mktemp -d "${TMPDIR:-/tmp}/bench-loader.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  echo "# making the mini corpus in $tmp" >&2
  bash "$here/data/make-mini-librispeech.sh" "$tmp/corpus" >"$tmp/make.log" 2>&1 ||
    { cat "$tmp/make.log" >&2; die "make-mini-librispeech.sh failed"; }
  "$dstrain" prep librispeech "$tmp/corpus/train" --out "$tmp/train.h5" --quiet >"$tmp/prep.log" 2>&1 ||
    { cat "$tmp/prep.log" >&2; die "dstrain prep failed"; }
  data=$tmp/train.h5
fi
[ -r "$data" ] || die "$data: not readable"

args=(--data "$data" --batch "${BATCH:-16}" --epochs "${EPOCHS:-5}" --norm "${NORM:-utterance}"
      --gpu-utt-per-s "${GPU_UTT_PER_S:-250}" --gpu-utt-seconds "${GPU_UTT_SECONDS:-12.3}")
[ -n "${DEPTH:-}" ] && args+=(--depth "$DEPTH")
[ -n "${THREADS:-}" ] && args+=(--threads "$THREADS")
[ "${COLD:-0}" = 1 ] && args+=(--cold)
[ "${SPEC_AUGMENT:-0}" = 1 ] && args+=(--spec-augment)
first=1
for n in $ranks; do
  [ $first = 1 ] || echo
  first=0
  echo "## $mpiexec -np $n ${MPIEXEC_ARGS:+$MPIEXEC_ARGS }bench_loader ${args[*]}"
  # shellcheck disable=SC2086  # MPIEXEC_ARGS is split on purpose
  "$mpiexec" -np "$n" ${MPIEXEC_ARGS:-} "$bench" "${args[@]}" || die "bench_loader with $n ranks failed"
done
