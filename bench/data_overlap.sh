#!/usr/bin/env bash
# How much of a training step waits for its data: each workload trained with
# the batches prefetched on a worker thread (the default) and made inside the
# step (--no-prefetch), in one invocation, rounds interleaved. One line per
# figure: mean step time, of which waiting for data, and the rest (compute).
#
#   bench/data_overlap.sh [AMPC] [ROUNDS]      (AMPC default build/bin/ampc)
#
# A second binary to compare (say, a build of an older commit) goes in
# BASELINE=path; its rows are labelled "baseline". Timings need a quiet
# machine; compare rows of one run only.
set -euo pipefail
cd "$(dirname "$0")/.."
ampc=${1:-build/bin/ampc}
rounds=${2:-3}
workloads=("examples/mlp.yaml -O O1 --steps 100"
           "examples/mlp.yaml -O O2 --steps 100"
           "examples/convnet-cpu.yaml -O O2 --steps 40"
           "examples/transformer.yaml -O O2 --steps 40")
echo "# machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores;" \
     "load $(cut -d' ' -f1-3 /proc/loadavg); threads ${OMP_NUM_THREADS:-default}"
echo "# workload | variant | mean step ms | waiting for data ms | compute ms"
run() { # binary, label, workload, extra flags
  local line
  # shellcheck disable=SC2086
  line=$("$1" $3 --progress none $4 | grep '^mean step time')
  local step data
  step=$(echo "$line" | sed -E 's/mean step time ([0-9.]+) ms.*/\1/')
  data=$(echo "$line" | sed -E 's/.*of which [a-z ]+ ([0-9.]+) ms/\1/')
  awk -v w="$3" -v v="$2" -v s="$step" -v d="$data" \
    'BEGIN { printf "%-44s | %-11s | %8.2f | %8.2f | %8.2f\n", w, v, s, d, s - d }'
}
for ((r = 1; r <= rounds; r++)); do
  echo "# round $r"
  for w in "${workloads[@]}"; do
    run "$ampc" prefetch "$w" ""
    run "$ampc" no-prefetch "$w" "--no-prefetch"
    if [ -n "${BASELINE:-}" ]; then run "$BASELINE" baseline "$w" ""; fi
  done
done
