# dstrain export/import --pytorch against real torch (/usr/bin/python3's):
#   pytorch_export     trained models exported (DS1: under dstrain's names, into
#                      bench/pytorch_ds2.py's DeepSpeech1), torch.load-ed (weights_only too) into
#                      a re-creation of deepspeech.pytorch's DeepSpeech (strict) and into
#                      the peer model; their eval logits against dstrain's (pt_logits_dump)
#   pytorch_roundtrip  torch-initialised DeepSpeech state_dicts (float32/64/16, protocol
#                      2 and 4, Lightning-style wrapper, views) -> import -> export: bit
#                      for bit; dstrain info accepts the imported checkpoints
#   pytorch_refusals   missing / unexpected / misshapen keys, non-state_dict pickles,
#                      damaged zips, mutated pickles, non-finite values, fc_hidden export:
#                      each a message naming the file and key, exit 1, no crash
# torch is a declared dependency: without it these fail, not skip.
add_executable(pt_logits_dump peer/pt_logits_dump.c)
target_link_libraries(pt_logits_dump PRIVATE dstrain_testutil)

foreach(part export roundtrip refusals)
  add_test(NAME pytorch_${part}
           COMMAND ${DSTRAIN_PEER_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/peer/pytorch_export_check.py
                   --part ${part} --dstrain $<TARGET_FILE:dstrain>
                   --logits-dump $<TARGET_FILE:pt_logits_dump>)
  set_tests_properties(pytorch_${part} PROPERTIES TIMEOUT 300
                       ENVIRONMENT "OPENBLAS_NUM_THREADS=1;OMP_NUM_THREADS=1")
endforeach()
