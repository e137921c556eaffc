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
