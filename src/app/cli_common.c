/* cli_common.c - helpers shared by the subcommands, and --version. */
#include <cblas.h>
#include <cjson/cJSON.h>
#include <hdf5.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "build_info.h"
#include "checkpoint.h"
#include "cli.h"
#include "reduce.h"

/* OpenBLAS reports its build; declared here as cblas.h of other BLAS lacks it. */
char *openblas_get_config(void);

int ds_cli_num(const char *cmd, const char *flag, const char *s, double lo, double hi, double *out)
{
    char *end;
    *out = strtod(s, &end);
    if (end == s || *end || !(*out >= lo && *out <= hi)) {   /* NaN fails both */
        fprintf(stderr, "dstrain %s: --%s %s: expected a number in [%g, %g]\n", cmd, flag, s, lo, hi);
        return -1;
    }
    return 0;
}

int ds_cli_choice(const char *cmd, const char *flag, const char *s, const char *const *names,
                  int *out)
{
    int n = 0;
    for (; names[n]; n++)
        if (!strcmp(s, names[n])) {
            *out = n;
            return 0;
        }
    fprintf(stderr, "dstrain %s: --%s %s: expected ", cmd, flag, s);
    for (int i = 0; i < n; i++)
        fprintf(stderr, "%s%s", names[i], i + 2 < n ? ", " : i + 1 < n ? " or " : "\n");
    return -1;
}

int ds_cli_precision(const char *cmd, const char *flag, const char *s, ds_dtype *out)
{
    static const struct { const char *name; ds_dtype dt; } p[] = {
        {"fp32", DS_F32}, {"fp64", DS_F64}, {"fp16", DS_F16}, {"bf16", DS_BF16}};
    for (size_t i = 0; i < sizeof p / sizeof p[0]; i++)
        if (!strcmp(s, p[i].name)) {
            *out = p[i].dt;
            return 0;
        }
    fprintf(stderr, "dstrain %s: --%s %s: expected fp32, fp64, fp16 or bf16\n", cmd, flag, s);
    return -1;
}

int ds_cli_fail(const char *cmd, ds_status st)
{
    fprintf(stderr, "dstrain %s: %s: %s\n", cmd, ds_status_name(st), ds_last_error());
    return 1;
}

int ds_cli_load_model(const char *preset, const char *config_file, ds_model_cfg *cfg)
{
    ds_status st;
    if (config_file)
        st = ds_config_load_file(config_file, cfg);
    else
        st = ds_config_preset(preset ? preset : "tiny", cfg);
    return st == DS_OK ? 0 : ds_cli_fail("model", st);
}

ds_status ds_cli_checkpoint_model(const char *ckpt, const ds_model_limits *lim, ds_ctx **ctx,
                                  ds_model **m, ds_ckpt_info *info)
{
    ds_model_cfg cfg;
    ds_dtype dt;
    const ds_backend *be = ds_backend_get("cpu");
    *ctx = NULL;
    *m = NULL;
    DS_TRY(ds_checkpoint_read_config(ckpt, &cfg, &dt, info));
    DS_TRY(be->ctx_create(0, NULL, ctx));
    DS_TRY(ds_model_create(&cfg, be, *ctx, dt, lim, m));
    return ds_checkpoint_load(ckpt, *m);
}

void ds_cli_free_model(ds_ctx *ctx, ds_model *m)
{
    ds_model_destroy(m);
    if (ctx)
        ds_backend_get("cpu")->ctx_destroy(ctx);
}

int ds_cli_version(void)
{
    unsigned maj, min, rel;
    char mpi[MPI_MAX_LIBRARY_VERSION_STRING];
    int mpi_len = 0;
    H5get_libversion(&maj, &min, &rel);
    MPI_Get_library_version(mpi, &mpi_len);
    for (int i = 0; i < mpi_len; i++)   /* first line only */
        if (mpi[i] == '\n' || mpi[i] == ',') {
            mpi[i] = '\0';
            break;
        }
    printf("dstrain %s (%s, %s)\n", DSTRAIN_VERSION, DSTRAIN_BUILD_TYPE, DSTRAIN_C_COMPILER);
    printf("backends: cpu (float32, float64; float16, bfloat16 emulated)%s\n",
           ds_backend_get("cuda") ? ", cuda (float32, float64, float16, bfloat16)" : "; cuda not built");
    printf("blas:     %s\n", openblas_get_config());
    printf("hdf5:     %u.%u.%u\n", maj, min, rel);
    printf("mpi:      %s\n", mpi);
    printf("cjson:    %s\n", cJSON_Version());
    const ds_backend *cuda = ds_backend_get("cuda");
    if (cuda) {   /* compiled against and found at run time, and the architectures built */
        char lines[2048];
        cuda->describe(lines, sizeof lines);
        printf("%s\n", lines);
    } else {
#ifdef DS_HAVE_CUDA_TOOLKIT
        printf("cuda:     toolkit %s found, but cuBLAS or cuDNN was not: backend not built\n",
               DSTRAIN_CUDA_TOOLKIT);
#else
        printf("cuda:     toolkit not found at configure time: backend not built\n");
#endif
    }
    char nccl[256];   /* found at run time (ncclGetVersion) and compiled against */
    ds_reduce_describe(nccl, sizeof nccl);
    printf("%s\n", nccl);
    return 0;
}
