/* checkpoint.c - checkpoints in HDF5: save, list, load and prune; see
 * checkpoint.h. */
#include "checkpoint.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "file.h"
#include "h5_io.h"
#include "h5_lock.h"
#include "h5_seal.h"


/* group/<name> for every tensor of the parameter table (state 0) or the
 * BatchNorm statistics (state 1) from host [packed, table order], in the
 * role the master copy or the statistics are kept in. */
static ds_status write_table(hid_t file, ds_model *m, const char *group, int state,
                             const double *host)
{
    const int count = state ? ds_model_n_bn_stats(m) : ds_model_n_params(m);
    const ds_roles r = ds_model_roles(m);
    const ds_dtype dt = state ? r.stats : r.master;   /* FP32 in fp16/bf16 runs */
    for (int i = 0; i < count; i++) {
        const ds_tensor *t = state ? ds_model_bn_stat(m, i) : ds_model_param(m, i);
        char name[160];
        hsize_t dims[4];
        for (int k = 0; k < t->rank; k++)
            dims[k] = (hsize_t)t->dims[k];
        snprintf(name, sizeof name, "%s/%s", group, t->name);
        DS_TRY(ds_h5_write_f64_as(file, name, dt, t->rank, dims, host + t->offset));
    }
    return DS_OK;
}

static double *host_table(ds_model *m, int state)
{
    const size_t n = state ? ds_model_bn_stats_count(m) : ds_model_param_count(m);
    double *host = malloc((n + 1) * sizeof *host);
    if (!host)
        DS_FAIL(DS_ERR_MEM, "host copy of %zu elements", n);
    return host;
}

ds_status ds_checkpoint_write_tensors(hid_t file, ds_model *m, const char *group, int which)
{
    const int state = which == DS_BN_STATS;
    double *host = host_table(m, state);
    if (!host)
        return DS_ERR_MEM;
    ds_status st = ds_model_get(m, which, host);
    if (st == DS_OK)
        st = write_table(file, m, group, state, host);
    free(host);
    return st;
}

ds_status ds_checkpoint_save(const char *path, ds_model *m, ds_optim *o, const ds_ckpt_info *info)
{
    ds_ckpt_image *img;
    DS_TRY(ds_ckpt_image_create(m, o, &img));
    ds_status st = ds_ckpt_image_take(img, o, info);
    if (st == DS_OK)
        st = ds_ckpt_image_write(img, path);
    ds_ckpt_image_free(img);
    return st;
}

static ds_status read_resume_attrs(hid_t f, const char *path, ds_ckpt_info *info)
{
    long v;
    int64_t i;
    char rng[80];
    unsigned long long s[4];
    DS_TRY(ds_h5_read_attr_whole(f, "next_epoch", 0, INT_MAX, &v));
    info->next_epoch = (int)v;
    DS_TRY(ds_h5_read_attr_i64(f, "next_batch", &i));
    info->next_batch = (long)i;
    DS_TRY(ds_h5_read_attr_i64(f, "bad_run", &i));
    info->bad_run = (long)i;
    DS_TRY(ds_h5_read_attr_str(f, "rng", rng, sizeof rng));
    if (sscanf(rng, "%llx %llx %llx %llx", &s[0], &s[1], &s[2], &s[3]) != 4)
        return DS_FAIL(DS_ERR_IO, "%s: attribute rng \"%s\" is not four hex words", path, rng);
    for (int k = 0; k < 4; k++)
        info->rng[k] = s[k];
    DS_TRY(ds_h5_read_attr_str(f, "run_config", info->run_config, sizeof info->run_config));
    if (info->next_epoch < 0 || info->next_batch < 0 || info->bad_run < 0)
        return DS_FAIL(DS_ERR_IO, "%s: resume position epoch %d, batch %ld, bad run %ld is negative",
                       path, info->next_epoch, info->next_batch, info->bad_run);
    info->has_resume = 1;
    return DS_OK;
}

/* The run_id attribute into id [DS_RUN_ID_LEN + 1]: "" where there is none
 * (written before runs had an identity). */
static ds_status read_run_id(hid_t f, const char *path, char *id)
{
    char s[2 * DS_RUN_ID_LEN];
    id[0] = '\0';
    if (H5Aexists(f, "run_id") <= 0)
        return DS_OK;
    DS_TRY(ds_h5_read_attr_str(f, "run_id", s, sizeof s));
    if (strlen(s) != DS_RUN_ID_LEN || strspn(s, "0123456789abcdef") != DS_RUN_ID_LEN)
        return DS_FAIL(DS_ERR_IO, "%s: attribute run_id \"%s\" is not %d hex digits", path, s,
                       DS_RUN_ID_LEN);
    memcpy(id, s, DS_RUN_ID_LEN + 1);
    return DS_OK;
}

static ds_status read_info(hid_t f, const char *path, ds_ckpt_info *info)
{
    char s[64];
    long v;
    memset(info, 0, sizeof *info);
    info->feat = ds_feature_defaults();
    DS_TRY(ds_h5_read_attr_whole(f, "step", 0, DS_H5_WHOLE_MAX, &info->step));
    DS_TRY(ds_h5_read_attr_whole(f, "epoch", 0, INT_MAX, &v));
    info->epoch = (int)v;
    DS_TRY(ds_h5_read_attr_str(f, "feature_type", s, sizeof s));
    DS_TRY(ds_feature_type_parse(s, &info->feat.type));
    DS_TRY(ds_h5_read_attr_whole(f, "sample_rate", 1, INT_MAX, &v));
    info->feat.sample_rate = (int)v;
    DS_TRY(ds_h5_read_attr_f64(f, "window_size_s", &info->feat.window_size_s));
    DS_TRY(ds_h5_read_attr_f64(f, "window_stride_s", &info->feat.window_stride_s));
    DS_TRY(ds_h5_read_attr_whole(f, "n_mels", 0, INT_MAX, &v));
    info->feat.n_mels = (int)v;
    DS_TRY(ds_h5_read_attr_whole(f, "n_mfcc", 0, INT_MAX, &v));
    info->feat.n_mfcc = (int)v;
    DS_TRY(ds_h5_read_attr_str(f, "normalization", s, sizeof s));
    if (ds_feature_norm_parse(s, &info->norm) != DS_OK)
        return DS_FAIL(DS_ERR_IO, "%s: attribute normalization \"%s\" is unknown", path, s);
    if (ds_h5_read_attr_str(f, "dstrain_version", info->version, sizeof info->version) != DS_OK)
        snprintf(info->version, sizeof info->version, "before 0.2");
    ds_status_clear_error();
    DS_TRY(read_run_id(f, path, info->run_id));
    return ds_h5_exists(f, "optim") ? read_resume_attrs(f, path, info) : DS_OK;
}

ds_status ds_checkpoint_read_config(const char *path, ds_model_cfg *cfg, ds_dtype *dt,
                                    ds_ckpt_info *info)
{
    hid_t f;
    DS_TRY(ds_h5_open(path, 0, &f));
    char fmt[64], dts[32];
    char *json = malloc(DS_CONFIG_JSON_MAX);
    double version = 0;
    int sealed = 0;
    ds_status st = json ? DS_OK : DS_FAIL(DS_ERR_MEM, "config buffer");
    /* before any attribute is believed, format and version too; a seal is
     * checked whenever present, and from version 3 on it must be */
    if (st == DS_OK)
        st = ds_h5_check_attrs(f, path, 0, &sealed);
    if (st == DS_OK)
        st = ds_h5_read_attr_str(f, "format", fmt, sizeof fmt);
    if (st == DS_OK && strcmp(fmt, DS_CKPT_FORMAT) != 0)
        st = DS_FAIL(DS_ERR_IO, "%s: attribute format is \"%s\", not a dstrain checkpoint", path, fmt);
    if (st == DS_OK)
        st = ds_h5_read_attr_f64(f, "version", &version);
    if (st == DS_OK && version != 1 && version != 2 && version != DS_CKPT_VERSION)
        st = DS_FAIL(DS_ERR_IO, "%s: checkpoint version %g, this dstrain reads 1 to %d", path,
                     version, DS_CKPT_VERSION);
    if (st == DS_OK && version >= 3 && !sealed)
        st = DS_FAIL(DS_ERR_IO, "%s: attribute %s is missing (corrupted)", path, DS_H5_SEAL_ATTR);
    if (st == DS_OK)
        st = ds_h5_read_attr_str(f, "config", json, DS_CONFIG_JSON_MAX);
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

ds_status ds_checkpoint_check_state_values(const char *what, const double *v, size_t n, int variance)
{
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(v[i]))
            return DS_FAIL(DS_ERR_IO, "%s: element %zu is %g, not a finite value", what, i, v[i]);
        if (variance && !(v[i] > 0))
            return DS_FAIL(DS_ERR_IO, "%s: element %zu is %g, a running variance must be positive",
                           what, i, v[i]);
    }
    return DS_OK;
}

static ds_status check_values(const char *path, const char *name, const double *v, size_t n,
                              int variance)
{
    char what[1300];
    snprintf(what, sizeof what, "%s: dataset %s", path, name);
    return ds_checkpoint_check_state_values(what, v, n, variance);
}

/* host [packed] from group/<name> for every tensor of the table, each
 * value checked. */
static ds_status read_table(hid_t f, const char *path, ds_model *m, const char *group, int state,
                            double *host)
{
    const int count = state ? ds_model_n_bn_stats(m) : ds_model_n_params(m);
    for (int i = 0; i < count; i++) {
        const ds_tensor *t = state ? ds_model_bn_stat(m, i) : ds_model_param(m, i);
        char name[160];
        snprintf(name, sizeof name, "%s/%s", group, t->name);
        DS_TRY(ds_h5_read(f, name, DS_F64, t->count, host + t->offset));
        DS_TRY(check_values(path, name, host + t->offset, t->count,
                            state && strstr(t->name, "running_var") != NULL));
    }
    return DS_OK;
}

static ds_status read_tensors(hid_t f, const char *path, ds_model *m, const char *group,
                              int which)
{
    const int state = which == DS_BN_STATS;
    double *host = host_table(m, state);
    if (!host)
        return DS_ERR_MEM;
    ds_status st = read_table(f, path, m, group, state, host);
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

/* The optimizer's state in f, every value checked: with o, the slots o
 * keeps and the scalars, put into o; without, whatever slots are there
 * (`dstrain info`). *slots: how many were read; -1: f has no /optim, an
 * error only when o needs it. */
static ds_status read_optim(hid_t f, const char *path, ds_model *m, ds_optim *o, int *slots)
{
    *slots = -1;
    if (!ds_h5_exists(f, "optim/scalars"))
        return o ? DS_FAIL(DS_ERR_IO, "%s: no optimizer state (/optim): a checkpoint of an older "
                           "dstrain or of a model only; it cannot resume a run exactly", path)
                 : DS_OK;
    double *host = host_table(m, 0);
    if (!host)
        return DS_ERR_MEM;
    ds_status st = DS_OK;
    int i = 0;
    for (; st == DS_OK && i < (o ? ds_optim_slots(o) : 2); i++) {
        char group[32];
        snprintf(group, sizeof group, "optim/slot%d", i);
        if (!ds_h5_exists(f, group)) {
            if (o)
                st = DS_FAIL(DS_ERR_IO, "%s: no dataset group /%s: the run that wrote it kept %s "
                             "optimizer state than this one's %s needs", path, group,
                             i ? "less" : "no", ds_optim_kind_name(ds_optim_kind(o)));
            break;
        }
        st = read_table(f, path, m, group, 0, host);
        if (st == DS_OK && o)
            st = ds_model_put_optim_slot(m, o, i, host);
    }
    double scal[DS_OPT_SCALARS];
    if (st == DS_OK)
        st = ds_h5_read(f, "optim/scalars", DS_F64, DS_OPT_SCALARS, scal);
    if (st == DS_OK)
        st = check_values(path, "optim/scalars", scal, DS_OPT_SCALARS, 0);
    if (st == DS_OK && o)
        st = ds_optim_set_scalars(o, scal);
    if (st == DS_OK)
        *slots = i;
    free(host);
    return st;
}

ds_status ds_checkpoint_check_optim(const char *path, ds_model *m, int *slots)
{
    hid_t f;
    DS_TRY(ds_h5_open(path, 0, &f));
    ds_status st = read_optim(f, path, m, NULL, slots);
    ds_h5_close(f);
    return st;
}

ds_status ds_checkpoint_load_resume(const char *path, ds_model *m, ds_optim *o)
{
    hid_t f;
    DS_TRY(ds_h5_open(path, 0, &f));
    ds_status st = read_tensors(f, path, m, "params", DS_PARAMS);
    if (st == DS_OK)
        st = read_tensors(f, path, m, "state", DS_BN_STATS);
    int slots;
    if (st == DS_OK)
        st = read_optim(f, path, m, o, &slots);
    ds_h5_close(f);
    return st;
}

/* For qsort: steps, newest first. */
static int newer_first(const void *a, const void *b)
{
    const long x = *(const long *)a, y = *(const long *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

/* Whether name is step-NNNNNNNN followed by suffix exactly, and its step. */
static int step_name(const char *name, const char *suffix, long *step)
{
    if (strncmp(name, "step-", 5) != 0 || strlen(name) != 13 + strlen(suffix) ||
        strcmp(name + 13, suffix) != 0)
        return 0;
    long v = 0;
    for (int k = 5; k < 13; k++) {
        if (name[k] < '0' || name[k] > '9')
            return 0;
        v = 10 * v + (name[k] - '0');
    }
    *step = v;
    return 1;
}

ds_status ds_checkpoint_list(const char *dir, long **steps, size_t *count)
{
    *steps = NULL;
    *count = 0;
    DIR *d = opendir(dir);
    if (!d)
        return DS_FAIL(DS_ERR_IO, "%s: cannot list the checkpoint directory: %s", dir, strerror(errno));
    long *found = NULL;
    size_t n = 0, cap = 0;
    ds_status st = DS_OK;
    for (struct dirent *e; st == DS_OK && (e = readdir(d));) {
        long step;
        if (!step_name(e->d_name, ".h5", &step))   /* only names this program writes */
            continue;
        if (n == cap) {
            long *grown = realloc(found, (cap = cap ? 2 * cap : 16) * sizeof *found);
            if (!grown)
                st = DS_FAIL(DS_ERR_MEM, "checkpoint list");
            else
                found = grown;
        }
        if (st == DS_OK)
            found[n++] = step;
    }
    closedir(d);
    if (st != DS_OK) {
        free(found);
        return st;
    }
    if (n)
        qsort(found, n, sizeof *found, newer_first);
    *steps = found;
    *count = n;
    return DS_OK;
}

ds_status ds_checkpoint_new_run_id(char *id)
{
    unsigned char r[DS_RUN_ID_LEN / 2];
    if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r)
        return DS_FAIL(DS_ERR_IO, "no random bytes for the run's identity: %s", strerror(errno));
    for (size_t k = 0; k < sizeof r; k++)
        snprintf(id + 2 * k, 3, "%02x", r[k]);
    return DS_OK;
}

ds_status ds_checkpoint_read_run_id(const char *path, char *id)
{
    hid_t f;
    id[0] = '\0';
    ds_h5_lock();   /* the checkpoint writer's thread asks too */
    ds_status st = ds_h5_open(path, 0, &f);
    if (st == DS_OK) {
        st = read_run_id(f, path, id);
        H5Fclose(f);
    }
    ds_h5_unlock();
    return st;
}

ds_status ds_checkpoint_prune(const char *dir, int keep, const long *ours, size_t n,
                              const char *run_id, int *removed)
{
    *removed = 0;
    ds_status st = DS_OK;
    for (size_t i = keep < 1 ? 1 : (size_t)keep; st == DS_OK && i < n; i++) {
        char path[DS_PATH_MAX + 32], id[DS_RUN_ID_LEN + 1];
        snprintf(path, sizeof path, "%s/step-%08ld.h5", dir, ours[i]);
        /* one swapped in since, or gone, is not this run's to remove */
        if (ds_checkpoint_read_run_id(path, id) != DS_OK || strcmp(id, run_id) != 0) {
            ds_status_clear_error();
            continue;
        }
        if (unlink(path) != 0)
            st = DS_FAIL(DS_ERR_IO, "%s: cannot remove an old checkpoint: %s", path, strerror(errno));
        else
            (*removed)++;
    }
    return st;
}

/* A checkpoint's temporary file: "step-NNNNNNNN.h5" and ds_file_tmp_name's part. */
static int partial_name(const char *name, long *step)
{
    char base[17];
    if (strlen(name) != sizeof base - 1 + DS_TMP_SUFFIX_LEN)
        return 0;
    memcpy(base, name, sizeof base - 1);
    base[sizeof base - 1] = '\0';
    return step_name(base, ".h5", step) && ds_file_tmp_is_of(name, base);
}

ds_status ds_checkpoint_remove_partial(const char *dir, int *removed)
{
    *removed = 0;
    DIR *d = opendir(dir);
    if (!d)
        return DS_FAIL(DS_ERR_IO, "%s: cannot list the checkpoint directory: %s", dir, strerror(errno));
    ds_status st = DS_OK;
    for (struct dirent *e; st == DS_OK && (e = readdir(d));) {
        long step;
        char path[4200];
        if (!partial_name(e->d_name, &step))
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (unlink(path) != 0)
            st = DS_FAIL(DS_ERR_IO, "%s: cannot remove a partial checkpoint: %s", path,
                         strerror(errno));
        else
            (*removed)++;
    }
    closedir(d);
    return st;
}
