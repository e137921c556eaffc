#!/usr/bin/env bash
# Issue 13's defects found by a hostile or careless user, as regression
# tests (CPU, one rank): numeric options that took NaN, a failed prep that
# destroyed a good feature file, a manifest named without a directory,
# finite corruption in a feature file and in checkpoints used silently, and
# a checkpoint directory checked only at the first save.
# usage: test_bad_input.sh DSTRAIN PYTHON
set -uo pipefail
bin=$(readlink -f "$1") py=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
. "$(dirname "$0")/../lib/checks.sh"

# refused: NAME EXPECTED_TEXT COMMAND... (exit 2, stderr names the flag)
refused() {
  local name=$1 want=$2; shift 2
  local out rc
  out=$(timeout 20 "$@" 2>&1 >/dev/null); rc=$?
  if [ "$rc" -eq 2 ] && grep -q -- "$want" <<<"$out"; then ok
  else bad "$name (exit $rc, wanted 2 and \"$want\"): $out"; fi
}

# --- numeric options: NaN, Inf and out of range are refused, naming the flag
for flag in synthetic-utts lr momentum timeout steps batch max-frames epochs warmup max-norm \
            bucket-mb weight-decay checkpoint-every print-every; do
  refused "train --$flag nan" "--$flag nan" "$bin" train --synthetic --$flag nan
done
refused "train --lr inf" "--lr inf" "$bin" train --synthetic --lr inf
refused "train --batch -3" "--batch -3" "$bin" train --synthetic --batch -3
refused "train --momentum 1.5" "--momentum 1.5" "$bin" train --synthetic --momentum 1.5
refused "train --checkpoint-error maybe" "expected stop or continue" \
  "$bin" train --synthetic --checkpoint-error maybe
refused "bench --steps nan" "--steps nan" "$bin" bench --model tiny --steps nan
refused "bench --timeout inf" "--timeout inf" "$bin" bench --model tiny --timeout inf
refused "eval --batch nan" "--batch nan" "$bin" eval --checkpoint x.h5 --data y.h5 --batch nan
refused "prep --n-mels nan" "--n-mels nan" "$bin" prep manifest x.csv --out y.h5 --n-mels nan
refused "prep --threads 0" "--threads 0" "$bin" prep manifest x.csv --out y.h5 --threads 0
if grep -q "0: wait for ever" <<<"$("$bin" train --help)"; then ok
else bad "train --help does not say what --timeout 0 means"; fi

# --- a prep that prepares nothing leaves an existing --out as it was
mkdir -p "$work/prep"
printf 'not a feature file but the user'"'"'s\n' > "$work/prep/good.h5"
sum=$(sha256sum < "$work/prep/good.h5")
head -c 2000 /dev/urandom > "$work/prep/noise.wav"
printf 'noise.wav,hello world\n' > "$work/prep/m.csv"
out=$(cd "$work/prep" && "$bin" prep manifest m.csv --out good.h5 --quiet 2>&1); rc=$?
if [ "$rc" -ne 0 ] && [ "$(sha256sum < "$work/prep/good.h5")" = "$sum" ] && \
   grep -q "left as it was" <<<"$out" && ! ls "$work/prep" | grep -q "good.h5.new"; then
  ok
else bad "failed prep (exit $rc) changed or left debris next to --out: $out"; fi
# the manifest named without a directory: its audio is found beside it
if grep -q "\./noise.wav" <<<"$out"; then ok
else bad "manifest audio path not resolved beside m.csv: $out"; fi

# --- a feature file with one flipped byte in /features (values stay finite)
# is refused when read, not trained on: the Fletcher32 checksum
mkdir -p "$work/feat"
"$py" "$(dirname "$0")/../lib/tones.py" "$work/feat"
"$bin" prep manifest "$work/feat/ok.csv" --out "$work/feat/good.h5" --quiet >/dev/null 2>&1 \
  || bad "prep of three tones"
if "$bin" train --train "$work/feat/good.h5" --steps 2 --batch 2 --print-every 0 >/dev/null 2>&1; then
  ok
else bad "the intact feature file does not train"; fi
cp "$work/feat/good.h5" "$work/feat/flip.h5"
"$py" - "$work/feat/flip.h5" <<'PY'
import sys, h5py
with h5py.File(sys.argv[1], "r") as f:
    off = f["features"].id.get_chunk_info(0).byte_offset
with open(sys.argv[1], "r+b") as g:   # a low mantissa bit of one float16: still finite
    g.seek(off + 1001); b = g.read(1); g.seek(off + 1001); g.write(bytes([b[0] ^ 0x04]))
PY
out=$("$bin" train --train "$work/feat/flip.h5" --steps 2 --batch 2 --print-every 0 2>&1); rc=$?
if [ "$rc" -ne 0 ] && grep -q "flip.h5: /features: .*checksum mismatch" <<<"$out" && \
   ! grep -q "HDF5-DIAG\|minor:" <<<"$out"; then
  ok
else bad "flipped /features: exit $rc: $out"; fi

# --- checkpoints: corruption is reported with the file and the dataset
ck="$work/ck"
"$bin" train --model tiny --synthetic --steps 2 --checkpoint-dir "$ck" --checkpoint-every 2 \
  --print-every 0 >/dev/null 2>&1 || bad "training for a checkpoint"
good="$ck/step-00000002.h5"
if "$bin" info "$good" | grep -q "^verified:"; then ok
else bad "info does not verify a good checkpoint"; fi
# corrupt KIND: a copy of the good checkpoint, damaged by python
corrupt() {
  cp "$good" "$work/$1.h5"
  "$py" - "$work/$1.h5" "$1" <<'PY'
import sys, h5py, numpy as np
path, kind = sys.argv[1], sys.argv[2]
if kind == "nan":
    with h5py.File(path, "r+") as f:
        d = f["params/conv.0.weight"]; a = d[()]; a.flat[3] = np.nan; d[...] = a
elif kind == "negvar":
    with h5py.File(path, "r+") as f:
        d = f["state/conv.0.bn.running_var"]; a = d[()]; a[1] = -0.5; d[...] = a
elif kind == "flip":   # one byte of the stored data, the HDF5 structure untouched
    with h5py.File(path, "r") as f:
        off = f["params/conv.0.weight"].id.get_chunk_info(0).byte_offset
    with open(path, "r+b") as g:
        g.seek(off + 17); b = g.read(1); g.seek(off + 17); g.write(bytes([b[0] ^ 0x10]))
elif kind == "truncated":
    with open(path, "r+b") as g:
        g.truncate(g.seek(0, 2) // 2)
PY
}
expect_bad() {   # NAME TEXT...: info fails and says each TEXT
  local name=$1; shift
  local out rc; out=$("$bin" info "$work/$name.h5" 2>&1); rc=$?
  local said=1; for t in "$@"; do grep -q -- "$t" <<<"$out" || said=0; done
  if [ "$rc" -ne 0 ] && [ "$said" = 1 ]; then ok
  else bad "checkpoint $name: exit $rc, output: $out"; fi
}
corrupt nan;       expect_bad nan "params/conv.0.weight" "is nan"
corrupt negvar;    expect_bad negvar "state/conv.0.bn.running_var" "must be positive"
corrupt flip;      expect_bad flip "params/conv.0.weight" "checksum"
corrupt truncated; expect_bad truncated "truncated.h5"

# --- the checkpoint directory is checked before the first step
touch "$work/not-a-dir"
out=$("$bin" train --model tiny --synthetic --steps 50 --checkpoint-dir "$work/not-a-dir" 2>&1); rc=$?
if [ "$rc" -ne 0 ] && grep -q "not-a-dir" <<<"$out" && ! grep -q "^step " <<<"$out"; then
  ok
else bad "checkpoint path that is a file: exit $rc: $out"; fi

# --- --keep K: the K newest checkpoints stay, files dstrain did not write are left alone
mkdir -p "$work/keep"
touch "$work/keep/notes.txt" "$work/keep/step-1.h5"
"$bin" train --model tiny --synthetic --steps 10 --checkpoint-every 2 --keep 2 \
  --checkpoint-dir "$work/keep" --print-every 0 >/dev/null 2>&1 || bad "training with --keep 2"
left=$(cd "$work/keep" && ls | tr '\n' ' ')
if [ "$left" = "notes.txt step-00000008.h5 step-00000010.h5 step-1.h5 " ]; then
  ok
else bad "--keep 2 left: $left"; fi

echo "test_bad_input: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
