/* fuzz_checkpoint.c - libFuzzer harness: the bytes of a checkpoint read as
 * `dstrain eval`, `transcribe` and `info` read one (cli_common.c's
 * ds_cli_checkpoint_model): its configuration, a CPU model built from it,
 * then every parameter and BatchNorm statistic loaded and checked; and
 * when it holds an optimizer's state, that too, as a resume loads it.
 *
 * Why: checkpoints are copied between machines, cut short by full disks
 * and written by other versions; the reader must refuse a damaged one with
 * an error naming the file and the dataset, never crash, overrun or leak. */
#include <stdlib.h>

#include "checkpoint.h"
#include "fuzz_file.h"

/* A fuzzed config may ask for a model of gigabytes: only those up to a few
 * million parameters are built, in a context that refuses allocations past
 * MAX_BACKEND_BYTES (activations grow with the conv widths, not the
 * parameters). */
#define MAX_PARAMS ((size_t)4 << 20)
#define MAX_BACKEND_BYTES ((size_t)256 << 20)

/* As `dstrain info` builds it (one utterance of 64 frames), or as long as
 * the conv stack needs to leave one output frame. */
static int frames_for(const ds_model_cfg *cfg)
{
    int t = 64;
    while (t < 8192 && ds_model_config_out_frames(cfg, t) < 1)
        t *= 2;
    return t;
}

/* What `dstrain train --resume` reads besides: the optimizer's state (the
 * default SGD; a file of another optimizer is refused, saying so). */
static ds_status load_resume(const char *path, ds_model *m)
{
    const ds_optim_cfg oc = ds_optim_defaults();
    ds_optim *o = NULL;
    ds_status st = ds_model_optim_create(m, &oc, &o);
    if (st == DS_OK)
        st = ds_checkpoint_load_resume(path, m, o);
    ds_optim_destroy(o);
    return st;
}

static void load(const char *path, const ds_model_cfg *cfg, ds_dtype dt, int resume)
{
    const ds_backend *be = ds_backend_get("cpu");
    const ds_ctx_opts opts = {.mem_limit = MAX_BACKEND_BYTES};
    const ds_model_limits lim = {.batch = 1, .frames = frames_for(cfg), .label_len = 8};
    ds_ctx *ctx = NULL;
    ds_model *m = NULL;
    ds_status st = be->ctx_create(0, &opts, &ctx);
    if (st == DS_OK)
        st = ds_model_create(cfg, be, ctx, dt, &lim, &m);
    if (st == DS_OK)
        st = ds_checkpoint_load(path, m);
    if (st == DS_OK && resume)
        st = load_resume(path, m);
    fuzz_check_status(st);
    ds_model_destroy(m);
    if (ctx)
        be->ctx_destroy(ctx);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[256];
    fuzz_file_write(data, size, path, sizeof path);
    ds_model_cfg cfg;
    ds_dtype dt;
    ds_ckpt_info info;
    ds_status st = ds_checkpoint_read_config(path, &cfg, &dt, &info);
    fuzz_check_status(st);
    if (st == DS_OK) {
        const size_t n = ds_model_config_param_count(&cfg);
        if (n > 0 && n <= MAX_PARAMS)
            load(path, &cfg, dt, info.has_resume);
    }
    fuzz_file_done(path);
    return 0;
}
