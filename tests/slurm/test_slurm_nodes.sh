#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# The Slurm job scripts on a 2-node Slurm (issue 39): slurmctld and a slurmd
# per node on a cluster simulated on this machine (tests/cluster/sim_cluster.sh).
# usage: test_slurm_nodes.sh PATH/TO/dstrain WORKDIR   (a WORKDIR under /tmp becomes a link to /var/tmp: sim_cluster.sh)
#
# 1. cluster_up 2: node1 and node2, each its own network, UTS and mount
#    namespaces, /tmp and /dev/shm, addresses 10.213.39.1 and .2 on a bridge;
#    the rest of the file tree (WORKDIR, the checkout, /run) shared.
# 2. munged inside node1 with its socket in WORKDIR/munge (a path every node
#    sees: a node's /tmp is its own); slurm.conf from slurm_conf.sh, the same
#    choices as the one-node test, with SlurmctldHost=node1(10.213.39.1) and
#    NodeName=node1/node2 at their addresses; slurmctld inside node1 and a
#    slurmd inside each node (`slurmd -D`: the node's host name picks its
#    NodeName), all in the foreground as children of this script. Slurm's
#    client commands run inside node1 (the host is not on the bridge).
# 3. Once sinfo shows both nodes idle (slurm_jobs.sh's jobs and checks, as
#    the one-node test's, with --nodes=2):
#    jobs/slurm/train.sbatch (srun --mpi=pmix) with `sbatch --nodes=2
#    --ntasks-per-node=1`: 'ranks on 2 nodes: node1 rank 0, node2 rank 1';
#    jobs/slurm/train-mpirun.sbatch submitting itself with NODES=2 NTASKS=4
#    (mpirun inside the allocation starts its daemon on node2 with srun):
#    'ranks on 2 nodes: node1 ranks 0-1, node2 ranks 2-3'. Each COMPLETED,
#    one banner with its ranks, one 'done:', 20 step records.
#    Preemption, with each of the two scripts on 1+1 tasks: SIGUSR1 to the
#    batch script mid-run, the checkpoint, exit 75, requeue and resumed run,
#    both runs on node1 and node2; the job COMPLETES with the parameters,
#    BatchNorm statistics and optimizer state of the same run uninterrupted
#    (2 ranks as 1+1 on the same two nodes, by sim_cluster.sh's
#    cluster_mpiexec), bit for bit.
# 4. On exit, always: cancels the jobs, stops the slurmds, slurmctld and
#    munged, then cluster_down ends whatever is left inside the nodes
#    (slurmstepd, ranks) and the nodes; WORKDIR removed unless KEEP_SLURM_TEST=1.
# Not root, no Slurm or munge, namespaces refused: "skipped: ..." and exit 77.
# About a minute on 2 cores (55 s here: 3 s to both nodes idle, 4 and 8 s for
# the two jobs, 20 s for each preemption with its reference run).
set -uo pipefail
bin=$(readlink -f "${1:?usage: test_slurm_nodes.sh DSTRAIN WORKDIR}") work=${2:?usage: test_slurm_nodes.sh DSTRAIN WORKDIR}
here=$(cd "$(dirname "$0")/../.." && pwd)
start=$(date +%s)

log() { printf 'test_slurm_nodes: %s\n' "$*"; }
pass=0 fail=0
ok()  { pass=$((pass + 1)); log "ok: $*"; }
bad() { fail=$((fail + 1)); log "FAIL: $*" >&2; }

[ -x "$bin" ] || { log "$bin: not executable"; exit 1; }
# shellcheck source=../cluster/sim_cluster.sh
. "$here/tests/cluster/sim_cluster.sh"
cluster_check || exit 77
for c in slurmctld slurmd sbatch munged munge h5diff; do
  command -v "$c" >/dev/null || { echo "skipped: no $c on PATH (scripts/install-slurm.sh)"; exit 77; }
done
cluster_workdir "$work" || exit 77   # the shared cluster folder
chmod 755 "$work"   # munged wants every folder above its socket searchable by all
export SLURM_CONF=$work/slurm.conf
jobs=$work/jobs
mkdir -p "$jobs"
pids=() on1=() on2=()   # daemons started here: munged, slurmctld, slurmd node1, slurmd node2
# shellcheck source=slurm_conf.sh
. "$here/tests/slurm/slurm_conf.sh"

# NODE_ns NODE: the nsenter command that runs a command inside NODE's
# namespaces, the environment kept (an array's words, one a line; nsenter
# execs the command: $! of `nsenter ... DAEMON &` is the daemon's pid)
node_ns() {
  local pid
  pid=$(awk -v n="$1" '$1 == n { print $2 }' "$SIM_CLUSTER_DIR/nodes" 2>/dev/null)
  [ -n "$pid" ] || { log "no node $1"; return 1; }
  printf '%s\n' nsenter -t "$pid" -n -u -m
}
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  slurm_stop_all "${on1[@]}"   # by pid: a plain `wait` would wait for the cluster's holders too
  cluster_down   # what the jobs left inside the nodes, then the nodes
  if [ "${KEEP_SLURM_TEST:-0}" = 1 ] || [ "$rc" -ne 0 ]; then log "kept $work"; else rm -rf "$work"; fi
  log "$(($(date +%s) - start)) s in all"
  exit "$rc"
}
SIM_CLUSTER_NO_TRAP=1   # cleanup ends the cluster, after Slurm
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

cluster_up 2 "$work/cluster" || { log "cluster_up failed"; exit 1; }
net=$SIM_CLUSTER_NET
mapfile -t on1 < <(node_ns node1)
mapfile -t on2 < <(node_ns node2)
[ ${#on1[@]} -gt 0 ] && [ ${#on2[@]} -gt 0 ] || exit 1

# ---- munge and Slurm inside the nodes (slurm_conf.sh) -------------------------
slurm_munge_start "$work/munge" "${on1[@]}" || exit 1
pids+=("$SLURM_MUNGED_PID")
hw=$(slurm_node_hw) || exit 1   # the nodes are this machine
# each node its own network: the default ports are free in every one
slurm_conf_write "$SLURM_CONF" "$work" "$work/munge/munge.socket" 6817 6818 node1 "$net.1" "$hw" \
  "node1:$net.1" "node2:$net.2" || { log "writing slurm.conf failed"; exit 1; }
# job ids apart from the one-node test's: the preemption waits for no
# `slurmstepd: [ID.` of the job, and ctest may run both at once
echo "FirstJobId=1001" >>"$SLURM_CONF"
log "slurm.conf in $work: node1 and node2 ($hw), MpiDefault=$(sed -n 's/^MpiDefault=//p' "$SLURM_CONF")"
"${on1[@]}" slurmctld -D -i -f "$SLURM_CONF" >"$work/log/slurmctld.stdout" 2>&1 &
pids+=($!)
"${on1[@]}" slurmd -D -f "$SLURM_CONF" >"$work/log/slurmd-node1.stdout" 2>&1 &
pids+=($!)
"${on2[@]}" slurmd -D -f "$SLURM_CONF" >"$work/log/slurmd-node2.stdout" 2>&1 &
pids+=($!)
states=
for i in $(seq 60); do
  states=$("${on1[@]}" sinfo -h -N -o '%N=%T' 2>/dev/null | sort -u | tr '\n' ' ')
  [ "$states" = "node1=idle node2=idle " ] && break
  sleep 1
done
if [ "$states" != "node1=idle node2=idle " ]; then
  tail -n 20 "$work/log/"*.log "$work/log/"*.stdout
  log "the nodes are not idle after 60 s (${states:-no answer})"; exit 1
fi
ok "slurmctld on node1, slurmd on node1 and node2: both idle after $(($(date +%s) - start)) s"

# ---- jobs (slurm_jobs.sh) -----------------------------------------------------
SLURM_ON=("${on1[@]}")
JOB_SHAPE=(--nodes=2 --ntasks-per-node=1)
JOB_RANKS=2
mpi_required=1
# shellcheck source=slurm_jobs.sh
. "$here/tests/slurm/slurm_jobs.sh"
one='ranks on 2 nodes: node1 rank 0, node2 rank 1' two='ranks on 2 nodes: node1 ranks 0-1, node2 ranks 2-3'
# check_layout NAME LINE [COUNT]: rank 0 printed the ranks' hosts as LINE
# (COUNT times: once a run of the job)
check_layout() {
  local n
  n=$(grep -cxF "$2" "$jobs/$1.out")
  if [ "$n" -eq "${3:-1}" ]; then ok "$1: '$2'${3:+ in each of its $3 runs}"
  else bad "$1: '$2' $n times, not ${3:-1}: $(grep '^ranks on' "$jobs/$1.out" | tr '\n' ' ')"; fi
}
t=$(date +%s)
# secs NAME: how long since the last call
secs() { log "$1: $(($(date +%s) - t)) s"; t=$(date +%s); }
run_job train-srun jobs/slurm/train.sbatch && check_layout train-srun "$one"
secs train-srun
# 2 tasks a node: the script submits itself with --nodes=2 --ntasks=4
JOB_RANKS=4 run_job train-mpirun jobs/slurm/train-mpirun.sbatch NODES=2 NTASKS=4 && check_layout train-mpirun "$two"
secs train-mpirun

# the preempted run's reference: the same training as 1+1 ranks on node1 and node2
reference() {   # DIR DSTRAIN-ARGS...
  local ref=$1; shift
  # in the background, waited for: a signal's trap (cleanup) runs at once,
  # and with the test's own output, not the run's
  CLUSTER_SLOTS="1 1" cluster_mpiexec -np 2 "$bin" "$@" --checkpoint-dir "$ref" >"$ref.out" 2>&1 &
  wait $!
}
# the first run and the requeued one, each on both nodes
preempt_job preempt-srun jobs/slurm/train.sbatch reference && check_layout preempt-srun "$one" 2 &&
  check_layout preempt-srun-ref "$one"
secs preempt-srun
preempt_job preempt-mpirun jobs/slurm/train-mpirun.sbatch reference && check_layout preempt-mpirun "$one" 2
secs preempt-mpirun

log "$pass passed, $fail failed in $(($(date +%s) - start)) s"
[ "$fail" -eq 0 ] || { tail -n 30 "$work/log/"*.log; exit 1; }
