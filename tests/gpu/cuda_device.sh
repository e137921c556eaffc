# cuda_device.sh - sourced by the GPU shell tests.
# require_cuda_device DSTRAIN: returns when `DSTRAIN --version` shows a usable
# CUDA device; otherwise prints "skipped: no CUDA device (...)" and exits 77,
# which ctest reports as skipped (SKIP_RETURN_CODE 77). A binary that cannot
# even print its version fails the test (exit 1) instead.
require_cuda_device() {
  local version
  if ! version=$("$1" --version 2>&1); then
    echo "FAIL: $1 --version failed: $version" >&2
    exit 1
  fi
  case $version in
    *"cuda not built"* | *"backend not built"*)
      echo "skipped: no CUDA device (this dstrain has no CUDA backend)"; exit 77 ;;
    *"no CUDA device visible"*)
      echo "skipped: no CUDA device (none visible)"; exit 77 ;;
  esac
}
