# half_vs_numpy (peer_case_test, tests/CMakeLists.txt): every F16 pattern and
# millions of rounding cases against numpy, bit for bit. half_vs_numpy_detects
# runs the same check on a copy with planted wrong values, which the check
# must find, one for one.
peer_case_test(half numpy)
add_test(NAME half_vs_numpy_detects
         COMMAND sh -c "\"$1\" \"$2\" \"$4\" --corrupt && \"$3\" \"$4\"" half_vs_numpy_detects
                 ${DSTRAIN_PEER_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/peer/half_cases.py
                 $<TARGET_FILE:half_numpy_check> ${CMAKE_CURRENT_BINARY_DIR}/half_cases_corrupt.h5)
set_tests_properties(half_vs_numpy_detects PROPERTIES TIMEOUT 300)
