#!/usr/bin/env bash
# The main job (scripts/demo.sh) on a shortened schedule: a smaller corpus,
# 1 epoch, then again with 4 (it must resume, not start over), then once
# more (finished: only the report again). Checks that it synthesizes,
# prepares, trains on 2 ranks, validates each epoch, keeps checkpoints,
# plots, scores, transcribes held-out voices next to their references, and
# that it learned: dev CER after 4 epochs well below an untrained model's.
# usage: test_demo.sh REPO DSTRAIN WORKDIR   (env: DEMO_TRAIN_UTTS, default 1000)
set -uo pipefail
repo=$1 bin=$2 work=$3
utts=${DEMO_TRAIN_UTTS:-1000}
source "$repo/tests/lib/checks.sh"   # ok, bad; Open MPI as root
check() { if eval "$1"; then ok; else bad "$2"; fi; }
rm -rf "$work"
mkdir -p "$work"
out=$work/main
run() {   # the job as a user runs it; its output in $work/run-N.log
  local n=$1; shift
  DSTRAIN=$bin timeout 900 bash "$repo/scripts/demo.sh" --no-setup --cpu --out "$out" --train-utts "$utts" "$@" \
    >"$work/run-$n.log" 2>&1
}
val_lines() { grep -c '"eval":"val"' "$out/train.jsonl"; }
cer_of() { grep '"eval":"val"' | sed -nE 's/.*"cer":([0-9.]+).*/\1/p' | tail -1; }   # the last validation's

# ---- 1: from nothing, one epoch
run 1 --epochs 1; rc=$?
check "[ $rc -eq 0 ]" "first run exits 0 (got $rc; end of its log: $(tail -5 "$work/run-1.log" | tr '\n' '|'))"
check "grep -q 'synthesizing the mini corpus' '$work/run-1.log'" "first run synthesizes the corpus"
for split in train dev test; do
  check "[ -s '$out/features/$split.h5' ]" "features/$split.h5 written"
done
check "grep -q '^2 ranks' '$work/run-1.log'" "trains on 2 ranks"
check "[ \$(val_lines) -eq 1 ]" "one validation line after epoch 1"
ckpts=("$out"/checkpoints/step-*.h5)
check "[ -f '${ckpts[0]}' ]" "a checkpoint in checkpoints/"
check "[ \"\$(head -c 8 '$out/training.png' | od -An -tx1 | tr -d ' \n')\" = 89504e470d0a1a0a ]" \
  "training.png is a PNG"
check "grep -qE '^dev: +WER [0-9.]+ +CER [0-9.]+' '$out/summary.txt'" "summary has dev WER and CER"
check "grep -qE '^test: WER [0-9.]+ +CER [0-9.]+' '$out/summary.txt'" "summary has test WER and CER"
check "[ \$(grep -c '^  reference: ' '$out/transcripts.txt') -eq 6 ]" "6 held-out references"
check "[ \$(grep -c '^  dstrain: ' '$out/transcripts.txt') -eq 6 ]" "6 transcriptions"
# the references are the corpus's own text for those ids
id=$(head -1 "$out/transcripts.txt" | cut -d' ' -f1)
ref=$(sed -n 2p "$out/transcripts.txt" | sed -E 's/^  reference: +//')
if grep -Fqx -- "$id $ref" "$out"/corpus/test/*/*/*.trans.txt; then ok; else bad "reference of $id is its transcript"; fi
steps1=$(sed -nE 's/^\{"step":([0-9]+),.*/\1/p' "$out/train.jsonl" | tail -1)

# ---- 2: three epochs more: resumes from the checkpoint, corpus and features kept
run 2 --epochs 4; rc=$?
check "[ $rc -eq 0 ]" "second run exits 0 (got $rc)"
check "grep -q 'the mini corpus is there' '$work/run-2.log'" "second run keeps the corpus"
check "! grep -q 'preparing' '$work/run-2.log'" "second run keeps the features"
check "grep -q 'resumed from .*step-0*$steps1.h5' '$work/run-2.log'" "second run resumes from step $steps1"
first2=$(sed -nE 's/^\{"step":([0-9]+),.*/\1/p' "$out/train.jsonl" | sed -n "$((steps1 + 1))p")
check "[ '$first2' = $((steps1 + 1)) ]" "the log goes on at step $((steps1 + 1)) (got $first2)"
check "[ \$(val_lines) -eq 4 ]" "four validation lines after epoch 4"

# ---- 3: finished: nothing to train, the report again
run 3 --epochs 4; rc=$?
check "[ $rc -eq 0 ]" "third run exits 0 (got $rc)"
check "grep -q 'nothing to train' '$work/run-3.log'" "third run says the run is complete"
check "[ \$(val_lines) -eq 4 ]" "third run adds no validation"
check "[ \$(grep -c '^  dstrain: ' '$out/transcripts.txt') -eq 6 ]" "third run transcribes again"

# ---- learning: dev CER after 4 epochs against the model before any step
cer=$(cer_of <"$out/train.jsonl")
"$bin" train --model mini --train "$out/features/train.h5" --steps 1 --lr 0 --batch 2 --print-every 0 \
  --checkpoint-dir "$work/untrained" >/dev/null 2>&1
untrained=$("$bin" eval --checkpoint "$work/untrained/step-00000001.h5" --data "$out/features/dev.h5" |
            sed -nE 's/^WER [0-9.]+ +CER ([0-9.]+).*/\1/p')
echo "dev CER: untrained $untrained, after 4 epochs of $utts utterances $cer"
check "awk -v a='$cer' -v b='$untrained' 'BEGIN { exit !(a != \"\" && b != \"\" && a < 0.7 * b) }'" \
  "dev CER $cer is not well below untrained $untrained"

# ---- too few utterances for one step of every rank: refused, not an empty run
out2=$(mpiexec -np 2 "$bin" train --model mini --train "$out/features/dev.h5" --batch 100 --steps 2 2>&1)
rc=$?
check "[ $rc -ne 0 ] && grep -q 'too few for one step of 2 ranks x batch 100' <<<\"\$out2\"" \
  "100 utterances for 2 ranks x 100 are refused (exit $rc: $(tail -2 <<<"$out2" | tr '\n' '|'))"

# ---- a periodic checkpoint that falls on an epoch's last step goes on in the
# next epoch: the resume does not validate that epoch again
pe=(train --model mini --train "$out/features/dev.h5" --val "$out/features/dev.h5" --batch 10
    --print-every 0 --checkpoint-dir "$work/pe" --checkpoint-every 5 --log "$work/pe.jsonl" --resume auto)
"$bin" "${pe[@]}" --epochs 1 >"$work/pe-1.log" 2>&1 && "$bin" "${pe[@]}" --epochs 2 >"$work/pe-2.log" 2>&1
rc=$?
check "[ $rc -eq 0 ] && grep -q 'resumed from .*step-00000010.h5: step 10, epoch 1, global batch 0' '$work/pe-2.log'" \
  "resume after an epoch ending on a periodic checkpoint starts the next epoch (exit $rc)"
check "[ \$(grep -c '\"eval\":\"val\"' '$work/pe.jsonl') -eq 2 ]" "one validation per epoch across the resume"
# ... and a stop (SIGUSR1) on an epoch's last step, saved before that epoch's
# validation, resumes into it: its validation is not lost, nor repeated
ps=("${pe[@]/#$work\/pe/$work/ps}")
DSTRAIN_FAULT=stop:0:10 "$bin" "${ps[@]}" --epochs 2 >"$work/ps-1.log" 2>&1; rc1=$?
"$bin" "${ps[@]}" --epochs 2 >"$work/ps-2.log" 2>&1; rc2=$?
ep0=$(grep -c '"eval":"val","epoch":0,' "$work/ps.jsonl")
vals=$(grep -c '"eval":"val"' "$work/ps.jsonl")
check "[ $rc1 -eq 75 ] && [ $rc2 -eq 0 ] && grep -q 'stopped by .* after step 10' '$work/ps-1.log' &&
       [ $ep0 -eq 1 ] && [ $vals -eq 2 ]" \
  "a stop on an epoch's last step validates that epoch once, on resume (exits $rc1 $rc2; epoch 0: $ep0, all: $vals)"

# ---- the progress bar, asked for: redrawn in place (carriage returns) with
# the time left worked out, and the final bar ("done in") left on its line
"$bin" train --model mini --train "$out/features/dev.h5" --steps 12 --batch 4 --progress bar --print-every 0 \
  >"$work/bar.log" 2>&1
kept=$(grep -c $'step 12/12 .*done in [0-9:]*\e\\[K$' "$work/bar.log")   # ends its line, not erased
check "grep -q \$'\\r' '$work/bar.log' && grep -Eq 'ETA [0-9]+:[0-9]{2}' '$work/bar.log' && [ $kept -eq 1 ]" \
  "--progress bar draws a bar with the step and the time left, and keeps the last"
"$bin" train --model mini --train "$out/features/dev.h5" --steps 2 --batch 4 --progress lines --print-every 1 \
  >"$work/lines.log" 2>&1
check "grep -q '^step  *2/2' '$work/lines.log' && ! grep -q \$'\\r' '$work/lines.log'" \
  "--progress lines writes its step lines, plain"
echo "test_demo: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
