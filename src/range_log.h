/* range_log.h - the bookkeeping of timed ranges (--profile layers) that
 * every backend shares: a pool of slots sized once, each one range's name
 * and depth, and the stack of ranges open now. A backend keeps its own
 * timestamps per slot (the CPU's clock readings, the GPU's event pairs) and
 * fills start_ms/end_ms before the slots are taken. */
#ifndef DS_RANGE_LOG_H
#define DS_RANGE_LOG_H

#include "backend.h"

#define DS_RANGE_DEPTH 16   /* ranges open at once, at most */

typedef struct {
    ds_range_time *slot;       /* [cap] */
    int cap, used, lost;
    int open[DS_RANGE_DEPTH];  /* slot of each open range; -1: not timed */
    int depth;                 /* ranges open now */
} ds_range_log;

/* cap > 0 slots; the log must be zeroed or freed before. */
ds_status ds_range_log_init(ds_range_log *l, int cap);
void ds_range_log_free(ds_range_log *l);
int ds_range_log_on(const ds_range_log *l);
/* The slot of the range opening now, or -1 when it is not timed (the pool
 * is full: counted as lost; or ranges nest past DS_RANGE_DEPTH). */
int ds_range_log_push(ds_range_log *l, const char *name);
/* The slot of the range closing now, or -1 when it was not timed. */
int ds_range_log_pop(ds_range_log *l);
/* Copies the slots used so far into out [max] with times made relative to
 * the first range's start, and frees them; ranges still open stay open but
 * lose their slot (untimed). */
void ds_range_log_take(ds_range_log *l, ds_range_time *out, int max, int *n, int *lost);

#endif
