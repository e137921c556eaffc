# Bad corpora give clear errors or counted skips; mpiexec -np 2 prep = 1 rank.
add_test(NAME prep_inputs
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/data/test_prep_inputs.sh $<TARGET_FILE:dstrain>
                 ${CMAKE_SOURCE_DIR}/data/make-mini-librispeech.sh ${CMAKE_CURRENT_BINARY_DIR}/prep_inputs)
set_tests_properties(prep_inputs PROPERTIES TIMEOUT 600)
