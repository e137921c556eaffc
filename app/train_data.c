/* train_data.c - a run's data: synthetic batches (every rank draws the same
 * global batch and takes its share) or HDF5 feature files through the
 * sampler and the prefetching loader. It owns the run's run_data and
 * reads no other part of the run but its position (where an epoch begins). */
#include <stdlib.h>
#include <string.h>

#include "file_input.h"
#include "synthetic.h"
#include "train_run.h"

/* Opens a feature file for the model and keeps what it can train on. */
static ds_status open_split(const ds_train_opts *o, const char *path, ds_dataset **d, long **keep,
                            long *n, ds_filter_stats *fs)
{
    DS_TRY(ds_file_require_regular(path, path == o->train_path ? "training features (--train)"
                                                               : "validation features (--val)"));
    DS_TRY(ds_dataset_open(path, d));
    DS_TRY(ds_dataset_fingerprint_features(*d));   /* its content too, not its lengths alone */
    if ((*d)->version < 2)
        ds_log_print("warning: %s: a version 1 feature file: its settings (type, rate, window, stride) "
                 "carry no checksum and are taken as they are; prep it again to seal them\n",
                 path);
    if ((*d)->n_features != o->model.n_features)
        return DS_FAIL(DS_ERR_ARG, "%s: %d features per frame, model %s expects %d", path,
                       (*d)->n_features, o->model.name, o->model.n_features);
    DS_TRY(ds_filter_dataset(*d, &o->model, o->min_duration, o->max_duration, keep, n, fs));
    ds_log_print("%s: %ld of %ld utterances kept (dropped: %ld too short for CTC, %ld outside the "
             "duration limits)\n",
             path, fs->kept, (*d)->n, fs->ctc_impossible, fs->too_short + fs->too_long);
    if (*n == 0)
        return DS_FAIL(DS_ERR_ARG, "%s: no utterance left to use", path);
    return DS_OK;
}

int ds_train_round_frames(const ds_train_opts *o)
{
    return o->bucket_frames > 0 ? o->bucket_frames * ds_config_time_stride(&o->model) : 0;
}

ds_status ds_train_round_batch(const ds_train_opts *o, ds_batch *b)
{
    return ds_batch_pad_to(b, ds_batch_round_frames(b->t, ds_train_round_frames(o)));
}

ds_status ds_train_data_open(run_data *d, const ds_train_opts *o, int rank, int ranks,
                             ds_model_limits *lim)
{
    d->o = o;
    d->rank = rank;
    d->ranks = ranks;
    const int round = ds_train_round_frames(o);
    if (!o->train_path) {
        d->feat = ds_feature_defaults();
        lim->frames = ds_batch_round_frames(o->max_frames, round);
        lim->label_len = ds_synthetic_max_labels(&o->model, o->max_frames);
        ds_rng_seed(&d->rng, o->seed ^ 0xda7aULL);
        const int global = o->batch * d->ranks;
        d->per_epoch = (o->synthetic_utts + global - 1) / global;
        DS_TRY(ds_batch_alloc(&d->synth_global, global, lim->frames, o->model.n_features,
                              global * lim->label_len));
        DS_TRY(ds_batch_alloc(&d->synth, o->batch, lim->frames, o->model.n_features,
                              o->batch * lim->label_len));
        return ds_batch_alloc_global(&d->synth, global);
    }
    DS_TRY(open_split(o, o->train_path, &d->train, &d->keep, &d->n_keep, &d->fs));
    d->feat = d->train->feat;
    lim->frames = ds_batch_round_frames(d->fs.max_frames, round);
    lim->label_len = d->fs.max_labels;
    if (o->val_path) {
        ds_filter_stats vs;
        DS_TRY(open_split(o, o->val_path, &d->val, &d->val_keep, &d->n_val, &vs));
        DS_TRY(ds_feature_check_same(o->train_path, &d->train->feat, o->val_path, &d->val->feat));
        lim->frames = vs.max_frames > lim->frames ? vs.max_frames : lim->frames;   /* eval: unrounded */
        lim->label_len = vs.max_labels > lim->label_len ? vs.max_labels : lim->label_len;
    }
    int *frames = malloc((size_t)d->n_keep * sizeof *frames);
    if (!frames)
        return DS_FAIL(DS_ERR_MEM, "sampler index");
    for (long i = 0; i < d->n_keep; i++)
        frames[i] = d->train->frames[d->keep[i]];
    ds_status st = ds_sampler_create(d->keep, frames, d->n_keep, o->batch, d->ranks, o->seed,
                                     &d->sampler);
    free(frames);
    DS_TRY(st);
    d->per_epoch = ds_sampler_steps(d->sampler);
    if (d->per_epoch == 0)   /* every epoch would be empty: --steps would never be reached */
        return DS_FAIL(DS_ERR_ARG, "%s: %ld utterances kept, too few for one step of %d ranks x "
                       "batch %d (every rank needs one): lower --batch or the ranks",
                       o->train_path, d->n_keep, d->ranks, o->batch);
    return DS_OK;
}

ds_status ds_train_data_epoch_begin(run_data *d, const run_position *pos, int epoch)
{
    const ds_train_opts *o = d->o;
    /* a resumed run's first epoch goes on where its checkpoint was made */
    const long first = epoch == pos->start_epoch ? pos->start_batch : 0;
    d->batch_pos = first;
    if (!d->train) {
        d->synth_left = d->per_epoch - first;
        return DS_OK;
    }
    /* the files are still the ones opened: not truncated, rewritten or replaced */
    DS_TRY(ds_dataset_check_unchanged(d->train));
    if (d->val)
        DS_TRY(ds_dataset_check_unchanged(d->val));
    ds_loader_cfg lc = {.data = d->train, .sampler = d->sampler, .rank = d->rank, .epoch = epoch,
                        .batch = o->batch,
                        .max_frames = d->fs.max_frames, .max_labels = d->fs.max_labels,
                        .round_frames = ds_train_round_frames(o),
                        .norm = o->norm, .aug = o->aug, .seed = o->seed,
                        .depth = o->prefetch, .threads = o->loader_threads,
                        .first_batch = first, .timeout_s = o->world ? o->world->timeout_s : 0};
    return ds_loader_start(&lc, &d->loader);
}

ds_status ds_train_data_next_batch(run_data *d, const ds_batch **b)
{
    if (d->train) {
        DS_TRY(ds_loader_next(d->loader, b));
        if (*b)
            d->batch_pos = ds_loader_batch_index(d->loader) + 1;
        return DS_OK;
    }
    *b = NULL;
    if (d->synth_left <= 0)
        return DS_OK;
    d->synth_left--;
    d->batch_pos++;
    const int B = d->o->batch;
    DS_TRY(ds_synthetic_batch(&d->rng, &d->o->model, B * d->ranks, d->o->max_frames,
                              &d->synth_global));
    if (d->ranks == 1) {
        *b = &d->synth_global;
        return ds_train_round_batch(d->o, &d->synth_global);
    }
    DS_TRY(ds_batch_slice(&d->synth_global, d->rank * B, B, &d->synth));
    DS_TRY(ds_train_round_batch(d->o, &d->synth));
    d->synth.n_global = d->synth_global.n;   /* the whole global batch, for BatchNorm and the loss */
    memcpy(d->synth.global_lengths, d->synth_global.lengths, (size_t)d->synth_global.n * sizeof(int));
    *b = &d->synth;
    return DS_OK;
}

int ds_train_data_epoch_exhausted(const run_data *d, int epoch)
{
    if (!d->train)
        return d->synth_left <= 0;
    for (long k = d->batch_pos; k < ds_sampler_batches(d->sampler); k++)
        if (ds_sampler_whole(d->sampler, epoch, k) != 0)
            return 0;
    return 1;
}

void ds_train_data_close(run_data *d)
{
    if (d->loader)
        ds_loader_stop(d->loader);
    d->loader = NULL;
    if (d->sampler)
        ds_sampler_destroy(d->sampler);
    free(d->keep);
    free(d->val_keep);
    if (d->train)
        ds_dataset_close(d->train);
    if (d->val)
        ds_dataset_close(d->val);
    ds_batch_free(&d->synth);
    ds_batch_free(&d->synth_global);
}
