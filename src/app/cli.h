/* cli.h - subcommands of the dstrain program; each returns the exit code
 * (0 ok, 1 failure, 2 bad usage). */
#ifndef DS_CLI_H
#define DS_CLI_H

#include "config.h"

int ds_cli_train(int argc, char **argv);
int ds_cli_info(int argc, char **argv);
int ds_cli_version(void);
int ds_cli_eval(int argc, char **argv);
int ds_cli_transcribe(int argc, char **argv);
int ds_cli_prep(int argc, char **argv);

/* --model NAME or --config FILE into cfg; prints the error and returns 1 on
 * failure. */
int ds_cli_load_model(const char *preset, const char *config_file, ds_model_cfg *cfg);
/* Prints the status and recorded error as "dstrain CMD: ...". */
int ds_cli_fail(const char *cmd, ds_status st);

#endif
