"""deepspeech.pytorch's DeepSpeech network, re-created for the export/import
tests from the facts of SeanNaren/deepspeech.pytorch, deepspeech_pytorch/model.py
(written anew here; that package needs pytorch_lightning and omegaconf).

The module tree, and so every state_dict key, is the published one:

    conv        MaskConv(seq_module = Sequential(Conv2d, BatchNorm2d, Hardtanh, ...))
    rnns        Sequential(BatchRNN(batch_norm = SequenceWise(BatchNorm1d) | None,
                                    rnn = LSTM | GRU | RNN), ...)
    lookahead   Sequential(Lookahead(conv = Conv1d groups=hidden), Hardtanh)
                (unidirectional models only)
    fc          Sequential(SequenceWise(Sequential(BatchNorm1d, Linear(bias=False))))

and so is the forward pass: input [N][1][freq][time]; after every module of
the conv stack, frames past each utterance's output length are zeroed (with
the lengths after the whole stack, as MaskConv does); the conv output
[N][C][F'][T'] is viewed as [N][C*F'][T'] (channel-major) and made [T'][N][H];
each BatchRNN packs the sequences (lengths sorted longest first: pack_padded_sequence's
enforce_sorted) and sums the two directions; the lookahead pads context-1
zero frames at the end; the head is BatchNorm1d then Linear; in eval mode
the output is softmax over classes, [N][T'][classes].

Where stock deepspeech.pytorch fixes a choice (two convolutions of 32
channels, 161 features), this re-creation takes it from a dstrain model
config, so that the small models of the tests can be built; for the stock
config it builds exactly the stock network.
"""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

RNN_TYPES = {"lstm": nn.LSTM, "gru": nn.GRU, "rnn_tanh": nn.RNN}


class SequenceWise(nn.Module):
    """Applies module to [T*N][H] and gives back [T][N][H']."""

    def __init__(self, module):
        super().__init__()
        self.module = module

    def forward(self, x):
        t, n = x.size(0), x.size(1)
        return self.module(x.view(t * n, -1)).view(t, n, -1)


class MaskConv(nn.Module):
    """seq_module's modules in turn, zeroing time steps past each length after each."""

    def __init__(self, seq_module):
        super().__init__()
        self.seq_module = seq_module

    def forward(self, x, lengths):
        for module in self.seq_module:
            x = module(x)
            t = x.size(3)
            keep = torch.arange(t).view(1, t) < lengths.view(-1, 1).long()   # [N][T]
            x = x.masked_fill(~keep.view(x.size(0), 1, 1, t), 0)
        return x, lengths


class InferenceBatchSoftmax(nn.Module):
    def forward(self, x):
        return x if self.training else F.softmax(x, dim=-1)


class BatchRNN(nn.Module):
    def __init__(self, input_size, hidden_size, rnn_type=nn.LSTM, bidirectional=False,
                 batch_norm=True, nonlinearity=None):
        super().__init__()
        self.bidirectional = bidirectional
        self.batch_norm = SequenceWise(nn.BatchNorm1d(input_size)) if batch_norm else None
        extra = {"nonlinearity": nonlinearity} if nonlinearity else {}
        self.rnn = rnn_type(input_size=input_size, hidden_size=hidden_size,
                            bidirectional=bidirectional, bias=True, **extra)

    def forward(self, x, output_lengths, h=None):
        if self.batch_norm is not None:
            x = self.batch_norm(x)
        x = nn.utils.rnn.pack_padded_sequence(x, output_lengths)
        x, h = self.rnn(x, h)
        x, _ = nn.utils.rnn.pad_packed_sequence(x)
        if self.bidirectional:   # [T][N][2H] -> [T][N][H], directions summed
            x = x.view(x.size(0), x.size(1), 2, -1).sum(2).view(x.size(0), x.size(1), -1)
        return x, h


class Lookahead(nn.Module):
    """Depthwise conv over the next `context` frames: [T][N][H] -> [T][N][H]."""

    def __init__(self, n_features, context):
        super().__init__()
        assert context > 0
        self.context = context
        self.pad = (0, context - 1)
        self.conv = nn.Conv1d(n_features, n_features, kernel_size=context, stride=1,
                              groups=n_features, padding=0, bias=False)

    def forward(self, x):
        x = x.transpose(0, 1).transpose(1, 2)          # [N][H][T]
        x = F.pad(x, pad=self.pad, value=0)
        x = self.conv(x)
        return x.transpose(1, 2).transpose(0, 1).contiguous()


def stock_config(bidirectional=True, rnn_type="lstm", hidden=1024, layers=5, context=20):
    """deepspeech.pytorch's model as a dstrain config (BiDirectionalConfig /
    UniDirectionalConfig defaults; the conv stack of model.py)."""
    return {
        "name": "deepspeech-stock", "n_features": 161, "n_classes": 29,
        "conv": [
            {"channels": 32, "kernel_time": 11, "kernel_freq": 41, "stride_time": 2,
             "stride_freq": 2, "pad_time": 5, "pad_freq": 20},
            {"channels": 32, "kernel_time": 11, "kernel_freq": 21, "stride_time": 1,
             "stride_freq": 2, "pad_time": 5, "pad_freq": 10},
        ],
        "rnn": {"type": rnn_type, "hidden": hidden, "layers": layers,
                "bidirectional": bidirectional, "lookahead": 0 if bidirectional else context},
        "fc_hidden": [], "bn_eps": 1e-5, "bn_momentum": 0.1,
    }


class DeepSpeech(nn.Module):
    """deepspeech.pytorch's DeepSpeech (the nn.Module part) for a dstrain config."""

    def __init__(self, cfg):
        super().__init__()
        if cfg.get("fc_hidden"):
            raise ValueError("deepspeech.pytorch has no hidden FC layers")
        r = cfg["rnn"]
        self.bidirectional = bool(r["bidirectional"])
        hidden = int(r["hidden"])
        mods, ch, freq = [], 1, int(cfg["n_features"])
        for c in cfg["conv"]:
            # PyTorch's Conv2d here sees [N][C][freq][time]: (freq, time) pairs
            mods += [nn.Conv2d(ch, c["channels"], kernel_size=(c["kernel_freq"], c["kernel_time"]),
                               stride=(c["stride_freq"], c["stride_time"]),
                               padding=(c["pad_freq"], c["pad_time"])),
                     nn.BatchNorm2d(c["channels"]),
                     nn.Hardtanh(0, 20, inplace=True)]
            freq = math.floor((freq + 2 * c["pad_freq"] - c["kernel_freq"]) / c["stride_freq"] + 1)
            ch = c["channels"]
        self.conv = MaskConv(nn.Sequential(*mods))
        kind = r["type"]
        rnn_type = nn.RNN if kind == "rnn_relu" else RNN_TYPES[kind]
        nl = "relu" if kind == "rnn_relu" else None
        self.rnns = nn.Sequential(
            BatchRNN(ch * freq, hidden, rnn_type, self.bidirectional, batch_norm=False,
                     nonlinearity=nl),
            *(BatchRNN(hidden, hidden, rnn_type, self.bidirectional, nonlinearity=nl)
              for _ in range(int(r["layers"]) - 1)))
        context = int(r.get("lookahead", 0))
        self.lookahead = (nn.Sequential(Lookahead(hidden, context), nn.Hardtanh(0, 20, inplace=True))
                          if not self.bidirectional and context > 0 else None)
        self.fc = nn.Sequential(SequenceWise(nn.Sequential(
            nn.BatchNorm1d(hidden), nn.Linear(hidden, int(cfg["n_classes"]), bias=False))))
        self.inference_softmax = InferenceBatchSoftmax()

    def get_seq_lens(self, input_length):
        seq_len = input_length
        for m in self.conv.modules():
            if type(m) == nn.modules.conv.Conv2d:
                seq_len = ((seq_len + 2 * m.padding[1] - m.dilation[1] * (m.kernel_size[1] - 1) - 1)
                           // m.stride[1] + 1)
        return seq_len.int()

    def forward(self, x, lengths, hs=None):
        """x [N][1][freq][time], lengths [N] (longest first) -> ([N][T'][classes], lengths)."""
        lengths = lengths.cpu().int()
        output_lengths = self.get_seq_lens(lengths)
        x, _ = self.conv(x, output_lengths)
        sizes = x.size()
        x = x.view(sizes[0], sizes[1] * sizes[2], sizes[3])   # channel-major features
        x = x.transpose(1, 2).transpose(0, 1).contiguous()    # [T][N][H]
        for rnn in self.rnns:
            x, _ = rnn(x, output_lengths)
        if self.lookahead is not None:
            x = self.lookahead(x)
        x = self.fc(x)
        x = x.transpose(0, 1)
        return self.inference_softmax(x), output_lengths
