/* main.c - the dstrain command line: dispatches subcommands. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <string.h>

#include "cli.h"

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
        ds_cli_usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h")) {
        ds_cli_usage(stdout);
        return 0;
    }
    if (!strcmp(cmd, "--version"))
        cmd = "version";
    for (int i = 0; ds_cli_commands[i]; i++)   /* the commands and their tables: cli_common.c */
        if (!strcmp(cmd, ds_cli_commands[i]->name))
            return ds_cli_commands[i]->run(argc - 1, argv + 1);
    return ds_cli_unknown_command(cmd);   /* the nearest suggested */
}
