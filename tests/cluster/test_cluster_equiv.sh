#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# Ranks on several nodes train as the same ranks on one node (issue 39): on a
# cluster simulated on this machine (sim_cluster.sh: 3 nodes, each its own
# network, UTS and mount namespaces, /tmp and /dev/shm; a bridge between
# them), FP64, tiny model, synthetic data, 5 steps, global batch 8:
#  - ranks land where the hostfile says (2+2 on node1/node2, 2+1+1 on
#    node1..node3), each node with its own /tmp;
#  - the run's start names the layout once ("ranks on 2 nodes: node1 ranks
#    0-1, node2 ranks 2-3");
#  - the 2-node checkpoint resumes on 2 ranks of one node (another layout,
#    the same global batch) and after 2 more steps is within 1e-12 of the
#    one-node 4-rank checkpoint resumed on 4;
#  - 4 ranks as 2+2 on 2 nodes and as 2+1+1 on 3 nodes write checkpoints
#    bit-identical to 4 ranks on one node (mpiexec -np 4 on the host): every
#    dataset, and every attribute but the run's random id and the attributes'
#    checksum that covers it;
#  - the same within 1e-12 (relative, per tensor) of one rank with batch 8;
#  - a job's leftovers inside the nodes are ended by cluster_down, and
#    nothing of the cluster remains: no holder, no process in its
#    namespaces, the host's network interfaces as before; a test ended by
#    TERM mid-job (after a job that failed) tears its cluster down in its trap.
# usage: test_cluster_equiv.sh DSTRAIN WORKDIR [PYTHON]   (a WORKDIR under /tmp becomes a link to /var/tmp: sim_cluster.sh)
# Not root, no ip/unshare/nsenter, or namespaces refused: "skipped: ..." and exit 77.
set -uo pipefail
bin=$(readlink -f "$1") work=$2 py=${3:-/usr/bin/python3}
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../lib/checks.sh
. "$here/../lib/checks.sh"
# shellcheck source=sim_cluster.sh
. "$here/sim_cluster.sh"
cluster_check || exit 77
cluster_workdir "$work" || exit 77   # the shared cluster folder
t0=$(date +%s.%N)
secs() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }

args=(train --model tiny --synthetic --precision fp64 --steps 5 --seed 11 --max-frames 160
      --print-every 0 --checkpoint-every 5 --check-sync 1 --allreduce mpi --timeout 60)
ck=step-00000005.h5
# run NAME COMMAND...: the run's output in NAME.out; ok when it exits 0
run() {
  local name=$1 t; shift
  t=$(date +%s.%N)
  if "$@" >"$work/$name.out" 2>&1; then ok; echo "$name: $(secs "$t") s"
  else bad "$name failed: $(tail -5 "$work/$name.out")"; fi
}

# the references on the host: 4 ranks on one node, one rank at the same global batch
run ref4 timeout 120 mpiexec -np 4 "$bin" "${args[@]}" --batch 2 --checkpoint-dir "$work/ref4"
run ref1 timeout 120 "$bin" "${args[@]}" --batch 8 --checkpoint-dir "$work/ref1"

links_before=$(ip -o link | awk -F': ' '{ print $2 }')
cluster_up 3 "$work/cluster" || { bad "cluster_up failed"; exit 1; }
echo "cluster up at $(secs "$t0") s"

# placement: each rank's host and /tmp (Open MPI's session folder of its node only)
for layout in "2 2" "2 1 1"; do
  want=$(k=0; n=0; for s in $layout; do n=$((n + 1)); for ((i = 0; i < s; i++)); do
           echo "$k node$n ompi.node$n.0"; k=$((k + 1)); done; done)
  # shellcheck disable=SC2016
  got=$(CLUSTER_SLOTS=$layout cluster_mpiexec -np 4 sh -c 'echo "$OMPI_COMM_WORLD_RANK $(hostname) $(cd /tmp && ls -d ompi.* 2>/dev/null)"' 2>&1 | sort -n)
  if [ "$got" = "$want" ]; then ok; echo "layout $layout: $(echo "$got" | cut -d' ' -f2 | tr '\n' ' ')"
  else bad "layout $layout: ranks, hosts and /tmp: $got (want: $want)"; fi
done

CLUSTER_SLOTS="2 2" run c22 cluster_mpiexec -np 4 "$bin" "${args[@]}" --batch 2 --checkpoint-dir "$work/c22"
CLUSTER_SLOTS="2 1 1" run c211 cluster_mpiexec -np 4 "$bin" "${args[@]}" --batch 2 --checkpoint-dir "$work/c211"
for r in c22 c211; do
  if grep -q "^dstrain train: .* 4 ranks x batch 2" "$work/$r.out"; then ok
  else bad "$r: no banner with 4 ranks: $(head -3 "$work/$r.out")"; fi
done
# the start names the layout once: which ranks run on which node
if grep -qx "ranks on 2 nodes: node1 ranks 0-1, node2 ranks 2-3" "$work/c22.out" &&
   grep -qx "ranks on 3 nodes: node1 ranks 0-1, node2 rank 2, node3 rank 3" "$work/c211.out" &&
   [ "$(grep -c '^ranks on ' "$work/c22.out")" -eq 1 ]; then ok
else bad "the layout line: $(grep '^ranks on ' "$work/c22.out" "$work/c211.out")"; fi

# resume on another layout: the 2-node checkpoint goes on for 2 steps on 2
# ranks of one node (the same global batch), against the one-node 4-rank
# checkpoint going on as 4 ranks; FP64, within 1e-12 (the sums' order differs)
resume=(--steps 7 --resume auto --checkpoint-every 7)
run c22_on2 timeout 120 mpiexec -np 2 "$bin" "${args[@]}" "${resume[@]}" --batch 4 --checkpoint-dir "$work/c22"
run ref4_on4 timeout 120 mpiexec -np 4 "$bin" "${args[@]}" "${resume[@]}" --batch 2 --checkpoint-dir "$work/ref4"
if grep -q "resumed from .*step-00000005.h5: step 5" "$work/c22_on2.out"; then ok
else bad "the 2-node checkpoint did not resume on 2 ranks: $(tail -3 "$work/c22_on2.out")"; fi

if "$py" - "$work" "$ck" <<'PY'
import sys, h5py, numpy as np
w, ck = sys.argv[1], sys.argv[2]
f = {r: h5py.File(f"{w}/{r}/{ck}", "r") for r in ("ref4", "ref1", "c22", "c211")}
def items(h):
    d, a = {}, {}
    def visit(name, o):
        for k, v in o.attrs.items():
            a[f"{name}@{k}"] = v
        if isinstance(o, h5py.Dataset):
            d[name] = o[()]
    for k, v in h.attrs.items():
        a[f"/@{k}"] = v
    h.visititems(visit)
    return d, a
# random per run, and the checksum over the attributes that covers it
differ = {"/@run_id", "/@attributes_crc32"}
fail = 0
ref_d, ref_a = items(f["ref4"])
for r in ("c22", "c211"):
    d, a = items(f[r])
    bad = sorted(set(d) ^ set(ref_d)) + sorted(set(a) ^ set(ref_a))
    bad += [n for n in d if n in ref_d and (d[n].dtype != ref_d[n].dtype or d[n].shape != ref_d[n].shape
                                            or d[n].tobytes() != ref_d[n].tobytes())]
    bad += [n for n in a if n in ref_a and n not in differ and np.asarray(a[n]).tobytes() != np.asarray(ref_a[n]).tobytes()]
    print(f"{r} vs 4 ranks on one node: {len(d)} datasets, {len(a) - len(differ)} attributes compared, "
          + ("bit-identical" if not bad else f"{len(bad)} differ: {bad[:5]}"))
    fail |= bool(bad)
# one rank at the same global batch: each tensor of the parameters and the
# BatchNorm statistics within 1e-12 (its largest difference over its largest
# value, and in norm); the optimizer's state as a whole (a conv bias before
# BatchNorm has no true gradient: its momentum is rounding noise, 1e-8 apart)
one, _ = items(f["ref1"])
worst, where = 0.0, None
for n, a in ref_d.items():
    if n.startswith(("params/", "state/")):
        b = one[n]
        d = max(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-300),
                np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-300))
        if d > worst:
            worst, where = d, n
opt = [n for n in ref_d if n.startswith("optim/slot")]
a = np.concatenate([ref_d[n].ravel() for n in opt]); b = np.concatenate([one[n].ravel() for n in opt])
dopt = np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-300)
print(f"4 ranks (any layout) vs 1 rank with batch 8: parameters and BatchNorm statistics "
      f"max relative difference {worst:.3g} ({where}); optimizer state {dopt:.3g} (norm of all {len(opt)} tensors)")
fail |= not (worst <= 1e-12 and dopt <= 1e-12)
# resumed on another layout: step 7 of the 2-node run resumed on 2 ranks
# against step 7 of the one-node 4-rank run resumed on 4
try:
    r2, _ = items(h5py.File(f"{w}/c22/step-00000007.h5", "r"))
    r4, _ = items(h5py.File(f"{w}/ref4/step-00000007.h5", "r"))
    worst = max(np.linalg.norm(r2[n] - r4[n]) / max(np.linalg.norm(r4[n]), 1e-300)
                for n in r4 if n.startswith(("params/", "state/")))
    print(f"2 nodes x 2 ranks resumed on 2 ranks of one node vs 4 ranks resumed on 4: "
          f"max relative difference {worst:.3g}")
    fail |= not worst <= 1e-12
except OSError as e:
    print(f"no step-7 checkpoint to compare: {e}")
    fail = 1
sys.exit(fail)
PY
then ok; else bad "checkpoints differ (see above)"; fi

# a node with other data: the same path, /tmp/d.h5 (each node's own /tmp),
# holds other recordings on node2; every rank refuses the run, rank 0 says so
# once naming both nodes, and the job ends at once (no watchdog wait)
mkdir -p "$work/feat" "$work/re"
"$py" "$here/../lib/tones.py" "$work/feat" >/dev/null
( cd "$work/feat" && "$bin" prep manifest ok.csv --out "$work/one.h5" --quiet >/dev/null 2>&1 )
"$py" "$here/../lib/rerecord.py" "$work/feat" "$work/re"
cp "$work/feat/ok.csv" "$work/re/ok.csv"
( cd "$work/re" && "$bin" prep manifest ok.csv --out "$work/other.h5" --quiet >/dev/null 2>&1 )
for n in 1 2; do
  src=$work/one.h5; [ "$n" -eq 2 ] && src=$work/other.h5
  nsenter -t "$(cluster_holder "node$n")" -m cp "$src" /tmp/d.h5 || bad "copy to node$n's /tmp"
done
t=$(date +%s.%N)
CLUSTER_SLOTS="1 1" cluster_mpiexec -np 2 "$bin" train --train /tmp/d.h5 --steps 1 --batch 1 \
  --print-every 0 --timeout 60 >"$work/data.out" 2>&1
rc=$? took=$(secs "$t")
said=$(grep -c "differs between ranks" "$work/data.out")
if [ "$rc" -ne 0 ] && [ "$said" -eq 1 ] && grep -q "on node1" "$work/data.out" &&
   grep -q "on node2" "$work/data.out" && ! grep -q "waited .* for the other ranks" "$work/data.out"; then
  ok; echo "other data on node2: refused in $took s, said once: $(grep -o -- '--train content[^;.]*' "$work/data.out" | head -1)"
else bad "other data on node2: exit $rc, said $said times, $took s: $(tail -c 800 "$work/data.out")"; fi

# leftovers: processes that escape the job (setsid) inside the nodes are ended by cluster_down
# shellcheck disable=SC2016
CLUSTER_SLOTS="1 1 1" cluster_mpiexec -np 3 sh -c 'setsid sleep 300 </dev/null >/dev/null 2>&1 &' >/dev/null 2>&1
cl_nets=$(awk '{ print $4 }' "$SIM_CLUSTER_DIR/cluster.pids")
cl_holders=$(awk '{ print $2 }' "$SIM_CLUSTER_DIR/cluster.pids")
in_cluster() {   # pids of processes in the cluster's network namespaces
  local p
  for p in /proc/[0-9]*; do
    grep -qxF "$(readlink "$p/ns/net" 2>/dev/null)" <<<"$cl_nets" && running "${p#/proc/}" && echo "${p#/proc/}"
  done
}
leftover=$(in_cluster | grep -vxF "$cl_holders")
if [ "$(wc -w <<<"$leftover")" -eq 3 ]; then ok; else bad "3 escaped sleeps expected in the nodes, found: ${leftover:-none}"; fi
if cluster_down; then ok; else bad "cluster_down failed"; fi
leftover=$(in_cluster)
if [ -z "$leftover" ]; then ok
else bad "processes left in the cluster's namespaces: $(for p in $leftover; do tr '\0' ' ' <"/proc/$p/cmdline"; echo; done)"; fi
if [ "$(ip -o link | awk -F': ' '{ print $2 }')" = "$links_before" ]; then ok
else bad "the host's interfaces changed: $(ip -o link | awk -F': ' '{ print $2 }' | tr '\n' ' ')"; fi
if cluster_down; then ok; else bad "a second cluster_down failed"; fi

# a test ended by a signal mid-job (after a job that failed): its trap tears the cluster down
tdir=$work/term
# shellcheck disable=SC2016
bash -c '. "$1"; cluster_up 2 "$2" || exit 1; cluster_mpiexec -np 2 false; echo "$?" >"$2/false.rc"
         cluster_mpiexec -np 2 sleep 300; echo "the job ended before the signal"' sh "$here/sim_cluster.sh" "$tdir" \
  >"$work/term.out" 2>&1 &
child=$!
for ((i = 0; i < 300; i++)); do   # until both ranks sleep (at most 30 s)
  [ -s "$tdir/cluster.pids" ] && cl_nets=$(awk '{ print $4 }' "$tdir/cluster.pids") &&
    [ "$(for p in $(in_cluster); do tr '\0' ' ' 2>/dev/null <"/proc/$p/cmdline"; echo; done | grep -c '^sleep 300 $')" -ge 2 ] && break
  sleep 0.1
done
kill -TERM "$child"; wait "$child"; rc=$?
leftover=$(in_cluster)
if [ "$rc" = 143 ] && [ "$(cat "$tdir/false.rc" 2>/dev/null)" != 0 ] && [ -z "$leftover" ] && [ -s "$tdir/cluster.pids.down" ]; then ok
else bad "a test ended by TERM: exit $rc (the failed job: $(cat "$tdir/false.rc" 2>/dev/null)), left: ${leftover:-none}: $(cat "$work/term.out")"; fi
grep '^sim_cluster: down' "$work/term.out"

echo "test_cluster_equiv: $pass passed, $fail failed in $(secs "$t0") s"
[ "$fail" -eq 0 ]
