# checks.sh - sourced by the shell tests: pass/fail counting, and Open MPI
# set up to run as root (CI is) with more ranks than cores, one BLAS thread
# a rank. A test calls ok or bad per check and ends with
#   echo "NAME: $pass passed, $fail failed"; [ "$fail" -eq 0 ]
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OPENBLAS_NUM_THREADS=1
pass=0 fail=0
ok()  { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*" >&2; }
