# The CPU ops on more than one thread: the same training step on 1 and 2
# threads must agree bit for bit (tests/threads/same_on_any_threads.sh), and
# the op tests that split work over threads run again on 2 (the plain runs
# use one).
add_test(NAME threads_same_result
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/threads/same_on_any_threads.sh
                 $<TARGET_FILE:peer_dump> ${PROJECT_SOURCE_DIR}/configs ${DSTRAIN_PEER_PYTHON})
set_tests_properties(threads_same_result PROPERTIES TIMEOUT 300)
foreach(name test_ops_conv_bn test_ops_rnn test_optim test_gradcheck_model)
  add_test(NAME ${name}_threads2 COMMAND ${name})
  set_tests_properties(${name}_threads2 PROPERTIES TIMEOUT 600
                       ENVIRONMENT "OPENBLAS_NUM_THREADS=2;OMP_NUM_THREADS=2")
endforeach()
