/* dataset_open_check.c - the C side of the dataset_bad_inputs test
 * (tests/peer/dataset_bad_files.py).
 *
 *   dataset_open_check FILE [RAW]       opens FILE and reads every utterance;
 *       prints "ok: N utterances, F frames, DTYPE" or "error: MESSAGE" and
 *       exits 1. With RAW, writes the features read, float32 [total][n_features]
 *       in utterance order, to RAW.
 *   dataset_open_check --write FILE f16|f32 RAW
 *       writes a small file with our writer for h5py to read back, and the
 *       float32 features it was given to RAW.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alphabet.h"
#include "dataset.h"
#include "rng.h"

static int fail(void)
{
    printf("error: %s\n", ds_status_last_error());
    return 1;
}

/* Reads every utterance of d, appending the features to raw when given. */
static ds_status read_all(ds_dataset *d, FILE *raw)
{
    int32_t longest = 1;
    for (long i = 0; i < d->n; i++)
        longest = d->frames[i] > longest ? d->frames[i] : longest;
    float *x = malloc((size_t)longest * d->n_features * sizeof *x);   /* [longest][n_features] */
    if (!x)
        return DS_FAIL(DS_ERR_MEM, "read buffer");
    ds_status st = DS_OK;
    for (long i = 0; i < d->n && st == DS_OK; i++) {
        st = ds_dataset_read(d, i, x);
        size_t n = (size_t)d->frames[i] * d->n_features;
        if (st == DS_OK && raw && fwrite(x, sizeof *x, n, raw) != n)
            st = DS_FAIL(DS_ERR_IO, "cannot write the dump");
    }
    free(x);
    return st;
}

static int check(const char *path, const char *raw_path)
{
    ds_dataset *d;
    if (ds_dataset_open(path, &d) != DS_OK)
        return fail();
    FILE *raw = raw_path ? fopen(raw_path, "wb") : NULL;
    ds_status st = raw_path && !raw ? DS_FAIL(DS_ERR_IO, "%s: cannot create", raw_path)
                                    : read_all(d, raw);
    if (raw && fclose(raw) != 0 && st == DS_OK)
        st = DS_FAIL(DS_ERR_IO, "%s: cannot write", raw_path);
    if (st == DS_OK)
        printf("ok: %ld utterances, %ld frames, %s\n", d->n, d->total_frames,
               ds_dtype_name(d->feature_dtype));
    ds_dataset_close(d);
    return st == DS_OK ? 0 : fail();
}

/* Utterance i: frames [frames][nf] of normals, some near powers of two to
 * exercise float16 rounding carries; labels [n_labels]. */
static void make_utterance(ds_rng *r, int i, int frames, int nf, float *x, uint8_t *labels,
                           int n_labels, char *text)
{
    for (int k = 0; k < frames * nf; k++)
        x[k] = k % 11 == 3 ? (float)ldexp(1 - 1e-4 * ds_rng_uniform(r), k % 7 - 2)
                           : (float)(4 * ds_rng_normal(r) + i);
    for (int k = 0; k < n_labels; k++) {
        labels[k] = (uint8_t)ds_rng_int(r, 1, DS_ALPHABET_SIZE - 1);
        text[k] = ds_alphabet[labels[k]];
    }
    text[n_labels] = '\0';
}

static int write_file(const char *path, const char *dtype, const char *raw_path)
{
    ds_feature_cfg c = ds_feature_defaults();
    c.type = DS_FEAT_LOGMEL;
    c.n_mels = 8;
    const int nf = 8, frames[3] = {5, 1100, 40}, n_labels[3] = {2, 30, 7};
    ds_dataset_writer *w;
    if (ds_dataset_writer_create(path, &c, strcmp(dtype, "f16") == 0 ? DS_F16 : DS_F32, &w) != DS_OK)
        return fail();
    FILE *raw = fopen(raw_path, "wb");
    float *x = malloc((size_t)1100 * nf * sizeof *x);
    ds_rng r;
    ds_rng_seed(&r, 3);
    ds_status st = raw && x ? DS_OK : DS_FAIL(DS_ERR_IO, "%s: cannot create", raw_path);
    for (int i = 0; i < 3 && st == DS_OK; i++) {
        uint8_t labels[32];
        char text[33], id[32];
        make_utterance(&r, i, frames[i], nf, x, labels, n_labels[i], text);
        snprintf(id, sizeof id, "check-%d", i);
        st = ds_dataset_writer_add(w, id, text, labels, n_labels[i], x, frames[i]);
        size_t n = (size_t)frames[i] * nf;
        if (st == DS_OK && fwrite(x, sizeof *x, n, raw) != n)
            st = DS_FAIL(DS_ERR_IO, "%s: cannot write", raw_path);
    }
    free(x);
    if (raw)
        fclose(raw);
    if (st != DS_OK) {
        ds_dataset_writer_abort(w);
        return fail();
    }
    return ds_dataset_writer_close(w) == DS_OK ? 0 : fail();
}

int main(int argc, char **argv)
{
    if (argc == 5 && strcmp(argv[1], "--write") == 0)
        return write_file(argv[2], argv[3], argv[4]);
    if (argc == 2 || argc == 3)
        return check(argv[1], argc == 3 ? argv[2] : NULL);
    fprintf(stderr, "usage: %s FILE [RAW] | --write FILE f16|f32 RAW\n", argv[0]);
    return 2;
}
