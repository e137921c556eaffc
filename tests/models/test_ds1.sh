#!/usr/bin/env bash
# DS1 (Mozilla DeepSpeech v0.2.0's graph) on the CPU: ds1-small trains on
# synthetic data with its loss falling; dropout is on, and a run resumed
# from a checkpoint draws the masks the uninterrupted run drew (the same
# parameters bit for bit); the ds1 preset has the published size; configs
# with bad fields are refused naming the field.
# usage: test_ds1.sh DSTRAIN WORKDIR PYTHON
set -uo pipefail
bin=$(realpath "$1") work=$2 py=$3
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib/checks.sh"
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1

# ---- trains: 300 synthetic steps, the last 50 losses well below the first 10
"$bin" train --model ds1-small --synthetic --steps 300 --lr 1e-3 --print-every 100 \
  --log train.jsonl >train.out 2>&1 || bad "training failed: $(tail -3 train.out)"
read -r first last < <("$py" - train.jsonl <<'PY'
import json, sys
l = [r["loss"] for r in map(json.loads, open(sys.argv[1])) if "loss" in r and "checkpoint" not in r]
print(sum(l[:10]) / 10, sum(l[-50:]) / 50)
PY
)
echo "ds1-small: mean loss of steps 1-10 $first, of steps 251-300 $last"
if awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < 0.5 * a) }'; then ok
else bad "loss did not fall to half: $first -> $last"; fi

# ---- dropout on, resumed exactly: 6 steps at once against 3 then 3 resumed
common=(--model ds1-small --synthetic --print-every 0 --checkpoint-every 3)
"$bin" train "${common[@]}" --steps 6 --checkpoint-dir once >/dev/null 2>&1 || bad "6 steps"
"$bin" train "${common[@]}" --steps 3 --checkpoint-dir twice >/dev/null 2>&1 || bad "3 steps"
"$bin" train "${common[@]}" --steps 6 --checkpoint-dir twice --resume auto >resume.out 2>&1 ||
  bad "resume: $(tail -2 resume.out)"
sed 's/"dropout": 0.05/"dropout": 0/' "$here/../../configs/ds1-small.json" >nodrop.json
"$bin" train --config nodrop.json --synthetic --print-every 0 --steps 6 --checkpoint-every 3 \
  --checkpoint-dir nodrop >/dev/null 2>&1 || bad "6 steps without dropout"
if "$py" - <<'PY'
import h5py, sys
def data(path):
    f, out = h5py.File(path, "r"), {}
    f.visititems(lambda n, o: out.__setitem__(n, o[()].tobytes()) if isinstance(o, h5py.Dataset) else None)
    return out
a, b, c = data("once/step-00000006.h5"), data("twice/step-00000006.h5"), data("nodrop/step-00000006.h5")
params = [n for n in a if n.startswith("params/")] or list(a)
same = a == b
differs = any(a[n] != c.get(n) for n in params)
print("resumed: %d datasets, %s; without dropout the parameters %s" % (
    len(a), "identical" if same else "DIFFERENT", "differ" if differs else "are the SAME"))
sys.exit(0 if same and differs else 1)
PY
then ok; else bad "resume with dropout not exact, or dropout had no effect"; fi

# ---- exported and imported back, it records DS1's inputs: 26 MFCC
"$bin" export --pytorch once/step-00000006.h5 ds1.pt >/dev/null 2>&1 || bad "export"
"$bin" import --pytorch ds1.pt imported.h5 --model ds1-small >import.out 2>&1 || bad "import: $(cat import.out)"
if "$bin" info imported.h5 2>&1 | grep -q "features mfcc (26)"; then ok
else bad "imported DS1 checkpoint does not record 26 MFCC: $("$bin" info imported.h5 2>&1 | head -1)"; fi

# ---- the preset's size: v0.2.0's count, 47,224,861 with TensorFlow's one LSTM
# bias, plus the second bias vector (4 x 2048) that PyTorch's and cuDNN's LSTM keep
n=$("$bin" info ds1 | sed -nE 's/^model ds1: ([0-9]+) parameters/\1/p')
if [ "$n" = 47233053 ]; then ok; else bad "ds1 has $n parameters, not 47233053"; fi

# ---- bad fields refused, named
refused() {   # refused NAME JSON PATTERN
  echo "$2" >"bad-$1.json"
  if "$bin" info "bad-$1.json" >"bad-$1.out" 2>&1; then bad "$1: accepted"
  elif grep -qE "$3" "bad-$1.out"; then ok
  else bad "$1: message does not name it: $(cat "bad-$1.out")"; fi
}
rnn='"rnn":{"type":"lstm","hidden":8,"layers":1,"bidirectional":false}'
refused misspelt "{\"n_features\":26,\"contxt\":9,\"fc_pre\":[8],$rnn}" "contxt is not a field"
refused context-conv "{\"n_features\":26,\"context\":9,\"conv\":[{\"channels\":2,\"kernel_time\":3,\"kernel_freq\":3}],$rnn}" "context .*takes no conv layers"
refused dropout "{\"n_features\":26,\"context\":9,\"dropout\":1.5,$rnn}" "dropout must be a number in \[0, 0.95\]"
refused output "{\"n_features\":26,\"context\":9,\"output\":{\"bias\":true,\"norm\":false},$rnn}" "output.norm is not a field"
refused fc_pre "{\"n_features\":26,\"fc_pre\":[8,0],$rnn}" "fc_pre\[1\] must be an integer"
refused rnn-field "{\"n_features\":26,\"context\":2,\"rnn\":{\"type\":\"lstm\",\"hidden\":8,\"layers\":1,\"bidir\":true}}" "rnn.bidir is not a field"
refused no-input "{\"n_features\":26,$rnn}" "conv must be an array"
refused dropout-nowhere "{\"n_features\":26,\"context\":2,\"dropout\":0.1,$rnn}" "dropout 0.1 follows FC layers"

echo "test_ds1: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
