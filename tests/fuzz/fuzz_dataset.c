/* fuzz_dataset.c - libFuzzer harness: the bytes of a feature file (dstrain
 * prep's HDF5) opened, validated, described and read utterance by utterance.
 *
 * Why: feature files come from elsewhere (another machine's prep, h5py, a
 * copy cut short), and ds_dataset_open promises to refuse a bad one with an
 * error naming the file and the field. A damaged file must never crash,
 * overrun or leak in a training job that meets it. */
#include <stdio.h>
#include <stdlib.h>

#include "dataset.h"
#include "fuzz_file.h"

/* A valid file may claim a huge /features that HDF5 fills with zeros on
 * read; reading such an utterance proves nothing and costs seconds. */
#define MAX_UTTERANCE_FLOATS ((size_t)4 << 20)

static FILE *devnull(void)
{
    static FILE *f;
    if (!f && !(f = fopen("/dev/null", "w"))) {
        perror("fuzz: /dev/null");
        abort();
    }
    return f;
}

static void read_all(ds_dataset *d)
{
    ds_dataset_describe(d, devnull());   /* `dstrain info FILE.h5` */
    for (long i = 0; i < d->n; i++) {
        const size_t count = (size_t)d->frames[i] * (size_t)d->n_features;
        if (count > MAX_UTTERANCE_FLOATS)
            continue;
        float *x = malloc(count * sizeof *x);
        if (!x)
            abort();
        fuzz_check_status(ds_dataset_read(d, i, x));
        free(x);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[256];
    fuzz_file_write(data, size, path, sizeof path);
    ds_dataset *d = NULL;
    ds_status st = ds_dataset_open(path, &d);
    fuzz_check_status(st);
    if (st == DS_OK) {
        read_all(d);
        ds_dataset_close(d);
    }
    fuzz_file_done(path);
    return 0;
}
