#!/usr/bin/env bash
# What checkpoints cost a training run on this machine's CPU: the same
# synthetic run of MODEL with no checkpoint, with --checkpoint-write sync and
# with background (the default), a save every EVERY steps (ds2 with AdamW:
# about 1.04 GB each), and optionally the same with an older dstrain
# (BEFORE=path: a binary without --checkpoint-write, whose saves were all
# synchronous). Per run: wall time, the extra wall time per save over the
# run without checkpoints (what a save really costs, the background write's
# competition for the cores included), and, from --log, the stall each save
# caused (the copy out, plus any wait for the save before; with sync the
# write too) and its write time.
# usage: bench/checkpoint-stall.sh   (env: MODEL=ds2 BATCH=2 FRAMES=200 STEPS=9
#        EVERY=2 DSTRAIN=build/dstrain BEFORE= WORK=tmpdir)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
bin=${DSTRAIN:-$here/build/dstrain} before=${BEFORE:-}
model=${MODEL:-ds2} batch=${BATCH:-2} frames=${FRAMES:-200} steps=${STEPS:-9} every=${EVERY:-2}
work=${WORK:-$(mktemp -d)}
mkdir -p "$work"
[ -n "${WORK:-}" ] || trap 'rm -rf "$work"' EXIT
py=/usr/bin/python3
saves=$((steps / every + (steps % every ? 1 : 0)))   # every EVERY steps, and the run's end
common=(train --model "$model" --synthetic --batch "$batch" --max-frames "$frames" --steps "$steps"
        --optimizer adamw --print-every 0)
now() { date +%s.%N; }

run() {   # NAME BIN [OPTIONS...]: prints the wall seconds
  local name=$1 b=$2 t0 t1; shift 2
  rm -rf "$work/$name"
  t0=$(now)
  "$b" "${common[@]}" --log "$work/$name.jsonl" "$@" >"$work/$name.out" 2>&1 ||
    { echo "checkpoint-stall: $name failed: $(tail -2 "$work/$name.out")" >&2; exit 1; }
  t1=$(now)
  awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }'
}

summary() {   # LOG: mean stall and write time of its checkpoint records
  "$py" - "$1" <<'PY'
import json, sys
r = [json.loads(l) for l in open(sys.argv[1]) if l.startswith('{"checkpoint"')]
if not r:
    print("-", "-", "-")
else:
    print(f"{sum(x['stall_s'] for x in r) / len(r):.3f}", f"{max(x['stall_s'] for x in r):.3f}",
          f"{sum(x['write_s'] for x in r) / len(r):.2f}")
PY
}

lscpu | sed -nE 's/^Model name: *(.*)/# CPU: \1/p'
printf '# avx512f: %s, cores: %s; %s batch %s, %s frames, %s steps, a save every %s steps (%s saves), adamw\n' \
  "$(grep -q avx512f /proc/cpuinfo && echo yes || echo no)" "$(nproc)" "$model" "$batch" "$frames" \
  "$steps" "$every" "$saves"
printf '%-22s %8s %14s %12s %12s %10s\n' run wall_s extra_per_save stall_mean stall_max write_s
base=$(run none "$bin")
printf '%-22s %8s %14s %12s %12s %10s\n' "no checkpoint" "$base" - - - -
for mode in sync background; do
  w=$(run "$mode" "$bin" --checkpoint-dir "$work/$mode" --checkpoint-every "$every" --checkpoint-write "$mode")
  read -r sm sx ws < <(summary "$work/$mode.jsonl")
  printf '%-22s %8s %14s %12s %12s %10s\n' "$mode" "$w" \
    "$(awk -v w="$w" -v b="$base" -v n="$saves" 'BEGIN { printf "%.2f", (w - b) / n }')" "$sm" "$sx" "$ws"
done
if [ -n "$before" ]; then
  b0=$(run before-none "$before")
  w=$(run before "$before" --checkpoint-dir "$work/before" --checkpoint-every "$every")
  printf '%-22s %8s %14s %12s %12s %10s\n' "before: no checkpoint" "$b0" - - - -
  printf '%-22s %8s %14s %12s %12s %10s\n' "before: sync" "$w" \
    "$(awk -v w="$w" -v b="$b0" -v n="$saves" 'BEGIN { printf "%.2f", (w - b) / n }')" - - -
fi
