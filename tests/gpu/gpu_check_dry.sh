#!/usr/bin/env bash
# The GPU check's planning, run here without a GPU (scripts/gpu-check.sh
# --dry-run over this build's ctest list):
#  - the first profile selects every 1-GPU correctness test the issue names,
#    no multi-gpu test, and leaves no cuda test unplanned;
#  - each profile's part caps add up to no more than its budget, and a small
#    budget drops the last parts, recorded as not run;
#  - a call killed after a part has already written the table and the log
#    with every finished part in $OUT;
#  - multi-gpu tests are selected only where their gpus-N label fits.
# usage: gpu_check_dry.sh GPU_CHECK_SCRIPT BUILD_DIR WORKDIR
set -uo pipefail
script=$1 build=$2 work=$3
. "$(dirname "$0")/../lib/checks.sh"
rm -rf "$work" && mkdir -p "$work"
export GPU_CHECK_BUILD=$build GPU_CHECK_WORK=$work/state

cuda_tests=$(ctest --test-dir "$build" -N -L '^cuda$' | sed -nE 's/^ *Test +#[0-9]+: //p' | sort)
multi=$(ctest --test-dir "$build" -N -L '^multi-gpu$' | sed -nE 's/^ *Test +#[0-9]+: //p' | sort)
if [ -z "$cuda_tests" ]; then
  echo "skipped: this build registers no CUDA tests (no CUDA toolkit), so there is nothing to plan"
  exit 77
fi

# dry NAME ARGS...: one dry run, its output in $work/NAME.out, $OUT in $work/NAME
dry() {
  local name=$1; shift
  mkdir -p "$work/$name"
  OUT=$work/$name bash "$script" "$@" --dry-run >"$work/$name.out" 2>&1
}
# selected NAME: the tests part's selection line of a dry run
selected() { sed -nE 's/^selected \([0-9]+\): //p' "$work/$1.out" | tr ' ' '\n' | grep . | sort; }
# caps_ok NAME: the plan's caps add up to the total it prints, within its budget
caps_ok() {
  awk '/^plan:/ {
         n = split($0, w, " "); sum = 0
         for (i = 2; i + 1 <= n && w[i] != "caps"; i += 2) { c = w[i + 1]; sub(/;$/, "", c); sum += c }
         match($0, /caps total [0-9]+s of a [0-9]+s budget/)
         split(substr($0, RSTART, RLENGTH), t, /[ s]+/)
         found = 1; ok = (sum == t[3] + 0 && sum <= t[6] + 0)
         printf "plan caps %d, printed %d, budget %d\n", sum, t[3], t[6] }
       END { exit !(found && ok) }' "$work/$1.out"
}

# 1. the first profile, one GPU
if GPU_CHECK_GPUS=1 dry first --first; then ok; else bad "first --dry-run failed: $(tail -3 "$work/first.out")"; fi
sel=$(selected first)
[ -n "$sel" ] && ok || bad "the first profile selected no test"
both=$(comm -12 <(echo "$sel") <(echo "$multi"))
[ -z "$both" ] && ok || bad "the first profile selects multi-gpu tests: $both"
named="test_convert_cuda nccl_one_rank gpu_out_of_memory data_parallel_gpu parity_cuda_float32
parity_cuda_float64 parity_cuda_float16 parity_cuda_bfloat16 model_gpu_vs_cpu model_gpu_vs_cpu_f64
model_gpu_vs_cpu_f16 model_gpu_vs_cpu_bf16"
units=$(grep -E '^test_.*_cuda$' <<<"$cuda_tests" | grep -vx test_profile_backend_cuda)
for t in $named $units; do
  grep -qx "$t" <<<"$cuda_tests" || { bad "$t is not registered in $build"; continue; }
  grep -qx "$t" <<<"$sel" && ok || bad "the first profile does not select $t"
done
# every cuda test is planned: first profile, the second's named ones, or multi-gpu
second_named=$(sed -nE 's/^left to the second profile: //p' "$work/first.out" | tr ' ' '\n' | grep .)
unplanned=$(comm -23 <(echo "$cuda_tests") <(printf '%s\n' "$sel" "$second_named" "$multi" | sort -u))
[ -z "$unplanned" ] && ok || bad "cuda tests in no profile: $unplanned"
caps_ok first && ok || bad "first profile: the caps exceed the budget ($(grep '^plan:' "$work/first.out"))"

# 2. the second profile, and a budget too small for all of it
dry second --second && ok || bad "second --dry-run failed: $(tail -3 "$work/second.out")"
caps_ok second && ok || bad "second profile: the caps exceed the budget ($(grep '^plan:' "$work/second.out"))"
GPU_CHECK_BUDGET=200 dry short --second && ok || bad "second --dry-run with a 200 s budget failed"
grep -q '^| memcheck: .* | not run | budget spent' "$work/short/gpu-check-dry-run.md" && ok ||
  bad "a 200 s budget still plans memcheck: $(grep memcheck "$work/short/gpu-check-dry-run.md")"
grep -q '^| env: .* | dry-run |' "$work/short/gpu-check-dry-run.md" && ok || bad "a 200 s budget dropped env"

# 3. killed after the tests part: the table and log of every finished part are in $OUT
(GPU_CHECK_DRY_STOP_AFTER=tests dry killed --first) 2>/dev/null   # no "Killed" notice
rc=$?
[ "$rc" -eq 137 ] && ok || bad "the stopped dry run exited $rc, not 137 (SIGKILL)"
sleep 0.5   # tee writes the log's last lines
table=$work/killed/gpu-check-dry-run.md
for p in env libs build tests; do
  grep -q "^| $p: .* | dry-run |" "$table" 2>/dev/null && ok || bad "no finished row for $p in \$OUT's table after the kill"
done
for p in timing peer; do
  grep -q "^| $p: .* | not run yet |" "$table" 2>/dev/null && ok || bad "$p is not marked 'not run yet' after the kill"
done
grep -q '^== part tests: dry-run' "$work/killed/gpu-check.log" && ok || bad "\$OUT's log lacks the tests part"
grep -q '^== part timing' "$work/killed/gpu-check.log" && bad "the log goes on past the kill" || ok
[ -s "$work/killed/logs.tar.gz" ] && ok || bad "no logs.tar.gz in \$OUT after the kill"

# 4. multi-gpu tests where their GPU count fits, never on fewer
needs() { sed -nE 's/^multi-gpu selected \([0-9]+\): //p' "$work/$1.out" | tr ' ' '\n' | grep . | sort; }
for g in 1 2 4; do
  GPU_CHECK_GPUS=$g dry "multi$g" --second || bad "second --dry-run with $g GPUs failed"
  want=$(for t in $multi; do
           n=$(ctest --test-dir "$build" --show-only=json-v1 -R "^$t\$" 2>/dev/null |
               grep -oE '"gpus-[0-9]+"' | head -1 | tr -dc 0-9)
           [ -n "$n" ] || { bad "$t has no gpus-N label"; continue; }
           [ "$n" -le "$g" ] && echo "$t"
         done | sort)
  got=$(needs "multi$g")
  [ "$got" = "$want" ] && ok || bad "$g GPU(s): selected [$(echo $got)], want [$(echo $want)]"
done
[ -z "$(needs multi1)" ] && ok || bad "one GPU selects multi-gpu tests: $(needs multi1)"

echo "gpu_check_dry: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
