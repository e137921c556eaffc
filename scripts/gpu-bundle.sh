#!/usr/bin/env bash
# gpu-bundle.sh - packs the Debian 12 libraries and tools that building,
# testing and running dstrain need (OpenMPI, HDF5, OpenBLAS, FFTW3,
# libsndfile, cJSON, pkg-config; espeak-ng and sox for the mini corpus) into
# a relocatable folder and an archive, for a GPU machine that has a compiler,
# CMake and CUDA but none of these, and no network. See usage().
set -euo pipefail
export LC_ALL=C

prog=${0##*/}
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
A=x86_64-linux-gnu

bundle=${GPU_BUNDLE_DIR:-$repo/.gpu-bundle}             # the unpacked bundle (used here)
archive=${GPU_BUNDLE_ARCHIVE:-$repo/.gpu-bundle.tar.xz} # what travels to the GPU machine
limit_mib=${GPU_BUNDLE_LIMIT_MIB:-40}
debs=${GPU_BUNDLE_DEBS:-/var/cache/dstrain-gpu-bundle}  # downloaded .deb files, reused

usage() {
  cat <<EOF
Usage: scripts/$prog            make or refresh the bundle
       scripts/$prog --discover [BUILD_DIR]
       scripts/$prog --help

Downloads (apt-get download, nothing is installed) the Debian packages that
a dstrain build and its tests load or link against: OpenMPI (mpicc, mpiexec,
orted, their MCA and PMIx plugins), serial HDF5 (+ h5cc, h5diff), OpenBLAS,
FFTW3, libsndfile and its codecs, cJSON, pkgconf, espeak-ng and sox (the mini
corpus), with the -dev packages (headers, .so links, .pc files) and every
shared library they load, except libc6, libgcc-s1 and libstdc++6, which any
machine with gcc has. Then:

  $bundle/root/
      the packages unpacked (dpkg -x), /lib merged into /usr, the
      update-alternatives links made, docs, man pages, locales and static
      libraries removed, absolute links made relative, .pc files, h5cc and
      sox made relocatable
  $bundle/root/cupti/
      CUPTI (the CUDA backend's kernel profile; no Debian package has the
      CUDA 13 one) copied from this machine's CUDA toolkit: libcupti.so.N and
      the headers CMake needs; gpu-check.sh builds with it only when the GPU
      machine has no CUPTI of its own (its toolkit, or python3's
      nvidia-cuda-cupti package). Skipped, with a warning, when the toolkit
      here has none (\$CUDA_HOME, else nvcc's folder, else /usr/local/cuda)
  $bundle/env.sh
      sourced by scripts/gpu-check.sh and scripts/gpu-bundle-test.sh: PATH,
      LD_LIBRARY_PATH, PKG_CONFIG_*, CMAKE_PREFIX_PATH, OPAL_*/PMIX_*
      (OpenMPI run from another prefix), HDF5_ROOT, ESPEAK_DATA_PATH,
      OMPI_ALLOW_RUN_AS_ROOT*, DSTRAIN_BUNDLE_CMAKE_ARGS for cmake, and
      DSTRAIN_BUNDLE_CUPTI (root/cupti, when the bundle has it)
  $archive
      what travels to the GPU machine (the device tool's carry); gpu-check.sh
      unpacks it there. OpenBLAS alone is 36 MiB unpacked, so the folder
      (about 120 MiB) never travels: the archive (about 26 MiB) does.

Checks: every ELF file's libraries resolve (ldd, env.sh, a clean
environment) inside the bundle or to the three base packages; then, from
the archive unpacked at another path, pkg-config, mpicc, h5cc, ompi_info and
espeak-ng answer with bundle paths, espeak-ng | sox makes a 16 kHz FLAC with
the bundle's FLAC plugin, and mpiexec starts 2 ranks whose libmpi and MCA
plugins all come from the bundle. Fails if the archive is over $limit_mib MiB.
Running it again refreshes everything (the .deb files are kept in $debs).

--discover [BUILD_DIR]  prints the package closure found by running ldd on
                        BUILD_DIR's programs (default: build-closure, made
                        with -DDSTRAIN_CUDA=OFF when missing), on the
                        OpenMPI, HDF5, pkgconf, espeak-ng and sox programs and
                        plugins, mapping each file to its package with
                        dpkg -S; paste it into PACKAGES below when the
                        dependencies change. Needs scripts/install-deps.sh's
                        packages installed (the rest of this script does not).

Environment: GPU_BUNDLE_DIR, GPU_BUNDLE_ARCHIVE, GPU_BUNDLE_LIMIT_MIB,
GPU_BUNDLE_DEBS, CUDA_HOME (the toolkit CUPTI is copied from).
Needs: Debian 12 (bookworm) amd64, apt-get, dpkg-deb, readelf, xz, gcc; root
(apt-get update, the .deb cache in /var/cache).
EOF
}

die() { echo "$prog: error: $*" >&2; exit 1; }
log() { echo "$prog: [$(( SECONDS ))s] $*"; }

# ---- the package list ---------------------------------------------------------
# Found with --discover on Debian 12 (ldd of build/dstrain, the test and bench
# programs, mpiexec/orterun, orted, opal_wrapper, every OpenMPI MCA and PMIx
# plugin, h5diff and pkgconf; dpkg -S of each library, of the files CMake
# found and of the .pc files pkg-config reads), then checked by
# check_closure below on every ELF file in the bundle.
PACKAGES=(
  # OpenMPI: mpicc (opal_wrapper), mpiexec (orterun), orted, ompi_info, the
  # MCA plugins (libopenmpi3), PMIx and the headers / mpi.pc
  openmpi-bin openmpi-common libopenmpi3 libopenmpi-dev libpmix2
  libhwloc15 libevent-core-2.1-7 libevent-pthreads-2.1-7 libudev1 libmunge2
  # ... and what the fabric plugins (ofi, ucx, psm, psm2, openib) load; Debian's
  # openmpi-mca-params.conf turns most of them off, but OpenMPI still opens them
  libfabric1 libucx0 libibverbs1 ibverbs-providers librdmacm1 libnl-3-200
  libnl-route-3-200 libnuma1 libpsm-infinipath1 libpsm2-2 libatomic1
  # HDF5, serial (FindHDF5 runs h5cc from hdf5-helpers; tests use h5diff), and
  # what h5cc puts on the link line (-lcrypto -lcurl -lsz -lz) with its closure
  libhdf5-dev libhdf5-103-1 libhdf5-hl-100 hdf5-helpers hdf5-tools
  libaec0 libaec-dev libsz2 zlib1g zlib1g-dev libssl3 libssl-dev
  libcurl4 libcurl4-openssl-dev libbrotli1 libnghttp2-14 libidn2-0 libunistring2
  librtmp1 libgnutls30 libhogweed6 libnettle8 libgmp10 libp11-kit0 libffi8
  libtasn1-6 libssh2-1 libpsl5 libgssapi-krb5-2 libkrb5-3 libk5crypto3
  libkrb5support0 libcom-err2 libkeyutils1 libldap-2.5-0 libsasl2-2 libzstd1
  libuuid1
  # OpenBLAS (pthread flavour) and the Fortran runtime it loads
  libopenblas0-pthread libopenblas-pthread-dev libgfortran5 libquadmath0
  # FFTW3, libsndfile and the codecs sndfile.pc requires (pkg-config reads
  # Requires.private for --cflags, so their .pc files must be there too)
  libfftw3-double3 libfftw3-dev
  libsndfile1 libsndfile1-dev libflac12 libflac-dev libogg0 libogg-dev
  libvorbis0a libvorbisenc2 libvorbis-dev libopus0 libopus-dev
  libmpg123-0 libmpg123-dev libmp3lame0
  # cJSON, pkg-config
  libcjson1 libcjson-dev pkgconf pkgconf-bin libpkgconf3
  # libzip: dstrain export/import (PyTorch's zip files), and what it loads
  libzip4 libzip-dev libbz2-1.0
  # The mini corpus (data/make-mini-librispeech.sh, for gpu-check.sh's
  # training on it): espeak-ng (English voices only are kept) and sox with its
  # FLAC plugin (the other plugins are removed), and what they load
  espeak-ng espeak-ng-data libespeak-ng1 libpcaudio0 libsonic0 libasound2
  libpulse0 libasyncns0 libdbus-1-3 libsystemd0 libcap2 libgcrypt20 libgpg-error0
  liblz4-1 liblzma5 libx11-6 libx11-xcb1 libxcb1 libxau6 libxdmcp6 libbsd0 libmd0
  sox libsox3 libsox-fmt-base libltdl7 libpng16-16 libmagic1 libgsm1 libgomp1 libbz2-1.0
)
# What the target has (any machine with gcc): never bundled, and the only
# libraries an ELF file in the bundle may need from outside it.
BASE_PACKAGES=(libc6 libc6-dev libgcc-s1 libstdc++6)

# ---- helpers --------------------------------------------------------------------
is_elf() { [ -f "$1" ] && [ ! -L "$1" ] && [ "$(head -c4 "$1" | od -An -tx1 | tr -d ' \n')" = 7f454c46 ]; }

# owner PATH: the package(s) that ship PATH (tries the /usr-merged variants).
# A link (an update-alternatives one, say) names the owners of the link
# and of the file it leads to.
owner() {
  local p q c found=0
  for p in "$1" "$(readlink -f "$1")"; do
    for c in "$p" "${p#/usr}" "/usr$p"; do
      q=$(dpkg -S "$c" 2>/dev/null | grep -v '^diversion' | sed -E 's/: .*//; s/:amd64//g; s/, /\n/g') || continue
      echo "$q"; found=1; break
    done
  done
  [ $found = 1 ] || echo "$prog: note: no package ships $1" >&2
}

# ---- --discover -----------------------------------------------------------------
discover() {
  local build=${1:-$repo/build-closure} f e pkg
  if [ ! -x "$build/dstrain" ]; then
    log "building $build (CPU only) to find what it loads"
    cmake -S "$repo" -B "$build" -DDSTRAIN_CUDA=OFF >/dev/null
    cmake --build "$build" -j "$(nproc)" >/dev/null
  fi
  local elfs=()
  while IFS= read -r f; do is_elf "$f" && elfs+=("$f"); done \
    < <(find "$build" -type f -perm -u+x -not -path '*/CMakeFiles/*')
  # The OpenMPI/HDF5/pkgconf programs and plugins, whether or not ldd of our
  # programs reaches them (plugins are dlopen()ed).
  for pkg in openmpi-bin libopenmpi3 libpmix2 hdf5-tools pkgconf-bin espeak-ng sox; do
    while IFS= read -r f; do is_elf "$f" && elfs+=("$f"); done < <(dpkg -L "$pkg")
  done
  # sox writes FLAC through a plugin, the only one the mini corpus needs
  elfs+=("/usr/lib/$A/sox/libsox_fmt_flac.so")
  {
    for e in "${elfs[@]}"; do ldd "$e" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// { print $3 }'; done |
      sort -u | while read -r f; do owner "$f"; done
    # the files CMake found (libraries, h5cc, h5diff, mpicc, mpiexec,
    # pkg-config) and the headers it found folders for
    grep -E '^(MPI|HDF5|BLAS|CJSON|pkgcfg|PKG_CONFIG|MPIEXEC)[A-Za-z0-9_]*:FILEPATH=/' "$build/CMakeCache.txt" |
      sed 's/^[^=]*=//' | while read -r f; do [ -e "$f" ] && owner "$f"; done
    cache() { sed -n "s/^$1:[A-Z]*=//p" "$build/CMakeCache.txt"; }
    for f in "$(cache CBLAS_INCLUDE_DIR)/cblas.h" "$(cache CJSON_INCLUDE_DIR)/cjson/cJSON.h" \
             "$(cache MPI_C_HEADER_DIR)/mpi.h"; do owner "$f"; done
    # the packages of the programs themselves and the data they read:
    # OpenMPI's help texts and mca-params.conf, espeak-ng's voices
    printf '%s\n' openmpi-bin openmpi-common libopenmpi3 libpmix2 hdf5-tools pkgconf-bin \
                  espeak-ng espeak-ng-data sox libsox-fmt-base
    # the .pc files pkg-config reads for our modules and everything they require
    for m in fftw3 sndfile; do
      for r in $m $(pkg-config --print-requires --print-requires-private $m | awk '{ print $1 }'); do
        owner "$(pkg-config --path "$r")"
      done
    done
  } | sort -u | grep -vxF -f <(printf '%s\n' "${BASE_PACKAGES[@]}")
}

# ---- making the bundle -------------------------------------------------------------
# download: the .deb of each package into $debs (kept, so a refresh only
# fetches what changed). Candidate versions from the apt lists.
download() {
  mkdir -p "$debs"
  [ -n "$(ls /var/lib/apt/lists/*_Packages 2>/dev/null)" ] || apt-get update -qq
  local missing=() p v a name
  # one apt-cache call for all: "PACKAGE VERSION ARCH" per package, in order
  apt-cache show --no-all-versions "${PACKAGES[@]/%/:amd64}" 2>"$work/apt.err" |
    awk '/^Package:/ { n = $2 } /^Version:/ { v = $2 } /^Architecture:/ { a = $2 }
         /^$/ && n { print n, v, a; n = "" } END { if (n) print n, v, a }' >"$work/versions" ||
    die "apt-cache show failed: $(cat "$work/apt.err") (apt-get update?)"
  for p in "${PACKAGES[@]}"; do
    read -r _ v a < <(awk -v p="$p" '$1 == p' "$work/versions") || die "apt knows no package '$p'"
    # apt-get download names the file PACKAGE_VERSION_ARCH.deb, ':' as %3a
    name="${p}_${v//:/%3a}_${a}.deb"
    [ -s "$debs/$name" ] || missing+=("$p:amd64=$v")
    echo "$debs/$name"
  done >"$work/debs.list"
  if [ ${#missing[@]} -gt 0 ]; then
    log "downloading ${#missing[@]} packages into $debs"
    (cd "$debs" && apt-get download -qq -o APT::Sandbox::User=root "${missing[@]}") || die "apt-get download failed (stale package lists? apt-get update)"
  fi
  while read -r f; do [ -s "$f" ] || die "missing $f after download"; done <"$work/debs.list"
}

# unpack: dpkg -x every package into $root; then merge /lib, /bin, /sbin into
# /usr (Debian 12 packages still ship some libraries in /lib) so that one
# library directory holds them all.
unpack() {
  local f d
  while read -r f; do dpkg -x "$f" "$root"; done <"$work/debs.list"
  for d in lib lib64 bin sbin; do
    [ -d "$root/$d" ] && [ ! -L "$root/$d" ] || continue
    mkdir -p "$root/usr/$d"
    cp -a "$root/$d/." "$root/usr/$d/"
    rm -rf "${root:?}/$d"
  done
  while read -r f; do dpkg-deb -f "$f" Package Version | paste -sd= | sed 's/^Package: //; s/=Version: /=/'; done \
    <"$work/debs.list" >"$bundle_new/PACKAGES.txt"
}

# alternatives: the links that update-alternatives makes in the packages'
# postinst (mpicc -> mpicc.openmpi, mpiexec, libmpi.so, mpi.pc, hdf5.pc,
# libopenblas.so.0, cblas.h, ...). Only literal --install/--slave triples whose
# target is in the bundle count: conditional or computed ones are skipped.
alternatives() {
  local f link target
  while read -r f; do
    dpkg-deb --ctrl-tarfile "$f" | tar -xOf - ./postinst 2>/dev/null || true
  done <"$work/debs.list" |
    sed -e ':a' -e '/\\$/N; s/\\\n//; ta' | grep 'update-alternatives' |
    awk '{ for (i = 1; i <= NF; i++) {
             if ($i == "--install" && i + 3 <= NF) print $(i+1), $(i+3)
             if ($i == "--slave"   && i + 3 <= NF) print $(i+1), $(i+3) } }' |
    while read -r link target; do
      case "$link$target" in *'$'*|*'"'*) continue ;; esac
      link=$(usr_path "$link"); target=$(usr_path "$target")
      [ -e "$root$target" ] && [ ! -e "$root$link" ] || continue
      mkdir -p "$(dirname "$root$link")"
      ln -s "$(realpath -m --relative-to="$(dirname "$root$link")" "$root$target")" "$root$link"
    done
}
usr_path() { case "$1" in /lib/*|/lib64/*|/bin/*|/sbin/*) echo "/usr$1" ;; *) echo "$1" ;; esac; }

# prune: what neither the build nor a run reads.
prune() {
  rm -rf "$root"/usr/share/{doc,doc-base,man,info,locale,lintian,bug,bash-completion,gtk-doc,java,aclocal} \
         "$root"/usr/lib/$A/fortran "$root"/usr/share/openmpi/*.tcl "$root"/etc/{default,init.d,logrotate.d}
  find "$root" \( -name '*.a' -o -name '*.la' -o -name '*.mod' \) \( -type f -o -type l \) -delete
  # espeak-ng: the English voices of the mini corpus; sox: the FLAC plugin
  local es=$root/usr/lib/$A/espeak-ng-data
  find "$es" -maxdepth 1 -name '*_dict' ! -name en_dict -delete
  rm -rf "$es/voices/mb"
  find "$es/lang" -mindepth 1 -maxdepth 1 ! -name gmw -exec rm -rf {} +
  find "$es/lang/gmw" -mindepth 1 ! -name 'en*' -delete
  find "$root/usr/lib/$A/sox" -name 'libsox_fmt_*' ! -name 'libsox_fmt_flac.so' -delete
}

# fix_symlinks: absolute links point into the bundle, relatively; links that
# lead nowhere (into pruned docs, /etc/alternatives) go.
fix_symlinks() {
  local l t
  while IFS= read -r l; do
    t=$(readlink "$l")
    if [[ $t == /* ]]; then
      t=$(usr_path "$t")
      rm -f "$l"
      [ -e "$root$t" ] && ln -s "$(realpath -m --relative-to="$(dirname "$l")" "$root$t")" "$l"
    fi
  done < <(find "$root" -type l)
  find "$root" -xtype l -delete
}

# relocate: text files that name /usr are rewritten to find the bundle from
# where they lie. .pc files: ${pcfiledir} (pkgconf and pkg-config both know
# it), linked .pc files become copies so that pcfiledir is their own folder;
# h5cc: its prefix from its own path, shared libraries by default; CMake
# package configs (OpenBLAS): CMAKE_CURRENT_LIST_DIR.
relocate() {
  local pc dir rel tmp cfg
  while IFS= read -r pc; do
    if [ -L "$pc" ]; then tmp=$(readlink -f "$pc"); rm "$pc"; cp "$tmp" "$pc"; fi
  done < <(find "$root" -name '*.pc')
  while IFS= read -r pc; do
    dir=$(dirname "$pc")
    rel=$(realpath -m --relative-to="$dir" "$root/usr")
    sed -i -E "s#(^|[=[:space:]\"]|-I|-L)/usr(/|\$|[[:space:]\"])#\1\${pcfiledir}/$rel\2#g" "$pc"
  done < <(find "$root" -name '*.pc' -type f)
  for f in "$root"/usr/bin/h5cc "$root"/usr/bin/h5c++ "$root"/usr/bin/h5fc; do
    [ -f "$f" ] || continue
    sed -i 's#^prefix="/usr"#prefix="$(cd "$(dirname "$0")/.." \&\& pwd)"#' "$f"
    grep -q '^prefix="\$(cd' "$f" || die "could not relocate $f (its prefix line changed?)"
    # the static libraries are pruned: link the shared ones by default
    # (FindHDF5 first compiles a test program with no -shlib)
    sed -i 's#^STATIC_AVAILABLE="yes"#STATIC_AVAILABLE="no"#' "$f"
    # it links -lcrypto -lcurl -lsz -lz without naming a folder, which finds
    # the system's (gcc searches its own folders before LIBRARY_PATH): name
    # the bundle's
    sed -i 's#^LDFLAGSBASE=""#LDFLAGSBASE="-L${libdir}"#' "$f"
    grep -q '^LDFLAGSBASE="-L' "$f" || die "could not give $f the bundle's library folder"
  done
  while IFS= read -r cfg; do
    rel=$(realpath -m --relative-to="$(dirname "$cfg")" "$root/usr")
    sed -i -E "s#(^|[[:space:]\"(])/usr/#\1\${CMAKE_CURRENT_LIST_DIR}/$rel/#g" "$cfg"
  done < <(grep -rlE '(^|[[:space:]"(])/usr/' "$root/usr/lib/$A/openblas-pthread/cmake" 2>/dev/null || true)
}

# wrap_sox: sox looks for its format plugins (FLAC among them) only in the
# compiled-in /usr/lib/x86_64-linux-gnu/sox (lt_dlforeachfile(PKGLIBDIR)), not
# in the bundle. usr/bin/sox and soxi become scripts that run the real sox
# with a small preload library redirecting that one call to the bundle's
# plugin folder; soxi keeps its name as argv[0], which sox reads for its mode.
wrap_sox() {
  local bin=$root/usr/bin lib=$root/usr/lib/$A/dstrain
  [ -f "$bin/sox" ] || return 0
  mkdir -p "$lib"
  cat >"$work/sox-plugin-dir.c" <<'EOF'
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
/* libltdl's lt_dlforeachfile, with the folder from DSTRAIN_SOX_PLUGIN_DIR */
typedef int each_fn(const char *filename, void *data);
int lt_dlforeachfile(const char *search_path, each_fn *fn, void *data) {
  static int (*real)(const char *, each_fn *, void *);
  const char *dir = getenv("DSTRAIN_SOX_PLUGIN_DIR");
  if (!real) *(void **)&real = dlsym(RTLD_NEXT, "lt_dlforeachfile");
  if (!real) return 1;
  return real(dir && *dir ? dir : search_path, fn, data);
}
EOF
  gcc -O2 -shared -fPIC -o "$lib/sox-plugin-dir.so" "$work/sox-plugin-dir.c" -ldl
  mv "$bin/sox" "$bin/sox.bin"
  rm -f "$bin/soxi" "$bin/play" "$bin/rec"
  cat >"$bin/sox" <<'EOF'
#!/usr/bin/env bash
# sox from the dstrain GPU bundle (scripts/gpu-bundle.sh, wrap_sox): finds
# its FLAC plugin in the bundle through a preload library.
here=$(cd "$(dirname "$0")" && pwd)
lib=$here/../lib/x86_64-linux-gnu
DSTRAIN_SOX_PLUGIN_DIR=$lib/sox LD_PRELOAD=$lib/dstrain/sox-plugin-dir.so${LD_PRELOAD:+:$LD_PRELOAD} \
  exec -a "${0##*/}" "$here/sox.bin" "$@"
EOF
  chmod +x "$bin/sox"
  cp -p "$bin/sox" "$bin/soxi"
}

# add_cupti: CUPTI from this machine's CUDA toolkit into root/cupti/{include,lib}:
# libcupti.so.N (and its .so link) and the files of NVIDIA's CUPTI package
# that cupti.h includes (cupti*.h, generated_*_meta.h, cuda_stdint.h,
# Openacc/, Openmp/); its version in cupti/VERSION. It needs only libc6 and
# libgcc-s1 (check_closure checks). A CUPTI newer than the GPU machine's
# driver would not load: gpu-check.sh prefers the machine's own.
add_cupti() {
  local cuda inc="" lib="" d nvcc
  nvcc=$(command -v nvcc 2>/dev/null || true)
  cuda=${CUDA_HOME:-$([ -n "$nvcc" ] && dirname "$(dirname "$(readlink -f "$nvcc")")" || echo /usr/local/cuda)}
  for d in "$cuda/include" "$cuda/extras/CUPTI/include"; do
    [ -f "$d/cupti.h" ] && { inc=$d; break; }
  done
  for d in "$cuda/lib64" "$cuda/lib" "$cuda/extras/CUPTI/lib64"; do
    ls "$d"/libcupti.so.[0-9]* >/dev/null 2>&1 && { lib=$d; break; }
  done
  if [ -z "$inc" ] || [ -z "$lib" ]; then
    echo "$prog: warning: no CUPTI in $cuda (include/cupti.h, lib64/libcupti.so.N): the bundle carries none" >&2
    return 0
  fi
  mkdir -p "$root/cupti/include" "$root/cupti/lib"
  cp -a "$inc"/cupti*.h "$root/cupti/include/"
  for f in "$inc"/generated_*_meta.h "$inc"/cuda_stdint.h; do [ -f "$f" ] && cp -a "$f" "$root/cupti/include/"; done
  for d in Openacc Openmp; do [ -d "$inc/$d" ] && cp -a "$inc/$d" "$root/cupti/include/"; done
  cp -a "$lib"/libcupti.so* "$root/cupti/lib/"
  # the unversioned link CMake's find_library looks for
  if [ ! -e "$root/cupti/lib/libcupti.so" ]; then
    ln -s "$(cd "$root/cupti/lib" && ls libcupti.so.[0-9]* | sort -V | head -1)" "$root/cupti/lib/libcupti.so"
  fi
  find "$root/cupti" -type l -lname '/*' -exec sh -c 'for l; do t=$(readlink "$l"); rm "$l"; ln -s "$(basename "$t")" "$l"; done' _ {} +
  local sos=("$lib"/libcupti.so.[0-9]*)
  sos=("${sos[@]##*/}")
  printf 'CUPTI API %s from %s (%s)\n' \
    "$(awk '$1 == "#define" && $2 == "CUPTI_API_VERSION" { print $3 }' "$inc/cupti_version.h")" \
    "$cuda" "${sos[*]}" >"$root/cupti/VERSION"
  log "CUPTI: $(cat "$root/cupti/VERSION")"
}

# write_env: env.sh finds the bundle from its own location, so the bundle
# works wherever it is unpacked.
write_env() {
  cat >"$bundle_new/env.sh" <<'EOF'
# Sourced (bash) by scripts/gpu-check.sh and scripts/gpu-bundle-test.sh:
# puts the bundle made by scripts/gpu-bundle.sh first on every search path.
DSTRAIN_BUNDLE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export DSTRAIN_BUNDLE
_r=$DSTRAIN_BUNDLE/root/usr _l=$DSTRAIN_BUNDLE/root/usr/lib/x86_64-linux-gnu
export PATH=$_r/bin${PATH:+:$PATH}
# every folder of the bundle that holds a library some program or library
# of it needs (gpu-bundle.sh, lib_dirs)
for _d in @LIB_DIRS@; do
  LD_LIBRARY_PATH=$DSTRAIN_BUNDLE/root/$_d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
done
export LD_LIBRARY_PATH
# pkg-config reads only the bundle's .pc files (PKG_CONFIG_LIBDIR replaces
# the compiled-in search path); CMake's FindPkgConfig uses $PKG_CONFIG.
export PKG_CONFIG_LIBDIR=$_l/pkgconfig:$_r/share/pkgconfig
export PKG_CONFIG_PATH=$PKG_CONFIG_LIBDIR
export PKG_CONFIG=$_r/bin/pkg-config
export CMAKE_PREFIX_PATH=$_r${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}
# OpenMPI 4.1 (Debian) run from another prefix: its install directories are
# ${prefix}-relative, so OPAL_PREFIX moves them; the ones Debian placed
# elsewhere (libdir, pkglibdir with the MCA plugins, sysconfdir with
# openmpi-mca-params.conf) are named too. PMIx (its own prefix
# .../pmix2) likewise, for its plugins and help files.
export OPAL_PREFIX=$_r OPAL_EXEC_PREFIX=$_r OPAL_BINDIR=$_r/bin
export OPAL_LIBDIR=$_l/openmpi/lib OPAL_PKGLIBDIR=$_l/openmpi/lib/openmpi3
export OPAL_INCLUDEDIR=$_l/openmpi/include OPAL_PKGINCLUDEDIR=$_l/openmpi/include/openmpi
export OPAL_DATAROOTDIR=$_r/share OPAL_DATADIR=$_r/share OPAL_PKGDATADIR=$_r/share/openmpi
export OPAL_SYSCONFDIR=$DSTRAIN_BUNDLE/root/etc/openmpi
export PMIX_PREFIX=$_l/pmix2 PMIX_EXEC_PREFIX=$_l/pmix2 PMIX_LIBDIR=$_l/pmix2/lib
export PMIX_PKGLIBDIR=$_l/pmix2/lib/pmix PMIX_DATADIR=$_l/pmix2/share PMIX_PKGDATADIR=$_l/pmix2/share/pmix
export PMIX_SYSCONFDIR=$_l/pmix2/share
# root in a container, and more ranks than cores on small machines
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
# HDF5: FindHDF5 asks h5cc (relocated: its prefix is where it lies)
export HDF5_ROOT=$_r
# espeak-ng reads $ESPEAK_DATA_PATH/espeak-ng-data
export ESPEAK_DATA_PATH=$_l
# For a cmake command line: the wrappers and tools CMake would otherwise look
# for on the system first.
DSTRAIN_BUNDLE_CMAKE_ARGS="-DMPI_C_COMPILER=$_r/bin/mpicc -DMPIEXEC_EXECUTABLE=$_r/bin/mpiexec -DHDF5_C_COMPILER_EXECUTABLE=$_r/bin/h5cc -DHDF5_DIFF_EXECUTABLE=$_r/bin/h5diff -DPKG_CONFIG_EXECUTABLE=$_r/bin/pkg-config"
export DSTRAIN_BUNDLE_CMAKE_ARGS
# CUPTI copied from the toolkit the bundle was made with (add_cupti): a
# fallback gpu-check.sh uses when the GPU machine has none of its own
if [ -f "$DSTRAIN_BUNDLE/root/cupti/include/cupti.h" ]; then
  export DSTRAIN_BUNDLE_CUPTI=$DSTRAIN_BUNDLE/root/cupti
fi
unset _r _l _d
EOF
  # the folders in reverse order, so that the loop above puts the first first
  sed -i "s#@LIB_DIRS@#$(lib_dirs | tac | paste -sd ' ')#" "$bundle_new/env.sh"
}

# record_glibc: the newest GLIBC_x.y symbol version the bundle's programs and
# libraries need, into env.sh (DSTRAIN_BUNDLE_GLIBC), so that gpu-check.sh
# can say at once that a GPU machine's older C library cannot run them.
record_glibc() {
  local need
  need=$(xargs -d '\n' readelf -V <"$work/elfs" 2>/dev/null | grep -oE 'GLIBC_[0-9]+\.[0-9]+' |
         sed 's/GLIBC_//' | sort -uV | tail -1)
  [ -n "$need" ] || die "no GLIBC symbol version found in the bundle's ELF files"
  echo "DSTRAIN_BUNDLE_GLIBC=$need   # the newest C library symbol version its files need" \
    >>"$bundle_new/env.sh"
  log "the bundle needs glibc $need or newer"
}

# scan_elfs: the ELF files of the bundle ($work/elfs) and every library
# they name as NEEDED ($work/needed).
scan_elfs() {
  local f
  while IFS= read -r f; do is_elf "$f" && echo "$f"; done \
    < <(find "$root" -type f \( -name '*.so*' -o -perm -u+x \)) >"$work/elfs"
  xargs -d '\n' readelf -d <"$work/elfs" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' |
    sort -u >"$work/needed"
}

# lib_dirs: the bundle's folders (relative to root/) that hold a library some
# ELF file needs: LD_LIBRARY_PATH in env.sh. Found, not listed, since some
# live in private folders (libpulse's pulseaudio/, OpenMPI's openmpi/lib).
lib_dirs() {
  find "$root" \( -type f -o -type l \) -name '*.so*' -printf '%h %f\n' |
    awk 'NR == FNR { need[$1] = 1; next } ($2 in need) { print $1 }' "$work/needed" - |
    sed "s#^$root/##" | sort -u
}

# check_closure: every NEEDED library is in the bundle or in BASE_PACKAGES
# (names what is missing); then ldd of every ELF file, with env.sh in a clean
# environment, resolves each library inside the bundle or to a base library,
# never to another system copy (which a missing LD_LIBRARY_PATH folder or a
# RUNPATH of the package's would give here, and fail on the GPU machine).
check_closure() {
  local base=$work/base bad=0 n
  find "$root" \( -type f -o -type l \) -name '*.so*' -printf '%f\n' | sort -u >"$work/have"
  dpkg -L "${BASE_PACKAGES[@]}" 2>/dev/null | grep -E '\.so(\.|$)' | xargs -n1 basename | sort -u >"$base"
  for n in $(comm -23 "$work/needed" <(sort -u "$work/have" "$base")); do
    echo "  nothing in the bundle provides $n, needed by:" \
         "$(xargs -d '\n' grep -l "$n" <"$work/elfs" | sed "s#^$root/##" | head -3 | paste -sd ' ')"
    bad=1
  done
  env -i PATH=/usr/bin:/bin bash -c '
    source "$0/env.sh"
    while IFS= read -r f; do
      ldd "$f" 2>/dev/null | awk -v f="$f" -v b="$DSTRAIN_BUNDLE/" -v basefile="$1" "
        BEGIN { while ((getline l < basefile) > 0) base[l] = 1 }
        \$2 == \"=>\" && \$3 == \"not\" { print \"  \" f \": \" \$1 \" not found\" }
        \$2 == \"=>\" && \$3 ~ /^\\// && index(\$3, b) != 1 && !(\$1 in base) { print \"  \" f \": \" \$1 \" from \" \$3 }"
    done <"$2"' "$bundle_new" "$base" "$work/elfs" >"$work/ldd.bad"
  if [ -s "$work/ldd.bad" ]; then sed "s#$bundle_new/root/##" "$work/ldd.bad" | head -40; bad=1; fi
  return $bad
}

# smoke_test DIR: from a bundle unpacked at DIR (not where it was made; where
# the system has its own OpenMPI, its files must not be the ones used), the wrappers
# answer with bundle paths and mpiexec starts 2 ranks that load libmpi and
# the MCA plugins from the bundle.
smoke_test() {
  local dir=$1
  cat >"$work/hello.c" <<'EOF'
#include <mpi.h>
#include <stdio.h>
#include <string.h>
/* Each rank prints "rank R of N" and writes the OpenMPI files it has mapped
   (libmpi, libopen-*, the mca_* plugins, libpmix) to ARGV[1].R, so that the
   caller can check where they came from. */
int main(int argc, char **argv) {
  int rank, size; char line[4096], name[4096];
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank); MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Barrier(MPI_COMM_WORLD);
  printf("rank %d of %d\n", rank, size);
  snprintf(name, sizeof name, "%s.%d", argc > 1 ? argv[1] : "maps", rank);
  FILE *f = fopen("/proc/self/maps", "r"), *out = fopen(name, "w");
  while (f && out && fgets(line, sizeof line, f)) {
    char *p = strchr(line, '/');
    if (p && (strstr(p, "libmpi") || strstr(p, "libopen-") || strstr(p, "mca_") || strstr(p, "libpmix")))
      fputs(p, out);
  }
  if (f) fclose(f);
  if (out) fclose(out);
  MPI_Finalize();
  return 0;
}
EOF
  # CUPTI: loads and reports the API version the bundle recorded (no GPU needed)
  cat >"$work/cupti_ver.c" <<'EOF'
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
int main(int argc, char **argv) {
  void *h = argc > 1 ? dlopen(argv[1], RTLD_NOW) : NULL;
  if (!h) { printf("dlopen: %s\n", dlerror()); return 1; }
  int (*ver)(uint32_t *) = (int (*)(uint32_t *))dlsym(h, "cuptiGetVersion");
  uint32_t v = 0;
  if (!ver || ver(&v) != 0) { printf("cuptiGetVersion failed\n"); return 1; }
  printf("%u\n", v);
  return 0;
}
EOF
  env -i HOME="$HOME" PATH=/usr/bin:/bin TMPDIR=/tmp WORK="$work" bash -c '
    set -eo pipefail
    source "$0/env.sh"
    fail() { echo "  smoke test: $*" >&2; exit 1; }
    b=$DSTRAIN_BUNDLE
    [ "$(command -v mpicc)" = "$b/root/usr/bin/mpicc" ] || fail "mpicc is $(command -v mpicc)"
    pkg-config --cflags --libs fftw3 sndfile hdf5 ompi-c openblas libcjson libzip >"$WORK/pc.out" || fail "pkg-config failed"
    grep -q -- "-I$b/" "$WORK/pc.out" && ! grep -qE -- "-[IL]/usr/" "$WORK/pc.out" || fail "pkg-config: $(cat "$WORK/pc.out")"
    mpicc --showme | grep -q -- "-I$b/root/usr/lib/x86_64-linux-gnu/openmpi/include" || fail "mpicc --showme: $(mpicc --showme)"
    h5cc -show -shlib | grep -q -- "-I$b/root/usr/include/hdf5/serial" || fail "h5cc -show: $(h5cc -show -shlib)"
    ompi_info --parsable --path pkglibdir | grep -q ":$b/" || fail "ompi_info: $(ompi_info --parsable --path pkglibdir)"
    mpicc -o "$WORK/hello" "$WORK/hello.c" || fail "mpicc could not build an MPI program"
    timeout 60 mpiexec -np 2 "$WORK/hello" "$WORK/maps" >"$WORK/hello.out" 2>&1 || fail "mpiexec -np 2: $(cat "$WORK/hello.out")"
    [ "$(grep -c "^rank [01] of 2$" "$WORK/hello.out")" -eq 2 ] || fail "2 ranks did not report: $(cat "$WORK/hello.out")"
    sort -u "$WORK"/maps.[01] >"$WORK/maps"
    grep -q "/mca_" "$WORK/maps" || fail "no MCA plugin was loaded"
    if grep -v "^$b/" "$WORK/maps"; then fail "OpenMPI files loaded from outside the bundle (above)"; fi
    # speech: espeak-ng with the bundle voices, sox with its FLAC plugin
    espeak-ng --version | grep -q "Data at: $b/" || fail "espeak-ng: $(espeak-ng --version)"
    espeak-ng -v en-gb-x-gbcwmd+m5 -s 165 -p 45 --stdout "a bundle" |
      LD_DEBUG=files sox -D -V1 -t wav - -c 1 -b 16 -e signed-integer "$WORK/a.flac" rate -h 16000 2>"$WORK/sox.debug" ||
      fail "espeak-ng | sox failed: $(grep -v "^ *[0-9]*:" "$WORK/sox.debug")"
    grep -q "file=$b/.*/libsox_fmt_flac.so" "$WORK/sox.debug" || fail "sox did not load the bundle FLAC plugin"
    [ "$(soxi -r "$WORK/a.flac")" = 16000 ] || fail "soxi: $(soxi "$WORK/a.flac" 2>&1)"
    if [ -n "${DSTRAIN_BUNDLE_CUPTI:-}" ]; then
      gcc -o "$WORK/cupti_ver" "$WORK/cupti_ver.c" -ldl || fail "could not build the CUPTI check"
      v=$("$WORK/cupti_ver" "$DSTRAIN_BUNDLE_CUPTI/lib/libcupti.so") || fail "the bundle libcupti does not load: $v"
      grep -q "^CUPTI API $v " "$DSTRAIN_BUNDLE_CUPTI/VERSION" || fail "libcupti reports API $v; VERSION: $(cat "$DSTRAIN_BUNDLE_CUPTI/VERSION")"
      echo "  smoke test: the bundle libcupti loads (CUPTI API $v)"
    fi
    echo "  smoke test: pkg-config, mpicc, h5cc, ompi_info, espeak-ng, sox answer with $b;"
    echo "  smoke test: mpiexec -np 2 ran; libmpi and $(grep -c "/mca_" "$WORK/maps") MCA plugins loaded, all from the bundle"
  ' "$dir"
}

make_bundle() {
  [ "$(dpkg --print-architecture 2>/dev/null)" = amd64 ] || die "needs a Debian amd64 machine (dpkg)"
  grep -q 'VERSION_CODENAME=bookworm' /etc/os-release || echo "$prog: warning: not Debian 12 (bookworm): the list was made there" >&2
  for t in apt-get apt-cache dpkg dpkg-deb readelf xz tar gcc realpath; do
    command -v "$t" >/dev/null || die "'$t' not found"
  done
  work=$(mktemp -d /tmp/gpu-bundle.XXXXXX)
  trap 'rm -rf "$work" "${bundle_new:-}"' EXIT
  bundle_new=$bundle.new.$$
  root=$bundle_new/root
  mkdir -p "$root"

  download
  log "unpacking ${#PACKAGES[@]} packages"
  unpack
  alternatives
  prune
  fix_symlinks
  relocate
  wrap_sox
  add_cupti
  scan_elfs
  write_env
  record_glibc

  log "checking that every ELF file's libraries are in the bundle"
  check_closure || die "the bundle is not closed (above); add the packages that ship those libraries"

  # swap in, then pack what travels
  rm -rf "$bundle"; mv "$bundle_new" "$bundle"; bundle_new=
  log "packing $archive"
  tar -C "$(dirname "$bundle")" -cf - "$(basename "$bundle")" | xz -T0 -6 >"$archive.tmp"
  mv "$archive.tmp" "$archive"
  # the stamp by which gpu-check.sh knows the folder is this archive unpacked
  stat -c '%s %Y' "$archive" >"$bundle/.archive"

  log "smoke test from a copy unpacked elsewhere"
  mkdir -p "$work/elsewhere"
  tar -C "$work/elsewhere" -xJf "$archive"
  smoke_test "$work/elsewhere/$(basename "$bundle")" || die "smoke test failed"

  local unpacked packed
  unpacked=$(du -sm "$bundle" | cut -f1)
  packed=$(stat -c %s "$archive")
  log "bundle: $(wc -l <"$bundle/PACKAGES.txt") packages, ${unpacked} MiB unpacked in $bundle"
  log "archive: $((packed / 1048576)) MiB ($packed bytes) in $archive (limit $limit_mib MiB)"
  [ "$packed" -le $((limit_mib * 1048576)) ] || die "the archive is over $limit_mib MiB"
}

case "${1:-}" in
  -h|--help) usage ;;
  --discover) shift; discover "$@" ;;
  "") make_bundle ;;
  *) echo "$prog: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
esac
