"""Shared pieces of the bench scripts (bench/pytorch_ds2.py, compare, plot,
scaling-report, scaling-model): the bench JSON schema, statistics, the FLOP
formula, synthetic lengths, model configs and the environment block.

Standard library only (numpy/torch are imported by the scripts that need
them), so that compare, plot and the scaling scripts run with any python3.

The bench JSON (schema 1), written by `dstrain bench --out` and by
bench/pytorch_ds2.py:

  {"tool": "dstrain bench" | "pytorch_ds2", "schema": 1,
   "env": {host, cpu, threads, device_name, gpu, versions, git, command, date},
   "results": [ {model, device, precision, mode, impl, batch, ranks,
                 global_batch, status, error, warmup, steps, samples_per_s, ...,
                 layers: [...], config: {...}} ] }
"""

import csv
import datetime
import json
import math
import os
import platform
import socket
import subprocess
import sys

SCHEMA = 1
HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)

# Scalar result fields in CSV column order (dstrain bench --csv writes the
# same columns; unknown extra scalar keys are appended after these).
CSV_FIELDS = [
    "model", "device", "precision", "mode", "impl", "batch", "ranks", "global_batch",
    "status", "error", "warmup", "steps",
    "samples_per_s", "samples_per_s_mean", "samples_per_s_ci95_lo", "samples_per_s_ci95_hi",
    "samples_per_s_per_rank", "step_ms", "step_ms_mean", "step_ms_ci95_lo", "step_ms_ci95_hi",
    "audio_s_per_s", "frames_per_step", "peak_mem_bytes", "flops_per_step", "flop_per_s",
    "peak_flop_per_s", "peak_source", "peak_fraction",
]

# The fields that say which configuration a result measured (compare matches
# results of two files on these).
KEY_FIELDS = ("model", "device", "precision", "mode", "batch")


class BenchError(Exception):
    """A user-facing error: the scripts print it and exit 1."""


def die(prog, msg, code=1):
    sys.stderr.write("%s: %s\n" % (prog, msg))
    sys.exit(code)


# ------------------------------------------------------------------ statistics

# two-sided 95% Student t quantiles, df = 1..30
_T95 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
        2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
        2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042]


def t95(df):
    """Two-sided 95% quantile of Student's t with df degrees of freedom."""
    if df < 1:
        return math.inf
    if df <= 30:
        return _T95[df - 1]
    z = 1.959964
    # Cornish-Fisher expansion: within 1e-4 of the exact value for df > 30
    return z + (z ** 3 + z) / (4 * df) + (5 * z ** 5 + 16 * z ** 3 + 3 * z) / (96 * df * df)


def median(xs):
    s = sorted(xs)
    n = len(s)
    if n == 0:
        return math.nan
    return s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])


def mean_ci(xs):
    """(median, mean, lo, hi): the 95% confidence interval of the mean
    (Student t, mean +- t * sd / sqrt(n); [mean, mean] for one value)."""
    n = len(xs)
    mean = sum(xs) / n
    half = 0.0
    if n > 1:
        sd = math.sqrt(sum((x - mean) ** 2 for x in xs) / (n - 1))
        half = t95(n - 1) * sd / math.sqrt(n)
    return median(xs), mean, mean - half, mean + half


def step_stats(step_ms, global_batch, ranks=1):
    """The throughput fields of a result from its timed steps (milliseconds),
    as dstrain bench computes them: step_ms* are the median, mean and 95% CI
    of the mean of the step times; samples_per_s* the same statistics of the
    per-step rates global_batch / step (so samples_per_s is the median rate,
    samples_per_s_mean the mean rate)."""
    n = len(step_ms)
    if n == 0:
        raise BenchError("no timed steps")
    med, mean, lo, hi = mean_ci(step_ms)
    rates = [global_batch * 1000.0 / ms if ms > 0 else math.inf for ms in step_ms]
    rmed, rmean, rlo, rhi = mean_ci(rates)
    return {
        "samples_per_s": rmed,
        "samples_per_s_mean": rmean,
        "samples_per_s_ci95": [rlo, rhi],
        "samples_per_s_per_rank": rmed / ranks,
        "step_ms": med,
        "step_ms_mean": mean,
        "step_ms_ci95": [lo, hi],
        "step_ms_all": list(step_ms),
    }


# ------------------------------------------------------------------ configs


def conv_out_len(n, kernel, stride, pad, dilation=1):
    return (n + 2 * pad - dilation * (kernel - 1) - 1) // stride + 1


def conv_layers(cfg):
    """The config's conv layers as dstrain reads them (src/config.c): an
    entry with "repeat": R is R layers; defaults filled in (stride 1,
    padding 0, dilation 1, a bias, clipped ReLU, no dropout, no block); "hi"
    the activation's upper clamp (20, or infinity for ReLU); "res": the
    layers whose outputs the layer's residual branches read (at a block's
    last layer: the input of its own block, or with dense_residual of every
    block up to it)."""
    out = []
    for i, c in enumerate(cfg.get("conv") or []):
        spec = {k: int(c.get(k, d)) for k, d in (
            ("channels", 0), ("kernel_time", 0), ("kernel_freq", 0), ("stride_time", 1),
            ("stride_freq", 1), ("pad_time", 0), ("pad_freq", 0), ("dilation_time", 1),
            ("block", 0))}
        act = c.get("activation", "clipped_relu")
        if act not in ("clipped_relu", "relu"):
            raise ValueError("conv[%d].activation %r: clipped_relu or relu" % (i, act))
        spec.update(bias=bool(c.get("bias", True)), hi=math.inf if act == "relu" else 20.0,
                    dropout=float(c.get("dropout", 0.0)))
        out += [dict(spec) for _ in range(int(c.get("repeat", 1)))]
    starts = [i for i in range(len(out))
              if out[i]["block"] and (i == 0 or out[i]["block"] != out[i - 1]["block"])]
    if starts and starts[0] == 0:
        raise ValueError("conv[0].block: the first layer's input is the features, which a "
                         "residual cannot add")
    dense = bool(cfg.get("dense_residual", False))
    for i, s in enumerate(out):
        end = s["block"] and (i + 1 == len(out) or out[i + 1]["block"] != s["block"])
        s["res"] = [b - 1 for b in starts if end and b <= i and
                    (dense or out[b]["block"] == s["block"])]
    return out


def conv_frames(s, n):
    """Frames out of conv layer s (of conv_layers) for n in (an int or an
    int tensor): the kernel spans dilation_time (kernel_time - 1) + 1."""
    return (n + 2 * s["pad_time"] - s["dilation_time"] * (s["kernel_time"] - 1) - 1) \
        // s["stride_time"] + 1


NO_RNN = {"type": "lstm", "hidden": 0, "layers": 0, "bidirectional": False}


GATES = {"lstm": 4, "gru": 3, "rnn_tanh": 1, "rnn_relu": 1}


def load_config(model):
    """A preset name (configs/NAME.json) or a JSON file -> config dict."""
    path = model if (os.sep in model or model.endswith(".json")) else \
        os.path.join(REPO, "configs", model + ".json")
    try:
        with open(path) as f:
            cfg = json.load(f)
    except FileNotFoundError:
        presets = sorted(p[:-5] for p in os.listdir(os.path.join(REPO, "configs"))
                         if p.endswith(".json"))
        raise BenchError("%s: no such model (a preset: %s, or a JSON file)"
                         % (model, ", ".join(presets)))
    except ValueError as e:
        raise BenchError("%s: %s" % (path, e))
    cfg.setdefault("name", os.path.splitext(os.path.basename(path))[0])
    return cfg


def seq_width(cfg, c_prev, f):
    """Features per frame entering the FC/RNN part: the last conv's maps
    flattened, or (no conv layers) the frames with DS1's context."""
    if cfg.get("conv"):
        return c_prev * f
    return (2 * int(cfg.get("context", 0)) + 1) * int(cfg["n_features"])


def param_count(cfg):
    """Parameters of the model of cfg (dstrain's count: conv weights and
    biases, BatchNorm weights and biases, DS1's FC layers before the RNN, RNN
    weights and both bias vectors per direction, lookahead, hidden FC with
    bias, the output BatchNorm where present and the final FC, with a bias
    where the config asks)."""
    n = 0
    c_prev, f = 1, int(cfg["n_features"])
    layers = conv_layers(cfg)
    for c in layers:
        ch = int(c["channels"])
        n += ch * c_prev * int(c["kernel_time"]) * int(c["kernel_freq"]) + 2 * ch
        n += ch if c["bias"] else 0
        n += sum(ch * layers[src]["channels"] + 2 * ch for src in c["res"])
        f = conv_out_len(f, int(c["kernel_freq"]), int(c["stride_freq"]), int(c["pad_freq"]))
        c_prev = ch
    r = cfg.get("rnn", NO_RNN)
    H, G = int(r["hidden"]), GATES[r["type"]]
    dirs = 2 if r.get("bidirectional", True) else 1
    d = seq_width(cfg, c_prev, f)
    for out in cfg.get("fc_pre", []):
        n += d * int(out) + int(out)
        d = int(out)
    for j in range(int(r["layers"])):
        n_in = d if j == 0 else H
        if j >= 1:
            n += 2 * n_in
        n += dirs * (G * H * (n_in + H) + 2 * G * H)
    if not r.get("bidirectional", True) and int(r.get("lookahead", 0)) > 0:
        n += H * int(r["lookahead"])
    d = H if int(r["layers"]) else d
    for out in cfg.get("fc_hidden", []):
        n += d * int(out) + int(out)
        d = int(out)
    out = cfg.get("output", {})
    classes = int(cfg.get("n_classes", 29))
    n += (2 * d if out.get("batch_norm", True) else 0) + d * classes
    n += classes if out.get("bias", False) else 0
    return n


def flops_forward(cfg, lengths):
    """Forward FLOPs of one batch, real frames only (padding excluded), and
    the first conv's share (its backward is 1x, weight gradient only).

    per utterance i with L_i frames at each stage:
      conv:   2 * co * ho_i * wo * ci * kh * kw (dilated or not)
      residual branch (1x1 conv): 2 * co * ho_i * wo * c_src
      RNN:    dirs * L_i * 2 * G * H * (in + H)   (G = 4 LSTM, 3 GRU, 1 plain)
      linear: 2 * in * out per frame (hidden FC layers and the final FC)
      lookahead (unidirectional models): 2 * H * context per frame
    BatchNorm, activations and CTC are not counted.
    Returns (forward, first_conv_forward)."""
    total, first = 0, 0
    L = [int(v) for v in lengths]
    c_prev, f = 1, int(cfg["n_features"])
    layers = conv_layers(cfg)
    for k, c in enumerate(layers):
        co, kh, kw = int(c["channels"]), int(c["kernel_time"]), int(c["kernel_freq"])
        L = [conv_out_len(v, kh, c["stride_time"], c["pad_time"], c["dilation_time"]) for v in L]
        wo = conv_out_len(f, kw, int(c["stride_freq"]), int(c["pad_freq"]))
        fl = sum(2 * co * h * wo * c_prev * kh * kw for h in L)
        total += fl + sum(2 * co * h * wo * layers[src]["channels"] for h in L for src in c["res"])
        if k == 0:
            first = fl
        c_prev, f = co, wo
    frames = sum(max(v, 0) for v in L)
    r = cfg.get("rnn", NO_RNN)
    H, G = int(r["hidden"]), GATES[r["type"]]
    dirs = 2 if r.get("bidirectional", True) else 1
    d = seq_width(cfg, c_prev, f)
    for k, out in enumerate(cfg.get("fc_pre", [])):
        fl = frames * 2 * d * int(out)
        total += fl
        if k == 0 and not cfg.get("conv"):
            first = fl   # the first layer on the features: weight gradient only
        d = int(out)
    for j in range(int(r["layers"])):
        n_in = d if j == 0 else H
        total += dirs * frames * 2 * G * H * (n_in + H)
    if not r.get("bidirectional", True) and int(r.get("lookahead", 0)) > 0:
        total += frames * 2 * H * int(r["lookahead"])
    d = H if int(r["layers"]) else d
    for out in cfg.get("fc_hidden", []):
        total += frames * 2 * d * int(out)
        d = int(out)
    total += frames * 2 * d * int(cfg.get("n_classes", 29))
    return total, first


def flops_per_step(cfg, lengths, mode):
    """train: forward + backward, backward = 2 x forward except the first
    conv (1 x); forward: forward only."""
    fwd, first = flops_forward(cfg, lengths)
    if mode == "forward":
        return fwd
    return fwd + 2 * fwd - first


def out_frames(cfg, n):
    for c in conv_layers(cfg):
        n = conv_out_len(n, c["kernel_time"], c["stride_time"], c["pad_time"], c["dilation_time"])
    return n


def min_frames(cfg):
    """Fewest input frames that leave at least one output frame."""
    n = 1
    while out_frames(cfg, n) < 1:
        n += 1
    return n


# ------------------------------------------------------------------ synthetic data


def symbol_frames(cfg):
    """Input frames per synthetic symbol: 4 x the product of the time
    strides (data/synthetic.c)."""
    stride = 1
    for c in conv_layers(cfg):
        stride *= c["stride_time"]
    return 4 * stride


SORT_SAMPLE = 64   # data/synthetic.h: DS_SYNTHETIC_SORT_SAMPLE


def sorted_bucket_lengths(rng, batch, pool, max_frames, dist="librispeech", min_frames=None):
    """pool batches of batch lengths formed as dstrain's sampler forms
    batches (data/synthetic.c, ds_synthetic_sorted_lengths: the same rule,
    not the same draws): SORT_SAMPLE x pool x batch lengths drawn as
    synthetic_lengths draws them, sorted and cut into batches of batch
    consecutive lengths; batch k is the one at quantile (k + 1/2) / pool."""
    batches = SORT_SAMPLE * pool
    every = sorted(synthetic_lengths(rng, batches * batch, max_frames, dist, min_frames))
    return [every[int((k + 0.5) * batches / pool) * batch:][:batch] for k in range(pool)]


def synthetic_lengths(rng, batch, max_frames, dist="read", min_frames=None):
    """Utterance lengths in frames of one synthetic batch, drawn with
    dstrain's rules (data/synthetic.c; the same distributions, not the same
    random numbers). rng is a random.Random.

    read (dstrain bench's default): a fraction 0.72 + 0.18 N(0,1) of
      max_frames, clipped to [0.25, 1], at least min_frames.
    librispeech: seconds, 85% from 14 + 1.6 N(0,1), 15% uniform in
      [1.5, 12]; drawn again (up to 64 times, then max_frames) until the
      length is within [min_frames, max_frames].
    uniform: integers uniform in [max_frames // 2, max_frames]."""
    lo = min_frames or 1
    out = []
    for _ in range(batch):
        if dist == "read":
            frac = min(max(0.72 + 0.18 * rng.gauss(0.0, 1.0), 0.25), 1.0)
            t = max(int(frac * max_frames), lo)
        elif dist == "librispeech":
            t = max_frames
            for _ in range(64):
                sec = 14.0 + 1.6 * rng.gauss(0.0, 1.0) if rng.random() < 0.85 \
                    else 1.5 + 10.5 * rng.random()
                if lo <= int(sec * 100) <= max_frames:
                    t = int(sec * 100)
                    break
        elif dist == "uniform":
            t = rng.randint(max(max_frames // 2, lo), max_frames)
        else:
            raise BenchError("--length-dist: read, librispeech or uniform, not %r" % dist)
        out.append(t)
    return out


def label_length(cfg, frames, rng):
    """Transcript length of a synthetic utterance (data/synthetic.c): half
    the frames carry symbols of symbol_frames each, so m = frames // (2 *
    symbol_frames) and the length is uniform in [m // 2 + 1, m] (1 when m
    <= 1): CTC stays feasible."""
    m = frames // (2 * symbol_frames(cfg))
    return rng.randint(m // 2 + 1, m) if m > 1 else 1


# ------------------------------------------------------------------ environment


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def git_rev():
    try:
        r = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, timeout=10)
        rev = r.stdout.decode().strip()
        if r.returncode == 0 and rev:
            d = subprocess.run(["git", "-C", REPO, "diff", "--quiet", "HEAD"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=10)
            return rev + ("-dirty" if d.returncode == 1 else "")
    except (OSError, subprocess.SubprocessError):
        pass
    return None


def now_iso():
    return datetime.datetime.now(datetime.timezone.utc).astimezone().isoformat(timespec="seconds")


def base_env(threads, device_name, gpu=None, versions=None):
    return {
        "host": socket.gethostname(),
        "cpu": cpu_name(),
        "threads": threads,
        "device_name": device_name,
        "gpu": gpu,
        "versions": versions or {},
        "git": git_rev(),
        "command": " ".join(sys.argv),
        "date": now_iso(),
    }


# ------------------------------------------------------------------ files


def write_json(path, doc):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=1, allow_nan=False, default=_json_default)
        f.write("\n")
    os.replace(tmp, path)


def _json_default(o):
    try:
        return float(o)
    except (TypeError, ValueError):
        return str(o)


def finite(x):
    """x with inf/nan replaced by None (JSON has no inf)."""
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, list):
        return [finite(v) for v in x]
    if isinstance(x, dict):
        return {k: finite(v) for k, v in x.items()}
    return x


def csv_row(r):
    row = {}
    for k, v in r.items():
        if isinstance(v, (dict,)) or k in ("step_ms_all", "layers"):
            continue
        if isinstance(v, list) and len(v) == 2 and k.endswith("_ci95"):
            row[k + "_lo"], row[k + "_hi"] = v
            continue
        if isinstance(v, list):
            continue
        row[k] = "" if v is None else v
    return row


def write_csv(path, results):
    rows = [csv_row(r) for r in results]
    cols = list(CSV_FIELDS)
    for row in rows:
        for k in row:
            if k not in cols:
                cols.append(k)
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols, extrasaction="ignore")
        w.writeheader()
        for row in rows:
            w.writerow(row)


def load_results(path):
    """Reads a bench JSON; checks the fields every script relies on."""
    try:
        with open(path) as f:
            doc = json.load(f)
    except OSError as e:
        raise BenchError("%s: %s" % (path, e.strerror or e))
    except ValueError as e:
        raise BenchError("%s: not JSON: %s" % (path, e))
    if not isinstance(doc, dict) or not isinstance(doc.get("results"), list):
        raise BenchError("%s: not a bench JSON (no \"results\" list)" % path)
    if doc.get("schema", SCHEMA) != SCHEMA:
        raise BenchError("%s: schema %r, this script reads %d" % (path, doc.get("schema"), SCHEMA))
    for i, r in enumerate(doc["results"]):
        if not isinstance(r, dict):
            raise BenchError("%s: results[%d] is not an object" % (path, i))
        for k in KEY_FIELDS:
            if k not in r:
                raise BenchError("%s: results[%d] has no %r" % (path, i, k))
        r.setdefault("status", "ok")
        r.setdefault("ranks", 1)
        r.setdefault("impl", doc.get("tool", "?"))
    return doc


def result_ok(r):
    return r.get("status", "ok") == "ok" and isinstance(r.get("samples_per_s"), (int, float))


def fmt_num(x, width=0, prec=None):
    """Compact number: 3 significant digits below 100, integers above."""
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        s = "-"
    elif prec is not None:
        s = "%.*f" % (prec, x)
    elif abs(x) >= 100:
        s = "%.0f" % x
    elif abs(x) >= 10:
        s = "%.1f" % x
    else:
        s = "%.2f" % x
    return s.rjust(width) if width else s


def table(header, rows, units=None):
    """A fixed-width text table (nccl-tests style: header, optional units
    line), right-aligned columns."""
    allrows = [header] + ([units] if units else []) + rows
    w = [max(len(str(r[i])) for r in allrows) for i in range(len(header))]
    out = []
    for j, r in enumerate(allrows):
        line = "  ".join(str(c).rjust(w[i]) for i, c in enumerate(r))
        out.append(("# " if j < (2 if units else 1) else "  ") + line)
    return "\n".join(out)


# ------------------------------------------------------------------ gnuplot


def gnuplot_path():
    from shutil import which
    return os.environ.get("GNUPLOT") or which("gnuplot")


def run_gnuplot(script, prog):
    exe = gnuplot_path()
    if not exe:
        raise BenchError("gnuplot not found: install gnuplot-nox (scripts/install-deps.sh) "
                         "or set GNUPLOT=/path/to/gnuplot")
    r = subprocess.run([exe], input=script.encode(), stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=120)
    if r.returncode != 0:
        raise BenchError("gnuplot failed (%d): %s" % (r.returncode,
                                                      r.stderr.decode("utf-8", "replace").strip()))
    return r.stderr.decode("utf-8", "replace")


def gp_str(s):
    """A gnuplot string literal."""
    return "'" + str(s).replace("'", "''") + "'"
