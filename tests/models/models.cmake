# The model families beyond DeepSpeech2, on the CPU:
#   model_ds1   ds1-small trains on synthetic data (loss falling), dropout on
#               and resumed exactly, the ds1 preset's published size, bad
#               config fields refused by name.
#   model_convnets  jasper-small and w2l-small train on synthetic data (loss
#               falling), dropout on every conv layer resumed exactly,
#               export/import records log-mel inputs, the Jasper and
#               Wav2Letter+ presets' published sizes, bad fields refused.
#   model_families_learn  jasper-small, w2l-small and DS1's graph each train
#               on the mini corpus demo_job made (fixture demo_corpus) and end
#               with a dev loss under half an untrained model's and a dev
#               CER below its CER.
# Their gradients against finite differences are in
# unit/test_gradcheck_model.c, their new ops in unit/test_ops_dense.c and
# unit/test_ops_conv_bn.c, with parity cases beside.
add_test(NAME model_ds1
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/models/test_ds1.sh $<TARGET_FILE:dstrain>
                 ${CMAKE_CURRENT_BINARY_DIR}/model_ds1 ${DSTRAIN_PEER_PYTHON})
set_tests_properties(model_ds1 PROPERTIES TIMEOUT 600 ENVIRONMENT "OPENBLAS_NUM_THREADS=1")
add_test(NAME model_convnets
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/models/test_convnets.sh $<TARGET_FILE:dstrain>
                 ${CMAKE_CURRENT_BINARY_DIR}/model_convnets ${DSTRAIN_PEER_PYTHON})
set_tests_properties(model_convnets PROPERTIES TIMEOUT 600 ENVIRONMENT "OPENBLAS_NUM_THREADS=1")
add_test(NAME model_families_learn
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/models/test_families_learn.sh
                 $<TARGET_FILE:dstrain> ${CMAKE_CURRENT_BINARY_DIR}/model_families_learn
                 ${CMAKE_CURRENT_BINARY_DIR}/demo/main/features)
# the slow tier (label slow): about 9 minutes on a 2-core machine, left out
# of scripts/test.sh's default run (CI) and run by scripts/test.sh --all
set_tests_properties(model_families_learn PROPERTIES TIMEOUT 900 FIXTURES_REQUIRED demo_corpus
                     LABELS slow)
