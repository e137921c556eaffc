# bench/allreduce.sh on a few small sizes with 2 ranks (a smoke test, not a
# measurement): bench_allreduce, reducer and plain MPI, float and double,
# buckets of 0.01 MiB so that the larger sizes cut into several buckets with a
# short last one. Every run must exit 0 and print its 6 rows (8 B .. 256 KiB
# x 8), and every row's #wrong (the last column) must be 0.
add_test(NAME bench_allreduce_smoke
         COMMAND bash -c "out=$(bash \"$0\") || exit 1; printf '%s\\n' \"$out\"; [ \"$(grep -c '^# Avg bus bandwidth' <<<\"$out\")\" -eq 4 ] || exit 1; awk '!/^#/ && NF { rows++; if ($NF != \"0\") bad++ } END { exit !(rows == 24 && bad == 0) }' <<<\"$out\""
                 ${CMAKE_SOURCE_DIR}/bench/allreduce.sh)
set_tests_properties(bench_allreduce_smoke PROPERTIES TIMEOUT 120 ENVIRONMENT
  "RANKS=2;OPS=reducer mpi;TYPES=float double;MIN_BYTES=8;MAX_BYTES=1M;FACTOR=8;ITERS=3;WARMUP=1;BUCKET_MB=0.01;BENCH_ALLREDUCE=$<TARGET_FILE:bench_allreduce>;MPIEXEC=${MPIEXEC_EXECUTABLE}")
