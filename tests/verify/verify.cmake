# Whole-file verification of feature files (issue 13): `dstrain prep --verify`
# and `dstrain info` on a real file made by prep, and on damaged copies of it
# (flipped bytes under the checksums, truncation, contents rewritten through
# h5py so that only the consistency checks can catch them, not HDF5 at all,
# missing). Skips, saying why, when the python has no h5py.
add_test(NAME verify_features
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/verify/test_verify_features.sh
                 $<TARGET_FILE:dstrain> ${DSTRAIN_PEER_PYTHON})
set_tests_properties(verify_features PROPERTIES TIMEOUT 300 SKIP_RETURN_CODE 77
                     ENVIRONMENT "OPENBLAS_NUM_THREADS=1")
