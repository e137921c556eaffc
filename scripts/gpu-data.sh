#!/usr/bin/env bash
# gpu-data.sh - makes here, on the CPU, the feature files the GPU check's
# training runs read (scripts/gpu-check.sh --second, part mini), so that the
# GPU machine spends its short time on GPU work only. See usage().
set -euo pipefail
export LC_ALL=C

prog=${0##*/}
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=${GPU_DATA_DIR:-$repo/.gpu-data}
work=${GPU_DATA_WORK:-$repo/build-gpu-data}
bin=${DSTRAIN:-$repo/build/dstrain}
limit_mib=${GPU_SHIP_LIMIT_MIB:-64}
n_train=${GPU_DATA_TRAIN:-200}
n_dev=${GPU_DATA_DEV:-40}
epochs=20   # gpu-check.sh reads it from mini-reference.txt: the GPU trains as long

usage() {
  cat <<EOF
Usage: scripts/$prog [--help]

Synthesizes the mini corpus (data/make-mini-librispeech.sh with espeak-ng and
sox; $n_train train and $n_dev dev utterances, fewer than its default 300 and
60 so that the bundle and the data fit one call) in $work/corpus, preps
its train and dev splits with the default features (float16 on disk) into
$work/features/mini-{train,dev}.h5, checks both (dstrain prep --verify),
trains the CPU reference the GPU run is held to (the small preset, seed 7,
batch 8, adamw at 1e-3, $epochs epochs: the same command as gpu-check.sh's
mini part, on --device cpu; a few minutes) and records its dev CER before
and after in mini-reference.txt, and packs all of it with a SOURCE note
(how they were made) into

  $out/mini-features.tar.xz      (about 21 MiB; 27 MiB unpacked)

which scripts/gpu-check.sh unpacks on the GPU machine. Then adds up what a
device call carries: the working tree (tracked and untracked, not ignored),
.gpu-bundle.tar.xz and $out, and fails when it is over $limit_mib MiB (the
device tool's limit).

Run it once here (after scripts/build.sh and scripts/gpu-bundle.sh); carry
.gpu-data to the GPU machine with the second profile's call.

Environment: GPU_DATA_DIR ($out), GPU_DATA_WORK ($work), GPU_DATA_TRAIN
($n_train), GPU_DATA_DEV ($n_dev), DSTRAIN (the binary that preps: $bin),
GPU_SHIP_LIMIT_MIB ($limit_mib).
EOF
}

case ${1:-} in
  -h|--help) usage; exit 0 ;;
  "") ;;
  *) echo "$prog: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
esac

die() { echo "$prog: error: $*" >&2; exit 1; }
[ -x "$bin" ] || die "$bin not found: run scripts/build.sh first (or set DSTRAIN)"

corpus=$work/corpus
stamp="train $n_train dev $n_dev"
if [ "$(cat "$corpus/.complete" 2>/dev/null)" != "$stamp" ]; then
  echo "$prog: synthesizing the mini corpus in $corpus ($stamp)"
  rm -f "$corpus/.complete"
  MINI_TRAIN=$n_train MINI_DEV=$n_dev MINI_TEST=20 bash "$repo/data/make-mini-librispeech.sh" "$corpus"
  echo "$stamp" >"$corpus/.complete"
fi
features=$work/features
mkdir -p "$out" "$features"
for s in train dev; do
  echo "$prog: prep $s -> $features/mini-$s.h5"
  "$bin" prep librispeech "$corpus/$s" --out "$features/mini-$s.h5" --quiet
  "$bin" prep --verify "$features/mini-$s.h5" >/dev/null || die "$features/mini-$s.h5 does not verify"
done
{
  echo "made by scripts/$prog on $(hostname) at $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "corpus: MINI_TRAIN=$n_train MINI_DEV=$n_dev data/make-mini-librispeech.sh; features: dstrain prep defaults"
  echo "dstrain: $("$bin" --version | head -1)"
  echo "git: $(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo unknown)"
} >"$features/SOURCE"

# The CPU reference: the untrained model's dev CER (one step at learning
# rate 0), then the trained one's last validation, as gpu-check.sh's mini
# part runs them on the GPU.
ref=$work/reference
rm -rf "$ref"
common=(--model small --device cpu --train "$features/mini-train.h5" --val "$features/mini-dev.h5"
        --batch 8 --seed 7 --optimizer adamw --lr 1e-3 --print-every 0)
echo "$prog: CPU reference: small, $epochs epochs (a few minutes)"
"$bin" train "${common[@]}" --steps 1 --lr 0 --checkpoint-dir "$ref/untrained" >"$ref.untrained.log" 2>&1 ||
  die "the untrained reference run failed: $(tail -2 "$ref.untrained.log")"
before=$("$bin" eval --checkpoint "$ref/untrained/step-00000001.h5" --data "$features/mini-dev.h5" 2>/dev/null |
         sed -nE 's/^WER ([0-9.]+) +CER ([0-9.]+).*/\2/p' || true)   # checked below
"$bin" train "${common[@]}" --epochs "$epochs" --checkpoint-dir "$ref/trained" >"$ref.log" 2>&1 ||
  die "the reference training failed: $(tail -2 "$ref.log")"
after=$(grep '^validation:' "$ref.log" | tail -1 | sed -nE 's/.*CER ([0-9.]+).*/\1/p' || true)
[ -n "$before" ] && [ -n "$after" ] || die "no dev CER from the reference runs ($ref.log)"
cpu=$(lscpu 2>/dev/null | sed -nE 's/^Model name: *//p' | head -1)
{
  echo "untrained_cer $before"
  echo "cer $after"
  echo "epochs $epochs"
  echo "made_on $cpu, dstrain $("$bin" --version | head -1)"
} >"$features/mini-reference.txt"
echo "$prog: CPU reference ($cpu): dev CER $before untrained -> $after after $epochs epochs"
echo "$prog: packing $out/mini-features.tar.xz"
rm -f "$out"/mini-*.h5 "$out/SOURCE"   # an older layout's loose files
tar -C "$features" -cf - mini-train.h5 mini-dev.h5 mini-reference.txt SOURCE | xz -T0 -6 >"$out/mini-features.tar.xz.tmp"
mv "$out/mini-features.tar.xz.tmp" "$out/mini-features.tar.xz"

# what one device call carries: the tree as git sees it, plus the carried paths
tree_bytes=$(cd "$repo" && git ls-files -z --cached --others --exclude-standard |
             xargs -0 -r stat -c %s 2>/dev/null | awk '{ s += $1 } END { print s + 0 }')
bundle_bytes=$(stat -c %s "$repo/.gpu-bundle.tar.xz" 2>/dev/null || echo 0)
data_bytes=$(du -sb "$out" | awk '{ print $1 }')
total=$((tree_bytes + bundle_bytes + data_bytes))
mib() { awk -v b="$1" 'BEGIN { printf "%.1f MiB", b / 1048576 }'; }
echo "$prog: a device call carries $(mib "$total"): tree $(mib "$tree_bytes"), bundle $(mib "$bundle_bytes"), data $(mib "$data_bytes") (limit $limit_mib MiB)"
[ "$bundle_bytes" -gt 0 ] || echo "$prog: warning: no .gpu-bundle.tar.xz yet (scripts/gpu-bundle.sh)"
[ "$total" -le $((limit_mib * 1048576)) ] || die "over the device tool's $limit_mib MiB"
