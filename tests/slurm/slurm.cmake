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

# Slurm on several nodes (issue 39): slurm/test_slurm_nodes.sh builds a
# 2-node Slurm on a cluster simulated on this machine (cluster/sim_cluster.sh:
# node1 and node2, each its own network, UTS and mount namespaces and its own
# /tmp and /dev/shm, 10.213.39.1 and .2 on a bridge; the rest of the file
# tree shared). munged runs inside node1 with its socket in the test's folder
# (outside /tmp, so every node reaches it); slurm.conf comes from
# slurm/slurm_conf.sh, the one-node test's choices, with
# SlurmctldHost=node1(10.213.39.1) and NodeName=node1/node2 at their
# addresses (a spool, pid file and log per slurmd by %n); slurmctld runs
# inside node1 and a slurmd inside each node (`slurmd -D`: the node's host
# name picks its NodeName), all children of the test; Slurm's commands run
# inside node1. Then train.sbatch (srun --mpi=pmix) on --nodes=2
# --ntasks-per-node=1, train-mpirun.sbatch on 2 nodes x 2 tasks, each checked
# by rank 0's 'ranks on 2 nodes: ...' line, and a preemption with requeue for
# each script, ending bit-identical to the same run uninterrupted on the same
# two nodes. On exit the jobs are cancelled, the daemons stopped and the
# cluster torn down. About a minute. Not root, no Slurm, or namespaces
# refused: skipped (77).
add_test(NAME slurm_nodes
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/slurm/test_slurm_nodes.sh $<TARGET_FILE:dstrain>
                 ${CMAKE_CURRENT_BINARY_DIR}/slurm_nodes)
set_tests_properties(slurm_nodes PROPERTIES TIMEOUT 600 SKIP_RETURN_CODE 77 LABELS cluster ENVIRONMENT
                     "OPENBLAS_NUM_THREADS=1;OMP_NUM_THREADS=1;OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMPI_MCA_rmaps_base_oversubscribe=1")
