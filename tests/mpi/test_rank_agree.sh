#!/usr/bin/env bash
# Ranks agree before they start (issue 33): ranks of one job given options
# that must match are refused within seconds on every rank, naming the
# option, the ranks and both values, never a crash (two models once freed
# a buffer twice) nor a silent run (another seed, other data) nor a wait
# until --timeout blaming a rank (another batch, --val on one rank). Every
# option the check covers is given otherwise to one rank (Open MPI's MPMD
# syntax, `-np A dstrain train ... : -np 1 dstrain train ...`), on 2 ranks
# (rank 1 differs) and on 3 (rank 2 alone differs), the binary's version
# and build through a copy of the binary with that text changed; each run
# must end non-zero in under 30 s of a --timeout of 60, every rank saying
# "rank K of N refuses", with no signal. Ranks given the same options and
# data train and validate.
# usage: test_rank_agree.sh DSTRAIN PYTHON   (RANK_AGREE_TIMEOUT: --timeout, 60)
set -uo pipefail
bin=$(readlink -f "$1") py=$2
wait_s=${RANK_AGREE_TIMEOUT:-60}
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$work"' EXIT
. "$(dirname "$0")/../lib/checks.sh"
host=$(hostname)

# --- features: 3 tones (out.h5), the same lengths and words recorded again
# (rerec.h5), log-mel of the same width (mel.h5), a 4th utterance (four.h5),
# 8 utterances (eight.h5: batches of 2 on 3 ranks),
# validation sets of other words (val.h5, val2.h5, melval.h5)
mkdir -p "$work/feat" "$work/re"
"$py" "$(dirname "$0")/../lib/tones.py" "$work/feat"
"$py" "$(dirname "$0")/../lib/rerecord.py" "$work/feat" "$work/re"
cd "$work/feat" || exit 1
for k in 3 4 5 6 7; do cp "tone$((k % 3)).wav" "tone$k.wav"; done
cp ok.csv "$work/re/ok.csv"
printf 'tone0.wav,good day\ntone1.wav,so long\ntone2.wav,see you\n' > val.csv
printf 'tone0.wav,one two\ntone1.wav,three four\ntone2.wav,five six\n' > val2.csv
{ cat ok.csv; echo 'tone3.wav,hello world'; } > four.csv
for k in 0 1 2 3 4 5 6 7; do echo "tone$k.wav,hello world"; done > eight.csv
prep() { "$bin" prep manifest "$@" --quiet >/dev/null 2>&1 || echo "prep $* failed" >&2; }
prep ok.csv --out out.h5
prep "$work/re/ok.csv" --out rerec.h5
prep ok.csv --out mel.h5 --features log-mel --n-mels 161
prep val.csv --out melval.h5 --features log-mel --n-mels 161
prep four.csv --out four.h5
prep eight.csv --out eight.h5
prep val.csv --out val.h5
prep val2.csv --out val2.h5
"$py" - "$(dirname "$0")/../../configs/tiny.json" tiny2.json <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c["rnn"]["hidden"] += 8   # one size otherwise, the name kept
json.dump(c, open(sys.argv[2], "w"))
PY

# --- a copy of the binary of another version, and one of another build:
# the text the check compares, one character changed (the build text is a
# string of its own, after a NUL: messages that name the versions are not it)
ver=$("$bin" version | awk 'NR == 1 {print $2}')
"$py" - "$bin" "$work/dstrain-ver" "$work/dstrain-build" "$ver" <<'PY'
import re, sys
b = open(sys.argv[1], "rb").read()
v = re.escape(sys.argv[4].encode())
for out, pat in ((sys.argv[2], rb"dstrain " + v + rb" \("), (sys.argv[3], rb"(?<=\0)[A-Za-z]+, [^\0]* CUDA [^\0]*, NCCL [^\0]*\0")):
    m = [x.start() for x in re.finditer(pat, b)]
    if len(m) != 1:
        sys.exit(f"{out}: {len(m)} places to change, not 1")
    at = m[0] + len(b"dstrain ") if out == sys.argv[2] else m[0]
    c = bytes([b[at] ^ 1])   # a digit or a letter still
    open(out, "wb").write(b[:at] + c + b[at + 1:])
PY
[ $? -eq 0 ] && chmod +x "$work/dstrain-ver" "$work/dstrain-build" ||
  bad "no copy of the binary of another version or build"

S="--synthetic --steps 1 --batch 2 --print-every 0"
D="--train out.h5 --steps 1 --batch 1 --print-every 0"
F="fingerprint [0-9a-f]{8} of"
# KEY|RANK 0's ARGS|THE OTHER RANK'S ARGS|RANK 0's VALUE|THE OTHER'S (extended regexes)
cases=(
  "--model/--config|$S --model tiny|$S --model jasper-small|tiny \(config hash [0-9a-f]{16}\)|jasper-small \(config hash [0-9a-f]{16}\)"
  "--model/--config|$S --model tiny|$S --config tiny2.json|tiny \(config hash [0-9a-f]{16}\)|[^,]+ \(config hash [0-9a-f]{16}\)"
  "--precision|$S|$S --precision fp64|float32|float64"
  "--device|$S|$S --device cuda|cpu|cuda"
  "--deterministic|$S|$S --deterministic|off|on"
  "--tf32|$S|$S --tf32|off|on"
  "--rnn-algo|$S|$S --rnn-algo auto|standard|auto"
  "--cpu-bind|$S|$S --cpu-bind none|gpu|none"
  "--cuda-graphs-max|$S|$S --cuda-graphs-max 4|32|4"
  "--batch|$S --batch 2|$S --batch 1|2|1"
  "--batch|$D --train eight.h5 --batch 2 --steps 3|$D --train eight.h5 --batch 1 --steps 3|2|1"
  "--steps|$S --steps 1|$S --steps 2|1|2"
  "--epochs|$S --epochs 1|$S --epochs 2|1|2"
  "--seed|$S --seed 7|$S --seed 8|7|8"
  "--optimizer|$S|$S --optimizer adamw|sgd|adamw"
  "--lr|$S|$S --lr 1e-3|0.0003|0.001"
  "--momentum|$S|$S --momentum 0.5|0.9|0.5"
  "--no-nesterov|$S|$S --no-nesterov|Nesterov momentum|plain momentum"
  "--weight-decay|$S|$S --weight-decay 0|1e-05|0"
  "--lr-schedule|$S|$S --lr-schedule poly|anneal|poly"
  "--anneal|$S|$S --anneal 1.5|1.1|1.5"
  "--poly-power|$S|$S --poly-power 2|1|2"
  "--warmup|$S|$S --warmup 5|0|5"
  "--max-norm|$S|$S --max-norm 0|400|0"
  "--loss-scale|$S|$S --loss-scale 128|1|128"
  "--loss-scale-window|$S --loss-scale dynamic|$S --loss-scale dynamic --loss-scale-window 50|2000|50"
  "--max-bad-steps|$S|$S --max-bad-steps 3|100|3"
  "--allreduce|$S|$S --allreduce nccl|mpi|nccl"
  "--bucket-mb|$S|$S --bucket-mb 1|25|1"
  "--reduce-dtype|$S|$S --reduce-dtype fp64|float32|float64"
  "--check-sync|$S|$S --check-sync 1|0|1"
  "--local-bn|$S|$S --local-bn|synchronised BatchNorm|per-rank BatchNorm"
  "--print-every|$S|$S --print-every 1|0|1"
  "--synthetic-utts|$S|$S --synthetic-utts 64|1024|64"
  "--max-frames|$S|$S --max-frames 200|400|200"
  "--checkpoint-dir|$S --checkpoint-dir ck|$S|ck|none"
  "--checkpoint-every|$S --checkpoint-dir ck|$S --checkpoint-dir ck --checkpoint-every 1|0|1"
  "--resume|$S --checkpoint-dir ck --resume auto|$S --checkpoint-dir ck|auto|none"
  "--train/--synthetic|$S|$D|--synthetic|--train"
  "--train content|$D|$D --train rerec.h5|$F out.h5 on $host|$F rerec.h5 on $host"
  "--train features|$D|$D --train mel.h5|log-spectrogram 161 per frame[^;]*|log-mel 161 per frame[^;]*"
  "--train utterances|$D|$D --train four.h5|3, 3 kept|4, 4 kept"
  "--min-duration/--max-duration|$D|$D --max-duration 30|0, 0|0, 30"
  "--spec-augment|$D|$D --spec-augment|0 x 0 bins, 0 x 0 frames|2 x 27 bins, 2 x 40 frames"
  "--norm|$D|$D --norm none|utterance|none"
  "--val|$D --val val.h5|$D|val.h5|none"
  "--val content|$D --val val.h5|$D --val val2.h5|$F val.h5 on $host|$F val2.h5 on $host"
  "--val features|$D --val val.h5|$D --train mel.h5 --val melval.h5|log-spectrogram 161 per frame[^;]*|log-mel 161 per frame[^;]*"
  "--val utterances|$D --val val.h5|$D --val four.h5|3, 3 kept|4, 4 kept"
  "--val-every|$D --val val.h5|$D --val val.h5 --val-every 1|0|1"
  "dstrain version|$S|$S|dstrain $ver \([^,;]*\)|dstrain [^,;]+ \([^,;]*\)|$work/dstrain-ver"
  "dstrain build|$S|$S|[^;]+|[^;]+|$work/dstrain-build"
)

# run ID NP_SAME ARGS_SAME ARGS_OTHER [BINARY_OTHER]: NP_SAME ranks (0 ..)
# run ARGS_SAME, the last rank ARGS_OTHER; output, exit status and seconds
# into $work/ID.{out,rc,s}
run() {
  local id=$1 np=$2 a=$3 b=$4 other=${5:-$bin}
  (
    t0=$(date +%s%N)
    # shellcheck disable=SC2086  # the arguments are words
    timeout 100 mpiexec -np "$np" "$bin" train $a --timeout "$wait_s" \
      : -np 1 "$other" train $b --timeout "$wait_s" >"$work/$id.out" 2>&1
    echo $? >"$work/$id.rc"
    echo $(( ($(date +%s%N) - t0) / 1000000 )) >"$work/$id.ms"
  ) &
  while [ "$(jobs -rp | wc -l)" -ge 4 ]; do wait -n; done
}

for i in "${!cases[@]}"; do
  IFS='|' read -r key a b va vb other <<<"${cases[$i]}"
  run "c$i.2" 1 "$a" "$b" "$other"
  run "c$i.3" 2 "$a" "$b" "$other"
done
run good 1 "$D --val val.h5 --steps 2" "$D --val val.h5 --steps 2"
wait

# check ID KEY VA VB RANKS: refused by every rank in time, naming KEY, rank
# 0's value and the last rank's, no signal and no wait for the timeout
check() {
  local id=$1 key=$2 va=$3 vb=$4 n=$5 out rc ms why=""
  out=$(cat "$work/$id.out") rc=$(cat "$work/$id.rc") ms=$(cat "$work/$id.ms")
  local want="$key differs between ranks: rank 0 has $va, rank $((n - 1)) has $vb(;|\.| \(|$)"
  [ "$rc" -ne 0 ] || why+=" exit 0;"
  [ "$ms" -lt 30000 ] || why+=" took $ms ms;"
  grep -Eq -- "$want" <<<"$out" || why+=" no \"$want\";"
  # every rank refuses (none is left waiting: the time above), and the
  # verdict, the same on each, is printed once, by rank 0
  local said
  said=$(grep -c "all $n ranks refuse the run; rank 0 says so for them" <<<"$out")
  [ "$said" -eq 1 ] || why+=" the refusal printed $said times, not once;"
  if grep -Eiq "double free|signal|core dumped|waited .* for the other ranks" <<<"$out"; then
    why+=" a crash or a wait:"
  fi
  if [ -z "$why" ]; then ok
  else bad "$key on $n ranks ($id):$why exit $rc, $ms ms: $(tail -c 1500 <<<"$out")"; fi
}

for i in "${!cases[@]}"; do
  IFS='|' read -r key a b va vb other <<<"${cases[$i]}"
  check "c$i.2" "$key" "$va" "$vb" 2
  check "c$i.3" "$key" "$va" "$vb" 3
done

if [ "$(cat "$work/good.rc")" -eq 0 ] && grep -q "validation: WER" "$work/good.out" &&
   ! grep -q "refuses" "$work/good.out"; then ok
else bad "ranks with the same options: exit $(cat "$work/good.rc"): $(tail -5 "$work/good.out")"; fi

echo "test_rank_agree: $pass passed, $fail failed"; [ "$fail" -eq 0 ]
