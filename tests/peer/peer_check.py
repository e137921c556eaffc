#!/usr/bin/python3
"""Peer check: the C trainer's loss, logits, gradients and batch-norm running
stats against PyTorch autograd on the same weights and batch.

For each case below, runs

    peer_dump --config CASE.json --dtype f32|f64 --mode train|eval \
              --batch N --frames T --seed S --out CASE.h5

loads the dump, rebuilds the model in torch (tests/peer/peer_model.py) in the
dump's dtype, recomputes everything, and compares tensor by tensor with the
relative error ||a-b|| / max(||a||, ||b||).

    peer_check.py --peer-dump BUILD/tests/peer_dump [--keep] [--only REGEX]
                  [--backend NAME]
    peer_check.py --self-test       # checks the checker on fabricated dumps

Exit status 0 only when every case passes; a tensor missing on either side,
or a peer_dump failure, counts as a failure. --backend runs peer_dump on that
backend (default: $DSTRAIN_TEST_BACKEND, else cpu); when it is not built in,
peer_dump exits 77 and so does this check (ctest's SKIP_RETURN_CODE).
"""

import argparse
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import h5py
    import torch
except ImportError as e:  # declared dependencies: fail, never skip
    sys.stderr.write("peer_check: %s (%s needs torch, numpy and h5py)\n" % (e, sys.executable))
    sys.exit(1)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peer_model  # noqa: E402

TOL = {"float64": 1e-9, "float32": 1e-4}
TORCH_DTYPE = {"float64": torch.float64, "float32": torch.float32}

# ---------------------------------------------------------------- cases

# The C side's synthetic batch (src/synthetic.c) needs at least 8 * (product
# of the time strides) frames per utterance, so two stride-2 layers take 64
# frames or more; a few cases use longer utterances (96 and 48 frames) so that
# transcripts have several labels.
CONV2 = [  # two layers, both stride 2 in time
    {"channels": 4, "kernel_time": 5, "kernel_freq": 5, "stride_time": 2,
     "stride_freq": 2, "pad_time": 2, "pad_freq": 2},
    {"channels": 3, "kernel_time": 3, "kernel_freq": 3, "stride_time": 2,
     "stride_freq": 1, "pad_time": 1, "pad_freq": 1},
]
CONV1 = [  # one layer, odd padding / kernel mix
    {"channels": 3, "kernel_time": 3, "kernel_freq": 5, "stride_time": 2,
     "stride_freq": 2, "pad_time": 1, "pad_freq": 1},
]


def _cfg(name, nfeat, conv, rtype, hidden, layers, bidir, lookahead, fc_hidden):
    return {"name": name, "n_features": nfeat, "n_classes": 29, "conv": conv,
            "rnn": {"type": rtype, "hidden": hidden, "layers": layers,
                    "bidirectional": bidir, "lookahead": lookahead},
            "fc_hidden": fc_hidden, "bn_eps": 1e-5, "bn_momentum": 0.1}


def _ds1(name, nfeat, context, fc_pre, hidden, fc_hidden, dropout):
    return {"name": name, "n_features": nfeat, "n_classes": 29, "context": context,
            "fc_pre": fc_pre, "dropout": dropout,
            "rnn": {"type": "lstm", "hidden": hidden, "layers": 1, "bidirectional": False},
            "fc_hidden": fc_hidden, "output": {"batch_norm": False, "bias": True}}


def _convnet(name, nfeat, dense, hi, dropout, blocks=2, repeat=2):
    """Jasper's graph in small (hi "relu": ReLU, residual blocks, dense or
    not) or Wav2Letter+'s (clipped ReLU, blocks=0: no residuals): a prologue
    over every feature with stride 2, blocks of repeated "same" layers
    (one dilated), an epilogue, an output FC with a bias."""
    act = {"activation": "relu"} if hi == "relu" else {}
    conv = [dict({"channels": 5, "kernel_time": 5, "kernel_freq": nfeat, "stride_time": 2,
                  "pad_time": 2, "bias": False, "dropout": dropout}, **act)]
    for b in range(max(blocks, 1)):
        layer = {"channels": 4 + b, "kernel_time": 3, "kernel_freq": 1, "pad_time": 1 + b,
                 "dilation_time": 1 + b, "bias": b % 2 == 1, "dropout": dropout,
                 "repeat": repeat}
        if blocks:
            layer["block"] = b + 1
        conv.append(dict(layer, **act))
    conv.append(dict({"channels": 6, "kernel_time": 1, "kernel_freq": 1, "bias": False,
                      "dropout": dropout}, **act))
    cfg = {"name": name, "n_features": nfeat, "n_classes": 29, "conv": conv, "fc_hidden": [],
           "output": {"batch_norm": False, "bias": True}, "bn_eps": 1e-3, "bn_momentum": 0.1}
    if dense:
        cfg["dense_residual"] = True
    return cfg


# (case name, config, dtype, mode, batch, frames, seed)
CASES = [
    ("lstm_bi_fc_f64_train", _cfg("p1", 16, CONV2, "lstm", 8, 2, True, 0, [12]),
     "f64", "train", 3, 96, 11),
    ("gru_la3_f64_train", _cfg("p2", 16, CONV2, "gru", 8, 2, False, 3, []),
     "f64", "train", 4, 64, 12),
    ("tanh_bi_fc_f64_eval", _cfg("p3", 18, CONV1, "rnn_tanh", 7, 2, True, 0, [10]),
     "f64", "eval", 3, 32, 13),
    ("relu_la2_f64_train", _cfg("p4", 16, CONV2, "rnn_relu", 6, 3, False, 2, [9]),
     "f64", "train", 4, 64, 14),
    ("lstm_la4_fc2_f64_eval", _cfg("p5", 20, CONV2, "lstm", 10, 2, False, 4, [12, 9]),
     "f64", "eval", 3, 96, 15),
    ("gru_uni_nola_f64_train", _cfg("p6", 16, CONV1, "gru", 6, 1, False, 0, []),
     "f64", "train", 3, 32, 16),
    ("relu_bi_f64_eval", _cfg("p7", 16, CONV1, "rnn_relu", 8, 2, True, 0, []),
     "f64", "eval", 4, 48, 17),
    ("lstm_bi_fc_f32_train", _cfg("p8", 16, CONV2, "lstm", 8, 2, True, 0, [12]),
     "f32", "train", 3, 96, 21),
    ("gru_la3_f32_eval", _cfg("p9", 16, CONV2, "gru", 8, 2, False, 3, [10]),
     "f32", "eval", 4, 64, 22),
    ("tanh_la2_f32_train", _cfg("p10", 18, CONV1, "rnn_tanh", 7, 2, False, 2, []),
     "f32", "train", 3, 48, 23),
    ("relu_bi_fc_f32_train", _cfg("p11", 16, CONV2, "rnn_relu", 6, 2, True, 0, [8]),
     "f32", "train", 4, 64, 24),
    # the last utterance cannot be aligned: +inf loss, zeroed with its gradient
    ("gru_bi_impossible_f64_train", _cfg("p12", 16, CONV1, "gru", 6, 2, True, 0, []),
     "f64", "train", 3, 48, 25, ["--impossible"]),
    ("lstm_la2_impossible_f32_train", _cfg("p13", 16, CONV1, "lstm", 6, 1, False, 2, []),
     "f32", "train", 3, 48, 26, ["--impossible"]),
    # DS1's graph: context windows, FC layers before a unidirectional LSTM,
    # dropout (in training: the peer draws the masks with its own Philox),
    # an output FC with a bias and no BatchNorm
    # (a key with every field set: seed past 32 bits, a step, a rank)
    ("ds1_ctx_drop_f64_train", _ds1("p14", 12, 2, [10, 8], 6, [7], 0.25), "f64", "train", 3, 40, 31,
     ["--dropout-key", "81985529216486895,12345,3"]),
    ("ds1_ctx_drop_f32_train", _ds1("p15", 12, 2, [10, 8], 6, [7], 0.25), "f32", "train", 3, 40, 32),
    ("ds1_ctx_f64_eval", _ds1("p16", 10, 3, [9], 5, [], 0.3), "f64", "eval", 4, 32, 33),
    ("frames_fc_pre_bi_gru_f64_train",
     {"name": "p17", "n_features": 10, "fc_pre": [9], "dropout": 0.1,
      "rnn": {"type": "gru", "hidden": 6, "layers": 2, "bidirectional": True}},
     "f64", "train", 3, 32, 34),
    # the convolution-only families: Jasper (ReLU, a 1x1 conv + BN residual
    # per block, a dilated block, convs with and without bias), Jasper DR
    # (every block's input into each later block), Wav2Letter+ (clipped
    # ReLU, no residuals); dropout after every layer, the masks drawn alike
    ("jasper_drop_f64_train", _convnet("p18", 9, False, "relu", 0.2), "f64", "train", 3, 40, 35,
     ["--dropout-key", "81985529216486895,77,2"]),
    ("jasper_dr_drop_f64_train", _convnet("p19", 8, True, "relu", 0.15, blocks=3), "f64",
     "train", 3, 40, 36),
    ("jasper_dr_f64_eval", _convnet("p20", 8, True, "relu", 0.2, blocks=3), "f64", "eval", 4,
     32, 37),
    ("jasper_drop_f32_train", _convnet("p21", 9, False, "relu", 0.2), "f32", "train", 3, 40, 38),
    ("w2l_drop_f64_train", _convnet("p22", 10, False, "clip", 0.25, blocks=0, repeat=3), "f64",
     "train", 3, 40, 39),
]

# ---------------------------------------------------------------- dumps


def _attr_str(v):
    if isinstance(v, bytes):
        return v.decode("utf-8")
    if isinstance(v, np.ndarray):
        v = v.reshape(-1)[0]
        return _attr_str(v)
    return str(v)


def load_dump(path):
    """Reads a peer_dump file into plain dicts of numpy arrays."""
    d = {"params": {}, "state": {}, "state_after": {}, "grads": {}, "batch": {}, "out": {}}
    with h5py.File(path, "r") as f:
        for k in ("config", "dtype", "mode"):
            if k not in f.attrs:
                raise KeyError("%s: root attribute %r missing" % (path, k))
        d["config"] = json.loads(_attr_str(f.attrs["config"]))
        d["dtype"] = _attr_str(f.attrs["dtype"])
        d["mode"] = _attr_str(f.attrs["mode"])
        # dropout's key (seed, step, part); older dumps had none: all zero
        d["dropout_key"] = tuple(int(v) for v in _attr_str(f.attrs["dropout_key"]).split(",")) \
            if "dropout_key" in f.attrs else (0, 0, 0)
        for g in d:
            if isinstance(d[g], dict) and g != "config" and g in f:
                for name, ds in f[g].items():
                    d[g][name] = ds[()]
    return d


def write_dump(path, cfg, dtype, mode, params, state, state_after, batch, out, grads):
    """Writes a file in peer_dump's layout (used by --self-test)."""
    npdt = np.float64 if dtype == "float64" else np.float32
    with h5py.File(path, "w") as f:
        f.attrs["config"] = json.dumps(cfg)
        f.attrs["dtype"] = dtype
        f.attrs["mode"] = mode
        for gname, table in (("params", params), ("state", state),
                             ("state_after", state_after), ("grads", grads)):
            g = f.create_group(gname)
            for k, v in table.items():
                g[k] = np.asarray(v, dtype=npdt)
        g = f.create_group("batch")
        g["features"] = np.asarray(batch["features"], dtype=npdt)
        for k in ("lengths", "labels", "label_lengths"):
            g[k] = np.asarray(batch[k], dtype=np.int32)
        g = f.create_group("out")
        g["loss"] = np.asarray(out["loss"], dtype=npdt).reshape(1)
        g["losses"] = np.asarray(out["losses"], dtype=npdt)
        g["logits"] = np.asarray(out["logits"], dtype=npdt)
        g["out_lengths"] = np.asarray(out["out_lengths"], dtype=np.int32)


# ---------------------------------------------------------------- comparison


# gradients that are exactly zero in exact arithmetic in train mode
ZERO_GRAD = re.compile(r"^conv\.(\d+)\.bias$")


def rel_err(a, b, floor=0.0):
    """||a-b|| / max(||a||, ||b||, floor) in float64; inf on shape mismatch,
    on +inf in only one of the two, or on nan."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        return math.inf
    if np.isnan(a).any() or np.isnan(b).any():
        return math.nan
    ia, ib = np.isinf(a), np.isinf(b)
    if (ia != ib).any() or (a[ia] != b[ib]).any():
        return math.inf
    a, b = a[~ia], b[~ib]
    den = max(np.linalg.norm(a), np.linalg.norm(b), floor)
    if den == 0.0:
        return 0.0
    return float(np.linalg.norm(a - b) / den)


def check_dump(d, case):
    """Recomputes the dump in torch; returns (rows, problems) where rows are
    (tensor, rel err, tol) and problems are strings for structural failures."""
    rows, problems = [], []
    dtype = d["dtype"]
    if dtype not in TOL:
        return rows, ["unknown dtype attribute %r" % dtype]
    tol = TOL[dtype]
    train = {"train": True, "eval": False}.get(d["mode"])
    if train is None:
        return rows, ["unknown mode attribute %r" % d["mode"]]
    cfg = d["config"]
    b = d["batch"]
    for k in ("features", "lengths", "labels", "label_lengths"):
        if k not in b:
            return rows, ["/batch/%s missing" % k]

    tdt = TORCH_DTYPE[dtype]
    model_names = set(peer_model.PeerModel(cfg).peer_params())
    model_state = set(peer_model.PeerModel(cfg).peer_state())
    for grp, want in (("params", model_names), ("grads", model_names),
                      ("state", model_state), ("state_after", model_state)):
        have = set(d[grp])
        for n in sorted(want - have):
            problems.append("/%s/%s missing in dump" % (grp, n))
        for n in sorted(have - want):
            problems.append("/%s/%s in dump has no torch counterpart" % (grp, n))
    for n in sorted(set(d["params"]) ^ set(d["grads"])):
        problems.append("%s is in only one of /params, /grads" % n)
    if set(d["params"]) != model_names or set(d["state"]) != model_state:
        return rows, problems

    prev = torch.get_default_dtype()
    torch.set_default_dtype(tdt)
    try:
        ref = peer_model.reference(cfg, tdt, train, d["params"], d["state"],
                                   b["features"], b["lengths"], b["labels"],
                                   b["label_lengths"], drop_key=d.get("dropout_key", (0, 0, 0)))
    finally:
        torch.set_default_dtype(prev)

    out = d["out"]
    L = ref["out_lengths"]
    if "out_lengths" not in out:
        problems.append("/out/out_lengths missing")
    elif not np.array_equal(np.asarray(out["out_lengths"]).astype(np.int64), L.astype(np.int64)):
        problems.append("out_lengths differ: C %s, torch %s" % (list(out["out_lengths"]), list(L)))

    for k in ("loss", "losses"):
        if k not in out:
            problems.append("/out/%s missing" % k)
        else:
            rows.append((k, rel_err(np.asarray(out[k]).reshape(-1), ref[k].reshape(-1)), tol))
    if "logits" not in out:
        problems.append("/out/logits missing")
    else:
        c_log = np.asarray(out["logits"])
        if c_log.shape != ref["logits"].shape:
            problems.append("logits shape: C %s, torch %s" % (c_log.shape, ref["logits"].shape))
        else:
            tt = c_log.shape[0]
            real = np.arange(tt)[:, None] < L[None, :]          # [T'][N]
            rows.append(("logits", rel_err(c_log[real], ref["logits"][real]), tol))
    for n in sorted(model_names & set(d["grads"])):
        m = ZERO_GRAD.match(n)
        if train and m:
            # In train mode the batch norm right after the convolution cancels
            # its bias exactly: the true gradient is 0 and both sides hold
            # rounding noise, so the error is scaled by the weight gradient.
            floor = np.linalg.norm(ref["grads/conv.%s.weight" % m.group(1)])
            rows.append(("grad " + n + " *", rel_err(d["grads"][n], ref["grads/" + n], floor),
                         tol))
        else:
            rows.append(("grad " + n, rel_err(d["grads"][n], ref["grads/" + n]), tol))
    for n in sorted(model_state & set(d["state_after"])):
        rows.append(("state_after " + n,
                     rel_err(d["state_after"][n], ref["state_after/" + n]), tol))
    return rows, problems


def report_case(case, rows, problems, quiet):
    bad = [r for r in rows if not (r[1] <= r[2])]
    ok = not bad and not problems
    if any(r[0].endswith(" *") for r in rows) and not quiet:
        print("%-26s (* true value 0 in train mode: ||a-b|| / ||grad conv.i.weight||)" % case)
    for tensor, err, tol in rows:
        flag = "ok" if err <= tol else "FAIL"
        if not quiet or flag != "ok":
            print("%-26s %-34s %11.3e  (tol %.0e) %s" % (case, tensor, err, tol, flag))
    for p in problems:
        print("%-26s %-34s %s" % (case, "-", "FAIL: " + p))
    worst = max(rows, key=lambda r: r[1] / r[2] if not math.isnan(r[1]) else math.inf,
                default=None)
    if worst is None:
        print("%-26s worst: (nothing compared)  %s" % (case, "PASS" if ok else "FAIL"))
    else:
        print("%-26s worst: %-27s %11.3e  %s" % (case, worst[0], worst[1],
                                                 "PASS" if ok else "FAIL"))
    print()
    return ok, (worst[1] if worst else math.nan)


# ---------------------------------------------------------------- running peer_dump


SKIP_CODE = 77


class Skipped(Exception):
    """peer_dump did not run: its backend is not built in (exit 77)."""


def run_peer_dump(exe, tmp, case, backend=None):
    name, cfg, dt, mode, batch, frames, seed = case[:7]
    cfg_path = os.path.join(tmp, name + ".json")
    out_path = os.path.join(tmp, name + ".h5")
    with open(cfg_path, "w") as f:
        json.dump(cfg, f, indent=1)
    cmd = [exe, "--config", cfg_path, "--dtype", dt, "--mode", mode, "--batch", str(batch),
           "--frames", str(frames), "--seed", str(seed), "--out", out_path] + list(case[7:8] and case[7])
    if backend:
        cmd += ["--backend", backend]
    env = dict(os.environ)
    env.setdefault("OPENBLAS_NUM_THREADS", "1")
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       timeout=300, env=env)
    if r.returncode == SKIP_CODE:
        raise Skipped(r.stdout.decode("utf-8", "replace").strip())
    if r.returncode != 0:
        raise RuntimeError("peer_dump exited %d: %s\n%s" % (
            r.returncode, " ".join(cmd), r.stdout.decode("utf-8", "replace")))
    return out_path


# ---------------------------------------------------------------- self test


def fabricate(path, case):
    """Writes a dump in peer_dump's layout from the torch peer itself: random
    weights and batch rounded to the case dtype, everything computed in
    float64, results stored in the case dtype."""
    name, cfg, dt, mode, batch, frames, seed = case[:7]
    dtype = "float64" if dt == "f64" else "float32"
    npdt = np.float64 if dt == "f64" else np.float32
    rng = np.random.default_rng(seed)
    torch.manual_seed(seed)
    model = peer_model.PeerModel(cfg).double()
    params = {}
    for n, p in model.peer_params().items():
        shape = tuple(p.shape)
        if n.endswith("bn.weight"):
            v = 1.0 + 0.2 * rng.standard_normal(shape)
        elif n.endswith("bn.bias") or "bias" in n:
            v = 0.1 * rng.standard_normal(shape)
        else:
            fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else 1
            v = rng.standard_normal(shape) / math.sqrt(fan_in)
        params[n] = v.astype(npdt)
    state = {}
    for n, s in model.peer_state().items():
        if n.endswith("running_mean"):
            state[n] = (0.1 * rng.standard_normal(tuple(s.shape))).astype(npdt)
        else:
            state[n] = (0.5 + rng.random(tuple(s.shape))).astype(npdt)
    nf = cfg["n_features"]
    lengths = rng.integers(frames // 2, frames + 1, size=batch)
    lengths[0] = frames
    feats = rng.standard_normal((batch, frames, nf)).astype(npdt)
    for i, l in enumerate(lengths):
        feats[i, l:, :] = 0
    L = model.output_lengths(lengths)
    label_lengths = np.array([max(1, rng.integers(1, l // 2 + 2)) for l in L])
    label_lengths[-1] = L[-1] + 3  # impossible: more labels than frames
    labels = rng.integers(1, 29, size=int(label_lengths.sum()))
    ref = peer_model.reference(cfg, torch.float64, mode == "train", params, state, feats,
                               lengths, labels, label_lengths)
    grads = {n[6:]: v for n, v in ref.items() if n.startswith("grads/")}
    after = {n[12:]: v for n, v in ref.items() if n.startswith("state_after/")}
    write_dump(path, cfg, dtype, mode, params, state, after,
               {"features": feats, "lengths": lengths, "labels": labels,
                "label_lengths": label_lengths}, ref, grads)


def self_test(tmp, cases, quiet):
    ok_all = True
    for case in cases:
        path = os.path.join(tmp, case[0] + ".h5")
        fabricate(path, case)
        rows, problems = check_dump(load_dump(path), case[0])
        ok, worst = report_case("self:" + case[0], rows, problems, quiet=True)
        ok_all &= ok
    # the checker must notice a perturbed gradient, a missing gradient and a
    # wrong running stat
    case = cases[0]
    path = os.path.join(tmp, case[0] + ".h5")
    with h5py.File(path, "r+") as f:
        g = f["grads/fc.weight"]
        v = g[()]
        v[0, 0] += 1e-6 * np.linalg.norm(v) + 1e-3
        g[...] = v
    rows, problems = check_dump(load_dump(path), case[0])
    caught_perturbed = any(t == "grad fc.weight" and not e <= tol for t, e, tol in rows)
    with h5py.File(path, "r+") as f:
        del f["grads/conv.0.bias"]
    rows, problems = check_dump(load_dump(path), case[0])
    caught_missing = any("conv.0.bias" in p for p in problems)
    with h5py.File(path, "r+") as f:
        f["grads/bogus"] = np.zeros(3)
        f["params/bogus"] = np.zeros(3)
    rows, problems = check_dump(load_dump(path), case[0])
    caught_extra = any("bogus" in p for p in problems)
    trained = next(c for c in cases if c[3] == "train")
    path = os.path.join(tmp, trained[0] + ".h5")
    fabricate(path, trained)
    with h5py.File(path, "r+") as f:
        g = f["state_after/fc.bn.running_var"]
        v = g[()]
        v[0] *= 1.001
        g[...] = v
    rows, problems = check_dump(load_dump(path), trained[0])
    caught_state = any(t == "state_after fc.bn.running_var" and not e <= tol
                       for t, e, tol in rows)
    for what, caught in (("perturbed gradient", caught_perturbed),
                         ("missing gradient", caught_missing),
                         ("extra parameter", caught_extra),
                         ("wrong running stat", caught_state)):
        print("self-test: %-20s %s" % (what, "caught" if caught else "NOT CAUGHT"))
        ok_all &= caught
    return ok_all


# ---------------------------------------------------------------- main


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--peer-dump", help="path of the peer_dump program")
    ap.add_argument("--keep", action="store_true", help="keep configs and dumps")
    ap.add_argument("--dir", help="directory for configs and dumps (implies --keep)")
    ap.add_argument("--only", help="run only cases whose name matches this regex")
    ap.add_argument("--quiet", action="store_true", help="print only failing rows")
    ap.add_argument("--backend", help="backend peer_dump runs on (default: "
                    "$DSTRAIN_TEST_BACKEND, else cpu)")
    ap.add_argument("--self-test", action="store_true",
                    help="check the checker on dumps fabricated from the torch peer")
    a = ap.parse_args()
    if not a.self_test and not a.peer_dump:
        ap.error("--peer-dump is required (or --self-test)")

    torch.set_num_threads(1)
    cases = [c for c in CASES if not a.only or re.search(a.only, c[0])]
    if not cases:
        print("no case matches %r" % a.only)
        return 2

    if a.dir:
        os.makedirs(a.dir, exist_ok=True)
        tmp = a.dir
    else:
        tmp = tempfile.mkdtemp(prefix="dstrain-peer-")
    keep = a.keep or bool(a.dir)
    try:
        if a.self_test:
            ok = self_test(tmp, cases, a.quiet)
            print("self-test %s" % ("passed" if ok else "FAILED"))
            return 0 if ok else 1
        print("torch %s; tolerances: float64 %.0e, float32 %.0e\n" % (
            torch.__version__, TOL["float64"], TOL["float32"]))
        print("%-26s %-34s %11s" % ("case", "tensor", "rel err"))
        n_pass = n_fail = 0
        summary = []
        for case in cases:
            try:
                path = run_peer_dump(a.peer_dump, tmp, case, a.backend)
                rows, problems = check_dump(load_dump(path), case[0])
            except Skipped as e:
                print(e)
                return SKIP_CODE
            except Exception as e:  # a broken dump or peer_dump run fails the case
                rows, problems = [], ["%s: %s" % (type(e).__name__, e)]
            ok, worst = report_case(case[0], rows, problems, a.quiet)
            summary.append((case[0], worst, ok))
            if ok:
                n_pass += 1
            else:
                n_fail += 1
        print("worst relative error per case:")
        for name, worst, ok in summary:
            print("  %-26s %11.3e  %s" % (name, worst, "PASS" if ok else "FAIL"))
        if keep:
            print("dumps kept in %s" % tmp)
        print("%d passed, %d failed" % (n_pass, n_fail))
        return 0 if n_fail == 0 else 1
    finally:
        if not keep:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
