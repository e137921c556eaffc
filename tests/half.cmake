# NAME_vs_numpy: peer/NAME_cases.py writes conversion cases with numpy's
# results to an HDF5 file and unit/NAME_numpy_check.c replays them through
# our code, bit for bit (half: F16 and BF16 to and from float and double).
# NAME_vs_numpy_detects runs the same check on a copy with planted wrong
# values, which the check must find, one for one.
function(numpy_case_test name)
  add_executable(${name}_numpy_check unit/${name}_numpy_check.c)
  target_link_libraries(${name}_numpy_check PRIVATE dstrain_testutil)
  # sh -c SCRIPT NAME PYTHON CASES_PY CHECK OUT [--corrupt]: fails when either step fails.
  add_test(NAME ${name}_vs_numpy
           COMMAND sh -c "\"$1\" \"$2\" \"$4\" && \"$3\" \"$4\"" ${name}_vs_numpy
                   ${DSTRAIN_PEER_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/peer/${name}_cases.py
                   $<TARGET_FILE:${name}_numpy_check> ${CMAKE_CURRENT_BINARY_DIR}/${name}_cases.h5)
  add_test(NAME ${name}_vs_numpy_detects
           COMMAND sh -c "\"$1\" \"$2\" \"$4\" --corrupt && \"$3\" \"$4\"" ${name}_vs_numpy_detects
                   ${DSTRAIN_PEER_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/peer/${name}_cases.py
                   $<TARGET_FILE:${name}_numpy_check> ${CMAKE_CURRENT_BINARY_DIR}/${name}_cases_corrupt.h5)
  set_tests_properties(${name}_vs_numpy ${name}_vs_numpy_detects PROPERTIES TIMEOUT 300)
endfunction()
numpy_case_test(half)
