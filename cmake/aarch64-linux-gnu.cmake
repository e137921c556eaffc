# CMake toolchain file: dstrain for aarch64 (arm64) Linux, cross-compiled on
# an amd64 Debian with Debian's cross compiler (gcc-aarch64-linux-gnu), the
# test programs run under qemu-user. scripts/cross-aarch64.sh installs all of
# it and uses this file; by hand:
#
#   cmake -S . -B build-aarch64 -DDSTRAIN_CUDA=OFF \
#         -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake \
#         [-DDSTRAIN_AARCH64_SYSROOT=/path/to/arm64/root]
#
# The arm64 libraries (OpenBLAS, Open MPI, HDF5, cJSON, zlib, libzip, FFTW,
# libsndfile, with their headers) live in a sysroot: a tree laid out like an
# arm64 Debian's /, by default build-aarch64-sysroot/ beside this file's
# folder, which scripts/cross-aarch64.sh fills by unpacking Debian's arm64
# packages. (It is not installed with `dpkg --add-architecture arm64`:
# Debian 12's libopenmpi-dev and libhdf5-dev cannot be installed for two
# architectures at once, so the arm64 ones would remove the amd64 ones that
# the native build needs.) DSTRAIN_AARCH64_SYSROOT=/ uses the arm64
# libraries of a machine that does have them installed in /usr/lib/aarch64-linux-gnu.
#
# ctest runs each test program through CMAKE_CROSSCOMPILING_EMULATOR:
# qemu-aarch64 -L SYSROOT, which finds the arm64 dynamic loader and libraries
# in the sysroot. (Tests whose command is `sh -c ...` start the program
# themselves, without the emulator, and so need binfmt_misc to run.)

set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)

set(DSTRAIN_AARCH64_TRIPLET aarch64-linux-gnu)
if(NOT CMAKE_C_COMPILER)
  set(CMAKE_C_COMPILER ${DSTRAIN_AARCH64_TRIPLET}-gcc)
endif()

# The sysroot: a cache setting, else the environment, else the default
# folder. try_compile projects read this file again: the environment
# carries the choice to them (CMAKE_TRY_COMPILE_PLATFORM_VARIABLES below
# too).
if(NOT DSTRAIN_AARCH64_SYSROOT)
  if(DEFINED ENV{DSTRAIN_AARCH64_SYSROOT} AND NOT "$ENV{DSTRAIN_AARCH64_SYSROOT}" STREQUAL "")
    set(DSTRAIN_AARCH64_SYSROOT "$ENV{DSTRAIN_AARCH64_SYSROOT}")
  else()
    get_filename_component(DSTRAIN_AARCH64_SYSROOT
                           "${CMAKE_CURRENT_LIST_DIR}/../build-aarch64-sysroot" ABSOLUTE)
  endif()
endif()
set(DSTRAIN_AARCH64_SYSROOT "${DSTRAIN_AARCH64_SYSROOT}" CACHE PATH
    "root of the arm64 libraries and headers (scripts/cross-aarch64.sh fills it)")
set(ENV{DSTRAIN_AARCH64_SYSROOT} "${DSTRAIN_AARCH64_SYSROOT}")
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES DSTRAIN_AARCH64_SYSROOT)
if(NOT EXISTS "${DSTRAIN_AARCH64_SYSROOT}/usr/include")
  message(FATAL_ERROR "aarch64: no arm64 sysroot at ${DSTRAIN_AARCH64_SYSROOT} "
                      "(scripts/cross-aarch64.sh makes one, or set DSTRAIN_AARCH64_SYSROOT)")
endif()
set(_root "${DSTRAIN_AARCH64_SYSROOT}")
if(_root STREQUAL "/")
  set(_root "")
else()
  set(CMAKE_SYSROOT "${DSTRAIN_AARCH64_SYSROOT}")
endif()

# Libraries and headers only from the arm64 root; programs (pkg-config,
# git, python for the test scripts) from the host.
set(CMAKE_FIND_ROOT_PATH "${DSTRAIN_AARCH64_SYSROOT}")
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

# pkg-config (FFTW, libsndfile, libzip): the arm64 .pc files, their paths
# inside the sysroot.
set(ENV{PKG_CONFIG_LIBDIR}
    "${_root}/usr/lib/${DSTRAIN_AARCH64_TRIPLET}/pkgconfig:${_root}/usr/share/pkgconfig")
set(ENV{PKG_CONFIG_PATH} "")
if(CMAKE_SYSROOT)
  set(ENV{PKG_CONFIG_SYSROOT_DIR} "${CMAKE_SYSROOT}")
endif()

# FindMPI and FindHDF5 ask the host's compiler wrappers (mpicc, h5cc), which
# answer with amd64 paths: name the arm64 files instead (Debian's layout).
set(_multiarch "${_root}/usr/lib/${DSTRAIN_AARCH64_TRIPLET}")
if(NOT MPI_C_LIB_NAMES AND EXISTS "${_multiarch}/openmpi/lib/libmpi.so")
  set(MPI_C_LIB_NAMES mpi CACHE STRING "arm64 Open MPI")
  set(MPI_mpi_LIBRARY "${_multiarch}/openmpi/lib/libmpi.so" CACHE FILEPATH "arm64 Open MPI")
  set(MPI_C_HEADER_DIR "${_multiarch}/openmpi/include" CACHE PATH "arm64 Open MPI")
endif()
set(MPI_SKIP_COMPILER_WRAPPER TRUE)
set(MPI_ASSUME_NO_BUILTIN_MPI TRUE)
# a wrapper that fails makes FindHDF5 search the root (hdf5/serial) itself
set(HDF5_C_COMPILER_EXECUTABLE false CACHE FILEPATH "no HDF5 wrapper when cross-compiling")

# ctest runs the arm64 test programs under qemu-user.
if(NOT CMAKE_CROSSCOMPILING_EMULATOR)
  if(CMAKE_SYSROOT)
    set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64 -L "${CMAKE_SYSROOT}")
  else()
    set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64 -L /usr/${DSTRAIN_AARCH64_TRIPLET})
  endif()
endif()
unset(_root)
unset(_multiarch)
