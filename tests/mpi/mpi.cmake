# Data parallelism over real MPI ranks (oversubscribed on small machines).
add_test(NAME data_parallel
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/mpi/test_data_parallel.sh $<TARGET_FILE:dstrain>
                 ${CMAKE_CURRENT_BINARY_DIR}/data_parallel)
set_tests_properties(data_parallel PROPERTIES TIMEOUT 600)

# Dynamic loss scaling on 4 ranks: exact under power-of-two scales, and an
# Inf in one rank's gradients skips the step on every rank and halves the scale.
add_test(NAME loss_scale_ranks
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/mpi/test_loss_scale.sh $<TARGET_FILE:dstrain>
                 ${CMAKE_CURRENT_BINARY_DIR}/loss_scale_ranks)
set_tests_properties(loss_scale_ranks PROPERTIES TIMEOUT 300)

# --reduce-dtype: gradients summed across ranks in another dtype.
add_test(NAME reduce_dtype_ranks
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/mpi/test_reduce_dtype.sh $<TARGET_FILE:dstrain>
                 ${CMAKE_CURRENT_BINARY_DIR}/reduce_dtype_ranks)
set_tests_properties(reduce_dtype_ranks PROPERTIES TIMEOUT 300)

# The gradient reducer sums in the gradients' dtype unless a wire dtype is
# set (a zeroed config's wire is float32, the enum's 0): random FP64 and FP32
# gradients on 1 and 2 ranks, bit for bit; then a float32 wire.
add_executable(test_reducer_sum mpi/test_reducer_sum.c)
target_link_libraries(test_reducer_sum PRIVATE dstrain_testutil)
foreach(np 1 2)
  add_test(NAME reducer_sum_np${np}
           COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${np} ${MPIEXEC_PREFLAGS}
                   $<TARGET_FILE:test_reducer_sum>)
  set_tests_properties(reducer_sum_np${np} PROPERTIES TIMEOUT 120 ENVIRONMENT
                       "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMPI_MCA_rmaps_base_oversubscribe=1")
endforeach()

# Validation shared across ranks equals one rank's: exactly the same counts
# (WER, CER), the loss to rounding; 1, 2 and 4 ranks over 6 batches.
add_executable(test_eval_ranks mpi/test_eval_ranks.c)
target_link_libraries(test_eval_ranks PRIVATE dstrain_testutil dstrain_app)
foreach(np 1 2 4)
  add_test(NAME eval_ranks_np${np}
           COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${np} ${MPIEXEC_PREFLAGS}
                   $<TARGET_FILE:test_eval_ranks>)
  set_tests_properties(eval_ranks_np${np} PROPERTIES TIMEOUT 120 RUN_SERIAL TRUE ENVIRONMENT
                       "OPENBLAS_NUM_THREADS=1;OMP_NUM_THREADS=1;OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMPI_MCA_rmaps_base_oversubscribe=1")
endforeach()

# Every rank sees rank 0's files: a rank given a node-local checkpoint folder
# or another feature file (its own mount namespace) is refused, naming it;
# a requeue that finds no checkpoint says so.
add_test(NAME shared_files_ranks
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/mpi/test_shared_files.sh $<TARGET_FILE:dstrain>
                 ${DSTRAIN_PEER_PYTHON})
set_tests_properties(shared_files_ranks PROPERTIES TIMEOUT 300 SKIP_RETURN_CODE 77)

# A resume on 4 ranks reads the checkpoint once (rank 0; strace counts each
# rank's opens) and ends where a straight run does, bit for bit.
add_test(NAME resume_once_ranks
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/mpi/test_resume_once.sh $<TARGET_FILE:dstrain>)
set_tests_properties(resume_once_ranks PROPERTIES TIMEOUT 300 SKIP_RETURN_CODE 77
                     ENVIRONMENT "OPENBLAS_NUM_THREADS=1")

# Ranks agree before they start: every option the start-up agreement covers
# (app/rank_agree.c) given otherwise to one rank, on 2 and on 3 ranks, is
# refused by every rank within seconds naming the option and both values;
# the same options train.
add_test(NAME rank_agree_ranks
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/mpi/test_rank_agree.sh $<TARGET_FILE:dstrain>
                 ${DSTRAIN_PEER_PYTHON})
set_tests_properties(rank_agree_ranks PROPERTIES TIMEOUT 300)

# Start-up choices (cuDNN's algorithms): every rank runs rank 0's; a rank
# that would have chosen otherwise says so, one that lists other shapes is
# named on every rank; the model's creation passes the backend's choices
# through the hook before sizing the work (issue 34, item 5).
add_executable(test_choice_agree mpi/test_choice_agree.c)
target_link_libraries(test_choice_agree PRIVATE dstrain_testutil)
foreach(np 1 3)
  add_test(NAME choice_agree_np${np}
           COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${np} ${MPIEXEC_PREFLAGS}
                   $<TARGET_FILE:test_choice_agree>)
  set_tests_properties(choice_agree_np${np} PROPERTIES TIMEOUT 120 ENVIRONMENT
                       "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMPI_MCA_rmaps_base_oversubscribe=1")
endforeach()
