#!/usr/bin/env bash
# Out of memory on the GPU is a clear error, not a crash: a ds2 batch far
# beyond any GPU's memory (2000 utterances of 30 s: about 8 GB of host
# batches, which the host holds, and hundreds of GB of activations, which no
# GPU does) must end `dstrain train` with a non-zero status (no
# signal, so no abort or segfault) and a message that says "out of memory"
# and names the limits to lower: the batch, the length limit and the
# precision (as train.c's planned() words it).
# usage: out_of_memory.sh DSTRAIN [WORKDIR]
set -uo pipefail
bin=$1 work=${2:-$(mktemp -d)}
. "$(dirname "$0")/cuda_device.sh"
require_cuda_device "$bin"
mkdir -p "$work"
pass=0 fail=0
ok()  { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*" >&2; }

out=$work/oom.out
timeout 300 "$bin" train --device cuda --model ds2 --synthetic --batch 2000 --max-frames 3000 \
  --steps 1 --print-every 0 >"$out" 2>&1
rc=$?
echo "dstrain exited with status $rc:"
tail -5 "$out"
# 124: the timeout; above 128: killed by a signal (abort 134, segfault 139, OOM killer 137)
if [ $rc -ne 0 ] && [ $rc -ne 124 ] && [ $rc -le 128 ]; then ok
else bad "expected a clean failure (status 1..128, not 124), got $rc"; fi
# the error itself (the start-up banner names the batch too, so it does not count)
msg=$(grep "out of memory" "$out")
[ -n "$msg" ] && ok || bad "no \"out of memory\" message"
for want in "batch 2000" "length limit" "precision float32"; do
  case $msg in *"$want"*) ok ;; *) bad "the out-of-memory message does not say \"$want\"" ;; esac
done
if grep -qiE "core dumped|aborted|segmentation fault|terminate called" "$out"; then
  bad "the run crashed instead of failing"
else ok; fi

echo "gpu_out_of_memory: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
