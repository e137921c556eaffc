/* convert.h - host-side element type conversion (staging buffers). */
#ifndef DS_CONVERT_H
#define DS_CONVERT_H

#include <stddef.h>

#include "dtype.h"
#include "status.h"

/* dst [n] of type dt = src [n] of type st, for F32, F64, F16, BF16 and I32.
 * Floating-point results are rounded once to nearest even (see half.h);
 * to I32 truncates, as a C cast does. dst and src must not overlap unless
 * dt == st. */
ds_status ds_convert(ds_dtype dt, void *dst, ds_dtype st, const void *src, size_t n);

#endif
