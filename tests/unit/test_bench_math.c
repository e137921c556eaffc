/* test_bench_math.c - dstrain bench's arithmetic against hand-computed
 * values: the model FLOP formula (README) on a small config, and the step
 * statistics (median, mean, Student's t 95% interval). */
#include <math.h>
#include <stdio.h>

#include "bench.h"
#include "testutil.h"

static int fails;

static void near(const char *what, double got, double want, double tol)
{
    if (!(fabs(got - want) <= tol)) {
        printf("FAIL %s: %.10g, expected %.10g\n", what, got, want);
        fails++;
    }
}

/* cfg from json, or a failure counted. */
static int parsed(const char *json, ds_model_cfg *cfg)
{
    if (ds_config_parse(json, "test", cfg) == DS_OK)
        return 1;
    printf("FAIL config: %s\n", ds_status_last_error());
    fails++;
    return 0;
}

/* One conv (2 channels, 3x4 kernel, frequency stride 2, time padding 1),
 * one bidirectional GRU of 5, 7 classes, 10 features.
 * Utterance of 6 frames: conv out 6 x 4 -> 2*2*6*4*1*3*4 = 1152;
 * GRU in = 2*4 = 8: 2 dirs * 6 * 2*3*5*(8+5) = 4680; output 2*6*5*7 = 420;
 * forward 6252, train 3*6252 - 1152 = 17604. Of 3 frames: conv out 3 -> 576,
 * GRU 2340, output 210: forward 3126, train 8802. */
static void flops(void)
{
    const char *json =
        "{\"name\":\"flops\",\"n_features\":10,\"n_classes\":7,"
        "\"conv\":[{\"channels\":2,\"kernel_time\":3,\"kernel_freq\":4,\"stride_time\":1,"
        "\"stride_freq\":2,\"pad_time\":1,\"pad_freq\":0}],"
        "\"rnn\":{\"type\":\"gru\",\"hidden\":5,\"layers\":1,\"bidirectional\":true},"
        "\"fc_hidden\":[],\"bn_eps\":1e-5,\"bn_momentum\":0.1}";
    ds_model_cfg cfg;
    if (!parsed(json, &cfg))
        return;
    const int one[] = {6}, two[] = {6, 3};
    near("forward, 6 frames", ds_bench_flops(&cfg, one, 1, DS_BENCH_FORWARD), 6252, 0);
    near("train, 6 frames", ds_bench_flops(&cfg, one, 1, DS_BENCH_TRAIN), 17604, 0);
    near("forward, 6 and 3 frames", ds_bench_flops(&cfg, two, 2, DS_BENCH_FORWARD), 9378, 0);
    near("train, 6 and 3 frames", ds_bench_flops(&cfg, two, 2, DS_BENCH_TRAIN), 26406, 0);
}

/* The forward and training FLOPs of one utterance of frames frames of the
 * model of json against hand-computed fwd and train. */
static void flops_of(const char *what, const char *json, int frames, double fwd, double train)
{
    ds_model_cfg cfg;
    if (!parsed(json, &cfg))
        return;
    char name[64];
    snprintf(name, sizeof name, "%s forward, %d frames", what, frames);
    near(name, ds_bench_flops(&cfg, &frames, 1, DS_BENCH_FORWARD), fwd, 0);
    snprintf(name, sizeof name, "%s train, %d frames", what, frames);
    near(name, ds_bench_flops(&cfg, &frames, 1, DS_BENCH_TRAIN), train, 0);
}

/* DS1's graph: 4 features with 1 frame of context each side (12 inputs),
 * fc_pre [3], a unidirectional LSTM of 2, fc_hidden [3], 5 classes. Of 4
 * frames: fc_pre 2*4*12*3 = 288 (on the features: no input gradient); LSTM
 * 4 frames * 2*4*2*(3+2) = 320; fc_hidden 2*4*2*3 = 48; output 2*4*3*5 =
 * 120: forward 776, train 3*776 - 288 = 2040. */
static void flops_ds1(void)
{
    flops_of("ds1",
             "{\"name\":\"flops1\",\"n_features\":4,\"n_classes\":5,\"context\":1,\"fc_pre\":[3],"
             "\"rnn\":{\"type\":\"lstm\",\"hidden\":2,\"layers\":1,\"bidirectional\":false},"
             "\"fc_hidden\":[3],\"dropout\":0.1,\"output\":{\"batch_norm\":false,\"bias\":true}}",
             4, 776, 2040);
}

/* Jasper DR's graph: 4 features, 8 frames; a prologue (2 ch, kernel 3x4,
 * stride 2, pad 1): 4 frames, 2*2*4*3*4 = 192 (on the features: no input
 * gradient); block 1: a dilated layer (3 ch, kernel 3, dilation 2, pad 2)
 * 2*3*4*2*3 = 144 and a 1x1 layer 2*3*4*3 = 72 with its residual from the
 * prologue 2*3*4*2 = 48; block 2: a 1x1 layer (2 ch) 2*2*4*3 = 48, dense
 * residuals from the prologue 2*2*4*2 = 32 and block 1 2*2*4*3 = 48; output
 * 2*4*2*5 = 80: forward 664, train 3*664 - 192 = 1800. */
static void flops_jasper(void)
{
    flops_of("jasper",
             "{\"name\":\"flops2\",\"n_features\":4,\"n_classes\":5,\"dense_residual\":true,\"conv\":["
             "{\"channels\":2,\"kernel_time\":3,\"kernel_freq\":4,\"stride_time\":2,\"pad_time\":1,\"bias\":false},"
             "{\"channels\":3,\"kernel_time\":3,\"kernel_freq\":1,\"pad_time\":2,\"dilation_time\":2,\"block\":1},"
             "{\"channels\":3,\"kernel_time\":1,\"kernel_freq\":1,\"block\":1},"
             "{\"channels\":2,\"kernel_time\":1,\"kernel_freq\":1,\"block\":2}],"
             "\"output\":{\"batch_norm\":false,\"bias\":true}}",
             8, 664, 1800);
}

/* {1,2,3,4,100}: median 3, mean 22, sample sd sqrt(7610/4), t(4) = 2.776:
 * half width 2.776 * sqrt(1902.5 / 5) = 54.149. Even count: mean of the middle two. */
static void stats(void)
{
    const double x[] = {4, 100, 1, 3, 2};
    ds_bench_stats s = ds_bench_stats_of(x, 5);
    const double half = 2.776 * sqrt(1902.5 / 5);
    near("median", s.median, 3, 0);
    near("mean", s.mean, 22, 1e-12);
    near("ci low", s.lo, 22 - half, 1e-9);
    near("ci high", s.hi, 22 + half, 1e-9);
    const double y[] = {4, 1, 3, 2};
    near("median of four", ds_bench_stats_of(y, 4).median, 2.5, 0);
    const double z[] = {7};
    s = ds_bench_stats_of(z, 1);
    near("one step: no interval", s.hi - s.lo, 0, 0);
}

int main(void)
{
    flops();
    flops_ds1();
    flops_jasper();
    stats();
    printf("test_bench_math: %s\n", fails ? "FAILED" : "ok");
    return fails != 0;
}
