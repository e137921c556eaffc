#!/usr/bin/env bash
# model_variants.sh - which layer a 16-bit difference between a backend and
# the CPU's FP64 comes from: test_model_gpu_vs_cpu on variants of its GRU
# model (each with one feature taken away or changed), in float16 and
# bfloat16, printing each variant's gradient errors and its worst. Run it
# with BACKEND cpu too: the CPU's emulated 16-bit tables on the same
# parameters and batch are the yardstick.
#
# usage: tests/gpu/model_variants.sh TEST_MODEL_GPU_VS_CPU [BACKEND [CASE_INDEX]]
#        BACKEND default cuda; CASE_INDEX (default 0): the parameters and
#        batch of the test's built-in case of that index (1: the GRU's)
set -uo pipefail
bin=${1:?usage: model_variants.sh TEST_MODEL_GPU_VS_CPU [BACKEND]}
backend=${2:-cuda}
export DSTRAIN_TEST_CASE_INDEX=${3:-0}
conv='"conv":[{"channels":4,"kernel_time":5,"kernel_freq":7,"stride_time":2,"stride_freq":2,"pad_time":2,"pad_freq":3},{"channels":3,"kernel_time":3,"kernel_freq":3,"stride_time":1,"stride_freq":1,"pad_time":1,"pad_freq":1}]'
model() {   # RNN_JSON FC_HIDDEN
  printf '{"name":"variant","n_features":32,"n_classes":29,%s,"rnn":%s,"fc_hidden":%s,"bn_eps":1e-5,"bn_momentum":0.1}' \
    "$conv" "$1" "$2"
}
variants=(
  "gru uni + lookahead + fc (the test's)|$(model '{"type":"gru","hidden":22,"layers":2,"bidirectional":false,"lookahead":3}' '[18]')"
  "gru uni, no lookahead|$(model '{"type":"gru","hidden":22,"layers":2,"bidirectional":false}' '[18]')"
  "gru uni + lookahead, no hidden fc|$(model '{"type":"gru","hidden":22,"layers":2,"bidirectional":false,"lookahead":3}' '[]')"
  "gru bidirectional|$(model '{"type":"gru","hidden":22,"layers":2,"bidirectional":true}' '[18]')"
  "lstm uni + lookahead + fc|$(model '{"type":"lstm","hidden":22,"layers":2,"bidirectional":false,"lookahead":3}' '[18]')"
  "gru uni + lookahead, 1 layer|$(model '{"type":"gru","hidden":22,"layers":1,"bidirectional":false,"lookahead":3}' '[18]')"
)
for dt in float16 bfloat16; do
  for v in "${variants[@]}"; do
    echo "== $dt: ${v%%|*}"
    "$bin" "$backend" "$dt" "${v#*|}" 2>&1 | grep -E '^  (grad|logits|worst)' | grep -v '(\* true value 0'
  done
done
echo "== float16 with loss scale 1: the test's model"
DSTRAIN_TEST_LOSS_SCALE=1 "$bin" "$backend" float16 "${variants[0]#*|}" 2>&1 | grep -E '^  (grad|worst)' | grep -v '(\* true value 0'
