#!/usr/bin/env bash
# Exact resume (issue 13): training N steps straight, and k steps then
# --resume for the rest, end with bit-identical parameters, BatchNorm
# statistics and optimizer state, in fp32 and fp64, on 1 and 2 ranks, on
# synthetic data and on a feature file (the loader restarts mid-epoch).
# Also: a different rank count at the same global batch continues the same
# sample order (fp64: equal to 1e-9, where another order differs by far
# more); rank 0 killed (SIGKILL) while it writes a checkpoint leaves the
# previous one valid and --resume auto uses it; bit flips and truncation
# are reported and skipped; a different model, seed or global batch is
# refused naming what differs; a changed learning rate is allowed and said.
# usage: test_resume.sh DSTRAIN PYTHON
set -uo pipefail
bin=$(readlink -f "$1")
py=${2:-/usr/bin/python3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
. "$(dirname "$0")/../lib/checks.sh"

# same A B: the checkpoints' tensors are identical bit for bit
same() {
  local g
  for g in /params /state /optim; do
    h5diff -q "$1" "$2" "$g" "$g" >/dev/null 2>&1 || return 1
  done
}

# train NP ARGS...: one rank plainly, more under mpiexec
train() {
  local np=$1; shift
  if [ "$np" -gt 1 ]; then
    timeout 300 mpiexec -np "$np" "$bin" train --timeout 60 "$@"
  else
    timeout 300 "$bin" train "$@"
  fi
}

# exact NAME NP K N ARGS...: N steps straight vs K steps, then resume to N
exact() {
  local name=$1 np=$2 k=$3 n=$4; shift 4
  local d="$work/$name"
  train "$np" "$@" --steps "$n" --checkpoint-dir "$d/straight" >"$d.straight.out" 2>&1 \
    || { bad "$name: straight run: $(tail -3 "$d.straight.out")"; return; }
  train "$np" "$@" --steps "$k" --checkpoint-dir "$d/split" >"$d.first.out" 2>&1 \
    || { bad "$name: first part: $(tail -3 "$d.first.out")"; return; }
  train "$np" "$@" --steps "$n" --checkpoint-dir "$d/split" --resume auto >"$d.rest.out" 2>&1 \
    || { bad "$name: resumed part: $(tail -3 "$d.rest.out")"; return; }
  local last; last=$(printf 'step-%08d.h5' "$n")
  if grep -q "resumed from .*$(printf 'step-%08d.h5' "$k")" "$d.rest.out" &&
     same "$d/straight/$last" "$d/split/$last"; then
    ok; echo "$name: $n steps straight = $k + resume, bit for bit"
  else bad "$name: straight and resumed differ: $(grep -i resum "$d.rest.out" | head -2)"; fi
  # the test can fail: one step more is not the same
  if ! same "$d/straight/$last" "$d/split/$(printf 'step-%08d.h5' $((n - 1)))"; then ok
  else bad "$name: step $n and step $((n - 1)) compare equal: the comparison sees nothing"; fi
}

syn=(--model tiny --synthetic --synthetic-utts 12 --max-frames 80 --batch 2 --print-every 0)
exact syn-fp32-1rank 1 4 8 "${syn[@]}" --precision fp32
exact syn-fp64-1rank 1 3 8 "${syn[@]}" --precision fp64 --optimizer adamw
exact syn-fp32-2ranks 2 2 7 "${syn[@]}" --precision fp32 --checkpoint-every 2
exact syn-fp64-2ranks 2 4 7 "${syn[@]}" --precision fp64

# --- a feature file: twelve tones of different lengths through dstrain prep
mkdir -p "$work/feat"
"$py" - "$work/feat" <<'PY'
import math, random, struct, sys, wave
random.seed(7)
for k in range(12):   # 0.4 to 1.5 s of a noisy tone each
    n = 6400 + 1600 * k
    with wave.open(f"{sys.argv[1]}/tone{k}.wav", "wb") as w:
        w.setnchannels(1); w.setsampwidth(2); w.setframerate(16000)
        w.writeframes(b"".join(struct.pack("<h", int(6000 * math.sin(2 * math.pi * (180 + 40 * k) * i / 16000))
                                           + random.randint(-300, 300)) for i in range(n)))
words = ["one", "two", "three", "four", "five", "six"]
open(f"{sys.argv[1]}/m.csv", "w").write("".join(f"tone{k}.wav,{words[k % 6]} {words[(k + 1) % 6]}\n" for k in range(12)))
PY
if "$bin" prep manifest "$work/feat/m.csv" --out "$work/feat/f.h5" --quiet >"$work/prep.out" 2>&1; then ok
else bad "prep of twelve tones: $(tail -3 "$work/prep.out")"; fi
data=(--model tiny --train "$work/feat/f.h5" --epochs 4 --print-every 0)
exact data-fp32-1rank 1 5 9 "${data[@]}" --batch 2 --spec-augment
exact data-fp32-2ranks 2 4 8 "${data[@]}" --batch 1 --checkpoint-every 1
exact data-fp64-2ranks 2 2 6 "${data[@]}" --batch 2 --precision fp64

# --- the same global batch on another rank count: 2 x 2 for 4 steps, then
# 1 x 4 to step 9, against 2 x 2 throughout (fp64: only rounding differs)
d="$work/ranks"
train 2 "${data[@]}" --precision fp64 --batch 2 --steps 9 --checkpoint-dir "$d/straight" >"$d.a" 2>&1 \
  || bad "ranks: straight: $(tail -3 "$d.a")"
train 2 "${data[@]}" --precision fp64 --batch 2 --steps 4 --checkpoint-dir "$d/split" >"$d.b" 2>&1 \
  || bad "ranks: first part: $(tail -3 "$d.b")"
train 1 "${data[@]}" --precision fp64 --batch 4 --steps 9 --checkpoint-dir "$d/split" --resume auto >"$d.c" 2>&1 \
  || bad "ranks: resumed on 1 rank: $(tail -3 "$d.c")"
if grep -q "options changed.*ranks: 2 in the checkpoint, 1 now" "$d.c"; then ok
else bad "ranks: the change of rank count is not said: $(grep -i resum "$d.c")"; fi
if "$py" - "$d/straight/step-00000009.h5" "$d/split/step-00000009.h5" "$d/split/step-00000004.h5" <<'PY'
import sys, h5py, numpy as np
a, b, c = (h5py.File(p, "r") for p in sys.argv[1:4])
diff = max(np.max(np.abs(a["params"][k][()] - b["params"][k][()])) for k in a["params"])
moved = max(np.max(np.abs(a["params"][k][()] - c["params"][k][()])) for k in a["params"])
print(f"ranks: 2x2 straight vs 2x2 + 1x4 resumed: max |diff| {diff:.3g}; moved since step 4: {moved:.3g}")
sys.exit(0 if diff < 1e-9 and moved > 1e-6 else 1)
PY
then ok; else bad "ranks: resuming on 1 rank did not continue the same sample order"; fi

# --- rank 0 killed 4 KiB into the checkpoint of step 4 (of 2 ranks): step 3's
# stays whole and --resume auto takes it
d="$work/killsave"
DSTRAIN_FAULT=killsave:0:4 train 2 "${syn[@]}" --steps 6 --checkpoint-every 1 --checkpoint-dir "$d" \
  >"$d.out" 2>&1
rc=$?
# the background writer's thread is the one killed (the default --checkpoint-write)
if [ "$rc" -ne 0 ] && [ -f "$d/step-00000003.h5" ] && [ ! -f "$d/step-00000004.h5" ] &&
   grep -q "checkpoint .*step-00000003.h5 (.*beside training)" "$d.out"; then ok
else bad "killsave: exit $rc, files: $(ls "$d" 2>&1 | tr '\n' ' ')"; fi
echo "killsave: rank 0 killed while writing step 4 (exit $rc); left: $(ls "$d" | tr '\n' ' ')"
if "$bin" info "$d/step-00000003.h5" 2>&1 | grep -q "^verified:"; then ok
else bad "killsave: the previous checkpoint does not verify"; fi
train 2 "${syn[@]}" --steps 6 --checkpoint-every 1 --checkpoint-dir "$d" --resume auto >"$d.resume" 2>&1
if grep -q "removed 1 partial checkpoint (step-N.h5.*.tmp)" "$d.resume" &&
   grep -q "resumed from .*step-00000003.h5" "$d.resume" &&
   same "$d/step-00000006.h5" "$work/syn-fp32-2ranks/straight/step-00000006.h5"; then ok
else bad "killsave: resume did not go on from step 3: $(tail -3 "$d.resume")"; fi

# --- damaged checkpoints: a flipped byte in a parameter's data, a truncated
# file, a flipped digit in an attribute (the generator state, which would
# still parse); --resume auto reports each (file and dataset) and takes the
# one before
d="$work/damage"
cp -r "$work/syn-fp32-1rank/split" "$d"
flip() {   # flip one byte inside dataset $2 of file $1 (its stored data)
  "$py" - "$1" "$2" <<'PY'
import sys, h5py
path, name = sys.argv[1], sys.argv[2]
with h5py.File(path, "r") as f:
    off = f[name].id.get_chunk_info(0).byte_offset
with open(path, "r+b") as f:
    f.seek(off + 16); b = f.read(1); f.seek(off + 16); f.write(bytes([b[0] ^ 0x10]))
PY
}
flip_rng() {   # one digit of file $1's rng attribute made another digit: still four hex words
  "$py" - "$1" <<'PY'
import sys, h5py
path = sys.argv[1]
with h5py.File(path, "r") as f:
    rng = f.attrs["rng"]
rng = rng if isinstance(rng, bytes) else rng.encode()
data = open(path, "rb").read()
at = data.find(rng)
assert at >= 0 and data.find(rng, at + 1) < 0, "the rng value is not in the file once"
at += next(i for i, c in enumerate(rng) if c in b"0123456789")
with open(path, "r+b") as f:
    f.seek(at); f.write(bytes([data[at] ^ 0x01]))
PY
}
flip "$d/step-00000008.h5" params/rnn.0.fwd.weight_ih
truncate -s 100000 "$d/step-00000007.h5"
flip_rng "$d/step-00000006.h5"
out=$(train 1 "${syn[@]}" --precision fp32 --steps 8 --checkpoint-dir "$d" --resume auto 2>&1); rc=$?
if [ "$rc" -eq 0 ] && grep -q "skipping .*step-00000008.h5.*params/rnn.0.fwd.weight_ih" <<<"$out" &&
   grep -q "skipping .*step-00000007.h5" <<<"$out" &&
   grep -q "skipping .*step-00000006.h5.*attributes: checksum mismatch" <<<"$out" &&
   grep -q "resumed from .*step-00000004.h5" <<<"$out"; then ok
else bad "damage: flipped/truncated not reported and skipped (exit $rc): $(grep -i 'resum\|skip' <<<"$out")"; fi
grep "skipping" <<<"$out" | sed 's/^/damage: /'
if same "$d/step-00000008.h5" "$work/syn-fp32-1rank/straight/step-00000008.h5"; then ok
else bad "damage: the run resumed from step 4 does not end as the straight one"; fi
out=$(train 1 "${syn[@]}" --steps 8 --resume "$work/damage-none.h5" 2>&1); rc=$?
if [ "$rc" -ne 0 ] && grep -q "damage-none.h5" <<<"$out"; then ok
else bad "resume of a missing file: exit $rc: $out"; fi
mkdir -p "$work/allbad" && cp "$d/step-00000007.h5" "$work/allbad/"
out=$(train 1 "${syn[@]}" --steps 8 --checkpoint-dir "$work/allbad" --resume auto 2>&1); rc=$?
if [ "$rc" -ne 0 ] && grep -q "none of its 1 checkpoints validates" <<<"$out"; then ok
else bad "no valid checkpoint: exit $rc: $out"; fi

# --- another run's checkpoint is refused, naming what differs
ck="$work/syn-fp32-1rank/split/step-00000004.h5"
refused() {   # refused NAME EXPECTED ARGS...
  local name=$1 expect=$2; shift 2
  local out; out=$(train 1 "$@" --steps 8 --resume "$ck" 2>&1); local rc=$?
  if [ "$rc" -ne 0 ] && grep -q -- "$expect" <<<"$out"; then ok
  else bad "$name: exit $rc, expected \"$expect\": $(tail -2 <<<"$out")"; fi
}
refused other-model "model.rnn.hidden: 32 in the checkpoint, 128 now" \
  --model small --synthetic --synthetic-utts 12 --max-frames 80 --batch 2
refused other-seed "seed: 1 in the checkpoint, 2 now" "${syn[@]}" --seed 2
refused other-batch "global_batch: 2 in the checkpoint, 4 now" "${syn[@]}" --batch 4
refused other-precision "precision: float32 in the checkpoint, float64 now" "${syn[@]}" --precision fp64
out=$(train 1 "${syn[@]}" --steps 5 --lr 1e-3 --resume "$ck" 2>&1); rc=$?
if [ "$rc" -eq 0 ] && grep -q "options changed.*lr: 0.0003 in the checkpoint, 0.001 now" <<<"$out"; then ok
else bad "changed lr: exit $rc: $(grep -i resum <<<"$out")"; fi

echo "test_resume: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
