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
# The tests find examples/ through the source path they were compiled with.
grep -m1 '^CMAKE_HOME_DIRECTORY' "$build/CMakeCache.txt" | cut -d= -f2 >"$stage/devkit/SOURCE_DIR"
mkdir -p "$root/.devkit"
tar -C "$stage" -cJf "$root/.devkit/ampc-devkit.tar.xz" devkit
ls -la "$root/.devkit/ampc-devkit.tar.xz"
