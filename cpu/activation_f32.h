/* activation_f32.h - exp, sigmoid and tanh for float that a compiler can
 * vectorise: no calls, no branches, no errno. The recurrent cells apply
 * them to every gate of every row at every time step, where scalar libm
 * calls cost as much as the step's matrix product (ds2: 20,000 per step).
 *
 * exp: x = k ln2 + r with |r| <= ln2/2 (ln2 split in two so k ln2 is exact
 * enough), e^r by a degree-7 polynomial (the Cephes expf coefficients), 2^k
 * put into the exponent bits. Arguments are clamped to [-87.3, 88], where
 * the result stays a normal float. tanh: an odd Taylor polynomial below
 * |x| = 0.3, 1 - 2 / (e^(2|x|) + 1) above. tests/unit/test_activation.c
 * bounds their error against double-precision libm (a few ulp). */
#ifndef DS_CPU_ACTIVATION_F32_H
#define DS_CPU_ACTIVATION_F32_H

#include <stdint.h>
#include <string.h>

static inline float act_expf(float x)
{
    x = x < -87.3f ? -87.3f : x > 88.0f ? 88.0f : x;   /* 2^k stays a normal float */
    /* k = round(x / ln2): adding 1.5 * 2^23 rounds to an integer */
    const float shift = 12582912.0f;
    const float k = (x * 1.44269504088896341f + shift) - shift;
    float r = x - k * 0.693359375f;   /* ln2's leading bits: k * them is exact */
    r = r - k * -2.12194440e-4f;      /* and the rest */
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * (r * r) + r + 1.0f;
    const int32_t bits = ((int32_t)k + 127) << 23;   /* 2^k */
    float two_k;
    memcpy(&two_k, &bits, sizeof two_k);
    return p * two_k;
}

static inline float act_sigmoidf(float x) { return 1.0f / (1.0f + act_expf(-x)); }

static inline float act_tanhf(float x)
{
    const float a = x < 0 ? -x : x, a2 = a * a;
    /* |x| < 0.3: x - x^3/3 + 2x^5/15 - 17x^7/315 + 62x^9/2835 - 1382x^11/155925 */
    float p = -8.86323552e-3f;
    p = p * a2 + 2.18694885e-2f;
    p = p * a2 - 5.39682540e-2f;
    p = p * a2 + 1.33333333e-1f;
    p = p * a2 - 3.33333333e-1f;
    const float small = a + a * a2 * p;
    const float large = 1.0f - 2.0f / (act_expf(2.0f * a) + 1.0f);
    const float t = a < 0.3f ? small : large;
    return x < 0 ? -t : t;
}

#endif
