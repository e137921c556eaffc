#!/usr/bin/env bash
# Limits are errors, not signals, and the smaller silences (issue 33, items
# 6 and 7), each a variant of what was found:
# - a file-size limit (ulimit -f) under a checkpoint, a PyTorch export, a
#   prep output and bench's JSON: an error naming the file, exit 1 (not
#   SIGXFSZ's 153), no temporary left;
# - an address-space limit (ulimit -v): dstrain version and a small train
#   with 16 BLAS threads asked end in seconds, working or naming the sizes;
# - a CUDA build's plugin that cannot be loaded (too little address space,
#   a library missing, not this build's, cut short, not there): an error
#   that says why, exit 1, and the CPU path runs without the CUDA libraries;
# - eval of a file whose every utterance is too short: an error, not WER 0;
# - transcribe of a float WAV with a NaN sample: refused, naming it;
# - a --train path with a newline: one data= line in the recorded options;
# - a --checkpoint-dir with a byte that is not UTF-8: the log's lines parse;
# - a config key given twice, a conv layer wider than its bins: refused;
# - an empty value for a path option: refused naming the option;
# - garbage numbers in the job scripts' variables: refused by name, and
#   DSTRAIN_MAX_REQUEUES=five no longer requeues;
# - a 4000-character path: the reason still in the message;
# - a UTF-16 manifest and a Latin-1 one: named as such;
# - info on a torch.save zip: said to be one.
# usage: test_limits_messages.sh DSTRAIN PYTHON
set -uo pipefail
bin=$(readlink -f "$1") py=$2
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
. "$here/../lib/checks.sh"
# Open MPI's PMIx keeps its store in a file (gds ds21), which a file-size
# limit of a few MB refuses; its hash store keeps it in memory
export PMIX_MCA_gds=hash
cd "$work" || exit 1
mkdir feat
"$py" "$here/../lib/tones.py" feat
"$bin" prep manifest feat/ok.csv --out tones.h5 --quiet >/dev/null 2>&1 || { echo "prep failed"; exit 1; }
"$bin" train --model tiny --train tones.h5 --steps 1 --batch 2 --checkpoint-dir ck >/dev/null 2>&1
ckpt=$(ls ck/step-*.h5 2>/dev/null | tail -n 1)
[ -n "$ckpt" ] || { echo "no checkpoint to start from"; exit 1; }
no_tmp() { [ -z "$(find "$1" -name '*.tmp*' 2>/dev/null)" ]; }

# --- ulimit -f (KiB): each writer over it
out=$( (ulimit -f 100; "$bin" export --pytorch "$ckpt" model.pt) 2>&1); rc=$?
if [ "$rc" -eq 1 ] && grep -q 'model.pt' <<<"$out" && grep -qi 'too large' <<<"$out" && no_tmp . && [ ! -e model.pt ]; then ok
else bad "export over ulimit -f: exit $rc (153: SIGXFSZ), tmp: $(find . -name '*.tmp*'): $out"; fi
out=$( (ulimit -f 9000; "$bin" train --model small --optimizer adamw --synthetic --steps 1 --batch 1 \
        --max-frames 60 --checkpoint-dir ckf) 2>&1); rc=$?
if [ "$rc" -eq 1 ] && grep -q 'ckf/step-00000001.h5' <<<"$out" && grep -qi 'too large' <<<"$out" && no_tmp ckf; then ok
else bad "checkpoint over ulimit -f: exit $rc, tmp: $(find ckf -name '*.tmp*'): $(tail -n 2 <<<"$out")"; fi
out=$( (ulimit -f 60; "$bin" prep manifest feat/ok.csv --out small.h5 --quiet) 2>&1); rc=$?
if [ "$rc" -eq 1 ] && grep -q 'small.h5' <<<"$out" && grep -qi 'too large' <<<"$out" && no_tmp . && no_tmp feat; then ok
else bad "prep over ulimit -f: exit $rc, tmp: $(find . -name '*.tmp*'): $out"; fi
out=$( (ulimit -f 1; "$bin" bench --model tiny --synthetic --steps 2 --warmup 1 --batch 2 --max-frames 100 \
        --out b.json) 2>&1); rc=$?
if [ "$rc" -eq 1 ] && grep -q 'b.json' <<<"$out" && grep -qi 'too large' <<<"$out" && no_tmp .; then ok
else bad "bench --out over ulimit -f: exit $rc, tmp: $(find . -name '*.tmp*'): $(tail -n 2 <<<"$out")"; fi

# --- ulimit -v (KiB): ends in seconds, works or names the sizes. A CUDA
# build maps no CUDA library until --device cuda asks for its plugin, so the
# same limits hold for it.
for kib in 250000 1300000 2500000 4000000; do
  for what in version train; do
    if [ "$what" = version ]; then cmd=("$bin" version)
    else cmd=("$bin" train --model tiny --synthetic --steps 2 --batch 2 --max-frames 100); fi
    start=$(date +%s)
    out=$( (ulimit -v "$kib"; OPENBLAS_NUM_THREADS=16 timeout -s KILL 60 "${cmd[@]}") 2>&1); rc=$?
    took=$(($(date +%s) - start))
    if [ "$rc" -ne 137 ] && [ "$took" -lt 30 ] && { [ "$rc" -eq 0 ] || grep -q 'MiB' <<<"$out"; }; then ok
    else bad "$what under ulimit -v $kib: exit $rc after $took s (137: killed, it hung): $(tail -n 2 <<<"$out")"; fi
  done
done

# --- the CUDA plugin that cannot be loaded (a CUDA build only): an error
# from dstrain that says why, exit 1, never the loader's line or a signal
plugin=$(dirname "$bin")/libdstrain_cuda.so
if [ -e "$plugin" ]; then
  cuda_train=("$bin" train --model tiny --synthetic --steps 1 --batch 2 --max-frames 100 --device cuda)
  # too little address space for its libraries: the sizes and what to do
  out=$( (ulimit -v 640000; timeout -s KILL 60 "${cuda_train[@]}") 2>&1); rc=$?
  if [ "$rc" -eq 1 ] && grep -q 'ulimit -v' <<<"$out" && grep -q 'libcublasLt[^ ]* [0-9]* MiB' <<<"$out" &&
     grep -q -- '--device cpu' <<<"$out" && ! grep -q 'error while loading shared libraries' <<<"$out"; then ok
  else bad "--device cuda under ulimit -v 640000: exit $rc: $(tail -n 2 <<<"$out")"; fi
  out=$( (ulimit -v 640000; timeout -s KILL 60 "$bin" version) 2>&1); rc=$?
  if [ "$rc" -eq 0 ] && grep -q '^cuda: .*not loaded: .*address-space limit' <<<"$out" &&
     grep -q '^nccl: .*not loaded' <<<"$out"; then ok
  else bad "version under ulimit -v 640000: exit $rc: $(grep -E '^(cuda|nccl):' <<<"$out")"; fi
  # a plugin that is not this build's, one cut short, one that is not there
  zlib=$(ldd "$bin" | awk '/libz\.so/{print $3; exit}')
  out=$(DSTRAIN_CUDA_PLUGIN=$zlib "${cuda_train[@]}" 2>&1); rc=$?
  if [ "$rc" -eq 1 ] && grep -q 'another build' <<<"$out"; then ok
  else bad "DSTRAIN_CUDA_PLUGIN=libz: exit $rc: $(tail -n 1 <<<"$out")"; fi
  head -c 1000000 "$plugin" >cut.so
  out=$(DSTRAIN_CUDA_PLUGIN=$PWD/cut.so "${cuda_train[@]}" 2>&1); rc=$?
  if [ "$rc" -eq 1 ] && grep -q 'cut.so is cut short' <<<"$out" &&
     grep -q -- '--device cpu runs without it' <<<"$out"; then ok
  else bad "a plugin cut short: exit $rc (135: SIGBUS): $(tail -n 1 <<<"$out")"; fi
  head -c 40 "$plugin" >stub.so   # not even its ELF header: the loader's own words
  out=$(DSTRAIN_CUDA_PLUGIN=$PWD/stub.so "${cuda_train[@]}" 2>&1); rc=$?
  if [ "$rc" -eq 1 ] && grep -q 'cannot load the CUDA backend from .*stub.so: .*too short' <<<"$out"; then ok
  else bad "a plugin of 40 bytes: exit $rc: $(tail -n 1 <<<"$out")"; fi
  out=$(DSTRAIN_CUDA_PLUGIN=$PWD/none.so "${cuda_train[@]}" 2>&1); rc=$?
  if [ "$rc" -eq 1 ] && grep -q 'DSTRAIN_CUDA_PLUGIN=.*none.so: cannot read it' <<<"$out"; then ok
  else bad "DSTRAIN_CUDA_PLUGIN naming no file: exit $rc: $(tail -n 1 <<<"$out")"; fi
  # cuBLASLt's folder hidden (a private mount namespace, as root): the
  # library named with where the loader looked; the CPU path still runs
  libdir=$(ldd "$plugin" 2>/dev/null | awk '/libcublasLt/{print $3}')
  libdir=${libdir%/*}
  if [ -n "$libdir" ] && unshare -m true 2>/dev/null; then
    out=$(unshare -m sh -c 'mount -t tmpfs none "$1" && shift && exec "$@"' sh "$libdir" "${cuda_train[@]}" 2>&1); rc=$?
    if [ "$rc" -eq 1 ] && grep -q 'cannot open shared object file' <<<"$out" &&
       grep -q 'the dynamic loader did not find lib[a-zA-Z]*\.so' <<<"$out" &&
       grep -q 'LD_LIBRARY_PATH' <<<"$out"; then ok
    else bad "--device cuda with $libdir hidden: exit $rc: $(tail -n 1 <<<"$out")"; fi
    out=$(unshare -m sh -c 'mount -t tmpfs none "$1" && shift && exec "$@"' sh "$libdir" \
          "$bin" train --model tiny --synthetic --steps 1 --batch 2 --max-frames 100 2>&1); rc=$?
    if [ "$rc" -eq 0 ]; then ok
    else bad "the CPU path with $libdir hidden: exit $rc: $(tail -n 1 <<<"$out")"; fi
    # cuBLASLt cut short (an install that did not finish): named, no SIGBUS
    lt=$(readlink -f "$(ldd "$plugin" | awk '/libcublasLt/{print $3}')")
    head -c 1000000 "$lt" >cut-lt.so
    out=$(unshare -m sh -c 'mount --bind "$1" "$2" && shift 2 && exec "$@"' sh "$PWD/cut-lt.so" "$lt" \
          "${cuda_train[@]}" 2>&1); rc=$?
    if [ "$rc" -eq 1 ] && grep -q "libcublasLt.*is cut short" <<<"$out"; then ok
    else bad "--device cuda with cuBLASLt cut short: exit $rc (135: SIGBUS): $(tail -n 1 <<<"$out")"; fi
  else
    echo "note: the hidden-library cases need unshare -m (root): not run"
  fi
fi

# --- eval with nothing to score
"$py" - <<'EOF'
import math, struct, wave
for k in range(2):
    with wave.open(f"feat/blip{k}.wav", "wb") as w:
        w.setnchannels(1); w.setsampwidth(2); w.setframerate(16000)
        w.writeframes(b"".join(struct.pack("<h", int(3000 * math.sin(i * 0.1 * (k + 1)))) for i in range(900)))
open("feat/blips.csv", "w").write("".join(f"blip{k}.wav,far more words than a blip can carry\n" for k in range(2)))
# a float32 WAV (format 3) with one NaN and one infinity
n = 16000
x = [0.25 * math.sin(i * 0.07) for i in range(n)]
x[4000] = float("inf"); x[9000] = float("nan")
data = struct.pack(f"<{n}f", *x)
fmt = struct.pack("<HHIIHH", 3, 1, 16000, 16000 * 4, 4, 32)
body = b"WAVE" + b"fmt " + struct.pack("<I", len(fmt)) + fmt + b"data" + struct.pack("<I", len(data)) + data
open("feat/bad-float.wav", "wb").write(b"RIFF" + struct.pack("<I", len(body)) + body)
EOF
"$bin" prep manifest feat/blips.csv --out blips.h5 --quiet >/dev/null 2>&1
out=$("$bin" eval --checkpoint "$ckpt" --data blips.h5 2>&1); rc=$?
if [ "$rc" -ne 0 ] && grep -q 'nothing to score' <<<"$out" && ! grep -q '^WER' <<<"$out"; then ok
else bad "eval with every utterance too short: exit $rc: $out"; fi

# --- transcribe of non-finite audio
out=$("$bin" transcribe --checkpoint "$ckpt" feat/bad-float.wav 2>&1); rc=$?
if [ "$rc" -ne 0 ] && grep -q 'bad-float.wav' <<<"$out" && grep -qE 'NaN|infinite' <<<"$out"; then ok
else bad "transcribe of a WAV with inf/NaN samples: exit $rc: $out"; fi

# --- a newline in a --train path: the recorded options keep one data= line
nl=$'data\nfingerprint'
mkdir -p "$nl"
cp tones.h5 "$nl/t.h5"
"$bin" train --model tiny --train "$nl/t.h5" --steps 1 --batch 2 --checkpoint-dir cknl >/dev/null 2>&1
# the run's options are a string attribute: its bytes are in the file as they are
cfg=$(strings cknl/step-*.h5 2>/dev/null)
if grep -q 'data=.*data\\nfingerprint/t.h5' <<<"$cfg" && ! grep -q '^fingerprint/t.h5' <<<"$cfg"; then ok
else bad "a newline in --train: recorded options: $(grep -a -A1 'data=' <<<"$cfg" | head -4)"; fi

# --- a folder name that is not UTF-8: the log's lines are JSON
odd=$'ck-\xe9t\xe9'
"$bin" train --model tiny --synthetic --steps 2 --batch 2 --max-frames 100 --checkpoint-every 1 \
  --checkpoint-dir "$odd" --log "$odd.jsonl" >/dev/null 2>&1
if [ -s "$odd.jsonl" ] && "$py" -c '
import json, sys
lines = open(sys.argv[1], "rb").read().decode("utf-8").splitlines()
ck = [json.loads(l) for l in lines if "checkpoint" in json.loads(l)]
assert ck and all("\ufffd" in c["checkpoint"] for c in ck), ck' "$odd.jsonl" 2>/dev/null; then ok
else bad "log with a Latin-1 folder name: not JSON: $(head -c 300 "$odd.jsonl" | od -c | grep -m2 '\\')"; fi

# --- configs
cat > dup.json <<'EOF'
{"name": "twice", "n_features": 161,
 "conv": [{"channels": 8, "kernel_time": 5, "kernel_freq": 11, "stride_freq": 2}],
 "rnn": {"type": "gru", "hidden": 32, "layers": 1, "hidden": 64}}
EOF
out=$("$bin" info ./dup.json 2>&1); rc=$?
if [ "$rc" -ne 0 ] && grep -q 'dup.json' <<<"$out" && grep -q 'rnn.hidden' <<<"$out"; then ok
else bad "a config key twice: exit $rc: $out"; fi
cat > narrow.json <<'EOF'
{"name": "narrow", "n_features": 40,
 "conv": [{"channels": 8, "kernel_time": 5, "kernel_freq": 21, "stride_freq": 2},
          {"channels": 8, "kernel_time": 5, "kernel_freq": 11}],
 "rnn": {"type": "gru", "hidden": 32, "layers": 1}}
EOF
out=$("$bin" info ./narrow.json 2>&1); rc=$?
out2=$("$bin" train --config narrow.json --synthetic --steps 1 2>&1); rc2=$?
if [ "$rc" -ne 0 ] && grep -q 'conv\[1\].kernel_freq' <<<"$out" && [ "$rc2" -ne 0 ] && grep -q 'kernel_freq' <<<"$out2"; then ok
else bad "a conv layer wider than its bins: info exit $rc ($out), train exit $rc2"; fi

# --- an empty path
for opt in --log --checkpoint-dir; do
  out=$("$bin" train --model tiny --synthetic --steps 1 --batch 2 --max-frames 100 "$opt" '' 2>&1); rc=$?
  if [ "$rc" -eq 2 ] && grep -q -- "$opt" <<<"$out" && grep -q 'empty' <<<"$out"; then ok
  else bad "train $opt '': exit $rc: $out"; fi
done
out=$("$bin" prep manifest feat/ok.csv --out '' 2>&1); rc=$?
if [ "$rc" -eq 2 ] && grep -q -- '--out' <<<"$out"; then ok; else bad "prep --out '': exit $rc: $out"; fi

# --- garbage in the job scripts' variables
for case in "train.sbatch NODES=2nodes GPUS_PER_NODE=8" "train-mpirun.sbatch GPUS_PER_NODE=eight NODES=2" \
            "train.sbatch DSTRAIN_BATCH=-4 SLURM_JOB_ID=7" "sweep.sh DSTRAIN_SWEEP_MIN=one"; do
  read -r script assign1 assign2 <<<"$case"
  var=${assign1%%=*}
  out=$(env -u SLURM_JOB_ID $assign1 ${assign2:-} bash "$repo/jobs/slurm/$script" 2>&1); rc=$?
  if [ "$rc" -ne 0 ] && grep -q "$var=" <<<"$out" && grep -q 'whole number' <<<"$out" && ! grep -q unbound <<<"$out"; then ok
  else bad "$script with $assign1: exit $rc: $out"; fi
done
out=$(NTASKS=two DSTRAIN="$bin" bash "$repo/jobs/mpiexec/train.sh" 2>&1); rc=$?
if [ "$rc" -ne 0 ] && grep -q 'NTASKS=two' <<<"$out"; then ok; else bad "mpiexec/train.sh NTASKS=two: exit $rc: $out"; fi
mkdir -p fakebin
printf '#!/bin/sh\necho "$@" >> %s/requeued\n' "$work" > fakebin/scontrol
chmod +x fakebin/scontrol
out=$(PATH=$work/fakebin:$PATH SLURM_JOB_ID=42 SLURM_RESTART_COUNT=3 DSTRAIN_MAX_REQUEUES=five bash -c '
  set -uo pipefail; . "$1/jobs/slurm/preempt.sh"; run_preemptible launcher sh -c "exit 75"' _ "$repo" 2>&1); rc=$?
if [ "$rc" -ne 0 ] && [ ! -e requeued ] && grep -q 'DSTRAIN_MAX_REQUEUES=five' <<<"$out"; then ok
else bad "preempt.sh with DSTRAIN_MAX_REQUEUES=five: exit $rc, requeued: $(cat requeued 2>/dev/null): $out"; fi

# --- a 4000-character path: the reason shows
long=$work
while [ ${#long} -lt 3900 ]; do long=$long/$(printf 'd%.0s' {1..200}); done
mkdir -p "$long"
out=$("$bin" train --model tiny --train "$long/missing-features.h5" --steps 1 2>&1); rc=$?
reason=$("$bin" train --model tiny --train "$work/missing-features.h5" --steps 1 2>&1 |
         grep -m1 'missing-features.h5' | sed 's/.*missing-features.h5//' | head -c 40)
if [ "$rc" -ne 0 ] && [ -n "$reason" ] && grep -qF -- "$reason" <<<"$out" && grep -q 'missing-features.h5' <<<"$out"; then ok
else bad "a 4000-character path: exit $rc, reason '$reason' lost: ...${out: -200}"; fi

# --- manifests in other encodings
iconv -f UTF-8 -t UTF-16 feat/ok.csv > feat/wide.csv
printf 'tone0.wav,na\xefve caf\xe9\n' > feat/latin.csv
out=$("$bin" prep manifest feat/wide.csv --out w.h5 --quiet 2>&1); rc=$?
if [ "$rc" -ne 0 ] && grep -q 'wide.csv' <<<"$out" && grep -q 'UTF-16' <<<"$out"; then ok
else bad "a UTF-16 manifest: exit $rc: $out"; fi
out=$("$bin" prep manifest feat/latin.csv --out l.h5 --quiet 2>&1); rc=$?
if [ "$rc" -ne 0 ] && grep -q 'latin.csv:1' <<<"$out" && grep -q 'not UTF-8' <<<"$out"; then ok
else bad "a Latin-1 manifest: exit $rc: $out"; fi

# --- info on a torch.save file, whatever its name
"$bin" export --pytorch "$ckpt" exported.pt >/dev/null 2>&1
cp exported.pt ./weights
out=$("$bin" info ./weights 2>&1); rc=$?
if [ "$rc" -eq 0 ] && grep -q 'PyTorch state_dict' <<<"$out" && grep -q 'dstrain import' <<<"$out"; then ok
else bad "info on a .pt: exit $rc: $out"; fi

echo "limits_messages: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
