#!/usr/bin/env bash
# CLI behaviour of the dstrain binary: help on every command, version,
# determinism of training, and clear errors for bad input.
# usage: test_cli.sh PATH/TO/dstrain
set -u
bin=${1:?usage: test_cli.sh DSTRAIN}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0
ok()   { pass=$((pass + 1)); }
bad()  { fail=$((fail + 1)); echo "FAIL: $*" >&2; }

# expect_fail NAME PATTERN CMD...: CMD exits non-zero and stderr matches PATTERN
expect_fail() {
  local name=$1 pattern=$2; shift 2
  if "$@" >"$tmp/out" 2>"$tmp/err"; then bad "$name: exited 0"; return; fi
  if grep -Eq -- "$pattern" "$tmp/err"; then ok; else bad "$name: stderr lacks /$pattern/: $(cat "$tmp/err")"; fi
}

for cmd in "" train info; do
  if "$bin" $cmd --help >"$tmp/out" 2>&1 && grep -q "usage" "$tmp/out"; then ok; else bad "dstrain $cmd --help"; fi
done
if "$bin" --version | grep -q "^dstrain [0-9]" ; then ok; else bad "--version"; fi
if "$bin" info | grep -Eq "^ds2 +86618400"; then ok; else bad "info lists the ds2 preset with its parameter count"; fi

# same seed, same numbers (timing fields removed); another seed, other numbers
run() { "$bin" train --model tiny --synthetic --steps 8 --batch 4 --max-frames 120 --seed "$1" \
          --print-every 0 --log "$2" >/dev/null 2>"$tmp/err" || bad "train seed $1: $(cat "$tmp/err")"; }
strip() { sed -E 's/,"step_ms":[^,]*,"samples_per_s":[^}]*//' "$1"; }
run 3 "$tmp/a.jsonl"; run 3 "$tmp/b.jsonl"; run 4 "$tmp/c.jsonl"
if [ "$(wc -l < "$tmp/a.jsonl")" -eq 8 ]; then ok; else bad "log has $(wc -l < "$tmp/a.jsonl") lines, expected 8"; fi
if cmp -s <(strip "$tmp/a.jsonl") <(strip "$tmp/b.jsonl"); then ok; else bad "same seed gave different logs"; fi
if ! cmp -s <(strip "$tmp/a.jsonl") <(strip "$tmp/c.jsonl"); then ok; else bad "different seeds gave the same log"; fi
for key in step loss lr grad_norm samples_per_s step_ms; do
  if head -1 "$tmp/a.jsonl" | grep -q "\"$key\":"; then ok; else bad "log line lacks $key"; fi
done
run64() { "$bin" train --model tiny --synthetic --steps 3 --batch 2 --max-frames 100 --precision fp64 \
            --print-every 0 --log "$1" >/dev/null 2>&1 || bad "fp64 training failed"; }
run64 "$tmp/d.jsonl"; run64 "$tmp/e.jsonl"
if cmp -s <(strip "$tmp/d.jsonl") <(strip "$tmp/e.jsonl"); then ok; else bad "fp64 not deterministic"; fi

# bad input: each error names what is wrong
expect_fail "unknown preset" 'unknown model preset "nope"' "$bin" train --model nope --synthetic
echo '{"conv":[{"channels":4}],"rnn":{"type":"gru","hidden":8,"layers":1}}' > "$tmp/bad.json"
expect_fail "missing field" "bad.json: conv\[0\]\.kernel_time is missing" "$bin" train --config "$tmp/bad.json" --synthetic
echo '{"conv":[' > "$tmp/broken.json"
expect_fail "broken json" "broken.json: not valid JSON" "$bin" train --config "$tmp/broken.json" --synthetic
expect_fail "missing config" "nothere.json: cannot open" "$bin" train --config "$tmp/nothere.json" --synthetic
echo '{"conv":[{"channels":4,"kernel_time":3,"kernel_freq":3}],"rnn":{"type":"xlstm","hidden":8,"layers":1}}' > "$tmp/cell.json"
expect_fail "bad cell" 'rnn.type "xlstm"' "$bin" train --config "$tmp/cell.json" --synthetic
expect_fail "bad number" "--batch x" "$bin" train --synthetic --batch x
expect_fail "bad precision" "--precision fp8" "$bin" train --synthetic --precision fp8
expect_fail "NaN number" "--lr nan: expected a number" "$bin" train --synthetic --lr nan
expect_fail "loss scale below 1" "--loss-scale 0.5: expected a number in \[1," "$bin" train --synthetic --loss-scale 0.5
expect_fail "loss scale word" "--loss-scale static: expected a number" "$bin" train --synthetic --loss-scale static
expect_fail "loss scale window 0" "--loss-scale-window 0: expected a (whole )?number in \[1," "$bin" train --synthetic --loss-scale-window 0
expect_fail "cpu binding word" "--cpu-bind numa: expected none or gpu" "$bin" train --synthetic --cpu-bind numa
expect_fail "bench cpu binding word" "--cpu-bind 1: expected none or gpu" "$bin" bench --cpu-bind 1
expect_fail "graphs on the cpu" "--cuda-graphs captures GPU work: it needs --device cuda" "$bin" train --synthetic --cuda-graphs
expect_fail "bench graphs on the cpu" "--cuda-graphs captures GPU work" "$bin" bench --cuda-graphs --steps 1
expect_fail "graphs with layer ranges" "--profile layers times ranges inside the step" "$bin" bench --device cuda --cuda-graphs --profile layers
expect_fail "graphs held 0" "--cuda-graphs-max 0: expected a (whole )?number in \[1," "$bin" train --synthetic --cuda-graphs-max 0
expect_fail "window without dynamic" "--loss-scale-window applies to a dynamic scale" "$bin" train --synthetic --loss-scale-window 10
expect_fail "no data" "pass --train FILE.h5" "$bin" train --model tiny
# --device cuda where it cannot run: not built in, or built with no GPU here
if ! "$bin" --version | grep -q "^backends:.*cuda (float"; then
  expect_fail "cuda not built" "--device cuda" "$bin" train --synthetic --device cuda --steps 1
elif "$bin" --version | grep -q "no CUDA device visible"; then
  expect_fail "no GPU" "no CUDA device" "$bin" train --synthetic --device cuda --steps 1
fi
expect_fail "unknown command" 'unknown command "frobnicate"' "$bin" frobnicate
expect_fail "log not writable" "cannot open the metrics log" "$bin" train --synthetic --steps 1 --log /nonexistent/dir/x.jsonl
expect_fail "too short" "leave no output frames|at least" "$bin" train --synthetic --steps 1 --max-frames 3

echo "test_cli: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
