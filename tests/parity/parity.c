/* parity.c - parity_ops: every op of a backend's table for one dtype against
 * the CPU backend's float64 table, as a table of cases.
 *
 * usage: parity_ops BACKEND DTYPE [--inject OP] [--verbose]
 *   BACKEND  cpu, cuda
 *   DTYPE    float32, float64, float16, bfloat16 (as ds_dtype_name prints them)
 *   --inject OP  perturb one element of OP's first output after the call
 *                (harness-side): the run must then fail, naming OP
 *   --verbose    one line per compared output under each case
 * Exit: 0 all cases passed; 1 a case failed; 2 usage or harness error;
 * 77 skipped (backend not built, no device, no table for the dtype). */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parity.h"

#define P_SKIP 77
#define P_SEED 20240611u

p_harness P;

/* ---- tolerances: the one place ----
 * Norm-wise relative error of each output against the float64 reference on
 * the same inputs (rounded to the tested dtype first, so only the op's own
 * arithmetic differs). float32 assumes IEEE float32 products: TF32 off
 * (main sets NVIDIA_TF32_OVERRIDE=0 before any context exists).
 * float16/bfloat16 on the CPU (emulated, ops_half.inc): inputs exact, float32
 * arithmetic, one rounding of each output, so the error is within one unit
 * roundoff, 2^-11 (float16) and 2^-8 (bfloat16); measured worst 2.8e-4 and
 * 2.7e-3. On a GPU the libraries round inside a call too (a cuDNN RNN stores
 * each step's state in the compute dtype), hence wider rows, not yet
 * checked on a GPU. NULL backend: any. */
static const struct {
    const char *backend;
    ds_dtype dtype;
    double tol;
} tolerances[] = {
    {NULL, DS_F64, 1e-12},
    {NULL, DS_F32, 1e-5},
    {"cpu", DS_F16, 0x1p-11},
    {"cpu", DS_BF16, 0x1p-8},
    {NULL, DS_F16, 1e-2},
    {NULL, DS_BF16, 5e-2},
};
/* Case-specific tolerances (op, variant, dtype, tolerance, and why) would
 * go here; none is needed: every case meets its dtype's entry. */

double p_tolerance(const char *op, const char *variant)
{
    (void)op, (void)variant;
    for (size_t i = 0; i < sizeof tolerances / sizeof tolerances[0]; i++)
        if (tolerances[i].dtype == P.dtype &&
            (!tolerances[i].backend || !strcmp(tolerances[i].backend, P.test.be->name)))
            return tolerances[i].tol;
    return 0;
}

/* ---- the ops: every member of ds_ops, and whether cases cover it ---- */

#define P_OP(f, rows) {#f, offsetof(ds_ops, f), rows, 0}
static struct {
    const char *name;
    size_t off;
    int rows;      /* 1: cases report it; 0: used by other cases (sizes, destroy) */
    int seen;
} ops_list[] = {
    P_OP(conv2d_work, 0),     P_OP(lookahead_work, 0), P_OP(ctc_work, 0),
    P_OP(conv2d_fwd, 1),      P_OP(conv2d_bwd, 1),     P_OP(mask, 1),
    P_OP(bn_moments, 1),      P_OP(bn_fwd_train, 1),   P_OP(bn_fwd_eval, 1),
    P_OP(bn_bwd_moments, 1),  P_OP(bn_bwd_train, 1),   P_OP(bn_bwd_eval, 1),
    P_OP(hardtanh_fwd, 1),    P_OP(hardtanh_bwd, 1),   P_OP(dropout_fwd, 1),
    P_OP(dropout_bwd, 1),     P_OP(add, 1),            P_OP(linear_fwd, 1),
    P_OP(linear_bwd, 1),      P_OP(conv_to_seq, 1),    P_OP(conv_to_seq_bwd, 1),
    P_OP(context_fwd, 1),     P_OP(context_bwd, 1),
    P_OP(lookahead_fwd, 1),   P_OP(lookahead_bwd, 1),  P_OP(rnn_plan, 1),
    P_OP(rnn_plan_destroy, 0), P_OP(rnn_fwd, 1),       P_OP(rnn_bwd, 1),
    P_OP(ctc_loss, 1),        P_OP(argmax, 1),         P_OP(loss_total, 1),     P_OP(sumsq, 1),
    P_OP(sgd_step, 1),        P_OP(adamw_step, 1),
};
#define P_NOPS (sizeof ops_list / sizeof ops_list[0])

static int op_index(const char *name)
{
    for (size_t i = 0; i < P_NOPS; i++)
        if (strcmp(ops_list[i].name, name) == 0)
            return (int)i;
    return -1;
}

/* Whether member i of table t is set; every member is a function pointer. */
static int member_set(const ds_ops *t, size_t i)
{
    void (*fn)(void);
    memcpy(&fn, (const char *)t + ops_list[i].off, sizeof fn);
    return fn != NULL;
}

int p_has_op(const char *op)
{
    int i = op_index(op);
    if (i < 0)
        p_fatal(DS_ERR_ARG, op);
    /* the cases of an op use the size queries too; a missing one fails them */
    for (size_t k = 0; k < P_NOPS; k++)
        if (!ops_list[k].rows && !member_set(P.test.ops, k))
            return 0;
    return member_set(P.test.ops, (size_t)i);
}

/* ---- the table ---- */

static void print_header(void)
{
    printf("# parity: %s %s against cpu float64, seed %u\n", P.test.be->name,
           ds_dtype_name(P.dtype), P_SEED);
    printf("# %-15s %-36s %-8s %-12s %9s %8s %7s  %s\n", "op", "case", "dtype", "worst",
           "rel err", "tol", "#wrong", "result");
}

void p_report(const char *op, const char *variant, const p_verdict *v, double tol)
{
    int i = op_index(op);
    if (i >= 0)
        ops_list[i].seen++;
    char err[16] = "-";
    if (v->worst)
        snprintf(err, sizeof err, "%.2e", v->err);
    printf("  %-15s %-36s %-8s %-12s %9s %8.0e %7ld  %s\n", op, variant, ds_dtype_name(P.dtype),
           v->worst ? v->worst : "-", err, tol, v->wrong, v->fail ? "FAIL" : "ok");
    if (v->note[0])
        printf("#   %s\n", v->note);
    for (int k = 0; P.verbose && k < v->nlines; k++)
        printf("#   %s\n", v->lines[k]);
    if (v->fail)
        P.failed++;
    else
        P.passed++;
    fflush(stdout);
}

/* An op with cases that ran none fails: the harness must cover the table. */
static void check_coverage(void)
{
    for (size_t i = 0; i < P_NOPS; i++)
        if (ops_list[i].rows && !ops_list[i].seen) {
            p_verdict v = {.fail = 1};
            snprintf(v.note, sizeof v.note, "no case ran %s", ops_list[i].name);
            p_report(ops_list[i].name, "coverage", &v, p_tolerance(ops_list[i].name, ""));
        }
}

/* ---- set-up ---- */

static void usage(void)
{
    fprintf(stderr, "usage: parity_ops BACKEND DTYPE [--inject OP] [--verbose]\n");
    exit(2);
}

static int parse_dtype(const char *name, ds_dtype *out)
{
    const ds_dtype all[] = {DS_F32, DS_F64, DS_F16, DS_BF16};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (strcmp(name, ds_dtype_name(all[i])) == 0) {
            *out = all[i];
            return 1;
        }
    return 0;
}

/* ctest's SKIP_RETURN_CODE, with the reason on stdout. */
static void skip(const char *why)
{
    printf("skipped: %s\n", why);
    fflush(stdout);
    exit(P_SKIP);
}

/* The backends that may be absent or deviceless here; "no CUDA device". */
static void skip_if_unusable(const ds_backend *be, const char *name)
{
    char why[96], up[32];
    size_t i = 0;
#ifdef DS_HAVE_CUDA_BACKEND
    if (!be && !strcmp(name, "cuda")) {   /* built, and its plugin would not load: a failure */
        fprintf(stderr, "FAIL: --device cuda: %s\n", ds_backend_missing(name));
        exit(1);
    }
#endif
    if (!be) {
        snprintf(why, sizeof why, "backend %s not built", name);
        skip(why);
    }
    if (be->device_count() >= 1)
        return;
    for (; name[i] && i + 1 < sizeof up; i++)
        up[i] = (char)(name[i] >= 'a' && name[i] <= 'z' ? name[i] - 'a' + 'A' : name[i]);
    up[i] = 0;
    snprintf(why, sizeof why, "no %s device", up);
    skip(why);
}

static void open_side(p_side *s, const ds_backend *be, ds_dtype dtype, const char *what)
{
    s->be = be;
    s->ops = be->ops(dtype);
    s->roles = ds_backend_precision_roles(dtype);
    ds_status st = be->ctx_create(0, NULL, &s->ctx);
    if (st != DS_OK)
        p_fatal(st, what);
}

static void parse_args(int argc, char **argv, const char **backend)
{
    if (argc < 3)
        usage();
    *backend = argv[1];
    if (!parse_dtype(argv[2], &P.dtype)) {
        fprintf(stderr, "parity_ops: unknown dtype %s\n", argv[2]);
        usage();
    }
    for (int i = 3; i < argc; i++) {
        if (strcmp(argv[i], "--inject") == 0 && i + 1 < argc) {
            P.inject = argv[++i];
            int k = op_index(P.inject);
            if (k < 0 || !ops_list[k].rows) {
                fprintf(stderr, "parity_ops: --inject: no op %s with cases\n", P.inject);
                exit(2);
            }
        } else if (strcmp(argv[i], "--verbose") == 0 || strcmp(argv[i], "-v") == 0) {
            P.verbose = 1;
        } else {
            usage();
        }
    }
}

int main(int argc, char **argv)
{
    const char *name;
    parse_args(argc, argv, &name);
    /* before any context: cuBLAS and cuDNN read it when their handles start */
    setenv("NVIDIA_TF32_OVERRIDE", "0", 1);

    const ds_backend *be = ds_backend_get(name), *cpu = ds_backend_get("cpu");
    skip_if_unusable(be, name);
    if (!be->ops(P.dtype)) {
        char why[96];
        snprintf(why, sizeof why, "backend %s has no %s ops", name, ds_dtype_name(P.dtype));
        skip(why);
    }
    open_side(&P.ref, cpu, DS_F64, "cpu context");
    open_side(&P.test, be, P.dtype, "tested backend context");
    ds_rng_seed(&P.rng, P_SEED);

    print_header();
    p_conv_bn_cases();
    p_dense_cases();
    p_rnn_cases();
    p_ctc_cases();
    p_optim_cases();
    check_coverage();

    P.test.be->ctx_destroy(P.test.ctx);
    P.ref.be->ctx_destroy(P.ref.ctx);
    if (P.inject && !P.injected) {
        fprintf(stderr, "parity_ops: --inject %s: no output was perturbed\n", P.inject);
        return 2;
    }
    printf("parity %s %s: %d passed, %d failed\n", name, ds_dtype_name(P.dtype), P.passed,
           P.failed);
    return P.failed ? 1 : 0;
}
