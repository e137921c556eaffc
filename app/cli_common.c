/* cli_common.c - helpers shared by the subcommands, --version, and the list
 * of commands with dstrain --help, dstrain help and its Markdown reference. */
#include <cblas.h>
#include <cjson/cJSON.h>
#include <hdf5.h>
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "backend.h"
#include "build_info.h"
#include "checkpoint.h"
#include "cli.h"
#include "h5_lock.h"
#include "cpu_isa.h"
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

int ds_cli_graphs_device(const char *cmd, const ds_ctx_opts *compute, const char *device)
{
    if (!compute->capturable || strcmp(device, "cpu"))
        return 0;
    fprintf(stderr, "dstrain %s: --cuda-graphs captures GPU work: it needs --device cuda (the cpu "
            "runs each op as it is called)\n", cmd);
    return 1;
}

int ds_cli_count(const char *cmd, const char *flag, const char *s, double lo, double hi, double *out)
{
    char *end;
    *out = strtod(s, &end);
    if (end == s || *end || !(*out >= lo && *out <= hi) || *out != floor(*out)) {
        fprintf(stderr, "dstrain %s: --%s %s: expected a whole number in [%g, %g]\n", cmd, flag, s,
                lo, hi);
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
    fprintf(stderr, "dstrain %s: %s: %s\n", cmd, ds_status_name(st), ds_status_last_error());
    return 1;
}

int ds_cli_load_model(const char *cmd, const char *preset, const char *config_file,
                      ds_model_cfg *cfg)
{
    ds_status st;
    struct stat sb;
    if (config_file && stat(config_file, &sb) == 0 && !S_ISREG(sb.st_mode))
        st = DS_FAIL(DS_ERR_ARG, "%s: %s, not a model config (a JSON file)", config_file,
                     S_ISDIR(sb.st_mode) ? "a directory" : "not a regular file");
    else if (config_file)
        st = ds_config_load_file(config_file, cfg);
    else
        st = ds_config_preset(preset ? preset : "tiny", cfg);
    return st == DS_OK ? 0 : ds_cli_fail(cmd, st);
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

static const ds_flag version_flags[] = {DS_FLAG_END};

const ds_flag_cmd ds_cli_version_cmd = {
    .name = "version",
    .run = ds_cli_version,
    .summary = "version, backends and library versions compiled in",
    .usage = "dstrain version\ndstrain --version",
    .flags = version_flags};

int ds_cli_version(int argc, char **argv)
{
    ds_flags fl;
    int c;
    if ((c = ds_flags_begin(&fl, &ds_cli_version_cmd, argc, argv)) != DS_FLAGS_GO)
        return c;
    while ((c = ds_flags_next(&fl)) != -1)
        return ds_flags_unhandled(&fl, c);
    if (optind < argc) {
        fprintf(stderr, "dstrain version: takes no operand (got \"%s\")\n", argv[optind]);
        return 2;
    }
    char mpi[MPI_MAX_LIBRARY_VERSION_STRING];
    int mpi_len = 0;
    MPI_Get_library_version(mpi, &mpi_len);
    for (int i = 0; i < mpi_len; i++)   /* first line only */
        if (mpi[i] == '\n' || mpi[i] == ',') {
            mpi[i] = '\0';
            break;
        }
    printf("dstrain %s (%s, %s)\n", DSTRAIN_VERSION, DSTRAIN_BUILD_TYPE, DSTRAIN_C_COMPILER);
#ifdef DS_HAVE_CUDA_BACKEND
    const char *no_cuda = "; cuda built but not loaded (below)";
#else
    const char *no_cuda = "; cuda not built";
#endif
    printf("backends: cpu (float32, float64; float16, bfloat16 emulated)%s\n",
           ds_backend_get("cuda") ? ", cuda (float32, float64, float16, bfloat16)" : no_cuda);
    printf("blas:     %s\n", openblas_get_config());
    char isa[400];   /* the CPU ops' instruction set, and what the host runs */
    ds_cpu_isa_describe(isa, sizeof isa);
    printf("cpu ops:  %s\n", isa);
    char h5[160];   /* the loader's readers and the checkpoint writer share it */
    printf("hdf5:     %s\n", ds_h5_thread_mode(h5, sizeof h5));
    printf("mpi:      %s\n", mpi);
    printf("cjson:    %s\n", cJSON_Version());
    const ds_backend *cuda = ds_backend_get("cuda");
    if (cuda) {   /* compiled against and found at run time, and the architectures built */
        char lines[2048];
        cuda->describe(lines, sizeof lines);
        printf("%s\n", lines);
    } else {
#if defined(DS_HAVE_CUDA_BACKEND)
        printf("cuda:     backend built (sm_%s), not loaded: %s\n", DSTRAIN_CUDA_ARCHS,
               ds_backend_missing("cuda"));
#elif defined(DS_HAVE_CUDA_TOOLKIT)
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

/* ---- the commands, dstrain --help and dstrain help ---- */

enum { O_MARKDOWN = 256 };

static const ds_flag help_flags[] = {
    DS_FLAG_OPERAND("COMMAND", "that command's options, as `dstrain COMMAND --help` prints them"),
    DS_FLAG_SWITCH(O_MARKDOWN, "markdown",
                   "the configuration reference as Markdown: every command (or COMMAND) with its "
                   "options, as in docs/cli.md (`scripts/update-readme-reference.sh` puts it there)"),
    DS_FLAG_END};

const ds_flag_cmd ds_cli_help_cmd = {
    .name = "help",
    .run = ds_cli_help,
    .summary = "this list, or COMMAND's options; --markdown: the reference",
    .usage = "dstrain help [COMMAND]\ndstrain help --markdown [COMMAND]",
    .flags = help_flags};

const ds_flag_cmd *const ds_cli_commands[] = {
    &ds_cli_prep_cmd, &ds_cli_train_cmd, &ds_cli_eval_cmd, &ds_cli_transcribe_cmd,
    &ds_cli_info_cmd, &ds_cli_bench_cmd, &ds_cli_export_cmd, &ds_cli_import_cmd,
    &ds_cli_version_cmd, &ds_cli_help_cmd, NULL};

/* How every command reads its options (flags.c); in dstrain --help and
 * the reference. */
static const char *const conventions =
    "Options are matched whole, as `--batch 8` or `--batch=8`: an abbreviation such as "
    "--bat is refused, naming the options it could mean, and an unknown option or command "
    "gets the nearest one suggested. Usage errors exit with status 2; every numeric option "
    "refuses NaN, Inf and values outside its range, naming the option.";

void ds_cli_usage(FILE *f)
{
    fprintf(f, "dstrain - data-parallel DeepSpeech2 training\n"
               "\n"
               "usage: dstrain COMMAND [options]     (dstrain COMMAND --help for its options)\n"
               "\n"
               "commands:\n");
    for (int i = 0; ds_cli_commands[i]; i++) {
        fprintf(f, "  %-11s ", ds_cli_commands[i]->name);
        ds_flags_text(f, ds_cli_commands[i]->summary, 14, 14);
        fputc('\n', f);
    }
    fprintf(f, "\n"
               "  --version   as version\n"
               "  --help      this text\n"
               "\n");
    ds_flags_text(f, conventions, 0, 0);
    fputc('\n', f);
}

static const ds_flag_cmd *find_command(const char *name)
{
    for (int i = 0; ds_cli_commands[i]; i++)
        if (!strcmp(ds_cli_commands[i]->name, name))
            return ds_cli_commands[i];
    return NULL;
}

/* The README's configuration reference (between its "dstrain options"
 * markers). */
static void markdown_all(FILE *f)
{
    fputs("Every command takes `--help` (`-h`). ", f);
    ds_flags_md_text(f, conventions);
    fputs("\n\n| command | what it does |\n|---|---|\n", f);
    for (int i = 0; ds_cli_commands[i]; i++) {
        fprintf(f, "| `dstrain %s` | ", ds_cli_commands[i]->name);
        ds_flags_md_text(f, ds_cli_commands[i]->summary);
        fputs(" |\n", f);
    }
    for (int i = 0; ds_cli_commands[i]; i++) {
        fputc('\n', f);
        ds_flags_markdown(f, ds_cli_commands[i]);
    }
}

int ds_cli_help(int argc, char **argv)
{
    ds_flags fl;
    int c, markdown = 0;
    if ((c = ds_flags_begin(&fl, &ds_cli_help_cmd, argc, argv)) != DS_FLAGS_GO)
        return c;
    while ((c = ds_flags_next(&fl)) != -1) {
        if (c != O_MARKDOWN)
            return ds_flags_unhandled(&fl, c);
        markdown = 1;
    }
    if (argc - optind > 1) {
        fprintf(stderr, "dstrain help: one command at a time\n");
        return 2;
    }
    const ds_flag_cmd *cmd = NULL;
    if (argc - optind == 1 && !(cmd = find_command(argv[optind])))
        return ds_cli_unknown_command(argv[optind]);
    if (markdown && cmd)
        ds_flags_markdown(stdout, cmd);
    else if (markdown)
        markdown_all(stdout);
    else if (cmd)
        ds_flags_help(stdout, cmd);
    else
        ds_cli_usage(stdout);
    return 0;
}

int ds_cli_unknown_command(const char *cmd)
{
    const char *names[64], *shown[64];
    int n = 0, pick[3];
    const char *typed = cmd + strspn(cmd, "-");
    const int dashes = typed != cmd;
    for (int i = 0; ds_cli_commands[i] && n < 64; i++)
        names[n++] = ds_cli_commands[i]->name;
    for (int i = 0; i < n; i++)   /* --help and --version keep their dashes */
        shown[i] = dashes && !strcmp(names[i], "help") ? "--help"
                   : dashes && !strcmp(names[i], "version") ? "--version" : names[i];
    const int k = ds_flags_suggest(typed, strlen(typed), names, n, pick, 3);
    fprintf(stderr, "dstrain: unknown command \"%s\"", cmd);
    if (k > 0) {
        fprintf(stderr, "; did you mean ");
        ds_flags_print_choices(stderr, "", shown, pick, k);
        fputc('?', stderr);
    }
    fprintf(stderr, "\n(dstrain --help lists the commands)\n");
    return 2;
}
