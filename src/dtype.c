/* dtype.c - sizes and names of element types. */
#include "dtype.h"

#include <string.h>

size_t ds_dtype_size(ds_dtype t)
{
    switch (t) {
    case DS_F32: case DS_I32: return 4;
    case DS_F64: case DS_I64: return 8;
    case DS_F16: case DS_BF16: return 2;
    case DS_U8: return 1;
    }
    return 0;
}

const char *ds_dtype_name(ds_dtype t)
{
    switch (t) {
    case DS_F32: return "float32";
    case DS_F64: return "float64";
    case DS_F16: return "float16";
    case DS_BF16: return "bfloat16";
    case DS_I32: return "int32";
    case DS_I64: return "int64";
    case DS_U8: return "uint8";
    }
    return "unknown";
}

int ds_dtype_parse(const char *name, ds_dtype *out)
{
    static const ds_dtype all[] = {DS_F32, DS_F64, DS_F16, DS_BF16, DS_I32, DS_I64, DS_U8};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (!strcmp(name, ds_dtype_name(all[i]))) {
            *out = all[i];
            return 1;
        }
    return 0;
}
