/* test_config_limits.c - models at the limits that config validation allows
 * (src/config.c: 64 conv layers, 16 residual blocks with dense residuals,
 * 32 recurrent layers, 8 hidden FC layers, lookahead context 256), small in
 * every other way so a step takes milliseconds:
 *  - the config parses; one layer past each limit is refused, naming it;
 *  - the parameter count (ds_model_config_param_count, the model's tensors) equals
 *    a count by hand, and every tensor fits the table (DS_MAX_TENSORS: a
 *    32-layer bidirectional model once overflowed a 160-entry table);
 *  - the parameters are placed aligned, inside the flat buffer, disjoint;
 *  - one training step (forward, CTC, backward, optimizer update) gives a
 *    finite loss, finite gradients that reach the first conv layer, finite
 *    updated parameters, zero padding in the flat buffers, and neither
 *    allocates nor waits for the backend; in FP64 a sample of one element
 *    of every tensor against central finite differences;
 *  - `dstrain info CONFIG.json` prints the parameter count and the layers,
 *    and refuses a config past the limits without crashing.
 *
 * usage: test_config_limits [--dstrain PATH] [BACKEND]
 *   PATH: the dstrain binary (the info checks are skipped without it);
 *   BACKEND: default $DSTRAIN_TEST_BACKEND, else cpu. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backend.h"
#include "config.h"
#include "model.h"
#include "optim.h"
#include "synthetic.h"
#include "testmodel.h"
#include "testutil.h"

#define N_CONV DS_MAX_CONV
#define N_RNN 32
#define N_FC DS_MAX_FC
#define MAX_LOOKAHEAD 256

/* 4 channels and FC layers of 6: with 2 channels in 64 clamped layers, 117 of
 * 1001 tensors found no element away from a kink (sample_fd), 8 with 4; with
 * FC layers of 3, eight of them in a row could leave every unit clamped for
 * some initial draws (no gradient below the head) */
enum { FEATURES = 5, CHANNELS = 4, HIDDEN = 4, FC_SIZE = 6, CLASSES = 5, BATCH = 2, FRAMES = 16 };

static const ds_backend *be;

/* ---- configs ---- */

/* JSON of a config with n_conv conv layers (the first 3x3 with padding, the
 * others 1x1 in residual blocks of 4 with dense residuals: the most residual
 * branches, DS_MAX_RES blocks at 63 layers, and a path for the gradient
 * that 63 layers of 2 clamped channels in a row would all but close),
 * `layers` recurrent layers of cell, and n_fc hidden FC layers; lookahead >
 * 0 makes it unidirectional. */
static void make_json(char *buf, size_t cap, const char *name, int n_conv, const char *cell,
                      int layers, int lookahead, int n_fc)
{
    size_t n = (size_t)snprintf(buf, cap, "{\"name\": \"%s\", \"n_features\": %d, \"n_classes\": %d,\n"
                                "  \"dense_residual\": true, \"conv\": [", name, FEATURES, CLASSES);
    for (int i = 0; i < n_conv; i++)
        n += (size_t)snprintf(buf + n, cap - n,
                              "%s\n    {\"channels\": %d, \"kernel_time\": %d, \"kernel_freq\": %d, "
                              "\"stride_time\": 1, \"stride_freq\": 1, \"pad_time\": %d, \"pad_freq\": %d, "
                              "\"block\": %d}",
                              i ? "," : "", CHANNELS, i ? 1 : 3, i ? 1 : 3, i ? 0 : 1, i ? 0 : 1,
                              i ? (i - 1) / 4 + 1 : 0);
    n += (size_t)snprintf(buf + n, cap - n,
                          "],\n  \"rnn\": {\"type\": \"%s\", \"hidden\": %d, \"layers\": %d, "
                          "\"bidirectional\": %s, \"lookahead\": %d},\n  \"fc_hidden\": [",
                          cell, HIDDEN, layers, lookahead ? "false" : "true", lookahead);
    for (int k = 0; k < n_fc; k++)
        n += (size_t)snprintf(buf + n, cap - n, "%s%d", k ? ", " : "", FC_SIZE);
    snprintf(buf + n, cap - n, "],\n  \"bn_eps\": 1e-5, \"bn_momentum\": 0.1}\n");
}

typedef struct {
    const char *name, *cell;
    int lookahead;
} limit_case;

static const limit_case CASES[] = {
    {"limits-bi-lstm", "lstm", 0},                 /* the most tensors a config can have */
    {"limits-gru-lookahead", "gru", MAX_LOOKAHEAD},
};

/* Parameters and tensors counted by hand from the architecture. */
static void count_by_hand(const ds_model_cfg *c, size_t *params, int *tensors)
{
    const size_t G = (size_t)ds_backend_cell_gates(c->cell), H = (size_t)c->hidden;
    const size_t dirs = c->bidirectional ? 2 : 1;
    size_t p = 0, ci = 1, f = (size_t)c->n_features;
    int t = 0;
    for (int i = 0; i < c->n_conv; i++) {
        const ds_conv_cfg *k = &c->conv[i];
        const size_t co = (size_t)k->channels;
        p += co * ci * (size_t)k->kernel_time * (size_t)k->kernel_freq + co + 2 * co;
        t += 4;
        /* a block's last layer (every 4th, and the last): dense residuals,
         * a 1x1 conv (from CHANNELS) and BatchNorm per block up to it */
        if (i && (i % 4 == 0 || i + 1 == c->n_conv)) {
            const int branches = (i - 1) / 4 + 1;
            p += (size_t)branches * (co * CHANNELS + 2 * co);
            t += 3 * branches;
        }
        f = (f + 2 * (size_t)k->pad_freq - (size_t)k->kernel_freq) / (size_t)k->stride_freq + 1;
        ci = co;
    }
    size_t in = ci * f;
    for (int j = 0; j < c->rnn_layers; j++) {
        if (j > 0) {
            p += 2 * in;
            t += 2;
        }
        p += dirs * (G * H * in + G * H * H + 2 * G * H);
        t += 4 * (int)dirs;
        in = H;
    }
    if (!c->bidirectional && c->lookahead > 0) {
        p += H * (size_t)c->lookahead;
        t += 1;
    }
    for (int k = 0; k < c->n_fc; k++) {
        p += (size_t)c->fc_hidden[k] * in + (size_t)c->fc_hidden[k];
        t += 2;
        in = (size_t)c->fc_hidden[k];
    }
    p += 2 * in + (size_t)c->n_classes * in;
    t += 3;
    *params = p;
    *tensors = t;
}

/* One layer past each limit is refused, with the limit named. */
static void check_refused(void)
{
    char json[32768];
    struct {
        int n_conv, layers, lookahead, n_fc;
        const char *cell, *what;
    } over[] = {
        {N_CONV + 1, N_RNN, 0, N_FC, "lstm", "conv"},
        {N_CONV, N_RNN + 1, 0, N_FC, "lstm", "layers"},
        {N_CONV, N_RNN, 0, N_FC + 1, "lstm", "fc_hidden"},
        {N_CONV, N_RNN, MAX_LOOKAHEAD + 1, N_FC, "gru", "lookahead"},
    };
    for (size_t i = 0; i < sizeof over / sizeof over[0]; i++) {
        ds_model_cfg cfg;
        make_json(json, sizeof json, "over", over[i].n_conv, over[i].cell, over[i].layers,
                  over[i].lookahead, over[i].n_fc);
        ds_status_clear_error();
        ds_status st = ds_config_parse(json, "over.json", &cfg);
        T_CHECK(st == DS_ERR_ARG && strstr(ds_status_last_error(), over[i].what),
                "one past the %s limit: %s (%s)", over[i].what, ds_status_name(st), ds_status_last_error());
        printf("past the %-9s limit: refused: %s\n", over[i].what, ds_status_last_error());
    }
    ds_status_clear_error();
}

/* ---- the model at the limits ---- */

/* A conv bias followed by BatchNorm in training has gradient exactly 0. */
static int bias_cancelled_by_bn(const ds_tensor *t)
{
    return strncmp(t->name, "conv.", 5) == 0 && strstr(t->name, ".bias") && !strstr(t->name, ".bn.");
}

/* Biases whose gradient is 0 up to rounding, so possibly exactly 0: those of
 * the conv layers, and those of the hidden FC layers, whose chain of linear
 * maps (where no Hardtanh clamps) ends in the output BatchNorm, which removes
 * any constant shift. */
static int bias_into_bn(const ds_tensor *t)
{
    return bias_cancelled_by_bn(t) ||
           (strncmp(t->name, "fc_hidden.", 10) == 0 && strstr(t->name, ".bias"));
}

/* The sampled gradient check's finite differences. The 32-layer stack's
 * loss is strongly curved: the error of central differences goes as h^2
 * (measured on limits-bi-lstm: 2.4e-3 at h = 1e-4, 2.6e-5 at 1e-5, 3e-8 at
 * 1e-6); below 1e-7 rounding takes over (1e-4 at 1e-8). And the 64 conv
 * layers of clamped units put kinks within reach of some elements: there a
 * difference is no derivative (measured: 1e-3 at 1e-6 on conv.0.weight's
 * middle element, while the elements beside it agree to 1e-8). So an
 * element counts where its differences at 1e-5 and 1e-6 agree (nothing
 * crossed); one that does not is passed over for the next, at most 8. A
 * tensor with no smooth element among them (the first conv's weights move
 * every clamp downstream) is held to the spread its own differences show. */
#define FD_H 1e-6
#define FD_TRIES 8
/* What rounding costs a difference at FD_H: a loss of order 10 in FP64 is
 * good to about 1e-14, so 1e-14 / 2e-6 = 5e-9; ten times that. */
#define FD_NOISE 5e-8

/* The finite difference of the loss in *x, its spread against the step ten
 * times larger, and whether it is smooth there (the two agree). */
static int fd_at(t_loss_arg *arg, double *x, double *fd, double *spread)
{
    double coarse;
    t_fd_grad(t_model_loss, arg, x, 1, 10 * FD_H, &coarse);
    t_fd_grad(t_model_loss, arg, x, 1, FD_H, fd);
    *spread = fabs(coarse - *fd);
    return *spread <= 1e-7 * fabs(*fd) + FD_NOISE;
}

static int count_nonfinite(const double *a, size_t n)
{
    int bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += !isfinite(a[i]);
    return bad;
}

/* The FP64 gradient of one element of every tensor (its middle one, or the
 * first smooth one after it) against central finite differences; returns
 * the relative error over the smooth sample, and in *rough the tensors
 * without a smooth element, *rough_off those of them whose gradient lies
 * outside the spread of their differences (plus 1e-6 of the size and the
 * rounding). */
static double sample_fd(ds_model *m, const double *grads, double *params, int *rough,
                        int *rough_off, ds_status *st)
{
    const int nt = ds_model_n_params(m);
    double *an = malloc((size_t)nt * sizeof *an), *fd = malloc((size_t)nt * sizeof *fd);
    t_loss_arg arg = {m, 1, params, DS_OK};
    int k = 0;
    *rough = *rough_off = 0;
    for (int i = 0; i < nt; i++) {
        const ds_tensor *t = ds_model_param(m, i);
        if (bias_cancelled_by_bn(t))
            continue;
        size_t at = t->offset + t->count / 2;
        double spread;
        int smooth = fd_at(&arg, params + at, &fd[k], &spread);
        for (int j = 1; !smooth && j < FD_TRIES; j++) {
            at = t->offset + (t->count / 2 + (size_t)j) % t->count;
            smooth = fd_at(&arg, params + at, &fd[k], &spread);
        }
        an[k] = grads[at];
        if (smooth) {
            k++;
            continue;
        }
        ++*rough;
        const int off = fabs(an[k] - fd[k]) > spread + 1e-6 * fabs(fd[k]) + FD_NOISE;
        *rough_off += off;
        printf("  %s: no smooth element in %d: gradient %.10g, differences %.10g (spread %.3g)%s\n",
               t->name, FD_TRIES, an[k], fd[k], spread, off ? ": OUTSIDE" : "");
    }
    *st = arg.st;
    double e = t_rel_err(an, fd, (size_t)k);
    free(an);
    free(fd);
    return e;
}

static void check_model(const limit_case *lc, ds_dtype dt, const ds_model_cfg *cfg, ds_ctx *ctx)
{
    const char *dn = ds_dtype_name(dt);
    size_t hand_params;
    int hand_tensors;
    count_by_hand(cfg, &hand_params, &hand_tensors);
    const size_t cfg_params = ds_model_config_param_count(cfg);

    ds_model *m = NULL;
    ds_optim *o = NULL;
    ds_batch b = {0};
    double *p0 = NULL, *g = NULL, *p1 = NULL;
    const ds_model_limits lim = {BATCH, FRAMES, ds_synthetic_max_labels(cfg, FRAMES)};
    ds_status st = ds_model_create(cfg, be, ctx, dt, &lim, &m);
    T_CHECK(st == DS_OK, "%s %s: model: %s", lc->name, dn, ds_status_last_error());
    if (st != DS_OK)
        return;

    const size_t np = ds_model_param_count(m), span = ds_model_param_span(m);
    const int nt = ds_model_n_params(m);
    T_CHECK(nt == hand_tensors && nt <= DS_MAX_TENSORS, "%s %s: %d tensors, by hand %d, table %d",
            lc->name, dn, nt, hand_tensors, DS_MAX_TENSORS);
    T_CHECK(np == cfg_params && np == hand_params,
            "%s %s: %zu parameters, ds_model_config_param_count %zu, by hand %zu", lc->name, dn, np,
            cfg_params, hand_params);
    T_CHECK(span >= np, "%s %s: flat buffer of %zu for %zu parameters", lc->name, dn, span, np);
    t_placement pl;
    st = t_check_placement(m, &pl);
    T_CHECK(st == DS_OK && pl.misaligned == 0 && pl.outside == 0 && pl.overlapping == 0 &&
                pl.bad_offset == 0 && pl.count_sum == np &&
                (strcmp(be->name, "cpu") != 0 || pl.misaligned_rnn == 0),
            "%s %s: placement: %d misaligned (+%d recurrent), %d outside, %d overlapping, %d bad "
            "offsets, counts sum to %zu", lc->name, dn, pl.misaligned, pl.misaligned_rnn,
            pl.outside, pl.overlapping, pl.bad_offset, pl.count_sum);
    const ds_tensor *last = ds_model_param(m, nt - 1);
    T_CHECK(strcmp(last->name, "fc.weight") == 0, "%s %s: last tensor %s", lc->name, dn, last->name);

    /* one training step */
    ds_rng rng;
    ds_rng_seed(&rng, 17);
    ds_optim_cfg oc = ds_optim_defaults();
    oc.lr = 1e-2;
    p0 = malloc(np * sizeof *p0), g = malloc(np * sizeof *g), p1 = malloc(np * sizeof *p1);
    ds_loss loss = {0}, loss2 = {0};
    ds_optim_status os = {0};
    ds_backend_counters c0, c1;
    size_t gap_g = 1, gap_p = 1;
    if (!p0 || !g || !p1)
        st = DS_FAIL(DS_ERR_MEM, "host copies");
    if (st == DS_OK) st = ds_model_init_params(m, 5);
    if (st == DS_OK) st = t_perturb_bn(m, &rng);
    if (st == DS_OK) st = ds_batch_alloc(&b, BATCH, FRAMES, cfg->n_features, BATCH * lim.label_len);
    if (st == DS_OK) st = ds_synthetic_batch(&rng, cfg, BATCH, FRAMES, &b);
    if (st == DS_OK) st = ds_model_optim_create(m, &oc, &o);
    if (st == DS_OK) st = ds_model_get(m, DS_PARAMS, p0);
    if (st == DS_OK) st = ds_model_set_batch(m, &b);
    be->counters(ctx, &c0);
    if (st == DS_OK) st = ds_model_zero_grad(m);
    if (st == DS_OK) st = ds_model_forward(m, 1);
    if (st == DS_OK) st = ds_model_loss(m, 1);
    if (st == DS_OK) st = ds_model_backward(m);
    ds_optim_bufs groups[2];
    const int n_groups = ds_model_optim_bufs(m, groups);
    if (st == DS_OK) st = ds_optim_update(o, groups, n_groups, oc.lr);
    be->counters(ctx, &c1);
    if (st == DS_OK) st = ds_model_read_loss(m, &loss, NULL);
    if (st == DS_OK) st = ds_optim_read(o, &os);
    if (st == DS_OK) st = ds_model_get(m, DS_GRADS, g);
    if (st == DS_OK) st = ds_model_get(m, DS_PARAMS, p1);
    if (st == DS_OK) st = t_flat_gap_nonzero(be, m, DS_GRADS, &gap_g);
    if (st == DS_OK) st = t_flat_gap_nonzero(be, m, DS_PARAMS, &gap_p);
    if (st == DS_OK) st = ds_model_forward(m, 1);
    if (st == DS_OK) st = ds_model_loss(m, 0);
    if (st == DS_OK) st = ds_model_read_loss(m, &loss2, NULL);
    T_CHECK(st == DS_OK, "%s %s: training step: %s", lc->name, dn, ds_status_last_error());
    if (st != DS_OK)
        goto out;

    T_CHECK(isfinite(loss.loss) && loss.loss > 0 && loss.n_infinite == 0,
            "%s %s: loss %g, %d infinite", lc->name, dn, loss.loss, loss.n_infinite);
    const int bad_g = count_nonfinite(g, np), bad_p = count_nonfinite(p1, np);
    T_CHECK(bad_g == 0 && bad_p == 0, "%s %s: %d gradients and %d updated parameters not finite",
            lc->name, dn, bad_g, bad_p);
    int zero_tensors = 0;
    const char *first_zero = "";
    for (int i = 0; i < nt; i++) {
        const ds_tensor *t = ds_model_param(m, i);
        double s = 0;
        for (size_t k = 0; k < t->count; k++)
            s += g[t->offset + k] * g[t->offset + k];
        if (s == 0 && !bias_into_bn(t)) {
            if (!zero_tensors++)
                first_zero = t->name;
        }
    }
    T_CHECK(zero_tensors == 0, "%s %s: %d tensors without gradient (biases into BatchNorm "
            "apart), the first %s", lc->name, dn, zero_tensors, first_zero);
    T_CHECK(gap_g == 0 && gap_p == 0, "%s %s: %zu gradient and %zu parameter padding elements "
            "not 0", lc->name, dn, gap_g, gap_p);
    T_CHECK(isfinite(os.grad_norm) && os.grad_norm > 0 && !os.skipped && os.steps == 1,
            "%s %s: update: norm %g, skipped %d, steps %ld", lc->name, dn, os.grad_norm,
            os.skipped, os.steps);
    size_t changed = 0;
    for (size_t k = 0; k < np; k++)
        changed += p1[k] != p0[k];
    T_CHECK(changed > np / 2, "%s %s: the update changed %zu of %zu parameters", lc->name, dn,
            changed, np);
    T_CHECK(isfinite(loss2.loss) && loss2.n_infinite == 0, "%s %s: loss after the update %g",
            lc->name, dn, loss2.loss);
    T_CHECK(c1.allocs == c0.allocs && c1.to_host == c0.to_host,
            "%s %s: forward, loss, backward and update made %ld allocations and %ld blocking "
            "reads", lc->name, dn, c1.allocs - c0.allocs, c1.to_host - c0.to_host);
    printf("%-21s %s: %d tensors (table %d), %zu parameters (by hand %zu), flat span %zu; "
           "loss %.4f -> %.4f, |g| %.4g, %zu parameters updated\n", lc->name, dn, nt,
           DS_MAX_TENSORS, np, hand_params, span, loss.loss, loss2.loss, os.grad_norm, changed);

    if (dt == DS_F64) {   /* the gradient through all 32 layers, sampled */
        ds_status fst = DS_OK;
        st = ds_model_put(m, DS_PARAMS, p0);
        if (st == DS_OK) st = ds_model_zero_grad(m);
        if (st == DS_OK) st = ds_model_forward(m, 1);
        if (st == DS_OK) st = ds_model_loss(m, 1);
        if (st == DS_OK) st = ds_model_backward(m);
        if (st == DS_OK) st = ds_model_get(m, DS_GRADS, g);
        int rough = 0, rough_off = 0;
        double e = st == DS_OK ? sample_fd(m, g, p0, &rough, &rough_off, &fst) : NAN;
        T_CHECK(st == DS_OK && fst == DS_OK, "%s: gradient check: %s", lc->name, ds_status_last_error());
        T_CHECK(e < 1e-6, "%s: one element of every tensor vs finite differences: rel err %.3g",
                lc->name, e);
        /* a few: most elements of most tensors are smooth (measured: 8 and 1 of
         * 1001 and 874 tensors have none in 8) */
        T_CHECK(rough_off == 0 && rough * 50 <= ds_model_n_params(m),
                "%s: %d tensors without a smooth element in %d, %d of them outside their "
                "differences' spread", lc->name, rough, FD_TRIES, rough_off);
        printf("%-21s %s: one element of every tensor vs finite differences: rel err %.3g "
               "(%d tensors without a smooth element: within their differences' spread)\n",
               lc->name, dn, e, rough);
    }
out:
    free(p0);
    free(g);
    free(p1);
    ds_batch_free(&b);
    ds_optim_destroy(o);
    ds_model_destroy(m);
}

/* ---- dstrain info ---- */

/* Runs `dstrain info path`, its output into out [cap]; returns the wait status. */
static int run_info(const char *dstrain, const char *path, char *out, size_t cap)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "'%s' info '%s' 2>&1", dstrain, path);
    FILE *p = popen(cmd, "r");
    if (!p)
        return -1;
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = '\0';
    return pclose(p);
}

/* A temporary file holding text; its path into path [cap]. */
static int write_temp(const char *text, char *path, size_t cap)
{
    snprintf(path, cap, "/tmp/dstrain_limits_XXXXXX.json");
    int fd = mkstemps(path, 5);
    if (fd < 0)
        return -1;
    size_t len = strlen(text);
    int ok = write(fd, text, len) == (ssize_t)len;
    close(fd);
    return ok ? 0 : -1;
}

/* dstrain info on the config json: the parameter count by hand (which
 * ds_model_config_param_count must equal) and the layers. */
static void check_info(const char *dstrain, const char *json, const ds_model_cfg *cfg)
{
    char path[64], out[16384], want[256];
    size_t hand;
    int tensors;
    count_by_hand(cfg, &hand, &tensors);
    T_CHECK(write_temp(json, path, sizeof path) == 0, "temporary config");
    int ws = run_info(dstrain, path, out, sizeof out);
    T_CHECK(ws != -1 && WIFEXITED(ws) && WEXITSTATUS(ws) == 0,
            "dstrain info %s: exit status %d (signal %d)\n%s", cfg->name,
            WIFEXITED(ws) ? WEXITSTATUS(ws) : -1, WIFSIGNALED(ws) ? WTERMSIG(ws) : 0, out);
    snprintf(want, sizeof want, "model %s: %zu parameters", cfg->name, hand);
    T_CHECK(strstr(out, want) != NULL, "dstrain info %s: no \"%s\" in:\n%s", cfg->name, want, out);
    snprintf(want, sizeof want, "rnn: %d x %s%s %d", cfg->rnn_layers, cfg->bidirectional ? "bi-" : "",
             ds_config_cell_name(cfg->cell), cfg->hidden);
    T_CHECK(strstr(out, want) != NULL, "dstrain info %s: no \"%s\" in:\n%s", cfg->name, want, out);
    snprintf(want, sizeof want, "conv[%d]", cfg->n_conv - 1);
    T_CHECK(strstr(out, want) != NULL, "dstrain info %s: no \"%s\"", cfg->name, want);
    snprintf(want, sizeof want, "fc_hidden[%d]", cfg->n_fc - 1);
    T_CHECK(strstr(out, want) != NULL, "dstrain info %s: no \"%s\"", cfg->name, want);
    if (cfg->lookahead) {
        snprintf(want, sizeof want, "lookahead: context %d", cfg->lookahead);
        T_CHECK(strstr(out, want) != NULL, "dstrain info %s: no \"%s\"", cfg->name, want);
    }
    char *first = strchr(out, '\n');
    if (first)
        *first = '\0';
    printf("dstrain info %-21s -> \"%s\"\n", cfg->name, out);
    unlink(path);
}

/* A config past the limits: a clear failure, not a crash. */
static void check_info_refuses(const char *dstrain)
{
    char json[32768], path[64], out[16384];
    make_json(json, sizeof json, "over", N_CONV, "lstm", N_RNN + 1, 0, N_FC);
    T_CHECK(write_temp(json, path, sizeof path) == 0, "temporary config");
    int ws = run_info(dstrain, path, out, sizeof out);
    T_CHECK(ws != -1 && WIFEXITED(ws) && WEXITSTATUS(ws) != 0 && strstr(out, "layers"),
            "dstrain info on 33 layers: exit status %d (signal %d):\n%s",
            WIFEXITED(ws) ? WEXITSTATUS(ws) : -1, WIFSIGNALED(ws) ? WTERMSIG(ws) : 0, out);
    char *nl = strchr(out, '\n');
    if (nl)
        *nl = '\0';
    printf("dstrain info on 33 layers -> exit %d: \"%s\"\n", WIFEXITED(ws) ? WEXITSTATUS(ws) : -1,
           out);
    unlink(path);
}

int main(int argc, char **argv)
{
    const char *dstrain = NULL, *backend = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--dstrain") && i + 1 < argc)
            dstrain = argv[++i];
        else if (argv[i][0] != '-' && !backend)
            backend = argv[i];
        else {
            fprintf(stderr, "usage: %s [--dstrain PATH] [BACKEND]\n", argv[0]);
            return 2;
        }
    }
    be = t_backend(backend);
    ds_ctx *ctx;
    T_OK(be->ctx_create(0, NULL, &ctx));
    check_refused();
    for (size_t c = 0; c < sizeof CASES / sizeof CASES[0]; c++) {
        const limit_case *lc = &CASES[c];
        char json[32768];
        ds_model_cfg cfg;
        make_json(json, sizeof json, lc->name, N_CONV, lc->cell, N_RNN, lc->lookahead, N_FC);
        ds_status st = ds_config_parse(json, lc->name, &cfg);
        T_CHECK(st == DS_OK, "%s: %s", lc->name, ds_status_last_error());
        if (st != DS_OK)
            continue;
        T_CHECK(cfg.n_conv == N_CONV && cfg.rnn_layers == N_RNN && cfg.n_fc == N_FC &&
                    cfg.lookahead == lc->lookahead && cfg.bidirectional == !lc->lookahead,
                "%s: parsed %d conv, %d rnn, %d fc, lookahead %d", lc->name, cfg.n_conv,
                cfg.rnn_layers, cfg.n_fc, cfg.lookahead);
        for (ds_dtype dt = DS_F32; dt <= DS_F64; dt++)
            if (be->ops(dt))
                check_model(lc, dt, &cfg, ctx);
        if (dstrain)
            check_info(dstrain, json, &cfg);
    }
    if (dstrain)
        check_info_refuses(dstrain);
    else
        printf("dstrain info: not checked (no --dstrain PATH)\n");
    be->ctx_destroy(ctx);
    return t_finish(__FILE__);
}
