# features_vs_torch: peer/features_cases.py writes signals with torch.stft's
# log spectrogram and numpy log-mel / MFCC references; features_torch_check
# runs our FFTW featurizer on them (max abs error <= 1e-4).
add_executable(features_torch_check peer/features_torch_check.c)
target_link_libraries(features_torch_check PRIVATE dstrain_testutil)
# sh -c SCRIPT NAME PYTHON CASES_PY CHECK OUT: fails when either step fails.
add_test(NAME features_vs_torch
         COMMAND sh -c "\"$1\" \"$2\" \"$4\" && \"$3\" \"$4\"" features_vs_torch
                 ${DSTRAIN_PEER_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/peer/features_cases.py
                 $<TARGET_FILE:features_torch_check> ${CMAKE_CURRENT_BINARY_DIR}/features_cases.h5)
set_tests_properties(features_vs_torch PROPERTIES TIMEOUT 300 ENVIRONMENT "OMP_NUM_THREADS=1")
