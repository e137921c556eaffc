#!/usr/bin/python3
"""dstrain export --pytorch / import --pytorch against real torch.

    pytorch_export_check.py --part export|roundtrip|refusals|all
                            --dstrain BUILD/dstrain --logits-dump BUILD/tests/pt_logits_dump
                            [--keep DIR]

export     small models trained a few steps by dstrain (bidirectional LSTM,
           unidirectional GRU with lookahead, three convs with tanh RNNs in
           fp64, relu RNNs without lookahead) are exported; torch.load reads
           each (weights_only=True too) into a re-creation of deepspeech.pytorch's
           DeepSpeech (tests/peer/deepspeech_ref.py) with load_state_dict(strict=True),
           and through the name mapping into the peer model (peer_model.py); in
           eval mode both must give dstrain's logits (pt_logits_dump) on a padded
           batch of different lengths, at every real frame:
               max |ours - torch| <= TOL[dtype] * max |ours|
           with TOL float32 2e-5 and float64 1e-11: the two sides sum in
           different orders (im2col GEMMs against torch's convolution, other
           RNN and BatchNorm kernels), which costs a few ulps per layer through
           two or three convs, two or three RNN layers and the head; measured
           here about 1.3e-6 (float32, some 20 ulps) and 1.3e-15 (float64), so
           the tolerance leaves 15x and 10^4x room while a wrong mapping
           (conv axes not swapped, say) differs by 50% of the logits.
           DS1's graph, Jasper DR's and Wav2Letter+'s (no deepspeech.pytorch
           counterpart) export under dstrain's own names: loaded into
           bench/pytorch_ds2.py's twin (DeepSpeech1, the conv-only one) and the
           peer model, eval logits = dstrain's; imported back, every tensor
           bit for bit.
roundtrip  state_dicts of a torch-initialised DeepSpeech (BatchNorm statistics
           and counters set off their defaults) in float32, float64 and float16,
           protocol 2 and 4, bare and inside a Lightning-style dict, with
           non-contiguous views and shared storages -> dstrain import -> dstrain
           export: every tensor bit for bit what torch saved (float16 widened to
           float32 exactly); dstrain info accepts every imported checkpoint.
refusals   a missing, an unexpected and a misshapen key, the wrong model, a
           non-finite value, non-state_dict pickles, objects beside a
           state_dict, truncated and corrupted zips, garbage and mutated
           pickles, a model with hidden FC layers to export: each exits 1 with
           a message naming the file (and the key where there is one), never
           with a signal.

Exit status 0 only when every check passes.
"""

import argparse
import collections
import json
import os
import random
import shutil
import struct
import subprocess
import sys
import tempfile
import zipfile

try:
    import h5py
    import torch
except ImportError as e:  # declared dependencies: fail, never skip
    sys.stderr.write("pytorch_export_check: %s (%s needs torch, numpy and h5py)\n"
                     % (e, sys.executable))
    sys.exit(1)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import deepspeech_ref  # noqa: E402
import peer_model  # noqa: E402
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
import pytorch_ds2  # noqa: E402

TOL = {torch.float32: 2e-5, torch.float64: 1e-11}
FAILURES = []


def check(ok, what):
    print("%s %s" % ("ok  " if ok else "FAIL", what))
    if not ok:
        FAILURES.append(what)
    return ok


def run(cmd, expect_rc=0, what=None):
    """Runs cmd; a signal or an unexpected status is a failure (output shown)."""
    p = subprocess.run([str(c) for c in cmd], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       encoding="utf-8", errors="replace")
    if p.returncode != expect_rc:
        sys.stdout.write("  $ %s\n  rc %d (expected %d)\n  stdout: %s\n  stderr: %s\n"
                         % (" ".join(map(str, cmd)), p.returncode, expect_rc, p.stdout.strip(),
                            p.stderr.strip()))
        if what:
            check(False, what)
    return p


# ---------------------------------------------------------------- configs

def conv(ch, kt, kf, st, sf, pt, pf):
    return {"channels": ch, "kernel_time": kt, "kernel_freq": kf, "stride_time": st,
            "stride_freq": sf, "pad_time": pt, "pad_freq": pf}


def cfg(name, convs, rtype, hidden, layers, bidir, lookahead=0, nfeat=161, fc_hidden=()):
    return {"name": name, "n_features": nfeat, "n_classes": 29, "conv": convs,
            "rnn": {"type": rtype, "hidden": hidden, "layers": layers, "bidirectional": bidir,
                    "lookahead": lookahead},
            "fc_hidden": list(fc_hidden), "bn_eps": 1e-5, "bn_momentum": 0.1}


# deepspeech.pytorch's conv stack, with fewer channels to stay fast
STOCK_LIKE = [conv(8, 11, 41, 2, 2, 5, 20), conv(8, 11, 21, 1, 2, 5, 10)]
THREE = STOCK_LIKE + [conv(6, 5, 11, 1, 2, 2, 5)]

# (case, config, precision, seed)
EXPORT_CASES = [
    ("bi_lstm_f32", cfg("pt-bi-lstm", STOCK_LIKE, "lstm", 24, 3, True), "fp32", 5),
    ("uni_gru_la4_f32", cfg("pt-uni-gru", STOCK_LIKE, "gru", 20, 2, False, 4), "fp32", 6),
    ("bi_tanh_3conv_f64", cfg("pt-bi-tanh", THREE, "rnn_tanh", 16, 2, True), "fp64", 7),
    ("uni_relu_nola_f64", cfg("pt-uni-relu", STOCK_LIKE, "rnn_relu", 12, 2, False, 0, 81), "fp64", 8),
]


def write_cfg(d, c):
    path = os.path.join(d, c["name"] + ".json")
    with open(path, "w") as f:
        json.dump(c, f)
    return path


# ---------------------------------------------------------------- mapping

def to_dstrain(sd, c):
    """deepspeech.pytorch state_dict -> (params, state) under dstrain's names
    (the test's own statement of pt_layout.h, for the peer model)."""
    params, state = {}, {}

    def bn(ds, pt):
        params[ds + ".bn.weight"] = sd[pt + ".weight"]
        params[ds + ".bn.bias"] = sd[pt + ".bias"]
        state[ds + ".bn.running_mean"] = sd[pt + ".running_mean"]
        state[ds + ".bn.running_var"] = sd[pt + ".running_var"]

    for i in range(len(c["conv"])):
        params["conv.%d.weight" % i] = sd["conv.seq_module.%d.weight" % (3 * i)].transpose(2, 3)
        params["conv.%d.bias" % i] = sd["conv.seq_module.%d.bias" % (3 * i)]
        bn("conv.%d" % i, "conv.seq_module.%d" % (3 * i + 1))
    r = c["rnn"]
    for j in range(r["layers"]):
        if j:
            bn("rnn.%d" % j, "rnns.%d.batch_norm.module" % j)
        for dname, suffix in [("fwd", "")] + ([("bwd", "_reverse")] if r["bidirectional"] else []):
            for w in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
                params["rnn.%d.%s.%s" % (j, dname, w)] = sd["rnns.%d.rnn.%s_l0%s" % (j, w, suffix)]
    if not r["bidirectional"] and r.get("lookahead", 0) > 0:
        params["lookahead.weight"] = sd["lookahead.0.conv.weight"].squeeze(1)
    bn("fc", "fc.0.module.0")
    params["fc.weight"] = sd["fc.0.module.1.weight"]
    return params, state


# ---------------------------------------------------------------- part a: export

def train(tmp, c, precision, seed, dstrain):
    ck = os.path.join(tmp, c["name"] + "-ck")
    run([dstrain, "train", "--config", write_cfg(tmp, c), "--synthetic", "--steps", 3,
         "--batch", 4, "--max-frames", 120, "--seed", seed, "--lr", "1e-3", "--precision",
         precision, "--checkpoint-dir", ck], 0, "%s: dstrain train" % c["name"])
    return os.path.join(ck, "step-00000003.h5")


def max_err(ours, theirs, lengths):
    """max |a - b| over real frames, and max |a| there: a, b [T'][N][C]."""
    err, mag = 0.0, 0.0
    for n, L in enumerate(lengths):
        a, b = ours[:L, n], theirs[:L, n]
        err = max(err, float((a - b).abs().max()))
        mag = max(mag, float(a.abs().max()))
    return err, mag


def ref_logits(model, feats, lengths):
    """DeepSpeech re-creation's logits [T'][N][C] (its fc's output, before the
    eval softmax) and softmax output, batch sorted longest first as
    pack_padded_sequence wants, then put back in our order."""
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    x = feats[order].transpose(1, 2).unsqueeze(1)          # [N][1][F][T]
    seen = {}
    h = model.fc.register_forward_hook(lambda m, i, o: seen.__setitem__("fc", o))
    with torch.no_grad():
        probs, _ = model(x, torch.tensor([lengths[i] for i in order], dtype=torch.int32))
    h.remove()
    inv = [order.index(i) for i in range(len(lengths))]
    return seen["fc"][:, inv], probs[inv].transpose(0, 1)


def export_case(tmp, name, c, precision, seed, args):
    dtype = torch.float64 if precision == "fp64" else torch.float32
    ckpt = train(tmp, c, precision, seed, args.dstrain)
    out = os.path.join(tmp, name + ".pt")
    p = run([args.dstrain, "export", "--pytorch", ckpt, out], 0, name + ": dstrain export")
    if p.returncode:
        return
    stock_conv = len(c["conv"]) == 2 and all(k["channels"] == 32 for k in c["conv"])
    check(stock_conv or "two convolutions of 32 channels" in p.stderr,
          "%s: export notes that stock deepspeech.pytorch has two convolutions of 32 channels" % name)
    if c["rnn"]["type"] == "rnn_relu":
        check("rnn_relu" in p.stderr, "%s: export notes rnn_relu" % name)
    if not c["rnn"]["bidirectional"] and not c["rnn"]["lookahead"]:
        check("lookahead" in p.stderr, "%s: export notes the missing lookahead" % name)

    sd = torch.load(out)
    sd_safe = torch.load(out, weights_only=True)
    check(isinstance(sd, collections.OrderedDict) and list(sd) == list(sd_safe) and
          all(torch.equal(sd[k], sd_safe[k]) for k in sd),
          "%s: torch.load and torch.load(weights_only=True) read the same OrderedDict" % name)

    model = deepspeech_ref.DeepSpeech(c).to(dtype).eval()
    try:
        model.load_state_dict(sd, strict=True)
        check(True, "%s: load_state_dict(strict=True) into deepspeech.pytorch's DeepSpeech" % name)
    except RuntimeError as e:
        check(False, "%s: load_state_dict(strict=True): %s" % (name, e))
        return
    check(list(sd) == list(model.state_dict()),
          "%s: keys in the order of DeepSpeech's own state_dict()" % name)
    floats = [v.dtype for k, v in sd.items() if not k.endswith("num_batches_tracked")]
    check(set(floats) == {dtype}, "%s: tensors are %s" % (name, dtype))
    counts = {int(v) for k, v in sd.items() if k.endswith("num_batches_tracked")}
    check(counts == {3}, "%s: num_batches_tracked is the step (3): %s" % (name, counts))

    dump = os.path.join(tmp, name + "-logits.h5")
    run([args.logits_dump, "--checkpoint", ckpt, "--batch", 4, "--frames", 120, "--seed",
         seed + 100, "--out", dump], 0, name + ": pt_logits_dump")
    with h5py.File(dump, "r") as f:
        feats = torch.as_tensor(f["batch/features"][()]).to(dtype)       # [N][T][F]
        lengths = [int(v) for v in f["batch/lengths"][()]]
        ours = torch.as_tensor(f["out/logits"][()]).to(dtype)           # [T'][N][C]
        out_len = [int(v) for v in f["out/out_lengths"][()]]
    check(len(set(lengths)) > 1, "%s: the batch has utterances of different lengths %s"
          % (name, lengths))

    theirs, probs = ref_logits(model, feats, lengths)
    err, mag = max_err(ours, theirs, out_len)
    tol = TOL[dtype] * (mag if mag > 0 else 1.0)
    check(err <= tol, "%s: DeepSpeech's logits = dstrain's: max |diff| %.3g (max |logit| %.3g, "
          "tolerance %.3g)" % (name, err, mag, tol))
    perr, _ = max_err(torch.softmax(ours, -1), probs, out_len)
    check(perr <= TOL[dtype], "%s: DeepSpeech's eval softmax = softmax of dstrain's logits: "
          "max |diff| %.3g" % (name, perr))

    peer = peer_model.PeerModel(c).to(dtype).eval()
    peer.load_peer(*to_dstrain(sd, c))
    with torch.no_grad():
        plog, plen = peer(feats, lengths)
    check(plen == out_len, "%s: the peer's output lengths are dstrain's" % name)
    err2, _ = max_err(ours, plog, out_len)
    check(err2 <= tol, "%s: the peer model through the mapping = dstrain: max |diff| %.3g"
          % (name, err2))


# DS1's graph and the convolution-only ones (Jasper DR, Wav2Letter+): no
# deepspeech.pytorch counterpart, so their state_dict keys are dstrain's own
# names, for bench/pytorch_ds2.py's twins (DeepSpeech1, the conv-only one)
JASPER_DR = {"name": "jdrx", "n_features": 10, "n_classes": 29, "dense_residual": True,
             "conv": [{"channels": 6, "kernel_time": 5, "kernel_freq": 10, "stride_time": 2,
                       "pad_time": 2, "bias": False, "activation": "relu", "dropout": 0.1},
                      {"channels": 6, "kernel_time": 3, "kernel_freq": 1, "pad_time": 1,
                       "bias": False, "activation": "relu", "dropout": 0.1, "block": 1,
                       "repeat": 2},
                      {"channels": 8, "kernel_time": 5, "kernel_freq": 1, "pad_time": 4,
                       "dilation_time": 2, "bias": False, "activation": "relu", "block": 2,
                       "repeat": 2},
                      {"channels": 8, "kernel_time": 1, "kernel_freq": 1, "bias": False,
                       "activation": "relu"}],
             "fc_hidden": [], "output": {"batch_norm": False, "bias": True}, "bn_eps": 1e-3}
W2L = {"name": "w2lx", "n_features": 10, "n_classes": 29,
       "conv": [{"channels": 6, "kernel_time": 5, "kernel_freq": 10, "stride_time": 2,
                 "pad_time": 2, "bias": False, "dropout": 0.2},
                {"channels": 7, "kernel_time": 3, "kernel_freq": 1, "pad_time": 1, "bias": False,
                 "dropout": 0.2, "repeat": 3},
                {"channels": 8, "kernel_time": 5, "kernel_freq": 1, "pad_time": 4,
                 "dilation_time": 2, "bias": False, "dropout": 0.3}],
       "fc_hidden": [], "output": {"batch_norm": False, "bias": True}, "bn_eps": 1e-3}
DS1 = {"name": "ds1x", "n_features": 12, "n_classes": 29, "context": 2, "fc_pre": [10, 8],
       "rnn": {"type": "lstm", "hidden": 6, "layers": 1, "bidirectional": False},
       "fc_hidden": [7], "dropout": 0.1, "output": {"batch_norm": False, "bias": True}}


def export_own_names(tmp, base, precision, seed, args):
    """export: dstrain's names and shapes, loadable into bench/pytorch_ds2.py's
    twin and the peer model, whose eval logits are dstrain's; import of that
    file gives back every tensor bit for bit."""
    name = "%s_%s" % (base["name"], precision)
    dtype = torch.float64 if precision == "fp64" else torch.float32
    c = dict(base, name=name)
    ckpt = train(tmp, c, precision, seed, args.dstrain)
    out = os.path.join(tmp, name + ".pt")
    p = run([args.dstrain, "export", "--pytorch", ckpt, out], 0, name + ": dstrain export")
    if p.returncode:
        return
    check("dstrain's own tensor names" in p.stderr, "%s: export notes the names are dstrain's" % name)
    sd = torch.load(out, weights_only=True)
    model = pytorch_ds2.build_model(c).to(dtype).eval()
    mine_p, mine_s = model.dstrain_names()
    check(list(sd) == list(mine_p) + list(mine_s) and all(v.dtype == dtype for v in sd.values()),
          "%s: the keys are dstrain's names in table order, %s: %s" % (name, dtype, list(sd)))
    try:
        model.load_dstrain({k: sd[k] for k in mine_p}, {k: sd[k] for k in mine_s})
    except (KeyError, ValueError) as e:
        check(False, "%s: load into %s: %s" % (name, type(model).__name__, e))
        return
    dump = os.path.join(tmp, name + "-logits.h5")
    run([args.logits_dump, "--checkpoint", ckpt, "--batch", 4, "--frames", 120, "--seed",
         seed + 100, "--out", dump], 0, name + ": pt_logits_dump")
    with h5py.File(dump, "r") as f:
        feats = torch.as_tensor(f["batch/features"][()]).to(dtype)
        lengths = [int(v) for v in f["batch/lengths"][()]]
        ours = torch.as_tensor(f["out/logits"][()]).to(dtype)
        out_len = [int(v) for v in f["out/out_lengths"][()]]
    with torch.no_grad():
        theirs, _ = model(feats, torch.tensor(lengths, dtype=torch.int64))
    err, mag = max_err(ours, theirs, out_len)
    tol = TOL[dtype] * (mag if mag > 0 else 1.0)
    check(err <= tol, "%s: %s's eval logits = dstrain's: max |diff| %.3g (tolerance %.3g)"
          % (name, type(model).__name__, err, tol))
    peer = peer_model.PeerModel(c).to(dtype).eval()
    peer.load_peer({k: sd[k] for k in mine_p}, {k: sd[k] for k in mine_s})
    with torch.no_grad():
        plog, _ = peer(feats, lengths)
    err2, _ = max_err(ours, plog, out_len)
    check(err2 <= tol, "%s: the peer model = dstrain: max |diff| %.3g" % (name, err2))
    # import it back: the same tensors, bit for bit, under the same names
    back_h5, back_pt = os.path.join(tmp, name + "-back.h5"), os.path.join(tmp, name + "-back.pt")
    run([args.dstrain, "import", "--pytorch", out, back_h5, "--config", write_cfg(tmp, c),
         "--precision", precision], 0, name + ": dstrain import")
    run([args.dstrain, "export", "--pytorch", back_h5, back_pt], 0, name + ": export again")
    if os.path.exists(back_pt):
        again = torch.load(back_pt, weights_only=True)
        check(list(again) == list(sd) and all(bits_equal(again[k], sd[k]) for k in sd),
              "%s: import then export gives every tensor back bit for bit" % name)


def part_export(tmp, args):
    for name, c, precision, seed in EXPORT_CASES:
        export_case(tmp, name, c, precision, seed, args)
    for base, precision, seed in ((DS1, "fp32", 41), (DS1, "fp64", 42),
                                  (JASPER_DR, "fp32", 43), (W2L, "fp64", 44)):
        export_own_names(tmp, base, precision, seed, args)


# ---------------------------------------------------------------- part b: round trip

SMALL_STOCK = deepspeech_ref.stock_config(hidden=16, layers=2)
SMALL_UNI = deepspeech_ref.stock_config(bidirectional=False, rnn_type="gru", hidden=12,
                                        layers=2, context=5)


def torch_state_dict(c, seed, count=1234):
    """A DeepSpeech initialised by torch, BatchNorm moved off its defaults."""
    torch.manual_seed(seed)
    m = deepspeech_ref.DeepSpeech(c)
    with torch.no_grad():
        for mod in m.modules():
            if isinstance(mod, (torch.nn.BatchNorm1d, torch.nn.BatchNorm2d)):
                mod.weight.uniform_(0.5, 1.5)
                mod.bias.uniform_(-0.5, 0.5)
                mod.running_mean.normal_(0, 0.3)
                mod.running_var.uniform_(0.5, 2.0)
                mod.num_batches_tracked.fill_(count)
    return m.state_dict()


def bits_equal(a, b):
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.dtype in (torch.float32, torch.int32):
        return torch.equal(a.contiguous().view(torch.int32), b.contiguous().view(torch.int32))
    if a.dtype in (torch.float64, torch.int64):
        return torch.equal(a.contiguous().view(torch.int64), b.contiguous().view(torch.int64))
    return torch.equal(a, b)


def same_dict(got, want):
    if list(got) != list(want):
        return "keys differ: %s" % sorted(set(got) ^ set(want))[:5]
    bad = [k for k in want if not bits_equal(got[k], want[k])]
    return "not bit-identical: %s" % bad[:5] if bad else ""


def roundtrip(tmp, name, obj, c, want, args, precision="fp32", protocol=2):
    src = os.path.join(tmp, name + ".pt")
    torch.save(obj, src, pickle_protocol=protocol)
    ckpt = os.path.join(tmp, name + ".h5")
    back = os.path.join(tmp, name + "-back.pt")
    p = run([args.dstrain, "import", "--pytorch", src, ckpt, "--config", write_cfg(tmp, c),
             "--precision", precision], 0, name + ": dstrain import")
    if p.returncode:
        return
    q = run([args.dstrain, "export", "--pytorch", ckpt, back], 0, name + ": dstrain export")
    if q.returncode:
        return
    diff = same_dict(torch.load(back, weights_only=True), want)
    check(not diff, "%s: import -> export gives back every tensor bit for bit %s" % (name, diff))
    i = run([args.dstrain, "info", ckpt], 0, name + ": dstrain info of the import")
    check(i.returncode == 0 and "verified" in i.stdout, "%s: dstrain info accepts the import" % name)
    return q


def part_roundtrip(tmp, args):
    sd = torch_state_dict(SMALL_STOCK, 1)
    q = roundtrip(tmp, "stock_f32_p2", sd, SMALL_STOCK, sd, args)
    if q is not None:
        check("note" not in q.stderr, "stock-shaped model: export prints no note (%r)"
              % q.stderr.strip())
    roundtrip(tmp, "stock_f32_p4", sd, SMALL_STOCK, sd, args, protocol=4)

    step = torch.tensor(7.0)
    lightning = {   # a PyTorch Lightning checkpoint's layout, with plain values only
        "epoch": 3, "global_step": 1234, "pytorch-lightning_version": "1.6.5",
        "state_dict": sd, "hparams_name": "kwargs", "loops": None,
        "callbacks": {"ModelCheckpoint": {"best_model_score": torch.tensor(0.25),
                                          "monitor": "wer", "save_last": True}},
        "optimizer_states": [{"state": {0: {"step": step, "exp_avg": torch.ones(3)}},
                              "param_groups": [{"lr": 1.5e-4, "betas": (0.9, 0.999),
                                                "amsgrad": False, "params": [0, 1, 2]}]}],
        "lr_schedulers": [{"gamma": 0.99, "last_epoch": 3, "_step_count": 4}],
        "hyper_parameters": {"labels": list("_'ABCDEFGHIJKLMNOPQRSTUVWXYZ "), "precision": 32,
                             "ratio": 0.5, "blob": b"\x00\x01", "tags": {"a", "b"}},
    }
    roundtrip(tmp, "lightning_p2", lightning, SMALL_STOCK, sd, args)
    roundtrip(tmp, "lightning_p4", lightning, SMALL_STOCK, sd, args, protocol=4)

    sd64 = collections.OrderedDict((k, v.double() if v.is_floating_point() else v)
                                   for k, v in torch_state_dict(SMALL_STOCK, 2).items())
    roundtrip(tmp, "stock_f64", sd64, SMALL_STOCK, sd64, args, precision="fp64")

    sd16 = collections.OrderedDict((k, v.half() if v.is_floating_point() else v)
                                   for k, v in torch_state_dict(SMALL_STOCK, 3).items())
    want16 = collections.OrderedDict((k, v.float() if v.is_floating_point() else v)
                                     for k, v in sd16.items())
    roundtrip(tmp, "stock_f16", sd16, SMALL_STOCK, want16, args)

    sdu = torch_state_dict(SMALL_UNI, 4)
    roundtrip(tmp, "uni_gru_lookahead", sdu, SMALL_UNI, sdu, args)

    # views: a transposed (non-contiguous) weight, two tensors sharing one
    # storage at offsets, an expanded (stride 0) running mean
    views = collections.OrderedDict(sd)
    w = sd["fc.0.module.1.weight"]
    views["fc.0.module.1.weight"] = w.t().contiguous().t()
    a, b = sd["rnns.1.rnn.weight_ih_l0"], sd["rnns.1.rnn.weight_hh_l0"]
    shared = torch.cat([a.flatten(), b.flatten()])
    views["rnns.1.rnn.weight_ih_l0"] = shared[:a.numel()].view(a.shape)
    views["rnns.1.rnn.weight_hh_l0"] = shared[a.numel():].view(b.shape)
    rm = sd["fc.0.module.0.running_mean"]
    const = torch.full_like(rm, 0.125)
    views["fc.0.module.0.running_mean"] = torch.tensor([0.125]).expand(rm.shape)
    want = collections.OrderedDict(sd)
    want["fc.0.module.0.running_mean"] = const
    check(not views["fc.0.module.1.weight"].is_contiguous() and
          views["rnns.1.rnn.weight_hh_l0"].storage_offset() > 0,
          "views: the state_dict holds a non-contiguous tensor and a storage offset")
    roundtrip(tmp, "views", views, SMALL_STOCK, want, args)


# ---------------------------------------------------------------- part c: refusals

def refused(name, p, path, *needles):
    """Exit 1, no signal, a message naming path and every needle."""
    msg = p.stderr
    ok = p.returncode == 1 and path in msg and all(n in msg for n in needles)
    check(ok, "%s: refused (rc %d), naming %s" % (name, p.returncode,
                                                   ", ".join((os.path.basename(path),) + needles)))
    if not ok:
        sys.stdout.write("  stderr: %s\n" % msg.strip())
    else:
        sys.stdout.write("       %s\n" % msg.strip().splitlines()[-1][:300])


def write_zip(path, records):
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        for n, data in records:
            z.writestr(n, data)


def imp(args, tmp, src, c=SMALL_STOCK, extra=()):
    cmd = [args.dstrain, "import", "--pytorch", src, os.path.join(tmp, "refused.h5")]
    if c is not None:
        cmd += ["--config", write_cfg(tmp, c)]
    return run(cmd + list(extra), 1)


class Thing:   # an object of a class dstrain does not know
    def __init__(self):
        self.x = 1


def part_refusals(tmp, args):
    sd = torch_state_dict(SMALL_STOCK, 11)

    def save(name, obj, protocol=2):
        path = os.path.join(tmp, name)
        torch.save(obj, path, pickle_protocol=protocol)
        return path

    d = collections.OrderedDict(sd)
    del d["rnns.1.rnn.weight_hh_l0"]
    p = save("missing.pt", d)
    refused("missing key", imp(args, tmp, p), p, "missing key rnns.1.rnn.weight_hh_l0")

    d = collections.OrderedDict(sd)
    d["fc.0.module.1.weight"] = torch.zeros(28, 16)
    p = save("shape.pt", d)
    refused("wrong shape", imp(args, tmp, p), p, "key fc.0.module.1.weight has shape [28, 16]",
            "needs [29, 16]")

    d = collections.OrderedDict(sd)
    d["extra.weight"] = torch.zeros(2)
    p = save("unexpected.pt", d)
    refused("unexpected key", imp(args, tmp, p), p, "unexpected key extra.weight")

    # one element expanded to 2^19 x 2^19 (stride 0): a 1 TiB tensor in a
    # file of kilobytes, refused from its shape before anything is allocated
    d = collections.OrderedDict(sd)
    d["fc.0.module.1.weight"] = torch.zeros(1).expand(1 << 19, 1 << 19)
    p = save("expanded_huge.pt", d)
    refused("a 1 TiB expanded view", imp(args, tmp, p), p,
            "key fc.0.module.1.weight has shape [524288, 524288]")

    p = save("default_model.pt", sd)
    refused("the default model ds2", imp(args, tmp, p, c=None), p, "model ds2",
            "key rnns.0.rnn.weight_ih_l0 has shape")

    d = collections.OrderedDict(sd)
    d["conv.seq_module.0.bias"] = d["conv.seq_module.0.bias"].clone()
    d["conv.seq_module.0.bias"][2] = float("nan")
    p = save("nan.pt", d)
    refused("non-finite value", imp(args, tmp, p), p, "key conv.seq_module.0.bias", "element 2")

    d = collections.OrderedDict(sd)
    d["fc.0.module.0.running_var"] = -d["fc.0.module.0.running_var"]
    p = save("negvar.pt", d)
    refused("negative running variance", imp(args, tmp, p), p, "key fc.0.module.0.running_var")

    d = collections.OrderedDict(sd)
    d["fc.0.module.1.weight"] = d["fc.0.module.1.weight"].long()
    p = save("int_weight.pt", d)
    refused("integer weight", imp(args, tmp, p), p, "key fc.0.module.1.weight is int64")

    p = save("list.pt", [1, 2, 3])
    refused("a list", imp(args, tmp, p), p, "holds a list, not a state_dict")
    p = save("plain_dict.pt", {"a": 1, "b": "x"})
    refused("a dict without tensors", imp(args, tmp, p), p, "without tensors", "keys: a, b")
    p = save("module.pt", torch.nn.Linear(2, 2))
    refused("a whole nn.Module", imp(args, tmp, p), p, "torch.nn.modules.linear.Linear")
    p = save("object_beside.pt", {"state_dict": sd, "hyper_parameters": Thing()}, protocol=4)
    refused("an object beside the state_dict", imp(args, tmp, p), p, "Thing")
    d = collections.OrderedDict(sd)
    d["conv.seq_module.0.bias"] = 3
    p = save("int_entry.pt", d)
    refused("a non-tensor entry", imp(args, tmp, p), p, "key conv.seq_module.0.bias is a int")
    p = save("bool_tensor.pt", collections.OrderedDict(sd, mask=torch.ones(2, dtype=torch.bool)))
    refused("a bool storage", imp(args, tmp, p), p, "BoolStorage")

    good = save("good.pt", sd)
    raw = open(good, "rb").read()
    p = os.path.join(tmp, "truncated.pt")
    open(p, "wb").write(raw[:len(raw) // 2])
    refused("truncated zip", imp(args, tmp, p), p, "not a readable zip")
    p = os.path.join(tmp, "no_directory.pt")
    open(p, "wb").write(raw[:-10])
    refused("zip without its end", imp(args, tmp, p), p, "not a readable zip")

    with zipfile.ZipFile(good) as z:
        infos = {i.filename: i for i in z.infolist()}
        prefix = z.namelist()[0].split("/")[0]
        records = [(n, z.read(n)) for n in z.namelist()]

    def flip(name, record, needle):
        info = infos[record]
        h = raw[info.header_offset:info.header_offset + 30]
        start = info.header_offset + 30 + struct.unpack("<H", h[26:28])[0] + \
            struct.unpack("<H", h[28:30])[0]
        bad = bytearray(raw)
        bad[start + info.file_size // 2] ^= 0x5A
        p = os.path.join(tmp, name)
        open(p, "wb").write(bytes(bad))
        refused(name, imp(args, tmp, p), p, record, *needle)

    flip("corrupt_pickle.pt", prefix + "/data.pkl", ("CRC",))
    flip("corrupt_storage.pt", prefix + "/data/0", ("CRC", "key conv.seq_module.0.weight"))

    p = os.path.join(tmp, "text.pt")
    open(p, "w").write("not a zip at all\n")
    refused("a text file", imp(args, tmp, p), p, "not a readable zip")
    p = os.path.join(tmp, "nothere.pt")
    refused("a missing file", imp(args, tmp, p), p, "cannot open")

    p = os.path.join(tmp, "garbage_pickle.pt")
    write_zip(p, [("archive/data.pkl", b"\x80\x02garbage"), ("archive/version", b"3\n")])
    refused("garbage pickle", imp(args, tmp, p), p, "data.pkl, byte 2", "opcode")
    p = os.path.join(tmp, "truncated_pickle.pt")
    pkl = dict(records)[prefix + "/data.pkl"]
    write_zip(p, [(n, pkl[:len(pkl) // 2] if n.endswith("data.pkl") else data)
                  for n, data in records])
    refused("truncated pickle", imp(args, tmp, p), p, "data.pkl", "truncated")
    p = os.path.join(tmp, "missing_storage.pt")
    write_zip(p, [(n, data) for n, data in records if not n.endswith("/data/3")])
    refused("missing storage record", imp(args, tmp, p), p, "data/3", "key ")
    p = os.path.join(tmp, "short_storage.pt")
    write_zip(p, [(n, data[:-4] if n.endswith("/data/1") else data) for n, data in records])
    refused("short storage record", imp(args, tmp, p), p, "key conv.seq_module.0.bias")
    p = os.path.join(tmp, "big_endian.pt")
    write_zip(p, [(n, b"big" if n.endswith("/byteorder") else data) for n, data in records]
              + ([] if any(n.endswith("/byteorder") for n, _ in records)
                 else [(prefix + "/byteorder", b"big")]))
    refused("big-endian", imp(args, tmp, p), p, "byteorder")

    # mutated pickles: any outcome but a crash (exit 0 or 1, a message on 1)
    rng = random.Random(1)
    crashes, failures_without_message = 0, 0
    for k in range(16):
        m = bytearray(pkl)
        for _ in range(rng.randint(1, 4)):
            m[rng.randrange(len(m))] = rng.randrange(256)
        p = os.path.join(tmp, "mutated.pt")
        write_zip(p, [(n, bytes(m) if n.endswith("data.pkl") else data) for n, data in records])
        q = subprocess.run([args.dstrain, "import", "--pytorch", p, os.path.join(tmp, "m.h5"),
                            "--config", write_cfg(tmp, SMALL_STOCK)],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           encoding="utf-8", errors="replace")
        if q.returncode not in (0, 1):
            crashes += 1
            sys.stdout.write("  mutation %d: rc %d %s\n" % (k, q.returncode, q.stderr[-300:]))
        elif q.returncode == 1 and p not in q.stderr:
            failures_without_message += 1
    check(crashes == 0 and failures_without_message == 0,
          "16 mutated pickles in a zip: no crash (%d), every refusal names the file (%d without)"
          % (crashes, failures_without_message))

    # export of a model deepspeech.pytorch cannot express
    c = cfg("pt-fc-hidden", [conv(4, 5, 21, 2, 4, 2, 10)], "gru", 8, 1, True, fc_hidden=[10])
    ck = os.path.join(tmp, "fc-ck")
    run([args.dstrain, "train", "--config", write_cfg(tmp, c), "--synthetic", "--steps", 1,
         "--batch", 2, "--max-frames", 60, "--checkpoint-dir", ck], 0, "fc_hidden: train")
    ckpt = os.path.join(ck, "step-00000001.h5")
    out = os.path.join(tmp, "fc.pt")
    q = run([args.dstrain, "export", "--pytorch", ckpt, out], 1)
    check(q.returncode == 1 and "fc_hidden.0" in q.stderr and not os.path.exists(out),
          "export of a model with hidden FC layers refused, naming fc_hidden.0, nothing written")
    p = save("for_fc.pt", sd)
    q = run([args.dstrain, "import", "--pytorch", p, os.path.join(tmp, "x.h5"), "--model",
             "ds2-large"], 1)
    check(q.returncode == 1 and "fc_hidden.0" in q.stderr,
          "import into a model with hidden FC layers refused, naming fc_hidden.0")
    q = run([args.dstrain, "export", ckpt, out], 2)
    check(q.returncode == 2 and "--pytorch" in q.stderr, "export without --pytorch: usage error")


# ---------------------------------------------------------------- main

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--part", choices=["export", "roundtrip", "refusals", "all"], default="all")
    ap.add_argument("--dstrain", required=True)
    ap.add_argument("--logits-dump", required=True)
    ap.add_argument("--keep", help="work in this directory and keep it")
    args = ap.parse_args()
    torch.set_num_threads(1)
    tmp = args.keep or tempfile.mkdtemp(prefix="pytorch_export_")
    os.makedirs(tmp, exist_ok=True)
    try:
        parts = {"export": part_export, "roundtrip": part_roundtrip, "refusals": part_refusals}
        for name, fn in parts.items():
            if args.part in (name, "all"):
                fn(tmp, args)
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    if FAILURES:
        print("%d check(s) failed:\n  %s" % (len(FAILURES), "\n  ".join(FAILURES)))
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
