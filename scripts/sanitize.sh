#!/usr/bin/env bash
# Builds the library and the C tests (tests/*/test_*.c) with
# AddressSanitizer (leaks included) and UndefinedBehaviorSanitizer, every
# finding fatal, CUDA off, into build-asan/, and runs them: ctest -R '^test_'.
# Leaks inside the libraries we link are suppressed by name in
# tests/sanitize/lsan.supp; never one of ours.
# usage: scripts/sanitize.sh [CTEST_ARGS...]   SANITIZE_BUILD_DIR (build-asan), CC
set -euo pipefail
cd "$(dirname "$0")/.."
build=${SANITIZE_BUILD_DIR:-build-asan}
start=$(date +%s)
log=$(mktemp)
trap 'rm -f "$log"' EXIT

echo "sanitize: building the unit tests with -fsanitize=address,undefined in $build"
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDSTRAIN_CUDA=OFF -DDSTRAIN_SANITIZE=ON \
  >"$log" || { cat "$log"; exit 1; }
# test_step_alloc counts heap allocations by putting its own malloc in
# front of glibc's, which is where ASan's must be: it cannot run here.
excluded=test_step_alloc
targets=()
for src in tests/unit/test_*.c tests/data/test_*.c; do
  name=$(basename "$src" .c)
  [ "$name" = "$excluded" ] || targets+=("$name")
done
# test_config_limits runs `dstrain info` on its configs: the binary too
cmake --build "$build" -j "$(nproc)" --target "${targets[@]}" dstrain >"$log" 2>&1 \
  || { tail -50 "$log"; exit 1; }

# halt on the first error of any kind, with a stack; LeakSanitizer at exit.
# (Not detect_stack_use_after_return: its fake frames are 32-byte aligned,
# and gcc stores the CPU ops' 64-byte vectors in them with aligned moves.)
export ASAN_OPTIONS="detect_leaks=1:strict_string_checks=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
export LSAN_OPTIONS="suppressions=$PWD/tests/sanitize/lsan.supp:print_suppressions=0${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
built=$(date +%s)
rc=0
ctest --test-dir "$build" -R '^test_' -E "^${excluded}\$" --output-on-failure -j "$(nproc)" "$@" || rc=$?
echo "sanitize: build $((built - start)) s, tests $(($(date +%s) - built)) s"
exit "$rc"
