#!/usr/bin/env bash
# The CUDA backend's first-run checklist (docs/cuda.md), as one script for a
# borrowed GPU machine: device facts, the CUDA unit tests, the CLI at O0-O3
# with graphs on and off and f16, two data-parallel ranks (NCCL, or the host
# route on one GPU), compute-sanitizer, the real-models zoo's host-fallback
# census and the PyTorch comparison (the seeds, the transformer, the BERT
# layer, and ResNet-50 and a GPT imported from ONNX). Every step has its own
# time limit and logs to $LOG_DIR; the summary at the end says which failed.
#   scripts/gpu-checklist.sh [--devkit .devkit/ampc-devkit.tar.xz | --build-dir DIR]
#                            [--quick] [--skip STEP,...]
# --quick: shorter time limits, and the sanitizers over fewer tests.
# Steps: facts tests cli census dist bench sanitizer profile. Exit status: the
# number of failed steps. The imported models (census, and the bench's
# resnet50 and gpt) are made here by `bench/gpu/prepare_imported.py prepare
# --zoo --bench --out .gpuwork` without their weights; the checklist fills
# them in first ($IMPORTED, default .gpuwork, or .gpuwork.tar.xz unpacked).
# BENCH_WORKLOADS (comma-separated) picks the bench's workloads and their order.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
devkit="" bin="" quick=0 skip=""
SANITIZE_ALL=${SANITIZE_ALL:-} SANITIZE_ONE=${SANITIZE_ONE:-} DIST_CUDA_ONLY=${DIST_CUDA_ONLY:-} SANITIZE_FLAGS=${SANITIZE_FLAGS:-}
while [ $# -gt 0 ]; do
  case "$1" in
    --devkit) devkit=$2; shift 2 ;;
    --build-dir) bin=$2/bin; shift 2 ;;
    --quick) quick=1; shift ;;
    --skip) skip=$2; shift 2 ;;
    *) echo "usage: $0 [--devkit ARCHIVE | --build-dir DIR] [--quick] [--skip STEPS]" >&2; exit 2 ;;
  esac
done
LOG_DIR=${LOG_DIR:-${OUT:-/tmp/ampc-gpu-checklist}}
mkdir -p "$LOG_DIR"
if [ -n "$devkit" ]; then
  tar -xJf "$devkit" -C "$root" || exit 1
  bin=$root/devkit/bin
  # cuBLAS and cuDNN come from the machine: the toolkit's or PyTorch's wheels.
  libs=$root/devkit/lib
  for d in /usr/local/cuda/lib64 /usr/local/cuda/lib $(python3 -c 'import nvidia, os; p = nvidia.__path__[0]; print(" ".join(os.path.join(p, d, "lib") for d in os.listdir(p)))' 2>/dev/null); do
    [ -d "$d" ] && libs=$libs:$d
  done
  export LD_LIBRARY_PATH=$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  # The tests find the examples through the source path they were built in.
  src=$(cat "$root/devkit/SOURCE_DIR")
fi
bin=${bin:-$root/build-cuda/bin}
IMPORTED=${IMPORTED:-$root/.gpuwork}
if [ ! -d "$IMPORTED" ] && [ -f "$root/.gpuwork.tar.xz" ]; then
  tar -xJf "$root/.gpuwork.tar.xz" -C "$root"
fi
export bin quick root IMPORTED SANITIZE_ALL SANITIZE_ONE SANITIZE_FLAGS DIST_CUDA_ONLY
failed=()
run_step() {  # name limit command...
  local name=$1 limit=$2; shift 2
  case ",$skip," in *",$name,"*) echo "== $name: skipped"; return ;; esac
  echo "== $name (limit ${limit}s)"
  local start=$SECONDS
  # Shell functions run in a child bash, which timeout can stop.
  if declare -F "$1" >/dev/null; then set -- bash -c "$(declare -f "$1"); $1"; fi
  timeout -k 5 "$limit" "$@" >"$LOG_DIR/$name.log" 2>&1
  local rc=$?
  tail -n 25 "$LOG_DIR/$name.log"
  echo "== $name: rc $rc, $((SECONDS - start)) s"
  [ $rc -eq 0 ] || failed+=("$name(rc $rc)")
}
facts() {
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm --format=csv
  grep PRETTY /etc/os-release; ldd --version | head -1
  echo "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"
  ldd "$bin/ampc-unit-tests" | grep -E 'not found|cudnn|cublas|cudart'
  ! ldd "$bin/ampc-unit-tests" | grep -q 'not found'
}
cli() {
  set -e
  "$bin/ampc" --run forward --batch 4 examples/mlp.yaml
  "$bin/ampc" --device cuda --run forward examples/convnet-cpu.yaml
  for level in O0 O1 O2 O3; do
    "$bin/ampc" --device cuda --opt-level $level --steps 20 examples/convnet-cpu.yaml
  done
  AMPC_CUDA_SYNC=1 "$bin/ampc" --device cuda --opt-level O2 --steps 3 examples/convnet-cpu.yaml
  AMPC_CUDA_GRAPHS=0 "$bin/ampc" --device cuda --opt-level O2 --steps 20 examples/convnet-cpu.yaml
  "$bin/ampc" --device cuda --opt-level O2 --half-type f16 --steps 20 examples/convnet-cpu.yaml
  "$bin/ampc" --device cuda --opt-level O1 --steps 10 examples/transformer.yaml
  CUDA_LAUNCH_BLOCKING=1 "$bin/ampc" --device cuda --opt-level O2 --steps 5 examples/mlp.yaml
}
census() {
  # Every zoo model and example, three steps at O0 and O2 on the GPU and O0
  # on the CPU: host-fallback nodes per model and op, and the GPU's losses
  # against the CPU's.
  set -e
  if [ ! -d "$IMPORTED/zoo" ]; then
    echo "no imported models at $IMPORTED: bench/gpu/prepare_imported.py prepare --zoo --bench"
    return 1
  fi
  python3 bench/gpu/zoo_census.py --ampc "$bin/ampc" --root "$IMPORTED/zoo" --jobs 4 \
    --json "$LOG_DIR/census.json" examples/mlp.yaml examples/convnet-cpu.yaml \
    examples/transformer.yaml examples/resnet.yaml examples/mobilenetv2.yaml
}
dist() {
  # Two ranks on this machine's GPUs: NCCL with one GPU per rank, the host
  # route when they share one (tests/dist/check_data_parallel.py's `cuda`
  # check prints which and compares with one process).
  set -e
  if ! command -v mpirun >/dev/null && [ -d "$root/devkit/mpi" ]; then
    # The devkit's Open MPI (pack-devkit.sh): its plugins and help texts
    # copied to Debian's paths, where it looks for them, without overwriting
    # anything the image has; its programs run from the devkit.
    (cd "$root/devkit/mpi" && find etc usr/lib usr/share -type d -exec mkdir -p /{} \; &&
      find etc usr/lib usr/share ! -type d -exec cp -an {} /{} \;)
    export PATH=$PATH:$root/devkit/mpi/usr/bin
    export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$root/devkit/mpi-lib
    echo "mpirun: the devkit's Open MPI $(ompi_info --version 2>/dev/null | head -1)"
  fi
  if ! command -v mpirun >/dev/null; then
    echo "mpirun: not on this machine (Open MPI); the dist step needs it"
    return 1
  fi
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  # Sandboxed machines (gVisor) may refuse cross-process memory reads and
  # core binding: copy through shared memory, bind nothing.
  export OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_MCA_hwloc_base_binding_policy=none
  mpirun --oversubscribe -np 2 "$bin/ampc" --device cuda --opt-level O2 --steps 20 \
    --threads 1 examples/mlp.yaml
  # Every data-parallel check (the CPU ones too: they cover the devkit's
  # Open MPI), the cuda one last.
  python3 tests/dist/check_data_parallel.py --ampc "$bin/ampc" --mpirun "$(command -v mpirun)" \
    --inputs "$root/tests/dist/Inputs" ${DIST_CUDA_ONLY:+--cuda-only}
}
sanitizer() {
  # memcheck over every op and the graph replay; racecheck and synccheck
  # (slower) over the ops in one dtype: the shared-memory sums are there.
  # SANITIZE_ALL / SANITIZE_ONE (gtest filters) replace the two sets;
  # SANITIZE_FLAGS adds options. NCCL's set-up probes kernels it did not
  # build for this device and handles the errors (209 from
  # cudaFuncGetAttributes in ncclInitKernelsForDevice): memcheck reports them
  # as API errors unless SANITIZE_FLAGS='--report-api-errors no'.
  local all='*CudaOpEquivalence*:CudaGraphTest.Replaying*'
  [ $quick -eq 1 ] || all="$all:CudaTrainingTest*"
  all=${SANITIZE_ALL:-$all}
  local one=${SANITIZE_ONE:-'*CudaOpEquivalence*/bf16'}
  local rc=0
  for tool in memcheck racecheck synccheck; do
    local filter=$one
    [ $tool = memcheck ] && filter=$all
    echo "-- compute-sanitizer --tool $tool ($filter)"
    compute-sanitizer --tool $tool --error-exitcode 9 --print-limit 20 ${SANITIZE_FLAGS:-} \
      "$bin/ampc-unit-tests" --gtest_filter="$filter" --gtest_brief=1 || rc=1
  done
  return $rc
}
profile() {
  # Each node's device time: AMPC_CUDA_SYNC=1 waits for a node's kernels
  # inside the timed call, and graphs are off so that every step runs the
  # nodes one by one. nsys, where the machine has it, adds the kernels.
  set -e
  # The workloads of bench/gpu/compare_pytorch_gpu.py.
  for model in gpu/mlp-4096 convnet; do
    for level in O0 O2; do
      echo "-- $model $level"
      AMPC_CUDA_SYNC=1 AMPC_CUDA_GRAPHS=0 "$bin/ampc" --device cuda --opt-level $level \
        --half-type f16 --steps 12 --profile --progress none examples/$model.yaml
    done
  done
  if command -v nsys >/dev/null; then
    nsys profile -o "$LOG_DIR/mlp-O2" --force-overwrite true "$bin/ampc" --device cuda \
      --opt-level O2 --half-type f16 --steps 30 --progress none examples/gpu/mlp-4096.yaml >/dev/null
    nsys stats -q --report cuda_gpu_kern_sum,cuda_gpu_mem_time_sum,cuda_api_sum \
      "$LOG_DIR/mlp-O2.nsys-rep" | cut -c1-200 | head -n 120
  else
    echo "nsys: not on this machine"
  fi
}
if [ -n "${src:-}" ] && [ ! -e "$src" ]; then
  mkdir -p "$(dirname "$src")" && ln -sfn "$root" "$src"
fi
run_step facts 30 facts
if [ -d "$IMPORTED" ]; then  # the imported models' weights, before census and bench
  python3 bench/gpu/prepare_imported.py fill "$IMPORTED" || failed+=("fill")
fi
q() { [ $quick -eq 1 ] && echo "$1" || echo "$2"; }
# Parameterised suites are named Instance/Suite: hence the leading '*'.
run_step tests $(q 150 300) "$bin/ampc-unit-tests" --gtest_filter='*Cuda*:*FakeDevice*' --gtest_brief=1
run_step cli $(q 90 180) cli
run_step census $(q 150 300) census
run_step dist $(q 180 300) dist
run_step bench $(q 240 600) python3 bench/gpu/compare_pytorch_gpu.py --build-dir "$(dirname "$bin")" \
  ${BENCH_WORKLOADS:+--workloads "$BENCH_WORKLOADS"} \
  --imported "$IMPORTED/bench"
run_step sanitizer $(q 100 400) sanitizer
run_step profile $(q 150 300) profile
echo "== failed steps: ${failed[*]:-none}"
exit ${#failed[@]}
