/* features_torch_check.c - runs our featurizer on the signals written by
 * tests/peer/features_cases.py (see there for the file layout) and compares
 * with the references: torch.stft for the log-spectrogram, numpy
 * implementations of the definitions in featurizer.h for log-mel and MFCC.
 *
 * usage: features_torch_check CASES.h5
 *
 * Every feature must agree within 1e-4 absolute (the bound for the
 * log1p magnitude; log-mel and MFCC are held to the same bound). Our
 * arithmetic is in double and only the output is rounded to float, so the
 * expected error is the float rounding, a few 1e-7 for values below 32. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "featurizer.h"
#include "h5_io.h"
#include "testutil.h"

#define TOL 1e-4

/* One case as read from the file. */
typedef struct {
    char name[96];
    ds_feature_cfg cfg;
    int n_fft, hop;      /* Python's int() of the products */
    long n;
    float *audio;        /* [n] */
} feat_case;

static const ds_feature_type types[3] = {DS_FEAT_SPECTROGRAM, DS_FEAT_LOGMEL, DS_FEAT_MFCC};
static const char *const ref_names[3] = {"spec", "logmel", "mfcc"};

static ds_status read_attr_int(hid_t g, const char *name, int *out)
{
    double v;
    DS_TRY(ds_h5_read_attr_f64(g, name, &v));
    *out = (int)v;
    return DS_OK;
}

static ds_status read_attrs(hid_t g, feat_case *c)
{
    c->cfg = ds_feature_defaults();
    DS_TRY(ds_h5_read_attr_str(g, "name", c->name, sizeof c->name));
    DS_TRY(read_attr_int(g, "sample_rate", &c->cfg.sample_rate));
    DS_TRY(ds_h5_read_attr_f64(g, "window_size_s", &c->cfg.window_size_s));
    DS_TRY(ds_h5_read_attr_f64(g, "window_stride_s", &c->cfg.window_stride_s));
    DS_TRY(read_attr_int(g, "n_mels", &c->cfg.n_mels));
    DS_TRY(read_attr_int(g, "n_mfcc", &c->cfg.n_mfcc));
    DS_TRY(read_attr_int(g, "n_fft", &c->n_fft));
    return read_attr_int(g, "hop", &c->hop);
}

static ds_status read_case(hid_t f, const char *grp, feat_case *c)
{
    char path[128];
    int rank;
    hsize_t dims[DS_H5_MAX_RANK];
    hid_t g = H5Gopen2(f, grp, H5P_DEFAULT);
    if (g < 0)
        return DS_FAIL(DS_ERR_IO, "%s: no such group", grp);
    ds_status st = read_attrs(g, c);
    H5Gclose(g);
    DS_TRY(st);
    snprintf(path, sizeof path, "%s/audio", grp);
    DS_TRY(ds_h5_shape(f, path, &rank, dims));
    if (rank != 1)
        return DS_FAIL(DS_ERR_IO, "%s: rank %d, want 1", path, rank);
    c->n = (long)dims[0];
    c->audio = malloc((size_t)c->n * sizeof *c->audio);
    if (!c->audio)
        return DS_FAIL(DS_ERR_MEM, "%s: %ld samples", path, c->n);
    return ds_h5_read(f, path, DS_F32, (size_t)c->n, c->audio);
}

/* Reads grp/name, which must be [frames][dim], into a new buffer *out. */
static ds_status read_ref(hid_t f, const char *grp, const char *name, long frames, int dim,
                          double **out)
{
    char path[128];
    int rank;
    hsize_t dims[DS_H5_MAX_RANK];
    snprintf(path, sizeof path, "%s/%s", grp, name);
    DS_TRY(ds_h5_shape(f, path, &rank, dims));
    if (rank != 2 || (long)dims[0] != frames || (int)dims[1] != dim)
        return DS_FAIL(DS_ERR_ARG, "%s: shape [%llu][%llu], we make [%ld][%d]", path,
                       (unsigned long long)dims[0], (unsigned long long)(rank > 1 ? dims[1] : 0),
                       frames, dim);
    size_t count = (size_t)frames * dim;
    *out = malloc(count * sizeof **out);
    if (!*out)
        return DS_FAIL(DS_ERR_MEM, "%s: %zu values", path, count);
    return ds_h5_read(f, path, DS_F64, count, *out);
}

/* Our features of c's audio in type t as doubles: feat [frames][dim]. */
static ds_status run_ours(const feat_case *c, const ds_feature_cfg *cfg, double *feat)
{
    long frames = ds_feature_frames(cfg, c->n);
    size_t count = (size_t)frames * ds_feature_dim(cfg);
    float *out = malloc(count * sizeof *out);
    ds_featurizer *fz = NULL;
    ds_status st;
    if (!out)
        return DS_FAIL(DS_ERR_MEM, "%zu features", count);
    DS_TRY_GOTO(st, ds_featurizer_create(cfg, &fz), done);
    DS_TRY_GOTO(st, ds_featurizer_run(fz, c->audio, c->n, out), done);
    for (size_t i = 0; i < count; i++)
        feat[i] = out[i];
done:
    ds_featurizer_destroy(fz);
    free(out);
    return st;
}

/* Compares feature type k of case c with the reference in grp; keeps the
 * worst error per type in worst [3]. */
static void check_type(hid_t f, const char *grp, const feat_case *c, int k, double *worst)
{
    ds_feature_cfg cfg = c->cfg;
    cfg.type = types[k];
    long frames = ds_feature_frames(&cfg, c->n);
    int dim = ds_feature_dim(&cfg);
    double *ref = NULL, *ours = malloc(((size_t)frames * dim + 1) * sizeof *ours);
    ds_status_clear_error();
    ds_status st = ours ? read_ref(f, grp, ref_names[k], frames, dim, &ref) : DS_ERR_MEM;
    if (st == DS_OK)
        st = run_ours(c, &cfg, ours);
    T_CHECK(st == DS_OK, "%s %s: %s", c->name, ref_names[k], ds_status_last_error());
    if (st == DS_OK) {
        double err = t_max_abs_diff(ours, ref, (size_t)frames * dim);
        for (size_t i = 0; i < (size_t)frames * dim; i++)   /* NaN compares false above */
            err = isfinite(ours[i]) ? err : INFINITY;
        worst[k] = fmax(worst[k], err);
        T_CHECK(err <= TOL, "%s %s: max abs error %.3g > %g", c->name, ref_names[k], err, TOL);
    }
    free(ref);
    free(ours);
}

static void check_case(hid_t f, const char *grp, double *worst)
{
    feat_case c;
    memset(&c, 0, sizeof c);
    ds_status_clear_error();
    ds_status st = read_case(f, grp, &c);
    T_CHECK(st == DS_OK, "%s: %s", grp, ds_status_last_error());
    if (st == DS_OK) {
        T_CHECK(ds_feature_n_fft(&c.cfg) == c.n_fft && ds_feature_hop(&c.cfg) == c.hop,
                "%s: n_fft %d hop %d, Python has %d and %d", c.name, ds_feature_n_fft(&c.cfg),
                ds_feature_hop(&c.cfg), c.n_fft, c.hop);
        for (int k = 0; k < 3; k++)
            check_type(f, grp, &c, k, worst);
    }
    free(c.audio);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s CASES.h5\n", argv[0]);
        return 2;
    }
    hid_t f;
    double num = 0;
    T_OK(ds_h5_open(argv[1], 0, &f));
    T_OK(ds_h5_read_attr_f64(f, "num_cases", &num));
    T_CHECK(num >= 1, "%s holds no cases", argv[1]);
    double worst[3] = {0, 0, 0};
    for (int i = 0; i < (int)num; i++) {
        char grp[32];
        snprintf(grp, sizeof grp, "case_%03d", i);
        check_case(f, grp, worst);
    }
    printf("%d cases; max abs error: log-spectrogram vs torch.stft %.3g, log-mel %.3g, "
           "mfcc %.3g (bound %g)\n", (int)num, worst[0], worst[1], worst[2], TOL);
    T_OK(ds_h5_close(f));
    return t_finish("features_torch_check");
}
