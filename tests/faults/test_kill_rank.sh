#!/usr/bin/env bash
# kill -9 of one rank of 4 mid-training (issue 13): mpiexec and every other
# rank exit, non-zero, within the --timeout bound; repeated 10 times (the
# rank killed goes 1, 2, 3, 0, ...), zero hangs. Whoever notices first must
# name the killed rank, and its message is printed: Open MPI's launcher
# sees its child die ("process rank N ... exited on signal 9") and ends the
# others (SIGCONT, SIGTERM, SIGKILL a second apart: about 2 s); else our
# watchdog, "rank N does not answer", after --timeout. Every wait has a hard
# limit of its own: a hang is reported (the leftovers' stacks, with gdb when
# there is one), everything killed, counted as a failure, and the
# repetitions stop there. The time from the kill until mpiexec and all
# ranks are gone is printed per repetition, with min/median/max at the end.
# usage: test_kill_rank.sh DSTRAIN
set -uo pipefail
bin=$(readlink -f "$1")
. "$(dirname "$0")/../lib/checks.sh"
command -v mpiexec >/dev/null || { echo "skipped: no mpiexec"; exit 77; }

reps=10 np=4 wd_timeout=10
bound_ms=$(( (wd_timeout + 5) * 1000 ))   # watchdog timeout + roll call (3 s) + ticks
hard_s=$(( wd_timeout + 30 ))              # past this, a rank or mpiexec hangs
work=$(mktemp -d)
# a copy: a rebuild of the binary while the test runs does not disturb it,
# and every process of ours (timeout, mpiexec, ranks) has $work in its
# command line, so that no reused pid of someone else's is ever killed
cp "$bin" "$work/dstrain" || { echo "cannot copy $bin"; exit 1; }
bin=$work/dstrain
ours() { tr '\0' ' ' 2>/dev/null <"/proc/$1/cmdline" | grep -qF "$work/dstrain"; }
# kill PID... that are still ours
kill_ours() { local p; for p in "$@"; do ours "$p" && kill -KILL "$p" 2>/dev/null; done; }
leftover=()   # the pids of the repetition under way, killed on exit
cleanup() {
  kill_ours "${leftover[@]}"
  rm -rf "$work"
}
trap cleanup EXIT

# alive PID: the process exists and is not a zombie (an exited child that its
# parent has yet to reap has finished)
alive() {
  local st
  st=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) || return 1
  [ -n "$st" ] && [ "$st" != Z ] && [ "$st" != X ]
}
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }

times=()
for k in $(seq 1 $reps); do
  r=$(( k % np ))
  out="$work/rep$k.out"
  # timeout (not --foreground) leads a process group: a hang is killed whole
  timeout -k 5 120 mpiexec -np $np "$bin" train --model tiny --synthetic --steps 1000000 \
    --batch 2 --max-frames 120 --print-every 1 --seed "$k" --timeout $wd_timeout >"$out" 2>&1 &
  job=$!
  leftover=("$job")
  # training under way: a few step lines, and all 4 ranks found as mpiexec's
  # children (by OMPI_COMM_WORLD_RANK in their environment)
  mpi="" ranks=() t_end=$(( $(now_ms) + 60000 ))
  while [ "$(now_ms)" -lt $t_end ]; do
    if [ -z "$mpi" ]; then mpi=$(pgrep -P "$job" -x mpiexec | head -1); fi
    if [ -n "$mpi" ] && [ "$(grep -c '^step' "$out")" -ge 3 ]; then
      ranks=()
      for p in $(pgrep -P "$mpi"); do
        n=$(tr '\0' '\n' 2>/dev/null <"/proc/$p/environ" | sed -n 's/^OMPI_COMM_WORLD_RANK=//p')
        [ -n "$n" ] && ranks[$n]=$p
      done
      [ ${#ranks[@]} -eq $np ] && break
    fi
    alive "$job" || break
    sleep 0.1
  done
  if [ ${#ranks[@]} -ne $np ] || [ -z "$mpi" ]; then
    bad "rep $k: training did not get under way on $np ranks (found ${#ranks[@]}): $(grep -v '^step' "$out" | tail -12)"
    [ -n "$mpi" ] && kill_ours $(pgrep -P "$mpi")   # ranks lead groups of their own
    ours "$job" && kill -KILL -- -"$job" 2>/dev/null
    wait "$job" 2>/dev/null
    continue
  fi
  leftover+=("$mpi" "${ranks[@]}")
  sleep "0.$(( RANDOM % 10 ))"   # somewhere in a step: forward, backward or the reduction
  start=$(now_ms)
  kill -KILL "${ranks[$r]}"
  # until mpiexec, timeout and every rank are gone, or the hard limit
  hung=()
  while :; do
    hung=()
    for p in "$job" "$mpi" "${ranks[@]}"; do alive "$p" && hung+=("$p"); done
    [ ${#hung[@]} -eq 0 ] && break
    [ $(( $(now_ms) - start )) -ge $((hard_s * 1000)) ] && break
    sleep 0.05
  done
  took=$(( $(now_ms) - start ))
  if [ ${#hung[@]} -ne 0 ]; then
    bad "rep $k: killed rank $r; after ${hard_s} s still running: $(ps -o pid=,stat=,args= -p "$(IFS=,; echo "${hung[*]}")" 2>&1)"
    for p in "${hung[@]}"; do
      [ "$p" = "$job" ] && continue
      echo "--- stack of pid $p ($(tr '\0' ' ' 2>/dev/null <"/proc/$p/environ" | grep -o 'OMPI_COMM_WORLD_RANK=[0-9]*')):"
      command -v gdb >/dev/null && timeout 60 gdb -p "$p" -batch -ex 'thread apply all bt' 2>&1 | grep -E '^(Thread|#)'
    done
    echo "--- its output:"; tail -20 "$out"
    ours "$job" && kill -KILL -- -"$job" 2>/dev/null
    kill_ours "${hung[@]}"
    wait "$job" 2>/dev/null
    echo "stopping at the first hang (its stacks are above)"
    break
  fi
  wait "$job"; rc=$?
  leftover=()
  secs=$(awk -v ms="$took" 'BEGIN { printf "%.1f", ms / 1000 }')
  echo "rep $k: killed rank $r, all exited in $secs s (exit status $rc)"
  times+=("$took")
  if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ]; then ok   # 124: timeout's 120 s limit
  else bad "rep $k: mpiexec exit status $rc: $(tail -5 "$out")"; fi
  if [ "$took" -le $bound_ms ]; then ok
  else bad "rep $k: took $secs s, over the bound of $((bound_ms / 1000)) s (--timeout $wd_timeout)"; fi
  # the message that names the killed rank: the launcher's or our watchdog's
  msg=$(grep -E "rank $r (with PID [0-9]+ )?(on node [^ ]+ )?exited on signal 9|rank $r on [^ ]+ does not answer" "$out" | head -2)
  if [ -n "$msg" ]; then ok; sed 's/^/  /' <<<"$msg"
  else bad "rep $k: no message names rank $r: $(grep -v '^step' "$out" | tail -8)"; fi
  grep -h "^dstrain: rank" "$out" | head -3 | sed 's/^/  /'
done

if [ ${#times[@]} -gt 0 ]; then
  printf '%s\n' "${times[@]}" | sort -n | awk '{ t[NR] = $1 / 1000 } END {
    m = (NR % 2) ? t[(NR + 1) / 2] : (t[NR / 2] + t[NR / 2 + 1]) / 2
    printf "time to exit over %d repetitions: min %.1f s, median %.1f s, max %.1f s\n", NR, t[1], m, t[NR] }'
fi
echo "faults_kill_rank: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
