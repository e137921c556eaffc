#!/usr/bin/env bash
# One training forward/backward (peer_dump: loss, logits, every gradient,
# BatchNorm state) on 1 and on 2 CPU threads must agree bit for bit: the
# CPU ops split work so that each output is summed by one thread in one
# order (conv tiles, channel-split BatchNorm, RNN directions side by side,
# block sums of the gradient norm). small exercises the tile kernels and the
# side-by-side directions; tiny (4 channels) the BLAS fallbacks.
# usage: same_on_any_threads.sh PEER_DUMP CONFIG_DIR PYTHON
set -euo pipefail
dump=$1 configs=$2 py=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for cfg in small tiny; do
  for t in 1 2; do
    OPENBLAS_NUM_THREADS=$t OMP_NUM_THREADS=$t "$dump" --config "$configs/$cfg.json" --dtype f32 \
      --mode train --batch 4 --frames 240 --seed 7 --out "$work/$cfg-t$t.h5" >/dev/null
  done
  "$py" - "$work/$cfg-t1.h5" "$work/$cfg-t2.h5" "$cfg" <<'PY'
import sys, h5py, numpy as np
a, b, cfg = h5py.File(sys.argv[1], "r"), h5py.File(sys.argv[2], "r"), sys.argv[3]
names = []
a.visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Dataset) else None)
bad = [n for n in names if n not in b or a[n].shape != b[n].shape
       or not np.array_equal(np.asarray(a[n][()]).view(np.uint8), np.asarray(b[n][()]).view(np.uint8))]
if bad or not names:
    sys.exit(f"{cfg}: 1 and 2 threads differ in {len(bad)} of {len(names)} datasets: {bad[:8]}")
print(f"{cfg}: {len(names)} datasets identical on 1 and 2 threads")
PY
done
