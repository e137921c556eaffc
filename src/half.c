/* half.c - binary16 and bfloat16 to and from float and double; see half.h.
 * HDF5 1.10's own binary16 conversion is not used: it
 * loses the carry when rounding overflows the mantissa (7.9999 -> 4.0; h5py
 * issue #819) and it runs at ~120 ns a value. The float paths below are bit
 * tricks on the float's pattern; the double paths share one integer rounding
 * routine parameterised by the narrow format. */
#include "half.h"

#include <string.h>

/* A narrow binary format: mantissa bits, exponent bias, the all-ones
 * exponent field (Inf, NaN). Both have the sign in bit 15. */
typedef struct {
    int man, bias, exp_ones;
} narrow_fmt;

static const narrow_fmt FMT_F16 = {10, 15, 31};
static const narrow_fmt FMT_BF16 = {7, 127, 255};

static uint32_t bits_f32(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    return x;
}

static float f32_bits(uint32_t x)
{
    float f;
    memcpy(&f, &x, sizeof f);
    return f;
}

float ds_half_f32_from_f16(uint16_t h)
{
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 31u, m = h & 0x3ffu;
    if (e == 31)                                       /* inf; NaN quietened, payload kept */
        return f32_bits(sign | 0x7f800000u | (m << 13) | (m ? 0x400000u : 0));
    if (e)
        return f32_bits(sign | ((e + 112) << 23) | (m << 13));   /* rebias 15 -> 127 */
    return f32_bits(bits_f32((float)m * 0x1p-24f) | sign);      /* zero or subnormal: exact */
}

uint16_t ds_half_f16_from_f32(float f)
{
    const uint32_t x = bits_f32(f);
    const uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    const uint32_t ax = x & 0x7fffffffu;
    if (ax >= 0x38800000u && ax < 0x477ff000u)         /* normal half: [2^-14, 65520) */
        /* rebias, then round the 13 dropped bits to nearest even without a
         * branch: adding 0xfff plus the kept lsb carries exactly when the
         * rest is over half, or half with an odd lsb; a carry out of the
         * mantissa raises the exponent, as it should */
        return (uint16_t)(sign | ((ax - 0x38000000u + 0xfffu + ((ax >> 13) & 1u)) >> 13));
    if (ax >= 0x7f800000u)                             /* inf, NaN (stays a NaN) */
        return (uint16_t)(sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u : 0));
    if (ax >= 0x477ff000u)                             /* >= 65520 rounds to inf */
        return (uint16_t)(sign | 0x7c00u);
    const uint32_t e = ax >> 23;                       /* subnormal half, in units of 2^-24 */
    if (e < 102)                                       /* below 2^-25: rounds to zero */
        return sign;
    const uint32_t m = (ax & 0x7fffffu) | 0x800000u, shift = 126 - e;   /* 14..24 */
    const uint32_t rem = m & ((1u << shift) - 1), tie = 1u << (shift - 1);
    uint32_t r = m >> shift;
    if (rem > tie || (rem == tie && (r & 1)))
        r++;                                           /* 0x400 is the smallest normal */
    return (uint16_t)(sign | r);
}

float ds_half_f32_from_bf16(uint16_t h)
{
    const uint32_t x = (uint32_t)h << 16;              /* bfloat16 is float's top half */
    return f32_bits((x & 0x7fffffffu) > 0x7f800000u ? x | 0x400000u : x);
}

uint16_t ds_half_bf16_from_f32(float f)
{
    const uint32_t x = bits_f32(f);
    if ((x & 0x7fffffffu) > 0x7f800000u)               /* NaN: quiet, top of the payload kept */
        return (uint16_t)((x >> 16) | 0x40u);
    /* the same carry trick as for F16 on the low 16 bits; the exponents
     * agree, so subnormals need nothing and overflow carries into Inf */
    return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

/* Double d rounded once to format f. The double's 53-bit significand is
 * shifted right by as many bits as the target keeps fewer (more below the
 * target's smallest normal) and rounded to nearest even on the remainder. */
static uint16_t narrow_f64(double d, narrow_fmt f)
{
    uint64_t x;
    memcpy(&x, &d, sizeof x);
    const uint16_t sign = (uint16_t)((x >> 48) & 0x8000u);
    const uint64_t ax = x & 0x7fffffffffffffffull;
    const uint16_t inf = (uint16_t)(f.exp_ones << f.man);
    if (ax > 0x7ff0000000000000ull)                    /* NaN: quiet */
        return (uint16_t)(sign | inf | (1u << (f.man - 1)));
    const int e = (int)(ax >> 52);
    if (e == 0)                  /* zero, or a double subnormal: < 2^-1022, rounds to zero */
        return sign;
    const int te = e - 1023 + f.bias;                  /* the target's biased exponent */
    if (te >= f.exp_ones)                              /* >= 2^(emax + 1), or Inf */
        return (uint16_t)(sign | inf);
    const int shift = 52 - f.man + (te < 1 ? 1 - te : 0);
    if (shift > 63)                                    /* below a quarter of the smallest subnormal */
        return sign;
    const uint64_t m = (ax & 0xfffffffffffffull) | (1ull << 52);
    const uint64_t rem = m & ((1ull << shift) - 1), tie = 1ull << (shift - 1);
    uint64_t r = m >> shift;
    if (rem > tie || (rem == tie && (r & 1)))
        r++;
    /* r holds the implicit bit for normals, so base + r adds one to the
     * exponent field; a carry out of the mantissa raises it once more, up
     * to Inf. Subnormals have no implicit bit and base 0. */
    const uint64_t base = te < 1 ? 0 : (uint64_t)(te - 1) << f.man;
    return (uint16_t)(sign | (base + r));
}

uint16_t ds_half_f16_from_f64(double d) { return narrow_f64(d, FMT_F16); }
uint16_t ds_half_bf16_from_f64(double d) { return narrow_f64(d, FMT_BF16); }

/* ---- whole arrays: 8 at a time with F16C and AVX2 where the CPU has them ----
 * The vector paths give the scalar functions' bits for every input (test_half
 * compares them): vcvtps2ph rounds to nearest even by its immediate whatever
 * MXCSR says, and a NaN, whose payload it would keep, is made the scalar
 * path's quiet NaN; bfloat16 uses the scalar carry trick on 8 lanes. The
 * CPU backend's 16-bit tables widen and narrow every op's operands here. */
#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>

#define X86_VEC __attribute__((target("avx2,f16c")))

static int x86_vec(void)
{
    static int have = -1;   /* a benign race: every thread computes the same */
    if (have < 0) {
        /* AVX2 as the compiler's runtime knows it (the OS saves the ymm
         * state); F16C from cpuid, which not every compiler's
         * __builtin_cpu_supports names (clang's does not) */
        unsigned a, b, c, d;
        __builtin_cpu_init();
        have = __builtin_cpu_supports("avx2") && __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
    }
    return have;
}

/* lanes of x [8] that hold a NaN: all ones */
X86_VEC static __m256i nan_lanes(__m256i x)
{
    const __m256i ax = _mm256_and_si256(x, _mm256_set1_epi32(0x7fffffff));
    return _mm256_cmpgt_epi32(ax, _mm256_set1_epi32(0x7f800000));
}

X86_VEC static size_t f16_from_f32_x86(uint16_t *dst, const float *src, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 f = _mm256_loadu_ps(src + i);
        const __m256i x = _mm256_castps_si256(f), nan = nan_lanes(x);
        __m128i h = _mm256_cvtps_ph(f, _MM_FROUND_TO_NEAREST_INT);
        /* NaN lanes: sign | 0x7e00, as the scalar path */
        const __m128i qnan = _mm_or_si128(_mm_and_si128(_mm_packs_epi32(_mm256_castsi256_si128(
                                                                             _mm256_srai_epi32(x, 16)),
                                                                         _mm256_extracti128_si256(
                                                                             _mm256_srai_epi32(x, 16), 1)),
                                                         _mm_set1_epi16((short)0x8000)),
                                          _mm_set1_epi16(0x7e00));
        const __m128i nan16 = _mm_packs_epi32(_mm256_castsi256_si128(nan), _mm256_extracti128_si256(nan, 1));
        h = _mm_blendv_epi8(h, qnan, nan16);
        _mm_storeu_si128((__m128i *)(dst + i), h);
    }
    return i;
}

X86_VEC static size_t f32_from_f16_x86(float *dst, const uint16_t *src, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8)   /* exact; a NaN quietened with its payload, as the scalar path */
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + i))));
    return i;
}

X86_VEC static size_t bf16_from_f32_x86(uint16_t *dst, const float *src, size_t n)
{
    size_t i = 0;
    const __m256i one = _mm256_set1_epi32(1), round = _mm256_set1_epi32(0x7fff);
    for (; i + 8 <= n; i += 8) {
        const __m256i x = _mm256_loadu_si256((const __m256i *)(src + i));
        const __m256i hi = _mm256_srli_epi32(x, 16);
        const __m256i r = _mm256_srli_epi32(
            _mm256_add_epi32(_mm256_add_epi32(x, round), _mm256_and_si256(hi, one)), 16);
        const __m256i q = _mm256_or_si256(hi, _mm256_set1_epi32(0x40));
        const __m256i v = _mm256_blendv_epi8(r, q, nan_lanes(x));   /* each lane <= 0xffff */
        /* packus works per 128-bit half: lanes 0-3, 4-7 come out as 64-bit words 0 and 2 */
        const __m256i p = _mm256_permute4x64_epi64(_mm256_packus_epi32(v, v), 0x08);
        _mm_storeu_si128((__m128i *)(dst + i), _mm256_castsi256_si128(p));
    }
    return i;
}

X86_VEC static size_t f32_from_bf16_x86(float *dst, const uint16_t *src, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256i x = _mm256_slli_epi32(
            _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(src + i))), 16);
        const __m256i q = _mm256_or_si256(x, _mm256_set1_epi32(0x400000));
        _mm256_storeu_si256((__m256i *)(dst + i), _mm256_blendv_epi8(x, q, nan_lanes(x)));
    }
    return i;
}

#define VEC_DONE(fn, dst, src, n) (x86_vec() ? fn(dst, src, n) : 0)
#else
#define VEC_DONE(fn, dst, src, n) ((size_t)0)
#endif

void ds_half_f16_from_f32_n(uint16_t *dst, const float *src, size_t n)
{
    for (size_t i = VEC_DONE(f16_from_f32_x86, dst, src, n); i < n; i++)
        dst[i] = ds_half_f16_from_f32(src[i]);
}

void ds_half_f32_from_f16_n(float *dst, const uint16_t *src, size_t n)
{
    for (size_t i = VEC_DONE(f32_from_f16_x86, dst, src, n); i < n; i++)
        dst[i] = ds_half_f32_from_f16(src[i]);
}

void ds_half_bf16_from_f32_n(uint16_t *dst, const float *src, size_t n)
{
    for (size_t i = VEC_DONE(bf16_from_f32_x86, dst, src, n); i < n; i++)
        dst[i] = ds_half_bf16_from_f32(src[i]);
}

void ds_half_f32_from_bf16_n(float *dst, const uint16_t *src, size_t n)
{
    for (size_t i = VEC_DONE(f32_from_bf16_x86, dst, src, n); i < n; i++)
        dst[i] = ds_half_f32_from_bf16(src[i]);
}
