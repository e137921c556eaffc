/* fuzz_pytorch.c - libFuzzer harness: the bytes of a torch.save file read
 * as `dstrain import --pytorch` reads one (ds_pt_load): the zip (libzip),
 * its header records, the pickle and every storage record, each tensor made
 * contiguous.
 *
 * Why: as fuzz_pickle, for the whole file: records missing, cut short,
 * claimed with sizes that disagree with the pickle's, or shared by tensors
 * in ways a storage cannot hold, must be refused naming the file and key. */
#include "fuzz_file.h"
#include "pt_file.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[256];
    fuzz_file_write(data, size, path, sizeof path);
    ds_pt_dict d;
    int wrapped;
    const ds_status st = ds_pt_load(path, &d, &wrapped);
    fuzz_check_status(st);
    ds_pt_dict_free(&d);
    fuzz_file_done(path);
    return 0;
}
