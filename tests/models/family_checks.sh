# family_checks.sh - sourced by the model family tests (test_ds1.sh,
# test_convnets.sh) with their arguments, DSTRAIN WORKDIR PYTHON: sets bin,
# py and here (tests/models), sources tests/lib/checks.sh, and leaves the
# test in a fresh WORKDIR; each check below calls ok or bad.
bin=$(realpath "$1") work=$2 py=$3
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$here/../lib/checks.sh"
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1

# trains_on_synthetic PRESET: 300 synthetic steps, the mean loss of the last
# 50 under half that of the first 10.
trains_on_synthetic() {
  local model=$1 first last
  "$bin" train --model "$model" --synthetic --steps 300 --lr 1e-3 --print-every 100 \
    --log "$model.jsonl" >"$model.out" 2>&1 || bad "$model: training failed: $(tail -3 "$model.out")"
  read -r first last < <("$py" - "$model.jsonl" <<'PY'
import json, sys
l = [r["loss"] for r in map(json.loads, open(sys.argv[1])) if "loss" in r and "checkpoint" not in r]
print(sum(l[:10]) / 10, sum(l[-50:]) / 50)
PY
)
  echo "$model: mean loss of steps 1-10 $first, of steps 251-300 $last"
  if awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < 0.5 * a) }'; then ok
  else bad "$model: loss did not fall to half: $first -> $last"; fi
}

# resumes_exactly PRESET [PATTERN]: with dropout on, 6 steps at once give
# the same checkpoint as 3 steps and 3 more resumed (dropout's masks drawn
# again alike), and other parameters than the preset without dropout (its
# "dropout": 0.05 set to 0) gives; PATTERN: a part of tensor names that
# must be among the parameters (the family's own tensors). Leaves
# once/step-00000006.h5.
resumes_exactly() {
  local model=$1 pattern=${2:-}
  local common=(--model "$model" --synthetic --print-every 0 --checkpoint-every 3)
  "$bin" train "${common[@]}" --steps 6 --checkpoint-dir once >/dev/null 2>&1 || bad "$model: 6 steps"
  "$bin" train "${common[@]}" --steps 3 --checkpoint-dir twice >/dev/null 2>&1 || bad "$model: 3 steps"
  "$bin" train "${common[@]}" --steps 6 --checkpoint-dir twice --resume auto >resume.out 2>&1 ||
    bad "$model: resume: $(tail -2 resume.out)"
  sed 's/"dropout": 0.05/"dropout": 0/g' "$here/../../configs/$model.json" >nodrop.json
  "$bin" train --config nodrop.json --synthetic --print-every 0 --steps 6 --checkpoint-every 3 \
    --checkpoint-dir nodrop >/dev/null 2>&1 || bad "$model: 6 steps without dropout"
  if "$py" - "$pattern" <<'PY'
import h5py, sys
def data(path):
    f, out = h5py.File(path, "r"), {}
    f.visititems(lambda n, o: out.__setitem__(n, o[()].tobytes()) if isinstance(o, h5py.Dataset) else None)
    return out
a, b, c = data("once/step-00000006.h5"), data("twice/step-00000006.h5"), data("nodrop/step-00000006.h5")
params = [n for n in a if n.startswith("params/")] or list(a)
own = [n for n in params if sys.argv[1] in n]
same = a == b
differs = any(a[n] != c.get(n) for n in params)
print("resumed: %d datasets (%d named *%s*), %s; without dropout the parameters %s" % (
    len(a), len(own), sys.argv[1], "identical" if same else "DIFFERENT",
    "differ" if differs else "are the SAME"))
sys.exit(0 if same and differs and own else 1)
PY
  then ok; else bad "$model: resume with dropout not exact, dropout had no effect, or no *$pattern* tensors"; fi
}

# refused NAME JSON PATTERN: dstrain info refuses the config, its message
# matching PATTERN (the field named).
refused() {
  echo "$2" >"bad-$1.json"
  if "$bin" info "bad-$1.json" >"bad-$1.out" 2>&1; then bad "$1: accepted"
  elif grep -qE "$3" "bad-$1.out"; then ok
  else bad "$1: message does not name it: $(cat "bad-$1.out")"; fi
}
