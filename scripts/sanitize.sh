#!/usr/bin/env bash
# Builds everything with AddressSanitizer and UndefinedBehaviorSanitizer and
# runs the unit, lit and fuzz-regression tests, and the data-parallel tests
# under mpirun without leak checking (docs/testing.md).
#
#   scripts/sanitize.sh [CTEST_ARGS...]
#
# Uses GCC (the compiler CI builds with; AMPC_SANITIZE_CC=clang for clang-14)
# in build-asan/, with the CUDA backend off: nvcc does not take the host
# sanitizer flags, and there is no GPU to run it on here. Any sanitizer
# report fails the test it happens in (-fno-sanitize-recover, halt_on_error).
#
# Environment: AMPC_SANITIZE_BUILD (build dir, default build-asan),
# AMPC_SANITIZE_JOBS (build and test jobs, default 2), AMPC_SANITIZE_TARGETS
# (space-separated build targets, default all: on 2 cores the whole
# instrumented build takes more than an hour, so a session that only needs
# the unit tests builds `ampc-unit-tests` and runs `-L unit -R ...`),
# AMPC_SANITIZE_OPT (optimization flags, default `-O1 -g1`: line tables are
# enough for the reports' stack traces, and on 2 cores -O2 -g makes the
# instrumented build take more than two hours).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
build=${AMPC_SANITIZE_BUILD:-$root/build-asan}
jobs=${AMPC_SANITIZE_JOBS:-2}
"$root/scripts/install-deps.sh" >/dev/null

compilers=(-DCMAKE_C_COMPILER=gcc -DCMAKE_CXX_COMPILER=g++)
if [[ ${AMPC_SANITIZE_CC:-gcc} == clang ]]; then
  compilers=(-DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14)
fi
san="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
opt=${AMPC_SANITIZE_OPT:--O1 -g1}
mkdir -p "$build"
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=None "${compilers[@]}" \
  -DCMAKE_C_FLAGS="$san $opt" -DCMAKE_CXX_FLAGS="$san $opt" \
  -DCMAKE_EXE_LINKER_FLAGS="$san" -DCMAKE_SHARED_LINKER_FLAGS="$san" \
  -DAMPC_WITH_CUDA=OFF -DAMPC_BUILD_BENCH=OFF >"$build/configure.log" 2>&1 \
  || { cat "$build/configure.log"; exit 1; }
targets=()
for t in ${AMPC_SANITIZE_TARGETS:-}; do
  targets+=(--target "$t")
done
cmake --build "$build" -j"$jobs" "${targets[@]}"

# allocator_may_return_null: an impossible allocation throws std::bad_alloc,
# as it does without ASan, so the tests that expect "out of memory" as an
# error see one (ASan would otherwise abort on a huge request).
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1:abort_on_error=0}
# Graphviz's and fontconfig's process-lifetime caches (scripts/lsan-suppressions.txt).
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$root/scripts/lsan-suppressions.txt:print_suppressions=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
# The unit, lit and fuzz-regression tests: install-embed builds a program
# without ASan against the instrumented library, and pytorch-forward tests
# numerics, not memory.
ctest --test-dir "$build" --output-on-failure -j"$jobs" -L 'unit|lit|fuzz' "$@"
# The data-parallel tests under mpirun (label dist): ASan and UBSan on, leak
# checking off. Open MPI leaks at MPI_Finalize, from components it has
# unloaded by then (no symbols to suppress them by); our code's leaks are
# checked by the unit tests above (DataParallelTest, CommunicatorTest).
if ctest --test-dir "$build" -N -L dist | grep -q 'Total Tests: [1-9]'; then
  ASAN_OPTIONS=${ASAN_OPTIONS/detect_leaks=1/detect_leaks=0} \
    ctest --test-dir "$build" --output-on-failure -j1 -L dist "$@"
fi
