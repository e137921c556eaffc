/* test_overfit.c - the tiny preset memorises a fixed batch of 4 synthetic
 * utterances: greedy CER 0 in eval mode (running BatchNorm statistics)
 * within a bounded number of steps. Proves that forward, CTC, backward and
 * the optimizer together learn, through the training step (ds_stepper).
 *
 * usage: test_overfit [BACKEND]   (default $DSTRAIN_TEST_BACKEND, else cpu) */
#include <math.h>

#include "backend.h"
#include "model.h"
#include "optim.h"
#include "score.h"
#include "synthetic.h"
#include "testutil.h"
#include "stepper.h"

#define MAX_STEPS 400
#define CHECK_EVERY 20

int main(int argc, char **argv)
{
    ds_model_cfg cfg;
    const ds_backend *be = t_backend(argc > 1 ? argv[1] : NULL);
    ds_ctx *ctx;
    ds_model *m;
    ds_optim *o;
    ds_stepper *st;
    ds_score_batch *sc;
    ds_batch b;
    const int n = 4, frames = 200;
    T_OK(ds_config_preset("tiny", &cfg));
    T_OK(be->ctx_create(0, NULL, &ctx));
    ds_model_limits lim = {n, frames, ds_synthetic_max_labels(&cfg, frames)};
    T_OK(ds_model_create(&cfg, be, ctx, DS_F32, &lim, &m));
    T_OK(ds_model_init_params(m, 3));
    ds_optim_cfg oc = ds_optim_defaults();
    oc.kind = DS_OPT_ADAMW;
    oc.lr = 3e-3;
    oc.weight_decay = 0;
    T_OK(ds_model_optim_create(m, &oc, &o));
    T_OK(ds_stepper_create(m, o, NULL, &st));
    T_OK(ds_score_batch_create(&cfg, &lim, &sc));
    T_OK(ds_batch_alloc(&b, n, frames, cfg.n_features, n * lim.label_len));
    ds_rng rng;
    ds_rng_seed(&rng, 5);
    T_OK(ds_synthetic_batch(&rng, &cfg, n, frames, &b));

    double first = NAN, cer = 1;
    int step;
    for (step = 1; step <= MAX_STEPS && cer > 0; step++) {
        ds_step_out s = {0};
        T_OK(ds_stepper_launch(st, &b, oc.lr));
        T_OK(ds_stepper_collect(st, &s));
        T_CHECK(!s.opt.skipped && s.opt.steps == step, "step %d: skipped %d, %ld updates", step,
                s.opt.skipped, s.opt.steps);
        if (step == 1)
            first = s.loss;
        if (step % CHECK_EVERY == 0) {
            ds_score score = {0};
            ds_loss l;
            T_OK(ds_model_forward(m, 0));
            T_OK(ds_model_loss(m, 0));
            T_OK(ds_model_read_loss(m, &l, NULL));
            T_OK(ds_score_batch_add(sc, m, &b, &score));
            cer = ds_score_cer(&score);
            printf("step %3d  train loss %8.4f  eval loss %8.4f  eval CER %.3f\n", step, s.loss,
                   l.loss, cer);
        }
    }
    T_CHECK(cer == 0, "CER %.3f after %d steps, expected 0", cer, MAX_STEPS);
    printf("CER 0 after %d steps (first loss %.3f)\n", step - 1, first);

    ds_batch_free(&b);
    ds_score_batch_destroy(sc);
    ds_stepper_destroy(st);
    ds_optim_destroy(o);
    ds_model_destroy(m);
    be->ctx_destroy(ctx);
    return t_finish(__FILE__);
}
