# Faults a user or a machine inflicts (issue 13), each a regression test:
# bad numbers and paths, a failed prep over a good file, corrupted
# checkpoints (tests/faults/test_bad_input.sh), disk faults on real file
# systems (test_full_disk.sh: mounts small tmpfs; skipped, saying why, where
# it cannot): a disk that fills while a checkpoint is written, a read-only
# checkpoint directory refused before the first step, one remounted
# read-only mid-run (stop and continue), prep onto a full disk and into a
# read-only directory (the old --out kept, no crash, no debris), and a
# scheduler's SIGTERM/SIGUSR1 on 1 and 2
# ranks (test_preempt.sh), and runs of non-finite gradients against
# --max-bad-steps on 1 and 2 ranks (test_bad_steps.sh), and exact resume:
# straight against stopped-and-resumed runs bit for bit, another rank count
# at the same global batch, a checkpoint cut short by SIGKILL, damaged and
# foreign checkpoints (test_resume.sh).
add_test(NAME faults_bad_input
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/faults/test_bad_input.sh $<TARGET_FILE:dstrain>
                 ${DSTRAIN_PEER_PYTHON})
add_test(NAME faults_full_disk
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/faults/test_full_disk.sh $<TARGET_FILE:dstrain>
                 ${DSTRAIN_PEER_PYTHON})
add_test(NAME faults_preempt
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/faults/test_preempt.sh $<TARGET_FILE:dstrain>)
add_test(NAME faults_bad_steps
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/faults/test_bad_steps.sh $<TARGET_FILE:dstrain>
                 ${DSTRAIN_PEER_PYTHON})
add_test(NAME faults_resume
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/faults/test_resume.sh $<TARGET_FILE:dstrain>
                 ${DSTRAIN_PEER_PYTHON})
# Files that cannot be turned against their owner (issue 26): links planted
# at temporary names, outputs over inputs, two runs in one checkpoint folder.
add_test(NAME faults_safe_files
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/faults/test_safe_files.sh $<TARGET_FILE:dstrain>
                 ${DSTRAIN_PEER_PYTHON})
set_tests_properties(faults_bad_input faults_full_disk faults_preempt faults_bad_steps faults_resume
                     faults_safe_files
                     PROPERTIES TIMEOUT 300 SKIP_RETURN_CODE 77
                     ENVIRONMENT "OPENBLAS_NUM_THREADS=1")
# Limits are errors, not signals, and the smaller silences (issue 33, items 6
# and 7): ulimit -f under each writer and ulimit -v under version and train,
# eval with nothing scored, non-finite audio, escaped option values and log
# lines, duplicate config keys, layers that produce nothing, empty paths,
# garbage in the job scripts' variables, long paths, manifests that are not
# UTF-8, info on a .pt (test_limits_messages.sh).
add_test(NAME faults_limits_messages
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/faults/test_limits_messages.sh $<TARGET_FILE:dstrain>
                 ${DSTRAIN_PEER_PYTHON})
set_tests_properties(faults_limits_messages PROPERTIES TIMEOUT 300
                     ENVIRONMENT "OPENBLAS_NUM_THREADS=1")
