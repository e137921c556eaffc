/* half_numpy_check.c - replays the F16/BF16 conversions written by
 * tests/peer/half_cases.py (see there for the file layout and how numpy's
 * results were made) through half.h and ds_convert, bit for bit.
 *
 * usage: half_numpy_check CASES.h5
 *
 * For every group, both ds_convert on the whole array and the scalar
 * function of half.h must give exactly the expected bits, a NaN only
 * needing to be a NaN. The number of mismatches must equal the group's
 * `corrupted` attribute: 0 in the real file, 3 in the copy with planted
 * errors (half_vs_numpy_detects), which shows that a wrong bit fails this
 * check. The first few mismatches are printed. */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "convert.h"
#include "h5_io.h"
#include "half.h"
#include "testutil.h"

#define SHOW_FIRST 5

typedef struct {
    const char *name;
    ds_dtype in, out;
    size_t min_cases;   /* a 16-bit input: all 65536 patterns */
} conversion;

static const conversion CONVERSIONS[] = {
    {"f16_to_f32", DS_F16, DS_F32, 65536},  {"f32_to_f16", DS_F32, DS_F16, 100000},
    {"f64_to_f16", DS_F64, DS_F16, 100000}, {"bf16_to_f32", DS_BF16, DS_F32, 65536},
    {"f32_to_bf16", DS_F32, DS_BF16, 100000}, {"f64_to_bf16", DS_F64, DS_BF16, 100000},
};

/* Element i of p, of type t, as its bit pattern. */
static uint64_t bits_at(ds_dtype t, const void *p, size_t i)
{
    uint64_t b = 0;
    memcpy(&b, (const char *)p + i * ds_dtype_size(t), ds_dtype_size(t));   /* little endian */
    return b;
}

static int is_nan(ds_dtype t, uint64_t b)
{
    switch (t) {
    case DS_F16: return (b & 0x7fff) > 0x7c00;
    case DS_BF16: return (b & 0x7fff) > 0x7f80;
    case DS_F32: return (b & 0x7fffffff) > 0x7f800000;
    case DS_F64: return (b & 0x7fffffffffffffffull) > 0x7ff0000000000000ull;
    default: return 0;
    }
}

static int same(ds_dtype t, uint64_t a, uint64_t b)
{
    return a == b || (is_nan(t, a) && is_nan(t, b));
}

/* dst [n] = src [n] through the scalar functions of half.h. */
static void convert_scalar(const conversion *c, void *dst, const void *src, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const uint16_t *h = src;
        const float *f = src;
        const double *d = src;
        if (c->out == DS_F32)
            ((float *)dst)[i] = c->in == DS_F16 ? ds_half_f32_from_f16(h[i]) : ds_half_f32_from_bf16(h[i]);
        else if (c->out == DS_F16)
            ((uint16_t *)dst)[i] = c->in == DS_F32 ? ds_half_f16_from_f32(f[i]) : ds_half_f16_from_f64(d[i]);
        else
            ((uint16_t *)dst)[i] = c->in == DS_F32 ? ds_half_bf16_from_f32(f[i]) : ds_half_bf16_from_f64(d[i]);
    }
}

/* Dataset name of g, n elements stored as type t: 16-bit patterns are
 * stored as uint16 and read through int32 (exact). */
static ds_status read_typed(hid_t g, const char *name, ds_dtype t, size_t n, void **out)
{
    if (t != DS_F16 && t != DS_BF16)
        return ds_h5_read_new(g, name, t, n, out);
    int32_t *wide;
    DS_TRY(ds_h5_read_new(g, name, DS_I32, n, (void **)&wide));
    uint16_t *h = malloc(n * sizeof *h + 1);
    if (!h) {
        free(wide);
        return DS_FAIL(DS_ERR_MEM, "%s: %zu elements", name, n);
    }
    for (size_t i = 0; i < n; i++)
        h[i] = (uint16_t)wide[i];
    free(wide);
    *out = h;
    return DS_OK;
}

/* Mismatches between got and want; prints the first few. */
static size_t count_wrong(const conversion *c, const char *how, const void *in, const void *got,
                          const void *want, size_t n)
{
    size_t wrong = 0;
    const int in_w = (int)ds_dtype_size(c->in) * 2, out_w = (int)ds_dtype_size(c->out) * 2;
    for (size_t i = 0; i < n; i++) {
        uint64_t g = bits_at(c->out, got, i), w = bits_at(c->out, want, i);
        if (same(c->out, g, w))
            continue;
        if (wrong++ < SHOW_FIRST)
            printf("  %s %s [%zu]: input 0x%0*" PRIx64 " -> 0x%0*" PRIx64 ", expected 0x%0*" PRIx64 "\n",
                   c->name, how, i, in_w, bits_at(c->in, in, i), out_w, g, out_w, w);
    }
    return wrong;
}

/* One group: read, convert both ways, count. */
static ds_status check_group(hid_t f, const conversion *c)
{
    hid_t g = H5Gopen2(f, c->name, H5P_DEFAULT);
    if (g < 0)
        return DS_FAIL(DS_ERR_IO, "group %s is missing", c->name);
    int rank;
    hsize_t dims[DS_H5_MAX_RANK];
    int64_t planted = -1;
    void *in = NULL, *want = NULL, *conv = NULL, *scal = NULL;
    ds_status st = ds_h5_shape(g, "in", &rank, dims);
    const size_t n = st == DS_OK && rank == 1 ? (size_t)dims[0] : 0;
    if (st == DS_OK && n < c->min_cases)
        st = DS_FAIL(DS_ERR_IO, "%s: %zu cases, want at least %zu", c->name, n, c->min_cases);
    if (st != DS_OK)
        goto done;
    DS_TRY_GOTO(st, ds_h5_read_attr_i64(g, "corrupted", &planted), done);
    DS_TRY_GOTO(st, read_typed(g, "in", c->in, n, &in), done);
    DS_TRY_GOTO(st, read_typed(g, "out", c->out, n, &want), done);
    conv = malloc(n * ds_dtype_size(c->out));
    scal = malloc(n * ds_dtype_size(c->out));
    if (!conv || !scal) {
        st = DS_FAIL(DS_ERR_MEM, "%s: %zu results", c->name, n);
        goto done;
    }
    DS_TRY_GOTO(st, ds_convert(c->out, conv, c->in, in, n), done);
    convert_scalar(c, scal, in, n);
    size_t w_conv = count_wrong(c, "ds_convert", in, conv, want, n);
    size_t w_scal = count_wrong(c, "scalar", in, scal, want, n);
    printf("%-12s %8zu cases: %zu mismatches through ds_convert, %zu through the scalar "
           "function (%" PRId64 " planted)\n", c->name, n, w_conv, w_scal, planted);
    T_CHECK(w_conv == (size_t)planted && w_scal == (size_t)planted,
            "%s: %zu / %zu mismatches, %" PRId64 " expected", c->name, w_conv, w_scal, planted);
done:
    free(in);
    free(want);
    free(conv);
    free(scal);
    H5Gclose(g);
    return st;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s CASES.h5\n", argv[0]);
        return 2;
    }
    hid_t f;
    T_OK(ds_h5_open(argv[1], 0, &f));
    for (size_t i = 0; i < sizeof CONVERSIONS / sizeof CONVERSIONS[0]; i++) {
        ds_status st = check_group(f, &CONVERSIONS[i]);
        T_CHECK(st == DS_OK, "%s: %s", CONVERSIONS[i].name, ds_status_last_error());
        ds_status_clear_error();
    }
    ds_h5_close(f);
    return t_finish("half_numpy_check");
}
