#!/usr/bin/env bash
# demo.sh - the main job on the built-in default: dstrain learns to hear.
#
# Sets up what is missing (Debian packages, the build), synthesises the mini
# corpus (espeak-ng voices reading sentences of the licence texts), prepares
# it as 40-bin log-mel features, trains the mini preset data-parallel with
# mpiexec -np 2 on the CPU (one rank per GPU on a machine with GPUs),
# validates WER and CER on dev after every epoch (voices and sentences never
# heard in training), keeps checkpoints, draws the loss and CER, and ends by
# transcribing held-out test utterances next to their reference text.
# Running it again resumes the training where it stopped; a finished run
# only makes its report again. About 5 minutes on 2 cores (README).
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
prog=scripts/demo.sh

usage() {
  cat <<EOF
usage: $prog [options] [-- DSTRAIN_TRAIN_OPTIONS...]

Sets up, then trains the mini preset on the synthesized mini corpus and
transcribes voices it never heard. Everything goes under --out:
  corpus/                  the synthesized corpus (LibriSpeech layout)
  features/{train,dev,test}.h5   40-bin log-mel features (dstrain prep)
  checkpoints/step-*.h5    the newest 2 checkpoints (one per epoch)
  train.jsonl              metrics: one line per step, one per validation
  training.png             loss and dev CER/WER
  transcripts.txt          held-out test utterances: reference and transcription
  summary.txt              times, dev and test WER/CER

options:
  --out DIR          output directory (default: out/main in this checkout)
  --epochs N         passes over the training set (default 6)
  --train-utts N     training utterances to synthesize (default 3000)
  --ranks N          MPI ranks (default 2; with GPUs: one per GPU)
  --cpu              train on the CPU even where there are GPUs
  --fresh            start the training over (deletes DIR's checkpoints, log and plot;
                     the corpus and the features are kept)
  --no-setup         do not install packages or build: use build/dstrain as it is
                     (or the binary \$DSTRAIN names)
  --help             this text
Options after -- go to dstrain train (dstrain train --help).

Re-running with the same options resumes; changing --epochs lengthens or
shortens the run, other changes need --fresh (dstrain says what differs).
EOF
}

die() { echo "$prog: error: $*" >&2; exit 1; }
out=$repo/out/main epochs=6 train_utts=3000 ranks= fresh=0 setup=1 cpu=0
extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --out) [ $# -ge 2 ] || die "--out needs a directory"; out=$2; shift 2 ;;
    --epochs) [ $# -ge 2 ] || die "--epochs needs a number"; epochs=$2; shift 2 ;;
    --train-utts) [ $# -ge 2 ] || die "--train-utts needs a number"; train_utts=$2; shift 2 ;;
    --ranks) [ $# -ge 2 ] || die "--ranks needs a number"; ranks=$2; shift 2 ;;
    --fresh) fresh=1; shift ;;
    --cpu) cpu=1; shift ;;
    --no-setup) setup=0; shift ;;
    -h|--help) usage; exit 0 ;;
    --) shift; extra=("$@"); break ;;
    *) echo "$prog: unknown option '$1'" >&2; usage >&2; exit 2 ;;
  esac
done
for v in epochs train_utts; do
  [[ ${!v} =~ ^[1-9][0-9]*$ ]] || die "--${v//_/-} must be a positive integer, got '${!v}'"
done
[ -z "$ranks" ] || [[ $ranks =~ ^[1-9][0-9]*$ ]] || die "--ranks must be a positive integer, got '$ranks'"
mkdir -p "$out"
out=$(cd "$out" && pwd)
start=$SECONDS
phase_start=$SECONDS
phases=()
phase_done() { phases+=("$(printf '%-10s %4d s' "$1" $((SECONDS - phase_start)))"); phase_start=$SECONDS; }
say() { printf '\n== %s\n' "$*"; }

# ---- set up ---------------------------------------------------------------------
if [ "$setup" = 1 ]; then
  say "setting up (packages, build)"
  "$repo/scripts/install-deps.sh"
  "$repo/scripts/build.sh" >"$out/build.log" 2>&1 || { tail -30 "$out/build.log"; die "build failed (whole log: $out/build.log)"; }
  echo "built $repo/build/dstrain (log: $out/build.log)"
fi
bin=${DSTRAIN:-$repo/build/dstrain}   # DSTRAIN: another build of dstrain (the tests use theirs)
[ -x "$bin" ] || die "no $bin: run without --no-setup, or scripts/build.sh"
phase_done setup
setup_s=$(( SECONDS - start ))

# ---- the corpus -------------------------------------------------------------------
corpus=$out/corpus
made=$corpus/.made-train$train_utts-dev100-test60
if [ ! -f "$made" ]; then
  say "synthesizing the mini corpus ($train_utts training utterances) in $corpus"
  rm -f "$corpus"/.made-*
  MINI_TRAIN=$train_utts MINI_DEV=100 MINI_TEST=60 "$repo/data/make-mini-librispeech.sh" "$corpus"
  touch "$made"
else
  say "the mini corpus is there ($corpus)"
fi
phase_done corpus

# ---- features ---------------------------------------------------------------------
feat=$out/features
mkdir -p "$feat"
for split in train dev test; do
  if [ ! -f "$feat/$split.h5" ] || [ "$feat/$split.h5" -ot "$made" ]; then
    say "preparing $split: 40-bin log-mel features"
    "$bin" prep librispeech "$corpus/$split" --out "$feat/$split.h5" --features log-mel --n-mels 40 --quiet
  fi
done
phase_done features

# ---- training -----------------------------------------------------------------------
ckpt=$out/checkpoints log=$out/train.jsonl
if [ "$fresh" = 1 ]; then
  rm -rf "$ckpt" "$log" "$out/training.png" "$out/command.txt"
fi
gpus=0
# GPUs: not --cpu, nvidia-smi lists some and this dstrain has the cuda backend built in
if [ "$cpu" = 0 ] && command -v nvidia-smi >/dev/null 2>&1 && "$bin" --version 2>/dev/null | grep -q '^backends:.*, cuda ('; then
  gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
fi
launch_env=(NTASKS="${ranks:-2}")
if [ "$gpus" -gt 0 ]; then
  launch_env=(GPUS_PER_NODE="${ranks:-$gpus}" DSTRAIN_DEVICE=cuda)
  where="${ranks:-$gpus} GPU rank(s)"
else
  where="${ranks:-2} CPU ranks"
fi
progress=lines
[ -t 1 ] && progress=bar
say "training the mini preset on $where: $epochs epochs, dev WER/CER after each (interrupted, run again to go on from the last checkpoint)"
train_args=(--optimizer adamw --lr 1e-3 --seed 1 --checkpoint-dir "$ckpt" --keep 2 --resume auto
            --progress "$progress" --print-every "$([ "$progress" = bar ] && echo 0 || echo 50)"
            "${extra[@]}")
set +e
env "${launch_env[@]}" DSTRAIN="$bin" DSTRAIN_MODEL=mini DSTRAIN_DATA="$feat/train.h5" \
  DSTRAIN_VAL="$feat/dev.h5" DSTRAIN_BATCH=8 DSTRAIN_EPOCHS="$epochs" DSTRAIN_OUT="$out" \
  DSTRAIN_LOG="$log" "$repo/jobs/mpiexec/train.sh" "${train_args[@]}"
rc=$?
set -e
[ "$rc" -eq 75 ] && { echo "$prog: stopped by a signal; the checkpoint is in $ckpt: run $prog again to go on"; exit 75; }
[ "$rc" -eq 0 ] || die "training failed (exit $rc); run $prog again to resume from the last checkpoint"
phase_done training

# ---- report -------------------------------------------------------------------------
ckpts=("$ckpt"/step-*.h5)   # step-NNNNNNNN.h5: the glob's order is the steps'
last=${ckpts[-1]}
[ -f "$last" ] || die "no checkpoint in $ckpt"
say "plot"
"$repo/scripts/plot-training.sh" "$log" "$out/training.png" ||
  echo "$prog: warning: no plot (see above); the scores and transcripts follow"

say "scores of $(basename "$last")"
dev_line=$("$bin" eval --checkpoint "$last" --data "$feat/dev.h5" | grep -E '^WER') ||
  die "scoring dev with $last failed (see above)"
test_line=$("$bin" eval --checkpoint "$last" --data "$feat/test.h5" | grep -E '^WER') ||
  die "scoring test with $last failed (see above)"
echo "dev  (voices and sentences not in training): $dev_line"
echo "test (voices and sentences not in training): $test_line"

say "transcribing held-out test utterances (voices never heard in training)"
# two utterances of each test speaker, with their reference text
picks=()
for spk in "$corpus"/test/*/; do
  mapfile -t two < <(find "$spk" -name '*.flac' | sort | head -2)
  picks+=("${two[@]}")
done
{
  "$bin" transcribe --checkpoint "$last" "${picks[@]}" | while IFS=$'\t' read -r audio text; do
    id=$(basename "$audio" .flac)
    spk=${id%%-*}
    ref=$(grep -h "^$id " "$(dirname "$audio")"/*.trans.txt | cut -d' ' -f2-)
    voice=$(awk -F'|' -v s="$spk" '$1 + 0 == s + 0 { gsub(/ /, "", $5); print $5 }' "$corpus/SPEAKERS.TXT")
    printf '%s (voice %s)\n  reference:  %s\n  dstrain:    %s\n\n' "$id" "$voice" "$ref" "$text"
  done
} | tee "$out/transcripts.txt" || die "transcribing the test utterances failed (see above)"
phase_done report

total_s=$(( SECONDS - start ))
{
  echo "dstrain main job: mini preset, $epochs epochs, $where, $train_utts training utterances"
  echo "checkpoint: $last"
  echo "dev:  $dev_line"
  echo "test: $test_line"
  echo "time per phase:"
  printf '  %s\n' "${phases[@]}"
  echo "  total      $(printf '%4d s' "$total_s") ($(( total_s - setup_s )) s after setup)"
} | tee "$out/summary.txt"
echo "plot: $out/training.png   transcripts: $out/transcripts.txt   summary: $out/summary.txt"
