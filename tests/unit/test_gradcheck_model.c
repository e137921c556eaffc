/* test_gradcheck_model.c - the whole model's parameter gradients (forward,
 * CTC, backward) against central finite differences of its loss, in FP64,
 * for every parameter element of small models of each architecture
 * (DeepSpeech2's variants, DS1's, Jasper's and Wav2Letter+'s).
 *
 * usage: test_gradcheck_model [BACKEND]   (default $DSTRAIN_TEST_BACKEND, else cpu) */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "model.h"
#include "synthetic.h"
#include "testmodel.h"
#include "testutil.h"

typedef struct {
    const char *name;
    const char *json;
    int train;        /* BatchNorm mode */
} gc_case;

static const gc_case cases[] = {
    {"bi-lstm, 2 conv, hidden fc, train",
     "{\"name\":\"gc1\",\"n_features\":10,\"conv\":["
     "{\"channels\":2,\"kernel_time\":3,\"kernel_freq\":5,\"stride_time\":2,\"stride_freq\":2,\"pad_time\":1,\"pad_freq\":2},"
     "{\"channels\":2,\"kernel_time\":3,\"kernel_freq\":3,\"stride_time\":1,\"stride_freq\":2,\"pad_time\":1,\"pad_freq\":1}],"
     "\"rnn\":{\"type\":\"lstm\",\"hidden\":4,\"layers\":2,\"bidirectional\":true},\"fc_hidden\":[5]}",
     1},
    {"gru + lookahead, eval",
     "{\"name\":\"gc2\",\"n_features\":8,\"conv\":["
     "{\"channels\":3,\"kernel_time\":3,\"kernel_freq\":3,\"stride_time\":2,\"stride_freq\":2,\"pad_time\":1,\"pad_freq\":1}],"
     "\"rnn\":{\"type\":\"gru\",\"hidden\":4,\"layers\":2,\"bidirectional\":false,\"lookahead\":3}}",
     0},
    {"bi-rnn_tanh, train",
     "{\"name\":\"gc3\",\"n_features\":8,\"conv\":["
     "{\"channels\":2,\"kernel_time\":5,\"kernel_freq\":3,\"stride_time\":2,\"stride_freq\":1,\"pad_time\":2,\"pad_freq\":1}],"
     "\"rnn\":{\"type\":\"rnn_tanh\",\"hidden\":5,\"layers\":2,\"bidirectional\":true}}",
     1},
    {"gru + lookahead + fc, train",
     "{\"name\":\"gc4\",\"n_features\":8,\"conv\":["
     "{\"channels\":2,\"kernel_time\":3,\"kernel_freq\":3,\"stride_time\":2,\"stride_freq\":2,\"pad_time\":1,\"pad_freq\":1}],"
     "\"rnn\":{\"type\":\"gru\",\"hidden\":4,\"layers\":1,\"bidirectional\":false,\"lookahead\":2},\"fc_hidden\":[4]}",
     1},
    /* DS1's graph: context windows, FC layers before a unidirectional LSTM,
     * dropout after every FC (the masks fixed by the key, so the loss is a
     * function of the parameters), an output FC with a bias and no BatchNorm */
    {"DS1: context, fc_pre, lstm, dropout, train",
     "{\"name\":\"gc5\",\"n_features\":6,\"context\":2,\"fc_pre\":[5,4],"
     "\"rnn\":{\"type\":\"lstm\",\"hidden\":4,\"layers\":1,\"bidirectional\":false},"
     "\"fc_hidden\":[4],\"dropout\":0.3,\"output\":{\"batch_norm\":false,\"bias\":true}}",
     1},
    /* conv maps into FC layers before the RNN: fc_pre's first input gradient
     * goes back through conv_to_seq into the conv stack */
    {"conv into fc_pre, dropout, train",
     "{\"name\":\"gc7\",\"n_features\":8,\"conv\":["
     "{\"channels\":2,\"kernel_time\":3,\"kernel_freq\":3,\"stride_time\":2,\"stride_freq\":2,\"pad_time\":1,\"pad_freq\":1}],"
     "\"fc_pre\":[5],\"dropout\":0.2,\"rnn\":{\"type\":\"gru\",\"hidden\":4,\"layers\":1,\"bidirectional\":true}}",
     1},
    /* Jasper's graph: a prologue over every feature (stride 2), residual
     * blocks (1x1 conv + BN of the block's input added before the last
     * ReLU), a dilated block, convs without and with bias, dropout after
     * every layer, no RNN, an output FC with a bias */
    {"Jasper: residual blocks, dilation, dropout, train",
     "{\"name\":\"gc8\",\"n_features\":6,\"conv\":["
     "{\"channels\":3,\"kernel_time\":3,\"kernel_freq\":6,\"stride_time\":2,\"pad_time\":1,\"bias\":false,\"activation\":\"relu\",\"dropout\":0.2},"
     "{\"channels\":3,\"kernel_time\":3,\"kernel_freq\":1,\"pad_time\":1,\"bias\":false,\"activation\":\"relu\",\"dropout\":0.2,\"block\":1,\"repeat\":2},"
     "{\"channels\":4,\"kernel_time\":3,\"kernel_freq\":1,\"pad_time\":2,\"dilation_time\":2,\"activation\":\"relu\",\"dropout\":0.2,\"block\":2,\"repeat\":2},"
     "{\"channels\":4,\"kernel_time\":1,\"kernel_freq\":1,\"bias\":false,\"activation\":\"relu\"}],"
     "\"output\":{\"batch_norm\":false,\"bias\":true}}",
     1},
    /* Jasper DR: each block also adds the prologue's output and every
     * earlier block's (BatchNorm with running statistics) */
    {"Jasper DR: dense residuals, eval",
     "{\"name\":\"gc9\",\"n_features\":5,\"dense_residual\":true,\"conv\":["
     "{\"channels\":3,\"kernel_time\":3,\"kernel_freq\":5,\"stride_time\":2,\"pad_time\":1,\"bias\":false,\"activation\":\"relu\"},"
     "{\"channels\":2,\"kernel_time\":3,\"kernel_freq\":1,\"pad_time\":1,\"bias\":false,\"activation\":\"relu\",\"block\":1},"
     "{\"channels\":3,\"kernel_time\":3,\"kernel_freq\":1,\"pad_time\":1,\"bias\":false,\"activation\":\"relu\",\"block\":2,\"repeat\":2},"
     "{\"channels\":2,\"kernel_time\":3,\"kernel_freq\":1,\"pad_time\":1,\"bias\":false,\"activation\":\"relu\",\"block\":3}],"
     "\"output\":{\"batch_norm\":false,\"bias\":true}}",
     0},
    /* Jasper DR in training, and Wav2Letter+ (clipped ReLU, no residual) */
    {"Jasper DR: dense residuals, dropout, train",
     "{\"name\":\"gc10\",\"n_features\":5,\"dense_residual\":true,\"conv\":["
     "{\"channels\":3,\"kernel_time\":3,\"kernel_freq\":5,\"stride_time\":2,\"pad_time\":1,\"bias\":false,\"activation\":\"relu\",\"dropout\":0.1},"
     "{\"channels\":2,\"kernel_time\":3,\"kernel_freq\":1,\"pad_time\":1,\"bias\":false,\"activation\":\"relu\",\"dropout\":0.1,\"block\":1},"
     "{\"channels\":3,\"kernel_time\":3,\"kernel_freq\":1,\"pad_time\":1,\"bias\":false,\"activation\":\"relu\",\"dropout\":0.1,\"block\":2}],"
     "\"output\":{\"batch_norm\":false,\"bias\":true}}",
     1},
    {"Wav2Letter+: clipped ReLU, dilation, dropout, train",
     "{\"name\":\"gc11\",\"n_features\":6,\"conv\":["
     "{\"channels\":3,\"kernel_time\":3,\"kernel_freq\":6,\"stride_time\":2,\"pad_time\":1,\"bias\":false,\"dropout\":0.2},"
     "{\"channels\":4,\"kernel_time\":3,\"kernel_freq\":1,\"pad_time\":2,\"dilation_time\":2,\"bias\":false,\"dropout\":0.2,\"repeat\":2}],"
     "\"output\":{\"batch_norm\":false,\"bias\":true}}",
     1},
    {"frames into fc_pre, gru, eval",
     "{\"name\":\"gc6\",\"n_features\":6,\"fc_pre\":[5],\"dropout\":0.5,"
     "\"rnn\":{\"type\":\"gru\",\"hidden\":4,\"layers\":2,\"bidirectional\":true}}",
     0},
};

/* In training mode a conv bias feeds straight into BatchNorm, which removes
 * any per-channel constant: its exact gradient is 0 and both sides hold
 * rounding noise, so it is checked against the size of the whole gradient. */
static int bias_cancelled_by_bn(const ds_tensor *t, int train)
{
    return train && strncmp(t->name, "conv.", 5) == 0 && strstr(t->name, ".bias") &&
           !strstr(t->name, ".bn.");
}

static const ds_backend *be;

/* A failed call inside check_case is one failed check, and ends the case. */
#define T_OK_CASE(expr)                                                                    \
    do {                                                                                   \
        if ((st = (expr)) != DS_OK) {                                                      \
            T_CHECK(0, "%s: %s: %s", c->name, #expr, ds_status_last_error());                     \
            goto out;                                                                      \
        }                                                                                  \
    } while (0)

static void check_case(const gc_case *c)
{
    ds_model_cfg cfg;
    ds_ctx *ctx = NULL;
    ds_model *m = NULL;
    ds_batch b = {0};
    const int n = 3, frames = 24;
    T_CHECK(ds_config_parse(c->json, c->name, &cfg) == DS_OK, "%s: config: %s", c->name, ds_status_last_error());
    T_CHECK(be->ctx_create(0, NULL, &ctx) == DS_OK, "context");
    ds_model_limits lim = {n, frames, ds_synthetic_max_labels(&cfg, frames)};
    ds_status st = ds_model_create(&cfg, be, ctx, DS_F64, &lim, &m);
    if (st == DS_OK)
        st = ds_batch_alloc(&b, n, frames, cfg.n_features, n * lim.label_len);
    ds_rng rng;
    ds_rng_seed(&rng, 7);
    if (st == DS_OK) {
        st = ds_model_init_params(m, 11);
        ds_model_set_dropout_key(m, 5, 3, 1);
    }
    if (st == DS_OK)
        st = t_perturb_bn(m, &rng);
    if (st == DS_OK)
        st = ds_synthetic_batch(&rng, &cfg, n, frames, &b);
    if (st == DS_OK)
        st = ds_model_set_batch(m, &b);
    T_CHECK(st == DS_OK, "%s: set-up: %s", c->name, ds_status_last_error());
    if (st != DS_OK)
        goto out;

    const size_t np = ds_model_param_count(m);
    t_placement pl;
    T_OK_CASE(t_check_placement(m, &pl));
    T_CHECK(pl.misaligned == 0 && pl.outside == 0 && pl.overlapping == 0 && pl.bad_offset == 0 &&
                pl.count_sum == np && np == ds_model_config_param_count(&cfg) &&
                (strcmp(be->name, "cpu") != 0 || pl.misaligned_rnn == 0),
            "%s: placement: %d misaligned (+%d recurrent), %d outside, %d overlapping, %d bad "
            "offsets; counts %zu, param_count %zu, config %zu",
            c->name, pl.misaligned, pl.misaligned_rnn, pl.outside, pl.overlapping, pl.bad_offset,
            pl.count_sum, np, ds_model_config_param_count(&cfg));
    double *p = malloc(np * sizeof *p), *an = malloc(np * sizeof *an), *fd = malloc(np * sizeof *fd);
    ds_loss l;
    st = ds_model_get(m, DS_PARAMS, p);
    if (st == DS_OK) st = ds_model_zero_grad(m);
    if (st == DS_OK) st = ds_model_forward(m, c->train);
    if (st == DS_OK) st = ds_model_loss(m, 1);
    if (st == DS_OK) st = ds_model_read_loss(m, &l, NULL);
    if (st == DS_OK) st = ds_model_backward(m);
    if (st == DS_OK) st = ds_model_get(m, DS_GRADS, an);
    T_CHECK(st == DS_OK && l.n_infinite == 0, "%s: analytic pass: %s", c->name, ds_status_last_error());
    /* The flat buffers hold alignment padding and the gaps of recurrent
     * spans: backward must leave them 0 there (the optimizer's norm and the
     * reduction run over the whole span). */
    size_t gap_p = 0, gap_g = 0;
    if (st == DS_OK) st = t_flat_gap_nonzero(be, m, DS_PARAMS, &gap_p);
    if (st == DS_OK) st = t_flat_gap_nonzero(be, m, DS_GRADS, &gap_g);
    T_CHECK(st == DS_OK && gap_p == 0 && gap_g == 0,
            "%s: %zu parameter and %zu gradient padding elements are not 0 (of span %zu for %zu)",
            c->name, gap_p, gap_g, ds_model_param_span(m), np);

    t_loss_arg arg = {m, c->train, p, DS_OK};
    /* h near cbrt(machine epsilon) balances truncation (h^2) against rounding
     * (eps * loss / h) for a loss of order 30. */
    t_fd_grad(t_model_loss, &arg, p, np, 1e-5, fd);
    T_CHECK(arg.st == DS_OK, "%s: finite differences: %s", c->name, ds_status_last_error());
    double all = 0, worst = 0;
    for (size_t k = 0; k < np; k++)
        all += an[k] * an[k];
    all = sqrt(all);
    for (int i = 0; i < ds_model_n_params(m); i++) {
        const ds_tensor *t = ds_model_param(m, i);
        const double *a = an + t->offset, *f = fd + t->offset;
        if (bias_cancelled_by_bn(t, c->train)) {
            double d = t_max_abs_diff(a, f, t->count);
            T_CHECK(d <= 1e-8 * all, "%s: %s: |fd - analytic| %.3g vs |g| %.3g", c->name, t->name, d, all);
            continue;
        }
        double e = t_rel_err(a, f, t->count);
        worst = e > worst ? e : worst;
        T_CHECK(e < 1e-6, "%s: %s: relative error %.3g", c->name, t->name, e);
    }
    printf("%-36s %6zu parameters, loss %.6f, worst relative error %.3g\n", c->name, np, l.loss, worst);
    free(p);
    free(an);
    free(fd);
out:
    ds_batch_free(&b);
    ds_model_destroy(m);
    if (ctx)
        be->ctx_destroy(ctx);
}

int main(int argc, char **argv)
{
    be = t_backend(argc > 1 ? argv[1] : NULL);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        check_case(&cases[i]);
    return t_finish(__FILE__);
}
