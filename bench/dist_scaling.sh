#!/usr/bin/env bash
# Data-parallel scaling on this machine (docs/distributed.md): each workload
# trained by one process of batch 2B on 2 threads, and by `mpirun -np 2`
# ranks of batch B on 1 thread each (the same global batch, the same cores),
# rounds interleaved. One line per figure: mean step time, samples per
# second, the gradient bytes all-reduced per step, and the all-reduce's time
# per step from rank 0's --profile (the collective blocks: none of it is
# hidden behind the backward, and it includes waiting for the slower rank).
#
#   bench/dist_scaling.sh [AMPC] [ROUNDS]      (AMPC default build/bin/ampc)
#
# Timings need a quiet machine; compare rows of one run only.
set -euo pipefail
cd "$(dirname "$0")/.."
ampc=${1:-build/bin/ampc}
rounds=${2:-2}
# workload | global batch | steps
workloads=("examples/mlp.yaml -O O0|256|40"
           "examples/mlp.yaml -O O2|256|40"
           "examples/mlp.yaml -O O2 --allreduce-dtype half|256|40"
           "examples/convnet-cpu.yaml -O O2|64|10"
           "examples/convnet-cpu.yaml -O O2 --sync-batchnorm|64|10")
mpirun=(mpirun --allow-run-as-root --oversubscribe --bind-to core -np 2)
echo "# machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores;" \
     "load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# workload | ranks x threads | mean step ms | samples/s | all-reduce bytes/step | all-reduce ms/step | hidden"
run() { # label, global batch, command...
  local label=$1 batch=$2
  shift 2
  local out step bytes reduce
  out=$("$@" --progress none --profile 2>&1) || { echo "$label: failed"; echo "$out" | tail -5; return; }
  step=$(echo "$out" | sed -nE 's/^mean step time ([0-9.]+) ms.*/\1/p')
  bytes=$(echo "$out" | sed -nE 's/.* ([0-9]+) bytes of gradients per optimizer step.*/\1/p')
  reduce=$(echo "$out" | awk '$1 == "all_reduce" && NF >= 4 { print $3; exit }')
  awk -v w="$label" -v s="$step" -v b="$batch" -v by="${bytes:-0}" -v r="${reduce:-0}" \
    'BEGIN { printf "%-58s | %8.2f | %9.0f | %10d | %7.2f | %s\n", w, s, 1000 * b / s, by, r, (by > 0 ? "0%" : "-") }'
}
for ((round = 1; round <= rounds; round++)); do
  echo "# round $round"
  for w in "${workloads[@]}"; do
    IFS='|' read -r args batch steps <<< "$w"
    # --sync-batchnorm needs ranks; one process runs plain batchnorm over its batch.
    single=${args/ --sync-batchnorm/}
    # shellcheck disable=SC2086
    run "$single | 1 x 2" "$batch" "$ampc" $single --batch "$batch" --steps "$steps" --threads 2
    # shellcheck disable=SC2086
    run "$args | 2 x 1" "$batch" "${mpirun[@]}" "$ampc" $args --batch $((batch / 2)) --steps "$steps" --threads 1
  done
done
