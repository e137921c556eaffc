/* progress.h - dstrain train's progress bar on rank 0's terminal: epoch,
 * a bar, the step, the loss and throughput (running means) and the time
 * left, redrawn in place. Off, the console has only the --print-every
 * lines; those print over the bar when it is on (log.h: ds_log_print_bar). */
#ifndef DS_PROGRESS_H
#define DS_PROGRESS_H

#include "log.h"

typedef struct {
    int on;
    long first_step;    /* the step this process began at (a resume's checkpoint) */
    double t_start;     /* monotonic seconds at the start */
    double t_first;     /* ... and when the first step was read */
    double last_draw;
    double loss, utt_s; /* running means (the raw ones jump with the batch's length) */
} ds_progress;

void ds_progress_start(ds_progress *p, int on, long first_step);
/* After step s->step of total (per_epoch a epoch; 0: unknown): redraws the
 * bar at most 5 times a second, and always on the last step. The time left
 * is this run's wall time per step so far (validation and checkpoints
 * included) times the steps left. */
void ds_progress_step(ds_progress *p, const ds_step_metrics *s, long total, long per_epoch);

#endif
