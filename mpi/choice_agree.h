/* choice_agree.h - every rank runs rank 0's start-up choices.
 *
 * A backend times its candidates at start-up (cuDNN's convolution
 * algorithms) and two GPUs of one job may time them differently: the ranks
 * would then round differently, and their replicas drift apart. Rank 0's
 * list is broadcast and every rank runs it; a rank that would have chosen
 * otherwise says so. The ranks must list the same choices (the same shapes,
 * in the same order: the same options give them); a rank whose list differs
 * is named, and every rank returns the same error, none is left waiting. */
#ifndef DS_CHOICE_AGREE_H
#define DS_CHOICE_AGREE_H

#include <stddef.h>

#include "backend.h"
#include "world.h"

typedef struct {
    int changed;          /* this rank's choices that differed from rank 0's */
    int ranks_changed;    /* ranks with at least one such choice, on every rank */
    char note[512];       /* "" or this rank's differences, named (the first few) */
} ds_choice_verdict;

/* Collective on w->comm, bounded by the watchdog: c [n] (this rank's) is
 * replaced by rank 0's. DS_ERR_ARG on every rank when some rank's n or a
 * choice's what differs from rank 0's. */
ds_status ds_choice_agree(ds_world *w, ds_choice *c, int n, ds_choice_verdict *v);

#endif
