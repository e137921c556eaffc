# dataset_bad_inputs: h5py writes valid feature files (float16 and float32)
# in dstrain's layout and one damaged copy per kind of corruption;
# dataset_open_check, our reader, must read the valid ones value for value
# and name the file and the field for each damaged one. h5py must also read
# a file our writer made (float16 as '<f2'). test_dataset covers the C side.
add_executable(dataset_open_check data/dataset_open_check.c)
target_link_libraries(dataset_open_check PRIVATE dstrain_data)
add_test(NAME dataset_bad_inputs
         COMMAND ${DSTRAIN_PEER_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/peer/dataset_bad_files.py
                 --check $<TARGET_FILE:dataset_open_check>
                 --dir ${CMAKE_CURRENT_BINARY_DIR}/dataset_bad_inputs)
set_tests_properties(dataset_bad_inputs PROPERTIES TIMEOUT 120)
# Issue 27, the loader that outruns the GPU. test_loader_threads: batches bit
# for bit the same with 1 and N reader threads, depth 2 and 6, SpecAugment
# on, a resume and a failure mid-epoch; every finite float16 widened exactly,
# by F16C and (DSTRAIN_CPU_ISA=baseline) by the portable path.
# test_read_amplification: bytes read per feature byte (/proc/self/io) near
# 1 for the chunk-aligned layout, and above the bound for 1024-row chunks.
foreach(t test_loader_threads test_read_amplification)
  add_executable(${t} data/${t}.c)
  target_link_libraries(${t} PRIVATE dstrain_testutil)
  add_test(NAME ${t} COMMAND ${t})
  set_tests_properties(${t} PROPERTIES TIMEOUT 300 ENVIRONMENT "OPENBLAS_NUM_THREADS=1")
endforeach()
add_test(NAME test_loader_threads_portable COMMAND test_loader_threads)
set_tests_properties(test_loader_threads_portable PROPERTIES TIMEOUT 300
                     ENVIRONMENT "OPENBLAS_NUM_THREADS=1;DSTRAIN_CPU_ISA=baseline")
# The same with HDF5 serialised by ds_h5_lock (as a build without thread
# safety is): the readers take turns, the batches stay the same.
add_test(NAME test_loader_threads_h5lock COMMAND test_loader_threads)
set_tests_properties(test_loader_threads_h5lock PROPERTIES TIMEOUT 300
                     ENVIRONMENT "OPENBLAS_NUM_THREADS=1;DSTRAIN_H5_SERIALIZE=1")
