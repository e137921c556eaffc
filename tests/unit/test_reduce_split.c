/* test_reduce_split.c - the split rule of the CUDA backend's deterministic
 * two-pass reductions (cuda/reduce_split.c), on the host: no GPU needed.
 *
 * Over a sweep of shapes, devices and capacities: every element of a group
 * lies in exactly one block's slice and no slice is empty; a split's
 * partials fit the buffer; a split's slice length is at least the minimum
 * (only a group's last slice may be shorter); the same inputs give the same
 * split whatever was asked before.
 * Then the shapes the kernels meet: 32 channels of 1M positions fill an
 * H100's 132 SMs (conv bias, BatchNorm), tiny data keeps one block per
 * group, wide sequence BatchNorm (200 tiles) stays in one pass, the
 * 29-output dense layer's bias gradient gets as many blocks as the partials
 * allow. */
#include <stdio.h>
#include <stdlib.h>

#include "reduce_split.h"
#include "testutil.h"

/* The properties every split must have; slices counted element by element
 * when the group is small enough. */
static void check_split(long groups, long elems, int sms, long cap, long slots, long min)
{
    const ds_reduce_split r = ds_reduce_split_of(groups, elems, sms, cap, slots, min);
    char what[160];
    snprintf(what, sizeof what, "groups %ld elems %ld sms %d cap %ld slots %ld min %ld -> split %ld per %ld",
             groups, elems, sms, cap, slots, min, r.split, r.per);
    T_CHECK(r.split >= 1, "%s: no block", what);
    if (r.split == 1) {
        T_CHECK(r.per == (elems > 0 ? elems : 0), "%s: one block must take the whole group", what);
        return;
    }
    T_CHECK(groups > 0 && elems > 0, "%s: split of nothing", what);
    T_CHECK(r.split * groups * slots <= cap, "%s: partials overflow the buffer", what);
    T_CHECK(r.per >= min, "%s: a block below the minimum", what);
    T_CHECK(r.per * r.split >= elems, "%s: elements left over", what);
    T_CHECK((r.split - 1) * r.per < elems, "%s: an empty slice", what);
    const long aim = ((long)(sms > 0 ? sms : 1) * DS_REDUCE_BLOCKS_PER_SM + groups - 1) / groups;
    T_CHECK(r.split <= aim, "%s: more blocks than the device needs (%ld a group)", what, aim);
    if (elems <= 20000) {
        unsigned char *hit = calloc((size_t)elems, 1);
        for (long s = 0; s < r.split; s++) {
            const long b = s * r.per, e = b + r.per < elems ? b + r.per : elems;
            for (long j = b; j < e; j++)
                hit[j]++;
        }
        long bad = 0;
        for (long j = 0; j < elems; j++)
            bad += hit[j] != 1;
        T_CHECK(bad == 0, "%s: %ld elements not in exactly one slice", what, bad);
        free(hit);
    }
}

int main(void)
{
    static const long groups[] = {0, 1, 2, 4, 29, 32, 100, 200, 1024, 5000};
    static const long elems[] = {0, 1, 2, 7, 100, 4095, 4096, 4097, 8193, 19999, 65536,
                                 1000003, 1L << 40};
    static const int sms[] = {0, 1, 108, 132};
    static const long caps[] = {0, 1, 64, 1024, 8192};
    static const long slots[] = {1, 2, 16, 29, 32};
    static const long mins[] = {0, 1, 128, 512, 4096};
    for (size_t a = 0; a < sizeof groups / sizeof *groups; a++)
        for (size_t b = 0; b < sizeof elems / sizeof *elems; b++)
            for (size_t c = 0; c < sizeof sms / sizeof *sms; c++)
                for (size_t d = 0; d < sizeof caps / sizeof *caps; d++)
                    for (size_t e = 0; e < sizeof slots / sizeof *slots; e++)
                        for (size_t f = 0; f < sizeof mins / sizeof *mins; f++)
                            check_split(groups[a], elems[b], sms[c], caps[d], slots[e], mins[f]);

    /* 32 channels x 1M positions on an H100: the device is filled, within
     * the buffer (conv bias: one partial a block; BatchNorm: two) */
    ds_reduce_split r = ds_reduce_split_of(32, 1L << 20, 132, 1024, 1, 4096);
    T_CHECK(32 * r.split >= 132, "conv bias 32 x 1M: %ld blocks", 32 * r.split);
    r = ds_reduce_split_of(32, 1L << 20, 132, 1024, 2, 4096);
    T_CHECK(32 * r.split >= 132 && 32 * r.split * 2 <= 1024, "BatchNorm 32 x 1M: %ld blocks",
            32 * r.split);
    printf("32 channels x 1M positions, 132 SMs: split %ld, %ld blocks of %ld positions\n",
           r.split, 32 * r.split, r.per);

    /* tiny data: one block per group */
    r = ds_reduce_split_of(32, 100, 132, 1024, 2, 4096);
    T_CHECK(r.split == 1 && r.per == 100, "32 x 100: split %ld per %ld", r.split, r.per);
    r = ds_reduce_split_of(32, 8191, 132, 1024, 1, 4096);
    T_CHECK(r.split == 1, "32 x 8191 (under two blocks' minimum): split %ld", r.split);
    r = ds_reduce_split_of(32, 8192, 132, 1024, 1, 4096);
    T_CHECK(r.split == 2 && r.per == 4096, "32 x 8192: split %ld per %ld", r.split, r.per);

    /* sequence BatchNorm over 1600 channels: 200 tiles of 8, 16 partials a
     * block cannot fit twice, so one pass (200 blocks already) */
    r = ds_reduce_split_of(200, 1L << 20, 132, 1024, 16, 512);
    T_CHECK(r.split == 1, "200 tiles: split %ld", r.split);

    /* the 29-character output layer, 16000 rows: 1024 / 29 = 35 blocks */
    r = ds_reduce_split_of(1, 16000, 132, 1024, 29, 128);
    T_CHECK(r.split == 35 && r.per * 35 >= 16000, "dense bias 29 x 16000: split %ld per %ld",
            r.split, r.per);
    printf("dense bias, 29 outputs x 16000 rows: split %ld, %ld rows a block\n", r.split, r.per);

    /* the device's SM count sets the split: ds2's 32 BatchNorm channels of 3M
     * positions, two partials a block: an A100 (108 SMs) takes
     * ceil(4 * 108 / 32) = 14 blocks a channel; an H100 (132) would take 17,
     * which the 1024 partials cap at 1024 / 2 / 32 = 16 */
    const ds_reduce_split a100 = ds_reduce_split_of(32, 3000000, 108, 1024, 2, 4096);
    const ds_reduce_split h100 = ds_reduce_split_of(32, 3000000, 132, 1024, 2, 4096);
    T_CHECK(a100.split == 14 && h100.split == 16, "ds2 BatchNorm split: A100 %ld (want 14), "
            "H100 %ld (want 16)", a100.split, h100.split);
    return t_finish("test_reduce_split");
}
