# A cluster of 3 nodes simulated on this machine (cluster/sim_cluster.sh:
# network, UTS and mount namespaces per node, a bridge in a namespace of its
# own, Open MPI's rsh agent cluster/node_rsh): 4 ranks as 2+2 on 2 nodes and
# as 2+1+1 on 3 nodes give checkpoints bit-identical to 4 ranks on one node,
# and within 1e-12 of one rank at the same global batch (FP64); the cluster
# is torn down whatever happens. Not root, no ip/unshare/nsenter, or
# namespaces refused: skipped (77), saying why.
add_test(NAME cluster_equiv
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cluster/test_cluster_equiv.sh $<TARGET_FILE:dstrain>
                 ${CMAKE_CURRENT_BINARY_DIR}/cluster_equiv ${DSTRAIN_PEER_PYTHON})
set_tests_properties(cluster_equiv PROPERTIES TIMEOUT 300 SKIP_RETURN_CODE 77 LABELS cluster ENVIRONMENT
                     "OPENBLAS_NUM_THREADS=1;OMP_NUM_THREADS=1;OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMPI_MCA_rmaps_base_oversubscribe=1")

# A node lost mid-training (its ranks killed or stopped, its link down) ends
# the job, mpiexec included, within --timeout or Open MPI's keepalive plus a
# margin, naming the rank or daemon on node2, with nothing left on the nodes;
# a node-local checkpoint folder refused once, naming node2's ranks. Uses
# jobs/lib/ompi_multinode.sh as the launchers do. About 50 s.
add_test(NAME cluster_faults
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cluster/test_cluster_faults.sh $<TARGET_FILE:dstrain>
                 ${CMAKE_CURRENT_BINARY_DIR}/cluster_faults)
set_tests_properties(cluster_faults PROPERTIES TIMEOUT 300 SKIP_RETURN_CODE 77 LABELS cluster ENVIRONMENT
                     "OPENBLAS_NUM_THREADS=1;OMP_NUM_THREADS=1;OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMPI_MCA_rmaps_base_oversubscribe=1")

# jobs/mpiexec/train.sh on 2 nodes (MPIEXEC=cluster/mpiexec_on_cluster): BLAS
# and OpenMP threads per node (its cores / its ranks), every DSTRAIN_*
# variable on node2's ranks; SIGTERM to the launcher's process group and
# SIGUSR1 to the launcher: a checkpoint, exit 75, no rank left. About 25 s.
add_test(NAME cluster_launcher
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cluster/test_cluster_launcher.sh $<TARGET_FILE:dstrain>
                 ${CMAKE_CURRENT_BINARY_DIR}/cluster_launcher)
set_tests_properties(cluster_launcher PROPERTIES TIMEOUT 300 SKIP_RETURN_CODE 77 LABELS cluster ENVIRONMENT
                     "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMPI_MCA_rmaps_base_oversubscribe=1")
