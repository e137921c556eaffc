# kill -9 of one rank of 4 mid-training (issue 13): mpiexec and every other
# rank exit non-zero within the --timeout bound, 10 times over (the rank
# killed varies, 0 included), zero hangs; the time to exit is printed
# (tests/faults/test_kill_rank.sh). Skipped (77) without mpiexec.
add_test(NAME faults_kill_rank
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/faults/test_kill_rank.sh $<TARGET_FILE:dstrain>)
set_tests_properties(faults_kill_rank PROPERTIES TIMEOUT 300 SKIP_RETURN_CODE 77
                     ENVIRONMENT "OPENBLAS_NUM_THREADS=1")
