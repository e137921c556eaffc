# The synthesized mini corpus (data/make-mini-librispeech.sh): layout, audio
# format, disjoint splits, a held-out voice and byte-identical reruns. Needs
# espeak-ng and sox (scripts/install-deps.sh).
add_test(NAME mini_corpus
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/data/test_mini_corpus.sh
                 ${CMAKE_SOURCE_DIR}/data/make-mini-librispeech.sh
                 ${CMAKE_CURRENT_BINARY_DIR}/mini_corpus_test)
set_tests_properties(mini_corpus PROPERTIES TIMEOUT 300)
