# PyTorch peer check: peer_dump writes weights, a batch and the C model's
# loss / logits / gradients; peer_check.py recomputes them with torch autograd
# and compares. $<TARGET_FILE:peer_dump> is resolved at generate time, so
# peer_dump may be defined before or after this file is included. torch is a
# declared dependency: a missing python or torch fails this test, not skips it.
add_test(NAME peer_torch
         COMMAND ${DSTRAIN_PEER_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/peer/peer_check.py
                 --peer-dump $<TARGET_FILE:peer_dump>)
set_tests_properties(peer_torch PROPERTIES TIMEOUT 300
                     ENVIRONMENT "OPENBLAS_NUM_THREADS=1;OMP_NUM_THREADS=1")

# The checker itself: dumps fabricated from the torch peer must pass, and a
# perturbed gradient, a missing or extra tensor and a wrong running stat must
# be reported.
add_test(NAME peer_torch_selftest
         COMMAND ${DSTRAIN_PEER_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/peer/peer_check.py --self-test)
set_tests_properties(peer_torch_selftest PROPERTIES TIMEOUT 120 ENVIRONMENT "OMP_NUM_THREADS=1")
