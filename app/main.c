/* main.c - the dstrain command line: dispatches subcommands. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <string.h>

#include "blas_limits.h"
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
static int spin_briefly(void)
{
    if (getenv("OMP_WAIT_POLICY") || getenv("GOMP_SPINCOUNT"))
        return 0;
    return setenv("GOMP_SPINCOUNT", "1000", 1) == 0;
}

int main(int argc, char **argv)
{
    /* a file-size limit (ulimit -f) is a write error (EFBIG) that every
     * writer reports, naming its file and removing its temporary, rather
     * than a SIGXFSZ that kills the process and leaves the temporary */
    signal(SIGXFSZ, SIG_IGN);
    const int again = spin_briefly() | ds_blas_limits_one_thread();
    if (again)
        execv("/proc/self/exe", argv);   /* returns only on failure: go on as it is */
    if (!ds_blas_limits_fit())
        return 1;
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
