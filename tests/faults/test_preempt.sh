#!/usr/bin/env bash
# A scheduler's SIGTERM (end of job) or SIGUSR1 (Slurm's warning, --signal)
# mid-training: the run finishes its step, writes a checkpoint, and exits
# with status 75 (EX_TEMPFAIL: "try again"), on every rank together even
# when only one rank got the signal. Cases: one rank and SIGTERM; two ranks
# under mpiexec with SIGUSR1 sent to rank 1 alone. The time from the signal
# to the exit is printed. Resumed, each run ends with the parameters,
# BatchNorm statistics and optimizer state of the same run uninterrupted.
# usage: test_preempt.sh DSTRAIN
set -uo pipefail
bin=$(readlink -f "$1")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
. "$(dirname "$0")/../lib/checks.sh"

# preempt NAME SIGNAL NP: train until 3 steps are logged, signal the rank
# whose pid file is rank.<last>.pid, check the outcome
preempt() {
  local name=$1 sig=$2 np=$3 dir="$work/$1"
  mkdir -p "$dir"
  export DS_PIDDIR=$dir
  cat >"$dir/rank.sh" <<'W'
#!/bin/sh
echo $$ >"$DS_PIDDIR/rank.${OMPI_COMM_WORLD_RANK:-0}.pid"
exec "$@"
W
  chmod +x "$dir/rank.sh"
  local launch=()
  [ "$np" -gt 1 ] && launch=(mpiexec -np "$np")
  timeout 300 "${launch[@]}" "$dir/rank.sh" "$bin" train --model tiny --synthetic --steps 1000000 \
    --batch 2 --max-frames 120 --print-every 0 --log "$dir/log.jsonl" --checkpoint-dir "$dir/ck" \
    --timeout 30 >"$dir/out" 2>&1 &
  local job=$!
  for _ in $(seq 1 600); do
    [ -f "$dir/log.jsonl" ] && [ "$(wc -l <"$dir/log.jsonl")" -ge 3 ] && break
    sleep 0.1
  done
  local target; target=$(cat "$dir/rank.$((np - 1)).pid" 2>/dev/null)
  local start; start=$(date +%s%N)
  kill -"$sig" "$target"
  wait $job; local rc=$?
  local took=$(( ($(date +%s%N) - start) / 1000000 ))
  echo "$name: status $rc, $took ms after SIG$sig; $(grep 'stopped by' "$dir/out" | head -1)"
  if [ "$rc" -eq 75 ]; then ok; else bad "$name: status $rc: $(tail -5 "$dir/out")"; fi
  local ck; ck=$(grep -o "checkpoint [^ ]*step-[0-9]*\.h5" "$dir/out" | tail -1 | cut -d' ' -f2)
  if [ -n "$ck" ] && "$bin" info "$ck" 2>&1 | grep -q "^verified:"; then ok
  else bad "$name: no verified checkpoint ($ck): $(tail -3 "$dir/out")"; fi
  # the checkpoint is of the last logged step: nothing trained is lost
  local last; last=$(grep '^{"step":' "$dir/log.jsonl" | tail -1 | grep -o '"step":[0-9]*' | cut -d: -f2)
  if [ -n "$ck" ] && [ "$(basename "$ck")" = "$(printf 'step-%08d.h5' "$last")" ]; then ok
  else bad "$name: checkpoint $ck is not of the last logged step $last"; fi
  # resumed, it ends where the same run uninterrupted ends, bit for bit
  if [ -n "$ck" ] && [ -n "$last" ]; then
    local end=$((last + 3)) g same=1
    local args=(--model tiny --synthetic --batch 2 --max-frames 120 --print-every 0 --timeout 30
                --steps "$end")
    timeout 300 "${launch[@]}" "$bin" train "${args[@]}" --checkpoint-dir "$dir/ck" --resume auto \
      >"$dir/resume.out" 2>&1 || bad "$name: resume: $(tail -3 "$dir/resume.out")"
    timeout 300 "${launch[@]}" "$bin" train "${args[@]}" --checkpoint-dir "$dir/straight" \
      >"$dir/straight.out" 2>&1 || bad "$name: straight run: $(tail -3 "$dir/straight.out")"
    for g in /params /state /optim; do
      h5diff -q "$dir/ck/$(printf 'step-%08d.h5' $end)" "$dir/straight/$(printf 'step-%08d.h5' $end)" \
        "$g" "$g" >/dev/null 2>&1 || same=0
    done
    if [ "$same" = 1 ] && grep -q "resumed from $ck" "$dir/resume.out"; then
      ok; echo "$name: resumed from step $last to $end = $end steps uninterrupted, bit for bit"
    else bad "$name: resumed run differs from the uninterrupted one: $(grep -i resum "$dir/resume.out")"; fi
  fi
  if [ "$np" -gt 1 ]; then   # every rank stopped the same way
    local n; n=$(grep -c "stopped by" "$dir/out")
    if [ "$(grep -c 'dstrain: rank' "$dir/out")" -eq 0 ]; then ok
    else bad "$name: a rank failed instead: $(grep 'dstrain: rank' "$dir/out" | head -2) ($n)"; fi
  fi
}
preempt one-rank-term TERM 1
preempt two-ranks-usr1 USR1 2
echo "test_preempt: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
