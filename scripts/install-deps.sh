#!/usr/bin/env bash
# Installs the Debian packages dstrain builds, runs and tests with.
# Idempotent: packages already present are skipped.
# Usage: scripts/install-deps.sh [PACKAGE...]   (as root, or with sudo available)
#   with packages named: installs those instead (scripts/install-slurm.sh uses this)
set -euo pipefail

packages=(
  build-essential cmake pkg-config
  libopenblas-dev                      # BLAS for conv (im2col) and GEMMs
  libopenmpi-dev openmpi-bin           # ranks and the CPU gradient reduction
  libhdf5-dev hdf5-tools               # features and checkpoints (h5diff in tests)
  libcjson-dev                         # model configs (JSON)
  zlib1g-dev                           # CRC-32 of checkpoint and feature-file attributes
  libzip-dev                           # dstrain export/import --pytorch: torch.save's zip files
  libfftw3-dev libsndfile1-dev         # feature extraction (prep)
  espeak-ng sox libsox-fmt-all         # the synthesized mini corpus
  python3-torch python3-numpy python3-h5py   # PyTorch peer checks (/usr/bin/python3)
  gnuplot-nox                          # bench/plot, bench/scaling-report: PNG charts
  strace                               # tests/mpi/test_resume_once.sh: which rank opens a checkpoint
  clang libclang-rt-dev                # scripts/fuzz.sh: libFuzzer lives in clang's runtime
  gcc-aarch64-linux-gnu binutils-aarch64-linux-gnu qemu-user   # scripts/cross-aarch64.sh (ctest cross_aarch64)
)
[ $# -eq 0 ] || packages=("$@")

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present (${packages[*]})"
  exit 0
fi

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
