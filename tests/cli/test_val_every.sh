#!/usr/bin/env bash
# --val-every: validation every N steps as well as at each epoch's end, on
# real features (three tones through dstrain prep):
# - 3 utterances, batch 1, 2 epochs (6 steps), --val-every 2: the log holds
#   one validation after steps 2, 3 (epoch 0's end), 4 and 6 (both reasons:
#   once), and they score the whole file each time;
# - 2 ranks of batch 1 (one step an epoch; each rank scores its share): a
#   validation after steps 1 and 2, each of the whole file (3 utterances);
# - --val-every without --val is refused, naming --val.
# usage: test_val_every.sh DSTRAIN [PYTHON]
set -uo pipefail
bin=$(readlink -f "$1") py=${2:-/usr/bin/python3} here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
. "$here/../lib/checks.sh"
cd "$work" || exit 1
"$py" "$here/../lib/tones.py" "$work" || bad "writing the tones with $py"
"$bin" prep manifest ok.csv --out f.h5 --quiet >prep.out 2>&1 || bad "prep: $(cat prep.out)"

evals() {   # LOG: the steps after which it validated, and the utterances each scored
  "$py" - "$1" <<'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1]) if l.startswith('{"eval"')]
print(" ".join(f"{r['step']}:{r['utterances']}" for r in recs))
PY
}
want="2:3 3:3 4:3 6:3"
train=("$bin" train --model tiny --train f.h5 --val f.h5 --batch 1 --epochs 2 --val-every 2
       --print-every 0)
if "${train[@]}" --log one.jsonl >one.out 2>&1; then
  got=$(evals one.jsonl)
  if [ "$got" = "$want" ]; then ok; else bad "1 rank: validations $got, expected $want"; fi
  if grep -q "epoch 0  val loss .* (3 utterances, after step 2)" one.out; then ok
  else bad "1 rank: no console line for the validation after step 2: $(cat one.out)"; fi
else bad "1 rank: train failed: $(tail -3 one.out)"; fi

# 2 ranks: batch 1 each, so 1 step an epoch ... of 2 utterances (the third
# gives one rank none and is skipped): steps 1 (epoch 0's end) and 2 (both)
if command -v mpiexec >/dev/null; then
  if mpiexec -np 2 "${train[@]}" --log two.jsonl >two.out 2>&1; then
    got=$(evals two.jsonl)
    if [ "$got" = "1:3 2:3" ]; then ok; else bad "2 ranks: validations $got, expected 1:3 2:3"; fi
  else bad "2 ranks: train failed: $(tail -3 two.out)"; fi
fi

out=$("$bin" train --model tiny --train f.h5 --val-every 2 --steps 1 2>&1); rc=$?
if [ "$rc" -eq 2 ] && grep -q -- "--val-every 2 needs --val" <<<"$out"; then ok
else bad "--val-every without --val: exit $rc: $out"; fi

echo "test_val_every: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
