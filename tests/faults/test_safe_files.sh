#!/usr/bin/env bash
# Files that cannot be turned against their owner (issue 26, first part),
# each case as a user of a shared scratch or checkpoint folder could meet
# it, against real writers on real files:
# - links planted at the temporary names writers once used (OUT.h5.tmp,
#   OUT.h5.new, OUT.h5.new.tmp, step-N.h5.tmp, bench's OUT.tmp) leave their
#   target untouched, and the output is a regular file;
# - a link swapped in for every temporary file while prep writes: the target
#   stays untouched and the output never becomes a link;
# - a --log that is a symbolic link to a file is refused, naming it (one to
#   a stream, /dev/stdout, is followed);
# - an output that is one of the command's inputs, by any name, is refused
#   and the input kept: train --log over --train, prep --out over its
#   manifest, export and import onto their own input;
# - two runs in one checkpoint folder: the second is refused, naming the
#   first's host and process; once the first is gone, --resume auto goes on;
# - a WAV shorter than its header says is refused (prep names it); a UTF-8
#   byte order mark before a manifest's first line is dropped; a log that
#   takes no writes reports the system's reason; audio past --max-duration
#   is refused by prep and transcribe, naming its length; transcribe
#   escapes a newline in a file name; a config's fc_hidden of 2e9 is
#   refused with its bound; info of a folder or a device says what it is,
#   as dstrain info; a manifest line repeated is refused by prep naming
#   the id, and a file with one id twice is reported by --verify; features
#   of another kind of the same width are refused by train --val and eval;
#   an index claiming 60 million utterances of a 0.4 MB file is refused
#   before it is allocated; a state_dict tensor viewing 4 elements of a
#   20-million-float deflated storage is refused before it is read; a
#   resume on other data of the same utterance count is refused (its
#   content fingerprint), on a copy in another folder accepted; a file
#   made to look like version 1 (seal removed) is named as unsealed by
#   --verify and train.
# usage: test_safe_files.sh DSTRAIN PYTHON
set -uo pipefail
bin=$(readlink -f "$1") py=$2
. "$(dirname "$0")/../lib/checks.sh"
scratch_and_pids

victim=$work/victim
printf "the user's own file\n" > "$victim"
vsum=$(sha256sum < "$victim")
victim_kept() { [ "$(sha256sum < "$victim")" = "$vsum" ] && [ ! -L "$victim" ]; }
regular() { [ -f "$1" ] && [ ! -L "$1" ]; }

mkdir -p "$work/feat"
"$py" "$(dirname "$0")/../lib/tones.py" "$work/feat"
cd "$work/feat" || exit 1

# --- prep: links at the old temporary names
for n in out.h5.tmp out.h5.new out.h5.new.tmp; do ln -s "$victim" "$n"; done
out=$("$bin" prep manifest ok.csv --out out.h5 --quiet 2>&1); rc=$?
if [ "$rc" -eq 0 ] && victim_kept && regular out.h5 && "$bin" info out.h5 >/dev/null 2>&1; then ok
else bad "prep beside planted links: exit $rc, victim kept: $(victim_kept && echo yes || echo no), out.h5: $(ls -l out.h5): $out"; fi
rm -f out.h5.tmp out.h5.new out.h5.new.tmp

# --- prep while every new temporary file is swapped for a link
( while :; do
    for f in "$work"/feat/*.tmp; do
      [ -e "$f" ] && [ ! -L "$f" ] && rm -f "$f" && ln -s "$victim" "$f"
    done
  done ) &
pids+=($!)
swapper=$!
for k in 1 2 3 4 5; do
  "$bin" prep manifest ok.csv --out raced.h5 --quiet >"$work/raced.out" 2>&1
  rc=$?
  if ! victim_kept || [ -L raced.h5 ]; then break; fi
done
kill "$swapper" 2>/dev/null; wait "$swapper" 2>/dev/null
if victim_kept && [ ! -L raced.h5 ]; then ok
else bad "prep with its temporary files swapped for links: victim kept: $(victim_kept && echo yes || echo no), raced.h5: $(ls -l raced.h5 2>&1): $(cat "$work/raced.out")"; fi
echo "prep racing a link-swapper: last exit $rc ($(head -c 200 "$work/raced.out"))"
rm -f ./*.tmp

# --- train: links at step-N.h5.tmp and the log's; checkpoints are regular files
mkdir -p "$work/ck"
for s in 2 4; do ln -s "$victim" "$work/ck/$(printf 'step-%08d.h5.tmp' "$s")"; done
out=$("$bin" train --model tiny --synthetic --steps 4 --checkpoint-every 2 --print-every 0 \
        --checkpoint-dir "$work/ck" 2>&1); rc=$?
if [ "$rc" -eq 0 ] && victim_kept && regular "$work/ck/step-00000004.h5" && \
   "$bin" info "$work/ck/step-00000004.h5" 2>&1 | grep -q "^verified:"; then ok
else bad "train beside planted step-N.h5.tmp links: exit $rc: $out"; fi

# --- a --log that is a link is refused
ln -s "$victim" "$work/log.jsonl"
out=$("$bin" train --model tiny --synthetic --steps 2 --print-every 0 --log "$work/log.jsonl" 2>&1); rc=$?
if [ "$rc" -ne 0 ] && victim_kept && grep -q "symbolic link" <<<"$out"; then ok
else bad "train --log LINK: exit $rc, victim kept: $(victim_kept && echo yes || echo no): $out"; fi

# --- a --log that is a link to a stream (/dev/stdout) is followed: the
# JSON lines come out
out=$("$bin" train --model tiny --synthetic --steps 2 --print-every 0 --log /dev/stdout 2>&1); rc=$?
if [ "$rc" -eq 0 ] && grep -q '^{"step":' <<<"$out"; then ok
else bad "train --log /dev/stdout: exit $rc: $out"; fi

# --- bench --out with a link at the old temporary name
ln -s "$victim" "$work/bj.json.tmp"
out=$("$bin" bench --model tiny --steps 2 --warmup 1 --out "$work/bj.json" 2>&1); rc=$?
if [ "$rc" -eq 0 ] && victim_kept && regular "$work/bj.json"; then ok
else bad "bench --out beside a planted link: exit $rc: $out"; fi

# --- outputs over inputs, by the same name and by another (a hard link)
cp out.h5 x.h5
ln x.h5 x-again.h5
xsum=$(sha256sum < x.h5)
for log in x.h5 x-again.h5 ./x.h5; do
  out=$("$bin" train --model tiny --train x.h5 --steps 1 --log "$log" 2>&1); rc=$?
  if [ "$rc" -ne 0 ] && [ "$(sha256sum < x.h5)" = "$xsum" ] && grep -q "refusing to write over an input" <<<"$out"; then ok
  else bad "train --train x.h5 --log $log: exit $rc, x.h5 changed: $([ "$(sha256sum < x.h5)" = "$xsum" ] && echo no || echo yes): $out"; fi
done
msum=$(sha256sum < ok.csv)
out=$("$bin" prep manifest ok.csv --out ok.csv --quiet 2>&1); rc=$?
if [ "$rc" -ne 0 ] && [ "$(sha256sum < ok.csv)" = "$msum" ] && grep -q "refusing to write over an input" <<<"$out"; then ok
else bad "prep manifest ok.csv --out ok.csv: exit $rc: $out"; fi
csum=$(sha256sum < "$work/ck/step-00000004.h5")
out=$("$bin" export --pytorch "$work/ck/step-00000004.h5" "$work/ck/step-00000004.h5" 2>&1); rc=$?
if [ "$rc" -ne 0 ] && [ "$(sha256sum < "$work/ck/step-00000004.h5")" = "$csum" ] && \
   grep -q "refusing to write over an input" <<<"$out"; then ok
else bad "export onto its own checkpoint: exit $rc: $out"; fi
if "$bin" export --pytorch "$work/ck/step-00000004.h5" "$work/m.pt" >/dev/null 2>&1; then
  psum=$(sha256sum < "$work/m.pt")
  out=$("$bin" import --pytorch "$work/m.pt" "$work/m.pt" --model tiny 2>&1); rc=$?
  if [ "$rc" -ne 0 ] && [ "$(sha256sum < "$work/m.pt")" = "$psum" ] && \
     grep -q "refusing to write over an input" <<<"$out"; then ok
  else bad "import onto its own state_dict: exit $rc: $out"; fi
else bad "export --pytorch to m.pt failed"; fi

# --- a WAV whose header promises 3.79 s and holds 30 ms is refused, named,
# not prepped as a 3-frame utterance with the whole transcript
"$py" - "$work/feat" <<'PY'
import math, struct, sys, wave
d = sys.argv[1]
with wave.open(f"{d}/long.wav", "wb") as w:
    w.setnchannels(1); w.setsampwidth(2); w.setframerate(16000)
    w.writeframes(b"".join(struct.pack("<h", int(3000 * math.sin(i / 9))) for i in range(60640)))
data = open(f"{d}/long.wav", "rb").read()
open(f"{d}/cut.wav", "wb").write(data[:44 + 960])
PY
printf 'tone0.wav,hello world\ncut.wav,the whole transcript of a long utterance\n' > cut.csv
out=$("$bin" prep manifest cut.csv --out cut.h5 2>&1); rc=$?
if [ "$rc" -eq 0 ] && grep -q "cut.wav: truncated: its header says 121280 bytes" <<<"$out" && \
   grep -q "wrote 1 utterances" <<<"$out"; then ok
else bad "a truncated WAV: exit $rc: $out"; fi

# --- audio past --max-duration is refused, named, with its length, before
# its memory is taken; transcribe escapes a newline in a file name
printf 'long.wav,a long one\ntone0.wav,hello world\n' > long.csv
out=$("$bin" prep manifest long.csv --out long.h5 --max-duration 2 2>&1); rc=$?
if [ "$rc" -eq 0 ] && grep -q "long.wav: 3.8 s of audio, longer than --max-duration 2 s" <<<"$out" && \
   grep -q "wrote 1 utterances" <<<"$out"; then ok
else bad "prep --max-duration 2: exit $rc: $out"; fi
if "$bin" train --model tiny --train out.h5 --steps 1 --print-every 0 --checkpoint-dir "$work/tck" \
     >/dev/null 2>&1; then
  tck=$(ls "$work"/tck/step-*.h5 | tail -1)
  out=$("$bin" transcribe --checkpoint "$tck" --max-duration 2 long.wav 2>&1); rc=$?
  if [ "$rc" -ne 0 ] && grep -q "long.wav: 3.8 s of audio, longer than --max-duration 2 s" <<<"$out"; then ok
  else bad "transcribe --max-duration 2: exit $rc: $out"; fi
  cp tone0.wav "$(printf 'two\nlines.wav')"
  out=$("$bin" transcribe --checkpoint "$tck" "$(printf 'two\nlines.wav')" 2>/dev/null); rc=$?
  if [ "$rc" -eq 0 ] && [ "$(wc -l <<<"$out")" -eq 1 ] && grep -q '^two\\nlines.wav	' <<<"$out"; then ok
  else bad "transcribe of a name with a newline: exit $rc: $out"; fi
else bad "train on out.h5 for the transcribe checks failed"; fi

# --- a UTF-8 byte order mark before a manifest's first line is not part of its path
printf '\xef\xbb\xbftone1.wav,hello world\n' > bom.csv
out=$("$bin" prep manifest bom.csv --out bom.h5 2>&1); rc=$?
if [ "$rc" -eq 0 ] && grep -q "wrote 1 utterances" <<<"$out"; then ok
else bad "a manifest opening with a BOM: exit $rc: $out"; fi

# --- a log that takes no writes says the system's reason, not a guess
out=$("$bin" train --model tiny --synthetic --steps 2 --print-every 0 --log /proc/version 2>&1); rc=$?
if [ "$rc" -ne 0 ] && grep -Eq "/proc/version: (writing the metrics log failed|cannot open the metrics log for writing): " <<<"$out" && \
   ! grep -q "disk full" <<<"$out"; then ok
else bad "--log /proc/version: exit $rc: $out"; fi

# --- a manifest line repeated is refused by prep, naming the id; a file
# holding one id twice is reported by --verify
printf 'tone0.wav,hello world\ntone1.wav,hello world\ntone0.wav,hello world\ntone0.wav,hello world\n' > dup.csv
out=$("$bin" prep manifest dup.csv --out dup.h5 2>&1); rc=$?
if [ "$rc" -ne 0 ] && grep -q "utterance id .*tone0.* appears 3 times" <<<"$out" && [ ! -e dup.h5 ]; then ok
else bad "prep of a manifest with a line repeated: exit $rc: $out"; fi
cp out.h5 dupid.h5
"$py" - dupid.h5 <<'PY'
import sys, h5py
with h5py.File(sys.argv[1], "r+") as f:
    ids = f["utterances/id"]
    ids[1] = ids[0]
PY
out=$("$bin" prep --verify dupid.h5 2>&1); rc=$?
if [ "$rc" -eq 1 ] && grep -q "/utterances/id: id .* is given to more than one utterance" <<<"$out"; then ok
else bad "--verify of a file with one id twice: exit $rc: $out"; fi

# --- features of another kind of the same width (log-mel 26 against MFCC
# 26) are refused by train --val and eval, naming both
"$bin" prep manifest ok.csv --out mel.h5 --features log-mel --n-mels 26 --quiet >/dev/null 2>&1
"$bin" prep manifest ok.csv --out mfcc.h5 --features mfcc --n-mfcc 26 --quiet >/dev/null 2>&1
printf '{"name":"w26","n_features":26,"conv":[{"channels":4,"kernel_time":5,"kernel_freq":5,"stride_time":2,"stride_freq":2,"pad_time":2,"pad_freq":2}],"rnn":{"type":"gru","hidden":8,"layers":1},"fc_hidden":[]}' > "$work/w26.json"
out=$("$bin" train --config "$work/w26.json" --train mel.h5 --val mfcc.h5 --steps 1 --print-every 0 2>&1); rc=$?
if [ "$rc" -ne 0 ] && grep -q "mfcc.h5: features mfcc, 26 per frame.*mel.h5: log-mel, 26 per frame.*not the same kind" <<<"$out"; then ok
else bad "train --val of another feature kind: exit $rc: $out"; fi
if "$bin" train --config "$work/w26.json" --train mel.h5 --steps 1 --print-every 0 \
     --checkpoint-dir "$work/mck" >/dev/null 2>&1; then
  mck=$(ls "$work"/mck/step-*.h5 | tail -1)
  out=$("$bin" eval --checkpoint "$mck" --data mfcc.h5 2>&1); rc=$?
  if [ "$rc" -ne 0 ] && grep -q "not the same kind" <<<"$out" && ! grep -q "^WER" <<<"$out"; then ok
  else bad "eval on features of another kind: exit $rc: $out"; fi
  out=$("$bin" eval --checkpoint "$mck" --data mel.h5 2>&1); rc=$?
  if [ "$rc" -eq 0 ] && grep -q "^WER" <<<"$out"; then ok
  else bad "eval on the training file's kind: exit $rc: $out"; fi
else bad "train on mel.h5 failed"; fi

# --- a 0.2 MB feature file whose index claims 20 million utterances (uint8
# and 1-byte strings on disk, sparse: within the 256 x file size any one
# dataset may claim) is refused before its index is allocated (1.6 GB in
# memory), naming the claim
cp out.h5 claim.h5
"$py" - claim.h5 <<'PY'
import sys, h5py
with h5py.File(sys.argv[1], "r+") as f:
    g = f["utterances"]
    for name in list(g.keys()):
        kind = g[name].dtype.kind
        del g[name]
        g.create_dataset(name, shape=(20_000_000,), dtype="S1" if kind == "O" else "u1",
                         chunks=(65536,))
PY
out=$("$bin" info claim.h5 2>&1); rc=$?
if [ "$rc" -ne 0 ] && grep -q "claim.h5: /utterances claims 20000000 utterances, .* MiB of index in memory" <<<"$out"; then ok
else bad "a file claiming 20M utterances: exit $rc: $out"; fi

# --- sizes a config can dictate are bounded where it is read; messages name
# the command that was run and what the argument is
printf '{"name":"x","conv":[{"channels":4,"kernel_time":5,"kernel_freq":7}],"rnn":{"type":"gru","hidden":8,"layers":1},"fc_hidden":[2000000000]}' > "$work/big.json"
out=$("$bin" train --config "$work/big.json" --synthetic --steps 1 2>&1); rc=$?
if [ "$rc" -ne 0 ] && grep -q "^dstrain train: .*fc_hidden\[0\] must be an integer in 1..65536" <<<"$out"; then ok
else bad "fc_hidden of 2e9: exit $rc: $out"; fi
for arg in "$work" /dev/zero; do
  out=$("$bin" info "$arg" 2>&1); rc=$?
  if [ "$rc" -ne 0 ] && grep -q "^dstrain info: .*$arg: \(a directory\|not a regular file\), not a model config" <<<"$out"; then ok
  else bad "info $arg: exit $rc: $out"; fi
done

# --- resume holds the data to its content, whatever its name: other
# recordings or transcripts of the same count are refused; the same file
# copied into another folder resumes
printf 'tone0.wav,hello there\ntone1.wav,another text\ntone2.wav,and a third\n' > other.csv
"$bin" prep manifest other.csv --out other.h5 --quiet >/dev/null 2>&1
mkdir -p "$work/copy" && cp out.h5 "$work/copy/out.h5"
"$bin" train --model tiny --train out.h5 --steps 2 --print-every 0 --batch 1 \
  --checkpoint-dir "$work/rck" >/dev/null 2>&1
out=$("$bin" train --model tiny --train other.h5 --steps 4 --print-every 0 --batch 1 \
        --checkpoint-dir "$work/rck" --resume auto 2>&1); rc=$?
if [ "$rc" -ne 0 ] && grep -q "data_fingerprint: [0-9a-f]\{8\} in the checkpoint, [0-9a-f]\{8\} now" <<<"$out"; then ok
else bad "resume on other data of the same utterance count: exit $rc: $out"; fi
out=$("$bin" train --model tiny --train "$work/copy/out.h5" --steps 4 --print-every 0 --batch 1 \
        --checkpoint-dir "$work/rck" --resume auto 2>&1); rc=$?
if [ "$rc" -eq 0 ] && grep -q "resumed from" <<<"$out"; then ok
else bad "resume on the same data in another folder: exit $rc: $out"; fi

# --- a file with its attribute seal removed, version set to 1 and its
# stride changed is no longer taken silently: --verify and train say its
# settings carry no checksum
cp out.h5 forged.h5
"$py" - forged.h5 <<'PY'
import sys, h5py
with h5py.File(sys.argv[1], "r+") as f:
    del f.attrs["attributes_crc32"]
    f.attrs["version"] = 1
    f.attrs["window_stride_s"] = 0.02
PY
out=$("$bin" prep --verify forged.h5 2>&1); rc=$?
if grep -q "note: a version 1 file: its attributes .* carry no checksum" <<<"$out"; then ok
else bad "--verify of a forged version 1 file: exit $rc: $out"; fi
out=$("$bin" train --model tiny --train forged.h5 --steps 1 --batch 1 --print-every 0 2>&1); rc=$?
if grep -q "warning: forged.h5: a version 1 feature file" <<<"$out"; then ok
else bad "train on a forged version 1 file: exit $rc: $out"; fi

# --- a state_dict whose tensor is a small view of a large deflated storage
# is refused before the storage is read
if [ -f "$work/m.pt" ]; then
  "$py" - "$work/m.pt" "$work/view.pt" <<'PY'
import sys, zipfile, torch
d = torch.load(sys.argv[1])
k = next(k for k, v in d.items() if v.dtype == torch.float32 and v.numel() > 0)
d[k] = torch.zeros(20_000_000)[: d[k].numel()].view(d[k].shape)   # keeps the whole storage
torch.save(d, sys.argv[2] + ".stored")
with zipfile.ZipFile(sys.argv[2] + ".stored") as zin, \
     zipfile.ZipFile(sys.argv[2], "w", zipfile.ZIP_DEFLATED) as zout:
    for item in zin.infolist():
        zout.writestr(item.filename, zin.read(item.filename))
PY
  out=$("$bin" import --pytorch "$work/view.pt" "$work/view.h5" --model tiny 2>&1); rc=$?
  if [ "$rc" -ne 0 ] && grep -q "holds 20000000 elements, its tensors reach .* refused" <<<"$out" && \
     [ ! -e "$work/view.h5" ]; then ok
  else bad "import of a small view of a large storage: exit $rc: $out"; fi
fi

# --- two runs in one checkpoint folder
mkdir -p "$work/shared"
DSTRAIN_FAULT=slow:0:1-100000 "$bin" train --model tiny --synthetic --steps 100000 \
  --checkpoint-every 1000 --print-every 0 --checkpoint-dir "$work/shared" >"$work/first.out" 2>&1 &
first=$!
pids+=("$first")
for _ in $(seq 100); do grep -q "process $first" "$work/shared/.dstrain.lock" 2>/dev/null && break; sleep 0.1; done
out=$("$bin" train --model tiny --synthetic --steps 2 --print-every 0 --checkpoint-dir "$work/shared" 2>&1); rc=$?
if [ "$rc" -ne 0 ] && grep -q "another run holds this checkpoint directory" <<<"$out" && \
   grep -q "process $first" <<<"$out" && grep -q "host $(hostname)" <<<"$out"; then ok
else bad "a second run in a held checkpoint folder: exit $rc: $out"; fi
out=$("$bin" train --model tiny --synthetic --steps 2 --print-every 0 --checkpoint-dir "$work/shared" \
        --resume auto 2>&1); rc=$?
if [ "$rc" -ne 0 ] && grep -q "another run holds" <<<"$out"; then ok
else bad "--resume auto in a held checkpoint folder: exit $rc: $out"; fi
kill -9 "$first" 2>/dev/null; wait "$first" 2>/dev/null
out=$("$bin" train --model tiny --synthetic --steps 2 --print-every 0 --checkpoint-dir "$work/shared" \
        --resume auto 2>&1); rc=$?
if [ "$rc" -eq 0 ]; then ok
else bad "after the holder was killed, the folder stayed locked: exit $rc: $out"; fi

echo "test_safe_files: $pass passed, $fail failed"; [ "$fail" -eq 0 ]
