#!/usr/bin/python3
"""DeepSpeech2 (and DS1's graph, class DeepSpeech1; the convolution-only
Jasper, Jasper DR and Wav2Letter+, class ConvASR) in PyTorch, benchmarked
like `dstrain bench`.

The same architecture as dstrain, built from configs/PRESET.json, with
deepspeech.pytorch's layer structure: Conv2d + BatchNorm2d + Hardtanh(0, 20)
with the padded frames zeroed after each (MaskConv), packed RNNs with the two
directions summed, sequence-wise BatchNorm1d before every RNN layer but the
first, a lookahead conv for unidirectional models, optional hidden Linear +
Hardtanh layers, BatchNorm1d + Linear (no bias), CTCLoss (sum, zero_infinity,
divided by the batch size). Stock torch BatchNorm: in train mode its
statistics include the padded frames (deepspeech.pytorch's behaviour; dstrain
counts real frames only). Input is [N][1][T][F] and conv weights are
[out][in][time][freq], dstrain's layout (deepspeech.pytorch puts frequency
first; the work is the same). A config with conv layers and no "rnn" is
ConvASR's: conv (dilated in time, a bias where the config keeps one) +
BatchNorm2d (+ the 1x1 conv + BatchNorm2d residual branches at a residual
block's last layer) + ReLU or Hardtanh(0, 20) + dropout, padding zeroed,
then the output Linear.

Protocol (as dstrain bench): synthetic batches, per configuration W warm-up
steps left out and S timed steps; per step the wall time of zero_grad,
forward, CTC loss, backward, global-norm clipping (400) and SGD with Nesterov
momentum 0.9 (train), or forward and loss under no_grad with BatchNorm in
training mode, as dstrain bench (forward); on CUDA the step ends with torch.cuda.synchronize(). Reported:
median, mean and the mean's 95% CI of the step time and of samples/s, audio
seconds per second, FLOPs (bench/benchlib.py's formula, the same as dstrain's)
and the fraction of the device's peak.

  pytorch_ds2.py --model small [--device cpu|cuda] [--batch 1,2,4|max]
                 [--precision auto|fp32,fp64,fp16,bf16] [--impl eager,amp,compile]
                 [--mode train,forward] [--warmup 10] [--steps 50] [--threads N]
                 [--max-frames 400] [--length-dist read|librispeech|uniform]
                 [--seed 1] [--tf32] [--out F.json] [--csv F.csv]

Implementations (impl): torch-eager runs fp32 and fp64; torch-amp runs
autocast fp16 with a GradScaler (cuda) or bf16 (cpu and cuda; no scaler);
torch-compile runs torch.compile(model) in fp32 (torch >= 2.0; older torch
gives a result with status "error" and the reason). --precision auto (the
default): eager fp32, amp fp16 on cuda / bf16 on cpu, compile fp32. A pair a
given impl does not run (eager fp16, compile fp64, ...) is left out.

Synthetic batches follow dstrain's length rules (bench/benchlib.py): the
same distributions, not the same random numbers; --pool distinct batches are
drawn once and cycled (their FLOPs and frames are averaged over the timed
steps). LibriSpeech lengths are formed into batches as dstrain's sampler
forms them (benchlib.sorted_bucket_lengths, dstrain bench likewise): a
sorted sample cut into batches of consecutive lengths, the pool's batches
at spread quantiles, so both pad as little as a sorted corpus does.

On a 2-core machine keep other work off the cores: torch's OpenMP threads
spin, and with one core taken a step gets several times slower.

Exit status: 0 when every result has status ok, 3 when some are oom or
error (the file is written either way), 1 on bad usage.
"""

import argparse
import math
import os
import random
import re
import resource
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib as bl  # noqa: E402

try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence
except ImportError as e:
    sys.stderr.write("pytorch_ds2: %s (%s needs torch; Debian: python3-torch, "
                     "/usr/bin/python3)\n" % (e, sys.executable))
    sys.exit(1)

PROG = "pytorch_ds2"
TORCH_DTYPE = {"fp32": torch.float32, "fp64": torch.float64, "fp16": torch.float16,
               "bf16": torch.bfloat16}


# ================================================================== model


class MaskConv(nn.Module):
    """deepspeech.pytorch's MaskConv: runs each module of seq and zeroes the
    frames past every utterance's length after each one. x [N][C][T][F]."""

    def __init__(self, seq, specs):
        super().__init__()
        self.seq_module = seq
        self.specs = specs          # per module: conv spec dict or None

    def forward(self, x, lengths):
        for m, spec in zip(self.seq_module, self.specs):
            x = m(x)
            if spec is not None:
                lengths = (lengths + 2 * spec["pad_time"] - spec["kernel_time"]) \
                    // spec["stride_time"] + 1
            t = x.shape[2]
            pad = torch.arange(t, device=x.device).view(1, 1, t, 1) >= lengths.view(-1, 1, 1, 1)
            x = x.masked_fill(pad, 0)
        return x, lengths


class Hardtanh20(nn.Module):
    """Hardtanh(0, 20) as a clamp: the same function and gradient, and unlike
    nn.Hardtanh its backward exists for bfloat16 on torch 1.13's CPU."""

    def forward(self, x):
        return torch.clamp(x, 0.0, 20.0)


class SequenceWise(nn.Module):
    """Applies a module to every frame: [T][N][D] -> [T*N][D] -> back."""

    def __init__(self, module):
        super().__init__()
        self.module = module

    def forward(self, x):
        t, n = x.shape[0], x.shape[1]
        y = self.module(x.reshape(t * n, -1))
        return y.view(t, n, -1)


def _rnn(kind, n_in, hidden, bidirectional):
    if kind == "lstm":
        return nn.LSTM(n_in, hidden, bidirectional=bidirectional, bias=True)
    if kind == "gru":
        return nn.GRU(n_in, hidden, bidirectional=bidirectional, bias=True)
    if kind in ("rnn_tanh", "rnn_relu"):
        return nn.RNN(n_in, hidden, bidirectional=bidirectional, bias=True,
                      nonlinearity=kind[4:])
    raise bl.BenchError("unknown rnn type %r" % kind)


class BatchRNN(nn.Module):
    """deepspeech.pytorch's BatchRNN: optional sequence-wise BatchNorm1d,
    packed RNN, directions summed."""

    def __init__(self, kind, n_in, hidden, bidirectional, batch_norm):
        super().__init__()
        self.hidden = hidden
        self.bidirectional = bidirectional
        self.batch_norm = SequenceWise(nn.BatchNorm1d(n_in)) if batch_norm else None
        self.rnn = _rnn(kind, n_in, hidden, bidirectional)

    def forward(self, x, lengths_cpu):
        if self.batch_norm is not None:
            x = self.batch_norm(x)
        t = x.shape[0]
        x = pack_padded_sequence(x, lengths_cpu, enforce_sorted=False)
        x, _ = self.rnn(x)
        x, _ = pad_packed_sequence(x, total_length=t)
        if self.bidirectional:
            x = x.view(t, x.shape[1], 2, self.hidden).sum(2)
        return x


class Lookahead(nn.Module):
    """deepspeech.pytorch's Lookahead: depthwise conv over `context` future
    frames, no bias. x [T][N][H]."""

    def __init__(self, n_features, context):
        super().__init__()
        self.context = context
        self.conv = nn.Conv1d(n_features, n_features, kernel_size=context,
                              groups=n_features, bias=False)

    def forward(self, x):
        y = x.permute(1, 2, 0)
        y = F.pad(y, (0, self.context - 1))
        return self.conv(y).permute(2, 0, 1)


# conv layer fields beyond DeepSpeech2's, at the values that keep its layer
# (conv + bias, BatchNorm, Hardtanh(0, 20)); others are ConvASR's
DS2_CONV_PLAIN = {"dilation_time": 1, "bias": True, "activation": "clipped_relu", "dropout": 0,
                  "block": 0}


class DeepSpeech2(nn.Module):
    """DeepSpeech2 as dstrain builds it: conv layers (conv + bias, BatchNorm,
    Hardtanh(0, 20)), RNN layers, optional lookahead and hidden FC layers,
    BatchNorm1d + Linear without bias (deepspeech.pytorch's structure; the
    module docstring says where it differs)."""

    def __init__(self, cfg):
        super().__init__()
        for k in ("context", "fc_pre", "dropout", "output"):
            if cfg.get(k):
                raise ValueError("pytorch_ds2's DeepSpeech2 has no %r (DS1's stages: DeepSpeech1 "
                                 "takes them without conv layers)" % k)
        if not cfg.get("rnn"):
            raise ValueError("pytorch_ds2's DeepSpeech2 needs \"rnn\" (conv layers alone: ConvASR)")
        for i, c in enumerate(cfg["conv"]):
            extra = [k for k, plain in DS2_CONV_PLAIN.items() if k in c and c[k] != plain]
            if extra:
                raise ValueError("pytorch_ds2's DeepSpeech2 has DS2's conv layers: conv[%d] "
                                 "sets %s (ConvASR's fields, without \"rnn\")"
                                 % (i, ", ".join(extra)))
        self.cfg = cfg
        eps = float(cfg.get("bn_eps", 1e-5))
        mom = float(cfg.get("bn_momentum", 0.1))
        n_classes = int(cfg.get("n_classes", 29))
        mods, specs = [], []
        c_prev, f = 1, int(cfg["n_features"])
        self.conv_specs = []
        for s in bl.conv_layers(cfg):
            s = {k: s[k] for k in ("channels", "kernel_time", "kernel_freq", "stride_time",
                                   "stride_freq", "pad_time", "pad_freq")}
            self.conv_specs.append(s)
            mods += [nn.Conv2d(c_prev, s["channels"], (s["kernel_time"], s["kernel_freq"]),
                               stride=(s["stride_time"], s["stride_freq"]),
                               padding=(s["pad_time"], s["pad_freq"]), bias=True),
                     nn.BatchNorm2d(s["channels"], eps=eps, momentum=mom),
                     Hardtanh20()]
            specs += [s, None, None]
            f = bl.conv_out_len(f, s["kernel_freq"], s["stride_freq"], s["pad_freq"])
            c_prev = s["channels"]
        self.conv = MaskConv(nn.Sequential(*mods), specs)
        r = cfg["rnn"]
        self.hidden = H = int(r["hidden"])
        self.bidirectional = bool(r["bidirectional"])
        self.rnns = nn.ModuleList()
        for j in range(int(r["layers"])):
            self.rnns.append(BatchRNN(r["type"], c_prev * f if j == 0 else H, H,
                                      self.bidirectional, batch_norm=j > 0))
            for m in self.rnns[-1].modules():
                if isinstance(m, nn.BatchNorm1d):
                    m.eps, m.momentum = eps, mom
        k = int(r.get("lookahead", 0))
        self.lookahead = None
        if not self.bidirectional and k > 0:
            self.lookahead = nn.Sequential(Lookahead(H, k), Hardtanh20())
        self.fc_hidden = nn.ModuleList()
        d = H
        for out in cfg.get("fc_hidden", []):
            self.fc_hidden.append(SequenceWise(nn.Linear(d, int(out), bias=True)))
            d = int(out)
        self.fc = SequenceWise(nn.Sequential(nn.BatchNorm1d(d, eps=eps, momentum=mom),
                                             nn.Linear(d, n_classes, bias=False)))

    def forward(self, x, lengths):
        """x [N][T][F], lengths int64 [N] (on the CPU) -> logits [T'][N][C],
        output lengths (CPU int64)."""
        x, out_len = self.conv(x.unsqueeze(1), lengths.to(x.device))
        n, c, t, f = x.shape
        x = x.permute(2, 0, 1, 3).reshape(t, n, c * f)
        out_cpu = out_len.cpu() if out_len.device.type != "cpu" else out_len
        for rnn in self.rnns:
            x = rnn(x, out_cpu)
        if self.lookahead is not None:
            x = self.lookahead(x)
        for lin in self.fc_hidden:
            x = torch.clamp(lin(x), 0.0, 20.0)
        return self.fc(x), out_cpu

    # dstrain's parameter and BatchNorm state names (tests/peer/peer_model.py)
    def dstrain_names(self):
        """(params, state): dicts dstrain name -> tensor of this model."""
        p, s = {}, {}
        seq = self.conv.seq_module
        for i in range(len(self.conv_specs)):
            conv, bn = seq[3 * i], seq[3 * i + 1]
            p["conv.%d.weight" % i], p["conv.%d.bias" % i] = conv.weight, conv.bias
            p["conv.%d.bn.weight" % i], p["conv.%d.bn.bias" % i] = bn.weight, bn.bias
            s["conv.%d.bn.running_mean" % i], s["conv.%d.bn.running_var" % i] = \
                bn.running_mean, bn.running_var
        for j, br in enumerate(self.rnns):
            if br.batch_norm is not None:
                bn = br.batch_norm.module
                p["rnn.%d.bn.weight" % j], p["rnn.%d.bn.bias" % j] = bn.weight, bn.bias
                s["rnn.%d.bn.running_mean" % j] = bn.running_mean
                s["rnn.%d.bn.running_var" % j] = bn.running_var
            dirs = [("fwd", "")] + ([("bwd", "_reverse")] if self.bidirectional else [])
            for dname, suffix in dirs:
                for w in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
                    p["rnn.%d.%s.%s" % (j, dname, w)] = getattr(br.rnn, "%s_l0%s" % (w, suffix))
        if self.lookahead is not None:
            w = self.lookahead[0].conv.weight            # [H][1][k]
            p["lookahead.weight"] = w
        for k, lin in enumerate(self.fc_hidden):
            p["fc_hidden.%d.weight" % k] = lin.module.weight
            p["fc_hidden.%d.bias" % k] = lin.module.bias
        bn, fc = self.fc.module[0], self.fc.module[1]
        p["fc.bn.weight"], p["fc.bn.bias"] = bn.weight, bn.bias
        s["fc.bn.running_mean"], s["fc.bn.running_var"] = bn.running_mean, bn.running_var
        p["fc.weight"] = fc.weight
        return p, s

    def load_dstrain(self, params, state):
        """Copies dstrain-named arrays (a peer_dump or checkpoint) in; every
        name must match both ways and every shape must agree (lookahead's
        [H][k] goes to torch's [H][1][k])."""
        mine_p, mine_s = self.dstrain_names()
        with torch.no_grad():
            for mine, theirs in ((mine_p, params), (mine_s, state)):
                missing = sorted(set(mine) - set(theirs))
                extra = sorted(set(theirs) - set(mine))
                if missing or extra:
                    raise KeyError("names: missing %s, unknown %s" % (missing, extra))
                for name, dst in mine.items():
                    src = torch.as_tensor(theirs[name])
                    if name == "lookahead.weight":
                        src = src.reshape(dst.shape)
                    if tuple(src.shape) != tuple(dst.shape):
                        raise ValueError("%s: shape %s, model %s"
                                         % (name, tuple(src.shape), tuple(dst.shape)))
                    dst.copy_(src.to(dst.dtype))


def head(model, x, real):
    """DeepSpeech1's and ConvASR's layers after the sequence: x [T][N][D]
    through the hidden FC layers (Linear, Hardtanh(0, 20), padding zeroed by
    real [T][N][1], dropout), the output BatchNorm where the model keeps one,
    and the output Linear -> logits [T][N][C]."""
    t, n = x.shape[0], x.shape[1]
    for lin in model.fc_hidden:
        x = model.drop(torch.clamp(lin(x), 0.0, 20.0) * real)
    if model.out_bn is not None:
        x = model.out_bn(x.reshape(t * n, -1)).reshape(t, n, -1)
    return model.fc(x)


class DeepSpeech1(nn.Module):
    """Mozilla DeepSpeech v0.2.0's graph as dstrain builds it (docs/models.md):
    context windows of C frames each side over each utterance's real
    frames, FC layers + Hardtanh(0, 20) + dropout, one (unidirectional) RNN
    layer, hidden FC layers likewise, an output Linear with a bias (and a
    BatchNorm1d before it where the config keeps one). Dropout is torch's
    own (its masks are not dstrain's: the timing is the same)."""

    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        r = cfg.get("rnn")
        if cfg.get("conv") or not r or int(r["layers"]) != 1:
            raise ValueError("DeepSpeech1 takes no conv layers and one RNN layer")
        self.context = int(cfg.get("context", 0))
        self.hidden = H = int(r["hidden"])
        self.bidirectional = bool(r.get("bidirectional", True))
        p = float(cfg.get("dropout", 0.0))
        d = (2 * self.context + 1) * int(cfg["n_features"])
        self.fc_pre = nn.ModuleList()
        for out in cfg.get("fc_pre", []):
            self.fc_pre.append(nn.Linear(d, int(out)))
            d = int(out)
        self.rnn = BatchRNN(r["type"], d, H, self.bidirectional, batch_norm=False)
        self.fc_hidden = nn.ModuleList()
        d = H
        for out in cfg.get("fc_hidden", []):
            self.fc_hidden.append(nn.Linear(d, int(out)))
            d = int(out)
        out = cfg.get("output", {})
        eps, mom = float(cfg.get("bn_eps", 1e-5)), float(cfg.get("bn_momentum", 0.1))
        self.out_bn = nn.BatchNorm1d(d, eps=eps, momentum=mom) if out.get("batch_norm", True) else None
        self.fc = nn.Linear(d, int(cfg.get("n_classes", 29)), bias=bool(out.get("bias", False)))
        self.drop = nn.Dropout(p)

    def forward(self, x, lengths):
        """x [N][T][F], lengths int64 [N] (on the CPU) -> logits [T][N][C], lengths."""
        n, t, _ = x.shape
        real = (torch.arange(t, device=x.device).view(1, t) < lengths.to(x.device).view(n, 1))
        real = real.to(x.dtype).unsqueeze(2)
        c = self.context
        xp = F.pad(x * real, (0, 0, c, c))
        x = torch.cat([xp[:, j:j + t, :] for j in range(2 * c + 1)], dim=2) * real
        x = x.permute(1, 0, 2)                                       # [T][N][(2C+1)F]
        seq_real = real.permute(1, 0, 2)
        for lin in self.fc_pre:
            x = self.drop(torch.clamp(lin(x), 0.0, 20.0) * seq_real)
        return head(self, self.rnn(x, lengths), seq_real), lengths

    def dstrain_names(self):
        """(params, state): dicts dstrain name -> tensor of this model."""
        p, s = {}, {}
        for k, lin in enumerate(self.fc_pre):
            p["fc_pre.%d.weight" % k], p["fc_pre.%d.bias" % k] = lin.weight, lin.bias
        dirs = [("fwd", "")] + ([("bwd", "_reverse")] if self.bidirectional else [])
        for dname, suffix in dirs:
            for w in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
                p["rnn.0.%s.%s" % (dname, w)] = getattr(self.rnn.rnn, "%s_l0%s" % (w, suffix))
        for k, lin in enumerate(self.fc_hidden):
            p["fc_hidden.%d.weight" % k], p["fc_hidden.%d.bias" % k] = lin.weight, lin.bias
        if self.out_bn is not None:
            p["fc.bn.weight"], p["fc.bn.bias"] = self.out_bn.weight, self.out_bn.bias
            s["fc.bn.running_mean"], s["fc.bn.running_var"] = \
                self.out_bn.running_mean, self.out_bn.running_var
        p["fc.weight"] = self.fc.weight
        if self.fc.bias is not None:
            p["fc.bias"] = self.fc.bias
        return p, s

    load_dstrain = DeepSpeech2.load_dstrain


def _keeps_shape(s):
    return s["stride_time"] == 1 and s["stride_freq"] == 1 and \
        2 * s["pad_time"] == s["dilation_time"] * (s["kernel_time"] - 1) and \
        2 * s["pad_freq"] == s["kernel_freq"] - 1


class ConvASR(nn.Module):
    """The convolution-only families as dstrain builds them (no "rnn" in the
    config): Jasper (residual blocks, a 1x1 conv + BatchNorm of the block's
    input added at its last layer), Jasper DR ("dense_residual": the last
    layer of each block adds a 1x1 conv + BatchNorm of the input of every
    block up to it) and Wav2Letter+ (no blocks).

    Every conv layer (the config's entries with "repeat" spelt out) is a
    Conv2d over (time, frequency) with dstrain's [out][in][time][freq]
    weights, dilation in time, a bias only where the config keeps one; its
    output is zeroed at the padded frames, then BatchNorm2d, the residual
    branches (1x1 Conv2d without bias + BatchNorm2d) at a block's end,
    padding zeroed again, ReLU or Hardtanh(0, 20), dropout (torch's own
    masks: the timing is dstrain's, the draws are not). The maps [N][C][T'][F']
    go to [T'][N][C*F'] for the optional hidden Linear + Hardtanh(0, 20)
    layers and the output Linear (BatchNorm1d before it and its bias as
    "output" says). Stock torch BatchNorm, as DeepSpeech2 here: in train mode
    its statistics include the zeros of padded frames (dstrain's count real
    frames only); in eval mode, and in train mode on equal lengths, the
    numbers are dstrain's. device: where the parameters are made ("meta":
    shapes only, for counting)."""

    def __init__(self, cfg, device=None):
        super().__init__()
        if cfg.get("rnn"):
            raise ValueError("ConvASR has no recurrent layers (DeepSpeech2 takes \"rnn\")")
        for k in ("context", "fc_pre"):
            if cfg.get(k):
                raise ValueError("ConvASR takes no %r (DS1's stages: DeepSpeech1)" % k)
        self.cfg = cfg
        self.specs = bl.conv_layers(cfg)
        if not self.specs:
            raise ValueError("ConvASR needs conv layers")
        eps = float(cfg.get("bn_eps", 1e-5))
        mom = float(cfg.get("bn_momentum", 0.1))
        self.res_src = [s["res"] for s in self.specs]
        for i, srcs in enumerate(self.res_src):
            for src in srcs:
                for k in range(src + 1, i + 1):
                    if not _keeps_shape(self.specs[k]):
                        raise ValueError("conv[%d] is inside a residual sum: it must keep its "
                                         "input's frames and bins (stride 1, same padding)" % k)
        self.keep = sorted({s for srcs in self.res_src for s in srcs})
        self.convs, self.bns, self.res = nn.ModuleList(), nn.ModuleList(), nn.ModuleList()
        self.drops = nn.ModuleList()
        c_prev, f, chans = 1, int(cfg["n_features"]), []
        for i, s in enumerate(self.specs):
            co = s["channels"]
            self.convs.append(nn.Conv2d(c_prev, co, (s["kernel_time"], s["kernel_freq"]),
                                        stride=(s["stride_time"], s["stride_freq"]),
                                        padding=(s["pad_time"], s["pad_freq"]),
                                        dilation=(s["dilation_time"], 1), bias=s["bias"],
                                        device=device))
            self.bns.append(nn.BatchNorm2d(co, eps=eps, momentum=mom, device=device))
            self.res.append(nn.ModuleList(
                nn.Sequential(nn.Conv2d(chans[src], co, 1, bias=False, device=device),
                              nn.BatchNorm2d(co, eps=eps, momentum=mom, device=device))
                for src in self.res_src[i]))
            self.drops.append(nn.Dropout(s["dropout"]) if s["dropout"] > 0 else nn.Identity())
            f = bl.conv_out_len(f, s["kernel_freq"], s["stride_freq"], s["pad_freq"])
            if f < 1:
                raise ValueError("conv[%d] leaves no frequency bins" % i)
            c_prev = co
            chans.append(co)
        d = c_prev * f
        self.fc_hidden = nn.ModuleList()
        for out in cfg.get("fc_hidden", []):
            self.fc_hidden.append(nn.Linear(d, int(out), device=device))
            d = int(out)
        self.drop = nn.Dropout(float(cfg.get("dropout", 0.0)))
        out = cfg.get("output", {})
        self.out_bn = nn.BatchNorm1d(d, eps=eps, momentum=mom, device=device) \
            if out.get("batch_norm", True) else None
        self.fc = nn.Linear(d, int(cfg.get("n_classes", 29)), bias=bool(out.get("bias", False)),
                            device=device)

    def forward(self, x, lengths):
        """x [N][T][F], lengths int64 [N] (on the CPU) -> logits [T'][N][C],
        output lengths (CPU int64)."""
        lens = lengths.to(x.device)
        x = x.unsqueeze(1)
        kept = {}
        for i, s in enumerate(self.specs):
            lens = bl.conv_frames(s, lens)
            a = self.convs[i](x)
            t = a.shape[2]
            pad = torch.arange(t, device=a.device).view(1, 1, t, 1) >= lens.view(-1, 1, 1, 1)
            y = self.bns[i](a.masked_fill(pad, 0))
            for branch, src in zip(self.res[i], self.res_src[i]):
                y = y + branch(kept[src])
            y = y.masked_fill(pad, 0)
            y = torch.relu(y) if s["hi"] == math.inf else torch.clamp(y, 0.0, s["hi"])
            x = self.drops[i](y)
            if i in self.keep:
                kept[i] = x
        n, c, t, f = x.shape
        x = x.permute(2, 0, 1, 3).reshape(t, n, c * f)
        out_cpu = lens.cpu() if lens.device.type != "cpu" else lens
        real = None
        if self.fc_hidden:
            real = (torch.arange(t, device=x.device).view(t, 1) < lens.view(1, n))
            real = real.to(x.dtype).unsqueeze(2)
        return head(self, x, real), out_cpu

    def dstrain_names(self):
        """(params, state): dicts dstrain name -> tensor of this model."""
        p, s = {}, {}

        def bn(prefix, m):
            p[prefix + ".bn.weight"], p[prefix + ".bn.bias"] = m.weight, m.bias
            s[prefix + ".bn.running_mean"], s[prefix + ".bn.running_var"] = \
                m.running_mean, m.running_var

        for i, conv in enumerate(self.convs):
            p["conv.%d.weight" % i] = conv.weight
            if conv.bias is not None:
                p["conv.%d.bias" % i] = conv.bias
            bn("conv.%d" % i, self.bns[i])
            for r, branch in enumerate(self.res[i]):
                p["conv.%d.res.%d.weight" % (i, r)] = branch[0].weight
                bn("conv.%d.res.%d" % (i, r), branch[1])
        for k, lin in enumerate(self.fc_hidden):
            p["fc_hidden.%d.weight" % k], p["fc_hidden.%d.bias" % k] = lin.weight, lin.bias
        if self.out_bn is not None:
            bn("fc", self.out_bn)
        p["fc.weight"] = self.fc.weight
        if self.fc.bias is not None:
            p["fc.bias"] = self.fc.bias
        return p, s

    load_dstrain = DeepSpeech2.load_dstrain


def build_model(cfg, device=None):
    """The model family of cfg: DS1's graph (context or FC layers before the
    RNN, no conv layers), the convolution-only families (conv layers and no
    "rnn": Jasper, Jasper DR, Wav2Letter+; ConvASR) or DeepSpeech2's.
    device: where ConvASR makes its parameters ("meta": shapes only); the
    others are made on the CPU and moved."""
    if not cfg.get("conv") and (cfg.get("context") or cfg.get("fc_pre")):
        m = DeepSpeech1(cfg)
    elif cfg.get("conv") and "rnn" not in cfg:
        return ConvASR(cfg, device=device)
    else:
        m = DeepSpeech2(cfg)
    return m if device is None else m.to(device)


def ctc_loss(logits, out_len, targets, target_len):
    """deepspeech.pytorch's loss: CTC summed over the batch (zero_infinity),
    divided by the batch size; log-softmax in FP32 at least."""
    x = logits if logits.dtype == torch.float64 else logits.float()
    logp = x.log_softmax(-1)
    loss = F.ctc_loss(logp, targets, out_len, target_len, blank=0, reduction="sum",
                      zero_infinity=True)
    return loss / logits.shape[1]


# ================================================================== data


def make_batch(cfg, batch, max_frames, dist, rng, gen, lengths=None):
    """One synthetic batch: lengths (given, or drawn) and transcript lengths
    by dstrain's rules (benchlib.synthetic_lengths, label_length), N(0,1)
    features zero past each length, random labels 1..28."""
    lo = 2 * bl.symbol_frames(cfg)
    if max_frames < lo:
        raise bl.BenchError("--max-frames %d: %s needs at least %d" % (max_frames, cfg["name"], lo))
    if lengths is None:
        lengths = bl.synthetic_lengths(rng, batch, max_frames, dist, lo)
    t = max(lengths)
    x = torch.randn(batch, t, int(cfg["n_features"]), generator=gen)
    for i, n in enumerate(lengths):
        x[i, n:] = 0
    lab_len = [bl.label_length(cfg, n, rng) for n in lengths]
    labels = [rng.randint(1, int(cfg.get("n_classes", 29)) - 1) for _ in range(sum(lab_len))]
    return {"x": x, "lengths": torch.tensor(lengths, dtype=torch.int64),
            "labels": torch.tensor(labels, dtype=torch.int64),
            "label_lengths": torch.tensor(lab_len, dtype=torch.int64),
            "frames": sum(lengths), "list": lengths}


# ================================================================== environment


def gpu_info():
    if not torch.cuda.is_available():
        return None
    p = torch.cuda.get_device_properties(torch.cuda.current_device())
    g = {"name": p.name, "sm": "%d.%d" % (p.major, p.minor), "memory_bytes": int(p.total_memory),
         "clock_mhz": None, "mem_clock_mhz": None, "driver": None}
    try:
        r = subprocess.run(["nvidia-smi", "--id=%d" % torch.cuda.current_device(),
                            "--query-gpu=clocks.max.sm,clocks.max.mem,driver_version",
                            "--format=csv,noheader,nounits"], stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL, timeout=20)
        v = [s.strip() for s in r.stdout.decode().strip().splitlines()[0].split(",")]
        g["clock_mhz"], g["mem_clock_mhz"], g["driver"] = int(v[0]), int(v[1]), v[2]
    except (OSError, subprocess.SubprocessError, IndexError, ValueError):
        pass
    return g


def versions():
    v = {"torch": torch.__version__, "python": sys.version.split()[0]}
    m = re.search(r"BLAS_INFO=([^,\s]+)", torch.__config__.show())
    if m:
        v["blas"] = m.group(1)
    v["mkldnn"] = bool(torch.backends.mkldnn.is_available())
    if torch.cuda.is_available():
        v["cuda"] = torch.version.cuda
        v["cudnn"] = torch.backends.cudnn.version()
        try:
            n = torch.cuda.nccl.version()
            v["nccl"] = ".".join(map(str, n)) if isinstance(n, tuple) else n
        except Exception:  # noqa: BLE001 - NCCL not built in
            pass
    return v


# dense peak FLOP/s by GPU name (NVIDIA datasheets, without sparsity), per
# precision: fp32 without TF32, tf32, fp16/bf16 tensor cores, fp64 (tensor).
GPU_PEAKS = [
    ("H200", {"fp32": 67e12, "tf32": 494.7e12, "fp16": 989.4e12, "bf16": 989.4e12, "fp64": 67e12}),
    ("H100 PCIe", {"fp32": 51e12, "tf32": 378e12, "fp16": 756e12, "bf16": 756e12, "fp64": 51e12}),
    ("H100 NVL", {"fp32": 60e12, "tf32": 417.5e12, "fp16": 835e12, "bf16": 835e12, "fp64": 60e12}),
    ("H100", {"fp32": 67e12, "tf32": 494.7e12, "fp16": 989.4e12, "bf16": 989.4e12, "fp64": 67e12}),
    ("A100", {"fp32": 19.5e12, "tf32": 156e12, "fp16": 312e12, "bf16": 312e12, "fp64": 19.5e12}),
    ("V100", {"fp32": 15.7e12, "fp16": 125e12, "fp64": 7.8e12}),
]


def gemm_peak(device, dtype, n=1024, reps=5):
    """Best FLOP/s of an n x n x n matrix product in dtype on device."""
    a = torch.randn(n, n, device=device).to(dtype)
    b = torch.randn(n, n, device=device).to(dtype)
    best = math.inf
    for _ in range(reps + 1):
        if device == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        torch.mm(a, b)
        if device == "cuda":
            torch.cuda.synchronize()
        best = min(best, time.perf_counter() - t0)
    return 2.0 * n ** 3 / best


_peaks = {}


def device_peak(device, precision, tf32):
    """(peak FLOP/s, source) for a result."""
    key = (device, precision, tf32)
    if key in _peaks:
        return _peaks[key]
    if device == "cuda":
        name = torch.cuda.get_device_name()
        for sub, table in GPU_PEAKS:
            if sub in name:
                k = "tf32" if (precision == "fp32" and tf32 and "tf32" in table) else precision
                if k in table:
                    _peaks[key] = (table[k], "GPU dense peak (%s, %s)" % (sub, k))
                    return _peaks[key]
    dt = TORCH_DTYPE[precision]
    names = {"fp32": "sgemm", "fp64": "dgemm", "fp16": "hgemm", "bf16": "bf16 gemm"}
    try:
        peak = gemm_peak(device, dt)
    except RuntimeError as e:
        _peaks[key] = (None, "no %s: %s" % (names[precision], str(e).splitlines()[0]))
        return _peaks[key]
    where = ("%d threads" % torch.get_num_threads()) if device == "cpu" else torch.cuda.get_device_name()
    _peaks[key] = (peak, "%s measured, %s" % (names[precision], where))
    return _peaks[key]


# ================================================================== bench


def is_oom(e):
    oom = getattr(torch.cuda, "OutOfMemoryError", None)
    return (oom is not None and isinstance(e, oom)) or "out of memory" in str(e).lower()


class Runner:
    """One (impl, precision, mode, batch) configuration."""

    def __init__(self, args, cfg, impl, precision, mode, batch):
        self.args, self.cfg = args, cfg
        self.impl, self.precision, self.mode, self.batch = impl, precision, mode, batch
        self.device = torch.device(args.device)

    def setup(self):
        a = self.args
        torch.manual_seed(a.seed)
        model = build_model(self.cfg)
        if self.impl == "torch-eager" and self.precision == "fp64":
            model = model.double()
        model = model.to(self.device)
        self.model = model
        self.params = sum(p.numel() for p in model.parameters())
        self.run_model = model
        if self.impl == "torch-compile":
            if not hasattr(torch, "compile"):
                raise RuntimeError("torch.compile is not in torch %s (needs 2.0 or later)"
                                   % torch.__version__)
            self.run_model = torch.compile(model)
        self.opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=0.9, nesterov=True,
                                   weight_decay=1e-5)
        amp = self.impl == "torch-amp"
        self.autocast = None
        if amp:
            self.autocast = dict(device_type=self.device.type, dtype=TORCH_DTYPE[self.precision])
        self.scaler = None
        if amp and self.precision == "fp16":
            if self.device.type != "cuda":
                raise RuntimeError("fp16 autocast with GradScaler needs --device cuda "
                                   "(on the CPU autocast runs bf16)")
            self.scaler = torch.cuda.amp.GradScaler()
        rng = random.Random(a.seed)
        gen = torch.Generator().manual_seed(a.seed)
        dt = torch.float64 if (self.precision == "fp64" and self.impl == "torch-eager") \
            else torch.float32
        self.batches = []
        # LibriSpeech lengths: batches formed as dstrain's sampler (and its
        # bench) forms them, from a sorted sample
        sorted_lengths = bl.sorted_bucket_lengths(rng, self.batch, a.pool, a.max_frames, a.length_dist,
                                                  2 * bl.symbol_frames(self.cfg)) \
            if a.length_dist == "librispeech" else [None] * a.pool
        for k in range(a.pool):
            b = make_batch(self.cfg, self.batch, a.max_frames, a.length_dist, rng, gen, sorted_lengths[k])
            b["x"] = b["x"].to(dt)
            if self.device.type == "cuda":
                b["x"] = b["x"].pin_memory()
            self.batches.append(b)

    def step(self, b):
        dev = self.device
        x = b["x"].to(dev, non_blocking=True)
        labels = b["labels"].to(dev, non_blocking=True)
        lab_len = b["label_lengths"]
        model, train = self.run_model, self.mode == "train"
        ctx = torch.autocast(**self.autocast) if self.autocast else _Null()
        if not train:
            with torch.no_grad(), ctx:
                logits, out_len = model(x, b["lengths"])
            with torch.no_grad():
                loss = ctc_loss(logits, out_len, labels, lab_len)
            return loss
        self.opt.zero_grad(set_to_none=True)
        with ctx:
            logits, out_len = model(x, b["lengths"])
        loss = ctc_loss(logits, out_len, labels, lab_len)
        if self.scaler is not None:
            self.scaler.scale(loss).backward()
            self.scaler.unscale_(self.opt)
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), 400.0)
            self.scaler.step(self.opt)
            self.scaler.update()
        else:
            loss.backward()
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), 400.0)
            self.opt.step()
        return loss

    def sync(self):
        if self.device.type == "cuda":
            torch.cuda.synchronize()

    def measure(self):
        a = self.args
        self.model.train(True)    # forward mode too: BatchNorm in training mode, as dstrain bench
        times, frames, flops = [], 0, 0
        for i in range(a.warmup + a.steps):
            b = self.batches[i % len(self.batches)]
            self.sync()
            t0 = time.perf_counter()
            self.step(b)
            self.sync()
            dt = (time.perf_counter() - t0) * 1000.0
            if i >= a.warmup:
                times.append(dt)
                frames += b["frames"]
                flops += bl.flops_per_step(self.cfg, b["list"], self.mode)
        return times, frames / a.steps, flops / a.steps


class _Null:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def base_result(args, cfg, impl, precision, mode, batch):
    return {"model": cfg["name"], "device": args.device, "precision": precision, "mode": mode,
            "impl": impl, "batch": batch, "ranks": 1, "global_batch": batch, "status": "ok",
            "warmup": args.warmup, "steps": args.steps}


def run_one(args, cfg, impl, precision, mode, batch):
    r = base_result(args, cfg, impl, precision, mode, batch)
    if args.device == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    run = Runner(args, cfg, impl, precision, mode, batch)
    try:
        run.setup()
        times, frames, flops = run.measure()
    except Exception as e:  # noqa: BLE001 - every failure becomes a result
        r["status"] = "oom" if is_oom(e) else "error"
        r["error"] = ("%s: %s" % (type(e).__name__, e)).strip().splitlines()[0][:500]
        del run
        if args.device == "cuda":
            torch.cuda.empty_cache()
        return r
    r.update(bl.step_stats(times, batch))
    r["audio_s_per_s"] = frames * 0.010 / (sum(times) / len(times) / 1000.0)
    r["frames_per_step"] = frames
    if args.device == "cuda":
        r["peak_mem_bytes"] = int(torch.cuda.max_memory_allocated())
        r["peak_mem_source"] = "torch.cuda.max_memory_allocated"
    else:
        r["peak_mem_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        r["peak_mem_source"] = "process peak RSS"
    r["flops_per_step"] = flops
    r["flop_per_s"] = flops / (r["step_ms"] / 1000.0)
    peak, src = device_peak(args.device, precision, args.tf32)
    r["peak_flop_per_s"] = peak
    r["peak_source"] = src
    r["peak_fraction"] = r["flop_per_s"] / peak if peak else None
    r["config"] = {"max_frames": args.max_frames, "length_dist": args.length_dist,
                   "seed": args.seed, "batches_cycled": args.pool, "params": run.params,
                   "batch_formation": "sorted" if args.length_dist == "librispeech" else "random",
                   "optimizer": "sgd nesterov momentum 0.9, weight decay 1e-5, clip 400",
                   "lr": args.lr, "threads": torch.get_num_threads(), "tf32": args.tf32,
                   "cudnn_benchmark": bool(torch.backends.cudnn.benchmark)
                   if args.device == "cuda" else None}
    del run
    return r


def find_max_batch(args, cfg, impl, precision, mode):
    """Largest power-of-two batch whose 2 steps fit (cuda)."""
    ok, b = None, 1
    probe = argparse.Namespace(**vars(args))
    probe.warmup, probe.steps, probe.pool = 0, 2, 1
    while b <= args.max_batch:
        r = run_one(probe, cfg, impl, precision, mode, b)
        if r["status"] != "ok":
            if r["status"] == "error":
                return None, r
            break
        ok, b = b, b * 2
    return ok, None


def plan(args):
    """[(impl, precision)] from --impl and --precision."""
    amp16 = "fp16" if args.device == "cuda" else "bf16"
    out = []
    for impl in args.impl:
        name = {"eager": "torch-eager", "amp": "torch-amp", "compile": "torch-compile"}[impl]
        if args.precision == ["auto"]:
            precs = {"eager": ["fp32"], "amp": [amp16], "compile": ["fp32"]}[impl]
        else:
            allowed = {"eager": ("fp32", "fp64"), "amp": ("fp16", "bf16"),
                       "compile": ("fp32",)}[impl]
            precs = [p for p in args.precision if p in allowed]
        out += [(name, p) for p in precs]
    return out


def csv_list(s, allowed, what):
    v = [x.strip() for x in s.split(",") if x.strip()]
    bad = [x for x in v if x not in allowed]
    if not v or bad:
        raise bl.BenchError("%s: %s not in %s" % (what, ",".join(bad) or "(empty)",
                                                  ",".join(allowed)))
    return v


def parse(argv):
    p = argparse.ArgumentParser(prog="pytorch_ds2.py", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="small", help="preset or JSON config (small)")
    p.add_argument("--synthetic", action="store_true", help="synthetic data (the only source)")
    p.add_argument("--data", help="not supported: synthetic data only")
    p.add_argument("--max-frames", type=int,
                   help="longest utterance, 10 ms frames (400; 1700 with --length-dist librispeech)")
    p.add_argument("--length-dist", default="read", choices=["read", "librispeech", "uniform"],
                   help="how synthetic lengths spread, as dstrain bench (read)")
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--batch", default="8", help="per-step batch sizes, comma list, or max (8)")
    p.add_argument("--max-batch", type=int, default=4096, help="upper bound for --batch max")
    p.add_argument("--precision", default="auto",
                   help="auto or a list of fp32,fp64,fp16,bf16 (auto)")
    p.add_argument("--impl", default="eager,amp,compile", help="eager,amp,compile")
    p.add_argument("--mode", default="train", help="train,forward (train)")
    p.add_argument("--warmup", type=int, default=10, help="steps left out (10)")
    p.add_argument("--steps", type=int, default=50, help="timed steps (50)")
    p.add_argument("--pool", type=int, default=4,
                   help="distinct synthetic batches cycled through (4)")
    p.add_argument("--threads", type=int, help="torch threads (torch's default)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--lr", type=float, default=3e-4)
    p.add_argument("--tf32", action="store_true",
                   help="cuda: let FP32 convs, RNNs and GEMMs use TF32 (off, as dstrain)")
    p.add_argument("--profile", help="not supported here (use torch.profiler)")
    p.add_argument("--out", help="results JSON")
    p.add_argument("--csv", help="results CSV, one row per result")
    a = p.parse_args(argv)
    if a.max_frames is None:
        a.max_frames = 1700 if a.length_dist == "librispeech" else 400
    if a.data:
        raise bl.BenchError("--data: pytorch_ds2 runs synthetic batches only")
    if a.profile:
        raise bl.BenchError("--profile: not implemented in pytorch_ds2 (use torch.profiler)")
    if a.warmup < 0 or a.steps < 1 or a.pool < 1:
        raise bl.BenchError("need --warmup >= 0, --steps >= 1, --pool >= 1")
    a.impl = csv_list(a.impl, ("eager", "amp", "compile"), "--impl")
    a.mode = csv_list(a.mode, ("train", "forward"), "--mode")
    a.precision = ["auto"] if a.precision == "auto" else \
        csv_list(a.precision, ("fp32", "fp64", "fp16", "bf16"), "--precision")
    if a.batch == "max":
        if a.device != "cuda":
            raise bl.BenchError("--batch max: needs --device cuda (it searches for the "
                                "largest batch before running out of memory)")
        a.batches = ["max"]
    else:
        try:
            a.batches = [int(x) for x in a.batch.split(",")]
        except ValueError:
            raise bl.BenchError("--batch: a comma list of sizes or max, not %r" % a.batch)
        if any(b < 1 for b in a.batches):
            raise bl.BenchError("--batch: sizes must be >= 1")
    if a.device == "cuda" and not torch.cuda.is_available():
        raise bl.BenchError("--device cuda: torch %s sees no GPU" % torch.__version__)
    return a


def main(argv):
    try:
        args = parse(argv)
        cfg = bl.load_config(args.model)
    except bl.BenchError as e:
        bl.die(PROG, e)
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.device == "cuda":
        torch.backends.cudnn.benchmark = True
        torch.backends.cudnn.allow_tf32 = args.tf32
        torch.backends.cuda.matmul.allow_tf32 = args.tf32
    dev_name = torch.cuda.get_device_name() if args.device == "cuda" else bl.cpu_name()
    doc = {"tool": "pytorch_ds2", "schema": bl.SCHEMA,
           "env": bl.base_env(torch.get_num_threads(), dev_name,
                              gpu_info() if args.device == "cuda" else None, versions()),
           "results": []}
    print("# pytorch_ds2: %s on %s (%s), %d threads, torch %s, warm-up %d, %d timed steps"
          % (cfg["name"], args.device, dev_name, torch.get_num_threads(), torch.__version__,
             args.warmup, args.steps))
    hdr = ["model", "impl", "prec", "mode", "batch", "status", "step_ms", "ci95_lo", "ci95_hi",
           "samples/s", "GFLOP/s", "peak%"]
    print("# " + " ".join("%-13s" % h if i < 2 else "%9s" % h for i, h in enumerate(hdr)))
    for mode in args.mode:
        for impl, prec in plan(args):
            for batch in args.batches:
                if batch == "max":
                    batch, err = find_max_batch(args, cfg, impl, prec, mode)
                    if batch is None:
                        r = err or base_result(args, cfg, impl, prec, mode, 1)
                        if not err:
                            r.update(status="oom", error="batch 1 does not fit")
                        doc["results"].append(r)
                        continue
                r = run_one(args, cfg, impl, prec, mode, batch)
                doc["results"].append(bl.finite(r))
                if r["status"] == "ok":
                    print("  %-13s %-13s %9s %9s %9d %9s %9.2f %9.2f %9.2f %9.2f %9.2f %9s" % (
                        r["model"], impl, prec, mode, batch, "ok", r["step_ms"],
                        r["step_ms_ci95"][0], r["step_ms_ci95"][1], r["samples_per_s"],
                        r["flop_per_s"] / 1e9,
                        "%.1f" % (100 * r["peak_fraction"]) if r["peak_fraction"] else "-"))
                else:
                    print("  %-13s %-13s %9s %9s %9d %9s  %s" % (
                        r["model"], impl, prec, mode, batch, r["status"], r.get("error", "")))
                sys.stdout.flush()
    if args.out:
        bl.write_json(args.out, doc)
        print("# wrote %s" % args.out)
    if args.csv:
        bl.write_csv(args.csv, doc["results"])
        print("# wrote %s" % args.csv)
    return 0 if all(r["status"] == "ok" for r in doc["results"]) else 3


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
