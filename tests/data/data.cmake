# The main job (scripts/demo.sh) on a shortened schedule: synthesizes,
# prepares, trains on 2 ranks, validates, plots, transcribes, resumes, and
# learns (dev CER well below an untrained model's). A few minutes.
add_test(NAME demo_job
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/data/test_demo.sh ${CMAKE_SOURCE_DIR}
                 $<TARGET_FILE:dstrain> ${CMAKE_CURRENT_BINARY_DIR}/demo)
set_tests_properties(demo_job PROPERTIES TIMEOUT 1500 FIXTURES_SETUP demo_corpus)
# Inputs are inputs and data that changes under a run is noticed (issue 33,
# items 2 and 5): FIFOs where files are read, outputs over --config and
# over a manifest's audio, a feature file emptied or replaced mid-run,
# resume on re-recorded features, forged indexes.
add_test(NAME inputs_changed
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/data/test_inputs_changed.sh $<TARGET_FILE:dstrain>
                 ${DSTRAIN_PEER_PYTHON})
set_tests_properties(inputs_changed PROPERTIES TIMEOUT 600 SKIP_RETURN_CODE 77
                     ENVIRONMENT "OPENBLAS_NUM_THREADS=1")
# --bucket-frames (issue 34, item 2): runs padded to a multiple of N output
# frames end with the same checkpoint, bit for bit, as unrounded ones
# (synthetic, a feature file, 2 ranks); bench records it; bad values refused.
add_test(NAME bucket_frames
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/data/test_bucket_frames.sh $<TARGET_FILE:dstrain>
                 ${DSTRAIN_PEER_PYTHON})
set_tests_properties(bucket_frames PROPERTIES TIMEOUT 600 ENVIRONMENT "OPENBLAS_NUM_THREADS=1")
