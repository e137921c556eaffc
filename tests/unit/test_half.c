/* test_half.c - half.h and ds_convert's F16/BF16 paths, without numpy (the
 * half_vs_numpy test compares with numpy bit for bit):
 *  - every F16 and BF16 pattern widens to the value its fields say and
 *    narrows back to itself from float and from double; NaNs stay quiet NaNs;
 *  - over every third float pattern, the float and the double narrowing paths
 *    (two independent implementations) give the same bits;
 *  - at every midpoint between neighbouring F16 / BF16 values, and just
 *    above and below it in double, the double path rounds once: ties to
 *    even, the rest to the nearer neighbour; the test also counts how many
 *    of these a stop at float would get wrong, to show they are the cases
 *    that matter;
 *  - known values at the edges; ds_convert between all supported pairs;
 *  - the array functions (8 at a time with F16C and AVX2 where the CPU has
 *    them) give the scalar functions' bits: every F16 and BF16 pattern
 *    widened, every 61st float pattern and the edges narrowed, from odd
 *    offsets and with lengths that leave a tail. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "convert.h"
#include "half.h"
#include "testutil.h"

#define CHECK_OK(expr) T_CHECK((expr) == DS_OK, "%s: %s", #expr, ds_status_last_error())

static uint32_t bits_f32(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    return x;
}

static int f16_is_nan(uint16_t h) { return (h & 0x7fff) > 0x7c00; }
static int bf16_is_nan(uint16_t h) { return (h & 0x7fff) > 0x7f80; }
static int f32_is_quiet_nan(float f) { return isnan(f) && (bits_f32(f) & 0x400000u); }

/* The value of F16 pattern h from its fields, computed in double. */
static double f16_value(uint16_t h)
{
    const int e = (h >> 10) & 31, m = h & 0x3ff;
    const double s = (h & 0x8000) ? -1 : 1;
    if (e == 31)
        return m ? NAN : s * INFINITY;
    return s * (e ? ldexp(1024 + m, e - 25) : ldexp(m, -24));
}

/* The value of BF16 pattern h from its fields. */
static double bf16_value(uint16_t h)
{
    const int e = (h >> 7) & 255, m = h & 0x7f;
    const double s = (h & 0x8000) ? -1 : 1;
    if (e == 255)
        return m ? NAN : s * INFINITY;
    return s * (e ? ldexp(128 + m, e - 134) : ldexp(m, -133));
}

static void check_all_f16(void)
{
    size_t wrong_value = 0, wrong_back = 0, wrong_nan = 0;
    for (uint32_t k = 0; k < 0x10000; k++) {
        const uint16_t h = (uint16_t)k;
        const float f = ds_half_f32_from_f16(h);
        if (f16_is_nan(h)) {
            wrong_nan += !f32_is_quiet_nan(f) || !f16_is_nan(ds_half_f16_from_f32(f))
                         || !(ds_half_f16_from_f32(f) & 0x200) || !f16_is_nan(ds_half_f16_from_f64(f))
                         || (ds_half_f16_from_f32(f) & 0x8000) != (h & 0x8000);
            continue;
        }
        wrong_value += (double)f != f16_value(h) || !!signbit(f) != !!(h & 0x8000);
        wrong_back += ds_half_f16_from_f32(f) != h || ds_half_f16_from_f64(f) != h;
    }
    printf("F16: 65536 patterns: %zu widen to a wrong value, %zu do not narrow back, "
           "%zu NaNs not kept quiet NaNs\n", wrong_value, wrong_back, wrong_nan);
    T_CHECK(wrong_value == 0 && wrong_back == 0 && wrong_nan == 0, "F16 patterns");
}

static void check_all_bf16(void)
{
    size_t wrong_value = 0, wrong_back = 0, wrong_nan = 0;
    for (uint32_t k = 0; k < 0x10000; k++) {
        const uint16_t h = (uint16_t)k;
        const float f = ds_half_f32_from_bf16(h);
        if (bf16_is_nan(h)) {
            wrong_nan += !f32_is_quiet_nan(f) || !bf16_is_nan(ds_half_bf16_from_f32(f))
                         || !(ds_half_bf16_from_f32(f) & 0x40) || !bf16_is_nan(ds_half_bf16_from_f64(f))
                         || (ds_half_bf16_from_f32(f) & 0x8000) != (h & 0x8000);
            continue;
        }
        wrong_value += (double)f != bf16_value(h) || !!signbit(f) != !!(h & 0x8000);
        wrong_back += ds_half_bf16_from_f32(f) != h || ds_half_bf16_from_f64(f) != h;
    }
    printf("BF16: 65536 patterns: %zu widen to a wrong value, %zu do not narrow back, "
           "%zu NaNs not kept quiet NaNs\n", wrong_value, wrong_back, wrong_nan);
    T_CHECK(wrong_value == 0 && wrong_back == 0 && wrong_nan == 0, "BF16 patterns");
}

/* Every third float pattern (1.4e9 of them: every exponent, every low-bit
 * pattern, both signs; all 2^32 take 40 s): its F16 and BF16 from the float
 * path equal those from the double path (the float is exact in double).
 * NaNs: both NaN. */
static void check_float_paths_agree(void)
{
    size_t f16_diff = 0, bf16_diff = 0, n = 0;
    for (uint64_t k = 0; k < 0x100000000ull; k += 3, n++) {
        const uint32_t x = (uint32_t)k;
        float f;
        memcpy(&f, &x, sizeof f);
        const uint16_t a = ds_half_f16_from_f32(f), b = ds_half_f16_from_f64(f);
        const uint16_t c = ds_half_bf16_from_f32(f), d = ds_half_bf16_from_f64(f);
        f16_diff += a != b && !(f16_is_nan(a) && f16_is_nan(b));
        bf16_diff += c != d && !(bf16_is_nan(c) && bf16_is_nan(d));
    }
    printf("%zu floats (every third pattern): float and double paths differ on %zu (F16) and "
           "%zu (BF16)\n", n, f16_diff, bf16_diff);
    T_CHECK(f16_diff == 0 && bf16_diff == 0, "float and double paths disagree");
}

/* Narrowing functions of one format, and its value decoder. */
typedef struct {
    const char *name;
    uint16_t (*from_f64)(double);
    uint16_t (*from_f32)(float);
    double (*value)(uint16_t);
    uint16_t max_finite;   /* the positive pattern; the next one is Inf */
} fmt;

/* At each midpoint between neighbours lo, lo + 1 (positive and negative;
 * max_finite's upper neighbour is Inf, at the value the exponent step gives)
 * and at the doubles next to it and at 1 +- 2^-30 of it: the double path's
 * result; and how often going through float would differ. */
static void check_midpoints(const fmt *t)
{
    size_t cases = 0, wrong = 0, via_float_wrong = 0;
    for (uint32_t lo = 0; lo <= t->max_finite; lo++) {
        const double a = t->value((uint16_t)lo);
        const double b = lo == t->max_finite ? ldexp(1, ilogb(a) + 1) : t->value((uint16_t)(lo + 1));
        const double mid = (a + b) / 2;   /* exact: a few bits more than the format */
        const uint16_t even = (lo & 1) ? (uint16_t)(lo + 1) : (uint16_t)lo;
        const struct { double x; uint16_t want; } probe[] = {
            {mid, even},
            {nextafter(mid, 0), (uint16_t)lo}, {nextafter(mid, INFINITY), (uint16_t)(lo + 1)},
            {mid * (1 - 0x1p-30), (uint16_t)lo}, {mid * (1 + 0x1p-30), (uint16_t)(lo + 1)},
        };
        for (size_t p = 0; p < sizeof probe / sizeof probe[0]; p++)
            for (int s = 0; s < 2; s++) {
                const double x = s ? -probe[p].x : probe[p].x;
                const uint16_t want = (uint16_t)(probe[p].want | (s ? 0x8000 : 0));
                cases++;
                wrong += t->from_f64(x) != want;
                via_float_wrong += t->from_f32((float)x) != want;
            }
    }
    printf("%s midpoints: %zu doubles, %zu rounded wrongly; through float %zu would be\n", t->name,
           cases, wrong, via_float_wrong);
    T_CHECK(wrong == 0, "%s: %zu of %zu midpoint cases wrong", t->name, wrong, cases);
    T_CHECK(via_float_wrong > 0, "%s: the cases do not exercise double rounding", t->name);
}

static uint16_t f16_f64(double d) { return ds_half_f16_from_f64(d); }
static uint16_t bf16_f64(double d) { return ds_half_bf16_from_f64(d); }

/* Known values: overflow boundaries, subnormal boundaries, carries. */
static void check_edges(void)
{
    static const struct { double x; uint16_t f16, bf16; } t[] = {
        {0.0, 0x0000, 0x0000}, {-0.0, 0x8000, 0x8000}, {1.0, 0x3c00, 0x3f80},
        {INFINITY, 0x7c00, 0x7f80}, {-INFINITY, 0xfc00, 0xff80},
        {65504.0, 0x7bff, 0x4780}, {65519.99, 0x7bff, 0x4780}, {65520.0, 0x7c00, 0x4780},
        {-65520.0, 0xfc00, 0xc780}, {7.9999, 0x4800, 0x4100},
        {0x1p-24, 0x0001, 0x3380}, {0x1p-25, 0x0000, 0x3300}, {0x1.8p-25, 0x0001, 0x3340},
        {0x1.0000000000001p-25, 0x0001, 0x3300}, {0x1.fffffffffffffp-26, 0x0000, 0x3300},
        {0x1p-14, 0x0400, 0x3880}, {0x1.ff8p-15, 0x03ff, 0x3880},   /* F16's largest subnormal */
        {0x1.ffcp-15, 0x0400, 0x3880},                              /* a tie above it: even is normal */
        {1 + 0x1p-11 + 0x1p-40, 0x3c01, 0x3f80},                   /* the double-rounding trap */
        {0x1.fep127, 0x7c00, 0x7f7f}, {0x1.ffp127, 0x7c00, 0x7f80},  /* bf16 overflow tie: even is Inf */
        {0x1.fefffffffffffp127, 0x7c00, 0x7f7f},
        {0x1p-133, 0x0000, 0x0001}, {0x1p-134, 0x0000, 0x0000}, {0x1.0000000000001p-134, 0x0000, 0x0001},
        {0x1p-1074, 0x0000, 0x0000}, {-0x1p-1074, 0x8000, 0x8000}, {1e300, 0x7c00, 0x7f80},
    };
    size_t bad = 0;
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        const uint16_t a = ds_half_f16_from_f64(t[i].x), b = ds_half_bf16_from_f64(t[i].x);
        if (a != t[i].f16 || b != t[i].bf16) {
            bad++;
            printf("  %a: f16 0x%04x (want 0x%04x), bf16 0x%04x (want 0x%04x)\n", t[i].x, a,
                   t[i].f16, b, t[i].bf16);
        }
    }
    T_CHECK(bad == 0, "%zu of %zu edge values wrong", bad, sizeof t / sizeof t[0]);
    T_CHECK(ds_half_f16_from_f32(7.9999f) == 0x4800 && ds_half_f16_from_f32(65519.0f) == 0x7bff
                && ds_half_f16_from_f32(65520.0f) == 0x7c00 && ds_half_bf16_from_f32(0x1.ffp127f) == 0x7f80
                && ds_half_bf16_from_f32(-0x1.fep127f) == 0xff7f,
            "float edge values");
    T_CHECK(f16_is_nan(ds_half_f16_from_f64(NAN)) && bf16_is_nan(ds_half_bf16_from_f64(-NAN))
                && (ds_half_bf16_from_f64(-NAN) & 0x8000) && (ds_half_f16_from_f64(NAN) & 0x200),
            "double NaN -> quiet NaN");
    printf("edges: %zu known values checked\n", sizeof t / sizeof t[0]);
}

/* ds_convert: the pairs it supports, against the scalar functions. */
static void check_convert(void)
{
    enum { N = 0x10000 };
    uint16_t *h = malloc(N * sizeof *h), *h2 = malloc(N * sizeof *h2);
    double *d = malloc(N * sizeof *d);
    float *f = malloc(N * sizeof *f);
    size_t bad = 0;
    for (uint32_t k = 0; k < N; k++)
        h[k] = (uint16_t)k;
    /* F16 -> F64 -> F16 and BF16 -> F64 -> BF16 are identities (NaN: NaN) */
    CHECK_OK(ds_convert(DS_F64, d, DS_F16, h, N));
    CHECK_OK(ds_convert(DS_F16, h2, DS_F64, d, N));
    for (uint32_t k = 0; k < N; k++)
        bad += f16_is_nan(h[k]) ? !f16_is_nan(h2[k]) || !isnan(d[k])
                                : h2[k] != h[k] || d[k] != f16_value(h[k]);
    CHECK_OK(ds_convert(DS_F64, d, DS_BF16, h, N));
    CHECK_OK(ds_convert(DS_BF16, h2, DS_F64, d, N));
    for (uint32_t k = 0; k < N; k++)
        bad += bf16_is_nan(h[k]) ? !bf16_is_nan(h2[k]) : h2[k] != h[k] || d[k] != bf16_value(h[k]);
    /* BF16 -> F16 rounds the BF16 value once; F16 -> BF16 likewise */
    CHECK_OK(ds_convert(DS_F16, h2, DS_BF16, h, N));
    for (uint32_t k = 0; k < N; k++)
        bad += !bf16_is_nan(h[k]) && h2[k] != ds_half_f16_from_f64(bf16_value(h[k]));
    CHECK_OK(ds_convert(DS_BF16, h2, DS_F16, h, N));
    for (uint32_t k = 0; k < N; k++)
        bad += !f16_is_nan(h[k]) && h2[k] != ds_half_bf16_from_f64(f16_value(h[k]));
    /* F32 <-> F16 / BF16 */
    CHECK_OK(ds_convert(DS_F32, f, DS_F16, h, N));
    CHECK_OK(ds_convert(DS_BF16, h2, DS_F32, f, N));
    for (uint32_t k = 0; k < N; k++)
        bad += bits_f32(f[k]) != bits_f32(ds_half_f32_from_f16(h[k])) || h2[k] != ds_half_bf16_from_f32(f[k]);
    printf("ds_convert: %zu of %d patterns x 5 conversions wrong\n", bad, N);
    T_CHECK(bad == 0, "ds_convert F16/BF16 pairs");

    /* I32 <-> F16: ties to even among integers, overflow to Inf, truncation back */
    const int32_t ints[] = {2049, 2051, 65504, 65519, 65520, -3, 0};
    const uint16_t want[] = {0x6800, 0x6802, 0x7bff, 0x7bff, 0x7c00, 0xc200, 0x0000};
    uint16_t got[7];
    int32_t back[1];
    const uint16_t pi = 0x4248;   /* 3.140625 */
    CHECK_OK(ds_convert(DS_F16, got, DS_I32, ints, 7));
    CHECK_OK(ds_convert(DS_I32, back, DS_F16, &pi, 1));
    T_CHECK(memcmp(got, want, sizeof want) == 0 && back[0] == 3, "I32 <-> F16");
    ds_status st = ds_convert(DS_F16, h2, DS_I64, d, 1);
    T_CHECK(st == DS_ERR_UNSUPPORTED, "I64 -> F16 gives %s", ds_status_name(st));
    ds_status_clear_error();
    free(h);
    free(h2);
    free(d);
    free(f);
}

/* The _n functions against the scalar ones over src [n]; offsets: also from
 * offsets 3 and 6 and with 4 and 8 left off the end (tails, unaligned). */
static size_t arrays_agree(const float *f, const uint16_t *h, size_t n, float *fo, uint16_t *ho,
                           int offsets)
{
    size_t bad = 0;
    const size_t last = offsets ? 9 : 1;
    for (size_t off = 0; off < last && off < n; off += 3)
        for (size_t cut = 0; cut < last && cut + off < n; cut += 4) {
            const size_t m = n - off - cut;
            ds_half_f16_from_f32_n(ho, f + off, m);
            for (size_t i = 0; i < m; i++)
                bad += ho[i] != ds_half_f16_from_f32(f[off + i]);
            ds_half_bf16_from_f32_n(ho, f + off, m);
            for (size_t i = 0; i < m; i++)
                bad += ho[i] != ds_half_bf16_from_f32(f[off + i]);
            ds_half_f32_from_f16_n(fo, h + off, m);
            for (size_t i = 0; i < m; i++)
                bad += bits_f32(fo[i]) != bits_f32(ds_half_f32_from_f16(h[off + i]));
            ds_half_f32_from_bf16_n(fo, h + off, m);
            for (size_t i = 0; i < m; i++)
                bad += bits_f32(fo[i]) != bits_f32(ds_half_f32_from_bf16(h[off + i]));
        }
    return bad;
}

static void check_arrays(void)
{
    enum { N = 1 << 16, STRIDE = 61 };
    float *f = malloc(N * sizeof *f), *fo = malloc(N * sizeof *fo);
    uint16_t *h = malloc(N * sizeof *h), *ho = malloc(N * sizeof *ho);
    size_t bad = 0, tried = 0;
    /* float patterns 0, 61, 122, ... in chunks of N (every exponent, both signs,
     * NaNs with payloads, subnormals), each chunk beside every 16-bit pattern */
    for (uint64_t base = 0; base < (1ull << 32); base += (uint64_t)N * STRIDE) {
        for (uint32_t k = 0; k < N; k++) {
            const uint64_t x = base + (uint64_t)k * STRIDE;
            const uint32_t b = (uint32_t)x;
            memcpy(&f[k], &b, sizeof b);
            h[k] = (uint16_t)k;
        }
        bad += arrays_agree(f, h, N, fo, ho, base == 0);
        tried += N;
    }
    /* the edges: around 65520 (F16's overflow), F16's smallest subnormal and
     * normal, ties, infinities and NaNs of both signs */
    static const uint32_t edge[] = {0x477fefffu, 0x477ff000u, 0x477ff001u, 0x33000000u, 0x33000001u,
                                    0x32ffffffu, 0x38800000u, 0x387fffffu, 0x3f801000u, 0x3f803000u,
                                    0x7f800000u, 0xff800000u, 0x7fc00001u, 0xffbfffffu, 0x7f800001u,
                                    0x80000000u, 0x00000001u, 0x7f7fffffu, 0xff7fffffu, 0x3f808000u,
                                    0x3f818000u};
    const size_t ne = sizeof edge / sizeof *edge;
    for (size_t k = 0; k < ne; k++) {
        memcpy(&f[k], &edge[k], sizeof edge[k]);
        h[k] = (uint16_t)(0x7c01u + k * 0x1111u);
    }
    bad += arrays_agree(f, h, ne, fo, ho, 1);
    printf("arrays: %zu float patterns (every %dth) and the 16-bit ones: %zu differ from the scalar "
           "functions\n", tried, STRIDE, bad);
    T_CHECK(bad == 0, "the array conversions differ from the scalar ones in %zu places", bad);
    free(f);
    free(fo);
    free(h);
    free(ho);
}

int main(void)
{
    const fmt f16 = {"F16", f16_f64, ds_half_f16_from_f32, f16_value, 0x7bff};
    const fmt bf16 = {"BF16", bf16_f64, ds_half_bf16_from_f32, bf16_value, 0x7f7f};
    check_all_f16();
    check_all_bf16();
    check_edges();
    check_midpoints(&f16);
    check_midpoints(&bf16);
    check_convert();
    check_float_paths_agree();
    check_arrays();
    return t_finish("test_half");
}
