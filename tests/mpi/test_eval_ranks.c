/* test_eval_ranks.c - validation shared across ranks gives exactly the
 * single-rank WER and CER: the same counts (character and word edits,
 * characters, words, utterances, infinite losses), and the loss to
 * rounding. Rank 0 writes a feature file of 23 utterances of mixed lengths
 * (random features and labels) with dstrain's own writer; every rank builds
 * the same tiny model on the CPU and scores the file alone (ds_evaluate) and
 * shared (ds_evaluate_ranks), in batches of 4: 6 batches, so at 4 ranks two
 * ranks score two batches and at more ranks some score none.
 *
 * usage: mpiexec -np 1|2|4 test_eval_ranks */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"
#include "config.h"
#include "dataset.h"
#include "evaluate.h"
#include "filter.h"
#include "model.h"
#include "rng.h"
#include "testutil.h"
#include "world.h"

enum { UTTS = 23, BATCH = 4 };

static ds_status write_file(const char *path, const ds_model_cfg *cfg)
{
    ds_feature_cfg feat = ds_feature_defaults();   /* 161 features: the tiny preset's */
    ds_dataset_writer *w;
    DS_TRY(ds_dataset_writer_create(path, &feat, DS_F32, &w));
    ds_rng g;
    ds_rng_seed(&g, 42);
    float *x = malloc((size_t)300 * cfg->n_features * sizeof *x);
    if (!x)
        return DS_FAIL(DS_ERR_MEM, "features");
    ds_status st = DS_OK;
    for (int u = 0; u < UTTS && st == DS_OK; u++) {
        const int frames = 40 + (int)(ds_rng_range(&g, 0, 1) * 220);
        uint8_t labels[12];
        char text[13], id[16];
        const int nl = 2 + (int)(ds_rng_range(&g, 0, 1) * 10);
        for (int k = 0; k < nl; k++) {
            labels[k] = (uint8_t)(2 + (int)(ds_rng_range(&g, 0, 1) * 26));   /* letters */
            text[k] = (char)('A' + labels[k] - 2);
        }
        text[nl] = '\0';
        for (long k = 0; k < (long)frames * cfg->n_features; k++)
            x[k] = (float)ds_rng_range(&g, -2, 2);
        snprintf(id, sizeof id, "u%02d", u);
        st = ds_dataset_writer_add(w, id, text, labels, nl, x, frames);
    }
    free(x);
    if (st != DS_OK) {
        ds_dataset_writer_abort(w);
        return st;
    }
    return ds_dataset_writer_close(w);
}

int main(void)
{
    ds_world w;
    T_OK(ds_world_init(&w, 0, 120));
    char path[] = "/tmp/dstrain-eval-ranks.h5";
    ds_model_cfg cfg;
    T_OK(ds_config_preset("tiny", &cfg));
    if (w.rank == 0)
        T_OK(write_file(path, &cfg));
    MPI_Barrier(w.comm);
    const ds_backend *be = ds_backend_get("cpu");
    ds_ctx *ctx = NULL;
    ds_dataset *d = NULL;
    ds_model *m = NULL;
    long *keep = NULL, n = 0;
    ds_filter_stats fs;
    T_OK(be->ctx_create(0, NULL, &ctx));
    T_OK(ds_dataset_open(path, &d));
    T_OK(ds_filter_dataset(d, &cfg, 0, 0, &keep, &n, &fs));
    const ds_model_limits lim = {BATCH, fs.max_frames, fs.max_labels};
    T_OK(ds_model_create(&cfg, be, ctx, DS_F32, &lim, &m));
    T_OK(ds_model_init_params(m, 7));
    ds_eval_result alone, shared;
    T_OK(ds_evaluate(m, d, keep, n, BATCH, DS_NORM_UTTERANCE, &alone));
    T_OK(ds_evaluate_ranks(m, d, keep, n, BATCH, DS_NORM_UTTERANCE, &w, &shared));
    const ds_score *a = &alone.score, *b = &shared.score;
    T_CHECK(a->utterances == n && b->utterances == n, "rank %d: %ld and %ld utterances scored of %ld",
            w.rank, a->utterances, b->utterances, n);
    T_CHECK(a->char_edits == b->char_edits && a->chars == b->chars && a->word_edits == b->word_edits &&
                a->words == b->words && alone.n_infinite == shared.n_infinite,
            "rank %d of %d: counts differ: chars %ld/%ld vs %ld/%ld, words %ld/%ld vs %ld/%ld, "
            "infinite %ld vs %ld", w.rank, w.size, a->char_edits, a->chars, b->char_edits, b->chars,
            a->word_edits, a->words, b->word_edits, b->words, alone.n_infinite, shared.n_infinite);
    T_CHECK(a->chars > 0 && a->char_edits > 0, "nothing scored: %ld edits of %ld characters",
            a->char_edits, a->chars);
    const double rel = fabs(alone.loss - shared.loss) / fabs(alone.loss);
    T_CHECK(isfinite(alone.loss) && rel < 1e-12, "rank %d: loss %.17g alone, %.17g shared (rel %.3g)",
            w.rank, alone.loss, shared.loss, rel);
    if (w.rank == 0)
        printf("%d rank(s): %ld utterances, CER %.6f WER %.6f, loss %.12g alone and %.12g shared\n",
               w.size, n, ds_score_cer(b), ds_score_wer(b), alone.loss, shared.loss);
    ds_model_destroy(m);
    free(keep);
    ds_dataset_close(d);
    be->ctx_destroy(ctx);
    MPI_Barrier(w.comm);
    if (w.rank == 0)
        unlink(path);
    int failed = t_failures, any = 0;
    MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, w.comm);
    ds_world_finalize(&w);
    return any ? 1 : t_finish(__FILE__);
}
