#!/usr/bin/env bash
# plot-training.sh - a PNG of a training run from its metrics log
# (dstrain train --log FILE.jsonl): the training loss per step (each step
# faint, a running mean of 25 steps bold) above the validation CER and WER
# after every epoch. Drawn by gnuplot (Debian: gnuplot-nox).
#
# usage: scripts/plot-training.sh LOG.jsonl OUT.png
set -euo pipefail
prog=${0##*/}
usage() { echo "usage: $prog LOG.jsonl OUT.png   (a dstrain train --log file -> PNG of loss and CER)"; }
case "${1:-}" in
  -h|--help) usage; exit 0 ;;
esac
[ $# -eq 2 ] || { usage >&2; exit 2; }
log=$1 png=$2
[ -r "$log" ] || { echo "$prog: cannot read $log" >&2; exit 1; }
command -v "${GNUPLOT:-gnuplot}" >/dev/null ||
  { echo "$prog: gnuplot not found (Debian package gnuplot-nox; scripts/install-deps.sh installs it)" >&2; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# field NAME of a JSON line: the number after "NAME": (our lines are flat)
awk -v steps="$work/steps" -v evals="$work/evals" '
  function num(name,   m) {
    if (match($0, "\"" name "\":-?[0-9.eE+-]+")) { m = substr($0, RSTART, RLENGTH); sub(/^[^:]*:/, "", m); return m }
    return ""
  }
  /"eval":"val"/ { print num("step"), num("cer"), num("wer"), num("epoch") > evals; next }
  /"step":/ && /"loss":/ {
    s = num("step"); l = num("loss")
    if (s == "" || l == "") next   # a skipped step logs no number
    # a resumed run appends its log: a step seen again replaces the earlier one
    loss[s] = l; if (s + 0 > last) last = s + 0
  }
  END {
    n = 0; sum = 0
    for (s = 1; s <= last; s++) if (s in loss) {
      q[n % 25] = loss[s]; n++
      k = n < 25 ? n : 25; sum = 0; for (j = 0; j < k; j++) sum += q[j]
      print s, loss[s], sum / k > steps
    }
  }' "$log"
[ -s "$work/steps" ] || { echo "$prog: $log holds no training steps" >&2; exit 1; }
touch "$work/evals"
# the last evaluation of each epoch (a resumed run may repeat one)
awk '{ last[$4] = $0; if (!($4 in seen)) { seen[$4] = 1; order[n++] = $4 } }
     END { for (i = 0; i < n; i++) print last[order[i]] }' "$work/evals" >"$work/evals.last"

mkdir -p "$(dirname "$png")"
"${GNUPLOT:-gnuplot}" <<EOF
set terminal pngcairo size 900,700 font ",10" noenhanced
set output "$png.new"
set multiplot layout 2,1 title "$(basename "$log")"
set grid
set xlabel "step"
set xrange [0:*]
set ylabel "CTC loss (per utterance)"
set logscale y
set key top right
plot "$work/steps" using 1:2 with lines lc rgb "#b0c4de" title "loss", \
     "$work/steps" using 1:3 with lines lw 2 lc rgb "#1f4e79" title "running mean (25 steps)"
unset logscale y
set ylabel "validation error rate"
set yrange [0:*]
set xrange [0:GPVAL_X_MAX]
set key top right
if ($(wc -l <"$work/evals.last") > 0) {
  plot "$work/evals.last" using 1:2 with linespoints lw 2 pt 7 lc rgb "#c0392b" title "CER", \
       "$work/evals.last" using 1:3 with linespoints lw 2 pt 5 lc rgb "#7d3c98" title "WER"
} else {
  set label 1 "no validation in this log (train with --val)" at graph 0.5, graph 0.5 center
  plot 0 notitle lc rgb "white"
}
unset multiplot
EOF
mv "$png.new" "$png"
echo "$prog: wrote $png ($(wc -l <"$work/steps") steps, $(wc -l <"$work/evals.last") validations)"
