/* optim.cu - the gradient norm and the optimizer updates on flat buffers
 * (twin of cpu/optim.inc).
 *
 * sumsq is a deterministic two-pass reduction in double: per-block partial
 * sums into ctx->partials, then one block adds them in a fixed order. A step
 * is two launches: a one-thread kernel decides from scal[DS_OPT_SUMSQ] (norm,
 * clip factor, skip, step count, loss scale: the host never reads them
 * inside a step),
 * then one fused kernel updates every element, reading the decision from
 * device memory. Hyperparameters arrive by value, converted on the host
 * exactly as the CPU converts them.
 *
 * Roles: g [n] is compute (T); p, v, m [n] are master, P = ds_master_t<T>
 * (T for float and double, float for the 16-bit tables), and the update is
 * computed in P; w [n] (compute, T) gets the updated p rounded once. */
#include <cmath>

#include "ops_cuda.h"
#include "opt_decide.h"

namespace {

/* Threads of the reduction blocks: a power of two (tree reduction). */
constexpr int RED_BLOCK = 256;

/* The block's threads' values v summed in a fixed tree; thread 0 gets the sum.
 * sh [RED_BLOCK] is shared scratch. */
__device__ double block_sum(double v, double *sh)
{
    sh[threadIdx.x] = v;
    __syncthreads();
    for (int half = RED_BLOCK / 2; half > 0; half /= 2) {
        if ((int)threadIdx.x < half)
            sh[threadIdx.x] += sh[threadIdx.x + half];
        __syncthreads();
    }
    return sh[0];
}

/* Pass 1: x [n] -> partials [gridDim.x], the sum of x^2 over the elements
 * this block's grid-stride loop visits. */
template <typename T>
__global__ void sumsq_partial(size_t n, const T *__restrict__ x, double *__restrict__ partials)
{
    __shared__ double sh[RED_BLOCK];
    double s = 0;
    for (size_t i = blockIdx.x * (size_t)RED_BLOCK + threadIdx.x; i < n;
         i += (size_t)gridDim.x * RED_BLOCK)
        s += (double)ds_wide(x[i]) * (double)ds_wide(x[i]);
    s = block_sum(s, sh);
    if (threadIdx.x == 0)
        partials[blockIdx.x] = s;
}

/* Pass 2 (one block): partials [blocks] added to scal[DS_OPT_SUMSQ]. */
__global__ void sumsq_final(int blocks, const double *__restrict__ partials, double *scal)
{
    __shared__ double sh[RED_BLOCK];
    double s = 0;
    for (int b = threadIdx.x; b < blocks; b += RED_BLOCK)
        s += partials[b];
    s = block_sum(s, sh);
    if (threadIdx.x == 0)
        scal[DS_OPT_SUMSQ] += s;
}

/* The verdict (opt_decide.h, shared with the CPU), one thread: norm, clip,
 * skip, loss scale, and the gradients' factor in scal[DS_OPT_GAIN]. */
__global__ void opt_decide(double max_norm, double scale_window, double *scal)
{
    ds_opt_decide(max_norm, scale_window, scal);
}

__device__ inline float dev_sqrt(float x) { return sqrtf(x); }
__device__ inline double dev_sqrt(double x) { return sqrt(x); }

/* SGD hyperparameters in the master type P, as the CPU rounds them (the
 * learning rate is read from scal[DS_OPT_LR]). */
template <typename P> struct sgd_args {
    P mu, wd;
    int nesterov;
};

/* p, v [n] (master, P; v unused when mu is 0), g [n] (T), w [n] (T or NULL),
 * scal [DS_OPT_BUFFER] after opt_decide: torch.optim.SGD with momentum
 * (dampening 0), the CPU's order. */
template <typename T, typename P>
__global__ void sgd_update(size_t n, sgd_args<P> h, P *__restrict__ p, const T *__restrict__ g,
                           P *__restrict__ v, T *__restrict__ w, const double *__restrict__ scal)
{
    if (scal[DS_OPT_SKIPPED] != 0)
        return;
    const P gain = (P)scal[DS_OPT_GAIN], lr = (P)scal[DS_OPT_LR];
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        const P gi = ds_wide(g[i]);
        const P gc = gain == P(1) ? gi : gi * gain;
        const P pi = p[i];
        P d = gc + h.wd * pi;
        if (h.mu != P(0)) {
            const P vi = h.mu * v[i] + d;
            v[i] = vi;
            d = h.nesterov ? d + h.mu * vi : vi;
        }
        const P pn = pi - lr * d;
        p[i] = pn;
        if (w)
            w[i] = ds_round<T>(pn);
    }
}

/* AdamW hyperparameters that do not depend on the step, in the master type
 * P as the CPU rounds them; the betas and the weight decay stay double for
 * the terms formed with the step's learning rate (scal[DS_OPT_LR]) and count. */
template <typename P> struct adamw_args {
    P b1, b2, one_m_b1, one_m_b2, eps;
    double beta1, beta2, wd;
};

/* p, m, v [n] (master, P), g [n] (T), w [n] (T or NULL), scal
 * [DS_OPT_BUFFER] after opt_decide: torch.optim.AdamW (amsgrad off), the
 * step counted from 1 (scal[DS_OPT_STEPS] after the increment). The bias
 * corrections, which depend on the step in device memory, are formed once
 * per block in double and rounded to P as the CPU does. */
template <typename T, typename P>
__global__ void adamw_update(size_t n, adamw_args<P> h, P *__restrict__ p,
                             const T *__restrict__ g, P *__restrict__ m, P *__restrict__ v,
                             T *__restrict__ w, const double *__restrict__ scal)
{
    __shared__ P corr[3];   /* step_size, sqrt of the second bias correction, decay */
    if (scal[DS_OPT_SKIPPED] != 0)
        return;   /* the same verdict for every thread: no one waits below */
    if (threadIdx.x == 0) {
        const double step = scal[DS_OPT_STEPS], lr = scal[DS_OPT_LR];
        const P bc1 = (P)(1 - pow(h.beta1, step));
        corr[0] = (P)lr / bc1;
        corr[1] = (P)sqrt(1 - pow(h.beta2, step));
        /* 1 - lr*wd rounded once, unfused, as the host forms it */
        corr[2] = (P)__dsub_rn(1.0, __dmul_rn(lr, h.wd));
    }
    __syncthreads();
    const P step_size = corr[0], bc2_sqrt = corr[1], decay = corr[2];
    const P gain = (P)scal[DS_OPT_GAIN];
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        const P gi = ds_wide(g[i]);
        const P gc = gain == P(1) ? gi : gi * gain;
        P pi = p[i] * decay;
        const P mi = h.b1 * m[i] + h.one_m_b1 * gc;
        const P vi = h.b2 * v[i] + h.one_m_b2 * gc * gc;
        m[i] = mi;
        v[i] = vi;
        pi -= step_size * mi / (dev_sqrt(vi) / bc2_sqrt + h.eps);
        p[i] = pi;
        if (w)
            w[i] = ds_round<T>(pi);
    }
}

}   // namespace

/* x [n] -> scal[DS_OPT_SUMSQ] (scalar) += sum x^2 (the other scalars untouched). */
template <typename T> ds_status cuda_sumsq(ds_ctx *ctx, size_t n, const void *x, void *scal)
{
    unsigned blocks = ds_cuda_grid(ctx, n, RED_BLOCK);
    if (blocks > DS_CUDA_PARTIALS)
        blocks = DS_CUDA_PARTIALS;
    sumsq_partial<T><<<blocks, RED_BLOCK, 0, ctx->stream>>>(n, (const T *)x, ctx->partials);
    DS_LAUNCHED();
    sumsq_final<<<1, RED_BLOCK, 0, ctx->stream>>>((int)blocks, ctx->partials, (double *)scal);
    DS_LAUNCHED();
    return DS_OK;
}

/* p, v [n] (master; v NULL when momentum is 0), g [n], w [n] (or NULL),
 * scal [DS_OPT_BUFFER] (scalar): one SGD update, decided on the device. */
template <typename T>
ds_status cuda_sgd_step(ds_ctx *ctx, size_t n, const ds_opt_hparams *h, void *p, const void *g,
                        void *v, void *w, void *scal)
{
    typedef ds_master_t<T> P;
    const sgd_args<P> a = {(P)h->momentum, (P)h->weight_decay, h->nesterov};
    if (a.mu != P(0) && !v && n > 0)
        return DS_FAIL(DS_ERR_ARG, "sgd_step: momentum %g needs a velocity buffer",
                       h->momentum);
    if (!h->decided) {
        opt_decide<<<1, 1, 0, ctx->stream>>>(h->max_norm, h->scale_window, (double *)scal);
        DS_LAUNCHED();
    }
    sgd_update<T, P><<<ds_cuda_grid(ctx, n), DS_CUDA_BLOCK, 0, ctx->stream>>>(
        n, a, (P *)p, (const T *)g, (P *)v, (T *)w, (const double *)scal);
    DS_LAUNCHED();
    return DS_OK;
}

/* p, m, v [n] (master), g [n], w [n] (or NULL), scal [DS_OPT_BUFFER]
 * (scalar): one AdamW update, decided on the device. */
template <typename T>
ds_status cuda_adamw_step(ds_ctx *ctx, size_t n, const ds_opt_hparams *h, void *p,
                          const void *g, void *m, void *v, void *w, void *scal)
{
    typedef ds_master_t<T> P;
    adamw_args<P> a;
    a.b1 = (P)h->beta1;
    a.b2 = (P)h->beta2;
    /* 1 - beta in double: 1 - (float)0.999 is off by 1.3e-5 relative */
    a.one_m_b1 = (P)(1 - h->beta1);
    a.one_m_b2 = (P)(1 - h->beta2);
    a.eps = (P)h->eps;
    a.beta1 = h->beta1;
    a.beta2 = h->beta2;
    a.wd = h->weight_decay;
    if (!h->decided) {
        opt_decide<<<1, 1, 0, ctx->stream>>>(h->max_norm, h->scale_window, (double *)scal);
        DS_LAUNCHED();
    }
    adamw_update<T, P><<<ds_cuda_grid(ctx, n), DS_CUDA_BLOCK, 0, ctx->stream>>>(
        n, a, (P *)p, (const T *)g, (P *)m, (P *)v, (T *)w, (const double *)scal);
    DS_LAUNCHED();
    return DS_OK;
}

#define OPTIM_INSTANTIATE(T)                                                                  \
    template ds_status cuda_sumsq<T>(ds_ctx *, size_t, const void *, void *);                  \
    template ds_status cuda_sgd_step<T>(ds_ctx *, size_t, const ds_opt_hparams *, void *,      \
                                        const void *, void *, void *, void *);                 \
    template ds_status cuda_adamw_step<T>(ds_ctx *, size_t, const ds_opt_hparams *, void *,    \
                                          const void *, void *, void *, void *, void *);

OPTIM_INSTANTIATE(float)
OPTIM_INSTANTIATE(double)
OPTIM_INSTANTIATE(__half)
OPTIM_INSTANTIATE(__nv_bfloat16)
