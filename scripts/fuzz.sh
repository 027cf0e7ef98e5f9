#!/usr/bin/env bash
# Fuzzes the readers of untrusted input with libFuzzer under ASan+UBSan
# (tests/fuzz, docs/testing.md).
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]
#
# SECONDS per target (default 60); TARGETs are yaml-model, textual-ir,
# checkpoint, npy, csv, idx, onnx (default: all). Builds the targets with clang-14
# in build-fuzz/ (AMPC_FUZZ=ON, CUDA off), fuzzes each for SECONDS on a copy
# of its seed corpus, prints executions and coverage per target, and fails
# when a target crashed, leaked, hung or ran out of memory: the input that did
# it is in build-fuzz/fuzz-runs/TARGET/ (replay it with
# build-fuzz/bin/fuzz-TARGET FILE). New inputs the fuzzer found stay in
# build-fuzz/fuzz-runs/TARGET/corpus/, where the next run starts from them
# (the committed corpus is not touched; delete fuzz-runs/ to start afresh).
#
# Environment: AMPC_FUZZ_BUILD (build dir, default build-fuzz), AMPC_FUZZ_JOBS
# (build jobs, default 2).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
seconds=${1:-60}
[[ $# -gt 0 ]] && shift
all=(yaml-model textual-ir checkpoint npy csv idx onnx)
targets=("$@")
[[ ${#targets[@]} -eq 0 ]] && targets=("${all[@]}")
for t in "${targets[@]}"; do
  [[ " ${all[*]} " == *" $t "* ]] || { echo "fuzz.sh: unknown target '$t' (one of: ${all[*]})" >&2; exit 2; }
done
[[ $seconds =~ ^[0-9]+$ && $seconds -gt 0 ]] || { echo "fuzz.sh: SECONDS must be a positive integer" >&2; exit 2; }
build=${AMPC_FUZZ_BUILD:-$root/build-fuzz}
jobs=${AMPC_FUZZ_JOBS:-2}

# clang 14 and its runtimes: libFuzzer and the sanitizers come with
# libclang-rt-14-dev, OpenMP for clang with libomp-14-dev, the symbolizer
# for readable stack traces with llvm-14.
"$root/scripts/install-deps.sh" >/dev/null
need=()
for p in clang-14 libclang-rt-14-dev libomp-14-dev llvm-14; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
done
if [[ ${#need[@]} -gt 0 ]]; then
  echo "fuzz.sh: installing ${need[*]}"
  SUDO=""; [[ $(id -u) -ne 0 ]] && SUDO=sudo
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}"
fi

san="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
mkdir -p "$build"
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 \
  -DCMAKE_C_FLAGS="$san" -DCMAKE_CXX_FLAGS="$san" \
  -DCMAKE_EXE_LINKER_FLAGS="$san" -DCMAKE_SHARED_LINKER_FLAGS="$san" \
  -DAMPC_FUZZ=ON -DAMPC_WITH_CUDA=OFF -DAMPC_BUILD_BENCH=OFF >"$build/configure.log" 2>&1 \
  || { cat "$build/configure.log"; exit 1; }
cmake --build "$build" -j"$jobs" --target "${targets[@]/#/fuzz-}"

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export ASAN_SYMBOLIZER_PATH=${ASAN_SYMBOLIZER_PATH:-/usr/lib/llvm-14/bin/llvm-symbolizer}
runs=$build/fuzz-runs
failed=()
summary=()
for t in "${targets[@]}"; do
  out=$runs/$t
  # The corpus of an earlier run is kept, so runs add up; the committed
  # seeds are copied in anew (a seed changed since is picked up).
  mkdir -p "$out/corpus"
  find "$out" -maxdepth 1 -type f -delete
  cp -r tests/fuzz/corpus/"$t"/. "$out/corpus/"
  echo "== fuzz-$t for ${seconds}s"
  # -timeout: one input running 10 s is a hang; -rss_limit_mb: a blow-up.
  # -max_len: the seeds are small; 64 KiB leaves room to grow.
  rc=0
  "$build/bin/fuzz-$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 \
    -max_len=65536 -print_final_stats=1 -artifact_prefix="$out/" "$out/corpus" \
    >"$out/log" 2>&1 || rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$out/log" | tail -1)
  last=$(grep -E '^#[0-9]+' "$out/log" | tail -1 || true)
  cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
  ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
  units=$(find "$out/corpus" -type f | wc -l)
  artifacts=$(find "$out" -maxdepth 1 -type f \( -name 'crash-*' -o -name 'leak-*' -o \
    -name 'timeout-*' -o -name 'oom-*' -o -name 'slow-unit-*' \) | wc -l)
  status=ok
  if [[ $rc -ne 0 || $artifacts -gt 0 ]]; then
    status="FAILED (exit $rc, see $out/log)"
    failed+=("$t")
    tail -40 "$out/log"
  fi
  summary+=("$(printf '%-12s execs %-10s cov %-6s ft %-7s corpus %-6s %s' "$t" "${execs:-?}" \
    "${cov:-?}" "${ft:-?}" "$units" "$status")")
done

echo
echo "fuzz.sh: ${seconds}s per target"
printf '%s\n' "${summary[@]}"
if [[ ${#failed[@]} -gt 0 ]]; then
  echo "fuzz.sh: ${failed[*]} failed" >&2
  exit 1
fi
