# fp16 and bf16 training on the CPU (emulated 16-bit storage) against fp32:
# learns alike, fp16's dynamic loss scale skips early overflows and an
# injected Inf, checkpoints hold the FP32 master copy.
add_test(NAME half_precision_train
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/precision/test_half_train.sh $<TARGET_FILE:dstrain>
                 ${CMAKE_CURRENT_BINARY_DIR}/half_precision_train)
set_tests_properties(half_precision_train PROPERTIES TIMEOUT 300)
