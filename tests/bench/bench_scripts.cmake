# The benchmark scripts around `dstrain bench` (bench/pytorch_ds2.py, compare,
# plot, scaling-report, scaling-model; the bench kind of jobs/slurm/sweep.sh runs
# on a real Slurm in tests/slurm/test_slurm.sh):
# tests/bench/*, each run by /usr/bin/python3 (Debian's python3-torch, numpy,
# h5py; the scripts' shebang) or bash. Each prints one line per assertion.
set(_bs ${CMAKE_CURRENT_SOURCE_DIR}/bench)
set(_bs_env "OMP_NUM_THREADS=1;OPENBLAS_NUM_THREADS=1")

# pytorch_ds2's model is dstrain's: parameter counts of every preset equal
# `dstrain info`'s; from peer_dump's weights (FP64) the same loss and logits in
# eval mode (rel < 1e-9); in train mode on equal lengths the same loss,
# gradients and running stats as the masked peer (tests/peer/peer_model.py).
add_test(NAME bench_pytorch_ds2_model
         COMMAND ${DSTRAIN_PEER_PYTHON} ${_bs}/pytorch_ds2_check.py
                 --dstrain $<TARGET_FILE:dstrain> --peer-dump $<TARGET_FILE:peer_dump>)
# pytorch_ds2.py --steps 3 --warmup 1 on tiny: a well-formed JSON and CSV.
add_test(NAME bench_pytorch_ds2_smoke COMMAND ${DSTRAIN_PEER_PYTHON} ${_bs}/pytorch_ds2_smoke.py)
# compare, plot, scaling-report and scaling-model on hand-made inputs.
add_test(NAME bench_compare COMMAND ${DSTRAIN_PEER_PYTHON} ${_bs}/compare_test.py)
add_test(NAME bench_plot COMMAND ${DSTRAIN_PEER_PYTHON} ${_bs}/plot_test.py)
add_test(NAME bench_scaling_report COMMAND ${DSTRAIN_PEER_PYTHON} ${_bs}/scaling_report_test.py)
add_test(NAME bench_scaling_model COMMAND ${DSTRAIN_PEER_PYTHON} ${_bs}/scaling_model_test.py)
# step-anatomy: host against device per step, and issue 34's targets.
add_test(NAME bench_step_anatomy COMMAND ${DSTRAIN_PEER_PYTHON} ${_bs}/step_anatomy_test.py)
# LibriSpeech-length batches formed as the sampler forms them, in dstrain
# bench and pytorch_ds2.py's benchlib alike (issue 34, item 2).
add_test(NAME bench_batch_formation
         COMMAND ${DSTRAIN_PEER_PYTHON} ${_bs}/batch_formation_test.py $<TARGET_FILE:dstrain>)
set_tests_properties(bench_pytorch_ds2_model bench_pytorch_ds2_smoke bench_compare bench_plot
                     bench_scaling_report bench_scaling_model bench_batch_formation
                     bench_step_anatomy PROPERTIES TIMEOUT 300 ENVIRONMENT "${_bs_env}")

# scaling-model's 2-rank prediction against `mpiexec -np 2 dstrain bench`
# (link measured by bench_allreduce): printed, with a loose sanity bound; run
# alone, as the bound assumes the 2 cores are free.
add_test(NAME bench_scaling_model_ranks
         COMMAND ${DSTRAIN_PEER_PYTHON} ${_bs}/scaling_model_ranks.py
                 --dstrain $<TARGET_FILE:dstrain> --allreduce $<TARGET_FILE:bench_allreduce>
                 --mpiexec ${MPIEXEC_EXECUTABLE})
set_tests_properties(bench_scaling_model_ranks PROPERTIES TIMEOUT 300 RUN_SERIAL TRUE
                     ENVIRONMENT "${_bs_env}")

