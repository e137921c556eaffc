# The main job (scripts/demo.sh) on a shortened schedule: synthesizes,
# prepares, trains on 2 ranks, validates, plots, transcribes, resumes, and
# learns (dev CER well below an untrained model's). A few minutes.
add_test(NAME demo_job
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/data/test_demo.sh ${CMAKE_SOURCE_DIR}
                 $<TARGET_FILE:dstrain> ${CMAKE_CURRENT_BINARY_DIR}/demo)
set_tests_properties(demo_job PROPERTIES TIMEOUT 1500 FIXTURES_SETUP demo_corpus)
