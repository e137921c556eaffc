# cross_aarch64: the project cross-compiled for aarch64 (scripts/cross-aarch64.sh:
# Debian's gcc-aarch64-linux-gnu, an arm64 sysroot unpacked from Debian's
# packages) with the NEON path checked in dstrain's code, and the CPU op
# tests run under qemu-user: about a minute and a half on 2 cores (the
# sysroot's 121 MB download, into the build folder, included). It installs
# nothing on the host (--no-install: scripts/install-deps.sh brings the
# cross compiler and qemu). Skipped (77) where those are missing or apt
# cannot fetch the arm64 packages, except in CI (CI=true), where that fails
# the run.
set(cross_tests "^(test_ops_conv_bn|test_ops_dense|test_ops_rnn|test_ctc|test_optim|test_gradcheck_model|parity_cpu_float32)$")
add_test(NAME cross_aarch64
         COMMAND bash -c "AARCH64_BUILD_DIR=\"$1\" AARCH64_SYSROOT=\"$2\" bash \"$0\" --no-install --tests \"$3\" -- -j 2
                          rc=$?
                          if [ $rc -eq 77 ] && [ \"$CI\" = true ]; then
                            echo 'cross_aarch64: cannot run in CI, where apt reaches Debian: failing'; exit 1
                          fi
                          exit $rc"
                 ${CMAKE_SOURCE_DIR}/scripts/cross-aarch64.sh ${CMAKE_CURRENT_BINARY_DIR}/aarch64-build
                 ${CMAKE_CURRENT_BINARY_DIR}/aarch64-sysroot "${cross_tests}")
# alone (RUN_SERIAL): qemu keeps both cores busy for a minute, which would
# skew the tests that time things beside it (bench_scaling_model_ranks)
set_tests_properties(cross_aarch64 PROPERTIES TIMEOUT 900 SKIP_RETURN_CODE 77 LABELS cross
                     RUN_SERIAL TRUE)
