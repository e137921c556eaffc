/* test_bucket_padding.c - a batch padded past its longest utterance trains
 * exactly as the unpadded one: the same loss, per-utterance losses,
 * gradients and BatchNorm running statistics, bit for bit, for every model
 * family and dtype (dropout on in ds1-small, jasper-small and w2l-small).
 * Rounding a batch's length up to a multiple of a bucket (issue 34: a
 * small, bounded set of shapes for the GPU) is only safe if
 * this holds; the masks and lengths must cover every frame past an
 * utterance's end, and no sum may change its order with the padded length.
 *
 * usage: test_bucket_padding [BACKEND]   (default $DSTRAIN_TEST_BACKEND, else cpu) */
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "batch.h"
#include "config.h"
#include "model.h"
#include "synthetic.h"
#include "testmodel.h"
#include "testutil.h"

typedef struct {
    double loss;
    double *losses;   /* [n] */
    double *grads;    /* [param_count] */
    double *stats;    /* [bn_stats_count] */
    size_t n_grads, n_stats;
} pass_out;

/* b padded to t frames (t >= b->t), zeros past each utterance as before. */
static ds_status pad_batch(const ds_batch *b, int t, ds_batch *out)
{
    DS_TRY(ds_batch_alloc(out, b->n, t, b->f, b->label_off[b->n - 1] + b->label_len[b->n - 1]));
    out->n = b->n;
    out->t = t;
    memset(out->features, 0, (size_t)b->n * t * b->f * sizeof(float));
    for (int i = 0; i < b->n; i++)
        memcpy(&out->features[(size_t)i * t * b->f], &b->features[(size_t)i * b->t * b->f],
               (size_t)b->t * b->f * sizeof(float));
    memcpy(out->lengths, b->lengths, (size_t)b->n * sizeof(int));
    memcpy(out->label_off, b->label_off, (size_t)b->n * sizeof(int));
    memcpy(out->label_len, b->label_len, (size_t)b->n * sizeof(int));
    memcpy(out->labels, b->labels,
           (size_t)(b->label_off[b->n - 1] + b->label_len[b->n - 1]) * sizeof(int));
    return DS_OK;
}

/* One training pass (forward, loss, backward) of a fresh model on b. */
static ds_status one_pass(const ds_backend *be, const ds_model_cfg *cfg, ds_dtype dt, const ds_batch *b,
                          int cap_t, pass_out *o)
{
    ds_ctx *ctx = NULL;
    ds_model *m = NULL;
    ds_status st;
    DS_TRY(be->ctx_create(0, NULL, &ctx));
    const ds_model_limits lim = {b->n, cap_t, ds_batch_max_label(b)};
    DS_TRY_GOTO(st, ds_model_create(cfg, be, ctx, dt, &lim, &m), done);
    DS_TRY_GOTO(st, ds_model_init_params(m, 11), done);
    ds_rng rng;
    ds_rng_seed(&rng, 13);
    DS_TRY_GOTO(st, t_perturb_bn(m, &rng), done);
    ds_model_set_dropout_key(m, 17, 1, 0);
    DS_TRY_GOTO(st, ds_model_set_batch(m, b), done);
    DS_TRY_GOTO(st, ds_model_zero_grad(m), done);
    DS_TRY_GOTO(st, ds_model_forward(m, 1), done);
    DS_TRY_GOTO(st, ds_model_loss(m, 1), done);
    DS_TRY_GOTO(st, ds_model_backward(m), done);
    ds_loss l;
    o->losses = t_zeros((size_t)b->n);
    DS_TRY_GOTO(st, ds_model_read_loss(m, &l, o->losses), done);
    o->loss = l.loss;
    o->n_grads = ds_model_param_count(m);
    o->n_stats = ds_model_bn_stats_count(m);
    o->grads = t_zeros(o->n_grads);
    o->stats = t_zeros(o->n_stats);
    DS_TRY_GOTO(st, ds_model_get(m, DS_GRADS, o->grads), done);
    DS_TRY_GOTO(st, ds_model_get(m, DS_BN_STATS, o->stats), done);
done:
    ds_model_destroy(m);
    be->ctx_destroy(ctx);
    return st;
}

static void free_out(pass_out *o)
{
    free(o->losses);
    free(o->grads);
    free(o->stats);
}

/* Elements of a and b [n] whose bits differ, and the first one. */
static size_t differ(const double *a, const double *b, size_t n, size_t *first)
{
    size_t k = 0;
    for (size_t i = n; i-- > 0;)
        if (memcmp(&a[i], &b[i], sizeof *a)) {
            k++;
            *first = i;
        }
    return k;
}

static void compare(const char *what, const pass_out *a, const pass_out *b, int n)
{
    size_t first = 0, d;
    T_CHECK(!memcmp(&a->loss, &b->loss, sizeof a->loss), "%s: loss %.17g padded, %.17g not", what,
            b->loss, a->loss);
    d = differ(a->losses, b->losses, (size_t)n, &first);
    T_CHECK(d == 0, "%s: %zu utterance losses differ (utterance %zu: %.17g padded, %.17g not)", what,
            d, first, b->losses[first], a->losses[first]);
    d = differ(a->grads, b->grads, a->n_grads, &first);
    T_CHECK(d == 0, "%s: %zu of %zu gradients differ (element %zu: %.17g padded, %.17g not)", what,
            d, a->n_grads, first, b->grads[first], a->grads[first]);
    d = differ(a->stats, b->stats, a->n_stats, &first);
    T_CHECK(d == 0, "%s: %zu of %zu BatchNorm statistics differ (element %zu: %.17g padded, %.17g "
            "not)", what, d, a->n_stats, first, b->stats[first], a->stats[first]);
}

int main(int argc, char **argv)
{
    const ds_backend *be = t_backend(argc > 1 ? argv[1] : NULL);
    /* every family: DS2 (conv2d, BatchNorm, GRU/LSTM, lookahead), DS1
     * (context windows, dense, one RNN), Jasper and Wav2Letter+ (1-D
     * convolutions, residual blocks, dilation) */
    const char *presets[] = {"tiny", "mini", "ds1-small", "jasper-small", "w2l-small"};
    const ds_dtype dts[] = {DS_F32, DS_F64, DS_F16, DS_BF16};
    const int n = 3, frames = 150;
    for (size_t p = 0; p < sizeof presets / sizeof *presets; p++) {
        ds_model_cfg cfg;
        T_OK(ds_config_preset(presets[p], &cfg));
        const int stride = ds_synthetic_symbol_frames(&cfg) / 4;   /* the conv stack's time stride */
        ds_batch b;
        T_OK(ds_batch_alloc(&b, n, frames, cfg.n_features, n * ds_synthetic_max_labels(&cfg, frames)));
        ds_rng rng;
        ds_rng_seed(&rng, 7 + p);
        T_OK(ds_synthetic_batch(&rng, &cfg, n, frames, &b));
        /* padded by one frame, by one output frame, and up to a multiple of 32 output frames */
        const int pads[] = {b.t + 1, b.t + stride, (b.t / (32 * stride) + 1) * 32 * stride};
        int cap_t = 0;
        for (int k = 0; k < 3; k++)
            cap_t = pads[k] > cap_t ? pads[k] : cap_t;
        /* ds_batch_pad_to (the run's in-place padding) lays the batch out as pad_batch does */
        for (int k = 0; k < 3; k++) {
            ds_batch a, c;
            T_OK(pad_batch(&b, b.t, &a));
            T_OK(pad_batch(&b, pads[k], &c));
            free(a.features);
            a.features = calloc((size_t)n * pads[k] * b.f, sizeof(float));   /* room for the padding */
            T_CHECK(a.features != NULL, "no memory");
            memcpy(a.features, b.features, (size_t)n * b.t * b.f * sizeof(float));
            a.cap_t = pads[k];
            T_OK(ds_batch_pad_to(&a, pads[k]));
            T_CHECK(a.t == pads[k] && !memcmp(a.features, c.features, (size_t)n * pads[k] * b.f *
                                              sizeof(float)),
                    "%s: ds_batch_pad_to(%d) lays out %d frames otherwise", presets[p], pads[k], b.t);
            ds_batch_free(&a);
            ds_batch_free(&c);
        }
        for (size_t d = 0; d < sizeof dts / sizeof *dts; d++) {
            if (!be->ops(dts[d]))
                continue;
            pass_out ref = {0};
            T_OK(one_pass(be, &cfg, dts[d], &b, cap_t, &ref));
            for (size_t k = 0; k < sizeof pads / sizeof *pads; k++) {
                ds_batch padded;
                pass_out got = {0};
                T_OK(pad_batch(&b, pads[k], &padded));
                T_OK(one_pass(be, &cfg, dts[d], &padded, cap_t, &got));
                char what[128];
                snprintf(what, sizeof what, "%s %s, %d frames padded to %d", presets[p],
                         ds_dtype_name(dts[d]), b.t, pads[k]);
                compare(what, &ref, &got, n);
                free_out(&got);
                ds_batch_free(&padded);
            }
            free_out(&ref);
        }
        ds_batch_free(&b);
    }
    return t_finish(__FILE__);
}
