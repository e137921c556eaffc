# The dstrain command line, run as a user would.
add_test(NAME cli COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli/test_cli.sh $<TARGET_FILE:dstrain>)
set_tests_properties(cli PROPERTIES TIMEOUT 300)
# --val-every: validations after the right steps, on 1 and 2 ranks
add_test(NAME val_every COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli/test_val_every.sh
                                $<TARGET_FILE:dstrain> ${DSTRAIN_PEER_PYTHON})
set_tests_properties(val_every PROPERTIES TIMEOUT 120)
