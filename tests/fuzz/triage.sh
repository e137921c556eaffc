#!/usr/bin/env bash
# Replays inputs that made a harness fail and says whose bug each is. HDF5
# (Debian's 1.10, not instrumented) has bugs of its own on damaged files:
# overreads, leaks on error paths, huge allocations from corrupt sizes.
# Those are listed, not counted: an input is HDF5's when every stack in its
# report (the access, and the allocation and free of the memory involved, or
# each leak) reaches HDF5 before any code of ours, and UBSan said nothing.
# Memory of ours overrun by HDF5 (a buffer we passed too small) is ours.
# Blind spot: memory HDF5 hands us to free (variable-length strings) and
# we do not free counts as HDF5's leak.
# usage: tests/fuzz/triage.sh HARNESS_BINARY INPUT...
#   prints "ours INPUT: the error", "hdf5 INPUT: ..." or "unreproduced
#   INPUT" (it failed only after other inputs: not counted, as no report is
#   left to say whose) per input; exit 1 when any is ours
set -uo pipefail
bin=$1
shift
ours=0
scratch=$(mktemp -d)   # where libFuzzer writes the replay's own copy of the input
trap 'rm -rf "$scratch"' EXIT
for input in "$@"; do
  # three times: HDF5's cache carries state from one run of an input to the next
  report=$("$bin" -runs=3 -rss_limit_mb=2048 -malloc_limit_mb=1024 -timeout=10 \
    -artifact_prefix="$scratch/" "$input" 2>&1)
  if [ $? -eq 0 ]; then
    echo "unreproduced $input: did not fail again on its own (it needs the inputs before it)"
    continue
  fi
  # each stack: its first frame in our code (a source line) or in HDF5 decides;
  # runtime, libFuzzer and libc frames are passed over
  verdict=$(awk '
    /runtime error:|located in stack of thread/ { mine = 1 }
    /^ *#[0-9]+ / {
      if (!decided) {
        if ($0 ~ /libhdf5/) { decided = 1 }
        else if ($0 ~ /\.c:[0-9]+/) { decided = 1; mine = 1 }
      }
      stacks = 1
      next
    }
    { decided = 0 }
    END { print (mine || !stacks) ? "ours" : "hdf5" }' <<<"$report")
  what=$(grep -m1 -E 'ERROR: |runtime error:|SUMMARY:' <<<"$report" | sed 's/^==[0-9]*==//')
  echo "$verdict $input: $what"
  [ "$verdict" = hdf5 ] || ours=1
done
exit $ours
