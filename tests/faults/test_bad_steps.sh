#!/usr/bin/env bash
# Non-finite gradients in fp32: an Inf injected into one rank's gradients
# (DSTRAIN_FAULT=inf:RANK:FIRST-LAST), or a NaN into its logits so that its
# loss is NaN (nan:RANK:FIRST-LAST), makes every rank skip those steps,
# counted in the log, the parameters untouched; after --max-bad-steps
# consecutive ones the run stops with a message naming the steps, and the
# checkpoints keep the parameters from before them. One rank, then two with
# the Inf on rank 1 only.
# usage: test_bad_steps.sh DSTRAIN PYTHON
set -uo pipefail
bin=$(readlink -f "$1") py=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
. "$(dirname "$0")/../lib/checks.sh"

case_() {   # NAME NP FAULT
  local name=$1 np=$2 fault=$3 dir="$work/$1"
  mkdir -p "$dir"
  local launch=(); [ "$np" -gt 1 ] && launch=(mpiexec -np "$np")
  DSTRAIN_FAULT=$fault timeout 120 "${launch[@]}" "$bin" train --model tiny --synthetic --steps 30 \
    --batch 2 --max-frames 120 --print-every 1 --log "$dir/log.jsonl" --checkpoint-dir "$dir/ck" \
    --checkpoint-every 2 --max-bad-steps 5 --timeout 30 >"$dir/out" 2>&1
  local rc=$?
  echo "$name: status $rc; $(grep -o 'steps [0-9]* to [0-9]* all had.*(--max-bad-steps 5)' "$dir/out" | head -1)"
  if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && grep -q "steps 3 to 7 all had a non-finite" "$dir/out"; then ok
  else bad "$name: status $rc: $(grep -v '^ *$' "$dir/out" | tail -3)"; fi
  # the log counts the skips, and every skipped step says so
  if [ "$(grep -c '"skipped":true' "$dir/log.jsonl")" -eq 5 ] && \
     grep '^{"step":' "$dir/log.jsonl" | tail -1 | grep -q '"skipped_steps":5'; then ok
  else bad "$name: the log does not show 5 skipped steps: $(grep '^{"step":' "$dir/log.jsonl" | tail -1)"; fi
  # skipped steps leave the parameters as they were: step 6's checkpoint equals step 2's
  if "$py" - "$dir/ck/step-00000002.h5" "$dir/ck/step-00000006.h5" <<'PY'
import sys, h5py, numpy as np
a, b = h5py.File(sys.argv[1], "r"), h5py.File(sys.argv[2], "r")
names = []
a["params"].visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Dataset) else None)
same = all(np.array_equal(a["params"][n][()], b["params"][n][()]) for n in names)
sys.exit(0 if names and same else 1)
PY
  then ok; else bad "$name: parameters changed during the skipped steps"; fi
}
case_ one-rank 1 inf:0:3-1000
case_ two-ranks 2 inf:1:3-1000
# a NaN logit before the loss: the loss is NaN (the log says null), not an
# impossible utterance left out of the mean, and the step is skipped as above
for np in 1 2; do
  case_ nan-loss-$np-ranks "$np" nan:$((np - 1)):3-1000
  d="$work/nan-loss-$np-ranks"
  if [ "$(grep -c '"loss":null.*"skipped":true' "$d/log.jsonl")" -eq 5 ] &&
     grep -q "skipped: non-finite loss" "$d/out"; then ok
  else bad "nan-loss-$np-ranks: the NaN loss is not in the log or the step lines"; fi
done
echo "test_bad_steps: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
