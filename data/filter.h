/* filter.h - which utterances of a feature file a model can train on. */
#ifndef DS_FILTER_H
#define DS_FILTER_H

#include "config.h"
#include "dataset.h"

typedef struct {
    long kept;
    long ctc_impossible;   /* fewer output frames than labels + adjacent repeats */
    long too_short, too_long;   /* outside --min-duration / --max-duration */
    int max_frames, max_labels; /* of the kept utterances */
} ds_filter_stats;

/* Minimum output frames CTC needs for labels [n]: n plus adjacent repeats. */
int ds_filter_ctc_min_frames(const uint8_t *labels, int n);

/* Indices of d's utterances that last between min_s and max_s seconds
 * (max_s <= 0: no limit) and whose frames after cfg's conv stack can carry
 * their labels: malloc'd *keep [*n_keep]. */
ds_status ds_filter_dataset(const ds_dataset *d, const ds_model_cfg *cfg, double min_s,
                            double max_s, long **keep, long *n_keep, ds_filter_stats *st);

#endif
