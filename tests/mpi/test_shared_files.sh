#!/usr/bin/env bash
# Every rank must see the files rank 0 does (issue 27): on one machine a
# rank is given a node-local view with a mount namespace of its own
# (unshare -m): an empty tmpfs over the checkpoint folder, or another
# feature file bound over the training file's path. Each run is refused,
# naming the rank and its node; with nothing hidden the run goes on. A
# requeued job (SLURM_RESTART_COUNT) that finds no checkpoint says so.
# usage: test_shared_files.sh DSTRAIN PYTHON   (root, for mounts; else skipped)
set -uo pipefail
bin=$(readlink -f "$1") py=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
. "$(dirname "$0")/../lib/checks.sh"
if ! unshare -m true 2>/dev/null; then
  echo "skipped: unshare -m is not permitted here (needs root or user namespaces)"
  exit 77
fi
mkdir -p "$work/feat" "$work/ck"
"$py" "$(dirname "$0")/../lib/tones.py" "$work/feat"
cd "$work/feat" || exit 1
"$bin" prep manifest ok.csv --out out.h5 --quiet >/dev/null 2>&1
printf 'tone0.wav,other words\ntone1.wav,not the same\ntone2.wav,at all here\n' > other.csv
"$bin" prep manifest other.csv --out other.h5 --quiet >/dev/null 2>&1
# rank.sh MODE COMMAND...: rank 1 runs COMMAND in a mount namespace of its own
cat > "$work/rank.sh" <<SH
#!/usr/bin/env bash
mode=\$1; shift
if [ "\${OMPI_COMM_WORLD_RANK:-0}" = 1 ]; then
  case \$mode in
    dir)  exec unshare -m sh -c 'mount -t tmpfs tmpfs "$work/ck" && exec "\$@"' sh "\$@" ;;
    data) exec unshare -m sh -c 'mount --bind "$work/feat/other.h5" "$work/feat/out.h5" && exec "\$@"' sh "\$@" ;;
  esac
fi
exec "\$@"
SH
chmod +x "$work/rank.sh"
host=$(hostname)

out=$(timeout 120 mpiexec -np 2 "$work/rank.sh" dir "$bin" train --synthetic --steps 2 --print-every 0 \
        --checkpoint-dir "$work/ck" --timeout 60 2>&1); rc=$?
if [ "$rc" -ne 0 ] && grep -q "rank 1 on $host does not see the checkpoint folder $work/ck" <<<"$out"; then ok
else bad "a rank with a node-local checkpoint folder: exit $rc: $(tail -5 <<<"$out")"; fi

out=$(timeout 120 mpiexec -np 2 "$work/rank.sh" data "$bin" train --model tiny --train out.h5 --steps 1 \
        --batch 1 --print-every 0 --timeout 60 2>&1); rc=$?
# (the ranks' agreement on their options names it first, issue 33)
if [ "$rc" -ne 0 ] && grep -Eq -e "--train content differs between ranks: rank 0 has fingerprint [0-9a-f]{8} of out.h5 on $host, rank 1 has fingerprint [0-9a-f]{8} of out.h5 on $host" <<<"$out"; then ok
else bad "a rank reading another feature file: exit $rc: $(tail -5 <<<"$out")"; fi

out=$(timeout 120 mpiexec -np 2 "$work/rank.sh" none "$bin" train --model tiny --train out.h5 --steps 1 \
        --batch 1 --print-every 0 --checkpoint-dir "$work/ck" --timeout 60 2>&1); rc=$?
if [ "$rc" -eq 0 ] && [ -z "$(ls -A "$work/ck" | grep dstrain-shared)" ]; then ok
else bad "ranks sharing their files: exit $rc, left: $(ls -A "$work/ck"): $(tail -3 <<<"$out")"; fi

mkdir -p "$work/empty"
out=$(SLURM_RESTART_COUNT=1 "$bin" train --synthetic --steps 1 --print-every 0 --resume auto \
        --checkpoint-dir "$work/empty" 2>&1); rc=$?
if [ "$rc" -eq 0 ] && grep -q "warning: this job was requeued (SLURM_RESTART_COUNT=1) but .* holds no checkpoint" <<<"$out"; then ok
else bad "a requeue finding no checkpoint: exit $rc: $out"; fi

echo "test_shared_files: $pass passed, $fail failed"; [ "$fail" -eq 0 ]
