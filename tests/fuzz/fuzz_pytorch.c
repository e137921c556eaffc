/* fuzz_pytorch.c - libFuzzer harness: the bytes of a torch.save file read
 * as `dstrain import --pytorch` reads one (ds_pt_load): the zip (libzip),
 * its header records and the pickle, the shapes first; then, as import
 * does once the shapes fit a model (here: up to MAX_ELEMENTS in all), every
 * storage record, each tensor made contiguous.
 *
 * Why: as fuzz_pickle, for the whole file: records missing, cut short,
 * claimed with sizes that disagree with the pickle's, or shared by tensors
 * in ways a storage cannot hold, must be refused naming the file and key. */
#include "fuzz_file.h"
#include "pt_file.h"

#define MAX_ELEMENTS ((size_t)1 << 24)

static size_t elements(const ds_pt_dict *d)
{
    size_t n = 0;
    for (int i = 0; i < d->n; i++)
        n += d->t[i].numel < MAX_ELEMENTS ? d->t[i].numel : MAX_ELEMENTS;
    return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[256];
    fuzz_file_write(data, size, path, sizeof path);
    ds_pt_dict d;
    int wrapped;
    ds_status st = ds_pt_load(path, 1, &d, &wrapped);
    fuzz_check_status(st);
    const int fits = st == DS_OK && elements(&d) <= MAX_ELEMENTS;
    ds_pt_dict_free(&d);
    if (fits) {
        st = ds_pt_load(path, 0, &d, &wrapped);
        fuzz_check_status(st);
        ds_pt_dict_free(&d);
    }
    fuzz_file_done(path);
    return 0;
}
