/* test_ctc.c - CTC loss and gradient (published Graves/TensorFlow vectors,
 * brute-force path enumeration, finite differences, impossible alignments),
 * the batch total (loss_total), the greedy decoder, WER/CER edit counts and
 * the alphabet. The losses are FP64 (scalar role) in both op tables.
 *
 * usage: test_ctc [BACKEND]   (default $DSTRAIN_TEST_BACKEND, else cpu) */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "alphabet.h"
#include "backend.h"
#include "decode.h"
#include "testutil.h"

/* One batch for ctc_loss, held on the host in double. */
typedef struct {
    int t, n, c, blank;
    const double *logits;   /* [t][n][c] */
    const int *len;         /* [n] */
    const int *labels;      /* concatenated */
    const int *off;         /* [n] */
    const int *lab_len;     /* [n] */
    double scale;
} ctc_batch;

static const ds_backend *be;
static ds_ctx *ctx;

static int batch_max_label_len(const ctc_batch *b, size_t *total)
{
    int m = 0;
    *total = 0;
    for (int i = 0; i < b->n; i++) {
        m = b->lab_len[i] > m ? b->lab_len[i] : m;
        size_t end = (size_t)b->off[i] + b->lab_len[i];
        *total = end > *total ? end : *total;
    }
    return m;
}

/* Runs ctc_loss in dtype dt: loss [n] (scalar role: FP64 in both tables),
 * grad [t][n][c] (NULL: loss only). */
static ds_status run_ctc(ds_dtype dt, const ctc_batch *b, double *loss, double *grad)
{
    const ds_ops *ops = be->ops(dt);
    size_t total, tnc = (size_t)b->t * b->n * b->c;
    int maxl = batch_max_label_len(b, &total);
    void *x = NULL, *len = NULL, *lab = NULL, *off = NULL, *ll = NULL, *lo = NULL, *g = NULL,
         *w = NULL, *scale = t_scalar(be, ctx, b->scale);
    ds_status st;
    DS_TRY_GOTO(st, t_new_real(be, ctx, dt, tnc, b->logits, &x), out);
    DS_TRY_GOTO(st, t_new_int(be, ctx, b->n, b->len, &len), out);
    DS_TRY_GOTO(st, t_new_int(be, ctx, total, b->labels, &lab), out);
    DS_TRY_GOTO(st, t_new_int(be, ctx, b->n, b->off, &off), out);
    DS_TRY_GOTO(st, t_new_int(be, ctx, b->n, b->lab_len, &ll), out);
    DS_TRY_GOTO(st, be->alloc(ctx, DS_F64, b->n, &lo), out);
    if (grad)
        DS_TRY_GOTO(st, be->alloc(ctx, dt, tnc, &g), out);
    size_t ws = ops->ctc_work(b->t, b->n, b->c, maxl);
    DS_TRY_GOTO(st, be->alloc(ctx, dt, ws ? ws : 1, &w), out);
    DS_TRY_GOTO(st, ops->ctc_loss(ctx, b->t, b->n, b->c, b->blank, x, len, lab, off, ll, maxl,
                                  scale, NULL, lo, g, w), out);
    DS_TRY_GOTO(st, t_get_real(be, ctx, DS_F64, b->n, lo, loss), out);
    if (grad)
        DS_TRY_GOTO(st, t_get_real(be, ctx, dt, tnc, g, grad), out);
out:
    t_release_all(be, ctx, (void *[]){x, len, lab, off, ll, lo, g, w, scale}, 9);
    return st;
}

/* ---- (a) Graves' test vectors, as published in TensorFlow's ctc_loss_op_test:
 * T=5, 6 classes, blank = 5, inputs = log of the probability matrices. ---- */

static const double tf_prob[2][5][6] = {
    {{0.633766, 0.221185, 0.0917319, 0.0129757, 0.0142857, 0.0260553},
     {0.111121, 0.588392, 0.278779, 0.0055756, 0.00569609, 0.010436},
     {0.0357786, 0.633813, 0.321418, 0.00249248, 0.00272882, 0.0037688},
     {0.0663296, 0.643849, 0.280111, 0.00283995, 0.0035545, 0.00331533},
     {0.458235, 0.396634, 0.123377, 0.00648837, 0.00903441, 0.00623107}},
    {{0.30176, 0.28562, 0.0831517, 0.0862751, 0.0816851, 0.161508},
     {0.24082, 0.397533, 0.0557226, 0.0546814, 0.0557528, 0.19549},
     {0.230246, 0.450868, 0.0389607, 0.038309, 0.0391602, 0.202456},
     {0.280884, 0.429522, 0.0326593, 0.0339046, 0.0326856, 0.190345},
     {0.423286, 0.315517, 0.0338439, 0.0393744, 0.0339315, 0.154046}}};

static const double tf_grad[2][5][6] = {
    {{-0.366234, 0.221185, 0.0917319, 0.0129757, 0.0142857, 0.0260553},
     {0.111121, -0.411608, 0.278779, 0.0055756, 0.00569609, 0.010436},
     {0.0357786, 0.633813, -0.678582, 0.00249248, 0.00272882, 0.0037688},
     {0.0663296, -0.356151, 0.280111, 0.00283995, 0.0035545, 0.00331533},
     {-0.541765, 0.396634, 0.123377, 0.00648837, 0.00903441, 0.00623107}},
    {{-0.69824, 0.28562, 0.0831517, 0.0862751, 0.0816851, 0.161508},
     {0.24082, -0.602467, 0.0557226, 0.0546814, 0.0557528, 0.19549},
     {0.230246, 0.450868, 0.0389607, 0.038309, 0.0391602, -0.797544},
     {0.280884, -0.570478, 0.0326593, 0.0339046, 0.0326856, 0.190345},
     {-0.576714, 0.315517, 0.0338439, 0.0393744, 0.0339315, 0.154046}}};

static const double tf_loss[2] = {3.34211, 5.42262};

/* Two frames of NaN past the lengths (as in the TF test) must be ignored. */
static int test_tf_vectors(ds_dtype dt)
{
    enum { T = 7, N = 2, C = 6 };
    double x[T][N][C], want[T][N][C] = {{{0}}}, g[T][N][C], loss[N];
    for (int s = 0; s < T; s++)
        for (int i = 0; i < N; i++)
            for (int k = 0; k < C; k++) {
                x[s][i][k] = s < 5 ? log(tf_prob[i][s][k]) : NAN;
                if (s < 5)
                    want[s][i][k] = tf_grad[i][s][k];
            }
    static const int labels[] = {0, 1, 2, 1, 0, 0, 1, 1, 0};
    static const int len[] = {5, 5}, off[] = {0, 5}, lab_len[] = {5, 4};
    ctc_batch b = {T, N, C, 5, &x[0][0][0], len, labels, off, lab_len, 1.0};
    T_OK(run_ctc(dt, &b, loss, &g[0][0][0]));
    double lerr = fmax(fabs(loss[0] - tf_loss[0]), fabs(loss[1] - tf_loss[1]));
    double gerr = t_max_abs_diff(&g[0][0][0], &want[0][0][0], (size_t)T * N * C);
    printf("TF vectors %s: loss max abs err %.3g, grad max abs err %.3g\n",
           ds_dtype_name(dt), lerr, gerr);
    T_CHECK(lerr < 1e-5, "%s loss %.7f %.7f want %.5f %.5f", ds_dtype_name(dt), loss[0],
            loss[1], tf_loss[0], tf_loss[1]);
    T_CHECK(gerr < 1e-5, "%s gradient max abs err %g", ds_dtype_name(dt), gerr);
    int nonfinite = 0;   /* fmax in the max-diff skips NaN: count it apart */
    for (int k = 0; k < T * N * C; k++)
        nonfinite += !isfinite((&g[0][0][0])[k]);
    T_CHECK(nonfinite == 0, "%s %d non-finite gradients", ds_dtype_name(dt), nonfinite);
    return 0;
}

/* ---- brute force: sum over all c^T paths that collapse to the labels ---- */

static int collapses_to(const int *path, int T, int blank, const int *lab, int L)
{
    int n = 0, prev = -1;
    for (int s = 0; s < T; s++) {
        if (path[s] != blank && path[s] != prev) {
            if (n >= L || lab[n] != path[s])
                return 0;
            n++;
        }
        prev = path[s];
    }
    return n == L;
}

/* -log p(lab | x) of one utterance x [T][c] by enumeration. */
static double brute_loss(const double *x, int T, int c, int blank, const int *lab, int L)
{
    double lp[8][4];
    for (int s = 0; s < T; s++) {
        double z = 0;
        for (int k = 0; k < c; k++)
            z += exp(x[s * c + k]);
        for (int k = 0; k < c; k++)
            lp[s][k] = x[s * c + k] - log(z);
    }
    int path[8] = {0};
    double p = 0;
    for (long code = 0, paths = lround(pow(c, T)); code < paths; code++) {
        long r = code;
        double lpath = 0;
        for (int s = 0; s < T; s++, r /= c) {
            path[s] = (int)(r % c);
            lpath += lp[s][path[s]];
        }
        if (collapses_to(path, T, blank, lab, L))
            p += exp(lpath);
    }
    return -log(p);
}

static int test_brute_force(void)
{
    enum { T = 6, N = 5, C = 4 };
    ds_rng r;
    ds_rng_seed(&r, 7);
    double x[T * N * C], loss[N], loss32[N], one[T * C];
    t_fill_uniform(&r, x, T * N * C, -2, 2);
    /* repeats, an empty label, a blank in the middle of the class range,
     * and a sequence needing every frame (A A B B: 4 labels + 2 blanks). */
    static const int labels[] = {1, 1, 3, 3, 1, 0, 1, 1, 3, 3};
    static const int len[] = {6, 5, 6, 3, 6}, off[] = {0, 3, 5, 5, 6},
                     lab_len[] = {3, 2, 0, 1, 4};
    ctc_batch b = {T, N, C, 2, x, len, labels, off, lab_len, 1.0};
    T_OK(run_ctc(DS_F64, &b, loss, NULL));
    T_OK(run_ctc(DS_F32, &b, loss32, NULL));
    double worst = 0, worst32 = 0;
    for (int i = 0; i < N; i++) {
        for (int s = 0; s < len[i]; s++)
            memcpy(one + s * C, x + ((size_t)s * N + i) * C, C * sizeof(double));
        double want = brute_loss(one, len[i], C, 2, labels + off[i], lab_len[i]);
        T_CHECK(fabs(loss[i] - want) <= 1e-12 * fabs(want), "brute force utt %d: %.15g want %.15g",
                i, loss[i], want);
        T_CHECK(fabs(loss32[i] - want) <= 1e-5 * fabs(want), "brute force f32 utt %d: %.8g want %.8g",
                i, loss32[i], want);
        worst = fmax(worst, fabs(loss[i] - want) / fabs(want));
        worst32 = fmax(worst32, fabs(loss32[i] - want) / fabs(want));
    }
    printf("brute force: loss max rel err float64 %.3g, float32 %.3g\n", worst, worst32);
    return 0;
}

/* ---- (b) finite differences in FP64 ---- */

typedef struct {
    ctc_batch b;
    double *x, *loss;
} fd_arg;

static double fd_loss(void *a_)
{
    fd_arg *a = a_;
    a->b.logits = a->x;
    if (run_ctc(DS_F64, &a->b, a->loss, NULL) != DS_OK)
        return NAN;
    double s = 0;
    for (int i = 0; i < a->b.n; i++)
        s += a->loss[i];
    return a->b.scale * s;
}

static int test_finite_differences(int seed)
{
    enum { T = 9, N = 5, C = 6 };
    ds_rng r;
    ds_rng_seed(&r, (uint64_t)seed);
    double x[T * N * C], g[T * N * C], fd[T * N * C], loss[N];
    int labels[N * 4], len[N], off[N], lab_len[N], total = 0;
    for (int i = 0; i < N; i++) {
        len[i] = i == 0 ? T : ds_rng_int(&r, 4, T);
        lab_len[i] = i == 1 ? 0 : ds_rng_int(&r, 1, 3);
        off[i] = total;
        for (int k = 0; k < lab_len[i]; k++) {
            /* every other utterance repeats its first label */
            int v = (i & 1) && k > 0 ? labels[total - 1] : ds_rng_int(&r, 1, C - 1);
            labels[total++] = v;
        }
    }
    t_fill_uniform(&r, x, T * N * C, -3, 3);
    fd_arg a = {{T, N, C, 0, x, len, labels, off, lab_len, 0.37}, x, loss};
    T_OK(run_ctc(DS_F64, &a.b, loss, g));
    t_fd_grad(fd_loss, &a, x, T * N * C, 1e-5, fd);
    double err = t_rel_err(g, fd, T * N * C);
    printf("finite differences seed %d: rel err %.3g\n", seed, err);
    T_CHECK(err < 1e-6, "seed %d: gradient vs finite differences rel err %g", seed, err);
    for (int i = 0; i < N; i++)
        T_CHECK(isfinite(loss[i]) && loss[i] > 0, "seed %d utt %d loss %g", seed, i, loss[i]);
    return 0;
}

/* ---- (c) impossible alignments and zero lengths ---- */

static int test_impossible(ds_dtype dt)
{
    enum { T = 5, N = 3, C = 4 };
    ds_rng r;
    ds_rng_seed(&r, 11);
    double x[T * N * C], g[T * N * C], loss[N];
    t_fill_uniform(&r, x, T * N * C, -2, 2);
    /* utterance 1: labels 2 2 3 need 4 frames, it has 3 */
    static const int labels[] = {1, 3, 2, 2, 3, 3, 1};
    static const int len[] = {5, 3, 4}, off[] = {0, 2, 5}, lab_len[] = {2, 3, 2};
    ctc_batch b = {T, N, C, 0, x, len, labels, off, lab_len, 1.0};
    T_OK(run_ctc(dt, &b, loss, g));
    T_CHECK(isinf(loss[1]) && loss[1] > 0, "%s impossible loss %g", ds_dtype_name(dt), loss[1]);
    int nonzero = 0;
    for (int s = 0; s < T; s++)
        for (int k = 0; k < C; k++)
            nonzero += g[((size_t)s * N + 1) * C + k] != 0;
    T_CHECK(nonzero == 0, "%s impossible utterance has %d nonzero gradients", ds_dtype_name(dt),
            nonzero);

    /* The others alone (utterance 1 given a possible label) match exactly. */
    static const int lab2[] = {1, 3, 2, 3, 1}, off2[] = {0, 2, 3}, ll2[] = {2, 1, 2};
    double g2[T * N * C], loss2[N];
    ctc_batch b2 = {T, N, C, 0, x, len, lab2, off2, ll2, 1.0};
    T_OK(run_ctc(dt, &b2, loss2, g2));
    int same = loss[0] == loss2[0] && loss[2] == loss2[2];
    for (int s = 0; s < T; s++)
        for (int i = 0; i < N; i += 2)
            for (int k = 0; k < C; k++)
                same &= g[((size_t)s * N + i) * C + k] == g2[((size_t)s * N + i) * C + k];
    T_CHECK(same, "%s impossible utterance changed its neighbours", ds_dtype_name(dt));
    return 0;
}

/* A NaN or +Inf logit in any frame of an utterance (a diverged model) makes
 * its loss NaN and puts a NaN in its gradient, never a loss of +inf with a
 * zero gradient as for an impossible alignment: the step must be skipped,
 * not trained on the other utterances as if nothing happened. */
static int test_bad_logits(ds_dtype dt)
{
    enum { T = 5, N = 3, C = 4 };
    ds_rng r;
    ds_rng_seed(&r, 12);
    double x[T * N * C], g[T * N * C], loss[N], clean_g[T * N * C], clean[N];
    t_fill_uniform(&r, x, T * N * C, -2, 2);
    static const int labels[] = {1, 3, 2, 3, 1}, len[] = {5, 3, 4}, off[] = {0, 2, 3},
                     lab_len[] = {2, 1, 2};
    ctc_batch b = {T, N, C, 0, x, len, labels, off, lab_len, 1.0};
    T_OK(run_ctc(dt, &b, clean, clean_g));
    const double bad[] = {NAN, INFINITY};
    for (int v = 0; v < 2; v++)
        for (int s = 0; s < T; s++) {
            double y[T * N * C];
            memcpy(y, x, sizeof y);
            y[((size_t)s * N + 0) * C + (s % C)] = bad[v];   /* utterance 0, frame s */
            b.logits = y;
            T_OK(run_ctc(dt, &b, loss, g));
            int nan_g = 0, others_same = loss[1] == clean[1] && loss[2] == clean[2];
            for (int f = 0; f < T; f++)
                for (int k = 0; k < C; k++) {
                    nan_g += isnan(g[((size_t)f * N + 0) * C + k]);
                    for (int i = 1; i < N; i++)
                        others_same &= g[((size_t)f * N + i) * C + k] ==
                                       clean_g[((size_t)f * N + i) * C + k];
                }
            T_CHECK(isnan(loss[0]) && nan_g > 0, "%s %g logit at frame %d: loss %g, %d NaN gradients",
                    ds_dtype_name(dt), bad[v], s, loss[0], nan_g);
            T_CHECK(others_same, "%s %g logit at frame %d changed the other utterances",
                    ds_dtype_name(dt), bad[v], s);
        }
    return 0;
}

/* Labels 2 2 in exactly 3 frames: the single path is 2 _ 2. */
static int test_exact_fit(ds_dtype dt)
{
    enum { T = 3, C = 3 };
    static const double x[T * C] = {0.1, -0.4, 0.9, 0.3, 0.2, -1.0, -0.5, 0.0, 0.7};
    static const int labels[] = {2, 2}, len[] = {3}, off[] = {0}, lab_len[] = {2};
    double loss, g[T * C], want = 0;
    static const int path[T] = {2, 0, 2};
    for (int s = 0; s < T; s++) {
        double z = 0;
        for (int k = 0; k < C; k++)
            z += exp(x[s * C + k]);
        want -= x[s * C + path[s]] - log(z);
    }
    ctc_batch b = {T, 1, C, 0, x, len, labels, off, lab_len, 1.0};
    T_OK(run_ctc(dt, &b, &loss, g));
    double tol = dt == DS_F64 ? 1e-13 : 1e-6;
    T_CHECK(fabs(loss - want) < tol * want, "%s exact fit loss %.10g want %.10g",
            ds_dtype_name(dt), loss, want);
    /* one path: gradient = softmax - one-hot of the path */
    double gerr = 0;
    for (int s = 0; s < T; s++) {
        double z = 0;
        for (int k = 0; k < C; k++)
            z += exp(x[s * C + k]);
        for (int k = 0; k < C; k++)
            gerr = fmax(gerr, fabs(g[s * C + k] - (exp(x[s * C + k]) / z - (k == path[s]))));
    }
    T_CHECK(gerr < tol, "%s exact fit gradient err %g", ds_dtype_name(dt), gerr);
    return 0;
}

/* Zero frames: empty label has probability 1, any other none. */
static int test_zero_frames(void)
{
    enum { T = 2, N = 2, C = 3 };
    double x[T * N * C], g[T * N * C], loss[N];
    for (int k = 0; k < T * N * C; k++)
        x[k] = 0.1 * k;
    static const int labels[] = {1}, len[] = {0, 0}, off[] = {0, 0}, lab_len[] = {0, 1};
    ctc_batch b = {T, N, C, 0, x, len, labels, off, lab_len, 1.0};
    T_OK(run_ctc(DS_F64, &b, loss, g));
    T_CHECK(loss[0] == 0 && isinf(loss[1]), "zero frames: loss %g %g", loss[0], loss[1]);
    double zero[T * N * C] = {0};
    T_CHECK(t_max_abs_diff(g, zero, T * N * C) == 0, "zero frames: nonzero gradient");
    return 0;
}

static int count_nan(const double *v, int n)
{
    int k = 0;
    for (int i = 0; i < n; i++)
        k += isnan(v[i]) != 0;
    return k;
}

/* A label equal to blank or out of range is refused: by an error on the
 * cpu backend; on cuda (which cannot see device data without waiting) by a
 * NaN loss and an all-NaN gradient for that utterance (backend.h). */
static void expect_refused(const ctc_batch *b, const char *what)
{
    double loss[1] = {0}, g[6] = {0};
    const ds_status st = run_ctc(DS_F64, b, loss, g);
    if (strcmp(be->name, "cpu") == 0) {
        T_CHECK(st == DS_ERR_ARG, "%s accepted", what);
        return;
    }
    T_CHECK(st == DS_OK, "%s: %s", what, ds_status_last_error());
    T_CHECK(isnan(loss[0]), "%s accepted: loss %g", what, loss[0]);
    T_CHECK(count_nan(g, 6) == 6, "%s accepted: %d of 6 gradient elements NaN", what,
            count_nan(g, 6));
}

static int test_bad_labels(void)
{
    static double x[6] = {0};
    static const int blank_label[] = {0}, big[] = {3}, len[] = {2}, off[] = {0}, ll[] = {1};
    ctc_batch b = {2, 1, 3, 0, x, len, blank_label, off, ll, 1.0};
    expect_refused(&b, "blank as a label");
    b.labels = big;
    expect_refused(&b, "label 3 of 3 classes");
    return 0;
}

/* ---- (c') the batch total: loss_total ---- */

/* loss [n] (FP64) -> out [DS_LOSS_SCALARS] (FP64) in table dt; out starts as NaN. */
static ds_status run_total(ds_dtype dt, int n, double norm, const double *loss, double *out)
{
    void *lo = NULL, *o = NULL, *d_norm = t_scalar(be, ctx, norm);
    const double poison[DS_LOSS_SCALARS] = {NAN, NAN};
    ds_status st;
    DS_TRY_GOTO(st, t_new_real(be, ctx, DS_F64, (size_t)n, loss, &lo), done);
    DS_TRY_GOTO(st, t_new_real(be, ctx, DS_F64, DS_LOSS_SCALARS, poison, &o), done);
    DS_TRY_GOTO(st, be->ops(dt)->loss_total(ctx, n, d_norm, lo, o), done);
    st = t_get_real(be, ctx, DS_F64, DS_LOSS_SCALARS, o, out);
done:
    t_release_all(be, ctx, (void *[]){lo, o, d_norm}, 3);
    return st;
}

/* Finite losses summed in order and divided by the norm (the global batch
 * size, not the count of finite ones); infinite ones counted, not summed; a
 * NaN makes the mean NaN (a broken model, not an impossible utterance). */
static int test_loss_total(ds_dtype dt)
{
    const char *dn = ds_dtype_name(dt);
    double out[DS_LOSS_SCALARS];
    const double l1[] = {1.5, INFINITY, 2.25, 0.125, INFINITY};
    T_OK(run_total(dt, 5, 8, l1, out));
    T_CHECK(out[DS_LOSS_MEAN] == (1.5 + 2.25 + 0.125) / 8 && out[DS_LOSS_INFINITE] == 2,
            "%s loss_total: mean %.17g, %g infinite; want %.17g, 2", dn, out[DS_LOSS_MEAN],
            out[DS_LOSS_INFINITE], (1.5 + 2.25 + 0.125) / 8);
    /* in order: (1e16 + 1) rounds to 1e16, then -1e16 leaves 0 (1 in another order) */
    const double l2[] = {1e16, 1, -1e16};
    T_OK(run_total(dt, 3, 3, l2, out));
    T_CHECK(out[DS_LOSS_MEAN] == 0 && out[DS_LOSS_INFINITE] == 0,
            "%s loss_total: mean %.17g (want 0: summed in order), %g infinite", dn,
            out[DS_LOSS_MEAN], out[DS_LOSS_INFINITE]);
    const double l3[] = {INFINITY, INFINITY};
    T_OK(run_total(dt, 2, 4, l3, out));
    T_CHECK(out[DS_LOSS_MEAN] == 0 && out[DS_LOSS_INFINITE] == 2,
            "%s loss_total, all infinite: mean %g, %g infinite", dn, out[DS_LOSS_MEAN],
            out[DS_LOSS_INFINITE]);
    const double l4[] = {1, NAN, INFINITY};
    T_OK(run_total(dt, 3, 3, l4, out));
    T_CHECK(isnan(out[DS_LOSS_MEAN]) && out[DS_LOSS_INFINITE] == 1,
            "%s loss_total with a NaN: mean %g (want NaN), %g infinite (want 1)", dn,
            out[DS_LOSS_MEAN], out[DS_LOSS_INFINITE]);
    return 0;
}

/* ---- (d) decoding, edit distances, alphabet ---- */

static void test_greedy(void)
{
    /* frames' argmax: A A _ A B _ B B (A=2, B=3, blank 0), stride 6 > c = 4
     * with large junk past c that must be ignored. */
    static const int best[] = {2, 2, 0, 2, 3, 0, 3, 3};
    enum { T = 8, S = 6, C = 4 };
    double sc[T * S];
    for (int s = 0; s < T; s++)
        for (int k = 0; k < S; k++)
            sc[s * S + k] = k >= C ? 100.0 : (k == best[s] ? 1.0 : -1.0 + 0.1 * k);
    int out[T];
    int n = ds_decode_greedy(sc, T, S, C, 0, out);
    T_CHECK(n == 4 && out[0] == 2 && out[1] == 2 && out[2] == 3 && out[3] == 3,
            "greedy AA_AB_BB: %d labels", n);

    for (int k = 0; k < T * S; k++)
        sc[k] = k % S == 0 ? 1.0 : 0.0;   /* all blank */
    T_CHECK(ds_decode_greedy(sc, T, S, C, 0, out) == 0, "greedy all blank");
    for (int k = 0; k < T * S; k++)
        sc[k] = 0.5;                      /* ties: lowest index, the blank */
    T_CHECK(ds_decode_greedy(sc, T, S, C, 0, out) == 0, "greedy ties");
    T_CHECK(ds_decode_greedy(sc, T, S, C, 3, out) == 1 && out[0] == 0, "greedy ties, blank 3");
    T_CHECK(ds_decode_greedy(sc, 0, S, C, 0, out) == 0, "greedy no frames");

    /* the same path from classes already chosen (the backend's argmax), two
     * utterances interleaved [t][2] as the model's frames are */
    int both[2 * T];
    for (int s = 0; s < T; s++)
        both[2 * s] = best[s], both[2 * s + 1] = (s % 3 == 0) ? 1 : 0;
    n = ds_decode_collapse(both, T, 2, 0, out);
    T_CHECK(n == 4 && out[0] == 2 && out[1] == 2 && out[2] == 3 && out[3] == 3,
            "collapse AA_AB_BB: %d labels", n);
    n = ds_decode_collapse(both + 1, T, 2, 0, out);   /* 1 _ _ 1 _ _ 1 _ */
    T_CHECK(n == 3 && out[0] == 1 && out[1] == 1 && out[2] == 1, "collapse 1__1__1_: %d labels", n);
    T_CHECK(ds_decode_collapse(both, 0, 2, 0, out) == 0, "collapse no frames");

    /* through the alphabet: "HI" */
    double sc2[5 * DS_ALPHABET_SIZE] = {0};
    static const int path[] = {9, 9, DS_BLANK, 10, 10};   /* H H _ I I */
    for (int s = 0; s < 5; s++)
        sc2[s * DS_ALPHABET_SIZE + path[s]] = 1;
    int lab[5];
    char text[6];
    n = ds_decode_greedy(sc2, 5, DS_ALPHABET_SIZE, DS_ALPHABET_SIZE, DS_BLANK, lab);
    ds_alphabet_labels_to_text(lab, n, text);
    T_CHECK(strcmp(text, "HI") == 0, "greedy text '%s'", text);
}

static void check_words(const char *ref, const char *hyp, int edits, int words)
{
    int w = -1, e = ds_decode_word_edits(ref, hyp, &w);
    T_CHECK(e == edits && w == words, "words '%s' vs '%s': %d edits of %d, want %d of %d", ref,
            hyp, e, w, edits, words);
}

static void check_chars(const char *ref, const char *hyp, int edits, int chars)
{
    int n = -1, e = ds_decode_char_edits(ref, hyp, &n);
    T_CHECK(e == edits && n == chars, "chars '%s' vs '%s': %d edits of %d, want %d of %d", ref,
            hyp, e, n, edits, chars);
}

/* 2000 words, every 10th replaced in the hypothesis: 200 edits. */
static void test_long_transcript(void)
{
    enum { W = 2000 };
    char *ref = malloc(W * 6 + 1), *hyp = malloc(W * 6 + 1);
    char *pr = ref, *ph = hyp;
    for (int k = 0; k < W; k++) {
        pr += sprintf(pr, "%s%c%c%c", k ? " " : "", 'A' + k % 26, 'A' + k / 26 % 26, 'Q');
        ph += sprintf(ph, "%s%c%c%c", k ? " " : "", 'A' + k % 26, 'A' + k / 26 % 26,
                      k % 10 ? 'Q' : 'X');
    }
    check_words(ref, hyp, W / 10, W);
    check_chars(ref, hyp, W / 10, 3 * W);
    free(ref);
    free(hyp);
}

static void test_edit_counts(void)
{
    check_words("THE CAT SAT", "THE CAT SIT", 1, 3);
    check_words("THE CAT", "THE BIG CAT", 1, 2);        /* insertion */
    check_words("THE BIG CAT", "THE CAT", 1, 3);        /* deletion */
    check_words("A B C", "", 3, 3);                     /* empty hypothesis */
    check_words("", "A B", 2, 0);                       /* empty reference */
    check_words("", "", 0, 0);
    check_words("  THE   CAT ", "THE CAT", 0, 2);       /* runs of spaces */
    check_words("A B C D", "B C D E", 2, 4);
    check_words("THE CAT", "THECAT", 2, 2);

    check_chars("THE CAT SAT", "THE CAT SIT", 1, 9);
    check_chars("KITTEN", "SITTING", 3, 6);
    check_chars("AB CD", "ABCD", 0, 4);                 /* spaces do not count */
    check_chars("ABC", "", 3, 3);
    check_chars("", "XY", 2, 0);
    check_chars("ABC", "CBA", 2, 3);
    test_long_transcript();

    T_CHECK(ds_decode_word_edits("A B", "A", NULL) == 1, "NULL ref_words");
    T_CHECK(ds_decode_char_edits("A B", "A", NULL) == 1, "NULL ref_chars");
}

static void test_alphabet(void)
{
    T_CHECK(strlen(ds_alphabet) == DS_ALPHABET_SIZE, "alphabet size %zu", strlen(ds_alphabet));
    T_CHECK(ds_alphabet[DS_BLANK] == '_' && ds_alphabet[1] == '\'' && ds_alphabet[2] == 'A' &&
                ds_alphabet[27] == 'Z' && ds_alphabet[28] == ' ',
            "alphabet order");
    for (int k = 0; k < DS_ALPHABET_SIZE; k++)
        T_CHECK(ds_alphabet_index(ds_alphabet[k]) == k, "index of '%c'", ds_alphabet[k]);
    T_CHECK(ds_alphabet_index('q') == ds_alphabet_index('Q'), "lower case folds");
    T_CHECK(ds_alphabet_index('1') == -1 && ds_alphabet_index('.') == -1, "absent symbols");

    int lab[32];
    char back[33];
    int n = ds_alphabet_text_to_labels("it's a Test", lab, 32);
    ds_alphabet_labels_to_text(lab, n > 0 ? n : 0, back);
    T_CHECK(n == 11 && strcmp(back, "IT'S A TEST") == 0, "round trip: %d '%s'", n, back);
    T_CHECK(ds_alphabet_text_to_labels("A1", lab, 32) == -1, "digit rejected");
    T_CHECK(ds_alphabet_text_to_labels("ABC", lab, 2) == -1, "capacity respected");
    T_CHECK(ds_alphabet_text_to_labels("", lab, 0) == 0, "empty text");
}

int main(int argc, char **argv)
{
    be = t_backend(argc > 1 ? argv[1] : NULL);
    T_CHECK(be->ops(DS_F64) && be->ops(DS_F32), "%s backend lacks float64 or float32 ops",
            be->name);
    if (!be->ops(DS_F64) || !be->ops(DS_F32))
        return t_finish("test_ctc");
    T_OK(be->ctx_create(0, NULL, &ctx));

    test_tf_vectors(DS_F64);
    test_tf_vectors(DS_F32);
    test_brute_force();
    for (int seed = 1; seed <= 4; seed++)
        test_finite_differences(seed);
    test_impossible(DS_F64);
    test_impossible(DS_F32);
    test_bad_logits(DS_F64);
    test_bad_logits(DS_F32);
    for (ds_dtype dt = DS_F16; dt <= DS_BF16; dt++)
        if (be->ops(dt))   /* the 16-bit tables, where the backend has them */
            test_bad_logits(dt);
    test_exact_fit(DS_F64);
    test_exact_fit(DS_F32);
    test_zero_frames();
    test_bad_labels();
    test_loss_total(DS_F64);
    test_loss_total(DS_F32);
    test_greedy();
    test_edit_counts();
    test_alphabet();

    be->ctx_destroy(ctx);
    return t_finish("test_ctc");
}
