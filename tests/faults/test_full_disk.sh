#!/usr/bin/env bash
# A checkpoint directory on a filesystem that fills: the save that does not
# fit is a clear error naming the file and the reason (no crash at exit, as
# HDF5 once gave when its close failed), the previous checkpoint still
# verifies, and --checkpoint-error continue trains on with a warning. The
# filesystem is a small tmpfs this test mounts; without the privilege to
# mount, it says so and is skipped (exit 77).
# usage: test_full_disk.sh DSTRAIN
set -uo pipefail
bin=$(readlink -f "$1")
work=$(mktemp -d)
mnt="$work/small"
mkdir -p "$mnt"
cleanup() { umount "$mnt" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
. "$(dirname "$0")/../lib/checks.sh"
# one tiny checkpoint (with its optimizer state) is about 570 KiB: room for
# one and not two
if ! mount -t tmpfs -o size=900k tmpfs "$mnt" 2>/dev/null; then
  echo "skipped: cannot mount a small tmpfs here (needs root and mount privilege)"
  exit 77
fi

run() {   # MODE DIR [STEPS]: a checkpoint every 2 steps: the second does not fit
  timeout 120 "$bin" train --model tiny --synthetic --steps "${3:-4}" --checkpoint-every 2 \
    --print-every 0 --checkpoint-dir "$2" --checkpoint-error "$1" 2>&1
}
t0=$(date +%s.%N)
out=$(run stop "$mnt/ck"); rc=$?
secs=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
echo "stop: exit $rc after ${secs}s"
if [ "$rc" -eq 1 ] && grep -q "step-00000004.h5.tmp" <<<"$out" && \
   grep -q "No space left on device" <<<"$out"; then
  ok
else bad "full disk, --checkpoint-error stop: exit $rc: $out"; fi
if [ ! -e "$mnt/ck/step-00000004.h5.tmp" ] && [ ! -e "$mnt/ck/step-00000004.h5" ]; then
  ok
else bad "a partial checkpoint was left: $(ls "$mnt/ck")"; fi
if "$bin" info "$mnt/ck/step-00000002.h5" 2>&1 | grep -q "^verified:"; then
  ok
else bad "the previous checkpoint does not verify"; fi

rm -rf "${mnt:?}/ck"
out=$(run continue "$mnt/ck"); rc=$?
if [ "$rc" -eq 0 ] && grep -q "warning: checkpoint at step 4 not written" <<<"$out" && \
   grep -q "^done: 4 steps" <<<"$out" && \
   "$bin" info "$mnt/ck/step-00000002.h5" 2>&1 | grep -q "^verified:"; then
  ok
else bad "full disk, --checkpoint-error continue: exit $rc: $out"; fi

# each failed save says its own file, not the first failure's
rm -rf "${mnt:?}/ck"
out=$(run continue "$mnt/ck" 6); rc=$?
if [ "$rc" -eq 0 ] && grep -q "checkpoint at step 6 not written (.*step-00000006.h5.tmp" <<<"$out"; then
  ok
else bad "the second failed save's warning: exit $rc: $(grep warning <<<"$out")"; fi

echo "test_full_disk: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
