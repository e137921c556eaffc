#!/usr/bin/env bash
# Inputs are inputs, and data that changes under a run is noticed (issue
# 33, items 2 and 5), each case a variant of a finding:
# - a FIFO given where a file is read (--train, --val, --resume PATH, a
#   FIFO among the checkpoints --resume auto looks at, eval's --checkpoint
#   and --data, export's checkpoint, --config, a manifest, a transcript file
#   a manifest names, a *.trans.txt in a LibriSpeech tree) is refused at
#   once, naming it and its role: never an open that waits for ever;
# - an output that is one of the command's inputs by another name is
#   refused and the input kept: train --log and import's output over
#   --config, bench --out and --csv over --config, prep --out over one of
#   the audio files its manifest names or a transcript file it reads (the
#   file unchanged, sha256);
# - a feature file emptied in place while a run reads it, and one replaced
#   by another file during a run, stop the run naming the file (the old
#   binary trained on, exit 0);
# - a resume on features re-recorded with the same lengths and labels (the
#   values changed, the index kept) is refused by the data fingerprint; the
#   same file copied to another folder resumes;
# - a forged index (two utterances sharing rows; frame counts halved) is
#   refused by train (--train and --val) and eval, naming the field.
# usage: test_inputs_changed.sh DSTRAIN PYTHON   (PYTHON with h5py and numpy)
set -uo pipefail
bin=$(readlink -f "$1") py=$2 here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib/checks.sh"
scratch_and_pids
if ! "$py" -c "import h5py, numpy" 2>/dev/null; then
  echo "test_inputs_changed: SKIP: $py cannot import h5py and numpy (Debian: python3-h5py)"
  exit 77
fi

# refused NAME PATTERN CMD...: ends within 20 s (a blocked open is killed:
# exit 137), not 0, its output matching PATTERN
refused() {
  local name=$1 want=$2; shift 2
  local out rc
  out=$(timeout -s KILL 20 "$@" 2>&1 </dev/null); rc=$?
  if [ "$rc" -eq 137 ]; then bad "$name: still blocked after 20 s (killed)"
  elif [ "$rc" -ne 0 ] && grep -q -- "$want" <<<"$out"; then ok
  else bad "$name: exit $rc, wanted an error matching \"$want\": $(tail -3 <<<"$out")"; fi
}
same_file() { [ "$(sha256sum < "$1")" = "$2" ]; }

cd "$work" || exit 1
"$py" "$here/../lib/tones.py" "$work"
"$bin" prep manifest ok.csv --out f.h5 --quiet >/dev/null 2>&1 || { echo "prep failed"; exit 1; }
"$bin" train --model tiny --train f.h5 --steps 2 --batch 1 --print-every 0 \
  --checkpoint-dir ck >/dev/null 2>&1 || { echo "train failed"; exit 1; }
ckpt=$work/ck/step-00000002.h5
cp "$here/../../configs/tiny.json" cfg.json 2>/dev/null ||
  printf '{"name":"t","conv":[{"channels":4,"kernel_time":5,"kernel_freq":7}],"rnn":{"type":"gru","hidden":8,"layers":1}}' > cfg.json
cfg_sum=$(sha256sum < cfg.json)

# --- FIFOs where a file is read
mkfifo pipe
refused "FIFO as --train" "training features (--train) is a FIFO" \
  "$bin" train --model tiny --train pipe --steps 1
refused "FIFO as --val" "validation features (--val) is a FIFO" \
  "$bin" train --model tiny --train f.h5 --val pipe --steps 1 --batch 1
refused "FIFO as --resume PATH" "checkpoint to resume (--resume) is a FIFO" \
  "$bin" train --model tiny --train f.h5 --resume "$work/pipe" --steps 4 --batch 1
refused "FIFO as eval --checkpoint" "checkpoint (--checkpoint) is a FIFO" \
  "$bin" eval --checkpoint pipe --data f.h5
refused "FIFO as eval --data" "feature file (--data) is a FIFO" \
  "$bin" eval --checkpoint "$ckpt" --data pipe
refused "FIFO as export's checkpoint" "pipe: the HDF5 file is a FIFO" \
  "$bin" export --pytorch pipe out.pt
refused "FIFO as --config" "pipe: .*not a regular file" "$bin" train --config pipe --synthetic --steps 1
refused "FIFO as the manifest" "manifest is a FIFO" "$bin" prep manifest pipe --out x.h5
mkdir -p m && cp tone0.wav tone1.wav m/ && mkfifo m/said.txt
printf 'tone0.wav,said.txt\ntone1.wav,hello world\n' > m/m.csv
refused "FIFO as a manifest's transcript file" "said.txt: the transcript file the manifest names is a FIFO" \
  "$bin" prep manifest m/m.csv --out x.h5
mkdir -p ls/84/121 && cp tone0.wav ls/84/121/84-121-0000.flac && mkfifo ls/84/121/84-121.trans.txt
refused "FIFO as a LibriSpeech transcript" "84-121.trans.txt: the LibriSpeech transcript file is a FIFO" \
  "$bin" prep librispeech ls --out x.h5
# --resume auto passes over a FIFO among the checkpoints, as over a damaged one
cp -r ck ckf && mkfifo ckf/step-00000009.h5
out=$(timeout -s KILL 20 "$bin" train --model tiny --train f.h5 --steps 4 --batch 1 --print-every 0 \
        --checkpoint-dir ckf --resume auto 2>&1); rc=$?
if [ "$rc" -eq 0 ] && grep -q "skipping .*step-00000009.h5: .*FIFO" <<<"$out" &&
   grep -q "resumed from .*step-00000002.h5" <<<"$out"; then ok
else bad "--resume auto with a FIFO among the checkpoints: exit $rc: $(tail -3 <<<"$out")"; fi
rm -f ckf/step-00000009.h5

# --- outputs over inputs, by another name: a second hard link (the log is
# opened in place), another spelling of the path (the others rename over it)
cp cfg.json cfg.orig
fresh_cfg() { rm -f cfg.json cfg-link.json; cp cfg.orig cfg.json; ln cfg.json cfg-link.json; }
fresh_cfg
refused "train --log over --config" "metrics log (--log) .* is the model config (--config)" \
  "$bin" train --config cfg.json --synthetic --steps 1 --print-every 0 --log "$work/cfg-link.json"
if same_file cfg.json "$cfg_sum"; then ok; else bad "train --log rewrote the config"; fi
"$bin" export --pytorch "$ckpt" sd.pt >/dev/null 2>&1
fresh_cfg
refused "import onto --config" "the checkpoint $work/cfg.json is the model config (--config)" \
  "$bin" import --pytorch sd.pt "$work/cfg.json" --config ./cfg.json
if same_file cfg.json "$cfg_sum"; then ok; else bad "import rewrote the config"; fi
for o in out csv; do
  fresh_cfg
  refused "bench --$o over --config" "(--$o) $work/cfg.json is the model config (--config)" \
    "$bin" bench --config cfg.json --synthetic --batch 1 --warmup 1 --steps 1 --$o "$work/cfg.json"
  if same_file cfg.json "$cfg_sum"; then ok; else bad "bench --$o rewrote the config"; fi
done
wav_sum=$(sha256sum < tone2.wav)
refused "prep --out over an audio file of the manifest" \
  "feature file (--out) .*tone2.wav is the audio file .*tone2.wav" \
  "$bin" prep manifest ok.csv --out "$work/./tone2.wav" --quiet
if same_file tone2.wav "$wav_sum"; then ok; else bad "prep --out rewrote the audio it read"; fi
# ... or over a transcript file it read: a LibriSpeech tree's, a manifest's .txt field
mkdir -p ls2/84/121 && cp tone0.wav ls2/84/121/84-121-0000.flac
echo "84-121-0000 HELLO WORLD" > ls2/84/121/84-121.trans.txt
txt_sum=$(sha256sum < ls2/84/121/84-121.trans.txt)
refused "prep --out over a LibriSpeech transcript" \
  "feature file (--out) .*84-121.trans.txt is the transcript file .*84-121.trans.txt" \
  "$bin" prep librispeech ls2 --out "$work/ls2/84/../84/121/84-121.trans.txt" --quiet
if same_file ls2/84/121/84-121.trans.txt "$txt_sum"; then ok; else bad "prep --out rewrote a *.trans.txt it read"; fi
echo "hello there" > said0.txt && printf 'tone0.wav,said0.txt\n' > said.csv
txt_sum=$(sha256sum < said0.txt)
refused "prep --out over a manifest's transcript file" "is the transcript file ./said0.txt" \
  "$bin" prep manifest said.csv --out "$work/said0.txt" --quiet
if same_file said0.txt "$txt_sum"; then ok; else bad "prep --out rewrote a transcript file it read"; fi

# --- a feature file emptied in place while a run reads it: steps 2-9 each
# half a second longer, so the run is still in its first epochs when the
# file is emptied after step 1; it must stop naming the file
cp f.h5 run.h5
DSTRAIN_FAULT=slow:0:2-9 "$bin" train --model tiny --train run.h5 --epochs 3 --batch 1 \
  --print-every 1 > emptied.out 2>&1 &
pid=$!; pids+=("$pid")
for _ in $(seq 400); do grep -q "step  *1/9" emptied.out && break; sleep 0.05; done
: > run.h5
wait "$pid"; rc=$?
if [ "$rc" -ne 0 ] && grep -q "run.h5: the feature file changed size while this run reads it: [0-9]* bytes when opened, 0 now" emptied.out; then ok
else bad "feature file emptied under the run: exit $rc: $(tail -3 emptied.out)"; fi

# --- the feature file replaced by another during a run: the run stops
# itself after step 2 (SIGSTOP), the file is replaced, then it goes on
cp f.h5 run.h5
DSTRAIN_FAULT=pause:0:2 "$bin" train --model tiny --train run.h5 --epochs 2 --batch 1 \
  --print-every 1 > replaced.out 2>&1 &
pid=$!; pids+=("$pid")
state=
for _ in $(seq 200); do
  state=$(sed 's/.*) //' "/proc/$pid/stat" 2>/dev/null | cut -d' ' -f1)
  [ "$state" = T ] && break; sleep 0.05
done
if [ "$state" = T ]; then
  cp f.h5 other.h5 && mv other.h5 run.h5
  kill -CONT "$pid"; wait "$pid"; rc=$?
  if [ "$rc" -ne 0 ] && grep -q "run.h5: the path now names another file than the feature file this run opened" replaced.out; then ok
  else bad "feature file replaced during the run: exit $rc: $(tail -3 replaced.out)"; fi
else
  kill -9 "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
  bad "DSTRAIN_FAULT=pause did not stop the run (state $state): $(tail -2 replaced.out)"
fi

# --- resume on re-recorded features: the same lengths, labels and index,
# other values (scaled, noise added); a copy in another folder resumes
cp f.h5 rerec.h5
"$py" - rerec.h5 <<'PY'
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "r+") as f:
    x = f["features"][...]
    f["features"][...] = (x * 1.01 + np.random.default_rng(3).normal(0, 0.05, x.shape)).astype(x.dtype)
PY
refused "resume on re-recorded features" \
  "data_fingerprint: [0-9a-f]\{8\} in the checkpoint, [0-9a-f]\{8\} now (data_fingerprint: the utterances' lengths and labels and a sample of the features" \
  "$bin" train --model tiny --train rerec.h5 --steps 4 --batch 1 --print-every 0 \
    --checkpoint-dir ck --resume auto
mkdir -p elsewhere && cp f.h5 elsewhere/f.h5 && cp -r ck ck2
out=$("$bin" train --model tiny --train elsewhere/f.h5 --steps 4 --batch 1 --print-every 0 \
        --checkpoint-dir ck2 --resume auto 2>&1); rc=$?
if [ "$rc" -eq 0 ] && grep -q "resumed from" <<<"$out"; then ok
else bad "resume on a copy of the features in another folder: exit $rc: $(tail -3 <<<"$out")"; fi

# --- forged indexes: utterance 2 moved into utterance 1's rows; every
# frame count halved (the rows stay, /stats/count no longer matches)
cp f.h5 overlap.h5 && cp f.h5 halved.h5
"$py" - overlap.h5 halved.h5 <<'PY'
import sys, h5py
with h5py.File(sys.argv[1], "r+") as f:
    a = f["utterances/frame_offset"][...]
    a[2] = a[1] + 8
    f["utterances/frame_offset"][...] = a
with h5py.File(sys.argv[2], "r+") as f:
    f["utterances/frames"][...] = f["utterances/frames"][...] // 2
PY
ov="overlap.h5: dataset /utterances/frame_offset: utterance 2 (id tone2) rows \[[0-9]*, [0-9]*) overlap utterance 1"
hv="halved.h5: dataset /stats/count: [0-9]* frames, but the utterances hold [0-9]* (the sum of /utterances/frames)"
refused "train --train on an overlapping index" "$ov" \
  "$bin" train --model tiny --train overlap.h5 --steps 1 --batch 1 --print-every 0
refused "train --val on an overlapping index" "$ov" \
  "$bin" train --model tiny --train f.h5 --val overlap.h5 --steps 1 --batch 1 --print-every 0
refused "eval on an overlapping index" "$ov" "$bin" eval --checkpoint "$ckpt" --data overlap.h5
refused "train on halved frame counts" "$hv" \
  "$bin" train --model tiny --train halved.h5 --steps 1 --batch 1 --print-every 0
refused "eval on halved frame counts" "$hv" "$bin" eval --checkpoint "$ckpt" --data halved.h5

echo "test_inputs_changed: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
