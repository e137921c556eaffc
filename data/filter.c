/* filter.c - which utterances of a feature file a model can train on; see
 * filter.h. */
#include "filter.h"

#include <stdlib.h>
#include <string.h>

#include "model.h"

int ds_filter_ctc_min_frames(const uint8_t *labels, int n)
{
    int need = n;
    for (int i = 1; i < n; i++)
        need += labels[i] == labels[i - 1];   /* a blank must separate repeats */
    return need;
}

ds_status ds_filter_dataset(const ds_dataset *d, const ds_model_cfg *cfg, double min_s,
                            double max_s, long **keep, long *n_keep, ds_filter_stats *st)
{
    memset(st, 0, sizeof *st);
    *n_keep = 0;
    *keep = malloc((size_t)(d->n ? d->n : 1) * sizeof **keep);
    if (!*keep)
        return DS_FAIL(DS_ERR_MEM, "%s: filter index of %ld utterances", d->path, d->n);
    const double stride = d->feat.window_stride_s;
    for (long i = 0; i < d->n; i++) {
        const double seconds = d->frames[i] * stride;
        if (seconds < min_s) {
            st->too_short++;
            continue;
        }
        if (max_s > 0 && seconds > max_s) {
            st->too_long++;
            continue;
        }
        const uint8_t *lab = d->labels + d->label_offset[i];
        if (ds_model_config_out_frames(cfg, d->frames[i]) <
            ds_filter_ctc_min_frames(lab, d->label_length[i])) {
            st->ctc_impossible++;
            continue;
        }
        (*keep)[(*n_keep)++] = i;
        st->max_frames = d->frames[i] > st->max_frames ? d->frames[i] : st->max_frames;
        st->max_labels = d->label_length[i] > st->max_labels ? d->label_length[i] : st->max_labels;
    }
    st->kept = *n_keep;
    return DS_OK;
}
