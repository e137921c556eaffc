/* choice_agree.c - rank 0's start-up choices run by all; see choice_agree.h. */
#include "choice_agree.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { NAMED = 3 };   /* differences named in a note; more are counted */

/* ints [w->size] = every rank's x, on every rank. */
static ds_status gather_int(ds_world *w, int x, int *all, const char *what)
{
    ds_world_wait_begin(w, what);
    const int rc = MPI_Allgather(&x, 1, MPI_INT, all, 1, MPI_INT, w->comm);
    ds_world_wait_end(w);
    return ds_world_check(rc, what);
}

/* The first rank whose entry of all [size] differs from rank 0's; -1 none. */
static int first_differing(const int *all, int size)
{
    for (int r = 1; r < size; r++)
        if (all[r] != all[0])
            return r;
    return -1;
}

/* rank 0's table [n] into mine, as bytes of one ds_choice per element */
static ds_status bcast_table(ds_world *w, ds_choice *table, int n)
{
    MPI_Datatype t;
    DS_TRY(ds_world_check(MPI_Type_contiguous((int)sizeof(ds_choice), MPI_BYTE, &t), "MPI_Type_contiguous"));
    ds_status st = ds_world_check(MPI_Type_commit(&t), "MPI_Type_commit");
    if (st == DS_OK)
        st = ds_world_bcast(w, table, n, t, "rank 0's start-up choices");
    MPI_Type_free(&t);
    return st;
}

/* Entries of mine [n] whose codes differ from rank 0's, noted. */
static int note_changes(const ds_choice *mine, const ds_choice *first, int n, char *note, size_t size)
{
    int changed = 0;
    size_t used = 0;
    note[0] = 0;
    for (int i = 0; i < n; i++) {
        if (!memcmp(mine[i].code, first[i].code, sizeof mine[i].code))
            continue;
        if (changed++ < NAMED && used < size) {
            const int k = snprintf(note + used, size - used, "%s%s: would have run %s, runs rank 0's %s",
                                   used ? "; " : "", mine[i].what, mine[i].how, first[i].how);
            used += k > 0 ? (size_t)k : 0;
        }
    }
    if (changed > NAMED && used < size)
        snprintf(note + used, size - used, "; and %d more", changed - NAMED);
    if (changed && used >= size && size > 4)
        memcpy(note + size - 4, "...", 4);
    return changed;
}

ds_status ds_choice_agree(ds_world *w, ds_choice *c, int n, ds_choice_verdict *v)
{
    *v = (ds_choice_verdict){0};
    if (w->size == 1)
        return DS_OK;
    int *all = malloc((size_t)w->size * sizeof *all);
    ds_choice *first = calloc(n > 0 ? (size_t)n : 1, sizeof *first);
    ds_status st = all && first ? DS_OK : DS_FAIL(DS_ERR_MEM, "start-up choices of %d ranks", w->size);
    if (st == DS_OK)
        st = gather_int(w, n, all, "the ranks' counts of start-up choices");
    int r;
    if (st == DS_OK && (r = first_differing(all, w->size)) >= 0)
        st = DS_FAIL(DS_ERR_ARG, "rank %d made %d start-up choices (algorithms) and rank 0 made %d: the "
                     "ranks planned different layers; every rank needs the same model, batch and "
                     "--max-frames", r, all[r], all[0]);
    if (st == DS_OK) {
        memcpy(first, c, (size_t)n * sizeof *first);
        st = bcast_table(w, first, n);
    }
    int mismatch = -1;   /* the first entry whose shape differs from rank 0's */
    for (int i = 0; st == DS_OK && i < n && mismatch < 0; i++)
        if (strncmp(c[i].what, first[i].what, sizeof c[i].what))
            mismatch = i;
    if (st == DS_OK)
        st = gather_int(w, mismatch, all, "the ranks' start-up choices compared");
    if (st == DS_OK && (r = first_differing(all, w->size)) >= 0) {
        const int i = all[r];   /* rank r's first mismatch: the shapes rank 0 lists there */
        st = DS_FAIL(DS_ERR_ARG, "rank %d's start-up choice %d is for another shape than rank 0's "
                     "(rank 0: %.96s): the ranks planned different layers", r, i, first[i].what);
    }
    if (st == DS_OK) {
        v->changed = note_changes(c, first, n, v->note, sizeof v->note);
        st = gather_int(w, v->changed > 0, all, "the ranks' changed choices counted");
    }
    for (int k = 0; st == DS_OK && k < w->size; k++)
        v->ranks_changed += all[k];
    if (st == DS_OK)
        memcpy(c, first, (size_t)n * sizeof *c);
    free(all);
    free(first);
    return st;
}
