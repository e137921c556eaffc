#!/usr/bin/env bash
# Writes the fuzzers' seed corpus: small valid inputs made by dstrain itself
# (and one feature file by h5py, the other writer dataset.h supports), plus
# truncated copies. Run it again when a file format changes; inputs that once
# crashed a harness (crash-*, oom-*) live beside the seeds and are kept, as are
# checkpoint/v1-micro-fp32.h5 (format 1, written before a034270: eval and
# transcribe still load it) and v2-micro-fp32.h5 (format 2, before the
# attributes' CRC: resume still loads it), and dataset/v1-prep-mel-f16.h5
# (feature file version 1).
# usage: tests/fuzz/make-corpus.sh DSTRAIN_BINARY [OUT_DIR]   (tests/fuzz/corpus)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
bin=$(realpath "$1")
out=$(realpath -m "${2:-$here/corpus}")
py=${PYTHON:-/usr/bin/python3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$out/config" "$out/checkpoint" "$out/dataset"
rm -f "$out"/*/seed-*

# the first 1/N of a file (2: half): what a copy cut short leaves
cut_to() { head -c $(($(stat -c %s "$2") / $1)) "$2" >"$3"; }
half() { cut_to 2 "$1" "$2"; }

# --- config: the presets, a model with every optional part, a cut one
for f in "$root"/configs/*.json; do cp "$f" "$out/config/seed-$(basename "$f")"; done
cat >"$work/micro.json" <<'EOF'
{"name": "micro", "n_features": 161, "n_classes": 29,
 "conv": [{"channels": 2, "kernel_time": 3, "kernel_freq": 21, "stride_time": 2,
           "stride_freq": 8, "pad_time": 1, "pad_freq": 0}],
 "rnn": {"type": "gru", "hidden": 8, "layers": 1, "bidirectional": false, "lookahead": 2},
 "fc_hidden": [6], "bn_eps": 1e-5, "bn_momentum": 0.1}
EOF
cp "$work/micro.json" "$out/config/seed-micro.json"
half "$root/configs/ds2.json" "$out/config/seed-cut-ds2.json"

# --- checkpoint: the micro model after one synthetic step, FP32 and FP64
for p in fp32 fp64; do
  "$bin" train --synthetic --config "$work/micro.json" --precision "$p" --steps 1 --batch 2 \
    --max-frames 40 --print-every 0 --checkpoint-dir "$work/ck-$p" >/dev/null
  cp "$work/ck-$p/step-00000001.h5" "$out/checkpoint/seed-micro-$p.h5"
done
cut_to 4 "$out/checkpoint/seed-micro-fp32.h5" "$out/checkpoint/seed-cut-micro-fp32.h5"

# --- dataset: prep of two short noisy tones (float16 log-mel, float32 mfcc),
# and h5py's rendering of the layout (float16 spectrogram)
"$py" - "$work" <<'PY'
import math, random, struct, sys, wave
random.seed(5)
for k in range(2):   # 0.12 s each: 11 frames
    with wave.open(f"{sys.argv[1]}/tone{k}.wav", "wb") as w:
        w.setnchannels(1); w.setsampwidth(2); w.setframerate(16000)
        w.writeframes(b"".join(struct.pack("<h", int(8000 * math.sin(2 * math.pi * (220 + 50 * k) * i / 16000))
                                           + random.randint(-300, 300)) for i in range(1920)))
open(f"{sys.argv[1]}/m.csv", "w").write("tone0.wav,hello world\ntone1.wav,it's a tone\n")
PY
# (few features: /features is stored in whole chunks of 1024 frames)
"$bin" prep manifest "$work/m.csv" --out "$out/dataset/seed-prep-mel-f16.h5" --features log-mel \
  --n-mels 8 --quiet >/dev/null
"$bin" prep manifest "$work/m.csv" --out "$out/dataset/seed-prep-mfcc-f32.h5" --features mfcc \
  --n-mfcc 4 --dtype float32 --quiet >/dev/null
"$py" - "$root/tests/peer" "$out/dataset/seed-h5py-f16.h5" <<'PY'
import sys
sys.path.insert(0, sys.argv[1])
import dataset_bad_files as d
d.FRAMES, d.N_LABELS = [3, 4], [2, 3]          # small: two utterances
d.IDS = d.IDS[:2]
d.write_valid(sys.argv[2], "<f2")
PY
half "$out/dataset/seed-prep-mel-f16.h5" "$out/dataset/seed-cut-prep-mel-f16.h5"

# --- pytorch: torch.save files of state_dicts, written by dstrain export (the
# micro model without its fc_hidden, which export refuses) and by torch
# itself (protocols 2 and 4, a Lightning-style wrapper, a view sharing its
# storage); pickle: the data.pkl of each
mkdir -p "$out/pytorch" "$out/pickle"
sed 's/ "fc_hidden": \[6\],//' "$work/micro.json" >"$work/micro-pt.json"
"$bin" train --synthetic --config "$work/micro-pt.json" --steps 1 --batch 2 --max-frames 40 \
  --print-every 0 --checkpoint-dir "$work/ck-pt" >/dev/null
"$bin" export --pytorch "$work/ck-pt/step-00000001.h5" "$out/pytorch/seed-export-micro.pt" >/dev/null
"$py" - "$out/pytorch" <<'PY'
import sys, torch
torch.manual_seed(3)
sd = {"conv.weight": torch.randn(2, 1, 3, 3), "conv.bias": torch.zeros(2, dtype=torch.float64),
      "bn.num_batches_tracked": torch.tensor(7)}
torch.save(sd, f"{sys.argv[1]}/seed-torch-p2.pt", pickle_protocol=2)
torch.save(sd, f"{sys.argv[1]}/seed-torch-p4.pt", pickle_protocol=4)
torch.save({"state_dict": sd, "epoch": 3, "lr": 0.1}, f"{sys.argv[1]}/seed-torch-wrapped.pt")
base = torch.arange(12, dtype=torch.float32)
torch.save({"a": base, "b": base[2:8].view(2, 3)}, f"{sys.argv[1]}/seed-torch-view.pt")
PY
for f in "$out"/pytorch/seed-*.pt; do
  "$py" - "$f" "$out/pickle/$(basename "$f" .pt).pkl" <<'PY'
import sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
name = next(n for n in z.namelist() if n.endswith("/data.pkl"))
open(sys.argv[2], "wb").write(z.read(name))
PY
done
half "$out/pytorch/seed-export-micro.pt" "$out/pytorch/seed-cut-export-micro.pt"

# --- audio: a 0.2 s tone as 16-bit WAV, float WAV, stereo WAV and FLAC (sox),
# one cut short, and one whose header claims an hour
mkdir -p "$out/audio"
rm -f "$out"/audio/seed-*
"$py" - "$out/audio" <<'PY'
import math, struct, sys, wave
d = sys.argv[1]
samples = [int(6000 * math.sin(2 * math.pi * 440 * i / 16000)) for i in range(3200)]
with wave.open(f"{d}/seed-tone-16bit.wav", "wb") as w:
    w.setnchannels(1); w.setsampwidth(2); w.setframerate(16000)
    w.writeframes(b"".join(struct.pack("<h", s) for s in samples))
with wave.open(f"{d}/seed-tone-stereo.wav", "wb") as w:
    w.setnchannels(2); w.setsampwidth(2); w.setframerate(16000)
    w.writeframes(b"".join(struct.pack("<hh", s, -s) for s in samples))
data = open(f"{d}/seed-tone-16bit.wav", "rb").read()
hour = bytearray(data)
hour[40:44] = struct.pack("<I", 16000 * 2 * 3600)   # the data chunk claims an hour
open(f"{d}/seed-claims-an-hour.wav", "wb").write(bytes(hour))
PY
half "$out/audio/seed-tone-16bit.wav" "$out/audio/seed-cut-tone.wav"
if command -v sox >/dev/null; then
  sox "$out/audio/seed-tone-16bit.wav" "$out/audio/seed-tone.flac"
  sox "$out/audio/seed-tone-16bit.wav" -e floating-point -b 32 "$out/audio/seed-tone-float.wav"
fi

du -sh "$out"/*
