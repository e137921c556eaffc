# The NCCL transport (mpi/transport_nccl.c).
#
# Everywhere (CI included):
#   nccl_refused      --allreduce nccl and bench_allreduce --transport nccl
#                     refused with a clear message where they cannot run (the
#                     CPU backend; no GPU; one GPU for two ranks), and the
#                     nccl line of --version;
#   stop_rank_mpi     a rank frozen with SIGSTOP ends every rank within
#                     --timeout (the MPI watchdog; the mechanics of the NCCL
#                     test below);
#   test_op_watch     (tests/unit) the deadline thread that bounds NCCL's waits.
# One GPU (label cuda; "skipped: ..." and 77 without one):
#   nccl_one_rank     test_nccl_transport at 1 rank: NCCL equals the MPI
#                     transport bit for bit (FP32 and FP64), no blocking read
#                     in the step, timing filled, a BatchNorm sum does not
#                     wait behind a gradient bucket held back;
#   nccl_ranks_1      bench_allreduce --transport nccl at 1 rank, #wrong 0.
# Several GPUs (labels cuda and multi-gpu: NCCL refuses two ranks on one GPU,
# so these skip with fewer GPUs than ranks; run them with `ctest -L multi-gpu`
# on a machine with 2 or 4 GPUs):
#   nccl_transport_np2, _np4  test_nccl_transport: NCCL vs MPI (bit for bit at
#                     2 ranks, within rounding at 4), exact integer sums; a
#                     sum overlaps a bucket in flight (timing counts it);
#                     a sum waits for the compute stream's work queued
#                     before it (a copy held back by a host function);
#   nccl_ranks_2, _4  bench_allreduce #wrong 0; dstrain train FP64 with nccl
#                     equals mpi (1e-12), ranks bit-identical, timing logged;
#   nccl_timeout      a rank stops taking part: the transport's watches alone
#                     end the job within --timeout, naming rank, bucket (or
#                     BatchNorm sum) and operation (test_nccl_transport
#                     --stall, --stall-sum);
#   stop_rank_nccl    dstrain train with a rank frozen by SIGSTOP ends within
#                     --timeout.
# DSTRAIN_TEST_PYTHON: the checks' numpy and h5py, from the peer checks'
# Python (a GPU machine's /usr/bin/python3 may lack them)
set(NCCL_TEST_ENV "OPENBLAS_NUM_THREADS=1;OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMPI_MCA_rmaps_base_oversubscribe=1;DSTRAIN_TEST_PYTHON=${DSTRAIN_PEER_PYTHON}")

add_test(NAME nccl_refused
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/nccl/test_nccl_refused.sh $<TARGET_FILE:dstrain>
                 $<TARGET_FILE:bench_allreduce> ${CMAKE_CURRENT_BINARY_DIR}/nccl_refused)
add_test(NAME stop_rank_mpi
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/nccl/test_stop_rank.sh $<TARGET_FILE:dstrain>
                 ${CMAKE_CURRENT_BINARY_DIR}/stop_rank_mpi cpu mpi)
set_tests_properties(nccl_refused stop_rank_mpi PROPERTIES TIMEOUT 600 ENVIRONMENT "${NCCL_TEST_ENV}")

if(DSTRAIN_NCCL)
  add_executable(test_nccl_transport nccl/test_nccl_transport.c)
  # CUDA::cudart: the overlap case holds a bucket back with cudaLaunchHostFunc
  target_link_libraries(test_nccl_transport PRIVATE dstrain_testutil CUDA::cudart)

  add_test(NAME nccl_one_rank COMMAND ${MPIEXEC_EXECUTABLE} -np 1 $<TARGET_FILE:test_nccl_transport>)
  add_test(NAME nccl_ranks_1
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/nccl/test_nccl_ranks.sh $<TARGET_FILE:dstrain>
                   $<TARGET_FILE:bench_allreduce> ${CMAKE_CURRENT_BINARY_DIR}/nccl_ranks_1 1)
  set_tests_properties(nccl_one_rank nccl_ranks_1 PROPERTIES TIMEOUT 600 SKIP_RETURN_CODE 77
                       LABELS cuda ENVIRONMENT "${NCCL_TEST_ENV}")

  set(multi)
  foreach(np 2 4)
    add_test(NAME nccl_transport_np${np}
             COMMAND ${MPIEXEC_EXECUTABLE} -np ${np} $<TARGET_FILE:test_nccl_transport>)
    add_test(NAME nccl_ranks_${np}
             COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/nccl/test_nccl_ranks.sh $<TARGET_FILE:dstrain>
                     $<TARGET_FILE:bench_allreduce> ${CMAKE_CURRENT_BINARY_DIR}/nccl_ranks_${np} ${np})
    list(APPEND multi nccl_transport_np${np} nccl_ranks_${np})
  endforeach()
  add_test(NAME nccl_timeout
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/nccl/test_nccl_timeout.sh
                   $<TARGET_FILE:test_nccl_transport> ${CMAKE_CURRENT_BINARY_DIR}/nccl_timeout)
  add_test(NAME stop_rank_nccl
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/nccl/test_stop_rank.sh $<TARGET_FILE:dstrain>
                   ${CMAKE_CURRENT_BINARY_DIR}/stop_rank_nccl cuda nccl)
  # gpus-N: the GPUs a test needs (one per rank); scripts/gpu-check.sh
  # selects a multi-gpu test only where that many are visible
  set_tests_properties(${multi} nccl_timeout stop_rank_nccl PROPERTIES TIMEOUT 900
                       SKIP_RETURN_CODE 77 ENVIRONMENT "${NCCL_TEST_ENV}")
  set_tests_properties(nccl_transport_np2 nccl_ranks_2 nccl_timeout stop_rank_nccl PROPERTIES
                       LABELS "cuda;multi-gpu;gpus-2")
  set_tests_properties(nccl_transport_np4 nccl_ranks_4 PROPERTIES LABELS "cuda;multi-gpu;gpus-4")
endif()
