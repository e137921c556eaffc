/* reduce_split.h - how the CUDA backend's deterministic two-pass reductions
 * split each group's elements over blocks: plain C and no CUDA, so the rule
 * is tested on any machine (tests/unit/test_reduce_split.c).
 *
 * A reduction of groups independent sums (a channel, a tile of channels, a
 * tile of columns) over elems elements each launches groups * split blocks;
 * block b = g * split + s sums elements [s * per, min((s + 1) * per, elems))
 * of group g. With split > 1 each block writes slots doubles of partial sums
 * (ds_ctx.partials, DS_CUDA_PARTIALS of them) and a second pass adds a
 * group's split partials in a fixed order; with split == 1 the one block
 * finishes the group itself and writes no partials. The split depends only
 * on its arguments (the shape and the device), so the order of every sum,
 * and so its bits, are the same run to run. */
#ifndef DS_REDUCE_SPLIT_H
#define DS_REDUCE_SPLIT_H

#ifdef __cplusplus
extern "C" {
#endif

/* Blocks per multiprocessor a split aims at across all groups: enough for
 * the loads in flight to cover memory latency. */
#define DS_REDUCE_BLOCKS_PER_SM 4

typedef struct {
    long split;   /* blocks per group, >= 1 */
    long per;     /* elements of a group per block (0 when elems <= 0) */
} ds_reduce_split;

/* The split of groups sums of elems elements each on a device of sms
 * multiprocessors, a block writing slots partials into a buffer of capacity
 * doubles, per >= min_per_block unless the group has fewer elements (so
 * every slice but a group's last has at least min_per_block; the last may
 * have fewer). The result has split == 1 or split * groups * slots <=
 * capacity; per * split >= elems and no block's slice is empty (split == 1:
 * per == elems); about DS_REDUCE_BLOCKS_PER_SM * sms blocks in all when the
 * data and the capacity allow. */
ds_reduce_split ds_reduce_split_of(long groups, long elems, int sms, long capacity, long slots,
                                   long min_per_block);

#ifdef __cplusplus
}
#endif

#endif
