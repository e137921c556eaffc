/* test_reduce_default.c - which gradient reduction a run gets unless it
 * names one: NCCL with --device cuda where this build has NCCL (the card's
 * design: gradients summed on the GPUs, never staged through the host),
 * MPI on the CPU and wherever NCCL is not built in; and the names the
 * banner and --allreduce use. */
#include <string.h>

#include "reduce.h"
#include "testutil.h"

int main(void)
{
    T_CHECK(ds_reduce_default("cpu") == DS_REDUCE_MPI, "cpu: not mpi");
    T_CHECK(ds_reduce_default(NULL) == DS_REDUCE_MPI, "no device: not mpi");
#ifdef DS_HAVE_NCCL
    T_CHECK(ds_reduce_default("cuda") == DS_REDUCE_NCCL, "cuda with NCCL built in: not nccl");
#else
    T_CHECK(ds_reduce_default("cuda") == DS_REDUCE_MPI, "cuda without NCCL: not mpi");
#endif
    ds_reduce_kind k;
    for (ds_reduce_kind want = DS_REDUCE_MPI; want <= DS_REDUCE_NCCL; want++)
        T_CHECK(ds_reduce_kind_parse(ds_reduce_kind_name(want), &k) == DS_OK && k == want,
                "%s does not parse back", ds_reduce_kind_name(want));
    return t_finish(__FILE__);
}
