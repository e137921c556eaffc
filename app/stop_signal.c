/* stop_signal.c - SIGTERM and SIGUSR1 (a scheduler ending or warning the
 * job) ask the run to stop after the current step, save and exit with
 * DS_EXIT_PREEMPTED, instead of dying with nothing saved. */
#include <signal.h>
#include <string.h>

#include "train_run.h"

static volatile sig_atomic_t requested;   /* the signal's number, 0: none */

static void on_signal(int sig) { requested = sig; }

void ds_stop_signals_install(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;   /* a read or wait in progress goes on */
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGUSR1, &sa, NULL);
}

int ds_stop_signal(void) { return requested; }
