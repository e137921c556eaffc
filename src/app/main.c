/* main.c - the dstrain command line: dispatches subcommands. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
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
            "  bench       time training steps: batch sizes, precisions, layers, kernels\n"
            "\n"
            "  --version  version, backends and library versions compiled in\n"
            "  --help     this text\n");
}

/* OpenMP threads spin a while before they sleep when they wait at a
 * barrier. libgomp's default spin is long: when other processes share the
 * cores, a spinning thread takes the core of the thread it waits for (the
 * small preset's step took 37 s instead of 0.3 s on 2 busy cores). A short
 * spin keeps the quiet machine's speed (318 ms, against 287 ms spinning
 * without end and 594 ms sleeping at once) and stays usable when the cores
 * are shared (0.8 s). libgomp reads the setting once, when it loads, so it
 * is set here and the program started again; a setting the user made is
 * left alone. */
static void spin_briefly(char **argv)
{
    if (getenv("OMP_WAIT_POLICY") || getenv("GOMP_SPINCOUNT"))
        return;
    if (setenv("GOMP_SPINCOUNT", "1000", 1) == 0)
        execv("/proc/self/exe", argv);   /* returns only on failure: go on with the default */
}

int main(int argc, char **argv)
{
    spin_briefly(argv);
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
    if (!strcmp(cmd, "bench"))
        return ds_cli_bench(argc - 1, argv + 1);
    if (!strcmp(cmd, "info"))
        return ds_cli_info(argc - 1, argv + 1);
    fprintf(stderr, "dstrain: unknown command \"%s\"\n\n", cmd);
    usage(stderr);
    return 2;
}
