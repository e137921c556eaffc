/* main.c - the dstrain command line: dispatches subcommands. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

static void usage(FILE *f)
{
    fprintf(f,
            "dstrain - data-parallel DeepSpeech2 training\n"
            "\n"
            "usage: dstrain COMMAND [options]     (dstrain COMMAND --help for its options)\n"
            "\n"
            "commands:\n"
            "  prep        LibriSpeech or a CSV manifest -> HDF5 feature file\n"
            "  train       train a model on feature files or synthetic data\n"
            "  eval        WER and CER of a checkpoint on a feature file\n"
            "  transcribe  text of audio files from a checkpoint\n"
            "  info        presets, a model config, a feature file or a checkpoint\n"
            "\n"
            "  --version  version, backends and library versions compiled in\n"
            "  --help     this text\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(cmd, "--version") || !strcmp(cmd, "version"))
        return ds_cli_version();
    if (!strcmp(cmd, "train"))
        return ds_cli_train(argc - 1, argv + 1);
    if (!strcmp(cmd, "prep"))
        return ds_cli_prep(argc - 1, argv + 1);
    if (!strcmp(cmd, "eval"))
        return ds_cli_eval(argc - 1, argv + 1);
    if (!strcmp(cmd, "transcribe"))
        return ds_cli_transcribe(argc - 1, argv + 1);
    if (!strcmp(cmd, "info"))
        return ds_cli_info(argc - 1, argv + 1);
    fprintf(stderr, "dstrain: unknown command \"%s\"\n\n", cmd);
    usage(stderr);
    return 2;
}
