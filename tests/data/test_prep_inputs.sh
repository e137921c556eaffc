#!/usr/bin/env bash
# dstrain prep on bad corpora (each a clear error or a counted skip, never a
# crash), and parallel prep under mpiexec giving the same file as one rank.
# usage: test_prep_inputs.sh DSTRAIN MAKE_MINI WORKDIR
set -uo pipefail
bin=$1 make_mini=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
pass=0 fail=0
ok()  { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*" >&2; }
# expect NAME STATUS(0|1) PATTERN CMD...: exit status and output (stdout+stderr) matching PATTERN
expect() {
  local name=$1 want=$2 pattern=$3; shift 3
  "$@" >"$work/out" 2>&1; local rc=$?
  if [ "$want" -eq 0 ] && [ $rc -ne 0 ]; then bad "$name: exit $rc: $(tail -3 "$work/out")"; return; fi
  if [ "$want" -ne 0 ] && [ $rc -eq 0 ]; then bad "$name: exited 0"; return; fi
  if [ $rc -gt 2 ]; then bad "$name: crashed with status $rc"; return; fi
  if grep -Eq -- "$pattern" "$work/out"; then ok; else bad "$name: output lacks /$pattern/: $(tail -5 "$work/out")"; fi
}

MINI_TRAIN=24 MINI_DEV=4 MINI_TEST=4 bash "$make_mini" "$work/mini" >/dev/null || { echo "mini corpus failed"; exit 1; }
root=$work/mini/train
ids=$(cat "$root"/*/*/*.trans.txt | wc -l)

expect "missing directory" 1 "nothere: not a directory" "$bin" prep librispeech "$work/nothere" --out "$work/x.h5"
mkdir -p "$work/empty"
expect "no transcripts" 1 "no \*.trans.txt" "$bin" prep librispeech "$work/empty" --out "$work/x.h5"

# break a copy of the corpus in every way at once; each is skipped and counted
cp -r "$root" "$work/broken"
chapters=( $(ls -d "$work/broken"/*/*) )
trans() { ls "$1"/*.trans.txt; }
# 1. a transcript line whose audio is gone
first=$(head -1 "$(trans "${chapters[0]}")" | cut -d' ' -f1); rm "${chapters[0]}/$first.flac"
# 2. audio no transcript names (the whole transcript file of a chapter removed)
rm "$(trans "${chapters[1]}")"
orphans=$(ls "${chapters[1]}"/*.flac | wc -l)
# 3. truncated FLAC, 4. not audio, 5. wrong sample rate, 6. empty audio, from the other chapters
mapfile -t flacs < <(for c in "${chapters[@]:2}"; do ls "$c"/*.flac; done)
f=${flacs[0]}; head -c 3000 "$f" > "$f.cut" && mv "$f.cut" "$f"
echo "hello" > "${flacs[1]}"
sox -n -r 44100 -c 1 -b 16 "${flacs[2]}" synth 1 sine 440
sox -n -r 16000 -c 1 -b 16 "${flacs[3]}" trim 0 0
# 7. an unparsable line; 8. a transcript with nothing of the alphabet left
t=$(trans "$(dirname "${flacs[4]}")")
echo "LINE-WITHOUT-TEXT" >> "$t"
id4=$(basename "${flacs[4]}" .flac)
sed -i "s/^$id4 .*/$id4 123 %%%/" "$t"
expect "broken corpus is prepared" 0 "prep: wrote" "$bin" prep librispeech "$work/broken" --out "$work/broken.h5" --quiet
out=$(cat "$work/out")
grep -q "1 transcript lines without audio" <<<"$out" && ok || bad "missing audio not counted: $out"
grep -q "$orphans audio files without a transcript" <<<"$out" && ok || bad "orphan audio not counted: $out"
grep -q "1 bad lines" <<<"$out" && ok || bad "bad line not counted: $out"
grep -q "4 unreadable or unusable audio" <<<"$out" && ok || bad "bad audio not counted (truncated, not audio, 44.1 kHz, empty): $out"
grep -q "1 empty or rejected transcripts" <<<"$out" && ok || bad "empty transcript not counted: $out"
grep -q "sample rate 44100" <<<"$out" && ok || bad "wrong rate not explained: $out"
grep -q "'1'" <<<"$out" && ok || bad "unknown characters not reported: $out"
expect "broken file is valid" 0 "utterances" "$bin" info "$work/broken.h5"
expect "on-unknown error" 1 "$id4" "$bin" prep librispeech "$work/broken" --out "$work/e.h5" --on-unknown error --quiet
expect "on-unknown bad value" 2 "drop-char" "$bin" prep librispeech "$root" --out "$work/e.h5" --on-unknown maybe

# manifest: Mozilla style with header, and plain lines
{ echo "wav_filename,wav_filesize,transcript"
  flacs=("$root"/*/*/*.flac)
  for f in "${flacs[@]:0:5}"; do echo "$f,$(stat -c %s "$f"),hello world"; done; } > "$work/m.csv"
expect "manifest" 0 "wrote 5 utterances" "$bin" prep manifest "$work/m.csv" --out "$work/m.h5" --quiet
echo "no-such.flac,hello" > "$work/bad.csv"
expect "manifest without usable lines" 1 "no usable" "$bin" prep manifest "$work/bad.csv" --out "$work/m2.h5" --quiet

# round trip: the file gives back exactly each transcript line and each frame count
# (1 + samples / 160 for the default 10 ms stride at 16 kHz, centred frames)
for f in "$root"/*/*/*.flac; do echo "$(basename "$f" .flac) $(soxi -s "$f")"; done | sort > "$work/samples.txt"
cat "$root"/*/*/*.trans.txt | sort > "$work/trans.txt"
expect "round trip prep" 0 "wrote $ids utterances" "$bin" prep librispeech "$root" --out "$work/rt.h5" --quiet
if /usr/bin/python3 - "$work/rt.h5" "$work/trans.txt" "$work/samples.txt" <<'PY'
import sys, h5py
f = h5py.File(sys.argv[1], "r")
ids = [x.decode() for x in f["utterances/id"][:]]
text = dict(zip(ids, (x.decode() for x in f["utterances/transcript"][:])))
frames = dict(zip(ids, f["utterances/frames"][:].tolist()))
want_text = dict(l.rstrip("\n").split(" ", 1) for l in open(sys.argv[2]))
want_frames = {i: 1 + int(n) // 160 for i, n in (l.split() for l in open(sys.argv[3]))}
bad = [i for i in want_text if text.get(i) != want_text[i] or frames.get(i) != want_frames[i]]
sys.exit(1 if bad or len(ids) != len(want_text) else 0)
PY
then ok; else bad "round trip: transcripts or frame counts differ from the corpus"; fi

# parallel prep gives the same file content as one rank
expect "one rank" 0 "wrote $ids utterances" "$bin" prep librispeech "$root" --out "$work/one.h5" --quiet --threads 1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
expect "two ranks" 0 "wrote $ids utterances" mpiexec -np 2 "$bin" prep librispeech "$root" --out "$work/two.h5" --quiet
for ds in features utterances/frames utterances/frame_offset utterances/label_length labels utterances/id stats/mean; do
  if h5diff "$work/one.h5" "$work/two.h5" "/$ds" >/dev/null 2>&1; then ok; else bad "1 vs 2 ranks differ in /$ds"; fi
done
ls "$work"/two.h5.part-* >/dev/null 2>&1 && bad "part files left behind" || ok

echo "test_prep_inputs: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
