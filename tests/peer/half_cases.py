#!/usr/bin/python3
"""F16 and BF16 conversions from numpy, for half_numpy_check.

usage: half_cases.py OUT.h5 [--corrupt]

One group per conversion, each with `in` [N] and `out` [N] (numpy's result)
and the attributes `reference` (how `out` was computed) and `corrupted`:
  f16_to_f32    in uint16 (all 65536 patterns)  out float32
  f32_to_f16    in float32                      out uint16
  f64_to_f16    in float64                      out uint16
  bf16_to_f32   in uint16 (all 65536 patterns)  out float32
  f32_to_bf16   in float32                      out uint16
  f64_to_bf16   in float64                      out uint16
F16 is numpy's float16 (its own conversions, which round once from float32
and from float64). numpy has no bfloat16: f32_to_bf16 rounds the top 16
bits of the float's pattern to nearest even in integer arithmetic (NaN kept
a NaN), and the F64 -> BF16 reference scales each double by a power of two
so that the target's last place is 1 and rounds with np.rint (ties to even).
That second reference is first checked here against numpy's float16 on
every F16 case and against the integer rounding on every F32 -> BF16 case;
a disagreement stops the script.

The inputs: every bit pattern where there are 65536; every representable
value; every midpoint between neighbours (the overflow boundaries 65520 and
bf16's, the subnormal ones included) with the next number below and above
it, and for doubles also the midpoint times 1 +- 2^-30 (which a conversion
through float would round twice); random bit patterns over all exponents
and over the target's range; a strided sweep over all float32 patterns
(BF16); zeros, infinities, NaNs with payloads (quiet and signalling).

--corrupt writes a copy in which 3 finite expected values of each group are
wrong in their last bit and records that count in `corrupted`, so that the
checker's failure path is itself tested (half_vs_numpy_detects).
"""
import sys

import h5py
import numpy as np

RNG = np.random.default_rng(20240611)
N_RANDOM = 400_000

# (mantissa bits, exponent bias, all-ones exponent field)
F16 = (10, 15, 31)
BF16 = (7, 127, 255)


def f16_values():
    """Every finite non-negative F16 value in order, as float64."""
    return np.arange(0x7c00, dtype=np.uint16).view(np.float16).astype(np.float64)


def bf16_values():
    """Every finite non-negative BF16 value in order, as float64."""
    h = np.arange(0x7f80, dtype=np.uint32) << 16
    return h.view(np.float32).astype(np.float64)


def boundary_cases(values, top, dtype):
    """Each value, each midpoint between neighbours (and between the largest
    finite value and top, the first value past it), the numbers of dtype
    just below and above each midpoint; both signs."""
    ext = np.append(values, top)
    mid = (ext[:-1] + ext[1:]) / 2          # exact: a few more bits than the format
    mid = mid.astype(dtype)
    assert np.all(mid.astype(np.float64) == (ext[:-1] + ext[1:]) / 2)
    x = np.concatenate([values.astype(dtype), mid, np.nextafter(mid, dtype(0)),
                        np.nextafter(mid, dtype(np.inf))])
    if dtype == np.float64:                 # where a stop at float32 would land on the midpoint
        x = np.concatenate([x, mid * (1 + 2.0 ** -30), mid * (1 - 2.0 ** -30)])
    return np.concatenate([x, -x])


def specials(dtype):
    """Zeros, infinities, extremes and NaNs (payloads, quiet and signalling)."""
    fi = np.finfo(dtype)
    x = np.array([0.0, -0.0, np.inf, -np.inf, fi.max, -fi.max, fi.tiny, fi.tiny / 2 ** 10,
                  2.0 ** -24, 2.0 ** -25, 3 * 2.0 ** -26, 2.0 ** -14, 65504.0, 65519.0, 65520.0,
                  65536.0, 2.0 ** 127, 2.0 ** -133, 2.0 ** -134, 1.0, -1.0], dtype=dtype)
    if dtype == np.float32:
        nan_bits = np.array([0x7fc00000, 0xffc00000, 0x7f800001, 0xff800001, 0x7fa00000,
                             0x7fffffff, 0x7f802000, 0x7fbfffff], dtype=np.uint32)
        nans = nan_bits.view(np.float32)
    else:
        nan_bits = np.array([0x7ff8000000000000, 0xfff8000000000000, 0x7ff0000000000001,
                             0x7ff4000000000000, 0x7fffffffffffffff, 0xfff0000020000000],
                            dtype=np.uint64)
        nans = nan_bits.view(np.float64)
    return np.concatenate([x, nans])


def random_bits(dtype, n, exp_lo=None, exp_hi=None):
    """n random patterns of dtype, over all patterns or with the biased
    exponent in [exp_lo, exp_hi]."""
    if dtype == np.float32:
        bits = RNG.integers(0, 2 ** 32, n, dtype=np.uint64).astype(np.uint32)
        if exp_lo is not None:
            e = RNG.integers(exp_lo, exp_hi + 1, n).astype(np.uint32)
            bits = (bits & np.uint32(0x807fffff)) | (e << np.uint32(23))
        return bits.view(np.float32)
    bits = RNG.integers(0, 2 ** 63, n, dtype=np.uint64) * np.uint64(2) \
        + RNG.integers(0, 2, n, dtype=np.uint64)
    if exp_lo is not None:
        e = RNG.integers(exp_lo, exp_hi + 1, n).astype(np.uint64)
        bits = (bits & np.uint64(0x800fffffffffffff)) | (e << np.uint64(52))
    return bits.view(np.float64)


def ref_round(x, fmt):
    """x (float64 array) rounded once to nearest even in fmt, as uint16 bits:
    scale so that the target's last place at x is 1, np.rint, scale back.
    NaN -> the quiet NaN of fmt with x's sign."""
    man, bias, exp_ones = fmt
    emin, emax = 1 - bias, exp_ones - 1 - bias
    out = np.empty(x.shape, dtype=np.uint16)
    nan = np.isnan(x)
    fin = ~nan
    xf = x[fin]
    _, e = np.frexp(xf)                     # xf = f * 2^e, 0.5 <= |f| < 1; e = 0 for 0
    k = np.maximum(e - 1 - man, emin - man)
    v = np.ldexp(np.rint(np.ldexp(xf, -k)), k)
    max_finite = (2 - 2.0 ** -man) * 2.0 ** emax
    v = np.where(np.abs(v) > max_finite, np.copysign(np.inf, xf), v)
    if fmt == F16:
        bits = v.astype(np.float16).view(np.uint16)       # exact: v is an F16 value
    else:
        bits = (v.astype(np.float32).view(np.uint32) >> np.uint32(16)).astype(np.uint16)
    out[fin] = bits
    sign = np.signbit(x[nan]).astype(np.uint16) << np.uint16(15)
    out[nan] = sign | np.uint16((exp_ones << man) | (1 << (man - 1)))
    return out


def is_nan_bits(h, fmt):
    man, _, exp_ones = fmt
    return (h & 0x7fff) > (exp_ones << man)


def bf16_from_f32_int(x):
    """Round-to-nearest-even on the upper 16 bits of the float32 patterns x;
    a NaN stays a NaN (quiet, top of its payload kept)."""
    b = x.view(np.uint32).astype(np.uint64)
    r = ((b + 0x7fff + ((b >> 16) & 1)) >> 16).astype(np.uint16)
    nan = (b & 0x7fffffff) > 0x7f800000
    r[nan] = ((b[nan] >> 16) | 0x40).astype(np.uint16)
    return r


def agree(name, ours, ref, fmt):
    """Stops the script when two references differ anywhere (NaN: both NaN)."""
    bad = (ours != ref) & ~(is_nan_bits(ours, fmt) & is_nan_bits(ref, fmt))
    if bad.any():
        i = np.flatnonzero(bad)[:5]
        sys.exit(f'half_cases.py: {name}: the references disagree on {bad.sum()} inputs, '
                 f'e.g. indices {i}: {ours[i]} vs {ref[i]}')


def f16_groups():
    h = np.arange(0x10000, dtype=np.uint32).astype(np.uint16)
    groups = {'f16_to_f32': (h, h.view(np.float16).astype(np.float32), 'numpy float16 -> float32')}
    for dtype, name, elo, ehi in ((np.float32, 'f32_to_f16', 97, 145),
                                  (np.float64, 'f64_to_f16', 1023 - 30, 1023 + 17)):
        x = np.concatenate([specials(dtype), boundary_cases(f16_values(), 65536.0, dtype),
                            random_bits(dtype, N_RANDOM), random_bits(dtype, N_RANDOM, elo, ehi)])
        with np.errstate(over='ignore', invalid='ignore'):
            want = x.astype(np.float16).view(np.uint16)
        agree(name + ' (rint reference vs numpy)', ref_round(x.astype(np.float64), F16), want, F16)
        groups[name] = (x, want, f'numpy {np.dtype(dtype).name} -> float16')
    return groups


def bf16_groups():
    h = np.arange(0x10000, dtype=np.uint32)
    groups = {'bf16_to_f32': (h.astype(np.uint16), (h << np.uint32(16)).view(np.float32),
                              'bits << 16 as float32')}
    sweep = (np.arange(0, 2 ** 32, 8191, dtype=np.uint64)).astype(np.uint32).view(np.float32)
    top = 2.0 ** 128
    x32 = np.concatenate([specials(np.float32), boundary_cases(bf16_values(), top, np.float32),
                          sweep, random_bits(np.float32, N_RANDOM)])
    want32 = bf16_from_f32_int(x32)
    agree('f32_to_bf16 (rint reference vs integer rounding)', ref_round(x32.astype(np.float64), BF16),
          want32, BF16)
    groups['f32_to_bf16'] = (x32, want32, 'round to nearest even on the top 16 bits (integers)')
    x64 = np.concatenate([specials(np.float64), boundary_cases(bf16_values(), top, np.float64),
                          random_bits(np.float64, N_RANDOM),
                          random_bits(np.float64, N_RANDOM, 1023 - 140, 1023 + 130)])
    groups['f64_to_bf16'] = (x64, ref_round(x64, BF16), 'power-of-two scaling and np.rint')
    return groups


def corrupt(out, fmt_out):
    """Flips the last bit of 3 finite expected values; returns how many."""
    out = out.copy()
    if out.dtype == np.float32:
        idx = np.flatnonzero(np.isfinite(out))
        view = out.view(np.uint32)
    else:
        idx = np.flatnonzero(~is_nan_bits(out, fmt_out) & ((out & 0x7fff) != (fmt_out[2] << fmt_out[0])))
        view = out
    pick = idx[[0, len(idx) // 2, len(idx) - 1]]
    view[pick] ^= 1
    return out, len(pick)


def main():
    args = [a for a in sys.argv[1:] if a != '--corrupt']
    if len(args) != 1:
        sys.exit(__doc__)
    bad = '--corrupt' in sys.argv[1:]
    with np.errstate(all='ignore'):         # NaN casts and overflow to Inf are the point
        groups = {**f16_groups(), **bf16_groups()}
    with h5py.File(args[0], 'w') as f:
        f.attrs['numpy_version'] = np.__version__
        for name, (x, want, how) in groups.items():
            n_bad = 0
            if bad:
                want, n_bad = corrupt(want, BF16 if 'bf16' in name else F16)
            g = f.create_group(name)
            g.create_dataset('in', data=x)
            g.create_dataset('out', data=want)
            g.attrs['reference'] = how
            g.attrs['corrupted'] = n_bad
            print(f'{name}: {len(x)} cases ({how})')


if __name__ == '__main__':
    main()
