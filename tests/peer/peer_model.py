"""PyTorch peer of the dstrain model: DeepSpeech2's graph, DS1's stages and
the convolution-only families (Jasper, Jasper DR, Wav2Letter+).

Builds the same architecture as the C trainer from the model config JSON,
with parameters under the C side's names, so that weights exported by
peer_dump can be loaded and autograd gives the reference gradients.
Dropout draws its masks with its own Philox4x32-10 (numpy), keyed as the
C side keys them (src/dropout_mask.h), so both drop the same elements.

The one deliberate departure from stock torch layers is the masked batch
norm: padding positions neither enter the statistics nor get an output
(they come out as zero). It is written with plain tensor ops so autograd
differentiates it.
"""

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

N_CLASSES = 29

# number of gate blocks per RNN type (rows of weight_ih = G * hidden)
GATES = {"lstm": 4, "gru": 3, "rnn_tanh": 1, "rnn_relu": 1}


# Dropout's layer numbers (src/model_impl.h, model.c): fc_pre k is k,
# fc_hidden k is DS_MAX_FC + k, conv layer i is 2 DS_MAX_FC + i.
DS_MAX_FC = 8
U32 = np.uint64(0xFFFFFFFF)


def philox4x32_10(ctr, key):
    """Philox4x32-10 of counters ctr (4 uint64 arrays, values < 2^32) under
    key (k0, k1): the 4 output words, as uint64 arrays."""
    c0, c1, c2, c3 = [np.asarray(c, dtype=np.uint64) & U32 for c in ctr]
    k0, k1 = np.uint64(key[0]) & U32, np.uint64(key[1]) & U32
    for _ in range(10):
        p0 = np.uint64(0xD2511F53) * c0
        p1 = np.uint64(0xCD9E8D57) * c2
        c0, c1, c2, c3 = (p1 >> np.uint64(32)) ^ c1 ^ k0, p1 & U32, (p0 >> np.uint64(32)) ^ c3 ^ k1, p0 & U32
        k0 = (k0 + np.uint64(0x9E3779B9)) & U32
        k1 = (k1 + np.uint64(0xBB67AE85)) & U32
    return c0, c1, c2, c3


DROPOUT_RUN_FRAMES = 1 << 20


def dropout_keep(n, p, seed, step, layer, part, run=0, stride=0):
    """Whether each of n elements is kept. Element e is numbered e, or, in
    runs of `run` elements numbered `stride` apart, (e // run) * stride +
    e % run (a conv layer's (n, c) rows, so that padding moves no draw);
    number u's draw is word u % 4 of Philox block u // 4 (counter: the
    block's low 32 bits, the layer with the block's next 16 bits above bit
    16, step, part; key: the seed), its top 24 bits, kept when at least
    floor(p * 2^24)."""
    e = np.arange(n, dtype=np.uint64)
    u = (e // np.uint64(run)) * np.uint64(stride) + e % np.uint64(run) if run else e
    b = u // np.uint64(4)
    z = np.zeros(n, dtype=np.uint64)
    ctr1 = np.uint64(layer) | ((b >> np.uint64(32)) << np.uint64(16))
    words = philox4x32_10((b & U32, ctr1, z + np.uint64(step), z + np.uint64(part)),
                          (seed & 0xFFFFFFFF, seed >> 32))
    lane = (u % np.uint64(4)).astype(np.int64)
    draws = np.stack(words, axis=1)[np.arange(n), lane] >> np.uint64(8)
    return draws >= np.uint64(int(p * 16777216.0))


def conv_out_len(n, kernel, stride, pad, dilation=1):
    """Output size of a convolution along one axis (floor division)."""
    return (n + 2 * pad - dilation * (kernel - 1) - 1) // stride + 1


def conv_layers(cfg):
    """The config's conv layers, an entry with "repeat": R as R layers, every
    field with its default (as src/config.c reads them)."""
    out = []
    for c in cfg.get("conv", []):
        spec = {"channels": int(c["channels"]), "kernel_time": int(c["kernel_time"]),
                "kernel_freq": int(c["kernel_freq"]),
                "stride_time": int(c.get("stride_time", 1)),
                "stride_freq": int(c.get("stride_freq", 1)),
                "pad_time": int(c.get("pad_time", 0)), "pad_freq": int(c.get("pad_freq", 0)),
                "dilation_time": int(c.get("dilation_time", 1)), "bias": bool(c.get("bias", True)),
                "hi": float("inf") if c.get("activation", "clipped_relu") == "relu" else 20.0,
                "dropout": float(c.get("dropout", 0.0)), "block": int(c.get("block", 0))}
        out += [dict(spec) for _ in range(int(c.get("repeat", 1)))]
    return out


def residual_sources(specs, dense):
    """For each layer i, the layers whose outputs its residual branches read
    (empty but at a block's last layer): the input of its own block, or with
    dense residuals the input of every block up to its own."""
    starts = [i for i in range(1, len(specs))
              if specs[i]["block"] and specs[i]["block"] != specs[i - 1]["block"]]
    out = []
    for i, s in enumerate(specs):
        end = s["block"] and (i + 1 == len(specs) or specs[i + 1]["block"] != s["block"])
        src = [b - 1 for b in starts if b <= i and (dense or specs[b]["block"] == s["block"])]
        out.append(src if end else [])
    return out


def hardtanh20(x):
    return torch.clamp(x, 0.0, 20.0)


class MaskedBatchNorm(nn.Module):
    """Batch norm over the real (unpadded) positions only.

    x is [N][C][T][F] (channel_dim=1, conv) or [T][N][D] (channel_dim=-1,
    sequence); mask broadcasts against x and is 1 at real positions, 0 at
    padding.

    train: mean / biased variance over real positions; running stats move
    with momentum m, the variance entering them unbiased (count/(count-1)).
    eval: running stats. Output is 0 at padding in both modes.
    """

    def __init__(self, channels, eps, momentum):
        super().__init__()
        self.channels = channels
        self.eps = eps
        self.momentum = momentum
        self.weight = nn.Parameter(torch.ones(channels))
        self.bias = nn.Parameter(torch.zeros(channels))
        self.register_buffer("running_mean", torch.zeros(channels))
        self.register_buffer("running_var", torch.ones(channels))

    def forward(self, x, mask, channel_dim):
        cd = channel_dim % x.dim()
        dims = tuple(d for d in range(x.dim()) if d != cd)
        pshape = [1] * x.dim()
        pshape[cd] = self.channels
        gamma = self.weight.view(pshape)
        beta = self.bias.view(pshape)
        m = mask.to(x.dtype).expand_as(x)
        if self.training:
            count = m.sum(dim=dims, keepdim=True)
            mean = (x * m).sum(dim=dims, keepdim=True) / count
            centred = (x - mean) * m
            var = (centred * centred).sum(dim=dims, keepdim=True) / count
            with torch.no_grad():
                mo = self.momentum
                c = count.view(-1)
                self.running_mean.mul_(1.0 - mo).add_(mo * mean.view(-1))
                self.running_var.mul_(1.0 - mo).add_(mo * var.view(-1) * c / (c - 1.0))
        else:
            mean = self.running_mean.view(pshape)
            var = self.running_var.view(pshape)
        y = (x - mean) / torch.sqrt(var + self.eps) * gamma + beta
        return y * m


def _make_rnn(kind, n_in, hidden, bidirectional):
    if kind == "lstm":
        return nn.LSTM(n_in, hidden, num_layers=1, bias=True, bidirectional=bidirectional)
    if kind == "gru":
        return nn.GRU(n_in, hidden, num_layers=1, bias=True, bidirectional=bidirectional)
    if kind in ("rnn_tanh", "rnn_relu"):
        return nn.RNN(n_in, hidden, num_layers=1, bias=True, bidirectional=bidirectional,
                      nonlinearity=kind[4:])
    raise ValueError("unknown rnn type %r" % kind)


class PeerModel(nn.Module):
    """The dstrain DeepSpeech2 model, built from its config dict."""

    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        eps = float(cfg.get("bn_eps", 1e-5))
        mom = float(cfg.get("bn_momentum", 0.1))
        n_classes = int(cfg.get("n_classes", N_CLASSES))

        # --- convolutions ---
        self.conv_specs = conv_layers(cfg)
        self.res_src = residual_sources(self.conv_specs, bool(cfg.get("dense_residual", False)))
        self.conv_w = nn.ParameterList()
        self.conv_b = nn.ParameterDict()
        self.conv_bn = nn.ModuleList()
        self.res_w = nn.ParameterDict()     # "i_r" -> 1x1 weight of layer i's branch r
        self.res_bn = nn.ModuleDict()
        c_prev, f_prev = 1, int(cfg["n_features"])
        chans = []
        for i, spec in enumerate(self.conv_specs):
            ch = spec["channels"]
            self.conv_w.append(nn.Parameter(
                torch.zeros(ch, c_prev, spec["kernel_time"], spec["kernel_freq"])))
            if spec["bias"]:
                self.conv_b[str(i)] = nn.Parameter(torch.zeros(ch))
            self.conv_bn.append(MaskedBatchNorm(ch, eps, mom))
            for r, src in enumerate(self.res_src[i]):
                self.res_w["%d_%d" % (i, r)] = nn.Parameter(torch.zeros(ch, chans[src], 1, 1))
                self.res_bn["%d_%d" % (i, r)] = MaskedBatchNorm(ch, eps, mom)
            f_prev = conv_out_len(f_prev, spec["kernel_freq"], spec["stride_freq"],
                                  spec["pad_freq"])
            if f_prev < 1:
                raise ValueError("convolutions leave no frequency bins")
            c_prev = ch
            chans.append(ch)
        self.context = int(cfg.get("context", 0))
        nf = int(cfg["n_features"])
        self.rnn_in = c_prev * f_prev if self.conv_specs else (2 * self.context + 1) * nf
        self.dropout = float(cfg.get("dropout", 0.0))
        self.drop_key = (0, 0, 0)   # seed, step, part: peer_dump leaves the model's unset

        # --- FC layers before the RNN (DS1) ---
        self.fc_pre = nn.ModuleList()
        for out in cfg.get("fc_pre", []):
            self.fc_pre.append(nn.Linear(self.rnn_in, int(out), bias=True))
            self.rnn_in = int(out)

        # --- recurrent stack (none without "rnn") ---
        r = cfg.get("rnn", {"type": "lstm", "hidden": 0, "layers": 0, "bidirectional": False})
        self.rnn_type = r["type"]
        self.hidden = int(r["hidden"])
        self.n_layers = int(r["layers"])
        self.bidirectional = bool(r["bidirectional"])
        self.lookahead_k = int(r.get("lookahead", 0))
        self.rnn_bn = nn.ModuleList()   # index j-1 for layer j >= 1
        self.rnns = nn.ModuleList()
        for j in range(self.n_layers):
            n_in = self.rnn_in if j == 0 else self.hidden
            if j >= 1:
                self.rnn_bn.append(MaskedBatchNorm(n_in, eps, mom))
            self.rnns.append(_make_rnn(self.rnn_type, n_in, self.hidden, self.bidirectional))
        self.use_lookahead = (not self.bidirectional) and self.lookahead_k > 0
        if self.use_lookahead:
            self.lookahead_w = nn.Parameter(torch.zeros(self.hidden, self.lookahead_k))

        # --- fully connected head ---
        self.fc_hidden = nn.ModuleList()
        d = self.hidden if self.n_layers else self.rnn_in
        for out in cfg.get("fc_hidden", []):
            self.fc_hidden.append(nn.Linear(d, int(out), bias=True))
            d = int(out)
        out = cfg.get("output", {})
        self.out_bn = bool(out.get("batch_norm", True))
        self.fc_bn = MaskedBatchNorm(d, eps, mom) if self.out_bn else None
        self.fc = nn.Linear(d, n_classes, bias=bool(out.get("bias", False)))

    # ---- naming: the C side's parameter / state names ----

    def peer_params(self):
        """Ordered dict: C parameter name -> nn.Parameter."""
        p = {}
        for i in range(len(self.conv_specs)):
            p["conv.%d.weight" % i] = self.conv_w[i]
            if str(i) in self.conv_b:
                p["conv.%d.bias" % i] = self.conv_b[str(i)]
            p["conv.%d.bn.weight" % i] = self.conv_bn[i].weight
            p["conv.%d.bn.bias" % i] = self.conv_bn[i].bias
            for r in range(len(self.res_src[i])):
                k = "%d_%d" % (i, r)
                p["conv.%d.res.%d.weight" % (i, r)] = self.res_w[k]
                p["conv.%d.res.%d.bn.weight" % (i, r)] = self.res_bn[k].weight
                p["conv.%d.res.%d.bn.bias" % (i, r)] = self.res_bn[k].bias
        for k, lin in enumerate(self.fc_pre):
            p["fc_pre.%d.weight" % k] = lin.weight
            p["fc_pre.%d.bias" % k] = lin.bias
        for j in range(self.n_layers):
            if j >= 1:
                p["rnn.%d.bn.weight" % j] = self.rnn_bn[j - 1].weight
                p["rnn.%d.bn.bias" % j] = self.rnn_bn[j - 1].bias
            m = self.rnns[j]
            dirs = [("fwd", "")] + ([("bwd", "_reverse")] if self.bidirectional else [])
            for dname, suffix in dirs:
                for w in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
                    p["rnn.%d.%s.%s" % (j, dname, w)] = getattr(m, "%s_l0%s" % (w, suffix))
        if self.use_lookahead:
            p["lookahead.weight"] = self.lookahead_w
        for k, lin in enumerate(self.fc_hidden):
            p["fc_hidden.%d.weight" % k] = lin.weight
            p["fc_hidden.%d.bias" % k] = lin.bias
        if self.out_bn:
            p["fc.bn.weight"] = self.fc_bn.weight
            p["fc.bn.bias"] = self.fc_bn.bias
        p["fc.weight"] = self.fc.weight
        if self.fc.bias is not None:
            p["fc.bias"] = self.fc.bias
        return p

    def _bns(self):
        out = {}
        for i, bn in enumerate(self.conv_bn):
            out["conv.%d.bn" % i] = bn
            for r in range(len(self.res_src[i])):
                out["conv.%d.res.%d.bn" % (i, r)] = self.res_bn["%d_%d" % (i, r)]
        for j in range(1, self.n_layers):
            out["rnn.%d.bn" % j] = self.rnn_bn[j - 1]
        if self.out_bn:
            out["fc.bn"] = self.fc_bn
        return out

    def peer_state(self):
        """Ordered dict: C state name -> running-stat buffer."""
        s = {}
        for prefix, bn in self._bns().items():
            s[prefix + ".running_mean"] = bn.running_mean
            s[prefix + ".running_var"] = bn.running_var
        return s

    def load_peer(self, params, state):
        """Copies numpy / tensor values in by C name. Every name must match
        exactly both ways; raises KeyError / ValueError otherwise."""
        with torch.no_grad():
            for table, values in ((self.peer_params(), params), (self.peer_state(), state)):
                missing = sorted(set(table) - set(values))
                extra = sorted(set(values) - set(table))
                if missing or extra:
                    raise KeyError("name mismatch: missing in dump %s, unknown in dump %s"
                                   % (missing, extra))
                for name, dst in table.items():
                    src = torch.as_tensor(values[name])
                    if tuple(src.shape) != tuple(dst.shape):
                        raise ValueError("%s: dump shape %s, model shape %s"
                                         % (name, tuple(src.shape), tuple(dst.shape)))
                    dst.copy_(src.to(dst.dtype))

    # ---- forward ----

    def output_lengths(self, lengths):
        L = [int(v) for v in lengths]
        for s in self.conv_specs:
            L = [conv_out_len(v, s["kernel_time"], s["stride_time"], s["pad_time"],
                              s["dilation_time"]) for v in L]
        return L

    def drop(self, x, p, layer, conv=False):
        """Dropout of x in training with dstrain's mask: element e of x in
        its memory order is drawn as the C side draws element e (conv: x
        [N][C][T][F] numbered by (n, c) runs, as if T were 2^20)."""
        if not self.training or p <= 0:
            return x
        seed, step, part = self.drop_key
        run = x.shape[2] * x.shape[3] if conv else 0
        stride = DROPOUT_RUN_FRAMES * x.shape[3] if conv else 0
        keep = dropout_keep(x.numel(), p, seed, step, layer, part, run, stride)
        keep = torch.as_tensor(keep.reshape(tuple(x.shape))).to(x.dtype)
        return x * keep * (1.0 / (1.0 - p))

    def fc_layer(self, lin, x, seq_mask, layer):
        """Linear, Hardtanh(0, 20), padding zeroed, dropout in training."""
        return self.drop(hardtanh20(lin(x)) * seq_mask, self.dropout, layer)

    def front(self, features, lengths):
        """Without conv layers: the frames [T][N][F], or DS1's context windows
        [T][N][(2C+1)F] over the real frames (zero outside them)."""
        n, t, nf = features.shape
        real = (torch.arange(t).view(1, t) < torch.tensor(lengths).view(n, 1)).to(features.dtype)
        if not self.context:
            return features.permute(1, 0, 2)
        c = self.context
        xp = F.pad(features * real.unsqueeze(2), (0, 0, c, c))            # [N][T+2C][F]
        win = torch.cat([xp[:, j:j + t, :] for j in range(2 * c + 1)], dim=2)
        return (win * real.unsqueeze(2)).permute(1, 0, 2)                  # [T][N][(2C+1)F]

    def forward(self, features, lengths):
        """features [N][T][F], lengths list of ints -> (logits [T'][N][C], out lengths)."""
        n, t, _ = features.shape
        x = features.unsqueeze(1)                       # [N][1][T][F]
        lens = [int(v) for v in lengths]
        outs = []                                       # every conv layer's output
        for i, s in enumerate(self.conv_specs):
            lens = [conv_out_len(v, s["kernel_time"], s["stride_time"], s["pad_time"],
                                 s["dilation_time"]) for v in lens]
            x = F.conv2d(x, self.conv_w[i], self.conv_b[str(i)] if s["bias"] else None,
                         stride=(s["stride_time"], s["stride_freq"]),
                         padding=(s["pad_time"], s["pad_freq"]),
                         dilation=(s["dilation_time"], 1))
            tt = x.shape[2]
            mask = (torch.arange(tt).view(1, tt) < torch.tensor(lens).view(n, 1))
            mask = mask.view(n, 1, tt, 1).to(x.dtype)
            x = x * mask
            x = self.conv_bn[i](x, mask, channel_dim=1)
            for r, src in enumerate(self.res_src[i]):
                k = "%d_%d" % (i, r)
                x = x + self.res_bn[k](F.conv2d(outs[src], self.res_w[k]), mask, channel_dim=1)
            x = torch.clamp(x, 0.0, s["hi"])
            x = self.drop(x, s["dropout"], 2 * DS_MAX_FC + i, conv=True)
            outs.append(x)

        if self.conv_specs:
            n_, c, tt, f = x.shape
            x = x.permute(2, 0, 1, 3).reshape(tt, n, c * f)   # [T'][N][C*F']
        else:
            x = self.front(features, lens)
            tt = t
        L = lens
        if min(L) < 1:
            raise ValueError("an utterance has no frames after the convolutions: %s" % L)
        seq_mask = (torch.arange(tt).view(tt, 1) < torch.tensor(L).view(1, n))
        seq_mask = seq_mask.view(tt, n, 1).to(x.dtype)
        L_t = torch.tensor(L, dtype=torch.int64)
        for k, lin in enumerate(self.fc_pre):
            x = self.fc_layer(lin, x, seq_mask, k)

        for j in range(self.n_layers):
            if j >= 1:
                x = self.rnn_bn[j - 1](x, seq_mask, channel_dim=-1)
            packed = pack_padded_sequence(x, L_t, enforce_sorted=False)
            out, _ = self.rnns[j](packed)
            x, _ = pad_packed_sequence(out, total_length=tt)
            if self.bidirectional:
                x = x.view(tt, n, 2, self.hidden).sum(2)

        if self.use_lookahead:
            k = self.lookahead_k
            y = x.permute(1, 2, 0)                      # [N][H][T']
            y = F.pad(y, (0, k - 1))
            y = F.conv1d(y, self.lookahead_w.unsqueeze(1), groups=self.hidden)
            x = hardtanh20(y.permute(2, 0, 1))          # [T'][N][H]

        for k, lin in enumerate(self.fc_hidden):
            x = self.fc_layer(lin, x, seq_mask, DS_MAX_FC + k)

        if self.out_bn:
            x = self.fc_bn(x, seq_mask, channel_dim=-1)
        logits = self.fc(x)
        return logits, L


def ctc_losses(logits, labels, out_lengths, label_lengths):
    """(batch loss = sum of finite per-utterance losses / N, per-utterance losses).

    The batch loss uses zero_infinity=True (impossible utterances count 0 and
    give no gradient); the per-utterance losses keep +inf."""
    n = logits.shape[1]
    logp = F.log_softmax(logits, dim=-1)
    tgt = torch.as_tensor(labels, dtype=torch.int64)
    il = torch.as_tensor(out_lengths, dtype=torch.int64)
    tl = torch.as_tensor(label_lengths, dtype=torch.int64)
    loss = F.ctc_loss(logp, tgt, il, tl, blank=0, reduction="sum", zero_infinity=True) / n
    with torch.no_grad():
        per = F.ctc_loss(logp, tgt, il, tl, blank=0, reduction="none", zero_infinity=False)
    return loss, per


def reference(cfg, dtype, train, params, state, features, lengths, labels, label_lengths,
              drop_key=(0, 0, 0)):
    """Runs the torch peer on one batch; returns a dict of numpy arrays:
    loss [1], losses [N], logits [T'][N][C], out_lengths [N],
    grads/<name>, state_after/<name>."""
    torch.manual_seed(0)
    model = PeerModel(cfg).to(dtype)
    model.drop_key = tuple(drop_key)   # seed, step, part: as the C side's dump says
    model.load_peer(params, state)
    model.train(train)
    feats = torch.as_tensor(features).to(dtype)
    for p in model.parameters():
        p.grad = None
    logits, L = model(feats, lengths)
    loss, per = ctc_losses(logits, labels, L, label_lengths)
    loss.backward()
    out = {
        "loss": loss.detach().reshape(1).numpy(),
        "losses": per.numpy(),
        "logits": logits.detach().numpy(),
        "out_lengths": torch.tensor(L, dtype=torch.int32).numpy(),
    }
    for name, p in model.peer_params().items():
        g = p.grad if p.grad is not None else torch.zeros_like(p)
        out["grads/" + name] = g.detach().numpy().copy()
    for name, b in model.peer_state().items():
        out["state_after/" + name] = b.detach().numpy().copy()
    return out
