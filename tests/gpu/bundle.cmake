# The GPU machine's bundle (scripts/gpu-bundle.sh): a fresh CPU build that
# uses only the bundle's libraries configures, compiles and runs CPU tests
# (MPI included), with the system's copies of the bundled files hidden in a
# private mount namespace. Skipped (77) until scripts/gpu-bundle.sh has run.
add_test(NAME bundle_cpu_build
         COMMAND bash ${CMAKE_SOURCE_DIR}/scripts/gpu-bundle-test.sh
                 ${CMAKE_CURRENT_BINARY_DIR}/bundle_cpu_build)
set_tests_properties(bundle_cpu_build PROPERTIES TIMEOUT 900 SKIP_RETURN_CODE 77 LABELS bundle)
