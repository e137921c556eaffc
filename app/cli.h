/* cli.h - subcommands of the dstrain program; each returns the exit code
 * (0 ok, 1 failure, 2 bad usage). */
#ifndef DS_CLI_H
#define DS_CLI_H

#include "checkpoint.h"
#include "flags.h"
#include "config.h"
#include "model.h"

int ds_cli_train(int argc, char **argv);
int ds_cli_info(int argc, char **argv);
int ds_cli_version(int argc, char **argv);
int ds_cli_eval(int argc, char **argv);
int ds_cli_transcribe(int argc, char **argv);
int ds_cli_prep(int argc, char **argv);
int ds_cli_bench(int argc, char **argv);
/* export --pytorch CKPT OUT.pt, import --pytorch IN.pt OUT.h5 (cli_pytorch.c):
 * deepspeech.pytorch state_dicts; their tables are ds_cli_export_cmd and
 * ds_cli_import_cmd. */
int ds_cli_export(int argc, char **argv);
int ds_cli_import(int argc, char **argv);
extern const ds_flag_cmd ds_cli_export_cmd, ds_cli_import_cmd;

/* --model NAME or --config FILE into cfg; prints the error as dstrain cmd's
 * and returns 1 on failure. */
int ds_cli_load_model(const char *cmd, const char *preset, const char *config_file,
                      ds_model_cfg *cfg);
/* Whole-string number in [lo, hi] (NaN refused) for --flag of dstrain cmd;
 * prints the error and returns -1 otherwise. */
/* --cuda-graphs: refused on the cpu (1, with the message on stderr), else 0. */
int ds_cli_graphs_device(const char *cmd, const ds_ctx_opts *compute, const char *device);

int ds_cli_num(const char *cmd, const char *flag, const char *s, double lo, double hi, double *out);
/* --bucket-frames, which train and bench share (app/train_data.c). */
#define DS_CLI_BUCKET_FRAMES_HELP                                                           \
    "pad each batch to a multiple of N output frames (N x the conv stack's time stride "  \
    "input frames), not just to its longest utterance: a small, bounded set of shapes for " \
    "the GPU; the CPU's results are the same bit for bit (`test_bucket_padding`). 0: off, " \
    "until a GPU run has shown it faster"

/* --cpu-bind, which train and bench share (mpi/cpu_binding.h). */
#define DS_CLI_CPU_BIND_HELP                                                                \
    "with --device cuda, the CPUs each rank's threads run on: gpu, those nearest its GPU "  \
    "(from the machine's topology, shared evenly by the node's ranks near the same CPUs; "  \
    "a binding by the launcher, Open MPI's --bind-to or Slurm's --cpu-bind, is kept); "     \
    "none: wherever the system puts them. The CPU path never binds"
/* --rnn-algo, in the order of DS_RNN_ALGO_* (backend.h). */
#define DS_CLI_RNN_ALGO_NAMES ((const char *const[]){"standard", "auto", "persist", NULL})
#define DS_CLI_RNN_ALGO_HELP                                                                \
    "the recurrent layers' cuDNN algorithm (cuda): standard, a few kernels per time step "   \
    "and direction; persist, one persistent kernel per layer and pass that keeps the "       \
    "recurrent weights on chip (a layer cuDNN cannot run so runs standard, said at start-up: " \
    "fp64 has no persistent kernel); auto, both timed per layer at start-up and the faster "  \
    "kept. Every rank runs rank 0's choice. standard until a GPU run has shown the others "   \
    "correct and faster"
#define DS_CLI_CUDA_GRAPHS_HELP                                                              \
    "capture each batch shape's training step (forward to update) as a CUDA Graph once and "  \
    "replay it: one launch a step instead of thousands. Every per-batch value is then read "  \
    "from GPU memory and the recurrent layers run one cuDNN call per direction over the "    \
    "padded length; a shape whose capture fails runs uncaptured, said once. One rank only "   \
    "for now (ranks > 1 run uncaptured, said at start-up). Off until a GPU run has shown it " \
    "correct and faster"
#define DS_CLI_CUDA_GRAPHS_MAX_HELP                                                          \
    "with --cuda-graphs: captured shapes held at most, the least recently used destroyed "    \
    "to make room (--bucket-frames keeps the shapes few)"
#define DS_CLI_CPU_BIND_NAMES ((const char *const[]){"none", "gpu", NULL})

/* The same for a count: a whole number (--batch 1.5 is refused, not cut to 1). */
int ds_cli_count(const char *cmd, const char *flag, const char *s, double lo, double hi, double *out);
/* fp32 | fp64 | fp16 | bf16 for --flag of dstrain cmd; -1 (printed) otherwise. */
int ds_cli_precision(const char *cmd, const char *flag, const char *s, ds_dtype *out);

/* s as one of names (NULL-terminated): *out gets its index; else -1 and an
 * error naming cmd, --flag and the choices. */
int ds_cli_choice(const char *cmd, const char *flag, const char *s, const char *const *names,
                  int *out);
/* Prints the status and recorded error as "dstrain CMD: ...". */
int ds_cli_fail(const char *cmd, ds_status st);

/* A CPU model sized for lim with the checkpoint's weights, every dataset's
 * checksum and values verified (ds_checkpoint_load); free with
 * ds_cli_free_model, also after a failure. */
ds_status ds_cli_checkpoint_model(const char *ckpt, const ds_model_limits *lim, ds_ctx **ctx,
                                  ds_model **m, ds_ckpt_info *info);
void ds_cli_free_model(ds_ctx *ctx, ds_model *m);

/* The option table of each subcommand (flags.h), and all of them in
 * dstrain --help's order, NULL-terminated (cli_common.c): a new subcommand
 * is listed there to be in the help, the reference in docs/cli.md and its tests. */
extern const ds_flag_cmd ds_cli_prep_cmd, ds_cli_train_cmd, ds_cli_eval_cmd,
    ds_cli_transcribe_cmd, ds_cli_info_cmd, ds_cli_bench_cmd, ds_cli_version_cmd, ds_cli_help_cmd;
extern const ds_flag_cmd *const ds_cli_commands[];
/* dstrain --help: the commands. */
void ds_cli_usage(FILE *f);
/* dstrain help [--markdown] [COMMAND]: the commands, or a command's --help;
 * --markdown: the configuration reference in docs/cli.md. */
int ds_cli_help(int argc, char **argv);
/* An unknown command named, the nearest suggested, a hint; returns 2. */
int ds_cli_unknown_command(const char *cmd);

#endif
