#!/bin/sh
# rank_threads.sh COMMAND [ARGS...] - run by the launcher for each rank, on
# the rank's node (jobs/mpiexec/train.sh): sets the rank's BLAS and OpenMP
# threads to the cores this node gives it divided by the ranks on this node,
# at least 1, then runs COMMAND. A hostfile's nodes may differ in cores and
# in ranks (slots), which the launching node cannot see.
#   cores: nproc (the CPUs this process may run on: a cgroup's or a
#          binding's limit too)
#   ranks on the node: OMPI_COMM_WORLD_LOCAL_SIZE (Open MPI), MPI_LOCALNRANKS
#          (MPICH, Intel MPI), SLURM_NTASKS_PER_NODE, else 1
# OPENBLAS_NUM_THREADS and OMP_NUM_THREADS already set are kept;
# OMP_NUM_THREADS defaults to OPENBLAS_NUM_THREADS. With DSTRAIN_JOB_RECORD
# set, rank 0 writes Open MPI's job id into that file.
ranks=${OMPI_COMM_WORLD_LOCAL_SIZE:-${MPI_LOCALNRANKS:-${SLURM_NTASKS_PER_NODE:-1}}}
case $ranks in ''|*[!0-9]*|0) ranks=1 ;; esac
cores=$(nproc 2>/dev/null || getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1)
per=$((cores / ranks))
[ "$per" -ge 1 ] || per=1
export OPENBLAS_NUM_THREADS="${OPENBLAS_NUM_THREADS:-$per}"
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-$OPENBLAS_NUM_THREADS}"
# DSTRAIN_JOB_RECORD: rank 0 writes the job's Open MPI id there, so that the
# launcher can remove what this job leaves on a node whose daemon was killed
if [ -n "${DSTRAIN_JOB_RECORD:-}" ] && [ "${OMPI_COMM_WORLD_RANK:-}" = 0 ] && [ -n "${OMPI_MCA_ess_base_jobid:-}" ]; then
  echo "$OMPI_MCA_ess_base_jobid" >"$DSTRAIN_JOB_RECORD" 2>/dev/null || true
fi
exec "$@"
