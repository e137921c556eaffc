/* ops_cuda.h - the CUDA ops, one template per op of ds_ops (src/backend.h
 * gives each op's contract and tensor shapes), T the compute element type
 * (float, double, __half, __nv_bfloat16). Each op family's .cu, named like
 * its CPU twin in cpu/, defines its ops and instantiates them for the
 * four types; ops_table.cu puts them in the four tables. The other roles'
 * types follow from T (dtype_traits.cuh): stats and master are T for float
 * and double and float for the 16-bit types; the scalar role is always
 * double. Work and reserve sizes are in elements of T. */
#ifndef DS_OPS_CUDA_H
#define DS_OPS_CUDA_H

#include "cuda_ctx.h"

/* conv.cu (cuDNN) */
template <typename T> size_t cuda_conv2d_work(ds_ctx *, const ds_conv_geom *g, int want_dx);
template <typename T>
ds_status cuda_conv2d_fwd(ds_ctx *, const ds_conv_geom *g, const void *x, const void *w,
                          const void *b, void *y, void *work);
template <typename T>
ds_status cuda_conv2d_bwd(ds_ctx *, const ds_conv_geom *g, const void *x, const void *w,
                          const void *dy, void *dx, void *dw, void *db, void *work);

/* elementwise.cu */
template <typename T> ds_status cuda_mask(ds_ctx *, const ds_view *v, const int *len, void *x);
template <typename T>
ds_status cuda_hardtanh_fwd(ds_ctx *, size_t n, double lo, double hi, const void *x, void *y);
template <typename T>
ds_status cuda_hardtanh_bwd(ds_ctx *, size_t n, double lo, double hi, const void *y,
                            const void *dy, void *dx);
template <typename T>
ds_status cuda_dropout_fwd(ds_ctx *, size_t n, double p, const ds_dropout_key *key,
                           const void *x, void *y);
template <typename T>
ds_status cuda_dropout_bwd(ds_ctx *, size_t n, double p, const ds_dropout_key *key,
                           const void *dy, void *dx);
template <typename T> ds_status cuda_add(ds_ctx *, size_t n, const void *x, void *y);

/* batchnorm.cu (our kernels: padding neither counts nor receives output) */
template <typename T>
ds_status cuda_bn_moments(ds_ctx *, const ds_view *v, const int *len, const void *x, void *mom);
template <typename T>
ds_status cuda_bn_fwd_train(ds_ctx *, const ds_view *v, const int *len, const void *count,
                            const void *x, const void *mom, const void *gamma, const void *beta,
                            double eps, double momentum, void *y, void *save_mean,
                            void *save_invstd, void *run_mean, void *run_var);
template <typename T>
ds_status cuda_bn_fwd_eval(ds_ctx *, const ds_view *v, const int *len, const void *x,
                           const void *gamma, const void *beta, const void *run_mean,
                           const void *run_var, double eps, void *y);
template <typename T>
ds_status cuda_bn_bwd_moments(ds_ctx *, const ds_view *v, const int *len, const void *dy,
                              const void *x, const void *save_mean, const void *save_invstd,
                              void *mom);
template <typename T>
ds_status cuda_bn_bwd_train(ds_ctx *, const ds_view *v, const int *len, const void *count,
                            const void *dy, const void *x, const void *gamma,
                            const void *save_mean, const void *save_invstd, const void *mom,
                            void *dx, void *dgamma, void *dbeta);
template <typename T>
ds_status cuda_bn_bwd_eval(ds_ctx *, const ds_view *v, const int *len, const void *dy,
                           const void *x, const void *gamma, const void *run_mean,
                           const void *run_var, double eps, void *dx, void *dgamma, void *dbeta);

/* linear.cu (cuBLASLt) */
template <typename T>
ds_status cuda_linear_fwd(ds_ctx *, int m, int k, int o, const void *x, const void *w,
                          const void *b, void *y);
template <typename T>
ds_status cuda_linear_bwd(ds_ctx *, int m, int k, int o, const void *x, const void *w,
                          const void *dy, void *dx, void *dw, void *db);

/* layout.cu */
template <typename T>
ds_status cuda_conv_to_seq(ds_ctx *, int n, int c, int t, int f, const void *x, void *y);
template <typename T>
ds_status cuda_conv_to_seq_bwd(ds_ctx *, int n, int c, int t, int f, const void *dy, void *dx);
template <typename T>
ds_status cuda_context_fwd(ds_ctx *, int n, int t, int f, int c, const int *len, const void *x,
                           void *y);
template <typename T>
ds_status cuda_context_bwd(ds_ctx *, int n, int t, int f, int c, const int *len, const void *dy,
                           void *dx);

/* lookahead.cu */
template <typename T> size_t cuda_lookahead_work(int n, int h);
template <typename T>
ds_status cuda_lookahead_fwd(ds_ctx *, int t, int n, int h, int k, const void *x, const void *w,
                             void *y);
template <typename T>
ds_status cuda_lookahead_bwd(ds_ctx *, int t, int n, int h, int k, const void *x, const void *w,
                             const void *dy, void *dx, void *dw, void *work);

/* rnn.cu (cuDNN RNN API) */
template <typename T>
ds_status cuda_rnn_plan(ds_ctx *, const ds_rnn_desc *d, ds_rnn_plan **plan,
                        ds_rnn_layout *layout);
template <typename T> void cuda_rnn_plan_destroy(ds_ctx *, ds_rnn_plan *plan);
template <typename T>
ds_status cuda_rnn_fwd(ds_ctx *, ds_rnn_plan *plan, int t, int n, const int *len_host,
                       const int *len, const void *x, const void *w, void *y, void *reserve,
                       void *work);
template <typename T>
ds_status cuda_rnn_bwd(ds_ctx *, ds_rnn_plan *plan, int t, int n, const int *len_host,
                       const int *len, const void *x, const void *w, const void *dy, void *dx,
                       void *dw, void *reserve, void *work);

/* ctc.cu (our kernel: log space, one block per utterance) */
template <typename T> size_t cuda_ctc_work(int t, int n, int c, int max_label_len);
template <typename T>
ds_status cuda_ctc_loss(ds_ctx *, int t, int n, int c, int blank, const void *logits,
                        const int *len, const int *labels, const int *label_off,
                        const int *label_len, int max_label_len, const void *grad_scale,
                        const void *loss_scale, void *loss, void *dlogits, void *work);
template <typename T>
ds_status cuda_argmax(ds_ctx *, int t, int n, int c, const void *logits, int *best);
template <typename T>
ds_status cuda_loss_total(ds_ctx *, int n, const void *norm, const void *loss, void *out);

/* convert.cu: dst [n] of dt = src [n] of st, rounded once (ds_backend.convert) */
ds_status cuda_convert(ds_ctx *, ds_dtype dt, void *dst, ds_dtype st, const void *src, size_t n);

/* optim.cu (one fused kernel per update; deterministic reductions) */
template <typename T> ds_status cuda_sumsq(ds_ctx *, size_t n, const void *x, void *scal);
template <typename T>
ds_status cuda_sgd_step(ds_ctx *, size_t n, const ds_opt_hparams *h, void *p, const void *g,
                        void *v, void *w, void *scal);
template <typename T>
ds_status cuda_adamw_step(ds_ctx *, size_t n, const ds_opt_hparams *h, void *p, const void *g,
                          void *m, void *v, void *w, void *scal);

#endif
