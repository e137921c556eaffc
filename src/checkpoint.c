/* checkpoint.c - see checkpoint.h. */
#include "checkpoint.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fileutil.h"
#include "h5io.h"

#define CKPT_FORMAT "dstrain-checkpoint"
#define CKPT_VERSION 1

ds_status ds_checkpoint_write_tensors(hid_t file, ds_model *m, const char *group, int which)
{
    const int state = which == DS_BN_STATS;
    const size_t n = state ? ds_model_bn_stats_count(m) : ds_model_param_count(m);
    double *host = malloc((n + 1) * sizeof *host);
    if (!host)
        return DS_FAIL(DS_ERR_MEM, "host copy of %zu elements", n);
    ds_status st = ds_model_get(m, which, host);
    const int count = state ? ds_model_n_bn_stats(m) : ds_model_n_params(m);
    /* parameters as the master copy holds them (FP32 in fp16/bf16 runs) */
    const ds_roles r = ds_model_roles(m);
    const ds_dtype dt = state ? r.stats : r.master;
    for (int i = 0; st == DS_OK && i < count; i++) {
        const ds_tensor *t = state ? ds_model_bn_stat(m, i) : ds_model_param(m, i);
        char name[128];
        hsize_t dims[4];
        for (int k = 0; k < t->rank; k++)
            dims[k] = (hsize_t)t->dims[k];
        snprintf(name, sizeof name, "%s/%s", group, t->name);
        st = ds_h5_write_f64_as(file, name, dt, t->rank, dims, host + t->offset);
    }
    free(host);
    return st;
}

static ds_status write_attrs(hid_t f, ds_model *m, const ds_ckpt_info *info)
{
    char json[8192];
    DS_TRY(ds_config_to_json(ds_model_config(m), json, sizeof json));
    DS_TRY(ds_h5_write_attr_str(f, "format", CKPT_FORMAT));
    DS_TRY(ds_h5_write_attr_f64(f, "version", CKPT_VERSION));
    DS_TRY(ds_h5_write_attr_str(f, "config", json));
    DS_TRY(ds_h5_write_attr_str(f, "dtype", ds_dtype_name(ds_model_dtype(m))));
    DS_TRY(ds_h5_write_attr_f64(f, "step", (double)info->step));
    DS_TRY(ds_h5_write_attr_f64(f, "epoch", info->epoch));
    DS_TRY(ds_h5_write_attr_str(f, "feature_type", ds_feature_type_name(info->feat.type)));
    DS_TRY(ds_h5_write_attr_f64(f, "sample_rate", info->feat.sample_rate));
    DS_TRY(ds_h5_write_attr_f64(f, "window_size_s", info->feat.window_size_s));
    DS_TRY(ds_h5_write_attr_f64(f, "window_stride_s", info->feat.window_stride_s));
    DS_TRY(ds_h5_write_attr_f64(f, "n_mels", info->feat.n_mels));
    DS_TRY(ds_h5_write_attr_f64(f, "n_mfcc", info->feat.n_mfcc));
    return ds_h5_write_attr_str(f, "normalization", ds_norm_name(info->norm));
}

ds_status ds_checkpoint_save(const char *path, ds_model *m, const ds_ckpt_info *info)
{
    char tmp[1100];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    hid_t f;
    /* built in memory, then written by ds_h5_save_mem: a full disk is an
     * error naming the file, and path keeps the previous checkpoint */
    DS_TRY(ds_h5_create_mem(tmp, &f));
    ds_status st = write_attrs(f, m, info);
    if (st == DS_OK)
        st = ds_checkpoint_write_tensors(f, m, "params", DS_PARAMS);
    if (st == DS_OK)
        st = ds_checkpoint_write_tensors(f, m, "state", DS_BN_STATS);
    if (st != DS_OK) {
        ds_h5_close(f);
        return st;
    }
    st = ds_h5_save_mem(f, tmp);
    if (st != DS_OK) {
        unlink(tmp);
        return st;
    }
    return ds_file_commit(tmp, path);
}

static ds_status read_info(hid_t f, const char *path, ds_ckpt_info *info)
{
    char s[64];
    double v;
    memset(info, 0, sizeof *info);
    info->feat = ds_feature_defaults();
    DS_TRY(ds_h5_read_attr_f64(f, "step", &v));
    info->step = (long)v;
    DS_TRY(ds_h5_read_attr_f64(f, "epoch", &v));
    info->epoch = (int)v;
    DS_TRY(ds_h5_read_attr_str(f, "feature_type", s, sizeof s));
    DS_TRY(ds_feature_type_parse(s, &info->feat.type));
    DS_TRY(ds_h5_read_attr_f64(f, "sample_rate", &v));
    info->feat.sample_rate = (int)v;
    DS_TRY(ds_h5_read_attr_f64(f, "window_size_s", &info->feat.window_size_s));
    DS_TRY(ds_h5_read_attr_f64(f, "window_stride_s", &info->feat.window_stride_s));
    DS_TRY(ds_h5_read_attr_f64(f, "n_mels", &v));
    info->feat.n_mels = (int)v;
    DS_TRY(ds_h5_read_attr_f64(f, "n_mfcc", &v));
    info->feat.n_mfcc = (int)v;
    DS_TRY(ds_h5_read_attr_str(f, "normalization", s, sizeof s));
    if (ds_norm_parse(s, &info->norm) != DS_OK)
        return DS_FAIL(DS_ERR_IO, "%s: attribute normalization \"%s\" is unknown", path, s);
    return DS_OK;
}

ds_status ds_checkpoint_read_config(const char *path, ds_model_cfg *cfg, ds_dtype *dt,
                                    ds_ckpt_info *info)
{
    hid_t f;
    DS_TRY(ds_h5_open(path, 0, &f));
    char fmt[64], dts[32];
    char *json = malloc(65536);
    double version = 0;
    ds_status st = json ? DS_OK : DS_FAIL(DS_ERR_MEM, "config buffer");
    if (st == DS_OK)
        st = ds_h5_read_attr_str(f, "format", fmt, sizeof fmt);
    if (st == DS_OK && strcmp(fmt, CKPT_FORMAT) != 0)
        st = DS_FAIL(DS_ERR_IO, "%s: attribute format is \"%s\", not a dstrain checkpoint", path, fmt);
    if (st == DS_OK)
        st = ds_h5_read_attr_f64(f, "version", &version);
    if (st == DS_OK && version != CKPT_VERSION)
        st = DS_FAIL(DS_ERR_IO, "%s: checkpoint version %g, this dstrain reads %d", path, version,
                     CKPT_VERSION);
    if (st == DS_OK)
        st = ds_h5_read_attr_str(f, "config", json, 65536);
    if (st == DS_OK)
        st = ds_config_parse(json, path, cfg);
    if (st == DS_OK)
        st = ds_h5_read_attr_str(f, "dtype", dts, sizeof dts);
    if (st == DS_OK)
        st = ds_dtype_parse(dts, dt) ? DS_OK
                                     : DS_FAIL(DS_ERR_IO, "%s: attribute dtype is \"%s\"", path, dts);
    if (st == DS_OK)
        st = read_info(f, path, info);
    free(json);
    ds_h5_close(f);
    return st;
}

/* A loaded tensor must be usable: every value finite, and a running
 * variance positive (BatchNorm divides by its square root). */
static ds_status check_values(const char *path, const char *name, const double *v, size_t n,
                              int variance)
{
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(v[i]))
            return DS_FAIL(DS_ERR_IO, "%s: dataset %s: element %zu is %g (corrupted checkpoint)",
                           path, name, i, v[i]);
        if (variance && !(v[i] > 0))
            return DS_FAIL(DS_ERR_IO,
                           "%s: dataset %s: element %zu is %g, a variance must be positive "
                           "(corrupted checkpoint)", path, name, i, v[i]);
    }
    return DS_OK;
}

static ds_status read_tensors(hid_t f, const char *path, ds_model *m, const char *group,
                              int which)
{
    const int state = which == DS_BN_STATS;
    const size_t n = state ? ds_model_bn_stats_count(m) : ds_model_param_count(m);
    double *host = malloc((n + 1) * sizeof *host);
    if (!host)
        return DS_FAIL(DS_ERR_MEM, "host copy of %zu elements", n);
    ds_status st = DS_OK;
    const int count = state ? ds_model_n_bn_stats(m) : ds_model_n_params(m);
    for (int i = 0; st == DS_OK && i < count; i++) {
        const ds_tensor *t = state ? ds_model_bn_stat(m, i) : ds_model_param(m, i);
        char name[128];
        snprintf(name, sizeof name, "%s/%s", group, t->name);
        st = ds_h5_read(f, name, DS_F64, t->count, host + t->offset);
        if (st == DS_OK)
            st = check_values(path, name, host + t->offset, t->count,
                              state && strstr(t->name, "running_var") != NULL);
    }
    if (st == DS_OK)
        st = ds_model_put(m, which, host);
    free(host);
    return st;
}

ds_status ds_checkpoint_load(const char *path, ds_model *m)
{
    hid_t f;
    DS_TRY(ds_h5_open(path, 0, &f));
    ds_status st = read_tensors(f, path, m, "params", DS_PARAMS);
    if (st == DS_OK)
        st = read_tensors(f, path, m, "state", DS_BN_STATS);
    ds_h5_close(f);
    return st;
}

/* For qsort: steps, newest first. */
static int newer_first(const void *a, const void *b)
{
    const long x = *(const long *)a, y = *(const long *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

ds_status ds_checkpoint_prune(const char *dir, int keep, int *removed)
{
    *removed = 0;
    DIR *d = opendir(dir);
    if (!d)
        return DS_FAIL(DS_ERR_IO, "%s: cannot list the checkpoint directory: %s", dir, strerror(errno));
    long *steps = NULL;
    size_t n = 0, cap = 0;
    ds_status st = DS_OK;
    for (struct dirent *e; st == DS_OK && (e = readdir(d));) {
        long step;
        char tail[8];
        /* only names this program writes: step-NNNNNNNN.h5 */
        if (strlen(e->d_name) != 16 || sscanf(e->d_name, "step-%8ld.%3s", &step, tail) != 2 ||
            strcmp(tail, "h5") != 0)
            continue;
        if (n == cap) {
            long *grown = realloc(steps, (cap = cap ? 2 * cap : 16) * sizeof *steps);
            if (!grown)
                st = DS_FAIL(DS_ERR_MEM, "checkpoint list");
            else
                steps = grown;
        }
        if (st == DS_OK)
            steps[n++] = step;
    }
    closedir(d);
    if (st == DS_OK && n > (size_t)keep) {
        qsort(steps, n, sizeof *steps, newer_first);
        for (size_t i = (size_t)keep; st == DS_OK && i < n; i++) {
            char path[4200];
            snprintf(path, sizeof path, "%s/step-%08ld.h5", dir, steps[i]);
            if (unlink(path) != 0)
                st = DS_FAIL(DS_ERR_IO, "%s: cannot remove an old checkpoint: %s", path, strerror(errno));
            else
                (*removed)++;
        }
    }
    free(steps);
    return st;
}
