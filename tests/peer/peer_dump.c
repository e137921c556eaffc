/* peer_dump.c - runs one training forward/backward of a model on a
 * synthetic batch and writes everything the PyTorch peer check needs into an
 * HDF5 file: config, parameters, BatchNorm state before and after, the batch,
 * the loss, the logits and every parameter gradient (tests/peer/).
 *
 * peer_dump --config FILE.json --dtype f32|f64 --mode train|eval
 *           --batch N --frames T --seed S --out FILE.h5 [--impossible]
 *           [--backend NAME]
 *
 * --backend: default $DSTRAIN_TEST_BACKEND, else cpu; one not built in
 * prints "skipped: ..." and exits 77.
 *
 * --impossible shortens the last utterance until its transcript cannot be
 * aligned (fewer output frames than labels): its loss is +inf, zeroed, and
 * it contributes no gradient, as torch's zero_infinity.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "checkpoint.h"
#include "config.h"
#include "convert.h"
#include "h5_io.h"
#include "model.h"
#include "rng.h"
#include "synthetic.h"
#include "testmodel.h"
#include "testutil.h"

typedef struct {
    const char *config, *out, *backend;
    ds_dtype dt;
    int train, batch, frames, impossible;
    unsigned long long seed;
    unsigned long long drop_seed;   /* dropout's key (--dropout-key SEED,STEP,PART) */
    unsigned drop_step, drop_part;
} opts;

static void usage(FILE *f)
{
    fprintf(f, "usage: peer_dump --config FILE.json --dtype f32|f64 --mode train|eval "
               "--batch N --frames T --seed S --out FILE.h5 [--impossible] [--backend NAME] "
               "[--dropout-key SEED,STEP,PART]\n");
}

static int parse(int argc, char **argv, opts *o)
{
    static const struct option lo[] = {
        {"config", 1, 0, 'c'}, {"dtype", 1, 0, 'd'}, {"mode", 1, 0, 'm'}, {"batch", 1, 0, 'b'},
        {"frames", 1, 0, 't'}, {"seed", 1, 0, 's'}, {"out", 1, 0, 'o'}, {"help", 0, 0, 'h'}, {"impossible", 0, 0, 'i'},
        {"backend", 1, 0, 'B'}, {"dropout-key", 1, 0, 'k'}, {0, 0, 0, 0}};
    *o = (opts){NULL, NULL, NULL, DS_F64, 1, 3, 24, 0, 1, 0, 0, 0};
    int c;
    while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        switch (c) {
        case 'c': o->config = optarg; break;
        case 'd': o->dt = !strcmp(optarg, "f32") ? DS_F32 : DS_F64; break;
        case 'm': o->train = !strcmp(optarg, "train"); break;
        case 'b': o->batch = atoi(optarg); break;
        case 't': o->frames = atoi(optarg); break;
        case 's': o->seed = strtoull(optarg, NULL, 10); break;
        case 'o': o->out = optarg; break;
        case 'i': o->impossible = 1; break;
        case 'B': o->backend = optarg; break;
        case 'k':
            if (sscanf(optarg, "%llu,%u,%u", &o->drop_seed, &o->drop_step, &o->drop_part) != 3) {
                fprintf(stderr, "peer_dump: --dropout-key wants SEED,STEP,PART, not %s\n", optarg);
                return -1;
            }
            break;
        case 'h': usage(stdout); exit(0);
        default: usage(stderr); return -1;
        }
    }
    if (!o->config || !o->out) {
        usage(stderr);
        return -1;
    }
    return 0;
}

/* Writes data (host doubles) as a dataset of type dt. */
static ds_status put(hid_t f, const char *name, ds_dtype dt, int rank, const int *dims,
                     const double *data)
{
    hsize_t hd[4];
    for (int i = 0; i < rank; i++)
        hd[i] = (hsize_t)dims[i];
    return ds_h5_write_f64_as(f, name, dt, rank, hd, data);
}

/* Cuts the last utterance to the longest length whose output frames are
 * fewer than its labels (two labels at least). */
static ds_status make_impossible(const ds_model_cfg *cfg, ds_batch *b)
{
    const int i = b->n - 1;
    int *lab = b->labels + b->label_off[i];
    if (b->label_len[i] < 2) {
        if (b->label_off[i] + 2 > b->cap_labels)
            return DS_FAIL(DS_ERR_ARG, "--impossible: no room for a second label");
        lab[1] = lab[0] % (cfg->n_classes - 1) + 1;
        b->label_len[i] = 2;
    }
    int len = b->lengths[i];
    while (len > 1 && ds_model_config_out_frames(cfg, len) >= b->label_len[i])
        len--;
    if (ds_model_config_out_frames(cfg, len) < 1 || ds_model_config_out_frames(cfg, len) >= b->label_len[i])
        return DS_FAIL(DS_ERR_ARG, "--impossible: cannot shorten utterance %d enough", i);
    for (int s = len; s < b->t; s++)
        for (int j = 0; j < b->f; j++)
            b->features[((size_t)i * b->t + s) * b->f + j] = 0;
    b->lengths[i] = len;
    return DS_OK;
}

static ds_status put_batch(hid_t f, const ds_batch *b, ds_dtype dt)
{
    size_t nf = (size_t)b->n * b->t * b->f;
    double *x = malloc(nf * sizeof *x);
    if (!x)
        return DS_FAIL(DS_ERR_MEM, "features");
    ds_status st = ds_convert(DS_F64, x, DS_F32, b->features, nf);
    if (st == DS_OK)
        st = put(f, "batch/features", dt, 3, (int[]){b->n, b->t, b->f}, x);
    free(x);
    DS_TRY(st);
    int total = b->label_off[b->n - 1] + b->label_len[b->n - 1];
    DS_TRY(ds_h5_write(f, "batch/lengths", DS_I32, 1, (hsize_t[]){(hsize_t)b->n}, b->lengths));
    DS_TRY(ds_h5_write(f, "batch/labels", DS_I32, 1, (hsize_t[]){(hsize_t)total}, b->labels));
    return ds_h5_write(f, "batch/label_lengths", DS_I32, 1, (hsize_t[]){(hsize_t)b->n}, b->label_len);
}

static ds_status run(const opts *o)
{
    ds_model_cfg cfg;
    DS_TRY(ds_config_load_file(o->config, &cfg));
    const ds_backend *be = t_backend(o->backend);
    ds_ctx *ctx = NULL;
    ds_model *m = NULL;
    ds_batch b = {0};
    hid_t f = -1;
    double *buf = NULL, *losses = calloc((size_t)o->batch, sizeof *losses);
    ds_status st;
    if (!losses)
        return DS_FAIL(DS_ERR_MEM, "losses");
    DS_TRY_GOTO(st, be->ctx_create(0, NULL, &ctx), out);
    ds_model_limits lim = {o->batch, o->frames, ds_synthetic_max_labels(&cfg, o->frames)};
    DS_TRY_GOTO(st, ds_model_create(&cfg, be, ctx, o->dt, &lim, &m), out);
    DS_TRY_GOTO(st, ds_batch_alloc(&b, o->batch, o->frames, cfg.n_features, o->batch * lim.label_len), out);
    ds_rng rng;
    ds_rng_seed(&rng, o->seed);
    DS_TRY_GOTO(st, ds_model_init_params(m, o->seed), out);
    DS_TRY_GOTO(st, t_perturb_bn(m, &rng), out);
    DS_TRY_GOTO(st, ds_synthetic_batch(&rng, &cfg, o->batch, o->frames, &b), out);
    if (o->impossible)
        DS_TRY_GOTO(st, make_impossible(&cfg, &b), out);

    DS_TRY_GOTO(st, ds_h5_create(o->out, &f), out);
    char json[DS_CONFIG_JSON_MAX];
    DS_TRY_GOTO(st, ds_config_to_json(&cfg, json, sizeof json), out);
    DS_TRY_GOTO(st, ds_h5_write_attr_str(f, "config", json), out);
    DS_TRY_GOTO(st, ds_h5_write_attr_str(f, "dtype", ds_dtype_name(o->dt)), out);
    DS_TRY_GOTO(st, ds_h5_write_attr_str(f, "mode", o->train ? "train" : "eval"), out);
    char key[80];
    snprintf(key, sizeof key, "%llu,%u,%u", o->drop_seed, o->drop_step, o->drop_part);
    DS_TRY_GOTO(st, ds_h5_write_attr_str(f, "dropout_key", key), out);
    DS_TRY_GOTO(st, ds_checkpoint_write_tensors(f, m, "params", DS_PARAMS), out);
    DS_TRY_GOTO(st, ds_checkpoint_write_tensors(f, m, "state", DS_BN_STATS), out);
    DS_TRY_GOTO(st, put_batch(f, &b, o->dt), out);

    /* before the batch, whose upload carries the step */
    ds_model_set_dropout_key(m, o->drop_seed, o->drop_step, o->drop_part);
    DS_TRY_GOTO(st, ds_model_set_batch(m, &b), out);
    DS_TRY_GOTO(st, ds_model_zero_grad(m), out);
    DS_TRY_GOTO(st, ds_model_forward(m, o->train), out);
    ds_loss loss;
    DS_TRY_GOTO(st, ds_model_loss(m, 1), out);
    DS_TRY_GOTO(st, ds_model_read_loss(m, &loss, losses), out);
    DS_TRY_GOTO(st, ds_model_backward(m), out);

    const int T = ds_model_batch_out_frames(m), C = cfg.n_classes;
    buf = malloc((size_t)T * b.n * C * sizeof *buf);
    if (!buf) {
        st = DS_FAIL(DS_ERR_MEM, "logits");
        goto out;
    }
    DS_TRY_GOTO(st, ds_model_logits(m, buf), out);
    DS_TRY_GOTO(st, put(f, "out/logits", o->dt, 3, (int[]){T, b.n, C}, buf), out);
    DS_TRY_GOTO(st, put(f, "out/loss", o->dt, 1, (int[]){1}, &loss.loss), out);
    DS_TRY_GOTO(st, put(f, "out/losses", o->dt, 1, (int[]){b.n}, losses), out);
    DS_TRY_GOTO(st, ds_h5_write(f, "out/out_lengths", DS_I32, 1, (hsize_t[]){(hsize_t)b.n},
                                ds_model_out_lengths(m)), out);
    DS_TRY_GOTO(st, ds_checkpoint_write_tensors(f, m, "grads", DS_GRADS), out);
    DS_TRY_GOTO(st, ds_checkpoint_write_tensors(f, m, "state_after", DS_BN_STATS), out);
    printf("peer_dump: %s %s %s loss %.10g (%d infinite) -> %s\n", cfg.name, ds_dtype_name(o->dt),
           o->train ? "train" : "eval", loss.loss, loss.n_infinite, o->out);
out:
    free(buf);
    free(losses);
    if (f >= 0 && ds_h5_close(f) != DS_OK && st == DS_OK)
        st = DS_ERR_IO;
    ds_batch_free(&b);
    ds_model_destroy(m);
    if (ctx)
        be->ctx_destroy(ctx);
    return st;
}

int main(int argc, char **argv)
{
    opts o;
    if (parse(argc, argv, &o))
        return 2;
    ds_status st = run(&o);
    if (st != DS_OK) {
        fprintf(stderr, "peer_dump: %s: %s\n", ds_status_name(st), ds_status_last_error());
        return 1;
    }
    return 0;
}
