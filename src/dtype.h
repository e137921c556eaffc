/* dtype.h - element types of tensors. Counts are always elements. */
#ifndef DS_DTYPE_H
#define DS_DTYPE_H

#include <stddef.h>

typedef enum {
    DS_F32, DS_F64, DS_F16, DS_BF16,   /* floating point */
    DS_I32, DS_I64, DS_U8              /* indices, lengths, labels */
} ds_dtype;

size_t ds_dtype_size(ds_dtype t);
const char *ds_dtype_name(ds_dtype t);
/* The dtype named name (as ds_dtype_name prints it): 1, or 0 when none is. */
int ds_dtype_parse(const char *name, ds_dtype *out);

/* Address of element i of a buffer of type t (no dereference: works for
 * device pointers too). */
static inline void *ds_elem(void *base, ds_dtype t, size_t i)
{
    return (char *)base + i * ds_dtype_size(t);
}

#endif
