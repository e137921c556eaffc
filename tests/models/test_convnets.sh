#!/usr/bin/env bash
# The convolution-only families on the CPU: jasper-small and w2l-small train
# on synthetic data with their losses falling; dropout on every conv layer,
# and a run resumed from a checkpoint draws the masks the uninterrupted run
# drew (the same parameters bit for bit); exported to PyTorch and imported
# back, a Jasper checkpoint records log-mel inputs; the Jasper and
# Wav2Letter+ presets have the published configs' sizes; configs with bad
# fields are refused naming the field.
# usage: test_convnets.sh DSTRAIN WORKDIR PYTHON
set -uo pipefail
. "$(dirname "$0")/family_checks.sh" "$@"   # bin, work (the current folder), py, here

# ---- trains: 300 synthetic steps, the last 50 losses well below the first 10
trains_on_synthetic jasper-small
trains_on_synthetic w2l-small

# ---- dropout on every conv layer, resumed exactly: 6 steps at once against
# 3 then 3 resumed (the residual branches' tensors among the parameters)
resumes_exactly jasper-small .res.

# ---- exported and imported back, it records Jasper's inputs: log-mel of its width
"$bin" export --pytorch once/step-00000006.h5 jasper.pt >/dev/null 2>&1 || bad "export"
"$bin" import --pytorch jasper.pt imported.h5 --model jasper-small >import.out 2>&1 ||
  bad "import: $(cat import.out)"
if "$bin" info imported.h5 2>&1 | grep -q "features log-mel (40)"; then ok
else bad "imported Jasper checkpoint does not record 40 log-mel: $("$bin" info imported.h5 2>&1 | head -1)"; fi

# ---- the presets' sizes: what the published configs give (docs/models.md
# says how each is counted: convs without bias, BatchNorm's weight and bias,
# the residual 1x1 convs and their BatchNorm, the output conv with its bias)
for want in jasper-10x5:322286877 jasper-10x5-dr:332632349 jasper-10x3:200500509 \
            w2l-plus:106496285; do
  name=${want%%:*} count=${want#*:}
  n=$("$bin" info "$name" | sed -nE "s/^model $name: ([0-9]+) parameters/\1/p")
  if [ "$n" = "$count" ]; then ok; else bad "$name has $n parameters, not $count"; fi
done

# ---- bad fields refused, named
pro='{"channels":4,"kernel_time":3,"kernel_freq":8,"stride_time":2,"pad_time":1}'
same='"channels":4,"kernel_time":3,"kernel_freq":1,"pad_time":1'
refused activation "{\"n_features\":8,\"conv\":[$pro,{$same,\"activation\":\"gelu\"}]}" "conv\[1\].activation must be"
refused dilation "{\"n_features\":8,\"conv\":[$pro,{$same,\"dilation_time\":0}]}" "conv\[1\].dilation_time = 0 is outside"
refused misspelt "{\"n_features\":8,\"conv\":[$pro,{$same,\"dilaton_time\":2}]}" "conv\[1\].dilaton_time is not a field"
refused conv-dropout "{\"n_features\":8,\"conv\":[$pro,{$same,\"dropout\":1}]}" "conv\[1\].dropout must be a number in \[0, 0.95\]"
refused repeat "{\"n_features\":8,\"conv\":[$pro,{$same,\"repeat\":64}]}" "conv has more than 64 layers"
refused block-first "{\"n_features\":8,\"conv\":[{\"channels\":4,\"kernel_time\":3,\"kernel_freq\":8,\"block\":1}]}" "conv\[0\].block: the first layer"
refused block-split "{\"n_features\":8,\"conv\":[$pro,{$same,\"block\":1},{$same,\"block\":2},{$same,\"block\":1}]}" "conv\[3\].block 1: the layers of a block must be consecutive"
refused block-shape "{\"n_features\":8,\"conv\":[$pro,{\"channels\":4,\"kernel_time\":3,\"kernel_freq\":1,\"pad_time\":0,\"block\":1}]}" "conv\[1\] is inside a residual sum"
refused dense-noblock "{\"n_features\":8,\"dense_residual\":true,\"conv\":[$pro]}" "dense_residual needs residual blocks"
refused rnn-type "{\"n_features\":8,\"conv\":[$pro],\"rnn\":{\"type\":\"tcn\",\"hidden\":8,\"layers\":1}}" "rnn.type \"tcn\""

echo "test_convnets: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
