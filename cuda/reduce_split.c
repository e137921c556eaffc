/* reduce_split.c - how the CUDA reductions split each group's elements over
 * blocks; see reduce_split.h. */
#include "reduce_split.h"

ds_reduce_split ds_reduce_split_of(long groups, long elems, int sms, long capacity, long slots,
                                   long min_per_block)
{
    ds_reduce_split r = {1, elems > 0 ? elems : 0};
    if (groups <= 0 || elems <= 0)
        return r;
    if (sms < 1)
        sms = 1;
    if (slots < 1)
        slots = 1;
    if (min_per_block < 1)
        min_per_block = 1;
    /* blocks to fill the device, spread over the groups */
    long split = ((long)sms * DS_REDUCE_BLOCKS_PER_SM + groups - 1) / groups;
    /* no block below min_per_block elements (floor: every slice but the
     * last then has at least that many) */
    const long useful = elems / min_per_block;
    if (split > useful)
        split = useful;
    /* every block's partials fit (divided, so the product cannot overflow) */
    const long fit = capacity / slots / groups;
    if (split > fit)
        split = fit;
    if (split <= 1)
        return r;
    r.per = (elems + split - 1) / split;
    r.split = (elems + r.per - 1) / r.per;   /* drop a trailing empty slice */
    if (r.split == 1)
        r.per = elems;
    return r;
}
