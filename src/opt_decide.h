/* opt_decide.h - the optimizer's verdict on one step, taken in backend
 * memory: the unscaled global norm, the clip factor, the skip on a
 * non-finite norm, and dynamic loss scaling. One definition for the CPU ops
 * and the CUDA kernel (run by one thread), so both backends decide alike. */
#ifndef DS_OPT_DECIDE_H
#define DS_OPT_DECIDE_H

#include <math.h>

#include "backend.h"

#ifdef __CUDACC__
#define DS_HOST_DEVICE __host__ __device__
#else
#define DS_HOST_DEVICE
#endif

/* Below this the scale stops halving: a scale under 1 would only shrink
 * gradients that already overflow unscaled. */
#define DS_LOSS_SCALE_MIN 1.0

/* scal [DS_OPT_SCALARS] (scalar role), with scal[DS_OPT_SUMSQ] the sum of
 * squares of gradients made at scale scal[DS_OPT_SCALE]. Returns 1 when the
 * update runs, with the gradients multiplied by scal[DS_OPT_GAIN]; 0 to skip.
 * A scale of 1 leaves every figure as without scaling (x / 1 is exact). */
static inline DS_HOST_DEVICE int ds_opt_decide(double max_norm, double scale_window, double *scal)
{
    const double scale = scal[DS_OPT_SCALE];
    const double norm = sqrt(scal[DS_OPT_SUMSQ]) / scale;
    scal[DS_OPT_NORM] = norm;
    scal[DS_OPT_SCALE_USED] = scale;
    if (!isfinite(norm)) {
        scal[DS_OPT_SKIPPED] = 1;
        scal[DS_OPT_CLIP] = 0;
        scal[DS_OPT_GAIN] = 0;
        scal[DS_OPT_SKIPS] += 1;
        if (scale_window > 0) {
            scal[DS_OPT_SCALE] = fmax(scale * 0.5, DS_LOSS_SCALE_MIN);
            scal[DS_OPT_CLEAN] = 0;
        }
        return 0;
    }
    double f = 1;
    if (max_norm > 0 && norm > max_norm)
        f = max_norm / (norm + 1e-6);   /* as torch's clip_grad_norm_ */
    scal[DS_OPT_SKIPPED] = 0;
    scal[DS_OPT_CLIP] = f;
    scal[DS_OPT_GAIN] = f / scale;
    scal[DS_OPT_STEPS] += 1;
    if (scale_window > 0 && (scal[DS_OPT_CLEAN] += 1) >= scale_window) {
        scal[DS_OPT_SCALE] = scale * 2;
        scal[DS_OPT_CLEAN] = 0;
    }
    return 1;
}

#endif
