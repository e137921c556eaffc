#!/usr/bin/env bash
# Sets up and runs the whole test suite (ctest): unit and gradient checks,
# the PyTorch peer checks, CTC vectors, training and CLI tests; then the
# sanitizer build of the unit tests and the fuzzers.
#
# usage: scripts/test.sh [--all]
#   --all   also the slow tier (ctest label `slow`: tests of many minutes on a
#           2-core machine that CI leaves out to stay within its time; today
#           model_families_learn, the Jasper, Wav2Letter+ and DS1 graphs each
#           learning the mini corpus). Their gradients and ops are checked in
#           the default tier. `ctest --test-dir build -L slow` runs them alone.
set -euo pipefail
cd "$(dirname "$0")/.."
tier=(-LE '^slow$')
case "${1:-}" in
  --all) tier=() ;;
  "") ;;
  -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
  *) echo "scripts/test.sh: unknown option $1 (--all, --help)" >&2; exit 2 ;;
esac
scripts/build.sh
# the GPU machine's library bundle, so bundle_cpu_build proves it on every run
[ -f .gpu-bundle/env.sh ] || scripts/gpu-bundle.sh
ctest --test-dir "${BUILD_DIR:-build}" --output-on-failure -j "$(nproc)" "${tier[@]}"
# The unit tests again under ASan and UBSan (build-asan/), then each fuzz
# harness for a bounded time over its corpus (build-fuzz/; skipped, saying
# why, without clang's libFuzzer, but not in CI, where build.sh has just
# installed it): docs/tests.md, "Sanitizers and fuzzing".
scripts/sanitize.sh
rc=0
scripts/fuzz.sh "${FUZZ_SECONDS:-20}" || rc=$?
if [ "$rc" -eq 77 ] && [ -n "${CI:-}" ]; then
  echo "test.sh: fuzzing was skipped in CI, where clang and libFuzzer are installed: failing" >&2
  exit 1
fi
[ "$rc" -eq 0 ] || [ "$rc" -eq 77 ] || exit "$rc"
