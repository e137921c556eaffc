/* pt_pickle_write.h - the pickle torch.save writes for a state_dict. */
#ifndef DS_PT_PICKLE_WRITE_H
#define DS_PT_PICKLE_WRITE_H

#include <stddef.h>

#include "pt_dict.h"

/* Protocol 2, as torch.save's default: an OrderedDict of d's tensors in
 * order, each torch._utils._rebuild_tensor_v2 of storage record "i" (tensor
 * i's index) with persistent id ('storage', torch.<dtype>Storage, "i", 'cpu',
 * numel), offset 0, contiguous strides, requires_grad False. *out [*len]
 * malloc'd. */
ds_status ds_pt_pickle_state_dict(const ds_pt_dict *d, unsigned char **out, size_t *len);

#endif
