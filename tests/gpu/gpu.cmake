# The whole model, the training command and data parallelism on the GPU.
#
# model_gpu_vs_cpu[_f64]: one batch on the cuda backend against the CPU in
# FP64 (loss, logits, every gradient, BatchNorm statistics), then 20 SGD steps
# on both (every parameter). model_cpu32_vs_cpu64 runs the same comparison
# with the CPU in FP32 as the tested side, so CI without a GPU exercises the
# comparison itself.
# gpu_out_of_memory: a batch no GPU holds fails cleanly, naming the limits.
# fp16_small_gpu: the small preset 300 steps in fp16 and bf16 within 5% of fp32.
# data_parallel_gpu: the 1/2/4-rank FP64 equivalence of tests/mpi with every
# rank on one GPU (the MPI transport's staged path; NCCL refuses shared GPUs).
# Without a CUDA device (backend not built, or none visible) the cuda ones
# print "skipped: no CUDA device" and exit 77: ctest reports them skipped.
add_test(NAME model_cpu32_vs_cpu64 COMMAND test_model_gpu_vs_cpu cpu float32)
# fp16 and bf16 on the CPU's emulation: the tolerances of the 16-bit GPU runs
# (derived from the unit roundoff in the test's header) proven on CPU figures.
add_test(NAME model_cpu16_vs_cpu64 COMMAND test_model_gpu_vs_cpu cpu float16)
add_test(NAME model_cpubf16_vs_cpu64 COMMAND test_model_gpu_vs_cpu cpu bfloat16)
set_tests_properties(model_cpu32_vs_cpu64 model_cpu16_vs_cpu64 model_cpubf16_vs_cpu64 PROPERTIES
                     TIMEOUT 300 ENVIRONMENT "OPENBLAS_NUM_THREADS=1")

# gpu_check_dry_run: scripts/gpu-check.sh --dry-run over this build's test
# list (no GPU needed): the first profile's selection (every 1-GPU
# correctness test, no multi-gpu one), the caps within each budget, results
# written after every part; skipped (77) where no CUDA test is registered.
add_test(NAME gpu_check_dry_run
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/gpu/gpu_check_dry.sh
                 ${CMAKE_SOURCE_DIR}/scripts/gpu-check.sh ${CMAKE_BINARY_DIR}
                 ${CMAKE_CURRENT_BINARY_DIR}/gpu_check_dry_run)
set_tests_properties(gpu_check_dry_run PROPERTIES TIMEOUT 120 SKIP_RETURN_CODE 77)

if(DSTRAIN_HAVE_CUDA)
  add_test(NAME model_gpu_vs_cpu COMMAND test_model_gpu_vs_cpu cuda float32)
  add_test(NAME model_gpu_vs_cpu_f64 COMMAND test_model_gpu_vs_cpu cuda float64)
  add_test(NAME model_gpu_vs_cpu_f16 COMMAND test_model_gpu_vs_cpu cuda float16)
  add_test(NAME model_gpu_vs_cpu_bf16 COMMAND test_model_gpu_vs_cpu cuda bfloat16)
  add_test(NAME gpu_out_of_memory
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/gpu/out_of_memory.sh $<TARGET_FILE:dstrain>
                   ${CMAKE_CURRENT_BINARY_DIR}/gpu_out_of_memory)
  set_tests_properties(model_gpu_vs_cpu model_gpu_vs_cpu_f64 model_gpu_vs_cpu_f16
                       model_gpu_vs_cpu_bf16 gpu_out_of_memory PROPERTIES
                       TIMEOUT 600 SKIP_RETURN_CODE 77 LABELS cuda
                       ENVIRONMENT "OPENBLAS_NUM_THREADS=1")
  # it fills the GPU on purpose: alone, so that no test beside it meets a
  # false out-of-memory under ctest -j
  set_tests_properties(gpu_out_of_memory PROPERTIES RUN_SERIAL TRUE)
  add_test(NAME fp16_small_gpu
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/gpu/fp16_small.sh $<TARGET_FILE:dstrain>
                   ${CMAKE_CURRENT_BINARY_DIR}/fp16_small_gpu)
  set_tests_properties(fp16_small_gpu PROPERTIES TIMEOUT 600 SKIP_RETURN_CODE 77 LABELS cuda)
  add_test(NAME data_parallel_gpu
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/mpi/test_data_parallel.sh $<TARGET_FILE:dstrain>
                   ${CMAKE_CURRENT_BINARY_DIR}/data_parallel_gpu cuda)
  set_tests_properties(data_parallel_gpu PROPERTIES TIMEOUT 600 SKIP_RETURN_CODE 77 LABELS cuda
                       ENVIRONMENT "OPENBLAS_NUM_THREADS=1;OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMPI_MCA_rmaps_base_oversubscribe=1;DSTRAIN_TEST_PYTHON=${DSTRAIN_PEER_PYTHON}")
endif()
