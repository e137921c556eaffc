#!/usr/bin/env bash
# --bucket-frames (issue 34, item 2) end to end on the CPU: a run whose
# batches are padded to a multiple of N output frames ends with the same
# checkpoint, bit for bit (every parameter, BatchNorm statistic and
# optimizer slot), as the run padded to each batch's longest utterance; its
# metrics lines show the rounded lengths. Synthetic batches (tiny, and
# jasper-small with dropout on every conv layer), a prepared feature file
# read by the loader (utterances of five lengths), two ranks, bench's JSON,
# and bad values refused by name.
# usage: test_bucket_frames.sh DSTRAIN PYTHON
set -uo pipefail
bin=$(readlink -f "$1") py=$2
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib/checks.sh"
scratch_and_pids
cd "$work" || exit 1

# Every dataset of two checkpoints, byte for byte; prints the first that differs.
same_ckpt() {
  "$py" - "$1" "$2" <<'PY'
import sys, h5py, numpy as np
a, b = h5py.File(sys.argv[1], "r"), h5py.File(sys.argv[2], "r")
names = []
a.visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Dataset) else None)
if not names:
    sys.exit("no datasets")
for n in names:
    x, y = a[n][()], b[n][()] if n in b else None
    if y is None or np.asarray(x).tobytes() != np.asarray(y).tobytes():
        sys.exit(f"{n} differs")
print(len(names), "datasets the same")
PY
}
# The frames of every metrics line of log $1: all multiples of $2 (or, with
# "some-not", at least one that is not: the unrounded run's own lengths).
frames_mult() {
  "$py" - "$@" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
fr = [l["frames"] for l in lines if "frames" in l and "step" in l]
m = int(sys.argv[2])
want_all = len(sys.argv) < 4
ok = fr and (all(f % m == 0 for f in fr) if want_all else any(f % m for f in fr))
print(fr)
sys.exit(0 if ok else 1)
PY
}
# run NAME ARGS...: a run into NAME/ (checkpoint) and NAME.jsonl (metrics)
run() {
  local name=$1; shift
  "$@" --checkpoint-dir "$name" --log "$name.jsonl" --print-every 1 >"$name.out" 2>&1
}

# pair NAME STEP N MULT PLAIN COMMAND...: COMMAND run without and with
# --bucket-frames N ends with the same checkpoint at STEP; the bucketed
# run's frames are multiples of MULT input frames (0: not checked), and with
# PLAIN 1 the unrounded run's are not all (else the check proves nothing).
pair() {
  local name=$1 step=$2 n=$3 mult=$4 plain=$5 ck out
  shift 5
  ck=$(printf 'step-%08d.h5' "$step")
  run "$name-plain" "$@" && run "$name-bucket" "$@" --bucket-frames "$n"
  if out=$(same_ckpt "$name-plain/$ck" "$name-bucket/$ck" 2>&1); then ok
  else bad "$name: the bucketed run's checkpoint differs: $out ($(tail -n 2 "$name-bucket.out"))"; fi
  [ "$mult" = 0 ] && return
  frames_mult "$name-bucket.jsonl" "$mult" >/dev/null && ok ||
    bad "$name: frames not multiples of $mult: $(frames_mult "$name-bucket.jsonl" "$mult")"
  [ "$plain" = 1 ] || return
  frames_mult "$name-plain.jsonl" "$mult" some-not >/dev/null && ok ||
    bad "$name: the unrounded run's frames are all multiples of $mult: $(frames_mult "$name-plain.jsonl" "$mult")"
}

# --- synthetic: tiny (time stride 2), 16 output frames = 32 input frames
pair tiny 4 16 32 1 "$bin" train --model tiny --synthetic --steps 4 --batch 3 --max-frames 300 --optimizer adamw
# --- jasper-small: dropout on every conv layer, residual blocks, dilation
pair jasper 2 24 48 0 "$bin" train --model jasper-small --synthetic --steps 2 --batch 2 --max-frames 200

# --- a feature file through the loader: five utterances of five lengths
mkdir audio
"$py" - <<'PY'
import math, random, struct, wave
random.seed(3)
rows = []
for k, sec in enumerate([0.61, 0.83, 1.07, 1.29, 0.74]):
    n = int(16000 * sec)
    with wave.open(f"audio/u{k}.wav", "wb") as w:
        w.setnchannels(1); w.setsampwidth(2); w.setframerate(16000)
        w.writeframes(b"".join(struct.pack("<h", int(4000 * math.sin(i * 0.03 * (k + 1)) +
                                                     random.gauss(0, 300))) for i in range(n)))
    rows.append(f"u{k}.wav,a b c\n")
open("audio/all.csv", "w").write("".join(rows))
PY
"$bin" prep manifest audio/all.csv --out feats.h5 --quiet >prep.out 2>&1 || bad "prep: $(tail -n 2 prep.out)"
pair file 3 8 16 1 "$bin" train --model tiny --train feats.h5 --steps 3 --batch 2 --seed 9
# --- two ranks: each rank's share rounded on its own
pair ranks 2 16 0 0 mpiexec -np 2 "$bin" train --model tiny --synthetic --steps 2 --batch 2 --max-frames 300

# --- bench records it
if "$bin" bench --model tiny --batch 2 --steps 2 --warmup 1 --bucket-frames 16 --out b.json >bench.out 2>&1 &&
   "$py" -c 'import json,sys; r=json.load(open("b.json"))["results"][0]["config"]; sys.exit(r["bucket_frames"] != 16)'; then ok
else bad "bench --bucket-frames 16: $(tail -n 2 bench.out)"; fi

# --- bad values, refused by name
for v in -1 x 5000 1.5; do
  out=$("$bin" train --synthetic --steps 1 --bucket-frames "$v" 2>&1); rc=$?
  [ "$rc" -eq 2 ] && grep -q -- '--bucket-frames' <<<"$out" && ok || bad "--bucket-frames $v: exit $rc: $out"
  out=$("$bin" bench --model tiny --steps 1 --warmup 1 --bucket-frames "$v" 2>&1); rc=$?
  [ "$rc" -eq 2 ] && grep -q -- '--bucket-frames' <<<"$out" && ok || bad "bench --bucket-frames $v: exit $rc: $out"
done
# the class: a count given a fraction is refused, not cut (--batch 2.5 ran batch 2)
for f in batch steps max-frames; do
  out=$("$bin" train --synthetic --steps 1 "--$f" 2.5 2>&1); rc=$?
  [ "$rc" -eq 2 ] && grep -q -- "--$f 2.5: expected a whole number" <<<"$out" && ok || bad "--$f 2.5: exit $rc: $out"
done

echo "bucket_frames: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
