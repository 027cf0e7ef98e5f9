#!/usr/bin/env bash
# Packs binaries built here, with the shared libraries a bare GPU machine
# lacks, into one archive: .devkit/ampc-devkit.tar.xz. For GPU machines whose
# image has CUDA, cuBLAS and cuDNN but not Debian's yaml-cpp, oneDNN, ONNX or
# graphviz. The CUDA libraries (cuBLAS, cuDNN) stay behind: they are hundreds
# of megabytes and the GPU machine has its own; libcudart travels because it
# is small and must be at least the version we compiled against.
#   scripts/pack-devkit.sh [BUILD_DIR] [BINARY...]
# scripts/gpu-checklist.sh unpacks it. docs/cuda.md says how the two are used.
set -euo pipefail
build=${1:-build}
shift || true
binaries=("$@")
[ ${#binaries[@]} -gt 0 ] || binaries=(ampc ampc-unit-tests)
root=$(cd "$(dirname "$0")/.." && pwd)
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/devkit/bin" "$stage/devkit/lib"
for b in "${binaries[@]}"; do
  strip -o "$stage/devkit/bin/$b" "$build/bin/$b"
done
# Every library the binaries load, except the C runtime (the target's is as
# new or newer) and the CUDA math libraries (the target brings its own).
for b in "${binaries[@]}"; do ldd "$build/bin/$b"; done |
  awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u |
  grep -Ev '/(libc|libm|libdl|libpthread|librt|libstdc\+\+|libgcc_s)\.so|libcublas|libcudnn' |
  while read -r lib; do cp -L "$lib" "$stage/devkit/lib/"; done
# Open MPI's runtime (mpirun, its plugins, help texts and PMIx), for the
# checklist's two-rank step: the GPU image has no MPI. Files keep their
# absolute Debian paths under devkit/mpi/ and gpu-checklist.sh copies them into
# place there (no-clobber; Debian's paths are under .../openmpi and .../pmix2,
# which an image without Open MPI does not have). Libraries that only they need
# go to mpi-lib/, which only the two-rank step puts on the library path: they
# are older than the image's own copies of some (zlib, libudev).
if ldd "$build/bin/ampc" | grep -q libmpi && command -v dpkg >/dev/null; then
  mkdir -p "$stage/devkit/mpi" "$stage/devkit/mpi-lib"
  dpkg -L openmpi-bin libopenmpi3 openmpi-common libpmix2 |
    grep -Ev '/(doc|man|lintian)/' | grep -E 'openmpi|pmix|/usr/bin/(orterun|orted|ompi_info)$|libmpi\.so|libopen-(rte|pal)' |
    while read -r f; do [ -f "$f" ] || [ -L "$f" ] && echo "$f"; done |
    tar -C / -cf - --no-recursion -P -T - 2>/dev/null | tar -C "$stage/devkit/mpi" -xf -
  ln -sf orterun "$stage/devkit/mpi/usr/bin/mpirun"
  find "$stage/devkit/mpi" -type f \( -name '*.so*' -o -path '*/bin/*' \) -exec ldd {} \; 2>/dev/null |
    awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u |
    grep -Ev '/(libc|libm|libdl|libpthread|librt|libstdc\+\+|libgcc_s)\.so|openmpi|pmix|libcuda|libnvidia' |
    while read -r lib; do
      [ -e "$stage/devkit/lib/$(basename "$lib")" ] || cp -L "$lib" "$stage/devkit/mpi-lib/"
    done
fi
# The tests find examples/ through the source path they were compiled with.
grep -m1 '^CMAKE_HOME_DIRECTORY' "$build/CMakeCache.txt" | cut -d= -f2 >"$stage/devkit/SOURCE_DIR"
mkdir -p "$root/.devkit"
tar -C "$stage" -cJf "$root/.devkit/ampc-devkit.tar.xz" devkit
ls -la "$root/.devkit/ampc-devkit.tar.xz"
