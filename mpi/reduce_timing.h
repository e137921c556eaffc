/* reduce_timing.h - where one step's gradient reduction spent its time. */
#ifndef DS_REDUCE_TIMING_H
#define DS_REDUCE_TIMING_H

typedef struct {
    int buckets;
    double backward_ms;      /* from the step's begin to the call of finish */
    double reduce_ms;        /* time the buckets spent being summed */
    double hidden_ms;        /* of which before backward ended */
    double wait_ms;          /* main thread blocked in finish */
    int started_early;       /* buckets started before backward ended */
} ds_reduce_timing;

#endif
