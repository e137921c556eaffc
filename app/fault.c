/* fault.c - injected faults, for the tests of what the other ranks do when
 * one dies or hangs, and of a checkpoint cut short (see train_run.h). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fault_seam.h"
#include "train_run.h"

static long killsave_step = -1;

void ds_fault_arm_save(long step)
{
    /* armed only now, once the save before has ended: a background write
     * of an earlier step must not be the one killed */
    if (step == killsave_step)
        ds_h5_fault_kill_after(4096);
}

/* The fault asked for at this step (DS_POISON_*), after doing it where it
 * is not one of the step's. */
static int fault_at(int my_rank, long step)
{
    const char *f = getenv("DSTRAIN_FAULT");
    char kind[16];
    int rank;
    long at, last;
    const int n = f ? sscanf(f, "%15[a-z]:%d:%ld-%ld", kind, &rank, &at, &last) : 0;
    if (n == 3)
        last = at;
    if (n < 3 || rank != my_rank || step < at || step > last)
        return DS_POISON_NONE;
    fprintf(stderr, "dstrain: rank %d: injected fault (%s) at step %ld\n", rank, kind, step);
    if (!strcmp(kind, "inf"))
        return DS_POISON_GRAD;
    if (!strcmp(kind, "nan"))
        return DS_POISON_LOSS;
    if (!strcmp(kind, "killsave")) {   /* SIGKILL 4 KiB into this step's checkpoint write */
        killsave_step = step;
        return DS_POISON_NONE;
    }
    if (!strcmp(kind, "stop")) {   /* SIGUSR1 at this very step, as a scheduler's warning */
        raise(SIGUSR1);
        return DS_POISON_NONE;
    }
    if (!strcmp(kind, "exit"))
        _exit(7);
    if (!strcmp(kind, "pause")) {   /* stopped here until SIGCONT: a test changes the files meanwhile */
        raise(SIGSTOP);
        return DS_POISON_NONE;
    }
    if (!strcmp(kind, "slowsave")) {   /* from now on each checkpoint write takes 0.5 s longer */
        ds_h5_fault_slow_writes(0.5);
        return DS_POISON_NONE;
    }
    if (!strcmp(kind, "slow")) {   /* the step takes half a second longer (bench's tests) */
        usleep(500000);
        return DS_POISON_NONE;
    }
    for (;;)
        pause();
}

int ds_fault_inject(int my_rank, long step, ds_stepper *s)
{
    const int kind = fault_at(my_rank, step);
    if (kind == DS_POISON_NONE)
        return 0;
    if (s)
        ds_stepper_poison_next(s, kind);
    return 1;
}
