/* train_data.c - a run's data: synthetic batches (every rank draws the same
 * global batch and takes its share) or HDF5 feature files through the
 * sampler and the prefetching loader. */
#include <stdlib.h>
#include <string.h>

#include "synthetic.h"
#include "train_run.h"

/* Opens a feature file for the model and keeps what it can train on. */
static ds_status open_split(run_state *r, const char *path, ds_dataset **d, long **keep, long *n,
                            ds_filter_stats *fs)
{
    const ds_train_opts *o = r->o;
    DS_TRY(ds_dataset_open(path, d));
    if ((*d)->version < 2)
        ds_print("warning: %s: a version 1 feature file: its settings (type, rate, window, stride) "
                 "carry no checksum and are taken as they are; prep it again to seal them\n",
                 path);
    if ((*d)->n_features != o->model.n_features)
        return DS_FAIL(DS_ERR_ARG, "%s: %d features per frame, model %s expects %d", path,
                       (*d)->n_features, o->model.name, o->model.n_features);
    DS_TRY(ds_filter_dataset(*d, &o->model, o->min_duration, o->max_duration, keep, n, fs));
    ds_print("%s: %ld of %ld utterances kept (dropped: %ld too short for CTC, %ld outside the "
             "duration limits)\n",
             path, fs->kept, (*d)->n, fs->ctc_impossible, fs->too_short + fs->too_long);
    if (*n == 0)
        return DS_FAIL(DS_ERR_ARG, "%s: no utterance left to use", path);
    return DS_OK;
}

ds_status ds_train_data_open(run_state *r, ds_model_limits *lim)
{
    const ds_train_opts *o = r->o;
    if (!o->train_path) {
        r->feat = ds_feature_defaults();
        lim->frames = o->max_frames;
        lim->label_len = ds_synthetic_max_labels(&o->model, o->max_frames);
        ds_rng_seed(&r->rng, o->seed ^ 0xda7aULL);
        const int global = o->batch * r->ranks;
        r->per_epoch = (o->synthetic_utts + global - 1) / global;
        DS_TRY(ds_batch_alloc(&r->synth_global, global, o->max_frames, o->model.n_features,
                              global * lim->label_len));
        DS_TRY(ds_batch_alloc(&r->synth, o->batch, o->max_frames, o->model.n_features,
                              o->batch * lim->label_len));
        return ds_batch_alloc_global(&r->synth, global);
    }
    DS_TRY(open_split(r, o->train_path, &r->train, &r->keep, &r->n_keep, &r->fs));
    r->feat = r->train->feat;
    lim->frames = r->fs.max_frames;
    lim->label_len = r->fs.max_labels;
    if (o->val_path) {
        ds_filter_stats vs;
        DS_TRY(open_split(r, o->val_path, &r->val, &r->val_keep, &r->n_val, &vs));
        DS_TRY(ds_feature_check_same(o->train_path, &r->train->feat, o->val_path, &r->val->feat));
        lim->frames = vs.max_frames > lim->frames ? vs.max_frames : lim->frames;
        lim->label_len = vs.max_labels > lim->label_len ? vs.max_labels : lim->label_len;
    }
    int *frames = malloc((size_t)r->n_keep * sizeof *frames);
    if (!frames)
        return DS_FAIL(DS_ERR_MEM, "sampler index");
    for (long i = 0; i < r->n_keep; i++)
        frames[i] = r->train->frames[r->keep[i]];
    ds_status st = ds_sampler_create(r->keep, frames, r->n_keep, o->batch, r->ranks, o->seed,
                                     &r->sampler);
    free(frames);
    DS_TRY(st);
    r->per_epoch = ds_sampler_steps(r->sampler);
    if (r->per_epoch == 0)   /* every epoch would be empty: --steps would never be reached */
        return DS_FAIL(DS_ERR_ARG, "%s: %ld utterances kept, too few for one step of %d ranks x "
                       "batch %d (every rank needs one): lower --batch or the ranks",
                       o->train_path, r->n_keep, r->ranks, o->batch);
    return DS_OK;
}

ds_status ds_train_data_epoch_begin(run_state *r, int epoch)
{
    const ds_train_opts *o = r->o;
    /* a resumed run's first epoch goes on where its checkpoint was made */
    const long first = epoch == r->start_epoch ? r->start_batch : 0;
    r->batch_pos = first;
    if (!r->train) {
        r->synth_left = r->per_epoch - first;
        return DS_OK;
    }
    ds_loader_cfg lc = {.data = r->train, .sampler = r->sampler, .rank = r->rank, .epoch = epoch,
                        .batch = o->batch,
                        .max_frames = r->fs.max_frames, .max_labels = r->fs.max_labels,
                        .norm = o->norm, .aug = o->aug, .seed = o->seed,
                        .depth = o->prefetch, .threads = o->loader_threads,
                        .first_batch = first, .timeout_s = o->world ? o->world->timeout_s : 0};
    return ds_loader_start(&lc, &r->loader);
}

ds_status ds_train_data_next_batch(run_state *r, const ds_batch **b)
{
    if (r->train) {
        DS_TRY(ds_loader_next(r->loader, b));
        if (*b)
            r->batch_pos = ds_loader_batch_index(r->loader) + 1;
        return DS_OK;
    }
    *b = NULL;
    if (r->synth_left <= 0)
        return DS_OK;
    r->synth_left--;
    r->batch_pos++;
    const int B = r->o->batch;
    DS_TRY(ds_synthetic_batch(&r->rng, &r->o->model, B * r->ranks, r->o->max_frames, &r->synth_global));
    if (r->ranks == 1) {
        *b = &r->synth_global;
        return DS_OK;
    }
    DS_TRY(ds_batch_slice(&r->synth_global, r->rank * B, B, &r->synth));
    r->synth.n_global = r->synth_global.n;   /* the whole global batch, for BatchNorm and the loss */
    memcpy(r->synth.global_lengths, r->synth_global.lengths, (size_t)r->synth_global.n * sizeof(int));
    *b = &r->synth;
    return DS_OK;
}

int ds_train_data_epoch_exhausted(const run_state *r, int epoch)
{
    if (!r->train)
        return r->synth_left <= 0;
    for (long k = r->batch_pos; k < ds_sampler_batches(r->sampler); k++)
        if (ds_sampler_whole(r->sampler, epoch, k) != 0)
            return 0;
    return 1;
}

void ds_train_data_close(run_state *r)
{
    if (r->loader)
        ds_loader_stop(r->loader);
    r->loader = NULL;
    if (r->sampler)
        ds_sampler_destroy(r->sampler);
    free(r->keep);
    free(r->val_keep);
    if (r->train)
        ds_dataset_close(r->train);
    if (r->val)
        ds_dataset_close(r->val);
    ds_batch_free(&r->synth);
    ds_batch_free(&r->synth_global);
}
