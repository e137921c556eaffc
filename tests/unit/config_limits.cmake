# Models at the limits of config validation (8 conv, 32 recurrent, 8 hidden
# FC layers, lookahead 256) build and train a step, and `dstrain info` on
# such a config file prints them: the test gets the dstrain binary.
add_test(NAME test_config_limits
         COMMAND test_config_limits --dstrain $<TARGET_FILE:dstrain>)
set_tests_properties(test_config_limits PROPERTIES TIMEOUT 600 ENVIRONMENT "OPENBLAS_NUM_THREADS=1")
