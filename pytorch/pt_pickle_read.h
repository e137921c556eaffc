/* pt_pickle_read.h - the state_dict in a torch.save pickle, read by a small
 * pickle machine that builds plain values only (no code runs): None, bools,
 * ints, floats, strings, bytes, tuples, lists, dicts, and tensors made by
 * torch._utils._rebuild_tensor_v2 (or _rebuild_parameter) over persistent
 * ids ('storage', torch.<T>Storage, key, location, numel). Protocols 2 to 4
 * with their memo opcodes. Any other object, opcode or a malformed stream is
 * refused with a message saying what was found and where. */
#ifndef DS_PT_PICKLE_READ_H
#define DS_PT_PICKLE_READ_H

#include <stddef.h>
#include <stdint.h>

#include "pt_dict.h"

/* A tensor as the pickle describes it: a view of a storage record. */
typedef struct {
    char *key;                               /* its state_dict key (owned) */
    char *storage;                           /* the storage's record under data/ (owned) */
    ds_dtype dt;                             /* the storage class's */
    int64_t storage_numel;                   /* elements of the storage */
    int64_t offset;                          /* element of the storage at index 0 */
    int rank;
    int64_t dims[DS_PT_MAX_RANK], strides[DS_PT_MAX_RANK];   /* in elements */
} ds_pt_tensor_ref;

typedef struct {
    ds_pt_tensor_ref *t;                     /* [n] in state_dict order */
    int n;
    int wrapped;                             /* 1: it was the "state_dict" entry of a dict */
} ds_pt_refs;

/* The state_dict of the pickle p [n]: the top-level dict when its values
 * are tensors, or the "state_dict" entry of a top-level dict (a PyTorch
 * Lightning checkpoint whose other entries are plain values). file names
 * the source in messages. */
ds_status ds_pt_unpickle_state_dict(const char *file, const unsigned char *p, size_t n,
                                    ds_pt_refs *out);
void ds_pt_refs_free(ds_pt_refs *r);

#endif
