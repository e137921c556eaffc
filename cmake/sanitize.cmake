# Sanitizer and fuzzing builds (scripts/sanitize.sh, scripts/fuzz.sh). Both
# are off in the normal build; included before any target is made, so the
# flags reach every library and program of the build that turns them on.
#
# DSTRAIN_SANITIZE: AddressSanitizer (with LeakSanitizer) and
#   UndefinedBehaviorSanitizer, every finding fatal, frames kept for stacks.
# DSTRAIN_FUZZ (clang only): DSTRAIN_SANITIZE plus libFuzzer's coverage
#   instrumentation everywhere, and the harnesses of tests/fuzz/fuzz.cmake.
option(DSTRAIN_SANITIZE "build with -fsanitize=address,undefined (scripts/sanitize.sh)" OFF)
option(DSTRAIN_FUZZ "build the libFuzzer harnesses of tests/fuzz/ (clang; scripts/fuzz.sh)" OFF)

if(DSTRAIN_FUZZ)
  if(NOT CMAKE_C_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "DSTRAIN_FUZZ needs clang (libFuzzer is part of it): "
                        "configure with CC=clang, as scripts/fuzz.sh does")
  endif()
  set(DSTRAIN_SANITIZE ON)
  # coverage feedback for the fuzzer in our code; the harnesses link libFuzzer.
  # With the sanitizers clang cannot vectorise the `omp simd` loops and says
  # so for each: not a finding, only noise.
  add_compile_options($<$<COMPILE_LANGUAGE:C>:-fsanitize=fuzzer-no-link>
                      $<$<COMPILE_LANGUAGE:C>:-Wno-pass-failed>)
  # the conventional switch: checksums computed but not enforced, so mutated
  # attributes reach the code that reads them (src/h5_seal.c)
  add_compile_definitions(FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION)
endif()

if(DSTRAIN_SANITIZE)
  # gcc's "undefined" leaves out float-cast-overflow (a double outside int's
  # range cast to int), which clang's has and the config fuzzer found
  set(DSTRAIN_UBSAN undefined)
  if(CMAKE_C_COMPILER_ID STREQUAL "GNU")
    set(DSTRAIN_UBSAN undefined,float-cast-overflow)
  endif()
  set(DSTRAIN_SANITIZE_FLAGS -fsanitize=address,${DSTRAIN_UBSAN} -fno-sanitize-recover=all
                             -fno-omit-frame-pointer)
  foreach(flag ${DSTRAIN_SANITIZE_FLAGS})
    add_compile_options($<$<COMPILE_LANGUAGE:C>:${flag}>)
  endforeach()
  add_link_options(-fsanitize=address,${DSTRAIN_UBSAN})
  message(STATUS "dstrain: sanitizers ON (${DSTRAIN_SANITIZE_FLAGS}); fuzzing ${DSTRAIN_FUZZ}")
endif()
