#!/usr/bin/env bash
# The other model families learn on the mini corpus: jasper-small,
# w2l-small and DS1's graph each train on the synthesized corpus's training
# features (the ones demo_job made: 40-bin log-mel) and must end with a dev
# loss under half an untrained model's and a dev CER below its CER.
# Why not "CER under 0.7 of it", as demo_job asks of the mini preset: after
# 8 epochs w2l-small is still leaving the blank plateau, and its CER moves
# with the dropout masks and the seed far more than its loss. Measured on
# the mini corpus (CER / untrained CER, dev loss / untrained dev loss,
# against seed 1's untrained model; seeds 1, 2, 3): before conv dropout was
# numbered in runs 0.55, 0.48, 0.34 and 0.21, 0.18, 0.14; after 0.90, 0.63,
# 0.36 and 0.33, 0.22, 0.16. Jasper-small (0.19, 0.08) and DS1's graph
# (0.38, 0.08) are far inside either rule. DS1's graph takes those 40
# log-mel bins here (ds1-small with n_features 40): on v0.2.0's 26 MFCC it
# stays on the all-blank plateau for about 12 epochs (dev CER 0.87 after
# 20), too long for CI (docs/models.md).
# usage: test_families_learn.sh DSTRAIN WORKDIR FEATURES_DIR
set -uo pipefail
bin=$(realpath "$1") work=$2 feat=$3
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib/checks.sh"
for split in train dev; do
  [ -s "$feat/$split.h5" ] || { echo "no $feat/$split.h5: demo_job makes it (ctest fixture demo_corpus)"; exit 1; }
done
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
sed 's/"n_features": 26/"n_features": 40/; s/"name": "ds1-small"/"name": "ds1-small-40"/' \
  "$here/../../configs/ds1-small.json" >ds1-small-40.json

cer_of() {   # cer_of CHECKPOINT: dev CER and dev loss
  "$bin" eval --checkpoint "$1" --data "$feat/dev.h5" |
    sed -nE 's/^WER [0-9.]+ +CER ([0-9.]+) +loss ([0-9.]+).*/\1 \2/p'
}

# model epochs: the same schedule for each (AdamW 3e-3, batch 8)
for run in jasper-small:8 w2l-small:8 ds1-small-40:10; do
  name=${run%%:*} epochs=${run#*:}
  model=(--model "$name")
  [ -f "$name.json" ] && model=(--config "$name.json")
  "$bin" train "${model[@]}" --train "$feat/train.h5" --steps 1 --lr 0 --batch 2 --print-every 0 \
    --checkpoint-dir "untrained-$name" >/dev/null 2>&1 || bad "$name: untrained checkpoint"
  start=$(date +%s)
  "$bin" train "${model[@]}" --train "$feat/train.h5" --epochs "$epochs" --batch 8 \
    --optimizer adamw --lr 3e-3 --print-every 0 --checkpoint-dir "ck-$name" --keep 1 \
    >"$name.out" 2>&1 || bad "$name: training failed: $(tail -3 "$name.out")"
  secs=$(( $(date +%s) - start ))
  ckpts=("ck-$name"/step-*.h5)
  read -r u_cer u_loss <<<"$(cer_of "untrained-$name/step-00000001.h5")"
  read -r cer loss <<<"$(cer_of "${ckpts[-1]}")"
  echo "$name: dev CER, loss untrained ${u_cer:-?} ${u_loss:-?}; after $epochs epochs ($secs s) ${cer:-?} ${loss:-?}"
  if awk -v c="${cer:-}" -v l="${loss:-}" -v uc="${u_cer:-}" -v ul="${u_loss:-}" \
       'BEGIN { exit !(c != "" && l != "" && uc != "" && ul != "" && l < 0.5 * ul && c < uc) }'; then ok
  else bad "$name: dev loss ${loss:-?} not under half the untrained ${u_loss:-?}, or CER ${cer:-?} not below ${u_cer:-?}"; fi
done

echo "test_families_learn: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
