#!/usr/bin/env bash
# Installs, idempotently, every Debian package ampc needs to build and test.
# Packages already present are skipped, so a second run does nothing and needs no network.
set -euo pipefail

packages=(
  cmake ninja-build g++ pkg-config
  llvm-14-dev llvm-14-tools   # LLVM ADT/Support, FileCheck, not, count, lit
  libyaml-cpp-dev             # model files
  libcli11-dev                # command line
  googletest libgtest-dev libgmock-dev libbenchmark-dev
  libdnnl-dev ocl-icd-opencl-dev   # oneDNN (its CMake config needs OpenCL headers)
  libomp-dev
  python3
  libonnx-dev libprotobuf-dev # the ONNX frontend (frontends/onnx)
  python3-torch               # the PyTorch oracle (tests/pytorch), run by CI
  libopenblas0-pthread        # the BLAS a PyTorch user has (bench/compare_pytorch.py's peer)
  python3-torchvision python3-onnx  # ONNX cross-checks (tests/onnx): exports, helper-built models
  libonnx-testdata            # ONNX's own node tests (tests/onnx/check_conformance.py)
  graphviz libgraphviz-dev    # ampc view lays graphs out (libgvc); tests check --emit dot with dot
  chromium                    # ampc view's page is tested in headless Chromium (tests/view)
  libopenmpi-dev openmpi-bin  # data-parallel training across processes (runtime/dist, mpirun)
  libjpeg62-turbo-dev libpng-dev  # image folders (runtime/data): JPEG and PNG decoding
  python3-pil                 # the PIL oracle of image decoding and resizing (tests/data)
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
