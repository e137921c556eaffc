#!/usr/bin/env bash
# f16_switches.sh - the switches that decide where the GPU's 16-bit gradients
# part from FP64 (issue 34, item 6: model_gpu_vs_cpu_f16 and _bf16 fail on an
# H100 while every op's 16-bit parity holds and the CPU's 16-bit emulation
# stays within the bound). test_model_gpu_vs_cpu's built-in cases on BACKEND
# under each switch, one at a time; per run its worst gradient error and its
# three worst tensors:
#   baseline                          as the test runs
#   fp32 rnn / conv / rnn,conv        that op family in FP32 inside the 16-bit
#                                     model (DSTRAIN_CUDA_FP32_OPS, cuda only)
#   lengths sorted / equal            each batch longest first / every
#                                     utterance the padded length
#   default math                      cuDNN's default math for 16-bit data, not
#                                     tensor ops (DSTRAIN_CUDNN_NARROW_MATH)
#   loss scale 1 / 64 / 16384         float16's static scale
#   launch blocking                   CUDA_LAUNCH_BLOCKING=1 (a race between
#                                     streams would change the numbers)
#   initcheck                         compute-sanitizer --tool initcheck: a
#                                     read of memory never written
# and the CPU's emulation on the same cases as the yardstick; then the
# model's rnn.1 taken out with its real inputs and run alone (test_rnn_rerun,
# beside TEST_MODEL_GPU_VS_CPU): the GPU and the emulation against FP64 with
# the lengths as drawn, sorted and equal, cuDNN's default math and the FP32
# op. A record for the
# results' README, not a verdict: exit 0 unless the test binary is missing.
#
# usage: tests/gpu/f16_switches.sh TEST_MODEL_GPU_VS_CPU [BACKEND [DTYPES]]
#        BACKEND default cuda; DTYPES default "float16 bfloat16"
#        F16_SWITCH_TIMEOUT: seconds per run (default 120);
#        F16_SWITCH_INITCHECK=0 leaves compute-sanitizer out (a slow run)
set -uo pipefail
bin=${1:?usage: f16_switches.sh TEST_MODEL_GPU_VS_CPU [BACKEND [DTYPES]]}
backend=${2:-cuda}
dtypes=${3:-float16 bfloat16}
limit=${F16_SWITCH_TIMEOUT:-120}
[ -x "$bin" ] || { echo "f16_switches: $bin is not a program"; exit 2; }

# one run: LABEL DTYPE ENV...: the test's worst and its three worst tensors
# (RUN_BACKEND: another backend than BACKEND)
run() {
  local label=$1 dt=$2 out
  shift 2
  out=$(timeout -k 5 "$limit" env "$@" "$bin" "${RUN_BACKEND:-$backend}" "$dt" 2>&1)
  local rc=$?
  local worst tensors
  worst=$(grep -E '^  worst gradient error' <<<"$out" | awk '{ print $NF }' | tr '\n' ' ')
  tensors=$(grep -E '^  grad ' <<<"$out" | grep -v 'true value 0' | sort -g -k4 -r | head -3 |
            awk '{ printf "%s %s; ", $2, $4 }')
  printf '| %s | %s | %s | %s | %s |\n' "$label" "$dt" "${worst:-none}" "${tensors:-}" \
    "$([ $rc -eq 0 ] && echo pass || { [ $rc -eq 124 ] && echo "timed out" || echo "fail ($rc)"; })"
}

echo "| switch | dtype | worst gradient error per case | three worst tensors (all cases) | result |"
echo "|---|---|---|---|---|"
for dt in $dtypes; do
  run "baseline" "$dt" X=0
  [ "$backend" != cpu ] && RUN_BACKEND=cpu run "cpu emulation (yardstick)" "$dt" X=0
  if [ "$backend" = cuda ]; then
    run "fp32 rnn" "$dt" DSTRAIN_CUDA_FP32_OPS=rnn
    run "fp32 conv" "$dt" DSTRAIN_CUDA_FP32_OPS=conv
    run "fp32 rnn,conv" "$dt" DSTRAIN_CUDA_FP32_OPS=rnn,conv
    run "default math" "$dt" DSTRAIN_CUDNN_NARROW_MATH=default
    run "launch blocking" "$dt" CUDA_LAUNCH_BLOCKING=1
  fi
  run "lengths sorted" "$dt" DSTRAIN_TEST_LENGTHS=sorted
  run "lengths equal" "$dt" DSTRAIN_TEST_LENGTHS=equal
  if [ "$dt" = float16 ]; then
    for s in 1 64 16384; do run "loss scale $s" "$dt" DSTRAIN_TEST_LOSS_SCALE=$s; done
  fi
done
rerun=$(dirname "$bin")/test_rnn_rerun
if [ -x "$rerun" ]; then
  for dt in $dtypes; do
    echo
    echo "rnn.1 alone, $dt:"
    timeout -k 5 "$limit" "$rerun" "$backend" "$dt" 2>&1 | grep -vE '^[^ ]*: [0-9]+ passed' | sed 's/^/    /'
  done
else
  echo; echo "rnn.1 alone: $rerun is not built"
fi
if [ "$backend" = cuda ] && [ "${F16_SWITCH_INITCHECK:-1}" != 0 ]; then
  san=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
  if [ -n "$san" ]; then
    out=$(timeout -k 5 "$((limit * 3))" "$san" --tool initcheck --error-exitcode 9 "$bin" "$backend" float16 2>&1)
    rc=$?
    printf '| initcheck | float16 | %s | | %s |\n' \
      "$(grep -cE 'Uninitialized|ERROR SUMMARY: [1-9]' <<<"$out") reports" \
      "$([ $rc -eq 9 ] && echo "uninitialised reads (log below)" || echo "rc $rc")"
    [ $rc -eq 9 ] && { echo; grep -E 'Uninitialized|at |by thread' <<<"$out" | head -40; }
  else
    echo "| initcheck | float16 | compute-sanitizer not found | | not run |"
  fi
fi
exit 0
