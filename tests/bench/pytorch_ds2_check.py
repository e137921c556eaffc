#!/usr/bin/python3
"""bench/pytorch_ds2.py's model is dstrain's model.

  pytorch_ds2_check.py --dstrain BUILD/dstrain --peer-dump BUILD/tests/peer_dump

1. Parameter count: for every preset in configs/, pytorch_ds2's model
   (DeepSpeech2, DeepSpeech1 for DS1's graph, ConvASR for the conv-only
   Jasper, Jasper DR and Wav2Letter+) has exactly the count `dstrain info
   PRESET` prints (and the one bench/benchlib.py's param_count computes from
   the config). The models are made on torch's meta device (shapes, no
   memory: Jasper 10x5 DR has 333M parameters), by the same build_model.
1b. Names: dstrain_names() of pytorch_ds2's model gives exactly the
   parameter and BatchNorm-statistics names and shapes of a checkpoint that
   `dstrain train --synthetic --steps 1` writes (groups params and state).
2. Same loss as dstrain from the same weights: peer_dump (the C model, FP64)
   writes weights, BatchNorm running stats, a batch of unequal lengths and its
   loss; the weights load into pytorch_ds2's model under dstrain's names
   (every name both ways, every shape) and its loss, in FP64, must agree to a
   relative error below 1e-9 -- in eval mode. Why eval: pytorch_ds2 uses
   stock torch BatchNorm as deepspeech.pytorch does, whose train-mode
   statistics also average the zeros of padded frames, so on a batch of
   unequal lengths its train-mode loss is a different number from dstrain's
   (which counts real frames only); the difference is printed, not asserted.
   In eval mode BatchNorm uses the running statistics and padding reaches no
   real output (conv outputs are masked, RNNs are packed, CTC reads real
   frames only), so the losses must agree to rounding. Logits at real frames
   are compared too.
3. Train mode exactly, where stock and masked BatchNorm coincide: a batch of
   equal lengths (no padding anywhere) through pytorch_ds2's model and
   tests/peer/peer_model.py (the masked peer that peer_torch proves equal to
   dstrain in train mode), same weights, FP64: loss, every parameter gradient
   and every running statistic after the step within 1e-9.
Cases: tiny and small presets, ds1-small without dropout (DeepSpeech1), a
unidirectional LSTM with lookahead and a hidden FC layer (ds2-medium's extra
layers, scaled down), and ConvASR without dropout (torch's masks are not
dstrain's): jasper-small, w2l-small, jasper-small with dense residuals, and a
small conv-only model with conv biases, dilation, both activations, dense
residual blocks, a strided last layer over 2 bins and a hidden FC layer
before a BatchNorm + Linear output.
"""

import argparse
import json
import math
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
import h5py
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "bench"))
sys.path.insert(0, os.path.join(REPO, "tests", "peer"))
import benchlib as bl  # noqa: E402
import pytorch_ds2 as pd  # noqa: E402
import peer_model  # noqa: E402

TOL = 1e-9
fails = []


def check(ok, what):
    print("%-70s %s" % (what, "ok" if ok else "FAIL"))
    if not ok:
        fails.append(what)


def rel(a, b, floor=0.0):
    a, b = np.asarray(a, np.float64).ravel(), np.asarray(b, np.float64).ravel()
    if a.shape != b.shape:
        return math.inf
    d = max(np.linalg.norm(a), np.linalg.norm(b), floor)
    return 0.0 if d == 0 else float(np.linalg.norm(a - b) / d)


def attr(v):
    if isinstance(v, bytes):
        return v.decode()
    if isinstance(v, np.ndarray):
        return attr(v.reshape(-1)[0])
    return str(v)


def load_dump(path):
    d = {}
    with h5py.File(path, "r") as f:
        d["config"] = json.loads(attr(f.attrs["config"]))
        for g in ("params", "state", "batch", "out"):
            # a model without BatchNorm (DS1's) has no running statistics: no /state
            d[g] = {k: v[()] for k, v in f[g].items()} if g in f else {}
    return d


def param_counts(dstrain):
    presets = sorted(p[:-5] for p in os.listdir(os.path.join(REPO, "configs"))
                     if p.endswith(".json"))
    check(len(presets) >= 5, "presets found: %s" % ", ".join(presets))
    for name in presets:
        out = subprocess.run([dstrain, "info", name], stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, timeout=60).stdout.decode()
        m = re.search(r"(\d+) parameters", out)
        c_count = int(m.group(1)) if m else None
        cfg = bl.load_config(name)
        m = pd.build_model(cfg, device="meta")
        t_count = sum(p.numel() for p in m.parameters())
        check(c_count == t_count == bl.param_count(cfg),
              "params %-14s dstrain %s, pytorch_ds2 %d (%s), benchlib %d"
              % (name, c_count, t_count, type(m).__name__, bl.param_count(cfg)))


def checkpoint_names(dstrain, tmp, name, cfg):
    """dstrain's names and shapes (a checkpoint after one synthetic step)
    against dstrain_names() of pytorch_ds2's model."""
    d = os.path.join(tmp, "ck_" + name)
    os.makedirs(d)
    cfg_path = os.path.join(d, "model.json")
    with open(cfg_path, "w") as f:
        json.dump(cfg, f)
    r = subprocess.run([os.path.abspath(dstrain), "train", "--config", cfg_path, "--synthetic",
                        "--steps", "1", "--print-every", "0", "--checkpoint-dir", "ck"], cwd=d,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120)
    ck = os.path.join(d, "ck", "step-00000001.h5")
    if r.returncode != 0 or not os.path.exists(ck):
        check(False, "%s: dstrain train exited %d: %s" % (name, r.returncode,
                                                         r.stdout.decode()[-300:]))
        return
    with h5py.File(ck, "r") as f:
        theirs = [{k: tuple(v.shape) for k, v in f[g].items()} if g in f else {}
                  for g in ("params", "state")]
    mine = [{k: tuple(v.shape) for k, v in t.items()}
            for t in pd.build_model(cfg, device="meta").dstrain_names()]
    for what, m, t in (("params", mine[0], theirs[0]), ("state", mine[1], theirs[1])):
        missing, extra = sorted(set(t) - set(m)), sorted(set(m) - set(t))
        shapes = sorted(k for k in set(m) & set(t) if m[k] != t[k])
        # DS1's graph has no BatchNorm: no statistics on either side
        check(not missing and not extra and not shapes and (t or what == "state"),
              "%s: %d %s names as dstrain's checkpoint%s" % (
                  name, len(m), what, "" if not (missing or extra or shapes) else
                  " (pytorch_ds2 lacks %s, has extra %s, other shapes %s)"
                  % (missing[:4], extra[:4], shapes[:4])))


def model_from(cfg, params, state):
    torch.manual_seed(0)
    m = pd.build_model(cfg).double()
    m.load_dstrain(params, state)
    return m


def loss_of(m, train, feats, lengths, labels, label_lengths):
    m.train(train)
    x = torch.as_tensor(feats, dtype=torch.float64)
    logits, L = m(x, torch.as_tensor(lengths, dtype=torch.int64))
    loss = pd.ctc_loss(logits, L, torch.as_tensor(labels, dtype=torch.int64),
                       torch.as_tensor(label_lengths, dtype=torch.int64))
    return loss, logits, L


def same_loss(peer_dump, tmp, name, cfg):
    cfg_path = os.path.join(tmp, name + ".json")
    with open(cfg_path, "w") as f:
        json.dump(cfg, f)
    res = {}
    for mode in ("eval", "train"):
        out = os.path.join(tmp, "%s_%s.h5" % (name, mode))
        r = subprocess.run([peer_dump, "--config", cfg_path, "--dtype", "f64", "--mode", mode,
                            "--batch", "3", "--frames", "96", "--seed", "7", "--out", out],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=300)
        if r.returncode != 0:
            check(False, "%s: peer_dump %s exited %d: %s" % (name, mode, r.returncode,
                                                          r.stdout.decode()[-300:]))
            return
        d = load_dump(out)
        b = d["batch"]
        m = model_from(d["config"], d["params"], d["state"])
        with torch.no_grad():
            loss, logits, L = loss_of(m, mode == "train", b["features"], b["lengths"],
                                      b["labels"], b["label_lengths"])
        c_loss = float(np.asarray(d["out"]["loss"]).reshape(-1)[0])
        res[mode] = (c_loss, float(loss), rel(c_loss, float(loss)))
        if mode == "eval":
            check(list(L.numpy()) == list(np.asarray(d["out"]["out_lengths"])),
                  "%s: output lengths %s" % (name, list(L.numpy())))
            e = res[mode][2]
            check(e < TOL and math.isfinite(c_loss),
                  "%s eval f64: loss dstrain %.12g, pytorch_ds2 %.12g, rel %.1e"
                  % (name, c_loss, float(loss), e))
            c_log = np.asarray(d["out"]["logits"])
            real = np.arange(c_log.shape[0])[:, None] < L.numpy()[None, :]
            e = rel(c_log[real], logits.numpy()[real])
            check(e < TOL, "%s eval f64: logits at real frames, rel %.1e" % (name, e))
    lens = list(load_dump(os.path.join(tmp, name + "_train.h5"))["batch"]["lengths"])
    c, t, e = res["train"]
    print("%-70s %s" % ("%s train f64 (lengths %s): dstrain %.10g, pytorch_ds2 %.10g, rel %.1e"
                        % (name, lens, c, t, e), "(info: padding in torch BN statistics)"))


def equal_lengths_train(name, cfg, seed):
    """Train mode, no padding: pytorch_ds2 against the masked peer."""
    rng = np.random.default_rng(seed)
    n, T = 3, 80
    peer = peer_model.PeerModel(cfg).double()
    params = {}
    for k, p in peer.peer_params().items():
        v = rng.standard_normal(tuple(p.shape))
        if k.endswith("bn.weight"):
            v = 1.0 + 0.2 * v
        elif "bias" in k:
            v = 0.1 * v
        else:
            v = v / math.sqrt(max(1, int(np.prod(p.shape[1:]))))
        params[k] = v
    state = {k: (0.1 * rng.standard_normal(tuple(s.shape)) if k.endswith("mean")
                 else 0.5 + rng.random(tuple(s.shape))) for k, s in peer.peer_state().items()}
    feats = rng.standard_normal((n, T, cfg["n_features"]))
    lengths = [T] * n
    L = bl.out_frames(cfg, T)
    label_lengths = [max(1, L // 3)] * n
    labels = rng.integers(1, 29, size=sum(label_lengths))
    ref = peer_model.reference(cfg, torch.float64, True, params, state, feats, lengths,
                               labels, label_lengths)
    m = model_from(cfg, params, state)
    loss, _, _ = loss_of(m, True, feats, lengths, labels, label_lengths)
    loss.backward()
    e = rel(ref["loss"], loss.item())
    check(e < TOL, "%s train f64, equal lengths: loss peer %.12g, pytorch_ds2 %.12g, rel %.1e"
          % (name, float(ref["loss"][0]), loss.item(), e))
    mine_p, mine_s = m.dstrain_names()
    # a conv bias is cancelled by the BatchNorm after it: its true gradient is
    # 0 and both sides hold rounding noise, so its error is scaled by the
    # conv weight's gradient (as tests/peer/peer_check.py does)
    def floor(k):
        m = re.match(r"^conv\.(\d+)\.bias$", k)
        return np.linalg.norm(ref["grads/conv.%s.weight" % m.group(1)]) if m else 0.0
    worst = max((rel(ref["grads/" + k], p.grad.numpy(), floor(k)), k) for k, p in mine_p.items())
    check(worst[0] < TOL, "%s: %d gradients, worst %s rel %.1e"
          % (name, len(mine_p), worst[1], worst[0]))
    if not mine_s:   # no BatchNorm (DS1's graph): the reference has no statistics either
        check(not any(k.startswith("state_after/") for k in ref),
              "%s: no running statistics on either side" % name)
        return
    worst = max((rel(ref["state_after/" + k], s.numpy()), k) for k, s in mine_s.items())
    check(worst[0] < TOL, "%s: %d running stats after the step, worst %s rel %.1e"
          % (name, len(mine_s), worst[1], worst[0]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dstrain", required=True)
    ap.add_argument("--peer-dump", required=True)
    a = ap.parse_args()
    torch.set_num_threads(1)
    param_counts(a.dstrain)
    la = {"name": "la_fc", "n_features": 20, "n_classes": 29,
          "conv": [{"channels": 4, "kernel_time": 5, "kernel_freq": 5, "stride_time": 2,
                    "stride_freq": 2, "pad_time": 2, "pad_freq": 2},
                   {"channels": 3, "kernel_time": 3, "kernel_freq": 3, "stride_time": 1,
                    "stride_freq": 2, "pad_time": 1, "pad_freq": 1}],
          "rnn": {"type": "lstm", "hidden": 10, "layers": 2, "bidirectional": False,
                  "lookahead": 3},
          "fc_hidden": [12], "bn_eps": 1e-5, "bn_momentum": 0.1}
    # DS1's graph (pytorch_ds2's DeepSpeech1) without dropout: torch's own
    # dropout draws other masks than dstrain's
    ds1 = dict(bl.load_config("ds1-small"), dropout=0.0, name="ds1_small")
    # ConvASR (no "rnn"): dropout off as for DS1
    def no_dropout(cfg, **kw):
        c = dict(cfg, conv=[dict(layer, dropout=0.0) for layer in cfg["conv"]], **kw)
        c["name"] = c["name"].replace("-", "_")
        return c
    conv_fc = {"name": "conv_fc", "n_features": 20, "n_classes": 29,
               "conv": [{"channels": 6, "kernel_time": 5, "kernel_freq": 5, "stride_time": 2,
                         "stride_freq": 2, "pad_time": 2, "pad_freq": 2},
                        {"channels": 6, "kernel_time": 3, "kernel_freq": 3, "pad_time": 2,
                         "pad_freq": 1, "dilation_time": 2, "activation": "relu", "block": 1,
                         "repeat": 2},
                        {"channels": 5, "kernel_time": 5, "kernel_freq": 3, "pad_time": 2,
                         "pad_freq": 1, "bias": False, "block": 2},
                        {"channels": 4, "kernel_time": 3, "kernel_freq": 3, "stride_freq": 2,
                         "pad_time": 1, "pad_freq": 1}],
               "dense_residual": True, "fc_hidden": [12], "bn_eps": 1e-5, "bn_momentum": 0.1}
    jasper = bl.load_config("jasper-small")
    conv_cases = [("jasper_small", no_dropout(jasper)),
                  ("w2l_small", no_dropout(bl.load_config("w2l-small"))),
                  ("jasper_dr_small", no_dropout(jasper, name="jasper_dr_small",
                                                 dense_residual=True)),
                  ("conv_fc", conv_fc)]
    cases = [("tiny", bl.load_config("tiny")), ("small", bl.load_config("small")), ("la_fc", la),
             ("ds1_small", ds1)] + conv_cases
    with tempfile.TemporaryDirectory() as tmp:
        named = [(p, bl.load_config(p)) for p in ("tiny", "ds1-small", "jasper-small",
                                                  "w2l-small")]
        named += [("jasper-small-dr", dict(jasper, name="jasper-small-dr", dense_residual=True)),
                  ("conv_fc", conv_fc)]
        for name, cfg in named:
            checkpoint_names(a.dstrain, tmp, name, cfg)
        for name, cfg in cases:
            same_loss(a.peer_dump, tmp, name, cfg)
    for i, (name, cfg) in enumerate(cases):
        equal_lengths_train(name, cfg, 100 + i)
    print("pytorch_ds2_check: %s" % ("PASS" if not fails else "FAIL (%d)" % len(fails)))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
