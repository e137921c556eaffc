#!/usr/bin/env bash
# Sets up and runs the whole test suite (ctest): unit and gradient checks,
# the PyTorch peer checks, CTC vectors, training and CLI tests; then the
# sanitizer build of the unit tests and the fuzzers.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
# the GPU machine's library bundle, so bundle_cpu_build proves it on every run
[ -f .gpu-bundle/env.sh ] || scripts/gpu-bundle.sh
ctest --test-dir "${BUILD_DIR:-build}" --output-on-failure -j "$(nproc)"
# The unit tests again under ASan and UBSan (build-asan/), then each fuzz
# harness for a bounded time over its corpus (build-fuzz/; skipped, saying
# why, without clang's libFuzzer): README "Sanitizers and fuzzing".
scripts/sanitize.sh
rc=0
scripts/fuzz.sh "${FUZZ_SECONDS:-20}" || rc=$?
[ "$rc" -eq 0 ] || [ "$rc" -eq 77 ] || exit "$rc"
