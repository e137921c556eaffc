# libFuzzer harnesses (tests/fuzz/), built only in a DSTRAIN_FUZZ build:
# scripts/fuzz.sh configures one with clang in build-fuzz/, runs each harness
# for a bounded time and says how many inputs it tried. Here each harness
# also becomes a ctest that replays its committed corpus (seeds and every
# input that once crashed it): fuzz_corpus_<harness>.
if(DSTRAIN_FUZZ)
  add_library(dstrain_fuzz_file STATIC fuzz/fuzz_file.c)
  target_link_libraries(dstrain_fuzz_file PUBLIC dstrain_core)
  target_include_directories(dstrain_fuzz_file PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/fuzz)
  foreach(harness dataset checkpoint config pickle pytorch audio)
    add_executable(fuzz_${harness} fuzz/fuzz_${harness}.c)
    target_link_libraries(fuzz_${harness} PRIVATE dstrain_fuzz_file dstrain_data dstrain_pytorch)
    target_link_options(fuzz_${harness} PRIVATE -fsanitize=fuzzer)
    add_test(NAME fuzz_corpus_${harness}
             COMMAND fuzz_${harness} -runs=0 -artifact_prefix=${CMAKE_CURRENT_BINARY_DIR}/
                     ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/corpus/${harness})
    set_tests_properties(fuzz_corpus_${harness} PROPERTIES TIMEOUT 300 LABELS fuzz
      ENVIRONMENT "LSAN_OPTIONS=suppressions=${CMAKE_CURRENT_SOURCE_DIR}/sanitize/lsan.supp;ASAN_OPTIONS=fast_unwind_on_malloc=0;OPENBLAS_NUM_THREADS=1")
  endforeach()
endif()
