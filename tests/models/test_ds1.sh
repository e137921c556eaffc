#!/usr/bin/env bash
# DS1 (Mozilla DeepSpeech v0.2.0's graph) on the CPU: ds1-small trains on
# synthetic data with its loss falling; dropout is on, and a run resumed
# from a checkpoint draws the masks the uninterrupted run drew (the same
# parameters bit for bit); the ds1 preset has the published size; configs
# with bad fields are refused naming the field.
# usage: test_ds1.sh DSTRAIN WORKDIR PYTHON
set -uo pipefail
. "$(dirname "$0")/family_checks.sh" "$@"   # bin, work (the current folder), py, here

# ---- trains: 300 synthetic steps, the last 50 losses well below the first 10
trains_on_synthetic ds1-small

# ---- dropout on, resumed exactly: 6 steps at once against 3 then 3 resumed
resumes_exactly ds1-small fc_pre

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
