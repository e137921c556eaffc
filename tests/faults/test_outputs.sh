#!/usr/bin/env bash
# Outputs and checkpoint folders that cannot be turned against their owner
# (issue 33, items 1 and 3), each case a variant of what a careless or
# hostile user of a shared cluster folder could meet, on real files:
# - an output that exists and is not a regular file (a private character
#   device made with mknod, a FIFO, a socket, a folder, a link to
#   /proc/self/fd/1) is refused by name, for prep, export, import and bench,
#   and is left what it was;
# - writing into a folder given through a symbolic link works (prep,
#   export, import, bench), and so does a whole run with checkpoints in a
#   linked folder, resumed there, bit for bit as a straight run;
# - a checkpoint folder swapped for a link to another folder mid-run stops
#   the run at the next save, nothing written in the other folder;
# - a checkpoint folder path of about 1,020 characters is written whole
#   (step-N.h5 under it, resumable, nothing beside it); one too long for
#   PATH_MAX is refused naming the limit;
# - a hard link planted at the folder's lock file is refused and the file
#   it links to kept;
# - pruning with --keep 1 keeps the checkpoint just written, whatever other
#   step-N.h5 lie in the folder (garbage or another run's), and never
#   removes another run's;
# - a fresh run (no --resume) in a folder holding another run's checkpoints
#   is refused naming them, and those are unchanged; --resume auto goes on;
# - a save's name taken by a damaged file: set aside and kept, the run goes
#   on; by another run's checkpoint: never overwritten, that save fails;
# - with saves slower than the steps between them (DSTRAIN_FAULT=slowsave),
#   wait_s and stall_s count the time training waited for the save before;
# - a --log that is a FIFO nothing reads is an error at once, not a hang.
# usage: test_outputs.sh DSTRAIN PYTHON
set -uo pipefail
bin=$(readlink -f "$1") py=$2
. "$(dirname "$0")/../lib/checks.sh"
scratch_and_pids
T="timeout -k 5 60"   # no case may hang the suite, on any binary

mkdir -p "$work/feat"
"$py" "$(dirname "$0")/../lib/tones.py" "$work/feat" >/dev/null
cd "$work/feat" || exit 1
$T "$bin" prep manifest ok.csv --out "$work/ok.h5" --quiet >/dev/null 2>&1 || bad "prep of the tones failed"
$T "$bin" train --model tiny --synthetic --steps 2 --checkpoint-every 2 --print-every 0 \
   --checkpoint-dir "$work/src" >/dev/null 2>&1 || bad "a first checkpoint could not be made"
ck=$work/src/step-00000002.h5
$T "$bin" export --pytorch "$ck" "$work/m.pt" >/dev/null 2>&1 || bad "export of the first checkpoint failed"
cd "$work" || exit 1

# --- outputs that are not regular files: refused by name, left as they were
mknod "$work/cdev" c 1 3 2>/dev/null || cp -a /dev/null "$work/cdev" 2>/dev/null
mkfifo "$work/fifo"
"$py" -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); s.bind(sys.argv[1])' "$work/sock"
mkdir "$work/afolder"
ln -s /proc/self/fd/1 "$work/fdlink"
kind() { stat -c %F "$1" 2>/dev/null; }
for node in cdev fifo sock afolder fdlink; do
  [ -e "$work/$node" ] || [ -L "$work/$node" ] || continue
  before=$(kind "$work/$node")
  for cmd in "prep manifest feat/ok.csv --quiet --out" "export --pytorch $ck" "import --pytorch m.pt --model tiny" \
             "bench --model tiny --steps 1 --warmup 1 --out" "bench --model tiny --steps 1 --warmup 1 --csv"; do
    # shellcheck disable=SC2086
    out=$(echo | $T "$bin" $cmd "$work/$node" 2>&1); rc=$?
    if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && [ "$(kind "$work/$node")" = "$before" ] && \
       grep -q "$work/$node" <<<"$out" && grep -Eq "not a regular file|symbolic link" <<<"$out"; then ok
    else bad "$cmd $node: exit $rc, now $(kind "$work/$node") (was $before): $(head -c 300 <<<"$out")"; fi
  done
done

# --- writes into a folder given through a link
mkdir -p "$work/real-out"
ln -s "$work/real-out" "$work/linked-out"
out=$( (cd feat && $T "$bin" prep manifest ok.csv --out "$work/linked-out/f.h5" --quiet) 2>&1 &&
       $T "$bin" export --pytorch "$ck" "$work/linked-out/m.pt" 2>&1 &&
       $T "$bin" import --pytorch "$work/m.pt" --model tiny "$work/linked-out/i.h5" 2>&1 &&
       $T "$bin" bench --model tiny --steps 1 --warmup 1 --out "$work/linked-out/b.json" 2>&1); rc=$?
n=$(find "$work/real-out" -maxdepth 1 -type f \( -name f.h5 -o -name m.pt -o -name i.h5 -o -name b.json \) | wc -l)
if [ "$rc" -eq 0 ] && [ "$n" -eq 4 ] && [ -z "$(find "$work/real-out" -name '*.tmp')" ]; then ok
else bad "writes into a linked folder: exit $rc, $n of 4 files: $(tail -c 300 <<<"$out")"; fi

# --- a whole run in a linked checkpoint folder, resumed there, equals a straight run
mkdir -p "$work/scratch/ckpts"
ln -s "$work/scratch/ckpts" "$work/cklink"
train6() { $T "$bin" train --model tiny --synthetic --checkpoint-every 2 --print-every 0 --keep 2 "$@"; }
out=$(train6 --steps 4 --checkpoint-dir "$work/cklink" 2>&1 && \
      train6 --steps 6 --checkpoint-dir "$work/cklink" --resume auto --log "$work/resumed.jsonl" 2>&1); rc=$?
train6 --steps 6 --checkpoint-dir "$work/straight" --log "$work/straight.jsonl" >/dev/null 2>&1
last_loss() { grep '"step":6,' "$1" | head -1 | sed 's/.*"loss":\([^,]*\),.*/\1/'; }
if [ "$rc" -eq 0 ] && [ -f "$work/scratch/ckpts/step-00000006.h5" ] && [ -L "$work/cklink" ] && \
   [ ! -f "$work/scratch/ckpts/step-00000002.h5" ] && [ -n "$(last_loss "$work/straight.jsonl")" ] && \
   [ "$(last_loss "$work/resumed.jsonl")" = "$(last_loss "$work/straight.jsonl")" ]; then ok
else bad "run and resume in a linked folder: exit $rc, loss at 6 $(last_loss "$work/resumed.jsonl" 2>/dev/null) vs $(last_loss "$work/straight.jsonl"), files: $(ls "$work/scratch/ckpts"): $(tail -c 400 <<<"$out")"; fi

# --- the folder swapped for a link to another one mid-run: stop, nothing elsewhere
mkdir -p "$work/swap" "$work/elsewhere"
(cd "$work/swap" && while [ ! -e ck/step-00000002.h5 ]; do sleep 0.05; done;
 mv ck ck.moved && ln -s "$work/elsewhere" ck) &
pids+=($!)
out=$(cd "$work/swap" && DSTRAIN_FAULT=slow:0:2-8 $T "$bin" train --model tiny --synthetic --steps 8 \
      --checkpoint-every 2 --print-every 0 --checkpoint-dir ck 2>&1); rc=$?
wait "${pids[-1]}" 2>/dev/null
if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && [ -z "$(ls -A "$work/elsewhere")" ] && \
   grep -q "no longer the folder this run started with" <<<"$out"; then ok
else bad "checkpoint folder swapped mid-run: exit $rc, elsewhere holds: $(ls "$work/elsewhere"): $(tail -c 300 <<<"$out")"; fi

# --- a checkpoint folder of about 1,020 characters: whole names, resumable
seg=$(printf 'd%.0s' $(seq 200))
long=$work/long/$seg/$seg/$seg/$seg/$seg
long=${long:0:1019}
mkdir -p "$long"
out=$($T "$bin" train --model tiny --synthetic --steps 2 --checkpoint-every 2 --print-every 0 \
      --checkpoint-dir "$long" 2>&1 && $T "$bin" train --model tiny --synthetic --steps 3 \
      --checkpoint-every 1 --print-every 0 --checkpoint-dir "$long" --resume auto 2>&1); rc=$?
strays=$(find "$(dirname "$long")" -maxdepth 1 -type f | wc -l)
if [ "$rc" -eq 0 ] && [ -f "$long/step-00000002.h5" ] && [ -f "$long/step-00000003.h5" ] && \
   [ "$strays" -eq 0 ] && grep -q "resumed from" <<<"$out"; then ok
else bad "checkpoint folder of ${#long} characters: exit $rc, in it: $(ls "$long" 2>&1 | head -3), beside it $strays files: $(tail -c 300 <<<"$out")"; fi
# one too long for PATH_MAX: refused naming the limit, before any step
over=$long/$seg/$seg/$seg/$seg/$seg/$seg/$seg/$seg/$seg/$seg/$seg/$seg/$seg/$seg/$seg/$seg/$seg
over=${over:0:4080}
(mkdir -p "$over") 2>/dev/null
out=$($T "$bin" train --model tiny --synthetic --steps 2 --checkpoint-every 1 --print-every 0 \
      --checkpoint-dir "$over" 2>&1); rc=$?
if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && grep -q "path too long" <<<"$out" && \
   grep -q "limit of 4095" <<<"$out" && ! grep -q "^step " <<<"$out"; then ok
else bad "checkpoint folder of ${#over} characters: exit $rc: $(head -c 300 <<<"$out")"; fi

# --- a hard link planted at the lock file
mkdir -p "$work/locked"
printf 'precious\n' > "$work/precious"
ln "$work/precious" "$work/locked/.dstrain.lock"
out=$($T "$bin" train --model tiny --synthetic --steps 1 --print-every 0 --checkpoint-dir "$work/locked" 2>&1); rc=$?
if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && [ "$(cat "$work/precious")" = precious ] && \
   grep -q "hard link" <<<"$out"; then ok
else bad "hard link at the lock: exit $rc, the file now: $(head -c 80 "$work/precious"): $(tail -c 300 <<<"$out")"; fi

# --- pruning keeps what was just written; strays and other runs are kept
for stray in garbage other-run; do
  d=$work/prune-$stray
  mkdir -p "$d"
  if [ "$stray" = garbage ]; then printf 'not a checkpoint\n' > "$d/step-99999999.h5"
  else cp "$ck" "$d/step-99999999.h5"; fi
  ssum=$(sha256sum < "$d/step-99999999.h5")
  # the stray is another run's: a fresh run is refused, a resume (here of
  # a run begun elsewhere) goes on beside it
  $T "$bin" train --model tiny --synthetic --steps 2 --checkpoint-every 1 --print-every 0 \
     --checkpoint-dir "$work/mine-$stray" >/dev/null 2>&1
  out=$($T "$bin" train --model tiny --synthetic --steps 5 --checkpoint-every 1 --keep 1 --print-every 0 \
        --checkpoint-dir "$d" --resume "$work/mine-$stray/step-00000002.h5" 2>&1); rc=$?
  if [ "$rc" -eq 0 ] && [ -f "$d/step-00000005.h5" ] && [ ! -f "$d/step-00000004.h5" ] && \
     [ "$(sha256sum < "$d/step-99999999.h5")" = "$ssum" ]; then ok
  else bad "--keep 1 beside a stray step-99999999.h5 ($stray): exit $rc, folder: $(ls "$d"): $(tail -c 300 <<<"$out")"; fi
done

# --- a fresh run in a folder holding another run's checkpoints
mkdir -p "$work/theirs"
$T "$bin" train --model tiny --synthetic --steps 12 --checkpoint-every 6 --print-every 0 \
   --checkpoint-dir "$work/theirs" >/dev/null 2>&1
sums=$(cd "$work/theirs" && sha256sum step-*.h5)
out=$($T "$bin" train --model tiny --synthetic --steps 8 --checkpoint-every 3 --keep 1 --print-every 0 \
      --checkpoint-dir "$work/theirs" 2>&1); rc=$?
if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && [ "$(cd "$work/theirs" && sha256sum step-*.h5)" = "$sums" ] && \
   grep -q "step-00000012.h5" <<<"$out" && grep -q -- "--resume auto" <<<"$out"; then ok
else bad "fresh run over another run's checkpoints: exit $rc, files: $(ls "$work/theirs"): $(tail -c 300 <<<"$out")"; fi
out=$($T "$bin" train --model tiny --synthetic --steps 14 --checkpoint-every 7 --keep 1 --print-every 0 \
      --checkpoint-dir "$work/theirs" --resume auto 2>&1); rc=$?
if [ "$rc" -eq 0 ] && [ -f "$work/theirs/step-00000014.h5" ] && [ ! -f "$work/theirs/step-00000012.h5" ]; then ok
else bad "--resume auto of that run: exit $rc, files: $(ls "$work/theirs"): $(tail -c 300 <<<"$out")"; fi

# --- a save's name taken: by a damaged file (set aside, kept, the run goes
# on), by another run's checkpoint (never overwritten: that save fails)
mkdir -p "$work/taken"
$T "$bin" train --model tiny --synthetic --steps 4 --checkpoint-every 2 --print-every 0 \
   --checkpoint-dir "$work/taken" >/dev/null 2>&1
printf 'damaged\n' > "$work/taken/step-00000006.h5"
out=$($T "$bin" train --model tiny --synthetic --steps 8 --checkpoint-every 2 --print-every 0 \
      --checkpoint-dir "$work/taken" --resume auto 2>&1); rc=$?
if [ "$rc" -eq 0 ] && [ "$(cat "$work/taken/step-00000006.h5.set-aside")" = damaged ] && \
   "$bin" info "$work/taken/step-00000006.h5" 2>&1 | grep -q "^verified:" && \
   [ -f "$work/taken/step-00000008.h5" ]; then ok
else bad "a damaged file at a save's name: exit $rc, folder: $(ls "$work/taken"): $(tail -c 300 <<<"$out")"; fi
cp "$work/theirs/step-00000014.h5" "$work/taken/step-00000010.h5"
tsum=$(sha256sum < "$work/taken/step-00000010.h5")
out=$($T "$bin" train --model tiny --synthetic --steps 10 --checkpoint-every 2 --print-every 0 \
      --checkpoint-dir "$work/taken" --resume "$work/taken/step-00000008.h5" 2>&1); rc=$?
if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && [ "$(sha256sum < "$work/taken/step-00000010.h5")" = "$tsum" ] && \
   grep -q "another run's checkpoint" <<<"$out"; then ok
else bad "another run's checkpoint at a save's name: exit $rc: $(tail -c 300 <<<"$out")"; fi

# --- saves slower than the steps between them: the wait is counted
out=$(DSTRAIN_FAULT=slowsave:0:1 $T "$bin" train --model tiny --synthetic --steps 5 --checkpoint-every 1 \
      --print-every 0 --checkpoint-dir "$work/slow" --log "$work/slow.jsonl" 2>&1); rc=$?
# every save after the first waited about 0.5 s for the one before
waits=$("$py" - "$work/slow.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith('{"checkpoint"')]
print(sum(1 for r in rows[1:] if r["wait_s"] > 0.25 and r["stall_s"] >= r["wait_s"]), len(rows))
PY
)
if [ "$rc" -eq 0 ] && [ "$waits" = "4 5" ]; then ok
else bad "slow saves: exit $rc, saves that counted their wait / saves: $waits: $(tail -c 300 <<<"$out")"; fi

# --- a --log that is a FIFO nothing reads: an error at once, not a wait for ever
mkfifo "$work/logfifo"
out=$(timeout -k 5 20 "$bin" train --model tiny --synthetic --steps 1 --print-every 0 \
      --log "$work/logfifo" 2>&1); rc=$?
if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && [ "$rc" -ne 137 ] && grep -q "FIFO that nothing reads" <<<"$out"; then ok
else bad "--log onto a FIFO without a reader: exit $rc: $(tail -c 300 <<<"$out")"; fi

echo "faults_outputs: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
