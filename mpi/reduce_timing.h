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
    /* BatchNorm's sums (sum_now) between begin and finish: backward's. NCCL
     * transport; 0 from the MPI one, whose sums never queue behind buckets. */
    int sums;
    double sum_ms;           /* their device time, on their own stream */
    int buckets_beside_sums; /* buckets whose allreduce was in flight while a sum ran */
} ds_reduce_timing;

#endif
