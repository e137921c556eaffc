#!/usr/bin/env bash
# End to end on the synthesized mini corpus: make it, prep train and dev,
# score an untrained small model on dev, train small for a few minutes, and
# require dev CER well below the untrained one; then eval and transcribe
# from the checkpoint.
# usage: test_e2e_mini.sh DSTRAIN MAKE_MINI WORKDIR   (env: E2E_EPOCHS, default 8)
set -euo pipefail
bin=$1 make_mini=$2 work=$3
epochs=${E2E_EPOCHS:-8}
mkdir -p "$work"
corpus=$work/corpus
[ -f "$corpus/.complete" ] || { bash "$make_mini" "$corpus" >/dev/null && touch "$corpus/.complete"; }
for split in train dev; do
  "$bin" prep librispeech "$corpus/$split" --out "$work/$split.h5" --quiet >"$work/prep-$split.log"
done
grep -q "prep: wrote" "$work/prep-train.log"

common=(--model small --train "$work/train.h5" --val "$work/dev.h5" --batch 8 --seed 7
        --optimizer adamw --lr 1e-3 --print-every 0)
# untrained: one step at learning rate 0 leaves the weights as initialised
"$bin" train "${common[@]}" --steps 1 --lr 0 --checkpoint-dir "$work/untrained" >/dev/null
before=$("$bin" eval --checkpoint "$work/untrained/step-00000001.h5" --data "$work/dev.h5" |
         sed -nE 's/^WER ([0-9.]+) +CER ([0-9.]+).*/\2/p')
start=$(date +%s)
"$bin" train "${common[@]}" --epochs "$epochs" --checkpoint-dir "$work/ckpt" --log "$work/train.jsonl" \
  | tee "$work/train.log" | grep -E "^epoch|^validation"
seconds=$(( $(date +%s) - start ))
# globs, not `ls | head`: under pipefail a reader that stops early can kill
# the writer with SIGPIPE and end the script without a word
ckpts=("$work/ckpt"/step-*.h5)
ckpt=${ckpts[-1]}
after=$("$bin" eval --checkpoint "$ckpt" --data "$work/dev.h5" | sed -nE 's/^WER ([0-9.]+) +CER ([0-9.]+).*/\2/p')
echo "dev CER untrained $before -> trained $after ($epochs epochs, ${seconds}s)"
pass=0 fail=0
check() { if eval "$1"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: $2" >&2; fi; }
check "awk -v a=$after -v b=$before 'BEGIN { exit !(a < 0.75 * b) }'" "dev CER $after is not well below untrained $before"
check "[ \$(grep -c '\"eval\":\"val\"' '$work/train.jsonl') -eq $epochs ]" "one validation line per epoch in the log"
dev_audio=("$corpus"/dev/*/*/*.flac)
audio=${dev_audio[0]}
out=$("$bin" transcribe --checkpoint "$ckpt" "$audio")
check "[ \"\${out%%	*}\" = '$audio' ]" "transcribe prints the file name then the text: $out"
echo "test_e2e_mini: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
