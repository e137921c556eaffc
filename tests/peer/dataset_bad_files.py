#!/usr/bin/env python3
"""dataset_bad_files.py - the feature-file reader against files it did not write.

h5py writes a valid file in dstrain's layout (data/dataset.h), float16 and
float32, and one copy per kind of damage. dataset_open_check (our reader)
must read the valid files value for value and reject each damaged one with
the file and the field named in its message. Then the other direction: h5py
must read a file our writer made (float16 as '<f2', rounded as numpy rounds).

usage: dataset_bad_files.py --check PATH/dataset_open_check --dir WORKDIR
"""
import argparse
import os
import shutil
import subprocess
import sys

import h5py
import numpy as np

ALPHABET = "_'ABCDEFGHIJKLMNOPQRSTUVWXYZ "
N_FEATURES = 161                      # log-spectrogram, 16 kHz, 20 ms window
FRAMES = [20, 35, 50]
N_LABELS = [5, 9, 12]
IDS = ["1089-134686-0000", "1089-134686-0001", "121-121726-0002"]


def corpus():
    rng = np.random.default_rng(7)
    feats = rng.normal(3.0, 2.0, size=(sum(FRAMES), N_FEATURES)).astype(np.float32)
    labels = rng.integers(1, len(ALPHABET), size=sum(N_LABELS)).astype(np.uint8)
    texts, at = [], 0
    for n in N_LABELS:
        texts.append("".join(ALPHABET[v] for v in labels[at:at + n]))
        at += n
    return feats, labels, texts


def write_valid(path, dtype):
    """A file in our writer's layout; features stored as dtype ('<f2' or '<f4')."""
    feats, labels, texts = corpus()
    stored = feats.astype(dtype).astype(np.float64)
    with h5py.File(path, "w") as f:
        f.create_dataset("features", data=feats.astype(dtype), chunks=(16, N_FEATURES),
                         maxshape=(None, N_FEATURES))
        u = f.create_group("utterances")
        u["frame_offset"] = np.cumsum([0] + FRAMES[:-1]).astype(np.int64)
        u["frames"] = np.array(FRAMES, np.int32)
        u["label_offset"] = np.cumsum([0] + N_LABELS[:-1]).astype(np.int64)
        u["label_length"] = np.array(N_LABELS, np.int32)
        u.create_dataset("id", data=IDS, dtype=h5py.string_dtype("utf-8"))
        u.create_dataset("transcript", data=texts, dtype=h5py.string_dtype("utf-8"))
        f["labels"] = labels
        s = f.create_group("stats")
        s["mean"] = stored.mean(axis=0).astype(np.float32)
        s["std"] = stored.std(axis=0).astype(np.float32)
        s["count"] = np.array([len(stored)], np.int64)
        s["sum"] = stored.sum(axis=0)
        s["sumsq"] = (stored * stored).sum(axis=0)
        a = f.attrs
        a["format"] = "dstrain-features"
        a["version"] = np.int64(1)
        a["sample_rate"] = np.int64(16000)
        a["window_size_s"] = 0.02
        a["window_stride_s"] = 0.01
        a["window"] = "hamming"
        a["n_fft"] = np.int64(320)
        a["feature_type"] = "log-spectrogram"
        a["n_features"] = np.int64(N_FEATURES)
        a["alphabet"] = ALPHABET
    return feats.astype(dtype).astype(np.float32)


def replace(f, name, data):
    del f[name]
    f[name] = data


def truncate(path):
    size = os.path.getsize(path)
    with open(path, "r+b") as fh:
        fh.truncate(size // 2)


def not_hdf5(path):
    with open(path, "w") as fh:
        fh.write("utterance,transcript\n")


def edit(fn):
    """A corruption applied through h5py."""
    def apply(path):
        with h5py.File(path, "r+") as f:
            fn(f)
    return apply


def past_end(f):
    replace(f, "utterances/frame_offset", np.array([0, 20, sum(FRAMES) - 10], np.int64))


def labels_past_end(f):
    replace(f, "utterances/label_offset", np.array([0, sum(N_LABELS) - 3, 14], np.int64))


def set_label(value):
    def apply(f):
        lab = f["labels"][:]
        lab[N_LABELS[0] + 2] = value            # inside utterance 1
        replace(f, "labels", lab)
    return apply


def set_feature(value):
    def apply(f):
        f["features"][FRAMES[0] + 3, 7] = value  # inside utterance 1
    return apply


def set_attr(name, value):
    def apply(f):
        f.attrs[name] = value
    return apply


def del_attr(name):
    def apply(f):
        del f.attrs[name]
    return apply


def delete(name):
    def apply(f):
        del f[name]
    return apply


def zero_frames(f):
    replace(f, "utterances/frames", np.array([0] + FRAMES[1:], np.int32))


def longer_index(f):
    replace(f, "utterances/frames", np.array(FRAMES + [5], np.int32))


def narrow_features(f):
    replace(f, "features", f["features"][:, :-1])


def float64_features(f):
    replace(f, "features", f["features"][:].astype(np.float64))


# name, base dtype, corruption, substrings the message must hold (besides the path)
CASES = [
    ("truncated", "<f2", truncate, ["cannot open as HDF5"]),
    ("not_hdf5", "<f2", not_hdf5, ["cannot open as HDF5"]),
    ("missing_file", "<f2", os.remove, ["No such file"]),
    ("format_missing", "<f2", edit(del_attr("format")), ["attribute format is missing"]),
    ("wrong_format", "<f2", edit(set_attr("format", "kaldi-ark")), ["attribute format", "kaldi-ark"]),
    ("wrong_version", "<f2", edit(set_attr("version", np.int64(3))), ["attribute version is 3"]),
    ("version2_unsealed", "<f2", edit(set_attr("version", np.int64(2))),
     ["attributes_crc32 is missing"]),
    ("float_version", "<f2", edit(set_attr("version", 1.0)), ["attribute version", "integer"]),
    ("wrong_alphabet", "<f2", edit(set_attr("alphabet", ALPHABET.lower())), ["attribute alphabet"]),
    ("wrong_n_features", "<f2", edit(set_attr("n_features", np.int64(160))),
     ["attribute n_features is 160"]),
    ("wrong_n_fft", "<f2", edit(set_attr("n_fft", np.int64(512))), ["attribute n_fft is 512"]),
    ("unknown_feature_type", "<f2", edit(set_attr("feature_type", "fbank")),
     ["attribute feature_type", "fbank"]),
    ("narrow_features", "<f2", edit(narrow_features),
     ["features has 160 columns", "n_features is 161"]),
    ("float64_features", "<f4", edit(float64_features), ["features: dtype is float of 64 bits"]),
    ("offsets_past_end", "<f2", edit(past_end),
     ["utterances/frame_offset", IDS[2], "offsets past the end"]),
    ("label_offsets_past_end", "<f2", edit(labels_past_end),
     ["utterances/label_offset", IDS[1], "offsets past the end"]),
    ("zero_frames", "<f2", edit(zero_frames), ["utterances/frames", IDS[0], "0 frames"]),
    ("label_outside_alphabet", "<f2", edit(set_label(29)),
     ["labels", IDS[1], "label 29", "outside the alphabet"]),
    ("blank_label", "<f2", edit(set_label(0)), ["labels", IDS[1], "label 0", "outside the alphabet"]),
    ("nan_in_features", "<f2", edit(set_feature(np.nan)), ["features", IDS[1], "NaN"]),
    ("inf_in_features", "<f4", edit(set_feature(np.inf)), ["features", IDS[1], "Inf"]),
    ("mismatched_index_lengths", "<f2", edit(longer_index),
     ["utterances/frames has 4 entries", "utterances/frame_offset has 3"]),
    ("missing_dataset", "<f2", edit(delete("utterances/label_length")),
     ["utterances/label_length is missing"]),
    ("missing_labels", "<f2", edit(delete("labels")), ["labels is missing"]),
    ("missing_stats", "<f2", edit(delete("stats")), ["stats is missing"]),
]


def run(check, *args):
    p = subprocess.run([check, *args], capture_output=True, text=True, timeout=60)
    return p.returncode, (p.stdout + p.stderr).strip()


def check_valid(check, workdir):
    bad = 0
    for dtype in ("<f2", "<f4"):
        path = os.path.join(workdir, f"valid{dtype[1:]}.h5")
        want = write_valid(path, dtype)
        raw = path + ".raw"
        rc, out = run(check, path, raw)
        got = np.fromfile(raw, np.float32).reshape(-1, N_FEATURES) if rc == 0 else None
        if rc != 0 or not out.startswith("ok: 3 utterances") or not np.array_equal(got, want):
            print(f"FAIL valid {dtype}: rc {rc}: {out}")
            bad += 1
        else:
            print(f"ok   valid {dtype}: {out}")
    return bad


def check_corruptions(check, workdir):
    bad = 0
    for name, dtype, corrupt, needles in CASES:
        path = os.path.join(workdir, name + ".h5")
        write_valid(path, dtype)
        corrupt(path)
        rc, out = run(check, path)
        missing = [s for s in [path] + needles if s not in out]
        if rc == 1 and out.startswith("error:") and not missing:
            print(f"ok   {name}: {out}")
        else:
            print(f"FAIL {name}: rc {rc}, message lacks {missing}: {out}")
            bad += 1
    return bad


def check_ours(check, workdir):
    """h5py reads what our writer wrote."""
    bad = 0
    for tag, dtype in (("f16", "<f2"), ("f32", "<f4")):
        path, raw = os.path.join(workdir, f"ours_{tag}.h5"), os.path.join(workdir, f"ours_{tag}.raw")
        rc, out = run(check, "--write", path, tag, raw)
        if rc != 0:
            print(f"FAIL ours {tag}: writer failed: {out}")
            bad += 1
            continue
        given = np.fromfile(raw, np.float32).reshape(-1, 8)
        problems = []
        with h5py.File(path, "r") as f:
            x = f["features"]
            if x.dtype != np.dtype(dtype):
                problems.append(f"features dtype {x.dtype.str}")
            want = given.astype(dtype)   # numpy rounds to nearest even
            u = f["utterances"]
            # each utterance starts a 64-row chunk; the rows between are zero
            rows = np.concatenate([np.arange(o, o + n) for o, n in
                                   zip(u["frame_offset"][:], u["frames"][:])])
            got = x[:][rows] if rows.size and rows.max() < x.shape[0] else np.zeros((0, 8), x.dtype)
            if got.shape != want.shape or not np.array_equal(got.view(np.uint8), want.view(np.uint8)):
                problems.append("features differ from numpy's rounding")
            pad = np.ones(x.shape[0], bool)
            pad[rows[rows < x.shape[0]]] = False
            if np.any(x[:][pad] != 0):
                problems.append("padding rows between utterances are not zero")
            ids = [s.decode() if isinstance(s, bytes) else s for s in u["id"][:]]
            if ids != ["check-0", "check-1", "check-2"]:
                problems.append(f"ids {ids}")
            if list(u["frames"][:]) != [5, 1100, 40] or list(u["frame_offset"][:]) != [0, 64, 1216]:
                problems.append("frame index")
            if u["frame_offset"].dtype != np.int64 or u["frames"].dtype != np.int32:
                problems.append("index dtypes")
            if f["labels"].dtype != np.uint8 or len(f["labels"]) != 39:
                problems.append("labels")
            attrs = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in f.attrs.items()}
            for k, v in (("format", "dstrain-features"), ("version", 2), ("feature_type", "log-mel"),
                         ("n_features", 8), ("n_fft", 320), ("sample_rate", 16000),
                         ("window", "hamming"), ("alphabet", ALPHABET)):
                if attrs.get(k) != v:
                    problems.append(f"attribute {k} = {attrs.get(k)!r}")
            if not np.issubdtype(np.asarray(f.attrs["version"]).dtype, np.integer):
                problems.append("version is not an integer")
            g = given.astype(np.float64)
            s = f["stats"]
            if (int(s["count"][0]) != len(g) or not np.allclose(s["sum"][:], g.sum(0), rtol=1e-12)
                    or not np.allclose(s["mean"][:], g.mean(0), rtol=1e-6, atol=1e-6)
                    or not np.allclose(s["std"][:], g.std(0), rtol=1e-6, atol=1e-6)):
                problems.append("stats")
        if problems:
            print(f"FAIL ours {tag}: {'; '.join(problems)}")
            bad += 1
        else:
            print(f"ok   ours {tag}: h5py reads {dtype}, values, index, attributes, stats")
    return bad


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", required=True, help="the dataset_open_check program")
    ap.add_argument("--dir", required=True, help="scratch directory (recreated)")
    a = ap.parse_args()
    shutil.rmtree(a.dir, ignore_errors=True)
    os.makedirs(a.dir)
    bad = check_valid(a.check, a.dir) + check_corruptions(a.check, a.dir) + check_ours(a.check, a.dir)
    print(f"dataset_bad_inputs: {len(CASES) + 4 - bad} passed, {bad} failed")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
