#!/usr/bin/env bash
# Sets up and runs the whole test suite (ctest): unit and gradient checks,
# the PyTorch peer checks, CTC vectors, training and CLI tests.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
# the GPU machine's library bundle, so bundle_cpu_build proves it on every run
[ -f .gpu-bundle/env.sh ] || scripts/gpu-bundle.sh
ctest --test-dir "${BUILD_DIR:-build}" --output-on-failure -j "$(nproc)"
