# The C tests that take a backend by name (argv[1], else $DSTRAIN_TEST_BACKEND,
# else cpu; the torch checks and peer_dump take it after their own
# arguments). Their plain runs above use the CPU. Where the CUDA toolkit is
# found they run again as NAME_cuda on the "cuda" backend: until that backend
# is built in (DS_HAVE_CUDA_BACKEND), or without a GPU, each prints
# "skipped: ..." and exits 77, which ctest reports as skipped.
set(DSTRAIN_BACKEND_TESTS test_ops_rnn test_ops_conv_bn test_ops_dense test_ctc test_optim
    test_gradcheck_model test_checkpoint test_overfit test_step_alloc test_convert
    test_batch_scalars test_step_graphs)

function(backend_tests backend)
  foreach(name ${DSTRAIN_BACKEND_TESTS})
    add_test(NAME ${name}_${backend} COMMAND ${name} ${backend})
    set_tests_properties(${name}_${backend} PROPERTIES TIMEOUT 600 SKIP_RETURN_CODE 77
                         LABELS ${backend} ENVIRONMENT "OPENBLAS_NUM_THREADS=1")
  endforeach()
  add_test(NAME test_config_limits_${backend}
           COMMAND test_config_limits --dstrain $<TARGET_FILE:dstrain> ${backend})
  foreach(name ctc optim)
    # as peer_case_test, with the backend after the cases file
    add_test(NAME ${name}_vs_torch_${backend}
             COMMAND sh -c "\"$1\" \"$2\" \"$4\" && \"$3\" \"$4\" \"$5\"" ${name}_vs_torch_${backend}
                     ${DSTRAIN_PEER_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/peer/${name}_cases.py
                     $<TARGET_FILE:${name}_torch_check>
                     ${CMAKE_CURRENT_BINARY_DIR}/${name}_cases_${backend}.h5 ${backend})
  endforeach()
  add_test(NAME peer_torch_${backend}
           COMMAND ${DSTRAIN_PEER_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/peer/peer_check.py
                   --peer-dump $<TARGET_FILE:peer_dump> --backend ${backend})
  set_tests_properties(test_config_limits_${backend} ctc_vs_torch_${backend}
                       optim_vs_torch_${backend} peer_torch_${backend}
                       PROPERTIES TIMEOUT 600 SKIP_RETURN_CODE 77 LABELS ${backend}
                       ENVIRONMENT "OPENBLAS_NUM_THREADS=1;OMP_NUM_THREADS=1")
endfunction()

if(DSTRAIN_HAVE_CUDA)
  backend_tests(cuda)
  # the recurrent op under cuDNN's persistent kernels (--rnn-algo persist,
  # and auto's timed choice) held to the standard algorithm's bounds
  foreach(algo persist auto)
    add_test(NAME test_ops_rnn_cuda_${algo} COMMAND test_ops_rnn cuda)
    set_tests_properties(test_ops_rnn_cuda_${algo} PROPERTIES TIMEOUT 600 SKIP_RETURN_CODE 77
                         LABELS cuda ENVIRONMENT "OPENBLAS_NUM_THREADS=1;DSTRAIN_TEST_RNN_ALGO=${algo}")
  endforeach()
  # the capturable path (--cuda-graphs: one unidirectional call per direction
  # over the padded length, the lengths read on the device only) under the
  # standard and the persistent kernels, held to the same bounds, and its
  # calls captured once and replayed on other lengths
  foreach(algo standard persist)
    set(name test_ops_rnn_cuda_capturable)
    if(NOT algo STREQUAL "standard")
      string(APPEND name _${algo})
    endif()
    add_test(NAME ${name} COMMAND test_ops_rnn cuda)
    set_tests_properties(${name} PROPERTIES TIMEOUT 600 SKIP_RETURN_CODE 77 LABELS cuda
                         ENVIRONMENT
                         "OPENBLAS_NUM_THREADS=1;DSTRAIN_TEST_RNN_ALGO=${algo};DSTRAIN_TEST_RNN_CAPTURABLE=1")
  endforeach()
  # the model's rnn.1 run alone on its real inputs: the GPU in 16 bits
  # beside the CPU's emulation, under three batch shapes, default math and
  # the FP32 op (issue 34, item 6)
  foreach(dt float16 bfloat16)
    add_test(NAME test_rnn_rerun_cuda_${dt} COMMAND test_rnn_rerun cuda ${dt})
    set_tests_properties(test_rnn_rerun_cuda_${dt} PROPERTIES TIMEOUT 600 SKIP_RETURN_CODE 77
                         LABELS cuda ENVIRONMENT "OPENBLAS_NUM_THREADS=1")
  endforeach()
endif()
# the dump itself and the CPU emulation's bound, in bfloat16 too (the plain
# run is float16)
add_test(NAME test_rnn_rerun_bfloat16 COMMAND test_rnn_rerun cpu bfloat16)
set_tests_properties(test_rnn_rerun_bfloat16 PROPERTIES TIMEOUT 300 ENVIRONMENT "OPENBLAS_NUM_THREADS=1")
