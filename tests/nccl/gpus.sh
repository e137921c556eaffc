# gpus.sh - sourced by the NCCL shell tests.
# require_gpus DSTRAIN N: returns when this dstrain has the NCCL transport and
# `DSTRAIN --version` shows at least N CUDA devices; otherwise prints
# "skipped: ..." and exits 77, which ctest reports as skipped. NCCL refuses
# two ranks on one GPU, so N ranks need N GPUs (ctest -L multi-gpu runs the
# tests that need more than one). A binary that cannot print its version
# fails the test (exit 1).
require_gpus() {
  local version n
  if ! version=$("$1" --version 2>&1); then
    echo "FAIL: $1 --version failed: $version" >&2
    exit 1
  fi
  case $version in
    *"nccl:     not built"*)
      echo "skipped: no CUDA device (this dstrain has no NCCL transport)"; exit 77 ;;
    *"cuda not built"* | *"backend not built"*)
      echo "skipped: no CUDA device (this dstrain has no CUDA backend)"; exit 77 ;;
    *"no CUDA device visible"*)
      echo "skipped: no CUDA device (none visible)"; exit 77 ;;
  esac
  n=$(sed -n 's/^gpu: *\([0-9][0-9]*\) device.*/\1/p' <<<"$version")
  if [ "${n:-0}" -lt "$2" ]; then
    echo "skipped: $2 ranks need $2 GPUs (NCCL refuses two ranks on one GPU), ${n:-0} visible"
    exit 77
  fi
}
