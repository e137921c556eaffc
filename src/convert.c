/* convert.c - host-side element type conversion; see convert.h.
 * Every element goes through double, which holds
 * each value of every supported type exactly, and is rounded once when it is
 * stored: to F16/BF16 by the direct double paths of half.h (never through
 * float, which could round twice). F32 <-> F16/BF16, the feature and
 * staging conversions, take half.h's float paths instead, which give the
 * same bits faster. */
#include "convert.h"

#include <stdint.h>
#include <string.h>

#include "half.h"

static int supported(ds_dtype t)
{
    switch (t) {
    case DS_F32: case DS_F64: case DS_F16: case DS_BF16: case DS_I32: return 1;
    case DS_I64: case DS_U8: return 0;
    }
    return 0;
}

static double load(ds_dtype t, const void *p, size_t i)
{
    switch (t) {
    case DS_F32: return ((const float *)p)[i];
    case DS_F64: return ((const double *)p)[i];
    case DS_F16: return ds_half_f32_from_f16(((const uint16_t *)p)[i]);
    case DS_BF16: return ds_half_f32_from_bf16(((const uint16_t *)p)[i]);
    case DS_I32: return ((const int32_t *)p)[i];
    case DS_I64: case DS_U8: break;   /* refused by ds_convert */
    }
    return 0;
}

static void store(ds_dtype t, void *p, size_t i, double v)
{
    switch (t) {
    case DS_F32: ((float *)p)[i] = (float)v; break;
    case DS_F64: ((double *)p)[i] = v; break;
    case DS_F16: ((uint16_t *)p)[i] = ds_half_f16_from_f64(v); break;
    case DS_BF16: ((uint16_t *)p)[i] = ds_half_bf16_from_f64(v); break;
    case DS_I32: ((int32_t *)p)[i] = (int32_t)v; break;
    case DS_I64: case DS_U8: break;   /* refused by ds_convert */
    }
}

/* The float <-> F16/BF16 pairs as whole arrays; 0 when (dt, st) is not one. */
static int convert_f32_pair(ds_dtype dt, void *dst, ds_dtype st, const void *src, size_t n)
{
    if (st == DS_F32 && dt == DS_F16)
        ds_half_f16_from_f32_n(dst, src, n);
    else if (st == DS_F32 && dt == DS_BF16)
        ds_half_bf16_from_f32_n(dst, src, n);
    else if (st == DS_F16 && dt == DS_F32)
        ds_half_f32_from_f16_n(dst, src, n);
    else if (st == DS_BF16 && dt == DS_F32)
        ds_half_f32_from_bf16_n(dst, src, n);
    else
        return 0;
    return 1;
}

ds_status ds_convert(ds_dtype dt, void *dst, ds_dtype st, const void *src, size_t n)
{
    if (!supported(dt) || !supported(st))
        return DS_FAIL(DS_ERR_UNSUPPORTED, "conversion %s -> %s", ds_dtype_name(st),
                       ds_dtype_name(dt));
    if (dt == st) {
        memmove(dst, src, n * ds_dtype_size(dt));
        return DS_OK;
    }
    if (convert_f32_pair(dt, dst, st, src, n))
        return DS_OK;
    for (size_t i = 0; i < n; i++)
        store(dt, dst, i, load(st, src, i));
    return DS_OK;
}
