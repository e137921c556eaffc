# dstrain bench end to end on the CPU (tests/cli/test_bench.sh): JSON/CSV,
# warm-up exclusion, forward vs train, --profile layers, --batch max under a
# memory cap, two ranks.
add_test(NAME bench_cli COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli/test_bench.sh $<TARGET_FILE:dstrain>)
set_tests_properties(bench_cli PROPERTIES TIMEOUT 300)
