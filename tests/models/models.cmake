# The model families beyond DeepSpeech2, on the CPU:
#   model_ds1   ds1-small trains on synthetic data (loss falling), dropout on
#               and resumed exactly, the ds1 preset's published size, bad
#               config fields refused by name.
# Their gradients against finite differences are in
# unit/test_gradcheck_model.c, their new ops in unit/test_ops_dense.c and
# unit/test_ops_conv_bn.c, with parity cases beside.
add_test(NAME model_ds1
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/models/test_ds1.sh $<TARGET_FILE:dstrain>
                 ${CMAKE_CURRENT_BINARY_DIR}/model_ds1 ${DSTRAIN_PEER_PYTHON})
set_tests_properties(model_ds1 PROPERTIES TIMEOUT 600 ENVIRONMENT "OPENBLAS_NUM_THREADS=1")
