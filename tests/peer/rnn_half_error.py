#!/usr/bin/env python3
"""rnn_half_error.py - how far cuDNN's own 16-bit recurrent layers (through
PyTorch) are from FP64, for the shapes of test_model_gpu_vs_cpu's models.

Measures, on the GPU, the norm-wise relative error of y, dx and each weight
gradient of one nn.GRU / nn.LSTM layer run in float16 and bfloat16 against
the same layer in float64 on the same rounded inputs and weights (rounding
the starting point is not counted, as in test_model_gpu_vs_cpu). This is the
error a 16-bit cuDNN RNN has by itself, which dstrain's CUDA backend (also
cuDNN) cannot do better than: the yardstick for that test's 16-bit margins.

usage: rnn_half_error.py [--json OUT]   (needs a CUDA PyTorch)
"""
import argparse
import json
import sys

import torch

# (name, cell, input, hidden, bidirectional): the two models of
# tests/unit/test_model_gpu_vs_cpu.c (first and second recurrent layers)
LAYERS = [
    ("bi-lstm layer 1", "lstm", 40, 20, True),
    ("bi-lstm layer 2", "lstm", 20, 20, True),
    ("gru uni layer 1", "gru", 48, 22, False),
    ("gru uni layer 2", "gru", 22, 22, False),
]
T_FRAMES, N_UTT = 48, 5


def rel(a, b):
    a, b = a.double(), b.double()
    d = max(a.norm().item(), b.norm().item())
    return (a - b).norm().item() / d if d > 0 else 0.0


def one(cell, n_in, hidden, bidir, dtype, seed):
    torch.manual_seed(seed)
    cls = torch.nn.GRU if cell == "gru" else torch.nn.LSTM
    ref = cls(n_in, hidden, batch_first=False, bidirectional=bidir).cuda().double()
    x = torch.randn(T_FRAMES, N_UTT, n_in, device="cuda", dtype=torch.float64)
    dy = torch.randn(T_FRAMES, N_UTT, hidden * (2 if bidir else 1), device="cuda",
                     dtype=torch.float64) * 10.0
    low = cls(n_in, hidden, batch_first=False, bidirectional=bidir).cuda().to(dtype)
    with torch.no_grad():   # the reference starts from the rounded values
        for (n, p), (_, q) in zip(ref.named_parameters(), low.named_parameters()):
            q.copy_(p.to(dtype))
            p.copy_(q.double())
    x = x.to(dtype).double()
    dy = dy.to(dtype).double()
    out = {}
    xr = x.clone().requires_grad_(True)
    xl = x.to(dtype).requires_grad_(True)
    yr, _ = ref(xr)
    yl, _ = low(xl)
    yr.backward(dy)
    yl.backward(dy.to(dtype))
    out["y"] = rel(yl, yr)
    out["dx"] = rel(xl.grad, xr.grad)
    for (n, p), (_, q) in zip(ref.named_parameters(), low.named_parameters()):
        out["d" + n] = rel(q.grad, p.grad)
    return out


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", help="also write the figures to this file")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("skipped: no CUDA PyTorch")
        return 77
    torch.backends.cudnn.enabled = True
    print("torch %s, cuDNN %s, %s" % (torch.__version__, torch.backends.cudnn.version(),
                                      torch.cuda.get_device_name(0)))
    res = {}
    for dtype, dname, u in ((torch.float16, "float16", 2.0 ** -11),
                            (torch.bfloat16, "bfloat16", 2.0 ** -8)):
        for name, cell, n_in, hidden, bidir in LAYERS:
            try:
                worst = {}
                for seed in (1, 2, 3):
                    r = one(cell, n_in, hidden, bidir, dtype, seed)
                    for k, v in r.items():
                        worst[k] = max(worst.get(k, 0.0), v)
            except RuntimeError as e:
                print("%-9s %-16s not run: %s" % (dname, name, str(e).splitlines()[0]))
                continue
            res["%s %s" % (dname, name)] = worst
            w = max(v for k, v in worst.items() if k.startswith("dweight") or k.startswith("dbias"))
            print("%-9s %-16s y %.2e (%.0fu)  dx %.2e (%.0fu)  worst dW %.2e (%.0fu)" %
                  (dname, name, worst["y"], worst["y"] / u, worst["dx"], worst["dx"] / u, w, w / u))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
