#!/usr/bin/env bash
# sim_cluster.sh - a cluster of 2 or 3 nodes simulated on this machine, for
# tests that must run ranks on several hosts (issue 39). Sourced by a test:
#
#   . tests/cluster/sim_cluster.sh
#   cluster_check || exit 77          # prints "skipped: WHY" when it cannot be built here
#   cluster_up 3 "$work/cluster"      # nodes node1..node3; installs an EXIT trap
#   CLUSTER_SLOTS="2 1 1" cluster_mpiexec -np 4 ./dstrain train ...
#   cluster_down                      # also run by the trap, whatever happens
#
# or run as a command (see --help below): sim_cluster.sh [options] -- MPIEXEC ARGS.
#
# How it is built (root, ip, unshare, nsenter):
#  - each node is a holder process made by `unshare --net --uts --mount`
#    (a `sleep` renamed TAG:nodeK, TAG = sim-cluster-PID-RANDOM): hostname
#    nodeK in its UTS namespace; in its mount namespace (a private copy of the
#    host's) tmpfs on /tmp and /dev/shm (a checkout under /tmp, and the
#    folders in SIM_CLUSTER_KEEP, bound back in), so nodes share neither (Open MPI's
#    session folders, shared memory), and the cluster's hosts file bound over
#    /etc/hosts, so node names resolve; the rest of the file tree is the
#    host's, the shared cluster folder. The work folder must therefore not be
#    under /tmp or /dev/shm;
#  - a switch holder (TAG:switch, a network namespace of its own) holds the
#    bridge br0; a veth pair per node, sw-nodeK on the bridge, eth0 in the
#    node, address $SIM_CLUSTER_NET.K/24 (default 10.213.39), loopback up.
#    Every command runs through nsenter into the namespaces made here, and
#    only once the holder is seen in namespaces other than the host's (nsenter
#    -t PID enters whatever PID is in: a holder not yet unshared would have
#    the bridge made in the host's network, as a first sketch of this did):
#    nothing is added to the host's network namespace, no `ip netns` name is
#    made, and killing the holders frees every interface;
#  - tests/cluster/node_rsh is Open MPI's rsh agent (plm_rsh_agent): it maps
#    a host to its holder by DIR/nodes and runs the command in the node's
#    namespaces with a clean environment;
#  - cluster_mpiexec runs mpiexec in node1 (the head node) with a hostfile of
#    the nodes, the agent, and Open MPI's TCP traffic (its out-of-band
#    channel and the tcp BTL) held to the bridge's subnet; ranks on one node
#    use vader through that node's /dev/shm;
#  - DIR/cluster.pids records each holder (role, pid, name, namespaces) and
#    DIR/links each interface. cluster_down ends every process inside a
#    node's or the switch's network namespace (what a job left), then each
#    holder by pid after checking its name, waits for them, and says what it
#    ended; it is idempotent. A holder also ends by itself after
#    SIM_CLUSTER_LIFETIME seconds (default 3600), should a test be killed
#    before its trap runs.
#
# Functions (callers may use set -u; nothing here sets shell options):
#   cluster_check           0 if a cluster can be built here, else prints
#                           "skipped: REASON" and returns 1
#   cluster_up N DIR        N nodes (1-9) with their state in DIR (outside
#                           /tmp); exports SIM_CLUSTER_DIR; returns non-zero,
#                           having torn down what it made, on failure
#   cluster_mpiexec ARGS    mpiexec ARGS on the cluster. CLUSTER_SLOTS: slots
#                           per node, e.g. "2 1 1" (default 2 on every node;
#                           fewer numbers than nodes leaves the rest out).
#                           Open MPI's OMPI_* variables and those named in
#                           CLUSTER_ENV (default OPENBLAS_NUM_THREADS
#                           OMP_NUM_THREADS) reach every rank; nothing else of
#                           the caller's environment does. Runs at most
#                           SIM_CLUSTER_TIMEOUT seconds (default 300). The
#                           working folder is kept (unless under /tmp: then /).
#                           CLUSTER_EXEC=1: as a launcher's mpiexec instead
#                           (tests/cluster/mpiexec_on_cluster): the shell is
#                           replaced by mpiexec (its pid, its signals), which
#                           has the caller's whole environment; no -x, no
#                           time limit
#   cluster_nodes           the node names, one a line
#   cluster_holder NODE     the pid holding NODE's namespaces
#   cluster_procs NODE [PATTERN]  pids running in NODE (command line has PATTERN)
#   cluster_workdir DIR     a test's work folder all nodes see: sets work, cd's there
#   cluster_down            tears everything down (see above)

SIM_CLUSTER_HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SIM_CLUSTER_NET=${SIM_CLUSTER_NET:-10.213.39}

# the checkout this library is in: kept visible in the nodes when under /tmp
_cluster_repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)

_cluster_say() { printf 'sim_cluster: %s\n' "$*" >&2; }

# _cluster_ns PID KIND: the namespace PID is in, as net:[4026531840]
_cluster_ns() { readlink "/proc/$1/ns/$2" 2>/dev/null; }

# _cluster_is_holder PID NAME: PID is a holder made here (argv[0] is NAME)
_cluster_is_holder() {
  local argv0
  argv0=$(tr "\\0" "\\n" 2>/dev/null <"/proc/$1/cmdline" | head -n 1)
  [ -n "$argv0" ] && [ "$argv0" = "$2" ]
}

# _cluster_end PID...: TERM, up to 5 s, then KILL; reaps our own children
_cluster_end() {
  local pid i left
  [ $# -gt 0 ] || return 0
  kill -TERM "$@" 2>/dev/null
  for ((i = 0; i < 50; i++)); do
    left=()
    for pid in "$@"; do [ -d "/proc/$pid" ] && ! _cluster_zombie "$pid" && left+=("$pid"); done
    [ ${#left[@]} -eq 0 ] && break
    sleep 0.1
  done
  [ ${#left[@]} -gt 0 ] && kill -KILL "${left[@]}" 2>/dev/null
  for pid in "$@"; do wait "$pid" 2>/dev/null; done
  return 0
}
_cluster_zombie() {
  local state
  state=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1)
  [ "$state" = Z ] || [ "$state" = X ]
}

cluster_check() {
  local c
  if [ "$(id -u)" -ne 0 ]; then echo "skipped: not root (network namespaces, veth pairs and mounts need root)"; return 1; fi
  for c in ip unshare nsenter mpiexec; do
    command -v "$c" >/dev/null 2>&1 || { echo "skipped: no $c on PATH"; return 1; }
  done
  if ! unshare --net --uts --mount true 2>/dev/null; then
    echo "skipped: unshare --net --uts --mount is refused here (a container without CAP_SYS_ADMIN?)"; return 1
  fi
  # veth pairs and a bridge, tried in a throwaway network namespace
  if ! unshare --net sh -c 'ip link add simck0 type veth peer name simck1 && ip link add simckbr type bridge' 2>/dev/null; then
    echo "skipped: cannot make a veth pair or a bridge in a network namespace (kernel modules veth, bridge?)"; return 1
  fi
  return 0
}

cluster_nodes() { awk '{ print $1 }' "${SIM_CLUSTER_DIR:?no cluster is up}/nodes"; }

# cluster_holder NODE: the pid holding NODE's namespaces
cluster_holder() { awk -v r="$1" '$1 == r { print $2 }' "${SIM_CLUSTER_DIR:?no cluster is up}/nodes"; }

# cluster_procs NODE [PATTERN]: the processes running in NODE (its holder
# aside) whose command line has PATTERN (grep), one pid a line
cluster_procs() {
  local h net p state
  h=$(cluster_holder "$1"); net=$(_cluster_ns "$h" net) || return 1
  for p in /proc/[0-9]*; do
    p=${p#/proc/}
    if [ "$p" = "$h" ] || [ "$(_cluster_ns "$p" net)" != "$net" ]; then continue; fi
    state=$(sed 's/.*) //' "/proc/$p/stat" 2>/dev/null | cut -d' ' -f1)
    [ -n "$state" ] && [ "$state" != Z ] && [ "$state" != X ] &&
      tr '\0' ' ' 2>/dev/null <"/proc/$p/cmdline" | grep -q -- "${2:-}" && echo "$p"
  done
  return 0
}

# cluster_workdir DIR: a test's work folder, emptied, that all nodes see:
# every node has /tmp and /dev/shm of its own, so a DIR under them (a build
# tree in /tmp) becomes a link to a folder under /var/tmp
# (SIM_CLUSTER_SHARED), named after DIR and emptied by the next run; sets
# work to the real path and cd's there, or prints "skipped: WHY" and returns
# 1 (the test exits 77)
cluster_workdir() {
  local real moved
  rm -rf "$1" && mkdir -p "$1" && real=$(cd "$1" && pwd -P) || return 1
  case $real/ in
    /tmp/*|/dev/shm/*)
      moved=${SIM_CLUSTER_SHARED:-/var/tmp}/dstrain-cluster-$(printf %s "$real" | cksum | cut -d' ' -f1)
      if ! { rm -rf "$moved" && mkdir -p "$moved" && rmdir "$1" && ln -s "$moved" "$1"; }; then
        echo "skipped: no shared folder for the nodes ($moved)"
        return 1
      fi
      real=$(cd "$moved" && pwd -P) || return 1
      echo "the nodes' shared folder: $real (linked from $1: $1 is under /tmp or /dev/shm, of which every node has its own)"
      case $real/ in
        /tmp/*|/dev/shm/*) echo "skipped: $real is under /tmp or /dev/shm, which the nodes do not share"; return 1 ;;
      esac ;;
  esac
  work=$real
  cd "$work" || return 1
}

cluster_up() {
  local n=${1:?usage: cluster_up N DIR} dir=${2:-${SIM_CLUSTER_DIR:-}} real k pid role tag life
  case $n in [1-9]) ;; *) _cluster_say "cluster_up: N must be 1 to 9, not '$n'"; return 2 ;; esac
  [ -n "$dir" ] || { _cluster_say "cluster_up: no folder given"; return 2; }
  mkdir -p "$dir" || return 2
  real=$(cd "$dir" && pwd -P)
  case $real/ in
    /tmp/*|/dev/shm/*) _cluster_say "cluster_up: $real is under /tmp or /dev/shm, which every node has of its own: use a folder all nodes share"; return 2 ;;
  esac
  if [ -s "$real/cluster.pids" ]; then _cluster_say "cluster_up: a cluster is already up in $real (cluster_down first)"; return 2; fi
  export SIM_CLUSTER_DIR=$real
  tag=sim-cluster-$$-$RANDOM
  life=${SIM_CLUSTER_LIFETIME:-3600}
  : >"$real/cluster.pids"; : >"$real/links"; rm -f "$real/nodes"
  {
    echo "127.0.0.1 localhost"
    for ((k = 1; k <= n; k++)); do echo "$SIM_CLUSTER_NET.$k node$k"; done
  } >"$real/hosts"
  # the trap first: a failure from here on still tears down what was made
  if [ -z "${SIM_CLUSTER_NO_TRAP:-}" ]; then
    trap '_cluster_on_exit' EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
  fi
  for role in switch $(seq -f 'node%g' 1 "$n"); do
    # the holder: unshare execs bash, which execs sleep under the name TAG:ROLE
    # shellcheck disable=SC2016
    unshare --net --uts --mount --propagation private \
      bash -c 'exec -a "$0" sleep "$1"' "$tag:$role" "$life" </dev/null >/dev/null 2>&1 &
    pid=$!
    for ((k = 0; k < 200; k++)); do   # until it has its namespaces and name
      if [ "$(_cluster_ns "$pid" net)" != "$(_cluster_ns $$ net)" ] &&
         [ "$(_cluster_ns "$pid" mnt)" != "$(_cluster_ns $$ mnt)" ] && _cluster_is_holder "$pid" "$tag:$role"; then break; fi
      sleep 0.05
    done
    echo "$role $pid $tag:$role $(_cluster_ns "$pid" net) $(_cluster_ns "$pid" uts) $(_cluster_ns "$pid" mnt)" >>"$real/cluster.pids"
    # a holder still in the host's namespaces would put the bridge or the
    # interfaces there (nsenter -t enters whatever namespace the pid is in)
    if ! _cluster_is_holder "$pid" "$tag:$role" || [ "$(_cluster_ns "$pid" net)" = "$(_cluster_ns $$ net)" ] ||
       [ "$(_cluster_ns "$pid" mnt)" = "$(_cluster_ns $$ mnt)" ] || [ "$(_cluster_ns "$pid" uts)" = "$(_cluster_ns $$ uts)" ]; then
      _cluster_say "cluster_up: the $role holder ($pid) did not start in namespaces of its own"; cluster_down; return 1
    fi
  done
  if ! _cluster_wire "$n" "$real"; then cluster_down; return 1; fi
  _cluster_say "up: $n nodes in $real ($(awk '{ printf "%s%s %s", sep, $1, $2; sep = ", " }' "$real/cluster.pids")), $SIM_CLUSTER_NET.0/24 on a bridge in the switch's namespace"
}

# _cluster_wire N DIR: the bridge, each node's veth pair, address, name and mounts
_cluster_wire() {
  local n=$1 dir=$2 sw k pid
  sw=$(awk '$1 == "switch" { print $2 }' "$dir/cluster.pids")
  nsenter -t "$sw" -n ip link add br0 type bridge || return 1
  echo "switch br0 bridge" >>"$dir/links"
  nsenter -t "$sw" -n ip link set br0 up || return 1
  for ((k = 1; k <= n; k++)); do
    pid=$(awk -v r="node$k" '$1 == r { print $2 }' "$dir/cluster.pids")
    nsenter -t "$sw" -n ip link add "sw-node$k" type veth peer name eth0 netns "$pid" || return 1
    echo "switch sw-node$k veth, peer node$k eth0 $SIM_CLUSTER_NET.$k/24" >>"$dir/links"
    nsenter -t "$sw" -n ip link set "sw-node$k" master br0 up || return 1
    nsenter -t "$pid" -n sh -c "ip link set lo up && ip addr add $SIM_CLUSTER_NET.$k/24 dev eth0 && ip link set eth0 up" || return 1
    nsenter -t "$pid" -u hostname "node$k" || return 1
    # a checkout (or SIM_CLUSTER_KEEP's folders) under /tmp stays visible in
    # the node's own /tmp: bound aside in $dir, then back at its path
    local keep=() kp i=0 cmd=""
    for kp in "$_cluster_repo" ${SIM_CLUSTER_KEEP:-}; do
      case $kp/ in /tmp/*) keep+=("$kp") ;; esac
    done
    for kp in "${keep[@]}"; do
      mkdir -p "$dir/keep/$k.$i" || return 1
      cmd+="mount --bind '$kp' '$dir/keep/$k.$i' && "
      i=$((i + 1))
    done
    cmd+="mount -t tmpfs -o mode=1777 sim-tmp /tmp && mount -t tmpfs -o mode=1777 sim-shm /dev/shm && "
    i=0
    for kp in "${keep[@]}"; do
      cmd+="mkdir -p '$kp' && mount --bind '$dir/keep/$k.$i' '$kp' && umount '$dir/keep/$k.$i' && "
      i=$((i + 1))
    done
    nsenter -t "$pid" -m sh -c "$cmd mount --bind '$dir/hosts' /etc/hosts" || return 1
    echo "node$k $pid" >>"$dir/nodes"
  done
}

cluster_mpiexec() {
  local dir=${SIM_CLUSTER_DIR:?no cluster is up (cluster_up first)} head slots hostfile k=0 s v wd=$PWD
  local envs=() xs=()
  head=$(awk '$1 == "node1" { print $2 }' "$dir/nodes" 2>/dev/null)
  [ -n "$head" ] || { _cluster_say "cluster_mpiexec: no node1 in $dir/nodes"; return 2; }
  read -r -a slots <<<"${CLUSTER_SLOTS:-$(cluster_nodes | sed 's/.*/2/' | tr '\n' ' ')}"
  hostfile=$dir/hostfile-$(IFS=-; echo "${slots[*]}")
  : >"$hostfile"
  for s in "${slots[@]}"; do k=$((k + 1)); echo "node$k slots=$s" >>"$hostfile"; done
  case $(pwd -P)/ in /tmp/*|/dev/shm/*) wd=/ ;; esac
  [ "$(id -u)" -eq 0 ] && xs+=(--allow-run-as-root)
  # shellcheck disable=SC2054  # "self,vader,tcp" is one argument
  local run=(mpiexec --hostfile "$hostfile" --mca plm rsh --mca plm_rsh_agent "$SIM_CLUSTER_HERE/node_rsh"
             --mca oob_tcp_if_include "$SIM_CLUSTER_NET.0/24" --mca btl_tcp_if_include "$SIM_CLUSTER_NET.0/24"
             --mca btl self,vader,tcp)
  if [ -n "${CLUSTER_EXEC:-}" ]; then   # a launcher's mpiexec: its environment, its pid
    exec nsenter -t "$head" -n -u -m --wd="$wd" env SIM_CLUSTER_DIR="$dir" "${run[@]}" "${xs[@]}" "$@"
  fi
  # the caller's Open MPI settings, and CLUSTER_ENV's variables for every rank
  while IFS= read -r v; do envs+=("$v"); done < <(env | grep '^OMPI_')
  for v in ${CLUSTER_ENV-OPENBLAS_NUM_THREADS OMP_NUM_THREADS}; do
    [ -n "${!v+set}" ] && envs+=("$v=${!v}") && xs+=(-x "$v")
  done
  [ -n "${LD_LIBRARY_PATH:-}" ] && envs+=("LD_LIBRARY_PATH=$LD_LIBRARY_PATH")
  # in the background, waited for: a signal's trap (the test's end) runs at
  # once rather than when the job ends
  timeout -k 10 "${SIM_CLUSTER_TIMEOUT:-300}" \
    nsenter -t "$head" -n -u -m --wd="$wd" \
    env -i PATH="$PATH" HOME="${HOME:-/}" SIM_CLUSTER_DIR="$dir" "${envs[@]}" "${run[@]}" "${xs[@]}" "$@" &
  wait $!
}

cluster_down() {
  local dir=${SIM_CLUSTER_DIR:-} role pid name net p k nets=() holders=() names=() rest=() mine=() what
  [ -n "$dir" ] && [ -s "$dir/cluster.pids" ] || return 0
  rm -f "$dir/nodes"   # the agent refuses from now on
  while read -r role pid name net _; do
    nets+=("$net"); holders+=("$pid"); names+=("$name")
  done <"$dir/cluster.pids"
  # what runs inside a namespace made here, other than the holders: a job's leftovers
  for p in /proc/[0-9]*; do
    p=${p#/proc/}
    [ "$p" = $$ ] && continue
    net=$(_cluster_ns "$p" net) || continue
    for ((k = 0; k < ${#nets[@]}; k++)); do
      [ "$net" = "${nets[$k]}" ] && [ "$p" != "${holders[$k]}" ] && { rest+=("$p"); break; }
    done
  done
  if [ ${#rest[@]} -gt 0 ]; then
    what=$(for p in "${rest[@]}"; do printf ' %s(%s)' "$p" "$(cat "/proc/$p/comm" 2>/dev/null)"; done)
    _cluster_say "down: ending processes left in the cluster's namespaces:$what"
    _cluster_end "${rest[@]}"
  fi
  for ((k = 0; k < ${#holders[@]}; k++)); do
    if _cluster_is_holder "${holders[$k]}" "${names[$k]}"; then mine+=("${holders[$k]}")
    else wait "${holders[$k]}" 2>/dev/null; fi   # gone already (or its pid reused: not ours to end)
  done
  _cluster_end "${mine[@]}"
  for ((k = 0; k < ${#holders[@]}; k++)); do
    if _cluster_is_holder "${holders[$k]}" "${names[$k]}" && ! _cluster_zombie "${holders[$k]}"; then
      _cluster_say "down: holder ${names[$k]} (${holders[$k]}) would not end"; return 1
    fi
  done
  mv "$dir/cluster.pids" "$dir/cluster.pids.down"
  _cluster_say "down: ended holders ${mine[*]:-(none left)}"
}

_cluster_on_exit() {
  local rc=$?
  cluster_down
  exit "$rc"
}

# ---- as a command -------------------------------------------------------------
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  usage() {
    cat <<'EOF'
usage: tests/cluster/sim_cluster.sh [--nodes N] [--slots "S1 S2 ..."] [--dir DIR] -- MPIEXEC ARGS...
       tests/cluster/sim_cluster.sh --check

Builds a cluster of N nodes (default 2) on this machine, runs
`mpiexec MPIEXEC ARGS` on it from node1 and tears it down, whatever the job
does; exits with mpiexec's status (77 when a cluster cannot be built here).
Needs root, ip, unshare, nsenter and Open MPI.

  --nodes N     nodes node1..nodeN (1-9): network, UTS and mount namespaces
                each, joined by a bridge in a namespace of its own, addresses
                SIM_CLUSTER_NET.K/24 (default 10.213.39.K); private /tmp and
                /dev/shm; the rest of the file tree shared
  --slots "..." slots per node in the hostfile (default 2 each)
  --dir DIR     the cluster's state (hostfile, hosts, pids); outside /tmp
                (default ./sim-cluster)
  --check       says whether a cluster can be built here

Example, from the repository root after building:
  tests/cluster/sim_cluster.sh --nodes 3 --slots "2 1 1" -- -np 4 \
      ./build/dstrain train --model tiny --synthetic --steps 5 --batch 2

A test sources this file for cluster_check, cluster_up, cluster_mpiexec and
cluster_down (see the comment at its top).
EOF
  }
  nodes=2 dir=$PWD/sim-cluster
  while [ $# -gt 0 ]; do
    case $1 in
      -h|--help) usage; exit 0 ;;
      --check) cluster_check && echo "a cluster can be built here"; exit $? ;;
      --nodes) nodes=${2:?--nodes needs a number}; shift 2 ;;
      --slots) export CLUSTER_SLOTS=${2:?--slots needs a list}; shift 2 ;;
      --dir) dir=${2:?--dir needs a folder}; shift 2 ;;
      --) shift; break ;;
      *) usage >&2; exit 2 ;;
    esac
  done
  [ $# -gt 0 ] || { usage >&2; exit 2; }
  cluster_check || exit 77
  cluster_up "$nodes" "$dir" || exit 1
  cluster_mpiexec "$@"
fi
