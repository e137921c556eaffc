# The backends' side of `dstrain bench` (issue 12).
#
# test_profile_backend: memory limit, range timing, peak rate and kernel
# profile on one step of the tiny preset (tests/unit/test_profile_backend.c).
# Its plain run (tests/CMakeLists.txt) is the CPU's; test_profile_backend_cuda
# runs it on the cuda backend, where it prints "skipped: ..." and exits 77
# without a GPU, as the other *_cuda tests (unit/backends.cmake). On a GPU it
# fails when the backend was built without CUPTI (no kernel profile).
# test_gpu_peak: the CUDA backend's peak FLOP/s table against NVIDIA's
# datasheet figures, on the host (cuda/gpu_peak.c is built everywhere).
target_include_directories(test_profile_backend PRIVATE ${CJSON_INCLUDE_DIR})
target_link_libraries(test_profile_backend PRIVATE ${CJSON_LIBRARY})
target_include_directories(test_gpu_peak PRIVATE ${CMAKE_SOURCE_DIR}/cuda)
# test_reduce_split: the split rule of the CUDA backend's two-pass
# reductions, on the host (cuda/reduce_split.c is built everywhere).
target_include_directories(test_reduce_split PRIVATE ${CMAKE_SOURCE_DIR}/cuda)
# test_reduce_split_cuda: those reductions on the GPU at shapes that split
# (BatchNorm, dense bias gradient) against the CPU, twice for the same bits;
# "skipped" (77) without a device or without the CUDA backend.
set_tests_properties(test_reduce_split_cuda PROPERTIES SKIP_RETURN_CODE 77 LABELS cuda)
if(DSTRAIN_HAVE_CUDA)
  add_test(NAME test_profile_backend_cuda COMMAND test_profile_backend cuda)
  set_tests_properties(test_profile_backend_cuda PROPERTIES TIMEOUT 600 SKIP_RETURN_CODE 77
                       LABELS cuda ENVIRONMENT "OPENBLAS_NUM_THREADS=1")
endif()
