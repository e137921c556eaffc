# The Slurm job scripts on a real one-node Slurm (slurmctld, slurmd and munged
# started by the test on this host; slurm-wlm, munge and libpmix-dev installed
# with apt-get when missing): jobs/slurm/train.sbatch (srun --mpi=pmix) and
# train-mpirun.sbatch with 2 tasks, each also preempted mid-run (SIGUSR1,
# checkpoint, requeue, resume: the same parameters as uninterrupted), and
# jobs/slurm/sweep.sh at 1 and 2 ranks.
# Exit 77 (not root, no Slurm) is a skip.
add_test(NAME slurm_train
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/slurm/test_slurm.sh $<TARGET_FILE:dstrain>)
set_tests_properties(slurm_train PROPERTIES TIMEOUT 900 SKIP_RETURN_CODE 77
                     ENVIRONMENT "OPENBLAS_NUM_THREADS=1")
