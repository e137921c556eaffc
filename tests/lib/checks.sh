# checks.sh - sourced by the shell tests: pass/fail counting, and Open MPI
# set up to run as root (CI is) with more ranks than cores, one BLAS thread
# a rank. A test calls ok or bad per check and ends with
#   echo "NAME: $pass passed, $fail failed"; [ "$fail" -eq 0 ]
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OPENBLAS_NUM_THREADS=1
pass=0 fail=0
ok()  { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*" >&2; }
# running PID: the process exists and has not ended. A zombie has ended: its
# parent (mpiexec, a daemon's launcher) exited without reaping it, and PID 1
# of a container need not reap orphans, yet `kill -0` still succeeds on it.
running() {
  local state
  state=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1) || return 1
  [ -n "$state" ] && [ "$state" != Z ] && [ "$state" != X ]
}
# A scratch folder $work and a list pids of background processes the test
# starts: at exit those are killed and the folder removed.
scratch_and_pids() {
  work=$(mktemp -d)
  pids=()
  trap 'for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done; rm -rf "$work"' EXIT
}
