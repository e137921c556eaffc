/* fuzz_pickle.c - libFuzzer harness: bytes read as the pickle of a
 * torch.save file (its data.pkl), as `dstrain import --pytorch` reads one:
 * the state_dict's tensors described, or the stream refused.
 *
 * Why: a .pt file comes from anywhere; our pickle machine must refuse a
 * malformed or hostile stream with a message, never run past its input,
 * loop without bound, or leak (its work and memory are budgeted). */
#include "fuzz_file.h"
#include "pt_pickle_read.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ds_status_clear_error();
    ds_pt_refs refs;
    const ds_status st = ds_pt_unpickle_state_dict("fuzz.pkl", data, size, &refs);
    fuzz_check_status(st);
    ds_pt_refs_free(&refs);
    return 0;
}
