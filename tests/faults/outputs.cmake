# Outputs and checkpoint folders that cannot be turned against their owner
# (issue 33, items 1 and 3): devices, FIFOs, sockets, folders and links as
# outputs; linked folders; a folder swapped mid-run; long paths; a hard link
# at the lock; pruning and fresh runs beside another run's checkpoints; the
# stall figures of slow saves (tests/faults/test_outputs.sh).
add_test(NAME faults_outputs
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/faults/test_outputs.sh $<TARGET_FILE:dstrain>
                 ${DSTRAIN_PEER_PYTHON})
set_tests_properties(faults_outputs PROPERTIES TIMEOUT 300 ENVIRONMENT "OPENBLAS_NUM_THREADS=1")
