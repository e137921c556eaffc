#!/usr/bin/env bash
# A forced instruction set the host cannot run, or this build lacks, or a
# name that is none, is refused before any op runs: non-zero exit, a message
# naming DSTRAIN_CPU_ISA, the value and what this CPU runs; `version` says
# it too. A set the host runs is taken and said.
# usage: refused.sh DSTRAIN
set -uo pipefail
bin=$1
. "$(dirname "$0")/../lib/checks.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
line=$(env -u DSTRAIN_CPU_ISA "$bin" version | sed -n 's/^cpu ops: *//p')
runs=" ${line##*runs } "
echo "this host: $line"
# the sets no x86-64 host runs with an aarch64 build and the reverse, and a non-name
case $(uname -m) in
  x86_64) lacking=neon ;;
  aarch64) lacking=avx512 ;;
  *) lacking=avx2 ;;
esac
for want in "$lacking" sse9 $(for s in avx512 avx2; do [[ $runs == *" $s "* ]] || echo "$s"; done); do
  if DSTRAIN_CPU_ISA=$want "$bin" train --model tiny --synthetic --steps 1 --batch 2 --print-every 0 \
       >"$work/out" 2>&1; then
    bad "DSTRAIN_CPU_ISA=$want: train ran"
  elif grep -q "DSTRAIN_CPU_ISA=$want: .*this CPU runs" "$work/out"; then ok
  else bad "DSTRAIN_CPU_ISA=$want: no clear refusal: $(tail -2 "$work/out")"; fi
  DSTRAIN_CPU_ISA=$want "$bin" version | grep -q "^cpu ops: *refused: DSTRAIN_CPU_ISA=$want" && ok ||
    bad "DSTRAIN_CPU_ISA=$want: version does not say it is refused"
done
# every set the host runs is taken, and the run says which
for s in ${runs}; do
  if DSTRAIN_CPU_ISA=$s "$bin" train --model tiny --synthetic --steps 1 --batch 2 --print-every 0 \
       >"$work/out" 2>&1; then ok; else bad "DSTRAIN_CPU_ISA=$s: $(tail -2 "$work/out")"; fi
  DSTRAIN_CPU_ISA=$s "$bin" version | grep -q "^cpu ops: *$s (forced: DSTRAIN_CPU_ISA=$s)" && ok ||
    bad "DSTRAIN_CPU_ISA=$s: version does not name it"
done
echo "cpu_isa_refused: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
