#!/usr/bin/env bash
# A resume on 4 ranks reads the checkpoint once: rank 0 opens it, the others
# receive what it holds (weights, BatchNorm statistics, the optimizer's
# state and the position) and open no checkpoint file at all, counted with
# strace on each rank's openat calls; and the resumed run ends where a run
# straight through does, bit for bit.
# usage: test_resume_once.sh DSTRAIN   (needs strace; skipped without it)
set -uo pipefail
bin=$(readlink -f "$1")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
. "$(dirname "$0")/../lib/checks.sh"
command -v strace >/dev/null || { echo "skipped: strace is not installed (scripts/install-deps.sh)"; exit 77; }
cat > "$work/rank.sh" <<SH
#!/usr/bin/env bash
exec strace -f -qq -e trace=openat,open -o "$work/trace.\${OMPI_COMM_WORLD_RANK:-0}" "\$@"
SH
chmod +x "$work/rank.sh"
common=(train --model tiny --synthetic --precision fp64 --batch 2 --seed 5 --print-every 0
        --checkpoint-every 2 --timeout 120)
mpiexec -np 4 "$bin" "${common[@]}" --steps 4 --checkpoint-dir "$work/straight" >/dev/null 2>&1
mpiexec -np 4 "$bin" "${common[@]}" --steps 2 --checkpoint-dir "$work/resumed" >/dev/null 2>&1
out=$(timeout 300 mpiexec -np 4 "$work/rank.sh" "$bin" "${common[@]}" --steps 4 \
        --checkpoint-dir "$work/resumed" --resume auto 2>&1); rc=$?
if [ "$rc" -eq 0 ] && grep -q "resumed from .*step-00000002.h5" <<<"$out"; then ok
else bad "resume on 4 ranks: exit $rc: $(tail -3 <<<"$out")"; fi
opens() { grep -c 'step-0000000[0-9]\.h5"' "$work/trace.$1" 2>/dev/null; }
for k in 1 2 3; do
  n=$(opens $k)
  if [ "${n:-x}" = 0 ]; then ok; else bad "rank $k opened a checkpoint ${n:-?} times"; fi
done
n0=$(opens 0)
if [ "${n0:-0}" -ge 1 ]; then ok; else bad "rank 0 opened no checkpoint (strace saw nothing?)"; fi
echo "checkpoint opens: rank 0 $n0, ranks 1-3 $(opens 1) $(opens 2) $(opens 3)"
if h5diff -q "$work/straight/step-00000004.h5" "$work/resumed/step-00000004.h5" /params /params &&
   h5diff -q "$work/straight/step-00000004.h5" "$work/resumed/step-00000004.h5" /optim /optim; then ok
else bad "the resumed run's parameters differ from the straight run's"; fi
echo "test_resume_once: $pass passed, $fail failed"; [ "$fail" -eq 0 ]
