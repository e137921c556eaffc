/* test_ops_dense.c - linear, Hardtanh (clipped ReLU and ReLU), dropout, the
 * residual sum, the conv-to-sequence layout, context windows and the padding
 * mask of a backend: backward against central finite differences in FP64
 * (relative error < 1e-6), forward against direct loops, FP32 against FP64;
 * dropout's generator against Philox4x32-10's published answers. Every
 * tensor goes through backend memory (from_host / to_host).
 *
 * usage: test_ops_dense [BACKEND]   (default $DSTRAIN_TEST_BACKEND, else cpu) */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "dropout_mask.h"
#include "testutil.h"

/* T_OK returns from main; in the void checks a failed call is one failed check. */
#define OK(expr) T_CHECK((expr) == DS_OK, "%s: %s", #expr, ds_status_last_error())

static const ds_backend *be;
static ds_ctx *ctx;
static const ds_ops *op64, *op32;

/* sum(y * r): the scalar every finite-difference check differentiates. */
static double dot(const double *a, const double *b, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += a[i] * b[i];
    return s;
}

/* ---- backend buffers ---- */

/* A failed transfer is a failure; a good one is no check of its own. */
static void must(ds_status st, const char *what)
{
    if (st == DS_OK)
        return;
    t_failures++;
    fprintf(stderr, "FAIL %s: %s: %s\n", what, ds_status_name(st), ds_status_last_error());
}

/* A new backend buffer of n elements of dt holding h (zeros when h is NULL);
 * NULL (and a failed check) when that fails. */
static void *up(ds_dtype dt, const double *h, size_t n)
{
    void *d = NULL;
    ds_status st = h ? t_new_real(be, ctx, dt, n, h, &d) : be->alloc(ctx, dt, n ? n : 1, &d);
    must(st, "upload");
    if (st != DS_OK && d) {
        be->release(ctx, d);
        d = NULL;
    }
    return d;
}

static void down(ds_dtype dt, const void *d, double *h, size_t n)
{
    must(t_get_real(be, ctx, dt, n, d, h), "download");
}

static void drop(void *d)
{
    if (d)
        be->release(ctx, d);
}

/* ---- linear: y [m][o] = x [m][k] w^T [k][o] + b [o] ---- */

enum { LM = 5, LK = 4, LO = 3 };
static double lx[LM * LK], lw[LO * LK], lb[LO], lr[LM * LO];

/* y = linear(x, w, b) in dt, through backend buffers; b may be NULL. */
static ds_status linear_fwd(ds_dtype dt, const double *x, const double *w, const double *b,
                            double *y)
{
    const ds_ops *op = be->ops(dt);
    void *X = up(dt, x, LM * LK), *W = up(dt, w, LO * LK), *B = b ? up(dt, b, LO) : NULL;
    void *Y = up(dt, NULL, LM * LO);
    ds_status st = op->linear_fwd(ctx, LM, LK, LO, X, W, B, Y);
    if (st == DS_OK)
        st = t_get_real(be, ctx, dt, LM * LO, Y, y);
    drop(X), drop(W), drop(B), drop(Y);
    return st;
}

/* dx (or NULL), dw, db (or NULL) accumulate onto their host contents. */
static ds_status linear_bwd(const double *dy, double *dx, double *dw, double *db)
{
    void *X = up(DS_F64, lx, LM * LK), *W = up(DS_F64, lw, LO * LK), *DY = up(DS_F64, dy, LM * LO);
    void *DX = dx ? up(DS_F64, dx, LM * LK) : NULL, *DW = up(DS_F64, dw, LO * LK);
    void *DB = db ? up(DS_F64, db, LO) : NULL;
    ds_status st = op64->linear_bwd(ctx, LM, LK, LO, X, W, DY, DX, DW, DB);
    if (st == DS_OK && dx)
        st = t_get_real(be, ctx, DS_F64, LM * LK, DX, dx);
    if (st == DS_OK)
        st = t_get_real(be, ctx, DS_F64, LO * LK, DW, dw);
    if (st == DS_OK && db)
        st = t_get_real(be, ctx, DS_F64, LO, DB, db);
    drop(X), drop(W), drop(DY), drop(DX), drop(DW), drop(DB);
    return st;
}

static double linear_loss(void *arg)
{
    (void)arg;
    double y[LM * LO];
    if (linear_fwd(DS_F64, lx, lw, lb, y) != DS_OK)
        return NAN;
    return dot(y, lr, LM * LO);
}

static void check_linear(ds_rng *rng)
{
    t_fill_uniform(rng, lx, LM * LK, -1, 1);
    t_fill_uniform(rng, lw, LO * LK, -1, 1);
    t_fill_uniform(rng, lb, LO, -1, 1);
    t_fill_uniform(rng, lr, LM * LO, -1, 1);
    double y[LM * LO];
    OK(linear_fwd(DS_F64, lx, lw, lb, y));
    double worst = 0;
    for (int i = 0; i < LM; i++)
        for (int j = 0; j < LO; j++) {
            double want = lb[j];
            for (int k = 0; k < LK; k++)
                want += lx[i * LK + k] * lw[j * LK + k];
            worst = fmax(worst, fabs(want - y[i * LO + j]));
        }
    T_CHECK(worst < 1e-14, "linear forward differs from the direct sum by %.3g", worst);

    /* gradients start non-zero: they must accumulate */
    double dx[LM * LK], dw[LO * LK], db[LO], fd[LM * LK];
    for (size_t i = 0; i < LM * LK; i++) dx[i] = 0.5;
    for (size_t i = 0; i < LO * LK; i++) dw[i] = 0.5;
    for (size_t i = 0; i < LO; i++) db[i] = 0.5;
    OK(linear_bwd(lr, dx, dw, db));
    for (size_t i = 0; i < LM * LK; i++) dx[i] -= 0.5;
    for (size_t i = 0; i < LO * LK; i++) dw[i] -= 0.5;
    for (size_t i = 0; i < LO; i++) db[i] -= 0.5;
    t_fd_grad(linear_loss, NULL, lx, LM * LK, 1e-6, fd);
    double ex = t_rel_err(dx, fd, LM * LK);
    T_CHECK(ex < 1e-6, "linear dx: %.3g", ex);
    t_fd_grad(linear_loss, NULL, lw, LO * LK, 1e-6, fd);
    double ew = t_rel_err(dw, fd, LO * LK);
    T_CHECK(ew < 1e-6, "linear dw: %.3g", ew);
    t_fd_grad(linear_loss, NULL, lb, LO, 1e-6, fd);
    double eb = t_rel_err(db, fd, LO);
    T_CHECK(eb < 1e-6, "linear db: %.3g", eb);

    /* no bias, no dx */
    double y2[LM * LO], dw2[LO * LK] = {0};
    OK(linear_fwd(DS_F64, lx, lw, NULL, y2));
    T_CHECK(fabs(y2[0] + lb[0] - y[0]) < 1e-14, "linear without bias");
    OK(linear_bwd(lr, NULL, dw2, NULL));
    T_CHECK(t_max_abs_diff(dw2, dw, LO * LK) < 1e-14, "linear dw without dx/db");

    /* fp32: the inputs rounded to float, against the fp64 result */
    double y32[LM * LO];
    OK(linear_fwd(DS_F32, lx, lw, lb, y32));
    double e32 = t_rel_err(y32, y, LM * LO);
    T_CHECK(e32 < 1e-6, "linear fp32 vs fp64: %.3g", e32);
    printf("linear: forward max abs err %.2e; fd rel err dx %.2e dw %.2e db %.2e; "
           "fp32 rel err %.2e\n", worst, ex, ew, eb, e32);
}

/* ---- hardtanh ---- */

enum { HN = 40 };
static double hx[HN], hr[HN];

static ds_status hardtanh_fwd(const double *x, double *y)
{
    void *X = up(DS_F64, x, HN), *Y = up(DS_F64, NULL, HN);
    ds_status st = op64->hardtanh_fwd(ctx, HN, 0, 20, X, Y);
    if (st == DS_OK)
        st = t_get_real(be, ctx, DS_F64, HN, Y, y);
    drop(X), drop(Y);
    return st;
}

static double hardtanh_loss(void *arg)
{
    (void)arg;
    double y[HN];
    if (hardtanh_fwd(hx, y) != DS_OK)
        return NAN;
    return dot(y, hr, HN);
}

static void check_hardtanh(ds_rng *rng)
{
    /* values on both sides of both kinks, none within the step of one */
    for (int i = 0; i < HN; i++) {
        double v = ds_rng_range(rng, -5, 25);
        hx[i] = (fabs(v) < 0.01 || fabs(v - 20) < 0.01) ? v + 0.1 : v;
    }
    t_fill_uniform(rng, hr, HN, -1, 1);
    double y[HN], dx[HN], fd[HN];
    OK(hardtanh_fwd(hx, y));
    int clamped_lo = 0, clamped_hi = 0, wrong = 0;
    for (int i = 0; i < HN; i++) {
        double want = hx[i] < 0 ? 0 : (hx[i] > 20 ? 20 : hx[i]);
        wrong += y[i] != want;
        clamped_lo += hx[i] < 0;
        clamped_hi += hx[i] > 20;
    }
    T_CHECK(wrong == 0 && clamped_lo > 0 && clamped_hi > 0, "hardtanh forward: %d wrong", wrong);
    for (int i = 0; i < HN; i++)
        dx[i] = 1;
    void *Y = up(DS_F64, y, HN), *DY = up(DS_F64, hr, HN), *DX = up(DS_F64, dx, HN);
    OK(op64->hardtanh_bwd(ctx, HN, 0, 20, Y, DY, DX));
    down(DS_F64, DX, dx, HN);
    drop(Y), drop(DY), drop(DX);
    for (int i = 0; i < HN; i++)
        dx[i] -= 1;
    t_fd_grad(hardtanh_loss, NULL, hx, HN, 1e-6, fd);
    double e = t_rel_err(dx, fd, HN);
    T_CHECK(e < 1e-6, "hardtanh dx: %.3g", e);
    double inplace[HN];
    void *IP = up(DS_F64, hx, HN);
    OK(op64->hardtanh_fwd(ctx, HN, 0, 20, IP, IP));
    down(DS_F64, IP, inplace, HN);
    drop(IP);
    T_CHECK(memcmp(inplace, y, sizeof y) == 0, "hardtanh in place differs");
    printf("hardtanh: fd rel err dx %.2e\n", e);
}

/* ReLU is Hardtanh with no upper bound (Jasper, Wav2Letter+): nothing large
 * is clamped, and the gradient passes wherever y > 0. */
static void check_relu(ds_rng *rng)
{
    double x[HN], y[HN], dy[HN], dx[HN] = {0};
    t_fill_uniform(rng, x, HN, -1e6, 1e6);
    t_fill_uniform(rng, dy, HN, -1, 1);
    void *X = up(DS_F64, x, HN), *Y = up(DS_F64, NULL, HN), *DY = up(DS_F64, dy, HN);
    void *DX = up(DS_F64, dx, HN);
    OK(op64->hardtanh_fwd(ctx, HN, 0, INFINITY, X, Y));
    OK(op64->hardtanh_bwd(ctx, HN, 0, INFINITY, Y, DY, DX));
    down(DS_F64, Y, y, HN);
    down(DS_F64, DX, dx, HN);
    drop(X), drop(Y), drop(DY), drop(DX);
    int wrong = 0;
    for (int i = 0; i < HN; i++)
        wrong += y[i] != (x[i] > 0 ? x[i] : 0) || dx[i] != (x[i] > 0 ? dy[i] : 0);
    T_CHECK(wrong == 0, "ReLU (hardtanh to +inf): %d elements wrong", wrong);
}

/* ---- dropout ---- */

/* Random123's known answers for Philox4x32-10 (counter, key -> output). */
static void check_philox(void)
{
    static const uint32_t kat[3][10] = {
        {0, 0, 0, 0, 0, 0, 0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8},
        {0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff,
         0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd},
        {0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344, 0xa4093822, 0x299f31d0,
         0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}};
    for (int i = 0; i < 3; i++) {
        uint32_t out[4];
        ds_dropout_philox(kat[i], kat[i] + 4, out);
        T_CHECK(memcmp(out, kat[i] + 6, sizeof out) == 0,
                "Philox4x32-10 known answer %d: %08x %08x %08x %08x", i, out[0], out[1], out[2],
                out[3]);
    }
}

enum { DN = 1003 };   /* not a multiple of 4: the last Philox block is partial */
static double dpx[DN], dpr[DN];
static const double DP = 0.3;
#define DSTEP 17u
static ds_dropout_key DKEY;          /* its step DSTEP in a backend scalar (dkey_make) */
static void *dstep, *dstep_next;     /* backend scalars holding DSTEP, DSTEP + 1 */

/* DKEY, and the steps its variants read: the ops read the step in backend
 * memory (a per-batch scalar). */
static void dkey_make(void)
{
    dstep = t_scalar(be, ctx, DSTEP), dstep_next = t_scalar(be, ctx, DSTEP + 1);
    DKEY = (ds_dropout_key){.seed = 20240611u, .step = dstep, .layer = 5, .part = 2};
}

static ds_status dropout_fwd(ds_dtype dt, const ds_dropout_key *key, double p, const double *x,
                             double *y)
{
    void *X = up(dt, x, DN), *Y = up(dt, NULL, DN);
    ds_status st = be->ops(dt)->dropout_fwd(ctx, DN, p, key, X, Y);
    if (st == DS_OK)
        st = t_get_real(be, ctx, dt, DN, Y, y);
    drop(X), drop(Y);
    return st;
}

static double dropout_loss(void *arg)
{
    (void)arg;
    double y[DN];
    if (dropout_fwd(DS_F64, &DKEY, DP, dpx, y) != DS_OK)
        return NAN;
    return dot(y, dpr, DN);
}

/* Elements where the masks of y and z (forward outputs of x, never 0) differ. */
static int masks_differ(const double *y, const double *z)
{
    int d = 0;
    for (int i = 0; i < DN; i++)
        d += (y[i] == 0) != (z[i] == 0);
    return d;
}

/* Dropout numbered in runs (a conv layer's (n, c) rows): the op draws as
 * ds_dropout_keeps numbers; a run padded longer keeps its first elements'
 * draws (a bucket's rounding moves none); runs numbered past 2^34 (blocks
 * past 2^32) draw apart from the blocks 2^32 below them. */
static void check_dropout_runs(void)
{
    enum { R = 5, L = 201, PAD = 37 };
    static double x[R * (L + PAD)], y[R * (L + PAD)], yp[R * (L + PAD)];
    for (int i = 0; i < R * (L + PAD); i++)
        x[i] = 1 + (i % 7);   /* never 0: a zero output is a drop */
    ds_dropout_key k = DKEY, kp = DKEY;
    k.run = L, kp.run = L + PAD;
    k.stride = kp.stride = DS_DROPOUT_RUN_FRAMES;
    void *X = up(DS_F64, x, R * (L + PAD)), *Y = up(DS_F64, y, R * (L + PAD));
    OK(op64->dropout_fwd(ctx, R * L, DP, &k, X, Y));
    down(DS_F64, Y, y, R * L);
    OK(op64->dropout_fwd(ctx, R * (L + PAD), DP, &kp, X, Y));
    down(DS_F64, Y, yp, R * (L + PAD));
    const uint32_t thr = ds_dropout_threshold(DP);
    int wrong = 0, moved = 0;
    for (int r = 0; r < R; r++)
        for (int j = 0; j < L; j++) {
            const int e = r * L + j;
            wrong += (y[e] != 0) != ds_dropout_keeps(&k, DSTEP, thr, (uint64_t)e);
            moved += (y[e] != 0) != (yp[r * (L + PAD) + j] != 0);
        }
    T_CHECK(wrong == 0, "dropout in runs: %d elements differ from the generator's numbering", wrong);
    T_CHECK(moved == 0, "dropout in runs: padding each run by %d moved %d draws", PAD, moved);
    /* runs 2^36 numbers apart: blocks 2^34 apart, past the first counter word */
    ds_dropout_key far = k;
    far.stride = (uint64_t)1 << 36;
    OK(op64->dropout_fwd(ctx, R * L, DP, &far, X, Y));
    down(DS_F64, Y, yp, R * L);
    int same = 0;
    for (int j = 0; j < L; j++)
        same += (yp[j] != 0) == (yp[(R - 1) * L + j] != 0);
    /* independent rows agree on 1 - 2p(1-p) = 58% of elements: 117 of 201, sd 7 */
    T_CHECK(same < 160, "dropout runs 2^36 apart: the last run repeats the first (%d of %d)", same, L);
    ds_dropout_key bad = k;
    bad.stride = L + 1;   /* not a multiple of 4 */
    T_CHECK(op64->dropout_fwd(ctx, R * L, DP, &bad, X, Y) == DS_ERR_ARG,
            "dropout: a stride that is not a multiple of 4 was taken");
    ds_status_clear_error();
    drop(X), drop(Y);
}

static void check_dropout(ds_rng *rng)
{
    t_fill_uniform(rng, dpx, DN, 1, 2);   /* never 0: a zero output is a drop */
    t_fill_uniform(rng, dpr, DN, -1, 1);
    double y[DN], z[DN], dx[DN], fd[DN];
    /* forward: exactly the generator's mask, kept elements scaled by 1/(1-p) */
    OK(dropout_fwd(DS_F64, &DKEY, DP, dpx, y));
    const uint32_t thr = ds_dropout_threshold(DP);
    int wrong = 0, kept = 0;
    for (int i = 0; i < DN; i++) {
        const int k = ds_dropout_keeps(&DKEY, DSTEP, thr, (uint64_t)i);
        kept += k;
        wrong += y[i] != (k ? dpx[i] * (1.0 / (1.0 - DP)) : 0);
    }
    T_CHECK(wrong == 0, "dropout forward: %d elements differ from the generator's mask", wrong);
    /* kept ~ Binomial(1003, 0.7): mean 702, sd 14.5; 5 sd either side */
    T_CHECK(kept > 629 && kept < 775, "dropout kept %d of %d at p %.1f", kept, DN, DP);

    /* the same key draws the same mask (a resume); any other field, another */
    OK(dropout_fwd(DS_F64, &DKEY, DP, dpx, z));
    T_CHECK(memcmp(y, z, sizeof y) == 0, "dropout: the same key gave another output");
    ds_dropout_key other[4] = {DKEY, DKEY, DKEY, DKEY};
    other[0].seed++, other[1].step = dstep_next, other[2].layer++, other[3].part++;
    for (int k = 0; k < 4; k++) {
        OK(dropout_fwd(DS_F64, &other[k], DP, dpx, z));
        /* independent masks differ in 2p(1-p) = 42% of elements */
        const int d = masks_differ(y, z);
        T_CHECK(d > 300, "dropout: key field %d changed, only %d of %d elements redrawn", k, d, DN);
    }

    /* backward: finite differences, accumulating onto what dx held */
    for (int i = 0; i < DN; i++)
        dx[i] = 0.5;
    void *DY = up(DS_F64, dpr, DN), *DX = up(DS_F64, dx, DN);
    OK(op64->dropout_bwd(ctx, DN, DP, &DKEY, DY, DX));
    down(DS_F64, DX, dx, DN);
    drop(DY), drop(DX);
    for (int i = 0; i < DN; i++)
        dx[i] -= 0.5;
    t_fd_grad(dropout_loss, NULL, dpx, DN, 1e-6, fd);
    double e = t_rel_err(dx, fd, DN);
    T_CHECK(e < 1e-6, "dropout dx: %.3g", e);

    /* in place; p = 0 is the identity; float32 drops the same elements */
    void *IP = up(DS_F64, dpx, DN);
    OK(op64->dropout_fwd(ctx, DN, DP, &DKEY, IP, IP));
    down(DS_F64, IP, z, DN);
    drop(IP);
    T_CHECK(memcmp(y, z, sizeof y) == 0, "dropout in place differs");
    OK(dropout_fwd(DS_F64, &DKEY, 0, dpx, z));
    T_CHECK(memcmp(dpx, z, sizeof z) == 0, "dropout with p 0 changed its input");
    OK(dropout_fwd(DS_F32, &DKEY, DP, dpx, z));
    T_CHECK(masks_differ(y, z) == 0, "dropout: float32 and float64 drop different elements");
    double e32 = t_rel_err(z, y, DN);
    T_CHECK(e32 < 1e-6, "dropout fp32 vs fp64: %.3g", e32);

    /* a probability outside [0, 1), or no step buffer, is refused */
    void *X = up(DS_F64, dpx, DN);
    ds_dropout_key nostep = DKEY;
    nostep.step = NULL;
    T_CHECK(op64->dropout_fwd(ctx, DN, 1.0, &DKEY, X, X) == DS_ERR_ARG &&
            op64->dropout_bwd(ctx, DN, -0.1, &DKEY, X, X) == DS_ERR_ARG,
            "dropout accepted p 1 or -0.1");
    T_CHECK(op64->dropout_fwd(ctx, DN, DP, &nostep, X, X) == DS_ERR_ARG &&
            op64->dropout_bwd(ctx, DN, DP, &nostep, X, X) == DS_ERR_ARG,
            "dropout accepted a key without a step buffer");
    ds_status_clear_error();
    drop(X);
    printf("dropout: kept %d of %d at p %.1f; fd rel err dx %.2e; fp32 rel err %.2e\n", kept,
           DN, DP, e, e32);
}

/* ---- residual sum: y += x, its own gradient ---- */

static void check_add(ds_rng *rng)
{
    double x[DN], y0[DN], y[DN];
    t_fill_uniform(rng, x, DN, -1, 1);
    t_fill_uniform(rng, y0, DN, -1, 1);
    void *X = up(DS_F64, x, DN), *Y = up(DS_F64, y0, DN);
    OK(op64->add(ctx, DN, X, Y));
    down(DS_F64, Y, y, DN);
    drop(X), drop(Y);
    int wrong = 0;
    for (int i = 0; i < DN; i++)
        wrong += y[i] != y0[i] + x[i];
    T_CHECK(wrong == 0, "add: %d elements are not y + x", wrong);
}

/* ---- context windows: [n][t][f] -> [t][n][(2c+1)*f] over real frames ---- */

enum { CN = 3, CT = 6, CF = 2, CC = 2, CW = (2 * CC + 1) * CF, CX = CN * CT * CF, CY = CT * CN * CW };
static const int clen[CN] = {6, 3, 0};
static double cx[CX], cr[CY];

/* y [CY] starts as NaN in backend memory: an element the op does not assign stays NaN. */
static ds_status context_fwd(const double *x, double *y)
{
    static double nan_y[CY];
    for (int i = 0; i < CY; i++)
        nan_y[i] = NAN;
    void *X = up(DS_F64, x, CX), *Y = up(DS_F64, nan_y, CY), *L = NULL;
    must(t_new_int(be, ctx, CN, clen, &L), "lengths");
    ds_status st = op64->context_fwd(ctx, CN, CT, CF, CC, L, X, Y);
    if (st == DS_OK)
        st = t_get_real(be, ctx, DS_F64, CY, Y, y);
    drop(X), drop(Y), drop(L);
    return st;
}

static double context_loss(void *arg)
{
    (void)arg;
    double y[CY];
    if (context_fwd(cx, y) != DS_OK)
        return NAN;
    return dot(y, cr, CY);
}

static void check_context(ds_rng *rng)
{
    t_fill_uniform(rng, cx, CX, 1, 2);
    t_fill_uniform(rng, cr, CY, -1, 1);
    double y[CY], dx[CX], fd[CX];
    OK(context_fwd(cx, y));   /* from NaN: every element must be assigned */
    int wrong = 0;
    for (int s = 0; s < CT; s++)
        for (int i = 0; i < CN; i++)
            for (int j = 0; j <= 2 * CC; j++)
                for (int k = 0; k < CF; k++) {
                    const int u = s + j - CC;
                    const double want = s < clen[i] && u >= 0 && u < clen[i] ? cx[(i * CT + u) * CF + k] : 0;
                    wrong += y[(s * CN + i) * CW + j * CF + k] != want;
                }
    T_CHECK(wrong == 0, "context_fwd: %d elements wrong", wrong);
    for (int i = 0; i < CX; i++)
        dx[i] = 0.25;
    void *DY = up(DS_F64, cr, CY), *DX = up(DS_F64, dx, CX), *L = NULL;
    must(t_new_int(be, ctx, CN, clen, &L), "lengths");
    OK(op64->context_bwd(ctx, CN, CT, CF, CC, L, DY, DX));
    down(DS_F64, DX, dx, CX);
    drop(DY), drop(DX), drop(L);
    for (int i = 0; i < CX; i++)
        dx[i] -= 0.25;
    t_fd_grad(context_loss, NULL, cx, CX, 1e-6, fd);
    double e = t_rel_err(dx, fd, CX);
    T_CHECK(e < 1e-6, "context_bwd: %.3g", e);
    /* padding frames of x get no gradient: nothing real copied them */
    int leaked = 0;
    for (int i = 0; i < CN; i++)
        for (int u = clen[i]; u < CT; u++)
            for (int k = 0; k < CF; k++)
                leaked += dx[(i * CT + u) * CF + k] != 0;
    T_CHECK(leaked == 0, "context_bwd: %d padding elements got a gradient", leaked);
    printf("context: fd rel err dx %.2e\n", e);
}

/* ---- layout: [n][c][t][f] -> [t][n][c*f] ---- */

enum { YN = 2, YC = 3, YT = 4, YF = 5, YE = YN * YC * YT * YF };
static double yx[YE], yr[YE];

static ds_status layout_fwd(const double *x, double *y)
{
    void *X = up(DS_F64, x, YE), *Y = up(DS_F64, NULL, YE);
    ds_status st = op64->conv_to_seq(ctx, YN, YC, YT, YF, X, Y);
    if (st == DS_OK)
        st = t_get_real(be, ctx, DS_F64, YE, Y, y);
    drop(X), drop(Y);
    return st;
}

static double layout_loss(void *arg)
{
    (void)arg;
    double y[YE];
    if (layout_fwd(yx, y) != DS_OK)
        return NAN;
    return dot(y, yr, YE);
}

static void check_layout(ds_rng *rng)
{
    t_fill_uniform(rng, yx, YE, -1, 1);
    t_fill_uniform(rng, yr, YE, -1, 1);
    double y[YE], dx[YE], fd[YE];
    OK(layout_fwd(yx, y));
    int wrong = 0;
    for (int i = 0; i < YN; i++)
        for (int c = 0; c < YC; c++)
            for (int t = 0; t < YT; t++)
                for (int f = 0; f < YF; f++)
                    wrong += y[(t * YN + i) * YC * YF + c * YF + f] != yx[((i * YC + c) * YT + t) * YF + f];
    T_CHECK(wrong == 0, "conv_to_seq: %d elements misplaced", wrong);
    for (int i = 0; i < YE; i++)
        dx[i] = 2;
    void *DY = up(DS_F64, yr, YE), *DX = up(DS_F64, dx, YE);
    OK(op64->conv_to_seq_bwd(ctx, YN, YC, YT, YF, DY, DX));
    down(DS_F64, DX, dx, YE);
    drop(DY), drop(DX);
    for (int i = 0; i < YE; i++)
        dx[i] -= 2;
    t_fd_grad(layout_loss, NULL, yx, YE, 1e-6, fd);
    double e = t_rel_err(dx, fd, YE);
    T_CHECK(e < 1e-6, "conv_to_seq_bwd: %.3g", e);
    printf("conv_to_seq: fd rel err dx %.2e\n", e);
}

/* ---- mask: padding positions of both view kinds become 0, nothing else ---- */

static void mask(const ds_view *v, const int *len, double *x, size_t n)
{
    void *X = up(DS_F64, x, n), *L = NULL;
    must(t_new_int(be, ctx, (size_t)v->n, len, &L), "lengths");
    OK(op64->mask(ctx, v, L, X));
    down(DS_F64, X, x, n);
    drop(X), drop(L);
}

static void check_mask(ds_rng *rng)
{
    const int n = 3, c = 2, t = 5, f = 4, len[3] = {5, 2, 0};
    double x[3 * 2 * 5 * 4];
    const ds_view conv = {n, c, t * f, (long)c * t * f, (long)t * f, 1, f};
    t_fill_uniform(rng, x, sizeof x / sizeof x[0], 1, 2);   /* never 0 */
    mask(&conv, len, x, sizeof x / sizeof x[0]);
    int wrong = 0;
    for (int i = 0; i < n; i++)
        for (int ch = 0; ch < c; ch++)
            for (int s = 0; s < t; s++)
                for (int j = 0; j < f; j++)
                    wrong += (x[((i * c + ch) * t + s) * f + j] == 0) != (s >= len[i]);
    T_CHECK(wrong == 0, "mask on a conv view: %d wrong", wrong);
    const ds_view seq = {n, c, t, c, 1, (long)n * c, 1};
    t_fill_uniform(rng, x, (size_t)t * n * c, 1, 2);
    mask(&seq, len, x, (size_t)t * n * c);
    wrong = 0;
    for (int s = 0; s < t; s++)
        for (int i = 0; i < n; i++)
            for (int ch = 0; ch < c; ch++)
                wrong += (x[(s * n + i) * c + ch] == 0) != (s >= len[i]);
    T_CHECK(wrong == 0, "mask on a sequence view: %d wrong", wrong);
}

int main(int argc, char **argv)
{
    be = t_backend(argc > 1 ? argv[1] : NULL);
    op64 = be->ops(DS_F64);
    op32 = be->ops(DS_F32);
    T_CHECK(op64 && op32, "%s backend lacks float64 or float32 ops", be->name);
    if (!op64 || !op32)
        return t_finish(__FILE__);
    T_OK(be->ctx_create(0, NULL, &ctx));
    ds_rng rng;
    ds_rng_seed(&rng, 42);
    check_linear(&rng);
    check_hardtanh(&rng);
    check_layout(&rng);
    check_mask(&rng);
    /* after the checks before them, which draw what they drew before */
    check_relu(&rng);
    check_philox();
    dkey_make();
    check_dropout(&rng);
    check_dropout_runs();
    drop(dstep), drop(dstep_next);
    check_add(&rng);
    check_context(&rng);
    be->ctx_destroy(ctx);
    return t_finish(__FILE__);
}
