#!/usr/bin/env bash
# Builds the libFuzzer harnesses (tests/fuzz/: feature files, checkpoints,
# model configs, torch.save files and their pickles) with clang, AddressSanitizer and UBSan into build-fuzz/,
# replays each one's committed corpus (tests/fuzz/corpus/HARNESS/), fuzzes
# it for SECONDS and prints how many inputs it executed. Exits 1 on a bug of
# ours, leaving the input in build-fuzz/fuzz-crashes/HARNESS/ (once fixed,
# add it to the corpus: replayed on every run, it stays a regression test);
# HDF5's own bugs are listed, not failed on (tests/fuzz/triage.sh). Exits
# 77 (skipped), saying why, when clang or libFuzzer is missing.
# usage: scripts/fuzz.sh [SECONDS] [HARNESS...]   (20; dataset checkpoint config pickle pytorch audio)
#   FUZZ_BUILD_DIR (build-fuzz), FUZZ_SEED (a fixed seed; default: libFuzzer's own)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-20}
shift || true
harnesses=("$@")
[ ${#harnesses[@]} -gt 0 ] || harnesses=(dataset checkpoint config pickle pytorch audio)
build=${FUZZ_BUILD_DIR:-build-fuzz}
cc=${FUZZ_CC:-clang}
begin=$(date +%s)

# libFuzzer comes with clang's runtime (Debian: libclang-rt-14-dev): try it
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
echo 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { return 0; }' >"$probe/p.c"
if ! command -v "$cc" >/dev/null; then
  echo "fuzz: skipped: $cc not found (scripts/install-deps.sh installs clang)"; exit 77
fi
if ! "$cc" -fsanitize=fuzzer,address "$probe/p.c" -o "$probe/p" 2>"$probe/err"; then
  echo "fuzz: skipped: $cc cannot link libFuzzer ($(head -c 300 "$probe/err" | tr '\n' ' '))"
  exit 77
fi

echo "fuzz: building ${harnesses[*]} in $build"
CC=$cc cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDSTRAIN_CUDA=OFF \
  -DDSTRAIN_FUZZ=ON >"$probe/cmake.log" || { cat "$probe/cmake.log"; exit 1; }
targets=()
for h in "${harnesses[@]}"; do targets+=("fuzz_$h"); done
cmake --build "$build" -j "$(nproc)" --target "${targets[@]}" >"$probe/build.log" 2>&1 \
  || { tail -50 "$probe/build.log"; exit 1; }

# Fork mode with crashes ignored: a run goes on for its whole time after
# HDF5 falls over on a damaged file (it does, every few thousand inputs), and
# tests/fuzz/triage.sh then replays every input that failed and fails the
# run only for those that are bugs of ours. Full stacks (HDF5 has no frame
# pointers) for the triage and tests/sanitize/lsan.supp; one BLAS thread.
export LSAN_OPTIONS="suppressions=$PWD/tests/sanitize/lsan.supp:print_suppressions=0"
export ASAN_OPTIONS="fast_unwind_on_malloc=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
# each input is written to a file here (tmpfs); an input that crashes leaves its file
shm=/dev/shm
[ -w "$shm" ] || shm=${TMPDIR:-/tmp}
DSTRAIN_FUZZ_TMPDIR=$(mktemp -d "$shm/dstrain-fuzz.XXXXXX")
export DSTRAIN_FUZZ_TMPDIR
trap 'rm -rf "$probe" "$DSTRAIN_FUZZ_TMPDIR"' EXIT
echo "fuzz: built in $(($(date +%s) - begin)) s"
crashes=$build/fuzz-crashes
failed=0
for h in "${harnesses[@]}"; do
  corpus=tests/fuzz/corpus/$h
  work=$build/fuzz-work/$h   # new inputs go here; the committed corpus stays as it is
  log=$build/fuzz-$h.log
  rm -rf "$work" "${crashes:?}/$h"
  mkdir -p "$work" "$crashes/$h"
  start=$(date +%s)
  # first the committed corpus, each input once: fork mode below would pass
  # over an old crash quietly
  if ! "$build/tests/fuzz_$h" -runs=0 -artifact_prefix="$crashes/$h/" "$corpus" >"$log" 2>&1; then
    echo "fuzz: $h: FAILED replaying $corpus; the end of $log:"; tail -30 "$log"
    failed=1
    continue
  fi
  "$build/tests/fuzz_$h" -fork=1 -ignore_crashes=1 -ignore_ooms=1 -ignore_timeouts=1 \
    -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=1024 \
    ${FUZZ_SEED:+-seed="$FUZZ_SEED"} -artifact_prefix="$crashes/$h/" "$work" "$corpus" \
    >"$log" 2>&1 || true
  # the parent's last "#RUNS: cov: ..." line counts every child's executions
  runs=$(grep -Eo '^#[0-9]+: cov: [0-9]+' "$log" | tail -1 | sed -E 's/^#([0-9]+): cov: ([0-9]+)/\1 executions (coverage \2)/')
  found=$(find "$crashes/$h" -type f | sort)
  echo "fuzz: $h: ${runs:-? executions} in $(($(date +%s) - start)) s, corpus" \
       "$(ls "$corpus" | wc -l) + $(ls "$work" | wc -l) new, $(grep -c . <<<"$found") failing inputs"
  if ! grep -q 'INFO: exiting' "$log"; then
    echo "fuzz: $h: libFuzzer did not finish; the end of $log:"; tail -20 "$log"; failed=1
  elif [ -n "$found" ]; then
    # shellcheck disable=SC2086
    tests/fuzz/triage.sh "$build/tests/fuzz_$h" $found | sed "s|^|fuzz: $h: |" || failed=1
  fi
done
echo "fuzz: done in $(($(date +%s) - begin)) s"
[ "$failed" -eq 0 ] || { echo "fuzz: FAILED: inputs of ours above, in $crashes"; exit 1; }
