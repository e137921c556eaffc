#!/usr/bin/env bash
# `dstrain prep --verify FILE` and `dstrain info FILE` check a feature file
# end to end (issue 13): a real file of three tones made by `dstrain prep`
# verifies; each damaged copy is refused (exit 1) with a message naming the
# file, the dataset and, where there is one, the utterance. Damage comes in
# two kinds: bytes flipped under HDF5 (caught by the Fletcher32 checksums,
# or for an attribute by the attributes' CRC-32) and contents rewritten through h5py, which writes valid checksums, so that
# only the consistency checks themselves can catch them.
# usage: test_verify_features.sh DSTRAIN PYTHON   (PYTHON with h5py and numpy)
set -uo pipefail
bin=$(readlink -f "$1") py=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
. "$(dirname "$0")/../lib/checks.sh"

if ! "$py" -c 'import h5py, numpy' 2>/dev/null; then
  echo "test_verify_features: SKIP: $py cannot import h5py and numpy (Debian: python3-h5py)"
  exit 77
fi

# --- a real feature file: three noisy one-second tones through the real prep
"$py" "$(dirname "$0")/../lib/tones.py" "$work"
good="$work/good.h5"
if ! "$bin" prep manifest "$work/ok.csv" --out "$good" --quiet >/dev/null 2>&1; then
  echo "FAIL: prep of three tones" >&2
  echo "test_verify_features: 0 passed, 1 failed"
  exit 1
fi

# accepted NAME COMMAND...: exit 0 and a "verified: FILE" line
accepted() {
  local name=$1; shift
  local out rc; out=$("$@" 2>&1); rc=$?
  if [ "$rc" -eq 0 ] && grep -q "^verified: .*good.h5: 3 utterances" <<<"$out"; then ok
  else bad "$name: exit $rc, wanted 0 and \"verified:\": $out"; fi
}
accepted "prep --verify good" "$bin" prep --verify "$good"
accepted "info good" "$bin" info "$good"
if grep -q "^utterances   3$" <<<"$("$bin" info "$good" 2>/dev/null)"; then ok
else bad "info no longer describes the feature file before verifying it"; fi
if "$bin" prep --help | grep -q -- "--verify FILE"; then ok
else bad "prep --help does not list --verify"; fi
out=$("$bin" prep --verify "$good" manifest "$work/ok.csv" 2>&1); rc=$?
if [ "$rc" -eq 2 ] && grep -q "takes no corpus" <<<"$out"; then ok
else bad "prep --verify with a corpus: exit $rc: $out"; fi

# damage KIND: $work/KIND.h5, a copy of the good file damaged by python
damage() {
  cp "$good" "$work/$1.h5"
  "$py" - "$work/$1.h5" "$1" <<'PY' || echo "FAIL: damaging $1" >&2
import sys, h5py, numpy as np
path, kind = sys.argv[1], sys.argv[2]
def flip(dataset, at, bit):   # one stored byte, the HDF5 structure untouched
    with h5py.File(path, "r") as f:
        off = f[dataset].id.get_chunk_info(0).byte_offset
    with open(path, "r+b") as g:
        g.seek(off + at); b = g.read(1); g.seek(off + at); g.write(bytes([b[0] ^ bit]))
def rewrite(name, change):    # through HDF5: the checksum stays valid
    with h5py.File(path, "r+") as f:
        a = f[name][()]; change(a, f); f[name][...] = a
if kind == "flip_features":   # a low mantissa bit of one float16: still finite
    flip("features", 1001, 0x04)
elif kind == "flip_labels":   # 'L' (13) -> 'K' (12): still a letter
    flip("labels", 2, 0x01)
elif kind == "truncated":
    with open(path, "r+b") as g:
        g.truncate(g.seek(0, 2) // 2)
elif kind == "overlap":       # utterance 1 starts inside utterance 0, still inside /features
    rewrite("utterances/frame_offset", lambda a, f: a.__setitem__(1, a[0] + 40))
elif kind == "past_end":      # utterance 2 starts at the end of /features
    rewrite("utterances/frame_offset", lambda a, f: a.__setitem__(2, f["features"].shape[0]))
elif kind == "label_text":    # a valid label that no longer spells the transcript
    rewrite("labels", lambda a, f: a.__setitem__(f["utterances/label_offset"][1] + 4, 2))   # 'A' 
elif kind == "nan":           # utterance 2, frame 3, feature 7
    rewrite("features", lambda a, f: a.__setitem__((f["utterances/frame_offset"][2] + 3, 7), np.nan))
elif kind == "flip_attr":     # the lowest mantissa bit of window_stride_s: still a valid stride
    with h5py.File(path, "r") as f:
        raw = np.float64(f.attrs["window_stride_s"]).tobytes()
    data = open(path, "rb").read()
    at = data.find(raw)
    assert at >= 0 and data.find(raw, at + 1) < 0, "window_stride_s is not in the file once"
    with open(path, "r+b") as g:
        g.seek(at); g.write(bytes([data[at] ^ 0x01]))
elif kind == "stats":         # mean and sum agree with each other, not with /features
    with h5py.File(path, "r+") as f:
        n = f["stats/count"][0]
        m = f["stats/mean"][()]; m[5] += 1; f["stats/mean"][...] = m
        s = f["stats/sum"][()]; s[5] += n; f["stats/sum"][...] = s
PY
}
# refused NAME WHAT TEXT...: WHAT (prep or info) exits 1, says each TEXT, no
# HDF5 diagnostics
refused() {
  local name=$1 what=$2; shift 2
  local out rc
  if [ "$what" = prep ]; then out=$("$bin" prep --verify "$work/$name.h5" 2>&1); rc=$?
  else out=$("$bin" info "$work/$name.h5" 2>&1); rc=$?; fi
  local said=1; for t in "$@"; do grep -q -- "$t" <<<"$out" || said=0; done
  if [ "$rc" -eq 1 ] && [ "$said" = 1 ] && ! grep -q "HDF5-DIAG\|minor:" <<<"$out"; then ok
  else bad "$what $name: exit $rc, wanted 1 and \"$*\": $out"; fi
}
damage flip_features
refused flip_features prep "flip_features.h5: dataset /features: rows \[0, 64) unreadable" \
  "Fletcher32" "utterance 0 (id tone0)"
refused flip_features info "flip_features.h5: dataset /features" "Fletcher32"
damage flip_labels
refused flip_labels prep "flip_labels.h5: dataset /labels: elements \[0, 33) of 33 unreadable" \
  "Fletcher32"
refused flip_labels info "flip_labels.h5: dataset /labels" "Fletcher32"
damage truncated
refused truncated prep "truncated.h5: HDF5 cannot open it: truncated file" "truncated, damaged or locked"
refused truncated info "truncated.h5: HDF5 cannot open it: truncated file"
damage overlap
refused overlap prep "overlap.h5: dataset /utterances/frame_offset: utterance 1 (id tone1) rows \[40, 141) overlap utterance 0 (id tone0) rows \[0, 101) of /features"
refused overlap info "overlap.h5: dataset /utterances/frame_offset: utterance 1 (id tone1)"
damage past_end
refused past_end prep "past_end.h5: utterances/frame_offset: utterance 2 (tone2) offsets past the end"
damage label_text
refused label_text prep "label_text.h5: dataset /utterances/transcript: utterance 1 (id tone1) reads \"HELLO WORLD\" but its /labels entries \[11, 22) spell \"HELLA WORLD\" (they differ at character 4)"
damage nan
refused nan prep "nan.h5: dataset /features: utterance 2 (id tone2) frame 3 feature 7 is nan"
refused nan info "nan.h5: dataset /features: utterance 2 (id tone2) frame 3 feature 7 is nan"
damage flip_attr
refused flip_attr prep "flip_attr.h5: attributes: checksum mismatch (corrupted)"
refused flip_attr info "flip_attr.h5: attributes: checksum mismatch (corrupted)"
damage stats
refused stats prep "stats.h5: dataset /stats/mean: feature 5 is .* but the mean of /features is"

# --- not a feature file at all
printf 'audio_path,transcript\n' > "$work/text.h5"
refused text prep "text.h5: not an HDF5 file"
refused text info "text.h5: not an HDF5 file"
refused missing prep "missing.h5: No such file or directory"
refused missing info "missing.h5: No such file or directory"

echo "test_verify_features: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
