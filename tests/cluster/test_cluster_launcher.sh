#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# jobs/mpiexec/train.sh on several nodes (issue 39), on a cluster simulated
# on this machine (sim_cluster.sh), its mpiexec run on node1 through
# MPIEXEC=tests/cluster/mpiexec_on_cluster (the launcher's own environment,
# its signals, as on a head node):
#  - threads and variables: 4 ranks as 3 on node1 + 1 on node2, a stand-in
#    for dstrain printing each rank's environment: OPENBLAS_NUM_THREADS and
#    OMP_NUM_THREADS are each node's cores / its ranks (node1 nproc/3 at
#    least 1, node2 nproc), not the launching machine's cores / all ranks;
#    DSTRAIN_CPU_ISA and another DSTRAIN_* variable reach node2's rank
#    (before: none of them did, not even the thread counts: the launcher
#    missed Open MPI 4.1 in `mpiexec --version`, "OpenRTE");
#  - SIGTERM to the launcher's process group mid-training (Ctrl-C, a
#    scheduler's kill -- -PGID) and SIGUSR1 to the launcher alone: the ranks
#    checkpoint and stop, the launcher exits 75, no rank is left (before:
#    mpiexec, given SIGTERM, ended with 1; the script, killed by SIGUSR1,
#    left mpiexec training).
# usage: test_cluster_launcher.sh DSTRAIN WORKDIR   (a WORKDIR under /tmp becomes a link to /var/tmp: sim_cluster.sh)
set -uo pipefail
bin=$(readlink -f "$1") work=$2
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
# shellcheck source=../lib/checks.sh
. "$here/../lib/checks.sh"
# shellcheck source=sim_cluster.sh
. "$here/sim_cluster.sh"
cluster_check || exit 77
cluster_workdir "$work" || exit 77
t0=$(date +%s.%N)
secs() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }
cluster_up 2 "$work/cluster" || { bad "cluster_up failed"; exit 1; }
export MPIEXEC=$here/mpiexec_on_cluster
unset OPENBLAS_NUM_THREADS OMP_NUM_THREADS

# threads per node, and every DSTRAIN_* variable on every node
cat >"$work/show_env" <<'EOF'
#!/bin/sh
echo "rank-env $OMPI_COMM_WORLD_RANK $(hostname) blas=${OPENBLAS_NUM_THREADS:-unset} omp=${OMP_NUM_THREADS:-unset} isa=${DSTRAIN_CPU_ISA:-unset} mark=${DSTRAIN_TEST_MARK:-unset}"
EOF
chmod +x "$work/show_env"
n=$(nproc)
one=$((n / 3 > 0 ? n / 3 : 1))
want=$(printf 'rank-env %s\n' "0 node1 blas=$one omp=$one" "1 node1 blas=$one omp=$one" "2 node1 blas=$one omp=$one" \
         "3 node2 blas=$n omp=$n" | sed 's/$/ isa=baseline mark=42/')
got=$(CLUSTER_SLOTS="3 1" NTASKS=4 DSTRAIN="$work/show_env" DSTRAIN_OUT="$work/env" DSTRAIN_CPU_ISA=baseline \
      DSTRAIN_TEST_MARK=42 timeout 60 bash "$repo/jobs/mpiexec/train.sh" 2>&1 | grep '^rank-env' | sort -n -k2)
if [ "$got" = "$want" ]; then ok; echo "threads and variables per rank (3 + 1 ranks, $n cores a node):"; echo "${got//rank-env/  rank-env}"
else bad "threads and variables per rank: got
$got
want
$want
$(cat "$work/env/console.txt")"; fi

# stop SIGNAL TARGET: the launcher training on 2 + 2 ranks, SIGNAL sent to its
# process group (group) or to the script alone (script) once it trains
stop() {
  local sig=$1 target=$2 name=stop-$1 pid sh i rc left
  export CLUSTER_SLOTS="2 2"
  DSTRAIN_OUT=$work/$name NTASKS=4 DSTRAIN="$bin" DSTRAIN_STEPS=100000 DSTRAIN_BATCH=2 DSTRAIN_MAX_FRAMES=100 \
    DSTRAIN_ARGS="--print-every 20 --timeout 30 --checkpoint-dir $work/$name/ck" \
    setsid timeout -k 5 90 bash "$repo/jobs/mpiexec/train.sh" >"$work/$name.out" 2>&1 &
  pid=$!
  for ((i = 0; i < 600; i++)); do grep -q '^step ' "$work/$name.out" && break; sleep 0.1; done
  sh=$(pgrep -P "$pid" -x bash)
  if [ "$target" = group ]; then kill -"$sig" -- -"$pid"; else kill -"$sig" "$sh"; fi
  rc=0; wait "$pid" || rc=$?
  sleep 1
  left=$(for n in node1 node2; do
           for p in $(cluster_procs "$n"); do echo "$n:$p($(cat "/proc/$p/comm" 2>/dev/null))"; done
         done)
  echo "SIG$sig to the launcher's $target: exit $rc; $(grep -h '^stopped by' "$work/$name.out")"
  if [ "$rc" = 75 ] && ls "$work/$name/ck/"step-*.h5 >/dev/null 2>&1 && grep -q '^stopped by .* checkpoint ' "$work/$name.out" &&
     [ -z "$left" ]; then ok
  else bad "SIG$sig to the launcher's $target: exit $rc (want 75), checkpoints: $(cd "$work/$name/ck" 2>/dev/null && echo step-*), left in the nodes: ${left:-nothing}: $(tail -15 "$work/$name.out")"
    [ -n "$left" ] && cluster_down >/dev/null 2>&1 && cluster_up 2 "$work/cluster"
  fi
}
stop TERM group
stop USR1 script

# a node killed whole (its Open MPI daemon too, the node still up): the job
# fails, and the launcher removes what the job left there (its session
# folder and shared memory), which Open MPI does not
export CLUSTER_SLOTS="2 2"
DSTRAIN_OUT=$work/killed NTASKS=4 DSTRAIN="$bin" DSTRAIN_STEPS=100000 DSTRAIN_BATCH=2 DSTRAIN_MAX_FRAMES=100 \
  DSTRAIN_ARGS="--print-every 20 --timeout 30" timeout -k 5 90 bash "$repo/jobs/mpiexec/train.sh" >"$work/killed.out" 2>&1 &
pid=$!
for ((i = 0; i < 600; i++)); do grep -q '^step ' "$work/killed.out" && break; sleep 0.1; done
h2=$(cluster_holder node2)
# shellcheck disable=SC2012  # names Open MPI makes: no odd characters
before=$(ls -d "/proc/$h2/root/tmp/"ompi.* "/proc/$h2/root/dev/shm/"vader* 2>/dev/null | wc -l)
read -r -a all2 <<<"$(cluster_procs node2 | tr '\n' ' ')"
kill -KILL "${all2[@]}" 2>/dev/null
rc=0; wait "$pid" || rc=$?
# shellcheck disable=SC2012  # the same
left=$(ls -d "/proc/$h2/root/tmp/"ompi.* "/proc/$h2/root/dev/shm/"vader* 2>/dev/null | sed "s|/proc/$h2/root||")
echo "node2 killed whole (${#all2[@]} processes, $before session folders and segments): launcher exit $rc; left on node2: ${left:-nothing}"
if [ "$rc" -ne 0 ] && [ "$rc" -ne 75 ] && [ "$before" -gt 0 ] && [ -z "$left" ]; then ok
else bad "node2 killed whole: exit $rc, $before leftovers before, left after: ${left:-nothing}: $(grep -v '^step' "$work/killed.out" | tail -6)"; fi

# a short --timeout and a lost node: the ranks' watchdogs end the job before
# the keepalive notices the node, so mpiexec writes to the lost daemon and
# would retransmit for 15 minutes; the launcher's guard ends it. The
# keepalive is slowed (10 s) so that the watchdog (--timeout 6) fires first,
# as a site's longer keepalive or a short --timeout would.
export CLUSTER_SLOTS="2 2"
OMPI_MCA_oob_tcp_keepalive_time=10 DSTRAIN_OUT=$work/lost NTASKS=4 DSTRAIN="$bin" DSTRAIN_STEPS=100000 \
  DSTRAIN_BATCH=2 DSTRAIN_MAX_FRAMES=100 DSTRAIN_ARGS="--print-every 20 --timeout 6" \
  timeout -k 5 120 bash "$repo/jobs/mpiexec/train.sh" >"$work/lost.out" 2>&1 &
pid=$!
for ((i = 0; i < 600; i++)); do grep -q '^step ' "$work/lost.out" && break; sleep 0.1; done
tf=$(date +%s.%N)
nsenter -t "$(cluster_holder node2)" -n ip link set eth0 down
rc=0; wait "$pid" || rc=$?
took=$(secs "$tf")
nsenter -t "$(cluster_holder node2)" -n ip link set eth0 up
echo "a lost node and --timeout 6 (keepalive 10 s): the launcher ended $took s after the link went down, exit $rc"
if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && awk -v t="$took" 'BEGIN { exit !(t <= 75) }' &&
   grep -q 'mpiexec still runs .* after a rank ended the job\|lost communication with a remote daemon' "$work/lost.out"; then ok
  grep -o 'mpiexec still runs [^:]*\|lost communication with a remote daemon' "$work/lost.out" | head -1 | sed 's/^/  /'
else bad "a lost node with a short --timeout: exit $rc after $took s (want non-zero within 75 s): $(grep -v '^step' "$work/lost.out" | tail -8)"; fi

cluster_down >/dev/null 2>&1
echo "test_cluster_launcher: $pass passed, $fail failed in $(secs "$t0") s"
[ "$fail" -eq 0 ]
