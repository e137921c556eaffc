/* test_checkpoint.c - a checkpoint restores parameters, BatchNorm state,
 * configuration and training position exactly; files that are not
 * checkpoints, or of another model, are refused with a clear message.
 *
 * usage: test_checkpoint [BACKEND]   (default $DSTRAIN_TEST_BACKEND, else cpu) */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"
#include "checkpoint.h"
#include "file.h"
#include "h5_io.h"
#include "testmodel.h"
#include "testutil.h"

static const ds_backend *be;

static ds_model *make_model(const char *preset, ds_dtype dt, ds_ctx *ctx)
{
    ds_model_cfg cfg;
    ds_model *m = NULL;
    const ds_model_limits lim = {2, 100, 10};
    if (ds_config_preset(preset, &cfg) != DS_OK ||
        ds_model_create(&cfg, be, ctx, dt, &lim, &m) != DS_OK)
        return NULL;
    return m;
}

/* Buffer which of a and b are bit-identical. */
static int same(ds_model *a, ds_model *b, int which)
{
    size_t n = which == DS_BN_STATS ? ds_model_bn_stats_count(a) : ds_model_param_count(a);
    double *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
    int eq = x && y && ds_model_get(a, which, x) == DS_OK && ds_model_get(b, which, y) == DS_OK &&
             memcmp(x, y, n * sizeof *x) == 0;
    free(x);
    free(y);
    return eq;
}

int main(int argc, char **argv)
{
    be = t_backend(argc > 1 ? argv[1] : NULL);
    ds_ctx *ctx;
    char dir[] = "/tmp/ds_ckpt_XXXXXX", path[128], other[128];
    T_OK(be->ctx_create(0, NULL, &ctx));
    T_CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    snprintf(path, sizeof path, "%s/c.h5", dir);
    snprintf(other, sizeof other, "%s/other.h5", dir);

    for (ds_dtype dt = DS_F32; dt <= DS_F64; dt++) {
        ds_model *a = make_model("tiny", dt, ctx), *b = make_model("tiny", dt, ctx);
        T_CHECK(a && b, "models");
        ds_rng rng;
        ds_rng_seed(&rng, 3);
        T_OK(ds_model_init_params(a, 1));
        T_OK(t_perturb_bn(a, &rng));   /* state that differs from b's initial one */
        T_OK(ds_model_init_params(b, 2));
        ds_ckpt_info info = {.step = 1234, .epoch = 5, .feat = ds_feature_defaults(),
                             .norm = DS_NORM_NONE};
        info.feat.type = DS_FEAT_LOGMEL;
        T_OK(ds_checkpoint_save(path, a, NULL, &info));
        int temps = 0;   /* c.h5.XXXXXX.tmp (file.h) */
        DIR *d = opendir(dir);
        for (struct dirent *e; d && (e = readdir(d));)
            temps += ds_file_tmp_is_of(e->d_name, "c.h5");
        if (d)
            closedir(d);
        T_CHECK(access(path, R_OK) == 0 && temps == 0, "file in place, no temp left (%d)", temps);
        T_CHECK(!same(a, b, DS_PARAMS) && !same(a, b, DS_BN_STATS), "models differ before loading");
        T_OK(ds_checkpoint_load(path, b));
        T_CHECK(same(a, b, DS_PARAMS), "%s parameters restored exactly", ds_dtype_name(dt));
        T_CHECK(same(a, b, DS_BN_STATS), "%s BatchNorm state restored exactly", ds_dtype_name(dt));
        size_t gaps = 0;
        T_OK(t_flat_gap_nonzero(be, b, DS_PARAMS, &gaps));
        T_CHECK(gaps == 0, "%s: loading left %zu padding elements of the flat buffer non-zero",
                ds_dtype_name(dt), gaps);

        ds_model_cfg cfg;
        ds_dtype got;
        ds_ckpt_info back;
        T_OK(ds_checkpoint_read_config(path, &cfg, &got, &back));
        T_CHECK(got == dt && back.step == 1234 && back.epoch == 5 && back.norm == DS_NORM_NONE &&
                    back.feat.type == DS_FEAT_LOGMEL && cfg.hidden == ds_model_config(a)->hidden &&
                    cfg.n_conv == ds_model_config(a)->n_conv,
                "config and info round trip");
        ds_model_destroy(a);
        ds_model_destroy(b);
    }

    /* a checkpoint of another architecture does not load */
    ds_model *small = make_model("small", DS_F32, ctx);
    ds_status_clear_error();
    T_CHECK(small && ds_checkpoint_load(path, small) != DS_OK && strstr(ds_status_last_error(), "conv.0.weight"),
            "loading into another model names the tensor: %s", ds_status_last_error());
    ds_model_destroy(small);

    /* a file that is not a checkpoint */
    hid_t f;
    T_OK(ds_h5_create(other, &f));
    T_OK(ds_h5_write_attr_str(f, "format", "dstrain-features"));
    T_OK(ds_h5_close(f));
    ds_model_cfg cfg;
    ds_dtype dt;
    ds_ckpt_info info;
    ds_status_clear_error();
    T_CHECK(ds_checkpoint_read_config(other, &cfg, &dt, &info) != DS_OK &&
                strstr(ds_status_last_error(), "other.h5") && strstr(ds_status_last_error(), "not a dstrain checkpoint"),
            "not a checkpoint: %s", ds_status_last_error());
    ds_status_clear_error();
    T_CHECK(ds_checkpoint_read_config("/nonexistent/x.h5", &cfg, &dt, &info) != DS_OK &&
                strstr(ds_status_last_error(), "/nonexistent/x.h5"),
            "missing file named: %s", ds_status_last_error());

    unlink(path);
    unlink(other);
    rmdir(dir);
    be->ctx_destroy(ctx);
    return t_finish(__FILE__);
}
