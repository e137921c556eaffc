/* parity.h - the backend parity harness: every op of one backend's table
 * for one compute dtype against the CPU backend's float64 table, on the same
 * inputs (random doubles rounded to the tested dtype, so both sides see the
 * same values), with every output poisoned before the call.
 *
 * A case names its tensors (role, what the op does with them, start values)
 * and a call; p_run runs it on both sides, compares each output norm-wise
 * and prints one table line. The recurrent layer, whose weight layout
 * differs between backends, runs its own flow on the same helpers. */
#ifndef DS_PARITY_H
#define DS_PARITY_H

#include <stddef.h>

#include "backend.h"
#include "rng.h"

/* The buffer roles of backend.h, plus int32 arrays (lengths, labels). */
typedef enum { P_COMPUTE, P_MASTER, P_STATS, P_SCALAR, P_INT } p_role;

/* What an op does with a tensor. */
typedef enum {
    P_IN,    /* reads it */
    P_OUT,   /* assigns it: filled with NaN before the call, so a missed element shows */
    P_ACC,   /* reads and updates it: the same start values on both sides (NaN where
              * part of it is assigned) */
    P_NULL   /* gets NULL ("not wanted") */
} p_kind;

typedef struct {
    const char *name;
    p_role role;
    p_kind kind;
    size_t n;              /* elements */
    const double *init;    /* P_IN, P_ACC: start values, already rounded (p_rand, p_round) */
    const int *ints;       /* P_INT: the values */
} p_tensor;

#define P_MAX_TENSORS 16

/* One side of a comparison: a backend, a context and the table of a dtype. */
typedef struct {
    const ds_backend *be;
    ds_ctx *ctx;
    const ds_ops *ops;
    ds_roles roles;
} p_side;

/* Runs the op on side s; buf [nt] holds the case's tensors in that side's
 * memory (NULL for P_NULL). */
typedef ds_status (*p_call)(const p_side *s, void *const *buf, const void *arg);

typedef struct {
    const char *op;        /* the ds_ops member, as it appears in the table */
    const char *variant;
    p_tensor t[P_MAX_TENSORS];
    int nt;
    p_call call;
    const void *arg;
} p_case;

/* The run: the two sides and what has been seen so far. */
typedef struct {
    p_side ref;            /* cpu, float64 */
    p_side test;           /* the backend and dtype under test */
    ds_dtype dtype;
    ds_rng rng;
    const char *inject;    /* --inject OP: perturb one element of OP's first output */
    int injected;
    int verbose;
    int passed, failed;
} p_harness;

extern p_harness P;

/* ---- host buffers: freed together by p_scratch_reset ---- */
double *p_vec(size_t n);                     /* zeros */
int *p_ivec(size_t n);
double *p_nans(size_t n);
/* Uniform in [lo, hi), rounded to the tested dtype of role r. */
double *p_rand(p_role r, size_t n, double lo, double hi);
/* x [n] rounded to the tested dtype of role r (and back to double). */
void p_round(p_role r, double *x, size_t n);
void p_scratch_reset(void);

/* ---- the two views of the ops that take lengths (mask, BatchNorm) ---- */
/* Conv maps [n][c][t][f] (f positions per frame) and sequences [t][n][c]. */
ds_view p_map_view(int n, int c, int t, int f);
ds_view p_seq_view(int n, int c, int t);
/* The element (i, ch, p) of view v. */
size_t p_at(const ds_view *v, int i, int ch, long p);

/* A view with ragged lengths [v.n], named. */
typedef struct {
    const char *name;
    ds_view v;
    const int *len;
} p_ragged;
#define P_RAGGED 4
/* The views mask and BatchNorm are checked on: small and model-sized conv
 * maps with an utterance of one frame, sequences with unsorted lengths none
 * of which reaches t (a padded last frame). */
void p_ragged_views(p_ragged out[P_RAGGED]);

/* Stops the run (exit 2): a harness or reference failure, not a parity one. */
void p_fatal(ds_status s, const char *what);

/* ---- side memory ---- */
ds_dtype p_dtype(const p_side *s, p_role r);
/* The buffer dst [n] of role r (possibly inside a larger one) = h [n]. */
ds_status p_put(const p_side *s, p_role r, size_t n, const double *h, void *dst);
/* A new buffer of max(n, 1) elements of role r holding h [n] (zeros when NULL). */
ds_status p_upload(const p_side *s, p_role r, size_t n, const double *h, void **out);
/* A new int32 buffer of max(n, 1) elements holding h [n]. */
ds_status p_upload_ints(const p_side *s, size_t n, const int *h, void **out);
/* dst [n] of role r filled with NaN. */
ds_status p_poison(const p_side *s, p_role r, size_t n, void *dst);
/* h [n] = the buffer d [n] of role r, as doubles. */
ds_status p_download(const p_side *s, p_role r, size_t n, const void *d, double *h);
/* Scratch of n elements of the compute dtype, NaN-filled: an op must not
 * count on its workspace or reserve holding anything. */
ds_status p_scratch(const p_side *s, size_t n, void **out);
void p_release(const p_side *s, void *d);

/* ---- verdicts ---- */
typedef struct {
    const char *worst;     /* the output with the largest error / tolerance */
    double err, ratio;
    long wrong;
    int fail;
    char note[160];        /* why a case failed before comparing (op error) */
    int nlines;            /* --verbose: one line per compared output */
    char lines[P_MAX_TENSORS][128];
} p_verdict;

double p_tolerance(const char *op, const char *variant);
/* Compares output got [n] against ref [n] and folds it into v. */
void p_compare(p_verdict *v, const char *name, const double *got, const double *ref, size_t n,
               double tol);
/* With --inject op: perturbs one element of got [n] (the first output of the first case). */
void p_maybe_inject(const char *op, double *got, size_t n);
/* Prints the table line and counts the case. */
void p_report(const char *op, const char *variant, const p_verdict *v, double tol);
/* Whether the tested table has op (a missing one fails its cases). */
int p_has_op(const char *op);

/* Appends a tensor to case c: a real one of role r, or int32 values v [n]. */
void p_add(p_case *c, const char *name, p_role r, p_kind k, size_t n, const double *init);
/* v NULL: an int output the op assigns (it starts at -1). */
void p_add_ints(p_case *c, const char *name, size_t n, const int *v);
int *p_minus_ones(size_t n);
/* Runs case c on both sides and reports it. Its host buffers live until the
 * caller's next p_scratch_reset, so a fixture can serve several cases. */
void p_run(const p_case *c);

/* ---- the op families ---- */
void p_conv_bn_cases(void);      /* conv2d, BatchNorm, lookahead */
void p_dense_cases(void);        /* hardtanh, mask, dropout, add, linear, conv_to_seq, context */
void p_rnn_cases(void);          /* rnn_plan, rnn_fwd, rnn_bwd */
void p_ctc_cases(void);          /* ctc_loss, argmax, loss_total */
void p_optim_cases(void);        /* sumsq, sgd_step, adamw_step */

#endif
