#!/usr/bin/env bash
# Disk faults on real file systems (small tmpfs mounts this test makes):
# - a checkpoint directory on a filesystem that fills: the save that does
#   not fit is a clear error naming the file and the reason (no crash at
#   exit, as HDF5 once gave when its close failed), the previous checkpoint
#   still verifies, and --checkpoint-error continue trains on with a warning;
# - a read-only checkpoint directory, or one to be created on a read-only
#   file system, is refused before the first step, naming it and the reason;
# - the checkpoint file system remounted read-only mid-run: the next save
#   names its file and the reason; stop exits 1 at that save with
#   --checkpoint-write sync, and at the first step boundary after it with
#   the background writer (the step after it runs beside the failing write,
#   no later one); the previous checkpoint verifies; continue warns and
#   finishes; the time from the remount to the exit is printed;
# - prep onto a file system too small for the feature file, onto one with
#   no room at all, and into a read-only directory: an error naming the file
#   and the reason, an exit status (no crash), an existing --out unchanged
#   and nothing left beside it; the same for bench's --out on the full disk.
# Without the privilege to mount, it says so and is skipped (exit 77).
# usage: test_full_disk.sh DSTRAIN [PYTHON]   (PYTHON writes the WAV tones)
set -uo pipefail
bin=$(readlink -f "$1") py=${2:-/usr/bin/python3}
work=$(mktemp -d)
mnt="$work/small"
mkdir -p "$mnt"
mounts=() bg=
cleanup() {
  if [ -n "$bg" ]; then kill -CONT "$bg" 2>/dev/null; kill "$bg" 2>/dev/null; wait "$bg" 2>/dev/null; fi
  for m in "$mnt" "${mounts[@]}"; do umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null; done
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 143' TERM INT   # through cleanup: nothing stays mounted
. "$(dirname "$0")/../lib/checks.sh"
# one tiny checkpoint (with its optimizer state) is about 570 KiB: room for
# one and not two
if ! mount -t tmpfs -o size=900k tmpfs "$mnt" 2>/dev/null; then
  echo "skipped: cannot mount a small tmpfs here (needs root and mount privilege)"
  exit 77
fi
tmpfs() {   # DIR SIZE: a tmpfs of SIZE mounted on DIR (made), unmounted at exit
  mkdir -p "$1" && mount -t tmpfs -o "size=$2" tmpfs "$1" && mounts+=("$1")
}
since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }

run() {   # MODE DIR [STEPS]: a checkpoint every 2 steps: the second does not fit
  timeout 120 "$bin" train --model tiny --synthetic --steps "${3:-4}" --checkpoint-every 2 \
    --print-every 0 --checkpoint-dir "$2" --checkpoint-error "$1" 2>&1
}
t0=$(date +%s.%N)
out=$(run stop "$mnt/ck"); rc=$?
echo "full disk, stop: exit $rc after $(since "$t0")s"
if [ "$rc" -eq 1 ] && grep -q "step-00000004\.h5\.[A-Za-z0-9]\{6\}\.tmp" <<<"$out" && \
   grep -q "No space left on device" <<<"$out"; then
  ok
else bad "full disk, --checkpoint-error stop: exit $rc: $out"; fi
if ! compgen -G "$mnt/ck/step-00000004.h5*" >/dev/null; then
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
if [ "$rc" -eq 0 ] && grep -q "checkpoint at step 6 not written (.*step-00000006\.h5\.[A-Za-z0-9]\{6\}\.tmp" <<<"$out"; then
  ok
else bad "the second failed save's warning: exit $rc: $(grep warning <<<"$out")"; fi

# --- a read-only checkpoint directory, there or to be made, is refused
# before the first step (--print-every 1: a step trained would show)
ro="$work/ro"
if tmpfs "$ro" 64k && mkdir "$ro/ck" "$ro/prep" && printf 'the user'"'"'s\n' > "$ro/prep/good.h5" && \
   mount -o remount,ro "$ro"; then
  for dir in "$ro/ck" "$ro/new/ck"; do
    out=$(timeout 60 "$bin" train --model tiny --synthetic --steps 4 --print-every 1 \
            --checkpoint-dir "$dir" 2>&1); rc=$?
    if [ "$rc" -ne 0 ] && [ "$rc" -lt 128 ] && grep -qF "$dir: " <<<"$out" && \
       grep -q "Read-only file system" <<<"$out" && ! grep -q "^step \|^done:" <<<"$out"; then
      ok
    else bad "read-only checkpoint directory $dir: exit $rc: $out"; fi
  done
else bad "cannot set up a read-only tmpfs at $ro"; fi

# --- the checkpoint file system turns read-only mid-run: steps 3 on of rank
# 0 take 0.5 s longer each, so the remount lands between the save of step 2
# and that of step 4
live="$work/live"
tmpfs "$live" 4m || bad "cannot mount a tmpfs at $live"
ck="$live/ck"
midrun() {   # MODE STEPS [WRITE]: trains until step 2's checkpoint, remounts read-only; sets out, rc, secs
  out='' rc='' secs=''
  if ! mount -o remount,rw "$live" || ! rm -rf "$ck"; then
    bad "cannot make $live writable again"; return 1
  fi
  DSTRAIN_FAULT=slow:0:3-1000 "$bin" train --model tiny --synthetic --steps "$2" \
    --checkpoint-every 2 --print-every 1 --checkpoint-dir "$ck" --checkpoint-error "$1" \
    --checkpoint-write "${3:-background}" >"$work/midrun.out" 2>&1 &
  bg=$!
  while [ ! -e "$ck/step-00000002.h5" ] && kill -0 "$bg" 2>/dev/null; do sleep 0.02; done
  # the trainer held still while the file system turns read-only, so a busy
  # machine cannot let it reach step 4's save first
  kill -STOP "$bg" 2>/dev/null
  if ! mount -o remount,ro "$live"; then
    bad "$1: cannot remount $live read-only"
    kill -CONT "$bg"; kill "$bg"; wait "$bg"; bg=; return 1
  fi
  kill -CONT "$bg" 2>/dev/null
  local t0; t0=$(date +%s.%N)
  wait "$bg"; rc=$?; bg=
  secs=$(since "$t0")
  out=$(cat "$work/midrun.out")
  echo "read-only mid-run, $1 (${3:-background}): exit $rc ${secs}s after the remount"
}
# stop: sync exits 1 at the save of step 4, so step 5 never starts; the
# background writer's failure surfaces at the step boundary after it ends:
# step 5 (0.5 s, the save fails at once) runs, step 6 never starts
for write in sync background; do
  if midrun stop 8 "$write"; then
    never=$([ "$write" = sync ] && echo 5 || echo 6)
    if [ "$rc" -eq 1 ] && grep -q "checkpoint at step 4 not written: .*step-00000004\.h5\.[A-Za-z0-9]\{6\}\.tmp: .*Read-only file system" <<<"$out" && \
       ! grep -q "injected fault (slow) at step $never" <<<"$out" && \
       awk -v s="$secs" 'BEGIN { exit !(s < 20) }'; then
      ok
    else bad "read-only mid-run, --checkpoint-error stop, $write: exit $rc after ${secs}s: $out"; fi
    if "$bin" info "$ck/step-00000002.h5" 2>&1 | grep -q "^verified:" && \
       [ "$(ls "$ck")" = "step-00000002.h5" ]; then
      ok
    else bad "read-only mid-run, stop, $write: step 2 does not verify, or more was left: $(ls "$ck")"; fi
  fi
done
if midrun continue 5; then   # saves at steps 4 and 5 (the end) fail; the run goes on
  if [ "$rc" -eq 0 ] && \
     grep -q "warning: checkpoint at step 4 not written (.*step-00000004\.h5\.[A-Za-z0-9]\{6\}\.tmp: .*Read-only file system" \
       <<<"$out" && grep -q "^done: 5 steps" <<<"$out" && \
     "$bin" info "$ck/step-00000002.h5" 2>&1 | grep -q "^verified:"; then
    ok
  else bad "read-only mid-run, --checkpoint-error continue: exit $rc: $out"; fi
fi

# --- prep onto a full disk: three one-second tones, and a tmpfs half the
# size of their feature file, holding a small --out that must survive
tones="$work/tones"
mkdir -p "$tones"
"$py" "$(dirname "$0")/../lib/tones.py" "$tones" || bad "writing the tones with $py"
"$bin" prep manifest "$tones/ok.csv" --out "$tones/roomy.h5" --quiet >/dev/null 2>&1 \
  || bad "prep of three tones onto a roomy disk"
need=$(stat -c %s "$tones/roomy.h5" 2>/dev/null || echo 0)
page=$(getconf PAGESIZE)
half=$(( (need / 2 + page - 1) / page * page ))
prep_fails() {   # NAME DIR REASON: prep onto DIR/good.h5 fails naming it and REASON, DIR as it was
  local name=$1 dir=$2 why=$3 sum out rc
  sum=$(sha256sum < "$dir/good.h5")
  out=$(timeout 60 "$bin" prep manifest "$tones/ok.csv" --out "$dir/good.h5" --quiet 2>&1); rc=$?
  echo "prep onto $name: exit $rc"
  if [ "$rc" -ne 0 ] && [ "$rc" -lt 128 ]; then ok
  else bad "prep onto $name: exit $rc, not a failure reported with an exit status: $out"; fi
  if grep -qF "$dir/good.h5" <<<"$out" && grep -qF "$why" <<<"$out"; then ok
  else bad "prep onto $name: the message does not name the file and \"$why\": $out"; fi
  if [ "$(sha256sum < "$dir/good.h5")" = "$sum" ]; then ok
  else bad "prep onto $name: the existing good.h5 changed"; fi
  if [ "$(ls -A "$dir" | tr '\n' ' ')" = "good.h5 " ]; then ok
  else bad "prep onto $name: left beside good.h5: $(ls -A "$dir" | tr '\n' ' ')"; fi
}
if [ "$half" -ge "$page" ] && [ "$half" -lt "$need" ]; then
  full="$work/full"
  if tmpfs "$full" "$half" && printf 'the user'"'"'s good feature file\n' > "$full/good.h5"; then
    echo "prep: the feature file takes $need bytes, the tmpfs has $half"
    prep_fails "a disk too small" "$full" "No space left on device"
  else bad "cannot set up a $half-byte tmpfs at $full"; fi
else bad "prep's feature file ($need bytes) leaves no tmpfs size below it"; fi
# one page, taken by good.h5: not even the staged file's first bytes fit
none="$work/none"
if tmpfs "$none" "$page" && printf 'the user'"'"'s good feature file\n' > "$none/good.h5"; then
  prep_fails "a disk with no room" "$none" "No space left on device"
else bad "cannot set up a one-page tmpfs at $none"; fi
# a read-only directory (on the read-only tmpfs above)
prep_fails "a read-only directory" "$ro/prep" "Read-only file system"

# --- bench's results onto the full disk: the previous results stay whole
sum=$(sha256sum < "$none/good.h5")
out=$(timeout 120 "$bin" bench --model tiny --synthetic --batch 2 --warmup 1 --steps 2 \
        --out "$none/good.h5" 2>&1); rc=$?
echo "bench --out onto a disk with no room: exit $rc"
if [ "$rc" -ne 0 ] && [ "$rc" -lt 128 ] && grep -qF "$none/good.h5" <<<"$out" && \
   grep -q "No space left on device" <<<"$out" && [ "$(sha256sum < "$none/good.h5")" = "$sum" ] && \
   [ "$(ls -A "$none" | tr '\n' ' ')" = "good.h5 " ]; then ok
else bad "bench --out onto a full disk: exit $rc, left $(ls -A "$none" | tr '\n' ' '): $out"; fi

echo "test_full_disk: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
