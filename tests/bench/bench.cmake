# bench/loader.sh end to end on a tiny synthesized mini corpus (16 train
# utterances; needs espeak-ng and sox like mini_corpus): bench_loader under
# mpiexec with 1 and 2 ranks must exit 0 and print a total row per run.
add_test(NAME bench_loader_smoke
         COMMAND bash -c "out=$(bash \"$0\") || exit 1; printf '%s\\n' \"$out\"; [ \"$(grep -c '^ *total ' <<<\"$out\")\" -eq 2 ]"
                 ${CMAKE_SOURCE_DIR}/bench/loader.sh)
set_tests_properties(bench_loader_smoke PROPERTIES TIMEOUT 60 ENVIRONMENT
  "MINI_TRAIN=16;MINI_DEV=4;MINI_TEST=4;RANKS=1 2;BATCH=4;EPOCHS=2;BENCH_LOADER=$<TARGET_FILE:bench_loader>;DSTRAIN=$<TARGET_FILE:dstrain>")
