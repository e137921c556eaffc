# parity_ops (tests/parity/): every op of a backend's table for one dtype
# against the CPU's float64 table on the same inputs, one table line per case.
# The CUDA runs print "skipped: ..." and exit 77 until that backend is built
# in and a GPU is present. parity_detects_fault perturbs one element of
# rnn_fwd's output inside the harness: the run must fail and name the op.
file(GLOB PARITY_SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/parity/*.c)
add_executable(parity_ops ${PARITY_SOURCES})
# dstrain_dist: the CUDA plugin, which it may load, takes the NCCL
# transport's needs (world, watchdog, MPI) from the program
target_link_libraries(parity_ops PRIVATE dstrain_dist)
dstrain_plugin_host(parity_ops)

# float16/bfloat16: the CPU's emulated tables (ops_half.inc) and the CUDA
# backend's 16-bit tables (cuda/README.md), each against cpu float64.
set(PARITY_DTYPES_cpu float32 float64 float16 bfloat16)
set(PARITY_DTYPES_cuda float32 float64 float16 bfloat16)
foreach(backend cpu cuda)
  foreach(dtype ${PARITY_DTYPES_${backend}})
    add_test(NAME parity_${backend}_${dtype} COMMAND parity_ops ${backend} ${dtype})
    # NVIDIA_TF32_OVERRIDE=0: the float32 tolerance assumes IEEE float32 products
    set_tests_properties(parity_${backend}_${dtype} PROPERTIES TIMEOUT 600
                         SKIP_RETURN_CODE 77 LABELS "parity;${backend}"
                         ENVIRONMENT "OPENBLAS_NUM_THREADS=1;NVIDIA_TF32_OVERRIDE=0")
  endforeach()
endforeach()

# sh -c SCRIPT NAME PARITY_OPS: exit 1 (not a crash, not a skip) and a FAIL line for rnn_fwd.
add_test(NAME parity_detects_fault
         COMMAND sh -c "out=$(\"$1\" cpu float32 --inject rnn_fwd); rc=$?; printf '%s\\n' \"$out\"; [ $rc -eq 1 ] && printf '%s\\n' \"$out\" | grep -Eq '^  rnn_fwd .* FAIL$'"
                 parity_detects_fault $<TARGET_FILE:parity_ops>)
set_tests_properties(parity_detects_fault PROPERTIES TIMEOUT 600 LABELS parity
                     ENVIRONMENT "OPENBLAS_NUM_THREADS=1")

# ops_lookup_table: cuda/README.md's table of each op's CPU body, CUDA twin,
# parity case and peer check holds for every op of ds_ops (sources only).
add_test(NAME ops_lookup_table
         COMMAND ${DSTRAIN_PEER_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/parity/ops_lookup_check.py
                 ${CMAKE_SOURCE_DIR})
set_tests_properties(ops_lookup_table PROPERTIES TIMEOUT 60 LABELS parity)
