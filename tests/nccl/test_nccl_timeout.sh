#!/usr/bin/env bash
# The NCCL transport's own deadline, with nothing else to catch the hang:
# `mpiexec -np 2 test_nccl_transport --stall` reduces two steps, then rank 1
# stops taking part (it sleeps, its communicator alive) while rank 0 queues
# step 3's allreduces and blocks on the GPU reading the result. Only the
# transport's watch (mpi/op_watch.c) can end that: within --timeout 5 plus
# the teardown, with a message naming rank 0, the bucket and the operation,
# and after ncclCommAbort, MPI_Abort. Then the same with --stall-sum: rank 0
# waits in a BatchNorm sum alone, which the sums' own watch (their own
# communicator and stream) must end the same way, naming the sum. Needs 2
# GPUs (ctest -L multi-gpu).
# usage: test_nccl_timeout.sh TEST_NCCL_TRANSPORT WORKDIR
set -uo pipefail
prog=$1 work=$2
rm -rf "$work" && mkdir -p "$work"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
pass=0 fail=0
ok()  { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*" >&2; }
# stall MODE OP: the job ends within the timeout, naming rank 0 and OP
stall() {
  local mode=$1 op=$2 out=$work/out$1 start rc took
  start=$(date +%s%N)
  timeout 300 mpiexec -np 2 "$prog" "$mode" >"$out" 2>&1
  rc=$?
  took=$(( ($(date +%s%N) - start) / 1000000 ))   # ms
  if grep -q '^skipped:' "$out"; then grep '^skipped:' "$out" | head -1; exit 77; fi
  echo "$mode: status $rc after $took ms:"
  tail -4 "$out"
  if [ $rc -ne 0 ] && [ $rc -ne 124 ]; then ok; else bad "$mode: status $rc"; fi
  # start-up and two steps take a few seconds; the stall then ends within 5 s + teardown
  if [ $took -lt 90000 ]; then ok; else bad "$mode: took $took ms"; fi
  if grep -Eq "rank 0 on [^ ]+ waited [0-9]+ s in the NCCL allreduce of $op .*for the other ranks \(--timeout 5\)" \
       "$out"; then ok; else bad "$mode: no message naming rank 0, $op and the operation"; fi
  grep -q "aborting the NCCL communicator and ending the job" "$out" && ok || bad "$mode: no abort message"
  grep -q "rank 1 stops taking part at step 2" "$out" && ok || bad "$mode: the stall did not happen"
}
stall --stall "gradient bucket [0-9]+"
stall --stall-sum "BatchNorm moments"
echo "test_nccl_timeout: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
