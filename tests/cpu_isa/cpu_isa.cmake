# Every CPU instruction-set path (src/cpu_isa.h) this host can run, forced
# with DSTRAIN_CPU_ISA: the op tests, gradient checks, the PyTorch peer
# checks and the bit-identity across thread counts, once per path. The host's
# default path is what the plain tests run, so here it skips (77), as does a
# path the host lacks (tests/cpu_isa/with_isa.sh says which).
# cpu_isa_refused: a path the host lacks, or no path's name, is refused cleanly.
set(DSTRAIN_ISA_TESTS test_ops_rnn test_ops_conv_bn test_ops_dense test_ctc test_optim
    test_gradcheck_model)
set(with_isa bash ${CMAKE_CURRENT_SOURCE_DIR}/cpu_isa/with_isa.sh)
foreach(isa IN LISTS DSTRAIN_CPU_ISAS)
  set(isa_tests)
  foreach(name ${DSTRAIN_ISA_TESTS})
    add_test(NAME ${name}_isa_${isa} COMMAND ${with_isa} ${isa} $<TARGET_FILE:dstrain>
                                            $<TARGET_FILE:${name}>)
    list(APPEND isa_tests ${name}_isa_${isa})
  endforeach()
  foreach(name ctc optim)
    add_test(NAME ${name}_vs_torch_isa_${isa}
             COMMAND ${with_isa} ${isa} $<TARGET_FILE:dstrain>
                     sh -c "\"$1\" \"$2\" \"$4\" && \"$3\" \"$4\"" ${name}_vs_torch_isa_${isa}
                     ${DSTRAIN_PEER_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/peer/${name}_cases.py
                     $<TARGET_FILE:${name}_torch_check>
                     ${CMAKE_CURRENT_BINARY_DIR}/${name}_cases_isa_${isa}.h5)
    list(APPEND isa_tests ${name}_vs_torch_isa_${isa})
  endforeach()
  add_test(NAME peer_torch_isa_${isa}
           COMMAND ${with_isa} ${isa} $<TARGET_FILE:dstrain> ${DSTRAIN_PEER_PYTHON}
                   ${CMAKE_CURRENT_SOURCE_DIR}/peer/peer_check.py --peer-dump $<TARGET_FILE:peer_dump>)
  add_test(NAME threads_same_result_isa_${isa}
           COMMAND ${with_isa} ${isa} $<TARGET_FILE:dstrain>
                   bash ${CMAKE_CURRENT_SOURCE_DIR}/threads/same_on_any_threads.sh
                   $<TARGET_FILE:peer_dump> ${PROJECT_SOURCE_DIR}/configs ${DSTRAIN_PEER_PYTHON})
  list(APPEND isa_tests peer_torch_isa_${isa} threads_same_result_isa_${isa})
  set_tests_properties(${isa_tests} PROPERTIES TIMEOUT 600 SKIP_RETURN_CODE 77 LABELS cpu-isa
                       ENVIRONMENT "OPENBLAS_NUM_THREADS=1;OMP_NUM_THREADS=1")
endforeach()
add_test(NAME cpu_isa_refused
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cpu_isa/refused.sh $<TARGET_FILE:dstrain>)
set_tests_properties(cpu_isa_refused PROPERTIES TIMEOUT 120 LABELS cpu-isa)
