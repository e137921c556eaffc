/* pt_logits_dump.c - a checkpoint's model in eval mode on a synthetic batch,
 * for the PyTorch export check (tests/peer/pytorch_export_check.py): writes
 * the batch and dstrain's logits to an HDF5 file.
 *
 * pt_logits_dump --checkpoint C.h5 --batch N --frames T --seed S --out F.h5
 *
 *   batch/features  [N][T][F]   as the model saw them (its dtype's values)
 *   batch/lengths   [N]         frames of each utterance
 *   out/logits      [T'][N][C]  float64 copies of the model's logits
 *   out/out_lengths [N]
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "convert.h"
#include "h5_io.h"
#include "model.h"
#include "rng.h"
#include "synthetic.h"

typedef struct {
    const char *ckpt, *out;
    int batch, frames;
    unsigned long long seed;
} opts;

static int parse(int argc, char **argv, opts *o)
{
    static const struct option lo[] = {{"checkpoint", 1, 0, 'c'}, {"batch", 1, 0, 'b'},
                                       {"frames", 1, 0, 't'},     {"seed", 1, 0, 's'},
                                       {"out", 1, 0, 'o'},        {0, 0, 0, 0}};
    *o = (opts){NULL, NULL, 3, 96, 1};
    int c;
    while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        switch (c) {
        case 'c': o->ckpt = optarg; break;
        case 'b': o->batch = atoi(optarg); break;
        case 't': o->frames = atoi(optarg); break;
        case 's': o->seed = strtoull(optarg, NULL, 10); break;
        case 'o': o->out = optarg; break;
        default: return -1;
        }
    }
    if (!o->ckpt || !o->out || o->batch < 1 || o->frames < 1) {
        fprintf(stderr, "usage: pt_logits_dump --checkpoint C.h5 --batch N --frames T --seed S "
                        "--out F.h5\n");
        return -1;
    }
    return 0;
}

static ds_status write_out(const opts *o, ds_model *m, const ds_batch *b, const double *logits)
{
    const ds_model_cfg *cfg = ds_model_config(m);
    const int T = ds_model_batch_out_frames(m);
    const size_t nf = (size_t)b->n * b->t * b->f;
    hid_t f = -1;
    double *x = malloc(nf * sizeof *x);
    if (!x)
        return DS_FAIL(DS_ERR_MEM, "features");
    ds_status st;
    DS_TRY_GOTO(st, ds_convert(DS_F64, x, DS_F32, b->features, nf), out);
    DS_TRY_GOTO(st, ds_h5_create(o->out, &f), out);
    DS_TRY_GOTO(st, ds_h5_write(f, "batch/features", DS_F64, 3, (hsize_t[]){b->n, b->t, b->f}, x), out);
    DS_TRY_GOTO(st, ds_h5_write(f, "batch/lengths", DS_I32, 1, (hsize_t[]){b->n}, b->lengths), out);
    DS_TRY_GOTO(st, ds_h5_write(f, "out/logits", DS_F64, 3, (hsize_t[]){T, b->n, cfg->n_classes}, logits), out);
    st = ds_h5_write(f, "out/out_lengths", DS_I32, 1, (hsize_t[]){b->n}, ds_model_out_lengths(m));
out:
    if (f >= 0 && ds_h5_close(f) != DS_OK && st == DS_OK)
        st = DS_ERR_IO;
    free(x);
    return st;
}

static ds_status run(const opts *o)
{
    ds_ckpt_info info;
    ds_ctx *ctx = NULL;
    ds_model *m = NULL;
    ds_batch b = {0};
    double *logits = NULL;
    ds_model_cfg cfg;
    ds_dtype dt;
    ds_status st;
    DS_TRY(ds_checkpoint_read_config(o->ckpt, &cfg, &dt, &info));
    const int labels = ds_synthetic_max_labels(&cfg, o->frames);
    const ds_model_limits lim = {o->batch, o->frames, labels};
    DS_TRY_GOTO(st, ds_cli_checkpoint_model(o->ckpt, &lim, &ctx, &m, &info), out);
    DS_TRY_GOTO(st, ds_batch_alloc(&b, o->batch, o->frames, cfg.n_features, o->batch * labels), out);
    ds_rng rng;
    ds_rng_seed(&rng, o->seed);
    DS_TRY_GOTO(st, ds_synthetic_batch(&rng, &cfg, o->batch, o->frames, &b), out);
    DS_TRY_GOTO(st, ds_model_set_batch(m, &b), out);
    DS_TRY_GOTO(st, ds_model_forward(m, 0), out);
    const size_t count = (size_t)ds_model_batch_out_frames(m) * b.n * cfg.n_classes;
    if (!(logits = malloc(count * sizeof *logits))) {
        st = DS_FAIL(DS_ERR_MEM, "logits");
        goto out;
    }
    DS_TRY_GOTO(st, ds_model_logits(m, logits), out);
    DS_TRY_GOTO(st, write_out(o, m, &b, logits), out);
    printf("pt_logits_dump: %s (%s, %s) on %d utterances of up to %d frames -> %s\n", o->ckpt,
           cfg.name, ds_dtype_name(dt), b.n, b.t, o->out);
out:
    free(logits);
    ds_batch_free(&b);
    ds_cli_free_model(ctx, m);
    return st;
}

int main(int argc, char **argv)
{
    opts o;
    if (parse(argc, argv, &o))
        return 2;
    ds_status st = run(&o);
    if (st != DS_OK) {
        fprintf(stderr, "pt_logits_dump: %s: %s\n", ds_status_name(st), ds_status_last_error());
        return 1;
    }
    return 0;
}
