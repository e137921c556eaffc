# dataset_bad_inputs: h5py writes valid feature files (float16 and float32)
# in dstrain's layout and one damaged copy per kind of corruption;
# dataset_open_check, our reader, must read the valid ones value for value
# and name the file and the field for each damaged one. h5py must also read
# a file our writer made (float16 as '<f2'). test_dataset covers the C side.
add_executable(dataset_open_check unit/dataset_open_check.c)
target_link_libraries(dataset_open_check PRIVATE dstrain_data)
add_test(NAME dataset_bad_inputs
         COMMAND ${DSTRAIN_PEER_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/peer/dataset_bad_files.py
                 --check $<TARGET_FILE:dataset_open_check>
                 --dir ${CMAKE_CURRENT_BINARY_DIR}/dataset_bad_inputs)
set_tests_properties(dataset_bad_inputs PROPERTIES TIMEOUT 120)
