# shellcheck shell=bash
# ompi_multinode.sh - Open MPI's settings for a job whose daemons run on
# several nodes, sourced by the launchers that start them
# (jobs/mpiexec/train.sh, jobs/slurm/train-mpirun.sbatch, and so the sweep's
# mpirun jobs) and by tests/cluster. One place: change them here.
#
#   ompi_multinode_env      exports each setting as OMPI_MCA_NAME, unless the
#                           caller's environment already sets that variable,
#                           and sets OMPI_NODE_LOST_S: the longest a lost
#                           node then takes to be noticed, in seconds
#
# Why. mpiexec (ORTE, Open MPI 4.1) talks to its daemon on every other node
# over TCP (the out-of-band channel, "oob"); it has no heartbeat of its own.
# When a node's network disappears (its link down, its packets dropped, the
# machine gone without closing its sockets), nothing reaches mpiexec: the
# ranks' watchdogs (--timeout) end the ranks that are left, yet mpiexec
# waits for the lost daemon for ever. Linux's TCP keepalive, which Open MPI
# turns on for the oob sockets, is what notices the silence, and its
# defaults here (oob_tcp_keepalive_time 300 s, then 9 probes 20 s apart)
# take 8 minutes. With these: a probe after 5 s of silence, 3 unanswered
# probes 2 s apart, so a node is declared lost 6 to 11 s after it went
# silent; mpiexec then ends the job ("ORTE has lost communication with a
# remote daemon ... on node NODE") and its daemons clean their nodes.
#
# Keepalive runs only on an idle connection: once mpiexec has sent to the
# lost daemon (to end the job after a rank's watchdog called MPI_Abort), TCP
# retransmits for about 15 minutes instead (net.ipv4.tcp_retries2). So
# --timeout must exceed OMPI_NODE_LOST_S by a margin (dstrain's default,
# 300 s, does), or mpiexec may hang after the ranks have ended; the
# launchers run ompi_guard beside it, which ends such an mpiexec
# (tests/cluster/test_cluster_launcher.sh shows both).
#
#   orte_abort_on_non_zero_status 1: one rank's failure ends the job (Open
#   MPI's default, stated so a site's openmpi-mca-params.conf cannot turn it
#   off: the other ranks would wait in a collective until --timeout).

OMPI_MULTINODE_SETTINGS=(
  oob_tcp_keepalive_time=5
  oob_tcp_keepalive_intvl=2
  oob_tcp_keepalive_probes=3
  orte_abort_on_non_zero_status=1
)

ompi_multinode_env() {
  local kv name
  for kv in "${OMPI_MULTINODE_SETTINGS[@]}"; do
    name=OMPI_MCA_${kv%%=*}
    [ -n "${!name:-}" ] || export "$name=${kv#*=}"
  done
  # shellcheck disable=SC2034,SC2154  # exported just above by name; read by the callers
  OMPI_NODE_LOST_S=$((OMPI_MCA_oob_tcp_keepalive_time + OMPI_MCA_oob_tcp_keepalive_intvl * OMPI_MCA_oob_tcp_keepalive_probes))
}

#   ompi_guard PID CONSOLE  (run in the background) ends mpiexec PID, with
#                           its process group, when it is still running
#                           OMPI_NODE_LOST_S + 10 s after a rank said it
#                           ends the job ("ending the job" in CONSOLE, the
#                           job's output): the mpiexec that writes to a lost
#                           node for 15 minutes. Says so on stderr; returns
#                           when PID ends.
ompi_guard() {
  local pid=$1 console=$2 grace=$((${OMPI_NODE_LOST_S:-11} + 10)) seen=
  while kill -0 "$pid" 2>/dev/null; do
    if [ -z "$seen" ] && grep -q '; ending the job' "$console" 2>/dev/null; then seen=$SECONDS; fi
    if [ -n "$seen" ] && [ $((SECONDS - seen)) -ge "$grace" ]; then
      echo "jobs: mpiexec still runs $grace s after a rank ended the job (it waits on a lost node): ending it" >&2
      kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null
      sleep 5
      kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null
      return 0
    fi
    sleep 1
  done
}

#   ompi_leftovers_script JOBID HNP_PID
#                           prints a shell command that removes, on the
#                           node it runs on, what Open MPI job JOBID
#                           (OMPI_MCA_ess_base_jobid, its family the upper
#                           16 bits) of mpiexec HNP_PID left there (a node
#                           whose daemon was killed keeps it): its session
#                           folders (TMPDIR or /tmp: ompi.HOST.UID/jf.FAMILY,
#                           ompi.HOST.UID/pid.HNP_PID) and its shared memory
#                           (/dev/shm/vader_segment.HOST.UID.FAMILY-in-hex*);
#                           nothing of another job (orte-clean would end
#                           every job of the user, of every user as root)
ompi_leftovers_script() {
  local fam=$(($1 >> 16))
  # shellcheck disable=SC2016  # expanded on each node, not here
  printf '%s' 'h=$(hostname); u=$(id -u); top=${TMPDIR:-/tmp}/ompi.$h.$u
rm -f /dev/shm/vader_segment."$h.$u".'"$(printf %x "$fam")"'*
rm -rf "$top/jf.'"$fam"'" "$top/pid.'"$2"'"; rmdir "$top" 2>/dev/null; true'
}
