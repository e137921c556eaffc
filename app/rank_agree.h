/* rank_agree.h - the ranks of a run agree on their options before any
 * collective depends on them: a rank given another model, batch, seed,
 * data or binary is refused on every rank, naming the option, the ranks
 * and their values, instead of crashing in a broadcast of another size or
 * waiting on a collective the others never make. */
#ifndef DS_RANK_AGREE_H
#define DS_RANK_AGREE_H

#include "train_run.h"

/* Every rank's options that must match (the model and its config's hash,
 * precision, batch, seed, steps, the optimizer, what changes the sequence
 * of collectives, the data's fingerprints, feature settings and counts, the
 * presence of --val, the binary's version and build) gathered on every rank
 * (one allgather of the lengths, one of the texts) and compared with rank
 * 0's. After the data is opened (each rank's fingerprint is of its own
 * file) and before the model is made or anything sized by the options is
 * sent; every rank of r calls it, and every rank fails alike. */
ds_status ds_rank_agree_train(const run_state *r);

/* 1 once ds_rank_agree_train has refused the run: every rank refused it,
 * none waits on another, so the job ends by MPI_Finalize, not MPI_Abort
 * (which can kill a rank before it has said why). */
int ds_rank_agree_refused(void);
/* Another verdict every rank learned alike (rank 0's refusal of the
 * checkpoint folder or of the checkpoint to resume, broadcast) refused the
 * run: ds_rank_agree_refused is 1 from now on. */
void ds_rank_agree_refused_by_all(void);

#endif
