/* test_activation.c - the CPU's float exp, sigmoid and tanh
 * (cpu/activation_f32.h) against double-precision libm: every float in
 * a dense sweep, the region where tanh switches formula, tiny and huge
 * arguments, and the limits. Errors in ulps of the exact float result. */
#include <math.h>
#include <stdio.h>

#include "../../cpu/activation_f32.h"
#include "testutil.h"

/* |got - want| in units of the last place of want (as a float). */
static double ulps(float got, double want)
{
    const float w = (float)want;
    const double ulp = w == 0 ? 1.4e-45 : nextafterf(fabsf(w), INFINITY) - fabsf(w);
    return fabs((double)got - want) / ulp;
}

static double worst_ulps(const char *name, float lo, float hi, int points,
                         float (*f)(float), double (*ref)(double), float *at)
{
    double worst = 0;
    for (int i = 0; i <= points; i++) {
        const float x = lo + (hi - lo) * (float)i / (float)points;
        const double e = ulps(f(x), ref((double)x));
        if (e > worst)
            worst = e, *at = x;
    }
    printf("  %-8s [%g, %g]  worst %.2f ulp at %g\n", name, lo, hi, worst, *at);
    return worst;
}

static double sigmoid_ref(double x) { return 1 / (1 + exp(-x)); }

int main(void)
{
    float at = 0;
    /* exp where it is a normal float */
    T_CHECK(worst_ulps("exp", -87.0f, 88.0f, 2000000, act_expf, exp, &at) <= 2,
            "exp off by more than 2 ulp at %g", at);
    T_CHECK(worst_ulps("exp", -1.0f, 1.0f, 1000000, act_expf, exp, &at) <= 2,
            "exp off by more than 2 ulp near 0, at %g", at);
    T_CHECK(worst_ulps("sigmoid", -30.0f, 30.0f, 2000000, act_sigmoidf, sigmoid_ref, &at) <= 3,
            "sigmoid off by more than 3 ulp at %g", at);
    T_CHECK(worst_ulps("tanh", -10.0f, 10.0f, 2000000, act_tanhf, tanh, &at) <= 4,
            "tanh off by more than 4 ulp at %g", at);
    /* around the switch from the polynomial to the exp form */
    T_CHECK(worst_ulps("tanh", 0.25f, 0.35f, 1000000, act_tanhf, tanh, &at) <= 4,
            "tanh off by more than 4 ulp near 0.3, at %g", at);
    T_CHECK(worst_ulps("tanh", -1e-3f, 1e-3f, 1000000, act_tanhf, tanh, &at) <= 2,
            "tanh off by more than 2 ulp near 0, at %g", at);

    /* limits: saturation without inf or NaN, odd symmetry, exact zero */
    T_CHECK(act_tanhf(50.0f) == 1.0f && act_tanhf(-50.0f) == -1.0f && act_tanhf(0.0f) == 0.0f,
            "tanh(+-50) %g %g, tanh(0) %g", act_tanhf(50.0f), act_tanhf(-50.0f), act_tanhf(0.0f));
    T_CHECK(act_tanhf(1e30f) == 1.0f && act_tanhf(-1e30f) == -1.0f, "tanh of huge arguments");
    T_CHECK(act_sigmoidf(200.0f) == 1.0f && act_sigmoidf(-200.0f) >= 0.0f &&
                act_sigmoidf(-200.0f) < 1e-37f,
            "sigmoid(+-200) %g %g", act_sigmoidf(200.0f), act_sigmoidf(-200.0f));
    T_CHECK(isfinite(act_expf(1000.0f)) && act_expf(-1000.0f) >= 0.0f,
            "exp clamps: exp(1000) %g exp(-1000) %g", act_expf(1000.0f), act_expf(-1000.0f));
    for (float x = 0.01f; x < 20; x *= 1.37f)
        T_CHECK(act_tanhf(-x) == -act_tanhf(x), "tanh not odd at %g", x);
    return t_finish(__FILE__);
}
