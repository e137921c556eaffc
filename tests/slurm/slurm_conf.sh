# shellcheck shell=bash
# slurm_conf.sh - sourced by tests/slurm/test_slurm.sh (one node) and
# tests/slurm/test_slurm_nodes.sh (2 simulated nodes): the munge daemon and
# the slurm.conf of a throwaway Slurm whose daemons run as children of the
# test. The same choices for both: SlurmUser root, select/cons_tres with
# CR_Core, proctrack/linuxproc, task/none (no cgroups), MpiDefault pmix when
# srun lists it (else none), no accounting, ReturnToService=2, one partition
# "test" of every node, KillWait 5, MinJobAge 600 (scontrol still shows an
# ended job), everything under the test's folder; nothing in /etc changed.
#
#   slurm_munge_start DIR [LAUNCH...]
#       a fresh key in DIR, munged in the foreground (in the background of the
#       caller, its pid in SLURM_MUNGED_PID; LAUNCH, e.g. nsenter -t PID -n -u
#       -m, runs it elsewhere) with its socket DIR/munge.socket; waits for its
#       answer. DIR and every folder above it must be searchable by all.
#   slurm_node_hw
#       the hardware part of a NodeName line from `slurmd -C` (CPUs, boards,
#       sockets, cores, threads, RealMemory); "CPUs=2 RealMemory=M" on a
#       one-CPU machine (2 tasks even there: SlurmdParameters=config_overrides)
#   slurm_conf_write CONF DIR SOCKET PORT DPORT CTLHOST CTLADDR HW NODE:ADDR...
#       CONF for slurmctld on CTLHOST (address CTLADDR, port PORT; slurmd's
#       DPORT), munge's SOCKET, state, spools, pid files and logs under DIR
#       (each slurmd's of its own: DIR/spool/NODE, DIR/run/slurmd-NODE.pid,
#       DIR/log/slurmd-NODE.log), each NODE at ADDR with HW; then
#       MpiDefault=pmix when `srun --mpi=list` lists it
#   slurm_stop_pid PID
#       TERM, up to 10 s, then KILL
#   slurm_stop_all [CLIENT...]
#       the daemons in the caller's array pids (munged, slurmctld, slurmds, in
#       the order started): while slurmctld (pids[1]) runs, every job
#       cancelled (scancel under the prefix CLIENT, e.g. nsenter into the
#       controller's node) and the queue waited for (30 s at most); then each
#       daemon stopped, the last started first, and waited for by pid

_slurm_conf_say() { printf 'slurm_conf: %s\n' "$*" >&2; }

slurm_munge_start() {
  local dir=${1:?usage: slurm_munge_start DIR [LAUNCH...]} _
  shift
  mkdir -p "$dir" && chmod 755 "$dir" || return 1
  if command -v mungekey >/dev/null; then
    mungekey --create --keyfile="$dir/munge.key" >/dev/null 2>&1
  fi
  [ -s "$dir/munge.key" ] || head -c 1024 /dev/urandom >"$dir/munge.key"
  chmod 600 "$dir/munge.key"
  # a Unix socket's path has at most 107 bytes
  if [ "${#dir}" -gt 90 ]; then _slurm_conf_say "$dir/munge.socket: too long a path for a socket"; return 1; fi
  "$@" munged --foreground --socket="$dir/munge.socket" --key-file="$dir/munge.key" \
       --log-file="$dir/munged.log" --pid-file="$dir/munged.pid" \
       --seed-file="$dir/munged.seed" >"$dir/stdout" 2>&1 &
  # shellcheck disable=SC2034  # for the caller
  SLURM_MUNGED_PID=$!
  for _ in $(seq 50); do [ -S "$dir/munge.socket" ] && break; sleep 0.2; done
  if ! munge -S "$dir/munge.socket" -n | unmunge -S "$dir/munge.socket" >/dev/null; then
    cat "$dir/munged.log" "$dir/stdout" >&2
    _slurm_conf_say "munged does not answer"; return 1
  fi
}

slurm_node_hw() {
  local hw cpus mem
  hw=$(slurmd -C | head -1)
  cpus=$(sed -nE 's/.* CPUs=([0-9]+).*/\1/p' <<<"$hw")
  mem=$(sed -nE 's/.* RealMemory=([0-9]+).*/\1/p' <<<"$hw")
  if [ -z "$cpus" ] || [ -z "$mem" ]; then
    _slurm_conf_say "slurmd -C: $hw: no CPUs or RealMemory there"; return 1
  fi
  if [ "$cpus" -ge 2 ]; then echo "${hw#NodeName=* }"   # CPUs, boards, sockets, cores, threads, memory
  else echo "CPUs=2 RealMemory=$mem"; fi
}

slurm_conf_write() {
  [ $# -ge 9 ] || { _slurm_conf_say "usage: slurm_conf_write CONF DIR SOCKET PORT DPORT CTLHOST CTLADDR HW NODE:ADDR..."; return 2; }
  local conf=$1 dir=$2 sock=$3 port=$4 dport=$5 ctl=$6 ctladdr=$7 hw=$8 n names=''
  shift 8
  mkdir -p "$dir/state" "$dir/log" "$dir/run" || return 1
  for n in "$@"; do mkdir -p "$dir/spool/${n%%:*}" || return 1; names+=${names:+,}${n%%:*}; done
  {
    cat <<EOF
# Slurm for dstrain's tests (written by tests/slurm/slurm_conf.sh for $(basename "$0"))
ClusterName=dstrain-test
SlurmctldHost=$ctl($ctladdr)
SlurmctldPort=$port
SlurmdPort=$dport
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$sock
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/%n
SlurmctldPidFile=$dir/run/slurmctld.pid
SlurmdPidFile=$dir/run/slurmd-%n.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
ReturnToService=2
SlurmdParameters=config_overrides
MailProg=/bin/true
InactiveLimit=0
KillWait=5
MinJobAge=600
EOF
    for n in "$@"; do echo "NodeName=${n%%:*} NodeHostname=${n%%:*} NodeAddr=${n#*:} $hw State=UNKNOWN"; done
    echo "PartitionName=test Nodes=$names Default=YES MaxTime=INFINITE State=UP"
  } >"$conf" || return 1
  # srun reads slurm.conf even to list its MPI plugins
  if grep -qw pmix <<<"$(SLURM_CONF=$conf srun --mpi=list 2>&1)"; then
    sed -i 's/^MpiDefault=none$/MpiDefault=pmix/' "$conf"
  fi
}

slurm_stop_pid() {
  local pid=$1 _
  kill -TERM "$pid" 2>/dev/null || return 0
  for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.2; done
  kill -KILL "$pid" 2>/dev/null
}

slurm_stop_all() {
  local i
  if [ -n "${pids[1]:-}" ] && kill -0 "${pids[1]}" 2>/dev/null; then
    "$@" scancel --quiet --user="$(id -un)" >/dev/null 2>&1
    for i in $(seq 30); do [ -z "$("$@" squeue -h -o %i 2>/dev/null)" ] && break; sleep 1; done
  fi
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do slurm_stop_pid "${pids[$i]}"; done
  # by pid: a plain `wait` would also wait for the caller's other children
  for i in "${pids[@]}"; do wait "$i" 2>/dev/null; done
}
