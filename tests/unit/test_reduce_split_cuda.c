/* test_reduce_split_cuda.c - the CUDA backend's split reductions on shapes
 * large enough to split them over several blocks (cuda/reduce_split.h):
 *   - BatchNorm on a conv map, channel blocks: [N=4][C=32][T=400][F=41],
 *     65600 positions a channel (132 SMs: 16 blocks a channel);
 *   - BatchNorm on a sequence, channel tiles: [T=300][N=16][C=64], 4800
 *     rows (132 SMs: 8 blocks a tile of 8 channels);
 *   - the dense bias gradient, 20000 rows of 29 outputs (one tile of
 *     columns: 35 blocks) and of 40 (two tiles, the second part-filled: 16
 *     blocks each).
 * Every op's every output (BatchNorm: moments, forward in training and
 * evaluation, backward moments, backward in training and evaluation; dense:
 * db and dx) against the CPU backend's float64 table on the same inputs
 * rounded to the dtype, within parity's tolerances (1e-12 float64, 1e-5
 * float32, norm-wise relative); then the whole run again on the GPU, which
 * must give the same bits. Padding is random in x and dy and must neither
 * count nor receive anything.
 *
 * usage: test_reduce_split_cuda [BACKEND]   (default cuda; 77: skipped,
 * no such backend or no device) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "testutil.h"

#define EPS 1e-5
#define MOMENTUM 0.1
#define MAX_OUT 16

static ds_rng rng;

/* [n] uniform in [lo, hi), rounded to dt (so every side reads the same values). */
static double *rnd(ds_dtype dt, size_t n, double lo, double hi)
{
    double *p = t_zeros(n);
    t_fill_uniform(&rng, p, n, lo, hi);
    if (dt == DS_F32)
        for (size_t i = 0; i < n; i++)
            p[i] = (float)p[i];
    return p;
}

/* The outputs of one run: out[k] [size[k]], named. */
typedef struct {
    int n;
    const char *name[MAX_OUT];
    size_t size[MAX_OUT];
    double *out[MAX_OUT];
} run_out;

static void keep(run_out *r, const ds_backend *be, ds_ctx *ctx, ds_dtype dt, const char *name,
                 size_t n, const void *buf)
{
    r->name[r->n] = name;
    r->size[r->n] = n;
    r->out[r->n] = t_zeros(n);
    t_must(t_get_real(be, ctx, dt, n, buf, r->out[r->n]), name);
    r->n++;
}

static void run_free(run_out *r)
{
    for (int k = 0; k < r->n; k++)
        free(r->out[k]);
    r->n = 0;
}

/* got against ref (the CPU's float64) within tol; got against again bit for bit. */
static void judge(const char *what, ds_dtype dt, const run_out *ref, const run_out *got,
                  const run_out *again, double tol)
{
    for (int k = 0; k < ref->n; k++) {
        const double err = t_rel_err(got->out[k], ref->out[k], ref->size[k]);
        printf("  %-28s %-7s %-10s rel err %.3g (tol %g)\n", what, ds_dtype_name(dt),
               ref->name[k], err, tol);
        T_CHECK(err <= tol, "%s %s %s: rel err %.3g > %g", what, ds_dtype_name(dt), ref->name[k],
                err, tol);
        T_CHECK(memcmp(got->out[k], again->out[k], ref->size[k] * sizeof(double)) == 0,
                "%s %s %s: two runs differ in their bits", what, ds_dtype_name(dt),
                ref->name[k]);
    }
}

/* ---- BatchNorm ---- */

typedef struct {
    const char *name;
    ds_view v;
    const int *len;
    double count;   /* real positions a channel */
    double *x, *dy, *gamma, *beta, *rm, *rv, *dx0, *dg0, *db0;
} bn_case;

static size_t bn_size(const ds_view *v) { return (size_t)v->n * v->c * v->p; }

static double bn_count(const ds_view *v, const int *len)
{
    double c = 0;
    for (int i = 0; i < v->n; i++) {
        long r = (long)len[i] * v->p_per_t;
        c += r < 0 ? 0 : (r > v->p ? v->p : r);
    }
    return c;
}

static bn_case bn_make(ds_dtype dt, const char *name, ds_view v, const int *len)
{
    const size_t n = bn_size(&v), c = (size_t)v.c;
    bn_case k = {.name = name, .v = v, .len = len, .count = bn_count(&v, len)};
    /* x off-centre so the mean matters; gamma away from 0; running var > 0 */
    k.x = rnd(dt, n, -1, 2), k.dy = rnd(dt, n, -1, 1), k.dx0 = rnd(dt, n, -1, 1);
    k.gamma = rnd(dt, c, 0.5, 1.5), k.beta = rnd(dt, c, -0.5, 0.5);
    k.rm = rnd(dt, c, -0.5, 0.5), k.rv = rnd(dt, c, 0.5, 2);
    k.dg0 = rnd(dt, c, -1, 1), k.db0 = rnd(dt, c, -1, 1);
    return k;
}

static void bn_free(bn_case *k)
{
    free(k->x), free(k->dy), free(k->dx0), free(k->gamma), free(k->beta);
    free(k->rm), free(k->rv), free(k->dg0), free(k->db0);
}

/* Every BatchNorm op in a training step's order, then evaluation, on be in
 * dt (the stats role is dt too for float32 and float64). */
static void bn_run(const ds_backend *be, ds_ctx *ctx, ds_dtype dt, const bn_case *k, run_out *r)
{
    const ds_ops *op = be->ops(dt);
    const ds_view *v = &k->v;
    const size_t n = bn_size(v), c = (size_t)v->c;
    void *len, *x, *dy, *g, *b, *rm, *rv, *y, *mom, *sm, *si, *dmom, *dx, *dg, *db;
    void *y2, *dx2, *dg2, *db2, *count = t_scalar(be, ctx, k->count);
    t_must(t_new_int(be, ctx, (size_t)v->n, k->len, &len), "len");
    t_must(t_new_real(be, ctx, dt, n, k->x, &x), "x");
    t_must(t_new_real(be, ctx, dt, n, k->dy, &dy), "dy");
    t_must(t_new_real(be, ctx, dt, c, k->gamma, &g), "gamma");
    t_must(t_new_real(be, ctx, dt, c, k->beta, &b), "beta");
    t_must(t_new_real(be, ctx, dt, c, k->rm, &rm), "run_mean");
    t_must(t_new_real(be, ctx, dt, c, k->rv, &rv), "run_var");
    t_must(t_new_real(be, ctx, dt, n, k->dx0, &dx), "dx");
    t_must(t_new_real(be, ctx, dt, c, k->dg0, &dg), "dgamma");
    t_must(t_new_real(be, ctx, dt, c, k->db0, &db), "dbeta");
    t_must(t_new_real(be, ctx, dt, n, k->dx0, &dx2), "dx eval");
    t_must(t_new_real(be, ctx, dt, c, k->dg0, &dg2), "dgamma eval");
    t_must(t_new_real(be, ctx, dt, c, k->db0, &db2), "dbeta eval");
    t_must(be->alloc(ctx, dt, n, &y), "y");
    t_must(be->alloc(ctx, dt, n, &y2), "y eval");
    t_must(be->alloc(ctx, dt, 2 * c, &mom), "mom");
    t_must(be->alloc(ctx, dt, 2 * c, &dmom), "dmom");
    t_must(be->alloc(ctx, dt, c, &sm), "save_mean");
    t_must(be->alloc(ctx, dt, c, &si), "save_invstd");

    t_must(op->bn_moments(ctx, v, len, x, mom), "bn_moments");
    t_must(op->bn_fwd_train(ctx, v, len, count, x, mom, g, b, EPS, MOMENTUM, y, sm, si, rm, rv),
         "bn_fwd_train");
    t_must(op->bn_bwd_moments(ctx, v, len, dy, x, sm, si, dmom), "bn_bwd_moments");
    t_must(op->bn_bwd_train(ctx, v, len, count, dy, x, g, sm, si, dmom, dx, dg, db),
         "bn_bwd_train");
    t_must(op->bn_fwd_eval(ctx, v, len, x, g, b, rm, rv, EPS, y2), "bn_fwd_eval");
    t_must(op->bn_bwd_eval(ctx, v, len, dy, x, g, rm, rv, EPS, dx2, dg2, db2), "bn_bwd_eval");

    keep(r, be, ctx, dt, "mom", 2 * c, mom);
    keep(r, be, ctx, dt, "y", n, y);
    keep(r, be, ctx, dt, "save_mean", c, sm);
    keep(r, be, ctx, dt, "save_invstd", c, si);
    keep(r, be, ctx, dt, "run_mean", c, rm);
    keep(r, be, ctx, dt, "run_var", c, rv);
    keep(r, be, ctx, dt, "dmom", 2 * c, dmom);
    keep(r, be, ctx, dt, "dx", n, dx);
    keep(r, be, ctx, dt, "dgamma", c, dg);
    keep(r, be, ctx, dt, "dbeta", c, db);
    keep(r, be, ctx, dt, "y eval", n, y2);
    keep(r, be, ctx, dt, "dx eval", n, dx2);
    keep(r, be, ctx, dt, "dgamma eval", c, dg2);
    keep(r, be, ctx, dt, "dbeta eval", c, db2);
    void *all[] = {len, x, dy, g, b, rm, rv, y, mom, sm, si, dmom, dx, dg, db, y2, dx2, dg2, db2,
                   count};
    t_release_all(be, ctx, all, sizeof all / sizeof all[0]);
}

/* ---- dense bias gradient ---- */

typedef struct {
    const char *name;
    int m, k, o;
    double *x, *w, *dy, *dx0, *dw0, *db0;
} lin_case;

static lin_case lin_make(ds_dtype dt, const char *name, int m, int k, int o)
{
    lin_case c = {.name = name, .m = m, .k = k, .o = o};
    c.x = rnd(dt, (size_t)m * k, -1, 1), c.w = rnd(dt, (size_t)o * k, -1, 1);
    c.dy = rnd(dt, (size_t)m * o, -1, 1), c.dx0 = rnd(dt, (size_t)m * k, -1, 1);
    c.dw0 = rnd(dt, (size_t)o * k, -1, 1), c.db0 = rnd(dt, (size_t)o, -1, 1);
    return c;
}

static void lin_free(lin_case *c)
{
    free(c->x), free(c->w), free(c->dy), free(c->dx0), free(c->dw0), free(c->db0);
}

/* linear_bwd; db and dx kept (dw is cuBLASLt's, summed over the m rows in
 * float32: parity covers it on shorter sums). */
static void lin_run(const ds_backend *be, ds_ctx *ctx, ds_dtype dt, const lin_case *c, run_out *r)
{
    const ds_ops *op = be->ops(dt);
    const size_t nx = (size_t)c->m * c->k, nw = (size_t)c->o * c->k, ny = (size_t)c->m * c->o;
    void *x, *w, *dy, *dx, *dw, *db;
    t_must(t_new_real(be, ctx, dt, nx, c->x, &x), "x");
    t_must(t_new_real(be, ctx, dt, nw, c->w, &w), "w");
    t_must(t_new_real(be, ctx, dt, ny, c->dy, &dy), "dy");
    t_must(t_new_real(be, ctx, dt, nx, c->dx0, &dx), "dx");
    t_must(t_new_real(be, ctx, dt, nw, c->dw0, &dw), "dw");
    t_must(t_new_real(be, ctx, dt, (size_t)c->o, c->db0, &db), "db");
    t_must(op->linear_bwd(ctx, c->m, c->k, c->o, x, w, dy, dx, dw, db), "linear_bwd");
    keep(r, be, ctx, dt, "db", (size_t)c->o, db);
    keep(r, be, ctx, dt, "dx", nx, dx);
    void *all[] = {x, w, dy, dx, dw, db};
    t_release_all(be, ctx, all, sizeof all / sizeof all[0]);
}

int main(int argc, char **argv)
{
    /* IEEE float32 products in cuBLASLt and cuDNN (parity does the same) */
    setenv("NVIDIA_TF32_OVERRIDE", "0", 1);
    const ds_backend *gpu = t_backend(argc > 1 ? argv[1] : "cuda");
    const ds_backend *cpu = t_backend("cpu");
    ds_ctx *gctx, *cctx;
    t_must(gpu->ctx_create(0, NULL, &gctx), "ctx_create");
    t_must(cpu->ctx_create(0, NULL, &cctx), "cpu ctx_create");
    ds_rng_seed(&rng, 20261126u);

    /* conv map [N][C][T][F] (channel blocks) and sequence [T][N][C] (tiles);
     * lengths in frames, one utterance of a single frame, one at full length */
    const int map_n = 4, map_c = 32, map_t = 400, map_f = 41;
    const int seq_n = 16, seq_c = 64, seq_t = 300;
    static const int map_len[] = {400, 317, 123, 1};
    static const int seq_len[] = {300, 299, 250, 3, 180, 300, 77, 1, 2, 299, 150, 151, 10, 300, 64, 65};
    const ds_view map = {map_n, map_c, map_t * map_f, (long)map_c * map_t * map_f,
                         (long)map_t * map_f, 1, map_f};
    const ds_view seq = {seq_n, seq_c, seq_t, seq_c, 1, (long)seq_n * seq_c, 1};

    const ds_dtype dts[] = {DS_F64, DS_F32};
    const double tols[] = {1e-12, 1e-5};
    for (int d = 0; d < 2; d++) {
        const ds_dtype dt = dts[d];
        const struct {
            const char *name;
            ds_view v;
            const int *len;
        } bns[] = {{"bn map n4 c32 t400 f41", map, map_len}, {"bn seq t300 n16 c64", seq, seq_len}};
        for (int i = 0; i < 2; i++) {
            bn_case k = bn_make(dt, bns[i].name, bns[i].v, bns[i].len);
            run_out ref = {0}, got = {0}, again = {0};
            bn_run(cpu, cctx, DS_F64, &k, &ref);
            bn_run(gpu, gctx, dt, &k, &got);
            bn_run(gpu, gctx, dt, &k, &again);
            judge(k.name, dt, &ref, &got, &again, tols[d]);
            run_free(&ref), run_free(&got), run_free(&again);
            bn_free(&k);
        }
        const struct {
            const char *name;
            int m, k, o;
        } lins[] = {{"linear m20000 k16 o29", 20000, 16, 29}, {"linear m20000 k16 o40", 20000, 16, 40}};
        for (int i = 0; i < 2; i++) {
            lin_case c = lin_make(dt, lins[i].name, lins[i].m, lins[i].k, lins[i].o);
            run_out ref = {0}, got = {0}, again = {0};
            lin_run(cpu, cctx, DS_F64, &c, &ref);
            lin_run(gpu, gctx, dt, &c, &got);
            lin_run(gpu, gctx, dt, &c, &again);
            judge(c.name, dt, &ref, &got, &again, tols[d]);
            run_free(&ref), run_free(&got), run_free(&again);
            lin_free(&c);
        }
    }
    gpu->ctx_destroy(gctx);
    cpu->ctx_destroy(cctx);
    return t_finish("test_reduce_split_cuda");
}
