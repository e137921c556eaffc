/* cli.h - subcommands of the dstrain program; each returns the exit code
 * (0 ok, 1 failure, 2 bad usage). */
#ifndef DS_CLI_H
#define DS_CLI_H

#include "checkpoint.h"
#include "config.h"
#include "model.h"

int ds_cli_train(int argc, char **argv);
int ds_cli_info(int argc, char **argv);
int ds_cli_version(void);
int ds_cli_eval(int argc, char **argv);
int ds_cli_transcribe(int argc, char **argv);
int ds_cli_prep(int argc, char **argv);
int ds_cli_bench(int argc, char **argv);

/* --model NAME or --config FILE into cfg; prints the error and returns 1 on
 * failure. */
int ds_cli_load_model(const char *preset, const char *config_file, ds_model_cfg *cfg);
/* Whole-string number in [lo, hi] (NaN refused) for --flag of dstrain cmd;
 * prints the error and returns -1 otherwise. */
int ds_cli_num(const char *cmd, const char *flag, const char *s, double lo, double hi, double *out);
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

#endif
