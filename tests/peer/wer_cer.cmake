# wer_cer_reference: peer/wer_cer_check.py scores edge-case, long and seeded
# random reference/hypothesis pairs with its own pure-Python Levenshtein and
# compares, pair by pair and in corpus totals, with what dstrain computes
# (score_pairs_check: ds_decode_word_edits / ds_decode_char_edits, ds_score_wer / _cer).
# It also checks that deliberately wrong references are caught.
add_executable(score_pairs_check peer/score_pairs_check.c)
target_link_libraries(score_pairs_check PRIVATE dstrain_core)
add_test(NAME wer_cer_reference
         COMMAND ${DSTRAIN_PEER_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/peer/wer_cer_check.py
                 --check $<TARGET_FILE:score_pairs_check>)
set_tests_properties(wer_cer_reference PROPERTIES TIMEOUT 120)
