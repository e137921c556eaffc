#!/usr/bin/env bash
# Runs a command with the CPU ops forced onto one instruction set
# (DSTRAIN_CPU_ISA), if this host can run it and it is not already the
# host's default path (which the plain tests run): otherwise prints why and
# exits 77, which ctest reports as skipped.
# usage: with_isa.sh ISA DSTRAIN COMMAND...
set -uo pipefail
isa=$1 bin=$2
shift 2
line=$(env -u DSTRAIN_CPU_ISA "$bin" version 2>&1 | sed -n 's/^cpu ops: *//p')
[ -n "$line" ] || { echo "FAIL: '$bin version' prints no 'cpu ops:' line" >&2; exit 1; }
default=${line%% *}
runs=" ${line##*runs } "
if [[ $runs != *" $isa "* ]]; then
  echo "skipped: this CPU cannot run the $isa ops (it runs:${runs% })"
  exit 77
fi
if [ "$isa" = "$default" ]; then
  echo "skipped: $isa is this host's default path, which the plain tests run"
  exit 77
fi
forced=$(DSTRAIN_CPU_ISA=$isa "$bin" version 2>&1 | sed -n 's/^cpu ops: *//p')
[ "${forced%% *}" = "$isa" ] || { echo "FAIL: DSTRAIN_CPU_ISA=$isa gives '$forced'" >&2; exit 1; }
echo "with DSTRAIN_CPU_ISA=$isa (default here: $default)"
export DSTRAIN_CPU_ISA=$isa
exec "$@"
