/* range_log.c - the bookkeeping of timed ranges every backend shares; see
 * range_log.h. */
#include "range_log.h"

#include <stdio.h>
#include <stdlib.h>

ds_status ds_range_log_init(ds_range_log *l, int cap)
{
    *l = (ds_range_log){0};
    l->slot = calloc((size_t)cap, sizeof *l->slot);
    if (!l->slot)
        return DS_FAIL(DS_ERR_MEM, "range timing: %d slots", cap);
    l->cap = cap;
    return DS_OK;
}

void ds_range_log_free(ds_range_log *l)
{
    free(l->slot);
    *l = (ds_range_log){0};
}

int ds_range_log_on(const ds_range_log *l) { return l->cap > 0; }

int ds_range_log_push(ds_range_log *l, const char *name)
{
    int k = -1;
    if (l->used < l->cap && l->depth < DS_RANGE_DEPTH) {
        k = l->used++;
        snprintf(l->slot[k].name, sizeof l->slot[k].name, "%s", name);
        l->slot[k].depth = l->depth;
    } else {
        l->lost++;
    }
    if (l->depth < DS_RANGE_DEPTH)
        l->open[l->depth] = k;
    l->depth++;
    return k;
}

int ds_range_log_pop(ds_range_log *l)
{
    if (l->depth == 0)
        return -1;
    l->depth--;
    return l->depth < DS_RANGE_DEPTH ? l->open[l->depth] : -1;
}

void ds_range_log_take(ds_range_log *l, ds_range_time *out, int max, int *n, int *lost)
{
    const double t0 = l->used ? l->slot[0].start_ms : 0;
    *n = 0;
    for (int k = 0; k < l->used && *n < max; k++) {
        out[*n] = l->slot[k];
        out[*n].start_ms -= t0;
        out[*n].end_ms -= t0;
        ++*n;
    }
    *lost = l->lost + (l->used - *n);
    for (int d = 0; d < l->depth && d < DS_RANGE_DEPTH; d++)
        l->open[d] = -1;
    l->used = l->lost = 0;
}
