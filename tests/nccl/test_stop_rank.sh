#!/usr/bin/env bash
# A rank that stops participating ends every rank within --timeout. Rank 1
# of `mpiexec -np 2 dstrain train` is frozen whole with SIGSTOP once three
# steps are logged (its threads, its share of every collective, its NCCL
# proxy); rank 0 then waits, on the host in an MPI collective or on the GPU
# in an NCCL allreduce, and its watchdog (mpi/world.c) or the NCCL
# transport's watch (mpi/op_watch.c) must end the job: a non-zero status
# well within the timeout plus the launcher's teardown, a message naming
# rank 0, the operation it waited in and the timeout, and (MPI watchdog)
# rank 1 as the one that does not answer, and no rank left running (the
# launcher kills the stopped one).
# usage: test_stop_rank.sh DSTRAIN WORKDIR DEVICE TRANSPORT
#   cpu mpi    the watchdog path (CI)
#   cuda nccl  the NCCL path: needs 2 GPUs (ctest -L multi-gpu), else skipped
set -uo pipefail
bin=$1 work=$2 device=$3 transport=$4
if [ "$transport" = nccl ]; then
  . "$(dirname "$0")/gpus.sh"
  require_gpus "$bin" 2
fi
rm -rf "$work" && mkdir -p "$work"
. "$(dirname "$0")/../lib/checks.sh"
limit=5      # --timeout
slack=25     # the watchdog's poll, MPI_Abort and the launcher's teardown

# each rank leaves its pid where the test finds it, then becomes dstrain
export DS_PIDDIR=$work
cat >"$work/rank.sh" <<'W'
#!/bin/sh
echo $$ >"$DS_PIDDIR/rank.${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-${PMIX_RANK:-x}}}.pid"
exec "$@"
W
chmod +x "$work/rank.sh"
timeout 300 mpiexec -np 2 "$work/rank.sh" "$bin" train --device "$device" --allreduce "$transport" \
  --model tiny --synthetic --steps 1000000 --batch 2 --max-frames 120 --print-every 0 \
  --log "$work/log.jsonl" --timeout $limit >"$work/out" 2>&1 &
job=$!
for _ in $(seq 1 1500); do   # up to 5 minutes for start-up (a GPU's first steps)
  [ -f "$work/log.jsonl" ] && [ "$(wc -l <"$work/log.jsonl")" -ge 3 ] && break
  kill -0 $job 2>/dev/null || break
  sleep 0.2
done
pids=$(cat "$work"/rank.*.pid 2>/dev/null)
if ! [ -f "$work/rank.1.pid" ] || ! kill -0 $job 2>/dev/null; then
  bad "the job did not train: $(tail -5 "$work/out")"
  kill $job 2>/dev/null
  echo "test_stop_rank ($device, $transport): $pass passed, $fail failed"; exit 1
fi
kill -STOP "$(cat "$work/rank.1.pid")"
start=$(date +%s%N)
wait $job
rc=$?
took=$(( ($(date +%s%N) - start) / 1000000 ))   # ms
echo "job ended with status $rc, $took ms after rank 1 was stopped; its last lines:"
tail -4 "$work/out"
if [ $rc -ne 0 ] && [ $rc -ne 124 ]; then ok; else bad "status $rc"; fi
if [ $took -lt $(( (limit + slack) * 1000 )) ]; then ok; else bad "took $took ms (--timeout $limit)"; fi
# rank 0 names itself, what it waited in, and the timeout
if grep -Eq "rank 0 on [^ ]+ waited [0-9]+ s in .+ for the other ranks \(--timeout $limit\)" "$work/out"; then ok
else bad "no message naming rank 0's wait: $(tail -3 "$work/out")"; fi
grep -Eo "rank 0 on [^ ]+ waited [0-9]+ s in [^(]+" "$work/out" | head -1
# ... and the rank that is stuck: frozen, its watchdog does not answer the roll call
if [ "$transport" = mpi ]; then
  if grep -Eq "rank 1 on [^ ]+ does not answer" "$work/out"; then ok
  else bad "the stopped rank is not named: $(grep 'dstrain: rank 0' "$work/out")"; fi
fi
if [ "$transport" = nccl ]; then
  grep -q "in the NCCL allreduce of .*aborting the NCCL communicator" "$work/out" \
    && echo "(the NCCL watch ended it)" || echo "(the MPI watchdog ended it first)"
fi
# every rank has ended, the stopped one too (up to 5 s for the launcher's kills)
for _ in $(seq 25); do
  left=""
  for p in $pids; do running "$p" && left="$left $p"; done
  [ -z "$left" ] && break
  sleep 0.2
done
if [ -z "$left" ]; then ok; else
  bad "processes left running:$left"
  ps -o pid,ppid,stat,wchan:24,args -p "${left# }" >&2
  for p in $left; do kill -CONT "$p"; kill -KILL "$p"; done 2>/dev/null
fi
echo "test_stop_rank ($device, $transport): $pass passed, $fail failed"
[ "$fail" -eq 0 ]
