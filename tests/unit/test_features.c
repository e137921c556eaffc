/* test_features.c - the featurizer's settings, frame count, a naive-DFT
 * reference, tone peaks, log-mel/MFCC shapes and properties, errors, reuse
 * and concurrent featurizers. The comparison with torch.stft is
 * features_vs_torch. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "featurizer.h"
#include "testutil.h"

#define SR 16000

static void test_settings(void)
{
    ds_feature_cfg c = ds_feature_defaults();
    T_CHECK(c.type == DS_FEAT_SPECTROGRAM && c.sample_rate == SR && c.n_mels == 80 &&
                c.n_mfcc == 26, "defaults");
    T_CHECK(ds_feature_n_fft(&c) == 320 && ds_feature_hop(&c) == 160, "n_fft %d hop %d",
            ds_feature_n_fft(&c), ds_feature_hop(&c));
    T_CHECK(ds_feature_dim(&c) == 161, "spectrogram dim %d", ds_feature_dim(&c));
    c.type = DS_FEAT_LOGMEL;
    T_CHECK(ds_feature_dim(&c) == 80, "log-mel dim %d", ds_feature_dim(&c));
    c.type = DS_FEAT_MFCC;
    T_CHECK(ds_feature_dim(&c) == 26, "mfcc dim %d", ds_feature_dim(&c));

    const char *names[] = {"log-spectrogram", "log-mel", "mfcc"};
    for (int i = 0; i < 3; i++) {
        ds_feature_type t = DS_FEAT_MFCC;
        T_CHECK(ds_feature_type_parse(names[i], &t) == DS_OK &&
                    strcmp(ds_feature_type_name(t), names[i]) == 0, "parse %s", names[i]);
    }
    ds_feature_type t;
    ds_status_clear_error();
    T_CHECK(ds_feature_type_parse("spectrogram", &t) == DS_ERR_ARG &&
                strstr(ds_status_last_error(), "log-spectrogram"), "bad type: %s", ds_status_last_error());

    ds_featurizer *f = NULL;
    c = ds_feature_defaults();
    c.type = DS_FEAT_MFCC;
    c.n_mfcc = DS_MFCC_N_MELS + 1;
    T_CHECK(ds_featurizer_create(&c, &f) == DS_ERR_ARG && !f, "n_mfcc above the bank size");
    c = ds_feature_defaults();
    c.window_stride_s = 0.00001;
    T_CHECK(ds_featurizer_create(&c, &f) == DS_ERR_ARG && !f, "hop 0");
    c = ds_feature_defaults();
    c.type = DS_FEAT_LOGMEL;
    c.n_mels = 0;
    T_CHECK(ds_featurizer_create(&c, &f) == DS_ERR_ARG && !f, "no mel filters");
}

static void test_frames(void)
{
    ds_feature_cfg c = ds_feature_defaults();
    T_CHECK(ds_feature_min_samples(&c) == 161, "min samples %ld", ds_feature_min_samples(&c));
    long n[] = {161, 319, 320, 321, 479, 480, 16000, 16159, 16160, 123457};
    for (size_t i = 0; i < sizeof n / sizeof n[0]; i++)
        T_CHECK(ds_feature_frames(&c, n[i]) == 1 + n[i] / 160, "frames(%ld) = %ld", n[i],
                ds_feature_frames(&c, n[i]));
    T_CHECK(ds_feature_frames(&c, 160) == 0 && ds_feature_frames(&c, 0) == 0,
            "too short audio has no frames");
    /* odd n_fft 321 (16050 Hz): padded by 160 on each side */
    c.sample_rate = 16050;
    T_CHECK(ds_feature_n_fft(&c) == 321 && ds_feature_frames(&c, 200) == 2 &&
                ds_feature_frames(&c, 16050) == 1 + 16049 / 160, "odd n_fft frames %ld",
            ds_feature_frames(&c, 200));
}

/* Features of audio [n] under c into a new buffer [frames][dim]; NULL on failure. */
static float *featurize(const ds_feature_cfg *c, const float *audio, long n)
{
    ds_featurizer *f = NULL;
    size_t count = (size_t)ds_feature_frames(c, n) * ds_feature_dim(c);
    float *out = malloc((count + 1) * sizeof *out);
    ds_status st = out ? ds_featurizer_create(c, &f) : DS_ERR_MEM;
    if (st == DS_OK)
        st = ds_featurizer_run(f, audio, n, out);
    ds_featurizer_destroy(f);
    T_CHECK(st == DS_OK, "featurize %s: %s", ds_feature_type_name(c->type), ds_status_last_error());
    if (st != DS_OK) {
        free(out);
        return NULL;
    }
    return out;
}

static float *noise(uint64_t seed, long n, double amp)
{
    ds_rng r;
    ds_rng_seed(&r, seed);
    float *x = malloc((size_t)n * sizeof *x);
    for (long i = 0; x && i < n; i++)
        x[i] = (float)ds_rng_range(&r, -amp, amp);
    return x;
}

/* Frame t, bin k of the log spectrogram by the definition, with a naive DFT. */
static double naive_bin(const float *x, long n, long t, int k)
{
    double re = 0, im = 0;
    for (int i = 0; i < 320; i++) {
        long j = t * 160 + i - 160;
        j = j < 0 ? -j : j >= n ? 2 * (n - 1) - j : j;
        double w = (0.54 - 0.46 * cos(2 * M_PI * i / 319.0)) * x[j];
        re += w * cos(2 * M_PI * k * i / 320.0);
        im -= w * sin(2 * M_PI * k * i / 320.0);
    }
    return log1p(sqrt(re * re + im * im));
}

static void test_naive_dft(void)
{
    long n = 437;   /* 3 frames, both ends reflected */
    ds_feature_cfg c = ds_feature_defaults();
    float *x = noise(7, n, 0.8), *s = x ? featurize(&c, x, n) : NULL;
    double worst = 0;
    for (long t = 0; s && t < ds_feature_frames(&c, n); t++)
        for (int k = 0; k < 161; k++)
            worst = fmax(worst, fabs(s[t * 161 + k] - naive_bin(x, n, t, k)));
    T_CHECK(s && worst < 1e-5, "log spectrogram vs naive DFT: %.3g", worst);
    free(x);
    free(s);
}

/* A tone of amplitude a at bin k (k * 50 Hz) peaks at bin k in the inner
 * frames, at about log1p(a/2 * sum(window)). */
static void test_tone(int k, double a)
{
    long n = SR;
    float *x = malloc((size_t)n * sizeof *x);
    for (long i = 0; x && i < n; i++)
        x[i] = (float)(a * sin(2 * M_PI * k * 50.0 * i / SR + 0.3));
    ds_feature_cfg c = ds_feature_defaults();
    float *s = x ? featurize(&c, x, n) : NULL;
    int bad = 0;
    double want = log1p(a / 2 * (0.54 * 320 - 0.46)), worst = 0;
    for (long t = 2; s && t < ds_feature_frames(&c, n) - 2; t++) {
        const float *row = s + t * 161;
        int arg = 0;
        for (int b = 1; b < 161; b++)
            arg = row[b] > row[arg] ? b : arg;
        bad += arg != k;
        worst = fmax(worst, fabs(row[k] - want));
    }
    T_CHECK(s && bad == 0, "tone at bin %d: %d frames peak elsewhere", k, bad);
    T_CHECK(s && worst < 0.01, "tone at bin %d: peak off by %.3g from %.4f", k, worst, want);
    free(x);
    free(s);
}

static int all_finite(const float *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isfinite(v[i]))
            return 0;
    return 1;
}

/* Log-mel and MFCC of noise: finite; silence gives the log floor exactly. */
static void test_mel_shapes(void)
{
    long n = 8000;
    float *x = noise(11, n, 0.3), *zeros = calloc((size_t)n, sizeof *zeros);
    ds_feature_cfg c = ds_feature_defaults();
    long frames = ds_feature_frames(&c, n);
    for (int t = DS_FEAT_LOGMEL; t <= DS_FEAT_MFCC; t++) {
        c.type = (ds_feature_type)t;
        int dim = ds_feature_dim(&c);
        float *v = featurize(&c, x, n), *z = featurize(&c, zeros, n);
        T_CHECK(v && all_finite(v, (size_t)frames * dim), "%s of noise finite",
                ds_feature_type_name(c.type));
        double floor0 = log(1e-6) * (t == DS_FEAT_MFCC ? sqrt(DS_MFCC_N_MELS) : 1), worst = 0;
        for (long i = 0; z && i < frames * dim; i++)
            worst = fmax(worst, fabs(z[i] - (t == DS_FEAT_LOGMEL || i % dim == 0 ? floor0 : 0)));
        T_CHECK(z && worst < 1e-5, "%s of silence: off the floor by %.3g",
                ds_feature_type_name(c.type), worst);
        free(v);
        free(z);
    }
    free(x);
    free(zeros);
}

/* Scaling audio by a adds 2 log a to every log-mel energy well above the
 * floor, so MFCC coefficient 0 (sqrt(M) times the mean) moves by 2 log a
 * sqrt(M) and the others stay put. */
static void test_scale_property(void)
{
    long n = 6000;
    double a = 4;
    float *x = noise(3, n, 0.2), *y = malloc((size_t)n * sizeof *y);
    for (long i = 0; x && y && i < n; i++)
        y[i] = (float)(a * x[i]);   /* exact: a power of two */
    ds_feature_cfg c = ds_feature_defaults();
    c.type = DS_FEAT_MFCC;
    float *mx = featurize(&c, x, n), *my = featurize(&c, y, n);
    double c0 = 0, others = 0, shift = 2 * log(a) * sqrt(DS_MFCC_N_MELS);
    for (long t = 0; mx && my && t < ds_feature_frames(&c, n); t++) {
        c0 = fmax(c0, fabs(my[t * 26] - mx[t * 26] - shift));
        for (int j = 1; j < 26; j++)
            others = fmax(others, fabs(my[t * 26 + j] - mx[t * 26 + j]));
    }
    T_CHECK(mx && my && c0 < 1e-3, "c0 shift off by %.3g", c0);
    T_CHECK(mx && my && others < 1e-3, "other coefficients moved by %.3g", others);
    free(x);
    free(y);
    free(mx);
    free(my);
}

static void test_too_short(void)
{
    ds_feature_cfg c = ds_feature_defaults();
    ds_featurizer *f = NULL;
    float x[161] = {0.5f}, out[2 * 161];
    T_CHECK(ds_featurizer_create(&c, &f) == DS_OK, "create: %s", ds_status_last_error());
    if (!f)
        return;
    ds_status_clear_error();
    T_CHECK(ds_featurizer_run(f, x, 160, out) == DS_ERR_ARG && strstr(ds_status_last_error(), "160"),
            "160 samples: %s", ds_status_last_error());
    T_CHECK(ds_featurizer_run(f, x, 0, out) == DS_ERR_ARG, "0 samples accepted");
    T_CHECK(ds_featurizer_run(f, x, 161, out) == DS_OK && all_finite(out, 2 * 161),
            "161 samples: %s", ds_status_last_error());
    ds_featurizer_destroy(f);
}

/* One featurizer run repeatedly, with another signal in between, gives
 * bit-identical output for every type. */
static void test_reuse(void)
{
    long n = 5003;
    float *x = noise(5, n, 0.5), *other = noise(6, 2222, 0.9);
    for (int t = DS_FEAT_SPECTROGRAM; t <= DS_FEAT_MFCC; t++) {
        ds_feature_cfg c = ds_feature_defaults();
        c.type = (ds_feature_type)t;
        size_t count = (size_t)ds_feature_frames(&c, n) * ds_feature_dim(&c);
        float *a = malloc(count * sizeof *a), *b = malloc(count * sizeof *b);
        float *o = malloc((size_t)ds_feature_frames(&c, 2222) * ds_feature_dim(&c) * sizeof *o);
        ds_featurizer *f = NULL;
        int same = a && b && o && ds_featurizer_create(&c, &f) == DS_OK &&
                   ds_featurizer_run(f, x, n, a) == DS_OK &&
                   ds_featurizer_run(f, other, 2222, o) == DS_OK &&
                   ds_featurizer_run(f, x, n, b) == DS_OK && memcmp(a, b, count * sizeof *a) == 0;
        T_CHECK(same, "%s: reuse changed the output", ds_feature_type_name(c.type));
        ds_featurizer_destroy(f);
        free(a);
        free(b);
        free(o);
    }
    free(x);
    free(other);
}

/* Threads that create, run and destroy their own featurizers at once (the
 * planner lock) must all get the single-threaded result. */
typedef struct {
    const float *x;
    long n;
    const float *want;   /* [frames][dim] */
    int ok;
} thread_job;

static void *thread_main(void *arg)
{
    thread_job *j = arg;
    ds_feature_cfg c = ds_feature_defaults();
    c.type = DS_FEAT_MFCC;
    size_t count = (size_t)ds_feature_frames(&c, j->n) * ds_feature_dim(&c);
    float *out = malloc(count * sizeof *out);
    j->ok = out != NULL;
    for (int rep = 0; rep < 20 && j->ok; rep++) {
        ds_featurizer *f = NULL;
        j->ok = ds_featurizer_create(&c, &f) == DS_OK &&
                ds_featurizer_run(f, j->x, j->n, out) == DS_OK &&
                memcmp(out, j->want, count * sizeof *out) == 0;
        ds_featurizer_destroy(f);
    }
    free(out);
    return NULL;
}

static void test_threads(void)
{
    long n = 3000;
    float *x = noise(9, n, 0.5);
    ds_feature_cfg c = ds_feature_defaults();
    c.type = DS_FEAT_MFCC;
    float *want = x ? featurize(&c, x, n) : NULL;
    thread_job jobs[4];
    pthread_t th[4];
    int started = 0;
    for (int i = 0; want && i < 4; i++) {
        jobs[i] = (thread_job){x, n, want, 0};
        started += pthread_create(&th[i], NULL, thread_main, &jobs[i]) == 0;
    }
    T_CHECK(started == 4, "started %d threads", started);
    for (int i = 0; i < started; i++) {
        pthread_join(th[i], NULL);
        T_CHECK(jobs[i].ok, "thread %d: different features", i);
    }
    free(x);
    free(want);
}

int main(void)
{
    test_settings();
    test_frames();
    test_naive_dft();
    test_tone(5, 0.5);
    test_tone(40, 0.9);
    test_tone(123, 0.1);
    test_mel_shapes();
    test_scale_property();
    test_too_short();
    test_reuse();
    test_threads();
    return t_finish("test_features");
}
