/* ckpt_image.c - a checkpoint's content copied out of the backend at
 * a step boundary, in the dtypes it is kept in, and the HDF5 file written
 * from that copy (see checkpoint.h). The copy is the only part on the
 * training's critical path; the write reads the model's tables and
 * configuration only, never its buffers, so it may run in another thread
 * while training goes on. */
#include "checkpoint.h"

#include <stdlib.h>
#include <string.h>

#include "build_info.h"
#include "convert.h"
#include "h5_io.h"
#include "h5_lock.h"
#include "h5_seal.h"

#define MAX_SLOTS 4      /* optimizer slots per group (adamw: 2) */

typedef struct {
    void *host;    /* [span] of dt inside the image's block; NULL: no tensors */
    ds_dtype dt;
    size_t span;   /* 0: the group holds no tensors */
    size_t at;     /* bytes into the block */
} image_part;

struct ds_ckpt_image {
    ds_model *m;                    /* tables and configuration only, after take */
    int slots;                      /* optimizer slots per group; -1: the model only */
    void *block;                    /* one host_alloc block holds every part */
    image_part params[2], stats, slot[MAX_SLOTS][2];
    double scalars[DS_OPT_SCALARS];
    ds_ckpt_info info;
    int taken;
    ds_h5_membuf file;              /* the HDF5 file's image, kept from save to save */
};

static size_t align64(size_t bytes) { return (bytes + 63) & ~(size_t)63; }

/* Part p [span] of dt at offset *at of the block, when it holds tensors. */
static void reserve(image_part *p, ds_dtype dt, size_t span, size_t *at)
{
    p->dt = dt;
    p->span = span;
    p->at = *at;
    *at += align64(span * ds_dtype_size(dt));
}

/* Every part's dtype and span, and where it lies in a block of *bytes. */
static ds_status lay_out(ds_ckpt_image *img, ds_optim *o, size_t *bytes)
{
    void *dev;
    ds_dtype dt;
    size_t span, at = 0;
    for (int k = 0; k < 2; k++) {
        DS_TRY(ds_model_flat_group(img->m, DS_PARAMS, k, &dev, &dt, &span));
        if (!dev)
            continue;
        reserve(&img->params[k], dt, span, &at);
        for (int s = 0; s < img->slots; s++) {
            if (!ds_optim_group_slot(o, k, s))
                return DS_FAIL(DS_ERR_ARG, "optimizer has no slot %d for parameter group %d", s, k);
            reserve(&img->slot[s][k], dt, span, &at);
        }
    }
    DS_TRY(ds_model_flat_group(img->m, DS_BN_STATS, 0, &dev, &dt, &span));
    if (dev)
        reserve(&img->stats, dt, span, &at);
    *bytes = at;
    return DS_OK;
}

static void place(image_part *p, char *block)
{
    p->host = p->span ? block + p->at : NULL;
}

ds_status ds_ckpt_image_create(ds_model *m, ds_optim *o, ds_ckpt_image **out)
{
    *out = NULL;
    ds_ckpt_image *img = calloc(1, sizeof *img);
    if (!img)
        return DS_FAIL(DS_ERR_MEM, "checkpoint image");
    img->m = m;
    img->slots = o ? ds_optim_slots(o) : -1;
    if (img->slots > MAX_SLOTS) {
        free(img);
        return DS_FAIL(DS_ERR_ARG, "optimizer with %d slots, a checkpoint holds %d", ds_optim_slots(o),
                       MAX_SLOTS);
    }
    size_t bytes = 0;
    ds_status st = lay_out(img, o, &bytes);
    const ds_backend *be = ds_model_backend(m);
    if (st == DS_OK)   /* pinned where the backend has such memory: the fastest copy out */
        st = be->host_alloc(ds_model_ctx(m), bytes + 64, &img->block);
    if (st != DS_OK) {
        free(img);
        return st;
    }
    /* touched now: the first save would otherwise pay the page faults of
     * the whole block inside its copy (2.5 s of a 1 GB ds2 image on a CPU) */
    memset(img->block, 0, bytes);
    for (int k = 0; k < 2; k++) {
        place(&img->params[k], img->block);
        for (int s = 0; s < img->slots; s++)
            place(&img->slot[s][k], img->block);
    }
    place(&img->stats, img->block);
    *out = img;
    return DS_OK;
}

void ds_ckpt_image_free(ds_ckpt_image *img)
{
    if (!img)
        return;
    if (img->block)
        ds_model_backend(img->m)->host_release(ds_model_ctx(img->m), img->block);
    ds_h5_membuf_free(&img->file);
    free(img);
}

static ds_status copy_out(ds_model *m, const void *dev, const image_part *p)
{
    return dev ? ds_model_backend(m)->to_host(ds_model_ctx(m), p->dt, p->span, dev, p->host) : DS_OK;
}

ds_status ds_ckpt_image_take(ds_ckpt_image *img, ds_optim *o, const ds_ckpt_info *info)
{
    ds_model *m = img->m;
    void *dev;
    ds_dtype dt;
    size_t span;
    img->taken = 0;
    for (int k = 0; k < 2; k++) {
        DS_TRY(ds_model_flat_group(m, DS_PARAMS, k, &dev, &dt, &span));
        DS_TRY(copy_out(m, dev, &img->params[k]));
        for (int s = 0; dev && s < img->slots; s++)
            DS_TRY(copy_out(m, ds_optim_group_slot(o, k, s), &img->slot[s][k]));
    }
    DS_TRY(ds_model_flat_group(m, DS_BN_STATS, 0, &dev, &dt, &span));
    DS_TRY(copy_out(m, dev, &img->stats));
    if (img->slots >= 0)
        DS_TRY(ds_optim_get_scalars(o, img->scalars));
    img->info = *info;
    img->taken = 1;
    return DS_OK;
}

const ds_ckpt_info *ds_ckpt_image_info(const ds_ckpt_image *img) { return &img->info; }

/* ---- writing, from the copy only ---- */

/* One tensor t of the part it belongs to, stored as file_dt under name. */
static ds_status write_tensor(hid_t file, const char *name, const ds_tensor *t, const image_part *p,
                              ds_dtype file_dt)
{
    hsize_t dims[4];
    for (int k = 0; k < t->rank; k++)
        dims[k] = (hsize_t)t->dims[k];
    const void *src = ds_elem(p->host, p->dt, t->place);
    void *tmp = NULL;
    if (p->dt != file_dt) {   /* e.g. a group kept in another dtype than its role's */
        tmp = malloc(t->count * ds_dtype_size(file_dt) + 1);
        if (!tmp)
            return DS_FAIL(DS_ERR_MEM, "%s: staging %zu elements", name, t->count);
        ds_status st = ds_convert(file_dt, tmp, p->dt, src, t->count);
        if (st != DS_OK) {
            free(tmp);
            return st;
        }
        src = tmp;
    }
    ds_h5_lock();
    ds_status st = ds_h5_write(file, name, file_dt, t->rank, dims, src);
    ds_h5_unlock();
    free(tmp);
    return st;
}

/* group/<name> for every tensor of the parameter table (parts [2], by
 * group) or of the statistics (parts [1]), stored in the role's dtype. */
static ds_status write_table(hid_t file, const ds_ckpt_image *img, const char *group, int state,
                             const image_part *parts)
{
    ds_model *m = img->m;
    const int count = state ? ds_model_n_bn_stats(m) : ds_model_n_params(m);
    const ds_roles r = ds_model_roles(m);
    for (int i = 0; i < count; i++) {
        const ds_tensor *t = state ? ds_model_bn_stat(m, i) : ds_model_param(m, i);
        if (t->group < 0 || t->group > (state ? 0 : 1) || !parts[t->group].host)
            return DS_FAIL(DS_ERR_ARG, "tensor %s: group %d holds no copy", t->name, t->group);
        char name[160];
        snprintf(name, sizeof name, "%s/%s", group, t->name);
        DS_TRY(write_tensor(file, name, t, &parts[t->group], state ? r.stats : r.master));
    }
    return DS_OK;
}

static ds_status write_optim(hid_t file, const ds_ckpt_image *img)
{
    for (int s = 0; s < img->slots; s++) {
        char group[32];
        snprintf(group, sizeof group, "optim/slot%d", s);
        DS_TRY(write_table(file, img, group, 0, img->slot[s]));
    }
    hsize_t dims[1] = {DS_OPT_SCALARS};
    ds_h5_lock();
    ds_status st = ds_h5_write(file, "optim/scalars", DS_F64, 1, dims, img->scalars);
    ds_h5_unlock();
    return st;
}

/* The generator as text: HDF5 attributes here are doubles or strings, and a
 * double cannot hold 64 bits. */
static void rng_text(const uint64_t *s, char *out, size_t cap)
{
    snprintf(out, cap, "%016llx %016llx %016llx %016llx", (unsigned long long)s[0],
             (unsigned long long)s[1], (unsigned long long)s[2], (unsigned long long)s[3]);
}

static ds_status write_resume_attrs(hid_t f, const ds_ckpt_info *info)
{
    char rng[80];
    rng_text(info->rng, rng, sizeof rng);
    DS_TRY(ds_h5_write_attr_f64(f, "next_epoch", info->next_epoch));
    DS_TRY(ds_h5_write_attr_i64(f, "next_batch", info->next_batch));
    DS_TRY(ds_h5_write_attr_i64(f, "bad_run", info->bad_run));
    DS_TRY(ds_h5_write_attr_str(f, "rng", rng));
    return ds_h5_write_attr_str(f, "run_config", info->run_config);
}

static ds_status write_attrs(hid_t f, ds_model *m, const ds_ckpt_info *info)
{
    char json[DS_CONFIG_JSON_MAX];
    DS_TRY(ds_config_to_json(ds_model_config(m), json, sizeof json));
    DS_TRY(ds_h5_write_attr_str(f, "format", DS_CKPT_FORMAT));
    DS_TRY(ds_h5_write_attr_f64(f, "version", DS_CKPT_VERSION));
    DS_TRY(ds_h5_write_attr_str(f, "dstrain_version", DSTRAIN_VERSION " (" DSTRAIN_GIT_REV ")"));
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
    if (info->run_id[0])   /* the run's identity: pruning and resumes tell runs apart by it */
        DS_TRY(ds_h5_write_attr_str(f, "run_id", info->run_id));
    return ds_h5_write_attr_str(f, "normalization", ds_feature_norm_name(info->norm));
}

static ds_status locked_attrs(hid_t f, const ds_ckpt_image *img, int resume)
{
    ds_h5_lock();
    ds_status st = resume ? write_resume_attrs(f, &img->info) : write_attrs(f, img->m, &img->info);
    ds_h5_unlock();
    return st;
}

ds_status ds_ckpt_image_write(ds_ckpt_image *img, const char *path)
{
    if (!img->taken)
        return DS_FAIL(DS_ERR_ARG, "%s: checkpoint image written before it was taken", path);
    hid_t f;
    /* built in memory, then written by ds_h5_save_mem to a new temporary
     * file beside path and committed: a full disk is an error naming the
     * file, and path keeps the previous checkpoint */
    char label[1100];   /* names the file in memory only: nothing is opened there */
    snprintf(label, sizeof label, "%s.in-memory", path);
    ds_h5_lock();
    ds_status st = ds_h5_create_mem(label, &img->file, &f);
    ds_h5_unlock();
    DS_TRY(st);
    st = locked_attrs(f, img, 0);
    if (st == DS_OK)
        st = write_table(f, img, "params", 0, img->params);
    if (st == DS_OK)
        st = write_table(f, img, "state", 1, &img->stats);
    if (st == DS_OK && img->slots >= 0)
        st = write_optim(f, img);
    if (st == DS_OK && img->slots >= 0)
        st = locked_attrs(f, img, 1);
    ds_h5_lock();
    if (st == DS_OK)
        st = ds_h5_seal_attrs(f);
    if (st == DS_OK)
        st = ds_h5_save_mem(f, &img->file, path);   /* closes f */
    else
        ds_h5_close(f);
    ds_h5_unlock();
    return st;
}
